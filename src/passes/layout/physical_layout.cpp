#include "passes/layout/physical_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "hlo/computation.h"
#include "passes/clone.h"
#include "passes/layout/layout_rules.h"
#include "passes/layout/physical_conv.h"
#include "passes/layout/physical_reduce.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes::layout {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

// The stages from the logical array to its physical form: the permutation
// into major-to-minor order, then per tile the dimensions before it
// (`before`, with leading 1s when the tile has more entries than the array
// dimensions) and after it.
struct Plan {
  std::vector<int64_t> perm;      // logical dimension of each major-to-minor position
  std::vector<int64_t> permuted;  // dims in that order
  // The permuted dims with the ones no tile reaches merged into one (the
  // same bytes; it keeps the tiled forms within the 8 dimensions buffers have).
  std::vector<int64_t> collapsed;
  size_t merged = 0;  // leading permuted dims merged into collapsed[0] (0: none)
  struct Tiling {
    std::vector<int64_t> tile;
    int64_t prepended = 0;          // leading 1s added
    std::vector<int64_t> before;    // dims (with the 1s) before tiling
    std::vector<int64_t> padded;    // before, minor dims rounded up to the tile
    std::vector<int64_t> after;     // [prefix, ceil(a_j / t_j)..., t_j...]
  };
  std::vector<Tiling> tilings;
  std::vector<int64_t> physical;
};

std::optional<Plan> planFor(const Shape& shape) {
  if (!shape.isArray() || !shape.hasLayout() || shape.isDynamic()) return std::nullopt;
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(shape.elementType());
  if (!info.isArray || info.bitWidth < 8 || info.bitWidth != info.byteSize * 8) return std::nullopt;
  const hlo::Layout& layout = shape.layout();
  if (layout.elementSizeInBits != 0 && layout.elementSizeInBits != info.bitWidth) return std::nullopt;
  const int64_t rank = shape.rank();
  const M2M& m2m = layout.minorToMajor;
  if (!isPermutation(m2m, rank)) return std::nullopt;
  for (const hlo::Tile& t : layout.tiles) {
    if (t.dimensions.empty()) return std::nullopt;
    for (int64_t d : t.dimensions)
      if (d <= 0) return std::nullopt;  // `*` (combine) tiles are not stored by this model
  }
  for (int64_t d : shape.dimensions())
    if (d < 0) return std::nullopt;
  Plan p;
  p.perm.assign(m2m.rbegin(), m2m.rend());
  for (int64_t d : p.perm) p.permuted.push_back(shape.dimension(d));
  bool identity = layout.tiles.empty();
  for (size_t i = 0; i < p.perm.size(); ++i) identity = identity && p.perm[i] == static_cast<int64_t>(i);
  if (identity) return std::nullopt;
  p.collapsed = p.permuted;
  const size_t reach = layout.tiles.empty() ? 0 : layout.tiles[0].dimensions.size();
  if (reach && p.permuted.size() > reach + 1) {
    p.merged = p.permuted.size() - reach;
    int64_t lead = 1;
    for (size_t i = 0; i < p.merged; ++i) lead *= p.permuted[i];
    p.collapsed.assign(p.permuted.begin() + static_cast<std::ptrdiff_t>(p.merged), p.permuted.end());
    p.collapsed.insert(p.collapsed.begin(), lead);
  }
  std::vector<int64_t> cur = p.collapsed;
  for (const hlo::Tile& t : layout.tiles) {
    Plan::Tiling tl;
    tl.tile = t.dimensions;
    const size_t q = t.dimensions.size();
    while (cur.size() < q) cur.insert(cur.begin(), 1), ++tl.prepended;
    tl.before = cur;
    tl.padded = cur;
    const size_t s = cur.size() - q;
    std::vector<int64_t> after(cur.begin(), cur.begin() + static_cast<std::ptrdiff_t>(s));
    for (size_t j = 0; j < q; ++j) {
      int64_t a = cur[s + j], tj = t.dimensions[j];
      tl.padded[s + j] = (a + tj - 1) / tj * tj;
      after.push_back((a + tj - 1) / tj);
    }
    for (size_t j = 0; j < q; ++j) after.push_back(t.dimensions[j]);
    tl.after = after;
    cur = std::move(after);
    p.tilings.push_back(std::move(tl));
  }
  p.physical = cur;
  return p;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The physical element index of logical multi-index `idx` (`x`, `nx`: scratch).
int64_t physicalOffset(const Plan& p, const std::vector<int64_t>& idx, std::vector<int64_t>& x,
                       std::vector<int64_t>& nx) {
  x.clear();
  for (int64_t d : p.perm) x.push_back(idx[static_cast<size_t>(d)]);
  if (p.merged) {
    int64_t lead = 0;
    for (size_t i = 0; i < p.merged; ++i) lead = lead * p.permuted[i] + x[i];
    x.erase(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(p.merged));
    x.insert(x.begin(), lead);
  }
  for (const Plan::Tiling& t : p.tilings) {
    const size_t q = t.tile.size();
    while (x.size() < t.before.size()) x.insert(x.begin(), 0);
    const size_t s = x.size() - q;
    nx.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(s));
    for (size_t j = 0; j < q; ++j) nx.push_back(x[s + j] / t.tile[j]);
    for (size_t j = 0; j < q; ++j) nx.push_back(x[s + j] % t.tile[j]);
    std::swap(x, nx);
  }
  int64_t off = 0;
  for (size_t j = 0; j < x.size(); ++j) off = off * p.physical[j] + x[j];
  return off;
}

}  // namespace

std::optional<std::vector<int64_t>> physicalDims(const Shape& shape) {
  auto p = planFor(shape);
  if (!p) return std::nullopt;
  return p->physical;
}

int64_t physicalByteSize(const Shape& shape) {
  if (auto p = planFor(shape)) return product(p->physical) * hlo::elementTypeInfo(shape.elementType()).byteSize;
  return shape.byteSize().value_or(0);
}

std::vector<int64_t> physicalIndexMap(const Shape& shape) {
  auto p = planFor(shape);
  if (!p) return {};
  const int64_t rank = shape.rank();
  const int64_t count = product(shape.dimensions());
  std::vector<int64_t> map(static_cast<size_t>(count));
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);  // logical multi-index (odometer)
  std::vector<int64_t> x, nx;
  for (int64_t e = 0; e < count; ++e) {
    map[static_cast<size_t>(e)] = physicalOffset(*p, idx, x, nx);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape.dimension(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return map;
}

std::optional<std::vector<int64_t>> physicalStrides(const Shape& shape) {
  auto p = planFor(shape);
  if (!p) return std::nullopt;
  // The offset is a sum of one term per logical dimension (each physical
  // dimension is a digit of one logical index, merged ones a linear
  // combination), so each dimension is checked on its own axis.
  const size_t rank = static_cast<size_t>(shape.rank());
  std::vector<int64_t> strides(rank, 0), idx(rank, 0), x, nx;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = shape.dimension(static_cast<int64_t>(d));
    if (size > 1) {
      idx[d] = 1;
      strides[d] = physicalOffset(*p, idx, x, nx);
    }
    for (int64_t i = 2; i < size; ++i) {
      idx[d] = i;
      if (physicalOffset(*p, idx, x, nx) != i * strides[d]) return std::nullopt;
    }
    idx[d] = 0;
  }
  return strides;
}

bool isPhysicalBitcast(const hlo::Instruction& in) {
  if (in.opcode() != Opcode::Bitcast || in.operandCount() != 1) return false;
  const Shape &from = in.operand(0)->shape(), &to = in.shape();
  if (!from.isArray() || !to.isArray() || from.elementType() != to.elementType()) return false;
  auto rowMajor = [](const Shape& s) {
    return !s.hasLayout() || s.layout() == Shape(s).withDefaultLayout().layout();
  };
  // Tiled: an untiled order is what an ordinary layout bitcast (a
  // transpose) already reads.
  auto tiled = [](const Shape& s) { return s.hasLayout() && !s.layout().tiles.empty(); };
  auto dimsTo = physicalDims(to), dimsFrom = physicalDims(from);
  return (dimsTo && tiled(to) && rowMajor(from) && from.dimensions() == *dimsTo) ||
         (dimsFrom && tiled(from) && rowMajor(to) && to.dimensions() == *dimsFrom);
}

