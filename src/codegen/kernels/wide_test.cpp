// End-to-end tests of the 64-bit element types (s64, u64, f64) and of moving
// c64/c128: HLO text -> llo-gen -> assembler -> simulator, compared bit for
// bit with the reference interpreter. Inputs mix the values where 64-bit
// arithmetic goes wrong (carries between the words, INT64_MIN, shift
// amounts of 64 and more, NaN, infinities, -0, subnormals, values beyond
// the 32-bit and f32 ranges) with random ones.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

uint64_t pick64(std::mt19937_64& rng, ElementType t) {
  static const uint64_t kInts[] = {0,
                                   1,
                                   ~uint64_t{0},
                                   uint64_t{1} << 63,
                                   (uint64_t{1} << 63) - 1,
                                   0xFFFFFFFFull,
                                   0x100000000ull,
                                   0x7FFFFFFFull,
                                   0x80000000ull,
                                   0xFFFFFFFF00000000ull,
                                   0x00000001FFFFFFFFull,
                                   63,
                                   64,
                                   65,
                                   ~uint64_t{0} - 63};
  const double inf = std::numeric_limits<double>::infinity();
  const double kF64[] = {0.0,    -0.0,   inf,          -inf,      std::numeric_limits<double>::quiet_NaN(),
                         1e308,  -1e308, 4e-320,       -1e-310,   0.5,
                         2.5,    -2.5,   1e19,         -1e19,     9.3e18,
                         1.5e10, -3.0e9, 4294967296.5, 1.0 / 3.0, 3.4028235677973366e38};
  uint64_t r = rng();
  if (t == ElementType::F64) {
    if ((r & 3) == 0) return std::bit_cast<uint64_t>(kF64[(r >> 8) % std::size(kF64)]);
    std::uniform_real_distribution<double> real(-300.0, 300.0);
    double v = real(rng);
    if ((r & 12) == 4) v = std::ldexp(v, static_cast<int>((r >> 20) % 200) - 100);
    return std::bit_cast<uint64_t>(v);
  }
  switch (r & 7) {
    case 0:
    case 1:
      return kInts[(r >> 8) % std::size(kInts)];
    case 2:
      return (r >> 8) % 80;  // shift amounts around 64
    case 3:
      return static_cast<uint64_t>(static_cast<int64_t>((r >> 8) % 601) - 300);
    default:
      return rng();
  }
}

hlo::Literal testLiteral(const hlo::Shape& s, std::mt19937_64& rng) {
  hlo::Literal l(s);
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(s.elementType());
  for (int64_t k = 0; k < l.elementCount(); ++k) {
    ElementType t = s.elementType();
    if (t == ElementType::S64 || t == ElementType::U64 || t == ElementType::F64) {
      l.setBits(k, pick64(rng, t));
    } else if (t == ElementType::C64 || t == ElementType::C128) {
      for (int64_t b = 0; b < info.bitWidth / 8; ++b) l.rawElement(k)[b] = static_cast<uint8_t>(rng());
    } else if (t == ElementType::Pred) {
      l.setInt(k, rng() & 1);
    } else if (info.isFloat) {
      std::uniform_real_distribution<double> real(-3e9, 3e9);
      l.setDouble(k, (rng() & 3) == 0 ? std::ldexp(real(rng), -30) : real(rng));
    } else {
      l.setBits(k, rng());  // the literal keeps the type's bits
      if (info.isSigned) l.setInt(k, static_cast<int64_t>(rng()) >> (64 - info.bitWidth));
    }
  }
  return l;
}

