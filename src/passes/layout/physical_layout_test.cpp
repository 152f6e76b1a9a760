#include "passes/layout/physical_layout.h"

#include <gtest/gtest.h>

#include <cstring>

#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "hlo/verify/verifier.h"
#include "passes/clone.h"
#include "passes/layout/layout_assignment.h"
#include "passes/layout/physical_test_util.h"
#include "passes/testing/differential.h"

namespace tpu::passes::layout {
namespace {

using hlo::ElementType;
using hlo::Shape;

Shape shapeOf(ElementType t, std::vector<int64_t> dims, std::vector<int64_t> m2m,
              std::vector<std::vector<int64_t>> tiles) {
  Shape s(t, std::move(dims));
  hlo::Layout l;
  l.minorToMajor = std::move(m2m);
  for (auto& d : tiles) l.tiles.push_back({d});
  s.setLayout(l);
  return s;
}

TEST(PhysicalLayout, DimsAndPaddedBytes) {
  // f32[20,300]{1,0:T(8,128)}: 3 x 3 tiles of 8 x 128.
  Shape a = shapeOf(ElementType::F32, {20, 300}, {1, 0}, {{8, 128}});
  EXPECT_EQ(*physicalDims(a), (std::vector<int64_t>{3, 3, 8, 128}));
  EXPECT_EQ(physicalByteSize(a), 3 * 3 * 8 * 128 * 4);
  EXPECT_EQ(physicalByteSize(a), paddedBytes(a));
  // bf16 (8,128)(2,1): the tile's rows in pairs, the pair minor.
  Shape b = shapeOf(ElementType::BF16, {16, 128}, {1, 0}, {{8, 128}, {2, 1}});
  EXPECT_EQ(*physicalDims(b), (std::vector<int64_t>{2, 1, 4, 128, 2, 1}));
  EXPECT_EQ(physicalByteSize(b), 16 * 128 * 2);
  // Column-major without tiles is a transpose; rank 1 T(256) pads.
  EXPECT_EQ(*physicalDims(shapeOf(ElementType::F32, {3, 5}, {0, 1}, {})), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(*physicalDims(shapeOf(ElementType::F32, {300}, {0}, {{256}})), (std::vector<int64_t>{2, 256}));
  // Default layouts, missing layouts, sub-byte types: no physical form.
  EXPECT_FALSE(physicalDims(shapeOf(ElementType::F32, {3, 5}, {1, 0}, {})));
  EXPECT_FALSE(physicalDims(Shape(ElementType::F32, {3, 5})));
  EXPECT_FALSE(physicalDims(shapeOf(ElementType::S4, {8, 128}, {1, 0}, {{8, 128}, {8, 1}})));
  EXPECT_EQ(physicalByteSize(Shape(ElementType::F32, {3, 5})), 60);
}

TEST(PhysicalLayout, ElementPositions) {
  Shape a = shapeOf(ElementType::F32, {20, 300}, {1, 0}, {{8, 128}});
  std::vector<int64_t> map = physicalIndexMap(a);
  ASSERT_EQ(map.size(), 6000u);
  // (i, j) -> tile (i/8, j/128), within it (i%8, j%128).
  auto at = [&](int64_t i, int64_t j) { return map[static_cast<size_t>(i * 300 + j)]; };
  EXPECT_EQ(at(0, 0), 0);
  EXPECT_EQ(at(0, 127), 127);
  EXPECT_EQ(at(0, 128), 1024);  // the next tile of the row block: contiguous 4 KiB tiles
  EXPECT_EQ(at(1, 0), 128);
  EXPECT_EQ(at(8, 0), 3 * 1024);
  EXPECT_EQ(at(19, 299), (2 * 3 + 2) * 1024 + 3 * 128 + 43);
  Shape b = shapeOf(ElementType::BF16, {16, 128}, {1, 0}, {{8, 128}, {2, 1}});
  std::vector<int64_t> mb = physicalIndexMap(b);
  EXPECT_EQ(mb[0], 0);
  EXPECT_EQ(mb[128], 1);        // (1, 0): the second row of the pair, next to (0, 0)
  EXPECT_EQ(mb[1], 2);          // (0, 1)
  EXPECT_EQ(mb[2 * 128], 256);  // (2, 0): the next pair of rows
  // Round trip through bytes; padding is zero.
  std::vector<float> logical(6000);
  for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<float>(i) + 0.5f;
  auto phys = logicalToPhysical(a, reinterpret_cast<const uint8_t*>(logical.data()), logical.size() * 4);
  ASSERT_EQ(phys.size(), static_cast<size_t>(physicalByteSize(a)));
  float f;
  std::memcpy(&f, phys.data() + 4 * 1024, 4);
  EXPECT_EQ(f, 128.5f);
  std::memcpy(&f, phys.data() + 4 * (1024 * 3 - 1), 4);  // (7, 383): padding lane
  EXPECT_EQ(f, 0.0f);
  auto back = physicalToLogical(a, phys.data(), phys.size());
  ASSERT_EQ(back.size(), logical.size() * 4);
  EXPECT_EQ(std::memcmp(back.data(), logical.data(), back.size()), 0);
}

TEST(PhysicalEdges, TiledParametersAndResultsKeepResults) {
  auto m = parse(R"(HloModule t, entry_computation_layout={(f32[20,300]{1,0:T(8,128)}, bf16[16,130]{0,1:T(8,128)(2,1)}, f32[300]{0:T(256)})->(f32[20,300]{0,1:T(8,128)}, bf16[16,130]{1,0:T(8,128)(2,1)})}
ENTRY main {
  a = f32[20,300]{1,0:T(8,128)} parameter(0)
  b = bf16[16,130]{0,1:T(8,128)(2,1)} parameter(1)
  v = f32[300]{0:T(256)} parameter(2)
  vb = f32[20,300]{1,0:T(8,128)} broadcast(v), dimensions={1}
  s = f32[20,300]{0,1:T(8,128)} add(a, vb)
  n = bf16[16,130]{1,0:T(8,128)(2,1)} negate(b)
  ROOT t = (f32[20,300]{0,1:T(8,128)}, bf16[16,130]{1,0:T(8,128)(2,1)}) tuple(s, n)
})");
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.arguments, 3);
  EXPECT_EQ(report.results, 2);
  // Padded element counts minus logical ones, times the element size:
  // a [24,384], b [136,128] (column-major), v [512], s [304,128], n [16,256].
  EXPECT_EQ(report.paddingBytes, (24 * 384 - 6000) * 4 + (136 * 128 - 2080) * 2 + (512 - 300) * 4 +
                                     (304 * 128 - 6000) * 4 + (16 * 256 - 2080) * 2);
}

TEST(PhysicalEdges, HighRankArraysMergeTheUntiledDimensions) {
  // The dims no tile reaches are merged ([3*2*5*3*2, 130, 10] tiled), so the
  // physical form stays within the 8 dimensions a buffer has, whatever the rank.
  Shape s = shapeOf(ElementType::BF16, {2, 3, 5, 2, 3, 10, 130}, {5, 6, 0, 1, 2, 3, 4}, {{8, 128}, {2, 1}});
  EXPECT_EQ(*physicalDims(s), (std::vector<int64_t>{180, 17, 1, 4, 128, 2, 1}));
  auto m = parse(R"(HloModule t, entry_computation_layout={(bf16[2,3,5,2,3,10,130]{5,6,0,1,2,3,4:T(8,128)(2,1)})->f32[2,3,5,2,3,10,130]{6,5,4,3,2,1,0:T(8,128)}}
ENTRY main {
  a = bf16[2,3,5,2,3,10,130]{5,6,0,1,2,3,4:T(8,128)(2,1)} parameter(0)
  ROOT c = f32[2,3,5,2,3,10,130]{6,5,4,3,2,1,0:T(8,128)} convert(a)
})");
  expectSameThroughEdges(*m);
}

TEST(PhysicalEdges, DefaultLayoutsChangeNothing) {
  auto m = parse(R"(HloModule t
ENTRY main {
  a = f32[20,300] parameter(0)
  ROOT n = f32[20,300] negate(a)
})");
  DiagnosticEngine diags;
  EXPECT_FALSE(PhysicalEdgesPass().run(*m, diags));
}

TEST(PhysicalEdges, LaidOutModulesKeepResults) {
  // A transposed-dot chain through layout assignment with entry layouts
  // chosen: tiled, some column-major, at every edge.
  auto m = parse(R"(HloModule t
ENTRY main {
  x = f32[64,200] parameter(0)
  w = f32[96,200] parameter(1)
  wt = f32[200,96] transpose(w), dimensions={1,0}
  d = f32[64,96] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dt = f32[96,64] transpose(d), dimensions={1,0}
  p = (f32[96,64], f32[64,200]) parameter(2)
  g = f32[96,64] get-tuple-element(p), index=0
  ROOT r = (f32[96,64], f32[64,96]) tuple(dt, d)
})");
  LayoutOptions o;
  o.entryLayouts = EntryLayouts::Auto;
  DiagnosticEngine diags;
  LayoutAssignmentPass(o).run(*m, diags);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_GE(report.arguments, 2);
  EXPECT_EQ(report.results, 2);
}

// No instruction that moves data between layouts is left in the entry.
bool hasRelayoutOps(const hlo::Module& m) {
  for (const auto& in : m.entry()->instructions())
    if (in->opcode() == hlo::Opcode::Transpose || in->opcode() == hlo::Opcode::Slice ||
        in->opcode() == hlo::Opcode::Pad || in->opcode() == hlo::Opcode::Fusion)
      return true;
  return false;
}

TEST(PhysicalEdges, ElementwiseChainsRunOnTheTiles) {
  // Padded f32 tiles, a scalar broadcast, a tuple parameter, compare and
  // select with a pred in the same arrangement: no relayout at all.
  const char* text = R"(HloModule t, entry_computation_layout={((f32[20,300]{1,0:T(8,128)}, f32[20,300]{1,0:T(8,128)}))->f32[20,300]{1,0:T(8,128)}}
ENTRY main {
  p = (f32[20,300]{1,0:T(8,128)}, f32[20,300]{1,0:T(8,128)}) parameter(0)
  a = f32[20,300]{1,0:T(8,128)} get-tuple-element(p), index=0
  b = f32[20,300]{1,0:T(8,128)} get-tuple-element(p), index=1
  c = f32[] constant(0.5)
  cb = f32[20,300]{1,0:T(8,128)} broadcast(c), dimensions={}
  m = f32[20,300]{1,0:T(8,128)} multiply(a, cb)
  g = pred[20,300]{1,0:T(8,128)} compare(m, b), direction=GT
  ROOT s = f32[20,300]{1,0:T(8,128)} select(g, m, b)
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.arguments, 2);
  EXPECT_EQ(report.results, 1);
  EXPECT_TRUE(report.names.empty()) << report.names.front();
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  EXPECT_FALSE(hasRelayoutOps(*p));
}

TEST(PhysicalEdges, ElementwiseFusionsRunOnTheTiles) {
  const char* text = R"(HloModule t, entry_computation_layout={(bf16[3,20,300]{2,1,0:T(8,128)(2,1)}, bf16[3,20,300]{2,1,0:T(8,128)(2,1)}, bf16[])->bf16[3,20,300]{2,1,0:T(8,128)(2,1)}}
fused {
  x = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} parameter(0)
  y = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} parameter(1)
  k = bf16[] parameter(2)
  kb = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} broadcast(k), dimensions={}
  f = f32[3,20,300]{2,1,0:T(8,128)} convert(x)
  e = f32[3,20,300]{2,1,0:T(8,128)} exponential(f)
  h = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} convert(e)
  hy = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} subtract(h, y)
  ROOT r = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} maximum(hy, kb)
}
ENTRY main {
  a = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} parameter(0)
  b = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} parameter(1)
  k = bf16[] parameter(2)
  ROOT o = bf16[3,20,300]{2,1,0:T(8,128)(2,1)} fusion(a, b, k), kind=kLoop, calls=fused
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_TRUE(report.names.empty()) << report.names.front();
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  ASSERT_NE(p->entry()->root()->opcode(), hlo::Opcode::Transpose);
  EXPECT_EQ(p->entry()->root()->name(), "o");  // the twin keeps the name (kernel names)
  EXPECT_EQ(p->computations().size(), 2u);     // the logical fused computation is gone
}

