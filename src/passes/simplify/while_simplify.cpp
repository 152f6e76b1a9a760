// while-simplify: loops that run 0 or 1 times, loop-carried values nothing
// reads, and loop-invariant instructions hoisted out of the body.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

// How many instructions call each computation.
std::unordered_map<const Computation*, int> callSiteCounts(const hlo::Module& module) {
  std::unordered_map<const Computation*, int> counts;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      for (const Computation* callee : in->calledComputations()) ++counts[callee];
  return counts;
}

// A loop whose state is a tuple and whose body and condition only this
// loop calls: the shapes we rewrite.
bool isPlainLoop(const Instruction& loop, const std::unordered_map<const Computation*, int>& calls) {
  if (loop.opcode() != Opcode::While || loop.operandCount() != 1 || !loop.shape().isTuple()) return false;
  const Computation* cond = loop.whileCondition();
  const Computation* body = loop.whileBody();
  if (!cond || !body || cond == body || !cond->root() || !body->root()) return false;
  if (calls.at(cond) != 1 || calls.at(body) != 1) return false;
  if (cond->parameterCount() != 1 || body->parameterCount() != 1 || !body->parameter(0) || !cond->parameter(0))
    return false;
  return body->root()->opcode() == Opcode::Tuple && body->root()->operandCount() == loop.shape().tupleSize();
}

// Element k of the value `tuple` as an instruction of the caller: the
// tuple's operand when it is a tuple instruction, else a new GTE.
Instruction* elementOf(Rewriter& rw, Instruction* tuple, int64_t k) {
  if (tuple->opcode() == Opcode::Tuple) return tuple->operand(k);
  Instruction* g = rw.add(Opcode::GetTupleElement, tuple->shape().tupleElement(k), {tuple}, "get-tuple-element",
                          tuple->location());
  g->attrs().tupleIndex = k;
  return g;
}

// ---------------------------------------------------------------- trip count

// A scalar integer constant's value.
std::optional<int64_t> intConstant(const Instruction* i) {
  if (i->opcode() != Opcode::Constant || !i->shape().isScalar() || !hlo::isIntegerType(i->shape().elementType()) ||
      !i->attrs().literal || i->attrs().literal->isElided())
    return std::nullopt;
  return i->attrs().literal->getInt(0);
}

bool compareHolds(hlo::ComparisonDirection d, int64_t a, int64_t b) {
  switch (d) {
    case hlo::ComparisonDirection::EQ: return a == b;
    case hlo::ComparisonDirection::NE: return a != b;
    case hlo::ComparisonDirection::LT: return a < b;
    case hlo::ComparisonDirection::LE: return a <= b;
    case hlo::ComparisonDirection::GT: return a > b;
    case hlo::ComparisonDirection::GE: return a >= b;
  }
  return false;
}

// 0 or 1 when the loop is known to run that many times: the condition
// compares an induction variable (element k, a constant in the init,
// stepped by a constant in the body) with a constant. Nullopt otherwise.
std::optional<int> tripCountZeroOrOne(const Instruction& loop) {
  const Computation& cond = *loop.whileCondition();
  const Computation& body = *loop.whileBody();
  const Instruction* cmp = cond.root();
  if (cmp->opcode() != Opcode::Compare || cond.instructionCount() > 8) return std::nullopt;
  const Instruction* param = cond.parameter(0);
  int side = -1;  // which operand of the compare is the induction variable
  int64_t k = -1;
  for (int s = 0; s < 2; ++s) {
    const Instruction* g = cmp->operand(s);
    if (g->opcode() == Opcode::GetTupleElement && g->operand(0) == param) side = s, k = g->attrs().tupleIndex;
  }
  if (side < 0) return std::nullopt;
  std::optional<int64_t> bound = intConstant(cmp->operand(1 - side));
  const Instruction* init = loop.operand(0);
  if (!bound || init->opcode() != Opcode::Tuple) return std::nullopt;
  std::optional<int64_t> start = intConstant(init->operand(k));
  // The body's next value of element k: i + step.
  const Instruction* next = body.root()->operand(k);
  if (!start || next->opcode() != Opcode::Add) return std::nullopt;
  std::optional<int64_t> step;
  for (int s = 0; s < 2; ++s) {
    const Instruction* g = next->operand(s);
    if (g->opcode() == Opcode::GetTupleElement && g->operand(0) == body.parameter(0) && g->attrs().tupleIndex == k)
      step = intConstant(next->operand(1 - s));
  }
  if (!step || *start > (int64_t{1} << 40) || *start < -(int64_t{1} << 40) || *step > (int64_t{1} << 40) ||
      *step < -(int64_t{1} << 40))
    return std::nullopt;
  auto holds = [&](int64_t i) {
    return side == 0 ? compareHolds(cmp->attrs().comparisonDirection, i, *bound)
                     : compareHolds(cmp->attrs().comparisonDirection, *bound, i);
  };
  if (!holds(*start)) return 0;
  if (!holds(*start + *step)) return 1;
  return std::nullopt;
}

