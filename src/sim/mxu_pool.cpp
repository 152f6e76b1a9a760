#include "sim/mxu_pool.h"

#include <cstring>

#include "sim/mxu_kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TPU_SIM_PAUSE() _mm_pause()
#else
#define TPU_SIM_PAUSE() ((void)0)
#endif

namespace tpu::sim {

namespace {
// Rounds the pushed operand to bf16 (on the worker, off the simulator loop).
__attribute__((target_clones("avx512f", "avx2", "default"))) void roundOperand(float* a) {
  for (int i = 0; i < kPushRows * kMxuDim; ++i) {
    uint32_t u;
    std::memcpy(&u, &a[i], 4);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    uint32_t nan = (u & 0xFFFF0000u) | 0x00400000u;
    u = (u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded;
    std::memcpy(&a[i], &u, 4);
  }
}
}  // namespace

struct MxuPool::Job {
  alignas(64) float a[kPushRows * kMxuDim];
  const float* w = nullptr;
  float* out = nullptr;
  std::atomic<int> state{2};  // 0 pending, 1 running, 2 done
};

MxuPool::MxuPool(int workers) : jobs_(new Job[kCapacity]) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { run(); });
}

MxuPool::~MxuPool() {
  stop_.store(true);
  published_.fetch_add(1);  // wake a sleeping worker
  published_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool MxuPool::tryRun(uint64_t id) {
  Job& j = jobs_[id % kCapacity];
  int expected = 0;
  if (!j.state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return false;
  roundOperand(j.a);
  mxuMatmulF32(j.a, j.w, j.out);
  j.state.store(2, std::memory_order_release);
  return true;
}

void MxuPool::run() {
  uint64_t next = 0;
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t pub = published_.load(std::memory_order_acquire);
    if (next < pub) {
      tryRun(next++);
      idle = 0;
      continue;
    }
    if (++idle < 4000) {
      TPU_SIM_PAUSE();
      continue;
    }
    // Nothing to do for a while: sleep until the next submit.
    sleeping_.store(true);
    if (published_.load() == pub && !stop_.load()) published_.wait(pub);
    sleeping_.store(false);
    idle = 0;
  }
}

uint64_t MxuPool::submit(const float* a, const float* w, float* out) {
  uint64_t id = published_.load(std::memory_order_relaxed);
  Job& j = jobs_[id % kCapacity];
  if (id >= kCapacity) wait(id - kCapacity);  // the slot's previous job
  std::memcpy(j.a, a, sizeof j.a);
  j.w = w;
  j.out = out;
  if (threads_.empty()) {
    roundOperand(j.a);
    mxuMatmulF32(j.a, j.w, j.out);
    j.state.store(2, std::memory_order_relaxed);
    published_.store(id + 1, std::memory_order_relaxed);
    return id;
  }
  j.state.store(0, std::memory_order_relaxed);
  published_.store(id + 1);  // seq_cst: pairs with the worker's sleeping_ check
  if (sleeping_.load()) published_.notify_one();
  return id;
}

void MxuPool::wait(uint64_t id) {
  Job& j = jobs_[id % kCapacity];
  if (tryRun(id)) return;
  // A worker is computing it: take the newest pending job meanwhile (the
  // workers go oldest first, so the two rarely meet).
  uint64_t top = published_.load(std::memory_order_relaxed);
  while (j.state.load(std::memory_order_acquire) != 2) {
    while (top > id + 1 && jobs_[(top - 1) % kCapacity].state.load(std::memory_order_relaxed) != 0) --top;
    if (top > id + 1 && tryRun(top - 1)) continue;
    TPU_SIM_PAUSE();
  }
}

bool MxuPool::finished(uint64_t id) const {
  // A later job in the same slot was only submitted after this one finished.
  if (published_.load(std::memory_order_relaxed) > id + kCapacity) return true;
  return jobs_[id % kCapacity].state.load(std::memory_order_acquire) == 2;
}

}  // namespace tpu::sim
