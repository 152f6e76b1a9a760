#include "sim/builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace tpu::sim {

using isa::Operand;
using isa::OperandKind;
using isa::SrcForm;

namespace opnd {
namespace {
Operand make(OperandKind k, SrcForm form, int32_t reg, int64_t imm, uint32_t buffer = 0) {
  Operand o;
  o.kind = k;
  o.form = form;
  o.reg = reg;
  o.imm = imm;
  o.buffer = buffer;
  return o;
}
}  // namespace
Operand sreg(int r) { return make(OperandKind::SReg, SrcForm::SReg, r, 0); }
Operand vreg(int r) { return make(OperandKind::VReg, SrcForm::Reg, r, 0); }
Operand vmask(int r) { return make(OperandKind::VMask, SrcForm::Reg, r, 0); }
Operand imm(int64_t v) { return make(OperandKind::Imm, SrcForm::Imm, -1, v); }
Operand fimm(float v) {
  return make(OperandKind::FImm, SrcForm::Imm, -1, static_cast<int32_t>(std::bit_cast<uint32_t>(v)));
}
Operand vmem(int base, int64_t offset) { return make(OperandKind::VmemAddr, SrcForm::Imm, base, offset); }
Operand smem(int base, int64_t offset) { return make(OperandKind::SmemAddr, SrcForm::Imm, base, offset); }
Operand hbm(uint32_t buffer, int base, int64_t offset) {
  return make(OperandKind::HbmAddr, SrcForm::Imm, base, offset, buffer);
}
Operand sem(int index) { return make(OperandKind::Sem, SrcForm::Imm, -1, index); }
Operand semReg(int r) { return make(OperandKind::Sem, SrcForm::SReg, r, 0); }
Operand mxu(int unit) { return make(OperandKind::Mxu, SrcForm::Reg, unit, 0); }
Operand xlu(int unit) { return make(OperandKind::Xlu, SrcForm::Reg, unit, 0); }
Operand desc(uint32_t index) { return make(OperandKind::DmaDesc, SrcForm::Imm, -1, index); }
Operand sublanes(uint32_t mask) { return make(OperandKind::SublaneMask, SrcForm::Imm, -1, mask); }
}  // namespace opnd

isa::Instr makeInstr(std::string_view mnemonic, std::vector<Operand> operands) {
  auto opc = isa::opcodeFromMnemonic(mnemonic);
  if (!opc) throw std::invalid_argument(fmt::format("unknown mnemonic '{}'", mnemonic));
  const isa::InstrDesc& d = isa::instrDesc(*opc);
  if (operands.size() > d.operands.size())
    throw std::invalid_argument(fmt::format("too many operands for '{}'", mnemonic));
  isa::Instr in;
  in.opcode = *opc;
  for (size_t i = 0; i < d.operands.size(); ++i) {
    const isa::OperandDesc& od = d.operands[i];
    Operand o;
    if (i < operands.size()) {
      o = operands[i];
    } else {
      if (!od.hasDefault) throw std::invalid_argument(fmt::format("'{}' needs operand '{}'", mnemonic, od.name));
      o.kind = OperandKind::Imm;
      o.form = SrcForm::Imm;
      o.imm = od.defaultValue;
    }
    // Adapt the given form to the table's kind.
    switch (od.kind) {
      case OperandKind::SRegImm:
        if (o.kind == OperandKind::SReg) o.form = SrcForm::SReg;
        else o.form = SrcForm::Imm, o.reg = -1;
        break;
      case OperandKind::VSrc:
        if (o.kind == OperandKind::VReg) o.form = SrcForm::Reg;
        else if (o.kind == OperandKind::SReg) o.form = SrcForm::SReg;
        else o.form = SrcForm::Imm, o.reg = -1;
        break;
      case OperandKind::FImm:
      case OperandKind::Imm:
      case OperandKind::SublaneMask:
      case OperandKind::Label:
        o.form = SrcForm::Imm;
        o.reg = -1;
        break;
      case OperandKind::Sem:
        if (o.kind != OperandKind::Sem) throw std::invalid_argument(fmt::format("'{}': expected a semaphore", mnemonic));
        break;
      default:
        if (o.kind != od.kind)
          throw std::invalid_argument(fmt::format("'{}' operand {}: expected {}, got {}", mnemonic, i + 1,
                                                  isa::operandKindName(od.kind), isa::operandKindName(o.kind)));
        o.form = SrcForm::Imm;  // plain operands carry the default form, as the decoder makes them
        break;
    }
    o.kind = od.kind;
    in.operands.push_back(o);
  }
  return in;
}