// ---------------------------------------------------------------- rewrites

class LoopSimplifier {
 public:
  LoopSimplifier(Rewriter& rw, hlo::Module& module, std::unordered_map<const Computation*, int>& calls)
      : rw_(rw), module_(module), calls_(calls) {}

  // Returns the loop's replacement (a new while, or a value) or null.
  Instruction* simplify(Instruction& loop) {
    SideEffects effects;
    bool condEffects = false;
    for (const auto& in : loop.whileCondition()->instructions()) condEffects |= effects.has(*in);
    if (!condEffects) {
      std::optional<int> trips = tripCountZeroOrOne(loop);
      if (trips == 0 && loop.operand(0)->shape() == loop.shape()) return loop.operand(0);
      if (trips == 1) return rw_.inlineBody(*loop.whileBody(), std::vector<Instruction*>{loop.operand(0)});
    }
    if (Instruction* smaller = removeDeadElements(loop)) return smaller;
    return hoistInvariants(loop);
  }

 private:
  Instruction* removeDeadElements(Instruction& loop);
  Instruction* hoistInvariants(Instruction& loop);
  // A new while over `init` with the same condition and body, whose
  // parameters take the new state shape.
  Instruction* rebuildLoop(Instruction& loop, Instruction* init);

  Rewriter& rw_;
  hlo::Module& module_;
  std::unordered_map<const Computation*, int>& calls_;
};

Instruction* LoopSimplifier::rebuildLoop(Instruction& loop, Instruction* init) {
  const Shape& state = init->shape();
  loop.whileBody()->parameter(0)->setShape(state);
  loop.whileCondition()->parameter(0)->setShape(state);
  Instruction* fresh = rw_.addLike(loop, state, {init});
  return fresh;
}

// Users of `param` in `c`, which must all be GTEs; nullopt otherwise.
std::optional<std::vector<Instruction*>> gteUsers(const Computation& c, const Instruction* param) {
  std::vector<Instruction*> out;
  for (const auto& in : c.instructions())
    for (const Instruction* op : in->operands())
      if (op == param) {
        if (in->opcode() != Opcode::GetTupleElement) return std::nullopt;
        out.push_back(in.get());
        break;
      }
  if (c.root() == param) return std::nullopt;
  return out;
}

