#include "passes/fusion/fusion.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "passes/fusion/fusion_graph.h"
#include "passes/fusion/rules.h"
#include "passes/fusion/sink_reshapes.h"

namespace tpu::fusion {

namespace {

using hlo::Instruction;
using hlo::Opcode;

constexpr double kNever = -std::numeric_limits<double>::infinity();
// Cycle sums are compared with this much slack (they are sums of doubles).
constexpr double kSlack = 1e-6;

// Fusing a producer node into all its users: worth `priority` cycles, or
// not at all (kNever) for `reason`.
struct Decision {
  double priority = kNever;
  std::string reason;
};

hlo::FusionKind kindOf(const KernelEstimate& e, const std::vector<const Instruction*>& members) {
  switch (e.lowering) {
    case codegen::FusionLowering::Output: return hlo::FusionKind::Output;
    case codegen::FusionLowering::Input:
    case codegen::FusionLowering::ColumnReduction:
    case codegen::FusionLowering::Rows: return hlo::FusionKind::Input;
    case codegen::FusionLowering::Attention: return hlo::FusionKind::Custom;
    case codegen::FusionLowering::Loop: return hlo::FusionKind::Loop;
    case codegen::FusionLowering::Resident: break;
  }
  bool reduces = false;
  for (const Instruction* m : members) {
    if (isMatmul(*m)) return hlo::FusionKind::Output;
    reduces |= m->opcode() == Opcode::Reduce;
  }
  return reduces ? hlo::FusionKind::Input : hlo::FusionKind::Loop;
}

std::string_view kindName(hlo::FusionKind k) {
  switch (k) {
    case hlo::FusionKind::Loop: return "kLoop";
    case hlo::FusionKind::Input: return "kInput";
    case hlo::FusionKind::Output: return "kOutput";
    case hlo::FusionKind::Custom: return "kCustom";
  }
  return "kLoop";
}

class ComputationFuser {
 public:
  ComputationFuser(hlo::Computation& c, const CostModel& cost, const FusionOptions& options)
      : graph_(c), cost_(cost), options_(options) {}

  void fuseAttention();
  void fuseOutputEpilogues();
  void fuseRowNormalizations();
  void fuseProducersIntoConsumers();
  void fuseMultiOutput();
  void explainUnfusedEdges(const std::string& pass, std::vector<passes::Remark>& remarks);
  // Writes every node of several members as a fusion; returns whether the
  // computation changed. Computations of fusions merged into others go
  // to `unused`.
  bool materialize(hlo::Module& module, NameTable& names, const std::string& pass,
                   std::vector<passes::Remark>* remarks, std::vector<hlo::Computation*>& unused);

 private:
  struct Edge {
    std::string refusal;
    KernelEstimate fused;
  };

  const std::string& name(int32_t i) const { return graph_.instruction(i)->name(); }
  const KernelEstimate& nodeCost(int32_t n);
  // Replaces the members' nodes (already killed) by one node, whose cost is known.
  int32_t addFusedNode(std::vector<int32_t> members, std::vector<int32_t> outputs, KernelEstimate cost);
  // A region the search grew: fused into one node when llo-gen lowers it as
  // `lowering` and the model says it is faster than its members' nodes apart.
  bool fuseRegionIfFaster(const std::vector<int32_t>& members, const std::vector<int32_t>& outputs,
                          codegen::FusionLowering lowering);
  const Edge& edge(int32_t p, int32_t c);
  std::string memberRefusal(int32_t n) const;
  std::string structuralRefusal(int32_t p, int32_t c, const std::vector<int32_t>& members) const;
  std::string inPlaceRefusal(int32_t p, int32_t c) const;
  const Instruction* duplicationCost(int32_t n) const;
  bool onlyRenames(int32_t n) const;
  Decision decide(int32_t p);
  void fuseIntoUsers(int32_t p, std::vector<int32_t>& touched);
  bool tryMerge(int32_t a, int32_t b);
  passes::Remark fusedRemark(const std::string& pass, int32_t n, const std::string& fusionName,
                             hlo::FusionKind kind);

