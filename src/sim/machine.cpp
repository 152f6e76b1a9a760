#include "sim/machine.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>

#include "sim/mxu_kernel.h"
#include "sim/mxu_pool.h"
#include "support/float_format.h"

namespace tpu::sim {

using isa::Opcode;

Memory::Memory(Memory&& o) noexcept
    : data_(o.data_), size_(o.size_), paged_(o.paged_), pages_(std::move(o.pages_)),
      pagesAllocated_(o.pagesAllocated_), budget_(o.budget_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.pages_.clear();
  o.pagesAllocated_ = 0;
}

Memory::~Memory() { release(); }

void Memory::release() {
  std::free(data_);
  data_ = nullptr;
  for (uint8_t* p : pages_) std::free(p);
  pages_.clear();
  if (budget_) budget_->give(pagesAllocated_ * kPageBytes);
  pagesAllocated_ = 0;
  size_ = 0;
  paged_ = false;
}

bool Memory::allocate(uint64_t size) {
  release();
  if (size == 0) return true;
  data_ = static_cast<uint8_t*>(std::calloc(size, 1));
  if (!data_) return false;
  size_ = size;
  return true;
}

void Memory::allocatePaged(uint64_t size, HostMemoryBudget* budget) {
  release();
  paged_ = true;
  size_ = size;
  budget_ = budget;
  pages_.assign((size + kPageBytes - 1) / kPageBytes, nullptr);
}

void Memory::read(uint64_t offset, void* dst, uint64_t n) const {
  uint8_t* out = static_cast<uint8_t*>(dst);
  if (!paged_) {
    std::memmove(out, data_ + offset, n);
    return;
  }
  while (n > 0) {
    uint64_t in = offset % kPageBytes, len = std::min(n, kPageBytes - in);
    const uint8_t* page = pages_[offset / kPageBytes];
    if (page) std::memmove(out, page + in, len);
    else std::memset(out, 0, len);
    out += len, offset += len, n -= len;
  }
}

bool Memory::writePage(uint64_t offset, const uint8_t* src, uint64_t n) {
  uint8_t*& page = pages_[offset / kPageBytes];
  uint64_t in = offset % kPageBytes;
  if (!page) {
    // Zeros into an untouched page leave it untouched.
    if (!src) return true;
    static const uint8_t kZeros[kPageBytes] = {};
    if (std::memcmp(src, kZeros, n) == 0) return true;
    if (budget_ && !budget_->take(kPageBytes)) return false;
    page = static_cast<uint8_t*>(std::calloc(kPageBytes, 1));
    if (!page) {
      if (budget_) budget_->give(kPageBytes);
      return false;
    }
    ++pagesAllocated_;
  }
  if (src) std::memmove(page + in, src, n);
  else std::memset(page + in, 0, n);
  return true;
}

bool Memory::write(uint64_t offset, const void* src, uint64_t n) {
  const uint8_t* from = static_cast<const uint8_t*>(src);
  if (!paged_) {
    std::memmove(data_ + offset, from, n);
    return true;
  }
  while (n > 0) {
    uint64_t len = std::min(n, kPageBytes - offset % kPageBytes);
    if (!writePage(offset, from, len)) return false;
    from += len, offset += len, n -= len;
  }
  return true;
}

bool Memory::copy(Memory& dst, uint64_t dstOffset, const Memory& src, uint64_t srcOffset, uint64_t n) {
  if (!dst.paged_ && !src.paged_) {
    std::memmove(dst.data_ + dstOffset, src.data_ + srcOffset, n);
    return true;
  }
  if (!src.paged_) return dst.write(dstOffset, src.data_ + srcOffset, n);
  if (!dst.paged_) {
    src.read(srcOffset, dst.data_ + dstOffset, n);
    return true;
  }
  // Paged to paged, one piece per (source page, destination page) pair;
  // backwards when a move within one memory would overwrite its own source.
  auto piece = [&](uint64_t at, uint64_t len) {
    const uint8_t* page = src.pages_[(srcOffset + at) / kPageBytes];
    return dst.writePage(dstOffset + at, page ? page + (srcOffset + at) % kPageBytes : nullptr, len);
  };
  if (&dst == &src && dstOffset > srcOffset && dstOffset < srcOffset + n) {
    uint64_t end = n;
    while (end > 0) {
      uint64_t s = (srcOffset + end - 1) % kPageBytes + 1, d = (dstOffset + end - 1) % kPageBytes + 1;
      uint64_t len = std::min({end, s, d});
      if (!piece(end - len, len)) return false;
      end -= len;
    }
    return true;
  }
  for (uint64_t at = 0; at < n;) {
    uint64_t len = std::min({n - at, kPageBytes - (srcOffset + at) % kPageBytes,
                             kPageBytes - (dstOffset + at) % kPageBytes});
    if (!piece(at, len)) return false;
    at += len;
  }
  return true;
}

struct Machine::MxuUnit {
  // bf16 weights as f32. A latched buffer is read by in-flight host jobs
  // (mxu_pool.h) until `lastJob` finishes; then it may be staged into again.
  struct Weights {
    // Cache-line aligned: the host MXU kernel reads it with full-width
    // vector loads (a malloc'd vector is only 16-byte aligned).
    alignas(64) std::array<float, kMxuDim * kMxuDim> w{};
    int64_t lastJob = -1;
  };
  static constexpr size_t kWeightBuffers = 6;  // kept before reusing (see latchBf16)
  std::vector<std::unique_ptr<Weights>> buffers;
  Weights* stage = nullptr;
  Weights* active = nullptr;
  uint32_t rowBlocks = 0, colBlocks = 0;  // blocks of `stage` written by wpush / wpush.t
  std::vector<int32_t> stageI = std::vector<int32_t>(kMxuDim * kMxuDim);
  std::vector<int32_t> activeI = std::vector<int32_t>(kMxuDim * kMxuDim);
  int staged = 0;
  bool stageInt8 = false;
  bool stageMixed = false;
  bool hasWeights = false;
  bool weightsInt8 = false;
  std::vector<VReg> fifo;
  std::vector<int64_t> fifoJob;  // host job computing each slot, or -1
  int head = 0, count = 0;
};

struct Machine::XposeUnit {
  std::vector<uint32_t> stage = std::vector<uint32_t>(kMxuDim * kMxuDim);
  std::vector<uint32_t> out = std::vector<uint32_t>(kMxuDim * kMxuDim);
  int pushes = 0;
  int pops = kTileBlocks;  // row blocks of `out` already popped
};

namespace {

inline float f(uint32_t u) { return std::bit_cast<float>(u); }
inline uint32_t u(float x) { return std::bit_cast<uint32_t>(x); }
inline int32_t s(uint32_t x) { return static_cast<int32_t>(x); }

constexpr uint32_t kNaN = 0x7FC00000u;

inline bool isNaN(uint32_t x) { return (x & 0x7FFFFFFFu) > 0x7F800000u; }

// IEEE maximum/minimum: NaN if either is NaN, -0 < +0.
inline uint32_t fmaxBits(uint32_t a, uint32_t b) {
  float x = f(a), y = f(b);
  uint32_t r = x > y ? a : b;
  r = x == y ? (a & b) : r;
  return (isNaN(a) || isNaN(b)) ? kNaN : r;
}
inline uint32_t fminBits(uint32_t a, uint32_t b) {
  float x = f(a), y = f(b);
  uint32_t r = x < y ? a : b;
  r = x == y ? (a | b) : r;
  return (isNaN(a) || isNaN(b)) ? kNaN : r;
}

inline uint32_t cvtS32F32(uint32_t a) {
  float x = f(a);
  int32_t r = x != x                 ? 0
              : x >= 2147483648.0f   ? INT32_MAX
              : x < -2147483648.0f   ? INT32_MIN
                                     : static_cast<int32_t>(x);
  return static_cast<uint32_t>(r);
}

template <class F>
inline void map1(uint32_t* d, const uint32_t* a, F fn) {
  for (int i = 0; i < kVregWords; ++i) d[i] = fn(a[i]);
}
template <class F>
inline void map2(uint32_t* d, const uint32_t* a, const uint32_t* b, F fn) {
  for (int i = 0; i < kVregWords; ++i) d[i] = fn(a[i], b[i]);
}
template <class F>
inline void map3(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c, F fn) {
  for (int i = 0; i < kVregWords; ++i) d[i] = fn(a[i], b[i], c[i]);
}

__attribute__((target_clones("fma", "default"))) void vfmaKernel(uint32_t* d, const uint32_t* a, const uint32_t* b,
                                                                 const uint32_t* c) {
  for (int i = 0; i < kVregWords; ++i) d[i] = u(std::fma(f(a[i]), f(b[i]), f(c[i])));
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void roundBlockToBf16(float* w, const uint32_t* a) {
  for (int i = 0; i < kVregWords; ++i) w[i] = f(roundToBf16Bits(a[i]));
}

// All selected rows of a vld.bf16 in one call: the rows are usually cache
// misses (strided panels), and one straight loop keeps them all in flight.
__attribute__((target_clones("avx512f", "avx2", "default"))) void widenBf16Rows(uint32_t* __restrict d,
                                                                               const uint8_t* __restrict mem,
                                                                               int64_t base, int64_t stride,
                                                                               uint32_t sublanes) {
  for (int i = 0; i < kSublanes; ++i) {
    if (!(sublanes & (1u << i))) continue;
    const uint8_t* row = mem + base + stride * i;
    for (int l = 0; l < kLanes; ++l) {
      uint16_t v;
      std::memcpy(&v, row + 2 * l, 2);
      d[i * kLanes + l] = static_cast<uint32_t>(v) << 16;
    }
  }
}

__attribute__((target_clones("avx2", "default"))) void widenHalfRow(uint32_t* d, const uint8_t* src) {
  uint16_t row[kLanes];
  std::memcpy(row, src, sizeof row);
  for (int l = 0; l < kLanes; ++l) d[l] = f32FromHalfBits(row[l]);
}

__attribute__((target_clones("avx2", "default"))) void narrowHalfRow(uint8_t* dst, const uint32_t* v) {
  uint16_t row[kLanes];
  for (int l = 0; l < kLanes; ++l) row[l] = static_cast<uint16_t>(halfFromF32Bits(v[l]));
  std::memcpy(dst, row, sizeof row);
}

__attribute__((target_clones("avx2", "default"))) void roundHalfKernel(uint32_t* d, const uint32_t* a) {
  for (int i = 0; i < kVregWords; ++i) d[i] = f32FromHalfBits(halfFromF32Bits(a[i]));
}

template <class T>
void widenIntRow(uint32_t* d, const uint8_t* src) {
  T row[kLanes];
  std::memcpy(row, src, sizeof row);
  // Through the 32-bit type of T's signedness: sign- or zero-extends.
  for (int l = 0; l < kLanes; ++l)
    d[l] = static_cast<uint32_t>(static_cast<std::conditional_t<std::is_signed_v<T>, int32_t, uint32_t>>(row[l]));
}

// The one-byte float formats of the vld/vst/vrnd.<format> rows: decoding is a
// 256-entry table, encoding is support/float_format's (as the interpreter's).
struct ByteFormat {
  FloatFormat format;
  std::array<uint32_t, 256> decode;  // f32 bits per code
};

const ByteFormat* byteFormat(Opcode op) {
  auto make = [](FloatFormat fmt) {
    ByteFormat b{fmt, {}};
    for (uint32_t c = 0; c < 256; ++c) b.decode[c] = u(static_cast<float>(decodeFloat(fmt, c)));
    return b;
  };
#define TPU_BYTE_FORMAT(NAME)                                                                       \
  case Opcode::VLd##NAME:                                                                           \
  case Opcode::VSt##NAME:                                                                           \
  case Opcode::VRnd##NAME: {                                                                        \
    static const ByteFormat b = make(FloatFormat::NAME);                                            \
    return &b;                                                                                      \
  }
  switch (op) {
    TPU_BYTE_FORMAT(F8E4M3FN)
    TPU_BYTE_FORMAT(F8E5M2)
    TPU_BYTE_FORMAT(F8E4M3)
    TPU_BYTE_FORMAT(F8E3M4)
    TPU_BYTE_FORMAT(F8E4M3FNUZ)
    TPU_BYTE_FORMAT(F8E5M2FNUZ)
    TPU_BYTE_FORMAT(F8E4M3B11FNUZ)
    TPU_BYTE_FORMAT(F8E8M0FNU)
    TPU_BYTE_FORMAT(F4E2M1FN)
    TPU_BYTE_FORMAT(F6E2M3FN)
    TPU_BYTE_FORMAT(F6E3M2FN)
    default: return nullptr;
  }
#undef TPU_BYTE_FORMAT
}

inline uint32_t encodeByteFormat(const ByteFormat& b, uint32_t x) { return encodeFloat(b.format, f(x)); }

__attribute__((target_clones("avx2", "default"))) void roundKernel(uint32_t* d, const uint32_t* a, int mode) {
  switch (mode) {
    case 0:
      for (int i = 0; i < kVregWords; ++i) d[i] = u(std::floor(f(a[i])));
      break;
    case 1:
      for (int i = 0; i < kVregWords; ++i) d[i] = u(std::ceil(f(a[i])));
      break;
    default:
      for (int i = 0; i < kVregWords; ++i) d[i] = u(std::rint(f(a[i])));
      break;
  }
}

std::string where(isa::MemSpace space) {
  return space == isa::MemSpace::Vmem ? "VMEM" : space == isa::MemSpace::Smem ? "SMEM" : "HBM";
}

}  // namespace

Machine::Machine(const isa::Program& program, const target::TargetDesc& target, const DecodedProgram& decoded,
                 int hostThreads)
    : program_(program), target_(target), decoded_(decoded) {
  const RegisterLayout& L = decoded.regs;
  sregs_.assign(L.sregTotal, 0);
  vregs_.resize(L.vregTotal);
  std::memset(vregs_.data(), 0, vregs_.size() * sizeof(VReg));
  for (size_t i = 0; i < decoded.constants.size(); ++i)
    std::fill_n(vregs_[L.constBase + i].w, kVregWords, decoded.constants[i]);
  vmasks_.resize(L.vmaskTotal);
  std::memset(vmasks_.data(), 0, vmasks_.size() * sizeof(VReg));
  sems_.assign(target.registers.semaphores, 0);
  for (int i = 0; i < target.mxu.count; ++i) {
    auto m = std::make_unique<MxuUnit>();
    for (int b = 0; b < 2; ++b) m->buffers.push_back(std::make_unique<MxuUnit::Weights>());
    m->stage = m->buffers[0].get();
    m->active = m->buffers[1].get();
    m->fifo.resize(std::max(1, target.mxu.resultFifoDepth));
    m->fifoJob.assign(m->fifo.size(), -1);
    mxus_.push_back(std::move(m));
  }
  for (int i = 0; i < std::max(1, target.slotCount(target::SlotClass::Xlu)); ++i)
    xposes_.push_back(std::make_unique<XposeUnit>());
  if (hostThreads <= 0) hostThreads = std::min(4, static_cast<int>(std::thread::hardware_concurrency()));
  // Only programs that use the MXUs gain from a worker thread.
  bool usesMxu = false;
  for (const DecodedOp& op : decoded.ops) usesMxu |= op.opcode == Opcode::MxuMatmulBf16;
  pool_ = std::make_unique<MxuPool>(usesMxu ? std::max(0, hostThreads - 1) : 0);
}


std::string Machine::hostMemoryMessage() const {
  if (!budget_) return "cannot allocate host memory for the simulated HBM";
  return fmt::format("out of host memory: the simulated chips' HBM and VMEM would need more than {} bytes of this "
                     "host's memory ({}); run fewer chips per process (mpirun, see tpu-run(1))",
                     budget_->limit, budget_->limitSource.empty() ? "the limit" : budget_->limitSource);
}

std::string Machine::load(const isa::Entry& entry, const std::vector<std::string_view>& inputs,
                          const std::function<void(size_t)>& release) {
  if (inputs.size() != entry.args.size())
    return fmt::format("entry '{}' takes {} argument{}, {} given", entry.name, entry.args.size(),
                       entry.args.size() == 1 ? "" : "s", inputs.size());
  uint64_t hbmTotal = 0;
  for (const isa::Buffer& b : program_.buffers)
    if (b.space == isa::MemSpace::Hbm) hbmTotal += b.sizeBytes();
  if (hbmTotal > target_.memory.hbmBytes)
    return fmt::format("the program's HBM buffers need {} bytes; target '{}' has {}", hbmTotal, target_.name,
                       target_.memory.hbmBytes);
  if (!vmem_.allocate(target_.memory.vmemBytes) || !smem_.allocate(target_.memory.smemBytes))
    return "cannot allocate host memory for VMEM/SMEM";
  if (budget_ && !budget_->take(smem_.size())) return hostMemoryMessage();
  chargedSmem_ = smem_.size();
  hbm_.clear();
  hbm_.resize(program_.buffers.size());
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const isa::Buffer& b = program_.buffers[i];
    const std::string* init = b.init >= 0 ? &program_.data[b.init].bytes : nullptr;
    if (b.space == isa::MemSpace::Hbm) {
      hbm_[i].allocatePaged(b.sizeBytes(), budget_);
      if (init && !hbm_[i].write(0, init->data(), std::min<uint64_t>(init->size(), b.sizeBytes())))
        return hostMemoryMessage();
    } else if (init) {
      Memory& m = b.space == isa::MemSpace::Vmem ? vmem_ : smem_;
      if (b.space == isa::MemSpace::Vmem && !touchVmem(b.address + init->size())) return hostMemoryMessage();
      std::memcpy(m.data() + b.address, init->data(), init->size());
    }
  }
  for (size_t k = 0; k < entry.args.size(); ++k) {
    const isa::Buffer& b = program_.buffers[entry.args[k]];
    if (inputs[k].size() != b.sizeBytes())
      return fmt::format("argument {} ('{}', {}[{}]) needs {} bytes, got {}", k, b.name, isa::dtypeName(b.dtype),
                         fmt::join(b.shape, ","), b.sizeBytes(), inputs[k].size());
    if (!inputs[k].empty() && !hbm_[entry.args[k]].write(0, inputs[k].data(), inputs[k].size()))
      return hostMemoryMessage();
    if (release) release(k);
  }
  return {};
}

