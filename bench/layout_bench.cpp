// Layout assignment benchmark: the time `layout-assignment` takes on
// generated modules of about 2k, 20k and 200k instructions (a chain of
// transposed dots, bias adds and reshapes) with the ratios between sizes
// (linear time gives about 10), on the largest corpus module, and the
// copies it inserts and transposes it makes free on the workloads and
// models, all in one run, in process CPU time.
//
//   layout_bench
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/layout/layout_assignment.h"
#include "support/file_io.h"

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

struct Run {
  double seconds = 1e30;
  tpu::passes::layout::LayoutReport report;
};

Run timeLayout(const tpu::hlo::Module& module, int runs) {
  Run best;
  for (int r = 0; r < runs; ++r) {
    std::unique_ptr<tpu::hlo::Module> copy = tpu::passes::cloneModule(module);
    tpu::passes::layout::LayoutReport report;
    tpu::passes::layout::LayoutOptions options;
    options.report = &report;
    tpu::DiagnosticEngine diags;
    double start = cpuSeconds();
    tpu::passes::layout::LayoutAssignmentPass(options).run(*copy, diags);
    double t = cpuSeconds() - start;
    if (t < best.seconds) best.seconds = t, best.report = report;
    (void)copy.release();  // teardown is not the pass's time
  }
  return best;
}

tpu::hlo::LoadedModule load(const std::string& path) {
  tpu::DiagnosticEngine diags;
  auto source = tpu::readInputFile(path, diags);
  if (!source) return {};
  return tpu::hlo::readModule(std::shared_ptr<tpu::SourceFile>(std::move(source)), diags);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("layout-assignment on generated chains (fastest of 3, CPU time):\n");
  double perInst[3] = {};
  int sizes[3] = {200, 2000, 20000};
  for (int k = 0; k < 3; ++k) {
    tpu::DiagnosticEngine diags;
    auto loaded = tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("chain.hlo", chain(sizes[k])), diags);
    if (!loaded.module) return 1;
    int64_t n = countInstructions(*loaded.module);
    Run r = timeLayout(*loaded.module, k == 2 ? 1 : 3);
    perInst[k] = r.seconds / static_cast<double>(n);
    std::printf("  %7lld instructions: %8.2f ms  %6.3f us/instruction  copies %lld, transposes free %lld, "
                "reshapes free %lld\n",
                static_cast<long long>(n), r.seconds * 1e3, perInst[k] * 1e6, static_cast<long long>(r.report.copies),
                static_cast<long long>(r.report.freeTransposes), static_cast<long long>(r.report.freeReshapes));
  }
  std::printf("  time ratio 10x/1x: %.1f and %.1f (linear: 10)\n", perInst[1] / perInst[0] * 10,
              perInst[2] / perInst[1] * 10);

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
  return 0;
}
