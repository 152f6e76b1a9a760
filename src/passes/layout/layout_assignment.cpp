#include "passes/layout/layout_assignment.h"
#include "passes/layout/physical_layout.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "hlo/computation.h"
#include "hlo/module.h"
#include "hlo/pointer_index.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes::layout {

namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

// Constraint priorities: higher wins; each class takes the first layout
// offered at the highest priority.
enum Priority : int { kFill = 0, kTarget = 2, kFixedUse = 3, kFixed = 4, kLevels = 5 };

// Ops whose results alias their operands or callees (one class per leaf).
bool isForwarding(Opcode op) {
  return op == Opcode::Tuple || op == Opcode::GetTupleElement || hlo::isControlFlow(op) ||
         (hlo::isBarrier(op) && hlo::isAlias(op));
}

// Ops that cannot change a layout: operands of the result's rank share it.
bool keepsLayout(Opcode op) {
  if (op == Opcode::Copy) return false;
  if (hlo::isElementwise(op)) return true;
  switch (op) {
    case Opcode::BitcastConvert:
    case Opcode::Concatenate:
    case Opcode::Pad:
    case Opcode::Slice:
    case Opcode::DynamicSlice:
    case Opcode::DynamicUpdateSlice:
    case Opcode::Reverse:
    case Opcode::ReduceWindow:
    case Opcode::SelectAndScatter:
    case Opcode::Scatter:
    case Opcode::Sort:
    case Opcode::Map:
    case Opcode::AllReduce:
    case Opcode::CollectivePermute:
    case Opcode::Cholesky:
    case Opcode::TriangularSolve:
    case Opcode::SetDimensionSize:
      return true;
    default:
      return false;
  }
}

// Ops whose result layouts are taken as given (their meaning or their
// callee depends on them): the pass works around them.
bool hasFixedLayouts(Opcode op) {
  switch (op) {
    case Opcode::Bitcast:
    case Opcode::Fusion:
    case Opcode::CustomCall:
    case Opcode::Infeed:
    case Opcode::Outfeed:
    case Opcode::Recv:
    case Opcode::RecvDone:
    case Opcode::Send:
    case Opcode::SendDone:
    case Opcode::AsyncStart:
    case Opcode::AsyncUpdate:
    case Opcode::AsyncDone:
    case Opcode::AllGatherStart:
    case Opcode::AllGatherDone:
    case Opcode::AllReduceStart:
    case Opcode::AllReduceDone:
    case Opcode::CollectivePermuteStart:
    case Opcode::CollectivePermuteDone:
    case Opcode::CopyStart:
    case Opcode::CopyDone:
    case Opcode::RngGetAndUpdateState:
      return true;
    default:
      return false;
  }
}

void collectLeaves(const Shape& s, std::vector<const Shape*>& out) {
  if (s.isTuple()) {
    for (const Shape& e : s.tupleElements()) collectLeaves(e, out);
  } else {
    out.push_back(&s);
  }
}

int64_t leafOffset(const Shape& tuple, int64_t index) {
  int64_t n = 0;
  for (int64_t i = 0; i < index && i < tuple.tupleSize(); ++i) n += tuple.tupleElement(i).leafCount();
  return n;
}

std::string m2mText(const M2M& m) {
  std::string s = "{";
  for (size_t i = 0; i < m.size(); ++i) s += (i ? "," : "") + std::to_string(m[i]);
  return s + "}";
}

M2M layoutOf(const Shape& s) {
  if (s.hasLayout() && isPermutation(s.layout().minorToMajor, s.rank())) return s.layout().minorToMajor;
  return defaultM2M(s.rank());
}

// Whether layoutOf(s) == m, without building layoutOf(s).
bool hasM2M(const Shape& s, const M2M& m) {
  const int64_t rank = s.rank();
  if (s.hasLayout() && isPermutation(s.layout().minorToMajor, rank)) return s.layout().minorToMajor == m;
  if (static_cast<int64_t>(m.size()) != rank) return false;
  for (int64_t i = 0; i < rank; ++i)
    if (m[static_cast<size_t>(i)] != rank - 1 - i) return false;
  return true;
}

// Whether layoutOf(a) == layoutOf(b), without building either.
bool sameM2M(const Shape& a, const Shape& b) {
  const bool ha = a.hasLayout() && isPermutation(a.layout().minorToMajor, a.rank());
  const bool hb = b.hasLayout() && isPermutation(b.layout().minorToMajor, b.rank());
  if (ha && hb) return a.layout().minorToMajor == b.layout().minorToMajor;
  if (ha) return hasM2M(b, a.layout().minorToMajor);
  if (hb) return hasM2M(a, b.layout().minorToMajor);
  return a.rank() == b.rank();
}

// Major-to-minor dimension lists to minor_to_major.
M2M fromMajorToMinor(std::vector<int64_t> majorToMinor) {
  std::reverse(majorToMinor.begin(), majorToMinor.end());
  return majorToMinor;
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// What a use needs of its operand: per leaf, acceptable layouts (empty
// for leaves without a requirement).
struct Requirement {
  std::vector<std::vector<M2M>> leaves;
  int origin = -1;
};

class Assigner {
 public:
  Assigner(hlo::Module& module, const LayoutOptions& options, DiagnosticEngine& diags)
      : module_(module), options_(options), diags_(diags) {}

  bool run();
  LayoutReport report;
  // Remarks are built only for a caller that reads them.
  bool wantRemarks() const { return options_.remarks && options_.report; }

 private:
  struct Pos {
    uint32_t ord;  // the instruction's ordinal
    int32_t leaf;
    int32_t rank;  // -1: not an array leaf
  };
  static constexpr uint32_t kNoOrdinal = UINT32_MAX;
  struct Suggestion {
    int64_t cls;
    uint32_t layout;  // number in layouts_
    int origin;
  };
  // Layouts by number (a module has few distinct ones): classes and fixed
  // positions hold a number, not a vector each. Number 0 is the empty list.
  uint32_t intern(const M2M& m) {
    auto [it, fresh] = layoutIds_.try_emplace(m, static_cast<uint32_t>(layouts_.size()));
    if (fresh) layouts_.push_back(m);
    return it->second;
  }
  struct M2MHash {
    size_t operator()(const M2M& m) const {
      uint64_t h = m.size();
      for (int64_t d : m) h = (h ^ static_cast<uint64_t>(d)) * 0x100000001b3ULL;
      return static_cast<size_t>(h);
    }
  };

  // Dense number of an instruction of a processed computation (-1: none).
  // The tables hold operands and users as ordinals (buildPositions), so the
  // pass looks instructions up only for the roots and parameters of
  // computations (kept at hand) and for the remarks of copies: the table of
  // every instruction is built on the first such lookup (on large modules
  // each lookup in it is a cache miss).
  int64_t ordinal(const Instruction* inst) const {
    if (auto it = landmarks_.find(inst); it != landmarks_.end()) return it->second;
    if (!ordinalsBuilt_) {
      ordinals_ = hlo::PointerIndex(insts_.size());
      for (size_t k = 0; k < insts_.size(); ++k) ordinals_.set(insts_[k], static_cast<uint32_t>(k));
      ordinalsBuilt_ = true;
    }
    return ordinals_.find(inst);
  }
  uint32_t ordinal32(const Instruction* inst) const {
    int64_t k = ordinal(inst);
    return k < 0 ? kNoOrdinal : static_cast<uint32_t>(k);
  }
  bool hasPositions(const Instruction* inst) const { return ordinal(inst) >= 0; }
  int64_t pos(const Instruction* inst, int64_t leaf) const {
    int64_t k = ordinal(inst);
    if (k < 0) throw std::out_of_range("layout-assignment: instruction without positions");
    return base_[static_cast<size_t>(k)] + leaf;
  }
  int64_t find(int64_t p) {
    while (parent_[static_cast<size_t>(p)] != p) {
      parent_[static_cast<size_t>(p)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(p)])];
      p = parent_[static_cast<size_t>(p)];
    }
    return p;
  }
  void unite(int64_t a, int64_t b) {
    a = find(a), b = find(b);
    if (a == b) return;
    if (a > b) std::swap(a, b);
    parent_[static_cast<size_t>(b)] = a;  // the earliest position represents the class
  }
  void uniteOrdinals(uint32_t a, int64_t aLeaf, uint32_t b, int64_t bLeaf, int64_t count) {
    if (a == kNoOrdinal || b == kNoOrdinal) return;
    for (int64_t k = 0; k < count; ++k) unite(base_[a] + aLeaf + k, base_[b] + bLeaf + k);
  }
  // Ordinal of operand `j` of the instruction numbered `ord` (kNoOrdinal:
  // outside the processed computations).
  uint32_t operandOrdinal(uint32_t ord, int64_t j) const { return opList_[opStart_[ord] + static_cast<size_t>(j)]; }
  // Where a layout came from, formatted only when a remark needs it (most
  // never are): one record per constraint, no string built while seeding.
  enum class OriginKind : uint8_t {
    Text, EntryParameter, FixedDefinition, FixedOperand, CustomCallConstraint, DotLhs, DotRhs, DotResult,
    ConvInput, ConvKernel, ConvOutput, CollectiveDimension
  };
  struct Origin {
    OriginKind kind = OriginKind::Text;
    Opcode op = Opcode::Parameter;
    const Instruction* inst = nullptr;  // an instruction of the module (this pass removes only its own copies)
    int64_t number = 0;
    const char* text = nullptr;
  };
  int origin(const char* text) { return addOrigin({OriginKind::Text, Opcode::Parameter, nullptr, 0, text}); }
  int origin(OriginKind kind, const Instruction* inst, int64_t number = 0) {
    return addOrigin({kind, inst->opcode(), inst, number, nullptr});
  }
  int addOrigin(Origin o) {
    origins_.push_back(o);
    return static_cast<int>(origins_.size() - 1);
  }
  std::string originText(int o) const;

  void collectComputations();
  void buildPositions();
  void seed();
  void addRequirement(uint32_t user, int64_t operand, std::vector<std::vector<M2M>> leaves, int originId);
  void suggest(int64_t position, const M2M& m2m, int priority, int originId);
  void propagate();
  void propagateFrom(int64_t cls, const M2M& m2m, int priority, int originId);
  void toOperand(uint32_t ord, int64_t leaf, const M2M& m2m, int priority, int originId);
  void toUsers(uint32_t ord, const M2M& m2m, int priority, int originId);

  // Rewriting.
  const M2M& finalLayout(int64_t position) const;
  void applyLayouts();
  Instruction* relayout(Computation& c, Instruction* value, const std::vector<std::vector<M2M>>& want,
                        int64_t leafBase, const std::string& producedBy, const std::string& requiredBy);
  void fixFixedDefinitions();
  void insertUseCopies();
  void placeCopies();
  void mergeCopies();
  void makeBitcast(const Computation& c, Instruction* inst);
  void tile(Instruction* inst) const;
  void finish();
  std::string newName(const std::string& base);
  // Adds an instruction to a processed computation (which is then sorted).
  Instruction* add(Computation& c, Opcode op, std::string name, Shape shape) {
    grown_.insert(&c);
    return c.addInstruction(op, std::move(name), std::move(shape));
  }
  // Users of the values of the computations copies were added to, kept up
  // to date while copies move (placeCopies): each user once, in no
  // particular order. Built on first use.
  std::vector<Instruction*>& usesOf(const Instruction* x);
  void dropUse(const Instruction* x, const Instruction* user);
  // Removes a copy this pass made (removed from its computation at the end:
  // one sweep per computation, not one per copy).
  void retire(Instruction* copy);
  void removeRetired();
  static void redirect(const std::vector<Instruction*>& users, Instruction* from, Instruction* to);
  std::string producedByText(const Instruction* inst, int64_t leaf);

  hlo::Module& module_;
  const LayoutOptions& options_;
  DiagnosticEngine& diags_;
  std::vector<Computation*> processed_;  // entry and control-flow callees, callees first
  std::unordered_set<const Computation*> processedSet_;
  // Instructions of the processed computations by dense ordinal: the first
  // position of each (base_), its operands (CSR, as ordinals) and its users
  // (CSR: users of ordinal k are userList_[userStart_[k] .. userStart_[k + 1]),
  // in program order, each once).
  mutable hlo::PointerIndex ordinals_;
  mutable bool ordinalsBuilt_ = false;
  std::unordered_map<const Instruction*, uint32_t> landmarks_;  // roots, parameters of callees
  std::vector<Instruction*> insts_;  // by ordinal
  std::vector<uint32_t> compStart_;  // ordinals of processed_[i]: compStart_[i] .. compStart_[i + 1]
  std::vector<char> inOrder_;        // per processed_[i]: operands precede users, no control edges
  std::unordered_set<const Computation*> grown_;  // instructions added (copies): sorted at the end
  std::vector<int64_t> base_;
  std::vector<uint32_t> opStart_;  // operand ordinals of ordinal k: opList_[opStart_[k] .. opStart_[k + 1])
  std::vector<uint32_t> opList_;
  std::vector<uint32_t> userStart_;
  std::vector<uint32_t> userList_;  // ordinals
  std::vector<Pos> positions_;
  std::vector<int64_t> parent_;
  // Array positions of each class (CSR by representative: memberStart_[cls] ..).
  std::vector<uint32_t> memberStart_;
  std::vector<uint32_t> memberList_;
  std::vector<char> set_;
  std::deque<M2M> layouts_{M2M{}};  // a deque: references stay valid as it grows
  std::unordered_map<M2M, uint32_t, M2MHash> layoutIds_{{M2M{}, 0}};
  std::vector<uint32_t> classLayout_;
  std::vector<int> classOrigin_;
  std::vector<uint32_t> fixed_;  // per position: the layout it must have (when isFixed_)
  std::vector<char> isFixed_;
  std::vector<int> fixedOrigin_;  // per position: origin of the fixed layout (-1: not fixed)
  // Requirements on operands: (user ordinal, operand number, requirement),
  // in user order (seeding visits users in order); few instructions have any.
  struct UseRequirement {
    uint32_t user;
    int64_t operand;
    Requirement requirement;
  };
  std::vector<UseRequirement> requirements_;
  std::vector<Origin> origins_;
  std::array<std::deque<Suggestion>, kLevels> queues_;
  std::set<std::string> names_;
  bool namesKnown_ = false;
  std::vector<Instruction*> copies_;  // inserted array copies (null once removed)
  std::unordered_map<const Instruction*, std::vector<Instruction*>> uses_;
  bool usesBuilt_ = false;
  std::unordered_set<const Instruction*> retired_;
  std::unordered_map<const Instruction*, LayoutRemark> copyInfo_;
  std::optional<hlo::ComputationLayout> entryLayout_;
  Shape entryResult_;
};

