#include "passes/simplify/rewriter.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpu::passes::simplify {

using hlo::Instruction;
using hlo::Opcode;

bool SideEffects::has(const Instruction& instruction) {
  if (instruction.hasSideEffect()) return true;
  for (const hlo::Computation* c : instruction.calledComputations())
    if (c && computationHas(*c)) return true;
  return false;
}

bool SideEffects::computationHas(const hlo::Computation& computation) {
  auto it = computations_.find(&computation);
  if (it != computations_.end()) return it->second;
  computations_[&computation] = false;  // call cycles are invalid; do not recurse forever
  bool any = false;
  for (const auto& in : computation.instructions())
    if (has(*in)) {
      any = true;
      break;
    }
  computations_[&computation] = any;
  return any;
}

bool isRemovableWhenUnused(const Instruction& instruction, SideEffects& effects) {
  if (instruction.opcode() == Opcode::Parameter) return false;
  return !effects.has(instruction);
}

bool anyInstruction(const hlo::Computation& computation, const std::function<bool(const Instruction&)>& predicate) {
  for (const auto& in : computation.instructions())
    if (predicate(*in)) return true;
  return false;
}

int64_t removeDeadInstructions(hlo::Computation& computation,
                               const std::unordered_set<const Instruction*>& erased) {
  hlo::PointerIndex live(computation.instructions().size());
  std::vector<const Instruction*> stack;
  auto keep = [&](const Instruction* i) {
    if (i && !live.contains(i)) {
      live.set(i, 1);
      stack.push_back(i);
    }
  };
  keep(computation.root());
  SideEffects effects;
  for (const auto& in : computation.instructions())
    if (!erased.count(in.get()) && !isRemovableWhenUnused(*in, effects)) keep(in.get());
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    for (const Instruction* op : i->operands()) keep(op);
    for (const Instruction* p : i->controlPredecessors()) keep(p);
  }
  if (live.size() == computation.instructions().size()) return 0;
  return computation.removeInstructionsIf([&](const Instruction& i) { return !live.contains(&i); });
}

Rewriter::Rewriter(hlo::Computation& computation) : computation_(computation) {
  for (const auto& in : computation.instructions()) {
    if (!in->controlPredecessors().empty()) {
      controlled_.insert(in.get());
      for (const Instruction* p : in->controlPredecessors()) controlled_.insert(p);
    }
  }
}

void Rewriter::ensureUsers() const {
  if (usersBuilt_) return;
  usersBuilt_ = true;
  size_t n = computation_.instructions().size();
  slots_ = hlo::PointerIndex(n);
  users_.reserve(n);
  for (const auto& in : computation_.instructions()) slotOf(in.get());
  // Users arrive in order, so a user reading an operand twice is the last
  // one listed: no search of the list (a parameter read by thousands of
  // instructions made building the lists quadratic).
  for (const auto& in : computation_.instructions())
    for (Instruction* op : in->operands()) {
      UserList& list = slotOf(op);
      if (list.empty() || list.back() != in.get()) list.push_back(in.get());
    }
}

Rewriter::UserList& Rewriter::slotOf(const Instruction* instruction) const {
  int64_t at = slots_.find(instruction);
  if (at >= 0) return users_[static_cast<size_t>(at)];
  slots_.set(instruction, static_cast<uint32_t>(users_.size()));
  return users_.emplace_back();
}

std::span<Instruction* const> Rewriter::users(const Instruction* instruction) const {
  ensureUsers();
  int64_t at = slots_.find(instruction);
  if (at < 0) return {};
  const UserList& list = users_[static_cast<size_t>(at)];
  return {list.begin(), list.end()};
}

bool Rewriter::hasSingleUse(const Instruction* instruction) const {
  if (isRoot(instruction)) return false;
  std::span<Instruction* const> u = users(instruction);
  if (u.size() != 1) return false;
  return std::count(u[0]->operands().begin(), u[0]->operands().end(), instruction) == 1;
}