  FusionGraph graph_;
  const CostModel& cost_;
  FusionOptions options_;
  // A deque: growing it keeps the references nodeCost() handed out valid.
  std::deque<std::optional<KernelEstimate>> nodeCosts_;
  // Edges by producer node: (consumer node, index into edgeStore_). The
  // store is a deque so the references edge() hands out stay valid.
  std::vector<std::vector<std::pair<int32_t, size_t>>> edgesByProducer_;
  std::deque<Edge> edgeStore_;
};

int32_t ComputationFuser::addFusedNode(std::vector<int32_t> members, std::vector<int32_t> outputs,
                                       KernelEstimate cost) {
  const int32_t f = graph_.addNode(std::move(members), std::move(outputs));
  nodeCosts_.resize(static_cast<size_t>(graph_.nodeCount()));
  nodeCosts_[static_cast<size_t>(f)] = std::move(cost);
  return f;
}

bool ComputationFuser::fuseRegionIfFaster(const std::vector<int32_t>& members, const std::vector<int32_t>& outputs,
                                          codegen::FusionLowering lowering) {
  KernelEstimate fused = cost_.estimate(graph_, members, outputs);
  if (fused.lowering != lowering || !fused.refusal.empty()) return false;
  double apart = 0;
  for (int32_t m : members) apart += nodeCost(graph_.nodeOf(m)).cycles;
  if (fused.cycles >= apart - kSlack) return false;
  for (int32_t m : members) graph_.kill(graph_.nodeOf(m));
  addFusedNode(members, outputs, std::move(fused));
  return true;
}

const KernelEstimate& ComputationFuser::nodeCost(int32_t n) {
  if (nodeCosts_.size() <= static_cast<size_t>(n)) nodeCosts_.resize(static_cast<size_t>(graph_.nodeCount()));
  std::optional<KernelEstimate>& slot = nodeCosts_[static_cast<size_t>(n)];
  if (!slot) slot = cost_.estimate(graph_, graph_.node(n).members, graph_.node(n).outputs);
  return *slot;
}

std::string ComputationFuser::memberRefusal(int32_t n) const {
  for (int32_t m : graph_.node(n).members) {
    std::string r = unfusibleReason(*graph_.instruction(m), graph_.ordered(m));
    if (!r.empty()) return r;
  }
  return {};
}

// A buffer a dynamic-update-slice of c updates in place must not be read by
// what is fused in beside it, unless that is elementwise work (XLA's
// in-place rule, FUSION.md 2.2).
std::string ComputationFuser::inPlaceRefusal(int32_t p, int32_t c) const {
  for (int32_t m : graph_.node(c).members) {
    if (graph_.instruction(m)->opcode() != Opcode::DynamicUpdateSlice) continue;
    const int32_t buffer = graph_.operandsOf(m)[0];
    if (graph_.contains(c, buffer)) continue;
    // Elementwise work may read it; so may one dynamic-slice of exactly the
    // element block the update writes (same indices, same shape).
    bool reads = false, safe = true;
    int slices = 0;
    const std::span<const int32_t> dusOps = graph_.operandsOf(m);
    for (int32_t x : graph_.node(p).members) {
      const Instruction& i = *graph_.instruction(x);
      const std::span<const int32_t> ops = graph_.operandsOf(x);
      for (int32_t o : ops) reads |= o == buffer;
      if (hlo::isElementwise(i.opcode()) || movesNoData(i)) continue;
      const bool sameBlock = i.opcode() == Opcode::DynamicSlice && !ops.empty() && ops[0] == buffer &&
                             std::equal(ops.begin() + 1, ops.end(), dusOps.begin() + 2, dusOps.end()) &&
                             ops.size() + 1 == dusOps.size() &&
                             i.shape() == graph_.instruction(dusOps[1])->shape();
      safe &= sameBlock && ++slices == 1;
    }
    if (reads && !safe)
      return fmt::format("{} updates {} in place, and {} reads it too", name(m), name(buffer),
                         name(graph_.node(p).outputs[0]));
  }
  return {};
}

std::string ComputationFuser::structuralRefusal(int32_t p, int32_t c, const std::vector<int32_t>& members) const {
  if (std::string r = memberRefusal(c); !r.empty()) return "consumer " + r;
  if (static_cast<int>(members.size()) > options_.maxInstructions)
    return fmt::format("the fusion would hold {} instructions, more than the {} allowed", members.size(),
                       options_.maxInstructions);
  std::vector<int32_t> matmuls;
  for (int32_t m : members)
    if (isMatmul(*graph_.instruction(m))) matmuls.push_back(m);
  if (matmuls.size() > 1)
    return fmt::format("{} and {} would share a kernel, and an MXU kernel runs one dot or convolution",
                       name(matmuls[0]), name(matmuls[1]));
  if (matmuls.size() == 1 && graph_.contains(c, matmuls[0]))
    for (int32_t m : graph_.node(p).members)
      if (!isPrologueOp(*graph_.instruction(m)))
        return fmt::format("{} takes only elementwise or view prologues on its operands, and {} is neither",
                           name(matmuls[0]), name(m));
  if (std::string r = inPlaceRefusal(p, c); !r.empty()) return r;
  std::vector<int32_t> inputs;
  for (int32_t m : members)
    for (int32_t o : graph_.operandsOf(m))
      if (!std::binary_search(members.begin(), members.end(), o)) inputs.push_back(o);
  std::sort(inputs.begin(), inputs.end());
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  if (static_cast<int>(inputs.size()) > options_.maxOperands)
    return fmt::format("the fusion would read {} operands, more than the {} allowed", inputs.size(),
                       options_.maxOperands);
  return {};
}

const ComputationFuser::Edge& ComputationFuser::edge(int32_t p, int32_t c) {
  if (edgesByProducer_.size() <= static_cast<size_t>(p)) edgesByProducer_.resize(static_cast<size_t>(p) + 1);
  std::vector<std::pair<int32_t, size_t>>& known = edgesByProducer_[static_cast<size_t>(p)];
  for (const auto& [consumer, index] : known)
    if (consumer == c) return edgeStore_[index];
  Edge e;
  std::vector<int32_t> members = graph_.unionMembers(p, c);
  e.refusal = structuralRefusal(p, c, members);
  if (e.refusal.empty()) {
    e.fused = cost_.estimate(graph_, members, graph_.node(c).outputs);
    e.refusal = e.fused.refusal;
  }
  known.push_back({c, edgeStore_.size()});
  edgeStore_.push_back(std::move(e));
  return edgeStore_.back();
}

// The instruction that makes computing node n twice a waste (nullptr: n may
// be duplicated).
const Instruction* ComputationFuser::duplicationCost(int32_t n) const {
  for (int32_t m : graph_.node(n).members) {
    const Instruction& i = *graph_.instruction(m);
    if (isExpensive(i) && !isAlwaysDuplicable(i)) return &i;
  }
  return nullptr;
}

bool ComputationFuser::onlyRenames(int32_t n) const {
  for (int32_t m : graph_.node(n).members)
    if (!movesNoData(*graph_.instruction(m))) return false;
  return true;
}

Decision ComputationFuser::decide(int32_t p) {
  Decision d;
  const FusionGraph::Node& n = graph_.node(p);
  if (n.members.size() == 1 && graph_.instruction(n.members[0])->opcode() == Opcode::Constant &&
      graph_.instruction(n.members[0])->shape().isScalar()) {
    d.reason = "scalar constants are copied into every fusion that reads them";
    return d;
  }
  if (n.outputs.size() != 1) {
    d.reason = fmt::format("{} leaves a multi-output fusion, which fuses no further", name(n.outputs[0]));
    return d;
  }
  if (std::string r = memberRefusal(p); !r.empty()) {
    d.reason = r;
    return d;
  }
  // One output: its reader count is the number of user nodes, so a value
  // read all over the module is refused without reading its users.
  const bool tooMany = graph_.readerCount(n.outputs[0]) > options_.maxUsers && n.outputs[0] != graph_.rootIndex();
  bool result = false;
  std::vector<int32_t> users;
  if (!tooMany) users = graph_.usersWithin(p, &result, static_cast<size_t>(options_.maxUsers));
  if (result || (users.empty() && !tooMany)) {
    d.reason = fmt::format("{} is the computation's result", name(n.outputs[0]));
    return d;
  }
  if (tooMany || static_cast<int>(users.size()) > options_.maxUsers) {
    d.reason = fmt::format("{} has more than {} users; fusion into more is not tried", name(n.outputs[0]),
                           options_.maxUsers);
    return d;
  }
  auto allOrNone = [&](int32_t c, const std::string& refusal) {
    if (users.size() == 1) return refusal;
    return fmt::format("{} fuses into all its {} users or none, and into {}: {}", name(n.outputs[0]), users.size(),
                       name(graph_.node(c).members.back()), refusal);
  };
  // Consumers that take nothing first: they make copying pointless.
  for (int32_t c : users)
    if (std::string r = memberRefusal(c); !r.empty()) {
      d.reason = allOrNone(c, "consumer " + r);
      return d;
    }
  if (users.size() > 1)
    if (const Instruction* e = duplicationCost(p)) {
      d.reason = fmt::format("would duplicate {}, which has {} users", e->name(), users.size());
      return d;
    }
  // Elementwise work on a dot's result stays for the dot's output fusion
  // rather than joining a row kernel (the MXU kernel then writes the
  // narrow result type once).
  for (int32_t c : users)
    if (nodeCost(c).isFusion && nodeCost(c).lowering == codegen::FusionLowering::Rows)
      for (int32_t m : n.members)
        for (int32_t o : graph_.operandsOf(m))
          if (isMatmul(*graph_.instruction(o)) && !graph_.contains(p, o)) {
            d.reason = fmt::format("{} is the epilogue of {}'s output fusion, not part of a row kernel",
                                   name(n.outputs[0]), name(o));
            return d;
          }
  double unfused = nodeCost(p).cycles, fused = 0;
  const KernelEstimate* resident = nullptr;  // a fused kernel no streaming kernel covers, if any
  for (int32_t c : users) {
    const Edge& e = edge(p, c);
    if (!e.refusal.empty()) {
      d.reason = allOrNone(c, e.refusal);
      return d;
    }
    unfused += nodeCost(c).cycles;
    fused += e.fused.cycles;
    if (!resident && e.fused.lowering == codegen::FusionLowering::Resident) resident = &e.fused;
  }
  const double gain = unfused - fused;
  if (gain > kSlack || (gain >= -kSlack && onlyRenames(p))) {
    d.priority = gain;
    return d;
  }
  // Say why the fused kernel is slow when it is: llo-gen would run it as sections.
  const std::string why =
      resident ? fmt::format(" (no streaming kernel covers the fusion: it would run {} sections, each waiting for its "
                             "DMAs)",
                             resident->sections)
               : "";
  d.reason = fmt::format("fusing {} into its {} would not pay: {:.0f} estimated cycles fused against {:.0f} apart{}",
                         name(n.outputs[0]), users.size() == 1 ? "user" : fmt::format("{} users", users.size()),
                         fused, unfused, why);
  return d;
}

void ComputationFuser::fuseIntoUsers(int32_t p, std::vector<int32_t>& touched) {
  std::vector<int32_t> users = graph_.users(p);
  graph_.kill(p);
  for (int32_t c : users) {
    const Edge e = edge(p, c);
    std::vector<int32_t> members = graph_.unionMembers(p, c);
    std::vector<int32_t> outputs = graph_.node(c).outputs;
    graph_.kill(c);
    const int32_t f = addFusedNode(std::move(members), std::move(outputs), e.fused);
    touched.push_back(f);
    for (int32_t v : graph_.inputs(f))
      if (int32_t q = graph_.nodeOf(v); q >= 0) touched.push_back(q);
  }
}

// Row normalizations (softmax, layer norm, RMS norm) first, each as one
// row kernel: a reduction over trailing dimensions broadcast back along the
// rows ties the whole normalization together, and fusing it edge by edge
// passes through fusions no streaming kernel covers (a reduce and its
// broadcast alone would be a resident kernel), which the cost model
// rightly refuses one at a time. Seeds are such reduces; a region grows
// through elementwise work, broadcasts and compatible reduces on the rows'
// shape or the per-row shape, and is fused when llo-gen makes one row
// kernel of it and the model says it is faster than its parts.
// Readers past which a row region does not grow through a value.
constexpr size_t kMaxRowRegionFanout = 16;
// Steps from a row reduction down to the broadcast that brings it back.
constexpr int kMaxRowChain = 8;

void ComputationFuser::fuseRowNormalizations() {
  const int32_t count = graph_.instructionCount();
  std::vector<char> taken(static_cast<size_t>(count), 0);
  // Per seed, stamped with the seed (no clearing: linear over all seeds).
  std::vector<int32_t> inStamp(static_cast<size_t>(count), -1), seenStamp(static_cast<size_t>(count), -1);
  auto single = [&](int32_t i) {
    const int32_t n = graph_.nodeOf(i);
    return n >= 0 && graph_.node(n).alive && graph_.node(n).members.size() == 1 && graph_.live(i) &&
           !graph_.ordered(i);
  };
  const bool topological = graph_.topological();
  for (int32_t seed = 0; seed < count; ++seed) {
    const Instruction& red = *graph_.instruction(seed);
    if (taken[static_cast<size_t>(seed)] || red.opcode() != Opcode::Reduce || red.operandCount() != 2 ||
        !single(seed) || !red.operand(0)->shape().isArray())
      continue;
    const std::vector<int64_t> dims = red.operand(0)->shape().dimensions();
    const std::vector<int64_t>& rowDims = red.shape().isArray() ? red.shape().dimensions() : dims;
    std::vector<int64_t> reduced = red.attrs().dimensions;
    std::sort(reduced.begin(), reduced.end());
    bool trailing = !reduced.empty() && reduced.size() < dims.size();
    for (size_t k = 0; k < reduced.size() && trailing; ++k)
      trailing = reduced[k] == static_cast<int64_t>(dims.size() - reduced.size() + k);
    if (!trailing) continue;
    // The per-row values must come back along the rows: a broadcast of the
    // reduce, or of elementwise work on it (mean * 1/n + eps, rsqrt), to
    // the rows' shape. Looked for a few steps down single chains only.
    bool broadcastBack = false;
    {
      int32_t v = seed;
      for (int step = 0; step < kMaxRowChain && !broadcastBack; ++step) {
        int32_t next = -1;
        for (int32_t u : graph_.usersOf(v)) {
          const Instruction& ui = *graph_.instruction(u);
          if (ui.opcode() == Opcode::Broadcast && ui.shape().dimensions() == dims) broadcastBack = true;
          else if (hlo::isElementwise(ui.opcode()) && ui.shape().isArray() && ui.shape().dimensions() == rowDims)
            next = u;
        }
        if (next < 0) break;
        v = next;
      }
    }
    if (!broadcastBack) continue;
    // The shape of one row: a weight or bias broadcast along the rows.
    const std::vector<int64_t> vecDims(dims.end() - static_cast<std::ptrdiff_t>(reduced.size()), dims.end());
    // Values with the rows' element count in another shape ([16, 1024] for
    // rows [16, 8, 128]) are the same elements in row-major order: the row
    // kernel takes elementwise work on them and reshapes between them.
    const std::optional<int64_t> fullCount = red.operand(0)->shape().elementCount();
    auto flatFull = [&](const Instruction& in) {
      return in.shape().isArray() && in.shape().dimensions() != dims && fullCount &&
             in.shape().elementCount() == fullCount;
    };
    auto isVec = [&](const Instruction& in) {
      return in.shape().dimensions() == vecDims && in.shape().dimensions() != dims &&
             in.shape().dimensions() != rowDims;
    };
    auto fits = [&](int32_t i) {
      const Instruction& in = *graph_.instruction(i);
      if (taken[static_cast<size_t>(i)] || !single(i) || !in.shape().isArray() || in.shape().isScalar()) return false;
      const std::vector<int64_t>& d = in.shape().dimensions();
      // A computed weight (convert(w)): elementwise work on one row's shape
      // that only the region reads; llo-gen sinks its broadcast below it.
      if (isVec(in))
        return hlo::isElementwise(in.opcode()) && in.opcode() != Opcode::Rng &&
               in.opcode() != Opcode::BitcastConvert && unfusibleReason(in, false).empty() &&
               graph_.usersOf(i).size() <= kMaxRowRegionFanout;
      if (flatFull(in)) {
        if (in.opcode() == Opcode::Reshape) return flatFull(*in.operand(0)) || in.operand(0)->shape().dimensions() == dims;
        if (!hlo::isElementwise(in.opcode()) || in.opcode() == Opcode::Rng || in.opcode() == Opcode::BitcastConvert ||
            !unfusibleReason(in, false).empty())
          return false;
        for (int32_t o : graph_.operandsOf(i))
          if (isMatmul(*graph_.instruction(o))) return false;
        return true;
      }
      if (in.opcode() == Opcode::Reshape && d == dims) return flatFull(*in.operand(0));
      if (d != dims && d != rowDims) return false;
      if (in.opcode() == Opcode::Reduce)
        return in.operandCount() == 2 && in.attrs().dimensions == red.attrs().dimensions && d == rowDims;
      if (in.opcode() == Opcode::Broadcast) return true;
      // Elementwise work on a dot's result is its output fusion's epilogue
      // (the MXU kernel then writes the narrow type, not f32).
      for (int32_t o : graph_.operandsOf(i))
        if (isMatmul(*graph_.instruction(o))) return false;
      return hlo::isElementwise(in.opcode()) && in.opcode() != Opcode::Rng && in.opcode() != Opcode::BitcastConvert &&
             unfusibleReason(in, false).empty();
    };
    std::vector<int32_t> members, stack{seed};
    auto in = [&](int32_t j) { return inStamp[static_cast<size_t>(j)] == seed; };
    inStamp[static_cast<size_t>(seed)] = seed;
    while (!stack.empty() && static_cast<int>(members.size()) <= options_.maxInstructions) {
      const int32_t i = stack.back();
      stack.pop_back();
      members.push_back(i);
      auto visit = [&](int32_t j) {
        if (!in(j) && fits(j)) {
          inStamp[static_cast<size_t>(j)] = seed;
          stack.push_back(j);
        }
      };
      for (int32_t j : graph_.operandsOf(i)) visit(j);
      // A value read by many (a broadcast bias shared by every layer) is
      // not grown through: its readers are other rows' work, and visiting
      // them for every seed made this pass quadratic in the module. Nor is
      // a weight: its other readers are other rows' work too.
      const auto& users = graph_.usersOf(i);
      if (users.size() <= kMaxRowRegionFanout && !isVec(*graph_.instruction(i)))
        for (int32_t j : users) visit(j);
    }
    // A weight read outside the region stays outside (a row kernel writes
    // only values of the rows' shape), and so does what only it read.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (int32_t m : members) {
        if (!in(m) || !isVec(*graph_.instruction(m))) continue;
        bool outside = m == graph_.rootIndex();
        for (int32_t u : graph_.usersOf(m)) outside |= !in(u);
        if (outside) {
          inStamp[static_cast<size_t>(m)] = -1;
          dropped = true;
        }
      }
    }
    members.erase(std::remove_if(members.begin(), members.end(), [&](int32_t m) { return !in(m); }), members.end());
    if (static_cast<int>(members.size()) > options_.maxInstructions || members.size() < 3) continue;
    std::sort(members.begin(), members.end());
    std::vector<int32_t> outputs;
    bool broadcastOut = false;
    for (int32_t m : members) {
      bool needed = m == graph_.rootIndex();
      // Stops at the first reader outside: a broadcast shared by every
      // layer has thousands of readers, and reading them all for every
      // region made this pass quadratic.
      for (int32_t u : graph_.usersOf(m))
        if (!in(u)) {
          needed = true;
          break;
        }
      if (!needed) continue;
      outputs.push_back(m);
      // A broadcast of a parameter or scalar as a result: llo-gen's row
      // kernel writes computed rows only (lower_rows.cpp), so the region
      // would not be one row kernel; said here before the cycle search
      // and the candidate's classification, which would both cost a walk.
      const Instruction& mi = *graph_.instruction(m);
      if (mi.opcode() == Opcode::Broadcast &&
          (mi.operand(0)->opcode() == Opcode::Parameter || mi.operand(0)->opcode() == Opcode::Constant ||
           mi.operand(0)->shape().isScalar()))
        broadcastOut = true;
    }
    if (outputs.empty() || broadcastOut) continue;
    // No path may leave the region and come back (a dot between a layer
    // norm and a residual add of the same shape): that would be a cycle.
    // In a computation in operand-before-user order, a path back into the
    // region ends at a member, so it only runs through instructions before
    // the last member: the search stays within the region's span (it used
    // to walk up to 4096 instructions past every region, most of a large
    // module's time in this pass).
    bool cycle = false;
    {
      const int32_t last = topological ? members.back() : count;
      auto seen = [&](int32_t j) { return seenStamp[static_cast<size_t>(j)] == seed || j > last; };
      std::vector<int32_t> work;
      for (int32_t m : members)
        for (int32_t u : graph_.usersOf(m)) {
          if (u > last) break;  // readers are ascending
          if (!in(u) && !seen(u)) {
            seenStamp[static_cast<size_t>(u)] = seed;
            work.push_back(u);
          }
        }
      for (int budget = 4096; !work.empty() && !cycle; --budget) {
        if (budget == 0) {
          cycle = true;  // too far to tell: assume the worst
          break;
        }
        const int32_t v = work.back();
        work.pop_back();
        for (int32_t u : graph_.usersOf(v)) {
          if (u > last) break;
          if (in(u)) cycle = true;
          if (!seen(u)) {
            seenStamp[static_cast<size_t>(u)] = seed;
            work.push_back(u);
          }
        }
      }
    }
    if (cycle) continue;
    if (!fuseRegionIfFaster(members, outputs, codegen::FusionLowering::Rows)) continue;
    for (int32_t m : members) taken[static_cast<size_t>(m)] = 1;
  }
}

