#include "sim/timing.h"

#include <algorithm>
#include <cmath>

namespace tpu::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// Bytes below which a streaming job counts as finished (absorbs the rounding
// of the processor-sharing arithmetic).
constexpr double kEpsilonBytes = 1e-6;
}  // namespace

DmaModel::DmaModel(const target::TargetDesc& t) {
  latency_ = t.dma.latencyCycles;
  rate_[kHbm] = t.memory.hbmBytesPerSecond / t.clockHz;
  rate_[kOnChip] = static_cast<double>(std::max<uint64_t>(1, t.memory.vmemBytesPerCycle));
  engineFreeAt_.assign(std::max(1, t.dma.engines), 0.0);
  engineBusyFlag_.assign(engineFreeAt_.size(), false);
}

uint64_t DmaModel::submit(uint64_t cycle, Pool pool, double poolBytes) {
  progress(static_cast<double>(cycle));
  Job j;
  j.id = nextId_++;
  j.pool = pool;
  j.remaining = poolBytes;
  j.issue = static_cast<double>(cycle);
  jobs_.push_back(j);
  startQueued(static_cast<double>(cycle));
  return j.id;
}

// Gives free engines to queued jobs, oldest first.
void DmaModel::startQueued(double t) {
  for (Job& j : jobs_) {
    if (j.start >= 0) continue;
    int engine = -1;
    for (size_t e = 0; e < engineBusyFlag_.size(); ++e)
      if (!engineBusyFlag_[e]) {
        engine = static_cast<int>(e);
        break;
      }
    if (engine < 0) return;
    engineBusyFlag_[engine] = true;
    j.engine = engine;
    j.start = std::max(t, j.issue);
    j.setupEnd = j.start + latency_;
  }
}

// Advances streaming jobs to time t (no event may lie inside (now_, t)).
void DmaModel::progress(double t) {
  if (t <= now_) return;
  double dt = t - now_;
  int n[2] = {0, 0};
  for (const Job& j : jobs_)
    if (j.streaming) ++n[j.pool];
  for (Job& j : jobs_)
    if (j.streaming) j.remaining -= rate_[j.pool] / n[j.pool] * dt;
  now_ = t;
}

double DmaModel::nextEvent(uint64_t* jobId) const {
  double next = kInf;
  if (jobId) *jobId = 0;
  int n[2] = {0, 0};
  for (const Job& j : jobs_)
    if (j.start >= 0 && j.streaming) ++n[j.pool];
  for (const Job& j : jobs_) {
    if (j.start < 0) continue;
    double at = j.streaming ? now_ + std::max(0.0, j.remaining) * n[j.pool] / rate_[j.pool] : std::max(j.setupEnd, now_);
    if (at < next) {
      next = at;
      if (jobId) *jobId = j.id;
    }
  }
  return next;
}

double DmaModel::nextEventTime() const { return nextEvent(nullptr); }

void DmaModel::advanceTo(double t, std::vector<Completion>& done) {
  while (!jobs_.empty()) {
    uint64_t first = 0;
    double next = nextEvent(&first);
    if (next > t) break;
    progress(next);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      Job& j = *it;
      if (j.start >= 0 && !j.streaming && j.setupEnd <= now_) {
        j.streaming = true;
        if (j.remaining <= kEpsilonBytes) j.remaining = 0;
        ++it;
        continue;
      }
      // The job that defined this event finishes now even if rounding left
      // a sliver of bytes (so time always moves forward).
      if (j.streaming && (j.remaining <= kEpsilonBytes || j.id == first)) {
        done.push_back(Completion{j.id, j.engine, j.start, now_});
        engineBusy_ += now_ - j.start;
        engineBusyFlag_[j.engine] = false;
        engineFreeAt_[j.engine] = now_;
        it = jobs_.erase(it);
        continue;
      }
      ++it;
    }
    startQueued(now_);
  }
  progress(std::max(t, now_));
}

