#include "llo/scheduler.h"

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <queue>
#include <set>

#include "llo/bundler.h"

namespace tpu::llo {

namespace {

using isa::Instr;
using isa::InstrDesc;
using isa::Opcode;
using isa::Operand;
using isa::OperandKind;
using isa::OperandRole;
using isa::SemClass;
using isa::SrcForm;
using target::SlotClass;

struct Edge {
  int to;
  int latency;
};

// Memory accesses of a block compared pairwise before a barrier (below).
constexpr size_t kWindow = 128;

// A scalar register's value relative to a root: root 0 is the constant 0,
// other roots are values unknown at compile time. Two addresses with the same
// root can be compared exactly.
struct SymValue {
  int64_t root = 0;
  int64_t offset = 0;
};

// Bytes an op touches in VMEM or SMEM: `rows` of `rowBytes` at
// root + offset + i * stride for the sublanes in `mask`.
struct Footprint {
  int space = 0;  // 0 VMEM, 1 SMEM
  bool write = false;
  bool whole = false;  // unknown extent (DMAs, fences): aliases everything
  int64_t root = 0;
  int64_t offset = 0;
  int64_t stride = 0;
  int64_t rowBytes = 0;
  unsigned mask = 1;
};

// Lowest and one past the highest byte offset of the rows.
std::pair<int64_t, int64_t> extent(const Footprint& f) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int i = 0; i < 8; ++i) {
    if (!(f.mask >> i & 1)) continue;
    lo = std::min(lo, f.offset + i * f.stride);
    hi = std::max(hi, f.offset + i * f.stride + f.rowBytes);
  }
  return {lo, hi};
}

bool overlaps(const Footprint& a, const Footprint& b) {
  if (a.whole || b.whole || a.root != b.root) return true;
  auto [alo, ahi] = extent(a);
  auto [blo, bhi] = extent(b);
  if (alo >= bhi || blo >= ahi) return false;
  for (int i = 0; i < 8; ++i) {
    if (!(a.mask >> i & 1)) continue;
    int64_t as = a.offset + i * a.stride;
    for (int j = 0; j < 8; ++j) {
      if (!(b.mask >> j & 1)) continue;
      int64_t bs = b.offset + j * b.stride;
      if (as < bs + b.rowBytes && bs < as + a.rowBytes) return true;
    }
  }
  return false;
}

// Latency of the order edge between two ops on the same MXU or transpose
// unit: what the timing model makes the second wait for.
int unitOrderLatency(const InstrDesc& first, const InstrDesc& second, const target::TargetDesc& t) {
  if (first.semClass == SemClass::MxuMatmul && second.semClass == SemClass::MxuMatmul)
    return std::max(1, isa::issueInterval(first, t));
  if (first.opcode == Opcode::MxuWLatch && second.semClass == SemClass::MxuMatmul)
    return std::max(1, isa::latency(first, t));
  if (first.semClass == SemClass::MxuWeights && first.opcode != Opcode::MxuWLatch && second.opcode == Opcode::MxuWLatch)
    return std::max(1, isa::latency(first, t));
  return 1;
}

class BlockGraph {
 public:
  BlockGraph(const std::vector<const Instr*>& ops, const target::TargetDesc& t) : ops_(ops), t_(t) {
    succ_.resize(ops.size());
    preds_.assign(ops.size(), 0);
    build();
  }

  const std::vector<std::vector<Edge>>& succ() const { return succ_; }
  const std::vector<int>& preds() const { return preds_; }

 private:
  void edge(int from, int to, int latency) {
    if (from < 0 || from == to) return;
    succ_[from].push_back({to, latency});
    ++preds_[to];
  }

  SymValue& sym(int reg) {
    auto it = sym_.find(reg);
    if (it == sym_.end()) it = sym_.emplace(reg, SymValue{1 + reg, 0}).first;
    return it->second;
  }
  void setFresh(int reg) { sym_[reg] = SymValue{nextRoot_++, 0}; }

