#include "sim/trace.h"

#include <fmt/format.h>

#include <map>

namespace tpu::sim {

namespace {

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string TraceRecorder::render(const std::string& processName, const std::vector<std::string>& slotNames) const {
  double usPerCycle = 1e6 / clockHz_;
  std::map<uint32_t, std::string> tracks;  // ordered: deterministic output
  for (const Event& e : events_) {
    if (tracks.count(e.track)) continue;
    std::string name;
    if (e.track == kStallTrack) name = "issue stalls";
    else if (e.track >= 500) name = fmt::format("dma engine {}", e.track - 500);
    else if (e.track >= 400) name = fmt::format("mxu{}", e.track - 400);
    else {
      uint32_t cls = (e.track - 100) / 16, idx = (e.track - 100) % 16;
      name = fmt::format("{}{}", cls < slotNames.size() ? slotNames[cls] : "slot", idx);
    }
    tracks.emplace(e.track, std::move(name));
  }
  std::string out;
  out.reserve(events_.size() * 110 + 4096);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"tpu-sim\"},\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":";
  appendJsonString(out, processName);
  out += "}}";
  for (const auto& [tid, name] : tracks) {
    out += fmt::format(",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":", tid);
    appendJsonString(out, name);
    out += fmt::format("}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{"
                       "\"sort_index\":{}}}}}",
                       tid, tid);
  }
  for (const Event& e : events_) {
    out += ",\n{\"name\":";
    appendJsonString(out, e.name);
    out += fmt::format(",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.6f},\"dur\":{:.6f},\"args\":{{\"bundle\":{}",
                       e.track, e.start * usPerCycle, e.dur * usPerCycle, e.bundle);
    if (e.bytes) out += fmt::format(",\"bytes\":{}", e.bytes);
    out += fmt::format(",\"cycle\":{:.0f}}}}}", e.start);
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tpu::sim
