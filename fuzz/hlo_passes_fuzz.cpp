// Fuzz target: the simplification pipeline on any module that parses and
// verifies, with the verifier after every pass run (--verify-each). A pass
// that crashes, trips a sanitizer, hangs or leaves a module that does not
// verify (or does not print and re-parse) is a finding. Seed it with the
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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;  // corpus modules are smaller; keep runs fast
  auto source = std::make_shared<tpu::SourceFile>("fuzz.hlo", std::string(reinterpret_cast<const char*>(data), size));
  tpu::DiagnosticEngine diags;
  tpu::hlo::LoadedModule loaded = tpu::hlo::readModule(source, diags);
  if (!loaded.module) return 0;
  tpu::passes::registerAllPasses();
  tpu::passes::PassManagerOptions options;
  options.verifyEach = true;
  tpu::passes::PassManager pm(options, nullptr, verify);
  tpu::DiagnosticEngine passDiags;
  if (!pm.addPipeline("simplify", passDiags)) __builtin_trap();
  if (!pm.run(*loaded.module, passDiags)) __builtin_trap();  // a pass broke the IR (or reported an error)
  std::string printed = tpu::hlo::writeModule(*loaded.module, tpu::hlo::HloEncoding::Text);
  tpu::DiagnosticEngine again;
  if (!tpu::hlo::readModule(std::make_shared<tpu::SourceFile>("printed.hlo", printed), again).module) __builtin_trap();
  return 0;
}
