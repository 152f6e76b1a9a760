// Output fusions (kernels/matmul_epilogue.cpp): a dot with an elementwise epilogue in a
// fusion lowers as one matmul kernel whose result tiles are finished in
// VMEM. The fused program must compute exactly what the same instructions
// compute unfused (one kernel each), and match the interpreter.
#include <algorithm>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

// `body` (instructions over parameters p0..pN and ending in ROOT) as a
// fusion called from the entry, and inlined into the entry.
struct FusedAndInlined {
  std::string fused, inlined;
};

FusedAndInlined makePrograms(const std::string& params, const std::string& body, const std::string& resultShape,
                             const std::string& args) {
  FusedAndInlined p;
  p.fused = fmt::format("HloModule m\nfused {{\n{}{}}}\nENTRY main {{\n{}  ROOT f = {} fusion({}), kind=kLoop, "
                        "calls=fused\n}}\n",
                        params, body, params, resultShape, args);
  p.inlined = fmt::format("HloModule m\nENTRY main {{\n{}{}}}\n", params, body);
  return p;
}

std::string llo(const std::string& text, const std::string& target = "v5e", CodegenStats* stats = nullptr) {
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  if (!loaded.module) return "parse: " + messages;
  auto t = target::loadTarget(target, diags);
  CodegenOptions options;
  options.schedule = llo::ScheduleMode::None;
  auto gen = generateLlo(*loaded.module, *t, options, diags);
  if (gen && stats) *stats = gen->stats;
  return gen ? gen->llo : "llo-gen: " + messages;
}

// Both programs on the same arguments, seeded by `seed`, on `target`.
struct FusedAndInlinedRuns {
  PipelineRun fused, inlined;
};

FusedAndInlinedRuns runBoth(const FusedAndInlined& p, const std::string& target, uint32_t seed,
                            std::vector<hlo::Literal>* argsOut = nullptr) {
  std::mt19937 rng(seed);
  std::vector<hlo::Literal> args;
  auto make = [&](size_t i, const hlo::Shape& s) {
    if (i >= args.size()) args.push_back(randomLiteral(s, rng));
    return args[i];
  };
  FusedAndInlinedRuns runs{runPipeline(p.fused, make, target), runPipeline(p.inlined, make, target)};
  if (argsOut) *argsOut = args;
  return runs;
}

// Runs both programs on the same seeded arguments: the results must be
// bitwise equal, and close to the interpreter's.
void expectFusedMatchesInlined(const FusedAndInlined& p, double tol, const std::string& target = "v5e") {
  std::vector<hlo::Literal> args;
  auto [fused, inlined] = runBoth(p, target, 99, &args);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  ASSERT_EQ(fused.got.size(), 1u);
  EXPECT_TRUE(fused.got[0] == inlined.got[0]) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, target, {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, tol) << r.where;
  // And it really is one kernel.
  CodegenStats stats;
  std::string text = llo(p.fused, target, &stats);
  ASSERT_EQ(stats.kernels.size(), 1u) << text.substr(0, 2000);
  EXPECT_TRUE(stats.kernels[0].kind == "fusion-matmul" || stats.kernels[0].kind == "fusion-conv")
      << stats.kernels[0].kind;
  EXPECT_NE(text.find(": fusion %f"), std::string::npos) << text.substr(0, 2000);
}

TEST(OutputFusion, BiasReluOnF32) {
  expectFusedMatchesInlined(makePrograms("  a = f32[64,300] parameter(0)\n  b = f32[300,256] parameter(1)\n"
                                         "  c = f32[256] parameter(2)\n",
                                         "  d = f32[64,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                         "  bc = f32[64,256] broadcast(c), dimensions={1}\n"
                                         "  s = f32[64,256] add(d, bc)\n  z = f32[] constant(0)\n"
                                         "  zb = f32[64,256] broadcast(z), dimensions={}\n"
                                         "  ROOT r = f32[64,256] maximum(s, zb)\n",
                                         "f32[64,256]", "a, b, c"),
                            0.05);
}

TEST(OutputFusion, ResidualScaleAndConvertToBf16) {
  expectFusedMatchesInlined(
      makePrograms("  a = bf16[2,48,128] parameter(0)\n  b = bf16[2,128,512] parameter(1)\n"
                   "  res = bf16[2,48,512] parameter(2)\n  k = f32[] parameter(3)\n",
                   "  d = f32[2,48,512] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                   "rhs_contracting_dims={1}\n"
                   "  kb = f32[2,48,512] broadcast(k), dimensions={}\n  sc = f32[2,48,512] multiply(d, kb)\n"
                   "  rf = f32[2,48,512] convert(res)\n  s = f32[2,48,512] add(sc, rf)\n"
                   "  t = f32[2,48,512] tanh(s)\n  ROOT r = bf16[2,48,512] convert(t)\n",
                   "bf16[2,48,512]", "a, b, res, k"),
      0.02);
}

TEST(OutputFusion, Bf16DotResultAndTwoColumnDims) {
  // The dot rounds to bf16 before the epilogue; the bias spans two result
  // dimensions (the rhs free ones).
  expectFusedMatchesInlined(makePrograms("  a = bf16[40,256] parameter(0)\n  b = bf16[256,2,128] parameter(1)\n"
                                         "  c = bf16[2,128] parameter(2)\n",
                                         "  d = bf16[40,2,128] dot(a, b), lhs_contracting_dims={1}, "
                                         "rhs_contracting_dims={0}\n"
                                         "  bc = bf16[40,2,128] broadcast(c), dimensions={1,2}\n"
                                         "  ROOT r = bf16[40,2,128] subtract(d, bc)\n",
                                         "bf16[40,2,128]", "a, b, c"),
                            0.05);
}

TEST(OutputFusion, QuantizedInt8Matmul) {
  // s8 x s8 -> s32 on the int8 MXU, dequantized by a per-column scale.
  expectFusedMatchesInlined(makePrograms("  a = s8[32,256] parameter(0)\n  b = s8[256,128] parameter(1)\n"
                                         "  sc = f32[128] parameter(2)\n",
                                         "  d = s32[32,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                         "  f = f32[32,128] convert(d)\n  sb = f32[32,128] broadcast(sc), dimensions={1}\n"
                                         "  ROOT r = f32[32,128] multiply(f, sb)\n",
                                         "f32[32,128]", "a, b, sc"),
                            1e-6);
}

