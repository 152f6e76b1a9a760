#include "hlo/module.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace tpu::hlo {

Computation* Module::addComputation(std::unique_ptr<Computation> computation) {
  computation->setParent(this);
  computations_.push_back(std::move(computation));
  return computations_.back().get();
}

Computation* Module::addComputation(std::string name) {
  return addComputation(std::make_unique<Computation>(std::move(name)));
}

void Module::removeComputation(Computation* computation) {
  if (entry_ == computation) entry_ = nullptr;
  auto it = std::find_if(computations_.begin(), computations_.end(),
                         [&](const std::unique_ptr<Computation>& p) { return p.get() == computation; });
  if (it != computations_.end()) computations_.erase(it);
}

int64_t Module::removeComputationsIf(const std::function<bool(const Computation&)>& remove) {
  size_t kept = 0;
  for (size_t i = 0; i < computations_.size(); ++i) {
    if (remove(*computations_[i])) {
      if (entry_ == computations_[i].get()) entry_ = nullptr;
      continue;
    }
    if (kept != i) computations_[kept] = std::move(computations_[i]);
    ++kept;
  }
  int64_t removed = static_cast<int64_t>(computations_.size() - kept);
  computations_.resize(kept);
  return removed;
}

Computation* Module::findComputation(std::string_view name) const {
  for (const auto& c : computations_)
    if (c->name() == name) return c.get();
  return nullptr;
}

ComputationLayout Module::entryComputationLayout() const {
  if (config_.entryComputationLayout) return *config_.entryComputationLayout;
  ComputationLayout layout;
  if (!entry_) return layout;
  for (Instruction* p : entry_->parameters())
    layout.parameters.push_back(p ? p->shape().withDefaultLayout() : Shape());
  if (entry_->root()) layout.result = entry_->root()->shape().withDefaultLayout();
  return layout;
}

std::vector<Computation*> Module::postOrder() const {
  std::vector<Computation*> order;
  std::unordered_set<const Computation*> visited;
  // Iterative DFS over called computations.
  auto visit = [&](Computation* root) {
    if (!visited.insert(root).second) return;
    std::vector<std::pair<Computation*, std::vector<Computation*>>> stack;
    stack.push_back({root, root->calledComputations()});
    std::reverse(stack.back().second.begin(), stack.back().second.end());
    while (!stack.empty()) {
      auto& [c, pending] = stack.back();
      if (!pending.empty()) {
        Computation* next = pending.back();
        pending.pop_back();
        if (visited.insert(next).second) {
          auto callees = next->calledComputations();
          std::reverse(callees.begin(), callees.end());
          stack.push_back({next, std::move(callees)});
        }
        continue;
      }
      order.push_back(c);
      stack.pop_back();
    }
  };
  std::unordered_set<const Computation*> called;
  for (const auto& c : computations_)
    for (Computation* callee : c->calledComputations()) called.insert(callee);
  for (const auto& c : computations_)
    if (c.get() != entry_ && !called.count(c.get())) visit(c.get());
  if (entry_) visit(entry_);
  // Computations only reachable through cycles (invalid, but never drop them).
  for (const auto& c : computations_)
    if (!visited.count(c.get())) visit(c.get());
  return order;
}

std::string Module::uniqueComputationName(std::string_view base) const {
  if (!findComputation(base)) return std::string(base);
  for (int i = 1;; ++i) {
    std::string name = fmt::format("{}.{}", base, i);
    if (!findComputation(name)) return name;
  }
}

// ---------------------------------------------------------------- equality

namespace {

class Comparer {
 public:
  explicit Comparer(std::string* diff) : diff_(diff) {}

  bool fail(std::string message) {
    if (diff_) *diff_ = std::move(message);
    return false;
  }

  bool modules(const Module& a, const Module& b) {
    if (a.name() != b.name()) return fail(fmt::format("module name '{}' vs '{}'", a.name(), b.name()));
    if (!(a.config() == b.config())) return fail("module config (header attributes) differs");
    if (!(a.stackFrames() == b.stackFrames())) return fail("stack frame tables differ");
    if (a.computations().size() != b.computations().size())
      return fail(fmt::format("computation count {} vs {}", a.computations().size(), b.computations().size()));
    std::string entryA = a.entry() ? a.entry()->name() : "", entryB = b.entry() ? b.entry()->name() : "";
    if (entryA != entryB) return fail(fmt::format("entry '{}' vs '{}'", entryA, entryB));
    // Computation order is not meaningful (the printer emits post-order):
    // match by name.
    for (const auto& ca : a.computations()) {
      const Computation* cb = b.findComputation(ca->name());
      if (!cb) return fail(fmt::format("computation '{}' is missing from the second module", ca->name()));
      if (!computations(*ca, *cb)) return false;
    }
    return true;
  }

