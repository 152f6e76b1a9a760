// End-to-end tests of the gather and scatter lowerings: HLO text -> llo-gen
// -> assembler -> simulator, compared with the reference interpreter. Index
// arguments are given explicitly (in range, repeated, out of range); data
// arguments are seeded random values. Integer results must be bit-exact.
#include <gtest/gtest.h>

#include <map>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

// Arguments for the entry of `text`: seeded random values, except the
// parameters listed in `given`, which get those integer values.
std::vector<hlo::Literal> makeArgs(const std::string& text,
                                   const std::map<int64_t, std::vector<int64_t>>& given) {
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  std::vector<hlo::Literal> args;
  if (!loaded.module) return args;
  std::mt19937 rng(99);
  const hlo::Computation* entry = loaded.module->entry();
  for (int64_t p = 0; p < entry->parameterCount(); ++p) {
    const hlo::Shape& s = entry->parameter(p)->shape();
    hlo::Literal l = randomLiteral(s, rng);
    auto it = given.find(p);
    if (it != given.end()) {
      EXPECT_EQ(static_cast<int64_t>(it->second.size()), l.elementCount()) << "parameter " << p;
      for (int64_t k = 0; k < l.elementCount() && k < static_cast<int64_t>(it->second.size()); ++k)
        l.setInt(k, it->second[static_cast<size_t>(k)]);
    }
    args.push_back(std::move(l));
  }
  return args;
}

// Values v0, v0+step, ... modulo m, shifted by `lo`: deterministic indices
// that repeat and cover [lo, lo + m).
std::vector<int64_t> cycle(int64_t n, int64_t m, int64_t step, int64_t lo = 0) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((i * step) % m + lo);
  return v;
}

E2eRun run(const std::string& text, const std::map<int64_t, std::vector<int64_t>>& given) {
  std::vector<hlo::Literal> args = makeArgs(text, given);
  return compileAndCompare(text, "v5e", {}, &args);
}

#define EXPECT_GATHER(text, given, tol)    \
  do {                                     \
    E2eRun r_ = run(text, given);          \
    ASSERT_EQ(r_.error, "");               \
    EXPECT_LE(r_.maxErr, tol) << r_.where; \
  } while (0)

const char* kAdd = R"(
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
)";
const char* kAddS32 = R"(
add {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT s = s32[] add(p, q)
}
)";

TEST(Gather, EmbeddingRowsFromVmem) {
  // Many rows from a small table: the table is brought into VMEM once and
  // the rows copied by vector code, far below a DMA latency per row.
  const std::string text = R"(HloModule m
ENTRY main {
  table = f32[1000,64] parameter(0)
  ids = s32[300] parameter(1)
  ROOT g = f32[300,64] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
})";
  E2eRun r = run(text, {{1, cycle(300, 1000, 337)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0.0) << r.where;
  EXPECT_LT(r.cycles, 300u * 700u / 8u);
  // Rows longer than a vreg (1500 f32: two vregs per row).
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  table = f32[200,1500] parameter(0)
  ids = s32[64] parameter(1)
  ROOT g = f32[64,1500] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1500}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(64, 200, 77)}}), 0.0);
  // u8 rows are copied as raw bytes.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  table = u8[300,40] parameter(0)
  ids = s32[50] parameter(1)
  ROOT g = u8[50,40] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,40}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(50, 300, 31)}}), 0.0);
}

TEST(Gather, EmbeddingRowsByDma) {
  // Few rows from a big table: one DMA per row, all in flight together and
  // waited for once per batch.
  const std::string text = R"(HloModule m
ENTRY main {
  table = f32[100000,64] parameter(0)
  ids = s32[100] parameter(1)
  ROOT g = f32[100,64] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
})";
  std::vector<int64_t> ids = cycle(100, 100000, 7919);
  ids[3] = -7;      // clamps to 0
  ids[4] = 100000;  // clamps to 99999
  E2eRun r = run(text, {{1, ids}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.maxErr, 0.0) << r.where;
  EXPECT_LT(r.cycles, 100u * 700u / 2u);
  // bf16 rows, 50 wide as in graphsage.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  table = bf16[56945,50] parameter(0)
  ids = s32[10] parameter(1)
  ROOT g = bf16[10,50] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,50}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {56944, 0, 7, 7, 25000, 3, 56943, 1, 0, 42}}}),
                0.0);
}

TEST(Gather, CollapsedAndOffsetDimsInterleaved) {
  // Window dims 0, 1, 3 of the operand land at result dims 0, 2, 4; the
  // index batch dims [4,3] at result dims 1 and 3. Starts partly out of range.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[5,6,7,8] parameter(0)
  i = s32[4,3,2] parameter(1)
  ROOT g = f32[2,4,6,3,3] gather(x, i), offset_dims={0,2,4}, collapsed_slice_dims={2}, start_index_map={2,0}, index_vector_dim=2, slice_sizes={2,6,1,3}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(24, 11, 5, -2)}}), 0.0);
}

