#include "passes/fusion/rules.h"

#include <fmt/format.h>

#include "hlo/computation.h"
#include "passes/fusion/cost_model.h"

namespace tpu::fusion {

using hlo::Instruction;
using hlo::Opcode;

namespace {

// Opcodes a fusion may hold besides the elementwise ones.
bool fusibleOpcode(Opcode op) {
  switch (op) {
    case Opcode::Broadcast: case Opcode::Reshape: case Opcode::Bitcast: case Opcode::Transpose:
    case Opcode::Slice: case Opcode::Reverse: case Opcode::Iota: case Opcode::Reduce: case Opcode::ReduceWindow:
    case Opcode::Dot: case Opcode::Convolution: case Opcode::Concatenate: case Opcode::Pad:
    case Opcode::DynamicSlice: case Opcode::DynamicUpdateSlice: case Opcode::Gather: case Opcode::Map:
    case Opcode::BitcastConvert: case Opcode::Fusion: case Opcode::Constant:
      return true;
    default:
      return hlo::isElementwise(op);
  }
}

}  // namespace

std::string unfusibleReason(const Instruction& in, bool ordered) {
  const std::string& name = in.name();
  const Opcode op = in.opcode();
  switch (op) {
    case Opcode::Parameter: return fmt::format("{} is a parameter", name);
    case Opcode::Tuple: return fmt::format("{} only groups values into a tuple", name);
    case Opcode::GetTupleElement: return fmt::format("{} only picks a tuple element", name);
    case Opcode::CustomCall: return fmt::format("custom-call {} is opaque", name);
    default: break;
  }
  if (hlo::isControlFlow(op)) return fmt::format("{} runs control flow ({})", name, hlo::opcodeName(op));
  if (in.hasSideEffect()) return fmt::format("{} has side effects", name);
  if (ordered) return fmt::format("{} is ordered by control dependencies", name);
  if (hlo::isCollective(op)) return fmt::format("{} communicates with other devices", name);
  if (!fusibleOpcode(op)) return fmt::format("{} ({}) runs as a kernel of its own", name, hlo::opcodeName(op));
  if (!in.shape().isArray()) return fmt::format("{} produces a tuple", name);
  if (op == Opcode::Constant && !in.shape().isScalar())
    return fmt::format("{} is a non-scalar constant, read from HBM", name);
  if (op == Opcode::Fusion && !in.fusedComputation()) return fmt::format("{} has no fused computation", name);
  return {};
}

bool isExpensive(const Instruction& in) {
  const Opcode op = in.opcode();
  switch (op) {
    case Opcode::Add: case Opcode::And: case Opcode::Or: case Opcode::Xor: case Opcode::Not: case Opcode::Negate:
    case Opcode::Multiply: case Opcode::Subtract: case Opcode::Maximum: case Opcode::Minimum: case Opcode::Clamp:
    case Opcode::Compare: case Opcode::Select: case Opcode::ShiftLeft: case Opcode::ShiftRightArithmetic:
    case Opcode::ShiftRightLogical: case Opcode::Clz: case Opcode::Popcnt: case Opcode::Ceil: case Opcode::Floor:
    case Opcode::RoundNearestAfz: case Opcode::RoundNearestEven: case Opcode::IsFinite: case Opcode::Convert:
    case Opcode::Copy: case Opcode::BitcastConvert: case Opcode::ReducePrecision: case Opcode::StochasticConvert:
    case Opcode::Real: case Opcode::Imag: case Opcode::Complex: case Opcode::Broadcast: case Opcode::Iota:
    case Opcode::Constant: case Opcode::Reshape: case Opcode::Bitcast: case Opcode::Transpose: case Opcode::Slice:
    case Opcode::DynamicSlice: case Opcode::DynamicUpdateSlice: case Opcode::Pad: case Opcode::Reverse:
    case Opcode::Concatenate: case Opcode::GetTupleElement: case Opcode::Tuple:
      return false;
    case Opcode::Abs: case Opcode::Sign: case Opcode::Sin: case Opcode::Cos:
      return hlo::elementTypeInfo(in.shape().elementType()).isComplex;
    default:
      return true;
  }
}

bool isAlwaysDuplicable(const Instruction& in) {
  if (in.opcode() == Opcode::Broadcast || in.opcode() == Opcode::Iota) return true;
  return in.opcode() == Opcode::Convert && in.operandCount() == 1 &&
         shapeBytes(in.shape()) > shapeBytes(in.operand(0)->shape());
}

bool movesNoData(const Instruction& in) {
  return hlo::computesNothing(in.opcode()) || in.opcode() == Opcode::BitcastConvert;
}

bool isMatmul(const Instruction& in) { return in.opcode() == Opcode::Dot || in.opcode() == Opcode::Convolution; }

bool isPrologueOp(const Instruction& in) {
  switch (in.opcode()) {
    case Opcode::Broadcast: case Opcode::Reshape: case Opcode::Bitcast: case Opcode::Transpose: case Opcode::Slice:
    case Opcode::Reverse: case Opcode::Iota: case Opcode::Constant:
      return true;
    default:
      return hlo::isElementwise(in.opcode());
  }
}

}  // namespace tpu::fusion
