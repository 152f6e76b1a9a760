#include "codegen/emitter.h"

#include <algorithm>

#include "isa/verify.h"

namespace tpu::codegen {

Emitter::Emitter() = default;

void Emitter::error(const std::string& message) {
  if (failed_) return;  // the first is the one that matters
  failed_ = true;
  if (onError_) onError_(message);
}

uint32_t Emitter::intern(const std::string& name) {
  auto [it, inserted] = nameIndex_.emplace(name, static_cast<uint32_t>(code_.names.size()));
  if (inserted) code_.names.push_back(name);
  return it->second;
}

void Emitter::opText(std::string_view text) {
  std::string message;
  if (!parser_.parse(text, parsed_, message)) {
    error(fmt::format("llo-gen: internal error: cannot emit '{}': {}", text, message));
    return;
  }
  if (target_) {
    if (std::string e = isa::checkInstrForTarget(parsed_.instr, *target_); !e.empty()) {
      error(fmt::format("llo-gen: internal error: cannot emit '{}': {}", text, e));
      return;
    }
  }
  append(std::move(parsed_.instr), parsed_.refs, text);
}

void Emitter::emit(isa::Opcode opcode, std::vector<isa::Operand> operands, std::vector<llo::OpSymbol> symbols) {
  const isa::InstrDesc& desc = isa::instrDesc(opcode);
  std::string_view name = desc.mnemonic;
  if (operands.size() > desc.operands.size() || operands.size() < static_cast<size_t>(desc.requiredOperands())) {
    error(fmt::format("llo-gen: internal error: '{}' takes {} operands, given {}", name, desc.operands.size(),
                      operands.size()));
    return;
  }
  for (size_t i = 0; i < desc.operands.size(); ++i) {
    const isa::OperandDesc& od = desc.operands[i];
    if (i >= operands.size()) {
      isa::Operand o;
      o.kind = od.kind;
      o.form = isa::SrcForm::Imm;
      o.imm = od.defaultValue;
      operands.push_back(o);
    } else if (operands[i].kind != od.kind) {
      error(fmt::format("llo-gen: internal error: operand '{}' of '{}' must be {}, given {}", od.name, name,
                        isa::operandKindName(od.kind), isa::operandKindName(operands[i].kind)));
      return;
    }
  }
  for (const llo::OpSymbol& s : symbols)
    if (s.operand >= operands.size()) {
      error(fmt::format("llo-gen: internal error: '{}' has no operand {}", name, s.operand));
      return;
    }
  isa::Instr instr{opcode, std::move(operands)};
  if (target_) {
    if (std::string e = isa::checkInstrForTarget(instr, *target_); !e.empty()) {
      error(fmt::format("llo-gen: internal error: cannot emit '{}': {}", name, e));
      return;
    }
  }
  std::string text;
  if (keepText_) {
    // Print with the symbols' names: a small program that holds just them.
    isa::Program names;
    isa::Instr shown = instr;
    for (const llo::OpSymbol& s : symbols) {
      isa::Operand& o = shown.operands[s.operand];
      switch (s.kind) {
        case llo::OpSymbol::Buffer:
          o.buffer = static_cast<uint32_t>(names.buffers.size());
          names.buffers.emplace_back();
          names.buffers.back().name = s.name;
          break;
        case llo::OpSymbol::Descriptor:
          o.imm = static_cast<int64_t>(names.dmaDescriptors.size());
          names.dmaDescriptors.emplace_back();
          names.dmaDescriptors.back().name = s.name;
          break;
        case llo::OpSymbol::Label:
          o.imm = static_cast<int64_t>(names.labels.size());
          names.labels.push_back(isa::Label{s.name, static_cast<uint32_t>(names.labels.size())});
          break;
      }
    }
    text = llo::printInstr(shown, &names);
  }
  append(std::move(instr), symbols, text);
}

isa::Operand Emitter::reg(isa::OperandKind kind, int number) {
  isa::Operand o;
  o.kind = kind;
  o.reg = number;
  if (kind == isa::OperandKind::SRegImm) o.form = isa::SrcForm::SReg;
  if (kind == isa::OperandKind::VSrc) o.form = isa::SrcForm::Reg;
  return o;
}

isa::Operand Emitter::imm(isa::OperandKind kind, int64_t value) {
  isa::Operand o;
  o.kind = kind;
  o.imm = value;
  return o;
}

void Emitter::append(isa::Instr instr, const std::vector<llo::OpSymbol>& symbols, std::string_view text) {
  uint32_t at = static_cast<uint32_t>(code_.bundles.size());
  for (const llo::OpSymbol& s : symbols) {
    uint32_t name = intern(s.name);
    if (s.kind == llo::OpSymbol::Label) labelUses_.push_back({at, static_cast<uint16_t>(s.operand), name});
    else code_.symbols.push_back({at, static_cast<uint16_t>(s.operand), s.kind, name});
  }
  code_.bundles.emplace_back();
  code_.bundles.back().instrs.reserve(1);
  code_.bundles.back().instrs.push_back(std::move(instr));
  if (keepText_) {
    text_ += "  ";
    text_ += text;
    text_ += '\n';
  }
}

void Emitter::label(const std::string& name) {
  uint32_t at = static_cast<uint32_t>(code_.bundles.size());
  labelAt_.emplace(name, at);
  code_.labels.push_back(isa::Label{name, at});
  code_.lines.push_back({at, name + ":"});
  if (keepText_) text_ += name + ":\n";
}

void Emitter::comment(const std::string& text) {
  code_.lines.push_back({static_cast<uint32_t>(code_.bundles.size()), "  // " + text});
  if (keepText_) text_ += "  // " + text + "\n";
}

void Emitter::blank() {
  code_.lines.push_back({static_cast<uint32_t>(code_.bundles.size()), std::string()});
  if (keepText_) text_ += '\n';
}

void Emitter::kernel(isa::KernelMeta meta) {
  std::string line = fmt::format(".kernel {} kind=\"{}\" hlo=\"{}\"{}", meta.label, meta.kind, meta.hlo,
                                 meta.opName.empty() ? "" : fmt::format(" op_name=\"{}\"", meta.opName));
  if (keepText_) text_ += line + "\n";
  code_.lines.push_back({static_cast<uint32_t>(code_.bundles.size()), std::move(line)});
  code_.kernels.push_back(std::move(meta));
}

Emitter::Mark Emitter::mark() const {
  return Mark{code_.bundles.size(), code_.lines.size(),   code_.labels.size(), code_.kernels.size(),
              code_.symbols.size(), labelUses_.size(), text_.size(), flushedOps_};
}

std::vector<Emitter::Item> Emitter::cut(const Mark& from) {
  std::vector<Item> items;
  if (from.flushed != flushedOps_) {
    error("llo-gen: internal error: code cut after it went to be scheduled");
    return items;
  }
  // Lines before op p come before it; kernels, labels and symbols are in
  // emission order, so each list's tail is what was emitted since `from`.
  size_t line = from.lines, label = from.labels, kernel = from.kernels, symbol = from.symbols,
         use = from.labelUses;
  for (size_t op = from.ops; op <= code_.bundles.size(); ++op) {
    for (; line < code_.lines.size() && code_.lines[line].at == op; ++line) {
      Item item;
      item.text = std::move(code_.lines[line].text);
      if (label < code_.labels.size() && item.text == code_.labels[label].name + ":") {
        item.isLabel = true;
        labelAt_.erase(code_.labels[label].name);
        ++label;
      } else if (kernel < code_.kernels.size() && item.text.starts_with(".kernel ")) {
        item.kernel = std::move(code_.kernels[kernel++]);
      }
      items.push_back(std::move(item));
    }
    if (op == code_.bundles.size()) break;
    Item item;
    item.isOp = true;
    item.instr = std::move(code_.bundles[op].instrs.front());
    for (; symbol < code_.symbols.size() && code_.symbols[symbol].op == op; ++symbol) {
      const EmittedCode::Symbol& s = code_.symbols[symbol];
      item.symbols.push_back(llo::OpSymbol{s.kind, s.operand, code_.names[s.name]});
    }
    for (; use < labelUses_.size() && labelUses_[use].op == op; ++use)
      item.symbols.push_back(llo::OpSymbol{llo::OpSymbol::Label, labelUses_[use].operand,
                                           code_.names[labelUses_[use].name]});
    items.push_back(std::move(item));
  }
  if (keepText_) {
    // One text line per item, in the same order.
    size_t pos = from.text;
    for (Item& item : items) {
      size_t nl = text_.find('\n', pos);
      std::string_view l(text_.data() + pos, nl - pos);
      if (item.isOp) item.text = std::string(l.substr(2));  // without the indent
      pos = nl + 1;
    }
    text_.resize(from.text);
  }
  code_.bundles.resize(from.ops);
  code_.lines.resize(from.lines);
  code_.labels.resize(from.labels);
  code_.kernels.resize(from.kernels);
  code_.symbols.resize(from.symbols);
  labelUses_.resize(from.labelUses);
  return items;
}

void Emitter::append(Item item) {
  if (item.isOp) {
    append(std::move(item.instr), item.symbols, item.text);
  } else if (item.isLabel) {
    label(item.text.substr(0, item.text.size() - 1));
  } else if (item.kernel) {
    kernel(std::move(*item.kernel));
  } else {
    code_.lines.push_back({static_cast<uint32_t>(code_.bundles.size()), item.text});
    if (keepText_) text_ += item.text + "\n";
  }
}

void Emitter::flush() {
  if (!sink_ || failed_ || code_.bundles.empty() || keepText_) return;
  if (!code_.labels.empty() && code_.labels.back().bundle == code_.bundles.size()) return;
  for (const LabelUse& u : labelUses_)
    if (!labelAt_.count(code_.names[u.name])) return;  // a forward branch out of the code so far
  flushedOps_ += code_.bundles.size();
  EmittedCode piece;
  if (!take(piece)) return;
  if (!sink_(piece)) failed_ = true;  // the sink reported it
}

bool Emitter::take(EmittedCode& out) {
  bool ok = true;
  for (const LabelUse& u : labelUses_) {
    auto it = labelAt_.find(code_.names[u.name]);
    if (it == labelAt_.end()) {
      if (ok) error(fmt::format("llo-gen: internal error: undefined label '{}'", code_.names[u.name]));
      ok = false;
      continue;
    }
    isa::Operand& o = code_.bundles[u.op].instrs.front().operands[u.operand];
    o.kind = isa::OperandKind::Label;
    o.imm = it->second;
  }
  labelUses_.clear();
  labelAt_.clear();
  nameIndex_.clear();
  out = std::move(code_);
  code_ = EmittedCode{};
  return ok;
}

std::string Emitter::desc(uint64_t chunk, const std::vector<Dim>& dims) {
  std::string key = fmt::format("chunk={}", chunk);
  if (!dims.empty()) {
    key += " dims=[";
    for (size_t i = 0; i < dims.size(); ++i)
      key += fmt::format("{}{}:{}:{}", i ? ", " : "", dims[i].count, dims[i].src, dims[i].dst);
    key += "]";
  }
  auto it = descIndex_.find(key);
  if (it != descIndex_.end()) return it->second;
  std::string name = fmt::format("d{}", descs_.size());
  descIndex_[key] = name;
  descs_.push_back(fmt::format(".dma {} {}", name, key));
  return name;
}

std::string Emitter::descriptorText() const {
  std::string s;
  for (const auto& d : descs_) s += d + "\n";
  return s;
}

int RegPool::get() {
  if (rotating_) {
    for (size_t n = 0; n < free_.size(); ++n) {
      size_t i = (next_ + n) % free_.size();
      if (!free_[i]) continue;
      free_[i] = false;
      next_ = i + 1;
      high_ = std::max(high_, inUse());
      return first_ + static_cast<int>(i);
    }
    return -1;
  }
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i]) {
      free_[i] = false;
      high_ = std::max(high_, inUse());
      return first_ + static_cast<int>(i);
    }
  return -1;
}

int RegPool::inUse() const {
  int n = 0;
  for (bool f : free_) n += f ? 0 : 1;
  return n;
}

}  // namespace tpu::codegen
