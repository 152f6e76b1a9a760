#include "spmd/rules.h"

#include <algorithm>
#include <numeric>

namespace tpu::spmd {

Tiling reshapeTiling(const Tiling& t, const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool* exact) {
  *exact = true;
  std::vector<int64_t> outTiles(out.size(), 1);
  std::vector<int64_t> drop;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    // One group: the shortest runs with equal products (size-1 dims alone).
    size_t i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    if (i < in.size() && in[i] == 1) {
      if (t.tile(static_cast<int64_t>(i)) > 1) drop.push_back(static_cast<int64_t>(i));
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      ++j;
      continue;
    }
    if (i < in.size()) pi *= in[i++];
    if (j < out.size()) pj *= out[j++];
    while (pi != pj && (i < in.size() || j < out.size())) {
      if (pi < pj && i < in.size()) pi *= in[i++];
      else if (j < out.size()) pj *= out[j++];
      else pi *= in[i++];
    }
    bool mapped = false;
    for (size_t a = i0; a < i; ++a) {
      int64_t k = t.tile(static_cast<int64_t>(a));
      if (k == 1) continue;
      bool ok = false;
      if (a == i0 && j0 < out.size()) {
        if (i - i0 == 1 && j - j0 == 1) ok = true;  // same size
        else ok = in[a] % k == 0 && out[j0] % k == 0;
      }
      if (ok && !mapped) {
        outTiles[j0] = k;
        mapped = true;
      } else {
        drop.push_back(static_cast<int64_t>(a));
      }
    }
  }
  if (!drop.empty()) *exact = false;
  Tiling r = t.replicatedOn(drop);
  return r.withTiles(outTiles);
}

Tiling broadcastForward(const Tiling& operand, const hlo::Instruction& b) {
  const auto& dims = b.attrs().dimensions;
  int64_t outRank = b.shape().rank();
  // Order operand dims by their output position, then fill the new dims with 1.
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return dims[static_cast<size_t>(x)] < dims[static_cast<size_t>(y)]; });
  Tiling t = operand.transposed(order);
  std::vector<int64_t> tiles(static_cast<size_t>(outRank), 1);
  for (size_t k = 0; k < dims.size(); ++k) tiles[static_cast<size_t>(dims[k])] = operand.tile(static_cast<int64_t>(k));
  return t.withTiles(tiles);
}

Tiling broadcastBackward(const Tiling& result, const hlo::Instruction& b) {
  const auto& dims = b.attrs().dimensions;
  std::vector<bool> kept(static_cast<size_t>(result.rank()), false);
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = true;
  std::vector<int64_t> newDims;
  for (int64_t d = 0; d < result.rank(); ++d)
    if (!kept[static_cast<size_t>(d)]) newDims.push_back(d);
  Tiling t = result.replicatedOn(newDims).withRemovedDims(newDims);
  // t's dims are the operand dims ordered by output position.
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t d : dims) perm.push_back(std::lower_bound(sorted.begin(), sorted.end(), d) - sorted.begin());
  return t.transposed(perm);
}

DotSpace dotSpace(const hlo::Instruction& dot) {
  const hlo::DotDimensionNumbers& dn = *dot.attrs().dotDims;
  DotSpace s;
  int64_t lr = dot.operand(0)->shape().rank(), rr = dot.operand(1)->shape().rank();
  s.batch = static_cast<int64_t>(dn.lhsBatchDimensions.size());
  s.contracting = static_cast<int64_t>(dn.lhsContractingDimensions.size());
  s.lhsFree = lr - s.batch - s.contracting;
  s.rhsFree = rr - s.batch - s.contracting;
  s.lhsPos.assign(static_cast<size_t>(lr), -1);
  s.rhsPos.assign(static_cast<size_t>(rr), -1);
  for (int64_t k = 0; k < s.batch; ++k) {
    s.lhsPos[static_cast<size_t>(dn.lhsBatchDimensions[static_cast<size_t>(k)])] = k;
    s.rhsPos[static_cast<size_t>(dn.rhsBatchDimensions[static_cast<size_t>(k)])] = k;
  }
  int64_t outRank = s.batch + s.lhsFree + s.rhsFree;
  for (int64_t k = 0; k < s.contracting; ++k) {
    s.lhsPos[static_cast<size_t>(dn.lhsContractingDimensions[static_cast<size_t>(k)])] = outRank + k;
    s.rhsPos[static_cast<size_t>(dn.rhsContractingDimensions[static_cast<size_t>(k)])] = outRank + k;
  }
  int64_t next = s.batch;
  for (auto& p : s.lhsPos)
    if (p < 0) p = next++;
  for (auto& p : s.rhsPos)
    if (p < 0) p = next++;
  return s;
}