// Attention: dot(Q, K) -> elementwise work and a softmax over the keys ->
// dot(P, V) as one kernel (llo-gen's attention kernel) that keeps the score
// matrix in VMEM. XLA leaves the two dots and the softmax apart, and the
// scores make a round trip through HBM between them; no edge-by-edge
// decision gets there (each step alone is a slower kernel), so the region
// is formed whole: seeds are dots, the region grows from the first operand
// back through elementwise work, broadcasts and reductions shaped like the
// scores or their rows to the other dot, and it is fused when nothing
// outside reads a value inside, llo-gen makes one attention kernel of it and
// the model says it is faster than its parts.
void ComputationFuser::fuseAttention() {
  const int32_t count = graph_.instructionCount();
  auto single = [&](int32_t i) {
    const int32_t n = graph_.nodeOf(i);
    return n >= 0 && graph_.node(n).alive && graph_.node(n).members.size() == 1 && graph_.live(i) &&
           !graph_.ordered(i);
  };
  std::vector<int32_t> stamp(static_cast<size_t>(count), -1);
  for (int32_t seed = 0; seed < count; ++seed) {
    const Instruction& d2 = *graph_.instruction(seed);
    if (d2.opcode() != Opcode::Dot || !single(seed) || d2.operandCount() != 2 || !d2.shape().isArray()) continue;
    const std::span<const int32_t> ops = graph_.operandsOf(seed);
    if (ops.empty()) continue;
    const int32_t p = ops[0];
    const Instruction& pi = *graph_.instruction(p);
    if (!pi.shape().isArray() || pi.shape().rank() < 2) continue;
    const std::vector<int64_t> dims = pi.shape().dimensions();
    const std::vector<int64_t> rowDims(dims.begin(), dims.end() - 1);
    int32_t d1 = -1;
    bool ok = true;
    std::vector<int32_t> members{seed}, stack{p};
    stamp[static_cast<size_t>(p)] = seed;
    stamp[static_cast<size_t>(seed)] = seed;
    while (!stack.empty() && ok) {
      const int32_t i = stack.back();
      stack.pop_back();
      const Instruction& x = *graph_.instruction(i);
      if (!single(i) || static_cast<int>(members.size()) > options_.maxInstructions) {
        ok = false;
        break;
      }
      members.push_back(i);
      if (x.opcode() == Opcode::Dot) {
        if (d1 >= 0 || x.shape().dimensions() != dims) ok = false;
        d1 = i;
        continue;  // Q and K are the fusion's parameters
      }
      const bool shaped = x.shape().isArray() && (x.shape().dimensions() == dims || x.shape().dimensions() == rowDims);
      const bool kind = x.opcode() == Opcode::Reduce || x.opcode() == Opcode::Broadcast ||
                        (hlo::isElementwise(x.opcode()) && x.opcode() != Opcode::Rng &&
                         x.opcode() != Opcode::BitcastConvert && unfusibleReason(x, false).empty());
      if (!shaped || !kind) {
        ok = false;
        break;
      }
      for (int32_t o : graph_.operandsOf(i)) {
        if (stamp[static_cast<size_t>(o)] == seed) continue;
        const Instruction& oi = *graph_.instruction(o);
        // Scalars (a scale, the reductions' init values) stay parameters.
        if (oi.shape().isArray() && oi.shape().isScalar()) continue;
        stamp[static_cast<size_t>(o)] = seed;
        stack.push_back(o);
      }
    }
    if (!ok || d1 < 0) continue;
    // Nothing outside may read a value inside (the scores never leave).
    for (int32_t m : members) {
      if (m == seed) continue;
      if (m == graph_.rootIndex()) ok = false;
      for (int32_t u : graph_.usersOf(m)) ok &= stamp[static_cast<size_t>(u)] == seed;
    }
    if (!ok) continue;
    std::sort(members.begin(), members.end());
    std::vector<int32_t> outputs{seed};
    fuseRegionIfFaster(members, outputs, codegen::FusionLowering::Attention);
  }
}

