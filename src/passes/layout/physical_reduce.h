// The physical-edges sinker's rule for row fusions (softmax, layer norm,
// RMS norm): a fusion that reduces its rows over the last logical dimension
// and broadcasts the row values back over them runs on the T(8,128) tiles
// of its operands instead of on their relayouts.
//
// Under T(8,128) a logical [.., a, b] array is [.., a/8, b/128, 8, 128]:
// the reduced dimension b is the digits (b/128, 128), the rows are (a/8, 8).
// The twin reduces over those two physical dimensions, its row values are
// [.., a/8, 8] and broadcast back over them, and a row vector v[b] (a scale
// or bias) is read as [b/128, 128]. The reduction visits a row's elements in
// the same logical order (the reduced digits are the logical column, major
// to minor), so the twin means exactly what the fusion meant; rows.cpp
// lowers it as a row fusion whose vregs are whole tiles (8 rows each).
//
// Padding rows (a not a multiple of 8) are computed and never read.
// Padding lanes would be folded into the row values, so b must be a
// multiple of 128 (masking the last tile's lanes is not done).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hlo/module.h"
#include "hlo/shape.h"
#include "passes/layout/physical_value.h"

namespace tpu::passes::layout {

// What the rule added to the entry computation for fusion `in`: the twin
// fusion (its value stored as `key` says) and the reshapes of row vectors
// (to be removed when unused).
struct RowFusionTwin {
  hlo::Instruction* twin = nullptr;
  hlo::Shape key;
  std::vector<hlo::Instruction*> added;
};

// The twin of row fusion `in` over the physical arrays of its row-shaped
// operands, added to `entry` (its fused computation to `module`), or
// nullopt when `in` is not such a fusion or an operand is not physical
// under one T(8,128) tile with the reduced dimension in the lanes.
// `physicalOf` gives a logical value's twin, `fresh` unique instruction
// names.
std::optional<RowFusionTwin> rowFusionOnTiles(
    hlo::Module& module, hlo::Computation& entry, hlo::Instruction* in,
    const std::function<std::optional<PhysicalValue>(hlo::Instruction*)>& physicalOf,
    const std::function<std::string(const std::string&)>& fresh);

}  // namespace tpu::passes::layout
