#include "passes/fusion/fusion.h"

#include <gtest/gtest.h>

#include "hlo/io/hlo_io.h"
#include "hlo/text/printer.h"
#include "passes/test_util.h"

namespace tpu::fusion {
namespace {

struct Fused {
  std::unique_ptr<hlo::Module> module;
  std::string text;
  std::string remarks;
};

Fused fuse(const std::string& hlo, FusionOptions options = {}, const std::string& target = "v5e") {
  Fused f;
  passes::ParsedModule parsed = passes::parseModule(hlo);
  EXPECT_TRUE(parsed.module) << parsed.messages;
  if (!parsed.module) return f;
  DiagnosticEngine diags;
  auto chip = target::loadTarget(target, diags);
  EXPECT_TRUE(chip) << firstErrorMessage(diags);
  CostModel cost(*chip);
  std::vector<passes::Remark> remarks;
  fuseModule(*parsed.module, cost, options, "fusion", &remarks);
  EXPECT_TRUE(hlo::verifyLoadedModule(*parsed.module, diags)) << firstErrorMessage(diags);
  for (const auto& r : remarks) f.remarks += r.text + "\n";
  f.text = hlo::printHloText(*parsed.module);
  f.module = std::move(parsed.module);
  return f;
}

int64_t count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char* kAddComputation = R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)";

TEST(Fusion, ElementwiseChainIsOneLoopFusion) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[256,1024] parameter(0)
  p1 = f32[256,1024] parameter(1)
  a = f32[256,1024] add(p0, p1)
  b = f32[256,1024] multiply(a, p1)
  c = f32[256,1024] exponential(b)
  ROOT d = f32[256,1024] negate(c)
})");
  EXPECT_EQ(count(f.text, "fusion("), 1) << f.text;
  EXPECT_NE(f.text.find("kind=kLoop, calls=%fused_computation"), std::string::npos) << f.text;
  EXPECT_NE(f.remarks.find("fused fusion (kLoop, loop kernel) = {a, b, c, d}"), std::string::npos) << f.remarks;
  EXPECT_EQ(f.module->entry()->instructionCount(), 3);
}

TEST(Fusion, ExpensiveProducerWithSeveralUsersIsNotDuplicated) {
  FusionOptions options;
  options.multiOutput = false;
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[256,1024] parameter(0)
  p1 = f32[256,1024] parameter(1)
  x = f32[256,1024] exponential(p0)
  u = f32[256,1024] add(x, p1)
  v = f32[256,1024] multiply(x, p1)
  ROOT t = (f32[256,1024], f32[256,1024]) tuple(u, v)
})",
                 options);
  EXPECT_NE(f.remarks.find("not fused: x -> u: would duplicate x, which has 2 users"), std::string::npos)
      << f.remarks;
  EXPECT_EQ(count(f.text, "exponential("), 1) << f.text;
}

TEST(Fusion, CheapProducerIsDuplicatedIntoEveryUser) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[256,1024] parameter(0)
  p1 = f32[256,1024] parameter(1)
  x = f32[256,1024] negate(p0)
  u = f32[256,1024] add(x, p1)
  v = f32[256,1024] multiply(x, p1)
  ROOT t = (f32[256,1024], f32[256,1024]) tuple(u, v)
})",
                 {.multiOutput = false});
  EXPECT_EQ(count(f.text, "negate("), 2) << f.text;
  EXPECT_EQ(count(f.text, " fusion("), 2) << f.text;
}

TEST(Fusion, OpaqueConsumerIsExplained) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[1024] parameter(0)
  x = f32[1024] negate(p0)
  ROOT c = f32[1024] custom-call(x), custom_call_target="Sharding"
})");
  EXPECT_NE(f.remarks.find("not fused: x -> c: consumer custom-call c is opaque"), std::string::npos) << f.remarks;
}

TEST(Fusion, DotWithBiasAndActivationIsOneOutputFusion) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  x = bf16[256,512] parameter(0)
  w = bf16[512,1024] parameter(1)
  b = f32[1024] parameter(2)
  d = f32[256,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[256,1024] broadcast(b), dimensions={1}
  s = f32[256,1024] add(d, bb)
  z = f32[] constant(0)
  zb = f32[256,1024] broadcast(z), dimensions={}
  ROOT r = f32[256,1024] maximum(s, zb)
})");
  EXPECT_EQ(count(f.text, " fusion("), 1) << f.text;
  EXPECT_NE(f.text.find("kind=kOutput"), std::string::npos) << f.text;
  EXPECT_NE(f.remarks.find("(kOutput, output kernel)"), std::string::npos) << f.remarks;
}

