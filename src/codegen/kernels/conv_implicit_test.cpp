// Convolutions on the implicit-GEMM path (kernels/conv_implicit.cpp): a sweep
// of shapes, strides, paddings, dilations, layouts and output types,
// compared with the interpreter. bf16 operands make every product exact,
// so only the order of the f32 sums differs: 1e-4 relative (|got - want| /
// (1 + |want|)); bf16 results: one rounding; f32 and f16 operands as
// their passes round. Batch groups, multi-pass f32, f16/f8 and 3-D windows
// take the same kernel. Each case also checks that the implicit kernel ran and
// that the im2col path (CodegenOptions::implicitConv = false) agrees.
#include <gtest/gtest.h>

#include <limits>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

struct Case {
  const char* name;
  std::string text;
  double tol = 0;  // when set: the case's own tolerance
};

std::string conv(const std::string& x, const std::string& k, const std::string& out,
                 const std::string& attrs) {
  return "HloModule m\nENTRY main {\n  x = " + x + " parameter(0)\n  k = " + k +
         " parameter(1)\n  ROOT c = " + out + " convolution(x, k), " + attrs + "\n}\n";
}

std::vector<Case> cases() {
  return {
      {"Nhwc3x3SamePacked", conv("bf16[3,17,19,16]", "bf16[3,3,16,64]", "f32[3,17,19,64]",
                                 "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")},
      {"Nhwc3x3Full128", conv("bf16[2,10,10,64]", "bf16[3,3,64,128]", "f32[2,10,10,128]",
                              "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")},
      {"Stride2Valid", conv("bf16[2,15,14,64]", "bf16[3,3,64,64]", "f32[2,7,6,64]",
                            "window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f")},
      {"FirstLayerThreeChannels",
       conv("bf16[1,33,33,3]", "bf16[7,7,3,16]", "f32[1,17,17,16]",
            "window={size=7x7 stride=2x2 pad=3_3x3_3}, dim_labels=b01f_01io->b01f")},
      {"ManyOutputsTwoNTiles", conv("bf16[2,8,8,16]", "bf16[5,5,16,200]", "f32[2,8,8,200]",
                                    "window={size=5x5 pad=2_2x2_2}, dim_labels=b01f_01io->b01f")},
      {"RowDilationAndUnevenPadding",
       conv("bf16[1,9,30,7]", "bf16[3,3,7,24]", "f32[1,6,30,24]",
            "window={size=3x3 pad=1_0x1_1 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f")},
      {"ChannelsAcrossK", conv("bf16[2,10,10,130]", "bf16[3,3,130,64]", "f32[2,10,10,64]",
                               "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")},
      {"OneByOne", conv("bf16[1,7,7,300]", "bf16[1,1,300,256]", "f32[1,7,7,256]",
                        "window={size=1x1}, dim_labels=b01f_01io->b01f")},
      {"NchwReversedBf16Result",
       conv("bf16[3,16,9,11]", "bf16[64,16,3,3]", "bf16[3,64,9,11]",
            "window={size=3x3 pad=1_1x1_1 rhs_reversal=1x1}, dim_labels=bf01_oi01->bf01")},
      {"OneDimensional", conv("bf16[4,50,24]", "bf16[5,24,40]", "f32[4,48,40]",
                              "window={size=5 pad=1_1}, dim_labels=b0f_0io->b0f")},
      {"F32OperandsOnePass", conv("f32[2,12,12,32]", "f32[3,3,32,32]", "f32[2,12,12,32]",
                                  "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")},
      // One image: rows stream in by bands that periods wait for, results
      // leave by bands as periods finish them (bands of at least 128 KiB:
      // 4 in and 8 out; 4 in and 3 out with stride 2, the last shorter;
      // one each way for the smaller images).
      {"OneImageBandsPointwise", conv("bf16[1,64,64,64]", "bf16[1,1,64,128]", "bf16[1,64,64,128]",
                                      "window={size=1x1}, dim_labels=b01f_01io->b01f")},
      {"OneImageBandsStride2", conv("bf16[1,96,95,32]", "bf16[3,3,32,48]", "f32[1,48,48,48]",
                                    "window={size=3x3 stride=2x2 pad=0_1x1_1}, dim_labels=b01f_01io->b01f")},
      {"OneImageBandsLargeWindow", conv("bf16[1,23,21,8]", "bf16[7,7,8,32]", "f32[1,23,21,32]",
                                        "window={size=7x7 pad=3_3x3_3}, dim_labels=b01f_01io->b01f")},
      {"OneImageBandsChannelsFirst", conv("bf16[1,16,20,17]", "bf16[3,3,16,64]", "bf16[1,64,20,17]",
                                          "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_01io->bf01")},
      {"OneImageOneDimensional", conv("bf16[1,300,24]", "bf16[3,24,40]", "f32[1,300,40]",
                                      "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f")},
      // Dilated along the run: the holes are zero weights.
      {"RunDilated", conv("bf16[2,12,20,16]", "bf16[3,3,16,32]", "f32[2,10,14,32]",
                          "window={size=3x3 rhs_dilate=1x3}, dim_labels=b01f_01io->b01f")},
      // Grouped: parts of groups, each part's weights block-diagonal.
      {"GroupedParts",
       conv("bf16[2,10,12,64]", "bf16[3,3,16,96]", "f32[2,10,12,96]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4")},
      {"GroupedChannelsFirstStride2",
       conv("bf16[2,32,9,8]", "bf16[48,8,3,3]", "bf16[2,48,4,4]",
            "window={size=3x3 stride=2x2 pad=0_1x1_0}, dim_labels=bf01_oi01->bf01, "
            "feature_group_count=4")},
      {"DepthwiseMultiplier4",
       conv("bf16[2,9,9,40]", "bf16[3,3,1,160]", "f32[2,9,9,160]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=40")},
      {"GroupedOneDimensional",
       conv("bf16[1,300,48]", "bf16[5,6,64]", "f32[1,300,64]",
            "window={size=5 pad=2_2}, dim_labels=b0f_0io->b0f, feature_group_count=8")},
      // lhs dilation (a transposed convolution) and negative padding: the
      // box holds the dilated, cropped image, holes and padding zero.
      {"TransposedStride2", conv("bf16[2,7,8,32]", "bf16[3,3,32,48]", "f32[2,14,16,48]",
                                 "window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f")},
      {"NegativePadding", conv("bf16[2,12,13,24]", "bf16[3,3,24,40]", "f32[2,8,11,40]",
                               "window={size=3x3 pad=-1_-1x0_0}, dim_labels=b01f_01io->b01f")},
      {"OneImageBandsTransposedCropped", conv("bf16[1,64,64,64]", "bf16[3,3,64,64]", "f32[1,125,125,64]",
                                              "window={size=3x3 pad=-1_1x0_0 lhs_dilate=2x2}, "
                                              "dim_labels=b01f_01io->b01f")},
      // Batch groups (weight gradients): group l's images in the box's
      // channels l x C, weights block-diagonal.
      {"BatchGroups", conv("bf16[6,10,12,24]", "bf16[3,3,24,96]", "f32[2,10,12,96]",
                           "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, batch_group_count=3")},
      {"BatchGroupsChannelsFirstStride2",
       conv("bf16[8,16,9,9]", "bf16[32,16,3,3]", "bf16[2,32,4,4]",
            "window={size=3x3 stride=2x2}, dim_labels=bf01_oi01->bf01, "
            "batch_group_count=4"),
       5e-2},
      // f32 at HIGH and HIGHEST: 3 and 6 bf16 passes.
      {"F32High",
       conv("f32[2,9,11,40]", "f32[3,3,40,136]", "f32[2,9,11,136]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, operand_precision={high,high}"),
       2e-3},
      {"F32HighestStride2",
       conv("f32[2,13,12,24]", "f32[3,3,24,48]", "f32[2,6,5,48]",
            "window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f, "
            "operand_precision={highest,highest}"),
       1e-4},
      // f16 and byte floats: the widening load converts the box's elements.
      {"F16",
       conv("f16[2,10,10,40]", "f16[3,3,40,64]", "f16[2,10,10,64]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
       0.15},  // one bf16 pass over 360 products: tpu-run --check's f16 bound
      {"F8E4m3", conv("f8e4m3fn[2,9,9,32]", "f8e4m3fn[3,3,32,48]", "f32[2,7,7,48]",
                      "window={size=3x3}, dim_labels=b01f_01io->b01f")},
      // 3-D windows: planes stacked in the box.
      {"ThreeD", conv("bf16[2,5,6,7,16]", "bf16[3,3,3,16,32]", "f32[2,5,6,7,32]",
                      "window={size=3x3x3 pad=1_1x1_1x1_1}, dim_labels=b012f_012io->b012f")},
      {"ThreeDStrideDilatedCropped",
       conv("bf16[1,9,8,10,24]", "bf16[2,3,3,24,40]", "f32[1,3,6,8,40]",
            "window={size=2x3x3 stride=2x1x1 pad=-1_0x0_0x0_0 rhs_dilate=2x1x1}, "
            "dim_labels=b012f_012io->b012f")},
  };
}

class ImplicitConv : public ::testing::TestWithParam<size_t> {};

TEST_P(ImplicitConv, MatchesTheInterpreterAndIm2col) {
  const Case c = cases()[GetParam()];
  // f32 operands take one bf16 pass at DEFAULT precision: rounding error.
  const double tol = c.text.find("f32[2,12,12,32]") != std::string::npos ||
                             c.text.find("bf16[3,64") != std::string::npos ||
                             c.text.find("bf16[2,48") != std::string::npos
                         ? 5e-2
                     : c.tol > 0 ? c.tol
                                 : 1e-4;
  E2eRun implicit = compileAndCompare(c.text);
  ASSERT_EQ(implicit.error, "");
  EXPECT_NE(implicit.llo.find("icfill"), std::string::npos) << "not the implicit-GEMM kernel";
  EXPECT_LE(implicit.maxErr, tol) << implicit.where;
  CodegenOptions im2col;
  im2col.implicitConv = false;
  E2eRun old = compileAndCompare(c.text, "v5e", im2col);
  ASSERT_EQ(old.error, "");
  EXPECT_EQ(old.llo.find("icfill"), std::string::npos);
  EXPECT_LE(old.maxErr, tol) << old.where;
}

INSTANTIATE_TEST_SUITE_P(Sweep, ImplicitConv, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return cases()[info.param].name;
                         });

