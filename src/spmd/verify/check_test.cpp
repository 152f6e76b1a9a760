#include "spmd/verify/check.h"

#include <gtest/gtest.h>

namespace tpu::spmd {
namespace {

TEST(Check, MegatronMlpRunsAndMatches) {
  const char* text = R"(HloModule mlp, num_partitions=4
ENTRY main {
  x = f32[8,16] parameter(0), sharding={replicated}
  w1 = f32[16,32] parameter(1), sharding={devices=[1,4]<=[4]}
  w2 = f32[32,16] parameter(2), sharding={devices=[4,1]<=[4]}
  h = f32[8,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[8,32] broadcast(z), dimensions={}
  r = f32[8,32] maximum(h, zb)
  ROOT y = f32[8,16] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
)";
  CheckReport r = checkPartitioning(text, 4, 1);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.collectives, 1) << r.partitioned;
}

}  // namespace
}  // namespace tpu::spmd

namespace tpu::spmd {
namespace {

// shard_map (SPMD.md 4.6): the manual region is per-device code already;
// entering and leaving it are local copies.
TEST(Check, ManualRegionRunsAndMatches) {
  const char* text = R"(HloModule shard_map, num_partitions=4
ENTRY main {
  a = f32[10,16] parameter(0), sharding={devices=[4,1]3,1,2,0}
  s = f32[10,16] custom-call(a), custom_call_target="Sharding", sharding={devices=[4,1]3,1,2,0}
  l = f32[3,16] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  e = f32[3,16] exponential(l), sharding={manual}
  m = f32[3,16] custom-call(e), custom_call_target="Sharding", sharding={manual}
  f = f32[10,16] custom-call(m), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]3,1,2,0}
  ROOT n = f32[10,16] negate(f), sharding={replicated}
}
)";
  const char* reference = R"(HloModule plain
ENTRY main {
  a = f32[10,16] parameter(0)
  e = f32[10,16] exponential(a)
  ROOT n = f32[10,16] negate(e)
}
)";
  CheckReport r = checkPartitioning(text, 4, 2, 1e-6, reference);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.collectives, 1) << r.partitioned;  // the final all-gather
}

}  // namespace
}  // namespace tpu::spmd