std::string Assigner::originText(int o) const {
  const Origin& r = origins_[static_cast<size_t>(o)];
  const std::string_view op = r.inst ? hlo::opcodeName(r.op) : std::string_view();
  const std::string& name = r.inst ? r.inst->name() : std::string();
  switch (r.kind) {
    case OriginKind::Text:
      return r.text;
    case OriginKind::EntryParameter:
      return fmt::format("entry parameter {} layout", r.number);
    case OriginKind::FixedDefinition:
      return fmt::format("{} %{} (fixed layout)", op, name);
    case OriginKind::FixedOperand:
      return fmt::format("operand {} of {} %{} (fixed layout)", r.number, op, name);
    case OriginKind::CustomCallConstraint:
      return fmt::format("operand_layout_constraints of custom-call %{}", name);
    case OriginKind::DotLhs:
      return fmt::format("dot %{} LHS (contracting dimensions minor)", name);
    case OriginKind::DotRhs:
      return fmt::format("dot %{} RHS (K x N or N x K)", name);
    case OriginKind::DotResult:
      return fmt::format("dot %{} result (batch, rows, columns)", name);
    case OriginKind::ConvInput:
      return fmt::format("convolution %{} input (features minor, batch second-minor)", name);
    case OriginKind::ConvKernel:
      return fmt::format("convolution %{} kernel (output features minor)", name);
    case OriginKind::ConvOutput:
      return fmt::format("convolution %{} output (features minor)", name);
    case OriginKind::CollectiveDimension:
      return fmt::format("{} %{} (dimension {} most major)", op, name, r.number);
  }
  return {};
}

void Assigner::collectComputations() {
  // Computations reached from the entry through control flow are laid out
  // together; the others (fused, reducers, comparators, async bodies) keep
  // their layouts, with defaults where none is set.
  std::vector<Computation*> order = module_.postOrder();
  std::unordered_set<const Computation*> reached;
  std::vector<Computation*> stack;
  if (module_.entry()) stack.push_back(module_.entry()), reached.insert(module_.entry());
  while (!stack.empty()) {
    Computation* c = stack.back();
    stack.pop_back();
    for (const auto& up : c->instructions()) {
      Opcode op = up->opcode();
      if (!hlo::isControlFlow(op)) continue;
      for (Computation* callee : up->calledComputations())
        if (callee && reached.insert(callee).second) stack.push_back(callee);
    }
  }
  for (Computation* c : order)
    if (reached.count(c)) processed_.push_back(c), processedSet_.insert(c);
}

