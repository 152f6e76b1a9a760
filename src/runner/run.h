// tpu-run's drivers: one function per execution mode over the shared
// tensor I/O (tensor_io.h). The interpreter mode runs HLO on the reference
// interpreter; the simulator mode (compiled .tpu/.llo programs) plugs in
// beside it with the same RunOptions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hlo/literal.h"
#include "hlo/module.h"
#include "codegen/codegen.h"
#include "sim/run_program.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu::runner {

struct RunOptions {
  std::vector<std::string> inputs;    // "@file.npy" or inline ("2x3xf32=1,2,...")
  std::vector<std::string> outputs;   // "@file.npy" (or "file.npy"), "-" = print as text
  std::vector<std::string> expected;  // "@file.npy" or inline
  double atol = 1e-5;
  double rtol = 1e-5;
  std::optional<uint64_t> seed;  // fill parameters without --input
  int64_t replicas = 0;          // 0 = the module's
  int64_t partitions = 0;
  bool elidedConstantsAreErrors = false;
  bool forceBinaryToTerminal = false;  // -f: write .npy results even to a terminal
  int64_t maxSteps = 0;                // the interpreter's step limit (0 = none)
};

// What a run produced: text for stdout (results printed when no --output
// names them) and the process exit code.
struct RunReport {
  int exitCode = 0;
  std::string stdoutText;
  // --check's verdict line (text or JSON), for standard error: kept out of
  // the statistics so a --stats-file stays one JSON document.
  std::string checkVerdict;
  // --profile without --profile-file: the rendered op profile, for standard error.
  std::string profileText;
};

// Reads HLO text or .hlob (by magic number) from `source`.
std::unique_ptr<hlo::Module> loadModule(std::shared_ptr<SourceFile> source, DiagnosticEngine& diags);

// Builds the entry arguments from RunOptions (inputs in parameter order,
// then seeded random data for the rest when a seed is given).
std::optional<std::vector<hlo::Literal>> prepareArguments(const hlo::Module& module, const RunOptions& options,
                                                          DiagnosticEngine& diags);

// The same for explicit parameter shapes (programs that are not HLO).
std::optional<std::vector<hlo::Literal>> prepareArgumentsForShapes(const std::vector<hlo::Shape>& parameters,
                                                                   const RunOptions& options, DiagnosticEngine& diags);

// Writes/prints results and checks them against --expected-output.
RunReport deliverResults(const hlo::Literal& result, const RunOptions& options, DiagnosticEngine& diags);

// `tpu-run --interpret`: evaluate `module` with the reference interpreter.
RunReport runInterpreter(const hlo::Module& module, const RunOptions& options, DiagnosticEngine& diags);

// What the simulator mode adds to RunOptions.
struct SimulatorRequest {
  sim::RunRequest run;    // entry, max cycles, stats kind, trace wanted
  std::string traceFile;  // --trace=FILE ("" = none)
  std::string profile;      // --profile: "" (none), "text" or "json"
  std::string profileFile;  // --profile-file=FILE ("" = standard error)
  std::string reportFile;   // --report=FILE.html ("" = none)
  std::string inputName;    // the program's file name (named in profiles)
  std::string lloText;      // .llo input: its text (llo-gen's kernel comments)
  bool wantsProfile() const { return !profile.empty() || !reportFile.empty() || !traceFile.empty() || !run.stats.empty(); }
};

// `tpu-run PROGRAM.tpu|PROGRAM.llo`: run a machine program on the simulated
// chip. Statistics are appended to `statsText` (the tool decides where they go).
RunReport runSimulator(const sim::LoadedProgram& program, const RunOptions& options,
                       const SimulatorRequest& request, std::string& statsText, DiagnosticEngine& diags);

// What `tpu-run model.hlo` (compiled execution) adds.
struct CompiledRequest {
  SimulatorRequest simulator;
  codegen::F32DotPrecision f32DotPrecision = codegen::F32DotPrecision::FromConfig;
  bool check = false;  // also run the interpreter and compare
  // Run hlo-fuse's default pipeline before llo-gen (-O1, the default); -O0
  // compiles the module as given. --check always evaluates the module as
  // given, so it checks the optimizations too.
  bool optimize = true;
  // Arguments and results in the physical form of the module's entry
  // layout (llo-gen --physical-edges), converted from and to the logical
  // arrays at the edges.
  bool physicalEdges = false;
  // --check tolerances for every result; unset: one per result from the
  // error bounds of what it depends on (runner/check_tolerance.h), at least
  // 1e-5. Integers are always compared exactly.
  std::optional<double> checkAtol, checkRtol;
  // The `check:` verdict as a JSON object line (--diagnostics-format=json)
  // instead of text.
  bool jsonVerdict = false;
};

// Compiles `module` in memory (hlo-fuse's default pipeline unless
// `optimize` is off, then llo-gen's lowering, assembled), runs it on the
// simulator, and with `check` compares with the reference interpreter.
RunReport runCompiledModule(const hlo::Module& module, const target::TargetDesc& target, const RunOptions& options,
                            const CompiledRequest& request, std::string& statsText, DiagnosticEngine& diags);

}  // namespace tpu::runner
