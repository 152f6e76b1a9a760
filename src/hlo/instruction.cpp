#include "hlo/instruction.h"

#include "hlo/computation.h"

namespace tpu::hlo {

const InstructionAttributes& Instruction::defaultAttributes() {
  static const InstructionAttributes kDefaults;
  return kDefaults;
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