void Assigner::buildPositions() {
  size_t count = 0;
  for (Computation* c : processed_) count += c->instructions().size();
  insts_.reserve(count);
  base_.reserve(count);
  positions_.reserve(count + count / 4);
  compStart_.reserve(processed_.size() + 1);
  std::vector<const Shape*> leaves;
  for (Computation* c : processed_) {
    compStart_.push_back(static_cast<uint32_t>(insts_.size()));
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      const auto ord = static_cast<uint32_t>(insts_.size());
      if (inst == c->root() || (c != module_.entry() && inst->opcode() == Opcode::Parameter))
        landmarks_.emplace(inst, ord);  // what control flow and the entry result look up
      insts_.push_back(inst);
      base_.push_back(static_cast<int64_t>(positions_.size()));
      const Shape& s = inst->shape();
      if (!s.isTuple()) {
        positions_.push_back({ord, 0, s.isArray() ? static_cast<int32_t>(s.rank()) : -1});
        continue;
      }
      leaves.clear();
      collectLeaves(s, leaves);
      for (size_t k = 0; k < leaves.size(); ++k)
        positions_.push_back(
            {ord, static_cast<int32_t>(k), leaves[k]->isArray() ? static_cast<int32_t>(leaves[k]->rank()) : -1});
    }
  }
  compStart_.push_back(static_cast<uint32_t>(count));
  // Operands as ordinals. Most operands are defined a few instructions
  // before their use: those are found in insts_ itself. The others are
  // numbered through a table of just those instructions, filled in one
  // sweep over insts_ (a table of every instruction costs a cache miss per
  // lookup on large modules). A computation whose operands all precede
  // their users (and without control edges) needs no sorting at the end
  // unless copies are added to it.
  constexpr uint32_t kWindow = 8;
  struct Far {
    uint32_t edge, user;
    uint32_t ci;
  };
  std::vector<Far> far;
  opStart_.assign(count + 1, 0);
  opList_.clear();
  opList_.reserve(count * 2);
  inOrder_.assign(processed_.size(), 1);
  for (size_t ci = 0; ci < processed_.size(); ++ci)
    for (uint32_t ord = compStart_[ci]; ord < compStart_[ci + 1]; ++ord) {
      const Instruction* inst = insts_[ord];
      for (const Instruction* o : inst->operands()) {
        uint32_t k = kNoOrdinal;
        for (uint32_t d = 1; d <= kWindow && ord >= compStart_[ci] + d; ++d)
          if (insts_[ord - d] == o) {
            k = ord - d;
            break;
          }
        if (k == kNoOrdinal) far.push_back({static_cast<uint32_t>(opList_.size()), ord, static_cast<uint32_t>(ci)});
        opList_.push_back(k);
      }
      if (!inst->controlPredecessors().empty()) inOrder_[ci] = 0;
      opStart_[ord + 1] = static_cast<uint32_t>(opList_.size());
    }
  if (!far.empty()) {
    // Slot of each instruction some far operand names, then its ordinal.
    hlo::PointerIndex slots(far.size());
    std::vector<const Instruction*> named;
    for (Far& f : far) {
      const Instruction* o = insts_[f.user]->operand(static_cast<int64_t>(f.edge - opStart_[f.user]));
      if (slots.find(o) < 0) slots.set(o, static_cast<uint32_t>(named.size())), named.push_back(o);
    }
    std::vector<uint32_t> slotOrdinal(named.size(), kNoOrdinal);
    for (uint32_t k = 0; k < count; ++k)
      if (int64_t slot = slots.find(insts_[k]); slot >= 0) slotOrdinal[static_cast<size_t>(slot)] = k;
    for (const Far& f : far) {
      const Instruction* o = insts_[f.user]->operand(static_cast<int64_t>(f.edge - opStart_[f.user]));
      const uint32_t k = slotOrdinal[static_cast<size_t>(slots.find(o))];
      opList_[f.edge] = k;
      if (k == kNoOrdinal || k < compStart_[f.ci] || k >= f.user) inOrder_[f.ci] = 0;
    }
  }
  // Users, as Computation::computeUsers lists them: program order, each
  // user once. Counted first, then filled (one flat array).
  std::vector<uint32_t> lastUser(count, kNoOrdinal);
  userStart_.assign(count + 1, 0);
  for (uint32_t ord = 0; ord < count; ++ord)
    for (uint32_t e = opStart_[ord]; e < opStart_[ord + 1]; ++e) {
      uint32_t k = opList_[e];
      if (k == kNoOrdinal || lastUser[k] == ord) continue;
      lastUser[k] = ord;
      ++userStart_[k + 1];
    }
  for (size_t k = 0; k < count; ++k) userStart_[k + 1] += userStart_[k];
  userList_.resize(userStart_[count]);
  std::vector<uint32_t> fill(userStart_.begin(), userStart_.end() - 1);
  std::fill(lastUser.begin(), lastUser.end(), kNoOrdinal);
  for (uint32_t ord = 0; ord < count; ++ord)
    for (uint32_t e = opStart_[ord]; e < opStart_[ord + 1]; ++e) {
      uint32_t k = opList_[e];
      if (k == kNoOrdinal || lastUser[k] == ord) continue;
      lastUser[k] = ord;
      userList_[fill[k]++] = ord;
    }
  parent_.resize(positions_.size());
  for (size_t i = 0; i < parent_.size(); ++i) parent_[i] = static_cast<int64_t>(i);
  // First leaf of each element of a tuple-shaped value, computed once per
  // tuple that get-tuple-elements read (leafOffset per use is quadratic).
  std::unordered_map<uint32_t, std::vector<int64_t>> elementLeaf;
  auto elementOffset = [&](uint32_t tupleOrd, const Shape& t, int64_t index) -> int64_t {
    auto [it, fresh] = elementLeaf.try_emplace(tupleOrd);
    if (fresh) {
      int64_t n = 0;
      for (const Shape& e : t.tupleElements()) it->second.push_back(n), n += e.leafCount();
    }
    return index >= 0 && index < static_cast<int64_t>(it->second.size()) ? it->second[static_cast<size_t>(index)]
                                                                         : leafOffset(t, index);
  };
  for (uint32_t ord = 0; ord < count; ++ord) {
    Instruction* inst = insts_[ord];
    const Shape& s = inst->shape();
    switch (inst->opcode()) {
      case Opcode::Tuple: {
        int64_t offset = 0;  // leafOffset(s, i), summed as it goes
        for (int64_t i = 0; i < inst->operandCount(); ++i) {
          uniteOrdinals(ord, offset, operandOrdinal(ord, i), 0, inst->operand(i)->shape().leafCount());
          if (i < s.tupleSize()) offset += s.tupleElement(i).leafCount();
        }
        break;
      }
      case Opcode::GetTupleElement: {
        const Shape& t = inst->operand(0)->shape();
        uint32_t tupleOrd = operandOrdinal(ord, 0);
        if (t.isTuple() && tupleOrd != kNoOrdinal)
          uniteOrdinals(ord, 0, tupleOrd, elementOffset(tupleOrd, t, std::as_const(*inst).attrs().tupleIndex),
                        s.leafCount());
        break;
      }
      case Opcode::OptimizationBarrier:
      case Opcode::AddDependency:
      case Opcode::Domain: {
        int64_t leafCount = s.leafCount();
        if (inst->operandCount() > 0 && inst->operand(0)->shape().leafCount() == leafCount)
          uniteOrdinals(ord, 0, operandOrdinal(ord, 0), 0, leafCount);
        break;
      }
      case Opcode::While: {
        int64_t leafCount = s.leafCount();
        Computation* cond = inst->whileCondition();
        Computation* body = inst->whileBody();
        if (!cond || !body || inst->operandCount() != 1) break;
        uniteOrdinals(ord, 0, operandOrdinal(ord, 0), 0, leafCount);
        if (Instruction* p = body->parameter(0)) uniteOrdinals(ord, 0, ordinal32(p), 0, leafCount);
        if (Instruction* p = cond->parameter(0)) uniteOrdinals(ord, 0, ordinal32(p), 0, leafCount);
        if (body->root()) uniteOrdinals(ord, 0, ordinal32(body->root()), 0, leafCount);
        break;
      }
      case Opcode::Call: {
        Computation* callee = inst->toApply();
        if (!callee) break;
        std::vector<Instruction*> params = callee->parameters();
        for (int64_t i = 0; i < inst->operandCount() && i < static_cast<int64_t>(params.size()); ++i)
          if (Instruction* p = params[static_cast<size_t>(i)])
            uniteOrdinals(ordinal32(p), 0, operandOrdinal(ord, i), 0, p->shape().leafCount());
        if (callee->root()) uniteOrdinals(ord, 0, ordinal32(callee->root()), 0, s.leafCount());
        break;
      }
      case Opcode::Conditional: {
        const auto& branches = inst->calledComputations();
        for (size_t b = 0; b < branches.size(); ++b) {
          Computation* br = branches[b];
          if (!br) continue;
          if (static_cast<int64_t>(b + 1) < inst->operandCount())
            if (Instruction* p = br->parameter(0))
              uniteOrdinals(ordinal32(p), 0, operandOrdinal(ord, static_cast<int64_t>(b + 1)), 0,
                            p->shape().leafCount());
          if (br->root()) uniteOrdinals(ord, 0, ordinal32(br->root()), 0, s.leafCount());
        }
        break;
      }
      default:
        break;
    }
  }
  const size_t np = positions_.size();
  std::vector<uint32_t> rep(np, UINT32_MAX);
  memberStart_.assign(np + 1, 0);
  for (size_t i = 0; i < np; ++i)
    if (positions_[i].rank >= 0) {
      rep[i] = static_cast<uint32_t>(find(static_cast<int64_t>(i)));
      ++memberStart_[rep[i] + 1];
    }
  for (size_t i = 0; i < np; ++i) memberStart_[i + 1] += memberStart_[i];
  memberList_.resize(memberStart_[np]);
  std::vector<uint32_t> next(memberStart_.begin(), memberStart_.end() - 1);
  for (size_t i = 0; i < np; ++i)
    if (rep[i] != UINT32_MAX) memberList_[next[rep[i]]++] = static_cast<uint32_t>(i);
  set_.assign(positions_.size(), 0);
  isFixed_.assign(positions_.size(), 0);
  fixed_.assign(positions_.size(), 0);
  fixedOrigin_.assign(positions_.size(), -1);
  classLayout_.assign(positions_.size(), 0);
  classOrigin_.assign(positions_.size(), -1);
}

void Assigner::suggest(int64_t position, const M2M& m2m, int priority, int originId) {
  if (position < 0 || positions_[static_cast<size_t>(position)].rank < 0) return;
  if (!isPermutation(m2m, positions_[static_cast<size_t>(position)].rank)) return;
  int64_t cls = find(position);
  if (set_[static_cast<size_t>(cls)]) return;
  queues_[static_cast<size_t>(priority)].push_back({cls, intern(m2m), originId});
}

void Assigner::addRequirement(uint32_t user, int64_t operand, std::vector<std::vector<M2M>> leaves,
                              int originId) {
  const uint32_t x = operandOrdinal(user, operand);
  for (size_t k = 0; k < leaves.size(); ++k)
    if (!leaves[k].empty() && x != kNoOrdinal)
      suggest(base_[x] + static_cast<int64_t>(k), leaves[k][0], kFixedUse, originId);
  for (auto it = requirements_.rbegin(); it != requirements_.rend() && it->user == user; ++it)
    if (it->operand == operand) {
      it->requirement = {std::move(leaves), originId};
      return;
    }
  requirements_.push_back({user, operand, {std::move(leaves), originId}});
}

