// Narrow float encode/decode. One generic routine handles every format: the
// value is scaled so that one unit in the last place of the target becomes 1.0,
// rounded once to nearest even in double (exact: every format here has far
// fewer mantissa bits than double), and the resulting integer is the bit
// pattern's magnitude, carries into the exponent field included.
//
// Choices where no IEEE rule exists (matching ml_dtypes, which XLA uses):
//  - f4e2m1fn / f6e2m3fn / f6e3m2fn have neither infinity nor NaN: overflow
//    and ±inf saturate to ±max; NaN encodes as the sign-only pattern (-0).
//  - f8e8m0fnu (unsigned powers of two, no zero): NaN, ±inf, negative values
//    and overflow give 0xFF (its NaN); zero and values below 2^-127 give the
//    smallest value 2^-127 (0x00), the nearest representable one.
#include "support/float_format.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace tpu {

namespace {

constexpr double kP2m127 = 5.877471754111437539843682686111228389e-39;  // 2^-127

const FloatFormatInfo kInfos[] = {
    {"f16", 16, 5, 10, 15, true, true, true, true, 65504.0, 6.103515625e-05},
    {"bf16", 16, 8, 7, 127, true, true, true, true, 3.38953138925153547590470800371487867e+38,
     1.17549435082228750796873653722224568e-38},
    {"f8e5m2", 8, 5, 2, 15, true, true, true, true, 57344.0, 6.103515625e-05},
    {"f8e4m3", 8, 4, 3, 7, true, true, true, true, 240.0, 0.015625},
    {"f8e4m3fn", 8, 4, 3, 7, false, true, true, true, 448.0, 0.015625},
    {"f8e4m3b11fnuz", 8, 4, 3, 11, false, true, false, true, 30.0, 0.0009765625},
    {"f8e5m2fnuz", 8, 5, 2, 16, false, true, false, true, 57344.0, 3.0517578125e-05},
    {"f8e4m3fnuz", 8, 4, 3, 8, false, true, false, true, 240.0, 0.0078125},
    {"f8e3m4", 8, 3, 4, 3, true, true, true, true, 15.5, 0.25},
    {"f8e8m0fnu", 8, 8, 0, 127, false, true, false, false, 1.70141183460469231731687303715884106e+38,
     kP2m127},
    {"f4e2m1fn", 4, 2, 1, 1, false, false, true, true, 6.0, 1.0},
    {"f6e2m3fn", 6, 2, 3, 1, false, false, true, true, 7.5, 1.0},
    {"f6e3m2fn", 6, 3, 2, 3, false, false, true, true, 28.0, 0.25},
};

// NaN layouts: IEEE-like (exponent all ones, mantissa non-zero), "fn" (only
// all-ones magnitude), "fnuz" (only the sign-only pattern), or none.
enum class NanKind { Ieee, AllOnes, NegativeZero, None };

NanKind nanKind(const FloatFormatInfo& f) {
  if (!f.hasNaN) return NanKind::None;
  if (f.hasInfinity) return NanKind::Ieee;
  if (!f.hasNegativeZero && f.hasSign) return NanKind::NegativeZero;
  return NanKind::AllOnes;  // f8e4m3fn, and f8e8m0fnu (0xFF)
}

uint32_t signBit(const FloatFormatInfo& f) { return f.hasSign ? 1u << (f.totalBits - 1) : 0u; }

// Largest finite magnitude as a bit pattern (sign bit clear).
uint32_t maxFiniteBits(const FloatFormatInfo& f) {
  uint32_t magnitudeOnes = (1u << (f.exponentBits + f.mantissaBits)) - 1;
  switch (nanKind(f)) {
    case NanKind::Ieee: return magnitudeOnes - (1u << f.mantissaBits);  // exponent all ones is inf/NaN
    case NanKind::AllOnes: return magnitudeOnes - 1;
    case NanKind::NegativeZero:
    case NanKind::None: return magnitudeOnes;
  }
  return magnitudeOnes;
}

uint32_t nanBits(const FloatFormatInfo& f, bool negative) {
  uint32_t magnitudeOnes = (1u << (f.exponentBits + f.mantissaBits)) - 1;
  switch (nanKind(f)) {
    case NanKind::Ieee:
      // Quiet NaN: exponent all ones and the top mantissa bit (or the only one).
      return (negative ? signBit(f) : 0u) | (((1u << f.exponentBits) - 1) << f.mantissaBits) |
             (f.mantissaBits ? 1u << (f.mantissaBits - 1) : 1u);
    case NanKind::AllOnes: return (negative ? signBit(f) : 0u) | magnitudeOnes;
    case NanKind::NegativeZero:
    case NanKind::None: return signBit(f);
  }
  return 0;
}

// Round a non-negative double to the nearest integer, ties to even.
double roundHalfEven(double x) {
  double r = std::floor(x);
  double d = x - r;
  if (d > 0.5 || (d == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

uint32_t encodeE8M0(double value) {
  if (std::isnan(value) || std::isinf(value) || value < 0) return 0xFF;
  if (value == 0) return 0x00;
  int e;
  double frac = std::frexp(value, &e);  // value = frac * 2^e, frac in [0.5, 1)
  double m = frac * 2.0;                // value = m * 2^(e-1), m in [1, 2)
  long field = static_cast<long>(e) - 1 + 127;
  if (m > 1.5 || (m == 1.5 && (field & 1))) ++field;
  if (field < 0) return 0x00;
  if (field > 254) return 0xFF;
  return static_cast<uint32_t>(field);
}

}  // namespace

const FloatFormatInfo& floatFormatInfo(FloatFormat format) {
  return kInfos[static_cast<int>(format)];
}

std::optional<FloatFormat> floatFormatFromName(std::string_view name) {
  for (size_t i = 0; i < std::size(kInfos); ++i)
    if (kInfos[i].name == name) return static_cast<FloatFormat>(i);
  return std::nullopt;
}

bool isNaNBits(FloatFormat format, uint32_t bits) {
  const FloatFormatInfo& f = floatFormatInfo(format);
  uint32_t mask = (f.totalBits == 32) ? ~0u : (1u << f.totalBits) - 1;
  bits &= mask;
  uint32_t magnitude = bits & ~signBit(f);
  uint32_t magnitudeOnes = (1u << (f.exponentBits + f.mantissaBits)) - 1;
  switch (nanKind(f)) {
    case NanKind::Ieee:
      return (magnitude >> f.mantissaBits) == (1u << f.exponentBits) - 1 &&
             (magnitude & ((1u << f.mantissaBits) - 1)) != 0;
    case NanKind::AllOnes: return magnitude == magnitudeOnes;
    case NanKind::NegativeZero: return bits == signBit(f);
    case NanKind::None: return false;
  }
  return false;
}

uint32_t encodeFloat(FloatFormat format, double value) {
  if (format == FloatFormat::F8E8M0FNU) return encodeE8M0(value);
  const FloatFormatInfo& f = floatFormatInfo(format);
  bool negative = std::signbit(value);
  if (std::isnan(value)) return nanBits(f, negative);
  uint32_t sign = negative ? signBit(f) : 0u;
  uint32_t maxBits = maxFiniteBits(f);
  auto overflow = [&]() -> uint32_t {
    if (f.hasInfinity) return sign | (((1u << f.exponentBits) - 1) << f.mantissaBits);
    if (f.hasNaN) return nanBits(f, negative);
    return sign | maxBits;
  };
  double a = std::fabs(value);
  if (std::isinf(a)) return overflow();
  if (a == 0) return f.hasNegativeZero ? sign : 0u;

  const int minExponent = 1 - f.exponentBias;  // unbiased exponent of the smallest normal
  int e;
  std::frexp(a, &e);
  int exponent = e - 1;  // a = 1.xxx * 2^exponent
  if (exponent > f.exponentBias + 4) return overflow();  // far beyond every format's range
  // Scale so one ulp at this exponent (or the subnormal quantum) is 1.0.
  int quantumExponent = (exponent < minExponent ? minExponent : exponent) - f.mantissaBits;
  double m = roundHalfEven(std::ldexp(a, -quantumExponent));
  uint64_t magnitude;
  if (exponent < minExponent) {
    magnitude = static_cast<uint64_t>(m);  // subnormal; m == 2^M becomes the smallest normal
  } else {
    // m in [2^M, 2^(M+1)]; a carry to 2^(M+1) rolls into the exponent field.
    magnitude = (static_cast<uint64_t>(exponent + f.exponentBias) << f.mantissaBits) +
                static_cast<uint64_t>(m) - (uint64_t{1} << f.mantissaBits);
  }
  if (magnitude > maxBits) return overflow();
  if (magnitude == 0 && !f.hasNegativeZero) return 0u;
  return sign | static_cast<uint32_t>(magnitude);
}

double decodeFloat(FloatFormat format, uint32_t bits) {
  const FloatFormatInfo& f = floatFormatInfo(format);
  bits &= (1u << f.totalBits) - 1;
  if (isNaNBits(format, bits)) {
    // NaNs keep their sign where the format has signed NaNs (as ml_dtypes
    // widens them); the fnuz NaN is the negative-zero code, not a sign.
    double nan = std::numeric_limits<double>::quiet_NaN();
    return f.hasNegativeZero && (bits & signBit(f)) ? -nan : nan;
  }
  if (format == FloatFormat::F8E8M0FNU) return std::ldexp(1.0, static_cast<int>(bits) - 127);
  bool negative = (bits & signBit(f)) != 0;
  uint32_t magnitude = bits & ~signBit(f);
  uint32_t exponentField = magnitude >> f.mantissaBits;
  uint32_t mantissa = magnitude & ((1u << f.mantissaBits) - 1);
  double v;
  if (f.hasInfinity && exponentField == (1u << f.exponentBits) - 1) {
    v = std::numeric_limits<double>::infinity();
  } else if (exponentField == 0) {
    v = std::ldexp(static_cast<double>(mantissa), 1 - f.exponentBias - f.mantissaBits);
  } else {
    v = std::ldexp(static_cast<double>(mantissa + (1u << f.mantissaBits)),
                   static_cast<int>(exponentField) - f.exponentBias - f.mantissaBits);
  }
  return negative ? -v : v;
}

uint16_t floatToBf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return static_cast<uint16_t>(u >> 16);
}

float bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t floatToHalf(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                                                // below 2^-14: subnormal
    uint32_t exponent = a >> 23;
    uint32_t shift = 126 - exponent;  // >= 14
    if (shift > 24) return static_cast<uint16_t>(sign);
    uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;  // f32 subnormals returned above (shift 126)
    uint32_t r = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (a - (112u << 23)) >> 13;
  uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {
    float v = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace tpu
