// Unit tests of buffer assignment, and end-to-end tests: HLO text ->
// llo-gen -> assembler -> simulator, compared with the reference
// interpreter on seeded inputs.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "codegen/buffer_assignment.h"
#include "codegen/codegen.h"
#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "llo/text.h"
#include "sim/sim.h"

namespace tpu::codegen {
namespace {

TEST(BufferAssignment, DisjointRangesShareBytes) {
  HeapAssignment h = assignHeap({{0, 1, 1000}, {2, 3, 1000}, {1, 2, 512}});
  // 0 and 1 do not overlap in time: same offset. 2 overlaps both.
  EXPECT_EQ(h.offsets[0], h.offsets[1]);
  EXPECT_NE(h.offsets[2], h.offsets[0]);
  EXPECT_EQ(h.heapBytes, 1024u + 512u);
}

TEST(BufferAssignment, OverlappingRangesDoNotAlias) {
  std::vector<LiveRange> r = {{0, 5, 4096}, {1, 2, 100}, {2, 6, 700}, {3, 4, 1}};
  HeapAssignment h = assignHeap(r);
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = i + 1; j < r.size(); ++j) {
      bool live = r[i].start <= r[j].end && r[j].start <= r[i].end;
      bool bytes = h.offsets[i] < h.offsets[j] + r[j].bytes && h.offsets[j] < h.offsets[i] + r[i].bytes;
      EXPECT_FALSE(live && bytes) << i << " " << j;
    }
  for (uint64_t o : h.offsets) EXPECT_EQ(o % 512, 0u);
}

struct E2eRun {
  std::string error = {};
  double maxErr = 0;
  std::string where = {};
  uint64_t cycles = 0;
  sim::SimReport report = {};
};

hlo::Literal randomLiteral(const hlo::Shape& s, std::mt19937& rng) {
  hlo::Literal l(s);
  std::uniform_real_distribution<double> f(-1.0, 1.0);
  std::uniform_int_distribution<int> i(-4, 4);
  for (int64_t k = 0; k < l.elementCount(); ++k) {
    if (hlo::isFloatType(s.elementType())) l.setDouble(k, f(rng));
    else if (s.elementType() == hlo::ElementType::Pred) l.setInt(k, i(rng) > 0);
    else if (hlo::isUnsignedIntegerType(s.elementType())) l.setInt(k, i(rng) + 4);
    else l.setInt(k, i(rng));
  }
  return l;
}

void leaves(const hlo::Literal& l, std::vector<const hlo::Literal*>& out) {
  if (l.isTuple())
    for (const auto& e : l.tupleElements()) leaves(e, out);
  else
    out.push_back(&l);
}

E2eRun compileAndCompare(const std::string& text, const std::string& targetName = "v5e",
                      CodegenOptions options = {}, std::vector<hlo::Literal>* given = nullptr) {
  E2eRun run;
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return {"parse: " + messages};
  auto target = target::loadTarget(targetName, diags);
  options.targetSpec = targetName;
  auto gen = generateLlo(*loaded.module, *target, options, diags);
  if (!gen) return {"llo-gen: " + messages};
  SourceFile llo("test.llo", gen->llo);
  auto assembled = llo::assembleLlo(llo, {}, diags);
  if (!assembled) return {"llo-asm: " + messages + "\n" + gen->llo.substr(0, 20000)};
  std::mt19937 rng(1234);
  std::vector<hlo::Literal> args;
  for (int64_t p = 0; p < loaded.module->entry()->parameterCount(); ++p)
    args.push_back(given ? (*given)[static_cast<size_t>(p)]
                         : randomLiteral(loaded.module->entry()->parameter(p)->shape(), rng));
  std::vector<std::string> inputs;
  for (const auto& a : args) {
    std::vector<const hlo::Literal*> ls;
    leaves(a, ls);
    for (const auto* l : ls) inputs.emplace_back(reinterpret_cast<const char*>(l->data().data()), l->data().size());
  }
  sim::SimOptions so;
  so.maxCycles = 2'000'000'000ull;
  auto simmed = sim::simulate(assembled->program, *target, inputs, so, diags);
  if (!simmed) return {"sim: " + messages};
  eval::EvalOptions eo;
  auto expected = eval::evaluate(*loaded.module, args, eo, diags);
  if (!expected) return {"eval: " + messages};
  std::vector<const hlo::Literal*> want;
  leaves(*expected, want);
  if (want.size() != simmed->results.size()) return {"result count differs"};
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    hlo::Literal got(w.shape());
    if (got.data().size() != simmed->results[r].size()) return {fmt::format("result {} size differs", r)};
    std::memcpy(got.mutableData().data(), simmed->results[r].data(), got.data().size());
    for (int64_t k = 0; k < w.elementCount(); ++k) {
      double a = got.getDouble(k), b = w.getDouble(k);
      double err = (std::isnan(a) && std::isnan(b)) || a == b ? 0.0 : std::fabs(a - b) / (1.0 + std::fabs(b));
      if (std::isnan(err)) err = 1e30;
      if (err > run.maxErr) {
        run.maxErr = err;
        run.where = fmt::format("result {} element {}: got {} want {}", r, k, a, b);
      }
    }
  }
  run.cycles = simmed->report.cycles;
  run.report = simmed->report;
  return run;
}

