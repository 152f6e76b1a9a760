#include "eval/kernels.h"

#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <type_traits>
#include <vector>

#include "eval/gemm.h"

namespace tpu::eval {

namespace {

template <typename T>
void dotLoop(int64_t batch, int64_t m, int64_t n, int64_t k, const T* lhs, const int64_t* ls, const T* rhs,
             const int64_t* rs, T* out, bool logical) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      T* o = out + (b * m + i) * n;
      for (int64_t j = 0; j < n; ++j) o[j] = T{};
      for (int64_t kk = 0; kk < k; ++kk) {
        const T a = lhs[b * ls[0] + i * ls[1] + kk * ls[2]];
        const T* r = rhs + b * rs[0] + kk * rs[1];
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          if (logical) {
            for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>(o[j] || (a && r[j * rs[2]]));
          } else if (rs[2] == 1) {
            for (int64_t j = 0; j < n; ++j)
              o[j] = static_cast<T>(static_cast<U>(o[j]) + static_cast<U>(a) * static_cast<U>(r[j]));
          } else {
            for (int64_t j = 0; j < n; ++j)
              o[j] = static_cast<T>(static_cast<U>(o[j]) + static_cast<U>(a) * static_cast<U>(r[j * rs[2]]));
          }
        } else {
          for (int64_t j = 0; j < n; ++j) o[j] += a * r[j * rs[2]];
        }
      }
    }
  }
}

template <typename T>
T fmaxNan(T a, T b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename T>
T fminNan(T a, T b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <typename T, typename F>
void reduceLoop(const T* in, int64_t reduced, int64_t kept, T init, T* out, F f) {
  for (int64_t o = 0; o < kept; ++o) out[o] = init;
  for (int64_t r = 0; r < reduced; ++r) {
    const T* row = in + r * kept;
    for (int64_t o = 0; o < kept; ++o) out[o] = f(out[o], row[o]);
  }
}

template <typename T>
bool reduceTyped(BinaryOp op, const void* inV, int64_t reduced, int64_t kept, const void* initV, void* outV,
                 bool pred) {
  auto* in = static_cast<const T*>(inV);
  auto* out = static_cast<T*>(outV);
  T init;
  std::memcpy(&init, initV, sizeof(T));
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case BinaryOp::Add: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a + b; }); return true;
      case BinaryOp::Mul: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a * b; }); return true;
      case BinaryOp::Max: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return fmaxNan(a, b); }); return true;
      case BinaryOp::Min: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return fminNan(a, b); }); return true;
      default: return false;
    }
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (pred) {
      switch (op) {
        case BinaryOp::And:
        case BinaryOp::Min:
        case BinaryOp::Mul: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a && b); }); return true;
        case BinaryOp::Or:
        case BinaryOp::Max:
        case BinaryOp::Add: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a || b); }); return true;
        case BinaryOp::Xor: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a != b); }); return true;
        default: return false;
      }
    }
    switch (op) {
      case BinaryOp::Add:
        reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); });
        return true;
      case BinaryOp::Mul:
        reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); });
        return true;
      case BinaryOp::Max: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a > b ? a : b; }); return true;
      case BinaryOp::Min: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a < b ? a : b; }); return true;
      case BinaryOp::And: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a & b); }); return true;
      case BinaryOp::Or: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a | b); }); return true;
      case BinaryOp::Xor: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return static_cast<T>(a ^ b); }); return true;
      default: return false;
    }
  } else {
    switch (op) {
      case BinaryOp::Add: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a + b; }); return true;
      case BinaryOp::Mul: reduceLoop(in, reduced, kept, init, out, [](T a, T b) { return a * b; }); return true;
      default: return false;
    }
  }
}

}  // namespace

