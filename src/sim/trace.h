// Chrome / Perfetto trace of a run (trace event format, JSON): one track per
// issue slot (scalar0, valu2, ...), per MXU, per DMA engine, and one for
// issue stalls. Complete events ("ph":"X") with ts/dur in microseconds at the
// target clock. Opens in ui.perfetto.dev and chrome://tracing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpu::sim {

class TraceRecorder {
 public:
  TraceRecorder(double clockHz, size_t limit) : clockHz_(clockHz), limit_(limit) {}

  // Track ids.
  static uint32_t slotTrack(int slotClass, int index) { return 100 + slotClass * 16 + index; }
  static uint32_t mxuTrack(int unit) { return 400 + unit; }
  static uint32_t dmaTrack(int engine) { return 500 + engine; }
  static constexpr uint32_t kStallTrack = 10;

  bool full() const { return events_.size() >= limit_; }
  void add(uint32_t track, std::string_view name, double startCycle, double durCycles, uint32_t bundle,
           uint64_t bytes = 0) {
    if (full()) {
      ++dropped_;
      return;
    }
    events_.push_back(Event{track, name, startCycle, durCycles, bundle, bytes});
  }
  uint64_t dropped() const { return dropped_; }

  // `slotNames[c]` names slot class c; `processName` labels the core.
  std::string render(const std::string& processName, const std::vector<std::string>& slotNames) const;

 private:
  struct Event {
    uint32_t track;
    std::string_view name;
    double start, dur;
    uint32_t bundle;
    uint64_t bytes;
  };
  double clockHz_;
  size_t limit_;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;
};

}  // namespace tpu::sim
