#include "passes/layout/layout_rules.h"

#include <algorithm>

namespace tpu::passes::layout {

M2M defaultM2M(int64_t rank) {
  M2M m(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) m[static_cast<size_t>(i)] = rank - 1 - i;
  return m;
}

bool isPermutation(const M2M& m2m, int64_t rank) {
  if (static_cast<int64_t>(m2m.size()) != rank) return false;
  if (rank <= 64) {  // the common case, without allocating
    uint64_t seen = 0;
    for (int64_t d : m2m) {
      if (d < 0 || d >= rank || (seen >> d) & 1) return false;
      seen |= uint64_t{1} << d;
    }
    return true;
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : m2m) {
    if (d < 0 || d >= rank || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

M2M effectiveM2M(const std::vector<int64_t>& dims, const M2M& m2m) {
  M2M out;
  for (int64_t d : m2m)
    if (dims[static_cast<size_t>(d)] != 1) out.push_back(d);
  return out;
}

hlo::Layout tpuLayout(hlo::ElementType type, const std::vector<int64_t>& dims, const M2M& m2m,
                      const TileGeometry& geometry) {
  hlo::Layout layout;
  layout.minorToMajor = m2m;
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(type);
  int bits = info.bitWidth;
  if (dims.empty() || info.isComplex || bits <= 0 || bits > 32) return layout;
  int64_t lanes = geometry.lanes;
  // Elements of narrow types share a 32-bit word: the packing sub-tile.
  int64_t pack = 32 / bits;
  if (bits < 8) layout.elementSizeInBits = bits;
  if (dims.size() == 1) {
    if (pack == 1) {
      layout.tiles.push_back({{2 * lanes}});
    } else {
      layout.tiles.push_back({{8 * lanes}});
      layout.tiles.push_back({{lanes}});
      layout.tiles.push_back({{pack, 1}});
    }
    return layout;
  }
  int64_t secondMinor = dims[static_cast<size_t>(m2m[1])];
  int64_t rows = geometry.sublanes;
  // Compact tiles when the second-minor dimension is small (LAYOUT.md 1.2).
  if (secondMinor <= 2 && rows > 2) rows = 2;
  else if (secondMinor <= 4 && rows > 4) rows = 4;
  layout.tiles.push_back({{rows, lanes}});
  if (pack > 1) layout.tiles.push_back({{pack, 1}});
  return layout;
}

int64_t tileRowsFor(hlo::ElementType type, const TileGeometry& geometry) {
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(type);
  if (info.isComplex || info.bitWidth <= 0 || info.bitWidth > 32) return 0;
  return geometry.sublanes;
}

int64_t paddedBytes(const hlo::Shape& shape) {
  if (!shape.isArray()) return 0;
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(shape.elementType());
  int64_t rank = shape.rank();
  std::vector<int64_t> physical;  // major to minor
  if (shape.hasLayout() && isPermutation(shape.layout().minorToMajor, rank)) {
    const M2M& m = shape.layout().minorToMajor;
    for (auto it = m.rbegin(); it != m.rend(); ++it) physical.push_back(shape.dimension(*it));
  } else {
    physical = shape.dimensions();
  }
  if (shape.hasLayout() && !shape.layout().tiles.empty()) {
    const std::vector<int64_t>& tile = shape.layout().tiles[0].dimensions;
    // Tile entries beyond the rank tile dimensions of size 1.
    while (physical.size() < tile.size()) physical.insert(physical.begin(), 1);
    size_t offset = physical.size() - tile.size();
    for (size_t k = 0; k < tile.size(); ++k) {
      int64_t t = tile[k];
      if (t <= 0) continue;  // `*` merges dimensions: no padding of its own
      int64_t& d = physical[offset + k];
      d = (d + t - 1) / t * t;
    }
  }
  int64_t elements = 1;
  for (int64_t d : physical) {
    if (d < 0 || (d > 0 && elements > INT64_MAX / d)) return INT64_MAX;
    elements *= d;
  }
  int64_t bits = shape.hasLayout() && shape.layout().elementSizeInBits > 0 ? shape.layout().elementSizeInBits : 0;
  if (bits > 0) return elements > INT64_MAX / bits ? INT64_MAX : (elements * bits + 7) / 8;
  return elements > INT64_MAX / std::max(1, info.byteSize) ? INT64_MAX : elements * std::max(1, info.byteSize);
}

bool transposeIsBitcast(const M2M& in, const M2M& out, const std::vector<int64_t>& perm) {
  if (in.size() != out.size() || perm.size() != out.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t o = out[i];
    if (o < 0 || o >= static_cast<int64_t>(perm.size()) || in[i] != perm[static_cast<size_t>(o)]) return false;
  }
  return true;
}

M2M transposeOperandM2M(const M2M& out, const std::vector<int64_t>& perm) {
  M2M in(out.size());
  for (size_t i = 0; i < out.size(); ++i) in[i] = perm[static_cast<size_t>(out[i])];
  return in;
}

M2M transposeOutputM2M(const M2M& in, const std::vector<int64_t>& perm) {
  M2M inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  M2M out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = inverse[static_cast<size_t>(in[i])];
  return out;
}

namespace {

// The common refinement of two row-major factorisations of one element
// count: every dimension of size > 1 becomes a run of consecutive factors.
// factorsOf[d] = [first, last) factor ids of dimension d (empty for size 1).
struct Refinement {
  std::vector<std::pair<int64_t, int64_t>> a, b;
};

std::optional<Refinement> refine(const std::vector<int64_t>& aDims, const std::vector<int64_t>& bDims) {
  Refinement r;
  r.a.assign(aDims.size(), {0, 0});
  r.b.assign(bDims.size(), {0, 0});
  size_t i = 0, j = 0;
  auto skip = [](const std::vector<int64_t>& d, size_t& k) {
    while (k < d.size() && d[k] == 1) ++k;
  };
  skip(aDims, i);
  skip(bDims, j);
  int64_t remA = i < aDims.size() ? aDims[i] : 1, remB = j < bDims.size() ? bDims[j] : 1;
  int64_t next = 0;
  if (i < aDims.size()) r.a[i].first = 0;
  if (j < bDims.size()) r.b[j].first = 0;
  while (i < aDims.size() && j < bDims.size()) {
    if (remA <= 0 || remB <= 0) return std::nullopt;  // zero-size dimensions
    bool advanceA = false, advanceB = false;
    if (remA == remB) {
      advanceA = advanceB = true;
    } else if (remB % remA == 0) {
      remB /= remA;
      advanceA = true;
    } else if (remA % remB == 0) {
      remA /= remB;
      advanceB = true;
    } else {
      return std::nullopt;
    }
    ++next;
    if (advanceA) {
      r.a[i].second = next;
      ++i;
      skip(aDims, i);
      if (i < aDims.size()) r.a[i].first = next, remA = aDims[i];
    }
    if (advanceB) {
      r.b[j].second = next;
      ++j;
      skip(bDims, j);
      if (j < bDims.size()) r.b[j].first = next, remB = bDims[j];
    }
  }
  if (i < aDims.size() || j < bDims.size()) return std::nullopt;
  return r;
}

// Factor ids in physical order (major to minor).
std::vector<int64_t> physicalFactors(const std::vector<std::pair<int64_t, int64_t>>& factorsOf, const M2M& m2m) {
  std::vector<int64_t> seq;
  for (auto it = m2m.rbegin(); it != m2m.rend(); ++it) {
    auto [first, last] = factorsOf[static_cast<size_t>(*it)];
    for (int64_t f = first; f < last; ++f) seq.push_back(f);
  }
  return seq;
}

bool rowMajorEffectively(const std::vector<int64_t>& dims, const M2M& m2m) {
  M2M e = effectiveM2M(dims, m2m);
  for (size_t i = 1; i < e.size(); ++i)
    if (e[i] > e[i - 1]) return false;
  return true;
}

bool tilesAgree(const std::vector<int64_t>& inDims, const M2M& in, const std::vector<int64_t>& outDims,
                const M2M& out, int64_t rows) {
  if (inDims == outDims) return true;
  if (inDims.size() < 2 || outDims.size() < 2) return false;
  if (inDims[static_cast<size_t>(in[0])] != outDims[static_cast<size_t>(out[0])]) return false;
  int64_t a = inDims[static_cast<size_t>(in[1])], b = outDims[static_cast<size_t>(out[1])];
  return a == b || (a % rows == 0 && b % rows == 0);
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

bool reshapeIsBitcast(const std::vector<int64_t>& inDims, const M2M& in, const std::vector<int64_t>& outDims,
                      const M2M& out, int64_t tileRows) {
  if (!isPermutation(in, static_cast<int64_t>(inDims.size())) ||
      !isPermutation(out, static_cast<int64_t>(outDims.size())))
    return false;
  for (int64_t d : inDims)
    if (d <= 0) return false;
  for (int64_t d : outDims)
    if (d <= 0) return false;
  if (product(inDims) != product(outDims)) return false;
  if (tileRows > 0 && !tilesAgree(inDims, in, outDims, out, tileRows)) return false;
  std::optional<Refinement> r = refine(inDims, outDims);
  if (!r) return rowMajorEffectively(inDims, in) && rowMajorEffectively(outDims, out);
  return physicalFactors(r->a, in) == physicalFactors(r->b, out);
}

std::optional<M2M> alignedReshapeM2M(const std::vector<int64_t>& fromDims, const M2M& from,
                                     const std::vector<int64_t>& toDims, int64_t tileRows) {
  int64_t toRank = static_cast<int64_t>(toDims.size());
  if (!isPermutation(from, static_cast<int64_t>(fromDims.size()))) return std::nullopt;
  for (int64_t d : fromDims)
    if (d <= 0) return std::nullopt;
  for (int64_t d : toDims)
    if (d <= 0) return std::nullopt;
  if (product(fromDims) != product(toDims)) return std::nullopt;
  M2M candidate;
  std::optional<Refinement> r = refine(fromDims, toDims);
  if (!r) {
    if (!rowMajorEffectively(fromDims, from)) return std::nullopt;
    candidate = defaultM2M(toRank);
  } else {
    std::vector<int64_t> seq = physicalFactors(r->a, from);
    std::vector<int64_t> position(seq.size());
    for (size_t k = 0; k < seq.size(); ++k) position[static_cast<size_t>(seq[k])] = static_cast<int64_t>(k);
    std::vector<std::pair<int64_t, int64_t>> keyed;  // (physical position, dim)
    std::vector<int64_t> unit;
    for (int64_t d = toRank - 1; d >= 0; --d) {
      auto [first, last] = r->b[static_cast<size_t>(d)];
      if (first == last) {
        unit.push_back(d);
        continue;
      }
      for (int64_t f = first + 1; f < last; ++f)
        if (position[static_cast<size_t>(f)] != position[static_cast<size_t>(f - 1)] + 1) return std::nullopt;
      keyed.push_back({position[static_cast<size_t>(first)], d});
    }
    std::sort(keyed.begin(), keyed.end());
    // Minor to major: the physically last run first; size-1 dimensions
    // most major, where they cannot change the tiles.
    for (auto it = keyed.rbegin(); it != keyed.rend(); ++it) candidate.push_back(it->second);
    for (auto it = unit.rbegin(); it != unit.rend(); ++it) candidate.push_back(*it);
  }
  if (!reshapeIsBitcast(fromDims, from, toDims, candidate, tileRows)) return std::nullopt;
  return candidate;
}

}  // namespace tpu::passes::layout
