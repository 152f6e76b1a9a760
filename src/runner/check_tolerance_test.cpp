#include "runner/check_tolerance.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hlo/literal.h"
#include "passes/test_util.h"
#include "runner/tensor_io.h"

namespace tpu::runner {
namespace {

std::vector<double> tolerancesOf(const std::string& text,
                                 codegen::F32DotPrecision p = codegen::F32DotPrecision::FromConfig) {
  passes::ParsedModule parsed = passes::parseModule(text);
  EXPECT_TRUE(parsed.module) << parsed.messages;
  if (!parsed.module) return {};
  return checkTolerances(*parsed.module, p);
}

TEST(CheckTolerance, EachResultOnlyPaysForTheDotsItDependsOn) {
  // Before: every result got the worst dot's 2 * 2^-8 * sqrt(256).
  auto t = tolerancesOf(R"(HloModule m
ENTRY e {
  x = f32[4,256] parameter(0)
  w = f32[256,8] parameter(1)
  d = f32[4,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f32[4,8] parameter(2)
  s = f32[4,8] add(y, y)
  ROOT r = (f32[4,8], f32[4,8]) tuple(d, s)
})");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0], 0.125);
  EXPECT_DOUBLE_EQ(t[1], kCheckToleranceFloor);
  // Six passes: f32 accuracy.
  t = tolerancesOf(R"(HloModule m
ENTRY e {
  x = f32[4,256] parameter(0)
  w = f32[256,8] parameter(1)
  ROOT d = f32[4,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                   codegen::F32DotPrecision::Highest);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], kCheckToleranceFloor);
}

TEST(CheckTolerance, CrossDeviceSumsGrowWithTheGroup) {
  // A dot partitioned over its contraction: four partial dots of length 64
  // summed by an all-reduce carry the error of one of length 256, so the
  // bound grows with sqrt(4); an all-gather adds nothing.
  const char* kText = R"(HloModule m, num_partitions=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,64] parameter(0)
  w = f32[64,8] parameter(1)
  d = f32[4,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[4,8] all-reduce(d), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  g = f32[16,8] all-gather(d), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ROOT t = (f32[4,8], f32[16,8]) tuple(r, g)
})";
  auto t = tolerancesOf(kText);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0], 2 * 0.0625);  // 2 * 2^-8 * sqrt(64), times sqrt(4)
  EXPECT_DOUBLE_EQ(t[1], 0.0625);
}

TEST(CheckTolerance, Bf16ProductsAreExactOnlyTheirRoundingMayFlip) {
  // graphsage's shape: bf16 dots (exact products, f32 sums), a bf16 add, an
  // f32 sigmoid. The only inexactness is a bf16 rounding that may go the
  // other way: one bf16 ulp, 2^-7 (was 0.125 from the f32 rule).
  auto t = tolerancesOf(R"(HloModule m
ENTRY e {
  x = bf16[1,256] parameter(0)
  w = bf16[256,121] parameter(1)
  d = bf16[1,121] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = bf16[1,121] parameter(2)
  a = bf16[1,121] add(d, b)
  c = f32[1,121] convert(a)
  ROOT s = f32[1,121] logistic(c)
})");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], 0x1p-7);
  // A bf16 dot with an f32 result: only the f32 sum order.
  t = tolerancesOf(R"(HloModule m
ENTRY e {
  x = bf16[1,65536] parameter(0)
  w = bf16[65536,4] parameter(1)
  ROOT d = f32[1,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], 2 * 0x1p-24 * 256);
}

TEST(CheckTolerance, CalledComputationsAndReductions) {
  // A dot inside a fusion counts for the fusion's users; an f32 sum of
  // 10000 elements allows 2 * 2^-24 * 100; max reductions are exact.
  auto t = tolerancesOf(R"(HloModule m
f {
  a = f32[8,64] parameter(0)
  b = f32[64,8] parameter(1)
  ROOT d = f32[8,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
max {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] maximum(p, q)
}
ENTRY e {
  x = f32[8,64] parameter(0)
  y = f32[64,8] parameter(1)
  fu = f32[8,8] fusion(x, y), kind=kOutput, calls=f
  v = f32[10000] parameter(2)
  z = f32[] constant(0)
  s = f32[] reduce(v, z), dimensions={0}, to_apply=add
  m = f32[] reduce(v, z), dimensions={0}, to_apply=max
  ROOT r = (f32[8,8], f32[], f32[]) tuple(fu, s, m)
})");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_DOUBLE_EQ(t[0], 2 * 0x1p-8 * 8);
  EXPECT_DOUBLE_EQ(t[1], 2 * 0x1p-24 * 100);
  EXPECT_DOUBLE_EQ(t[2], kCheckToleranceFloor);
}

TEST(CheckTolerance, ComposedMathHasItsOwnBound) {
  passes::ParsedModule parsed = passes::parseModule(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  l = f32[4] log-plus-one(x)
  y = f64[4] parameter(1)
  g = f64[4] log(y)
  ROOT e = f64[4] exponential-minus-one(y)
})");
  ASSERT_TRUE(parsed.module) << parsed.messages;
  const hlo::Computation& c = *parsed.module->entry();
  for (const auto& instr : c.instructions()) {
    double b = ownErrorBound(*instr, codegen::F32DotPrecision::FromConfig);
    if (instr->name() == "l") EXPECT_DOUBLE_EQ(b, 8 * 0x1p-24);
    else if (instr->name() == "g") EXPECT_DOUBLE_EQ(b, 4 * 0x1p-53);  // f64 log from the pair rows: 1 + 1 ulps
    else if (instr->name() == "e") EXPECT_DOUBLE_EQ(b, 6 * 0x1p-53);  // f64 expm1 too: 2 + 1 ulps
    else EXPECT_EQ(b, 0) << instr->name();
  }
}

TEST(CheckTolerance, ComposedComplexMathHasItsOwnBound) {
  // c64 and c128 library math is chip instructions (kernels/complex.cpp)
  // with measured normwise bounds (the same ulps, of f32 or f64), f64 exp
  // too (kernels/math.cpp); complex add and multiply are exact.
  passes::ParsedModule parsed = passes::parseModule(R"(HloModule m
ENTRY e {
  z = c64[4] parameter(0)
  ex = c64[4] exponential(z)
  ab = f32[4] abs(z)
  dv = c64[4] divide(z, ex)
  mu = c64[4] multiply(z, ex)
  ad = c64[4] add(z, ex)
  w = c128[4] parameter(1)
  lw = c128[4] log(w)
  f = f64[4] parameter(2)
  ROOT fe = f64[4] exponential(f)
})");
  ASSERT_TRUE(parsed.module) << parsed.messages;
  for (const auto& instr : parsed.module->entry()->instructions()) {
    double b = ownErrorBound(*instr, codegen::F32DotPrecision::FromConfig);
    if (instr->name() == "ex") EXPECT_DOUBLE_EQ(b, 12 * 0x1p-24);
    else if (instr->name() == "ab") EXPECT_DOUBLE_EQ(b, 6 * 0x1p-24);
    else if (instr->name() == "dv") EXPECT_DOUBLE_EQ(b, 8 * 0x1p-24);
    else if (instr->name() == "lw") EXPECT_DOUBLE_EQ(b, 12 * 0x1p-53);
    else if (instr->name() == "fe") EXPECT_DOUBLE_EQ(b, 6 * 0x1p-53);  // f64 exp from the pair rows
    else EXPECT_EQ(b, 0) << instr->name();
  }
}

TEST(CheckTolerance, LongChainsDoNotRecurse) {
  std::string text = "HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n  a0 = f32[8] add(p, p)\n";
  for (int i = 1; i < 200000; ++i) text += fmt::format("  a{} = f32[8] add(a{}, p)\n", i, i - 1);
  text += "  ROOT r = f32[8] tan(a199999)\n}\n";
  auto t = tolerancesOf(text);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0], kCheckToleranceFloor);
}

}  // namespace

