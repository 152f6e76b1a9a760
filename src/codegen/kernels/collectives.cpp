// Collectives over the chips of a pod (issue 15 point 3). Every chip runs
// the same program; which replica group a chip is in, its neighbours on the
// ring and where each block of data goes are per-chip tables in the data
// section, indexed by `sid.chip` (chip id = replica * partitions +
// partition, the interpreter's device index).
//
// all-reduce, reduce-scatter and all-gather are rings: the group's chips in
// snake order over the slice (so neighbours on the ring are neighbours on
// the torus), each block split in two halves that go round in opposite
// directions (both directions of every link carry data). all-reduce is a
// reduce-scatter (G-1 steps: send a partial block to the next chip, add the
// one received from the previous) followed by an all-gather (G-1 steps:
// forward the completed blocks). Each chip first copies its operand into a
// work buffer rotated by its ring position, so every step adds blocks at
// the same static offsets on every chip and only DMA addresses come from
// the tables. all-to-all, collective-permute and collective-broadcast send
// their blocks directly. Each collective starts with barrier.pod: no chip
// writes into another's buffers while that chip may still use them.
//
// Floating-point sums are accumulated in ring order, the interpreter's in
// replica-group order: equal up to rounding (integers: bit for bit).
#include "codegen/lowerer.h"

#include "eval/interp.h"

namespace tpu::codegen {

namespace {

// Semaphores of the collectives: above those the kernels use (24-31: the
// async starts in flight, lowerAsyncAllGather).
constexpr int kSemSent[2] = {16, 18};      // reduce-scatter sends, per direction
constexpr int kSemRecv[2] = {17, 19};      // reduce-scatter arrivals
constexpr int kSemGatherSent[2] = {20, 22};  // all-gather / direct sends
constexpr int kSemGatherRecv[2] = {21, 23};  // all-gather / direct arrivals
constexpr int64_t kCollectiveRow = 0;      // SMEM byte address of the chip's table row

// The device groups of a collective, over all replicas x partitions, each
// in replica-group order (the interpreter's rules, eval/collectives.cpp).
std::vector<std::vector<int64_t>> deviceGroups(const Instruction& in, int64_t R, int64_t P) {
  using Mode = eval::GroupMode;
  const Mode mode = eval::groupMode(in);
  const int64_t domain = mode == Mode::CrossPartition ? P : mode == Mode::Flattened ? R * P : R;
  std::vector<std::vector<int64_t>> ids;
  const auto& a = in.attrs();
  if (a.replicaGroups && !a.replicaGroups->groups.empty()) ids = a.replicaGroups->groups;
  else {
    ids.emplace_back();
    for (int64_t i = 0; i < domain; ++i) ids.back().push_back(i);
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& g : ids) {
    switch (mode) {
      case Mode::CrossReplica:
        for (int64_t q = 0; q < P; ++q) {
          out.emplace_back();
          for (int64_t r : g) out.back().push_back(r * P + q);
        }
        break;
      case Mode::CrossPartition:
        for (int64_t r = 0; r < R; ++r) {
          out.emplace_back();
          for (int64_t q : g) out.back().push_back(r * P + q);
        }
        break;
      case Mode::CrossReplicaAndPartition:
        out.emplace_back();
        for (int64_t r : g)
          for (int64_t q = 0; q < P; ++q) out.back().push_back(r * P + q);
        break;
      case Mode::Flattened: out.push_back(g); break;
    }
  }
  return out;
}

// Position of a chip along a boustrophedon path through the slice: the
// direction of each axis flips with the parity of the position so far, so
// consecutive positions are neighbours (and on even slices the last is a
// neighbour of the first).
int64_t snakeIndex(const target::Topology& t, int64_t chip) {
  std::vector<int> c = t.coords(static_cast<int>(chip));
  int64_t idx = 0;
  for (int k = 0; k < t.axes(); ++k) {
    int v = c[static_cast<size_t>(k)];
    if (idx % 2 == 1) v = t.dim(k) - 1 - v;
    idx = idx * t.dim(k) + v;
  }
  return idx;
}

// The per-chip table of an all-reduce in rings along each torus axis: for
// every half (order[h]: the axes, each half starting at another) and phase
// p, at wordBase[h * m + p], the chip's coordinate on the phase's axis, its
// next chip forwards and backwards and, per direction, the coordinate of
// the chip whose data block each step holds.
std::vector<uint32_t> axisRingTable(const target::Topology& topo, int64_t N,
                                    const std::vector<std::vector<int>>& order,
                                    const std::vector<int64_t>& wordBase, int64_t rowWords) {
  constexpr int kHalves = 2;
  const int m = static_cast<int>(order[0].size());
  std::vector<uint32_t> table(static_cast<size_t>(N * rowWords), 0);
  for (int64_t c = 0; c < N; ++c) {
    const std::vector<int> at = topo.coords(static_cast<int>(c));
    for (int h = 0; h < kHalves; ++h)
      for (int p = 0; p < m; ++p) {
        const int a = order[static_cast<size_t>(h)][static_cast<size_t>(p)];
        const int64_t G = topo.dim(a);
        uint32_t* row = &table[static_cast<size_t>(c * rowWords + wordBase[static_cast<size_t>(h * m + p)])];
        // The ring: the chips that differ from c only on axis a, by coordinate.
        std::vector<int64_t> ring;
        for (int k = 0; k < G; ++k) {
          std::vector<int> q = at;
          q[static_cast<size_t>(a)] = k;
          ring.push_back(topo.chipAt(q));
        }
        const int64_t coord = at[static_cast<size_t>(a)];
        row[0] = static_cast<uint32_t>(coord);
        for (int d = 0; d < 2; ++d) {
          std::vector<int64_t> ord = ring;
          if (d == 1) std::reverse(ord.begin(), ord.end());
          const int64_t rank = d == 0 ? coord : G - 1 - coord;
          row[1 + d] = static_cast<uint32_t>(ord[static_cast<size_t>((rank + 1) % G)]);
          for (int64_t j = 0; j < G; ++j) {
            const int64_t k = (j + rank) % G;
            const int64_t holder = ord[static_cast<size_t>((k - 1 + G) % G)];
            row[static_cast<size_t>(3 + d * G + j)] =
                static_cast<uint32_t>(topo.coords(static_cast<int>(holder))[static_cast<size_t>(a)]);
          }
        }
      }
  }
  return table;
}

// The table of a ring collective over groups of G members. Per chip:
// [gidx, nextF, nextB, rotF[G], rotB[G]]; rows of the chips whose group
// has G members (the others stay 0).
std::vector<uint32_t> ringTable(const std::vector<std::vector<int64_t>>& groups, const std::vector<int64_t>& groupOf,
                                const target::Topology& topo, int64_t N, int64_t G) {
  const int64_t rowWords = 3 + 2 * G;
  std::vector<uint32_t> table(static_cast<size_t>(N * rowWords), 0);
  for (int64_t c = 0; c < N; ++c) {
    const std::vector<int64_t>& g = groups[static_cast<size_t>(groupOf[static_cast<size_t>(c)])];
    if (static_cast<int64_t>(g.size()) != G) continue;
    std::vector<int64_t> ring = g;
    std::stable_sort(ring.begin(), ring.end(), [&](int64_t a, int64_t b) {
      return snakeIndex(topo, a) < snakeIndex(topo, b);
    });
    auto gidx = [&](int64_t dev) {
      return static_cast<int64_t>(std::find(g.begin(), g.end(), dev) - g.begin());
    };
    uint32_t* row = &table[static_cast<size_t>(c * rowWords)];
    row[0] = static_cast<uint32_t>(gidx(c));
    for (int d = 0; d < 2; ++d) {
      // Direction d's ring order and this chip's rank in it.
      std::vector<int64_t> order = ring;
      if (d == 1) std::reverse(order.begin(), order.end());
      int64_t rank = std::find(order.begin(), order.end(), c) - order.begin();
      row[1 + d] = static_cast<uint32_t>(order[static_cast<size_t>((rank + 1) % G)]);
      // Global chunk k holds the data block of the group member at ring
      // position k-1, so the chip at rank r completes its own block.
      for (int64_t j = 0; j < G; ++j) {
        int64_t k = (j + rank) % G;
        row[static_cast<size_t>(3 + d * G + j)] =
            static_cast<uint32_t>(gidx(order[static_cast<size_t>((k - 1 + G) % G)]));
      }
    }
  }
  return table;
}

}  // namespace

// A ring collective's geometry: G chips, blocks of C elements of `type`,
// split into a forward half of cf elements and a backward half of C - cf.
// Table row per chip: [group index, next chip forward, next chip backward,
// rotF[G], rotB[G]] where rot[j] is the data block the chip's local block j
// holds in that direction's half.
struct Lowerer::RingPlan {
  int64_t g = 1, c = 0, cf = 0;
  ElementType type = ElementType::F32;
  int es = 4;
  int64_t rowWords = 0;
  int64_t halfElems(int d) const { return d == 0 ? cf : c - cf; }
  int64_t halfOff(int d) const { return d == 0 ? 0 : cf * es; }
  int64_t rotWord(int d, int64_t j) const { return 3 + d * g + j; }
};

std::pair<int64_t, int64_t> podDevices(const hlo::Module& module, int64_t replicas, int64_t partitions) {
  int64_t R = replicas > 0 ? replicas : std::max<int64_t>(module.config().replicaCount, 1);
  int64_t P = partitions > 0 ? partitions : std::max<int64_t>(module.config().numPartitions, 1);
  int64_t needR = R, needP = P;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp->instructions()) {
      if (!hlo::isCollective(inst->opcode())) continue;
      int64_t maxId = -1;
      if (inst->attrs().replicaGroups)
        for (const auto& g : inst->attrs().replicaGroups->groups)
          for (int64_t id : g) maxId = std::max(maxId, id);
      for (const auto& [src, dst] : inst->attrs().sourceTargetPairs) maxId = std::max({maxId, src, dst});
      if (maxId < 0 || maxId > 1 << 20) continue;
      int64_t r = needR, p = needP;
      switch (eval::groupMode(*inst)) {
        case eval::GroupMode::CrossReplica:
        case eval::GroupMode::CrossReplicaAndPartition: r = std::max(r, maxId + 1); break;
        case eval::GroupMode::CrossPartition: p = std::max(p, maxId + 1); break;
        case eval::GroupMode::Flattened:
          if (r * p <= maxId) {
            if (replicas == 0) r = (maxId + 1 + p - 1) / p;
            else p = (maxId + 1 + r - 1) / r;
          }
          break;
      }
      if (replicas == 0 && r > needR) needR = r;
      if (partitions == 0 && p > needP) needP = p;
    }
  }
  if (needR * needP <= 1024) return {needR, needP};
  return {R, P};
}

