// Sharding propagation (shared/spec/SPMD.md §3): every instruction of the
// module gets a sharding, from user annotations and `Sharding` custom
// calls, carried forward (operands -> instruction) and backward (users ->
// operands) until nothing changes. Annotated instructions keep theirs; a
// candidate replaces an inferred sharding only when it has more tiles.
#pragma once

#include <cstdint>
#include <string_view>

#include "passes/pass.h"
#include "spmd/sharding.h"

namespace tpu::spmd {

struct SpmdOptions {
  // Devices to partition over; 0 = the module's num_partitions, else the
  // number of devices its shardings name.
  int64_t numPartitions = 0;
  // Dots whose strategy all-gathers an operand along a free dim of at least
  // this many MiB (after gathering, per device) loop over its pieces instead
  // (windowed einsum, SPMD.md 4.4). -1: never; 0: always.
  int64_t windowedEinsumThresholdMib = -1;
};

// The device count the module is partitioned over (options, the module's
// num_partitions, or the largest device count its shardings name).
int64_t partitionCount(const hlo::Module& module, const SpmdOptions& options);

// Checks every sharding of the module against `numPartitions` (located
// errors) and propagates. Returns false after reporting errors.
bool propagateShardings(hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags);

class ShardingPropagationPass : public passes::Pass {
 public:
  explicit ShardingPropagationPass(const SpmdOptions* options) : options_(options) {}
  std::string_view name() const override { return "sharding-propagation"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  const SpmdOptions* options_;
};

}  // namespace tpu::spmd
