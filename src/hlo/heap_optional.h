// HeapOptional<T>: an optional value stored out of line. It has the parts of
// std::optional's interface the IR uses (has_value, bool, *, ->, value,
// value_or, emplace, reset, assignment from T and nullopt, ==), with value
// semantics (copies copy the value), but costs one pointer while empty. Used
// for large attributes that most instructions leave unset, so that the
// attribute structs stay small.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace tpu::hlo {

template <typename T>
class HeapOptional {
 public:
  using value_type = T;

  HeapOptional() noexcept = default;
  HeapOptional(std::nullopt_t) noexcept {}
  HeapOptional(const T& v) : p_(std::make_unique<T>(v)) {}
  HeapOptional(T&& v) : p_(std::make_unique<T>(std::move(v))) {}
  HeapOptional(const std::optional<T>& v) : p_(v ? std::make_unique<T>(*v) : nullptr) {}
  HeapOptional(std::optional<T>&& v) : p_(v ? std::make_unique<T>(std::move(*v)) : nullptr) {}
  HeapOptional(const HeapOptional& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  HeapOptional(HeapOptional&&) noexcept = default;
  ~HeapOptional() = default;

  HeapOptional& operator=(const HeapOptional& o) {
    if (this == &o) return *this;
    if (!o.p_) {
      p_.reset();
    } else if (p_) {
      *p_ = *o.p_;
    } else {
      p_ = std::make_unique<T>(*o.p_);
    }
    return *this;
  }
  HeapOptional& operator=(HeapOptional&&) noexcept = default;
  HeapOptional& operator=(std::nullopt_t) noexcept {
    p_.reset();
    return *this;
  }
  HeapOptional& operator=(const T& v) {
    if (p_) *p_ = v;
    else p_ = std::make_unique<T>(v);
    return *this;
  }
  HeapOptional& operator=(T&& v) {
    if (p_) *p_ = std::move(v);
    else p_ = std::make_unique<T>(std::move(v));
    return *this;
  }
  HeapOptional& operator=(const std::optional<T>& v) {
    if (v) *this = *v;
    else p_.reset();
    return *this;
  }
  HeapOptional& operator=(std::optional<T>&& v) {
    if (v) *this = std::move(*v);
    else p_.reset();
    return *this;
  }

  bool has_value() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

  T& operator*() & { return *p_; }
  const T& operator*() const& { return *p_; }
  T&& operator*() && { return std::move(*p_); }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }

  T& value() & { return checked(); }
  const T& value() const& { return checked(); }
  T&& value() && { return std::move(checked()); }
  template <typename U>
  T value_or(U&& fallback) const& {
    return p_ ? *p_ : static_cast<T>(std::forward<U>(fallback));
  }

  template <typename... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }
  void reset() noexcept { p_.reset(); }
  void swap(HeapOptional& o) noexcept { p_.swap(o.p_); }

  // A std::optional copy, for code written against std::optional.
  operator std::optional<T>() const { return p_ ? std::optional<T>(*p_) : std::nullopt; }

  friend bool operator==(const HeapOptional& a, const HeapOptional& b) {
    if (!a.p_ || !b.p_) return !a.p_ && !b.p_;
    return *a.p_ == *b.p_;
  }
  friend bool operator==(const HeapOptional& a, std::nullopt_t) noexcept { return !a.p_; }
  friend bool operator==(const HeapOptional& a, const T& b) { return a.p_ && *a.p_ == b; }
  friend bool operator==(const HeapOptional& a, const std::optional<T>& b) {
    if (!a.p_ || !b) return !a.p_ && !b;
    return *a.p_ == *b;
  }

 private:
  T& checked() const {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }

  std::unique_ptr<T> p_;
};

}  // namespace tpu::hlo
