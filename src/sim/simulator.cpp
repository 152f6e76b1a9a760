// The simulator loop: asks the timing half when each bundle may issue,
// lands DMAs whose last byte has arrived by then, executes the bundle on the
// functional half, and reports faults with the bundle, its label and source.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "isa/verify.h"
#include "sim/decode.h"
#include "sim/machine.h"
#include "sim/mxu_kernel.h"
#include "sim/sim.h"
#include "sim/timing.h"
#include "sim/trace.h"

namespace tpu::sim {

namespace {

using isa::Opcode;

class Runner {
 public:
  Runner(const isa::Program& p, const target::TargetDesc& t, const SimOptions& o, DiagnosticEngine& d)
      : program_(p), target_(t), options_(o), diags_(d) {}

  std::optional<SimResult> run(const std::vector<std::string>& inputs);

 private:
  // "bundle 12 (loop+3)" plus the source position when known.
  void fault(uint32_t bundle, const std::string& message) {
    std::string label;
    const isa::Label* best = nullptr;
    for (const isa::Label& l : program_.labels)
      if (l.bundle <= bundle && (!best || l.bundle >= best->bundle)) best = &l;
    if (best) label = best->bundle == bundle ? fmt::format(" ({})", best->name)
                                              : fmt::format(" ({}+{})", best->name, bundle - best->bundle);
    std::string msg = fmt::format("bundle {}{}: {}", bundle, label, message);
    if (bundle < options_.bundleLocations.size() && options_.bundleLocations[bundle].valid())
      diags_.error(options_.bundleLocations[bundle], std::move(msg));
    else
      diags_.error(std::move(msg));
  }
  void fault(uint32_t bundle) { fault(bundle, machine_->fault()); }
  bool checkTarget();
  bool verify();
  void landDmas();
  // Advances DMAs until `cond` holds, moving `at` to the events' cycles.
  template <class Cond>
  bool waitFor(uint64_t& at, uint32_t bundle, Cond cond, const char* what);

