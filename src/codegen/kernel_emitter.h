// The interface every kernel kind of the lowering has (one per file under
// kernels/), and the decision the planner records for each instruction.
// Internal to the codegen library.
//
// A kernel kind says whether an instruction is of its kind (`matches`: the
// question hlo-fuse's cost model asks through classifyFusion), makes its
// plan (`plan`: for fusions the struct its kernel is emitted from --
// LoopFusion, MatmulEpilogue, ReducePrologue, ColumnReduceFusion, RowFusion,
// AttentionFusion; nothing for kinds whose plan is the instruction itself)
// and emits the kernel from that plan (`emit`). The registry
// (kernels/registry.cpp, Lowerer::kernelEmitters) lists every kind in the
// order the planner tries them; the planner runs once per instruction and
// stores the kind and its plan in a KernelDecision, which emission reads:
// nothing is classified or planned twice.
#pragma once

#include <any>
#include <string_view>

#include "codegen/fusion_lowering.h"
#include "hlo/instruction.h"

namespace tpu::codegen {

class Lowerer;

struct KernelEmitter {
  // The kind's name ("loop", "matmul-epilogue", "sort", ...; fusion kinds
  // are fusionLoweringName of `fusionKind`).
  std::string_view name;
  // Fusion kinds: which FusionLowering they are (the classifier's answer).
  // Instruction kinds: std::nullopt.
  std::optional<FusionLowering> fusionKind;
  // Whether `in` is of this kind.
  bool (*matches)(const Lowerer& l, const hlo::Instruction& in) = nullptr;
  // The kind's plan of `in` into `plan` (left empty when the kind has
  // none); false when `in` is not of the kind after all. Null: `matches`
  // decides and there is nothing to plan.
  bool (*plan)(const Lowerer& l, const hlo::Instruction& in, std::any& plan) = nullptr;
  // Emits the kernel of `in` from the plan the planner made.
  bool (*emit)(Lowerer& l, const hlo::Instruction& in, const std::any& plan) = nullptr;
};

// What the planner decided for one instruction: its kernel kind (null when
// no kind lowers it: emission reports the opcode as unsupported) and that
// kind's plan.
struct KernelDecision {
  const KernelEmitter* emitter = nullptr;
  std::any plan;
};

}  // namespace tpu::codegen
