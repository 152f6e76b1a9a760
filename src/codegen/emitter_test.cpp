#include "codegen/emitter.h"

#include <gtest/gtest.h>

#include "target/target.h"

namespace tpu::codegen {
namespace {

// An op is a typed instruction once emitted: a wrong one is reported at
// once (to the lowering, which names the HLO instruction), not when the
// text is assembled later.
TEST(Emitter, ReportsABadOpWhenEmitted) {
  Emitter e;
  std::vector<std::string> errors;
  e.setErrorHandler([&](const std::string& m) { errors.push_back(m); });
  e.op("sadd s1, s2, {}", 3);
  EXPECT_TRUE(errors.empty());
  e.op("vadd.f32 v{}, v2", 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "llo-gen: internal error: cannot emit 'vadd.f32 v1, v2': missing operand 'b' of 'vadd.f32' "
                       "(usage: vadd.f32 d, a, b)");
  EXPECT_TRUE(e.failed());
  EXPECT_EQ(e.opCount(), 1u);
}

TEST(Emitter, TypedOpsAreCheckedAgainstTheirRow) {
  Emitter e;
  std::vector<std::string> errors;
  e.setErrorHandler([&](const std::string& m) { errors.push_back(m); });
  isa::Operand s1 = Emitter::reg(isa::OperandKind::SReg, 1);
  isa::Operand four = Emitter::imm(isa::OperandKind::SRegImm, 4);
  e.emit(isa::Opcode::SAdd, {s1, s1});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "llo-gen: internal error: 'sadd' takes 3 operands, given 2");
  Emitter ok;
  ok.setErrorHandler([&](const std::string& m) { errors.push_back(m); });
  ok.emit(isa::Opcode::SAdd, {s1, s1, four});
  ok.emit(isa::Opcode::Halt, {});
  EXPECT_EQ(errors.size(), 1u);
  EmittedCode code;
  ASSERT_TRUE(ok.take(code));
  ASSERT_EQ(code.bundles.size(), 2u);
  Emitter parsed;
  parsed.op("sadd s1, s1, 4");
  EmittedCode fromText;
  ASSERT_TRUE(parsed.take(fromText));
  EXPECT_EQ(code.bundles[0], fromText.bundles[0]);
}

// Labels resolve to the op they precede; a cut stream appended again keeps
// its ops, labels and comments in order.
TEST(Emitter, LabelsAndInterleaving) {
  Emitter e;
  e.setKeepText(true);
  e.label("top");
  e.op("smov s1, 0");
  auto m = e.mark();
  e.comment("a");
  e.op("sadd s1, s1, 1");
  e.op("br.lt s1, 4, top");
  auto a = e.cut(m);
  e.op("smov s2, 0");
  auto b = e.cut(m);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 1u);
  e.append(std::move(a[0]));
  e.append(std::move(b[0]));
  e.append(std::move(a[1]));
  e.append(std::move(a[2]));
  EXPECT_EQ(e.text(), "top:\n  smov s1, 0\n  // a\n  smov s2, 0\n  sadd s1, s1, 1\n  br.lt s1, 4, top\n");
  EmittedCode code;
  ASSERT_TRUE(e.take(code));
  ASSERT_EQ(code.bundles.size(), 4u);
  EXPECT_EQ(code.bundles[3].instrs[0].operands[2].imm, 0);
  ASSERT_EQ(code.labels.size(), 1u);
  EXPECT_EQ(code.labels[0].bundle, 0u);

  Emitter bad;
  std::vector<std::string> errors;
  bad.setErrorHandler([&](const std::string& msg) { errors.push_back(msg); });
  bad.op("br.lt s1, 4, nowhere");
  EmittedCode none;
  EXPECT_FALSE(bad.take(none));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "llo-gen: internal error: undefined label 'nowhere'");
}

}  // namespace
}  // namespace tpu::codegen

#include "codegen/codegen.h"
#include "hlo/io/hlo_io.h"
#include "support/diagnostics.h"
#include "llo/text.h"

namespace tpu::codegen {
namespace {

// The program compiled in memory (tpu-run) is the program llo-asm makes of
// llo-gen's text, which is printed piece by piece: kernels, a while loop,
// a sort (two interleaved op streams) and constants.
TEST(Emitter, CompiledProgramIsTheAssembledText) {
  const char* text = R"(HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
cond {
  p = (s32[], s32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], s32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = s32[300] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  b = s32[300] broadcast(j), dimensions={}
  y = s32[300] add(x, b)
  ROOT t = (s32[], s32[300]) tuple(j, y)
}
ENTRY main {
  x = s32[300] parameter(0)
  f = f32[4,200] parameter(1)
  z = s32[] constant(0)
  k = s32[3] constant({7, 8, 9})
  t0 = (s32[], s32[300]) tuple(z, x)
  w0 = (s32[], s32[300]) while(t0), condition=cond, body=body
  y0 = s32[300] get-tuple-element(w0), index=1
  m = s32[300] multiply(y0, y0)
  r0 = s32[] reduce(m, z), dimensions={0}, to_apply=add
  s = f32[4,200] sort(f), dimensions={1}, to_apply=less
  ROOT o = (s32[300], s32[], f32[4,200], s32[3]) tuple(m, r0, s, k)
})";
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("test.hlo", text), diags);
  ASSERT_TRUE(loaded.module) << firstErrorMessage(diags);
  auto target = target::loadTarget("v5e", diags);
  ASSERT_TRUE(target);
  auto generated = generateLlo(*loaded.module, *target, {}, diags);
  ASSERT_TRUE(generated) << firstErrorMessage(diags);
  auto compiled = compileModule(*loaded.module, *target, {}, diags);
  ASSERT_TRUE(compiled) << firstErrorMessage(diags);
  SourceFile file("m.llo", generated->llo);
  llo::AsmOptions options;
  options.autoBundle = false;
  auto assembled = llo::assembleLlo(file, options, diags);
  ASSERT_TRUE(assembled) << firstErrorMessage(diags);
  EXPECT_GT(compiled->bundles.size(), 50u);
  EXPECT_GT(compiled->kernels.size(), 3u);
  EXPECT_TRUE(*compiled == assembled->program);
  EXPECT_EQ(llo::printLlo(*compiled), llo::printLlo(assembled->program));
}

}  // namespace
}  // namespace tpu::codegen
