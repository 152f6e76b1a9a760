#include "passes/sink_transposes.h"

#include <set>

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::Instruction;
using hlo::Opcode;

namespace {

int64_t userCount(const hlo::Computation& c, const Instruction* x) {
  int64_t n = c.root() == x ? 1 : 0;
  for (const auto& in : c.instructions())
    for (const Instruction* o : in->operands()) n += o == x;
  return n;
}

// The transpose's shape with another element type (its layout kept).
hlo::Shape withType(const hlo::Shape& s, hlo::ElementType t) {
  hlo::Shape r = s;
  r.setElementType(t);
  return r;
}

}  // namespace

bool SinkTransposesPass::run(hlo::Module& module, DiagnosticEngine&) {
  std::set<hlo::Computation*> fused;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      if (in->opcode() == Opcode::Fusion && in->fusedComputation()) fused.insert(in->fusedComputation());
  std::set<std::string> names;
  bool namesKnown = false, changed = false;
  for (hlo::Computation* c : fused) {
    for (bool again = true; again;) {
      again = false;
      for (const auto& up : c->instructions()) {
        Instruction* t = up.get();
        if (t->opcode() != Opcode::Transpose || !t->shape().isArray()) continue;
        Instruction* e = t->operand(0);
        if (!hlo::isElementwise(e->opcode()) || e->opcode() == Opcode::Rng || !e->shape().isArray() ||
            e->operandCount() == 0 || userCount(*c, e) != 1 || !e->controlPredecessors().empty())
          continue;
        bool shaped = true;
        for (const Instruction* o : e->operands())
          shaped = shaped && o->shape().isArray() &&
                   (o->shape().isScalar() || o->shape().dimensions() == e->shape().dimensions());
        if (!shaped) continue;
        if (!namesKnown) names = instructionNames(module), namesKnown = true;
        RewriteBuilder b(*c, *t, names);
        std::vector<Instruction*> ops;
        for (Instruction* o : e->operands()) {
          if (o->shape().isScalar()) {
            ops.push_back(o);
            continue;
          }
          Instruction* ot = b.add(Opcode::Transpose, withType(t->shape(), o->shape().elementType()), {o});
          ot->attrs().dimensions = t->attrs().dimensions;
          ops.push_back(ot);
        }
        Instruction* moved = b.add(e->opcode(), withType(t->shape(), e->shape().elementType()), ops);
        moved->attrs() = e->attrs();
        replaceInstruction(t, moved);
        c->removeInstruction(e);
        changed = again = true;
        break;  // the instruction list changed
      }
    }
    c->sortTopologically();
  }
  return changed;
}

}  // namespace tpu::passes
