// A machine program in memory: what a .tpu file holds and what the LLO text
// form (src/llo) parses to and prints from. The simulator runs this.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/isa.h"

namespace tpu::isa {

enum class MemSpace : uint8_t { Hbm, Vmem, Smem };
std::string_view memSpaceName(MemSpace space);  // "hbm", "vmem", "smem"

// Element types of buffers (memory), not registers.
// Append only: the number is the .tpu encoding. Sub-byte types take one byte
// per element, as in XLA literals (s1..s4 sign-extended, u1..u4 and f4/f6
// codes in the low bits).
enum class DType : uint8_t {
  F32, Bf16, F16, S32, S16, S8, U32, U16, U8, Pred,
  F8E4M3FN, F8E5M2, F8E4M3, F8E3M4, F8E4M3FNUZ, F8E5M2FNUZ, F8E4M3B11FNUZ, F8E8M0FNU, F4E2M1FN, S4, U4,
  S2, U2, S1, U1, F6E2M3FN, F6E3M2FN,
  Last = F6E3M2FN,
};
std::string_view dtypeName(DType type);  // XLA spelling: "f32", "bf16", "pred", ...
std::optional<DType> dtypeFromName(std::string_view name);
int dtypeBytes(DType type);

// How a register-or-immediate operand was given.
enum class SrcForm : uint8_t { Reg, SReg, Imm };

// One operand. Field use by kind:
//   SReg/VReg/VMask/Mxu/Xlu: reg
//   Imm/FImm/SublaneMask: imm (FImm: the f32 bit pattern)
//   SRegImm/VSrc: form + reg or imm
//   Label: imm = bundle index
//   VmemAddr/SmemAddr: reg = base sreg or -1, imm = byte offset
//   HbmAddr: buffer, reg = base sreg or -1, imm = byte offset
//   Sem: form (Imm: imm = semaphore number; SReg: reg holds it)
//   DmaDesc: imm = descriptor index
struct Operand {
  OperandKind kind = OperandKind::Imm;
  SrcForm form = SrcForm::Imm;
  int32_t reg = -1;
  int64_t imm = 0;
  uint32_t buffer = 0;

  bool operator==(const Operand&) const = default;
};

struct Instr {
  Opcode opcode = Opcode::Invalid;
  std::vector<Operand> operands;  // all operands, defaults filled in

  const InstrDesc& desc() const { return instrDesc(opcode); }
  bool operator==(const Instr& o) const { return opcode == o.opcode && operands == o.operands; }
};

struct Bundle {
  std::vector<Instr> instrs;
  bool operator==(const Bundle&) const = default;
};

struct Buffer {
  std::string name;
  MemSpace space = MemSpace::Hbm;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // VMEM/SMEM: static byte address. HBM: 0 (the loader places buffers).
  uint64_t address = 0;
  // Index into Program::data of the initial contents, or -1.
  int32_t init = -1;

  uint64_t sizeBytes() const;
  bool operator==(const Buffer&) const = default;
};

// Whether the buffer's byte size is at most 2^48 (no overflow in sizeBytes()).
bool sizeFits(const Buffer& buffer);

// Initial contents of a buffer (constants, weights): raw little-endian bytes,
// exactly sizeBytes() of the buffer. When the bytes are an elided HLO
// constant's pseudo-random values, `fillType` names the XLA element type
// they were drawn as and `fillSeed` the seed (support/elided_fill.h): the
// LLO text says `fill(...)` and the .tpu keeps the recipe (format 1.2, FILL
// section) instead of the values; `bytes` always holds them expanded.
struct DataBlob {
  std::string bytes;
  std::string fillType;  // empty: plain data
  uint64_t fillSeed = 0;
  bool operator==(const DataBlob&) const = default;
};

// A strided DMA: for each index of dims (outermost first), copy chunkBytes
// contiguous bytes from src + sum(i_d * srcStride_d) to dst + sum(i_d * dstStride_d).
struct DmaDim {
  uint32_t count = 1;
  int64_t srcStride = 0;
  int64_t dstStride = 0;
  bool operator==(const DmaDim&) const = default;
};
struct DmaDescriptor {
  std::string name;
  uint32_t chunkBytes = 0;
  std::vector<DmaDim> dims;
  uint64_t totalBytes() const;
  bool operator==(const DmaDescriptor&) const = default;
};

// An entry point: runs from bundle `start` until `halt`. Arguments and
// results are HBM buffers (indices into Program::buffers).
struct Entry {
  std::string name;
  std::vector<uint32_t> args;
  std::vector<uint32_t> results;
  uint32_t start = 0;
  bool operator==(const Entry&) const = default;
};

// A named code position, kept for readable disassembly.
struct Label {
  std::string name;
  uint32_t bundle = 0;
  bool operator==(const Label&) const = default;
};

// What a kernel (the code from its label to the next kernel's) lowers, for
// profiles: llo-gen's kind ("matmul", "fusion-conv", ...), the HLO
// instruction and its op_name metadata. LLO text: the `.kernel` directive;
// .tpu: the KERN section (format 1.1). Strings are isMetadataText.
struct KernelMeta {
  std::string label;
  std::string kind;
  std::string hlo;
  std::string opName;
  bool operator==(const KernelMeta&) const = default;
};

struct Program {
  std::string targetName;  // e.g. "v5e" or the "name" field of a user JSON
  std::string targetJson;  // the full description it was assembled for (may be empty)
  std::vector<Buffer> buffers;
  std::vector<DataBlob> data;
  std::vector<DmaDescriptor> dmaDescriptors;
  std::vector<Entry> entries;
  std::vector<Bundle> bundles;
  std::vector<Label> labels;  // sorted by bundle, then in definition order
  std::vector<KernelMeta> kernels;  // in definition order; labels of `labels`, each at most once

  std::optional<uint32_t> findBuffer(std::string_view name) const;
  const Entry* findEntry(std::string_view name) const;
  const KernelMeta* findKernel(std::string_view label) const;
  bool operator==(const Program&) const = default;
};

// Names of buffers, DMA descriptors, entries and labels as LLO text writes
// and reads them ([A-Za-z_][A-Za-z0-9_.]*, the assembler's identifiers):
// the .tpu decoder rejects any other, so a disassembly always assembles.
bool isSymbolName(std::string_view name);

// Text a .kernel directive's quoted strings can hold and read back: valid
// UTF-8 without control characters or '"'.
bool isMetadataText(std::string_view text);

}  // namespace tpu::isa