TEST(OutputFusion, TilesOnASmallVmemAndOnV4) {
  FusedAndInlined p = makePrograms("  a = f32[264,700] parameter(0)\n  b = f32[700,640] parameter(1)\n"
                                   "  c = f32[640] parameter(2)\n  res = f32[264,640] parameter(3)\n",
                                   "  d = f32[264,640] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                   "  bc = f32[264,640] broadcast(c), dimensions={1}\n"
                                   "  s = f32[264,640] add(d, bc)\n  ROOT r = f32[264,640] add(s, res)\n",
                                   "f32[264,640]", "a, b, c, res");
  expectFusedMatchesInlined(p, 0.1, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
  expectFusedMatchesInlined(p, 0.1, "v4");
}

TEST(OutputFusion, OddShapesWriteTheValidPartOfEdgeTiles) {
  // M = 5, N = 100, K = 37: one tile, padded in every direction.
  expectFusedMatchesInlined(makePrograms("  a = f32[5,37] parameter(0)\n  b = f32[37,100] parameter(1)\n"
                                         "  c = f32[100] parameter(2)\n  res = f32[5,100] parameter(3)\n",
                                         "  d = f32[5,100] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                         "  bc = f32[5,100] broadcast(c), dimensions={1}\n"
                                         "  s = f32[5,100] add(d, bc)\n  t = f32[5,100] multiply(s, res)\n"
                                         "  z = f32[] constant(0)\n  zb = f32[5,100] broadcast(z), dimensions={}\n"
                                         "  ROOT r = f32[5,100] maximum(t, zb)\n",
                                         "f32[5,100]", "a, b, c, res"),
                            0.05);
  // Batch dimensions (not leading in the rhs), two lhs free dimensions and
  // a bf16 result.
  expectFusedMatchesInlined(
      makePrograms("  a = bf16[3,7,3,37] parameter(0)\n  b = bf16[37,3,100] parameter(1)\n"
                   "  res = bf16[3,7,3,100] parameter(2)\n  k = bf16[] parameter(3)\n",
                   "  d = bf16[3,7,3,100] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={3}, "
                   "rhs_batch_dims={1}, rhs_contracting_dims={0}\n"
                   "  kb = bf16[3,7,3,100] broadcast(k), dimensions={}\n  sc = bf16[3,7,3,100] multiply(d, kb)\n"
                   "  ROOT r = bf16[3,7,3,100] add(sc, res)\n",
                   "bf16[3,7,3,100]", "a, b, res, k"),
      0.05);
  // int8 MXU, s32 result and s8 residual tile, exact.
  expectFusedMatchesInlined(makePrograms("  a = s8[13,37] parameter(0)\n  b = s8[37,200] parameter(1)\n"
                                         "  res = s8[13,200] parameter(2)\n  sc = s32[200] parameter(3)\n",
                                         "  d = s32[13,200] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                         "  rc = s32[13,200] convert(res)\n  s = s32[13,200] add(d, rc)\n"
                                         "  sb = s32[13,200] broadcast(sc), dimensions={1}\n"
                                         "  ROOT r = s32[13,200] multiply(s, sb)\n",
                                         "s32[13,200]", "a, b, res, sc"),
                            0);
}

TEST(OutputFusion, OddShapesOverManyTilesOnASmallVmemAndOnV4) {
  // Edge tiles in both directions, several interior ones.
  FusedAndInlined p = makePrograms("  a = f32[2,261,300] parameter(0)\n  b = f32[2,300,700] parameter(1)\n"
                                   "  c = f32[700] parameter(2)\n  res = bf16[2,261,700] parameter(3)\n",
                                   "  d = f32[2,261,700] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                                   "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
                                   "  bc = f32[2,261,700] broadcast(c), dimensions={2}\n"
                                   "  rf = f32[2,261,700] convert(res)\n  s = f32[2,261,700] add(d, bc)\n"
                                   "  t = f32[2,261,700] add(s, rf)\n  ROOT r = bf16[2,261,700] convert(t)\n",
                                   "bf16[2,261,700]", "a, b, c, res");
  expectFusedMatchesInlined(p, 0.1, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
  expectFusedMatchesInlined(p, 0.1, "v4");
}

// Convolutions followed by elementwise work: the im2col matmul's epilogue.
TEST(OutputFusion, ConvBiasRelu) {
  expectFusedMatchesInlined(
      makePrograms("  x = f32[2,9,9,16] parameter(0)\n  w = f32[3,3,16,40] parameter(1)\n"
                   "  c = f32[40] parameter(2)\n",
                   "  v = f32[2,9,9,40] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
                   "  bc = f32[2,9,9,40] broadcast(c), dimensions={3}\n  s = f32[2,9,9,40] add(v, bc)\n"
                   "  z = f32[] constant(0)\n  zb = f32[2,9,9,40] broadcast(z), dimensions={}\n"
                   "  ROOT r = f32[2,9,9,40] maximum(s, zb)\n",
                   "f32[2,9,9,40]", "x, w, c"),
      0.1);
}

TEST(OutputFusion, ConvResidualStridesLayoutsAndGroups) {
  // NCHW input, strides, a residual tile and a bf16 result.
  expectFusedMatchesInlined(
      makePrograms("  x = bf16[3,8,11,13] parameter(0)\n  w = bf16[8,3,2,130] parameter(1)\n"
                   "  res = bf16[3,5,6,130] parameter(2)\n",
                   "  v = bf16[3,5,6,130] convolution(x, w), window={size=3x2 stride=2x2 pad=0_0x0_0}, "
                   "dim_labels=bf01_i01o->b01f\n"
                   "  s = bf16[3,5,6,130] add(v, res)\n  ROOT r = bf16[3,5,6,130] tanh(s)\n",
                   "bf16[3,5,6,130]", "x, w, res"),
      0.05);
  // Two feature groups: each is a block of the result's channels, and of
  // the bias.
  expectFusedMatchesInlined(
      makePrograms("  x = f32[1,6,6,8] parameter(0)\n  w = f32[3,3,4,12] parameter(1)\n"
                   "  c = f32[12] parameter(2)\n",
                   "  v = f32[1,4,4,12] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f, "
                   "feature_group_count=2\n"
                   "  bc = f32[1,4,4,12] broadcast(c), dimensions={3}\n  ROOT r = f32[1,4,4,12] subtract(v, bc)\n",
                   "f32[1,4,4,12]", "x, w, c"),
      0.05);
}

TEST(OutputFusion, ConvWithTallTilesOnASmallVmem) {
  // M = 1600 rows pad to 1664 for tall tiles; on a small VMEM some tiles
  // are padding only.
  FusedAndInlined p = makePrograms(
      "  x = f32[4,20,20,24] parameter(0)\n  w = f32[3,3,24,200] parameter(1)\n  c = f32[200] parameter(2)\n",
      "  v = f32[4,20,20,200] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
      "  bc = f32[4,20,20,200] broadcast(c), dimensions={3}\n  s = f32[4,20,20,200] add(v, bc)\n"
      "  ROOT r = f32[4,20,20,200] exponential(s)\n",
      "f32[4,20,20,200]", "x, w, c");
  expectFusedMatchesInlined(p, 0.2, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
  expectFusedMatchesInlined(p, 0.2);
}

TEST(OutputFusion, OperandsComputedInTheFusion) {
  // corpus tiled_dot_mask: dot(p0, exp(p1)), K = 33. The chain runs on the
  // W tiles in VMEM; the K padding it would turn into exp(0) is masked.
  FusedAndInlined p = makePrograms("  p0 = f32[3,17,33] parameter(0)\n  p1 = f32[3,33,9] parameter(1)\n",
                                   "  e = f32[3,33,9] exponential(p1)\n"
                                   "  ROOT d = f32[3,17,9] dot(p0, e), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                                   "lhs_contracting_dims={2}, rhs_contracting_dims={1}\n",
                                   "f32[3,17,9]", "p0, p1");
  expectFusedMatchesInlined(p, 0.05);
  expectFusedMatchesInlined(p, 0.05, "v4");
  // Both operands computed: a dequantizing convert and scale of A, an
  // activation of W; HIGHEST precision (six passes on the components).
  FusedAndInlined q = makePrograms(
      "  a = bf16[40,300] parameter(0)\n  b = f32[300,200] parameter(1)\n  c = f32[200] parameter(2)\n",
      "  af = f32[40,300] convert(a)\n  k = f32[] constant(0.5)\n  kb = f32[40,300] broadcast(k), dimensions={}\n"
      "  as = f32[40,300] multiply(af, kb)\n  bt = f32[300,200] tanh(b)\n  one = f32[] constant(1)\n"
      "  ob = f32[300,200] broadcast(one), dimensions={}\n  bs = f32[300,200] add(bt, ob)\n"
      "  d = f32[40,200] dot(as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
      "operand_precision={highest,highest}\n"
      "  cb = f32[40,200] broadcast(c), dimensions={1}\n  ROOT r = f32[40,200] add(d, cb)\n",
      "f32[40,200]", "a, b, c");
  expectFusedMatchesInlined(q, 1e-3);
  expectFusedMatchesInlined(q, 1e-3, "v4");
  // Neither chain keeps 0 at 0, so the K padding of both operands is
  // masked: exp(a) / sign(a) is inf and tanh(b) / sign(b) NaN there, and
  // either times 0 NaN.
  expectFusedMatchesInlined(
      makePrograms("  a = f32[5,37] parameter(0)\n  b = f32[37,100] parameter(1)\n",
                   "  ea = f32[5,37] exponential(a)\n  sa = f32[5,37] sign(a)\n  qa = f32[5,37] divide(ea, sa)\n"
                   "  tb = f32[37,100] tanh(b)\n  sb = f32[37,100] sign(b)\n  qb = f32[37,100] divide(tb, sb)\n"
                   "  ROOT d = f32[5,100] dot(qa, qb), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n",
                   "f32[5,100]", "a, b"),
      0.1);
}

TEST(OutputFusion, DepthwiseConvBiasRelu6) {
  // One input channel per group: the vector-unit kernel finishes each
  // register of results before it is stored.
  expectFusedMatchesInlined(
      makePrograms("  x = f32[2,10,9,150] parameter(0)\n  w = f32[3,3,1,150] parameter(1)\n"
                   "  c = f32[150] parameter(2)\n",
                   "  v = f32[2,10,9,150] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                   "dim_labels=b01f_01io->b01f, feature_group_count=150\n"
                   "  bc = f32[2,10,9,150] broadcast(c), dimensions={3}\n  s = f32[2,10,9,150] add(v, bc)\n"
                   "  lo = f32[] constant(0)\n  hi = f32[] constant(6)\n"
                   "  ROOT r = f32[2,10,9,150] clamp(lo, s, hi)\n",
                   "f32[2,10,9,150]", "x, w, c"),
      1e-5);
  // Two outputs per group (channel c * 2 + o), a bf16 result and a scalar
  // parameter.
  expectFusedMatchesInlined(
      makePrograms("  x = bf16[1,7,12,20] parameter(0)\n  w = bf16[3,2,1,40] parameter(1)\n"
                   "  c = bf16[40] parameter(2)\n  k = bf16[] parameter(3)\n",
                   "  v = bf16[1,3,11,40] convolution(x, w), window={size=3x2 stride=2x1}, "
                   "dim_labels=b01f_01io->b01f, feature_group_count=20\n"
                   "  bc = bf16[1,3,11,40] broadcast(c), dimensions={3}\n  s = bf16[1,3,11,40] subtract(v, bc)\n"
                   "  kb = bf16[1,3,11,40] broadcast(k), dimensions={}\n"
                   "  ROOT r = bf16[1,3,11,40] multiply(s, kb)\n",
                   "bf16[1,3,11,40]", "x, w, c, k"),
      0.05);
}

TEST(OutputFusion, OtherShapesAreResidentFusions) {
  // A channels-first convolution result is not the matmul's layout: the
  // fusion's instructions are sections of one kernel, the convolution's
  // result kept in VMEM (kernels/resident.cpp), still correct.
  FusedAndInlined p = makePrograms("  x = f32[2,6,6,8] parameter(0)\n  w = f32[3,3,8,16] parameter(1)\n",
                                   "  v = f32[2,16,4,4] convolution(x, w), window={size=3x3}, "
                                   "dim_labels=b01f_01io->bf01\n"
                                   "  ROOT r = f32[2,16,4,4] exponential(v)\n",
                                   "f32[2,16,4,4]", "x, w");
  E2eRun r = compileAndCompare(p.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 0.05) << r.where;
  EXPECT_NE(llo(p.fused).find("// elementwise: exponential %r"), std::string::npos);
  EXPECT_NE(llo(p.fused).find("intermediates in VMEM"), std::string::npos);
  // A depthwise convolution with a residual tile input (its vector-unit
  // kernel takes columns and scalars only).
  FusedAndInlined q = makePrograms("  x = f32[1,6,6,8] parameter(0)\n  w = f32[3,3,1,8] parameter(1)\n"
                                   "  res = f32[1,4,4,8] parameter(2)\n",
                                   "  v = f32[1,4,4,8] convolution(x, w), window={size=3x3}, "
                                   "dim_labels=b01f_01io->b01f, feature_group_count=8\n"
                                   "  ROOT r = f32[1,4,4,8] add(v, res)\n",
                                   "f32[1,4,4,8]", "x, w, res");
  r = compileAndCompare(q.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  EXPECT_NE(llo(q.fused).find("// elementwise: add %r"), std::string::npos);
  EXPECT_NE(llo(q.fused).find("intermediates in VMEM"), std::string::npos);
}

// Loop fusions whose parameters are broadcast along the result's leading
// dimensions (a bias, a per-channel scale) stream as one kernel: the
// parameter's elements are fetched as whole repeats of the chunk.
void expectLoopFusionMatchesInlined(const FusedAndInlined& p, const std::string& target = "v5e") {
  auto [fused, inlined] = runBoth(p, target, 7);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  const std::vector<const hlo::Literal*> want = fused.want();
  for (size_t r = 0; r < want.size(); ++r)
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(want[r]->data().data()), want[r]->data().size()) ==
                fused.got[r])
        << "result " << r << " differs from the interpreter";
  std::string text = llo(p.fused, target);
  EXPECT_NE(text.find("// fusion: fusion %f"), std::string::npos) << text.substr(0, 2000);
  EXPECT_EQ(text.find("// broadcast:"), std::string::npos);
  EXPECT_EQ(text.find("// transpose:"), std::string::npos);
  EXPECT_EQ(text.find("// slice:"), std::string::npos);
  EXPECT_EQ(text.find("// reverse:"), std::string::npos);
}

TEST(LoopFusion, BiasBroadcastAlongRows) {
  for (const char* shape : {"[300,384]", "[7,100]", "[4096,1]", "[5,3,128]"}) {
    std::string t(shape);
    std::string bias = t.substr(t.find(',') + 1);
    bias = "[" + bias;
    std::string dims = std::count(t.begin(), t.end(), ',') == 2 ? "{1,2}" : "{1}";
    expectLoopFusionMatchesInlined(makePrograms(
        fmt::format("  x = f32{0} parameter(0)\n  b = f32{1} parameter(1)\n  k = s32{1} parameter(2)\n", t, bias),
        fmt::format("  bb = f32{0} broadcast(b), dimensions={1}\n  s = f32{0} add(x, bb)\n"
                    "  kb = s32{0} broadcast(k), dimensions={1}\n  kf = f32{0} convert(kb)\n"
                    "  ROOT r = f32{0} multiply(s, kf)\n",
                    t, dims),
        "f32" + t, "x, b, k"));
  }
  // Small VMEM: many chunks, each a whole number of repeats.
  expectLoopFusionMatchesInlined(
      makePrograms("  x = bf16[700,384] parameter(0)\n  b = bf16[384] parameter(1)\n",
                   "  bb = bf16[700,384] broadcast(b), dimensions={1}\n  ROOT r = bf16[700,384] maximum(x, bb)\n",
                   "bf16[700,384]", "x, b"),
      std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
}

TEST(LoopFusion, TransposesAndBroadcastsOfParametersAreGatheredByTheDma) {
  // Each transpose or broadcast of a parameter is read as a strided view of
  // it, one DMA per chunk of result rows.
  expectLoopFusionMatchesInlined(makePrograms(
      "  x = f32[300,384] parameter(0)\n  y = f32[384,300] parameter(1)\n  b = f32[300] parameter(2)\n",
      "  t = f32[300,384] transpose(y), dimensions={1,0}\n  bb = f32[300,384] broadcast(b), dimensions={0}\n"
      "  s = f32[300,384] add(x, t)\n  ROOT r = f32[300,384] multiply(s, bb)\n",
      "f32[300,384]", "x, y, b"));
  expectLoopFusionMatchesInlined(makePrograms(
      "  x = bf16[6,40,130] parameter(0)\n  m = s32[40] parameter(1)\n",
      "  t = bf16[40,130,6] transpose(x), dimensions={1,2,0}\n  c = f32[40,130,6] convert(t)\n"
      "  mb = s32[40,130,6] broadcast(m), dimensions={0}\n  mf = f32[40,130,6] convert(mb)\n"
      "  ROOT r = f32[40,130,6] add(c, mf)\n",
      "f32[40,130,6]", "x, m"));
  // Transposes of elementwise results sink to the parameters first
  // (sink-views), so they stream as views too.
  expectLoopFusionMatchesInlined(makePrograms(
      "  x = bf16[1,256,14,14] parameter(0)\n  y = f32[1,256,14,14] parameter(1)\n",
      "  c = f32[1,256,14,14] convert(x)\n  a = f32[1,256,14,14] add(c, y)\n"
      "  ROOT t = f32[1,14,14,256] transpose(a), dimensions={0,2,3,1}\n",
      "f32[1,14,14,256]", "x, y"));
  // Reverses: negative strides from the reversed dimensions' last element.
  expectLoopFusionMatchesInlined(makePrograms(
      "  x = f32[300,384] parameter(0)\n  y = s32[300,384] parameter(1)\n",
      "  v = f32[300,384] reverse(x), dimensions={0,1}\n  w = s32[300,384] reverse(y), dimensions={0}\n"
      "  c = f32[300,384] convert(w)\n  ROOT r = f32[300,384] subtract(v, c)\n",
      "f32[300,384]", "x, y"));
  // Strided slices: the view starts at the slice's first element.
  expectLoopFusionMatchesInlined(makePrograms(
      "  x = s32[9,300] parameter(0)\n  y = s32[4,97] parameter(1)\n  z = s32[8,194] parameter(2)\n",
      "  s = s32[4,97] slice(x), slice={[1:9:2], [3:294:3]}\n  a = s32[4,97] add(s, y)\n"
      "  w = s32[4,97] slice(z), slice={[4:8], [1:194:2]}\n  ROOT r = s32[4,97] multiply(a, w)\n",
      "s32[4,97]", "x, y, z"));
  // Many chunks on a small VMEM.
  expectLoopFusionMatchesInlined(
      makePrograms("  x = f32[700,512] parameter(0)\n  y = f32[512,700] parameter(1)\n",
                   "  t = f32[700,512] transpose(y), dimensions={1,0}\n  ROOT r = f32[700,512] subtract(x, t)\n",
                   "f32[700,512]", "x, y"),
      std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
}

// What llo-gen reports for `text` (its kernels, its HBM temporaries).
CodegenStats statsOf(const std::string& text, const std::string& target = "v5e") {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  if (!loaded.module) return {};
  auto t = target::loadTarget(target, diags);
  auto gen = generateLlo(*loaded.module, *t, CodegenOptions{}, diags);
  return gen ? gen->stats : CodegenStats{};
}

// The number of kernels `text` lowers to on v5e.
size_t kernelCount(const std::string& text) { return statsOf(text).kernels.size(); }

TEST(LoopFusion, ViewsOfComputedValuesAreRecomputedFromViewsOfParameters) {
  // sink-views rewrites a view of an elementwise chain into the chain on
  // views of the parameters, cloning it when the value has other users, so
  // each fusion is one kernel (XLA's loop emitter recomputes the same way).
  std::vector<FusedAndInlined> cases = {
      // The transposed value is also read directly.
      makePrograms("  x = f32[200,200] parameter(0)\n",
                   "  a = f32[200,200] multiply(x, x)\n  t = f32[200,200] transpose(a), dimensions={1,0}\n"
                   "  ROOT r = f32[200,200] add(a, t)\n",
                   "f32[200,200]", "x"),
      // Both the value and its transpose are results (of different shapes).
      makePrograms("  x = s32[300,128] parameter(0)\n  y = s32[300,128] parameter(1)\n",
                   "  a = s32[300,128] multiply(x, y)\n  t = s32[128,300] transpose(a), dimensions={1,0}\n"
                   "  ROOT r = (s32[300,128], s32[128,300]) tuple(a, t)\n",
                   "(s32[300,128], s32[128,300])", "x, y"),
      // A scalar broadcast inside the chain stays one broadcast.
      makePrograms("  x = f32[128,128] parameter(0)\n  k = f32[] parameter(1)\n",
                   "  kb = f32[128,128] broadcast(k), dimensions={}\n  a = f32[128,128] multiply(x, kb)\n"
                   "  n = bf16[128,128] convert(a)\n  t = bf16[128,128] transpose(n), dimensions={1,0}\n"
                   "  ROOT r = bf16[128,128] subtract(n, t)\n",
                   "bf16[128,128]", "x, k"),
      // A broadcast of a computed vector (along either dimension).
      makePrograms("  x = f32[300,384] parameter(0)\n  b = s32[300] parameter(1)\n  c = f32[384] parameter(2)\n",
                   "  n = s32[300] negate(b)\n  f = f32[300] convert(n)\n"
                   "  bb = f32[300,384] broadcast(f), dimensions={0}\n  cc = f32[384] abs(c)\n"
                   "  cb = f32[300,384] broadcast(cc), dimensions={1}\n  s = f32[300,384] add(x, bb)\n"
                   "  ROOT r = f32[300,384] multiply(s, cb)\n",
                   "f32[300,384]", "x, b, c"),
      // A reverse of a value that is also read directly.
      makePrograms("  x = f32[300,384] parameter(0)\n",
                   "  a = f32[300,384] abs(x)\n  v = f32[300,384] reverse(a), dimensions={0}\n"
                   "  ROOT r = f32[300,384] subtract(a, v)\n",
                   "f32[300,384]", "x"),
      // A strided slice of a computed value, and a slice of a slice.
      makePrograms("  x = s32[4,97] parameter(0)\n  z = s32[8,194] parameter(1)\n",
                   "  a = s32[8,194] negate(z)\n  s = s32[4,97] slice(a), slice={[4:8], [1:194:2]}\n"
                   "  ROOT r = s32[4,97] add(s, x)\n",
                   "s32[4,97]", "x, z"),
      makePrograms("  y = s32[97,4] parameter(0)\n  w = s32[200,10] parameter(1)\n",
                   "  sa = s32[100,8] slice(w), slice={[0:200:2], [1:9]}\n  m = s32[100,8] multiply(sa, sa)\n"
                   "  sb = s32[97,4] slice(m), slice={[3:100], [0:8:2]}\n  ROOT r = s32[97,4] add(sb, y)\n",
                   "s32[97,4]", "y, w"),
      // f64 views (8-byte elements), results of different shapes through a
      // bitcast (the corpus' emit_transpose_mixed_indexing as a fusion).
      makePrograms("  x = f64[24,2,24] parameter(0)\n  k = f64[] parameter(1)\n",
                   "  t = f64[24,2,24] transpose(x), dimensions={2,1,0}\n  b = f64[6,4,2,24] bitcast(t)\n"
                   "  kb = f64[6,4,2,24] broadcast(k), dimensions={}\n  kc = f64[24,2,24] broadcast(k), dimensions={}\n"
                   "  a1 = f64[6,4,2,24] add(b, kb)\n  a2 = f64[24,2,24] add(t, kc)\n"
                   "  ROOT r = (f64[6,4,2,24], f64[24,2,24]) tuple(a1, a2)\n",
                   "(f64[6,4,2,24], f64[24,2,24])", "x, k"),
      // Rows of 27200 elements: chunks of 16 rows (the corpus'
      // emit_transpose_epilogue as a fusion).
      makePrograms("  x = f32[20,160,170] parameter(0)\n",
                   "  t = f32[20,170,160] transpose(x), dimensions={0,2,1}\n  ROOT r = f32[20,170,160] abs(t)\n",
                   "f32[20,170,160]", "x"),
  };
  for (const FusedAndInlined& p : cases) {
    expectLoopFusionMatchesInlined(p);
    EXPECT_EQ(kernelCount(p.fused), 1u) << p.fused;
  }
}

TEST(LoopFusion, ViewsOfIotasAreIotas) {
  // Iotas are not streamed, so this is a resident fusion rather than a
  // streaming one, but the transposed iota is an iota along the other
  // dimension (only the parameter is transposed).
  FusedAndInlined p = makePrograms("  x = s32[30,50] parameter(0)\n",
                                   "  i = s32[30,50] iota(), iota_dimension=1\n  a = s32[30,50] add(i, x)\n"
                                   "  ROOT t = s32[50,30] transpose(a), dimensions={1,0}\n",
                                   "s32[50,30]", "x");
  E2eRun r = compileAndCompare(p.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0) << r.where;
  std::string text = llo(p.fused);
  EXPECT_NE(text.find("// iota: iota %t.iota s32[50,30]"), std::string::npos) << text.substr(0, 2000);
  EXPECT_EQ(text.find("// transpose: transpose %t s32[50,30]"), std::string::npos);
  EXPECT_NE(text.find("intermediates in VMEM"), std::string::npos);
  EXPECT_EQ(kernelCount(p.fused), 1u);
}

TEST(LoopFusion, OtherDataMovementIsAResidentFusion) {
  // A pad (no strided view), or rows too long for three chunks of a small
  // VMEM, make resident fusions: the instructions' kernels as sections of
  // one, still correct (on the small VMEM the transpose spills to HBM).
  FusedAndInlined p = makePrograms("  x = f32[298,384] parameter(0)\n  y = f32[300,384] parameter(1)\n",
                                   "  z = f32[] constant(0)\n  v = f32[300,384] pad(x, z), padding=1_1x0_0\n"
                                   "  ROOT r = f32[300,384] add(v, y)\n",
                                   "f32[300,384]", "x, y");
  E2eRun r = compileAndCompare(p.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0) << r.where;
  EXPECT_NE(llo(p.fused).find("// pad: pad %v"), std::string::npos);
  EXPECT_NE(llo(p.fused).find("intermediates in VMEM"), std::string::npos);
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  FusedAndInlined q = makePrograms("  x = f32[512,700] parameter(0)\n  y = f32[700,512] parameter(1)\n",
                                   "  t = f32[512,700] transpose(y), dimensions={1,0}\n"
                                   "  ROOT r = f32[512,700] subtract(x, t)\n",
                                   "f32[512,700]", "x, y");
  r = compileAndCompare(q.fused, small);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0) << r.where;
  EXPECT_NE(llo(q.fused, small).find("// transpose: transpose %t"), std::string::npos);
  EXPECT_NE(llo(q.fused, small).find("of them spilled to HBM"), std::string::npos);
}

// Input fusions: a reduction over trailing dimensions of values computed
// elementwise from the fusion's parameters is one reduction kernel; the
// fold is the unfused reduce's, so the bits are too.
FusedAndInlined makeReduceFusion(const std::string& params, const std::string& body, const std::string& reducer,
                                 const std::string& resultShape, const std::string& args) {
  FusedAndInlined p = makePrograms(params, body, resultShape, args);
  p.fused = "HloModule m\n" + reducer + p.fused.substr(std::string("HloModule m\n").size());
  p.inlined = "HloModule m\n" + reducer + p.inlined.substr(std::string("HloModule m\n").size());
  return p;
}

void expectInputFusionMatchesInlined(const FusedAndInlined& p, double tol, const std::string& target = "v5e") {
  auto [fused, inlined] = runBoth(p, target, 3);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  const hlo::Literal& w = *fused.want()[0];
  hlo::Literal got(w.shape());
  std::memcpy(got.mutableData().data(), fused.got[0].data(), fused.got[0].size());
  for (int64_t k = 0; k < w.elementCount(); ++k)
    EXPECT_NEAR(got.getDouble(k), w.getDouble(k), tol * (1 + std::fabs(w.getDouble(k)))) << k;
  std::string text = llo(p.fused, target);
  EXPECT_NE(text.find("// fusion-reduce: fusion %f"), std::string::npos) << text.substr(0, 2000);
  EXPECT_EQ(text.find("// elementwise:"), std::string::npos);
}

const char* kAddF32 = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

TEST(InputFusion, SumOfExponentials) {
  expectInputFusionMatchesInlined(
      makeReduceFusion("  x = f32[64,3000] parameter(0)\n",
                       "  e = f32[64,3000] exponential(x)\n  z = f32[] constant(0)\n"
                       "  ROOT r = f32[64] reduce(e, z), dimensions={1}, to_apply=add\n",
                       kAddF32, "f32[64]", "x"),
      1e-4);
}

TEST(InputFusion, DotProductRowsWithAScalarParameter) {
  expectInputFusionMatchesInlined(
      makeReduceFusion("  x = f32[300,2048] parameter(0)\n  y = bf16[300,2048] parameter(1)\n"
                       "  s = f32[] parameter(2)\n  i = f32[] parameter(3)\n",
                       "  yf = f32[300,2048] convert(y)\n  m = f32[300,2048] multiply(x, yf)\n"
                       "  sb = f32[300,2048] broadcast(s), dimensions={}\n  q = f32[300,2048] multiply(m, sb)\n"
                       "  ROOT r = f32[300] reduce(q, i), dimensions={1}, to_apply=add\n",
                       kAddF32, "f32[300]", "x, y, s, i"),
      1e-4);
}

TEST(InputFusion, IntegerMaxAndLongRowsOnASmallVmem) {
  const char* maxS32 = "mx {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] maximum(a, b)\n}\n";
  FusedAndInlined p = makeReduceFusion("  x = s32[2,3,70000] parameter(0)\n  y = s32[2,3,70000] parameter(1)\n",
                                       "  a = s32[2,3,70000] add(x, y)\n  n = s32[2,3,70000] negate(a)\n"
                                       "  z = s32[] constant(-2147483648)\n"
                                       "  ROOT r = s32[2] reduce(n, z), dimensions={1,2}, to_apply=mx\n",
                                       maxS32, "s32[2]", "x, y");
  expectInputFusionMatchesInlined(p, 0, "v5e");
  expectInputFusionMatchesInlined(p, 0, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
}

// Fusions no streaming kernel covers are one kernel whose intermediates live
// in VMEM (kernels/resident.cpp): the same instructions' kernels, moving data
// VMEM to VMEM, so the bits are the unfused program's.

void expectResidentMatchesInlined(const FusedAndInlined& p, const std::string& target = "v5e") {
  auto [fused, inlined] = runBoth(p, target, 11);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, target);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  CodegenStats s = statsOf(p.fused, target);
  ASSERT_EQ(s.kernels.size(), 1u) << llo(p.fused, target).substr(0, 3000);
  EXPECT_EQ(s.kernels[0].hlo, "f");
  EXPECT_EQ(s.unsharedBytes, 0u) << "an intermediate went to HBM";
  EXPECT_NE(llo(p.fused, target).find("dma.v2v"), std::string::npos);
}

TEST(ResidentFusion, RmsNormReducesAndBroadcastsBackInVmem) {
  expectResidentMatchesInlined(makeReduceFusion(
      "  x = f32[64,1000] parameter(0)\n  w = f32[1000] parameter(1)\n",
      "  sq = f32[64,1000] multiply(x, x)\n  z = f32[] constant(0)\n"
      "  s = f32[64] reduce(sq, z), dimensions={1}, to_apply=add\n"
      "  k = f32[] constant(0.001)\n  kb = f32[64] broadcast(k), dimensions={}\n"
      "  m = f32[64] multiply(s, kb)\n"
      "  e = f32[] constant(1e-6)\n  eb = f32[64] broadcast(e), dimensions={}\n  me = f32[64] add(m, eb)\n"
      "  r = f32[64] rsqrt(me)\n  rb = f32[64,1000] broadcast(r), dimensions={0}\n"
      "  wb = f32[64,1000] broadcast(w), dimensions={1}\n  xr = f32[64,1000] multiply(x, rb)\n"
      "  ROOT y = f32[64,1000] multiply(xr, wb)\n",
      kAddF32, "f32[64,1000]", "x, w"));
}

TEST(ResidentFusion, ConcatenatePadAndSliceWithTwoResults) {
  expectResidentMatchesInlined(
      makePrograms("  a = s32[40,100] parameter(0)\n  b = s32[40,28] parameter(1)\n",
                   "  c = s32[40,128] concatenate(a, b), dimensions={1}\n  n = s32[40,128] negate(c)\n"
                   "  z = s32[] constant(7)\n  p = s32[44,130] pad(n, z), padding=2_2x1_1\n"
                   "  s = s32[20,130] slice(p), slice={[0:40:2], [0:130]}\n  m = s32[20,130] multiply(s, s)\n"
                   "  ROOT t = (s32[20,130], s32[40,128]) tuple(m, c)\n",
                   "(s32[20,130], s32[40,128])", "a, b"));
}

TEST(ResidentFusion, ScalarCodeReadsComputedIndicesFromVmem) {
  // The dynamic-slice's start and the gather's indices are computed in the
  // fusion: scalar code stages them VMEM -> SMEM.
  expectResidentMatchesInlined(makePrograms(
      "  x = f32[50,64] parameter(0)\n  i = s32[] parameter(1)\n  g = s32[12] parameter(2)\n",
      "  one = s32[] constant(3)\n  j = s32[] add(i, one)\n  zero = s32[] constant(0)\n"
      "  d = f32[8,64] dynamic-slice(x, j, zero), dynamic_slice_sizes={8,64}\n"
      "  gb = s32[12] add(g, g)\n  gi = s32[12,1] reshape(gb)\n"
      "  h = f32[12,64] gather(x, gi), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
      "index_vector_dim=1, slice_sizes={1,64}\n"
      "  e = f32[8,64] exponential(d)\n  ROOT t = (f32[8,64], f32[12,64]) tuple(e, h)\n",
      "(f32[8,64], f32[12,64])", "x, i, g"));
  EXPECT_NE(
      llo(makePrograms("  x = f32[50,64] parameter(0)\n  i = s32[] parameter(1)\n",
                       "  one = s32[] constant(3)\n  j = s32[] add(i, one)\n  zero = s32[] constant(0)\n"
                       "  d = f32[8,64] dynamic-slice(x, j, zero), dynamic_slice_sizes={8,64}\n"
                       "  ROOT e = f32[8,64] exponential(d)\n",
                       "f32[8,64]", "x, i")
              .fused)
          .find("dma.v2s"),
      std::string::npos);
}

TEST(ResidentFusion, RenamesAreNoSections) {
  // copy renames its operand's buffer (opcode flag kPureRename), as reshape
  // and bitcast do: a fusion of one c64 transpose (no streaming kernel) and
  // a copy has one section, so it is the transpose's own kernel, writing the
  // fusion's result, not a resident kernel around it. The resident planner
  // counted copy as a section before while emission emitted nothing for it.
  FusedAndInlined p = makePrograms("  x = c64[16,40,8] parameter(0)\n",
                                   "  t = c64[8,40,16] transpose(x), dimensions={2,1,0}\n"
                                   "  ROOT c = c64[8,40,16] copy(t)\n",
                                   "c64[8,40,16]", "x");
  auto [fused, inlined] = runBoth(p, "v5e", 11);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, "v5e");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0.0) << r.where;
  CodegenStats s = statsOf(p.fused);
  ASSERT_EQ(s.kernels.size(), 1u) << llo(p.fused).substr(0, 3000);
  EXPECT_EQ(s.kernels[0].kind, "transpose");
  EXPECT_EQ(llo(p.fused).find("intermediates in VMEM"), std::string::npos);
}

TEST(ResidentFusion, IntermediatesLargerThanVmemSpillToHbm) {
  // 256 KiB of VMEM leaves 128 KiB for intermediates: the two of 200 KB
  // spill to HBM, the row sums stay; still one kernel, still the same bits.
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  FusedAndInlined p = makeReduceFusion("  x = f32[50,1000] parameter(0)\n",
                                       "  e = f32[50,1000] exponential(x)\n  z = f32[] constant(0)\n"
                                       "  s = f32[50] reduce(e, z), dimensions={1}, to_apply=add\n"
                                       "  sb = f32[50,1000] broadcast(s), dimensions={0}\n"
                                       "  ROOT y = f32[50,1000] divide(e, sb)\n",
                                       kAddF32, "f32[50,1000]", "x");
  auto [fused, inlined] = runBoth(p, small, 5);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, small);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  CodegenStats s = statsOf(p.fused, small);
  EXPECT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.unsharedBytes, 2u * 200192);  // e and sb, each rounded up to 512 B
  std::string text = llo(p.fused, small);
  EXPECT_NE(text.find(", 400000 B of them spilled to HBM"), std::string::npos) << text.substr(0, 3000);
  // On v5e the whole softmax stays in VMEM.
  expectResidentMatchesInlined(p);
}

