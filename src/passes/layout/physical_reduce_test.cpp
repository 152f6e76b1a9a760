#include "passes/layout/physical_reduce.h"

#include <gtest/gtest.h>

#include "hlo/computation.h"
#include "passes/layout/physical_test_util.h"

namespace tpu::passes::layout {
namespace {

// A layer norm over rows of 256 (two dependent sums, a scale and a bias
// vector) as hlo-fuse leaves it: one fusion, f32[20,256] rows padded to 24.
const char* kLayerNorm =
    R"(HloModule t, entry_computation_layout={(f32[20,256]{1,0:T(8,128)}, f32[256]{0:T(256)}, f32[256]{0:T(256)})->f32[20,256]{1,0:T(8,128)}}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[20,256]{1,0} parameter(0)
  g = f32[256]{0} parameter(1)
  b = f32[256]{0} parameter(2)
  zero = f32[] constant(0)
  sum = f32[20]{0} reduce(x, zero), dimensions={1}, to_apply=add
  n = f32[] constant(256)
  nb = f32[20]{0} broadcast(n), dimensions={}
  mean = f32[20]{0} divide(sum, nb)
  mb = f32[20,256]{1,0} broadcast(mean), dimensions={0}
  d = f32[20,256]{1,0} subtract(x, mb)
  d2 = f32[20,256]{1,0} multiply(d, d)
  ss = f32[20]{0} reduce(d2, zero), dimensions={1}, to_apply=add
  var = f32[20]{0} divide(ss, nb)
  eps = f32[] constant(1e-05)
  eb = f32[20]{0} broadcast(eps), dimensions={}
  ve = f32[20]{0} add(var, eb)
  rs = f32[20]{0} rsqrt(ve)
  rb = f32[20,256]{1,0} broadcast(rs), dimensions={0}
  y = f32[20,256]{1,0} multiply(d, rb)
  gb = f32[20,256]{1,0} broadcast(g), dimensions={1}
  yg = f32[20,256]{1,0} multiply(y, gb)
  bb = f32[20,256]{1,0} broadcast(b), dimensions={1}
  ROOT o = f32[20,256]{1,0} add(yg, bb)
}
ENTRY main {
  x = f32[20,256]{1,0:T(8,128)} parameter(0)
  g = f32[256]{0:T(256)} parameter(1)
  b = f32[256]{0:T(256)} parameter(2)
  ROOT f = f32[20,256]{1,0:T(8,128)} fusion(x, g, b), kind=kLoop, calls=norm
})";

// The fused computation the entry's root calls.
const hlo::Computation& rootBody(const hlo::Module& m) { return *m.entry()->root()->fusedComputation(); }

TEST(PhysicalRowFusions, LayerNormRunsOnTheTiles) {
  auto m = parse(kLayerNorm);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.arguments, 3);
  EXPECT_EQ(report.results, 1);
  EXPECT_TRUE(report.names.empty()) << report.names.front();
  auto p = parse(kLayerNorm);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  for (hlo::Opcode op : {hlo::Opcode::Transpose, hlo::Opcode::Slice, hlo::Opcode::Pad})
    EXPECT_EQ(countOps(*p, op), 0) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  ASSERT_EQ(p->entry()->root()->opcode(), hlo::Opcode::Fusion);
  EXPECT_EQ(p->entry()->root()->name(), "f");
  EXPECT_EQ(p->entry()->root()->shape().dimensions(), (std::vector<int64_t>{3, 2, 8, 128}));
  // Reduced over the lane digits, row values [a/8, 8] broadcast back over
  // them, the vectors read as [b/128, 128].
  int reduces = 0;
  for (const auto& in : rootBody(*p).instructions()) {
    if (in->opcode() == hlo::Opcode::Reduce) {
      ++reduces;
      EXPECT_EQ(in->attrs().dimensions, (std::vector<int64_t>{1, 3}));
      EXPECT_EQ(in->shape().dimensions(), (std::vector<int64_t>{3, 8}));
    }
    if (in->opcode() == hlo::Opcode::Broadcast && in->operand(0)->shape().rank() == 2) {
      const bool vec = in->operand(0)->shape().dimensions()[1] == 128;
      EXPECT_EQ(in->attrs().dimensions, vec ? (std::vector<int64_t>{1, 3}) : (std::vector<int64_t>{0, 2}))
          << in->name();
    }
  }
  EXPECT_EQ(reduces, 2);
  EXPECT_EQ(p->computations().size(), 3u);  // entry, add, the twin's: the logical fused computation is gone
}

