// cse: common subexpressions merged into their first occurrence.
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
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

bool isCommutative(const Instruction& i) { return hlo::hasFlag(i.opcode(), hlo::kCommutative) && i.operandCount() == 2; }

bool containsToken(const hlo::Shape& s) {
  if (s.isToken()) return true;
  if (s.isTuple())
    for (const hlo::Shape& e : s.tupleElements())
      if (containsToken(e)) return true;
  return false;
}

// Instructions CSE may merge: pure, deterministic, not tied to control or
// token order; constants only when their data is in the module.
bool mergeable(const Instruction& i, Rewriter& rw) {
  Opcode op = i.opcode();
  if (rw.hasSideEffect(&i) || rw.hasControlEdges(&i) || containsToken(i.shape())) return false;
  if (op == Opcode::Parameter || hlo::isBarrier(op)) return false;
  switch (op) {
    case Opcode::Constant: return i.attrs().literal && !i.attrs().literal->isElided();
    case Opcode::Iota: return true;
    default: return i.operandCount() > 0;  // replica-id and friends are left alone, as XLA does
  }
}

// Structural equality of called computations (reducers written twice by a
// frontend, as PyTorch/XLA does for every reduce). Cached per pair.
class ComputationEquality {
 public:
  bool equal(const Computation* a, const Computation* b) {
    if (a == b) return true;
    if (!a || !b) return false;
    auto key = std::make_pair(std::min(a, b), std::max(a, b));
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    cache_[key] = false;  // a recursive call on the same pair is not equal
    bool same = compare(*a, *b);
    cache_[key] = same;
    return same;
  }

 private:
  bool compare(const Computation& a, const Computation& b) {
    if (a.instructionCount() != b.instructionCount() || a.instructionCount() > 64) return false;
    std::unordered_map<const Instruction*, const Instruction*> map;
    for (int64_t k = 0; k < a.instructionCount(); ++k) {
      const Instruction& x = *a.instructions()[static_cast<size_t>(k)];
      const Instruction& y = *b.instructions()[static_cast<size_t>(k)];
      if (x.opcode() != y.opcode() || !(x.shape() == y.shape()) || !(x.attrs() == y.attrs()) ||
          x.operandCount() != y.operandCount() || x.hasSideEffect() || !x.controlPredecessors().empty() ||
          !y.controlPredecessors().empty())
        return false;
      if (x.opcode() == Opcode::Constant && x.attrs().literal && x.attrs().literal->isElided()) return false;
      for (int64_t o = 0; o < x.operandCount(); ++o) {
        auto m = map.find(x.operand(o));
        if (m == map.end() || m->second != y.operand(o)) return false;
      }
      if (x.calledComputations().size() != y.calledComputations().size()) return false;
      for (size_t c = 0; c < x.calledComputations().size(); ++c)
        if (!equal(x.calledComputations()[c], y.calledComputations()[c])) return false;
      map[&x] = &y;
    }
    auto root = map.find(a.root());
    return root != map.end() && root->second == b.root();
  }

  std::map<std::pair<const Computation*, const Computation*>, bool> cache_;
};

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

// Operands in the order CSE compares them (commutative pairs sorted).
std::pair<const Instruction*, const Instruction*> orderedPair(const Instruction& i) {
  const Instruction* a = i.operand(0);
  const Instruction* b = i.operand(1);
  return std::less<const Instruction*>()(b, a) ? std::make_pair(b, a) : std::make_pair(a, b);
}

struct KeyHash {
  size_t operator()(const Instruction* i) const {
    size_t h = static_cast<size_t>(i->opcode());
    h = mix(h, static_cast<size_t>(i->shape().elementType()));
    if (i->shape().isArray())
      for (int64_t d : i->shape().dimensions()) h = mix(h, static_cast<size_t>(d));
    if (isCommutative(*i)) {
      auto [a, b] = orderedPair(*i);
      h = mix(mix(h, std::hash<const void*>()(a)), std::hash<const void*>()(b));
    } else {
      for (const Instruction* op : i->operands()) h = mix(h, std::hash<const void*>()(op));
    }
    const hlo::InstructionAttributes& at = i->attrs();
    for (int64_t d : at.dimensions) h = mix(h, static_cast<size_t>(d));
    h = mix(h, static_cast<size_t>(at.tupleIndex));
    h = mix(h, static_cast<size_t>(at.iotaDimension));
    if (at.literal) {
      const std::vector<uint8_t>& data = at.literal->data();
      size_t step = std::max<size_t>(1, data.size() / 64);  // a sample: equality checks the rest
      for (size_t k = 0; k < data.size(); k += step) h = mix(h, data[k]);
    }
    return h;
  }
};

struct KeyEqual {
  ComputationEquality* computations;
  bool operator()(const Instruction* x, const Instruction* y) const {
    if (x->opcode() != y->opcode() || !(x->shape() == y->shape()) || x->operandCount() != y->operandCount())
      return false;
    if (isCommutative(*x)) {
      if (orderedPair(*x) != orderedPair(*y)) return false;
    } else if (!std::equal(x->operands().begin(), x->operands().end(), y->operands().begin())) {
      return false;
    }
    if (!(x->attrs() == y->attrs())) return false;
    const hlo::CommonAttributes &cx = x->common(), &cy = y->common();
    if (!(cx.sharding == cy.sharding) || !(cx.backendConfig == cy.backendConfig) ||
        !(cx.frontendAttributes == cy.frontendAttributes))
      return false;
    if (x->calledComputations().size() != y->calledComputations().size()) return false;
    for (size_t c = 0; c < x->calledComputations().size(); ++c)
      if (!computations->equal(x->calledComputations()[c], y->calledComputations()[c])) return false;
    return true;
  }
};

bool cseComputation(Computation& computation, ComputationEquality& computations) {
  Rewriter rw(computation);
  std::unordered_set<const Instruction*, KeyHash, KeyEqual> seen(computation.instructions().size(), KeyHash{},
                                                                 KeyEqual{&computations});
  // Constants and iotas first, wherever they appear: they have no operands,
  // so merging them never needs a later instruction earlier.
  std::vector<Instruction*> order;
  order.reserve(computation.instructions().size());
  for (const auto& in : computation.instructions())
    if (in->operandCount() == 0) order.push_back(in.get());
  for (const auto& in : computation.instructions())
    if (in->operandCount() != 0) order.push_back(in.get());
  for (Instruction* in : order) {
    if (!mergeable(*in, rw)) continue;
    auto [it, inserted] = seen.insert(in);
    if (inserted) continue;
    rw.replaceAllUses(in, const_cast<Instruction*>(*it));
  }
  if (!rw.changed()) return false;
  // A merged constant may now be used before its position: restore order.
  computation.sortTopologically();
  return rw.finish();
}

}  // namespace

bool CsePass::run(hlo::Module& module, DiagnosticEngine&) {
  ComputationEquality computations;
  bool changed = false;
  for (const auto& c : module.computations()) changed |= cseComputation(*c, computations);
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