TEST(Fusion, ReductionWithElementwiseProducersIsOneInputFusion) {
  Fused f = fuse(std::string("HloModule m\n") + kAddComputation + R"(
ENTRY e {
  p0 = f32[512,1024] parameter(0)
  x = f32[512,1024] exponential(p0)
  y = f32[512,1024] multiply(x, p0)
  z = f32[] constant(0)
  ROOT r = f32[512] reduce(y, z), dimensions={1}, to_apply=add
})");
  EXPECT_EQ(count(f.text, " fusion("), 1) << f.text;
  EXPECT_NE(f.remarks.find("(kInput, input kernel) = {x, y, r}"), std::string::npos) << f.remarks;
}

TEST(Fusion, WorkingSetPastVmemIsRefused) {
  // No streaming kernel covers a concatenation of operands of different
  // shapes, so its fusion would be a resident kernel; on a chip with
  // 256 KiB of VMEM its 1 MiB intermediate cannot stay on chip (llo-gen
  // keeps half for kernels).
  const std::string concat = R"(HloModule m
ENTRY e {
  p0 = f32[512,512] parameter(0)
  p1 = f32[256,512] parameter(1)
  a = f32[512,512] exponential(p0)
  b = f32[256,512] exponential(p1)
  ROOT c = f32[768,512] concatenate(a, b), dimensions={0}
})";
  Fused small = fuse(concat, {}, TPU_SOURCE_DIR "/testdata/targets/v5e-small-vmem.json");
  EXPECT_NE(small.remarks.find("not fused: a -> c: working set 1.0 MiB exceeds the 128.0 KiB VMEM budget"),
            std::string::npos)
      << small.remarks;
  EXPECT_EQ(count(small.text, " fusion("), 0) << small.text;
  // On v5e (128 MiB of VMEM) the same fusion is one kernel.
  Fused large = fuse(concat);
  EXPECT_EQ(count(large.text, " fusion("), 1) << large.text;
}

TEST(Fusion, DeadCodeIsLeftAlone) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[1024] parameter(0)
  dead = f32[1024] exponential(p0)
  x = f32[1024] negate(p0)
  ROOT y = f32[1024] abs(x)
})");
  EXPECT_NE(f.text.find("%dead = f32[1024]{0} exponential(%p0)"), std::string::npos) << f.text;
  EXPECT_EQ(count(f.text, " fusion("), 1) << f.text;
}

TEST(Fusion, SiblingsReadingOneOperandShareAKernel) {
  Fused f = fuse(R"(HloModule m
ENTRY e {
  p0 = f32[1024,1024] parameter(0)
  u = f32[1024,1024] exponential(p0)
  v = f32[1024,1024] negate(p0)
  ROOT t = (f32[1024,1024], f32[1024,1024]) tuple(u, v)
})");
  EXPECT_EQ(count(f.text, " fusion("), 1) << f.text;
  EXPECT_NE(f.text.find("get-tuple-element(%fusion), index=1"), std::string::npos) << f.text;
}

TEST(Fusion, InPlaceUpdateReadsOnlyTheBlockItWrites) {
  // XLA's in-place rule: what is fused beside a dynamic-update-slice may
  // read the buffer it updates only elementwise, or through a
  // dynamic-slice of the very block it writes.
  const std::string kv = R"(HloModule m
ENTRY e {
  buf = f32[64,1024] parameter(0)
  x = f32[1,1024] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  j = s32[] constant(3)
  ds = f32[1,1024] dynamic-slice(buf, INDEX, z), dynamic_slice_sizes={1,1024}
  upd = f32[1,1024] add(ds, x)
  ROOT dus = f32[64,1024] dynamic-update-slice(buf, upd, i, z)
})";
  auto withIndex = [&](const std::string& index) {
    std::string text = kv;
    text.replace(text.find("INDEX"), 5, index);
    return text;
  };
  Fused same = fuse(withIndex("i"));
  EXPECT_NE(same.remarks.find("= {ds, upd, dus}"), std::string::npos) << same.remarks;
  Fused other = fuse(withIndex("j"));
  EXPECT_NE(other.remarks.find("not fused: ds -> upd: dus updates buf in place, and ds reads it too"),
            std::string::npos)
      << other.remarks;
}

