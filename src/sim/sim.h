// The machine simulator: runs an isa::Program on one TensorCore of a target
// chip. Two parts, kept apart in code (see src/sim/README.md):
//   * functional (machine.h): what the program computes, exactly;
//   * timing (timing.h): how many cycles it takes (issue slots, latencies,
//     scoreboard, MXU occupancy, DMA engines sharing HBM bandwidth).
// Faults (bounds, alignment, semaphores, deadlocks, --max-cycles) stop the
// run with an error naming the bundle, its label and the address.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "target/topology.h"

namespace tpu::sim {

class Transport;  // sim/transport.h

struct SimOptions {
  // Entry to run; empty: the program's first entry.
  std::string entry;
  // Stop with a fault once the simulated clock passes this many cycles.
  uint64_t maxCycles = 10'000'000'000ull;
  // Record a Chrome/Perfetto trace (SimResult::traceJson).
  bool trace = false;
  // Events kept in the trace; later ones are counted but dropped.
  size_t traceEventLimit = 1'000'000;
  // Optional source position of each bundle (e.g. from the .llo assembler);
  // faults then point at the source line. Indexed by bundle; may be shorter.
  std::vector<SourceLocation> bundleLocations;
  // Host threads for MXU arithmetic (0: choose; 1: none). Results do not
  // depend on it.
  int hostThreads = 0;
  // Per-bundle counters, kernel spans and DMA records for tpu-run --profile
  // (SimResult::profile). `bundleRegion[b]` names the region (kernel) bundle b
  // belongs to; spans are recorded when it is not empty.
  bool profile = false;
  std::vector<uint32_t> bundleRegion;
  // Host memory the simulated memories of all chips may take (HBM pages as
  // first written, VMEM up to its highest touched byte); past it the run
  // stops with an error instead of meeting the kernel's OOM killer.
  // 0: MemAvailable from /proc/meminfo at the start of the run.
  uint64_t hostMemoryLimit = 0;
  // Pods under mpirun: the chips are spread over the transport's ranks
  // (contiguous blocks, chip c on rank c x ranks / chips); results and
  // cycle counts are those of the one-process run. Null: one process.
  Transport* transport = nullptr;
};

// MemAvailable from /proc/meminfo in bytes (0 if unknown).
uint64_t availableHostMemory();

// Why issue was delayed (stall cycles are attributed to the longest wait).
enum class StallReason : uint8_t {
  Operand,     // a source register was not ready yet (scoreboard)
  Unit,        // the unit (MXU pipe, ...) was still busy
  MxuResult,   // mxu.pop waited for the result FIFO
  Transpose,   // vxpose.pop waited for the tile
  Semaphore,   // sem.wait waited for a DMA or signal
  DmaQueue,    // too many DMAs outstanding
  Sync,        // sync / halt waited for everything to finish
};
constexpr size_t kNumStallReasons = 7;
std::string_view stallReasonName(StallReason reason);

struct SimReport {
  std::string targetName;
  double clockHz = 0;
  int mxuCount = 0;
  uint64_t cycles = 0;
  double seconds = 0;
  uint64_t bundles = 0;  // bundles issued (dynamic count)
  uint64_t ops = 0;      // ops issued
  std::array<uint64_t, target::kNumSlotClasses> opsPerSlot{};
  std::array<uint64_t, kNumStallReasons> stallCycles{};

  // Work counted by the simulator.
  uint64_t mxuPushes = 0;        // mxu.matmul ops
  uint64_t mxuBusyCycles = 0;    // sum over MXUs of cycles a pipe was busy
  double flops = 0;              // MXU bf16 FLOPs (2 per multiply-add)
  double intOps = 0;             // MXU int8 ops
  uint64_t vpuOps = 0;           // vector ALU / cvt ops (each 8x128 elements)
  uint64_t dmaCount = 0;
  uint64_t dmaBytes = 0;         // bytes moved by DMAs
  uint64_t hbmBytesRead = 0;
  uint64_t hbmBytesWritten = 0;
  uint64_t dmaEngineBusyCycles = 0;  // sum over engines of cycles holding a DMA