  const isa::Program& program_;
  const target::TargetDesc& target_;
  const SimOptions& options_;
  DiagnosticEngine& diags_;
  DecodedProgram decoded_;
  std::unique_ptr<Machine> machine_;
  std::unique_ptr<CoreTiming> timing_;
  std::unique_ptr<DmaModel> dma_;
  std::unique_ptr<TraceRecorder> trace_;
  std::unordered_map<uint64_t, DmaTransfer> inflight_;
  std::vector<DmaModel::Completion> done_;
  SimReport report_;
  double lastDmaEnd_ = 0;
  ExecProfile profile_;
  static constexpr size_t kProfileRecordLimit = 2'000'000;
  // The profile's attribution: cycles (prev, at] to bundle `pc` and its region.
  void profileIssue(uint32_t pc, uint64_t at, uint64_t prevEnd, StallReason reason, uint64_t stalled);
};

bool Runner::checkTarget() {
  const target::RegisterDesc& r = target_.registers;
  if (r.sublanes != kSublanes || r.lanes != kLanes || r.laneBits != 32) {
    diags_.error(fmt::format("target '{}': the simulator models 8x128x32-bit vector registers, not {}x{}x{}",
                             target_.name, r.sublanes, r.lanes, r.laneBits));
    return false;
  }
  if (target_.mxu.count > 0 && (target_.mxu.rows != kMxuDim || target_.mxu.cols != kMxuDim)) {
    diags_.error(fmt::format("target '{}': the simulator models 128x128 MXUs, not {}x{}", target_.name,
                             target_.mxu.rows, target_.mxu.cols));
    return false;
  }
  if (!(target_.clockHz > 0) || !(target_.memory.hbmBytesPerSecond > 0)) {
    diags_.error(fmt::format("target '{}' needs a positive clock and HBM bandwidth", target_.name));
    return false;
  }
  return true;
}

bool Runner::verify() {
  if (std::string e = isa::checkProgramTables(program_, &target_); !e.empty()) {
    diags_.error(e);
    return false;
  }
  for (uint32_t b = 0; b < program_.bundles.size(); ++b) {
    for (const isa::Instr& in : program_.bundles[b].instrs) {
      std::string e = isa::checkInstrStructure(in, program_);
      if (e.empty()) e = isa::checkInstrForTarget(in, target_);
      if (!e.empty()) {
        fault(b, "illegal instruction: " + e);
        return false;
      }
    }
    if (std::string e = isa::checkBundle(program_.bundles[b], target_); !e.empty()) {
      fault(b, "illegal bundle: " + e);
      return false;
    }
  }
  return true;
}

void Runner::landDmas() {
  for (const DmaModel::Completion& c : done_) {
    auto it = inflight_.find(c.id);
    if (it == inflight_.end()) continue;
    const DmaTransfer& t = it->second;
    machine_->completeDma(t);
    lastDmaEnd_ = std::max(lastDmaEnd_, c.end);
    if (options_.profile) {
      if (profile_.dmas.size() < kProfileRecordLimit)
        profile_.dmas.push_back({t.bundle, c.engine, c.start, c.end, t.hbmRead + t.hbmWritten, t.bytes});
      else
        profile_.recordsDropped++;
    }
    if (trace_) {
      trace_->add(TraceRecorder::dmaTrack(c.engine), t.desc->name.empty() ? isa::instrDesc(t.opcode).mnemonic
                                                                           : std::string_view(t.desc->name),
                  c.start, c.end - c.start, t.bundle, t.bytes);
    }
    inflight_.erase(it);
  }
  done_.clear();
}

void Runner::profileIssue(uint32_t pc, uint64_t at, uint64_t prevEnd, StallReason reason, uint64_t stalled) {
  BundleProfile& bp = profile_.bundles[pc];
  bp.issues++;
  bp.cycles += at + 1 - prevEnd;
  bp.stallCycles[static_cast<size_t>(reason)] += stalled;
  if (options_.bundleRegion.empty()) return;
  uint32_t region = pc < options_.bundleRegion.size() ? options_.bundleRegion[pc] : UINT32_MAX;
  if (!profile_.spans.empty() && profile_.spans.back().region == region) {
    profile_.spans.back().end = at + 1;
  } else if (profile_.spans.size() < kProfileRecordLimit) {
    profile_.spans.push_back({region, prevEnd, at + 1});
  } else {
    profile_.recordsDropped++;
  }
}

template <class Cond>
bool Runner::waitFor(uint64_t& at, uint32_t bundle, Cond cond, const char* what) {
  while (!cond()) {
    double next = dma_->nextEventTime();
    if (std::isinf(next)) {
      fault(bundle, fmt::format("{} can never complete: no DMA is in flight", what));
      return false;
    }
    uint64_t c = static_cast<uint64_t>(std::ceil(next));
    if (c > options_.maxCycles) {
      fault(bundle, fmt::format("exceeded --max-cycles={} while waiting ({})", options_.maxCycles, what));
      return false;
    }
    at = std::max(at, c);
    dma_->advanceTo(static_cast<double>(at), done_);
    landDmas();
  }
  return true;
}

std::optional<SimResult> Runner::run(const std::vector<std::string>& inputs) {
  if (!checkTarget() || !verify()) return std::nullopt;
  const isa::Entry* entry = nullptr;
  if (options_.entry.empty()) {
    if (program_.entries.empty()) {
      diags_.error("the program has no entry point");
      return std::nullopt;
    }
    entry = &program_.entries.front();
  } else {
    entry = program_.findEntry(options_.entry);
    if (!entry) {
      diags_.error(fmt::format("the program has no entry '{}'", options_.entry));
      return std::nullopt;
    }
  }
  if (program_.bundles.empty()) {
    diags_.error(fmt::format("entry '{}' has no code", entry->name));
    return std::nullopt;
  }
  decoded_ = decodeProgram(program_, target_);
  machine_ = std::make_unique<Machine>(program_, target_, decoded_, options_.hostThreads);
  if (std::string e = machine_->load(*entry, inputs); !e.empty()) {
    diags_.error(e);
    return std::nullopt;
  }
  timing_ = std::make_unique<CoreTiming>(target_, decoded_.regs);
  dma_ = std::make_unique<DmaModel>(target_);
  if (options_.trace) trace_ = std::make_unique<TraceRecorder>(target_.clockHz, options_.traceEventLimit);

  const uint64_t maxOutstanding = static_cast<uint64_t>(std::max(1, target_.dma.maxOutstanding));
  const int branchLatency = std::max(1, target_.latency(target::LatencyClass::Branch));
  SimReport& R = report_;
  uint64_t notBefore = 0, endCycle = 0;
  uint32_t pc = entry->start;
  const uint32_t numBundles = static_cast<uint32_t>(decoded_.bundles.size());
  std::vector<std::pair<int, int64_t>> waits;
  uint64_t attributedTo = 0;  // cycles [0, attributedTo) belong to bundles already issued
  if (options_.profile) profile_.bundles.resize(numBundles);

  while (true) {
    if (pc >= numBundles) {
      fault(numBundles - 1, "execution ran past the last bundle without reaching halt");
      return std::nullopt;
    }
    const DecodedBundle& b = decoded_.bundles[pc];
    StallReason reason = StallReason::Operand;
    uint64_t at = timing_->earliestIssue(decoded_, b, notBefore, reason);
    if (at > options_.maxCycles) {
      fault(pc, fmt::format("exceeded --max-cycles={} (the bundle would issue at cycle {})", options_.maxCycles, at));
      return std::nullopt;
    }
    dma_->advanceTo(static_cast<double>(at), done_);
    landDmas();

    if (b.hasSync || b.hasHalt) {
      uint64_t before = at;
      if (b.hasSync) at = std::max(at, timing_->allResultsReady());
      if (!waitFor(at, pc, [&] { return dma_->outstanding() == 0; }, "sync")) return std::nullopt;
      if (at > before) reason = StallReason::Sync;
    }
    if (b.hasDma) {
      uint64_t before = at;
      uint64_t need = 0;
      for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i)
        if (decoded_.ops[i].desc->semClass == isa::SemClass::Dma) ++need;
      if (!waitFor(at, pc, [&] { return dma_->outstanding() + need <= maxOutstanding; }, "DMA issue"))
        return std::nullopt;
      if (at > before) reason = StallReason::DmaQueue;
    }
    if (b.hasWait) {
      uint64_t before = at;
      waits.clear();
      for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
        const DecodedOp& op = decoded_.ops[i];
        if (op.opcode != Opcode::SemWait) continue;
        int s = machine_->semIndex(op, op.sem);
        if (s < 0) {
          fault(pc);
          return std::nullopt;
        }
        int64_t n = machine_->semAmount(op);
        auto it = std::find_if(waits.begin(), waits.end(), [&](auto& w) { return w.first == s; });
        if (it == waits.end()) waits.emplace_back(s, n);
        else it->second += n;
      }
      for (auto [s, n] : waits) {
        std::string what = fmt::format("sem.wait on sem{} (count {}, needs {})", s, machine_->semaphore(s), n);
        if (!waitFor(at, pc, [&] { return machine_->semaphore(s) >= n; }, what.c_str())) return std::nullopt;
      }
      if (at > before) reason = StallReason::Semaphore;
    }
    if (at > options_.maxCycles) {
      fault(pc, fmt::format("exceeded --max-cycles={} (the bundle would issue at cycle {})", options_.maxCycles, at));
      return std::nullopt;
    }
    if (options_.profile) {
      profileIssue(pc, at, attributedTo, reason, at > notBefore ? at - notBefore : 0);
      attributedTo = at + 1;
    }
    if (at > notBefore) {
      R.stallCycles[static_cast<size_t>(reason)] += at - notBefore;
      if (trace_) trace_->add(TraceRecorder::kStallTrack, stallReasonName(reason), static_cast<double>(notBefore),
                              static_cast<double>(at - notBefore), pc);
    }