void Rewriter::addUse(Instruction* operand, Instruction* user) const {
  if (!usersBuilt_) return;  // built from the IR when first needed
  UserList& list = slotOf(operand);
  if (std::find(list.begin(), list.end(), user) == list.end()) list.push_back(user);
}

// Removes `user` from `list`; true when the list became empty.
bool Rewriter::removeUser(UserList& list, const Instruction* user) {
  Instruction** end = std::remove(list.begin(), list.end(), user);
  if (end == list.end()) return false;
  UserList kept;
  kept.assign(list.begin(), end);
  list = std::move(kept);
  return list.empty();
}

void Rewriter::dropUse(Instruction* operand, Instruction* user) {
  if (!usersBuilt_) return;
  if (std::find(user->operands().begin(), user->operands().end(), operand) != user->operands().end()) return;
  if (slots_.find(operand) < 0) return;
  if (removeUser(slotOf(operand), user)) unused_.push_back(operand);
}

void Rewriter::ensureNames() {
  if (namesBuilt_) return;
  names_.reserve(computation_.instructions().size() * 2);
  for (const auto& in : computation_.instructions()) names_.insert(in->name());
  namesBuilt_ = true;
}

std::string Rewriter::keepName(std::string name) {
  ownNames_.push_back(std::make_unique<std::string>(name));
  names_.insert(*ownNames_.back());
  return name;
}

std::string Rewriter::freshName(std::string_view base) {
  ensureNames();
  // Drop a trailing ".N" so rewrites of rewrites do not grow names.
  std::string stem(base);
  size_t dot = stem.rfind('.');
  if (dot != std::string::npos && dot + 1 < stem.size() &&
      std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(dot) + 1, stem.end(), [](char c) { return c >= '0' && c <= '9'; }))
    stem.resize(dot);
  // Each stem counts on from its last fresh name: linear, not quadratic,
  // in the names a pass makes.
  int64_t& n = nextSuffix_[stem];
  for (;;) {
    std::string name = fmt::format("{}.{}", stem, ++n);
    if (!names_.count(name)) return keepName(std::move(name));
  }
}

std::string Rewriter::nameLike(const std::string& name) {
  ensureNames();
  if (!names_.count(name)) return keepName(name);
  return freshName(name);
}

Instruction* Rewriter::inlineBody(const hlo::Computation& callee, std::span<Instruction* const> args) {
  std::unordered_map<const Instruction*, Instruction*> map;
  for (const auto& up : callee.instructions()) {
    const Instruction& in = *up;
    if (in.opcode() == Opcode::Parameter) {
      int64_t n = in.attrs().parameterNumber;
      map[&in] = n >= 0 && n < static_cast<int64_t>(args.size()) ? args[static_cast<size_t>(n)] : nullptr;
      continue;
    }
    std::vector<Instruction*> operands;
    for (const Instruction* o : in.operands()) operands.push_back(map.at(o));
    Instruction* copy = computation_.addInstruction(in.opcode(), nameLike(in.name()), in.shape());
    copy->setOperands(std::span<Instruction* const>(operands.data(), operands.size()));
    for (Instruction* o : operands) addUse(o, copy);
    copy->shareAttributesOf(in);  // copy-on-write: a reference count, not a copy of the block
    copy->common() = in.common();
    copy->setLocation(in.location());
    copy->setCalledComputations(in.calledComputations());
    for (const Instruction* p : in.controlPredecessors()) {
      auto it = map.find(p);
      if (it != map.end() && it->second->opcode() != Opcode::Parameter) {
        copy->addControlPredecessor(it->second);
        controlled_.insert(copy);
        controlled_.insert(it->second);
      }
    }
    map[&in] = copy;
  }
  changed_ = appended_ = true;
  return map.at(callee.root());
}