TEST(ResidentFusion, NestedFusionsShareTheOuterOnesPlacement) {
  // The inner fusion's buffers are intermediates of the outer one: placed
  // with them, never over them.
  std::string text =
      "HloModule m\ninner {\n  a = f32[40,100] parameter(0)\n  z = f32[] constant(1)\n"
      "  p = f32[42,100] pad(a, z), padding=1_1x0_0\n"
      "  ROOT n = f32[40,100] slice(p), slice={[2:42], [0:100]}\n}\n"
      "outer {\n  x = f32[40,100] parameter(0)\n  e = f32[40,100] exponential(x)\n"
      "  i = f32[40,100] fusion(e), kind=kLoop, calls=inner\n  ROOT s = f32[40,100] add(e, i)\n}\n"
      "ENTRY main {\n  x = f32[40,100] parameter(0)\n  ROOT f = f32[40,100] fusion(x), kind=kLoop, calls=outer\n}\n";
  E2eRun r = compileAndCompare(text);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  CodegenStats s = statsOf(text);
  EXPECT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.unsharedBytes, 0u);
}

// Column reductions (reduced dimensions leading or in the middle), several
// reductions, side outputs of the inputs' shape and epilogues on the
// reduced values: one kernel streaming blocks of rows, every result leaf
// bitwise what the unfused instructions compute and close to the
// interpreter's.
std::vector<KernelStats> kernelsOf(const std::string& text, const std::string& target) {
  return statsOf(text, target).kernels;
}

