#include "passes/fusion/fusion_graph.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

namespace tpu::fusion {

using hlo::Instruction;
using hlo::Opcode;

FusionGraph::FusionGraph(hlo::Computation& computation) : computation_(&computation) {
  const size_t n = computation.instructions().size();
  instructions_.reserve(n);
  index_ = hlo::PointerIndex(n);
  for (const auto& up : computation.instructions()) {
    // The first of equal pointers wins, as a map's emplace would keep it.
    if (!index_.contains(up.get())) index_.set(up.get(), static_cast<uint32_t>(instructions_.size()));
    instructions_.push_back(up.get());
  }
  // An element of a tuple built here is read as the value itself (the
  // expansions return tuples of their results): get-tuple-element of a
  // tuple is a rename, which must not stand between producer and consumer.
  operandStart_.assign(n + 1, 0);
  operandList_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    for (const Instruction* o : instructions_[i]->operands()) {
      const Instruction* t = o->opcode() == Opcode::GetTupleElement ? o->operand(0) : nullptr;
      if (t && t->opcode() == Opcode::Tuple && t->parent() == &computation && o->attrs().tupleIndex >= 0 &&
          o->attrs().tupleIndex < t->operandCount())
        o = t->operand(o->attrs().tupleIndex);
      if (int32_t k = indexOf(o); k >= 0) operandList_.push_back(k);
    }
    operandStart_[i + 1] = static_cast<uint32_t>(operandList_.size());
  }
  root_ = indexOf(computation.root());
  ordered_.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const Instruction* p : instructions_[i]->controlPredecessors()) {
      ordered_[i] = 1;
      if (int32_t k = indexOf(p); k >= 0) ordered_[static_cast<size_t>(k)] = 1;
    }
  // Live: what the root or a side effect needs (operands precede users).
  live_.assign(n, 0);
  if (root_ >= 0) live_[static_cast<size_t>(root_)] = 1;
  for (size_t i = n; i-- > 0;) {
    if (instructions_[i]->hasSideEffect() || ordered_[i]) live_[i] = 1;
    if (!live_[i]) continue;
    for (int32_t k : operandsOf(static_cast<int32_t>(i))) live_[static_cast<size_t>(k)] = 1;
  }
  for (size_t i = 0; i < n && topological_; ++i)
    for (int32_t k : operandsOf(static_cast<int32_t>(i))) topological_ &= k < static_cast<int32_t>(i);
  // Users of k: the live instructions reading it, ascending, each once
  // (counted first, then placed).
  userStart_.assign(n + 1, 0);
  std::vector<int32_t> lastUser(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!live_[i]) continue;
    for (int32_t k : operandsOf(static_cast<int32_t>(i)))
      if (lastUser[static_cast<size_t>(k)] != static_cast<int32_t>(i)) {
        lastUser[static_cast<size_t>(k)] = static_cast<int32_t>(i);
        ++userStart_[static_cast<size_t>(k) + 1];
      }
  }
  for (size_t i = 0; i < n; ++i) userStart_[i + 1] += userStart_[i];
  userList_.resize(userStart_[n]);
  std::vector<uint32_t> fill(userStart_.begin(), userStart_.end() - 1);
  std::fill(lastUser.begin(), lastUser.end(), -1);
  for (size_t i = 0; i < n; ++i) {
    if (!live_[i]) continue;
    for (int32_t k : operandsOf(static_cast<int32_t>(i)))
      if (lastUser[static_cast<size_t>(k)] != static_cast<int32_t>(i)) {
        lastUser[static_cast<size_t>(k)] = static_cast<int32_t>(i);
        userList_[fill[static_cast<size_t>(k)]++] = static_cast<int32_t>(i);
      }
  }
  exporter_.assign(n, -1);
  containing_.resize(n);
  readerCount_.assign(n, 0);
  valueStamp_.assign(n, 0);
  nodes_.reserve(n + n / 2);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = addNode({static_cast<int32_t>(i)}, {static_cast<int32_t>(i)});
    if (live_[i]) continue;
    countReads(id, -1);
    nodes_.back().alive = false;
  }
}

int32_t FusionGraph::indexOf(const Instruction* in) const { return static_cast<int32_t>(index_.find(in)); }

bool FusionGraph::contains(int32_t n, int32_t i) const {
  const std::vector<int32_t>& m = node(n).members;
  return std::binary_search(m.begin(), m.end(), i);
}

