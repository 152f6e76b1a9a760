#include "codegen/emitter.h"

namespace tpu::codegen {

std::string Emitter::desc(uint64_t chunk, const std::vector<Dim>& dims) {
  std::string key = fmt::format("chunk={}", chunk);
  if (!dims.empty()) {
    key += " dims=[";
    for (size_t i = 0; i < dims.size(); ++i)
      key += fmt::format("{}{}:{}:{}", i ? ", " : "", dims[i].count, dims[i].src, dims[i].dst);
    key += "]";
  }
  auto it = descIndex_.find(key);
  if (it != descIndex_.end()) return it->second;
  std::string name = fmt::format("d{}", descs_.size());
  descIndex_[key] = name;
  descs_.push_back(fmt::format(".dma {} {}", name, key));
  return name;
}

std::string Emitter::descriptorText() const {
  std::string s;
  for (const auto& d : descs_) s += d + "\n";
  return s;
}

int RegPool::get() {
  if (rotating_) {
    for (size_t n = 0; n < free_.size(); ++n) {
      size_t i = (next_ + n) % free_.size();
      if (!free_[i]) continue;
      free_[i] = false;
      next_ = i + 1;
      high_ = std::max(high_, inUse());
      return first_ + static_cast<int>(i);
    }
    return -1;
  }
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i]) {
      free_[i] = false;
      high_ = std::max(high_, inUse());
      return first_ + static_cast<int>(i);
    }
  return -1;
}

int RegPool::inUse() const {
  int n = 0;
  for (bool f : free_) n += f ? 0 : 1;
  return n;
}

}  // namespace tpu::codegen