TEST(Gather, IndexVectorDimFirst) {
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = s32[10,12] parameter(0)
  i = s32[2,5] parameter(1)
  ROOT g = s32[5,3,4] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={1,0}, index_vector_dim=0, slice_sizes={3,4}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {0, 1, 8, 9, 3, 2, 7, 6, 0, 5}}}), 0.0);
}

TEST(Gather, ManyIndicesInSeveralChunks) {
  // 9000 two-component vectors with index_vector_dim=0: more than one SMEM
  // chunk, so the indices are transposed first; the last chunk is partial.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = s32[20,30] parameter(0)
  i = s32[2,9000] parameter(1)
  ROOT g = s32[9000] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(18000, 31, 7)}}), 0.0);
}

TEST(Gather, ClampsStartIndices) {
  // Negative and too large starts clamp into [0, dim - size] as XLA does.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[10,8] parameter(0)
  i = s32[6] parameter(1)
  ROOT g = f32[6,3,8] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3,8}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {-5, 0, 7, 8, 1000, 2147483647}}}), 0.0);
  // u32: values with the top bit set are huge, not negative.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[10,8] parameter(0)
  i = u32[5] parameter(1)
  ROOT g = f32[5,3,8] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3,8}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {4294967295, 2147483653, 3, 7, 0}}}), 0.0);
}

TEST(Gather, ByteIndices) {
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = s32[300,4] parameter(0)
  i = u8[7] parameter(1)
  ROOT g = s32[7,4] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {255, 0, 200, 128, 127, 1, 254}}}), 0.0);
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = u8[100,16] parameter(0)
  i = s8[6,1] parameter(1)
  ROOT g = u8[6,16] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {-128, -1, 0, 99, 127, 50}}}), 0.0);
}

TEST(Gather, NarrowIndexTypes) {
  // 16-bit and 4-bit indices are widened by their width and signedness.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = s32[70000,2] parameter(0)
  i = u16[5] parameter(1)
  ROOT g = s32[5,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {65535, 0, 40000, 32768, 12}}}), 0.0);
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[10,3] parameter(0)
  i = s16[4] parameter(1)
  j = s4[4] parameter(2)
  ii = s32[4] convert(i)
  jj = s32[4] convert(j)
  s = s32[4] add(ii, jj)
  g1 = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  g2 = f32[4,3] gather(x, j), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  ROOT t = (f32[4,3], f32[4,3], s32[4]) tuple(g1, g2, s)
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {-32768, 9, 32767, 3}}, {2, {-8, 7, -1, 5}}}),
                0.0);
}

TEST(Gather, BatchingDims) {
  // Operand dim 0 pairs with index dim 0: row b of the result reads batch b.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[3,10,8] parameter(0)
  i = s32[3,4,1] parameter(1)
  ROOT g = f32[3,4,8] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,8}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(12, 12, 5, -1)}}), 0.0);
  // Batching dim not outermost in the indices.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = s32[6,4,5] parameter(0)
  i = s32[3,4] parameter(1)
  ROOT g = s32[3,4,2] gather(x, i), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, operand_batching_dims={1}, start_indices_batching_dims={1}, index_vector_dim=2, slice_sizes={1,1,2}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(12, 7, 3)}}), 0.0);
}

TEST(Gather, WindowWithMoreDimsThanADescriptor) {
  // Six partial window dims need five descriptor dims (v5e has four): each
  // slice is copied by the looping strided copy instead.
  EXPECT_GATHER(R"(HloModule m
ENTRY main {
  x = f32[3,3,3,3,3,3] parameter(0)
  i = s32[3,1] parameter(1)
  ROOT g = f32[3,2,2,2,2,2,2] gather(x, i), offset_dims={1,2,3,4,5,6}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,2,2,2,2,2}
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {1, 0, 5}}}), 0.0);
}

TEST(Scatter, AddRepeatedIndicesS32) {
  EXPECT_GATHER(std::string("HloModule m\n") + kAddS32 + R"(ENTRY main {
  x = s32[10,5] parameter(0)
  i = s32[24,1] parameter(1)
  u = s32[24,5] parameter(2)
  ROOT s = s32[10,5] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(24, 4, 3, 2)}}), 0.0);
}

TEST(Scatter, AddRepeatedIndicesF32) {
  // Updates apply in index order, as the interpreter does, so the sums agree
  // to rounding; the tolerance allows 1e-6 relative.
  EXPECT_GATHER(std::string("HloModule m\n") + kAdd + R"(ENTRY main {
  x = f32[10,5] parameter(0)
  i = u32[24,1] parameter(1)
  u = f32[24,2,3] parameter(2)
  ROOT s = f32[10,5] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(24, 10, 7)}}), 1e-6);
}

