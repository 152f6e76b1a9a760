// End-to-end tests of the small opcodes and shared call graphs (kernels/misc.cpp
// and flatten-call-graph inside generateLlo): compiled, simulated and
// compared with the interpreter. Integer results, rng bits and
// reduce-precision are compared bit for bit.
#include <iterator>
#include <limits>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

#define EXPECT_EXACT(...)                       \
  do {                                          \
    E2eRun r_ = compileAndCompare(__VA_ARGS__); \
    ASSERT_EQ(r_.error, "");                    \
    EXPECT_EQ(r_.bitMismatches, 0) << r_.bitWhere;    \
  } while (0)

hlo::Literal u64Literal(const std::vector<uint64_t>& v) {
  hlo::Literal l(hlo::Shape::array(hlo::ElementType::U64, {static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) l.setUint(static_cast<int64_t>(i), v[i]);
  return l;
}

std::string compileError(const std::string& text, const std::string& targetName = "v5e") {
  E2eRun r = compileAndCompare(text, targetName);
  return r.error;
}

TEST(MiscEndToEnd, SharedWhileBodyAndReducer) {
  // Two loops run the same condition and body; two reduces and two calls
  // share one computation (only the second call needs a clone).
  EXPECT_EXACT(R"(HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
cond {
  p = (s32[], s32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], s32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = s32[300] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  b = s32[300] broadcast(j), dimensions={}
  y = s32[300] add(x, b)
  ROOT t = (s32[], s32[300]) tuple(j, y)
}
ENTRY main {
  x = s32[300] parameter(0)
  z = s32[] constant(0)
  t0 = (s32[], s32[300]) tuple(z, x)
  w0 = (s32[], s32[300]) while(t0), condition=cond, body=body
  y0 = s32[300] get-tuple-element(w0), index=1
  m = s32[300] multiply(y0, y0)
  t1 = (s32[], s32[300]) tuple(z, m)
  w1 = (s32[], s32[300]) while(t1), condition=cond, body=body
  y1 = s32[300] get-tuple-element(w1), index=1
  r0 = s32[] reduce(y0, z), dimensions={0}, to_apply=add
  r1 = s32[] reduce(y1, z), dimensions={0}, to_apply=add
  c0 = s32[] call(r0, r1), to_apply=add
  c1 = s32[] call(c0, r1), to_apply=add
  ROOT o = (s32[300], s32[], s32[]) tuple(y1, r0, c1)
})");
}

TEST(MiscEndToEnd, TwoCallsOfOneComputation) {
  EXPECT_EXACT(R"(HloModule m
f {
  p = f32[500] parameter(0)
  q = f32[500] parameter(1)
  a = f32[500] multiply(p, q)
  ROOT n = f32[500] negate(a)
}
ENTRY main {
  x = f32[500] parameter(0)
  y = f32[500] parameter(1)
  c0 = f32[500] call(x, y), to_apply=f
  c1 = f32[500] call(c0, x), to_apply=f
  ROOT s = f32[500] subtract(c0, c1)
})");
}

TEST(MiscEndToEnd, SharedBranchesAndNestedShare) {
  // Both branches are one computation, which a called computation also uses.
  EXPECT_EXACT(R"(HloModule m
g {
  p = s32[64] parameter(0)
  ROOT d = s32[64] add(p, p)
}
h {
  p = s32[64] parameter(0)
  c = s32[64] call(p), to_apply=g
  ROOT e = s32[64] call(c), to_apply=g
}
ENTRY main {
  x = s32[64] parameter(0)
  i = s32[] parameter(1)
  k = s32[64] conditional(i, x, x), branch_computations={g, g}
  ROOT o = s32[64] call(k), to_apply=h
})");
}

TEST(MiscEndToEnd, GenerateLloLeavesTheModuleAlone) {
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("t.hlo", R"(HloModule m
f {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
ENTRY main {
  x = f32[8] parameter(0)
  a = f32[8] call(x), to_apply=f
  ROOT b = f32[8] call(a), to_apply=f
})");
  auto loaded = hlo::readModule(source, diags);
  ASSERT_TRUE(loaded.module);
  std::string before = hlo::writeModule(*loaded.module, hlo::HloEncoding::Text);
  auto target = target::loadTarget("v5e", diags);
  auto first = generateLlo(*loaded.module, *target, {}, diags);
  ASSERT_TRUE(first);
  EXPECT_EQ(hlo::writeModule(*loaded.module, hlo::HloEncoding::Text), before);
  auto second = generateLlo(*loaded.module, *target, {}, diags);
  ASSERT_TRUE(second);
  EXPECT_EQ(first->llo, second->llo);  // deterministic
}

TEST(MiscEndToEnd, PartitionAndReplicaId) {
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = u32[100] parameter(0)
  p = u32[] partition-id()
  r = u32[] replica-id()
  s = u32[] add(p, r)
  b = u32[100] broadcast(s), dimensions={}
  a = u32[100] add(x, b)
  ROOT t = (u32[100], u32[], u32[]) tuple(a, p, r)
})");
}

TEST(MiscEndToEnd, TokensAndDependencies) {
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = f32[100] parameter(0)
  t0 = token[] after-all()
  t1 = token[] after-all(t0)
  d = f32[100] add-dependency(x, t1)
  b = f32[100] opt-barrier(d)
  ROOT n = f32[100] negate(b)
})");
}

