#include "support/tool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "support/file_io.h"

namespace tpu {

std::string_view toolVersion() { return "0.1.0"; }

namespace {

// Shows flags that take an optional value (`--stats{text}` to CLI11) as
// `--stats` instead of CLI11's raw spelling.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, positional);
    size_t brace = name.find('{');
    if (brace != std::string::npos) name = name.substr(0, brace);
    return name;
  }
};

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<std::string> (*gTargetNames)() = nullptr;

// --diagnostics-format=json as written on the command line, for errors found
// before (or while) CLI11 parses it.
bool argvAsksForJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--diagnostics-format=json") return true;
    if (arg == "--diagnostics-format" && i + 1 < argc && std::string_view(argv[i + 1]) == "json") return true;
  }
  return false;
}

}  // namespace

void registerTargetNames(std::vector<std::string> (*names)()) { gTargetNames = names; }

void exitWithoutTeardown(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

Tool::Tool(ToolSpec spec) : spec_(std::move(spec)) {
  app_ = std::make_unique<CLI::App>(spec_.summary, spec_.name);
  CLI::App& app = *app_;
  app.set_version_flag("--version", fmt::format("{} (tpu-tools) {}", spec_.name, toolVersion()));
  if (!spec_.examples.empty()) app.footer("Examples:\n" + spec_.examples);
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(34);

  app.add_option("input", options_.input, "Input file ('-' for standard input)")
      ->capture_default_str();
  if (spec_.writesOutput) {
    app.add_option("-o,--output", options_.output, "Output file ('-' for standard output)")
        ->capture_default_str();
  }
  if (spec_.writesOutput || spec_.forceFlag)
    app.add_flag("-f,--force", options_.force, "Write binary output even to a terminal");
  if (spec_.writesOutput) {
    if (!spec_.emitKinds.empty()) {
      std::vector<std::string> kinds;
      std::string_view rest = spec_.emitKinds;
      while (!rest.empty()) {
        size_t bar = rest.find('|');
        kinds.emplace_back(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
      }
      app.add_option("--emit", options_.emit, "Output encoding: " + spec_.emitKinds)
          ->check(CLI::IsMember(kinds));
    }
  }
  if (spec_.runsPasses) {
    app.add_option("--passes", options_.passes, "Comma-separated pass pipeline to run");
    app.add_flag("--list-passes", options_.listPasses, "List the registered passes and exit");
    app.add_flag("--print-ir-after-all", options_.printIrAfterAll,
                 "Print the IR to stderr after every pass");
    app.add_option("--print-ir-dir", options_.printIrDir,
                   "Write the IR after every pass into numbered files in DIR");
    app.add_flag("--time-passes", options_.timePasses, "Report the time each pass takes (stderr)");
  }
  if (spec_.usesTarget) {
    app.add_option("--target", options_.target, "Target chip: a name (v4, v5e) or a JSON file")
        ->capture_default_str();
  }
  if (spec_.hasStats) {
    // A flag with an optional `=value`, so `--stats model.hlo` keeps the file
    // as the input instead of taking it as the value.
    app.add_flag("--stats{text}", options_.stats, "Print statistics: --stats (text) or --stats=json")
        ->check(CLI::IsMember({"text", "json"}));
    app.add_option("--stats-file", options_.statsFile, "Write statistics to FILE instead of stderr");
  }
  app.add_option("--diagnostics-format", options_.diagnosticsFormat, "Diagnostics as text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--color", options_.color, "Colour diagnostics: auto, always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
}

Tool::~Tool() = default;

bool Tool::colorEnabled() const {
  if (options_.color == "always") return true;
  if (options_.color == "never") return false;
  const char* noColor = std::getenv("NO_COLOR");
  if (noColor && *noColor) return false;
  return ::isatty(STDERR_FILENO) != 0;
}

DiagnosticFormat Tool::diagnosticFormat() const {
  return options_.diagnosticsFormat == "json" ? DiagnosticFormat::Json : DiagnosticFormat::Text;
}

int Tool::run(int argc, char** argv, const std::function<int(Tool&)>& body) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app_->exit(e) == 0 ? kExitSuccess : kExitUsage;
  } catch (const CLI::CallForAllHelp& e) {
    return app_->exit(e) == 0 ? kExitSuccess : kExitUsage;
  } catch (const CLI::CallForVersion& e) {
    app_->exit(e);
    return kExitSuccess;
  } catch (const CLI::ParseError& e) {
    return reportUsageError(e.what(), argc, argv);
  }
  if (!options_.statsFile.empty() && options_.stats.empty()) options_.stats = "text";

  bool color = colorEnabled();
  DiagnosticFormat format = diagnosticFormat();
  std::string toolName = spec_.name;
  diags_.setConsumer([color, format](const Diagnostic& d) {
    std::string text = formatDiagnostic(d, format, color);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  });
  if (!checkTargetName()) return kExitUsage;
  int code = kExitFailure;
  try {
    code = body(*this);
    if (code == kExitSuccess && diags_.hasErrors()) code = kExitFailure;
  } catch (const std::bad_alloc&) {
    diags_.error("out of memory", spec_.name);
  } catch (const std::exception& e) {
    diags_.error(fmt::format("internal error: {}", e.what()), spec_.name);
  }
  return readerClosedOutput() ? kExitReaderClosed : code;
}

int Tool::reportUsageError(const std::string& message, int argc, char** argv) {
  bool json = argvAsksForJson(argc, argv);
  Diagnostic d{Severity::Error, {}, spec_.name, message, {}};
  std::string text = formatDiagnostic(d, json ? DiagnosticFormat::Json : DiagnosticFormat::Text, false);
  if (!json) text += "Run with --help for more information.\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  return kExitUsage;
}

// A --target that is neither a file nor a built-in name is a usage error.
bool Tool::checkTargetName() {
  if (!spec_.usesTarget || !gTargetNames || app_->count("--target") == 0) return true;
  const std::string& target = options_.target;
  if (target.find('/') != std::string::npos || endsWith(target, ".json") ||
      ::access(target.c_str(), F_OK) == 0)
    return true;
  std::vector<std::string> names = gTargetNames();
  if (std::find(names.begin(), names.end(), target) != names.end()) return true;
  diags_.error(fmt::format("unknown target '{}' (built-in targets: {}; or give a .json file)", target,
                           fmt::join(names, ", ")),
               spec_.name);
  return false;
}

std::unique_ptr<SourceFile> Tool::readInput() { return readInput(options_.input); }

std::unique_ptr<SourceFile> Tool::readInput(const std::string& path) {
  return readInputFile(path, diags_);
}

std::unique_ptr<SourceFile> Tool::readInputOfKind(std::initializer_list<FileKind> kinds,
                                                  std::string_view expected, std::string_view hint) {
  std::unique_ptr<SourceFile> file = readInput();
  if (file && !checkFileKind(*file, kinds, expected, diags_, hint)) return nullptr;
  return file;
}

bool Tool::wantsBinary(std::string_view binaryExtension) const {
  if (options_.emit == "binary") return true;
  if (!options_.emit.empty()) return false;
  return endsWith(options_.output, binaryExtension);
}

bool Tool::writeOutput(std::string_view data, bool binary) {
  if (binary) return writeBinaryTo(options_.output, data, "use -o FILE or -f");
  return writeOutputFile(options_.output, data, diags_);
}

bool Tool::writeBinaryTo(const std::string& path, std::string_view data, std::string_view how) {
  return writeBinaryOutputFile(path, data, options_.force, how, diags_);
}

bool Tool::writeStats(std::string_view rendered) {
  if (!options_.statsFile.empty()) return writeOutputFile(options_.statsFile, rendered, diags_);
  std::fwrite(rendered.data(), 1, rendered.size(), stderr);
  std::fflush(stderr);
  return true;
}

}  // namespace tpu
