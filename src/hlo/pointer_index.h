// PointerIndex: a map from pointers (instructions, computations) to small
// integers, with open addressing and linear probing in one array. Passes
// index the instructions of large computations this way: with
// std::unordered_map, one heap node per entry made allocation and cache
// misses the larger part of their time on 100k-instruction modules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpu::hlo {

class PointerIndex {
 public:
  explicit PointerIndex(size_t expected = 0) { resize(expected); }

  // The value stored for `key`, or -1.
  int64_t find(const void* key) const {
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (!s.key) return -1;
    }
  }
  bool contains(const void* key) const { return find(key) >= 0; }
  // Sets the value of `key` (inserting it when absent).
  void set(const void* key, uint32_t value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) resize(size_ * 2 + 16);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (!s.key) {
        s = {key, value};
        ++size_;
        return;
      }
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    const void* key = nullptr;
    uint32_t value = 0;
  };
  static size_t hash(const void* p) {
    uint64_t x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  void resize(size_t expected) {
    size_t capacity = 16;
    while (capacity * 3 < expected * 4 + 4) capacity *= 2;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old)
      if (s.key) set(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace tpu::hlo
