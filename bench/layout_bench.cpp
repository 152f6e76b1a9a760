// Layout assignment benchmark: the time `layout-assignment` takes on
// generated modules of about 1k, 10k and 100k instructions (a chain of
// transposed dots, bias adds and reshapes; and blocks whose constraints
// conflict, two copies each) with the time per instruction at each size
// (linear time keeps it flat), on the largest corpus module, and the
// copies it inserts and transposes it makes free on the workloads and
// models, all in one run, in process CPU time. Then simulated time on v5e
// of a chain of transposed dots and of the two-layer conv net compiled
// with assigned layouts (hlo-layout --entry-layouts=auto | hlo-fuse |
// llo-gen, and with llo-gen --physical-edges) against the row-major
// default (hlo-fuse | llo-gen), in the same run.
//
//   layout_bench [--scale]     (--scale: the generated chains only)
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "codegen/codegen.h"
#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/fusion/pipeline.h"
#include "passes/layout/layout_assignment.h"
#include "sim/sim.h"
#include "support/file_io.h"
#include "target/target.h"

namespace {

double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int64_t countInstructions(const tpu::hlo::Module& m) {
  int64_t n = 0;
  for (const auto& c : m.computations()) n += c->instructionCount();
  return n;
}

// `layers` blocks of: transpose of the activations, dot with a transposed
// weight, bias broadcast and add, reshape to split and merge a dimension.
std::string chain(int layers) {
  std::string s = "HloModule chain\n\nENTRY main {\n  x0 = f32[256,512] parameter(0)\n";
  for (int i = 0; i < layers; ++i) {
    s += fmt::format(
        "  w{0} = f32[512,512] parameter({1})\n"
        "  b{0} = f32[512] parameter({2})\n"
        "  wt{0} = f32[512,512] transpose(w{0}), dimensions={{1,0}}\n"
        "  d{0} = f32[256,512] dot(x{0}, wt{0}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
        "  bb{0} = f32[256,512] broadcast(b{0}), dimensions={{1}}\n"
        "  a{0} = f32[256,512] add(d{0}, bb{0})\n"
        "  r{0} = f32[32,8,512] reshape(a{0})\n"
        "  n{0} = f32[32,8,512] negate(r{0})\n"
        "  x{3} = f32[256,512] reshape(n{0})\n",
        i, 2 * i + 1, 2 * i + 2, i + 1);
  }
  s += fmt::format("  ROOT out = f32[256,512] copy(x{})\n}}\n", layers);
  return s;
}

// `layers` blocks whose constraints conflict: a column-major bf16 weight
// (entry layout kept) feeds a dot through a convert (the copy moves above
// it) and a sine (sharing that copy), a custom-call returns its result
// column-major (a second copy for the tanh after it): two copies per
// block, about 1k, 10k and 100k instructions at 125, 1250 and 12500.
std::string conflicts(int layers) {
  std::string s = "HloModule conflicts\n\nENTRY main {\n  x_0 = f32[64,128] parameter(0)\n";
  std::string outs;
  for (int i = 0; i < layers; ++i) {
    s += fmt::format(
        "  p_{0} = bf16[128,128]{{0,1}} parameter({1})\n"
        "  c_{0} = f32[128,128] convert(p_{0})\n"
        "  d_{0} = f32[64,128] dot(x_{0}, c_{0}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}\n"
        "  sn_{0} = bf16[128,128] sine(p_{0})\n"
        "  t_{0} = (f32[64,128], bf16[128,128]) tuple(d_{0}, sn_{0})\n"
        "  g_{0} = f32[64,128] get-tuple-element(t_{0}), index=0\n"
        "  cc_{0} = f32[64,128]{{0,1}} custom-call(g_{0}), custom_call_target=\"foo\"\n"
        "  x_{1} = f32[64,128] tanh(cc_{0})\n",
        i, i + 1);
    outs += fmt::format(", sn_{}", i);
  }
  std::string types;
  for (int i = 0; i < layers; ++i) types += ", bf16[128,128]";
  s += fmt::format("  ROOT out = (f32[64,128]{}) tuple(x_{}{})\n}}\n", types, layers, outs);
  return s;
}

struct Run {
  double seconds = 1e30;
  tpu::passes::layout::LayoutReport report;
};

// Median CPU time of `runs` runs (each on a fresh copy of the module).
Run timeLayout(const tpu::hlo::Module& module, int runs) {
  Run best;
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    std::unique_ptr<tpu::hlo::Module> copy = tpu::passes::cloneModule(module);
    tpu::passes::layout::LayoutReport report;
    tpu::passes::layout::LayoutOptions options;
    options.report = &report;
    options.remarks = false;  // the counts (as hlo-layout without --remarks)
    tpu::DiagnosticEngine diags;
    double start = cpuSeconds();
    tpu::passes::layout::LayoutAssignmentPass(options).run(*copy, diags);
    double t = cpuSeconds() - start;
    times.push_back(t);
    if (r == 0) best.report = std::move(report);
    (void)copy.release();  // teardown is not the pass's time
  }
  std::sort(times.begin(), times.end());
  best.seconds = times[times.size() / 2];
  return best;
}

