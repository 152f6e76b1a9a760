// Shapes (arrays, tuples, tokens, opaque, buffers) and layouts.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/element_type.h"

namespace tpu::hlo {

// A path into a tuple shape: {} is the whole shape, {1,0} element 0 of element 1.
using ShapeIndex = std::vector<int64_t>;

// One tile of a tiled layout: `T(8,128)`. kCombineDimension is the `*` entry.
struct Tile {
  static constexpr int64_t kCombineDimension = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> dimensions;
  bool operator==(const Tile&) const = default;
};

// `SC(dim:i,j,...)`: split a dimension at the given element indices.
struct SplitConfig {
  int64_t dimension = 0;
  std::vector<int64_t> splitIndices;
  bool operator==(const SplitConfig&) const = default;
};

// Dimension level types of sparse layouts (`D(D,C+~,...)`): accepted and kept.
enum class DimLevelKind : uint8_t { Dense, Compressed, Singleton, LooseCompressed };
struct DimLevelType {
  DimLevelKind kind = DimLevelKind::Dense;
  bool notUnique = false;   // '+'
  bool notOrdered = false;  // '~'
  bool operator==(const DimLevelType&) const = default;
};

struct Layout {
  std::vector<int64_t> minorToMajor;  // first entry = fastest varying dimension
  std::vector<DimLevelType> dimLevelTypes;
  std::vector<Tile> tiles;
  int64_t tailPaddingAlignment = 1;                       // L(n)
  ElementType indexPrimitiveType = ElementType::Invalid;    // #(u32)
  ElementType pointerPrimitiveType = ElementType::Invalid;  // *(u32)
  int64_t elementSizeInBits = 0;                          // E(n); 0 = natural size
  int64_t memorySpace = 0;                                // S(n)
  std::vector<SplitConfig> splitConfigs;                  // SC(..)
  int64_t dynamicShapeMetadataPrefixBytes = 0;            // M(n)

  bool operator==(const Layout&) const = default;
  // Only minor_to_major present (what `{1,0}` means).
  bool isPlain() const;
  // Descending minor_to_major {rank-1, ..., 0}, no extras.
  static Layout defaultForRank(int64_t rank);
  // `{1,0:T(8,128)}` text (without a leading space), as in shapes.
  std::string toString() const;
  // False for values toString() cannot write so that the parser reads them
  // back (negative tile sizes, signed index types, ...): the .hlob reader
  // rejects such layouts.
  bool isExpressibleAsText() const;
};

// Size of an unbounded dynamic dimension `?`.
inline constexpr int64_t kUnboundedSize = std::numeric_limits<int64_t>::min();

// Shapes are values with a shared, copy-on-write representation: copying a
// Shape (into an instruction, a literal, a tuple, a table) is a reference
// count increment, and every mutator unshares first. Most instructions of a
// module have one of a few dozen distinct shapes, so sharing keeps modules
// small and lets the .hlob reader build each distinct shape once.
// References returned by accessors (and by mutableLayout / mutable-
// TupleElements) stay valid until the next mutation of this Shape.
class Shape {
 public:
  enum class Kind : uint8_t { Array, Tuple, Token, Opaque, Invalid };

  Shape() = default;  // Invalid
  // Array shape; with layout when given (use Shape::withDefaultLayout to add one).
  Shape(ElementType type, std::vector<int64_t> dims);
  static Shape array(ElementType type, std::vector<int64_t> dims) { return Shape(type, std::move(dims)); }
  static Shape scalar(ElementType type) { return Shape(type, {}); }
  static Shape tuple(std::vector<Shape> elements);
  static Shape token();
  static Shape opaque();

  Shape(const Shape& other) noexcept : rep_(other.rep_) { retain(); }
  Shape(Shape&& other) noexcept : rep_(other.rep_) { other.rep_ = nullptr; }
  Shape& operator=(const Shape& other) noexcept {
    Shape copy(other);
    std::swap(rep_, copy.rep_);
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    std::swap(rep_, other.rep_);
    return *this;
  }
  ~Shape() { release(); }

  Kind kind() const { return rep().kind; }
  bool isArray() const { return kind() == Kind::Array; }
  bool isTuple() const { return kind() == Kind::Tuple; }
  bool isToken() const { return kind() == Kind::Token; }
  bool isOpaque() const { return kind() == Kind::Opaque; }
  bool isValid() const { return kind() != Kind::Invalid; }
  bool isScalar() const { return isArray() && rep().dims.empty(); }
  // `b(f32[4])` buffer shapes: an array shape with this flag.
  bool isBuffer() const { return rep().buffer; }
  void setBuffer(bool buffer);

