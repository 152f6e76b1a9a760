#include "eval/elided.h"

#include <cstring>
#include <optional>
#include <string>

#include "support/elided_fill.h"

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
  // One generator with llo-gen's fill(seed), which the assembler and the
  // .tpu reader expand: the bytes are the literal's storage.
  const std::optional<std::string> bytes = elidedFillBytes(
      hlo::elementTypeName(shape.elementType()), elidedFillSeed(name, shape.toString(false)),
      static_cast<uint64_t>(lit.elementCount()));
  if (bytes && bytes->size() == lit.mutableData().size())
    std::memcpy(lit.mutableData().data(), bytes->data(), bytes->size());
  return lit;
}

hlo::Literal fillElidedConstant(const hlo::Instruction& constant) {
  return fillElidedLiteral(constant.name(), constant.shape());
}

}  // namespace tpu::eval
