// The SPMD partitioner (shared/spec/SPMD.md §4): rewrites a module whose
// instructions carry shardings (after propagation) into the one program
// every device runs on its own shard, with the collectives that join them.
#pragma once

#include <string>
#include <string_view>

#include "passes/pass.h"
#include "spmd/propagation.h"

namespace tpu::spmd {

// The frontend attribute on the partitioned entry's parameters and root
// holding their global (unpartitioned) shape, so a runner can split global
// inputs and join the devices' outputs (tpu-run --interpret).
inline constexpr std::string_view kGlobalShapeAttribute = "spmd_global_shape";

// Partitions `module` over `numPartitions` devices. Entry parameters and
// the root keep their shardings (a runner splits inputs and joins outputs
// with them); everything else is local code. Returns false after reporting
// an error naming the op and shardings no strategy handles.
// `options` (may be null) chooses optional strategies (windowed einsum).
bool partitionModule(hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags,
                     const SpmdOptions* options = nullptr);

// True for a module that already is a per-device program: an entry named
// *_spmd (XLA's partitioner output) or cross-partition collectives /
// partition-id outside manual regions. The passes leave it unchanged.
bool isPartitioned(const hlo::Module& module);

class SpmdPartitionPass : public passes::Pass {
 public:
  explicit SpmdPartitionPass(const SpmdOptions* options) : options_(options) {}
  std::string_view name() const override { return "spmd-partition"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  const SpmdOptions* options_;
};

// Registers sharding-propagation and spmd-partition (options may be null:
// defaults; otherwise kept alive by the caller).
void registerSpmdPasses(passes::PassRegistry& registry, const SpmdOptions* options);

// Per-device bytes each collective kind receives, summed over the entry
// computation (loops count once per body), as a text block or JSON members.
std::string formatCommunicationStats(const hlo::Module& module, bool json);

}  // namespace tpu::spmd