std::vector<uint8_t> logicalToPhysical(const Shape& shape, const uint8_t* logical, size_t size) {
  std::vector<int64_t> map = physicalIndexMap(shape);
  if (map.empty() && !physicalDims(shape)) return std::vector<uint8_t>(logical, logical + size);
  const size_t es = static_cast<size_t>(hlo::elementTypeInfo(shape.elementType()).byteSize);
  std::vector<uint8_t> out(static_cast<size_t>(physicalByteSize(shape)), 0);
  for (size_t e = 0; e < map.size() && (e + 1) * es <= size; ++e)
    std::memcpy(out.data() + static_cast<size_t>(map[e]) * es, logical + e * es, es);
  return out;
}

std::vector<uint8_t> physicalToLogical(const Shape& shape, const uint8_t* physical, size_t size) {
  std::vector<int64_t> map = physicalIndexMap(shape);
  if (map.empty() && !physicalDims(shape)) return std::vector<uint8_t>(physical, physical + size);
  const size_t es = static_cast<size_t>(hlo::elementTypeInfo(shape.elementType()).byteSize);
  std::vector<uint8_t> out(map.size() * es, 0);
  for (size_t e = 0; e < map.size(); ++e)
    if ((static_cast<size_t>(map[e]) + 1) * es <= size)
      std::memcpy(out.data() + e * es, physical + static_cast<size_t>(map[e]) * es, es);
  return out;
}

hlo::Literal convertEdgeLiteral(const hlo::Literal& l, const Shape& layoutShape, bool toPhysical) {
  if (l.isTuple()) {
    std::vector<hlo::Literal> es;
    for (size_t i = 0; i < l.tupleElements().size(); ++i)
      es.push_back(convertEdgeLiteral(l.tupleElements()[i], layoutShape.tupleElements()[i], toPhysical));
    return hlo::Literal::tuple(std::move(es));
  }
  auto dims = physicalDims(layoutShape);
  if (!dims) return l;
  Shape to = toPhysical ? Shape(l.shape().elementType(), *dims) : Shape(layoutShape.elementType(), layoutShape.dimensions());
  hlo::Literal out(to.withDefaultLayout());
  std::vector<uint8_t> bytes = toPhysical ? logicalToPhysical(layoutShape, l.data().data(), l.data().size())
                                          : physicalToLogical(layoutShape, l.data().data(), l.data().size());
  if (bytes.size() == out.data().size()) std::memcpy(out.mutableData().data(), bytes.data(), bytes.size());
  return out;
}

std::vector<Shape> arrayLeaves(const Shape& shape) {
  std::vector<Shape> out;
  std::function<void(const Shape&)> walk = [&](const Shape& s) {
    if (s.isTuple()) {
      for (const Shape& e : s.tupleElements()) walk(e);
    } else if (s.isArray()) {
      out.push_back(s);
    }
  };
  walk(shape);
  return out;
}

namespace {

// Leaf indices (ShapeIndex paths) of the array leaves of `shape`, in order.
void leafPaths(const Shape& shape, hlo::ShapeIndex& at, std::vector<hlo::ShapeIndex>& out) {
  if (shape.isTuple()) {
    for (size_t i = 0; i < shape.tupleElements().size(); ++i) {
      at.push_back(static_cast<int64_t>(i));
      leafPaths(shape.tupleElements()[i], at, out);
      at.pop_back();
    }
  } else if (shape.isArray()) {
    out.push_back(at);
  }
}

bool hasPrefix(const hlo::ShapeIndex& path, const hlo::ShapeIndex& prefix) {
  return path.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

}  // namespace

std::vector<std::vector<bool>> physicalParameterLeaves(const hlo::Module& module, bool pod) {
  std::vector<std::vector<bool>> out;
  if (!module.entry()) return out;
  hlo::ComputationLayout layout = module.entryComputationLayout();
  for (size_t i = 0; i < layout.parameters.size(); ++i) {
    std::vector<bool> leaves;
    bool aliased = false;
    for (const hlo::InputOutputAlias& a : module.config().inputOutputAlias)
      aliased = aliased || a.parameterNumber == static_cast<int64_t>(i);
    for (const Shape& leaf : arrayLeaves(layout.parameters[i]))
      leaves.push_back(!pod && !aliased && physicalDims(leaf).has_value());
    out.push_back(std::move(leaves));
  }
  return out;
}

std::vector<bool> physicalResultLeaves(const hlo::Module& module, bool pod) {
  std::vector<bool> out;
  if (!module.entry()) return out;
  hlo::ComputationLayout layout = module.entryComputationLayout();
  std::vector<hlo::ShapeIndex> paths;
  hlo::ShapeIndex at;
  leafPaths(layout.result, at, paths);
  std::vector<Shape> leaves = arrayLeaves(layout.result);
  for (size_t i = 0; i < leaves.size(); ++i) {
    bool aliased = false;
    for (const hlo::InputOutputAlias& a : module.config().inputOutputAlias)
      aliased = aliased || hasPrefix(paths[i], a.outputIndex) || hasPrefix(a.outputIndex, paths[i]);
    out.push_back(!pod && !aliased && physicalDims(leaves[i]).has_value());
  }
  return out;
}

namespace {

class EdgeBuilder {
 public:
  EdgeBuilder(Computation& c, std::set<std::string>& names) : c_(&c), home_(&c), names_(names) {}

  // toLogical / toPhysical as one loop fusion of `v` when it takes more than
  // one data-moving step (one kernel streams the whole relayout instead of a
  // kernel per step, each through HBM: the conv net's bf16 (2,1) edges
  // 4 kernels -> 1); a single transpose stays as it is.
  Instruction* fused(Instruction* v, const Shape& shape, const std::string& base, bool toPhys) {
    hlo::Module& module = *c_->parent();
    std::string name = base + ".fused";
    for (int i = 1; module.findComputation(name); ++i) name = fmt::format("{}.fused.{}", base, i);
    Computation* body = module.addComputation(name);
    Computation* outer = c_;
    Instruction* p = body->addInstruction(Opcode::Parameter, fresh(base + ".param"), v->shape());
    p->attrs().parameterNumber = 0;
    c_ = body;
    Instruction* r = toPhys ? toPhysical(p, shape, base) : toLogical(p, shape, base);
    c_ = outer;
    int64_t steps = 0;
    for (const auto& in : body->instructions())
      steps += in->opcode() != Opcode::Parameter && in->opcode() != Opcode::Reshape && in->opcode() != Opcode::Constant;
    if (steps < 2) {
      module.removeComputation(body);
      return toPhys ? toPhysical(v, shape, base) : toLogical(v, shape, base);
    }
    body->setRoot(r);
    Instruction* f = add(Opcode::Fusion, r->shape().elementType(), r->shape().dimensions(), {v}, base);
    f->attrs().fusionKind = hlo::FusionKind::Loop;
    f->addCalledComputation(body);
    return f;
  }

  // The physical value `v` (row-major physical dims) as the logical array of `shape`.
  Instruction* toLogical(Instruction* v, const Shape& shape, const std::string& base) {
    Plan p = *planFor(shape);
    const hlo::ElementType t = shape.elementType();
    for (auto it = p.tilings.rbegin(); it != p.tilings.rend(); ++it) {
      const Plan::Tiling& tl = *it;
      const size_t q = tl.tile.size(), s = tl.before.size() - q;
      // [prefix, A..., t...] -> [prefix, A1, t1, A2, t2, ...]
      std::vector<int64_t> inter(tl.after.begin(), tl.after.begin() + static_cast<std::ptrdiff_t>(s));
      std::vector<int64_t> perm(s);
      std::iota(perm.begin(), perm.end(), 0);
      for (size_t j = 0; j < q; ++j) {
        inter.push_back(tl.after[s + j]);
        inter.push_back(tl.after[s + q + j]);
        perm.push_back(static_cast<int64_t>(s + j));
        perm.push_back(static_cast<int64_t>(s + q + j));
      }
      v = transpose(v, t, inter, perm, base);
      v = reshape(v, t, tl.padded, base);
      if (tl.padded != tl.before) {
        std::vector<hlo::SliceDimension> sl;
        for (int64_t d : tl.before) sl.push_back({0, d, 1});
        v = add(Opcode::Slice, t, tl.before, {v}, base);
        v->attrs().slice = std::move(sl);
      }
      if (tl.prepended) {
        std::vector<int64_t> dims(tl.before.begin() + tl.prepended, tl.before.end());
        v = reshape(v, t, dims, base);
      }
    }
    v = reshape(v, t, p.permuted, base);
    // major-to-minor order -> logical: out[d] = in[inverse(perm)[d]]
    std::vector<int64_t> inv(p.perm.size());
    for (size_t i = 0; i < p.perm.size(); ++i) inv[static_cast<size_t>(p.perm[i])] = static_cast<int64_t>(i);
    v = transpose(v, t, shape.dimensions(), inv, base);
    return v;
  }

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 1; names_.count(n); ++i) n = fmt::format("{}.{}", base, i);
    names_.insert(n);
    return n;
  }