// "" when the simulated results equal the interpreter's byte for byte (NaNs
// compare as NaNs whatever their payload); otherwise what differs.
std::string compareWide(const std::string& text, uint64_t seed = 11, const CodegenOptions& options = {}) {
  std::mt19937_64 rng(seed);
  PipelineRun run = runPipeline(
      text, [&](size_t, const hlo::Shape& shape) { return testLiteral(shape, rng); }, "v5e", options);
  if (!run.error.empty()) return run.error;
  const std::vector<hlo::Literal>& args = run.args;
  const std::vector<const hlo::Literal*> want = run.want();
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    ElementType t = w.shape().elementType();
    size_t eb = w.elementCount() ? w.data().size() / static_cast<size_t>(w.elementCount()) : 0;
    for (int64_t k = 0; k < w.elementCount(); ++k) {
      const char* g = run.got[r].data() + static_cast<size_t>(k) * eb;
      const uint8_t* x = w.data().data() + static_cast<size_t>(k) * eb;
      if (std::memcmp(g, x, eb) == 0) continue;
      hlo::Literal got(hlo::Shape::array(t, {}));
      std::memcpy(got.mutableData().data(), g, eb);
      if (hlo::isFloatType(t) && eb <= 8 && std::isnan(got.getDouble(0)) && std::isnan(w.getDouble(k)))
        continue;
      std::string in;
      for (const hlo::Literal& a : args)
        if (a.shape().isArray() && a.elementCount() > 0)
          in += fmt::format(" 0x{:x}", a.getBits(k % a.elementCount()));
      return fmt::format("result {} element {}: got 0x{:x} want 0x{:x}; inputs{}", r, k, got.getBits(0),
                         w.getBits(k), in);
    }
  }
  return "";
}

std::string binaryModule(const char* op, const char* t, const char* rt = nullptr, int64_t n = 2500) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  a = {1}[{3}] parameter(0)
  b = {1}[{3}] parameter(1)
  ROOT r = {2}[{3}] {0}(a, b)
}})",
                     op, t, rt ? rt : t, n);
}

std::string unaryModule(const char* op, const char* t, const char* rt = nullptr, int64_t n = 2500) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  a = {1}[{3}] parameter(0)
  ROOT r = {2}[{3}] {0}(a)
}})",
                     op, t, rt ? rt : t, n);
}

TEST(WideTypes, IntegerBinaryOps) {
  for (const char* t : {"s64", "u64"})
    for (const char* op :
         {"add", "subtract", "multiply", "divide", "remainder", "and", "or", "xor", "maximum", "minimum",
          "shift-left", "shift-right-logical", "shift-right-arithmetic"})
      EXPECT_EQ(compareWide(binaryModule(op, t)), "") << op << " " << t;
}

TEST(WideTypes, IntegerUnaryOps) {
  for (const char* t : {"s64", "u64"})
    for (const char* op : {"negate", "abs", "not", "sign", "popcnt", "count-leading-zeros"}) {
      bool signedOnly = std::string_view(op) == "abs" || std::string_view(op) == "sign";
      if (signedOnly && std::string_view(t) == "u64") continue;  // HLO has no unsigned abs or sign
      EXPECT_EQ(compareWide(unaryModule(op, t)), "") << op << " " << t;
    }
}

TEST(WideTypes, ComparesSelectAndClamp) {
  for (const char* t : {"s64", "u64", "f64"}) {
    for (const char* dir : {"EQ", "NE", "LT", "LE", "GT", "GE"}) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[1500] parameter(0)
  b = {0}[1500] parameter(1)
  ROOT r = pred[1500] compare(a, b), direction={1}
}})",
                                     t, dir);
      EXPECT_EQ(compareWide(text), "") << t << " " << dir;
      if (std::string_view(t) == "f64") {
        std::string total = text;
        total.insert(total.rfind("\n}"), ", type=TOTALORDER");
        EXPECT_EQ(compareWide(total), "") << "total order " << dir;
      }
    }
    std::string sel = fmt::format(R"(HloModule m
ENTRY main {{
  p = pred[1500] parameter(0)
  a = {0}[1500] parameter(1)
  b = {0}[1500] parameter(2)
  lo = {0}[] parameter(3)
  hi = {0}[1500] parameter(4)
  s = {0}[1500] select(p, a, b)
  lb = {0}[1500] broadcast(lo), dimensions={{}}
  ROOT c = {0}[1500] clamp(lb, s, hi)
}})",
                                  t);
    EXPECT_EQ(compareWide(sel), "") << t;
  }
}

