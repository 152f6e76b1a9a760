// hlo-fuse's fusion passes. `priority-fusion` fuses producers into their
// consumers (loop, input and output fusions, operand prologues, in-place
// dynamic-update-slices), ranked globally by the time the cost model says
// each fusion saves, as XLA's priority fusion does; `multi-output-fusion`
// then fuses a producer into one consumer as an extra output, and siblings
// that read the same operand into one kernel; `fusion` runs both. Every
// fusion formed, and every producer-consumer edge left unfused, can be
// explained as a remark (PassContext::remarks).
#pragma once

#include <string>
#include <vector>

#include "hlo/module.h"
#include "passes/fusion/cost_model.h"
#include "passes/pass.h"

namespace tpu::fusion {

struct FusionOptions {
  bool producerConsumer = true;  // priority fusion
  bool multiOutput = true;       // producer-consumer and sibling multi-output fusion
  int maxInstructions = 128;     // instructions in one fusion
  int maxOperands = 64;          // operands of one fusion
  int maxUsers = 128;            // users a producer is copied into (bounds the work per producer)
};

// Fuses every computation of `module` that runs as code (the entry, loop
// bodies and conditions, branches and called computations; not fused
// computations or reducers). Appends remarks named `passName` when
// `remarks` is set: first the fusions, then the edges left unfused, in
// program order. Returns whether the module changed.
bool fuseModule(hlo::Module& module, const CostModel& cost, const FusionOptions& options, const std::string& passName,
                std::vector<passes::Remark>* remarks);

class FusionPass : public passes::Pass {
 public:
  FusionPass(std::string name, FusionOptions options) : name_(std::move(name)), options_(options) {}
  std::string_view name() const override { return name_; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  std::string name_;
  FusionOptions options_;
};

// Adds fusion, priority-fusion and multi-output-fusion to the registry.
void registerFusionPasses();

// The passes `hlo-fuse` and `tpu-run model.hlo` run by default:
// simplificationPipeline(), then fusion.
std::string defaultOptimizationPipeline();
std::string simplificationPipeline();

}  // namespace tpu::fusion
