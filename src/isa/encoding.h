// The .tpu binary: a support/container.h container (magic "TPUCODE\0") whose
// payload holds the sections header, entries, buffers, dma descriptors, data,
// code (fixed-width bundles), symbols and (1.1) kernel metadata. Layout in
// docs/ISA.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "isa/program.h"
#include "support/container.h"
#include "support/diagnostics.h"
#include "support/file_kind.h"
#include "support/source.h"

namespace tpu::isa {

using tpu::kTpuMagic;  // "TPUCODE\0", defined in support/file_kind.h
// 2.0 renumbers the opcodes: the library rows a TPU has no instruction for
// (f64 log ... atan2, f32 vasin ... vatan2, the complex vmul.c64 ...
// vpow.c128) are gone (llo-gen expands those functions), so every row after
// them moved; 1.x files are refused. The minor versions keep their meaning
// (2.1 with KERN, 2.2 with FILL).
constexpr uint16_t kTpuFormatMajor = 2;
// 1.1 adds the optional KERN section (kernel metadata). A program without
// kernel metadata is written as 1.0, byte for byte as before; a 1.0 reader
// skips KERN, so 1.1 files also load there (without the metadata).
// 1.2 adds the optional FILL section: data blobs that are elided constants
// are written as (element type, seed, count) and left empty in DATA. Only a
// program with such blobs is 1.2 (a 1.1 reader refuses it: its data sizes
// do not match its buffers); others are written as before.
constexpr uint16_t kTpuFormatMinor = 2;

bool isTpuBinary(std::string_view data);

// One op as two 64-bit words: opcode in bits 0..9, operands packed upward
// from bit 10 in table order, unused bits zero.
std::array<uint64_t, 2> encodeInstr(const Instr& instr);
// Fails (returns nullopt and sets `error`) on unknown opcodes, fields out of
// range or non-zero unused bits.
std::optional<Instr> decodeInstr(const std::array<uint64_t, 2>& words, std::string& error);

// Deterministic: the same Program always gives the same bytes.
std::string encodeProgram(const Program& program);
// `file` should be marked binary; errors carry byte offsets.
std::optional<Program> decodeProgram(const SourceFile& file, DiagnosticEngine& diags);

}  // namespace tpu::isa
