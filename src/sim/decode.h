// Pre-decoding: every bundle of a Program becomes a list of DecodedOps with
// operands resolved by name (so the order of operands in isa.def may change)
// into register-file indices, immediates and memory references, once, before
// the run. Both halves of the simulator read these structs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "isa/program.h"
#include "target/target.h"

namespace tpu::sim {

constexpr int kLanes = 128;
constexpr int kSublanes = 8;
constexpr int kVregWords = kLanes * kSublanes;
// Row blocks of 8 in a 128x128 tile (MXU weights, transpose unit).
constexpr int kTileBlocks = 16;

enum class RegKind : uint8_t { S, V, M };

// A source operand: a register of the op's kind, a scalar register (for a
// vector op: broadcast), or an immediate.
struct Src {
  enum Form : uint8_t { None, Reg, SReg, Imm } form = None;
  int32_t reg = -1;   // Reg: register index (of the operand's kind); SReg: sreg
  uint32_t imm = 0;   // Imm: the 32-bit value (f32 ops: the bit pattern)
};

struct MemRef {
  isa::MemSpace space = isa::MemSpace::Vmem;
  bool present = false;
  uint32_t buffer = 0;  // HBM: index into Program::buffers
  int32_t base = -1;    // base sreg or -1
  int64_t offset = 0;
};

struct SemRef {
  bool present = false;
  bool viaSreg = false;
  int32_t index = 0;  // semaphore number, or the sreg holding it
};

// A register an op reads or writes, for the scoreboard (architectural index).
struct RegUse {
  RegKind kind = RegKind::S;
  int32_t reg = 0;
};

struct DecodedOp {
  isa::Opcode opcode = isa::Opcode::Invalid;
  const isa::InstrDesc* desc = nullptr;
  uint32_t bundle = 0;
  uint8_t slotIndex = 0;  // n-th op of its slot class in the bundle (trace track)

  // Functional operands.
  int32_t d = -1;  // destination register (after staging redirection)
  Src a, b, c;     // inputs named a/b/c (also v, lo/hi, idx, count, n, l/s, chip)
  Src ah, bh;      // high words of register-pair inputs a:ah and b:bh
  int32_t m = -1;  // vmask input (vsel, vst.m)
  MemRef mem;      // vmem/smem address (loads, stores) or DMA destination
  MemRef mem2;     // DMA source
  int64_t stride = 512;
  uint32_t sublanes = 0xff;
  uint8_t word = 0;      // the 32-bit word of each element (wide loads/stores, pair ops)
  int32_t unit = -1;     // mxu / xlu index
  int32_t dmaDesc = -1;  // descriptor index
  uint32_t label = 0;    // branch target
  SemRef sem, sem2;

  // Timing.
  target::SlotClass slot = target::SlotClass::None;
  int latency = 1;
  int interval = 1;
  RegKind dKind = RegKind::S;
  int32_t dArch = -1;  // architectural destination (scoreboard)
  uint8_t numInputs = 0;
  std::array<RegUse, 9> inputs{};
};

// Register copies that commit staged results at the end of a bundle (when an
// op of the bundle reads a register another op of it writes: all reads of a
// bundle see the state before the bundle).
struct StagedCopy {
  RegKind kind = RegKind::S;
  int32_t from = 0, to = 0;
};

struct DecodedBundle {
  uint32_t firstOp = 0, numOps = 0;
  // Before the ops: staged registers of partial writes (masked loads) start
  // from the register's value, so the sublanes they keep survive the commit.
  std::vector<StagedCopy> preloads;
  std::vector<StagedCopy> commits;
  bool hasWait = false;   // sem.wait
  bool hasSync = false;   // sync / barrier
  bool hasHalt = false;
  bool hasDma = false;
  bool hasBranch = false;
};

struct RegisterLayout {
  int sregs = 0, vregs = 0, vmasks = 0;  // architectural counts
  int sregTotal = 0, vregTotal = 0, vmaskTotal = 0;  // including scratch and constants
  int bcastVreg = 0;   // scratch vreg for a scalar broadcast of the op being executed
  int constBase = 0;   // first constant vreg (immediate broadcasts)
};

struct DecodedProgram {
  std::vector<DecodedOp> ops;
  std::vector<DecodedBundle> bundles;
  RegisterLayout regs;
  std::vector<uint32_t> constants;  // value of constant vreg constBase + i
};

// Decodes a verified program (operands are assumed well formed).
DecodedProgram decodeProgram(const isa::Program& program, const target::TargetDesc& target);

}  // namespace tpu::sim
