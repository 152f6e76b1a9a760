// hlo-fuse must not change a single bit: every corpus module and testdata
// program the interpreter can run gives bit-identical results before and
// after the default pipeline (same seeded inputs), and verifies after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/pipeline.h"
#include "runner/run.h"
#include "support/file_io.h"

namespace tpu::fusion {
namespace {

std::vector<std::string> sweepFiles() {
  std::vector<std::string> files;
  for (const char* dir : {TPU_CORPUS_DIR, TPU_SOURCE_DIR "/testdata/programs", TPU_SOURCE_DIR "/testdata/models"}) {
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".hlo") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::optional<hlo::Literal> interpret(const hlo::Module& m, const std::vector<hlo::Literal>& args) {
  DiagnosticEngine quiet;
  eval::EvalOptions options;
  options.rngSeed = 1;
  return eval::evaluate(m, args, options, quiet);
}

TEST(FusionCorpus, InterpreterResultsAreBitIdenticalAfterTheDefaultPipeline) {
  DiagnosticEngine targetDiags;
  auto target = target::loadTarget("v5e", targetDiags);
  ASSERT_TRUE(target);
  int checked = 0, fusedModules = 0;
  for (const std::string& path : sweepFiles()) {
    SCOPED_TRACE(path);
    DiagnosticEngine diags;
    auto source = readInputFile(path, diags);
    ASSERT_TRUE(source) << path;
    auto loaded = hlo::readModule(std::shared_ptr<SourceFile>(std::move(source)), diags);
    ASSERT_TRUE(loaded.module) << firstErrorMessage(diags);
    const hlo::Module& original = *loaded.module;
    std::unique_ptr<hlo::Module> fused = passes::cloneModule(original);
    DiagnosticEngine passDiags;
    ASSERT_TRUE(optimizeModule(*fused, *target, passDiags, /*verifyEach=*/true)) << firstErrorMessage(passDiags);
    std::string difference;
    fusedModules += !hlo::structurallyEqual(original, *fused, &difference);
    runner::RunOptions ro;
    ro.seed = 1;
    DiagnosticEngine argDiags;
    auto args = runner::prepareArguments(original, ro, argDiags);
    ASSERT_TRUE(args);
    // Modules with collectives, elided constants or opaque custom calls
    // the interpreter cannot run are checked for verification only, and so
    // are those with more than 128 MiB of parameters and results (the
    // interpreter would take seconds), except the fusion benchmark's module.
    if (original.config().replicaCount > 1 || original.config().numPartitions > 1) continue;
    double bytes = shapeBytes(original.entry()->root()->shape());
    for (const hlo::Literal& a : *args) bytes += static_cast<double>(a.data().size());
    if (bytes > 128.0 * 1024 * 1024 && path.find("m0012_before") == std::string::npos) continue;
    std::optional<hlo::Literal> before = interpret(original, *args);
    if (!before) continue;
    std::optional<hlo::Literal> after = interpret(*fused, *args);
    ASSERT_TRUE(after);
    EXPECT_TRUE(*before == *after) << "fusion changed the results";
    ++checked;
  }
  // The sweep must not quietly skip everything.
  EXPECT_GE(checked, 40);
  EXPECT_GE(fusedModules, 20);
}

}  // namespace
}  // namespace tpu::fusion
