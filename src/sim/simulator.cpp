// The simulator loop: asks the timing half when each bundle may issue,
// lands DMAs whose last byte has arrived by then, executes the bundle on the
// functional half, and reports faults with the bundle, its label and source.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <map>
#include <unordered_map>

#include "isa/verify.h"
#include "sim/decode.h"
#include "sim/machine.h"
#include "sim/mxu_kernel.h"
#include "sim/sim.h"
#include "sim/timing.h"
#include "sim/trace.h"
#include "sim/transport.h"

namespace tpu::sim {

namespace {

using isa::Opcode;

class Pod;

// The messages between the ranks of a pod under mpirun (same binary, same
// host byte order: raw values).
class Writer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void putString(std::string_view s) {
    put<uint64_t>(s.size());
    out.append(s);
  }
  std::string out;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    T v{};
    if (at_ + sizeof v <= in_.size()) std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string getString() {
    uint64_t n = get<uint64_t>();
    std::string s(in_.substr(std::min<size_t>(at_, in_.size()), n));
    at_ += n;
    return s;
  }
  bool done() const { return at_ >= in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

void putTransfer(Writer& w, const isa::Program& program, const DmaTransfer& t) {
  w.put(t.bundle);
  w.put(t.opcode);
  w.put(static_cast<uint32_t>(t.desc - program.dmaDescriptors.data()));
  w.put(t.dstOffset);
  w.put(t.srcOffset);
  w.put(t.sem);
  w.put(t.sem2);
  w.put(t.remoteChip);
  w.put(t.dstSpace);
  w.put(t.dstBuffer);
  w.put(t.bytes);
  w.put(t.hbmRead);
  w.put(t.hbmWritten);
}

// A transfer of a chip another rank simulates: no memory pointers (only the
// source's rank reads its source; the destination's resolves its own).
DmaTransfer getTransfer(Reader& r, const isa::Program& program) {
  DmaTransfer t;
  t.bundle = r.get<uint32_t>();
  t.opcode = r.get<isa::Opcode>();
  uint32_t desc = r.get<uint32_t>();
  t.desc = desc < program.dmaDescriptors.size() ? &program.dmaDescriptors[desc] : nullptr;
  t.dstOffset = r.get<int64_t>();
  t.srcOffset = r.get<int64_t>();
  t.sem = r.get<int>();
  t.sem2 = r.get<int>();
  t.remoteChip = r.get<int>();
  t.dstSpace = r.get<isa::MemSpace>();
  t.dstBuffer = r.get<uint32_t>();
  t.bytes = r.get<uint64_t>();
  t.hbmRead = r.get<uint64_t>();
  t.hbmWritten = r.get<uint64_t>();
  return t;
}

// One chip: the functional machine, its timing, its DMAs. step() tries to
// issue the bundle at pc; when a wait cannot be met before something another
// chip does (or a transfer on the ICI lands) could change it, the chip
// yields and the pod runs others first.
class ChipRunner {
 public:
  enum class Step { Issued, Waiting, Halted, Fault };

  ChipRunner(const isa::Program& p, const target::TargetDesc& t, const SimOptions& o, DiagnosticEngine& d,
             const DecodedProgram& decoded, int chip, Pod* pod)
      : program_(p), target_(t), options_(o), diags_(d), decoded_(decoded), chip_(chip), pod_(pod) {}

  bool start(const isa::Entry& entry, const std::vector<std::string_view>& inputs, int chips,
             HostMemoryBudget* budget);
  Step step();
  // When the chip may try again (+inf: only an event elsewhere can help).
  double resumeAt() const { return resumeAt_; }
  bool halted() const { return halted_; }
  // An ICI transfer or a barrier involving this chip completed at `t`.
  void wake(double t) {
    if (!halted_ && std::isinf(resumeAt_)) resumeAt_ = std::max(t, static_cast<double>(waitingSince_));
    else if (!halted_) resumeAt_ = std::min(resumeAt_, std::max(t, static_cast<double>(waitingSince_)));
  }
  void passBarrier(double t) {
    barrierPassAt_ = static_cast<uint64_t>(std::ceil(t));
    wake(t);
  }
  const std::string& waitingOn() const { return waitingOn_; }
  uint32_t pc() const { return pc_; }
  // mpirun: what every rank knows of a chip that one rank simulates (the
  // scheduling state the pod's loop and events read).
  void saveSchedule(Writer& w) const {
    w.put(resumeAt_);
    w.put<uint8_t>(halted_);
    w.put(waitingSince_);
    w.put(pc_);
    w.putString(waitingOn_);
    w.put<uint8_t>(atBarrier_);
    w.put(barrierPassAt_);
    w.put(remoteOutstanding_);
  }
  void loadSchedule(Reader& r) {
    resumeAt_ = r.get<double>();
    halted_ = r.get<uint8_t>() != 0;
    waitingSince_ = r.get<uint64_t>();
    pc_ = r.get<uint32_t>();
    waitingOn_ = r.getString();
    atBarrier_ = r.get<uint8_t>() != 0;
    barrierPassAt_ = r.get<uint64_t>();
    remoteOutstanding_ = r.get<int64_t>();
  }
  // A chip simulated by another rank: only its schedule, from the entry.
  void startShadow(const isa::Entry& entry) { pc_ = entry.start; }
  Machine& machine() { return *machine_; }
  void remoteDone() { --remoteOutstanding_; }
  SimResult finish(const isa::Entry& entry);
  // "bundle 12 (loop+3)" plus the source position when known.
  void fault(uint32_t bundle, const std::string& message);
  std::string where(uint32_t bundle) const;
  ChipPodStats stats;

 private:
  void fault(uint32_t bundle) { fault(bundle, machine_->fault()); }
  bool landDmas();
  enum class Wait { Met, Yield, Fault };
  // Advances local DMAs until `cond` holds, moving `at` to the events'
  // cycles, as long as no pod event comes first.
  template <class Cond>
  Wait waitFor(uint64_t& at, uint32_t bundle, Cond cond, const std::string& what);

  const isa::Program& program_;
  const target::TargetDesc& target_;
  const SimOptions& options_;
  DiagnosticEngine& diags_;
  const DecodedProgram& decoded_;
  int chip_;
  Pod* pod_;
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
  uint64_t attributedTo_ = 0;  // cycles [0, attributedTo_) belong to bundles already issued
  // The profile's attribution: cycles (prev, at] to bundle `pc` and its region.
  void profileIssue(uint32_t pc, uint64_t at, uint64_t prevEnd, StallReason reason, uint64_t stalled);
  // A DMA started by bundle `pc`: its HBM bytes and the VMEM it touches.
  void profileDma(uint32_t pc, const DmaTransfer& t);
  uint64_t maxOutstanding_ = 1;
  uint64_t branchLatency_ = 1;
  uint64_t notBefore_ = 0, endCycle_ = 0;
  uint32_t pc_ = 0;
  bool halted_ = false;
  // A bundle that yielded: not before this cycle when retried.
  uint64_t waitingSince_ = 0;
  double resumeAt_ = 0;
  std::string waitingOn_;
  StallReason waitReason_ = StallReason::Semaphore;
  bool atBarrier_ = false;
  uint64_t barrierPassAt_ = 0;  // > 0: released
  int64_t remoteOutstanding_ = 0;
  std::vector<std::pair<int, int64_t>> waits_;
};

// The chips, the ICI links and the events between chips.
class Pod {
 public:
  Pod(const target::TargetDesc& t, const target::Topology& topo)
      : target_(t), topo_(topo), linkFree_(topo.linkCount(), 0.0), links_(topo.linkCount()) {
    bytesPerCycle_ = t.ici.bytesPerSecondPerLink > 0 ? t.ici.bytesPerSecondPerLink / t.clockHz : 1.0;
    hopCycles_ = t.ici.hopLatencyNs * 1e-9 * t.clockHz;
  }
  std::vector<std::unique_ptr<ChipRunner>> chips;
  bool record = false;  // keep IciTransferRecords (profile, trace)
  static constexpr size_t kTransferRecordLimit = 2'000'000;
  std::vector<IciTransferRecord> transfers;
  uint64_t transfersDropped = 0;

  // mpirun: chip c is simulated by rank owner[c]; this process is `rank`.
  void distribute(Transport* transport, const isa::Program* program, std::vector<int> owner) {
    transport_ = transport;
    program_ = program;
    owner_ = std::move(owner);
    rank_ = transport->rank();
  }
  bool distributed() const { return transport_ != nullptr; }
  int owner(int chip) const { return transport_ ? owner_[chip] : 0; }
  bool mine(int chip) const { return !transport_ || owner_[chip] == rank_; }
  Transport* transport() const { return transport_; }
  // While set, send() and arrive() are recorded for the other ranks.
  Writer* journal = nullptr;
  // The chips at both ends of the earliest pending transfer.
  std::pair<int, int> nextEnds() const {
    const Pending& p = pending_.begin()->second;
    return {p.src, p.t.remoteChip};
  }

  // Earliest pending ICI arrival (+inf if none).
  double nextEventTime() const { return pending_.empty() ? INFINITY : pending_.begin()->first.first; }
  void send(int src, uint64_t at, const DmaTransfer& t) {
    if (journal) {
      journal->put('T');
      journal->put<int32_t>(src);
      journal->put(at);
      putTransfer(*journal, *program_, t);
    }
    std::vector<int> path = topo_.route(src, t.remoteChip);
    double ser = static_cast<double>(t.bytes) / bytesPerCycle_;
    double s = static_cast<double>(at) + target_.dma.latencyCycles;
    double lastStart = s;
    for (int link : path) {
      s = std::max(s, linkFree_[link]);
      linkFree_[link] = s + ser;
      links_[link].bytes += t.bytes;
      links_[link].transfers++;
      links_[link].busyCycles += ser;
      if (record) {
        if (transfers.size() < kTransferRecordLimit)
          transfers.push_back({link, src, t.remoteChip, s, s + ser, t.bytes});
        else
          ++transfersDropped;
      }
      lastStart = s;
      s += hopCycles_;
    }
    double end = lastStart + ser + hopCycles_ * (path.empty() ? 0 : 1);
    pending_.emplace(std::make_pair(end, seq_++), Pending{src, t});
    iciBytes_ += t.bytes * path.size();
  }
  // Lands the earliest transfer: data into the destination chip, `sent`
  // here, `recv` there. False after reporting a fault.
  bool landNext() {
    auto it = pending_.begin();
    double end = it->first.first;
    Pending p = std::move(it->second);
    pending_.erase(it);
    ChipRunner& src = *chips[p.src];
    ChipRunner& dst = *chips[p.t.remoteChip];
    DmaTransfer t = p.t;
    int recv = t.sem2;
    t.sem2 = -1;
    const bool srcMine = mine(p.src), dstMine = mine(t.remoteChip);
    if (srcMine && dstMine) {
      t.dst = dst.machine().memory(t.dstSpace, t.dstBuffer);
      if (!src.machine().completeDma(t)) {
        src.fault(t.bundle, src.machine().fault());
        return false;
      }
      if (recv >= 0) dst.machine().signal(recv);
    } else if (owner(p.src) != owner(t.remoteChip)) {
      // Across ranks: the source's rank reads the bytes when they land and
      // sends them; the destination's writes them and tells every rank
      // whether that worked (all ranks take this branch together).
      std::string bytes;
      char ok = 1;
      if (srcMine) {
        src.machine().gatherDma(t, bytes);
        transport_->send(owner(t.remoteChip), bytes);
        if (t.sem >= 0) src.machine().signal(t.sem);
      } else if (dstMine) {
        transport_->receive(owner(p.src), bytes);
        t.dst = dst.machine().memory(t.dstSpace, t.dstBuffer);
        if (dst.machine().scatterDma(t, bytes)) {
          if (recv >= 0) dst.machine().signal(recv);
        } else {
          src.fault(t.bundle, dst.machine().fault());
          ok = 0;
        }
      }
      std::string verdict(1, ok);
      transport_->broadcast(owner(t.remoteChip), verdict);
      if (verdict[0] == 0) return false;
    }
    src.remoteDone();
    src.wake(end);
    dst.wake(end);
    return true;
  }
  // barrier.pod: returns true once every chip has arrived (and releases them).
  void arrive(uint64_t at) {
    if (journal) {
      journal->put('A');
      journal->put(at);
    }
    ++arrived_;
    lastArrival_ = std::max(lastArrival_, at);
    size_t live = 0;
    for (auto& c : chips) live += !c->halted();
    if (arrived_ < live) return;
    int diameter = 0;
    for (int a = 0; a < topo_.axes(); ++a) diameter += topo_.wraps(a) ? topo_.dim(a) / 2 : topo_.dim(a) - 1;
    double release = static_cast<double>(lastArrival_) + diameter * hopCycles_;
    arrived_ = 0;
    lastArrival_ = 0;
    for (auto& c : chips)
      if (!c->halted()) c->passBarrier(release);
  }
  const target::Topology& topology() const { return topo_; }
  uint64_t iciBytes() const { return iciBytes_; }
  std::vector<IciLinkStats> linkStats() const {
    std::vector<IciLinkStats> out;
    for (int l = 0; l < topo_.linkCount(); ++l) {
      if (links_[l].transfers == 0) continue;
      IciLinkStats s = links_[l];
      s.id = l;
      s.name = topo_.linkName(l);
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  struct Pending {
    int src;
    DmaTransfer t;
  };
  const target::TargetDesc& target_;
  const target::Topology& topo_;
  Transport* transport_ = nullptr;
  const isa::Program* program_ = nullptr;
  std::vector<int> owner_;
  int rank_ = 0;
  double bytesPerCycle_ = 1, hopCycles_ = 0;
  std::vector<double> linkFree_;
  std::vector<IciLinkStats> links_;
  std::map<std::pair<double, uint64_t>, Pending> pending_;
  uint64_t seq_ = 0;
  uint64_t iciBytes_ = 0;
  size_t arrived_ = 0;
  uint64_t lastArrival_ = 0;
};

std::string ChipRunner::where(uint32_t bundle) const {
  std::string label;
  const isa::Label* best = nullptr;
  for (const isa::Label& l : program_.labels)
    if (l.bundle <= bundle && (!best || l.bundle >= best->bundle)) best = &l;
  if (best) label = best->bundle == bundle ? fmt::format(" ({})", best->name)
                                            : fmt::format(" ({}+{})", best->name, bundle - best->bundle);
  return fmt::format("bundle {}{}", bundle, label);
}

void ChipRunner::fault(uint32_t bundle, const std::string& message) {
  std::string msg = pod_ ? fmt::format("chip {}: {}: {}", chip_, where(bundle), message)
                         : fmt::format("{}: {}", where(bundle), message);
  if (bundle < options_.bundleLocations.size() && options_.bundleLocations[bundle].valid())
    diags_.error(options_.bundleLocations[bundle], std::move(msg));
  else
    diags_.error(std::move(msg));
}

bool ChipRunner::landDmas() {
  for (const DmaModel::Completion& c : done_) {
    auto it = inflight_.find(c.id);
    if (it == inflight_.end()) continue;
    const DmaTransfer& t = it->second;
    if (!machine_->completeDma(t)) {
      fault(t.bundle);
      done_.clear();
      return false;
    }
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
  return true;
}

void ChipRunner::profileIssue(uint32_t pc, uint64_t at, uint64_t prevEnd, StallReason reason, uint64_t stalled) {
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

void ChipRunner::profileDma(uint32_t pc, const DmaTransfer& t) {
  BundleProfile& bp = profile_.bundles[pc];
  bp.hbmBytes += t.hbmRead + t.hbmWritten;
  bp.dmaBytes += t.bytes;
  const bool toVmem = machine_->isVmem(t.dst);
  int64_t offset = toVmem ? t.dstOffset : machine_->isVmem(t.src) ? t.srcOffset : -1;
  if (offset < 0) return;
  uint64_t extent = t.bytes;
  if (t.desc) {
    extent = t.desc->chunkBytes;
    for (const isa::DmaDim& d : t.desc->dims)
      if (d.count > 0) {
        int64_t stride = std::abs(toVmem ? d.dstStride : d.srcStride);
        extent += static_cast<uint64_t>(d.count - 1) * static_cast<uint64_t>(stride);
      }
  }
  bp.vmemHigh = std::max(bp.vmemHigh, static_cast<uint64_t>(offset) + extent);
}

template <class Cond>
ChipRunner::Wait ChipRunner::waitFor(uint64_t& at, uint32_t bundle, Cond cond, const std::string& what) {
  while (!cond()) {
    double next = dma_->nextEventTime();
    double podNext = pod_ ? pod_->nextEventTime() : INFINITY;
    if (std::isinf(next) || (pod_ && next > podNext)) {
      if (!pod_) {
        fault(bundle, fmt::format("{} can never complete: no DMA is in flight", what));
        return Wait::Fault;
      }
      // Another chip or the ICI must act first: try again after it.
      waitingSince_ = at;
      resumeAt_ = next;  // +inf: until woken
      waitingOn_ = what;
      waitReason_ = what == "sync" ? StallReason::Sync
                    : what == "DMA issue" ? StallReason::DmaQueue
                                          : StallReason::Semaphore;
      return Wait::Yield;
    }
    uint64_t c = static_cast<uint64_t>(std::ceil(next));
    if (c > options_.maxCycles) {
      fault(bundle, fmt::format("exceeded --max-cycles={} while waiting ({})", options_.maxCycles, what));
      return Wait::Fault;
    }
    at = std::max(at, c);
    dma_->advanceTo(static_cast<double>(at), done_);
    if (!landDmas()) return Wait::Fault;
  }
  return Wait::Met;
}

bool ChipRunner::start(const isa::Entry& entry, const std::vector<std::string_view>& inputs, int chips,
                       HostMemoryBudget* budget) {
  machine_ = std::make_unique<Machine>(program_, target_, decoded_, options_.hostThreads);
  machine_->setChip(chip_, chips);
  machine_->setHostBudget(budget);
  if (std::string e = machine_->load(entry, inputs); !e.empty()) {
    diags_.error(pod_ ? fmt::format("chip {}: {}", chip_, e) : e);
    return false;
  }
  timing_ = std::make_unique<CoreTiming>(target_, decoded_.regs);
  dma_ = std::make_unique<DmaModel>(target_);
  if (options_.trace) trace_ = std::make_unique<TraceRecorder>(target_.clockHz, options_.traceEventLimit);
  maxOutstanding_ = static_cast<uint64_t>(std::max(1, target_.dma.maxOutstanding));
  branchLatency_ = static_cast<uint64_t>(std::max(1, target_.latency(target::LatencyClass::Branch)));
  pc_ = entry.start;
  if (options_.profile) profile_.bundles.resize(decoded_.bundles.size());
  return true;
}

ChipRunner::Step ChipRunner::step() {
  SimReport& R = report_;
  const uint32_t numBundles = static_cast<uint32_t>(decoded_.bundles.size());
  if (pc_ >= numBundles) {
    fault(numBundles - 1, "execution ran past the last bundle without reaching halt");
    return Step::Fault;
  }
  const uint32_t pc = pc_;
  const DecodedBundle& b = decoded_.bundles[pc];
  StallReason reason = StallReason::Operand;
  uint64_t at = std::max(timing_->earliestIssue(decoded_, b, notBefore_, reason), waitingSince_);
  if (!std::isinf(resumeAt_)) at = std::max(at, static_cast<uint64_t>(std::ceil(resumeAt_)));
  resumeAt_ = 0;
  if (at > options_.maxCycles) {
    fault(pc, fmt::format("exceeded --max-cycles={} (the bundle would issue at cycle {})", options_.maxCycles, at));
    return Step::Fault;
  }
  dma_->advanceTo(static_cast<double>(at), done_);
  if (!landDmas()) return Step::Fault;
  bool waited = waitingSince_ > 0;

  if (b.hasSync || b.hasHalt) {
    uint64_t before = at;
    if (b.hasSync) at = std::max(at, timing_->allResultsReady());
    Wait w = waitFor(at, pc, [&] { return dma_->outstanding() == 0 && remoteOutstanding_ == 0; }, "sync");
    if (w != Wait::Met) return w == Wait::Fault ? Step::Fault : Step::Waiting;
    if (at > before) reason = StallReason::Sync;
  }
  if (b.hasSync && pod_) {
    bool barrier = false;
    for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i)
      barrier |= decoded_.ops[i].opcode == Opcode::BarrierPod;
    if (barrier) {
      if (barrierPassAt_ == 0) {
        if (!atBarrier_) {
          atBarrier_ = true;
          waitingSince_ = at;
          resumeAt_ = INFINITY;
          waitingOn_ = "barrier.pod";
          pod_->arrive(at);
          if (barrierPassAt_ == 0) return Step::Waiting;
        } else {
          resumeAt_ = INFINITY;
          return Step::Waiting;
        }
      }
      at = std::max(at, barrierPassAt_);
      reason = StallReason::Sync;
    }
  }
  if (b.hasDma) {
    uint64_t before = at;
    uint64_t need = 0;
    for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i)
      if (decoded_.ops[i].desc->semClass == isa::SemClass::Dma) ++need;
    Wait w = waitFor(at, pc, [&] { return dma_->outstanding() + need <= maxOutstanding_; }, "DMA issue");
    if (w != Wait::Met) return w == Wait::Fault ? Step::Fault : Step::Waiting;
    if (at > before) reason = StallReason::DmaQueue;
  }
  if (b.hasWait) {
    uint64_t before = at;
    waits_.clear();
    for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
      const DecodedOp& op = decoded_.ops[i];
      if (op.opcode != Opcode::SemWait) continue;
      int s = machine_->semIndex(op, op.sem);
      if (s < 0) {
        fault(pc);
        return Step::Fault;
      }
      int64_t n = machine_->semAmount(op);
      auto it = std::find_if(waits_.begin(), waits_.end(), [&](auto& w) { return w.first == s; });
      if (it == waits_.end()) waits_.emplace_back(s, n);
      else it->second += n;
    }
    for (auto [s, n] : waits_) {
      std::string what = fmt::format("sem.wait on sem{} (count {}, needs {})", s, machine_->semaphore(s), n);
      Wait w = waitFor(at, pc, [&] { return machine_->semaphore(s) >= n; }, what);
      if (w != Wait::Met) return w == Wait::Fault ? Step::Fault : Step::Waiting;
    }
    if (at > before) reason = StallReason::Semaphore;
  }
  if (at > options_.maxCycles) {
    fault(pc, fmt::format("exceeded --max-cycles={} (the bundle would issue at cycle {})", options_.maxCycles, at));
    return Step::Fault;
  }
  if (waited) reason = atBarrier_ ? StallReason::Sync : waitReason_;
  if (options_.profile) {
    profileIssue(pc, at, attributedTo_, reason, at > notBefore_ ? at - notBefore_ : 0);
    attributedTo_ = at + 1;
  }
  if (at > notBefore_) {
    R.stallCycles[static_cast<size_t>(reason)] += at - notBefore_;
    if (pod_ && (reason == StallReason::Semaphore || atBarrier_))
      stats.waitCycles += at - notBefore_;
    if (trace_) trace_->add(TraceRecorder::kStallTrack, stallReasonName(reason), static_cast<double>(notBefore_),
                            static_cast<double>(at - notBefore_), pc);
  }
  waitingSince_ = 0;
  atBarrier_ = false;
  barrierPassAt_ = 0;
  waitingOn_.clear();

  // Execute.
  machine_->preload(b);
  int64_t nextPc = -1;
  for (uint32_t i = b.firstOp; i < b.firstOp + b.numOps; ++i) {
    const DecodedOp& op = decoded_.ops[i];
    if (op.desc->semClass == isa::SemClass::Dma) {
      DmaTransfer t;
      if (!machine_->prepareDma(op, t)) {
        fault(pc);
        return Step::Fault;
      }
      R.dmaCount++;
      R.dmaBytes += t.bytes;
      if (pod_ && t.remoteChip >= 0 && t.remoteChip != chip_) {
        // Over the ICI: the source is read from this chip's memory now (HBM
        // reads counted here), the destination written when it lands.
        R.hbmBytesRead += t.hbmRead;
        stats.remoteDmas++;
        stats.iciBytesSent += t.bytes;
        ++remoteOutstanding_;
        pod_->send(chip_, at, t);
      } else {
        bool onChip = t.hbmRead == 0 && t.hbmWritten == 0;
        double poolBytes = onChip ? 2.0 * t.bytes : static_cast<double>(t.hbmRead + t.hbmWritten);
        uint64_t id = dma_->submit(at, onChip ? DmaModel::kOnChip : DmaModel::kHbm, poolBytes);
        R.hbmBytesRead += t.hbmRead;
        R.hbmBytesWritten += t.hbmWritten;
        if (options_.profile) profileDma(pc, t);
        inflight_.emplace(id, t);
      }
    } else if (!machine_->exec(op, nextPc)) {
      fault(pc);
      return Step::Fault;
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
    endCycle_ = std::max({at + 1, timing_->allResultsReady(), static_cast<uint64_t>(std::ceil(lastDmaEnd_))});
    if (endCycle_ > options_.maxCycles) {
      fault(pc, fmt::format("exceeded --max-cycles={} (the program ends at cycle {})", options_.maxCycles, endCycle_));
      return Step::Fault;
    }
    if (options_.profile && endCycle_ > attributedTo_) {
      profile_.bundles[pc].cycles += endCycle_ - attributedTo_;
      if (!profile_.spans.empty()) profile_.spans.back().end = endCycle_;
    }
    halted_ = true;
    resumeAt_ = INFINITY;
    return Step::Halted;
  }
  notBefore_ = at + (b.hasBranch ? branchLatency_ : 1);
  resumeAt_ = static_cast<double>(notBefore_);
  pc_ = nextPc >= 0 ? static_cast<uint32_t>(nextPc) : pc + 1;
  return Step::Issued;
}

SimResult ChipRunner::finish(const isa::Entry& entry) {
  SimReport& R = report_;
  const uint64_t endCycle = endCycle_;
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
  result.results = machine_->results(entry);
  if (trace_) {
    R.traceEventsDropped = trace_->dropped();
    std::vector<std::string> slotNames;
    for (size_t c = 0; c < target::kNumSlotClasses; ++c)
      slotNames.emplace_back(target::slotClassName(static_cast<target::SlotClass>(c)));
    std::string process = pod_ ? fmt::format("chip {} TensorCore 0 ({})", chip_, target_.name)
                               : fmt::format("TensorCore 0 ({})", target_.name);
    result.traceJson = trace_->render(process, slotNames);
  }
  result.report = R;
  result.profile = std::move(profile_);
  return result;
}

HostMemoryBudget hostMemoryBudget(const SimOptions& options) {
  HostMemoryBudget budget;
  if (options.hostMemoryLimit > 0) {
    budget.limit = options.hostMemoryLimit;
    budget.limitSource = fmt::format("--host-memory={}", options.hostMemoryLimit);
  } else if (uint64_t available = availableHostMemory()) {
    budget.limit = available;
    budget.limitSource = fmt::format("MemAvailable in /proc/meminfo: {} bytes", available);
  }
  return budget;
}

bool checkTarget(const target::TargetDesc& target, DiagnosticEngine& diags) {
  const target::RegisterDesc& r = target.registers;
  if (r.sublanes != kSublanes || r.lanes != kLanes || r.laneBits != 32) {
    diags.error(fmt::format("target '{}': the simulator models 8x128x32-bit vector registers, not {}x{}x{}",
                            target.name, r.sublanes, r.lanes, r.laneBits));
    return false;
  }
  if (target.mxu.count > 0 && (target.mxu.rows != kMxuDim || target.mxu.cols != kMxuDim)) {
    diags.error(fmt::format("target '{}': the simulator models 128x128 MXUs, not {}x{}", target.name,
                            target.mxu.rows, target.mxu.cols));
    return false;
  }
  if (!(target.clockHz > 0) || !(target.memory.hbmBytesPerSecond > 0)) {
    diags.error(fmt::format("target '{}' needs a positive clock and HBM bandwidth", target.name));
    return false;
  }
  return true;
}

// Program-wide checks, reported like the first chip's faults.
bool verifyProgram(const isa::Program& program, const target::TargetDesc& target, ChipRunner& chip,
                   DiagnosticEngine& diags) {
  if (std::string e = isa::checkProgramTables(program, &target); !e.empty()) {
    diags.error(e);
    return false;
  }
  for (uint32_t b = 0; b < program.bundles.size(); ++b) {
    for (const isa::Instr& in : program.bundles[b].instrs) {
      std::string e = isa::checkInstrStructure(in, program);
      if (e.empty()) e = isa::checkInstrForTarget(in, target);
      if (!e.empty()) {
        chip.fault(b, "illegal instruction: " + e);
        return false;
      }
    }
    if (std::string e = isa::checkBundle(program.bundles[b], target); !e.empty()) {
      chip.fault(b, "illegal bundle: " + e);
      return false;
    }
  }
  return true;
}

// Every field of a chip's report, for rank 0 (mpirun).
void putReport(Writer& w, const SimReport& r) {
  w.putString(r.targetName);
  w.put(r.clockHz);
  w.put(r.mxuCount);
  w.put(r.cycles);
  w.put(r.seconds);
  w.put(r.bundles);
  w.put(r.ops);
  w.put(r.opsPerSlot);
  w.put(r.stallCycles);
  w.put(r.mxuPushes);
  w.put(r.mxuBusyCycles);
  w.put(r.flops);
  w.put(r.intOps);
  w.put(r.vpuOps);
  w.put(r.dmaCount);
  w.put(r.dmaBytes);
  w.put(r.hbmBytesRead);
  w.put(r.hbmBytesWritten);
  w.put(r.dmaEngineBusyCycles);
  w.put(r.achievedFlops);
  w.put(r.achievedHbmBytesPerSecond);
  w.put(r.mxuUtilization);
  w.put(r.vpuUtilization);
  w.put(r.hbmUtilization);
  w.put(r.dmaEngineUtilization);
  w.put(r.peakFlops);
  w.put(r.peakIntOps);
  w.put(r.peakHbmBytesPerSecond);
  w.put(r.roofline);
  w.put(r.rooflineFraction);
  w.put(r.traceEventsDropped);
}

SimReport getReport(Reader& in) {
  SimReport r;
  r.targetName = in.getString();
  r.clockHz = in.get<double>();
  r.mxuCount = in.get<int>();
  r.cycles = in.get<uint64_t>();
  r.seconds = in.get<double>();
  r.bundles = in.get<uint64_t>();
  r.ops = in.get<uint64_t>();
  r.opsPerSlot = in.get<decltype(r.opsPerSlot)>();
  r.stallCycles = in.get<decltype(r.stallCycles)>();
  r.mxuPushes = in.get<uint64_t>();
  r.mxuBusyCycles = in.get<uint64_t>();
  r.flops = in.get<double>();
  r.intOps = in.get<double>();
  r.vpuOps = in.get<uint64_t>();
  r.dmaCount = in.get<uint64_t>();
  r.dmaBytes = in.get<uint64_t>();
  r.hbmBytesRead = in.get<uint64_t>();
  r.hbmBytesWritten = in.get<uint64_t>();
  r.dmaEngineBusyCycles = in.get<uint64_t>();
  r.achievedFlops = in.get<double>();
  r.achievedHbmBytesPerSecond = in.get<double>();
  r.mxuUtilization = in.get<double>();
  r.vpuUtilization = in.get<double>();
  r.hbmUtilization = in.get<double>();
  r.dmaEngineUtilization = in.get<double>();
  r.peakFlops = in.get<double>();
  r.peakIntOps = in.get<double>();
  r.peakHbmBytesPerSecond = in.get<double>();
  r.roofline = in.get<target::RooflineBound>();
  r.rooflineFraction = in.get<double>();
  r.traceEventsDropped = in.get<uint64_t>();
  return r;
}

std::optional<PodResult> runPod(const isa::Program& program, const target::TargetDesc& target,
                                const target::Topology* topology,
                                const std::vector<std::vector<std::string_view>>& inputs, const SimOptions& options,
                                DiagnosticEngine& diags) {
  if (!checkTarget(target, diags)) return std::nullopt;
  const int n = topology ? topology->chips() : 1;
  // Declared before the chips, whose memories give their pages back to it.
  HostMemoryBudget budget = hostMemoryBudget(options);
  std::unique_ptr<Pod> pod = topology ? std::make_unique<Pod>(target, *topology) : nullptr;
  if (pod) pod->record = options.profile || options.trace;
  DecodedProgram decoded;
  std::vector<std::unique_ptr<ChipRunner>> local;
  auto& chips = pod ? pod->chips : local;
  for (int c = 0; c < n; ++c)
    chips.push_back(std::make_unique<ChipRunner>(program, target, options, diags, decoded, c, pod.get()));
  if (!verifyProgram(program, target, *chips[0], diags)) return std::nullopt;
  const isa::Entry* entry = nullptr;
  if (options.entry.empty()) {
    if (program.entries.empty()) {
      diags.error("the program has no entry point");
      return std::nullopt;
    }
    entry = &program.entries.front();
  } else {
    entry = program.findEntry(options.entry);
    if (!entry) {
      diags.error(fmt::format("the program has no entry '{}'", options.entry));
      return std::nullopt;
    }
  }
  if (program.bundles.empty()) {
    diags.error(fmt::format("entry '{}' has no code", entry->name));
    return std::nullopt;
  }
  if (static_cast<int>(inputs.size()) != n) {
    diags.error(fmt::format("{} chips but inputs for {}", n, inputs.size()));
    return std::nullopt;
  }
  decoded = decodeProgram(program, target);
  // mpirun: chip c on rank c x ranks / n (contiguous blocks, chip 0 on rank
  // 0). Every rank runs the same schedule; a chip's rank steps it and tells
  // the others what changed.
  Transport* transport = pod && options.transport && options.transport->size() > 1 ? options.transport : nullptr;
  if (transport) {
    std::vector<int> owner(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c)
      owner[static_cast<size_t>(c)] =
          static_cast<int>(static_cast<int64_t>(c) * transport->size() / static_cast<int64_t>(n));
    pod->distribute(transport, &program, std::move(owner));
  }
  const bool lead = !transport || transport->rank() == 0;
  {
    bool started = true;
    for (int c = 0; c < n; ++c) {
      if (!pod || pod->mine(c)) started = started && chips[c]->start(*entry, inputs[c], n, &budget);
      else chips[c]->startShadow(*entry);
    }
    if (transport) {
      // Every rank learns whether all started (one may lack host memory).
      bool all = true;
      for (int r = 0; r < transport->size(); ++r) {
        std::string ok(1, started ? 1 : 0);
        transport->broadcast(r, ok);
        all = all && ok[0] == 1;
      }
      started = all;
    }
    if (!started) return std::nullopt;
  }

  // What happens next: the earliest ICI landing, else a step of the chip
  // that is earliest in simulated time (ties: the lower id). Every rank
  // computes the same answer from the same state.
  struct Next {
    enum Kind { Land, Step, Done } kind;
    int chip;
  };
  auto next = [&]() -> Next {
    int best = -1;
    double bestAt = INFINITY;
    for (int c = 0; c < n; ++c) {
      if (chips[c]->halted()) continue;
      double t = chips[c]->resumeAt();
      if (t < bestAt) best = c, bestAt = t;
    }
    double ici = pod ? pod->nextEventTime() : INFINITY;
    if (!std::isinf(ici) && ici <= bestAt) return {Next::Land, -1};
    if (best < 0) return {Next::Done, -1};
    return {Next::Step, best};
  };
  // Local to this rank (no other rank takes part)?
  auto staysHere = [&](const Next& x) {
    if (!transport) return true;
    if (x.kind == Next::Step) return pod->mine(x.chip);
    if (x.kind == Next::Land) {
      auto [src, dst] = pod->nextEnds();
      return pod->mine(src) && pod->mine(dst);
    }
    return false;
  };
  while (true) {
    Next x = next();
    if (x.kind == Next::Land) {
      if (!pod->landNext()) return std::nullopt;
      continue;
    }
    if (x.kind == Next::Done) {
      bool any = false;
      for (auto& c : chips) any |= !c->halted();
      if (!any) break;
      // Every chip that has not halted waits for another: a deadlock.
      std::string msg = "deadlock: every chip waits and none can move:";
      for (int c = 0; c < n; ++c) {
        if (chips[c]->halted()) msg += fmt::format("\n  chip {}: halted", c);
        else msg += fmt::format("\n  chip {}: {} waits on {}", c, chips[c]->where(chips[c]->pc()), chips[c]->waitingOn());
      }
      if (lead) diags.error(msg);
      return std::nullopt;
    }
    if (!transport) {
      if (chips[x.chip]->step() == ChipRunner::Step::Fault) return std::nullopt;
      continue;
    }
    if (pod->mine(x.chip)) {
      // Step this rank's chips (and land transfers between them) for as
      // long as the schedule stays here, recording what the other ranks
      // must replay; then send them the record.
      Writer journal;
      pod->journal = &journal;
      bool failed = false;
      while (true) {
        if (x.kind == Next::Step) {
          journal.put('S');
          journal.put<int32_t>(x.chip);
          bool fault = chips[x.chip]->step() == ChipRunner::Step::Fault;
          journal.put('E');
          chips[x.chip]->saveSchedule(journal);
          if (fault) failed = true;
        } else {
          journal.put('L');
          if (!pod->landNext()) failed = true;
        }
        if (failed) {
          journal.put('F');
          break;
        }
        x = next();
        if (x.kind == Next::Done || !staysHere(x)) break;
      }
      pod->journal = nullptr;
      transport->broadcast(transport->rank(), journal.out);
      if (failed) return std::nullopt;
      continue;
    }
    // Another rank steps: replay its record.
    std::string record;
    transport->broadcast(pod->owner(x.chip), record);
    Reader r(record);
    int chip = -1;
    while (!r.done()) {
      char kind = r.get<char>();
      if (kind == 'S') {
        chip = r.get<int32_t>();
      } else if (kind == 'T') {
        int src = r.get<int32_t>();
        uint64_t at = r.get<uint64_t>();
        pod->send(src, at, getTransfer(r, program));
      } else if (kind == 'A') {
        pod->arrive(r.get<uint64_t>());
      } else if (kind == 'E') {
        chips[chip]->loadSchedule(r);
      } else if (kind == 'L') {
        pod->landNext();  // between chips of the recording rank: no data here
      } else {
        return std::nullopt;  // 'F': the recording rank reported the fault
      }
    }
  }

  PodResult out;
  if (transport) {
    // Rank 0 gathers every chip's results and statistics.
    auto putResult = [](Writer& w, const SimResult& r, const ChipPodStats& st) {
      w.put<uint64_t>(r.results.size());
      for (const std::string& b : r.results) w.putString(b);
      w.putString(r.traceJson);
      putReport(w, r.report);
      w.put(st);
    };
    if (!lead) {
      Writer w;
      for (int c = 0; c < n; ++c) {
        if (!pod->mine(c)) continue;
        w.put<int32_t>(c);
        putResult(w, chips[c]->finish(*entry), chips[c]->stats);
      }
      transport->send(0, w.out);
      out.secondaryRank = true;
      return out;
    }
    out.chips.resize(static_cast<size_t>(n));
    out.chipStats.resize(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c)
      if (pod->mine(c)) {
        out.chips[c] = chips[c]->finish(*entry);
        out.chipStats[c] = chips[c]->stats;
      }
    for (int rank = 1; rank < transport->size(); ++rank) {
      std::string message;
      transport->receive(rank, message);
      Reader r(message);
      while (!r.done()) {
        int c = r.get<int32_t>();
        if (c < 0 || c >= n) break;
        SimResult& res = out.chips[c];
        uint64_t count = r.get<uint64_t>();
        for (uint64_t i = 0; i < count && !r.done(); ++i) res.results.push_back(r.getString());
        res.traceJson = r.getString();
        res.report = getReport(r);
        out.chipStats[c] = r.get<ChipPodStats>();
      }
    }
    for (const SimResult& res : out.chips) out.cycles = std::max(out.cycles, res.report.cycles);
  } else {
    for (int c = 0; c < n; ++c) {
      out.chips.push_back(chips[c]->finish(*entry));
      out.chipStats.push_back(chips[c]->stats);
      out.cycles = std::max(out.cycles, out.chips.back().report.cycles);
    }
  }
  if (pod) {
    out.links = pod->linkStats();
    out.iciBytes = pod->iciBytes();
    out.topology = topology->describe();
    out.transfers = std::move(pod->transfers);
    out.transfersDropped = pod->transfersDropped;
  }
  return out;
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

uint64_t availableHostMemory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  std::fclose(f);
  return found ? static_cast<uint64_t>(kib) * 1024 : 0;
}

namespace {
std::vector<std::string_view> views(const std::vector<std::string>& inputs) {
  return std::vector<std::string_view>(inputs.begin(), inputs.end());
}
}  // namespace

std::optional<SimResult> simulate(const isa::Program& program, const target::TargetDesc& target,
                                  const std::vector<std::string>& inputs, const SimOptions& options,
                                  DiagnosticEngine& diags) {
  return simulateViews(program, target, views(inputs), options, diags);
}

std::optional<SimResult> simulateViews(const isa::Program& program, const target::TargetDesc& target,
                                       const std::vector<std::string_view>& inputs, const SimOptions& options,
                                  DiagnosticEngine& diags) {
  auto pod = runPod(program, target, nullptr, {inputs}, options, diags);
  if (!pod) return std::nullopt;
  return std::move(pod->chips.front());
}

std::optional<PodResult> simulatePod(const isa::Program& program, const target::TargetDesc& target,
                                     const target::Topology& topology,
                                     const std::vector<std::vector<std::string>>& inputs, const SimOptions& options,
                                     DiagnosticEngine& diags) {
  std::vector<std::vector<std::string_view>> all;
  for (const std::vector<std::string>& chip : inputs) all.push_back(views(chip));
  return runPod(program, target, &topology, all, options, diags);
}

std::optional<PodResult> simulatePodViews(const isa::Program& program, const target::TargetDesc& target,
                                          const target::Topology& topology,
                                          const std::vector<std::vector<std::string_view>>& inputs,
                                     const SimOptions& options, DiagnosticEngine& diags) {
  return runPod(program, target, &topology, inputs, options, diags);
}

}  // namespace tpu::sim
