// Verification by running: a module partitioned over N devices, run in the
// reference interpreter on the shards of seeded inputs, must give what the
// unpartitioned module gives on one device.
#pragma once

#include <cstdint>
#include <string>

#include "hlo/module.h"
#include "spmd/propagation.h"

namespace tpu::spmd {

struct CheckReport {
  bool ok = false;
  std::string message;        // why not (errors, first mismatch)
  std::string partitioned;    // the partitioned module's text
  int64_t collectives = 0;    // collectives in the partitioned program
};

// Propagates, partitions over `numPartitions`, runs both programs on
// arguments from `seed` and compares (floats within `tolerance`, relative
// to the largest magnitude; integers exactly).
// `referenceText`, when given, is the module run on one device instead
// (for programs that only mean something on many devices, as shard_map's).
// `options` (may be null) turns on optional strategies (windowed einsum).
CheckReport checkPartitioning(const std::string& hloText, int64_t numPartitions, uint64_t seed,
                              double tolerance = 1e-5, const std::string& referenceText = "",
                              const SpmdOptions* options = nullptr);

}  // namespace tpu::spmd
