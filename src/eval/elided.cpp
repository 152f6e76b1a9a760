#include "eval/elided.h"

#include <complex>
#include <string>

namespace tpu::eval {

namespace {

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0; }
};

}  // namespace

hlo::Literal fillElidedLiteral(std::string_view name, const hlo::Shape& shape) {
  if (shape.isTuple()) {
    std::vector<hlo::Literal> elems;
    for (int64_t i = 0; i < shape.tupleSize(); ++i)
      elems.push_back(fillElidedLiteral(std::string(name) + "/" + std::to_string(i), shape.tupleElement(i)));
    return hlo::Literal::tuple(std::move(elems));
  }
  hlo::Literal lit(shape);
  if (!shape.isArray()) return lit;
  std::string key(name);
  key.push_back('\0');
  key += shape.toString(false);
  SplitMix64 rng{fnv1a(key)};
  const hlo::ElementType t = shape.elementType();
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
  const int64_t n = lit.elementCount();
  for (int64_t i = 0; i < n; ++i) {
    if (info.isComplex) {
      double re = rng.uniform();
      double im = rng.uniform();
      lit.setComplex(i, {re, im});
    } else if (info.isFloat) {
      lit.setDouble(i, rng.uniform());
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
