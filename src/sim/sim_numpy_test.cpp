// The example kernels against numpy (inputs and expected outputs written by
// testdata/sim/make_expected.py into the build folder), and the .llo
// examples of testdata/llo run through the tpu-run adapter.
#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>

#include <filesystem>

#include "sim/kernels.h"
#include "sim/run_program.h"
#include "sim/sim.h"
#include "sim/test_util.h"
#include "support/file_io.h"
#include "support/npy.h"

namespace tpu::sim {
namespace {

using namespace testing;

class SimNumpy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // CTest runs each test in its own process, possibly in parallel: one
    // fixture directory per process, so no test reads another's half-written file.
    dir_ = std::string(TPU_SIM_TEST_TMP) + "/numpy-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    std::string cmd = std::string(TPU_PYTHON) + " " + TPU_SOURCE_DIR + "/testdata/sim/make_expected.py " + dir_;
    ok_ = std::system(cmd.c_str()) == 0;
  }
  static NpyArray load(const std::string& name) {
    DiagnosticEngine diags;
    auto file = readInputFile(dir_ + "/" + name, diags);
    EXPECT_TRUE(file) << firstErrorMessage(diags);
    file->setBinary(true);
    auto a = readNpy(*file, diags);
    EXPECT_TRUE(a) << firstErrorMessage(diags);
    return a ? *a : NpyArray{};
  }
  static std::vector<std::string> run(const isa::Program& p, const std::vector<std::string>& in) {
    DiagnosticEngine diags;
    auto r = simulate(p, loadBuiltin("v5e"), in, SimOptions{}, diags);
    EXPECT_TRUE(r) << firstErrorMessage(diags);
    return r ? r->results : std::vector<std::string>{};
  }
  // |got - want| <= atol + rtol * |want| for every element.
  static void expectClose(const std::string& got, const NpyArray& want, double atol, double rtol) {
    auto g = fromBytes<float>(got), w = fromBytes<float>(want.data);
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_LE(std::fabs(g[i] - w[i]), atol + rtol * std::fabs(w[i])) << "element " << i << ": " << g[i] << " vs " << w[i];
  }
  static inline std::string dir_;
  static inline bool ok_ = false;
};

TEST_F(SimNumpy, Matmul) {
  ASSERT_TRUE(ok_);
  auto a = load("matmul_a.npy"), b = load("matmul_b.npy"), c = load("matmul_c.npy");
  auto out = run(kernels::matmulBf16(loadBuiltin("v5e"), 128, 1024, 512), {a.data, b.data});
  ASSERT_EQ(out.size(), 1u);
  // f32 accumulation over K=512 of products in [-1, 1] vs an f64 reference.
  expectClose(out[0], c, 1e-4, 1e-4);
}

TEST_F(SimNumpy, Elementwise) {
  ASSERT_TRUE(ok_);
  auto out = run(kernels::elementwise(loadBuiltin("v5e"), 3 * 8192), {load("ew_a.npy").data, load("ew_b.npy").data});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], load("ew_out.npy"), 0, 0);  // same f32 operations: exact
}

TEST_F(SimNumpy, RowSum) {
  ASSERT_TRUE(ok_);
  auto out = run(kernels::rowSum(loadBuiltin("v5e"), 40, 640), {load("rowsum_x.npy").data});
  ASSERT_EQ(out.size(), 1u);
  // Different summation orders (numpy pairwise, ours blocked + tree).
  expectClose(out[0], load("rowsum_out.npy"), 1e-4, 1e-5);
}

TEST_F(SimNumpy, Transpose) {
  ASSERT_TRUE(ok_);
  auto out = run(kernels::transpose(loadBuiltin("v5e"), 256, 384), {load("xpose_x.npy").data});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], load("xpose_y.npy"), 0, 0);
}

// The ISA engineer's .llo examples through the tpu-run adapter.
std::optional<RunOutput> runLlo(const std::string& path, const std::vector<std::string>& inputs,
                                DiagnosticEngine& diags, RunRequest req = {}) {
  auto file = readInputFile(path, diags);
  if (!file) return std::nullopt;
  auto loaded = loadProgram(*file, "", diags);
  if (!loaded) return std::nullopt;
  auto sig = entrySignature(loaded->program, req.entry, diags);
  if (!sig) return std::nullopt;
  return runLoadedProgram(*loaded, inputs, req, diags);
}

TEST(SimLlo, AddExample) {
  std::string path = std::string(TPU_SOURCE_DIR) + "/testdata/llo/add.llo";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto x = randomFloats(64 * 128, 1), y = randomFloats(64 * 128, 2);
  DiagnosticEngine diags;
  RunRequest req;
  req.stats = "json";
  auto r = runLlo(path, {toBytes(x), toBytes(y)}, diags, req);
  ASSERT_TRUE(r) << firstErrorMessage(diags);
  auto z = fromBytes<float>(r->results[0]);
  for (size_t i = 0; i < z.size(); ++i) ASSERT_EQ(z[i], x[i] + y[i]);
  EXPECT_NE(r->statsText.find("\"cycles\""), std::string::npos);
}

