#include "sim/decode.h"

#include <algorithm>
#include <map>

namespace tpu::sim {

namespace {

using isa::Opcode;
using isa::OperandKind;
using isa::OperandRole;
using isa::SrcForm;

RegKind kindOfReg(OperandKind k) {
  switch (k) {
    case OperandKind::VReg:
    case OperandKind::VSrc: return RegKind::V;
    case OperandKind::VMask: return RegKind::M;
    default: return RegKind::S;
  }
}

struct Decoder {
  const target::TargetDesc& t;
  DecodedProgram out;
  std::map<uint32_t, int32_t> constIndex;

  explicit Decoder(const target::TargetDesc& target) : t(target) {}

  int32_t constantVreg(uint32_t value) {
    auto it = constIndex.find(value);
    if (it != constIndex.end()) return it->second;
    int32_t idx = static_cast<int32_t>(out.constants.size());
    out.constants.push_back(value);
    constIndex.emplace(value, idx);
    return idx;  // relative; fixed up once the layout is known
  }

  Src makeSrc(const isa::Operand& o, OperandKind kind) {
    Src s;
    switch (kind) {
      case OperandKind::SReg:
      case OperandKind::VReg:
      case OperandKind::VMask:
        s.form = Src::Reg;
        s.reg = o.reg;
        break;
      case OperandKind::Imm:
      case OperandKind::FImm:
        s.form = Src::Imm;
        s.imm = static_cast<uint32_t>(o.imm);
        break;
      case OperandKind::SRegImm:
        if (o.form == SrcForm::SReg) {
          s.form = Src::Reg;  // a scalar register of a scalar op
          s.reg = o.reg;
        } else {
          s.form = Src::Imm;
          s.imm = static_cast<uint32_t>(o.imm);
        }
        break;
      case OperandKind::VSrc:
        if (o.form == SrcForm::Reg) {
          s.form = Src::Reg;
          s.reg = o.reg;
        } else if (o.form == SrcForm::SReg) {
          s.form = Src::SReg;
          s.reg = o.reg;
        } else {
          s.form = Src::Imm;
          s.imm = static_cast<uint32_t>(o.imm);
          s.reg = constantVreg(s.imm);  // relative until fixed up
        }
        break;
      default: break;
    }
    return s;
  }

  MemRef makeMem(const isa::Operand& o) {
    MemRef r;
    r.present = true;
    r.space = o.kind == OperandKind::HbmAddr   ? isa::MemSpace::Hbm
              : o.kind == OperandKind::SmemAddr ? isa::MemSpace::Smem
                                                : isa::MemSpace::Vmem;
    r.buffer = o.buffer;
    r.base = o.reg;
    r.offset = o.imm;
    return r;
  }

