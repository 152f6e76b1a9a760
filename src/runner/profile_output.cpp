#include "runner/profile_output.h"

#include "support/file_io.h"

namespace tpu::runner {

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
  if (request.run.stats == "json")
    profile::addStatsJson(p, out.statsText);
  else if (!request.run.stats.empty())
    out.statsText += profile::renderStatsText(p);
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
