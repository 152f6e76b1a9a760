#include "support/file_kind.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpu {

namespace {

bool startsWith(std::string_view data, std::string_view prefix) {
  return data.substr(0, prefix.size()) == prefix;
}

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The first token of a text after blanks and `//` and `/* */` comments
// (both HLO and LLO text allow `//`; HLO also `/* */`).
std::string_view firstToken(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (isBlank(text[i])) {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (text.substr(i, 2) == "/*") {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  size_t end = i;
  while (end < text.size() && !isBlank(text[end]) && text[end] != '{' && text[end] != ',') ++end;
  return text.substr(i, end - i);
}

// Control bytes in the first few bytes, or a NUL in the first line: a text
// file with a stray NUL further on is still text (its parser points at it).
bool looksBinary(std::string_view data) {
  for (unsigned char c : data.substr(0, 8))
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c == 0x7f) return true;
  std::string_view firstLine = data.substr(0, std::min<size_t>(data.find('\n'), 4096));
  return firstLine.find('\0') != std::string_view::npos;
}

// `{` then a key or `}`, or `[`: LLO bundles also start with `{`, but with an op.
bool looksLikeJson(std::string_view data) {
  size_t first = data.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return false;
  if (data[first] == '[') return true;
  if (data[first] != '{') return false;
  size_t next = data.find_first_not_of(" \t\r\n", first + 1);
  return next != std::string_view::npos && (data[next] == '"' || data[next] == '}');
}

bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// What to do with a file of `kind` instead.
std::string_view hintFor(FileKind kind) {
  switch (kind) {
    case FileKind::HloText:
    case FileKind::Hlob:
      return "lower it with llo-gen, or run it with tpu-run";
    case FileKind::LloText:
      return "assemble it with llo-asm, or run it with tpu-run";
    case FileKind::Tpu:
      return "disassemble it with llo-asm, or run it with tpu-run";
    case FileKind::Npy:
      return "tensors go to tpu-run as --input=@FILE.npy";
    case FileKind::Zip:
      return "save each array of an .npz archive as its own .npy";
    case FileKind::Zstd:
    case FileKind::Gzip:
      return "decompress it first";
    default:
      return {};
  }
}

std::string leadingBytes(std::string_view data) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(data.size(), 8); ++i)
    out += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(data[i]));
  return out;
}

}  // namespace

FileKind detectFileKind(std::string_view data) {
  if (data.empty()) return FileKind::Empty;
  if (hasMagic(data, kHlobMagic)) return FileKind::Hlob;
  if (hasMagic(data, kTpuMagic)) return FileKind::Tpu;
  if (startsWith(data, kNpyMagic)) return FileKind::Npy;
  if (startsWith(data, "PK\x03\x04") || startsWith(data, "PK\x05\x06")) return FileKind::Zip;
  if (startsWith(data,
                 "\x7f"
                 "ELF"))
    return FileKind::Elf;
  if (startsWith(data, "\x28\xb5\x2f\xfd")) return FileKind::Zstd;
  if (startsWith(data, "\x1f\x8b")) return FileKind::Gzip;
  if (looksBinary(data)) return FileKind::UnknownBinary;
  if (looksLikeJson(data)) return FileKind::Json;
  std::string_view token = firstToken(data);
  if (token == "HloModule") return FileKind::HloText;
  if (token.size() >= 2 && token[0] == '.' && isLetter(token[1])) return FileKind::LloText;
  return FileKind::UnknownText;
}

std::string_view fileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::Empty:
      return "an empty file";
    case FileKind::HloText:
      return "HLO text";
    case FileKind::Hlob:
      return "binary HLO (.hlob)";
    case FileKind::LloText:
      return "LLO assembly (.llo)";
    case FileKind::Tpu:
      return "TPU machine code (.tpu)";
    case FileKind::Npy:
      return "a NumPy array (.npy)";
    case FileKind::Json:
      return "JSON";
    case FileKind::Zip:
      return "a zip archive (such as NumPy's .npz)";
    case FileKind::Elf:
      return "an ELF executable or library";
    case FileKind::Zstd:
      return "zstd-compressed data";
    case FileKind::Gzip:
      return "gzip-compressed data";
    case FileKind::UnknownBinary:
      return "binary data of an unknown kind";
    case FileKind::UnknownText:
      return "text";
  }
  return "unknown";
}

bool checkFileKind(const SourceFile& file, std::initializer_list<FileKind> accepted,
                   std::string_view expected, DiagnosticEngine& diags, std::string_view hint) {
  FileKind kind = detectFileKind(file.contents());
  if (kind == FileKind::UnknownText || std::find(accepted.begin(), accepted.end(), kind) != accepted.end())
    return true;
  std::string message = fmt::format("this is {}, not {}", fileKindName(kind), expected);
  if (kind == FileKind::UnknownBinary)
    message += fmt::format(" (it starts with bytes {})", leadingBytes(file.contents()));
  if (hint.empty()) hint = hintFor(kind);
  if (!hint.empty()) message += fmt::format("; {}", hint);
  diags.error(std::move(message), file.name());
  return false;
}

}  // namespace tpu
