#include "support/float_format.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace tpu {
namespace {

constexpr FloatFormat kAllFormats[] = {
    FloatFormat::F16,        FloatFormat::BF16,          FloatFormat::F8E5M2,     FloatFormat::F8E4M3,
    FloatFormat::F8E4M3FN,   FloatFormat::F8E4M3B11FNUZ, FloatFormat::F8E5M2FNUZ, FloatFormat::F8E4M3FNUZ,
    FloatFormat::F8E3M4,     FloatFormat::F8E8M0FNU,     FloatFormat::F4E2M1FN,   FloatFormat::F6E2M3FN,
    FloatFormat::F6E3M2FN,
};

std::string nameOf(FloatFormat f) { return std::string(floatFormatInfo(f).name); }

TEST(FloatFormat, NamesRoundTrip) {
  for (FloatFormat f : kAllFormats) {
    auto back = floatFormatFromName(floatFormatInfo(f).name);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, f);
  }
  EXPECT_FALSE(floatFormatFromName("f7").has_value());
}

// Every bit pattern decodes to a value that encodes back to the same pattern
// (NaNs to some NaN), and the info table's max/min agree with the patterns.
TEST(FloatFormat, ExhaustiveDecodeEncode) {
  for (FloatFormat f : kAllFormats) {
    const FloatFormatInfo& info = floatFormatInfo(f);
    uint32_t count = 1u << info.totalBits;
    double maxSeen = 0, minNormalSeen = std::numeric_limits<double>::infinity();
    int nanCount = 0;
    for (uint32_t bits = 0; bits < count; ++bits) {
      double v = decodeFloat(f, bits);
      uint32_t back = encodeFloat(f, v);
      if (std::isnan(v)) {
        ++nanCount;
        EXPECT_TRUE(isNaNBits(f, back)) << nameOf(f) << " bits " << bits;
        continue;
      }
      EXPECT_FALSE(isNaNBits(f, bits));
      EXPECT_EQ(back, bits) << nameOf(f) << " value " << v;
      if (std::isfinite(v)) maxSeen = std::max(maxSeen, std::fabs(v));
      uint32_t exponentField = (bits >> info.mantissaBits) & ((1u << info.exponentBits) - 1);
      if (v != 0 && std::isfinite(v) && (exponentField != 0 || f == FloatFormat::F8E8M0FNU))
        minNormalSeen = std::min(minNormalSeen, std::fabs(v));
    }
    EXPECT_EQ(maxSeen, info.maxFinite) << nameOf(f);
    EXPECT_EQ(minNormalSeen, info.minNormal) << nameOf(f);
    EXPECT_EQ(nanCount > 0, info.hasNaN) << nameOf(f);
    if (info.hasNaN && !info.hasInfinity && !info.hasNegativeZero) {
      EXPECT_EQ(nanCount, 1) << nameOf(f);
    }
  }
}

// Decoding is monotonic over positive patterns (in pattern order), so the
// midpoint test below covers every adjacent pair.
std::vector<std::pair<uint32_t, double>> positiveFinite(FloatFormat f) {
  const FloatFormatInfo& info = floatFormatInfo(f);
  uint32_t limit = info.hasSign ? 1u << (info.totalBits - 1) : 1u << info.totalBits;
  std::vector<std::pair<uint32_t, double>> out;
  for (uint32_t bits = 0; bits < limit; ++bits) {
    double v = decodeFloat(f, bits);
    if (std::isfinite(v)) out.push_back({bits, v});
  }
  return out;
}

TEST(FloatFormat, Monotonic) {
  for (FloatFormat f : kAllFormats) {
    auto values = positiveFinite(f);
    for (size_t i = 1; i < values.size(); ++i)
      EXPECT_LT(values[i - 1].second, values[i].second) << nameOf(f) << " at " << values[i].first;
  }
}

