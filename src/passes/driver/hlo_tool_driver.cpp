#include "passes/driver/hlo_tool_driver.h"

#include <cstdio>

#include "hlo/analysis/cost_analysis.h"
#include "hlo/binary/binary.h"
#include "support/file_io.h"
#include "hlo/io/hlo_io.h"
#include "passes/pass.h"
#include "passes/driver/registry.h"
#include "passes/strip_metadata.h"

namespace tpu::passes {

namespace {

struct HloToolFlags {
  bool stripMetadata = false;
  bool splitInputFile = false;
  bool noVerify = false;
  bool verifyEach = false;
};

// One set of flags per process: tools have exactly one Tool.
HloToolFlags& flags() {
  static HloToolFlags f;
  return f;
}

std::string listPasses() {
  std::string out = "Available passes:\n";
  for (const PassInfo* info : PassRegistry::global().all())
    out += fmt::format("  {:<24} {}\n", info->name, info->description);
  return out;
}

}  // namespace

void addHloToolOptions(Tool& tool) {
  CLI::App& app = tool.cli();
  app.add_flag("--strip-metadata", flags().stripMetadata, "Remove op metadata before writing (strip-metadata pass)");
  app.add_flag("--split-input-file", flags().splitInputFile,
               "Treat '// -----' lines as separators of independent modules");
  app.add_flag("--no-verify", flags().noVerify, "Do not run the verifier (after reading and after the passes)");
  app.add_flag("--verify-each", flags().verifyEach,
               "Run the verifier after every pass run, each member of a pipeline such as simplify included "
               "(by default: once, after the last pass)");
}

int runHloTool(Tool& tool, const HloToolConfig& config) {
  registerAllPasses();
  CommonOptions& options = tool.options();
  DiagnosticEngine& diags = tool.diags();
  if (options.listPasses) {
    std::string text = listPasses();
    return writeOutputFile("-", text, diags) ? kExitSuccess : kExitFailure;
  }
  bool binary = tool.wantsBinary(".hlob");
  if (binary && flags().splitInputFile) {
    diags.error("--split-input-file writes several modules and needs text output", tool.spec().name);
    return kExitUsage;
  }
  // Check the pipeline before reading anything, so a typo fails fast.
  std::string pipeline = options.passes.empty() ? config.defaultPipeline : options.passes;
  {
    PassManager probe({}, nullptr, nullptr);
    if (!probe.addPipeline(pipeline, diags)) return kExitUsage;
  }

  std::unique_ptr<SourceFile> input = tool.readInput();
  if (!input) return kExitFailure;
  std::vector<std::shared_ptr<SourceFile>> chunks;
  if (flags().splitInputFile && !hlo::isHlob(input->contents())) {
    chunks = hlo::splitInputFile(*input);
  } else {
    chunks.push_back(std::shared_ptr<SourceFile>(std::move(input)));
  }

  bool verify = !flags().noVerify;
  // The modules are not freed: the process ends once they are written, and
  // tearing down thousands of instructions was ~9% of a run (clang's
  // -disable-free does the same for its ASTs).
  std::vector<std::unique_ptr<hlo::Module>> keptUntilExit;
  std::string output;
  bool allOk = true;
  std::string statsText;
  for (size_t i = 0; i < chunks.size(); ++i) {
    size_t errorsBefore = diags.errorCount();
    hlo::LoadedModule loaded = hlo::readModule(chunks[i], diags, {.verify = verify});
    bool ok = loaded.module != nullptr && diags.errorCount() == errorsBefore;
    if (ok) {
      PassManagerOptions pmOptions;
      pmOptions.printIrAfterAll = options.printIrAfterAll;
      pmOptions.printIrDir = options.printIrDir;
      pmOptions.timePasses = options.timePasses;
      pmOptions.verifyAtEnd = verify;
      pmOptions.verifyEach = verify && flags().verifyEach;
      PassManager pm(
          pmOptions, [](const hlo::Module& m) { return hlo::printHloText(m); },
          [](const hlo::Module& m, DiagnosticEngine& d) { return hlo::verifyLoadedModule(m, d); });
      pm.addPipeline(pipeline, diags);
      if (config.context) {
        if (tool.spec().usesTarget) config.context->target = options.target;
        pm.setContext(config.context);
      }
      if (flags().stripMetadata) pm.add(std::make_unique<StripMetadataPass>());
      ok = pm.run(*loaded.module, diags);
      if (options.timePasses) {
        std::string report = pm.timingReport();
        std::fwrite(report.data(), 1, report.size(), stderr);
      }
    }
    if (!ok) {
      allOk = false;
      continue;
    }
    if (!options.stats.empty()) {
      hlo::ModuleStats stats = hlo::computeModuleStats(*loaded.module);
      statsText += options.stats == "json" ? hlo::formatModuleStatsJson(stats, loaded.module->name())
                                           : hlo::formatModuleStatsText(stats, loaded.module->name());
      if (config.moreStats) {
        std::string more = config.moreStats(*loaded.module, options.stats);
        size_t close = statsText.rfind('}');
        if (options.stats == "json" && close != std::string::npos) {
          size_t end = statsText.find_last_not_of(" \n", close - 1);
          statsText.insert(end == std::string::npos ? close : end + 1, ",\n  " + more);
        }
        else statsText += more;
      }
    }
    std::string written =
        hlo::writeModule(*loaded.module, binary ? hlo::HloEncoding::Binary : hlo::HloEncoding::Text);
    if (output.empty()) {
      output = std::move(written);
    } else {
      output += "// -----\n";
      output += written;
    }
    keptUntilExit.push_back(std::move(loaded.module));
  }
  // A file output is written only when everything succeeded (no partial
  // artifacts for make); stdout still gets the modules that did succeed.
  if (!output.empty() && (allOk || options.output == "-")) {
    if (!tool.writeOutput(output, binary)) return kExitFailure;
  }
  if (!statsText.empty() && !tool.writeStats(statsText)) return kExitFailure;
  for (auto& module : keptUntilExit) (void)module.release();
  return allOk ? kExitSuccess : kExitFailure;
}

}  // namespace tpu::passes