TEST(MiscEndToEnd, GetDimensionSize) {
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = f32[7,300] parameter(0)
  d0 = s32[] get-dimension-size(x), dimensions={0}
  d1 = s32[] get-dimension-size(x), dimensions={1}
  ROOT m = s32[] multiply(d0, d1)
})");
}

TEST(MiscEndToEnd, CopyStartAndDone) {
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = f32[3,500] parameter(0)
  s = (f32[3,500], f32[3,500], u32[]) copy-start(x)
  d = f32[3,500] copy-done(s)
  ROOT a = f32[3,500] add(d, x)
})");
}

TEST(MiscEndToEnd, AsyncWrapper) {
  EXPECT_EXACT(R"(HloModule m
wrapped {
  p = f32[2000] parameter(0)
  q = f32[2000] parameter(1)
  ROOT m = f32[2000] maximum(p, q)
}
ENTRY main {
  x = f32[2000] parameter(0)
  y = f32[2000] parameter(1)
  s = ((f32[2000], f32[2000]), f32[2000], s32[]) async-start(x, y), calls=wrapped
  u = ((f32[2000], f32[2000]), f32[2000], s32[]) async-update(s)
  d = f32[2000] async-done(u)
  ROOT n = f32[2000] negate(d)
})");
}

hlo::Literal specialFloats(int64_t n) {
  hlo::Literal l(hlo::Shape::array(hlo::ElementType::F32, {n}));
  const uint32_t fixed[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                            0x7f800001u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x3f800000u, 0x3f7fffffu,
                            0x47800000u, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fffffu,
                            0x33800000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xc0490fdbu, 0x3effffffu};
  std::mt19937 rng(99);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = i < static_cast<int64_t>(std::size(fixed)) ? fixed[i] : static_cast<uint32_t>(rng());
    l.setBits(i, bits);
  }
  return l;
}

TEST(MiscEndToEnd, ReducePrecisionBitExact) {
  std::vector<hlo::Literal> args = {specialFloats(3000)};
  for (auto [e, m] : std::vector<std::pair<int, int>>{
           {5, 10}, {8, 7}, {4, 3}, {5, 2}, {1, 0}, {2, 1}, {8, 23}, {11, 52}, {8, 0}, {6, 23}}) {
    SCOPED_TRACE(fmt::format("exponent_bits={} mantissa_bits={}", e, m));
    EXPECT_EXACT(fmt::format(R"(HloModule m
ENTRY main {{
  x = f32[3000] parameter(0)
  ROOT r = f32[3000] reduce-precision(x), exponent_bits={}, mantissa_bits={}
}})",
                             e, m),
                 "v5e", CodegenOptions{}, &args);
  }
  // Inside a fusion, on bf16.
  EXPECT_EXACT(R"(HloModule m
fused {
  p = bf16[1000] parameter(0)
  r = bf16[1000] reduce-precision(p), exponent_bits=5, mantissa_bits=3
  ROOT a = bf16[1000] add(r, p)
}
ENTRY main {
  x = bf16[1000] parameter(0)
  ROOT f = bf16[1000] fusion(x), kind=kLoop, calls=fused
})");
}

