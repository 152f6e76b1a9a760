#include "passes/layout/physical_reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "hlo/computation.h"
#include "passes/clone.h"
#include "passes/layout/physical_layout.h"

namespace tpu::passes::layout {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

// The values of a row fusion: Full (the rows' shape), Row (one value per
// row: a reduce over the last dimension, elementwise work on such values),
// Vec (a parameter shaped like one row, broadcast along the rows), Scalar.
enum class Kind { Scalar, Full, Row, Vec };

// The kind of each instruction of `c` when it is a row fusion over rows of
// `full` (reduced over the last dimension, row values broadcast back only
// along it); nullopt otherwise.
std::optional<std::map<const Instruction*, Kind>> classify(const Computation& c,
                                                           const std::vector<int64_t>& full) {
  const int64_t rank = static_cast<int64_t>(full.size());
  const std::vector<int64_t> rowDims(full.begin(), full.end() - 1), vecDims{full.back()};
  std::vector<int64_t> kept(static_cast<size_t>(rank - 1));
  for (int64_t d = 0; d + 1 < rank; ++d) kept[static_cast<size_t>(d)] = d;
  std::map<const Instruction*, Kind> kind;
  bool reduces = false;
  // Operands come first (a fused computation is in topological order);
  // anything else is not a row fusion.
  auto kindOf = [&](const Instruction* o) {
    auto it = kind.find(o);
    return it == kind.end() ? std::optional<Kind>() : std::optional<Kind>(it->second);
  };
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    const Shape& s = i.shape();
    if (!s.isArray() || !i.controlPredecessors().empty() || i.hasSideEffect()) return std::nullopt;
    const std::vector<int64_t>& d = s.dimensions();
    Kind k = Kind::Scalar;
    switch (i.opcode()) {
      case Opcode::Parameter:
        if (s.isScalar())
          k = Kind::Scalar;
        else if (d == full)
          k = Kind::Full;
        else if (d == vecDims)
          k = Kind::Vec;
        else
          return std::nullopt;
        break;
      case Opcode::Constant:
        if (!s.isScalar()) return std::nullopt;
        break;
      case Opcode::Broadcast: {
        if (i.operandCount() != 1 || !kindOf(i.operand(0))) return std::nullopt;
        const Kind a = *kindOf(i.operand(0));
        const std::vector<int64_t>& bd = i.attrs().dimensions;
        if (a == Kind::Scalar && (s.isScalar() || d == full || d == rowDims)) {
          k = s.isScalar() ? Kind::Scalar : d == full ? Kind::Full : Kind::Row;
        } else if (a == Kind::Row && d == full && bd == kept) {
          k = Kind::Full;
        } else if (a == Kind::Vec && d == full && bd == std::vector<int64_t>{rank - 1} &&
                   i.operand(0)->opcode() == Opcode::Parameter) {
          k = Kind::Full;
        } else {
          return std::nullopt;
        }
        break;
      }
      case Opcode::Reduce:
        if (i.operandCount() != 2 || !i.toApply() || kindOf(i.operand(0)) != Kind::Full ||
            kindOf(i.operand(1)) != Kind::Scalar || i.attrs().dimensions != std::vector<int64_t>{rank - 1} ||
            d != rowDims)
          return std::nullopt;
        k = Kind::Row;
        reduces = true;
        break;
      default: {
        if (!hlo::isElementwise(i.opcode()) || !i.calledComputations().empty() || i.opcode() == Opcode::Rng ||
            i.operandCount() == 0)
          return std::nullopt;
        for (const Instruction* o : i.operands()) {
          if (!kindOf(o)) return std::nullopt;
          const Kind a = *kindOf(o);
          if (a == Kind::Vec || (a != Kind::Scalar && k != Kind::Scalar && a != k)) return std::nullopt;
          if (a != Kind::Scalar) k = a;
        }
        if ((k == Kind::Scalar && !s.isScalar()) || (k == Kind::Full && d != full) ||
            (k == Kind::Row && d != rowDims))
          return std::nullopt;
      }
    }
    kind[&i] = k;
  }
  if (!reduces || !c.root() || kindOf(c.root()) != Kind::Full) return std::nullopt;
  return kind;
}

// The rows of `key` are tiles: one T(8,128) tile over a minor_to_major whose
// minor dimension is the last (reduced) one, whole tiles of lanes.
bool tiledRows(const Shape& key) {
  if (!key.isArray() || !key.hasLayout() || key.rank() < 2) return false;
  const hlo::Layout& l = key.layout();
  return l.tiles.size() == 1 && l.tiles[0].dimensions == std::vector<int64_t>{8, 128} &&
         !l.minorToMajor.empty() && l.minorToMajor[0] == key.rank() - 1 &&
         key.dimensions().back() % 128 == 0 && l.elementSizeInBits == 0;
}

}  // namespace

