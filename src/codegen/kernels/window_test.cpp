// End-to-end tests of reduce-window, select-and-scatter and sort: llo-gen ->
// assembler -> simulator against the interpreter. Tolerances: the window
// folds apply the reducer in the interpreter's order (window taps in
// row-major order), so f32 results are bit-exact (0.0) unless stated;
// integers are always bit-exact.
#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

const char* kComputations = R"(
maxf {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT m = f32[] maximum(p, q)
}
addf {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
adds {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT s = s32[] add(p, q)
}
gef {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=GE
}
ges {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=GE
}
ltf {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=LT
}
gtf {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=GT
}
)";

std::string module(const std::string& entry) { return std::string("HloModule m\n") + kComputations + entry; }

TEST(Window, MaxPool3x3Stride2SameNhwc) {
  // 9x9 -> 5x5 (SAME pads 1 each side); 8x8 -> 4x4 (SAME pads 0 low, 1 high).
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[2,9,9,8] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[2,5,5,8] reduce-window(x, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=maxf
})"),
               0.0);
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[1,8,8,32] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[1,4,4,32] reduce-window(x, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=maxf
})"),
               0.0);
}

TEST(Window, AvgPoolSum) {
  // Sum in tap order from init, then the divide: the same operations as the
  // interpreter, bit-exact.
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[2,7,6,3] parameter(0)
  z = f32[] constant(0)
  s = f32[2,6,5,3] reduce-window(x, z), window={size=1x2x2x1 stride=1x1x1x1}, to_apply=addf
  c = f32[] constant(4)
  b = f32[2,6,5,3] broadcast(c), dimensions={}
  ROOT a = f32[2,6,5,3] divide(s, b)
})"),
               0.0);
  // Non-identity init: padding is skipped, not folded in as init.
  EXPECT_MATCH(module(R"(ENTRY main {
  x = s32[5,300] parameter(0)
  z = s32[] constant(7)
  ROOT s = s32[3,150] reduce-window(x, z), window={size=3x4 stride=2x2 pad=1_1x1_1}, to_apply=adds
})"),
               0.0);
}

TEST(Window, WindowAndBaseDilation) {
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[10,12] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[9,5] reduce-window(x, z), window={size=3x2 stride=1x2 pad=1_2x0_1 rhs_dilate=2x3}, to_apply=addf
})"),
               0.0);
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[6,5] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[12,8] reduce-window(x, z), window={size=2x3 stride=1x2 pad=1_1x2_3 lhs_dilate=2x3}, to_apply=maxf
})"),
               0.0);
}

TEST(Window, VariadicArgmax) {
  // (value, index) pairs: the larger value wins, ties go to the smaller index.
  EXPECT_MATCH(R"(HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(bv, av), direction=GT
  eq = pred[] compare(bv, av), direction=EQ
  lt = pred[] compare(bi, ai), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, bv, av)
  i = s32[] select(take, bi, ai)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY main {
  x = f32[4,20,16] parameter(0)
  i = s32[4,20,16] iota(), iota_dimension=1
  zv = f32[] constant(-inf)
  zi = s32[] constant(-1)
  ROOT r = (f32[4,10,16], s32[4,10,16]) reduce-window(x, i, zv, zi), window={size=1x3x1 stride=1x2x1 pad=0_0x1_0x0_0}, to_apply=argmax
})",
               0.0);
}

TEST(Window, PackedTypes) {
  // bf16 max (exact) and s8 sums that wrap like the interpreter's.
  EXPECT_MATCH(R"(HloModule m
maxb {
  p = bf16[] parameter(0)
  q = bf16[] parameter(1)
  ROOT m = bf16[] maximum(p, q)
}
ENTRY main {
  x = bf16[3,17,40] parameter(0)
  z = bf16[] constant(-inf)
  ROOT r = bf16[3,9,20] reduce-window(x, z), window={size=1x3x2 stride=1x2x2 pad=0_0x1_1x0_0}, to_apply=maxb
})",
               0.0);
  EXPECT_MATCH(R"(HloModule m
add8 {
  p = s8[] parameter(0)
  q = s8[] parameter(1)
  ROOT s = s8[] add(p, q)
}
ENTRY main {
  x = s8[40,33] parameter(0)
  z = s8[] constant(100)
  ROOT r = s8[38,31] reduce-window(x, z), window={size=3x3}, to_apply=add8
})",
               0.0);
}

TEST(Window, Rank5AndPred) {
  // 3-D pooling over NDHWC (box copies of more dims than one descriptor has).
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[2,5,6,7,3] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[2,3,3,4,3] reduce-window(x, z), window={size=1x2x3x2x1 stride=1x2x2x2x1 pad=0_0x0_1x1_0x1_0x0_0}, to_apply=maxf
})"),
               0.0);
  EXPECT_MATCH(R"(HloModule m
andp {
  p = pred[] parameter(0)
  q = pred[] parameter(1)
  ROOT a = pred[] and(p, q)
}
ENTRY main {
  x = pred[30,40] parameter(0)
  t = pred[] constant(true)
  ROOT r = pred[15,39] reduce-window(x, t), window={size=2x2 stride=2x1}, to_apply=andp
})",
               0.0);
}

TEST(Window, SelectAndScatterMaxPoolGradient) {
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[2,8,8,4] parameter(0)
  g = f32[2,4,4,4] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[2,8,8,4] select-and-scatter(x, g, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, select=gef, scatter=addf
})"),
               0.0);
  // Integers in [-4, 4]: many ties (the first maximum in window order wins)
  // and overlapping windows accumulating into the same element.
  EXPECT_MATCH(module(R"(ENTRY main {
  x = s32[9,11] parameter(0)
  g = s32[5,5] parameter(1)
  z = s32[] constant(3)
  ROOT r = s32[9,11] select-and-scatter(x, g, z), window={size=3x3 stride=2x2 pad=1_1x0_0}, select=ges, scatter=adds
})"),
               0.0);
}

