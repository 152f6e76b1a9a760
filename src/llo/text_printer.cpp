#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include "llo/text.h"
#include "support/float_format.h"

namespace tpu::llo {

namespace {

using namespace tpu::isa;

// Shortest text that reads back to the same f32; NaNs (whose payload the
// decimal form would lose) as their bit pattern.
std::string floatText(uint32_t bits) {
  float f = std::bit_cast<float>(bits);
  if (std::isnan(f)) return fmt::format("{:#x}", bits);
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  return fmt::format("{}", f);
}

std::string narrowFloatText(FloatFormat format, uint32_t bits) {
  if (isNaNBits(format, bits)) return fmt::format("{:#x}", bits);
  double d = decodeFloat(format, bits);
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Every bf16/f16 value is an f32, and RNE of its shortest f32 text gives it back.
  return fmt::format("{}", static_cast<float>(d));
}

class Printer {
 public:
  // With `indexLabels`, label names are looked up in a table built once
  // (printing a whole program); without, by a scan (one op).
  explicit Printer(const Program* program, bool indexLabels = false) : p_(program) {
    if (p_ && indexLabels) {
      labelIndex_ = std::make_unique<std::unordered_map<uint32_t, const std::string*>>();
      for (const Label& l : p_->labels) labelIndex_->emplace(l.bundle, &l.name);  // the first one wins
    }
  }

  std::string instr(const Instr& in) const {
    const InstrDesc& d = in.desc();
    std::string out(d.mnemonic);
    bool first = true;
    for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
      const OperandDesc& od = d.operands[i];
      const Operand& o = in.operands[i];
      if (od.hasDefault && o.imm == od.defaultValue && o.form == SrcForm::Imm) continue;
      out += first ? " " : ", ";
      first = false;
      if (od.hasDefault) out += fmt::format("{}=", od.name);
      out += operand(d, o);
    }
    return out;
  }

 private:
  std::string operand(const InstrDesc& d, const Operand& o) const {
    switch (o.kind) {
      case OperandKind::SReg: return fmt::format("s{}", o.reg);
      case OperandKind::VReg: return fmt::format("v{}", o.reg);
      case OperandKind::VMask: return fmt::format("m{}", o.reg);
      case OperandKind::Mxu: return fmt::format("mxu{}", o.reg);
      case OperandKind::Xlu: return fmt::format("xlu{}", o.reg);
      case OperandKind::Imm: return fmt::format("{}", o.imm);
      case OperandKind::FImm: return floatText(static_cast<uint32_t>(o.imm));
      case OperandKind::SublaneMask: return fmt::format("{:#04x}", o.imm);
      case OperandKind::SRegImm:
        return o.form == SrcForm::SReg ? fmt::format("s{}", o.reg) : fmt::format("{}", o.imm);
      case OperandKind::VSrc:
        if (o.form == SrcForm::Reg) return fmt::format("v{}", o.reg);
        if (o.form == SrcForm::SReg) return fmt::format("s{}", o.reg);
        return d.elemType == ElemType::F32 ? floatText(static_cast<uint32_t>(o.imm)) : fmt::format("{}", o.imm);
      case OperandKind::Label: return label(static_cast<uint32_t>(o.imm));
      case OperandKind::VmemAddr: return address(o, MemSpace::Vmem);
      case OperandKind::SmemAddr: return address(o, MemSpace::Smem);
      case OperandKind::HbmAddr: {
        std::string name = p_ && o.buffer < p_->buffers.size() ? p_->buffers[o.buffer].name
                                                                 : fmt::format("#{}", o.buffer);
        if (o.reg < 0 && o.imm == 0) return name;
        return name + address(o, MemSpace::Hbm);
      }
      case OperandKind::Sem: return o.form == SrcForm::SReg ? fmt::format("sem[s{}]", o.reg) : fmt::format("sem{}", o.imm);
      case OperandKind::DmaDesc:
        if (p_ && o.imm >= 0 && static_cast<size_t>(o.imm) < p_->dmaDescriptors.size())
          return p_->dmaDescriptors[o.imm].name;
        return fmt::format("#{}", o.imm);
    }
    return "?";
  }

  std::string label(uint32_t bundle) const {
    if (labelIndex_) {
      auto it = labelIndex_->find(bundle);
      return it != labelIndex_->end() ? *it->second : fmt::format("@{}", bundle);
    }
    if (p_)
      for (const Label& l : p_->labels)
        if (l.bundle == bundle) return l.name;
    return fmt::format("@{}", bundle);
  }

  // [s1 + 64], [buf + 512] (a static address inside a named buffer), [64].
  std::string address(const Operand& o, MemSpace space) const {
    std::string out = "[";
    int64_t off = o.imm;
    if (o.reg >= 0) {
      out += fmt::format("s{}", o.reg);
      if (off > 0) out += fmt::format(" + {}", off);
      if (off < 0) out += fmt::format(" - {}", static_cast<uint64_t>(-off));
      return out + "]";
    }
    if (p_ && space != MemSpace::Hbm && off >= 0)
      for (const Buffer& b : p_->buffers) {
        if (b.space != space || static_cast<uint64_t>(off) < b.address) continue;
        uint64_t rel = static_cast<uint64_t>(off) - b.address;
        if (rel < b.sizeBytes() || (rel == 0 && b.sizeBytes() == 0)) {
          out += b.name;
          if (rel) out += fmt::format(" + {}", rel);
          return out + "]";
        }
      }
    return out + fmt::format("{}]", off);
  }