// Output fusions whose epilogue reads the dot's result more than once (a
// GELU: x * 0.5 * (1 + tanh(c * (x + 0.0447 x^3)))). Priority fusion moves
// a producer into all its users at once, so a dot's result with four
// elementwise users would be duplicated into each, which it rightly
// refuses, and the whole epilogue makes HBM round trips. Here the region
// grows from a dot through elementwise users shaped like its result whose
// other operands are scalars, broadcasts (a bias, a constant) or values
// that do not depend on the dot (a residual), to a single value read
// outside; it is fused when llo-gen makes one output kernel of it and the
// model says it is faster than its parts.
void ComputationFuser::fuseOutputEpilogues() {
  const int32_t count = graph_.instructionCount();
  auto single = [&](int32_t i) {
    const int32_t n = graph_.nodeOf(i);
    return n >= 0 && graph_.node(n).alive && graph_.node(n).members.size() == 1 && graph_.live(i) &&
           !graph_.ordered(i);
  };
  constexpr int kReachBudget = 4096;
  // Per seed, stamped with the seed: reachable from it, and in its region.
  std::vector<int32_t> reach(static_cast<size_t>(count), -1), in(static_cast<size_t>(count), -1);
  // Which matmuls reach more than the budget's instructions (then they are
  // skipped). A static property of the graph, found last matmul first: a
  // walk that meets a later matmul already known to reach too many stops
  // there (it reaches all of those too), so in a long chain of layers each
  // dot costs the walk to the next one, not the budget.
  std::vector<char> unbounded(static_cast<size_t>(count), 0);
  {
    std::vector<int32_t> seen(static_cast<size_t>(count), -1), work;
    for (int32_t seed = count; seed-- > 0;) {
      if (!isMatmul(*graph_.instruction(seed))) continue;
      work.assign(1, seed);
      seen[static_cast<size_t>(seed)] = seed;
      int reached = 1;
      while (!work.empty() && !unbounded[static_cast<size_t>(seed)]) {
        const int32_t v = work.back();
        work.pop_back();
        for (int32_t u : graph_.usersOf(v)) {
          if (seen[static_cast<size_t>(u)] == seed) continue;
          seen[static_cast<size_t>(u)] = seed;
          work.push_back(u);
          if (++reached > kReachBudget || unbounded[static_cast<size_t>(u)]) {
            unbounded[static_cast<size_t>(seed)] = 1;
            break;
          }
        }
      }
    }
  }
  for (int32_t seed = 0; seed < count; ++seed) {
    const Instruction& dot = *graph_.instruction(seed);
    if (!isMatmul(dot) || !single(seed) || !dot.shape().isArray()) continue;
    const std::vector<int64_t> dims = dot.shape().dimensions();
    // What depends on the dot (bounded: past that, assume everything).
    bool bounded = !unbounded[static_cast<size_t>(seed)];
    if (bounded) {
      std::vector<int32_t> work{seed};
      reach[static_cast<size_t>(seed)] = seed;
      for (int budget = kReachBudget; !work.empty(); --budget) {
        if (budget == 0) {
          bounded = false;
          break;
        }
        const int32_t v = work.back();
        work.pop_back();
        for (int32_t u : graph_.usersOf(v))
          if (reach[static_cast<size_t>(u)] != seed) {
            reach[static_cast<size_t>(u)] = seed;
            work.push_back(u);
          }
      }
    }
    if (!bounded) continue;
    std::vector<int32_t> members{seed};
    in[static_cast<size_t>(seed)] = seed;
    auto isIn = [&](int32_t j) { return in[static_cast<size_t>(j)] == seed; };
    // A broadcast of a value of lower rank that does not depend on the dot.
    auto smallBroadcast = [&](int32_t o) {
      const Instruction& b = *graph_.instruction(o);
      return b.opcode() == Opcode::Broadcast && single(o) && reach[static_cast<size_t>(o)] != seed &&
             b.shape().dimensions() == dims && b.operand(0)->shape().rank() < b.shape().rank();
    };
    std::vector<int32_t> frontier(graph_.usersOf(seed).begin(), graph_.usersOf(seed).end());
    bool grew = true;
    while (grew && static_cast<int>(members.size()) < options_.maxInstructions) {
      grew = false;
      std::vector<int32_t> next;
      for (int32_t u : frontier) {
        if (isIn(u)) continue;
        const Instruction& x = *graph_.instruction(u);
        bool fits = single(u) && x.shape().isArray() && x.shape().dimensions() == dims && !isMatmul(x) &&
                    hlo::isElementwise(x.opcode()) && x.opcode() != Opcode::Rng &&
                    x.opcode() != Opcode::BitcastConvert && unfusibleReason(x, false).empty();
        bool ready = true;
        std::vector<int32_t> extra;
        for (int32_t o : graph_.operandsOf(u)) {
          if (!fits) break;
          if (isIn(o) || graph_.instruction(o)->shape().isScalar()) continue;
          if (smallBroadcast(o)) {
            extra.push_back(o);
            continue;
          }
          if (reach[static_cast<size_t>(o)] == seed) ready = false;  // joins later, or never
          else if (graph_.instruction(o)->shape().dimensions() != dims) fits = false;
        }
        if (!fits) continue;
        if (!ready) {
          next.push_back(u);
          continue;
        }
        for (int32_t o : extra)
          if (!isIn(o)) {
            in[static_cast<size_t>(o)] = seed;
            members.push_back(o);
          }
        in[static_cast<size_t>(u)] = seed;
        members.push_back(u);
        grew = true;
        for (int32_t w : graph_.usersOf(u)) next.push_back(w);
      }
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      frontier = std::move(next);
    }
    if (members.size() < 3 || static_cast<int>(members.size()) > options_.maxInstructions) continue;
    std::sort(members.begin(), members.end());
    std::vector<int32_t> outputs;
    for (int32_t m : members) {
      bool needed = m == graph_.rootIndex();
      for (int32_t u : graph_.usersOf(m)) needed |= !isIn(u);
      if (needed) outputs.push_back(m);
    }
    // One result: the output kernel writes one tile per C tile. Values
    // read outside other than the last one would need a second kernel (and
    // plain priority fusion handles a chain with one user each).
    if (outputs.size() != 1) continue;
    // Only worth a region when some value inside has several users inside.
    bool shared = false;
    for (int32_t m : members) {
      int users = 0;
      for (int32_t u : graph_.usersOf(m)) users += isIn(u);
      shared |= users > 1;
    }
    if (!shared) continue;
    fuseRegionIfFaster(members, outputs, codegen::FusionLowering::Output);
  }
}

