#include "hlo/instruction.h"

#include "hlo/computation.h"

namespace tpu::hlo {

const InstructionAttributes& Instruction::defaultAttributes() {
  static const InstructionAttributes kDefaults;
  return kDefaults;
}

void Instruction::unshareAttributes() {
  auto* own = new SharedAttributes;
  if (attrs_) own->value = attrs_->value;
  releaseAttributes();
  attrs_ = own;
}

void Instruction::releaseAttributes() {
  if (attrs_ && attrs_->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete attrs_;
  attrs_ = nullptr;
}

void Instruction::shareAttributesOf(const Instruction& other) {
  if (other.attrs_ == attrs_) return;
  if (other.attrs_) other.attrs_->references.fetch_add(1, std::memory_order_relaxed);
  releaseAttributes();
  attrs_ = other.attrs_;
}

bool Instruction::isRoot() const { return parent_ && parent_->root() == this; }

bool Instruction::hasSideEffect() const {
  if (isSideEffectingOpcode(opcode_)) return true;
  if (opcode_ == Opcode::CustomCall) return attrs().customCallHasSideEffect;
  if (isCollective(opcode_)) return true;
  if (opcode_ == Opcode::AsyncStart || opcode_ == Opcode::AsyncUpdate || opcode_ == Opcode::AsyncDone) {
    Computation* wrapped = toApply();
    if (wrapped && wrapped->root()) return wrapped->root()->hasSideEffect();
  }
  return false;
}

}  // namespace tpu::hlo
