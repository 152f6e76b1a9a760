// The one data-movement primitive of the interpreter: copy an N-d block
// between two buffers with arbitrary element strides (negative for reverse,
// zero for broadcast). transpose, slice, reverse, broadcast, pad,
// concatenate, dynamic-slice and dynamic-update-slice are all single calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tpu::eval {

// Row-major element strides of `dims`.
std::vector<int64_t> rowMajorStrides(std::span<const int64_t> dims);
int64_t elementCount(std::span<const int64_t> dims);

// For every index i of `dims`: out[outOffset + sum i_d*outStrides_d] =
// in[inOffset + sum i_d*inStrides_d]; offsets and strides in elements of
// `elementSize` bytes. Adjacent dims that are contiguous on both sides are
// merged and a unit-stride inner dim becomes a memcpy.
void stridedCopy(size_t elementSize, std::span<const int64_t> dims, const void* in, int64_t inOffset,
                 std::span<const int64_t> inStrides, void* out, int64_t outOffset,
                 std::span<const int64_t> outStrides);

// Fills `count` elements of `elementSize` bytes with copies of `value`.
void fillElements(size_t elementSize, void* out, int64_t count, const void* value);

}  // namespace tpu::eval