void expectColumnFusionMatchesInlined(const FusedAndInlined& p, double tol, const std::string& target = "v5e",
                                      const std::string& kind = "fusion-reduce-columns") {
  auto [fused, inlined] = runBoth(p, target, 7);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  ASSERT_EQ(fused.got.size(), inlined.got.size());
  std::vector<const hlo::Literal*> want = fused.want();
  ASSERT_EQ(want.size(), fused.got.size());
  for (size_t leaf = 0; leaf < fused.got.size(); ++leaf) {
    EXPECT_TRUE(fused.got[leaf] == inlined.got[leaf]) << "fused and unfused results differ in leaf " << leaf;
    const hlo::Literal& w = *want[leaf];
    hlo::Literal got(w.shape());
    ASSERT_EQ(got.mutableData().size(), fused.got[leaf].size());
    std::memcpy(got.mutableData().data(), fused.got[leaf].data(), fused.got[leaf].size());
    for (int64_t k = 0; k < w.elementCount(); ++k)
      ASSERT_NEAR(got.getDouble(k), w.getDouble(k), tol * (1 + std::fabs(w.getDouble(k)))) << leaf << " " << k;
  }
  std::vector<KernelStats> kernels = kernelsOf(p.fused, target);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].kind, kind);
  EXPECT_GT(kernelsOf(p.inlined, target).size(), 1u);
}

