// hlo-partition: sharding propagation and SPMD partitioning. All logic
// lives in src/spmd; this is the tool's spec over the HLO tool driver.
#include "passes/driver/hlo_tool_driver.h"
#include "passes/pass.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"

int main(int argc, char** argv) {
  tpu::Tool tool({
      .name = "hlo-partition",
      .summary = "Propagate shardings through an HLO module and partition it into one SPMD program per device.",
      .examples = "  hlo-partition sharded.hlo -o sharded.spmd.hlo  partition over the module's num_partitions\n"
                  "  hlo-partition --num-partitions=4 sharded.hlo   partition over 4 devices\n"
                  "  hlo-partition --propagate-only sharded.hlo     print the module with every sharding\n"
                  "  hlo-partition --stats sharded.hlo -o /dev/null\n                                                 per-device communication bytes by collective\n",
      .emitKinds = "text|binary",
      .runsPasses = true,
  });
  static tpu::spmd::SpmdOptions options;
  static bool propagateOnly = false;
  tool.cli().add_flag("--propagate-only", propagateOnly, "Only propagate shardings; print the annotated module");
  tool.cli()
      .add_option("--num-partitions", options.numPartitions,
                  "Devices to partition over (default: the module's num_partitions, else the devices its "
                  "shardings name)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  tool.cli()
      .add_option("--windowed-einsum-threshold-mib", options.windowedEinsumThresholdMib,
                  "Dots that would all-gather an operand of at least N MiB per device loop over its pieces "
                  "with collective-permutes instead (windowed einsum); 0: always, -1 (default): never")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 20));
  tpu::passes::addHloToolOptions(tool);
  return tool.run(argc, argv, [](tpu::Tool& t) {
    tpu::spmd::registerSpmdPasses(tpu::passes::PassRegistry::global(), &options);
    tpu::passes::HloToolConfig config;
    config.defaultPipeline = propagateOnly ? "sharding-propagation" : "sharding-propagation,spmd-partition,dce";
    config.moreStats = [](const tpu::hlo::Module& m, const std::string& format) {
      return tpu::spmd::formatCommunicationStats(m, format == "json");
    };
    return tpu::passes::runHloTool(t, config);
  });
}
