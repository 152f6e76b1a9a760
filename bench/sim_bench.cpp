// Simulator benchmark: (a) timing-model efficiency of the example kernels
// (2048^3 bf16 matmul MXU utilization, streaming copy HBM utilization),
// (b) host wall time of simulating the matmul against numpy's f32 matmul of
// the same size measured in the same run, (c) simulated bundles per second.
#include <chrono>
#include <cstdio>
#include <string>

#include "sim/kernels.h"
#include "sim/mxu_kernel.h"
#include "sim/sim.h"
#include "sim/test_util.h"

using namespace tpu;
using namespace tpu::sim;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double numpyMatmulSeconds(int n) {
  std::string cmd = "/usr/bin/python3 -c \"import numpy as np, time\n"
                    "a=np.random.rand(" + std::to_string(n) + "," + std::to_string(n) + ").astype(np.float32)\n"
                    "b=np.random.rand(" + std::to_string(n) + "," + std::to_string(n) + ").astype(np.float32)\n"
                    "a@b\nbest=1e9\nfor i in range(5):\n t=time.perf_counter(); a@b; best=min(best,time.perf_counter()-t)\n"
                    "print(best)\"";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double s = -1;
  if (fscanf(p, "%lf", &s) != 1) s = -1;
  pclose(p);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 2048;
  target::TargetDesc t = testing::loadBuiltin("v5e");
  std::printf("target %s, MXU host kernel: %s\n", t.name.c_str(), std::string(mxuKernelName()).c_str());

  // (a) + (b) + (c): the matmul.
  isa::Program mm = kernels::matmulBf16(t, n, n, n);
  auto a = testing::randomBf16(static_cast<size_t>(n) * n, 1), b = testing::randomBf16(static_cast<size_t>(n) * n, 2);
  std::vector<std::string> in = {testing::toBytes(a), testing::toBytes(b)};
  DiagnosticEngine diags;
  double best = 1e30;
  std::optional<SimResult> r;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    r = simulate(mm, t, in, SimOptions{}, diags);
    best = std::min(best, now() - t0);
    if (!r) {
      std::fprintf(stderr, "simulation failed: %s\n", firstErrorMessage(diags).c_str());
      return 1;
    }
  }
  std::printf("\n== %dx%dx%d bf16 matmul ==\n%s", n, n, n, renderReportText(r->report).c_str());
  double np = numpyMatmulSeconds(n);
  std::printf("MXU utilization          %.2f%% (goal >= 90%%)\n", 100 * r->report.mxuUtilization);
  std::printf("simulation wall time     %.3f s (best of 3)\n", best);
  std::printf("numpy f32 matmul         %.3f s (best of 5, OpenBLAS)\n", np);
  std::printf("ratio sim / numpy        %.2fx (goal <= 3x)\n", np > 0 ? best / np : -1.0);
  std::printf("bundles per second       %.3g (%llu bundles)\n", r->report.bundles / best,
              static_cast<unsigned long long>(r->report.bundles));

  // Streaming copy: 64 MiB in 1 MiB chunks, 4 buffers.
  uint64_t bytes = 64ull << 20;
  isa::Program cp = kernels::streamingCopy(t, bytes, 1 << 20, 4);
  std::vector<uint8_t> x(bytes, 7);
  double t0 = now();
  auto rc = simulate(cp, t, {testing::toBytes(x)}, SimOptions{}, diags);
  double copyWall = now() - t0;
  if (!rc) {
    std::fprintf(stderr, "simulation failed: %s\n", firstErrorMessage(diags).c_str());
    return 1;
  }
  std::printf("\n== streaming copy 64 MiB ==\n%s", renderReportText(rc->report).c_str());
  std::printf("HBM utilization          %.2f%% (goal >= 90%%)\n", 100 * rc->report.hbmUtilization);
  std::printf("simulation wall time     %.3f s\n", copyWall);
  return 0;
}
