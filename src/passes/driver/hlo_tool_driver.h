// The shared main of the HLO-to-HLO tools (hlo-parse, hlo-partition,
// hlo-layout, hlo-fuse), in the spirit of MLIR's MlirOptMain: read any
// encoding, verify, run the tool's pipeline or --passes, print or encode.
#pragma once

#include <functional>
#include <string>

#include "passes/pass.h"
#include "hlo/module.h"

#include "support/tool.h"

namespace tpu::passes {

struct HloToolConfig {
  // Passes run when --passes is not given (comma-separated; may be empty).
  std::string defaultPipeline;
  // Handed to the passes (optional; kept alive by the caller). When the
  // tool takes --target, the driver fills in `target` from it.
  PassContext* context = nullptr;
  // More --stats after the module statistics (hlo-partition: communication);
  // for JSON, members (`"key": value, ...`) added to the module's object.
  std::function<std::string(const hlo::Module&, const std::string& format)> moreStats;
};

// Adds the HLO tool options (--strip-metadata, --split-input-file,
// --no-verify) to `tool`; call before Tool::run.
void addHloToolOptions(Tool& tool);

// The body to hand to Tool::run.
int runHloTool(Tool& tool, const HloToolConfig& config);

}  // namespace tpu::passes
