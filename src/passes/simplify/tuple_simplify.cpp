// tuple-simplify: tuple / get-tuple-element round trips.
#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Instruction;
using hlo::Opcode;

namespace {

// The value `in` is equivalent to, or null.
Instruction* simplifyTupleOp(Instruction* in) {
  if (in->opcode() == Opcode::GetTupleElement) {
    Instruction* t = in->operand(0);
    int64_t k = in->attrs().tupleIndex;
    if (t->opcode() == Opcode::Tuple && k >= 0 && k < t->operandCount() && t->operand(k)->shape() == in->shape())
      return t->operand(k);
    return nullptr;
  }
  if (in->opcode() == Opcode::Tuple && in->operandCount() > 0) {
    // tuple(gte(t, 0), ..., gte(t, n-1)) with t of the same shape is t.
    Instruction* source = nullptr;
    for (int64_t k = 0; k < in->operandCount(); ++k) {
      Instruction* e = in->operand(k);
      if (e->opcode() != Opcode::GetTupleElement || e->attrs().tupleIndex != k) return nullptr;
      if (source && e->operand(0) != source) return nullptr;
      source = e->operand(0);
    }
    if (source->shape() == in->shape()) return source;
  }
  return nullptr;
}

}  // namespace

bool TupleSimplifyPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  for (const auto& c : module.computations()) {
    if (!anyInstruction(*c, [](const Instruction& i) {
          return i.opcode() == Opcode::GetTupleElement && i.operand(0)->opcode() == Opcode::Tuple;
        }) &&
        !anyInstruction(*c, [](const Instruction& i) {
          return i.opcode() == Opcode::Tuple && i.operandCount() > 0 && i.operand(0)->opcode() == Opcode::GetTupleElement;
        }))
      continue;
    Rewriter rw(*c);
    // Operands come first, so chains collapse in one walk.
    std::vector<Instruction*> order;
    for (const auto& in : c->instructions()) order.push_back(in.get());
    for (Instruction* in : order) {
      if (rw.hasControlEdges(in)) continue;
      if (Instruction* replacement = simplifyTupleOp(in)) rw.replaceAllUses(in, replacement);
    }
    changed |= rw.finish();
  }
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
