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
