// algsimp rules for data movement and type changes: convert, copy,
// reshape, transpose, broadcast, slice, concatenate, pad, reverse, and the
// layout-sensitive bitcast rewrites. All of them are exact: they only
// change which instructions move the same elements.
#include <algorithm>
#include <numeric>
#include <utility>

#include "passes/simplify/algsimp_internal.h"

namespace tpu::passes::simplify {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

bool isIdentityPermutation(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::vector<int64_t> inversePermutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

// Digits of precision of a float type, magnitude bits of an integer type.
int significantBits(ElementType t) {
  switch (t) {
    case ElementType::F16: return 11;
    case ElementType::BF16: return 8;
    case ElementType::F32: return 24;
    case ElementType::F64: return 53;
    default: break;
  }
  if (hlo::isIntegerType(t)) return hlo::elementTypeInfo(t).bitWidth - (hlo::isSignedIntegerType(t) ? 1 : 0);
  return 0;
}

// Whether converting every value of `from` to `to` is exact (so a later
// convert sees the same value either way).
bool losslessConvert(ElementType from, ElementType to) {
  if (from == to) return true;
  if (from == ElementType::Pred) return hlo::isIntegerType(to) || hlo::isFloatType(to);
  if (hlo::isFloatType(from) && hlo::isFloatType(to)) {
    bool narrow = from == ElementType::F16 || from == ElementType::BF16 || hlo::elementTypeInfo(from).floatFormat;
    if (to == ElementType::F64) return from != ElementType::F64;
    if (to == ElementType::F32) return narrow;
    return false;
  }
  if (hlo::isIntegerType(from) && hlo::isIntegerType(to)) {
    bool fromSigned = hlo::isSignedIntegerType(from), toSigned = hlo::isSignedIntegerType(to);
    if (fromSigned && !toSigned) return false;
    return significantBits(to) >= significantBits(from);
  }
  if (hlo::isIntegerType(from) && (to == ElementType::F16 || to == ElementType::BF16 || to == ElementType::F32 ||
                                   to == ElementType::F64))
    return significantBits(to) >= significantBits(from);
  return false;
}

// For a reshape from `from` to `to` that only inserts or deletes size-1
// dimensions: the index in `to` of each dimension of `from` of size > 1
// (-1 for size-1 ones). Nullopt for any other reshape.
std::optional<std::vector<int64_t>> degenerateReshapeMap(const Shape& from, const Shape& to) {
  std::vector<int64_t> map(static_cast<size_t>(from.rank()), -1);
  int64_t j = 0;
  for (int64_t i = 0; i < from.rank(); ++i) {
    if (from.dimension(i) == 1) continue;
    while (j < to.rank() && to.dimension(j) == 1) ++j;
    if (j == to.rank() || to.dimension(j) != from.dimension(i)) return std::nullopt;
    map[static_cast<size_t>(i)] = j++;
  }
  while (j < to.rank() && to.dimension(j) == 1) ++j;
  if (j != to.rank()) return std::nullopt;
  return map;
}

bool hasPlainLayout(const Shape& s) { return s.isArray() && s.hasLayout() && s.layout().isPlain(); }

// Physical (minor_to_major) offset of a multi-index.
int64_t physicalOffset(const Shape& s, const std::vector<int64_t>& index) {
  int64_t offset = 0, stride = 1;
  for (int64_t d : s.layout().minorToMajor) {
    offset += index[static_cast<size_t>(d)] * stride;
    stride *= s.dimension(d);
  }
  return offset;
}

// The multi-index of row-major linear index `linear`.
std::vector<int64_t> logicalIndex(const Shape& s, int64_t linear) {
  std::vector<int64_t> index(static_cast<size_t>(s.rank()));
  for (int64_t d = s.rank() - 1; d >= 0; --d) {
    index[static_cast<size_t>(d)] = linear % s.dimension(d);
    linear /= s.dimension(d);
  }
  return index;
}

// A reshape between these layouts moves no byte: every unit index of
// either side lands on the same physical offset in the other.
bool reshapeIsBitcast(const Shape& from, const Shape& to) {
  if (!hasPlainLayout(from) || !hasPlainLayout(to) || from.elementType() != to.elementType()) return false;
  for (const auto& [a, b] : {std::pair{&from, &to}, std::pair{&to, &from}}) {
    int64_t stride = 1;
    for (int64_t d = a->rank() - 1; d >= 0; --d) {
      if (a->dimension(d) > 1) {
        std::vector<int64_t> unit(static_cast<size_t>(a->rank()), 0);
        unit[static_cast<size_t>(d)] = 1;
        if (physicalOffset(*a, unit) != physicalOffset(*b, logicalIndex(*b, stride))) return false;
      }
      stride *= a->dimension(d);
    }
  }
  return true;
}

// A transpose between these layouts moves no byte.
bool transposeIsBitcast(const Shape& from, const Shape& to, const std::vector<int64_t>& perm) {
  if (!hasPlainLayout(from) || !hasPlainLayout(to) || from.elementType() != to.elementType()) return false;
  const std::vector<int64_t>& in = from.layout().minorToMajor;
  const std::vector<int64_t>& out = to.layout().minorToMajor;
  for (size_t i = 0; i < out.size(); ++i)
    if (in[i] != perm[static_cast<size_t>(out[i])]) return false;
  return true;
}

}  // namespace

Instruction* Simplifier::simplifyConvert(Instruction& in) {
  Instruction* x = in.operand(0);
  ElementType to = in.shape().elementType();
  if (x->shape().elementType() == to) return ifSameShape(in, x);
  if (x->opcode() == Opcode::Convert) {
    Instruction* source = x->operand(0);
    if (losslessConvert(source->shape().elementType(), x->shape().elementType())) {
      if (source->shape().elementType() == to) return ifSameShape(in, source);
      rw_.setOperand(&in, 0, source);
      return &in;
    }
  }
  // Between integer types of one width (s32 <-> u32) a convert keeps every
  // bit (two's complement wraps): a bitcast-convert, which moves no data
  // (llo-gen renames the buffer; an index convert no longer costs a kernel).
  const ElementType from = x->shape().elementType();
  if (hlo::isIntegerType(from) && hlo::isIntegerType(to) && from != ElementType::Pred &&
      hlo::elementTypeInfo(from).bitWidth >= 8 && hlo::elementTypeInfo(from).bitWidth == hlo::elementTypeInfo(to).bitWidth)
    return add(in, Opcode::BitcastConvert, in.shape(), {x});
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyCopy(Instruction& in) {
  Instruction* x = in.operand(0);
  if (x->shape() == in.shape()) return x;
  if (x->opcode() == Opcode::Copy) {
    if (x->operand(0)->shape() == in.shape()) return x->operand(0);
    rw_.setOperand(&in, 0, x->operand(0));
    return &in;
  }
  // A copy between layouts that order the elements alike (they differ in
  // size-1 dimensions only) moves no byte.
  if (options_.layoutSensitive && reshapeIsBitcast(x->shape(), in.shape()))
    return add(in, Opcode::Bitcast, in.shape(), {x});
  return nullptr;
}

Instruction* Simplifier::simplifyReshape(Instruction& in) {
  Instruction* x = in.operand(0);
  if (x->shape() == in.shape()) return x;
  if (x->opcode() == Opcode::Reshape) {
    if (x->operand(0)->shape() == in.shape()) return x->operand(0);
    rw_.setOperand(&in, 0, x->operand(0));
    return &in;
  }
  if (x->opcode() == Opcode::Broadcast) {
    Instruction* y = x->operand(0);
    if (y->shape().isScalar()) return broadcast(in, y, in.shape(), {});
    // Only size-1 dimensions come or go: the broadcast maps to the new shape.
    if (auto map = degenerateReshapeMap(x->shape(), in.shape())) {
      std::vector<int64_t> dims;
      for (int64_t d : x->attrs().dimensions) {
        int64_t to = (*map)[static_cast<size_t>(d)];
        if (to < 0) return nullptr;  // a mapped size-1 dimension goes away
        dims.push_back(to);
      }
      return broadcast(in, y, in.shape(), dims);
    }
  }
  return simplifyBitcastCandidates(in);
}

Instruction* Simplifier::simplifyTranspose(Instruction& in) {
  Instruction* x = in.operand(0);
  // Reads through const: the mutable accessor would unshare a block the
  // parser shares between equal instructions.
  const std::vector<int64_t>& perm = std::as_const(in).attrs().dimensions;
  if (isIdentityPermutation(perm)) return ifSameShape(in, x);
  if (Instruction* iota = viewOfIota(in)) return iota;
  if (x->opcode() == Opcode::Transpose) {
    const std::vector<int64_t>& inner = std::as_const(*x).attrs().dimensions;
    std::vector<int64_t> composed;
    for (int64_t d : perm) composed.push_back(inner[static_cast<size_t>(d)]);
    if (isIdentityPermutation(composed) && x->operand(0)->shape() == in.shape()) return x->operand(0);
    // (An identity permutation to another layout stays: it is a copy.)
    rw_.setOperand(&in, 0, x->operand(0));
    in.attrs().dimensions = composed;
    return &in;
  }
  if (x->opcode() == Opcode::Broadcast) {
    // transpose(broadcast(y)) is a broadcast when y's dimensions keep their order.
    std::vector<int64_t> inv = inversePermutation(perm);
    std::vector<int64_t> dims;
    for (int64_t d : std::as_const(*x).attrs().dimensions) dims.push_back(inv[static_cast<size_t>(d)]);
    if (std::is_sorted(dims.begin(), dims.end())) return broadcast(in, x->operand(0), in.shape(), dims);
  }
  // Moving only size-1 dimensions keeps the row-major element order.
  std::vector<int64_t> nonDegenerate;
  for (int64_t d : perm)
    if (x->shape().dimension(d) != 1) nonDegenerate.push_back(d);
  if (std::is_sorted(nonDegenerate.begin(), nonDegenerate.end())) return reshape(in, x, in.shape());
  // transpose(dot(a, b)) = dot(b, a) for matrices: same products, same order.
  const hlo::InstructionAttributes& xa = std::as_const(*x).attrs();
  if (x->opcode() == Opcode::Dot && x->shape().rank() == 2 && rw_.hasSingleUse(x) && !xa.sparsity &&
      x->operandCount() == 2 && xa.dotDims->lhsBatchDimensions.empty()) {
    const hlo::DotDimensionNumbers& dn = *xa.dotDims;
    if (dn.lhsContractingDimensions.size() != 1 || x->operand(0)->shape().rank() != 2 ||
        x->operand(1)->shape().rank() != 2)
      return simplifyBitcastCandidates(in);
    Instruction* swapped = rw_.addLike(*x, in.shape(), {x->operand(1), x->operand(0)});
    hlo::DotDimensionNumbers& sd = swapped->attrs().dotDims.mutate();
    std::swap(sd.lhsContractingDimensions, sd.rhsContractingDimensions);
    hlo::PrecisionConfig pc = *xa.precision;
    if (pc.operandPrecision.size() == 2) std::swap(pc.operandPrecision[0], pc.operandPrecision[1]);
    swapped->attrs().precision = pc;
    return swapped;
  }
  return simplifyBitcastCandidates(in);
}

Instruction* Simplifier::simplifyBroadcast(Instruction& in) {
  Instruction* x = in.operand(0);
  const std::vector<int64_t>& dims = std::as_const(in).attrs().dimensions;  // const: see simplifyTranspose
  if (x->shape().rank() == in.shape().rank() && isIdentityPermutation(dims)) return ifSameShape(in, x);
  if (x->opcode() == Opcode::Broadcast) {
    std::vector<int64_t> composed;
    for (int64_t d : std::as_const(*x).attrs().dimensions) composed.push_back(dims[static_cast<size_t>(d)]);
    rw_.setOperand(&in, 0, x->operand(0));
    in.attrs().dimensions = composed;
    return &in;
  }
  return nullptr;
}

Instruction* Simplifier::simplifySlice(Instruction& in) {
  Instruction* x = in.operand(0);
  const std::vector<hlo::SliceDimension>& slice = in.attrs().slice;
  bool full = true;
  for (size_t d = 0; d < slice.size(); ++d)
    full &= slice[d].start == 0 && slice[d].stride == 1 && slice[d].limit == x->shape().dimension(static_cast<int64_t>(d));
  if (full) return ifSameShape(in, x);
  if (x->opcode() == Opcode::Broadcast && x->operand(0)->shape().isScalar())
    return broadcast(in, x->operand(0), in.shape(), {});
  if (Instruction* iota = viewOfIota(in)) return iota;
  if (x->opcode() == Opcode::Slice) {
    std::vector<hlo::SliceDimension> composed;
    for (size_t d = 0; d < slice.size(); ++d) {
      const hlo::SliceDimension &o = slice[d], &i = x->attrs().slice[d];
      int64_t n = in.shape().dimension(static_cast<int64_t>(d));
      hlo::SliceDimension s{i.start + o.start * i.stride, 0, o.stride * i.stride};
      s.limit = n == 0 ? s.start : s.start + (n - 1) * s.stride + 1;
      composed.push_back(s);
    }
    rw_.setOperand(&in, 0, x->operand(0));
    in.attrs().slice = composed;
    return &in;
  }
  if (x->opcode() == Opcode::Concatenate && x->attrs().dimensions.size() == 1) {
    // A slice inside one operand of a concatenation slices that operand.
    int64_t dim = x->attrs().dimensions[0];
    const hlo::SliceDimension& s = slice[static_cast<size_t>(dim)];
    int64_t offset = 0;
    for (Instruction* part : x->operands()) {
      int64_t size = part->shape().dimension(dim);
      if (s.start >= offset && s.limit <= offset + size && s.limit > s.start) {
        std::vector<hlo::SliceDimension> shifted = slice;
        shifted[static_cast<size_t>(dim)].start -= offset;
        shifted[static_cast<size_t>(dim)].limit -= offset;
        Instruction* r = add(in, Opcode::Slice, in.shape(), {part});
        r->attrs().slice = shifted;
        return r;
      }
      offset += size;
    }
  }
  return nullptr;
}

Instruction* Simplifier::simplifyConcatenate(Instruction& in) {
  if (in.attrs().dimensions.size() != 1) return nullptr;
  int64_t dim = in.attrs().dimensions[0];
  if (in.operandCount() == 1) return ifSameShape(in, in.operand(0));
  if (Instruction* b = sameScalarEverywhere(in, in.operandCount())) return b;
  // Operands without elements, nested concatenations along the same
  // dimension (used only here), and adjacent slices of one value.
  std::vector<Instruction*> parts;
  bool rewritten = false;
  for (Instruction* op : in.operands()) {
    if (op->shape().elementCount() == 0) {
      rewritten = true;
      continue;
    }
    if (op->opcode() == Opcode::Concatenate && op->attrs().dimensions == in.attrs().dimensions &&
        rw_.hasSingleUse(op)) {
      parts.insert(parts.end(), op->operands().begin(), op->operands().end());
      rewritten = true;
      continue;
    }
    Instruction* last = parts.empty() ? nullptr : parts.back();
    if (last && last->opcode() == Opcode::Slice && op->opcode() == Opcode::Slice && last->operand(0) == op->operand(0)) {
      std::vector<hlo::SliceDimension> a = last->attrs().slice, b = op->attrs().slice;
      hlo::SliceDimension &ad = a[static_cast<size_t>(dim)], &bd = b[static_cast<size_t>(dim)];
      if (ad.stride == 1 && bd.stride == 1 && ad.limit == bd.start) {
        hlo::SliceDimension merged{ad.start, bd.limit, 1};
        ad = bd = merged;
        if (a == b) {
          std::vector<int64_t> dims = last->shape().dimensions();
          dims[static_cast<size_t>(dim)] += op->shape().dimension(dim);
          Instruction* s = add(in, Opcode::Slice, arrayShape(in.shape().elementType(), dims), {op->operand(0)});
          s->attrs().slice = a;
          parts.back() = s;
          rewritten = true;
          continue;
        }
      }
    }
    parts.push_back(op);
  }
  if (!rewritten || parts.empty()) return nullptr;
  if (parts.size() == 1) return ifSameShape(in, parts[0]);
  return rw_.addLike(in, in.shape(), parts);
}

Instruction* Simplifier::simplifyPad(Instruction& in) {
  Instruction* x = in.operand(0);
  const std::vector<hlo::PaddingDimension>& padding = in.attrs().padding;
  bool none = true, onlyNegative = true;
  for (const hlo::PaddingDimension& p : padding) {
    none &= p.low == 0 && p.high == 0 && p.interior == 0;
    onlyNegative &= p.low <= 0 && p.high <= 0 && p.interior == 0;
  }
  if (none) return ifSameShape(in, x);
  if (Instruction* b = sameScalarEverywhere(in, 2)) return b;
  if (onlyNegative) {
    // Negative padding crops: a slice.
    std::vector<hlo::SliceDimension> slice;
    for (size_t d = 0; d < padding.size(); ++d)
      slice.push_back({-padding[d].low, x->shape().dimension(static_cast<int64_t>(d)) + padding[d].high, 1});
    Instruction* s = add(in, Opcode::Slice, in.shape(), {x});
    s->attrs().slice = slice;
    return s;
  }
  return nullptr;
}

Instruction* Simplifier::simplifyReverse(Instruction& in) {
  Instruction* x = in.operand(0);
  std::vector<int64_t> dims;
  for (int64_t d : in.attrs().dimensions)
    if (x->shape().dimension(d) > 1) dims.push_back(d);
  if (dims.empty()) return ifSameShape(in, x);
  if (x->opcode() == Opcode::Reverse) {
    std::vector<int64_t> inner = x->attrs().dimensions, outer = in.attrs().dimensions;
    std::sort(inner.begin(), inner.end());
    std::sort(outer.begin(), outer.end());
    if (inner == outer) return ifSameShape(in, x->operand(0));
  }
  return nullptr;
}

Instruction* Simplifier::sameScalarEverywhere(Instruction& in, int64_t operands) {
  const Instruction* scalar = nullptr;
  for (int64_t k = 0; k < operands; ++k) {
    const Instruction* op = in.operand(k);
    const Instruction* s = op->shape().isScalar() ? op : nullptr;
    if (op->opcode() == Opcode::Broadcast && op->operand(0)->shape().isScalar()) s = op->operand(0);
    if (!s || (scalar && s != scalar)) return nullptr;
    scalar = s;
  }
  if (!scalar || in.shape().isScalar()) return nullptr;
  return broadcast(in, const_cast<Instruction*>(scalar), in.shape(), {});
}

Instruction* Simplifier::viewOfIota(Instruction& in) {
  // A transpose of an iota is an iota along the moved dimension; a slice
  // starting at 0 with stride 1 along the iota's dimension is an iota.
  Instruction* x = in.operand(0);
  if (x->opcode() != Opcode::Iota) return nullptr;
  int64_t dim = x->attrs().iotaDimension;
  int64_t newDim = dim;
  if (in.opcode() == Opcode::Transpose) {
    newDim = inversePermutation(in.attrs().dimensions)[static_cast<size_t>(dim)];
  } else {
    const hlo::SliceDimension& s = in.attrs().slice[static_cast<size_t>(dim)];
    if (s.start != 0 || s.stride != 1) return nullptr;
  }
  Instruction* iota = add(in, Opcode::Iota, in.shape(), {});
  iota->attrs().iotaDimension = newDim;
  return iota;
}

Instruction* Simplifier::simplifyReduceWindow(Instruction& in) {
  // A 1x1 window with unit strides and no padding or dilation reduces each
  // element with the init once: reducer(x, init), elementwise.
  if (in.operandCount() != 2 || !in.shape().isArray() || !in.toApply() || !in.attrs().window) return nullptr;
  std::optional<Opcode> op = binaryReducerOpcode(*in.toApply());
  if (!op) return nullptr;
  for (const hlo::WindowDimension& w : in.attrs().window->dimensions)
    if (!(w == hlo::WindowDimension{})) return nullptr;
  Instruction* x = in.operand(0);
  Instruction* init = in.operand(1);
  if (!init->shape().isScalar() || !x->shape().compatible(in.shape())) return nullptr;
  return add(in, *op, in.shape(), {x, broadcast(in, init, in.shape(), {})});
}

Instruction* Simplifier::simplifyDynamicSlice(Instruction& in) {
  // Constant start indices: a slice, with the starts clamped into range
  // as dynamic-slice clamps them.
  Instruction* x = in.operand(0);
  const std::vector<int64_t>& sizes = in.attrs().dynamicSliceSizes;
  if (in.operandCount() != x->shape().rank() + 1 || static_cast<int64_t>(sizes.size()) != x->shape().rank())
    return nullptr;
  std::vector<hlo::SliceDimension> slice;
  for (int64_t d = 0; d < x->shape().rank(); ++d) {
    const Instruction* index = in.operand(d + 1);
    const hlo::Literal* value = splat(index);
    if (!value || !index->shape().isScalar() || !hlo::isIntegerType(index->shape().elementType())) return nullptr;
    int64_t start = hlo::isUnsignedIntegerType(index->shape().elementType())
                        ? static_cast<int64_t>(std::min<uint64_t>(value->getUint(0), INT64_MAX))
                        : value->getInt(0);
    int64_t size = sizes[static_cast<size_t>(d)];
    start = std::clamp<int64_t>(start, 0, x->shape().dimension(d) - size);
    slice.push_back({start, start + size, 1});
  }
  Instruction* s = add(in, Opcode::Slice, in.shape(), {x});
  s->attrs().slice = slice;
  return s;
}

Instruction* Simplifier::sinkReshapesBelowElementwise(Instruction& in) {
  // op(reshape(a), reshape(b)) -> reshape(op(a, b)) when a and b have one
  // shape and the reshapes no other user (XLA's reshape mover): the
  // reshape moves towards others it can cancel with, and no reshape is
  // added. Broadcast scalars come along at the new shape.
  if (in.operandCount() == 0 || !in.shape().isArray() || in.opcode() == Opcode::Copy) return nullptr;
  const Shape* from = nullptr;
  for (const Instruction* op : in.operands()) {
    if (op->opcode() == Opcode::Broadcast && op->operand(0)->shape().isScalar()) continue;
    if (op->opcode() != Opcode::Reshape || !rw_.hasSingleUse(op) || rw_.hasControlEdges(op)) return nullptr;
    const Shape& s = op->operand(0)->shape();
    if (from && from->dimensions() != s.dimensions()) return nullptr;
    from = &s;
  }
  if (!from) return nullptr;
  std::vector<Instruction*> operands;
  for (Instruction* op : in.operands()) {
    if (op->opcode() == Opcode::Reshape) {
      operands.push_back(op->operand(0));
    } else {
      operands.push_back(broadcast(in, op->operand(0), arrayShape(op->shape().elementType(), from->dimensions()), {}));
    }
  }
  Instruction* moved = rw_.addLike(in, arrayShape(in.shape().elementType(), from->dimensions()), operands);
  return rw_.add(Opcode::Reshape, in.shape(), {moved}, "reshape", in.location());
}

Instruction* Simplifier::simplifyBitcastCandidates(Instruction& in) {
  if (!options_.layoutSensitive) return nullptr;
  Instruction* x = in.operand(0);
  bool bitcast = in.opcode() == Opcode::Reshape ? reshapeIsBitcast(x->shape(), in.shape())
                                                 : transposeIsBitcast(x->shape(), in.shape(), in.attrs().dimensions);
  if (!bitcast) return nullptr;
  return add(in, Opcode::Bitcast, in.shape(), {x});
}

}  // namespace tpu::passes::simplify
