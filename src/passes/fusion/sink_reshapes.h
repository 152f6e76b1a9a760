// sink-reshapes: moves reshapes below the elementwise instructions that
// read them, as XLA's ReshapeMover does: e(reshape(x), broadcast(s)) becomes
// reshape(e(x, broadcast'(s))) when every non-scalar operand of e is a
// reshape of a value of x's dimensions (or a broadcast of a scalar) and
// every other reader of those reshapes could move the same way (XLA's
// rule: otherwise the reshape stays above all its readers), and a
// reshape of a reshape reads the first one's operand (vanishing when it
// restores its shape). Elementwise work is not duplicated and every value
// keeps its bits (an elementwise op commutes with a reshape). It runs
// before fusion because llo-gen's input and output kernels take elementwise
// epilogues but no reshapes: RMS norm's keepdim reshapes ([n] to [n,1] and
// back around rsqrt) would otherwise split it into more kernels.
#pragma once

#include "passes/pass.h"

namespace tpu::fusion {

class SinkReshapesPass : public passes::Pass {
 public:
  std::string_view name() const override { return "sink-reshapes"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::fusion
