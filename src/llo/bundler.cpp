#include "llo/bundler.h"

#include <fmt/format.h>

#include <set>

#include "isa/verify.h"

namespace tpu::llo {

namespace {

using isa::Instr;
using isa::InstrDesc;
using isa::Opcode;
using isa::Operand;
using isa::OperandKind;
using isa::OperandRole;
using isa::SemClass;
using isa::SrcForm;

// A register as (file, number): file 0 = s, 1 = v, 2 = m.
using Reg = std::pair<int, int>;

struct Effects {
  std::set<Reg> reads;
  std::set<Reg> writes;
  unsigned memReads = 0;   // bit per memory space (hbm, vmem, smem)
  unsigned memWrites = 0;
};

unsigned spaceBit(OperandKind kind) {
  switch (kind) {
    case OperandKind::HbmAddr: return 1;
    case OperandKind::VmemAddr: return 2;
    case OperandKind::SmemAddr: return 4;
    default: return 0;
  }
}

Effects effectsOf(const Instr& in) {
  Effects e;
  const InstrDesc& d = in.desc();
  for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
    const Operand& o = in.operands[i];
    OperandRole role = d.operands[i].role;
    int file = o.kind == OperandKind::SReg ? 0 : o.kind == OperandKind::VReg ? 1 : o.kind == OperandKind::VMask ? 2 : -1;
    if (file >= 0) {
      if (role != OperandRole::Out) e.reads.insert({file, o.reg});
      if (role != OperandRole::In) e.writes.insert({file, o.reg});
      continue;
    }
    if ((o.kind == OperandKind::SRegImm || o.kind == OperandKind::VSrc || o.kind == OperandKind::Sem) &&
        o.form != SrcForm::Imm)
      e.reads.insert({o.form == SrcForm::SReg ? 0 : 1, o.reg});
    if ((o.kind == OperandKind::VmemAddr || o.kind == OperandKind::SmemAddr || o.kind == OperandKind::HbmAddr) &&
        o.reg >= 0)
      e.reads.insert({0, o.reg});
    unsigned bit = spaceBit(o.kind);
    if (!bit) continue;
    switch (d.semClass) {
      case SemClass::VectorLoad: e.memReads |= bit; break;
      case SemClass::VectorStore: e.memWrites |= bit; break;
      case SemClass::ScalarMem: (in.opcode == Opcode::SSt ? e.memWrites : e.memReads) |= bit; break;
      default: e.memReads |= bit; e.memWrites |= bit; break;  // DMA: conservative
    }
  }
  return e;
}

}  // namespace

bool startsBundle(const InstrDesc& desc) {
  return desc.opcode == Opcode::SemWait || desc.opcode == Opcode::Sync || desc.opcode == Opcode::Barrier;
}

std::string bundleConflict(const isa::Bundle& bundle, const Instr& instr, const target::TargetDesc& target) {
  if (bundle.instrs.empty()) return {};
  if (startsBundle(instr.desc())) return fmt::format("'{}' starts a new bundle", instr.desc().mnemonic);
  Effects mine = effectsOf(instr);
  for (const Instr& other : bundle.instrs) {
    if (other.desc().endsBundle())
      return fmt::format("'{}' ends its bundle", other.desc().mnemonic);
    Effects theirs = effectsOf(other);
    for (const Reg& r : mine.reads)
      if (theirs.writes.count(r)) return "reads a register written earlier in the bundle";
    for (const Reg& r : mine.writes)
      if (theirs.writes.count(r)) return "writes a register written earlier in the bundle";
    if (mine.memReads & theirs.memWrites) return "reads memory stored to earlier in the bundle";
    if (mine.memWrites & theirs.memWrites) return "stores to memory stored to earlier in the bundle";
  }
  isa::Bundle trial = bundle;
  trial.instrs.push_back(instr);
  return isa::checkBundle(trial, target);
}

}  // namespace tpu::llo
