// expand-topk: rewrites `topk` (and the custom-call target "TopK", XLA's
// form of it: the k largest along the last dimension) as a stable sort of
// (key, value, index) along the last dimension followed by slices of the
// first k, so a back end needs only sort. The key is the value converted to
// f64 (the real part for complex values; f64 values are their own key),
// ordered by total order: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN,
// descending for largest=true; ties keep index order. This is the
// reference interpreter's definition of topk, so the rewrite is exact.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class ExpandTopKPass : public Pass {
 public:
  std::string_view name() const override { return "expand-topk"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
