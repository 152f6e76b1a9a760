// Layout assignment on small modules (what it chooses) and on every corpus
// module and testdata program (same interpreter results, deterministic, exact .hlob round trip).
#include "passes/layout/layout_assignment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "hlo/io/hlo_io.h"
#include "hlo/verify/verifier.h"
#include "passes/testing/differential.h"
#include "passes/testing/sweep_files.h"
#include "support/file_io.h"

namespace tpu::passes::layout {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<hlo::Module> parse(const std::string& text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  EXPECT_TRUE(loaded.module);
  return std::move(loaded.module);
}

std::string assign(hlo::Module& m, LayoutOptions options, LayoutReport* report = nullptr) {
  options.report = report;
  DiagnosticEngine diags;
  EXPECT_TRUE(LayoutAssignmentPass(options).run(m, diags));
  EXPECT_EQ(diags.errorCount(), 0u);
  EXPECT_TRUE(hlo::verifyLoadedModule(m, diags));
  return hlo::writeModule(m, hlo::HloEncoding::Text);
}

const char* kTransposeAdd = R"(HloModule t
ENTRY main {
  p0 = f32[64,128] parameter(0)
  p1 = f32[128,64] parameter(1)
  t = f32[128,64] transpose(p0), dimensions={1,0}
  ROOT a = f32[128,64] add(t, p1)
})";

TEST(LayoutAssignment, ConflictBecomesOneCopy) {
  auto m = parse(kTransposeAdd);
  LayoutReport report;
  std::string text = assign(*m, {}, &report);
  EXPECT_NE(text.find("%t = f32[128,64]{0,1:T(8,128)} bitcast(%p0)"), std::string::npos) << text;
  EXPECT_EQ(report.copies, 1);
  EXPECT_EQ(report.freeTransposes, 1);
  // 32 KiB read ({0,1}: 64 -> 64 rows of 128) + 64 KiB written (64 lanes pad to 128).
  EXPECT_EQ(report.copyBytes, 32768 + 65536);
}

TEST(LayoutAssignment, AutoEntryLayoutsNeedNoCopy) {
  auto m = parse(kTransposeAdd);
  LayoutReport report;
  LayoutOptions o;
  o.entryLayouts = EntryLayouts::Auto;
  std::string text = assign(*m, o, &report);
  EXPECT_EQ(report.copies, 0) << text;
  EXPECT_EQ(report.freeTransposes, 1);
}

TEST(LayoutAssignment, CopyMovesToTheNarrowSide) {
  // The conflict is between a bf16 parameter and a dot on its f32 convert:
  // the copy is made on the bf16 value (half the bytes).
  auto m = parse(R"(HloModule c
ENTRY main {
  x = bf16[256,512]{0,1} parameter(0)
  w = f32[512,128] parameter(1)
  c = f32[256,512] convert(x)
  ROOT d = f32[256,128] dot(c, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  LayoutReport report;
  std::string text = assign(*m, {}, &report);
  ASSERT_EQ(report.copies, 1) << text;
  EXPECT_NE(text.find("bf16[256,512]{1,0:T(8,128)(2,1)} copy(%x)"), std::string::npos) << text;
  EXPECT_NE(text.find("%c = f32[256,512]{1,0:T(8,128)} convert("), std::string::npos) << text;
}

TEST(LayoutAssignment, ExpandedBitcastsKeepResults) {
  auto m = parse(kTransposeAdd);
  auto args = testing::seededArguments(*m, 1);
  DiagnosticEngine diags;
  auto before = testing::runDifferential(*m, [](hlo::Module& mod, DiagnosticEngine& d) {
    LayoutOptions o;
    return LayoutAssignmentPass(o).run(mod, d) && ExpandLayoutBitcastsPass().run(mod, d);
  });
  EXPECT_EQ(before.outcome, testing::Outcome::Same) << before.detail;
}

// ------------------------------------------------------------ corpus sweep

std::vector<std::string> sweepFiles() {
  return testing::hloFilesIn({TPU_CORPUS_DIR, TPU_SOURCE_DIR "/testdata/programs",
                              TPU_SOURCE_DIR "/testdata/models", TPU_SOURCE_DIR "/testdata/workloads"});
}

const std::set<std::string> kSlow = {
    "ext_jaxdecomp_jaxfft_2048_2x4_f32_fft.hlo",
    "ext_gh_gptneox_tp2.hlo",
    "ext_vllm_xla_gpu_m0265_after_sm80.hlo",
    "ssd_mobilenet_tf.hlo",
};

class LayoutSweep : public ::testing::TestWithParam<std::string> {};

// Interpreter results are bit-identical after layout assignment (entry
// layouts kept and chosen), and after the bitcast expansion llo-gen runs.
TEST_P(LayoutSweep, SameResultsDeterministicRoundTrip) {
  fs::path path(GetParam());
  DiagnosticEngine diags;
  std::unique_ptr<SourceFile> source = readInputFile(path.string(), diags);
  ASSERT_TRUE(source);
  hlo::LoadedModule loaded = hlo::readModule(std::shared_ptr<SourceFile>(std::move(source)), diags);
  ASSERT_TRUE(loaded.module);
  hlo::Module& m = *loaded.module;

  // Deterministic, and the laid-out module round-trips exactly through .hlob.
  {
    std::string bytes = hlo::writeModule(m, hlo::HloEncoding::Binary);
    std::string out[2];
    for (std::string& o : out) {
      auto copy = hlo::readModule(std::make_shared<SourceFile>("m.hlob", bytes), diags);
      ASSERT_TRUE(copy.module);
      LayoutAssignmentPass().run(*copy.module, diags);
      o = hlo::writeModule(*copy.module, hlo::HloEncoding::Text);
      auto back = hlo::readModule(
          std::make_shared<SourceFile>("l.hlob", hlo::writeModule(*copy.module, hlo::HloEncoding::Binary)), diags);
      ASSERT_TRUE(back.module);
      EXPECT_EQ(hlo::writeModule(*back.module, hlo::HloEncoding::Text), o);
    }
    EXPECT_TRUE(out[0] == out[1]);
  }
  if (kSlow.count(path.filename().string())) GTEST_SKIP() << "slow on the interpreter";
  for (int variant = 0; variant < 3; ++variant) {
    auto r = testing::runDifferential(m, [variant](hlo::Module& mod, DiagnosticEngine& d) {
      LayoutOptions o;
      o.entryLayouts = variant == 1 ? EntryLayouts::Auto : EntryLayouts::Keep;
      if (!LayoutAssignmentPass(o).run(mod, d) || !hlo::verifyLoadedModule(mod, d)) return false;
      if (variant == 2) ExpandLayoutBitcastsPass().run(mod, d);
      return hlo::verifyLoadedModule(mod, d);
    });
    if (r.outcome == testing::Outcome::NotEvaluable) GTEST_SKIP() << "the interpreter cannot run it: " << r.detail;
    EXPECT_EQ(r.outcome, testing::Outcome::Same) << "variant " << variant << ": " << r.detail;
  }
}

std::string testName(const ::testing::TestParamInfo<std::string>& info) {
  return testing::sweepTestName(info.param);
}

INSTANTIATE_TEST_SUITE_P(Corpus, LayoutSweep, ::testing::ValuesIn(sweepFiles()), testName);

}  // namespace
}  // namespace tpu::passes::layout
