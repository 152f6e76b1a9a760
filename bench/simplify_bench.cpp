// Simplification pipeline benchmark: the time `simplify` takes on the
// largest corpus module (target: well under 100 ms) and on generated
// modules of about 10k and 100k instructions, with the 100k/10k ratio
// (linear time gives about 10), all in one run.
//
//   simplify_bench [FILE.hlo]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/driver/registry.h"
#include "passes/pass.h"
#include "passes/testing/differential.h"
#include "passes/testing/random_hlo.h"
#include "support/file_io.h"

namespace {

using Clock = std::chrono::steady_clock;
using tpu::passes::testing::countInstructions;

// The module keeps pointers into its source: both travel together.
tpu::hlo::LoadedModule parse(std::shared_ptr<tpu::SourceFile> source) {
  tpu::DiagnosticEngine diags;
  return tpu::hlo::readModule(std::move(source), diags);
}

// Seconds the pipeline takes on a copy of `module`, fastest of `runs`
// (other work on a shared machine lands in some runs, not others).
double timeSimplify(const tpu::hlo::Module& module, int runs, int64_t* instructionsAfter) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    std::unique_ptr<tpu::hlo::Module> copy = tpu::passes::cloneModule(module);
    tpu::passes::PassManagerOptions options;
    options.verifyAfterEach = false;
    tpu::passes::PassManager pm(options, nullptr, nullptr);
    tpu::DiagnosticEngine diags;
    pm.addPipeline("simplify", diags);
    auto start = Clock::now();
    pm.run(*copy, diags);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    *instructionsAfter = countInstructions(*copy);
  }
  return best;
}

std::string largestCorpusModule() {
  std::string best;
  uintmax_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR))
    if (e.path().extension() == ".hlo" && e.file_size() > size) size = e.file_size(), best = e.path().string();
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  tpu::passes::registerAllPasses();
  std::string path = argc > 1 ? argv[1] : largestCorpusModule();
  tpu::DiagnosticEngine diags;
  std::unique_ptr<tpu::SourceFile> file = tpu::readInputFile(path, diags);
  tpu::hlo::LoadedModule loaded;
  if (file) loaded = parse(std::shared_ptr<tpu::SourceFile>(std::move(file)));
  tpu::hlo::Module* corpus = loaded.module.get();
  if (!corpus) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  int64_t after = 0;
  double corpusSeconds = timeSimplify(*corpus, 5, &after);
  std::printf("simplify on %s: %lld -> %lld instructions in %.2f ms\n",
              std::filesystem::path(path).filename().c_str(), static_cast<long long>(countInstructions(*corpus)),
              static_cast<long long>(after), corpusSeconds * 1e3);

  double perInstruction[2] = {0, 0};
  const int sizes[2] = {10000, 100000};
  for (int k = 0; k < 2; ++k) {
    tpu::passes::testing::RandomHloOptions options;
    options.instructions = sizes[k];
    auto source = std::make_shared<tpu::SourceFile>("generated.hlo", tpu::passes::testing::generateRandomHlo(1, options));
    tpu::hlo::LoadedModule generated = parse(source);
    tpu::hlo::Module* module = generated.module.get();
    if (!module) {
      std::fprintf(stderr, "generated module of %d does not parse\n", sizes[k]);
      return 1;
    }
    int64_t before = countInstructions(*module);
    double seconds = timeSimplify(*module, k == 0 ? 5 : 2, &after);
    perInstruction[k] = seconds / static_cast<double>(before);
    std::printf("simplify on a generated module: %lld -> %lld instructions in %.1f ms (%.2f us per instruction)\n",
                static_cast<long long>(before), static_cast<long long>(after), seconds * 1e3,
                perInstruction[k] * 1e6);
  }
  std::printf("time per instruction, 100k / 10k: %.2f (1.0 = linear)\n", perInstruction[1] / perInstruction[0]);
  return 0;
}
