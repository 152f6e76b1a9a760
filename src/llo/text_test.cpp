#include "llo/text.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "isa/encoding.h"
#include "llo/bundler.h"

namespace tpu::llo {
namespace {

struct Result {
  std::optional<Assembled> assembled;
  std::string error;
};

Result assemble(const std::string& text, AsmOptions options = {}) {
  static std::vector<std::unique_ptr<SourceFile>> files;
  files.push_back(std::make_unique<SourceFile>("t.llo", text));
  DiagnosticEngine diags;
  Result r;
  r.assembled = assembleLlo(*files.back(), options, diags);
  if (diags.hasErrors()) {
    const Diagnostic& d = diags.diagnostics().front();
    LineColumn lc = d.location.valid() ? d.location.file->lineColumn(d.location.offset) : LineColumn{};
    r.error = fmt::format("{}:{}: {}", lc.line, lc.column, d.message);
  }
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every example kernel: text -> program -> text -> program gives the same
// program, and the canonical text is a fixed point.
TEST(LloText, ExamplesRoundTrip) {
  for (const char* name : {"add", "copy", "matmul"}) {
    std::string text = readFile(std::string(TPU_SOURCE_DIR) + "/testdata/llo/" + name + ".llo");
    ASSERT_FALSE(text.empty()) << name;
    auto first = assemble(text);
    ASSERT_TRUE(first.assembled) << name << ": " << first.error;
    std::string printed = printLlo(first.assembled->program);
    auto second = assemble(printed);
    ASSERT_TRUE(second.assembled) << name << ": " << second.error << "\n" << printed;
    EXPECT_EQ(second.assembled->program, first.assembled->program) << name;
    EXPECT_EQ(printLlo(second.assembled->program), printed) << name;
    EXPECT_EQ(isa::encodeProgram(second.assembled->program), isa::encodeProgram(first.assembled->program));
  }
}

TEST(LloText, GreedyBundling) {
  auto r = assemble(
      "smov s1, 1\n"
      "smov s2, 2\n"
      "sadd s3, s1, s2\n"          // reads s1, s2 written in the open bundle: new bundle
      "vmov.f32 v0, 1.5\n"
      "vadd.f32 v1, v0, s3\n"      // reads v0: new bundle
      "vmul.f32 v2, v0, 2.0\n"
      "halt\n");
  ASSERT_TRUE(r.assembled) << r.error;
  const auto& b = r.assembled->program.bundles;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].instrs.size(), 2u);
  EXPECT_EQ(b[1].instrs.size(), 2u);  // sadd + vmov.f32
  EXPECT_EQ(b[2].instrs.size(), 3u);  // vadd, vmul, halt
  auto none = assemble("smov s1, 1\nsmov s2, 2\nhalt\n", AsmOptions{"v5e", false, false, {}});
  ASSERT_TRUE(none.assembled);
  EXPECT_EQ(none.assembled->program.bundles.size(), 3u);
}

TEST(LloText, WaitStartsBundleAndBranchEndsIt) {
  auto r = assemble(
      ".buffer x : hbm f32[8,128]\n.buffer v : vmem f32[8,128]\n.dma d chunk=4096\n"
      "dma.h2v d, [v], x, sem0\nsem.wait sem0\nvld v0, [v]\njmp end\nsmov s0, 1\nend: halt\n");
  ASSERT_TRUE(r.assembled) << r.error;
  const auto& b = r.assembled->program.bundles;
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].instrs.size(), 1u);  // the DMA alone: the wait may not join it
  EXPECT_EQ(b[1].instrs.size(), 3u);  // wait, vld, jmp
  EXPECT_EQ(b[2].instrs.size(), 1u);
}

TEST(LloText, OperandsAndConstants) {
  auto r = assemble(
      ".const N = (4 + 4) * 2\n.const HALF = 0.5\n.alias i = s7\n"
      ".buffer t : vmem f32[8,128]\n.buffer u : vmem f32[8,128]\n.buffer h : hbm f32[N]\n.buffer k : smem s32[4] = [1, -2, 3, 4]\n"
      "smov i, N << 1\n"
      "vld v1, [u + 512], stride=0, mask=0x0f\n"
      "vsel.f32 v2, m1, v1, 0x7fc00000\n"
      "vmul.f32 v3, v1, HALF\n"
      "sld s2, [i + k]\n"
      "sem.signal sem[i], 2\n"
      "halt\n");
  ASSERT_TRUE(r.assembled) << r.error;
  const auto& p = r.assembled->program;
  EXPECT_EQ(p.buffers[1].address, 4096u);  // after t, on a 512-byte row
  std::vector<std::string> ops;
  for (const auto& b : p.bundles)
    for (const auto& in : b.instrs) ops.push_back(printInstr(in, &p));
  std::vector<std::string> want = {"smov s7, 32", "vld v1, [u + 512], stride=0, mask=0x0f",
                                   "vsel.f32 v2, m1, v1, 0x7fc00000", "vmul.f32 v3, v1, 0.5",
                                   "sld s2, [s7]", "sem.signal sem[s7], n=2", "halt"};
  EXPECT_EQ(ops, want);
}

