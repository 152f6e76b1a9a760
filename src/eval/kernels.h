// Dot, reduce and narrow-float conversion kernels on canonical layouts,
// independent of the IR (the caller arranges operands with stridedCopy).
#pragma once

#include <cstdint>

#include "eval/elementwise.h"
#include "support/float_format.h"

namespace tpu::eval {

// out[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]; operands addressed with
// element strides {batch, row, col}; out is contiguous [batch, m, n].
// f32/f64 accumulate in the type in increasing k (the blocked GEMM), ints
// wrap, pred is or-of-ands. Returns false for unsupported types.
bool dotKernel(KType type, int64_t batch, int64_t m, int64_t n, int64_t k, const void* lhs,
               const int64_t lhsStrides[3], const void* rhs, const int64_t rhsStrides[3], void* out);

// Input laid out [reduced, kept] (row-major): out[o] = fold over r of
// op(acc, in[r][o]) starting from *init. Per output the fold is in
// increasing r; across outputs it vectorizes. Ops: Add, Mul, Max, Min, And,
// Or, Xor.
bool reduceKernel(BinaryOp op, KType type, const void* in, int64_t reduced, int64_t kept, const void* init,
                  void* out);

// Narrow float storage (1 byte per element for 4/6/8-bit formats, 2 for
// f16/bf16) to f32 and back (round to nearest even, the format's overflow
// rule). From f64 rounds once, directly.
void widenFloats(FloatFormat format, const void* in, float* out, int64_t n);
void narrowFloats(FloatFormat format, const float* in, void* out, int64_t n);
void narrowFloatsFromF64(FloatFormat format, const double* in, void* out, int64_t n);

}  // namespace tpu::eval
