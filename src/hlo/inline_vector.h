// InlineVector<T, N>: a vector of trivially copyable T that keeps up to N
// elements inside the object and moves to the heap only beyond that. Used
// for operand lists: nearly every instruction has one to three operands, and
// a heap allocation per instruction for them was a measurable part of
// loading a module. Offers the parts of std::vector's interface the IR uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>

namespace tpu::hlo {

template <typename T, size_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T>, "InlineVector copies elements as bytes");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() noexcept = default;
  InlineVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  InlineVector(const InlineVector& o) { assign(o.begin(), o.end()); }
  InlineVector(InlineVector&& o) noexcept { takeFrom(o); }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      freeHeap();
      takeFrom(o);
    }
    return *this;
  }
  ~InlineVector() { freeHeap(); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void push_back(const T& value) {
    if (size_ == capacity_) {
      T copy = value;  // `value` may live in the storage grow() frees
      grow(std::max<size_t>(capacity_ * 2, N + 1));
      data_[size_++] = copy;
      return;
    }
    data_[size_++] = value;
  }
  void clear() noexcept { size_ = 0; }
  template <typename It>
  void assign(It first, It last) {
    size_t n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, data_);
    size_ = static_cast<uint32_t>(n);
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool isInline() const noexcept { return data_ == inline_; }
  void grow(size_t n) {
    T* heap = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!heap) throw std::bad_alloc();
    if (size_) std::memcpy(heap, data_, size_ * sizeof(T));
    freeHeap();
    data_ = heap;
    capacity_ = static_cast<uint32_t>(n);
  }
  void freeHeap() noexcept {
    if (!isInline()) std::free(data_);
    data_ = inline_;
    capacity_ = N;
  }
  // Leaves `o` empty and inline.
  void takeFrom(InlineVector& o) noexcept {
    if (o.isInline()) {
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
      data_ = inline_;
      capacity_ = N;
    } else {
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.data_ = o.inline_;
      o.capacity_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  T* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
  T inline_[N];
};

}  // namespace tpu::hlo
