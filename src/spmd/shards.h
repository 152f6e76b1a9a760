// Global arrays at the edges of a partitioned program (as jax.Array
// behaves): a global value split into each device's (padded) shard, and the
// devices' shards joined back into the global value.
#pragma once

#include <optional>
#include <vector>

#include "hlo/literal.h"
#include "spmd/leaves.h"

namespace tpu::spmd {

// Device d's shard of `global` under `leaves` (tuples leaf by leaf);
// padding elements are zero.
hlo::Literal shardOf(const hlo::Literal& global, const Leaves& leaves, int64_t device);
// The global value of shape `global` from every device's shard (replicas
// of a tile must agree; the first device holding a tile wins).
hlo::Literal joinShards(const std::vector<hlo::Literal>& perDevice, const hlo::Shape& global, const Leaves& leaves);

}  // namespace tpu::spmd
