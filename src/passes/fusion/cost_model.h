// hlo-fuse's cost model: the time of a kernel as llo-gen would make it, by
// llo-gen's own estimator (target::kernelCycles: the roofline time of its
// flops and HBM bytes plus DMA latency) and llo-gen's own classifiers
// (codegen::classifyFusion), so the fusion passes and `llo-gen --stats`
// price a kernel alike. One difference on purpose: a fusion no streaming
// kernel covers runs its instructions as sections in turn, each waiting for
// its own DMAs, and is charged one DMA latency per section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/fusion_lowering.h"
#include "passes/fusion/fusion_graph.h"
#include "target/target.h"

namespace tpu::fusion {

struct KernelEstimate {
  bool isKernel = true;  // false: llo-gen only renames buffers (reshape, tuple, ...)
  bool isFusion = false;
  codegen::FusionLowering lowering = codegen::FusionLowering::Loop;  // of a fusion
  double flops = 0;
  double hbmBytes = 0;
  int64_t sections = 1;
  double intermediateBytes = 0;  // a resident fusion's values kept in VMEM
  double cycles = 0;
  // Why llo-gen could not run it as one kernel within VMEM ("" = it can).
  std::string refusal;
};

class CostModel {
 public:
  // `sectionLatency`: the DMA latencies each section of a resident kernel
  // after its first costs (1: it waits for its own DMAs; 0 prices resident
  // kernels as llo-gen's --stats does, which the benchmark shows is
  // optimistic).
  explicit CostModel(target::TargetDesc target, double sectionLatency = 1.0);
  CostModel(const CostModel& other) : CostModel(other.target_, other.sectionLatency_) {}

  const target::TargetDesc& target() const { return target_; }
  // VMEM a resident fusion's intermediates may take: what llo-gen leaves
  // above its per-kernel budget.
  double vmemCapacity() const;

  // `members` of `graph` (ascending) as one kernel exporting `outputs`: a
  // single instruction as llo-gen lowers it unfused, several as a fusion.
  KernelEstimate estimate(const FusionGraph& graph, const std::vector<int32_t>& members,
                          const std::vector<int32_t>& outputs) const;
  // An unfused instruction (a fusion instruction counts as the fusion).
  KernelEstimate instruction(const hlo::Instruction& in) const;

 private:
  KernelEstimate fusion(const FusionGraph& graph, const std::vector<int32_t>& members,
                        const std::vector<int32_t>& outputs) const;

  target::TargetDesc target_;
  double sectionLatency_;
  codegen::CodegenOptions codegen_;
  codegen::FusionClassifier classifier_;
};

// Bytes of a shape's arrays (tuples summed).
double shapeBytes(const hlo::Shape& shape);

// "72 MiB", "512 KiB", "96 B".
std::string formatBytes(double bytes);

}  // namespace tpu::fusion
