// The simplify pipeline on every corpus module: the result verifies,
// prints and re-parses; a second run finds nothing more to do (a true
// fixed point, so no rule undoes another); two runs from the same input
// print the same text; no module grows.
#include "passes/simplify/simplify.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "hlo/io/hlo_io.h"
#include "support/file_io.h"

namespace tpu::passes::simplify {
namespace {

namespace fs = std::filesystem;

// The module keeps pointers into its source: both travel together.
hlo::LoadedModule parseText(const std::string& name, const std::string& text, std::string* messages) {
  DiagnosticEngine diags;
  diags.setConsumer([&](const Diagnostic& d) { *messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  return hlo::readModule(std::make_shared<SourceFile>(name, text), diags);
}

int64_t instructionCount(const hlo::Module& m) {
  int64_t n = 0;
  for (const auto& c : m.computations()) n += c->instructionCount();
  return n;
}

std::vector<std::string> corpusFiles() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(TPU_CORPUS_DIR))
    if (e.path().extension() == ".hlo") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Simplify, CorpusReachesAStableFixedPoint) {
  for (const std::string& path : corpusFiles()) {
    SCOPED_TRACE(path);
    DiagnosticEngine diags;
    std::unique_ptr<SourceFile> file = readInputFile(path, diags);
    ASSERT_TRUE(file);
    std::string text(file->contents());
    std::string messages;
    hlo::LoadedModule la = parseText(path, text, &messages), lb = parseText(path, text, &messages);
    ASSERT_TRUE(la.module && lb.module) << messages;
    hlo::Module* a = la.module.get();
    hlo::Module* b = lb.module.get();
    int64_t before = instructionCount(*a);
    auto pipeline = createSimplifyPipeline();
    pipeline->run(*a, diags);
    ASSERT_FALSE(diags.hasErrors());
    EXPECT_LE(pipeline->roundsRun(), 4);
    EXPECT_LE(instructionCount(*a), before);
    std::string printed = hlo::writeModule(*a, hlo::HloEncoding::Text);
    hlo::LoadedModule reparsed = parseText("printed.hlo", printed, &messages);
    ASSERT_TRUE(reparsed.module) << messages;
    auto again = createSimplifyPipeline();
    EXPECT_FALSE(again->run(*reparsed.module, diags)) << "a second run changed the module";
    createSimplifyPipeline()->run(*b, diags);
    EXPECT_EQ(printed, hlo::writeModule(*b, hlo::HloEncoding::Text)) << "two runs differ";
  }
}

// Each pass on its own leaves every corpus module valid (the pipeline's
// dce can hide a pass's leftovers; a fused computation, say, must not keep
// an unused instruction).
TEST(Simplify, EachPassAloneKeepsCorpusModulesValid) {
  std::vector<std::function<std::unique_ptr<Pass>()>> passes = {
      [] { return std::make_unique<DcePass>(); },
      [] { return std::make_unique<CsePass>(); },
      [] { return std::make_unique<AlgsimpPass>(); },
      [] { return std::make_unique<AlgsimpPass>(AlgsimpOptions{.layoutSensitive = true}); },
      [] { return std::make_unique<AlgsimpPass>(AlgsimpOptions{.valueChanging = true}); },
      [] { return std::make_unique<ConstantFoldingPass>(); },
      [] { return std::make_unique<TupleSimplifyPass>(); },
      [] { return std::make_unique<CallInlinePass>(); },
      [] { return std::make_unique<WhileSimplifyPass>(); },
      [] { return std::make_unique<ZeroElementsPass>(); },
  };
  for (const std::string& path : corpusFiles()) {
    DiagnosticEngine diags;
    std::unique_ptr<SourceFile> file = readInputFile(path, diags);
    ASSERT_TRUE(file);
    std::string text(file->contents());
    for (const auto& make : passes) {
      std::string messages;
      hlo::LoadedModule loaded = parseText(path, text, &messages);
      ASSERT_TRUE(loaded.module) << messages;
      std::unique_ptr<Pass> pass = make();
      DiagnosticEngine passDiags;
      passDiags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
      pass->run(*loaded.module, passDiags);
      EXPECT_TRUE(!passDiags.hasErrors() && hlo::verifyLoadedModule(*loaded.module, passDiags))
          << path << " after " << pass->name() << ":\n" << messages;
    }
  }
}

}  // namespace
}  // namespace tpu::passes::simplify
