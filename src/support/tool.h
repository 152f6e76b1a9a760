// The shared tool harness: every tool's main() is a ToolSpec plus a body.
// It owns the common options (ARCHITECTURE.md section 4), exit codes
// (0 ok, 1 bad input, 2 usage), diagnostic printing and output writing.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "support/diagnostics.h"
#include "support/file_kind.h"
#include "support/source.h"

namespace tpu {

constexpr int kExitSuccess = 0;
constexpr int kExitFailure = 1;  // bad input, verification failure, mismatch
constexpr int kExitUsage = 2;    // bad command line
// The reader of standard output went away (`tool | head -1`): nothing more
// is printed, as LLVM's tools do (sysexits.h's EX_IOERR).
constexpr int kExitReaderClosed = 74;

std::string_view toolVersion();

// Which groups of common options a tool offers.
struct ToolSpec {
  std::string name = {};
  std::string summary = {};   // one line, shown at the top of --help
  std::string examples = {};  // "Examples:" block at the end of --help
  bool writesOutput = true;   // -o, -f (and --emit if emitKinds is set)
  bool forceFlag = false;     // -f alone: binary output named by the tool's own options
  std::string emitKinds = {};      // e.g. "text|binary"; empty: no --emit
  bool runsPasses = false;    // --passes, --list-passes, --print-ir-*, --time-passes
  bool usesTarget = false;    // --target
  bool hasStats = true;       // --stats[=text|json], --stats-file
  bool inputIsOptional = false;
};

struct CommonOptions {
  std::string input = "-";
  std::string output = "-";
  std::string emit;  // empty = tool default
  bool force = false;
  std::string passes;
  bool listPasses = false;
  bool printIrAfterAll = false;
  std::string printIrDir;
  bool timePasses = false;
  std::string stats;  // "", "text" or "json"
  std::string statsFile;
  std::string diagnosticsFormat = "text";
  std::string color = "auto";
  std::string target = "v5e";
};

class Tool {
 public:
  explicit Tool(ToolSpec spec);
  ~Tool();

  CLI::App& cli() { return *app_; }
  const ToolSpec& spec() const { return spec_; }
  CommonOptions& options() { return options_; }
  DiagnosticEngine& diags() { return diags_; }

  // Parses the command line, then runs `body`. Returns the process exit code.
  // Exceptions escaping `body` become an "internal error" and exit 1.
  int run(int argc, char** argv, const std::function<int(Tool&)>& body);

  // Reads the input named on the command line (or `path`).
  std::unique_ptr<SourceFile> readInput();
  std::unique_ptr<SourceFile> readInput(const std::string& path);
  // Reads the input and checks it is of one of `kinds` (support/file_kind.h);
  // a file of another kind is reported as what it is. `expected` reads like
  // "LLO assembly (.llo) or TPU machine code (.tpu)"; `hint` replaces the
  // usual advice on what to do with a file of the kind found.
  std::unique_ptr<SourceFile> readInputOfKind(std::initializer_list<FileKind> kinds,
                                              std::string_view expected, std::string_view hint = {});

  // True when the output should be binary: --emit=binary, or no --emit and
  // an output file name ending in `binaryExtension` (e.g. ".hlob").
  bool wantsBinary(std::string_view binaryExtension) const;

  // Writes the tool's result to -o (atomically). Refuses binary data on a
  // terminal unless -f. Returns false after reporting an error.
  bool writeOutput(std::string_view data, bool binary);
  // The same rule for binary data the tool writes to a path of its own
  // (tpu-run's --output=@-): `how` says how to get it written.
  bool writeBinaryTo(const std::string& path, std::string_view data, std::string_view how);

  // Writes a stats report (text or JSON, already rendered) to --stats-file
  // or stderr.
  bool writeStats(std::string_view rendered);

  bool colorEnabled() const;
  DiagnosticFormat diagnosticFormat() const;

 private:
  int reportUsageError(const std::string& message, int argc, char** argv);
  bool checkTargetName();

  ToolSpec spec_;
  CommonOptions options_;
  DiagnosticEngine diags_;
  std::unique_ptr<CLI::App> app_;
};

// The built-in target names, registered by the target library when it is
// linked in (support cannot depend on it), so that every tool with --target
// reports a misspelt name as a usage error before reading anything.
void registerTargetNames(std::vector<std::string> (*names)());

// Ends the process with `code` once every output is written: flushes stdio,
// then skips the destructors of the Tool and of static objects and the exit
// handlers (_Exit). For pipeline stages whose memory the OS reclaims anyway;
// tearing down CLI11's option tree and the static tables was ~2% of a run.
[[noreturn]] void exitWithoutTeardown(int code);

}  // namespace tpu