TEST(Fusion, OutputIsDeterministic) {
  const std::string hlo = std::string("HloModule m\n") + kAddComputation + R"(
ENTRY e {
  p0 = f32[64,128] parameter(0)
  p1 = f32[128] parameter(1)
  b = f32[64,128] broadcast(p1), dimensions={1}
  x = f32[64,128] add(p0, b)
  y = f32[64,128] exponential(x)
  z = f32[] constant(0)
  s = f32[64] reduce(y, z), dimensions={1}, to_apply=add
  n = f32[64] negate(s)
  ROOT t = (f32[64,128], f32[64]) tuple(y, n)
})";
  Fused a = fuse(hlo), b = fuse(hlo);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.remarks, b.remarks);
}

TEST(Fusion, AttentionIsOneKernelWithoutTheScoresInHbm) {
  const std::string hlo = std::string("HloModule m\n") + kAddComputation + R"(
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  q = bf16[2,256,128] parameter(0)
  k = bf16[2,512,128] parameter(1)
  v = bf16[2,512,128] parameter(2)
  d = bf16[2,256,512] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  c = bf16[] constant(0.088)
  cb = bf16[2,256,512] broadcast(c), dimensions={}
  s = bf16[2,256,512] multiply(d, cb)
  x = f32[2,256,512] convert(s)
  ninf = f32[] constant(-inf)
  m = f32[2,256] reduce(x, ninf), dimensions={2}, to_apply=mx
  mb = f32[2,256,512] broadcast(m), dimensions={0,1}
  df = f32[2,256,512] subtract(x, mb)
  ex = f32[2,256,512] exponential(df)
  z = f32[] constant(0)
  su = f32[2,256] reduce(ex, z), dimensions={2}, to_apply=add
  sb = f32[2,256,512] broadcast(su), dimensions={0,1}
  pf = f32[2,256,512] divide(ex, sb)
  p = bf16[2,256,512] convert(pf)
  ROOT o = bf16[2,256,128] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})";
  Fused f = fuse(hlo);
  EXPECT_EQ(count(f.text, "fusion("), 1) << f.text;
  EXPECT_NE(f.text.find("kind=kCustom"), std::string::npos) << f.text;
  // The scores read outside the region: they must exist in HBM, so no attention kernel.
  std::string leaked = hlo;
  leaked.replace(leaked.find("  ROOT o = "), 10, "  o = ");
  leaked.replace(leaked.rfind("}"), 1, "  ROOT t = (bf16[2,256,128], f32[2,256]) tuple(o, m)\n}");
  Fused g = fuse(leaked);
  EXPECT_EQ(g.text.find("kind=kCustom"), std::string::npos) << g.text;
}

TEST(Fusion, GeluEpilogueReadingTheDotSeveralTimesIsOneOutputFusion) {
  // x = dot + bias is read by four instructions of the GELU: one output
  // kernel for all of it, x never in HBM (priority fusion alone would have
  // to duplicate the dot into each user).
  const std::string hlo = std::string("HloModule m\n") + R"(
ENTRY e {
  a = bf16[256,512] parameter(0)
  w = bf16[512,1024] parameter(1)
  b = bf16[1024] parameter(2)
  d = bf16[256,1024] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = bf16[256,1024] broadcast(b), dimensions={1}
  x = bf16[256,1024] add(d, bb)
  x2 = bf16[256,1024] multiply(x, x)
  x3 = bf16[256,1024] multiply(x, x2)
  c0 = bf16[] constant(0.0447)
  c0b = bf16[256,1024] broadcast(c0), dimensions={}
  t0 = bf16[256,1024] multiply(x3, c0b)
  t1 = bf16[256,1024] add(x, t0)
  c1 = bf16[] constant(0.797)
  c1b = bf16[256,1024] broadcast(c1), dimensions={}
  t2 = bf16[256,1024] multiply(t1, c1b)
  th = bf16[256,1024] tanh(t2)
  one = bf16[] constant(1)
  oneb = bf16[256,1024] broadcast(one), dimensions={}
  t3 = bf16[256,1024] add(th, oneb)
  h = bf16[] constant(0.5)
  hb = bf16[256,1024] broadcast(h), dimensions={}
  t4 = bf16[256,1024] multiply(t3, hb)
  ROOT y = bf16[256,1024] multiply(x, t4)
})";
  Fused f = fuse(hlo);
  EXPECT_EQ(count(f.text, "fusion("), 1) << f.text;
  EXPECT_NE(f.text.find("kind=kOutput"), std::string::npos) << f.text;
  EXPECT_EQ(f.remarks.find("would duplicate"), std::string::npos) << f.remarks;
}

