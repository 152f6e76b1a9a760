#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "eval/conv.h"
#include "eval/elementwise.h"
#include "eval/gemm.h"
#include "eval/kernels.h"
#include "eval/rng.h"
#include "eval/strided.h"

namespace tpu::eval {
namespace {

TEST(Gemm, MatchesNaiveSequentialSumBitExactly) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 13, 300}, {50, 33, 17}, {97, 129, 513}, {0, 4, 3}, {3, 4, 0}}) {
    std::vector<float> a(m * k), b(k * n), c(m * n, 99.0f);
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    // B transposed in memory: b[k][j] stored at bt[j*k + kk].
    std::vector<float> bt(k * n);
    for (int kk = 0; kk < k; ++kk)
      for (int j = 0; j < n; ++j) bt[j * k + kk] = b[kk * n + j];
    gemm(m, n, k, a.data(), k, 1, bt.data(), 1, k, c.data(), n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float acc = 0;
        for (int kk = 0; kk < k; ++kk) acc += a[i * k + kk] * b[kk * n + j];
        ASSERT_EQ(c[i * n + j], acc) << m << "x" << n << "x" << k << " at " << i << "," << j;
      }
  }
}

TEST(Gemm, ThreadCountDoesNotChangeResults) {
  // Large enough to be split over threads (by rows, then by columns for the
  // short wide product); odd sizes leave edge tiles.
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [m, n, k] : {std::tuple{203, 331, 517}, {9, 3001, 401}}) {
    std::vector<float> a(m * k), b(k * n);
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3, 8}) {
      setGemmMaxThreads(threads);
      std::vector<float> c(m * n);
      gemm(m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), n);
      results.push_back(std::move(c));
    }
    setGemmMaxThreads(0);
    for (size_t t = 1; t < results.size(); ++t)
      ASSERT_EQ(0, std::memcmp(results[0].data(), results[t].data(), results[0].size() * 4)) << m << "x" << n;
    for (int i = 0; i < m; i += 7)
      for (int j = 0; j < n; j += 3) {
        float acc = 0;
        for (int kk = 0; kk < k; ++kk) acc += a[i * k + kk] * b[kk * n + j];
        ASSERT_EQ(results[0][i * n + j], acc) << m << "x" << n << " at " << i << "," << j;
      }
  }
}

TEST(Gemm, DoublePrecision) {
  int m = 19, n = 23, k = 600;
  std::vector<double> a(m * k), b(k * n), c(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = std::sin(i);
  for (int i = 0; i < k * n; ++i) b[i] = std::cos(i);
  gemm(m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int kk = 0; kk < k; ++kk) acc += a[i * k + kk] * b[kk * n + j];
      ASSERT_EQ(c[i * n + j], acc);
    }
}

TEST(Strided, TransposeReverseBroadcast) {
  std::vector<int32_t> in(24);
  for (int i = 0; i < 24; ++i) in[i] = i;
  // transpose [2,3,4] -> [4,2,3] (perm {2,0,1})
  std::vector<int64_t> dims = {4, 2, 3};
  std::vector<int64_t> inStrides = {1, 12, 4};
  std::vector<int32_t> out(24);
  auto outStrides = rowMajorStrides(dims);
  stridedCopy(4, dims, in.data(), 0, inStrides, out.data(), 0, outStrides);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(out[a * 6 + b * 3 + c], in[b * 12 + c * 4 + a]);
  // reverse dim 1 of [2,12]
  std::vector<int64_t> d2 = {2, 12};
  std::vector<int64_t> rs = {12, -1};
  std::vector<int64_t> os = {12, 1};
  stridedCopy(4, d2, in.data(), 11, rs, out.data(), 0, os);
  EXPECT_EQ(out[0], 11);
  EXPECT_EQ(out[13], 22);
  // broadcast a scalar with zero strides, 3-byte elements
  std::vector<uint8_t> v = {1, 2, 3}, o(3 * 6);
  std::vector<int64_t> bd = {2, 3}, zs = {0, 0}, bs = {3, 1};
  stridedCopy(3, bd, v.data(), 0, zs, o.data(), 0, bs);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o[3 * i + 2], 3);
}