void ComputationFuser::fuseProducersIntoConsumers() {
  struct Entry {
    double priority;
    int32_t node;
    uint32_t version;
    bool operator<(const Entry& o) const {
      return priority != o.priority ? priority < o.priority : node > o.node;  // max priority, then first node
    }
  };
  std::priority_queue<Entry> queue;
  std::vector<uint32_t> version(static_cast<size_t>(graph_.nodeCount()), 0);
  auto consider = [&](int32_t n) {
    if (version.size() <= static_cast<size_t>(n)) version.resize(static_cast<size_t>(graph_.nodeCount()), 0);
    uint32_t v = ++version[static_cast<size_t>(n)];
    if (!graph_.node(n).alive) return;
    Decision d = decide(n);
    if (d.priority != kNever) queue.push({d.priority, n, v});
  };
  const int32_t initial = graph_.nodeCount();
  for (int32_t n = 0; n < initial; ++n) consider(n);
  std::vector<int32_t> touched;
  while (!queue.empty()) {
    Entry top = queue.top();
    queue.pop();
    if (!graph_.node(top.node).alive || version[static_cast<size_t>(top.node)] != top.version) continue;
    touched.clear();
    fuseIntoUsers(top.node, touched);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int32_t n : touched) consider(n);
  }
}

// Merges nodes a and b into one kernel when the cost model says it pays.
// The merged kernel exports the outputs of a and b that something outside
// it still reads (a producer fused into one of its consumers stays an
// output for the others).
bool ComputationFuser::tryMerge(int32_t a, int32_t b) {
  if (!memberRefusal(a).empty() || !memberRefusal(b).empty()) return false;
  std::vector<int32_t> members = graph_.unionMembers(a, b);
  if (!structuralRefusal(a, b, members).empty()) return false;
  if (graph_.reachesIndirectly(a, b) || graph_.reachesIndirectly(b, a)) return false;
  std::vector<int32_t> outputs;
  for (int32_t n : {a, b})
    for (int32_t o : graph_.node(n).outputs) {
      // Read by another node (copies of a user elsewhere count), or a result.
      if (o == graph_.rootIndex() || graph_.readByOtherThan(o, a, b)) outputs.push_back(o);
    }
  std::sort(outputs.begin(), outputs.end());
  outputs.erase(std::unique(outputs.begin(), outputs.end()), outputs.end());
  KernelEstimate merged = cost_.estimate(graph_, members, outputs);
  if (!merged.refusal.empty() || nodeCost(a).cycles + nodeCost(b).cycles - merged.cycles <= kSlack) return false;
  graph_.kill(a);
  graph_.kill(b);
  addFusedNode(std::move(members), std::move(outputs), std::move(merged));
  return true;
}