TEST(PhysicalRowFusions, SoftmaxOverMergedLeadingDimensions) {
  // Rank 4 merges the untiled dimensions: [2,3,16,384] -> [6, 2, 3, 8, 128];
  // max then sum; the negate runs on the tiles too, and the relayout
  // moves after it (the row-major result).
  const char* text =
      R"(HloModule t, entry_computation_layout={(f32[2,3,16,384]{3,2,1,0:T(8,128)})->(f32[2,3,16,384]{3,2,1,0:T(8,128)}, f32[2,3,16,384]{3,2,1,0})}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
softmax {
  x = f32[2,3,16,384]{3,2,1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[2,3,16]{2,1,0} reduce(x, ninf), dimensions={3}, to_apply=max
  mb = f32[2,3,16,384]{3,2,1,0} broadcast(mx), dimensions={0,1,2}
  d = f32[2,3,16,384]{3,2,1,0} subtract(x, mb)
  e = f32[2,3,16,384]{3,2,1,0} exponential(d)
  zero = f32[] constant(0)
  s = f32[2,3,16]{2,1,0} reduce(e, zero), dimensions={3}, to_apply=add
  sb = f32[2,3,16,384]{3,2,1,0} broadcast(s), dimensions={0,1,2}
  ROOT y = f32[2,3,16,384]{3,2,1,0} divide(e, sb)
}
ENTRY main {
  x = f32[2,3,16,384]{3,2,1,0:T(8,128)} parameter(0)
  f = f32[2,3,16,384]{3,2,1,0:T(8,128)} fusion(x), kind=kLoop, calls=softmax
  n = f32[2,3,16,384]{3,2,1,0} negate(f)
  ROOT t = (f32[2,3,16,384]{3,2,1,0:T(8,128)}, f32[2,3,16,384]{3,2,1,0}) tuple(f, n)
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"n"}));
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  const hlo::Instruction* twin = p->entry()->root()->operand(0);
  EXPECT_EQ(twin->shape().dimensions(), (std::vector<int64_t>{6, 2, 3, 8, 128}));
  EXPECT_EQ(twin->operand(0)->opcode(), hlo::Opcode::Parameter);
}

TEST(PhysicalRowFusions, PaddedLanesKeepTheRelayouts) {
  // 300 columns pad to 384 lanes, which the reduction would fold (the
  // padding is not zero after sunk elementwise work): not rewritten.
  const char* text =
      R"(HloModule t, entry_computation_layout={(f32[16,300]{1,0:T(8,128)})->f32[16,300]{1,0:T(8,128)}}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[16,300]{1,0} parameter(0)
  zero = f32[] constant(0)
  s = f32[16]{0} reduce(x, zero), dimensions={1}, to_apply=add
  sb = f32[16,300]{1,0} broadcast(s), dimensions={0}
  ROOT y = f32[16,300]{1,0} divide(x, sb)
}
ENTRY main {
  x = f32[16,300]{1,0:T(8,128)} parameter(0)
  e = f32[16,300]{1,0:T(8,128)} exponential(x)
  ROOT f = f32[16,300]{1,0:T(8,128)} fusion(e), kind=kLoop, calls=norm
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"e", "f"}));
}

TEST(PhysicalRowFusions, ReductionsAcrossTheSublanesAreNotRowFusions) {
  // Column-major rows: the reduced dimension is in the sublanes, not the lanes.
  const char* text =
      R"(HloModule t, entry_computation_layout={(f32[16,256]{0,1:T(8,128)})->f32[16,256]{0,1:T(8,128)}}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[16,256]{1,0} parameter(0)
  zero = f32[] constant(0)
  s = f32[16]{0} reduce(x, zero), dimensions={1}, to_apply=add
  sb = f32[16,256]{1,0} broadcast(s), dimensions={0}
  ROOT y = f32[16,256]{1,0} divide(x, sb)
}
ENTRY main {
  x = f32[16,256]{0,1:T(8,128)} parameter(0)
  ROOT f = f32[16,256]{0,1:T(8,128)} fusion(x), kind=kLoop, calls=norm
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"x", "f"}));
}

}  // namespace
}  // namespace tpu::passes::layout
