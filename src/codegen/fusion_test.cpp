// Output fusions (lower_fusion.cpp): a dot with an elementwise epilogue in a
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

std::string llo(const std::string& text, const std::string& target = "v5e") {
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  if (!loaded.module) return "parse: " + messages;
  auto t = target::loadTarget(target, diags);
  CodegenOptions options;
  options.schedule = llo::ScheduleMode::None;
  auto gen = generateLlo(*loaded.module, *t, options, diags);
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
  std::string text = llo(p.fused, target);
  EXPECT_NE(text.find("// fusion-matmul: fusion %f"), std::string::npos) << text.substr(0, 2000);
  EXPECT_EQ(text.find("// elementwise:"), std::string::npos);
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

TEST(OutputFusion, OtherShapesFallBackToOneKernelPerInstruction) {
  // 60 rows are not a multiple of 8: the dot is padded, so the fusion is
  // lowered instruction by instruction, still correctly.
  FusedAndInlined p = makePrograms("  a = f32[60,128] parameter(0)\n  b = f32[128,128] parameter(1)\n",
                                   "  d = f32[60,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                   "  ROOT r = f32[60,128] exponential(d)\n",
                                   "f32[60,128]", "a, b");
  E2eRun r = compileAndCompare(p.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 0.05) << r.where;
  EXPECT_NE(llo(p.fused).find("// elementwise: exponential %r"), std::string::npos);
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

// The number of kernels `text` lowers to on v5e.
size_t kernelCount(const std::string& text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  if (!loaded.module) return 0;
  auto t = target::loadTarget("v5e", diags);
  CodegenOptions options;
  options.schedule = llo::ScheduleMode::None;
  auto gen = generateLlo(*loaded.module, *t, options, diags);
  return gen ? gen->stats.kernels.size() : 0;
}

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
  // Iotas are not streamed, so this is several kernels, but the transposed
  // iota is an iota along the other dimension (only the parameter is
  // transposed).
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
}

TEST(LoopFusion, OtherDataMovementStillLowersInstructionByInstruction) {
  // A pad (no strided view), or rows too long for three chunks of a small
  // VMEM, are lowered one kernel per instruction, still correctly.
  FusedAndInlined p = makePrograms("  x = f32[298,384] parameter(0)\n  y = f32[300,384] parameter(1)\n",
                                   "  z = f32[] constant(0)\n  v = f32[300,384] pad(x, z), padding=1_1x0_0\n"
                                   "  ROOT r = f32[300,384] add(v, y)\n",
                                   "f32[300,384]", "x, y");
  E2eRun r = compileAndCompare(p.fused);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0) << r.where;
  EXPECT_NE(llo(p.fused).find("// pad: pad %v"), std::string::npos);
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  FusedAndInlined q = makePrograms("  x = f32[512,700] parameter(0)\n  y = f32[700,512] parameter(1)\n",
                                   "  t = f32[512,700] transpose(y), dimensions={1,0}\n"
                                   "  ROOT r = f32[512,700] subtract(x, t)\n",
                                   "f32[512,700]", "x, y");
  r = compileAndCompare(q.fused, small);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0) << r.where;
  EXPECT_NE(llo(q.fused, small).find("// transpose: transpose %t"), std::string::npos);
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

}  // namespace
}  // namespace tpu::codegen
