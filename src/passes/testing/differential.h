// Differential testing of HLO-to-HLO pipelines: run a module on the
// reference interpreter before and after a pipeline, on the same seeded
// inputs, and compare the results. Used by the simplification sweep over
// the corpus and by the random-program test; the pipeline is a parameter so
// any pass list (simplify, later the whole of hlo-fuse) goes through it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hlo/literal.h"
#include "hlo/module.h"
#include "support/diagnostics.h"

namespace tpu::passes::testing {

// Transforms a module in place; false (with diagnostics) on failure.
using Pipeline = std::function<bool(hlo::Module& module, DiagnosticEngine& diags)>;

// A pipeline of registered pass names ("simplify", "dce,cse"), run by a
// PassManager with the verifier after every pass run (--verify-each).
Pipeline namedPipeline(const std::string& passes);

// Arguments for every entry parameter: tpu-run --seed's recipe (the
// elided-constant fill keyed by "seed=<seed>/parameter=<index>").
std::vector<hlo::Literal> seededArguments(const hlo::Module& module, uint64_t seed);

// Bit-exact comparison: integers and pred equal; floats and complex equal
// bit for bit, except that any NaN matches any NaN. Nullopt when equal,
// else the first difference (leaf, element, both values as bits).
std::optional<std::string> bitwiseDifference(const hlo::Literal& before, const hlo::Literal& after);

enum class Outcome {
  Same,              // results bit-identical
  Different,         // results differ (see detail)
  PipelineFailed,    // the pipeline reported an error or broke the IR
  NotEvaluable,      // the interpreter cannot run the original module
};

struct DifferentialResult {
  Outcome outcome = Outcome::Same;
  std::string detail;              // diagnostics or the first difference
  int64_t instructionsBefore = 0;  // in all computations
  int64_t instructionsAfter = 0;
};

// Checks the transformed module some other way against the reference
// results (e.g. compiled by llo-gen and run on the simulator, compared with
// a tolerance): nullopt when it agrees, else why not.
using ExtraCheck = std::function<std::optional<std::string>(const hlo::Module& transformed,
                                                            const std::vector<hlo::Literal>& arguments,
                                                            const hlo::Literal& expected)>;

struct DifferentialOptions {
  uint64_t seed = 1;
  // Run after the interpreter comparison passed; its failure is Different.
  ExtraCheck extraCheck;
  // Loops in random programs are bounded, but a pipeline bug could make
  // one endless: the interpreter stops after this many iterations.
  int64_t maxWhileIterations = 1 << 20;
};

// Evaluates `module` (unchanged), runs `pipeline` on a copy, verifies and
// evaluates the copy on the same arguments, and compares.
DifferentialResult runDifferential(const hlo::Module& module, const Pipeline& pipeline,
                                   const DifferentialOptions& options = {});

int64_t countInstructions(const hlo::Module& module);

}  // namespace tpu::passes::testing
