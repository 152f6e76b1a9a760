#include "passes/expand_pred_matmul.h"

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool ExpandPredMatmulPass::run(hlo::Module& module, DiagnosticEngine&) {
  std::set<std::string> names;
  bool namesKnown = false, changed = false;
  std::vector<hlo::Computation*> computations;
  for (const auto& c : module.computations()) computations.push_back(c.get());
  for (hlo::Computation* c : computations) {
    std::vector<Instruction*> found;
    for (const auto& in : c->instructions()) {
      bool matmul = in->opcode() == Opcode::Dot || in->opcode() == Opcode::Convolution;
      if (matmul && in->operandCount() == 2 && in->shape().isArray() &&
          in->shape().elementType() == ElementType::Pred && in->operand(0)->shape().isArray() &&
          in->operand(1)->shape().isArray())
        found.push_back(in.get());
    }
    for (Instruction* in : found) {
      if (!namesKnown) names = instructionNames(module), namesKnown = true;
      RewriteBuilder b(*c, *in, names);
      auto count = [&](Instruction* x) {
        return b.convert(b.convert(x, ElementType::Pred), ElementType::S32);
      };
      Instruction* products =
          b.add(in->opcode(), Shape::array(ElementType::S32, in->shape().dimensions()).withDefaultLayout(),
                {count(in->operand(0)), count(in->operand(1))});
      products->attrs() = in->attrs();
      Instruction* zero = b.broadcast(b.scalarConstant(ElementType::S32, 0), products->shape(), {});
      replaceInstruction(
          in, b.compare(products, zero, hlo::ComparisonDirection::NE, hlo::ComparisonType::Signed));
      changed = true;
    }
    if (!found.empty()) c->sortTopologically();
  }
  return changed;
}

}  // namespace tpu::passes
