// SharedValue<T>: a value of T with shared, copy-on-write storage. Copies
// share one T (a reference-count increment); mutate() unshares first. An
// empty handle stands for a default-constructed T and costs no allocation.
// Used for large attributes that runs of instructions repeat verbatim (op
// metadata), so a module holds each distinct value once.
#pragma once

#include <memory>
#include <utility>

namespace tpu::hlo {

template <typename T>
class SharedValue {
 public:
  SharedValue() noexcept = default;
  SharedValue(T value) : p_(std::make_shared<T>(std::move(value))) {}

  const T& get() const { return p_ ? *p_ : defaultValue(); }
  const T& operator*() const { return get(); }
  const T* operator->() const { return &get(); }

  // This handle's own T, copied first when shared.
  T& mutate() {
    if (!p_) p_ = std::make_shared<T>();
    else if (p_.use_count() != 1) p_ = std::make_shared<T>(*p_);
    return *p_;
  }
  void reset() noexcept { p_.reset(); }

  // Equal without comparing when both share one value (or both are empty).
  bool sharesWith(const SharedValue& o) const noexcept { return p_ == o.p_; }
  friend bool operator==(const SharedValue& a, const SharedValue& b) {
    return a.p_ == b.p_ || a.get() == b.get();
  }

 private:
  static const T& defaultValue() {
    static const T kDefault{};
    return kDefault;
  }

  std::shared_ptr<T> p_;
};

}  // namespace tpu::hlo
