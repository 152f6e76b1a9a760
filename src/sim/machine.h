// The functional half of the simulator: the state of one TensorCore
// (registers, memories, MXUs, transpose units, semaphores) and the exact
// semantics of every op. It never looks at time; the simulator loop decides
// when each op executes and when each DMA lands.
//
// Numerics (also in src/sim/README.md):
//  * f32 and s32 vector ops are IEEE-754 / two's complement on the host,
//    bit-exact; min/max return the canonical NaN 0x7FC00000 if an input is
//    NaN and order -0 below +0.
//  * bf16 conversions round to nearest even (NaN stays a quiet NaN).
//  * MXU bf16: see mxu_kernel.h (exact products, f32 fma accumulation in k
//    order starting from +0). int8: exact s32 sums.
//  * Transcendentals use glibc's float functions: expf, logf, sqrtf,
//    1.0f/sqrtf (rsqrt, two roundings), 1.0f/x, tanhf, sinf, cosf, powf, and
//    logistic = 1.0f / (1.0f + expf(-x)) evaluated in f32.
//  * Cross-lane sums use a halving tree: x[l] += x[l + w] for w = 64, 32,
//    ..., 1 (lanes) or w = 4, 2, 1 (sublanes); the result is broadcast.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "sim/decode.h"
#include "target/target.h"

namespace tpu::sim {

struct alignas(64) VReg {
  uint32_t w[kVregWords];
};

// Host memory that the simulated memories of every chip in this process may
// take: HBM pages as they are first written, VMEM up to the highest byte
// touched. A run that would pass `limit` stops with a fault naming it
// instead of being killed by the kernel's OOM killer.
struct HostMemoryBudget {
  uint64_t limit = 0;  // bytes; 0 = no limit
  uint64_t used = 0;
  uint64_t peak = 0;
  std::string limitSource;  // how the limit was chosen, for the message
  // Takes `bytes` more; false (nothing taken) if that would pass the limit.
  bool take(uint64_t bytes) {
    if (limit && used + bytes > limit) return false;
    used += bytes;
    peak = std::max(peak, used);
    return true;
  }
  void give(uint64_t bytes) { used -= std::min(used, bytes); }
};

// Simulated memory. Contiguous (VMEM, SMEM: calloc, untouched pages cost
// no host memory) or paged (HBM: 64 KiB pages allocated on first write of
// non-zero bytes; untouched pages read as zeros), so a chip costs host
// memory only for the HBM its program and inputs touch.
class Memory {
 public:
  static constexpr uint64_t kPageBytes = 64 * 1024;
  Memory() = default;
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  Memory(Memory&& o) noexcept;
  ~Memory();
  // Contiguous, zeroed.
  bool allocate(uint64_t size);
  // Paged, all zero; pages are charged to `budget` (may be null).
  void allocatePaged(uint64_t size, HostMemoryBudget* budget);
  bool paged() const { return paged_; }
  // Contiguous memories only.
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Bytes [offset, offset + n) (in range).
  void read(uint64_t offset, void* dst, uint64_t n) const;
  // False if a page could not be allocated (the budget's limit or the host).
  bool write(uint64_t offset, const void* src, uint64_t n);
  // memmove between (or within) memories; false as write().
  static bool copy(Memory& dst, uint64_t dstOffset, const Memory& src, uint64_t srcOffset, uint64_t n);
  uint64_t pagesAllocated() const { return pagesAllocated_; }