TEST(Rng, KnownAnswers) {
  // Random123 known-answer vectors.
  EXPECT_EQ(threefry2x32({0, 0}, {0, 0}), (std::array<uint32_t, 2>{0x6b200159, 0x99ba4efe}));
  EXPECT_EQ(threefry2x32({0x13198a2e, 0x03707344}, {0x243f6a88, 0x85a308d3}),
            (std::array<uint32_t, 2>{0xc4923a9c, 0x483df7a0}));
  EXPECT_EQ(philox4x32({0, 0}, {0, 0, 0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({~0u, ~0u}, {~0u, ~0u, ~0u, ~0u}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  uint64_t state[2] = {5, 10}, next[2];
  uint32_t out[5];
  ASSERT_TRUE(rngBitGenerator(RngAlgorithm::ThreeFry, state, next, out, 5, 4));
  EXPECT_EQ(next[0], 5u);
  EXPECT_EQ(next[1], 13u);  // three blocks of two words
  auto b = threefry2x32({5, 0}, {11, 0});
  EXPECT_EQ(out[2], b[0]);
  EXPECT_EQ(out[3], b[1]);
  uint64_t bad[1] = {0};
  EXPECT_FALSE(rngBitGenerator(RngAlgorithm::ThreeFry, bad, bad, out, 1, 4));
}

TEST(Elementwise, IntegerEdgeCases) {
  int32_t a[] = {7, -7, std::numeric_limits<int32_t>::min(), 5, 1, -1};
  int32_t b[] = {0, 2, -1, -1, 40, 31};
  int32_t o[6];
  ASSERT_TRUE(binaryKernel(BinaryOp::Div, KType::S32, a, b, o, 6, 32));
  EXPECT_EQ(o[0], -1);
  EXPECT_EQ(o[1], -3);
  EXPECT_EQ(o[2], std::numeric_limits<int32_t>::min());
  ASSERT_TRUE(binaryKernel(BinaryOp::Rem, KType::S32, a, b, o, 6, 32));
  EXPECT_EQ(o[0], 7);
  EXPECT_EQ(o[1], -1);
  EXPECT_EQ(o[2], 0);
  ASSERT_TRUE(binaryKernel(BinaryOp::Shl, KType::S32, a, b, o, 6, 32));
  EXPECT_EQ(o[4], 0);
  EXPECT_EQ(o[5], std::numeric_limits<int32_t>::min());
  ASSERT_TRUE(binaryKernel(BinaryOp::Shra, KType::S32, a, b, o, 6, 32));
  EXPECT_EQ(o[4], 0);
  EXPECT_EQ(o[5], -1);
  ASSERT_TRUE(binaryKernel(BinaryOp::Pow, KType::S32, b, b, o, 6, 32));
  EXPECT_EQ(o[0], 1);   // 0^0
  EXPECT_EQ(o[2], -1);  // (-1)^-1
  int8_t s4[] = {-8, 7, -1};
  int8_t s4b[] = {1, 1, 1};
  int8_t s4o[3];
  ASSERT_TRUE(binaryKernel(BinaryOp::Sub, KType::S8, s4, s4b, s4o, 3, 4));
  truncateIntKernel(KType::S8, s4o, 3, 4);
  EXPECT_EQ(s4o[0], 7);  // wraps in 4 bits
  ASSERT_TRUE(binaryKernel(BinaryOp::Shrl, KType::S8, s4, s4b, s4o, 3, 4));
  truncateIntKernel(KType::S8, s4o, 3, 4);
  EXPECT_EQ(s4o[2], 7);  // 0b1111 >> 1 = 0b0111
  ASSERT_TRUE(unaryKernel(UnaryOp::Clz, KType::S8, s4b, s4o, 3, 4));
  EXPECT_EQ(s4o[0], 3);
}

TEST(Elementwise, FloatEdgeCases) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float a[] = {nan, 1.0f, -0.0f, 2.5f, -2.5f};
  float b[] = {1.0f, nan, 0.0f, 0.0f, 0.0f};
  float o[5];
  ASSERT_TRUE(binaryKernel(BinaryOp::Max, KType::F32, a, b, o, 5, 32));
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_TRUE(std::isnan(o[1]));
  EXPECT_FALSE(std::signbit(o[2]));
  ASSERT_TRUE(unaryKernel(UnaryOp::RoundEven, KType::F32, a, o, 5, 32));
  EXPECT_EQ(o[3], 2.0f);
  EXPECT_EQ(o[4], -2.0f);
  ASSERT_TRUE(unaryKernel(UnaryOp::RoundAfz, KType::F32, a, o, 5, 32));
  EXPECT_EQ(o[3], 3.0f);
  uint8_t p[5];
  ASSERT_TRUE(compareKernel(CompareDir::Lt, true, KType::F32, a, b, p, 5));
  EXPECT_EQ(p[2], 1);  // -0 < +0 in total order
  ASSERT_TRUE(compareKernel(CompareDir::Ne, false, KType::F32, a, b, p, 5));
  EXPECT_EQ(p[0], 1);
  float big[] = {1e20f, -1e20f, nan, -3.7f};
  int32_t ints[4];
  convertKernel(KType::F32, KType::S32, big, ints, 4);
  EXPECT_EQ(ints[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ints[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ints[2], 0);
  EXPECT_EQ(ints[3], -3);
}

}  // namespace
}  // namespace tpu::eval

namespace tpu::eval {
namespace {

// Independent reference straight from the opset spec (2 spatial dims).
std::vector<int64_t> naiveConv(const ConvParams& p, const std::vector<int64_t>& in, const std::vector<int64_t>& ker) {
  int64_t G = p.featureGroups, B = p.batchGroups, I = p.inFeatures / G, O = p.outFeatures;
  int64_t N = p.batch / B;
  std::vector<int64_t> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y0 = 0; y0 < p.outputSize[0]; ++y0)
        for (int64_t y1 = 0; y1 < p.outputSize[1]; ++y1) {
          int64_t acc = 0;
          int64_t fg = o / (O / G), bg = o / (O / B);
          int64_t nb = n + bg * N;
          for (int64_t i = 0; i < I; ++i)
            for (int64_t k0 = 0; k0 < p.kernelSize[0]; ++k0)
              for (int64_t k1 = 0; k1 < p.kernelSize[1]; ++k1) {
                int64_t pos[2] = {y0 * p.stride[0] + k0 * p.rhsDilation[0] - p.padLow[0],
                                  y1 * p.stride[1] + k1 * p.rhsDilation[1] - p.padLow[1]};
                int64_t idx[2];
                bool ok = true;
                for (int d = 0; d < 2; ++d) {
                  if (pos[d] < 0 || pos[d] % p.lhsDilation[d] != 0 || pos[d] / p.lhsDilation[d] >= p.inputSize[d]) ok = false;
                  idx[d] = pos[d] / p.lhsDilation[d];
                }
                if (!ok) continue;
                int64_t kk0 = p.reversal[0] ? p.kernelSize[0] - 1 - k0 : k0;
                int64_t c = fg * I + i;
                acc += in[((nb * p.inFeatures + c) * p.inputSize[0] + idx[0]) * p.inputSize[1] + idx[1]] *
                       ker[((o * I + i) * p.kernelSize[0] + kk0) * p.kernelSize[1] + k1];
              }
          out.push_back(acc);
        }
  return out;
}

TEST(Conv, GemmAndDirectPathsMatchSpecReference) {
  struct Case { int64_t n, c, o, g, b; std::vector<int64_t> s, k, st, lo, hi, ld, rd; bool rev; };
  std::vector<Case> cases = {
      {2, 3, 4, 1, 1, {5, 6}, {3, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, false},
      {1, 4, 6, 2, 1, {7, 5}, {3, 3}, {2, 1}, {1, 2}, {1, -1}, {1, 1}, {2, 1}, true},
      {4, 2, 4, 1, 2, {4, 4}, {2, 2}, {1, 2}, {0, 1}, {2, 0}, {2, 1}, {1, 1}, false},
      {1, 3, 3, 3, 1, {6, 6}, {2, 3}, {3, 2}, {-1, 0}, {0, 2}, {1, 3}, {2, 2}, false},
  };
  for (const Case& cs : cases) {
    ConvParams p;
    p.batch = cs.n; p.inFeatures = cs.c; p.outFeatures = cs.o; p.featureGroups = cs.g; p.batchGroups = cs.b;
    p.inputSize = cs.s; p.kernelSize = cs.k; p.stride = cs.st; p.padLow = cs.lo; p.lhsDilation = cs.ld;
    p.rhsDilation = cs.rd; p.reversal = {cs.rev, false};
    for (int d = 0; d < 2; ++d)
      p.outputSize.push_back(convOutputSize(cs.s[d], cs.k[d], cs.st[d], cs.lo[d], cs.hi[d], cs.ld[d], cs.rd[d]));
    std::vector<int64_t> in(cs.n * cs.c * cs.s[0] * cs.s[1]), ker(cs.o * (cs.c / cs.g) * cs.k[0] * cs.k[1]);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i % 7) - 3;
    for (size_t i = 0; i < ker.size(); ++i) ker[i] = static_cast<int64_t>(i % 5) - 2;
    auto expected = naiveConv(p, in, ker);
    std::vector<int32_t> in32(in.begin(), in.end()), ker32(ker.begin(), ker.end()), out32(expected.size());
    ASSERT_TRUE(convolution(KType::S32, p, in32.data(), ker32.data(), out32.data()));
    std::vector<double> inD(in.begin(), in.end()), kerD(ker.begin(), ker.end()), outD(expected.size());
    ASSERT_TRUE(convolution(KType::F64, p, inD.data(), kerD.data(), outD.data()));
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(out32[i], expected[i]) << i;
      ASSERT_EQ(outD[i], static_cast<double>(expected[i])) << i;
    }
  }
}

}  // namespace
}  // namespace tpu::eval

namespace tpu::eval {
namespace {

TEST(Kernels, DotBatchedIntWrapsAndTransposedRhs) {
  // [2, 2, 3] x [2, 3, 2] with rhs given transposed in memory ([b, n, k]).
  int32_t lhs[12], rhsT[12], out[8];
  for (int i = 0; i < 12; ++i) lhs[i] = i + 1, rhsT[i] = 12 - i;
  int64_t ls[3] = {6, 3, 1}, rs[3] = {6, 1, 3};
  ASSERT_TRUE(dotKernel(KType::S32, 2, 2, 2, 3, lhs, ls, rhsT, rs, out));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        int32_t acc = 0;
        for (int k = 0; k < 3; ++k) acc += lhs[b * 6 + i * 3 + k] * rhsT[b * 6 + j * 3 + k];
        EXPECT_EQ(out[b * 4 + i * 2 + j], acc);
      }
  int8_t a8[2] = {100, 100}, b8[2] = {2, 1}, o8;
  int64_t s1[3] = {0, 0, 1}, s2[3] = {0, 1, 0};
  ASSERT_TRUE(dotKernel(KType::S8, 1, 1, 1, 2, a8, s1, b8, s2, &o8));
  EXPECT_EQ(o8, static_cast<int8_t>(300 - 256));
}

TEST(Kernels, ReduceFoldsInOrderAndPropagatesNaN) {
  float in[6] = {1, 2, 3, std::numeric_limits<float>::quiet_NaN(), 5, 6};  // [reduced 2, kept 3]
  float init = 0, out[3];
  ASSERT_TRUE(reduceKernel(BinaryOp::Add, KType::F32, in, 2, 3, &init, out));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 7);
  float ninf = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(reduceKernel(BinaryOp::Max, KType::F32, in, 2, 3, &ninf, out));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[2], 6);
  EXPECT_FALSE(reduceKernel(BinaryOp::Atan2, KType::F32, in, 2, 3, &init, out));
}

TEST(Kernels, NarrowFloatRoundTrip) {
  for (FloatFormat f : {FloatFormat::BF16, FloatFormat::F16, FloatFormat::F8E4M3FN, FloatFormat::F8E5M2}) {
    int bytes = floatFormatInfo(f).totalBits == 16 ? 2 : 1;
    int count = bytes == 2 ? 65536 : 256;
    std::vector<uint8_t> bits(static_cast<size_t>(count * bytes));
    for (int i = 0; i < count; ++i) std::memcpy(bits.data() + i * bytes, &i, static_cast<size_t>(bytes));
    std::vector<float> wide(static_cast<size_t>(count));
    widenFloats(f, bits.data(), wide.data(), count);
    std::vector<uint8_t> back(bits.size());
    narrowFloats(f, wide.data(), back.data(), count);
    for (int i = 0; i < count; ++i) {
      if (std::isnan(wide[static_cast<size_t>(i)])) continue;
      ASSERT_EQ(std::memcmp(bits.data() + i * bytes, back.data() + i * bytes, static_cast<size_t>(bytes)), 0) << i;
    }
  }
}

}  // namespace
}  // namespace tpu::eval