// Exactly halfway between neighbours rounds to the even pattern; a hair
// either side rounds to the nearer one. Both signs.
TEST(FloatFormat, RoundToNearestEvenTies) {
  for (FloatFormat f : kAllFormats) {
    const FloatFormatInfo& info = floatFormatInfo(f);
    auto values = positiveFinite(f);
    uint32_t sign = info.hasSign ? 1u << (info.totalBits - 1) : 0;
    for (size_t i = 1; i < values.size(); ++i) {
      auto [loBits, lo] = values[i - 1];
      auto [hiBits, hi] = values[i];
      double mid = lo + (hi - lo) / 2;
      uint32_t even = (loBits & 1) ? hiBits : loBits;
      if (f == FloatFormat::F8E8M0FNU) {
        // Powers of two: the tie of the bit-level rounding is at 1.5*lo.
        mid = lo * 1.5;
      }
      EXPECT_EQ(encodeFloat(f, mid), even) << nameOf(f) << " mid " << mid;
      double eps = (hi - lo) * 1e-6;
      EXPECT_EQ(encodeFloat(f, mid - eps), loBits) << nameOf(f) << " mid " << mid;
      EXPECT_EQ(encodeFloat(f, mid + eps), hiBits) << nameOf(f) << " mid " << mid;
      if (info.hasSign) {
        uint32_t negEven = even | sign;
        if (even == 0 && !info.hasNegativeZero) negEven = 0;
        EXPECT_EQ(encodeFloat(f, -mid), negEven) << nameOf(f) << " mid " << -mid;
      }
    }
  }
}

TEST(FloatFormat, Overflow) {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  // f16: 65520 is the tie between 65504 and inf: goes to inf (even).
  EXPECT_EQ(encodeFloat(FloatFormat::F16, 65519.99), 0x7BFFu);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, 65520.0), 0x7C00u);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, -1e30), 0xFC00u);
  EXPECT_EQ(encodeFloat(FloatFormat::BF16, 1e300), 0x7F80u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E5M2, 61440.0), 0x7Cu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E5M2, 61439.0), 0x7Bu);
  // e4m3fn: 464 ties to 448 (even), above it is NaN.
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FN, 464.0), 0x7Eu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FN, 465.0), 0x7Fu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FN, -1e9), 0xFFu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FN, inf), 0x7Fu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3, 1000.0), 0x78u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E3M4, 16.0), 0x70u);
  // fnuz: a single NaN, 0x80.
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FNUZ, 1e6), 0x80u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E5M2FNUZ, -inf), 0x80u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3B11FNUZ, 30.9), 0x7Fu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3B11FNUZ, 31.0), 0x80u);  // tie with 32: odd 0x7F rounds up
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3B11FNUZ, 32.0), 0x80u);
  // No NaN, no inf: saturate.
  EXPECT_EQ(encodeFloat(FloatFormat::F4E2M1FN, 100.0), 0x7u);
  EXPECT_EQ(encodeFloat(FloatFormat::F4E2M1FN, -inf), 0xFu);
  EXPECT_EQ(encodeFloat(FloatFormat::F6E2M3FN, 8.0), 0x1Fu);
  EXPECT_EQ(encodeFloat(FloatFormat::F6E3M2FN, 1e9), 0x1Fu);
  // e8m0.
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, 1.0), 127u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, 1e300), 0xFFu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, -1.0), 0xFFu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, 0.0), 0x00u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, 1e-300), 0x00u);
  // NaN.
  EXPECT_EQ(encodeFloat(FloatFormat::F16, nan), 0x7E00u);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, -nan), 0xFE00u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FNUZ, nan), 0x80u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FN, nan), 0x7Fu);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E5M2, nan), 0x7Eu);
  EXPECT_EQ(encodeFloat(FloatFormat::F4E2M1FN, nan), 0x8u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E8M0FNU, nan), 0xFFu);
}

