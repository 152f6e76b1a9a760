// zero-elements: values without elements become constants.
#include <vector>

#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Instruction;
using hlo::Opcode;

namespace {

bool isEmptyArray(const hlo::Shape& s) { return s.isArray() && !s.isDynamic() && s.elementCount() == 0; }

// The replacement of `in`, or null.
Instruction* replacementOf(Instruction& in, Rewriter& rw) {
  if (isEmptyArray(in.shape())) {
    if (in.opcode() == Opcode::Constant || in.opcode() == Opcode::Parameter) return nullptr;
    return rw.addConstant(hlo::Literal(in.shape()), "constant", in.location());
  }
  if (!in.shape().isArray() || in.operandCount() == 0 || !isEmptyArray(in.operand(0)->shape())) return nullptr;
  // Padding nothing gives the padding value everywhere.
  if (in.opcode() == Opcode::Pad) {
    Instruction* b = rw.add(Opcode::Broadcast, in.shape(), {in.operand(1)}, in.name(), in.location());
    b->attrs().dimensions = {};
    return b;
  }
  return nullptr;
}

}  // namespace

bool ZeroElementsPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  for (const auto& c : module.computations()) {
    auto empty = [](const Instruction& i) {
      return (isEmptyArray(i.shape()) && i.opcode() != Opcode::Constant && i.opcode() != Opcode::Parameter) ||
             (i.opcode() == Opcode::Pad && isEmptyArray(i.operand(0)->shape()));
    };
    if (!anyInstruction(*c, empty)) continue;
    Rewriter rw(*c);
    std::vector<Instruction*> order;
    for (const auto& in : c->instructions()) order.push_back(in.get());
    for (Instruction* in : order) {
      if (rw.hasControlEdges(in) || rw.hasSideEffect(in)) continue;
      if (Instruction* r = replacementOf(*in, rw)) rw.replaceAllUses(in, r);
    }
    changed |= rw.finish();
  }
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
