#include "spmd/sharding.h"

#include <gtest/gtest.h>

#include "hlo/binary/binary.h"
#include "hlo/text/printer.h"
#include "passes/test_util.h"

namespace tpu::spmd {
namespace {

// The sharding of the root of a one-instruction module.
hlo::Sharding shardingOf(const std::string& sharding, const std::string& shape = "f32[8,8]", int64_t n = 8) {
  auto p = passes::parseModule("HloModule m, num_partitions=" + std::to_string(n) + "\nENTRY e {\n  ROOT p = " + shape +
                               " parameter(0), sharding=" + sharding + "\n}\n");
  EXPECT_TRUE(p.module) << p.messages;
  if (!p.module) return {};
  return *p.module->entry()->root()->sharding();
}

Tiling tiling(const std::string& sharding, int64_t rank = 2, int64_t n = 8) {
  std::string why;
  auto t = Tiling::fromHlo(shardingOf(sharding, "f32[8,8]", n), rank, n, &why);
  EXPECT_TRUE(t) << why;
  return t ? *t : Tiling();
}

TEST(Sharding, TextAndBinaryRoundTripEveryForm) {
  const char* forms[] = {
      "{replicated}",
      "{maximal device=3}",
      "{manual}",
      "{devices=[4,2]0,1,2,3,4,5,6,7}",
      "{devices=[4,2]<=[8]}",
      "{devices=[4,2]<=[2,4]T(1,0)}",
      "{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
      "{devices=[2,2,2]0,2,1,3,4,6,5,7 last_tile_dims={manual}}",
      "{devices=[2,1,2,2]<=[8] last_tile_dims={replicated, manual}}",
      "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}",
  };
  for (const char* f : forms) {
    std::string text = "HloModule m, num_partitions=8\nENTRY e {\n  ROOT p = f32[8,8] parameter(0), sharding=" +
                       std::string(f) + "\n}\n";
    auto p = passes::parseModule(text);
    ASSERT_TRUE(p.module) << f << ": " << p.messages;
    EXPECT_EQ(p.module->entry()->root()->sharding()->toString(), f);
    std::string bytes = hlo::writeHlob(*p.module);
    DiagnosticEngine diags;
    SourceFile file("x.hlob", bytes);
    file.setBinary(true);
    auto back = hlo::readHlob(file, diags);
    ASSERT_TRUE(back) << f;
    EXPECT_EQ(*back->entry()->root()->sharding(), *p.module->entry()->root()->sharding()) << f;
  }
  auto p = passes::parseModule(
      "HloModule m, num_partitions=2\nENTRY e {\n  ROOT p = (f32[4], s32[]) parameter(0), "
      "sharding={{devices=[2]1,0}, {replicated}}\n}\n");
  ASSERT_TRUE(p.module) << p.messages;
  EXPECT_EQ(p.module->entry()->root()->sharding()->toString(), "{{devices=[2]1,0}, {replicated}}");
}

TEST(Sharding, IotaFormsExpandAsSpecified) {
  EXPECT_EQ(tiling("{devices=[4,2]<=[2,4]T(1,0)}").devices(), (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  Tiling t = tiling("{devices=[4,2,2]<=[4,2,2]T(1,0,2) last_tile_dim_replicate}", 2, 16);
  EXPECT_EQ(t.devices(), (std::vector<int64_t>{0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15}));
  EXPECT_EQ(t.replication(), 2);
}

TEST(Sharding, PrintsTheIotaFormWhenThereIsOne) {
  EXPECT_EQ(tiling("{devices=[4,2]0,4,1,5,2,6,3,7}").toString(), "{devices=[4,2]<=[2,4]T(1,0)}");
  EXPECT_EQ(tiling("{devices=[4,2]0,1,2,3,4,5,6,7}").toString(), "{devices=[4,2]<=[8]}");
  EXPECT_EQ(tiling("{devices=[2,4]1,0,2,3,4,5,6,7}").toString(), "{devices=[2,4]1,0,2,3,4,5,6,7}");
  EXPECT_EQ(tiling("{devices=[1,1,8]<=[8] last_tile_dim_replicate}").toString(), "{replicated}");
  EXPECT_EQ(tiling("{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}").toString(),
            "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}");
}

TEST(Sharding, TileOffsetsAndShapes) {
  Tiling t = tiling("{devices=[2,2,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}");
  EXPECT_EQ(t.shardDims({8, 8}), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(t.shardOffsets(5, {8, 8}), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(t.shardOffsets(3, {8, 8}), (std::vector<int64_t>{0, 4}));
  // Reducing dim 0 combines {0,4},{1,5},{2,6},{3,7} (SPMD.md §5).
  EXPECT_EQ(t.groupsAlong({0}), (std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Uneven: 9 over 5 shards is 2 each, the last holds one valid element.
  std::string why;
  auto u = Tiling::fromHlo(shardingOf("{devices=[5]4,3,2,1,0}", "f32[9]"), 1, 5, &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->shardDims({9}), (std::vector<int64_t>{2}));
  EXPECT_EQ(u->shardOffsets(0, {9}), (std::vector<int64_t>{8}));
  EXPECT_EQ(u->validShardDims(0, {9}), (std::vector<int64_t>{1}));
  EXPECT_EQ(u->validShardDims(4, {9}), (std::vector<int64_t>{2}));
}

TEST(Sharding, EqualUpToReplicaOrder) {
  Tiling a = tiling("{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}");
  Tiling b = tiling("{devices=[2,1,4]3,2,1,0,7,6,5,4 last_tile_dim_replicate}");
  Tiling c = tiling("{devices=[2,1,4]4,5,6,7,0,1,2,3 last_tile_dim_replicate}");
  EXPECT_TRUE(a.sameAs(b));
  EXPECT_FALSE(a.sameAs(c));
  // Reduce over dim 0 of [2,2]: SPMD.md §3.2 gives [2,2]0,2,1,3 replicated.
  Tiling d = tiling("{devices=[2,2]0,1,2,3}", 2, 4).replicatedOn({0});
  EXPECT_EQ(d.toString(), "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(d.withRemovedDims({0}).toString(), "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
}

TEST(Sharding, TransposeAndRefine) {
  Tiling t = tiling("{devices=[4,2]<=[8]}").transposed({1, 0});
  EXPECT_EQ(t.toString(), "{devices=[2,4]<=[4,2]T(1,0)}");
  Tiling r = tiling("{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  auto refined = r.tiledFromReplication(1, 4);
  ASSERT_TRUE(refined);
  EXPECT_EQ(refined->toString(), "{devices=[2,4]<=[8]}");
  EXPECT_FALSE(r.tiledFromReplication(1, 3));
}

TEST(Sharding, BadShardingsAreNamed) {
  std::string why;
  hlo::Sharding s = shardingOf("{devices=[2,2]0,1,2,3}");
  EXPECT_FALSE(Tiling::fromHlo(s, 1, 4, &why));
  EXPECT_EQ(why, "its tile assignment has rank 2 but the shape has rank 1");
  EXPECT_FALSE(Tiling::fromHlo(s, 2, 8, &why));
  EXPECT_EQ(why, "it uses 4 devices but the module has 8 partitions");
  s.tileAssignmentDevices = {0, 1, 1, 3};
  EXPECT_FALSE(Tiling::fromHlo(s, 2, 4, &why));
  EXPECT_EQ(why, "device 1 is listed twice");
  s.tileAssignmentDevices = {0, 1, 9, 3};
  EXPECT_FALSE(Tiling::fromHlo(s, 2, 4, &why));
  EXPECT_EQ(why, "device 9 is out of range (the module has 4 partitions)");
}

}  // namespace
}  // namespace tpu::spmd