bool Lowerer::podReady(const Instruction& in) {
  if (pod_.ready) return true;
  auto [R, P] = podDevices(module_, options_.replicas, options_.partitions);
  pod_.replicas = R;
  pod_.partitions = P;
  const int chips = static_cast<int>(R * P);
  size_t errors = diags_.errorCount();
  std::optional<target::Topology> topo = options_.topology.empty()
                                             ? target::defaultTopology(target_, chips, diags_)
                                             : target::parseTopology(options_.topology, target_, chips, diags_);
  if (!topo) {
    if (diags_.errorCount() == errors) diags_.error(in.location(), "llo-gen: no slice for the pod");
    failed_ = true;
    return false;
  }
  if (chips > 1 && target_.registers.semaphores < 32) {
    diags_.error(in.location(), fmt::format("llo-gen: collectives use semaphores 16 to 31, but target '{}' has {}",
                                            target_.name, target_.registers.semaphores));
    failed_ = true;
    return false;
  }
  pod_.topology = *topo;
  pod_.ready = true;
  if (chips > 1) {
    // Recorded in the program, so `tpu-run m.tpu` runs as many chips as
    // the program was compiled for.
    Buf b;
    b.kind = BufKind::Const;
    b.type = ElementType::U32;
    b.dims = {2};
    b.bytes = 8;
    b.tableWords = {static_cast<uint32_t>(R), static_cast<uint32_t>(P)};
    b.name = std::string(kPodDevicesBuffer);
    bufs_.push_back(b);
  }
  return true;
}

// ============================================================== planning

bool Lowerer::planCollective(const Instruction& in, int region) {
  (void)region;
  const Opcode op = in.opcode();
  switch (op) {
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::AllGather:
    case Opcode::ReduceScatter:
    case Opcode::AllToAll:
    case Opcode::CollectivePermute:
    case Opcode::CollectiveBroadcast:
      if (!checkTypes(in)) return false;
      defineNew(in);
      return true;
    case Opcode::AllGatherStart:
    case Opcode::CollectivePermuteStart: {
      // (operands, results, contexts...): the operands' own buffers, new
      // ones for the rest (contexts are zeroed when lowered).
      if (!checkTypes(in)) return false;
      if (!in.shape().isTuple() || in.shape().tupleSize() < 2)
        return fail(in, fmt::format("llo-gen: {} must return (operands, results, ...)", hlo::opcodeName(op)));
      std::vector<int> l;
      for (const Instruction* o : in.operands()) l.insert(l.end(), leaves_[o].begin(), leaves_[o].end());
      std::vector<const Shape*> all = arrayLeaves(in.shape());
      size_t first = arrayLeaves(in.shape().tupleElement(0)).size();
      if (first != l.size())
        return fail(in, fmt::format("llo-gen: {} shape does not match its operands", hlo::opcodeName(op)));
      for (size_t i = l.size(); i < all.size(); ++i) l.push_back(newBuf(BufKind::Heap, *all[i]));
      leaves_[&in] = l;
      return true;
    }
    case Opcode::AllGatherDone:
    case Opcode::CollectivePermuteDone: {
      const Instruction* start = in.operand(0);
      if (!start->shape().isTuple()) {
        leaves_[&in] = leaves_[start];
        return true;
      }
      auto [first, count] = leafRange(start->shape(), 1);
      const std::vector<int>& sl = leaves_[start];
      if (first + count > sl.size()) return fail(in, "llo-gen: operand is not the tuple of its start instruction");
      leaves_[&in] = std::vector<int>(sl.begin() + static_cast<int64_t>(first),
                                      sl.begin() + static_cast<int64_t>(first + count));
      return true;
    }
    case Opcode::AllReduceDone:
      leaves_[&in] = leaves_[in.operand(0)];
      return true;
    default:
      return fail(in, fmt::format("llo-gen: collective '{}' ({}) is not supported", in.name(),
                                  hlo::opcodeName(op)));
  }
}

// ============================================================== emission

void Lowerer::loadChipRow(int table, int64_t words) {
  int sc = sreg();
  e_.op("sid.chip {}", S(sc));
  e_.op("smul {}, {}, {}", S(sc), S(sc), words * 4);
  std::string d = e_.desc(static_cast<uint64_t>(words * 4), {});
  e_.op("{} {}, [{}], {}, sem0", dmaOp("h2s", table), d, kCollectiveRow, memRef(table, S(sc)));
  e_.op("sem.wait sem0");
  sregs_.put(sc);
}

int Lowerer::rowWord(int64_t i) {
  int r = sreg();
  e_.op("sld {}, [{}]", S(r), kCollectiveRow + 4 * i);
  return r;
}

int Lowerer::blockAddress(int buf, int64_t off, int64_t word, int64_t blockBytes) {
  int r = rowWord(word);
  e_.op("smul {}, {}, {}", S(r), S(r), blockBytes);
  e_.op("sadd {}, {}, {}", S(r), S(r), base(buf) + off);
  return r;
}