TEST(PhysicalEdges, RelayoutsMoveToTheUsersThatNeedLogicalArrays) {
  // The tanh runs on the tiles; its value is relaid for the dot only, the
  // argument no more. A bitcast of the same bytes is the parameter itself.
  auto m = parse(R"(HloModule t, entry_computation_layout={(f32[20,300]{1,0:T(8,128)}, f32[40,300]{0,1:T(8,128)})->(f32[20,300]{1,0:T(8,128)}, f32[20,40]{1,0:T(8,128)})}
ENTRY main {
  a = f32[20,300]{1,0:T(8,128)} parameter(0)
  w = f32[40,300]{0,1:T(8,128)} parameter(1)
  wt = f32[300,40]{1,0:T(8,128)} bitcast(w)
  t = f32[20,300]{1,0:T(8,128)} tanh(a)
  n = f32[300,40]{1,0:T(8,128)} negate(wt)
  d = f32[20,40]{1,0:T(8,128)} dot(t, n), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[20,300]{1,0:T(8,128)}, f32[20,40]{1,0:T(8,128)}) tuple(t, d)
})");
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"t", "n", "d"}));
}

TEST(PhysicalEdges, ArrayConstantsAreStoredPhysicallyToo) {
  // Array constants beside physical operands (in the entry and inside a
  // fusion) are converted to their physical form: still no relayout.
  auto values = [](int offset) {
    std::string t = "{";
    for (int r = 0; r < 3; ++r) {
      t += r ? ", {" : "{";
      for (int c = 0; c < 130; ++c) t += (c ? ", " : "") + std::to_string((r * 130 + c + offset) % 17 - 8);
      t += "}";
    }
    return t + "}";
  };
  const std::string f32 = "f32[3,130]{1,0:T(8,128)}";
  std::string text = "HloModule t, entry_computation_layout={(" + f32 + ")->(" + f32 + ", " + f32 + ")}\n" +
                     "fused {\n  x = " + f32 + " parameter(0)\n  k = " + f32 + " constant(" + values(0) + ")\n" +
                     "  ROOT r = " + f32 + " multiply(x, k)\n}\n" +
                     "ENTRY main {\n  a = " + f32 + " parameter(0)\n  c = " + f32 + " constant(" + values(5) + ")\n" +
                     "  s = " + f32 + " add(a, c)\n  f = " + f32 + " fusion(a), kind=kLoop, calls=fused\n" +
                     "  ROOT o = (" + f32 + ", " + f32 + ") tuple(s, f)\n}\n";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_TRUE(report.names.empty()) << report.names.front();
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  for (const auto& in : p->entry()->instructions()) {
    EXPECT_NE(in->opcode(), hlo::Opcode::Transpose) << in->name();
    EXPECT_NE(in->opcode(), hlo::Opcode::Slice) << in->name();
  }
}