namespace {

// Project the dot space onto an operand whose dims sit at `pos`: other dims
// become replication, then the dims are put in operand order.
Tiling project(const Tiling& d, const std::vector<int64_t>& pos) {
  std::vector<bool> used(static_cast<size_t>(d.rank()), false);
  for (int64_t p : pos) used[static_cast<size_t>(p)] = true;
  std::vector<int64_t> drop;
  for (int64_t k = 0; k < d.rank(); ++k)
    if (!used[static_cast<size_t>(k)]) drop.push_back(k);
  Tiling t = d.replicatedOn(drop).withRemovedDims(drop);
  // t's dims: the used positions in increasing order.
  std::vector<int64_t> sorted = pos;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t p : pos) perm.push_back(std::lower_bound(sorted.begin(), sorted.end(), p) - sorted.begin());
  return t.transposed(perm);
}

// The inverse: an operand tiling placed at `pos` of a space of `rank` dims.
Tiling embed(const Tiling& t, const std::vector<int64_t>& pos, int64_t rank) {
  // Order operand dims by position, then insert the missing dims.
  std::vector<int64_t> order(pos.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pos[static_cast<size_t>(a)] < pos[static_cast<size_t>(b)]; });
  Tiling s = t.transposed(order);
  std::vector<int64_t> tiles(static_cast<size_t>(rank), 1);
  for (size_t k = 0; k < pos.size(); ++k) tiles[static_cast<size_t>(pos[k])] = t.tile(static_cast<int64_t>(k));
  return s.withTiles(tiles);
}

}  // namespace

Tiling dotLhs(const Tiling& d, const DotSpace& s) { return project(d, s.lhsPos); }
Tiling dotRhs(const Tiling& d, const DotSpace& s) { return project(d, s.rhsPos); }

Tiling dotOutPartial(const Tiling& d, const DotSpace& s) {
  std::vector<int64_t> pos(static_cast<size_t>(s.outRank()));
  std::iota(pos.begin(), pos.end(), 0);
  return project(d, pos);
}

Tiling dotSpaceFromOperand(const Tiling& t, const DotSpace& s, int operand) {
  return embed(t, operand == 0 ? s.lhsPos : s.rhsPos, s.outRank() + s.contracting);
}

Tiling dotSpaceFromOutput(const Tiling& t, const DotSpace& s) {
  std::vector<int64_t> pos(static_cast<size_t>(s.outRank()));
  std::iota(pos.begin(), pos.end(), 0);
  return embed(t, pos, s.outRank() + s.contracting);
}

Tiling projectTiling(const Tiling& t, const std::vector<int64_t>& srcDim) {
  std::vector<int64_t> kept, dropped;
  for (int64_t d = 0; d < t.rank(); ++d)
    (std::find(srcDim.begin(), srcDim.end(), d) != srcDim.end() ? kept : dropped).push_back(d);
  Tiling r = t.replicatedOn(dropped).withRemovedDims(dropped);  // dims: kept, in order
  int64_t fresh = 0;
  for (int64_t s : srcDim) fresh += s < 0;
  std::vector<int64_t> positions;
  for (int64_t k = 0; k < fresh; ++k) positions.push_back(static_cast<int64_t>(kept.size()) + k);
  r = r.withInsertedDims(positions);
  std::vector<int64_t> perm;
  int64_t next = static_cast<int64_t>(kept.size());
  for (int64_t s : srcDim)
    perm.push_back(s < 0 ? next++ : static_cast<int64_t>(std::find(kept.begin(), kept.end(), s) - kept.begin()));
  return r.transposed(perm);
}

namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

