#include "support/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "support/file_kind.h"

namespace tpu {

namespace {

constexpr std::string_view kMagic = kNpyMagic;
// numpy refuses headers beyond this by default; so do we (hostile sizes).
constexpr size_t kMaxHeaderLength = 1 << 20;

struct DTypeRow {
  NpyDType dtype;
  char kind;  // numpy kind character
  int size;
  std::string_view name;
};

constexpr DTypeRow kDTypes[] = {
    {NpyDType::Bool, 'b', 1, "bool"},      {NpyDType::I8, 'i', 1, "int8"},
    {NpyDType::I16, 'i', 2, "int16"},      {NpyDType::I32, 'i', 4, "int32"},
    {NpyDType::I64, 'i', 8, "int64"},      {NpyDType::U8, 'u', 1, "uint8"},
    {NpyDType::U16, 'u', 2, "uint16"},     {NpyDType::U32, 'u', 4, "uint32"},
    {NpyDType::U64, 'u', 8, "uint64"},     {NpyDType::F16, 'f', 2, "float16"},
    {NpyDType::F32, 'f', 4, "float32"},    {NpyDType::F64, 'f', 8, "float64"},
    {NpyDType::C64, 'c', 8, "complex64"},  {NpyDType::C128, 'c', 16, "complex128"},
};

const DTypeRow& row(NpyDType dtype) { return kDTypes[static_cast<int>(dtype)]; }

// A parsed value of the header dictionary.
struct HeaderValue {
  enum Kind { String, Bool, Tuple, Other } kind = Other;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

// Parser for the Python dict literal numpy writes, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, size_t base) : text_(text), base_(base) {}

  bool parse(std::vector<std::pair<std::string, HeaderValue>>& out) {
    skipSpace();
    if (!consume('{')) return fail("expected '{' at the start of the header dictionary");
    skipSpace();
    while (!peek('}')) {
      HeaderValue key;
      if (!parseValue(key)) return false;
      if (key.kind != HeaderValue::String) return fail("header dictionary keys must be strings");
      skipSpace();
      if (!consume(':')) return fail("expected ':' after a header key");
      skipSpace();
      HeaderValue value;
      if (!parseValue(value)) return false;
      out.push_back({key.text, std::move(value)});
      skipSpace();
      if (consume(',')) {
        skipSpace();
        continue;
      }
      if (!peek('}')) return fail("expected ',' or '}' in the header dictionary");
    }
    consume('}');
    skipSpace();
    if (pos_ != text_.size()) return fail("unexpected text after the header dictionary");
    return true;
  }

  const std::string& error() const { return error_; }
  size_t errorOffset() const { return base_ + errorPos_; }

 private:
  bool parseValue(HeaderValue& v) {
    if (pos_ >= text_.size()) return fail("unexpected end of the header");
    char c = text_[pos_];
    if (c == '\'' || c == '"') {
      ++pos_;
      v.kind = HeaderValue::String;
      while (pos_ < text_.size() && text_[pos_] != c) {
        if (text_[pos_] == '\\') return fail("escapes in header strings are not supported");
        v.text += text_[pos_++];
      }
      if (!consume(c)) return fail("unterminated string in the header");
      return true;
    }
    if (c == '(') {
      ++pos_;
      v.kind = HeaderValue::Tuple;
      skipSpace();
      while (!peek(')')) {
        size_t start = pos_;
        if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
        size_t digits = pos_;
        int64_t value = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          if (value > (INT64_MAX - 9) / 10) return fail("dimension size is too large");
          value = value * 10 + (text_[pos_++] - '0');
        }
        if (pos_ == digits) return fail("expected an integer in the shape tuple");
        if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long suffix
        if (text_[start] == '-') return failAt(start, "negative dimension size in the shape");
        v.ints.push_back(value);
        skipSpace();
        if (consume(',')) {
          skipSpace();
          continue;
        }
        if (!peek(')')) return fail("expected ',' or ')' in the shape tuple");
      }
      consume(')');
      return true;
    }
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      v.kind = HeaderValue::Bool;
      v.flag = true;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      v.kind = HeaderValue::Bool;
      return true;
    }
    if (c == '[') return fail("structured dtypes (a list descriptor) are not supported");
    return fail(fmt::format("unexpected character '{}' in the header", printable(c)));
  }

