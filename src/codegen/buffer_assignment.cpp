#include "codegen/buffer_assignment.h"

#include <algorithm>
#include <climits>
#include <numeric>

namespace tpu::codegen {

namespace {
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

namespace {

// The placed ranges, found by time: a segment tree over all ranges in
// order of start, each node holding the latest end among the placed ranges
// below it. The ranges placed so far that overlap [s, e] are those with
// start <= e (a prefix of that order) and end >= s: a descent that skips
// every subtree whose latest end is before s finds them in
// O((k + 1) log n) for k of them, where a scan of all placed ranges made
// the assignment quadratic in the program's length.
class PlacedByTime {
 public:
  explicit PlacedByTime(const std::vector<LiveRange>& ranges) : ranges_(ranges) {
    byStart_.resize(ranges.size());
    std::iota(byStart_.begin(), byStart_.end(), 0);
    std::stable_sort(byStart_.begin(), byStart_.end(),
                     [&](size_t a, size_t b) { return ranges[a].start < ranges[b].start; });
    rank_.resize(ranges.size());
    for (size_t r = 0; r < byStart_.size(); ++r) rank_[byStart_[r]] = r;
    for (size_ = 1; size_ < std::max<size_t>(ranges.size(), 1); size_ *= 2) {
    }
    maxEnd_.assign(2 * size_, kNone);
  }

  void place(size_t range) {
    size_t node = size_ + rank_[range];
    maxEnd_[node] = ranges_[range].end;
    for (node /= 2; node >= 1; node /= 2) maxEnd_[node] = std::max(maxEnd_[2 * node], maxEnd_[2 * node + 1]);
  }

  // Calls f(range) for every placed range overlapping [s, e].
  template <typename F>
  void overlapping(int64_t s, int64_t e, F&& f) const {
    // Ranks [0, limit) have start <= e.
    size_t limit = static_cast<size_t>(
        std::upper_bound(byStart_.begin(), byStart_.end(), e,
                         [&](int64_t v, size_t r) { return v < ranges_[r].start; }) -
        byStart_.begin());
    visit(1, 0, size_, limit, s, f);
  }

 private:
  static constexpr int64_t kNone = INT64_MIN;

  template <typename F>
  void visit(size_t node, size_t lo, size_t hi, size_t limit, int64_t s, F& f) const {
    if (lo >= limit || maxEnd_[node] == kNone || maxEnd_[node] < s) return;
    if (hi - lo == 1) {
      f(byStart_[lo]);
      return;
    }
    size_t mid = (lo + hi) / 2;
    visit(2 * node, lo, mid, limit, s, f);
    visit(2 * node + 1, mid, hi, limit, s, f);
  }

  const std::vector<LiveRange>& ranges_;
  std::vector<size_t> byStart_, rank_;
  size_t size_ = 1;
  std::vector<int64_t> maxEnd_;
};

}  // namespace

HeapAssignment assignHeap(const std::vector<LiveRange>& ranges, uint64_t alignment) {
  HeapAssignment out;
  out.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  // Big buffers first gives tighter packing; ties keep program order so the
  // result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].bytes > ranges[b].bytes; });
  std::vector<uint64_t> sizes(ranges.size());
  PlacedByTime placed(ranges);
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    uint64_t size = alignUp(std::max<uint64_t>(r.bytes, 1), alignment);
    // Intervals (in bytes) taken by buffers live at the same time.
    busy.clear();
    placed.overlapping(r.start, r.end, [&](size_t p) { busy.push_back({out.offsets[p], out.offsets[p] + sizes[p]}); });
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + size <= lo) break;
      candidate = std::max(candidate, hi);
    }
    out.offsets[i] = candidate;
    sizes[i] = size;
    placed.place(i);
    out.heapBytes = std::max(out.heapBytes, candidate + size);
  }
  return out;
}

}  // namespace tpu::codegen