void Assigner::seed() {
  Computation* entry = module_.entry();
  bool keep = options_.entryLayouts == EntryLayouts::Keep;
  entryLayout_ = module_.config().entryComputationLayout;
  // 1. Fixed definitions: entry parameters (kept), ops with fixed layouts.
  for (size_t ci = 0; ci < processed_.size(); ++ci) {
    const Computation* c = processed_[ci];
    for (uint32_t ord = compStart_[ci]; ord < compStart_[ci + 1]; ++ord) {
      Instruction* inst = insts_[ord];
      bool entryParam = c == entry && inst->opcode() == Opcode::Parameter && keep;
      if (!entryParam && !hasFixedLayouts(inst->opcode())) continue;
      std::vector<const Shape*> leaves;
      const Shape* given = &inst->shape();
      int64_t number = std::as_const(*inst).attrs().parameterNumber;
      if (entryParam && entryLayout_ && number >= 0 &&
          number < static_cast<int64_t>(entryLayout_->parameters.size()) &&
          entryLayout_->parameters[static_cast<size_t>(number)].compatible(inst->shape()))
        given = &entryLayout_->parameters[static_cast<size_t>(number)];
      collectLeaves(*given, leaves);
      int o = entryParam ? origin(OriginKind::EntryParameter, inst, number) : origin(OriginKind::FixedDefinition, inst);
      for (size_t k = 0; k < leaves.size(); ++k) {
        if (!leaves[k]->isArray()) continue;
        int64_t p = base_[ord] + static_cast<int64_t>(k);
        M2M m = layoutOf(*leaves[k]);
        fixed_[static_cast<size_t>(p)] = intern(m);
        isFixed_[static_cast<size_t>(p)] = 1;
        fixedOrigin_[static_cast<size_t>(p)] = o;
        suggest(p, m, kFixed, o);
      }
    }
  }
  // The entry result, as a requirement on the root.
  if (entry && entry->root() && keep) {
    const Shape* given = &entry->root()->shape();
    if (entryLayout_ && entryLayout_->result.compatible(entry->root()->shape())) given = &entryLayout_->result;
    std::vector<const Shape*> leaves;
    collectLeaves(*given, leaves);
    int o = origin("entry result layout");
    for (size_t k = 0; k < leaves.size(); ++k)
      if (leaves[k]->isArray()) suggest(pos(entry->root(), static_cast<int64_t>(k)), layoutOf(*leaves[k]), kFixed, o);
  }
  // 2. Uses with fixed or target layouts.
  for (uint32_t ord = 0; ord < insts_.size(); ++ord) {
    {
      Instruction* inst = insts_[ord];
      Opcode op = inst->opcode();
      const auto& a = std::as_const(*inst).attrs();  // const: no attributes made for ops without
      if (hasFixedLayouts(op)) {
        for (int64_t j = 0; j < inst->operandCount(); ++j) {
          const Shape* want = &inst->operand(j)->shape();
          OriginKind why = OriginKind::FixedOperand;
          if (op == Opcode::Fusion && inst->fusedComputation()) {
            if (Instruction* p = inst->fusedComputation()->parameter(j)) want = &p->shape();
          } else if (op == Opcode::CustomCall && a.operandLayoutConstraints &&
                     j < static_cast<int64_t>(a.operandLayoutConstraints->size())) {
            want = &(*a.operandLayoutConstraints)[static_cast<size_t>(j)];
            why = OriginKind::CustomCallConstraint;
          }
          std::vector<const Shape*> leaves;
          collectLeaves(*want, leaves);
          std::vector<std::vector<M2M>> req(leaves.size());
          // Without an explicit constraint, custom calls take the default layout.
          bool defaults = op == Opcode::CustomCall && !a.operandLayoutConstraints;
          for (size_t k = 0; k < leaves.size(); ++k)
            if (leaves[k]->isArray())
              req[k] = {defaults ? defaultM2M(leaves[k]->rank()) : layoutOf(*leaves[k])};
          if (static_cast<int64_t>(leaves.size()) == inst->operand(j)->shape().leafCount())
            addRequirement(ord, j, std::move(req), origin(why, inst, j));
        }
        continue;
      }
      if (!inst->shape().isArray()) continue;
      int64_t rank = inst->shape().rank();
      if (op == Opcode::Dot && inst->operandCount() >= 2) {
        const hlo::DotDimensionNumbers& d = *a.dotDims;
        const Shape& l = inst->operand(0)->shape();
        const Shape& r = inst->operand(1)->shape();
        if (!l.isArray() || !r.isArray()) continue;
        auto split = [](int64_t rnk, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
          std::vector<int64_t> free;
          for (int64_t i = 0; i < rnk; ++i)
            if (!contains(batch, i) && !contains(contract, i)) free.push_back(i);
          return free;
        };
        std::vector<int64_t> lFree = split(l.rank(), d.lhsBatchDimensions, d.lhsContractingDimensions);
        std::vector<int64_t> rFree = split(r.rank(), d.rhsBatchDimensions, d.rhsContractingDimensions);
        auto concat = [](std::vector<int64_t> x, const std::vector<int64_t>& y, const std::vector<int64_t>& z) {
          x.insert(x.end(), y.begin(), y.end());
          x.insert(x.end(), z.begin(), z.end());
          return x;
        };
        // LHS rows stream with K in lanes; RHS K x N (weights) or N x K (x @ y.T).
        M2M lhs = fromMajorToMinor(concat(d.lhsBatchDimensions, lFree, d.lhsContractingDimensions));
        M2M rhsKN = fromMajorToMinor(concat(d.rhsBatchDimensions, d.rhsContractingDimensions, rFree));
        M2M rhsNK = fromMajorToMinor(concat(d.rhsBatchDimensions, rFree, d.rhsContractingDimensions));
        addRequirement(ord, 0, {{lhs}}, origin(OriginKind::DotLhs, inst));
        // Prefer the right-hand side's existing order when it is one of the two.
        std::vector<M2M> rhs = {rhsKN, rhsNK};
        if (r.hasLayout() && layoutOf(r) == rhsNK) std::swap(rhs[0], rhs[1]);
        addRequirement(ord, 1, {rhs}, origin(OriginKind::DotRhs, inst));
        suggest(base_[ord], defaultM2M(rank), kTarget,
                origin(OriginKind::DotResult, inst));
      } else if (op == Opcode::Convolution && inst->operandCount() >= 2 && a.convDims) {
        const hlo::ConvolutionDimensionNumbers& d = *a.convDims;
        auto activations = [](int64_t batch, int64_t feature, const std::vector<int64_t>& spatial) {
          std::vector<int64_t> mtm = spatial;
          mtm.push_back(batch);
          mtm.push_back(feature);
          return fromMajorToMinor(mtm);
        };
        std::vector<int64_t> k = d.kernelSpatialDimensions;
        k.push_back(d.kernelInputFeatureDimension);
        k.push_back(d.kernelOutputFeatureDimension);
        addRequirement(ord, 0, {{activations(d.inputBatchDimension, d.inputFeatureDimension, d.inputSpatialDimensions)}},
                       origin(OriginKind::ConvInput, inst));
        addRequirement(ord, 1, {{fromMajorToMinor(k)}},
                       origin(OriginKind::ConvKernel, inst));
        suggest(base_[ord], activations(d.outputBatchDimension, d.outputFeatureDimension, d.outputSpatialDimensions),
                kTarget, origin(OriginKind::ConvOutput, inst));
      } else if ((op == Opcode::AllGather || op == Opcode::ReduceScatter || op == Opcode::AllToAll) &&
                 a.dimensions.size() == 1 && inst->operandCount() == 1 && inst->operand(0)->shape().isArray()) {
        // The collective dimension most major: each device's block is contiguous.
        int64_t dim = a.dimensions[0];
        if (dim < 0 || dim >= rank) continue;
        M2M m;
        for (int64_t i = rank - 1; i >= 0; --i)
          if (i != dim) m.push_back(i);
        m.push_back(dim);
        int o = origin(OriginKind::CollectiveDimension, inst, dim);
        addRequirement(ord, 0, {{m}}, o);
        suggest(base_[ord], m, kTarget, o);
      }
    }
  }
}

void Assigner::toOperand(uint32_t ord, int64_t leaf, const M2M& m2m, int priority, int originId) {
  const Instruction* inst = insts_[ord];
  Opcode op = inst->opcode();
  const auto& a = inst->attrs();
  auto operandPos = [&](int64_t j) -> int64_t {
    const uint32_t x = operandOrdinal(ord, j);
    if (x == kNoOrdinal || !inst->operand(j)->shape().isArray()) return -1;
    return base_[x];
  };
  if (!inst->shape().isArray()) {
    // Sort, variadic all-reduce: result leaf k comes from operand k.
    if (keepsLayout(op) && op != Opcode::ReduceWindow && inst->shape().leafCount() == inst->operandCount()) {
      int64_t p = operandPos(leaf);
      if (p >= 0 && static_cast<int64_t>(m2m.size()) == inst->operand(leaf)->shape().rank())
        suggest(p, m2m, priority, originId);
    }
    return;
  }
  int64_t rank = inst->shape().rank();
  if (keepsLayout(op)) {
    for (int64_t j = 0; j < inst->operandCount(); ++j)
      if (inst->operand(j)->shape().isArray() && inst->operand(j)->shape().rank() == rank)
        suggest(operandPos(j), m2m, priority, originId);
    return;
  }
  if (inst->operandCount() < 1) return;
  const Shape& in = inst->operand(0)->shape();
  if (!in.isArray()) return;
  switch (op) {
    case Opcode::Transpose:
      if (isPermutation(a.dimensions, rank)) suggest(operandPos(0), transposeOperandM2M(m2m, a.dimensions), priority, originId);
      break;
    case Opcode::Reshape:
      if (!in.isDynamic() && !inst->shape().isDynamic())
        if (auto m = alignedReshapeM2M(inst->shape().dimensions(), m2m, in.dimensions(),
                                       tileRowsFor(in.elementType(), options_.geometry)))
          suggest(operandPos(0), *m, priority, originId);
      break;
    case Opcode::Broadcast: {
      M2M m;
      for (int64_t d : m2m)
        for (size_t k = 0; k < a.dimensions.size(); ++k)
          if (a.dimensions[k] == d) m.push_back(static_cast<int64_t>(k));
      suggest(operandPos(0), m, priority, originId);
      break;
    }
    default:
      break;
  }
}

