#include "target/target.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "target/builtin_targets.h"

namespace tpu::target {
namespace {

std::optional<TargetDesc> parse(const std::string& text, DiagnosticEngine& diags) {
  static std::vector<std::unique_ptr<SourceFile>> files;
  files.push_back(std::make_unique<SourceFile>("test.json", text));
  return parseTarget(*files.back(), diags);
}

std::string builtinJson(std::string_view name) {
  for (const BuiltinTarget& b : builtinTargets())
    if (b.name == name) return std::string(b.json);
  return {};
}

TEST(Target, BuiltinsLoadWithoutDiagnostics) {
  for (const std::string& name : builtinTargetNames()) {
    DiagnosticEngine diags;
    auto t = loadTarget(name, diags);
    ASSERT_TRUE(t) << name << ": " << firstErrorMessage(diags);
    EXPECT_TRUE(diags.diagnostics().empty()) << name << ": " << diags.diagnostics().front().message;
    EXPECT_EQ(t->name, name);
    EXPECT_LE(t->totalSlots(), kMaxBundleSlots);
  }
  EXPECT_GE(builtinTargetNames().size(), 2u);
}

// Peaks derived from MXU counts and clocks match the public figures (TPU_FACTS.md).
TEST(Target, DerivedPeaksMatchPublicNumbers) {
  DiagnosticEngine diags;
  auto v4 = loadTarget("v4", diags);
  auto v5e = loadTarget("v5e", diags);
  ASSERT_TRUE(v4 && v5e);
  EXPECT_NEAR(peakFlops(*v4) / 275e12, 1.0, 0.01);
  EXPECT_NEAR(peakFlops(*v4, MathKind::Int8) / 275e12, 1.0, 0.01);
  EXPECT_NEAR(peakFlops(*v5e) / 197e12, 1.0, 0.01);
  EXPECT_NEAR(peakFlops(*v5e, MathKind::Int8) / 394e12, 1.0, 0.01);
  EXPECT_NEAR(ridgePoint(*v5e), 240, 3);  // ROOFLINE.md: ~240 FLOP/B
  EXPECT_NEAR(ridgePoint(*v4), 229, 3);
  EXPECT_EQ(v5e->registers.vregBytes(), 4096u);
  // MXU rate: rows per cycle x 128 x 128 x 2 agrees with the interval.
  EXPECT_EQ(v5e->mxu.matmulIntervalCycles, 8);
}

TEST(Target, RooflineBound) {
  DiagnosticEngine diags;
  auto t = loadTarget("v5e", diags);
  ASSERT_TRUE(t);
  // bf16 4096^3 matmul: 2*4096^3 flops, 3*4096^2*2 bytes -> compute-bound.
  double n = 4096;
  RooflineBound b = rooflineBound(*t, 2 * n * n * n, 3 * n * n * 2);
  EXPECT_TRUE(b.computeBound);
  EXPECT_DOUBLE_EQ(b.seconds, b.computeSeconds);
  EXPECT_NEAR(b.intensity, 2 * n / 6, 1e-9);
  RooflineBound copy = rooflineBound(*t, 0, 1e9);
  EXPECT_FALSE(copy.computeBound);
  EXPECT_NEAR(copy.seconds, 1e9 / 8.19e11, 1e-12);
}

// Every number in a shipped description says where it comes from.
TEST(Target, BuiltinFieldsAreDocumented) {
  for (const BuiltinTarget& b : builtinTargets()) {
    auto root = nlohmann::json::parse(b.json);
    for (auto& [section, value] : root.items()) {
      if (value.is_object() && value.contains("value")) {
        EXPECT_TRUE(value.contains("notes")) << b.name << ": " << section;
        continue;
      }
      if (!value.is_object()) continue;
      if (value.contains("notes")) continue;  // a section-wide note (latencies)
      for (auto& [key, field] : value.items()) {
        ASSERT_TRUE(field.is_object()) << b.name << ": " << section << "." << key << " has no notes";
        EXPECT_TRUE(field.contains("notes")) << b.name << ": " << section << "." << key;
      }
    }
  }
}

TEST(Target, UnknownName) {
  DiagnosticEngine diags;
  EXPECT_FALSE(loadTarget("v99", diags));
  EXPECT_NE(firstErrorMessage(diags).find("unknown target 'v99' (built-in targets: v4, v5e"), std::string::npos)
      << firstErrorMessage(diags);
}

TEST(Target, MissingFile) {
  DiagnosticEngine diags;
  EXPECT_FALSE(loadTarget("/nonexistent/chip.json", diags));
  EXPECT_TRUE(diags.hasErrors());
}

TEST(Target, BadJsonHasPosition) {
  DiagnosticEngine diags;
  EXPECT_FALSE(parse("{\n  \"name\": \"x\",,\n}", diags));
  ASSERT_TRUE(diags.hasErrors());
  EXPECT_NE(diags.diagnostics()[0].message.find("invalid JSON"), std::string::npos);
  EXPECT_EQ(diags.diagnostics()[0].location.file->lineColumn(diags.diagnostics()[0].location.offset).line, 2u);
}

struct Mutation {
  std::string path;  // "memory.vmem_bytes"
  nlohmann::json value;  // null = remove
  std::string expected;
};

class TargetErrors : public testing::TestWithParam<Mutation> {};

TEST_P(TargetErrors, Reported) {
  const Mutation& m = GetParam();
  auto root = nlohmann::json::parse(builtinJson("v5e"));
  nlohmann::json* node = &root;
  std::string rest = m.path;
  while (rest.find('.') != std::string::npos) {
    node = &(*node)[rest.substr(0, rest.find('.'))];
    rest = rest.substr(rest.find('.') + 1);
  }
  if (m.value.is_null()) node->erase(rest);
  else (*node)[rest] = m.value;
  DiagnosticEngine diags;
  EXPECT_FALSE(parse(root.dump(2), diags));
  EXPECT_EQ(firstErrorMessage(diags), m.expected);
}

INSTANTIATE_TEST_SUITE_P(
    All, TargetErrors,
    testing::Values(Mutation{"memory.hbm_bytes", nullptr, "missing field 'memory.hbm_bytes'"},
                    Mutation{"clock_hz", "fast", "field 'clock_hz' must be a number, not string"},
                    Mutation{"memory.vmem_bytes", 0, "field 'memory.vmem_bytes' must be positive, got 0"},
                    Mutation{"registers.vregs", -4, "field 'registers.vregs' must be positive, got -4"},
                    Mutation{"registers.sregs", 1.5, "field 'registers.sregs' must be an integer, not 1.5"},
                    Mutation{"mxu.int8", 1, "field 'mxu.int8' must be true or false, not number"},
                    Mutation{"mxu", nullptr, "missing field 'mxu'"},
                    Mutation{"slots", 3, "field 'slots' must be an object"},
                    Mutation{"latencies.eup", nullptr, "missing field 'latencies.eup'"},
                    Mutation{"registers.vregs", 65, "field 'registers.vregs' is too large: 65 (at most 64)"},
                    Mutation{"registers.lanes", 64,
                             "field 'registers.lanes' must be 128 (the ISA's vector shape is 8x128x32-bit)"},
                    Mutation{"mxu.rows", 256,
                             "fields 'mxu.rows' and 'mxu.cols' must be 128 (the ISA's MXU ops use 128x128 tiles)"},
                    Mutation{"slots.xlu", 15, "a bundle may have at most 32 slots in total, the target has 33"},
                    Mutation{"ici.max_shape", "16x16", "field 'ici.max_shape' must be an array of 1 to 3 axis lengths"},
                    Mutation{"ici.max_shape", nlohmann::json::array({16, 0}),
                             "field 'ici.max_shape' must hold axis lengths from 1 to 4096"},
                    Mutation{"ici.max_shape", nlohmann::json::array({4, 4, 4}),
                             "field 'ici.max_shape': a torus of 3 axes needs 6 links per chip, 'ici.links' is 4"},
                    Mutation{"ici.wraparound_multiple", -1,
                             "field 'ici.wraparound_multiple' must be non-negative, got -1"}));

TEST(Target, PeakMismatchWarns) {
  auto root = nlohmann::json::parse(builtinJson("v5e"));
  root["clock_hz"] = 2.0e9;
  DiagnosticEngine diags;
  EXPECT_TRUE(parse(root.dump(), diags));
  ASSERT_EQ(diags.warningCount(), 2u);
  EXPECT_NE(diags.diagnostics()[0].message.find("differs from mxu.published_peak_bf16_flops"), std::string::npos);
}

}  // namespace
}  // namespace tpu::target
