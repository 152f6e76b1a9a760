// tpu-run: run a program on host tensors. `--interpret` evaluates HLO with
// the reference interpreter; compiled programs (the simulator) are another
// mode of the same tool. All logic lives in src/runner.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "profile/profile.h"
#include "runner/run.h"
#include "sim/transport.h"
#if TPU_RUN_WITH_MPI
#include "mpi_transport/mpi_transport.h"
#endif
#include "support/file_io.h"
#include "support/tool.h"
#include "target/target.h"

namespace {

#if !TPU_RUN_WITH_MPI
// Replaces this process with mpi/tpu-run-mpi beside this executable, with
// the same arguments and environment. Returns only on failure, saying why.
std::string handOverToMpiBuild(char** argv) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "the path of this executable is unknown, so tpu-run-mpi cannot be found";
  std::string path(self, static_cast<size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "mpi/tpu-run-mpi";
  if (access(path.c_str(), X_OK) != 0)
    return fmt::format("{} is missing: tpu-run-mpi, the MPI build of tpu-run, is built when CMake finds MPI "
                       "(Debian: libopenmpi-dev)",
                       path);
  execv(path.c_str(), argv);
  return fmt::format("cannot start {}: {}", path, std::strerror(errno));
}
#endif

// The interpreter's default step limit: far above what real models take
// (the most in the corpus, ext_gh_llama2_dp1_tp4_pp2, evaluates about 260,000
// instructions per device), and reached by a runaway loop in seconds (about
// 70 ns a step).
constexpr int64_t kDefaultMaxSteps = 100'000'000;

int printReport(tpu::Tool& tool, const tpu::runner::RunReport& report) {
  std::fwrite(report.profileText.data(), 1, report.profileText.size(), stderr);
  if (!report.stdoutText.empty() && !tpu::writeOutputFile("-", report.stdoutText, tool.diags()))
    return tpu::kExitFailure;
  return report.exitCode;
}

int runInterpretMode(tpu::Tool& tool, const tpu::runner::RunOptions& options) {
  using tpu::FileKind;
  std::unique_ptr<tpu::SourceFile> file = tool.readInputOfKind(
      {FileKind::HloText, FileKind::Hlob, FileKind::Empty}, "an HLO module (text or .hlob)",
      "--interpret evaluates HLO; run machine code without --interpret");
  if (!file) return tpu::kExitFailure;
  std::shared_ptr<tpu::SourceFile> source = std::move(file);
  std::unique_ptr<tpu::hlo::Module> module = tpu::runner::loadModule(source, tool.diags());
  if (!module) return tpu::kExitFailure;
  return printReport(tool, tpu::runner::runInterpreter(*module, options, tool.diags()));
}

// Machine programs (.tpu, .llo) run on the simulated chip; HLO modules are
// first compiled in memory with the default pipeline (as `lli` runs IR).
int runCompiledMode(tpu::Tool& tool, const tpu::runner::RunOptions& options,
                    const tpu::runner::CompiledRequest& request) {
  using tpu::FileKind;
  std::unique_ptr<tpu::SourceFile> file = tool.readInputOfKind(
      {FileKind::Tpu, FileKind::LloText, FileKind::HloText, FileKind::Hlob, FileKind::Empty},
      "a program (.tpu or .llo) or an HLO module (text or .hlob)");
  if (!file) return tpu::kExitFailure;
  tpu::runner::CompiledRequest req = request;
  req.simulator.run.stats = tool.options().stats;
  req.simulator.inputName = file->name();
  if (req.simulator.wantsProfile() && file->contents().find("\n.entry") != std::string::npos)
    req.simulator.lloText = std::string(file->contents());
  req.simulator.run.trace = !req.simulator.traceFile.empty();
  bool targetGiven = tool.cli().count("--target") > 0;
  std::string statsText;
  tpu::runner::RunReport report;
  if (tpu::sim::isMachineProgram(file->name(), file->contents())) {
    if (req.check) {
      tool.diags().error("--check compares compiled HLO with the interpreter; it needs an HLO input", file->name());
      return tpu::kExitUsage;
    }
    // The program records the chip it was built for; --target only when given.
    auto loaded = tpu::sim::loadProgram(*file, targetGiven ? tool.options().target : std::string(), tool.diags());
    if (!loaded) return tpu::kExitFailure;
    report = tpu::runner::runSimulator(*loaded, options, req.simulator, statsText, tool.diags());
  } else {
    std::shared_ptr<tpu::SourceFile> source = std::move(file);
    std::unique_ptr<tpu::hlo::Module> module = tpu::runner::loadModule(source, tool.diags());
    if (!module) return tpu::kExitFailure;
    auto target = tpu::target::loadTarget(tool.options().target, tool.diags());
    if (!target) return tpu::kExitFailure;
    report = tpu::runner::runCompiledModule(*module, *target, options, req, statsText, tool.diags());
  }
  if (!statsText.empty() && !tool.writeStats(statsText)) return tpu::kExitFailure;
  std::fwrite(report.checkVerdict.data(), 1, report.checkVerdict.size(), stderr);
  return printReport(tool, report);
}

// `--profile-diff A.json B.json`: per-op time differences of two profiles.
int runProfileDiff(tpu::Tool& tool, const std::vector<std::string>& files) {
  auto a = tpu::readInputFile(files[0], tool.diags());
  if (!a) return tpu::kExitFailure;
  auto b = tpu::readInputFile(files[1], tool.diags());
  if (!b) return tpu::kExitFailure;
  auto text = tpu::profile::diffProfiles(files[0], std::string(a->contents()), files[1], std::string(b->contents()),
                                         tool.diags());
  if (!text) return tpu::kExitFailure;
  return tpu::writeOutputFile("-", *text, tool.diags()) ? tpu::kExitSuccess : tpu::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  tpu::Tool tool({
      .name = "tpu-run",
      .summary =
          "Run a program on host tensors: a machine program (.tpu, .llo) or an HLO module (compiled in "
          "memory) on the simulated chip, or HLO on the reference interpreter (--interpret).",
      .examples =
          "  tpu-run model.hlo --seed=1 --check --stats          compile, simulate, compare with "
          "interpreter\n"
          "  tpu-run -O0 model.hlo --seed=1 --stats              compile without hlo-layout and hlo-fuse\n"
          "  tpu-run kernel.tpu --seed=1 --stats                 simulate; cycles, TFLOP/s, utilisation\n"
          "  tpu-run kernel.llo --seed=1 --output=@c.npy --trace=t.json   result as .npy, Perfetto trace\n"
          "  tpu-run model.hlo --seed=1 --profile --report=profile.html   op profile, HTML report\n"
          "  tpu-run model.hlo --seed=1 --profile=json --profile-file=a.json   op profile as JSON\n"
          "  tpu-run --profile-diff a.json b.json                  per-op time differences of two profiles\n"
          "  tpu-run --interpret model.hlo --seed=1                random inputs, print results\n"
          "  tpu-run --interpret add.hlo --input=2xf32=1,2 --input=@b.npy --output=@sum.npy\n"
          "  tpu-run --interpret m.hlo --input=@x.npy --expected-output=@y.npy --atol=1e-4\n"
          "  tpu-run --interpret allreduce.hlo --replicas=4 --seed=0 --output=-\n",
      .writesOutput = false,
      .forceFlag = true,
      .usesTarget = true,
  });
  tpu::runner::RunOptions options;
  tpu::runner::CompiledRequest compiled;
  std::string f32Precision = "config";
  double checkAtol = 0, checkRtol = 0;
  bool interpret = false;
  uint64_t seed = 0;
  std::string elided = "random";
  CLI::App& app = tool.cli();
  app.add_flag("--interpret", interpret, "Evaluate an HLO module (.hlo text or .hlob) with the reference interpreter");
  app.add_option("--input", options.inputs,
                 "A parameter value, in parameter order (repeat): @FILE.npy or inline like 2x3xf32=1,2,3,4,5,6")
      ->allow_extra_args(false);
  app.add_option("--output", options.outputs,
                 "Where to put each result, tuples flattened (repeat): @FILE.npy, or - to print it")
      ->allow_extra_args(false);
  app.add_option("--expected-output", options.expected,
                 "Expected value of each result (repeat): @FILE.npy or inline; exit 1 on a mismatch")
      ->allow_extra_args(false);
  app.add_option("--atol", options.atol, "Absolute tolerance for float comparisons")->capture_default_str();
  app.add_option("--rtol", options.rtol, "Relative tolerance for float comparisons")->capture_default_str();
  auto* seedOpt = app.add_option("--seed", seed, "Fill parameters without --input with random data from seed N");
  app.add_option("--replicas", options.replicas, "Simulated replicas (default: the module's replica_count)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--partitions", options.partitions, "Simulated partitions (default: the module's num_partitions)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--elided-constants", elided,
                 "Elided constants ({...}): random (fill with deterministic data, warn) or error")
      ->check(CLI::IsMember({"random", "error"}))
      ->capture_default_str();
  int optLevel = 1;
  app.add_option("-O", optLevel,
                 "Compiled HLO: optimization level: 1 (default) runs hlo-layout's layout assignment and hlo-fuse's "
                 "default pipeline before llo-gen, 0 "
                 "compiles the module as given")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_flag("--physical-edges", compiled.physicalEdges,
               "Compiled HLO: arguments and results in HBM in the physical form of the entry layout (tiles, padding), "
               "converted from and to the logical arrays at the edges");
  app.add_flag("--check", compiled.check,
               "Compiled HLO: also run the reference interpreter on the same inputs and compare the results");
  auto* checkAtolOpt = app.add_option("--check-atol", checkAtol,
                                      "--check absolute tolerance (default: per result, from the error bounds of what it depends on)");
  auto* checkRtolOpt = app.add_option("--check-rtol", checkRtol, "--check relative tolerance (default: = atol)");
  app.add_option("--f32-dot-precision", f32Precision,
                 "Compiled HLO: bf16 passes of f32 dots: config (precision_config), default (1), high (3), highest (6)")
      ->check(CLI::IsMember({"config", "default", "high", "highest"}))
      ->capture_default_str();
  app.add_option("--entry", compiled.simulator.run.entry, "Entry point of a machine program to run (default: the first)");
  app.add_option("--max-cycles", compiled.simulator.run.maxCycles,
                 "Stop a machine program with an error after N simulated cycles")
      ->capture_default_str();
  options.maxSteps = kDefaultMaxSteps;
  app.add_option(
         "--max-steps", options.maxSteps,
         "Stop the interpreter with an error naming the running while loop after N evaluated instructions "
         "(0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--topology", compiled.simulator.run.topology,
                 "Pods: the slice shape of the simulated chips, like 2x4 (v5e) or 2x2x2 (v4); default: the most square "
                 "slice of replicas x partitions chips");
  std::string hostMemory;
  app.add_option("--host-memory", hostMemory,
                 "Host memory the simulated chips may take (HBM pages touched, VMEM): like 8G or 512MiB; past it "
                 "the run stops with an error (default: MemAvailable at the start)")
      ->check([](const std::string& v) {
        return tpu::sim::parseByteSize(v) ? std::string() : "expected a size like 4096, 512M, 8G or 1.5GiB";
      });
  app.add_option("--trace", compiled.simulator.traceFile,
                 "Write a Chrome/Perfetto trace to FILE: kernels by HLO instruction, slots, MXUs, DMAs, counters");
  app.add_flag("--profile{text}", compiled.simulator.profile,
               "Print the op profile (time per HLO op, roofline, stalls): --profile (text) or --profile=json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--profile-file", compiled.simulator.profileFile,
                 "Write the op profile to FILE instead of stderr (implies --profile)");
  app.add_option("--report", compiled.simulator.reportFile,
                 "Write a self-contained HTML profile report (op table, roofline chart, HBM timeline) to FILE");
  std::vector<std::string> diffFiles;
  app.add_option("--profile-diff", diffFiles, "Compare two --profile=json files A B: per-op time differences")
      ->expected(2)
      ->allow_extra_args(false);
  return tool.run(argc, argv, [&](tpu::Tool& t) {
    if (seedOpt->count() > 0) options.seed = seed;
    if (!hostMemory.empty()) compiled.simulator.run.hostMemoryLimit = *tpu::sim::parseByteSize(hostMemory);
    options.forceBinaryToTerminal = t.options().force;
    compiled.jsonVerdict = t.diagnosticFormat() == tpu::DiagnosticFormat::Json || t.options().stats == "json";
    compiled.optimize = optLevel > 0;
    options.elidedConstantsAreErrors = elided == "error";
    if (checkAtolOpt->count()) compiled.checkAtol = checkAtol;
    if (checkRtolOpt->count()) compiled.checkRtol = checkRtol;
    using P = tpu::codegen::F32DotPrecision;
    compiled.f32DotPrecision = f32Precision == "default" ? P::Default
                               : f32Precision == "high"  ? P::High
                               : f32Precision == "highest" ? P::Highest
                                                           : P::FromConfig;
    if (!compiled.simulator.profileFile.empty() && compiled.simulator.profile.empty())
      compiled.simulator.profile = "text";
    if (!diffFiles.empty()) return runProfileDiff(t, diffFiles);
    // Under mpirun the pod's chips are spread over the processes; the MPI
    // transport is a plugin, so a tpu-run without MPI still runs alone.
    std::unique_ptr<tpu::sim::Transport> transport;
    if (int ranks = tpu::sim::mpiWorldSizeFromEnvironment(); ranks > 1 && !interpret) {
#if TPU_RUN_WITH_MPI
      std::string error;
      transport = tpu::sim::createMpiTransport(error);
      if (!transport) {
        t.diags().error(fmt::format("tpu-run runs under mpirun ({} processes), but {}", ranks, error));
        return tpu::kExitFailure;
      }
      compiled.simulator.run.transport = transport.get();
#else
      // Same process (mpirun keeps track of it), the MPI build of this tool.
      std::string error = handOverToMpiBuild(argv);
      t.diags().error(fmt::format("tpu-run runs under mpirun ({} processes), but {}", ranks, error));
      return tpu::kExitFailure;
#endif
    }
    if (interpret) {
      // The interpreter has no clock: refuse what only a simulated run can answer.
      for (const char* flag : {"--stats", "--stats-file", "--trace", "--profile", "--profile-file", "--report"}) {
        if (t.cli().count(flag) == 0) continue;
        t.diags().error(fmt::format("{} needs a simulated run; the interpreter (--interpret) has no timing "
                                    "(run without --interpret to compile and simulate the module)",
                                    flag));
        return tpu::kExitUsage;
      }
    }
    return interpret ? runInterpretMode(t, options) : runCompiledMode(t, options, compiled);
  });
}
