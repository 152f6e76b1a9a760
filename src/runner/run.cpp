#include "runner/run.h"

#include "spmd/shards.h"

#include <fmt/format.h>

#include "eval/evaluator.h"
#include "runner/tensor_io.h"
#include "support/file_io.h"
#include "support/npy.h"

#if __has_include("hlo/io/hlo_io.h")
#include "hlo/io/hlo_io.h"
#define TPU_RUNNER_HAVE_HLO_IO 1
#else
#include "hlo/text/parser.h"
#endif

namespace tpu::runner {

namespace {

// Results printed without --output are summarised beyond this many elements.
constexpr int64_t kSummarizeAbove = 1000;

// "@path" or a bare path ending in .npy names a file.
std::optional<std::string> filePath(const std::string& spec) {
  if (!spec.empty() && spec[0] == '@') return spec.substr(1);
  if (spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".npy") == 0 && spec.find('=') == std::string::npos)
    return spec;
  return std::nullopt;
}

// `owner` is what `want` is the shape of: "parameter" or "result".
std::optional<hlo::Literal> readTensor(const std::string& spec, const hlo::Shape& want,
                                       const std::string& what, std::string_view owner,
                                       DiagnosticEngine& diags) {
  if (auto path = filePath(spec))
    return readNpyLiteral(*path, want, fmt::format("{} ({})", what, *path), diags, owner);
  return parseInlineLiteral(spec, &want, what, diags, owner);
}

}  // namespace

std::unique_ptr<hlo::Module> loadModule(std::shared_ptr<SourceFile> source, DiagnosticEngine& diags) {
#ifdef TPU_RUNNER_HAVE_HLO_IO
  hlo::LoadedModule loaded = hlo::readModule(std::move(source), diags);
  return std::move(loaded.module);
#else
  return hlo::parseHloText(*source, diags);
#endif
}

std::optional<std::vector<hlo::Literal>> prepareArguments(const hlo::Module& module, const RunOptions& options,
                                                          DiagnosticEngine& diags) {
  const hlo::Computation* entry = module.entry();
  if (!entry) {
    diags.error(fmt::format("module '{}' has no entry computation", module.name()));
    return std::nullopt;
  }
  std::vector<hlo::Shape> shapes;
  for (int64_t i = 0; i < entry->parameterCount(); ++i) {
    const hlo::Instruction* p = entry->parameter(i);
    if (!p) {
      diags.error(fmt::format("the entry computation has no parameter {}", i));
      return std::nullopt;
    }
    shapes.push_back(p->shape());
  }
  return prepareArgumentsForShapes(shapes, options, diags);
}

std::optional<std::vector<hlo::Literal>> prepareArgumentsForShapes(const std::vector<hlo::Shape>& parameters,
                                                                   const RunOptions& options, DiagnosticEngine& diags) {
  const int64_t n = static_cast<int64_t>(parameters.size());
  const int64_t given = static_cast<int64_t>(options.inputs.size());
  if (given > n || (given < n && !options.seed)) {
    diags.error(fmt::format("the entry computation takes {} parameter{} but {} --input{} given{}", n,
                            n == 1 ? "" : "s", given, given == 1 ? " was" : "s were",
                            given < n ? " (use --seed=N to fill the others with random data)" : ""));
    return std::nullopt;
  }
  std::vector<hlo::Literal> args;
  for (int64_t i = 0; i < n; ++i) {
    const hlo::Shape& shape = parameters[static_cast<size_t>(i)];
    try {
      if (i < given) {
        auto lit = readTensor(options.inputs[static_cast<size_t>(i)], shape, fmt::format("input {}", i),
                              "parameter", diags);
        if (!lit) return std::nullopt;
        args.push_back(std::move(*lit));
      } else {
        args.push_back(randomLiteral(shape, *options.seed, i));
      }
    } catch (const std::bad_alloc&) {
      diags.error(fmt::format("out of host memory for parameter {} {} ({} bytes)", i, shape.toString(false),
                              shape.byteSize().value_or(0)));
      return std::nullopt;
    }
  }
  return args;
}

