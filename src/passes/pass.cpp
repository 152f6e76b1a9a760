#include "passes/pass.h"

#include <cstdio>
#include <filesystem>

#include "support/file_io.h"

namespace tpu::passes {

PassRegistry& PassRegistry::global() {
  static PassRegistry registry;
  return registry;
}

void PassRegistry::add(PassInfo info) {
  std::string key = info.name;
  passes_[key] = std::move(info);
}

const PassInfo* PassRegistry::find(std::string_view name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::all() const {
  std::vector<const PassInfo*> out;
  for (const auto& [name, info] : passes_) out.push_back(&info);
  return out;
}

bool PassManager::addPipeline(std::string_view pipeline, DiagnosticEngine& diags) {
  bool ok = true;
  while (!pipeline.empty()) {
    size_t comma = pipeline.find(',');
    std::string_view name = pipeline.substr(0, comma);
    pipeline = comma == std::string_view::npos ? std::string_view{} : pipeline.substr(comma + 1);
    if (name.empty()) continue;
    const PassInfo* info = PassRegistry::global().find(name);
    if (!info) {
      diags.error(fmt::format("unknown pass '{}' (see --list-passes)", name));
      ok = false;
      continue;
    }
    add(info->create());
  }
  return ok;
}

bool PassManager::run(hlo::Module& module, DiagnosticEngine& diags) {
  int index = 0;
  for (auto& pass : passes_) {
    ++index;
    auto start = std::chrono::steady_clock::now();
    pass->run(module, diags);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timings_.push_back({std::string(pass->name()), seconds});
    if (diags.hasErrors()) return false;
    if (options_.verifyAfterEach && verifier_ && !verifier_(module, diags)) {
      diags.error(fmt::format("module does not verify after pass '{}'", pass->name()));
      return false;
    }
    if (options_.printIrAfterAll && printer_) {
      std::string text = fmt::format("// -----// IR Dump After {} //----- //\n{}", pass->name(), printer_(module));
      std::fwrite(text.data(), 1, text.size(), stderr);
    }
    if (!options_.printIrDir.empty() && printer_) {
      std::error_code ec;
      std::filesystem::create_directories(options_.printIrDir, ec);
      std::string path = fmt::format("{}/{:02d}-{}.hlo", options_.printIrDir, index, pass->name());
      if (!writeOutputFile(path, printer_(module), diags)) return false;
    }
  }
  return true;
}

std::string PassManager::timingReport() const {
  double total = 0;
  for (const auto& t : timings_) total += t.seconds;
  std::string out = "===-------------------------------------------------------------------------===\n"
                    "                      ... Pass execution timing report ...\n"
                    "===-------------------------------------------------------------------------===\n";
  out += fmt::format("  Total Execution Time: {:.4f} seconds\n\n   ---Wall Time---  --- Name ---\n", total);
  for (const auto& t : timings_)
    out += fmt::format("   {:.4f} ({:5.1f}%)  {}\n", t.seconds, total > 0 ? 100 * t.seconds / total : 0.0, t.name);
  out += fmt::format("   {:.4f} (100.0%)  Total\n", total);
  return out;
}

}  // namespace tpu::passes
