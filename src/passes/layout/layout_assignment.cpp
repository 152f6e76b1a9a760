#include "passes/layout/layout_assignment.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

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

 private:
  struct Pos {
    Instruction* inst;
    int64_t leaf;
    int64_t rank;  // -1: not an array leaf
  };
  struct Suggestion {
    int64_t cls;
    M2M m2m;
    int origin;
  };

  // Dense number of an instruction of a processed computation (-1: none).
  int64_t ordinal(const Instruction* inst) const { return ordinals_.find(inst); }
  bool hasPositions(const Instruction* inst) const { return ordinals_.contains(inst); }
  int64_t pos(const Instruction* inst, int64_t leaf) const {
    int64_t k = ordinals_.find(inst);
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
  void uniteRange(const Instruction* a, int64_t aLeaf, const Instruction* b, int64_t bLeaf, int64_t count) {
    for (int64_t k = 0; k < count; ++k) unite(pos(a, aLeaf + k), pos(b, bLeaf + k));
  }
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
  void addRequirement(Instruction* user, int64_t operand, std::vector<std::vector<M2M>> leaves, int originId);
  void suggest(int64_t position, M2M m2m, int priority, int originId);
  void propagate();
  void propagateFrom(int64_t cls, const M2M& m2m, int priority, int originId);
  void toOperand(Instruction* inst, int64_t leaf, const M2M& m2m, int priority, int originId);
  void toUsers(Instruction* inst, const M2M& m2m, int priority, int originId);

  // Rewriting.
  const M2M& finalLayout(int64_t position) const;
  void applyLayouts();
  Instruction* relayout(Computation& c, Instruction* value, const std::vector<std::vector<M2M>>& want,
                        int64_t leafBase, const std::string& producedBy, const std::string& requiredBy);
  void fixFixedDefinitions();
  void insertUseCopies();
  void placeCopies();
  void mergeCopies();
  void makeBitcasts();
  void applyTiles();
  std::string newName(const std::string& base);
  static std::vector<Instruction*> usersOf(const Computation& c, const Instruction* x);
  static void redirect(const std::vector<Instruction*>& users, Instruction* from, Instruction* to);
  std::string producedByText(const Instruction* inst, int64_t leaf);

  hlo::Module& module_;
  const LayoutOptions& options_;
  DiagnosticEngine& diags_;
  std::vector<Computation*> processed_;  // entry and control-flow callees, callees first
  std::unordered_set<const Computation*> processedSet_;
  // Instructions of the processed computations by dense ordinal: the first
  // position of each, and its users (CSR: users of ordinal k are
  // userList_[userStart_[k] .. userStart_[k + 1]), in program order, each once).
  hlo::PointerIndex ordinals_;
  std::vector<int64_t> base_;
  std::vector<uint32_t> userStart_;
  std::vector<Instruction*> userList_;
  std::vector<Pos> positions_;
  std::vector<int64_t> parent_;
  // Array positions of each class (CSR by representative: memberStart_[cls] ..).
  std::vector<uint32_t> memberStart_;
  std::vector<uint32_t> memberList_;
  std::vector<char> set_;
  std::vector<M2M> classM2M_;
  std::vector<int> classOrigin_;
  std::vector<M2M> fixed_;  // per position: the layout it must have (when isFixed_)
  std::vector<char> isFixed_;
  std::vector<int> fixedOrigin_;  // per position: origin of the fixed layout (-1: not fixed)
  // Requirements on operands, per user ordinal: (operand number, requirement).
  std::vector<std::vector<std::pair<int64_t, Requirement>>> requirements_;
  std::vector<Origin> origins_;
  std::array<std::deque<Suggestion>, kLevels> queues_;
  std::set<std::string> names_;
  bool namesKnown_ = false;
  std::vector<Instruction*> copies_;  // inserted array copies (null once removed)
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
  ordinals_ = hlo::PointerIndex(count);
  base_.reserve(count);
  positions_.reserve(count + count / 4);
  std::vector<const Shape*> leaves;
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      ordinals_.set(inst, static_cast<uint32_t>(base_.size()));
      base_.push_back(static_cast<int64_t>(positions_.size()));
      leaves.clear();
      collectLeaves(inst->shape(), leaves);
      for (size_t k = 0; k < leaves.size(); ++k)
        positions_.push_back({inst, static_cast<int64_t>(k), leaves[k]->isArray() ? leaves[k]->rank() : -1});
    }
  }
  // Users, as Computation::computeUsers lists them: program order, each
  // user once. Counted first, then filled (one flat array).
  std::vector<uint32_t> lastUser(count, UINT32_MAX);
  userStart_.assign(count + 1, 0);
  uint32_t ord = 0;
  for (Computation* c : processed_)
    for (const auto& up : c->instructions()) {
      for (const Instruction* o : up->operands()) {
        int64_t k = ordinal(o);
        if (k < 0 || lastUser[static_cast<size_t>(k)] == ord) continue;
        lastUser[static_cast<size_t>(k)] = ord;
        ++userStart_[static_cast<size_t>(k) + 1];
      }
      ++ord;
    }
  for (size_t k = 0; k < count; ++k) userStart_[k + 1] += userStart_[k];
  userList_.resize(userStart_[count]);
  std::vector<uint32_t> fill(userStart_.begin(), userStart_.end() - 1);
  std::fill(lastUser.begin(), lastUser.end(), UINT32_MAX);
  ord = 0;
  for (Computation* c : processed_)
    for (const auto& up : c->instructions()) {
      for (const Instruction* o : up->operands()) {
        int64_t k = ordinal(o);
        if (k < 0 || lastUser[static_cast<size_t>(k)] == ord) continue;
        lastUser[static_cast<size_t>(k)] = ord;
        userList_[fill[static_cast<size_t>(k)]++] = up.get();
      }
      ++ord;
    }
  requirements_.resize(count);
  parent_.resize(positions_.size());
  for (size_t i = 0; i < parent_.size(); ++i) parent_[i] = static_cast<int64_t>(i);
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      const Shape& s = inst->shape();
      int64_t leaves = s.leafCount();
      switch (inst->opcode()) {
        case Opcode::Tuple:
          for (int64_t i = 0; i < inst->operandCount(); ++i)
            uniteRange(inst, leafOffset(s, i), inst->operand(i), 0, inst->operand(i)->shape().leafCount());
          break;
        case Opcode::GetTupleElement: {
          const Shape& t = inst->operand(0)->shape();
          if (t.isTuple()) uniteRange(inst, 0, inst->operand(0), leafOffset(t, inst->attrs().tupleIndex), leaves);
          break;
        }
        case Opcode::OptimizationBarrier:
        case Opcode::AddDependency:
        case Opcode::Domain:
          if (inst->operandCount() > 0 && inst->operand(0)->shape().leafCount() == leaves)
            uniteRange(inst, 0, inst->operand(0), 0, leaves);
          break;
        case Opcode::While: {
          Computation* cond = inst->whileCondition();
          Computation* body = inst->whileBody();
          if (!cond || !body || inst->operandCount() != 1) break;
          uniteRange(inst, 0, inst->operand(0), 0, leaves);
          if (Instruction* p = body->parameter(0)) uniteRange(inst, 0, p, 0, leaves);
          if (Instruction* p = cond->parameter(0)) uniteRange(inst, 0, p, 0, leaves);
          if (body->root()) uniteRange(inst, 0, body->root(), 0, leaves);
          break;
        }
        case Opcode::Call: {
          Computation* callee = inst->toApply();
          if (!callee) break;
          std::vector<Instruction*> params = callee->parameters();
          for (int64_t i = 0; i < inst->operandCount() && i < static_cast<int64_t>(params.size()); ++i)
            if (Instruction* p = params[static_cast<size_t>(i)])
              uniteRange(p, 0, inst->operand(i), 0, p->shape().leafCount());
          if (callee->root()) uniteRange(inst, 0, callee->root(), 0, leaves);
          break;
        }
        case Opcode::Conditional: {
          const auto& branches = inst->calledComputations();
          for (size_t b = 0; b < branches.size(); ++b) {
            Computation* br = branches[b];
            if (!br) continue;
            if (static_cast<int64_t>(b + 1) < inst->operandCount())
              if (Instruction* p = br->parameter(0))
                uniteRange(p, 0, inst->operand(static_cast<int64_t>(b + 1)), 0, p->shape().leafCount());
            if (br->root()) uniteRange(inst, 0, br->root(), 0, leaves);
          }
          break;
        }
        default:
          break;
      }
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
  fixed_.resize(positions_.size());
  fixedOrigin_.assign(positions_.size(), -1);
  classM2M_.resize(positions_.size());
  classOrigin_.assign(positions_.size(), -1);
}

