// tpu-run's simulator mode: the same tensor I/O as the interpreter mode, with
// the machine program's entry signature standing in for HLO parameter shapes.
#include <algorithm>
#include <cstring>

#include "codegen/codegen.h"
#include "runner/profile_output.h"
#include "runner/run.h"
#include "support/file_io.h"

namespace tpu::runner {

namespace {

std::optional<hlo::Shape> shapeOf(const sim::TensorSpec& spec, std::string_view role, size_t index,
                                  DiagnosticEngine& diags) {
  auto type = hlo::elementTypeFromName(isa::dtypeName(spec.dtype));
  if (!type) {
    diags.error(fmt::format("{} {} ('{}') has type {}, which tensors cannot hold", role, index, spec.name,
                            isa::dtypeName(spec.dtype)));
    return std::nullopt;
  }
  hlo::Shape shape(*type, spec.shape);
  shape.setDefaultLayoutIfMissing();
  std::optional<int64_t> bytes = shape.byteSize();
  if (!bytes || static_cast<uint64_t>(*bytes) != spec.bytes) {
    diags.error(fmt::format("{} {} ('{}'): {} needs {} bytes but the program's buffer has {}", role, index,
                            spec.name, shape.toString(false), bytes.value_or(-1), spec.bytes));
    return std::nullopt;
  }
  return shape;
}

}  // namespace

RunReport runSimulator(const sim::LoadedProgram& loaded, const RunOptions& options, const SimulatorRequest& request,
                       std::string& statsText, DiagnosticEngine& diags) {
  RunReport failed;
  failed.exitCode = 1;
  auto signature = sim::entrySignature(loaded.program, request.run.entry, diags);
  if (!signature) return failed;

  std::vector<hlo::Shape> parameterShapes, resultShapes;
  for (size_t i = 0; i < signature->args.size(); ++i) {
    auto shape = shapeOf(signature->args[i], "argument", i, diags);
    if (!shape) return failed;
    parameterShapes.push_back(std::move(*shape));
  }
  for (size_t i = 0; i < signature->results.size(); ++i) {
    auto shape = shapeOf(signature->results[i], "result", i, diags);
    if (!shape) return failed;
    resultShapes.push_back(std::move(*shape));
  }

  // llo-gen's rng_state argument is seeded as the interpreter's stream is
  // (--seed, default 0) unless an --input gives it.
  const bool seedRngState =
      codegen::takesRngState(loaded.program, signature->entry) && options.inputs.size() < parameterShapes.size();
  if (seedRngState) parameterShapes.pop_back();
  auto args = prepareArgumentsForShapes(parameterShapes, options, diags);
  if (!args) return failed;
  // Viewed, not copied: the simulator writes them straight into its pages.
  std::vector<std::string_view> inputs;
  for (const hlo::Literal& arg : *args)
    inputs.emplace_back(reinterpret_cast<const char*>(arg.data().data()), arg.data().size());
  std::string rngState;
  if (seedRngState) {
    rngState = codegen::initialRngState(options.seed.value_or(0));
    inputs.push_back(rngState);
  }

  sim::RunRequest run = request.run;
  profile::KernelMap kernels;
  if (request.wantsProfile()) {
    kernels = profile::mapKernels(loaded.program, nullptr, request.lloText, nullptr);
    run.profile = true;
    run.bundleRegion = kernels.bundleRegion;
  }
  // --replicas x --partitions; without them, what a program llo-gen
  // compiled for a pod records (codegen::kPodDevicesBuffer), else one chip.
  int64_t replicas = options.replicas, partitions = options.partitions;
  if (replicas <= 0 && partitions <= 0) {
    if (auto b = loaded.program.findBuffer(codegen::kPodDevicesBuffer)) {
      const isa::Buffer& buf = loaded.program.buffers[*b];
      if (buf.init >= 0 && static_cast<size_t>(buf.init) < loaded.program.data.size() &&
          loaded.program.data[static_cast<size_t>(buf.init)].bytes.size() == 8) {
        uint32_t words[2];
        std::memcpy(words, loaded.program.data[static_cast<size_t>(buf.init)].bytes.data(), 8);
        if (words[0] >= 1 && words[1] >= 1 && uint64_t{words[0]} * words[1] <= 4096)
          replicas = words[0], partitions = words[1];
      }
    }
  }
  run.chips = static_cast<int>(std::max<int64_t>(1, replicas) * std::max<int64_t>(1, partitions));
  auto out = sim::runLoadedProgramViews(loaded, inputs, run, diags);
  if (!out) return failed;
  if (out->secondaryRank) return RunReport{};  // mpirun: rank 0 delivers everything
  std::string profileText;
  if (request.wantsProfile() &&
      !deliverProfile(*out, loaded.program, kernels, nullptr, nullptr, request, profileText, diags))
    return failed;
  statsText += out->statsText;

  if (out->results.size() != resultShapes.size()) {
    diags.error(fmt::format("the simulator returned {} results for an entry with {}", out->results.size(),
                            resultShapes.size()));
    return failed;
  }
  std::vector<hlo::Literal> results;
  for (size_t i = 0; i < resultShapes.size(); ++i) {
    hlo::Literal literal(resultShapes[i]);
    if (literal.data().size() != out->results[i].size()) {
      diags.error(fmt::format("result {} has {} bytes, expected {}", i, out->results[i].size(), literal.data().size()));
      return failed;
    }
    std::memcpy(literal.mutableData().data(), out->results[i].data(), out->results[i].size());
    results.push_back(std::move(literal));
  }
  hlo::Literal result = results.size() == 1 ? std::move(results[0]) : hlo::Literal::tuple(std::move(results));
  RunReport report = deliverResults(result, options, diags);
  report.profileText = std::move(profileText);
  return report;
}

}  // namespace tpu::runner