tpu::hlo::LoadedModule load(const std::string& path) {
  tpu::DiagnosticEngine diags;
  auto source = tpu::readInputFile(path, diags);
  if (!source) return {};
  return tpu::hlo::readModule(std::shared_ptr<tpu::SourceFile>(std::move(source)), diags);
}

// The module at `path` with every `from` element type written as `to`.
tpu::hlo::LoadedModule loadRetyped(const std::string& path, const std::string& from, const std::string& to) {
  tpu::DiagnosticEngine diags;
  auto source = tpu::readInputFile(path, diags);
  if (!source) return {};
  std::string text(source->contents());
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
  return tpu::hlo::readModule(std::make_shared<tpu::SourceFile>(path, std::move(text)), diags);
}

// A chain of `layers` dots x @ w.T (w stored [N, K] as PyTorch keeps
// weights), each result transposed for the next layer's contraction.
std::string transposedDots(int layers) {
  std::string s = "HloModule tdots\n\nENTRY main {\n  x0 = f32[512,1024] parameter(0)\n";
  for (int i = 0; i < layers; ++i)
    s += fmt::format(
        "  w{0} = f32[1024,1024] parameter({1})\n"
        "  wt{0} = f32[1024,1024] transpose(w{0}), dimensions={{1,0}}\n"
        "  d{0} = f32[512,1024] dot(x{0}, wt{0}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
        "  x{2} = f32[512,1024] tanh(d{0})\n",
        i, i + 1, i + 1);
  s += fmt::format("  ROOT out = f32[512,1024] copy(x{})\n}}\n", layers);
  return s;
}

struct Timed {
  uint64_t cycles = 0;
  size_t kernels = 0, relayouts = 0;
  uint64_t padding = 0;
};

