// algsimp rules for arithmetic, logic, compare, select, reduce and dot.
// Every rule is exact for every input (integers wrap, floats keep their
// bits, NaNs stay NaNs) unless guarded by options_.valueChanging.
#include <algorithm>
#include <cmath>
#include <utility>

#include "passes/simplify/algsimp_internal.h"

namespace tpu::passes::simplify {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using hlo::Shape;

namespace {

bool isInt(const Instruction& i) { return hlo::isIntegerType(i.shape().elementType()); }
bool isFloat(const Instruction& i) { return hlo::isFloatType(i.shape().elementType()); }
bool isPred(const Instruction& i) { return i.shape().elementType() == ElementType::Pred; }

// log2 of |value| when it is a power of two (2^-1074 .. 2^1023).
std::optional<int> powerOfTwoExponent(double value) {
  if (!std::isfinite(value) || value == 0) return std::nullopt;
  int exponent = 0;
  double mantissa = std::frexp(std::fabs(value), &exponent);
  if (mantissa != 0.5) return std::nullopt;
  return exponent - 1;
}

}  // namespace

Instruction* Simplifier::simplifyAdd(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if (isInt(in)) {
    if (isIntSplat(b, 0)) return ifSameShape(in, a);
    if (isIntSplat(a, 0)) return ifSameShape(in, b);
  } else if (isFloat(in)) {
    // x + (-0) is x for every x; x + (+0) turns -0 into +0.
    if (isFloatSplat(b, -0.0) || (options_.valueChanging && isFloatSplat(b, 0.0))) return ifSameShape(in, a);
    if (isFloatSplat(a, -0.0) || (options_.valueChanging && isFloatSplat(a, 0.0))) return ifSameShape(in, b);
  }
  // (A + c1) + c2 -> A + (c1 + c2): exact in wrapping integer arithmetic.
  if (isInt(in) && a->opcode() == Opcode::Add && rw_.hasSingleUse(a) && a->shape() == in.shape()) {
    const Literal* c2 = splat(b);
    for (int k = 0; k < 2 && c2; ++k) {
      const Literal* c1 = splat(a->operand(k));
      if (!c1) continue;
      Literal sum(Shape::scalar(in.shape().elementType()));
      sum.setUint(0, c1->getUint(0) + c2->getUint(0));  // wraps like the op
      return add(in, Opcode::Add, in.shape(), {a->operand(1 - k), splatConstant(in, in.shape(), sum)});
    }
  }
  // A*C + B*C -> (A+B)*C: exact in wrapping integer arithmetic only.
  if ((isInt(in) || (options_.valueChanging && isFloat(in))) && a->opcode() == Opcode::Multiply &&
      b->opcode() == Opcode::Multiply && rw_.hasSingleUse(a) && rw_.hasSingleUse(b) && a->shape() == in.shape() &&
      b->shape() == in.shape()) {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        if (a->operand(i) != b->operand(j)) continue;
        Instruction* sum = add(in, Opcode::Add, in.shape(), {a->operand(1 - i), b->operand(1 - j)});
        return add(in, Opcode::Multiply, in.shape(), {sum, a->operand(i)});
      }
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifySubtract(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if (isInt(in)) {
    if (isIntSplat(b, 0)) return ifSameShape(in, a);
    if (a == b) return splatConstant(in, in.shape(), 0.0);
  } else if (isFloat(in)) {
    // x - (+0) = x + (-0) = x.
    if (isFloatSplat(b, 0.0) || (options_.valueChanging && isFloatSplat(b, -0.0))) return ifSameShape(in, a);
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyMultiply(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if (isInt(in)) {
    if (isIntSplat(b, 1)) return ifSameShape(in, a);
    if (isIntSplat(a, 1)) return ifSameShape(in, b);
    if (isIntSplat(b, 0)) return ifSameShape(in, b->shape() == in.shape() ? b : splatConstant(in, in.shape(), 0.0));
    if (isIntSplat(a, 0)) return ifSameShape(in, a->shape() == in.shape() ? a : splatConstant(in, in.shape(), 0.0));
  } else if (isFloat(in)) {
    if (isFloatSplat(b, 1.0)) return ifSameShape(in, a);
    if (isFloatSplat(a, 1.0)) return ifSameShape(in, b);
    // x * 0 is NaN for infinities and NaNs, -0 for negative x.
    if (options_.valueChanging && (isFloatSplat(b, 0.0) || isFloatSplat(a, 0.0)))
      return splatConstant(in, in.shape(), 0.0);
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyDivide(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if ((isInt(in) && isIntSplat(b, 1)) || (isFloat(in) && isFloatSplat(b, 1.0))) return ifSameShape(in, a);
  const Literal* divisor = splat(b);
  if (!divisor) return sinkBroadcastsBelowElementwise(in);
  ElementType t = in.shape().elementType();
  if (hlo::isUnsignedIntegerType(t)) {
    // Unsigned x / 2^k is x >> k.
    uint64_t d = divisor->getUint(0);
    if (d == 0 || (d & (d - 1)) != 0) return nullptr;
    int shift = 0;
    while ((uint64_t{1} << shift) != d) ++shift;
    return add(in, Opcode::ShiftRightLogical, in.shape(), {a, splatConstant(in, in.shape(), shift)});
  }
  if (!isFloat(in)) return nullptr;
  // x / c = x * (1/c) exactly when 1/c is representable (c = ±2^k): both
  // round the same real number once (narrow types: once in f32, then to
  // the type, on both sides).
  double c = divisor->getDouble(0);
  Literal reciprocal(Shape::scalar(t));
  reciprocal.setDouble(0, 1.0 / c);
  bool exact = powerOfTwoExponent(c) && reciprocal.getDouble(0) == 1.0 / c;
  if (!exact && !(options_.valueChanging && std::isfinite(c) && c != 0)) return nullptr;
  return add(in, Opcode::Multiply, in.shape(), {a, splatConstant(in, in.shape(), reciprocal)});
}

// Whether `i` splats the identity of max (the lowest value: -inf, the
// integer minimum, false) or of min (the highest).
bool Simplifier::isMinMaxIdentity(const Instruction* i, bool forMax) {
  const Literal* s = splat(i);
  ElementType t = i->shape().elementType();
  if (!s) return false;
  if (hlo::isFloatType(t)) {
    double v = s->getDouble(0);
    return std::isinf(v) && (v < 0) == forMax;
  }
  if (t == ElementType::Pred) return (s->getInt(0) != 0) != forMax;
  if (!hlo::isIntegerType(t)) return false;
  int bits = hlo::elementTypeInfo(t).bitWidth;
  if (hlo::isUnsignedIntegerType(t)) {
    uint64_t top = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    return s->getUint(0) == (forMax ? 0 : top);
  }
  int64_t low = bits >= 64 ? INT64_MIN : -(int64_t{1} << (bits - 1));
  return s->getInt(0) == (forMax ? low : -(low + 1));
}

Instruction* Simplifier::simplifyMinMax(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if (a == b) return ifSameShape(in, a);
  // max(x, -inf) is x bit for bit, NaN and -0 included (the interpreter's
  // max returns a NaN operand, and of equal values the one it was given).
  bool forMax = in.opcode() == Opcode::Maximum;
  if (isMinMaxIdentity(b, forMax)) return ifSameShape(in, a);
  if (isMinMaxIdentity(a, forMax)) return ifSameShape(in, b);
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyLogical(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  if (!isInt(in) && !isPred(in)) return nullptr;
  auto zeros = [&](Instruction* z) { return z->shape() == in.shape() ? z : splatConstant(in, in.shape(), 0.0); };
  auto same = [&](Instruction* x) { return ifSameShape(in, x); };
  switch (in.opcode()) {
    case Opcode::And:
      if (a == b) return same(a);
      if (isAllOnesSplat(b)) return same(a);
      if (isAllOnesSplat(a)) return same(b);
      if (isIntSplat(b, 0)) return same(zeros(b));
      if (isIntSplat(a, 0)) return same(zeros(a));
      break;
    case Opcode::Or:
      if (a == b) return same(a);
      if (isIntSplat(b, 0)) return same(a);
      if (isIntSplat(a, 0)) return same(b);
      if (isAllOnesSplat(b) && b->shape() == in.shape()) return b;
      if (isAllOnesSplat(a) && a->shape() == in.shape()) return a;
      break;
    case Opcode::Xor:
      if (isIntSplat(b, 0)) return same(a);
      if (isIntSplat(a, 0)) return same(b);
      if (a == b) return splatConstant(in, in.shape(), 0.0);
      break;
    default: break;
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyPower(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  bool one = isInt(in) ? isIntSplat(b, 1) : isFloatSplat(b, 1.0);
  if (one) return ifSameShape(in, a);
  // pow(x, 0) is 1 for every x, NaN included (C's pow, the interpreter's).
  if (isFloat(in) && (isFloatSplat(b, 0.0) || isFloatSplat(b, -0.0))) return splatConstant(in, in.shape(), 1.0);
  // pow(x, 2) -> x*x: libm's pow is not always correctly rounded, so the
  // two differ in the last bit for some x.
  if (options_.valueChanging && isFloat(in) && isFloatSplat(b, 2.0))
    return add(in, Opcode::Multiply, in.shape(), {a, a});
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyUnaryInvolution(Instruction& in) {
  Instruction* x = in.operand(0);
  if ((in.opcode() == Opcode::Negate || in.opcode() == Opcode::Not) && x->opcode() == in.opcode())
    return ifSameShape(in, x->operand(0));
  // not(a < b) is a >= b, except under the IEEE order (NaN).
  if (in.opcode() == Opcode::Not && x->opcode() == Opcode::Compare && rw_.hasSingleUse(x) &&
      x->attrs().comparisonType != hlo::ComparisonType::Float &&
      !hlo::isComplexType(x->operand(0)->shape().elementType())) {
    static const hlo::ComparisonDirection kInverse[] = {
        hlo::ComparisonDirection::NE, hlo::ComparisonDirection::EQ, hlo::ComparisonDirection::GE,
        hlo::ComparisonDirection::GT, hlo::ComparisonDirection::LE, hlo::ComparisonDirection::LT};
    Instruction* inverted = rw_.addLike(*x, in.shape(), {x->operand(0), x->operand(1)});
    inverted->attrs().comparisonDirection = kInverse[static_cast<int>(x->attrs().comparisonDirection)];
    return inverted;
  }
  if (in.opcode() == Opcode::Abs && !hlo::isComplexType(x->shape().elementType())) {
    if (x->opcode() == Opcode::Abs) return ifSameShape(in, x);
    // |-x| = |x|, bit for bit (abs clears the sign negate flips).
    if (x->opcode() == Opcode::Negate) {
      rw_.setOperand(&in, 0, x->operand(0));
      return &in;
    }
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyCompare(Instruction& in) {
  Instruction* a = in.operand(0);
  Instruction* b = in.operand(1);
  // x cmp x is known except for floats under the partial (IEEE) order,
  // where NaN compares unequal to itself.
  if (a == b && in.attrs().comparisonType != hlo::ComparisonType::Float && !hlo::isComplexType(a->shape().elementType())) {
    switch (in.attrs().comparisonDirection) {
      case hlo::ComparisonDirection::EQ:
      case hlo::ComparisonDirection::LE:
      case hlo::ComparisonDirection::GE: return splatConstant(in, in.shape(), 1.0);
      default: return splatConstant(in, in.shape(), 0.0);
    }
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifySelect(Instruction& in) {
  Instruction* p = in.operand(0);
  Instruction* a = in.operand(1);
  Instruction* b = in.operand(2);
  if (a == b) return ifSameShape(in, a);
  if (isIntSplat(p, 1)) return ifSameShape(in, a);
  if (isIntSplat(p, 0)) return ifSameShape(in, b);
  // select(p, a, select(p, b, c)) = select(p, a, c), and on the other arm.
  if (b->opcode() == Opcode::Select && b->operand(0) == p) {
    rw_.setOperand(&in, 2, b->operand(2));
    return &in;
  }
  if (a->opcode() == Opcode::Select && a->operand(0) == p) {
    rw_.setOperand(&in, 1, a->operand(1));
    return &in;
  }
  if (p->opcode() == Opcode::Not) {
    rw_.setOperand(&in, 0, p->operand(0));
    rw_.setOperand(&in, 1, b);
    rw_.setOperand(&in, 2, a);
    return &in;
  }
  return sinkBroadcastsBelowElementwise(in);
}

Instruction* Simplifier::simplifyReduce(Instruction& in) {
  if (in.operandCount() != 2 || !in.shape().isArray() || !in.toApply()) return nullptr;
  std::optional<Opcode> op = binaryReducerOpcode(*in.toApply());
  if (!op) return nullptr;
  Instruction* x = in.operand(0);
  Instruction* init = in.operand(1);
  // Reads through const: the mutable accessor would unshare a block the
  // parser shares between equal instructions.
  const std::vector<int64_t>& reduced = std::as_const(in).attrs().dimensions;
  const Shape& xs = x->shape();
  if (!init->shape().isScalar() || init->shape().elementType() != in.shape().elementType()) return nullptr;
  int64_t count = 1;
  for (int64_t d : reduced) count *= xs.dimension(d);
  auto withInit = [&](Instruction* values) {
    return add(in, *op, in.shape(), {values, broadcast(in, init, in.shape(), {})});
  };
  if (count == 0) return broadcast(in, init, in.shape(), {});
  // Reducing one element per output: reducer(init, x), once.
  if (count == 1) return withInit(reshape(in, x, in.shape()));
  if (x->opcode() != Opcode::Broadcast) return nullptr;
  // reduce(broadcast(y)) over dimensions the broadcast added.
  const std::vector<int64_t>& bdims = std::as_const(*x).attrs().dimensions;
  for (int64_t d : reduced)
    if (std::find(bdims.begin(), bdims.end(), d) != bdims.end()) return nullptr;
  std::vector<int64_t> resultIndex(static_cast<size_t>(xs.rank()), -1);
  for (int64_t d = 0, k = 0; d < xs.rank(); ++d)
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) resultIndex[static_cast<size_t>(d)] = k++;
  std::vector<int64_t> newDims;
  for (int64_t d : bdims) newDims.push_back(resultIndex[static_cast<size_t>(d)]);
  // Idempotent reducers apply once; integer add multiplies by the count;
  // a float sum of n copies is not n*x.
  bool idempotent = *op == Opcode::Maximum || *op == Opcode::Minimum || *op == Opcode::And || *op == Opcode::Or;
  if (!idempotent && !(*op == Opcode::Add && isInt(in))) return nullptr;
  Instruction* y = x->operand(0);
  Instruction* spread = newDims.size() == static_cast<size_t>(in.shape().rank()) && y->shape().compatible(in.shape()) &&
                                std::is_sorted(newDims.begin(), newDims.end())
                            ? reshape(in, y, in.shape())
                            : broadcast(in, y, in.shape(), newDims);
  if (idempotent) return withInit(spread);
  return withInit(add(in, Opcode::Multiply, in.shape(), {spread, splatConstant(in, in.shape(), double(count))}));
}

Instruction* Simplifier::foldTransposeIntoDot(Instruction& dot, int64_t operandIndex) {
  Instruction* t = dot.operand(operandIndex);
  if (t->opcode() != Opcode::Transpose || rw_.hasControlEdges(t)) return nullptr;
  const std::vector<int64_t>& perm = std::as_const(*t).attrs().dimensions;  // const: see simplifyReduce
  hlo::DotDimensionNumbers dn = *std::as_const(dot).attrs().dotDims;
  std::vector<int64_t>& contracting = operandIndex == 0 ? dn.lhsContractingDimensions : dn.rhsContractingDimensions;
  std::vector<int64_t>& batch = operandIndex == 0 ? dn.lhsBatchDimensions : dn.rhsBatchDimensions;
  // The free dimensions must keep their relative order, or the result's
  // dimension order would change.
  std::vector<int64_t> freeImages;
  for (int64_t d = 0; d < t->shape().rank(); ++d) {
    bool used = std::find(contracting.begin(), contracting.end(), d) != contracting.end() ||
                std::find(batch.begin(), batch.end(), d) != batch.end();
    if (!used) freeImages.push_back(perm[static_cast<size_t>(d)]);
  }
  if (!std::is_sorted(freeImages.begin(), freeImages.end())) return nullptr;
  for (int64_t& d : contracting) d = perm[static_cast<size_t>(d)];
  for (int64_t& d : batch) d = perm[static_cast<size_t>(d)];
  rw_.setOperand(&dot, operandIndex, t->operand(0));
  dot.attrs().dotDims.mutate() = std::move(dn);
  return &dot;
}

Instruction* Simplifier::simplifyDot(Instruction& in) {
  if (in.operandCount() != 2 || std::as_const(in).attrs().sparsity) return nullptr;
  for (int64_t k = 0; k < 2; ++k)
    if (Instruction* folded = foldTransposeIntoDot(in, k)) return folded;
  // An empty contraction sums nothing.
  const hlo::DotDimensionNumbers& dn = *std::as_const(in).attrs().dotDims;
  for (int64_t d : dn.lhsContractingDimensions)
    if (in.operand(0)->shape().dimension(d) == 0 && !hlo::isComplexType(in.shape().elementType()))
      return splatConstant(in, in.shape(), 0.0);
  return nullptr;
}

Instruction* Simplifier::sinkBroadcastsBelowElementwise(Instruction& in) {
  // op(broadcast(x), broadcast(y)) -> broadcast(op(x, y)) when every
  // operand is a broadcast with the same mapping from the same shape, or
  // a broadcast scalar constant: the op runs on fewer elements.
  if (!hlo::isElementwise(in.opcode()) || in.operandCount() == 0 || !in.shape().isArray()) return nullptr;
  const Instruction* model = nullptr;
  for (const Instruction* op : in.operands()) {
    if (op->opcode() != Opcode::Broadcast) return nullptr;
    if (op->operand(0)->shape().isScalar()) continue;  // broadcast again at the narrow shape
    if (model && (model->attrs().dimensions != op->attrs().dimensions ||
                  !model->operand(0)->shape().compatible(op->operand(0)->shape())))
      return nullptr;
    model = op;
  }
  if (!model) {
    // Every operand a broadcast scalar: the op runs once.
    model = in.operand(0);
  }
  const Shape& small = model->operand(0)->shape();
  if (small.rank() == in.shape().rank() && in.operandCount() == 1) return nullptr;  // nothing to gain
  std::vector<Instruction*> operands;
  for (Instruction* op : in.operands()) {
    Instruction* source = op->operand(0);
    if (source->shape().dimensions() != small.dimensions())
      source = broadcast(in, source, arrayShape(source->shape().elementType(), small.dimensions()), {});
    operands.push_back(source);
  }
  Instruction* narrow = rw_.addLike(in, arrayShape(in.shape().elementType(), small.dimensions()), operands);
  return broadcast(in, narrow, in.shape(), model->attrs().dimensions);
}

}  // namespace tpu::passes::simplify