  // The logical array `v` of `shape` in its physical form.
  Instruction* toPhysical(Instruction* v, const Shape& shape, const std::string& base) {
    Plan p = *planFor(shape);
    const hlo::ElementType t = shape.elementType();
    v = transpose(v, t, p.permuted, p.perm, base);
    v = reshape(v, t, p.collapsed, base);
    for (const Plan::Tiling& tl : p.tilings) {
      const size_t q = tl.tile.size(), s = tl.before.size() - q;
      if (tl.prepended) v = reshape(v, t, tl.before, base);
      if (tl.padded != tl.before) {
        Instruction* zero = add(Opcode::Constant, t, {}, {}, base);
        hlo::Literal l(Shape::scalar(t).withDefaultLayout());
        l.setDouble(0, 0.0);
        zero->attrs().literal = std::move(l);
        v = add(Opcode::Pad, t, tl.padded, {v, zero}, base);
        std::vector<hlo::PaddingDimension> pd;
        for (size_t j = 0; j < tl.before.size(); ++j) pd.push_back({0, tl.padded[j] - tl.before[j], 0});
        v->attrs().padding = std::move(pd);
      }
      std::vector<int64_t> inter(tl.after.begin(), tl.after.begin() + static_cast<std::ptrdiff_t>(s));
      for (size_t j = 0; j < q; ++j) {
        inter.push_back(tl.after[s + j]);
        inter.push_back(tl.after[s + q + j]);
      }
      v = reshape(v, t, inter, base);
      // [prefix, A1, t1, A2, t2, ...] -> [prefix, A..., t...]
      std::vector<int64_t> perm(s);
      std::iota(perm.begin(), perm.end(), 0);
      for (size_t j = 0; j < q; ++j) perm.push_back(static_cast<int64_t>(s + 2 * j));
      for (size_t j = 0; j < q; ++j) perm.push_back(static_cast<int64_t>(s + 2 * j + 1));
      v = transpose(v, t, tl.after, perm, base);
    }
    return v;
  }

 private:
  Instruction* add(Opcode op, hlo::ElementType t, std::vector<int64_t> dims, std::vector<Instruction*> operands,
                   const std::string& base) {
    Instruction* in = c_->addInstruction(op, fresh(base), Shape(t, std::move(dims)).withDefaultLayout());
    for (Instruction* o : operands) in->addOperand(o);
    if (c_ == home_) created_.push_back(in);
    return in;
  }
  Instruction* transpose(Instruction* v, hlo::ElementType t, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& perm, const std::string& base) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (identity) return v;
    Instruction* r = add(Opcode::Transpose, t, dims, {v}, base);
    r->attrs().dimensions = perm;
    return r;
  }
  Instruction* reshape(Instruction* v, hlo::ElementType t, const std::vector<int64_t>& dims,
                       const std::string& base) {
    if (v->shape().dimensions() == dims) return v;
    return add(Opcode::Reshape, t, dims, {v}, base);
  }

  Computation* c_;
  Computation* home_;
  std::set<std::string>& names_;

 public:
  std::vector<Instruction*> created_;  // every conversion instruction added (candidates for removal when unused)
};

}  // namespace

bool sameArrangement(const Shape& a, const Shape& b) {
  if (!a.isArray() || !b.isArray() || !a.hasLayout() || !b.hasLayout()) return false;
  const hlo::Layout &x = a.layout(), &y = b.layout();
  return a.dimensions() == b.dimensions() && x.minorToMajor == y.minorToMajor && x.tiles == y.tiles &&
         x.elementSizeInBits == y.elementSizeInBits;
}

Shape withType(const Shape& key, hlo::ElementType t) {
  Shape s(t, key.dimensions());
  s.setLayout(key.layout());
  return s;
}

namespace {

// Pushes the edge relayouts through layout-agnostic work: an elementwise
// instruction (or a fusion of elementwise work, scalar broadcasts and scalar
// constants) whose array operands are all physical in one arrangement runs
// on the physical arrays directly (the padding elements are computed, never
// read), and its logical value becomes a relayout of that physical result,
// made only when a user needs it. A result leaf whose value is physical in
// its own arrangement then needs no relayout at all.
class RelayoutSinker {
 public:
  using Physical = PhysicalValue;

  RelayoutSinker(hlo::Module& module, Computation& entry, EdgeBuilder& eb) : module_(module), entry_(entry), eb_(eb) {}

  void setPhysical(Instruction* logical, Instruction* physical, const Shape& key) {
    physOf_[logical] = {physical, key};
  }

  // Grows the physical region forward through the entry in operand order.
  void propagate() {
    entry_.sortTopologically();
    std::vector<Instruction*> order;
    for (const auto& in : entry_.instructions()) order.push_back(in.get());
    for (Instruction* in : order) tryMember(in);
  }

  // The physical form of logical value `v` when it is stored as `layoutShape` wants.
  Instruction* physicalFor(Instruction* v, const Shape& layoutShape) const {
    auto it = physOf_.find(resolve(v));
    if (it == physOf_.end() || it->second.value->shape().elementType() != layoutShape.elementType() ||
        !sameArrangement(it->second.key, layoutShape))
      return nullptr;
    return it->second.value;
  }

  // Gives every remaining logical user of a member the relayout of its
  // physical value; returns the names of the members relaid.
  std::vector<std::string> rewire() {
    std::vector<std::string> names;
    auto users = entry_.computeUsers();
    std::set<Instruction*> memberSet(members_.begin(), members_.end());
    std::map<Instruction*, std::vector<Instruction*>> successors;  // control edges out of members
    for (const auto& in : entry_.instructions())
      for (Instruction* p : in->controlPredecessors())
        if (memberSet.count(p)) successors[p].push_back(in.get());
    for (Instruction* m : members_) {
      std::vector<Instruction*> outside;
      auto it = users.find(m);
      if (it != users.end())
        for (Instruction* u : it->second)
          if (!memberSet.count(u)) outside.push_back(u);
      for (Instruction* u : successors[m])
        if (!memberSet.count(u) && std::find(outside.begin(), outside.end(), u) == outside.end()) outside.push_back(u);
      const bool root = entry_.root() == m;
      if (outside.empty() && !root) continue;
      const Physical& ph = physOf_.at(m);
      Instruction* l = eb_.fused(ph.value, withType(ph.key, m->shape().elementType()), m->name() + ".relayout", false);
      l->setShape(m->shape());
      for (Instruction* u : outside) {
        for (int64_t i = 0; i < u->operandCount(); ++i)
          if (u->operand(i) == m) u->setOperand(i, l);
        std::vector<Instruction*> preds = u->controlPredecessors();
        for (Instruction*& p : preds)
          if (p == m) p = l;
        u->setControlPredecessors(std::move(preds));
      }
      if (root) entry_.setRoot(l);
      names.push_back(m->name());
    }
    return names;
  }

