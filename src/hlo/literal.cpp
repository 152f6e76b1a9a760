#include "hlo/literal.h"

#include <cmath>
#include <cstring>

namespace tpu::hlo {

namespace {

uint64_t loadBits(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(bytes));  // little-endian host
  return v;
}

void storeBits(uint8_t* p, int bytes, uint64_t v) { std::memcpy(p, &v, static_cast<size_t>(bytes)); }

// Sign-extends the low `bits` bits of v.
int64_t signExtend(uint64_t v, int bits) {
  if (bits >= 64) return static_cast<int64_t>(v);
  uint64_t m = uint64_t{1} << (bits - 1);
  v &= (uint64_t{1} << bits) - 1;
  return static_cast<int64_t>((v ^ m) - m);
}

int64_t doubleToInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

}  // namespace

Literal::Literal(Shape shape) : shape_(std::move(shape)) {
  if (shape_.isTuple()) {
    for (const Shape& e : shape_.tupleElements()) elements_.emplace_back(e);
    return;
  }
  if (!shape_.isArray()) return;
  count_ = shape_.elementCount().value_or(0);
  byteSize_ = elementTypeInfo(shape_.elementType()).byteSize;
  data_.assign(static_cast<size_t>(count_ * byteSize_), 0);
}

Literal Literal::filled(const Shape& shape, double value) {
  Literal l(shape);
  for (int64_t i = 0; i < l.count_; ++i) l.setDouble(i, value);
  for (Literal& e : l.elements_) e = filled(e.shape(), value);
  return l;
}

Literal Literal::elided(Shape shape) {
  Literal l;
  l.shape_ = std::move(shape);
  l.elided_ = true;
  if (l.shape_.isArray()) {
    l.count_ = l.shape_.elementCount().value_or(0);
    l.byteSize_ = elementTypeInfo(l.shape_.elementType()).byteSize;
  }
  return l;
}

Literal Literal::tuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  shapes.reserve(elements.size());
  for (const Literal& e : elements) shapes.push_back(e.shape());
  Literal l;
  l.shape_ = Shape::tuple(std::move(shapes));
  l.elements_ = std::move(elements);
  return l;
}

uint64_t Literal::getBits(int64_t i) const {
  if (elided_ || i < 0 || i >= count_) return 0;
  int b = byteSize_ > 8 ? byteSize_ / 2 : byteSize_;
  return loadBits(rawElement(i), b);
}

void Literal::setBits(int64_t i, uint64_t bits) {
  if (elided_ || i < 0 || i >= count_) return;
  int b = byteSize_ > 8 ? byteSize_ / 2 : byteSize_;
  storeBits(rawElement(i), b, bits);
}

double Literal::getDouble(int64_t i) const {
  ElementType t = shape_.elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (elided_ || i < 0 || i >= count_) return 0;
  const uint8_t* p = rawElement(i);
  if (info.floatFormat) return decodeFloat(*info.floatFormat, static_cast<uint32_t>(loadBits(p, byteSize_)));
  switch (t) {
    case ElementType::F32:
    case ElementType::C64: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case ElementType::F64:
    case ElementType::C128: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    default: break;
  }
  if (info.isInteger && !info.isSigned) return static_cast<double>(getUint(i));
  return static_cast<double>(getInt(i));
}

int64_t Literal::getInt(int64_t i) const {
  ElementType t = shape_.elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (elided_ || i < 0 || i >= count_) return 0;
  if (t == ElementType::Pred) return rawElement(i)[0] != 0;
  if (info.isInteger) {
    uint64_t v = loadBits(rawElement(i), byteSize_);
    return info.isSigned ? signExtend(v, info.bitWidth) : static_cast<int64_t>(v);
  }
  return doubleToInt64(getDouble(i));
}

