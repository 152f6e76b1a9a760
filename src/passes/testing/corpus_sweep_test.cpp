// The correctness sweep: every corpus module and testdata program the
// interpreter runs gives bit-identical results before and after the
// simplification pipeline, on the same seeded inputs (floats included: no
// value-changing rewrite is on by default).
//
// TPU_SWEEP_PIPELINE=<passes> runs another pipeline through the same sweep
// (e.g. the whole of hlo-fuse); TPU_SWEEP_ALL=1 includes the modules that
// are skipped by default because the interpreter needs seconds for them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "hlo/io/hlo_io.h"
#include "passes/testing/differential.h"
#include "passes/testing/sweep_files.h"
#include "support/file_io.h"

namespace tpu::passes::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> sweepFiles() {
  return testing::hloFilesIn(
      {TPU_CORPUS_DIR, TPU_SOURCE_DIR "/testdata/programs", TPU_SOURCE_DIR "/testdata/models"});
}

// Modules the interpreter cannot run (custom calls it does not know,
// 4 GiB per device) or needs several seconds for: run with TPU_SWEEP_ALL=1.
const std::set<std::string> kSlow = {
    "ext_jaxdecomp_jaxfft_2048_2x4_f32_fft.hlo",  // 4 GiB per partition
    "ext_gh_gptneox_tp2.hlo",                     // 6 s per evaluation
    "ext_vllm_xla_gpu_m0265_after_sm80.hlo",      // 2.6 s
};

std::string pipelineUnderTest() {
  const char* p = std::getenv("TPU_SWEEP_PIPELINE");
  return p && *p ? p : "simplify";
}

class CorpusSweep : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusSweep, SameResultsAfterPipeline) {
  fs::path path(GetParam());
  const char* all = std::getenv("TPU_SWEEP_ALL");
  if (kSlow.count(path.filename().string()) && !(all && std::string(all) == "1"))
    GTEST_SKIP() << "slow on the interpreter; TPU_SWEEP_ALL=1 runs it";
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  std::unique_ptr<SourceFile> source = readInputFile(path.string(), diags);
  ASSERT_TRUE(source) << messages;
  hlo::LoadedModule loaded = hlo::readModule(std::shared_ptr<SourceFile>(std::move(source)), diags);
  ASSERT_TRUE(loaded.module) << messages;
  DifferentialResult r = runDifferential(*loaded.module, namedPipeline(pipelineUnderTest()));
  if (r.outcome == Outcome::NotEvaluable) GTEST_SKIP() << "the interpreter cannot run it: " << r.detail;
  EXPECT_EQ(r.outcome, Outcome::Same) << r.detail;
  EXPECT_LE(r.instructionsAfter, r.instructionsBefore);
  RecordProperty("instructions_before", static_cast<int>(r.instructionsBefore));
  RecordProperty("instructions_after", static_cast<int>(r.instructionsAfter));
}

std::string testName(const ::testing::TestParamInfo<std::string>& info) {
  return testing::sweepTestName(info.param);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusSweep, ::testing::ValuesIn(sweepFiles()), testName);

}  // namespace
}  // namespace tpu::passes::testing