// hlo-fuse (after hlo-layout when `layouts`) | llo-gen, simulated on
// zero-filled inputs.
std::optional<Timed> simulate(const tpu::hlo::Module& module, bool layouts, bool physicalEdges,
                              const tpu::target::TargetDesc& t) {
  tpu::DiagnosticEngine diags;
  std::unique_ptr<tpu::hlo::Module> m = tpu::passes::cloneModule(module);
  if (layouts) {
    tpu::passes::layout::LayoutOptions o;
    o.entryLayouts = tpu::passes::layout::EntryLayouts::Auto;
    tpu::passes::layout::LayoutAssignmentPass(o).run(*m, diags);
  }
  if (!tpu::fusion::optimizeModule(*m, t, diags)) return std::nullopt;
  tpu::codegen::CodegenStats stats;
  tpu::codegen::CodegenOptions options;
  options.physicalEdges = physicalEdges;
  auto program = tpu::codegen::compileModule(*m, t, options, diags, &stats);
  if (!program) return std::nullopt;
  std::vector<std::string> inputs;
  for (uint32_t id : program->entries.front().args) inputs.emplace_back(program->buffers[id].sizeBytes(), '\0');
  auto simulated = tpu::sim::simulate(*program, t, inputs, tpu::sim::SimOptions{}, diags);
  if (!simulated) return std::nullopt;
  Timed r;
  r.cycles = simulated->report.cycles;
  r.kernels = stats.kernels.size();
  r.relayouts = stats.relayouts.size();
  r.padding = stats.paddingBytes;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const bool scaleOnly = argc > 1 && std::string(argv[1]) == "--scale";
  std::printf("layout-assignment on generated chains (median of 5, CPU time):\n");
  double perInst[3] = {};
  int sizes[3] = {111, 1111, 11111};  // about 1k, 10k and 100k instructions
  for (int k = 0; k < 3; ++k) {
    tpu::DiagnosticEngine diags;
    auto loaded = tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("chain.hlo", chain(sizes[k])), diags);
    if (!loaded.module) return 1;
    int64_t n = countInstructions(*loaded.module);
    Run r = timeLayout(*loaded.module, 5);
    perInst[k] = r.seconds / static_cast<double>(n);
    std::printf("  %7lld instructions: %8.2f ms  %6.3f us/instruction  copies %lld, transposes free %lld, "
                "reshapes free %lld\n",
                static_cast<long long>(n), r.seconds * 1e3, perInst[k] * 1e6, static_cast<long long>(r.report.copies),
                static_cast<long long>(r.report.freeTransposes), static_cast<long long>(r.report.freeReshapes));
  }
  std::printf("  time per instruction, 10k / 1k: %.2fx, 100k / 10k: %.2fx (linear: ~1)\n", perInst[1] / perInst[0],
              perInst[2] / perInst[1]);
  std::printf("with conflicting constraints (two copies per 8 instructions; median of 3):\n");
  int blocks[3] = {125, 1250, 12500};
  for (int k = 0; k < 3; ++k) {
    tpu::DiagnosticEngine diags;
    auto loaded =
        tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("conflicts.hlo", conflicts(blocks[k])), diags);
    if (!loaded.module) return 1;
    int64_t n = countInstructions(*loaded.module);
    Run r = timeLayout(*loaded.module, 3);
    perInst[k] = r.seconds / static_cast<double>(n);
    std::printf("  %7lld instructions: %8.2f ms  %6.3f us/instruction  copies %lld\n", static_cast<long long>(n),
                r.seconds * 1e3, perInst[k] * 1e6, static_cast<long long>(r.report.copies));
  }
  std::printf("  time per instruction, 10k / 1k: %.2fx, 100k / 10k: %.2fx (linear: ~1)\n", perInst[1] / perInst[0],
              perInst[2] / perInst[1]);
  if (scaleOnly) return 0;

  std::printf("\nmodules (copies inserted, bytes they move, transposes and reshapes made free):\n");
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const char* dir : {TPU_SOURCE_DIR "/testdata/workloads", TPU_SOURCE_DIR "/testdata/models"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".hlo") files.push_back(e.path().string());
  }
  files.push_back(TPU_CORPUS_DIR "/ext_gh_bert_pretrain_tp2_dp4_fwd_bwd.hlo");
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    auto loaded = load(f);
    if (!loaded.module) continue;
    Run r = timeLayout(*loaded.module, 3);
    std::printf("  %-40s %6lld instr %7.2f ms  copies %lld (%lld bytes)  free transposes %lld, reshapes %lld\n",
                fs::path(f).filename().string().c_str(), static_cast<long long>(countInstructions(*loaded.module)),
                r.seconds * 1e3, static_cast<long long>(r.report.copies), static_cast<long long>(r.report.copyBytes),
                static_cast<long long>(r.report.freeTransposes), static_cast<long long>(r.report.freeReshapes));
  }

  std::printf("\nsimulated on v5e, assigned layouts (physical edges) against the row-major default:\n");
  tpu::DiagnosticEngine diags;
  auto target = tpu::target::loadTarget("v5e", diags);
  if (!target) return 1;
  const double clockHz = target->clockHz;
  struct Case {
    std::string name;
    tpu::hlo::LoadedModule loaded;
  };
  std::vector<Case> cases;
  cases.push_back({"transposed dots (4 x f32 512x1024 @ 1024x1024.T)",
                   tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("tdots.hlo", transposedDots(4)), diags)});
  cases.push_back({"conv net (bf16[32,56,56,64], 3x3, residual)", load(TPU_SOURCE_DIR "/testdata/workloads/convnet.hlo")});
  // f32 activations are strided views of the tiles (bf16 pairs two images
  // per word): the convolutions read and write them in place.
  cases.push_back({"conv net in f32 (f32[32,56,56,64], 3x3, residual)",
                   loadRetyped(TPU_SOURCE_DIR "/testdata/workloads/convnet.hlo", "bf16", "f32")});
  for (Case& c : cases) {
    if (!c.loaded.module) return 1;
    auto plain = simulate(*c.loaded.module, false, false, *target);
    auto laid = simulate(*c.loaded.module, true, false, *target);
    auto edges = simulate(*c.loaded.module, true, true, *target);
    if (!plain || !laid || !edges) {
      std::printf("  %s: does not compile\n", c.name.c_str());
      continue;
    }
    auto us = [&](const Timed& x) { return static_cast<double>(x.cycles) / clockHz * 1e6; };
    std::printf("  %s:\n    row-major default            %9.1f us (%zu kernels)\n"
                "    assigned layouts             %9.1f us (%zu kernels)  %.3fx the default\n"
                "    assigned + physical edges    %9.1f us (%zu kernels, %zu edge relayouts, %llu padding bytes)  "
                "%.3fx the default\n",
                c.name.c_str(), us(*plain), plain->kernels, us(*laid), laid->kernels, us(*laid) / us(*plain),
                us(*edges), edges->kernels, edges->relayouts, static_cast<unsigned long long>(edges->padding),
                us(*edges) / us(*plain));
  }
  return 0;
}
