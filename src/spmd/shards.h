// Global arrays at the edges of a partitioned program (as jax.Array
// behaves): a global value split into each device's (padded) shard, and the
// devices' shards joined back into the global value.
#pragma once

#include <optional>
#include <vector>

#include "hlo/literal.h"
#include "hlo/module.h"
#include "spmd/leaves.h"

namespace tpu::spmd {

// Device d's shard of `global` under `leaves` (tuples leaf by leaf);
// padding elements are zero.
hlo::Literal shardOf(const hlo::Literal& global, const Leaves& leaves, int64_t device);
// The global value of shape `global` from every device's shard (replicas
// of a tile must agree; the first device holding a tile wins).
hlo::Literal joinShards(const std::vector<hlo::Literal>& perDevice, const hlo::Shape& global, const Leaves& leaves);

}  // namespace tpu::spmd

namespace tpu::spmd {

// The edges of a module partitioned by hlo-partition: each entry
// parameter's and the root's global shape and sharding.
struct GlobalEdges {
  std::vector<hlo::Shape> parameters;
  std::vector<Leaves> parameterShardings;
  hlo::Shape result;
  Leaves resultSharding;
};

// nullopt when the entry does not carry the global shapes (not partitioned
// by hlo-partition); reports an error and returns nullopt when they are bad.
std::optional<GlobalEdges> globalEdges(const hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags,
                                       bool* failed);

// Every device's entry arguments, device = replica * partitions + partition:
// its shard of each global argument (every replica holds the same shards).
std::vector<std::vector<hlo::Literal>> argumentShards(const GlobalEdges& edges,
                                                      const std::vector<hlo::Literal>& arguments, int64_t replicas,
                                                      int64_t partitions);

}  // namespace tpu::spmd
