// How tilings map through ops: shared by propagation (which picks
// shardings) and the partitioner (which asks what its operands must hold).
#pragma once

#include <optional>
#include <vector>

#include "hlo/instruction.h"
#include "spmd/sharding.h"

namespace tpu::spmd {

// Reshape from `in` dims to `out` dims: the tiling of the result when the
// operand has `t`. Tiled dims that do not map cleanly (the first dim of a
// group of dims with the same element count, tile count dividing both
// sizes) become replicated; `*exact` says whether none did.
Tiling reshapeTiling(const Tiling& t, const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool* exact);

// Broadcast: operand tiling -> result tiling and back.
Tiling broadcastForward(const Tiling& operand, const hlo::Instruction& broadcast);
Tiling broadcastBackward(const Tiling& result, const hlo::Instruction& broadcast);

// Dot: the "dot space" is the output dims followed by the contracting dims
// (in lhs contracting order).
struct DotSpace {
  int64_t batch = 0, lhsFree = 0, rhsFree = 0, contracting = 0;
  std::vector<int64_t> lhsPos;  // lhs dim -> dot-space position
  std::vector<int64_t> rhsPos;
  int64_t outRank() const { return batch + lhsFree + rhsFree; }
};
DotSpace dotSpace(const hlo::Instruction& dot);
// Projections of a dot-space tiling.
Tiling dotLhs(const Tiling& d, const DotSpace& s);
Tiling dotRhs(const Tiling& d, const DotSpace& s);
Tiling dotOutPartial(const Tiling& d, const DotSpace& s);  // contracting tiling -> replication (partial sums)
// A dot-space tiling from an operand's tiling (0 = lhs, 1 = rhs), or from the output's.
Tiling dotSpaceFromOperand(const Tiling& t, const DotSpace& s, int operand);
Tiling dotSpaceFromOutput(const Tiling& t, const DotSpace& s);

// A tiling carried to an array of rank `srcDim.size()` whose dim i is dim
// srcDim[i] of `t`'s array (-1: a dim with no counterpart, untiled). Dims of
// `t` no entry names become replication.
Tiling projectTiling(const Tiling& t, const std::vector<int64_t>& srcDim);

// Gather / scatter dims that move together (SPMD.md 3.2, 4.4). For a
// gather, "out" is the result; for a scatter, the updates (the scatter's
// result is shaped and tiled like its operand).
struct IndexedMap {
  std::vector<int64_t> outOfOperand;  // operand dim -> out dim (passthrough: whole slice; batching dims) or -1
  std::vector<int64_t> outOfIndex;    // index dim -> out batch dim, -1 for the index vector dim
  std::vector<int64_t> operandOfOut;  // inverses
  std::vector<int64_t> indexOfOut;
};
IndexedMap gatherMap(const hlo::Instruction& gather);
IndexedMap scatterMap(const hlo::Instruction& scatter);

}  // namespace tpu::spmd
