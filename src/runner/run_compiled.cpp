// `tpu-run model.hlo`: compile the module in memory with llo-gen's lowering,
// run it on the simulator, and with --check also evaluate it with the
// reference interpreter on the same inputs and compare.
#include <cmath>
#include <cstring>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "hlo/computation.h"
#include "passes/clone.h"
#include "passes/fusion/pipeline.h"
#include "passes/layout/layout_assignment.h"
#include "runner/check_tolerance.h"
#include "runner/profile_output.h"
#include "runner/run.h"
#include "runner/tensor_io.h"
#include "spmd/shards.h"
#include "support/float_format.h"

namespace tpu::runner {

namespace {

void collectArrayShapes(const hlo::Shape& shape, std::vector<hlo::Shape>& out) {
  if (shape.isTuple()) {
    for (const hlo::Shape& element : shape.tupleElements()) collectArrayShapes(element, out);
  } else if (shape.isArray()) {
    out.push_back(shape.withDefaultLayout());
  }
}

}  // namespace

RunReport runCompiledModule(const hlo::Module& module, const target::TargetDesc& target, const RunOptions& options,
                            const CompiledRequest& request, std::string& statsText, DiagnosticEngine& diags) {
  RunReport failed;
  failed.exitCode = 1;
  // The pipeline runs on a copy: the interpreter (--check) sees the module as given.
  std::unique_ptr<hlo::Module> optimized;
  if (request.optimize) {
    optimized = passes::cloneModule(module);
    // Layout assignment, then fusion (XLA's order; hlo-layout | hlo-fuse).
    passes::layout::LayoutOptions layoutOptions;
    if (target.registers.sublanes > 0) layoutOptions.geometry.sublanes = target.registers.sublanes;
    if (target.registers.lanes > 0) layoutOptions.geometry.lanes = target.registers.lanes;
    size_t errors = diags.errorCount();
    passes::layout::LayoutAssignmentPass(layoutOptions).run(*optimized, diags);
    if (diags.errorCount() != errors) return failed;
    if (!fusion::optimizeModule(*optimized, target, diags)) return failed;
  }
  codegen::CodegenOptions codegenOptions;
  codegenOptions.f32DotPrecision = request.f32DotPrecision;
  // Pods: the program is compiled for the chips it runs on.
  const auto [podReplicas, podPartitions] = codegen::podDevices(module, options.replicas, options.partitions);
  codegenOptions.replicas = podReplicas;
  codegenOptions.partitions = podPartitions;
  codegenOptions.topology = request.simulator.run.topology;
  codegen::CodegenStats codegenStats;
  const hlo::Module& lowered = optimized ? *optimized : module;
  auto program = codegen::compileModule(lowered, target, codegenOptions, diags, &codegenStats);
  if (!program) return failed;
  sim::LoadedProgram loaded{std::move(*program), target, {}};

  // A module partitioned by hlo-partition takes global arrays, as under
  // --interpret: each chip gets its shard of every input, and the result is
  // joined from the chips' shards.
  bool badEdges = false;
  std::optional<spmd::GlobalEdges> edges;
  if (podReplicas * podPartitions > 1) {
    edges = spmd::globalEdges(module, podPartitions, diags, &badEdges);
    if (badEdges) return failed;
  }
  std::vector<std::vector<hlo::Literal>> shards;  // per chip, when partitioned
  auto args = edges ? prepareArgumentsForShapes(edges->parameters, options, diags) : prepareArguments(module, options, diags);
  if (!args) return failed;
  if (edges) shards = spmd::argumentShards(*edges, *args, podReplicas, podPartitions);
  // The compiled entry takes the array leaves of the parameters, row-major
  // (viewed, not copied: the simulator writes them straight into its pages).
  auto viewsOf = [](const std::vector<hlo::Literal>& literals) {
    std::vector<std::string_view> views;
    for (const hlo::Literal& arg : literals)
      for (const hlo::Literal* leaf : flattenLiteral(arg))
        views.emplace_back(reinterpret_cast<const char*>(leaf->data().data()), leaf->data().size());
    return views;
  };
  std::vector<std::string_view> inputs = viewsOf(edges ? shards[0] : *args);
  // Programs with rng instructions take the stream's state last, keyed by
  // the seed the interpreter uses (see --check below).
  std::string rngState;
  if (codegen::takesRngState(loaded.program, "main")) {
    rngState = codegen::initialRngState(options.seed.value_or(0));
    inputs.push_back(rngState);
  }

  sim::RunRequest run = request.simulator.run;
  run.entry = "main";
  // Without --check the tensors are not needed once the simulated HBM holds
  // them: free each as soon as it is loaded.
  std::vector<hlo::Literal*> leaves;
  std::function<void(hlo::Literal&)> collect = [&](hlo::Literal& l) {
    if (l.shape().isTuple()) {
      for (hlo::Literal& e : l.mutableTupleElements()) collect(e);
    } else if (l.shape().isArray()) {
      leaves.push_back(&l);
    }
  };
  if (edges) {
    for (const std::vector<hlo::Literal>& chip : shards) {
      run.chipInputs.push_back(viewsOf(chip));
      if (!rngState.empty()) run.chipInputs.back().push_back(rngState);
    }
  } else if (!request.check) {
    for (hlo::Literal& arg : *args) collect(arg);
    if (leaves.size() + (rngState.empty() ? 0 : 1) == inputs.size())
      run.releaseInput = [&](size_t k) {
        if (k < leaves.size()) std::vector<uint8_t>().swap(leaves[k]->mutableData());
      };
  }
  run.chips = static_cast<int>(podReplicas * podPartitions);
  profile::KernelMap kernels;
  const bool profiling = request.simulator.wantsProfile();
  if (profiling) {
    kernels = profile::mapKernels(loaded.program, &codegenStats, "", &lowered);
    run.profile = true;
    run.bundleRegion = kernels.bundleRegion;
  }
  auto out = sim::runLoadedProgramViews(loaded, inputs, run, diags);
  if (!out) return failed;
  if (out->secondaryRank) return RunReport{};  // mpirun: rank 0 delivers everything
  std::string profileText;
  if (profiling &&
      !deliverProfile(*out, loaded.program, kernels, &lowered, &module, request.simulator, profileText, diags))
    return failed;
  statsText += out->statsText;

  std::vector<hlo::Shape> resultShapes;
  collectArrayShapes(module.entry()->root()->shape(), resultShapes);
  if (out->results.size() != resultShapes.size()) {
    diags.error(fmt::format("the compiled program returned {} results; the module has {}", out->results.size(),
                            resultShapes.size()));
    return failed;
  }
  // One chip's result bytes as literals of the module's result shapes.
  auto literalsOf = [&](const std::vector<std::string>& bytes, std::vector<hlo::Literal>& out) {
    for (size_t i = 0; i < resultShapes.size(); ++i) {
      hlo::Literal literal(resultShapes[i]);
      if (literal.data().size() != bytes[i].size()) {
        diags.error(fmt::format("result {} has {} bytes, expected {}", i, bytes[i].size(), literal.data().size()));
        return false;
      }
      std::memcpy(literal.mutableData().data(), bytes[i].data(), bytes[i].size());
      out.push_back(std::move(literal));
    }
    return true;
  };
  std::vector<hlo::Literal> results;
  if (!literalsOf(out->results, results)) return failed;
  const bool pod = run.chips > 1 && out->chipResults.size() == static_cast<size_t>(run.chips);

  std::string verdict;
  if (request.check) {
    eval::EvalOptions eo;
    eo.elidedConstantsAreErrors = options.elidedConstantsAreErrors;
    eo.maxSteps = options.maxSteps;
    eo.rngSeed = options.seed.value_or(0);
    // Pods: every chip against the interpreter's device of the same index.
    std::vector<hlo::Literal> references;
    if (pod) {
      eo.replicas = podReplicas;
      eo.partitions = podPartitions;
      // A partitioned module's devices take their shards, as the chips did.
      auto all = edges ? eval::evaluatePerDevice(module, shards, eo, diags)
                       : eval::evaluateAllDevices(module, *args, eo, diags);
      if (!all) return failed;
      references = std::move(all->perDevice);
    } else {
      std::optional<hlo::Literal> reference = eval::evaluate(module, *args, eo, diags);
      if (!reference) return failed;
      references.push_back(std::move(*reference));
    }
    std::vector<double> tolerances = checkTolerances(module, request.f32DotPrecision);
    tolerances.resize(results.size(), kCheckToleranceFloor);
    // Unless --check-atol fixes it: results through sums also get the
    // scaled bound times the size of the expected values, and results whose
    // bound reaches their own size do not compare NaNs.
    std::vector<double> scaled = checkScaledTolerances(module, request.f32DotPrecision);
    scaled.resize(results.size(), 0.0);
    std::vector<double> atols, rtols;
    std::vector<bool> unbounded;
    std::vector<size_t> unboundedIndices;
    for (size_t i = 0; i < results.size(); ++i) {
      atols.push_back(request.checkAtol.value_or(tolerances[i]));
      rtols.push_back(request.checkRtol.value_or(atols[i]));
      unbounded.push_back(!request.checkAtol && tolerances[i] >= kUnboundedTolerance);
      if (unbounded.back()) unboundedIndices.push_back(i);
      if (request.checkAtol) scaled[i] = 0;
    }
    for (size_t c = 0; c < references.size(); ++c) {
      std::vector<hlo::Literal> chipResults;
      if (c == 0) {
        chipResults = results;
      } else if (!literalsOf(out->chipResults[c], chipResults)) {
        return failed;
      }
      std::vector<const hlo::Literal*> want = flattenLiteral(references[c]);
      if (want.size() != chipResults.size()) {
        diags.error("the interpreter and the compiled program disagree on the number of results");
        return failed;
      }
      const std::string who =
          pod ? fmt::format(" on chip {} (replica {}, partition {})", c, static_cast<int64_t>(c) / podPartitions,
                            static_cast<int64_t>(c) % podPartitions)
              : "";
      for (size_t i = 0; i < chipResults.size(); ++i) {
        if (auto diff = compareLiterals(chipResults[i], *want[i], atols[i], rtols[i], scaled[i], unbounded[i])) {
          diags.error(fmt::format("--check: result {} of the compiled program{} differs from the interpreter's: {}",
                                  i, who, *diff));
          return failed;
        }
      }
    }
    // One tolerance for all results reads as before; else one per result.
    bool uniform = true;
    for (size_t i = 1; i < results.size(); ++i) uniform = uniform && atols[i] == atols[0] && rtols[i] == rtols[0];
    std::string tolText;
    if (uniform && !results.empty()) {
      tolText = fmt::format("atol {:g}, rtol {:g}", atols[0], rtols[0]);
    } else {
      tolText = "atol/rtol per result:";
      for (size_t i = 0; i < results.size(); ++i)
        tolText += fmt::format("{} {:g}/{:g}", i ? "," : "", atols[i], rtols[i]);
    }
    if (!unboundedIndices.empty())
      tolText += fmt::format("; {} {}: error bound past the values' size, NaN matches any value",
                             unboundedIndices.size() == 1 ? "result" : "results", fmt::join(unboundedIndices, ", "));
    verdict = fmt::format("check: {} {} the interpreter{} ({}; integers exact)", results.size(),
                          results.size() == 1 ? "result matches" : "results match",
                          pod ? fmt::format(" on each of {} chips", run.chips) : "", tolText);
    if (request.jsonVerdict) {
      double atol = 0, rtol = 0;
      for (size_t i = 0; i < results.size(); ++i) atol = std::max(atol, atols[i]), rtol = std::max(rtol, rtols[i]);
      nlohmann::json line = {{"severity", "remark"},
                             {"message", verdict},
                             {"check",
                              {{"match", true},
                               {"results", results.size()},
                               {"atol", atol},
                               {"rtol", rtol},
                               {"per_result", {{"atol", atols}, {"rtol", rtols}}}}}};
      verdict = line.dump();
    }
    verdict += "\n";
  }
  hlo::Literal result = results.size() == 1 ? std::move(results[0]) : hlo::Literal::tuple(std::move(results));
  if (edges && pod) {
    // Replica 0's partitions, joined per the root's sharding.
    std::vector<hlo::Literal> replica0{std::move(result)};
    for (int64_t c = 1; c < podPartitions; ++c) {
      std::vector<hlo::Literal> chip;
      if (!literalsOf(out->chipResults[static_cast<size_t>(c)], chip)) return failed;
      replica0.push_back(chip.size() == 1 ? std::move(chip[0]) : hlo::Literal::tuple(std::move(chip)));
    }
    result = spmd::joinShards(replica0, edges->result, edges->resultSharding);
  }
  RunReport report = deliverResults(result, options, diags);
  report.checkVerdict = std::move(verdict);
  report.profileText = std::move(profileText);
  return report;
}

}  // namespace tpu::runner
