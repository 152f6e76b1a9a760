// End-to-end tests of the element types: HLO text -> llo-gen -> assembler
// -> simulator, compared bit for bit with the reference interpreter. Inputs
// cover each type's whole range (every code of the narrow floats, NaN and
// inf included) so wrapping, saturation and rounding rules are exercised.
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

// moderate: floats in [-2, 2] (for dots, whose sums are compared with a
// tolerance) instead of every code.
hlo::Literal wideRandomLiteral(const hlo::Shape& s, std::mt19937& rng, bool moderate) {
  hlo::Literal l(s);
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(s.elementType());
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<double> real(-300.0, 300.0);
  std::uniform_real_distribution<double> small(-2.0, 2.0);
  for (int64_t k = 0; k < l.elementCount(); ++k) {
    uint32_t r = bits(rng);
    if (moderate && info.isFloat) {
      l.setDouble(k, small(rng));
    } else if (s.elementType() == ElementType::Pred) {
      l.setInt(k, r & 1);
    } else if (s.elementType() == ElementType::F32) {
      // Mostly moderate values (exact integer parts to convert), some huge.
      double v = (r & 7) == 0 ? std::ldexp(real(rng), static_cast<int>(r >> 27)) : real(rng);
      l.setDouble(k, (r & 63) == 1 ? -0.0 : v);
    } else if (s.elementType() == ElementType::F64) {
      // Magnitudes from far below to far above every narrow type's range.
      l.setDouble(k, real(rng) * std::ldexp(1.0, static_cast<int>(r >> 27) - 16));
    } else if (info.isFloat) {
      l.setBits(k, r >> (32 - info.bitWidth));  // every code, specials included
    } else if (info.bitWidth == 64) {
      // Mostly small values, some of the whole range.
      uint64_t wide = (r & 3) == 0 ? (uint64_t{bits(rng)} << 32) | bits(rng) : r % 601;
      if (!info.isSigned) l.setUint(k, wide);
      else l.setInt(k, static_cast<int64_t>(wide) - ((r & 3) == 0 ? 0 : 300));
    } else if (info.bitWidth == 32) {
      l.setInt(k, (r & 3) == 0 ? static_cast<int32_t>(r) : static_cast<int32_t>(r % 601) - 300);
    } else {
      // The top bits: every value of the type (s4 sign-extended, as stored).
      if (info.isSigned) l.setInt(k, static_cast<int32_t>(r) >> (32 - info.bitWidth));
      else l.setUint(k, r >> (32 - info.bitWidth));
    }
  }
  return l;
}

// "" when the simulated results equal the interpreter's byte for byte
// (NaNs compare as NaNs whatever their payload), or for a float tolerance
// `tol` > 0 within |got - want| <= tol * (1 + |want|); otherwise what differs.
std::string compareBitExact(const std::string& text, uint32_t seed = 7, double tol = 0) {
  std::mt19937 rng(seed);
  PipelineRun run =
      runPipeline(text, [&](size_t, const hlo::Shape& shape) { return wideRandomLiteral(shape, rng, tol > 0); });
  if (!run.error.empty()) return run.error;
  const std::vector<hlo::Literal>& args = run.args;
  const std::vector<const hlo::Literal*> want = run.want();
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    hlo::Literal got(w.shape());
    std::memcpy(got.mutableData().data(), run.got[r].data(), got.data().size());
    bool isFloat = hlo::isFloatType(w.shape().elementType());
    for (int64_t k = 0; k < w.elementCount(); ++k) {
      if (got.getBits(k) == w.getBits(k)) continue;
      if (isFloat && std::isnan(got.getDouble(k)) && std::isnan(w.getDouble(k))) continue;
      if (isFloat && tol > 0 && std::fabs(got.getDouble(k) - w.getDouble(k)) <= tol * (1 + std::fabs(w.getDouble(k))))
        continue;
      std::string in;
      for (const hlo::Literal& a : args) in += fmt::format(" 0x{:x}", a.getBits(k % std::max<int64_t>(1, a.elementCount())));
      return fmt::format("result {} element {}: got 0x{:x} ({}) want 0x{:x} ({}); inputs{}", r, k, got.getBits(k),
                         got.getDouble(k), w.getBits(k), w.getDouble(k), in);
    }
  }
  return "";
}