  // Updates the symbolic value of the scalar register `op` writes.
  void trackScalar(const Instr& in) {
    const InstrDesc& d = in.desc();
    for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
      const Operand& o = in.operands[i];
      if (o.kind != OperandKind::SReg || d.operands[i].role == OperandRole::In) continue;
      SymValue v{nextRoot_, 0};
      bool known = false;
      if (in.opcode == Opcode::SMov) {
        const Operand& a = in.operands[1];
        if (a.form == SrcForm::Imm) v = {0, a.imm}, known = true;
        else v = sym(a.reg), known = true;
      } else if ((in.opcode == Opcode::SAdd || in.opcode == Opcode::SSub) && in.operands[2].form == SrcForm::Imm) {
        SymValue a = sym(in.operands[1].reg);
        int64_t delta = in.opcode == Opcode::SAdd ? in.operands[2].imm : -in.operands[2].imm;
        v = {a.root, a.offset + delta};
        known = v.offset > -(int64_t{1} << 30) && v.offset < (int64_t{1} << 30);
      }
      if (known) sym_[o.reg] = v;
      else setFresh(o.reg);
    }
  }

  // Memory footprints of one op (reads before writes).
  std::vector<Footprint> footprints(const Instr& in) {
    std::vector<Footprint> out;
    const InstrDesc& d = in.desc();
    auto addressOf = [&](const Operand& o, Footprint& f) {
      if (o.reg >= 0) {
        SymValue v = sym(o.reg);
        f.root = v.root;
        f.offset = v.offset + o.imm;
      } else {
        f.root = 0;
        f.offset = o.imm;
      }
    };
    switch (d.semClass) {
      case SemClass::VectorLoad:
      case SemClass::VectorStore: {
        Footprint f;
        f.write = d.semClass == SemClass::VectorStore;
        for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
          const Operand& o = in.operands[i];
          if (o.kind == OperandKind::VmemAddr) addressOf(o, f);
          else if (o.kind == OperandKind::SublaneMask) f.mask = static_cast<unsigned>(o.imm) & 0xff;
          else if (o.kind == OperandKind::Imm && d.operands[i].name == "stride") f.stride = o.imm;
        }
        f.rowBytes = vectorRowBytes(d);
        out.push_back(f);
        break;
      }
      case SemClass::ScalarMem: {
        Footprint f;
        f.space = 1;
        f.write = in.opcode == Opcode::SSt;
        f.rowBytes = 4;
        for (const Operand& o : in.operands)
          if (o.kind == OperandKind::SmemAddr) addressOf(o, f);
        out.push_back(f);
        break;
      }
      case SemClass::Dma:
      case SemClass::Semaphore:
      case SemClass::Sync:
      case SemClass::Halt:
        for (int s = 0; s < 2; ++s) {
          Footprint f;
          f.space = s;
          f.write = true;
          f.whole = true;
          out.push_back(f);
        }
        break;
      default: break;
    }
    return out;
  }

  void build() {
    struct RegState {
      int writer = -1;
      std::vector<int> readers;
    };
    std::map<std::pair<int, int>, RegState> regs;
    struct Prior {
      int node;
      Footprint f;
    };
    std::vector<Prior> accesses[2];
    std::map<std::pair<int, int>, int> lastOnUnit;
    int n = static_cast<int>(ops_.size());
    for (int j = 0; j < n; ++j) {
      const Instr& in = *ops_[j];
      const InstrDesc& d = in.desc();
      if (d.endsBundle()) {
        // Control flow acts after its bundle: everything else comes no later.
        for (int i = 0; i < j; ++i) edge(i, j, 0);
      }
      // A stalling op (sem.wait, sync, barrier) opens its block: later ops may
      // join its bundle but not precede it.
      if (j > 0 && startsBundle(ops_[0]->desc())) edge(0, j, 0);
      if (j > 0 && startsBundle(d)) {
        for (int i = 0; i < j; ++i) edge(i, j, 1);
      }
      // Registers.
      std::vector<std::pair<int, int>> reads, writes;
      for (size_t i = 0; i < in.operands.size() && i < d.operands.size(); ++i) {
        const Operand& o = in.operands[i];
        OperandRole role = d.operands[i].role;
        int file = o.kind == OperandKind::SReg ? 0 : o.kind == OperandKind::VReg ? 1 : o.kind == OperandKind::VMask ? 2 : -1;
        if (file >= 0) {
          if (role != OperandRole::Out) reads.push_back({file, o.reg});
          if (role != OperandRole::In) writes.push_back({file, o.reg});
          continue;
        }
        if ((o.kind == OperandKind::SRegImm || o.kind == OperandKind::VSrc || o.kind == OperandKind::Sem) &&
            o.form != SrcForm::Imm)
          reads.push_back({o.form == SrcForm::SReg ? 0 : 1, o.reg});
        if ((o.kind == OperandKind::VmemAddr || o.kind == OperandKind::SmemAddr || o.kind == OperandKind::HbmAddr) &&
            o.reg >= 0)
          reads.push_back({0, o.reg});
        if (o.kind == OperandKind::SublaneMask && (o.imm & 0xff) != 0xff && d.semClass == SemClass::VectorLoad)
          reads.push_back({1, in.operands[0].reg});  // unmasked sublanes keep the old value
      }
      for (const auto& r : reads) {
        RegState& s = regs[r];
        if (s.writer >= 0) edge(s.writer, j, std::max(1, isa::latency(ops_[s.writer]->desc(), t_)));
      }
      for (const auto& w : writes) {
        RegState& s = regs[w];
        // Bundle semantics: readers of the old value may share the writer's
        // bundle (a masked load too: its kept sublanes are the old value).
        for (int r : s.readers) edge(r, j, 0);
        if (s.writer >= 0) edge(s.writer, j, 1);
      }
      for (const auto& r : reads) regs[r].readers.push_back(j);
      for (const auto& w : writes) {
        RegState& s = regs[w];
        s.writer = j;
        s.readers.clear();
        // An op that reads and writes the register (loop, masked vld) keeps its own read.
        if (std::find(reads.begin(), reads.end(), w) != reads.end()) s.readers.push_back(j);
      }
      // Memory.
      for (const Footprint& f : footprints(in)) {
        auto& prior = accesses[f.space];
        bool dmaLike = f.whole;
        for (const Prior& p : prior) {
          if (!p.f.write && !f.write) continue;
          if (!overlaps(p.f, f)) continue;
          int lat = (p.f.write || p.f.whole || dmaLike) ? 1 : 0;
          edge(p.node, j, lat);
        }
        prior.push_back({j, f});
        // Long blocks: every kWindow accesses, this op becomes a barrier
        // after all of them that stands for them from now on, which keeps the
        // dependence test linear in the block length.
        if (prior.size() > kWindow) {
          for (const Prior& p : prior)
            if (p.node != j) edge(p.node, j, (p.f.write || p.f.whole || f.write) ? 1 : 0);
          Footprint all = f;
          all.whole = true;
          all.write = true;
          prior.assign(1, Prior{j, all});
        }
      }
      // MXU and transpose units keep their program order.
      for (const Operand& o : in.operands) {
        if (o.kind != OperandKind::Mxu && o.kind != OperandKind::Xlu) continue;
        auto key = std::make_pair(static_cast<int>(o.kind), o.reg);
        auto it = lastOnUnit.find(key);
        if (it != lastOnUnit.end()) edge(it->second, j, unitOrderLatency(ops_[it->second]->desc(), d, t_));
        lastOnUnit[key] = j;
      }
      trackScalar(in);
    }
  }

  const std::vector<const Instr*>& ops_;
  const target::TargetDesc& t_;
  std::vector<std::vector<Edge>> succ_;
  std::vector<int> preds_;
  std::map<int, SymValue> sym_;
  int64_t nextRoot_ = 1000;
};

}  // namespace

