// Runtime values of the interpreter. An array value owns its elements
// through a shared, immutable buffer (tuple projection, reshape, copy and
// bitcast share data instead of copying); a tuple holds its elements. The
// element storage is the one of hlo::Literal: row-major (logical order),
// elementTypeInfo(type).byteSize bytes per element, narrow ints
// sign-extended/masked in one byte, narrow floats in their own encoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "eval/elementwise.h"
#include "hlo/literal.h"
#include "support/float_format.h"

namespace tpu::eval {

// How the kernels compute on an element type: the compute type, the
// logical integer width, and for narrow floats the storage format that is
// widened to f32 around every op.
struct TypeRep {
  KType k = KType::F32;
  int bits = 32;
  std::optional<FloatFormat> narrow;
  int storageBytes = 4;
};

// Nullopt for token/opaque/tuple.
std::optional<TypeRep> typeRep(hlo::ElementType type);

class Value {
 public:
  enum class Kind : uint8_t { Array, Tuple, Token };

  Value() : kind_(Kind::Token) {}
  // An array with uninitialised elements.
  static Value array(hlo::ElementType type, std::vector<int64_t> dims);
  static Value zeros(hlo::ElementType type, std::vector<int64_t> dims);
  static Value tuple(std::vector<Value> elements);
  static Value token() { return Value(); }
  // Same data, other dimensions (element count must match).
  Value reshaped(std::vector<int64_t> dims) const;
  // Same bytes read as another type of the same storage size.
  Value retyped(hlo::ElementType type) const;

  Kind kind() const { return kind_; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isTuple() const { return kind_ == Kind::Tuple; }
  bool isToken() const { return kind_ == Kind::Token; }

  hlo::ElementType type() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t count() const { return count_; }
  int elementBytes() const { return elementBytes_; }
  size_t byteSize() const { return static_cast<size_t>(count_) * static_cast<size_t>(elementBytes_); }

  const uint8_t* raw() const { return data_.get(); }
  // Only for values being built (buffers are shared once handed out).
  uint8_t* mutableRaw() const { return data_.get(); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_.get()); }
  template <typename T>
  T* mutableAs() const { return reinterpret_cast<T*>(data_.get()); }

  const std::vector<Value>& elements() const { return elements_; }
  std::vector<Value>& mutableElements() { return elements_; }

  // A scalar index operand read as int64 (any integer type; unsigned values
  // above INT64_MAX saturate).
  int64_t scalarAsInt(int64_t i = 0) const;

 private:
  Kind kind_;
  hlo::ElementType type_ = hlo::ElementType::Invalid;
  std::vector<int64_t> dims_;
  int64_t count_ = 0;
  int elementBytes_ = 0;
  std::shared_ptr<uint8_t[]> data_;
  std::vector<Value> elements_;
};

// A deep copy of the array's data into a fresh buffer (for in-place updates).
Value cloneArray(const Value& v);

// Literal <-> Value. Elided literals must be filled before (fillElidedConstant).
Value valueFromLiteral(const hlo::Literal& literal);
hlo::Literal literalFromValue(const Value& value);

// Widens an array to its compute representation: narrow floats become f32
// (returned buffer), everything else is returned as is (no copy).
struct ComputeView {
  const void* data = nullptr;
  std::vector<float> widened;
};
ComputeView computeView(const Value& v, const TypeRep& rep);

// Writes compute-type results (f32 for narrow floats) into `out`'s storage,
// rounding narrow floats and truncating narrow ints.
void storeFromCompute(const TypeRep& rep, const void* compute, Value& out);

}  // namespace tpu::eval