void invert(IndexedMap& m, int64_t outRank) {
  m.operandOfOut.assign(static_cast<size_t>(outRank), -1);
  m.indexOfOut.assign(static_cast<size_t>(outRank), -1);
  for (size_t p = 0; p < m.outOfOperand.size(); ++p)
    if (m.outOfOperand[p] >= 0) m.operandOfOut[static_cast<size_t>(m.outOfOperand[p])] = static_cast<int64_t>(p);
  for (size_t i = 0; i < m.outOfIndex.size(); ++i)
    if (m.outOfIndex[i] >= 0) m.indexOfOut[static_cast<size_t>(m.outOfIndex[i])] = static_cast<int64_t>(i);
}

// Shared by gather and scatter: `windowDims` (out dims holding operand
// slices, in operand order), operand dims with no window (collapsed /
// inserted, batching), the slice size per operand dim.
IndexedMap buildMap(const hlo::Shape& operand, const hlo::Shape& indices, int64_t outRank,
                    const std::vector<int64_t>& windowDims, const std::vector<int64_t>& noWindow,
                    const std::vector<int64_t>& operandBatching, const std::vector<int64_t>& indexBatching,
                    int64_t indexVectorDim, const std::vector<int64_t>& sliceSize) {
  IndexedMap m;
  int64_t indexRank = indices.rank();
  m.outOfIndex.assign(static_cast<size_t>(indexRank), -1);
  std::vector<int64_t> batchOut;
  for (int64_t d = 0; d < outRank; ++d)
    if (!contains(windowDims, d)) batchOut.push_back(d);
  size_t b = 0;
  for (int64_t i = 0; i < indexRank; ++i) {
    if (i == indexVectorDim) continue;
    if (b < batchOut.size()) m.outOfIndex[static_cast<size_t>(i)] = batchOut[b++];
  }
  m.outOfOperand.assign(static_cast<size_t>(operand.rank()), -1);
  size_t w = 0;
  for (int64_t p = 0; p < operand.rank(); ++p) {
    if (contains(noWindow, p) || contains(operandBatching, p)) continue;
    if (w >= windowDims.size()) break;
    int64_t out = windowDims[w++];
    if (sliceSize[static_cast<size_t>(p)] == operand.dimension(p)) m.outOfOperand[static_cast<size_t>(p)] = out;
  }
  for (size_t k = 0; k < operandBatching.size() && k < indexBatching.size(); ++k) {
    int64_t i = indexBatching[k];
    if (i >= 0 && i < indexRank) m.outOfOperand[static_cast<size_t>(operandBatching[k])] = m.outOfIndex[static_cast<size_t>(i)];
  }
  invert(m, outRank);
  return m;
}

}  // namespace

IndexedMap gatherMap(const hlo::Instruction& g) {
  const hlo::GatherDimensionNumbers& dn = *g.attrs().gatherDims;
  return buildMap(g.operand(0)->shape(), g.operand(1)->shape(), g.shape().rank(), dn.offsetDims, dn.collapsedSliceDims,
                  dn.operandBatchingDims, dn.startIndicesBatchingDims, dn.indexVectorDim, g.attrs().gatherSliceSizes);
}

IndexedMap scatterMap(const hlo::Instruction& s) {
  const hlo::ScatterDimensionNumbers& dn = *s.attrs().scatterDims;
  int64_t n = s.operandCount() / 2;
  const hlo::Shape& operand = s.operand(0)->shape();
  const hlo::Shape& updates = s.operand(n + 1)->shape();
  // The slice size of a windowed operand dim is the updates' size there.
  std::vector<int64_t> size(static_cast<size_t>(operand.rank()), 1);
  size_t w = 0;
  for (int64_t p = 0; p < operand.rank(); ++p) {
    if (contains(dn.insertedWindowDims, p) || contains(dn.inputBatchingDims, p)) continue;
    if (w < dn.updateWindowDims.size()) size[static_cast<size_t>(p)] = updates.dimension(dn.updateWindowDims[w++]);
  }
  return buildMap(operand, s.operand(n)->shape(), updates.rank(), dn.updateWindowDims, dn.insertedWindowDims,
                  dn.inputBatchingDims, dn.scatterIndicesBatchingDims, dn.indexVectorDim, size);
}

}  // namespace tpu::spmd
