// Register-pair instructions: 64-bit integers and f64 held as (low word,
// high word) vector registers, computed by the simulator's own code on the
// reassembled 64-bit lanes: the emulated pair unit's basic operations (f64
// add ... sqrt, rounding to integers, 64-bit multiply, divide, shifts,
// compares), the converts (XLA's rules: float to integer truncates and
// saturates, NaN gives 0; narrow floats through support/float_format.h).
// f64 library functions have no rows: llo-gen expands them into these
// (codegen kernels/math_f64.cpp). Nothing here calls the interpreter.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "sim/machine.h"
#include "support/float_format.h"

namespace tpu::sim {

namespace {

using isa::Opcode;

enum class PairShape : uint8_t { None, Binary, MulHigh, Unary, Compare, FromF32, ToF32Word };
// Lane types of the converts.
enum class Lane : uint8_t { S64, U64, F64, F32, S32, U32 };

struct PairOp {
  PairShape shape = PairShape::None;
  Lane from = Lane::U64, to = Lane::U64;  // converts only
};

PairOp pairOp(Opcode op) {
  auto cvt = [](PairShape s, Lane from, Lane to) { return PairOp{s, from, to}; };
  switch (op) {
    case Opcode::VMulhiS64:
    case Opcode::VMulhiU64:
      return {PairShape::MulHigh};
    case Opcode::VMulI64:
    case Opcode::VDivS64:
    case Opcode::VDivU64:
    case Opcode::VRemS64:
    case Opcode::VRemU64:
    case Opcode::VShlI64:
    case Opcode::VShrI64:
    case Opcode::VSraI64:
    case Opcode::VAddF64:
    case Opcode::VSubF64:
    case Opcode::VMulF64:
    case Opcode::VDivF64:
    case Opcode::VRemF64:
    case Opcode::VMaxF64:
    case Opcode::VMinF64:
      return {PairShape::Binary};
    case Opcode::VCmpEqS64:
    case Opcode::VCmpNeS64:
    case Opcode::VCmpLtS64:
    case Opcode::VCmpLeS64:
    case Opcode::VCmpGtS64:
    case Opcode::VCmpGeS64:
    case Opcode::VCmpLtU64:
    case Opcode::VCmpLeU64:
    case Opcode::VCmpGtU64:
    case Opcode::VCmpGeU64:
    case Opcode::VCmpEqF64:
    case Opcode::VCmpNeF64:
    case Opcode::VCmpLtF64:
    case Opcode::VCmpLeF64:
    case Opcode::VCmpGtF64:
    case Opcode::VCmpGeF64:
      return {PairShape::Compare};
    case Opcode::VSqrtF64:
    case Opcode::VRsqrtF64:
    case Opcode::VFloorF64:
    case Opcode::VCeilF64:
    case Opcode::VRoundF64:
    case Opcode::VRoundAfzF64:
    case Opcode::VSignF64:
      return {PairShape::Unary, Lane::F64, Lane::F64};
    case Opcode::VCvtF64F32:
      return cvt(PairShape::FromF32, Lane::F32, Lane::F64);
    case Opcode::VCvtS64F32:
      return cvt(PairShape::FromF32, Lane::F32, Lane::S64);
    case Opcode::VCvtU64F32:
      return cvt(PairShape::FromF32, Lane::F32, Lane::U64);
    case Opcode::VCvtF64S64:
      return cvt(PairShape::Unary, Lane::S64, Lane::F64);
    case Opcode::VCvtF64U64:
      return cvt(PairShape::Unary, Lane::U64, Lane::F64);
    case Opcode::VCvtS64F64:
      return cvt(PairShape::Unary, Lane::F64, Lane::S64);
    case Opcode::VCvtU64F64:
      return cvt(PairShape::Unary, Lane::F64, Lane::U64);
    case Opcode::VCvtF32F64:
      return cvt(PairShape::ToF32Word, Lane::F64, Lane::F32);
    case Opcode::VCvtF32S64:
      return cvt(PairShape::ToF32Word, Lane::S64, Lane::F32);
    case Opcode::VCvtF32U64:
      return cvt(PairShape::ToF32Word, Lane::U64, Lane::F32);
    case Opcode::VCvtS32F64:
      return cvt(PairShape::ToF32Word, Lane::F64, Lane::S32);
    case Opcode::VCvtU32F64:
      return cvt(PairShape::ToF32Word, Lane::F64, Lane::U32);
    default:
      return {};
  }
}

// 64-bit lanes of a vector register pair, and back. Values go through
// memcpy so the kernels see properly typed objects.
using Lanes64 = std::array<uint64_t, kVregWords>;

void joinPair(const uint32_t* lo, const uint32_t* hi, Lanes64& out) {
  for (int i = 0; i < kVregWords; ++i) out[i] = lo[i] | (static_cast<uint64_t>(hi[i]) << 32);
}

void splitWord(const Lanes64& in, int word, uint32_t* d) {
  for (int i = 0; i < kVregWords; ++i) d[i] = static_cast<uint32_t>(in[i] >> (32 * word));
}

bool isConvert(const PairOp& p) { return p.from != p.to; }

// vcvt.<narrow float>.f64: the format the f64 is rounded to.
std::optional<FloatFormat> narrowFormat(Opcode op) {
  switch (op) {
    case Opcode::VCvtBf16F64:
      return FloatFormat::BF16;
    case Opcode::VCvtF16F64:
      return FloatFormat::F16;
    case Opcode::VCvtF8E4M3FNF64:
      return FloatFormat::F8E4M3FN;
    case Opcode::VCvtF8E5M2F64:
      return FloatFormat::F8E5M2;
    case Opcode::VCvtF8E4M3F64:
      return FloatFormat::F8E4M3;
    case Opcode::VCvtF8E3M4F64:
      return FloatFormat::F8E3M4;
    case Opcode::VCvtF8E4M3FNUZF64:
      return FloatFormat::F8E4M3FNUZ;
    case Opcode::VCvtF8E5M2FNUZF64:
      return FloatFormat::F8E5M2FNUZ;
    case Opcode::VCvtF8E4M3B11FNUZF64:
      return FloatFormat::F8E4M3B11FNUZ;
    case Opcode::VCvtF8E8M0FNUF64:
      return FloatFormat::F8E8M0FNU;
    case Opcode::VCvtF4E2M1FNF64:
      return FloatFormat::F4E2M1FN;
    case Opcode::VCvtF6E2M3FNF64:
      return FloatFormat::F6E2M3FN;
    case Opcode::VCvtF6E3M2FNF64:
      return FloatFormat::F6E3M2FN;
    default:
      return std::nullopt;
  }
}

// The emulated pair unit's basic operations (docs/DESIGN.md, "What the
// f64/i64 pair basics are"), computed by the simulator's own code on the
// reassembled 64-bit lanes rather than by the interpreter's kernels: IEEE
// f64 add, subtract, multiply, divide, fmod, sqrt and 1 / sqrt (host
// double arithmetic, correctly rounded), max and min (NaN if either is NaN,
// -0 below +0), and the 64-bit integer multiply, divide and remainder
// (x / 0 all ones, x % 0 x, INT64_MIN / -1 INT64_MIN, % -1 0), shifts
// (amounts of 64 or more: 0, or the sign) and compares. false: not one.
double asF64(uint64_t v) { return std::bit_cast<double>(v); }
uint64_t bitsOf(double v) { return std::bit_cast<uint64_t>(v); }

double pairMax(double a, double b, bool max) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) == max ? b : a;
  return (a > b) == max ? a : b;
}

