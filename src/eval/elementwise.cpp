#include "eval/elementwise.h"

#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tpu::eval {

namespace {

using c64 = std::complex<float>;
using c128 = std::complex<double>;

template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};

// Calls f(T{}) with the C++ type of a compute type.
template <typename F>
bool withType(KType t, F&& f) {
  switch (t) {
    case KType::Pred: return f(uint8_t{});
    case KType::S8: return f(int8_t{});
    case KType::S16: return f(int16_t{});
    case KType::S32: return f(int32_t{});
    case KType::S64: return f(int64_t{});
    case KType::U8: return f(uint8_t{});
    case KType::U16: return f(uint16_t{});
    case KType::U32: return f(uint32_t{});
    case KType::U64: return f(uint64_t{});
    case KType::F32: return f(float{});
    case KType::F64: return f(double{});
    case KType::C64: return f(c64{});
    case KType::C128: return f(c128{});
  }
  return false;
}

template <typename T, typename F>
void map1(const void* in, void* out, int64_t n, F f) {
  auto* a = static_cast<const T*>(in);
  auto* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename T, typename F>
void map2(const void* a, const void* b, void* out, int64_t n, F f) {
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  auto* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

template <typename T>
T roundHalfEven(T x) {
  T r = std::floor(x);
  T d = x - r;
  if (d > T(0.5) || (d == T(0.5) && std::fmod(r, T(2)) != 0)) r += 1;
  return std::isfinite(x) ? std::copysign(r, x) : x;
}

template <typename T>
bool floatUnary(UnaryOp op, const void* in, void* out, int64_t n) {
  switch (op) {
    case UnaryOp::Abs: map1<T>(in, out, n, [](T x) { return std::fabs(x); }); return true;
    case UnaryOp::Negate: map1<T>(in, out, n, [](T x) { return -x; }); return true;
    case UnaryOp::Exp: map1<T>(in, out, n, [](T x) { return std::exp(x); }); return true;
    case UnaryOp::Expm1: map1<T>(in, out, n, [](T x) { return std::expm1(x); }); return true;
    case UnaryOp::Log: map1<T>(in, out, n, [](T x) { return std::log(x); }); return true;
    case UnaryOp::Log1p: map1<T>(in, out, n, [](T x) { return std::log1p(x); }); return true;
    case UnaryOp::Sqrt: map1<T>(in, out, n, [](T x) { return std::sqrt(x); }); return true;
    case UnaryOp::Rsqrt: map1<T>(in, out, n, [](T x) { return T(1) / std::sqrt(x); }); return true;
    case UnaryOp::Cbrt: map1<T>(in, out, n, [](T x) { return std::cbrt(x); }); return true;
    case UnaryOp::Tanh: map1<T>(in, out, n, [](T x) { return std::tanh(x); }); return true;
    case UnaryOp::Logistic:
      map1<T>(in, out, n, [](T x) {
        if (x >= 0) return T(1) / (T(1) + std::exp(-x));
        T e = std::exp(x);
        return e / (T(1) + e);
      });
      return true;
    case UnaryOp::Sin: map1<T>(in, out, n, [](T x) { return std::sin(x); }); return true;
    case UnaryOp::Cos: map1<T>(in, out, n, [](T x) { return std::cos(x); }); return true;
    case UnaryOp::Tan: map1<T>(in, out, n, [](T x) { return std::tan(x); }); return true;
    case UnaryOp::Atan: map1<T>(in, out, n, [](T x) { return std::atan(x); }); return true;
    case UnaryOp::Asin: map1<T>(in, out, n, [](T x) { return std::asin(x); }); return true;
    case UnaryOp::Acos: map1<T>(in, out, n, [](T x) { return std::acos(x); }); return true;
    case UnaryOp::Sinh: map1<T>(in, out, n, [](T x) { return std::sinh(x); }); return true;
    case UnaryOp::Cosh: map1<T>(in, out, n, [](T x) { return std::cosh(x); }); return true;
    case UnaryOp::Asinh: map1<T>(in, out, n, [](T x) { return std::asinh(x); }); return true;
    case UnaryOp::Acosh: map1<T>(in, out, n, [](T x) { return std::acosh(x); }); return true;
    case UnaryOp::Atanh: map1<T>(in, out, n, [](T x) { return std::atanh(x); }); return true;
    case UnaryOp::Erf: map1<T>(in, out, n, [](T x) { return std::erf(x); }); return true;
    case UnaryOp::Floor: map1<T>(in, out, n, [](T x) { return std::floor(x); }); return true;
    case UnaryOp::Ceil: map1<T>(in, out, n, [](T x) { return std::ceil(x); }); return true;
    case UnaryOp::RoundAfz: map1<T>(in, out, n, [](T x) { return std::round(x); }); return true;
    case UnaryOp::RoundEven: map1<T>(in, out, n, [](T x) { return roundHalfEven(x); }); return true;
    case UnaryOp::Sign:
      map1<T>(in, out, n, [](T x) { return (std::isnan(x) || x == 0) ? x : std::copysign(T(1), x); });
      return true;
    default: return false;
  }
}

// e^z - 1 with the relative precision of small z (e^z - 1 itself cancels
// near 0): expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y, numpy's formula.
// Non-finite parts and |x| beyond e^x's range keep std::exp's special values.
template <typename T>
T complexExpm1(T z) {
  using R = typename T::value_type;
  R x = z.real(), y = z.imag();
  if (!std::isfinite(x) || !std::isfinite(y) || std::abs(x) > R(80)) return std::exp(z) - T(1);
  R s = std::sin(y / 2);
  return T(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
}

// ln(1 + z): for |x|, |y| < 1/2 the real part is log1p(x (2 + x) + y^2) / 2,
// which keeps the relative precision that rounding 1 + x would lose.
template <typename T>
T complexLog1p(T z) {
  using R = typename T::value_type;
  R x = z.real(), y = z.imag();
  if (std::abs(x) < R(0.5) && std::abs(y) < R(0.5))
    return T(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, 1 + x));
  return std::log(z + T(1));
}

// 1 / (1 + e^-z); for |x| < 1 the real part of 1 + e^-z is
// 2 cos^2(y/2) + expm1(-x) cos y, which does not cancel near the poles
// z = (2k + 1) pi i (the compiled expansion's formula).
template <typename T>
T complexLogistic(T z) {
  using R = typename T::value_type;
  R x = z.real(), y = z.imag();
  if (!(std::abs(x) < R(1)) || !std::isfinite(y)) return T(1) / (T(1) + std::exp(-z));
  R c = std::cos(y / 2);
  return T(1) / T(2 * c * c + std::expm1(-x) * std::cos(y), -std::exp(-x) * std::sin(y));
}

// a^b as std::pow, except 0^0 = 1 (numpy and XLA; std::pow gives NaN).
template <typename T>
T complexPow(T a, T b) {
  if (a == T(0) && b == T(0)) return T(1);
  return std::pow(a, b);
}

template <typename T>
bool complexUnary(UnaryOp op, const void* in, void* out, int64_t n) {
  using R = typename T::value_type;
  switch (op) {
    case UnaryOp::Negate: map1<T>(in, out, n, [](T x) { return -x; }); return true;
    case UnaryOp::Exp: map1<T>(in, out, n, [](T x) { return std::exp(x); }); return true;
    case UnaryOp::Expm1: map1<T>(in, out, n, [](T x) { return complexExpm1(x); }); return true;
    case UnaryOp::Log: map1<T>(in, out, n, [](T x) { return std::log(x); }); return true;
    case UnaryOp::Log1p: map1<T>(in, out, n, [](T x) { return complexLog1p(x); }); return true;
    case UnaryOp::Sqrt: map1<T>(in, out, n, [](T x) { return std::sqrt(x); }); return true;
    case UnaryOp::Rsqrt: map1<T>(in, out, n, [](T x) { return T(1) / std::sqrt(x); }); return true;
    case UnaryOp::Tanh: map1<T>(in, out, n, [](T x) { return std::tanh(x); }); return true;
    case UnaryOp::Sin: map1<T>(in, out, n, [](T x) { return std::sin(x); }); return true;
    case UnaryOp::Cos: map1<T>(in, out, n, [](T x) { return std::cos(x); }); return true;
    case UnaryOp::Tan: map1<T>(in, out, n, [](T x) { return std::tan(x); }); return true;
    case UnaryOp::Logistic: map1<T>(in, out, n, [](T x) { return complexLogistic(x); }); return true;
    case UnaryOp::Sign:
      map1<T>(in, out, n, [](T x) {
        R a = std::abs(x);
        return a == 0 ? x : x / a;
      });
      return true;
    default: return false;
  }
}

template <typename T>
int countLeadingZeros(T x, int bits) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(x);
  if (bits < static_cast<int>(sizeof(T) * 8)) u &= static_cast<U>((U(1) << bits) - 1);
  return std::countl_zero(u) - static_cast<int>(sizeof(T) * 8 - bits);
}

template <typename T>
bool intUnary(UnaryOp op, const void* in, void* out, int64_t n, int bits) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case UnaryOp::Abs:
      map1<T>(in, out, n, [](T x) { return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x; });
      return true;
    case UnaryOp::Negate: map1<T>(in, out, n, [](T x) { return static_cast<T>(U(0) - static_cast<U>(x)); }); return true;
    case UnaryOp::Not: map1<T>(in, out, n, [](T x) { return static_cast<T>(~x); }); return true;
    case UnaryOp::Sign:
      map1<T>(in, out, n, [](T x) { return static_cast<T>(x > 0 ? 1 : (x < 0 ? -1 : 0)); });
      return true;
    case UnaryOp::Clz:
      map1<T>(in, out, n, [bits](T x) { return static_cast<T>(countLeadingZeros(x, bits)); });
      return true;
    case UnaryOp::Popcnt:
      map1<T>(in, out, n, [bits](T x) {
        U u = static_cast<U>(x);
        if (bits < static_cast<int>(sizeof(T) * 8)) u &= static_cast<U>((U(1) << bits) - 1);
        return static_cast<T>(std::popcount(u));
      });
      return true;
    default: return false;
  }
}