TEST(WideTypes, F64Arithmetic) {
  for (const char* op : {"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum"})
    EXPECT_EQ(compareWide(binaryModule(op, "f64")), "") << op;
  for (const char* op : {"negate", "abs", "sqrt", "rsqrt", "floor", "ceil", "round-nearest-even",
                         "round-nearest-afz", "sign"})
    EXPECT_EQ(compareWide(unaryModule(op, "f64")), "") << op;
  // (exponential, log, sine, erf, atan2, power, ... are composed from the pair rows:
  // within their ulp bounds of long double libm, kernels/math_f64_test.cpp,
  // not the interpreter's bits.)
  EXPECT_EQ(compareWide(unaryModule("is-finite", "f64", "pred")), "");
}

TEST(WideTypes, Converts) {
  const char* narrow[] = {"s32", "u32", "s16", "u16", "s8", "u8", "pred", "f32", "bf16", "f16"};
  for (const char* wide : {"s64", "u64", "f64"}) {
    for (const char* other : narrow) {
      EXPECT_EQ(compareWide(unaryModule("convert", other, wide)), "") << other << " -> " << wide;
      EXPECT_EQ(compareWide(unaryModule("convert", wide, other)), "") << wide << " -> " << other;
    }
    for (const char* to : {"s64", "u64", "f64"})
      EXPECT_EQ(compareWide(unaryModule("convert", wide, to)), "") << wide << " -> " << to;
  }
  // To the narrow floats in one rounding: values on the rounding boundaries
  // of bf16 and f16 that f32 would round the other way first.
  for (const char* to : {"bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fnuz", "f8e5m2fnuz",
                         "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn"}) {
    EXPECT_EQ(compareWide(unaryModule("convert", "f64", to)), "") << "f64 -> " << to;
    EXPECT_EQ(compareWide(unaryModule("convert", "s64", to)), "") << "s64 -> " << to;
  }
  std::string boundary = R"(HloModule m
ENTRY main {
  c = f64[4] constant({1.0039062500009095, 1.0039062499990905, 1.0004882812509095, -1.0004882812509095})
  b = bf16[4] convert(c)
  h = f16[4] convert(c)
  ROOT t = (bf16[4], f16[4]) tuple(b, h)
})";
  EXPECT_EQ(compareWide(boundary), "");
}

TEST(WideTypes, ThirtyTwoBitIntegersToNarrowFloatsRoundOnce) {
  // 2^24 + 2^16 + 1 is just above a bf16 midpoint, but f32 rounds it onto
  // the midpoint first (ties to even then goes down): s32 and u32 take the
  // f64 route the interpreter takes.
  const char* text = R"(HloModule m
ENTRY main {
  c = s32[4] constant({16842753, -16842753, 2147483647, 16842752})
  u = u32[3] constant({16842753, 4294967295, 2147516417})
  b = bf16[4] convert(c)
  h = f16[4] convert(c)
  ub = bf16[3] convert(u)
  e = f8e5m2[3] convert(u)
  ROOT t = (bf16[4], f16[4], bf16[3], f8e5m2[3]) tuple(b, h, ub, e)
})";
  EXPECT_EQ(compareWide(text), "");
  for (const char* from : {"s32", "u32"})
    for (const char* to : {"bf16", "f16", "f8e4m3fn", "f4e2m1fn"})
      EXPECT_EQ(compareWide(unaryModule("convert", from, to)), "") << from << " -> " << to;
}

TEST(WideTypes, FusionWithScalarsConstantsAndIota) {
  for (const char* t : {"s64", "u64", "f64"}) {
    std::string text = fmt::format(R"(HloModule m
f {{
  x = {0}[3000] parameter(0)
  s = {0}[] parameter(1)
  c = {0}[] constant(5)
  bs = {0}[3000] broadcast(s), dimensions={{}}
  bc = {0}[3000] broadcast(c), dimensions={{}}
  i = {0}[3000] iota(), iota_dimension=0
  m = {0}[3000] multiply(x, bs)
  a = {0}[3000] add(m, bc)
  ROOT r = {0}[3000] subtract(a, i)
}}
ENTRY main {{
  x = {0}[3000] parameter(0)
  s = {0}[] parameter(1)
  ROOT r = {0}[3000] fusion(x, s), kind=kLoop, calls=f
}})",
                                   t);
    EXPECT_EQ(compareWide(text), "") << t;
    EXPECT_EQ(compareWide(fmt::format(R"(HloModule m
ENTRY main {{
  ROOT i = {0}[5,700] iota(), iota_dimension=1
}})",
                                      t)),
              "")
        << t;
  }
}

