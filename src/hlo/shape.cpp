#include "hlo/shape.h"

#include <fmt/format.h>

namespace tpu::hlo {

// ---------------------------------------------------------------- Layout

bool Layout::isPlain() const {
  return dimLevelTypes.empty() && tiles.empty() && tailPaddingAlignment == 1 &&
         indexPrimitiveType == ElementType::Invalid && pointerPrimitiveType == ElementType::Invalid &&
         elementSizeInBits == 0 && memorySpace == 0 && splitConfigs.empty() &&
         dynamicShapeMetadataPrefixBytes == 0;
}

Layout Layout::defaultForRank(int64_t rank) {
  Layout l;
  l.minorToMajor.resize(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) l.minorToMajor[static_cast<size_t>(i)] = rank - 1 - i;
  return l;
}

namespace {

void appendInts(std::string& out, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", v[i]);
  }
}

void appendLayout(std::string& out, const Layout& l) {
  out += '{';
  appendInts(out, l.minorToMajor);
  if (!l.isPlain()) {
    out += ':';
    if (!l.dimLevelTypes.empty()) {
      out += "D(";
      for (size_t i = 0; i < l.dimLevelTypes.size(); ++i) {
        if (i) out += ',';
        const DimLevelType& d = l.dimLevelTypes[i];
        static const char kLetters[] = {'D', 'C', 'S', 'H'};
        out += kLetters[static_cast<int>(d.kind)];
        if (d.notUnique) out += '+';
        if (d.notOrdered) out += '~';
      }
      out += ')';
    }
    if (!l.tiles.empty()) {
      out += 'T';
      for (const Tile& t : l.tiles) {
        out += '(';
        for (size_t i = 0; i < t.dimensions.size(); ++i) {
          if (i) out += ',';
          if (t.dimensions[i] == Tile::kCombineDimension)
            out += '*';
          else
            fmt::format_to(std::back_inserter(out), "{}", t.dimensions[i]);
        }
        out += ')';
      }
    }
    if (l.tailPaddingAlignment != 1) fmt::format_to(std::back_inserter(out), "L({})", l.tailPaddingAlignment);
    if (l.indexPrimitiveType != ElementType::Invalid)
      fmt::format_to(std::back_inserter(out), "#({})", elementTypeName(l.indexPrimitiveType));
    if (l.pointerPrimitiveType != ElementType::Invalid)
      fmt::format_to(std::back_inserter(out), "*({})", elementTypeName(l.pointerPrimitiveType));
    if (l.elementSizeInBits != 0) fmt::format_to(std::back_inserter(out), "E({})", l.elementSizeInBits);
    if (l.memorySpace != 0) fmt::format_to(std::back_inserter(out), "S({})", l.memorySpace);
    if (!l.splitConfigs.empty()) {
      out += "SC";
      for (const SplitConfig& s : l.splitConfigs) {
        fmt::format_to(std::back_inserter(out), "({}:", s.dimension);
        appendInts(out, s.splitIndices);
        out += ')';
      }
    }
    if (l.dynamicShapeMetadataPrefixBytes > 0)
      fmt::format_to(std::back_inserter(out), "M({})", l.dynamicShapeMetadataPrefixBytes);
  }
  out += '}';
}

void appendShape(std::string& out, const Shape& s, bool withLayout) {
  switch (s.kind()) {
    case Shape::Kind::Invalid: out += "<invalid>"; return;
    case Shape::Kind::Token: out += "token[]"; return;
    case Shape::Kind::Opaque: out += "opaque[]"; return;
    case Shape::Kind::Tuple: {
      out += '(';
      const auto& e = s.tupleElements();
      for (size_t i = 0; i < e.size(); ++i) {
        if (i) out += ", ";
        if (i && i % 5 == 0) fmt::format_to(std::back_inserter(out), "/*index={}*/", i);
        appendShape(out, e[i], withLayout);
      }
      out += ')';
      return;
    }
    case Shape::Kind::Array: break;
  }
  if (s.isBuffer()) out += "b(";
  out += elementTypeName(s.elementType());
  out += '[';
  for (int64_t i = 0; i < s.rank(); ++i) {
    if (i) out += ',';
    int64_t d = s.dimension(i);
    if (d == kUnboundedSize) {
      out += '?';
    } else {
      if (s.isDynamicDimension(i)) out += "<=";
      fmt::format_to(std::back_inserter(out), "{}", d);
    }
  }
  out += ']';
  if (withLayout && s.hasLayout() && (s.rank() > 0 || !s.layout().isPlain())) appendLayout(out, s.layout());
  if (s.isBuffer()) out += ')';
}

}  // namespace

