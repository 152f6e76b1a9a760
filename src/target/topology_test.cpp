#include "target/topology.h"

#include <gtest/gtest.h>

namespace tpu::target {
namespace {

TargetDesc builtin(std::string_view name) {
  DiagnosticEngine diags;
  auto t = loadTarget(name, diags);
  EXPECT_TRUE(t.has_value());
  return *t;
}

std::string errorOf(std::string_view text, std::string_view target, int chips = 0) {
  DiagnosticEngine diags;
  auto topo = parseTopology(text, builtin(target), chips, diags);
  EXPECT_FALSE(topo.has_value()) << text;
  return diags.diagnostics().empty() ? "" : diags.diagnostics().front().message;
}

TEST(Topology, TargetsDescribeTheirInterconnect) {
  TargetDesc v5e = builtin("v5e"), v4 = builtin("v4");
  EXPECT_EQ(v5e.ici.maxShape, (std::vector<int>{16, 16}));
  EXPECT_EQ(v5e.ici.wrapMultiple, 16);
  EXPECT_EQ(v5e.ici.links, 4);
  EXPECT_EQ(v4.ici.maxShape, (std::vector<int>{16, 16, 16}));
  EXPECT_EQ(v4.ici.wrapMultiple, 4);
  EXPECT_EQ(v4.ici.links, 6);
}

TEST(Topology, WraparoundOnlyOnFullAxes) {
  DiagnosticEngine diags;
  auto t = parseTopology("8x16", builtin("v5e"), 0, diags);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->wraps(0));
  EXPECT_TRUE(t->wraps(1));
  EXPECT_EQ(t->chips(), 128);
  EXPECT_EQ(t->describe(), "8x16 torus (wraparound: y)");
  // Across the open axis the route is long; across the ring it goes round.
  EXPECT_EQ(t->hops(t->chipAt({0, 0}), t->chipAt({7, 0})), 7);
  EXPECT_EQ(t->hops(t->chipAt({0, 0}), t->chipAt({0, 15})), 1);
  EXPECT_EQ(t->neighbor(t->chipAt({0, 0}), 0, -1), -1);
  EXPECT_EQ(t->neighbor(t->chipAt({0, 0}), 1, -1), t->chipAt({0, 15}));
  auto cube = parseTopology("4x4x4", builtin("v4"), 64, diags);
  ASSERT_TRUE(cube);
  EXPECT_TRUE(cube->wraps(0) && cube->wraps(1) && cube->wraps(2));
  auto small = parseTopology("2x2x1", builtin("v4"), 4, diags);
  ASSERT_TRUE(small);
  EXPECT_FALSE(small->wraps(0));
  EXPECT_EQ(diags.errorCount(), 0u);
}

TEST(Topology, RoutesAreDimensionOrdered) {
  DiagnosticEngine diags;
  auto t = parseTopology("2x4", builtin("v5e"), 8, diags);
  ASSERT_TRUE(t);
  std::vector<int> r = t->route(0, 7);  // (0,0) -> (1,3): x first, then y
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(t->linkName(r[0]), "chip 0 (0,0) +x -> chip 4 (1,0)");
  EXPECT_EQ(t->linkName(r[3]), "chip 6 (1,2) +y -> chip 7 (1,3)");
  EXPECT_EQ(t->linkTarget(r[0]), 4);
  EXPECT_EQ(t->linkSource(r[1]), 4);
  EXPECT_TRUE(t->route(3, 3).empty());
}

TEST(Topology, DefaultIsTheMostSquareSlice) {
  DiagnosticEngine diags;
  EXPECT_EQ(defaultTopology(builtin("v5e"), 8, diags)->toString(), "2x4");
  EXPECT_EQ(defaultTopology(builtin("v5e"), 1, diags)->toString(), "1x1");
  EXPECT_EQ(defaultTopology(builtin("v5e"), 256, diags)->toString(), "16x16");
  EXPECT_EQ(defaultTopology(builtin("v4"), 8, diags)->toString(), "2x2x2");
  EXPECT_EQ(defaultTopology(builtin("v4"), 2, diags)->toString(), "1x1x2");
  EXPECT_EQ(diags.errorCount(), 0u);
  EXPECT_FALSE(defaultTopology(builtin("v5e"), 512, diags));
  EXPECT_EQ(diags.diagnostics().front().message, "no slice of target 'v5e' has 512 chips (at most 256, shaped within 16x16)");
}

TEST(Topology, BadShapes) {
  EXPECT_EQ(errorOf("2x", "v5e"), "--topology=2x: expected axis lengths joined by 'x', like 2x4 or 2x2x2");
  EXPECT_EQ(errorOf("0x4", "v5e"), "--topology=0x4: expected axis lengths joined by 'x', like 2x4 or 2x2x2");
  EXPECT_EQ(errorOf("2x2x2", "v5e"), "--topology=2x2x2: target 'v5e' has a 2d-torus (2 axes, like 2x4), not 3 axes");
  EXPECT_EQ(errorOf("32x2", "v5e"), "--topology=32x2: axis 0 has 32 chips; target 'v5e' allows 1 to 16");
  EXPECT_EQ(errorOf("6x4x4", "v4"),
            "--topology=6x4x4: axis 0 has 6 chips; target 'v4' builds axes longer than 4 from whole units of 4");
  EXPECT_EQ(errorOf("2x4", "v5e", 4),
            "--topology=2x4 has 8 chips, but the program runs on 4 (replica_count x num_partitions)");
}

}  // namespace
}  // namespace tpu::target
