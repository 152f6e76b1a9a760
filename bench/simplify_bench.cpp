// Simplification pipeline benchmark: the time `simplify` takes on the
// largest corpus module (target: well under 100 ms) and on generated
// modules of about 10k and 100k instructions, with the 100k/10k ratio
// (linear time gives about 10), all in one run, in process CPU time.
//
//   simplify_bench [FILE.hlo]
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/driver/registry.h"
#include "passes/pass.h"
#include "passes/simplify/simplify.h"
#include "passes/testing/differential.h"
#include "passes/testing/random_hlo.h"
#include "support/file_io.h"

namespace {

// Process CPU time: the machine is shared, and wall time then measures the
// neighbours as much as this code.
double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
using tpu::passes::testing::countInstructions;

// The module keeps pointers into its source: both travel together.
tpu::hlo::LoadedModule parse(std::shared_ptr<tpu::SourceFile> source) {
  tpu::DiagnosticEngine diags;
  return tpu::hlo::readModule(std::move(source), diags);
}

struct Timing {
  double seconds = 1e30;  // fastest run
  int rounds = 0;         // of the fixed point, the confirming one included
  int64_t after = 0;      // instructions left
};

// The pipeline on a copy of `module`, fastest of `runs` (other work on a
// shared machine lands in some runs, not others).
Timing timeSimplify(const tpu::hlo::Module& module, int runs) {
  Timing t;
  for (int r = 0; r < runs; ++r) {
    std::unique_ptr<tpu::hlo::Module> copy = tpu::passes::cloneModule(module);
    std::unique_ptr<tpu::passes::PassPipeline> pipeline = tpu::passes::simplify::createSimplifyPipeline();
    tpu::DiagnosticEngine diags;
    double start = cpuSeconds();
    pipeline->run(*copy, diags);
    t.seconds = std::min(t.seconds, cpuSeconds() - start);
    t.rounds = pipeline->roundsRun();
    t.after = countInstructions(*copy);
  }
  return t;
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
  Timing c = timeSimplify(*corpus, 5);
  std::printf("simplify on %s: %lld -> %lld instructions in %.2f ms (%d rounds)\n",
              std::filesystem::path(path).filename().c_str(), static_cast<long long>(countInstructions(*corpus)),
              static_cast<long long>(c.after), c.seconds * 1e3, c.rounds);

  double perInstruction[2] = {0, 0}, perInstructionRound[2] = {0, 0};
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
    Timing t = timeSimplify(*module, k == 0 ? 5 : 2);
    perInstruction[k] = t.seconds / static_cast<double>(before);
    perInstructionRound[k] = perInstruction[k] / t.rounds;
    std::printf("simplify on a generated module: %lld -> %lld instructions in %.1f ms, %d rounds "
                "(%.2f us per instruction, %.2f per instruction and round)\n",
                static_cast<long long>(before), static_cast<long long>(t.after), t.seconds * 1e3, t.rounds,
                perInstruction[k] * 1e6, perInstructionRound[k] * 1e6);
  }
  std::printf("time per instruction, 100k / 10k: %.2f; per instruction and round: %.2f (1.0 = linear)\n",
              perInstruction[1] / perInstruction[0], perInstructionRound[1] / perInstructionRound[0]);
  return 0;
}