bool Machine::touchVmem(uint64_t end) {
  if (end <= vmemCharged_) return true;
  // Charged in whole pages: the host maps calloc'd memory page by page.
  uint64_t to = std::min<uint64_t>(vmem_.size(), (end + Memory::kPageBytes - 1) / Memory::kPageBytes * Memory::kPageBytes);
  if (budget_ && to > vmemCharged_ && !budget_->take(to - vmemCharged_)) return false;
  vmemCharged_ = std::max(vmemCharged_, to);
  return true;
}

std::vector<std::string> Machine::results(const isa::Entry& entry) const {
  std::vector<std::string> out;
  for (uint32_t r : entry.results) {
    const Memory& m = hbm_[r];
    std::string bytes(m.size(), '\0');
    m.read(0, bytes.data(), m.size());
    out.push_back(std::move(bytes));
  }
  return out;
}

bool Machine::failf(std::string message) {
  fault_ = std::move(message);
  return false;
}

int Machine::mxuFifoCount(int u) const { return mxus_[u]->count; }

const uint32_t* Machine::vsrc(const Src& src) {
  if (src.form == Src::SReg) {
    uint32_t v = sregs_[src.reg];
    uint32_t* w = vregs_[decoded_.regs.bcastVreg].w;
    std::fill_n(w, kVregWords, v);
    return w;
  }
  return vregs_[src.reg].w;
}