ProgramBuilder::ProgramBuilder(const target::TargetDesc& target) : target_(target) {
  program_.targetName = target.name;
  program_.targetJson = target.json;
}

uint32_t ProgramBuilder::hbmBuffer(std::string name, isa::DType dtype, std::vector<int64_t> shape) {
  isa::Buffer b;
  b.name = std::move(name);
  b.space = isa::MemSpace::Hbm;
  b.dtype = dtype;
  b.shape = std::move(shape);
  program_.buffers.push_back(std::move(b));
  return static_cast<uint32_t>(program_.buffers.size() - 1);
}

uint32_t ProgramBuilder::vmemBuffer(std::string name, isa::DType dtype, std::vector<int64_t> shape,
                                    uint64_t address) {
  isa::Buffer b;
  b.name = std::move(name);
  b.space = isa::MemSpace::Vmem;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.address = address;
  program_.buffers.push_back(std::move(b));
  return static_cast<uint32_t>(program_.buffers.size() - 1);
}

uint32_t ProgramBuilder::initializedBuffer(std::string name, isa::MemSpace space, isa::DType dtype,
                                          std::vector<int64_t> shape, uint64_t address, std::string init) {
  isa::Buffer b;
  b.name = std::move(name);
  b.space = space;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.address = address;
  b.init = static_cast<int32_t>(program_.data.size());
  program_.data.push_back(isa::DataBlob{std::move(init), {}, 0});
  program_.buffers.push_back(std::move(b));
  return static_cast<uint32_t>(program_.buffers.size() - 1);
}

uint32_t ProgramBuilder::descriptor(std::string name, uint32_t chunkBytes, std::vector<isa::DmaDim> dims) {
  isa::DmaDescriptor d;
  d.name = std::move(name);
  d.chunkBytes = chunkBytes;
  d.dims = std::move(dims);
  program_.dmaDescriptors.push_back(std::move(d));
  return static_cast<uint32_t>(program_.dmaDescriptors.size() - 1);
}

void ProgramBuilder::entry(std::string name, std::vector<uint32_t> args, std::vector<uint32_t> results) {
  isa::Entry e;
  e.name = std::move(name);
  e.args = std::move(args);
  e.results = std::move(results);
  e.start = here();
  program_.entries.push_back(std::move(e));
}

void ProgramBuilder::op(std::string_view mnemonic, std::vector<Operand> operands) {
  bundle({makeInstr(mnemonic, std::move(operands))});
}

void ProgramBuilder::bundle(std::vector<isa::Instr> instrs) {
  isa::Bundle b;
  b.instrs = std::move(instrs);
  program_.bundles.push_back(std::move(b));
}

void ProgramBuilder::branch(std::string_view mnemonic, std::vector<Operand> operands, std::string label) {
  operands.push_back(opnd::imm(0));
  fixups_.emplace_back(program_.bundles.size(), std::move(label));
  op(mnemonic, std::move(operands));
}

void ProgramBuilder::mergeIntoLast(std::vector<isa::Instr> instrs) {
  auto& last = program_.bundles.back().instrs;
  last.insert(last.begin(), std::make_move_iterator(instrs.begin()), std::make_move_iterator(instrs.end()));
}

void ProgramBuilder::label(std::string name) {
  labels_[name] = here();
  program_.labels.push_back(isa::Label{std::move(name), here()});
}

isa::Program ProgramBuilder::finish() {
  for (auto& [bundle, name] : fixups_) {
    auto it = labels_.find(name);
    if (it == labels_.end()) throw std::invalid_argument("undefined label " + name);
    for (isa::Instr& in : program_.bundles[bundle].instrs)
      for (Operand& o : in.operands)
        if (o.kind == OperandKind::Label) o.imm = it->second;
  }
  std::stable_sort(program_.labels.begin(), program_.labels.end(),
                   [](const isa::Label& a, const isa::Label& b) { return a.bundle < b.bundle; });
  return std::move(program_);
}

Timeline::Timeline(const target::TargetDesc& target) : target_(target) {}