void Assigner::toUsers(uint32_t ord, const M2M& m2m, int priority, int originId) {
  const Instruction* inst = insts_[ord];
  int64_t rank = static_cast<int64_t>(m2m.size());
  for (uint32_t ui = userStart_[ord]; ui < userStart_[ord + 1]; ++ui) {
    const uint32_t uo = userList_[ui];
    const Instruction* u = insts_[uo];
    Opcode op = u->opcode();
    if (isForwarding(op) || hasFixedLayouts(op)) continue;
    const auto& a = u->attrs();
    const int64_t ub = base_[uo];
    for (int64_t j = 0; j < u->operandCount(); ++j) {
      if (operandOrdinal(uo, j) != ord) continue;
      const Shape& s = u->shape();
      if (keepsLayout(op)) {
        if (s.isArray()) {
          if (s.rank() == rank) suggest(ub, m2m, priority, originId);
        } else if (op == Opcode::ReduceWindow) {
          int64_t n = u->operandCount() / 2;
          if (j < n && j < s.leafCount()) suggest(ub + j, m2m, priority, originId);
        } else if (s.leafCount() == u->operandCount()) {
          suggest(ub + j, m2m, priority, originId);
        }
        continue;
      }
      switch (op) {
        case Opcode::Transpose:
          if (isPermutation(a.dimensions, rank)) suggest(ub, transposeOutputM2M(m2m, a.dimensions), priority, originId);
          break;
        case Opcode::Reshape:
          if (s.isArray() && !s.isDynamic() && !inst->shape().isDynamic())
            if (auto m = alignedReshapeM2M(inst->shape().dimensions(), m2m, s.dimensions(),
                                           tileRowsFor(s.elementType(), options_.geometry)))
              suggest(ub, *m, priority, originId);
          break;
        case Opcode::Reduce: {
          int64_t n = u->operandCount() / 2;
          if (j >= n) break;
          // The operand's order without the reduced dimensions.
          M2M m;
          for (int64_t d : m2m) {
            if (contains(a.dimensions, d)) continue;
            int64_t shift = 0;
            for (int64_t r : a.dimensions)
              if (r < d) ++shift;
            m.push_back(d - shift);
          }
          suggest(ub + (s.isArray() ? 0 : j), m, priority, originId);
          break;
        }
        default:
          break;
      }
    }
  }
}

void Assigner::propagateFrom(int64_t cls, const M2M& m2m, int priority, int originId) {
  for (uint32_t mi = memberStart_[static_cast<size_t>(cls)]; mi < memberStart_[static_cast<size_t>(cls) + 1]; ++mi) {
    const int64_t p = memberList_[mi];
    const Pos& ps = positions_[static_cast<size_t>(p)];
    const Instruction* inst = insts_[ps.ord];
    if (isFixed_[static_cast<size_t>(p)]) {
      // A fixed definition keeps its own layout; its neighbours see the class's.
    } else if (!isForwarding(inst->opcode()) && !hasFixedLayouts(inst->opcode())) {
      toOperand(ps.ord, ps.leaf, m2m, priority, originId);
    }
    if (inst->shape().isArray()) toUsers(ps.ord, m2m, priority, originId);
  }
}

void Assigner::propagate() {
  size_t fillCursor = 0;
  for (;;) {
    bool popped = false;
    for (int prio = kLevels - 1; prio >= 0 && !popped; --prio) {
      auto& q = queues_[static_cast<size_t>(prio)];
      while (!q.empty()) {
        Suggestion s = q.front();
        q.pop_front();
        if (set_[static_cast<size_t>(s.cls)]) continue;
        set_[static_cast<size_t>(s.cls)] = 1;
        classLayout_[static_cast<size_t>(s.cls)] = s.layout;
        classOrigin_[static_cast<size_t>(s.cls)] = s.origin;
        propagateFrom(s.cls, layouts_[s.layout], prio, s.origin);
        popped = true;
        break;
      }
    }
    if (popped) continue;
    // Nothing queued: the next unconstrained class gets the default layout.
    while (fillCursor < positions_.size() &&
           (positions_[fillCursor].rank < 0 || set_[static_cast<size_t>(find(static_cast<int64_t>(fillCursor)))]))
      ++fillCursor;
    if (fillCursor == positions_.size()) break;
    static const int kDefaultOrigin = -2;
    suggest(static_cast<int64_t>(fillCursor), defaultM2M(positions_[fillCursor].rank), kFill, kDefaultOrigin);
  }
}

const M2M& Assigner::finalLayout(int64_t position) const {
  if (isFixed_[static_cast<size_t>(position)]) return layouts_[fixed_[static_cast<size_t>(position)]];
  int64_t p = position;
  while (parent_[static_cast<size_t>(p)] != p) p = parent_[static_cast<size_t>(p)];
  return layouts_[classLayout_[static_cast<size_t>(p)]];
}

void setLeafLayouts(Shape& s, const std::vector<M2M>& leaves, size_t& k) {
  if (s.isTuple()) {
    for (Shape& e : s.mutableTupleElements()) setLeafLayouts(e, leaves, k);
    return;
  }
  if (s.isArray() && k < leaves.size() && !leaves[k].empty()) {
    hlo::Layout l = s.hasLayout() ? s.layout() : hlo::Layout{};
    l.minorToMajor = leaves[k];
    s.setLayout(std::move(l));
  }
  ++k;
}

void Assigner::applyLayouts() {
  for (uint32_t ord = 0; ord < insts_.size(); ++ord) {
    {
      Instruction* inst = insts_[ord];
      if (inst->shape().isArray()) {
        // One leaf: set in place, nothing copied when it already matches.
        int64_t p = base_[ord];
        ++report.arrays;
        if (positions_[static_cast<size_t>(p)].rank < 0) continue;
        const M2M& m = finalLayout(p);
        if (m.empty() || (inst->shape().hasLayout() && inst->shape().layout().minorToMajor == m)) continue;
        Shape& s = inst->mutableShape();
        if (s.hasLayout()) {
          s.mutableLayout().minorToMajor = m;
        } else {
          hlo::Layout l;
          l.minorToMajor = m;
          s.setLayout(std::move(l));
        }
        continue;
      }
      int64_t n = inst->shape().leafCount();
      std::vector<M2M> leaves(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        int64_t p = base_[ord] + k;
        if (positions_[static_cast<size_t>(p)].rank >= 0) leaves[static_cast<size_t>(k)] = finalLayout(p);
      }
      if (inst->shape().isArray() && inst->shape().hasLayout() && !leaves.empty() &&
          inst->shape().layout().minorToMajor == leaves[0]) {
        ++report.arrays;
        continue;
      }
      size_t k = 0;
      Shape s = inst->shape();
      setLeafLayouts(s, leaves, k);
      inst->setShape(std::move(s));
      ++report.arrays;
    }
  }
}

std::string Assigner::newName(const std::string& base) {
  if (!namesKnown_) names_ = instructionNames(module_), namesKnown_ = true;
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = fmt::format("{}.{}", base, i);
  names_.insert(name);
  return name;
}

std::vector<Instruction*>& Assigner::usesOf(const Instruction* x) {
  if (!usesBuilt_) {
    usesBuilt_ = true;
    for (Computation* c : processed_) {
      if (!grown_.count(c)) continue;
      for (const auto& up : c->instructions()) {
        if (retired_.count(up.get())) continue;
        for (const Instruction* o : up->operands()) {
          std::vector<Instruction*>& list = uses_[o];
          if (list.empty() || list.back() != up.get()) list.push_back(up.get());
        }
      }
    }
  }
  return uses_[x];
}

void Assigner::dropUse(const Instruction* x, const Instruction* user) {
  std::vector<Instruction*>& list = usesOf(x);
  auto it = std::find(list.begin(), list.end(), user);
  if (it == list.end()) return;
  *it = list.back();
  list.pop_back();
}

void Assigner::retire(Instruction* copy) {
  if (usesBuilt_) {
    for (const Instruction* o : copy->operands()) dropUse(o, copy);
    uses_.erase(copy);
  }
  copyInfo_.erase(copy);
  retired_.insert(copy);
}

void Assigner::removeRetired() {
  if (retired_.empty()) return;
  for (Computation* c : processed_)
    if (grown_.count(c)) c->removeInstructionsIf([&](const Instruction& i) { return retired_.count(&i) > 0; });
  retired_.clear();
  uses_.clear();
  usesBuilt_ = false;
}

void Assigner::redirect(const std::vector<Instruction*>& users, Instruction* from, Instruction* to) {
  for (Instruction* u : users)
    for (int64_t i = 0; i < u->operandCount(); ++i)
      if (u->operand(i) == from) u->setOperand(i, to);
}

std::string Assigner::producedByText(const Instruction* inst, int64_t leaf) {
  if (!hasPositions(inst)) return fmt::format("%{}", inst->name());
  int64_t p = pos(inst, leaf);
  int o = -2;
  if (fixedOrigin_[static_cast<size_t>(p)] >= 0) {
    o = fixedOrigin_[static_cast<size_t>(p)];
  } else {
    o = classOrigin_[static_cast<size_t>(find(p))];
  }
  std::string why = o >= 0 ? originText(o) : "the default layout";
  return fmt::format("%{} ({})", inst->name(), why);
}

// Whether every array leaf of `s` has one of the layouts `want` allows.
bool satisfied(const Shape& s, const std::vector<std::vector<M2M>>& want) {
  if (s.isArray()) {
    if (want.empty() || want[0].empty()) return true;
    for (const M2M& m : want[0])
      if (hasM2M(s, m)) return true;
    return false;
  }
  std::vector<const Shape*> leaves;
  collectLeaves(s, leaves);
  for (size_t k = 0; k < leaves.size() && k < want.size(); ++k) {
    const auto& ok = want[k];
    if (leaves[k]->isArray() && !ok.empty() && std::find(ok.begin(), ok.end(), layoutOf(*leaves[k])) == ok.end())
      return false;
  }
  return true;
}