const char* const kTypes[] = {"f32", "bf16", "f16", "s32", "u32", "s16", "u16", "s8", "u8", "pred"};

TEST(Types, ConvertBetweenAllPairs) {
  for (const char* from : kTypes)
    for (const char* to : kTypes) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[4,700] parameter(0)
  ROOT c = {1}[4,700] convert(x)
}})",
                                     from, to);
      EXPECT_EQ(compareBitExact(text), "") << from << " -> " << to;
    }
}

TEST(Types, ArithmeticWrapsAndRounds) {
  for (const char* t : {"f16", "bf16", "s16", "u16", "s8", "u8", "s32", "u32"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[3,500] parameter(0)
  y = {0}[3,500] parameter(1)
  a = {0}[3,500] add(x, y)
  b = {0}[3,500] multiply(a, x)
  c = {0}[3,500] subtract(b, y)
  d = {0}[3,500] maximum(c, x)
  e = {0}[3,500] negate(d)
  ROOT f = {0}[3,500] minimum(e, y)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, IntegerBitOps) {
  EXPECT_EQ(compareBitExact(R"(HloModule m
ENTRY main {
  x = s16[1000] parameter(0)
  y = s8[1000] parameter(1)
  a = s16[1000] abs(x)
  b = s8[1000] abs(y)
  ROOT t = (s16[1000], s8[1000]) tuple(a, b)
})"),
            "");
  for (const char* t : {"s16", "u16", "s8", "u8"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[1000] parameter(0)
  s = {0}[1000] parameter(1)
  n = {0}[1000] not(x)
  a = {0}[1000] negate(x)
  l = {0}[1000] shift-left(x, s)
  r = {0}[1000] shift-right-logical(n, s)
  q = {0}[1000] shift-right-arithmetic(a, s)
  p = {0}[1000] popcnt(l)
  z = {0}[1000] count-leading-zeros(r)
  o = {0}[1000] xor(p, z)
  ROOT t = ({0}[1000], {0}[1000], {0}[1000]) tuple(o, q, n)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, CompareIsUnsignedCorrect) {
  for (const char* t : {"f32", "bf16", "f16", "s32", "u32", "s16", "u16", "s8", "u8"})
    for (const char* dir : {"LT", "GE", "EQ"}) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[2,600] parameter(0)
  y = {0}[2,600] parameter(1)
  c = pred[2,600] compare(x, y), direction={1}
  ROOT s = {0}[2,600] select(c, x, y)
}})",
                                     t, dir);
      EXPECT_EQ(compareBitExact(text), "") << t << " " << dir;
    }
}

// A constant of `type` other than 0 and 1 where the type has one: 3, or
// the most negative value of s1 and s2.
const char* smallConstant(std::string_view type) {
  return type == "s1" ? "-1" : type == "s2" ? "-2" : type == "u1" ? "1" : "3";
}

TEST(Types, ScalarOperandsAndConstants) {
  // A broadcast scalar parameter goes through the scalar unit (SMEM), and
  // constants through literal text: both per type.
  for (const char* t : {"f16", "bf16", "s16", "u16", "s4", "u4", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4",
                        "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn", "s2", "u2",
                        "s1", "u1", "f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[2,300] parameter(0)
  s = {0}[] parameter(1)
  b = {0}[2,300] broadcast(s), dimensions={{}}
  k = {0}[] constant({1})
  kb = {0}[2,300] broadcast(k), dimensions={{}}
  a = {0}[2,300] add(x, b)
  ROOT m = {0}[2,300] multiply(a, kb)
}})",
                                   t, smallConstant(t));
    for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) EXPECT_EQ(compareBitExact(text, seed), "") << t << " seed " << seed;
  }
}