int Timeline::readyAt(char kind, int reg) const {
  auto it = ready_.find({kind, reg});
  return it == ready_.end() ? 0 : it->second;
}

namespace {
char regKindChar(OperandKind k) {
  switch (k) {
    case OperandKind::SReg: return 's';
    case OperandKind::VReg: return 'v';
    case OperandKind::VMask: return 'm';
    default: return 0;
  }
}
}  // namespace

int Timeline::place(const isa::Instr& instr, int earliest) {
  const isa::InstrDesc& d = instr.desc();
  std::vector<std::pair<char, int>> reads, writes;
  int unitKey = -1;
  for (size_t i = 0; i < instr.operands.size(); ++i) {
    const Operand& o = instr.operands[i];
    const isa::OperandDesc& od = d.operands[i];
    if (o.kind == OperandKind::Mxu) unitKey = o.reg;
    if (o.kind == OperandKind::Xlu) unitKey = 16 + o.reg;
    char k = regKindChar(o.kind);
    if ((o.kind == OperandKind::SRegImm || o.kind == OperandKind::VSrc) && o.form != SrcForm::Imm)
      k = o.form == SrcForm::SReg ? 's' : 'v';
    if ((o.kind == OperandKind::VmemAddr || o.kind == OperandKind::SmemAddr || o.kind == OperandKind::HbmAddr) &&
        o.reg >= 0)
      reads.emplace_back('s', o.reg);
    if (o.kind == OperandKind::Sem && o.form == SrcForm::SReg) reads.emplace_back('s', o.reg);
    if (!k) continue;
    if (od.role != isa::OperandRole::Out) reads.emplace_back(k, o.reg);
    if (od.role != isa::OperandRole::In) writes.emplace_back(k, o.reg);
  }
  int lat = std::max(1, isa::latency(d, target_));
  int c = std::max(0, earliest);
  for (auto& r : reads) {
    auto it = ready_.find(r);
    if (it != ready_.end()) c = std::max(c, it->second);
  }
  for (auto& w : writes) {
    auto it = lastRead_.find(w);
    if (it != lastRead_.end()) c = std::max(c, it->second + 1);
    auto jt = lastWrite_.find(w);
    if (jt != lastWrite_.end()) c = std::max(c, jt->second + 1);
  }
  for (;; ++c) {
    if (c >= static_cast<int>(bundles_.size())) bundles_.resize(c + 1);
    Slot& s = bundles_[c];
    if (d.slot != target::SlotClass::None &&
        s.used[static_cast<size_t>(d.slot)] >= target_.slotCount(d.slot))
      continue;
    if (unitKey >= 0 && std::find(s.units.begin(), s.units.end(), unitKey) != s.units.end()) continue;
    bool clash = false;  // no two writes of one register in a bundle
    for (const isa::Instr& other : s.instrs) {
      const isa::InstrDesc& od = other.desc();
      for (size_t i = 0; i < other.operands.size(); ++i)
        if (od.operands[i].role != isa::OperandRole::In)
          for (auto& w : writes)
            if (regKindChar(other.operands[i].kind) == w.first && other.operands[i].reg == w.second) clash = true;
    }
    if (clash) continue;
    break;
  }
  Slot& s = bundles_[c];
  if (d.slot != target::SlotClass::None) s.used[static_cast<size_t>(d.slot)]++;
  if (unitKey >= 0) s.units.push_back(unitKey);
  s.instrs.push_back(instr);
  for (auto& r : reads) lastRead_[r] = std::max(lastRead_[r], c);
  for (auto& w : writes) {
    lastWrite_[w] = c;
    ready_[w] = c + lat;
  }
  return c;
}

void Timeline::emit(ProgramBuilder& b, int minLength, int loopSreg, const std::string& loopLabel) {
  int n = std::max(length(), minLength);
  if (loopSreg >= 0) n = std::max(n, 1);
  bundles_.resize(n);
  for (int c = 0; c < n; ++c) {
    if (c == n - 1 && loopSreg >= 0) {
      b.branch("loop", {opnd::sreg(loopSreg)}, loopLabel);
      b.mergeIntoLast(std::move(bundles_[c].instrs));
    } else {
      b.bundle(std::move(bundles_[c].instrs));
    }
  }
  bundles_.clear();
  ready_.clear();
  lastRead_.clear();
  lastWrite_.clear();
}

}  // namespace tpu::sim
