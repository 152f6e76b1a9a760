#include "passes/expand_pred_matmul.h"

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool ExpandPredMatmulPass::run(hlo::Module& module, DiagnosticEngine&) {
  auto matches = [](const Instruction& in) {
    bool matmul = in.opcode() == Opcode::Dot || in.opcode() == Opcode::Convolution;
    return matmul && in.operandCount() == 2 && in.shape().isArray() && in.shape().elementType() == ElementType::Pred &&
           in.operand(0)->shape().isArray() && in.operand(1)->shape().isArray();
  };
  return expandEach(module, matches, [](RewriteBuilder& b, Instruction& in) -> Instruction* {
    auto count = [&](Instruction* x) { return b.convert(b.convert(x, ElementType::Pred), ElementType::S32); };
    Instruction* products =
        b.add(in.opcode(), Shape::array(ElementType::S32, in.shape().dimensions()).withDefaultLayout(),
              {count(in.operand(0)), count(in.operand(1))});
    products->attrs() = in.attrs();
    Instruction* zero = b.broadcast(b.scalarConstant(ElementType::S32, 0), products->shape(), {});
    return b.compare(products, zero, hlo::ComparisonDirection::NE, hlo::ComparisonType::Signed);
  });
}

}  // namespace tpu::passes
