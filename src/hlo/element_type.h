// Element (primitive) types of HLO shapes: every XLA PrimitiveType, with one
// info table for names, widths and classification.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "support/float_format.h"

namespace tpu::hlo {

// Order is ours (not XLA's proto numbering); names are XLA's text spellings.
enum class ElementType : uint8_t {
  Invalid,
  Pred,
  S1, S2, S4, S8, S16, S32, S64,
  U1, U2, U4, U8, U16, U32, U64,
  F16, BF16, F32, F64,
  F8E5M2, F8E4M3, F8E4M3FN, F8E4M3B11FNUZ, F8E5M2FNUZ, F8E4M3FNUZ, F8E3M4, F8E8M0FNU,
  F4E2M1FN, F6E2M3FN, F6E3M2FN,
  C64, C128,
  Token,
  Opaque,
  Tuple,  // only as Shape::elementType() of tuple shapes; not a text keyword
};

inline constexpr int kElementTypeCount = static_cast<int>(ElementType::Tuple) + 1;

struct ElementTypeInfo {
  std::string_view name;  // "f32", "bf16", "pred", ...
  int bitWidth;           // logical bits per element (s4: 4, pred: 8, c64: 64); 0 for token/opaque/tuple
  int byteSize;           // storage bytes per element in literals and dense buffers: sub-byte types take 1
  bool isFloat;           // real floating point (not complex)
  bool isInteger;         // signed or unsigned integer (not pred)
  bool isSigned;          // signed integers and all floats/complex
  bool isComplex;
  bool isArray;           // may be the element type of an array shape (not token/opaque/tuple)
  std::optional<FloatFormat> floatFormat;  // narrow floats (f16, bf16, f8*, f6*, f4*) only
};

const ElementTypeInfo& elementTypeInfo(ElementType type);
inline std::string_view elementTypeName(ElementType type) { return elementTypeInfo(type).name; }
// By text spelling; nullopt for unknown names and for "tuple"/"invalid".
std::optional<ElementType> elementTypeFromName(std::string_view name);

inline bool isFloatType(ElementType t) { return elementTypeInfo(t).isFloat; }
inline bool isIntegerType(ElementType t) { return elementTypeInfo(t).isInteger; }
inline bool isSignedIntegerType(ElementType t) { return isIntegerType(t) && elementTypeInfo(t).isSigned; }
inline bool isUnsignedIntegerType(ElementType t) { return isIntegerType(t) && !elementTypeInfo(t).isSigned; }
inline bool isComplexType(ElementType t) { return elementTypeInfo(t).isComplex; }
inline bool isArrayElementType(ElementType t) { return elementTypeInfo(t).isArray; }
// Component type of complex types (c64 -> f32, c128 -> f64); the type itself otherwise.
ElementType complexComponentType(ElementType t);

}  // namespace tpu::hlo