// Reduce-scatter over the ring: w holds the rotated operand (G blocks of
// C), r the G-1 blocks that arrive. Step s sends local block (G-s) mod G
// (the partial sum completed at step s-1; at s = 0 the chip's own) to the
// next chip's r[s] and folds r[s] into local block G-1-s. Afterwards local
// block 1 holds the chip's completed block.
bool Lowerer::ringReduceScatter(const Instruction& in, const RingPlan& rp, const Computation& reducer, int w,
                                int r) {
  (void)in;
  const int64_t G = rp.g, blockBytes = rp.c * rp.es;
  for (int64_t s = 0; s + 1 < G; ++s) {
    for (int d = 0; d < 2; ++d) {
      if (rp.halfElems(d) == 0) continue;
      PoolGuard guard({&sregs_});
      std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
      int next = rowWord(1 + d), sd = sreg(), ss = sreg();
      e_.op("smov {}, {}", S(sd), base(r) + s * blockBytes + rp.halfOff(d));
      e_.op("smov {}, {}", S(ss), base(w) + ((G - s) % G) * blockBytes + rp.halfOff(d));
      e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(next), memRef(r, S(sd)), memRef(w, S(ss)),
            kSemSent[d], kSemRecv[d]);
    }
    for (int d = 0; d < 2; ++d)
      if (rp.halfElems(d) > 0) e_.op("sem.wait sem{}", kSemRecv[d]);
    const int64_t into = (G - 1 - s) * blockBytes;
    ElementType t = rp.type;
    bool ok = emitElementwise(rp.c, {EwInput{EwInput::Full, r, s * blockBytes, t}, EwInput{EwInput::Full, w, into, t}},
                              {EwOutput{w, into, t}}, [&](const std::vector<VReg>& v) {
                                std::vector<VReg> out;
                                if (!lowerComputation(reducer, {v[0], v[1]}, out) || out.size() != 1)
                                  out.assign(1, VReg{0, t});
                                return out;
                              });
    if (!ok) return false;
  }
  for (int d = 0; d < 2; ++d)
    if (rp.halfElems(d) > 0 && G > 1) e_.op("sem.wait sem{}, {}", kSemSent[d], G - 1);
  return !failed_;
}

// All-gather over the ring into y (G blocks of C, block k at k * C): the
// chip's own block (src at srcOff) goes to y[rot[1]]; step s forwards local
// block (1-s) mod G (its own at s = 0, else the one that arrived at step
// s-1) to the same place in the next chip's y.
bool Lowerer::ringAllGather(const Instruction& in, const RingPlan& rp, int src, int64_t srcOff, int y) {
  (void)in;
  const int64_t G = rp.g, blockBytes = rp.c * rp.es;
  int issued = 0;
  {
    // The own block, locally.
    PoolGuard guard({&sregs_});
    for (int d = 0; d < 2; ++d) {
      if (rp.halfElems(d) == 0) continue;
      std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
      int sd = blockAddress(y, rp.halfOff(d), rp.rotWord(d, 1 % G), blockBytes), ss = sreg();
      e_.op("smov {}, {}", S(ss), base(src) + srcOff + rp.halfOff(d));
      e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", y, src), desc, memRef(y, S(sd)), memRef(src, S(ss)));
      ++issued;
    }
  }
  for (int64_t s = 0; s + 1 < G; ++s) {
    for (int d = 0; d < 2; ++d) {
      if (rp.halfElems(d) == 0) continue;
      PoolGuard guard({&sregs_});
      std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
      const int64_t local = ((1 - s) % G + G) % G;
      int next = rowWord(1 + d);
      int sd = blockAddress(y, rp.halfOff(d), rp.rotWord(d, local), blockBytes);
      int ss;
      int srcBuf = s == 0 ? src : y;
      if (s == 0) {
        ss = sreg();
        e_.op("smov {}, {}", S(ss), base(src) + srcOff + rp.halfOff(d));
      } else {
        ss = sd;  // the block that arrived at step s-1 sits where it goes next
      }
      e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(next), memRef(y, S(sd)), memRef(srcBuf, S(ss)),
            kSemGatherSent[d], kSemGatherRecv[d]);
    }
    for (int d = 0; d < 2; ++d)
      if (rp.halfElems(d) > 0) e_.op("sem.wait sem{}", kSemGatherRecv[d]);
  }
  for (int d = 0; d < 2; ++d)
    if (rp.halfElems(d) > 0 && G > 1) e_.op("sem.wait sem{}, {}", kSemGatherSent[d], G - 1);
  if (issued > 0) e_.op("sem.wait sem0, {}", issued);
  return !failed_;
}

// The per-chip table [index in group, member chip ids...] of a collective
// whose replica groups are all of size G; -1 after an error.
int Lowerer::memberTable(const Instruction& in, int64_t& G) {
  const int64_t R = pod_.replicas, P = pod_.partitions, N = R * P;
  std::vector<std::vector<int64_t>> groups = deviceGroups(in, R, P);
  std::vector<int64_t> groupOf(static_cast<size_t>(N), -1);
  G = -1;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (int64_t dev : groups[gi]) {
      if (dev < 0 || dev >= N) {
        fail(in, fmt::format("llo-gen: replica group names device {}, but the pod has {} replica(s) x {} "
                             "partition(s)",
                             dev, R, P));
        return -1;
      }
      if (groupOf[static_cast<size_t>(dev)] < 0) groupOf[static_cast<size_t>(dev)] = static_cast<int64_t>(gi);
    }
    if (G < 0) G = static_cast<int64_t>(groups[gi].size());
    else if (G != static_cast<int64_t>(groups[gi].size())) {
      fail(in, "llo-gen: replica groups of different sizes are not supported");
      return -1;
    }
  }
  for (int64_t c = 0; c < N; ++c)
    if (groupOf[static_cast<size_t>(c)] < 0) {
      fail(in, fmt::format("llo-gen: replica {}, partition {} is in no replica group", c / P, c % P));
      return -1;
    }
  const int64_t rowWords = 1 + G;
  std::vector<uint32_t> table(static_cast<size_t>(N * rowWords), 0);
  for (int64_t c = 0; c < N; ++c) {
    const std::vector<int64_t>& g = groups[static_cast<size_t>(groupOf[static_cast<size_t>(c)])];
    uint32_t* row = &table[static_cast<size_t>(c * rowWords)];
    row[0] = static_cast<uint32_t>(std::find(g.begin(), g.end(), c) - g.begin());
    for (int64_t j = 0; j < G; ++j) row[1 + j] = static_cast<uint32_t>(g[static_cast<size_t>(j)]);
  }
  if (static_cast<uint64_t>(rowWords * 4) > target_.memory.smemBytes) {
    fail(in, "llo-gen: the collective's per-chip table does not fit SMEM");
    return -1;
  }
  return constTable(in, table);
}

// Sends `bytes` at base(src) + srcOff to group member j (word 1 + j of
// the chip's row), into dst's block [this chip's group index] (word 0),
// on the semaphores sem (sent) and sem + 1 (arrivals).
void Lowerer::sendToMember(int64_t j, int dst, int src, int64_t srcOff, int64_t bytes, const std::string& desc,
                           int sem) {
  PoolGuard guard({&sregs_});
  int to = rowWord(1 + j), sd = blockAddress(dst, 0, 0, bytes), ss = sreg();
  e_.op("smov {}, {}", S(ss), base(src) + srcOff);
  e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(to), memRef(dst, S(sd)), memRef(src, S(ss)), sem,
        sem + 1);
}

// Async forms that overlap: all-gather-start along its outermost dimension
// sends the operand straight to every member's result (its own block too)
// and collective-permute-start to its target; the done waits for the
// arrivals and sends. Each start in flight has its own semaphore pair
// (24-31, in turn), so overlapping ones never take each other's arrivals.
bool Lowerer::asyncGatherOverlaps(const Instruction& in) const {
  if (in.opcode() != Opcode::AllGatherStart || in.attrs().dimensions.empty()) return false;
  const size_t dim = static_cast<size_t>(in.attrs().dimensions[0]);
  for (const Instruction* o : in.operands()) {
    const Shape& s = o->shape();
    if (!s.isArray() || s.rank() == 0 || dim >= static_cast<size_t>(s.rank())) return false;
    for (size_t i = 0; i < dim; ++i)
      if (s.dimension(static_cast<int64_t>(i)) != 1) return false;
  }
  return true;
}

