// Unit tests of buffer assignment, and end-to-end tests: HLO text ->
// llo-gen -> assembler -> simulator, compared with the reference
// interpreter on seeded inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <random>

#include "codegen/buffer_assignment.h"
#include "codegen/test_util.h"

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

// The assignment before it indexed ranges by time: every placed range
// scanned for each new one. The indexed one must place every range at the
// same offset.
HeapAssignment assignHeapByScan(const std::vector<LiveRange>& ranges, uint64_t alignment) {
  HeapAssignment out;
  out.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].bytes > ranges[b].bytes; });
  std::vector<std::array<uint64_t, 2>> placedBytes;
  std::vector<size_t> placed;
  for (size_t i : order) {
    uint64_t size = (std::max<uint64_t>(ranges[i].bytes, 1) + alignment - 1) / alignment * alignment;
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t k = 0; k < placed.size(); ++k) {
      const LiveRange& p = ranges[placed[k]];
      if (p.start <= ranges[i].end && ranges[i].start <= p.end) busy.push_back({placedBytes[k][0], placedBytes[k][1]});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + size <= lo) break;
      candidate = std::max(candidate, hi);
    }
    out.offsets[i] = candidate;
    placed.push_back(i);
    placedBytes.push_back({candidate, candidate + size});
    out.heapBytes = std::max(out.heapBytes, candidate + size);
  }
  return out;
}

TEST(BufferAssignment, IndexedByTimeGivesTheScansOffsets) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> r;
    int n = 1 + static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) {
      int64_t start = rng() % 400, len = (rng() % 8 == 0) ? rng() % 400 : rng() % 10;
      r.push_back({start, start + len, 1 + rng() % 5000});
    }
    HeapAssignment a = assignHeap(r, 512), b = assignHeapByScan(r, 512);
    ASSERT_EQ(a.offsets, b.offsets) << trial;
    ASSERT_EQ(a.heapBytes, b.heapBytes) << trial;
  }
}

TEST(BufferAssignment, LinearInTheNumberOfRanges) {
  // A chain of 400,000 short-lived temporaries beside a few long ones: the
  // scan took minutes here; the index takes well under a second.
  std::vector<LiveRange> r;
  for (int64_t i = 0; i < 400000; ++i) r.push_back({i, i + 1, 32});
  for (int64_t i = 0; i < 4; ++i) r.push_back({0, 400001, 4096});
  auto t0 = std::chrono::steady_clock::now();
  HeapAssignment h = assignHeap(r, 512);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(h.heapBytes, 4 * 4096u + 2 * 512u);
  EXPECT_LT(seconds, 5.0);
}

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

// Reductions over leading dimensions fold rows in order (the interpreter's
// order: bit-exact) from blocks of rows, one DMA per operand per block,
// with shorter last blocks and column chunks on a small VMEM.
TEST(EndToEnd, ColumnReductionsStreamBlocksOfRows) {
  const std::string small = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  const char* adders = R"(
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
add64 {
  p = f64[] parameter(0)
  q = f64[] parameter(1)
  ROOT s = f64[] add(p, q)
}
)";
  for (const char* body : {R"(ENTRY main {
  x = f64[301,1500] parameter(0)
  z = f64[] constant(0)
  ROOT r = f64[1500] reduce(x, z), dimensions={0}, to_apply=add64
})",
                           R"(ENTRY main {
  x = f32[3,700,1030] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3,1030] reduce(x, z), dimensions={1}, to_apply=add
})"}) {
    for (const std::string& target : {std::string("v5e"), small}) {
      E2eRun r = compileAndCompare(std::string("HloModule m\n") + adders + body, target);
      ASSERT_EQ(r.error, "");
      EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
      // Far fewer DMAs than rows (one per row per chunk before).
      EXPECT_LT(r.report.dmaCount, 300u) << target;
    }
  }
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

// The init value of a reduction along the minor dimension is folded in
// once, whatever the reducer (here it is no identity of add), for rows
// shorter than a vreg and for rows of whole vregs plus a tail.
TEST(EndToEnd, ReduceInitFoldedOnce) {
  std::vector<hlo::Literal> args;
  hlo::Literal a(hlo::Shape::array(hlo::ElementType::F32, {3, 300})), b(hlo::Shape::array(hlo::ElementType::F32, {}));
  hlo::Literal c(hlo::Shape::array(hlo::ElementType::S32, {4, 2100})), d(hlo::Shape::array(hlo::ElementType::S32, {}));
  for (int64_t i = 0; i < a.elementCount(); ++i) a.setDouble(i, 0.5);
  for (int64_t i = 0; i < c.elementCount(); ++i) c.setInt(i, i % 7);
  b.setDouble(0, 10.0);
  d.setInt(0, 1000);
  args.push_back(std::move(a));
  args.push_back(std::move(b));
  args.push_back(std::move(c));
  args.push_back(std::move(d));
  E2eRun r = compileAndCompare(R"(HloModule m
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
addi {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT s = s32[] add(p, q)
}
ENTRY main {
  a = f32[3,300] parameter(0)
  b = f32[] parameter(1)
  c = s32[4,2100] parameter(2)
  d = s32[] parameter(3)
  r = f32[3] reduce(a, b), dimensions={1}, to_apply=add
  s = s32[4] reduce(c, d), dimensions={1}, to_apply=addi
  ROOT t = (f32[3], s32[4]) tuple(r, s)
})",
                               "v5e", {}, &args);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0.0) << r.where;
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

TEST(EndToEnd, OneChipCollectiveIsACopy) {
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
  EXPECT_EQ(r.error, "");
}

}  // namespace
}  // namespace tpu::codegen

namespace tpu::codegen {
namespace {

std::optional<CodegenResult> generate(const std::string& text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("test.hlo", text), diags);
  if (!loaded.module) return std::nullopt;
  auto target = target::loadTarget("v5e", diags);
  return generateLlo(*loaded.module, *target, {}, diags);
}

// A donated parameter dead before the result is computed holds the result:
// no result buffer, no copy.
TEST(InputOutputAlias, ResultComputedInDonatedArgument) {
  const char* text = R"(HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY main {
  x = f32[64,128] parameter(0)
  y = f32[64,128] parameter(1)
  a = f32[64,128] multiply(x, y)
  ROOT b = f32[64,128] add(a, y)
})";
  EXPECT_MATCH(text, 0.0);
  auto gen = generate(text);
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->stats.resultBytes, 0u);
  EXPECT_EQ(gen->stats.aliasedBytes, 64u * 128 * 4);
  EXPECT_NE(gen->llo.find("-> (p0_x)"), std::string::npos) << gen->llo;
}

// The donated parameter is still read by another result: the aliased result
// is copied in at the end, after the pass-through result has been copied out.
TEST(InputOutputAlias, DonatedArgumentStillLiveIsCopiedLast) {
  const char* text = R"(HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {2}: (1, {}, may-alias) }
ENTRY main {
  x = s32[1000] parameter(0)
  y = s32[1000] parameter(1)
  one = s32[] constant(1)
  ones = s32[1000] broadcast(one), dimensions={}
  inc = s32[1000] add(x, ones)
  ROOT t = (s32[1000], s32[1000], s32[1000]) tuple(inc, x, y)
})";
  EXPECT_MATCH(text, 0.0);
  auto gen = generate(text);
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->stats.aliasedBytes, 2u * 1000 * 4);
  EXPECT_NE(gen->llo.find("-> (p0_x, out1, p1_y)"), std::string::npos) << gen->llo;
}

}  // namespace
}  // namespace tpu::codegen