TEST(Sort, F32AscendingDescendingLastDim) {
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[16,100] parameter(0)
  ROOT s = f32[16,100] sort(x), dimensions={1}, to_apply=ltf
})"),
               0.0);
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[3000] parameter(0)
  ROOT s = f32[3000] sort(x), dimensions={0}, is_stable=true, to_apply=gtf
})"),
               0.0);
}

TEST(Sort, NonMinorDimension) {
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[37,5,3] parameter(0)
  ROOT s = f32[37,5,3] sort(x), dimensions={0}, to_apply=ltf
})"),
               0.0);
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[4,130,6] parameter(0)
  ROOT s = f32[4,130,6] sort(x), dimensions={1}, to_apply=gtf
})"),
               0.0);
}

TEST(Sort, KeyValueStableWithTies) {
  // s32 keys in [-4, 4]: every key repeats; stability decides the order of
  // the values (bit-exact).
  EXPECT_MATCH(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY main {
  k = s32[6,500] parameter(0)
  v = f32[6,500] parameter(1)
  ROOT s = (s32[6,500], f32[6,500]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
})",
               0.0);
  // Keys and their positions: the positions must come out increasing
  // within each run of equal keys.
  EXPECT_MATCH(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=GT
}
ENTRY main {
  k = s32[2000] parameter(0)
  i = s32[2000] iota(), iota_dimension=0
  ROOT s = (s32[2000], s32[2000]) sort(k, i), dimensions={0}, is_stable=true, to_apply=cmp
})",
               0.0);
}

TEST(Sort, ManyChunksPackedTypes) {
  // A small VMEM budget: 50 rows go through the network in several chunks,
  // the last one partial. bf16 keys (many ties), s8 payload, descending.
  CodegenOptions o;
  o.vmemFraction = 0.001;
  E2eRun r = compileAndCompare(R"(HloModule m
cmp {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  c = s8[] parameter(2)
  d = s8[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=GT
}
ENTRY main {
  k = bf16[50,300] parameter(0)
  v = s8[50,300] parameter(1)
  ROOT s = (bf16[50,300], s8[50,300]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
})",
                               "v5e", o);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.where;
}

TEST(Sort, ShortRowsAndMultiKeyComparator) {
  // Length-1 rows (nothing to do) and a comparator over two keys.
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[5,1,3] parameter(0)
  ROOT s = f32[5,1,3] sort(x), dimensions={1}, to_apply=ltf
})"),
               0.0);
  EXPECT_MATCH(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt2 = pred[] compare(c, d), direction=GT
  t = pred[] and(eq, gt2)
  ROOT l = pred[] or(lt, t)
}
ENTRY main {
  k = s32[7,33] parameter(0)
  v = f32[7,33] parameter(1)
  ROOT s = (s32[7,33], f32[7,33]) sort(k, v), dimensions={0}, to_apply=cmp
})",
               0.0);
}

TEST(Sort, UnsignedKeys) {
  EXPECT_MATCH(R"(HloModule m
cmp {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = u32[3,200] parameter(0)
  c = u32[] constant(4294967000)
  b = u32[3,200] broadcast(c), dimensions={}
  y = u32[3,200] add(x, b)
  ROOT s = u32[3,200] sort(y), dimensions={1}, to_apply=cmp
})",
               0.0);
}

TEST(Sort, FiveOperandsAndOddVregCount) {
  // Five operands take the one-vreg-per-iteration loop; three rows of 1024
  // an odd number of vregs in the paired loop.
  EXPECT_MATCH(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  p2 = f32[] parameter(2)
  p3 = f32[] parameter(3)
  p4 = s32[] parameter(4)
  p5 = s32[] parameter(5)
  p6 = f32[] parameter(6)
  p7 = f32[] parameter(7)
  p8 = s8[] parameter(8)
  p9 = s8[] parameter(9)
  ROOT l = pred[] compare(a, b), direction=GT
}
ENTRY main {
  k = s32[4,77] parameter(0)
  v1 = f32[4,77] parameter(1)
  v2 = s32[4,77] parameter(2)
  v3 = f32[4,77] parameter(3)
  v4 = s8[4,77] parameter(4)
  ROOT s = (s32[4,77], f32[4,77], s32[4,77], f32[4,77], s8[4,77]) sort(k, v1, v2, v3, v4), dimensions={1}, to_apply=cmp
})",
               0.0);
  EXPECT_MATCH(module(R"(ENTRY main {
  x = f32[3,1024] parameter(0)
  ROOT s = f32[3,1024] sort(x), dimensions={1}, to_apply=ltf
})"),
               0.0);
}

TEST(Sort, TotalOrderComparator) {
  // Signed zeros: a float comparison ties them, the total order puts -0
  // first. Both must match the interpreter bit for bit.
  const char* text = R"(HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY main {
  x = f32[64] parameter(0)
  ROOT s = f32[64] sort(x), dimensions={0}, to_apply=cmp
})";
  std::vector<hlo::Literal> args;
  args.emplace_back(hlo::Shape::array(hlo::ElementType::F32, {64}));
  for (int64_t i = 0; i < 64; ++i) args[0].setDouble(i, i % 3 == 0 ? (i % 2 ? -0.0 : 0.0) : std::sin(i * 1.7) * 3);
  E2eRun r = compileAndCompare(text, "v5e", {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0);
}

}  // namespace
}  // namespace tpu::codegen