void Assigner::suggest(int64_t position, M2M m2m, int priority, int originId) {
  if (position < 0 || positions_[static_cast<size_t>(position)].rank < 0) return;
  if (!isPermutation(m2m, positions_[static_cast<size_t>(position)].rank)) return;
  int64_t cls = find(position);
  if (set_[static_cast<size_t>(cls)]) return;
  queues_[static_cast<size_t>(priority)].push_back({cls, std::move(m2m), originId});
}

void Assigner::addRequirement(Instruction* user, int64_t operand, std::vector<std::vector<M2M>> leaves,
                              int originId) {
  Instruction* x = user->operand(operand);
  for (size_t k = 0; k < leaves.size(); ++k)
    if (!leaves[k].empty() && hasPositions(x))
      suggest(pos(x, static_cast<int64_t>(k)), leaves[k][0], kFixedUse, originId);
  auto& list = requirements_[static_cast<size_t>(ordinal(user))];
  for (auto& [j, r] : list)
    if (j == operand) {
      r = {std::move(leaves), originId};
      return;
    }
  list.push_back({operand, {std::move(leaves), originId}});
}

void Assigner::seed() {
  Computation* entry = module_.entry();
  bool keep = options_.entryLayouts == EntryLayouts::Keep;
  entryLayout_ = module_.config().entryComputationLayout;
  // 1. Fixed definitions: entry parameters (kept), ops with fixed layouts.
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      bool entryParam = c == entry && inst->opcode() == Opcode::Parameter && keep;
      if (!entryParam && !hasFixedLayouts(inst->opcode())) continue;
      std::vector<const Shape*> leaves;
      const Shape* given = &inst->shape();
      int64_t number = inst->attrs().parameterNumber;
      if (entryParam && entryLayout_ && number >= 0 &&
          number < static_cast<int64_t>(entryLayout_->parameters.size()) &&
          entryLayout_->parameters[static_cast<size_t>(number)].compatible(inst->shape()))
        given = &entryLayout_->parameters[static_cast<size_t>(number)];
      collectLeaves(*given, leaves);
      int o = entryParam ? origin(OriginKind::EntryParameter, inst, number) : origin(OriginKind::FixedDefinition, inst);
      for (size_t k = 0; k < leaves.size(); ++k) {
        if (!leaves[k]->isArray()) continue;
        int64_t p = pos(inst, static_cast<int64_t>(k));
        M2M m = layoutOf(*leaves[k]);
        fixed_[static_cast<size_t>(p)] = m;
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
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      Opcode op = inst->opcode();
      const auto& a = inst->attrs();
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
            addRequirement(inst, j, std::move(req), origin(why, inst, j));
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
        addRequirement(inst, 0, {{lhs}}, origin(OriginKind::DotLhs, inst));
        // Prefer the right-hand side's existing order when it is one of the two.
        std::vector<M2M> rhs = {rhsKN, rhsNK};
        if (r.hasLayout() && layoutOf(r) == rhsNK) std::swap(rhs[0], rhs[1]);
        addRequirement(inst, 1, {rhs}, origin(OriginKind::DotRhs, inst));
        suggest(pos(inst, 0), defaultM2M(rank), kTarget,
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
        addRequirement(inst, 0, {{activations(d.inputBatchDimension, d.inputFeatureDimension, d.inputSpatialDimensions)}},
                       origin(OriginKind::ConvInput, inst));
        addRequirement(inst, 1, {{fromMajorToMinor(k)}},
                       origin(OriginKind::ConvKernel, inst));
        suggest(pos(inst, 0), activations(d.outputBatchDimension, d.outputFeatureDimension, d.outputSpatialDimensions),
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
        addRequirement(inst, 0, {{m}}, o);
        suggest(pos(inst, 0), m, kTarget, o);
      }
    }
  }
}