// Producer-consumer multi-output fusion: a producer the priority pass left
// alone (several users, or a result) is fused into one consumer and stays
// an output of it, so it is computed and read once. Then sibling fusion:
// two kernels reading the same operand become one that reads it once.
void ComputationFuser::fuseMultiOutput() {
  const int32_t count = graph_.nodeCount();
  for (int32_t p = 0; p < count; ++p) {
    if (!graph_.node(p).alive || graph_.node(p).outputs.size() != 1 || !nodeCost(p).isKernel) continue;
    bool result = false;
    std::vector<int32_t> users = graph_.users(p, &result, static_cast<size_t>(options_.maxUsers));
    if (users.size() < 2 && !result) continue;  // one user: priority fusion's call
    // Every user that pays joins (a dot whose result is only sliced: each
    // slice an output of the dot's kernel, the whole result never written).
    int32_t into = p;
    for (int32_t c : users)
      if (graph_.node(c).alive && nodeCost(c).isKernel && tryMerge(into, c)) into = graph_.nodeCount() - 1;
  }
  for (int32_t v = 0; v < graph_.instructionCount(); ++v) {
    if (graph_.instruction(v)->shape().isScalar() || graph_.usersOf(v).empty()) continue;
    // Kernels, not instructions: one user copied into two kernels (a cheap
    // transpose duplicated into its consumers) makes them siblings too.
    std::vector<int32_t> readers = graph_.readers(v);
    if (readers.size() < 2) continue;
    constexpr size_t kMaxSiblings = 8;  // pairs tried per operand stay bounded
    if (readers.size() > kMaxSiblings) readers.resize(kMaxSiblings);
    for (size_t i = 0; i < readers.size(); ++i)
      for (size_t j = i + 1; j < readers.size(); ++j) {
        int32_t a = readers[i], b = readers[j];
        if (a == b || !graph_.node(a).alive || !graph_.node(b).alive || !nodeCost(a).isKernel || !nodeCost(b).isKernel)
          continue;
        if (tryMerge(a, b)) {
          readers[i] = graph_.nodeCount() - 1;
          readers[j] = readers[i];
        }
      }
  }
}

}  // namespace