// A copy of `value` (leaves from leafBase) whose array leaves have the
// layouts `want` asks for (empty = any); tuples are rebuilt from elements.
Instruction* Assigner::relayout(Computation& c, Instruction* value, const std::vector<std::vector<M2M>>& want,
                                int64_t leafBase, const std::string& producedBy, const std::string& requiredBy) {
  const Shape& s = value->shape();
  if (s.isArray()) {
    const std::vector<M2M>& ok = want[static_cast<size_t>(leafBase)];
    M2M have = layoutOf(s);
    if (ok.empty() || std::find(ok.begin(), ok.end(), have) != ok.end()) return value;
    Shape target = s;
    hlo::Layout l = s.hasLayout() ? s.layout() : hlo::Layout{};
    l.minorToMajor = ok[0];
    l.tiles.clear();
    target.setLayout(l);
    Instruction* copy = add(c, Opcode::Copy, newName(value->name() + ".relayout"), target);
    copy->addOperand(value);
    copy->setLocation(value->location());
    copies_.push_back(copy);
    LayoutRemark& r = copyInfo_[copy];
    r.kind = LayoutRemark::Kind::Copy;
    r.computation = c.name();
    r.instruction = copy->name();
    r.shape = s.toString(false);
    r.fromLayout = m2mText(have);
    r.toLayout = m2mText(ok[0]);
    r.producedBy = producedBy;
    r.requiredBy = requiredBy;
    return copy;
  }
  if (!s.isTuple()) return value;
  // Only rebuild when some leaf differs.
  std::vector<const Shape*> leaves;
  collectLeaves(s, leaves);
  bool differs = false;
  for (size_t k = 0; k < leaves.size(); ++k) {
    const auto& ok = want[static_cast<size_t>(leafBase) + k];
    if (leaves[k]->isArray() && !ok.empty() && std::find(ok.begin(), ok.end(), layoutOf(*leaves[k])) == ok.end())
      differs = true;
  }
  if (!differs) return value;
  std::vector<Instruction*> elements;
  std::vector<Shape> shapes;
  int64_t offset = leafBase;
  for (int64_t i = 0; i < s.tupleSize(); ++i) {
    Instruction* gte = add(c, Opcode::GetTupleElement, newName(value->name() + ".element"), s.tupleElement(i));
    gte->attrs().tupleIndex = i;
    gte->addOperand(value);
    gte->setLocation(value->location());
    Instruction* e = relayout(c, gte, want, offset, producedBy, requiredBy);
    offset += s.tupleElement(i).leafCount();
    elements.push_back(e);
    shapes.push_back(e->shape());
  }
  Instruction* t = add(c, Opcode::Tuple, newName(value->name() + ".relayout"), Shape::tuple(shapes));
  for (Instruction* e : elements) t->addOperand(e);
  t->setLocation(value->location());
  return t;
}

void Assigner::fixFixedDefinitions() {
  // A fixed definition whose class chose another layout keeps its own and
  // hands its users a relayout.
  std::vector<uint32_t> todo;  // ordinals, in order, each once
  for (size_t p = 0; p < positions_.size(); ++p) {
    if (!isFixed_[p] || classLayout_[static_cast<size_t>(find(static_cast<int64_t>(p)))] == fixed_[p]) continue;
    if (todo.empty() || todo.back() != positions_[p].ord) todo.push_back(positions_[p].ord);
  }
  for (uint32_t ord : todo) {
    Instruction* inst = insts_[ord];
    Computation& c = *inst->parent();
    int64_t n = inst->shape().leafCount();
    std::vector<std::vector<M2M>> want(static_cast<size_t>(n));
    std::string required;
    for (int64_t k = 0; k < n; ++k) {
      int64_t p = base_[ord] + k;
      if (positions_[static_cast<size_t>(p)].rank < 0) continue;
      int64_t cls = find(p);
      want[static_cast<size_t>(k)] = {layouts_[classLayout_[static_cast<size_t>(cls)]]};
      int o = classOrigin_[static_cast<size_t>(cls)];
      if (required.empty()) required = o >= 0 ? originText(o) : "the default layout";
    }
    // Its users as the tables list them: relayouts of earlier definitions
    // add users only to those definitions.
    std::vector<Instruction*> users;
    for (uint32_t ui = userStart_[ord]; ui < userStart_[ord + 1]; ++ui) users.push_back(insts_[userList_[ui]]);
    bool wasRoot = c.root() == inst;
    Instruction* r = relayout(c, inst, want, 0, producedByText(inst, 0), "its users: " + required);
    if (r == inst) continue;
    redirect(users, inst, r);
    if (wasRoot) c.setRoot(r);
  }
}

void Assigner::insertUseCopies() {
  std::map<std::pair<const Instruction*, std::string>, Instruction*> made;
  // One use: operand j of u (ord: u's ordinal, or kNoOrdinal for an
  // instruction this pass added).
  auto visit = [&](Computation& c, Instruction* u, uint32_t ord) {
    Opcode op = u->opcode();
    if (isForwarding(op)) return;
    auto reqs = std::lower_bound(requirements_.begin(), requirements_.end(), ord,
                                 [](const UseRequirement& r, uint32_t o) { return r.user < o; });
    for (int64_t j = 0; j < u->operandCount(); ++j) {
      Instruction* x = u->operand(j);
      std::vector<std::vector<M2M>> keptWant;
      const std::vector<std::vector<M2M>>* want = nullptr;
      const Shape* keptLeaf = nullptr;  // the why of an op that keeps layouts, formatted only when needed
      const Requirement* req = nullptr;
      if (ord != kNoOrdinal)
        for (auto it = reqs; it != requirements_.end() && it->user == ord; ++it)
          if (it->operand == j) req = &it->requirement;
      if (req) {
        want = &req->leaves;
      } else if (keepsLayout(op) && !hasFixedLayouts(op) && x->shape().isArray()) {
        const Shape& s = u->shape();
        const Shape* leaf = nullptr;
        if (s.isArray()) {
          leaf = &s;
        } else if (op == Opcode::ReduceWindow) {
          if (j < u->operandCount() / 2 && j < s.tupleSize()) leaf = &s.tupleElement(j);
        } else if (s.isTuple() && s.tupleSize() == u->operandCount()) {
          leaf = &s.tupleElement(j);
        }
        if (!leaf || !leaf->isArray() || leaf->rank() != x->shape().rank()) continue;
        if (sameM2M(x->shape(), *leaf)) continue;  // satisfied, without building the requirement
        keptWant = {{layoutOf(*leaf)}};
        want = &keptWant;
        keptLeaf = leaf;
      } else {
        continue;
      }
      if (static_cast<int64_t>(want->size()) != x->shape().leafCount()) continue;
      if (satisfied(x->shape(), *want)) continue;
      std::string why = keptLeaf ? fmt::format("{} %{} (cannot change layout; result {})", hlo::opcodeName(op),
                                               u->name(), m2mText(layoutOf(*keptLeaf)))
                                 : originText(req->origin);
      std::string key;
      for (const auto& alternatives : *want) key += alternatives.empty() ? "*;" : m2mText(alternatives[0]) + ";";
      auto mit = made.find({x, key});
      Instruction* r = nullptr;
      if (mit != made.end()) {
        r = mit->second;
      } else {
        r = relayout(c, x, *want, 0, producedByText(x, 0), why);
        made[{x, key}] = r;
      }
      if (r != x) u->setOperand(j, r);
    }
  };
  for (size_t ci = 0; ci < processed_.size(); ++ci) {
    Computation& c = *processed_[ci];
    // The instructions as they stand: the original ones (still first, in
    // order) and those fixFixedDefinitions appended; not the copies made here.
    const size_t added = c.instructions().size() - (compStart_[ci + 1] - compStart_[ci]);
    std::vector<Instruction*> extra;
    for (size_t i = c.instructions().size() - added; i < c.instructions().size(); ++i)
      extra.push_back(c.instructions()[i].get());
    for (uint32_t ord = compStart_[ci]; ord < compStart_[ci + 1]; ++ord) visit(c, insts_[ord], ord);
    for (Instruction* u : extra) visit(c, u, kNoOrdinal);
  }
  Computation* entry = module_.entry();
  if (entry && entry->root() && options_.entryLayouts == EntryLayouts::Keep) {
    std::vector<const Shape*> leaves;
    collectLeaves(entryResult_, leaves);
    std::vector<std::vector<M2M>> want(leaves.size());
    for (size_t k = 0; k < leaves.size(); ++k)
      if (leaves[k]->isArray()) want[k] = {layoutOf(*leaves[k])};
    Instruction* root = entry->root();
    Instruction* r = relayout(*entry, root, want, 0, producedByText(root, 0), "entry result layout");
    if (r != root) entry->setRoot(r);
  }
}