  static std::string printable(char c) {
    if (std::isprint(static_cast<unsigned char>(c))) return std::string(1, c);
    return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r'))
      ++pos_;
  }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool consume(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool fail(std::string message) { return failAt(pos_, std::move(message)); }
  bool failAt(size_t at, std::string message) {
    if (error_.empty()) {
      error_ = std::move(message);
      errorPos_ = at;
    }
    return false;
  }

  std::string_view text_;
  size_t base_;
  size_t pos_ = 0;
  std::string error_;
  size_t errorPos_ = 0;
};

// Maps a numpy descriptor ("<f4", "|b1", "?", ">i8", ...) to our dtype.
// Sets `bigEndian` when the data must be byte-swapped.
std::optional<NpyDType> parseDescr(std::string_view descr, bool& bigEndian, std::string& why) {
  bigEndian = false;
  if (descr == "?" || descr == "|?" || descr == "b1" || descr == "|b1") return NpyDType::Bool;
  std::string_view rest = descr;
  char order = '=';
  if (!rest.empty() && (rest[0] == '<' || rest[0] == '>' || rest[0] == '|' || rest[0] == '=')) {
    order = rest[0];
    rest.remove_prefix(1);
  }
  if (rest.empty()) {
    why = "unrecognised dtype descriptor";
    return std::nullopt;
  }
  char kind = rest[0];
  switch (kind) {
    case 'O': why = "object arrays (pickled Python objects) are not supported"; return std::nullopt;
    case 'V': why = "void/structured dtypes are not supported"; return std::nullopt;
    case 'U':
    case 'S':
    case 'a': why = "string dtypes are not supported"; return std::nullopt;
    case 'M':
    case 'm': why = "datetime dtypes are not supported"; return std::nullopt;
    default: break;
  }
  int size = 0;
  for (char c : rest.substr(1)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || size > 1000) {
      why = "unrecognised dtype descriptor";
      return std::nullopt;
    }
    size = size * 10 + (c - '0');
  }
  for (const DTypeRow& r : kDTypes) {
    if (r.kind == kind && r.size == size) {
      bigEndian = order == '>' && size > 1;
      return r.dtype;
    }
  }
  if (kind == 'f') why = "only float16, float32 and float64 are supported";
  else if (kind == 'c') why = "only complex64 and complex128 are supported";
  else if (kind == 'i' || kind == 'u' || kind == 'b') why = "unsupported integer size";
  else why = "unrecognised dtype descriptor";
  return std::nullopt;
}

void byteSwap(std::string& data, size_t componentSize) {
  for (size_t i = 0; i + componentSize <= data.size(); i += componentSize)
    std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i),
                 data.begin() + static_cast<std::ptrdiff_t>(i + componentSize));
}

}  // namespace

int64_t NpyArray::elementCount() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t npyDTypeSize(NpyDType dtype) { return static_cast<size_t>(row(dtype).size); }

std::string npyDTypeDescr(NpyDType dtype) {
  const DTypeRow& r = row(dtype);
  return fmt::format("{}{}{}", r.size == 1 ? '|' : '<', r.kind, r.size);
}

std::string_view npyDTypeName(NpyDType dtype) { return row(dtype).name; }