const std::string kSmallVmem = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";

TEST(ColumnReduceFusion, SumOverLeadingDimensionOfAProduct) {
  FusedAndInlined p = makeReduceFusion(
      "  x = f32[512,300] parameter(0)\n  y = bf16[512,300] parameter(1)\n",
      "  c = f32[512,300] convert(y)\n  m = f32[512,300] multiply(x, c)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[300] reduce(m, z), dimensions={0}, to_apply=add\n",
      kAddF32, "f32[300]", "x, y");
  expectColumnFusionMatchesInlined(p, 1e-4);
  // Several blocks of rows, the last one shorter, double-buffered (the
  // next block loads into the other slot while this one is folded).
  expectColumnFusionMatchesInlined(p, 1e-4, kSmallVmem);
  EXPECT_NE(llo(p.fused, kSmallVmem).find("_cnonext:"), std::string::npos);
}

TEST(ColumnReduceFusion, VariadicArgmaxOverAMiddleDimension) {
  const char* argmax =
      "amax {\n  a = s32[] parameter(0)\n  ai = s32[] parameter(1)\n  b = s32[] parameter(2)\n"
      "  bi = s32[] parameter(3)\n  g = pred[] compare(a, b), direction=GE\n  v = s32[] select(g, a, b)\n"
      "  i = s32[] select(g, ai, bi)\n  ROOT t = (s32[], s32[]) tuple(v, i)\n}\n";
  FusedAndInlined p = makeReduceFusion(
      "  x = s32[6,200,40] parameter(0)\n  y = s32[6,200,40] parameter(1)\n  lo = s32[] parameter(2)\n",
      "  d = s32[6,200,40] subtract(x, y)\n  z = s32[] constant(0)\n"
      "  ROOT r = (s32[6,40], s32[6,40]) reduce(d, y, lo, z), dimensions={1}, to_apply=amax\n",
      argmax, "(s32[6,40], s32[6,40])", "x, y, lo");
  expectColumnFusionMatchesInlined(p, 0);
  expectColumnFusionMatchesInlined(p, 0, kSmallVmem);
}

TEST(ColumnReduceFusion, SideOutputOfTheInputsShape) {
  // Rows longer than a chunk of columns (b split in chunks, the last one
  // shorter) on a small VMEM: few rows per block.
  FusedAndInlined p = makeReduceFusion(
      "  x = f32[40,9000] parameter(0)\n",
      "  e = f32[40,9000] exponential(x)\n  z = f32[] constant(0)\n"
      "  r = f32[9000] reduce(e, z), dimensions={0}, to_apply=add\n"
      "  ROOT t = (f32[9000], f32[40,9000]) tuple(r, e)\n",
      kAddF32, "(f32[9000], f32[40,9000])", "x");
  expectColumnFusionMatchesInlined(p, 1e-4);
  expectColumnFusionMatchesInlined(p, 1e-4, kSmallVmem);
}

