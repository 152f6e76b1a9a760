// NumPy .npy files (format versions 1.0, 2.0 and 3.0): the tensor exchange
// format of tpu-run. Only plain C-order arrays of the numeric dtypes below;
// anything else (Fortran order, structured or object dtypes, bad headers,
// truncated data) is reported through the DiagnosticEngine with a byte
// offset, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu {

enum class NpyDType : uint8_t { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, F32, F64, C64, C128 };

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;  // empty: a scalar
  std::string data;            // C order, little-endian element bytes

  int64_t elementCount() const;
};

// Bytes per element (c64 = 8, c128 = 16).
size_t npyDTypeSize(NpyDType dtype);
// Descriptor as written: "|b1", "<i4", "<f2", "<c8", ...
std::string npyDTypeDescr(NpyDType dtype);
// Short name for messages: "bool", "int32", "float16", "complex64", ...
std::string_view npyDTypeName(NpyDType dtype);

// Parses a whole .npy file. Big-endian ('>') data is byte-swapped to little
// endian. Returns nullopt after reporting an error (offsets into `file`,
// which should be marked binary).
std::optional<NpyArray> readNpy(const SourceFile& file, DiagnosticEngine& diags);

// Serialises as version 1.0 (2.0 if the header would not fit). `data` must
// hold elementCount() * npyDTypeSize(dtype) bytes.
std::string writeNpy(const NpyArray& array);

}  // namespace tpu
