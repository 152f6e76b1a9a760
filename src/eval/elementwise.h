// Elementwise kernels over flat arrays of one compute type. Dispatch on the
// op and the type happens once per call; the loops inside are templated
// and free of per-element switches, so g++ vectorizes the simple ones.
// Narrow storage types are widened by the caller: s2/s4 compute as s8 and
// u2/u4 as u8 (then truncated to `bits`), f16/bf16/f8 as f32 (rounded back
// after every op, as XLA does).
#pragma once

#include <cstdint>

namespace tpu::eval {

enum class KType : uint8_t { Pred, S8, S16, S32, S64, U8, U16, U32, U64, F32, F64, C64, C128 };

bool isFloatK(KType t);
bool isComplexK(KType t);
bool isSignedK(KType t);
int kTypeBytes(KType t);

enum class UnaryOp : uint8_t {
  Abs, Negate, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Cbrt, Tanh, Logistic, Sin, Cos, Tan, Atan, Asin, Acos, Sinh,
  Cosh, Asinh, Acosh, Atanh, Erf, Floor, Ceil, RoundAfz, RoundEven, Sign, Not, Clz, Popcnt,
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Rem, Max, Min, Pow, Atan2, And, Or, Xor, Shl, Shra, Shrl };

enum class CompareDir : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

// out may alias in. `bits` is the logical width of integer types (4 for s4
// computed as s8), used by clz/popcnt/shifts. Returns false if the op does
// not accept the type (the caller reports it).
bool unaryKernel(UnaryOp op, KType type, const void* in, void* out, int64_t n, int bits);
bool binaryKernel(BinaryOp op, KType type, const void* a, const void* b, void* out, int64_t n, int bits);
// mulhi: the high half of the exact product of two integers of 8 bits or
// more (s64 and u64 through 128-bit products). false for other types.
bool mulhiKernel(KType type, const void* a, const void* b, void* out, int64_t n);
// Output is one byte (0/1) per element. totalOrder: XLA's TOTALORDER for floats.
bool compareKernel(CompareDir dir, bool totalOrder, KType type, const void* a, const void* b, uint8_t* out,
                   int64_t n);
// is-finite: float in, one byte per element out.
bool isFiniteKernel(KType type, const void* in, uint8_t* out, int64_t n);
// Complex parts: c64 -> f32, c128 -> f64 (abs is in unaryKernel's complex
// form only through this helper: part 0 real, 1 imag, 2 magnitude).
bool complexPartKernel(int part, KType type, const void* in, void* out, int64_t n);
// complex(re, im): f32 -> c64, f64 -> c128.
bool makeComplexKernel(KType partType, const void* re, const void* im, void* out, int64_t n);

// Numeric conversion between compute types (XLA's convert: float->int
// truncates and saturates, NaN->0; ->pred is x != 0; complex->real keeps
// the real part).
void convertKernel(KType from, KType to, const void* in, void* out, int64_t n);

// Sign-extends (signed) or masks (unsigned) integers to `bits` after an op
// computed in a wider type.
void truncateIntKernel(KType type, void* data, int64_t n, int bits);

}  // namespace tpu::eval