TEST(ColumnReduceFusion, TwoReductionsOfReshapedInputsAndAnEpilogue) {
  const char* maxF32 = "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n";
  FusedAndInlined p = makeReduceFusion(
      std::string("  p = f32[64,128] parameter(0)\n  s = f32[] parameter(1)\n"),
      "  z = f32[] constant(0)\n  r1 = f32[128] reduce(p, z), dimensions={0}, to_apply=add\n"
      "  n = f32[64,128] negate(p)\n  c = f32[8,8,128] bitcast(n)\n"
      "  ninf = f32[] constant(-inf)\n  r2 = f32[128] reduce(c, ninf), dimensions={0,1}, to_apply=mx\n"
      "  sb = f32[128] broadcast(s), dimensions={}\n  q = f32[128] multiply(r2, sb)\n  l = f32[128] add(r1, q)\n"
      "  ROOT t = (f32[128], f32[128], f32[64,128]) tuple(r1, l, n)\n",
      std::string(kAddF32) + maxF32, "(f32[128], f32[128], f32[64,128])", "p, s");
  expectColumnFusionMatchesInlined(p, 1e-4);
}

TEST(ColumnReduceFusion, NarrowTypesAndShortTrailingRows) {
  // s8 converted and summed over the middle dimension; short trailing rows
  // (which the unfused reduce folds in order after a transposing copy)
  // with an epilogue, s16 sums that wrap.
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = s8[100,72,32] parameter(0)\n",
                       "  c = f32[100,72,32] convert(x)\n  z = f32[] constant(0)\n"
                       "  ROOT r = f32[100,32] reduce(c, z), dimensions={1}, to_apply=add\n",
                       kAddF32, "f32[100,32]", "x"),
      0);
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = f32[300,64] parameter(0)\n",
                       "  a = f32[300,64] abs(x)\n  z = f32[] constant(0)\n"
                       "  r = f32[300] reduce(a, z), dimensions={1}, to_apply=add\n"
                       "  ROOT q = f32[300] sqrt(r)\n",
                       kAddF32, "f32[300]", "x"),
      1e-5);
  const char* addS16 = "add16 {\n  a = s16[] parameter(0)\n  b = s16[] parameter(1)\n  ROOT s = s16[] add(a, b)\n}\n";
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = s16[256,128] parameter(0)\n  i = s16[] parameter(1)\n",
                       "  m = s16[256,128] multiply(x, x)\n"
                       "  ROOT r = s16[128] reduce(m, i), dimensions={0}, to_apply=add16\n",
                       addS16, "s16[128]", "x, i"),
      0);
}

// Row reductions (the segment kernel's input fusions) with side outputs
// written per batch of rows and epilogues on each row's result.
TEST(InputFusion, SideOutputsAndEpilogues) {
  const char* addS32 = "adds {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n";
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = s4[64,64] parameter(0)\n",
                       "  c = s32[64,64] convert(x)\n  z = s32[] constant(0)\n"
                       "  r = s32[64] reduce(c, z), dimensions={1}, to_apply=adds\n"
                       "  ROOT t = (s32[64], s32[64,64]) tuple(r, c)\n",
                       addS32, "(s32[64], s32[64,64])", "x"),
      0, "v5e", "fusion-reduce");
  // Rows with a masked tail vreg, several batches on a small VMEM, an
  // epilogue with a scalar parameter, two side outputs.
  FusedAndInlined p = makeReduceFusion(
      "  x = f32[90,1500] parameter(0)\n  s = f32[] parameter(1)\n",
      "  e = f32[90,1500] exponential(x)\n  h = bf16[90,1500] convert(x)\n  z = f32[] constant(0)\n"
      "  r = f32[90] reduce(e, z), dimensions={1}, to_apply=add\n"
      "  sb = f32[90] broadcast(s), dimensions={}\n  l = f32[90] log(r)\n  m = f32[90] multiply(l, sb)\n"
      "  ROOT t = (f32[90], bf16[90,1500], f32[90], f32[90,1500]) tuple(m, h, r, e)\n",
      kAddF32, "(f32[90], bf16[90,1500], f32[90], f32[90,1500])", "x, s");
  expectColumnFusionMatchesInlined(p, 1e-4, "v5e", "fusion-reduce");
  expectColumnFusionMatchesInlined(p, 1e-4, kSmallVmem, "fusion-reduce");
  // Two reduces, one of them variadic, with a side output (the corpus'
  // emit_reduce_row_mof_scalar_variadic, larger).
  const char* pairSum =
      "sum2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n"
      "  d = f32[] parameter(3)\n  s = f32[] add(a, c)\n  t = f32[] add(b, d)\n  ROOT r = (f32[], f32[]) tuple(s, t)\n}\n";
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = f32[40,3000] parameter(0)\n",
                       "  z = f32[] constant(0)\n  n = f32[40,3000] negate(x)\n"
                       "  r1 = f32[40] reduce(n, z), dimensions={1}, to_apply=add\n"
                       "  r2 = (f32[40], f32[40]) reduce(x, n, z, z), dimensions={1}, to_apply=sum2\n"
                       "  g = f32[40] get-tuple-element(r2), index=1\n  m = f32[40] multiply(g, r1)\n"
                       "  ROOT t = (f32[40], (f32[40], f32[40]), f32[40,3000], f32[40]) tuple(r1, r2, n, m)\n",
                       std::string(kAddF32) + pairSum, "(f32[40], (f32[40], f32[40]), f32[40,3000], f32[40])", "x"),
      1e-4, "v5e", "fusion-reduce");
  // Only an epilogue.
  expectColumnFusionMatchesInlined(
      makeReduceFusion("  x = f32[8,2048] parameter(0)\n  i = f32[] parameter(1)\n",
                       "  q = f32[8,2048] multiply(x, x)\n  r = f32[8] reduce(q, i), dimensions={1}, to_apply=add\n"
                       "  ROOT l = f32[8] log(r)\n",
                       kAddF32, "f32[8]", "x, i"),
      1e-5, "v5e", "fusion-reduce");
}


// Row fusions (kernels/rows.cpp): softmax, layer norm and RMS norm, whose
// reductions over the rows are broadcast back along them, stream blocks of
// rows through VMEM as one kernel. Folds are the unfused reduce's, so the
// bits are the unfused program's.
namespace rows {

void expectRowKernel(const FusedAndInlined& p, double tol, const std::string& target = "v5e") {
  auto [fused, inlined] = runBoth(p, target, 5);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, target);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, tol) << r.where;
  CodegenStats s = statsOf(p.fused, target);
  ASSERT_EQ(s.kernels.size(), 1u) << llo(p.fused, target).substr(0, 3000);
  EXPECT_EQ(s.kernels[0].kind, "fusion-rows");
  EXPECT_EQ(llo(p.fused, target).find("dma.v2v"), std::string::npos);
}

const char* kMaxF32 = "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n";

std::string softmaxBody(const std::string& s, const std::string& rows) {
  return fmt::format(
      "  ninf = f32[] constant(-inf)\n  m = f32[{1}] reduce(x, ninf), dimensions={{1}}, to_apply=mx\n"
      "  mb = f32[{0}] broadcast(m), dimensions={{0}}\n  d = f32[{0}] subtract(x, mb)\n"
      "  e = f32[{0}] exponential(d)\n  z = f32[] constant(0)\n"
      "  s = f32[{1}] reduce(e, z), dimensions={{1}}, to_apply=add\n"
      "  sb = f32[{0}] broadcast(s), dimensions={{0}}\n  ROOT y = f32[{0}] divide(e, sb)\n",
      s, rows);
}

TEST(RowFusion, SoftmaxIsOneStreamingKernel) {
  expectRowKernel(makeReduceFusion("  x = f32[37,2048] parameter(0)\n", softmaxBody("37,2048", "37"),
                                   std::string(kAddF32) + kMaxF32, "f32[37,2048]", "x"),
                  1e-5);
}

TEST(RowFusion, LongRowsLoopOverTheirVregs) {
  expectRowKernel(makeReduceFusion("  x = f32[9,40960] parameter(0)\n", softmaxBody("9,40960", "9"),
                                   std::string(kAddF32) + kMaxF32, "f32[9,40960]", "x"),
                  1e-5);
}

TEST(RowFusion, SoftmaxRowsOf4096And16384KeysInF32AndBf16) {
  // Rows longer than the attention kernel's 2048-key block need no online
  // form here: a row stays in VMEM across the kernel's passes (up to 2^20
  // elements), so max and sum are exact, folded as the unfused reduces.
  expectRowKernel(makeReduceFusion("  x = f32[24,4096] parameter(0)\n", softmaxBody("24,4096", "24"),
                                   std::string(kAddF32) + kMaxF32, "f32[24,4096]", "x"),
                  1e-5);
  // bf16 in and out, f32 inside: within a bf16 rounding of the result.
  expectRowKernel(makeReduceFusion("  xb = bf16[6,16384] parameter(0)\n",
                                   "  x = f32[6,16384] convert(xb)\n" +
                                       softmaxBody("6,16384", "6").replace(
                                           softmaxBody("6,16384", "6").find("ROOT y"), 6, "y") +
                                       "  ROOT yb = bf16[6,16384] convert(y)\n",
                                   std::string(kAddF32) + kMaxF32, "bf16[6,16384]", "xb"),
                  4e-3);
}

TEST(RowFusion, LayerNormWithScaleAndBiasOverManyBlocks) {
  // bf16 in and out, f32 inside; 700 rows of 2 KiB make several blocks and a tail.
  expectRowKernel(
      makeReduceFusion(
          "  xb = bf16[700,1024] parameter(0)\n  g = f32[1024] parameter(1)\n  b = f32[1024] parameter(2)\n",
          "  x = f32[700,1024] convert(xb)\n  z = f32[] constant(0)\n"
          "  s = f32[700] reduce(x, z), dimensions={1}, to_apply=add\n"
          "  n = f32[] constant(0.0009765625)\n  nb = f32[700] broadcast(n), dimensions={}\n"
          "  mean = f32[700] multiply(s, nb)\n  mb = f32[700,1024] broadcast(mean), dimensions={0}\n"
          "  c = f32[700,1024] subtract(x, mb)\n  c2 = f32[700,1024] multiply(c, c)\n"
          "  v = f32[700] reduce(c2, z), dimensions={1}, to_apply=add\n  vm = f32[700] multiply(v, nb)\n"
          "  eps = f32[] constant(1e-5)\n  eb = f32[700] broadcast(eps), dimensions={}\n"
          "  ve = f32[700] add(vm, eb)\n  rs = f32[700] rsqrt(ve)\n"
          "  rb = f32[700,1024] broadcast(rs), dimensions={0}\n  y0 = f32[700,1024] multiply(c, rb)\n"
          "  gb = f32[700,1024] broadcast(g), dimensions={1}\n  y1 = f32[700,1024] multiply(y0, gb)\n"
          "  bb = f32[700,1024] broadcast(b), dimensions={1}\n  y2 = f32[700,1024] add(y1, bb)\n"
          "  ROOT y = bf16[700,1024] convert(y2)\n",
          kAddF32, "bf16[700,1024]", "xb, g, b"),
      1e-2);
}

