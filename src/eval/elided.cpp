#include "eval/elided.h"

#include <complex>
#include <cstring>
#include <string>

#include "support/elided_fill.h"
#include "support/float_format.h"

namespace tpu::eval {

hlo::Literal fillElidedLiteral(std::string_view name, const hlo::Shape& shape) {
  if (shape.isTuple()) {
    std::vector<hlo::Literal> elems;
    for (int64_t i = 0; i < shape.tupleSize(); ++i)
      elems.push_back(fillElidedLiteral(std::string(name) + "/" + std::to_string(i), shape.tupleElement(i)));
    return hlo::Literal::tuple(std::move(elems));
  }
  hlo::Literal lit(shape);
  if (!shape.isArray()) return lit;
  // One stream with llo-gen's fill(seed), which the assembler expands.
  ElidedFillStream rng{elidedFillSeed(name, shape.toString(false))};
  const hlo::ElementType t = shape.elementType();
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
  const int64_t n = lit.elementCount();
  // Fast paths for the common float types (same values as setDouble of the
  // f32-rounded draw).
  if (t == hlo::ElementType::F32 || t == hlo::ElementType::BF16 || t == hlo::ElementType::F16 ||
      t == hlo::ElementType::F64) {
    uint8_t* p = lit.mutableData().data();
    for (int64_t i = 0; i < n; ++i) {
      double d = rng.uniform();
      float f = static_cast<float>(d);
      if (t == hlo::ElementType::F64) std::memcpy(p + i * 8, &d, 8);
      else if (t == hlo::ElementType::F32) std::memcpy(p + i * 4, &f, 4);
      else {
        uint16_t h = t == hlo::ElementType::BF16 ? floatToBf16(f) : floatToHalf(f);
        std::memcpy(p + i * 2, &h, 2);
      }
    }
    return lit;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (info.isComplex) {
      double re = rng.uniform();
      double im = rng.uniform();
      if (t == hlo::ElementType::C64) lit.setComplex(i, {static_cast<float>(re), static_cast<float>(im)});
      else lit.setComplex(i, {re, im});
    } else if (info.isFloat) {
      lit.setDouble(i, static_cast<float>(rng.uniform()));
    } else if (t == hlo::ElementType::Pred) {
      lit.setInt(i, static_cast<int64_t>(rng.next() & 1));
    } else if (info.isSigned) {
      uint64_t d = rng.next();
      int64_t v = info.bitWidth >= 4 ? static_cast<int64_t>(d % 9) - 4
                                     : static_cast<int64_t>(d % (uint64_t{1} << info.bitWidth)) -
                                           (int64_t{1} << (info.bitWidth - 1));
      lit.setInt(i, v);
    } else {
      uint64_t d = rng.next();
      lit.setUint(i, info.bitWidth >= 4 ? d % 9 : d % (uint64_t{1} << info.bitWidth));
    }
  }
  return lit;
}

hlo::Literal fillElidedConstant(const hlo::Instruction& constant) {
  return fillElidedLiteral(constant.name(), constant.shape());
}

}  // namespace tpu::eval