Instruction* LoopSimplifier::removeDeadElements(Instruction& loop) {
  Computation& body = *loop.whileBody();
  Computation& cond = *loop.whileCondition();
  Instruction* bodyParam = body.parameter(0);
  Instruction* condParam = cond.parameter(0);
  const int64_t n = loop.shape().tupleSize();
  if (rw_.isRoot(&loop)) return nullptr;
  std::vector<bool> live(static_cast<size_t>(n), false);
  for (Instruction* user : rw_.users(&loop)) {
    if (user->opcode() != Opcode::GetTupleElement) return nullptr;
    live[static_cast<size_t>(user->attrs().tupleIndex)] = true;
  }
  auto condUses = gteUsers(cond, condParam);
  auto bodyUses = gteUsers(body, bodyParam);
  if (!condUses || !bodyUses) return nullptr;
  for (Instruction* g : *condUses) live[static_cast<size_t>(g->attrs().tupleIndex)] = true;
  // Element j is needed when the body computes a live element (or a side
  // effect) from it: propagate liveness backwards through the body.
  SideEffects effects;
  std::unordered_map<const Instruction*, std::vector<int64_t>> readsOf;  // instruction -> elements it reads
  std::unordered_set<const Instruction*> needed;
  std::vector<const Instruction*> stack;
  auto need = [&](const Instruction* i) {
    if (needed.insert(i).second) stack.push_back(i);
  };
  const Instruction* root = body.root();
  bool grew = true;
  while (grew) {
    grew = false;
    for (int64_t j = 0; j < n; ++j)
      if (live[static_cast<size_t>(j)]) need(root->operand(j));
    for (const auto& in : body.instructions())
      if (in.get() != root && effects.has(*in)) need(in.get());
    while (!stack.empty()) {
      const Instruction* i = stack.back();
      stack.pop_back();
      if (i->opcode() == Opcode::GetTupleElement && i->operand(0) == bodyParam) {
        size_t j = static_cast<size_t>(i->attrs().tupleIndex);
        if (!live[j]) live[j] = grew = true;
        continue;
      }
      for (const Instruction* op : i->operands()) need(op);
      for (const Instruction* p : i->controlPredecessors()) need(p);
    }
  }
  std::vector<int64_t> keep;
  for (int64_t j = 0; j < n; ++j)
    if (live[static_cast<size_t>(j)]) keep.push_back(j);
  if (static_cast<int64_t>(keep.size()) == n) return nullptr;
  std::vector<int64_t> newIndex(static_cast<size_t>(n), -1);
  for (size_t k = 0; k < keep.size(); ++k) newIndex[static_cast<size_t>(keep[k])] = static_cast<int64_t>(k);
  // New init, state shape and body root.
  std::vector<Instruction*> initParts;
  std::vector<Shape> shapes;
  for (int64_t j : keep) {
    initParts.push_back(elementOf(rw_, loop.operand(0), j));
    shapes.push_back(loop.shape().tupleElement(j));
  }
  Instruction* init = rw_.add(Opcode::Tuple, Shape::tuple(shapes), initParts, "tuple", loop.location());
  Rewriter bodyRw(body);
  std::vector<Instruction*> rootParts;
  for (int64_t j : keep) rootParts.push_back(root->operand(j));
  Instruction* newRoot = bodyRw.add(Opcode::Tuple, Shape::tuple(shapes), rootParts, root->name(), root->location());
  bodyRw.setRoot(newRoot);
  // Dead elements' reads in the body are dead themselves (removed below).
  for (Instruction* g : *bodyUses)
    if (newIndex[static_cast<size_t>(g->attrs().tupleIndex)] >= 0)
      g->attrs().tupleIndex = newIndex[static_cast<size_t>(g->attrs().tupleIndex)];
  for (Instruction* g : *condUses) g->attrs().tupleIndex = newIndex[static_cast<size_t>(g->attrs().tupleIndex)];
  bodyRw.finish();
  Instruction* fresh = rebuildLoop(loop, init);
  // The loop's readers read the new loop.
  std::span<Instruction* const> readers = rw_.users(&loop);
  std::vector<Instruction*> users(readers.begin(), readers.end());
  for (Instruction* g : users) {
    Instruction* r = rw_.add(Opcode::GetTupleElement, g->shape(), {fresh}, g->name(), g->location());
    r->attrs().tupleIndex = newIndex[static_cast<size_t>(g->attrs().tupleIndex)];
    rw_.replaceAllUses(g, r);
  }
  return fresh;
}

