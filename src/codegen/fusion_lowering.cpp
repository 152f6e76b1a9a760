#include "codegen/fusion_lowering.h"

#include "codegen/lowerer.h"

namespace tpu::codegen {

std::string_view fusionLoweringName(FusionLowering lowering) {
  switch (lowering) {
    case FusionLowering::Loop: return "loop";
    case FusionLowering::Output: return "output";
    case FusionLowering::Input: return "input";
    case FusionLowering::ColumnReduction: return "column-reduction";
    case FusionLowering::Rows: return "rows";
    case FusionLowering::Attention: return "attention";
    case FusionLowering::Resident: return "resident";
  }
  return "resident";
}

const std::array<Lowerer::FusionKernel, 6> Lowerer::kFusionKernels = {{
    {FusionLowering::Loop, [](const Lowerer& l, const Instruction& f) { return l.isFlatFusion(f); },
     &Lowerer::lowerFlatFusion},
    {FusionLowering::Output, [](const Lowerer& l, const Instruction& f) { return l.matmulEpilogueFusion(f, nullptr); },
     &Lowerer::lowerMatmulEpilogueFusion},
    {FusionLowering::Input, [](const Lowerer& l, const Instruction& f) { return l.inputFusion(f, nullptr); },
     &Lowerer::lowerInputFusion},
    {FusionLowering::ColumnReduction,
     [](const Lowerer& l, const Instruction& f) { return l.columnReduceFusion(f, nullptr); },
     &Lowerer::lowerColumnReduceFusion},
    {FusionLowering::Rows, [](const Lowerer& l, const Instruction& f) { return l.rowFusion(f, nullptr); },
     &Lowerer::lowerRowFusion},
    {FusionLowering::Attention, [](const Lowerer& l, const Instruction& f) { return l.attentionFusion(f, nullptr); },
     &Lowerer::lowerAttentionFusion},
}};

FusionLowering Lowerer::classifyFusion(const Instruction& in) const {
  for (const FusionKernel& k : kFusionKernels)
    if (k.matches(*this, in)) return k.kind;
  return FusionLowering::Resident;
}

bool Lowerer::emitFusion(const Instruction& in) {
  auto it = fusionKinds_.find(&in);
  if (it == fusionKinds_.end()) return fail(in, "llo-gen: internal error: a fusion reached emission unplanned");
  for (const FusionKernel& k : kFusionKernels)
    if (k.kind == it->second) return (this->*k.emit)(in);
  // Resident: one kernel when planning placed its intermediates (nested
  // fusions are part of the outer one), else instruction by instruction.
  if (resident_.count(&in)) return lowerResidentFusion(in);
  return emitComputation(*in.fusedComputation());
}

FusionLowering classifyFusion(const hlo::Instruction& fusion, const target::TargetDesc& target,
                              const CodegenOptions& options) {
  // The classifiers read the fusion and the target only; the module is
  // there for the lowering proper.
  static const hlo::Module unused("classify");
  DiagnosticEngine diags;
  const hlo::Computation* parent = fusion.parent();
  const hlo::Module& module = parent && parent->parent() ? *parent->parent() : unused;
  return Lowerer(module, target, options, diags).classifyFusion(fusion);
}

struct FusionClassifier::State {
  State(const target::TargetDesc& t, const CodegenOptions& o)
      : target(t), options(o), module("classify"), lowerer(module, target, options, diags) {}
  target::TargetDesc target;
  CodegenOptions options;
  hlo::Module module;  // the classifiers read the fusion and the target only
  DiagnosticEngine diags;
  Lowerer lowerer;
};

FusionClassifier::FusionClassifier(const target::TargetDesc& target, const CodegenOptions& options)
    : state_(std::make_unique<State>(target, options)) {}

FusionClassifier::~FusionClassifier() = default;

FusionLowering FusionClassifier::classify(const hlo::Instruction& fusion) const {
  return state_->lowerer.classifyFusion(fusion);
}

int64_t residentSections(const hlo::Computation& fused) {
  int64_t n = 0;
  for (const auto& i : fused.instructions()) n += !hlo::computesNothing(i->opcode());
  return n;
}

}  // namespace tpu::codegen
