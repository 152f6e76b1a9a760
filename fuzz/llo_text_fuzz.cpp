// Fuzz target: LLO assembly. Any input must assemble or give diagnostics;
// an accepted program must print as text that assembles to the same bytes
// (llo-asm's documented round trip), never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "isa/encoding.h"
#include "llo/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu::SourceFile file("fuzz.llo", std::string(reinterpret_cast<const char*>(data), size));
  // A .target line naming a file would read it: the fuzzer stays with the
  // built-in targets.
  if (file.contents().find(".target \"") != std::string_view::npos) return 0;
  tpu::DiagnosticEngine diags;
  tpu::llo::AsmOptions options;
  auto assembled = tpu::llo::assembleLlo(file, options, diags);
  if (!assembled) return 0;
  std::string bytes = tpu::isa::encodeProgram(assembled->program);
  tpu::SourceFile printed("printed.llo", tpu::llo::printLlo(assembled->program));
  tpu::DiagnosticEngine again;
  auto reassembled = tpu::llo::assembleLlo(printed, options, again);
  if (!reassembled || tpu::isa::encodeProgram(reassembled->program) != bytes) __builtin_trap();
  return 0;
}