std::optional<NpyArray> readNpy(const SourceFile& file, DiagnosticEngine& diags) {
  std::string_view bytes = file.contents();
  auto error = [&](size_t offset, std::string message) -> std::optional<NpyArray> {
    diags.error(SourceLocation{&file, offset}, std::move(message));
    return std::nullopt;
  };
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    // A file of another known kind says what it is (an HLO module given
    // as a tensor, say); anything else is just not an .npy file.
    if (!checkFileKind(file, {FileKind::Npy, FileKind::UnknownBinary, FileKind::Empty},
                       "a NumPy array (.npy)", diags))
      return std::nullopt;
    return error(0, "not a .npy file (missing the \\x93NUMPY magic)");
  }
  if (bytes.size() < 10) return error(bytes.size(), ".npy file is truncated in its preamble");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  uint8_t minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return error(6, fmt::format("unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", major,
                                minor));
  size_t headerLength;
  size_t headerStart;
  if (major == 1) {
    headerLength = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    headerStart = 10;
  } else {
    if (bytes.size() < 12) return error(bytes.size(), ".npy file is truncated in its preamble");
    headerLength = 0;
    for (int i = 0; i < 4; ++i) headerLength |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  }
  if (headerLength > kMaxHeaderLength)
    return error(8, fmt::format(".npy header length {} is too large", headerLength));
  if (headerStart + headerLength > bytes.size())
    return error(8, fmt::format(".npy header length {} runs past the end of the file ({} bytes)", headerLength,
                                bytes.size()));
  std::string_view header = bytes.substr(headerStart, headerLength);
  if (major < 3) {
    for (size_t i = 0; i < header.size(); ++i)
      if (static_cast<unsigned char>(header[i]) >= 0x80)
        return error(headerStart + i, "non-ASCII byte in a version 1.0/2.0 .npy header");
  }

  std::vector<std::pair<std::string, HeaderValue>> entries;
  HeaderParser parser(header, headerStart);
  if (!parser.parse(entries)) return error(parser.errorOffset(), "malformed .npy header: " + parser.error());

  const HeaderValue* descr = nullptr;
  const HeaderValue* fortran = nullptr;
  const HeaderValue* shape = nullptr;
  for (const auto& [key, value] : entries) {
    if (key == "descr") descr = &value;
    else if (key == "fortran_order") fortran = &value;
    else if (key == "shape") shape = &value;
    else return error(headerStart, fmt::format("unexpected key '{}' in the .npy header", key));
  }
  if (!descr || !fortran || !shape)
    return error(headerStart, fmt::format(".npy header lacks the '{}' key",
                                          !descr ? "descr" : !fortran ? "fortran_order" : "shape"));
  if (descr->kind != HeaderValue::String) return error(headerStart, "'descr' in the .npy header is not a string");
  if (fortran->kind != HeaderValue::Bool)
    return error(headerStart, "'fortran_order' in the .npy header is not True or False");
  if (shape->kind != HeaderValue::Tuple) return error(headerStart, "'shape' in the .npy header is not a tuple");
  if (fortran->flag)
    return error(headerStart,
                 "Fortran-order (column-major) .npy arrays are not supported; save with "
                 "numpy.ascontiguousarray first");
  bool bigEndian = false;
  std::string why;
  std::optional<NpyDType> dtype = parseDescr(descr->text, bigEndian, why);
  if (!dtype) return error(headerStart, fmt::format("dtype '{}' in the .npy header: {}", descr->text, why));

  NpyArray array;
  array.dtype = *dtype;
  array.shape = shape->ints;
  size_t elementSize = npyDTypeSize(*dtype);
  size_t dataStart = headerStart + headerLength;
  size_t available = bytes.size() - dataStart;
  // Overflow-safe element count: stop as soon as it exceeds what the file holds.
  uint64_t count = 1;
  bool tooBig = false;
  if (std::find(array.shape.begin(), array.shape.end(), 0) != array.shape.end()) {
    count = 0;
  } else {
    for (int64_t d : array.shape) {
      if (count > available / elementSize / static_cast<uint64_t>(d)) {
        tooBig = true;
        break;
      }
      count *= static_cast<uint64_t>(d);
    }
  }
  if (tooBig || count * elementSize > available)
    return error(bytes.size(), fmt::format(".npy data is truncated: shape needs more than the {} bytes present",
                                           available));
  size_t needed = count * elementSize;
  if (needed != available)
    return error(dataStart + needed,
                 fmt::format(".npy file has {} unexpected bytes after the array data", available - needed));
  array.data.assign(bytes.substr(dataStart, needed));
  if (bigEndian) {
    size_t component = (*dtype == NpyDType::C64 || *dtype == NpyDType::C128) ? elementSize / 2 : elementSize;
    byteSwap(array.data, component);
  }
  return array;
}

std::string writeNpy(const NpyArray& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    shape += fmt::format("{}", array.shape[i]);
    if (array.shape.size() == 1 || i + 1 < array.shape.size()) shape += ", ";
  }
  if (array.shape.size() == 1) shape.pop_back();  // "(3,)" like numpy
  shape += ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 npyDTypeDescr(array.dtype), shape);
  // Pad with spaces and a newline so the data starts on a 64-byte boundary.
  size_t preamble = 10;
  bool v2 = false;
  size_t total = preamble + dict.size() + 1;
  if ((total + 63) / 64 * 64 - preamble > 0xFFFF) {
    v2 = true;
    preamble = 12;
    total = preamble + dict.size() + 1;
  }
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  size_t headerLength = dict.size();
  std::string out(kMagic);
  out += static_cast<char>(v2 ? 2 : 1);
  out += static_cast<char>(0);
  out += static_cast<char>(headerLength & 0xFF);
  out += static_cast<char>((headerLength >> 8) & 0xFF);
  if (v2) {
    out += static_cast<char>((headerLength >> 16) & 0xFF);
    out += static_cast<char>((headerLength >> 24) & 0xFF);
  }
  out += dict;
  out += array.data;
  return out;
}

}  // namespace tpu