TEST(WideTypes, DataMovement) {
  for (const char* t : {"s64", "f64", "c64", "c128"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[6,40,3] parameter(0)
  b = {0}[6,7,3] parameter(1)
  s = {0}[] parameter(2)
  i = s32[] parameter(3)
  tr = {0}[3,6,40] transpose(a), dimensions={{2,0,1}}
  sl = {0}[6,19,3] slice(a), slice={{[0:6], [3:40:2], [0:3]}}
  cc = {0}[6,26,3] concatenate(sl, b), dimensions={{1}}
  pd = {0}[8,29,3] pad(cc, s), padding=1_1x0_3x0_0
  rv = {0}[8,29,3] reverse(pd), dimensions={{0,1}}
  bc = {0}[2,6,7,3] broadcast(b), dimensions={{1,2,3}}
  z = s32[] constant(1)
  ds = {0}[2,5,3] dynamic-slice(a, i, i, z), dynamic_slice_sizes={{2,5,3}}
  du = {0}[6,40,3] dynamic-update-slice(a, ds, z, i, z)
  ROOT t = ({0}[3,6,40], {0}[8,29,3], {0}[2,6,7,3], {0}[6,40,3]) tuple(tr, rv, bc, du)
}})",
                                   t);
    EXPECT_EQ(compareWide(text), "") << t;
  }
}

TEST(WideTypes, ConstantsGatherAndWhile) {
  // An s64 loop counter and an f64 accumulator carried through a while loop;
  // array constants in the data section; a gather of f64 rows by s32 index.
  const char* text = R"(HloModule m
cond {
  p = (s64[], f64[300]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  n = s64[] constant(5000000000)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s64[], f64[300]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  x = f64[300] get-tuple-element(p), index=1
  step = s64[] constant(1500000000)
  i2 = s64[] add(i, step)
  q = f64[] constant(0.1)
  k = f64[300] broadcast(q), dimensions={}
  x2 = f64[300] add(x, k)
  ROOT t = (s64[], f64[300]) tuple(i2, x2)
}
ENTRY main {
  x = f64[300] parameter(0)
  tbl = f64[50,4] parameter(1)
  idx = s32[7,1] parameter(2)
  z = s64[] constant(-2)
  w = (s64[], f64[300]) while((s64[], f64[300]) tuple(z, x)), condition=cond, body=body
  c = s64[2,3] constant({{1, -1, 9223372036854775807}, {-9223372036854775808, 4294967296, 0}})
  g = f64[7,4] gather(tbl, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
  ROOT t = ((s64[], f64[300]), s64[2,3], f64[7,4]) tuple(w, c, g)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, SixtyFourBitIndicesClampAndScatterCombines) {
  // s64/u64 start indices beyond the 32-bit range clamp as XLA's do; a
  // scatter adds s64 rows by u64 index, another overwrites f64 rows.
  for (const char* it : {"s64", "u64"}) {
    std::string text = fmt::format(R"(HloModule m
add {{
  x = s64[] parameter(0)
  y = s64[] parameter(1)
  ROOT s = s64[] add(x, y)
}}
over {{
  x = f64[] parameter(0)
  ROOT y = f64[] parameter(1)
}}
ENTRY main {{
  tbl = f32[50,4] parameter(0)
  idx = {0}[40,1] parameter(1)
  i = {0}[] parameter(2)
  j = {0}[] parameter(3)
  acc = s64[50,4] parameter(4)
  upd = s64[40,4] parameter(5)
  fa = f64[50,4] parameter(6)
  fu = f64[40,4] parameter(7)
  g = f32[40,4] gather(tbl, idx), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,4}}
  ds = f32[3,2] dynamic-slice(tbl, i, j), dynamic_slice_sizes={{3,2}}
  sa = s64[50,4] scatter(acc, idx, upd), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
  so = f64[50,4] scatter(fa, idx, fu), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=over
  ROOT t = (f32[40,4], f32[3,2], s64[50,4], f64[50,4]) tuple(g, ds, sa, so)
}})",
                                   it);
    // Seeds give different mixes of in-range and huge indices.
    for (uint64_t seed : {11, 12, 13}) EXPECT_EQ(compareWide(text, seed), "") << it << " seed " << seed;
  }
}