namespace {

std::string jsonLine(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

passes::Remark ComputationFuser::fusedRemark(const std::string& pass, int32_t n, const std::string& fusionName,
                                             hlo::FusionKind kind) {
  const FusionGraph::Node& node = graph_.node(n);
  const KernelEstimate& after = nodeCost(n);
  double before = 0, bytesBefore = 0;
  std::vector<std::string> members;
  for (int32_t m : node.members) {
    KernelEstimate alone = cost_.estimate(graph_, {m}, {m});
    before += alone.cycles;
    bytesBefore += alone.hbmBytes;
    members.push_back(name(m));
  }
  const double saved = bytesBefore - after.hbmBytes;
  std::string list;
  for (const std::string& m : members) list += (list.empty() ? "" : ", ") + m;
  passes::Remark r;
  r.pass = pass;
  r.text = fmt::format("{}: {}: fused {} ({}, {} kernel) = {{{}}}: saves {:.0f} HBM bytes; estimated cycles {:.0f} -> "
                       "{:.0f}",
                       pass, graph_.computation().name(), fusionName, kindName(kind),
                       codegen::fusionLoweringName(after.lowering), list, saved, before, after.cycles);
  nlohmann::ordered_json j = {{"pass", pass},
                      {"remark", "fused"},
                      {"computation", graph_.computation().name()},
                      {"fusion", fusionName},
                      {"kind", kindName(kind)},
                      {"kernel", codegen::fusionLoweringName(after.lowering)},
                      {"members", members},
                      {"hbm_bytes_saved", static_cast<int64_t>(saved)},
                      {"cycles_before", static_cast<int64_t>(before + 0.5)},
                      {"cycles_after", static_cast<int64_t>(after.cycles + 0.5)}};
  r.json = jsonLine(j);
  return r;
}

// One remark per producer-consumer edge between two kernels: the rule or
// the cost that kept them apart.
void ComputationFuser::explainUnfusedEdges(const std::string& pass, std::vector<passes::Remark>& remarks) {
  std::unordered_map<int32_t, std::string> producerReason;  // decide() once per producer node
  for (int32_t i = 0; i < graph_.instructionCount(); ++i) {
    std::vector<int32_t> seen;
    for (int32_t v : graph_.operandsOf(i)) {
      if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
      seen.push_back(v);
      const Opcode op = graph_.instruction(v)->opcode();
      if (op == Opcode::Parameter || op == Opcode::Constant || op == Opcode::GetTupleElement || op == Opcode::Tuple)
        continue;
      const int32_t p = graph_.nodeOf(v);
      int32_t c = -1;
      for (int32_t h : graph_.holders(i))
        if (!graph_.contains(h, v)) {
          c = h;
          break;
        }
      if (p < 0 || c < 0 || !graph_.node(p).alive) continue;
      std::string reason = memberRefusal(p);
      if (reason.empty() && graph_.node(p).outputs.size() == 1) reason = edge(p, c).refusal;
      if (reason.empty()) {
        auto it = producerReason.find(p);
        if (it == producerReason.end()) it = producerReason.emplace(p, decide(p).reason).first;
        reason = it->second;
      }
      if (reason.empty()) reason = "it would pay now; run the fusion pass again to fuse it";
      passes::Remark r;
      r.pass = pass;
      r.text = fmt::format("{}: {}: not fused: {} -> {}: {}", pass, graph_.computation().name(), name(v), name(i),
                           reason);
      r.json = jsonLine({{"pass", pass},
                         {"remark", "not-fused"},
                         {"computation", graph_.computation().name()},
                         {"producer", name(v)},
                         {"consumer", name(i)},
                         {"reason", reason}});
      remarks.push_back(std::move(r));
    }
  }
}

bool ComputationFuser::materialize(hlo::Module& module, NameTable& names, const std::string& pass,
                                   std::vector<passes::Remark>* remarks, std::vector<hlo::Computation*>& unused) {
  std::vector<int32_t> fused;
  for (int32_t n = 0; n < graph_.nodeCount(); ++n)
    if (graph_.node(n).alive && graph_.node(n).members.size() > 1) fused.push_back(n);
  // Program order of the fusions' last instructions names them.
  std::sort(fused.begin(), fused.end(), [&](int32_t a, int32_t b) {
    return graph_.node(a).members.back() < graph_.node(b).members.back();
  });
  if (fused.empty()) return false;
  hlo::Computation& comp = graph_.computation();
  std::vector<char> removed(static_cast<size_t>(graph_.instructionCount()), 0);
  for (int32_t n : fused)
    for (int32_t m : graph_.node(n).members) removed[static_cast<size_t>(m)] = 1;
  // Scalar constants are copied into the fusions that read them: an
  // original nothing else reads any more goes.
  for (int32_t i = 0; i < graph_.instructionCount(); ++i) {
    const Instruction& in = *graph_.instruction(i);
    if (removed[static_cast<size_t>(i)] || in.opcode() != Opcode::Constant || !in.shape().isScalar() ||
        i == graph_.rootIndex() || graph_.usersOf(i).empty())
      continue;
    bool read = false;
    for (int32_t u : graph_.usersOf(i)) read |= !removed[static_cast<size_t>(u)];
    removed[static_cast<size_t>(i)] = !read;
  }
  // Dead code reading what the fusions took in goes too (it has nothing left to read).
  for (int32_t i = 0; i < graph_.instructionCount(); ++i)
    if (!graph_.live(i))
      for (int32_t o : graph_.operandsOf(i)) removed[static_cast<size_t>(i)] |= removed[static_cast<size_t>(o)];
  for (int32_t i = 0; i < graph_.instructionCount(); ++i) {
    if (!removed[static_cast<size_t>(i)]) continue;
    const Instruction* in = graph_.instruction(i);
    names.release(in->name());
    if (in->opcode() == Opcode::Fusion && in->fusedComputation()) unused.push_back(in->fusedComputation());
  }
  std::unordered_map<int32_t, Instruction*> replacement;
  std::vector<std::pair<Instruction*, std::vector<int32_t>>> built;
  for (int32_t n : fused) {
    const FusionGraph::Node& node = graph_.node(n);
    std::vector<const Instruction*> members;
    for (int32_t m : node.members) members.push_back(graph_.instruction(m));
    const hlo::FusionKind kind = kindOf(nodeCost(n), members);
    BuiltFusion b = buildFusedComputation(module, graph_, node.members, node.outputs,
                                          names.fresh("fused_computation"), &names);
    const Instruction& first = *graph_.instruction(node.outputs.back());
    Instruction* f = comp.addInstruction(Opcode::Fusion, names.fresh("fusion"), b.computation->root()->shape());
    setSmallAttribute(*f, SmallAttribute::FusionKind, static_cast<int64_t>(kind));
    f->addCalledComputation(b.computation);
    f->setLocation(first.location());
    f->common().metadata = first.common().metadata;
    if (remarks) remarks->push_back(fusedRemark(pass, n, f->name(), kind));
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      Instruction* value = f;
      if (node.outputs.size() > 1) {
        const Instruction& out = *graph_.instruction(node.outputs[k]);
        value = comp.addInstruction(Opcode::GetTupleElement, names.fresh("get-tuple-element"), out.shape());
        setSmallAttribute(*value, SmallAttribute::TupleIndex, static_cast<int64_t>(k));
        value->addOperand(f);
        value->setLocation(out.location());
      }
      replacement[node.outputs[k]] = value;
    }
    built.push_back({f, std::move(b.parameters)});
  }
  auto valueOf = [&](int32_t i) {
    auto it = replacement.find(i);
    return it == replacement.end() ? graph_.instruction(i) : it->second;
  };
  for (auto& [f, parameters] : built)
    for (int32_t p : parameters) f->addOperand(valueOf(p));
  for (int32_t i = 0; i < graph_.instructionCount(); ++i) {
    if (removed[static_cast<size_t>(i)]) continue;
    Instruction* in = graph_.instruction(i);
    const std::span<const int32_t> ops = graph_.operandsOf(i);
    for (size_t k = 0; k < ops.size(); ++k)
      if (replacement.count(ops[k])) in->setOperand(static_cast<int64_t>(k), replacement[ops[k]]);
  }
  if (graph_.rootIndex() >= 0) comp.setRoot(valueOf(graph_.rootIndex()));
  comp.removeInstructionsIf([&](const Instruction& in) {
    int32_t i = graph_.indexOf(&in);
    return i >= 0 && removed[static_cast<size_t>(i)];
  });
  comp.sortTopologically();
  return true;
}

// The computations that run as code: the entry and what control flow calls.
std::vector<hlo::Computation*> codeComputations(const hlo::Module& module) {
  std::unordered_set<const hlo::Computation*> code;
  if (module.entry()) code.insert(module.entry());
  std::vector<hlo::Computation*> order = module.postOrder();
  // Callers come after callees in post order: walk it backwards.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!code.count(*it)) continue;
    for (const auto& in : (*it)->instructions()) {
      Opcode op = in->opcode();
      if (hlo::isControlFlow(op) || op == Opcode::AsyncStart)
        for (hlo::Computation* c : in->calledComputations()) code.insert(c);
    }
  }
  std::vector<hlo::Computation*> out;
  for (hlo::Computation* c : order)
    if (code.count(c)) out.push_back(c);
  return out;
}

}  // namespace