TEST(PhysicalEdges, DotsReadTheTilesOfTheirOperands) {
  // An unpadded contraction over T(8,128) operands, lanes along K for the
  // lhs and along N for the rhs, padded free dimensions (20 rows, 300
  // columns): the dot reads the tiles (no relayout), its result is sliced.
  const char* text = R"(HloModule t, entry_computation_layout={(f32[20,256]{1,0:T(8,128)}, f32[256,300]{1,0:T(8,128)})->f32[20,300]{1,0}}
ENTRY main {
  x = f32[20,256]{1,0:T(8,128)} parameter(0)
  w = f32[256,300]{1,0:T(8,128)} parameter(1)
  ROOT d = f32[20,300]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  auto m = parse(text);
  expectSameThroughEdges(*m);
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Transpose) + countOps(*p, hlo::Opcode::Fusion), 0)
      << hlo::writeModule(*p, hlo::HloEncoding::Text);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Dot), 1);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Slice), 1);
}

// physical-edges on `text`: the same bits as the row-major program, and
// the dot reads its operands' tiles (no transpose or relayout fusion left).
void expectDotOnTiles(const char* text, int64_t slices, bool fused = false) {
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Transpose), 0) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Fusion), fused ? 1 : 0);  // the twin itself, no relayout fusion
  EXPECT_EQ(countOps(*p, hlo::Opcode::Dot), fused ? 0 : 1);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Slice), slices);
  EXPECT_TRUE(report.names.empty()) << report.names.front();
}