template <typename T>
T floatMax(T a, T b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;  // -0 < +0
  return a > b ? a : b;
}
template <typename T>
T floatMin(T a, T b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <typename T>
bool floatBinary(BinaryOp op, const void* a, const void* b, void* out, int64_t n) {
  switch (op) {
    case BinaryOp::Add: map2<T>(a, b, out, n, [](T x, T y) { return x + y; }); return true;
    case BinaryOp::Sub: map2<T>(a, b, out, n, [](T x, T y) { return x - y; }); return true;
    case BinaryOp::Mul: map2<T>(a, b, out, n, [](T x, T y) { return x * y; }); return true;
    case BinaryOp::Div: map2<T>(a, b, out, n, [](T x, T y) { return x / y; }); return true;
    case BinaryOp::Rem: map2<T>(a, b, out, n, [](T x, T y) { return std::fmod(x, y); }); return true;
    case BinaryOp::Max: map2<T>(a, b, out, n, [](T x, T y) { return floatMax(x, y); }); return true;
    case BinaryOp::Min: map2<T>(a, b, out, n, [](T x, T y) { return floatMin(x, y); }); return true;
    case BinaryOp::Pow: map2<T>(a, b, out, n, [](T x, T y) { return std::pow(x, y); }); return true;
    case BinaryOp::Atan2: map2<T>(a, b, out, n, [](T x, T y) { return std::atan2(x, y); }); return true;
    default: return false;
  }
}

template <typename T>
bool complexBinary(BinaryOp op, const void* a, const void* b, void* out, int64_t n) {
  switch (op) {
    case BinaryOp::Add: map2<T>(a, b, out, n, [](T x, T y) { return x + y; }); return true;
    case BinaryOp::Sub: map2<T>(a, b, out, n, [](T x, T y) { return x - y; }); return true;
    case BinaryOp::Mul: map2<T>(a, b, out, n, [](T x, T y) { return x * y; }); return true;
    case BinaryOp::Div: map2<T>(a, b, out, n, [](T x, T y) { return x / y; }); return true;
    case BinaryOp::Pow: map2<T>(a, b, out, n, [](T x, T y) { return complexPow(x, y); }); return true;
    default: return false;
  }
}

template <typename T>
T intPow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  U result = 1, b = static_cast<U>(base);
  U e = static_cast<U>(exponent);
  while (e) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
bool intBinary(BinaryOp op, const void* a, const void* b, void* out, int64_t n, int bits) {
  using U = std::make_unsigned_t<T>;
  const U widthMask = bits >= static_cast<int>(sizeof(T) * 8) ? U(~U(0)) : static_cast<U>((U(1) << bits) - 1);
  switch (op) {
    case BinaryOp::Add:
      map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(static_cast<U>(x) + static_cast<U>(y)); });
      return true;
    case BinaryOp::Sub:
      map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(static_cast<U>(x) - static_cast<U>(y)); });
      return true;
    case BinaryOp::Mul:
      map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(static_cast<U>(x) * static_cast<U>(y)); });
      return true;
    case BinaryOp::Div:
      map2<T>(a, b, out, n, [](T x, T y) -> T {
        if (y == 0) return static_cast<T>(~U(0));
        if constexpr (std::is_signed_v<T>) {
          if (y == -1 && x == std::numeric_limits<T>::min()) return x;
        }
        return static_cast<T>(x / y);
      });
      return true;
    case BinaryOp::Rem:
      map2<T>(a, b, out, n, [](T x, T y) -> T {
        if (y == 0) return x;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return 0;
        }
        return static_cast<T>(x % y);
      });
      return true;
    case BinaryOp::Max: map2<T>(a, b, out, n, [](T x, T y) { return x > y ? x : y; }); return true;
    case BinaryOp::Min: map2<T>(a, b, out, n, [](T x, T y) { return x < y ? x : y; }); return true;
    case BinaryOp::Pow: map2<T>(a, b, out, n, [](T x, T y) { return intPow(x, y); }); return true;
    case BinaryOp::And: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x & y); }); return true;
    case BinaryOp::Or: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x | y); }); return true;
    case BinaryOp::Xor: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x ^ y); }); return true;
    case BinaryOp::Shl:
      map2<T>(a, b, out, n, [bits](T x, T y) -> T {
        U amount = static_cast<U>(y);
        if (amount >= static_cast<U>(bits)) return 0;
        return static_cast<T>(static_cast<U>(x) << amount);
      });
      return true;
    case BinaryOp::Shrl:
      map2<T>(a, b, out, n, [bits, widthMask](T x, T y) -> T {
        U amount = static_cast<U>(y);
        if (amount >= static_cast<U>(bits)) return 0;
        return static_cast<T>((static_cast<U>(x) & widthMask) >> amount);
      });
      return true;
    case BinaryOp::Shra:
      map2<T>(a, b, out, n, [bits](T x, T y) -> T {
        U amount = static_cast<U>(y);
        if constexpr (std::is_signed_v<T>) {
          if (amount >= static_cast<U>(bits)) return x < 0 ? T(-1) : T(0);
          return static_cast<T>(x >> amount);
        } else {
          // Unsigned storage of a signed-less type: arithmetic shift of the
          // `bits`-wide pattern.
          U sign = U(1) << (bits - 1);
          bool negative = (static_cast<U>(x) & sign) != 0;
          if (amount >= static_cast<U>(bits)) return negative ? static_cast<T>(~U(0)) : T(0);
          U shifted = static_cast<U>(x) >> amount;
          if (negative) shifted |= static_cast<U>(~U(0) << (bits - 1 - amount));
          return static_cast<T>(shifted);
        }
      });
      return true;
    default: return false;
  }
}