bool Lowerer::lowerAsyncAllGather(const Instruction& in) {
  if (!podReady(in)) return false;
  int64_t G = 0;
  int tbl = memberTable(in, G);
  if (tbl < 0) return false;
  const int sem = 24 + 2 * (asyncCount_++ % 4);
  const std::vector<int>& outs = leaves_[&in];
  const size_t outFirst = outs.size() - static_cast<size_t>(in.operandCount());
  beginKernel(in, "all-gather-start");
  e_.op("barrier.pod");
  loadChipRow(tbl, 1 + G);
  int64_t sends = 0;
  uint64_t bytesAll = 0;
  for (int64_t k = 0; k < in.operandCount(); ++k) {
    const int x = leaves_[in.operand(k)][0], y = outs[outFirst + static_cast<size_t>(k)];
    const int64_t bytes = static_cast<int64_t>(bufs_[x].bytes);
    if (bytes == 0) continue;
    bytesAll += static_cast<uint64_t>(bytes);
    std::string desc = e_.desc(static_cast<uint64_t>(bytes), {});
    for (int64_t j = 0; j < G; ++j) {
      sendToMember(j, y, x, 0, bytes, desc, sem);
      ++sends;
    }
  }
  async_[&in] = AsyncCollective{-1, sem, sends, sends};
  endKernel(0, bytesAll * static_cast<uint64_t>(G), 0);
  return !failed_;
}

bool Lowerer::lowerAsyncDone(const Instruction& in) {
  auto it = async_.find(in.operand(0));
  if (it == async_.end()) return true;  // the start did all the work
  const AsyncCollective& a = it->second;
  beginKernel(in, hlo::opcodeName(in.opcode()) == std::string("all-gather-done") ? "all-gather-done"
                                                                                  : "collective-permute-done");
  if (a.table < 0) {
    if (a.sends > 0) e_.op("sem.wait sem{}, {}", a.sem, a.sends);
    if (a.recvs > 0) e_.op("sem.wait sem{}, {}", a.sem + 1, a.recvs);
  } else {
    // collective-permute: which chips send and receive is in the table.
    loadChipRow(a.table, 2);
    std::string noSend = e_.newLabel("nosend"), noRecv = e_.newLabel("norecv");
    {
      PoolGuard guard({&sregs_});
      int to = rowWord(0);
      e_.op("br.lt {}, 0, {}", S(to), noSend);
      e_.op("sem.wait sem{}", a.sem);
    }
    e_.label(noSend);
    {
      PoolGuard guard({&sregs_});
      int rv = rowWord(1);
      e_.op("br.eq {}, 0, {}", S(rv), noRecv);
      e_.op("sem.wait sem{}", a.sem + 1);
    }
    e_.label(noRecv);
  }
  endKernel(0, 0, 0);
  return !failed_;
}

bool Lowerer::lowerCollective(const Instruction& in) {
  switch (in.opcode()) {
    case Opcode::AllGatherDone:
    case Opcode::CollectivePermuteDone:
      return lowerAsyncDone(in);
    case Opcode::AllReduceDone:
      return true;
    case Opcode::AllGatherStart:
      if (asyncGatherOverlaps(in)) return lowerAsyncAllGather(in);
      return lowerRingCollective(in);
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::AllGather:
    case Opcode::ReduceScatter:
      return lowerRingCollective(in);
    default:
      return lowerDirectCollective(in);
  }
}

// Copies the G data blocks at base(src) + srcOff into w rotated (local
// block j of each half is data block rot[j], read from the chip's row at
// `word`): the DMAs on sem0, returned as a count to wait for.
int Lowerer::rotateRingBlocks(const RingPlan& rp, int src, int64_t srcOff, int64_t word, int w) {
  const int64_t blockBytes = rp.c * rp.es;
  int issued = 0;
  for (int d = 0; d < 2; ++d) {
    if (rp.halfElems(d) == 0) continue;
    std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
    for (int64_t j = 0; j < rp.g; ++j) {
      PoolGuard guard({&sregs_});
      int ss = blockAddress(src, srcOff + rp.halfOff(d), word + rp.rotWord(d, j), blockBytes), sd = sreg();
      e_.op("smov {}, {}", S(sd), base(w) + j * blockBytes + rp.halfOff(d));
      e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", w, src), desc, memRef(w, S(sd)), memRef(src, S(ss)));
      ++issued;
    }
  }
  return issued;
}

// The ring code of every operand for groups of G members, after their
// table row is loaded; adds the FLOPs and HBM bytes moved.
bool Lowerer::emitRingOperands(const Instruction& in, int64_t G, int64_t rowWords, double& flops, uint64_t& hbm) {
  const Opcode op = in.opcode();
  const bool scatterOp = op == Opcode::ReduceScatter;
  const bool gather = op == Opcode::AllGather || op == Opcode::AllGatherStart;
  const Computation* reducer = in.toApply();
  const std::vector<int>& outs = leaves_[&in];
  // Start forms: results follow the operands' leaves (all-gather-start) or
  // are the leaves (all-reduce-start).
  size_t outFirst = op == Opcode::AllGatherStart ? outs.size() - static_cast<size_t>(in.operandCount()) : 0;
  const size_t dim = in.attrs().dimensions.empty() ? 0 : static_cast<size_t>(in.attrs().dimensions[0]);
  for (int64_t k = 0; k < in.operandCount(); ++k) {
    const Instruction* operand = in.operand(k);
    const int x = leaves_[operand][0];
    const int y = outs[outFirst + static_cast<size_t>(k)];
    const Shape& xs = operand->shape();
    const ElementType t = xs.elementType();
    const int es = typeInfo(t).bytes;
    const int64_t n = xs.elementCount().value_or(0);
    const bool scatter = scatterOp && xs.rank() > 0;  // scalars riding along are all-reduced
    scratchTop_ = 0;
    if (n == 0) continue;
    if (G == 1 || (gather && xs.rank() == 0)) {
      emitCopy(y, 0, x, 0, {n * es}, {1}, {1}, 1);
      continue;
    }
    RingPlan rp;
    rp.g = G;
    rp.type = t;
    rp.es = es;
    rp.rowWords = rowWords;
    // Blocks of the data: all-reduce any split (padded to G blocks);
    // reduce-scatter and all-gather the blocks along `dim`, made contiguous
    // ([a, G*blk, b] as [G, a, blk, b]) when dim is not the outermost.
    int64_t a = 1, inner = 1;
    if ((scatter || gather) && xs.rank() > 0) {
      if (dim >= static_cast<size_t>(xs.rank()))
        return fail(in, "llo-gen: collective dimension out of range");
      for (size_t i = 0; i < dim; ++i) a *= xs.dimension(static_cast<int64_t>(i));
      for (size_t i = dim + 1; i < static_cast<size_t>(xs.rank()); ++i)
        inner *= xs.dimension(static_cast<int64_t>(i));
    }
    if (gather) {
      rp.c = n;
    } else if (scatter && xs.rank() > 0) {
      if (xs.dimension(static_cast<int64_t>(dim)) % G != 0)
        return fail(in, fmt::format("llo-gen: dimension {} of size {} does not split into {} shards", dim,
                                    xs.dimension(static_cast<int64_t>(dim)), G));
      rp.c = n / G;
    } else {
      rp.c = (n + G - 1) / G;
    }
    rp.cf = (rp.c + 1) / 2;
    const int64_t blockBytes = rp.c * es;
    const int64_t blk = (scatter || gather) && xs.rank() > 0
                            ? (gather ? xs.dimension(static_cast<int64_t>(dim))
                                      : xs.dimension(static_cast<int64_t>(dim)) / G)
                            : 0;
    if (gather) {
      // y is [a, G*blk, inner]; blocks go to [G, a, blk, inner] first when a > 1.
      int yb = a > 1 ? tempBuf(t, {G * n}) : y;
      if (!ringAllGather(in, rp, x, 0, yb)) return false;
      if (a > 1)
        emitCopy(y, 0, yb, 0, {G, a, blk * inner * es}, {blk * inner * es, G * blk * inner * es, 1},
                 {a * blk * inner * es, blk * inner * es, 1}, 1);
      hbm += static_cast<uint64_t>(2 * G * n * es);
      continue;
    }
    // Reducing: the operand as G contiguous blocks of C.
    int xb = x;
    if (scatter && a > 1) {
      xb = tempBuf(t, {n});
      emitCopy(xb, 0, x, 0, {a, G, blk * inner * es}, {blk * inner * es, a * blk * inner * es, 1},
               {G * blk * inner * es, blk * inner * es, 1}, 1);
    } else if (!scatter && rp.c * G != n) {
      xb = tempBuf(t, {G * rp.c});
      if (!fillZero(xb, G * rp.c, t)) return false;
      emitCopy(xb, 0, x, 0, {n * es}, {1}, {1}, 1);
    }
    int w = tempBuf(t, {G * rp.c}), r = tempBuf(t, {(G - 1) * rp.c});
    // The rotation: local block j of each half is data block rot[j].
    if (int issued = rotateRingBlocks(rp, xb, 0, 0, w); issued > 0) e_.op("sem.wait sem0, {}", issued);
    if (!ringReduceScatter(in, rp, *reducer, w, r)) return false;
    flops += static_cast<double>((G - 1) * rp.c);
    if (scatter) {
      emitCopy(y, 0, w, blockBytes, {blockBytes}, {1}, {1}, 1);
      hbm += static_cast<uint64_t>(4 * G * blockBytes);
      continue;
    }
    int yb = rp.c * G != n ? tempBuf(t, {G * rp.c}) : y;
    if (!ringAllGather(in, rp, w, blockBytes, yb)) return false;
    if (yb != y) emitCopy(y, 0, yb, 0, {n * es}, {1}, {1}, 1);
    hbm += static_cast<uint64_t>(6 * G * blockBytes);
  }
  return true;
}

