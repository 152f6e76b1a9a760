// The pass registry and manager (MLIR-style): passes register under a
// kebab-case name, and any tool can run any pipeline with --passes=a,b,c.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/diagnostics.h"

namespace tpu::hlo {
class Module;
}
namespace tpu::target {
struct TargetDesc;
}

namespace tpu::passes {

// One explanation of a decision a pass took (an optimization remark, as
// LLVM's -Rpass): `text` is its line for people, `json` one JSON object
// for tools. Passes append them in a deterministic order.
struct Remark {
  std::string pass;
  std::string text;
  std::string json;
};

// What the running tool tells the passes it runs. Passes that price their
// decisions on a chip use `targetDesc` when set, else load `target`
// (--target: a built-in name or a JSON file); passes that explain their
// decisions append to `remarks` when it is set (nobody asked otherwise).
struct PassContext {
  std::string target = "v5e";
  const target::TargetDesc* targetDesc = nullptr;
  std::vector<Remark>* remarks = nullptr;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Returns true if the module changed; reports problems to `diags` (an
  // error there stops the pipeline).
  virtual bool run(hlo::Module& module, DiagnosticEngine& diags) = 0;

  // Set by PassManager before run() (a pipeline hands it to its members); a
  // default context when never set.
  void setContext(const PassContext* context) { context_ = context; }
  const PassContext& context() const {
    static const PassContext fallback;
    return context_ ? *context_ : fallback;
  }

 protected:
  const PassContext* contextOrNull() const { return context_; }

 private:
  const PassContext* context_ = nullptr;
};

// A pass made of member passes run in order, repeated until no member
// changes the module or `maxIterations` rounds have run (1 = once): the
// fixed-point pipelines of simplification. The PassManager runs the members
// itself, so verification (--verify-each), IR printing and timing apply to
// every member run and a member that breaks the IR is named.
class PassPipeline : public Pass {
 public:
  PassPipeline(std::string name, int maxIterations) : name_(std::move(name)), maxIterations_(maxIterations) {}
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  std::string_view name() const override { return name_; }
  int maxIterations() const { return maxIterations_; }
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  // Called after each member run with whether it changed the module;
  // returning false stops the pipeline (as an error in diags does).
  using AfterPass = std::function<bool(Pass& pass, bool changed)>;
  // Returns whether any member changed the module; `*ok` false when a
  // member reported an error or `after` stopped the pipeline.
  bool runWith(hlo::Module& module, DiagnosticEngine& diags, const AfterPass& after, bool* ok);
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
  // Rounds the last run took (for tests and --time-passes).
  int roundsRun() const { return roundsRun_; }

 private:
  std::string name_;
  int maxIterations_;
  std::vector<std::unique_ptr<Pass>> passes_;
  int roundsRun_ = 0;
};

struct PassInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Pass>()> create;
};

class PassRegistry {
 public:
  static PassRegistry& global();
  void add(PassInfo info);
  const PassInfo* find(std::string_view name) const;
  std::vector<const PassInfo*> all() const;  // sorted by name

 private:
  std::map<std::string, PassInfo, std::less<>> passes_;
};

// Static registration: `static passes::RegisterPass<MyPass> reg("my-pass", "does X");`
// (libraries that hold passes must be linked whole, or call an explicit
// register function from the tool; see registerAllPasses()).
template <typename P>
struct RegisterPass {
  RegisterPass(std::string name, std::string description) {
    PassRegistry::global().add({std::move(name), std::move(description), [] { return std::make_unique<P>(); }});
  }
};

struct PassManagerOptions {
  bool printIrAfterAll = false;  // to stderr, with a fixed banner
  std::string printIrDir;        // numbered files NN-pass.hlo
  bool timePasses = false;
  // Verify once, after the last pass (a failure names that pass, or says
  // which pipeline it ended when there were several passes). The default:
  // on a 100k-instruction module the verifier was a sixth of hlo-fuse's
  // time when it ran after every pass.
  bool verifyAtEnd = true;
  // Verify after each pass of the pipeline (not inside PassPipelines).
  bool verifyAfterEach = false;
  // Verify after every pass run, members of PassPipelines included
  // (--verify-each, on in tests); implies verifyAfterEach.
  bool verifyEach = false;
};

struct PassTiming {
  std::string name;
  double seconds = 0;
};

class PassManager {
 public:
  using Printer = std::function<std::string(const hlo::Module&)>;
  using Verifier = std::function<bool(const hlo::Module&, DiagnosticEngine&)>;

  PassManager(PassManagerOptions options, Printer printer, Verifier verifier)
      : options_(std::move(options)), printer_(std::move(printer)), verifier_(std::move(verifier)) {}

  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  // Handed to every pass before it runs (the caller keeps it alive).
  void setContext(const PassContext* context) { context_ = context; }
  // Parses "a,b,c" against the registry; reports unknown names.
  bool addPipeline(std::string_view pipeline, DiagnosticEngine& diags);
  size_t size() const { return passes_.size(); }

  bool run(hlo::Module& module, DiagnosticEngine& diags);
  const std::vector<PassTiming>& timings() const { return timings_; }
  // "===---- Pass execution timing report ----===" table, like LLVM's.
  std::string timingReport() const;

 private:
  bool runPasses(hlo::Module& module, DiagnosticEngine& diags);
  // Timing, verification and printing after one pass run; false stops.
  bool afterPass(hlo::Module& module, DiagnosticEngine& diags, Pass& pass, double seconds, bool nested,
                 bool changed);

  int printIndex_ = 0;
  PassManagerOptions options_;
  Printer printer_;
  Verifier verifier_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassTiming> timings_;
  const PassContext* context_ = nullptr;
};

}  // namespace tpu::passes
