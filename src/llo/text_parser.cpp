// Parser for the LLO assembly language. Two phases: statements are parsed
// into items (ops, explicit bundles, labels, entries) with constants and
// buffers resolved on the way; then items are bundled, labels fixed up and
// every op and bundle checked against the target, all with source positions.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>

#include "isa/verify.h"
#include "llo/bundler.h"
#include "llo/text.h"
#include "support/elided_fill.h"
#include "support/float_format.h"

namespace tpu::llo {

namespace {

using namespace tpu::isa;
using target::TargetDesc;

enum class Tok { Ident, Directive, Int, Float, String, Punct, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string_view text;
  size_t offset = 0;
  uint64_t intValue = 0;
  double floatValue = 0;
  bool hex = false;
};

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

struct Value {
  bool isFloat = false;
  int64_t i = 0;
  double f = 0;
  double asDouble() const { return isFloat ? f : static_cast<double>(i); }
};

struct LabelRef {
  size_t operand;
  std::string name;
  SourceLocation loc;
};

struct PendingOp {
  Instr instr;
  SourceLocation loc;
  std::vector<LabelRef> labelRefs;
  // Only when one op is parsed on its own (OpParser): HBM buffers and DMA
  // descriptors named by the op, resolved by the caller.
  std::vector<LabelRef> bufferRefs, descRefs;
};

struct Item {
  enum Kind { Op, Bundle, Label, Entry } kind = Op;
  std::vector<PendingOp> ops;  // Op: one; Bundle: the explicit bundle
  SourceLocation loc;
  size_t index = 0;  // Label: index into labels; Entry: into entries
};

class Parser {
 public:
  Parser(const SourceFile& file, const AsmOptions& options, DiagnosticEngine& diags)
      : file_(&file), options_(options), diags_(diags) {}

  std::optional<Assembled> run();
  // One op and nothing else (OpParser): buffer and descriptor names are
  // left as references in `op` instead of being looked up.
  bool parseSingleOp(const SourceFile& file, PendingOp& op);

