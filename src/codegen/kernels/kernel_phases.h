// The base of a kernel's phase class (SortEmitter, ScatterEmitter,
// FftPassEmitter and its HBM form): the lowering state the phases share,
// under the names the Lowerer's own member functions use, so a long
// emitter split into phases reads as it did inside Lowerer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/lowerer.h"

namespace tpu::codegen {

class KernelPhases {
 protected:
  KernelPhases(Lowerer& l, const hlo::Instruction& in)
      : l_(l), in(in), e_(l.e_), sregs_(l.sregs_), vregs_(l.vregs_), masks_(l.masks_), failed_(l.failed_),
        bufs_(l.bufs_), leaves_(l.leaves_), target_(l.target_) {}

  int sreg() { return l_.sreg(); }
  std::string S(int r) const { return l_.S(r); }
  std::string V(int r) const { return l_.V(r); }
  std::string V(VReg r) const { return l_.V(r); }
  std::string H(VReg r) const { return l_.H(r); }
  std::string M(int r) const { return l_.M(r); }
  VReg valloc(hlo::ElementType t) { return l_.valloc(t); }
  void vfree(VReg r) { l_.vfree(r); }
  int malloc_() { return l_.malloc_(); }
  int64_t base(int buf) const { return l_.base(buf); }

  Lowerer& l_;
  const hlo::Instruction& in;
  Emitter& e_;
  RegPool &sregs_, &vregs_, &masks_;
  bool& failed_;
  std::vector<Buf>& bufs_;
  std::map<const hlo::Instruction*, std::vector<int>>& leaves_;
  const target::TargetDesc& target_;
};

}  // namespace tpu::codegen