TEST(Types, ReduceS16) {
  EXPECT_EQ(compareBitExact(R"(HloModule m
add {
  a = s16[] parameter(0)
  b = s16[] parameter(1)
  ROOT c = s16[] add(a, b)
}
ENTRY main {
  x = s16[64,300] parameter(0)
  z = s16[] constant(0)
  r = s16[300] reduce(x, z), dimensions={0}, to_apply=add
  ROOT q = s16[64] reduce(x, z), dimensions={1}, to_apply=add
})"),
            "");
}

TEST(Types, ByteFloatsConvertToAndFromF32AndBf16) {
  for (const char* t : {"f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz",
                        "f8e8m0fnu", "f4e2m1fn", "f6e2m3fn", "f6e3m2fn"})
    for (const char* wide : {"f32", "bf16", "f16"}) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[3,400] parameter(0)
  w = {1}[3,400] parameter(1)
  up = {1}[3,400] convert(x)
  down = {0}[3,400] convert(w)
  s = {1}[3,400] add(up, w)
  ROOT t = ({1}[3,400], {0}[3,400], {0}[3,400]) tuple(s, down, x)
}})",
                                     t, wide);
      EXPECT_EQ(compareBitExact(text), "") << t << " / " << wide;
    }
}

TEST(Types, ByteFloatArithmeticRoundsPerOp) {
  for (const char* t : {"f8e4m3fn", "f8e5m2", "f4e2m1fn", "f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[1100] parameter(0)
  y = {0}[1100] parameter(1)
  a = {0}[1100] multiply(x, y)
  b = {0}[1100] add(a, y)
  c = pred[1100] compare(b, x), direction=GT
  i = s32[1100] convert(b)
  ROOT t = ({0}[1100], pred[1100], s32[1100]) tuple(b, c, i)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, SubByteIntegers) {
  for (const char* t : {"s4", "u4", "s2", "u2", "s1", "u1"})
    for (const char* other : {"s32", "u8", "f32", "s16"}) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[2,500] parameter(0)
  y = {0}[2,500] parameter(1)
  w = {1}[2,500] parameter(2)
  a = {0}[2,500] add(x, y)
  m = {0}[2,500] multiply(a, y)
  n = {0}[2,500] convert(w)
  c = pred[2,500] compare(m, n), direction=LT
  up = {1}[2,500] convert(m)
  ROOT t = ({0}[2,500], {0}[2,500], pred[2,500], {1}[2,500]) tuple(m, n, c, up)
}})",
                                     t, other);
      EXPECT_EQ(compareBitExact(text), "") << t << " / " << other;
    }
}

TEST(Types, DotsOfNarrowFloats) {
  // Byte floats are exact in bf16: one MXU pass, only the sum order differs
  // (K = 256: tolerance 1e-5). f16 is not: HIGHEST takes the f32 route.
  for (const char* t : {"f8e4m3fn", "f8e5m2", "f4e2m1fn", "f6e2m3fn", "f6e3m2fn", "bf16"})
    EXPECT_EQ(compareBitExact(fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[16,256] parameter(0)
  b = {0}[256,40] parameter(1)
  ROOT d = f32[16,40] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}})",
                                          t),
                              7, 1e-5),
              "")
        << t;
  EXPECT_EQ(compareBitExact(R"(HloModule m
ENTRY main {
  a = f16[16,256] parameter(0)
  b = f16[256,40] parameter(1)
  ROOT d = f16[16,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
})",
                            7, 2e-3),
            "");
}

