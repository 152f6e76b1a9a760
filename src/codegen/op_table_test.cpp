// The op table decides legality and lowering alike: every (op, type) pair
// the table calls legal lowers, every other one fails with the table's
// error. Each op is lowered inside a loop fusion (so it reaches
// Lowerer::lowerOp) from an unverified module: the verifier would reject
// many illegal pairs before the lowering sees them.
#include "codegen/op_table.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "hlo/text/parser.h"
#include "target/target.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;
using hlo::Opcode;

const ElementType kTypes[] = {
    ElementType::F32,  ElementType::BF16, ElementType::F16, ElementType::F8E4M3FN, ElementType::F6E2M3FN,
    ElementType::F4E2M1FN, ElementType::S32, ElementType::S16, ElementType::S8, ElementType::S4,
    ElementType::S2, ElementType::S1, ElementType::U32, ElementType::U16, ElementType::U8,
    ElementType::U4, ElementType::U2, ElementType::U1, ElementType::Pred, ElementType::F64,
    ElementType::S64, ElementType::U64, ElementType::C64, ElementType::C128,
};

bool isComplex(ElementType t) { return t == ElementType::C64 || t == ElementType::C128; }
ElementType partOf(ElementType t) {
  return t == ElementType::C64 ? ElementType::F32 : t == ElementType::C128 ? ElementType::F64 : t;
}

// One use of an op: operand and result types, and the attributes text.
struct Use {
  std::vector<ElementType> operands;
  ElementType result;
  std::string attrs;
  hlo::ComparisonDirection direction = hlo::ComparisonDirection::EQ;
};

// The uses of `op` with value type t worth lowering (none: the op has no
// elementwise form on t that the text can spell).
std::vector<Use> usesOf(Opcode op, ElementType t) {
  const int arity = hlo::opcodeInfo(op).arity;
  switch (op) {
    case Opcode::Constant:
    case Opcode::Broadcast:
    case Opcode::Reshape:
    case Opcode::Bitcast:
    case Opcode::Map:
      return {};  // data movement and calls: covered by every other kernel test
    case Opcode::Complex:
      if (!isComplex(t)) return {};
      return {{{partOf(t), partOf(t)}, t, ""}};
    case Opcode::Select: return {{{ElementType::Pred, t, t}, t, ""}};
    case Opcode::Clamp: return {{{t, t, t}, t, ""}};
    case Opcode::Compare:
      return {{{t, t}, ElementType::Pred, ", direction=EQ", hlo::ComparisonDirection::EQ},
              {{t, t}, ElementType::Pred, ", direction=LT", hlo::ComparisonDirection::LT}};
    case Opcode::IsFinite: return {{{t}, ElementType::Pred, ""}};
    case Opcode::Real:
    case Opcode::Imag:
    case Opcode::Abs: return {{{t}, partOf(t), ""}};
    case Opcode::Convert:
      return {{{t}, isComplex(t) ? ElementType::C64 : ElementType::S32, ""},
              {{ElementType::S32}, t, ""}};
    case Opcode::BitcastConvert:
      // A fusion never computes it in registers (it is an alias of its
      // operand, or a nibble repack): RestrictionsBeyondTheTypeClass tests
      // its cells.
      return {};
    case Opcode::ReducePrecision: return {{{t}, t, ", exponent_bits=5, mantissa_bits=10"}};
    default: break;
  }
  if (arity == 1) return {{{t}, t, ""}};
  if (arity == 2) return {{{t, t}, t, ""}};
  return {};
}

std::string moduleText(Opcode op, const Use& u) {
  std::string params, args, sig;
  for (size_t i = 0; i < u.operands.size(); ++i) {
    std::string ty = fmt::format("{}[8]", hlo::elementTypeName(u.operands[i]));
    params += fmt::format("  p{} = {} parameter({})\n", i, ty, i);
    args += fmt::format("{}a{}", i ? ", " : "", i);
    sig += fmt::format("{}p{}: {}", i ? ", " : "", i, ty);
  }
  std::string entryParams;
  for (size_t i = 0; i < u.operands.size(); ++i)
    entryParams += fmt::format("  a{} = {}[8] parameter({})\n", i, hlo::elementTypeName(u.operands[i]), i);
  std::string operandList;
  for (size_t i = 0; i < u.operands.size(); ++i) operandList += fmt::format("{}p{}", i ? ", " : "", i);
  std::string rt = fmt::format("{}[8]", hlo::elementTypeName(u.result));
  return fmt::format(
      "HloModule m\n\nfused ({}) -> {} {{\n{}  ROOT r = {} {}({}){}\n}}\n\nENTRY main {{\n{}  ROOT f = {} "
      "fusion({}), kind=kLoop, calls=fused\n}}\n",
      sig, rt, params, rt, hlo::opcodeName(op), operandList, u.attrs, entryParams, rt, args);
}

