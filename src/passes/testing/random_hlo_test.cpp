// The random-program differential test: generated modules are valid, and
// the simplification pipeline leaves their results bit-identical on the
// interpreter while removing work.
#include "passes/testing/random_hlo.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "hlo/io/hlo_io.h"
#include "passes/driver/registry.h"
#include "passes/pass.h"
#include "passes/testing/differential.h"

namespace tpu::passes::testing {
namespace {

// The module keeps pointers into its source: both travel together.
hlo::LoadedModule parse(const std::string& text, std::string* messages) {
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { *messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  return hlo::readModule(std::make_shared<SourceFile>("random.hlo", text), diags);
}

TEST(RandomHlo, SameSeedSameText) {
  EXPECT_EQ(generateRandomHlo(7), generateRandomHlo(7));
  EXPECT_NE(generateRandomHlo(7), generateRandomHlo(8));
}

TEST(RandomHlo, ModulesParseAndVerify) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::string messages;
    std::string text = generateRandomHlo(seed);
    ASSERT_TRUE(parse(text, &messages).module) << "seed " << seed << ":\n" << messages << "\n" << text;
  }
}

DifferentialOptions seeded(uint64_t seed) {
  DifferentialOptions options;
  options.seed = seed;
  return options;
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// CI's bounded differential run: every seed must give bit-identical
// results, and the pipeline must find work in most modules (the planted
// patterns), which shows the test exercises the rewrites. Longer runs:
// TPU_RANDOM_SEEDS=N (default 150), TPU_RANDOM_SIZE=instructions (60),
// TPU_SWEEP_PIPELINE=passes (simplify).
TEST(RandomHlo, SimplifyKeepsResults) {
  const char* pipeline = std::getenv("TPU_SWEEP_PIPELINE");
  Pipeline simplify = namedPipeline(pipeline && *pipeline ? pipeline : "simplify");
  RandomHloOptions options;
  options.instructions = envInt("TPU_RANDOM_SIZE", options.instructions);
  int shrunk = 0, evaluated = 0;
  const int kSeeds = envInt("TPU_RANDOM_SEEDS", 150);
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(kSeeds); ++seed) {
    std::string messages;
    std::string text = generateRandomHlo(seed, options);
    hlo::LoadedModule loaded = parse(text, &messages);
    ASSERT_TRUE(loaded.module) << messages;
    DifferentialResult r = runDifferential(*loaded.module, simplify, seeded(seed));
    ASSERT_NE(r.outcome, Outcome::PipelineFailed) << "seed " << seed << ": " << r.detail << "\n" << text;
    if (r.outcome == Outcome::NotEvaluable) continue;
    ++evaluated;
    EXPECT_EQ(r.outcome, Outcome::Same) << "seed " << seed << ": " << r.detail << "\n" << text;
    if (r.instructionsAfter < r.instructionsBefore) ++shrunk;
  }
  EXPECT_EQ(evaluated, kSeeds);
  EXPECT_GT(shrunk, kSeeds * 9 / 10);
}

// The pipeline reaches a true fixed point: a second run finds nothing,
// so no rule undoes another or leaves instructions behind.
TEST(RandomHlo, SimplifyReachesAFixedPoint) {
  RandomHloOptions options;
  options.instructions = 200;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    std::string messages;
    hlo::LoadedModule loaded = parse(generateRandomHlo(seed, options), &messages);
    ASSERT_TRUE(loaded.module) << messages;
    DiagnosticEngine diags;
    ASSERT_TRUE(namedPipeline("simplify")(*loaded.module, diags));
    std::unique_ptr<Pass> again = PassRegistry::global().find("simplify")->create();
    EXPECT_FALSE(again->run(*loaded.module, diags)) << "seed " << seed << ": a second run changed the module";
  }
}