TEST(PhysicalEdges, Bf16DotsReadPairedRowTiles) {
  // bf16 under T(8,128)(2,1): a word holds two rows. The lhs rows are
  // (a/8, 4, 2) digits, the rhs's K rows pair with the lhs lanes through
  // (K/128, 16, 4, 2); 20 rows pad to 24 (sliced off).
  expectDotOnTiles(R"(HloModule t, entry_computation_layout={(bf16[20,256]{1,0:T(8,128)(2,1)}, bf16[256,384]{1,0:T(8,128)(2,1)})->f32[20,384]{1,0}}
ENTRY main {
  x = bf16[20,256]{1,0:T(8,128)(2,1)} parameter(0)
  w = bf16[256,384]{1,0:T(8,128)(2,1)} parameter(1)
  ROOT d = f32[20,384]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})", 1);
}

TEST(PhysicalEdges, BatchedDotsSplitTheMergedDimensions) {
  // Rank 4: the batch dimensions, merged in the physical form, are split
  // again by a free reshape; bf16 result, both operands paired rows.
  expectDotOnTiles(R"(HloModule t, entry_computation_layout={(bf16[2,3,16,128]{3,2,1,0:T(8,128)(2,1)}, bf16[2,3,128,256]{3,2,1,0:T(8,128)(2,1)})->bf16[2,3,16,256]{3,2,1,0}}
ENTRY main {
  x = bf16[2,3,16,128]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  w = bf16[2,3,128,256]{3,2,1,0:T(8,128)(2,1)} parameter(1)
  ROOT d = bf16[2,3,16,256]{3,2,1,0} dot(x, w), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
})", 0);
}