bool ownPairBinary(Opcode op, uint64_t a, uint64_t b, uint64_t& r) {
  const double x = asF64(a), y = asF64(b);
  const int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
  switch (op) {
    case Opcode::VAddF64: r = bitsOf(x + y); return true;
    case Opcode::VSubF64: r = bitsOf(x - y); return true;
    case Opcode::VMulF64: r = bitsOf(x * y); return true;
    case Opcode::VDivF64: r = bitsOf(x / y); return true;
    case Opcode::VRemF64: r = bitsOf(std::fmod(x, y)); return true;
    case Opcode::VMaxF64: r = bitsOf(pairMax(x, y, true)); return true;
    case Opcode::VMinF64: r = bitsOf(pairMax(x, y, false)); return true;
    case Opcode::VMulI64: r = a * b; return true;
    case Opcode::VDivU64: r = b == 0 ? ~uint64_t{0} : a / b; return true;
    case Opcode::VRemU64: r = b == 0 ? a : a % b; return true;
    case Opcode::VDivS64:
      if (b == 0) r = ~uint64_t{0};
      else if (sb == -1) r = uint64_t{0} - a;  // wraps INT64_MIN to itself
      else r = static_cast<uint64_t>(sa / sb);
      return true;
    case Opcode::VRemS64:
      r = b == 0 ? a : sb == -1 ? 0 : static_cast<uint64_t>(sa % sb);
      return true;
    case Opcode::VShlI64: r = b >= 64 ? 0 : a << b; return true;
    case Opcode::VShrI64: r = b >= 64 ? 0 : a >> b; return true;
    case Opcode::VSraI64: r = static_cast<uint64_t>(b >= 64 ? (sa < 0 ? -1 : 0) : sa >> b); return true;
    default: return false;
  }
}