// The same run through the value-changing rewrites (x*0 -> 0 gives +0
// where x*0 is -0) must see differences: the test can fail.
TEST(RandomHlo, ValueChangingRewritesAreCaught) {
  Pipeline unsafe = namedPipeline("algsimp-unsafe,simplify");
  int different = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::string messages;
    hlo::LoadedModule loaded = parse(generateRandomHlo(seed), &messages);
    ASSERT_TRUE(loaded.module) << messages;
    if (runDifferential(*loaded.module, unsafe, seeded(seed)).outcome == Outcome::Different) ++different;
  }
  EXPECT_GT(different, 0);
}

// The comparison catches a wrong rewrite: a pipeline that turns adds into
// subtracts is reported with the first differing element.
TEST(Differential, DetectsAWrongPipeline) {
  std::string messages;
  hlo::LoadedModule loaded = parse(
      "HloModule m\nENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"
      "  %y = f32[4]{0} parameter(1)\n  ROOT %a = f32[4]{0} add(%x, %y)\n}\n",
      &messages);
  ASSERT_TRUE(loaded.module) << messages;
  Pipeline wrong = [](hlo::Module& m, DiagnosticEngine&) {
    for (const auto& c : m.computations())
      for (const auto& in : c->instructions())
        if (in->opcode() == hlo::Opcode::Add) in->setOpcode(hlo::Opcode::Subtract);
    return true;
  };
  DifferentialResult r = runDifferential(*loaded.module, wrong);
  EXPECT_EQ(r.outcome, Outcome::Different);
  EXPECT_NE(r.detail.find("element 0"), std::string::npos) << r.detail;
}

// The extra check (the hook compiled code will use) sees the transformed
// module and the reference result, and its verdict counts.
TEST(Differential, RunsTheExtraCheck) {
  std::string messages;
  hlo::LoadedModule loaded = parse(
      "HloModule m\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"
      "  ROOT %n = f32[4]{0} negate(%x)\n}\n",
      &messages);
  ASSERT_TRUE(loaded.module) << messages;
  int calls = 0;
  DifferentialOptions options;
  options.extraCheck = [&](const hlo::Module& m, const std::vector<hlo::Literal>& args,
                           const hlo::Literal& expected) -> std::optional<std::string> {
    ++calls;
    EXPECT_EQ(args.size(), 1u);
    EXPECT_EQ(m.entry()->root()->opcode(), hlo::Opcode::Negate);
    if (expected.elementCount() != 4) return "wrong reference";
    return "the compiled result differs";
  };
  DifferentialResult r = runDifferential(*loaded.module, namedPipeline("dce"), options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.outcome, Outcome::Different);
  EXPECT_EQ(r.detail, "the compiled result differs");
}

// A pipeline that leaves an invalid module is a failure, not a result.
TEST(Differential, ReportsABrokenModule) {
  std::string messages;
  hlo::LoadedModule loaded = parse(
      "HloModule m\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"
      "  ROOT %n = f32[4]{0} negate(%x)\n}\n",
      &messages);
  ASSERT_TRUE(loaded.module) << messages;
  Pipeline breaks = [](hlo::Module& m, DiagnosticEngine&) {
    m.entry()->root()->setShape(hlo::Shape::array(hlo::ElementType::F32, {5}).withDefaultLayout());
    return true;
  };
  DifferentialResult r = runDifferential(*loaded.module, breaks);
  EXPECT_EQ(r.outcome, Outcome::PipelineFailed);
}

TEST(Differential, NanMatchesNanOnly) {
  hlo::Literal a(hlo::Shape::array(hlo::ElementType::F32, {2}));
  hlo::Literal b = a;
  a.setDouble(0, std::nan(""));
  b.setDouble(0, -std::nan(""));
  EXPECT_FALSE(bitwiseDifference(a, b));
  b.setDouble(1, -0.0);
  EXPECT_TRUE(bitwiseDifference(a, b));  // +0 and -0 differ
}

}  // namespace
}  // namespace tpu::passes::testing
