// The instruction set table (isa.def) as C++: opcodes, operand kinds and the
// per-instruction descriptions every consumer reads. See docs/ISA.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "target/target.h"

namespace tpu::isa {

enum class Opcode : uint16_t {
  Invalid = 0,  // opcode 0 marks an empty slot in the binary encoding
#define TPU_INSTR(id, ...) id,
#include "isa/isa.def"
#undef TPU_INSTR
};

// What an instruction does, coarsely: the simulator dispatches on Opcode,
// schedulers and statistics on this.
enum class SemClass : uint8_t {
  ScalarAlu,
  ScalarMem,
  Branch,
  Halt,
  Semaphore,
  Sync,
  Nop,
  VectorLoad,
  VectorStore,
  VectorAlu,
  VectorCmp,
  MaskAlu,
  VectorCvt,
  Transcendental,
  CrossLane,
  Transpose,
  MxuWeights,
  MxuMatmul,
  MxuPop,
  Dma,
};
std::string_view semClassName(SemClass cls);

// How the 32-bit lanes/registers are interpreted (decides how immediates are
// written: f32 ops take float literals).
enum class ElemType : uint8_t { None, B32, S32, F32 };

enum class Feature : uint8_t { None, Int8Mxu };

enum class OperandKind : uint8_t {
  SReg,        // s0..s31
  VReg,        // v0..v63
  VMask,       // m0..m15
  Imm,         // 32-bit integer
  FImm,        // f32
  SRegImm,     // scalar register or 32-bit integer immediate
  VSrc,        // vector register, scalar register (broadcast) or immediate (broadcast)
  Label,       // bundle index
  VmemAddr,    // [base sreg + byte offset] in VMEM
  SmemAddr,    // [base sreg + byte offset] in SMEM
  HbmAddr,     // buffer[base sreg + byte offset] in HBM
  Sem,         // semN or sem[sreg]
  Mxu,         // mxuN
  Xlu,         // xluN
  DmaDesc,     // index into the program's DMA descriptor table
  SublaneMask, // 8-bit mask of sublanes
};
constexpr size_t kNumOperandKinds = 16;
std::string_view operandKindName(OperandKind kind);  // as written in isa.def
// Bits the operand takes in the encoding (docs/ISA.md).
int operandEncodedBits(OperandKind kind);

enum class OperandRole : uint8_t { In, Out, InOut };

struct OperandDesc {
  OperandKind kind = OperandKind::Imm;
  OperandRole role = OperandRole::In;
  std::string_view name;
  bool hasDefault = false;
  int64_t defaultValue = 0;
};

constexpr int kMaxOperands = 10;  // room the encoding keeps (the former binary c128 rows had ten)
constexpr int kOpcodeBits = 10;
constexpr int kInstrBits = 128;  // each op is two 64-bit words

struct InstrDesc {
  Opcode opcode = Opcode::Invalid;
  std::string_view mnemonic;
  target::SlotClass slot = target::SlotClass::None;
  SemClass semClass = SemClass::Nop;
  target::LatencyClass latencyClass = target::LatencyClass::Sync;
  int issueInterval = 1;
  ElemType elemType = ElemType::None;
  Feature feature = Feature::None;
  std::string_view summary;
  std::string_view operandSpec;  // the text from isa.def
  std::vector<OperandDesc> operands;

  bool isBranch() const { return semClass == SemClass::Branch; }
  // Ops after which the bundler starts a new bundle: control flow (an op
  // written after a branch must not issue with it).
  bool endsBundle() const { return semClass == SemClass::Branch || semClass == SemClass::Halt; }
  int requiredOperands() const;
};

// Every instruction, in opcode order (index = opcode - 1).
std::span<const InstrDesc> instructions();
const InstrDesc& instrDesc(Opcode op);
std::optional<Opcode> opcodeFromMnemonic(std::string_view mnemonic);
size_t numOpcodes();

// Cycles until the result of `desc` can be read, on `target`.
int latency(const InstrDesc& desc, const target::TargetDesc& target);
// Cycles the op occupies its unit (MXU matmuls: the target's interval,
// divided by the int8 rate for int8 matmuls).
int issueInterval(const InstrDesc& desc, const target::TargetDesc& target);
// Whether the target has what the instruction needs (e.g. int8 MXUs).
bool targetSupports(const InstrDesc& desc, const target::TargetDesc& target);

// Bytes one row (128 elements) of a vector load or store occupies in VMEM:
// the default of its `stride` operand (0 for other instructions). Elements
// are aligned to their size (row bytes / 128, at least 1).
int vectorRowBytes(const InstrDesc& desc);

// 32-bit words per element an instruction's `word` operand picks from: 2 or
// 4 for the word-strided loads and stores (their row bytes / 512), 2 for ops
// on register pairs; 0 for instructions without a `word` operand.
int wordsPerElement(const InstrDesc& desc);

// Problems found while building the table from isa.def (empty when the table
// is well formed; checked by isa_test).
std::vector<std::string> isaTableErrors();

}  // namespace tpu::isa
