#include "spmd/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <map>
#include <set>

#include "hlo/module.h"
#include "spmd/leaves.h"
#include "spmd/rules.h"

namespace tpu::spmd {

using hlo::Computation;
using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

struct PValue {
  Instruction* local = nullptr;
  Shape global;
  Leaves leaves;
};

int64_t elementBytes(const Shape& s) {
  std::optional<int64_t> b = Shape::scalar(s.elementType()).byteSize();
  return b ? *b : 4;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

class Partitioner {
 public:
  Partitioner(hlo::Module& module, int64_t n, DiagnosticEngine& diags, int64_t windowedBytes)
      : module_(module), n_(n), diags_(diags), windowedBytes_(windowedBytes) {}

  bool run() {
    for (const auto& c : module_.computations())
      for (const auto& inst : c->instructions()) {
        names_.insert(inst->name());
        if (inst->attrs().channelId) nextChannel_ = std::max(nextChannel_, *inst->attrs().channelId + 1);
      }
    for (const auto& c : module_.computations()) compNames_.insert(c->name());
    Computation* oldEntry = module_.entry();
    Computation* entry = partitionComputation(*oldEntry, nullptr, oldEntry->name() + ".spmd", nullptr);
    if (!entry) return false;
    module_.setEntry(entry);
    // Drop the computations the partitioned program no longer calls.
    std::set<const Computation*> live;
    std::vector<const Computation*> stack{entry};
    while (!stack.empty()) {
      const Computation* c = stack.back();
      stack.pop_back();
      if (!live.insert(c).second) continue;
      for (Computation* callee : c->calledComputations()) stack.push_back(callee);
    }
    std::string entryName = oldEntry->name();
    module_.removeComputationsIf([&](const Computation& c) { return !live.count(&c); });
    entry->setName(entryName);
    module_.config().numPartitions = n_;
    module_.config().entryComputationLayout.reset();
    return !diags_.hasErrors();
  }

 private:
  // ------------------------------------------------------------ building
  std::string fresh(const std::string& base) {
    int64_t& k = nextSuffix_[base];
    for (;;) {
      std::string name = fmt::format("{}.{}", base, ++k);
      if (names_.insert(name).second) return name;
    }
  }

  Instruction* add(Opcode op, Shape shape, std::vector<Instruction*> operands, const std::string& base) {
    Instruction* i = out_->addInstruction(op, fresh(base), std::move(shape));
    i->setOperands(operands);
    i->setLocation(location_);
    return i;
  }

  Instruction* pid() {
    if (!pid_) pid_ = add(Opcode::PartitionId, Shape::scalar(ElementType::U32), {}, "partition-id");
    return pid_;
  }

  Instruction* constantS32(int64_t v) {
    hlo::Literal l(Shape::scalar(ElementType::S32));
    l.setInt(0, v);
    Instruction* c = add(Opcode::Constant, l.shape(), {}, "constant");
    c->attrs().literal = std::move(l);
    return c;
  }

  Instruction* scalarConstant(ElementType t, double v) {
    hlo::Literal l(Shape::scalar(t));
    l.setDouble(0, v);
    Instruction* c = add(Opcode::Constant, l.shape(), {}, "constant");
    c->attrs().literal = std::move(l);
    return c;
  }

  // A per-device value (indexed by partition id) as an s32 scalar.
  Instruction* table(const std::vector<int64_t>& perDevice) {
    bool same = std::all_of(perDevice.begin(), perDevice.end(), [&](int64_t v) { return v == perDevice[0]; });
    if (same) return constantS32(perDevice[0]);
    auto it = tables_.find(perDevice);
    if (it != tables_.end()) return it->second;
    hlo::Literal l(Shape::array(ElementType::S32, {n_}));
    for (int64_t d = 0; d < n_; ++d) l.setInt(d, perDevice[static_cast<size_t>(d)]);
    Instruction* c = add(Opcode::Constant, l.shape(), {}, "offsets");
    c->attrs().literal = std::move(l);
    Instruction* ds = add(Opcode::DynamicSlice, Shape::array(ElementType::S32, {1}), {c, pid()}, "offset");
    ds->attrs().dynamicSliceSizes = {1};
    Instruction* r = add(Opcode::Reshape, Shape::scalar(ElementType::S32), {ds}, "offset");
    tables_[perDevice] = r;
    return r;
  }

  Instruction* broadcastScalar(Instruction* s, const Shape& shape) {
    Shape target = shape;
    target.setElementType(s->shape().elementType());
    Instruction* b = add(Opcode::Broadcast, target, {s}, "broadcast");
    b->attrs().dimensions = {};
    return b;
  }

  Instruction* compare(Instruction* a, Instruction* b, hlo::ComparisonDirection dir, const std::string& base) {
    Instruction* c = add(Opcode::Compare, withDims(Shape::array(ElementType::Pred, {}), a->shape().dimensions()), {a, b}, base);
    c->attrs().comparisonDirection = dir;
    ElementType t = a->shape().elementType();
    c->attrs().comparisonType = hlo::isFloatType(t)              ? hlo::ComparisonType::Float
                                : hlo::isUnsignedIntegerType(t) ? hlo::ComparisonType::Unsigned
                                                                : hlo::ComparisonType::Signed;
    return c;
  }

  Shape withDims(const Shape& s, std::vector<int64_t> dims) {
    Shape r = s;
    r.setDimensions(std::move(dims));
    return r;
  }

  Computation* adder(ElementType t) {
    auto it = adders_.find(t);
    if (it != adders_.end()) return it->second;
    std::string name = "add." + std::string(hlo::elementTypeName(t));
    for (int k = 1; compNames_.count(name); ++k) name = fmt::format("add.{}.{}", hlo::elementTypeName(t), k);
    compNames_.insert(name);
    Computation* c = module_.addComputation(name);
    Shape s = Shape::scalar(t);
    Instruction* a = c->addInstruction(Opcode::Parameter, fresh("x"), s);
    a->attrs().parameterNumber = 0;
    Instruction* b = c->addInstruction(Opcode::Parameter, fresh("y"), s);
    b->attrs().parameterNumber = 1;
    Instruction* sum = c->addInstruction(t == ElementType::Pred ? Opcode::Or : Opcode::Add, fresh("sum"), s);
    sum->setOperands({a, b});
    c->setRoot(sum);
    adders_[t] = c;
    return c;
  }

  hlo::ReplicaGroups groups(const std::vector<std::vector<int64_t>>& g) {
    hlo::ReplicaGroups rg;
    rg.groups = g;
    return rg;
  }

  Instruction* allGather(Instruction* x, int64_t dim, const std::vector<std::vector<int64_t>>& g) {
    std::vector<int64_t> dims = x->shape().dimensions();
    dims[static_cast<size_t>(dim)] *= static_cast<int64_t>(g[0].size());
    Instruction* ag = add(Opcode::AllGather, withDims(x->shape(), dims), {x}, "all-gather");
    ag->attrs().dimensions = {dim};
    ag->attrs().replicaGroups = groups(g);
    ag->attrs().channelId = nextChannel_++;
    ag->attrs().useGlobalDeviceIds = true;
    return ag;
  }

  Instruction* allReduce(Instruction* x, const std::vector<std::vector<int64_t>>& g, Computation* reducer) {
    Instruction* ar = add(Opcode::AllReduce, x->shape(), {x}, "all-reduce");
    ar->attrs().replicaGroups = groups(g);
    ar->attrs().channelId = nextChannel_++;
    ar->attrs().useGlobalDeviceIds = true;
    ar->setCalledComputations({reducer});
    return ar;
  }

  Instruction* reduceScatter(Instruction* x, int64_t dim, const std::vector<std::vector<int64_t>>& g,
                             Computation* reducer) {
    std::vector<int64_t> dims = x->shape().dimensions();
    dims[static_cast<size_t>(dim)] /= static_cast<int64_t>(g[0].size());
    Instruction* rs = add(Opcode::ReduceScatter, withDims(x->shape(), dims), {x}, "reduce-scatter");
    rs->attrs().dimensions = {dim};
    rs->attrs().replicaGroups = groups(g);
    rs->attrs().channelId = nextChannel_++;
    rs->attrs().useGlobalDeviceIds = true;
    rs->setCalledComputations({reducer});
    return rs;
  }

  // The output dim along which one reduce-scatter over the partial-sum
  // groups `kGroups` leaves exactly tiling T (P: the partial sums' tiling,
  // which holds the groups as replication), or -1. T must tile that dim
  // once per group member, in groups made of the same devices, and agree
  // with P everywhere else.
  int64_t reduceScatterDim(const Tiling& P, const Tiling& T, const std::vector<std::vector<int64_t>>& kGroups) {
    if (kGroups.empty() || T.isManual() || P.isManual() || T.manualGroups() != 1) return -1;
    auto asSets = [](std::vector<std::vector<int64_t>> g) {
      for (auto& v : g) std::sort(v.begin(), v.end());
      std::sort(g.begin(), g.end());
      return g;
    };
    std::vector<std::vector<int64_t>> want = asSets(kGroups);
    for (int64_t q = 0; q < T.rank(); ++q) {
      if (P.tile(q) != 1 || T.tile(q) != static_cast<int64_t>(kGroups[0].size())) continue;
      if (!T.replicatedOn({q}).sameAs(P)) continue;
      if (asSets(T.groupsAlong({q})) == want) return q;
    }
    return -1;
  }

  Instruction* sliceTo(Instruction* x, const std::vector<int64_t>& limits) {
    if (x->shape().dimensions() == limits) return x;
    std::vector<hlo::SliceDimension> sl;
    for (int64_t l : limits) sl.push_back({0, l, 1});
    Instruction* s = add(Opcode::Slice, withDims(x->shape(), limits), {x}, "slice");
    s->attrs().slice = sl;
    return s;
  }

  Instruction* padTo(Instruction* x, const std::vector<int64_t>& sizes) {
    if (x->shape().dimensions() == sizes) return x;
    Instruction* zero = scalarConstant(x->shape().elementType(), 0);
    Instruction* p = add(Opcode::Pad, withDims(x->shape(), sizes), {x, zero}, "pad");
    std::vector<hlo::PaddingDimension> pd;
    for (size_t j = 0; j < sizes.size(); ++j) pd.push_back({0, sizes[j] - x->shape().dimension(static_cast<int64_t>(j)), 0});
    p->attrs().padding = pd;
    return p;
  }

  // ------------------------------------------------------------ resharding
  // Dims of `from` that must be gathered before `to` is a local slice of it.
  std::vector<int64_t> dimsToGather(const std::vector<int64_t>& g, const Tiling& from, const Tiling& to) {
    std::vector<int64_t> out;
    std::vector<int64_t> sS = from.shardDims(g), sT = to.shardDims(g);
    for (size_t j = 0; j < g.size(); ++j) {
      if (from.tile(static_cast<int64_t>(j)) == 1) continue;
      bool ok = true;
      for (int64_t d = 0; d < n_ && ok; ++d) {
        int64_t oS = from.tileIndex(d)[j] * sS[j], oT = to.tileIndex(d)[j] * sT[j];
        int64_t endT = std::min(oT + sT[j], g[j]);
        if (endT <= oT) continue;
        ok = oS <= oT && endT <= std::min(oS + sS[j], g[j]);
      }
      if (!ok) out.push_back(static_cast<int64_t>(j));
    }
    return out;
  }

  // Bytes one device receives to reshard (a rough model for choosing strategies).
  double reshardCost(const Shape& global, const Tiling& from, const Tiling& to) {
    if (!global.isArray() || global.rank() == 0 || from.sameAs(to)) return 0;
    int64_t eb = elementBytes(global);
    std::vector<int64_t> g = global.dimensions();
    if (from.sameTiles(to)) return static_cast<double>(product(from.shardDims(g)) * eb);
    double cost = 1;  // a local dynamic-slice
    Tiling cur = from;
    for (int64_t j : dimsToGather(g, from, to)) {
      int64_t before = product(cur.shardDims(g));
      cur = cur.replicatedOn({j});
      cost += static_cast<double>((product(cur.shardDims(g)) - before) * eb);
    }
    return cost;
  }

  Instruction* reshard(Instruction* x, const Shape& global, const Tiling& from, const Tiling& to) {
    if (!global.isArray() || global.rank() == 0 || from.sameAs(to)) return x;
    if (from.isManual() || to.isManual()) return x;  // checked by the callers
    std::vector<int64_t> g = global.dimensions();
    if (from.sameTiles(to)) {
      // Same tiles on other devices: one collective-permute.
      std::map<std::vector<int64_t>, std::pair<std::vector<int64_t>, std::vector<int64_t>>> byTile;
      for (int64_t d = 0; d < n_; ++d) {
        std::vector<int64_t> a = from.tileIndex(d), b = to.tileIndex(d);
        a.resize(static_cast<size_t>(from.rank()));
        b.resize(static_cast<size_t>(to.rank()));
        byTile[a].first.push_back(d);
        byTile[b].second.push_back(d);
      }
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (auto& [tile, hn] : byTile) {
        std::vector<int64_t> src, dst;
        for (int64_t d : hn.second)
          if (std::find(hn.first.begin(), hn.first.end(), d) != hn.first.end()) pairs.push_back({d, d});
          else dst.push_back(d);
        for (int64_t d : hn.first)
          if (std::find(hn.second.begin(), hn.second.end(), d) == hn.second.end()) src.push_back(d);
        for (size_t k = 0; k < dst.size() && k < src.size(); ++k) pairs.push_back({src[k], dst[k]});
      }
      std::sort(pairs.begin(), pairs.end());
      Instruction* cp = add(Opcode::CollectivePermute, x->shape(), {x}, "collective-permute");
      cp->attrs().sourceTargetPairs = pairs;
      cp->attrs().channelId = nextChannel_++;
      return cp;
    }
    if (Instruction* moved = allToAll(x, g, from, to)) return moved;
    Tiling cur = from;
    std::vector<int64_t> gather = dimsToGather(g, from, to);
    for (auto it = gather.rbegin(); it != gather.rend(); ++it) {
      int64_t j = *it;
      x = allGather(x, j, cur.groupsAlong({j}));
      cur = cur.replicatedOn({j});
      std::vector<int64_t> dims = x->shape().dimensions();
      dims[static_cast<size_t>(j)] = g[static_cast<size_t>(j)];
      x = sliceTo(x, dims);
    }
    // Now every device's target tile lies inside what it holds.
    std::vector<int64_t> sS = cur.shardDims(g), sT = to.shardDims(g);
    std::vector<int64_t> local = x->shape().dimensions();
    std::vector<int64_t> need = local;
    std::vector<std::vector<int64_t>> rel(g.size(), std::vector<int64_t>(static_cast<size_t>(n_)));
    bool identity = local == sT;
    for (int64_t d = 0; d < n_; ++d) {
      std::vector<int64_t> a = cur.tileIndex(d), b = to.tileIndex(d);
      for (size_t j = 0; j < g.size(); ++j) {
        int64_t r = b[j] * sT[j] - a[j] * sS[j];
        rel[j][static_cast<size_t>(d)] = r;
        need[j] = std::max(need[j], r + sT[j]);
        identity &= r == 0;
      }
    }
    if (identity) return x;
    x = padTo(x, need);
    std::vector<Instruction*> ops{x};
    for (size_t j = 0; j < g.size(); ++j) ops.push_back(table(rel[j]));
    Instruction* ds = add(Opcode::DynamicSlice, withDims(x->shape(), sT), ops, "dynamic-slice");
    ds->attrs().dynamicSliceSizes = sT;
    return ds;
  }

  // The tiles of dim a move to dim b on the same devices (SPMD.md 4.3 step
  // 5): split b locally into [k, s_b], all-to-all on the k dim inside the
  // groups along a, merge the received k pieces into a. nullptr when `to`
  // is not such a move of `from`.
  Instruction* allToAll(Instruction* x, const std::vector<int64_t>& g, const Tiling& from, const Tiling& to) {
    if (from.replication() != to.replication() || from.manualGroups() != 1) return nullptr;
    int64_t a = -1, b = -1;
    for (int64_t j = 0; j < from.rank(); ++j) {
      if (from.tile(j) == to.tile(j)) continue;
      if (from.tile(j) > 1 && to.tile(j) == 1 && a < 0) a = j;
      else if (from.tile(j) == 1 && to.tile(j) > 1 && b < 0) b = j;
      else return nullptr;
    }
    if (a < 0 || b < 0 || from.tile(a) != to.tile(b)) return nullptr;
    std::vector<int64_t> swap(static_cast<size_t>(from.rank()));
    for (int64_t j = 0; j < from.rank(); ++j) swap[static_cast<size_t>(j)] = j == a ? b : j == b ? a : j;
    if (!to.sameAs(from.transposed(swap))) return nullptr;
    int64_t k = from.tile(a);
    ElementType et = x->shape().elementType();
    std::vector<int64_t> sF = from.shardDims(g), sT = to.shardDims(g);
    size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    // Pad b to k * s_b and split it.
    std::vector<int64_t> padded = x->shape().dimensions();
    padded[ub] = k * sT[ub];
    x = padTo(x, padded);
    std::vector<int64_t> split = padded;
    split[ub] = sT[ub];
    split.insert(split.begin() + b, k);
    x = add(Opcode::Reshape, Shape::array(et, split), {x}, "reshape");
    Instruction* ata = add(Opcode::AllToAll, x->shape(), {x}, "all-to-all");
    ata->attrs().dimensions = {b};
    ata->attrs().replicaGroups = groups(from.groupsAlong({a}));
    ata->attrs().channelId = nextChannel_++;
    // The k dim (at b) goes just before a, then merges with it.
    int64_t posA = a < b ? a : a + 1;  // a's position in `split`
    std::vector<int64_t> perm;
    for (int64_t j = 0; j < static_cast<int64_t>(split.size()); ++j) {
      if (j == b) continue;
      if (j == posA) perm.push_back(b);
      perm.push_back(j);
    }
    std::vector<int64_t> tdims;
    for (int64_t p : perm) tdims.push_back(split[static_cast<size_t>(p)]);
    Instruction* t = add(Opcode::Transpose, Shape::array(et, tdims), {ata}, "transpose");
    t->attrs().dimensions = perm;
    std::vector<int64_t> merged = padded;
    merged[ub] = sT[ub];
    merged[ua] = k * sF[ua];
    Instruction* r = add(Opcode::Reshape, withDims(x->shape(), merged), {t}, "reshape");
    r->mutableShape() = Shape::array(et, merged);
    std::vector<int64_t> exact = merged;
    exact[ua] = g[ua];
    return sliceTo(r, exact);
  }

  // ------------------------------------------------------------ halo exchange
  // Rows [start[d], start[d] + length) of dim `dim` of the global array, on
  // every device d, from `x` (d's shard under `t`, which tiles `dim`). Rows
  // outside the array (global padding, uneven-shard padding) read
  // `padValue`. Two ways to fetch, the one moving fewer rows is taken:
  //  - by distance: one collective-permute per tile distance (left / right
  //    neighbours, then farther), carrying just the rows some device needs
  //    from that far: the halo exchange of sliding windows;
  //  - by segment: segment q of a window is (part of) its q-th tile; one
  //    permute per segment from whichever device holds it (more rounds when
  //    a tile feeds two devices): mirrored or rescaled windows (reverse,
  //    pad), whose distances differ per device.
  // The pieces are concatenated and each device's window cut at its offset.
  Instruction* haloWindow(Instruction* x, const Shape& global, const Tiling& t, int64_t dim,
                          const std::vector<int64_t>& start, int64_t length, Instruction* padValue) {
    size_t uj = static_cast<size_t>(dim);
    int64_t G = global.dimension(dim), k = t.tile(dim), s = t.shardDims(global.dimensions())[uj];
    auto floorDiv = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    auto at = [](const std::vector<int64_t>& v, int64_t d) { return v[static_cast<size_t>(d)]; };
    std::vector<int64_t> bufShape = x->shape().dimensions();
    bufShape[uj] = length;
    auto sliceRows = [&](int64_t lo, int64_t hi) {
      if (lo == 0 && hi == s) return x;
      std::vector<hlo::SliceDimension> sl;
      std::vector<int64_t> dims = x->shape().dimensions();
      for (size_t j = 0; j < dims.size(); ++j) sl.push_back(j == uj ? hlo::SliceDimension{lo, hi, 1} : hlo::SliceDimension{0, dims[j], 1});
      dims[uj] = hi - lo;
      Instruction* piece = add(Opcode::Slice, withDims(x->shape(), dims), {x}, "halo");
      piece->attrs().slice = sl;
      return piece;
    };
    auto sourceOf = [&](int64_t d, int64_t tileIdx) {
      std::vector<int64_t> idx = t.tileIndex(d);
      idx.resize(static_cast<size_t>(t.rank()));
      idx[uj] = tileIdx;
      return t.deviceAt(idx, t.replicaIndex(d));
    };

    // Plan 1, by distance.
    std::map<int64_t, std::pair<int64_t, int64_t>> need;  // distance -> rows [lo, hi) of the source shard
    for (int64_t d = 0; d < n_; ++d) {
      int64_t i = t.tileIndex(d)[uj], a = at(start, d);
      for (int64_t src = 0; src < k; ++src) {
        int64_t lo = std::max({a, src * s, int64_t{0}}), hi = std::min({a + length, (src + 1) * s, G});
        if (lo >= hi) continue;
        auto [it, fresh] = need.try_emplace(src - i, lo - src * s, hi - src * s);
        if (!fresh) {
          it->second.first = std::min(it->second.first, lo - src * s);
          it->second.second = std::max(it->second.second, hi - src * s);
        }
      }
    }
    if (need.empty()) return broadcastScalar(padValue, withDims(x->shape(), bufShape));
    int64_t dmin = need.begin()->first, dmax = need.rbegin()->first;
    auto distRange = [&](int64_t delta) {
      return std::make_pair(delta == dmin ? need[dmin].first : 0, delta == dmax ? need[dmax].second : s);
    };
    int64_t distRows = 0;
    for (int64_t delta = dmin; delta <= dmax; ++delta)
      if (delta != 0) distRows += distRange(delta).second - distRange(delta).first;

    // Plan 2, by segment.
    std::vector<int64_t> base(static_cast<size_t>(n_));
    int64_t segments = 1, first = s, last = 1;
    for (int64_t d = 0; d < n_; ++d) {
      int64_t a = at(start, d);
      base[static_cast<size_t>(d)] = floorDiv(a, s);
      segments = std::max(segments, floorDiv(a + length - 1, s) - at(base, d) + 1);
      first = std::min(first, a - at(base, d) * s);
    }
    for (int64_t d = 0; d < n_; ++d) last = std::max(last, std::min(at(start, d) + length - (at(base, d) + segments - 1) * s, s));
    auto segRange = [&](int64_t q) {
      int64_t lo = q == 0 ? first : 0, hi = q == segments - 1 ? last : s;
      return std::make_pair(lo, std::max(hi, lo + 1));
    };
    std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> rounds(static_cast<size_t>(segments));
    std::vector<bool> local(static_cast<size_t>(segments), true);
    int64_t segRows = 0;
    for (int64_t q = 0; q < segments; ++q) {
      auto& rq = rounds[static_cast<size_t>(q)];
      for (int64_t d = 0; d < n_; ++d) {
        int64_t tileIdx = at(base, d) + q;
        if (tileIdx < 0 || tileIdx >= k) {
          local[static_cast<size_t>(q)] = false;
          continue;
        }
        int64_t src = sourceOf(d, tileIdx);
        if (src != d) local[static_cast<size_t>(q)] = false;
        size_t r = 0;
        while (r < rq.size() && std::any_of(rq[r].begin(), rq[r].end(), [&](const auto& p) { return p.first == src; })) ++r;
        if (r == rq.size()) rq.emplace_back();
        rq[r].push_back({src, d});
      }
      if (!local[static_cast<size_t>(q)])
        segRows += (segRange(q).second - segRange(q).first) * std::max<int64_t>(1, static_cast<int64_t>(rq.size()));
    }

    std::vector<Instruction*> pieces;
    std::vector<int64_t> off(static_cast<size_t>(n_));
    int64_t padL = 0;
    if (distRows <= segRows) {
      for (int64_t delta = dmin; delta <= dmax; ++delta) {
        auto [lo, hi] = distRange(delta);
        Instruction* piece = sliceRows(lo, hi);
        if (delta != 0) {
          std::vector<std::pair<int64_t, int64_t>> pairs;
          for (int64_t d = 0; d < n_; ++d) {
            int64_t src = t.tileIndex(d)[uj] + delta;
            if (src >= 0 && src < k) pairs.push_back({sourceOf(d, src), d});
          }
          std::sort(pairs.begin(), pairs.end());
          Instruction* cp = add(Opcode::CollectivePermute, piece->shape(), {piece}, "collective-permute");
          cp->attrs().sourceTargetPairs = pairs;
          cp->attrs().channelId = nextChannel_++;
          piece = cp;
        }
        pieces.push_back(piece);
      }
      for (int64_t d = 0; d < n_; ++d) {
        off[static_cast<size_t>(d)] = at(start, d) - ((t.tileIndex(d)[uj] + dmin) * s + need[dmin].first);
        padL = std::max(padL, -at(off, d));
      }
    } else {
      for (int64_t q = 0; q < segments; ++q) {
        auto [lo, hi] = segRange(q);
        Instruction* piece = sliceRows(lo, hi);
        if (local[static_cast<size_t>(q)]) {
          pieces.push_back(piece);
          continue;
        }
        Instruction* got = nullptr;
        for (auto& pairs : rounds[static_cast<size_t>(q)]) {
          std::sort(pairs.begin(), pairs.end());
          Instruction* cp = add(Opcode::CollectivePermute, piece->shape(), {piece}, "collective-permute");
          cp->attrs().sourceTargetPairs = pairs;
          cp->attrs().channelId = nextChannel_++;
          // Devices a round does not target receive zeros: the rounds add up.
          got = got ? add(piece->shape().elementType() == ElementType::Pred ? Opcode::Or : Opcode::Add, piece->shape(),
                          {got, cp}, "halo")
                    : cp;
        }
        pieces.push_back(got ? got : broadcastScalar(padValue, piece->shape()));
      }
      for (int64_t d = 0; d < n_; ++d) off[static_cast<size_t>(d)] = at(start, d) - (at(base, d) * s + first);
    }
    Instruction* buf = pieces[0];
    if (pieces.size() > 1) {
      std::vector<int64_t> dims = x->shape().dimensions();
      dims[uj] = 0;
      for (Instruction* p : pieces) dims[uj] += p->shape().dimension(dim);
      buf = add(Opcode::Concatenate, withDims(x->shape(), dims), pieces, "concatenate");
      buf->attrs().dimensions = {dim};
    }
    // Pad the buffer so no device's slice clamps.
    int64_t size = buf->shape().dimension(dim), padR = 0;
    for (int64_t d = 0; d < n_; ++d) {
      off[static_cast<size_t>(d)] += padL;
      padR = std::max(padR, at(off, d) + length - (size + padL));
    }
    if (padL > 0 || padR > 0) {
      std::vector<int64_t> dims = buf->shape().dimensions();
      dims[uj] += padL + padR;
      Instruction* p = add(Opcode::Pad, withDims(buf->shape(), dims), {buf, padValue}, "pad");
      std::vector<hlo::PaddingDimension> pd(dims.size(), {0, 0, 0});
      pd[uj] = {padL, padR, 0};
      p->attrs().padding = pd;
      buf = p;
    }
    bool whole = buf->shape().dimension(dim) == length &&
                 std::all_of(off.begin(), off.end(), [](int64_t o) { return o == 0; });
    if (!whole) {
      std::vector<Instruction*> ops{buf};
      for (size_t j = 0; j < bufShape.size(); ++j) ops.push_back(j == uj ? table(off) : constantS32(0));
      Instruction* ds = add(Opcode::DynamicSlice, withDims(x->shape(), bufShape), ops, "dynamic-slice");
      ds->attrs().dynamicSliceSizes = bufShape;
      buf = ds;
    }
    // Rows outside [0, G) read the pad value.
    bool inside = true;
    for (int64_t d = 0; d < n_; ++d) inside &= start[static_cast<size_t>(d)] >= 0 && start[static_cast<size_t>(d)] + length <= G;
    if (inside) return buf;
    Shape s32Shape = withDims(Shape::array(ElementType::S32, {}), bufShape);
    Shape predShape = withDims(Shape::array(ElementType::Pred, {}), bufShape);
    Instruction* iota = add(Opcode::Iota, s32Shape, {}, "iota");
    iota->attrs().iotaDimension = dim;
    Instruction* pos = add(Opcode::Add, s32Shape, {iota, broadcastScalar(table(start), s32Shape)}, "index");
    Instruction* ge = add(Opcode::Compare, predShape, {pos, broadcastScalar(constantS32(0), s32Shape)}, "valid");
    ge->attrs().comparisonDirection = hlo::ComparisonDirection::GE;
    ge->attrs().comparisonType = hlo::ComparisonType::Signed;
    Instruction* lt = add(Opcode::Compare, predShape, {pos, broadcastScalar(constantS32(G), s32Shape)}, "valid");
    lt->attrs().comparisonDirection = hlo::ComparisonDirection::LT;
    lt->attrs().comparisonType = hlo::ComparisonType::Signed;
    Instruction* both = add(Opcode::And, predShape, {ge, lt}, "valid");
    return add(Opcode::Select, buf->shape(), {both, buf, broadcastScalar(padValue, buf->shape())}, "masked");
  }

  // Per-device first input row of a window over output tiles: output shard i
  // (rows i*so ...) reads input rows from i*so*stride - low.
  std::vector<int64_t> windowStarts(const Tiling& t, int64_t dim, int64_t so, int64_t stride, int64_t low) {
    std::vector<int64_t> out(static_cast<size_t>(n_));
    for (int64_t d = 0; d < n_; ++d) out[static_cast<size_t>(d)] = t.tileIndex(d)[static_cast<size_t>(dim)] * so * stride - low;
    return out;
  }

  // A value resharded leaf by leaf (tuples are taken apart and rebuilt).
  Instruction* reshardValue(const PValue& v, const Leaves& to) {
    if (!v.global.isTuple()) return reshard(v.local, v.global, v.leaves[0], to[0]);
    bool same = true;
    for (size_t k = 0; k < to.size(); ++k) same &= v.leaves[k].sameAs(to[k]);
    if (same) return v.local;
    std::vector<Instruction*> elems;
    size_t off = 0;
    for (int64_t e = 0; e < v.global.tupleSize(); ++e) {
      size_t cnt = static_cast<size_t>(countLeaves(v.global.tupleElement(e)));
      Instruction* gte = add(Opcode::GetTupleElement, v.local->shape().tupleElement(e), {v.local}, "get-tuple-element");
      gte->attrs().tupleIndex = e;
      PValue sub{gte, v.global.tupleElement(e),
                 Leaves(v.leaves.begin() + static_cast<int64_t>(off), v.leaves.begin() + static_cast<int64_t>(off + cnt))};
      elems.push_back(reshardValue(sub, Leaves(to.begin() + static_cast<int64_t>(off), to.begin() + static_cast<int64_t>(off + cnt))));
      off += cnt;
    }
    std::vector<Shape> shapes;
    for (Instruction* e : elems) shapes.push_back(e->shape());
    return add(Opcode::Tuple, Shape::tuple(shapes), elems, "tuple");
  }

  Instruction* operandAs(const Instruction* old, const Tiling& t) {
    const PValue& v = values_.at(old);
    return reshard(v.local, v.global, v.leaves[0], t);
  }
  Instruction* operandReplicated(const Instruction* old) {
    const PValue& v = values_.at(old);
    return reshardValue(v, replicatedLeaves(v.global, n_));
  }

  // Positions of padding in `x` (sharded by t over `global`) along `dims` set to `value`.
  Instruction* mask(Instruction* x, const Shape& global, const Tiling& t, const std::vector<int64_t>& dims,
                    Instruction* value) {
    std::vector<int64_t> g = global.dimensions(), s = t.shardDims(g);
    Instruction* pred = nullptr;
    Shape predShape = withDims(Shape::array(ElementType::Pred, {}), x->shape().dimensions());
    Shape s32Shape = withDims(Shape::array(ElementType::S32, {}), x->shape().dimensions());
    for (int64_t j : dims) {
      size_t uj = static_cast<size_t>(j);
      if (t.tile(j) == 1 || s[uj] * t.tile(j) == g[uj]) continue;
      std::vector<int64_t> off(static_cast<size_t>(n_));
      for (int64_t d = 0; d < n_; ++d) off[static_cast<size_t>(d)] = t.tileIndex(d)[uj] * s[uj];
      Instruction* iota = add(Opcode::Iota, s32Shape, {}, "iota");
      iota->attrs().iotaDimension = j;
      Instruction* pos = add(Opcode::Add, s32Shape, {iota, broadcastScalar(table(off), s32Shape)}, "index");
      Instruction* lt = add(Opcode::Compare, predShape, {pos, broadcastScalar(constantS32(g[uj]), s32Shape)}, "valid");
      lt->attrs().comparisonDirection = hlo::ComparisonDirection::LT;
      lt->attrs().comparisonType = hlo::ComparisonType::Signed;
      pred = pred ? add(Opcode::And, predShape, {pred, lt}, "valid") : lt;
    }
    if (!pred) return x;
    return add(Opcode::Select, x->shape(), {pred, x, broadcastScalar(value, x->shape())}, "masked");
  }

  static void setGlobalShape(Instruction& inst, const Shape& global) {
    auto& attrs = inst.common().frontendAttributes;
    hlo::FrontendAttribute fa{std::string(kGlobalShapeAttribute), global.toString(false), false};
    auto it = std::lower_bound(attrs.begin(), attrs.end(), fa.key,
                               [](const hlo::FrontendAttribute& a, const std::string& k) { return a.key < k; });
    if (it != attrs.end() && it->key == fa.key) *it = fa;
    else attrs.insert(it, fa);
  }

  // ------------------------------------------------------------ ops
  Instruction* cloneAs(const Instruction& inst, Shape shape, std::vector<Instruction*> operands) {
    names_.insert(inst.name());
    Instruction* i = out_->addInstruction(inst.opcode(), inst.name(), std::move(shape));
    i->setOperands(operands);
    if (inst.hasAttributes()) i->attrs() = inst.attrs();
    i->common() = inst.common();
    i->common().sharding.reset();
    i->setCalledComputations(inst.calledComputations());
    i->setLocation(inst.location());
    return i;
  }

  // A copy that stands for `inst` (keeps its name and metadata).
  Instruction* copyNamed(const Instruction& inst, Shape shape, Instruction* operand) {
    names_.insert(inst.name());
    Instruction* c = out_->addInstruction(Opcode::Copy, inst.name(), std::move(shape));
    c->setOperands({operand});
    c->common().metadata = inst.common().metadata;
    c->setLocation(inst.location());
    return c;
  }

  bool unsupported(const Instruction& inst, const std::string& why) {
    std::string ops;
    for (const Instruction* o : inst.operands()) {
      auto it = values_.find(o);
      if (it == values_.end()) continue;
      if (!ops.empty()) ops += ", ";
      ops += toHloSharding(it->second.global, it->second.leaves).toString();
    }
    diags_.error(inst.location(),
                 fmt::format("no partitioning strategy for '{}' ({}) with sharding {} and operand shardings [{}]: {}",
                             inst.name(), hlo::opcodeName(inst.opcode()),
                             toHloSharding(inst.shape(), want_).toString(), ops, why));
    return false;
  }

  bool allReplicated(const Instruction& inst) {
    for (const Tiling& t : want_)
      if (!t.isReplicated()) return false;
    for (const Instruction* o : inst.operands())
      for (const Tiling& t : values_.at(o).leaves)
        if (!t.isReplicated()) return false;
    return true;
  }

  static std::vector<int64_t> touchedDims(const Instruction& inst) {
    std::vector<int64_t> d;
    const Shape& in = inst.operand(0)->shape();
    const auto& a = inst.attrs();
    switch (inst.opcode()) {
      case Opcode::Slice:
        for (size_t j = 0; j < a.slice.size(); ++j)
          if (a.slice[j].start != 0 || a.slice[j].limit != in.dimension(static_cast<int64_t>(j)) || a.slice[j].stride != 1)
            d.push_back(static_cast<int64_t>(j));
        break;
      case Opcode::Pad:
        for (size_t j = 0; j < a.padding.size(); ++j)
          if (a.padding[j].low != 0 || a.padding[j].high != 0 || a.padding[j].interior != 0) d.push_back(static_cast<int64_t>(j));
        break;
      case Opcode::DynamicSlice:
        for (size_t j = 0; j < a.dynamicSliceSizes.size(); ++j)
          if (a.dynamicSliceSizes[j] != in.dimension(static_cast<int64_t>(j))) d.push_back(static_cast<int64_t>(j));
        break;
      case Opcode::DynamicUpdateSlice:
        for (int64_t j = 0; j < in.rank(); ++j)
          if (inst.operand(1)->shape().dimension(j) != in.dimension(j)) d.push_back(j);
        break;
      default: d = a.dimensions; break;  // concatenate, reverse, sort
    }
    return d;
  }

  std::optional<PValue> partitionOne(const Instruction& inst, bool isEntry) {
    Opcode op = inst.opcode();
    const Shape& shape = inst.shape();
    auto pv = [&](Instruction* local, Leaves leaves) { return PValue{local, shape, std::move(leaves)}; };
    if (op == Opcode::Parameter) {
      Instruction* p = cloneAs(inst, localShape(shape, want_), {});
      if (isEntry) {
        p->common().sharding = toHloSharding(shape, want_);
        setGlobalShape(*p, shape);
      }
      return pv(p, want_);
    }
    if (op == Opcode::PartitionId && !(want_.size() == 1 && want_[0].isManual())) {
      unsupported(inst, "partition-id in the input is ambiguous unless the value is manual");
      return std::nullopt;
    }
    if (op == Opcode::GetTupleElement) {
      const PValue& t = values_.at(inst.operand(0));
      Instruction* g = cloneAs(inst, t.local->shape().tupleElement(inst.attrs().tupleIndex), {t.local});
      auto [off, cnt] = leafRange(t.global, inst.attrs().tupleIndex);
      return pv(g, Leaves(t.leaves.begin() + static_cast<int64_t>(off), t.leaves.begin() + static_cast<int64_t>(off + cnt)));
    }
    if (op == Opcode::Tuple) {
      std::vector<Instruction*> ops;
      std::vector<Shape> shapes;
      Leaves leaves;
      for (const Instruction* o : inst.operands()) {
        const PValue& v = values_.at(o);
        ops.push_back(v.local);
        shapes.push_back(v.local->shape());
        leaves.insert(leaves.end(), v.leaves.begin(), v.leaves.end());
      }
      return pv(cloneAs(inst, Shape::tuple(shapes), ops), leaves);
    }
    for (const Tiling& t : want_)
      if (t.manualGroups() > 1) {
        unsupported(inst, "partially manual shardings (last_tile_dims={manual}) are not partitioned yet");
        return std::nullopt;
      }
    if (op == Opcode::CustomCall && inst.attrs().customCallTarget == "SPMDFullToShardShape") {
      // Entering a manual region: the operand's shards are the local values.
      const PValue& v = values_.at(inst.operand(0));
      if (!v.global.isArray() || !shape.isArray() || v.leaves[0].isManual() ||
          v.leaves[0].shardShape(v.global).dimensions() != shape.dimensions()) {
        unsupported(inst, fmt::format("its shape is not the shard shape of its operand under {}",
                                      toHloSharding(v.global, v.leaves).toString()));
        return std::nullopt;
      }
      Instruction* c = copyNamed(inst, shape, v.local);
      return pv(c, Leaves{Tiling::manual(shape.rank(), n_)});
    }
    if (op == Opcode::CustomCall && inst.attrs().customCallTarget == "SPMDShardToFullShape") {
      // Leaving a manual region: the local values are the shards of the result.
      const PValue& v = values_.at(inst.operand(0));
      if (!shape.isArray() || want_[0].isManual() ||
          want_[0].shardShape(shape).dimensions() != v.local->shape().dimensions()) {
        unsupported(inst, "its operand is not the shard shape of its result");
        return std::nullopt;
      }
      Instruction* c = copyNamed(inst, want_[0].shardShape(shape), v.local);
      return pv(c, want_);
    }
    if (op == Opcode::CustomCall && inst.attrs().customCallTarget == "Sharding") {
      const PValue& v = values_.at(inst.operand(0));
      return pv(reshardValue(v, want_), want_);
    }
    bool manual = !want_.empty() && std::all_of(want_.begin(), want_.end(), [](const Tiling& t) { return t.isManual(); });
    if (manual && op != Opcode::Parameter) {
      // Inside a manual region the code already is per device.
      std::vector<Instruction*> ops;
      for (const Instruction* o : inst.operands()) {
        const PValue& v = values_.at(o);
        bool opManual = std::all_of(v.leaves.begin(), v.leaves.end(), [](const Tiling& t) { return t.isManual(); });
        if (!opManual && !std::all_of(v.leaves.begin(), v.leaves.end(), [](const Tiling& t) { return t.isReplicated(); })) {
          unsupported(inst, "a manual op reads a tiled value (enter manual regions with SPMDFullToShardShape)");
          return std::nullopt;
        }
        ops.push_back(v.local);
      }
      return pv(cloneAs(inst, shape, ops), want_);
    }
    if (op == Opcode::While) {
      const PValue& v = values_.at(inst.operand(0));
      Instruction* init = reshardValue(v, want_);
      Computation* cond = partitionComputation(*inst.whileCondition(), &want_, inst.whileCondition()->name(), nullptr);
      if (!cond) return std::nullopt;
      Leaves rootWant = want_;
      Computation* body = partitionComputation(*inst.whileBody(), &want_, inst.whileBody()->name(), &rootWant);
      if (!body) return std::nullopt;
      Instruction* w = cloneAs(inst, init->shape(), {init});
      w->setCalledComputations({cond, body});
      return pv(w, want_);
    }
    if (op == Opcode::Conditional) {
      // Every device must take the same branch: the selector is made
      // replicated; each branch is partitioned with its operand's sharding
      // and ends in the conditional's, so all branches agree on the result.
      std::vector<Instruction*> ops{operandReplicated(inst.operand(0))};
      std::vector<Computation*> branches;
      const auto& called = inst.calledComputations();
      for (size_t k = 0; k < called.size(); ++k) {
        const PValue& v = values_.at(inst.operand(static_cast<int64_t>(k) + 1));
        ops.push_back(v.local);
        Leaves rootWant = want_;
        Computation* b = partitionComputationWithParams(*called[k], {v.leaves}, called[k]->name(), &rootWant);
        if (!b) return std::nullopt;
        branches.push_back(b);
      }
      Instruction* c = cloneAs(inst, localShape(shape, want_), ops);
      c->setCalledComputations(branches);
      return pv(c, want_);
    }
    if (op == Opcode::Call && inst.toApply()) {
      std::vector<Instruction*> ops;
      std::vector<Leaves> paramLeaves;
      for (const Instruction* o : inst.operands()) {
        const PValue& v = values_.at(o);
        ops.push_back(v.local);
        paramLeaves.push_back(v.leaves);
      }
      Leaves rootWant = want_;
      Computation* callee = partitionComputationWithParams(*inst.toApply(), paramLeaves, inst.toApply()->name(), &rootWant);
      if (!callee) return std::nullopt;
      Instruction* c = cloneAs(inst, callee->root()->shape(), ops);
      c->setCalledComputations({callee});
      return pv(c, want_);
    }
    if (!shape.isArray()) {
      if ((op == Opcode::Sort || op == Opcode::Reduce) && shape.isTuple()) return partitionVariadic(inst);
      if (allReplicated(inst)) return replicatedClone(inst);
      unsupported(inst, "no handler for this op on tuples");
      return std::nullopt;
    }
    const Tiling& T = want_[0];
    Shape localOut = T.shardShape(shape);
    if (hlo::isElementwise(op) || op == Opcode::Copy || op == Opcode::Convert || op == Opcode::Clamp ||
        op == Opcode::Select || op == Opcode::ReducePrecision ||
        (op == Opcode::BitcastConvert && inst.operand(0)->shape().rank() == shape.rank())) {
      std::vector<Instruction*> ops;
      for (const Instruction* o : inst.operands())
        ops.push_back(o->shape().rank() == shape.rank() ? operandAs(o, T) : operandReplicated(o));
      return pv(cloneAs(inst, localOut, ops), want_);
    }
    switch (op) {
      case Opcode::Constant: {
        Instruction* c = cloneAs(inst, shape, {});
        return pv(reshard(c, shape, Tiling::replicated(shape.rank(), n_), T), want_);
      }
      case Opcode::Iota: {
        Instruction* i = cloneAs(inst, localOut, {});
        int64_t d = inst.attrs().iotaDimension;
        if (T.tile(d) > 1) {
          std::vector<int64_t> off(static_cast<size_t>(n_));
          int64_t s = T.shardDims(shape.dimensions())[static_cast<size_t>(d)];
          for (int64_t k = 0; k < n_; ++k) off[static_cast<size_t>(k)] = T.tileIndex(k)[static_cast<size_t>(d)] * s;
          Instruction* o = table(off);
          if (shape.elementType() != ElementType::S32) {
            o = add(Opcode::Convert, Shape::scalar(shape.elementType()), {o}, "convert");
          }
          i = add(Opcode::Add, localOut, {i, broadcastScalar(o, localOut)}, "iota");
        }
        return pv(i, want_);
      }
      case Opcode::Broadcast: {
        Instruction* o = operandAs(inst.operand(0), broadcastBackward(T, inst));
        return pv(cloneAs(inst, localOut, {o}), want_);
      }
      case Opcode::Transpose: {
        const auto& p = inst.attrs().dimensions;
        std::vector<int64_t> inv(p.size());
        for (size_t k = 0; k < p.size(); ++k) inv[static_cast<size_t>(p[k])] = static_cast<int64_t>(k);
        Instruction* o = operandAs(inst.operand(0), T.transposed(inv));
        return pv(cloneAs(inst, localOut, {o}), want_);
      }
      case Opcode::Rng: return partitionRng(inst);
      case Opcode::Reshape:
      case Opcode::Bitcast: return partitionReshape(inst);
      case Opcode::Reduce: return partitionReduce(inst);
      case Opcode::Dot: return partitionDot(inst);
      case Opcode::Convolution: return partitionConvolution(inst);
      case Opcode::Slice:
      case Opcode::Pad: return partitionPadSlice(inst);
      case Opcode::ReduceWindow: return partitionReduceWindow(inst);
      case Opcode::SelectAndScatter: return partitionSelectAndScatter(inst);
      case Opcode::Gather: return partitionGather(inst);
      case Opcode::Scatter: return partitionScatter(inst);
      case Opcode::Reverse: return partitionReverse(inst);
      case Opcode::DynamicSlice:
      case Opcode::DynamicUpdateSlice:
      case Opcode::Concatenate:
      case Opcode::Sort: return partitionWholeDims(inst);
      default: break;
    }
    if (allReplicated(inst)) return replicatedClone(inst);
    unsupported(inst, "this op has no partitioning rule yet");
    return std::nullopt;
  }

  // Rng: every device draws its own tile from its own stream (as XLA's
  // partitioner does, the values differ from an unpartitioned run's). Devices
  // that replicate a tile must agree: the first of each group keeps its draw,
  // the others contribute zeros to an all-reduce within the group.
  std::optional<PValue> partitionRng(const Instruction& inst) {
    const Tiling& T = want_[0];
    std::vector<Instruction*> ops;
    for (const Instruction* o : inst.operands()) ops.push_back(operandReplicated(o));
    Shape localOut = T.shardShape(inst.shape());
    Instruction* r = cloneAs(inst, localOut, ops);
    if (T.replication() == 1) return PValue{r, inst.shape(), want_};
    std::vector<int64_t> first(static_cast<size_t>(n_));
    for (int64_t d = 0; d < n_; ++d) first[static_cast<size_t>(d)] = T.replicaIndex(d) == 0;
    Shape s32Shape = withDims(Shape::array(ElementType::S32, {}), localOut.dimensions());
    Instruction* keep = compare(broadcastScalar(table(first), s32Shape), broadcastScalar(constantS32(1), s32Shape),
                                hlo::ComparisonDirection::EQ, "keep");
    ElementType et = localOut.elementType();
    Instruction* mine = add(Opcode::Select, localOut, {keep, r, broadcastScalar(scalarConstant(et, 0), localOut)}, "draw");
    Instruction* shared = allReduce(mine, T.groupsAlong({}, true), adder(et));
    return PValue{shared, inst.shape(), want_};
  }

  std::optional<PValue> replicatedClone(const Instruction& inst) {
    std::vector<Instruction*> ops;
    for (const Instruction* o : inst.operands()) ops.push_back(operandReplicated(o));
    return PValue{cloneAs(inst, inst.shape(), ops), inst.shape(), replicatedLeaves(inst.shape(), n_)};
  }

  Shape localShape(const Shape& global, const Leaves& leaves) {
    if (!global.isTuple()) return global.isArray() ? leaves[0].shardShape(global) : global;
    std::vector<Shape> elems;
    size_t off = 0;
    for (const Shape& e : global.tupleElements()) {
      size_t cnt = static_cast<size_t>(countLeaves(e));
      elems.push_back(localShape(e, Leaves(leaves.begin() + static_cast<int64_t>(off), leaves.begin() + static_cast<int64_t>(off + cnt))));
      off += cnt;
    }
    return Shape::tuple(elems);
  }

  std::optional<PValue> partitionReshape(const Instruction& inst) {
    const Tiling& T = want_[0];
    const Shape& in = inst.operand(0)->shape();
    bool exact1 = false, exact2 = false;
    Tiling opT = reshapeTiling(T, inst.shape().dimensions(), in.dimensions(), &exact1);
    Tiling back = reshapeTiling(opT, in.dimensions(), inst.shape().dimensions(), &exact2);
    Shape localOut = T.shardShape(inst.shape());
    if (exact1 && exact2 && back.sameAs(T) && product(opT.shardDims(in.dimensions())) == product(localOut.dimensions())) {
      Instruction* o = operandAs(inst.operand(0), opT);
      return PValue{cloneAs(inst, localOut, {o}), inst.shape(), want_};
    }
    // The tiling does not survive this reshape: reshape the whole array
    // and take the shard (all-gather + local slice).
    diags_.warning(inst.location(), fmt::format("reshape '{}' to {} is partitioned by gathering its operand",
                                                inst.name(), T.toString()));
    Instruction* o = operandReplicated(inst.operand(0));
    Instruction* r = cloneAs(inst, inst.shape(), {o});
    return PValue{reshard(r, inst.shape(), Tiling::replicated(inst.shape().rank(), n_), T), inst.shape(), want_};
  }

  std::optional<PValue> partitionReduce(const Instruction& inst) {
    const Tiling& T = want_[0];
    const auto& dims = inst.attrs().dimensions;
    const PValue& in = values_.at(inst.operand(0));
    Tiling S = in.leaves[0];
    Tiling target = S.numTiles() == 1 ? T.withInsertedDims(dims) : S;
    Instruction* x = reshard(in.local, in.global, S, target);
    Instruction* init = operandReplicated(inst.operand(1));
    std::vector<int64_t> tiledReduced;
    for (int64_t d : dims)
      if (target.tile(d) > 1) tiledReduced.push_back(d);
    x = mask(x, in.global, target, tiledReduced, init);
    Tiling partial = target.replicatedOn(dims).withRemovedDims(dims);
    Instruction* r = cloneAs(inst, partial.shardShape(inst.shape()), {x, init});
    if (!tiledReduced.empty()) r = allReduce(r, target.groupsAlong(tiledReduced), inst.toApply());
    return PValue{reshard(r, inst.shape(), partial, T), inst.shape(), want_};
  }

  // Variadic reduce and multi-operand sort: operands gathered along the
  // reduced / sorted dims, local op, every output like the first.
  std::optional<PValue> partitionVariadic(const Instruction& inst) {
    const Tiling& T = want_[0];
    Opcode op = inst.opcode();
    int64_t n = op == Opcode::Reduce ? inst.operandCount() / 2 : inst.operandCount();
    const auto& dims = inst.attrs().dimensions;
    Tiling target = op == Opcode::Reduce ? T.withInsertedDims(dims) : T.replicatedOn(dims);
    std::vector<Instruction*> ops;
    std::vector<Shape> shapes;
    for (int64_t k = 0; k < inst.operandCount(); ++k) {
      if (k < n) {
        ops.push_back(operandAs(inst.operand(k), target));
      } else {
        ops.push_back(operandReplicated(inst.operand(k)));
      }
    }
    Tiling res = op == Opcode::Reduce ? T : target;
    for (const Shape& e : inst.shape().tupleElements()) shapes.push_back(res.shardShape(e));
    Instruction* r = cloneAs(inst, Shape::tuple(shapes), ops);
    PValue v{r, inst.shape(), Leaves(shapes.size(), res)};
    return PValue{reshardValue(v, want_), inst.shape(), want_};
  }

  std::optional<PValue> partitionWholeDims(const Instruction& inst) {
    const Tiling& T = want_[0];
    std::vector<int64_t> touched = touchedDims(inst);
    Tiling W = T.replicatedOn(touched);
    int64_t rank = inst.shape().rank();
    std::vector<Instruction*> ops;
    for (int64_t k = 0; k < inst.operandCount(); ++k) {
      const Instruction* o = inst.operand(k);
      bool data = o->shape().isArray() && o->shape().rank() == rank && rank > 0 &&
                  !(inst.opcode() == Opcode::Pad && k == 1);
      ops.push_back(data ? operandAs(o, W) : operandReplicated(o));
    }
    Shape localOut = W.shardShape(inst.shape());
    Instruction* r = cloneAs(inst, localOut, ops);
    std::vector<int64_t> localIn = W.shardDims(inst.operand(0)->shape().dimensions());
    if (inst.opcode() == Opcode::Slice) {
      auto& sl = r->attrs().slice;
      for (int64_t j = 0; j < rank; ++j)
        if (std::find(touched.begin(), touched.end(), j) == touched.end())
          sl[static_cast<size_t>(j)] = {0, localIn[static_cast<size_t>(j)], 1};
    }
    if (inst.opcode() == Opcode::DynamicSlice) {
      auto& sz = r->attrs().dynamicSliceSizes;
      for (int64_t j = 0; j < rank; ++j)
        if (std::find(touched.begin(), touched.end(), j) == touched.end()) sz[static_cast<size_t>(j)] = localIn[static_cast<size_t>(j)];
    }
    return PValue{reshard(r, inst.shape(), W, T), inst.shape(), want_};
  }

  // The loop of a windowed einsum: operand `g` (0 lhs, 1 rhs) is held split
  // along its free dim j (output dim q) by `S`; each of the k iterations
  // multiplies the piece in hand with `other`, writes the product into the
  // accumulator at the piece's place along q, and passes the piece to the
  // previous device of its group (collective-permute), so every device sees
  // every piece without ever holding the gathered operand. Returns the
  // accumulator: the local result of the dot under P.
  Instruction* windowedDot(const Instruction& inst, const Tiling& P, const Tiling& S, int64_t j, int64_t q,
                           Instruction* mine, Instruction* other, int g) {
    int64_t k = S.tile(j);
    size_t uq = static_cast<size_t>(q);
    std::vector<int64_t> outLocal = P.shardDims(inst.shape().dimensions());
    int64_t piece = mine->shape().dimension(j);
    std::vector<int64_t> partDims = outLocal, accDims = outLocal;
    partDims[uq] = piece;
    accDims[uq] = piece * k;
    Shape accShape = withDims(inst.shape(), accDims);
    std::vector<std::pair<int64_t, int64_t>> pairs;
    std::vector<int64_t> first(static_cast<size_t>(n_));
    for (int64_t dv = 0; dv < n_; ++dv) {
      std::vector<int64_t> idx = S.tileIndex(dv);
      idx.resize(static_cast<size_t>(S.rank()));
      first[static_cast<size_t>(dv)] = idx[static_cast<size_t>(j)];
      idx[static_cast<size_t>(j)] = (idx[static_cast<size_t>(j)] + k - 1) % k;
      pairs.push_back({dv, S.deviceAt(idx, S.replicaIndex(dv))});
    }
    std::sort(pairs.begin(), pairs.end());
    Shape state = Shape::tuple({Shape::scalar(ElementType::S32), other->shape(), mine->shape(), accShape});
    Instruction* init = add(Opcode::Tuple, state,
                            {constantS32(0), other, mine, broadcastScalar(scalarConstant(inst.shape().elementType(), 0), accShape)},
                            "tuple");
    // Build the two computations with the builder pointed at each in turn.
    Computation* saveOut = out_;
    Instruction* savePid = pid_;
    auto saveTables = std::move(tables_);
    auto newComp = [&](const std::string& base) {
      std::string name = base;
      for (int c = 1; compNames_.count(name); ++c) name = fmt::format("{}.{}", base, c);
      compNames_.insert(name);
      out_ = module_.addComputation(name);
      pid_ = nullptr;
      tables_.clear();
      Instruction* p = add(Opcode::Parameter, state, {}, "state");
      p->attrs().parameterNumber = 0;
      return p;
    };
    auto element = [&](Instruction* t, int64_t e) {
      Instruction* x = add(Opcode::GetTupleElement, t->shape().tupleElement(e), {t}, "get-tuple-element");
      x->attrs().tupleIndex = e;
      return x;
    };
    Instruction* cp = newComp(inst.name() + ".windowed.cond");
    Computation* cond = out_;
    Instruction* lt = compare(element(cp, 0), constantS32(k), hlo::ComparisonDirection::LT, "more");
    cond->setRoot(lt);
    Instruction* bp = newComp(inst.name() + ".windowed.body");
    Computation* body = out_;
    Instruction* i = element(bp, 0);
    Instruction* o = element(bp, 1);
    Instruction* held = element(bp, 2);
    Instruction* acc = element(bp, 3);
    Instruction* part = cloneAs(inst, withDims(inst.shape(), partDims), g == 0 ? std::vector<Instruction*>{held, o}
                                                                               : std::vector<Instruction*>{o, held});
    Shape s32 = Shape::scalar(ElementType::S32);
    Instruction* which = add(Opcode::Remainder, s32, {add(Opcode::Add, s32, {table(first), i}, "piece"), constantS32(k)}, "piece");
    Instruction* at = add(Opcode::Multiply, s32, {which, constantS32(piece)}, "offset");
    std::vector<Instruction*> dusOps{acc, part};
    for (size_t e = 0; e < accDims.size(); ++e) dusOps.push_back(e == uq ? at : constantS32(0));
    Instruction* placed = add(Opcode::DynamicUpdateSlice, accShape, dusOps, "accumulate");
    Instruction* passed = add(Opcode::CollectivePermute, held->shape(), {held}, "collective-permute");
    passed->attrs().sourceTargetPairs = pairs;
    passed->attrs().channelId = nextChannel_++;
    Instruction* next = add(Opcode::Add, s32, {i, constantS32(1)}, "next");
    body->setRoot(add(Opcode::Tuple, state, {next, o, passed, placed}, "tuple"));
    out_ = saveOut;
    pid_ = savePid;
    tables_ = std::move(saveTables);
    Instruction* loop = add(Opcode::While, state, {init}, "windowed-einsum");
    loop->setCalledComputations({cond, body});
    return sliceTo(element(loop, 3), outLocal);
  }

  std::optional<PValue> partitionDot(const Instruction& inst) {
    const Tiling& T = want_[0];
    DotSpace s = dotSpace(inst);
    const PValue& L = values_.at(inst.operand(0));
    const PValue& R = values_.at(inst.operand(1));
    const Tiling& SL = L.leaves[0];
    const Tiling& SR = R.leaves[0];
    int64_t outRank = s.outRank();
    std::vector<Tiling> cands;
    {
      Tiling d = dotSpaceFromOutput(T, s);
      for (size_t a = 0; a < s.lhsPos.size(); ++a) {
        int64_t p = s.lhsPos[a];
        if (p >= outRank && SL.tile(static_cast<int64_t>(a)) > 1)
          if (auto r = d.tiledFromReplication(p, SL.tile(static_cast<int64_t>(a)))) d = *r;
      }
      cands.push_back(d);
    }
    for (int k = 0; k < 2; ++k) {
      Tiling d = dotSpaceFromOperand(k == 0 ? SL : SR, s, k);
      for (int64_t q = 0; q < outRank; ++q)
        if (d.tile(q) == 1 && T.tile(q) > 1)
          if (auto r = d.tiledFromReplication(q, T.tile(q))) d = *r;
      cands.push_back(d);
    }
    double best = 0;
    int bestK = -1;
    for (size_t k = 0; k < cands.size(); ++k) {
      const Tiling& d = cands[k];
      Tiling P = dotOutPartial(d, s);
      double cost = reshardCost(L.global, SL, dotLhs(d, s)) + reshardCost(R.global, SR, dotRhs(d, s)) +
                    reshardCost(inst.shape(), P, T);
      std::vector<int64_t> kd;
      for (int64_t p = outRank; p < d.rank(); ++p)
        if (d.tile(p) > 1) kd.push_back(p);
      if (!kd.empty()) {
        double partial = static_cast<double>(product(P.shardDims(inst.shape().dimensions())) * elementBytes(inst.shape()));
        // A reduce-scatter straight into T receives about one pass over the
        // partial sums; all-reduce then slicing about two.
        if (reduceScatterDim(P, T, d.groupsAlong(kd)) >= 0) cost += partial - reshardCost(inst.shape(), P, T);
        else cost += 2.0 * partial;
      }
      if (bestK < 0 || cost < best) {
        best = cost;
        bestK = static_cast<int>(k);
      }
    }
    const Tiling& d = cands[static_cast<size_t>(bestK)];
    Tiling Lt = dotLhs(d, s), Rt = dotRhs(d, s), P = dotOutPartial(d, s);
    const auto& dn = *inst.attrs().dotDims;
    std::vector<int64_t> kDims;
    for (int64_t p = outRank; p < d.rank(); ++p)
      if (d.tile(p) > 1) kDims.push_back(p);
    // Windowed einsum: an operand that would be all-gathered along one of
    // its free dims stays split and rotates through a loop instead.
    Instruction* r = nullptr;
    for (int g = 0; g < 2 && !r; ++g) {
      const PValue& G = g == 0 ? L : R;
      const Tiling& S = g == 0 ? SL : SR;
      const Tiling& N = g == 0 ? Lt : Rt;
      const std::vector<int64_t>& pos = g == 0 ? s.lhsPos : s.rhsPos;
      if (windowedBytes_ < 0 || S.isManual() || S.manualGroups() != 1) continue;
      for (int64_t j = 0; j < S.rank() && !r; ++j) {
        int64_t q = pos[static_cast<size_t>(j)];
        if (S.tile(j) == 1 || q < s.batch || q >= outRank || !N.sameAs(S.replicatedOn({j}))) continue;
        int64_t gathered = product(N.shardDims(G.global.dimensions())) * elementBytes(G.global);
        if (gathered < windowedBytes_) continue;
        const PValue& O = g == 0 ? R : L;
        Instruction* other = reshard(O.local, O.global, O.leaves[0], g == 0 ? Rt : Lt);
        Instruction* mine = G.local;
        if (!kDims.empty()) {
          mine = mask(mine, G.global, S, g == 0 ? dn.lhsContractingDimensions : dn.rhsContractingDimensions,
                      scalarConstant(G.global.elementType(), 0));
          other = mask(other, O.global, g == 0 ? Rt : Lt, g == 0 ? dn.rhsContractingDimensions : dn.lhsContractingDimensions,
                       scalarConstant(O.global.elementType(), 0));
        }
        r = windowedDot(inst, P, S, j, q, mine, other, g);
      }
    }
    if (!r) {
      Instruction* lhs = reshard(L.local, L.global, SL, Lt);
      Instruction* rhs = reshard(R.local, R.global, SR, Rt);
      if (!kDims.empty()) {
        lhs = mask(lhs, L.global, Lt, dn.lhsContractingDimensions, scalarConstant(L.global.elementType(), 0));
        rhs = mask(rhs, R.global, Rt, dn.rhsContractingDimensions, scalarConstant(R.global.elementType(), 0));
      }
      r = cloneAs(inst, P.shardShape(inst.shape()), {lhs, rhs});
    }
    if (!kDims.empty()) {
      std::vector<std::vector<int64_t>> kGroups = d.groupsAlong(kDims);
      int64_t q = reduceScatterDim(P, T, kGroups);
      if (q >= 0) {
        // The partial sums padded to whole tiles along q, summed and split in one collective.
        std::vector<int64_t> padded = r->shape().dimensions();
        padded[static_cast<size_t>(q)] = T.shardDims(inst.shape().dimensions())[static_cast<size_t>(q)] * T.tile(q);
        r = padTo(r, padded);
        r = reduceScatter(r, q, T.groupsAlong({q}), adder(inst.shape().elementType()));
        return PValue{r, inst.shape(), want_};
      }
      r = allReduce(r, kGroups, adder(inst.shape().elementType()));
    }
    return PValue{reshard(r, inst.shape(), P, T), inst.shape(), want_};
  }

  // Reduce-window with tiled windowed dims: each device gathers the rows its
  // output tile's windows read (halo exchange), rows outside the array read
  // the init value, and the local op runs without the global padding there.
  std::optional<PValue> partitionReduceWindow(const Instruction& inst) {
    const Tiling& T = want_[0];
    const hlo::Window& win = *inst.attrs().window;
    for (int64_t j = 0; j < T.rank(); ++j)
      if (T.tile(j) > 1 && win.dimensions[static_cast<size_t>(j)].baseDilation != 1) {
        unsupported(inst, fmt::format("dimension {} is tiled and base-dilated", j));
        return std::nullopt;
      }
    const Shape& in = inst.operand(0)->shape();
    Instruction* x = operandAs(inst.operand(0), T);
    Instruction* init = operandReplicated(inst.operand(1));
    hlo::Window local = win;
    std::vector<int64_t> so = T.shardDims(inst.shape().dimensions());
    for (int64_t j = 0; j < T.rank(); ++j) {
      if (T.tile(j) == 1) continue;
      hlo::WindowDimension& w = local.dimensions[static_cast<size_t>(j)];
      int64_t o = so[static_cast<size_t>(j)];
      int64_t length = (o - 1) * w.stride + (w.size - 1) * w.windowDilation + 1;
      x = haloWindow(x, in, T, j, windowStarts(T, j, o, w.stride, w.paddingLow), length, init);
      w.paddingLow = w.paddingHigh = 0;
    }
    Instruction* r = cloneAs(inst, T.shardShape(inst.shape()), {x, init});
    r->attrs().window = local;
    return PValue{r, inst.shape(), want_};
  }

  // Select-and-scatter with tiled windowed dims. Result tile i (operand rows
  // [i*s, (i+1)*s)) receives from every window overlapping it, and choosing
  // within a window needs the whole window: each device fetches the source
  // rows of those windows and the operand rows they cover (halo exchange),
  // runs the op locally without padding, and keeps its own rows. Rows outside
  // the operand read a value the selection never prefers (-inf for a
  // maximum, +inf for a minimum); absent windows scatter zero, so the scatter
  // must be an add.
  std::optional<PValue> partitionSelectAndScatter(const Instruction& inst) {
    const Tiling& T = want_[0];
    const hlo::Window& win = *inst.attrs().window;
    std::vector<int64_t> tiled;
    for (int64_t j = 0; j < T.rank(); ++j)
      if (T.tile(j) > 1 && (win.dimensions[static_cast<size_t>(j)].size != 1 || win.dimensions[static_cast<size_t>(j)].stride != 1 ||
                            win.dimensions[static_cast<size_t>(j)].paddingLow != 0 || win.dimensions[static_cast<size_t>(j)].paddingHigh != 0))
        tiled.push_back(j);
    const Shape& xs = inst.operand(0)->shape();
    const Shape& ss = inst.operand(1)->shape();
    Instruction* init = operandReplicated(inst.operand(2));
    if (tiled.empty()) {
      Instruction* x = operandAs(inst.operand(0), T);
      Instruction* src = operandAs(inst.operand(1), T);
      return PValue{cloneAs(inst, T.shardShape(inst.shape()), {x, src, init}), inst.shape(), want_};
    }
    const auto& called = inst.calledComputations();
    const Instruction* sel = called.size() == 2 && called[0]->root() ? called[0]->root() : nullptr;
    const Instruction* sc = called.size() == 2 && called[1]->root() ? called[1]->root() : nullptr;
    std::optional<double> never;
    ElementType et = xs.elementType();
    if (sel && sel->opcode() == Opcode::Compare && sel->operand(0)->opcode() == Opcode::Parameter &&
        sel->operand(0)->attrs().parameterNumber == 0 && (hlo::isFloatType(et) || et == ElementType::S32)) {
      hlo::ComparisonDirection dir = sel->attrs().comparisonDirection;
      bool fp = hlo::isFloatType(et);
      if (dir == hlo::ComparisonDirection::GE || dir == hlo::ComparisonDirection::GT)
        never = fp ? -HUGE_VAL : static_cast<double>(std::numeric_limits<int32_t>::min());
      if (dir == hlo::ComparisonDirection::LE || dir == hlo::ComparisonDirection::LT)
        never = fp ? HUGE_VAL : static_cast<double>(std::numeric_limits<int32_t>::max());
    }
    bool adds = sc && sc->opcode() == Opcode::Add && sc->operand(0)->opcode() == Opcode::Parameter &&
                sc->operand(1)->opcode() == Opcode::Parameter;
    if (!never || !adds) {
      unsupported(inst, "tiled windowed dims need a select that compares its first parameter with GE/GT/LE/LT "
                        "and an add scatter");
      return std::nullopt;
    }
    for (int64_t j : tiled)
      if (win.dimensions[static_cast<size_t>(j)].baseDilation != 1 || win.dimensions[static_cast<size_t>(j)].windowDilation != 1) {
        unsupported(inst, fmt::format("dimension {} is tiled and dilated", j));
        return std::nullopt;
      }
    Instruction* x = operandAs(inst.operand(0), T);
    Instruction* src = operandAs(inst.operand(1), T);
    Instruction* avoid = scalarConstant(et, *never);
    Instruction* zero = scalarConstant(et, 0);
    hlo::Window local = win;
    std::vector<int64_t> s = T.shardDims(xs.dimensions());
    std::vector<std::vector<int64_t>> keepAt(T.rank());
    for (int64_t j : tiled) {
      size_t uj = static_cast<size_t>(j);
      hlo::WindowDimension& w = local.dimensions[uj];

      auto floorDiv = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
      // Windows [first, last] overlap tile i; `first` is moved back until
      // its window starts at or before the tile, so the local windows line up
      // with the fetched rows (absent windows scatter masked zeros).
      std::vector<int64_t> firstWin(static_cast<size_t>(n_)), firstRow(static_cast<size_t>(n_)), keep(static_cast<size_t>(n_));
      int64_t rows = w.size;
      for (int64_t d = 0; d < n_; ++d) {
        int64_t i = T.tileIndex(d)[uj];
        int64_t lo = i * s[uj], hi = (i + 1) * s[uj];
        int64_t first = std::min(-floorDiv(-(lo + w.paddingLow - w.size + 1), w.stride), floorDiv(lo + w.paddingLow, w.stride));
        int64_t last = floorDiv(hi - 1 + w.paddingLow, w.stride);
        int64_t start = first * w.stride - w.paddingLow;
        firstWin[static_cast<size_t>(d)] = first;
        firstRow[static_cast<size_t>(d)] = start;
        keep[static_cast<size_t>(d)] = lo - start;
        rows = std::max({rows, (last - first) * w.stride + w.size, hi - start});
      }
      int64_t srcLen = (rows - w.size) / w.stride + 1;
      x = haloWindow(x, xs, T, j, firstRow, rows, avoid);
      src = haloWindow(src, ss, T, j, firstWin, srcLen, zero);
      w.paddingLow = 0;
      w.paddingHigh = 0;
      keepAt[uj] = keep;
    }
    std::vector<int64_t> bufDims = x->shape().dimensions();
    Instruction* r = cloneAs(inst, withDims(x->shape(), bufDims), {x, src, init});
    r->attrs().window = local;
    std::vector<Instruction*> ops{r};
    std::vector<int64_t> outDims = T.shardDims(inst.shape().dimensions());
    for (int64_t j = 0; j < T.rank(); ++j)
      ops.push_back(keepAt[static_cast<size_t>(j)].empty() ? constantS32(0) : table(keepAt[static_cast<size_t>(j)]));
    Instruction* ds = add(Opcode::DynamicSlice, withDims(x->shape(), outDims), ops, "dynamic-slice");
    ds->attrs().dynamicSliceSizes = outDims;
    return PValue{ds, inst.shape(), want_};
  }

  // Reverse on tiled dims: output tile i is the mirror of input rows
  // [G - (i+1)*s, G - i*s), fetched by halo exchange, reversed locally.
  std::optional<PValue> partitionReverse(const Instruction& inst) {
    const Tiling& T = want_[0];
    const Shape& in = inst.operand(0)->shape();
    Instruction* x = operandAs(inst.operand(0), T);
    Instruction* fill = scalarConstant(in.elementType(), 0);
    std::vector<int64_t> s = T.shardDims(in.dimensions());
    for (int64_t j : inst.attrs().dimensions) {
      if (T.tile(j) == 1) continue;
      size_t uj = static_cast<size_t>(j);
      std::vector<int64_t> start(static_cast<size_t>(n_));
      for (int64_t d = 0; d < n_; ++d) start[static_cast<size_t>(d)] = in.dimension(j) - (T.tileIndex(d)[uj] + 1) * s[uj];
      x = haloWindow(x, in, T, j, start, s[uj], fill);
    }
    return PValue{cloneAs(inst, x->shape(), {x}), inst.shape(), want_};
  }

  // Pad and slice on tiled dims: each output tile is a window of input rows
  // (shifted by the low padding or the slice start, strided, interior-padded),
  // fetched from the devices that hold them; the pad value fills what lies
  // outside the operand. Dims the op touches that are not tiled stay local.
  std::optional<PValue> partitionPadSlice(const Instruction& inst) {
    const Tiling& T = want_[0];
    bool isPad = inst.opcode() == Opcode::Pad;
    const Shape& in = inst.operand(0)->shape();
    Instruction* x = operandAs(inst.operand(0), T);
    Instruction* padValue = isPad ? operandReplicated(inst.operand(1)) : scalarConstant(in.elementType(), 0);
    std::vector<int64_t> so = T.shardDims(inst.shape().dimensions());
    std::vector<int64_t> touched = touchedDims(inst);
    hlo::InstructionAttributes attrs = inst.attrs();
    bool localOp = false;
    for (int64_t j = 0; j < in.rank(); ++j) {
      size_t uj = static_cast<size_t>(j);
      bool touches = std::find(touched.begin(), touched.end(), j) != touched.end();
      if (T.tile(j) == 1) {
        localOp |= touches;
        continue;
      }
      if (!touches) {
        if (isPad) attrs.padding[uj] = {0, 0, 0};
        else attrs.slice[uj] = {0, x->shape().dimension(j), 1};
        continue;
      }
      int64_t o = so[uj];
      if (!isPad) {
        const hlo::SliceDimension& sd = inst.attrs().slice[uj];
        int64_t length = (o - 1) * sd.stride + 1;
        x = haloWindow(x, in, T, j, windowStarts(T, j, o, sd.stride, -sd.start), length, padValue);
        attrs.slice[uj] = {0, length, sd.stride};
        localOp |= sd.stride != 1;
        continue;
      }
      // Output row r is input row (r - low) / (interior + 1) when that divides.
      const hlo::PaddingDimension& pd = inst.attrs().padding[uj];
      int64_t step = pd.interior + 1;
      auto floorDiv = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
      std::vector<int64_t> start(static_cast<size_t>(n_)), shift(static_cast<size_t>(n_));
      int64_t length = 1;
      for (int64_t d = 0; d < n_; ++d) {
        int64_t first = T.tileIndex(d)[uj] * o;
        int64_t a = floorDiv(first - pd.low, step), b = floorDiv(first + o - 1 - pd.low, step);
        start[static_cast<size_t>(d)] = a;
        shift[static_cast<size_t>(d)] = first - (pd.low + a * step);  // in [0, interior]
        length = std::max(length, b - a + 1);
      }
      x = haloWindow(x, in, T, j, start, length, padValue);
      if (step == 1) {
        attrs.padding[uj] = {0, 0, 0};
        continue;
      }
      // Interior padding locally, then each device's rows from its shift.
      std::vector<int64_t> dims = x->shape().dimensions();
      dims[uj] = length + (length - 1) * pd.interior + pd.interior;
      Instruction* p = add(Opcode::Pad, withDims(x->shape(), dims), {x, padValue}, "pad");
      std::vector<hlo::PaddingDimension> pads(dims.size(), {0, 0, 0});
      pads[uj] = {0, pd.interior, pd.interior};
      p->attrs().padding = pads;
      std::vector<Instruction*> ops{p};
      for (size_t k = 0; k < dims.size(); ++k) ops.push_back(k == uj ? table(shift) : constantS32(0));
      dims[uj] = o;
      Instruction* ds = add(Opcode::DynamicSlice, withDims(x->shape(), dims), ops, "dynamic-slice");
      ds->attrs().dynamicSliceSizes = dims;
      x = ds;
      attrs.padding[uj] = {0, 0, 0};
    }
    if (!localOp) return PValue{x, inst.shape(), want_};
    std::vector<Instruction*> ops{x};
    if (isPad) ops.push_back(padValue);
    Instruction* r = cloneAs(inst, T.shardShape(inst.shape()), ops);
    r->attrs() = attrs;
    return PValue{r, inst.shape(), want_};
  }

  // Index component k (along indexVectorDim) of `idx` minus the per-device
  // value `perDevice` (the shard offset of the operand dim it indexes).
  Instruction* rebaseIndices(Instruction* idx, int64_t indexVectorDim, int64_t k, const std::vector<int64_t>& perDevice) {
    const Shape& shape = idx->shape();
    ElementType et = shape.elementType();
    Instruction* off = table(perDevice);
    if (et != ElementType::S32) off = add(Opcode::Convert, Shape::scalar(et), {off}, "convert");
    Instruction* delta = broadcastScalar(off, shape);
    if (indexVectorDim < shape.rank() && shape.dimension(indexVectorDim) > 1) {
      Shape s32Shape = withDims(Shape::array(ElementType::S32, {}), shape.dimensions());
      Shape predShape = withDims(Shape::array(ElementType::Pred, {}), shape.dimensions());
      Instruction* iota = add(Opcode::Iota, s32Shape, {}, "iota");
      iota->attrs().iotaDimension = indexVectorDim;
      Instruction* eq = compare(iota, broadcastScalar(constantS32(k), s32Shape), hlo::ComparisonDirection::EQ, "component");
      delta = add(Opcode::Select, shape, {eq, delta, broadcastScalar(scalarConstant(et, 0), shape)}, "offset");
    }
    return add(Opcode::Subtract, shape, {idx, delta}, "rebased");
  }

  // Gather: output dims split either through the indices (batch dims: each
  // device gathers its own index rows) or through the operand (passthrough
  // dims whose slice is whole, and batching dims). Candidates from the
  // output, the operand and the indices are costed like dot strategies; an
  // operand tiled on an indexed dim is gathered whole, with a remark.
  std::optional<PValue> partitionGather(const Instruction& inst) {
    const Tiling& T = want_[0];
    IndexedMap m = gatherMap(inst);
    const PValue& O = values_.at(inst.operand(0));
    const PValue& I = values_.at(inst.operand(1));
    std::vector<int64_t> unsupported;  // window dims that are not passthrough
    for (int64_t d = 0; d < T.rank(); ++d)
      if (m.operandOfOut[static_cast<size_t>(d)] < 0 && m.indexOfOut[static_cast<size_t>(d)] < 0) unsupported.push_back(d);
    std::vector<Tiling> cands{T.replicatedOn(unsupported),
                              projectTiling(O.leaves[0], m.operandOfOut).replicatedOn(unsupported),
                              projectTiling(I.leaves[0], m.indexOfOut).replicatedOn(unsupported)};
    double best = 0;
    size_t bestK = 0;
    for (size_t k = 0; k < cands.size(); ++k) {
      const Tiling& c = cands[k];
      double cost = reshardCost(O.global, O.leaves[0], projectTiling(c, m.outOfOperand)) +
                    reshardCost(I.global, I.leaves[0], projectTiling(c, m.outOfIndex)) + reshardCost(inst.shape(), c, T);
      if (k == 0 || cost < best) {
        best = cost;
        bestK = k;
      }
    }
    if (std::optional<PValue> v = gatherFromTiledRows(inst, m, best)) return v;
    const Tiling& W = cands[bestK];
    Tiling ot = projectTiling(W, m.outOfOperand), it = projectTiling(W, m.outOfIndex);
    for (int64_t p = 0; p < O.leaves[0].rank(); ++p)
      if (O.leaves[0].tile(p) > 1 && ot.tile(p) == 1 && m.outOfOperand[static_cast<size_t>(p)] < 0) {
        diags_.warning(inst.location(), fmt::format("gather '{}' replicates its operand along dimension {} (tiled "
                                                    "{}, an indexed dimension): no index-aware strategy yet",
                                                    inst.name(), p, O.leaves[0].toString()));
        break;
      }
    Instruction* x = reshard(O.local, O.global, O.leaves[0], ot);
    Instruction* idx = reshard(I.local, I.global, I.leaves[0], it);
    Instruction* g = cloneAs(inst, W.shardShape(inst.shape()), {x, idx});
    std::vector<int64_t> local = x->shape().dimensions();
    for (size_t p = 0; p < local.size(); ++p)
      if (ot.tile(static_cast<int64_t>(p)) > 1) g->attrs().gatherSliceSizes[p] = local[p];
    return PValue{reshard(g, inst.shape(), W, T), inst.shape(), want_};
  }

  // Gather from an operand tiled on dims indexed with one-row slices (a
  // vocabulary-split embedding table): each device clamps the indices as
  // the gather would, rebases them to its rows, gathers locally, zeroes the
  // results whose row it does not hold, and an all-reduce sums the pieces.
  // Taken when it moves fewer bytes than `otherCost`.
  std::optional<PValue> gatherFromTiledRows(const Instruction& inst, const IndexedMap& m, double otherCost) {
    const Tiling& T = want_[0];
    const hlo::GatherDimensionNumbers& dn = *inst.attrs().gatherDims;
    const PValue& O = values_.at(inst.operand(0));
    const PValue& I = values_.at(inst.operand(1));
    const Tiling& ot = O.leaves[0];
    if (ot.isManual() || ot.manualGroups() != 1) return std::nullopt;
    ElementType et = inst.shape().elementType();
    if (hlo::isComplexType(et) || et == ElementType::Pred) return std::nullopt;
    std::vector<int64_t> rows;  // tiled operand dims addressed by index component k
    std::vector<int64_t> comps;
    for (int64_t p = 0; p < ot.rank(); ++p) {
      if (ot.tile(p) == 1 || m.outOfOperand[static_cast<size_t>(p)] >= 0) continue;
      auto k = std::find(dn.startIndexMap.begin(), dn.startIndexMap.end(), p);
      bool collapsed = std::find(dn.collapsedSliceDims.begin(), dn.collapsedSliceDims.end(), p) != dn.collapsedSliceDims.end();
      if (k == dn.startIndexMap.end() || !collapsed || inst.attrs().gatherSliceSizes[static_cast<size_t>(p)] != 1)
        return std::nullopt;
      rows.push_back(p);
      comps.push_back(k - dn.startIndexMap.begin());
    }
    if (rows.empty()) return std::nullopt;
    Tiling P = projectTiling(ot, m.operandOfOut);  // the row tiles become partial sums
    Tiling idxRepl = Tiling::replicated(I.global.rank(), n_);
    double cost = reshardCost(I.global, I.leaves[0], idxRepl) +
                  2.0 * static_cast<double>(product(P.shardDims(inst.shape().dimensions())) * elementBytes(inst.shape())) +
                  reshardCost(inst.shape(), P, T);
    if (cost >= otherCost) return std::nullopt;
    Instruction* idx = reshard(I.local, I.global, I.leaves[0], idxRepl);
    const Shape& is = idx->shape();
    ElementType it = is.elementType();
    int64_t ivd = dn.indexVectorDim;
    std::vector<int64_t> g = O.global.dimensions();
    Instruction* valid = nullptr;
    std::vector<int64_t> batchShape;
    for (int64_t d = 0; d < is.rank(); ++d)
      if (d != ivd) batchShape.push_back(is.dimension(d));
    Shape predBatch = Shape::array(ElementType::Pred, batchShape);
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t p = rows[r], k = comps[r];
      std::vector<int64_t> off(static_cast<size_t>(n_));
      for (int64_t d = 0; d < n_; ++d) off[static_cast<size_t>(d)] = ot.shardOffsets(d, g)[static_cast<size_t>(p)];
      // Component k alone, batch-shaped, clamped to the rows that exist.
      Instruction* comp = idx;
      if (ivd < is.rank()) {
        std::vector<hlo::SliceDimension> sl;
        std::vector<int64_t> dims = is.dimensions();
        for (int64_t d = 0; d < is.rank(); ++d)
          sl.push_back(d == ivd ? hlo::SliceDimension{k, k + 1, 1} : hlo::SliceDimension{0, dims[static_cast<size_t>(d)], 1});
        dims[static_cast<size_t>(ivd)] = 1;
        comp = add(Opcode::Slice, withDims(is, dims), {idx}, "component");
        comp->attrs().slice = sl;
        comp = add(Opcode::Reshape, Shape::array(it, batchShape), {comp}, "component");
      }
      Shape bs = Shape::array(it, batchShape);
      Instruction* lo = broadcastScalar(scalarConstant(it, 0), bs);
      Instruction* hi = broadcastScalar(scalarConstant(it, static_cast<double>(g[static_cast<size_t>(p)] - 1)), bs);
      Instruction* clamped = add(Opcode::Clamp, bs, {lo, comp, hi}, "clamped");
      Instruction* o = table(off);
      if (it != ElementType::S32) o = add(Opcode::Convert, Shape::scalar(it), {o}, "convert");
      Instruction* local = add(Opcode::Subtract, bs, {clamped, broadcastScalar(o, bs)}, "rebased");
      Instruction* geq = compare(local, broadcastScalar(scalarConstant(it, 0), bs), hlo::ComparisonDirection::GE, "held");
      int64_t shard = ot.shardDims(g)[static_cast<size_t>(p)];
      Instruction* lt =
          compare(local, broadcastScalar(scalarConstant(it, static_cast<double>(shard)), bs), hlo::ComparisonDirection::LT, "held");
      Instruction* both = add(Opcode::And, predBatch, {geq, lt}, "held");
      valid = valid ? add(Opcode::And, predBatch, {valid, both}, "held") : both;
      idx = rebaseIndices(idx, ivd, k, off);
    }
    Instruction* x = O.local;
    Instruction* gl = cloneAs(inst, P.shardShape(inst.shape()), {x, idx});
    std::vector<int64_t> localIn = x->shape().dimensions();
    for (size_t p = 0; p < localIn.size(); ++p)
      if (m.outOfOperand[p] >= 0 && ot.tile(static_cast<int64_t>(p)) > 1) gl->attrs().gatherSliceSizes[p] = localIn[p];
    std::vector<int64_t> batchOut;
    for (int64_t d = 0; d < inst.shape().rank(); ++d)
      if (m.indexOfOut[static_cast<size_t>(d)] >= 0) batchOut.push_back(d);
    Shape predOut = withDims(Shape::array(ElementType::Pred, {}), gl->shape().dimensions());
    Instruction* vb = add(Opcode::Broadcast, predOut, {valid}, "held");
    vb->attrs().dimensions = batchOut;
    Instruction* zeroed = add(Opcode::Select, gl->shape(), {vb, gl, broadcastScalar(scalarConstant(et, 0), gl->shape())}, "held");
    Instruction* sum = allReduce(zeroed, ot.groupsAlong(rows), adder(et));
    return PValue{reshard(sum, inst.shape(), P, T), inst.shape(), want_};
  }

  // The binary op a scatter combiner applies to (old, new), if it is one
  // whose partial results an all-reduce can combine, and its identity.
  std::optional<std::pair<Opcode, double>> scatterCombiner(const Instruction& inst) {
    const Computation* c = inst.toApply();
    if (!c || !c->root() || c->root()->operandCount() != 2) return std::nullopt;
    const Instruction* r = c->root();
    if (r->operand(0)->opcode() != Opcode::Parameter || r->operand(1)->opcode() != Opcode::Parameter ||
        r->operand(0) == r->operand(1))
      return std::nullopt;
    ElementType t = inst.shape().elementType();
    bool fp = hlo::isFloatType(t);
    if (r->opcode() == Opcode::Add) return std::make_pair(Opcode::Add, 0.0);
    if (!fp && t != ElementType::S32) return std::nullopt;
    switch (r->opcode()) {
      case Opcode::Maximum: return std::make_pair(Opcode::Maximum, fp ? -HUGE_VAL : static_cast<double>(std::numeric_limits<int32_t>::min()));
      case Opcode::Minimum: return std::make_pair(Opcode::Minimum, fp ? HUGE_VAL : static_cast<double>(std::numeric_limits<int32_t>::max()));
      default: return std::nullopt;
    }
  }

  // Scatter: operand passthrough (update windows cover whole operand dims:
  // operand and updates split alike, indices whole, local scatter), or index
  // parallel (indices and updates split on their scatter dims: each device
  // scatters its updates into the combiner's identity, an all-reduce with
  // the combiner joins them, and the operand is combined in elementwise).
  std::optional<PValue> partitionScatter(const Instruction& inst) {
    const Tiling& T = want_[0];
    IndexedMap m = scatterMap(inst);
    const PValue& O = values_.at(inst.operand(0));
    const PValue& I = values_.at(inst.operand(1));
    const PValue& U = values_.at(inst.operand(2));
    const hlo::ScatterDimensionNumbers& dn = *inst.attrs().scatterDims;
    // Operand dims that may stay tiled: passthrough dims, and inserted
    // (one-row window) dims an index component addresses: there each device
    // scatters with indices rebased to its shard and drops what lies outside.
    std::vector<int64_t> notLocal;
    for (int64_t p = 0; p < T.rank(); ++p) {
      bool indexed = std::find(dn.insertedWindowDims.begin(), dn.insertedWindowDims.end(), p) != dn.insertedWindowDims.end() &&
                     std::find(dn.scatterDimsToOperandDims.begin(), dn.scatterDimsToOperandDims.end(), p) !=
                         dn.scatterDimsToOperandDims.end();
      if (m.outOfOperand[static_cast<size_t>(p)] < 0 && !indexed) notLocal.push_back(p);
    }
    for (int64_t p : dn.inputBatchingDims) notLocal.push_back(p);
    Tiling W = T.replicatedOn(notLocal);
    Tiling ut = projectTiling(W, m.operandOfOut);
    Tiling idxRepl = Tiling::replicated(I.global.rank(), n_);
    double passCost = reshardCost(O.global, O.leaves[0], W) + reshardCost(U.global, U.leaves[0], ut) +
                      reshardCost(I.global, I.leaves[0], idxRepl) + reshardCost(inst.shape(), W, T);
    // Index parallel: the indices keep their tiling on batch dims.
    std::optional<std::pair<Opcode, double>> comb = scatterCombiner(inst);
    Tiling it = projectTiling(I.leaves[0], m.indexOfOut);  // in update space
    it = projectTiling(it, m.outOfIndex);                  // back: batch dims only
    bool indexTiled = it.numTiles() > 1;
    if (comb && indexTiled) {
      Tiling uti = projectTiling(it, m.indexOfOut);
      double full = static_cast<double>(product(inst.shape().dimensions()) * elementBytes(inst.shape()));
      double idxCost = reshardCost(O.global, O.leaves[0], T) + reshardCost(U.global, U.leaves[0], uti) +
                       reshardCost(I.global, I.leaves[0], it) + 2.0 * full;
      if (idxCost < passCost) {
        Instruction* idx = reshard(I.local, I.global, I.leaves[0], it);
        Instruction* upd = reshard(U.local, U.global, U.leaves[0], uti);
        std::vector<int64_t> scatterDims;
        for (int64_t d = 0; d < uti.rank(); ++d)
          if (uti.tile(d) > 1) scatterDims.push_back(d);
        ElementType et = inst.shape().elementType();
        Instruction* identity = scalarConstant(et, comb->second);
        upd = mask(upd, U.global, uti, scatterDims, identity);  // padding rows add nothing
        Instruction* base = broadcastScalar(identity, inst.shape());
        Instruction* partial = cloneAs(inst, inst.shape(), {base, idx, upd});
        Instruction* joined = allReduce(partial, uti.groupsAlong(scatterDims), inst.toApply());
        Instruction* local = reshard(joined, inst.shape(), Tiling::replicated(inst.shape().rank(), n_), T);
        Instruction* x = reshard(O.local, O.global, O.leaves[0], T);
        Instruction* r = add(comb->first, x->shape(), {x, local}, "scatter-combine");
        return PValue{r, inst.shape(), want_};
      }
    }
    if (!W.isReplicated() || O.leaves[0].numTiles() > 1 || U.leaves[0].numTiles() > 1) {
      for (int64_t p : notLocal)
        if (O.leaves[0].tile(p) > 1) {
          diags_.warning(inst.location(), fmt::format("scatter '{}' replicates its operand along dimension {} (tiled {}, "
                                                      "an indexed dimension): no index-aware strategy yet",
                                                      inst.name(), p, O.leaves[0].toString()));
          break;
        }
    }
    Instruction* x = reshard(O.local, O.global, O.leaves[0], W);
    Instruction* idx = reshard(I.local, I.global, I.leaves[0], idxRepl);
    Instruction* upd = reshard(U.local, U.global, U.leaves[0], ut);
    std::vector<int64_t> g = inst.shape().dimensions();
    for (size_t k = 0; k < dn.scatterDimsToOperandDims.size(); ++k) {
      int64_t p = dn.scatterDimsToOperandDims[k];
      if (W.tile(p) == 1 || m.outOfOperand[static_cast<size_t>(p)] >= 0) continue;
      std::vector<int64_t> off(static_cast<size_t>(n_));
      for (int64_t d = 0; d < n_; ++d) off[static_cast<size_t>(d)] = W.shardOffsets(d, g)[static_cast<size_t>(p)];
      idx = rebaseIndices(idx, dn.indexVectorDim, static_cast<int64_t>(k), off);
    }
    Instruction* sc = cloneAs(inst, W.shardShape(inst.shape()), {x, idx, upd});
    return PValue{reshard(sc, inst.shape(), W, T), inst.shape(), want_};
  }

  // Convolution: batch tiles split the input and output-feature tiles the
  // kernel, as the non-contracting dims of a dot; tiled output spatial dims
  // read their input windows by halo exchange (zero outside the input) and
  // convolve locally without the global padding there.
  std::optional<PValue> partitionConvolution(const Instruction& inst) {
    const Tiling& T = want_[0];
    const hlo::ConvolutionDimensionNumbers& cd = *inst.attrs().convDims;
    std::vector<int64_t> spatial = cd.outputSpatialDimensions;
    const hlo::Window& win = *inst.attrs().window;
    std::vector<int64_t> noHalo;  // tiled spatial dims that cannot take a halo: taken whole
    for (size_t i = 0; i < spatial.size(); ++i)
      if (T.tile(spatial[i]) > 1 && win.dimensions[i].baseDilation != 1) noHalo.push_back(spatial[i]);
    if (!noHalo.empty()) {
      unsupported(inst, "a tiled spatial dimension is base-dilated (lhs_dilate); halo exchange for it is not implemented");
      return std::nullopt;
    }
    Tiling W = T;
    if (inst.attrs().featureGroupCount != 1 || inst.attrs().batchGroupCount != 1)
      W = W.replicatedOn({cd.outputFeatureDimension, cd.outputBatchDimension});
    int64_t rank = inst.shape().rank();
    std::vector<int64_t> lhsPerm(static_cast<size_t>(rank)), rhsPerm(static_cast<size_t>(rank));
    lhsPerm[static_cast<size_t>(cd.inputBatchDimension)] = cd.outputBatchDimension;
    lhsPerm[static_cast<size_t>(cd.inputFeatureDimension)] = cd.outputFeatureDimension;
    rhsPerm[static_cast<size_t>(cd.kernelOutputFeatureDimension)] = cd.outputFeatureDimension;
    rhsPerm[static_cast<size_t>(cd.kernelInputFeatureDimension)] = cd.outputBatchDimension;
    for (size_t i = 0; i < spatial.size(); ++i) {
      lhsPerm[static_cast<size_t>(cd.inputSpatialDimensions[i])] = spatial[i];
      rhsPerm[static_cast<size_t>(cd.kernelSpatialDimensions[i])] = spatial[i];
    }
    Tiling lt = W.replicatedOn({cd.outputFeatureDimension}).transposed(lhsPerm);
    std::vector<int64_t> rhsRepl = spatial;
    rhsRepl.push_back(cd.outputBatchDimension);
    Tiling rt = W.replicatedOn(rhsRepl).transposed(rhsPerm);
    Instruction* lhs = operandAs(inst.operand(0), lt);
    Instruction* rhs = operandAs(inst.operand(1), rt);
    hlo::Window local = win;
    std::vector<int64_t> so = W.shardDims(inst.shape().dimensions());
    for (size_t i = 0; i < spatial.size(); ++i) {
      int64_t q = spatial[i], j = cd.inputSpatialDimensions[i];
      if (W.tile(q) == 1) continue;
      hlo::WindowDimension& w = local.dimensions[i];
      int64_t o = so[static_cast<size_t>(q)];
      int64_t length = (o - 1) * w.stride + (w.size - 1) * w.windowDilation + 1;
      lhs = haloWindow(lhs, inst.operand(0)->shape(), lt, j, windowStarts(W, q, o, w.stride, w.paddingLow), length,
                       scalarConstant(inst.operand(0)->shape().elementType(), 0));
      w.paddingLow = w.paddingHigh = 0;
    }
    Instruction* c = cloneAs(inst, W.shardShape(inst.shape()), {lhs, rhs});
    c->attrs().window = local;
    return PValue{reshard(c, inst.shape(), W, T), inst.shape(), want_};
  }

  // ------------------------------------------------------------ computations
  Computation* partitionComputation(const Computation& c, const Leaves* paramLeaves, const std::string& name,
                                    Leaves* rootWant) {
    std::vector<Leaves> params;
    if (paramLeaves) params.push_back(*paramLeaves);
    return partitionComputationWithParams(c, params, name, rootWant, paramLeaves == nullptr);
  }

  Computation* partitionComputationWithParams(const Computation& c, const std::vector<Leaves>& params,
                                              const std::string& name, Leaves* rootWant, bool isEntry = false) {
    std::string cname = name;
    for (int k = 1; compNames_.count(cname); ++k) cname = fmt::format("{}.spmd{}", name, k > 1 ? std::to_string(k) : "");
    compNames_.insert(cname);
    Computation* saveOut = out_;
    Instruction* savePid = pid_;
    Leaves saveWant = want_;
    auto saveTables = std::move(tables_);
    tables_.clear();
    out_ = module_.addComputation(cname);
    pid_ = nullptr;
    bool ok = true;
    for (const auto& instPtr : c.instructions()) {
      const Instruction& inst = *instPtr;
      location_ = inst.location();
      if (inst.opcode() == Opcode::Parameter && !isEntry) {
        size_t k = static_cast<size_t>(inst.attrs().parameterNumber);
        want_ = k < params.size() ? params[k] : replicatedLeaves(inst.shape(), n_);
      } else if (inst.sharding()) {
        std::optional<Leaves> l = readSharding(inst, n_, diags_);
        if (!l) {
          ok = false;
          break;
        }
        want_ = std::move(*l);
      } else {
        want_ = replicatedLeaves(inst.shape(), n_);
      }
      if (&inst == c.root() && rootWant && !isEntry) want_ = *rootWant;
      std::optional<PValue> v = partitionOne(inst, isEntry);
      if (!v) {
        ok = false;
        break;
      }
      // Handlers may leave a different sharding; settle on the wanted one.
      bool same = v->leaves.size() == want_.size();
      for (size_t k = 0; same && k < want_.size(); ++k) same = v->leaves[k].sameAs(want_[k]);
      if (!same) {
        v->local = reshardValue(*v, want_);
        v->leaves = want_;
      }
      values_[&inst] = std::move(*v);
    }
    Computation* result = out_;
    if (ok) {
      Instruction* root = values_.at(c.root()).local;
      if (isEntry) {
        if (root->opcode() == Opcode::Parameter || values_.at(c.root()).local == nullptr) {
          // A root that is a parameter gets its own copy to hold the output attributes.
          root = add(Opcode::Copy, root->shape(), {root}, "copy");
        }
        root->common().sharding = toHloSharding(c.root()->shape(), values_.at(c.root()).leaves);
        setGlobalShape(*root, c.root()->shape());
      }
      out_->setRoot(root);
    }
    out_ = saveOut;
    pid_ = savePid;
    want_ = std::move(saveWant);
    tables_ = std::move(saveTables);
    return ok ? result : nullptr;
  }

  hlo::Module& module_;
  int64_t n_;
  DiagnosticEngine& diags_;
  int64_t windowedBytes_;  // windowed einsum from this gathered-operand size on; -1: never
  std::set<std::string> names_;
  std::map<std::string, int64_t> nextSuffix_;
  std::set<std::string> compNames_;
  int64_t nextChannel_ = 1;
  Computation* out_ = nullptr;
  Instruction* pid_ = nullptr;
  std::map<std::vector<int64_t>, Instruction*> tables_;
  std::map<ElementType, Computation*> adders_;
  std::map<const Instruction*, PValue> values_;
  Leaves want_;
  SourceLocation location_;
};

}  // namespace