RunReport deliverResults(const hlo::Literal& result, const RunOptions& options, DiagnosticEngine& diags) {
  RunReport report;
  std::vector<const hlo::Literal*> leaves = flattenLiteral(result);
  const size_t n = leaves.size();
  if (!options.outputs.empty() && options.outputs.size() != n) {
    diags.error(fmt::format("the program has {} result{} but {} --output{} given", n, n == 1 ? "" : "s",
                            options.outputs.size(), options.outputs.size() == 1 ? " was" : "s were"));
    report.exitCode = 1;
    return report;
  }
  if (!options.expected.empty() && options.expected.size() != n) {
    diags.error(fmt::format("the program has {} result{} but {} --expected-output{} given", n, n == 1 ? "" : "s",
                            options.expected.size(), options.expected.size() == 1 ? " was" : "s were"));
    report.exitCode = 1;
    return report;
  }
  for (size_t i = 0; i < n; ++i) {
    const hlo::Literal& r = *leaves[i];
    if (options.outputs.empty()) {
      if (options.expected.empty())
        report.stdoutText += fmt::format("result[{}]: {}\n", i, formatLiteral(r, kSummarizeAbove));
      continue;
    }
    const std::string& spec = options.outputs[i];
    if (spec == "-") {
      report.stdoutText += fmt::format("result[{}]: {}\n", i, formatLiteral(r));
      continue;
    }
    auto path = filePath(spec);
    if (!path) {
      diags.error(fmt::format("--output '{}' must be @FILE.npy or '-'", spec));
      report.exitCode = 1;
      return report;
    }
    if (!r.shape().isArray()) {
      diags.error(fmt::format("result {} is a {}; only arrays can be written as .npy", i, r.shape().toString(false)));
      report.exitCode = 1;
      return report;
    }
    if (!writeBinaryOutputFile(*path, writeNpy(npyFromLiteral(r)), options.forceBinaryToTerminal,
                               "use --output=@FILE.npy, --output=- to print it as text, or -f", diags)) {
      report.exitCode = 1;
      return report;
    }
  }
  for (size_t i = 0; i < options.expected.size(); ++i) {
    const hlo::Literal& r = *leaves[i];
    auto want =
        readTensor(options.expected[i], r.shape(), fmt::format("expected output {}", i), "result", diags);
    if (!want) {
      report.exitCode = 1;
      return report;
    }
    if (auto diff = compareLiterals(r, *want, options.atol, options.rtol)) {
      diags.error(fmt::format("result {} does not match the expected output: {}", i, *diff));
      report.exitCode = 1;
      return report;
    }
  }
  return report;
}

namespace {

// A module partitioned by hlo-partition takes global arrays, as jax.Array
// does: each input is split per its parameter's sharding, and the result is
// joined from the devices' shards per the root's sharding.
std::optional<RunReport> runPartitioned(const hlo::Module& module, const RunOptions& options,
                                        DiagnosticEngine& diags) {
  RunReport failed;
  failed.exitCode = 1;
  int64_t partitions = options.partitions > 0 ? options.partitions : std::max<int64_t>(module.config().numPartitions, 1);
  int64_t replicas = options.replicas > 0 ? options.replicas : std::max<int64_t>(module.config().replicaCount, 1);
  bool bad = false;
  std::optional<spmd::GlobalEdges> edges = spmd::globalEdges(module, partitions, diags, &bad);
  if (bad) return failed;
  if (!edges) return std::nullopt;
  auto args = prepareArgumentsForShapes(edges->parameters, options, diags);
  if (!args) return failed;
  std::vector<std::vector<hlo::Literal>> perDevice = spmd::argumentShards(*edges, *args, replicas, partitions);
  eval::EvalOptions eo;
  eo.replicas = replicas;
  eo.partitions = partitions;
  eo.elidedConstantsAreErrors = options.elidedConstantsAreErrors;
  eo.maxSteps = options.maxSteps;
  eo.rngSeed = options.seed.value_or(0);
  std::optional<eval::EvalResult> r = eval::evaluatePerDevice(module, perDevice, eo, diags);
  if (!r) return failed;
  std::vector<hlo::Literal> replica0(r->perDevice.begin(), r->perDevice.begin() + partitions);
  hlo::Literal joined = spmd::joinShards(replica0, edges->result, edges->resultSharding);
  return deliverResults(joined, options, diags);
}

}  // namespace

RunReport runInterpreter(const hlo::Module& module, const RunOptions& options, DiagnosticEngine& diags) {
  RunReport failed;
  failed.exitCode = 1;
  if (std::optional<RunReport> partitioned = runPartitioned(module, options, diags)) return *partitioned;
  auto args = prepareArguments(module, options, diags);
  if (!args) return failed;
  eval::EvalOptions eo;
  eo.replicas = options.replicas;
  eo.partitions = options.partitions;
  eo.elidedConstantsAreErrors = options.elidedConstantsAreErrors;
  eo.maxSteps = options.maxSteps;
  eo.rngSeed = options.seed.value_or(0);
  std::optional<hlo::Literal> result = eval::evaluate(module, *args, eo, diags);
  if (!result) return failed;
  return deliverResults(*result, options, diags);
}

}  // namespace tpu::runner
