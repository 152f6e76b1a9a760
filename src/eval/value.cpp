#include "eval/value.h"

#include <cstring>
#include <limits>

#include "eval/kernels.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::ElementType;

std::optional<TypeRep> typeRep(ElementType type) {
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(type);
  if (!info.isArray) return std::nullopt;
  TypeRep r;
  r.storageBytes = info.byteSize;
  r.bits = info.bitWidth;
  if (info.floatFormat) {
    r.k = KType::F32;
    r.narrow = info.floatFormat;
    return r;
  }
  switch (type) {
    case ElementType::Pred: r.k = KType::Pred; r.bits = 8; break;
    case ElementType::S1: case ElementType::S2: case ElementType::S4: case ElementType::S8: r.k = KType::S8; break;
    case ElementType::S16: r.k = KType::S16; break;
    case ElementType::S32: r.k = KType::S32; break;
    case ElementType::S64: r.k = KType::S64; break;
    case ElementType::U1: case ElementType::U2: case ElementType::U4: case ElementType::U8: r.k = KType::U8; break;
    case ElementType::U16: r.k = KType::U16; break;
    case ElementType::U32: r.k = KType::U32; break;
    case ElementType::U64: r.k = KType::U64; break;
    case ElementType::F32: r.k = KType::F32; break;
    case ElementType::F64: r.k = KType::F64; break;
    case ElementType::C64: r.k = KType::C64; break;
    case ElementType::C128: r.k = KType::C128; break;
    default: return std::nullopt;
  }
  return r;
}

Value Value::array(ElementType type, std::vector<int64_t> dims) {
  Value v;
  v.kind_ = Kind::Array;
  v.type_ = type;
  v.count_ = elementCount(dims);
  v.dims_ = std::move(dims);
  v.elementBytes_ = hlo::elementTypeInfo(type).byteSize;
  // One spare element keeps zero-sized arrays addressable.
  v.data_ = std::shared_ptr<uint8_t[]>(new uint8_t[v.byteSize() + 16]);
  return v;
}

Value Value::zeros(ElementType type, std::vector<int64_t> dims) {
  Value v = array(type, std::move(dims));
  std::memset(v.mutableRaw(), 0, v.byteSize());
  return v;
}

Value Value::tuple(std::vector<Value> elements) {
  Value v;
  v.kind_ = Kind::Tuple;
  v.type_ = ElementType::Tuple;
  v.elements_ = std::move(elements);
  return v;
}

Value Value::reshaped(std::vector<int64_t> dims) const {
  Value v = *this;
  v.dims_ = std::move(dims);
  return v;
}

Value Value::retyped(ElementType type) const {
  Value v = *this;
  v.type_ = type;
  return v;
}

int64_t Value::scalarAsInt(int64_t i) const {
  const uint8_t* p = raw() + i * elementBytes_;
  switch (type_) {
    case ElementType::Pred: return *p != 0;
    case ElementType::S1: case ElementType::S2: case ElementType::S4: case ElementType::S8:
      return *reinterpret_cast<const int8_t*>(p);
    case ElementType::U1: case ElementType::U2: case ElementType::U4: case ElementType::U8: return *p;
    case ElementType::S16: return *reinterpret_cast<const int16_t*>(p);
    case ElementType::U16: return *reinterpret_cast<const uint16_t*>(p);
    case ElementType::S32: return *reinterpret_cast<const int32_t*>(p);
    case ElementType::U32: return *reinterpret_cast<const uint32_t*>(p);
    case ElementType::S64: return *reinterpret_cast<const int64_t*>(p);
    case ElementType::U64: {
      uint64_t u = *reinterpret_cast<const uint64_t*>(p);
      return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                             : static_cast<int64_t>(u);
    }
    default: return 0;
  }
}

Value cloneArray(const Value& v) {
  Value c = Value::array(v.type(), v.dims());
  std::memcpy(c.mutableRaw(), v.raw(), v.byteSize());
  return c;
}

Value valueFromLiteral(const hlo::Literal& literal) {
  const hlo::Shape& s = literal.shape();
  if (s.isTuple()) {
    std::vector<Value> elems;
    for (const hlo::Literal& e : literal.tupleElements()) elems.push_back(valueFromLiteral(e));
    return Value::tuple(std::move(elems));
  }
  if (!s.isArray()) return Value::token();
  Value v = Value::array(s.elementType(), s.dimensions());
  const auto& data = literal.data();
  if (data.size() == v.byteSize()) std::memcpy(v.mutableRaw(), data.data(), data.size());
  else std::memset(v.mutableRaw(), 0, v.byteSize());
  return v;
}

hlo::Literal literalFromValue(const Value& value) {
  if (value.isTuple()) {
    std::vector<hlo::Literal> elems;
    for (const Value& e : value.elements()) elems.push_back(literalFromValue(e));
    return hlo::Literal::tuple(std::move(elems));
  }
  if (value.isToken()) return hlo::Literal(hlo::Shape::token());
  hlo::Literal l(hlo::Shape(value.type(), value.dims()).withDefaultLayout());
  std::memcpy(l.mutableData().data(), value.raw(), value.byteSize());
  return l;
}

ComputeView computeView(const Value& v, const TypeRep& rep) {
  ComputeView view;
  if (rep.narrow) {
    view.widened.resize(static_cast<size_t>(v.count()));
    widenFloats(*rep.narrow, v.raw(), view.widened.data(), v.count());
    view.data = view.widened.data();
  } else {
    view.data = v.raw();
  }
  return view;
}

void storeFromCompute(const TypeRep& rep, const void* compute, Value& out) {
  if (rep.narrow) {
    narrowFloats(*rep.narrow, static_cast<const float*>(compute), out.mutableRaw(), out.count());
    return;
  }
  if (compute != out.raw()) std::memcpy(out.mutableRaw(), compute, out.byteSize());
  if (rep.k != KType::Pred && rep.bits < kTypeBytes(rep.k) * 8) truncateIntKernel(rep.k, out.mutableRaw(), out.count(), rep.bits);
}

}  // namespace tpu::eval
