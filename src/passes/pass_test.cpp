// PassPipeline's fixed point and the PassManager's --verify-each.
#include "passes/pass.h"

#include <gtest/gtest.h>

#include "passes/test_util.h"

namespace tpu::passes {
namespace {

constexpr const char* kModule =
    "HloModule m\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"
    "  ROOT %n = f32[4]{0} negate(%x)\n}\n";

// Reports a change for its first `changes` runs.
class CountingPass : public Pass {
 public:
  CountingPass(int changes, int* runs) : changes_(changes), runs_(runs) {}
  std::string_view name() const override { return "counting"; }
  bool run(hlo::Module&, DiagnosticEngine&) override { return ++*runs_ <= changes_; }

 private:
  int changes_;
  int* runs_;
};

// Leaves a root whose shape its operand does not give.
class BreakingPass : public Pass {
 public:
  std::string_view name() const override { return "breaker"; }
  bool run(hlo::Module& m, DiagnosticEngine&) override {
    m.entry()->root()->setShape(hlo::Shape::array(hlo::ElementType::F32, {5}).withDefaultLayout());
    return true;
  }
};

PassManager::Verifier verifier() {
  return [](const hlo::Module& m, DiagnosticEngine& d) { return hlo::verifyLoadedModule(m, d); };
}

TEST(PassPipeline, RunsToAFixedPoint) {
  ParsedModule p = parseModule(kModule);
  ASSERT_TRUE(p.module) << p.messages;
  int runs = 0;
  PassPipeline pipeline("fixed", 10);
  pipeline.add(std::make_unique<CountingPass>(3, &runs));
  DiagnosticEngine diags;
  EXPECT_TRUE(pipeline.run(*p.module, diags));
  EXPECT_EQ(runs, 4);  // three changing rounds, one quiet one
  EXPECT_EQ(pipeline.roundsRun(), 4);
}

TEST(PassPipeline, StopsAtItsCap) {
  ParsedModule p = parseModule(kModule);
  int runs = 0;
  PassPipeline pipeline("capped", 2);
  pipeline.add(std::make_unique<CountingPass>(100, &runs));
  DiagnosticEngine diags;
  pipeline.run(*p.module, diags);
  EXPECT_EQ(runs, 2);
}

TEST(PassManager, VerifyEachNamesTheMemberThatBrokeTheIr) {
  ParsedModule p = parseModule(kModule);
  std::string messages;
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
  int runs = 0;
  auto pipeline = std::make_unique<PassPipeline>("outer", 4);
  pipeline->add(std::make_unique<CountingPass>(0, &runs));
  pipeline->add(std::make_unique<BreakingPass>());
  pipeline->add(std::make_unique<CountingPass>(0, &runs));
  PassManagerOptions options;
  options.verifyEach = true;
  PassManager pm(options, nullptr, verifier());
  pm.add(std::move(pipeline));
  EXPECT_FALSE(pm.run(*p.module, diags));
  EXPECT_NE(messages.find("module does not verify after pass 'breaker'"), std::string::npos) << messages;
  EXPECT_EQ(runs, 1);  // stopped right after the breaking member
}

TEST(PassManager, VerifyEachReachesNestedPipelines) {
  ParsedModule p = parseModule(kModule);
  std::string messages;
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
  auto inner = std::make_unique<PassPipeline>("inner", 2);
  inner->add(std::make_unique<BreakingPass>());
  auto outer = std::make_unique<PassPipeline>("outer", 2);
  outer->add(std::move(inner));
  PassManagerOptions options;
  options.verifyEach = true;
  PassManager pm(options, nullptr, verifier());
  pm.add(std::move(outer));
  EXPECT_FALSE(pm.run(*p.module, diags));
  EXPECT_NE(messages.find("module does not verify after pass 'breaker'"), std::string::npos) << messages;
}

TEST(PassManager, WithoutVerifyEachThePipelineIsVerifiedAtItsEnd) {
  ParsedModule p = parseModule(kModule);
  std::string messages;
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
  auto pipeline = std::make_unique<PassPipeline>("outer", 1);
  pipeline->add(std::make_unique<BreakingPass>());
  PassManager pm({}, nullptr, verifier());
  pm.add(std::move(pipeline));
  EXPECT_FALSE(pm.run(*p.module, diags));
  EXPECT_NE(messages.find("module does not verify after pass 'outer'"), std::string::npos) << messages;
}

TEST(PassManager, ByDefaultVerifiesOnceAfterTheLastPass) {
  ParsedModule p = parseModule(kModule);
  std::string messages;
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
  int runs = 0;
  PassManager pm({}, nullptr, verifier());
  pm.add(std::make_unique<BreakingPass>());
  pm.add(std::make_unique<CountingPass>(0, &runs));
  EXPECT_FALSE(pm.run(*p.module, diags));
  EXPECT_EQ(runs, 1);  // the pass after the breaking one ran: nothing verified between them
  EXPECT_NE(messages.find("module does not verify after the 2 passes ending with 'counting' (--verify-each verifies "
                          "after each and names the one that broke it)"),
            std::string::npos)
      << messages;
}

TEST(PassManager, VerifyAfterEachNamesTheTopLevelPass) {
  ParsedModule p = parseModule(kModule);
  std::string messages;
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
  int runs = 0;
  PassManagerOptions options;
  options.verifyAfterEach = true;
  PassManager pm(options, nullptr, verifier());
  pm.add(std::make_unique<BreakingPass>());
  pm.add(std::make_unique<CountingPass>(0, &runs));
  EXPECT_FALSE(pm.run(*p.module, diags));
  EXPECT_EQ(runs, 0);
  EXPECT_NE(messages.find("module does not verify after pass 'breaker'"), std::string::npos) << messages;
}

TEST(PassManager, TimingReportSumsRunsOfOnePass) {
  ParsedModule p = parseModule(kModule);
  int runs = 0;
  auto pipeline = std::make_unique<PassPipeline>("outer", 5);
  pipeline->add(std::make_unique<CountingPass>(2, &runs));
  PassManager pm({}, nullptr, verifier());
  pm.add(std::move(pipeline));
  DiagnosticEngine diags;
  EXPECT_TRUE(pm.run(*p.module, diags));
  std::string report = pm.timingReport();
  EXPECT_NE(report.find("counting (3 runs)"), std::string::npos) << report;
}

}  // namespace
}  // namespace tpu::passes