TEST(Types, DataMovementAndConstants) {
  // DMA-based ops move each type's bytes; array constants are written as
  // the buffer's initial values; iota converts lane indices per type.
  for (const char* t : {"f16", "s16", "u16", "f8e4m3fn", "f8e5m2", "s4", "u4", "f4e2m1fn", "s2", "u2", "s1",
                        "u1", "f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[6,130] parameter(0)
  tr = {0}[130,6] transpose(x), dimensions={{1,0}}
  sl = {0}[3,100] slice(x), slice={{[1:6:2], [5:105]}}
  k = {0}[3] constant({{{1}, 0, {1}}})
  z = {0}[] constant(0)
  pd = {0}[6,140] pad(x, z), padding=0_0x4_6
  cc = {0}[12,130] concatenate(x, x), dimensions={{0}}
  io = {0}[3,100] iota(), iota_dimension=1
  kb = {0}[3,100] broadcast(k), dimensions={{0}}
  s = {0}[3,100] add(sl, kb)
  u = {0}[3,100] add(s, io)
  ROOT t = ({0}[130,6], {0}[3,100], {0}[6,140], {0}[12,130]) tuple(tr, u, pd, cc)
}})",
                                   t, smallConstant(t));
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, ReducesOfNarrowTypes) {
  for (const char* t :
       {"f16", "bf16", "u16", "s8", "f8e5m2", "s4", "s2", "u2", "s1", "u1", "f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
mx {{
  a = {0}[] parameter(0)
  b = {0}[] parameter(1)
  ROOT c = {0}[] maximum(a, b)
}}
ENTRY main {{
  x = {0}[40,300] parameter(0)
  z = {0}[] parameter(1)
  r = {0}[300] reduce(x, z), dimensions={{0}}, to_apply=mx
  ROOT q = {0}[40] reduce(x, z), dimensions={{1}}, to_apply=mx
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, ClampAndDivideUnsigned) {
  for (const char* t : {"u32", "u16", "u8", "s16", "f16"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  lo = {0}[700] parameter(0)
  x = {0}[700] parameter(1)
  hi = {0}[700] parameter(2)
  c = {0}[700] clamp(lo, x, hi)
  ROOT t = ({0}[700]) tuple(c)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
  for (const char* t : {"u32", "s32", "u16", "u8", "s16", "s8"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[700] parameter(0)
  y = {0}[700] parameter(1)
  d = {0}[700] divide(x, y)
  r = {0}[700] remainder(x, y)
  ROOT t = ({0}[700], {0}[700]) tuple(d, r)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

TEST(Types, DivideEdgeCases) {
  EXPECT_EQ(compareBitExact(R"(HloModule m
ENTRY main {
  p = s32[8] parameter(0)
  x = s32[8] constant({-2147483648, -2147483648, 2147483647, -7, 7, 0, 5, -2147483647})
  y = s32[8] constant({-1, 1, -2147483648, 2, -2, 0, 0, 3})
  ux = u32[8] constant({4294967295, 4294967295, 2147483648, 7, 3000000000, 0, 5, 4294967294})
  uy = u32[8] constant({1, 4294967295, 3, 2, 2147483649, 0, 0, 65536})
  d = s32[8] divide(x, y)
  r = s32[8] remainder(x, y)
  ud = u32[8] divide(ux, uy)
  ur = u32[8] remainder(ux, uy)
  ROOT t = (s32[8], s32[8], u32[8], u32[8], s32[8]) tuple(d, r, ud, ur, p)
})"),
            "");
}

// The 1-, 2- and 6-bit types (one byte per element, as XLA literals hold
// them) against every other kind of type, both ways.
TEST(Types, ConvertsOfOneTwoAndSixBitTypes) {
  const char* const newTypes[] = {"s1", "s2", "u1", "u2", "f6e2m3fn", "f6e3m2fn"};
  std::vector<std::string> others(std::begin(kTypes), std::end(kTypes));
  for (const char* t : {"s4", "u4", "f4e2m1fn", "f8e4m3fn", "f8e5m2", "f8e8m0fnu", "s64", "u64", "f64"})
    others.push_back(t);
  for (const char* t : newTypes) others.push_back(t);
  int pairs = 0;
  for (const char* n : newTypes)
    for (const std::string& o : others)
      for (bool fromNew : {true, false}) {
        if (!fromNew && o == n) continue;
        std::string from = fromNew ? n : o, to = fromNew ? o : n;
        std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[4,300] parameter(0)
  ROOT c = {1}[4,300] convert(x)
}})",
                                       from, to);
        EXPECT_EQ(compareBitExact(text), "") << from << " -> " << to;
        ++pairs;
      }
  EXPECT_EQ(pairs, 6 * 25 * 2 - 6);
}

// Wrapping to 1 and 2 bits after every operation, as the interpreter
// computes them (in 8 bits, then truncated and re-extended).
TEST(Types, OneAndTwoBitArithmeticWraps) {
  for (const char* t : {"s1", "s2", "u1", "u2"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[3,400] parameter(0)
  y = {0}[3,400] parameter(1)
  a = {0}[3,400] add(x, y)
  b = {0}[3,400] multiply(a, x)
  c = {0}[3,400] subtract(b, y)
  d = {0}[3,400] maximum(c, x)
  e = {0}[3,400] negate(d)
  f = {0}[3,400] minimum(e, y)
  q = {0}[3,400] divide(x, y)
  r = {0}[3,400] remainder(x, y)
  g = {0}[3,400] {1}
  h = {0}[3,400] {2}
  n = {0}[3,400] not(x)
  l = {0}[3,400] shift-left(x, y)
  sr = {0}[3,400] shift-right-logical(x, y)
  sa = {0}[3,400] shift-right-arithmetic(x, y)
  p = {0}[3,400] popcnt(x)
  z = {0}[3,400] count-leading-zeros(x)
  o = {0}[3,400] xor(p, z)
  an = {0}[3,400] and(o, n)
  cl = {0}[3,400] clamp(y, x, a)
  ROOT t = ({0}[3,400], {0}[3,400], {0}[3,400], {0}[3,400], {0}[3,400], {0}[3,400], {0}[3,400], {0}[3,400],
            {0}[3,400], {0}[3,400], {0}[3,400]) tuple(f, q, r, g, h, l, sr, sa, an, cl, e)
}})",
                                   t, t[0] == 's' ? "abs(x)" : "or(x, y)",  // abs and sign: signed only
                                   t[0] == 's' ? "sign(y)" : "and(x, y)");
    for (uint32_t seed : {7u, 8u}) EXPECT_EQ(compareBitExact(text, seed), "") << t << " seed " << seed;
  }
}

// Each f6 operation rounds once from f32 to the format (nearest even,
// saturating: the fn formats have no inf or NaN), as the interpreter does.
TEST(Types, SixBitFloatArithmeticRoundsPerOp) {
  for (const char* t : {"f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[2,520] parameter(0)
  y = {0}[2,520] parameter(1)
  a = {0}[2,520] add(x, y)
  s = {0}[2,520] subtract(x, y)
  m = {0}[2,520] multiply(x, y)
  d = {0}[2,520] divide(x, y)
  q = {0}[2,520] sqrt(x)
  e = {0}[2,520] exponential(y)
  n = {0}[2,520] negate(m)
  b = {0}[2,520] abs(s)
  f = {0}[2,520] floor(d)
  r = {0}[2,520] round-nearest-even(m)
  mx = {0}[2,520] maximum(a, n)
  c = pred[2,520] compare(a, m), direction=GE
  sl = {0}[2,520] select(c, f, r)
  ROOT t = ({0}[2,520], {0}[2,520], {0}[2,520], {0}[2,520], {0}[2,520], {0}[2,520], {0}[2,520], {0}[2,520])
           tuple(a, s, m, d, q, e, mx, sl)
}})",
                                   t);
    for (uint32_t seed : {7u, 8u}) EXPECT_EQ(compareBitExact(text, seed), "") << t << " seed " << seed;
  }
}