std::optional<ScheduleMode> scheduleModeFromName(std::string_view name) {
  if (name == "none") return ScheduleMode::None;
  if (name == "list") return ScheduleMode::List;
  return std::nullopt;
}

std::vector<int> scheduleBlock(const std::vector<const Instr*>& ops, const target::TargetDesc& t) {
  int n = static_cast<int>(ops.size());
  std::vector<int> cycle(n, -1);
  if (n == 0) return cycle;
  BlockGraph g(ops, t);
  const auto& succ = g.succ();
  std::vector<int> preds = g.preds();
  // Priority: the longest latency path from the op to the end of the block.
  std::vector<int64_t> height(n, 0);
  for (int i = n - 1; i >= 0; --i) {
    int64_t h = std::max(1, isa::latency(ops[i]->desc(), t));
    for (const Edge& e : succ[i]) h = std::max(h, e.latency + height[e.to]);
    height[i] = h;
  }
  // Ready ops per slot class (index kNumSlotClasses: no slot), best first.
  constexpr size_t kClasses = target::kNumSlotClasses + 1;
  using Key = std::pair<int64_t, int>;  // (-height, index)
  std::array<std::set<Key>, kClasses> ready;
  auto classOf = [&](int i) {
    SlotClass s = ops[i]->desc().slot;
    return s == SlotClass::None ? target::kNumSlotClasses : static_cast<size_t>(s);
  };
  std::array<int, kClasses> capacity{};
  for (size_t c = 0; c < target::kNumSlotClasses; ++c)
    capacity[c] = std::max(1, t.slotCount(static_cast<SlotClass>(c)));
  capacity[target::kNumSlotClasses] = n;
  std::vector<int64_t> earliest(n, 0);
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>, std::greater<>> waiting;
  for (int i = 0; i < n; ++i)
    if (preds[i] == 0) waiting.push({0, i});
  int64_t now = 0;
  int done = 0;
  while (done < n) {
    while (!waiting.empty() && waiting.top().first <= now) {
      int i = waiting.top().second;
      waiting.pop();
      ready[classOf(i)].insert({-height[i], i});
    }
    std::array<int, kClasses> used{};
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t c = 0; c < kClasses; ++c) {
        while (used[c] < capacity[c] && !ready[c].empty()) {
          int i = ready[c].begin()->second;
          ready[c].erase(ready[c].begin());
          cycle[i] = static_cast<int>(now);
          ++used[c];
          ++done;
          progress = true;
          for (const Edge& e : succ[i]) {
            earliest[e.to] = std::max(earliest[e.to], now + e.latency);
            if (--preds[e.to] == 0) {
              if (earliest[e.to] <= now) ready[classOf(e.to)].insert({-height[e.to], e.to});
              else waiting.push({earliest[e.to], e.to});
            }
          }
        }
      }
    }
    bool anyReady = false;
    for (const auto& r : ready) anyReady |= !r.empty();
    if (anyReady || waiting.empty()) ++now;
    else now = std::max(now + 1, waiting.top().first);
  }
  return cycle;
}

