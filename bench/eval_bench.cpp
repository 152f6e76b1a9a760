// Reference interpreter speed, in one run: a 1024x1024x1024 f32 dot (on the
// host's hardware threads) against numpy (Debian's python3 with OpenBLAS,
// single-threaded and default threads), and the ssd_mobilenet_tf forward pass.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "eval/evaluator.h"
#include "runner/run.h"
#include "runner/tensor_io.h"
#include "support/file_io.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::unique_ptr<tpu::hlo::Module> load(const std::string& name, const std::string& text, tpu::DiagnosticEngine& d) {
  return tpu::runner::loadModule(std::make_shared<tpu::SourceFile>(name, text), d);
}

// Best of `reps` evaluations; -1 on failure.
double timeEval(const tpu::hlo::Module& m, uint64_t seed, int reps, tpu::DiagnosticEngine& d) {
  tpu::runner::RunOptions ro;
  ro.seed = seed;
  auto args = tpu::runner::prepareArguments(m, ro, d);
  if (!args) return -1;
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto r = tpu::eval::evaluate(m, *args, {}, d);
    auto t1 = Clock::now();
    if (!r) return -1;
    best = std::min(best, seconds(t0, t1));
  }
  return best;
}

double numpyDot(const char* threads) {
  std::string cmd = fmt::format(
      "{}/usr/bin/python3 -c \"import time, numpy as np; r = np.random.default_rng(0); "
      "a = r.random((1024, 1024), dtype=np.float32); b = r.random((1024, 1024), dtype=np.float32); a @ b; "
      "t = min((lambda s: (a @ b, time.perf_counter() - s)[1])(time.perf_counter()) for _ in range(5)); print(t)\" 2>/dev/null",
      threads ? fmt::format("OPENBLAS_NUM_THREADS={} ", threads) : "");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double t = -1;
  if (std::fscanf(p, "%lf", &t) != 1) t = -1;
  pclose(p);
  return t;
}

}  // namespace

int main() {
  tpu::DiagnosticEngine diags;
  diags.setConsumer([](const tpu::Diagnostic& x) {
    if (x.severity == tpu::Severity::Error) std::fputs(tpu::formatDiagnostic(x, tpu::DiagnosticFormat::Text, false).c_str(), stderr);
  });
  const char* dotText =
      "HloModule dot\n\nENTRY main {\n  a = f32[1024,1024] parameter(0)\n  b = f32[1024,1024] parameter(1)\n"
      "  ROOT d = f32[1024,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  auto dot = load("dot.hlo", dotText, diags);
  if (!dot) return 1;
  const double flops = 2.0 * 1024 * 1024 * 1024;
  double tDot = timeEval(*dot, 1, 5, diags);
  double np1 = numpyDot("1");
  double npN = numpyDot(nullptr);
  std::printf("dot f32 1024x1024x1024, interpreter (%u threads): %.4f s  %6.1f GFLOP/s\n",
              std::max(1u, std::thread::hardware_concurrency()), tDot, flops / tDot * 1e-9);
  if (np1 > 0) {
    std::printf("dot f32 1024x1024x1024, numpy OpenBLAS 1 thread: %.4f s  %6.1f GFLOP/s  (interpreter %.2fx its time)\n",
                np1, flops / np1 * 1e-9, tDot / np1);
    std::printf("dot f32 1024x1024x1024, numpy OpenBLAS default:  %.4f s  %6.1f GFLOP/s  (interpreter %.2fx its time)\n",
                npN, flops / npN * 1e-9, tDot / npN);
  } else {
    std::printf("numpy: not available (/usr/bin/python3 with numpy)\n");
  }
  auto file = tpu::readInputFile(std::string(TPU_CORPUS_DIR) + "/ssd_mobilenet_tf.hlo", diags);
  if (!file) return 1;
  auto ssd = load("ssd_mobilenet_tf.hlo", std::string(file->contents()), diags);
  if (!ssd) return 1;
  double tSsd = timeEval(*ssd, 1, 3, diags);
  std::printf("ssd_mobilenet_tf forward (seeded inputs, elided weights filled): %.3f s\n", tSsd);
  return tDot < 0 || tSsd < 0 ? 1 : 0;
}
