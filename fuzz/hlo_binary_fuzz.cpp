// Fuzz target: .hlob decoding. Inputs without the magic are wrapped in a
// valid container so the fuzzer reaches the payload decoder, not only the
// checksum test; an accepted module must print text that parses back.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hlo/binary/binary.h"
#include "hlo/io/hlo_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!tpu::hlo::isHlob(bytes)) bytes = tpu::packContainer(tpu::hlo::kHlobMagic, tpu::hlo::kHlobVersion, bytes, 0);
  auto source = std::make_shared<tpu::SourceFile>("fuzz.hlob", std::move(bytes));
  tpu::DiagnosticEngine diags;
  tpu::hlo::LoadedModule loaded = tpu::hlo::readModule(source, diags);
  if (!loaded.module) return 0;
  // What the reader accepts, the text format must say back (issue 18).
  auto printed = std::make_shared<tpu::SourceFile>(
      "printed.hlo", tpu::hlo::writeModule(*loaded.module, tpu::hlo::HloEncoding::Text));
  tpu::DiagnosticEngine again;
  if (!tpu::hlo::readModule(printed, again).module) __builtin_trap();
  return 0;
}
