#include "runner/profile_output.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace tpu::runner {

namespace {

// --stats for pods (issue 15 point 4), beside the simulator's per-chip and
// per-link lines: each chip's time in collective kernels, and for the pod
// the mean and largest of it and the communication exposed (the chips
// stalled on other chips while their transfers flew) against overlapped
// (they worked meanwhile), summed over chips.
struct PodSummary {
  double meanCollective = 0, maxCollective = 0;
  uint64_t comm = 0, exposed = 0, overlapped = 0, waits = 0;
};

PodSummary summarize(const profile::Profile& p, const sim::PodResult& pod) {
  PodSummary s;
  for (const profile::ChipFigures& c : p.chips) {
    s.meanCollective += c.collectiveSeconds;
    s.maxCollective = std::max(s.maxCollective, c.collectiveSeconds);
  }
  if (!p.chips.empty()) s.meanCollective /= static_cast<double>(p.chips.size());
  for (const sim::ChipPodStats& c : pod.chipStats) {
    s.comm += c.commCycles;
    const uint64_t exposed = std::min(c.commCycles, c.exposedCommCycles);
    s.exposed += exposed;
    s.overlapped += c.commCycles - exposed;
    s.waits += c.waitCycles;
  }
  return s;
}

double percent(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

std::string podStatsText(const profile::Profile& p, const sim::PodResult& pod) {
  PodSummary s = summarize(p, pod);
  std::string out;
  for (const profile::ChipFigures& c : p.chips)
    out += fmt::format("chip {} collectives: {:.3f} us in collective kernels ({:.1f}% of its time)\n", c.chip,
                       c.collectiveSeconds * 1e6, percent(c.collectiveSeconds, c.seconds));
  out += fmt::format("pod collectives: {:.3f} us per chip on average ({:.1f}% of the pod's time), largest {:.3f} us\n",
                     s.meanCollective * 1e6, percent(s.meanCollective, p.seconds), s.maxCollective * 1e6);
  out += fmt::format(
      "pod communication: {} chip-cycles with ICI transfers in flight: exposed {} ({:.1f}%), overlapped {} "
      "({:.1f}%); {} chip-cycles waiting on other chips\n",
      s.comm, s.exposed, percent(static_cast<double>(s.exposed), static_cast<double>(s.comm)), s.overlapped,
      percent(static_cast<double>(s.overlapped), static_cast<double>(s.comm)), s.waits);
  return out;
}

void addPodStatsJson(const profile::Profile& p, const sim::PodResult& pod, std::string& statsJson) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(statsJson, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  PodSummary s = summarize(p, pod);
  nlohmann::ordered_json perChip = nlohmann::ordered_json::array();
  for (const profile::ChipFigures& c : p.chips) perChip.push_back(c.collectiveSeconds);
  j["pod_summary"] = {{"collective_seconds_per_chip", perChip},
                      {"collective_seconds_mean", s.meanCollective},
                      {"collective_seconds_max", s.maxCollective},
                      {"collective_fraction", p.seconds > 0 ? s.meanCollective / p.seconds : 0},
                      {"comm_cycles", s.comm},
                      {"exposed_comm_cycles", s.exposed},
                      {"overlapped_comm_cycles", s.overlapped},
                      {"wait_cycles", s.waits}};
  statsJson = j.dump(2) + "\n";
}

}  // namespace

bool deliverProfile(sim::RunOutput& out, const isa::Program& program, const profile::KernelMap& kernels,
                    const hlo::Module* lowered, const hlo::Module* original, const SimulatorRequest& request,
                    std::string& profileText, DiagnosticEngine& diags) {
  profile::ProfileInputs in;
  in.report = &out.report;
  in.exec = &out.profile;
  in.program = &program;
  in.kernels = &kernels;
  in.lowered = lowered;
  in.original = original;
  in.name = request.inputName.empty() ? std::string("-") : request.inputName;
  std::vector<profile::Profile> chips;
  profile::Profile p = out.pod ? profile::buildPodProfile(in, *out.pod, &chips) : profile::buildProfile(in);
  if (original) profile::setIdealBound(p, *original);
  if (request.run.stats == "json") {
    profile::addStatsJson(p, out.statsText);
    if (out.pod) addPodStatsJson(p, *out.pod, out.statsText);
  } else if (!request.run.stats.empty()) {
    out.statsText += profile::renderStatsText(p);
    if (out.pod) out.statsText += podStatsText(p, *out.pod);
  }
  if (!request.traceFile.empty()) {
    std::string trace = out.pod ? profile::podTrace(chips, *out.pod)
                                : profile::augmentTrace(p, out.profile, std::move(out.traceJson));
    if (!writeOutputFile(request.traceFile, trace, diags)) return false;
  }
  if (!request.profile.empty()) {
    std::string text = request.profile == "json" ? profile::renderJson(p) : profile::renderText(p);
    if (!request.profileFile.empty()) {
      if (!writeOutputFile(request.profileFile, text, diags)) return false;
    } else {
      profileText = std::move(text);
    }
  }
  if (!request.reportFile.empty() && !writeOutputFile(request.reportFile, profile::renderHtml(p), diags))
    return false;
  return true;
}

}  // namespace tpu::runner
