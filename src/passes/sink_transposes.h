// sink-transposes: inside fused computations, moves a transpose below the
// elementwise instruction it reads, when that instruction has no other
// user: transpose(f(x, y)) becomes f(transpose(x), transpose(y)) (scalar
// operands stay), which is exact for elementwise f. Repeated, transposes
// reach the fusion's parameters, where code generators read them as
// strided views instead of materializing the transpose (XLA's algebraic
// simplifier moves transposes the same way).
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class SinkTransposesPass : public Pass {
 public:
  std::string_view name() const override { return "sink-transposes"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