std::string rngModule(const std::string& alg, int stateCount, const std::string& bitsShape) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  s = u64[{0}] parameter(0)
  ROOT r = (u64[{0}], {1}) rng-bit-generator(s), algorithm={2}
}})",
                     stateCount, bitsShape, alg);
}

TEST(MiscEndToEnd, RngBitGeneratorThreeFry) {
  // Counters that carry across the 32-bit word and wrap 64 bits.
  for (uint64_t counter : {uint64_t{0}, uint64_t{0xfffffff0u}, ~uint64_t{0} - 5}) {
    SCOPED_TRACE(counter);
    std::vector<hlo::Literal> args = {u64Literal({0x0123456789abcdefull, counter})};
    EXPECT_EXACT(rngModule("rng_three_fry", 2, "u32[37,50]"), "v5e", CodegenOptions{}, &args);
    EXPECT_EXACT(rngModule("rng_default", 2, "u64[333]"), "v5e", CodegenOptions{}, &args);
    EXPECT_EXACT(rngModule("rng_three_fry", 2, "s8[2001]"), "v5e", CodegenOptions{}, &args);
    EXPECT_EXACT(rngModule("rng_three_fry", 2, "f32[3]"), "v5e", CodegenOptions{}, &args);
    EXPECT_EXACT(rngModule("rng_three_fry", 2, "bf16[1999]"), "v5e", CodegenOptions{}, &args);
  }
}

TEST(MiscEndToEnd, RngBitGeneratorPhilox) {
  for (uint64_t counter : {uint64_t{7}, uint64_t{0xfffffffeu}, ~uint64_t{0} - 2}) {
    SCOPED_TRACE(counter);
    std::vector<hlo::Literal> two = {u64Literal({0xfedcba9876543210ull, counter})};
    std::vector<hlo::Literal> three = {u64Literal({0x1111222233334444ull, counter, ~uint64_t{0}})};
    EXPECT_EXACT(rngModule("rng_philox", 2, "u32[1025]"), "v5e", CodegenOptions{}, &two);
    EXPECT_EXACT(rngModule("rng_philox", 3, "u32[4,9]"), "v5e", CodegenOptions{}, &three);
    EXPECT_EXACT(rngModule("rng_philox", 3, "s64[70]"), "v5e", CodegenOptions{}, &three);
    EXPECT_EXACT(rngModule("rng_philox", 2, "u8[99]"), "v5e", CodegenOptions{}, &two);
    EXPECT_EXACT(rngModule("rng_philox", 3, "bf16[7,3]"), "v5e", CodegenOptions{}, &three);
    EXPECT_EXACT(rngModule("rng_philox", 2, "bf16[2050]"), "v5e", CodegenOptions{}, &two);
  }
}

TEST(MiscEndToEnd, RngStateThroughALoop) {
  // The state threads through a while loop (u64 carried as word pairs).
  std::vector<hlo::Literal> args = {u64Literal({42, 1})};
  EXPECT_EXACT(R"(HloModule m
cond {
  p = (s32[], u64[2], u32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], u64[2], u32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  s = u64[2] get-tuple-element(p), index=1
  a = u32[256] get-tuple-element(p), index=2
  r = (u64[2], u32[256]) rng-bit-generator(s), algorithm=rng_three_fry
  ns = u64[2] get-tuple-element(r), index=0
  b = u32[256] get-tuple-element(r), index=1
  x = u32[256] xor(a, b)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], u64[2], u32[256]) tuple(j, ns, x)
}
ENTRY main {
  s = u64[2] parameter(0)
  z = s32[] constant(0)
  zero = u32[] constant(0)
  a = u32[256] broadcast(zero), dimensions={}
  t = (s32[], u64[2], u32[256]) tuple(z, s, a)
  w = (s32[], u64[2], u32[256]) while(t), condition=cond, body=body
  ROOT o = u32[256] get-tuple-element(w), index=2
})",
               "v5e", CodegenOptions{}, &args);
}

