#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "hlo/text/lexer.h"
#include "hlo/text/parser.h"
#include "hlo/text/printer.h"

namespace tpu::hlo {
namespace {

struct Parsed {
  std::unique_ptr<SourceFile> file;
  std::unique_ptr<Module> module;
  std::string error;  // "t.hlo:L:C: error: message" (first line only)
};

Parsed parse(std::string text) {
  Parsed p;
  p.file = std::make_unique<SourceFile>("t.hlo", std::move(text));
  DiagnosticEngine diags;
  p.module = parseHloText(*p.file, diags);
  if (!diags.diagnostics().empty()) {
    std::string full = formatDiagnostic(diags.diagnostics()[0], DiagnosticFormat::Text, false);
    p.error = full.substr(0, full.find('\n'));
  }
  return p;
}

std::string roundTrip(const std::string& text) {
  Parsed p = parse(text);
  if (!p.module) return "ERROR " + p.error;
  return printHloText(*p.module);
}

// Wraps one instruction line in a module with parameters p0..p2.
std::string entryWith(const std::string& params, const std::string& body) {
  return "HloModule m\n\nENTRY %e {\n" + params + body + "\n}\n";
}

// ------------------------------------------------------------------ lexer

TEST(LexerTest, Tokens) {
  text::Lexer lex("%a.1-2 b: c= /*x*/ -1.5e3 7 -inf 'q\\'s' <= -> ... // c\n ? {");
  auto t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::Name);
  EXPECT_EQ(t.text, "a.1-2");
  EXPECT_TRUE(t.percent);
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::Name);
  EXPECT_TRUE(t.colonConsumed);
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::AttrName);
  EXPECT_EQ(t.text, "c");
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::Decimal);
  EXPECT_EQ(t.text, "-1.5e3");
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::Int);
  EXPECT_EQ(t.intMag, 7u);
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::Ident);
  EXPECT_EQ(t.text, "-inf");
  t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::String);
  EXPECT_EQ(text::unescape(t.text), "q's");
  EXPECT_EQ(lex.next().kind, text::TokKind::Leq);
  EXPECT_EQ(lex.next().kind, text::TokKind::Arrow);
  EXPECT_EQ(lex.next().kind, text::TokKind::Dots);
  EXPECT_EQ(lex.next().kind, text::TokKind::Question);
  EXPECT_EQ(lex.next().kind, text::TokKind::LBrace);
  EXPECT_EQ(lex.next().kind, text::TokKind::Eof);
}

TEST(LexerTest, IntegerRangeAndErrors) {
  text::Lexer lex("18446744073709551615 18446744073709551616 < \"abc");
  auto t = lex.next();
  EXPECT_EQ(t.intMag, UINT64_MAX);
  EXPECT_FALSE(t.overflow);
  EXPECT_TRUE(lex.next().overflow);
  EXPECT_EQ(lex.next().kind, text::TokKind::Error);
  EXPECT_EQ(lex.error(), "expected '<=' (a lone '<' is not a token)");
  EXPECT_EQ(lex.next().kind, text::TokKind::Error);
  EXPECT_EQ(lex.error(), "unterminated string");
}

TEST(LexerTest, Unescape) {
  EXPECT_EQ(text::unescape("a\\n\\t\\\\\\\"\\x41\\101\\000"), std::string("a\n\t\\\"AA\0", 8));
}

// ------------------------------------------------------------------ shapes

TEST(ParserTest, ShapesAndLayouts) {
  const char* shapes[] = {
      "f32[8,128]{1,0:T(8,128)}",     "bf16[16,256]{1,0:T(8,128)(2,1)S(1)}", "s4[128]{0:E(4)}",
      "pred[8]{0:T(1024)(128)(4,1)E(8)}", "f32[1024]{0:S(1)}",                  "f32[]{:S(1)}",
      "f32[<=4,?]{1,0}",              "f32[4]{0:T(*,128)L(2)#(u32)*(u16)SC(0:1,2)M(16)}",
      "(f32[], (s32[2]{0}, ()), token[], opaque[])", "b(f32[4]{0})", "u1[3]{0:D(D,C+~)}",
  };
  for (const char* s : shapes) {
    SourceFile f("s", s);
    DiagnosticEngine d;
    auto shape = parseShapeText(f, d);
    ASSERT_TRUE(shape.has_value()) << s << ": " << firstErrorMessage(d);
    EXPECT_EQ(shape->toString(), s);
  }
}