std::vector<int32_t> FusionGraph::inputs(int32_t n) const {
  std::vector<int32_t> out;
  for (int32_t m : node(n).members)
    for (int32_t o : operandsOf(m))
      if (!contains(n, o) && std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  return out;
}

std::vector<int32_t> FusionGraph::users(int32_t n, bool* result, size_t limit) const {
  std::vector<int32_t> out;
  if (result) *result = false;
  auto dedupe = [&] {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  };
  if (result)
    for (int32_t o : node(n).outputs) *result |= o == root_;
  // A value read by thousands (a broadcast CSE merged) would make every
  // query linear in its readers; with a limit, stop once it is exceeded.
  size_t nextCheck = limit == SIZE_MAX ? SIZE_MAX : 2 * (limit + 1);
  for (int32_t o : node(n).outputs)
    for (int32_t u : usersOf(o))
      for (int32_t m : containing_[static_cast<size_t>(u)]) {
        if (m == n || !node(m).alive || contains(m, o)) continue;
        out.push_back(m);
        if (out.size() >= nextCheck) {
          dedupe();
          if (out.size() > limit) return out;
          nextCheck = out.size() + 2 * (limit + 1);
        }
      }
  dedupe();
  return out;
}

std::vector<int32_t> FusionGraph::usersWithin(int32_t n, bool* result, size_t limit) const {
  std::vector<int32_t> out;
  *result = false;
  for (int32_t o : node(n).outputs) *result |= o == root_;
  const uint32_t epoch = nextEpoch();
  for (int32_t o : node(n).outputs)
    for (int32_t u : usersOf(o))
      for (int32_t m : containing_[static_cast<size_t>(u)]) {
        if (m == n || stamp_[static_cast<size_t>(m)] == epoch || !node(m).alive || contains(m, o)) continue;
        stamp_[static_cast<size_t>(m)] = epoch;
        out.push_back(m);
        if (out.size() > limit) return out;
      }
  std::sort(out.begin(), out.end());
  return out;
}

bool FusionGraph::readByOtherThan(int32_t i, int32_t a, int32_t b) const {
  for (int32_t u : usersOf(i))
    for (int32_t m : containing_[static_cast<size_t>(u)])
      if (m != a && m != b && node(m).alive && !contains(m, i)) return true;
  return false;
}

uint32_t FusionGraph::nextEpoch() const {
  if (stamp_.size() < nodes_.size()) stamp_.resize(nodes_.size(), 0);
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  return epoch_;
}

std::vector<int32_t> FusionGraph::holders(int32_t i) const {
  std::vector<int32_t> out;
  for (int32_t m : containing_[static_cast<size_t>(i)])
    if (node(m).alive) out.push_back(m);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int32_t> FusionGraph::readers(int32_t i) const {
  std::vector<int32_t> out;
  for (int32_t u : usersOf(i))
    for (int32_t m : containing_[static_cast<size_t>(u)])
      if (node(m).alive && !contains(m, i)) out.push_back(m);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int32_t FusionGraph::addNode(std::vector<int32_t> members, std::vector<int32_t> outputs) {
  const int32_t id = nodeCount();
  for (int32_t o : outputs) exporter_[static_cast<size_t>(o)] = id;
  for (int32_t m : members) containing_[static_cast<size_t>(m)].push_back(id);
  nodes_.push_back({std::move(members), std::move(outputs), true});
  countReads(id, 1);
  return id;
}

void FusionGraph::countReads(int32_t n, int32_t delta) {
  if (++valueEpoch_ == 0) {
    std::fill(valueStamp_.begin(), valueStamp_.end(), 0);
    valueEpoch_ = 1;
  }
  for (int32_t m : node(n).members)
    for (int32_t o : operandsOf(m)) {
      uint32_t& stamp = valueStamp_[static_cast<size_t>(o)];
      if (stamp == valueEpoch_ || contains(n, o)) continue;
      stamp = valueEpoch_;
      readerCount_[static_cast<size_t>(o)] += delta;
    }
}

void FusionGraph::kill(int32_t n) {
  Node& x = nodes_[static_cast<size_t>(n)];
  if (x.alive) countReads(n, -1);
  x.alive = false;
  for (int32_t o : x.outputs)
    if (exporter_[static_cast<size_t>(o)] == n) exporter_[static_cast<size_t>(o)] = -1;
}

std::vector<int32_t> FusionGraph::unionMembers(int32_t a, int32_t b) const {
  std::vector<int32_t> out;
  const auto& x = node(a).members;
  const auto& y = node(b).members;
  out.reserve(x.size() + y.size());
  std::set_union(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
  return out;
}

bool FusionGraph::reachesIndirectly(int32_t from, int32_t to, int budget) const {
  // The answer does not depend on the visiting order (true when `to` is
  // reached or more than `budget` nodes are), so the walk reads the user
  // lists in place: no per-node vectors, no sorting, and a stamp per node
  // instead of searching the visited list.
  nextEpoch();
  std::vector<int32_t>& work = walk_;
  work.clear();
  // Calls f(m) for every live node m that reads an output of n from outside.
  auto forUsers = [&](int32_t n, auto&& f) {
    for (int32_t o : node(n).outputs)
      for (int32_t u : usersOf(o))
        for (int32_t m : containing_[static_cast<size_t>(u)]) {
          if (m == n || !node(m).alive || contains(m, o)) continue;
          if (f(m)) return true;
        }
    return false;
  };
  // More direct users than the budget already answers (the walk would
  // run out): a value read all over the module (a bias broadcast shared by
  // every layer) then costs the budget, not its thousands of readers.
  const bool exceeds = forUsers(from, [&](int32_t m) {
    if (m != to && stamp_[static_cast<size_t>(m)] != epoch_) {
      stamp_[static_cast<size_t>(m)] = epoch_;
      work.push_back(m);
    }
    return work.size() > static_cast<size_t>(std::max(budget, 0));
  });
  if (exceeds) return true;
  for (size_t next = 0; next < work.size(); ++next) {
    if (--budget < 0) return true;
    bool found = forUsers(work[next], [&](int32_t u) {
      if (u == to) return true;
      if (stamp_[static_cast<size_t>(u)] != epoch_) {
        stamp_[static_cast<size_t>(u)] = epoch_;
        work.push_back(u);
      }
      return false;
    });
    if (found) return true;
  }
  return false;
}

NameTable::NameTable(const hlo::Module& module) {
  size_t count = module.computations().size();
  for (const auto& c : module.computations()) count += c->instructions().size();
  used_.reserve(count);
  for (const auto& c : module.computations()) {
    used_.insert(c->name());
    for (const auto& i : c->instructions()) used_.insert(i->name());
  }
}

std::string_view NameTable::keep(std::string name) {
  own_.push_back(std::move(name));
  used_.insert(own_.back());
  return own_.back();
}

std::string NameTable::fresh(const std::string& base) {
  if (!used_.count(base)) return std::string(keep(base));
  int64_t& next = next_[base];
  for (;;) {
    std::string name = fmt::format("{}.{}", base, ++next);
    if (!used_.count(name)) return std::string(keep(std::move(name)));
  }
}

namespace {

// The shared blocks of setSmallAttribute: one prototype instruction per
// (field, value), made at once on first use and never freed (instructions
// of any module may share them until the process ends). Only reference
// counts change afterwards (atomically), so threads may share the table.
constexpr int64_t kSmallIndices = 64;  // parameter numbers, tuple indices
constexpr int64_t kFusionKinds = static_cast<int64_t>(hlo::FusionKind::Custom) + 1;

// Where (field, value) is in the table; -1 when it has no shared block.
int64_t smallSlot(SmallAttribute field, int64_t value) {
  switch (field) {
    case SmallAttribute::ParameterNumber: return value >= 0 && value < kSmallIndices ? value : -1;
    case SmallAttribute::TupleIndex: return value >= 0 && value < kSmallIndices ? kSmallIndices + value : -1;
    case SmallAttribute::FusionKind: return value >= 0 && value < kFusionKinds ? 2 * kSmallIndices + value : -1;
  }
  return -1;
}

void setField(Instruction& in, SmallAttribute field, int64_t value) {
  switch (field) {
    case SmallAttribute::ParameterNumber: in.attrs().parameterNumber = value; break;
    case SmallAttribute::TupleIndex: in.attrs().tupleIndex = value; break;
    case SmallAttribute::FusionKind: in.attrs().fusionKind = static_cast<hlo::FusionKind>(value); break;
  }
}

const Instruction& smallAttributePrototype(int64_t slot) {
  static const auto* table = [] {
    auto* t = new std::vector<std::unique_ptr<Instruction>>;
    for (auto [field, count] : {std::pair{SmallAttribute::ParameterNumber, kSmallIndices},
                                std::pair{SmallAttribute::TupleIndex, kSmallIndices},
                                std::pair{SmallAttribute::FusionKind, kFusionKinds}})
      for (int64_t v = 0; v < count; ++v) {
        t->push_back(std::make_unique<Instruction>(Opcode::Parameter, "", hlo::Shape()));
        setField(*t->back(), field, v);
      }
    return t;
  }();
  return *(*table)[static_cast<size_t>(slot)];
}

}  // namespace

void setSmallAttribute(Instruction& in, SmallAttribute field, int64_t value) {
  const int64_t slot = smallSlot(field, value);
  if (slot >= 0 && !in.hasAttributes()) in.shareAttributesOf(smallAttributePrototype(slot));
  else setField(in, field, value);
}

namespace {

Instruction* addCopy(hlo::Computation& c, const Instruction& in, std::string name,
                     const std::vector<Instruction*>& operands) {
  auto copy = std::make_unique<Instruction>(in.opcode(), std::move(name), in.shape());
  copy->shareAttributesOf(in);  // a reference count, not a copy of the block
  copy->common() = in.common();
  copy->setLocation(in.location());
  copy->setOperands(operands);
  copy->setCalledComputations(in.calledComputations());
  return c.addInstruction(std::move(copy));
}

}  // namespace

BuiltFusion buildFusedComputation(hlo::Module& module, const FusionGraph& graph, const std::vector<int32_t>& members,
                                  const std::vector<int32_t>& outputs, const std::string& name, NameTable* names) {
  BuiltFusion built;
  hlo::Computation* c = module.addComputation(name);
  built.computation = c;
  auto nameFor = [&](const std::string& base) { return names ? names->fresh(base) : base; };
  // Values by instruction index: members' copies by their position in the
  // (ascending) member list, values from outside in a short list (a fusion
  // reads at most a few dozen). No hashing: this runs for every candidate
  // the cost model prices.
  std::vector<Instruction*> memberValue(members.size(), nullptr);
  std::vector<std::pair<int32_t, Instruction*>> outside;
  auto slot = [&](int32_t i) -> Instruction** {
    auto at = std::lower_bound(members.begin(), members.end(), i);
    if (at != members.end() && *at == i) return &memberValue[static_cast<size_t>(at - members.begin())];
    for (auto& [index, v] : outside)
      if (index == i) return &v;
    return nullptr;
  };
  auto operandValue = [&](int32_t o) -> Instruction* {
    if (Instruction** known = slot(o); known && *known) return *known;
    const Instruction* original = graph.instruction(o);
    Instruction* v;
    if (original->opcode() == Opcode::Constant && original->shape().isScalar()) {
      v = addCopy(*c, *original, nameFor(original->name()), {});
    } else {
      const int64_t k = static_cast<int64_t>(built.parameters.size());
      built.parameters.push_back(o);
      v = c->addInstruction(Opcode::Parameter, nameFor(fmt::format("param_{}", k)), original->shape());
      setSmallAttribute(*v, SmallAttribute::ParameterNumber, k);
      v->setLocation(original->location());
    }
    if (Instruction** known = slot(o)) *known = v;  // a member read before its copy is made (not in order)
    else outside.push_back({o, v});
    return v;
  };
  std::vector<Instruction*> ops;
  for (int32_t m : members) {
    const Instruction& original = *graph.instruction(m);
    ops.clear();
    for (int32_t o : graph.operandsOf(m)) ops.push_back(operandValue(o));
    const hlo::Computation* body = original.opcode() == Opcode::Fusion ? original.fusedComputation() : nullptr;
    if (!body) {
      *slot(m) = addCopy(*c, original, nameFor(original.name()), ops);
      continue;
    }
    // A fusion member: its body is copied in, its parameters bound to the operands.
    std::unordered_map<const Instruction*, Instruction*> inner;
    for (const auto& up : body->instructions()) {
      const Instruction& i = *up;
      if (i.opcode() == Opcode::Parameter) {
        int64_t k = i.attrs().parameterNumber;
        if (k >= 0 && k < static_cast<int64_t>(ops.size())) inner[&i] = ops[static_cast<size_t>(k)];
        continue;
      }
      std::vector<Instruction*> innerOps;
      for (const Instruction* o : i.operands()) innerOps.push_back(inner.at(o));
      inner[&i] = addCopy(*c, i, nameFor(i.name()), innerOps);
    }
    *slot(m) = inner.at(body->root());
  }
  auto valueOf = [&](int32_t o) {
    Instruction** v = slot(o);
    if (!v || !*v) throw std::out_of_range("buildFusedComputation: an output that is not a member");
    return *v;
  };
  if (outputs.size() == 1) {
    c->setRoot(valueOf(outputs[0]));
  } else {
    std::vector<hlo::Shape> shapes;
    std::vector<Instruction*> elements;
    for (int32_t o : outputs) {
      elements.push_back(valueOf(o));
      shapes.push_back(elements.back()->shape());
    }
    Instruction* t = c->addInstruction(Opcode::Tuple, nameFor("tuple"), hlo::Shape::tuple(std::move(shapes)));
    t->setOperands(elements);
    c->setRoot(t);
  }
  return built;
}

}  // namespace tpu::fusion
