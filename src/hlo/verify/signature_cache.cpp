#include "hlo/verify/signature_cache.h"

#include <utility>

namespace tpu::hlo::verify_detail {

const Signature& SignatureCache::get(const Computation* computation) {
  auto [it, inserted] = cache_.try_emplace(computation);
  if (!inserted) return it->second;
  Signature& sig = it->second;
  const auto& instructions = computation->instructions();
  size_t count = 0;
  for (const auto& inst : instructions)
    if (inst && inst->opcode() == Opcode::Parameter) ++count;
  sig.params.assign(count, nullptr);
  for (const auto& inst : instructions) {
    if (!inst || inst->opcode() != Opcode::Parameter) continue;
    // Through const: the mutable accessor would unshare a shared block.
    int64_t n = std::as_const(*inst).attrs().parameterNumber;
    if (n < 0 || static_cast<size_t>(n) >= count || sig.params[static_cast<size_t>(n)]) {
      sig.dense = false;
      continue;
    }
    sig.params[static_cast<size_t>(n)] = inst.get();
  }
  for (const Instruction* p : sig.params)
    if (!p) sig.dense = false;
  // The root pointer is only trusted if it is one of the instructions.
  const Instruction* root = computation->root();
  for (const auto& inst : instructions)
    if (inst.get() == root && root) sig.root = root;
  return sig;
}

}  // namespace tpu::hlo::verify_detail
