// Fuzz target: .npy reading (tpu-run's tensors). Any input must give an
// array whose data matches its shape, or diagnostics.
#include <cstddef>
#include <cstdint>
#include <string>

#include "support/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu::SourceFile file("fuzz.npy", std::string(reinterpret_cast<const char*>(data), size));
  file.setBinary(true);
  tpu::DiagnosticEngine diags;
  auto array = tpu::readNpy(file, diags);
  if (array &&
      array->data.size() != static_cast<size_t>(array->elementCount()) * tpu::npyDTypeSize(array->dtype))
    __builtin_trap();
  if (array) (void)tpu::writeNpy(*array);
  return 0;
}