bool Lowerer::lowerRingCollective(const Instruction& in) {
  if (!podReady(in)) return false;
  const Opcode op = in.opcode();
  const int64_t R = pod_.replicas, P = pod_.partitions, N = R * P;
  const bool reduce = op == Opcode::AllReduce || op == Opcode::AllReduceStart || op == Opcode::ReduceScatter;
  const bool scatterOp = op == Opcode::ReduceScatter;
  const Computation* reducer = in.toApply();
  if (reduce && !reducer) return fail(in, "llo-gen: a reducing collective needs to_apply");
  if (!in.attrs().channelId && in.attrs().useGlobalDeviceIds)
    return fail(in, "llo-gen: use_global_device_ids=true needs a channel_id");

  std::vector<std::vector<int64_t>> groups = deviceGroups(in, R, P);
  std::vector<int64_t> groupOf(static_cast<size_t>(N), -1);
  int64_t groupSize = -1;
  bool uneven = false;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (int64_t dev : groups[gi]) {
      if (dev < 0 || dev >= N)
        return fail(in,
                    fmt::format("llo-gen: replica group names device {}, but the pod has {} replica(s) x {} "
                                "partition(s)",
                                dev, R, P));
      if (groupOf[static_cast<size_t>(dev)] < 0) groupOf[static_cast<size_t>(dev)] = static_cast<int64_t>(gi);
    }
    if (groupSize < 0)
      groupSize = static_cast<int64_t>(groups[gi].size());
    else if (groupSize != static_cast<int64_t>(groups[gi].size()))
      uneven = true;
  }
  if (uneven && op != Opcode::AllReduce && op != Opcode::AllReduceStart)
    return fail(in, fmt::format("llo-gen: {} over replica groups of different sizes is not supported",
                                hlo::opcodeName(op)));
  for (int64_t c = 0; c < N; ++c)
    if (groupOf[static_cast<size_t>(c)] < 0)
      return fail(in, fmt::format("llo-gen: replica {}, partition {} is in no replica group", c / P, c % P));

  if (!uneven && (op == Opcode::AllReduce || op == Opcode::AllReduceStart) &&
      axisAllReduceApplies(in, groups))
    return lowerAxisAllReduce(in);

  uint64_t hbm = 0;
  double flops = 0;
  if (!uneven) {
    const int64_t G = groupSize;
    const int64_t rowWords = 3 + 2 * G;
    if (static_cast<uint64_t>(rowWords * 4) > target_.memory.smemBytes)
      return fail(in, "llo-gen: the collective's per-chip table does not fit SMEM");
    int tbl = constTable(in, ringTable(groups, groupOf, pod_.topology, N, G));
    beginKernel(in, reduce ? (scatterOp ? "reduce-scatter" : "all-reduce") : "all-gather");
    e_.op("barrier.pod");
    loadChipRow(tbl, rowWords);
    if (!emitRingOperands(in, G, rowWords, flops, hbm)) return false;
    endKernel(flops, hbm, 0);
    return !failed_;
  }
  // All-reduce over groups of different sizes: each group its own ring. A
  // table gives each chip its group's size class; each class has its ring
  // code and table, and a chip branches to its class's.
  std::vector<int64_t> sizes;
  for (const auto& g : groups) sizes.push_back(static_cast<int64_t>(g.size()));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<uint32_t> classes(static_cast<size_t>(N), 0);
  for (int64_t c = 0; c < N; ++c) {
    const int64_t size =
        static_cast<int64_t>(groups[static_cast<size_t>(groupOf[static_cast<size_t>(c)])].size());
    classes[static_cast<size_t>(c)] =
        static_cast<uint32_t>(std::find(sizes.begin(), sizes.end(), size) - sizes.begin());
  }
  std::vector<int> tables;
  for (int64_t size : sizes) {
    if (static_cast<uint64_t>((3 + 2 * size) * 4) > target_.memory.smemBytes)
      return fail(in, "llo-gen: the collective's per-chip table does not fit SMEM");
    tables.push_back(constTable(in, ringTable(groups, groupOf, pod_.topology, N, size)));
  }
  int classTable = constTable(in, classes);
  beginKernel(in, "all-reduce");
  e_.op("barrier.pod");
  loadChipRow(classTable, 1);
  std::vector<std::string> labels;
  for (size_t i = 0; i < sizes.size(); ++i) labels.push_back(e_.newLabel(fmt::format("ring{}", sizes[i])));
  const std::string done = e_.newLabel("rings_done");
  {
    PoolGuard guard({&sregs_});
    int cls = rowWord(0);
    for (size_t i = 1; i < sizes.size(); ++i) e_.op("br.eq {}, {}, {}", S(cls), i, labels[i]);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    e_.label(labels[i]);
    const int64_t rowWords = 3 + 2 * sizes[i];
    loadChipRow(tables[i], rowWords);
    if (!emitRingOperands(in, sizes[i], rowWords, flops, hbm)) return false;
    if (i + 1 < sizes.size()) e_.op("jmp {}", done);
  }
  e_.label(done);
  endKernel(flops, hbm, 0);
  return !failed_;
}

// ============================================================ axis rings

// One ring of a multi-axis all-reduce phase: its geometry, where its table
// words start in the chip's row ([coordinate, nextF, nextB, rotF[G],
// rotB[G]], as a RingPlan's row), its semaphore base (sent = sem + 2 d,
// arrivals = sem + 2 d + 1 for direction d), and its buffers: reduce-
// scatter w (G blocks, rotated) and r (G-1 arrivals); all-gather the source
// block at src + srcOff and the G blocks at y + yOff.
struct Lowerer::RingLane {
  RingPlan rp;
  int64_t word = 0;
  int sem = 16;
  int w = -1, r = -1;
  int src = -1;
  int64_t srcOff = 0;
  int y = -1;
  int64_t yOff = 0;
};

