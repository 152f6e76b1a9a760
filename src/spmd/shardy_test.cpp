#include "spmd/shardy.h"

#include <gtest/gtest.h>

namespace tpu::spmd {
namespace {

std::string conv(const std::string& sharding, const std::string& meshes = R"({mesh = #sdy.mesh<["x"=2, "y"=4]>})") {
  std::string why;
  auto s = shardyToHlo(meshes, sharding, &why);
  return s ? s->toString() : "error: " + why;
}

// The worked examples of SPMD.md 6.2.
TEST(Shardy, ExporterTable) {
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"x"}, {"y"}]>)"), "{devices=[2,4]<=[8]}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"y"}, {"x"}]>)"), "{devices=[4,2]<=[2,4]T(1,0)}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"x"}, {}]>)"), "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"y"}, {}]>)"), "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{}, {"x","y"}]>)"), "{devices=[1,8]<=[8]}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{}, {}]>)"), "{replicated}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"x", ?}, {?}], replicated={"y"}>)"),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
}

TEST(Shardy, SubAxesDeviceIdsAndPerValue) {
  // f32[8] on "x"=4 reshaped to [2,4]: [{"x":(1)2}, {"x":(2)2}] is the plain tiling.
  EXPECT_EQ(conv(R"(#sdy.sharding<@m, [{"x":(1)2}, {"x":(2)2}]>)", R"({m = #sdy.mesh<["x"=4]>})"),
            "{devices=[2,2]<=[4]}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@m, [{"x"}]>)", R"({m = #sdy.mesh<["x"=4], device_ids=[3,2,1,0]>})"),
            "{devices=[4]3,2,1,0}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@m, []>)", R"({m = #sdy.mesh<[], device_ids=[3]>})"), "{maximal device=3}");
  EXPECT_EQ(conv(R"(#sdy.sharding_per_value<[<@mesh, [{"x"}]>, <@mesh, []>]>)"),
            "{{devices=[2,4]<=[8] last_tile_dim_replicate}, {replicated}}");
  EXPECT_EQ(conv(R"(#sdy.sharding<@nope, [{"x"}]>)"), "error: unknown mesh '@nope'");
  EXPECT_EQ(conv(R"(#sdy.sharding<@mesh, [{"z"}]>)"), "error: unknown axis \"z\"");
}

}  // namespace
}  // namespace tpu::spmd
