#include "hlo/element_type.h"

#include <array>

namespace tpu::hlo {
namespace {

using FF = FloatFormat;
constexpr std::optional<FloatFormat> kNone = std::nullopt;

// Indexed by ElementType.
const std::array<ElementTypeInfo, kElementTypeCount> kInfo = {{
    {"invalid", 0, 0, false, false, false, false, false, kNone},
    {"pred", 8, 1, false, false, false, false, true, kNone},
    {"s1", 1, 1, false, true, true, false, true, kNone},
    {"s2", 2, 1, false, true, true, false, true, kNone},
    {"s4", 4, 1, false, true, true, false, true, kNone},
    {"s8", 8, 1, false, true, true, false, true, kNone},
    {"s16", 16, 2, false, true, true, false, true, kNone},
    {"s32", 32, 4, false, true, true, false, true, kNone},
    {"s64", 64, 8, false, true, true, false, true, kNone},
    {"u1", 1, 1, false, true, false, false, true, kNone},
    {"u2", 2, 1, false, true, false, false, true, kNone},
    {"u4", 4, 1, false, true, false, false, true, kNone},
    {"u8", 8, 1, false, true, false, false, true, kNone},
    {"u16", 16, 2, false, true, false, false, true, kNone},
    {"u32", 32, 4, false, true, false, false, true, kNone},
    {"u64", 64, 8, false, true, false, false, true, kNone},
    {"f16", 16, 2, true, false, true, false, true, FF::F16},
    {"bf16", 16, 2, true, false, true, false, true, FF::BF16},
    {"f32", 32, 4, true, false, true, false, true, kNone},
    {"f64", 64, 8, true, false, true, false, true, kNone},
    {"f8e5m2", 8, 1, true, false, true, false, true, FF::F8E5M2},
    {"f8e4m3", 8, 1, true, false, true, false, true, FF::F8E4M3},
    {"f8e4m3fn", 8, 1, true, false, true, false, true, FF::F8E4M3FN},
    {"f8e4m3b11fnuz", 8, 1, true, false, true, false, true, FF::F8E4M3B11FNUZ},
    {"f8e5m2fnuz", 8, 1, true, false, true, false, true, FF::F8E5M2FNUZ},
    {"f8e4m3fnuz", 8, 1, true, false, true, false, true, FF::F8E4M3FNUZ},
    {"f8e3m4", 8, 1, true, false, true, false, true, FF::F8E3M4},
    {"f8e8m0fnu", 8, 1, true, false, false, false, true, FF::F8E8M0FNU},
    {"f4e2m1fn", 4, 1, true, false, true, false, true, FF::F4E2M1FN},
    {"f6e2m3fn", 6, 1, true, false, true, false, true, FF::F6E2M3FN},
    {"f6e3m2fn", 6, 1, true, false, true, false, true, FF::F6E3M2FN},
    {"c64", 64, 8, false, false, true, true, true, kNone},
    {"c128", 128, 16, false, false, true, true, true, kNone},
    {"token", 0, 0, false, false, false, false, false, kNone},
    {"opaque", 0, 0, false, false, false, false, false, kNone},
    {"tuple", 0, 0, false, false, false, false, false, kNone},
}};

}  // namespace

const ElementTypeInfo& elementTypeInfo(ElementType type) { return kInfo[static_cast<size_t>(type)]; }

std::optional<ElementType> elementTypeFromName(std::string_view name) {
  // Hot in the text parser: dispatch on the first letter, compare few names.
  if (name.size() < 2 || name.size() > 13) return std::nullopt;
  auto intType = [&](ElementType first) -> std::optional<ElementType> {
    std::string_view bits = name.substr(1);
    static constexpr std::string_view kBits[] = {"1", "2", "4", "8", "16", "32", "64"};
    for (int i = 0; i < 7; ++i)
      if (bits == kBits[i]) return static_cast<ElementType>(static_cast<int>(first) + i);
    return std::nullopt;
  };
  switch (name[0]) {
    case 's': return intType(ElementType::S1);
    case 'u': return intType(ElementType::U1);
    case 'p': return name == "pred" ? std::optional(ElementType::Pred) : std::nullopt;
    case 'b': return name == "bf16" ? std::optional(ElementType::BF16) : std::nullopt;
    case 't': return name == "token" ? std::optional(ElementType::Token) : std::nullopt;
    case 'o': return name == "opaque" ? std::optional(ElementType::Opaque) : std::nullopt;
    case 'c':
      if (name == "c64") return ElementType::C64;
      if (name == "c128") return ElementType::C128;
      return std::nullopt;
    case 'f':
      if (name == "f32") return ElementType::F32;
      if (name == "f16") return ElementType::F16;
      if (name == "f64") return ElementType::F64;
      for (int i = static_cast<int>(ElementType::F8E5M2); i <= static_cast<int>(ElementType::F6E3M2FN); ++i)
        if (kInfo[static_cast<size_t>(i)].name == name) return static_cast<ElementType>(i);
      return std::nullopt;
    default: return std::nullopt;
  }
}

ElementType complexComponentType(ElementType t) {
  if (t == ElementType::C64) return ElementType::F32;
  if (t == ElementType::C128) return ElementType::F64;
  return t;
}

}  // namespace tpu::hlo