template <typename T>
bool predBinary(BinaryOp op, const void* a, const void* b, void* out, int64_t n) {
  switch (op) {
    case BinaryOp::And: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x && y); }); return true;
    case BinaryOp::Or: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x || y); }); return true;
    case BinaryOp::Xor: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>((x != 0) != (y != 0)); }); return true;
    case BinaryOp::Max: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x || y); }); return true;
    case BinaryOp::Min: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x && y); }); return true;
    case BinaryOp::Add: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x || y); }); return true;
    case BinaryOp::Mul: map2<T>(a, b, out, n, [](T x, T y) { return static_cast<T>(x && y); }); return true;
    default: return false;
  }
}

// Total order key: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
inline int32_t totalKey(float x) {
  int32_t k = std::bit_cast<int32_t>(x);
  return k < 0 ? k ^ 0x7FFFFFFF : k;
}
inline int64_t totalKey(double x) {
  int64_t k = std::bit_cast<int64_t>(x);
  return k < 0 ? k ^ 0x7FFFFFFFFFFFFFFFll : k;
}

template <typename T>
void compareLoop(CompareDir dir, const T* x, const T* y, uint8_t* o, int64_t n) {
  switch (dir) {
    case CompareDir::Eq: for (int64_t i = 0; i < n; ++i) o[i] = x[i] == y[i]; break;
    case CompareDir::Ne: for (int64_t i = 0; i < n; ++i) o[i] = x[i] != y[i]; break;
    case CompareDir::Lt: for (int64_t i = 0; i < n; ++i) o[i] = x[i] < y[i]; break;
    case CompareDir::Le: for (int64_t i = 0; i < n; ++i) o[i] = x[i] <= y[i]; break;
    case CompareDir::Gt: for (int64_t i = 0; i < n; ++i) o[i] = x[i] > y[i]; break;
    case CompareDir::Ge: for (int64_t i = 0; i < n; ++i) o[i] = x[i] >= y[i]; break;
  }
}

