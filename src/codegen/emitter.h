// Text emission of LLO: ops, labels, comments, DMA descriptors, and simple
// register pools. Kernels are emitted one after another into one entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpu::codegen {

class Emitter {
 public:
  template <typename... Args>
  void op(fmt::format_string<Args...> f, Args&&... args) {
    code_ += "  ";
    code_ += fmt::format(f, std::forward<Args>(args)...);
    code_ += '\n';
    ++ops_;
  }
  void label(const std::string& name) { code_ += name + ":\n"; }
  void comment(const std::string& text) { code_ += "  // " + text + "\n"; }
  void blank() { code_ += '\n'; }
  std::string newLabel(const std::string& prefix) { return fmt::format("l{}_{}", labels_++, prefix); }
  // A DMA descriptor (deduplicated): chunk bytes plus dims outermost first.
  struct Dim {
    int64_t count, src, dst;
  };
  std::string desc(uint64_t chunk, const std::vector<Dim>& dims);
  const std::string& code() const { return code_; }
  // For interleaving independent op streams: the current end of the code,
  // and the text emitted since a mark (removed from the code).
  size_t mark() const { return code_.size(); }
  std::string cut(size_t from) {
    std::string t = code_.substr(from);
    code_.resize(from);
    return t;
  }
  void append(const std::string& text) { code_ += text; }
  std::string descriptorText() const;
  size_t opCount() const { return ops_; }
  size_t descriptorCount() const { return descs_.size(); }

 private:
  std::string code_;
  size_t ops_ = 0;
  int labels_ = 0;
  std::map<std::string, std::string> descIndex_;
  std::vector<std::string> descs_;
};

// A pool of numbered registers (s, v or m) handed out lowest first.
class RegPool {
 public:
  RegPool(char prefix, int first, int count) : prefix_(prefix), free_(count, true), first_(first) {}
  // -1 when none is left.
  int get();
  void put(int r) {
    if (r >= first_ && r - first_ < static_cast<int>(free_.size())) free_[r - first_] = true;
  }
  void reset() { free_.assign(free_.size(), true); }
  std::vector<bool> save() const { return free_; }
  void restore(std::vector<bool> state) { free_ = std::move(state); }
  std::string name(int r) const { return fmt::format("{}{}", prefix_, r); }
  int inUse() const;
  int highWater() const { return high_; }
  // Rotating allocation: get() searches from after the register it last
  // handed out, so a freed register is not reused at once and code that
  // frees and allocates in turn keeps independent work in different
  // registers (the scheduler can overlap it). Off by default.
  void setRotating(bool on) { rotating_ = on; }

 private:
  char prefix_;
  std::vector<bool> free_;
  int first_;
  int high_ = 0;
  bool rotating_ = false;
  size_t next_ = 0;
};

}  // namespace tpu::codegen