  // Array: its element type; Tuple: ElementType::Tuple; Token/Opaque: those.
  ElementType elementType() const { return rep().elementType; }
  void setElementType(ElementType type);

  // Array dimensions. A bounded dynamic dimension `<=N` has size N and is
  // dynamic; an unbounded one `?` has size kUnboundedSize and is dynamic.
  int64_t rank() const { return static_cast<int64_t>(rep().dims.size()); }
  const std::vector<int64_t>& dimensions() const { return rep().dims; }
  int64_t dimension(int64_t i) const { return rep().dims[static_cast<size_t>(i)]; }
  void setDimensions(std::vector<int64_t> dims);
  bool isDynamicDimension(int64_t i) const {
    const Rep& r = rep();
    return !r.dynamic.empty() && r.dynamic[static_cast<size_t>(i)];
  }
  void setDynamicDimension(int64_t i, bool dynamic);
  bool isDynamic() const;         // any dynamic dimension (recursively for tuples)
  bool isUnboundedDynamic() const;  // any `?` dimension
  const std::vector<bool>& dynamicDimensions() const { return rep().dynamic; }  // empty = all static

  // Tuple elements.
  const std::vector<Shape>& tupleElements() const { return rep().elements; }
  std::vector<Shape>& mutableTupleElements() { return mutableRep().elements; }
  const Shape& tupleElement(int64_t i) const { return rep().elements[static_cast<size_t>(i)]; }
  int64_t tupleSize() const { return static_cast<int64_t>(rep().elements.size()); }
  // Sub-shape at `index` (nullptr when the index does not exist).
  const Shape* subshape(const ShapeIndex& index) const;
  // Array leaves in pre-order (for tuple shardings, parameter_replication...).
  int64_t leafCount() const;

  // Layout (arrays only). Absent means "unset": printers print none.
  bool hasLayout() const { return rep().layout.has_value(); }
  const Layout& layout() const { return *rep().layout; }
  Layout& mutableLayout() { return *mutableRep().layout; }
  void setLayout(Layout layout) { mutableRep().layout = std::move(layout); }
  void clearLayout();
  // Adds the default layout to this array (and every array inside tuples) that lacks one.
  void setDefaultLayoutIfMissing();
  Shape withDefaultLayout() const;
  Shape withoutLayout() const;

  // Product of dimensions (bounded dynamic dims count their bound). Arrays
  // only; nullopt on overflow or unbounded dims.
  std::optional<int64_t> elementCount() const;
  // Dense byte size with elementTypeInfo().byteSize per element (tuples:
  // sum of leaves; token/opaque: 0); nullopt on overflow.
  std::optional<int64_t> byteSize() const;

  // Exact equality including layouts, dynamic flags and buffer flag.
  bool operator==(const Shape& other) const;
  bool equalIgnoringLayout(const Shape& other) const;
  // Same element types and dimensions, ignoring layouts and dynamic-ness.
  bool compatible(const Shape& other) const;
  // Whether the two share one representation (copies of each other that
  // neither has mutated since): equal without comparing.
  bool sharesRepresentationWith(const Shape& other) const { return rep_ == other.rep_; }
  // The shared representation's identity (null for Invalid), for caches
  // keyed by shape that want to skip comparing copies of one value.
  const void* representation() const { return rep_; }

  // XLA's human string: `f32[8,<=4]{1,0:T(8,128)}`, `(f32[], s32[2]{0})`.
  std::string toString(bool withLayout = true) const;
  // The same text appended to `out` (printers: no temporary string).
  void appendTo(std::string& out, bool withLayout = true) const;

 private:
  struct Rep {
    std::atomic<uint32_t> references{1};
    Kind kind = Kind::Invalid;
    ElementType elementType = ElementType::Invalid;
    bool buffer = false;
    std::vector<int64_t> dims;
    std::vector<bool> dynamic;
    std::vector<Shape> elements;
    std::optional<Layout> layout;

    Rep() = default;
    Rep(const Rep& o)
        : kind(o.kind), elementType(o.elementType), buffer(o.buffer), dims(o.dims), dynamic(o.dynamic),
          elements(o.elements), layout(o.layout) {}
  };
  static const Rep& invalidRep();
  explicit Shape(Rep* rep) : rep_(rep) {}
  const Rep& rep() const { return rep_ ? *rep_ : invalidRep(); }
  // This Shape's own representation, copied first when shared.
  Rep& mutableRep();
  void retain() const {
    if (rep_) rep_->references.fetch_add(1, std::memory_order_relaxed);
  }
  void release() {
    if (rep_ && rep_->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete rep_;
    rep_ = nullptr;
  }

  Rep* rep_ = nullptr;  // null: the Invalid shape
};

}  // namespace tpu::hlo
