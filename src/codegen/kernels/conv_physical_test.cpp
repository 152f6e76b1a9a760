// The implicit GEMM over physical-edges' tiles (kernels/conv_implicit.cpp
// reading and writing through physical bitcasts; the sinker's rule is
// passes/layout/physical_conv.cpp): compiled with and without physical
// edges, the results are the same bits and match the interpreter.
#include <gtest/gtest.h>

#include "codegen/test_util.h"
#include "passes/layout/physical_layout.h"

namespace tpu::codegen {
namespace {

// With --physical-edges, relu(conv(x, w) + b + x) over f32 activations
// stored H, W, N, C under T(8,128) (64 channels in 128 lanes; the kernel
// and the bias tiled too) runs with no relayout: the box DMA moves each
// position's 64 channels (256 bytes of a 512-byte lane row), the residual
// is staged the same way, the result written into its tiles; the results
// are the bits of row-major edges (garbage in the padding lanes would not
// change them: they are never read).
TEST(PhysicalConv, TilesReadAndWrittenInPlace) {
  const std::string text =
      R"(HloModule m, entry_computation_layout={(f32[16,6,5,64]{3,0,2,1:T(8,128)}, f32[3,3,64,64]{3,2,1,0:T(8,128)}, f32[64]{0:T(256)})->f32[16,6,5,64]{3,0,2,1:T(8,128)}}
fc {
  x = f32[16,6,5,64]{3,0,2,1:T(8,128)} parameter(0)
  w = f32[3,3,64,64]{3,2,1,0:T(8,128)} parameter(1)
  b = f32[64]{0:T(256)} parameter(2)
  c = f32[16,6,5,64]{3,0,2,1:T(8,128)} convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[16,6,5,64]{3,0,2,1:T(8,128)} broadcast(b), dimensions={3}
  s = f32[16,6,5,64]{3,0,2,1:T(8,128)} add(c, bb)
  r = f32[16,6,5,64]{3,0,2,1:T(8,128)} add(s, x)
  z = f32[] constant(0)
  zb = f32[16,6,5,64]{3,0,2,1:T(8,128)} broadcast(z), dimensions={}
  ROOT m = f32[16,6,5,64]{3,0,2,1:T(8,128)} maximum(r, zb)
}
ENTRY main {
  x = f32[16,6,5,64]{3,0,2,1:T(8,128)} parameter(0)
  w = f32[3,3,64,64]{3,2,1,0:T(8,128)} parameter(1)
  b = f32[64]{0:T(256)} parameter(2)
  ROOT f = f32[16,6,5,64]{3,0,2,1:T(8,128)} fusion(x, w, b), kind=kOutput, calls=fc
})";
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  ASSERT_TRUE(loaded.module);
  auto target = target::loadTarget("v5e", diags);
  ASSERT_TRUE(target);
  const hlo::ComputationLayout edges = loaded.module->entryComputationLayout();
  std::mt19937 rng(5);
  std::vector<hlo::Literal> args;
  for (int64_t p = 0; p < 3; ++p)
    args.push_back(randomLiteral(loaded.module->entry()->parameter(p)->shape(), rng));
  // The logical result bytes of one compile (physical: converted at the edges).
  auto run = [&](bool physical, CodegenStats& stats, std::string& llo) -> std::vector<uint8_t> {
    CodegenOptions o;
    o.physicalEdges = physical;
    o.targetSpec = "v5e";
    auto gen = generateLlo(*loaded.module, *target, o, diags);
    if (!gen) return {};
    stats = gen->stats;
    llo = gen->llo;
    auto assembled = llo::assembleLlo(SourceFile("t.llo", gen->llo), {}, diags);
    if (!assembled) return {};
    std::vector<std::string> inputs;
    for (size_t i = 0; i < args.size(); ++i) {
      hlo::Literal a =
          physical ? passes::layout::convertEdgeLiteral(args[i], edges.parameters[i], true) : args[i];
      inputs.emplace_back(reinterpret_cast<const char*>(a.data().data()), a.data().size());
    }
    auto simmed = sim::simulate(assembled->program, *target, inputs, {}, diags);
    if (!simmed || simmed->results.size() != 1) return {};
    const std::string& r = simmed->results[0];
    const auto* bytes = reinterpret_cast<const uint8_t*>(r.data());
    if (physical) return passes::layout::physicalToLogical(edges.result, bytes, r.size());
    return std::vector<uint8_t>(bytes, bytes + r.size());
  };
  CodegenStats rowStats, physStats;
  std::string rowLlo, physLlo;
  std::vector<uint8_t> rowMajor = run(false, rowStats, rowLlo), physical = run(true, physStats, physLlo);
  ASSERT_EQ(diags.errorCount(), 0u);
  ASSERT_EQ(rowMajor.size(), 16u * 6 * 5 * 64 * 4);
  EXPECT_EQ(physStats.physicalArguments, 3);
  EXPECT_EQ(physStats.physicalResults, 1);
  EXPECT_TRUE(physStats.relayouts.empty()) << physStats.relayouts.front();
  EXPECT_EQ(physStats.kernels.size(), 1u);
  EXPECT_NE(physLlo.find("icfill"), std::string::npos) << "not the implicit-GEMM kernel";
  // The box DMA: 6 rows of 5 positions, 256 bytes each, rows 40960 bytes apart.
  EXPECT_NE(physLlo.find("chunk=256 dims=[6:40960:2048, 5:8192:256]"), std::string::npos);
  EXPECT_TRUE(physical == rowMajor) << "physical edges changed the result bits";
  auto want = eval::evaluate(*loaded.module, args, {}, diags);
  ASSERT_TRUE(want);
  hlo::Literal got(want->shape());
  std::memcpy(got.mutableData().data(), physical.data(), got.data().size());
  double maxErr = 0;  // f32 operands take one bf16 pass at DEFAULT precision
  for (int64_t k = 0; k < want->elementCount(); ++k)
    maxErr = std::max(maxErr,
                      std::fabs(got.getDouble(k) - want->getDouble(k)) / (1 + std::fabs(want->getDouble(k))));
  EXPECT_LE(maxErr, 5e-2);
}

}  // namespace
}  // namespace tpu::codegen