// Exact ties round to the even code, overflow and infinities saturate and
// NaN gives -0 (the fn formats have neither inf nor NaN), from f32 (vrnd),
// from f64 and from s32 (vcvt.FMT.f64, one rounding).
TEST(Types, SixBitFloatTiesAndSpecials) {
  for (const char* t : {"f6e2m3fn", "f6e3m2fn"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  p = f32[16] parameter(0)
  x = f32[16] constant({{1.0625, 1.1875, 7.75, 0.0625, 0.1875, 100, inf, -inf, nan, 30, 9, 11, 0.03125, 0.09375,
                        -7.75, -0.0}})
  d = f64[16] convert(x)
  i = s32[16] constant({{9, 11, 13, 30, 31, -9, 100, 7, 5, -5, 0, 1, 2, 3, 15, 17}})
  a = {0}[16] convert(x)
  b = {0}[16] convert(d)
  c = {0}[16] convert(i)
  q = f32[16] add(x, p)
  e = {0}[16] convert(q)
  ROOT r = ({0}[16], {0}[16], {0}[16], {0}[16]) tuple(a, b, c, e)
}})",
                                   t);
    EXPECT_EQ(compareBitExact(text), "") << t;
  }
}

// Integer sums and products wrap modulo 2^bits in any order, so the
// compiled reductions match the interpreter's exactly. (Maximum reduces of
// every narrow type are in ReducesOfNarrowTypes; narrow-float sums differ by
// design: the interpreter rounds each partial sum, the compiled code sums
// in f32, as XLA does on TPUs.)
TEST(Types, AddAndMultiplyReducesOfOneAndTwoBitIntegers) {
  for (const char* t : {"s1", "s2", "u1", "u2"})
    for (const char* op : {"add", "multiply"}) {
      std::string text = fmt::format(R"(HloModule m
f {{
  a = {0}[] parameter(0)
  b = {0}[] parameter(1)
  ROOT c = {0}[] {1}(a, b)
}}
ENTRY main {{
  x = {0}[40,300] parameter(0)
  z = {0}[] parameter(1)
  r = {0}[300] reduce(x, z), dimensions={{0}}, to_apply=f
  q = {0}[40] reduce(x, z), dimensions={{1}}, to_apply=f
  ROOT t = ({0}[300], {0}[40]) tuple(r, q)
}})",
                                     t, op);
      EXPECT_EQ(compareBitExact(text), "") << t << " " << op;
    }
}