 private:
  // ---- lexing ----
  // The whole file is lexed once up front only to report lexical errors
  // first (as a parse would find them); the parser then lexes on demand and
  // drops the tokens of each finished statement, so the token memory is
  // that of one statement, not of the file (4.5 million tokens, 250 MB, for
  // llo-gen's output of 10,000 HLO adds).
  bool lex();
  bool lexOne(size_t& i, Token& out) const;
  void fill(size_t n) const {
    while (tokens_.size() <= n && !lexDone_) {
      Token t;
      lexOne(lexPos_, t);  // cannot fail: lex() checked the whole file
      tokens_.push_back(t);
      lexDone_ = t.kind == Tok::End;
    }
  }
  // Forgets the tokens before the current one (between statements).
  void dropConsumed() {
    tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  const Token& peek(size_t ahead = 0) const {
    fill(pos_ + ahead);
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& next() {
    fill(pos_ + 1);
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool isPunct(std::string_view p, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Punct && peek(ahead).text == p;
  }
  bool accept(std::string_view p) {
    if (!isPunct(p)) return false;
    next();
    return true;
  }
  bool atStatementEnd() const {
    const Token& t = peek();
    return t.kind == Tok::Newline || t.kind == Tok::End || (t.kind == Tok::Punct && (t.text == ";" || t.text == "}"));
  }
  SourceLocation loc(const Token& t) const { return SourceLocation{file_, t.offset}; }
  SourceLocation here() const { return loc(peek()); }

  bool error(SourceLocation at, std::string message) {
    diags_.error(at, std::move(message));
    return false;
  }
  bool expect(std::string_view p, std::string_view what) {
    if (accept(p)) return true;
    return error(here(), fmt::format("expected '{}' {}, found {}", p, what, describe(peek())));
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Newline: return "end of line";
      case Tok::End: return "end of file";
      default: return fmt::format("'{}'", t.text);
    }
  }
  void skipToLineEnd() {
    while (peek().kind != Tok::Newline && peek().kind != Tok::End) next();
  }

  // ---- statements ----
  bool parseStatement();
  bool parseDirective();
  bool parseBuffer(const Token& directive);
  bool parseDma();
  bool parseEntry(const Token& directive);
  bool parseKernel();
  bool parseOp(PendingOp& op);
  bool parseOperand(const InstrDesc& desc, const OperandDesc& od, PendingOp& op, size_t index, Operand& out);
  bool parseAddress(OperandKind kind, Operand& out);
  std::optional<std::vector<std::string>> parseNameList();
  bool parseInitializer(Buffer& buffer, SourceLocation at);

  // ---- expressions ----
  std::optional<Value> parseExpr(int minPrec = 0);
  std::optional<Value> parseUnary();
  std::optional<Value> parsePrimary();
  std::optional<int64_t> parseIntExpr(std::string_view what);
  std::optional<uint32_t> parseFloatBits(DType type = DType::F32);

  // Register names ("s3", or an alias of one).
  std::optional<int> regNumber(std::string_view text, std::string_view prefix) const;
  std::string_view resolveAlias(std::string_view text) const {
    auto it = aliases_.find(text);
    return it == aliases_.end() ? text : std::string_view(it->second);
  }
  bool isReservedName(std::string_view name) const;
  bool defineName(std::string_view name, SourceLocation at);

  // ---- phase 2 ----
  bool resolveTarget();
  bool layOut();

  const SourceFile* file_;
  const AsmOptions& options_;
  DiagnosticEngine& diags_;
  // A deque: references to tokens stay valid while more are lexed.
  mutable std::deque<Token> tokens_;
  mutable size_t lexPos_ = 0;
  mutable bool lexDone_ = false;
  size_t pos_ = 0;

  Program program_;
  std::optional<TargetDesc> target_;
  std::string targetDirective;
  SourceLocation targetLoc_;
  std::map<std::string, Value, std::less<>> constants_;
  std::map<std::string, std::string, std::less<>> aliases_;
  std::map<std::string, SourceLocation, std::less<>> names_;  // every defined global name
  std::map<std::string, size_t, std::less<>> labelIndex_;
  std::vector<SourceLocation> labelLocs_;
  std::vector<SourceLocation> kernelLocs_;  // of program_.kernels
  std::vector<Item> items_;
  std::optional<MemSpace> lastBufferSpace_;  // set when an expression names a buffer
  uint64_t vmemNext_ = 0;
  uint64_t smemNext_ = 0;
  std::vector<SourceLocation> bufferLocs_;
  bool opMode_ = false;
};

// ---------------------------------------------------------------- lexing

bool Parser::lex() {
  size_t i = 0;
  Token t;
  do {
    if (!lexOne(i, t)) return false;
  } while (t.kind != Tok::End);
  return true;
}

// The token at or after s[i] (skipping blanks and comments), i moved past
// it; End at the end of the file. False (reported) on a lexical error.
bool Parser::lexOne(size_t& i, Token& out) const {
  std::string_view s = file_->contents();
  auto push = [&](Tok kind, size_t start, size_t end) {
    out = Token{};
    out.kind = kind;
    out.text = s.substr(start, end - start);
    out.offset = start;
    return &out;
  };
  auto error = [&](SourceLocation at, std::string message) {
    diags_.error(at, std::move(message));
    return false;
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      push(Tok::Newline, i, i + 1);
      ++i;
      return true;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '#' || (c == '/' && i + 1 < s.size() && s[i + 1] == '/')) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (isIdentStart(c) || (c == '.' && i + 1 < s.size() && isIdentStart(s[i + 1]))) {
      size_t start = i++;
      while (i < s.size() && isIdentChar(s[i])) ++i;
      push(c == '.' ? Tok::Directive : Tok::Ident, start, i);
      return true;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      bool isHex = c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X');
      bool isBin = c == '0' && i + 1 < s.size() && (s[i + 1] == 'b' || s[i + 1] == 'B');
      bool isFloat = false;
      if (isHex || isBin) {
        i += 2;
        while (i < s.size() && std::isxdigit(static_cast<unsigned char>(s[i]))) ++i;
      } else {
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        if (i < s.size() && s[i] == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
          isFloat = true;
          ++i;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        }
        if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
          size_t j = i + 1;
          if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
          if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
            isFloat = true;
            i = j;
            while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
          }
        }
      }
      if (i < s.size() && isIdentChar(s[i]))
        return error(SourceLocation{file_, start}, fmt::format("malformed number '{}'",
                                                                 s.substr(start, i + 1 - start)));
      Token* t = push(isFloat ? Tok::Float : Tok::Int, start, i);
      std::string text(t->text);
      if (isFloat) {
        t->floatValue = std::strtod(text.c_str(), nullptr);
      } else {
        errno = 0;
        const char* digits = text.c_str() + ((isHex || isBin) ? 2 : 0);
        if (!*digits) return error(loc(*t), fmt::format("malformed number '{}'", text));
        t->intValue = std::strtoull(digits, nullptr, isHex ? 16 : isBin ? 2 : 10);
        if (errno == ERANGE || t->intValue > (uint64_t{1} << 63) - 1)
          return error(loc(*t), fmt::format("number '{}' is too large", text));
        t->hex = isHex;
      }
      return true;
    } else if (c == '"') {
      size_t start = i++;
      while (i < s.size() && s[i] != '"' && s[i] != '\n') ++i;
      if (i >= s.size() || s[i] != '"') return error(SourceLocation{file_, start}, "unterminated string");
      ++i;
      push(Tok::String, start, i);
      return true;
    } else {
      static constexpr std::string_view two[] = {"<<", ">>", "->"};
      for (std::string_view p : two)
        if (s.substr(i, 2) == p) {
          push(Tok::Punct, i, i + 2);
          i += 2;
          return true;
        }
      if (std::string_view("{}[](),;:=+-*/%&|~@^").find(c) == std::string_view::npos)
        return error(SourceLocation{file_, i}, fmt::format("unexpected character '{}'", c));
      push(Tok::Punct, i, i + 1);
      ++i;
      return true;
    }
  }
  push(Tok::End, s.size(), s.size());
  return true;
}

// ---------------------------------------------------------------- expressions

int precedence(std::string_view op) {
  if (op == "|") return 1;
  if (op == "^") return 2;
  if (op == "&") return 3;
  if (op == "<<" || op == ">>") return 4;
  if (op == "+" || op == "-") return 5;
  if (op == "*" || op == "/" || op == "%") return 6;
  return -1;
}

std::optional<Value> Parser::parseExpr(int minPrec) {
  auto lhs = parseUnary();
  if (!lhs) return std::nullopt;
  while (peek().kind == Tok::Punct) {
    std::string_view op = peek().text;
    int prec = precedence(op);
    if (prec < 0 || prec < minPrec) break;
    SourceLocation at = here();
    next();
    auto rhs = parseExpr(prec + 1);
    if (!rhs) return std::nullopt;
    Value v;
    if (lhs->isFloat || rhs->isFloat) {
      double a = lhs->asDouble(), b = rhs->asDouble();
      v.isFloat = true;
      if (op == "+") v.f = a + b;
      else if (op == "-") v.f = a - b;
      else if (op == "*") v.f = a * b;
      else if (op == "/") v.f = a / b;
      else {
        error(at, fmt::format("operator '{}' needs integers", op));
        return std::nullopt;
      }
    } else {
      // Wrapping 64-bit arithmetic (unsigned to avoid undefined overflow).
      uint64_t a = static_cast<uint64_t>(lhs->i), b = static_cast<uint64_t>(rhs->i);
      uint64_t r = 0;
      if (op == "+") r = a + b;
      else if (op == "-") r = a - b;
      else if (op == "*") r = a * b;
      else if (op == "/" || op == "%") {
        if (rhs->i == 0) {
          error(at, "division by zero in a constant expression");
          return std::nullopt;
        }
        if (lhs->i == INT64_MIN && rhs->i == -1) r = op == "/" ? a : 0;
        else r = static_cast<uint64_t>(op == "/" ? lhs->i / rhs->i : lhs->i % rhs->i);
      } else if (op == "<<") r = rhs->i >= 0 && rhs->i < 64 ? a << rhs->i : 0;
      else if (op == ">>") r = rhs->i >= 0 && rhs->i < 64 ? static_cast<uint64_t>(lhs->i >> rhs->i) : 0;
      else if (op == "&") r = a & b;
      else if (op == "|") r = a | b;
      else if (op == "^") r = a ^ b;
      v.i = static_cast<int64_t>(r);
    }
    lhs = v;
  }
  return lhs;
}

std::optional<Value> Parser::parseUnary() {
  if (accept("-")) {
    auto v = parseUnary();
    if (!v) return std::nullopt;
    if (v->isFloat) v->f = -v->f;
    else v->i = static_cast<int64_t>(0 - static_cast<uint64_t>(v->i));
    return v;
  }
  if (accept("+")) return parseUnary();
  if (isPunct("~")) {
    SourceLocation at = here();
    next();
    auto v = parseUnary();
    if (!v) return std::nullopt;
    if (v->isFloat) {
      error(at, "operator '~' needs an integer");
      return std::nullopt;
    }
    v->i = ~v->i;
    return v;
  }
  return parsePrimary();
}

std::optional<Value> Parser::parsePrimary() {
  const Token& t = peek();
  if (t.kind == Tok::Int) {
    next();
    return Value{false, static_cast<int64_t>(t.intValue), 0};
  }
  if (t.kind == Tok::Float) {
    next();
    return Value{true, 0, t.floatValue};
  }
  if (accept("(")) {
    auto v = parseExpr();
    if (!v || !expect(")", "to close the parenthesis")) return std::nullopt;
    return v;
  }
  if (t.kind == Tok::Ident) {
    next();
    if (t.text == "inf") return Value{true, 0, HUGE_VAL};
    if (t.text == "nan") return Value{true, 0, std::nan("")};
    if (t.text == "sizeof") {
      if (!expect("(", "after 'sizeof'")) return std::nullopt;
      const Token& name = next();
      auto b = program_.findBuffer(name.text);
      if (name.kind != Tok::Ident || !b) {
        error(loc(name), fmt::format("unknown buffer '{}'", name.text));
        return std::nullopt;
      }
      if (!expect(")", "after the buffer name")) return std::nullopt;
      return Value{false, static_cast<int64_t>(program_.buffers[*b].sizeBytes()), 0};
    }
    if (auto it = constants_.find(t.text); it != constants_.end()) return it->second;
    if (auto b = program_.findBuffer(t.text)) {
      const Buffer& buf = program_.buffers[*b];
      if (buf.space == MemSpace::Hbm) {
        error(loc(t), fmt::format("HBM buffer '{}' has no static address; write {}[offset]", t.text, t.text));
        return std::nullopt;
      }
      lastBufferSpace_ = buf.space;
      return Value{false, static_cast<int64_t>(buf.address), 0};
    }
    error(loc(t), fmt::format("unknown constant '{}'", t.text));
    return std::nullopt;
  }
  error(loc(t), fmt::format("expected an expression, found {}", describe(t)));
  return std::nullopt;
}

std::optional<int64_t> Parser::parseIntExpr(std::string_view what) {
  SourceLocation at = here();
  auto v = parseExpr();
  if (!v) return std::nullopt;
  if (v->isFloat) {
    error(at, fmt::format("{} must be an integer", what));
    return std::nullopt;
  }
  return v->i;
}

// A float in a float context; a bare hexadecimal literal is the raw bit pattern.
std::optional<uint32_t> Parser::parseFloatBits(DType type) {
  const Token& t = peek();
  int bits = type == DType::F32 ? 32 : 16;
  if (t.kind == Tok::Int && t.hex) {
    const Token& after = peek(1);
    bool bare = after.kind != Tok::Punct || after.text == "," || after.text == ";" || after.text == "}" ||
                after.text == "]";
    if (bare) {
      next();
      if (bits < 64 && t.intValue >> bits) {
        error(loc(t), fmt::format("bit pattern {} does not fit {} bits", t.text, bits));
        return std::nullopt;
      }
      return static_cast<uint32_t>(t.intValue);
    }
  }
  auto v = parseExpr();
  if (!v) return std::nullopt;
  double d = v->asDouble();
  switch (type) {
    case DType::Bf16: return encodeFloat(FloatFormat::BF16, d);
    case DType::F16: return encodeFloat(FloatFormat::F16, d);
    default: return std::bit_cast<uint32_t>(static_cast<float>(d));
  }
}

// ---------------------------------------------------------------- names

std::optional<int> Parser::regNumber(std::string_view text, std::string_view prefix) const {
  text = resolveAlias(text);
  if (!text.starts_with(prefix)) return std::nullopt;
  std::string_view digits = text.substr(prefix.size());
  if (digits.empty() || digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int n = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool Parser::isReservedName(std::string_view name) const {
  for (std::string_view p : {"s", "v", "m", "sem", "mxu", "xlu"}) {
    std::string_view rest = name.substr(std::min(name.size(), p.size()));
    if (name.starts_with(p) && !rest.empty() &&
        std::all_of(rest.begin(), rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      return true;
  }
  return name == "inf" || name == "nan" || name == "sizeof" || name == "sem";
}

bool Parser::defineName(std::string_view name, SourceLocation at) {
  if (isReservedName(name)) return error(at, fmt::format("'{}' is a reserved name (register or keyword)", name));
  auto [it, inserted] = names_.emplace(std::string(name), at);
  if (!inserted) {
    LineColumn lc = file_->lineColumn(it->second.offset);
    return error(at, fmt::format("'{}' is already defined at line {}", name, lc.line));
  }
  return true;
}

// ---------------------------------------------------------------- statements

bool Parser::parseStatement() {
  const Token& t = peek();
  if (t.kind == Tok::Newline) {
    next();
    return true;
  }
  if (t.kind == Tok::Directive) return parseDirective();
  // label:
  if (t.kind == Tok::Ident && isPunct(":", 1)) {
    next();
    next();
    if (!defineName(t.text, loc(t))) return false;
    labelIndex_[std::string(t.text)] = program_.labels.size();
    program_.labels.push_back(Label{std::string(t.text), 0});
    labelLocs_.push_back(loc(t));
    items_.push_back(Item{Item::Label, {}, loc(t), program_.labels.size() - 1});
    return true;  // an op may follow on the same line
  }
  if (accept("{")) {
    Item item{Item::Bundle, {}, loc(t), 0};
    while (true) {
      while (peek().kind == Tok::Newline) next();
      if (accept("}")) break;
      if (peek().kind == Tok::End) return error(loc(t), "unterminated bundle: missing '}'");
      PendingOp op;
      if (!parseOp(op)) return false;
      item.ops.push_back(std::move(op));
      if (accept(";")) continue;
      while (peek().kind == Tok::Newline) next();
      if (peek().kind == Tok::End) return error(loc(t), "unterminated bundle: missing '}'");
      if (!isPunct("}"))
        return error(here(), fmt::format("expected ';' or '}}' in a bundle, found {}", describe(peek())));
    }
    items_.push_back(std::move(item));
  } else if (t.kind == Tok::Ident) {
    PendingOp op;
    if (!parseOp(op)) return false;
    items_.push_back(Item{Item::Op, {std::move(op)}, loc(t), 0});
    if (accept(";")) return true;  // several ops on one line, bundled automatically
  } else {
    return error(loc(t), fmt::format("expected an instruction, label or directive, found {}", describe(t)));
  }
  if (peek().kind != Tok::Newline && peek().kind != Tok::End)
    return error(here(), fmt::format("unexpected {} after the statement", describe(peek())));
  return true;
}

bool Parser::parseDirective() {
  const Token& d = next();
  if (d.text == ".target") {
    const Token& name = next();
    if (name.kind != Tok::Ident && name.kind != Tok::String)
      return error(loc(name), "expected a target name or a \"file.json\" after .target");
    if (!targetDirective.empty()) return error(loc(d), "duplicate .target directive");
    targetDirective = name.kind == Tok::String ? std::string(name.text.substr(1, name.text.size() - 2))
                                               : std::string(name.text);
    targetLoc_ = loc(name);
  } else if (d.text == ".const") {
    const Token& name = next();
    if (name.kind != Tok::Ident) return error(loc(name), "expected a constant name after .const");
    if (!defineName(name.text, loc(name))) return false;
    if (!expect("=", "after the constant name")) return false;
    auto v = parseExpr();
    if (!v) return false;
    constants_[std::string(name.text)] = *v;
  } else if (d.text == ".alias") {
    const Token& name = next();
    if (name.kind != Tok::Ident) return error(loc(name), "expected a name after .alias");
    if (!defineName(name.text, loc(name))) return false;
    if (!expect("=", "after the alias name")) return false;
    const Token& reg = next();
    bool ok = reg.kind == Tok::Ident;
    if (ok) {
      ok = false;
      for (std::string_view p : {"s", "v", "m"})
        if (regNumber(reg.text, p)) ok = true;
    }
    if (!ok) return error(loc(reg), fmt::format("expected a register (sN, vN or mN) after '=', found {}", describe(reg)));
    aliases_[std::string(name.text)] = std::string(resolveAlias(reg.text));
  } else if (d.text == ".buffer") {
    if (!parseBuffer(d)) return false;
  } else if (d.text == ".dma") {
    if (!parseDma()) return false;
  } else if (d.text == ".entry") {
    if (!parseEntry(d)) return false;
  } else if (d.text == ".kernel") {
    if (!parseKernel()) return false;
  } else {
    return error(loc(d), fmt::format("unknown directive '{}'", d.text));
  }
  if (peek().kind != Tok::Newline && peek().kind != Tok::End)
    return error(here(), fmt::format("unexpected {} after the directive", describe(peek())));
  return true;
}

bool Parser::parseBuffer(const Token& directive) {
  const Token& name = next();
  if (name.kind != Tok::Ident) return error(loc(name), "expected a buffer name after .buffer");
  if (!defineName(name.text, loc(name))) return false;
  if (!expect(":", "after the buffer name")) return false;
  Buffer b;
  b.name = std::string(name.text);
  const Token& space = next();
  if (space.text == "hbm") b.space = MemSpace::Hbm;
  else if (space.text == "vmem") b.space = MemSpace::Vmem;
  else if (space.text == "smem") b.space = MemSpace::Smem;
  else return error(loc(space), fmt::format("expected a memory space (hbm, vmem or smem), found {}", describe(space)));
  const Token& type = next();
  auto dtype = type.kind == Tok::Ident ? dtypeFromName(type.text) : std::nullopt;
  if (!dtype) return error(loc(type), fmt::format("unknown element type {}", describe(type)));
  b.dtype = *dtype;
  if (!expect("[", "before the buffer shape")) return false;
  if (!accept("]")) {
    do {
      SourceLocation at = here();
      auto dim = parseIntExpr("a dimension");
      if (!dim) return false;
      if (*dim < 0 || *dim > (int64_t{1} << 40)) return error(at, fmt::format("bad dimension {}", *dim));
      b.shape.push_back(*dim);
    } while (accept(","));
    if (!expect("]", "after the buffer shape")) return false;
  }
  if (b.shape.size() > 8) return error(loc(name), "a buffer may have at most 8 dimensions");
  if (!isa::sizeFits(b)) return error(loc(name), fmt::format("buffer '{}' is too large (at most 2^48 bytes)", b.name));
  uint64_t bytes = b.sizeBytes();
  if (accept("@")) {
    SourceLocation at = here();
    auto addr = parseIntExpr("a buffer address");
    if (!addr) return false;
    if (b.space == MemSpace::Hbm) return error(at, "HBM buffers are placed by the loader; remove '@ address'");
    if (*addr < 0) return error(at, "a buffer address must not be negative");
    b.address = static_cast<uint64_t>(*addr);
  } else if (b.space != MemSpace::Hbm) {
    // Bump allocation: VMEM buffers start on a 512-byte row, SMEM on a word.
    uint64_t align = b.space == MemSpace::Vmem ? 512 : 4;
    uint64_t& next = b.space == MemSpace::Vmem ? vmemNext_ : smemNext_;
    b.address = (next + align - 1) / align * align;
  }
  if (b.space != MemSpace::Hbm) {
    uint64_t& next = b.space == MemSpace::Vmem ? vmemNext_ : smemNext_;
    next = std::max(next, b.address + bytes);
  }
  if (accept("=")) {
    if (!parseInitializer(b, loc(directive))) return false;
  }
  if (program_.buffers.size() >= 4096) return error(loc(name), "too many buffers (at most 4096)");
  program_.buffers.push_back(std::move(b));
  bufferLocs_.push_back(loc(name));
  return true;
}

bool Parser::parseInitializer(Buffer& b, SourceLocation) {
  SourceLocation at = here();
  // `fill(hi, lo)` or `fill(hi, lo, TYPE)`: an elided HLO constant's
  // values, drawn from the 64-bit seed hi:lo as the interpreter draws them
  // (support/elided_fill.h). TYPE is the XLA element type drawn (the
  // buffer's own by default); s64, u64, f64, c64 and c128 constants live in
  // u32 buffers (their words), so they name it.
  if (peek().kind == Tok::Ident && peek().text == "fill" && isPunct("(", 1)) {
    next();
    next();
    auto hi = parseIntExpr("the seed's high word");
    if (!hi || !expect(",", "between the seed's words")) return false;
    auto lo = parseIntExpr("the seed's low word");
    if (!lo) return false;
    std::string type(dtypeName(b.dtype));
    if (accept(",")) {
      const Token& t = next();
      if (t.kind != Tok::Ident) return error(loc(t), "expected an element type after the seed");
      type = std::string(t.text);
    }
    if (!expect(")", "after the seed")) return false;
    if (*hi < 0 || *hi > UINT32_MAX || *lo < 0 || *lo > UINT32_MAX)
      return error(at, "fill seed words must be 32-bit unsigned values");
    const int elementBytes = elidedFillElementBytes(type);
    if (elementBytes == 0) return error(at, fmt::format("fill(...) cannot draw element type '{}'", type));
    const bool wide = type == "s64" || type == "u64" || type == "f64" || type == "c64" || type == "c128";
    if (wide ? b.dtype != DType::U32 : type != dtypeName(b.dtype))
      return error(at, fmt::format("fill(..., {}) initialises {} buffers, not {}", type, wide ? "u32" : type,
                                   dtypeName(b.dtype)));
    const uint64_t size = b.sizeBytes();
    if (size % static_cast<uint64_t>(elementBytes) != 0)
      return error(at, fmt::format("buffer '{}' of {} bytes does not hold whole {} elements", b.name, size, type));
    const uint64_t seed = (static_cast<uint64_t>(*hi) << 32) | static_cast<uint64_t>(*lo);
    auto bytes = elidedFillBytes(type, seed, size / static_cast<uint64_t>(elementBytes));
    if (!bytes) return error(at, fmt::format("fill(...) cannot draw element type '{}'", type));
    b.init = static_cast<int32_t>(program_.data.size());
    program_.data.push_back(DataBlob{std::move(*bytes), type, seed});
    return true;
  }
  if (!expect("[", "to start the initial values")) return false;
  uint64_t count = b.sizeBytes() / dtypeBytes(b.dtype);
  std::string bytes;  // grows with the values actually written (bounded by the input)
  uint64_t n = 0;
  auto put = [&](uint64_t v) {
    for (int i = 0; i < dtypeBytes(b.dtype); ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  while (peek().kind == Tok::Newline) next();
  if (!isPunct("]")) {
    do {
      while (peek().kind == Tok::Newline) next();
      SourceLocation vat = here();
      if (++n > count)
        return error(vat, fmt::format("too many initial values: buffer '{}' has {} elements", b.name, count));
      switch (b.dtype) {
        case DType::F32:
        case DType::Bf16:
        case DType::F16: {
          auto bits = parseFloatBits(b.dtype);
          if (!bits) return false;
          put(*bits);
          break;
        }
        default: {
          auto v = parseIntExpr("an initial value of an integer buffer");
          if (!v) return false;
          int width = dtypeBytes(b.dtype) * 8;
          bool isSigned = b.dtype == DType::S32 || b.dtype == DType::S16 || b.dtype == DType::S8 ||
                          b.dtype == DType::S4 || b.dtype == DType::S2 || b.dtype == DType::S1;
          int64_t lo = isSigned ? -(int64_t{1} << (width - 1)) : 0;
          int64_t hi = isSigned ? (int64_t{1} << (width - 1)) - 1 : (int64_t{1} << width) - 1;
          if (b.dtype == DType::Pred) hi = 1;
          if (*v < lo || *v > hi)
            return error(vat, fmt::format("value {} does not fit {}", *v, dtypeName(b.dtype)));
          put(static_cast<uint64_t>(*v));
          break;
        }
      }
      while (peek().kind == Tok::Newline) next();
    } while (accept(","));
  }
  if (!expect("]", "to end the initial values")) return false;
  if (n != count)
    return error(at, fmt::format("buffer '{}' has {} elements but {} initial value{} given", b.name, count, n,
                                 n == 1 ? " is" : "s are"));
  b.init = static_cast<int32_t>(program_.data.size());
  program_.data.push_back(DataBlob{std::move(bytes), {}, 0});
  return true;
}

bool Parser::parseDma() {
  const Token& name = next();
  if (name.kind != Tok::Ident) return error(loc(name), "expected a descriptor name after .dma");
  if (!defineName(name.text, loc(name))) return false;
  DmaDescriptor d;
  d.name = std::string(name.text);
  bool haveChunk = false;
  while (peek().kind == Tok::Ident) {
    const Token& key = next();
    if (!expect("=", fmt::format("after '{}'", key.text))) return false;
    if (key.text == "chunk") {
      SourceLocation at = here();
      auto v = parseIntExpr("the chunk size");
      if (!v) return false;
      if (*v <= 0 || *v > UINT32_MAX) return error(at, fmt::format("chunk size must be positive, got {}", *v));
      d.chunkBytes = static_cast<uint32_t>(*v);
      haveChunk = true;
    } else if (key.text == "dims") {
      if (!expect("[", "to start the dimension list")) return false;
      if (!accept("]")) {
        do {
          SourceLocation at = here();
          DmaDim dim;
          auto count = parseIntExpr("a dimension count");
          if (!count) return false;
          if (*count <= 0 || *count > UINT32_MAX) return error(at, fmt::format("dimension count must be positive, got {}", *count));
          dim.count = static_cast<uint32_t>(*count);
          if (!expect(":", "between count and source stride")) return false;
          auto ss = parseIntExpr("a source stride");
          if (!ss) return false;
          if (!expect(":", "between source and destination stride")) return false;
          auto ds = parseIntExpr("a destination stride");
          if (!ds) return false;
          dim.srcStride = *ss;
          dim.dstStride = *ds;
          if (d.dims.size() == 4) return error(at, "a DMA descriptor has at most 4 dimensions");
          d.dims.push_back(dim);
        } while (accept(","));
        if (!expect("]", "to end the dimension list")) return false;
      }
    } else {
      return error(loc(key), fmt::format("unknown DMA descriptor field '{}' (expected chunk or dims)", key.text));
    }
  }
  if (!haveChunk) return error(loc(name), fmt::format("DMA descriptor '{}' needs chunk=BYTES", d.name));
  if (program_.dmaDescriptors.size() >= 1024) return error(loc(name), "too many DMA descriptors (at most 1024)");
  program_.dmaDescriptors.push_back(std::move(d));
  return true;
}

std::optional<std::vector<std::string>> Parser::parseNameList() {
  std::vector<std::string> names;
  if (!expect("(", "to start the buffer list")) return std::nullopt;
  if (accept(")")) return names;
  do {
    const Token& t = next();
    if (t.kind != Tok::Ident) {
      error(loc(t), fmt::format("expected a buffer name, found {}", describe(t)));
      return std::nullopt;
    }
    auto b = program_.findBuffer(t.text);
    if (!b) {
      error(loc(t), fmt::format("unknown buffer '{}'", t.text));
      return std::nullopt;
    }
    if (program_.buffers[*b].space != MemSpace::Hbm) {
      error(loc(t), fmt::format("entry arguments and results must be HBM buffers; '{}' is in {}", t.text,
                                memSpaceName(program_.buffers[*b].space)));
      return std::nullopt;
    }
    names.emplace_back(t.text);
  } while (accept(","));
  if (!expect(")", "to end the buffer list")) return std::nullopt;
  return names;
}

bool Parser::parseEntry(const Token& directive) {
  const Token& name = next();
  if (name.kind != Tok::Ident) return error(loc(name), "expected an entry name after .entry");
  if (!defineName(name.text, loc(name))) return false;
  Entry e;
  e.name = std::string(name.text);
  auto args = parseNameList();
  if (!args) return false;
  for (const std::string& a : *args) e.args.push_back(*program_.findBuffer(a));
  if (accept("->")) {
    auto results = parseNameList();
    if (!results) return false;
    for (const std::string& r : *results) e.results.push_back(*program_.findBuffer(r));
  }
  program_.entries.push_back(std::move(e));
  items_.push_back(Item{Item::Entry, {}, loc(directive), program_.entries.size() - 1});
  return true;
}

// .kernel LABEL kind="..." hlo="..." [op_name="..."]: what the kernel at
// LABEL lowers (llo-gen writes one above each kernel label).
bool Parser::parseKernel() {
  const Token& name = next();
  if (name.kind != Tok::Ident) return error(loc(name), "expected a kernel label after .kernel");
  KernelMeta k;
  k.label = std::string(name.text);
  if (program_.findKernel(k.label)) return error(loc(name), fmt::format("kernel '{}' is described twice", k.label));
  bool haveKind = false, haveHlo = false, haveOpName = false;
  while (peek().kind == Tok::Ident) {
    const Token& key = next();
    bool* seen = key.text == "kind"      ? &haveKind
                 : key.text == "hlo"     ? &haveHlo
                 : key.text == "op_name" ? &haveOpName
                                         : nullptr;
    if (!seen)
      return error(loc(key), fmt::format("unknown .kernel field '{}' (expected kind, hlo or op_name)", key.text));
    if (*seen) return error(loc(key), fmt::format("duplicate .kernel field '{}'", key.text));
    *seen = true;
    if (!expect("=", "after the field name")) return false;
    const Token& value = next();
    if (value.kind != Tok::String) return error(loc(value), fmt::format("expected a \"string\" after '{}='", key.text));
    std::string text(value.text.substr(1, value.text.size() - 2));
    if (!isMetadataText(text))
      return error(loc(value), "a .kernel string must be valid UTF-8 without control characters");
    (key.text == "kind" ? k.kind : key.text == "hlo" ? k.hlo : k.opName) = std::move(text);
  }
  if (!haveKind || !haveHlo)
    return error(loc(name), fmt::format("'.kernel {}' needs kind=\"...\" and hlo=\"...\"", k.label));
  kernelLocs_.push_back(loc(name));
  program_.kernels.push_back(std::move(k));
  return true;
}

bool Parser::parseOp(PendingOp& op) {
  const Token& m = next();
  op.loc = loc(m);
  if (m.kind != Tok::Ident) return error(loc(m), fmt::format("expected an instruction, found {}", describe(m)));
  auto opcode = opcodeFromMnemonic(m.text);
  if (!opcode) return error(loc(m), fmt::format("unknown instruction '{}'", m.text));
  const InstrDesc& desc = instrDesc(*opcode);
  op.instr.opcode = *opcode;
  op.instr.operands.assign(desc.operands.size(), Operand{});
  std::vector<bool> given(desc.operands.size(), false);
  size_t positional = 0;
  bool named = false;
  if (!atStatementEnd()) {
    do {
      SourceLocation at = here();
      size_t index;
      if (peek().kind == Tok::Ident && isPunct("=", 1)) {
        const Token& key = next();
        next();
        auto it = std::find_if(desc.operands.begin(), desc.operands.end(),
                               [&](const OperandDesc& od) { return od.name == key.text; });
        if (it == desc.operands.end())
          return error(loc(key), fmt::format("'{}' has no operand named '{}'", desc.mnemonic, key.text));
        index = static_cast<size_t>(it - desc.operands.begin());
        if (given[index]) return error(loc(key), fmt::format("operand '{}' is given twice", key.text));
        named = true;
      } else {
        if (named) return error(at, "positional operands must come before named ones");
        if (positional >= desc.operands.size())
          return error(at, fmt::format("too many operands: '{}' takes {}", desc.mnemonic, desc.operands.size()));
        index = positional++;
      }
      given[index] = true;
      if (!parseOperand(desc, desc.operands[index], op, index, op.instr.operands[index])) return false;
    } while (accept(","));
  }
  if (!atStatementEnd())
    return error(here(), fmt::format("expected ',' or the end of the instruction, found {}", describe(peek())));
  for (size_t i = 0; i < desc.operands.size(); ++i) {
    if (given[i]) continue;
    const OperandDesc& od = desc.operands[i];
    if (!od.hasDefault) {
      std::string usage(desc.mnemonic);
      for (size_t k = 0; k < desc.operands.size(); ++k)
        usage += fmt::format("{}{}", k ? ", " : " ", desc.operands[k].name);
      return error(op.loc, fmt::format("missing operand '{}' of '{}' (usage: {})", od.name, desc.mnemonic, usage));
    }
    Operand& o = op.instr.operands[i];
    o.kind = od.kind;
    o.form = SrcForm::Imm;
    o.imm = od.defaultValue;
  }
  return true;
}

bool Parser::parseOperand(const InstrDesc& desc, const OperandDesc& od, PendingOp& op, size_t index, Operand& o) {
  o.kind = od.kind;
  const Token& t = peek();
  SourceLocation at = loc(t);
  auto want = [&](std::string_view what) {
    return error(at, fmt::format("operand '{}' of '{}' must be {}, found {}", od.name, desc.mnemonic, what,
                                 describe(t)));
  };
  auto reg = [&](std::string_view prefix) -> std::optional<int> {
    if (t.kind != Tok::Ident) return std::nullopt;
    return regNumber(t.text, prefix);
  };
  auto int32Imm = [&](std::string_view what) -> bool {
    auto v = parseIntExpr(what);
    if (!v) return false;
    if (*v < INT32_MIN || *v > UINT32_MAX) return error(at, fmt::format("immediate {} does not fit 32 bits", *v));
    o.imm = static_cast<int32_t>(static_cast<uint32_t>(*v));
    return true;
  };
  bool floatCtx = desc.elemType == ElemType::F32;
  switch (od.kind) {
    case OperandKind::SReg:
    case OperandKind::VReg:
    case OperandKind::VMask:
    case OperandKind::Mxu:
    case OperandKind::Xlu: {
      static constexpr std::string_view prefixes[] = {"s", "v", "m"};
      std::string_view prefix = od.kind == OperandKind::Mxu   ? "mxu"
                                : od.kind == OperandKind::Xlu ? "xlu"
                                                              : prefixes[static_cast<int>(od.kind)];
      auto r = reg(prefix);
      static constexpr std::string_view names[] = {"a scalar register (sN)", "a vector register (vN)",
                                                   "a mask register (mN)"};
      if (!r)
        return want(od.kind == OperandKind::Mxu   ? "an MXU (mxuN)"
                    : od.kind == OperandKind::Xlu ? "a transpose unit (xluN)"
                                                  : names[static_cast<int>(od.kind)]);
      next();
      o.reg = *r;
      return true;
    }
    case OperandKind::Imm: return int32Imm(fmt::format("operand '{}'", od.name));
    case OperandKind::SublaneMask: {
      auto v = parseIntExpr("a sublane mask");
      if (!v) return false;
      if (*v < 0 || *v > 0xff) return error(at, fmt::format("sublane mask {} does not fit 8 bits", *v));
      o.imm = *v;
      return true;
    }
    case OperandKind::FImm: {
      auto bits = parseFloatBits();
      if (!bits) return false;
      o.imm = static_cast<int32_t>(*bits);
      return true;
    }
    case OperandKind::SRegImm:
      if (auto r = reg("s")) {
        next();
        o.form = SrcForm::SReg;
        o.reg = *r;
        return true;
      }
      if (t.kind == Tok::Ident && (regNumber(t.text, "v") || regNumber(t.text, "m")))
        return want("a scalar register or an integer");
      o.form = SrcForm::Imm;
      return int32Imm(fmt::format("operand '{}'", od.name));
    case OperandKind::VSrc:
      if (auto r = reg("v")) {
        next();
        o.form = SrcForm::Reg;
        o.reg = *r;
        return true;
      }
      if (auto r = reg("s")) {
        next();
        o.form = SrcForm::SReg;
        o.reg = *r;
        return true;
      }
      if (t.kind == Tok::Ident && regNumber(t.text, "m")) return want("a vector register, scalar register or immediate");
      o.form = SrcForm::Imm;
      if (floatCtx) {
        auto bits = parseFloatBits();
        if (!bits) return false;
        o.imm = static_cast<int32_t>(*bits);
        return true;
      }
      return int32Imm(fmt::format("operand '{}'", od.name));
    case OperandKind::Label:
      if (t.kind == Tok::Ident) {
        next();
        op.labelRefs.push_back(LabelRef{index, std::string(t.text), at});
        return true;
      }
      if (accept("@")) {
        auto v = parseIntExpr("a bundle index");
        if (!v) return false;
        if (*v < 0 || *v > INT32_MAX) return error(at, fmt::format("bad bundle index {}", *v));
        o.imm = *v;
        return true;
      }
      return want("a label");
    case OperandKind::VmemAddr:
    case OperandKind::SmemAddr:
      if (!isPunct("[")) return want(od.kind == OperandKind::VmemAddr ? "a VMEM address [...]" : "an SMEM address [...]");
      return parseAddress(od.kind, o);
    case OperandKind::HbmAddr: {
      if (t.kind != Tok::Ident) return want("an HBM buffer (name or name[offset])");
      if (opMode_) {
        op.bufferRefs.push_back(LabelRef{index, std::string(t.text), at});
        next();
        o.buffer = 0;
        o.reg = -1;
        o.imm = 0;
        if (isPunct("[") && !parseAddress(OperandKind::HbmAddr, o)) return false;
        if (o.imm < -(int64_t{1} << 23) || o.imm >= (int64_t{1} << 23))
          return error(at, fmt::format("HBM offset {} does not fit 24 signed bits; add it to the base register",
                                       o.imm));
        return true;
      }
      auto b = program_.findBuffer(t.text);
      if (!b) return error(at, fmt::format("unknown buffer '{}'", t.text));
      if (program_.buffers[*b].space != MemSpace::Hbm)
        return error(at, fmt::format("operand '{}' of '{}' must be an HBM buffer; '{}' is in {}", od.name,
                                     desc.mnemonic, t.text, memSpaceName(program_.buffers[*b].space)));
      next();
      o.buffer = *b;
      o.reg = -1;
      o.imm = 0;
      if (isPunct("[")) {
        if (!parseAddress(OperandKind::HbmAddr, o)) return false;
        o.buffer = *b;
      }
      if (o.imm < -(int64_t{1} << 23) || o.imm >= (int64_t{1} << 23))
        return error(at, fmt::format("HBM offset {} does not fit 24 signed bits; add it to the base register",
                                     o.imm));
      return true;
    }
    case OperandKind::Sem: {
      if (t.kind == Tok::Ident && t.text == "sem" && isPunct("[", 1)) {
        next();
        next();
        std::optional<int> r;
        if (peek().kind == Tok::Ident) r = regNumber(peek().text, "s");
        if (r) {
          next();
          o.form = SrcForm::SReg;
          o.reg = *r;
        } else {
          auto v = parseIntExpr("a semaphore number");
          if (!v) return false;
          if (*v < 0 || *v > 63) return error(at, fmt::format("semaphore number {} is outside 0..63", *v));
          o.form = SrcForm::Imm;
          o.imm = *v;
        }
        return expect("]", "after the semaphore index");
      }
      auto r = reg("sem");
      if (!r) return want("a semaphore (semN or sem[sN])");
      if (*r > 63) return error(at, fmt::format("semaphore number {} is outside 0..63", *r));
      next();
      o.form = SrcForm::Imm;
      o.reg = -1;
      o.imm = *r;
      return true;
    }
    case OperandKind::DmaDesc: {
      if (t.kind != Tok::Ident) return want("a DMA descriptor name");
      if (opMode_) {
        op.descRefs.push_back(LabelRef{index, std::string(t.text), at});
        next();
        return true;
      }
      for (size_t i = 0; i < program_.dmaDescriptors.size(); ++i)
        if (program_.dmaDescriptors[i].name == t.text) {
          next();
          o.imm = static_cast<int64_t>(i);
          return true;
        }
      return error(at, fmt::format("unknown DMA descriptor '{}'", t.text));
    }
  }
  return false;
}

// [sN + expr - expr ...]: at most one base register (added), the rest constant.
bool Parser::parseAddress(OperandKind kind, Operand& o) {
  SourceLocation open = here();
  next();  // '['
  o.reg = -1;
  int64_t offset = 0;
  bool first = true;
  std::optional<MemSpace> space;
  while (true) {
    bool negative = false;
    if (!first) {
      if (accept("+")) negative = false;
      else if (accept("-")) negative = true;
      else break;
    }
    first = false;
    const Token& t = peek();
    if (t.kind == Tok::Ident && regNumber(t.text, "s") && !isPunct("*", 1)) {
      if (negative) return error(loc(t), "a base register cannot be subtracted");
      if (o.reg >= 0) return error(loc(t), "an address may have only one base register");
      o.reg = *regNumber(t.text, "s");
      next();
      continue;
    }
    lastBufferSpace_.reset();
    auto v = parseExpr(5 + 1);  // one additive term
    if (!v) return false;
    if (v->isFloat) return error(loc(t), "an address must be an integer");
    if (lastBufferSpace_) space = lastBufferSpace_;
    offset = negative ? offset - v->i : offset + v->i;
  }
  if (!expect("]", "to close the address")) return false;
  if (space) {
    MemSpace want = kind == OperandKind::VmemAddr ? MemSpace::Vmem : MemSpace::Smem;
    if (kind == OperandKind::HbmAddr || *space != want)
      return error(open, fmt::format("the address names a {} buffer but the operand is in {}", memSpaceName(*space),
                                     kind == OperandKind::VmemAddr ? "VMEM" : kind == OperandKind::SmemAddr ? "SMEM"
                                                                                                           : "HBM"));
  }
  if (offset < INT32_MIN || offset > INT32_MAX)
    return error(open, fmt::format("address offset {} does not fit 32 bits", offset));
  o.imm = offset;
  return true;
}

// ---------------------------------------------------------------- phase 2

bool Parser::resolveTarget() {
  std::string name = options_.target;
  if (!targetDirective.empty()) {
    if (options_.targetIsExplicit) {
      target_ = target::loadTarget(options_.target, diags_);
      if (!target_) return false;
      if (target_->name != targetDirective)
        return error(targetLoc_, fmt::format("the file is written for target '{}' but --target gives '{}'",
                                             targetDirective, target_->name));
      return true;
    }
    name = targetDirective;
    size_t before = diags_.errorCount();
    target_ = target::loadTarget(name, diags_);
    if (!target_ && diags_.errorCount() == before) error(targetLoc_, fmt::format("cannot load target '{}'", name));
    return target_.has_value();
  }
  if (options_.targetDesc) {
    target_ = *options_.targetDesc;
    return true;
  }
  target_ = target::loadTarget(name, diags_);
  return target_.has_value();
}

bool Parser::layOut() {
  const TargetDesc& t = *target_;
  program_.targetName = t.name;
  program_.targetJson = t.json;
  std::vector<std::vector<const PendingOp*>> placed;  // ops of each bundle, for fixups and errors
  bool open = false;  // the last bundle accepts more automatically bundled ops
  auto closeBundle = [&] { open = false; };
  bool ok = true;
  // Instructions move from the parsed items into the bundles (the items keep
  // their positions and label references for the checks below).
  for (Item& item : items_) {
    switch (item.kind) {
      case Item::Label:
        closeBundle();
        program_.labels[item.index].bundle = static_cast<uint32_t>(program_.bundles.size());
        break;
      case Item::Entry:
        closeBundle();
        program_.entries[item.index].start = static_cast<uint32_t>(program_.bundles.size());
        break;
      case Item::Bundle: {
        closeBundle();
        Bundle b;
        placed.emplace_back();
        for (PendingOp& op : item.ops) {
          b.instrs.push_back(std::move(op.instr));
          placed.back().push_back(&op);
        }
        program_.bundles.push_back(std::move(b));
        break;
      }
      case Item::Op: {
        PendingOp& op = item.ops.front();
        bool endsBundle = op.instr.desc().endsBundle();
        if (open && options_.autoBundle && bundleConflict(program_.bundles.back(), op.instr, t).empty()) {
          program_.bundles.back().instrs.push_back(std::move(op.instr));
          placed.back().push_back(&op);
        } else {
          program_.bundles.emplace_back();
          program_.bundles.back().instrs.push_back(std::move(op.instr));
          placed.push_back({&op});
          open = true;
        }
        if (endsBundle) closeBundle();
        break;
      }
    }
  }
  // Label fixups, then per-op and per-bundle legality with source positions.
  for (size_t b = 0; b < program_.bundles.size(); ++b) {
    for (size_t i = 0; i < placed[b].size(); ++i) {
      const PendingOp& op = *placed[b][i];
      Instr& instr = program_.bundles[b].instrs[i];
      for (const LabelRef& ref : op.labelRefs) {
        auto it = labelIndex_.find(ref.name);
        if (it == labelIndex_.end()) {
          ok = error(ref.loc, fmt::format("undefined label '{}'", ref.name));
          continue;
        }
        instr.operands[ref.operand].imm = program_.labels[it->second].bundle;
        instr.operands[ref.operand].kind = OperandKind::Label;
      }
    }
  }
  for (size_t k = 0; k < program_.kernels.size(); ++k)
    if (!labelIndex_.count(program_.kernels[k].label))
      ok = error(kernelLocs_[k], fmt::format("'.kernel {}' describes an undefined label", program_.kernels[k].label));
  if (!ok) return false;
  if (std::string e = checkProgramTables(program_, &t); !e.empty()) {
    // Point at the buffer or the file start; table problems name their object.
    return error(SourceLocation{file_, 0}, e);
  }
  for (size_t b = 0; b < program_.bundles.size(); ++b) {
    for (size_t i = 0; i < placed[b].size(); ++i) {
      const Instr& instr = program_.bundles[b].instrs[i];
      std::string e = checkInstrStructure(instr, program_);
      if (e.empty()) e = checkInstrForTarget(instr, t);
      if (!e.empty()) ok = error(placed[b][i]->loc, e);
    }
    if (!ok) continue;
    if (std::string e = checkBundle(program_.bundles[b], t); !e.empty()) ok = error(placed[b].front()->loc, e);
  }
  return ok;
}

std::optional<Assembled> Parser::run() {
  size_t errorsBefore = diags_.errorCount();
  if (!lex()) return std::nullopt;
  while (peek().kind != Tok::End) {
    dropConsumed();
    if (!parseStatement()) {
      if (diags_.errorLimitReached()) return std::nullopt;
      skipToLineEnd();
      if (peek().kind == Tok::End) break;
    }
  }
  if (diags_.errorCount() != errorsBefore) return std::nullopt;
  if (!resolveTarget()) return std::nullopt;
  if (!layOut()) return std::nullopt;
  return Assembled{std::move(program_), std::move(*target_)};
}

bool Parser::parseSingleOp(const SourceFile& file, PendingOp& op) {
  file_ = &file;
  opMode_ = true;
  tokens_.clear();
  lexPos_ = 0;
  lexDone_ = false;
  pos_ = 0;
  if (!lex()) return false;
  if (!parseOp(op)) return false;
  if (peek().kind != Tok::End)
    return error(here(), fmt::format("unexpected {} after the instruction", describe(peek())));
  return true;
}

}  // namespace

struct OpParser::Impl {
  SourceFile empty{"<op>", ""};
  AsmOptions options;
  DiagnosticEngine diags;
  Parser parser{empty, options, diags};
};

OpParser::OpParser() : impl_(std::make_unique<Impl>()) {}
OpParser::~OpParser() = default;

bool OpParser::parse(std::string_view text, ParsedOp& out, std::string& error) {
  SourceFile file("<op>", std::string(text));
  PendingOp op;
  impl_->diags.clear();
  bool ok = impl_->parser.parseSingleOp(file, op) && !impl_->diags.hasErrors();
  if (!ok) {
    error = impl_->diags.diagnostics().empty() ? std::string("malformed instruction")
                                               : impl_->diags.diagnostics().front().message;
    return false;
  }
  out.instr = std::move(op.instr);
  out.refs.clear();
  auto add = [&](const std::vector<LabelRef>& refs, OpSymbol::Kind kind) {
    for (const LabelRef& r : refs) out.refs.push_back(OpSymbol{kind, static_cast<uint32_t>(r.operand), r.name});
  };
  add(op.labelRefs, OpSymbol::Label);
  add(op.bufferRefs, OpSymbol::Buffer);
  add(op.descRefs, OpSymbol::Descriptor);
  return true;
}

std::optional<Assembled> assembleLlo(const SourceFile& file, const AsmOptions& options, DiagnosticEngine& diags) {
  size_t before = diags.errorCount();
  Parser parser(file, options, diags);
  auto result = parser.run();
  if (diags.errorCount() != before) return std::nullopt;
  return result;
}

}  // namespace tpu::llo
