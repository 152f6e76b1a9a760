// Narrow floating-point formats (f16, bf16, the f8/f6/f4 families): encoding
// from double/float with round-to-nearest-even and decoding back. One place
// for these rules, used by the HLO literal parser, the interpreter and the
// simulator alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tpu {

enum class FloatFormat : uint8_t {
  F16,
  BF16,
  F8E5M2,
  F8E4M3,
  F8E4M3FN,
  F8E4M3B11FNUZ,
  F8E5M2FNUZ,
  F8E4M3FNUZ,
  F8E3M4,
  F8E8M0FNU,
  F4E2M1FN,
  F6E2M3FN,
  F6E3M2FN,
};

struct FloatFormatInfo {
  std::string_view name;  // XLA spelling, e.g. "f8e4m3fn"
  int totalBits;
  int exponentBits;
  int mantissaBits;
  int exponentBias;
  bool hasInfinity;
  bool hasNaN;
  bool hasNegativeZero;  // false for the *fnuz and e8m0 formats
  bool hasSign;          // false for f8e8m0fnu
  double maxFinite;
  double minNormal;
};

const FloatFormatInfo& floatFormatInfo(FloatFormat format);
// By XLA spelling ("bf16", "f8e4m3fn", ...).
std::optional<FloatFormat> floatFormatFromName(std::string_view name);
// Whether `bits` (low totalBits used) is a NaN of the format.
bool isNaNBits(FloatFormat format, uint32_t bits);

// Rounds to nearest even. Overflow: infinity where the format has one;
// otherwise NaN where it has one (XLA's convert semantics for *fn types);
// otherwise the largest finite value. NaN input gives the format's NaN
// (formats without NaN: the sign-only pattern, as ml_dtypes does).
// f8e8m0fnu: negative/NaN/inf/overflow give 0xFF, zero and tiny give 0x00.
uint32_t encodeFloat(FloatFormat format, double value);
double decodeFloat(FloatFormat format, uint32_t bits);

// Fast paths for the two formats on hot paths.
uint16_t floatToBf16(float value);  // round to nearest even, NaN stays NaN
float bf16ToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

}  // namespace tpu