template <typename T>
void totalCompareLoop(CompareDir dir, const T* x, const T* y, uint8_t* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    auto a = totalKey(x[i]), b = totalKey(y[i]);
    switch (dir) {
      case CompareDir::Eq: o[i] = a == b; break;
      case CompareDir::Ne: o[i] = a != b; break;
      case CompareDir::Lt: o[i] = a < b; break;
      case CompareDir::Le: o[i] = a <= b; break;
      case CompareDir::Gt: o[i] = a > b; break;
      case CompareDir::Ge: o[i] = a >= b; break;
    }
  }
}

template <typename From, typename To>
To convertOne(From x) {
  if constexpr (IsComplex<From>::value) {
    if constexpr (IsComplex<To>::value) {
      return To(static_cast<typename To::value_type>(x.real()), static_cast<typename To::value_type>(x.imag()));
    } else {
      return convertOne<typename From::value_type, To>(x.real());
    }
  } else if constexpr (IsComplex<To>::value) {
    return To(convertOne<From, typename To::value_type>(x), 0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x)) return 0;
    // Saturate: compare in long double-free form against exact bounds.
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hiExclusive = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;  // power of two
    double d = static_cast<double>(x);
    if (d <= lo) return std::numeric_limits<To>::min();
    if (d >= hiExclusive) return std::numeric_limits<To>::max();
    return static_cast<To>(std::trunc(d));
  } else {
    return static_cast<To>(x);
  }
}