TEST(LloText, Diagnostics) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"frob s1\n", "1:1: unknown instruction 'frob'"},
      {"sadd s1, v2, 3\n", "1:10: operand 'a' of 'sadd' must be a scalar register (sN), found 'v2'"},
      {"smov s40, 1\n", "1:1: register s40 out of range: target 'v5e' has s0..s31"},
      {"jmp nowhere\n", "1:5: undefined label 'nowhere'"},
      {"sadd s1, s2\n", "1:1: missing operand 'b' of 'sadd' (usage: sadd d, a, b)"},
      {"{ smov s1, 1 ; smov s2, 2 ; smov s3, 3 }\n",
       "1:3: bundle has more 'scalar' ops than the 2 scalar slots of target 'v5e'"},
      {"vld v0, [134217728]\n", "1:1: VMEM address 134217728 (+4096 bytes) is outside VMEM of 134217728 bytes on target 'v5e'"},
      {".buffer a : vmem f32[8]\n.buffer a : vmem f32[8]\n", "2:9: 'a' is already defined at line 1"},
      {".bogus\n", "1:1: unknown directive '.bogus'"},
      {"l:\nl:\n", "2:1: 'l' is already defined at line 1"},
  };
  for (const Case& c : cases) {
    auto r = assemble(c.text);
    EXPECT_FALSE(r.assembled) << c.text;
    EXPECT_EQ(r.error, c.error) << c.text;
  }
}

TEST(LloText, Int8NeedsTargetSupport) {
  auto r = assemble("mxu.matmul.s8 mxu0, v0\nhalt\n", AsmOptions{"v4", true, true, {}});
  EXPECT_TRUE(r.assembled) << r.error;  // both built-ins have int8 MXUs
}

// One op parsed on its own is the op the assembler makes of the same line,
// with buffer, descriptor and label names left as references.
TEST(OpParser, MatchesTheAssembler) {
  OpParser parser;
  ParsedOp op;
  std::string error;
  ASSERT_TRUE(parser.parse("vadd.f32 v1, v2, 1.5", op, error)) << error;
  auto r = assemble(".entry main() -> ()\n  vadd.f32 v1, v2, 1.5\n  halt\n", AsmOptions{"v5e", false, false, {}});
  ASSERT_TRUE(r.assembled) << r.error;
  EXPECT_EQ(op.instr, r.assembled->program.bundles[0].instrs[0]);
  EXPECT_TRUE(op.refs.empty());

  ASSERT_TRUE(parser.parse("dma.h2v d3, [s4], buf[s2 + 64], sem[s5]", op, error)) << error;
  ASSERT_EQ(op.refs.size(), 2u);
  EXPECT_EQ(op.refs[0].kind, OpSymbol::Buffer);
  EXPECT_EQ(op.refs[0].name, "buf");
  EXPECT_EQ(op.instr.operands[op.refs[0].operand].imm, 64);
  EXPECT_EQ(op.refs[1].kind, OpSymbol::Descriptor);
  EXPECT_EQ(op.refs[1].name, "d3");

  ASSERT_TRUE(parser.parse("br.lt s1, 4, top", op, error)) << error;
  ASSERT_EQ(op.refs.size(), 1u);
  EXPECT_EQ(op.refs[0].kind, OpSymbol::Label);
  EXPECT_EQ(op.refs[0].operand, 2u);
}

TEST(OpParser, ReportsTheAssemblersMessage) {
  OpParser parser;
  ParsedOp op;
  std::string error;
  EXPECT_FALSE(parser.parse("vadd.f32 v1, v2", op, error));
  EXPECT_EQ(error, "missing operand 'b' of 'vadd.f32' (usage: vadd.f32 d, a, b)");
  EXPECT_FALSE(parser.parse("vaddd.f32 v1, v2, v3", op, error));
  EXPECT_EQ(error, "unknown instruction 'vaddd.f32'");
  EXPECT_FALSE(parser.parse("sadd s1, s2, 3 4", op, error));
  EXPECT_EQ(error, "expected ',' or the end of the instruction, found '4'");
  // A good op after a bad one parses (no state is kept between ops).
  EXPECT_TRUE(parser.parse("sadd s1, s2, 3", op, error)) << error;
}

}  // namespace
}  // namespace tpu::llo