// The lanes' reduce-scatters in lockstep: step s of every lane that still
// has one sends, then waits, then adds (as ringReduceScatter, one lane).
bool Lowerer::lanesReduceScatter(const std::vector<RingLane>& lanes, const Computation& reducer) {
  int64_t steps = 0;
  for (const RingLane& l : lanes) steps = std::max(steps, l.rp.g - 1);
  for (int64_t s = 0; s < steps; ++s) {
    for (const RingLane& l : lanes) {
      const RingPlan& rp = l.rp;
      const int64_t G = rp.g, blockBytes = rp.c * rp.es;
      if (s + 1 >= G) continue;
      for (int d = 0; d < 2; ++d) {
        if (rp.halfElems(d) == 0) continue;
        PoolGuard guard({&sregs_});
        std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
        int next = rowWord(l.word + 1 + d), sd = sreg(), ss = sreg();
        e_.op("smov {}, {}", S(sd), base(l.r) + s * blockBytes + rp.halfOff(d));
        e_.op("smov {}, {}", S(ss), base(l.w) + ((G - s) % G) * blockBytes + rp.halfOff(d));
        e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(next), memRef(l.r, S(sd)), memRef(l.w, S(ss)),
              l.sem + 2 * d, l.sem + 2 * d + 1);
      }
    }
    for (const RingLane& l : lanes)
      if (s + 1 < l.rp.g)
        for (int d = 0; d < 2; ++d)
          if (l.rp.halfElems(d) > 0) e_.op("sem.wait sem{}", l.sem + 2 * d + 1);
    for (const RingLane& l : lanes) {
      const RingPlan& rp = l.rp;
      const int64_t G = rp.g, blockBytes = rp.c * rp.es;
      if (s + 1 >= G) continue;
      const int64_t into = (G - 1 - s) * blockBytes;
      ElementType t = rp.type;
      bool ok = emitElementwise(rp.c,
                                {EwInput{EwInput::Full, l.r, s * blockBytes, t}, EwInput{EwInput::Full, l.w, into, t}},
                                {EwOutput{l.w, into, t}}, [&](const std::vector<VReg>& v) {
                                  std::vector<VReg> out;
                                  if (!lowerComputation(reducer, {v[0], v[1]}, out) || out.size() != 1)
                                    out.assign(1, VReg{0, t});
                                  return out;
                                });
      if (!ok) return false;
    }
  }
  for (const RingLane& l : lanes)
    for (int d = 0; d < 2; ++d)
      if (l.rp.halfElems(d) > 0 && l.rp.g > 1) e_.op("sem.wait sem{}, {}", l.sem + 2 * d, l.rp.g - 1);
  return !failed_;
}

// The lanes' all-gathers in lockstep (as ringAllGather, one lane).
bool Lowerer::lanesAllGather(const std::vector<RingLane>& lanes) {
  int issued = 0;
  int64_t steps = 0;
  for (const RingLane& l : lanes) {
    const RingPlan& rp = l.rp;
    const int64_t G = rp.g, blockBytes = rp.c * rp.es;
    steps = std::max(steps, G - 1);
    PoolGuard guard({&sregs_});
    for (int d = 0; d < 2; ++d) {
      if (rp.halfElems(d) == 0) continue;
      std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
      int sd = blockAddress(l.y, l.yOff + rp.halfOff(d), l.word + rp.rotWord(d, 1 % G), blockBytes), ss = sreg();
      e_.op("smov {}, {}", S(ss), base(l.src) + l.srcOff + rp.halfOff(d));
      e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", l.y, l.src), desc, memRef(l.y, S(sd)), memRef(l.src, S(ss)));
      ++issued;
    }
  }
  for (int64_t s = 0; s < steps; ++s) {
    for (const RingLane& l : lanes) {
      const RingPlan& rp = l.rp;
      const int64_t G = rp.g, blockBytes = rp.c * rp.es;
      if (s + 1 >= G) continue;
      for (int d = 0; d < 2; ++d) {
        if (rp.halfElems(d) == 0) continue;
        PoolGuard guard({&sregs_});
        std::string desc = e_.desc(static_cast<uint64_t>(rp.halfElems(d) * rp.es), {});
        const int64_t local = ((1 - s) % G + G) % G;
        int next = rowWord(l.word + 1 + d);
        int sd = blockAddress(l.y, l.yOff + rp.halfOff(d), l.word + rp.rotWord(d, local), blockBytes);
        int ss = sd;
        const int srcBuf = s == 0 ? l.src : l.y;
        if (s == 0) {
          ss = sreg();
          e_.op("smov {}, {}", S(ss), base(l.src) + l.srcOff + rp.halfOff(d));
        }
        e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(next), memRef(l.y, S(sd)), memRef(srcBuf, S(ss)),
              l.sem + 2 * d, l.sem + 2 * d + 1);
      }
    }
    for (const RingLane& l : lanes)
      if (s + 1 < l.rp.g)
        for (int d = 0; d < 2; ++d)
          if (l.rp.halfElems(d) > 0) e_.op("sem.wait sem{}", l.sem + 2 * d + 1);
  }
  for (const RingLane& l : lanes)
    for (int d = 0; d < 2; ++d)
      if (l.rp.halfElems(d) > 0 && l.rp.g > 1) e_.op("sem.wait sem{}, {}", l.sem + 2 * d, l.rp.g - 1);
  if (issued > 0) e_.op("sem.wait sem0, {}", issued);
  return !failed_;
}

bool Lowerer::axisAllReduceApplies(const Instruction& in, const std::vector<std::vector<int64_t>>& groups) const {
  using Rings = CodegenOptions::AllReduceRings;
  if (options_.allReduceRings == Rings::Snake || groups.size() != 1) return false;
  const int64_t N = pod_.replicas * pod_.partitions;
  if (static_cast<int64_t>(groups[0].size()) != N || N < 4) return false;
  int longAxes = 0, shortest = 0;
  for (int k = 0; k < pod_.topology.axes(); ++k) {
    const int d = pod_.topology.dim(k);
    if (d <= 1) continue;
    ++longAxes;
    shortest = shortest == 0 ? d : std::min(shortest, d);
  }
  if (longAxes < 2) return false;
  if (options_.allReduceRings == Rings::Auto && shortest < 4) return false;
  for (const Instruction* o : in.operands())
    if (!o->shape().isArray()) return false;
  return true;
}

