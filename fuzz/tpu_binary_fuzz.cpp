// Fuzz target: .tpu machine code decoding and checking. Inputs without the
// magic are wrapped in a valid container so the fuzzer reaches the payload
// decoder, not only the checksum test.
#include <cstddef>
#include <cstdint>
#include <string>

#include "isa/encoding.h"
#include "isa/verify.h"
#include "llo/text.h"
#include "target/target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!tpu::isa::isTpuBinary(bytes))
    bytes = tpu::packContainer(tpu::isa::kTpuMagic, {tpu::isa::kTpuFormatMajor, tpu::isa::kTpuFormatMinor},
                               bytes, 0);
  tpu::SourceFile file("fuzz.tpu", std::move(bytes));
  file.setBinary(true);
  tpu::DiagnosticEngine diags;
  auto program = tpu::isa::decodeProgram(file, diags);
  if (!program) return 0;
  auto target = tpu::target::loadTarget("v5e", diags);
  if (target) (void)tpu::isa::verifyProgram(*program, &*target, diags);
  (void)tpu::llo::printLlo(*program);
  return 0;
}