  const Program* p_;
  std::unique_ptr<std::unordered_map<uint32_t, const std::string*>> labelIndex_;
};

std::string shapeText(const Buffer& b) {
  std::string s = fmt::format("{}[", dtypeName(b.dtype));
  for (size_t i = 0; i < b.shape.size(); ++i) s += fmt::format("{}{}", i ? "," : "", b.shape[i]);
  return s + "]";
}

std::string dataText(const Buffer& b, const std::string& bytes) {
  int width = dtypeBytes(b.dtype);
  std::string out = "[";
  size_t n = bytes.size() / width;
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = 0;
    for (int k = 0; k < width; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i * width + k])) << (8 * k);
    if (i) out += (i % 16 == 0) ? ",\n    " : ", ";
    switch (b.dtype) {
      case DType::F32: out += floatText(static_cast<uint32_t>(v)); break;
      case DType::Bf16: out += narrowFloatText(FloatFormat::BF16, static_cast<uint32_t>(v)); break;
      case DType::F16: out += narrowFloatText(FloatFormat::F16, static_cast<uint32_t>(v)); break;
      case DType::S32: out += fmt::format("{}", static_cast<int32_t>(v)); break;
      case DType::S16: out += fmt::format("{}", static_cast<int16_t>(v)); break;
      case DType::S8:
      case DType::S4:
      case DType::S2:
      case DType::S1: out += fmt::format("{}", static_cast<int8_t>(v)); break;
      default: out += fmt::format("{}", v); break;
    }
  }
  return out + "]";
}

}  // namespace

std::string printInstr(const Instr& instr, const Program* program) { return Printer(program).instr(instr); }

struct InstrPrinter::Impl {
  Printer printer;
};

InstrPrinter::InstrPrinter(const Program& program) : impl_(new Impl{Printer(&program, true)}) {}
InstrPrinter::~InstrPrinter() = default;
std::string InstrPrinter::print(const isa::Instr& instr) const { return impl_->printer.instr(instr); }

std::string printLlo(const Program& p) {
  Printer printer(&p, true);
  std::string out;
  out += "// LLO assembly (tpu-tools)\n";
  out += fmt::format(".target {}\n", p.targetName);
  if (!p.buffers.empty()) out += "\n";
  for (const Buffer& b : p.buffers) {
    out += fmt::format(".buffer {} : {} {}", b.name, memSpaceName(b.space), shapeText(b));
    if (b.space != MemSpace::Hbm) out += fmt::format(" @ {}", b.address);
    if (b.init >= 0 && static_cast<size_t>(b.init) < p.data.size()) {
      const DataBlob& d = p.data[b.init];
      if (!d.fillType.empty()) {  // an elided constant: its seed, as llo-gen wrote it
        out += fmt::format(" = fill(0x{:08x}, 0x{:08x}", d.fillSeed >> 32, d.fillSeed & 0xffffffffu);
        if (d.fillType != dtypeName(b.dtype)) out += ", " + d.fillType;
        out += ")";
      } else {
        out += " = " + dataText(b, d.bytes);
      }
    }
    out += "\n";
  }
  if (!p.dmaDescriptors.empty()) out += "\n";
  for (const DmaDescriptor& d : p.dmaDescriptors) {
    out += fmt::format(".dma {} chunk={}", d.name, d.chunkBytes);
    if (!d.dims.empty()) {
      out += " dims=[";
      for (size_t i = 0; i < d.dims.size(); ++i)
        out += fmt::format("{}{}:{}:{}", i ? ", " : "", d.dims[i].count, d.dims[i].srcStride, d.dims[i].dstStride);
      out += "]";
    }
    out += "\n";
  }
  auto argList = [&](const std::vector<uint32_t>& ids) {
    std::string s = "(";
    for (size_t i = 0; i < ids.size(); ++i)
      s += fmt::format("{}{}", i ? ", " : "", ids[i] < p.buffers.size() ? p.buffers[ids[i]].name : "?");
    return s + ")";
  };
  // Markers (entries, then labels) before the bundle they name.
  std::multimap<uint32_t, std::string> markers;
  for (const Entry& e : p.entries)
    markers.emplace(e.start, fmt::format("\n.entry {}{}{}", e.name, argList(e.args),
                                         e.results.empty() ? "" : " -> " + argList(e.results)));
  std::map<std::string_view, const KernelMeta*> kernelOf;
  for (const KernelMeta& k : p.kernels) kernelOf.emplace(k.label, &k);
  for (const Label& l : p.labels) {
    if (auto it = kernelOf.find(l.name); it != kernelOf.end()) {
      const KernelMeta& k = *it->second;
      markers.emplace(l.bundle, fmt::format(".kernel {} kind=\"{}\" hlo=\"{}\"{}", k.label, k.kind, k.hlo,
                                            k.opName.empty() ? "" : fmt::format(" op_name=\"{}\"", k.opName)));
    }
    markers.emplace(l.bundle, l.name + ":");
  }
  // multimap keeps insertion order among equal keys: entries before labels,
  // a kernel's .kernel line before its label.
  auto printMarkers = [&](uint32_t at) {
    auto [lo, hi] = markers.equal_range(at);
    for (auto it = lo; it != hi; ++it) out += it->second + "\n";
  };
  for (size_t b = 0; b < p.bundles.size(); ++b) {
    printMarkers(static_cast<uint32_t>(b));
    out += "  {";
    const Bundle& bundle = p.bundles[b];
    for (size_t i = 0; i < bundle.instrs.size(); ++i)
      out += (i ? " ; " : " ") + printer.instr(bundle.instrs[i]);
    out += " }\n";
  }
  printMarkers(static_cast<uint32_t>(p.bundles.size()));
  return out;
}

}  // namespace tpu::llo
