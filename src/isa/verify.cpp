#include "isa/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace tpu::isa {

namespace {

using target::SlotClass;
using target::TargetDesc;

bool kindAllowsForm(OperandKind kind, SrcForm form) {
  switch (kind) {
    case OperandKind::SRegImm: return form == SrcForm::SReg || form == SrcForm::Imm;
    case OperandKind::VSrc: return true;
    case OperandKind::Sem: return form == SrcForm::SReg || form == SrcForm::Imm;
    default: return true;
  }
}

bool fitsInt32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

// Bytes a vector memory op touches beyond addr (for static bound checks).
uint64_t vectorFootprint(const Instr& instr, int64_t stride, uint32_t sublanes) {
  uint64_t rowBytes = static_cast<uint64_t>(std::max(1, vectorRowBytes(instr.desc())));
  int last = 0;
  for (int i = 0; i < 8; ++i)
    if (sublanes & (1u << i)) last = i;
  return static_cast<uint64_t>(std::max<int64_t>(0, stride) * last) + rowBytes;
}

}  // namespace

std::string checkInstrStructure(const Instr& instr, const Program& program) {
  const InstrDesc& d = instr.desc();
  if (d.opcode == Opcode::Invalid) return "invalid opcode";
  if (instr.operands.size() != d.operands.size())
    return fmt::format("'{}' takes {} operands, not {}", d.mnemonic, d.operands.size(), instr.operands.size());
  for (size_t i = 0; i < d.operands.size(); ++i) {
    const Operand& o = instr.operands[i];
    const OperandDesc& od = d.operands[i];
    if (o.kind != od.kind)
      return fmt::format("operand {} of '{}' must be {}, not {}", i + 1, d.mnemonic, operandKindName(od.kind),
                         operandKindName(o.kind));
    if (!kindAllowsForm(o.kind, o.form)) return fmt::format("operand {} of '{}' has a bad form", i + 1, d.mnemonic);
    switch (o.kind) {
      case OperandKind::HbmAddr:
        if (o.buffer >= program.buffers.size())
          return fmt::format("'{}' refers to buffer #{} but the program has {}", d.mnemonic, o.buffer,
                             program.buffers.size());
        if (program.buffers[o.buffer].space != MemSpace::Hbm)
          return fmt::format("buffer '{}' of '{}' is in {}, not HBM", program.buffers[o.buffer].name, d.mnemonic,
                             memSpaceName(program.buffers[o.buffer].space));
        if (o.imm < -(int64_t{1} << 23) || o.imm >= (int64_t{1} << 23))
          return fmt::format("HBM offset {} does not fit 24 signed bits; use a base register", o.imm);
        break;
      case OperandKind::DmaDesc:
        if (o.imm < 0 || static_cast<uint64_t>(o.imm) >= program.dmaDescriptors.size())
          return fmt::format("'{}' refers to DMA descriptor #{} but the program has {}", d.mnemonic, o.imm,
                             program.dmaDescriptors.size());
        break;
      case OperandKind::Label:
        if (o.imm < 0 || static_cast<uint64_t>(o.imm) >= program.bundles.size())
          return fmt::format("branch target {} is outside the program ({} bundles)", o.imm, program.bundles.size());
        break;
      case OperandKind::Imm:
        if (od.name == "word" && (o.imm < 0 || o.imm >= wordsPerElement(d)))
          return fmt::format("'{}' has word={}, but its elements have words 0..{}", d.mnemonic, o.imm,
                             wordsPerElement(d) - 1);
        [[fallthrough]];
      case OperandKind::FImm:
      case OperandKind::VmemAddr:
      case OperandKind::SmemAddr:
        if (!fitsInt32(o.imm)) return fmt::format("immediate {} does not fit 32 bits", o.imm);
        break;
      case OperandKind::SRegImm:
      case OperandKind::VSrc:
        if (o.form == SrcForm::Imm && !fitsInt32(o.imm))
          return fmt::format("immediate {} does not fit 32 bits", o.imm);
        break;
      case OperandKind::SublaneMask:
        if (o.imm < 0 || o.imm > 0xff) return fmt::format("sublane mask {} does not fit 8 bits", o.imm);
        break;
      default: break;
    }
  }
  return {};
}

