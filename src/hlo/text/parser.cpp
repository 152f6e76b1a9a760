#include "hlo/text/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "hlo/text/lexer.h"

namespace tpu::hlo {

namespace {

using text::Lexer;
using text::TokKind;
using text::Token;

// Attribute values that name computations, collected then assembled in XLA's order.
struct CalledSlots {
  Computation* condition = nullptr;
  Computation* body = nullptr;
  Computation* trueComputation = nullptr;
  Computation* falseComputation = nullptr;
  Computation* select = nullptr;
  Computation* scatter = nullptr;
  std::vector<Computation*> branches;
  std::vector<Computation*> toApply;  // to_apply / calls / called_computations
  bool any = false;
};

// Instructions of the computation being parsed by name: open addressing over
// views of the instructions' own names. One table serves every computation
// of a module, so parsing allocates nothing per name.
class NameTable {
 public:
  // Empties the table, sized for `expected` names without growing.
  void clear(size_t expected = 0) {
    cap_ = kInitialCapacity;
    while (cap_ < 2 * expected + 2) cap_ *= 2;
    if (slots_.size() < cap_) slots_.resize(cap_);
    std::fill(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(cap_), Slot{});
    count_ = 0;
  }
  Instruction* find(std::string_view name) const {
    for (size_t i = hash(name) & (cap_ - 1);; i = (i + 1) & (cap_ - 1)) {
      const Slot& s = slots_[i];
      if (!s.value) return nullptr;
      if (s.key == name) return s.value;
    }
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // `name` must outlive the table's use (the instruction's own name).
  void insert(std::string_view name, Instruction* inst) {
    if (2 * (count_ + 1) > cap_) grow();
    place(name, inst);
    ++count_;
  }

 private:
  struct Slot {
    std::string_view key;
    Instruction* value = nullptr;
  };
  static constexpr size_t kInitialCapacity = 64;

  static size_t hash(std::string_view s) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 29;
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    return static_cast<size_t>(h ^ (h >> 32));
  }
  void place(std::string_view name, Instruction* inst) {
    size_t i = hash(name) & (cap_ - 1);
    while (slots_[i].value) i = (i + 1) & (cap_ - 1);
    slots_[i] = Slot{name, inst};
  }
  void grow() {
    std::vector<Slot> old(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(cap_));
    cap_ *= 2;
    if (slots_.size() < cap_) slots_.resize(cap_);
    std::fill(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(cap_), Slot{});
    for (const Slot& s : old)
      if (s.value) place(s.key, s.value);
  }

