// The example kernels at small sizes: results against exact C++ references
// (the simulator's documented arithmetic order) and timing sanity.
#include <gtest/gtest.h>

#include "sim/kernels.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace testing;

std::optional<SimResult> run(const isa::Program& p, const target::TargetDesc& t, const std::vector<std::string>& in,
                             SimOptions opts = {}) {
  DiagnosticEngine diags;
  auto r = simulate(p, t, in, opts, diags);
  EXPECT_TRUE(r.has_value()) << firstErrorMessage(diags);
  return r;
}

TEST(SimKernels, StreamingCopy) {
  auto t = loadBuiltin("v5e");
  const uint64_t bytes = 1 << 20;
  isa::Program p = kernels::streamingCopy(t, bytes, 64 << 10, 4);
  std::vector<uint8_t> x(bytes);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
  auto r = run(p, t, {toBytes(x)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->results[0], toBytes(x));
  EXPECT_EQ(r->report.hbmBytesRead, bytes);
  EXPECT_EQ(r->report.hbmBytesWritten, bytes);
  EXPECT_LE(r->report.hbmUtilization, 1.0);
}

TEST(SimKernels, Elementwise) {
  auto t = loadBuiltin("v5e");
  const int64_t n = 8192 * 3;
  auto a = randomFloats(n, 1), b = randomFloats(n, 2);
  auto r = run(kernels::elementwise(t, n), t, {toBytes(a), toBytes(b)});
  ASSERT_TRUE(r);
  auto out = fromBytes<float>(r->results[0]);
  for (int64_t i = 0; i < n; ++i) {
    float e = a[i] * b[i];
    e = e + a[i];
    e = e > 0.0f ? e : 0.0f;
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]) & 0x7FFFFFFFu, std::bit_cast<uint32_t>(e) & 0x7FFFFFFFu) << i;
  }
}

TEST(SimKernels, RowSum) {
  auto t = loadBuiltin("v5e");
  const int64_t rows = 24, cols = 384;
  auto x = randomFloats(rows * cols, 3);
  auto r = run(kernels::rowSum(t, rows, cols), t, {toBytes(x)});
  ASSERT_TRUE(r);
  auto out = fromBytes<float>(r->results[0]);
  for (int64_t i = 0; i < rows; ++i) {
    float lanes[128];
    for (int l = 0; l < 128; ++l) {
      float s = x[i * cols + l];
      for (int64_t c = 1; c < cols / 128; ++c) s += x[i * cols + c * 128 + l];
      lanes[l] = s;
    }
    for (int w = 64; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    ASSERT_EQ(out[i], lanes[0]) << i;
  }
}

TEST(SimKernels, Transpose) {
  auto t = loadBuiltin("v5e");
  const int64_t rows = 256, cols = 384;
  auto x = randomFloats(rows * cols, 4);
  auto r = run(kernels::transpose(t, rows, cols), t, {toBytes(x)});
  ASSERT_TRUE(r);
  auto y = fromBytes<float>(r->results[0]);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(y[j * rows + i], x[i * cols + j]) << i << "," << j;
}

void checkMatmul(const std::string& targetName, int64_t m, int64_t n, int64_t k) {
  auto t = loadBuiltin(targetName);
  auto a = randomBf16(m * k, 5), b = randomBf16(k * n, 6);
  auto r = run(kernels::matmulBf16(t, m, n, k), t, {toBytes(a), toBytes(b)});
  ASSERT_TRUE(r);
  auto c = fromBytes<float>(r->results[0]);
  auto e = referenceMatmulBf16(a, b, m, n, k);
  for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(c[i], e[i]) << "element " << i;
  EXPECT_DOUBLE_EQ(r->report.flops, 2.0 * m * n * k);
  EXPECT_LE(r->report.achievedFlops, r->report.peakFlops * (1 + 1e-12));
}

TEST(SimKernels, MatmulOneTile) { checkMatmul("v5e", 64, 512, 512); }
TEST(SimKernels, MatmulManyTiles) { checkMatmul("v5e", 192, 1024, 768); }
TEST(SimKernels, MatmulWholePanelPrefetch) { checkMatmul("v5e", 128, 1024, 1024); }
TEST(SimKernels, MatmulV4) { checkMatmul("v4", 64, 1024, 512); }

}  // namespace
}  // namespace tpu::sim