std::vector<uint32_t> scheduleProgram(isa::Program& p, const target::TargetDesc& t, ScheduleStats* stats) {
  size_t nb = p.bundles.size();
  // Block starts.
  std::vector<bool> starts(nb + 1, false);
  starts[0] = true;
  starts[nb] = true;
  for (const isa::Label& l : p.labels)
    if (l.bundle <= nb) starts[l.bundle] = true;
  for (const isa::Entry& e : p.entries)
    if (e.start <= nb) starts[e.start] = true;
  for (size_t b = 0; b < nb; ++b) {
    const isa::Bundle& bundle = p.bundles[b];
    bool fixed = bundle.instrs.size() != 1;
    if (fixed) {
      starts[b] = true;
      starts[b + 1] = true;
    }
    for (const Instr& in : bundle.instrs) {
      const InstrDesc& d = in.desc();
      if (d.endsBundle()) starts[b + 1] = true;
      if (startsBundle(d)) starts[b] = true;
      for (const Operand& o : in.operands)
        if (o.kind == OperandKind::Label && o.imm >= 0 && static_cast<size_t>(o.imm) <= nb) starts[o.imm] = true;
    }
  }
  std::vector<isa::Bundle> out;
  out.reserve(nb);
  std::vector<uint32_t> anchor(nb + 1, 0);
  size_t blocks = 0, opCount = 0;
  size_t b = 0;
  while (b < nb) {
    size_t e = b + 1;
    while (e < nb && !starts[e]) ++e;
    ++blocks;
    uint32_t base = static_cast<uint32_t>(out.size());
    if (e == b + 1 && p.bundles[b].instrs.size() != 1) {
      anchor[b] = base;
      opCount += p.bundles[b].instrs.size();
      out.push_back(std::move(p.bundles[b]));
      b = e;
      continue;
    }
    std::vector<const Instr*> ops;
    for (size_t i = b; i < e; ++i) ops.push_back(&p.bundles[i].instrs[0]);
    std::vector<int> cycle = scheduleBlock(ops, t);
    // Empty cycles are dropped: the core interlocks on latencies anyway.
    std::vector<int> used(cycle.empty() ? 0 : *std::max_element(cycle.begin(), cycle.end()) + 1, -1);
    for (int c : cycle) used[c] = 0;
    int next = 0;
    for (int& u : used)
      if (u == 0) u = next++;
    std::vector<isa::Bundle> blockBundles(next);
    // Ops move into their new bundles and the old bundles are freed as the
    // blocks go: the program is not held twice (issue 14 point 6).
    for (size_t i = 0; i < ops.size(); ++i) {
      blockBundles[used[cycle[i]]].instrs.push_back(std::move(p.bundles[b + i].instrs[0]));
      std::vector<Instr>().swap(p.bundles[b + i].instrs);
    }
    for (size_t i = b; i < e; ++i) anchor[i] = base + static_cast<uint32_t>(used[cycle[i - b]]);
    anchor[b] = base;
    opCount += ops.size();
    for (auto& bb : blockBundles) out.push_back(std::move(bb));
    b = e;
  }
  anchor[nb] = static_cast<uint32_t>(out.size());
  // Labels, entries and branch targets name block starts.
  auto remap = [&](uint64_t old) { return old <= nb ? anchor[old] : static_cast<uint32_t>(old); };
  for (isa::Label& l : p.labels) l.bundle = remap(l.bundle);
  for (isa::Entry& en : p.entries) en.start = remap(en.start);
  for (isa::Bundle& bundle : out)
    for (Instr& in : bundle.instrs)
      for (Operand& o : in.operands)
        if (o.kind == OperandKind::Label && o.imm >= 0) o.imm = remap(static_cast<uint64_t>(o.imm));
  if (stats) {
    stats->blocks += blocks;
    stats->ops += opCount;
    stats->bundlesBefore += nb;
    stats->bundlesAfter += out.size();
  }
  p.bundles = std::move(out);
  return anchor;
}

}  // namespace tpu::llo
