// Host parallelism for MXU arithmetic: mxu.matmul ops become jobs that a
// worker thread computes while the simulator loop runs ahead; mxu.pop waits
// for (or itself computes) the job whose result it takes. Each job depends
// only on its own inputs, so results do not depend on the thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace tpu::sim {

class MxuPool {
 public:
  // `workers` extra host threads; 0 computes every job in submit().
  explicit MxuPool(int workers);
  ~MxuPool();
  MxuPool(const MxuPool&) = delete;
  MxuPool& operator=(const MxuPool&) = delete;

  // Queues out = bf16(a) x w (mxuMatmulF32; `a` is rounded to bf16 by the
  // job). `a` is copied; `w` must stay unchanged until finished(job).
  // Returns the job id.
  uint64_t submit(const float* a, const float* w, float* out);
  // Returns once the job's result is written. While another thread is
  // computing it, the caller computes newer pending jobs instead of spinning.
  void wait(uint64_t job);
  // Whether the job is done (its weights may be reused). Caller: the
  // submitting thread.
  bool finished(uint64_t job) const;
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  struct Job;
  void run();
  bool tryRun(uint64_t job);

  static constexpr uint64_t kCapacity = 512;
  std::unique_ptr<Job[]> jobs_;
  std::atomic<uint64_t> published_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace tpu::sim
