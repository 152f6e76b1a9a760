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

std::string Layout::toString() const {
  std::string out;
  appendLayout(out, *this);
  return out;
}

// ---------------------------------------------------------------- Shape

Shape::Shape(ElementType type, std::vector<int64_t> dims)
    : kind_(Kind::Array), elementType_(type), dims_(std::move(dims)) {}

Shape Shape::tuple(std::vector<Shape> elements) {
  Shape s;
  s.kind_ = Kind::Tuple;
  s.elementType_ = ElementType::Tuple;
  s.elements_ = std::move(elements);
  return s;
}

Shape Shape::token() {
  Shape s;
  s.kind_ = Kind::Token;
  s.elementType_ = ElementType::Token;
  return s;
}

Shape Shape::opaque() {
  Shape s;
  s.kind_ = Kind::Opaque;
  s.elementType_ = ElementType::Opaque;
  return s;
}

void Shape::setDimensions(std::vector<int64_t> dims) {
  dims_ = std::move(dims);
  dynamic_.clear();
}

void Shape::setDynamicDimension(int64_t i, bool dynamic) {
  if (dynamic_.empty()) {
    if (!dynamic) return;
    dynamic_.assign(dims_.size(), false);
  }
  dynamic_[static_cast<size_t>(i)] = dynamic;
}

bool Shape::isDynamic() const {
  if (isTuple()) {
    for (const Shape& e : elements_)
      if (e.isDynamic()) return true;
    return false;
  }
  for (bool b : dynamic_)
    if (b) return true;
  return false;
}

bool Shape::isUnboundedDynamic() const {
  if (isTuple()) {
    for (const Shape& e : elements_)
      if (e.isUnboundedDynamic()) return true;
    return false;
  }
  for (int64_t d : dims_)
    if (d == kUnboundedSize) return true;
  return false;
}

const Shape* Shape::subshape(const ShapeIndex& index) const {
  const Shape* s = this;
  for (int64_t i : index) {
    if (!s->isTuple() || i < 0 || i >= s->tupleSize()) return nullptr;
    s = &s->elements_[static_cast<size_t>(i)];
  }
  return s;
}

int64_t Shape::leafCount() const {
  if (!isTuple()) return 1;
  int64_t n = 0;
  for (const Shape& e : elements_) n += e.leafCount();
  return n;
}

void Shape::setDefaultLayoutIfMissing() {
  if (isTuple()) {
    for (Shape& e : elements_) e.setDefaultLayoutIfMissing();
  } else if (isArray() && !layout_) {
    layout_ = Layout::defaultForRank(rank());
  }
}

Shape Shape::withDefaultLayout() const {
  Shape s = *this;
  s.setDefaultLayoutIfMissing();
  return s;
}

Shape Shape::withoutLayout() const {
  Shape s = *this;
  s.layout_.reset();
  for (Shape& e : s.elements_) e = e.withoutLayout();
  return s;
}

std::optional<int64_t> Shape::elementCount() const {
  if (!isArray()) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

std::optional<int64_t> Shape::byteSize() const {
  if (isTuple()) {
    int64_t total = 0;
    for (const Shape& e : elements_) {
      auto b = e.byteSize();
      if (!b || __builtin_add_overflow(total, *b, &total)) return std::nullopt;
    }
    return total;
  }
  if (!isArray()) return 0;
  auto n = elementCount();
  if (!n) return std::nullopt;
  int64_t bytes;
  if (__builtin_mul_overflow(*n, static_cast<int64_t>(elementTypeInfo(elementType_).byteSize), &bytes))
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
  if (kind_ != o.kind_ || elementType_ != o.elementType_ || buffer_ != o.buffer_ || dims_ != o.dims_ ||
      !sameDynamic(dynamic_, o.dynamic_) || layout_ != o.layout_ || elements_.size() != o.elements_.size())
    return false;
  for (size_t i = 0; i < elements_.size(); ++i)
    if (!(elements_[i] == o.elements_[i])) return false;
  return true;
}

bool Shape::equalIgnoringLayout(const Shape& o) const {
  if (kind_ != o.kind_ || elementType_ != o.elementType_ || buffer_ != o.buffer_ || dims_ != o.dims_ ||
      !sameDynamic(dynamic_, o.dynamic_) || elements_.size() != o.elements_.size())
    return false;
  for (size_t i = 0; i < elements_.size(); ++i)
    if (!elements_[i].equalIgnoringLayout(o.elements_[i])) return false;
  return true;
}

bool Shape::compatible(const Shape& o) const {
  if (kind_ != o.kind_ || elementType_ != o.elementType_ || dims_ != o.dims_ ||
      elements_.size() != o.elements_.size())
    return false;
  for (size_t i = 0; i < elements_.size(); ++i)
    if (!elements_[i].compatible(o.elements_[i])) return false;
  return true;
}

std::string Shape::toString(bool withLayout) const {
  std::string out;
  appendShape(out, *this, withLayout);
  return out;
}

}  // namespace tpu::hlo