TEST(CheckTolerance, ScaledBoundsAddUpAlongChainsOfSums) {
  // Two chained single-pass f32 dots (as in ext_gh_gptneox_tp2): each adds
  // 4 (2^-8 + 2^-24 sqrt(K)) relative to the size of its values; an
  // elementwise result beside them gets none.
  passes::ParsedModule parsed = passes::parseModule(R"(HloModule m
ENTRY e {
  x = f32[4,6144] parameter(0)
  w = f32[6144,96] parameter(1)
  v = f32[96,96] parameter(2)
  d1 = f32[4,96] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[4,96] dot(d1, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[4,96] negate(d2)
  ROOT r = (f32[4,96], f32[4,96], f32[96,96]) tuple(d1, n, v)
})");
  ASSERT_TRUE(parsed.module) << parsed.messages;
  auto s = checkScaledTolerances(*parsed.module, codegen::F32DotPrecision::FromConfig);
  ASSERT_EQ(s.size(), 3u);
  const double d1 = 4 * (0x1p-8 + 0x1p-24 * std::sqrt(6144.0));
  const double d2 = 4 * (0x1p-8 + 0x1p-24 * std::sqrt(96.0));
  EXPECT_DOUBLE_EQ(s[0], d1);
  EXPECT_DOUBLE_EQ(s[1], d1 + d2);
  EXPECT_DOUBLE_EQ(s[2], 0);
}

TEST(CheckTolerance, ScaledAtolFollowsTheValuesAroundEachElement) {
  // A sum that cancels to ~0 beside values of ~200: off by 1.2, which the
  // per-element tolerance (0.01 (1 + |want|)) refuses and 0.01 * rms allows;
  // a small block elsewhere keeps its own small scale.
  std::vector<float> want(256, 200.0f), got(256, 200.0f);
  want[5] = -0.7f;
  got[5] = 0.5f;
  for (int i = 128; i < 256; ++i) want[i] = got[i] = 1.0f;
  got[200] = 1.5f;
  auto literal = [](const std::vector<float>& v) {
    hlo::Literal l(hlo::Shape::array(hlo::ElementType::F32, {2, 128}));
    for (size_t i = 0; i < v.size(); ++i) l.setDouble(static_cast<int64_t>(i), v[i]);
    return l;
  };
  got[200] = 1.0f;
  EXPECT_TRUE(compareLiterals(literal(got), literal(want), 0.01, 0.01));
  EXPECT_FALSE(compareLiterals(literal(got), literal(want), 0.01, 0.01, 0.01));
  got[200] = 1.5f;
  auto diff = compareLiterals(literal(got), literal(want), 0.01, 0.01, 0.01);
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("element [1, 72]"), std::string::npos) << *diff;
}

TEST(CheckTolerance, UnboundedResultsMatchNaNWithAnything) {
  hlo::Literal got(hlo::Shape::array(hlo::ElementType::F32, {2}));
  hlo::Literal want(hlo::Shape::array(hlo::ElementType::F32, {2}));
  got.setDouble(0, 2.5);
  want.setDouble(0, std::nan(""));
  EXPECT_TRUE(compareLiterals(got, want, 1e-5, 1e-5));
  EXPECT_FALSE(compareLiterals(got, want, 1e-5, 1e-5, 0, true));
}

}  // namespace tpu::runner
