// call-inline: calls, and conditionals whose branch is known, replaced by
// the body they run.
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;

namespace {

// The branch a conditional with a constant selector runs (XLA: a pred
// selects branch 0 when true; an index out of range the last branch).
std::optional<int64_t> knownBranch(const Instruction& conditional) {
  const Instruction* selector = conditional.operand(0);
  int64_t n = static_cast<int64_t>(conditional.calledComputations().size());
  if (selector->opcode() != Opcode::Constant || !selector->shape().isScalar() || !selector->attrs().literal ||
      selector->attrs().literal->isElided() || n == 0 || conditional.operandCount() != n + 1)
    return std::nullopt;
  int64_t value = selector->attrs().literal->getInt(0);
  if (selector->shape().elementType() == hlo::ElementType::Pred) return value ? 0 : 1;
  return value < 0 || value >= n ? n - 1 : value;
}

// The computation `site` runs and its arguments, when it can be inlined.
std::optional<std::pair<const Computation*, std::vector<Instruction*>>> inlinable(const Instruction& site,
                                                                                   const Rewriter& rw) {
  if (rw.hasControlEdges(&site)) return std::nullopt;
  const Computation* callee = nullptr;
  std::vector<Instruction*> args;
  if (site.opcode() == Opcode::Call) {
    callee = site.toApply();
    args.assign(site.operands().begin(), site.operands().end());
  } else if (site.opcode() == Opcode::Conditional) {
    std::optional<int64_t> branch = knownBranch(site);
    if (!branch) return std::nullopt;
    callee = site.calledComputations()[static_cast<size_t>(*branch)];
    args.push_back(site.operand(*branch + 1));
  } else {
    return std::nullopt;
  }
  if (!callee || !callee->root() || callee->executionThread() != "main") return std::nullopt;
  // Every parameter must have an argument.
  for (const Instruction* p : callee->parameters())
    if (!p || p->attrs().parameterNumber >= static_cast<int64_t>(args.size())) return std::nullopt;
  return std::make_pair(callee, std::move(args));
}

}  // namespace

bool CallInlinePass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  std::set<Computation*> inlined;
  // Callees first: their own calls are inlined before they are copied.
  for (Computation* c : module.postOrder()) {
    if (!anyInstruction(*c, [](const Instruction& i) {
          return i.opcode() == Opcode::Call || i.opcode() == Opcode::Conditional;
        }))
      continue;
    Rewriter rw(*c);
    std::vector<std::pair<Instruction*, std::pair<const Computation*, std::vector<Instruction*>>>> sites;
    for (const auto& in : c->instructions())
      if (auto target = inlinable(*in, rw)) sites.push_back({in.get(), std::move(*target)});
    for (auto& [site, target] : sites) {
      Instruction* result = rw.inlineBody(*target.first, target.second);
      for (Computation* callee : site->calledComputations()) inlined.insert(callee);
      rw.replaceAllUses(site, result);
      rw.erase(site);
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
