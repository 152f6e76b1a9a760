// Layout assignment on small modules (what it chooses) and on every corpus
// module and testdata program (same interpreter results, deterministic, exact .hlob round trip;
// with llo-gen's physical edges, the same results through the converted arguments).
#include "passes/layout/layout_assignment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "hlo/verify/verifier.h"
#include "passes/clone.h"
#include "passes/layout/physical_layout.h"
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

// Models whose ops all admit one tiling (MLP, attention, layer norm and
// softmax, the conv net, the shipped TF models, a chain of transposed
// dots) get their layouts with no copy at all once the entry layouts are
// chosen too: every conflict would be a copy in the report.
TEST(LayoutAssignment, ModelsWithACommonTilingGetNoCopies) {
  std::vector<std::string> files;
  for (const char* f : {"workloads/mlp_gelu.hlo", "workloads/attention.hlo", "workloads/layernorm_softmax.hlo",
                        "workloads/convnet.hlo", "models/graphsage_tf.hlo", "models/ssd_mobilenet_tf.hlo"})
    files.push_back(std::string(TPU_SOURCE_DIR "/testdata/") + f);
  for (const std::string& f : files) {
    DiagnosticEngine diags;
    std::unique_ptr<SourceFile> source = readInputFile(f, diags);
    ASSERT_TRUE(source) << f;
    hlo::LoadedModule loaded = hlo::readModule(std::shared_ptr<SourceFile>(std::move(source)), diags);
    ASSERT_TRUE(loaded.module) << f;
    LayoutOptions o;
    o.entryLayouts = EntryLayouts::Auto;
    LayoutReport report;
    assign(*loaded.module, o, &report);
    EXPECT_EQ(report.copies, 0) << f;
  }
  auto chain = parse(R"(HloModule tdots
ENTRY main {
  x0 = f32[512,1024] parameter(0)
  w0 = f32[1024,1024] parameter(1)
  wt0 = f32[1024,1024] transpose(w0), dimensions={1,0}
  d0 = f32[512,1024] dot(x0, wt0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x1 = f32[512,1024] tanh(d0)
  w1 = f32[1024,1024] parameter(2)
  wt1 = f32[1024,1024] transpose(w1), dimensions={1,0}
  d1 = f32[512,1024] dot(x1, wt1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT x2 = f32[512,1024] tanh(d1)
})");
  LayoutOptions o;
  o.entryLayouts = EntryLayouts::Auto;
  LayoutReport report;
  assign(*chain, o, &report);
  EXPECT_EQ(report.copies, 0);
  EXPECT_EQ(report.freeTransposes, 2);
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
  // Entry layouts chosen, then llo-gen's physical edges: on arguments
  // converted to their physical layouts, the results converted back are the
  // same bits.
  {
    testing::DifferentialOptions options;
    options.extraCheck = [](const hlo::Module& laid, const std::vector<hlo::Literal>& args,
                            const hlo::Literal& expected) -> std::optional<std::string> {
      // Not covered yet: modules with donated buffers (the interpreter
      // rejects the rewritten module; llo-gen keeps their aliased leaves
      // row-major, but the others are not checked here).
      if (!laid.config().inputOutputAlias.empty()) return std::nullopt;
      std::unique_ptr<hlo::Module> p = cloneModule(laid);
      hlo::ComputationLayout edges = laid.entryComputationLayout();
      DiagnosticEngine d;
      PhysicalEdgesPass().run(*p, d);
      if (d.errorCount() || !hlo::verifyLoadedModule(*p, d)) return "physical-edges broke the module";
      std::vector<hlo::Literal> physical;
      for (size_t i = 0; i < args.size(); ++i) physical.push_back(convertEdgeLiteral(args[i], edges.parameters[i], true));
      eval::EvalOptions eo;
      auto got = eval::evaluate(*p, physical, eo, d);
      if (!got) return "the interpreter cannot run the physical-edge module";
      return testing::bitwiseDifference(expected, convertEdgeLiteral(*got, edges.result, false));
    };
    auto r = testing::runDifferential(
        m,
        [](hlo::Module& mod, DiagnosticEngine& d) {
          LayoutOptions o;
          o.entryLayouts = EntryLayouts::Auto;
          return LayoutAssignmentPass(o).run(mod, d) && hlo::verifyLoadedModule(mod, d);
        },
        options);
    if (r.outcome == testing::Outcome::NotEvaluable) GTEST_SKIP() << "the interpreter cannot run it: " << r.detail;
    EXPECT_EQ(r.outcome, testing::Outcome::Same) << "physical edges: " << r.detail;
  }
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