template <typename From, typename To>
void convertLoop(const void* in, void* out, int64_t n, bool toPred) {
  auto* a = static_cast<const From*>(in);
  auto* o = static_cast<To*>(out);
  if (toPred) {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<To>(a[i] != From{});
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = convertOne<From, To>(a[i]);
}

// The high half of the product, computed exactly in the wider type W.
template <typename T, typename W>
void mulhiLoop(const void* a, const void* b, void* out, int64_t n) {
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  auto* o = static_cast<T*>(out);
  constexpr int shift = sizeof(T) * 8;
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>((static_cast<W>(x[i]) * static_cast<W>(y[i])) >> shift);
}

}  // namespace

bool isFloatK(KType t) { return t == KType::F32 || t == KType::F64; }
bool isComplexK(KType t) { return t == KType::C64 || t == KType::C128; }
bool isSignedK(KType t) { return t == KType::S8 || t == KType::S16 || t == KType::S32 || t == KType::S64; }
int kTypeBytes(KType t) {
  switch (t) {
    case KType::Pred:
    case KType::S8:
    case KType::U8: return 1;
    case KType::S16:
    case KType::U16: return 2;
    case KType::S32:
    case KType::U32:
    case KType::F32: return 4;
    case KType::S64:
    case KType::U64:
    case KType::F64:
    case KType::C64: return 8;
    case KType::C128: return 16;
  }
  return 1;
}

bool unaryKernel(UnaryOp op, KType type, const void* in, void* out, int64_t n, int bits) {
  if (type == KType::Pred) {
    if (op != UnaryOp::Not) return false;
    map1<uint8_t>(in, out, n, [](uint8_t x) { return static_cast<uint8_t>(!x); });
    return true;
  }
  return withType(type, [&](auto tag) -> bool {
    using T = decltype(tag);
    if constexpr (IsComplex<T>::value) return complexUnary<T>(op, in, out, n);
    else if constexpr (std::is_floating_point_v<T>) return floatUnary<T>(op, in, out, n);
    else return intUnary<T>(op, in, out, n, bits);
  });
}

bool mulhiKernel(KType type, const void* a, const void* b, void* out, int64_t n) {
  switch (type) {
    case KType::S8: mulhiLoop<int8_t, int32_t>(a, b, out, n); return true;
    case KType::U8: mulhiLoop<uint8_t, uint32_t>(a, b, out, n); return true;
    case KType::S16: mulhiLoop<int16_t, int32_t>(a, b, out, n); return true;
    case KType::U16: mulhiLoop<uint16_t, uint32_t>(a, b, out, n); return true;
    case KType::S32: mulhiLoop<int32_t, int64_t>(a, b, out, n); return true;
    case KType::U32: mulhiLoop<uint32_t, uint64_t>(a, b, out, n); return true;
    case KType::S64: mulhiLoop<int64_t, __int128>(a, b, out, n); return true;
    case KType::U64: mulhiLoop<uint64_t, unsigned __int128>(a, b, out, n); return true;
    default: return false;
  }
}

