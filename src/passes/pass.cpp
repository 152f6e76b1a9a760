#include "passes/pass.h"

#include <algorithm>
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

bool PassPipeline::runWith(hlo::Module& module, DiagnosticEngine& diags, const AfterPass& after, bool* ok) {
  *ok = true;
  bool changedAny = false;
  roundsRun_ = 0;
  for (int round = 0; round < std::max(maxIterations_, 1); ++round) {
    ++roundsRun_;
    bool changedThisRound = false;
    for (auto& pass : passes_) {
      if (contextOrNull()) pass->setContext(contextOrNull());
      // A nested pipeline reports its own members to `after`.
      auto* inner = dynamic_cast<PassPipeline*>(pass.get());
      bool innerOk = true;
      bool changed = inner ? inner->runWith(module, diags, after, &innerOk) : pass->run(module, diags);
      changedThisRound |= changed;
      if (!innerOk || diags.hasErrors() || (!inner && after && !after(*pass, changed))) {
        *ok = false;
        return changedAny || changedThisRound;
      }
    }
    changedAny |= changedThisRound;
    if (!changedThisRound) break;
  }
  return changedAny;
}

bool PassPipeline::run(hlo::Module& module, DiagnosticEngine& diags) {
  bool ok = true;
  return runWith(module, diags, nullptr, &ok);
}

bool PassManager::afterPass(hlo::Module& module, DiagnosticEngine& diags, Pass& pass, double seconds, bool nested,
                            bool changed) {
  timings_.push_back({std::string(pass.name()), seconds});
  if (diags.hasErrors()) return false;
  bool verify = options_.verifyEach || (options_.verifyAfterEach && !nested);
  if (verify && verifier_ && !verifier_(module, diags)) {
    diags.error(fmt::format("module does not verify after pass '{}'", pass.name()));
    return false;
  }
  // Members of pipelines are printed only when they changed something: a
  // fixed point runs every member once more with no effect.
  if (nested && !changed) return true;
  ++printIndex_;
  if (options_.printIrAfterAll && printer_) {
    std::string text = fmt::format("// -----// IR Dump After {} //----- //\n{}", pass.name(), printer_(module));
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  if (!options_.printIrDir.empty() && printer_) {
    std::error_code ec;
    std::filesystem::create_directories(options_.printIrDir, ec);
    std::string path = fmt::format("{}/{:02d}-{}.hlo", options_.printIrDir, printIndex_, pass.name());
    if (!writeOutputFile(path, printer_(module), diags)) return false;
  }
  return true;
}

bool PassManager::run(hlo::Module& module, DiagnosticEngine& diags) {
  if (!runPasses(module, diags)) return false;
  // Verified once here unless it was after the last pass already.
  const bool verifiedLast = options_.verifyEach || options_.verifyAfterEach;
  if (!options_.verifyAtEnd || verifiedLast || passes_.empty() || !verifier_ || verifier_(module, diags)) return true;
  if (passes_.size() == 1)
    diags.error(fmt::format("module does not verify after pass '{}'", passes_.back()->name()));
  else
    diags.error(fmt::format("module does not verify after the {} passes ending with '{}' (--verify-each verifies "
                            "after each and names the one that broke it)",
                            passes_.size(), passes_.back()->name()));
  return false;
}

bool PassManager::runPasses(hlo::Module& module, DiagnosticEngine& diags) {
  using Clock = std::chrono::steady_clock;
  for (auto& pass : passes_) {
    if (context_) pass->setContext(context_);
    if (auto* pipeline = dynamic_cast<PassPipeline*>(pass.get())) {
      // Members are timed, verified and printed one by one; the pipeline
      // itself is verified once more at its end like any pass.
      auto memberStart = Clock::now();
      bool ok = true;
      pipeline->runWith(
          module, diags,
          [&](Pass& member, bool memberChanged) {
            double seconds = std::chrono::duration<double>(Clock::now() - memberStart).count();
            bool keepGoing = afterPass(module, diags, member, seconds, /*nested=*/true, memberChanged);
            memberStart = Clock::now();
            return keepGoing;
          },
          &ok);
      if (!ok) return false;
      bool verify = options_.verifyAfterEach && !options_.verifyEach;
      if (verify && verifier_ && !verifier_(module, diags)) {
        diags.error(fmt::format("module does not verify after pass '{}'", pass->name()));
        return false;
      }
      continue;
    }
    auto start = Clock::now();
    bool changed = pass->run(module, diags);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!afterPass(module, diags, *pass, seconds, /*nested=*/false, changed)) return false;
  }
  return true;
}

std::string PassManager::timingReport() const {
  // One line per pass name (pipelines run their members many times), in
  // order of first run.
  std::vector<PassTiming> byName;
  std::vector<int> runs;
  double total = 0;
  for (const auto& t : timings_) {
    total += t.seconds;
    auto it = std::find_if(byName.begin(), byName.end(), [&](const PassTiming& b) { return b.name == t.name; });
    if (it == byName.end()) {
      byName.push_back(t);
      runs.push_back(1);
    } else {
      it->seconds += t.seconds;
      ++runs[static_cast<size_t>(it - byName.begin())];
    }
  }
  std::string out = "===-------------------------------------------------------------------------===\n"
                    "                      ... Pass execution timing report ...\n"
                    "===-------------------------------------------------------------------------===\n";
  out += fmt::format("  Total Execution Time: {:.4f} seconds\n\n   ---Wall Time---  --- Name ---\n", total);
  for (size_t i = 0; i < byName.size(); ++i) {
    const PassTiming& t = byName[i];
    std::string times = runs[i] > 1 ? fmt::format(" ({} runs)", runs[i]) : "";
    out += fmt::format("   {:.4f} ({:5.1f}%)  {}{}\n", t.seconds, total > 0 ? 100 * t.seconds / total : 0.0, t.name,
                       times);
  }
  out += fmt::format("   {:.4f} (100.0%)  Total\n", total);
  return out;
}

}  // namespace tpu::passes
