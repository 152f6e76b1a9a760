// End-to-end tests of sorts whose rows do not fit VMEM (the external
// bitonic sort of kernels/sort.cpp), on a chip with 256 KiB of VMEM so that
// modest rows take that path: bit-exact against the interpreter.
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

const std::string kSmallVmem = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";

void expectExact(const std::string& text) {
  E2eRun r = compileAndCompare(text, kSmallVmem);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
}

std::string lloFor(const std::string& text, const std::string& target, CodegenOptions o = {}) {
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return "";
  auto t = target::loadTarget(target, diags);
  if (!t) return "";
  o.targetSpec = target;
  auto gen = generateLlo(*loaded.module, *t, o, diags);
  return gen ? gen->llo : "";
}

std::string f32Sort(const std::string& dims, int64_t d, const char* dir) {
  return fmt::format(R"(HloModule m
cmp {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={2}
}}
ENTRY main {{
  x = f32[{0}] parameter(0)
  ROOT s = f32[{0}] sort(x), dimensions={{{1}}}, to_apply=cmp
}})",
                     dims, d, dir);
}

TEST(ExternalSort, RowsLongerThanVmem) {
  // 70000 elements padded to 131072, chunks of 4096: streaming passes for
  // j = 65536 .. 4096 in every late stage. Three rows, one after another.
  expectExact(f32Sort("3,70000", 1, "LT"));
  // A power-of-two row (no padding), descending.
  expectExact(f32Sort("1,16384", 1, "GT"));
}

TEST(ExternalSort, NonMinorSortDimension) {
  // The sort dimension is moved innermost on the way into the padded scratch.
  expectExact(f32Sort("9000,3", 0, "GT"));
}

TEST(ExternalSort, KeysAndValuesDescendingWithTies) {
  // s32 keys in [-4, 4]: long runs of equal keys, so the original position
  // decides the order of the values (the sort is stable) across chunks.
  expectExact(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=GT
}
ENTRY main {
  k = s32[2,40000] parameter(0)
  v = f32[2,40000] parameter(1)
  ROOT s = (s32[2,40000], f32[2,40000]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
})");
}

TEST(ExternalSort, WideKeysAndTwoKeyComparator) {
  // 64-bit keys (register pairs) and a comparator reading both operands.
  expectExact(R"(HloModule m
cmp {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY main {
  k = s64[1,9000] parameter(0)
  ROOT s = s64[1,9000] sort(k), dimensions={1}, to_apply=cmp
})");
  expectExact(R"(HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt2 = pred[] compare(c, d), direction=GT
  t = pred[] and(eq, gt2)
  ROOT l = pred[] or(lt, t)
}
ENTRY main {
  k = s32[12000] parameter(0)
  v = f32[12000] parameter(1)
  ROOT s = (s32[12000], f32[12000]) sort(k, v), dimensions={0}, to_apply=cmp
})");
}

TEST(ExternalSort, ScratchPastTheHeapsReachGetsBuffersOfItsOwn) {
  // Kernels compare heap offsets signed (2 GiB); a sort scratch that would
  // end past that gets an HBM buffer per array, addressed unsigned up to
  // 4 GiB. With the reach shrunk to 64 KiB, 3 x 131072 padded keys and
  // positions take that path here: same loops, bit-exact.
  CodegenOptions o;
  o.heapReachBytes = 65536;
  E2eRun r = compileAndCompare(f32Sort("3,70000", 1, "LT"), kSmallVmem, o);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
  std::string llo = lloFor(f32Sort("3,70000", 1, "LT"), kSmallVmem, o);
  EXPECT_NE(llo.find(".buffer scratch"), std::string::npos);
  EXPECT_EQ(llo.find("heap["), std::string::npos);
}

TEST(ExternalSort, ChunksLoadAndWriteBackWhileTheNetworkRuns) {
  // Three chunk slots: the next chunk's values load on sem1 (positions on
  // sem2) and the last chunk's write-back goes out on sem3 while the current
  // one is sorted; the slot registers rotate. Bit-exact with two operands
  // and with padding.
  std::string llo = lloFor(f32Sort("3,70000", 1, "LT"), kSmallVmem);
  EXPECT_NE(llo.find("sem1"), std::string::npos);
  EXPECT_NE(llo.find("sem.wait sem3"), std::string::npos);
  EXPECT_NE(llo.find("snonext"), std::string::npos);
  expectExact(f32Sort("2,40000", 1, "GT"));
}

TEST(ExternalSort, TwoSlotsWhenThreeDoNotHoldAChunk) {
  // s64 keys with f32 values: 16 bytes per element with the positions, so
  // three slots would hold fewer than two vreg pairs per chunk on this chip;
  // the chunks then load and write back between networks, as before.
  const std::string text = R"(HloModule m
cmp {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY main {
  k = s64[2,5000] parameter(0)
  v = f32[2,5000] parameter(1)
  ROOT s = (s64[2,5000], f32[2,5000]) sort(k, v), dimensions={1}, to_apply=cmp
})";
  std::string llo = lloFor(text, kSmallVmem);
  ASSERT_FALSE(llo.empty());
  EXPECT_NE(llo.find("sstream"), std::string::npos);
  EXPECT_EQ(llo.find("snonext"), std::string::npos);
  expectExact(text);
}

TEST(ExternalSort, CodeSizeDoesNotGrowWithTheRow) {
  // The same loops for 2^17 and 2^25 padded elements: only immediates differ.
  auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  std::string small = lloFor(f32Sort("3,70000", 1, "LT"), kSmallVmem);
  std::string big = lloFor(f32Sort("2,20000000", 1, "LT"), kSmallVmem);
  ASSERT_FALSE(small.empty());
  ASSERT_FALSE(big.empty());
  EXPECT_EQ(lines(small), lines(big));
  EXPECT_NE(small.find("sstream"), std::string::npos);
  // On v5e the 20M-element rows (padded to 2^25) take the same path.
  EXPECT_NE(lloFor(f32Sort("2,20000000", 1, "LT"), "v5e").find("sstream"), std::string::npos);
}

}  // namespace
}  // namespace tpu::codegen
