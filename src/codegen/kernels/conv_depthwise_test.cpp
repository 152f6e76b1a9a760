// End-to-end tests of the streamed depthwise convolution
// (kernels/conv_depthwise.cpp): images DMAed into padded VMEM copies, channels
// on the lanes (several positions per lane row below 128 channels), the
// windows multiply-added on the vector unit. Compared with the interpreter
// on seeded inputs in [-1, 1]: f32 products are exact and summed in f32
// (1e-5); bf16 results add one rounding (2e-2).
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

constexpr double kBf16 = 2e-2;
constexpr double kF32 = 1e-5;

std::string module(const std::string& body) { return "HloModule m\nENTRY main {\n" + body + "}\n"; }

// Compiles, runs and compares; `streamed` says whether the kernel must be
// the streamed one (its image loop label) or the row-box fallback.
void expectDepthwise(const std::string& body, double tol, bool streamed = true) {
  E2eRun r = compileAndCompare(module(body));
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, tol) << r.where;
  EXPECT_EQ(r.llo.find("_dwimage") != std::string::npos, streamed);
}

TEST(DepthwiseStream, F32PackedChannelsBatchTwo) {
  // 32 channels: four positions per lane row; a row of 13 positions is not
  // a whole register (the rest spills into the next row, rewritten later).
  expectDepthwise(R"(  x = f32[2,11,13,32] parameter(0)
  k = f32[3,3,1,32] parameter(1)
  ROOT c = f32[2,11,13,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32
)",
                  kF32);
}

TEST(DepthwiseStream, Bf16Stride2PackedTwoPhases) {
  // MobileNet's second depthwise layer in small: 64 channels (two
  // positions per lane row), stride 2 with padding only at the end.
  expectDepthwise(R"(  x = bf16[1,16,16,64] parameter(0)
  k = bf16[3,3,1,64] parameter(1)
  ROOT c = bf16[1,8,8,64] convolution(x, k), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f, feature_group_count=64
)",
                  kBf16);
}

TEST(DepthwiseStream, DilatedStrideThreeWideChannels) {
  // 160 channels: two 128-lane blocks, the second partly padding; rhs
  // dilation 2 with stride 3 puts the taps in different phases.
  expectDepthwise(R"(  x = f32[1,12,17,160] parameter(0)
  k = f32[3,3,1,160] parameter(1)
  ROOT c = f32[1,5,5,160] convolution(x, k), window={size=3x3 stride=2x3 pad=1_0x2_0 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=160
)",
                  kF32);
}

TEST(DepthwiseStream, ChannelsFirstLargeWindow) {
  // NCHW operands and OIHW-like kernel (strided channel DMAs), 8 channels
  // (16 positions per lane row), a 5x5 window: weights loaded per tap.
  expectDepthwise(R"(  x = f32[2,8,14,11] parameter(0)
  k = f32[8,1,5,5] parameter(1)
  ROOT c = f32[2,8,7,4] convolution(x, k), window={size=5x5 stride=2x3 pad=2_1x2_1}, dim_labels=bf01_oi01->bf01, feature_group_count=8
)",
                  kF32);
}

TEST(DepthwiseStream, ChannelsNotDividingTheLanes) {
  // 48 channels: one position per lane row, 80 lanes unused.
  expectDepthwise(R"(  x = bf16[1,9,10,48] parameter(0)
  k = bf16[3,3,1,48] parameter(1)
  ROOT c = f32[1,9,10,48] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=48
)",
                  kF32);
}

TEST(DepthwiseStream, ShortLastBandAndLongRows) {
  // 20 output rows in bands of 3 (the last one 2); 70 positions of 128
  // channels are 9 register blocks, two loops of 5.
  expectDepthwise(R"(  x = f32[1,20,70,128] parameter(0)
  k = f32[3,3,1,128] parameter(1)
  ROOT c = f32[1,20,70,128] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=128
)",
                  kF32);
}

TEST(DepthwiseStream, NarrowRowsSpillOverSeveralRows) {
  // 16 channels: 64 positions per register, rows of 3: a register's store
  // runs over the next rows, which are computed (and rewritten) after.
  expectDepthwise(R"(  x = f32[1,6,3,16] parameter(0)
  k = f32[2,2,1,16] parameter(1)
  ROOT c = f32[1,5,3,16] convolution(x, k), window={size=2x2 pad=0_0x0_1}, dim_labels=b01f_01io->b01f, feature_group_count=16
)",
                  kF32);
}

TEST(DepthwiseStream, UnpaddedNeedsNoZeroing) {
  expectDepthwise(R"(  x = bf16[1,10,10,256] parameter(0)
  k = bf16[3,3,1,256] parameter(1)
  ROOT c = bf16[1,8,8,256] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=256
)",
                  kBf16);
}

TEST(DepthwiseStream, ChannelMultiplierTakesTheRowKernel) {
  // Two outputs per group: the row-box kernel, same results.
  expectDepthwise(R"(  x = f32[1,7,7,16] parameter(0)
  k = f32[3,3,1,32] parameter(1)
  ROOT c = f32[1,7,7,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16
)",
                  kF32, false);
}

TEST(DepthwiseStream, FusedBiasRelu6Packed) {
  // MobileNet's depthwise block: bf16 convolution, bias per channel (a
  // column repeated across the packed positions), clamp to [0, 6].
  std::string text = R"(HloModule m
fused {
  x = bf16[1,9,9,32] parameter(0)
  k = bf16[3,3,1,32] parameter(1)
  b = bf16[32] parameter(2)
  c = bf16[1,9,9,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32
  bb = bf16[1,9,9,32] broadcast(b), dimensions={3}
  a = bf16[1,9,9,32] add(c, bb)
  lo = bf16[] constant(0)
  hi = bf16[] constant(0.5)
  lob = bf16[1,9,9,32] broadcast(lo), dimensions={}
  hib = bf16[1,9,9,32] broadcast(hi), dimensions={}
  ROOT r = bf16[1,9,9,32] clamp(lob, a, hib)
}
ENTRY main {
  x = bf16[1,9,9,32] parameter(0)
  k = bf16[3,3,1,32] parameter(1)
  b = bf16[32] parameter(2)
  ROOT f = bf16[1,9,9,32] fusion(x, k, b), kind=kOutput, calls=fused
}
)";
  E2eRun r = compileAndCompare(text);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, kBf16) << r.where;
  EXPECT_NE(r.llo.find("_dwimage"), std::string::npos);
  EXPECT_EQ(r.kernels, 1u);
}

}  // namespace
}  // namespace tpu::codegen

namespace tpu::codegen {
namespace {

TEST(DepthwiseStream, PaddingZeroedOverAnEarlierKernelsData) {
  // Only the padding is zeroed (before the image's DMAs): the first
  // convolution leaves its (unpadded) image where the second one's
  // padding lies, in rows and in columns of both stride phases.
  expectDepthwise(R"(  x = f32[1,14,14,64] parameter(0)
  k1 = f32[3,3,1,64] parameter(1)
  k2 = f32[3,3,1,64] parameter(2)
  a = f32[1,12,12,64] convolution(x, k1), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=64
  ROOT b = f32[1,6,7,64] convolution(a, k2), window={size=3x3 stride=2x2 pad=1_1x2_1}, dim_labels=b01f_01io->b01f, feature_group_count=64
)",
                  kF32);
}

}  // namespace
}  // namespace tpu::codegen
