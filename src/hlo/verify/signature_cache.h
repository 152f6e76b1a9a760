// Parameters and roots of called computations, computed once per computation
// so that checking many callers of one computation stays linear.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "hlo/computation.h"
#include "support/diagnostics.h"

namespace tpu::hlo::verify_detail {

struct Signature {
  // Parameter instructions by number; `dense` is false when numbers have gaps,
  // duplicates or are out of range (reported by the module verifier; callers
  // then skip signature checks rather than report knock-on errors).
  std::vector<const Instruction*> params;
  const Instruction* root = nullptr;
  bool dense = true;
};

class SignatureCache {
 public:
  const Signature& get(const Computation* computation);

 private:
  std::unordered_map<const Computation*, Signature> cache_;
};

}  // namespace tpu::hlo::verify_detail

namespace tpu::hlo {
struct VerifyOptions;
}

namespace tpu::hlo::verify_detail {

// An inference result that borrows the shape it equals when it can (an
// operand's, the declared one, a callee root's) so that the common case
// allocates nothing. Empty = inference failed (and reported why).
class Inferred {
 public:
  Inferred() = default;
  Inferred(std::nullopt_t) {}
  Inferred(const Shape& s) : ref_(&s) {}
  Inferred(Shape&& s) : owned_(std::move(s)) {}
  // The dimensions of array `dims` with element type `type`.
  static Inferred retyped(const Shape& dims, ElementType type) {
    Inferred r(dims);
    r.type_ = type;
    return r;
  }
  Inferred(const Inferred& o) : owned_(o.owned_), ref_(o.ref_), type_(o.type_) {}
  Inferred(Inferred&& o) noexcept : owned_(std::move(o.owned_)), ref_(o.ref_), type_(o.type_) {}
  Inferred& operator=(const Inferred&) = delete;
  explicit operator bool() const { return ref_ || owned_; }
  // Retyped results are materialized on first dereference (error paths).
  const Shape& operator*() const {
    if (type_ != ElementType::Invalid) materialize();
    return ref_ ? *ref_ : *owned_;
  }
  const Shape* operator->() const { return &**this; }
  Shape value() const { return **this; }
  // Same element type (unless retyped) and dimensions as an array `declared`
  // without materializing; nullopt when the general comparison is needed.
  std::optional<bool> quickArrayMatch(const Shape& declared) const {
    if (type_ == ElementType::Invalid || !ref_) return std::nullopt;
    return declared.isArray() && declared.elementType() == type_ && declared.dimensions() == ref_->dimensions();
  }

 private:
  void materialize() const {
    Shape s(type_, ref_->dimensions());
    owned_ = std::move(s);
    ref_ = nullptr;
    type_ = ElementType::Invalid;
  }
  mutable std::optional<Shape> owned_;
  mutable const Shape* ref_ = nullptr;
  mutable ElementType type_ = ElementType::Invalid;
};

// inferShape with a shared cache (the module verifier uses one for all
// instructions).
Inferred inferShapeCached(const Instruction& instruction, DiagnosticEngine& diags,
                                      const VerifyOptions& options, SignatureCache& signatures);
}  // namespace tpu::hlo::verify_detail
