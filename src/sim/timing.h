// The timing half of the simulator: how long a program takes. It never
// looks at data values; the functional half (machine.h) never looks at time.
//
// Core issue model: one bundle per cycle at best, in order. A bundle issues
// at the first cycle where every op's source registers are ready
// (scoreboard: ready = issue + latency of the producing op), the unit it
// needs is free (MXU pipes accept one push per `interval` cycles), MXU
// results / transposed tiles exist, and (handled by the simulator loop)
// semaphores, the DMA queue and sync allow it.
//
// DMA model: a DMA takes a free engine (FIFO order if none is free), spends
// dma.latency_cycles on setup, then streams its bytes. All streaming DMAs
// that touch HBM share the HBM bandwidth equally (processor sharing); at any
// instant their rates sum to at most hbm_bytes_per_second. A DMA between two
// HBM locations moves its bytes twice. VMEM<->VMEM copies share an on-chip
// pool of vmem_bytes_per_cycle instead.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "sim/decode.h"
#include "sim/sim.h"
#include "target/target.h"

namespace tpu::sim {

class DmaModel {
 public:
  enum Pool : uint8_t { kHbm = 0, kOnChip = 1 };
  struct Completion {
    uint64_t id = 0;
    int engine = 0;
    double start = 0;  // engine acquired
    double end = 0;    // last byte landed
  };

  explicit DmaModel(const target::TargetDesc& t);

  // A DMA issued at `cycle` that moves `poolBytes` through `pool`. Events
  // up to `cycle` must have been processed (advanceTo) first.
  uint64_t submit(uint64_t cycle, Pool pool, double poolBytes);
  // Time of the next event (setup done, engine start, completion), or +inf.
  double nextEventTime() const;
  // Processes every event at time <= t; completions are appended to `done`
  // in completion order.
  void advanceTo(double t, std::vector<Completion>& done);
  size_t outstanding() const { return jobs_.size(); }
  double engineBusyCycles() const { return engineBusy_; }
  double hbmBytesPerCycle() const { return rate_[kHbm]; }

 private:
  struct Job {
    uint64_t id = 0;
    Pool pool = kHbm;
    double remaining = 0;
    double issue = 0;
    double start = -1;     // engine acquired (-1: queued)
    double setupEnd = 0;
    int engine = -1;
    bool streaming = false;
  };
  double nextEvent(uint64_t* jobId) const;
  void progress(double t);
  void startQueued(double t);

  double now_ = 0;
  double latency_ = 0;
  double rate_[2] = {0, 0};
  std::vector<double> engineFreeAt_;
  std::vector<bool> engineBusyFlag_;
  std::deque<Job> jobs_;  // issue order
  uint64_t nextId_ = 1;
  double engineBusy_ = 0;
};

class CoreTiming {
 public:
  CoreTiming(const target::TargetDesc& t, const RegisterLayout& regs);

  // Earliest cycle >= notBefore at which the bundle's register, unit and
  // MXU/XLU constraints allow issue; `reason` says what delayed it most.
  uint64_t earliestIssue(const DecodedProgram& p, const DecodedBundle& b, uint64_t notBefore,
                         StallReason& reason) const;
  // Records the bundle issuing at `cycle`.
  void issue(const DecodedProgram& p, const DecodedBundle& b, uint64_t cycle);
  // Cycle by which every result written so far is available.
  uint64_t allResultsReady() const { return maxReady_; }
  uint64_t mxuBusyCycles() const { return mxuBusy_; }

 private:
  uint64_t& readyOf(RegKind k, int32_t r) {
    return k == RegKind::S ? readyS_[r] : k == RegKind::V ? readyV_[r] : readyM_[r];
  }
  uint64_t readyOf(RegKind k, int32_t r) const {
    return k == RegKind::S ? readyS_[r] : k == RegKind::V ? readyV_[r] : readyM_[r];
  }

  std::vector<uint64_t> readyS_, readyV_, readyM_;
  std::vector<std::vector<uint64_t>> unitFree_;  // [slot class][slot index]
  struct Mxu {
    uint64_t pipeFree = 0;
    uint64_t stageReady = 0;
    uint64_t weightsReady = 0;
    std::deque<uint64_t> fifo;  // ready cycles of queued results
  };
  std::vector<Mxu> mxus_;
  struct Xpose {
    int pushes = 0;
    uint64_t tileReady = 0;
  };
  std::vector<Xpose> xposes_;
  uint64_t maxReady_ = 0;
  uint64_t mxuBusy_ = 0;
};

}  // namespace tpu::sim