TEST(PhysicalEdges, BiasColumnsBroadcastOverTheColumnDigits) {
  // An MLP layer's output fusion: the bias along the columns is reshaped to
  // the rhs free digits (N/128, 128) and broadcast over them in the twin.
  const char* text = R"(HloModule t, entry_computation_layout={(bf16[16,256]{1,0:T(8,128)(2,1)}, bf16[256,256]{1,0:T(8,128)(2,1)}, bf16[256]{0})->bf16[16,256]{1,0}}
fc {
  a = bf16[16,256]{1,0} parameter(0)
  b = bf16[256,256]{1,0} parameter(1)
  c = bf16[256]{0} parameter(2)
  d = bf16[16,256]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bc = bf16[16,256]{1,0} broadcast(c), dimensions={1}
  s = bf16[16,256]{1,0} add(d, bc)
  ROOT t = bf16[16,256]{1,0} tanh(s)
}
ENTRY main {
  x = bf16[16,256]{1,0:T(8,128)(2,1)} parameter(0)
  w = bf16[256,256]{1,0:T(8,128)(2,1)} parameter(1)
  bias = bf16[256]{0} parameter(2)
  ROOT f = bf16[16,256]{1,0} fusion(x, w, bias), kind=kOutput, calls=fc
})";
  expectDotOnTiles(text, 0, true);
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  const hlo::Instruction* f = p->entry()->root()->operand(0);
  ASSERT_EQ(f->opcode(), hlo::Opcode::Fusion) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  EXPECT_EQ(f->operand(2)->shape().dimensions(), (std::vector<int64_t>{2, 128}));
}