  // Removes the members and conversions (`extra`) nothing uses any more, and
  // the fused computations only removed members called.
  void removeDead(const std::vector<Instruction*>& extra) {
    entry_.sortTopologically();
    std::set<Instruction*> candidates(members_.begin(), members_.end());
    candidates.insert(extra.begin(), extra.end());
    for (Instruction* m : members_)  // the logical broadcasts of scalars and tuple elements they read
      for (Instruction* o : m->operands())
        if (o->opcode() == Opcode::Broadcast || o->opcode() == Opcode::GetTupleElement ||
            o->opcode() == Opcode::Constant)
          candidates.insert(o);
    std::map<Instruction*, int64_t> uses;
    for (const auto& in : entry_.instructions()) {
      for (Instruction* o : in->operands()) ++uses[o];
      for (Instruction* p : in->controlPredecessors()) ++uses[p];
    }
    std::set<Instruction*> dead;
    for (auto it = entry_.instructions().rbegin(); it != entry_.instructions().rend(); ++it) {
      Instruction* in = it->get();
      if (!candidates.count(in) || uses[in] > 0 || in == entry_.root() || in->opcode() == Opcode::Parameter) continue;
      dead.insert(in);
      for (Instruction* o : in->operands()) --uses[o];
    }
    std::set<Computation*> maybeUnused;
    for (Instruction* d : dead)
      for (Computation* c : d->calledComputations()) maybeUnused.insert(c);
    // A member gone for good leaves its name to its physical twin (kernel names stay).
    std::vector<std::pair<Instruction*, std::string>> renames;
    for (Instruction* m : members_)
      if (dead.count(m) && twins_.count(physOf_.at(m).value)) renames.push_back({physOf_.at(m).value, m->name()});
    entry_.removeInstructionsIf([&](const Instruction& in) { return dead.count(const_cast<Instruction*>(&in)) > 0; });
    for (const auto& c : module_.computations())
      for (const auto& in : c->instructions())
        for (Computation* callee : in->calledComputations()) maybeUnused.erase(callee);
    for (Computation* c : maybeUnused) module_.removeComputation(c);
    for (auto& [twin, name] : renames) twin->setName(std::move(name));
  }

 private:
  // Through get-tuple-element of a tuple instruction to the element itself.
  static Instruction* resolve(Instruction* v) {
    while (v->opcode() == Opcode::GetTupleElement && v->operand(0)->opcode() == Opcode::Tuple &&
           v->attrs().tupleIndex < v->operand(0)->operandCount())
      v = v->operand(0)->operand(v->attrs().tupleIndex);
    return v;
  }

  // A fused computation of elementwise work on arrays of `dims` only (with
  // scalar parameters, constants and broadcasts of scalars).
  static bool agnosticBody(const Computation& c, const std::vector<int64_t>& dims) {
    if (!c.root() || !c.root()->shape().isArray() || c.root()->shape().dimensions() != dims) return false;
    for (const auto& up : c.instructions()) {
      const Instruction& in = *up;
      if (!in.shape().isArray() || !in.calledComputations().empty() || !in.controlPredecessors().empty())
        return false;
      const bool scalar = in.shape().isScalar();
      if (!scalar && in.shape().dimensions() != dims) return false;
      if (in.opcode() == Opcode::Parameter) continue;
      // Array constants are stored physically too (an elided one is filled by
      // logical position, so it stays out).
      if (in.opcode() == Opcode::Constant && (scalar || !in.literal().isElided())) continue;
      if (in.opcode() == Opcode::Broadcast && in.operandCount() == 1 && in.operand(0)->shape().isScalar()) continue;
      if (hlo::isElementwise(in.opcode()) && !in.hasSideEffect()) continue;
      return false;
    }
    return true;
  }

  // A bitcast between two layouts of the same bytes (the same dimensions in
  // major-to-minor order under the same tiles) is the operand's physical
  // array itself, seen with the result's layout: no instruction at all.
  bool tryBitcast(Instruction* in) {
    if (in->opcode() != Opcode::Bitcast || !in->shape().isArray() || in->shape().isScalar()) return false;
    auto it = physOf_.find(resolve(in->operand(0)));
    if (it == physOf_.end() || it->second.value->shape().elementType() != in->shape().elementType()) return false;
    const Shape from = withType(it->second.key, in->shape().elementType());
    auto a = planFor(from), b = planFor(in->shape());
    if (!a || !b || a->collapsed != b->collapsed || a->physical != b->physical ||
        from.layout().tiles != in->shape().layout().tiles)
      return false;
    members_.push_back(in);
    physOf_[in] = {it->second.value, in->shape()};
    return true;
  }

  // ---- dots reading physical operands

  // An operand of a dot as the dot twin reads it: its dimensions (the
  // physical ones for a physical operand) and, per logical dimension, the
  // dimensions that make it up, major to minor (row-major digits of the
  // logical index, padded).
  struct DotView {
    Instruction* value = nullptr;
    std::vector<int64_t> dims;
    std::vector<std::vector<int64_t>> digits;
  };

  // The physical `ph` as a view: one T(a,b) tile of two dimensions, the
  // two tiled logical dimensions (outer, tile) digit pairs; the dimensions
  // no tile reaches, merged in the physical form, are split again (a free
  // reshape). 2-byte elements may pair rows under a second tile (2,1) that
  // splits the tile's digits exactly: rows (a/8, 4, 2), lanes (b/128, 128);
  // their size-1 digits are reshaped away.
  static std::optional<DotView> physicalView(const Physical& ph) {
    auto p = planFor(ph.key);
    if (!p || p->tilings.empty() || p->tilings[0].tile.size() != 2) return std::nullopt;
    if (p->tilings.size() > 1 && !pairedRows(ph.key)) return std::nullopt;
    const size_t r = p->perm.size();
    if (r < 2) return std::nullopt;
    // Per collapsed position, its digits in the current form.
    std::vector<std::vector<int64_t>> at(p->collapsed.size());
    for (size_t i = 0; i < at.size(); ++i) at[i] = {static_cast<int64_t>(i)};
    for (size_t t = 0; t < p->tilings.size(); ++t) {
      const Plan::Tiling& tl = p->tilings[t];
      if (tl.prepended || (t > 0 && tl.padded != tl.before)) return std::nullopt;
      const int64_t q = static_cast<int64_t>(tl.tile.size());
      const int64_t s = static_cast<int64_t>(tl.before.size()) - q;
      for (auto& ds : at) {
        std::vector<int64_t> next;
        for (int64_t x : ds) {
          next.push_back(x);
          if (x >= s) next.push_back(x + q);
        }
        ds = std::move(next);
      }
    }
    // The merged leading position (never tiled: it is physical dimension 0)
    // back to its `merged` dimensions.
    const int64_t lead = static_cast<int64_t>(p->merged), shift = lead ? lead - 1 : 0;
    std::vector<int64_t> phys(p->permuted.begin(), p->permuted.begin() + lead);
    phys.insert(phys.end(), p->physical.begin() + (lead ? 1 : 0), p->physical.end());
    DotView v;
    v.value = ph.value;
    v.digits.resize(r);
    for (int64_t i = 0; i < lead; ++i) v.digits[static_cast<size_t>(p->perm[static_cast<size_t>(i)])] = {i};
    for (size_t i = lead ? 1 : 0; i < at.size(); ++i) {
      std::vector<int64_t>& ds = v.digits[static_cast<size_t>(p->perm[static_cast<size_t>(shift) + i])];
      for (int64_t x : at[i]) ds.push_back(x + shift);
    }
    // Paired rows keep the digits of size > 1 (one per logical dimension at
    // least), renumbered: the (2,1) tile's lane digit is 1.
    const bool dropOnes = p->tilings.size() > 1;
    std::vector<int64_t> index(phys.size(), -1);
    for (auto& ds : v.digits) {
      std::vector<int64_t> kept;
      for (int64_t x : ds)
        if (!dropOnes || phys[static_cast<size_t>(x)] > 1) kept.push_back(x);
      if (kept.empty()) kept.push_back(ds.back());
      ds = std::move(kept);
      for (int64_t x : ds) index[static_cast<size_t>(x)] = 0;
    }
    for (size_t x = 0; x < index.size(); ++x)
      if (index[x] == 0) {
        index[x] = static_cast<int64_t>(v.dims.size());
        v.dims.push_back(phys[x]);
      }
    for (auto& ds : v.digits)
      for (int64_t& x : ds) x = index[static_cast<size_t>(x)];
    return v;
  }

  // bf16-like arrays whose T(8,128) tiles pair rows in 32-bit words: (2,1).
  static bool pairedRows(const Shape& key) {
    const auto& tiles = key.layout().tiles;
    return hlo::elementTypeInfo(key.elementType()).byteSize == 2 && tiles.size() == 2 &&
           tiles[1].dimensions == std::vector<int64_t>{2, 1};
  }