// `rng` draws from the run-time stream in the rng_state argument: each
// module is compared bit for bit with the interpreter under a seed.
std::string rngCall(const std::string& operandType, const std::string& lo, const std::string& hi,
                    const std::string& resultShape, const std::string& distribution) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[] constant({1})
  b = {0}[] constant({2})
  ROOT r = {3} rng(a, b), distribution={4}
}})",
                     operandType, lo, hi, resultShape, distribution);
}

TEST(MiscEndToEnd, RngUniformFloats) {
  for (uint64_t seed : {0ull, 3ull, 0x123456789abcdefull}) {
    SCOPED_TRACE(seed);
    EXPECT_EXACT(rngCall("f32", "0", "1", "f32[37,50]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("f32", "-3.5", "7.25", "f32[1025]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("bf16", "-1", "1", "bf16[999]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("f64", "-2", "1e10", "f64[333]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    // a == b gives a; b < a runs backwards from a (no clamping).
    EXPECT_EXACT(rngCall("f32", "2.5", "2.5", "f32[64]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("f32", "4", "-1", "f32[300]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("f64", "4", "-1", "f64[300]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
  }
}

TEST(MiscEndToEnd, RngUniformClampsBelowTheUpperBound) {
  // One ulp between a and b: about half the draws round up to b and must
  // become nextafter(b, a), for b positive, negative and zero.
  EXPECT_EXACT(rngCall("f64", "1", "1.0000000000000002", "f64[512]", "rng_uniform"));
  EXPECT_EXACT(rngCall("f64", "-1.0000000000000002", "-1", "f64[512]", "rng_uniform"));
  EXPECT_EXACT(rngCall("f64", "-4.9406564584124654e-324", "0", "f64[512]", "rng_uniform"));
}

TEST(MiscEndToEnd, RngUniformIntegers) {
  for (uint64_t seed : {0ull, 11ull}) {
    SCOPED_TRACE(seed);
    EXPECT_EXACT(rngCall("s32", "-10", "10", "s32[2000]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("s32", "0", "2147483647", "s32[300]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr,
                 seed);
    EXPECT_EXACT(rngCall("s32", "5", "5", "s32[40]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("s32", "9", "-3", "s32[40]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("u8", "0", "200", "u8[999]", "rng_uniform"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("s64", "-1000000000000", "1000000000000", "s64[77]", "rng_uniform"), "v5e",
                 CodegenOptions{}, nullptr, seed);
  }
}

TEST(MiscEndToEnd, RngBoundsFromParameters) {
  // Bounds read at run time (f32 and s32 scalars of the test's random data).
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  u = f32[500] rng(a, b), distribution=rng_uniform
  n = f32[500] rng(a, b), distribution=rng_normal
  k = s32[500] rng(i, j), distribution=rng_uniform
  ROOT t = (f32[500], f32[500], s32[500]) tuple(u, n, k)
})",
               "v5e", CodegenOptions{}, nullptr, 21);
}

TEST(MiscEndToEnd, RngNormal) {
  for (uint64_t seed : {0ull, 3ull}) {
    SCOPED_TRACE(seed);
    EXPECT_EXACT(rngCall("f32", "0", "1", "f32[1500]", "rng_normal"), "v5e", CodegenOptions{}, nullptr, seed);
    EXPECT_EXACT(rngCall("f32", "-2", "0.5", "f32[8,16]", "rng_normal"), "v5e", CodegenOptions{}, nullptr, seed);
    {  // f64: ln and cos are expanded into pair rows (kernels/math_f64.cpp), within an ulp each
      E2eRun r = compileAndCompare(rngCall("f64", "10", "3", "f64[400]", "rng_normal"), "v5e", CodegenOptions{},
                                   nullptr, seed);
      ASSERT_EQ(r.error, "");
      EXPECT_LE(r.maxErr, 1e-14) << r.where;
    }
    EXPECT_EXACT(rngCall("bf16", "0", "1", "bf16[300]", "rng_normal"), "v5e", CodegenOptions{}, nullptr, seed);
  }
}

TEST(MiscEndToEnd, RngCallsShareOneStream) {
  // Each call advances the counter; rng-get-and-update-state reads it and
  // skips ahead by its delta.
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r1 = f32[100] rng(a, b), distribution=rng_uniform
  st1 = u64[2] rng-get-and-update-state(), delta=4294967300
  r2 = f32[100] rng(a, b), distribution=rng_normal
  st2 = u64[2] rng-get-and-update-state(), delta=7
  r3 = f32[3] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[100], u64[2], f32[100], u64[2], f32[3]) tuple(r1, st1, r2, st2, r3)
})",
               "v5e", CodegenOptions{}, nullptr, 5);
}

TEST(MiscEndToEnd, RngInsideAWhileLoop) {
  // Every iteration draws anew: the counter lives in memory.
  EXPECT_EXACT(R"(HloModule m
cond {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[256] get-tuple-element(p), index=1
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  r = f32[256] rng(lo, hi), distribution=rng_uniform
  x = f32[256] multiply(acc, r)
  y = f32[256] add(x, r)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[256]) tuple(j, y)
}
ENTRY main {
  z = s32[] constant(0)
  zero = f32[] constant(0)
  a = f32[256] broadcast(zero), dimensions={}
  t = (s32[], f32[256]) tuple(z, a)
  w = (s32[], f32[256]) while(t), condition=cond, body=body
  g = f32[256] get-tuple-element(w), index=1
  s = u64[2] rng-get-and-update-state(), delta=1
  ROOT o = (f32[256], u64[2]) tuple(g, s)
})",
               "v5e", CodegenOptions{}, nullptr, 9);
}

