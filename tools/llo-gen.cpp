// llo-gen: lower a verified HLO module (text or .hlob) to LLO assembly
// text for one TensorCore of the target chip. All logic is in tpu_codegen.
#include <fmt/format.h>

#include "codegen/codegen.h"
#include "hlo/io/hlo_io.h"
#include "support/tool.h"
#include "target/target.h"

int main(int argc, char** argv) {
  tpu::ToolSpec spec;
  spec.name = "llo-gen";
  spec.summary = "Lower an HLO module (text or .hlob) to LLO assembly (.llo) for a TPU-like chip";
  spec.examples =
      "  llo-gen model.hlo -o model.llo                  compile for the default target (v5e)\n"
      "  hlo-parse m.hlo | llo-gen | llo-asm -o m.tpu    the whole pipeline\n"
      "  llo-gen --target=v4 --stats=json m.hlo -o m.llo  per-kernel FLOPs, bytes, cycles\n"
      "  llo-gen --f32-dot-precision=highest m.hlo       six bf16 passes for every f32 dot\n"
      "  llo-gen --schedule=none m.hlo                   one op per line, unscheduled (debugging)\n"
      "  llo-gen --topology=2x4 pod.hlo -o pod.llo       collectives for 8 chips on a 2x4 slice\n";
  spec.usesTarget = true;
  tpu::Tool tool(spec);
  std::string precision = "config";
  std::string entry = "main";
  std::string schedule = "list";
  tool.cli()
      .add_option("--f32-dot-precision", precision,
                  "bf16 passes of f32 dots: config (follow precision_config), default (1), high (3), highest (6)")
      ->check(CLI::IsMember({"config", "default", "high", "highest"}));
  tool.cli()
      .add_option("--schedule", schedule,
                  "Bundling: list (list-schedule each basic block, print `{ op ; op }` bundles; default) or none "
                  "(one op per line, bundled greedily by llo-asm)")
      ->check(CLI::IsMember({"none", "list"}));
  bool physicalEdges = false;
  tool.cli().add_flag("--physical-edges", physicalEdges,
                      "Store the entry arguments and results in HBM in their layouts' physical form (tiles, padding, "
                      "minor_to_major), relaid by copies at the edges (default: dense row-major)");
  tool.cli().add_option("--entry-name", entry, "Name of the entry point in the LLO program (default main)");
  int64_t replicas = 0, partitions = 0;
  std::string topology;
  tool.cli()
      .add_option("--replicas", replicas,
                  "Pods: replicas the program runs on (default: the module's replica_count, raised to what its "
                  "collectives name)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  tool.cli()
      .add_option("--partitions", partitions, "Pods: partitions the program runs on (default: the module's "
                                              "num_partitions, raised to what its collectives name)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  tool.cli().add_option("--topology", topology,
                        "Pods: the slice the chips sit on, like 2x4 or 2x2x2 (default: the target's most square "
                        "slice); it orders the collectives' rings");
  std::string allReduce = "auto";
  tool.cli()
      .add_option("--all-reduce", allReduce,
                  "Pods: all-reduce over every chip as rings along each torus axis (axes), one snake ring "
                  "through all chips (snake), or axes when every long axis has 4 chips or more (auto, default)")
      ->check(CLI::IsMember({"auto", "snake", "axes"}));
  return tool.run(argc, argv, [&](tpu::Tool& t) -> int {
    auto input = t.readInput();
    if (!input) return tpu::kExitFailure;
    std::shared_ptr<tpu::SourceFile> source(input.release());
    tpu::hlo::LoadedModule loaded = tpu::hlo::readModule(source, t.diags());
    if (!loaded.module) return tpu::kExitFailure;
    auto target = tpu::target::loadTarget(t.options().target, t.diags());
    if (!target) return tpu::kExitFailure;
    tpu::codegen::CodegenOptions options;
    options.targetSpec = t.options().target;
    options.entryName = entry;
    options.schedule = *tpu::llo::scheduleModeFromName(schedule);
    options.replicas = replicas;
    options.partitions = partitions;
    options.topology = topology;
    options.physicalEdges = physicalEdges;
    if (allReduce == "snake") options.allReduceRings = tpu::codegen::CodegenOptions::AllReduceRings::Snake;
    if (allReduce == "axes") options.allReduceRings = tpu::codegen::CodegenOptions::AllReduceRings::Axes;
    if (precision == "default") options.f32DotPrecision = tpu::codegen::F32DotPrecision::Default;
    if (precision == "high") options.f32DotPrecision = tpu::codegen::F32DotPrecision::High;
    if (precision == "highest") options.f32DotPrecision = tpu::codegen::F32DotPrecision::Highest;
    auto result = tpu::codegen::generateLlo(*loaded.module, *target, options, t.diags());
    if (!result) return tpu::kExitFailure;
    const auto& stats = t.options().stats;
    if (!stats.empty() && !t.writeStats(stats == "json" ? tpu::codegen::renderStatsJson(result->stats)
                                                        : tpu::codegen::renderStatsText(result->stats)))
      return tpu::kExitFailure;
    return t.writeOutput(result->llo, false) ? tpu::kExitSuccess : tpu::kExitFailure;
  });
}
