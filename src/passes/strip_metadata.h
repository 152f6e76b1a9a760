// strip-metadata: clears op metadata (op_type, op_name, source locations)
// from every instruction and sharding, for diffing modules from different runs.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class StripMetadataPass : public Pass {
 public:
  std::string_view name() const override { return "strip-metadata"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
