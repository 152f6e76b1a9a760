// LLO built in memory: each op becomes a typed isa::Instr when it is emitted
// (an `op("...")` line is parsed against its isa.def row at once; `emit`
// takes opcode and operands directly), with labels, kernel descriptions and
// the comments that the printed text keeps. Kernels are emitted one after
// another into one entry; the program is scheduled and printed once at the
// end (codegen.cpp). Also simple register pools.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "isa/program.h"
#include "llo/text.h"
#include "target/target.h"

namespace tpu::codegen {

// The emitted code: one op per bundle in emission order, with what the
// text prints between ops.
struct EmittedCode {
  std::vector<isa::Bundle> bundles;  // one op each
  std::vector<isa::Label> labels;   // bundle = index of the op the label precedes
  std::vector<isa::KernelMeta> kernels;
  // Comments, labels, blank lines and .kernel directives, each before op `at`.
  struct Line {
    uint32_t at;
    std::string text;
  };
  std::vector<Line> lines;
  // Operands that name an HBM buffer or a DMA descriptor, resolved against
  // the program's tables (labels are resolved when the code is taken).
  struct Symbol {
    uint32_t op;
    uint16_t operand;
    llo::OpSymbol::Kind kind;
    uint32_t name;  // index into names
  };
  std::vector<Symbol> symbols;
  std::vector<std::string> names;
};

class Emitter {
 public:
  Emitter();
  // The target ops are checked against when emitted (may be null: none).
  void setTarget(const target::TargetDesc* target) { target_ = target; }
  // Receives the message of an op that cannot be emitted (the lowering
  // reports it at the HLO instruction being lowered). The first only.
  void setErrorHandler(std::function<void(const std::string&)> handler) { onError_ = std::move(handler); }
  // Also keep the code as text (the unscheduled output prints ops as they
  // were written).
  void setKeepText(bool keep) { keepText_ = keep; }

  template <typename... Args>
  void op(fmt::format_string<Args...> f, Args&&... args) {
    line_.clear();
    fmt::format_to(std::back_inserter(line_), f, std::forward<Args>(args)...);
    opText(line_);
  }
  // One op written as LLO text.
  void opText(std::string_view text);
  // One op from its opcode and operands (trailing operands with defaults may
  // be left out); checked against the isa.def row. `symbols` name the HBM
  // buffers and DMA descriptors (and labels) the operands refer to.
  void emit(isa::Opcode opcode, std::vector<isa::Operand> operands, std::vector<llo::OpSymbol> symbols = {});
  // Operands for emit(), as the assembler reads them: a register of `kind`
  // (sreg, vreg, vmask, mxu, xlu; for sreg_imm and vsrc the register form),
  // an immediate of `kind` (imm, fimm bits, sreg_imm, vsrc, sublanes).
  static isa::Operand reg(isa::OperandKind kind, int number);
  static isa::Operand imm(isa::OperandKind kind, int64_t value);
  void label(const std::string& name);
  void comment(const std::string& text);
  void blank();
  // A `.kernel` directive: what the kernel at `label` lowers.
  void kernel(isa::KernelMeta meta);
  std::string newLabel(const std::string& prefix) { return fmt::format("l{}_{}", labels_++, prefix); }
  // A DMA descriptor (deduplicated): chunk bytes plus dims outermost first.
  struct Dim {
    int64_t count, src, dst;
  };
  std::string desc(uint64_t chunk, const std::vector<Dim>& dims);
  std::string descriptorText() const;
  size_t opCount() const { return code_.bundles.size(); }
  size_t descriptorCount() const { return descs_.size(); }
  // For trying code and interleaving independent op streams: a position in
  // the code, the code emitted since a position (removed), and appending
  // one removed item (an op, label, comment, blank line or .kernel) again.
  struct Mark {
    size_t ops, lines, labels, kernels, symbols, labelUses, text, flushed;
  };
  struct Item {
    bool isOp = false;
    isa::Instr instr;
    std::vector<llo::OpSymbol> symbols;
    std::string text;  // the op's text (setKeepText), else the line
    bool isLabel = false;
    std::optional<isa::KernelMeta> kernel;
  };
  Mark mark() const;
  std::vector<Item> cut(const Mark& from);
  void append(Item item);
  // The code as text (setKeepText only).
  const std::string& text() const { return text_; }
  // The code with labels resolved; false (reported) when an op names a label
  // that was never defined. Leaves the emitter empty.
  bool take(EmittedCode& out);
  bool failed() const { return failed_; }
  // Where flush() sends the code (none: flush() does nothing).
  void setSink(std::function<bool(EmittedCode&)> sink) { sink_ = std::move(sink); }
  // Hands the code emitted so far to the sink when that is safe: every
  // label it uses is defined in it and no label waits for its op. The
  // caller guarantees that no later op branches into it.
  void flush();

 private:
  void append(isa::Instr instr, const std::vector<llo::OpSymbol>& symbols, std::string_view text);
  void error(const std::string& message);
  uint32_t intern(const std::string& name);

  EmittedCode code_;
  std::string text_;
  std::string line_;
  bool keepText_ = false;
  bool failed_ = false;
  const target::TargetDesc* target_ = nullptr;
  std::function<void(const std::string&)> onError_;
  std::function<bool(EmittedCode&)> sink_;
  size_t flushedOps_ = 0;  // ops handed to the sink (marks before them are gone)
  llo::OpParser parser_;
  llo::ParsedOp parsed_;
  std::unordered_map<std::string, uint32_t> nameIndex_;
  std::unordered_map<std::string, uint32_t> labelAt_;
  struct LabelUse {
    uint32_t op;
    uint16_t operand;
    uint32_t name;
  };
  std::vector<LabelUse> labelUses_;
  int labels_ = 0;
  std::map<std::string, std::string> descIndex_;
  std::vector<std::string> descs_;
};

// A pool of numbered registers (s, v or m) handed out lowest first.
class RegPool {
 public:
  RegPool(char prefix, int first, int count) : prefix_(prefix), free_(count, true), first_(first) {}
  // -1 when none is left.
  int get();
  void put(int r) {
    if (r >= first_ && r - first_ < static_cast<int>(free_.size())) free_[r - first_] = true;
  }
  void reset() { free_.assign(free_.size(), true); }
  std::vector<bool> save() const { return free_; }
  void restore(std::vector<bool> state) { free_ = std::move(state); }
  std::string name(int r) const { return fmt::format("{}{}", prefix_, r); }
  int inUse() const;
  int highWater() const { return high_; }
  // Rotating allocation: get() searches from after the register it last
  // handed out, so a freed register is not reused at once and code that
  // frees and allocates in turn keeps independent work in different
  // registers (the scheduler can overlap it). Off by default.
  void setRotating(bool on) { rotating_ = on; }
  bool rotating() const { return rotating_; }

 private:
  char prefix_;
  std::vector<bool> free_;
  int first_;
  int high_ = 0;
  bool rotating_ = false;
  size_t next_ = 0;
};

}  // namespace tpu::codegen
