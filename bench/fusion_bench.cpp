// Fusion benchmark (hlo-fuse), all figures taken in one run:
//  (a) ext_vllm m0012: the module before XLA's optimizations through
//      hlo-fuse's default pipeline and llo-gen, against XLA's own fused
//      dump of the same module through llo-gen (same target, v5e): kernels,
//      total estimated cycles (llo-gen --stats) and simulated cycles, as
//      ratios; again with the KV cache shrunk, so its two large copies do
//      not hide the difference; and fused with resident kernels priced as
//      llo-gen's --stats prices them (fewer kernels, slower simulated);
//  (b) hlo-fuse's own speed: CPU time of the default pipeline on the
//      largest corpus module, and on generated modules of about 10k and
//      100k instructions (time per instruction should stay flat: linear);
//  (c) the workload-sized programs (testdata/workloads) and two models:
//      simulated time with and without hlo-fuse against the program's
//      ideal bound, max(flops / peak, bytes of parameters, constants and
//      results / HBM bandwidth), and the geometric mean over MLP, layer
//      norm + softmax, attention and graphsage (target >= 50%, each >= 25%).
//      Slow: the unfused programs simulate for seconds each.
// Usage: fusion_bench [repeats=3] [--no-workloads]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/codegen.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/pipeline.h"
#include "passes/pass.h"
#include "passes/driver/registry.h"
#include "sim/sim.h"
#include "support/file_io.h"

using namespace tpu;

namespace {

double cpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

std::unique_ptr<hlo::Module> parseText(const std::string& name, std::string text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>(name, std::move(text)), diags);
  if (!loaded.module) std::fprintf(stderr, "%s: %s\n", name.c_str(), firstErrorMessage(diags).c_str());
  return std::move(loaded.module);
}

std::unique_ptr<hlo::Module> parseFile(const std::string& path) {
  DiagnosticEngine diags;
  auto file = readInputFile(path, diags);
  if (!file) return nullptr;
  return parseText(path, std::string(file->contents()));
}

struct Lowered {
  size_t kernels = 0;
  double cycles = 0;
  uint64_t simulated = 0;  // cycles on the simulator (zero-filled inputs)
};

std::optional<Lowered> lower(const hlo::Module& m, const target::TargetDesc& t) {
  DiagnosticEngine diags;
  codegen::CodegenOptions options;
  options.schedule = llo::ScheduleMode::None;
  auto r = codegen::generateLlo(m, t, options, diags);
  if (!r) {
    std::fprintf(stderr, "llo-gen: %s\n", firstErrorMessage(diags).c_str());
    return std::nullopt;
  }
  Lowered l;
  l.kernels = r->stats.kernels.size();
  for (const auto& k : r->stats.kernels) l.cycles += k.estimatedCycles;
  auto program = codegen::compileModule(m, t, {}, diags);
  if (!program) return std::nullopt;
  std::vector<std::string> inputs;
  for (uint32_t id : program->entries.front().args) inputs.emplace_back(program->buffers[id].sizeBytes(), '\0');
  auto simulated = sim::simulate(*program, t, inputs, sim::SimOptions{}, diags);
  if (!simulated) {
    std::fprintf(stderr, "simulator: %s\n", firstErrorMessage(diags).c_str());
    return std::nullopt;
  }
  l.simulated = simulated->report.cycles;
  return l;
}

// m0012's KV cache bf16[2,4233,16,8,128] as bf16[2,3,16,8,128] (and the
// flattened sizes of its halves with it).
std::string shrinkKvCache(std::string text) {
  for (auto [from, to] : {std::pair<std::string, std::string>{"138706944", "98304"}, {"69353472", "49152"},
                          {"4233", "3"}})
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

// The default pipeline, but with resident kernels priced as llo-gen's
// --stats prices them (one DMA latency per kernel, not per section).
std::unique_ptr<hlo::Module> fuseWithLloGenPricing(const hlo::Module& m, const target::TargetDesc& t) {
  auto copy = passes::cloneModule(m);
  passes::registerAllPasses();
  fusion::registerFusionPasses();
  DiagnosticEngine diags;
  passes::PassManager pm({}, nullptr, nullptr);
  if (!pm.addPipeline(fusion::simplificationPipeline(), diags) || !pm.run(*copy, diags)) return nullptr;
  fusion::fuseModule(*copy, fusion::CostModel(t, 0.0), {}, "fusion", nullptr);
  return copy;
}

// CPU seconds of the default pipeline on a copy of `m` (best of `repeats`).
double optimizeSeconds(const hlo::Module& m, const target::TargetDesc& t, int repeats) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    auto copy = passes::cloneModule(m);
    DiagnosticEngine diags;
    double start = cpuSeconds();
    if (!fusion::optimizeModule(*copy, t, diags)) {
      std::fprintf(stderr, "hlo-fuse: %s\n", firstErrorMessage(diags).c_str());
      return -1;
    }
    best = std::min(best, cpuSeconds() - start);
  }
  return best;
}