uint64_t Literal::getUint(int64_t i) const {
  ElementType t = shape_.elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (elided_ || i < 0 || i >= count_) return 0;
  if (info.isInteger && !info.isSigned) {
    uint64_t v = loadBits(rawElement(i), byteSize_);
    return info.bitWidth >= 64 ? v : v & ((uint64_t{1} << info.bitWidth) - 1);
  }
  return static_cast<uint64_t>(getInt(i));
}

std::complex<double> Literal::getComplex(int64_t i) const {
  ElementType t = shape_.elementType();
  if (elided_ || i < 0 || i >= count_) return {};
  const uint8_t* p = rawElement(i);
  if (t == ElementType::C64) {
    float re, im;
    std::memcpy(&re, p, 4);
    std::memcpy(&im, p + 4, 4);
    return {re, im};
  }
  if (t == ElementType::C128) {
    double re, im;
    std::memcpy(&re, p, 8);
    std::memcpy(&im, p + 8, 8);
    return {re, im};
  }
  return {getDouble(i), 0.0};
}

void Literal::setDouble(int64_t i, double v) {
  ElementType t = shape_.elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (elided_ || i < 0 || i >= count_) return;
  uint8_t* p = rawElement(i);
  if (info.floatFormat) {
    storeBits(p, byteSize_, encodeFloat(*info.floatFormat, v));
    return;
  }
  switch (t) {
    case ElementType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case ElementType::F64: std::memcpy(p, &v, 8); return;
    case ElementType::C64:
    case ElementType::C128: setComplex(i, {v, 0.0}); return;
    case ElementType::Pred: p[0] = v != 0; return;
    default: break;
  }
  if (info.isInteger && !info.isSigned && v >= 9.2233720368547758e18) {
    setUint(i, v >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(v));
    return;
  }
  setInt(i, doubleToInt64(v));
}

void Literal::setInt(int64_t i, int64_t v) {
  ElementType t = shape_.elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (elided_ || i < 0 || i >= count_) return;
  uint8_t* p = rawElement(i);
  if (t == ElementType::Pred) {
    p[0] = v != 0;
  } else if (info.isInteger) {
    uint64_t u = static_cast<uint64_t>(v);
    if (info.bitWidth < 8) {
      u &= (uint64_t{1} << info.bitWidth) - 1;
      if (info.isSigned) u = static_cast<uint64_t>(signExtend(u, info.bitWidth));
    }
    storeBits(p, byteSize_, u);
  } else {
    setDouble(i, static_cast<double>(v));
  }
}

void Literal::setUint(int64_t i, uint64_t v) {
  const ElementTypeInfo& info = elementTypeInfo(shape_.elementType());
  if (info.isInteger || shape_.elementType() == ElementType::Pred)
    setInt(i, static_cast<int64_t>(v));
  else
    setDouble(i, static_cast<double>(v));
}

void Literal::setComplex(int64_t i, std::complex<double> v) {
  ElementType t = shape_.elementType();
  if (elided_ || i < 0 || i >= count_) return;
  uint8_t* p = rawElement(i);
  if (t == ElementType::C64) {
    float re = static_cast<float>(v.real()), im = static_cast<float>(v.imag());
    std::memcpy(p, &re, 4);
    std::memcpy(p + 4, &im, 4);
  } else if (t == ElementType::C128) {
    double re = v.real(), im = v.imag();
    std::memcpy(p, &re, 8);
    std::memcpy(p + 8, &im, 8);
  } else {
    setDouble(i, v.real());
  }
}

int64_t Literal::linearIndex(const std::vector<int64_t>& index) const {
  int64_t linear = 0;
  for (size_t d = 0; d < index.size() && d < shape_.dimensions().size(); ++d)
    linear = linear * shape_.dimensions()[d] + index[d];
  return linear;
}

bool Literal::operator==(const Literal& o) const {
  return shape_ == o.shape_ && elided_ == o.elided_ && data_ == o.data_ && elements_ == o.elements_;
}

}  // namespace tpu::hlo
