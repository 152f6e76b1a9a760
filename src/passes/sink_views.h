// sink-views: inside fused computations, rewrites a transpose, broadcast,
// slice or reverse of a computed value into that computation applied to
// views of its leaves: transpose(f(x, s)) becomes f(transpose(x), s) for
// elementwise f (scalar operands stay), repeated down to parameters,
// constants and other instructions it cannot look through. Views of views
// compose (transpose of transpose, broadcast of transpose, slice of slice,
// ...), iotas take the view's dimension mapping, and rng is never
// duplicated. When the viewed value has other users the chain is cloned
// (recomputed at the view's index, as XLA's loop emitter does), and a
// broadcast's chain runs on its many more elements: both only in loop
// fusions (elementwise, views, reshapes, constants, iotas) whose views then
// all read parameters or scalars; elsewhere a broadcast sinks only through
// a short chain of elementwise work on parameters that nothing else reads
// (convert(w) broadcast along the rows of a norm). A computation grows to at most
// kMaxGrowth times its original size.
// Code generators then read the views of parameters as strided streams
// instead of materializing them.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class SinkViewsPass : public Pass {
 public:
  // A computation grows to at most this many times its original
  // instruction count.
  static constexpr int64_t kMaxGrowth = 4;
  // Instructions a broadcast sunk outside a loop fusion may add (a weight's
  // convert chain).
  static constexpr int64_t kMaxBroadcastChain = 4;

  std::string_view name() const override { return "sink-views"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
