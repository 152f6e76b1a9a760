// What a file is, from its first bytes: every tool reads files of a few
// kinds (HLO text or .hlob, LLO text or .tpu, .npy tensors, target JSON), and
// a file of the wrong kind should be named as what it is ("this is TPU
// machine code") rather than fail deep inside a parser ("NUL byte in input").
// The binary formats are told apart by their magic numbers (the constants
// below are the single definition the format readers use); the text formats
// by their first token after comments.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "support/container.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu {

inline constexpr Magic kHlobMagic = {'\x89', 'H', 'L', 'O', 'B', '\r', '\n', '\x1a'};
inline constexpr Magic kTpuMagic = {'T', 'P', 'U', 'C', 'O', 'D', 'E', '\0'};
inline constexpr std::string_view kNpyMagic = "\x93NUMPY";

enum class FileKind {
  Empty,
  HloText,        // first token `HloModule`
  Hlob,           // binary HLO
  LloText,        // first token a `.directive` (LLO assembly)
  Tpu,            // TPU machine code
  Npy,            // a NumPy array
  Json,           // first character `{` or `[` (target descriptions, stats)
  Zip,            // zip archives, NumPy's .npz among them
  Elf,            // an executable or shared library
  Zstd,           // zstd-compressed data
  Gzip,           // gzip-compressed data
  UnknownBinary,  // NUL bytes near the start, no known magic
  UnknownText,    // anything else: left to the parser to judge
};

FileKind detectFileKind(std::string_view contents);

// "HLO text", "binary HLO (.hlob)", "TPU machine code (.tpu)", ...
std::string_view fileKindName(FileKind kind);

// Checks that `file` is of one of the `accepted` kinds (UnknownText always
// passes: a text file that is not recognisably anything else goes to the
// parser, which reports precisely what is wrong with it). Otherwise reports
// "this is <kind>, not <expected>" with a hint on what to do with such a
// file (or `hint` when given), and returns false. `expected` reads like "an
// HLO module (text or .hlob)".
bool checkFileKind(const SourceFile& file, std::initializer_list<FileKind> accepted,
                   std::string_view expected, DiagnosticEngine& diags, std::string_view hint = {});

}  // namespace tpu
