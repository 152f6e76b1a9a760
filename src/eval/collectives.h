// The meeting point of simulated devices (one thread each). Every device
// reaches the same collectives in the same order (HLO programs are SPMD);
// at each one, every device deposits its operands and waits until all have,
// then reads everyone's contributions and computes its own result. If a
// device fails, or finishes while others wait, the run is aborted and the
// waiting devices return with an error instead of hanging.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "eval/value.h"

namespace tpu::eval {

class CollectiveHub {
 public:
  explicit CollectiveHub(int64_t devices);

  // Contributions of every device (indexed by device), or nullopt when the
  // run was aborted. `tag` names the collective; `tags` receives every
  // device's tag so callers can detect devices at different collectives.
  std::optional<std::vector<std::vector<Value>>> exchange(int device, const std::string& tag,
                                                          std::vector<Value> mine, std::vector<std::string>& tags);
  // A device has returned from its program (ok = without error).
  void finish(int device, bool ok);
  // The device stopped because another one failed (its own error is a consequence).
  bool wasAborted(int device) const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int64_t devices_;
  int64_t arrived_ = 0;
  int64_t finished_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<std::vector<Value>> slots_, snapshot_;
  std::vector<std::string> tags_, snapshotTags_;
  std::vector<bool> victim_;
};

}  // namespace tpu::eval