bool dotKernel(KType type, int64_t batch, int64_t m, int64_t n, int64_t k, const void* lhs,
               const int64_t lhsStrides[3], const void* rhs, const int64_t rhsStrides[3], void* out) {
  const int64_t* ls = lhsStrides;
  const int64_t* rs = rhsStrides;
  switch (type) {
    case KType::F32:
      for (int64_t b = 0; b < batch; ++b)
        gemm(m, n, k, static_cast<const float*>(lhs) + b * ls[0], ls[1], ls[2],
             static_cast<const float*>(rhs) + b * rs[0], rs[1], rs[2], static_cast<float*>(out) + b * m * n, n);
      return true;
    case KType::F64:
      for (int64_t b = 0; b < batch; ++b)
        gemm(m, n, k, static_cast<const double*>(lhs) + b * ls[0], ls[1], ls[2],
             static_cast<const double*>(rhs) + b * rs[0], rs[1], rs[2], static_cast<double*>(out) + b * m * n, n);
      return true;
    case KType::Pred:
      dotLoop(batch, m, n, k, static_cast<const uint8_t*>(lhs), ls, static_cast<const uint8_t*>(rhs), rs,
              static_cast<uint8_t*>(out), true);
      return true;
#define TPU_DOT_LOOP(K, T)                                                                                    \
  case KType::K:                                                                                              \
    dotLoop(batch, m, n, k, static_cast<const T*>(lhs), ls, static_cast<const T*>(rhs), rs, static_cast<T*>(out), \
            false);                                                                                           \
    return true;
      TPU_DOT_LOOP(S8, int8_t)
      TPU_DOT_LOOP(S16, int16_t)
      TPU_DOT_LOOP(S32, int32_t)
      TPU_DOT_LOOP(S64, int64_t)
      TPU_DOT_LOOP(U8, uint8_t)
      TPU_DOT_LOOP(U16, uint16_t)
      TPU_DOT_LOOP(U32, uint32_t)
      TPU_DOT_LOOP(U64, uint64_t)
      TPU_DOT_LOOP(C64, std::complex<float>)
      TPU_DOT_LOOP(C128, std::complex<double>)
#undef TPU_DOT_LOOP
  }
  return false;
}

bool reduceKernel(BinaryOp op, KType type, const void* in, int64_t reduced, int64_t kept, const void* init,
                  void* out) {
  switch (type) {
    case KType::Pred: return reduceTyped<uint8_t>(op, in, reduced, kept, init, out, true);
    case KType::S8: return reduceTyped<int8_t>(op, in, reduced, kept, init, out, false);
    case KType::S16: return reduceTyped<int16_t>(op, in, reduced, kept, init, out, false);
    case KType::S32: return reduceTyped<int32_t>(op, in, reduced, kept, init, out, false);
    case KType::S64: return reduceTyped<int64_t>(op, in, reduced, kept, init, out, false);
    case KType::U8: return reduceTyped<uint8_t>(op, in, reduced, kept, init, out, false);
    case KType::U16: return reduceTyped<uint16_t>(op, in, reduced, kept, init, out, false);
    case KType::U32: return reduceTyped<uint32_t>(op, in, reduced, kept, init, out, false);
    case KType::U64: return reduceTyped<uint64_t>(op, in, reduced, kept, init, out, false);
    case KType::F32: return reduceTyped<float>(op, in, reduced, kept, init, out, false);
    case KType::F64: return reduceTyped<double>(op, in, reduced, kept, init, out, false);
    case KType::C64: return reduceTyped<std::complex<float>>(op, in, reduced, kept, init, out, false);
    case KType::C128: return reduceTyped<std::complex<double>>(op, in, reduced, kept, init, out, false);
  }
  return false;
}

void widenFloats(FloatFormat format, const void* in, float* out, int64_t n) {
  if (format == FloatFormat::BF16) {
    auto* p = static_cast<const uint16_t*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = bf16ToFloat(p[i]);
    return;
  }
  if (format == FloatFormat::F16) {
    auto* p = static_cast<const uint16_t*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = halfToFloat(p[i]);
    return;
  }
  std::array<float, 256> table;
  for (uint32_t b = 0; b < 256; ++b) table[b] = static_cast<float>(decodeFloat(format, b));
  auto* p = static_cast<const uint8_t*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = table[p[i]];
}

void narrowFloats(FloatFormat format, const float* in, void* out, int64_t n) {
  if (format == FloatFormat::BF16) {
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = floatToBf16(in[i]);
    return;
  }
  if (format == FloatFormat::F16) {
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = floatToHalf(in[i]);
    return;
  }
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(encodeFloat(format, in[i]));
}

void narrowFloatsFromF64(FloatFormat format, const double* in, void* out, int64_t n) {
  if (floatFormatInfo(format).totalBits == 16) {
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint16_t>(encodeFloat(format, in[i]));
    return;
  }
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(encodeFloat(format, in[i]));
}

}  // namespace tpu::eval
