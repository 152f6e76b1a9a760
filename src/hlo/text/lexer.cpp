#include "hlo/text/lexer.h"

#include <cstring>

#include "hlo/attributes.h"

namespace tpu::hlo::text {

namespace {

// Character classes by table: identifier scanning is the lexer's inner loop.
enum : uint8_t { kClassIdentStart = 1, kClassDigit = 2, kClassIdentChar = 4, kClassBlank = 8 };
struct CharClasses {
  uint8_t of[256] = {};
  constexpr CharClasses() {
    for (int c = 0; c < 256; ++c) {
      bool start = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      bool digit = c >= '0' && c <= '9';
      of[c] = static_cast<uint8_t>((start ? kClassIdentStart : 0) | (digit ? kClassDigit : 0) |
                                   (start || digit || c == '.' || c == '-' ? kClassIdentChar : 0) |
                                   (c == ' ' || c == '\n' || c == '\t' || c == '\r' ? kClassBlank : 0));
    }
  }
};
constexpr CharClasses kClasses;
inline uint8_t charClass(char c) { return kClasses.of[static_cast<unsigned char>(c)]; }
inline bool isIdentStart(char c) { return charClass(c) & kClassIdentStart; }
inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isIdentChar(char c) { return charClass(c) & kClassIdentChar; }
inline bool isBlank(char c) { return charClass(c) & kClassBlank; }
inline int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view tokKindName(TokKind kind) {
  switch (kind) {
    case TokKind::Eof: return "end of input";
    case TokKind::Error: return "invalid token";
    case TokKind::Equal: return "'='";
    case TokKind::Comma: return "','";
    case TokKind::Colon: return "':'";
    case TokKind::Star: return "'*'";
    case TokKind::Hash: return "'#'";
    case TokKind::Plus: return "'+'";
    case TokKind::Tilde: return "'~'";
    case TokKind::LBracket: return "'['";
    case TokKind::RBracket: return "']'";
    case TokKind::LBrace: return "'{'";
    case TokKind::RBrace: return "'}'";
    case TokKind::LParen: return "'('";
    case TokKind::RParen: return "')'";
    case TokKind::Arrow: return "'->'";
    case TokKind::Leq: return "'<='";
    case TokKind::Dots: return "'...'";
    case TokKind::Question: return "'?'";
    case TokKind::Name: return "name";
    case TokKind::AttrName: return "attribute name";
    case TokKind::Ident: return "identifier";
    case TokKind::String: return "string";
    case TokKind::Int: return "integer";
    case TokKind::Decimal: return "decimal";
  }
  return "token";
}

Token Lexer::makeError(size_t at, std::string message) {
  // Always make progress so a caller that keeps lexing cannot loop.
  if (pos_ <= at && pos_ < src_.size()) pos_ = at + 1;
  error_ = std::move(message);
  errorOffset_ = at;
  Token t;
  t.kind = TokKind::Error;
  t.offset = at;
  t.text = error_;
  return t;
}

bool Lexer::skipSpace() {
  const size_t n = src_.size();
  while (pos_ < n) {
    char c = src_[pos_];
    if (isBlank(c)) {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < n && src_[pos_ + 1] == '*') {
      size_t end = src_.find("*/", pos_ + 2);
      if (end == std::string_view::npos) {
        makeError(pos_, "unterminated block comment");
        pos_ = n;
        return false;
      }
      pos_ = end + 2;
    } else if (c == '/' && pos_ + 1 < n && src_[pos_ + 1] == '/') {
      size_t end = src_.find('\n', pos_);
      pos_ = end == std::string_view::npos ? n : end + 1;
    } else {
      break;
    }
  }
  return true;
}

char Lexer::peekChar() {
  size_t save = pos_;
  skipSpace();
  char c = pos_ < src_.size() ? src_[pos_] : '\0';
  pos_ = save;
  return c;
}

bool Lexer::newlineBeforeNextToken() {
  size_t save = pos_;
  bool newline = false;
  const size_t n = src_.size();
  while (pos_ < n) {
    char c = src_[pos_];
    if (c == '\n') {
      newline = true;
      ++pos_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < n && src_[pos_ + 1] == '*') {
      size_t end = src_.find("*/", pos_ + 2);
      if (end == std::string_view::npos) break;
      pos_ = end + 2;
    } else if (c == '/' && pos_ + 1 < n && src_[pos_ + 1] == '/') {
      newline = true;
      size_t end = src_.find('\n', pos_);
      pos_ = end == std::string_view::npos ? n : end + 1;
    } else {
      break;
    }
  }
  pos_ = save;
  return newline;
}

Token Lexer::next() {
  const size_t n = src_.size();
  // Most tokens follow at most a blank or two; comments take the full path.
  while (pos_ < n && isBlank(src_[pos_])) ++pos_;
  if (pos_ < n && src_[pos_] == '/' && !skipSpace()) return makeError(errorOffset_, error_);
  if (pos_ >= n) return make(TokKind::Eof, pos_);
  size_t start = pos_;
  char c = src_[pos_];
  switch (c) {
    case '=': ++pos_; return make(TokKind::Equal, start);
    case ',': ++pos_; return make(TokKind::Comma, start);
    case ':': ++pos_; return make(TokKind::Colon, start);
    case '*': ++pos_; return make(TokKind::Star, start);
    case '#': ++pos_; return make(TokKind::Hash, start);
    case '+': ++pos_; return make(TokKind::Plus, start);
    case '~': ++pos_; return make(TokKind::Tilde, start);
    case '[': ++pos_; return make(TokKind::LBracket, start);
    case ']': ++pos_; return make(TokKind::RBracket, start);
    case '{': ++pos_; return make(TokKind::LBrace, start);
    case '}': ++pos_; return make(TokKind::RBrace, start);
    case '(': ++pos_; return make(TokKind::LParen, start);
    case ')': ++pos_; return make(TokKind::RParen, start);
    case '?': ++pos_; return make(TokKind::Question, start);
    case '"':
    case '\'': return lexString(start, c);
    case '<':
      if (pos_ + 1 < n && src_[pos_ + 1] == '=') {
        pos_ += 2;
        return make(TokKind::Leq, start);
      }
      return makeError(start, "expected '<=' (a lone '<' is not a token)");
    case '.':
      if (pos_ + 2 < n && src_[pos_ + 1] == '.' && src_[pos_ + 2] == '.') {
        pos_ += 3;
        return make(TokKind::Dots, start);
      }
      if (pos_ + 1 < n && isDigit(src_[pos_ + 1])) return lexNumber(start);
      return makeError(start, "unexpected character '.'");
    case '%': {
      ++pos_;
      if (pos_ >= n || !isIdentStart(src_[pos_])) return makeError(start, "expected a name after '%'");
      size_t nameStart = pos_;
      while (++pos_ < n && isIdentChar(src_[pos_])) {
      }
      Token t = make(TokKind::Name, start);
      t.text = src_.substr(nameStart, pos_ - nameStart);
      t.percent = true;
      if (pos_ < n && src_[pos_] == ':') {
        ++pos_;
        t.colonConsumed = true;
      }
      return t;
    }
    case '-':
      if (pos_ + 1 < n && src_[pos_ + 1] == '>') {
        pos_ += 2;
        return make(TokKind::Arrow, start);
      }
      if (pos_ + 1 < n && (src_[pos_ + 1] == 'i' || src_[pos_ + 1] == 'n')) {
        ++pos_;
        while (pos_ < n && isIdentStart(src_[pos_])) ++pos_;
        std::string_view word = src_.substr(start, pos_ - start);
        if (word == "-inf" || word == "-nan") return make(TokKind::Ident, start);
        return makeError(start, "unexpected '-'");
      }
      return lexNumber(start);
    default: break;
  }
  if (isDigit(c)) return lexNumber(start);
  if (isIdentStart(c)) {
    while (++pos_ < n && isIdentChar(src_[pos_])) {
    }
    size_t end = pos_;
    if (pos_ < n && src_[pos_] == ':') {
      ++pos_;
      Token t = make(TokKind::Name, start);
      t.text = src_.substr(start, end - start);
      t.colonConsumed = true;
      return t;
    }
    if (pos_ < n && src_[pos_] == '=') {
      ++pos_;
      Token t = make(TokKind::AttrName, start);
      t.text = src_.substr(start, end - start);
      return t;
    }
    return make(TokKind::Ident, start);
  }
  if (c == '\0') return makeError(start, "NUL byte in input");
  return makeError(start, std::string("unexpected character '") + c + "'");
}

Token Lexer::lexNumber(size_t start) {
  const size_t n = src_.size();
  bool negative = false;
  if (src_[pos_] == '-') {
    negative = true;
    ++pos_;
  }
  size_t digitsStart = pos_;
  uint64_t mag = 0;
  bool overflow = false;
  // Up to 19 digits cannot overflow 64 bits: check only beyond that.
  while (pos_ < n && isDigit(src_[pos_])) {
    uint64_t d = static_cast<uint64_t>(src_[pos_] - '0');
    if (pos_ - digitsStart >= 19 && mag > (UINT64_MAX - d) / 10) overflow = true;
    mag = mag * 10 + d;
    ++pos_;
  }
  bool intDigits = pos_ > digitsStart;
  bool isDecimal = false;
  if (pos_ < n && src_[pos_] == '.' && !(pos_ + 1 < n && src_[pos_ + 1] == '.')) {
    size_t save = pos_;
    ++pos_;
    size_t fracStart = pos_;
    while (pos_ < n && isDigit(src_[pos_])) ++pos_;
    if (!intDigits && pos_ == fracStart) {
      pos_ = save;
    } else {
      isDecimal = true;
    }
  }
  if (!intDigits && !isDecimal) return makeError(start, "expected a number");
  if (pos_ < n && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
    size_t save = pos_;
    ++pos_;
    if (pos_ < n && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
    if (pos_ < n && isDigit(src_[pos_])) {
      while (pos_ < n && isDigit(src_[pos_])) ++pos_;
      isDecimal = true;
    } else {
      pos_ = save;
    }
  }
  Token t = make(isDecimal ? TokKind::Decimal : TokKind::Int, start);
  t.negative = negative;
  t.intMag = mag;
  t.overflow = overflow;
  return t;
}

Token Lexer::lexString(size_t start, char quote) {
  const size_t n = src_.size();
  ++pos_;
  size_t contentStart = pos_;
  bool escape = false;
  // Jump from quote to quote; only a backslash before a quote can escape it.
  while (true) {
    const void* q = pos_ < n ? std::memchr(src_.data() + pos_, quote, n - pos_) : nullptr;
    if (!q) {
      pos_ = n;
      return makeError(start, "unterminated string");
    }
    size_t end = static_cast<size_t>(static_cast<const char*>(q) - src_.data());
    if (!escape && std::memchr(src_.data() + pos_, '\\', end - pos_)) escape = true;
    size_t backslashes = 0;
    while (end - backslashes > contentStart && src_[end - backslashes - 1] == '\\') ++backslashes;
    pos_ = end;
    if (backslashes % 2 == 0) break;
    ++pos_;
  }
  Token t = make(TokKind::String, start);
  t.text = src_.substr(contentStart, pos_ - contentStart);
  t.hasEscape = escape;
  ++pos_;
  return t;
}

std::string_view Lexer::scanWord() {
  skipSpace();
  size_t start = pos_;
  const size_t n = src_.size();
  while (pos_ < n) {
    char c = src_[pos_];
    if (isIdentChar(c) || c == '?' || c == '>' || c == '<' || c == '+') {
      ++pos_;
    } else {
      break;
    }
  }
  return src_.substr(start, pos_ - start);
}

std::string_view Lexer::scanBalancedBraces() {
  skipSpace();
  const size_t n = src_.size();
  size_t start = pos_;
  if (pos_ >= n || src_[pos_] != '{') {
    makeError(pos_, "expected '{'");
    return {};
  }
  size_t end = balancedBraceGroupEnd(src_, start);
  if (end == std::string_view::npos) {
    makeError(start, "unbalanced '{'");
    pos_ = n;
    return {};
  }
  pos_ = end;
  return src_.substr(start, end - start);
}

std::string_view Lexer::scanRawValue() {
  skipSpace();
  size_t start = pos_;
  size_t end = rawValueEnd(src_, start);
  // The scan stops before the terminator; blanks trimmed from the value
  // stay to be skipped by the next token.
  pos_ = end;
  return src_.substr(start, end - start);
}

bool Lexer::scanNanPayload(uint64_t* payload) {
  const size_t n = src_.size();
  if (pos_ + 3 >= n || src_[pos_] != '(' || src_[pos_ + 1] != '0' || (src_[pos_ + 2] != 'x' && src_[pos_ + 2] != 'X'))
    return false;
  size_t p = pos_ + 3;
  uint64_t v = 0;
  int digits = 0;
  while (p < n && hexValue(src_[p]) >= 0) {
    if (++digits > 16) return false;
    v = v * 16 + static_cast<uint64_t>(hexValue(src_[p]));
    ++p;
  }
  if (digits == 0 || p >= n || src_[p] != ')') return false;
  pos_ = p + 1;
  *payload = v;
  return true;
}

std::string unescape(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) {
      out += c;
      continue;
    }
    char e = raw[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      case '\'': out += '\''; break;
      case '?': out += '?'; break;
      case 'x': {
        int v = 0, k = 0;
        while (k < 2 && i + 1 < raw.size() && hexValue(raw[i + 1]) >= 0) {
          v = v * 16 + hexValue(raw[++i]);
          ++k;
        }
        out += static_cast<char>(v);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0', k = 1;
          while (k < 3 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7') {
            v = v * 8 + (raw[++i] - '0');
            ++k;
          }
          out += static_cast<char>(v & 0xff);
        } else if (hexValue(e) >= 0 && i + 1 < raw.size() && hexValue(raw[i + 1]) >= 0) {
          out += static_cast<char>(hexValue(e) * 16 + hexValue(raw[++i]));  // MLIR `\9C`
        } else {
          out += e;
        }
    }
  }
  return out;
}

}  // namespace tpu::hlo::text