Instruction* Rewriter::add(Opcode opcode, hlo::Shape shape, std::vector<Instruction*> operands, std::string_view base,
                           SourceLocation location) {
  Instruction* in = computation_.addInstruction(opcode, freshName(base), std::move(shape));
  in->setOperands(std::span<Instruction* const>(operands.data(), operands.size()));
  in->setLocation(location);
  for (Instruction* op : operands) addUse(op, in);
  // Not a change until something uses it: an instruction a rule made and
  // then did not use is removed again at finish().
  appended_ = true;
  unused_.push_back(in);
  return in;
}

Instruction* Rewriter::addLike(const Instruction& model, hlo::Shape shape, std::vector<Instruction*> operands) {
  Instruction* in = add(model.opcode(), std::move(shape), std::move(operands), model.name(), model.location());
  in->shareAttributesOf(model);  // copy-on-write: callers that change a field unshare it
  in->common() = model.common();
  in->setCalledComputations(model.calledComputations());
  return in;
}

Instruction* Rewriter::addConstant(hlo::Literal literal, std::string_view base, SourceLocation location) {
  Instruction* c = add(Opcode::Constant, literal.shape(), {}, base, location);
  c->attrs().literal = std::move(literal);
  return c;
}

void Rewriter::replaceAllUses(Instruction* old, Instruction* replacement) {
  if (old == replacement) return;
  ensureUsers();
  unused_.push_back(old);  // a root has no users but dies here all the same
  UserList list = std::move(slotOf(old));
  for (Instruction* user : list) {
    // The replacement's list holds `user` exactly when `user` already
    // reads it: asked of the user's few operands, not of the list (CSE
    // folds thousands of equal broadcasts into one, whose list grows by
    // one user each time).
    bool listed = false;
    for (int64_t i = 0; i < user->operandCount(); ++i) listed |= user->operand(i) == replacement;
    for (int64_t i = 0; i < user->operandCount(); ++i)
      if (user->operand(i) == old) user->setOperand(i, replacement);
    if (!listed) slotOf(replacement).push_back(user);
  }
  if (computation_.root() == old) computation_.setRoot(replacement);
  changed_ = true;
}

void Rewriter::setOperand(Instruction* user, int64_t index, Instruction* operand) {
  Instruction* old = user->operand(index);
  if (old == operand) return;
  user->setOperand(index, operand);
  dropUse(old, user);
  addUse(operand, user);
  changed_ = true;
}

void Rewriter::setRoot(Instruction* root) {
  if (computation_.root() == root) return;
  computation_.setRoot(root);
  changed_ = true;
}

bool Rewriter::removeNewlyDead() {
  // Only what lost its last use here can have died here: walk from those,
  // in time proportional to what is removed, not to the computation.
  // Users still alive per operand that lost some, counted down instead of
  // removed from its list one at a time (an operand read by thousands of
  // CSE'd duplicates made that quadratic); the lists are filtered once at
  // the end.
  hlo::PointerIndex dead, counted;
  std::vector<size_t> alive;
  std::vector<Instruction*> touched;
  std::vector<Instruction*> work(unused_.begin(), unused_.end());
  for (const Instruction* e : erased_) work.push_back(const_cast<Instruction*>(e));
  auto aliveUsers = [&](const Instruction* i) {
    int64_t at = counted.find(i);
    return at >= 0 ? alive[static_cast<size_t>(at)] : users(i).size();
  };
  while (!work.empty()) {
    Instruction* i = work.back();
    work.pop_back();
    if (dead.contains(i) || isRoot(i) || aliveUsers(i) != 0 || hasControlEdges(i)) continue;
    if (!erased_.count(i) && !isRemovableWhenUnused(*i, effects_)) continue;
    dead.set(i, 1);
    const auto& ops = i->operands();
    for (size_t k = 0; k < ops.size(); ++k) {
      Instruction* op = ops[k];
      if (slots_.find(op) < 0 || std::find(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(k), op) !=
                                     ops.begin() + static_cast<std::ptrdiff_t>(k))
        continue;  // untracked, or counted for an earlier operand slot
      int64_t at = counted.find(op);
      if (at < 0) {
        at = static_cast<int64_t>(alive.size());
        counted.set(op, static_cast<uint32_t>(at));
        alive.push_back(users(op).size());
        touched.push_back(op);
      }
      size_t& left = alive[static_cast<size_t>(at)];
      if (left > 0 && --left == 0) work.push_back(op);
    }
  }
  for (Instruction* op : touched) {
    UserList& list = slotOf(op);
    Instruction** end = std::remove_if(list.begin(), list.end(), [&](const Instruction* u) { return dead.contains(u); });
    if (end == list.end()) continue;
    UserList kept;
    kept.assign(list.begin(), end);
    list = std::move(kept);
  }
  if (dead.size() == 0) return false;
  computation_.removeInstructionsIf([&](const Instruction& i) { return dead.contains(&i); });
  return true;
}