  static DotView logicalView(Instruction* o) {
    DotView v;
    v.value = o;
    v.dims = o->shape().dimensions();
    for (int64_t d = 0; d < o->shape().rank(); ++d) v.digits.push_back({d});
    return v;
  }

  static int64_t extent(const DotView& v, int64_t logicalDim) {
    int64_t e = 1;
    for (int64_t d : v.digits[static_cast<size_t>(logicalDim)]) e *= v.dims[static_cast<size_t>(d)];
    return e;
  }

  // Splits the digits of `a`'s dimension da and `b`'s db (same unpadded
  // extent) into their common refinement, so that the dot can pair them one
  // to one: (K/128, 128) and (K/8, 8) both become (K/128, 16, 8). False when
  // the two digit boundaries do not nest.
  static bool refinePair(DotView& a, int64_t da, DotView& b, int64_t db, int64_t size) {
    if (extent(a, da) != size || extent(b, db) != size) return false;
    std::set<int64_t> bounds;
    for (DotView* v : {&a, &b}) {
      const auto& ds = v->digits[static_cast<size_t>(v == &a ? da : db)];
      int64_t inner = 1;
      bounds.insert(1);
      for (auto it = ds.rbegin(); it != ds.rend(); ++it) bounds.insert(inner *= v->dims[static_cast<size_t>(*it)]);
    }
    int64_t prev = 1;
    for (int64_t x : bounds)
      if (x % prev != 0) return false;
      else prev = x;
    for (DotView* v : {&a, &b}) splitDigits(*v, v == &a ? da : db, bounds);
    return true;
  }

  // Splits each digit of logical dimension `d` at the `bounds` (inner
  // products) that fall inside it; the dimensions after it shift.
  static void splitDigits(DotView& v, int64_t d, const std::set<int64_t>& bounds) {
    std::vector<int64_t> ds = v.digits[static_cast<size_t>(d)];
    int64_t inner = 1;
    for (auto it = ds.rbegin(); it != ds.rend(); ++it) {
      const int64_t at = *it, size = v.dims[static_cast<size_t>(at)];
      std::vector<int64_t> parts;  // minor to major
      int64_t lo = inner;
      for (int64_t x : bounds)
        if (x > inner && x < inner * size) parts.push_back(x / lo), lo = x;
      parts.push_back(inner * size / lo);
      inner *= size;
      if (parts.size() == 1) continue;
      const int64_t extra = static_cast<int64_t>(parts.size()) - 1;
      for (auto& g : v.digits)
        for (int64_t& x : g)
          if (x > at) x += extra;
      std::vector<int64_t> sizes(parts.rbegin(), parts.rend());
      v.dims.erase(v.dims.begin() + at);
      v.dims.insert(v.dims.begin() + at, sizes.begin(), sizes.end());
      auto& g = v.digits[static_cast<size_t>(d)];
      auto pos = std::find(g.begin(), g.end(), at);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i <= extra; ++i) idx.push_back(at + i);
      pos = g.erase(pos);
      g.insert(pos, idx.begin(), idx.end());
    }
  }

  // The free digits of `v` in increasing dimension order, provided that is
  // the logical free dimensions' digits in logical order.
  static std::optional<std::vector<int64_t>> freeDigits(const DotView& v, const std::vector<int64_t>& a,
                                                       const std::vector<int64_t>& b) {
    std::vector<int64_t> inOrder, sorted;
    for (int64_t d = 0; d < static_cast<int64_t>(v.digits.size()); ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
        for (int64_t x : v.digits[static_cast<size_t>(d)]) inOrder.push_back(x);
    sorted = inOrder;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != inOrder) return std::nullopt;
    return inOrder;
  }

  // The dot `in` is or fuses: in an output fusion, each dot operand is a
  // parameter or elementwise work on one array parameter of the operand's
  // shape (a prologue: its instructions by name in `side`), and everything
  // after the dot is elementwise on the dot's shape with scalars.
  struct DotSite {
    const Instruction* dot = nullptr;
    int64_t param[2] = {0, 1};  // the operands' parameters (or operand numbers)
    std::map<std::string, int> side;
    // Parameters broadcast along the result's columns (the rhs free
    // dimensions: a bias), and those broadcasts, by name.
    std::set<std::string> columns, columnBroadcasts;
    int64_t columnRank = 0;
  };

  static std::optional<DotSite> dotOf(const Instruction* in) {
    DotSite site;
    if (in->opcode() == Opcode::Dot) {
      site.dot = in;
      return site;
    }
    if (in->opcode() != Opcode::Fusion || in->attrs().fusionKind != hlo::FusionKind::Output || !in->fusedComputation())
      return std::nullopt;
    const Computation& c = *in->fusedComputation();
    const Instruction* dot = nullptr;
    for (const auto& up : c.instructions())
      if (up->opcode() == Opcode::Dot) {
        if (dot) return std::nullopt;
        dot = up.get();
      }
    if (!dot) return std::nullopt;
    site.dot = dot;
    for (int j = 0; j < 2; ++j) {
      const Instruction* o = dot->operand(j);
      const Instruction* param = nullptr;
      std::vector<const Instruction*> stack{o};
      while (!stack.empty()) {
        const Instruction* i = stack.back();
        stack.pop_back();
        if (site.side.count(i->name())) continue;
        if (i->shape().isScalar() && (i->opcode() == Opcode::Parameter || i->opcode() == Opcode::Constant)) continue;
        if (!i->shape().isArray() || i->shape().dimensions() != o->shape().dimensions() ||
            !i->calledComputations().empty() || i->hasSideEffect())
          return std::nullopt;
        site.side[i->name()] = j;
        if (i->opcode() == Opcode::Parameter) {
          if (param) return std::nullopt;
          param = i;
          continue;
        }
        if (i->opcode() == Opcode::Broadcast && i->operand(0)->shape().isScalar()) continue;
        if (!hlo::isElementwise(i->opcode()) || i->opcode() == Opcode::Constant) return std::nullopt;
        for (const Instruction* x : i->operands()) stack.push_back(x);
      }
      if (!param) return std::nullopt;
      site.param[j] = param->attrs().parameterNumber;
    }
    if (site.param[0] == site.param[1]) return std::nullopt;
    const std::vector<int64_t>& dims = dot->shape().dimensions();
    if (!c.root() || c.root()->shape().dimensions() != dims || in->shape().dimensions() != dims ||
        site.side.count(c.root()->name()))
      return std::nullopt;
    const int64_t columnRank = site.columnRank = dot->operand(1)->shape().rank() -
                               static_cast<int64_t>(dot->attrs().dotDims->rhsBatchDimensions.size() +
                                                    dot->attrs().dotDims->rhsContractingDimensions.size());
    std::vector<int64_t> columnDims;
    for (int64_t d = static_cast<int64_t>(dims.size()) - columnRank; d < static_cast<int64_t>(dims.size()); ++d)
      columnDims.push_back(d);
    std::set<std::string> arrayParams;
    for (const auto& up : c.instructions()) {
      const Instruction& i = *up;
      if (&i == dot || site.side.count(i.name())) continue;
      if (!i.calledComputations().empty() || !i.shape().isArray()) return std::nullopt;
      for (const Instruction* x : i.operands())
        if (site.side.count(x->name())) return std::nullopt;  // prologue values read after the dot
      const bool scalar = i.shape().isScalar();
      if (i.opcode() == Opcode::Parameter) {
        if (!scalar) arrayParams.insert(i.name());
        continue;
      }
      if (!scalar && i.shape().dimensions() != dims) return std::nullopt;
      if (i.opcode() == Opcode::Constant && scalar) continue;
      if (i.opcode() == Opcode::Broadcast && i.operand(0)->shape().isScalar()) continue;
      if (i.opcode() == Opcode::Broadcast && i.operand(0)->opcode() == Opcode::Parameter &&
          columnRank > 0 && i.attrs().dimensions == columnDims) {
        site.columns.insert(i.operand(0)->name());
        site.columnBroadcasts.insert(i.name());
        continue;
      }
      if (hlo::isElementwise(i.opcode()) && !i.hasSideEffect()) continue;
      return std::nullopt;
    }
    for (const std::string& p : arrayParams)
      if (!site.columns.count(p)) return std::nullopt;
    // A column parameter is read by its broadcasts only.
    for (const auto& up : c.instructions())
      if (!site.columnBroadcasts.count(up->name()))
        for (const Instruction* x : up->operands())
          if (site.columns.count(x->name())) return std::nullopt;
    return site;
  }