std::string checkInstrForTarget(const Instr& instr, const TargetDesc& t) {
  const InstrDesc& d = instr.desc();
  if (!targetSupports(d, t))
    return fmt::format("'{}' is not available on target '{}' (it has no int8 MXU)", d.mnemonic, t.name);
  auto regCheck = [&](const char* prefix, int reg, int count) -> std::string {
    if (reg < 0 || reg >= count)
      return fmt::format("register {}{} out of range: target '{}' has {}{}..{}{}", prefix, reg, t.name, prefix, 0,
                         prefix, count - 1);
    return {};
  };
  int64_t stride = 512;
  uint32_t sublanes = 0xff;
  for (size_t i = 0; i < instr.operands.size() && i < d.operands.size(); ++i) {
    if (d.operands[i].name == "stride") stride = instr.operands[i].imm;
    if (d.operands[i].kind == OperandKind::SublaneMask) sublanes = static_cast<uint32_t>(instr.operands[i].imm);
  }
  for (const Operand& o : instr.operands) {
    std::string err;
    switch (o.kind) {
      case OperandKind::SReg: err = regCheck("s", o.reg, t.registers.sregs); break;
      case OperandKind::VReg: err = regCheck("v", o.reg, t.registers.vregs); break;
      case OperandKind::VMask: err = regCheck("m", o.reg, t.registers.vmasks); break;
      case OperandKind::Mxu: err = regCheck("mxu", o.reg, t.mxu.count); break;
      case OperandKind::Xlu: err = regCheck("xlu", o.reg, t.slotCount(SlotClass::Xlu)); break;
      case OperandKind::SRegImm:
        if (o.form == SrcForm::SReg) err = regCheck("s", o.reg, t.registers.sregs);
        break;
      case OperandKind::VSrc:
        if (o.form == SrcForm::SReg) err = regCheck("s", o.reg, t.registers.sregs);
        if (o.form == SrcForm::Reg) err = regCheck("v", o.reg, t.registers.vregs);
        break;
      case OperandKind::Sem:
        if (o.form == SrcForm::SReg) err = regCheck("s", o.reg, t.registers.sregs);
        else if (o.imm < 0 || o.imm >= t.registers.semaphores)
          err = fmt::format("semaphore sem{} out of range: target '{}' has sem0..sem{}", o.imm, t.name,
                            t.registers.semaphores - 1);
        break;
      case OperandKind::HbmAddr:
        if (o.reg >= 0) err = regCheck("s", o.reg, t.registers.sregs);
        break;
      case OperandKind::VmemAddr:
      case OperandKind::SmemAddr: {
        bool vmem = o.kind == OperandKind::VmemAddr;
        if (o.reg >= 0) {
          err = regCheck("s", o.reg, t.registers.sregs);
          break;
        }
        // A static address: check it (and what a vector op reaches from it) fits.
        uint64_t size = vmem ? t.memory.vmemBytes : t.memory.smemBytes;
        uint64_t extent = d.semClass == SemClass::VectorLoad || d.semClass == SemClass::VectorStore
                              ? vectorFootprint(instr, stride, sublanes)
                              : (d.semClass == SemClass::ScalarMem ? 4 : 1);
        if (o.imm < 0 || static_cast<uint64_t>(o.imm) + extent > size)
          err = fmt::format("{} address {} (+{} bytes) is outside {} of {} bytes on target '{}'",
                            vmem ? "VMEM" : "SMEM", o.imm, extent, vmem ? "VMEM" : "SMEM", size, t.name);
        else if (d.semClass == SemClass::ScalarMem && o.imm % 4 != 0)
          err = fmt::format("SMEM address {} is not 4-byte aligned", o.imm);
        break;
      }
      default: break;
    }
    if (!err.empty()) return err;
  }
  return {};
}

std::string checkBundle(const Bundle& bundle, const TargetDesc& t) {
  std::array<int, target::kNumSlotClasses> used{};
  for (const Instr& in : bundle.instrs) {
    const InstrDesc& d = in.desc();
    if (d.slot == SlotClass::None) continue;
    int& n = used[static_cast<size_t>(d.slot)];
    if (++n > t.slotCount(d.slot))
      return fmt::format("bundle has more '{}' ops than the {} {} slot{} of target '{}'",
                         target::slotClassName(d.slot), t.slotCount(d.slot), target::slotClassName(d.slot),
                         t.slotCount(d.slot) == 1 ? "" : "s", t.name);
  }
  // Each register may be written by at most one op of a bundle, and each
  // MXU / transpose unit driven by at most one op.
  std::set<std::pair<int, int>> written;
  std::set<std::pair<int, int>> units;
  for (const Instr& in : bundle.instrs) {
    const InstrDesc& d = in.desc();
    for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
      const Operand& o = in.operands[i];
      if (o.kind == OperandKind::Mxu || o.kind == OperandKind::Xlu) {
        if (!units.insert({static_cast<int>(o.kind), o.reg}).second)
          return fmt::format("{}{} is used by more than one op of the bundle",
                             o.kind == OperandKind::Mxu ? "mxu" : "xlu", o.reg);
      }
      if (d.operands[i].role == OperandRole::In) continue;
      if (!written.insert({static_cast<int>(o.kind), o.reg}).second) {
        const char* prefix = o.kind == OperandKind::SReg ? "s" : o.kind == OperandKind::VReg ? "v" : "m";
        return fmt::format("register {}{} is written by more than one op of the bundle", prefix, o.reg);
      }
    }
  }
  return {};
}