  DecodedOp decodeOp(const isa::Instr& in, uint32_t bundle) {
    const isa::InstrDesc& desc = in.desc();
    DecodedOp op;
    op.opcode = in.opcode;
    op.desc = &desc;
    op.bundle = bundle;
    op.slot = desc.slot;
    op.latency = isa::latency(desc, t);
    op.interval = isa::issueInterval(desc, t);
    if (desc.semClass == isa::SemClass::MxuMatmul) {
      // A push of 8 rows must occupy the MXU at least 8 row-cycles (one LHS
      // row per cycle; int8 rows int8Rate times faster), so the model can
      // never exceed the peak of peakFlopsPerCore().
      int rate = desc.feature == isa::Feature::Int8Mxu ? std::max(1, t.mxu.int8Rate) : 1;
      op.interval = std::max(op.interval, (kSublanes + rate - 1) / rate);
    }
    for (size_t i = 0; i < in.operands.size() && i < desc.operands.size(); ++i) {
      const isa::Operand& o = in.operands[i];
      const isa::OperandDesc& od = desc.operands[i];
      std::string_view name = od.name;
      if (od.role != OperandRole::In) {
        op.d = o.reg;
        op.dArch = o.reg;
        op.dKind = kindOfReg(od.kind);
        if (od.role == OperandRole::InOut) op.a = makeSrc(o, od.kind);
        continue;
      }
      switch (od.kind) {
        case OperandKind::VmemAddr:
        case OperandKind::SmemAddr:
        case OperandKind::HbmAddr:
          if (name == "src") op.mem2 = makeMem(o);
          else op.mem = makeMem(o);
          continue;
        case OperandKind::Sem: {
          SemRef s;
          s.present = true;
          s.viaSreg = o.form == SrcForm::SReg;
          s.index = s.viaSreg ? o.reg : static_cast<int32_t>(o.imm);
          if (name == "recv") op.sem2 = s;
          else op.sem = s;
          continue;
        }
        case OperandKind::Mxu:
        case OperandKind::Xlu: op.unit = o.reg; continue;
        case OperandKind::DmaDesc: op.dmaDesc = static_cast<int32_t>(o.imm); continue;
        case OperandKind::Label: op.label = static_cast<uint32_t>(o.imm); continue;
        case OperandKind::SublaneMask: op.sublanes = static_cast<uint32_t>(o.imm) & 0xff; continue;
        case OperandKind::VMask:
          if (name == "m") {
            op.m = o.reg;
            continue;
          }
          break;
        case OperandKind::Imm:
          if (name == "stride") {
            op.stride = static_cast<int32_t>(o.imm);
            continue;
          }
          if (name == "word") {
            op.word = static_cast<uint8_t>(o.imm);
            continue;
          }
          break;
        default: break;
      }
      Src s = makeSrc(o, od.kind);
      if (name == "ah") op.ah = s;
      else if (name == "bh") op.bh = s;
      else if (name == "a" || name == "v" || name == "lo" || name == "chip") op.a = s;
      else if (name == "b" || name == "hi" || name == "idx" || name == "n" || name == "l" || name == "s") op.b = s;
      else op.c = s;
    }
    return op;
  }

