#include "passes/flatten_call_graph.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "hlo/module.h"
#include "passes/clone.h"

namespace tpu::passes {

namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;

// Call sites that run the callee as part of the caller's control flow.
bool isSequentialCall(Opcode op) {
  switch (op) {
    case Opcode::While:
    case Opcode::Conditional:
    case Opcode::Call:
    case Opcode::Fusion:
    case Opcode::AsyncStart:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool FlattenCallGraphPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  // Sequential call sites of each computation, in module order (clones,
  // appended to the module, add theirs at the end in creation order).
  std::map<const Computation*, std::vector<std::pair<Instruction*, size_t>>> sites;
  auto addSites = [&](const Computation& c) {
    for (const auto& in : c.instructions()) {
      if (!isSequentialCall(in->opcode())) continue;
      const auto& called = in->calledComputations();
      for (size_t i = 0; i < called.size(); ++i) sites[called[i]].push_back({in.get(), i});
    }
  };
  for (const auto& c : module.computations()) addSites(*c);
  // Callers before callees: a computation's call sites (clones of its
  // callers included) are all known when it is visited.
  std::vector<Computation*> order = module.postOrder();
  std::reverse(order.begin(), order.end());
  for (Computation* callee : order) {
    std::vector<std::pair<Instruction*, size_t>> mine = sites[callee];
    for (size_t s = 1; s < mine.size(); ++s) {
      std::string name = module.uniqueComputationName(callee->name() + ".clone");
      std::string suffix = name.substr(callee->name().size());
      Computation* copy = cloneComputation(module, *callee, name, suffix);
      std::vector<Computation*> called = mine[s].first->calledComputations();
      called[mine[s].second] = copy;
      mine[s].first->setCalledComputations(std::move(called));
      addSites(*copy);
      changed = true;
    }
  }
  // async-update and async-done that name a computation name their start's.
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions()) {
      Opcode op = in->opcode();
      if ((op != Opcode::AsyncUpdate && op != Opcode::AsyncDone) || in->operandCount() == 0) continue;
      const Instruction* start = in->operand(0);
      if (start->opcode() != Opcode::AsyncStart && start->opcode() != Opcode::AsyncUpdate) continue;
      if (!in->calledComputations().empty() && in->calledComputations() != start->calledComputations()) {
        in->setCalledComputations(start->calledComputations());
        changed = true;
      }
    }
  return changed;
}

}  // namespace tpu::passes