TEST(Scatter, OverwriteInOrderAndOutOfBoundsSkipped) {
  // Windows of 2x3 rows: starts 9 and -1 do not fit and are skipped whole;
  // repeated starts keep the last update.
  const std::string ow = R"(HloModule m
ow {
  p = f32[] parameter(0)
  ROOT q = f32[] parameter(1)
}
ENTRY main {
  x = f32[10,5] parameter(0)
  i = s32[6,1] parameter(1)
  u = f32[6,2,3] parameter(2)
  ROOT s = f32[10,5] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=ow
})";
  EXPECT_GATHER(ow, (std::map<int64_t, std::vector<int64_t>>{{1, {1, 9, 3, -1, 1, 8}}}), 0.0);
  // unique_indices lets the window copies overlap in flight.
  std::string unique = ow;
  unique.replace(unique.find("to_apply=ow"), 11, "unique_indices=true, to_apply=ow");
  EXPECT_GATHER(unique, (std::map<int64_t, std::vector<int64_t>>{{1, {0, 9, 2, -1, 4, 8}}}), 0.0);
}

TEST(Scatter, OverwriteWindowWithMoreDimsThanADescriptor) {
  EXPECT_GATHER(R"(HloModule m
ow {
  p = s32[] parameter(0)
  ROOT q = s32[] parameter(1)
}
ENTRY main {
  x = s32[3,3,3,3,3,3] parameter(0)
  i = s32[3,1] parameter(1)
  u = s32[3,2,2,2,2,2,2] parameter(2)
  ROOT s = s32[3,3,3,3,3,3] scatter(x, i, u), update_window_dims={1,2,3,4,5,6}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=ow
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {1, 2, 0}}}), 0.0);
}

TEST(Scatter, TwoDimIndicesWithCombiner) {
  // Two-component starts into a 3-d operand with one inserted dim; the
  // combiner is max on s8 values.
  EXPECT_GATHER(R"(HloModule m
mx {
  p = s8[] parameter(0)
  q = s8[] parameter(1)
  ROOT r = s8[] maximum(p, q)
}
ENTRY main {
  x = s8[4,6,7] parameter(0)
  i = s32[5,2] parameter(1)
  u = s8[5,2,3] parameter(2)
  ROOT s = s8[4,6,7] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={2,0}, index_vector_dim=1, to_apply=mx
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {0, 0, 4, 3, 5, 1, 4, 3, 1, 4}}}), 0.0);
}

TEST(Scatter, Variadic) {
  // Two results updated together: (sum, product) of an s32 and an f32 array.
  EXPECT_GATHER(R"(HloModule m
comb {
  a = s32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = f32[] parameter(3)
  s = s32[] add(a, c)
  p = f32[] multiply(b, d)
  ROOT t = (s32[], f32[]) tuple(s, p)
}
ENTRY main {
  x = s32[8,3] parameter(0)
  y = f32[8,3] parameter(1)
  i = s32[10] parameter(2)
  u = s32[10,3] parameter(3)
  v = f32[10,3] parameter(4)
  ROOT s = (s32[8,3], f32[8,3]) scatter(x, y, i, u, v), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
})",
                (std::map<int64_t, std::vector<int64_t>>{{2, {0, 7, 3, 3, 8, -1, 0, 5, 7, 3}}}), 0.0);
}

TEST(Scatter, UnsignedAndByteIndices) {
  // u32 starts with the top bit set are far out of bounds: skipped.
  EXPECT_GATHER(std::string("HloModule m\n") + kAddS32 + R"(ENTRY main {
  x = s32[10,4] parameter(0)
  i = u32[6] parameter(1)
  u = s32[6,4] parameter(2)
  ROOT s = s32[10,4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {4294967295, 2, 9, 10, 2147483648, 2}}}), 0.0);
  EXPECT_GATHER(std::string("HloModule m\n") + kAddS32 + R"(ENTRY main {
  x = s32[200,2] parameter(0)
  i = u8[6] parameter(1)
  u = s32[6,2] parameter(2)
  ROOT s = s32[200,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {255, 199, 200, 128, 0, 199}}}), 0.0);
}

TEST(Scatter, BatchingDims) {
  EXPECT_GATHER(std::string("HloModule m\n") + kAdd + R"(ENTRY main {
  x = f32[3,10,4] parameter(0)
  i = s32[3,5,1] parameter(1)
  u = f32[3,5,4] parameter(2)
  ROOT s = f32[3,10,4] scatter(x, i, u), update_window_dims={2}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(15, 12, 5, -1)}}), 1e-6);
}

