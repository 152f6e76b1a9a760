// The adapter tpu-run calls for machine programs (.tpu binaries and .llo
// text): load the program and its target, describe the entry's arguments
// and results (so the runner can read/generate inputs and write outputs),
// run it, and render statistics and the trace.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "sim/sim.h"
#include "support/diagnostics.h"
#include "support/source.h"
#include "target/target.h"

namespace tpu::sim {

// True for inputs the simulator runs: a .tpu binary (by magic), LLO text (by
// its first directive), or other text in a file named *.llo.
bool isMachineProgram(std::string_view path, std::string_view contents);

struct LoadedProgram {
  isa::Program program;
  target::TargetDesc target;
  std::vector<SourceLocation> bundleLocations;  // empty unless the front end provides them
};

// Decodes a .tpu (by magic) or assembles .llo text. The target is
// `targetOverride` when non-empty (a built-in name or a JSON path; a program
// made for another target is rejected), else the one recorded in the
// program (its JSON, or its built-in name). `file` must outlive the result's
// bundleLocations.
std::optional<LoadedProgram> loadProgram(const SourceFile& file, const std::string& targetOverride,
                                         DiagnosticEngine& diags);

// An entry argument or result: an HBM buffer of the program.
struct TensorSpec {
  std::string name;
  isa::DType dtype = isa::DType::F32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};
struct EntrySignature {
  std::string entry;
  std::vector<TensorSpec> args, results;
};
// `entry` empty: the first entry. Reports an error if there is none.
std::optional<EntrySignature> entrySignature(const isa::Program& program, const std::string& entry,
                                             DiagnosticEngine& diags);

// What tpu-run's flags ask for.
struct RunRequest {
  std::string entry;             // --entry (empty: first)
  uint64_t maxCycles = SimOptions{}.maxCycles;  // --max-cycles=N
  std::string stats;             // --stats: "" (none), "text" or "json"
  bool trace = false;            // --trace=FILE given
  bool profile = false;          // SimOptions::profile (--profile, --report)
  std::vector<uint32_t> bundleRegion;  // SimOptions::bundleRegion
  // Pods: the chips to run (every chip gets the same inputs; results are
  // chip 0's) and --topology ("" = the target's most square slice).
  int chips = 1;
  std::string topology;
  // Pods: each chip's own inputs (a partitioned module's shards); empty:
  // every chip reads `inputs`.
  std::vector<std::vector<std::string_view>> chipInputs;
  uint64_t hostMemoryLimit = 0;  // --host-memory (0: MemAvailable), SimOptions::hostMemoryLimit
  Transport* transport = nullptr;  // under mpirun (SimOptions::transport)
  std::function<void(size_t)> releaseInput;  // SimOptions::releaseInput
};
struct RunOutput {
  std::vector<std::string> results;  // bytes per entry result
  std::string statsText;             // rendered per RunRequest::stats ("" if none)
  std::string traceJson;             // when RunRequest::trace
  SimReport report;                                   // chip 0's
  ExecProfile profile;                                // when RunRequest::profile (chip 0's)
  std::vector<std::vector<std::string>> chipResults;  // pods: every chip's results
  // mpirun: this process is not rank 0; rank 0 has the results and
  // statistics and writes them, this one writes nothing.
  bool secondaryRank = false;
  // Pods: every chip's report, profile and trace, the links and their
  // transfers, for tpu-run's per-chip profile (each chip's results are in
  // chipResults instead).
  std::optional<PodResult> pod;
};
// "4096", "512M", "8G", "1.5GiB", "64KiB" (K/M/G/T are powers of 1024, with
// or without "iB"/"B") in bytes; nullopt if malformed, zero or past 2^63.
std::optional<uint64_t> parseByteSize(std::string_view text);

std::optional<RunOutput> runLoadedProgram(const LoadedProgram& loaded, const std::vector<std::string>& inputs,
                                          const RunRequest& request, DiagnosticEngine& diags);
// The same over views of the inputs (read straight into the simulated HBM).
std::optional<RunOutput> runLoadedProgramViews(const LoadedProgram& loaded,
                                               const std::vector<std::string_view>& inputs, const RunRequest& request,
                                               DiagnosticEngine& diags);

}  // namespace tpu::sim