TEST(Fusion, SmallAttributesShareOneBlockAndCopyOnWrite) {
  hlo::Instruction a(hlo::Opcode::Parameter, "a", hlo::Shape());
  hlo::Instruction b(hlo::Opcode::Parameter, "b", hlo::Shape());
  setSmallAttribute(a, SmallAttribute::ParameterNumber, 3);
  setSmallAttribute(b, SmallAttribute::ParameterNumber, 3);
  const hlo::Instruction& ca = a;
  const hlo::Instruction& cb = b;
  EXPECT_EQ(&ca.attrs(), &cb.attrs());
  EXPECT_EQ(ca.attrs().parameterNumber, 3);
  EXPECT_TRUE(ca.attrs().dimensions.empty());
  a.attrs().parameterNumber = 4;  // unshares a: b keeps its value
  EXPECT_NE(&ca.attrs(), &cb.attrs());
  EXPECT_EQ(cb.attrs().parameterNumber, 3);
  // Values past the table, and instructions that have attributes, set the field in their own block.
  hlo::Instruction big(hlo::Opcode::Parameter, "big", hlo::Shape());
  setSmallAttribute(big, SmallAttribute::ParameterNumber, 1000);
  EXPECT_EQ(static_cast<const hlo::Instruction&>(big).attrs().parameterNumber, 1000);
  hlo::Instruction g(hlo::Opcode::GetTupleElement, "g", hlo::Shape());
  g.attrs().dimensions = {1};
  setSmallAttribute(g, SmallAttribute::TupleIndex, 2);
  const hlo::Instruction& cg = g;
  EXPECT_EQ(cg.attrs().tupleIndex, 2);
  EXPECT_EQ(cg.attrs().dimensions, std::vector<int64_t>{1});
  hlo::Instruction f(hlo::Opcode::Fusion, "f", hlo::Shape());
  setSmallAttribute(f, SmallAttribute::FusionKind, static_cast<int64_t>(hlo::FusionKind::Output));
  EXPECT_EQ(static_cast<const hlo::Instruction&>(f).attrs().fusionKind, hlo::FusionKind::Output);
}

TEST(Fusion, FusionParametersShareTheirAttributeBlocks) {
  Fused f = fuse(R"(HloModule m
lt {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT l = pred[] compare(x, y), direction=LT
}
ENTRY e {
  p0 = f32[256,1024] parameter(0)
  p1 = f32[256,1024] parameter(1)
  a = f32[256,1024] add(p0, p1)
  b = f32[256,1024] exponential(a)
  r = f32[256,1024] sort(b), dimensions={1}, to_apply=lt
  c = f32[256,1024] add(r, p1)
  ROOT d = f32[256,1024] negate(c)
})");
  ASSERT_TRUE(f.module);
  // Two fusions around the sort, each with a parameter 0: one block.
  std::vector<const hlo::Instruction*> firstParameters;
  for (const auto& c : f.module->computations())
    for (const auto& in : c->instructions()) {
      const hlo::Instruction& i = *in;
      if (i.opcode() == hlo::Opcode::Parameter && i.attrs().parameterNumber == 0 && c.get() != f.module->entry() &&
          c->name().rfind("fused", 0) == 0)
        firstParameters.push_back(&i);
    }
  ASSERT_EQ(firstParameters.size(), 2u) << f.text;
  EXPECT_EQ(&firstParameters[0]->attrs(), &firstParameters[1]->attrs());
}

}  // namespace
}  // namespace tpu::fusion