// A transformer-like block repeated `blocks` times (about 16 instructions
// each): bias add, GELU-like activation, row reduction broadcast back,
// a dot every fourth block, views.
std::string generatedModule(int blocks) {
  std::string s = "HloModule generated\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                  "  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  x0 = f32[64,256] parameter(0)\n"
                  "  bias = f32[256] parameter(1)\n  w = f32[256,256] parameter(2)\n  z = f32[] constant(0)\n"
                  "  half = f32[] constant(0.5)\n";
  for (int i = 1; i <= blocks; ++i) {
    const int p = i - 1;
    s += fmt::format("  bb{0} = f32[64,256] broadcast(bias), dimensions={{1}}\n", i);
    s += fmt::format("  a{0} = f32[64,256] add(x{1}, bb{0})\n", i, p);
    s += fmt::format("  t{0} = f32[64,256] tanh(a{0})\n", i);
    s += fmt::format("  hb{0} = f32[64,256] broadcast(half), dimensions={{}}\n", i);
    s += fmt::format("  g{0} = f32[64,256] multiply(t{0}, hb{0})\n", i);
    s += fmt::format("  m{0} = f32[64,256] multiply(g{0}, a{0})\n", i);
    s += fmt::format("  r{0} = f32[64] reduce(m{0}, z), dimensions={{1}}, to_apply=add\n", i);
    s += fmt::format("  rb{0} = f32[64,256] broadcast(r{0}), dimensions={{0}}\n", i);
    s += fmt::format("  d{0} = f32[64,256] subtract(m{0}, rb{0})\n", i);
    s += fmt::format("  e{0} = f32[64,256] exponential(d{0})\n", i);
    s += fmt::format("  n{0} = f32[64,256] negate(e{0})\n", i);
    s += fmt::format("  tr{0} = f32[256,64] transpose(n{0}), dimensions={{1,0}}\n", i);
    s += fmt::format("  tt{0} = f32[64,256] transpose(tr{0}), dimensions={{1,0}}\n", i);
    if (i % 4 == 0) {
      s += fmt::format("  dot{0} = f32[64,256] dot(tt{0}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n", i);
      s += fmt::format("  x{0} = f32[64,256] maximum(dot{0}, e{0})\n", i);
    } else {
      s += fmt::format("  c{0} = f32[64,256] convert(tt{0})\n", i);
      s += fmt::format("  x{0} = f32[64,256] maximum(c{0}, e{0})\n", i);
    }
  }
  s += fmt::format("  ROOT out = f32[64,256] copy(x{})\n}}\n", blocks);
  return s;
}

// The ideal bound of a module in seconds (the one tpu-run --stats reports
// beside the bound of the bytes the code moved).
double idealSeconds(const hlo::Module& m, const target::TargetDesc& t) {
  hlo::ModuleStats s = hlo::computeModuleStats(m);
  const double bytes = static_cast<double>(s.parameterBytes + s.constantBytes + s.resultBytes);
  return std::max(s.entryCost.flops / target::peakFlops(t), bytes / target::hbmBytesPerSecond(t));
}