  // Registers an op reads (architectural), for the scoreboard and staging.
  static void collectInputs(DecodedOp& op) {
    auto add = [&](RegKind k, int32_t r) {
      if (r < 0 || op.numInputs >= op.inputs.size()) return;
      op.inputs[op.numInputs++] = RegUse{k, r};
    };
    auto srcKind = [&](const Src& s, RegKind vecKind) {
      if (s.form == Src::Reg) add(vecKind, s.reg);
      else if (s.form == Src::SReg) add(RegKind::S, s.reg);
    };
    const isa::InstrDesc& d = *op.desc;
    // Kind of each named source, from the table.
    for (const isa::OperandDesc& od : d.operands) {
      if (od.role == OperandRole::Out) continue;
      std::string_view n = od.name;
      const Src* s = nullptr;
      if (od.role == OperandRole::InOut || n == "a" || n == "v" || n == "lo" || n == "chip") s = &op.a;
      else if (n == "b" || n == "hi" || n == "idx" || n == "n" || n == "l" || (n == "s" && od.kind != OperandKind::Sem))
        s = &op.b;
      else if (n == "c") s = &op.c;
      else if (n == "ah") s = &op.ah;
      else if (n == "bh") s = &op.bh;
      if (s) srcKind(*s, kindOfReg(od.kind));
    }
    if (op.m >= 0) add(RegKind::M, op.m);
    if (op.mem.present && op.mem.base >= 0) add(RegKind::S, op.mem.base);
    if (op.mem2.present && op.mem2.base >= 0) add(RegKind::S, op.mem2.base);
    if (op.sem.present && op.sem.viaSreg) add(RegKind::S, op.sem.index);
    if (op.sem2.present && op.sem2.viaSreg) add(RegKind::S, op.sem2.index);
  }
};

}  // namespace

DecodedProgram decodeProgram(const isa::Program& program, const target::TargetDesc& t) {
  Decoder dec(t);
  DecodedProgram& out = dec.out;
  int scratchS = 0, scratchV = 0, scratchM = 0;
  std::vector<DecodedBundle> bundles;
  for (uint32_t b = 0; b < program.bundles.size(); ++b) {
    DecodedBundle db;
    db.firstOp = static_cast<uint32_t>(out.ops.size());
    std::array<uint8_t, target::kNumSlotClasses> perSlot{};
    for (const isa::Instr& in : program.bundles[b].instrs) {
      DecodedOp op = dec.decodeOp(in, b);
      Decoder::collectInputs(op);
      if (op.slot != target::SlotClass::None) op.slotIndex = perSlot[static_cast<size_t>(op.slot)]++;
      switch (op.desc->semClass) {
        case isa::SemClass::Semaphore:
          if (op.opcode == Opcode::SemWait) db.hasWait = true;
          break;
        case isa::SemClass::Sync: db.hasSync = true; break;
        case isa::SemClass::Halt: db.hasHalt = true; break;
        case isa::SemClass::Dma: db.hasDma = true; break;
        case isa::SemClass::Branch: db.hasBranch = true; break;
        default: break;
      }
      out.ops.push_back(op);
    }
    db.numOps = static_cast<uint32_t>(out.ops.size()) - db.firstOp;
    // Staging: an op's result goes to a scratch register when another op of
    // the bundle reads that register.
    int usedS = 0, usedV = 0, usedM = 0;
    for (uint32_t i = db.firstOp; i < out.ops.size(); ++i) {
      DecodedOp& w = out.ops[i];
      if (w.d < 0) continue;
      bool readByOther = false;
      for (uint32_t j = db.firstOp; j < out.ops.size() && !readByOther; ++j) {
        if (j == i) continue;
        const DecodedOp& r = out.ops[j];
        for (int k = 0; k < r.numInputs; ++k)
          if (r.inputs[k].kind == w.dKind && r.inputs[k].reg == w.dArch) readByOther = true;
      }
      if (!readByOther) continue;
      int& used = w.dKind == RegKind::S ? usedS : w.dKind == RegKind::V ? usedV : usedM;
      int32_t scratch = used++;  // relative; fixed up below
      db.commits.push_back(StagedCopy{w.dKind, scratch, w.dArch});
      if (w.desc->semClass == isa::SemClass::VectorLoad && (w.sublanes & 0xffu) != 0xffu)
        db.preloads.push_back(StagedCopy{w.dKind, w.dArch, scratch});
      w.d = -2 - scratch;  // marker: scratch register `scratch`
    }
    scratchS = std::max(scratchS, usedS);
    scratchV = std::max(scratchV, usedV);
    scratchM = std::max(scratchM, usedM);
    bundles.push_back(std::move(db));
  }
  RegisterLayout& L = out.regs;
  L.sregs = t.registers.sregs;
  L.vregs = t.registers.vregs;
  L.vmasks = t.registers.vmasks;
  L.sregTotal = L.sregs + scratchS;
  L.bcastVreg = L.vregs + scratchV;
  L.constBase = L.bcastVreg + 1;
  L.vregTotal = L.constBase + static_cast<int>(out.constants.size());
  L.vmaskTotal = L.vmasks + scratchM;
  // Fix up relative scratch indices.
  for (size_t bi = 0; bi < bundles.size(); ++bi) {
    DecodedBundle& db = bundles[bi];
    auto scratchBase = [&](RegKind k) { return k == RegKind::S ? L.sregs : k == RegKind::V ? L.vregs : L.vmasks; };
    for (StagedCopy& c : db.commits) c.from += scratchBase(c.kind);
    for (StagedCopy& c : db.preloads) c.to += scratchBase(c.kind);
    for (uint32_t i = db.firstOp; i < db.firstOp + db.numOps; ++i) {
      DecodedOp& op = out.ops[i];
      if (op.d <= -2) {
        int base = op.dKind == RegKind::S ? L.sregs : op.dKind == RegKind::V ? L.vregs : L.vmasks;
        op.d = base + (-2 - op.d);
      }
    }
  }
  // Constant registers of VSrc immediates.
  for (DecodedOp& op : out.ops) {
    for (size_t i = 0; i < op.desc->operands.size(); ++i) {
      const isa::OperandDesc& od = op.desc->operands[i];
      if (od.kind != OperandKind::VSrc) continue;
      Src* s = (od.name == "b") ? &op.b : (od.name == "c") ? &op.c : &op.a;
      if (s->form == Src::Imm) s->reg += L.constBase;
    }
  }
  out.bundles = std::move(bundles);
  return out;
}

}  // namespace tpu::sim
