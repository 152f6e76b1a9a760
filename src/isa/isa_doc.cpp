#include "isa/isa_doc.h"

#include <fmt/format.h>

#include "isa/isa.h"

namespace tpu::isa {

namespace {

// Escapes text for groff: backslashes and hyphens (so they are not turned
// into typographic dashes or hyphenation points).
std::string roff(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  return out;
}

std::string_view slotTitle(target::SlotClass slot) {
  switch (slot) {
    case target::SlotClass::Scalar: return "Scalar unit (slot scalar)";
    case target::SlotClass::Ctrl: return "Control flow (slot ctrl)";
    case target::SlotClass::VLoad: return "Vector loads (slot vld)";
    case target::SlotClass::VStore: return "Vector stores (slot vst)";
    case target::SlotClass::VAlu: return "Vector ALU (slot valu)";
    case target::SlotClass::Eup: return "Transcendental unit (slot eup)";
    case target::SlotClass::Xlu: return "Cross-lane unit (slot xlu)";
    case target::SlotClass::Mxu: return "Matrix units (slot mxu)";
    case target::SlotClass::Dma: return "DMA (slot dma)";
    case target::SlotClass::Misc: return "Semaphores and synchronisation (slot misc)";
    case target::SlotClass::None: return "No slot";
  }
  return "";
}

}  // namespace

std::string isaReferenceRoff() {
  std::string out;
  std::array<target::SlotClass, 11> order = {
      target::SlotClass::Scalar, target::SlotClass::Ctrl, target::SlotClass::Misc, target::SlotClass::None,
      target::SlotClass::VLoad,  target::SlotClass::VStore, target::SlotClass::VAlu, target::SlotClass::Eup,
      target::SlotClass::Xlu,    target::SlotClass::Mxu,  target::SlotClass::Dma};
  for (target::SlotClass slot : order) {
    out += fmt::format(".SS \"{}\"\n", slotTitle(slot));
    for (const InstrDesc& d : instructions()) {
      if (d.slot != slot) continue;
      out += ".TP\n";
      std::string operands;
      for (size_t i = 0; i < d.operands.size(); ++i) {
        const OperandDesc& o = d.operands[i];
        std::string item = fmt::format("\\fI{}\\fR:{}", roff(o.name), roff(operandKindName(o.kind)));
        if (o.hasDefault)
          item = fmt::format("[{}={}]", item, o.kind == OperandKind::SublaneMask
                                                  ? fmt::format("{:#x}", o.defaultValue)
                                                  : fmt::format("{}", o.defaultValue));
        operands += (i ? ", " : " ") + item;
      }
      out += fmt::format("\\fB{}\\fR{}\n", roff(d.mnemonic), operands);
      out += roff(d.summary) + ".\n";
      std::string writes;
      for (const OperandDesc& o : d.operands)
        if (o.role != OperandRole::In) writes += (writes.empty() ? "" : ", ") + roff(o.name);
      out += fmt::format(".br\nClass {}; latency {}{}{}.\n", roff(semClassName(d.semClass)),
                         roff(target::latencyClassName(d.latencyClass)),
                         writes.empty() ? "" : "; writes " + writes,
                         d.feature == Feature::Int8Mxu ? "; needs int8 MXUs" : "");
    }
  }
  return out;
}

}  // namespace tpu::isa
