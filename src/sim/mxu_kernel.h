// Host arithmetic of one MXU push: out[8][128] = A[8][128] x W[128][128].
// bf16 path: A and W hold bf16 values widened to f32. Each output element is
// acc = +0.0; for k = 0..127: acc = fma(A[r][k], W[k][n], acc) in f32. The
// product of two bf16 values is exact in f32, so the only rounding is that of
// each addition; fma keeps it a single rounding even when a product falls in
// the subnormal range. Every kernel variant (AVX-512, AVX2+FMA, portable)
// gives bit-identical results.
#pragma once

#include <cstdint>
#include <string_view>

namespace tpu::sim {

constexpr int kMxuDim = 128;
constexpr int kPushRows = 8;

// `rows` pushes of 8 rows each may be done at once (same weights): a is
// [rows*8][128], out is [rows*8][128].
void mxuMatmulF32(const float* a, const float* w, float* out, int pushes = 1);
// int8 path: A and W hold values in [-128, 127]; exact s32 sums.
void mxuMatmulS8(const int32_t* a, const int32_t* w, int32_t* out, int pushes = 1);

// Which variant mxuMatmulF32 uses on this host ("avx512", "avx2", "portable").
std::string_view mxuKernelName();
// Forces the portable variant (tests compare variants).
void mxuForcePortable(bool force);

}  // namespace tpu::sim
