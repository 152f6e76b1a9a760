// expand-batch-norm: rewrites batch-norm-inference, batch-norm-training and
// batch-norm-grad as converts, broadcasts, elementwise f64 arithmetic and
// f64 sum reductions (XLA's BatchNormExpander does the same before code
// generation), so a back end needs no batch-norm kernels.
//
// The arithmetic is the reference interpreter's, operation for operation:
// every operand is converted to f64, per-feature sums fold the elements in
// row-major order from 0, the formulas keep its association
//   y      = scale * (x - mean) / sqrt(var + eps) + offset
//   mean   = sum(x) / m,  var = sum((x - mean)^2) / m        (training)
//   grad_x = scale / sqrt(var + eps)
//            * (g - sum(g) / m - (x - mean) * sum(g (x - mean)) / (m (var + eps)))
//   grad_scale = sum(g (x - mean)) / sqrt(var + eps),  grad_offset = sum(g)
// with m the element count per feature, and each result is rounded once
// to the operand type at the end. A back end whose f64 operations and
// in-order f64 reductions are IEEE-exact therefore matches it bit for bit.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class ExpandBatchNormPass : public Pass {
 public:
  std::string_view name() const override { return "expand-batch-norm"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
