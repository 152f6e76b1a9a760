// Register-pair instructions: 64-bit integers and f64 held as (low word,
// high word) vector registers. The basic operations (the emulated pair
// unit: f64 add ... sqrt, 64-bit multiply, divide, shifts, compares) are
// computed here; the f64 library rows (log, sin, ... pow, atan2) and the
// converts still call the interpreter's elementwise kernels
// (eval/elementwise.h), so their results are the interpreter's bit for
// bit, NaN payloads and libm rounding included.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "eval/elementwise.h"
#include "eval/kernels.h"
#include "sim/machine.h"

namespace tpu::sim {

using eval::BinaryOp;
using eval::CompareDir;
using eval::KType;
using eval::UnaryOp;
using isa::Opcode;

namespace {

enum class PairShape : uint8_t { None, Binary, MulHigh, Unary, Compare, FromF32, ToF32Word };

struct PairOp {
  PairShape shape = PairShape::None;
  KType type = KType::U64;  // operand type (Binary, Unary, Compare), source type (converts)
  KType to = KType::U64;    // result type of converts
  BinaryOp binary = BinaryOp::Add;
  UnaryOp unary = UnaryOp::Abs;
  CompareDir dir = CompareDir::Eq;
};

PairOp pairOp(Opcode op) {
  auto bin = [](BinaryOp b, KType t) {
    return PairOp{PairShape::Binary, t, t, b, UnaryOp::Abs, CompareDir::Eq};
  };
  auto un = [](UnaryOp u) {
    return PairOp{PairShape::Unary, KType::F64, KType::F64, BinaryOp::Add, u, CompareDir::Eq};
  };
  auto cmp = [](CompareDir d, KType t) {
    return PairOp{PairShape::Compare, t, t, BinaryOp::Add, UnaryOp::Abs, d};
  };
  // Converts: a pair (or an f32 register, FromF32) in, a pair or one 32-bit word out.
  auto cvt = [](PairShape s, KType from, KType to) {
    return PairOp{s, from, to, BinaryOp::Add, UnaryOp::Abs, CompareDir::Eq};
  };
  switch (op) {
    case Opcode::VMulI64:
      return bin(BinaryOp::Mul, KType::U64);
    case Opcode::VMulhiS64:
      return PairOp{PairShape::MulHigh, KType::S64, KType::S64};
    case Opcode::VMulhiU64:
      return PairOp{PairShape::MulHigh, KType::U64, KType::U64};
    case Opcode::VDivS64:
      return bin(BinaryOp::Div, KType::S64);
    case Opcode::VDivU64:
      return bin(BinaryOp::Div, KType::U64);
    case Opcode::VRemS64:
      return bin(BinaryOp::Rem, KType::S64);
    case Opcode::VRemU64:
      return bin(BinaryOp::Rem, KType::U64);
    case Opcode::VShlI64:
      return bin(BinaryOp::Shl, KType::U64);
    case Opcode::VShrI64:
      return bin(BinaryOp::Shrl, KType::U64);
    case Opcode::VSraI64:
      return bin(BinaryOp::Shra, KType::S64);
    case Opcode::VCmpEqS64:
      return cmp(CompareDir::Eq, KType::S64);
    case Opcode::VCmpNeS64:
      return cmp(CompareDir::Ne, KType::S64);
    case Opcode::VCmpLtS64:
      return cmp(CompareDir::Lt, KType::S64);
    case Opcode::VCmpLeS64:
      return cmp(CompareDir::Le, KType::S64);
    case Opcode::VCmpGtS64:
      return cmp(CompareDir::Gt, KType::S64);
    case Opcode::VCmpGeS64:
      return cmp(CompareDir::Ge, KType::S64);
    case Opcode::VCmpLtU64:
      return cmp(CompareDir::Lt, KType::U64);
    case Opcode::VCmpLeU64:
      return cmp(CompareDir::Le, KType::U64);
    case Opcode::VCmpGtU64:
      return cmp(CompareDir::Gt, KType::U64);
    case Opcode::VCmpGeU64:
      return cmp(CompareDir::Ge, KType::U64);
    case Opcode::VCmpEqF64:
      return cmp(CompareDir::Eq, KType::F64);
    case Opcode::VCmpNeF64:
      return cmp(CompareDir::Ne, KType::F64);
    case Opcode::VCmpLtF64:
      return cmp(CompareDir::Lt, KType::F64);
    case Opcode::VCmpLeF64:
      return cmp(CompareDir::Le, KType::F64);
    case Opcode::VCmpGtF64:
      return cmp(CompareDir::Gt, KType::F64);
    case Opcode::VCmpGeF64:
      return cmp(CompareDir::Ge, KType::F64);
    case Opcode::VAddF64:
      return bin(BinaryOp::Add, KType::F64);
    case Opcode::VSubF64:
      return bin(BinaryOp::Sub, KType::F64);
    case Opcode::VMulF64:
      return bin(BinaryOp::Mul, KType::F64);
    case Opcode::VDivF64:
      return bin(BinaryOp::Div, KType::F64);
    case Opcode::VRemF64:
      return bin(BinaryOp::Rem, KType::F64);
    case Opcode::VMaxF64:
      return bin(BinaryOp::Max, KType::F64);
    case Opcode::VMinF64:
      return bin(BinaryOp::Min, KType::F64);
    case Opcode::VPowF64:
      return bin(BinaryOp::Pow, KType::F64);
    case Opcode::VAtan2F64:
      return bin(BinaryOp::Atan2, KType::F64);
    case Opcode::VSqrtF64:
      return un(UnaryOp::Sqrt);
    case Opcode::VRsqrtF64:
      return un(UnaryOp::Rsqrt);
    case Opcode::VCbrtF64:
      return un(UnaryOp::Cbrt);
    case Opcode::VExpF64:
      return un(UnaryOp::Exp);
    case Opcode::VExpm1F64:
      return un(UnaryOp::Expm1);
    case Opcode::VLogF64:
      return un(UnaryOp::Log);
    case Opcode::VLog1pF64:
      return un(UnaryOp::Log1p);
    case Opcode::VTanhF64:
      return un(UnaryOp::Tanh);
    case Opcode::VLogisticF64:
      return un(UnaryOp::Logistic);
    case Opcode::VSinF64:
      return un(UnaryOp::Sin);
    case Opcode::VCosF64:
      return un(UnaryOp::Cos);
    case Opcode::VTanF64:
      return un(UnaryOp::Tan);
    case Opcode::VAtanF64:
      return un(UnaryOp::Atan);
    case Opcode::VErfF64:
      return un(UnaryOp::Erf);
    case Opcode::VFloorF64:
      return un(UnaryOp::Floor);
    case Opcode::VCeilF64:
      return un(UnaryOp::Ceil);
    case Opcode::VRoundF64:
      return un(UnaryOp::RoundEven);
    case Opcode::VRoundAfzF64:
      return un(UnaryOp::RoundAfz);
    case Opcode::VSignF64:
      return un(UnaryOp::Sign);
    case Opcode::VAcosF64:
      return un(UnaryOp::Acos);
    case Opcode::VAcoshF64:
      return un(UnaryOp::Acosh);
    case Opcode::VAsinF64:
      return un(UnaryOp::Asin);
    case Opcode::VAsinhF64:
      return un(UnaryOp::Asinh);
    case Opcode::VAtanhF64:
      return un(UnaryOp::Atanh);
    case Opcode::VCoshF64:
      return un(UnaryOp::Cosh);
    case Opcode::VSinhF64:
      return un(UnaryOp::Sinh);
    case Opcode::VCvtF64F32:
      return cvt(PairShape::FromF32, KType::F32, KType::F64);
    case Opcode::VCvtS64F32:
      return cvt(PairShape::FromF32, KType::F32, KType::S64);
    case Opcode::VCvtU64F32:
      return cvt(PairShape::FromF32, KType::F32, KType::U64);
    case Opcode::VCvtF64S64:
      return cvt(PairShape::Unary, KType::S64, KType::F64);
    case Opcode::VCvtF64U64:
      return cvt(PairShape::Unary, KType::U64, KType::F64);
    case Opcode::VCvtS64F64:
      return cvt(PairShape::Unary, KType::F64, KType::S64);
    case Opcode::VCvtU64F64:
      return cvt(PairShape::Unary, KType::F64, KType::U64);
    case Opcode::VCvtF32F64:
      return cvt(PairShape::ToF32Word, KType::F64, KType::F32);
    case Opcode::VCvtF32S64:
      return cvt(PairShape::ToF32Word, KType::S64, KType::F32);
    case Opcode::VCvtF32U64:
      return cvt(PairShape::ToF32Word, KType::U64, KType::F32);
    case Opcode::VCvtS32F64:
      return cvt(PairShape::ToF32Word, KType::F64, KType::S32);
    case Opcode::VCvtU32F64:
      return cvt(PairShape::ToF32Word, KType::F64, KType::U32);
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

bool isConvert(const PairOp& p) { return p.type != p.to; }

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

bool ownPairUnary(Opcode op, uint64_t a, uint64_t& r) {
  const double x = asF64(a);
  switch (op) {
    case Opcode::VSqrtF64: r = bitsOf(std::sqrt(x)); return true;
    case Opcode::VRsqrtF64: r = bitsOf(1.0 / std::sqrt(x)); return true;
    default: return false;
  }
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
    // Rounded once from f64 to the format's codes, then widened to f32:
    // the interpreter's convert, in the register form of narrow floats.
    joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
    std::array<double, kVregWords> x{};
    std::memcpy(x.data(), a.data(), sizeof x);
    std::array<uint16_t, kVregWords> codes{};  // one or two bytes per code
    std::array<float, kVregWords> f{};
    eval::narrowFloatsFromF64(*fmt, x.data(), codes.data(), kVregWords);
    eval::widenFloats(*fmt, codes.data(), f.data(), kVregWords);
    std::memcpy(vregs_[op.d].w, f.data(), sizeof f);
    return true;
  }
  switch (p.shape) {
    case PairShape::Binary:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      joinPair(vregs_[op.b.reg].w, vregs_[op.bh.reg].w, b);
      if (uint64_t t; ownPairBinary(op.opcode, a[0], b[0], t)) {
        for (int i = 0; i < kVregWords; ++i) ownPairBinary(op.opcode, a[i], b[i], r[i]);
        splitWord(r, op.word, vregs_[op.d].w);
        return true;
      }
      if (!eval::binaryKernel(p.binary, p.type, a.data(), b.data(), r.data(), kVregWords, 64))
        return failf(fmt::format("internal: {} has no host kernel", op.desc->mnemonic));
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::MulHigh:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      joinPair(vregs_[op.b.reg].w, vregs_[op.bh.reg].w, b);
      eval::mulhiKernel(p.type, a.data(), b.data(), r.data(), kVregWords);
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    case PairShape::Unary:
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      if (uint64_t t; !isConvert(p) && ownPairUnary(op.opcode, a[0], t))
        for (int i = 0; i < kVregWords; ++i) ownPairUnary(op.opcode, a[i], r[i]);
      else if (isConvert(p))
        eval::convertKernel(p.type, p.to, a.data(), r.data(), kVregWords);
      else if (!eval::unaryKernel(p.unary, p.type, a.data(), r.data(), kVregWords, 64))
        return failf(fmt::format("internal: {} has no host kernel", op.desc->mnemonic));
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
    case PairShape::FromF32: {
      std::array<float, kVregWords> x{};
      std::memcpy(x.data(), vregs_[op.a.reg].w, sizeof x);
      eval::convertKernel(KType::F32, p.to, x.data(), r.data(), kVregWords);
      splitWord(r, op.word, vregs_[op.d].w);
      return true;
    }
    case PairShape::ToF32Word: {
      joinPair(vregs_[op.a.reg].w, vregs_[op.ah.reg].w, a);
      std::array<uint32_t, kVregWords> x{};
      eval::convertKernel(p.type, p.to, a.data(), x.data(), kVregWords);
      std::memcpy(vregs_[op.d].w, x.data(), sizeof x);
      return true;
    }
    case PairShape::None:
      break;
  }
  return failf(fmt::format("internal: {} is not a register-pair op", op.desc->mnemonic));
}

}  // namespace tpu::sim