  std::vector<Slot> slots_;  // the first cap_ entries are in use; capacity is kept across clear()
  size_t cap_ = 0;
  size_t count_ = 0;
};

// A map from spellings (views into the source, which outlives the parser)
// to values: open addressing in one array, no node per entry; each slot
// keeps its key's hash, so growing and probing compare bytes only on a
// likely match.
template <typename Value>
class SpellingTable {
 public:
  static size_t hash(std::string_view key) { return std::hash<std::string_view>()(key); }
  const Value* find(std::string_view key, size_t h) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.hash == h && s.key == key) return &s.value;
    }
  }
  void insert(std::string_view key, size_t h, const Value& value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = {key, h, value, true};
        ++size_;
        return;
      }
      if (s.hash == h && s.key == key) return;
    }
  }

 private:
  struct Slot {
    std::string_view key;
    size_t hash = 0;
    Value value;
    bool used = false;
  };
  void grow() {
    std::vector<Slot> old(std::max<size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    size_ = 0;
    for (Slot& s : old)
      if (s.used) insert(s.key, s.hash, s.value);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// Attribute blocks of equal content shared between the instructions of a
// parse: a module repeats a few blocks many times (`dimensions={1}` on every
// broadcast of a bias, `{1,0}` on transposes, the dot numbers of a layer),
// and a shared block is a reference count where each copy took 760 bytes
// that every later walk (verifier, printer, the passes) reads whole.
// Copy-on-write keeps this invisible: the mutable accessor unshares first.
// The hash reads the fields that tell blocks apart in practice and the
// full comparison decides; a probe compares at most kMaxCompares blocks, so
// a run of blocks alike in the hashed fields and different elsewhere costs
// a bounded amount per instruction. Constants are left alone (their
// payloads would be compared whole).
class AttributeInterner {
 public:
  void intern(Instruction& inst) {
    const Instruction& in = inst;
    if (!in.hasAttributes() || in.attrs().literal) return;
    const size_t h = hash(in.attrs());
    if ((size_ + 1) * 2 > slots_.size()) grow();
    int compares = 0;
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (!s.inst) {
        if (compares < kMaxCompares) {
          s = {h, &in};
          ++size_;
        }
        return;
      }
      if (s.hash != h) continue;
      if (s.inst->attrs() == in.attrs()) {
        inst.shareAttributesOf(*s.inst);
        return;
      }
      if (++compares >= kMaxCompares) return;
    }
  }

 private:
  static constexpr int kMaxCompares = 4;
  struct Slot {
    size_t hash = 0;
    const Instruction* inst = nullptr;  // holds the block (instructions live as long as the parse)
  };
  static size_t mix(size_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }
  template <typename Range>
  static size_t mixAll(size_t h, const Range& r) {
    h = mix(h, r.size());
    for (const auto& v : r) h = mix(h, static_cast<uint64_t>(v));
    return h;
  }
  static size_t hash(const InstructionAttributes& a) {
    size_t h = 0xcbf29ce484222325ull;
    h = mixAll(h, a.dimensions);
    h = mix(h, static_cast<uint64_t>(a.tupleIndex));
    h = mix(h, static_cast<uint64_t>(a.parameterNumber));
    h = mix(h, static_cast<uint64_t>(a.iotaDimension));
    for (const SliceDimension& d : a.slice) h = mix(mix(h, static_cast<uint64_t>(d.start)), static_cast<uint64_t>(d.limit));
    for (const PaddingDimension& d : a.padding) h = mix(mix(h, static_cast<uint64_t>(d.low)), static_cast<uint64_t>(d.high));
    h = mixAll(h, a.dynamicSliceSizes);
    h = mix(h, a.window ? a.window->dimensions.size() + 1 : 0);
    h = mixAll(h, a.dotDims->lhsContractingDimensions);
    h = mixAll(h, a.dotDims->rhsContractingDimensions);
    h = mixAll(h, a.dotDims->lhsBatchDimensions);
    h = mix(h, static_cast<uint64_t>(a.comparisonDirection) << 16 | static_cast<uint64_t>(a.comparisonType) << 8 |
                   static_cast<uint64_t>(a.fusionKind));
    h = mix(h, std::hash<std::string>()(a.customCallTarget));
    return h;
  }
  void grow() {
    std::vector<Slot> old(std::max<size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old)
      if (s.inst) {
        size_t i = s.hash & (slots_.size() - 1);
        while (slots_[i].inst) i = (i + 1) & (slots_.size() - 1);
        slots_[i] = s;
        ++size_;
      }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

class Parser {
 public:
  Parser(const SourceFile& file, DiagnosticEngine& diags, const ParseOptions& options)
      : file_(file), diags_(diags), options_(options), lex_(file.contents()) {}

  std::unique_ptr<Module> parseModule();
  std::optional<Shape> parseShapeOnly();

 private:
  // ------------------------------------------------------------ tokens
  void advance() { tok_ = lex_.next(); }
  SourceLocation locAt(size_t offset) const { return SourceLocation{&file_, offset}; }
  SourceLocation loc() const { return locAt(tok_.offset); }

  bool error(size_t offset, std::string message) {
    if (!failed_) diags_.error(locAt(offset), std::move(message));
    failed_ = true;
    return false;
  }
  bool error(std::string message) {
    if (tok_.kind == TokKind::Error) return error(tok_.offset, std::string(tok_.text));
    return error(tok_.offset, std::move(message));
  }
  std::string describe() const {
    switch (tok_.kind) {
      case TokKind::Eof: return "end of input";
      case TokKind::Name: return fmt::format("name '{}'", tok_.text);
      case TokKind::AttrName: return fmt::format("attribute '{}='", tok_.text);
      case TokKind::Ident: return fmt::format("'{}'", tok_.text);
      case TokKind::String: return "string";
      case TokKind::Int:
      case TokKind::Decimal: return fmt::format("number '{}'", tok_.text);
      default: return std::string(text::tokKindName(tok_.kind));
    }
  }
  bool expect(TokKind kind, std::string_view what) {
    if (tok_.kind != kind) return error(fmt::format("expected {}, got {}", what, describe()));
    advance();
    return true;
  }
  bool consumeIf(TokKind kind) {
    if (tok_.kind != kind) return false;
    advance();
    return true;
  }
  bool isIdent(std::string_view s) const { return tok_.kind == TokKind::Ident && tok_.text == s; }

  struct DepthGuard {
    Parser& p;
    bool ok;
    explicit DepthGuard(Parser& parser) : p(parser), ok(++parser.depth_ <= parser.options_.maxNestingDepth) {
      if (!ok) p.error("nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ------------------------------------------------------------ values
  bool parseInt64(int64_t* out, std::string_view what = "integer");
  bool parseUint64Like(int64_t* out);  // non-negative literals may use the uint64 range
  bool parseBool(bool* out);
  bool parseString(std::string* out);
  bool parseIntList(std::vector<int64_t>* out, TokKind open = TokKind::LBrace, TokKind close = TokKind::RBrace);
  bool parseIntListList(std::vector<std::vector<int64_t>>* out);
  bool parseDouble(double* out);
  bool parseShapeIndex(ShapeIndex* out);

  // ------------------------------------------------------------ shapes
  bool parseShape(Shape* out);
  // Operand shape annotations are only checked, so they are read into a flat
  // signature (no allocation once warm) and compared with the operand's shape.
  bool parseShapeSignature(std::vector<int64_t>& sig);
  static bool signatureMatches(const Shape& s, const std::vector<int64_t>& sig, size_t& i);
  bool parseLayout(Shape* shape);
  bool startsShape();
  size_t scanPlainArray(bool* hasLayout);

  // ------------------------------------------------------------ literals
  bool parseLiteral(const Shape& shape, Literal* out);
  bool parseDenseLiteral(const Shape& shape, Literal* out);
  bool parseScalarInto(Literal& lit, int64_t index);

  // ------------------------------------------------------------ module
  bool parseHeader(Module& m);
  bool parseStackFrames(Module& m);
  bool parseComputation(Module& m);
  bool parseComputationBody(Module& m, Computation& c);
  bool parseComputationBody(Module& m, Computation& c, NameTable& names);
  size_t countBodyLines();
  bool parseInstruction(Module& m, Computation& c, NameTable& names);
  Instruction* parseOperand(Module& m, Computation& c, NameTable& names,
                            int anonDepth);
  bool parseOperands(Module& m, Computation& c, Instruction& inst,
                     NameTable& names, int anonDepth);
  bool parseAttribute(Module& m, Instruction& inst, NameTable& names,
                      CalledSlots& called);
  bool finishInstruction(Module& m, Computation& c, Instruction& inst, CalledSlots& called, size_t opcodeOffset,
                         std::string_view sugarSuffix);
  Computation* parseComputationRef(Module& m);
  bool parseComputationList(Module& m, std::vector<Computation*>* out);

  // ------------------------------------------------------------ attribute values
  bool parseWindow(Window* out);
  bool parseDimLabels(ConvolutionDimensionNumbers* out);
  bool parsePadding(std::vector<PaddingDimension>* out);
  bool parseSliceRanges(std::vector<SliceDimension>* out);
  bool parseReplicaGroups(ReplicaGroups* out);
  bool parseIotaList(IotaList* out, bool requirePermForMultiDim);
  bool parseSharding(Sharding* out);
  bool parseSingleSharding(Sharding* out);
  bool parseMetadata(OpMetadata* out);
  bool parseFrontendAttributes(FrontendAttributes* out);
  bool parseBackendConfig(BackendConfig* out);
  bool parseOutputOperandAliasing(std::vector<OutputOperandAlias>* out);
  bool parsePrecisionList(std::vector<Precision>* out);
  bool parseStatistics(Statistics* out);
  bool parseDomain(DomainMetadata* out);
  bool parseResultAccuracy(ResultAccuracy* out);
  bool parseSourceTargetPairs(std::vector<std::pair<int64_t, int64_t>>* out);
  bool parseBoolList(std::vector<bool>* out);
  bool parseShapeList(std::vector<Shape>* out);
  bool parseComputationLayout(ComputationLayout* out);
  template <typename E>
  bool parseEnum(E* out, std::optional<E> (*fn)(std::string_view), std::string_view what);

  const SourceFile& file_;
  DiagnosticEngine& diags_;
  ParseOptions options_;
  Lexer lex_;
  Token tok_;
  bool failed_ = false;
  // The last instruction metadata parsed: runs of instructions repeat one
  // verbatim (PyTorch/XLA dumps do for each traced op), and share it.
  SharedValue<OpMetadata> lastMetadata_;
  SpellingTable<SharedValue<OpMetadata>> metadataBySpelling_;
  // The offset just past the '}' closing the group opened at `open`, found
  // by bytes (strings skipped, braces nested); 0 when a comment, an
  // unterminated string or the end of the input makes that unsure (then
  // the caller parses token by token).
  size_t braceGroupEnd(size_t open) const {
    std::string_view s = file_.contents();
    int depth = 0;
    for (size_t i = open; i < s.size(); ++i) {
      char c = s[i];
      if (c == '"') {
        // To the closing quote: the next '"' not escaped by an odd run of
        // backslashes (metadata strings are most of the bytes).
        for (;;) {
          const void* q = std::memchr(s.data() + i + 1, '"', s.size() - i - 1);
          if (!q) return 0;
          i = static_cast<size_t>(static_cast<const char*>(q) - s.data());
          size_t backslashes = 0;
          while (s[i - 1 - backslashes] == '\\') ++backslashes;
          if (backslashes % 2 == 0) break;
        }
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        if (--depth == 0) return i + 1;
      } else if (c == '/' || c == '\'' || c == '\0') {
        return 0;
      }
    }
    return 0;
  }
  int depth_ = 0;
  bool compareTypeGiven_ = false;
  std::vector<int64_t> dimsScratch_;
  std::vector<int64_t> layoutScratch_;
  // Plain array shapes by spelling (`f32[8,128]{1,0}`): a module has a few
  // dozen distinct shapes for thousands of uses, and each use then costs a
  // reference count instead of three allocations.
  SpellingTable<Shape> plainShapes_;
  std::vector<int64_t> signature_;
  std::vector<bool> dynamicScratch_;
  std::vector<Instruction*> operandStack_;
  std::vector<std::string_view> seenAttrs_;
  NameTable names_;  // the outermost body's names
  bool namesInUse_ = false;
  size_t countedUpTo_ = 0;  // countBodyLines has scanned the text before this offset
  std::unordered_map<std::string, Computation*> computationsByName_;
  AttributeInterner attributeBlocks_;
};

// ============================================================ values

bool Parser::parseInt64(int64_t* out, std::string_view what) {
  if (tok_.kind != TokKind::Int) return error(fmt::format("expected {}, got {}", what, describe()));
  if (tok_.overflow) return error("integer does not fit in 64 bits");
  if (tok_.negative) {
    if (tok_.intMag > uint64_t{1} << 63) return error("integer out of int64 range");
    *out = static_cast<int64_t>(~tok_.intMag + 1);
  } else {
    if (tok_.intMag > static_cast<uint64_t>(INT64_MAX)) return error("integer out of int64 range");
    *out = static_cast<int64_t>(tok_.intMag);
  }
  advance();
  return true;
}

bool Parser::parseBool(bool* out) {
  if (isIdent("true")) {
    *out = true;
  } else if (isIdent("false")) {
    *out = false;
  } else {
    return error(fmt::format("expected true or false, got {}", describe()));
  }
  advance();
  return true;
}

bool Parser::parseString(std::string* out) {
  if (tok_.kind != TokKind::String) return error(fmt::format("expected string, got {}", describe()));
  if (tok_.hasEscape)
    *out = text::unescape(tok_.text);
  else
    out->assign(tok_.text);
  advance();
  return true;
}

bool Parser::parseIntList(std::vector<int64_t>* out, TokKind open, TokKind close) {
  out->clear();
  if (!expect(open, open == TokKind::LBrace ? "'{'" : open == TokKind::LParen ? "'('" : "'['")) return false;
  if (consumeIf(close)) return true;
  do {
    int64_t v;
    if (!parseInt64(&v)) return false;
    out->push_back(v);
  } while (consumeIf(TokKind::Comma));
  return expect(close, close == TokKind::RBrace ? "'}'" : close == TokKind::RParen ? "')'" : "']'");
}

bool Parser::parseIntListList(std::vector<std::vector<int64_t>>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    out->emplace_back();
    if (!parseIntList(&out->back())) return false;
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseDouble(double* out) {
  if (tok_.kind == TokKind::Int || tok_.kind == TokKind::Decimal) {
    const char* b = tok_.text.data();
    const char* e = b + tok_.text.size();
    auto r = std::from_chars(b, e, *out);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow to zero/denormal is fine; overflow is an error.
      double v = std::strtod(std::string(tok_.text).c_str(), nullptr);
      if (std::isinf(v)) return error("decimal is out of range for double");
      *out = v;
    } else if (r.ec != std::errc() || r.ptr != e) {
      return error(fmt::format("invalid number '{}'", tok_.text));
    }
    advance();
    return true;
  }
  if (tok_.kind == TokKind::Ident) {
    if (tok_.text == "inf") {
      *out = INFINITY;
    } else if (tok_.text == "-inf") {
      *out = -INFINITY;
    } else if (tok_.text == "nan") {
      *out = NAN;
    } else if (tok_.text == "-nan") {
      *out = -NAN;
    } else {
      return error(fmt::format("expected a number, got {}", describe()));
    }
    advance();
    return true;
  }
  return error(fmt::format("expected a number, got {}", describe()));
}

bool Parser::parseShapeIndex(ShapeIndex* out) { return parseIntList(out); }

bool Parser::parseBoolList(std::vector<bool>* out) {
  out->clear();
  if (tok_.kind == TokKind::Ident) {  // a bare bool is accepted for single-element lists
    bool b;
    if (!parseBool(&b)) return false;
    out->push_back(b);
    return true;
  }
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    bool b;
    if (!parseBool(&b)) return false;
    out->push_back(b);
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

template <typename E>
bool Parser::parseEnum(E* out, std::optional<E> (*fn)(std::string_view), std::string_view what) {
  if (tok_.kind != TokKind::Ident) return error(fmt::format("expected {}, got {}", what, describe()));
  auto v = fn(tok_.text);
  if (!v) return error(fmt::format("unknown {} '{}'", what, tok_.text));
  *out = *v;
  advance();
  return true;
}

// ============================================================ shapes

bool Parser::startsShape() {
  if (tok_.kind == TokKind::LParen) return true;
  if (tok_.kind != TokKind::Ident) return false;
  if (tok_.text == "b") return lex_.peekChar() == '(';  // buffer shape b(...)
  return elementTypeFromName(tok_.text).has_value();
}

// The common array shape `f32[2,16]{1,0}` read straight from the text
// instead of as 13 tokens: plain sizes into dimsScratch_ and an optional
// plain minor_to_major (a permutation of the dimensions) into layoutScratch_.
// `tok_` is the element type. Returns the offset just past the shape, or 0
// (nothing consumed) for any other form, which the token path then reads and
// diagnoses as before.
size_t Parser::scanPlainArray(bool* hasLayout) {
  std::string_view text = file_.contents();
  const char* s = text.data();
  const size_t n = text.size();
  size_t p = tok_.offset + tok_.text.size();
  auto digit = [&](size_t at) { return at < n && s[at] >= '0' && s[at] <= '9'; };
  auto readInts = [&](std::vector<int64_t>& out, char close) {
    out.clear();
    if (p < n && s[p] == close) {
      ++p;
      return true;
    }
    while (true) {
      if (!digit(p)) return false;
      int64_t v = 0;
      size_t start = p;
      for (; digit(p); ++p) {
        if (p - start >= 18) return false;  // long numbers: the token path checks the range
        v = v * 10 + (s[p] - '0');
      }
      if (out.size() >= 4096) return false;
      out.push_back(v);
      if (p < n && s[p] == ',') {
        ++p;
      } else if (p < n && s[p] == close) {
        ++p;
        return true;
      } else {
        return false;
      }
    }
  };
  if (p >= n || s[p] != '[') return 0;
  ++p;
  if (!readInts(dimsScratch_, ']')) return 0;
  *hasLayout = false;
  if (p < n && s[p] == '{') {
    ++p;
    if (!digit(p) || !readInts(layoutScratch_, '}')) return 0;
    if (layoutScratch_.size() != dimsScratch_.size()) return 0;
    std::vector<bool>& seen = dynamicScratch_;
    seen.assign(layoutScratch_.size(), false);
    for (int64_t d : layoutScratch_) {
      if (d >= static_cast<int64_t>(seen.size()) || seen[static_cast<size_t>(d)]) return 0;
      seen[static_cast<size_t>(d)] = true;
    }
    *hasLayout = true;
    return p;
  }
  // A layout may follow after blanks or a comment: leave those to the token path.
  size_t q = p;
  while (q < n && (s[q] == ' ' || s[q] == '\t' || s[q] == '\n' || s[q] == '\r')) ++q;
  if (q < n && (s[q] == '{' || s[q] == '/')) return 0;
  return p;
}

bool Parser::parseShape(Shape* out) {
  DepthGuard guard(*this);
  if (!guard.ok) return false;
  if (tok_.kind == TokKind::LParen) {
    advance();
    std::vector<Shape> elements;
    if (!consumeIf(TokKind::RParen)) {
      do {
        elements.emplace_back();
        if (!parseShape(&elements.back())) return false;
      } while (consumeIf(TokKind::Comma));
      if (!expect(TokKind::RParen, "')' or ',' in tuple shape")) return false;
    }
    *out = Shape::tuple(std::move(elements));
    return true;
  }
  if (tok_.kind != TokKind::Ident) return error(fmt::format("expected shape, got {}", describe()));
  if (tok_.text == "b" && lex_.peekChar() == '(') {
    advance();
    advance();
    if (!parseShape(out)) return false;
    if (!out->isArray()) return error("buffer shape must wrap an array shape");
    out->setBuffer(true);
    return expect(TokKind::RParen, "')'");
  }
  auto type = elementTypeFromName(tok_.text);
  if (!type) return error(fmt::format("expected shape, got {}", describe()));
  size_t typeOffset = tok_.offset;
  if (*type != ElementType::Token && *type != ElementType::Opaque) {
    bool hasLayout = false;
    if (size_t end = scanPlainArray(&hasLayout)) {
      // The same spelling is the same shape: share its representation.
      std::string_view spelling = file_.contents().substr(typeOffset, end - typeOffset);
      size_t spellingHash = plainShapes_.hash(spelling);
      if (const Shape* known = plainShapes_.find(spelling, spellingHash)) {
        *out = *known;
      } else {
        *out = Shape(*type, std::vector<int64_t>(dimsScratch_.begin(), dimsScratch_.end()));
        if (!out->elementCount()) return error(typeOffset, "shape's element count overflows int64");
        if (hasLayout) {
          Layout layout;
          layout.minorToMajor.assign(layoutScratch_.begin(), layoutScratch_.end());
          out->setLayout(std::move(layout));
        } else if (options_.fillDefaultLayouts) {
          out->setLayout(Layout::defaultForRank(out->rank()));
        }
        plainShapes_.insert(spelling, spellingHash, *out);
      }
      lex_.setPosition(end);
      advance();
      return true;
    }
  }
  advance();
  if (!expect(TokKind::LBracket, "'[' after element type")) return false;
  // Dimensions go to reused scratch buffers first: one exact allocation per shape.
  std::vector<int64_t>& dims = dimsScratch_;
  std::vector<bool>& dynamic = dynamicScratch_;
  dims.clear();
  dynamic.clear();
  bool anyDynamic = false;
  if (tok_.kind != TokKind::RBracket) {
    do {
      bool dyn = false;
      int64_t d;
      if (tok_.kind == TokKind::Question) {
        advance();
        d = kUnboundedSize;
        dyn = true;
      } else {
        if (consumeIf(TokKind::Leq)) dyn = true;
        if (!parseInt64(&d, "dimension size")) return false;
        if (d < 0) return error(tok_.offset, "negative dimension size");
      }
      if (dims.size() >= 4096) return error("too many dimensions");
      dims.push_back(d);
      dynamic.push_back(dyn);
      anyDynamic |= dyn;
    } while (consumeIf(TokKind::Comma));
  }
  if (!expect(TokKind::RBracket, "']' or ',' in dimensions")) return false;
  if (*type == ElementType::Token) {
    if (!dims.empty()) return error(typeOffset, "token shape must have no dimensions");
    *out = Shape::token();
    return true;
  }
  if (*type == ElementType::Opaque) {
    if (!dims.empty()) return error(typeOffset, "opaque shape must have no dimensions");
    *out = Shape::opaque();
    return true;
  }
  *out = Shape(*type, std::vector<int64_t>(dims.begin(), dims.end()));
  if (anyDynamic)
    for (size_t i = 0; i < dynamic.size(); ++i) out->setDynamicDimension(static_cast<int64_t>(i), dynamic[i]);
  if (!out->isUnboundedDynamic() && !out->elementCount())
    return error(typeOffset, "shape's element count overflows int64");
  if (tok_.kind == TokKind::LBrace) {
    char c = lex_.peekChar();
    if ((c >= '0' && c <= '9') || c == ':' || (c == '}' && out->rank() == 0 && false)) return parseLayout(out);
  }
  if (options_.fillDefaultLayouts) out->setLayout(Layout::defaultForRank(out->rank()));
  return true;
}

namespace {
enum : int64_t { kSigTupleOpen = -1, kSigTupleClose = -2, kSigArray = -3, kSigToken = -4, kSigOpaque = -5, kSigBuffer = -6 };
}

bool Parser::parseShapeSignature(std::vector<int64_t>& sig) {
  DepthGuard guard(*this);
  if (!guard.ok) return false;
  if (tok_.kind == TokKind::LParen) {
    advance();
    sig.push_back(kSigTupleOpen);
    if (!consumeIf(TokKind::RParen)) {
      do {
        if (!parseShapeSignature(sig)) return false;
      } while (consumeIf(TokKind::Comma));
      if (!expect(TokKind::RParen, "')' or ',' in tuple shape")) return false;
    }
    sig.push_back(kSigTupleClose);
    return true;
  }
  if (tok_.kind != TokKind::Ident) return error(fmt::format("expected shape, got {}", describe()));
  if (tok_.text == "b" && lex_.peekChar() == '(') {
    advance();
    advance();
    sig.push_back(kSigBuffer);
    if (!parseShapeSignature(sig)) return false;
    return expect(TokKind::RParen, "')'");
  }
  auto type = elementTypeFromName(tok_.text);
  if (!type) return error(fmt::format("expected shape, got {}", describe()));
  if (*type != ElementType::Token && *type != ElementType::Opaque) {
    bool hasLayout = false;
    if (size_t end = scanPlainArray(&hasLayout)) {
      sig.push_back(kSigArray);
      sig.push_back(static_cast<int64_t>(*type));
      sig.push_back(static_cast<int64_t>(dimsScratch_.size()));
      sig.insert(sig.end(), dimsScratch_.begin(), dimsScratch_.end());
      lex_.setPosition(end);
      advance();
      return true;
    }
  }
  advance();
  if (!expect(TokKind::LBracket, "'[' after element type")) return false;
  size_t rankSlot = 0;
  if (*type == ElementType::Token) {
    sig.push_back(kSigToken);
  } else if (*type == ElementType::Opaque) {
    sig.push_back(kSigOpaque);
  } else {
    sig.push_back(kSigArray);
    sig.push_back(static_cast<int64_t>(*type));
    rankSlot = sig.size();
    sig.push_back(0);
  }
  int64_t rank = 0;
  if (tok_.kind != TokKind::RBracket) {
    do {
      int64_t d;
      if (tok_.kind == TokKind::Question) {
        advance();
        d = kUnboundedSize;
      } else {
        consumeIf(TokKind::Leq);
        if (!parseInt64(&d, "dimension size")) return false;
        if (d < 0) return error(tok_.offset, "negative dimension size");
      }
      if (++rank > 4096) return error("too many dimensions");
      sig.push_back(d);
    } while (consumeIf(TokKind::Comma));
  }
  if (!expect(TokKind::RBracket, "']' or ',' in dimensions")) return false;
  if (rankSlot) {
    sig[rankSlot] = rank;
  } else if (rank != 0) {
    return error("token and opaque shapes must have no dimensions");
  }
  if (tok_.kind == TokKind::LBrace) {
    char c = lex_.peekChar();
    if ((c >= '0' && c <= '9') || c == ':') {  // layouts do not matter for the check
      lex_.setPosition(tok_.offset);
      if (lex_.scanBalancedBraces().empty()) return error(lex_.errorOffset(), lex_.error());
      advance();
    }
  }
  return true;
}

bool Parser::signatureMatches(const Shape& s, const std::vector<int64_t>& sig, size_t& i) {
  if (i >= sig.size()) return false;
  int64_t tag = sig[i++];
  switch (tag) {
    case kSigTupleOpen: {
      if (!s.isTuple()) return false;
      for (const Shape& e : s.tupleElements())
        if (!signatureMatches(e, sig, i)) return false;
      return i < sig.size() && sig[i++] == kSigTupleClose;
    }
    case kSigBuffer: return s.isBuffer() && signatureMatches(s, sig, i);
    case kSigToken: return s.isToken();
    case kSigOpaque: return s.isOpaque();
    case kSigArray: {
      if (i + 2 > sig.size() || !s.isArray() || static_cast<int64_t>(s.elementType()) != sig[i]) return false;
      int64_t rank = sig[i + 1];
      i += 2;
      if (rank != s.rank() || i + static_cast<size_t>(rank) > sig.size()) return false;
      for (int64_t d = 0; d < rank; ++d)
        if (sig[i + static_cast<size_t>(d)] != s.dimension(d)) return false;
      i += static_cast<size_t>(rank);
      return true;
    }
    default: return false;
  }
}

bool Parser::parseLayout(Shape* shape) {
  size_t start = tok_.offset;
  advance();  // '{'
  Layout layout;
  layout.minorToMajor.reserve(static_cast<size_t>(shape->rank()));
  if (tok_.kind == TokKind::Int) {
    do {
      int64_t v;
      if (!parseInt64(&v)) return false;
      layout.minorToMajor.push_back(v);
    } while (consumeIf(TokKind::Comma));
  }
  if (consumeIf(TokKind::Colon)) {
    int stage = 0;  // enforces XLA's order of layout attributes
    auto order = [&](int s, std::string_view what) {
      if (s <= stage) return error(fmt::format("layout attribute {} out of order or repeated", what));
      stage = s;
      return true;
    };
    while (tok_.kind != TokKind::RBrace) {
      if (tok_.kind == TokKind::Ident && tok_.text == "D") {
        if (!order(1, "D")) return false;
        advance();
        if (!expect(TokKind::LParen, "'('")) return false;
        do {
          if (tok_.kind != TokKind::Ident || tok_.text.size() != 1) return error("expected dim level type D, C, S or H");
          DimLevelType d;
          switch (tok_.text[0]) {
            case 'D': d.kind = DimLevelKind::Dense; break;
            case 'C': d.kind = DimLevelKind::Compressed; break;
            case 'S': d.kind = DimLevelKind::Singleton; break;
            case 'H': d.kind = DimLevelKind::LooseCompressed; break;
            default: return error("expected dim level type D, C, S or H");
          }
          advance();
          if (consumeIf(TokKind::Plus)) d.notUnique = true;
          if (consumeIf(TokKind::Tilde)) d.notOrdered = true;
          layout.dimLevelTypes.push_back(d);
        } while (consumeIf(TokKind::Comma));
        if (!expect(TokKind::RParen, "')'")) return false;
      } else if (tok_.kind == TokKind::Ident && tok_.text == "T") {
        if (!order(2, "T")) return false;
        advance();
        if (tok_.kind != TokKind::LParen) return error("expected '(' after T");
        while (consumeIf(TokKind::LParen)) {
          Tile tile;
          if (tok_.kind != TokKind::RParen) {
            do {
              if (consumeIf(TokKind::Star)) {
                tile.dimensions.push_back(Tile::kCombineDimension);
              } else {
                int64_t v;
                if (!parseInt64(&v, "tile dimension")) return false;
                if (v < 0) return error("negative tile dimension");
                tile.dimensions.push_back(v);
              }
            } while (consumeIf(TokKind::Comma));
          }
          if (!expect(TokKind::RParen, "')'")) return false;
          layout.tiles.push_back(std::move(tile));
        }
      } else if (tok_.kind == TokKind::Ident && (tok_.text == "L" || tok_.text == "E" || tok_.text == "S" || tok_.text == "M")) {
        char which = tok_.text[0];
        int s = which == 'L' ? 3 : which == 'E' ? 6 : which == 'S' ? 7 : 10;
        if (!order(s, tok_.text)) return false;
        advance();
        if (!expect(TokKind::LParen, "'('")) return false;
        int64_t v;
        if (!parseInt64(&v)) return false;
        if (!expect(TokKind::RParen, "')'")) return false;
        if (which == 'L') layout.tailPaddingAlignment = v;
        if (which == 'E') layout.elementSizeInBits = v;
        if (which == 'S') layout.memorySpace = v;
        if (which == 'M') layout.dynamicShapeMetadataPrefixBytes = v;
      } else if (tok_.kind == TokKind::Hash || tok_.kind == TokKind::Star) {
        bool index = tok_.kind == TokKind::Hash;
        if (!order(index ? 4 : 5, index ? "#" : "*")) return false;
        advance();
        if (!expect(TokKind::LParen, "'('")) return false;
        if (tok_.kind != TokKind::Ident) return error("expected an unsigned integer type");
        auto t = elementTypeFromName(tok_.text);
        if (!t || !isUnsignedIntegerType(*t)) return error(fmt::format("expected an unsigned integer type, got '{}'", tok_.text));
        (index ? layout.indexPrimitiveType : layout.pointerPrimitiveType) = *t;
        advance();
        if (!expect(TokKind::RParen, "')'")) return false;
      } else if (tok_.kind == TokKind::Ident && tok_.text == "SC") {
        if (!order(8, "SC")) return false;
        advance();
        if (tok_.kind != TokKind::LParen) return error("expected '(' after SC");
        while (consumeIf(TokKind::LParen)) {
          SplitConfig sc;
          if (!parseInt64(&sc.dimension)) return false;
          if (!expect(TokKind::Colon, "':'")) return false;
          do {
            int64_t v;
            if (!parseInt64(&v)) return false;
            sc.splitIndices.push_back(v);
          } while (consumeIf(TokKind::Comma));
          if (!expect(TokKind::RParen, "')'")) return false;
          layout.splitConfigs.push_back(std::move(sc));
        }
      } else if (tok_.kind == TokKind::Ident && tok_.text == "P") {
        return error("physical shape P(...) is only valid for sparse layouts");
      } else {
        return error(fmt::format("unexpected {} in layout", describe()));
      }
    }
  }
  if (!expect(TokKind::RBrace, "'}' closing the layout")) return false;
  if (static_cast<int64_t>(layout.minorToMajor.size()) != shape->rank())
    return error(start, fmt::format("layout has {} minor_to_major entries but the shape has rank {}",
                                    layout.minorToMajor.size(), shape->rank()));
  std::vector<bool>& seen = dynamicScratch_;  // free again: the shape's dynamic flags are stored
  seen.assign(layout.minorToMajor.size(), false);
  for (int64_t d : layout.minorToMajor) {
    if (d < 0 || d >= shape->rank() || seen[static_cast<size_t>(d)])
      return error(start, "layout minor_to_major is not a permutation of the dimensions");
    seen[static_cast<size_t>(d)] = true;
  }
  shape->setLayout(std::move(layout));
  return true;
}

// ============================================================ literals

bool Parser::parseLiteral(const Shape& shape, Literal* out) {
  DepthGuard guard(*this);
  if (!guard.ok) return false;
  if (shape.isTuple()) {
    if (tok_.kind == TokKind::LBrace && lex_.peekChar() == '.') {  // `{...}` for a whole tuple
      advance();
      if (!expect(TokKind::Dots, "'...'") || !expect(TokKind::RBrace, "'}'")) return false;
      *out = Literal::elided(shape);
      return true;
    }
    if (!expect(TokKind::LParen, "'(' starting a tuple literal")) return false;
    std::vector<Literal> elements;
    for (int64_t i = 0; i < shape.tupleSize(); ++i) {
      if (i > 0 && !expect(TokKind::Comma, "',' between tuple literal elements")) return false;
      elements.emplace_back();
      if (!parseLiteral(shape.tupleElement(i), &elements.back())) return false;
    }
    if (!expect(TokKind::RParen, "')' closing the tuple literal")) return false;
    *out = Literal::tuple(std::move(elements));
    out->mutableShapeLayoutOnly() = shape;
    return true;
  }
  if (shape.isToken()) {
    if (isIdent("token")) advance();
    *out = Literal(shape);
    return true;
  }
  if (!shape.isArray()) return error("literals need an array or tuple shape");
  return parseDenseLiteral(shape, out);
}

bool Parser::parseDenseLiteral(const Shape& shape, Literal* out) {
  if (shape.isUnboundedDynamic()) return error("literal of an unbounded dynamic shape");
  int64_t count = shape.elementCount().value_or(-1);
  if (tok_.kind == TokKind::LBrace && lex_.peekChar() == '.') {
    advance();
    if (!expect(TokKind::Dots, "'...'") || !expect(TokKind::RBrace, "'}' after '...'")) return false;
    *out = Literal::elided(shape);
    return true;
  }
  // Every element takes at least one byte of text: refuse shapes the input cannot fill.
  if (count < 0 || static_cast<uint64_t>(count) > file_.size())
    return error(fmt::format("literal of shape {} has more elements than the text can hold", shape.toString()));
  *out = Literal(shape);
  const int64_t rank = shape.rank();
  if (rank == 0) {
    if (tok_.kind == TokKind::LBrace) return error("expected a scalar value for a rank-0 literal, got '{'");
    return parseScalarInto(*out, 0);
  }
  // Iterative nested-brace walk: depth == rank exactly, counts checked per level.
  std::vector<int64_t> counts(static_cast<size_t>(rank), 0);
  int64_t level = -1;
  int64_t next = 0;
  const auto& dims = shape.dimensions();
  while (true) {
    if (tok_.kind == TokKind::LBrace) {
      if (level + 1 >= rank) return error("literal has more nesting levels than the shape's rank");
      if (level >= 0 && counts[static_cast<size_t>(level)] >= dims[static_cast<size_t>(level)])
        return error(fmt::format("too many elements in literal dimension {} (size {})", level, dims[static_cast<size_t>(level)]));
      if (level >= 0) ++counts[static_cast<size_t>(level)];
      ++level;
      counts[static_cast<size_t>(level)] = 0;
      advance();
      continue;
    }
    if (level < 0) return error(fmt::format("expected '{{' starting a rank-{} literal, got {}", rank, describe()));
    if (tok_.kind == TokKind::RBrace) {
      if (counts[static_cast<size_t>(level)] != dims[static_cast<size_t>(level)])
        return error(fmt::format("literal dimension {} has {} elements, the shape says {}", level,
                                 counts[static_cast<size_t>(level)], dims[static_cast<size_t>(level)]));
      advance();
      if (--level < 0) break;
      consumeIf(TokKind::Comma);
      continue;
    }
    if (tok_.kind == TokKind::Comma) {
      advance();
      continue;
    }
    if (level != rank - 1)
      return error(fmt::format("expected '{{' (literal nesting must match rank {}), got {}", rank, describe()));
    if (counts[static_cast<size_t>(level)] >= dims[static_cast<size_t>(level)])
      return error(fmt::format("too many elements in literal dimension {} (size {})", level, dims[static_cast<size_t>(level)]));
    if (next >= count) return error("too many elements in literal");
    if (!parseScalarInto(*out, next)) return false;
    ++next;
    ++counts[static_cast<size_t>(level)];
  }
  return true;
}

bool Parser::parseScalarInto(Literal& lit, int64_t index) {
  ElementType type = lit.shape().elementType();
  const ElementTypeInfo& info = elementTypeInfo(type);
  if (type == ElementType::Pred) {
    if (isIdent("true") || isIdent("false")) {
      lit.setInt(index, tok_.text == "true" ? 1 : 0);
      advance();
      return true;
    }
    if (tok_.kind == TokKind::Int) {
      lit.setInt(index, tok_.intMag != 0 ? 1 : 0);
      advance();
      return true;
    }
    return error(fmt::format("expected true, false or an integer for pred, got {}", describe()));
  }
  if (info.isInteger) {
    if (tok_.kind != TokKind::Int)
      return error(fmt::format("expected an integer for element type {}, got {}", info.name, describe()));
    if (tok_.overflow) return error("integer does not fit in 64 bits");
    int bits = info.bitWidth;
    if (info.isSigned) {
      uint64_t limitPos = bits >= 64 ? uint64_t(INT64_MAX) : (uint64_t{1} << (bits - 1)) - 1;
      uint64_t limitNeg = bits >= 64 ? uint64_t{1} << 63 : uint64_t{1} << (bits - 1);
      if ((!tok_.negative && tok_.intMag > limitPos) || (tok_.negative && tok_.intMag > limitNeg))
        return error(fmt::format("value {} is out of range for {}", tok_.text, info.name));
      lit.setInt(index, tok_.negative ? static_cast<int64_t>(~tok_.intMag + 1) : static_cast<int64_t>(tok_.intMag));
    } else {
      uint64_t limit = bits >= 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1;
      if ((tok_.negative && tok_.intMag != 0) || tok_.intMag > limit)
        return error(fmt::format("value {} is out of range for {}", tok_.text, info.name));
      lit.setUint(index, tok_.intMag);
    }
    advance();
    return true;
  }
  auto parseReal = [&](double* v, uint64_t* payload, bool* hasPayload) {
    *hasPayload = false;
    size_t at = tok_.offset;
    if (tok_.kind == TokKind::Ident && (tok_.text == "nan" || tok_.text == "-nan") && lex_.peekChar() == '(') {
      bool neg = tok_.text[0] == '-';
      if (!lex_.scanNanPayload(payload)) return error(at, "malformed NaN payload, expected nan(0xHEX)");
      *hasPayload = true;
      *v = neg ? -NAN : NAN;
      advance();
      return true;
    }
    if (tok_.kind == TokKind::Ident && (tok_.text == "true" || tok_.text == "false"))
      return error(fmt::format("expected a number for element type {}, got {}", info.name, describe()));
    return parseDouble(v);
  };
  if (info.isComplex) {
    if (!expect(TokKind::LParen, "'(' starting a complex value")) return false;
    double re, im;
    uint64_t p = 0;
    bool hp = false;
    if (!parseReal(&re, &p, &hp)) return false;
    if (!expect(TokKind::Comma, "','")) return false;
    if (!parseReal(&im, &p, &hp)) return false;
    if (!expect(TokKind::RParen, "')' closing the complex value")) return false;
    if (type == ElementType::C64 &&
        ((std::isfinite(re) && std::isinf(static_cast<float>(re))) || (std::isfinite(im) && std::isinf(static_cast<float>(im)))))
      return error("value is out of range for c64");
    lit.setComplex(index, {re, im});
    return true;
  }
  if (!info.isFloat) return error(fmt::format("cannot write a literal of element type {}", info.name));
  size_t at = tok_.offset;
  std::string_view text = tok_.text;
  double v;
  uint64_t payload = 0;
  bool hasPayload = false;
  if (!parseReal(&v, &payload, &hasPayload)) return false;
  lit.setDouble(index, v);
  if (std::isfinite(v)) {
    double back = lit.getDouble(index);
    if (!std::isfinite(back)) return error(at, fmt::format("value {} is out of range for {}", text, info.name));
  }
  if (hasPayload) {
    int mantissa = info.floatFormat ? floatFormatInfo(*info.floatFormat).mantissaBits
                   : type == ElementType::F32 ? 23 : 52;
    uint64_t mask = (uint64_t{1} << mantissa) - 1;
    if (payload == 0 || (payload & ~mask) != 0) return error(at, fmt::format("NaN payload does not fit {}", info.name));
    if (info.floatFormat && !floatFormatInfo(*info.floatFormat).hasNaN)
      return error(at, fmt::format("{} has no NaN", info.name));
    uint64_t bits = lit.getBits(index);
    lit.setBits(index, (bits & ~mask) | payload);
    if (info.floatFormat && !isNaNBits(*info.floatFormat, static_cast<uint32_t>(lit.getBits(index))))
      return error(at, fmt::format("NaN payload is not a NaN in {}", info.name));
  }
  return true;
}

// ============================================================ attribute values

bool Parser::parseWindow(Window* out) {
  out->dimensions.clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  std::vector<int64_t> size, stride, lhsDil, rhsDil, reversal;
  std::vector<std::pair<int64_t, int64_t>> pad;
  bool haveSize = false;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected window attribute, got {}", describe()));
    std::string_view key = tok_.text;
    size_t at = tok_.offset;
    std::string_view word = lex_.scanWord();
    if (word.empty()) return error(lex_.position(), fmt::format("expected a value for window {}", key));
    auto parseX = [&](std::vector<int64_t>* v) {
      v->clear();
      size_t i = 0;
      while (i <= word.size()) {
        size_t j = word.find('x', i);
        if (j == std::string_view::npos) j = word.size();
        int64_t x;
        auto r = std::from_chars(word.data() + i, word.data() + j, x);
        if (r.ec != std::errc() || r.ptr != word.data() + j) return error(at, fmt::format("malformed window {} '{}'", key, word));
        v->push_back(x);
        i = j + 1;
      }
      return true;
    };
    if (key == "size") {
      if (!parseX(&size)) return false;
      haveSize = true;
    } else if (key == "stride") {
      if (!parseX(&stride)) return false;
    } else if (key == "lhs_dilate") {
      if (!parseX(&lhsDil)) return false;
    } else if (key == "rhs_dilate") {
      if (!parseX(&rhsDil)) return false;
    } else if (key == "rhs_reversal") {
      if (!parseX(&reversal)) return false;
    } else if (key == "pad") {
      std::vector<PaddingDimension> p;
      size_t i = 0;
      pad.clear();
      while (i <= word.size()) {
        size_t j = word.find('x', i);
        if (j == std::string_view::npos) j = word.size();
        std::string_view part = word.substr(i, j - i);
        size_t u = part.find('_');
        int64_t lo, hi;
        if (u == std::string_view::npos) return error(at, fmt::format("malformed window pad '{}'", word));
        auto r1 = std::from_chars(part.data(), part.data() + u, lo);
        auto r2 = std::from_chars(part.data() + u + 1, part.data() + part.size(), hi);
        if (r1.ec != std::errc() || r1.ptr != part.data() + u || r2.ec != std::errc() ||
            r2.ptr != part.data() + part.size())
          return error(at, fmt::format("malformed window pad '{}'", word));
        pad.push_back({lo, hi});
        i = j + 1;
      }
    } else {
      return error(at, fmt::format("unknown window attribute '{}'", key));
    }
    advance();
  }
  advance();
  if (!haveSize) return error("window requires size=");
  size_t n = size.size();
  auto check = [&](size_t got, std::string_view what) {
    if (got != 0 && got != n) return error(fmt::format("window {} has {} entries, size has {}", what, got, n));
    return true;
  };
  if (!check(stride.size(), "stride") || !check(pad.size(), "pad") || !check(lhsDil.size(), "lhs_dilate") ||
      !check(rhsDil.size(), "rhs_dilate") || !check(reversal.size(), "rhs_reversal"))
    return false;
  for (size_t i = 0; i < n; ++i) {
    WindowDimension d;
    d.size = size[i];
    if (!stride.empty()) d.stride = stride[i];
    if (!pad.empty()) {
      d.paddingLow = pad[i].first;
      d.paddingHigh = pad[i].second;
    }
    if (!lhsDil.empty()) d.baseDilation = lhsDil[i];
    if (!rhsDil.empty()) d.windowDilation = rhsDil[i];
    if (!reversal.empty()) d.windowReversal = reversal[i] != 0;
    out->dimensions.push_back(d);
  }
  return true;
}

bool Parser::parseDimLabels(ConvolutionDimensionNumbers* out) {
  size_t at = lex_.position();
  std::string_view word = lex_.scanWord();
  size_t u = word.find('_');
  size_t a = word.find("->");
  if (u == std::string_view::npos || a == std::string_view::npos || a < u)
    return error(at, fmt::format("malformed dim_labels '{}', expected e.g. b01f_01io->b01f", word));
  std::string_view parts[3] = {word.substr(0, u), word.substr(u + 1, a - u - 1), word.substr(a + 2)};
  const char* letters[3] = {"bf", "io", "bf"};
  int64_t* named[3][2] = {{&out->inputBatchDimension, &out->inputFeatureDimension},
                          {&out->kernelInputFeatureDimension, &out->kernelOutputFeatureDimension},
                          {&out->outputBatchDimension, &out->outputFeatureDimension}};
  std::vector<int64_t>* spatial[3] = {&out->inputSpatialDimensions, &out->kernelSpatialDimensions,
                                      &out->outputSpatialDimensions};
  size_t spatialCount = 0;
  for (int p = 0; p < 3; ++p) {
    std::string_view s = parts[p];
    if (s.size() < 2 || s.size() > 128) return error(at, fmt::format("malformed dim_labels '{}'", word));
    size_t digits = 0;
    for (char c : s)
      if (c >= '0' && c <= '9') ++digits;
    if (p == 0) spatialCount = digits;
    if (digits != spatialCount)
      return error(at, fmt::format("dim_labels '{}' has different spatial dimension counts", word));
    spatial[p]->assign(digits, -1);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '?') continue;
      if (c == letters[p][0] || c == letters[p][1]) {
        int k = c == letters[p][0] ? 0 : 1;
        if (seen[k]) return error(at, fmt::format("dim_labels '{}' repeats '{}'", word, c));
        seen[k] = true;
        *named[p][k] = static_cast<int64_t>(i);
      } else if (c >= '0' && c <= '9' && static_cast<size_t>(c - '0') < digits) {
        if ((*spatial[p])[static_cast<size_t>(c - '0')] != -1)
          return error(at, fmt::format("dim_labels '{}' repeats '{}'", word, c));
        (*spatial[p])[static_cast<size_t>(c - '0')] = static_cast<int64_t>(i);
      } else {
        return error(at, fmt::format("unexpected '{}' in dim_labels '{}'", c, word));
      }
    }
    if (!seen[0] || !seen[1])
      return error(at, fmt::format("dim_labels '{}' lacks '{}' or '{}'", word, letters[p][0], letters[p][1]));
  }
  advance();
  return true;
}

bool Parser::parsePadding(std::vector<PaddingDimension>* out) {
  out->clear();
  size_t at = lex_.position();
  std::string_view word = lex_.scanWord();
  if (word.empty()) return error(at, "expected padding like 0_0x1_1");
  size_t i = 0;
  while (i <= word.size()) {
    size_t j = word.find('x', i);
    if (j == std::string_view::npos) j = word.size();
    std::string_view part = word.substr(i, j - i);
    int64_t v[3] = {0, 0, 0};
    int n = 0;
    size_t k = 0;
    while (k <= part.size() && n < 3) {
      size_t e = part.find('_', k);
      if (e == std::string_view::npos) e = part.size();
      auto r = std::from_chars(part.data() + k, part.data() + e, v[n]);
      if (r.ec != std::errc() || r.ptr != part.data() + e) return error(at, fmt::format("malformed padding '{}'", word));
      ++n;
      k = e + 1;
    }
    if (n < 2 || k <= part.size()) return error(at, fmt::format("malformed padding '{}'", word));
    out->push_back({v[0], v[1], v[2]});
    i = j + 1;
  }
  advance();
  return true;
}

bool Parser::parseSliceRanges(std::vector<SliceDimension>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    if (!expect(TokKind::LBracket, "'['")) return false;
    SliceDimension d;
    if (!parseInt64(&d.start)) return false;
    if (!expect(TokKind::Colon, "':'")) return false;
    if (!parseInt64(&d.limit)) return false;
    if (consumeIf(TokKind::Colon) && !parseInt64(&d.stride)) return false;
    if (!expect(TokKind::RBracket, "']'")) return false;
    out->push_back(d);
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseIotaList(IotaList* out, bool requirePermForMultiDim) {
  size_t start = tok_.offset;
  if (!expect(TokKind::Leq, "'<='")) return false;
  if (!parseIntList(&out->reshapeDims, TokKind::LBracket, TokKind::RBracket)) return false;
  out->transposePerm.clear();
  if (isIdent("T") && lex_.peekChar() == '(') {
    advance();
    if (!parseIntList(&out->transposePerm, TokKind::LParen, TokKind::RParen)) return false;
    if (out->transposePerm.size() != out->reshapeDims.size())
      return error("iota transpose permutation rank differs from the reshape rank");
    std::vector<bool> seen(out->transposePerm.size(), false);
    for (int64_t p : out->transposePerm) {
      if (p < 0 || static_cast<size_t>(p) >= seen.size() || seen[static_cast<size_t>(p)])
        return error("iota transpose is not a permutation");
      seen[static_cast<size_t>(p)] = true;
    }
  } else if (requirePermForMultiDim && out->reshapeDims.size() > 1) {
    return error(start, "iota list with several reshape dimensions needs T(...)");
  }
  for (int64_t d : out->reshapeDims)
    if (d <= 0) return error("iota reshape dimensions must be positive");
  return true;
}

bool Parser::parseReplicaGroups(ReplicaGroups* out) {
  *out = ReplicaGroups{};
  if (tok_.kind == TokKind::LBracket) {
    std::vector<int64_t> shape;
    if (!parseIntList(&shape, TokKind::LBracket, TokKind::RBracket)) return false;
    if (shape.size() != 2 || shape[0] < 0 || shape[1] < 0) return error("iota replica groups need [groups,size]");
    if (!parseIotaList(&out->iota, true)) return false;
    int64_t total;
    if (__builtin_mul_overflow(shape[0], shape[1], &total) || total != out->iota.count())
      return error("iota replica group shape does not match the device count");
    std::vector<int64_t> ids = out->iota.expand();
    if (ids.empty() && total != 0) return error("iota replica groups are too large");
    out->isIota = true;
    out->iotaNumGroups = shape[0];
    out->iotaGroupSize = shape[1];
    for (int64_t g = 0; g < shape[0]; ++g)
      out->groups.emplace_back(ids.begin() + g * shape[1], ids.begin() + (g + 1) * shape[1]);
    return true;
  }
  return parseIntListList(&out->groups);
}

bool Parser::parseSourceTargetPairs(std::vector<std::pair<int64_t, int64_t>>* out) {
  std::vector<std::vector<int64_t>> lists;
  if (!parseIntListList(&lists)) return false;
  out->clear();
  for (auto& l : lists) {
    if (l.size() != 2) return error("source_target_pairs entries must be pairs {source,target}");
    out->push_back({l[0], l[1]});
  }
  return true;
}

// Fills a default-constructed `out` (every caller passes a fresh one).
bool Parser::parseMetadata(OpMetadata* out) {
  if (!expect(TokKind::LBrace, "'{'")) return false;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected metadata attribute, got {}", describe()));
    std::string_view key = tok_.text;
    if (key == "op_type" || key == "op_name" || key == "source_file" || key == "deduplicated_name" ||
        key == "scheduling_name") {
      advance();
      std::string* dst = key == "op_type" ? &out->opType : key == "op_name" ? &out->opName
                         : key == "source_file" ? &out->sourceFile : key == "deduplicated_name" ? &out->deduplicatedName
                                                                                                : &out->schedulingName;
      if (!parseString(dst)) return false;
    } else if (key == "source_line" || key == "source_end_line" || key == "source_column" ||
               key == "source_end_column" || key == "stack_frame_id") {
      advance();
      int64_t* dst = key == "source_line" ? &out->sourceLine : key == "source_end_line" ? &out->sourceEndLine
                     : key == "source_column" ? &out->sourceColumn : key == "source_end_column" ? &out->sourceEndColumn
                                                                                              : &out->stackFrameId;
      if (!parseInt64(dst)) return false;
    } else if (key == "preserve_layout") {
      advance();
      if (!parseBool(&out->preserveLayout)) return false;
    } else if (key == "profile_type") {
      advance();
      if (!expect(TokKind::LBrace, "'{'")) return false;
      while (tok_.kind == TokKind::Ident) {
        out->profileType.emplace_back(tok_.text);
        advance();
        consumeIf(TokKind::Comma);
      }
      if (!expect(TokKind::RBrace, "'}'")) return false;
    } else {
      RawAttribute raw{std::string(key), std::string(lex_.scanRawValue())};
      if (raw.text.empty()) return error(fmt::format("expected a value for metadata {}", key));
      out->others.push_back(std::move(raw));
      advance();
    }
    consumeIf(TokKind::Comma);
  }
  advance();
  return true;
}

bool Parser::parseSingleSharding(Sharding* out) {
  // Tokens inside one sharding are order-free.
  *out = Sharding{};
  bool haveKind = false;
  auto setKind = [&](Sharding::Kind k) {
    if (haveKind) return error("sharding has more than one kind");
    haveKind = true;
    out->kind = k;
    return true;
  };
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind == TokKind::Ident) {
      std::string_view w = tok_.text;
      if (w == "replicated") {
        if (!setKind(Sharding::Kind::Replicated)) return false;
        advance();
      } else if (w == "manual") {
        if (!setKind(Sharding::Kind::Manual)) return false;
        advance();
      } else if (w == "unknown") {
        if (!setKind(Sharding::Kind::Unknown)) return false;
        advance();
      } else if (w == "unreduced") {
        if (!setKind(Sharding::Kind::Unreduced)) return false;
        advance();
      } else if (w == "maximal") {
        if (!setKind(Sharding::Kind::Maximal)) return false;
        advance();
        if (tok_.kind != TokKind::AttrName || tok_.text != "device") return error("expected device= after maximal");
        advance();
        if (!parseInt64(&out->maximalDevice)) return false;
      } else if (w == "last_tile_dim_replicate") {
        out->replicateOnLastTileDim = true;
        advance();
      } else if (w == "shard_as" || w == "shard_like") {
        bool as = w == "shard_as";
        advance();
        int64_t v;
        if (!parseInt64(&v)) return false;
        (as ? out->shardAs : out->shardLike) = v;
      } else {
        return error(fmt::format("unexpected {} in sharding", describe()));
      }
    } else if (tok_.kind == TokKind::AttrName && tok_.text == "devices") {
      size_t devicesOffset = tok_.offset;
      if (!setKind(Sharding::Kind::Tiled)) return false;
      advance();
      if (!parseIntList(&out->tileAssignmentDims, TokKind::LBracket, TokKind::RBracket)) return false;
      int64_t total = 1;
      for (int64_t d : out->tileAssignmentDims)
        if (d <= 0 || __builtin_mul_overflow(total, d, &total)) return error("invalid tile assignment dimensions");
      if (tok_.kind == TokKind::Leq) {
        IotaList iota;
        if (!parseIotaList(&iota, false)) return false;
        if (iota.count() != total) return error("iota tile assignment size does not match its dimensions");
        out->iotaDevices = std::move(iota);
      } else {
        do {
          int64_t v;
          if (!parseInt64(&v, "device id")) return false;
          out->tileAssignmentDevices.push_back(v);
        } while (consumeIf(TokKind::Comma));
        if (static_cast<int64_t>(out->tileAssignmentDevices.size()) != total)
          return error(devicesOffset, fmt::format("tile assignment lists {} devices, its dimensions need {}",
                                   out->tileAssignmentDevices.size(), total));
      }
    } else if (tok_.kind == TokKind::AttrName && tok_.text == "last_tile_dims") {
      advance();
      if (!expect(TokKind::LBrace, "'{'")) return false;
      do {
        if (isIdent("manual")) out->lastTileDims.push_back(Sharding::Kind::Manual);
        else if (isIdent("replicated")) out->lastTileDims.push_back(Sharding::Kind::Replicated);
        else if (isIdent("maximal")) out->lastTileDims.push_back(Sharding::Kind::Maximal);
        else if (isIdent("unreduced")) out->lastTileDims.push_back(Sharding::Kind::Unreduced);
        else return error(fmt::format("expected a subgroup type, got {}", describe()));
        advance();
      } while (consumeIf(TokKind::Comma));
      if (!expect(TokKind::RBrace, "'}'")) return false;
    } else if (tok_.kind == TokKind::AttrName && tok_.text == "metadata") {
      advance();
      if (tok_.kind == TokKind::LBrace && lex_.peekChar() == '{') {
        advance();
        do {
          out->metadata.emplace_back();
          if (!parseMetadata(&out->metadata.back())) return false;
        } while (consumeIf(TokKind::Comma));
        if (!expect(TokKind::RBrace, "'}'")) return false;
      } else {
        out->metadata.emplace_back();
        if (!parseMetadata(&out->metadata.back())) return false;
      }
    } else {
      return error(fmt::format("unexpected {} in sharding", describe()));
    }
  }
  if (!haveKind) return error("sharding needs replicated, maximal, manual, unknown, unreduced or devices=");
  if (out->kind != Sharding::Kind::Tiled && (out->replicateOnLastTileDim || !out->lastTileDims.empty()))
    return error("last_tile_dim_replicate/last_tile_dims need devices=");
  return true;
}

bool Parser::parseSharding(Sharding* out) {
  DepthGuard guard(*this);
  if (!guard.ok) return false;
  if (tok_.kind != TokKind::LBrace) return error(fmt::format("expected '{{' starting a sharding, got {}", describe()));
  char c = lex_.peekChar();
  if (c == '{' || c == '}') {  // tuple sharding
    advance();
    *out = Sharding{};
    out->kind = Sharding::Kind::Tuple;
    if (consumeIf(TokKind::RBrace)) return true;
    do {
      out->tupleElements.emplace_back();
      if (!parseSharding(&out->tupleElements.back())) return false;
    } while (consumeIf(TokKind::Comma));
    return expect(TokKind::RBrace, "'}' closing the tuple sharding");
  }
  // Named (mesh) shardings are kept as written.
  size_t save = lex_.position();
  Token t = lex_.next();
  lex_.setPosition(save);
  if ((t.kind == TokKind::Ident && t.text.substr(0, 4) == "mesh") ||
      (t.kind == TokKind::Ident && t.text == "maximal_mesh")) {
    lex_.setPosition(tok_.offset);
    std::string_view all = lex_.scanBalancedBraces();
    if (all.empty()) return error(lex_.errorOffset(), lex_.error());
    *out = Sharding{};
    out->kind = Sharding::Kind::Named;
    out->namedText = std::string(all.substr(1, all.size() - 2));
    advance();
    return true;
  }
  advance();
  if (!parseSingleSharding(out)) return false;
  return expect(TokKind::RBrace, "'}' closing the sharding");
}

bool Parser::parseFrontendAttributes(FrontendAttributes* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  while (tok_.kind != TokKind::RBrace) {
    FrontendAttribute a;
    if (tok_.kind == TokKind::AttrName) {
      a.key = std::string(tok_.text);
    } else if (tok_.kind == TokKind::String) {  // "key"=value
      a.key = tok_.hasEscape ? text::unescape(tok_.text) : std::string(tok_.text);
      advance();
      if (tok_.kind != TokKind::Equal) return error("expected '=' after frontend attribute key");
    } else {
      return error(fmt::format("expected frontend attribute key, got {}", describe()));
    }
    if (lex_.peekChar() == '{') {
      std::string_view raw = lex_.scanBalancedBraces();
      if (raw.empty()) return error(lex_.errorOffset(), lex_.error());
      a.value = std::string(raw);
      a.raw = true;
      advance();
    } else {
      advance();
      if (!parseString(&a.value)) return false;
    }
    for (const auto& e : *out)
      if (e.key == a.key) return error(fmt::format("duplicate frontend attribute '{}'", a.key));
    out->push_back(std::move(a));
    if (!consumeIf(TokKind::Comma)) break;
  }
  if (!expect(TokKind::RBrace, "'}'")) return false;
  std::sort(out->begin(), out->end(), [](const auto& x, const auto& y) { return x.key < y.key; });
  return true;
}

bool Parser::parseBackendConfig(BackendConfig* out) {
  // Called with tok_ = the AttrName; the value starts at the lexer position.
  char c = lex_.peekChar();
  if (c == '{') {
    std::string_view raw = lex_.scanBalancedBraces();
    if (raw.empty()) return error(lex_.errorOffset(), lex_.error());
    out->text = std::string(raw);
    out->raw = true;
    advance();
    return true;
  }
  advance();
  out->raw = false;
  return parseString(&out->text);
}

bool Parser::parseOutputOperandAliasing(std::vector<OutputOperandAlias>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    OutputOperandAlias a;
    if (!parseShapeIndex(&a.outputIndex)) return false;
    if (!expect(TokKind::Colon, "':'") || !expect(TokKind::LParen, "'('")) return false;
    if (!parseInt64(&a.operandNumber)) return false;
    if (!expect(TokKind::Comma, "','")) return false;
    if (!parseShapeIndex(&a.operandIndex)) return false;
    if (!expect(TokKind::RParen, "')'")) return false;
    out->push_back(std::move(a));
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parsePrecisionList(std::vector<Precision>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    Precision p = Precision::Default;
    if (!parseEnum(&p, parsePrecision, "precision")) return false;
    out->push_back(p);
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseStatistics(Statistics* out) {
  *out = Statistics{};
  if (!expect(TokKind::LBrace, "'{'")) return false;
  bool first = true;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected statistic name, got {}", describe()));
    std::string key(tok_.text);
    advance();
    if (first && key == "visualizing_index") {
      if (!parseInt64(&out->visualizingIndex)) return false;
    } else {
      double v;
      if (!parseDouble(&v)) return false;
      out->stats.push_back({key, v});
    }
    first = false;
    if (!consumeIf(TokKind::Comma)) break;
  }
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseDomain(DomainMetadata* out) {
  *out = DomainMetadata{};
  if (!expect(TokKind::LBrace, "'{'")) return false;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected domain attribute, got {}", describe()));
    std::string_view key = tok_.text;
    advance();
    if (key == "kind") {
      if (!parseString(&out->kind)) return false;
    } else if (key == "entry" || key == "exit") {
      Sharding s;
      if (!parseSharding(&s)) return false;
      (key == "entry" ? out->entry : out->exit) = std::move(s);
    } else {
      return error(fmt::format("unknown domain attribute '{}'", key));
    }
    if (!consumeIf(TokKind::Comma)) break;
  }
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseResultAccuracy(ResultAccuracy* out) {
  *out = ResultAccuracy{};
  if (!expect(TokKind::LBrace, "'{'")) return false;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected result_accuracy field, got {}", describe()));
    std::string_view key = tok_.text;
    advance();
    if (key == "mode") {
      if (isIdent("highest") || isIdent("HIGHEST")) out->mode = ResultAccuracyMode::Highest;
      else if (isIdent("default") || isIdent("DEFAULT")) out->mode = ResultAccuracyMode::Default;
      else return error(fmt::format("unknown result accuracy mode {}", describe()));
      advance();
    } else if (key == "tolerance") {
      out->mode = ResultAccuracyMode::Tolerance;
      if (!expect(TokKind::LBrace, "'{'")) return false;
      while (tok_.kind == TokKind::AttrName) {
        std::string_view k = tok_.text;
        advance();
        if (k == "atol") {
          if (!parseDouble(&out->atol)) return false;
        } else if (k == "rtol") {
          if (!parseDouble(&out->rtol)) return false;
        } else if (k == "ulps") {
          if (!parseInt64(&out->ulps)) return false;
        } else {
          return error(fmt::format("unknown tolerance field '{}'", k));
        }
        consumeIf(TokKind::Comma);
      }
      if (!expect(TokKind::RBrace, "'}'")) return false;
    } else {
      return error(fmt::format("unknown result_accuracy field '{}'", key));
    }
    consumeIf(TokKind::Comma);
  }
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseShapeList(std::vector<Shape>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    out->emplace_back();
    if (!parseShape(&out->back())) return false;
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

bool Parser::parseComputationLayout(ComputationLayout* out) {
  if (!expect(TokKind::LBrace, "'{'") || !expect(TokKind::LParen, "'('")) return false;
  out->parameters.clear();
  if (!consumeIf(TokKind::RParen)) {
    do {
      out->parameters.emplace_back();
      if (!parseShape(&out->parameters.back())) return false;
    } while (consumeIf(TokKind::Comma));
    if (!expect(TokKind::RParen, "')'")) return false;
  }
  if (!expect(TokKind::Arrow, "'->'")) return false;
  if (!parseShape(&out->result)) return false;
  return expect(TokKind::RBrace, "'}'");
}

// ============================================================ module structure

std::unique_ptr<Module> Parser::parseModule() {
  advance();
  auto module = std::make_unique<Module>("");
  bool header = false;
  if (isIdent("HloModule")) {
    header = true;
    advance();
    if (tok_.kind != TokKind::Ident && tok_.kind != TokKind::Name) {
      error(fmt::format("expected module name, got {}", describe()));
      return nullptr;
    }
    module->setName(std::string(tok_.text));
    advance();
    if (!parseHeader(*module)) return nullptr;
  }
  if (tok_.kind == TokKind::Ident &&
      (tok_.text == "FileNames" || tok_.text == "FunctionNames" || tok_.text == "FileLocations" || tok_.text == "StackFrames"))
    if (!parseStackFrames(*module)) return nullptr;
  if (tok_.kind == TokKind::Eof) {
    error("expected a computation");
    return nullptr;
  }
  while (tok_.kind != TokKind::Eof) {
    if (!parseComputation(*module)) return nullptr;
  }
  if (!module->entry()) module->setEntry(module->computations().back().get());
  if (!header) module->setName("module_" + module->entry()->name());
  // XLA synthesizes the entry layout from the entry's parameters and root.
  if (!module->config().entryComputationLayout)
    module->config().entryComputationLayout = module->entryComputationLayout();
  // An async computation must have exactly one async-start caller.
  std::unordered_map<const Computation*, int> starts;
  for (const auto& c : module->computations())
    for (const auto& inst : c->instructions())
      if (inst->opcode() == Opcode::AsyncStart)
        for (Computation* callee : inst->calledComputations()) ++starts[callee];
  for (const auto& [comp, n] : starts)
    if (n > 1) {
      error(comp->location().offset, fmt::format("computation '{}' is called by {} async-start instructions", comp->name(), n));
      return nullptr;
    }
  if (failed_) return nullptr;
  return module;
}

bool Parser::parseHeader(Module& m) {
  ModuleConfig& cfg = m.config();
  std::vector<std::string_view> seen;
  while (consumeIf(TokKind::Comma)) {
    if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected module attribute, got {}", describe()));
    std::string_view key = tok_.text;
    for (std::string_view s : seen)
      if (s == key) return error(fmt::format("duplicate module attribute '{}'", key));
    seen.push_back(key);
    if (key == "is_scheduled") {
      advance();
      if (!parseBool(&cfg.isScheduled)) return false;
    } else if (key == "alias_passthrough_params") {
      advance();
      if (!parseBool(&cfg.aliasPassthroughParams)) return false;
    } else if (key == "replica_count" || key == "num_partitions") {
      advance();
      int64_t* dst = key == "replica_count" ? &cfg.replicaCount : &cfg.numPartitions;
      if (!parseInt64(dst)) return false;
      if (*dst < 1) return error(fmt::format("{} must be positive", key));
    } else if (key == "allow_spmd_sharding_propagation_to_parameters" ||
               key == "allow_spmd_sharding_propagation_to_output") {
      advance();
      auto* dst = key == "allow_spmd_sharding_propagation_to_output" ? &cfg.allowSpmdShardingPropagationToOutput
                                                                       : &cfg.allowSpmdShardingPropagationToParameters;
      if (!parseBoolList(dst)) return false;
    } else if (key == "entry_computation_layout") {
      advance();
      ComputationLayout layout;
      if (!parseComputationLayout(&layout)) return false;
      cfg.entryComputationLayout = std::move(layout);
    } else if (key == "frontend_attributes") {
      advance();
      if (!parseFrontendAttributes(&cfg.frontendAttributes)) return false;
    } else if (key == "input_output_alias") {
      advance();
      if (!expect(TokKind::LBrace, "'{'")) return false;
      if (!consumeIf(TokKind::RBrace)) {
        do {
          InputOutputAlias a;
          if (!parseShapeIndex(&a.outputIndex)) return false;
          if (!expect(TokKind::Colon, "':'") || !expect(TokKind::LParen, "'('")) return false;
          if (!parseInt64(&a.parameterNumber)) return false;
          if (!expect(TokKind::Comma, "','")) return false;
          if (!parseShapeIndex(&a.parameterIndex)) return false;
          if (consumeIf(TokKind::Comma)) {
            if (isIdent("must-alias")) a.mustAlias = true;
            else if (!isIdent("may-alias")) return error(fmt::format("expected must-alias or may-alias, got {}", describe()));
            advance();
          }
          if (!expect(TokKind::RParen, "')'")) return false;
          cfg.inputOutputAlias.push_back(std::move(a));
        } while (consumeIf(TokKind::Comma));
        if (!expect(TokKind::RBrace, "'}'")) return false;
      }
    } else if (key == "buffer_donor") {
      advance();
      if (!expect(TokKind::LBrace, "'{'")) return false;
      if (!consumeIf(TokKind::RBrace)) {
        do {
          BufferDonor d;
          if (!expect(TokKind::LParen, "'('")) return false;
          if (!parseInt64(&d.parameterNumber)) return false;
          if (!expect(TokKind::Comma, "','")) return false;
          if (!parseShapeIndex(&d.parameterIndex)) return false;
          if (!expect(TokKind::RParen, "')'")) return false;
          cfg.bufferDonors.push_back(std::move(d));
        } while (consumeIf(TokKind::Comma));
        if (!expect(TokKind::RBrace, "'}'")) return false;
      }
    } else {
      RawAttribute raw{std::string(key), std::string(lex_.scanRawValue())};
      if (raw.text.empty()) return error(fmt::format("expected a value for module attribute '{}'", key));
      cfg.unknown.push_back(std::move(raw));
      advance();
    }
  }
  return true;
}

bool Parser::parseStackFrames(Module& m) {
  StackFrameIndex& s = m.stackFrames();
  auto expectId = [&](size_t expected) {
    int64_t id;
    if (!parseInt64(&id)) return false;
    if (id != static_cast<int64_t>(expected)) return error(fmt::format("expected table entry id {}", expected));
    return true;
  };
  while (tok_.kind == TokKind::Ident) {
    std::string_view table = tok_.text;
    if (table == "FileNames" || table == "FunctionNames") {
      auto& list = table == "FileNames" ? s.fileNames : s.functionNames;
      advance();
      while (tok_.kind == TokKind::Int) {
        if (!expectId(list.size() + 1)) return false;
        list.emplace_back();
        if (!parseString(&list.back())) return false;
      }
    } else if (table == "FileLocations" || table == "StackFrames") {
      bool files = table == "FileLocations";
      advance();
      while (tok_.kind == TokKind::Int) {
        if (!expectId((files ? s.fileLocations.size() : s.stackFrames.size()) + 1)) return false;
        if (!expect(TokKind::LBrace, "'{'")) return false;
        FileLocation fl;
        StackFrame sf;
        while (tok_.kind == TokKind::AttrName) {
          std::string_view k = tok_.text;
          advance();
          int64_t v;
          if (!parseInt64(&v)) return false;
          if (files && k == "file_name_id") fl.fileNameId = v;
          else if (files && k == "function_name_id") fl.functionNameId = v;
          else if (files && k == "line") fl.line = v;
          else if (files && k == "end_line") fl.endLine = v;
          else if (files && k == "column") fl.column = v;
          else if (files && k == "end_column") fl.endColumn = v;
          else if (!files && k == "file_location_id") sf.fileLocationId = v;
          else if (!files && k == "parent_frame_id") sf.parentFrameId = v;
          else return error(fmt::format("unknown stack frame field '{}'", k));
          consumeIf(TokKind::Comma);
        }
        if (!expect(TokKind::RBrace, "'}'")) return false;
        if (files) s.fileLocations.push_back(fl);
        else s.stackFrames.push_back(sf);
      }
    } else {
      break;
    }
  }
  return true;
}

bool Parser::parseComputation(Module& m) {
  bool isEntry = false;
  size_t start = tok_.offset;
  if (isIdent("ENTRY")) {
    isEntry = true;
    advance();
  }
  if (tok_.kind != TokKind::Ident && tok_.kind != TokKind::Name)
    return error(fmt::format("expected computation name, got {}", describe()));
  if (tok_.colonConsumed) return error("unexpected ':' after computation name");
  std::string name(tok_.text);
  size_t nameOffset = tok_.offset;
  advance();
  if (computationsByName_.count(name)) return error(nameOffset, fmt::format("duplicate computation name '{}'", name));
  std::optional<Shape> declaredResult;
  size_t declaredOffset = 0;
  if (tok_.kind == TokKind::LParen) {  // decorative signature
    advance();
    if (tok_.kind != TokKind::RParen) {
      do {
        if (tok_.kind != TokKind::Name && tok_.kind != TokKind::Ident)
          return error(fmt::format("expected parameter name, got {}", describe()));
        bool colon = tok_.colonConsumed;
        advance();
        if (!colon && !expect(TokKind::Colon, "':'")) return false;
        Shape s;
        if (!parseShape(&s)) return false;
      } while (consumeIf(TokKind::Comma));
    }
    if (!expect(TokKind::RParen, "')'")) return false;
    if (!expect(TokKind::Arrow, "'->'")) return false;
    declaredOffset = tok_.offset;
    declaredResult.emplace();
    if (!parseShape(&*declaredResult)) return false;
  }
  auto comp = std::make_unique<Computation>(name);
  comp->setLocation(locAt(isEntry ? nameOffset : start));
  Computation* c = m.addComputation(std::move(comp));
  if (!parseComputationBody(m, *c)) return false;
  if (declaredResult && !declaredResult->compatible(c->root()->shape()))
    return error(declaredOffset, fmt::format("computation '{}' declares result {} but its root has shape {}", name,
                                             declaredResult->toString(false), c->root()->shape().toString(false)));
  if (tok_.kind == TokKind::Comma) {
    advance();
    if (tok_.kind != TokKind::AttrName || tok_.text != "execution_thread")
      return error(fmt::format("expected execution_thread=, got {}", describe()));
    advance();
    std::string thread;
    if (!parseString(&thread)) return false;
    c->setExecutionThread(std::move(thread));
  }
  computationsByName_[name] = c;
  if (isEntry) {
    if (m.entry()) return error(start, "more than one ENTRY computation");
    m.setEntry(c);
  }
  return true;
}

size_t Parser::countBodyLines() {
  // A top-level body ends at a `}` starting a line; one instruction per line
  // is the usual layout, so this sizes the name table (it grows if wrong).
  // Text already scanned is not scanned again (a body not laid out in lines
  // gets no estimate), so the counting stays linear in the input.
  std::string_view text = file_.contents();
  size_t at = tok_.offset;
  if (at < countedUpTo_) return 0;
  size_t lines = 0;
  while (at < text.size()) {
    const void* nl = std::memchr(text.data() + at, '\n', text.size() - at);
    if (!nl) {
      at = text.size();
      break;
    }
    at = static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
    if (at < text.size() && text[at] == '}') break;
    ++lines;
  }
  countedUpTo_ = at;
  return lines;
}

bool Parser::parseComputationBody(Module& m, Computation& c) {
  if (namesInUse_) {  // an inline body (`to_apply={...}`) inside another one
    NameTable nested;
    nested.clear();
    return parseComputationBody(m, c, nested);
  }
  namesInUse_ = true;
  names_.clear(countBodyLines());
  bool ok = parseComputationBody(m, c, names_);
  namesInUse_ = false;
  return ok;
}

bool Parser::parseComputationBody(Module& m, Computation& c, NameTable& names) {
  if (!expect(TokKind::LBrace, "'{' starting the computation body")) return false;
  Instruction* root = nullptr;
  while (tok_.kind != TokKind::RBrace) {
    if (tok_.kind == TokKind::Eof) return error("expected '}' closing the computation body");
    bool isRoot = false;
    size_t rootOffset = tok_.offset;
    if (isIdent("ROOT")) {
      isRoot = true;
      advance();
    }
    if (!parseInstruction(m, c, names)) return false;
    if (isRoot) {
      if (root) return error(rootOffset, "computation has more than one ROOT");
      root = c.instructions().back().get();
    }
  }
  advance();
  if (c.instructions().empty()) return error(c.location().offset, fmt::format("computation '{}' is empty", c.name()));
  c.setRoot(root ? root : c.instructions().back().get());
  return true;
}

Computation* Parser::parseComputationRef(Module& m) {
  if (tok_.kind == TokKind::LBrace) {  // inline body
    auto comp = std::make_unique<Computation>(m.uniqueComputationName("_"));
    comp->setLocation(loc());
    Computation* c = m.addComputation(std::move(comp));
    if (!parseComputationBody(m, *c)) return nullptr;
    computationsByName_[c->name()] = c;
    return c;
  }
  if (tok_.kind != TokKind::Name && tok_.kind != TokKind::Ident) {
    error(fmt::format("expected computation name, got {}", describe()));
    return nullptr;
  }
  auto it = computationsByName_.find(std::string(tok_.text));
  if (it == computationsByName_.end()) {
    error(fmt::format("computation '{}' is not defined (computations must be defined before use)", tok_.text));
    return nullptr;
  }
  advance();
  return it->second;
}

bool Parser::parseComputationList(Module& m, std::vector<Computation*>* out) {
  out->clear();
  if (!expect(TokKind::LBrace, "'{'")) return false;
  if (consumeIf(TokKind::RBrace)) return true;
  do {
    Computation* c = parseComputationRef(m);
    if (!c) return false;
    out->push_back(c);
  } while (consumeIf(TokKind::Comma));
  return expect(TokKind::RBrace, "'}'");
}

Instruction* Parser::parseOperand(Module& m, Computation& c, NameTable& names,
                                  int anonDepth) {
  DepthGuard guard(*this);
  if (!guard.ok) return nullptr;
  bool hasShape = false;
  size_t shapeOffset = tok_.offset;
  if (tok_.kind == TokKind::LParen ||
      (startsShape() && !(tok_.kind == TokKind::Ident && lex_.peekChar() == '(' && tok_.text != "b"))) {
    hasShape = true;
    signature_.clear();
    if (!parseShapeSignature(signature_)) return nullptr;
  }
  std::optional<Shape> shape;
  if (hasShape && tok_.kind == TokKind::Ident && lex_.peekChar() == '(') {
    // Nested instruction: it needs the full shape; reparse it.
    lex_.setPosition(shapeOffset);
    advance();
    shape.emplace();
    if (!parseShape(&*shape)) return nullptr;
  }
  if (tok_.kind == TokKind::Ident && lex_.peekChar() == '(') {  // nested anonymous instruction
    size_t opOffset = tok_.offset;
    auto op = opcodeFromName(tok_.text);
    if (!op) {
      error(fmt::format("unknown opcode '{}'", tok_.text));
      return nullptr;
    }
    if (!shape) {
      error(opOffset, "nested instructions need a shape");
      return nullptr;
    }
    advance();
    std::string base = fmt::format("{}.anon", opcodeName(*op));
    std::string name = base;
    for (int i = 1; names.contains(name); ++i) name = fmt::format("{}.{}", base, i);
    auto inst = std::make_unique<Instruction>(*op, name, std::move(*shape));
    inst->setLocation(locAt(opOffset));
    if (!parseOperands(m, c, *inst, names, anonDepth + 1)) return nullptr;
    Instruction* raw = c.addInstruction(std::move(inst));
    names.insert(raw->name(), raw);
    return raw;
  }
  if (tok_.kind != TokKind::Name && tok_.kind != TokKind::Ident) {
    error(fmt::format("expected operand name, got {}", describe()));
    return nullptr;
  }
  Instruction* operand = names.find(tok_.text);
  if (!operand) {
    error(fmt::format("use of undefined instruction '{}'", tok_.text));
    return nullptr;
  }
  size_t sigIndex = 0;
  if (hasShape && (!signatureMatches(operand->shape(), signature_, sigIndex) || sigIndex != signature_.size())) {
    // Reparse the annotation for a precise message.
    std::string written = "?";
    size_t save = lex_.position();
    Token saved = tok_;
    lex_.setPosition(shapeOffset);
    advance();
    Shape s;
    if (parseShape(&s)) written = s.toString(false);
    lex_.setPosition(save);
    tok_ = saved;
    error(shapeOffset, fmt::format("operand '{}' is written with shape {} but has shape {}", tok_.text, written,
                                   operand->shape().toString(false)));
    return nullptr;
  }
  advance();
  return operand;
}

bool Parser::parseOperands(Module& m, Computation& c, Instruction& inst,
                           NameTable& names, int anonDepth) {
  if (!expect(TokKind::LParen, "'(' starting the operand list")) return false;
  if (inst.opcode() == Opcode::Parameter) {
    if (!parseInt64(&inst.attrs().parameterNumber, "parameter number")) return false;
    if (inst.attrs().parameterNumber < 0) return error("negative parameter number");
    return expect(TokKind::RParen, "')'");
  }
  if (inst.opcode() == Opcode::Constant) {
    Literal lit;
    if (!inst.shape().isValid() || !parseLiteral(inst.shape(), &lit)) return false;
    inst.attrs().literal = std::move(lit);
    return expect(TokKind::RParen, "')' after the literal");
  }
  if (consumeIf(TokKind::RParen)) return true;
  // Operands collect on a shared stack (nested instructions push above this
  // list and pop before it continues), then copy in (short lists need no allocation).
  const size_t base = operandStack_.size();
  do {
    Instruction* op = parseOperand(m, c, names, anonDepth);
    if (!op) return false;
    operandStack_.push_back(op);
  } while (consumeIf(TokKind::Comma));
  inst.setOperands(std::span<Instruction* const>(operandStack_.data() + base, operandStack_.size() - base));
  operandStack_.resize(base);
  return expect(TokKind::RParen, "')' or ',' in operand list");
}

bool Parser::parseInstruction(Module& m, Computation& c, NameTable& names) {
  size_t nameOffset = tok_.offset;
  std::string_view name;
  if (tok_.kind == TokKind::AttrName) {  // `name=shape ...`
    name = tok_.text;
    advance();
  } else if (tok_.kind == TokKind::Name || tok_.kind == TokKind::Ident) {
    if (tok_.colonConsumed) return error("unexpected ':' after instruction name");
    name = tok_.text;
    advance();
    if (!expect(TokKind::Equal, "'=' after the instruction name")) return false;
  } else {
    return error(fmt::format("expected instruction name, got {}", describe()));
  }
  if (names.contains(name)) return error(nameOffset, fmt::format("duplicate instruction name '{}'", name));
  if (!startsShape()) return error(fmt::format("expected the result shape, got {}", describe()));
  // Built before its shape so the shape is parsed in place; the opcode is set once read.
  auto inst = std::make_unique<Instruction>(Opcode::Parameter, std::string(name), Shape());
  if (!parseShape(&inst->mutableShape())) return false;
  if (tok_.kind != TokKind::Ident) return error(fmt::format("expected opcode, got {}", describe()));
  size_t opcodeOffset = tok_.offset;
  std::string_view opText = tok_.text;
  auto op = opcodeFromName(opText);
  std::string_view sugar;
  if (!op) {
    for (std::string_view suffix : {std::string_view("-start"), std::string_view("-update"), std::string_view("-done")}) {
      if (opText.size() > suffix.size() && opText.substr(opText.size() - suffix.size()) == suffix) {
        op = opcodeFromName(opText.substr(0, opText.size() - suffix.size()));
        if (op) sugar = suffix;
        break;
      }
    }
    if (!op) return error(fmt::format("unknown opcode '{}'", opText));
  }
  advance();
  inst->setOpcode(*op);
  inst->setLocation(locAt(nameOffset));
  if (!parseOperands(m, c, *inst, names, 0)) return false;
  CalledSlots called;
  compareTypeGiven_ = false;
  seenAttrs_.clear();
  while (tok_.kind == TokKind::Comma) {
    advance();
    if (!parseAttribute(m, *inst, names, called)) return false;
  }
  if (!finishInstruction(m, c, *inst, called, opcodeOffset, sugar)) return false;
  attributeBlocks_.intern(*inst);
  Instruction* raw = c.addInstruction(std::move(inst));
  names.insert(raw->name(), raw);
  return true;
}

bool Parser::finishInstruction(Module& m, Computation&, Instruction& inst, CalledSlots& called, size_t opcodeOffset,
                               std::string_view sugar) {
  // Called computations in XLA's order.
  std::vector<Computation*> comps;
  if (called.condition || called.body) {
    if (!called.condition || !called.body) return error(opcodeOffset, "while needs both condition= and body=");
    comps = {called.condition, called.body};
  }
  if (called.trueComputation || called.falseComputation) {
    if (!called.trueComputation || !called.falseComputation)
      return error(opcodeOffset, "conditional needs both true_computation= and false_computation=");
    comps.push_back(called.trueComputation);
    comps.push_back(called.falseComputation);
  }
  for (Computation* b : called.branches) comps.push_back(b);
  if (called.select || called.scatter) {
    if (!called.select || !called.scatter) return error(opcodeOffset, "select-and-scatter needs select= and scatter=");
    comps.push_back(called.select);
    comps.push_back(called.scatter);
  }
  for (Computation* t : called.toApply) comps.push_back(t);
  inst.setCalledComputations(std::move(comps));

  Opcode op = inst.opcode();
  if (op == Opcode::Compare && !compareTypeGiven_ && inst.operandCount() > 0)
    inst.attrs().comparisonType = defaultComparisonType(inst.operand(0)->shape().elementType());
  if (inst.hasAttributes() && inst.attrs().window && inst.attrs().window->dimensions.empty())
    inst.attrs().window.reset();

  if (!sugar.empty()) {
    std::string thread = inst.attrs().asyncExecutionThread;
    if (sugar == "-start") {
      const Shape& s = inst.shape();
      if (!s.isTuple() || s.tupleSize() < 2)
        return error(opcodeOffset, fmt::format("{}-start must have a tuple shape of at least 2 elements",
                                               opcodeName(op)));
      std::string wrappedName = m.uniqueComputationName(inst.name() + ".async_wrapped");
      auto wrapped = std::make_unique<Computation>(wrappedName);
      wrapped->setLocation(inst.location());
      wrapped->setExecutionThread(thread);
      std::vector<Instruction*> params;
      for (int64_t i = 0; i < inst.operandCount(); ++i) {
        std::string pname = i == 0 ? std::string("async_param") : fmt::format("async_param.{}", i);
        Instruction* p = wrapped->addInstruction(Opcode::Parameter, pname, inst.operand(i)->shape());
        p->attrs().parameterNumber = i;
        p->setLocation(inst.location());
        params.push_back(p);
      }
      Instruction* rootInst = wrapped->addInstruction(op, "async_op", s.tupleElement(1));
      rootInst->setLocation(inst.location());
      rootInst->attrs() = std::move(inst.attrs());
      rootInst->attrs().asyncExecutionThread = "main";
      rootInst->setOperands(params);
      rootInst->setCalledComputations(inst.calledComputations());
      wrapped->setRoot(rootInst);
      Computation* w = m.addComputation(std::move(wrapped));
      computationsByName_[w->name()] = w;
      inst.attrs() = InstructionAttributes{};
      inst.attrs().asyncExecutionThread = thread;
      inst.setOpcode(Opcode::AsyncStart);
      inst.setCalledComputations({w});
    } else {
      if (inst.operandCount() != 1 || (inst.operand(0)->opcode() != Opcode::AsyncStart &&
                                       inst.operand(0)->opcode() != Opcode::AsyncUpdate))
        return error(opcodeOffset, fmt::format("{}{} needs exactly one async-start or async-update operand",
                                               opcodeName(op), sugar));
      const Instruction* start = inst.operand(0);
      Computation* w = start->toApply();
      if (!w || !w->root() || w->root()->opcode() != op)
        return error(opcodeOffset, fmt::format("{}{} does not match its async-start", opcodeName(op), sugar));
      inst.attrs() = InstructionAttributes{};
      inst.attrs().asyncExecutionThread = start->attrs().asyncExecutionThread;
      inst.setOpcode(sugar == "-done" ? Opcode::AsyncDone : Opcode::AsyncUpdate);
      inst.setCalledComputations({w});
    }
    op = inst.opcode();
  } else if ((op == Opcode::AsyncUpdate || op == Opcode::AsyncDone) && inst.calledComputations().empty() &&
             inst.operandCount() == 1) {
    inst.setCalledComputations(inst.operand(0)->calledComputations());
  }

  int arity = opcodeInfo(op).arity;
  if (arity != kVariadic && inst.operandCount() != arity)
    return error(opcodeOffset, fmt::format("{} expects {} operand{}, got {}", opcodeName(op), arity,
                                           arity == 1 ? "" : "s", inst.operandCount()));
  if (op == Opcode::Constant && !inst.attrs().literal) return error(opcodeOffset, "constant needs a literal");
  return true;
}

bool Parser::parseAttribute(Module& m, Instruction& inst, NameTable& names,
                            CalledSlots& called) {
  if (tok_.kind != TokKind::AttrName) return error(fmt::format("expected attribute name, got {}", describe()));
  std::string_view key = tok_.text;
  size_t keyOffset = tok_.offset;
  for (std::string_view s : seenAttrs_)
    if (s == key) return error(fmt::format("duplicate attribute '{}'", key));
  seenAttrs_.push_back(key);
  auto A = [&]() -> InstructionAttributes& { return inst.attrs(); };
  CommonAttributes& common = inst.common();
  const Opcode op = inst.opcode();

  // Values read by the lexer's raw scanners start right after `key=`.
  if (key == "backend_config") return parseBackendConfig(&common.backendConfig);
  if (key == "dim_labels") {
    A().convDims.emplace();
    return parseDimLabels(&*A().convDims);
  }
  if (key == "padding" && op != Opcode::CustomCall) return parsePadding(&A().padding);
  if (key == "origin") {
    std::string_view raw = lex_.scanRawValue();
    if (raw.empty()) return error("expected a value for origin");
    common.origin = RawAttribute{"origin", std::string(raw)};
    advance();
    return true;
  }
  if (key == "sparsity") {
    std::string_view raw = lex_.scanRawValue();
    if (raw.empty()) return error("expected a value for sparsity");
    A().sparsity = RawAttribute{"sparsity", std::string(raw)};
    advance();
    return true;
  }
  advance();

  if (key == "metadata") {
    // Real modules repeat a few hundred distinct metadata blocks over
    // thousands of instructions (ext_gh_bert_dp_graph_2: 124 distinct of
    // 1,083, over half of its bytes): a spelling seen before is not parsed
    // again, and its instructions share one value.
    size_t end = tok_.kind == TokKind::LBrace ? braceGroupEnd(tok_.offset) : 0;
    std::string_view spelling = end ? file_.contents().substr(tok_.offset, end - tok_.offset) : std::string_view();
    size_t spellingHash = end ? metadataBySpelling_.hash(spelling) : 0;
    if (const SharedValue<OpMetadata>* known = end ? metadataBySpelling_.find(spelling, spellingHash) : nullptr) {
      lastMetadata_ = *known;
      lex_.setPosition(end);
      advance();
    } else {
      OpMetadata metadata;
      if (!parseMetadata(&metadata)) return false;
      if (!(metadata == *lastMetadata_)) lastMetadata_ = SharedValue<OpMetadata>(std::move(metadata));
      if (end) metadataBySpelling_.insert(spelling, spellingHash, lastMetadata_);
    }
    common.metadata = lastMetadata_;
    return true;
  }
  if (key == "dimensions") {
    if (tok_.kind == TokKind::Int) {  // a bare single dimension is accepted
      int64_t d;
      if (!parseInt64(&d)) return false;
      A().dimensions = {d};
      return true;
    }
    return parseIntList(&A().dimensions);
  }
  if (key == "to_apply" || key == "calls") {
    called.any = true;
    if (key == "calls" && tok_.kind == TokKind::LBrace) {
      // `calls={%a, %b}` list form or an inline body: decide by what follows.
      char c = lex_.peekChar();
      if (c == '%' || c == '}') {
        std::vector<Computation*> list;
        if (!parseComputationList(m, &list)) return false;
        for (Computation* x : list) called.toApply.push_back(x);
        return true;
      }
    }
    Computation* c = parseComputationRef(m);
    if (!c) return false;
    called.toApply.push_back(c);
    return true;
  }
  if (key == "called_computations") {
    called.any = true;
    std::vector<Computation*> list;
    if (!parseComputationList(m, &list)) return false;
    for (Computation* x : list) called.toApply.push_back(x);
    return true;
  }
  if (key == "condition" || key == "body" || key == "true_computation" || key == "false_computation" ||
      key == "select" || key == "scatter") {
    called.any = true;
    Computation* c = parseComputationRef(m);
    if (!c) return false;
    if (key == "condition") called.condition = c;
    else if (key == "body") called.body = c;
    else if (key == "true_computation") called.trueComputation = c;
    else if (key == "false_computation") called.falseComputation = c;
    else if (key == "select") called.select = c;
    else called.scatter = c;
    return true;
  }
  if (key == "branch_computations") {
    called.any = true;
    return parseComputationList(m, &called.branches);
  }
  if (key == "index") return parseInt64(&A().tupleIndex);
  if (key == "sharding") {
    Sharding s;
    if (!parseSharding(&s)) return false;
    // A single sharding on a tuple-shaped instruction applies to every leaf.
    if (s.kind != Sharding::Kind::Tuple && inst.shape().isTuple()) {
      int64_t leaves = inst.shape().leafCount();
      if (leaves > 1 << 20) return error("tuple too large for a sharding");
      Sharding t;
      t.kind = Sharding::Kind::Tuple;
      t.tupleElements.assign(static_cast<size_t>(leaves), s);
      s = std::move(t);
    }
    common.sharding = std::move(s);
    return true;
  }
  if (key == "frontend_attributes") return parseFrontendAttributes(&common.frontendAttributes);
  if (key == "slice") {
    if (op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart) return error(keyOffset, "unexpected slice=");
    return parseSliceRanges(&A().slice);
  }
  if (key == "slice_sizes") {
    if (op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart)
      return parseIntListList(&A().permuteSliceSizes);
    return parseIntList(&A().gatherSliceSizes);
  }
  if (key == "kind") return parseEnum(&A().fusionKind, parseFusionKind, "fusion kind");
  if (key == "direction") return parseEnum(&A().comparisonDirection, parseComparisonDirection, "comparison direction");
  if (key == "type") {
    compareTypeGiven_ = true;
    return parseEnum(&A().comparisonType, parseComparisonType, "comparison type");
  }
  if (key == "custom_call_target") return parseString(&A().customCallTarget);
  if (key == "api_version") {
    if (!parseEnum(&A().apiVersion, parseCustomCallApiVersion, "api_version")) return false;
    return true;
  }
  if (key == "custom_call_has_side_effect") return parseBool(&A().customCallHasSideEffect);
  if (key == "custom_call_schedule" || key == "schedule")
    return parseEnum(&A().customCallSchedule, parseCustomCallSchedule, "custom-call schedule");
  if (key == "padding_type" || (key == "padding" && op == Opcode::CustomCall))
    return parseEnum(&A().paddingType, parsePaddingType, "padding type");
  if (key == "operand_layout_constraints") {
    std::vector<Shape> shapes;
    if (!parseShapeList(&shapes)) return false;
    A().operandLayoutConstraints = std::move(shapes);
    return true;
  }
  if (key == "output_to_operand_aliasing") return parseOutputOperandAliasing(&A().outputToOperandAliasing);
  if (key == "literal") {
    Shape s;
    if (!parseShape(&s)) return false;
    Literal lit;
    if (!parseLiteral(s, &lit)) return false;
    A().literal = std::move(lit);
    return true;
  }
  if (key == "lhs_contracting_dims") return parseIntList(&A().dotDims.mutate().lhsContractingDimensions);
  if (key == "rhs_contracting_dims") return parseIntList(&A().dotDims.mutate().rhsContractingDimensions);
  if (key == "lhs_batch_dims") return parseIntList(&A().dotDims.mutate().lhsBatchDimensions);
  if (key == "rhs_batch_dims") return parseIntList(&A().dotDims.mutate().rhsBatchDimensions);
  if (key == "lhs_ragged_dims") return parseIntList(&A().raggedDotDims.mutate().lhsRaggedDimensions);
  if (key == "rhs_group_dims") return parseIntList(&A().raggedDotDims.mutate().rhsGroupDimensions);
  if (key == "operand_precision") return parsePrecisionList(&A().precision.mutate().operandPrecision);
  if (key == "algorithm") {
    if (op == Opcode::RngBitGenerator) return parseEnum(&A().rngAlgorithm, parseRngAlgorithm, "rng algorithm");
    return parseEnum(&A().precision.mutate().algorithm, parseDotAlgorithm, "dot algorithm");
  }
  if (key == "window") {
    A().window.emplace();
    return parseWindow(&*A().window);
  }
  if (key == "feature_group_count") return parseInt64(&A().featureGroupCount);
  if (key == "batch_group_count") return parseInt64(&A().batchGroupCount);
  if (key == "conv_kind") return parseEnum(&A().convKind, parseConvKind, "conv_kind");
  if (key == "replica_groups") {
    A().replicaGroups.emplace();
    return parseReplicaGroups(&*A().replicaGroups);
  }
  if (key == "channel_id") {
    int64_t v;
    if (!parseInt64(&v)) return false;
    A().channelId = v;
    return true;
  }
  if (key == "constrain_layout") return parseBool(&A().constrainLayout);
  if (key == "use_global_device_ids") return parseBool(&A().useGlobalDeviceIds);
  if (key == "source_target_pairs") return parseSourceTargetPairs(&A().sourceTargetPairs);
  if (key == "is_host_transfer") return parseBool(&A().isHostTransfer);
  if (key == "mode") {  // legacy all-reduce mode: parsed and ignored
    if (tok_.kind != TokKind::Ident) return error("expected a mode name");
    advance();
    return true;
  }
  if (key == "distribution") return parseEnum(&A().distribution, parseRngDistribution, "distribution");
  if (key == "delta") return parseInt64(&A().rngDelta);
  if (key == "is_stable") return parseBool(&A().isStable);
  if (key == "indices_are_sorted") return parseBool(&A().indicesAreSorted);
  if (key == "unique_indices") return parseBool(&A().uniqueIndices);
  if (key == "offset_dims") return parseIntList(&A().gatherDims.mutate().offsetDims);
  if (key == "collapsed_slice_dims") return parseIntList(&A().gatherDims.mutate().collapsedSliceDims);
  if (key == "start_index_map") return parseIntList(&A().gatherDims.mutate().startIndexMap);
  if (key == "operand_batching_dims") return parseIntList(&A().gatherDims.mutate().operandBatchingDims);
  if (key == "start_indices_batching_dims") return parseIntList(&A().gatherDims.mutate().startIndicesBatchingDims);
  if (key == "index_vector_dim") {
    int64_t v;
    if (!parseInt64(&v)) return false;
    A().gatherDims.mutate().indexVectorDim = v;
    A().scatterDims.mutate().indexVectorDim = v;
    return true;
  }
  if (key == "update_window_dims") return parseIntList(&A().scatterDims.mutate().updateWindowDims);
  if (key == "inserted_window_dims") return parseIntList(&A().scatterDims.mutate().insertedWindowDims);
  if (key == "scatter_dims_to_operand_dims") return parseIntList(&A().scatterDims.mutate().scatterDimsToOperandDims);
  if (key == "input_batching_dims") return parseIntList(&A().scatterDims.mutate().inputBatchingDims);
  if (key == "scatter_indices_batching_dims") return parseIntList(&A().scatterDims.mutate().scatterIndicesBatchingDims);
  if (key == "iota_dimension") return parseInt64(&A().iotaDimension);
  if (key == "inferred_dimension") return parseInt64(&A().inferredDimension);
  if (key == "dynamic_slice_sizes") return parseIntList(&A().dynamicSliceSizes);
  if (key == "parameter_replication") {
    std::vector<bool> v;
    if (!parseBoolList(&v)) return false;
    if (static_cast<int64_t>(v.size()) != inst.shape().leafCount())
      return error(keyOffset, fmt::format("parameter_replication has {} entries, the shape has {} leaves", v.size(),
                                          inst.shape().leafCount()));
    A().parameterReplication = std::move(v);
    return true;
  }
  if (key == "exponent_bits") return parseInt64(&A().exponentBits);
  if (key == "mantissa_bits") return parseInt64(&A().mantissaBits);
  if (key == "infeed_config") return parseString(&A().infeedConfig);
  if (key == "outfeed_config") return parseString(&A().outfeedConfig);
  if (key == "outfeed_shape") {
    Shape s;
    if (!parseShape(&s)) return false;
    A().outfeedShape = std::move(s);
    return true;
  }
  if (key == "left_side") return parseBool(&A().leftSide);
  if (key == "lower") return parseBool(&A().lower);
  if (key == "unit_diagonal") return parseBool(&A().unitDiagonal);
  if (key == "transpose_a") return parseEnum(&A().transposeA, parseTriangularTranspose, "transpose_a");
  if (key == "fft_type") return parseEnum(&A().fftType, parseFftType, "fft_type");
  if (key == "fft_length") return parseIntList(&A().fftLength);
  if (key == "epsilon") {
    double v;
    if (!parseDouble(&v)) return false;
    A().epsilon = static_cast<float>(v);
    return true;
  }
  if (key == "feature_index") return parseInt64(&A().featureIndex);
  if (key == "domain") {
    A().domain.emplace();
    return parseDomain(&*A().domain);
  }
  if (key == "k") return parseInt64(&A().k);
  if (key == "largest") return parseBool(&A().largest);
  if (key == "num_carries") return parseInt64(&A().numCarries);
  if (key == "is_reverse") return parseBool(&A().isReverse);
  if (key == "is_associative") return parseBool(&A().isAssociative);
  if (key == "async_execution_thread") return parseString(&A().asyncExecutionThread);
  if (key == "cross_program_prefetch_index") {
    int64_t v;
    if (!parseInt64(&v)) return false;
    A().crossProgramPrefetchIndex = v;
    return true;
  }
  if (key == "is_composite") return parseBool(&A().isComposite);
  if (key == "result_accuracy") return parseResultAccuracy(&A().resultAccuracy.mutate());
  if (key == "statistics") {
    common.statistics.emplace();
    return parseStatistics(&*common.statistics);
  }
  if (key == "control-predecessors") {
    if (!expect(TokKind::LBrace, "'{'")) return false;
    if (!consumeIf(TokKind::RBrace)) {
      do {
        if (tok_.kind != TokKind::Name && tok_.kind != TokKind::Ident)
          return error(fmt::format("expected instruction name, got {}", describe()));
        Instruction* pred = names.find(tok_.text);
        if (!pred) return error(fmt::format("control predecessor '{}' is not defined", tok_.text));
        inst.addControlPredecessor(pred);
        advance();
      } while (consumeIf(TokKind::Comma));
      if (!expect(TokKind::RBrace, "'}'")) return false;
    }
    return true;
  }
  // Unknown attribute: keep its text verbatim. The lexer already consumed the
  // first value token into tok_, so rescan from its start.
  lex_.setPosition(tok_.offset);
  std::string_view raw = lex_.scanRawValue();
  if (raw.empty()) return error(fmt::format("expected a value for attribute '{}'", key));
  common.unknown.push_back(RawAttribute{std::string(key), std::string(raw)});
  advance();
  return true;
}

std::optional<Shape> Parser::parseShapeOnly() {
  advance();
  Shape s;
  if (!parseShape(&s)) return std::nullopt;
  if (tok_.kind != TokKind::Eof) {
    error(fmt::format("unexpected {} after the shape", describe()));
    return std::nullopt;
  }
  return s;
}

}  // namespace

std::unique_ptr<Module> parseHloText(const SourceFile& file, DiagnosticEngine& diags, const ParseOptions& options) {
  Parser p(file, diags, options);
  return p.parseModule();
}

std::optional<Shape> parseShapeText(const SourceFile& file, DiagnosticEngine& diags) {
  Parser p(file, diags, ParseOptions{});
  return p.parseShapeOnly();
}

}  // namespace tpu::hlo
