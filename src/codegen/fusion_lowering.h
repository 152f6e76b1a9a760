// Which kernel llo-gen makes of a fusion, asked by hlo-fuse's cost model
// before it forms the fusion: a streaming kernel (flat loop, output,
// row-input, column-reduction, row-normalization or attention fusion) or, for every other fusion, one
// VMEM-resident kernel that runs the fused instructions as sections in
// turn. The answer comes from the same classifiers the lowering uses, so
// the two cannot disagree.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "codegen/codegen.h"
#include "hlo/instruction.h"

namespace tpu::codegen {

enum class FusionLowering : uint8_t { Loop, Output, Input, ColumnReduction, Rows, Attention, Resident };

// "loop", "output", "input", "column-reduction", "rows", "attention", "resident".
std::string_view fusionLoweringName(FusionLowering lowering);

// The lowering of fusion instruction `fusion` as llo-gen sees it: callers
// run sink-views on its fused computation first, as generateLlo does. The
// instruction need not belong to a computation (a candidate built aside).
FusionLowering classifyFusion(const hlo::Instruction& fusion, const target::TargetDesc& target,
                              const CodegenOptions& options = {});

// classifyFusion for many fusions on one target: the classifiers' state is
// built once (hlo-fuse's cost model classifies every candidate it prices,
// and building the lowering's state for each was a tenth of its time).
class FusionClassifier {
 public:
  explicit FusionClassifier(const target::TargetDesc& target, const CodegenOptions& options = {});
  ~FusionClassifier();
  FusionClassifier(const FusionClassifier&) = delete;
  FusionClassifier& operator=(const FusionClassifier&) = delete;
  FusionLowering classify(const hlo::Instruction& fusion) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The instructions of a resident fusion that run as sections of their own
// (every one but parameters, constants, tuples and renames), each waiting
// for its own DMAs.
int64_t residentSections(const hlo::Computation& fused);

}  // namespace tpu::codegen
