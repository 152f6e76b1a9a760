#include "passes/layout/layout_rules.h"

#include <gtest/gtest.h>

#include "hlo/io/hlo_io.h"
#include "hlo/binary/binary.h"
#include "hlo/text/parser.h"

namespace tpu::passes::layout {
namespace {

using hlo::ElementType;

TEST(LayoutRules, TilesFollowTypeAndSecondMinor) {
  TileGeometry g;
  EXPECT_EQ(tpuLayout(ElementType::F32, {256, 512}, {1, 0}, g).toString(), "{1,0:T(8,128)}");
  EXPECT_EQ(tpuLayout(ElementType::BF16, {256, 512}, {1, 0}, g).toString(), "{1,0:T(8,128)(2,1)}");
  EXPECT_EQ(tpuLayout(ElementType::S8, {64, 512}, {1, 0}, g).toString(), "{1,0:T(8,128)(4,1)}");
  EXPECT_EQ(tpuLayout(ElementType::S4, {64, 512}, {1, 0}, g).toString(), "{1,0:T(8,128)(8,1)E(4)}");
  // Compact tiles when the second-minor dimension is small.
  EXPECT_EQ(tpuLayout(ElementType::F32, {4, 512}, {1, 0}, g).toString(), "{1,0:T(4,128)}");
  EXPECT_EQ(tpuLayout(ElementType::BF16, {512, 2}, {0, 1}, g).toString(), "{0,1:T(2,128)(2,1)}");
  EXPECT_EQ(tpuLayout(ElementType::F32, {1000}, {0}, g).toString(), "{0:T(256)}");
  EXPECT_EQ(tpuLayout(ElementType::BF16, {1000}, {0}, g).toString(), "{0:T(1024)(128)(2,1)}");
  EXPECT_EQ(tpuLayout(ElementType::F32, {}, {}, g).toString(), "{}");
  EXPECT_EQ(tpuLayout(ElementType::F64, {8, 8}, {1, 0}, g).toString(), "{1,0}");
}

TEST(LayoutRules, PaddedBytesCountsTheFirstTile) {
  hlo::Shape s(ElementType::F32, {3, 5});
  EXPECT_EQ(paddedBytes(s), 60);
  s.setLayout(tpuLayout(ElementType::F32, {3, 5}, {1, 0}, {}));  // T(4,128): 4 x 128
  EXPECT_EQ(paddedBytes(s), 4 * 128 * 4);
  // LAYOUT.md's padding example: minor 18 -> 128, 9 -> 16.
  hlo::Shape big(ElementType::F32, {4, 128, 128, 9, 18});
  big.setLayout(tpuLayout(ElementType::F32, big.dimensions(), {4, 3, 0, 2, 1}, {}));
  EXPECT_EQ(paddedBytes(big), int64_t{128} * 128 * 4 * 16 * 128 * 4);
  hlo::Shape packed(ElementType::S4, {8, 128});
  packed.setLayout(tpuLayout(ElementType::S4, {8, 128}, {1, 0}, {}));
  EXPECT_EQ(paddedBytes(packed), 8 * 128 / 2);
}

TEST(LayoutRules, TransposeBitcast) {
  // transpose [64,128]{1,0} -> [128,64] is free with the result {0,1}.
  EXPECT_TRUE(transposeIsBitcast({1, 0}, {0, 1}, {1, 0}));
  EXPECT_FALSE(transposeIsBitcast({1, 0}, {1, 0}, {1, 0}));
  EXPECT_EQ(transposeOperandM2M({1, 0}, {1, 0}), (M2M{0, 1}));
  EXPECT_EQ(transposeOutputM2M({2, 1, 0}, {0, 2, 1}), (M2M{1, 2, 0}));
  EXPECT_TRUE(transposeIsBitcast({2, 1, 0}, {1, 2, 0}, {0, 2, 1}));
}

TEST(LayoutRules, ReshapeBitcast) {
  // Row-major splits of major dimensions are free; tiled minor dims must stay.
  EXPECT_TRUE(reshapeIsBitcast({4, 8, 128}, {2, 1, 0}, {32, 128}, {1, 0}, 8));
  EXPECT_FALSE(reshapeIsBitcast({32, 128}, {1, 0}, {4096}, {0}, 8));
  // Whole tiles of rows merge; a second-minor dimension of 4 does not.
  EXPECT_FALSE(reshapeIsBitcast({8, 4, 128}, {2, 1, 0}, {32, 128}, {1, 0}, 8));
  EXPECT_TRUE(reshapeIsBitcast({8, 4, 128}, {2, 1, 0}, {32, 128}, {1, 0}, 0));
  EXPECT_TRUE(reshapeIsBitcast({32, 128}, {1, 0}, {4096}, {0}, 0));
  EXPECT_FALSE(reshapeIsBitcast({2, 3}, {1, 0}, {3, 2}, {0, 1}, 0));
  EXPECT_TRUE(reshapeIsBitcast({2, 3}, {1, 0}, {3, 2}, {1, 0}, 0));
  // Merging dims that are adjacent in physical order only.
  EXPECT_TRUE(reshapeIsBitcast({4, 6, 128}, {2, 0, 1}, {24, 128}, {1, 0}, 8) == false);
  EXPECT_TRUE(reshapeIsBitcast({4, 6, 8}, {1, 2, 0}, {4, 48}, {0, 1}, 0) == false);
  EXPECT_TRUE(reshapeIsBitcast({4, 6, 8}, {0, 2, 1}, {24, 8}, {1, 0}, 0) == false);
  EXPECT_TRUE(reshapeIsBitcast({6, 4, 8}, {2, 1, 0}, {6, 32}, {1, 0}, 0));
  auto aligned = alignedReshapeM2M({4, 8, 128}, {2, 1, 0}, {32, 128}, 8);
  ASSERT_TRUE(aligned.has_value());
  EXPECT_EQ(*aligned, (M2M{1, 0}));
  // [8,16,128]{2,0,1} (dim 1 major) -> [16, 8*128]? dims 0 and 2 are not adjacent: none.
  EXPECT_FALSE(alignedReshapeM2M({8, 16, 128}, {2, 0, 1}, {128, 128}, 0).has_value());
  // [16,8,128]{2,1,0} seen as [16,1024]: the aligned layout is row-major.
  auto split = alignedReshapeM2M({16, 8, 128}, {2, 1, 0}, {16, 1024}, 0);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(*split, (M2M{1, 0}));
  // Unit dimensions go most major.
  auto unit = alignedReshapeM2M({8, 128}, {1, 0}, {1, 8, 128}, 8);
  ASSERT_TRUE(unit.has_value());
  EXPECT_EQ(*unit, (M2M{2, 1, 0}));
}

// Layouts round-trip exactly through the text and the .hlob encodings.
TEST(LayoutRoundTrip, TextAndBinary) {
  const char* text = R"(HloModule m, entry_computation_layout={(f32[256,512]{1,0:T(8,128)}, bf16[16,256]{0,1:T(8,128)(2,1)S(1)})->(s4[128]{0:T(1024)(128)(8,1)E(4)}, f32[]{:T(256)})}

ENTRY %main (a: f32[256,512], b: bf16[16,256]) -> (s4[128], f32[]) {
  %a = f32[256,512]{1,0:T(8,128)} parameter(0)
  %b = bf16[16,256]{0,1:T(8,128)(2,1)S(1)} parameter(1)
  %c = s4[128]{0:T(1024)(128)(8,1)E(4)} constant({...})
  %s = f32[]{:T(256)} constant(1)
  %p = pred[8,256]{1,0:T(8,128)(4,1)L(4)} constant({...})
  ROOT %t = (s4[128]{0:T(1024)(128)(8,1)E(4)}, f32[]{:T(256)}) tuple(%c, %s)
}
)";
  auto source = std::make_shared<SourceFile>("m.hlo", text);
  DiagnosticEngine diags;
  hlo::LoadedModule loaded = hlo::readModule(source, diags, {.verify = false});
  ASSERT_TRUE(loaded.module) << (diags.errorCount() ? "parse error" : "");
  std::string printed = hlo::writeModule(*loaded.module, hlo::HloEncoding::Text);
  std::string binary = hlo::writeModule(*loaded.module, hlo::HloEncoding::Binary);
  auto binSource = std::make_shared<SourceFile>("m.hlob", binary);
  hlo::LoadedModule back = hlo::readModule(binSource, diags, {.verify = false});
  ASSERT_TRUE(back.module);
  EXPECT_EQ(hlo::writeModule(*back.module, hlo::HloEncoding::Text), printed);
  EXPECT_TRUE(hlo::structurallyEqual(*loaded.module, *back.module));
  EXPECT_NE(printed.find("bf16[16,256]{0,1:T(8,128)(2,1)S(1)}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("f32[]{:T(256)}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("pred[8,256]{1,0:T(8,128)(4,1)L(4)}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("s4[128]{0:T(1024)(128)(8,1)E(4)}"), std::string::npos) << printed;
}

}  // namespace
}  // namespace tpu::passes::layout