std::string checkProgramTables(const Program& p, const TargetDesc* t) {
  for (const Buffer& b : p.buffers) {
    for (int64_t dim : b.shape)
      if (dim < 0 || dim > (int64_t{1} << 40)) return fmt::format("buffer '{}' has a bad dimension {}", b.name, dim);
    if (!sizeFits(b)) return fmt::format("buffer '{}' is too large (at most 2^48 bytes)", b.name);
    if (b.init >= 0) {
      if (static_cast<size_t>(b.init) >= p.data.size())
        return fmt::format("buffer '{}' refers to data #{} but the program has {}", b.name, b.init, p.data.size());
      if (p.data[b.init].bytes.size() != b.sizeBytes())
        return fmt::format("buffer '{}' needs {} bytes of initial data, data #{} has {}", b.name, b.sizeBytes(),
                           b.init, p.data[b.init].bytes.size());
    }
    if (b.space == MemSpace::Hbm && b.address != 0)
      return fmt::format("HBM buffer '{}' must not have a fixed address", b.name);
    if (t && b.space != MemSpace::Hbm) {
      uint64_t size = b.space == MemSpace::Vmem ? t->memory.vmemBytes : t->memory.smemBytes;
      if (b.address > size || b.sizeBytes() > size - b.address)
        return fmt::format("buffer '{}' ({} bytes at {}) does not fit in {} of {} bytes", b.name, b.sizeBytes(),
                           b.address, b.space == MemSpace::Vmem ? "VMEM" : "SMEM", size);
    }
  }
  for (const DmaDescriptor& d : p.dmaDescriptors) {
    if (d.chunkBytes == 0) return fmt::format("DMA descriptor '{}' has a zero chunk size", d.name);
    if (d.dims.size() > 4) return fmt::format("DMA descriptor '{}' has more than 4 dimensions", d.name);
    if (t && static_cast<int>(d.dims.size()) > t->dma.descriptorDims)
      return fmt::format("DMA descriptor '{}' has {} dimensions; target '{}' allows {}", d.name, d.dims.size(),
                         t->name, t->dma.descriptorDims);
    for (const DmaDim& dim : d.dims)
      if (dim.count == 0) return fmt::format("DMA descriptor '{}' has a zero count", d.name);
  }
  std::set<std::string_view> names;
  for (const Entry& e : p.entries) {
    if (!names.insert(e.name).second) return fmt::format("entry '{}' is defined twice", e.name);
    if (e.start >= p.bundles.size() && !(e.start == 0 && p.bundles.empty()))
      return fmt::format("entry '{}' starts at bundle {} outside the program", e.name, e.start);
    for (const auto* list : {&e.args, &e.results})
      for (uint32_t b : *list) {
        if (b >= p.buffers.size()) return fmt::format("entry '{}' refers to buffer #{}", e.name, b);
        if (p.buffers[b].space != MemSpace::Hbm)
          return fmt::format("entry '{}': argument/result '{}' must be an HBM buffer", e.name, p.buffers[b].name);
      }
  }
  for (const Label& l : p.labels)
    if (l.bundle > p.bundles.size()) return fmt::format("label '{}' is outside the program", l.name);
  std::set<std::string_view> labelNames, described;
  if (!p.kernels.empty())
    for (const Label& l : p.labels) labelNames.insert(l.name);
  for (const KernelMeta& k : p.kernels) {
    if (!labelNames.count(k.label))
      return fmt::format("kernel metadata for '{}', which is not a label of the program", k.label);
    if (!described.insert(k.label).second) return fmt::format("kernel '{}' is described twice", k.label);
    for (const std::string* s : {&k.kind, &k.hlo, &k.opName})
      if (!isMetadataText(*s))
        return fmt::format("kernel '{}': metadata text with a control character, '\"' or invalid UTF-8", k.label);
  }
  return {};
}

bool verifyProgram(const Program& p, const TargetDesc* t, DiagnosticEngine& diags, SourceLocation where) {
  auto report = [&](std::string msg) {
    if (where.valid()) diags.error(where, std::move(msg));
    else diags.error(std::move(msg));
  };
  if (std::string e = checkProgramTables(p, t); !e.empty()) {
    report(e);
    return false;
  }
  for (size_t b = 0; b < p.bundles.size(); ++b) {
    for (const Instr& in : p.bundles[b].instrs) {
      std::string e = checkInstrStructure(in, p);
      if (e.empty() && t) e = checkInstrForTarget(in, *t);
      if (!e.empty()) {
        report(fmt::format("bundle {}: {}", b, e));
        return false;
      }
    }
    if (t) {
      if (std::string e = checkBundle(p.bundles[b], *t); !e.empty()) {
        report(fmt::format("bundle {}: {}", b, e));
        return false;
      }
    }
  }
  return true;
}

}  // namespace tpu::isa
