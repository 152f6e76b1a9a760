// --stats for pods: the pod's time and ICI traffic, then one line per chip
// (cycles, time waiting on other chips, remote DMAs) and one per link that
// carried data.
#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sim/sim.h"

namespace tpu::sim {

std::string renderPodText(const PodResult& pod, double clockHz) {
  std::string t;
  double seconds = static_cast<double>(pod.cycles) / clockHz;
  t += fmt::format("pod: {} chips, {}\n", pod.chips.size(), pod.topology);
  t += fmt::format("cycles: {} ({:.3f} us)\n", pod.cycles, seconds * 1e6);
  t += fmt::format("ici bytes: {} (bytes x hops)\n", pod.iciBytes);
  for (size_t c = 0; c < pod.chips.size(); ++c) {
    const SimReport& r = pod.chips[c].report;
    const ChipPodStats& s = pod.chipStats[c];
    double wait = r.cycles ? 100.0 * static_cast<double>(s.waitCycles) / static_cast<double>(r.cycles) : 0;
    t += fmt::format("chip {}: cycles {}, waiting on other chips {} ({:.1f}%), remote DMAs {}, ICI bytes sent {}\n", c,
                     r.cycles, s.waitCycles, wait, s.remoteDmas, s.iciBytesSent);
    if (s.commCycles > 0) {
      uint64_t overlapped = s.commCycles - std::min(s.commCycles, s.exposedCommCycles);
      t += fmt::format("  communication in flight {} cycles: exposed {} (chip stalled), overlapped {} ({:.1f}%)\n",
                       s.commCycles, s.exposedCommCycles, overlapped,
                       100.0 * static_cast<double>(overlapped) / static_cast<double>(s.commCycles));
    }
  }
  for (const IciLinkStats& l : pod.links) {
    double util = pod.cycles ? 100.0 * l.busyCycles / static_cast<double>(pod.cycles) : 0;
    t += fmt::format("link {}: {} bytes in {} transfers, busy {:.1f}%\n", l.name, l.bytes, l.transfers, util);
  }
  return t;
}

std::string renderPodJson(const PodResult& pod, double clockHz) {
  nlohmann::ordered_json j;
  j["chips"] = pod.chips.size();
  j["topology"] = pod.topology;
  j["cycles"] = pod.cycles;
  j["seconds"] = static_cast<double>(pod.cycles) / clockHz;
  j["ici_bytes"] = pod.iciBytes;
  nlohmann::ordered_json chips = nlohmann::ordered_json::array();
  for (size_t c = 0; c < pod.chips.size(); ++c) {
    const SimReport& r = pod.chips[c].report;
    const ChipPodStats& s = pod.chipStats[c];
    chips.push_back({{"chip", c},
                     {"cycles", r.cycles},
                     {"wait_cycles", s.waitCycles},
                     {"remote_dmas", s.remoteDmas},
                     {"ici_bytes_sent", s.iciBytesSent},
                     {"comm_cycles", s.commCycles},
                     {"exposed_comm_cycles", s.exposedCommCycles},
                     {"overlapped_comm_cycles", s.commCycles - std::min(s.commCycles, s.exposedCommCycles)},
                     {"report", nlohmann::ordered_json::parse(renderReportJson(r))}});
  }
  j["per_chip"] = std::move(chips);
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const IciLinkStats& l : pod.links)
    links.push_back({{"link", l.name}, {"bytes", l.bytes}, {"transfers", l.transfers}, {"busy_cycles", l.busyCycles}});
  j["links"] = std::move(links);
  return j.dump() + "\n";
}

}  // namespace tpu::sim
