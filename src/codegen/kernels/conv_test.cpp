// End-to-end tests of convolution lowering: HLO text -> llo-gen ->
// assembler -> simulator, compared with the interpreter on seeded inputs
// in [-1, 1]. Error is |got - want| / (1 + |want|). Tolerances: one bf16
// pass (bf16 operands, or f32 at DEFAULT precision) 2e-2 for windows of up
// to ~150 products (0.1 for 360); f32 at HIGHEST (six passes) and f32 on
// the vector-unit depthwise path (exact f32 products) 1e-5; bf16 results
// add one bf16 rounding (2^-8 relative), within 2e-2.
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

constexpr double kOnePass = 2e-2;
constexpr double kF32 = 1e-5;

std::string module(const std::string& body) { return "HloModule m\nENTRY main {\n" + body + "}\n"; }

#define EXPECT_CONV(text, tol)             \
  do {                                     \
    E2eRun r_ = compileAndCompare(text);   \
    ASSERT_EQ(r_.error, "");               \
    EXPECT_LE(r_.maxErr, tol) << r_.where; \
  } while (0)

TEST(Conv, NhwcStride2SamePadding) {
  EXPECT_CONV(module(R"(  x = f32[2,9,9,5] parameter(0)
  k = f32[3,3,5,7] parameter(1)
  ROOT c = f32[2,5,5,7] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, NchwOihw) {
  EXPECT_CONV(module(R"(  x = f32[2,4,8,7] parameter(0)
  k = f32[6,4,3,2] parameter(1)
  ROOT c = f32[2,6,8,7] convolution(x, k), window={size=3x2 pad=1_1x0_1}, dim_labels=bf01_oi01->bf01
)"),
              kOnePass);
}

TEST(Conv, OneDimensional) {
  EXPECT_CONV(module(R"(  x = f32[2,20,3] parameter(0)
  k = f32[5,3,4] parameter(1)
  ROOT c = f32[2,20,4] convolution(x, k), window={size=5 pad=2_2}, dim_labels=b0f_0io->b0f
)"),
              kOnePass);
}

TEST(Conv, ThreeDimensionalWithOddLabels) {
  EXPECT_CONV(module(R"(  x = f32[3,2,5,4,6] parameter(0)
  k = f32[2,4,2,3,3] parameter(1)
  ROOT c = f32[2,6,5,4,2] convolution(x, k), window={size=2x2x3 stride=1x2x1 pad=0_1x1_0x1_1}, dim_labels=f0b12_0o12i->12bf0
)"),
              kOnePass);
}

TEST(Conv, LhsAndRhsDilation) {
  EXPECT_CONV(module(R"(  x = f32[1,6,5,3] parameter(0)
  k = f32[3,2,3,4] parameter(1)
  ROOT c = f32[1,11,2,4] convolution(x, k), window={size=3x2 pad=1_1x0_0 lhs_dilate=2x1 rhs_dilate=1x3}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, NegativePadding) {
  EXPECT_CONV(module(R"(  x = f32[2,8,9,3] parameter(0)
  k = f32[3,3,3,5] parameter(1)
  ROOT c = f32[2,5,4,5] convolution(x, k), window={size=3x3 pad=-1_0x1_-4}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, WindowReversal) {
  EXPECT_CONV(module(R"(  x = f32[1,6,6,2] parameter(0)
  k = f32[3,2,2,3] parameter(1)
  ROOT c = f32[1,4,5,3] convolution(x, k), window={size=3x2 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, FeatureGroups) {
  EXPECT_CONV(module(R"(  x = f32[2,6,6,8] parameter(0)
  k = f32[3,3,4,6] parameter(1)
  ROOT c = f32[2,6,6,6] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2
)"),
              kOnePass);
}

TEST(Conv, DepthwiseF32OnVectorUnit) {
  // Exact f32 products on the vector unit: tighter than one MXU pass.
  EXPECT_CONV(module(R"(  x = f32[2,7,9,32] parameter(0)
  k = f32[3,3,1,32] parameter(1)
  ROOT c = f32[2,7,9,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32
)"),
              kF32);
}

TEST(Conv, DepthwiseBf16Stride2ManyChannelBlocks) {
  // 160 channels = two lane blocks; 19 positions = a partial 8-block.
  EXPECT_CONV(module(R"(  x = bf16[1,19,19,160] parameter(0)
  k = bf16[3,3,1,160] parameter(1)
  ROOT c = bf16[1,10,10,160] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=160
)"),
              kOnePass);
}

TEST(Conv, DepthwiseMultiplierNchwDilated) {
  // Two outputs per group, channels-first output, rhs dilation.
  EXPECT_CONV(module(R"(  x = f32[2,6,10,11] parameter(0)
  k = f32[12,1,2,3] parameter(1)
  ROOT c = f32[2,12,9,7] convolution(x, k), window={size=2x3 pad=0_0x0_0 rhs_dilate=1x2}, dim_labels=bf01_oi01->bf01, feature_group_count=6
)"),
              kF32);
}

TEST(Conv, Depthwise1D) {
  EXPECT_CONV(module(R"(  x = f32[3,30,5] parameter(0)
  k = f32[4,1,5] parameter(1)
  ROOT c = f32[3,15,5] convolution(x, k), window={size=4 stride=2 pad=1_1}, dim_labels=b0f_0io->b0f, feature_group_count=5
)"),
              kF32);
}

TEST(Conv, DepthwiseBf16InputsF32Output) {
  EXPECT_CONV(module(R"(  x = bf16[2,5,6,24] parameter(0)
  k = bf16[3,3,1,24] parameter(1)
  ROOT c = f32[2,2,2,24] convolution(x, k), window={size=3x3 stride=2x2 pad=0_1x0_0}, dim_labels=b01f_01io->b01f, feature_group_count=24
)"),
              kF32);
}

TEST(Conv, MobileNetFirstLayersFullSize) {
  // SSD-MobileNet's first three convolutions at full size: a 3x3 stride-2
  // conv on 3 channels (22500 output rows: tall MXU tiles), a depthwise
  // 3x3 and a pointwise 1x1.
  EXPECT_CONV(module(R"(  x = bf16[1,300,300,3] parameter(0)
  k0 = bf16[3,3,3,32] parameter(1)
  k1 = bf16[3,3,1,32] parameter(2)
  k2 = bf16[1,1,32,64] parameter(3)
  c0 = bf16[1,150,150,32] convolution(x, k0), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  c1 = bf16[1,150,150,32] convolution(c0, k1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32
  ROOT c2 = bf16[1,150,150,64] convolution(c1, k2), window={size=1x1}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, DepthwiseOneRow) {
  // A single work item: the double-buffered row loop runs once.
  EXPECT_CONV(module(R"(  x = f32[1,40,7] parameter(0)
  k = f32[3,1,7] parameter(1)
  ROOT c = f32[1,38,7] convolution(x, k), window={size=3}, dim_labels=b0f_0io->b0f, feature_group_count=7
)"),
              kF32);
}

TEST(Conv, Depthwise3DReversedChannelsFirst) {
  EXPECT_CONV(module(R"(  x = f32[2,3,4,5,6] parameter(0)
  k = f32[2,2,3,1,6] parameter(1)
  ROOT c = f32[2,6,3,3,3] convolution(x, k), window={size=2x2x3 stride=1x1x1 pad=1_0x0_0x0_0 rhs_reversal=1x0x1}, dim_labels=b012f_012io->bf012, feature_group_count=6
)"),
              kF32);
}

TEST(Conv, UnpaddedInputIsAReshapedBuffer) {
  // No padding and channels-last: X is the operand's own buffer, which
  // holds the reshape's operand (other dims, same bytes).
  EXPECT_CONV(module(R"(  p = f32[2,81,16] parameter(0)
  x = f32[2,9,9,16] reshape(p)
  k = f32[3,3,16,8] parameter(1)
  kd = f32[3,3,1,16] parameter(2)
  a = f32[2,7,7,8] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f
  b = f32[2,7,7,16] convolution(x, kd), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=16
  ROOT t = (f32[2,7,7,8], f32[2,7,7,16]) tuple(a, b)
)"),
              kOnePass);
}

TEST(Conv, BatchGroups) {
  EXPECT_CONV(module(R"(  x = f32[4,5,5,3] parameter(0)
  k = f32[3,3,3,6] parameter(1)
  ROOT c = f32[2,3,3,6] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=2
)"),
              kOnePass);
}

TEST(Conv, Bf16InputsF32Output) {
  EXPECT_CONV(module(R"(  x = bf16[1,10,10,16] parameter(0)
  k = bf16[3,3,16,24] parameter(1)
  ROOT c = f32[1,10,10,24] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, Bf16Pointwise) {
  // 1x1, 128 input features: the input is the im2col matrix as it is.
  EXPECT_CONV(module(R"(  x = bf16[1,12,12,128] parameter(0)
  k = bf16[1,1,128,40] parameter(1)
  ROOT c = bf16[1,12,12,40] convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f
)"),
              kOnePass);
}

TEST(Conv, F32PrecisionHighestVsDefault) {
  std::string body = R"(  x = f32[2,8,8,40] parameter(0)
  k = f32[3,3,40,20] parameter(1)
  ROOT c = f32[2,8,8,20] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f)";
  E2eRun highest = compileAndCompare(module(body + ", operand_precision={highest,highest}\n"));
  ASSERT_EQ(highest.error, "");
  EXPECT_LE(highest.maxErr, kF32) << highest.where;
  // One bf16 pass: the rounding errors of 360 products add up (about
  // 2^-8 x sqrt(360) x |x||k|, several sigma at the worst of 2560 outputs).
  E2eRun def = compileAndCompare(module(body + "\n"));
  ASSERT_EQ(def.error, "");
  EXPECT_LE(def.maxErr, 0.1) << def.where;
  // One bf16 pass over 360 products is visibly less accurate.
  EXPECT_GT(def.maxErr, 100 * highest.maxErr);
  // The command-line override wins over the instruction's config.
  CodegenOptions o;
  o.f32DotPrecision = F32DotPrecision::Highest;
  E2eRun forced = compileAndCompare(module(body + "\n"), "v5e", o);
  ASSERT_EQ(forced.error, "");
  EXPECT_LE(forced.maxErr, kF32) << forced.where;
}

// The kernel kinds llo-gen picks for a module's instructions.
std::vector<std::string> kernelKinds(const std::string& text, const CodegenOptions& options) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("test.hlo", text), diags);
  auto target = target::loadTarget("v5e", diags);
  std::vector<std::string> kinds;
  if (!loaded.module || !target) return kinds;
  auto gen = generateLlo(*loaded.module, *target, options, diags);
  if (gen)
    for (const KernelStats& k : gen->stats.kernels) kinds.push_back(k.kind);
  return kinds;
}

TEST(Conv, DepthwiseRowsTooLargeForVmemUseTheMxu) {
  std::string text = module(R"(  x = bf16[1,9,200,48] parameter(0)
  k = bf16[3,3,1,48] parameter(1)
  ROOT c = bf16[1,9,200,48] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=48
)");
  EXPECT_EQ(kernelKinds(text, {}), std::vector<std::string>{"conv-depthwise"});
  // A row box of 3 x 202 x 48 bf16 is about 58 KB: a 32 KB budget forces
  // the MXU path, which must give the same result.
  CodegenOptions small;
  small.vmemFraction = 32768.0 / (128.0 * 1024 * 1024);
  EXPECT_EQ(kernelKinds(text, small), std::vector<std::string>{"conv-matmul"});
  E2eRun r = compileAndCompare(text, "v5e", small);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, kOnePass) << r.where;
}

// Integer convolutions sum in s32 on the vector unit; narrower results wrap
// to the same bits as the interpreter's (3x3 taps x 8 channels of values up
// to 4 overflow s8 and u8).
TEST(Conv, IntegerTypesBitExact) {
  struct Case {
    const char* in;
    const char* kernel;
    const char* out;
  };
  for (Case c : {Case{"s32", "s32", "s32"}, Case{"s8", "s8", "s32"}, Case{"s8", "s8", "s8"},
                 Case{"u8", "u8", "u8"}, Case{"s16", "s8", "s16"}, Case{"u32", "u32", "u32"}}) {
    E2eRun r = compileAndCompare(module(fmt::format(R"(  x = {0}[2,9,7,8] parameter(0)
  k = {1}[3,3,8,5] parameter(1)
  ROOT c = {2}[2,5,4,5] convolution(x, k), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
)",
                                                    c.in, c.kernel, c.out)));
    ASSERT_EQ(r.error, "") << c.in << " " << c.out;
    EXPECT_EQ(r.bitMismatches, 0) << c.in << " x " << c.kernel << " -> " << c.out << ": " << r.bitWhere;
  }
  // Feature groups (depthwise-like) also take the vector unit for integers.
  E2eRun g = compileAndCompare(module(R"(  x = s8[1,6,6,4] parameter(0)
  k = s8[3,3,1,8] parameter(1)
  ROOT c = s32[1,4,4,8] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=4
)"));
  ASSERT_EQ(g.error, "");
  EXPECT_EQ(g.bitMismatches, 0) << g.bitWhere;
}

}  // namespace
}  // namespace tpu::codegen