// Copies move across a unary elementwise neighbour while that moves fewer
// bytes: above an up-converting op (copy the narrow operand), below a
// slice or a down-converting op.
void Assigner::placeCopies() {
  auto tiledBytes = [&](const Shape& s) {
    Shape t = s;
    t.setLayout(tpuLayout(s.elementType(), s.dimensions(), layoutOf(s), options_.geometry));
    return paddedBytes(t);
  };
  // The single array operand of an op that keeps layouts, others scalars.
  auto soleArrayOperand = [](const Instruction* x) -> int64_t {
    if (!keepsLayout(x->opcode()) || !x->shape().isArray() || hasFixedLayouts(x->opcode())) return -1;
    int64_t found = -1;
    for (int64_t j = 0; j < x->operandCount(); ++j) {
      const Shape& s = x->operand(j)->shape();
      if (!s.isArray()) return -1;
      if (s.rank() == 0) continue;
      if (found >= 0 || s.rank() != x->shape().rank()) return -1;
      found = j;
    }
    return found;
  };
  auto withLayout = [](Shape s, const M2M& m) {
    hlo::Layout l = s.hasLayout() ? s.layout() : hlo::Layout{};
    l.minorToMajor = m;
    l.tiles.clear();
    s.setLayout(l);
    return s;
  };
  for (size_t ci = 0; ci < copies_.size(); ++ci) {
    Instruction* copy = copies_[ci];
    if (!copy) continue;
    Computation& c = *copy->parent();
    for (int guard = 0; guard < 64; ++guard) {
      Instruction* x = copy->operand(0);
      int64_t j = soleArrayOperand(x);
      if (j < 0 || x == c.root() || !processedSet_.count(&c) || usesOf(x).size() != 1) break;
      Instruction* y = x->operand(j);
      M2M m = layoutOf(copy->shape());
      if (tiledBytes(withLayout(y->shape(), m)) >= tiledBytes(copy->shape())) break;
      // x now computes in the copy's layout from a copy of its operand.
      std::vector<Instruction*> users = usesOf(copy);
      bool wasRoot = c.root() == copy;
      Instruction* moved = add(c, Opcode::Copy, newName(y->name() + ".relayout"), withLayout(y->shape(), m));
      moved->addOperand(y);
      moved->setLocation(y->location());
      x->setOperand(j, moved);  // y was x's only array operand of its rank: used once
      dropUse(y, x);
      usesOf(y).push_back(moved);
      usesOf(moved).push_back(x);
      x->setShape(withLayout(x->shape(), m));
      redirect(users, copy, x);
      usesOf(x) = users;  // its only user was the copy
      if (wasRoot) c.setRoot(x);
      LayoutRemark info = copyInfo_[copy];
      info.shape = y->shape().toString(false);
      info.producedBy = producedByText(y, 0);
      info.requiredBy += fmt::format("; moved above %{} (fewer bytes)", x->name());
      retire(copy);
      copyInfo_[moved] = info;
      copies_[ci] = moved;
      copy = moved;
    }
    for (int guard = 0; guard < 64; ++guard) {
      const std::vector<Instruction*>& users = usesOf(copy);
      if (users.size() != 1 || c.root() == copy) break;
      Instruction* u = users[0];
      if (soleArrayOperand(u) < 0 || u == c.root() || isForwarding(u->opcode())) break;
      if (tiledBytes(u->shape()) >= tiledBytes(copy->shape())) break;
      if (u->opcode() == Opcode::Parameter) break;
      Instruction* x = copy->operand(0);
      M2M old = layoutOf(u->shape());
      std::vector<Instruction*> uUsers = usesOf(u);
      for (int64_t k = 0; k < u->operandCount(); ++k)
        if (u->operand(k) == copy) u->setOperand(k, x);
      usesOf(x).push_back(u);  // u's only array operand of its rank was the copy
      Shape oldShape = u->shape();
      u->setShape(withLayout(u->shape(), layoutOf(x->shape())));
      Instruction* moved = add(c, Opcode::Copy, newName(u->name() + ".relayout"), withLayout(oldShape, old));
      moved->addOperand(u);
      moved->setLocation(u->location());
      redirect(uUsers, u, moved);
      usesOf(moved) = std::move(uUsers);
      usesOf(u) = {moved};
      LayoutRemark info = copyInfo_[copy];
      info.shape = u->shape().toString(false);
      info.requiredBy += fmt::format("; moved below %{} (fewer bytes)", u->name());
      retire(copy);
      copyInfo_[moved] = info;
      copies_[ci] = moved;
      copy = moved;
    }
  }
}

// Copies of one value to one layout (one per conflicting use, or moved
// onto the same operand) are merged.
void Assigner::mergeCopies() {
  std::map<std::pair<const Instruction*, std::string>, Instruction*> first;
  std::unordered_map<Computation*, std::vector<std::pair<Instruction*, Instruction*>>> replaced;
  for (Instruction*& copy : copies_) {
    if (!copy) continue;
    auto key = std::make_pair(static_cast<const Instruction*>(copy->operand(0)), m2mText(layoutOf(copy->shape())));
    auto [it, fresh] = first.emplace(key, copy);
    if (fresh) continue;
    replaced[copy->parent()].push_back({copy, it->second});
    copy = nullptr;
  }
  for (auto& [c, pairs] : replaced) {
    std::unordered_map<const Instruction*, Instruction*> to;
    for (auto& [dup, keep] : pairs) to[dup] = keep;
    for (const auto& up : c->instructions())
      for (int64_t i = 0; i < up->operandCount(); ++i) {
        auto it = to.find(up->operand(i));
        if (it != to.end()) up->setOperand(i, it->second);
      }
    for (auto& [dup, keep] : pairs) {
      if (c->root() == dup) c->setRoot(keep);
      retire(dup);
    }
  }
  removeRetired();
}

// A transpose or reshape whose layouts make it a reinterpretation becomes
// a bitcast.
void Assigner::makeBitcast(const Computation& c, Instruction* inst) {
  Opcode op = inst->opcode();
  if ((op != Opcode::Transpose && op != Opcode::Reshape) || inst->operandCount() != 1) return;
  const Shape& in = inst->operand(0)->shape();
  const Shape& out = inst->shape();
  if (!in.isArray() || !out.isArray() || in.elementType() != out.elementType() || in.isDynamic() || out.isDynamic())
    return;
  M2M a = layoutOf(in), b = layoutOf(out);
  LayoutRemark::Kind kind;
  if (op == Opcode::Transpose) {
    if (!transposeIsBitcast(a, b, std::as_const(*inst).attrs().dimensions)) return;
    kind = LayoutRemark::Kind::FreeTranspose;
    ++report.freeTransposes;
  } else {
    if (!reshapeIsBitcast(in.dimensions(), a, out.dimensions(), b, tileRowsFor(in.elementType(), options_.geometry)))
      return;
    kind = LayoutRemark::Kind::FreeReshape;
    ++report.freeReshapes;
  }
  inst->setOpcode(Opcode::Bitcast);
  inst->attrs().dimensions.clear();
  inst->attrs().inferredDimension = -1;
  if (!wantRemarks()) return;  // the counts only: no strings
  LayoutRemark r;
  r.kind = kind;
  r.computation = c.name();
  r.instruction = inst->name();
  r.shape = out.toString(false);
  r.fromLayout = m2mText(a);
  r.toLayout = m2mText(b);
  report.remarks.push_back(std::move(r));
}

// Returns whether `s` changed.
bool tileShape(Shape& s, const TileGeometry& g) {
  if (s.isTuple()) {
    bool changed = false;
    for (Shape& e : s.mutableTupleElements()) changed |= tileShape(e, g);
    return changed;
  }
  if (!s.isArray()) return false;
  M2M m = layoutOf(s);
  hlo::Layout t = tpuLayout(s.elementType(), s.dimensions(), m, g);
  hlo::Layout l = s.hasLayout() ? s.layout() : hlo::Layout{};
  if (l.minorToMajor == t.minorToMajor && l.tiles == t.tiles && l.elementSizeInBits == t.elementSizeInBits) return false;
  l.minorToMajor = t.minorToMajor;
  l.tiles = t.tiles;
  l.elementSizeInBits = t.elementSizeInBits;
  s.setLayout(std::move(l));
  return true;
}

// Whether tileShape would change `s` (without copying it).
bool needsTiles(const Shape& s, const TileGeometry& g) {
  if (s.isTuple()) {
    for (const Shape& e : s.tupleElements())
      if (needsTiles(e, g)) return true;
    return false;
  }
  if (!s.isArray()) return false;
  hlo::Layout t = tpuLayout(s.elementType(), s.dimensions(), layoutOf(s), g);
  static const hlo::Layout kNone{};
  const hlo::Layout& have = s.hasLayout() ? s.layout() : kNone;
  return !(have.minorToMajor == t.minorToMajor && have.tiles == t.tiles && have.elementSizeInBits == t.elementSizeInBits);
}

// TPU tiles for an instruction's shape (and the constraints it carries).
void Assigner::tile(Instruction* inst) const {
  const TileGeometry& g = options_.geometry;
  const Shape& s = inst->shape();
  if (s.isArray()) {
    // One tpuLayout, written only when it differs.
    hlo::Layout t = tpuLayout(s.elementType(), s.dimensions(), layoutOf(s), g);
    static const hlo::Layout kNone{};
    const hlo::Layout& have = s.hasLayout() ? s.layout() : kNone;
    if (!(have.minorToMajor == t.minorToMajor && have.tiles == t.tiles &&
          have.elementSizeInBits == t.elementSizeInBits)) {
      Shape& m = inst->mutableShape();
      if (m.hasLayout()) {
        hlo::Layout& l = m.mutableLayout();
        l.minorToMajor = std::move(t.minorToMajor);
        l.tiles = std::move(t.tiles);
        l.elementSizeInBits = t.elementSizeInBits;
      } else {
        m.setLayout(std::move(t));
      }
    }
  } else if (needsTiles(s, g)) {
    tileShape(inst->mutableShape(), g);
  }
  if (!inst->hasAttributes()) return;
  if (inst->opcode() == Opcode::Constant && inst->attrs().literal)
    inst->attrs().literal->mutableShapeLayoutOnly() = inst->shape();
  if (inst->attrs().operandLayoutConstraints)
    for (Shape& k : *inst->attrs().operandLayoutConstraints) tileShape(k, g);
}