  // Derived figures (filled by simulate()).
  double achievedFlops = 0;      // per second, bf16 + int8
  double achievedHbmBytesPerSecond = 0;
  double mxuUtilization = 0;     // MXU busy cycles / (cycles x MXUs)
  double vpuUtilization = 0;     // vector ALU slot use / (cycles x valu slots)
  double hbmUtilization = 0;     // achieved HBM bytes/s / peak
  double dmaEngineUtilization = 0;
  // Peaks of one TensorCore (the simulated core) and the chip's HBM.
  double peakFlops = 0;
  double peakIntOps = 0;
  double peakHbmBytesPerSecond = 0;
  target::RooflineBound roofline;  // flops + int ops vs HBM bytes on these peaks
  double rooflineFraction = 0;     // roofline.seconds / seconds (1 = at the bound)
  uint64_t traceEventsDropped = 0;
};

// Profile of a run (SimOptions::profile). Every cycle is attributed to one
// bundle: a bundle issued at cycle `at` owns (previous issue, at], the halt
// bundle also the drain after it, so the bundles' cycles sum to the run's.
struct BundleProfile {
  uint64_t issues = 0;
  uint64_t cycles = 0;
  std::array<uint64_t, kNumStallReasons> stallCycles{};
  uint64_t mxuPushes = 0;
  double mxuFlops = 0;   // padded MXU work (2 x 8 x 128 x 128 per push), bf16 + int8
  uint64_t hbmBytes = 0;  // HBM bytes read + written by the DMAs it started
  uint64_t dmaBytes = 0;
  uint64_t vmemHigh = 0;  // highest VMEM byte its DMAs touched, + 1
};
struct RegionSpan {
  uint32_t region = 0;  // SimOptions::bundleRegion value
  uint64_t start = 0, end = 0;  // cycles [start, end)
};
struct DmaRecord {
  uint32_t bundle = 0;
  int engine = 0;
  double start = 0, end = 0;  // cycles
  uint64_t hbmBytes = 0, bytes = 0;
};
struct ExecProfile {
  std::vector<BundleProfile> bundles;  // indexed by bundle
  std::vector<RegionSpan> spans;       // in time order, consecutive bundles of one region merged
  std::vector<DmaRecord> dmas;         // in completion order
  uint64_t recordsDropped = 0;         // spans or DMA records past the limit
};

struct SimResult {
  // Contents of the entry's result buffers, in Entry::results order.
  std::vector<std::string> results;
  SimReport report;
  std::string traceJson;  // when SimOptions::trace
  ExecProfile profile;    // when SimOptions::profile
};

// Runs `entry` of `program`. `inputs` holds the bytes of each entry argument
// (Entry::args order, exactly Buffer::sizeBytes() each). Verifies the program
// against the target first. Returns nullopt after reporting an error (bad
// program, bad inputs, or a fault while running).
std::optional<SimResult> simulate(const isa::Program& program, const target::TargetDesc& target,
                                  const std::vector<std::string>& inputs, const SimOptions& options,
                                  DiagnosticEngine& diags);
// The same without copies of the inputs (they are read straight into the
// simulated HBM's pages; all-zero pages are never allocated).
std::optional<SimResult> simulateViews(const isa::Program& program, const target::TargetDesc& target,
                                       const std::vector<std::string_view>& inputs, const SimOptions& options,
                                  DiagnosticEngine& diags);

// A pod: one simulated chip per position of `topology`, all running the
// same program (SPMD; sid.chip tells them apart), joined by ICI links.
// Chips step one bundle at a time on one host thread, always the chip whose
// next bundle is earliest in simulated time (ties: the lower chip id), so
// results and cycle counts never depend on host timing. A remote DMA
// (dma.remote, dma.remote.v) crosses the links of its dimension-ordered
// route; each directed link carries one transfer at a time at the target's
// ici.bytes_per_second_per_link, so transfers that share a link queue, and
// every hop adds ici.hop_latency_ns.
struct IciLinkStats {
  int id = 0;        // the topology's link index
  std::string name;  // "chip 0 (0,0) +y -> chip 1 (0,1)"
  uint64_t bytes = 0;
  uint64_t transfers = 0;
  double busyCycles = 0;
};
struct ChipPodStats {
  uint64_t remoteDmas = 0;
  uint64_t iciBytesSent = 0;
  uint64_t waitCycles = 0;  // cycles stalled on semaphores and barrier.pod (exposed communication)
};
// One transfer's occupancy of one link (recorded when SimOptions::profile
// or SimOptions::trace): tpu-run's trace draws a track per link from these.
struct IciTransferRecord {
  int link = 0;               // IciLinkStats::id
  int srcChip = 0, dstChip = 0;
  double start = 0, end = 0;  // cycles the link carried it
  uint64_t bytes = 0;
};
struct PodResult {
  std::vector<SimResult> chips;
  std::vector<ChipPodStats> chipStats;
  std::vector<IciLinkStats> links;  // links that carried data, by link id
  uint64_t cycles = 0;              // the last chip's end
  uint64_t iciBytes = 0;
  std::string topology;             // "2x4 torus (wraparound: none)"
  // mpirun: this process is not rank 0, which holds every chip's results
  // and statistics (this one's are empty).
  bool secondaryRank = false;
  std::vector<IciTransferRecord> transfers;  // in send order, per link hop
  uint64_t transfersDropped = 0;             // past the record limit
};
// `inputs[c]`: chip c's entry arguments. Faults and deadlocks name the chip.
std::optional<PodResult> simulatePod(const isa::Program& program, const target::TargetDesc& target,
                                     const target::Topology& topology,
                                     const std::vector<std::vector<std::string>>& inputs, const SimOptions& options,
                                     DiagnosticEngine& diags);
std::optional<PodResult> simulatePodViews(const isa::Program& program, const target::TargetDesc& target,
                                          const target::Topology& topology,
                                          const std::vector<std::vector<std::string_view>>& inputs,
                                     const SimOptions& options, DiagnosticEngine& diags);
std::string renderPodText(const PodResult& pod, double clockHz);
std::string renderPodJson(const PodResult& pod, double clockHz);

// The report as text (several lines) or as one JSON object (`--stats=json`).
std::string renderReportText(const SimReport& report);
std::string renderReportJson(const SimReport& report);

}  // namespace tpu::sim