bool isPartitioned(const hlo::Module& module) {
  const hlo::Computation* entry = module.entry();
  if (!entry) return false;
  const std::string& name = entry->name();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "_spmd") == 0) return true;
  for (const auto& c : module.computations())
    for (const auto& inst : c->instructions()) {
      Opcode op = inst->opcode();
      bool manual = inst->sharding() && inst->sharding()->kind == hlo::Sharding::Kind::Manual;
      if (manual) continue;
      if (op == Opcode::PartitionId) return true;
      if ((op == Opcode::AllGather || op == Opcode::AllGatherStart || op == Opcode::AllReduce ||
           op == Opcode::AllReduceStart || op == Opcode::AllToAll || op == Opcode::ReduceScatter ||
           op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart) &&
          inst->attrs().channelId)
        return true;
    }
  return false;
}

bool partitionModule(hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags, const SpmdOptions* options) {
  int64_t mib = options ? options->windowedEinsumThresholdMib : -1;
  Partitioner p(module, numPartitions, diags, mib < 0 ? -1 : mib * 1024 * 1024);
  return p.run();
}

bool SpmdPartitionPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  if (isPartitioned(module)) {
    diags.warning(module.entry()->location(),
                  fmt::format("module '{}' is already partitioned (cross-partition collectives or an _spmd entry); "
                              "left unchanged",
                              module.name()));
    return false;
  }
  SpmdOptions defaults;
  int64_t n = partitionCount(module, options_ ? *options_ : defaults);
  partitionModule(module, n, diags, options_);
  return true;
}