// bitcast-convert from or to the 1-, 2- and 6-bit types is refused with
// an error naming both types (its lowering is being reworked).
// bitcast-convert of the 1-, 2- and 6-bit types: elements of a little-endian
// bit stream, joined and split as the interpreter does, stored extended.
TEST(Types, BitcastConvertsOfOneTwoAndSixBitTypes) {
  struct Case {
    const char *from, *inDims, *to, *outDims;
  };
  for (const Case& c : {Case{"s2", "4,300", "u2", "4,300"}, Case{"u1", "4,300", "s1", "4,300"},
                        Case{"f6e2m3fn", "4,300", "f6e3m2fn", "4,300"}, Case{"s8", "4,300", "u2", "4,300,4"},
                        Case{"s2", "4,300,4", "s8", "4,300"}, Case{"u1", "4,300,8", "u8", "4,300"},
                        Case{"s1", "4,300,2", "s2", "4,300"}, Case{"s4", "4,300", "s1", "4,300,4"},
                        Case{"f6e3m2fn", "4,300", "s2", "4,300,3"}, Case{"u1", "4,300,6", "f6e2m3fn", "4,300"},
                        Case{"s2", "4,300,8", "s16", "4,300"}, Case{"f32", "4,300", "u1", "4,300,32"}}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[{1}] parameter(0)
  ROOT c = {2}[{3}] bitcast-convert(x)
}})",
                                   c.from, c.inDims, c.to, c.outDims);
    for (uint32_t seed : {1u, 2u}) EXPECT_EQ(compareBitExact(text, seed), "") << c.from << " -> " << c.to;
  }
}

TEST(Types, IntegerPower) {
  // The interpreter's square-and-multiply wraps in the type; llo-gen wraps in
  // 32 bits over every exponent bit and truncates: the same bits. Negative
  // signed exponents give 0 except for bases 1 and -1. Inputs cover every
  // value of the narrow types and large and negative 32-bit ones.
  for (const char* t : {"s32", "u32", "s16", "u16", "s8", "u8", "s4", "u4"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[3000] parameter(0)
  b = {0}[3000] parameter(1)
  ROOT r = {0}[3000] power(a, b)
}})",
                                   t);
    for (uint32_t seed : {1u, 2u}) EXPECT_EQ(compareBitExact(text, seed), "") << t << " seed " << seed;
  }
}

