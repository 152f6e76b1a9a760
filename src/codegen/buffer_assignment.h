// HBM buffer assignment for temporaries: each logical buffer has a live
// range [start, end] over program positions; buffers whose ranges do not
// overlap may share bytes. Offsets are chosen greedily (first fit, largest
// buffers first within each start position) in one heap.
#pragma once

#include <cstdint>
#include <vector>

namespace tpu::codegen {

struct LiveRange {
  int64_t start = 0;  // position of the definition
  int64_t end = 0;    // last position that reads it (>= start)
  uint64_t bytes = 0;
};

struct HeapAssignment {
  std::vector<uint64_t> offsets;  // per range, aligned to `alignment`
  uint64_t heapBytes = 0;         // peak
};

HeapAssignment assignHeap(const std::vector<LiveRange>& ranges, uint64_t alignment = 512);

}  // namespace tpu::codegen