TEST(Scatter, Bf16AddAndManyIndices) {
  // bf16 sums round after every update, in index order as the interpreter.
  EXPECT_GATHER(R"(HloModule m
add {
  p = bf16[] parameter(0)
  q = bf16[] parameter(1)
  ROOT s = bf16[] add(p, q)
}
ENTRY main {
  x = bf16[6,130] parameter(0)
  i = s32[9,1] parameter(1)
  u = bf16[9,130] parameter(2)
  ROOT s = bf16[6,130] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, {5, 0, 5, 2, 5, 6, 0, 1, 5}}}), 0.0);
  // 17000 scalar windows: two SMEM chunks of indices, the second partial.
  EXPECT_GATHER(std::string("HloModule m\n") + kAddS32 + R"(ENTRY main {
  x = s32[50] parameter(0)
  i = s32[17000] parameter(1)
  u = s32[17000] parameter(2)
  ROOT s = s32[50] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})",
                (std::map<int64_t, std::vector<int64_t>>{{1, cycle(17000, 53, 11, -1)}}), 0.0);
}

// Combined windows bigger than VMEM (or than one DMA descriptor) go in
// pieces; on the 256 KiB-VMEM chip modest windows take that path.
E2eRun runSmallVmem(const std::string& text, const std::map<int64_t, std::vector<int64_t>>& given) {
  std::vector<hlo::Literal> args = makeArgs(text, given);
  return compileAndCompare(text, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json", {}, &args);
}

TEST(Scatter, WindowLargerThanVmemInPieces) {
  // [40,3000] windows: pieces of two rows. Repeated and overlapping starts
  // combine in order; (45, 0) and (0, 200) do not fit and are skipped whole.
  std::string text = std::string("HloModule m\n") + kAdd + R"(ENTRY main {
  x = f32[50,3100] parameter(0)
  i = s32[6,2] parameter(1)
  u = f32[6,40,3000] parameter(2)
  ROOT s = f32[50,3100] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add
})";
  std::map<int64_t, std::vector<int64_t>> idx{{1, {0, 0, 10, 100, 0, 0, 45, 0, 9, 99, 0, 200}}};
  E2eRun r = runSmallVmem(text, idx);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
  // The same on v5e, where the window fits whole.
  EXPECT_GATHER(text, idx, 0.0);
}

TEST(Scatter, WindowRowLargerThanVmemInChunks) {
  // One row of the window (20000 elements) is too big: chunks of it, the
  // last one shorter. s32 max, repeated starts.
  E2eRun r = runSmallVmem(R"(HloModule m
mx {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT r = s32[] maximum(p, q)
}
ENTRY main {
  x = s32[4,25000] parameter(0)
  i = s32[3,2] parameter(1)
  u = s32[3,3,20000] parameter(2)
  ROOT s = s32[4,25000] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=mx
})",
                          {{1, {1, 4000, 0, 3999, 1, 4000}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
}

TEST(Scatter, CombinedWindowWithMoreDimsThanADescriptor) {
  // A rank-6 window of a variadic scatter: a loop over its outer dim keeps
  // each piece within the descriptor's dims. Start 2 does not fit: skipped.
  std::string text = R"(HloModule m
comb {
  a = s32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = f32[] parameter(3)
  s = s32[] add(a, c)
  p = f32[] multiply(b, d)
  ROOT t = (s32[], f32[]) tuple(s, p)
}
ENTRY main {
  x = s32[3,3,3,3,3,3] parameter(0)
  y = f32[3,3,3,3,3,3] parameter(1)
  i = s32[4,1] parameter(2)
  u = s32[4,2,2,2,2,2,2] parameter(3)
  v = f32[4,2,2,2,2,2,2] parameter(4)
  ROOT s = (s32[3,3,3,3,3,3], f32[3,3,3,3,3,3]) scatter(x, y, i, u, v), update_window_dims={1,2,3,4,5,6}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
})";
  std::map<int64_t, std::vector<int64_t>> idx{{2, {1, 0, 2, 1}}};
  EXPECT_GATHER(text, idx, 0.0);
  E2eRun r = runSmallVmem(text, idx);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
}

TEST(Scatter, CorpusModules) {
  for (const char* name : {"emit_scatter_overwrite.hlo", "emit_scatter_unsigned.hlo"}) {
    std::string path = std::string(TPU_CORPUS_DIR) + "/" + name;
    std::string text;
    {
      FILE* f = std::fopen(path.c_str(), "rb");
      ASSERT_NE(f, nullptr) << path;
      char buf[4096];
      size_t got;
      while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
      std::fclose(f);
    }
    E2eRun r = compileAndCompare(text);
    ASSERT_EQ(r.error, "") << name;
    EXPECT_EQ(r.maxErr, 0.0) << name << ": " << r.where;
  }
}

}  // namespace
}  // namespace tpu::codegen
