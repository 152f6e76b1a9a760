// call-inline: calls replaced by their callee's body.
#include <set>
#include <vector>

#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;

namespace {

bool inlinable(const Instruction& call, const Rewriter& rw) {
  if (call.opcode() != Opcode::Call || rw.hasControlEdges(&call)) return false;
  const Computation* callee = call.toApply();
  if (!callee || !callee->root() || callee->executionThread() != "main") return false;
  // Every parameter must be an argument of this call.
  for (const Instruction* p : callee->parameters())
    if (!p || p->attrs().parameterNumber >= call.operandCount()) return false;
  return true;
}

}  // namespace

bool CallInlinePass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  std::set<Computation*> inlined;
  // Callees first: their own calls are inlined before they are copied.
  for (Computation* c : module.postOrder()) {
    Rewriter rw(*c);
    std::vector<Instruction*> calls;
    for (const auto& in : c->instructions())
      if (inlinable(*in, rw)) calls.push_back(in.get());
    for (Instruction* call : calls) {
      std::vector<Instruction*> args(call->operands().begin(), call->operands().end());
      Instruction* result = rw.inlineBody(*call->toApply(), args);
      inlined.insert(call->toApply());
      rw.replaceAllUses(call, result);
      rw.erase(call);
    }
    changed |= rw.finish();
  }
  if (inlined.empty()) return changed;
  // Callees nothing calls any more go (dce would remove them anyway).
  std::set<const Computation*> stillCalled;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      for (const Computation* callee : in->calledComputations()) stillCalled.insert(callee);
  module.removeComputationsIf([&](const Computation& c) {
    return inlined.count(const_cast<Computation*>(&c)) && !stillCalled.count(&c) && &c != module.entry();
  });
  return changed;
}

}  // namespace tpu::passes::simplify