int Machine::semIndex(const DecodedOp& op, const SemRef& ref) {
  int64_t i = ref.viaSreg ? static_cast<int64_t>(s(sregs_[ref.index])) : ref.index;
  if (i < 0 || i >= static_cast<int64_t>(sems_.size())) {
    failf(fmt::format("{}: semaphore {}{} is outside sem0..sem{} of target '{}'", op.desc->mnemonic, i,
                      ref.viaSreg ? fmt::format(" (from s{})", ref.index) : "", sems_.size() - 1, target_.name));
    return -1;
  }
  return static_cast<int>(i);
}

int64_t Machine::semAmount(const DecodedOp& op) const {
  return op.b.form == Src::None ? 1 : static_cast<int64_t>(s(srcScalar(op.b)));
}

// Address of sublane 0 of a vector load/store; checks every selected row.
bool Machine::vmemRange(const DecodedOp& op, int64_t stride, uint32_t rowBytes, uint32_t align, int64_t& base) {
  base = op.mem.offset + (op.mem.base >= 0 ? static_cast<int64_t>(sregs_[op.mem.base]) : 0);
  for (int i = 0; i < kSublanes; ++i) {
    if (!(op.sublanes & (1u << i))) continue;
    int64_t a = base + stride * i;
    if (a < 0 || static_cast<uint64_t>(a) + rowBytes > vmem_.size())
      return failf(fmt::format("{}: VMEM address {} (0x{:x}, sublane {}, {} bytes) is outside VMEM ({} bytes)",
                               op.desc->mnemonic, a, static_cast<uint64_t>(a), i, rowBytes, vmem_.size()));
    if (a % align != 0)
      return failf(fmt::format("{}: VMEM address {} (0x{:x}, sublane {}) is not {}-byte aligned", op.desc->mnemonic,
                               a, a, i, align));
    if (!touchVmem(static_cast<uint64_t>(a) + rowBytes)) return failf(hostMemoryMessage());
  }
  return true;
}

bool Machine::smemWord(const DecodedOp& op, int64_t& addr) {
  addr = op.mem.offset + (op.mem.base >= 0 ? static_cast<int64_t>(sregs_[op.mem.base]) : 0);
  if (addr < 0 || static_cast<uint64_t>(addr) + 4 > smem_.size())
    return failf(fmt::format("{}: SMEM address {} (0x{:x}) is outside SMEM ({} bytes)", op.desc->mnemonic, addr,
                             static_cast<uint64_t>(addr), smem_.size()));
  if (addr % 4 != 0)
    return failf(fmt::format("{}: SMEM address {} (0x{:x}) is not 4-byte aligned", op.desc->mnemonic, addr, addr));
  return true;
}

