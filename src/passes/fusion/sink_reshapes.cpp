#include "passes/fusion/sink_reshapes.h"

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::fusion {

namespace {

using hlo::Instruction;
using hlo::Opcode;

// The module's instruction names as they were when the pass started,
// collected on first need: most modules have no reshape to sink, and
// copying every name of a large module into a tree was most of this pass's
// time. Names of instructions removed before then are added back.
class LazyNames {
 public:
  explicit LazyNames(const hlo::Module& module) : module_(module) {}
  std::set<std::string>& get() {
    if (!names_) {
      names_ = passes::instructionNames(module_);
      names_->insert(removed_.begin(), removed_.end());
      removed_.clear();
    }
    return *names_;
  }
  void noteRemoved(const Instruction& in) {
    if (!names_) removed_.push_back(in.name());
  }

 private:
  const hlo::Module& module_;
  std::optional<std::set<std::string>> names_;
  std::vector<std::string> removed_;
};

class ReshapeSinker {
 public:
  ReshapeSinker(hlo::Computation& c, LazyNames& names) : c_(c), names_(names) {
    for (const auto& up : c.instructions()) {
      for (Instruction* o : up->operands()) users_[o].push_back(up.get());
      for (Instruction* p : up->controlPredecessors()) ordered_.insert(p), ordered_.insert(up.get());
    }
  }

  bool run() {
    std::vector<Instruction*> order;
    for (const auto& up : c_.instructions()) order.push_back(up.get());
    for (Instruction* in : order) {
      if (in->opcode() == Opcode::Reshape) foldReshapeOfReshape(in);
      else if (hlo::isElementwise(in->opcode())) sinkBelow(in);
    }
    if (dead_.empty()) return changed_;
    c_.removeInstructionsIf([&](const Instruction& i) {
      if (!dead_.count(&i)) return false;
      names_.noteRemoved(i);
      return true;
    });
    c_.sortTopologically();
    return true;
  }

 private:
  static bool isScalarBroadcast(const Instruction* o) {
    return o->opcode() == Opcode::Broadcast && o->operand(0)->shape().isScalar();
  }

  bool movable(const Instruction* in) const {
    return in->shape().isArray() && !in->shape().isDynamic() && !in->hasSideEffect() && !ordered_.count(in);
  }

  // Every use of `old` reads `now`; `old` goes when nothing reads it.
  void replaceUses(Instruction* old, Instruction* now) {
    for (Instruction* u : users_[old]) {
      for (int64_t k = 0; k < u->operandCount(); ++k)
        if (u->operand(k) == old) u->setOperand(k, now);
      users_[now].push_back(u);
    }
    users_[old].clear();
    if (c_.root() == old) c_.setRoot(now);
    dead_.insert(old);
    changed_ = true;
  }

  void dropUse(Instruction* operand, Instruction* user) {
    std::vector<Instruction*>& u = users_[operand];
    for (size_t k = 0; k < u.size(); ++k)
      if (u[k] == user) {
        u.erase(u.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
    const bool ours = operand->opcode() == Opcode::Reshape || isScalarBroadcast(operand);
    if (u.empty() && ours && c_.root() != operand && movable(operand)) dead_.insert(operand);
  }

  // reshape(reshape(x)) reads x; the identity disappears.
  void foldReshapeOfReshape(Instruction* r) {
    Instruction* inner = r->operand(0);
    if (inner->opcode() != Opcode::Reshape || !movable(r) || !movable(inner)) return;
    Instruction* x = inner->operand(0);
    r->setOperand(0, x);
    users_[x].push_back(r);
    dropUse(inner, r);
    changed_ = true;
    if (x->shape() == r->shape()) replaceUses(r, x);
  }

  // The common source shape's instruction when every operand of e is a
  // reshape of a value of one shape or a scalar's broadcast (nullptr: e
  // cannot move below them).
  const Instruction* reshapedSource(const Instruction* e) const {
    if (!hlo::isElementwise(e->opcode()) || !movable(e)) return nullptr;
    const Instruction* source = nullptr;
    for (const Instruction* o : e->operands()) {
      if (isScalarBroadcast(o)) continue;
      if (o->opcode() != Opcode::Reshape || !movable(o) || !o->operand(0)->shape().isArray() ||
          o->operand(0)->shape().isDynamic())
        return nullptr;
      if (source && source->shape().dimensions() != o->operand(0)->shape().dimensions()) return nullptr;
      source = o->operand(0);
    }
    return source;
  }

  void sinkBelow(Instruction* e) {
    const Instruction* source = reshapedSource(e);
    if (!source) return;
    // As XLA's ReshapeMover: a reshape moves only when every reader of it
    // can move below it too; otherwise the reshape would stay for the
    // others and its copy below e would split a chain of one shape in two
    // (a norm's reduce would see a reshape between it and its elementwise
    // producers).
    for (const Instruction* o : e->operands()) {
      if (isScalarBroadcast(o)) continue;
      if (c_.root() == o) return;
      auto it = users_.find(o);
      if (it == users_.end()) continue;
      for (const Instruction* u : it->second)
        if (u != e && !reshapedSource(u)) return;
    }
    passes::RewriteBuilder b(c_, *e, names_.get());
    hlo::Shape shape = source->shape();
    shape.setElementType(e->shape().elementType());
    std::vector<Instruction*> operands;
    for (Instruction* o : e->operands()) {
      if (o->opcode() == Opcode::Reshape) {
        operands.push_back(o->operand(0));
      } else {
        hlo::Shape bs = source->shape();
        bs.setElementType(o->shape().elementType());
        Instruction* nb = b.add(Opcode::Broadcast, bs, {o->operand(0)});
        nb->common() = o->common();
        operands.push_back(nb);
      }
    }
    Instruction* moved = b.add(e->opcode(), shape, operands);
    moved->shareAttributesOf(*e);  // copy-on-write: a reference count, not a copy of the block
    moved->common() = e->common();
    moved->setName(e->name());
    Instruction* reshape = b.add(Opcode::Reshape, e->shape(), {moved});
    for (Instruction* o : operands) users_[o].push_back(moved);
    users_[moved].push_back(reshape);
    std::vector<Instruction*> old(e->operands().begin(), e->operands().end());
    replaceUses(e, reshape);
    for (Instruction* o : old) dropUse(o, e);
  }

  hlo::Computation& c_;
  LazyNames& names_;
  std::unordered_map<const Instruction*, std::vector<Instruction*>> users_;
  std::unordered_set<const Instruction*> ordered_;
  std::unordered_set<const Instruction*> dead_;
  bool changed_ = false;
};

}  // namespace

bool SinkReshapesPass::run(hlo::Module& module, DiagnosticEngine&) {
  std::unordered_set<const hlo::Computation*> fused;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      if (in->opcode() == Opcode::Fusion && in->fusedComputation()) fused.insert(in->fusedComputation());
  LazyNames names(module);
  bool changed = false;
  for (const auto& c : module.computations())
    if (!fused.count(c.get())) changed |= ReshapeSinker(*c, names).run();
  return changed;
}

}  // namespace tpu::fusion
