#include "codegen/op_table.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "codegen/lowerer.h"
#include "hlo/instruction.h"

namespace tpu::codegen {

namespace {

using E = Expansion;
using R = Restriction;

constexpr OpCell X{};  // not defined on this type class
constexpr OpCell I(const char* m) { return {CellKind::Instr, m, E::None, R::None}; }
constexpr OpCell H(const char* m) { return {CellKind::Halves, m, E::None, R::None}; }
constexpr OpCell C(E e, R r = R::None) { return {CellKind::Composed, nullptr, e, r}; }

// Columns:      f32        narrow float   signed int  unsigned int  pred  |  f64  s64  u64  |  c64  c128
constexpr OpRow kTable[] = {
    // ---- values and data movement
    {Opcode::Constant,
     {C(E::LaneConstant, R::ScalarOnly), C(E::LaneConstant, R::ScalarOnly), C(E::LaneConstant, R::ScalarOnly),
      C(E::LaneConstant, R::ScalarOnly), C(E::LaneConstant, R::ScalarOnly), C(E::PairConstant, R::ScalarOnly),
      C(E::PairConstant, R::ScalarOnly), C(E::PairConstant, R::ScalarOnly), C(E::ComplexConstant, R::ScalarOnly),
      C(E::ComplexConstant, R::ScalarOnly)}},
    {Opcode::Broadcast, {C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move),
                         C(E::Move), C(E::Move), C(E::Move)}},
    {Opcode::Reshape, {C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move),
                       C(E::Move), C(E::Move), C(E::Move)}},
    {Opcode::Bitcast, {C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move),
                       C(E::Move), C(E::Move), C(E::Move)}},
    {Opcode::Copy, {C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move),
                    C(E::Move), C(E::Move), C(E::Move)}},
    {Opcode::Map, {C(E::MapComputation), C(E::MapComputation), C(E::MapComputation), C(E::MapComputation),
                   C(E::MapComputation), C(E::MapComputation), C(E::MapComputation), C(E::MapComputation),
                   C(E::MapComputation), C(E::MapComputation)}},
    {Opcode::Convert, {C(E::LaneConvert), C(E::LaneConvert), C(E::LaneConvert), C(E::LaneConvert),
                       C(E::LaneConvert), C(E::PairConvert), C(E::PairConvert), C(E::PairConvert),
                       C(E::ComplexConvert), C(E::ComplexConvert)}},
    {Opcode::BitcastConvert,
     {C(E::LaneBitcastConvert, R::LaneBitcastWidths), C(E::LaneBitcastConvert, R::LaneBitcastWidths),
      C(E::LaneBitcastConvert, R::LaneBitcastWidths), C(E::LaneBitcastConvert, R::LaneBitcastWidths),
      C(E::LaneBitcastConvert, R::LaneBitcastWidths), C(E::PairBitcastConvert, R::PairsOnly),
      C(E::PairBitcastConvert, R::PairsOnly), C(E::PairBitcastConvert, R::PairsOnly), X, X}},
    {Opcode::ReducePrecision,
     {C(E::ReducePrecision), C(E::ReducePrecision), X, X, X, C(E::ReducePrecision), X, X, X, X}},
    {Opcode::Real, {C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move), C(E::Move),
                    C(E::Move), C(E::ComplexReal), C(E::ComplexReal)}},
    {Opcode::Imag, {C(E::ImagOfReal), C(E::ImagOfReal), C(E::ImagOfReal), C(E::ImagOfReal), C(E::ImagOfReal),
                    C(E::PairImag), C(E::PairImag), C(E::PairImag), C(E::ComplexImag), C(E::ComplexImag)}},
    {Opcode::Complex, {X, X, X, X, X, X, X, X, C(E::ComplexFromParts), C(E::ComplexFromParts)}},
    {Opcode::Select, {C(E::LaneSelect), C(E::LaneSelect), C(E::LaneSelect), C(E::LaneSelect),
                      C(E::LaneSelect), C(E::PairSelect), C(E::PairSelect), C(E::PairSelect),
                      C(E::ComplexSelect), C(E::ComplexSelect)}},
    {Opcode::Clamp, {C(E::LaneClamp), C(E::LaneClamp), C(E::LaneClamp), C(E::LaneClamp),
                     C(E::LaneClamp), C(E::PairClamp), C(E::PairClamp), C(E::PairClamp), X, X}},
    {Opcode::Compare,
     {C(E::LaneCompare), C(E::LaneCompare), C(E::LaneCompare), C(E::LaneCompare), C(E::LaneCompare),
      C(E::PairCompare), C(E::PairCompare), C(E::PairCompare), C(E::ComplexCompare, R::EqualityOnly),
      C(E::ComplexCompare, R::EqualityOnly)}},
    // ---- arithmetic
    {Opcode::Add, {I("vadd.f32"), I("vadd.f32"), I("vadd.s32"), I("vadd.s32"), I("vor"), I("vadd.f64"),
                   C(E::PairAddSub), C(E::PairAddSub), C(E::ComplexAddSub), C(E::ComplexAddSub)}},
    {Opcode::Subtract, {I("vsub.f32"), I("vsub.f32"), I("vsub.s32"), I("vsub.s32"), I("vsub.s32"), I("vsub.f64"),
                        C(E::PairAddSub), C(E::PairAddSub), C(E::ComplexAddSub), C(E::ComplexAddSub)}},
    {Opcode::Multiply, {I("vmul.f32"), I("vmul.f32"), I("vmul.s32"), I("vmul.s32"), I("vmul.s32"), I("vmul.f64"),
                        I("vmul.i64"), I("vmul.i64"), C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Divide, {C(E::LaneDivRem), C(E::LaneDivRem), C(E::LaneDivRem), C(E::LaneDivRem),
                      C(E::LaneDivRem), I("vdiv.f64"), I("vdiv.s64"), I("vdiv.u64"), C(E::ComplexMath),
                      C(E::ComplexMath)}},
    {Opcode::Remainder, {C(E::LaneDivRem), C(E::LaneDivRem), C(E::LaneDivRem), C(E::LaneDivRem),
                         C(E::LaneDivRem), I("vrem.f64"), I("vrem.s64"), I("vrem.u64"), X, X}},
    {Opcode::Maximum, {I("vmax.f32"), I("vmax.f32"), C(E::LaneMinMax), C(E::LaneMinMax), C(E::LaneMinMax),
                       I("vmax.f64"), C(E::PairMinMax), C(E::PairMinMax), X, X}},
    {Opcode::Minimum, {I("vmin.f32"), I("vmin.f32"), C(E::LaneMinMax), C(E::LaneMinMax), C(E::LaneMinMax),
                       I("vmin.f64"), C(E::PairMinMax), C(E::PairMinMax), X, X}},
    {Opcode::Power, {I("vpow"), I("vpow"), C(E::IntegerPower), C(E::IntegerPower), C(E::IntegerPower),
                     C(E::F64Library), C(E::IntegerPower), C(E::IntegerPower), C(E::ComplexMath),
                     C(E::ComplexMath)}},
    {Opcode::Negate, {I("vneg.f32"), I("vneg.f32"), C(E::LaneNegate), C(E::LaneNegate), C(E::LaneNegate),
                      C(E::PairNegateAbs), C(E::PairNegateAbs), C(E::PairNegateAbs), C(E::ComplexNegate),
                      C(E::ComplexNegate)}},
    {Opcode::Abs, {I("vabs.f32"), I("vabs.f32"), C(E::LaneAbs), C(E::LaneAbs), C(E::LaneAbs),
                   C(E::PairNegateAbs), C(E::PairNegateAbs), C(E::PairNegateAbs), C(E::ComplexMath),
                   C(E::ComplexMath)}},
    {Opcode::Sign, {C(E::LaneSign), C(E::LaneSign), C(E::LaneSign), C(E::LaneSign),
                    C(E::LaneSign), I("vsign.f64"), C(E::PairIntSign), C(E::PairIntSign), C(E::ComplexMath),
                    C(E::ComplexMath)}},
    // ---- bitwise and integer-only ops
    {Opcode::Not, {X, X, C(E::LaneNot), C(E::LaneNot), C(E::LaneNot), X, H("vnot"), H("vnot"), X, X}},
    {Opcode::And, {X, X, I("vand"), I("vand"), I("vand"), X, H("vand"), H("vand"), X, X}},
    {Opcode::Or, {X, X, I("vor"), I("vor"), I("vor"), X, H("vor"), H("vor"), X, X}},
    {Opcode::Xor, {X, X, I("vxor"), I("vxor"), I("vxor"), X, H("vxor"), H("vxor"), X, X}},
    {Opcode::Mulhi, {X, X, C(E::LaneMulhi, R::AtLeast8Bits), C(E::LaneMulhi, R::AtLeast8Bits), X, X,
                     I("vmulhi.s64"), I("vmulhi.u64"), X, X}},
    {Opcode::ShiftLeft, {X, X, C(E::LaneShift), C(E::LaneShift), C(E::LaneShift), X, I("vshl.i64"), I("vshl.i64"), X,
                         X}},
    {Opcode::ShiftRightLogical, {X, X, C(E::LaneShift), C(E::LaneShift), C(E::LaneShift), X, I("vshr.i64"),
                                 I("vshr.i64"), X, X}},
    {Opcode::ShiftRightArithmetic, {X, X, C(E::LaneShift), C(E::LaneShift), C(E::LaneShift), X, I("vsra.i64"),
                                    I("vsra.i64"), X, X}},
    {Opcode::Popcnt, {X, X, C(E::LanePopcntClz), C(E::LanePopcntClz), C(E::LanePopcntClz), X, C(E::PairPopcntClz),
                      C(E::PairPopcntClz), X, X}},
    {Opcode::Clz, {X, X, C(E::LanePopcntClz), C(E::LanePopcntClz), C(E::LanePopcntClz), X, C(E::PairPopcntClz),
                   C(E::PairPopcntClz), X, X}},
    // ---- floating-point functions: EUP instructions, pair-unit rows or expansions
    {Opcode::Exp, {I("vexp"), I("vexp"), X, X, X, C(E::ExpF64), X, X, C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Log, {I("vlog"), I("vlog"), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Sqrt, {I("vsqrt"), I("vsqrt"), X, X, X, I("vsqrt.f64"), X, X, C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Rsqrt, {I("vrsqrt"), I("vrsqrt"), X, X, X, I("vrsqrt.f64"), X, X, C(E::ComplexMath),
                     C(E::ComplexMath)}},
    {Opcode::Tanh, {I("vtanh"), I("vtanh"), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath),
                    C(E::ComplexMath)}},
    {Opcode::Logistic, {I("vlogistic"), I("vlogistic"), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath),
                        C(E::ComplexMath)}},
    {Opcode::Sin, {I("vsin"), I("vsin"), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Cos, {I("vcos"), I("vcos"), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath), C(E::ComplexMath)}},
    {Opcode::Tan, {C(E::LaneTan), C(E::LaneTan), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath),
                   C(E::ComplexMath)}},
    {Opcode::Expm1, {C(E::LaneExpm1), C(E::LaneExpm1), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath),
                     C(E::ComplexMath)}},
    {Opcode::Log1p, {C(E::LaneLog1p), C(E::LaneLog1p), X, X, X, C(E::F64Library), X, X, C(E::ComplexMath),
                     C(E::ComplexMath)}},
    {Opcode::Sinh, {C(E::LaneSinhCosh), C(E::LaneSinhCosh), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Cosh, {C(E::LaneSinhCosh), C(E::LaneSinhCosh), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Cbrt, {C(E::LaneCbrt), C(E::LaneCbrt), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Erf, {C(E::LaneErf), C(E::LaneErf), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Asin, {C(E::LaneAsinAcos), C(E::LaneAsinAcos), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Acos, {C(E::LaneAsinAcos), C(E::LaneAsinAcos), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Atan, {C(E::LaneAtan), C(E::LaneAtan), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Asinh, {C(E::LaneInverseHyperbolic), C(E::LaneInverseHyperbolic), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Acosh, {C(E::LaneInverseHyperbolic), C(E::LaneInverseHyperbolic), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Atanh, {C(E::LaneInverseHyperbolic), C(E::LaneInverseHyperbolic), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Atan2, {C(E::LaneAtan2), C(E::LaneAtan2), X, X, X, C(E::F64Library), X, X, X, X}},
    {Opcode::Floor, {I("vfloor.f32"), I("vfloor.f32"), X, X, X, I("vfloor.f64"), X, X, X, X}},
    {Opcode::Ceil, {I("vceil.f32"), I("vceil.f32"), X, X, X, I("vceil.f64"), X, X, X, X}},
    {Opcode::RoundNearestEven, {I("vround.f32"), I("vround.f32"), X, X, X, I("vround.f64"), X, X, X, X}},
    {Opcode::RoundNearestAfz, {C(E::LaneRoundAfz), C(E::LaneRoundAfz), X, X, X, I("vround.afz.f64"), X, X, X, X}},
    {Opcode::IsFinite, {C(E::LaneIsFinite), C(E::LaneIsFinite), X, X, X, C(E::PairIsFinite), X, X, X, X}},
};

// Every instruction a cell names is a row of the instruction set.
constexpr std::string_view kIsaMnemonics[] = {
#define TPU_INSTR(id, mnemonic, ...) mnemonic,
#include "isa/isa.def"
#undef TPU_INSTR
};

constexpr bool isIsaMnemonic(std::string_view m) {
  for (std::string_view s : kIsaMnemonics)
    if (s == m) return true;
  return false;
}

constexpr bool cellsWellFormed() {
  for (const OpRow& row : kTable)
    for (const OpCell& c : row.cells) {
      bool named = c.kind == CellKind::Instr || c.kind == CellKind::Halves;
      if (named != (c.instr != nullptr)) return false;
      if (named && !isIsaMnemonic(c.instr)) return false;
      if ((c.kind == CellKind::Composed) != (c.expansion != E::None)) return false;
    }
  return true;
}
static_assert(cellsWellFormed(), "an elementwise op table cell names an instruction that is not in isa/isa.def "
                                 "(or mixes an instruction and an expansion)");

constexpr bool halvesOnlyOnIntegerPairs() {
  for (const OpRow& row : kTable)
    for (int c = 0; c < kTypeClassCount; ++c)
      if (row.cells[c].kind == CellKind::Halves && c != static_cast<int>(TypeClass::S64) &&
          c != static_cast<int>(TypeClass::U64))
        return false;
  return true;
}
static_assert(halvesOnlyOnIntegerPairs(), "a per-word (Halves) cell outside the s64/u64 columns");

constexpr bool rowsUnique() {
  for (size_t i = 0; i < std::size(kTable); ++i)
    for (size_t j = i + 1; j < std::size(kTable); ++j)
      if (kTable[i].op == kTable[j].op) return false;
  return true;
}
static_assert(rowsUnique(), "an opcode has two rows in the elementwise op table");

// Row index by opcode (-1: no row).
std::array<int16_t, hlo::kOpcodeCount> rowIndex() {
  std::array<int16_t, hlo::kOpcodeCount> idx;
  idx.fill(-1);
  for (size_t i = 0; i < std::size(kTable); ++i) idx[static_cast<size_t>(kTable[i].op)] = static_cast<int16_t>(i);
  return idx;
}

TypeClass laneClass(ElementType t) {
  if (t == ElementType::Pred) return TypeClass::Pred;
  if (t == ElementType::F32) return TypeClass::F32;
  TypeInfo ti = typeInfo(t);
  if (ti.isFloat) return TypeClass::NarrowFloat;
  return ti.isUnsigned ? TypeClass::UInt : TypeClass::SInt;
}

}  // namespace

const char* typeClassName(TypeClass c) {
  static const char* const kNames[] = {"f32", "narrow float", "signed int", "unsigned int", "pred",
                                       "f64", "s64",          "u64",        "c64",          "c128"};
  return kNames[static_cast<int>(c)];
}

std::span<const OpRow> elementwiseOpTable() { return kTable; }

const OpRow* opRow(Opcode op) {
  static const std::array<int16_t, hlo::kOpcodeCount> kIndex = rowIndex();
  int16_t i = kIndex[static_cast<size_t>(op)];
  return i < 0 ? nullptr : &kTable[i];
}

const OpCell& opCell(Opcode op, TypeClass cls) {
  static constexpr OpCell kIllegal{};
  const OpRow* row = opRow(op);
  return row ? row->cells[static_cast<int>(cls)] : kIllegal;
}

OpTyping elementwiseTyping(Opcode op, ElementType result, std::span<const ElementType> operands) {
  bool complex = typeInfo(result).isComplex, pair = isPairType(result);
  ElementType ct = result;
  for (ElementType t : operands) {
    if (typeInfo(t).isComplex) {
      complex = true;
      ct = t;
    }
    pair = pair || isPairType(t);
  }
  if (complex) return {ct == ElementType::C64 ? TypeClass::C64 : TypeClass::C128, ct};
  size_t value = op == Opcode::Select && operands.size() > 1 ? 1 : 0;
  ElementType ot = operands.empty() ? result : operands[value];
  if (pair) {
    ElementType t = isPairType(ot) ? ot : result;
    return {t == ElementType::F64 ? TypeClass::F64 : t == ElementType::U64 ? TypeClass::U64 : TypeClass::S64, t};
  }
  return {laneClass(ot), operands.empty() ? result : operands[0]};
}

bool laneBitcastLegal(ElementType result, ElementType operand) {
  TypeInfo ri = typeInfo(result), oi = typeInfo(operand);
  if (ri.bits == 32 && oi.bits == 32) return true;
  if (operand == ElementType::BF16 && !ri.isFloat && ri.bits == 16) return true;
  if (result == ElementType::BF16 && !oi.isFloat && oi.bits == 16) return true;
  return !ri.isFloat && !oi.isFloat && ri.bits == oi.bits;
}

bool elementwiseLegal(Opcode op, ElementType result, std::span<const ElementType> operands,
                      const OpDetails& details) {
  OpTyping typing = elementwiseTyping(op, result, operands);
  const OpCell& cell = opCell(op, typing.cls);
  if (cell.kind == CellKind::Illegal) return false;
  ElementType operand = operands.empty() ? result : operands[0];
  switch (cell.restriction) {
    case R::None: return true;
    case R::ScalarOnly: return details.scalar;
    case R::AtLeast8Bits: return typeInfo(typing.type).bits >= 8;
    case R::EqualityOnly:
      return details.direction == hlo::ComparisonDirection::EQ || details.direction == hlo::ComparisonDirection::NE;
    case R::LaneBitcastWidths: return laneBitcastLegal(result, operand);
    case R::PairsOnly: return isPairType(result) && isPairType(operand);
  }
  return false;
}

namespace {
std::vector<ElementType> operandTypes(const Instruction& in) {
  std::vector<ElementType> operands;
  for (const Instruction* o : in.operands()) operands.push_back(o->shape().elementType());
  return operands;
}
}  // namespace

std::string illegalElementwiseMessage(const Instruction& in) {
  return illegalElementwiseMessage(in, elementwiseTyping(in.opcode(), in.shape().elementType(), operandTypes(in)));
}

bool elementwiseLegal(const Instruction& in) {
  std::vector<ElementType> operands = operandTypes(in);
  return elementwiseLegal(in.opcode(), in.shape().elementType(), operands,
                          {in.attrs().comparisonDirection, in.shape().isScalar()});
}

std::string illegalElementwiseMessage(const Instruction& in, const OpTyping& typing) {
  if (typing.cls == TypeClass::C64 || typing.cls == TypeClass::C128)
    return fmt::format("llo-gen: element type {} of '{}' is not supported for {}", hlo::elementTypeName(typing.type),
                       in.name(), hlo::opcodeName(in.opcode()));
  return fmt::format("llo-gen: {} on {} is not supported by the vector lowering yet", hlo::opcodeName(in.opcode()),
                     hlo::elementTypeName(typing.type));
}

}  // namespace tpu::codegen
