#include "sim/mxu_kernel.h"

#include <atomic>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpu::sim {

namespace {

std::atomic<bool> forcePortable{false};

void matmulPortable(const float* a, const float* w, float* out) {
  for (int r = 0; r < kPushRows; ++r) {
    float* o = out + r * kMxuDim;
    for (int n = 0; n < kMxuDim; ++n) o[n] = 0.0f;
    for (int k = 0; k < kMxuDim; ++k) {
      float x = a[r * kMxuDim + k];
      const float* wk = w + k * kMxuDim;
      for (int n = 0; n < kMxuDim; ++n) o[n] = std::fma(x, wk[n], o[n]);
    }
  }
}

#if defined(__x86_64__)
// 8 rows x 32 columns of accumulators (16 zmm) per block; k runs in order.
// The row loops are unrolled so the accumulators stay in registers (at -O2
// GCC otherwise keeps the array in memory, a store-to-load chain per FMA).
__attribute__((target("avx512f"))) void matmulAvx512(const float* a, const float* w, float* out) {
  for (int nb = 0; nb < kMxuDim; nb += 32) {
    __m512 acc[kPushRows][2];
#pragma GCC unroll 8
    for (int r = 0; r < kPushRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int k = 0; k < kMxuDim; ++k) {
      __m512 w0 = _mm512_loadu_ps(w + k * kMxuDim + nb);
      __m512 w1 = _mm512_loadu_ps(w + k * kMxuDim + nb + 16);
#pragma GCC unroll 8
      for (int r = 0; r < kPushRows; ++r) {
        __m512 x = _mm512_set1_ps(a[r * kMxuDim + k]);
        acc[r][0] = _mm512_fmadd_ps(x, w0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(x, w1, acc[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kPushRows; ++r) {
      _mm512_storeu_ps(out + r * kMxuDim + nb, acc[r][0]);
      _mm512_storeu_ps(out + r * kMxuDim + nb + 16, acc[r][1]);
    }
  }
}

// 8 rows x 8 columns (8 ymm accumulators) per block.
__attribute__((target("avx2,fma"))) void matmulAvx2(const float* a, const float* w, float* out) {
  for (int nb = 0; nb < kMxuDim; nb += 8) {
    __m256 acc[kPushRows];
#pragma GCC unroll 8
    for (int r = 0; r < kPushRows; ++r) acc[r] = _mm256_setzero_ps();
    for (int k = 0; k < kMxuDim; ++k) {
      __m256 w0 = _mm256_loadu_ps(w + k * kMxuDim + nb);
#pragma GCC unroll 8
      for (int r = 0; r < kPushRows; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * kMxuDim + k]), w0, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kPushRows; ++r) _mm256_storeu_ps(out + r * kMxuDim + nb, acc[r]);
  }
}
#endif

enum class Variant { Portable, Avx2, Avx512 };

Variant hostVariant() {
#if defined(__x86_64__)
  static const Variant v = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Variant::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Variant::Avx2;
    return Variant::Portable;
  }();
  return v;
#else
  return Variant::Portable;
#endif
}

Variant activeVariant() { return forcePortable.load(std::memory_order_relaxed) ? Variant::Portable : hostVariant(); }

}  // namespace

void mxuMatmulF32(const float* a, const float* w, float* out, int pushes) {
  Variant v = activeVariant();
  for (int p = 0; p < pushes; ++p) {
    const float* ap = a + p * kPushRows * kMxuDim;
    float* op = out + p * kPushRows * kMxuDim;
    switch (v) {
#if defined(__x86_64__)
      case Variant::Avx512: matmulAvx512(ap, w, op); break;
      case Variant::Avx2: matmulAvx2(ap, w, op); break;
#endif
      default: matmulPortable(ap, w, op); break;
    }
  }
}

void mxuMatmulS8(const int32_t* a, const int32_t* w, int32_t* out, int pushes) {
  for (int r = 0; r < pushes * kPushRows; ++r) {
    int32_t* o = out + r * kMxuDim;
    for (int n = 0; n < kMxuDim; ++n) o[n] = 0;
    for (int k = 0; k < kMxuDim; ++k) {
      int32_t x = a[r * kMxuDim + k];
      const int32_t* wk = w + k * kMxuDim;
      for (int n = 0; n < kMxuDim; ++n) o[n] += x * wk[n];
    }
  }
}

std::string_view mxuKernelName() {
  switch (activeVariant()) {
    case Variant::Avx512: return "avx512";
    case Variant::Avx2: return "avx2";
    case Variant::Portable: return "portable";
  }
  return "portable";
}

void mxuForcePortable(bool force) { forcePortable.store(force, std::memory_order_relaxed); }

}  // namespace tpu::sim