TEST(PhysicalEdges, DotsWithPaddedContractionsKeepTheirRelayouts) {
  // K = 200 pads to 256 lanes (garbage after sunk elementwise work): the
  // operands are relaid as before; an output fusion with a tanh epilogue.
  const char* text = R"(HloModule t, entry_computation_layout={(f32[16,200]{1,0:T(8,128)}, f32[200,128]{1,0:T(8,128)})->f32[16,128]{1,0}}
fc {
  a = f32[16,200]{1,0} parameter(0)
  b = f32[200,128]{1,0} parameter(1)
  d = f32[16,128]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[16,128]{1,0} tanh(d)
}
ENTRY main {
  x = f32[16,200]{1,0:T(8,128)} parameter(0)
  w = f32[200,128]{1,0:T(8,128)} parameter(1)
  ROOT f = f32[16,128]{1,0} fusion(x, w), kind=kOutput, calls=fc
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"x", "w"}));
}

TEST(PhysicalLayout, StridesWhereEachDimensionStepsUniformly) {
  // NHWC activations stored H, W, N, C under T(8,128), 64 channels: each
  // image is one lane row of every 8 x 128 tile (stride 128), the channels
  // contiguous, the padding lanes 64..127 between positions.
  Shape x = shapeOf(ElementType::F32, {16, 10, 10, 64}, {3, 0, 2, 1}, {{8, 128}});
  EXPECT_EQ(*physicalStrides(x), (std::vector<int64_t>{128, 10 * 2 * 1024, 2 * 1024, 1}));
  // 200 channels take two tiles: image n is at n / 8 x 2 tiles + n % 8 rows.
  EXPECT_FALSE(physicalStrides(shapeOf(ElementType::F32, {16, 10, 10, 200}, {3, 0, 2, 1}, {{8, 128}})));
  // bf16 (2,1): rows in pairs, the pair minor (row 1 is one element on).
  EXPECT_FALSE(
      physicalStrides(shapeOf(ElementType::BF16, {16, 10, 10, 64}, {3, 0, 2, 1}, {{8, 128}, {2, 1}})));
  EXPECT_FALSE(physicalStrides(Shape(ElementType::F32, {3, 5})));
}

// relu(conv(x, w) + b + x) over f32 NHWC activations stored H, W, N, C
// T(8,128) (64 channels pad to 128 lanes), as hlo-fuse leaves it: one
// output fusion.
const char* kConvBlock =
    R"(HloModule t, entry_computation_layout={(f32[16,6,5,64]{3,0,2,1:T(8,128)}, f32[3,3,64,64]{3,2,1,0}, f32[64]{0})->f32[16,6,5,64]{3,0,2,1:T(8,128)}}