 private:
  // Writes within one page (src null: zeros).
  bool writePage(uint64_t offset, const uint8_t* src, uint64_t n);
  void release();
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool paged_ = false;
  std::vector<uint8_t*> pages_;  // null: all zero
  uint64_t pagesAllocated_ = 0;
  HostMemoryBudget* budget_ = nullptr;
};

// A DMA captured at issue (addresses resolved and bounds-checked), applied
// when the timing model says its last byte has landed.
struct DmaTransfer {
  uint32_t bundle = 0;
  isa::Opcode opcode = isa::Opcode::Invalid;
  const isa::DmaDescriptor* desc = nullptr;
  Memory* dst = nullptr;
  Memory* src = nullptr;
  int64_t dstOffset = 0, srcOffset = 0;
  int sem = -1;   // signalled (+1) on completion
  int sem2 = -1;  // dma.remote: the receive semaphore
  int remoteChip = -1;  // dma.remote(.v): the destination chip; dst is resolved here, the pod re-points it
  isa::MemSpace dstSpace = isa::MemSpace::Hbm;
  uint32_t dstBuffer = 0;
  uint64_t bytes = 0;
  uint64_t hbmRead = 0, hbmWritten = 0;
};

class Machine {
 public:
  // `hostThreads`: host threads for MXU arithmetic (0: choose).
  Machine(const isa::Program& program, const target::TargetDesc& target, const DecodedProgram& decoded,
          int hostThreads = 0);
  ~Machine();

  // Allocates memories and loads initial data and the entry's arguments.
  // Returns an error message, or "".
  // `release` (may be empty) is called with k once argument k is loaded.
  std::string load(const isa::Entry& entry, const std::vector<std::string_view>& inputs,
                   const std::function<void(size_t)>& release = {});
  // Host memory taken by this machine's memories is charged to `budget`
  // (set before load; may be null).
  void setHostBudget(HostMemoryBudget* budget) { budget_ = budget; }
  std::vector<std::string> results(const isa::Entry& entry) const;

  // Executes one op. Returns false on a fault (see fault()). Branches set
  // `nextPc` (-1: fall through); halt sets `halted`.
  bool exec(const DecodedOp& op, int64_t& nextPc);
  // Copies staged results of a bundle into their registers.
  // Before a bundle's ops: seed staged registers of partial writes.
  void preload(const DecodedBundle& b) { copyRegisters(b.preloads); }
  // After them: staged results to their architectural registers.
  void commit(const DecodedBundle& b) { copyRegisters(b.commits); }
  // Resolves and checks a DMA op (does not move data).
  bool prepareDma(const DecodedOp& op, DmaTransfer& out);
  // Moves the data of a completed DMA and signals its semaphore(s). False
  // (see fault()) when the host memory budget runs out.
  bool completeDma(const DmaTransfer& t);
  // The two halves of completeDma when source and destination chips live in
  // different processes (mpirun): the source's bytes in descriptor order,
  // and writing them at the destination (false as completeDma). Neither
  // signals a semaphore.
  void gatherDma(const DmaTransfer& t, std::string& bytes) const;
  bool scatterDma(const DmaTransfer& t, std::string_view bytes);

  // Semaphore an op names (checked); -1 after a fault.
  int semIndex(const DecodedOp& op, const SemRef& ref);
  int64_t semaphore(int i) const { return sems_[i]; }
  // Amount a sem.wait / sem.signal op asks for.
  int64_t semAmount(const DecodedOp& op) const;

  // This chip's place in the run (sid.chip, sid.chips, dma.remote checks).
  void setChip(int chip, int chips) {
    chip_ = chip;
    chips_ = chips;
  }
  // The memory a DMA operand names (an HBM buffer, VMEM or SMEM).
  Memory* memory(isa::MemSpace space, uint32_t buffer);
  void signal(int sem, int64_t n = 1) { sems_[sem] += n; }

  const std::string& fault() const { return fault_; }
  uint32_t sreg(int i) const { return sregs_[i]; }
  const VReg& vreg(int i) const { return vregs_[i]; }
  const VReg& vmask(int i) const { return vmasks_[i]; }
  int mxuFifoCount(int u) const;

 private:
  void copyRegisters(const std::vector<StagedCopy>& copies);
  struct MxuUnit;
  struct XposeUnit;