void workloads(const target::TargetDesc& t) {
  std::printf("\n(c) workloads on v5e: simulated time against the ideal bound\n");
  std::printf("  %-22s %12s %12s %12s %9s %9s\n", "program", "ideal us", "unfused us", "fused us", "unfused",
              "fused");
  struct Program {
    const char* path;
    bool inTarget;  // counted in the geometric mean
  };
  const Program programs[] = {{"testdata/workloads/mlp_gelu.hlo", true},
                              {"testdata/workloads/layernorm_softmax.hlo", true},
                              {"testdata/workloads/attention.hlo", true},
                              {"testdata/workloads/convnet.hlo", false},
                              {"testdata/models/graphsage_tf.hlo", true},
                              {"testdata/models/ssd_mobilenet_tf.hlo", false}};
  double logSum = 0, lowest = 1;
  int counted = 0;
  for (const Program& p : programs) {
    auto m = parseFile(std::string(TPU_SOURCE_DIR) + "/" + p.path);
    if (!m) continue;
    DiagnosticEngine diags;
    auto fused = passes::cloneModule(*m);
    if (!fusion::optimizeModule(*fused, t, diags)) continue;
    auto unfusedL = lower(*m, t), fusedL = lower(*fused, t);
    if (!unfusedL || !fusedL) continue;
    const double ideal = idealSeconds(*m, t), clock = t.clockHz;
    const double before = static_cast<double>(unfusedL->simulated) / clock,
                 after = static_cast<double>(fusedL->simulated) / clock;
    std::printf("  %-22s %12.1f %12.1f %12.1f %8.1f%% %8.1f%%\n",
                std::filesystem::path(p.path).stem().string().c_str(), ideal * 1e6, before * 1e6, after * 1e6,
                100 * ideal / before, 100 * ideal / after);
    if (p.inTarget) {
      logSum += std::log(ideal / after);
      lowest = std::min(lowest, ideal / after);
      ++counted;
    }
  }
  if (counted)
    std::printf("  geometric mean over mlp, layernorm+softmax, attention, graphsage: %.1f%% of ideal (target >= 50%%), "
                "lowest %.1f%% (target >= 25%%)\n",
                100 * std::exp(logSum / counted), 100 * lowest);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 && argv[1][0] != '-' ? std::max(1, std::atoi(argv[1])) : 3;
  bool withWorkloads = true;
  for (int i = 1; i < argc; ++i) withWorkloads &= std::string(argv[i]) != "--no-workloads";
  DiagnosticEngine diags;
  auto target = target::loadTarget("v5e", diags);
  if (!target) return 1;

  std::printf("(a) ext_vllm m0012 on v5e: llo-gen --stats of each module, and its simulated cycles\n");
  DiagnosticEngine readDiags;
  auto beforeText = readInputFile(TPU_CORPUS_DIR "/ext_vllm_xla_gpu_m0012_before.hlo", readDiags);
  auto afterText = readInputFile(TPU_CORPUS_DIR "/ext_vllm_xla_gpu_m0012_after_sm80.hlo", readDiags);
  if (!beforeText || !afterText) return 1;
  // Twice: as dumped, and with the KV cache parameter shrunk from 4233 to 3
  // blocks, which takes its two 138 MB copies (the same kernels in all
  // three programs, 90% of their time) out of the way of the comparison.
  for (bool shrunk : {false, true}) {
    auto text = [&](std::string s) { return shrunk ? shrinkKvCache(std::move(s)) : s; };
    auto before = parseText("before", text(std::string(beforeText->contents())));
    auto after = parseText("after", text(std::string(afterText->contents())));
    if (!before || !after) return 1;
    auto fused = passes::cloneModule(*before);
    if (!fusion::optimizeModule(*fused, *target, diags)) return 1;
    auto lloPriced = fuseWithLloGenPricing(*before, *target);
    if (!lloPriced) return 1;
    auto unfusedL = lower(*before, *target), fusedL = lower(*fused, *target), xlaL = lower(*after, *target);
    auto lloPricedL = lower(*lloPriced, *target);
    if (!unfusedL || !fusedL || !xlaL || !lloPricedL) return 1;
    std::printf("  %-46s %8s %14s %14s\n", shrunk ? "KV cache shrunk to 3 blocks" : "as dumped", "kernels",
                "est. cycles", "simulated");
    auto row = [](const char* what, const Lowered& l) {
      std::printf("  %-46s %8zu %14.0f %14llu\n", what, l.kernels, l.cycles,
                  static_cast<unsigned long long>(l.simulated));
    };
    row("before (no fusion)", *unfusedL);
    row("before | hlo-fuse", *fusedL);
    row("after (XLA's own fusion, sm80 dump)", *xlaL);
    row("before | hlo-fuse (resident priced as --stats)", *lloPricedL);
    std::printf("  hlo-fuse / XLA: kernels %.2fx, estimated cycles %.2fx (target: both <= 1), simulated %.2fx\n",
                static_cast<double>(fusedL->kernels) / static_cast<double>(xlaL->kernels),
                fusedL->cycles / xlaL->cycles,
                static_cast<double>(fusedL->simulated) / static_cast<double>(xlaL->simulated));
  }

  std::printf("\n(b) hlo-fuse CPU time (default pipeline, best of %d)\n", repeats);
  std::string largest;
  size_t largestCount = 0;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR)) {
    if (e.path().extension() != ".hlo") continue;
    auto m = parseFile(e.path().string());
    if (!m) continue;
    size_t n = 0;
    for (const auto& c : m->computations()) n += c->instructions().size();
    if (n > largestCount || (n == largestCount && e.path().filename().string() < largest))
      largestCount = n, largest = e.path().filename().string();
  }
  auto big = parseFile(std::string(TPU_CORPUS_DIR) + "/" + largest);
  double bigSeconds = big ? optimizeSeconds(*big, *target, repeats) : -1;
  std::printf("  %-44s %8zu instr %9.1f ms (target < 100 ms)\n", largest.c_str(), largestCount, bigSeconds * 1e3);
  double perInstruction[2] = {0, 0};
  int k = 0;
  for (int blocks : {640, 6400}) {
    auto m = parseText("generated", generatedModule(blocks));
    if (!m) return 1;
    const size_t n = m->entry()->instructions().size();
    double seconds = optimizeSeconds(*m, *target, repeats);
    perInstruction[k++] = seconds / static_cast<double>(n);
    std::printf("  generated, %5d blocks %22s %8zu instr %9.1f ms, %.2f us per instruction\n", blocks, "", n,
                seconds * 1e3, seconds / static_cast<double>(n) * 1e6);
  }
  std::printf("  time per instruction, 100k / 10k: %.2fx (linear: ~1)\n", perInstruction[1] / perInstruction[0]);
  if (withWorkloads) workloads(*target);
  return 0;
}