namespace {

// Drops the unused parameters of `fused`, called only by `callers`; returns
// whether it dropped any.
bool dropUnusedParameters(hlo::Computation& fused, const std::vector<Instruction*>& callers) {
  std::vector<Instruction*> parameters = fused.parameters();
  std::unordered_set<const Instruction*> used;
  for (const auto& i : fused.instructions())
    for (int64_t k = 0; k < i->operandCount(); ++k) used.insert(i->operand(k));
  used.insert(fused.root());
  std::vector<int64_t> kept;  // old parameter numbers, in order
  for (int64_t k = 0; k < static_cast<int64_t>(parameters.size()); ++k)
    if (parameters[static_cast<size_t>(k)] == nullptr || used.count(parameters[static_cast<size_t>(k)])) kept.push_back(k);
  if (kept.size() == parameters.size()) return false;
  for (const Instruction* caller : callers)
    if (caller->operandCount() != static_cast<int64_t>(parameters.size())) return false;  // malformed: leave it
  std::unordered_set<const Instruction*> dropped;
  for (Instruction* p : parameters)
    if (p && !used.count(p)) dropped.insert(p);
  fused.removeInstructionsIf([&](const Instruction& i) { return dropped.count(&i) != 0; });
  for (size_t n = 0; n < kept.size(); ++n)
    if (Instruction* p = parameters[static_cast<size_t>(kept[n])]) p->attrs().parameterNumber = static_cast<int64_t>(n);
  for (Instruction* caller : callers) {
    std::vector<Instruction*> operands;
    operands.reserve(kept.size());
    for (int64_t k : kept) operands.push_back(caller->operand(k));
    caller->setOperands(operands);
  }
  return true;
}

}  // namespace

bool removeUnusedFusionParameters(hlo::Module& module) {
  std::unordered_map<hlo::Computation*, std::vector<Instruction*>> fusionCallers;
  std::unordered_set<const hlo::Computation*> otherwiseCalled;
  for (const auto& c : module.computations())
    for (const auto& i : c->instructions())
      for (hlo::Computation* callee : i->calledComputations()) {
        if (i->opcode() == Opcode::Fusion)
          fusionCallers[callee].push_back(i.get());
        else
          otherwiseCalled.insert(callee);
      }
  bool changed = false;
  // Callee before caller in the module's order is not guaranteed, so repeat
  // until a dropped operand leaves no parameter of an enclosing fusion unused.
  for (bool again = true; again;) {
    again = false;
    for (const auto& c : module.computations()) {
      auto found = fusionCallers.find(c.get());
      if (found == fusionCallers.end() || otherwiseCalled.count(c.get())) continue;
      if (dropUnusedParameters(*c, found->second)) again = changed = true;
    }
  }
  return changed;
}

bool Rewriter::finish() {
  if (!changed_ && !appended_) return false;
  if (usersBuilt_) {
    removeNewlyDead();
  } else {
    removeDeadInstructions(computation_, erased_);
  }
  if (!changed_) return false;  // only instructions nothing used, now gone
  if (appended_) computation_.sortTopologically();
  return true;
}

}  // namespace tpu::passes::simplify