TEST(RowFusion, RmsNormWithTwoResultsAndAScalarParameter) {
  FusedAndInlined p = makeReduceFusion(
      "  x = f32[4,6,2048] parameter(0)\n  w = f32[2048] parameter(1)\n  eps = f32[] parameter(2)\n",
      "  sq = f32[4,6,2048] multiply(x, x)\n  z = f32[] constant(0)\n"
      "  s = f32[4,6] reduce(sq, z), dimensions={2}, to_apply=add\n"
      "  k = f32[] constant(0.00048828125)\n  kb = f32[4,6] broadcast(k), dimensions={}\n"
      "  m = f32[4,6] multiply(s, kb)\n  eb = f32[4,6] broadcast(eps), dimensions={}\n"
      "  me = f32[4,6] add(m, eb)\n  r = f32[4,6] rsqrt(me)\n"
      "  rb = f32[4,6,2048] broadcast(r), dimensions={0,1}\n  xr = f32[4,6,2048] multiply(x, rb)\n"
      "  wb = f32[4,6,2048] broadcast(w), dimensions={2}\n  y = f32[4,6,2048] multiply(xr, wb)\n"
      "  ROOT t = (f32[4,6,2048], f32[4,6,2048]) tuple(y, xr)\n",
      kAddF32, "(f32[4,6,2048], f32[4,6,2048])", "x, w, eps");
  auto [fused, inlined] = runBoth(p, "v5e", 5);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, "v5e");
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  CodegenStats s = statsOf(p.fused, "v5e");
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, "fusion-rows");
}

// A row kernel that streams its rows in segments: one fusion-rows kernel
// with a segment loop, bit-identical to the unfused program; against the
// interpreter within `rel` relative to each element (softmax values are
// about 1 / row length, so |got - want| / (1 + |want|) says little).
void expectStreamedRowKernel(const FusedAndInlined& p, double rel, const std::string& target) {
  auto [fused, inlined] = runBoth(p, target, 5);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  EXPECT_TRUE(fused.got == inlined.got) << "fused and unfused results differ";
  E2eRun r = compileAndCompare(p.fused, target);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxRelErr, rel) << r.relWhere;
  EXPECT_LE(r.normRelErr, rel);
  CodegenStats s;
  const std::string text = llo(p.fused, target, &s);
  ASSERT_EQ(s.kernels.size(), 1u) << text.substr(0, 3000);
  EXPECT_EQ(s.kernels[0].kind, "fusion-rows");
  EXPECT_NE(text.find("rlseg"), std::string::npos);
}

std::string layerNormBody(int64_t k, int64_t n) {
  return fmt::format(
      "  x = f32[{0},{1}] convert(xb)\n  z = f32[] constant(0)\n"
      "  s = f32[{0}] reduce(x, z), dimensions={{1}}, to_apply=add\n"
      "  n = f32[] constant({2})\n  nb = f32[{0}] broadcast(n), dimensions={{}}\n"
      "  mean = f32[{0}] multiply(s, nb)\n  mb = f32[{0},{1}] broadcast(mean), dimensions={{0}}\n"
      "  c = f32[{0},{1}] subtract(x, mb)\n  c2 = f32[{0},{1}] multiply(c, c)\n"
      "  v = f32[{0}] reduce(c2, z), dimensions={{1}}, to_apply=add\n  vm = f32[{0}] multiply(v, nb)\n"
      "  eps = f32[] constant(1e-5)\n  eb = f32[{0}] broadcast(eps), dimensions={{}}\n"
      "  ve = f32[{0}] add(vm, eb)\n  rs = f32[{0}] rsqrt(ve)\n"
      "  rb = f32[{0},{1}] broadcast(rs), dimensions={{0}}\n  y0 = f32[{0},{1}] multiply(c, rb)\n"
      "  gb = f32[{0},{1}] broadcast(g), dimensions={{1}}\n  y1 = f32[{0},{1}] multiply(y0, gb)\n"
      "  bb = f32[{0},{1}] broadcast(b), dimensions={{1}}\n  y2 = f32[{0},{1}] add(y1, bb)\n"
      "  ROOT y = bf16[{0},{1}] convert(y2)\n",
      k, n, 1.0 / static_cast<double>(n));
}

TEST(RowFusion, RowsPastVmemStreamInSegments) {
  // 128 KiB of VMEM (v5e-small-vmem's budget) holds no f32 row of 16384
  // in and out twice over: each of softmax's three passes (max, sum,
  // results) streams the row through two slots of 4-vreg segments, the
  // next segment loading while this one is folded, results written back
  // segment by segment. Same fold order as the resident kernel, so
  // bit-identical to the unfused program; within 1e-5 of the interpreter
  // relative to each element and in norm (1.7e-6 seen: the chip's
  // exponential and the order of the sum).
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  expectStreamedRowKernel(makeReduceFusion("  x = f32[3,16384] parameter(0)\n", softmaxBody("3,16384", "3"),
                                           std::string(kAddF32) + kMaxF32, "f32[3,16384]", "x"),
                          1e-5, small);
  // Layer norm (two passes, then the results with a scale and a bias
  // streamed beside the row), bf16 in and out: within 1e-2 relative (7.6e-3
  // seen: one bf16 ulp, 2^-8 to 2^-7 of the value).
  expectStreamedRowKernel(makeReduceFusion("  xb = bf16[2,8192] parameter(0)\n  g = f32[8192] parameter(1)\n"
                                           "  b = f32[8192] parameter(2)\n",
                                           layerNormBody(2, 8192), kAddF32, "bf16[2,8192]", "xb, g, b"),
                          1e-2, small);
  // RMS norm with two results and a scalar parameter: one pass, then the
  // results; within 1e-5 relative.
  expectStreamedRowKernel(
      makeReduceFusion(
          "  x = f32[2,3,4096] parameter(0)\n  w = f32[4096] parameter(1)\n  eps = f32[] parameter(2)\n",
          "  sq = f32[2,3,4096] multiply(x, x)\n  z = f32[] constant(0)\n"
          "  s = f32[2,3] reduce(sq, z), dimensions={2}, to_apply=add\n"
          "  k = f32[] constant(0.000244140625)\n  kb = f32[2,3] broadcast(k), dimensions={}\n"
          "  m = f32[2,3] multiply(s, kb)\n  eb = f32[2,3] broadcast(eps), dimensions={}\n"
          "  me = f32[2,3] add(m, eb)\n  r = f32[2,3] rsqrt(me)\n"
          "  rb = f32[2,3,4096] broadcast(r), dimensions={0,1}\n  xr = f32[2,3,4096] multiply(x, rb)\n"
          "  wb = f32[2,3,4096] broadcast(w), dimensions={2}\n  y = f32[2,3,4096] multiply(xr, wb)\n"
          "  ROOT t = (f32[2,3,4096], f32[2,3,4096]) tuple(y, xr)\n",
          kAddF32, "(f32[2,3,4096], f32[2,3,4096])", "x, w, eps"),
      1e-5, small);
}

TEST(RowFusion, RowsOfMoreThanTwoToTheTwentyElementsStream) {
  // 2^21 f32 elements per row (8 MiB) at v5e's budget: past the resident
  // kernel's 2^20, so the row streams in segments of 256 vregs. Within 1e-3
  // relative (3.5e-4 seen: the f32 sum of 2^21 exponentials in the chip's
  // order, lanes then vregs, against the interpreter's sequential one; the
  // unfused program's reduce gives the same bits).
  expectStreamedRowKernel(makeReduceFusion("  x = f32[2,2097152] parameter(0)\n", softmaxBody("2,2097152", "2"),
                                           std::string(kAddF32) + kMaxF32, "f32[2,2097152]", "x"),
                          1e-3, "v5e");
}

TEST(RowFusion, RowsOfPartialVregsStayResident) {
  // 1000 elements per row: not whole vregs, so the resident kernel takes it.
  FusedAndInlined p = makeReduceFusion("  x = f32[8,1000] parameter(0)\n", softmaxBody("8,1000", "8"),
                                       std::string(kAddF32) + kMaxF32, "f32[8,1000]", "x");
  CodegenStats s = statsOf(p.fused, "v5e");
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_NE(s.kernels[0].kind, "fusion-rows");
}

}  // namespace rows