TEST(Types, BitcastConvertsOfFourBitTypes) {
  // The interpreter's little-endian bit stream: element 2t of the 4-bit side
  // is the low nibble of byte t, s4 stored sign-extended. The 4-bit results
  // are also converted to s32, which reads the whole stored byte.
  const char* text = R"(HloModule m
ENTRY main {
  a = s8[700] parameter(0)
  b = u4[300,4] parameter(1)
  c = s4[200] parameter(2)
  d = f4e2m1fn[200,8] parameter(3)
  p = pred[150] parameter(4)
  w = f32[90] parameter(5)
  as4 = s4[700,2] bitcast-convert(a)
  au4 = u4[700,2] bitcast-convert(a)
  af4 = f4e2m1fn[700,2] bitcast-convert(a)
  bs16 = s16[300] bitcast-convert(b)
  cu4 = u4[200] bitcast-convert(c)
  cf4 = f4e2m1fn[200] bitcast-convert(c)
  du32 = u32[200] bitcast-convert(d)
  ds4 = s4[200,8] bitcast-convert(d)
  ps4 = s4[150,2] bitcast-convert(p)
  wu4 = u4[90,8] bitcast-convert(w)
  back = f32[90] bitcast-convert(wu4)
  i1 = s32[700,2] convert(as4)
  i2 = s32[700,2] convert(au4)
  i3 = s32[200] convert(cu4)
  i4 = s32[200,8] convert(ds4)
  i5 = s32[150,2] convert(ps4)
  f1 = f32[700,2] convert(af4)
  f2 = f32[200] convert(cf4)
  ROOT t = (s4[700,2], u4[700,2], f4e2m1fn[700,2], s16[300], u4[200], f4e2m1fn[200], u32[200], s4[200,8], s4[150,2], f32[90], s32[700,2], s32[700,2], s32[200], s32[200,8], s32[150,2], f32[700,2], f32[200]) tuple(as4, au4, af4, bs16, cu4, cf4, du32, ds4, ps4, back, i1, i2, i3, i4, i5, f1, f2)
})";
  for (uint32_t seed : {1u, 2u}) EXPECT_EQ(compareBitExact(text, seed), "") << seed;
}

TEST(Types, DotsAndConvolutionsMixingKinds) {
  // Integer operands of a float result and float operands of an integer
  // result: the interpreter converts the operands to the result's type
  // (floats truncate and saturate) and sums there; so does llo-gen. The
  // integer sums are exact, the float ones are f32 dots of small integers.
  const char* text = R"(HloModule m
ENTRY main {
  a = s8[9,40] parameter(0)
  b = s8[40,20] parameter(1)
  c = f32[9,40] parameter(2)
  d = f32[40,20] parameter(3)
  x = s8[2,9,11,6] parameter(4)
  k = pred[3,2,6,4] parameter(5)
  p = f32[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  q = s32[9,20] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[2,9,10,4] convolution(x, k), window={size=3x2 pad=1_1x0_0}, dim_labels=b01f_01io->b01f, operand_precision={highest,highest}
  ROOT t = (f32[9,20], s32[9,20], f32[2,9,10,4]) tuple(p, q, r)
})";
  EXPECT_EQ(compareBitExact(text), "");
}

TEST(Types, PredDotsAndConvolutions) {
  // The interpreter's pred dot and convolution are an or of ands over the
  // operands converted to pred (a nonzero s8 or f32): llo-gen
  // sums the 0/1 products in s32 and tests the sum. Short contractions so
  // that both results occur.
  const char* text = R"(HloModule m
ENTRY main {
  a = pred[9,3] parameter(0)
  b = pred[3,200] parameter(1)
  c = s8[9,3] parameter(2)
  x = pred[2,9,11,2] parameter(3)
  k = pred[1,2,2,4] parameter(4)
  e = f32[9,3] parameter(5)
  p = pred[9,200] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  q = pred[9,200] dot(c, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = pred[2,9,12,4] convolution(x, k), window={size=1x2 pad=0_0x1_1}, dim_labels=b01f_01io->b01f
  s = pred[9,200] dot(e, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (pred[9,200], pred[9,200], pred[2,9,12,4], pred[9,200]) tuple(p, q, r, s)
})";
  for (uint32_t seed : {1u, 2u}) EXPECT_EQ(compareBitExact(text, seed), "") << seed;
}

}  // namespace
}  // namespace tpu::codegen
