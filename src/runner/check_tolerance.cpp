#include "runner/check_tolerance.h"

#include <cmath>
#include <map>

#include "hlo/computation.h"

namespace tpu::runner {

namespace {

using hlo::ElementType;
using hlo::Opcode;

// Half the spacing of floats of `t` at 1 (2^-24 for f32); 0 for non-floats.
double unitRoundoff(ElementType t) {
  if (t == ElementType::F32 || t == ElementType::C64) return 0x1p-24;
  if (t == ElementType::F64 || t == ElementType::C128) return 0x1p-53;
  const auto& format = hlo::elementTypeInfo(t).floatFormat;
  if (!format) return 0;
  return std::ldexp(1.0, -(floatFormatInfo(*format).mantissaBits + 1));
}

// A reduction of a narrow float type rounds to that type after every step,
// so its result depends on the summation order, which the compiled code
// (vector chunks, lane trees) and the interpreter (in order) do not share.
// K roundings of partial sums that grow like sqrt(K) (inputs ~1) walk about
// u * K apart; allow twice that. An f32 sum is rounded in f32 on both sides,
// in another order: its error relative to the result walks like
// u * sqrt(K). max/min are exact.
double reduceBound(const hlo::Instruction& reduce) {
  if (reduce.operandCount() < 1 || !reduce.operand(0)->shape().isArray()) return 0;
  const hlo::Shape& in = reduce.operand(0)->shape();
  const auto& format = hlo::elementTypeInfo(in.elementType()).floatFormat;
  bool f32 = in.elementType() == ElementType::F32;
  if (!format && !f32) return 0;
  const hlo::Computation* reducer = reduce.toApply();
  if (reducer && reducer->root() &&
      (reducer->root()->opcode() == Opcode::Maximum || reducer->root()->opcode() == Opcode::Minimum))
    return 0;
  double k = 1;
  for (int64_t d : reduce.attrs().dimensions)
    if (d >= 0 && d < in.rank()) k *= static_cast<double>(in.dimension(d));
  if (f32) return 2 * 0x1p-24 * std::sqrt(k);
  return 2 * unitRoundoff(in.elementType()) * k;
}

// Dots and convolutions over floats run on the bf16 MXU and accumulate in
// f32. Operands of at most 8 significant bits (bf16, the f8 types) give
// exact products there: only the order of the f32 sum differs from the
// interpreter's (u = 2^-24). f32, f64 and f16 operands are split into one,
// three or six bf16 passes keeping about 8, 16 or 24 significant bits of
// each product. The rounding errors of K products add up like a random
// walk, so the bound grows with sqrt(K) (inputs of magnitude ~1, as --seed
// produces); twice that.
double matrixBound(const hlo::Instruction& instr, codegen::F32DotPrecision dotPrecision) {
  bool isDot = instr.opcode() == Opcode::Dot;
  if (instr.operandCount() < 2 || !instr.operand(0)->shape().isArray()) return 0;
  const hlo::Shape& lhs = instr.operand(0)->shape();
  const hlo::Shape& rhs = instr.operand(1)->shape();
  if (!hlo::isFloatType(lhs.elementType())) return 0;
  ElementType lt = lhs.elementType(), rt = rhs.isArray() ? rhs.elementType() : lt;
  auto narrowEnough = [](ElementType t) {
    const auto& format = hlo::elementTypeInfo(t).floatFormat;
    return t != ElementType::F16 && format && floatFormatInfo(*format).mantissaBits <= 7;
  };
  double u = 0x1p-24;
  if (!narrowEnough(lt) || !narrowEnough(rt)) {
    int passes = 1;
    switch (dotPrecision) {
      case codegen::F32DotPrecision::Default: passes = 1; break;
      case codegen::F32DotPrecision::High: passes = 3; break;
      case codegen::F32DotPrecision::Highest: passes = 6; break;
      case codegen::F32DotPrecision::FromConfig: {
        hlo::Precision p = hlo::Precision::Default;
        for (hlo::Precision q : instr.attrs().precision->operandPrecision) p = std::max(p, q);
        passes = p == hlo::Precision::Highest ? 6 : p == hlo::Precision::High ? 3 : 1;
        break;
      }
    }
    u = passes == 1 ? 0x1p-8 : passes == 3 ? 0x1p-16 : 0x1p-23;
  }
  double k = 1;  // products summed per output element
  if (isDot) {
    for (int64_t d : instr.attrs().dotDims->lhsContractingDimensions)
      if (d >= 0 && d < lhs.rank()) k *= static_cast<double>(lhs.dimension(d));
  } else if (instr.attrs().convDims && rhs.isArray()) {
    const auto& dn = *instr.attrs().convDims;
    for (int64_t d : dn.kernelSpatialDimensions)
      if (d >= 0 && d < rhs.rank()) k *= static_cast<double>(rhs.dimension(d));
    if (dn.kernelInputFeatureDimension < rhs.rank())
      k *= static_cast<double>(rhs.dimension(dn.kernelInputFeatureDimension));
  }
  return 2 * u * std::sqrt(k);
}

// Elementwise math the compiled code composes from other instructions
// instead of computing as the interpreter does (one libm call): the bound
// measured for the composition, in units of the f32 unit roundoff, in the
// |got - want| <= t (1 + |want|) form the check uses (math_test.cpp
// measures expm1, log1p and tan by relative error near zero).
double composedUlps(Opcode op) {
  switch (op) {
    case Opcode::Expm1:
    case Opcode::Log1p:
    case Opcode::Tan: return 8;
    case Opcode::Sinh:
    case Opcode::Cosh:
    case Opcode::Cbrt:
    case Opcode::Erf:  // polynomial expansions (lower_math.cpp): 2.6 ulps at most measured
    case Opcode::Asin:
    case Opcode::Acos:
    case Opcode::Atan:
    case Opcode::Atan2:
    case Opcode::Asinh:
    case Opcode::Acosh:
    case Opcode::Atanh: return 8;
    default: return 0;
  }
}

// f64 library math composed from the pair unit's basic rows
// (codegen/kernels/math.cpp, math_f64.cpp): the bound math_f64_test.cpp pins
// against long double libm, plus 1 for the interpreter's own libm rounding,
// in units of the f64 unit roundoff 2^-53 (so twice the ulps); they hold at
// every magnitude (sin, cos and tan reduce exactly, Payne-Hanek past 2^20).
// 0: one row, computed as the interpreter computes it.
double composedF64Ulps(Opcode op) {
  switch (op) {
    case Opcode::Log:
    case Opcode::Log1p:
    case Opcode::Sin:
    case Opcode::Cos:
    case Opcode::Erf:
    case Opcode::Atan:
    case Opcode::Cbrt: return 2 * 2;
    case Opcode::Acos:
    case Opcode::Asinh:
    case Opcode::Atanh: return 2 * 2.5;
    case Opcode::Exp:
    case Opcode::Expm1:
    case Opcode::Logistic:
    case Opcode::Cosh:
    case Opcode::Sinh:
    case Opcode::Acosh:
    case Opcode::Atan2:
    case Opcode::Power: return 2 * 3;
    case Opcode::Tan:
    case Opcode::Asin: return 2 * 3.5;
    case Opcode::Tanh: return 2 * 4;
    default: return 0;
  }
}

// Complex library math composed from f32 (c64) or f64 pair (c128) instructions
// (codegen/kernels/complex.cpp): the normwise bound measured by
// complex_math_test.cpp against long double, the same for both types (there
// in units of 2^-23 or 2^-52, here of 2^-24 or 2^-53), with its result type's check
// |got - want| <= t (1 + |want|). Multiply is exact where finite (XLA's
// product, the same roundings as std::complex); abs has an f32 result.
double composedC64Ulps(Opcode op) {
  switch (op) {
    case Opcode::Abs: return 2 * 3;
    case Opcode::Sqrt:
    case Opcode::Sign:
    case Opcode::Divide: return 2 * 4;
    case Opcode::Exp:
    case Opcode::Log:
    case Opcode::Log1p: return 2 * 6;
    case Opcode::Expm1:
    case Opcode::Rsqrt:
    case Opcode::Sin:
    case Opcode::Cos: return 2 * 8;
    case Opcode::Tanh:
    case Opcode::Tan: return 2 * 10;
    case Opcode::Logistic: return 2 * 12;
    case Opcode::Power: return 2 * 48;  // |b ln a| < 12; it grows with that product
    default: return 0;
  }
}

// The largest own bound of any instruction in `c` or what it calls.
double calledBound(const hlo::Computation* c, codegen::F32DotPrecision dotPrecision,
                   std::map<const hlo::Computation*, double>& memo) {
  if (!c) return 0;
  auto [it, inserted] = memo.emplace(c, 0.0);
  if (!inserted) return it->second;  // done, or in progress on a cycle
  double bound = 0;
  for (const auto& instr : c->instructions()) {
    bound = std::max(bound, ownErrorBound(*instr, dotPrecision));
    for (const hlo::Computation* callee : instr->calledComputations())
      bound = std::max(bound, calledBound(callee, dotPrecision, memo));
  }
  memo[c] = bound;
  return bound;
}

// How many devices' values a cross-device sum adds up (all-reduce and
// reduce-scatter: the group size; 1 for everything else). Each device's
// partial result carries its own error, so the sum's bound grows with
// the square root of their number, as a dot's grows with its length (a
// partitioned dot is per-device partial dots summed by an all-reduce).
int64_t summedOperands(const hlo::Instruction& instr, const hlo::Module& module) {
  switch (instr.opcode()) {
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::ReduceScatter: break;
    default: return 1;
  }
  const auto& groups = instr.attrs().replicaGroups;
  if (groups && !groups->groups.empty() && !groups->groups[0].empty())
    return static_cast<int64_t>(groups->groups[0].size());
  return std::max<int64_t>(1, module.config().replicaCount) * std::max<int64_t>(1, module.config().numPartitions);
}

// Own error of a sum relative to the root mean square of its result (see
// checkScaledTolerances). A dot's K products each carry the relative error
// u of the bf16 passes (u = 0 for exact bf16/f8 products); their errors
// add like a random walk, as the products do, so relative to the result's
// size they stay ~u whatever K; the f32 accumulation in another order than
// the interpreter's adds u32 sqrt(K) relative to the size. Four times that
// (the largest of many elements is a few standard deviations out).
// Add-reductions of narrow floats round each step in their type:
// 2 u sqrt(K) relative, twice.
double ownScaledBound(const hlo::Instruction& instr, codegen::F32DotPrecision dotPrecision) {
  const bool matrix = instr.opcode() == Opcode::Dot || instr.opcode() == Opcode::Convolution;
  if (instr.opcode() == Opcode::Reduce) {
    double b = reduceBound(instr);
    if (b == 0) return 0;
    const hlo::Shape& in = instr.operand(0)->shape();
    double k = 1;
    for (int64_t d : instr.attrs().dimensions)
      if (d >= 0 && d < in.rank()) k *= static_cast<double>(in.dimension(d));
    if (in.elementType() == ElementType::F32) return 4 * 0x1p-24 * std::sqrt(k);
    return 4 * unitRoundoff(in.elementType()) * std::sqrt(k);
  }
  if (!matrix) return 0;
  double b = matrixBound(instr, dotPrecision);  // 2 u sqrt(K)
  if (b == 0) return 0;
  // Recover K and u from the per-element bound's parts.
  double k = 1;
  const hlo::Shape& lhs = instr.operand(0)->shape();
  const hlo::Shape& rhs = instr.operand(1)->shape();
  if (instr.opcode() == Opcode::Dot) {
    for (int64_t d : instr.attrs().dotDims->lhsContractingDimensions)
      if (d >= 0 && d < lhs.rank()) k *= static_cast<double>(lhs.dimension(d));
  } else if (instr.attrs().convDims && rhs.isArray()) {
    const auto& dn = *instr.attrs().convDims;
    for (int64_t d : dn.kernelSpatialDimensions)
      if (d >= 0 && d < rhs.rank()) k *= static_cast<double>(rhs.dimension(d));
    if (dn.kernelInputFeatureDimension < rhs.rank())
      k *= static_cast<double>(rhs.dimension(dn.kernelInputFeatureDimension));
  }
  double u = b / (2 * std::sqrt(k));
  if (u <= 0x1p-24) u = 0;  // exact products
  return 4 * (u + 0x1p-24 * std::sqrt(k));
}

// The largest scaled bound inside `c` or what it calls (a fusion's own
// chain of sums counts as one).
double calledScaledBound(const hlo::Computation* c, codegen::F32DotPrecision dotPrecision,
                         std::map<const hlo::Computation*, double>& memo) {
  if (!c) return 0;
  auto [it, inserted] = memo.emplace(c, 0.0);
  if (!inserted) return it->second;
  double bound = 0;
  for (const auto& instr : c->instructions()) {
    bound = std::max(bound, ownScaledBound(*instr, dotPrecision));
    for (const hlo::Computation* callee : instr->calledComputations())
      bound = std::max(bound, calledScaledBound(callee, dotPrecision, memo));
  }
  memo[c] = bound;
  return bound;
}

// Number of array leaves of `shape`.
size_t arrayLeaves(const hlo::Shape& shape) {
  std::vector<const hlo::Shape*> shapes{&shape};
  size_t arrays = 0;
  while (!shapes.empty()) {
    const hlo::Shape* s = shapes.back();
    shapes.pop_back();
    if (s->isTuple())
      for (const hlo::Shape& e : s->tupleElements()) shapes.push_back(&e);
    else if (s->isArray())
      ++arrays;
  }
  return arrays;
}

}  // namespace

double ownErrorBound(const hlo::Instruction& instr, codegen::F32DotPrecision dotPrecision) {
  switch (instr.opcode()) {
    case Opcode::Reduce: return reduceBound(instr);
    case Opcode::Dot:
    case Opcode::Convolution: return matrixBound(instr, dotPrecision);
    default: break;
  }
  if (!instr.shape().isArray()) return 0;
  if (instr.operandCount() > 0 && instr.operand(0)->shape().isArray() && hlo::isElementwise(instr.opcode())) {
    // c128: the same expansion in f64 pair instructions, the same pinned bounds in units of 2^-52.
    ElementType ct = instr.operand(0)->shape().elementType();
    if (ct == ElementType::C64) return composedC64Ulps(instr.opcode()) * 0x1p-24;
    if (ct == ElementType::C128) return composedC64Ulps(instr.opcode()) * 0x1p-53;
  }
  if (instr.shape().elementType() == ElementType::F64 && hlo::isElementwise(instr.opcode()))
    return composedF64Ulps(instr.opcode()) * 0x1p-53;
  double ulps = composedUlps(instr.opcode());
  if (ulps == 0) return 0;
  ElementType t = instr.shape().elementType();
  if (t == ElementType::F64 || t == ElementType::C128 || !hlo::isFloatType(t)) return 0;
  return ulps * 0x1p-24;
}

namespace {

// One bound per array leaf of the entry's result: `combine(instr, operands)`
// gives an instruction's bound from the largest of its operands' bounds,
// evaluated in iterative post-order (chains can be long); tuple results
// are read through to their operands, and every array leaf of any other
// value shares its bound, raised to `floor`.
template <class Combine>
std::vector<double> perResultBounds(const hlo::Module& module, double floor, Combine combine) {
  const hlo::Computation* entry = module.entry();
  std::vector<double> out;
  if (!entry || !entry->root()) return out;
  std::map<const hlo::Instruction*, double> bound;
  auto boundOf = [&](const hlo::Instruction* root) {
    std::vector<std::pair<const hlo::Instruction*, int64_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [instr, next] = stack.back();
      if (bound.count(instr)) {
        stack.pop_back();
        continue;
      }
      if (next < instr->operandCount()) {
        const hlo::Instruction* op = instr->operand(next++);
        if (!bound.count(op)) stack.push_back({op, 0});
        continue;
      }
      double in = 0;
      for (int64_t i = 0; i < instr->operandCount(); ++i) in = std::max(in, bound[instr->operand(i)]);
      bound[instr] = combine(*instr, in);
      stack.pop_back();
    }
    return bound[root];
  };
  auto leaves = [&](auto&& self, const hlo::Instruction* v) -> void {
    if (v->opcode() == Opcode::Tuple) {
      for (int64_t i = 0; i < v->operandCount(); ++i) self(self, v->operand(i));
      return;
    }
    out.insert(out.end(), arrayLeaves(v->shape()), std::max(boundOf(v), floor));
  };
  leaves(leaves, entry->root());
  return out;
}

}  // namespace

