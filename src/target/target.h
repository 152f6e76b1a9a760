// Chip descriptions ("targets"): every number the compiler, assembler and
// simulator need about a TPU-like chip, loaded from JSON (a built-in name such
// as "v4"/"v5e" or a user file), validated, plus the roofline formulas.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu::target {

// Issue-slot classes of a VLIW bundle. The ISA table maps every instruction
// to one of these; the target says how many of each a bundle may hold.
enum class SlotClass : uint8_t { Scalar, Ctrl, VLoad, VStore, VAlu, Eup, Xlu, Mxu, Dma, Misc, None };
constexpr size_t kNumSlotClasses = 10;  // None (nop) takes no slot
std::string_view slotClassName(SlotClass slot);  // JSON key: "scalar", "vld", ...

// Latency classes: cycles from issue until a result can be read.
enum class LatencyClass : uint8_t {
  ScalarAlu,
  ScalarMul,
  SmemLoad,
  Branch,
  VectorLoad,
  VectorStore,
  VectorAlu,
  VectorCvt,
  Eup,
  XluReduce,
  XluPermute,
  XluTranspose,
  MxuWeightPush,
  MxuMatmul,
  MxuPop,
  DmaIssue,
  Sync,
};
constexpr size_t kNumLatencyClasses = 17;
std::string_view latencyClassName(LatencyClass cls);  // JSON key: "scalar_alu", ...

struct MxuDesc {
  int count = 0;  // per core
  int rows = 0;
  int cols = 0;
  bool int8 = false;
  int int8Rate = 1;              // int8 ops per bf16 op at the same time
  int matmulIntervalCycles = 0;  // cycles one MXU is busy per [8,K] x [K,N] push
  int resultFifoDepth = 0;
  double publishedPeakBf16 = 0;  // per chip, 0 if not given
  double publishedPeakInt8 = 0;
};

struct MemoryDesc {
  uint64_t hbmBytes = 0;  // per chip
  double hbmBytesPerSecond = 0;
  uint64_t vmemBytes = 0;  // per core
  uint64_t smemBytes = 0;  // per core
  uint64_t cmemBytes = 0;  // per chip
  uint64_t vmemBytesPerCycle = 0;
};

struct RegisterDesc {
  int sregs = 0;
  int vregs = 0;
  int vmasks = 0;
  int sublanes = 0;
  int lanes = 0;
  int laneBits = 0;
  int semaphores = 0;
  uint32_t vregBytes() const { return static_cast<uint32_t>(sublanes) * lanes * laneBits / 8; }
};

struct DmaDesc {
  int engines = 0;
  int latencyCycles = 0;
  int maxOutstanding = 0;
  int descriptorDims = 0;  // strided dimensions a DMA descriptor may have
};

struct IciDesc {
  int links = 0;
  double bytesPerSecondPerLink = 0;  // one direction
  double hopLatencyNs = 0;
  std::string topology;         // "2d-torus" or "3d-torus"
  std::vector<int> maxShape;    // largest slice, chips per axis ("max_shape"); empty: no ICI
  // An axis whose length is a multiple of this wraps around (v5e: 16, only
  // full rows/columns of a 16x16 pod; v4: 4, whole cubes joined by the OCS);
  // longer axes must be whole multiples of it. 0: no axis wraps.
  int wrapMultiple = 0;
  int axes() const { return static_cast<int>(maxShape.size()); }
};

struct TargetDesc {
  std::string name;
  std::string description;
  std::string json;  // the source text it was loaded from (kept for .tpu files)
  int coresPerChip = 0;
  double clockHz = 0;
  MxuDesc mxu;
  MemoryDesc memory;
  RegisterDesc registers;
  std::array<int, kNumSlotClasses> slots{};
  std::array<int, kNumLatencyClasses> latencies{};
  DmaDesc dma;
  IciDesc ici;

  int slotCount(SlotClass slot) const {
    return slot == SlotClass::None ? 0 : slots[static_cast<size_t>(slot)];
  }
  int latency(LatencyClass cls) const { return latencies[static_cast<size_t>(cls)]; }
  int totalSlots() const;
};

// Loads a built-in target by name ("v4", "v5e") or, if the argument names an
// existing file or ends in ".json", a user JSON file. Reports errors (unknown
// name, unreadable file, bad JSON, missing fields, wrong types, non-positive
// sizes) and returns nullopt.
std::optional<TargetDesc> loadTarget(std::string_view nameOrPath, DiagnosticEngine& diags);
// Parses and validates JSON text; `file` gives diagnostics their location.
std::optional<TargetDesc> parseTarget(const SourceFile& file, DiagnosticEngine& diags);
std::vector<std::string> builtinTargetNames();

// Largest total slot count a bundle may have (the .tpu bundle width limit).
constexpr int kMaxBundleSlots = 32;

// --- Roofline (ROOFLINE.md section 1); all figures per chip. ---
enum class MathKind : uint8_t { Bf16, Int8 };

// MXUs x rows x cols x 2 x clock x cores (x int8Rate for int8).
double peakFlops(const TargetDesc& t, MathKind kind = MathKind::Bf16);
double peakFlopsPerCore(const TargetDesc& t, MathKind kind = MathKind::Bf16);
double hbmBytesPerSecond(const TargetDesc& t);
// FLOPs per HBM byte above which a kernel is compute-bound.
double ridgePoint(const TargetDesc& t, MathKind kind = MathKind::Bf16);

struct RooflineBound {
  double computeSeconds = 0;
  double memorySeconds = 0;
  double seconds = 0;  // max of the two: the lower bound with perfect overlap
  bool computeBound = false;
  double intensity = 0;  // flops / bytes
};
RooflineBound rooflineBound(const TargetDesc& t, double flops, double bytes,
                            MathKind kind = MathKind::Bf16);

// The kernel estimate of llo-gen's --stats (`estimated_cycles`), which
// hlo-fuse's cost model uses too, so both tools price a kernel alike: the
// roofline time of its flops and HBM bytes in core cycles (x cores: the
// figure is per chip), plus one DMA latency per round trip the kernel waits
// for (one for a streaming kernel; more when it runs sections in turn).
double kernelCycles(const TargetDesc& t, double flops, double hbmBytes, double dmaRoundTrips = 1);

}  // namespace tpu::target
