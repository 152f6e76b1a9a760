// dce: dead instructions, then computations nothing reachable calls.
#include <unordered_set>
#include <vector>

#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

namespace {

// Removes computations that neither the entry nor anything it calls
// (transitively) calls. Without an entry every computation is kept.
bool removeUnreachableComputations(hlo::Module& module) {
  if (!module.entry()) return false;
  std::unordered_set<const hlo::Computation*> reachable{module.entry()};
  std::vector<const hlo::Computation*> stack{module.entry()};
  while (!stack.empty()) {
    const hlo::Computation* c = stack.back();
    stack.pop_back();
    for (const auto& in : c->instructions())
      for (const hlo::Computation* callee : in->calledComputations())
        if (callee && reachable.insert(callee).second) stack.push_back(callee);
  }
  return module.removeComputationsIf([&](const hlo::Computation& c) { return !reachable.count(&c); }) > 0;
}

}  // namespace

bool DcePass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  // Instructions first: a call removed here may leave its callee unreachable.
  for (const auto& c : module.computations()) changed |= removeDeadInstructions(*c) > 0;
  changed |= removeUnreachableComputations(module);
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
