#include "codegen/buffer_assignment.h"

#include <algorithm>
#include <numeric>

namespace tpu::codegen {

namespace {
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

HeapAssignment assignHeap(const std::vector<LiveRange>& ranges, uint64_t alignment) {
  HeapAssignment out;
  out.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  // Big buffers first gives tighter packing; ties keep program order so the
  // result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].bytes > ranges[b].bytes; });
  struct Placed {
    uint64_t off, size;
    int64_t start, end;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    uint64_t size = alignUp(std::max<uint64_t>(r.bytes, 1), alignment);
    // Intervals (in bytes) taken by buffers live at the same time.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed& p : placed)
      if (p.start <= r.end && r.start <= p.end) busy.push_back({p.off, p.off + p.size});
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + size <= lo) break;
      candidate = std::max(candidate, hi);
    }
    out.offsets[i] = candidate;
    placed.push_back({candidate, size, r.start, r.end});
    out.heapBytes = std::max(out.heapBytes, candidate + size);
  }
  return out;
}

}  // namespace tpu::codegen
