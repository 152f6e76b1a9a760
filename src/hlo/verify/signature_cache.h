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
// inferShape with a shared cache (the module verifier uses one for all
// instructions).
std::optional<Shape> inferShapeCached(const Instruction& instruction, DiagnosticEngine& diags,
                                      const VerifyOptions& options, SignatureCache& signatures);
}  // namespace tpu::hlo::verify_detail
