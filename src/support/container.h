// The binary container shared by .hlob (HLO) and .tpu (machine code): a fixed
// header (magic, format version, sizes, CRC-32 of header and payload) followed
// by a zstd-compressed payload. Format-specific encoders fill the payload.
//
//   offset size field
//        0    8 magic (caller-defined)
//        8    2 format major version (readers reject a newer major)
//       10    2 format minor version (additions readers may ignore)
//       12    4 flags: bit 0 = payload is zstd-compressed
//       16    8 uncompressed payload size
//       24    8 stored payload size
//       32    4 CRC-32 of the stored payload
//       36    4 CRC-32 of bytes 0..35
//       40      payload
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/diagnostics.h"

namespace tpu {

using Magic = std::array<char, 8>;

struct ContainerVersion {
  uint16_t major = 1;
  uint16_t minor = 0;
};

constexpr size_t kContainerHeaderSize = 40;

// CRC-32 (IEEE 802.3 polynomial, as zlib computes it).
uint32_t crc32(std::string_view data, uint32_t seed = 0);

bool hasMagic(std::string_view data, const Magic& magic);

// Wraps `payload`; level 0 stores it uncompressed.
std::string packContainer(const Magic& magic, ContainerVersion version, std::string_view payload,
                          int zstdLevel = 3);

struct UnpackedContainer {
  ContainerVersion version;
  std::string payload;
  size_t payloadOffset = kContainerHeaderSize;  // where the stored payload starts in the file
};

// Checks magic, version, sizes and checksums and decompresses. Errors are
// reported against `file` (a binary SourceFile) with byte offsets. The payload
// is decompressed into `buffer`'s storage: a reader that loads many files can
// hand the previous payload back in and skip allocating (and page-faulting
// in) a fresh buffer each time.
std::optional<UnpackedContainer> unpackContainer(const SourceFile& file, const Magic& magic,
                                                 uint16_t supportedMajor, std::string_view formatName,
                                                 DiagnosticEngine& diags, std::string buffer = {});

}  // namespace tpu