TEST(WideTypes, WidthChangingBitcastConverts) {
  const char* text = R"(HloModule m
ENTRY main {
  a = u64[100] parameter(0)
  f = f64[10] parameter(1)
  w = u32[100,2] bitcast-convert(a)
  one = u32[] constant(1)
  ones = u32[100,2] broadcast(one), dimensions={}
  w1 = u32[100,2] add(w, ones)
  back = u64[100] bitcast-convert(w1)
  b = s8[10,8] bitcast-convert(f)
  h = s16[10,4] bitcast-convert(f)
  g = f64[10] bitcast-convert(h)
  ROOT t = (u64[100], s8[10,8], f64[10]) tuple(back, b, g)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, ConditionalAndArrayConstants) {
  // Branches pass s64/f64/c64 state through; constants of every wide type
  // are written to the data section word by word.
  const char* text = R"(HloModule m
b0 {
  p = (s64[5], f64[5], c64[3]) parameter(0)
  x = s64[5] get-tuple-element(p), index=0
  k = s64[5] constant({-1, 4294967295, -4294967296, 9223372036854775807, 0})
  a = s64[5] add(x, k)
  f = f64[5] get-tuple-element(p), index=1
  c = c64[3] get-tuple-element(p), index=2
  ROOT t = (s64[5], f64[5], c64[3]) tuple(a, f, c)
}
b1 {
  p = (s64[5], f64[5], c64[3]) parameter(0)
  x = s64[5] get-tuple-element(p), index=0
  f = f64[5] get-tuple-element(p), index=1
  g = f64[5] constant({-0, 1e-310, 1.7976931348623157e308, -inf, 0.1})
  m = f64[5] multiply(f, g)
  c = c64[3] constant({(1, -2), (0.5, 3), (-0, 7)})
  ROOT t = (s64[5], f64[5], c64[3]) tuple(x, m, c)
}
ENTRY main {
  i0 = s32[] parameter(0)
  one = s32[] constant(1)
  i = s32[] and(i0, one)
  x = s64[5] parameter(1)
  f = f64[5] parameter(2)
  c = c64[3] parameter(3)
  t = (s64[5], f64[5], c64[3]) tuple(x, f, c)
  ROOT r = (s64[5], f64[5], c64[3]) conditional(i, t, t), branch_computations={b0, b1}
})";
  // The seeds take both branches (the low bit of a random s32).
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) EXPECT_EQ(compareWide(text, seed), "") << seed;
}