// All-reduce of every chip as rings along the torus axes. The data (padded
// to 2 N u elements) splits into two halves; half h takes the long axes in
// the order rotated by h. Phase p reduce-scatters each half's current
// segment over the ring along its p-th axis (the chip keeps the block of
// its coordinate on that axis), so after all axes a chip holds u reduced
// elements of each half; the all-gathers run the phases backwards. The two
// halves run in lockstep on their own semaphores (16-19 and 20-23), so at
// every step the rings of both axes carry data; a barrier.pod between
// phases keeps one phase's arrivals from counting in another's.
bool Lowerer::lowerAxisAllReduce(const Instruction& in) {
  const target::Topology& topo = pod_.topology;
  const int64_t N = pod_.replicas * pod_.partitions;
  const Computation* reducer = in.toApply();
  std::vector<int> axes;
  for (int k = 0; k < topo.axes(); ++k)
    if (topo.dim(k) > 1) axes.push_back(k);
  const int m = static_cast<int>(axes.size());
  constexpr int kHalves = 2;
  std::vector<std::vector<int>> order(kHalves);
  for (int h = 0; h < kHalves; ++h)
    for (int p = 0; p < m; ++p) order[static_cast<size_t>(h)].push_back(axes[static_cast<size_t>((h + p) % m)]);
  // Row: per half and phase [coordinate, nextF, nextB, rotF[d], rotB[d]].
  std::vector<int64_t> wordBase;
  int64_t rowWords = 0;
  for (int h = 0; h < kHalves; ++h)
    for (int p = 0; p < m; ++p) {
      wordBase.push_back(rowWords);
      rowWords += 3 + 2 * topo.dim(order[static_cast<size_t>(h)][static_cast<size_t>(p)]);
    }
  const std::vector<uint32_t> table = axisRingTable(topo, N, order, wordBase, rowWords);
  if (static_cast<uint64_t>(rowWords * 4) > target_.memory.smemBytes)
    return fail(in, "llo-gen: the collective's per-chip table does not fit SMEM");
  int tbl = constTable(in, table);

  beginKernel(in, "all-reduce");
  e_.op("barrier.pod");
  loadChipRow(tbl, rowWords);
  const std::vector<int>& outs = leaves_[&in];
  uint64_t hbm = 0;
  double flops = 0;
  bool first = true;
  for (int64_t k = 0; k < in.operandCount(); ++k) {
    const Instruction* operand = in.operand(k);
    const int x = leaves_[operand][0], y = outs[static_cast<size_t>(k)];
    const ElementType t = operand->shape().elementType();
    const int es = typeInfo(t).bytes;
    const int64_t n = operand->shape().elementCount().value_or(0);
    scratchTop_ = 0;
    if (n == 0) continue;
    const int64_t u = (n + kHalves * N - 1) / (kHalves * N), total = kHalves * N * u;
    int xb = x, yb = y;
    if (total != n) {
      xb = tempBuf(t, {total});
      if (!fillZero(xb, total, t)) return false;
      emitCopy(xb, 0, x, 0, {n * es}, {1}, {1}, 1);
      yb = tempBuf(t, {total});
    }
    std::vector<int> cur(kHalves, xb);
    std::vector<int64_t> curOff(kHalves), len(kHalves, N * u);
    for (int h = 0; h < kHalves; ++h) curOff[static_cast<size_t>(h)] = h * N * u * es;
    std::vector<RingLane> plan(static_cast<size_t>(kHalves * m));
    auto laneOf = [&](int h, int p) -> RingLane& { return plan[static_cast<size_t>(h * m + p)]; };
    // Reduce-scatter, axis by axis.
    for (int p = 0; p < m; ++p) {
      if (!first) e_.op("barrier.pod");
      first = false;
      std::vector<RingLane> lanes;
      int issued = 0;
      for (int h = 0; h < kHalves; ++h) {
        RingLane& l = laneOf(h, p);
        RingPlan& rp = l.rp;
        rp.g = topo.dim(order[static_cast<size_t>(h)][static_cast<size_t>(p)]);
        rp.c = len[static_cast<size_t>(h)] / rp.g;
        rp.cf = (rp.c + 1) / 2;
        rp.type = t;
        rp.es = es;
        rp.rowWords = rowWords;
        l.word = wordBase[static_cast<size_t>(h * m + p)];
        l.sem = h == 0 ? 16 : 20;
        l.w = tempBuf(t, {rp.g * rp.c});
        l.r = tempBuf(t, {(rp.g - 1) * rp.c});
        const int64_t blockBytes = rp.c * es;
        // Rotate the segment into w: local block j of each half is data block rot[j].
        issued += rotateRingBlocks(rp, cur[static_cast<size_t>(h)], curOff[static_cast<size_t>(h)], l.word, l.w);
        lanes.push_back(l);
        flops += static_cast<double>((rp.g - 1) * rp.c);
        hbm += static_cast<uint64_t>(4 * rp.g * blockBytes);
      }
      if (issued > 0) e_.op("sem.wait sem0, {}", issued);
      if (!lanesReduceScatter(lanes, *reducer)) return false;
      for (int h = 0; h < kHalves; ++h) {
        const RingLane& l = laneOf(h, p);
        cur[static_cast<size_t>(h)] = l.w;
        curOff[static_cast<size_t>(h)] = l.rp.c * es;  // local block 1: the chip's own
        len[static_cast<size_t>(h)] = l.rp.c;
      }
    }
    // All-gather, the axes backwards.
    for (int p = m - 1; p >= 0; --p) {
      e_.op("barrier.pod");
      std::vector<RingLane> lanes;
      for (int h = 0; h < kHalves; ++h) {
        RingLane l = laneOf(h, p);
        l.src = cur[static_cast<size_t>(h)];
        l.srcOff = curOff[static_cast<size_t>(h)];
        if (p == 0) {
          l.y = yb;
          l.yOff = h * N * u * es;
        } else {
          l.y = tempBuf(t, {l.rp.g * l.rp.c});
          l.yOff = 0;
        }
        lanes.push_back(l);
        hbm += static_cast<uint64_t>(2 * l.rp.g * l.rp.c * es);
      }
      if (!lanesAllGather(lanes)) return false;
      for (int h = 0; h < kHalves; ++h) {
        cur[static_cast<size_t>(h)] = lanes[static_cast<size_t>(h)].y;
        curOff[static_cast<size_t>(h)] = lanes[static_cast<size_t>(h)].yOff;
      }
    }
    if (yb != y) emitCopy(y, 0, yb, 0, {n * es}, {1}, {1}, 1);
  }
  endKernel(flops, hbm, 0);
  return !failed_;
}

// collective-permute(-start): each chip sends to its target (a table row:
// [send to (chip or -1), receives (0/1)]); a chip no one sends to gets zeros.
bool Lowerer::lowerCollectivePermute(const Instruction& in) {
  const Opcode op = in.opcode();
  const int64_t R = pod_.replicas, P = pod_.partitions, N = R * P;
  const auto& attrs = in.attrs();
  const std::vector<int>& outs = leaves_[&in];
  if (in.operandCount() != 1 || leaves_[in.operand(0)].size() != 1)
    return fail(in, "llo-gen: collective-permute: only the single-array-operand form is supported");
  using Mode = eval::GroupMode;
  const Mode mode = eval::groupMode(in);
  const int64_t domain = mode == Mode::CrossReplica ? R : mode == Mode::CrossPartition ? P : N;
  // Per chip: [send to (chip or -1), receives (0/1)].
  std::vector<uint32_t> table(static_cast<size_t>(N * 2), 0);
  for (int64_t c = 0; c < N; ++c) table[static_cast<size_t>(2 * c)] = static_cast<uint32_t>(-1);
  for (const auto& [src, dst] : attrs.sourceTargetPairs) {
    if (src < 0 || src >= domain || dst < 0 || dst >= domain)
      return fail(in, fmt::format("llo-gen: source_target_pairs entry {{{},{}}} out of range", src, dst));
    auto apply = [&](int64_t from, int64_t to) {
      table[static_cast<size_t>(2 * from)] = static_cast<uint32_t>(to);
      table[static_cast<size_t>(2 * to + 1)] = 1;
    };
    if (mode == Mode::CrossReplica)
      for (int64_t q = 0; q < P; ++q) apply(src * P + q, dst * P + q);
    else if (mode == Mode::CrossPartition)
      for (int64_t r = 0; r < R; ++r) apply(r * P + src, r * P + dst);
    else
      apply(src, dst);
  }
  const int x = leaves_[in.operand(0)][0];
  const int y = op == Opcode::CollectivePermuteStart ? outs[1] : outs[0];
  const ElementType t = in.operand(0)->shape().elementType();
  const int64_t n = in.operand(0)->shape().elementCount().value_or(0);
  const int64_t bytes = n * typeInfo(t).bytes;
  int tbl = constTable(in, table);
  const bool async = op == Opcode::CollectivePermuteStart;
  const int semSent = async ? 24 + 2 * (asyncCount_++ % 4) : kSemGatherSent[0], semRecv = semSent + 1;
  beginKernel(in, async ? "collective-permute-start" : "collective-permute");
  if (op == Opcode::CollectivePermuteStart && outs.size() > 2)
    if (!zeroLeaves(std::vector<int>(outs.begin() + 2, outs.end()))) return false;
  e_.op("barrier.pod");
  if (bytes > 0) {
    loadChipRow(tbl, 2);
    std::string skipZero = e_.newLabel("recv"), noSend = e_.newLabel("nosend"), noRecv = e_.newLabel("norecv");
    {
      PoolGuard guard({&sregs_});
      int rv = rowWord(1);
      e_.op("br.ne {}, 0, {}", S(rv), skipZero);
    }
    if (!fillZero(y, n, t)) return false;
    e_.label(skipZero);
    {
      PoolGuard guard({&sregs_});
      int to = rowWord(0);
      e_.op("br.lt {}, 0, {}", S(to), noSend);
      int sd = sreg(), ss = sreg();
      e_.op("smov {}, {}", S(sd), base(y));
      e_.op("smov {}, {}", S(ss), base(x));
      e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", e_.desc(static_cast<uint64_t>(bytes), {}), S(to),
            memRef(y, S(sd)), memRef(x, S(ss)), semSent, semRecv);
      if (!async) e_.op("sem.wait sem{}", semSent);
    }
    e_.label(noSend);
    if (async) {
      async_[&in] = AsyncCollective{tbl, semSent, 0, 0};
    } else {
      PoolGuard guard({&sregs_});
      int rv = rowWord(1);
      e_.op("br.eq {}, 0, {}", S(rv), noRecv);
      e_.op("sem.wait sem{}", semRecv);
    }
    e_.label(noRecv);
  }
  endKernel(0, static_cast<uint64_t>(2 * bytes), 0);
  return !failed_;
}