std::optional<RowFusionTwin> rowFusionOnTiles(
    hlo::Module& module, Computation& entry, Instruction* in,
    const std::function<std::optional<PhysicalValue>(Instruction*)>& physicalOf,
    const std::function<std::string(const std::string&)>& fresh) {
  if (in->opcode() != Opcode::Fusion || !in->fusedComputation() || !in->shape().isArray() ||
      !in->controlPredecessors().empty())
    return std::nullopt;
  const Computation& body = *in->fusedComputation();
  const std::vector<int64_t>& full = in->shape().dimensions();
  if (full.size() < 2) return std::nullopt;
  auto kinds = classify(body, full);
  if (!kinds) return std::nullopt;
  // The Full operands: physical in one tiled arrangement of the rows.
  std::optional<PhysicalValue> first;
  std::map<int64_t, Instruction*> physicalOperand;  // parameter number -> its physical array
  for (const auto& up : body.instructions()) {
    const Instruction& p = *up;
    if (p.opcode() != Opcode::Parameter || kinds->at(&p) != Kind::Full) continue;
    const int64_t n = p.attrs().parameterNumber;
    if (n < 0 || n >= in->operandCount()) return std::nullopt;
    auto ph = physicalOf(in->operand(n));
    if (!ph || ph->value->shape().elementType() != p.shape().elementType() || !tiledRows(ph->key))
      return std::nullopt;
    if (first && !sameArrangement(first->key, ph->key)) return std::nullopt;
    if (!first) first = ph;
    physicalOperand[n] = ph->value;
  }
  if (!first) return std::nullopt;
  const Shape key = withType(first->key, in->shape().elementType());
  const std::vector<int64_t> phys = first->value->shape().dimensions();
  auto keyDims = physicalDims(key);
  const size_t n = phys.size();
  if (!keyDims || *keyDims != phys || n < 4 || n > 8 || phys[n - 1] != 128 || phys[n - 2] != 8 ||
      phys[n - 3] * 128 != full.back())
    return std::nullopt;
  for (const auto& [i, k] : *kinds)  // every element type inside takes the same arrangement
    if (k == Kind::Full && physicalDims(withType(key, i->shape().elementType())) != phys) return std::nullopt;
  // Physical row values drop the lane digits (b/128, 128); rows are the rest.
  std::vector<int64_t> rowPhys, keptPhys;
  for (size_t d = 0; d < n; ++d)
    if (d != n - 3 && d != n - 1) rowPhys.push_back(phys[d]), keptPhys.push_back(static_cast<int64_t>(d));
  const std::vector<int64_t> vecPhys{phys[n - 3], 128},
      lanes{static_cast<int64_t>(n - 3), static_cast<int64_t>(n - 1)};

  RowFusionTwin out;
  out.key = key;
  Instruction* twin = entry.addInstruction(Opcode::Fusion, fresh(in->name() + ".physical"),
                                           Shape(in->shape().elementType(), phys).withDefaultLayout());
  if (in->hasAttributes()) twin->attrs() = in->attrs();
  twin->common() = in->common();
  twin->setLocation(in->location());
  for (int64_t i = 0; i < in->operandCount(); ++i) {
    Instruction* o = in->operand(i);
    if (auto it = physicalOperand.find(i); it != physicalOperand.end()) {
      twin->addOperand(it->second);
    } else if (o->shape().isArray() && o->shape().dimensions() == std::vector<int64_t>{full.back()}) {
      // A row vector v[b] read as [b/128, 128]: a free reshape of the logical
      // vector, or of its physical form when that is the same elements in
      // order (one tile of one dimension, no padding: T(256) of 4096).
      Instruction* v = o;
      if (auto ph = physicalOf(o); ph && ph->key.layout().tiles.size() == 1 &&
                                   ph->key.layout().tiles[0].dimensions.size() == 1 &&
                                   ph->value->shape().elementType() == o->shape().elementType() &&
                                   ph->value->shape().elementCount() == std::optional<int64_t>(full.back()))
        v = ph->value;
      Instruction* r = entry.addInstruction(Opcode::Reshape, fresh(o->name() + ".tiles"),
                                            Shape(o->shape().elementType(), vecPhys).withDefaultLayout());
      r->addOperand(v);
      out.added.push_back(r);
      twin->addOperand(r);
    } else {
      twin->addOperand(o);
    }
  }
  std::string name = body.name() + ".tiles";
  for (int i = 1; module.findComputation(name); ++i) name = fmt::format("{}.tiles.{}", body.name(), i);
  Computation* copy = cloneComputation(module, body, name, "");
  std::map<std::string, Kind> byName;  // the copy keeps the instruction names
  for (const auto& [i, k] : *kinds) byName[i->name()] = k;
  for (const auto& up : copy->instructions()) {
    Instruction& i = *up;
    const Kind k = byName.at(i.name());
    if (i.opcode() == Opcode::Reduce) i.attrs().dimensions = lanes;
    if (i.opcode() == Opcode::Broadcast && !i.operand(0)->shape().isScalar())
      i.attrs().dimensions = byName.at(i.operand(0)->name()) == Kind::Vec ? lanes : keptPhys;
    const hlo::ElementType t = i.shape().elementType();
    if (k == Kind::Full) i.setShape(Shape(t, phys).withDefaultLayout());
    if (k == Kind::Row) i.setShape(Shape(t, rowPhys).withDefaultLayout());
    if (k == Kind::Vec) i.setShape(Shape(t, vecPhys).withDefaultLayout());
  }
  for (const auto& up : copy->instructions()) up->setName(fresh(up->name() + ".tiles"));
  twin->addCalledComputation(copy);
  out.twin = twin;
  return out;
}

}  // namespace tpu::passes::layout
