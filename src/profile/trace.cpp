// Profile tracks added to the simulator's Chrome/Perfetto trace: kernel
// slices named by HLO instruction, and counters for HBM bandwidth, VMEM in
// use and HBM live bytes.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "profile/profile.h"

namespace tpu::profile {

namespace {

constexpr uint32_t kKernelTrack = 2;  // below the simulator's slot tracks (100+)
constexpr size_t kBandwidthBins = 400;

std::string jsonQuote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string augmentTrace(const Profile& p, const sim::ExecProfile& exec, std::string traceJson) {
  const std::string tail = "\n]}\n";
  if (traceJson.size() < tail.size() ||
      traceJson.compare(traceJson.size() - tail.size(), tail.size(), tail) != 0)
    return traceJson;
  traceJson.resize(traceJson.size() - tail.size());
  std::string out;
  out += fmt::format(
      ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"kernels "
      "(HLO)\"}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{"
      "\"sort_index\":{}}}}}",
      kKernelTrack, kKernelTrack, kKernelTrack);
  // Kernel slices.
  for (const Span& s : p.spans) {
    const KernelInfo& k = p.kernels[s.kernel];
    std::string name = k.hlo.empty() ? k.label : (k.hlo[0] == '(' ? k.hlo : "%" + k.hlo);
    std::string members;
    for (size_t i = 0; i < k.members.size(); ++i) members += (i ? "," : "") + k.members[i];
    out += fmt::format(
        ",\n{{\"name\":{},\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.6f},\"dur\":{:.6f},"
        "\"args\":{{\"op_name\":{},\"kind\":{},\"label\":{},\"members\":{}}}}}",
        jsonQuote(name), kKernelTrack, s.start * 1e6, (s.end - s.start) * 1e6, jsonQuote(k.opName),
        jsonQuote(k.kind), jsonQuote(k.label), jsonQuote(members));
  }
  // VMEM in use: the working set llo-gen planned for the running kernel.
  bool anyVmem = false;
  for (const KernelInfo& k : p.kernels) anyVmem = anyVmem || k.vmemBytes > 0;
  if (anyVmem) {
    for (const Span& s : p.spans)
      out += fmt::format(
          ",\n{{\"name\":\"VMEM in use\",\"ph\":\"C\",\"pid\":1,\"ts\":{:.6f},\"args\":{{\"bytes\":{}}}}}",
          s.start * 1e6, p.kernels[s.kernel].vmemBytes);
    if (!p.spans.empty())
      out += fmt::format(
          ",\n{{\"name\":\"VMEM in use\",\"ph\":\"C\",\"pid\":1,\"ts\":{:.6f},\"args\":{{\"bytes\":0}}}}",
          p.spans.back().end * 1e6);
  }
  // HBM bandwidth: bytes of each DMA spread over its transfer, in bins.
  if (p.seconds > 0 && p.clockHz > 0) {
    std::vector<double> bins(kBandwidthBins, 0);
    double binSeconds = p.seconds / kBandwidthBins;
    for (const sim::DmaRecord& d : exec.dmas) {
      if (!d.hbmBytes) continue;
      double s = d.start / p.clockHz, e = std::max(d.end / p.clockHz, s + 1e-15);
      double perSecond = static_cast<double>(d.hbmBytes) / (e - s);
      size_t b0 = std::min(kBandwidthBins - 1, static_cast<size_t>(s / binSeconds));
      size_t b1 = std::min(kBandwidthBins - 1, static_cast<size_t>(e / binSeconds));
      for (size_t b = b0; b <= b1; ++b) {
        double lo = std::max(s, b * binSeconds), hi = std::min(e, (b + 1) * binSeconds);
        if (hi > lo) bins[b] += perSecond * (hi - lo);
      }
    }
    for (size_t b = 0; b < kBandwidthBins; ++b)
      out += fmt::format(
          ",\n{{\"name\":\"HBM "
          "bandwidth\",\"ph\":\"C\",\"pid\":1,\"ts\":{:.6f},\"args\":{{\"GB/s\":{:.3f}}}}}",
          b * binSeconds * 1e6, bins[b] / binSeconds / 1e9);
  }
  for (const MemoryPoint& m : p.memory.points)
    out += fmt::format(
        ",\n{{\"name\":\"HBM live\",\"ph\":\"C\",\"pid\":1,\"ts\":{:.6f},\"args\":{{\"bytes\":{}}}}}",
        m.seconds * 1e6, m.liveBytes);
  return traceJson + out + tail;
}

std::string podTrace(const std::vector<Profile>& chips, const sim::PodResult& pod) {
  const std::string head = "\"traceEvents\":[\n", tail = "\n]}\n";
  std::string out;
  for (size_t c = 0; c < pod.chips.size(); ++c) {
    std::string t = pod.chips[c].traceJson;
    if (c < chips.size()) t = augmentTrace(chips[c], pod.chips[c].profile, std::move(t));
    size_t h = t.find(head);
    if (h == std::string::npos || t.size() < tail.size() ||
        t.compare(t.size() - tail.size(), tail.size(), tail) != 0)
      continue;
    // The simulator renders each chip as process 1: chip c becomes process
    // c + 1. `"pid":1,` cannot occur inside a JSON string (its quotes would
    // be escaped), so the replacement touches only the members.
    std::string body = t.substr(h + head.size(), t.size() - tail.size() - h - head.size());
    const std::string from = "\"pid\":1,", to = fmt::format("\"pid\":{},", c + 1);
    std::string renamed;
    renamed.reserve(body.size() + body.size() / 16);
    size_t pos = 0;
    for (size_t f; (f = body.find(from, pos)) != std::string::npos; pos = f + from.size())
      renamed.append(body, pos, f - pos).append(to);
    renamed.append(body, pos, std::string::npos);
    if (out.empty())
      out = t.substr(0, h + head.size()) + renamed;
    else
      out += ",\n" + renamed;
    out += fmt::format(
        ",\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{}}"
        "}}}",
        c + 1, c + 1);
  }
  if (out.empty()) return out;
  // ICI links: one process, a track per link that carried data.
  const size_t pid = pod.chips.size() + 1;
  const double clockHz = chips.empty() ? 0 : chips.front().clockHz;
  if (clockHz > 0 && !pod.links.empty()) {
    out += fmt::format(
        ",\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":{}}}}}"
        ",\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{}}"
        "}}}",
        pid, jsonQuote("ICI links (" + pod.topology + ")"), pid, pid);
    for (const sim::IciLinkStats& l : pod.links)
      out += fmt::format(
          ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}"
          ",\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{"
          "}}}}}",
          pid, l.id + 1, jsonQuote("link " + l.name), pid, l.id + 1, l.id + 1);
    for (const sim::IciTransferRecord& r : pod.transfers)
      out += fmt::format(
          ",\n{{\"name\":\"chip {} -> chip {}\",\"cat\":\"ici\",\"ph\":\"X\",\"pid\":{},\"tid\":{},"
          "\"ts\":{:.6f},\"dur\":{:.6f},\"args\":{{\"bytes\":{}}}}}",
          r.srcChip, r.dstChip, pid, r.link + 1, r.start / clockHz * 1e6, (r.end - r.start) / clockHz * 1e6,
          r.bytes);
  }
  return out + tail;
}

}  // namespace tpu::profile
