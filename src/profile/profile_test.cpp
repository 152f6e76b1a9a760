// The op profile's invariants: every cycle attributed once (ops sum to the
// run), padded MXU work equal to the simulator's, model FLOPs from the HLO,
// kernels found from .llo comments, kernel metadata and .tpu labels, pods,
// and the renderings.
#include "profile/profile.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "hlo/text/parser.h"
#include "llo/text.h"
#include "sim/sim.h"

namespace tpu::profile {
namespace {

constexpr const char* kMlp = R"(HloModule mlp
ENTRY e {
  x = bf16[16,512] parameter(0)
  w = bf16[512,256] parameter(1)
  d = f32[16,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="dense/MatMul"}
  z = f32[] constant(0)
  zb = f32[16,256] broadcast(z), dimensions={}
  ROOT r = f32[16,256] maximum(d, zb), metadata={op_name="dense/Relu"}
}
)";

struct Fixture {
  std::unique_ptr<hlo::Module> module;
  target::TargetDesc target;
  codegen::CodegenStats stats;
  std::string llo;
  isa::Program program;
  sim::SimResult result;
};

Fixture run(bool withStats) {
  Fixture f;
  DiagnosticEngine diags;
  SourceFile file("mlp.hlo", kMlp);
  f.module = hlo::parseHloText(file, diags);
  EXPECT_TRUE(f.module);
  f.target = *target::loadTarget("v5e", diags);
  auto gen = codegen::generateLlo(*f.module, f.target, {}, diags);
  EXPECT_TRUE(gen);
  f.llo = gen->llo;
  f.stats = gen->stats;
  SourceFile lloFile("mlp.llo", f.llo);
  auto assembled = llo::assembleLlo(lloFile, {}, diags);
  EXPECT_TRUE(assembled) << (diags.diagnostics().empty() ? "" : diags.diagnostics()[0].message);
  f.program = assembled->program;
  KernelMap km = mapKernels(f.program, withStats ? &f.stats : nullptr, withStats ? "" : f.llo,
                            withStats ? f.module.get() : nullptr);
  sim::SimOptions opts;
  opts.profile = true;
  opts.bundleRegion = km.bundleRegion;
  std::vector<std::string> inputs;
  for (uint32_t b : f.program.entries[0].args) inputs.emplace_back(f.program.buffers[b].sizeBytes(), '\0');
  auto r = sim::simulate(f.program, f.target, inputs, opts, diags);
  EXPECT_TRUE(r);
  f.result = std::move(*r);
  return f;
}

Profile profileOf(const Fixture& f, bool withStats) {
  KernelMap km = mapKernels(f.program, withStats ? &f.stats : nullptr, withStats ? "" : f.llo,
                            withStats ? f.module.get() : nullptr);
  ProfileInputs in;
  in.report = &f.result.report;
  in.exec = &f.result.profile;
  in.program = &f.program;
  in.kernels = &km;
  in.lowered = withStats ? f.module.get() : nullptr;
  in.original = in.lowered;
  in.name = "mlp";
  Profile p = buildProfile(in);
  if (withStats) setIdealBound(p, *f.module);
  return p;
}

TEST(Profile, EveryCycleAttributedOnce) {
  Fixture f = run(true);
  const sim::SimReport& r = f.result.report;
  uint64_t bundleCycles = 0;
  std::array<uint64_t, sim::kNumStallReasons> stalls{};
  for (const sim::BundleProfile& b : f.result.profile.bundles) {
    bundleCycles += b.cycles;
    for (size_t i = 0; i < stalls.size(); ++i) stalls[i] += b.stallCycles[i];
  }
  EXPECT_EQ(bundleCycles, r.cycles);
  EXPECT_EQ(stalls, r.stallCycles);
  // Spans tile [0, cycles) in order.
  const auto& spans = f.result.profile.spans;
  ASSERT_FALSE(spans.empty());
  EXPECT_EQ(spans.front().start, 0u);
  EXPECT_EQ(spans.back().end, r.cycles);
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_EQ(spans[i].start, spans[i - 1].end);

  Profile p = profileOf(f, true);
  uint64_t opCycles = 0;
  double hw = 0;
  for (const OpFigures& op : p.ops) {
    opCycles += op.cycles;
    hw += op.hwFlops;
  }
  EXPECT_EQ(opCycles, r.cycles);
  EXPECT_EQ(hw, r.flops);
  EXPECT_EQ(p.hwFlops, r.flops);
}

TEST(Profile, KernelsNamedByHloWithModelFlops) {
  Fixture f = run(true);
  Profile p = profileOf(f, true);
  ASSERT_EQ(p.ops.size(), 3u);
  const OpFigures* dot = nullptr;
  for (const OpFigures& op : p.ops)
    if (op.hlo == "d") dot = &op;
  ASSERT_TRUE(dot);
  EXPECT_EQ(dot->kind, "matmul");
  EXPECT_EQ(dot->opName, "dense/MatMul");
  EXPECT_TRUE(dot->modelKnown);
  EXPECT_DOUBLE_EQ(dot->modelFlops, 2.0 * 16 * 512 * 256);
  // 16 rows pad to 2 pushes of 8 per 128x128 tile: 4 K tiles x 2 N tiles x 2.
  EXPECT_DOUBLE_EQ(dot->hwFlops, 4 * 2 * 2 * 2.0 * 8 * 128 * 128);
  EXPECT_TRUE(p.idealKnown);
  EXPECT_GT(p.idealSeconds, 0);
  EXPECT_LT(p.idealSeconds, p.seconds);
  bool grouped = false;
  for (const OpFigures& g : p.byOpName) grouped = grouped || g.key == "dense/Relu";
  EXPECT_TRUE(grouped);
}

TEST(Profile, LloCommentsGiveKindAndOpName) {
  Fixture f = run(false);
  Profile p = profileOf(f, false);
  std::set<std::string> seen;
  for (const OpFigures& op : p.ops) seen.insert(op.hlo + ":" + op.kind + ":" + op.opName);
  EXPECT_TRUE(seen.count("d:matmul:dense/MatMul")) << renderText(p);
  EXPECT_TRUE(seen.count("r:elementwise:dense/Relu")) << renderText(p);
  EXPECT_FALSE(p.modelKnown);
}

TEST(Profile, LabelsAloneGiveHloNames) {
  Fixture f = run(false);
  KernelMap km = mapKernels(f.program, nullptr, "", nullptr);
  std::vector<std::string> hlo;
  for (const KernelInfo& k : km.kernels) hlo.push_back(k.hlo);
  EXPECT_EQ(hlo, (std::vector<std::string>{"d", "zb", "r"}));
  ASSERT_EQ(km.bundleRegion.size(), f.program.bundles.size());
}

// A .tpu's kernel metadata (the assembler's Program::kernels): kind and
// op_name without llo-gen's statistics or the .llo text.
TEST(Profile, ProgramKernelMetadataGivesKindAndOpName) {
  Fixture f = run(false);
  ASSERT_EQ(f.program.kernels.size(), 3u);
  KernelMap km = mapKernels(f.program, nullptr, "", nullptr);
  std::set<std::string> seen;
  for (const KernelInfo& k : km.kernels) seen.insert(k.hlo + ":" + k.kind + ":" + k.opName);
  EXPECT_TRUE(seen.count("d:matmul:dense/MatMul"));
  EXPECT_TRUE(seen.count("r:elementwise:dense/Relu"));
}

// Pods: ops summed over chips add up to all chips' cycles, one figure row per
// chip, and the trace has one process per chip.
TEST(Profile, PodSumsChipsAndTracesEachChip) {
  Fixture f = run(true);
  KernelMap km = mapKernels(f.program, &f.stats, "", f.module.get());
  DiagnosticEngine diags;
  auto topo = target::defaultTopology(f.target, 2, diags);
  ASSERT_TRUE(topo);
  sim::SimOptions opts;
  opts.profile = true;
  opts.trace = true;
  opts.bundleRegion = km.bundleRegion;
  std::vector<std::string> inputs;
  for (uint32_t b : f.program.entries[0].args) inputs.emplace_back(f.program.buffers[b].sizeBytes(), '\0');
  auto pod = sim::simulatePod(f.program, f.target, *topo, {inputs, inputs}, opts, diags);
  ASSERT_TRUE(pod);
  ProfileInputs in;
  in.program = &f.program;
  in.kernels = &km;
  in.lowered = f.module.get();
  in.name = "mlp";
  std::vector<Profile> chips;
  Profile p = buildPodProfile(in, *pod, &chips);
  ASSERT_EQ(chips.size(), 2u);
  ASSERT_EQ(p.chips.size(), 2u);
  EXPECT_EQ(p.podChips, 2);
  uint64_t opCycles = 0;
  for (const OpFigures& op : p.ops) opCycles += op.cycles;
  EXPECT_EQ(opCycles, pod->chips[0].report.cycles + pod->chips[1].report.cycles);
  EXPECT_EQ(p.chipCycles, opCycles);
  EXPECT_EQ(p.chips[1].chip, 1);
  EXPECT_FALSE(p.chips[1].ops.empty());
  auto trace = nlohmann::json::parse(podTrace(chips, *pod));
  std::set<int> pids, kernelPids;
  for (const auto& e : trace["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e.value("cat", "") == "kernel") kernelPids.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(kernelPids, (std::set<int>{1, 2}));
  EXPECT_EQ(pids, (std::set<int>{1, 2}));  // no ICI traffic: no links process
  EXPECT_NE(renderText(p).find("pod: 2 chips"), std::string::npos);
}

TEST(Profile, JsonDiffAndHtml) {
  Fixture f = run(true);
  Profile p = profileOf(f, true);
  std::string json = renderJson(p);
  auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["ops"].size(), 3u);
  EXPECT_EQ(j["cycles"].get<uint64_t>(), f.result.report.cycles);
  DiagnosticEngine diags;
  auto diff = diffProfiles("a", json, "b", json, diags);
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("(+0.0%)"), std::string::npos) << *diff;
  EXPECT_FALSE(diffProfiles("a", json, "b", "{}", diags));
  std::string html = renderHtml(p);
  EXPECT_NE(html.find("<table class=\"sortable\" id=\"ops\""), std::string::npos);
  EXPECT_NE(html.find("class=\"kernel-point"), std::string::npos);
  EXPECT_NE(html.find("id=\"memory-timeline\""), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg") == std::string::npos, false);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

}  // namespace
}  // namespace tpu::profile
