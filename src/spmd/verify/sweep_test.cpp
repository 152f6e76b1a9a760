// The verification sweep (issue 13, point 5): every op family partitioned
// under many shardings (tiled on each dimension, replicated, partially
// replicated, uneven sizes, non-iota device orders) on 2, 4, 5 and 8
// devices must compute what the unpartitioned module computes.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <random>

#include "spmd/verify/check.h"

namespace tpu::spmd {
namespace {


// Shardings of a rank-2 array over n devices.
std::vector<std::string> rank2Shardings(int64_t n) {
  std::vector<std::string> out = {"{replicated}", fmt::format("{{devices=[{},1]<=[{}]}}", n, n),
                                  fmt::format("{{devices=[1,{}]<=[{}]}}", n, n)};
  std::string rev;
  for (int64_t i = n; i-- > 0;) rev += fmt::format("{}{}", i == n - 1 ? "" : ",", i);
  out.push_back(fmt::format("{{devices=[{},1]{}}}", n, rev));
  out.push_back(fmt::format("{{devices=[1,{}]{}}}", n, rev));
  if (n % 2 == 0 && n > 2) {
    out.push_back(fmt::format("{{devices=[2,{}]<=[{}]}}", n / 2, n));
    out.push_back(fmt::format("{{devices=[{},2]<=[2,{}]T(1,0)}}", n / 2, n / 2));
    out.push_back(fmt::format("{{devices=[2,1,{}]<=[{}] last_tile_dim_replicate}}", n / 2, n));
    out.push_back(fmt::format("{{devices=[1,2,{}]<=[{}]T(1,0) last_tile_dim_replicate}}", n / 2, n / 2 == 1 ? "2" : fmt::format("{},2", n / 2)));
  }
  if (n == 2) out.push_back("{devices=[1,1,2]<=[2] last_tile_dim_replicate}");
  if (n == 5) out.push_back("{devices=[5,1]3,0,4,1,2}");
  return out;
}

std::vector<std::string> rank1Shardings(int64_t n) {
  std::vector<std::string> out = {"{replicated}", fmt::format("{{devices=[{}]<=[{}]}}", n, n)};
  std::string rev;
  for (int64_t i = n; i-- > 0;) rev += fmt::format("{}{}", i == n - 1 ? "" : ",", i);
  out.push_back(fmt::format("{{devices=[{}]{}}}", n, rev));
  if (n % 2 == 0 && n > 2) out.push_back(fmt::format("{{devices=[2,{}]<=[{}] last_tile_dim_replicate}}", n / 2, n));
  return out;
}

// Shardings of a rank-4 (NHWC) array: each dim tiled, two spatial dims at
// once, partial replication, a reversed device order.
std::vector<std::string> rank4Shardings(int64_t n) {
  std::string rev;
  for (int64_t i = n; i-- > 0;) rev += fmt::format("{}{}", i == n - 1 ? "" : ",", i);
  std::vector<std::string> out = {"{replicated}",
                                  fmt::format("{{devices=[{},1,1,1]<=[{}]}}", n, n),
                                  fmt::format("{{devices=[1,{},1,1]<=[{}]}}", n, n),
                                  fmt::format("{{devices=[1,1,{},1]{}}}", n, rev),
                                  fmt::format("{{devices=[1,1,1,{}]<=[{}]}}", n, n)};
  if (n % 2 == 0 && n > 2) {
    out.push_back(fmt::format("{{devices=[1,2,{},1]<=[{}]}}", n / 2, n));
    out.push_back(fmt::format("{{devices=[1,{},2,1]<=[2,{}]T(1,0)}}", n / 2, n / 2));
    out.push_back(fmt::format("{{devices=[2,1,{},1]<=[{}]}}", n / 2, n));
    out.push_back(fmt::format("{{devices=[1,2,1,1,{}]<=[{}] last_tile_dim_replicate}}", n / 2, n));
  }
  return out;
}

struct Case {
  const char* name;
  const char* text;  // {n}: devices; {a} {b} {c}: rank-2 shardings; {r}: a rank-1 sharding
};

const Case kCases[] = {
    {"elementwise", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  b = f32[10,7] parameter(1), sharding={b}
  s = f32[10,7] add(a, b)
  ROOT m = f32[10,7] multiply(s, a), sharding={c}
})"},
    {"integer-elementwise", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[9,6] parameter(0), sharding={a}
  b = s32[9,6] parameter(1), sharding={b}
  c = pred[9,6] compare(a, b), direction=LT
  ROOT s = s32[9,6] select(c, a, b), sharding={c}
})"},
    {"transpose", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  t = f32[7,10] transpose(a), dimensions={1,0}, sharding={b}
  ROOT n = f32[7,10] negate(t), sharding={c}
})"},
    {"reduce-rows", R"(HloModule m, num_partitions={n}
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  a = s32[11,6] parameter(0), sharding={a}
  z = s32[] constant(0)
  ROOT r = s32[6] reduce(a, z), dimensions={0}, to_apply=add, sharding={r}
})"},
    {"reduce-max", R"(HloModule m, num_partitions={n}
mx {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
ENTRY e {
  a = f32[11,6] parameter(0), sharding={a}
  n = f32[11,6] negate(a), sharding={b}
  z = f32[] constant(-inf)
  ROOT r = f32[11] reduce(n, z), dimensions={1}, to_apply=mx, sharding={r}
})"},
    {"dot", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,12] parameter(0), sharding={a}
  b = f32[12,7] parameter(1), sharding={b}
  ROOT d = f32[10,7] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={c}
})"},
    {"dot-reduce-scatter", R"(HloModule m, num_partitions={n}
ENTRY e {
  x = f32[13,10] parameter(0), sharding={a}
  dy = f32[13,7] parameter(1), sharding={a}
  ROOT dw = f32[10,7] dot(x, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={c}
})"},
    {"batch-dot", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[6,5,8] parameter(0), sharding={devices=[{n},1,1]<=[{n}]}
  b = f32[6,8,3] parameter(1)
  ROOT d = f32[6,5,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, sharding={devices=[{n},1,1]<=[{n}]}
})"},
    {"broadcast", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[7] parameter(0), sharding={r}
  b = f32[10,7] broadcast(a), dimensions={1}, sharding={a}
  c = f32[10,7] parameter(1), sharding={b}
  ROOT s = f32[10,7] add(b, c), sharding={c}
})"},
    {"reshape", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[8,6] parameter(0), sharding={a}
  r = f32[4,2,6] reshape(a)
  ROOT f = f32[8,6] reshape(r), sharding={b}
})"},
    {"slice-pad-concat", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  s = f32[6,7] slice(a), slice={[2:8], [0:7]}
  z = f32[] constant(0)
  p = f32[9,7] pad(s, z), padding=1_2x0_0
  c = f32[19,7] concatenate(p, a), dimensions={0}
  ROOT r = f32[19,7] reverse(c), dimensions={1}, sharding={b}
})"},
    {"dynamic-slice", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  i = s32[] constant(3)
  j = s32[] constant(0)
  d = f32[4,7] dynamic-slice(a, i, j), dynamic_slice_sizes={4,7}
  u = f32[10,7] dynamic-update-slice(a, d, j, j), sharding={b}
  ROOT r = f32[10,7] add(u, a), sharding={c}
})"},
    {"iota", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[9,6] parameter(0), sharding={a}
  i = s32[9,6] iota(), iota_dimension=0, sharding={b}
  ROOT r = s32[9,6] add(a, i), sharding={c}
})"},
    {"convolution", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[6,9,9,5] parameter(0), sharding={devices=[{n},1,1,1]<=[{n}]}
  k = f32[3,3,5,7] parameter(1)
  c = f32[6,9,9,7] convolution(a, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT r = f32[6,9,9,7] negate(c), sharding={devices=[1,1,1,{n}]<=[{n}]}
})"},
    {"conv-spatial", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[2,11,9,3] parameter(0), sharding={devices=[1,{n},1,1]<=[{n}]}
  k = f32[3,3,3,4] parameter(1)
  c = f32[2,11,9,4] convolution(a, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, sharding={devices=[1,{n},1,1]<=[{n}]}
  ROOT r = f32[2,11,9,4] negate(c), sharding={devices=[1,1,{n},1]<=[{n}]}
})"},
    {"conv-strided", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[2,17,8,3] parameter(0), sharding={devices=[1,{n},1,1]<=[{n}]}
  k = f32[4,2,3,5] parameter(1)
  c = f32[2,6,8,5] convolution(a, k), window={size=4x2 stride=2x1 pad=0_1x1_0 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f
  ROOT r = f32[2,6,8,5] negate(c), sharding={devices=[1,{n},1,1]<=[{n}]}
})"},
    {"reduce-window", R"(HloModule m, num_partitions={n}
mx {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
ENTRY e {
  a = f32[11,9] parameter(0), sharding={a}
  z = f32[] constant(-inf)
  w = f32[6,9] reduce-window(a, z), window={size=3x2 stride=2x1 pad=1_1x0_1}, to_apply=mx, sharding={b}
  ROOT r = f32[6,9] negate(w), sharding={c}
})"},
    {"reduce-window-sum", R"(HloModule m, num_partitions={n}
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  a = s32[13,7] parameter(0), sharding={a}
  z = s32[] constant(0)
  ROOT w = s32[13,4] reduce-window(a, z), window={size=5x3 stride=1x2 pad=2_2x1_1 rhs_dilate=1x1}, to_apply=add, sharding={a}
})"},
    {"pad-halo", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[10,7] parameter(0), sharding={a}
  z = s32[] constant(-7)
  p = s32[15,6] pad(a, z), padding=2_3x1_-2, sharding={a}
  ROOT q = s32[15,6] negate(p), sharding={b}
})"},
    {"pad-interior", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[10,7] parameter(0), sharding={a}
  z = s32[] constant(9)
  ROOT p = s32[20,15] pad(a, z), padding=-3_4_1x0_2_1, sharding={a}
})"},
    {"slice-offset", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[17,9] parameter(0), sharding={a}
  s = s32[6,5] slice(a), slice={[3:15:2], [2:7]}, sharding={a}
  t = s32[9,9] slice(a), slice={[8:17], [0:9]}, sharding={a}
  ROOT r = (s32[6,5], s32[9,9]) tuple(s, t)
})"},
    {"gather-rows", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  i = s32[6,1] parameter(1), sharding={b}
  ROOT g = f32[6,7] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,7}, sharding={c}
})"},
    {"gather-windows", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[9,8] parameter(0), sharding={a}
  i = s32[5,2] parameter(1), sharding={b}
  g = s32[5,2,3] gather(a, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,3}
  ROOT n = s32[5,2,3] negate(g), sharding={devices=[{n},1,1]<=[{n}]}
})"},
    {"gather-vocab", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[43,6] parameter(0), sharding={a}
  i = s32[3] parameter(1), sharding={r}
  g = f32[3,6] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}
  ROOT n = f32[3,6] negate(g), sharding={b}
})"},
    {"gather-vocab-2d", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[41,4,3] parameter(0), sharding={devices=[{n},1,1]<=[{n}]}
  i = s32[2,2] parameter(1)
  ROOT g = s32[2,3] gather(a, i), offset_dims={1}, collapsed_slice_dims={0,1}, start_index_map={1,0}, index_vector_dim=1, slice_sizes={1,1,3}
})"},
    {"scatter-add-many", R"(HloModule m, num_partitions={n}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[5,3] parameter(0), sharding={a}
  i = s32[43] parameter(1), sharding={r}
  u = f32[43,3] parameter(2), sharding={b}
  ROOT s = f32[5,3] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add, sharding={c}
})"},
    {"scatter-add", R"(HloModule m, num_partitions={n}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  i = s32[6,1] parameter(1), sharding={b}
  u = f32[6,7] parameter(2), sharding={c}
  ROOT s = f32[10,7] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add, sharding={a}
})"},
    {"scatter-max", R"(HloModule m, num_partitions={n}
mx {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] maximum(x, y)
}
ENTRY e {
  a = s32[10,7] parameter(0), sharding={a}
  i = s32[13,1] parameter(1), sharding={b}
  u = s32[13,7] parameter(2), sharding={b}
  ROOT s = s32[10,7] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=mx, sharding={c}
})"},
    {"scatter-assign", R"(HloModule m, num_partitions={n}
set {
  x = s32[] parameter(0)
  ROOT y = s32[] parameter(1)
}
ENTRY e {
  a = s32[10,7] parameter(0), sharding={a}
  i = s32[6,1] parameter(1), sharding={b}
  u = s32[6,7] parameter(2), sharding={c}
  ROOT s = s32[10,7] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=set, sharding={b}
})"},
    {"conditional", R"(HloModule m, num_partitions={n}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
tb {
  p = (f32[10,7], f32[10,7]) parameter(0)
  a = f32[10,7] get-tuple-element(p), index=0
  b = f32[10,7] get-tuple-element(p), index=1
  ROOT s = f32[10,7] add(a, b), sharding={b}
}
fb {
  p = f32[10,7] parameter(0)
  z = f32[] constant(0)
  r = f32[10] reduce(p, z), dimensions={1}, to_apply=add
  ROOT n = f32[10,7] broadcast(r), dimensions={0}
}
ENTRY e {
  c = pred[] parameter(0)
  a = f32[10,7] parameter(1), sharding={a}
  b = f32[10,7] parameter(2), sharding={b}
  t = (f32[10,7], f32[10,7]) tuple(a, b)
  ROOT r = f32[10,7] conditional(c, t, b), true_computation=tb, false_computation=fb, sharding={c}
})"},
    {"conditional-index", R"(HloModule m, num_partitions={n}
b0 {
  p = s32[9,6] parameter(0)
  ROOT n = s32[9,6] negate(p)
}
b1 {
  p = s32[9,6] parameter(0)
  ROOT t = s32[9,6] multiply(p, p), sharding={b}
}
b2 {
  p = s32[9,6] parameter(0)
  ROOT t = s32[9,6] reverse(p), dimensions={0}
}
ENTRY e {
  i = s32[] parameter(0)
  a = s32[9,6] parameter(1), sharding={a}
  b = s32[9,6] parameter(2), sharding={b}
  ROOT r = s32[9,6] conditional(i, a, b, a), branch_computations={b0, b1, b2}, sharding={c}
})"},
    {"select-and-scatter", R"(HloModule m, num_partitions={n}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  x = f32[11,6] parameter(0), sharding={a}
  g = f32[6,5] parameter(1), sharding={b}
  z = f32[] constant(0)
  ROOT s = f32[11,6] select-and-scatter(x, g, z), window={size=3x2 stride=2x1 pad=1_1x0_0}, select=ge, scatter=add, sharding={c}
})"},
    {"select-and-scatter-gaps", R"(HloModule m, num_partitions={n}
le {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LE
}
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  x = s32[14,9] parameter(0), sharding={a}
  g = s32[4,4] parameter(1), sharding={a}
  z = s32[] constant(3)
  ROOT s = s32[14,9] select-and-scatter(x, g, z), window={size=2x3 stride=4x2 pad=1_0x0_0}, select=le, scatter=add, sharding={a}
})"},
    {"reverse", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = s32[11,6] parameter(0), sharding={a}
  r = s32[11,6] reverse(a), dimensions={0,1}, sharding={a}
  ROOT n = s32[11,6] negate(r), sharding={b}
})"},
    {"while", R"(HloModule m, num_partitions={n}
cond {
  p = (s32[], f32[10,7]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(3)
  ROOT c = pred[] compare(i, k), direction=LT
}
body {
  p = (s32[], f32[10,7]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[10,7] get-tuple-element(p), index=1
  y = f32[10,7] add(x, x), sharding={b}
  ROOT t = (s32[], f32[10,7]) tuple(j, y)
}
ENTRY e {
  a = f32[10,7] parameter(0), sharding={a}
  z = s32[] constant(0)
  t = (s32[], f32[10,7]) tuple(z, a)
  w = (s32[], f32[10,7]) while(t), condition=cond, body=body
  ROOT r = f32[10,7] get-tuple-element(w), index=1, sharding={c}
})"},
};

std::string fill(std::string text, int64_t n, const std::string& a, const std::string& b, const std::string& c,
                 const std::string& r) {
  auto rep = [&](const std::string& key, const std::string& v) {
    for (size_t p; (p = text.find(key)) != std::string::npos;) text.replace(p, key.size(), v);
  };
  rep("{n}", std::to_string(n));
  rep("sharding={a}", "sharding=" + a);
  rep("sharding={b}", "sharding=" + b);
  rep("sharding={c}", "sharding=" + c);
  rep("sharding={r}", "sharding=" + r);
  return text;
}

// Windowed ops on rank-4 arrays with every rank-4 sharding on the input
// and random ones on the output ({A} {B}).
const Case kWindowCases[] = {
    {"conv", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[3,10,9,4] parameter(0), sharding={A}
  k = f32[3,2,4,5] parameter(1)
  c = f32[3,10,9,5] convolution(a, k), window={size=3x2 pad=1_1x0_1}, dim_labels=b01f_01io->b01f
  ROOT r = f32[3,10,9,5] negate(c), sharding={B}
})"},
    {"conv-stride-dilate", R"(HloModule m, num_partitions={n}
ENTRY e {
  a = f32[2,13,11,3] parameter(0), sharding={A}
  k = f32[2,3,3,4] parameter(1)
  c = f32[2,7,4,4] convolution(a, k), window={size=2x3 stride=2x3 pad=1_0x2_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, sharding={B}
  ROOT r = f32[2,7,4,4] negate(c), sharding={A}
})"},
    {"pool", R"(HloModule m, num_partitions={n}
mx {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
ENTRY e {
  a = f32[3,11,10,4] parameter(0), sharding={A}
  z = f32[] constant(-inf)
  ROOT w = f32[3,6,5,4] reduce-window(a, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=mx, sharding={B}
})"},
    {"pool-grad", R"(HloModule m, num_partitions={n}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  x = f32[2,11,10,3] parameter(0), sharding={A}
  g = f32[2,6,5,3] parameter(1), sharding={B}
  z = f32[] constant(0)
  ROOT s = f32[2,11,10,3] select-and-scatter(x, g, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=ge, scatter=add, sharding={A}
})"},
};

class WindowSweep : public ::testing::TestWithParam<int64_t> {};

TEST_P(WindowSweep, PartitionedEqualsUnpartitioned) {
  int64_t n = GetParam();
  std::vector<std::string> s4 = rank4Shardings(n);
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 104729);
  for (const Case& c : kWindowCases) {
    for (size_t k = 0; k < s4.size() + 2; ++k) {
      std::string a = k < s4.size() ? s4[k] : s4[rng() % s4.size()];
      std::string b = s4[rng() % s4.size()];
      std::string text = c.text;
      auto rep = [&](const std::string& key, const std::string& v) {
        for (size_t p; (p = text.find(key)) != std::string::npos;) text.replace(p, key.size(), v);
      };
      rep("{n}", std::to_string(n));
      rep("sharding={A}", "sharding=" + a);
      rep("sharding={B}", "sharding=" + b);
      CheckReport r = checkPartitioning(text, n, k + 11, 1e-4);
      EXPECT_TRUE(r.ok) << c.name << " on " << n << " devices:\n" << text << "\n" << r.message;
      if (!r.ok) break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, WindowSweep, ::testing::Values(2, 4, 5, 8));

class Sweep : public ::testing::TestWithParam<int64_t> {};

TEST_P(Sweep, PartitionedEqualsUnpartitioned) {
  int64_t n = GetParam();
  std::vector<std::string> s2 = rank2Shardings(n), s1 = rank1Shardings(n);
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 7919);
  for (const Case& c : kCases) {
    // Every sharding on each slot at least once, plus random combinations.
    size_t rounds = s2.size() + 6;
    for (size_t k = 0; k < rounds; ++k) {
      std::string a = k < s2.size() ? s2[k] : s2[rng() % s2.size()];
      std::string b = s2[rng() % s2.size()];
      std::string cc = s2[(k + rng() % 3) % s2.size()];
      std::string r = s1[rng() % s1.size()];
      std::string text = fill(c.text, n, a, b, cc, r);
      CheckReport rep = checkPartitioning(text, n, k + 1);
      EXPECT_TRUE(rep.ok) << c.name << " on " << n << " devices:\n" << text << "\n" << rep.message;
      if (!rep.ok) break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Sweep, ::testing::Values(2, 4, 5, 8));

// The dot cases again with windowed einsum wherever it applies.
TEST_P(Sweep, WindowedEinsumEqualsUnpartitioned) {
  int64_t n = GetParam();
  SpmdOptions options;
  options.windowedEinsumThresholdMib = 0;
  std::vector<std::string> s2 = rank2Shardings(n), s1 = rank1Shardings(n);
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 31337);
  for (const Case& c : kCases) {
    std::string name = c.name;
    if (name.find("dot") == std::string::npos) continue;
    for (size_t k = 0; k < s2.size() * 2; ++k) {
      std::string a = s2[k % s2.size()];
      std::string b = s2[rng() % s2.size()];
      std::string cc = s2[rng() % s2.size()];
      std::string text = fill(c.text, n, a, b, cc, s1[rng() % s1.size()]);
      CheckReport rep = checkPartitioning(text, n, k + 1, 1e-5, "", &options);
      EXPECT_TRUE(rep.ok) << c.name << " on " << n << " devices:\n" << text << "\n" << rep.message;
      if (!rep.ok) break;
    }
  }
}

}  // namespace
}  // namespace tpu::spmd
