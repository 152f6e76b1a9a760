// Elementwise ops: one dispatch per op into the kernels of elementwise.h.
#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "eval/interp.h"
#include "eval/kernels.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;

namespace {

std::optional<UnaryOp> unaryOpOf(Opcode op) {
  switch (op) {
    case Opcode::Abs: return UnaryOp::Abs;
    case Opcode::Negate: return UnaryOp::Negate;
    case Opcode::Exp: return UnaryOp::Exp;
    case Opcode::Expm1: return UnaryOp::Expm1;
    case Opcode::Log: return UnaryOp::Log;
    case Opcode::Log1p: return UnaryOp::Log1p;
    case Opcode::Sqrt: return UnaryOp::Sqrt;
    case Opcode::Rsqrt: return UnaryOp::Rsqrt;
    case Opcode::Cbrt: return UnaryOp::Cbrt;
    case Opcode::Tanh: return UnaryOp::Tanh;
    case Opcode::Logistic: return UnaryOp::Logistic;
    case Opcode::Sin: return UnaryOp::Sin;
    case Opcode::Cos: return UnaryOp::Cos;
    case Opcode::Tan: return UnaryOp::Tan;
    case Opcode::Atan: return UnaryOp::Atan;
    case Opcode::Asin: return UnaryOp::Asin;
    case Opcode::Acos: return UnaryOp::Acos;
    case Opcode::Sinh: return UnaryOp::Sinh;
    case Opcode::Cosh: return UnaryOp::Cosh;
    case Opcode::Asinh: return UnaryOp::Asinh;
    case Opcode::Acosh: return UnaryOp::Acosh;
    case Opcode::Atanh: return UnaryOp::Atanh;
    case Opcode::Erf: return UnaryOp::Erf;
    case Opcode::Floor: return UnaryOp::Floor;
    case Opcode::Ceil: return UnaryOp::Ceil;
    case Opcode::RoundNearestAfz: return UnaryOp::RoundAfz;
    case Opcode::RoundNearestEven: return UnaryOp::RoundEven;
    case Opcode::Sign: return UnaryOp::Sign;
    case Opcode::Not: return UnaryOp::Not;
    case Opcode::Clz: return UnaryOp::Clz;
    case Opcode::Popcnt: return UnaryOp::Popcnt;
    default: return std::nullopt;
  }
}

std::optional<BinaryOp> binaryOpOf(Opcode op) {
  switch (op) {
    case Opcode::Add: return BinaryOp::Add;
    case Opcode::Subtract: return BinaryOp::Sub;
    case Opcode::Multiply: return BinaryOp::Mul;
    case Opcode::Divide: return BinaryOp::Div;
    case Opcode::Remainder: return BinaryOp::Rem;
    case Opcode::Maximum: return BinaryOp::Max;
    case Opcode::Minimum: return BinaryOp::Min;
    case Opcode::Power: return BinaryOp::Pow;
    case Opcode::Atan2: return BinaryOp::Atan2;
    case Opcode::And: return BinaryOp::And;
    case Opcode::Or: return BinaryOp::Or;
    case Opcode::Xor: return BinaryOp::Xor;
    case Opcode::ShiftLeft: return BinaryOp::Shl;
    case Opcode::ShiftRightArithmetic: return BinaryOp::Shra;
    case Opcode::ShiftRightLogical: return BinaryOp::Shrl;
    default: return std::nullopt;
  }
}

template <size_t N>
struct Bytes {
  uint8_t b[N];
};

template <size_t N>
void selectLoop(const uint8_t* p, bool scalarPred, const void* t, const void* f, void* out, int64_t n) {
  auto* a = static_cast<const Bytes<N>*>(t);
  auto* b = static_cast<const Bytes<N>*>(f);
  auto* o = static_cast<Bytes<N>*>(out);
  if (scalarPred) {
    std::memcpy(out, p[0] ? t : f, static_cast<size_t>(n) * N);
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? a[i] : b[i];
}

void selectBytes(int bytes, const uint8_t* p, bool scalarPred, const void* t, const void* f, void* out, int64_t n) {
  switch (bytes) {
    case 1: selectLoop<1>(p, scalarPred, t, f, out, n); break;
    case 2: selectLoop<2>(p, scalarPred, t, f, out, n); break;
    case 4: selectLoop<4>(p, scalarPred, t, f, out, n); break;
    case 8: selectLoop<8>(p, scalarPred, t, f, out, n); break;
    default: selectLoop<16>(p, scalarPred, t, f, out, n); break;
  }
}

// XLA's reduce-precision on the bits of an IEEE float.
template <typename F, typename U, int kMant, int kExp>
void reducePrecisionLoop(F* data, int64_t n, int64_t expBits, int64_t mantBits) {
  const U signBit = U(1) << (kMant + kExp);
  const U expMask = ((U(1) << kExp) - 1) << kMant;
  for (int64_t i = 0; i < n; ++i) {
    F in = data[i];
    U x = std::bit_cast<U>(in);
    if (mantBits < kMant) {
      const U lastBit = U(1) << (kMant - mantBits);
      const U baseBias = (lastBit >> 1) - 1;
      const U bias = ((x & lastBit) >> (kMant - mantBits)) + baseBias;
      x = (x + bias) & ~(lastBit - 1);
    }
    if (expBits < kExp) {
      const U sign = x & signBit;
      const U e = x & expMask;
      const int64_t bias = (int64_t{1} << (kExp - 1)) - 1;
      const int64_t reducedBias = (int64_t{1} << (expBits - 1)) - 1;
      const U maxE = static_cast<U>(bias + reducedBias) << kMant;
      const U minE = static_cast<U>(bias - reducedBias) << kMant;
      if (e > maxE) x = sign | expMask;
      else if (e <= minE) x = sign;
    }
    F out = std::bit_cast<F>(x);
    if (std::isnan(in)) out = mantBits > 0 ? in : std::numeric_limits<F>::infinity();
    data[i] = out;
  }
}

}  // namespace

Value broadcastScalar(const Value& scalar, const std::vector<int64_t>& dims) {
  Value out = Value::array(scalar.type(), dims);
  fillElements(static_cast<size_t>(out.elementBytes()), out.mutableRaw(), out.count(), scalar.raw());
  return out;
}

Value sliceFlat(const Value& v, int64_t start, int64_t count) {
  Value out = Value::array(v.type(), {count});
  std::memcpy(out.mutableRaw(), v.raw() + start * v.elementBytes(), static_cast<size_t>(count * v.elementBytes()));
  return out;
}

void selectInto(Value& into, const Value& from, const std::vector<uint8_t>& mask) {
  selectBytes(into.elementBytes(), mask.data(), false, from.raw(), into.raw(), into.mutableRaw(), into.count());
}

std::optional<Value> binaryArrays(BinaryOp op, const Value& a, const Value& b) {
  auto rep = typeRep(a.type());
  if (!rep) return std::nullopt;
  ComputeView va = computeView(a, *rep), vb = computeView(b, *rep);
  Value out = Value::array(a.type(), a.dims());
  std::vector<float> tmp;
  void* dst = out.mutableRaw();
  if (rep->narrow) {
    tmp.resize(static_cast<size_t>(a.count()));
    dst = tmp.data();
  }
  if (!binaryKernel(op, rep->k, va.data, vb.data, dst, a.count(), rep->bits)) return std::nullopt;
  storeFromCompute(*rep, dst, out);
  return out;
}

Value convertArray(const Value& x, ElementType to) {
  if (x.type() == to) return x;
  auto fr = typeRep(x.type());
  auto tr = typeRep(to);
  Value out = Value::array(to, x.dims());
  const int64_t n = x.count();
  ComputeView src = computeView(x, *fr);
  if (tr->narrow) {
    if (fr->k == KType::F32) {
      narrowFloats(*tr->narrow, static_cast<const float*>(src.data), out.mutableRaw(), n);
    } else if (fr->k == KType::F64) {
      narrowFloatsFromF64(*tr->narrow, static_cast<const double*>(src.data), out.mutableRaw(), n);
    } else {
      std::vector<double> d(static_cast<size_t>(n));
      convertKernel(fr->k, KType::F64, src.data, d.data(), n);
      narrowFloatsFromF64(*tr->narrow, d.data(), out.mutableRaw(), n);
    }
    return out;
  }
  const bool narrowInt = tr->k != KType::Pred && tr->bits < kTypeBytes(tr->k) * 8;
  if (narrowInt && (fr->k == KType::F32 || fr->k == KType::F64 || isComplexK(fr->k))) {
    // Saturate to the narrow range before converting.
    std::vector<double> d(static_cast<size_t>(n));
    convertKernel(fr->k, KType::F64, src.data, d.data(), n);
    const bool sgn = isSignedK(tr->k);
    const double lo = sgn ? -std::ldexp(1.0, tr->bits - 1) : 0.0;
    const double hi = sgn ? std::ldexp(1.0, tr->bits - 1) - 1 : std::ldexp(1.0, tr->bits) - 1;
    for (double& v : d) v = std::isnan(v) ? 0.0 : std::min(std::max(std::trunc(v), lo), hi);
    convertKernel(KType::F64, tr->k, d.data(), out.mutableRaw(), n);
    return out;
  }
  convertKernel(fr->k, tr->k, src.data, out.mutableRaw(), n);
  if (narrowInt) truncateIntKernel(tr->k, out.mutableRaw(), n, tr->bits);
  return out;
}

namespace {

// bitcast-convert: reinterpret element bits (little-endian order for splits and joins).
std::optional<Value> bitcastConvert(const Value& x, ElementType to, const std::vector<int64_t>& outDims) {
  const auto& fi = hlo::elementTypeInfo(x.type());
  const auto& ti = hlo::elementTypeInfo(to);
  Value out = Value::array(to, outDims);
  const int64_t inBits = x.count() * fi.bitWidth;
  if (inBits != out.count() * ti.bitWidth) return std::nullopt;
  const bool byteExact = fi.bitWidth % 8 == 0 && ti.bitWidth % 8 == 0 && !fi.isComplex && !ti.isComplex;
  if (byteExact || (fi.isComplex && ti.isComplex)) {
    std::memcpy(out.mutableRaw(), x.raw(), out.byteSize());
    return out;
  }
  if (fi.bitWidth % 8 == 0 && ti.bitWidth % 8 == 0) {
    // Complex <-> real pairs: storage is (re, im) contiguous, so bytes line up.
    std::memcpy(out.mutableRaw(), x.raw(), std::min(out.byteSize(), x.byteSize()));
    return out;
  }
  // Sub-byte: a little-endian bit stream.
  std::vector<uint8_t> stream(static_cast<size_t>((inBits + 7) / 8 + 8), 0);
  int64_t pos = 0;
  for (int64_t i = 0; i < x.count(); ++i) {
    uint64_t v = 0;
    std::memcpy(&v, x.raw() + i * fi.byteSize, static_cast<size_t>(std::min(fi.byteSize, 8)));
    for (int b = 0; b < fi.bitWidth; ++b, ++pos)
      if ((v >> b) & 1) stream[static_cast<size_t>(pos / 8)] |= static_cast<uint8_t>(1u << (pos % 8));
  }
  pos = 0;
  for (int64_t i = 0; i < out.count(); ++i) {
    uint64_t v = 0;
    for (int b = 0; b < ti.bitWidth; ++b, ++pos)
      if ((stream[static_cast<size_t>(pos / 8)] >> (pos % 8)) & 1) v |= uint64_t{1} << b;
    if (ti.isInteger && ti.isSigned && ti.bitWidth < 64 && ((v >> (ti.bitWidth - 1)) & 1))
      v |= ~((uint64_t{1} << ti.bitWidth) - 1);
    std::memcpy(out.mutableRaw() + i * ti.byteSize, &v, static_cast<size_t>(std::min(ti.byteSize, 8)));
  }
  return out;
}

}  // namespace

std::optional<Value> Interp::evalElementwise(const Instruction& inst, std::span<const Value* const> ops) {
  const Opcode op = inst.opcode();
  const ElementType outType = inst.shape().elementType();
  const Value& x = *ops[0];
  auto rep = typeRep(x.type());
  if (!rep) {
    error(inst, "operand type is not an array element type");
    return std::nullopt;
  }
  auto sameCounts = [&]() {
    for (const Value* v : ops)
      if (v->count() != x.count()) return error(inst, "operands have different element counts");
    return true;
  };
  auto typeError = [&]() {
    error(inst, fmt::format("not defined for element type {}", hlo::elementTypeName(x.type())));
    return std::nullopt;
  };

  if (auto u = unaryOpOf(op)) {
    if (rep->narrow == std::nullopt && isComplexK(rep->k) && *u == UnaryOp::Abs) {
      Value out = Value::array(outType, x.dims());
      complexPartKernel(2, rep->k, x.raw(), out.mutableRaw(), x.count());
      return out;
    }
    ComputeView v = computeView(x, *rep);
    Value out = Value::array(outType, x.dims());
    std::vector<float> tmp;
    void* dst = out.mutableRaw();
    if (rep->narrow) {
      tmp.resize(static_cast<size_t>(x.count()));
      dst = tmp.data();
    }
    if (!unaryKernel(*u, rep->k, v.data, dst, x.count(), rep->bits)) return typeError();
    storeFromCompute(*rep, dst, out);
    return out;
  }
  if (auto b = binaryOpOf(op)) {
    if (!sameCounts()) return std::nullopt;
    if (ops[1]->type() != x.type()) {
      error(inst, "operands have different element types");
      return std::nullopt;
    }
    auto r = binaryArrays(*b, x, *ops[1]);
    if (!r) return typeError();
    return r;
  }
  switch (op) {
    case Opcode::Compare: {
      if (!sameCounts()) return std::nullopt;
      auto dir = compareDir(inst.attrs().comparisonDirection);
      ComputeView a = computeView(x, *rep), b = computeView(*ops[1], *rep);
      Value out = Value::array(ElementType::Pred, x.dims());
      bool total = inst.attrs().comparisonType == hlo::ComparisonType::TotalOrder;
      if (!compareKernel(*dir, total, rep->k, a.data, b.data, out.mutableAs<uint8_t>(), x.count()))
        return typeError();
      return out;
    }
    case Opcode::IsFinite: {
      ComputeView a = computeView(x, *rep);
      Value out = Value::array(ElementType::Pred, x.dims());
      if (!isFiniteKernel(rep->k, a.data, out.mutableAs<uint8_t>(), x.count())) return typeError();
      return out;
    }
    case Opcode::Real:
    case Opcode::Imag: {
      if (isComplexK(rep->k)) {
        Value out = Value::array(outType, x.dims());
        complexPartKernel(op == Opcode::Real ? 0 : 1, rep->k, x.raw(), out.mutableRaw(), x.count());
        return out;
      }
      if (op == Opcode::Real) return x;
      return Value::zeros(x.type(), x.dims());
    }
    case Opcode::Complex: {
      if (!sameCounts()) return std::nullopt;
      Value out = Value::array(outType, x.dims());
      if (!makeComplexKernel(rep->k, x.raw(), ops[1]->raw(), out.mutableRaw(), x.count())) return typeError();
      return out;
    }
    case Opcode::Mulhi: {
      if (!sameCounts()) return std::nullopt;
      Value out = Value::array(outType, x.dims());
      if (rep->bits < 8 || !mulhiKernel(rep->k, x.raw(), ops[1]->raw(), out.mutableRaw(), x.count())) return typeError();
      return out;
    }
    case Opcode::Select: {
      const Value& p = x;
      const Value& t = *ops[1];
      const Value& f = *ops[2];
      if (t.count() != f.count() || (p.count() != t.count() && p.count() != 1) || t.type() != f.type()) {
        error(inst, "operands of select do not match");
        return std::nullopt;
      }
      Value out = Value::array(t.type(), t.dims());
      selectBytes(t.elementBytes(), p.raw(), p.count() == 1 && t.count() != 1, t.raw(), f.raw(), out.mutableRaw(),
                  t.count());
      return out;
    }
    case Opcode::Clamp: {
      const Value& v = *ops[1];
      Value lo = ops[0]->count() == v.count() ? *ops[0] : broadcastScalar(*ops[0], v.dims());
      Value hi = ops[2]->count() == v.count() ? *ops[2] : broadcastScalar(*ops[2], v.dims());
      if (lo.count() != v.count() || hi.count() != v.count() || lo.type() != v.type() || hi.type() != v.type()) {
        error(inst, "bounds of clamp must be scalars or match the operand");
        return std::nullopt;
      }
      auto m = binaryArrays(BinaryOp::Max, v, lo.reshaped(v.dims()));
      if (!m) return typeError();
      auto r = binaryArrays(BinaryOp::Min, *m, hi.reshaped(v.dims()));
      if (!r) return typeError();
      return r;
    }
    case Opcode::Convert: {
      if (!typeRep(outType)) {
        error(inst, "result type is not an array element type");
        return std::nullopt;
      }
      return convertArray(x, outType);
    }
    case Opcode::BitcastConvert: {
      std::vector<int64_t> dims = x.dims();
      const int fb = hlo::elementTypeInfo(x.type()).bitWidth, tb = hlo::elementTypeInfo(outType).bitWidth;
      if (lanes_ == 0) dims = inst.shape().dimensions();
      else if (fb != tb) {
        error(inst, "width-changing bitcast-convert inside a lane-wise computation");
        return std::nullopt;
      }
      auto r = bitcastConvert(x, outType, dims);
      if (!r) {
        error(inst, "operand and result bit sizes differ");
        return std::nullopt;
      }
      return r;
    }
    case Opcode::ReducePrecision: {
      const int64_t e = inst.attrs().exponentBits, m = inst.attrs().mantissaBits;
      if (e < 1 || m < 0) {
        error(inst, "exponent_bits must be >= 1 and mantissa_bits >= 0");
        return std::nullopt;
      }
      if (rep->k == KType::F64) {
        Value out = cloneArray(x);
        reducePrecisionLoop<double, uint64_t, 52, 11>(out.mutableAs<double>(), x.count(), std::min<int64_t>(e, 11),
                                                      std::min<int64_t>(m, 52));
        return out;
      }
      if (rep->k != KType::F32) return typeError();
      ComputeView v = computeView(x, *rep);
      std::vector<float> buf(static_cast<const float*>(v.data), static_cast<const float*>(v.data) + x.count());
      reducePrecisionLoop<float, uint32_t, 23, 8>(buf.data(), x.count(), std::min<int64_t>(e, 8),
                                                  std::min<int64_t>(m, 23));
      Value out = Value::array(x.type(), x.dims());
      storeFromCompute(*rep, buf.data(), out);
      return out;
    }
    default: break;
  }
  error(inst, "elementwise opcode is not supported by the interpreter");
  return std::nullopt;
}

std::optional<Value> Interp::evalMap(const Instruction& inst, std::span<const Value* const> ops) {
  const hlo::Computation* c = inst.toApply();
  if (!c || ops.empty()) {
    error(inst, "map needs operands and to_apply");
    return std::nullopt;
  }
  const int64_t n = ops[0]->count();
  std::vector<Value> args;
  for (const Value* v : ops) {
    if (v->count() != n) {
      error(inst, "operands have different element counts");
      return std::nullopt;
    }
    args.push_back(v->reshaped({n}));
  }
  auto r = callLanes(*c, args, n);
  if (!r) return std::nullopt;
  return (*r)[0].reshaped(ops[0]->dims());
}

}  // namespace tpu::eval
