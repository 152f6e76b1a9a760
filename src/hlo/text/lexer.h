// Hand-written HLO text lexer over the source buffer: tokens are views into
// the text (no per-token allocation). Context-dependent forms (dim labels,
// `3x3` windows, `0_1x1_0` paddings, raw `{...}` configs) are read by the
// parser through the scan* helpers instead of being guessed here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpu::hlo::text {

enum class TokKind : uint8_t {
  Eof,
  Error,     // text holds the message
  Equal, Comma, Colon, Star, Hash, Plus, Tilde,
  LBracket, RBracket, LBrace, RBrace, LParen, RParen,
  Arrow,     // ->
  Leq,       // <=
  Dots,      // ...
  Question,  // ?
  Name,      // %name, or `name:` (colon consumed)
  AttrName,  // `name=` (equal sign consumed)
  Ident,     // bare identifier (also -inf, -nan)
  String,    // quoted; text is the raw content between the quotes
  Int,       // -?[0-9]+ (value in intMag/negative)
  Decimal,   // number with '.' or exponent
};

struct Token {
  TokKind kind = TokKind::Eof;
  bool percent = false;        // Name written with '%'
  bool colonConsumed = false;  // Name written as `name:`
  bool hasEscape = false;      // String contains backslashes
  bool overflow = false;       // Int does not fit in 64 bits
  bool negative = false;       // Int/Decimal starts with '-'
  uint64_t intMag = 0;         // Int magnitude
  size_t offset = 0;           // byte offset of the token start
  std::string_view text;
};

std::string_view tokKindName(TokKind kind);

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Token next();
  size_t position() const { return pos_; }
  void setPosition(size_t pos) { pos_ = pos; }
  // Next non-blank, non-comment character without consuming it ('\0' at end).
  char peekChar();
  // Whether a newline occurs before the next token (comments skipped).
  bool newlineBeforeNextToken();
  // Skips blanks and comments; returns false and sets error() on an unterminated comment.
  bool skipSpace();

  // [A-Za-z0-9_?.<>+-]+ (dim labels, DxD, paddings); empty if none.
  std::string_view scanWord();
  // A balanced `{...}` (strings skipped) starting at the next non-blank
  // character; empty (and error()) if unbalanced.
  std::string_view scanBalancedBraces();
  // The raw value of an unknown attribute: up to a ',' or newline at nesting
  // depth 0, or a closing bracket that was not opened.
  std::string_view scanRawValue();
  // Hex digits after "0x" inside `nan(0x...)`: call with pos_ just after "nan".
  bool scanNanPayload(uint64_t* payload);

  const std::string& error() const { return error_; }
  size_t errorOffset() const { return errorOffset_; }

 private:
  Token make(TokKind kind, size_t start) {
    Token t;
    t.kind = kind;
    t.offset = start;
    t.text = src_.substr(start, pos_ - start);
    return t;
  }
  Token makeError(size_t at, std::string message);
  Token lexNumber(size_t start);
  Token lexString(size_t start, char quote);

  std::string_view src_;
  size_t pos_ = 0;
  std::string error_;
  size_t errorOffset_ = 0;
};

// Unescapes C escapes (\n \t \\ \" \' \xHH \NNN, MLIR-style \HH hex).
std::string unescape(std::string_view raw);

}  // namespace tpu::hlo::text