    // Execute.
    machine_->preload(b);
    int64_t nextPc = -1;
    for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
      const DecodedOp& op = decoded_.ops[i];
      if (op.desc->semClass == isa::SemClass::Dma) {
        DmaTransfer t;
        if (!machine_->prepareDma(op, t)) {
          fault(pc);
          return std::nullopt;
        }
        bool onChip = t.hbmRead == 0 && t.hbmWritten == 0;
        double poolBytes = onChip ? 2.0 * t.bytes : static_cast<double>(t.hbmRead + t.hbmWritten);
        uint64_t id = dma_->submit(at, onChip ? DmaModel::kOnChip : DmaModel::kHbm, poolBytes);
        R.dmaCount++;
        R.dmaBytes += t.bytes;
        R.hbmBytesRead += t.hbmRead;
        R.hbmBytesWritten += t.hbmWritten;
        if (options_.profile) {
          profile_.bundles[pc].hbmBytes += t.hbmRead + t.hbmWritten;
          profile_.bundles[pc].dmaBytes += t.bytes;
          uint64_t extent = t.bytes;
          if (t.desc) {
            extent = t.desc->chunkBytes;
            for (const isa::DmaDim& d : t.desc->dims)
              extent += static_cast<uint64_t>(d.count - 1) *
                        static_cast<uint64_t>(std::abs(machine_->isVmem(t.dst) ? d.dstStride : d.srcStride));
          }
          int64_t offset = machine_->isVmem(t.dst) ? t.dstOffset : machine_->isVmem(t.src) ? t.srcOffset : -1;
          if (offset >= 0)
            profile_.bundles[pc].vmemHigh = std::max(profile_.bundles[pc].vmemHigh, static_cast<uint64_t>(offset) + extent);
        }
        inflight_.emplace(id, t);
      } else if (!machine_->exec(op, nextPc)) {
        fault(pc);
        return std::nullopt;
      }
      if (op.slot != target::SlotClass::None) R.opsPerSlot[static_cast<size_t>(op.slot)]++;
      switch (op.desc->semClass) {
        case isa::SemClass::MxuMatmul:
          R.mxuPushes++;
          if (op.opcode == Opcode::MxuMatmulS8) R.intOps += 2.0 * kSublanes * kMxuDim * kMxuDim;
          else R.flops += 2.0 * kSublanes * kMxuDim * kMxuDim;
          if (options_.profile) {
            profile_.bundles[pc].mxuPushes++;
            profile_.bundles[pc].mxuFlops += 2.0 * kSublanes * kMxuDim * kMxuDim;
          }
          break;
        default: break;
      }
      if (trace_) {
        uint32_t track = op.unit >= 0 && op.slot == target::SlotClass::Mxu
                             ? TraceRecorder::mxuTrack(op.unit)
                             : TraceRecorder::slotTrack(static_cast<int>(op.slot), op.slotIndex);
        trace_->add(track, op.desc->mnemonic, static_cast<double>(at), std::max(1, op.interval), pc);
      }
    }
    machine_->commit(b);
    timing_->issue(decoded_, b, at);
    R.bundles++;
    R.ops += b.numOps;