TEST(MiscEndToEnd, RngDrawsInTheInterpretersOrder) {
  // The interpreter evaluates the root's operands first (r2 before r1) and
  // never evaluates what the root does not need (dead): the compiled
  // program must draw the same numbers.
  for (const char* text : {R"(HloModule m
ENTRY main {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r1 = f32[300] rng(a, b), distribution=rng_uniform
  r2 = f32[300] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[300], f32[300]) tuple(r2, r1)
})",
                           R"(HloModule m
ENTRY main {
  a = f32[] constant(0)
  b = f32[] constant(1)
  dead = f32[8] rng(a, b), distribution=rng_normal
  ROOT r = f32[8] rng(a, b), distribution=rng_normal
})"}) {
    E2eRun r = compileAndCompare(text, "v5e", CodegenOptions{}, nullptr, 11);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
  }
}

hlo::Literal fullRangeS8(std::vector<int64_t> dims, uint32_t seed) {
  hlo::Literal l(hlo::Shape::array(hlo::ElementType::S8, dims));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  for (int64_t i = 0; i < l.elementCount(); ++i) l.setInt(i, d(rng));
  return l;
}

TEST(MiscEndToEnd, DotS8OnTheMxuBitExact) {
  for (const char* target : {"v5e", "v4"}) {
    SCOPED_TRACE(target);
    std::vector<hlo::Literal> args = {fullRangeS8({64, 384}, 1), fullRangeS8({384, 256}, 2)};
    E2eRun r = compileAndCompare(R"(HloModule m
ENTRY main {
  a = s8[64,384] parameter(0)
  b = s8[384,256] parameter(1)
  ROOT d = s32[64,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                                 target, CodegenOptions{}, &args);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
  }
  // Padded tiles, a batch dimension and a transposed operand.
  std::vector<hlo::Literal> args = {fullRangeS8({3, 10, 100}, 3), fullRangeS8({3, 50, 100}, 4)};
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = s8[3,10,100] parameter(0)
  b = s8[3,50,100] parameter(1)
  ROOT d = s32[3,10,50] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
})",
               "v5e", CodegenOptions{}, &args);
}