TEST(SimLlo, CopyExample) {
  std::string path = std::string(TPU_SOURCE_DIR) + "/testdata/llo/copy.llo";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto x = randomFloats(1024 * 128, 3);
  DiagnosticEngine diags;
  auto r = runLlo(path, {toBytes(x)}, diags);
  ASSERT_TRUE(r) << firstErrorMessage(diags);
  EXPECT_EQ(r->results[0], toBytes(x));
}

TEST(SimLlo, MatmulExample) {
  std::string path = std::string(TPU_SOURCE_DIR) + "/testdata/llo/matmul.llo";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const int64_t M = 128, N = 128, K = 256;
  auto a = randomBf16(M * K, 4), b = randomBf16(K * N, 5);
  DiagnosticEngine diags;
  auto r = runLlo(path, {toBytes(a), toBytes(b)}, diags);
  ASSERT_TRUE(r) << firstErrorMessage(diags);
  auto c = fromBytes<float>(r->results[0]);
  auto e = referenceMatmulBf16(a, b, M, N, K);
  ASSERT_EQ(c.size(), e.size());
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], e[i], 1e-5f + 1e-5f * std::fabs(e[i])) << i;
}

TEST(SimLlo, MissingEntryAndWrongTarget) {
  std::string path = std::string(TPU_SOURCE_DIR) + "/testdata/llo/add.llo";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  DiagnosticEngine diags;
  auto file = readInputFile(path, diags);
  ASSERT_TRUE(file);
  auto loaded = loadProgram(*file, "", diags);
  ASSERT_TRUE(loaded) << firstErrorMessage(diags);
  EXPECT_FALSE(entrySignature(loaded->program, "nope", diags));
  EXPECT_EQ(firstErrorMessage(diags), "the program has no entry 'nope'");
}

}  // namespace
}  // namespace tpu::sim

namespace tpu::sim {
namespace {

// testdata/sim/*.llo are the generators' programs printed as LLO: they must
// assemble to exactly the generated programs and run through the adapter.
TEST(SimLlo, TestdataSimKernelsMatchGenerators) {
  auto t = testing::loadBuiltin("v5e");
  struct Case {
    const char* file;
    isa::Program program;
  };
  std::vector<Case> cases;
  cases.push_back({"matmul_bf16_64x512x512.llo", kernels::matmulBf16(t, 64, 512, 512)});
  cases.push_back({"elementwise_16384.llo", kernels::elementwise(t, 16384)});
  cases.push_back({"rowsum_16x256.llo", kernels::rowSum(t, 16, 256)});
  cases.push_back({"transpose_128x256.llo", kernels::transpose(t, 128, 256)});
  cases.push_back({"copy_256k.llo", kernels::streamingCopy(t, 256 << 10, 32 << 10, 4)});
  for (const Case& c : cases) {
    DiagnosticEngine diags;
    auto file = readInputFile(std::string(TPU_SOURCE_DIR) + "/testdata/sim/" + c.file, diags);
    ASSERT_TRUE(file) << firstErrorMessage(diags);
    auto loaded = loadProgram(*file, "", diags);
    ASSERT_TRUE(loaded) << c.file << ": " << firstErrorMessage(diags);
    EXPECT_TRUE(loaded->program.bundles == c.program.bundles) << c.file << " differs from its generator";
  }
  // And one runs end to end through the adapter.
  DiagnosticEngine diags;
  auto file = readInputFile(std::string(TPU_SOURCE_DIR) + "/testdata/sim/matmul_bf16_64x512x512.llo", diags);
  ASSERT_TRUE(file);
  auto loaded = loadProgram(*file, "v5e", diags);
  ASSERT_TRUE(loaded) << firstErrorMessage(diags);
  auto a = testing::randomBf16(64 * 512, 8), b = testing::randomBf16(512 * 512, 9);
  RunRequest req;
  req.trace = true;
  req.stats = "text";
  auto r = runLoadedProgram(*loaded, {testing::toBytes(a), testing::toBytes(b)}, req, diags);
  ASSERT_TRUE(r) << firstErrorMessage(diags);
  EXPECT_EQ(testing::fromBytes<float>(r->results[0]), testing::referenceMatmulBf16(a, b, 64, 512, 512));
  EXPECT_NE(r->traceJson.find("traceEvents"), std::string::npos);
  EXPECT_NE(r->statsText.find("MXU"), std::string::npos);
}

}  // namespace
}  // namespace tpu::sim