// collective-broadcast: the group's first member sends to every other one.
bool Lowerer::lowerCollectiveBroadcast(const Instruction& in, int tbl, int64_t G) {
  const int64_t rowWords = 1 + G;
  const std::vector<int>& outs = leaves_[&in];
  beginKernel(in, "collective-broadcast");
  e_.op("barrier.pod");
  loadChipRow(tbl, rowWords);
  uint64_t hbm = 0;
  for (int64_t k = 0; k < in.operandCount(); ++k) {
    const int x = leaves_[in.operand(k)][0], y = outs[static_cast<size_t>(k)];
    const int64_t bytes = static_cast<int64_t>(bufs_[y].bytes);
    if (bytes == 0) continue;
    hbm += static_cast<uint64_t>(2 * bytes);
    std::string notRoot = e_.newLabel("bcast_leaf"), done = e_.newLabel("bcast_done");
    std::string desc = e_.desc(static_cast<uint64_t>(bytes), {});
    PoolGuard guard({&sregs_});
    int gi = rowWord(0);
    e_.op("br.ne {}, 0, {}", S(gi), notRoot);
    {
      // The group's first member sends to every other one, and keeps its own.
      PoolGuard g2({&sregs_});
      int sd = sreg(), ss = sreg();
      e_.op("smov {}, {}", S(sd), base(y));
      e_.op("smov {}, {}", S(ss), base(x));
      e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", y, x), desc, memRef(y, S(sd)), memRef(x, S(ss)));
      for (int64_t j = 1; j < G; ++j) {
        PoolGuard g3({&sregs_});
        int to = rowWord(1 + j);
        e_.op("dma.remote {}, {}, {}, {}, sem{}, sem{}", desc, S(to), memRef(y, S(sd)), memRef(x, S(ss)),
              kSemGatherSent[0], kSemGatherRecv[0]);
      }
      if (G > 1) e_.op("sem.wait sem{}, {}", kSemGatherSent[0], G - 1);
      e_.op("sem.wait sem0");
      e_.op("jmp {}", done);
    }
    e_.label(notRoot);
    e_.op("sem.wait sem{}", kSemGatherRecv[0]);
    e_.label(done);
  }
  endKernel(0, hbm, 0);
  return !failed_;
}

// all-to-all: block j of every operand goes to member j, where it is
// block [this chip's index] of the result (tuple form: operand j, result
// [this chip's index]).
bool Lowerer::lowerAllToAll(const Instruction& in, int tbl, int64_t G) {
  const int64_t rowWords = 1 + G;
  const auto& attrs = in.attrs();
  const std::vector<int>& outs = leaves_[&in];
  beginKernel(in, "all-to-all");
  e_.op("barrier.pod");
  loadChipRow(tbl, rowWords);
  uint64_t hbm = 0;
  if (attrs.dimensions.empty()) {
    // Tuple form: operand j goes to member j, where it is result [my index].
    if (in.operandCount() != G)
      return fail(in, fmt::format("llo-gen: all-to-all: the tuple form needs one operand per group member ({}), "
                                  "got {}",
                                  G, in.operandCount()));
    const int64_t bytes = static_cast<int64_t>(bufs_[outs[0]].bytes);
    for (int64_t j = 0; j < G; ++j)
      if (static_cast<int64_t>(bufs_[leaves_[in.operand(j)][0]].bytes) != bytes ||
          static_cast<int64_t>(bufs_[outs[static_cast<size_t>(j)]].bytes) != bytes)
        return fail(in, "llo-gen: all-to-all: the tuple form needs operands of one size");
    if (bytes > 0) {
      // Arrivals land in a staging buffer at [sender's index], then go to
      // the result leaves.
      int stage = tempBuf(ElementType::U8, {G * bytes});
      std::string desc = e_.desc(static_cast<uint64_t>(bytes), {});
      for (int64_t j = 0; j < G; ++j) sendToMember(j, stage, leaves_[in.operand(j)][0], 0, bytes, desc, kSemGatherSent[0]);
      e_.op("sem.wait sem{}, {}", kSemGatherSent[0], G);
      e_.op("sem.wait sem{}, {}", kSemGatherRecv[0], G);
      for (int64_t j = 0; j < G; ++j) emitCopy(outs[static_cast<size_t>(j)], 0, stage, j * bytes, {bytes}, {1}, {1}, 1);
      hbm += static_cast<uint64_t>(4 * G * bytes);
    }
    endKernel(0, hbm, 0);
    return !failed_;
  }
  const size_t dim = static_cast<size_t>(attrs.dimensions[0]);
  for (int64_t k = 0; k < in.operandCount(); ++k) {
    const Shape& xs = in.operand(k)->shape();
    const int x = leaves_[in.operand(k)][0], y = outs[static_cast<size_t>(k)];
    const int es = typeInfo(xs.elementType()).bytes;
    const int64_t n = xs.elementCount().value_or(0);
    if (n == 0) continue;
    if (dim >= static_cast<size_t>(xs.rank())) return fail(in, "llo-gen: all-to-all dimension out of range");
    int64_t a = 1, inner = 1;
    for (size_t i = 0; i < dim; ++i) a *= xs.dimension(static_cast<int64_t>(i));
    for (size_t i = dim + 1; i < static_cast<size_t>(xs.rank()); ++i) inner *= xs.dimension(static_cast<int64_t>(i));
    const int64_t dsize = xs.dimension(static_cast<int64_t>(dim));
    if (dsize % G != 0)
      return fail(in, fmt::format("llo-gen: all-to-all: dimension {} of size {} does not split into {} blocks", dim,
                                  dsize, G));
    const int64_t blk = dsize / G, blockBytes = n / G * es, row = blk * inner * es;
    scratchTop_ = 0;
    // Blocks contiguous: x [a, G, blk*inner] as xb [G, a, blk*inner].
    int xb = x;
    if (a > 1) {
      xb = tempBuf(xs.elementType(), {n});
      emitCopy(xb, 0, x, 0, {a, G, row}, {row, a * row, 1}, {G * row, row, 1}, 1);
    }
    int stage = a > 1 ? tempBuf(xs.elementType(), {n}) : y;
    std::string desc = e_.desc(static_cast<uint64_t>(blockBytes), {});
    for (int64_t j = 0; j < G; ++j) sendToMember(j, stage, xb, j * blockBytes, blockBytes, desc, kSemGatherSent[0]);
    e_.op("sem.wait sem{}, {}", kSemGatherSent[0], G);
    e_.op("sem.wait sem{}, {}", kSemGatherRecv[0], G);
    if (a > 1) emitCopy(y, 0, stage, 0, {G, a, row}, {row, G * row, 1}, {a * row, row, 1}, 1);
    hbm += static_cast<uint64_t>(4 * n * es);
  }
  endKernel(0, hbm, 0);
  return !failed_;
}

bool Lowerer::lowerDirectCollective(const Instruction& in) {
  if (!podReady(in)) return false;
  const Opcode op = in.opcode();

  if (op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart) return lowerCollectivePermute(in);

  // all-to-all and collective-broadcast: groups as for the rings.
  int64_t G = 0;
  int tbl = memberTable(in, G);
  if (tbl < 0) return false;
  if (op == Opcode::CollectiveBroadcast) return lowerCollectiveBroadcast(in, tbl, G);
  if (op != Opcode::AllToAll)
    return fail(in, fmt::format("llo-gen: collective '{}' ({}) is not supported", in.name(), hlo::opcodeName(op)));
  return lowerAllToAll(in, tbl, G);
}

}  // namespace tpu::codegen
