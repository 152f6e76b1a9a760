// tpu-run's op profile: every simulated cycle attributed to the kernel that
// issued it and to the HLO instruction(s) the kernel comes from (a fusion and
// its members), with achieved FLOP/s and bytes/s, arithmetic intensity, the
// roofline bound and the stall causes of each op; grouped by kernel kind and
// by framework op_name metadata. Rendered as text, JSON, an HTML report and
// extra tracks of the Chrome/Perfetto trace. See docs/PROFILING.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/codegen.h"
#include "hlo/module.h"
#include "isa/program.h"
#include "sim/sim.h"
#include "support/diagnostics.h"

namespace tpu::profile {

// A kernel of a machine program: the code from its label (llo-gen's
// `k<N>_<hlo>`) to the next kernel label.
struct KernelInfo {
  std::string label;
  uint32_t firstBundle = 0;
  std::string kind;                  // llo-gen's kind ("matmul", "fusion-conv", ...), "" if unknown
  std::string hlo;                   // the HLO instruction it lowers
  std::string opName;                // its op_name metadata
  std::vector<std::string> members;  // a fusion's fused instructions
  std::optional<double> modelFlops;  // HLO cost analysis of `hlo` (XLA's conventions)
  uint64_t vmemBytes = 0;            // llo-gen's VMEM working set (0: unknown)
  uint64_t outputBytes = 0;          // bytes of the HLO value it defines (memory timeline)
};

struct KernelMap {
  std::vector<KernelInfo> kernels;     // region ids index this; the last one may be "(other)"
  std::vector<uint32_t> bundleRegion;  // bundle -> kernel index
};

// Kernels of `program` from its labels. `stats` (the in-memory compile), the
// program's kernel metadata (.kernel directives; the .tpu KERN section) and,
// for older .llo files, `lloText` (the // comment llo-gen writes above each
// kernel label) add the kind, HLO instruction and op_name the labels do not
// carry; `module` (the module that was lowered) adds fusion members and
// model FLOPs.
KernelMap mapKernels(const isa::Program& program, const codegen::CodegenStats* stats,
                     std::string_view lloText, const hlo::Module* module);

// A stall reason's name in profiles (the simulator's, a semaphore wait named dma-wait).
std::string stallName(size_t reason);

struct Stalls {
  std::array<uint64_t, sim::kNumStallReasons> cycles{};
};

// Figures of one op (kernel) or group of ops.
struct OpFigures {
  std::string key;  // op: the HLO instruction (or label); group: kind / op_name
  std::string label, hlo, opName, kind;
  std::vector<std::string> members;
  int64_t kernels = 0;  // kernels in the group
  uint64_t cycles = 0;
  uint64_t issues = 0;
  double seconds = 0;
  double share = 0;       // of the run's cycles
  double hwFlops = 0;     // padded MXU work the simulator executed
  double modelFlops = 0;  // HLO cost analysis (XLA's conventions)
  bool modelKnown = false;
  uint64_t hbmBytes = 0;  // HBM bytes moved by its DMAs
  Stalls stalls;
  // Derived (from hwFlops unless named model).
  double flopsPerSecond = 0, modelFlopsPerSecond = 0, bytesPerSecond = 0;
  double intensity = 0, modelIntensity = 0;  // FLOPs per HBM byte
  bool computeBound = false;
  double rooflineSeconds = 0, rooflineFraction = 0;            // from hwFlops
  double modelRooflineSeconds = 0, modelRooflineFraction = 0;  // from modelFlops
  uint64_t vmemBytes = 0;
};

struct MemoryPoint {
  double seconds = 0;
  uint64_t liveBytes = 0;
};
struct NamedBytes {
  std::string name;
  uint64_t bytes = 0;
};
struct MemoryTimeline {
  std::vector<MemoryPoint> points;  // step function: live bytes from each point on
  uint64_t staticBytes = 0;         // arguments, results, constants (live throughout)
  uint64_t peakBytes = 0;
  double peakSeconds = 0;
  std::vector<NamedBytes> peakBuffers;  // live at the peak, largest first
  bool temporariesFromHlo = false;      // false: temporaries as one heap block
};

struct ChipFigures {
  int chip = 0;
  uint64_t cycles = 0;
  double seconds = 0;
  double collectiveSeconds = 0;  // kernels of collective ops
  // Pods: cycles stalled on semaphores (remote and local DMAs) and
  // barrier.pod (the simulator's exposed communication), remote DMAs and
  // ICI bytes sent.
  uint64_t waitCycles = 0;
  double waitSeconds = 0;
  uint64_t remoteDmas = 0, iciBytesSent = 0;
  double hwFlops = 0;
  uint64_t hbmBytes = 0;
  Stalls stalls;
  std::vector<OpFigures> ops;  // pods: this chip's own op profile, largest first
};

// Pods: an ICI link that carried data.
struct LinkFigures {
  std::string name;
  uint64_t bytes = 0, transfers = 0;
  double busySeconds = 0, utilization = 0;  // of the pod's time
};

// A kernel's execution interval (for the trace and the report).
struct Span {
  uint32_t kernel = 0;
  double start = 0, end = 0;  // seconds
};

struct Profile {
  std::string target;
  std::string program;  // input name
  double clockHz = 0;
  double peakFlops = 0, peakBytesPerSecond = 0;  // one chip's
  uint64_t cycles = 0;                           // pods: the last chip's end
  double seconds = 0;
  // Cycles of all chips together: op shares are of this, and the pod's op
  // figures are per chip-second (against one chip's peaks).
  uint64_t chipCycles = 0;
  // Pods (podChips > 0): the topology, ICI traffic (bytes x hops) and links.
  int podChips = 0;
  std::string topology;
  uint64_t iciBytes = 0;
  std::vector<LinkFigures> links;
  // Honest counts: padded MXU work the chip did vs the model's FLOPs.
  double hwFlops = 0;
  double modelFlops = 0;
  bool modelKnown = false;
  uint64_t hbmBytes = 0;
  double hwUtilization = 0, modelUtilization = 0;  // achieved / peak FLOP/s
  double hwRooflineSeconds = 0, modelRooflineSeconds = 0;
  // The program's ideal bound: max(model FLOPs / peak, bytes of parameters +
  // constants + results / HBM bandwidth), from the module as given.
  bool idealKnown = false;
  double idealSeconds = 0, idealComputeSeconds = 0, idealMemorySeconds = 0;
  Stalls stalls;
  std::vector<OpFigures> ops;  // by cycles, largest first (pods: summed over chips)
  std::vector<OpFigures> byKind, byOpName;
  std::vector<ChipFigures> chips;
  MemoryTimeline memory;
  std::vector<KernelInfo> kernels;
  std::vector<Span> spans;
  uint64_t recordsDropped = 0;
};

struct ProfileInputs {
  const sim::SimReport* report = nullptr;
  const sim::ExecProfile* exec = nullptr;
  const isa::Program* program = nullptr;
  const KernelMap* kernels = nullptr;
  const hlo::Module* lowered = nullptr;   // the module llo-gen lowered (liveness), optional
  const hlo::Module* original = nullptr;  // the module as given (ideal bound), optional
  std::string name;
};
Profile buildProfile(const ProfileInputs& in);

// A pod's profile: every chip's op profile (ProfileInputs::report and exec
// are ignored; the pod's chips give them), the ops summed over chips, the
// per-chip summary (collective kernels, waits on other chips, remote DMAs)
// and the links. The memory timeline and kernel spans are chip 0's.
// `chips`, when given, receives each chip's own profile (for the trace).
Profile buildPodProfile(const ProfileInputs& in, const sim::PodResult& pod,
                        std::vector<Profile>* chips = nullptr);

// Fills the ideal bound from the module as given (hlo-parse --stats' figures).
void setIdealBound(Profile& p, const hlo::Module& original);

std::string renderText(const Profile& p, size_t top = 20);
std::string renderJson(const Profile& p);
std::string renderHtml(const Profile& p);

// Extra lines for --stats: model FLOPs beside the padded work, utilisation
// and roofline from each, and the ideal bound.
std::string renderStatsText(const Profile& p);
// The same as members of a JSON object ("model": {...}).
void addStatsJson(const Profile& p, std::string& statsJson);

// Adds kernel slices (named by HLO instruction, op_name in args), an HBM
// bandwidth counter, VMEM in use and HBM live bytes counters to a trace the
// simulator rendered.
std::string augmentTrace(const Profile& p, const sim::ExecProfile& exec, std::string traceJson);

// A pod's trace: one Perfetto process per chip (its simulator tracks plus
// the profile's, from `chips` of buildPodProfile) and one process of ICI
// links with a track per link that carried data.
std::string podTrace(const std::vector<Profile>& chips, const sim::PodResult& pod);

// `tpu-run --profile-diff A.json B.json`: per-op time differences between
// two --profile=json outputs. Returns nullopt after reporting an error.
std::optional<std::string> diffProfiles(const std::string& aName, const std::string& aText,
                                        const std::string& bName, const std::string& bText,
                                        DiagnosticEngine& diags);

}  // namespace tpu::profile