// Bitcasts and tiles, in one sweep over the instructions: the processed
// computations (whose transposes and reshapes may become bitcasts, remarks
// in their order) and then the others (tiles only). Tiles leave
// minor_to_major as it is, so a bitcast decision reads the same layouts
// either way.
void Assigner::finish() {
  for (Computation* c : processed_)
    for (const auto& up : c->instructions()) {
      makeBitcast(*c, up.get());
      tile(up.get());
    }
  for (const auto& c : module_.computations()) {
    if (processedSet_.count(c.get())) continue;
    for (const auto& up : c->instructions()) tile(up.get());
  }
  if (Computation* entry = module_.entry()) {
    hlo::ComputationLayout layout;
    std::vector<Instruction*> params = entry->parameters();
    bool complete = true;
    for (Instruction* p : params) {
      if (!p) complete = false;
      else layout.parameters.push_back(p->shape());
    }
    if (entry->root()) layout.result = entry->root()->shape();
    if (complete && entry->root()) module_.config().entryComputationLayout = std::move(layout);
  }
}

bool Assigner::run() {
  if (!module_.entry()) return false;
  collectComputations();
  buildPositions();
  // The entry result as given, before any layout changes.
  if (entryLayout_ = module_.config().entryComputationLayout; entryLayout_ &&
      module_.entry()->root() && entryLayout_->result.compatible(module_.entry()->root()->shape()))
    entryResult_ = entryLayout_->result;
  else if (module_.entry()->root())
    entryResult_ = module_.entry()->root()->shape().withDefaultLayout();
  seed();
  propagate();
  applyLayouts();
  fixFixedDefinitions();
  insertUseCopies();
  placeCopies();
  mergeCopies();
  finish();
  for (Instruction* copy : copies_) {
    if (!copy) continue;
    const int64_t bytes = paddedBytes(copy->operand(0)->shape()) + paddedBytes(copy->shape());
    ++report.copies;
    report.copyBytes += bytes;
    if (!wantRemarks()) continue;
    LayoutRemark r = copyInfo_[copy];
    r.computation = copy->parent()->name();
    r.instruction = copy->name();
    r.bytes = bytes;
    report.remarks.push_back(std::move(r));
  }
  std::stable_sort(report.remarks.begin(), report.remarks.end(), [](const LayoutRemark& a, const LayoutRemark& b) {
    return a.kind == LayoutRemark::Kind::Copy && b.kind != LayoutRemark::Kind::Copy;
  });
  // Sorting an untouched computation whose operands precede their users
  // would give the same order: skipped.
  for (size_t ci = 0; ci < processed_.size(); ++ci)
    if (!inOrder_[ci] || grown_.count(processed_[ci])) processed_[ci]->sortTopologically();
  (void)diags_;
  return true;
}

}  // namespace

bool LayoutAssignmentPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  Assigner a(module, options_, diags);
  bool changed = a.run();
  if (options_.report) {
    LayoutReport& r = *options_.report;
    r.remarks.insert(r.remarks.end(), std::make_move_iterator(a.report.remarks.begin()),
                     std::make_move_iterator(a.report.remarks.end()));
    r.copies += a.report.copies;
    r.copyBytes += a.report.copyBytes;
    r.freeTransposes += a.report.freeTransposes;
    r.freeReshapes += a.report.freeReshapes;
    r.arrays += a.report.arrays;
  }
  return changed;
}

// ------------------------------------------------------------ bitcast expansion

namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

bool isIdentity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

bool ExpandLayoutBitcastsPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  std::set<std::string> names;
  bool namesKnown = false;
  auto fresh = [&](const std::string& base) {
    if (!namesKnown) names = instructionNames(module), namesKnown = true;
    std::string n = base;
    for (int i = 1; names.count(n); ++i) n = fmt::format("{}.{}", base, i);
    names.insert(n);
    return n;
  };
  for (const auto& cp : module.computations()) {
    Computation& c = *cp;
    std::vector<Instruction*> bitcasts;
    for (const auto& up : c.instructions())
      // Physical bitcasts (physical-edges' views of tiled arrays) are read
      // through their layouts by the kernels that take them.
      if (up->opcode() == Opcode::Bitcast && up->operandCount() == 1 && !isPhysicalBitcast(*up))
        bitcasts.push_back(up.get());
    bool here = false;
    for (Instruction* b : bitcasts) {
      const Shape& in = b->operand(0)->shape();
      const Shape& out = b->shape();
      if (!in.isArray() || !out.isArray() || in.elementType() != out.elementType() || in.isDynamic() ||
          out.isDynamic())
        continue;
      M2M a = layoutOf(in), m = layoutOf(out);
      // Row-major reshapes and identical orders are what these consumers
      // already do for a bitcast.
      if (reshapeIsBitcast(in.dimensions(), defaultM2M(in.rank()), out.dimensions(), defaultM2M(out.rank()), 0) &&
          reshapeIsBitcast(in.dimensions(), a, out.dimensions(), m, 0))
        continue;
      std::vector<int64_t> pin(a.rbegin(), a.rend()), pout(m.rbegin(), m.rend());
      std::vector<int64_t> physIn, physOut;
      for (int64_t d : pin) physIn.push_back(in.dimension(d));
      for (int64_t d : pout) physOut.push_back(out.dimension(d));
      Instruction* v = b->operand(0);
      auto make = [&](Opcode op, std::vector<int64_t> dims, Instruction* x) {
        Shape s = Shape(in.elementType(), std::move(dims)).withDefaultLayout();
        Instruction* n = c.addInstruction(op, fresh(b->name() + ".logical"), s);
        n->addOperand(x);
        n->setLocation(b->location());
        return n;
      };
      if (!isIdentity(pin)) {
        v = make(Opcode::Transpose, physIn, v);
        v->attrs().dimensions = pin;
      }
      if (physIn != physOut) v = make(Opcode::Reshape, physOut, v);
      std::vector<int64_t> back = inverse(pout);
      if (!isIdentity(back)) {
        v = make(Opcode::Transpose, out.dimensions(), v);
        v->attrs().dimensions = back;
      }
      if (v == b->operand(0)) v = make(Opcode::Reshape, out.dimensions(), v);
      v->setShape(out);  // the bitcast's own shape, layout included
      replaceInstruction(b, v);
      here = true;
    }
    if (here) c.sortTopologically(), changed = true;
  }
  return changed;
}

// ------------------------------------------------------------ reports

std::string renderReportText(const LayoutReport& report, double hbmBytesPerSecond) {
  std::string out;
  for (const LayoutRemark& r : report.remarks) {
    switch (r.kind) {
      case LayoutRemark::Kind::Copy:
        out += fmt::format(
            "remark: layout: copy %{} in {}: {} {} -> {}, {} bytes moved ({:.3f} us): {} conflicts with {}\n",
            r.instruction, r.computation, r.shape, r.fromLayout, r.toLayout, r.bytes,
            hbmBytesPerSecond > 0 ? static_cast<double>(r.bytes) / hbmBytesPerSecond * 1e6 : 0.0, r.producedBy,
            r.requiredBy);
        break;
      case LayoutRemark::Kind::FreeTranspose:
      case LayoutRemark::Kind::FreeReshape:
        out += fmt::format("remark: layout: {} %{} in {} is now a bitcast: {} {} -> {}\n",
                           r.kind == LayoutRemark::Kind::FreeTranspose ? "transpose" : "reshape", r.instruction,
                           r.computation, r.shape, r.fromLayout, r.toLayout);
        break;
    }
  }
  out += fmt::format("remark: layout: {} copies ({} bytes), {} transposes and {} reshapes made free\n", report.copies,
                     report.copyBytes, report.freeTransposes, report.freeReshapes);
  return out;
}

std::string renderReportJson(const LayoutReport& report, double hbmBytesPerSecond) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char ch : s) {
      if (ch == '"' || ch == '\\') o += '\\';
      if (static_cast<unsigned char>(ch) < 0x20) {
        o += fmt::format("\\u{:04x}", static_cast<unsigned char>(ch));
        continue;
      }
      o += ch;
    }
    return o;
  };
  std::string out = fmt::format(
      "{{\"copies\": {}, \"copy_bytes\": {}, \"free_transposes\": {}, \"free_reshapes\": {}, \"remarks\": [",
      report.copies, report.copyBytes, report.freeTransposes, report.freeReshapes);
  for (size_t i = 0; i < report.remarks.size(); ++i) {
    const LayoutRemark& r = report.remarks[i];
    out += i ? ",\n  " : "\n  ";
    const char* kind = r.kind == LayoutRemark::Kind::Copy            ? "copy"
                       : r.kind == LayoutRemark::Kind::FreeTranspose ? "free-transpose"
                                                                      : "free-reshape";
    out += fmt::format("{{\"kind\": \"{}\", \"computation\": \"{}\", \"instruction\": \"{}\", \"shape\": \"{}\", "
                       "\"from\": \"{}\", \"to\": \"{}\"",
                       kind, esc(r.computation), esc(r.instruction), esc(r.shape), r.fromLayout, r.toLayout);
    if (r.kind == LayoutRemark::Kind::Copy)
      out += fmt::format(", \"bytes\": {}, \"seconds\": {:.9f}, \"produced_by\": \"{}\", \"required_by\": \"{}\"",
                         r.bytes, hbmBytesPerSecond > 0 ? static_cast<double>(r.bytes) / hbmBytesPerSecond : 0.0,
                         esc(r.producedBy), esc(r.requiredBy));
    out += "}";
  }
  out += report.remarks.empty() ? "]}\n" : "\n]}\n";
  return out;
}

void registerLayoutPasses(PassRegistry& registry) {
  registry.add({"layout-assignment",
                "Assign TPU layouts (minor_to_major, tiles) to every array: dot/convolution/collective constraints, "
                "propagation, copies where constraints conflict, transposes and reshapes made bitcasts",
                [] { return std::make_unique<LayoutAssignmentPass>(); }});
  registry.add({"expand-layout-bitcasts",
                "Rewrite bitcasts that reinterpret a layout into transpose/reshape/transpose on logical arrays",
                [] { return std::make_unique<ExpandLayoutBitcastsPass>(); }});
}

}  // namespace tpu::passes::layout