TEST(WideTypes, ShardingCustomCalls) {
  // Identity and full <-> shard custom calls of SPMD dumps move s64 and
  // c64 tensors like any other.
  const char* text = R"(HloModule m
ENTRY main {
  a = s64[8,6] parameter(0)
  c = c64[4] parameter(1)
  s = s64[8,6] custom-call(a), custom_call_target="Sharding"
  h = s64[4,6] custom-call(s), custom_call_target="SPMDFullToShardShape"
  f = s64[8,6] custom-call(h), custom_call_target="SPMDShardToFullShape"
  cs = c64[4] custom-call(c), custom_call_target="Sharding"
  ROOT t = (s64[4,6], s64[8,6], c64[4]) tuple(h, f, cs)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, IntegerPower) {
  // Square-and-multiply over all 64 exponent bits with the wrapping pair
  // product; negative s64 exponents give 0 except for bases 1 and -1.
  for (const char* t : {"s64", "u64"})
    for (uint64_t seed : {11, 12}) EXPECT_EQ(compareWide(binaryModule("power", t), seed), "") << t << " " << seed;
  // Small bases and exponents, where the results do not just wrap to 0.
  const char* text = R"(HloModule m
ENTRY main {
  a = s64[2500] parameter(0)
  b = s64[2500] parameter(1)
  three = s64[] constant(3)
  t = s64[2500] broadcast(three), dimensions={}
  ma = s64[2500] remainder(a, t)
  sixty = s64[] constant(70)
  s = s64[2500] broadcast(sixty), dimensions={}
  mb = s64[2500] remainder(b, s)
  ROOT r = s64[2500] power(ma, mb)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, ReducePrecisionOfF64) {
  // XLA's bit rounding on the pair: the mantissa add carries between the
  // words (cut points on both sides of bit 32), exponents flush to zero or
  // infinity, NaNs stay NaN (infinity when no mantissa bit is left).
  for (auto [e, m] : {std::pair{11, 52}, {8, 23}, {5, 10}, {11, 0}, {2, 1}, {11, 31}, {11, 32}, {4, 33}, {9, 40}}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = f64[2500] parameter(0)
  ROOT r = f64[2500] reduce-precision(a), exponent_bits={0}, mantissa_bits={1}
}})",
                                   e, m);
    EXPECT_EQ(compareWide(text), "") << e << " " << m;
  }
}

