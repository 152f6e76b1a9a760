#include "isa/isa.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <string>

namespace tpu::isa {

namespace {

using target::LatencyClass;
using target::SlotClass;

constexpr std::array<std::string_view, kNumOperandKinds> kOperandKindNames = {
    "sreg", "vreg", "vmask", "imm", "fimm", "sreg_imm", "vsrc", "label",
    "vmem", "smem", "hbm",   "sem", "mxu",  "xlu",      "desc", "sublanes"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Parses one isa.def operand list; problems are collected for the table test.
std::vector<OperandDesc> parseOperandSpec(std::string_view spec, std::string_view mnemonic,
                                          std::vector<std::string>& errors) {
  std::vector<OperandDesc> out;
  spec = trim(spec);
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    OperandDesc d;
    if (item.starts_with("out ")) {
      d.role = OperandRole::Out;
      item = trim(item.substr(4));
    } else if (item.starts_with("inout ")) {
      d.role = OperandRole::InOut;
      item = trim(item.substr(6));
    }
    size_t space = item.find(' ');
    std::string_view kind = item.substr(0, space);
    std::string_view name = space == std::string_view::npos ? std::string_view{} : trim(item.substr(space));
    auto it = std::find(kOperandKindNames.begin(), kOperandKindNames.end(), kind);
    if (it == kOperandKindNames.end() || name.empty()) {
      errors.push_back(std::string(mnemonic) + ": bad operand '" + std::string(item) + "'");
      continue;
    }
    d.kind = static_cast<OperandKind>(it - kOperandKindNames.begin());
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      std::string value(name.substr(eq + 1));
      d.hasDefault = true;
      d.defaultValue = std::stoll(value, nullptr, 0);
      name = name.substr(0, eq);
    }
    d.name = name;
    out.push_back(d);
  }
  return out;
}

struct Table {
  std::vector<InstrDesc> instrs;
  std::map<std::string_view, Opcode, std::less<>> byMnemonic;
  std::vector<std::string> errors;

  Table() {
#define TPU_INSTR(id, mnem, slot, sem, lat, interval, elem, feature, operands, summary)                  \
  instrs.push_back(InstrDesc{Opcode::id, mnem, SlotClass::slot, SemClass::sem, LatencyClass::lat, interval, \
                             ElemType::elem, Feature::feature, summary, operands, {}});
#include "isa/isa.def"
#undef TPU_INSTR
    for (InstrDesc& d : instrs) {
      d.operands = parseOperandSpec(d.operandSpec, d.mnemonic, errors);
      if ((d.semClass == SemClass::VectorLoad || d.semClass == SemClass::VectorStore) && vectorRowBytes(d) <= 0)
        errors.push_back(std::string(d.mnemonic) + ": a vector load or store needs a positive stride default");
      if (!byMnemonic.emplace(d.mnemonic, d.opcode).second)
        errors.push_back("duplicate mnemonic " + std::string(d.mnemonic));
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::vector<std::string> isaTableErrors() { return table().errors; }

std::string_view semClassName(SemClass cls) {
  static constexpr std::array<std::string_view, 20> names = {
      "scalar-alu", "scalar-mem", "branch",     "halt",           "semaphore",  "sync",       "nop",
      "vector-load", "vector-store", "vector-alu", "vector-cmp",   "mask-alu",   "vector-cvt", "transcendental",
      "cross-lane", "transpose",  "mxu-weights", "mxu-matmul",    "mxu-pop",    "dma"};
  return names[static_cast<size_t>(cls)];
}

std::string_view operandKindName(OperandKind kind) { return kOperandKindNames[static_cast<size_t>(kind)]; }

int operandEncodedBits(OperandKind kind) {
  switch (kind) {
    case OperandKind::SReg: return 6;
    case OperandKind::VReg: return 6;
    case OperandKind::VMask: return 4;
    case OperandKind::Imm: return 32;
    case OperandKind::FImm: return 32;
    case OperandKind::SRegImm: return 1 + 32;
    case OperandKind::VSrc: return 2 + 32;
    case OperandKind::Label: return 32;
    case OperandKind::VmemAddr: return 7 + 32;
    case OperandKind::SmemAddr: return 7 + 32;
    case OperandKind::HbmAddr: return 12 + 7 + 24;
    case OperandKind::Sem: return 1 + 6;
    case OperandKind::Mxu: return 3;
    case OperandKind::Xlu: return 2;
    case OperandKind::DmaDesc: return 10;
    case OperandKind::SublaneMask: return 8;
  }
  return 0;
}

int InstrDesc::requiredOperands() const {
  int n = 0;
  for (const OperandDesc& o : operands)
    if (!o.hasDefault) ++n;
  return n;
}

int vectorRowBytes(const InstrDesc& desc) {
  if (desc.semClass != SemClass::VectorLoad && desc.semClass != SemClass::VectorStore) return 0;
  for (const OperandDesc& o : desc.operands)
    if (o.kind == OperandKind::Imm && o.name == "stride" && o.hasDefault) return static_cast<int>(o.defaultValue);
  return 0;
}

int wordsPerElement(const InstrDesc& desc) {
  bool hasWord = false;
  for (const OperandDesc& o : desc.operands) hasWord |= o.kind == OperandKind::Imm && o.name == "word";
  if (!hasWord) return 0;
  int rowBytes = vectorRowBytes(desc);
  if (rowBytes > 0) return rowBytes / 512;
  return 2;
}

std::span<const InstrDesc> instructions() { return table().instrs; }

size_t numOpcodes() { return table().instrs.size(); }

const InstrDesc& instrDesc(Opcode op) {
  static const InstrDesc invalid{};
  size_t i = static_cast<size_t>(op);
  if (i == 0 || i > table().instrs.size()) return invalid;
  return table().instrs[i - 1];
}

std::optional<Opcode> opcodeFromMnemonic(std::string_view mnemonic) {
  auto it = table().byMnemonic.find(mnemonic);
  if (it == table().byMnemonic.end()) return std::nullopt;
  return it->second;
}

int latency(const InstrDesc& desc, const target::TargetDesc& target) {
  return target.latency(desc.latencyClass);
}

int issueInterval(const InstrDesc& desc, const target::TargetDesc& target) {
  if (desc.semClass == SemClass::MxuMatmul) {
    int interval = target.mxu.matmulIntervalCycles;
    if (desc.feature == Feature::Int8Mxu) interval = std::max(1, interval / std::max(1, target.mxu.int8Rate));
    return interval;
  }
  return desc.issueInterval;
}

bool targetSupports(const InstrDesc& desc, const target::TargetDesc& target) {
  switch (desc.feature) {
    case Feature::None: return true;
    case Feature::Int8Mxu: return target.mxu.int8;
  }
  return false;
}

}  // namespace tpu::isa
