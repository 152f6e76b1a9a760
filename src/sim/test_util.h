// Helpers shared by the simulator's tests and benchmark (header-only).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/float_format.h"
#include "target/target.h"

namespace tpu::sim::testing {

inline target::TargetDesc loadBuiltin(const std::string& name) {
  DiagnosticEngine diags;
  auto t = target::loadTarget(name, diags);
  return t ? *t : target::TargetDesc{};
}

template <class T>
std::string toBytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <class T>
std::vector<T> fromBytes(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

inline std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> randomBf16(size_t n, uint32_t seed) {
  std::vector<float> f = randomFloats(n, seed);
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = floatToBf16(f[i]);
  return out;
}

// The simulator's documented matmul order: per 128-deep k block, acc = +0
// then acc = fma(a, b, acc) for k in order; blocks summed in order in f32
// (the first block's result taken as is).
inline std::vector<float> referenceMatmulBf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                              int64_t m, int64_t n, int64_t k) {
  std::vector<float> c(m * n);
  std::vector<float> bf(k * n);
  for (int64_t i = 0; i < k * n; ++i) bf[i] = bf16ToFloat(b[i]);
  std::vector<float> part(n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kb = 0; kb < k / 128; ++kb) {
      std::fill(part.begin(), part.end(), 0.0f);
      for (int64_t kk = kb * 128; kk < kb * 128 + 128; ++kk) {
        float x = bf16ToFloat(a[i * k + kk]);
        for (int64_t j = 0; j < n; ++j) part[j] = std::fma(x, bf[kk * n + j], part[j]);
      }
      for (int64_t j = 0; j < n; ++j) c[i * n + j] = kb == 0 ? part[j] : c[i * n + j] + part[j];
    }
  }
  return c;
}

}  // namespace tpu::sim::testing