bool Machine::execLoad(const DecodedOp& op) {
  uint32_t* d = vregs_[op.d].w;
  int64_t base;
  switch (op.opcode) {
    case Opcode::VLd:
      if (!vmemRange(op, op.stride, 512, 4, base)) return false;
      for (int i = 0; i < kSublanes; ++i)
        if (op.sublanes & (1u << i)) std::memcpy(d + i * kLanes, vmem_.data() + base + op.stride * i, 512);
      return true;
    case Opcode::VLdBf16:
      if (!vmemRange(op, op.stride, 256, 2, base)) return false;
      widenBf16Rows(d, vmem_.data(), base, op.stride, op.sublanes);
      return true;
    case Opcode::VLdS8:
      if (!vmemRange(op, op.stride, 128, 1, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        int8_t row[kLanes];
        std::memcpy(row, vmem_.data() + base + op.stride * i, sizeof row);
        for (int l = 0; l < kLanes; ++l) d[i * kLanes + l] = static_cast<uint32_t>(static_cast<int32_t>(row[l]));
      }
      return true;
    case Opcode::VLdU8:
    case Opcode::VLdS16:
    case Opcode::VLdU16:
    case Opcode::VLdF16: {
      int rowBytes = isa::vectorRowBytes(*op.desc);
      if (!vmemRange(op, op.stride, rowBytes, rowBytes / kLanes, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        const uint8_t* src = vmem_.data() + base + op.stride * i;
        uint32_t* row = d + i * kLanes;
        switch (op.opcode) {
          case Opcode::VLdU8: widenIntRow<uint8_t>(row, src); break;
          case Opcode::VLdS16: widenIntRow<int16_t>(row, src); break;
          case Opcode::VLdU16: widenIntRow<uint16_t>(row, src); break;
          default: widenHalfRow(row, src); break;
        }
      }
      return true;
    }
    case Opcode::VLdE64:
    case Opcode::VLdE128: {
      // Word `word` of each element: a row of 128 elements spans rowBytes.
      int rowBytes = isa::vectorRowBytes(*op.desc);
      int elemBytes = rowBytes / kLanes;
      if (!vmemRange(op, op.stride, rowBytes, elemBytes, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        const uint8_t* src = vmem_.data() + base + op.stride * i + 4 * op.word;
        for (int l = 0; l < kLanes; ++l) std::memcpy(d + i * kLanes + l, src + l * elemBytes, 4);
      }
      return true;
    }
    default: {
      const ByteFormat* bf = byteFormat(op.opcode);
      if (!bf) return failf("internal: not a load");
      if (!vmemRange(op, op.stride, kLanes, 1, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        const uint8_t* src = vmem_.data() + base + op.stride * i;
        for (int l = 0; l < kLanes; ++l) d[i * kLanes + l] = bf->decode[src[l]];
      }
      return true;
    }
  }
}

bool Machine::execStore(const DecodedOp& op) {
  const uint32_t* v = vregs_[op.a.reg].w;
  int64_t base;
  switch (op.opcode) {
    case Opcode::VSt:
      if (!vmemRange(op, op.stride, 512, 4, base)) return false;
      for (int i = 0; i < kSublanes; ++i)
        if (op.sublanes & (1u << i)) std::memcpy(vmem_.data() + base + op.stride * i, v + i * kLanes, 512);
      return true;
    case Opcode::VStM: {
      if (!vmemRange(op, op.stride, 512, 4, base)) return false;
      const uint32_t* m = vmasks_[op.m].w;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        uint32_t row[kLanes];
        uint8_t* p = vmem_.data() + base + op.stride * i;
        std::memcpy(row, p, sizeof row);
        for (int l = 0; l < kLanes; ++l) {
          uint32_t mk = m[i * kLanes + l];
          row[l] = (v[i * kLanes + l] & mk) | (row[l] & ~mk);
        }
        std::memcpy(p, row, sizeof row);
      }
      return true;
    }
    case Opcode::VStBf16:
      if (!vmemRange(op, op.stride, 256, 2, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        uint16_t row[kLanes];
        for (int l = 0; l < kLanes; ++l) row[l] = static_cast<uint16_t>(roundToBf16Bits(v[i * kLanes + l]) >> 16);
        std::memcpy(vmem_.data() + base + op.stride * i, row, sizeof row);
      }
      return true;
    case Opcode::VStS8:
      if (!vmemRange(op, op.stride, 128, 1, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        int8_t row[kLanes];
        for (int l = 0; l < kLanes; ++l) row[l] = static_cast<int8_t>(std::clamp(s(v[i * kLanes + l]), -128, 127));
        std::memcpy(vmem_.data() + base + op.stride * i, row, sizeof row);
      }
      return true;
    case Opcode::VStS16:
    case Opcode::VStF16:
      if (!vmemRange(op, op.stride, 256, 2, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        uint8_t* dst = vmem_.data() + base + op.stride * i;
        if (op.opcode == Opcode::VStF16) {
          narrowHalfRow(dst, v + i * kLanes);
        } else {
          uint16_t row[kLanes];
          for (int l = 0; l < kLanes; ++l) row[l] = static_cast<uint16_t>(v[i * kLanes + l]);
          std::memcpy(dst, row, sizeof row);
        }
      }
      return true;
    case Opcode::VStE64:
    case Opcode::VStE128: {
      int rowBytes = isa::vectorRowBytes(*op.desc);
      int elemBytes = rowBytes / kLanes;
      if (!vmemRange(op, op.stride, rowBytes, elemBytes, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        uint8_t* dst = vmem_.data() + base + op.stride * i + 4 * op.word;
        for (int l = 0; l < kLanes; ++l) std::memcpy(dst + l * elemBytes, v + i * kLanes + l, 4);
      }
      return true;
    }
    default: {
      const ByteFormat* bf = byteFormat(op.opcode);
      if (!bf) return failf("internal: not a store");
      if (!vmemRange(op, op.stride, kLanes, 1, base)) return false;
      for (int i = 0; i < kSublanes; ++i) {
        if (!(op.sublanes & (1u << i))) continue;
        uint8_t* dst = vmem_.data() + base + op.stride * i;
        for (int l = 0; l < kLanes; ++l) dst[l] = static_cast<uint8_t>(encodeByteFormat(*bf, v[i * kLanes + l]));
      }
      return true;
    }
  }
}

void Machine::execEup(const DecodedOp& op) {
  uint32_t* d = vregs_[op.d].w;
  const uint32_t* a = vregs_[op.a.reg].w;
  switch (op.opcode) {
    case Opcode::VExp: map1(d, a, [](uint32_t x) { return u(std::exp(f(x))); }); break;
    case Opcode::VLog: map1(d, a, [](uint32_t x) { return u(std::log(f(x))); }); break;
    case Opcode::VRsqrt: map1(d, a, [](uint32_t x) { return u(1.0f / std::sqrt(f(x))); }); break;
    case Opcode::VSqrt: map1(d, a, [](uint32_t x) { return u(std::sqrt(f(x))); }); break;
    case Opcode::VRecip: map1(d, a, [](uint32_t x) { return u(1.0f / f(x)); }); break;
    case Opcode::VDivF: map2(d, a, vsrc(op.b), [](uint32_t x, uint32_t y) { return u(f(x) / f(y)); }); break;
    case Opcode::VTanh: map1(d, a, [](uint32_t x) { return u(std::tanh(f(x))); }); break;
    case Opcode::VLogistic:
      map1(d, a, [](uint32_t x) { return u(1.0f / (1.0f + std::exp(-f(x)))); });
      break;
    case Opcode::VSin: map1(d, a, [](uint32_t x) { return u(std::sin(f(x))); }); break;
    case Opcode::VCos: map1(d, a, [](uint32_t x) { return u(std::cos(f(x))); }); break;
    case Opcode::VPow: map2(d, a, vsrc(op.b), [](uint32_t x, uint32_t y) { return u(std::pow(f(x), f(y))); }); break;
    default: break;
  }
}

bool Machine::execXlu(const DecodedOp& op) {
  if (op.opcode == Opcode::VXposePush) {
    XposeUnit& x = *xposes_[op.unit];
    if (x.pushes == kTileBlocks - 1 && x.pops < kTileBlocks)
      return failf(fmt::format("vxpose.push on xlu{}: the previous transposed tile still has {} row block{} to pop",
                               op.unit, kTileBlocks - x.pops, kTileBlocks - x.pops == 1 ? "" : "s"));
    std::memcpy(x.stage.data() + x.pushes * kVregWords, vregs_[op.a.reg].w, sizeof(VReg));
    if (++x.pushes == kTileBlocks) {
      for (int r = 0; r < kMxuDim; ++r)
        for (int c = 0; c < kMxuDim; ++c) x.out[c * kMxuDim + r] = x.stage[r * kMxuDim + c];
      x.pushes = 0;
      x.pops = 0;
    }
    return true;
  }
  if (op.opcode == Opcode::VXposePop) {
    XposeUnit& x = *xposes_[op.unit];
    if (x.pops >= kTileBlocks)
      return failf(fmt::format("vxpose.pop on xlu{}: no transposed tile is ready ({} of {} row blocks pushed)",
                               op.unit, x.pushes, kTileBlocks));
    std::memcpy(vregs_[op.d].w, x.out.data() + x.pops * kVregWords, sizeof(VReg));
    ++x.pops;
    return true;
  }
  VReg tmp;
  uint32_t* t = tmp.w;
  const uint32_t* a = vregs_[op.a.reg].w;
  auto laneReduce = [&](auto fn) {
    for (int sl = 0; sl < kSublanes; ++sl) {
      uint32_t x[kLanes];
      std::memcpy(x, a + sl * kLanes, sizeof x);
      for (int w = kLanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) x[l] = fn(x[l], x[l + w]);
      std::fill_n(t + sl * kLanes, kLanes, x[0]);
    }
  };
  auto subReduce = [&](auto fn) {
    std::memcpy(t, a, sizeof(VReg));
    for (int w = kSublanes / 2; w >= 1; w /= 2)
      for (int sl = 0; sl < w; ++sl)
        for (int l = 0; l < kLanes; ++l) t[sl * kLanes + l] = fn(t[sl * kLanes + l], t[(sl + w) * kLanes + l]);
    for (int sl = 1; sl < kSublanes; ++sl) std::memcpy(t + sl * kLanes, t, kLanes * 4);
  };
  auto addF = [](uint32_t x, uint32_t y) { return u(f(x) + f(y)); };
  auto addS = [](uint32_t x, uint32_t y) { return x + y; };
  auto maxS = [](uint32_t x, uint32_t y) { return s(x) > s(y) ? x : y; };
  auto minS = [](uint32_t x, uint32_t y) { return s(x) < s(y) ? x : y; };
  switch (op.opcode) {
    case Opcode::VRedSumLaneF: laneReduce(addF); break;
    case Opcode::VRedMaxLaneF: laneReduce(fmaxBits); break;
    case Opcode::VRedMinLaneF: laneReduce(fminBits); break;
    case Opcode::VRedSumLaneS: laneReduce(addS); break;
    case Opcode::VRedMaxLaneS: laneReduce(maxS); break;
    case Opcode::VRedMinLaneS: laneReduce(minS); break;
    case Opcode::VRedSumSubF: subReduce(addF); break;
    case Opcode::VRedMaxSubF: subReduce(fmaxBits); break;
    case Opcode::VRedMinSubF: subReduce(fminBits); break;
    case Opcode::VRedSumSubS: subReduce(addS); break;
    case Opcode::VRedMaxSubS: subReduce(maxS); break;
    case Opcode::VRedMinSubS: subReduce(minS); break;
    case Opcode::VRotLane: {
      uint32_t n = srcScalar(op.b) & (kLanes - 1);
      for (int sl = 0; sl < kSublanes; ++sl)
        for (int l = 0; l < kLanes; ++l) t[sl * kLanes + ((l + n) & (kLanes - 1))] = a[sl * kLanes + l];
      break;
    }
    case Opcode::VRotSub: {
      uint32_t n = srcScalar(op.b) & (kSublanes - 1);
      for (int sl = 0; sl < kSublanes; ++sl) std::memcpy(t + ((sl + n) & (kSublanes - 1)) * kLanes, a + sl * kLanes, kLanes * 4);
      break;
    }
    case Opcode::VPermLane: {
      const uint32_t* idx = vregs_[op.b.reg].w;
      for (int sl = 0; sl < kSublanes; ++sl)
        for (int l = 0; l < kLanes; ++l) t[sl * kLanes + l] = a[sl * kLanes + (idx[sl * kLanes + l] & (kLanes - 1))];
      break;
    }
    case Opcode::VPermSub: {
      const uint32_t* idx = vregs_[op.b.reg].w;
      for (int sl = 0; sl < kSublanes; ++sl)
        for (int l = 0; l < kLanes; ++l) t[sl * kLanes + l] = a[(idx[sl * kLanes + l] & (kSublanes - 1)) * kLanes + l];
      break;
    }
    case Opcode::VBcastLane: {
      uint32_t l0 = srcScalar(op.b) & (kLanes - 1);
      for (int sl = 0; sl < kSublanes; ++sl) std::fill_n(t + sl * kLanes, kLanes, a[sl * kLanes + l0]);
      break;
    }
    case Opcode::VBcastSub: {
      uint32_t s0 = srcScalar(op.b) & (kSublanes - 1);
      for (int sl = 0; sl < kSublanes; ++sl) std::memcpy(t + sl * kLanes, a + s0 * kLanes, kLanes * 4);
      break;
    }
    default: return failf(fmt::format("internal: unhandled cross-lane op {}", op.desc->mnemonic));
  }
  std::memcpy(vregs_[op.d].w, t, sizeof(VReg));
  return true;
}

// Makes the staged bf16 weights active and picks a buffer no host job still
// reads as the next stage. Elements no push of this stage wrote are zero
// (a stage starts from zeros: with both wpush and wpush.t some stay unset).
// The stage is the least recently latched free buffer of a few: a buffer the
// worker thread has just read sits in its core's cache, and writing it from
// this thread would stall on every line.
void Machine::latchBf16(MxuUnit& m) {
  constexpr uint32_t kAll = (1u << kTileBlocks) - 1;
  if (m.rowBlocks != kAll && m.colBlocks != kAll) {
    float* w = m.stage->w.data();
    for (int i = 0; i < kMxuDim; ++i) {
      if (m.rowBlocks & (1u << (i / kSublanes))) continue;
      for (int j = 0; j < kMxuDim; ++j)
        if (!(m.colBlocks & (1u << (j / kSublanes)))) w[i * kMxuDim + j] = 0.0f;
    }
  }
  m.active = m.stage;
  m.stage = nullptr;
  if (m.buffers.size() >= MxuUnit::kWeightBuffers) {
    for (const auto& b : m.buffers) {
      if (b.get() == m.active || !(b->lastJob < 0 || pool_->finished(static_cast<uint64_t>(b->lastJob)))) continue;
      if (!m.stage || b->lastJob < m.stage->lastJob) m.stage = b.get();
    }
  }
  if (!m.stage) {
    m.buffers.push_back(std::make_unique<MxuUnit::Weights>());
    m.stage = m.buffers.back().get();
  }
}

bool Machine::execMxu(const DecodedOp& op) {
  MxuUnit& m = *mxus_[op.unit];
  switch (op.opcode) {
    case Opcode::MxuWPushBf16:
    case Opcode::MxuWPushTBf16:
    case Opcode::MxuWPushS8: {
      if (m.staged >= kTileBlocks)
        return failf(fmt::format("{} on mxu{}: all {} row blocks are already staged (mxu.wlatch first)",
                                 op.desc->mnemonic, op.unit, kTileBlocks));
      bool int8 = op.opcode == Opcode::MxuWPushS8;
      if (m.staged == 0) {
        m.stageInt8 = int8;
        m.stageMixed = false;
        m.rowBlocks = m.colBlocks = 0;
      } else if (m.stageInt8 != int8) {
        m.stageMixed = true;
      }
      const uint32_t* a = vregs_[op.a.reg].w;
      int blk = m.staged * kSublanes;
      if (op.opcode == Opcode::MxuWPushBf16) {
        roundBlockToBf16(m.stage->w.data() + blk * kMxuDim, a);
        m.rowBlocks |= 1u << m.staged;
      } else if (op.opcode == Opcode::MxuWPushTBf16) {
        m.colBlocks |= 1u << m.staged;
        float* w = m.stage->w.data();
        for (int j = 0; j < kSublanes; ++j)
          for (int i = 0; i < kLanes; ++i) w[i * kMxuDim + blk + j] = f(roundToBf16Bits(a[j * kLanes + i]));
      } else {
        int32_t* w = m.stageI.data() + blk * kMxuDim;
        for (int i = 0; i < kVregWords; ++i) w[i] = std::clamp(s(a[i]), -128, 127);
      }
      ++m.staged;
      return true;
    }
    case Opcode::MxuWLatch:
      if (m.staged != kTileBlocks)
        return failf(fmt::format("mxu.wlatch on mxu{}: only {} of {} row blocks are staged", op.unit, m.staged,
                                 kTileBlocks));
      if (m.stageMixed)
        return failf(fmt::format("mxu.wlatch on mxu{}: the staged weights mix bf16 and int8 pushes", op.unit));
      if (m.stageInt8) {
        m.activeI.swap(m.stageI);
      } else {
        latchBf16(m);
      }
      m.weightsInt8 = m.stageInt8;
      m.hasWeights = true;
      m.staged = 0;
      return true;
    case Opcode::MxuMatmulBf16:
    case Opcode::MxuMatmulS8: {
      bool int8 = op.opcode == Opcode::MxuMatmulS8;
      if (!m.hasWeights) return failf(fmt::format("{} on mxu{}: no weights latched", op.desc->mnemonic, op.unit));
      if (m.weightsInt8 != int8)
        return failf(fmt::format("{} on mxu{}: the latched weights are {}", op.desc->mnemonic, op.unit,
                                 m.weightsInt8 ? "int8" : "bf16"));
      int depth = static_cast<int>(m.fifo.size());
      if (m.count >= depth)
        return failf(fmt::format("{} on mxu{}: the result FIFO is full ({} results not popped); issue would "
                                 "stall forever",
                                 op.desc->mnemonic, op.unit, depth));
      int slotIndex = (m.head + m.count) % depth;
      VReg& slot = m.fifo[slotIndex];
      m.fifoJob[slotIndex] = -1;
      ++m.count;
      const uint32_t* a = vregs_[op.a.reg].w;
      if (!int8) {
        const float* af = reinterpret_cast<const float*>(a);
        m.active->lastJob = static_cast<int64_t>(pool_->submit(af, m.active->w.data(), reinterpret_cast<float*>(slot.w)));
        m.fifoJob[slotIndex] = m.active->lastJob;
      } else {
        alignas(64) int32_t ai[kVregWords];
        for (int i = 0; i < kVregWords; ++i) ai[i] = std::clamp(s(a[i]), -128, 127);
        mxuMatmulS8(ai, m.activeI.data(), reinterpret_cast<int32_t*>(slot.w));
      }
      return true;
    }
    case Opcode::MxuPop: {
      if (m.count == 0) return failf(fmt::format("mxu.pop on mxu{}: the result FIFO is empty", op.unit));
      if (m.fifoJob[m.head] >= 0) pool_->wait(static_cast<uint64_t>(m.fifoJob[m.head]));
      std::memcpy(vregs_[op.d].w, m.fifo[m.head].w, sizeof(VReg));
      m.head = (m.head + 1) % static_cast<int>(m.fifo.size());
      --m.count;
      return true;
    }
    default: return failf("internal: not an MXU op");
  }
}

bool Machine::exec(const DecodedOp& op, int64_t& nextPc) {
  switch (op.opcode) {
    // ---- scalar ----
    case Opcode::SMov: sregs_[op.d] = srcScalar(op.a); return true;
#define SBIN(OPC, EXPR)                  \
  case Opcode::OPC: {                    \
    uint32_t x = sregs_[op.a.reg];       \
    uint32_t y = srcScalar(op.b);        \
    (void)x;                             \
    (void)y;                             \
    sregs_[op.d] = static_cast<uint32_t>(EXPR); \
    return true;                         \
  }
      SBIN(SAdd, x + y)
      SBIN(SSub, x - y)
      SBIN(SMul, x * y)
      SBIN(SDiv, y == 0 ? 0u : (s(x) == INT32_MIN && s(y) == -1) ? x : static_cast<uint32_t>(s(x) / s(y)))
      SBIN(SRem, y == 0 ? x : (s(x) == INT32_MIN && s(y) == -1) ? 0u : static_cast<uint32_t>(s(x) % s(y)))
      SBIN(SAnd, x & y)
      SBIN(SOr, x | y)
      SBIN(SXor, x ^ y)
      SBIN(SShl, x << (y & 31))
      SBIN(SShr, x >> (y & 31))
      SBIN(SSra, static_cast<uint32_t>(s(x) >> (y & 31)))
      SBIN(SMin, s(x) < s(y) ? x : y)
      SBIN(SMax, s(x) > s(y) ? x : y)
      SBIN(SCmpEq, x == y)
      SBIN(SCmpNe, x != y)
      SBIN(SCmpLt, s(x) < s(y))
      SBIN(SCmpLe, s(x) <= s(y))
      SBIN(SCmpGt, s(x) > s(y))
      SBIN(SCmpGe, s(x) >= s(y))
      SBIN(SAddF, u(f(x) + f(y)))
      SBIN(SSubF, u(f(x) - f(y)))
      SBIN(SMulF, u(f(x) * f(y)))
#undef SBIN
    case Opcode::SSel: {
      uint32_t c = sregs_[op.c.reg];  // ssel d, c, a, b: c is the condition
      sregs_[op.d] = c != 0 ? sregs_[op.a.reg] : srcScalar(op.b);
      return true;
    }
    case Opcode::SCvtFS: sregs_[op.d] = u(static_cast<float>(s(sregs_[op.a.reg]))); return true;
    case Opcode::SCvtSF: sregs_[op.d] = cvtS32F32(sregs_[op.a.reg]); return true;
    case Opcode::SLd: {
      int64_t addr;
      if (!smemWord(op, addr)) return false;
      std::memcpy(&sregs_[op.d], smem_.data() + addr, 4);
      return true;
    }
    case Opcode::SSt: {
      int64_t addr;
      if (!smemWord(op, addr)) return false;
      uint32_t v = srcScalar(op.a);
      std::memcpy(smem_.data() + addr, &v, 4);
      return true;
    }
    case Opcode::SIdCore: sregs_[op.d] = 0; return true;
    case Opcode::SIdChip: sregs_[op.d] = static_cast<uint32_t>(chip_); return true;
    case Opcode::SIdChips: sregs_[op.d] = static_cast<uint32_t>(chips_); return true;

    // ---- control ----
    case Opcode::Jmp: nextPc = op.label; return true;
#define BR(OPC, COND)                                   \
  case Opcode::OPC: {                                   \
    uint32_t x = sregs_[op.a.reg], y = srcScalar(op.b); \
    if (COND) nextPc = op.label;                        \
    return true;                                        \
  }
      BR(BrEq, x == y)
      BR(BrNe, x != y)
      BR(BrLt, s(x) < s(y))
      BR(BrGe, s(x) >= s(y))
#undef BR
    case Opcode::Loop: {
      uint32_t c = sregs_[op.a.reg] - 1;
      sregs_[op.d] = c;
      if (c != 0) nextPc = op.label;
      return true;
    }
    case Opcode::Halt:
    case Opcode::Sync:
    case Opcode::Barrier:
    case Opcode::BarrierPod:  // the pod loop held the bundle until every chip arrived
    case Opcode::Nop: return true;

    // ---- semaphores (the loop made sure a wait can proceed) ----
    case Opcode::SemSignal:
    case Opcode::SemWait: {
      int i = semIndex(op, op.sem);
      if (i < 0) return false;
      int64_t n = semAmount(op);
      if (n < 0) return failf(fmt::format("{}: negative count {} on sem{}", op.desc->mnemonic, n, i));
      sems_[i] += op.opcode == Opcode::SemSignal ? n : -n;
      return true;
    }

    // ---- vector memory ----
    case Opcode::VLd:
    case Opcode::VLdBf16:
    case Opcode::VLdS8:
    case Opcode::VLdU8:
    case Opcode::VLdS16:
    case Opcode::VLdU16:
    case Opcode::VLdF16:
    case Opcode::VLdE64:
    case Opcode::VLdE128: return execLoad(op);
    case Opcode::VStE64:
    case Opcode::VStE128:
    case Opcode::VSt:
    case Opcode::VStBf16:
    case Opcode::VStS8:
    case Opcode::VStS16:
    case Opcode::VStF16:
    case Opcode::VStM: return execStore(op);
    case Opcode::VRndF16: roundHalfKernel(vregs_[op.d].w, vregs_[op.a.reg].w); return true;

    // ---- vector ALU ----
    case Opcode::VMovF:
    case Opcode::VMovS: {
      const uint32_t* a = vsrc(op.a);
      if (a != vregs_[op.d].w) std::memcpy(vregs_[op.d].w, a, sizeof(VReg));
      return true;
    }
#define VBIN(OPC, EXPR)                                                              \
  case Opcode::OPC:                                                                  \
    map2(vregs_[op.d].w, vregs_[op.a.reg].w, vsrc(op.b), [](uint32_t x, uint32_t y) { \
      (void)x;                                                                       \
      (void)y;                                                                       \
      return static_cast<uint32_t>(EXPR);                                            \
    });                                                                              \
    return true;
#define VUN(OPC, EXPR)                                                                   \
  case Opcode::OPC:                                                                      \
    map1(vregs_[op.d].w, vregs_[op.a.reg].w, [](uint32_t x) { return static_cast<uint32_t>(EXPR); }); \
    return true;
      VBIN(VAddF, u(f(x) + f(y)))
      VBIN(VSubF, u(f(x) - f(y)))
      VBIN(VMulF, u(f(x) * f(y)))
      VBIN(VMaxF, fmaxBits(x, y))
      VBIN(VMinF, fminBits(x, y))
      VUN(VAbsF, x & 0x7FFFFFFFu)
      VUN(VNegF, x ^ 0x80000000u)
      VBIN(VAddS, x + y)
      VBIN(VSubS, x - y)
      VBIN(VMulS, x * y)
      VBIN(VMaxS, s(x) > s(y) ? x : y)
      VBIN(VMinS, s(x) < s(y) ? x : y)
      VBIN(VAnd, x & y)
      VBIN(VOr, x | y)
      VBIN(VXor, x ^ y)
      VUN(VNot, ~x)
      VBIN(VShl, x << (y & 31))
      VBIN(VShr, x >> (y & 31))
      VBIN(VSra, static_cast<uint32_t>(s(x) >> (y & 31)))
      VUN(VCvtFS, u(static_cast<float>(s(x))))
      VUN(VCvtSF, cvtS32F32(x))
      VUN(VRndBf16, roundToBf16Bits(x))
      VUN(VUnpackLoBf16, x << 16)
      VUN(VUnpackHiBf16, x & 0xFFFF0000u)
#undef VUN
    case Opcode::VPackBf16:
      map2(vregs_[op.d].w, vregs_[op.a.reg].w, vregs_[op.b.reg].w,
           [](uint32_t lo, uint32_t hi) { return (roundToBf16Bits(lo) >> 16) | roundToBf16Bits(hi); });
      return true;
    case Opcode::VFmaF:
      vfmaKernel(vregs_[op.d].w, vregs_[op.a.reg].w, vregs_[op.b.reg].w, vsrc(op.c));
      return true;
    case Opcode::VFloorF: roundKernel(vregs_[op.d].w, vregs_[op.a.reg].w, 0); return true;
    case Opcode::VCeilF: roundKernel(vregs_[op.d].w, vregs_[op.a.reg].w, 1); return true;
    case Opcode::VRoundF: roundKernel(vregs_[op.d].w, vregs_[op.a.reg].w, 2); return true;
#define VCMP(OPC, EXPR)                                                               \
  case Opcode::OPC:                                                                   \
    map2(vmasks_[op.d].w, vregs_[op.a.reg].w, vsrc(op.b), [](uint32_t x, uint32_t y) { \
      (void)x;                                                                        \
      (void)y;                                                                        \
      return (EXPR) ? 0xFFFFFFFFu : 0u;                                               \
    });                                                                               \
    return true;
      VCMP(VCmpEqF, f(x) == f(y))
      VCMP(VCmpNeF, f(x) != f(y))
      VCMP(VCmpLtF, f(x) < f(y))
      VCMP(VCmpLeF, f(x) <= f(y))
      VCMP(VCmpGtF, f(x) > f(y))
      VCMP(VCmpGeF, f(x) >= f(y))
      VCMP(VCmpEqS, x == y)
      VCMP(VCmpNeS, x != y)
      VCMP(VCmpLtS, s(x) < s(y))
      VCMP(VCmpLeS, s(x) <= s(y))
      VCMP(VCmpGtS, s(x) > s(y))
      VCMP(VCmpGeS, s(x) >= s(y))
#undef VCMP
    case Opcode::VSelF:
    case Opcode::VSelS:
      map3(vregs_[op.d].w, vmasks_[op.m].w, vregs_[op.a.reg].w, vsrc(op.b),
           [](uint32_t mk, uint32_t x, uint32_t y) { return (x & mk) | (y & ~mk); });
      return true;
    case Opcode::MAnd: map2(vmasks_[op.d].w, vmasks_[op.a.reg].w, vmasks_[op.b.reg].w, [](uint32_t x, uint32_t y) { return x & y; }); return true;
    case Opcode::MOr: map2(vmasks_[op.d].w, vmasks_[op.a.reg].w, vmasks_[op.b.reg].w, [](uint32_t x, uint32_t y) { return x | y; }); return true;
    case Opcode::MXor: map2(vmasks_[op.d].w, vmasks_[op.a.reg].w, vmasks_[op.b.reg].w, [](uint32_t x, uint32_t y) { return x ^ y; }); return true;
    case Opcode::MNot: map1(vmasks_[op.d].w, vmasks_[op.a.reg].w, [](uint32_t x) { return ~x; }); return true;
    case Opcode::MLanes:
    case Opcode::MSublanes: {
      int32_t n = s(srcScalar(op.b.form != Src::None ? op.b : op.a));
      uint32_t* d = vmasks_[op.d].w;
      bool lanes = op.opcode == Opcode::MLanes;
      for (int i = 0; i < kVregWords; ++i) d[i] = ((lanes ? i % kLanes : i / kLanes) < n) ? 0xFFFFFFFFu : 0u;
      return true;
    }
    case Opcode::VLaneId: {
      uint32_t* d = vregs_[op.d].w;
      for (int i = 0; i < kVregWords; ++i) d[i] = static_cast<uint32_t>(i % kLanes);
      return true;
    }
    case Opcode::VSublaneId: {
      uint32_t* d = vregs_[op.d].w;
      for (int i = 0; i < kVregWords; ++i) d[i] = static_cast<uint32_t>(i / kLanes);
      return true;
    }

    // ---- transcendental ----
    case Opcode::VExp:
    case Opcode::VLog:
    case Opcode::VRsqrt:
    case Opcode::VSqrt:
    case Opcode::VRecip:
    case Opcode::VDivF:
    case Opcode::VTanh:
    case Opcode::VLogistic:
    case Opcode::VSin:
    case Opcode::VCos:
    case Opcode::VPow: execEup(op); return true;

    default: break;
  }
  switch (op.desc->semClass) {
    case isa::SemClass::CrossLane:
    case isa::SemClass::Transpose: return execXlu(op);
    case isa::SemClass::MxuWeights:
    case isa::SemClass::MxuMatmul:
    case isa::SemClass::MxuPop: return execMxu(op);
    case isa::SemClass::Dma: return failf("internal: DMA ops are issued by the simulator loop");
    default: break;
  }
  if (const ByteFormat* bf = byteFormat(op.opcode)) {
    switch (op.desc->semClass) {
      case isa::SemClass::VectorLoad: return execLoad(op);
      case isa::SemClass::VectorStore: return execStore(op);
      default: {
        uint32_t* d = vregs_[op.d].w;
        const uint32_t* a = vregs_[op.a.reg].w;
        for (int i = 0; i < kVregWords; ++i) d[i] = bf->decode[encodeByteFormat(*bf, a[i]) & 0xFFu];
        return true;
      }
    }
  }
  if (isPairOp(op.opcode)) return execPair(op);
  return failf(fmt::format("illegal instruction '{}' (no semantics in the simulator)", op.desc->mnemonic));
}

void Machine::copyRegisters(const std::vector<StagedCopy>& copies) {
  for (const StagedCopy& c : copies) {
    switch (c.kind) {
      case RegKind::S: sregs_[c.to] = sregs_[c.from]; break;
      case RegKind::V: vregs_[c.to] = vregs_[c.from]; break;
      case RegKind::M: vmasks_[c.to] = vmasks_[c.from]; break;
    }
  }
}

bool Machine::dmaRange(const DecodedOp& op, const MemRef& ref, const isa::DmaDescriptor& d, bool isDst, Memory*& mem,
                       int64_t& offset) {
  offset = ref.offset + (ref.base >= 0 ? static_cast<int64_t>(sregs_[ref.base]) : 0);
  std::string name;
  if (ref.space == isa::MemSpace::Hbm) {
    mem = &hbm_[ref.buffer];
    name = fmt::format("HBM buffer '{}'", program_.buffers[ref.buffer].name);
  } else {
    mem = ref.space == isa::MemSpace::Vmem ? &vmem_ : &smem_;
    name = where(ref.space);
  }
  // Lowest and highest byte the strided pattern touches.
  int64_t lo = offset, hi = offset + d.chunkBytes;
  for (const isa::DmaDim& dim : d.dims) {
    int64_t stride = isDst ? dim.dstStride : dim.srcStride;
    int64_t span = stride * static_cast<int64_t>(dim.count - 1);
    if (span < 0) lo += span;
    else hi += span;
  }
  if (lo < 0 || static_cast<uint64_t>(hi) > mem->size())
    return failf(fmt::format("{}: {} range [{}, {}) (descriptor '{}') is outside {} ({} bytes)", op.desc->mnemonic,
                             isDst ? "destination" : "source", lo, hi, d.name, name, mem->size()));
  if (mem == &vmem_ && !touchVmem(static_cast<uint64_t>(hi))) return failf(hostMemoryMessage());
  return true;
}

bool Machine::prepareDma(const DecodedOp& op, DmaTransfer& t) {
  const isa::DmaDescriptor& d = program_.dmaDescriptors[op.dmaDesc];
  t.bundle = op.bundle;
  t.opcode = op.opcode;
  t.desc = &d;
  if (op.opcode == Opcode::DmaRemote || op.opcode == Opcode::DmaRemoteV) {
    int32_t chip = s(srcScalar(op.a));
    if (chip < 0 || chip >= chips_)
      return failf(chips_ == 1 ? fmt::format("{} to chip {}, but the simulation runs 1 chip (chip 0)",
                                             op.desc->mnemonic, chip)
                               : fmt::format("{} to chip {}, but the simulation runs {} chips (0 to {})",
                                             op.desc->mnemonic, chip, chips_, chips_ - 1));
    t.remoteChip = chip;
    t.dstSpace = op.mem.space;
    t.dstBuffer = op.mem.buffer;
  }
  if (!dmaRange(op, op.mem, d, true, t.dst, t.dstOffset)) return false;
  if (!dmaRange(op, op.mem2, d, false, t.src, t.srcOffset)) return false;
  t.sem = semIndex(op, op.sem);
  if (t.sem < 0) return false;
  if (op.sem2.present) {
    t.sem2 = semIndex(op, op.sem2);
    if (t.sem2 < 0) return false;
  }
  // Byte count without overflow (a hostile descriptor may multiply up).
  unsigned __int128 total = d.chunkBytes;
  for (const isa::DmaDim& dim : d.dims) total *= dim.count;
  if (total > (static_cast<unsigned __int128>(1) << 48))
    return failf(fmt::format("{}: descriptor '{}' moves more than 2^48 bytes", op.desc->mnemonic, d.name));
  t.bytes = static_cast<uint64_t>(total);
  t.hbmRead = op.mem2.space == isa::MemSpace::Hbm ? t.bytes : 0;
  t.hbmWritten = op.mem.space == isa::MemSpace::Hbm ? t.bytes : 0;
  return true;
}

Memory* Machine::memory(isa::MemSpace space, uint32_t buffer) {
  if (space == isa::MemSpace::Hbm) return buffer < hbm_.size() ? &hbm_[buffer] : nullptr;
  return space == isa::MemSpace::Vmem ? &vmem_ : &smem_;
}

namespace {

// Calls fn(srcOffset, dstOffset) for every chunk of `t` in descriptor order
// until it returns false.
template <class Fn>
bool forEachChunk(const DmaTransfer& t, Fn fn) {
  const isa::DmaDescriptor& d = *t.desc;
  size_t nd = d.dims.size();
  uint64_t chunks = 1;
  for (const isa::DmaDim& dim : d.dims) chunks *= dim.count;
  std::vector<uint32_t> idx(nd, 0);
  int64_t so = t.srcOffset, dof = t.dstOffset;
  for (uint64_t c = 0; c < chunks; ++c) {
    if (!fn(static_cast<uint64_t>(so), static_cast<uint64_t>(dof))) return false;
    for (size_t k = nd; k-- > 0;) {  // odometer, innermost dimension last
      if (++idx[k] < d.dims[k].count) {
        so += d.dims[k].srcStride;
        dof += d.dims[k].dstStride;
        break;
      }
      so -= d.dims[k].srcStride * static_cast<int64_t>(d.dims[k].count - 1);
      dof -= d.dims[k].dstStride * static_cast<int64_t>(d.dims[k].count - 1);
      idx[k] = 0;
    }
  }
  return true;
}

}  // namespace

bool Machine::completeDma(const DmaTransfer& t) {
  const uint64_t chunk = t.desc->chunkBytes;
  if (!forEachChunk(t, [&](uint64_t so, uint64_t dof) { return Memory::copy(*t.dst, dof, *t.src, so, chunk); }))
    return failf(hostMemoryMessage());
  if (t.sem >= 0) sems_[t.sem] += 1;
  if (t.sem2 >= 0) sems_[t.sem2] += 1;
  return true;
}

void Machine::gatherDma(const DmaTransfer& t, std::string& bytes) const {
  const uint64_t chunk = t.desc->chunkBytes;
  bytes.resize(t.bytes);
  uint64_t at = 0;
  forEachChunk(t, [&](uint64_t so, uint64_t) {
    t.src->read(so, bytes.data() + at, chunk);
    at += chunk;
    return true;
  });
}

bool Machine::scatterDma(const DmaTransfer& t, std::string_view bytes) {
  const uint64_t chunk = t.desc->chunkBytes;
  if (bytes.size() != t.bytes) return failf(fmt::format("a remote DMA delivered {} bytes, not {}", bytes.size(), t.bytes));
  uint64_t at = 0;
  bool ok = forEachChunk(t, [&](uint64_t, uint64_t dof) {
    bool written = t.dst->write(dof, bytes.data() + at, chunk);
    at += chunk;
    return written;
  });
  return ok ? true : failf(hostMemoryMessage());
}

Machine::~Machine() {
  if (budget_) budget_->give(vmemCharged_ + chargedSmem_);
}

}  // namespace tpu::sim