// Lanes of a window run's last K slice past the run read the next input
// elements: an infinity there must not reach windows that do not hold it
// (inf * 0 is NaN), so those lanes are zeroed. (With P > 1 positions per
// GEMM row a non-finite input also reaches the other positions of its row:
// DESIGN.md; 128 outputs keep P = 1 here.)
TEST(ImplicitConv, InfinityOutsideAWindowStaysOut) {
  std::string text = conv("bf16[1,6,6,3]", "bf16[3,3,3,128]", "f32[1,4,4,128]",
                          "window={size=3x3}, dim_labels=b01f_01io->b01f");
  std::mt19937 rng(7);
  std::vector<hlo::Literal> args;
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("t.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  ASSERT_TRUE(loaded.module);
  for (int64_t p = 0; p < 2; ++p)
    args.push_back(randomLiteral(loaded.module->entry()->parameter(p)->shape(), rng));
  // x[0, 2, 5, 1] = inf: only windows whose columns reach 5 hold it.
  args[0].setDouble((2 * 6 + 5) * 3 + 1, std::numeric_limits<double>::infinity());
  E2eRun r = compileAndCompare(text, "v5e", {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.llo.find("icfill"), std::string::npos);
  EXPECT_LE(r.maxErr, 1e-4) << r.where;
}

}  // namespace
}  // namespace tpu::codegen
