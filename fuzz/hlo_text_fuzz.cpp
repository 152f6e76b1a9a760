// Fuzz target: HLO text parsing, verification and printing. Any input must
// give either a module that prints and re-parses, or diagnostics: never a
// crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hlo/io/hlo_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = std::make_shared<tpu::SourceFile>("fuzz.hlo", std::string(reinterpret_cast<const char*>(data), size));
  tpu::DiagnosticEngine diags;
  tpu::hlo::LoadedModule loaded = tpu::hlo::readModule(source, diags);
  if (loaded.module) {
    std::string printed = tpu::hlo::writeModule(*loaded.module, tpu::hlo::HloEncoding::Text);
    auto again = std::make_shared<tpu::SourceFile>("printed.hlo", printed);
    tpu::DiagnosticEngine diags2;
    tpu::hlo::LoadedModule reparsed = tpu::hlo::readModule(again, diags2);
    if (!reparsed.module) __builtin_trap();  // the printer wrote text the parser rejects
  }
  return 0;
}