TEST(FloatFormat, SignedZeroAndSubnormals) {
  EXPECT_EQ(encodeFloat(FloatFormat::F16, -0.0), 0x8000u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FNUZ, -0.0), 0x00u);
  EXPECT_EQ(encodeFloat(FloatFormat::F8E4M3FNUZ, -1e-30), 0x00u);
  // Smallest f16 subnormal 2^-24; half of it ties to zero, a bit more rounds up.
  EXPECT_EQ(encodeFloat(FloatFormat::F16, std::ldexp(1.0, -24)), 0x0001u);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, std::ldexp(1.0, -25)), 0x0000u);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, std::ldexp(1.0, -25) * 1.0001), 0x0001u);
  EXPECT_EQ(encodeFloat(FloatFormat::F16, std::ldexp(3.0, -25)), 0x0002u);
  // Largest subnormal rounding up into the smallest normal.
  EXPECT_EQ(encodeFloat(FloatFormat::F16, std::ldexp(1023.7, -24)), 0x0400u);
  EXPECT_EQ(decodeFloat(FloatFormat::F8E4M3FN, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(decodeFloat(FloatFormat::F4E2M1FN, 0x1), 0.5);
}

// The double encoder rounds once; the float fast paths must agree with it on
// every float (sampled with a stride that visits all exponents).
TEST(FloatFormat, FastPathsMatchGeneric) {
  for (uint64_t i = 0; i <= 0xFFFFFFFFull; i += 997) {
    uint32_t u = static_cast<uint32_t>(i);
    float x = std::bit_cast<float>(u);
    if (std::isnan(x)) {
      EXPECT_TRUE(isNaNBits(FloatFormat::BF16, floatToBf16(x)));
      EXPECT_TRUE(isNaNBits(FloatFormat::F16, floatToHalf(x)));
      continue;
    }
    ASSERT_EQ(floatToBf16(x), encodeFloat(FloatFormat::BF16, x)) << std::hex << u;
    ASSERT_EQ(floatToHalf(x), encodeFloat(FloatFormat::F16, x)) << std::hex << u;
  }
  for (uint32_t b = 0; b < 65536; ++b) {
    double g = decodeFloat(FloatFormat::BF16, b);
    float fb = bf16ToFloat(static_cast<uint16_t>(b));
    float fh = halfToFloat(static_cast<uint16_t>(b));
    double gh = decodeFloat(FloatFormat::F16, b);
    if (std::isnan(g)) {
      EXPECT_TRUE(std::isnan(fb));
    } else {
      EXPECT_EQ(fb, g);
    }
    if (std::isnan(gh)) {
      EXPECT_TRUE(std::isnan(fh));
    } else {
      EXPECT_EQ(fh, gh);
    }
    if (!std::isnan(gh)) {
      EXPECT_EQ(std::signbit(fh), std::signbit(gh));
    }
  }
}

#if defined(__FLT16_MAX__)
// Compare with the compiler's own _Float16 conversions.
TEST(FloatFormat, HalfMatchesHardware) {
  for (uint32_t b = 0; b < 65536; ++b) {
    _Float16 h = std::bit_cast<_Float16>(static_cast<uint16_t>(b));
    float expected = static_cast<float>(h);
    float got = halfToFloat(static_cast<uint16_t>(b));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected)) << b;
  }
  for (uint64_t i = 0; i <= 0xFFFFFFFFull; i += 331) {
    float x = std::bit_cast<float>(static_cast<uint32_t>(i));
    if (std::isnan(x)) continue;
    uint16_t expected = std::bit_cast<uint16_t>(static_cast<_Float16>(x));
    ASSERT_EQ(floatToHalf(x), expected) << std::hex << i;
    // From double, too (a direct conversion, no double rounding).
    double d = static_cast<double>(x) * (1.0 + 0x1p-30);
    ASSERT_EQ(encodeFloat(FloatFormat::F16, d), std::bit_cast<uint16_t>(static_cast<_Float16>(d)))
        << std::hex << i;
  }
}
#endif

// Formats with signed NaNs decode them with their sign, so a NaN code
// survives decoding and encoding (the simulator's registers hold decoded
// values); the fnuz NaN has no sign.
TEST(FloatFormat, NaNsKeepTheirSign) {
  for (FloatFormat f : {FloatFormat::F8E4M3FN, FloatFormat::F8E5M2, FloatFormat::F8E4M3, FloatFormat::F8E3M4,
                        FloatFormat::BF16, FloatFormat::F16}) {
    const FloatFormatInfo& info = floatFormatInfo(f);
    uint32_t sign = 1u << (info.totalBits - 1);
    uint32_t nan = encodeFloat(f, std::numeric_limits<double>::quiet_NaN());
    EXPECT_FALSE(std::signbit(decodeFloat(f, nan))) << nameOf(f);
    EXPECT_TRUE(std::signbit(decodeFloat(f, nan | sign))) << nameOf(f);
    EXPECT_EQ(encodeFloat(f, decodeFloat(f, nan | sign)), nan | sign) << nameOf(f);
  }
  EXPECT_FALSE(std::signbit(decodeFloat(FloatFormat::F8E4M3FNUZ, 0x80)));
}

}  // namespace
}  // namespace tpu