    if (b.hasHalt) {
      endCycle = std::max({at + 1, timing_->allResultsReady(), static_cast<uint64_t>(std::ceil(lastDmaEnd_))});
      if (endCycle > options_.maxCycles) {
        fault(pc, fmt::format("exceeded --max-cycles={} (the program ends at cycle {})", options_.maxCycles, endCycle));
        return std::nullopt;
      }
      if (options_.profile && endCycle > attributedTo) {
        profile_.bundles[pc].cycles += endCycle - attributedTo;
        if (!profile_.spans.empty()) profile_.spans.back().end = endCycle;
      }
      break;
    }
    notBefore = at + (b.hasBranch ? static_cast<uint64_t>(branchLatency) : 1);
    pc = nextPc >= 0 ? static_cast<uint32_t>(nextPc) : pc + 1;
  }

  // Report.
  R.targetName = target_.name;
  R.clockHz = target_.clockHz;
  R.mxuCount = target_.mxu.count;
  R.cycles = endCycle;
  R.seconds = static_cast<double>(endCycle) / target_.clockHz;
  R.mxuBusyCycles = timing_->mxuBusyCycles();
  R.vpuOps = R.opsPerSlot[static_cast<size_t>(target::SlotClass::VAlu)];
  R.dmaEngineBusyCycles = static_cast<uint64_t>(std::llround(dma_->engineBusyCycles()));
  R.peakFlops = target::peakFlopsPerCore(target_, target::MathKind::Bf16);
  R.peakIntOps = target_.mxu.int8 ? target::peakFlopsPerCore(target_, target::MathKind::Int8) : 0;
  R.peakHbmBytesPerSecond = target_.memory.hbmBytesPerSecond;
  double cyc = std::max<double>(1, static_cast<double>(endCycle));
  R.achievedFlops = R.seconds > 0 ? (R.flops + R.intOps) / R.seconds : 0;
  double hbm = static_cast<double>(R.hbmBytesRead + R.hbmBytesWritten);
  R.achievedHbmBytesPerSecond = R.seconds > 0 ? hbm / R.seconds : 0;
  R.mxuUtilization = target_.mxu.count ? static_cast<double>(R.mxuBusyCycles) / (cyc * target_.mxu.count) : 0;
  int valuSlots = std::max(1, target_.slotCount(target::SlotClass::VAlu));
  R.vpuUtilization = static_cast<double>(R.vpuOps) / (cyc * valuSlots);
  R.hbmUtilization = R.achievedHbmBytesPerSecond / R.peakHbmBytesPerSecond;
  R.dmaEngineUtilization = static_cast<double>(R.dmaEngineBusyCycles) / (cyc * std::max(1, target_.dma.engines));
  target::RooflineBound& rb = R.roofline;
  rb.computeSeconds = (R.peakFlops > 0 ? R.flops / R.peakFlops : 0) + (R.peakIntOps > 0 ? R.intOps / R.peakIntOps : 0);
  rb.memorySeconds = hbm / R.peakHbmBytesPerSecond;
  rb.seconds = std::max(rb.computeSeconds, rb.memorySeconds);
  rb.computeBound = rb.computeSeconds >= rb.memorySeconds;
  rb.intensity = hbm > 0 ? (R.flops + R.intOps) / hbm : 0;
  R.rooflineFraction = R.seconds > 0 ? rb.seconds / R.seconds : 0;

  SimResult result;
  result.results = machine_->results(*entry);
  if (trace_) {
    R.traceEventsDropped = trace_->dropped();
    std::vector<std::string> slotNames;
    for (size_t c = 0; c < target::kNumSlotClasses; ++c)
      slotNames.emplace_back(target::slotClassName(static_cast<target::SlotClass>(c)));
    result.traceJson = trace_->render(fmt::format("TensorCore 0 ({})", target_.name), slotNames);
  }
  result.report = R;
  result.profile = std::move(profile_);
  return result;
}

}  // namespace

std::string_view stallReasonName(StallReason reason) {
  switch (reason) {
    case StallReason::Operand: return "operand";
    case StallReason::Unit: return "unit-busy";
    case StallReason::MxuResult: return "mxu-result";
    case StallReason::Transpose: return "transpose";
    case StallReason::Semaphore: return "semaphore";
    case StallReason::DmaQueue: return "dma-queue";
    case StallReason::Sync: return "sync";
  }
  return "?";
}

std::optional<SimResult> simulate(const isa::Program& program, const target::TargetDesc& target,
                                  const std::vector<std::string>& inputs, const SimOptions& options,
                                  DiagnosticEngine& diags) {
  Runner runner(program, target, options, diags);
  return runner.run(inputs);
}

}  // namespace tpu::sim