std::vector<double> checkTolerances(const hlo::Module& module, codegen::F32DotPrecision dotPrecision) {
  std::map<const hlo::Computation*, double> calledMemo;
  // Bound of each entry instruction: the largest of its own, its callees'
  // and its operands'. A narrow float result of an inexact computation may
  // round the other way from the interpreter's: one ulp of that type
  // (2u) on top.
  return perResultBounds(module, kCheckToleranceFloor, [&](const hlo::Instruction& instr, double operands) {
    double b = std::max(ownErrorBound(instr, dotPrecision), operands);
    for (const hlo::Computation* callee : instr.calledComputations())
      b = std::max(b, calledBound(callee, dotPrecision, calledMemo));
    b *= std::sqrt(static_cast<double>(summedOperands(instr, module)));
    if (b > 0 && instr.shape().isArray() && hlo::elementTypeInfo(instr.shape().elementType()).floatFormat)
      b = std::max(b, 2 * unitRoundoff(instr.shape().elementType()));
    return b;
  });
}

std::vector<double> checkScaledTolerances(const hlo::Module& module, codegen::F32DotPrecision dotPrecision) {
  std::map<const hlo::Computation*, double> calledMemo;
  // Own bound plus the largest of the operands'.
  return perResultBounds(module, 0, [&](const hlo::Instruction& instr, double operands) {
    double own = ownScaledBound(instr, dotPrecision);
    for (const hlo::Computation* callee : instr.calledComputations())
      own = std::max(own, calledScaledBound(callee, dotPrecision, calledMemo));
    return own + operands;
  });
}

}  // namespace tpu::runner