void Assigner::toOperand(Instruction* inst, int64_t leaf, const M2M& m2m, int priority, int originId) {
  Opcode op = inst->opcode();
  const auto& a = inst->attrs();
  auto operandPos = [&](int64_t j) -> int64_t {
    Instruction* x = inst->operand(j);
    if (!hasPositions(x) || !x->shape().isArray()) return -1;
    return pos(x, 0);
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

void Assigner::toUsers(Instruction* inst, const M2M& m2m, int priority, int originId) {
  int64_t ord = ordinal(inst);
  if (ord < 0) return;
  int64_t rank = static_cast<int64_t>(m2m.size());
  for (uint32_t ui = userStart_[static_cast<size_t>(ord)]; ui < userStart_[static_cast<size_t>(ord) + 1]; ++ui) {
    Instruction* u = userList_[ui];
    Opcode op = u->opcode();
    if (isForwarding(op) || hasFixedLayouts(op)) continue;
    const auto& a = u->attrs();
    for (int64_t j = 0; j < u->operandCount(); ++j) {
      if (u->operand(j) != inst) continue;
      const Shape& s = u->shape();
      if (keepsLayout(op)) {
        if (s.isArray()) {
          if (s.rank() == rank) suggest(pos(u, 0), m2m, priority, originId);
        } else if (op == Opcode::ReduceWindow) {
          int64_t n = u->operandCount() / 2;
          if (j < n && j < s.leafCount()) suggest(pos(u, j), m2m, priority, originId);
        } else if (s.leafCount() == u->operandCount()) {
          suggest(pos(u, j), m2m, priority, originId);
        }
        continue;
      }
      switch (op) {
        case Opcode::Transpose:
          if (isPermutation(a.dimensions, rank)) suggest(pos(u, 0), transposeOutputM2M(m2m, a.dimensions), priority, originId);
          break;
        case Opcode::Reshape:
          if (s.isArray() && !s.isDynamic() && !inst->shape().isDynamic())
            if (auto m = alignedReshapeM2M(inst->shape().dimensions(), m2m, s.dimensions(),
                                           tileRowsFor(s.elementType(), options_.geometry)))
              suggest(pos(u, 0), *m, priority, originId);
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
          suggest(pos(u, s.isArray() ? 0 : j), m, priority, originId);
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
    Instruction* inst = ps.inst;
    if (isFixed_[static_cast<size_t>(p)]) {
      // A fixed definition keeps its own layout; its neighbours see the class's.
    } else if (!isForwarding(inst->opcode()) && !hasFixedLayouts(inst->opcode())) {
      toOperand(inst, ps.leaf, m2m, priority, originId);
    }
    if (inst->shape().isArray()) toUsers(inst, m2m, priority, originId);
  }
}

void Assigner::propagate() {
  size_t fillCursor = 0;
  for (;;) {
    bool popped = false;
    for (int prio = kLevels - 1; prio >= 0 && !popped; --prio) {
      auto& q = queues_[static_cast<size_t>(prio)];
      while (!q.empty()) {
        Suggestion s = std::move(q.front());
        q.pop_front();
        if (set_[static_cast<size_t>(s.cls)]) continue;
        set_[static_cast<size_t>(s.cls)] = 1;
        classM2M_[static_cast<size_t>(s.cls)] = s.m2m;
        classOrigin_[static_cast<size_t>(s.cls)] = s.origin;
        propagateFrom(s.cls, s.m2m, prio, s.origin);
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
  if (isFixed_[static_cast<size_t>(position)]) return fixed_[static_cast<size_t>(position)];
  int64_t p = position;
  while (parent_[static_cast<size_t>(p)] != p) p = parent_[static_cast<size_t>(p)];
  return classM2M_[static_cast<size_t>(p)];
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
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      if (inst->shape().isArray()) {
        // One leaf: set in place, nothing copied when it already matches.
        int64_t p = pos(inst, 0);
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
        int64_t p = pos(inst, k);
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

std::vector<Instruction*> Assigner::usersOf(const Computation& c, const Instruction* x) {
  std::vector<Instruction*> users;
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands())
      if (o == x) {
        users.push_back(up.get());
        break;
      }
  return users;
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
    Instruction* copy = c.addInstruction(Opcode::Copy, newName(value->name() + ".relayout"), target);
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
    Instruction* gte = c.addInstruction(Opcode::GetTupleElement, newName(value->name() + ".element"), s.tupleElement(i));
    gte->attrs().tupleIndex = i;
    gte->addOperand(value);
    gte->setLocation(value->location());
    Instruction* e = relayout(c, gte, want, offset, producedBy, requiredBy);
    offset += s.tupleElement(i).leafCount();
    elements.push_back(e);
    shapes.push_back(e->shape());
  }
  Instruction* t = c.addInstruction(Opcode::Tuple, newName(value->name() + ".relayout"), Shape::tuple(shapes));
  for (Instruction* e : elements) t->addOperand(e);
  t->setLocation(value->location());
  return t;
}

void Assigner::fixFixedDefinitions() {
  // A fixed definition whose class chose another layout keeps its own and
  // hands its users a relayout.
  std::vector<Instruction*> todo;
  for (Computation* c : processed_)
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      int64_t n = inst->shape().leafCount();
      int64_t b = pos(inst, 0);
      for (int64_t k = 0; k < n; ++k) {
        int64_t p = b + k;
        if (!isFixed_[static_cast<size_t>(p)]) continue;
        if (classM2M_[static_cast<size_t>(find(p))] != fixed_[static_cast<size_t>(p)]) {
          todo.push_back(inst);
          break;
        }
      }
    }
  for (Instruction* inst : todo) {
    Computation& c = *inst->parent();
    int64_t n = inst->shape().leafCount();
    std::vector<std::vector<M2M>> want(static_cast<size_t>(n));
    std::string required;
    for (int64_t k = 0; k < n; ++k) {
      int64_t p = pos(inst, k);
      if (positions_[static_cast<size_t>(p)].rank < 0) continue;
      int64_t cls = find(p);
      want[static_cast<size_t>(k)] = {classM2M_[static_cast<size_t>(cls)]};
      int o = classOrigin_[static_cast<size_t>(cls)];
      if (required.empty()) required = o >= 0 ? originText(o) : "the default layout";
    }
    std::vector<Instruction*> users = usersOf(c, inst);
    bool wasRoot = c.root() == inst;
    Instruction* r = relayout(c, inst, want, 0, producedByText(inst, 0), "its users: " + required);
    if (r == inst) continue;
    redirect(users, inst, r);
    if (wasRoot) c.setRoot(r);
  }
}

void Assigner::insertUseCopies() {
  std::map<std::pair<const Instruction*, std::string>, Instruction*> made;
  for (Computation* c : processed_) {
    std::vector<Instruction*> snapshot;
    for (const auto& up : c->instructions()) snapshot.push_back(up.get());
    for (Instruction* u : snapshot) {
      Opcode op = u->opcode();
      if (isForwarding(op)) continue;
      for (int64_t j = 0; j < u->operandCount(); ++j) {
        Instruction* x = u->operand(j);
        std::vector<std::vector<M2M>> want;
        std::string why;
        const Shape* keptLeaf = nullptr;  // the why of an op that keeps layouts, formatted only when needed
        const Requirement* req = nullptr;
        if (int64_t ord = ordinal(u); ord >= 0)
          for (const auto& [k, r] : requirements_[static_cast<size_t>(ord)])
            if (k == j) req = &r;
        if (req) {
          want = req->leaves;
          why = originText(req->origin);
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
          want = {{layoutOf(*leaf)}};
          keptLeaf = leaf;
        } else {
          continue;
        }
        if (static_cast<int64_t>(want.size()) != x->shape().leafCount()) continue;
        if (satisfied(x->shape(), want)) continue;
        if (keptLeaf)
          why = fmt::format("{} %{} (cannot change layout; result {})", hlo::opcodeName(op), u->name(),
                            m2mText(layoutOf(*keptLeaf)));
        std::string key;
        for (const auto& alternatives : want) key += alternatives.empty() ? "*;" : m2mText(alternatives[0]) + ";";
        auto mit = made.find({x, key});
        Instruction* r = nullptr;
        if (mit != made.end()) {
          r = mit->second;
        } else {
          r = relayout(*c, x, want, 0, producedByText(x, 0), why);
          made[{x, key}] = r;
        }
        if (r != x) u->setOperand(j, r);
      }
    }
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
      if (j < 0 || x == c.root() || !processedSet_.count(&c) || usersOf(c, x).size() != 1) break;
      Instruction* y = x->operand(j);
      M2M m = layoutOf(copy->shape());
      if (tiledBytes(withLayout(y->shape(), m)) >= tiledBytes(copy->shape())) break;
      // x now computes in the copy's layout from a copy of its operand.
      std::vector<Instruction*> users = usersOf(c, copy);
      bool wasRoot = c.root() == copy;
      Instruction* moved = c.addInstruction(Opcode::Copy, newName(y->name() + ".relayout"), withLayout(y->shape(), m));
      moved->addOperand(y);
      moved->setLocation(y->location());
      x->setOperand(j, moved);
      x->setShape(withLayout(x->shape(), m));
      redirect(users, copy, x);
      if (wasRoot) c.setRoot(x);
      LayoutRemark info = copyInfo_[copy];
      info.shape = y->shape().toString(false);
      info.producedBy = producedByText(y, 0);
      info.requiredBy += fmt::format("; moved above %{} (fewer bytes)", x->name());
      copyInfo_.erase(copy);
      copyInfo_[moved] = info;
      c.removeInstruction(copy);
      copies_[ci] = moved;
      copy = moved;
    }
    for (int guard = 0; guard < 64; ++guard) {
      std::vector<Instruction*> users = usersOf(c, copy);
      if (users.size() != 1 || c.root() == copy) break;
      Instruction* u = users[0];
      if (soleArrayOperand(u) < 0 || u == c.root() || isForwarding(u->opcode())) break;
      if (tiledBytes(u->shape()) >= tiledBytes(copy->shape())) break;
      if (u->opcode() == Opcode::Parameter) break;
      Instruction* x = copy->operand(0);
      M2M old = layoutOf(u->shape());
      std::vector<Instruction*> uUsers = usersOf(c, u);
      for (int64_t k = 0; k < u->operandCount(); ++k)
        if (u->operand(k) == copy) u->setOperand(k, x);
      Shape oldShape = u->shape();
      u->setShape(withLayout(u->shape(), layoutOf(x->shape())));
      Instruction* moved = c.addInstruction(Opcode::Copy, newName(u->name() + ".relayout"), withLayout(oldShape, old));
      moved->addOperand(u);
      moved->setLocation(u->location());
      redirect(uUsers, u, moved);
      LayoutRemark info = copyInfo_[copy];
      info.shape = u->shape().toString(false);
      info.requiredBy += fmt::format("; moved below %{} (fewer bytes)", u->name());
      copyInfo_.erase(copy);
      copyInfo_[moved] = info;
      c.removeInstruction(copy);
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
      copyInfo_.erase(dup);
      c->removeInstruction(dup);
    }
  }
}

void Assigner::makeBitcasts() {
  for (Computation* c : processed_) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      Opcode op = inst->opcode();
      if ((op != Opcode::Transpose && op != Opcode::Reshape) || inst->operandCount() != 1) continue;
      const Shape& in = inst->operand(0)->shape();
      const Shape& out = inst->shape();
      if (!in.isArray() || !out.isArray() || in.elementType() != out.elementType() || in.isDynamic() ||
          out.isDynamic())
        continue;
      M2M a = layoutOf(in), b = layoutOf(out);
      LayoutRemark r;
      if (op == Opcode::Transpose) {
        if (!transposeIsBitcast(a, b, inst->attrs().dimensions)) continue;
        r.kind = LayoutRemark::Kind::FreeTranspose;
        ++report.freeTransposes;
      } else {
        if (!reshapeIsBitcast(in.dimensions(), a, out.dimensions(), b, tileRowsFor(in.elementType(), options_.geometry)))
          continue;
        r.kind = LayoutRemark::Kind::FreeReshape;
        ++report.freeReshapes;
      }
      inst->setOpcode(Opcode::Bitcast);
      inst->attrs().dimensions.clear();
      inst->attrs().inferredDimension = -1;
      r.computation = c->name();
      r.instruction = inst->name();
      r.shape = out.toString(false);
      r.fromLayout = m2mText(a);
      r.toLayout = m2mText(b);
      report.remarks.push_back(std::move(r));
    }
  }
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

void Assigner::applyTiles() {
  for (const auto& c : module_.computations()) {
    for (const auto& up : c->instructions()) {
      Instruction* inst = up.get();
      if (needsTiles(inst->shape(), options_.geometry)) tileShape(inst->mutableShape(), options_.geometry);
      if (inst->opcode() == Opcode::Constant && inst->hasAttributes() && inst->attrs().literal)
        inst->attrs().literal->mutableShapeLayoutOnly() = inst->shape();
      if (inst->hasAttributes() && inst->attrs().operandLayoutConstraints)
        for (Shape& k : *inst->attrs().operandLayoutConstraints) tileShape(k, options_.geometry);
    }
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
  makeBitcasts();
  applyTiles();
  for (Instruction* copy : copies_) {
    if (!copy) continue;
    LayoutRemark r = copyInfo_[copy];
    r.computation = copy->parent()->name();
    r.instruction = copy->name();
    r.bytes = paddedBytes(copy->operand(0)->shape()) + paddedBytes(copy->shape());
    ++report.copies;
    report.copyBytes += r.bytes;
    report.remarks.push_back(std::move(r));
  }
  std::stable_sort(report.remarks.begin(), report.remarks.end(), [](const LayoutRemark& a, const LayoutRemark& b) {
    return a.kind == LayoutRemark::Kind::Copy && b.kind != LayoutRemark::Kind::Copy;
  });
  for (Computation* c : processed_) c->sortTopologically();
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
      if (up->opcode() == Opcode::Bitcast && up->operandCount() == 1) bitcasts.push_back(up.get());
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