#define EXPECT_MATCH(text, tol)                                  \
  do {                                                           \
    E2eRun r_ = compileAndCompare(text);                            \
    ASSERT_EQ(r_.error, "");                                     \
    EXPECT_LE(r_.maxErr, tol) << r_.where;                       \
  } while (0)

TEST(EndToEnd, ElementwiseChain) {
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  x = f32[300,200] parameter(0)
  y = f32[300,200] parameter(1)
  a = f32[300,200] add(x, y)
  c = f32[] constant(2)
  b = f32[300,200] broadcast(c), dimensions={}
  ROOT m = f32[300,200] multiply(a, b)
})",
               0.0);
}


TEST(EndToEnd, DotF32HighestAndBf16) {
  // f32 HIGHEST: six bf16 passes, close to f32.
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  a = f32[100,300] parameter(0)
  b = f32[300,70] parameter(1)
  ROOT d = f32[100,70] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
})",
               1e-5);
  // bf16 operands: exact products, f32 sums (order differs per K tile).
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  a = bf16[2,64,256] parameter(0)
  b = bf16[2,128,256] parameter(1)
  ROOT d = f32[2,64,128] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
})",
               1e-5);
}

TEST(EndToEnd, DotDefaultPrecisionIsOneBf16Pass) {
  E2eRun r = compileAndCompare(R"(HloModule m
ENTRY main {
  a = f32[64,128] parameter(0)
  b = f32[128,128] parameter(1)
  ROOT d = f32[64,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_EQ(r.error, "");
  EXPECT_GT(r.maxErr, 1e-5);  // bf16 rounding of the operands shows
  EXPECT_LE(r.maxErr, 3e-2);
}

TEST(EndToEnd, Reductions) {
  const char* add = R"(
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
max {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT s = s32[] maximum(p, q)
}
)";
  EXPECT_MATCH(std::string("HloModule m\n") + add + R"(ENTRY main {
  x = f32[37,3000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[37] reduce(x, z), dimensions={1}, to_apply=add
})", 1e-4);  // tree order across lanes vs the interpreter's sequential sum
  EXPECT_MATCH(std::string("HloModule m\n") + add + R"(ENTRY main {
  x = f32[64,4096] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4096] reduce(x, z), dimensions={0}, to_apply=add
})", 0.0);
  EXPECT_MATCH(std::string("HloModule m\n") + add + R"(ENTRY main {
  x = s32[5,6,7] parameter(0)
  z = s32[] constant(-100)
  ROOT r = s32[6] reduce(x, z), dimensions={0,2}, to_apply=max
})", 0.0);
}

TEST(EndToEnd, DataMovement) {
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  x = f32[3,4,5] parameter(0)
  t = f32[5,3,4] transpose(x), dimensions={2,0,1}
  s = f32[5,2,2] slice(t), slice={[0:5], [1:3], [0:4:2]}
  r = f32[5,2,2] reverse(s), dimensions={0,2}
  c = f32[5,4,2] concatenate(s, r), dimensions={1}
  z = f32[] constant(7)
  p = f32[8,8,3] pad(c, z), padding=1_2x0_1_1x2_-1
  i = s32[8,8,3] iota(), iota_dimension=1
  f = f32[8,8,3] convert(i)
  ROOT o = f32[8,8,3] add(p, f)
})", 0.0);
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  x = bf16[7] parameter(0)
  b = bf16[3,7,2] broadcast(x), dimensions={1}
  ROOT e = bf16[3,7,2] exponential(b)
})", 1e-2);
}

TEST(EndToEnd, FusionSelectCompareConvert) {
  EXPECT_MATCH(R"(HloModule m
fused {
  a = f32[2000] parameter(0)
  b = s32[2000] parameter(1)
  c = f32[] parameter(2)
  bc = f32[2000] broadcast(c), dimensions={}
  fb = f32[2000] convert(b)
  g = pred[2000] compare(a, fb), direction=GT
  m = f32[2000] maximum(a, bc)
  ROOT s = f32[2000] select(g, m, fb)
}
ENTRY main {
  x = f32[2000] parameter(0)
  y = s32[2000] parameter(1)
  z = f32[] parameter(2)
  ROOT f = f32[2000] fusion(x, y, z), kind=kLoop, calls=fused
})", 0.0);
}

