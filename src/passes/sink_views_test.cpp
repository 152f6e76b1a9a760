#include "passes/sink_views.h"

#include <gtest/gtest.h>

#include "hlo/io/hlo_io.h"
#include "hlo/text/printer.h"
#include "passes/test_util.h"

namespace tpu::passes {
namespace {

using hlo::Instruction;
using hlo::Opcode;

using Parsed = ParsedModule;

Parsed parse(const std::string& text) { return parseModule(text); }

// The module `fused` computation (and entry) around one fused computation.
std::string fusion(const std::string& params, const std::string& body, const std::string& result) {
  std::string entryParams, args;
  std::string text = "HloModule m\nfused {\n" + body + "}\nENTRY main {\n";
  int n = 0;
  size_t at = 0;
  // params: "f32[4,3];f32[]" one shape per parameter.
  while (at <= params.size()) {
    size_t end = params.find(';', at);
    if (end == std::string::npos) end = params.size();
    std::string shape = params.substr(at, end - at);
    text += "  a" + std::to_string(n) + " = " + shape + " parameter(" + std::to_string(n) + ")\n";
    args += (n ? ", a" : "a") + std::to_string(n);
    ++n;
    at = end + 1;
  }
  text += "  ROOT f = " + result + " fusion(" + args + "), kind=kLoop, calls=fused\n}\n";
  return text;
}

struct Sunk {
  std::unique_ptr<hlo::Module> module;
  bool changed = false;
  const hlo::Computation* fused = nullptr;
};

Sunk sink(const std::string& text) {
  Sunk s;
  Parsed p = parse(text);
  EXPECT_TRUE(p.module) << p.messages;
  if (!p.module) return s;
  s.module = std::move(p.module);
  DiagnosticEngine diags;
  s.changed = SinkViewsPass().run(*s.module, diags);
  EXPECT_FALSE(diags.hasErrors());
  DiagnosticEngine vd;
  EXPECT_TRUE(hlo::verifyLoadedModule(*s.module, vd)) << hlo::printHloText(*s.module);
  s.fused = s.module->findComputation("fused");
  return s;
}

int64_t count(const hlo::Computation& c, Opcode op) {
  int64_t n = 0;
  for (const auto& in : c.instructions()) n += in->opcode() == op;
  return n;
}

// Every transpose, broadcast, slice and reverse reads a parameter (or a
// scalar, for broadcasts).
void expectViewsOfLeaves(const hlo::Computation& c) {
  for (const auto& in : c.instructions()) {
    Opcode op = in->opcode();
    if (op != Opcode::Transpose && op != Opcode::Broadcast && op != Opcode::Slice && op != Opcode::Reverse)
      continue;
    const Instruction* o = in->operand(0);
    EXPECT_TRUE(o->opcode() == Opcode::Parameter || o->shape().isScalar())
        << hlo::printInstruction(*in) << "\n"
        << hlo::printComputation(c);
  }
}

TEST(SinkViews, ClonesATransposedValueWithAnotherUser) {
  Sunk s = sink(fusion("f32[4,4]",
                       "  p = f32[4,4] parameter(0)\n  a = f32[4,4] exponential(p)\n"
                       "  t = f32[4,4] transpose(a), dimensions={1,0}\n  ROOT r = f32[4,4] add(a, t)\n",
                       "f32[4,4]"));
  ASSERT_TRUE(s.fused);
  EXPECT_TRUE(s.changed);
  expectViewsOfLeaves(*s.fused);
  // exp(p) stays for the add; exp(transpose(p)) recomputes it transposed.
  EXPECT_EQ(count(*s.fused, Opcode::Exp), 2);
  EXPECT_EQ(count(*s.fused, Opcode::Transpose), 1);
  const Instruction* root = s.fused->root();
  EXPECT_EQ(root->operand(0)->name(), "a");
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::Exp);
  EXPECT_EQ(root->operand(1)->operand(0)->opcode(), Opcode::Transpose);
  // Nothing is left to sink.
  DiagnosticEngine diags;
  EXPECT_FALSE(SinkViewsPass().run(*s.module, diags));
}

TEST(SinkViews, MultiOutputRootsKeepTheirValue) {
  Sunk s = sink(fusion("f32[4,6];f32[]",
                       "  p = f32[4,6] parameter(0)\n  q = f32[] parameter(1)\n"
                       "  qb = f32[4,6] broadcast(q), dimensions={}\n"
                       "  a = f32[4,6] multiply(p, qb)\n  c = f32[4,6] convert(a)\n"
                       "  v = f32[4,6] reverse(c), dimensions={0,1}\n"
                       "  ROOT r = (f32[4,6], f32[4,6]) tuple(a, v)\n",
                       "(f32[4,6], f32[4,6])"));
  ASSERT_TRUE(s.fused);
  expectViewsOfLeaves(*s.fused);
  // The scalar broadcast reads a scalar: the reversed chain reuses it.
  EXPECT_EQ(count(*s.fused, Opcode::Multiply), 2);
  EXPECT_EQ(count(*s.fused, Opcode::Broadcast), 1);
  EXPECT_EQ(count(*s.fused, Opcode::Reverse), 1);
  EXPECT_EQ(s.fused->root()->operand(0)->name(), "a");
}

TEST(SinkViews, BroadcastOfAChainBroadcastsItsOperands) {
  Sunk s = sink(fusion("f32[8];f32[4,8]",
                       "  p = f32[8] parameter(0)\n  q = f32[4,8] parameter(1)\n  h = f32[] constant(0.5)\n"
                       "  g = f32[] constant(2)\n  a = f32[8] multiply(p, p)\n  m = f32[8] clamp(h, a, g)\n"
                       "  b = f32[4,8] broadcast(m), dimensions={1}\n  ROOT r = f32[4,8] add(b, q)\n",
                       "f32[4,8]"));
  ASSERT_TRUE(s.fused);
  expectViewsOfLeaves(*s.fused);
  // p is broadcast once (the multiply reads it twice); the scalar stays.
  EXPECT_EQ(count(*s.fused, Opcode::Broadcast), 1);
  EXPECT_EQ(count(*s.fused, Opcode::Multiply), 1);
  const Instruction* clamp = s.fused->root()->operand(0);
  ASSERT_EQ(clamp->opcode(), Opcode::Clamp);
  EXPECT_EQ(clamp->shape().dimensions(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(clamp->operand(0)->opcode(), Opcode::Constant);
  EXPECT_EQ(clamp->operand(2)->opcode(), Opcode::Constant);
}

TEST(SinkViews, ViewsOfViewsCompose) {
  Sunk s = sink(fusion("f32[2,3,4];f32[3,4];f32[10]",
                       "  p = f32[2,3,4] parameter(0)\n  q = f32[3,4] parameter(1)\n  z = f32[10] parameter(2)\n"
                       // transpose of transpose is the identity: no view left.
                       "  t1 = f32[4,2,3] transpose(p), dimensions={2,0,1}\n  e = f32[4,2,3] negate(t1)\n"
                       "  t2 = f32[2,3,4] transpose(e), dimensions={1,2,0}\n"
                       // broadcast of a transpose is one broadcast.
                       "  tq = f32[4,3] transpose(q), dimensions={1,0}\n  n = f32[4,3] negate(tq)\n"
                       "  bq = f32[2,3,4] broadcast(n), dimensions={2,1}\n"
                       // slice of slice is one slice.
                       "  sa = f32[8] slice(z), slice={[1:9]}\n  a1 = f32[8] abs(sa)\n"
                       "  sb = f32[4] slice(a1), slice={[1:8:2]}\n"
                       "  ROOT r = (f32[2,3,4], f32[2,3,4], f32[4]) tuple(t2, bq, sb)\n",
                       "(f32[2,3,4], f32[2,3,4], f32[4])"));
  ASSERT_TRUE(s.fused);
  expectViewsOfLeaves(*s.fused);
  const Instruction* root = s.fused->root();
  ASSERT_EQ(root->operand(0)->opcode(), Opcode::Negate);
  EXPECT_EQ(root->operand(0)->operand(0)->name(), "p");
  const Instruction* bq = root->operand(1)->operand(0);
  ASSERT_EQ(bq->opcode(), Opcode::Broadcast);
  EXPECT_EQ(bq->operand(0)->name(), "q");
  EXPECT_EQ(bq->attrs().dimensions, (std::vector<int64_t>{1, 2}));
  const Instruction* s2 = root->operand(2)->operand(0);
  ASSERT_EQ(s2->opcode(), Opcode::Slice);
  EXPECT_EQ(s2->operand(0)->name(), "z");
  ASSERT_EQ(s2->attrs().slice.size(), 1u);
  EXPECT_EQ(s2->attrs().slice[0].start, 2);
  EXPECT_EQ(s2->attrs().slice[0].stride, 2);
  EXPECT_EQ(s2->attrs().slice[0].limit, 9);
  EXPECT_EQ(count(*s.fused, Opcode::Transpose), 0);
}

TEST(SinkViews, IotaTakesTheViewsDimension) {
  Sunk s = sink(fusion("s32[3,5]",
                       "  p = s32[3,5] parameter(0)\n  i = s32[3,5] iota(), iota_dimension=1\n"
                       "  a = s32[3,5] add(i, p)\n  ROOT t = s32[5,3] transpose(a), dimensions={1,0}\n",
                       "s32[5,3]"));
  ASSERT_TRUE(s.fused);
  const Instruction* root = s.fused->root();
  ASSERT_EQ(root->opcode(), Opcode::Add);
  ASSERT_EQ(root->operand(0)->opcode(), Opcode::Iota);
  EXPECT_EQ(root->operand(0)->attrs().iotaDimension, 0);
  EXPECT_EQ(root->operand(0)->shape().dimensions(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::Transpose);
}

TEST(SinkViews, RngIsNotDuplicated) {
  Sunk s = sink(fusion("f32[4,3]",
                       "  p = f32[4,3] parameter(0)\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                       "  g = f32[4,3] rng(lo, hi), distribution=rng_uniform\n  a = f32[4,3] add(g, p)\n"
                       "  ROOT t = f32[3,4] transpose(a), dimensions={1,0}\n",
                       "f32[3,4]"));
  ASSERT_TRUE(s.fused);
  EXPECT_EQ(count(*s.fused, Opcode::Rng), 1);
  const Instruction* t = s.fused->root();
  ASSERT_EQ(t->opcode(), Opcode::Add);
  EXPECT_EQ(t->operand(0)->opcode(), Opcode::Transpose);
  EXPECT_EQ(t->operand(0)->operand(0)->opcode(), Opcode::Rng);
}

TEST(SinkViews, ClonesOnlyInLoopFusions) {
  // A reduce makes this no loop fusion: the shared chain keeps its
  // transpose, the single-use one sinks.
  Sunk s = sink(fusion("f32[4,3]",
                       "  p = f32[4,3] parameter(0)\n  z = f32[] constant(0)\n"
                       "  a = f32[4,3] exponential(p)\n  t = f32[3,4] transpose(a), dimensions={1,0}\n"
                       "  n = f32[4,3] negate(p)\n  u = f32[3,4] transpose(n), dimensions={1,0}\n"
                       "  s = f32[] reduce(a, z), dimensions={0,1}, to_apply=sum\n"
                       "  ROOT r = (f32[3,4], f32[3,4], f32[]) tuple(t, u, s)\n",
                       "(f32[3,4], f32[3,4], f32[])")
                    .insert(12, "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                                "  ROOT s = f32[] add(x, y)\n}\n"));
  ASSERT_TRUE(s.fused);
  const Instruction* root = s.fused->root();
  EXPECT_EQ(root->operand(0)->name(), "t");
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::Negate);
  EXPECT_EQ(root->operand(1)->operand(0)->opcode(), Opcode::Transpose);
  EXPECT_EQ(count(*s.fused, Opcode::Exp), 1);
}

TEST(SinkViews, BroadcastsSinkOnlyWhereTheyThenStream) {
  // An RMS-norm-like fusion with a reduce: sinking the broadcast would run
  // the rsqrt on every element instead of once per row.
  std::string norm = fusion("f32[16,128]",
                            "  x = f32[16,128] parameter(0)\n  z = f32[] constant(0)\n"
                            "  s = f32[16] reduce(x, z), dimensions={1}, to_apply=sum\n  r = f32[16] rsqrt(s)\n"
                            "  b = f32[16,128] broadcast(r), dimensions={0}\n  ROOT m = f32[16,128] multiply(x, b)\n",
                            "f32[16,128]");
  norm.insert(12, "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n");
  Sunk s = sink(norm);
  ASSERT_TRUE(s.fused);
  EXPECT_FALSE(s.changed);
  // A loop fusion whose broadcast chain reads a reshape (no view of a
  // parameter after sinking): left alone too.
  s = sink(fusion("f32[16]",
                  "  x = f32[16] parameter(0)\n  y = f32[4,4] reshape(x)\n  r = f32[4,4] rsqrt(y)\n"
                  "  ROOT b = f32[8,4,4] broadcast(r), dimensions={1,2}\n",
                  "f32[8,4,4]"));
  ASSERT_TRUE(s.fused);
  EXPECT_FALSE(s.changed);
}

TEST(SinkViews, GrowthIsBounded) {
  // x[i+1] = x[i] + transpose(x[i]): every transpose recomputes the whole
  // chain below it, which would grow quadratically.
  std::string body = "  x0 = f32[4,4] parameter(0)\n";
  const int depth = 40;
  for (int i = 0; i < depth; ++i) {
    std::string x = "x" + std::to_string(i), t = "t" + std::to_string(i), y = "x" + std::to_string(i + 1);
    body += "  " + t + " = f32[4,4] transpose(" + x + "), dimensions={1,0}\n";
    body += "  " + y + " = f32[4,4] multiply(" + x + ", " + t + ")\n";
  }
  body += "  ROOT r = f32[4,4] negate(x" + std::to_string(depth) + ")\n";
  Parsed p = parse(fusion("f32[4,4]", body, "f32[4,4]"));
  ASSERT_TRUE(p.module) << p.messages;
  const int64_t before = p.module->findComputation("fused")->instructionCount();
  Sunk s = sink(fusion("f32[4,4]", body, "f32[4,4]"));
  ASSERT_TRUE(s.fused);
  EXPECT_TRUE(s.changed);
  EXPECT_LE(s.fused->instructionCount(), SinkViewsPass::kMaxGrowth * before);
}

}  // namespace
}  // namespace tpu::passes
