// Depthwise filter gradients on the vector unit (kernels/conv_filter_grad.cpp):
// shapes, strides, dilations, channel counts and types, compared with the
// interpreter. Products are exact in f32 (bf16 operands, and f32 ones on
// the vector unit), so only the order of the f32 sums differs: 1e-4
// relative (|got - want| / (1 + |want|)); a bf16 result: one rounding.
// Each case also checks that the kernel ran and that the im2col path
// (CodegenOptions::implicitConv = false) agrees.
#include <gtest/gtest.h>

#include "codegen/kernels/conv_test_util.h"

namespace tpu::codegen {
namespace {

struct Case {
  const char* name;
  std::string text;
  double tol = 1e-4;
};

std::string grad(const std::string& x, const std::string& dy, const std::string& out,
                 const std::string& attrs) {
  return "HloModule m\nENTRY main {\n  x = " + x + " parameter(0)\n  dy = " + dy +
         " parameter(1)\n  ROOT w = " + out + " convolution(x, dy), " + attrs + "\n}\n";
}

std::vector<Case> cases() {
  return {
      {"SamePadded3x3", grad("bf16[3,12,14,128]", "bf16[3,12,14,128]", "f32[3,3,1,128]",
                             "window={size=12x14 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, "
                             "batch_group_count=128")},
      // Fewer channels than lanes; a row of 13 positions (a tail block).
      {"FewChannelsTail", grad("bf16[2,9,13,40]", "bf16[2,7,11,40]", "f32[3,3,1,40]",
                               "window={size=7x11}, dim_labels=f01b_i01o->01bf, batch_group_count=40")},
      // A stride-2 forward convolution: the gradient's positions 2 apart.
      {"ForwardStride2", grad("bf16[2,15,16,256]", "bf16[2,7,7,256]", "f32[3,5,1,256]",
                              "window={size=7x7 pad=0_0x0_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf, "
                              "batch_group_count=256")},
      // A dilated forward convolution: the taps 2 apart.
      {"ForwardDilated", grad("bf16[1,12,12,128]", "bf16[1,8,8,128]", "f32[3,3,1,128]",
                              "window={size=8x8 stride=2x2}, dim_labels=f01b_i01o->01bf, "
                              "batch_group_count=128")},
      // Channels over several blocks, the last partial; a bf16 result.
      {"PartialLastBlockBf16",
       grad("bf16[2,10,10,320]", "bf16[2,10,10,320]", "bf16[3,3,1,320]",
            "window={size=10x10 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, "
            "batch_group_count=320"),
       1e-2},
      // 7x7 taps: 49 accumulators, two tap groups.
      {"SevenBySevenTapGroups", grad("bf16[2,14,14,128]", "bf16[2,14,14,128]", "f32[7,7,1,128]",
                                     "window={size=14x14 pad=3_3x3_3}, dim_labels=f01b_i01o->01bf, "
                                     "batch_group_count=128")},
      {"OneDimensionalF32", grad("f32[3,40,256]", "f32[3,36,256]", "f32[5,1,256]",
                                 "window={size=36}, dim_labels=f0b_i0o->0bf, batch_group_count=256")},
  };
}

class FilterGrad : public ::testing::TestWithParam<size_t> {};

TEST_P(FilterGrad, MatchesTheInterpreterAndIm2col) {
  const Case c = cases()[GetParam()];
  E2eRun streamed = compileAndCompare(c.text);
  ASSERT_EQ(streamed.error, "");
  EXPECT_NE(streamed.llo.find("conv-filter-grad"), std::string::npos) << "not the filter-gradient kernel";
  EXPECT_EQ(streamed.llo.find("dma.h2h"), std::string::npos) << "a temporary in HBM";
  EXPECT_LE(streamed.maxErr, c.tol) << streamed.where;
  CodegenOptions im2col;
  im2col.implicitConv = false;
  E2eRun old = compileAndCompare(c.text, "v5e", im2col);
  ASSERT_EQ(old.error, "");
  EXPECT_EQ(old.llo.find("conv-filter-grad"), std::string::npos);
  // im2col rounds f32 operands to bf16 (one MXU pass).
  EXPECT_LE(old.maxErr, c.text.find("f32[3,40") != std::string::npos ? 5e-2 : c.tol) << old.where;
}

INSTANTIATE_TEST_SUITE_P(Sweep, FilterGrad, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return cases()[info.param].name;
                         });

// v4 has 32 vector registers: smaller tap groups, the same sums.
TEST(FilterGrad, V4TapGroups) {
  const Case c = cases()[5];
  E2eRun r = compileAndCompare(c.text, "v4");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.llo.find("conv-filter-grad"), std::string::npos);
  EXPECT_LE(r.maxErr, c.tol) << r.where;
}

// An infinity in the input past a gradient row's last position (read by
// the last block's dropped sublanes) must not turn other sums into NaN.
TEST(FilterGrad, InfinityPastTheRowStaysOut) {
  const std::string text = grad("bf16[1,6,13,128]", "bf16[1,4,11,128]", "f32[3,3,1,128]",
                                "window={size=4x11}, dim_labels=f01b_i01o->01bf, batch_group_count=128");
  // x[0, 5, 0, 7] = inf: in the sums of tap (2, 0) only (gradient row 3,
  // column 0), but the last block of input row 4 (taps of rows 1 and 2)
  // reads it in its dropped sublanes, past the row's end.
  std::vector<hlo::Literal> args = operandsWithInfinity(text, 5, (5 * 13 + 0) * 128 + 7);
  ASSERT_EQ(args.size(), 2u);
  E2eRun r = compileAndCompare(text, "v5e", {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.llo.find("conv-filter-grad"), std::string::npos);
  EXPECT_LE(r.maxErr, 1e-4) << r.where;
}

}  // namespace
}  // namespace tpu::codegen