void registerSpmdPasses(passes::PassRegistry& registry, const SpmdOptions* options) {
  if (registry.find("spmd-partition")) return;
  registry.add({"sharding-propagation",
                "Give every instruction a sharding from the annotations (GSPMD propagation, forward and backward)",
                [options] { return std::make_unique<ShardingPropagationPass>(options); }});
  registry.add({"spmd-partition",
                "Rewrite a sharded module into the per-device SPMD program with collectives (run after "
                "sharding-propagation)",
                [options] { return std::make_unique<SpmdPartitionPass>(options); }});
}

std::string formatCommunicationStats(const hlo::Module& module, bool json) {
  std::map<std::string, int64_t> bytes, counts;
  for (const auto& c : module.computations())
    for (const auto& inst : c->instructions()) {
      Opcode op = inst->opcode();
      if (op != Opcode::AllGather && op != Opcode::AllReduce && op != Opcode::AllToAll &&
          op != Opcode::CollectivePermute && op != Opcode::ReduceScatter)
        continue;
      std::string kind(hlo::opcodeName(op));
      std::optional<int64_t> b = inst->shape().byteSize();
      // Bytes each device receives: all-gather its result minus its own
      // piece; all-reduce / all-to-all / permute about their operand size.
      int64_t v = b ? *b : 0;
      if (op == Opcode::AllGather && inst->attrs().replicaGroups && !inst->attrs().replicaGroups->groups.empty()) {
        int64_t g = static_cast<int64_t>(inst->attrs().replicaGroups->groups[0].size());
        v = v - v / std::max<int64_t>(g, 1);
      }
      if (op == Opcode::ReduceScatter && inst->operandCount() == 1) {
        // The partial sums of the others for this device's piece: operand minus result.
        std::optional<int64_t> in = inst->operand(0)->shape().byteSize();
        v = in ? *in - v : v;
      }
      bytes[kind] += v;
      counts[kind] += 1;
    }
  std::string out;
  int64_t total = 0;
  for (auto& [k, v] : bytes) total += v;
  if (json) {
    out = "\"communication\": {";
    bool first = true;
    for (auto& [k, v] : bytes) {
      out += fmt::format("{}\"{}\": {{\"count\": {}, \"bytes\": {}}}", first ? "" : ", ", k, counts[k], v);
      first = false;
    }
    out += fmt::format("}}, \"communication_bytes\": {}", total);
    return out;
  }
  for (auto& [k, v] : bytes) out += fmt::format("communication {}: {} ops, {} bytes per device\n", k, counts[k], v);
  out += fmt::format("communication bytes per device: {}\n", total);
  return out;
}

}  // namespace tpu::spmd
