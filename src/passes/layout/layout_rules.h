// Physical layout rules for the TPU target (../shared/spec/LAYOUT.md): the
// tiles an array of a given type and physical order gets, its padded size
// in bytes, and when a transpose or a reshape only reinterprets a buffer.
// minor_to_major lists are `M2M`: first entry = fastest varying dimension.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hlo/shape.h"

namespace tpu::passes::layout {

using M2M = std::vector<int64_t>;

// Vector register geometry the tiles follow (sublanes x lanes).
struct TileGeometry {
  int64_t sublanes = 8;
  int64_t lanes = 128;
};

// {rank-1, ..., 0}.
M2M defaultM2M(int64_t rank);
// A permutation of 0..rank-1.
bool isPermutation(const M2M& m2m, int64_t rank);
// Physical order without the size-1 dimensions (which never change where
// anything is stored).
M2M effectiveM2M(const std::vector<int64_t>& dims, const M2M& m2m);

// The tiled TPU layout of an array with this physical order: T(r,128) for
// 32-bit types (r = sublanes, 4 or 2 when the second-minor dimension is that
// small), T(r,128)(2,1) for 16-bit, T(r,128)(4,1) for 8-bit, plus E(bits)
// and (32/bits,1) for sub-byte types; rank 1: T(256) (32-bit) or
// T(1024)(128)(32/bits,1); scalars and 64-bit types stay untiled.
hlo::Layout tpuLayout(hlo::ElementType type, const std::vector<int64_t>& dims, const M2M& m2m,
                      const TileGeometry& geometry);

// Bytes an array occupies with its layout: the first tile pads the minor
// dimensions it covers (ShapeUtil::ArraySize); dense size without a layout.
int64_t paddedBytes(const hlo::Shape& shape);

// transpose(in, perm) -> out only reinterprets the buffer.
bool transposeIsBitcast(const M2M& in, const M2M& out, const std::vector<int64_t>& perm);
// The operand layout making transpose(perm) with output layout `out` a
// bitcast, and the inverse.
M2M transposeOperandM2M(const M2M& out, const std::vector<int64_t>& perm);
M2M transposeOutputM2M(const M2M& in, const std::vector<int64_t>& perm);

// Rows of the tiles an array of this type gets (geometry.sublanes), or 0
// for types that stay untiled.
int64_t tileRowsFor(hlo::ElementType type, const TileGeometry& geometry);

// reshape(in dims, in m2m) -> (out dims, out m2m) only reinterprets the
// buffer: the physical element order is the same and, when tiled
// (tileRows > 0), the tiles cover the same elements: the minor dimension
// keeps its size and the second-minor one too, or both are multiples of
// the tile rows (merging whole tiles). Rank 1 and rank >= 2 never agree.
bool reshapeIsBitcast(const std::vector<int64_t>& inDims, const M2M& in, const std::vector<int64_t>& outDims,
                      const M2M& out, int64_t tileRows);
// A layout for `toDims` that makes the reshape between `fromDims` (with
// `from`) and `toDims` a bitcast (either direction), if one exists.
std::optional<M2M> alignedReshapeM2M(const std::vector<int64_t>& fromDims, const M2M& from,
                                     const std::vector<int64_t>& toDims, int64_t tileRows);

}  // namespace tpu::passes::layout
