// Building isa::Programs from C++ (tests, benchmarks, kernel generators):
// a thin layer that looks ops up by mnemonic, fills default operands and
// resolves labels, plus a Timeline that packs the ops of a loop body into
// bundles respecting slot counts, one op per MXU/XLU unit per bundle and
// register dependencies (with latencies, so the body runs without stalls).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "isa/program.h"
#include "target/target.h"

namespace tpu::sim {

// Operand constructors.
namespace opnd {
isa::Operand sreg(int r);
isa::Operand vreg(int r);
isa::Operand vmask(int r);
isa::Operand imm(int64_t v);
isa::Operand fimm(float v);
isa::Operand vmem(int base, int64_t offset);  // base sreg or -1
isa::Operand smem(int base, int64_t offset);
isa::Operand hbm(uint32_t buffer, int base, int64_t offset);
isa::Operand sem(int index);
isa::Operand semReg(int sreg);
isa::Operand mxu(int unit);
isa::Operand xlu(int unit);
isa::Operand desc(uint32_t index);
isa::Operand sublanes(uint32_t mask);
}  // namespace opnd

// One op; operand kinds are taken from the table, so an `imm` given where
// the table says sreg_imm/vsrc/fimm is converted. Missing trailing operands
// get their defaults. Throws std::invalid_argument on misuse (builder bugs).
isa::Instr makeInstr(std::string_view mnemonic, std::vector<isa::Operand> operands);

class ProgramBuilder {
 public:
  explicit ProgramBuilder(const target::TargetDesc& target);

  uint32_t hbmBuffer(std::string name, isa::DType dtype, std::vector<int64_t> shape);
  uint32_t vmemBuffer(std::string name, isa::DType dtype, std::vector<int64_t> shape, uint64_t address);
  // A VMEM or SMEM buffer at `address` with initial contents `init` (bytes).
  uint32_t initializedBuffer(std::string name, isa::MemSpace space, isa::DType dtype, std::vector<int64_t> shape,
                             uint64_t address, std::string init);
  uint32_t descriptor(std::string name, uint32_t chunkBytes, std::vector<isa::DmaDim> dims);
  void entry(std::string name, std::vector<uint32_t> args, std::vector<uint32_t> results);

  // Appends an op as a bundle of its own.
  void op(std::string_view mnemonic, std::vector<isa::Operand> operands);
  // Appends a whole bundle.
  void bundle(std::vector<isa::Instr> instrs);
  // Adds ops to the front of the last bundle.
  void mergeIntoLast(std::vector<isa::Instr> instrs);
  // A branch whose label operand is `label` (resolved in finish()).
  void branch(std::string_view mnemonic, std::vector<isa::Operand> operands, std::string label);
  void label(std::string name);
  uint32_t here() const { return static_cast<uint32_t>(program_.bundles.size()); }

  isa::Program finish();
  const target::TargetDesc& target() const { return target_; }

 private:
  const target::TargetDesc& target_;
  isa::Program program_;
  std::map<std::string, uint32_t> labels_;
  std::vector<std::pair<size_t, std::string>> fixups_;  // bundle index -> label
};

// Packs ops into bundles of a straight-line region (a loop body).
class Timeline {
 public:
  explicit Timeline(const target::TargetDesc& target);
  // Places `instr` at the first cycle >= earliest where its slot and unit
  // are free and its registers allow it (sources ready after the producer's
  // latency; destinations not read or written later in program order).
  // Returns the cycle.
  int place(const isa::Instr& instr, int earliest = 0);
  // Cycle at which a register written in this region is ready (0 if not).
  int readyAt(char kind, int reg) const;
  int length() const { return static_cast<int>(bundles_.size()); }
  // Appends the bundles (empty cycles become empty bundles, at least
  // `minLength` of them) to `b`; with `loopSreg`/`loopLabel`, the last bundle
  // ends with `loop sN, label`.
  void emit(ProgramBuilder& b, int minLength = 0, int loopSreg = -1, const std::string& loopLabel = {});

 private:
  struct Slot {
    std::vector<isa::Instr> instrs;
    std::array<int, target::kNumSlotClasses> used{};
    std::vector<int> units;  // kind*16 + unit
  };
  const target::TargetDesc& target_;
  std::vector<Slot> bundles_;
  std::map<std::pair<char, int>, int> ready_;      // register -> cycle readable
  std::map<std::pair<char, int>, int> lastRead_;   // register -> last cycle read
  std::map<std::pair<char, int>, int> lastWrite_;  // register -> cycle written
};

}  // namespace tpu::sim