// Ties to even, infinities and NaN (payload kept) unchanged, -0.x to -0.
double roundHalfEven(double x) {
  if (!std::isfinite(x)) return x;
  double r = std::floor(x);
  double d = x - r;
  if (d > 0.5 || (d == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  return std::copysign(r, x);
}

bool ownPairUnary(Opcode op, uint64_t a, uint64_t& r) {
  const double x = asF64(a);
  switch (op) {
    case Opcode::VSqrtF64: r = bitsOf(std::sqrt(x)); return true;
    case Opcode::VRsqrtF64: r = bitsOf(1.0 / std::sqrt(x)); return true;
    case Opcode::VFloorF64: r = bitsOf(std::floor(x)); return true;
    case Opcode::VCeilF64: r = bitsOf(std::ceil(x)); return true;
    case Opcode::VRoundF64: r = bitsOf(roundHalfEven(x)); return true;
    case Opcode::VRoundAfzF64: r = bitsOf(std::round(x)); return true;
    case Opcode::VSignF64: r = (std::isnan(x) || x == 0) ? a : bitsOf(std::copysign(1.0, x)); return true;
    default: return false;
  }
}

// Float to integer as XLA converts: NaN gives 0, out of range saturates,
// the rest truncates toward zero.
template <typename I>
I saturatingInt(double x) {
  if (std::isnan(x)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hiExclusive = static_cast<double>(std::numeric_limits<I>::max()) + 1.0;  // a power of two
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hiExclusive) return std::numeric_limits<I>::max();
  return static_cast<I>(std::trunc(x));
}

// One lane converted: `a` holds the source (64 bits, or an f32's bits),
// the result's bits come back (64 bits, or one 32-bit word).
uint64_t convertLane(Lane from, Lane to, uint64_t a) {
  double x = 0;  // float sources as double (f32 widens exactly)
  bool isFloat = from == Lane::F64 || from == Lane::F32;
  if (from == Lane::F64) x = asF64(a);
  if (from == Lane::F32) x = std::bit_cast<float>(static_cast<uint32_t>(a));
  switch (to) {
    case Lane::F64:
      if (from == Lane::S64) return bitsOf(static_cast<double>(static_cast<int64_t>(a)));
      if (from == Lane::U64) return bitsOf(static_cast<double>(a));
      return bitsOf(x);
    case Lane::F32: {
      float v = from == Lane::S64   ? static_cast<float>(static_cast<int64_t>(a))
                : from == Lane::U64 ? static_cast<float>(a)
                                    : static_cast<float>(x);
      return std::bit_cast<uint32_t>(v);
    }
    case Lane::S64:
      return isFloat ? static_cast<uint64_t>(saturatingInt<int64_t>(x)) : a;
    case Lane::U64:
      return isFloat ? saturatingInt<uint64_t>(x) : a;
    case Lane::S32:
      return static_cast<uint32_t>(saturatingInt<int32_t>(x));
    case Lane::U32:
      return saturatingInt<uint32_t>(x);
  }
  return 0;
}

// The high 64 bits of the 128-bit product, signed or unsigned.
uint64_t mulHigh(Opcode op, uint64_t a, uint64_t b) {
  if (op == Opcode::VMulhiU64) return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
  __int128 p = static_cast<__int128>(static_cast<int64_t>(a)) * static_cast<int64_t>(b);
  return static_cast<uint64_t>(static_cast<unsigned __int128>(p) >> 64);
}

std::optional<bool> ownPairCompare(Opcode op, uint64_t a, uint64_t b) {
  const double x = asF64(a), y = asF64(b);
  const int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
  switch (op) {
    case Opcode::VCmpEqS64: return a == b;
    case Opcode::VCmpNeS64: return a != b;
    case Opcode::VCmpLtS64: return sa < sb;
    case Opcode::VCmpLeS64: return sa <= sb;
    case Opcode::VCmpGtS64: return sa > sb;
    case Opcode::VCmpGeS64: return sa >= sb;
    case Opcode::VCmpLtU64: return a < b;
    case Opcode::VCmpLeU64: return a <= b;
    case Opcode::VCmpGtU64: return a > b;
    case Opcode::VCmpGeU64: return a >= b;
    case Opcode::VCmpEqF64: return x == y;
    case Opcode::VCmpNeF64: return x != y;
    case Opcode::VCmpLtF64: return x < y;
    case Opcode::VCmpLeF64: return x <= y;
    case Opcode::VCmpGtF64: return x > y;
    case Opcode::VCmpGeF64: return x >= y;
    default: return std::nullopt;
  }
}

}  // namespace

bool Machine::isPairOp(Opcode opcode) const {
  return pairOp(opcode).shape != PairShape::None || narrowFormat(opcode).has_value();
}

bool Machine::execPair(const DecodedOp& op) {
  PairOp p = pairOp(op.opcode);
  Lanes64 a{}, b{}, r{};
  if (std::optional<FloatFormat> fmt = narrowFormat(op.opcode)) {
    // Rounded once from f64 to the format's code, then widened to f32 (the
    // register form of narrow floats): XLA's convert.
    joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
    for (int i = 0; i < kVregWords; ++i) {
      float f = static_cast<float>(decodeFloat(*fmt, encodeFloat(*fmt, asF64(a[i]))));
      vregs_[op.d].w[i] = std::bit_cast<uint32_t>(f);
    }
    return true;
  }
  switch (p.shape) {
    case PairShape::Binary:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      joinPair(vregs_[op.b.reg].w, vregs_[op.bh.reg].w, b);
      for (int i = 0; i < kVregWords; ++i)
        if (!ownPairBinary(op.opcode, a[i], b[i], r[i]))
          return failf(fmt::format("internal: {} is not a pair binary op", op.desc->mnemonic));
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::MulHigh:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      joinPair(vregs_[op.b.reg].w, vregs_[op.bh.reg].w, b);
      for (int i = 0; i < kVregWords; ++i) r[i] = mulHigh(op.opcode, a[i], b[i]);
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::Unary:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      for (int i = 0; i < kVregWords; ++i) {
        if (isConvert(p)) r[i] = convertLane(p.from, p.to, a[i]);
        else if (!ownPairUnary(op.opcode, a[i], r[i]))
          return failf(fmt::format("internal: {} is not a pair unary op", op.desc->mnemonic));
      }
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::Compare: {
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      joinPair(vregs_[op.b.reg].w, vregs_[op.bh.reg].w, b);
      uint32_t* d = vmasks_[op.d].w;
      for (int i = 0; i < kVregWords; ++i) {
        std::optional<bool> c = ownPairCompare(op.opcode, a[i], b[i]);
        if (!c) return failf(fmt::format("internal: {} is not a pair compare", op.desc->mnemonic));
        d[i] = *c ? 0xFFFFFFFFu : 0u;
      }
      return true;
    }
    case PairShape::FromF32:
      for (int i = 0; i < kVregWords; ++i) r[i] = convertLane(p.from, p.to, vregs_[op.a.reg].w[i]);
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::ToF32Word:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      for (int i = 0; i < kVregWords; ++i) vregs_[op.d].w[i] = static_cast<uint32_t>(convertLane(p.from, p.to, a[i]));
      return true;
    case PairShape::None:
      break;
  }
  return failf(fmt::format("internal: {} is not a register-pair op", op.desc->mnemonic));
}

}  // namespace tpu::sim
