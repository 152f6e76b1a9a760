// The .hlob binary encoding of HLO modules: the same IR as the text form,
// written field by field (varints, little-endian) inside the support/
// container.h envelope (magic, version, CRC-32, zstd). Text -> .hlob -> text
// gives identical text; loading skips all lexing and name resolution.
#pragma once

#include <memory>
#include <string>

#include "hlo/module.h"
#include "support/container.h"
#include "support/diagnostics.h"
#include "support/file_kind.h"
#include "support/source.h"

namespace tpu::hlo {

// "\x89HLOB\r\n\x1a" (defined with the other magic numbers in
// support/file_kind.h): the high byte catches 7-bit transfers, CR LF catches
// line-ending conversion, ^Z stops `type` on Windows (PNG's trick).
using tpu::kHlobMagic;
// Major changes when old readers cannot read new files.
inline constexpr ContainerVersion kHlobVersion = {2, 0};

bool isHlob(std::string_view data);

// zstd level 1: on real modules' payloads (tens to hundreds of KB) it
// compresses as well as level 3 (bert_dp_graph_2: 10,461 bytes against
// 10,628) with match tables a fraction of the size, which a short-lived
// tool pays for in page faults on every write.
std::string writeHlob(const Module& module, int zstdLevel = 1);

// Decodes a .hlob file (marked binary so diagnostics carry byte offsets).
// Returns null after reporting an error. Instructions get no source location.
std::unique_ptr<Module> readHlob(const SourceFile& file, DiagnosticEngine& diags);

}  // namespace tpu::hlo