bool binaryKernel(BinaryOp op, KType type, const void* a, const void* b, void* out, int64_t n, int bits) {
  if (type == KType::Pred) return predBinary<uint8_t>(op, a, b, out, n);
  return withType(type, [&](auto tag) -> bool {
    using T = decltype(tag);
    if constexpr (IsComplex<T>::value) return complexBinary<T>(op, a, b, out, n);
    else if constexpr (std::is_floating_point_v<T>) return floatBinary<T>(op, a, b, out, n);
    else return intBinary<T>(op, a, b, out, n, bits);
  });
}

bool compareKernel(CompareDir dir, bool totalOrder, KType type, const void* a, const void* b, uint8_t* out,
                   int64_t n) {
  return withType(type, [&](auto tag) -> bool {
    using T = decltype(tag);
    auto* x = static_cast<const T*>(a);
    auto* y = static_cast<const T*>(b);
    if constexpr (IsComplex<T>::value) {
      if (dir != CompareDir::Eq && dir != CompareDir::Ne) return false;
      for (int64_t i = 0; i < n; ++i) out[i] = (x[i] == y[i]) == (dir == CompareDir::Eq);
      return true;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (totalOrder) totalCompareLoop<T>(dir, x, y, out, n);
      else compareLoop<T>(dir, x, y, out, n);
      return true;
    } else {
      compareLoop<T>(dir, x, y, out, n);
      return true;
    }
  });
}

bool isFiniteKernel(KType type, const void* in, uint8_t* out, int64_t n) {
  if (type == KType::F32) {
    auto* a = static_cast<const float*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = std::isfinite(a[i]);
    return true;
  }
  if (type == KType::F64) {
    auto* a = static_cast<const double*>(in);
    for (int64_t i = 0; i < n; ++i) out[i] = std::isfinite(a[i]);
    return true;
  }
  return false;
}

bool complexPartKernel(int part, KType type, const void* in, void* out, int64_t n) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using R = typename T::value_type;
    auto* a = static_cast<const T*>(in);
    auto* o = static_cast<R*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = part == 0 ? a[i].real() : part == 1 ? a[i].imag() : std::abs(a[i]);
    return true;
  };
  if (type == KType::C64) return run(c64{});
  if (type == KType::C128) return run(c128{});
  return false;
}

bool makeComplexKernel(KType partType, const void* re, const void* im, void* out, int64_t n) {
  auto run = [&](auto tag) {
    using R = decltype(tag);
    auto* r = static_cast<const R*>(re);
    auto* m = static_cast<const R*>(im);
    auto* o = static_cast<std::complex<R>*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = std::complex<R>(r[i], m[i]);
    return true;
  };
  if (partType == KType::F32) return run(float{});
  if (partType == KType::F64) return run(double{});
  return false;
}

// complex -> int/pred: via the real part. A function of its own: clang
// checks a discarded `if constexpr` branch of a nested generic lambda
// against the outer lambda's (already known) type.
template <typename From, typename To>
void convertComplexToInteger(const void* in, void* out, int64_t n, bool toPred) {
  auto* a = static_cast<const From*>(in);
  auto* o = static_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i)
    o[i] = toPred ? static_cast<To>(a[i] != From{}) : convertOne<typename From::value_type, To>(a[i].real());
}

void convertKernel(KType from, KType to, const void* in, void* out, int64_t n) {
  bool toPred = to == KType::Pred;
  withType(from, [&](auto fromTag) {
    using From = decltype(fromTag);
    return withType(to, [&](auto toTag) {
      using To = decltype(toTag);
      if constexpr (IsComplex<From>::value && !IsComplex<To>::value && std::is_integral_v<To>) {
        convertComplexToInteger<From, To>(in, out, n, toPred);
      } else {
        convertLoop<From, To>(in, out, n, toPred);
      }
      return true;
    });
  });
}

void truncateIntKernel(KType type, void* data, int64_t n, int bits) {
  withType(type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      if (bits >= static_cast<int>(sizeof(T) * 8)) return true;
      using U = std::make_unsigned_t<T>;
      auto* p = static_cast<T*>(data);
      const U mask = static_cast<U>((U(1) << bits) - 1);
      const U sign = static_cast<U>(U(1) << (bits - 1));
      for (int64_t i = 0; i < n; ++i) {
        U u = static_cast<U>(p[i]) & mask;
        if (std::is_signed_v<T> && (u & sign)) u |= static_cast<U>(~mask);
        p[i] = static_cast<T>(u);
      }
    }
    return true;
  });
}

}  // namespace tpu::eval
