#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sim/sim.h"

namespace tpu::sim {

std::string renderReportText(const SimReport& r) {
  std::string out;
  auto line = [&](std::string s) {
    out += s;
    out += '\n';
  };
  line(fmt::format("target            {} ({:.3f} GHz, 1 TensorCore simulated)", r.targetName, r.clockHz / 1e9));
  line(fmt::format("cycles            {}", r.cycles));
  line(fmt::format("time              {:.3f} us", r.seconds * 1e6));
  line(fmt::format("bundles / ops     {} / {}", r.bundles, r.ops));
  line(fmt::format("MXU               {:.3f} TFLOP/s bf16{} of {:.3f} peak, utilization {:.1f}% ({} pushes)",
                   r.achievedFlops / 1e12, r.intOps > 0 ? fmt::format(" (+int8 {:.3g} TOP)", r.intOps / 1e12) : "",
                   r.peakFlops / 1e12, 100 * r.mxuUtilization, r.mxuPushes));
  line(fmt::format("HBM               {:.2f} GB/s of {:.2f} peak ({:.1f}%), read {} B, written {} B",
                   r.achievedHbmBytesPerSecond / 1e9, r.peakHbmBytesPerSecond / 1e9, 100 * r.hbmUtilization,
                   r.hbmBytesRead, r.hbmBytesWritten));
  line(fmt::format("VPU               {} ops, slot utilization {:.1f}%", r.vpuOps, 100 * r.vpuUtilization));
  line(fmt::format("DMA               {} transfers, {} B, engine utilization {:.1f}%", r.dmaCount, r.dmaBytes,
                   100 * r.dmaEngineUtilization));
  line(fmt::format("roofline          {:.3f} us ({}-bound, intensity {:.1f} FLOP/B); achieved {:.1f}% of the bound",
                   r.roofline.seconds * 1e6, r.roofline.computeBound ? "compute" : "memory", r.roofline.intensity,
                   100 * r.rooflineFraction));
  std::string stalls;
  for (size_t i = 0; i < kNumStallReasons; ++i)
    if (r.stallCycles[i])
      stalls += fmt::format("{}{}={}", stalls.empty() ? "" : " ", stallReasonName(static_cast<StallReason>(i)),
                            r.stallCycles[i]);
  line(fmt::format("stall cycles      {}", stalls.empty() ? "none" : stalls));
  std::string slots;
  for (size_t i = 0; i < target::kNumSlotClasses; ++i)
    if (r.opsPerSlot[i])
      slots += fmt::format("{}{}={}", slots.empty() ? "" : " ", target::slotClassName(static_cast<target::SlotClass>(i)),
                           r.opsPerSlot[i]);
  line(fmt::format("ops per slot      {}", slots.empty() ? "none" : slots));
  if (r.traceEventsDropped) line(fmt::format("trace             {} events dropped (limit)", r.traceEventsDropped));
  return out;
}

std::string renderReportJson(const SimReport& r) {
  nlohmann::ordered_json j;
  j["target"] = r.targetName;
  j["clock_hz"] = r.clockHz;
  j["cycles"] = r.cycles;
  j["seconds"] = r.seconds;
  j["bundles"] = r.bundles;
  j["ops"] = r.ops;
  j["flops"] = r.flops;
  j["int_ops"] = r.intOps;
  j["mxu_pushes"] = r.mxuPushes;
  j["mxu_busy_cycles"] = r.mxuBusyCycles;
  j["vpu_ops"] = r.vpuOps;
  j["dma_count"] = r.dmaCount;
  j["dma_bytes"] = r.dmaBytes;
  j["hbm_bytes_read"] = r.hbmBytesRead;
  j["hbm_bytes_written"] = r.hbmBytesWritten;
  j["achieved_flops_per_second"] = r.achievedFlops;
  j["achieved_hbm_bytes_per_second"] = r.achievedHbmBytesPerSecond;
  j["peak_flops_per_second"] = r.peakFlops;
  j["peak_int_ops_per_second"] = r.peakIntOps;
  j["peak_hbm_bytes_per_second"] = r.peakHbmBytesPerSecond;
  j["mxu_utilization"] = r.mxuUtilization;
  j["vpu_utilization"] = r.vpuUtilization;
  j["hbm_utilization"] = r.hbmUtilization;
  j["dma_engine_utilization"] = r.dmaEngineUtilization;
  j["roofline"] = {{"seconds", r.roofline.seconds},
                   {"compute_seconds", r.roofline.computeSeconds},
                   {"memory_seconds", r.roofline.memorySeconds},
                   {"bound", r.roofline.computeBound ? "compute" : "memory"},
                   {"intensity", r.roofline.intensity},
                   {"fraction_of_bound", r.rooflineFraction}};
  nlohmann::ordered_json stalls = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kNumStallReasons; ++i)
    stalls[std::string(stallReasonName(static_cast<StallReason>(i)))] = r.stallCycles[i];
  j["stall_cycles"] = stalls;
  nlohmann::ordered_json slots = nlohmann::ordered_json::object();
  for (size_t i = 0; i < target::kNumSlotClasses; ++i)
    slots[std::string(target::slotClassName(static_cast<target::SlotClass>(i)))] = r.opsPerSlot[i];
  j["ops_per_slot"] = slots;
  j["trace_events_dropped"] = r.traceEventsDropped;
  return j.dump(2) + "\n";
}

}  // namespace tpu::sim
