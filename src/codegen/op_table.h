// The elementwise op table: for every elementwise opcode the vector lowering
// knows, what it becomes on each class of element type a vector register can
// hold. One row per opcode, one column per type class; a cell is a chip
// instruction (its mnemonic checked against isa/isa.def when op_table.cpp
// compiles), a composed expansion (C++ that emits a sequence: integer
// division, f64 library math, complex arithmetic, ...) or empty, which means
// the op is not defined on that type. Both the lowering (Lowerer::lowerOp)
// and every legality question (elementwiseLegal) read this one table.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hlo/attributes.h"
#include "hlo/opcode.h"
#include "hlo/shape.h"

namespace tpu::hlo {
class Instruction;
}

namespace tpu::codegen {

// How a vector register holds an element type.
enum class TypeClass : uint8_t {
  F32,          // f32 lanes
  NarrowFloat,  // bf16, f16, the f8/f6/f4 types: held as f32 values, rounded after each op
  SInt,         // s32 and narrower signed integers, sign-extended in 32-bit lanes
  UInt,         // u32 and narrower unsigned integers, zero-extended
  Pred,         // 0 or 1 in 32-bit lanes
  F64,          // register pairs (low word, high word)
  S64,
  U64,
  C64,   // two f32 registers (real, imaginary)
  C128,  // two f64 pairs
};
inline constexpr int kTypeClassCount = 10;
const char* typeClassName(TypeClass c);

// What a cell is.
enum class CellKind : uint8_t {
  Illegal,   // the op is not defined on this type class
  Instr,     // one chip instruction: on 32-bit lanes once, on pairs the pair row once per result word
  Halves,    // pairs: a 32-bit instruction applied to each word (bitwise ops)
  Composed,  // a C++ expansion emits a sequence
};

// The composed expansions. Each names one Lowerer member function
// (Lowerer::expansionFn maps them, lower.cpp); several ids may share one
// function, the id saying which op family the cell computes.
enum class Expansion : uint8_t {
  None,
  // Any type class.
  Move,            // broadcast, reshape, bitcast, copy, real of a real type: a register copy
  MapComputation,  // map: the applied computation, elementwise
  // 32-bit lanes (lower.cpp).
  LaneConstant,
  LaneConvert,
  LaneBitcastConvert,
  LaneMinMax,          // integers (floats: the instruction)
  LaneDivRem,          // floats through vdiv.f32, 32-bit integers by long division, narrow ones through f32
  LaneNot,
  LaneNegate,          // integers
  LaneAbs,             // integers
  LaneSign,
  LaneSelect,
  LaneClamp,
  LaneMulhi,
  LaneShift,           // XLA's out-of-range shift counts
  LanePopcntClz,
  LaneCompare,         // every direction and comparison type
  LaneErf,             // f32 library math from chip instructions (kernels/math.cpp)
  LaneAsinAcos,
  LaneAtan,
  LaneInverseHyperbolic,
  LaneAtan2,
  LaneTan,
  LaneExpm1,
  LaneLog1p,
  LaneSinhCosh,
  LaneCbrt,
  LaneIsFinite,
  LaneRoundAfz,
  ReducePrecision,     // float lanes and f64 pairs
  IntegerPower,        // integer power by squaring (lanes and pairs)
  ImagOfReal,          // imag of a real type: zero
  // 64-bit pairs (kernels/wide.cpp; f64 library math in kernels/math.cpp, math_f64.cpp).
  PairConstant,
  PairConvert,
  PairBitcastConvert,
  PairAddSub,          // s64/u64 add, subtract: carries between the words
  PairNegateAbs,
  PairMinMax,
  PairClamp,
  PairCompare,
  PairSelect,
  PairIsFinite,
  PairIntSign,
  PairPopcntClz,
  PairImag,            // imag of a pair type: zero
  ExpF64,              // f64 exp (kernels/math.cpp)
  F64Library,          // f64 library math (kernels/math_f64.cpp: expandMathF64)
  // Complex values (kernels/complex.cpp).
  ComplexConstant,
  ComplexConvert,
  ComplexAddSub,
  ComplexNegate,
  ComplexReal,
  ComplexImag,
  ComplexFromParts,
  ComplexCompare,
  ComplexSelect,
  ComplexMath,  // multiply, divide, power, abs, sign and the transcendentals
};
inline constexpr int kExpansionCount = static_cast<int>(Expansion::ComplexMath) + 1;

// A condition on the instruction beyond its type class that a legal cell
// also needs.
enum class Restriction : uint8_t {
  None,
  ScalarOnly,          // constants inside a kernel: one value per register
  AtLeast8Bits,        // integer mulhi: not on the 1, 2 and 4-bit types
  EqualityOnly,        // complex compare: EQ and NE only
  LaneBitcastWidths,   // bitcast-convert between lane types: see laneBitcastLegal
  PairsOnly,           // bitcast-convert of pairs: both sides 64-bit pairs
};

struct OpCell {
  CellKind kind = CellKind::Illegal;
  const char* instr = nullptr;  // Instr, Halves
  Expansion expansion = Expansion::None;  // Composed
  Restriction restriction = Restriction::None;
};

struct OpRow {
  hlo::Opcode op;
  OpCell cells[kTypeClassCount];
};

// Every row, in table order.
std::span<const OpRow> elementwiseOpTable();
// The row of `op`, or null when the vector lowering has none.
const OpRow* opRow(hlo::Opcode op);

// The column an instruction computes in, and the element type its errors
// name: complex if the result or an operand is complex (the last complex
// operand, else the result), else a pair class if any is a pair (the first
// value operand when it is one, else the result), else the lane class of the
// first value operand (select: its second operand), or of the result.
struct OpTyping {
  TypeClass cls;
  hlo::ElementType type;
};
OpTyping elementwiseTyping(hlo::Opcode op, hlo::ElementType result, std::span<const hlo::ElementType> operands);

// The cell of `op` in column `cls` (an illegal cell when there is no row).
const OpCell& opCell(hlo::Opcode op, TypeClass cls);

// What a restriction looks at besides the types.
struct OpDetails {
  hlo::ComparisonDirection direction = hlo::ComparisonDirection::EQ;
  bool scalar = true;  // the result is a scalar (constants)
};

// Whether the vector lowering defines `op` on these types: the table's
// cell for them is not empty and its restriction holds. The lowering fails
// with illegalElementwiseMessage exactly when this is false.
bool elementwiseLegal(hlo::Opcode op, hlo::ElementType result, std::span<const hlo::ElementType> operands,
                      const OpDetails& details = {});
// The same for an instruction, from its shapes and attributes.
bool elementwiseLegal(const hlo::Instruction& in);
// The error of an op the table does not define on these types.
std::string illegalElementwiseMessage(const hlo::Instruction& in, const OpTyping& typing);
// The same, the types taken from the instruction's shapes.
std::string illegalElementwiseMessage(const hlo::Instruction& in);

// bitcast-convert between two lane types is a move or a shift when the
// widths agree (32 and 32, bf16 and a 16-bit integer, integers of one width).
bool laneBitcastLegal(hlo::ElementType result, hlo::ElementType operand);

}  // namespace tpu::codegen
