// hlo-fuse's default pipeline for callers that are not hlo-fuse itself:
// `tpu-run model.hlo` optimizes the module this way before llo-gen's
// lowering, exactly as `hlo-fuse | llo-gen` would.
#pragma once

#include <string>

#include "hlo/module.h"
#include "support/diagnostics.h"
#include "target/target.h"

namespace tpu::fusion {

// Runs defaultOptimizationPipeline() on `module` in place, pricing kernels
// on `target` and verifying the module at the end (`verifyEach`: after
// every pass run, as --verify-each; the tests do). Returns false after
// reporting an error.
bool optimizeModule(hlo::Module& module, const target::TargetDesc& target, DiagnosticEngine& diags,
                    bool verifyEach = false);

}  // namespace tpu::fusion