CoreTiming::CoreTiming(const target::TargetDesc& t, const RegisterLayout& regs) {
  readyS_.assign(regs.sregTotal, 0);
  readyV_.assign(regs.vregTotal, 0);
  readyM_.assign(regs.vmaskTotal, 0);
  unitFree_.resize(target::kNumSlotClasses);
  for (size_t s = 0; s < target::kNumSlotClasses; ++s) unitFree_[s].assign(std::max(1, t.slots[s]), 0);
  mxus_.resize(std::max(1, t.mxu.count));
  xposes_.resize(std::max(1, t.slotCount(target::SlotClass::Xlu)));
}

uint64_t CoreTiming::earliestIssue(const DecodedProgram& p, const DecodedBundle& b, uint64_t notBefore,
                                   StallReason& reason) const {
  uint64_t at = notBefore;
  auto need = [&](uint64_t cycle, StallReason why) {
    if (cycle > at) {
      at = cycle;
      reason = why;
    }
  };
  for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
    const DecodedOp& op = p.ops[i];
    for (int k = 0; k < op.numInputs; ++k) need(readyOf(op.inputs[k].kind, op.inputs[k].reg), StallReason::Operand);
    if (op.slot != target::SlotClass::None && op.interval > 1 && op.desc->semClass != isa::SemClass::MxuMatmul) {
      const auto& units = unitFree_[static_cast<size_t>(op.slot)];
      need(units[std::min<size_t>(op.slotIndex, units.size() - 1)], StallReason::Unit);
    }
    switch (op.desc->semClass) {
      case isa::SemClass::MxuMatmul: {
        const Mxu& m = mxus_[op.unit];
        need(m.pipeFree, StallReason::Unit);
        need(m.weightsReady, StallReason::Unit);
        break;
      }
      case isa::SemClass::MxuWeights:
        if (op.opcode == isa::Opcode::MxuWLatch) need(mxus_[op.unit].stageReady, StallReason::Unit);
        break;
      case isa::SemClass::MxuPop: {
        const Mxu& m = mxus_[op.unit];
        if (!m.fifo.empty()) need(m.fifo.front(), StallReason::MxuResult);
        break;
      }
      case isa::SemClass::Transpose:
        if (op.opcode == isa::Opcode::VXposePop) need(xposes_[op.unit].tileReady, StallReason::Transpose);
        break;
      default: break;
    }
  }
  return at;
}

void CoreTiming::issue(const DecodedProgram& p, const DecodedBundle& b, uint64_t cycle) {
  for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
    const DecodedOp& op = p.ops[i];
    if (op.slot != target::SlotClass::None && op.interval > 1 && op.desc->semClass != isa::SemClass::MxuMatmul) {
      auto& units = unitFree_[static_cast<size_t>(op.slot)];
      units[std::min<size_t>(op.slotIndex, units.size() - 1)] = cycle + op.interval;
    }
    switch (op.desc->semClass) {
      case isa::SemClass::MxuMatmul: {
        Mxu& m = mxus_[op.unit];
        m.pipeFree = cycle + op.interval;
        m.fifo.push_back(cycle + op.latency);
        maxReady_ = std::max(maxReady_, cycle + op.latency);
        mxuBusy_ += op.interval;
        break;
      }
      case isa::SemClass::MxuWeights: {
        Mxu& m = mxus_[op.unit];
        if (op.opcode == isa::Opcode::MxuWLatch) m.weightsReady = cycle + op.latency;
        else m.stageReady = std::max(m.stageReady, cycle + op.latency);
        break;
      }
      case isa::SemClass::MxuPop: {
        Mxu& m = mxus_[op.unit];
        if (!m.fifo.empty()) m.fifo.pop_front();
        break;
      }
      case isa::SemClass::Transpose: {
        Xpose& x = xposes_[op.unit];
        if (op.opcode == isa::Opcode::VXposePush) {
          if (++x.pushes == kTileBlocks) {
            x.pushes = 0;
            x.tileReady = cycle + 1;
          }
        }
        break;
      }
      default: break;
    }
    if (op.dArch >= 0) {
      uint64_t& r = readyOf(op.dKind, op.dArch);
      r = std::max(r, cycle + op.latency);
      maxReady_ = std::max(maxReady_, r);
    }
  }
}

}  // namespace tpu::sim
