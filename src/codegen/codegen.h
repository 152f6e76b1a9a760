// llo-gen: lowering of a verified HLO module to LLO assembly text for one
// TensorCore of a target chip, and (through the assembler) to an
// isa::Program. See man/llo-gen.1 and src/codegen/README.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hlo/module.h"
#include "isa/program.h"
#include "llo/scheduler.h"
#include "support/diagnostics.h"
#include "target/target.h"

namespace tpu::codegen {

// How f32 x f32 dots use the bf16 MXU: passes of bf16 products, as TPUs do.
enum class F32DotPrecision : uint8_t {
  FromConfig,  // follow each dot's precision_config (DEFAULT 1, HIGH 3, HIGHEST 6)
  Default,     // one bf16 pass
  High,        // three passes (bf16x3)
  Highest,     // six passes (bf16x6)
};

struct CodegenOptions {
  F32DotPrecision f32DotPrecision = F32DotPrecision::FromConfig;
  // Fraction of VMEM a kernel's working set may use (the rest is slack).
  double vmemFraction = 0.5;
  // Bytes of the temporaries' heap that kernels address: their byte offsets
  // are compared signed, so 2 GiB. A kernel scratch that would end past it
  // gets an HBM buffer of its own, addressed unsigned up to 4 GiB (tests
  // shrink this to take that path at small sizes).
  uint64_t heapReachBytes = uint64_t{1} << 31;
  // The `.target` line: a built-in name or a JSON path ("" = none).
  std::string targetSpec;
  // Entry point name in the LLO program.
  std::string entryName = "main";
  // List: the text comes out as scheduled bundles `{ op ; op }` (llo-asm keeps
  // them as they are). None: one op per line, bundled greedily by llo-asm.
  llo::ScheduleMode schedule = llo::ScheduleMode::List;
  // Pods (kernels/collectives.cpp): the chips the program runs on, replicas x
  // partitions (0 = the module's replica_count / num_partitions, raised to
  // what its collectives name, as the interpreter does), and the slice
  // shape ("" = the target's most square one), which orders the rings.
  int64_t replicas = 0;
  int64_t partitions = 0;
  std::string topology;
  // All-reduce over every chip of a slice with two or more axes longer
  // than 1: Axes runs rings along each torus axis (reduce-scatter +
  // all-gather per axis, both axes at once), Snake one ring through every
  // chip; Auto takes the axes when every long axis has 4 chips or more
  // (pod_bench: 1.38x faster on 4x4, 0.65x on 2x4, whose axis of 2 gets one
  // link for both directions).
  enum class AllReduceRings { Auto, Snake, Axes };
  AllReduceRings allReduceRings = AllReduceRings::Auto;
  // Convolutions of one group with channels-last windows run as an implicit
  // GEMM (kernels/conv_implicit.cpp); false: the im2col path (tests, benches).
  bool implicitConv = true;
  // Entry arguments and results in the physical form of the entry layout
  // (passes/layout/physical_layout.h), relaid by copies at the edges
  // (llo-gen / tpu-run --physical-edges); false: dense row-major whatever
  // the layouts, as a host transfer that relays them would hand them over.
  bool physicalEdges = false;
};

// Replicas x partitions a program compiled with these options runs on:
// the options' counts, else the module's, raised to what its collectives'
// replica groups and permute pairs name (the interpreter's rule).
// Programs compiled for more than one chip hold this u32[2] constant
// buffer, {replicas, partitions}: tpu-run's default chip count for them.
inline constexpr std::string_view kPodDevicesBuffer = "pod_devices";
std::pair<int64_t, int64_t> podDevices(const hlo::Module& module, int64_t replicas, int64_t partitions);

// Per-kernel figures for --stats.
struct KernelStats {
  std::string name;        // the kernel label
  std::string hlo;         // the HLO instruction(s) it comes from
  std::string opName;      // their metadata op_name (the framework op), if any
  std::string kind;        // "elementwise", "matmul", "copy", "reduce", ...
  double flops = 0;
  uint64_t hbmBytes = 0;   // bytes read and written in HBM
  uint64_t vmemBytes = 0;  // VMEM working set
  double estimatedCycles = 0;  // roofline estimate on the target
  std::string remark;          // a named decision, e.g. why a temporary in HBM (else empty)
};

struct CodegenStats {
  std::vector<KernelStats> kernels;
  uint64_t heapBytes = 0;       // temporaries (liveness-shared)
  uint64_t argumentBytes = 0;
  uint64_t resultBytes = 0;
  uint64_t constantBytes = 0;
  uint64_t peakHbmBytes = 0;    // arguments + results + constants + heap + kernels' own scratch buffers
  uint64_t unsharedBytes = 0;   // what the temporaries would take without reuse
  uint64_t aliasedBytes = 0;    // results stored in donated arguments (input_output_alias)
  // Entry arguments and results stored in their physical layouts (tiles,
  // padding, minor_to_major; passes/layout/physical_layout.h): how many,
  // the padding bytes their tiles add (included in the byte counts above),
  // and the values relaid at the edge (each a relayout copy kernel or more).
  int64_t physicalArguments = 0, physicalResults = 0;
  uint64_t paddingBytes = 0;
  std::vector<std::string> relayouts;
};

struct EmittedCode;  // codegen/emitter.h

struct CodegenResult {
  // Assembly text (what llo-asm reads). From lowerModule with a list
  // schedule: the directives only, up to the `.entry` line; the code is in
  // `code`, in memory, until generateLlo schedules and prints it.
  std::string llo;
  std::shared_ptr<EmittedCode> code;
  CodegenStats stats;
  llo::ScheduleStats schedule;  // zero when not scheduled
};

// Lowers the module's entry computation. Entry arguments are the array
// leaves of the parameters (tuples flattened in order), results the array
// leaves of the root. Errors (unsupported opcode or type, program too large
// for HBM...) are reported at the offending instruction.
std::optional<CodegenResult> generateLlo(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags);

// generateLlo, then assembles the text in memory (for `tpu-run model.hlo`).
// `stats`, when given, receives the per-kernel figures (tpu-run --profile).
std::optional<isa::Program> compileModule(const hlo::Module& module, const target::TargetDesc& target,
                                          const CodegenOptions& options, DiagnosticEngine& diags,
                                          CodegenStats* stats = nullptr);

// The run-time state of the HLO `rng` stream. A program with rng (or
// rng-get-and-update-state) instructions takes one more entry argument after
// the parameters' leaves: the HBM buffer `rng_state`, u32[4] holding the
// u64 words {key, counter}, which the program reads and advances in place.
// The caller fills it with initialRngState(seed) so the program draws the
// same numbers as the interpreter run with that seed (one device: index 0).
inline constexpr std::string_view kRngStateBuffer = "rng_state";
std::string initialRngState(uint64_t seed);
// Whether `entry` of `program` takes the rng_state argument (its last one).
bool takesRngState(const isa::Program& program, std::string_view entry);

std::string renderStatsJson(const CodegenStats& stats);
std::string renderStatsText(const CodegenStats& stats);
// The physical-layout line of renderStatsText (tpu-run --stats adds it too).
std::string renderLayoutStats(const CodegenStats& stats);

}  // namespace tpu::codegen
