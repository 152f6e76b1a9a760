// Random programs through hlo-fuse's whole default pipeline (simplify, then
// fusion), checked twice: on the interpreter before and after
// (bit-identical: the pipeline has no value-changing rewrite), and compiled
// after against compiled as given (-O0), bit for bit: fused kernels compute
// every element exactly as the unfused ones do. This is the "compiled after"
// leg of the differential test (issue 12, point 7). How compiled code
// compares with the interpreter (bf16 passes for f32 dots, bounded
// transcendental errors) is the coverage tests' business, not this one's.
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen/test_util.h"
#include "hlo/io/hlo_io.h"
#include "passes/fusion/pipeline.h"
#include "passes/testing/differential.h"
#include "passes/testing/random_hlo.h"

namespace tpu::fusion {
namespace {

using passes::testing::DifferentialOptions;
using passes::testing::DifferentialResult;
using passes::testing::Outcome;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// TPU_RANDOM_SEEDS=N (default 60) for longer runs (checked with 400).
TEST(FusionRandom, DefaultPipelineKeepsInterpretedAndCompiledResults) {
  DiagnosticEngine targetDiags;
  auto target = target::loadTarget("v5e", targetDiags);
  ASSERT_TRUE(target);
  passes::testing::Pipeline pipeline = [&](hlo::Module& m, DiagnosticEngine& diags) {
    return optimizeModule(m, *target, diags, /*verifyEach=*/true);
  };
  const int kSeeds = envInt("TPU_RANDOM_SEEDS", 60);
  int compiled = 0, fused = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    std::string text = passes::testing::generateRandomHlo(static_cast<uint64_t>(seed));
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("random.hlo", text), diags);
    ASSERT_TRUE(loaded.module);
    DifferentialOptions options;
    options.seed = static_cast<uint64_t>(seed);
    options.extraCheck = [&](const hlo::Module& optimized, const std::vector<hlo::Literal>& args,
                             const hlo::Literal&) -> std::optional<std::string> {
      for (const auto& c : optimized.computations())
        for (const auto& in : c->instructions()) fused += in->opcode() == hlo::Opcode::Fusion;
      auto argument = [&](size_t i, const hlo::Shape&) { return args[i]; };
      codegen::PipelineRun run = codegen::runPipeline(hlo::writeModule(optimized, hlo::HloEncoding::Text), argument,
                                                      "v5e", {}, 1);
      if (!run.error.empty()) return "compiled: " + run.error;
      codegen::PipelineRun plain = codegen::runPipeline(text, argument, "v5e", {}, 1);
      if (!plain.error.empty()) return "compiled as given: " + plain.error;
      ++compiled;
      if (run.got.size() != plain.got.size()) return std::string("result counts differ from -O0");
      for (size_t r = 0; r < run.got.size(); ++r)
        if (run.got[r] != plain.got[r]) return fmt::format("compiled result {} differs from -O0", r);
      return std::nullopt;
    };
    DifferentialResult result = passes::testing::runDifferential(*loaded.module, pipeline, options);
    if (result.outcome == Outcome::NotEvaluable) continue;
    EXPECT_EQ(result.outcome, Outcome::Same) << result.detail << "\n" << text;
  }
  // Most random programs run on both, and the pipeline fuses in them.
  EXPECT_GE(compiled, kSeeds * 3 / 4);
  EXPECT_GT(fused, kSeeds);
}

}  // namespace
}  // namespace tpu::fusion