bool Layout::isExpressibleAsText() const {
  for (const Tile& tile : tiles)
    for (int64_t d : tile.dimensions)
      if (d < 0 && d != Tile::kCombineDimension) return false;
  auto unsignedOrAbsent = [](ElementType t) { return t == ElementType::Invalid || isUnsignedIntegerType(t); };
  if (!unsignedOrAbsent(indexPrimitiveType) || !unsignedOrAbsent(pointerPrimitiveType)) return false;
  for (const SplitConfig& split : splitConfigs)
    if (split.splitIndices.empty()) return false;
  // M(n) is written only when positive.
  return dynamicShapeMetadataPrefixBytes >= 0;
}

std::string Layout::toString() const {
  std::string out;
  appendLayout(out, *this);
  return out;
}

// ---------------------------------------------------------------- Shape

const Shape::Rep& Shape::invalidRep() {
  static const Rep kInvalid;
  return kInvalid;
}

Shape::Rep& Shape::mutableRep() {
  if (!rep_) {
    rep_ = new Rep;
  } else if (rep_->references.load(std::memory_order_acquire) != 1) {
    Rep* own = new Rep(*rep_);
    release();
    rep_ = own;
  }
  return *rep_;
}

Shape::Shape(ElementType type, std::vector<int64_t> dims) : rep_(new Rep) {
  rep_->kind = Kind::Array;
  rep_->elementType = type;
  rep_->dims = std::move(dims);
}

Shape Shape::tuple(std::vector<Shape> elements) {
  Rep* rep = new Rep;
  rep->kind = Kind::Tuple;
  rep->elementType = ElementType::Tuple;
  rep->elements = std::move(elements);
  return Shape(rep);
}

Shape Shape::token() {
  Rep* rep = new Rep;
  rep->kind = Kind::Token;
  rep->elementType = ElementType::Token;
  return Shape(rep);
}

Shape Shape::opaque() {
  Rep* rep = new Rep;
  rep->kind = Kind::Opaque;
  rep->elementType = ElementType::Opaque;
  return Shape(rep);
}

void Shape::setBuffer(bool buffer) {
  if (isBuffer() != buffer) mutableRep().buffer = buffer;
}

void Shape::setElementType(ElementType type) {
  if (elementType() != type) mutableRep().elementType = type;
}

void Shape::clearLayout() {
  if (hasLayout()) mutableRep().layout.reset();
}

void Shape::setDimensions(std::vector<int64_t> dims) {
  Rep& r = mutableRep();
  r.dims = std::move(dims);
  r.dynamic.clear();
}

void Shape::setDynamicDimension(int64_t i, bool dynamic) {
  if (isDynamicDimension(i) == dynamic) return;
  Rep& r = mutableRep();
  if (r.dynamic.empty()) r.dynamic.assign(r.dims.size(), false);
  r.dynamic[static_cast<size_t>(i)] = dynamic;
}

bool Shape::isDynamic() const {
  if (isTuple()) {
    for (const Shape& e : tupleElements())
      if (e.isDynamic()) return true;
    return false;
  }
  for (bool b : dynamicDimensions())
    if (b) return true;
  return false;
}

bool Shape::isUnboundedDynamic() const {
  if (isTuple()) {
    for (const Shape& e : tupleElements())
      if (e.isUnboundedDynamic()) return true;
    return false;
  }
  for (int64_t d : dimensions())
    if (d == kUnboundedSize) return true;
  return false;
}