  // A dot over operands stored T(8,128) reads the tiles themselves: the dot
  // is rewritten over the physical arrays (each logical dimension split into
  // its digits, contracting and batch digits refined to pair up), its result
  // [batch, lhs free, rhs free digits] reshaped (and sliced off its padding)
  // to the logical value. Contracting and batch dimensions must be unpadded
  // (the padding is not zero after sunk elementwise work).
  bool tryDot(Instruction* in) {
    std::optional<DotSite> site = dotOf(in);
    if (!site || !in->controlPredecessors().empty() || in->hasSideEffect()) return false;
    const Instruction* dot = site->dot;
    const bool fusion = dot != in;
    const hlo::DotDimensionNumbers& dn = *dot->attrs().dotDims;
    if (dn.lhsBatchDimensions.size() != dn.rhsBatchDimensions.size() ||
        dn.lhsContractingDimensions.size() != dn.rhsContractingDimensions.size())
      return false;
    const int64_t pos[2] = {site->param[0], site->param[1]};
    DotView view[2];
    bool anyPhysical = false;
    for (int j = 0; j < 2; ++j) {
      Instruction* o = in->operand(pos[j]);
      view[j] = logicalView(o);
      auto it = physOf_.find(resolve(o));
      if (it == physOf_.end() || it->second.value->shape().elementType() != o->shape().elementType()) continue;
      auto v = physicalView(it->second);
      if (!v) continue;
      // The MXU streams the lhs along K and the rhs along N: the lanes (the
      // minor physical dimension) must be a contracting dimension of the lhs
      // and a free one of the rhs, or the tiles would be read across their
      // lanes (then the operand's relayout, a transpose, is read instead).
      const int64_t owner = it->second.key.layout().minorToMajor[0];
      const auto& contracting = j == 0 ? dn.lhsContractingDimensions : dn.rhsContractingDimensions;
      const auto& batch = j == 0 ? dn.lhsBatchDimensions : dn.rhsBatchDimensions;
      const bool inContracting = std::find(contracting.begin(), contracting.end(), owner) != contracting.end();
      const bool inBatch = std::find(batch.begin(), batch.end(), owner) != batch.end();
      if (inBatch || inContracting != (j == 0)) continue;
      view[j] = *v;
      anyPhysical = true;
    }
    if (!anyPhysical) return false;
    const Shape& ls = dot->operand(0)->shape();
    auto pairUp = [&](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
      for (size_t i = 0; i < a.size(); ++i)
        if (!refinePair(view[0], a[i], view[1], b[i], ls.dimension(a[i]))) return false;
      return true;
    };
    if (!pairUp(dn.lhsContractingDimensions, dn.rhsContractingDimensions) ||
        !pairUp(dn.lhsBatchDimensions, dn.rhsBatchDimensions))
      return false;
    auto digitList = [&](const DotView& v, const std::vector<int64_t>& ds) {
      std::vector<int64_t> out;
      for (int64_t d : ds)
        for (int64_t x : v.digits[static_cast<size_t>(d)]) out.push_back(x);
      return out;
    };
    hlo::DotDimensionNumbers nd;
    nd.lhsBatchDimensions = digitList(view[0], dn.lhsBatchDimensions);
    nd.rhsBatchDimensions = digitList(view[1], dn.rhsBatchDimensions);
    nd.lhsContractingDimensions = digitList(view[0], dn.lhsContractingDimensions);
    nd.rhsContractingDimensions = digitList(view[1], dn.rhsContractingDimensions);
    auto lf = freeDigits(view[0], dn.lhsBatchDimensions, dn.lhsContractingDimensions);
    auto rf = freeDigits(view[1], dn.rhsBatchDimensions, dn.rhsContractingDimensions);
    if (!lf || !rf) return false;
    std::vector<int64_t> outDims;
    for (int64_t x : nd.lhsBatchDimensions) outDims.push_back(view[0].dims[static_cast<size_t>(x)]);
    for (int64_t x : *lf) outDims.push_back(view[0].dims[static_cast<size_t>(x)]);
    for (int64_t x : *rf) outDims.push_back(view[1].dims[static_cast<size_t>(x)]);
    if (outDims.size() > 8 || view[0].dims.size() > 8 || view[1].dims.size() > 8) return false;
    // The padded logical result: each output dimension is its digits' product.
    std::vector<int64_t> padded;
    auto extents = [&](const DotView& v, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
      for (int64_t d = 0; d < static_cast<int64_t>(v.digits.size()); ++d)
        if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
          padded.push_back(extent(v, d));
    };
    for (int64_t d : dn.lhsBatchDimensions) padded.push_back(extent(view[0], d));
    extents(view[0], dn.lhsBatchDimensions, dn.lhsContractingDimensions);
    extents(view[1], dn.rhsBatchDimensions, dn.rhsContractingDimensions);
    if (padded.size() != static_cast<size_t>(dot->shape().rank())) return false;
    if (!site->columns.empty()) {  // a bias needs unpadded columns
      int64_t columns = 1, logicalColumns = 1;
      for (int64_t x : *rf) columns *= view[1].dims[static_cast<size_t>(x)];
      const std::vector<int64_t>& ds = dot->shape().dimensions();
      for (size_t d = ds.size() - static_cast<size_t>(site->columnRank); d < ds.size(); ++d) logicalColumns *= ds[d];
      if (columns != logicalColumns) return false;
    }

    const hlo::ElementType t = in->shape().elementType();
    Instruction* ops[2];
    for (int j = 0; j < 2; ++j) {
      Instruction* v = view[j].value;
      if (v->shape().dimensions() != view[j].dims) {
        Instruction* r = entry_.addInstruction(Opcode::Reshape, eb_.fresh(in->name() + ".tiles"),
                                               Shape(v->shape().elementType(), view[j].dims).withDefaultLayout());
        r->addOperand(v);
        v = r;
      }
      ops[j] = v;
    }
    Instruction* twin = entry_.addInstruction(in->opcode(), eb_.fresh(in->name() + ".physical"),
                                              Shape(t, outDims).withDefaultLayout());
    if (in->hasAttributes()) twin->attrs() = in->attrs();
    twin->common() = in->common();
    twin->setLocation(in->location());
    // A bias along the columns is read as the rhs free digits (unpadded: a
    // free reshape of the vector).
    std::vector<int64_t> columnDims, columnPositions;
    for (int64_t x : *rf) {
      columnPositions.push_back(static_cast<int64_t>(outDims.size() - rf->size() + columnPositions.size()));
      columnDims.push_back(view[1].dims[static_cast<size_t>(x)]);
    }
    for (int64_t i = 0; i < in->operandCount(); ++i) {
      Instruction* o = i == pos[0] ? ops[0] : i == pos[1] ? ops[1] : in->operand(i);
      const Instruction* param = fusion ? in->fusedComputation()->parameter(i) : nullptr;
      if (param && site->columns.count(param->name())) {
        Instruction* r = entry_.addInstruction(Opcode::Reshape, eb_.fresh(in->name() + ".columns"),
                                               Shape(o->shape().elementType(), columnDims).withDefaultLayout());
        r->addOperand(o);
        o = r;
      }
      twin->addOperand(o);
    }
    if (!fusion) {
      twin->attrs().dotDims = nd;
    } else {
      Computation* body = cloneComputation(module_, *in->fusedComputation(),
                                           freshComputationName(in->fusedComputation()->name() + ".tiles"), "");
      for (const auto& up : body->instructions()) {
        Instruction& i = *up;
        if (i.shape().isScalar()) continue;
        auto side = site->side.find(i.name());
        if (side != site->side.end()) {  // the operand's parameter and prologue
          i.setShape(Shape(i.shape().elementType(), view[side->second].dims).withDefaultLayout());
          continue;
        }
        if (site->columns.count(i.name())) {
          i.setShape(Shape(i.shape().elementType(), columnDims).withDefaultLayout());
          continue;
        }
        if (site->columnBroadcasts.count(i.name())) i.attrs().dimensions = columnPositions;
        i.setShape(Shape(i.shape().elementType(), outDims).withDefaultLayout());
        if (i.opcode() == Opcode::Dot) i.attrs().dotDims = nd;
      }
      twin->addCalledComputation(body);
    }
    Instruction* value = twin;
    if (outDims != padded) {
      value = entry_.addInstruction(Opcode::Reshape, eb_.fresh(in->name() + ".logical"), Shape(t, padded).withDefaultLayout());
      value->addOperand(twin);
    }
    if (padded != in->shape().dimensions()) {
      Instruction* s = entry_.addInstruction(Opcode::Slice, eb_.fresh(in->name() + ".logical"),
                                             Shape(t, in->shape().dimensions()).withDefaultLayout());
      s->addOperand(value);
      std::vector<hlo::SliceDimension> sl;
      for (int64_t d : in->shape().dimensions()) sl.push_back({0, d, 1});
      s->attrs().slice = std::move(sl);
      value = s;
    }
    value->setShape(in->shape());
    const std::string name = in->name();
    Computation* oldBody = fusion ? in->fusedComputation() : nullptr;
    replaceInstruction(in, value);
    twin->setName(name);
    bool called = false;  // a fused computation is its fusion's own, but make sure
    for (const auto& c : module_.computations())
      for (const auto& i : c->instructions())
        for (Computation* callee : i->calledComputations()) called = called || callee == oldBody;
    if (oldBody && !called) module_.removeComputation(oldBody);
    ++dotsOnTiles_;
    return true;
  }

