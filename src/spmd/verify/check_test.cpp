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