TEST(EndToEnd, WhileAndConditional) {
  EXPECT_MATCH(R"(HloModule m
cond {
  p = (s32[], f32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[300]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[300] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[300] add(x, x)
  ROOT t = (s32[], f32[300]) tuple(j, y)
}
t_branch {
  p = f32[300] parameter(0)
  ROOT n = f32[300] negate(p)
}
f_branch {
  p = f32[300] parameter(0)
  ROOT n = f32[300] abs(p)
}
ENTRY main {
  x = f32[300] parameter(0)
  q = pred[] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[300]) tuple(z, x)
  w = (s32[], f32[300]) while(t), condition=cond, body=body
  r = f32[300] get-tuple-element(w), index=1
  ROOT c = f32[300] conditional(q, r, r), true_computation=t_branch, false_computation=f_branch
})", 0.0);
}

TEST(EndToEnd, DynamicSliceAndUpdate) {
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  x = f32[10,20] parameter(0)
  i = s32[] constant(3)
  j = s32[] constant(17)
  d = f32[4,5] dynamic-slice(x, i, j), dynamic_slice_sizes={4,5}
  n = f32[4,5] negate(d)
  ROOT u = f32[10,20] dynamic-update-slice(x, n, j, i)
})", 0.0);
}

TEST(EndToEnd, MatmulManyTilesAndSteps) {
  // A small VMEM budget forces several M tiles, two N tiles and k steps, so
  // the prefetch slots and both C slots are used.
  CodegenOptions o;
  o.vmemFraction = 0.009;
  const char* bf16 = R"(HloModule m
ENTRY main {
  a = bf16[2,320,384] parameter(0)
  b = bf16[2,384,1024] parameter(1)
  ROOT d = f32[2,320,1024] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
})";
  E2eRun r = compileAndCompare(bf16, "v5e", o);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  r = compileAndCompare(bf16, "v4", o);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-5) << r.where;
  r = compileAndCompare(R"(HloModule m
ENTRY main {
  a = f32[288,256] parameter(0)
  b = f32[256,384] parameter(1)
  ROOT d = f32[288,384] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,high}
})", "v5e", o);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.maxErr, 1e-4) << r.where;
}

// llo-gen's scheduled text assembles to exactly the program compileModule
// returns, and scheduled and unscheduled code compute the same bits.
TEST(Schedule, TextAndProgramAgreeAndResultsMatchUnscheduled) {
  const char* modules[] = {R"(HloModule m
ENTRY main {
  x = f32[300,200] parameter(0)
  y = f32[300,200] parameter(1)
  a = f32[300,200] add(x, y)
  ROOT e = f32[300,200] exponential(a)
})",
                           R"(HloModule m
ENTRY main {
  a = bf16[64,256] parameter(0)
  b = bf16[256,512] parameter(1)
  ROOT d = f32[64,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})"};
  DiagnosticEngine diags;
  auto target = target::loadTarget("v5e", diags);
  ASSERT_TRUE(target);
  for (const char* text : modules) {
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
    ASSERT_TRUE(loaded.module);
    CodegenOptions list, none;
    none.schedule = llo::ScheduleMode::None;
    auto gen = generateLlo(*loaded.module, *target, list, diags);
    ASSERT_TRUE(gen);
    EXPECT_LT(gen->schedule.bundlesAfter, gen->schedule.bundlesBefore);
    SourceFile file("t.llo", gen->llo);
    auto fromText = llo::assembleLlo(file, {}, diags);
    ASSERT_TRUE(fromText) << gen->llo;
    auto compiled = compileModule(*loaded.module, *target, list, diags);
    auto flat = compileModule(*loaded.module, *target, none, diags);
    ASSERT_TRUE(compiled && flat);
    EXPECT_EQ(fromText->program, *compiled);
    std::mt19937 rng(5);
    std::vector<std::string> inputs;
    for (uint32_t id : compiled->entries.front().args) {
      std::string bytes(compiled->buffers[id].sizeBytes(), '\0');
      for (size_t i = 0; i < bytes.size(); i += 2) bytes[i + 1] = static_cast<char>(0x3c + rng() % 3);  // small floats
      inputs.push_back(bytes);
    }
    auto a = sim::simulate(*compiled, *target, inputs, {}, diags);
    auto b = sim::simulate(*flat, *target, inputs, {}, diags);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->results, b->results);
    EXPECT_LT(a->report.cycles, b->report.cycles);
  }
}

TEST(EndToEnd, UnsupportedOpIsAnError) {
  E2eRun r = compileAndCompare(R"(HloModule m
ENTRY main {
  x = f32[8] parameter(0)
  ROOT s = f32[8] all-reduce(x), replica_groups={}, to_apply=add
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
})");
  EXPECT_NE(r.error, "");
}

}  // namespace
}  // namespace tpu::codegen
