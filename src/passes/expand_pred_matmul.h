// expand-pred-matmul: rewrites a dot or convolution with a pred result
// (a logical OR of ANDs, as the reference interpreter defines it) as the s32
// count of true products compared with zero: operands converted to pred
// (nonzero is true) and then to s32, the same dot or convolution in s32,
// then `compare NE 0`. Counts of up to 2^31 - 1 products are exact, so the
// rewrite is exact; back ends need no pred matrix kernels.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class ExpandPredMatmulPass : public Pass {
 public:
  std::string_view name() const override { return "expand-pred-matmul"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