TEST(MiscEndToEnd, IntegerDotsOnTheVectorUnit) {
  // Wrapping 32-bit sums: large operands overflow the same way.
  hlo::Literal a(hlo::Shape::array(hlo::ElementType::S32, {2, 20, 70}));
  hlo::Literal b(hlo::Shape::array(hlo::ElementType::S32, {2, 1100, 70}));
  std::mt19937 rng(5);
  for (int64_t i = 0; i < a.elementCount(); ++i) a.setInt(i, static_cast<int32_t>(rng()));
  for (int64_t i = 0; i < b.elementCount(); ++i) b.setInt(i, static_cast<int32_t>(rng()));
  std::vector<hlo::Literal> args = {a, b};
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = s32[2,20,70] parameter(0)
  b = s32[2,1100,70] parameter(1)
  ROOT d = s32[2,20,1100] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
})",
               "v5e", CodegenOptions{}, &args);
  // On v4 (16 MiB VMEM) the rhs does not fit at once: column blocks.
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = s32[3,600] parameter(0)
  b = s32[600,4000] parameter(1)
  ROOT d = s32[3,4000] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
               "v4");
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  a = u8[9,33] parameter(0)
  b = u8[33,5] parameter(1)
  ROOT d = u8[9,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
}

TEST(MiscEndToEnd, IdentityCustomCalls) {
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = f32[40,30] parameter(0)
  s = f32[40,30] custom-call(x), custom_call_target="Sharding", sharding={replicated}
  h = f32[40,30] custom-call(s), custom_call_target="MoveToHost"
  ROOT n = f32[40,30] negate(h)
})");
  EXPECT_EXACT(R"(HloModule m
ENTRY main {
  x = f32[40,30] parameter(0)
  s = f32[20,30] custom-call(x), custom_call_target="SPMDFullToShardShape"
  ROOT f = f32[40,30] custom-call(s), custom_call_target="SPMDShardToFullShape"
})");
}

TEST(MiscEndToEnd, GeluCustomCalls) {
  // Erf by a polynomial with absolute error below 1.5e-7, against f64.
  for (const char* target : {"AwsNeuronGelu", "AwsNeuronGeluBackward"}) {
    SCOPED_TRACE(target);
    E2eRun r = compileAndCompare(fmt::format(R"(HloModule m
ENTRY main {{
  x = f32[3000] parameter(0)
  s = f32[3000] multiply(x, x)
  y = f32[3000] subtract(x, s)
  c = f32[] constant(4)
  cb = f32[3000] broadcast(c), dimensions={{}}
  z = f32[3000] multiply(y, cb)
  ROOT g = f32[3000] custom-call(z), custom_call_target="{}"
}})",
                                             target));
    ASSERT_EQ(r.error, "");
    EXPECT_LE(r.maxErr, 1e-6) << r.where;
  }
}

TEST(MiscEndToEnd, CublasGemmCustomCall) {
  // bf16 operands: exact products, f32 sums in another order than the
  // interpreter's f64 ones.
  E2eRun r = compileAndCompare(R"(HloModule m
ENTRY main {
  a = bf16[2,40,128] parameter(0)
  b = bf16[2,200,128] parameter(1)
  c = f32[2,40,200] parameter(2)
  ROOT g = (f32[2,40,200], s8[1000]) custom-call(a, b, c), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"alpha_real":2,"beta":0.5,"dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0"],"rhs_batch_dimensions":["0"]}}}
})");
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  EXPECT_NE(compileError(R"(HloModule m
ENTRY main {
  a = f32[4,8] parameter(0)
  b = f32[8,5] parameter(1)
  ROOT g = f32[4,6] custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}
})")
                .find("result shape does not match the dot"),
            std::string::npos);
  // Hostile configurations are errors, not exceptions.
  for (const char* cfg :
       {R"({"gemm_backend_config":{"alpha_real":"x","dot_dimension_numbers":{"lhs_contracting_dimensions":[1],"rhs_contracting_dimensions":[0]}}})",
        R"({"gemm_backend_config":[1]})",
        R"({"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":"1"}}})", R"("{oops")"}) {
    SCOPED_TRACE(cfg);
    EXPECT_NE(compileError(fmt::format(R"(HloModule m
ENTRY main {{
  a = f32[4,8] parameter(0)
  b = f32[8,5] parameter(1)
  ROOT g = f32[4,5] custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={}
}})",
                                       cfg))
                  .find("needs two array operands and a gemm_backend_config"),
              std::string::npos);
  }
}

TEST(MiscEndToEnd, ClearErrors) {
  EXPECT_NE(compileError(R"(HloModule m
ENTRY main {
  x = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(x), custom_call_target="my_kernel"
})")
                .find("custom-call target \"my_kernel\" of 'c' is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace tpu::codegen