TEST(ParserTest, ShapeErrors) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"f32[2,3]{0}", "s:1:9: error: layout has 1 minor_to_major entries but the shape has rank 2"},
      {"f32[2,3]{0,0}", "s:1:9: error: layout minor_to_major is not a permutation of the dimensions"},
      {"f32[2,3]{2,0}", "s:1:9: error: layout minor_to_major is not a permutation of the dimensions"},
      {"f32[2]{0:S(1)T(8)}", "s:1:14: error: layout attribute T out of order or repeated"},
      {"f32[9223372036854775807,4]", "s:1:1: error: shape's element count overflows int64"},
      {"f32[99999999999999999999]", "s:1:5: error: integer does not fit in 64 bits"},
      {"g32[2]", "s:1:1: error: expected shape, got 'g32'"},
      {"f32[2]{0:P(f32[2])}", "s:1:10: error: physical shape P(...) is only valid for sparse layouts"},
  };
  for (const auto& c : cases) {
    SourceFile f("s", c.text);
    DiagnosticEngine d;
    EXPECT_FALSE(parseShapeText(f, d).has_value()) << c.text;
    ASSERT_FALSE(d.diagnostics().empty());
    std::string full = formatDiagnostic(d.diagnostics()[0], DiagnosticFormat::Text, false);
    EXPECT_EQ(full.substr(0, full.find('\n')), c.message);
  }
}

// Plain array shapes are read straight from the text; other spellings of the
// same shape take the token path and must give the same result.
TEST(ParserTest, PlainShapeFastPathMatchesTokenPath) {
  struct Case {
    const char* plain;
    const char* spaced;
  } cases[] = {
      {"f32[2,3]{0,1}", "f32[ 2, 3 ] {0,1}"},
      {"s32[]", "s32[ ]"},
      {"f32[4]{0}", "f32[4] /*c*/ {0}"},
      {"u8[1,2,3]{2,1,0}", "u8[1,2,3]{ 2,1,0 }"},
      {"pred[7]", "pred[7 ]"},
  };
  for (const auto& c : cases) {
    SourceFile a("a", c.plain), b("b", c.spaced);
    DiagnosticEngine d;
    auto fast = parseShapeText(a, d);
    auto slow = parseShapeText(b, d);
    ASSERT_TRUE(fast.has_value() && slow.has_value()) << c.plain << ": " << firstErrorMessage(d);
    EXPECT_TRUE(*fast == *slow) << c.plain;
    EXPECT_EQ(fast->toString(), slow->toString());
  }
}

TEST(LexerTest, StringsWithEscapedQuotes) {
  text::Lexer lex(R"("a\"b" "c\\" 'd' "e)");
  auto t = lex.next();
  EXPECT_EQ(t.kind, text::TokKind::String);
  EXPECT_EQ(t.text, R"(a\"b)");
  EXPECT_TRUE(t.hasEscape);
  t = lex.next();
  EXPECT_EQ(t.text, R"(c\\)");
  t = lex.next();
  EXPECT_EQ(t.text, "d");
  EXPECT_FALSE(t.hasEscape);
  EXPECT_EQ(lex.next().kind, text::TokKind::Error);
}

// ------------------------------------------------------------------ literals

const Literal& constantOf(const Parsed& p) { return p.module->entry()->root()->literal(); }