bool fuseModule(hlo::Module& module, const CostModel& cost, const FusionOptions& options, const std::string& passName,
                std::vector<passes::Remark>* remarks) {
  NameTable names(module);
  bool changed = false;
  std::vector<passes::Remark> unfused;
  std::vector<hlo::Computation*> unused;
  for (hlo::Computation* c : codeComputations(module)) {
    ComputationFuser fuser(*c, cost, options);
    if (options.producerConsumer) {
      fuser.fuseAttention();
      fuser.fuseOutputEpilogues();
      fuser.fuseRowNormalizations();
      fuser.fuseProducersIntoConsumers();
    }
    if (options.multiOutput) fuser.fuseMultiOutput();
    if (remarks) fuser.explainUnfusedEdges(passName, unfused);
    changed |= fuser.materialize(module, names, passName, remarks, unused);
  }
  // Computations of fusions merged into others go, unless something else
  // still calls them (a module may share one fused computation).
  std::unordered_set<const hlo::Computation*> called;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      for (const hlo::Computation* callee : in->calledComputations()) called.insert(callee);
  std::sort(unused.begin(), unused.end());
  unused.erase(std::unique(unused.begin(), unused.end()), unused.end());
  for (hlo::Computation* c : unused)
    if (!called.count(c)) module.removeComputation(c);
  if (remarks) remarks->insert(remarks->end(), unfused.begin(), unfused.end());
  return changed;
}

bool FusionPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  std::optional<target::TargetDesc> target;
  if (context().targetDesc) target = *context().targetDesc;
  else target = target::loadTarget(context().target, diags);
  if (!target) return false;
  CostModel cost(std::move(*target));
  return fuseModule(module, cost, options_, name_, context().remarks);
}

void registerFusionPasses() {
  static bool done = false;
  if (done) return;
  done = true;
  passes::PassRegistry& registry = passes::PassRegistry::global();
  registry.add({"sink-reshapes",
                "Move reshapes below the elementwise instructions that read them (XLA's ReshapeMover), so "
                "reductions and dots keep elementwise epilogues",
                [] { return std::make_unique<SinkReshapesPass>(); }});
  registry.add({"fusion",
                "Operator fusion: priority-fusion, then multi-output-fusion (the fusion stage of the default pipeline)",
                [] { return std::make_unique<FusionPass>("fusion", FusionOptions{}); }});
  registry.add({"priority-fusion",
                "Fuse producers into all their consumers (loop, input and output fusions), best estimated saving "
                "first",
                [] {
                  FusionOptions o;
                  o.multiOutput = false;
                  return std::make_unique<FusionPass>("priority-fusion", o);
                }});
  registry.add({"multi-output-fusion",
                "Fuse a producer into one consumer as an extra output, and siblings reading one operand into one "
                "kernel",
                [] {
                  FusionOptions o;
                  o.producerConsumer = false;
                  return std::make_unique<FusionPass>("multi-output-fusion", o);
                }});
}

std::string simplificationPipeline() {
  // As XLA orders them: the expanders first (bit-exact, and their parts then
  // simplify and fuse: batch norm becomes elementwise work and reductions),
  // then the simplification fixed point (exact by default), then reshapes
  // sunk below elementwise work so fusion sees whole elementwise chains.
  return "expand-topk,expand-batch-norm,expand-pred-matmul,simplify,sink-reshapes";
}

std::string defaultOptimizationPipeline() { return simplificationPipeline() + ",fusion"; }

}  // namespace tpu::fusion