TEST(WideTypes, GeluAndGemmCustomCalls) {
  // The interpreter's GELU is its erf formula in f64, from and back to the
  // type; the gemm is a dot, scaled in f64 (p * alpha + beta * c). erf and
  // exp are expanded into pair rows (within an ulp of libm, so f64 results
  // are compared with a tolerance); s64 and u64 round-trip through f64.
  for (const char* t : {"f64", "s64", "u64"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[2500] parameter(0)
  b = {0}[9,33] parameter(1)
  c = {0}[33,20] parameter(2)
  d = {0}[9,20] parameter(3)
  g = {0}[2500] custom-call(a), custom_call_target="AwsNeuronGelu"
  h = {0}[2500] custom-call(a), custom_call_target="AwsNeuronGeluBackward"
  m = ({0}[9,20], s8[64]) custom-call(b, c, d), custom_call_target="__cublas$gemm", backend_config={{"gemm_backend_config":{{"alpha_real":0.75,"beta":-1.5,"dot_dimension_numbers":{{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}}}}
  n = {0}[9,20] custom-call(b, c), custom_call_target="__cublas$lt$matmul", backend_config={{"gemm_backend_config":{{"dot_dimension_numbers":{{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}}}}
  m0 = {0}[9,20] get-tuple-element(m), index=0
  ROOT t = ({0}[2500], {0}[2500], {0}[9,20], {0}[9,20]) tuple(g, h, m0, n)
}})",
                                   t);
    if (std::string_view(t) == "f64") {
      E2eRun r = compileAndCompare(text);
      ASSERT_EQ(r.error, "");
      EXPECT_LE(r.maxErr, 1e-15) << r.where;
    } else {
      EXPECT_EQ(compareWide(text), "") << t;
    }
  }
}

TEST(WideTypes, DotsAndConvolutionsIntoNarrowerIntegerResults) {
  // The interpreter computes in the result type: 64-bit operands are
  // converted to it first (integers wrap, f64 truncates and saturates), then
  // summed with wrapping, so the results are exact.
  const char* text = R"(HloModule m
ENTRY main {
  a = s64[9,33] parameter(0)
  b = s64[33,20] parameter(1)
  c = u64[9,33] parameter(2)
  d = f64[33,20] parameter(3)
  x = f64[2,9,11,6] parameter(4)
  k = s64[3,2,3,4] parameter(5)
  p = s32[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  q = s16[9,20] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = s32[2,10,6,4] convolution(x, k), window={size=3x2 stride=1x2 pad=1_2x1_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, feature_group_count=2
  ROOT t = (s32[9,20], s16[9,20], s32[2,10,6,4]) tuple(p, q, r)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, DotsAndConvolutionsIntoNarrowerFloatResults) {
  // f64 operands of an f32 or bf16 result are rounded to f32 first and
  // summed in f32 (the interpreter's order); llo-gen then sums on the MXU
  // like any f32 dot, so these match to f32 precision (highest: six bf16
  // passes), not bit for bit.
  const char* text = R"(HloModule m
ENTRY main {
  a = f64[9,130] parameter(0)
  b = f64[130,20] parameter(1)
  x = f64[2,9,11,6] parameter(2)
  k = s64[3,2,6,4] parameter(3)
  p = f32[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  q = bf16[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  r = f32[2,9,10,4] convolution(x, k), window={size=3x2 pad=1_1x0_0}, dim_labels=b01f_01io->b01f, operand_precision={highest,highest}
  ROOT t = (f32[9,20], bf16[9,20], f32[2,9,10,4]) tuple(p, q, r)
})";
  E2eRun r = compileAndCompare(text);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-2) << r.where;  // bf16's rounding; the f32 results are far closer
  std::string f32Only = R"(HloModule m
ENTRY main {
  a = f64[9,130] parameter(0)
  b = f64[130,20] parameter(1)
  ROOT p = f32[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
})";
  r = compileAndCompare(f32Only);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
}

TEST(WideTypes, Convolutions) {
  // Padding, strides, both dilations, a reversed window, feature groups and
  // batch groups, in a non-canonical layout; f64 sums in the interpreter's
  // order (padding products included: inf weights times padding give NaN).
  for (const char* t : {"s64", "f64"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[2,9,11,6] parameter(0)
  k = {0}[3,2,3,4] parameter(1)
  b = {0}[3,4,7,5] parameter(2)
  kb = {0}[3,2,3,6] parameter(3)
  c = {0}[2,10,6,4] convolution(x, k), window={{size=3x2 stride=1x2 pad=1_2x1_1 lhs_dilate=1x1 rhs_dilate=1x2 rhs_reversal=0x1}}, dim_labels=b01f_01io->b01f, feature_group_count=2
  d = {0}[2,6,13,5] convolution(b, kb), window={{size=3x2 pad=1_1x0_1 lhs_dilate=2x1}}, dim_labels=fb01_01io->bf01, batch_group_count=2
  ROOT r = ({0}[2,10,6,4], {0}[2,6,13,5]) tuple(c, d)
}})",
                                   t);
    EXPECT_EQ(compareWide(text), "") << t;
  }
  // Narrower operands converted to the 64-bit result type.
  EXPECT_EQ(compareWide(R"(HloModule m
ENTRY main {
  x = f32[2,9,11,6] parameter(0)
  k = bf16[3,2,6,4] parameter(1)
  ROOT c = f64[2,9,10,4] convolution(x, k), window={size=3x2 pad=1_1x0_0}, dim_labels=b01f_01io->b01f
})"),
            "");
}

TEST(WideTypes, Dots) {
  // Batched, with transposed operands (contracting dims not innermost) and
  // more columns than one vreg holds; f64 sums in the interpreter's order.
  for (const char* t : {"s64", "u64", "f64"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[2,37,6] parameter(0)
  b = {0}[2,1100,37] parameter(1)
  ROOT d = {0}[2,6,1100] dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
}})",
                                   t);
    EXPECT_EQ(compareWide(text), "") << t;
  }
}

TEST(WideTypes, DotsWhoseKDoesNotFitTileK) {
  // 256 KiB of VMEM: the rhs rows of K do not fit for 128 columns, so K is
  // tiled, each tile adding into the result rows the previous one stored:
  // still summed in order from zero, so bit-exact (f64 too; complex in
  // complex_test.cpp).
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  for (const char* t : {"s64", "u64", "f64", "s32"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[2,3,1500] parameter(0)
  b = {0}[2,1500,200] parameter(1)
  ROOT d = {0}[2,3,200] dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}
}})",
                                   t);
    EXPECT_EQ(compareWide(text, 11, small), "") << t;
  }
}