TEST(ParserTest, Literals) {
  auto p = parse(entryWith("", "  ROOT c = f32[2,2] constant({ {1, -inf}, {nan, 1.5e-05} })"));
  ASSERT_TRUE(p.module) << p.error;
  const Literal& l = constantOf(p);
  EXPECT_EQ(l.getDouble(0), 1.0);
  EXPECT_TRUE(std::isinf(l.getDouble(1)));
  EXPECT_TRUE(std::isnan(l.getDouble(2)));
  EXPECT_FLOAT_EQ(static_cast<float>(l.getDouble(3)), 1.5e-05f);
  EXPECT_EQ(printLiteral(l), "{ { 1, -inf }, { nan, 1.5e-05 } }");

  p = parse(entryWith("", "  ROOT c = bf16[3] constant({0.1, 65504, -0})"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printLiteral(constantOf(p)), "{0.1, 6.55e+04, -0}");

  p = parse(entryWith("", "  ROOT c = f32[] constant(nan(0x7))"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(constantOf(p).getBits(0), 0x7fc00007u & 0x7f800007u);
  EXPECT_EQ(printLiteral(constantOf(p)), "nan(0x7)");

  p = parse(entryWith("", "  ROOT c = pred[3] constant({true, 0, 1})"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printLiteral(constantOf(p)), "{1, 0, 1}");

  p = parse(entryWith("", "  ROOT c = c64[2] constant({(1, 2), (0.5, -inf)})"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printLiteral(constantOf(p)), "{(1, 2), (0.5, -inf)}");

  p = parse(entryWith("", "  ROOT c = (s32[], (u8[2], pred[])) constant((-3, ({1, 255}, true)))"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printLiteral(constantOf(p)), "( -3, ( {1, 255}, true ) )");

  p = parse(entryWith("", "  ROOT c = f32[1000,1000] constant({...})"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_TRUE(constantOf(p).isElided());
  EXPECT_EQ(printLiteral(constantOf(p)), "{...}");

  p = parse(entryWith("", "  ROOT c = f32[2,0] constant({ {}, {} })"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printLiteral(constantOf(p)), "{ {}, {} }");

  p = parse(entryWith("", "  ROOT c = s64[] constant(-9223372036854775808)"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(constantOf(p).getInt(0), INT64_MIN);

  p = parse(entryWith("", "  ROOT c = u64[] constant(18446744073709551615)"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(constantOf(p).getUint(0), UINT64_MAX);
}

TEST(ParserTest, LiteralErrors) {
  struct Case {
    const char* line;
    const char* message;
  } cases[] = {
      {"  ROOT c = s8[] constant(300)", "t.hlo:4:26: error: value 300 is out of range for s8"},
      {"  ROOT c = u32[] constant(-1)", "t.hlo:4:27: error: value -1 is out of range for u32"},
      {"  ROOT c = f32[] constant(1e39)", "t.hlo:4:27: error: value 1e39 is out of range for f32"},
      {"  ROOT c = bf16[] constant(1e39)", "t.hlo:4:28: error: value 1e39 is out of range for bf16"},
      {"  ROOT c = s32[] constant(1.5)", "t.hlo:4:27: error: expected an integer for element type s32, got number '1.5'"},
      {"  ROOT c = f32[] constant(true)", "t.hlo:4:27: error: expected a number for element type f32, got 'true'"},
      {"  ROOT c = f32[2] constant({1, 2, 3})", "t.hlo:4:35: error: too many elements in literal dimension 0 (size 2)"},
      {"  ROOT c = f32[2,2] constant({1, 2})", "t.hlo:4:31: error: expected '{' (literal nesting must match rank 2), got number '1'"},
      {"  ROOT c = f32[2] constant({{1}, {2}})", "t.hlo:4:29: error: literal has more nesting levels than the shape's rank"},
      {"  ROOT c = f32[2] constant({1})", "t.hlo:4:30: error: literal dimension 0 has 1 elements, the shape says 2"},
      {"  ROOT c = f32[1000000] constant({1})", "t.hlo:4:34: error: literal of shape f32[1000000]{0} has more elements than the text can hold"},
      {"  ROOT c = f16[] constant(nan(0x400))", "t.hlo:4:27: error: NaN payload does not fit f16"},
  };
  for (const auto& c : cases) {
    auto p = parse(entryWith("", c.line));
    EXPECT_EQ(p.module, nullptr) << c.line;
    EXPECT_EQ(p.error, c.message) << c.line;
  }
}

// ------------------------------------------------------------------ structure

TEST(ParserTest, StructuralErrors) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"ENTRY e {\n  ROOT x = f32[] frobnicate()\n}\n", "t.hlo:2:18: error: unknown opcode 'frobnicate'"},
      {"ENTRY e {\n  ROOT x = f32[] add(a, b)\n}\n", "t.hlo:2:22: error: use of undefined instruction 'a'"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] parameter(1)\n}\n", "t.hlo:3:3: error: duplicate instruction name 'a'"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a), to_apply=nope\n}\n",
       "t.hlo:3:38: error: computation 'nope' is not defined (computations must be defined before use)"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a, a)\n}\n", "t.hlo:3:18: error: negate expects 1 operand, got 2"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(s32[] a)\n}\n",
       "t.hlo:3:25: error: operand 'a' is written with shape s32[] but has shape f32[]"},
      {"ENTRY e {\n  a = f32[] parameter(0), metadata={op_name=\"x\"}, metadata={}\n}\n", "t.hlo:2:51: error: duplicate attribute 'metadata'"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n", "t.hlo:3:1: error: expected '}' closing the computation body"},
      {"ENTRY e {\n  a = f32[] parameter(0) /* open\n}\n", "t.hlo:2:26: error: unterminated block comment"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n}\nENTRY f {\n  b = f32[] parameter(0)\n}\n", "t.hlo:4:1: error: more than one ENTRY computation"},
      {"e {\n  a = f32[] parameter(0)\n}\ne {\n  b = f32[] parameter(0)\n}\n", "t.hlo:4:1: error: duplicate computation name 'e'"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  ROOT c = pred[] compare(a, a), direction=XX\n}\n", "t.hlo:3:44: error: unknown comparison direction 'XX'"},
      {"ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = f32[2] add(a, a), sharding={devices=[3]0,1}\n}\n",
       "t.hlo:3:40: error: tile assignment lists 2 devices, its dimensions need 3"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  ROOT r = f32[] all-reduce(a), replica_groups=[2,2]<=[2,2]\n}\n",
       "t.hlo:3:53: error: iota list with several reshape dimensions needs T(...)"},
      {"ENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n}\n\0", "t.hlo:5:1: error: NUL byte in input"},
      {"ENTRY e (x: f32[]) -> s32[] {\n  ROOT x = f32[] parameter(0)\n}\n",
       "t.hlo:1:23: error: computation 'e' declares result s32[] but its root has shape f32[]"},
  };
  for (const auto& c : cases) {
    std::string text = c.text;
    if (text.find("\\0") == std::string::npos && std::string(c.message).find("NUL") != std::string::npos)
      text += std::string(1, '\0');
    auto p = parse(text);
    EXPECT_EQ(p.module, nullptr) << c.text;
    EXPECT_EQ(p.error, c.message) << c.text;
  }
}

TEST(ParserTest, HostileNestingIsCapped) {
  std::string deep(100000, '(');
  auto p = parse("ENTRY e {\n  ROOT a = " + deep + "f32[]" + std::string(100000, ')') + " parameter(0)\n}\n");
  EXPECT_EQ(p.module, nullptr);
  EXPECT_NE(p.error.find("nesting too deep"), std::string::npos) << p.error;
  std::string braces(100000, '{');
  p = parse("ENTRY e {\n  ROOT a = f32[] parameter(0), sharding=" + braces + "\n}\n");
  EXPECT_EQ(p.module, nullptr);
  EXPECT_NE(p.error.find("nesting too deep"), std::string::npos) << p.error;
}

TEST(ParserTest, HeaderlessNoRootNoEntry) {
  auto p = parse("// RUN: foo\nadd {\n  x = f32[] parameter(0)\n  // CHECK: bar\n  y = f32[] parameter(1)\n  add = f32[] add(x, %y)\n}\n\nfused {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n  r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n");
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(p.module->name(), "module_fused");
  EXPECT_EQ(p.module->entry()->name(), "fused");
  EXPECT_EQ(p.module->entry()->root()->name(), "r");
  std::string out = printHloText(*p.module);
  EXPECT_EQ(out,
            "HloModule module_fused, entry_computation_layout={(f32[4]{0})->f32[]}\n\n"
            "%add (x: f32[], y: f32[]) -> f32[] {\n"
            "  %x = f32[] parameter(0)\n"
            "  %y = f32[] parameter(1)\n"
            "  ROOT %add = f32[] add(%x, %y)\n"
            "}\n\n"
            "ENTRY %fused (p: f32[4]) -> f32[] {\n"
            "  %p = f32[4]{0} parameter(0)\n"
            "  %z = f32[] constant(0)\n"
            "  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add\n"
            "}\n\n");
}

TEST(ParserTest, ModuleHeader) {
  std::string text =
      "/* license */\n// Generated\nHloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {0}, must-alias) }, "
      "buffer_donor={ (0, {}) }, alias_passthrough_params=true, entry_computation_layout={(f32[8]{0}, (s32[], f32[2]{0}))->(f32[8]{0}, f32[8]{0})}, "
      "allow_spmd_sharding_propagation_to_output={true,false}, replica_count=2, num_partitions=4, frontend_attributes={b=\"2\",a=\"1\"}\n\n"
      "ENTRY %main (a: f32[8], b: (s32[], f32[2])) -> (f32[8], f32[8]) {\n"
      "  %a = f32[8]{0} parameter(0)\n  %b = (s32[], f32[2]{0}) parameter(1)\n  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(%a, %a)\n}\n\n";
  auto p = parse(text);
  ASSERT_TRUE(p.module) << p.error;
  const ModuleConfig& c = p.module->config();
  EXPECT_TRUE(c.isScheduled);
  ASSERT_EQ(c.inputOutputAlias.size(), 2u);
  EXPECT_TRUE(c.inputOutputAlias[1].mustAlias);
  EXPECT_EQ(c.inputOutputAlias[1].parameterIndex, ShapeIndex{0});
  EXPECT_EQ(c.replicaCount, 2);
  EXPECT_EQ(c.numPartitions, 4);
  EXPECT_EQ(c.frontendAttributes[0].key, "a");
  std::string out = printHloText(*p.module);
  EXPECT_EQ(out.substr(0, out.find('\n')),
            "HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {0}, must-alias) }, "
            "buffer_donor={ (0, {}) }, alias_passthrough_params=true, entry_computation_layout={(f32[8]{0}, (s32[], f32[2]{0}))->(f32[8]{0}, f32[8]{0})}, "
            "allow_spmd_sharding_propagation_to_output={true,false}, replica_count=2, num_partitions=4, frontend_attributes={a=\"1\",b=\"2\"}");
  EXPECT_EQ(roundTrip(out), out);
}

TEST(ParserTest, StackFrames) {
  std::string text =
      "HloModule m\n\nFileNames\n1 \"model.py\"\nFunctionNames\n1 \"forward\"\nFileLocations\n"
      "1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=3 end_column=20}\nStackFrames\n"
      "1 {file_location_id=1 parent_frame_id=0}\n\nENTRY %e {\n  ROOT %a = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=1}\n}\n";
  auto p = parse(text);
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(p.module->stackFrames().fileLocations[0].endColumn, 20);
  EXPECT_EQ(p.module->entry()->root()->metadata().stackFrameId, 1);
  std::string out = printHloText(*p.module);
  EXPECT_NE(out.find("StackFrames\n1 {file_location_id=1 parent_frame_id=0}\n"), std::string::npos);
  EXPECT_EQ(roundTrip(out), out);
}

// ------------------------------------------------------------------ attributes

TEST(ParserTest, AttributesRoundTrip) {
  const char* params = "  p0 = f32[8,8]{1,0} parameter(0)\n  p1 = f32[8,8]{1,0} parameter(1)\n  i = s32[] parameter(2)\n";
  const char* lines[] = {
      "ROOT %r = f32[8,8]{1,0} convolution(%p0, %p1), window={size=3x3 stride=2x1 pad=0_1x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, dim_labels=b0f_0io->b0f, feature_group_count=2, batch_group_count=4, operand_precision={high,highest}",
      "ROOT %r = f32[8,8]{1,0} dot(%p0, %p1), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, algorithm=dot_bf16_bf16_f32",
      "ROOT %r = f32[2,8]{1,0} slice(%p0), slice={[0:4:2], [0:8:1]}",
      "ROOT %r = f32[9,10]{1,0} pad(%p0, %i), padding=0_1_0x1_1_2",
      "ROOT %r = f32[8,8]{1,0} all-reduce(%p0), channel_id=3, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=%sum",
      "ROOT %r = f32[8,8]{1,0} all-reduce(%p0), replica_groups={{0,1},{2,3}}, constrain_layout=true, to_apply=%sum",
      "ROOT %r = f32[8,8]{1,0} collective-permute(%p0), channel_id=1, source_target_pairs={{0,1},{1,0}}",
      "ROOT %r = f32[8,8]{1,0} add(%p0, %p1), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}",
      "ROOT %r = f32[8,8]{1,0} add(%p0, %p1), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}",
      "ROOT %r = f32[8,8]{1,0} add(%p0, %p1), sharding={devices=[2,1,3]0,3,1,4,2,5 shard_as 1 metadata={op_name=\"s\"}}",
      "ROOT %r = f32[8,8]{1,0} add(%p0, %p1), sharding={maximal device=1}",
      "ROOT %r = (f32[8,8]{1,0}, s32[]) tuple(%p0, %i), sharding={{replicated}, {manual}}",
      "ROOT %r = pred[8,8]{1,0} compare(%p0, %p1), direction=LT, type=TOTALORDER",
      "ROOT %r = f32[8,8]{1,0} custom-call(%p0, %p1), custom_call_target=\"foo\", operand_layout_constraints={f32[8,8]{0,1}, f32[8,8]{1,0}}, custom_call_has_side_effect=true, literal=s32[2]{0} {1, 2}, output_to_operand_aliasing={{}: (0, {})}, schedule=SCHEDULE_LATEST, api_version=API_VERSION_TYPED_FFI, backend_config={\"a\":{\"b\":[1,2]}}",
      "ROOT %r = f32[8,8]{1,0} custom-call(%p0), custom_call_target=\"bar\", backend_config=\"\\000\\001x\"",
      "ROOT %r = f32[8,8]{1,0} negate(%p0), frontend_attributes={_xla=\"1\",k={\"j\":2}}, statistics={visualizing_index=1,stat_a=0.5}, metadata={op_type=\"Neg\" op_name=\"a/b\" source_file=\"f.py\" source_line=12 source_end_line=13 source_column=2 source_end_column=9 profile_type={relayout} deduplicated_name=\"d\" scheduling_name=\"s\"}",
      "ROOT %r = f32[8,8]{1,0} exponential(%p0), result_accuracy={mode=highest}",
      "ROOT %r = f32[8,8]{1,0} negate(%p0), my_unknown_attr={weird, [stuff]}, other=3x3",
      "ROOT %r = f32[4,8]{1,0} gather(%p0, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, operand_batching_dims={1}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,8}, indices_are_sorted=true",
      "ROOT %r = f32[8,8]{1,0} scatter(%p0, %i, %p1), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, input_batching_dims={1}, scatter_indices_batching_dims={0}, index_vector_dim=1, indices_are_sorted=true, unique_indices=true, to_apply=%sum",
      "ROOT %r = f32[8,8]{1,0} reduce-window(%p0, %i), window={size=2x2 stride=2x2}, to_apply=%sum",
      "ROOT %r = f32[8,8]{1,0} fft(%p0), fft_type=IRFFT, fft_length={8,14}",
      "ROOT %r = (f32[8,8]{1,0}, s32[8,2]{1,0}) topk(%p0), k=2, largest=false",
      "ROOT %r = f32[8,8]{1,0} triangular-solve(%p0, %p1), left_side=true, lower=true, transpose_a=ADJOINT",
      "ROOT %r = f32[8,8]{1,0} batch-norm-inference(%p0, %p1, %p1, %p1, %p1), epsilon=0.001, feature_index=1",
      "ROOT %r = f32[8,8]{1,0} rng(%i, %i), distribution=rng_normal",
      "ROOT %r = f32[8,8]{1,0} reduce-precision(%p0), exponent_bits=5, mantissa_bits=10",
      "ROOT %r = f32[8,8]{1,0} sort(%p0), dimensions={1}, is_stable=true, to_apply=%lt",
      "ROOT %r = f32[8,8]{1,0} fusion(%p0, %p1), kind=kOutput, output_to_operand_aliasing={{}: (1, {})}, calls=%sum2",
      "ROOT %r = f32[8,8]{1,0} copy(%p0), control-predecessors={%i}",
      "ROOT %r = f32[8,8]{1,0} domain(%p0), domain={kind=\"sharding\", entry={maximal device=0}, exit={replicated}}",
      "ROOT %r = f32[8,8]{1,0} reshape(%p0), inferred_dimension=1",
  };
  for (const char* line : lines) {
    std::string text = std::string("HloModule m\n\n") +
                       "%sum (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n" +
                       "%lt (x: f32[], y: f32[]) -> pred[] {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  ROOT %s = pred[] compare(%x, %y), direction=LT\n}\n\n" +
                       "%sum2 (x: f32[8,8], y: f32[8,8]) -> f32[8,8] {\n  %x = f32[8,8]{1,0} parameter(0)\n  %y = f32[8,8]{1,0} parameter(1)\n  ROOT %s = f32[8,8]{1,0} add(%x, %y)\n}\n\n" +
                       "ENTRY %e {\n" + params + "  " + line + "\n}\n\n";
    auto p = parse(text);
    ASSERT_TRUE(p.module) << line << "\n" << p.error;
    std::string out = printHloText(*p.module);
    EXPECT_NE(out.find(std::string("  ") + line + "\n"), std::string::npos) << line << "\n----\n" << out;
    EXPECT_EQ(roundTrip(out), out);
  }
}

TEST(ParserTest, StructuredValues) {
  auto p = parse(entryWith("  a = f32[8] parameter(0)\n",
                           "  ROOT r = f32[8] all-reduce(a), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%nope"));
  EXPECT_EQ(p.module, nullptr);  // %nope undefined
  p = parse("s {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT a = f32[] add(x, y)\n}\n"
            "ENTRY e {\n  a = f32[8] parameter(0)\n"
            "  ROOT r = f32[8] all-reduce(a), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=s\n}\n");
  ASSERT_TRUE(p.module) << p.error;
  const ReplicaGroups& g = *p.module->entry()->root()->attrs().replicaGroups;
  ASSERT_EQ(g.groups.size(), 4u);
  EXPECT_EQ(g.groups[0], (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(g.groups[3], (std::vector<int64_t>{3, 7}));

  p = parse(entryWith("  a = f32[8,8] parameter(0)\n  b = f32[8,8] parameter(1)\n",
                      "  ROOT r = f32[8,8] convolution(a, b), window={size=3 pad=1_1}, dim_labels=bf01_oi01->bf01"));
  ASSERT_TRUE(p.module) << p.error;
  const auto& cd = *p.module->entry()->root()->attrs().convDims;
  EXPECT_EQ(cd.inputBatchDimension, 0);
  EXPECT_EQ(cd.inputFeatureDimension, 1);
  EXPECT_EQ(cd.inputSpatialDimensions, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(cd.kernelOutputFeatureDimension, 0);
  EXPECT_EQ(p.module->entry()->root()->attrs().window->dimensions[0].paddingLow, 1);

  p = parse(entryWith("  a = f32[8] parameter(0)\n", "  ROOT r = pred[8] compare(a, a), direction=GE"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(p.module->entry()->root()->attrs().comparisonType, ComparisonType::Float);
}

TEST(ParserTest, AsyncSugar) {
  std::string text =
      "HloModule m\n\nENTRY %e (a: f32[8]) -> f32[8] {\n  %a = f32[8]{0} parameter(0)\n"
      "  %s = ((f32[8]{0}), f32[8]{0}) all-to-all-start(f32[8]{0} %a), channel_id=1, replica_groups={{0,1}}, dimensions={0}\n"
      "  ROOT %d = f32[8]{0} all-to-all-done(((f32[8]{0}), f32[8]{0}) %s), metadata={op_name=\"x\"}\n}\n";
  auto p = parse(text);
  ASSERT_TRUE(p.module) << p.error;
  Instruction* start = p.module->entry()->instructions()[1].get();
  EXPECT_EQ(start->opcode(), Opcode::AsyncStart);
  ASSERT_EQ(start->calledComputations().size(), 1u);
  Computation* w = start->calledComputations()[0];
  EXPECT_EQ(w->root()->opcode(), Opcode::AllToAll);
  EXPECT_EQ(w->root()->attrs().dimensions, (std::vector<int64_t>{0}));
  EXPECT_EQ(p.module->entry()->root()->opcode(), Opcode::AsyncDone);
  std::string out = printHloText(*p.module);
  EXPECT_NE(out.find("  %s = ((f32[8]{0}), f32[8]{0}) all-to-all-start(%a), channel_id=1, replica_groups={{0,1}}, dimensions={0}\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("  ROOT %d = f32[8]{0} all-to-all-done(%s), metadata={op_name=\"x\"}\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("async_wrapped {"), std::string::npos) << out;
  EXPECT_EQ(roundTrip(out), out);
  PrintOptions noSugar;
  noSugar.asyncSyntaxSugar = false;
  std::string explicitText = printHloText(*p.module, noSugar);
  EXPECT_NE(explicitText.find("async-start(%a), calls=%s.async_wrapped"), std::string::npos) << explicitText;
  auto again = parse(explicitText);
  ASSERT_TRUE(again.module) << again.error;
  std::string diff;
  EXPECT_TRUE(structurallyEqual(*p.module, *again.module, &diff)) << diff;
}

TEST(ParserTest, TypedOperandsAndNesting) {
  auto p = parse(entryWith("  a = f32[2]{0} parameter(0)\n  t = (f32[2]{0}, /*index=1*/s32[]) parameter(1)\n",
                           "  g = f32[2] get-tuple-element((f32[2], s32[]) t), index=0\n"
                           "  ROOT r = f32[2] add(f32[2]{0} %a, f32[2] multiply(a, g))"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(p.module->entry()->root()->operand(1)->name(), "multiply.anon");
  PrintOptions typed;
  typed.printOperandShapes = true;
  std::string out = printHloText(*p.module, typed);
  EXPECT_NE(out.find("get-tuple-element((f32[2]{0}, s32[]) %t), index=0"), std::string::npos) << out;
  EXPECT_EQ(roundTrip(out), printHloText(*p.module));
}

TEST(PrinterTest, InstructionAndIndexComments) {
  std::string ops;
  for (int i = 0; i < 7; ++i) ops += (i ? ", " : "") + std::string("a");
  auto p = parse(entryWith("  a = f32[] parameter(0)\n", "  ROOT t = (f32[], f32[], f32[], f32[], f32[], f32[], f32[]) tuple(" + ops + ")"));
  ASSERT_TRUE(p.module) << p.error;
  EXPECT_EQ(printInstruction(*p.module->entry()->root()),
            "%t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[]) tuple(%a, %a, %a, %a, %a, /*index=5*/%a, %a)");
  PrintOptions noPercent;
  noPercent.printPercent = false;
  EXPECT_EQ(printInstruction(*p.module->entry()->instructions()[0], noPercent), "a = f32[] parameter(0)");
}

}  // namespace
}  // namespace tpu::hlo

namespace tpu::hlo {
namespace {

// Metadata and plain shapes spelled as before are looked up, not parsed
// again: the values must be what parsing them gives, strings with escaped
// quotes and braces included, and a comment inside falls back to parsing.
TEST(ParserTest, RepeatedSpellingsShareValues) {
  std::string meta = R"(metadata={op_name="a\"}{\\" source_line=3})";
  std::string text = "HloModule m\n\nENTRY %e {\n  p = f32[4]{0} parameter(0)\n"
                     "  q = f32[4]{0} negate(p), " + meta + "\n" +
                     R"(  x = f32[4]{0} abs(q), metadata={op_name="b" source_line=4})" + "\n" +
                     "  r = f32[4]{0} negate(x), " + meta + "\n" +
                     R"(  ROOT s = f32[4]{0} add(r, q), metadata={op_name="b" /* c */ source_line=4})" + "\n}\n";
  Parsed p = parse(text);
  ASSERT_TRUE(p.module) << p.error;
  const Computation& c = *p.module->entry();
  const Instruction& q = *c.instructions()[1];
  const Instruction& x = *c.instructions()[2];
  const Instruction& r = *c.instructions()[3];
  const Instruction& s = *c.instructions()[4];
  EXPECT_EQ(q.metadata().opName, "a\"}{\\");
  EXPECT_EQ(q.metadata().sourceLine, 3);
  EXPECT_TRUE(q.common().metadata.sharesWith(r.common().metadata));
  EXPECT_FALSE(q.common().metadata.sharesWith(x.common().metadata));
  EXPECT_EQ(s.metadata().opName, "b");
  EXPECT_EQ(s.metadata().sourceLine, 4);
  EXPECT_EQ(q.shape(), r.shape());
  EXPECT_EQ(q.shape().representation(), r.shape().representation());
  // Printing is unchanged by the sharing (a repeat is copied from where the
  // printer first wrote it).
  std::string printed = printHloText(*p.module);
  EXPECT_EQ(roundTrip(printed), printed);
  std::string once = R"(metadata={op_name="a\"}{\\" source_line=3})";
  size_t first = printed.find(once);
  ASSERT_NE(first, std::string::npos) << printed;
  EXPECT_NE(printed.find(once, first + 1), std::string::npos) << printed;
  EXPECT_NE(printHloText(*p.module).find(once), std::string::npos);
}

TEST(ParserTest, RepeatedBadSpellingsStillFail) {
  std::string bad = R"(metadata={op_name=1})";
  Parsed p = parse(entryWith("  p = f32[] parameter(0), " + bad + "\n", "  ROOT q = f32[] negate(p), " + bad));
  EXPECT_FALSE(p.module);
  EXPECT_NE(p.error.find("error:"), std::string::npos) << p.error;
}

TEST(Parser, EqualAttributeBlocksAreSharedAndCopiedOnWrite) {
  Parsed p = parse(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[] constant(1)
  b1 = f32[2,4] broadcast(x), dimensions={1}
  b2 = f32[2,4] broadcast(x), dimensions={1}
  b3 = f32[4,2] broadcast(x), dimensions={0}
  k1 = f32[] constant(1)
  t = f32[4,2] transpose(b1), dimensions={1,0}
  ROOT r = (f32[2,4], f32[2,4], f32[4,2], f32[4,2], f32[], f32[]) tuple(b1, b2, b3, t, c, k1)
})");
  ASSERT_TRUE(p.module) << p.error;
  const std::string printed = printHloText(*p.module);
  auto find = [&](const char* name) -> Instruction* {
    for (const auto& in : p.module->entry()->instructions())
      if (in->name() == name) return in.get();
    return nullptr;
  };
  const Instruction& b1 = *find("b1");
  const Instruction& b2 = *find("b2");
  const Instruction& b3 = *find("b3");
  EXPECT_EQ(&b1.attrs(), &b2.attrs());
  EXPECT_NE(&b1.attrs(), &b3.attrs());
  // Constants keep their own blocks (payloads are not compared).
  EXPECT_NE(&std::as_const(*find("c")).attrs(), &std::as_const(*find("k1")).attrs());
  // Writing through one instruction leaves the other as parsed.
  find("b2")->attrs().dimensions = {0};
  EXPECT_EQ(b1.attrs().dimensions, std::vector<int64_t>{1});
  EXPECT_EQ(b2.attrs().dimensions, std::vector<int64_t>{0});
  find("b2")->attrs().dimensions = {1};
  EXPECT_EQ(printHloText(*p.module), printed);
}

}  // namespace
}  // namespace tpu::hlo