  bool computations(const Computation& a, const Computation& b) {
    if (a.name() != b.name()) return fail(fmt::format("computation name '{}' vs '{}'", a.name(), b.name()));
    if (a.executionThread() != b.executionThread())
      return fail(fmt::format("computation '{}': execution thread differs", a.name()));
    if (a.instructions().size() != b.instructions().size())
      return fail(fmt::format("computation '{}': {} vs {} instructions", a.name(), a.instructions().size(),
                              b.instructions().size()));
    std::unordered_map<const Instruction*, size_t> indexA, indexB;
    for (size_t i = 0; i < a.instructions().size(); ++i) {
      indexA[a.instructions()[i].get()] = i;
      indexB[b.instructions()[i].get()] = i;
    }
    auto idx = [](const std::unordered_map<const Instruction*, size_t>& m, const Instruction* p) -> int64_t {
      auto it = m.find(p);
      return it == m.end() ? -1 : static_cast<int64_t>(it->second);
    };
    if (idx(indexA, a.root()) != idx(indexB, b.root()))
      return fail(fmt::format("computation '{}': different root", a.name()));
    for (size_t i = 0; i < a.instructions().size(); ++i) {
      const Instruction& x = *a.instructions()[i];
      const Instruction& y = *b.instructions()[i];
      std::string where = fmt::format("computation '{}', instruction '{}'", a.name(), x.name());
      if (x.name() != y.name()) return fail(fmt::format("{}: name vs '{}'", where, y.name()));
      if (x.opcode() != y.opcode())
        return fail(fmt::format("{}: opcode {} vs {}", where, opcodeName(x.opcode()), opcodeName(y.opcode())));
      if (!(x.shape() == y.shape()))
        return fail(fmt::format("{}: shape {} vs {}", where, x.shape().toString(), y.shape().toString()));
      if (x.operandCount() != y.operandCount()) return fail(fmt::format("{}: operand count differs", where));
      for (int64_t k = 0; k < x.operandCount(); ++k)
        if (idx(indexA, x.operand(k)) != idx(indexB, y.operand(k)))
          return fail(fmt::format("{}: operand {} differs", where, k));
      if (x.controlPredecessors().size() != y.controlPredecessors().size())
        return fail(fmt::format("{}: control predecessors differ", where));
      for (size_t k = 0; k < x.controlPredecessors().size(); ++k)
        if (idx(indexA, x.controlPredecessors()[k]) != idx(indexB, y.controlPredecessors()[k]))
          return fail(fmt::format("{}: control predecessor {} differs", where, k));
      if (x.calledComputations().size() != y.calledComputations().size())
        return fail(fmt::format("{}: called computation count differs", where));
      for (size_t k = 0; k < x.calledComputations().size(); ++k) {
        const Computation* cx = x.calledComputations()[k];
        const Computation* cy = y.calledComputations()[k];
        if ((cx ? cx->name() : "") != (cy ? cy->name() : ""))
          return fail(fmt::format("{}: called computation {} differs", where, k));
      }
      if (!(x.attrs() == y.attrs())) return fail(fmt::format("{}: attributes differ", where));
      const CommonAttributes& ca = x.common();
      const CommonAttributes& cb = y.common();
      if (!(ca.metadata == cb.metadata)) return fail(fmt::format("{}: metadata differs", where));
      if (!(ca.sharding == cb.sharding)) return fail(fmt::format("{}: sharding differs", where));
      if (!(ca.backendConfig == cb.backendConfig)) return fail(fmt::format("{}: backend_config differs", where));
      if (!(ca.frontendAttributes == cb.frontendAttributes))
        return fail(fmt::format("{}: frontend_attributes differ", where));
      if (!(ca == cb)) return fail(fmt::format("{}: other attributes differ", where));
    }
    return true;
  }

 private:
  std::string* diff_;
};

}  // namespace

bool structurallyEqual(const Module& a, const Module& b, std::string* firstDifference) {
  return Comparer(firstDifference).modules(a, b);
}

bool isValidName(std::string_view name) {
  auto isStart = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto isRest = [&](char c) { return isStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; };
  if (name.empty() || !isStart(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(), isRest);
}

}  // namespace tpu::hlo