  bool failf(std::string message);
  // VMEM bytes [0, end) may now be touched: charged to the budget.
  bool touchVmem(uint64_t end);
  std::string hostMemoryMessage() const;
  uint32_t srcScalar(const Src& s) const { return s.form == Src::Imm ? s.imm : sregs_[s.reg]; }
  // Pointer to the words of a vector source (broadcasting a scalar register
  // into the scratch vreg when needed).
  const uint32_t* vsrc(const Src& s);
  bool vmemRange(const DecodedOp& op, int64_t stride, uint32_t rowBytes, uint32_t align, int64_t& base);
  bool smemWord(const DecodedOp& op, int64_t& addr);
  bool dmaRange(const DecodedOp& op, const MemRef& ref, const isa::DmaDescriptor& d, bool isDst, Memory*& mem,
                int64_t& offset);

  bool execLoad(const DecodedOp& op);
  bool execStore(const DecodedOp& op);
  bool execMxu(const DecodedOp& op);
  void latchBf16(MxuUnit& m);
  bool execXlu(const DecodedOp& op);
  void execEup(const DecodedOp& op);
  // Register-pair ops (64-bit integers and f64), wide_ops.cpp; false if
  // `op` is not one.
  bool isPairOp(isa::Opcode opcode) const;
  bool execPair(const DecodedOp& op);

  const isa::Program& program_;
  const target::TargetDesc& target_;
  const DecodedProgram& decoded_;
  std::vector<uint32_t> sregs_;
  std::vector<VReg> vregs_;
  std::vector<VReg> vmasks_;  // 0 / 0xFFFFFFFF per element
  std::vector<int64_t> sems_;
  Memory vmem_, smem_;

 public:
  bool isVmem(const Memory* m) const { return m == &vmem_; }

 private:
  std::vector<Memory> hbm_;  // by buffer index (non-HBM buffers stay empty)
  std::vector<std::unique_ptr<MxuUnit>> mxus_;
  std::vector<std::unique_ptr<XposeUnit>> xposes_;
  std::string fault_;
  int chip_ = 0, chips_ = 1;
  HostMemoryBudget* budget_ = nullptr;
  uint64_t vmemCharged_ = 0, chargedSmem_ = 0;
  // Declared last: destroyed (threads joined) before the FIFOs it writes.
  std::unique_ptr<class MxuPool> pool_;
};

// Rounds an f32 bit pattern to bf16 precision (nearest even; NaN stays a
// quiet NaN), returned as an f32 bit pattern with the low 16 bits zero.
inline uint32_t roundToBf16Bits(uint32_t u) {
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  uint32_t nan = (u & 0xFFFF0000u) | 0x00400000u;
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded;
}

// f16 <-> f32 bit patterns (vld.f16, vst.f16, vrnd.f16) as selects rather
// than branches, so whole rows vectorise; they equal support/float_format's
// floatToHalf / halfToFloat (sim_units_test checks every f16 and many f32).
inline uint32_t halfFromF32Bits(uint32_t x) {
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7FFFFFFFu;
  uint32_t nan = sign | 0x7E00u | ((a >> 13) & 0x3FFu);
  uint32_t inf = sign | 0x7C00u;
  uint32_t n = a - (112u << 23);
  uint32_t normal = sign | ((n + 0xFFFu + ((n >> 13) & 1u)) >> 13);
  // Below 2^-14: adding 0.5 leaves one f32 ulp = 2^-24, the f16 subnormal
  // quantum, so the FPU rounds to nearest even for us.
  uint32_t sub = sign | (std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3F000000u);
  return a > 0x7F800000u ? nan : a >= 0x477FF000u ? inf : a >= 0x38800000u ? normal : sub;
}

inline uint32_t f32FromHalfBits(uint32_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t sub = sign | std::bit_cast<uint32_t>(static_cast<float>(mantissa) * 5.9604644775390625e-08f);
  uint32_t special = sign | 0x7F800000u | (mantissa << 13);
  uint32_t normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  return exponent == 0 ? sub : exponent == 31 ? special : normal;
}

}  // namespace tpu::sim