TEST(WideTypes, DotsOfNarrowOperandsIntoWideResults) {
  // s32 x s8 -> s64 and f32 x bf16 -> f64 (preferred_element_type):
  // operands converted to the result type, then multiplied exactly.
  const char* text = R"(HloModule m
ENTRY main {
  a = s32[9,33] parameter(0)
  b = s8[33,20] parameter(1)
  c = f32[9,33] parameter(2)
  d = bf16[33,20] parameter(3)
  x = s64[9,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f64[9,20] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s64[9,20], f64[9,20]) tuple(x, y)
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, ArgmaxWithS64Indices) {
  // torch.argmax: a variadic reduce of (f32 value, s64 iota index), the
  // first index winning ties.
  const char* text = R"(HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s64[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s64[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, v0, v1)
  i = s64[] select(keep, i0, i1)
  ROOT t = (f32[], s64[]) tuple(v, i)
}
ENTRY main {
  a = f32[37,500] parameter(0)
  idx = s64[37,500] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  z = s64[] constant(0)
  ROOT r = (f32[37], s64[37]) reduce(a, idx, ninf, z), dimensions={1}, to_apply=argmax
})";
  EXPECT_EQ(compareWide(text), "");
}

TEST(WideTypes, WindowReductionsAndSelectAndScatter) {
  for (const char* t : {"s64", "u64", "f64"}) {
    std::string text = fmt::format(R"(HloModule m
mx {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT s = {0}[] maximum(x, y)
}}
ad {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT s = {0}[] add(x, y)
}}
ge {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=GE
}}
ENTRY main {{
  a = {0}[2,40,30] parameter(0)
  src = {0}[2,20,15] parameter(1)
  z = {0}[] constant(0)
  rm = {0}[2,20,15] reduce-window(a, z), window={{size=1x3x2 stride=1x2x2 pad=0_0x1_1x0_0}}, to_apply=mx
  ra = {0}[2,38,29] reduce-window(a, z), window={{size=1x3x2}}, to_apply=ad
  ss = {0}[2,40,30] select-and-scatter(a, src, z), window={{size=1x2x2 stride=1x2x2}}, select=ge, scatter=ad
  ROOT t = ({0}[2,20,15], {0}[2,38,29], {0}[2,40,30]) tuple(rm, ra, ss)
}})",
                                   t);
    EXPECT_EQ(compareWide(text), "") << t;
  }
}

TEST(WideTypes, Sorts) {
  // f64 keys in total order carrying s64 values; s64 and u64 keys, stable
  // (ties keep their order: keys repeat through the specials).
  std::string text = R"(HloModule m
lt {
  x = f64[] parameter(0)
  y = f64[] parameter(1)
  i = s64[] parameter(2)
  j = s64[] parameter(3)
  ROOT c = pred[] compare(x, y), direction=LT, type=TOTALORDER
}
ENTRY main {
  k = f64[3,700] parameter(0)
  v = s64[3,700] parameter(1)
  ROOT r = (f64[3,700], s64[3,700]) sort(k, v), dimensions={1}, to_apply=lt
})";
  EXPECT_EQ(compareWide(text), "");
  for (const char* t : {"s64", "u64"}) {
    std::string keys = fmt::format(R"(HloModule m
gt {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=GT
}}
ENTRY main {{
  k = {0}[300,5] parameter(0)
  ROOT r = {0}[300,5] sort(k), dimensions={{0}}, to_apply=gt
}})",
                                   t);
    EXPECT_EQ(compareWide(keys), "") << t;
  }
}

TEST(WideTypes, Reductions) {
  struct Case {
    const char* t;
    const char* op;
    const char* init;
  };
  for (Case c : {Case{"s64", "add", "0"}, Case{"s64", "maximum", "-9223372036854775808"},
                 Case{"s64", "minimum", "3"}, Case{"u64", "add", "7"}, Case{"u64", "maximum", "0"},
                 Case{"u64", "and", "18446744073709551615"}, Case{"s64", "or", "0"}, Case{"f64", "add", "0"},
                 Case{"f64", "maximum", "-inf"}, Case{"f64", "minimum", "inf"}})
    for (const char* dims : {"1", "0", "0,1"}) {
      std::string text = reduceModule(c.t, c.op, c.init, dims);
      EXPECT_EQ(compareWide(text), "") << c.t << " " << c.op << " dims " << dims;
    }
}

}  // namespace
}  // namespace tpu::codegen
