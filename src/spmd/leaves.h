// Shardings of every leaf of a (possibly tuple) shape, in pre-order.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "hlo/instruction.h"
#include "spmd/sharding.h"
#include "support/diagnostics.h"

namespace tpu::spmd {

using Leaves = std::vector<Tiling>;

// Every non-tuple leaf of `shape` in pre-order (tokens included).
std::vector<const hlo::Shape*> leafShapes(const hlo::Shape& shape);
int64_t countLeaves(const hlo::Shape& shape);
// Leaf offset and count of tuple element `index`.
std::pair<size_t, size_t> leafRange(const hlo::Shape& tuple, int64_t index);

Leaves replicatedLeaves(const hlo::Shape& shape, int64_t numDevices);
// The instruction's sharding attribute per leaf; reports a located error
// naming the instruction when it does not fit its shape or the devices.
std::optional<Leaves> readSharding(const hlo::Instruction& inst, int64_t numDevices, DiagnosticEngine& diags);
// Back to an attribute: one sharding for an array, a tuple sharding otherwise.
hlo::Sharding toHloSharding(const hlo::Shape& shape, const Leaves& leaves);

}  // namespace tpu::spmd
