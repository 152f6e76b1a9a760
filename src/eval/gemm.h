// Packed, cache-blocked matrix multiply for the interpreter's dot and
// convolution. C[i][j] = sum_k A[i][k] * B[k][j], accumulated in T (f32 or
// f64) strictly in increasing k: every element is bit-identical to the naive
// loop `acc = 0; for k: acc += a*b` (separate multiply and add, no FMA), on
// every host, whatever vector width the kernel uses. Large products run on
// several threads (up to the host's hardware threads), each computing whole
// rows or columns of C, so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tpu::eval {

// A is addressed a[i * aRow + k * aCol], B b[k * bRow + j * bCol] (any
// strides, so transposed operands need no copy), C c[i * cRow + j]. C is
// overwritten.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t aRow, int64_t aCol, const float* b,
          int64_t bRow, int64_t bCol, float* c, int64_t cRow);
void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t aRow, int64_t aCol, const double* b,
          int64_t bRow, int64_t bCol, double* c, int64_t cRow);

// Caps the threads one gemm call may use (0: the host's hardware threads).
// For tests and benchmarks comparing thread counts.
void setGemmMaxThreads(int threads);

}  // namespace tpu::eval