const Shape* Shape::subshape(const ShapeIndex& index) const {
  const Shape* s = this;
  for (int64_t i : index) {
    if (!s->isTuple() || i < 0 || i >= s->tupleSize()) return nullptr;
    s = &s->tupleElement(i);
  }
  return s;
}

int64_t Shape::leafCount() const {
  if (!isTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : tupleElements()) n += e.leafCount();
  return n;
}

namespace {
bool missesDefaultLayout(const Shape& s) {
  if (s.isTuple()) {
    for (const Shape& e : s.tupleElements())
      if (missesDefaultLayout(e)) return true;
    return false;
  }
  return s.isArray() && !s.hasLayout();
}
}  // namespace

void Shape::setDefaultLayoutIfMissing() {
  // Checked first so that shapes already laid out stay shared.
  if (!missesDefaultLayout(*this)) return;
  if (isTuple()) {
    for (Shape& e : mutableTupleElements()) e.setDefaultLayoutIfMissing();
  } else {
    setLayout(Layout::defaultForRank(rank()));
  }
}

Shape Shape::withDefaultLayout() const {
  Shape s = *this;
  s.setDefaultLayoutIfMissing();
  return s;
}

Shape Shape::withoutLayout() const {
  Shape s = *this;
  s.clearLayout();
  if (s.isTuple())
    for (Shape& e : s.mutableTupleElements()) e = e.withoutLayout();
  return s;
}

std::optional<int64_t> Shape::elementCount() const {
  if (!isArray()) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : dimensions()) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

std::optional<int64_t> Shape::byteSize() const {
  if (isTuple()) {
    int64_t total = 0;
    for (const Shape& e : tupleElements()) {
      auto b = e.byteSize();
      if (!b || __builtin_add_overflow(total, *b, &total)) return std::nullopt;
    }
    return total;
  }
  if (!isArray()) return 0;
  auto n = elementCount();
  if (!n) return std::nullopt;
  int64_t bytes;
  if (__builtin_mul_overflow(*n, static_cast<int64_t>(elementTypeInfo(elementType()).byteSize), &bytes))
    return std::nullopt;
  return bytes;
}

namespace {
bool sameDynamic(const std::vector<bool>& a, const std::vector<bool>& b) {
  if (a.size() == b.size()) return a == b;
  const auto& longer = a.size() > b.size() ? a : b;
  for (bool x : longer)
    if (x) return false;
  return true;
}
}  // namespace

bool Shape::operator==(const Shape& o) const {
  if (rep_ == o.rep_) return true;
  const Rep& a = rep();
  const Rep& b = o.rep();
  return a.kind == b.kind && a.elementType == b.elementType && a.buffer == b.buffer && a.dims == b.dims &&
         sameDynamic(a.dynamic, b.dynamic) && a.layout == b.layout && a.elements == b.elements;
}

bool Shape::equalIgnoringLayout(const Shape& o) const {
  if (rep_ == o.rep_) return true;
  const Rep& a = rep();
  const Rep& b = o.rep();
  if (a.kind != b.kind || a.elementType != b.elementType || a.buffer != b.buffer || a.dims != b.dims ||
      !sameDynamic(a.dynamic, b.dynamic) || a.elements.size() != b.elements.size())
    return false;
  for (size_t i = 0; i < a.elements.size(); ++i)
    if (!a.elements[i].equalIgnoringLayout(b.elements[i])) return false;
  return true;
}

bool Shape::compatible(const Shape& o) const {
  if (rep_ == o.rep_) return true;
  const Rep& a = rep();
  const Rep& b = o.rep();
  if (a.kind != b.kind || a.elementType != b.elementType || a.dims != b.dims ||
      a.elements.size() != b.elements.size())
    return false;
  for (size_t i = 0; i < a.elements.size(); ++i)
    if (!a.elements[i].compatible(b.elements[i])) return false;
  return true;
}

std::string Shape::toString(bool withLayout) const {
  std::string out;
  appendShape(out, *this, withLayout);
  return out;
}

void Shape::appendTo(std::string& out, bool withLayout) const { appendShape(out, *this, withLayout); }

}  // namespace tpu::hlo