fc {
  x = f32[16,6,5,64]{3,0,2,1} parameter(0)
  w = f32[3,3,64,64]{3,2,1,0} parameter(1)
  b = f32[64]{0} parameter(2)
  r = f32[16,6,5,64]{3,0,2,1} parameter(3)
  c = f32[16,6,5,64]{3,0,2,1} convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[16,6,5,64]{3,0,2,1} broadcast(b), dimensions={3}
  s = f32[16,6,5,64]{3,0,2,1} add(c, bb)
  t = f32[16,6,5,64]{3,0,2,1} add(s, r)
  z = f32[] constant(0)
  zb = f32[16,6,5,64]{3,0,2,1} broadcast(z), dimensions={}
  ROOT m = f32[16,6,5,64]{3,0,2,1} maximum(t, zb)
}
ENTRY main {
  x = f32[16,6,5,64]{3,0,2,1:T(8,128)} parameter(0)
  w = f32[3,3,64,64]{3,2,1,0} parameter(1)
  b = f32[64]{0} parameter(2)
  ROOT f = f32[16,6,5,64]{3,0,2,1:T(8,128)} fusion(x, w, b, x), kind=kOutput, calls=fc
})";

TEST(PhysicalEdges, ConvolutionsReadAndWriteTheTiles) {
  auto m = parse(kConvBlock);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_TRUE(report.names.empty()) << "relayouts left: " << report.names.size();
  auto p = parse(kConvBlock);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  // One fusion over the physical x (the activations and the residual, each
  // through a physical bitcast), its root the physical bitcast of the result.
  ASSERT_EQ(countOps(*p, hlo::Opcode::Fusion), 1) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  EXPECT_EQ(countOps(*p, hlo::Opcode::Transpose), 0);
  const hlo::Instruction* f = p->entry()->root();
  ASSERT_EQ(f->opcode(), hlo::Opcode::Fusion);
  EXPECT_EQ(f->name(), "f");
  EXPECT_EQ(f->operand(0), p->entry()->parameter(0));
  EXPECT_EQ(f->operand(3), p->entry()->parameter(0));
  int64_t views = 0;
  for (const auto& in : f->fusedComputation()->instructions()) views += isPhysicalBitcast(*in);
  EXPECT_EQ(views, 3);
  EXPECT_TRUE(isPhysicalBitcast(*f->fusedComputation()->root()));
}

TEST(PhysicalEdges, ConvolutionsOverPairedRowsKeepTheirRelayouts) {
  // bf16 (2,1) pairs two images in each 32-bit word: not a strided view of
  // one image, so the activations are relaid as before (and the result).
  std::string text = kConvBlock;
  for (size_t at; (at = text.find("f32")) != std::string::npos;) text.replace(at, 3, "bf16");
  for (size_t at; (at = text.find("T(8,128)}")) != std::string::npos;) text.replace(at, 9, "T(8,128)(2,1)}");
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_EQ(report.names, (std::vector<std::string>{"x", "f"}));
}

TEST(PhysicalEdges, UnfusedConvolutionsBecomeOutputFusions) {
  // A lone convolution: an output fusion of it alone over the tiles; its
  // result layout is the default one, so its value stays logical.
  const char* text =
      R"(HloModule t, entry_computation_layout={(f32[8,7,9,32]{3,0,2,1:T(8,128)}, f32[3,3,32,16]{3,2,1,0})->f32[8,5,7,16]{3,2,1,0}}
ENTRY main {
  x = f32[8,7,9,32]{3,0,2,1:T(8,128)} parameter(0)
  w = f32[3,3,32,16]{3,2,1,0} parameter(1)
  ROOT c = f32[8,5,7,16]{3,2,1,0} convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f
})";
  auto m = parse(text);
  PhysicalEdgeReport report;
  expectSameThroughEdges(*m, &report);
  EXPECT_TRUE(report.names.empty());
  auto p = parse(text);
  DiagnosticEngine diags;
  PhysicalEdgesPass().run(*p, diags);
  const hlo::Instruction* f = p->entry()->root();
  ASSERT_EQ(f->opcode(), hlo::Opcode::Fusion) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  EXPECT_EQ(f->name(), "c");
  EXPECT_EQ(f->shape().dimensions(), (std::vector<int64_t>{8, 5, 7, 16}));
  EXPECT_EQ(f->fusedComputation()->root()->opcode(), hlo::Opcode::Convolution);
}

}  // namespace
}  // namespace tpu::passes::layout
