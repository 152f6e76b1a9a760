// tpu-run's profile outputs after a simulated run: --stats lines beside the
// simulator's (model FLOPs, ideal bound), --trace with the profile's tracks,
// --profile (text or JSON) and --report (HTML).
#pragma once

#include <string>

#include "profile/profile.h"
#include "runner/run.h"

namespace tpu::runner {

// Renders what `request` asks for from the run `out`; --stats additions are
// made to out.statsText, the profile without --profile-file goes to
// `profileText`. `lowered` / `original`: the module llo-gen lowered and the
// module as given (null for machine programs).
bool deliverProfile(sim::RunOutput& out, const isa::Program& program, const profile::KernelMap& kernels,
                    const hlo::Module* lowered, const hlo::Module* original, const SimulatorRequest& request,
                    std::string& profileText, DiagnosticEngine& diags);

}  // namespace tpu::runner
