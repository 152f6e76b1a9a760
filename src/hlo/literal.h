// Literals: constant values of a shape. Array data is stored densely in
// row-major (logical, default-layout) order, one element after another, each
// elementTypeInfo(type).byteSize bytes, little-endian:
//   pred: one byte 0/1; s1..s4/u1..u4 and f4/f6 types: one byte per element
//   (low bits; signed values sign-extended); f8 types: one byte; f16/bf16: 2;
//   c64: (f32 re, f32 im); c128: (f64 re, f64 im).
// The layout of the literal's shape does not change the data order.
// An "elided" literal (`{...}` in text) has a shape but no data: element
// accessors read zeros from it.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "hlo/shape.h"

namespace tpu::hlo {

class Literal {
 public:
  Literal() = default;
  // Zero-filled literal of `shape` (tuples get zero-filled elements).
  explicit Literal(Shape shape);
  static Literal zeros(const Shape& shape) { return Literal(shape); }
  // Every element set to `value` (converted to the element type).
  static Literal filled(const Shape& shape, double value);
  // Shape with no data, printed as `{...}`.
  static Literal elided(Shape shape);
  static Literal tuple(std::vector<Literal> elements);
  template <typename T>
  static Literal scalar(ElementType type, T value) {
    Literal l(Shape::scalar(type));
    l.set(0, value);
    return l;
  }

  const Shape& shape() const { return shape_; }
  // Layout changes only (data order is independent of layout).
  Shape& mutableShapeLayoutOnly() { return shape_; }
  bool isElided() const { return elided_; }
  bool isTuple() const { return shape_.isTuple(); }
  int64_t elementCount() const { return count_; }  // array elements (0 for tuples)

  const std::vector<Literal>& tupleElements() const { return elements_; }
  std::vector<Literal>& mutableTupleElements() { return elements_; }

  // Raw bytes (empty when elided or a tuple).
  const std::vector<uint8_t>& data() const { return data_; }
  std::vector<uint8_t>& mutableData() { return data_; }
  uint8_t* rawElement(int64_t linearIndex) { return data_.data() + linearIndex * byteSize_; }
  const uint8_t* rawElement(int64_t linearIndex) const { return data_.data() + linearIndex * byteSize_; }

  // Typed access by row-major linear index, converting from/to the element
  // type. Floats round to nearest even; integers wrap; complex setters from
  // real values set the imaginary part to 0, real getters take the real part.
  double getDouble(int64_t linearIndex) const;
  int64_t getInt(int64_t linearIndex) const;
  uint64_t getUint(int64_t linearIndex) const;
  std::complex<double> getComplex(int64_t linearIndex) const;
  void setDouble(int64_t linearIndex, double value);
  void setInt(int64_t linearIndex, int64_t value);
  void setUint(int64_t linearIndex, uint64_t value);
  void setComplex(int64_t linearIndex, std::complex<double> value);
  // The raw bit pattern of an element (zero-extended; at most 64 bits, so
  // complex types return their real part's bits).
  uint64_t getBits(int64_t linearIndex) const;
  void setBits(int64_t linearIndex, uint64_t bits);

  void set(int64_t i, double v) { setDouble(i, v); }
  void set(int64_t i, float v) { setDouble(i, v); }
  void set(int64_t i, int64_t v) { setInt(i, v); }
  void set(int64_t i, int v) { setInt(i, v); }
  void set(int64_t i, bool v) { setInt(i, v ? 1 : 0); }
  void set(int64_t i, std::complex<double> v) { setComplex(i, v); }

  // Linear (row-major) index of a multi-dimensional index.
  int64_t linearIndex(const std::vector<int64_t>& index) const;

  // Equal shapes (with layout), elided flags and bytes (recursively).
  bool operator==(const Literal& other) const;

 private:
  Shape shape_;
  bool elided_ = false;
  int64_t count_ = 0;
  int byteSize_ = 0;
  std::vector<uint8_t> data_;
  std::vector<Literal> elements_;
};

}  // namespace tpu::hlo