Instruction* LoopSimplifier::hoistInvariants(Instruction& loop) {
  Computation& body = *loop.whileBody();
  Instruction* bodyParam = body.parameter(0);
  Instruction* root = body.root();
  const int64_t n = loop.shape().tupleSize();
  if (!gteUsers(body, bodyParam)) return nullptr;
  // Elements the body passes through unchanged are invariant, and so is
  // anything computed from them and constants without side effects.
  SideEffects effects;
  std::unordered_set<const Instruction*> invariant;
  for (const auto& in : body.instructions()) {
    const Instruction* i = in.get();
    if (i->opcode() == Opcode::GetTupleElement && i->operand(0) == bodyParam) {
      int64_t j = i->attrs().tupleIndex;
      const Instruction* next = root->operand(j);
      if (next->opcode() == Opcode::GetTupleElement && next->operand(0) == bodyParam &&
          next->attrs().tupleIndex == j)
        invariant.insert(i);
      continue;
    }
    if (i->opcode() == Opcode::Parameter || effects.has(*i) || !i->controlPredecessors().empty() || i == root ||
        !i->shape().isArray())
      continue;
    if (i->opcode() == Opcode::Constant) {
      // Elided constants are filled by name: a copy elsewhere would differ.
      if (i->attrs().literal && !i->attrs().literal->isElided()) invariant.insert(i);
      continue;
    }
    bool all = i->operandCount() > 0;
    for (const Instruction* op : i->operands()) all &= invariant.count(op) != 0;
    if (all) invariant.insert(i);
  }
  // Hoist the invariant values a variant instruction (or the root) reads,
  // unless they are cheap to recompute (constants, views, GTEs).
  auto worthHoisting = [](const Instruction* i) {
    switch (i->opcode()) {
      case Opcode::Constant:
      case Opcode::GetTupleElement:
      case Opcode::Broadcast:
      case Opcode::Iota:
      case Opcode::Reshape:
      case Opcode::Bitcast:
        return false;
      default:
        return true;
    }
  };
  std::vector<Instruction*> hoisted;
  std::unordered_set<const Instruction*> chosen;
  for (const auto& in : body.instructions()) {
    if (invariant.count(in.get())) continue;
    for (Instruction* op : in->operands())
      if (invariant.count(op) && worthHoisting(op) && chosen.insert(op).second) hoisted.push_back(op);
  }
  if (hoisted.empty()) return nullptr;
  std::sort(hoisted.begin(), hoisted.end(), [&](const Instruction* a, const Instruction* b) {
    return a->name() < b->name();
  });
  // Compute the hoisted values before the loop: copy their invariant
  // slices, reading the init where the body reads its state.
  std::unordered_map<const Instruction*, Instruction*> outside;
  std::vector<Instruction*> initParts;
  for (int64_t j = 0; j < n; ++j) initParts.push_back(elementOf(rw_, loop.operand(0), j));
  std::function<Instruction*(Instruction*)> copyOut = [&](Instruction* i) -> Instruction* {
    auto it = outside.find(i);
    if (it != outside.end()) return it->second;
    Instruction* r;
    if (i->opcode() == Opcode::GetTupleElement && i->operand(0) == bodyParam) {
      r = initParts[static_cast<size_t>(i->attrs().tupleIndex)];
    } else {
      std::vector<Instruction*> ops;
      for (Instruction* op : i->operands()) ops.push_back(copyOut(op));
      r = rw_.addLike(*i, i->shape(), ops);
    }
    outside[i] = r;
    return r;
  };
  std::vector<Shape> shapes(loop.shape().tupleElements());
  std::vector<Instruction*> parts = initParts;
  for (Instruction* h : hoisted) {
    parts.push_back(copyOut(h));
    shapes.push_back(h->shape());
  }
  Instruction* init = rw_.add(Opcode::Tuple, Shape::tuple(shapes), parts, "tuple", loop.location());
  // In the body, each hoisted value is read from the state, and passed on.
  Rewriter bodyRw(body);
  std::vector<Instruction*> reads;
  for (size_t k = 0; k < hoisted.size(); ++k) {
    Instruction* g = bodyRw.add(Opcode::GetTupleElement, hoisted[k]->shape(), {bodyParam}, hoisted[k]->name(),
                                hoisted[k]->location());
    g->attrs().tupleIndex = n + static_cast<int64_t>(k);
    bodyRw.replaceAllUses(hoisted[k], g);
    reads.push_back(g);
  }
  std::vector<Instruction*> rootParts(root->operands().begin(), root->operands().end());
  rootParts.insert(rootParts.end(), reads.begin(), reads.end());
  Instruction* newRoot = bodyRw.add(Opcode::Tuple, Shape::tuple(shapes), rootParts, root->name(), root->location());
  bodyRw.setRoot(newRoot);
  bodyRw.finish();
  Instruction* fresh = rebuildLoop(loop, init);
  // Readers of the old loop see its first n elements.
  std::vector<Instruction*> old;
  for (int64_t j = 0; j < n; ++j) {
    Instruction* g = rw_.add(Opcode::GetTupleElement, loop.shape().tupleElement(j), {fresh}, "get-tuple-element",
                             loop.location());
    g->attrs().tupleIndex = j;
    old.push_back(g);
  }
  return rw_.add(Opcode::Tuple, loop.shape(), old, "tuple", loop.location());
}

}  // namespace

bool WhileSimplifyPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  std::unordered_map<const Computation*, int> calls = callSiteCounts(module);
  std::vector<Computation*> order = module.postOrder();
  for (Computation* c : order) {
    if (!anyInstruction(*c, [](const Instruction& i) { return i.opcode() == Opcode::While; })) continue;
    Rewriter rw(*c);
    LoopSimplifier simplifier(rw, module, calls);
    std::vector<Instruction*> loops;
    for (const auto& in : c->instructions())
      if (isPlainLoop(*in, calls) && !rw.hasControlEdges(in.get())) loops.push_back(in.get());
    for (Instruction* loop : loops) {
      Instruction* replacement = simplifier.simplify(*loop);
      if (!replacement) continue;
      rw.replaceAllUses(loop, replacement);
      rw.erase(loop);
    }
    changed |= rw.finish();
  }
  if (changed) {
    // Loops that were removed or inlined leave their computations unused.
    DcePass dce;
    DiagnosticEngine quiet;
    dce.run(module, quiet);
  }
  return changed;
}

}  // namespace tpu::passes::simplify