namespace attention {

// softmax(q k^T * scale) v over [batch..., s, 128] x [batch..., t, 128]:
// score type st, output type ot, the softmax in f32.
FusedAndInlined attentionPrograms(const std::string& batch, int64_t s, int64_t t, const char* in, const char* st,
                                  const char* ot, bool rowReciprocal = false) {
  const std::string b = batch.empty() ? "" : batch + ",";
  std::string bd, kept;
  int64_t nb = 0;
  for (char c : batch) nb += c == ',';
  if (!batch.empty()) ++nb;
  for (int64_t d = 0; d < nb; ++d) bd += (d ? "," : "") + std::to_string(d);
  for (int64_t d = 0; d <= nb; ++d) kept += (d ? "," : "") + std::to_string(d);
  const std::string dims = fmt::format("{}{},{}", b, s, t), rows = fmt::format("{}{}", b, s);
  const std::string bdims = bd.empty() ? "" : fmt::format("lhs_batch_dims={{{0}}}, rhs_batch_dims={{{0}}}, ", bd);
  std::string params = fmt::format("  q = {0}[{1}{2},128] parameter(0)\n  k = {0}[{1}{3},128] parameter(1)\n"
                                   "  v = {0}[{1}{3},128] parameter(2)\n  c = {4}[] parameter(3)\n",
                                   in, b, s, t, st);
  std::string body = fmt::format(
      "  d = {0}[{1}] dot(q, k), {2}lhs_contracting_dims={{{3}}}, rhs_contracting_dims={{{3}}}\n"
      "  cb = {0}[{1}] broadcast(c), dimensions={{}}\n  sc = {0}[{1}] multiply(d, cb)\n"
      "  x = f32[{1}] convert(sc)\n  ninf = f32[] constant(-inf)\n"
      "  m = f32[{4}] reduce(x, ninf), dimensions={{{3}}}, to_apply=mx\n"
      "  mb = f32[{1}] broadcast(m), dimensions={{{5}}}\n  df = f32[{1}] subtract(x, mb)\n"
      "  e = f32[{1}] exponential(df)\n  z = f32[] constant(0)\n"
      "  su = f32[{4}] reduce(e, z), dimensions={{{3}}}, to_apply=add\n",
      st, dims, bdims, nb + 1, rows, kept);
  if (rowReciprocal)
    body += fmt::format("  one = f32[] constant(1)\n  ob = f32[{0}] broadcast(one), dimensions={{}}\n"
                        "  r = f32[{0}] divide(ob, su)\n  rb = f32[{1}] broadcast(r), dimensions={{{2}}}\n"
                        "  pf = f32[{1}] multiply(e, rb)\n",
                        rows, dims, kept);
  else
    body += fmt::format("  sb = f32[{0}] broadcast(su), dimensions={{{1}}}\n  pf = f32[{0}] divide(e, sb)\n", dims,
                        kept);
  body += fmt::format("  p = {0}[{1}] convert(pf)\n"
                      "  ROOT o = {2}[{3}{4},128] dot(p, v), {5}lhs_contracting_dims={{{6}}}, rhs_contracting_dims={{{7}}}\n",
                      in, dims, ot, b, s, bdims, nb + 1, nb);
  return makeReduceFusion(params, body, std::string(kAddF32) + rows::kMaxF32, fmt::format("{}[{}{},128]", ot, b, s),
                          "q, k, v, c");
}

void expectAttentionKernel(const FusedAndInlined& p, double tol, double relTol = 1, double normTol = 1) {
  std::vector<hlo::Literal> args;
  auto [fused, inlined] = runBoth(p, "v5e", 11, &args);
  ASSERT_EQ(fused.error, "");
  ASSERT_EQ(inlined.error, "");
  E2eRun r = compileAndCompare(p.fused, "v5e", {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, tol) << r.where;
  EXPECT_LE(r.maxRelErr, relTol) << r.relWhere;
  EXPECT_LE(r.normRelErr, normTol);

  CodegenStats s = statsOf(p.fused, "v5e");
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, "fusion-attention");
  // The scores never go to HBM: the only DMAs are Q, K, V in and the output out.
  const std::string text = llo(p.fused, "v5e");
  EXPECT_EQ(text.find("dma.v2v"), std::string::npos);
  int64_t writes = 0;
  for (size_t at = text.find("dma.v2h"); at != std::string::npos; at = text.find("dma.v2h", at + 1)) ++writes;
  EXPECT_EQ(writes, 1) << text.substr(0, 3000);
}

TEST(AttentionFusion, Bf16HeadsAreOneKernel) {
  // Two batch dimensions, 64 query rows, 256 keys: bf16 results within a bf16 ulp or two.
  expectAttentionKernel(attentionPrograms("2,3", 64, 256, "bf16", "bf16", "bf16"), 1.6e-2);
}

TEST(AttentionFusion, F32ScoresOddBlocksAndARowReciprocal) {
  // No batch dimension, 40 query rows (five row vregs), 384 keys (three
  // tiles on four MXUs), the softmax's division as a per-row reciprocal.
  expectAttentionKernel(attentionPrograms("", 40, 384, "bf16", "f32", "f32", true), 1e-2);
}

TEST(AttentionFusion, LongRowsTakeAnOnlineSoftmax) {
  // More than 2048 keys: blocks of 2048 keys in a run-time loop, with a
  // running max, sum and output rescaled by exp(m_old - m_new) (flash
  // attention). The product reads e = exp(x - m) before the division, so
  // results differ from the interpreter's by bf16 rounding of e and of the
  // MXU operands: bf16 results within 1e-2 (2.6e-3 seen), f32 within 5e-3
  // (1.8e-3 seen), in |got - want| / (1 + |want|). The outputs are means of
  // thousands of values in (-1, 1), so they are small (about 0.01) and that
  // measure is lenient: relative to the result, within 1e-2 in norm
  // (||got - want|| / ||want||; 2.5e-3 to 4.3e-3 seen, one bf16 rounding of
  // p is 3.9e-3) and within 0.5 per element of at least 1% of the largest
  // (0.09 to 0.24 seen: those are sums that cancel to a few ulps of p).
  expectAttentionKernel(attentionPrograms("2", 16, 4096, "bf16", "bf16", "bf16"), 1e-2, 0.5, 1e-2);
  expectAttentionKernel(attentionPrograms("", 24, 4096, "f32", "f32", "f32", true), 5e-3, 0.5, 1e-2);
  expectAttentionKernel(attentionPrograms("", 8, 16384, "bf16", "f32", "f32"), 5e-3, 0.5, 1e-2);
  // 6144 keys: three blocks of 2048.
  expectAttentionKernel(attentionPrograms("", 16, 6144, "bf16", "f32", "bf16"), 1e-2, 0.5, 1e-2);
  const std::string text = llo(attentionPrograms("", 8, 16384, "bf16", "f32", "f32").fused, "v5e");
  EXPECT_NE(text.find("akeys"), std::string::npos);
  // 16 key tiles per block whatever the row length: the code does not grow with it.
  auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
  EXPECT_EQ(lines(text), lines(llo(attentionPrograms("", 8, 4096, "bf16", "f32", "f32").fused, "v5e")));
}

TEST(AttentionFusion, LongRowsWithoutTheSoftmaxFormAreNotAttention) {
  // A sum of the scores themselves (no exponential of x - max) over 4096
  // keys has no online form: not the attention kernel.
  FusedAndInlined p = attentionPrograms("", 16, 4096, "bf16", "f32", "f32");
  for (std::string* t : {&p.fused, &p.inlined}) {
    size_t at = t->find("reduce(e, z)");
    ASSERT_NE(at, std::string::npos);
    t->replace(at, 12, "reduce(x, z)");
  }
  CodegenStats s = statsOf(p.fused, "v5e");
  ASSERT_GE(s.kernels.size(), 1u);
  EXPECT_NE(s.kernels[0].kind, "fusion-attention");
}

// The online kernel on v5e with `options`: one fusion-attention kernel
// within `vmem` bytes of VMEM that streams K and V in key blocks, against
// the interpreter (tolerances as in LongRowsTakeAnOnlineSoftmax).
void expectStreamedAttention(const FusedAndInlined& p, const CodegenOptions& options, uint64_t vmem) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", p.fused), diags);
  ASSERT_TRUE(loaded.module);
  auto t = target::loadTarget("v5e", diags);
  auto gen = generateLlo(*loaded.module, *t, options, diags);
  ASSERT_TRUE(gen);
  ASSERT_EQ(gen->stats.kernels.size(), 1u);
  EXPECT_EQ(gen->stats.kernels[0].kind, "fusion-attention");
  EXPECT_LE(gen->stats.kernels[0].vmemBytes, vmem);
  EXPECT_NE(gen->llo.find("akeys"), std::string::npos);
  E2eRun r = compileAndCompare(p.fused, "v5e", options);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-2) << r.where;
  EXPECT_LE(r.maxRelErr, 0.5) << r.relWhere;
  EXPECT_LE(r.normRelErr, 1e-2);
}

TEST(AttentionFusion, KeysAndValuesStreamThroughVmemInBlocks) {
  // K and V stream in key blocks, double-buffered (block g + 1 of the
  // flattened heads' keys loads while block g is computed against every
  // query block of its head), so the row length does not bound VMEM. At
  // 256 KiB (v5e / 512) a head's 4096 bf16 keys and values (2 MiB, twice
  // for two slots) did not fit; blocks of 128 keys do.
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  expectStreamedAttention(attentionPrograms("2", 16, 4096, "bf16", "f32", "f32"), small, 256 * 1024);
  expectStreamedAttention(attentionPrograms("", 8, 2560, "bf16", "f32", "bf16"), small, 256 * 1024);
  // 65536 keys at v5e's own 64 MiB budget: a head's K and V are 32 MiB, 64
  // MiB in two slots, past what the kernel took before.
  expectStreamedAttention(attentionPrograms("", 8, 65536, "bf16", "f32", "f32"), CodegenOptions{}, 8u << 20);
}

TEST(AttentionFusion, LongRowsBeyondVmemAreLeftToOtherKernels) {
  // A head's queries, output and running state stay in VMEM (beside two key
  // blocks): 1024 query rows do not fit a 256 KiB chip, so the fusion is not
  // this kernel there (and still compiles and runs).
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  FusedAndInlined p = attentionPrograms("", 1024, 4096, "bf16", "f32", "f32");
  CodegenStats s = statsOf(p.fused, small);
  ASSERT_GE(s.kernels.size(), 1u);
  for (const auto& k : s.kernels) EXPECT_NE(k.kind, "fusion-attention");
}

TEST(AttentionFusion, HeadDimensionOtherThan128IsNotAttention) {
  FusedAndInlined p = attentionPrograms("2", 64, 256, "bf16", "bf16", "bf16");
  for (std::string* t : {&p.fused, &p.inlined})
    for (size_t at = t->find(",128]"); at != std::string::npos; at = t->find(",128]", at))
      t->replace(at, 5, ",64]");
  CodegenStats s = statsOf(p.fused, "v5e");
  ASSERT_GE(s.kernels.size(), 1u);
  EXPECT_NE(s.kernels[0].kind, "fusion-attention");
}

}  // namespace attention

}  // namespace
}  // namespace tpu::codegen