TEST(OpTable, LegalExactlyWhenTheLoweringSucceeds) {
  DiagnosticEngine targetDiags;
  auto target = target::loadTarget("v5e", targetDiags);
  ASSERT_TRUE(target);
  int legal = 0, illegal = 0;
  for (const OpRow& row : elementwiseOpTable()) {
    for (ElementType t : kTypes) {
      for (const Use& u : usesOf(row.op, t)) {
        std::string text = moduleText(row.op, u);
        DiagnosticEngine diags;
        std::string messages;
        diags.setConsumer([&](const Diagnostic& d) { messages += d.message + "\n"; });
        SourceFile source("t.hlo", text);
        auto module = hlo::parseHloText(source, diags);
        ASSERT_TRUE(module) << text << messages;
        if (!module) continue;
        bool want = elementwiseLegal(row.op, u.result, u.operands, {u.direction, false});
        CodegenOptions options;
        bool got = generateLlo(*module, *target, options, diags).has_value();
        std::string what = fmt::format("{} ->{}", hlo::opcodeName(row.op), hlo::elementTypeName(u.result));
        for (ElementType o : u.operands) what += fmt::format(" {}", hlo::elementTypeName(o));
        what += u.attrs;
        EXPECT_EQ(got, want) << what << ": " << messages;
        if (!want) {
          const hlo::Instruction* r = module->findComputation("fused")->root();
          OpTyping typing = elementwiseTyping(row.op, u.result, u.operands);
          EXPECT_NE(messages.find(illegalElementwiseMessage(*r, typing)), std::string::npos) << what << ": " << messages;
        }
        (want ? legal : illegal) += 1;
      }
    }
  }
  // The sweep covers both sides (counts as of this table: keep them honest).
  EXPECT_GT(legal, 600);
  EXPECT_GT(illegal, 400);
}

TEST(OpTable, EveryColumnOfEveryRowIsReachableByItsTypes) {
  // Each class has a type that selects it.
  const std::pair<ElementType, TypeClass> kClasses[] = {
      {ElementType::F32, TypeClass::F32},   {ElementType::BF16, TypeClass::NarrowFloat},
      {ElementType::S8, TypeClass::SInt},   {ElementType::U16, TypeClass::UInt},
      {ElementType::Pred, TypeClass::Pred}, {ElementType::F64, TypeClass::F64},
      {ElementType::S64, TypeClass::S64},   {ElementType::U64, TypeClass::U64},
      {ElementType::C64, TypeClass::C64},   {ElementType::C128, TypeClass::C128},
  };
  for (auto [t, cls] : kClasses) {
    ElementType ops[] = {t, t};
    EXPECT_EQ(elementwiseTyping(Opcode::Add, t, ops).cls, cls) << hlo::elementTypeName(t);
  }
  // Select computes in its value operands' type; a 64-bit or complex operand
  // anywhere picks the pair or complex columns.
  ElementType sel[] = {ElementType::Pred, ElementType::U64, ElementType::U64};
  EXPECT_EQ(elementwiseTyping(Opcode::Select, ElementType::U64, sel).cls, TypeClass::U64);
  ElementType conv[] = {ElementType::S32};
  EXPECT_EQ(elementwiseTyping(Opcode::Convert, ElementType::F64, conv).cls, TypeClass::F64);
  ElementType parts[] = {ElementType::F64, ElementType::F64};
  EXPECT_EQ(elementwiseTyping(Opcode::Complex, ElementType::C128, parts).cls, TypeClass::C128);
}

TEST(OpTable, RestrictionsBeyondTheTypeClass) {
  ElementType s4[] = {ElementType::S4, ElementType::S4}, s8[] = {ElementType::S8, ElementType::S8};
  EXPECT_FALSE(elementwiseLegal(Opcode::Mulhi, ElementType::S4, s4));
  EXPECT_TRUE(elementwiseLegal(Opcode::Mulhi, ElementType::S8, s8));
  ElementType c[] = {ElementType::C64, ElementType::C64};
  EXPECT_TRUE(elementwiseLegal(Opcode::Compare, ElementType::Pred, c, {hlo::ComparisonDirection::NE, true}));
  EXPECT_FALSE(elementwiseLegal(Opcode::Compare, ElementType::Pred, c, {hlo::ComparisonDirection::GE, true}));
  EXPECT_FALSE(elementwiseLegal(Opcode::Constant, ElementType::F32, {}, {hlo::ComparisonDirection::EQ, false}));
  EXPECT_TRUE(elementwiseLegal(Opcode::Constant, ElementType::F32, {}, {hlo::ComparisonDirection::EQ, true}));
  ElementType bf16[] = {ElementType::BF16}, u16[] = {ElementType::U16}, s64[] = {ElementType::S64};
  EXPECT_TRUE(elementwiseLegal(Opcode::BitcastConvert, ElementType::S16, bf16));
  EXPECT_FALSE(elementwiseLegal(Opcode::BitcastConvert, ElementType::F16, u16));
  EXPECT_TRUE(elementwiseLegal(Opcode::BitcastConvert, ElementType::F64, s64));
  EXPECT_FALSE(elementwiseLegal(Opcode::BitcastConvert, ElementType::F32, s64));
  // No row: not an elementwise op of the vector lowering.
  ElementType f[] = {ElementType::F32};
  EXPECT_FALSE(elementwiseLegal(Opcode::Transpose, ElementType::F32, f));
}

}  // namespace
}  // namespace tpu::codegen
