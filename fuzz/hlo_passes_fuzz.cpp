// Fuzz target: the simplification pipeline on any module that parses and
// verifies, with the verifier after every pass run (--verify-each), and one
// of its passes alone (chosen by the input's size: the pipeline's dce can
// hide what a pass leaves behind). A pass that crashes, trips a sanitizer,
// hangs or leaves a module that does not verify (or does not print and
// re-parse) is a finding. Seed it with the
// corpus: `hlo_passes_fuzz fuzz/corpus/passes ../shared/corpus`.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hlo/io/hlo_io.h"
#include "passes/driver/registry.h"
#include "passes/pass.h"

namespace {

bool verify(const tpu::hlo::Module& m, tpu::DiagnosticEngine& d) { return tpu::hlo::verifyLoadedModule(m, d); }

}  // namespace

namespace {

// Runs `pipeline` on a fresh parse of `text` (which verified once) and traps
// on any failure.
void runAndCheck(const std::string& text, const std::string& pipeline) {
  auto source = std::make_shared<tpu::SourceFile>("fuzz.hlo", text);
  tpu::DiagnosticEngine diags;
  tpu::hlo::LoadedModule loaded = tpu::hlo::readModule(source, diags);
  if (!loaded.module) __builtin_trap();  // parsed the first time
  tpu::passes::PassManagerOptions options;
  options.verifyEach = true;
  tpu::passes::PassManager pm(options, nullptr, verify);
  tpu::DiagnosticEngine passDiags;
  if (!pm.addPipeline(pipeline, passDiags)) __builtin_trap();
  if (!pm.run(*loaded.module, passDiags)) __builtin_trap();  // a pass broke the IR (or reported an error)
  std::string printed = tpu::hlo::writeModule(*loaded.module, tpu::hlo::HloEncoding::Text);
  tpu::DiagnosticEngine again;
  if (!tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("printed.hlo", printed), again).module) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;  // corpus modules are smaller; keep runs fast
  std::string text(reinterpret_cast<const char*>(data), size);
  {
    tpu::DiagnosticEngine diags;
    if (!tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("fuzz.hlo", text), diags).module) return 0;
  }
  tpu::passes::registerAllPasses();
  static const char* const kAlone[] = {"algsimp",        "algsimp-layout", "constant-folding", "cse",
                                       "tuple-simplify", "call-inline",    "while-simplify",   "zero-elements"};
  runAndCheck(text, "simplify");
  runAndCheck(text, kAlone[size % (sizeof(kAlone) / sizeof(kAlone[0]))]);
  return 0;
}