  std::string freshComputationName(const std::string& base) const {
    std::string name = base;
    for (int i = 1; module_.findComputation(name); ++i) name = fmt::format("{}.{}", base, i);
    return name;
  }

  // A convolution (or its output fusion) over physical activations reads
  // them in place (physical_conv.cpp); its result is physical when its
  // layout lets the kernel write it so, else the logical value.
  bool tryConvolution(Instruction* in) {
    auto lookup = [&](Instruction* o) -> const Physical* {
      auto it = physOf_.find(resolve(o));
      return it == physOf_.end() ? nullptr : &it->second;
    };
    ConvTwin t =
        physicalConvolution(module_, entry_, in, lookup, [&](const std::string& b) { return eb_.fresh(b); });
    if (!t.twin) return false;
    ++convsOnTiles_;
    if (t.physicalResult) {
      members_.push_back(in);
      twins_.insert(t.twin);
      physOf_[in] = {t.twin, in->shape()};
      return true;
    }
    const std::string name = in->name();
    Computation* oldBody = in->opcode() == Opcode::Fusion ? in->fusedComputation() : nullptr;
    replaceInstruction(in, t.twin);
    t.twin->setName(name);
    if (oldBody) module_.removeComputation(oldBody);  // a fused computation is its fusion's own
    return true;
  }

 public:
  int64_t dotsOnTiles_ = 0;   // dots rewritten to read their operands' tiles
  int64_t convsOnTiles_ = 0;  // convolutions rewritten to read their activations' tiles

 private:
  void tryMember(Instruction* in) {
    const Shape& shape = in->shape();
    if (!shape.isArray() || shape.isScalar() || in->hasSideEffect() || !in->controlPredecessors().empty()) return;
    if (tryRowFusion(in)) return;
    if (tryBitcast(in)) return;
    if (tryDot(in)) return;
    if (tryConvolution(in)) return;
    const bool elementwise = hlo::isElementwise(in->opcode()) && in->calledComputations().empty();
    const bool fusion = in->opcode() == Opcode::Fusion && in->fusedComputation() &&
                        agnosticBody(*in->fusedComputation(), shape.dimensions());
    if (!elementwise && !fusion) return;
    // Operands: physical in one arrangement, scalars, or broadcasts of scalars.
    const Physical* first = nullptr;
    for (Instruction* o : in->operands()) {
      if (!o->shape().isArray()) return;
      if (o->shape().isScalar()) continue;
      auto it = physOf_.find(resolve(o));
      if (it != physOf_.end()) {
        if (first && !sameArrangement(first->key, it->second.key)) return;
        if (!first) first = &it->second;
        continue;
      }
      if (o->opcode() == Opcode::Broadcast && o->operand(0)->shape().isScalar()) continue;
      if (o->opcode() == Opcode::Constant && !o->literal().isElided()) continue;
      return;
    }
    if (!first) return;
    const Shape key = first->key;
    const std::vector<int64_t> dims = first->value->shape().dimensions();
    auto resultDims = physicalDims(withType(key, shape.elementType()));
    if (!resultDims || *resultDims != dims) return;
    // Every element type inside a fusion must take the same arrangement.
    if (fusion)
      for (const auto& up : in->fusedComputation()->instructions())
        if (!up->shape().isScalar() && physicalDims(withType(key, up->shape().elementType())) != dims) return;

    Instruction* n = entry_.addInstruction(in->opcode(), eb_.fresh(in->name() + ".physical"),
                                           Shape(shape.elementType(), dims).withDefaultLayout());
    if (in->hasAttributes()) n->attrs() = in->attrs();
    n->common() = in->common();
    n->setLocation(in->location());
    for (Instruction* o : in->operands()) {
      if (o->shape().isScalar()) {
        n->addOperand(o);
      } else if (auto it = physOf_.find(resolve(o)); it != physOf_.end()) {
        n->addOperand(it->second.value);
      } else if (o->opcode() == Opcode::Constant) {
        Instruction* c = entry_.addInstruction(Opcode::Constant, eb_.fresh(o->name() + ".physical"),
                                               Shape(o->shape().elementType(), dims).withDefaultLayout());
        c->attrs().literal = convertEdgeLiteral(o->literal(), withType(key, o->shape().elementType()), true);
        c->common() = o->common();
        c->setLocation(o->location());
        extra_.push_back(c);
        n->addOperand(c);
      } else {  // a broadcast scalar, broadcast to the physical dimensions
        Instruction* b = entry_.addInstruction(Opcode::Broadcast, eb_.fresh(o->name() + ".physical"),
                                               Shape(o->shape().elementType(), dims).withDefaultLayout());
        b->addOperand(o->operand(0));
        b->common() = o->common();
        b->setLocation(o->location());
        extra_.push_back(b);
        n->addOperand(b);
      }
    }
    if (fusion) n->addCalledComputation(physicalBody(*in->fusedComputation(), key, dims));
    members_.push_back(in);
    twins_.insert(n);
    physOf_[in] = {n, key};
  }

  // A row fusion (softmax, layer norm) over its operands' tiles (physical_reduce.h).
  bool tryRowFusion(Instruction* in) {
    auto lookup = [&](Instruction* v) -> std::optional<PhysicalValue> {
      auto it = physOf_.find(resolve(v));
      if (it == physOf_.end()) return std::nullopt;
      return PhysicalValue{it->second.value, it->second.key};
    };
    auto r =
        rowFusionOnTiles(module_, entry_, in, lookup, [&](const std::string& b) { return eb_.fresh(b); });
    if (!r) return false;
    members_.push_back(in);
    twins_.insert(r->twin);
    physOf_[in] = {r->twin, r->key};
    extra_.insert(extra_.end(), r->added.begin(), r->added.end());
    return true;
  }

  // A copy of fused computation `c` over arrays of the physical `dims`.
  Computation* physicalBody(const Computation& c, const Shape& key, const std::vector<int64_t>& dims) {
    std::string name = c.name() + ".physical";
    for (int i = 1; module_.findComputation(name); ++i) name = fmt::format("{}.physical.{}", c.name(), i);
    Computation* copy = cloneComputation(module_, c, name, "");
    for (const auto& up : copy->instructions()) {
      up->setName(eb_.fresh(up->name() + ".physical"));
      if (up->shape().isScalar()) continue;
      if (up->opcode() == Opcode::Constant)
        up->attrs().literal = convertEdgeLiteral(up->literal(), withType(key, up->shape().elementType()), true);
      up->setShape(Shape(up->shape().elementType(), dims).withDefaultLayout());
    }
    return copy;
  }

  hlo::Module& module_;
  Computation& entry_;
  EdgeBuilder& eb_;
  std::map<Instruction*, Physical> physOf_;
  std::vector<Instruction*> members_;  // the logical instructions that got a physical twin, in order
  std::set<Instruction*> twins_;       // the instructions added as physical twins

 public:
  std::vector<Instruction*> extra_;  // broadcasts added for physical members
};

}  // namespace

bool expandPhysicalBitcasts(hlo::Module& module) {
  std::set<std::string> names = instructionNames(module);
  bool changed = false;
  for (const auto& cp : module.computations()) {
    Computation& c = *cp;
    std::vector<Instruction*> casts;
    for (const auto& up : c.instructions())
      if (isPhysicalBitcast(*up)) casts.push_back(up.get());
    EdgeBuilder eb(c, names);
    for (Instruction* b : casts) {
      Instruction* x = b->operand(0);
      auto dims = physicalDims(b->shape());
      const bool toLogical = dims && x->shape().dimensions() == *dims;
      Instruction* r =
          toLogical ? eb.toLogical(x, b->shape(), b->name()) : eb.toPhysical(x, x->shape(), b->name());
      r->setShape(b->shape());
      replaceInstruction(b, r);
    }
    if (!casts.empty()) c.sortTopologically(), changed = true;
  }
  return changed;
}

bool PhysicalEdgesPass::run(hlo::Module& module, DiagnosticEngine&) {
  Computation* entry = module.entry();
  if (!entry || !entry->root()) return false;
  const std::vector<std::vector<bool>> params = physicalParameterLeaves(module, pod_);
  const std::vector<bool> results = physicalResultLeaves(module, pod_);
  hlo::ComputationLayout layout = module.entryComputationLayout();
  bool any = std::find(results.begin(), results.end(), true) != results.end();
  for (const auto& p : params) any = any || std::find(p.begin(), p.end(), true) != p.end();
  if (!any) return false;
  std::set<std::string> names = instructionNames(module);
  EdgeBuilder eb(*entry, names);
  RelayoutSinker sinker(module, *entry, eb);
  PhysicalEdgeReport report;
  auto note = [&](const Shape& s) { report.paddingBytes += physicalByteSize(s) - s.byteSize().value_or(0); };
  std::vector<std::pair<Instruction*, std::string>> argumentRelayouts;  // to-logical value, parameter name
  std::vector<std::string> resultRelayouts;
  // The physical shape of `s` (physical leaves flagged in order from `k`).
  std::function<Shape(const Shape&, const std::vector<bool>&, size_t&)> physShape =
      [&](const Shape& s, const std::vector<bool>& flags, size_t& k) -> Shape {
    if (s.isTuple()) {
      std::vector<Shape> es;
      for (const Shape& e : s.tupleElements()) es.push_back(physShape(e, flags, k));
      return Shape::tuple(std::move(es));
    }
    if (!s.isArray()) return s;
    if (!flags[k++]) return s;
    return Shape(s.elementType(), *physicalDims(s)).withDefaultLayout();
  };
  hlo::ComputationLayout newLayout = layout;

  // Parameters: the physical parameter, converted to the logical value its users read.
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<bool>& flags = params[i];
    if (std::find(flags.begin(), flags.end(), true) == flags.end()) continue;
    Instruction* old = entry->parameter(static_cast<int64_t>(i));
    if (!old) continue;
    size_t k = 0;
    Shape phys = physShape(layout.parameters[i], flags, k);
    std::string oldName = old->name();
    Instruction* param = entry->addInstruction(Opcode::Parameter, eb.fresh(oldName + ".physical"), phys);
    param->attrs().parameterNumber = static_cast<int64_t>(i);
    param->setLocation(old->location());
    k = 0;
    std::function<Instruction*(Instruction*, const Shape&, const std::string&)> logical =
        [&](Instruction* v, const Shape& s, const std::string& base) -> Instruction* {
      if (s.isTuple()) {
        std::vector<Instruction*> es;
        std::vector<Shape> shapes;
        for (size_t e = 0; e < s.tupleElements().size(); ++e) {
          Instruction* g = entry->addInstruction(Opcode::GetTupleElement, eb.fresh(base),
                                                 v->shape().tupleElements()[e]);
          g->addOperand(v);
          g->attrs().tupleIndex = static_cast<int64_t>(e);
          eb.created_.push_back(g);
          es.push_back(logical(g, s.tupleElements()[e], base));
          shapes.push_back(es.back()->shape());
        }
        Instruction* tup = entry->addInstruction(Opcode::Tuple, eb.fresh(base), Shape::tuple(shapes));
        for (Instruction* e : es) tup->addOperand(e);
        eb.created_.push_back(tup);
        return tup;
      }
      if (!s.isArray() || !flags[k++]) return v;
      note(s);
      ++report.arguments;
      Instruction* r = eb.fused(v, s, oldName + ".relayout", false);
      sinker.setPhysical(r, v, s);
      argumentRelayouts.push_back({r, oldName});
      return r;
    };
    Instruction* value = logical(param, layout.parameters[i], oldName + ".relayout");
    if (value == param) continue;  // cannot happen: some leaf is physical
    value->setShape(old->shape());  // the logical value keeps the layout its users were given
    replaceInstruction(old, value);
    param->setName(oldName);
    newLayout.parameters[i] = phys;
  }

  // Layout-agnostic work runs on the physical arrays; the results it gives
  // in their own arrangement need no relayout.
  sinker.propagate();

  // Results: the root's physical leaves converted last.
  if (std::find(results.begin(), results.end(), true) != results.end()) {
    Instruction* root = entry->root();
    size_t k = 0;
    const std::string base = root->name() + ".relayout";
    std::function<Instruction*(Instruction*, const Shape&)> physical = [&](Instruction* v,
                                                                          const Shape& s) -> Instruction* {
      if (s.isTuple()) {
        std::vector<Instruction*> es;
        std::vector<Shape> shapes;
        for (size_t e = 0; e < s.tupleElements().size(); ++e) {
          // A tuple instruction's operands are its leaves (named as the user wrote them).
          Instruction* g = v->opcode() == Opcode::Tuple && v->operandCount() == static_cast<int64_t>(s.tupleElements().size())
                               ? v->operand(static_cast<int64_t>(e))
                               : nullptr;
          if (!g) {
            g = entry->addInstruction(Opcode::GetTupleElement, eb.fresh(base), v->shape().tupleElements()[e]);
            g->addOperand(v);
            g->attrs().tupleIndex = static_cast<int64_t>(e);
          }
          es.push_back(physical(g, s.tupleElements()[e]));
          shapes.push_back(es.back()->shape());
        }
        Instruction* tup = entry->addInstruction(Opcode::Tuple, eb.fresh(base), Shape::tuple(shapes));
        for (Instruction* e : es) tup->addOperand(e);
        return tup;
      }
      if (!s.isArray() || !results[k++]) return v;
      note(s);
      ++report.results;
      if (Instruction* direct = sinker.physicalFor(v, s)) return direct;
      resultRelayouts.push_back(v->name());
      return eb.fused(v, s, v->name() + ".relayout", true);
    };
    Instruction* newRoot = physical(root, layout.result);
    entry->setRoot(newRoot);
    if (root->opcode() == Opcode::Tuple && root->controlPredecessors().empty()) {
      bool used = false;
      for (const auto& in : entry->instructions())
        for (int64_t o = 0; o < in->operandCount() && !used; ++o) used = in->operand(o) == root;
      for (const auto& in : entry->instructions())
        for (Instruction* p : in->controlPredecessors()) used = used || p == root;
      if (!used) entry->removeInstruction(root);
    }
    size_t k2 = 0;
    newLayout.result = physShape(layout.result, results, k2);
  }
  std::vector<std::string> moved = sinker.rewire();
  std::vector<Instruction*> removable = eb.created_;
  removable.insert(removable.end(), sinker.extra_.begin(), sinker.extra_.end());
  sinker.removeDead(removable);
  std::set<const Instruction*> alive;
  for (const auto& in : entry->instructions()) alive.insert(in.get());
  for (const auto& [value, name] : argumentRelayouts)
    if (alive.count(value)) report.names.push_back(name);
  report.names.insert(report.names.end(), moved.begin(), moved.end());
  report.names.insert(report.names.end(), resultRelayouts.begin(), resultRelayouts.end());
  if (module.config().entryComputationLayout) module.config().entryComputationLayout = newLayout;
  entry->sortTopologically();
  if (report_) *report_ = report;
  return true;
}

}  // namespace tpu::passes::layout
