// Lowering of the small opcodes: partition-id/replica-id (one TensorCore of
// one chip: 0), get-dimension-size (static shapes: a constant), copy-start/
// copy-done and async-start/update/done around a non-collective op (the
// value semantics make them a copy or a call), rng-bit-generator (the
// interpreter's ThreeFry/Philox streams, bit for bit, in 32-bit vector
// integer code), rng and rng-get-and-update-state (the same ThreeFry on the
// run-time rng_state argument, shaped in f64 register pairs), reduce-precision, the custom-call targets the interpreter
// implements as data movement, and integer dots the int8 MXU cannot take.
#include <array>
#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// rng-bit-generator state: u64 (or s64) words.
bool isWide(ElementType t) { return t == ElementType::U64 || t == ElementType::S64; }

// Custom-call targets the interpreter evaluates as the identity (or as a
// full <-> shard reshaping that keeps the leading block).
bool isIdentityTarget(const std::string& t) {
  static const char* const kTargets[] = {"Sharding",
                                         "SPMDFullToShardShape",
                                         "SPMDShardToFullShape",
                                         "MoveToHost",
                                         "MoveToDevice",
                                         "annotate_device_placement",
                                         "AwsNeuronTransferWithStaticRing",
                                         "LayoutConstraint",
                                         "X64Combine",
                                         "InspectSharding"};
  for (const char* k : kTargets)
    if (t == k) return true;
  return false;
}

bool isGeluTarget(const std::string& t) { return t == "AwsNeuronGelu" || t == "AwsNeuronGeluBackward"; }
bool isGemmTarget(const std::string& t) { return t == "__cublas$gemm" || t == "__cublas$lt$matmul"; }

// An f32 immediate the assembler reads as a float (never as integer bits).
std::string floatImmediate(double v) {
  std::string s = fmt::format("{:.9g}", static_cast<float>(v));
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// Whether running `in` draws from the rng stream: rng,
// rng-get-and-update-state, or a call of a computation that does.
bool drawsRng(const Instruction& in, std::map<const Computation*, bool>& memo) {
  if (in.opcode() == Opcode::Rng || in.opcode() == Opcode::RngGetAndUpdateState) return true;
  for (const Computation* c : in.calledComputations()) {
    auto it = memo.find(c);
    if (it == memo.end()) {
      memo[c] = false;  // (no recursion in HLO; guards against cycles anyway)
      bool any = false;
      for (const auto& i : c->instructions()) any = any || drawsRng(*i, memo);
      it = memo.insert_or_assign(c, any).first;
    }
    if (it->second) return true;
  }
  return false;
}

// The instructions of `c` in the order the interpreter evaluates them:
// those the root needs (operands, then control predecessors), post-order.
std::vector<const Instruction*> interpreterOrder(const Computation& c) {
  std::vector<const Instruction*> order;
  if (!c.root()) return order;
  std::set<const Instruction*> seen{c.root()};
  std::vector<std::pair<const Instruction*, size_t>> stack{{c.root(), 0}};
  while (!stack.empty()) {
    auto& [inst, next] = stack.back();
    size_t nOps = inst->operands().size();
    if (next < nOps + inst->controlPredecessors().size()) {
      const Instruction* dep = next < nOps ? inst->operand(static_cast<int64_t>(next))
                                           : inst->controlPredecessors()[next - nOps];
      ++next;
      if (dep->parent() == &c && seen.insert(dep).second) stack.push_back({dep, 0});
    } else {
      order.push_back(inst);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

bool isIdentityCustomCallTarget(const std::string& target) { return isIdentityTarget(target); }
bool isGeluCustomCallTarget(const std::string& target) { return isGeluTarget(target); }
bool isGemmCustomCallTarget(const std::string& target) { return isGemmTarget(target); }

// The compiled program advances the rng stream in the order its kernels
// run; the interpreter in its evaluation order (operands first, only what
// the root needs). When a computation's draws would come in another order
// in text order, it is lowered in the interpreter's order instead, so both
// draw the same numbers: parameters first (they are the arguments), then
// what the root needs, post-order.
const std::vector<const Instruction*>& Lowerer::loweringOrder(const Computation& c) {
  auto [it, added] = loweringOrders_.try_emplace(&c);
  std::vector<const Instruction*>& order = it->second;
  if (!added) return order;
  for (const auto& i : c.instructions()) order.push_back(i.get());
  std::vector<const Instruction*> program, evaluated, reachable = interpreterOrder(c);
  for (const Instruction* i : order)
    if (drawsRng(*i, drawsRngMemo_)) program.push_back(i);
  for (const Instruction* i : reachable)
    if (drawsRng(*i, drawsRngMemo_)) evaluated.push_back(i);
  if (program == evaluated) return order;
  order.clear();
  for (const auto& i : c.instructions())
    if (i->opcode() == Opcode::Parameter) order.push_back(i.get());
  for (const Instruction* i : reachable)
    if (i->opcode() != Opcode::Parameter) order.push_back(i);
  return order;
}

// ============================================================== planning

bool Lowerer::planMisc(const Instruction& in, int region, bool& handled) {
  handled = true;
  Opcode op = in.opcode();
  switch (op) {
    case Opcode::PartitionId:
    case Opcode::ReplicaId:
    case Opcode::GetDimensionSize:
      if (!checkTypes(in)) return false;
      defineNew(in);
      return true;
    case Opcode::CopyStart: {
      // (destination, source, context): both copies are the operand's
      // buffers (values are immutable); contexts get buffers of their own.
      if (!checkTypes(in)) return false;
      if (!in.shape().isTuple() || in.shape().tupleSize() < 2)
        return fail(in, "llo-gen: copy-start must return (destination, source, context...)");
      std::vector<int> l = leaves_[in.operand(0)];
      l.insert(l.end(), leaves_[in.operand(0)].begin(), leaves_[in.operand(0)].end());
      std::vector<const Shape*> all = arrayLeaves(in.shape());
      for (size_t i = l.size(); i < all.size(); ++i) l.push_back(newBuf(BufKind::Heap, *all[i]));
      leaves_[&in] = l;
      return true;
    }
    case Opcode::AsyncStart: {
      if (!checkTypes(in)) return false;
      const Computation* callee = in.toApply();
      if (!callee) return fail(in, "llo-gen: async-start has no wrapped computation");
      if (!in.shape().isTuple() || in.shape().tupleSize() < 2)
        return fail(in, "llo-gen: async-start must return (operands, result, context...)");
      if (!inlined_.insert(callee).second)
        return fail(
            in, fmt::format("llo-gen: computation '{}' is called from more than one place", callee->name()));
      for (int64_t i = 0; i < in.operandCount(); ++i)
        if (auto* p = callee->parameter(i)) leaves_[p] = leaves_[in.operand(i)];
      if (!plan(*callee, region)) return false;
      ++pos_;
      useLeaves(callee->root(), region);
      std::vector<int> l;
      for (const Instruction* o : in.operands()) l.insert(l.end(), leaves_[o].begin(), leaves_[o].end());
      const std::vector<int>& r = leaves_[callee->root()];
      l.insert(l.end(), r.begin(), r.end());
      std::vector<const Shape*> all = arrayLeaves(in.shape());
      if (l.size() > all.size()) return fail(in, "llo-gen: async-start shape does not match its computation");
      for (size_t i = l.size(); i < all.size(); ++i) l.push_back(newBuf(BufKind::Heap, *all[i]));
      leaves_[&in] = l;
      return true;
    }
    case Opcode::AsyncUpdate:
      leaves_[&in] = leaves_[in.operand(0)];
      return true;
    case Opcode::AsyncDone:
    case Opcode::CopyDone: {
      // async-done takes the result (element 1), copy-done the destination (0).
      const Instruction* start = in.operand(0);
      if (!start->shape().isTuple()) {
        leaves_[&in] = leaves_[start];
        return true;
      }
      auto [first, count] = leafRange(start->shape(), op == Opcode::AsyncDone ? 1 : 0);
      const std::vector<int>& sl = leaves_[start];
      if (first + count > sl.size())
        return fail(in, "llo-gen: operand is not the tuple of its start instruction");
      leaves_[&in] = std::vector<int>(sl.begin() + static_cast<int64_t>(first),
                                      sl.begin() + static_cast<int64_t>(first + count));
      return true;
    }
    case Opcode::RngBitGenerator:
      if (!checkTypes(in)) return false;
      defineNew(in);
      return true;
    case Opcode::Rng:
    case Opcode::RngGetAndUpdateState:
      if (!planRng(in)) return false;
      defineNew(in);
      return true;
    case Opcode::CustomCall: {
      const std::string& target = in.attrs().customCallTarget;
      if (isGeluTarget(target)) {
        if (in.operandCount() != 1 || !in.shape().isArray() || in.operand(0)->shape() != in.shape())
          return fail(in, fmt::format("llo-gen: custom-call target \"{}\" expects one operand of the result's shape",
                                      target));
        if (!checkTypes(in)) return false;
        defineNew(in);
        return true;
      }
      if (isGemmTarget(target)) return planGemm(in);
      if (!isIdentityTarget(target))
        return fail(in, fmt::format("llo-gen: custom-call target \"{}\" of '{}' is not supported", target,
                                    in.name()));
      if (in.operandCount() != 1)
        return fail(in, fmt::format("llo-gen: custom-call target \"{}\" expects one operand", target));
      const Instruction* o = in.operand(0);
      if (o->shape() == in.shape() || !in.shape().isArray()) {
        if (!checkTypes(in)) return false;
        leaves_[&in] = leaves_[o];
        return true;
      }
      if (!o->shape().isArray() || o->shape().elementType() != in.shape().elementType() ||
          o->shape().rank() != in.shape().rank())
        return fail(
            in, fmt::format("llo-gen: custom-call target \"{}\" expects one operand of the result's shape",
                            target));
      if (!checkTypes(in)) return false;
      defineNew(in);  // the full <-> shard block copy
      return true;
    }
    default:
      handled = false;
      return true;
  }
}

// ============================================================== emission helpers

// Writes 32-bit words (scalar registers or immediates, as text) to the
// start of `buf` through SMEM.
bool Lowerer::storeWords(int buf, const std::vector<std::string>& words) {
  PoolGuard guard({&sregs_});
  int t = sreg();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    bool reg = w.size() > 1 && w[0] == 's' && std::isdigit(static_cast<unsigned char>(w[1]));
    if (reg) {
      e_.op("sst {}, [{}]", w, 4 * i);
    } else {
      e_.op("smov {}, {}", S(t), w);
      e_.op("sst {}, [{}]", S(t), 4 * i);
    }
  }
  uint64_t bytes = std::min<uint64_t>(bufs_[buf].bytes, 4 * words.size());
  if (bytes == 0) return true;
  std::string d = e_.desc(bytes, {});
  e_.op("smov {}, {}", S(t), base(buf));
  e_.op("{} {}, {}, [0], sem0", dmaOp("s2h", buf), d, memRef(buf, S(t)));
  e_.op("sem.wait sem0");
  return !failed_;
}

bool Lowerer::zeroLeaves(const std::vector<int>& bufs) {
  for (int b : bufs) {
    int64_t n = static_cast<int64_t>(bufs_[b].bytes / typeInfo(bufs_[b].type).bytes);
    if (!fillZero(b, n, bufs_[b].type)) return false;
  }
  return true;
}

// ============================================================== emission

bool Lowerer::emitMisc(const Instruction& in, bool& handled) {
  handled = true;
  Opcode op = in.opcode();
  switch (op) {
    case Opcode::PartitionId:
    case Opcode::ReplicaId: {
      // Chip id = replica * partitions + partition (kernels/collectives.cpp).
      if (!podReady(in)) return false;
      beginKernel(in, "constant");
      int id = sreg();
      e_.op("sid.chip {}", S(id));
      e_.op("{} {}, {}, {}", op == Opcode::ReplicaId ? "sdiv" : "srem", S(id), S(id), pod_.partitions);
      bool ok = storeWords(leaves_[&in][0], {S(id)});
      sregs_.put(id);
      endKernel(0, 4, 0);
      return ok;
    }
    case Opcode::GetDimensionSize: {
      beginKernel(in, "constant");
      const Shape& s = in.operand(0)->shape();
      int64_t d = in.attrs().dimensions.empty() ? 0 : in.attrs().dimensions[0];
      if (d < 0 || d >= s.rank()) return fail(in, "llo-gen: get-dimension-size dimension out of range");
      bool ok = storeWords(leaves_[&in][0], {fmt::format("{}", s.dimension(d))});
      endKernel(0, 4, 0);
      return ok;
    }
    case Opcode::CopyStart: {
      size_t n = arrayLeaves(in.operand(0)->shape()).size();
      const std::vector<int>& l = leaves_[&in];
      if (l.size() <= 2 * n) return true;
      beginKernel(in, "copy");
      bool ok = zeroLeaves(std::vector<int>(l.begin() + static_cast<int64_t>(2 * n), l.end()));
      endKernel(0, 0, 0);
      return ok;
    }
    case Opcode::AsyncStart: {
      const Computation& callee = *in.toApply();
      if (!emitComputation(callee)) return false;
      size_t used =
          arrayLeaves(in.shape().tupleElement(0)).size() + arrayLeaves(in.shape().tupleElement(1)).size();
      const std::vector<int>& l = leaves_[&in];
      if (l.size() <= used) return true;
      beginKernel(in, "async-context");
      bool ok = zeroLeaves(std::vector<int>(l.begin() + static_cast<int64_t>(used), l.end()));
      endKernel(0, 0, 0);
      return ok;
    }
    case Opcode::AsyncUpdate:
    case Opcode::AsyncDone:
    case Opcode::CopyDone:
      return true;
    case Opcode::RngBitGenerator:
      return lowerRngBitGenerator(in);
    case Opcode::Rng:
      return lowerRng(in);
    case Opcode::RngGetAndUpdateState:
      return lowerRngGetAndUpdateState(in);
    case Opcode::CustomCall: {
      const Instruction* o = in.operand(0);
      if (isGeluTarget(in.attrs().customCallTarget)) return lowerGelu(in);
      if (isGemmTarget(in.attrs().customCallTarget)) return lowerGemm(in);
      if (o->shape() == in.shape() || !in.shape().isArray()) return true;  // aliased at planning
      // Full <-> shard on one device: the leading block, zeros elsewhere.
      beginKernel(in, "copy");
      int dst = leaves_[&in][0], src = leaves_[o][0];
      ElementType t = in.shape().elementType();
      int es = typeInfo(t).bytes;
      bool ok = fillZero(dst, *in.shape().elementCount(), t);
      std::vector<int64_t> common;
      for (int64_t d = 0; d < in.shape().rank(); ++d)
        common.push_back(std::min(in.shape().dimension(d), o->shape().dimension(d)));
      if (ok && product(common) > 0)
        emitCopy(dst, 0, src, 0, common, byteStrides(in.shape().dimensions(), es),
                 byteStrides(o->shape().dimensions(), es), es);
      endKernel(0, 2 * bufs_[dst].bytes, 0);
      return ok && !failed_;
    }
    default:
      handled = false;
      return true;
  }
}

// ============================================================== rng-bit-generator

// eval/rng.cpp's streams: block b of the counter (state[1] + b, carried into
// state[2] for Philox) gives 2 (ThreeFry) or 4 (Philox) 32-bit words; the
// output takes word after word (two per 64-bit element, the low byte for
// 8-bit ones). Each lane computes the block of its own word.
bool Lowerer::lowerRngBitGenerator(const Instruction& in) {
  beginKernel(in, "rng");
  const Shape& ss = in.operand(0)->shape();
  bool philox = in.attrs().rngAlgorithm == hlo::RngAlgorithm::Philox;
  if (!in.shape().isTuple() || in.shape().tupleSize() != 2 || !in.shape().tupleElement(1).isArray() ||
      !ss.isArray() || !isWide(ss.elementType()) || ss.rank() != 1)
    return fail(in, "llo-gen: rng-bit-generator needs a u64 state vector and returns (state, bits)");
  int64_t stateCount = ss.dimension(0);
  if (stateCount != 2 && !(philox && stateCount == 3))
    return fail(in, fmt::format("llo-gen: rng-bit-generator state of {} elements does not suit {}",
                                stateCount, philox ? "philox" : "three-fry"));
  const Shape& bs = in.shape().tupleElement(1);
  ElementType bt = bs.elementType();
  int64_t count = *bs.elementCount();
  // The interpreter's fill: a pred gets the low byte of its word, like u8
  // (not normalised to 0/1); a c64 takes two words like a u64, a c128 four
  // like two u64s.
  int outBits = leaves_[&in][1];
  if (bt == ElementType::Pred) bt = ElementType::U8;
  if (bt == ElementType::C64) bt = ElementType::U64;
  if (bt == ElementType::C128) {
    bt = ElementType::U64;
    count *= 2;
  }
  int bytes = typeInfo(bt).bytes;
  int64_t words = bytes == 8 ? 2 * count : count;
  int64_t blocks = (words + (philox ? 3 : 1)) / (philox ? 4 : 2);
  if (words >= (int64_t{1} << 31)) return fail(in, "llo-gen: rng-bit-generator output is too large");
  bool ok = emitRngBits(leaves_[in.operand(0)][0], stateCount, philox, bt, count, leaves_[&in][0], outBits);
  endKernel(static_cast<double>(blocks) * (philox ? 200 : 120), bufs_[leaves_[&in][1]].bytes, 0);
  return ok && !failed_;
}

// The vector pieces of emitRngBits on u32 lanes, from the chip's 32-bit
// ops: unsigned compare, rotate, the high word of a product, and the
// ThreeFry-2x32 and Philox-4x32 rounds.
class RngBitsEmitter {
 public:
  explicit RngBitsEmitter(Lowerer& l) : l_(l) {}

  // A new vreg: m of a and b.
  VReg vop(const char* m, VReg a, const std::string& b) {
    VReg d = l_.valloc(ElementType::U32);
    l_.e_.op("{} {}, {}, {}", m, l_.V(d), l_.V(a), b);
    return d;
  }
  void inPlace(const char* m, VReg a, const std::string& b) { l_.e_.op("{} {}, {}, {}", m, l_.V(a), l_.V(a), b); }
  // 0/1 from "a < b" on unsigned words (sign bits flipped, signed compare).
  VReg lessU(VReg a, VReg b) {
    VReg fa = vop("vxor", a, "-2147483648"), fb = vop("vxor", b, "-2147483648");
    int m = l_.malloc_();
    l_.e_.op("vcmp.lt.s32 {}, {}, {}", l_.M(m), l_.V(fa), l_.V(fb));
    l_.vfree(fa);
    l_.vfree(fb);
    VReg d = l_.toMask01(m);
    d.t = ElementType::U32;
    return d;
  }
  void rotl(VReg x, int r) {
    VReg t = vop("vshr", x, fmt::format("{}", 32 - r));
    inPlace("vshl", x, fmt::format("{}", r));
    inPlace("vor", x, l_.V(t));
    l_.vfree(t);
  }
  // High 32 bits of x * c (unsigned) from 16-bit halves.
  VReg mulHi(VReg x, uint32_t c) {
    int32_t cl = static_cast<int32_t>(c & 0xffffu), ch = static_cast<int32_t>(c >> 16);
    VReg xl = vop("vand", x, "65535"), xh = vop("vshr", x, "16");
    VReg ll = vop("vmul.s32", xl, fmt::format("{}", cl)), lh = vop("vmul.s32", xl, fmt::format("{}", ch));
    VReg hl = vop("vmul.s32", xh, fmt::format("{}", cl)), hh = vop("vmul.s32", xh, fmt::format("{}", ch));
    VReg mid = vop("vshr", ll, "16");
    VReg t = vop("vand", lh, "65535");
    inPlace("vadd.s32", mid, l_.V(t));
    l_.e_.op("vand {}, {}, 65535", l_.V(t), l_.V(hl));
    inPlace("vadd.s32", mid, l_.V(t));
    inPlace("vshr", mid, "16");
    inPlace("vshr", lh, "16");
    inPlace("vshr", hl, "16");
    inPlace("vadd.s32", hh, l_.V(lh));
    inPlace("vadd.s32", hh, l_.V(hl));
    inPlace("vadd.s32", hh, l_.V(mid));
    for (VReg v : {xl, xh, ll, lh, hl, mid, t}) l_.vfree(v);
    return hh;
  }
  // Philox-4x32's ten rounds on the counter words x, the round keys in rk0
  // and rk1 (from the key in k0, k1); x becomes the block's four words.
  void philoxRounds(std::vector<VReg>& x, int k0, int k1, int rk0, int rk1) {
    l_.e_.op("smov {}, {}", l_.S(rk0), l_.S(k0));
    l_.e_.op("smov {}, {}", l_.S(rk1), l_.S(k1));
    for (int round = 0; round < 10; ++round) {
      VReg lo0 = vop("vmul.s32", x[0], fmt::format("{}", static_cast<int32_t>(0xD2511F53u)));
      VReg hi0 = mulHi(x[0], 0xD2511F53u);
      VReg lo1 = vop("vmul.s32", x[2], fmt::format("{}", static_cast<int32_t>(0xCD9E8D57u)));
      VReg hi1 = mulHi(x[2], 0xCD9E8D57u);
      inPlace("vxor", hi1, l_.V(x[1]));
      inPlace("vxor", hi1, l_.S(rk0));
      inPlace("vxor", hi0, l_.V(x[3]));
      inPlace("vxor", hi0, l_.S(rk1));
      for (VReg r : x) l_.vfree(r);
      x = {hi1, lo1, hi0, lo0};
      l_.e_.op("sadd {}, {}, {}", l_.S(rk0), l_.S(rk0), static_cast<int32_t>(0x9E3779B9u));
      l_.e_.op("sadd {}, {}, {}", l_.S(rk1), l_.S(rk1), static_cast<int32_t>(0xBB67AE85u));
    }
  }
  // ThreeFry-2x32's twenty rounds on (c0, c1) with key schedule ks (scalar
  // registers: the key words and their parity word).
  void threefryRounds(VReg c0, VReg c1, const std::array<int, 3>& ks) {
    static constexpr int kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    inPlace("vadd.s32", c0, l_.S(ks[0]));
    inPlace("vadd.s32", c1, l_.S(ks[1]));
    for (int g = 0; g < 5; ++g) {
      for (int r = 0; r < 4; ++r) {
        inPlace("vadd.s32", c0, l_.V(c1));
        rotl(c1, kRot[(g % 2) * 4 + r]);
        inPlace("vxor", c1, l_.V(c0));
      }
      inPlace("vadd.s32", c0, l_.S(ks[static_cast<size_t>((g + 1) % 3)]));
      inPlace("vadd.s32", c1, l_.S(ks[static_cast<size_t>((g + 2) % 3)]));
      inPlace("vadd.s32", c1, fmt::format("{}", g + 1));
    }
  }

 private:
  Lowerer& l_;
};

bool Lowerer::emitRngBits(int stateBuf, int64_t stateCount, bool philox, ElementType bt, int64_t count,
                          int outState, int outBits) {
  int bytes = typeInfo(bt).bytes;
  int64_t words = bytes == 8 ? 2 * count : count;
  int wpb = philox ? 4 : 2;
  int64_t blocks = (words + wpb - 1) / wpb;
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  // State words: key (lo, hi), counter (lo, hi), Philox high counter (lo, hi).
  std::array<int, 6> st{};
  for (int w = 0; w < 6; ++w) {
    if (w < 2 * stateCount) {
      st[w] = loadScalar(stateBuf, 4 * w, ElementType::U32, w);
    } else {
      st[w] = sreg();
      e_.op("smov {}, 0", S(st[w]));
    }
  }
  int ks2 = sreg(), rk0 = sreg(), rk1 = sreg();
  e_.op("sxor {}, {}, {}", S(ks2), S(st[0]), S(st[1]));
  e_.op("sxor {}, {}, {}", S(ks2), S(ks2), 0x1BD11BDA);

  RngBitsEmitter rng(*this);

  bool narrow = bytes == 1;
  // 16-bit elements: each lane packs words 2j and 2j+1 (the low halves) into
  // one u32 of a scratch buffer, copied bytewise (raw bits: a bf16 store
  // would quieten signalling NaNs).
  bool pairs = bytes == 2;
  int64_t lanes = pairs ? (count + 1) / 2 : words;
  int pairBuf = pairs ? tempBuf(ElementType::U32, {lanes}) : -1;
  // Byte elements keep the word's low byte; sub-byte integers are stored as
  // their type (vstore wraps them to their bits, as the interpreter keeps
  // them).
  bool subByteInt = hlo::isIntegerType(bt) && typeInfo(bt).bits < 8;
  ElementType storeType = narrow ? (subByteInt ? bt : ElementType::S8) : ElementType::U32;
  int wordShift = pairs ? (philox ? 1 : 0) : (philox ? 2 : 1);
  bool ok = emitElementwise(
      lanes, {EwInput{EwInput::Index, -1, 0, ElementType::S32}},
      {EwOutput{pairs ? pairBuf : outBits, 0, storeType}}, [&](const std::vector<VReg>& v) {
        VReg blk = rng.vop("vshr", v[0], fmt::format("{}", wordShift));
        VReg sel = rng.vop("vand", v[0], fmt::format("{}", (1 << wordShift) - 1));
        // 64-bit counter + block, carried into the high counter.
        VReg c0 = rng.vop("vadd.s32", blk, S(st[2]));
        VReg carry = rng.lessU(c0, blk);
        VReg c1 = rng.vop("vadd.s32", carry, S(st[3]));
        vfree(blk);
        std::vector<VReg> x;
        if (philox) {
          // Overflow of the high word: c1 wrapped to 0 with a carry in.
          int z = malloc_();
          e_.op("vcmp.eq.s32 {}, {}, 0", M(z), V(c1));
          e_.op("vsel.s32 {}, {}, {}, 0", V(carry), M(z), V(carry));
          VReg h0 = rng.vop("vadd.s32", carry, S(st[4]));
          e_.op("vcmp.eq.s32 {}, {}, 0", M(z), V(h0));
          e_.op("vsel.s32 {}, {}, {}, 0", V(carry), M(z), V(carry));
          VReg h1 = rng.vop("vadd.s32", carry, S(st[5]));
          masks_.put(z);
          vfree(carry);
          x = {c0, c1, h0, h1};
          rng.philoxRounds(x, st[0], st[1], rk0, rk1);
        } else {
          vfree(carry);
          rng.threefryRounds(c0, c1, {st[0], st[1], ks2});
          x = {c0, c1};
        }
        if (pairs) {
          // ThreeFry: the block's two words; Philox: words 0,1 or 2,3.
          VReg lo = x[0], hi = x[1];
          int m = malloc_();
          if (philox) {
            e_.op("vcmp.eq.s32 {}, {}, 1", M(m), V(sel));
            e_.op("vsel.s32 {}, {}, {}, {}", V(lo), M(m), V(x[2]), V(lo));
            e_.op("vsel.s32 {}, {}, {}, {}", V(hi), M(m), V(x[3]), V(hi));
          }
          masks_.put(m);
          VReg d = rng.vop("vand", lo, "65535");
          rng.inPlace("vshl", hi, "16");
          rng.inPlace("vor", d, V(hi));
          for (VReg r : x) vfree(r);
          vfree(sel);
          return std::vector<VReg>{d};
        }
        // Pick this lane's word of its block.
        VReg d = valloc(storeType);
        e_.op("vmov.s32 {}, {}", V(d), V(x.back()));
        int m = malloc_();
        for (int w = static_cast<int>(x.size()) - 2; w >= 0; --w) {
          e_.op("vcmp.eq.s32 {}, {}, {}", M(m), V(sel), w);
          e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(x[static_cast<size_t>(w)]), V(d));
        }
        masks_.put(m);
        for (VReg r : x) vfree(r);
        vfree(sel);
        return std::vector<VReg>{d};
      });
  if (!ok) return false;
  if (pairs) emitCopy(outBits, 0, pairBuf, 0, {2 * count}, {1}, {1}, 1);
  // New state: the key, the counter advanced by the blocks used.
  int n0 = sreg(), n1 = sreg(), c = sreg(), a = sreg(), b = sreg();
  e_.op("sadd {}, {}, {}", S(n0), S(st[2]), blocks);
  e_.op("sxor {}, {}, -2147483648", S(a), S(n0));
  e_.op("sxor {}, {}, -2147483648", S(b), S(st[2]));
  e_.op("scmp.lt {}, {}, {}", S(c), S(a), S(b));
  e_.op("sadd {}, {}, {}", S(n1), S(st[3]), S(c));
  std::vector<std::string> out = {S(st[0]), S(st[1]), S(n0), S(n1)};
  if (stateCount == 3) {
    int h0 = sreg(), h1 = sreg();
    e_.op("scmp.eq {}, {}, 0", S(a), S(n1));
    e_.op("sand {}, {}, {}", S(c), S(c), S(a));
    e_.op("sadd {}, {}, {}", S(h0), S(st[4]), S(c));
    e_.op("scmp.eq {}, {}, 0", S(a), S(h0));
    e_.op("sand {}, {}, {}", S(c), S(c), S(a));
    e_.op("sadd {}, {}, {}", S(h1), S(st[5]), S(c));
    out.push_back(S(h0));
    out.push_back(S(h1));
  }
  return storeWords(outState, out) && !failed_;
}

// ============================================================== reduce-precision

// eval's reducePrecisionLoop on the f32 bits: round the mantissa to nearest
// even, then flush exponents out of range to zero or infinity; NaNs stay
// NaN (infinity when no mantissa bit is left).
std::optional<VReg> Lowerer::lowerReducePrecision(const Instruction& in, VReg x) {
  if (x.t == ElementType::F64) return lowerReducePrecisionF64(in, x);
  if (!typeInfo(x.t).isFloat || typeInfo(x.t).isComplex) {
    fail(in, fmt::format("llo-gen: reduce-precision on {} is not supported", hlo::elementTypeName(x.t)));
    return std::nullopt;
  }
  int64_t eb = in.attrs().exponentBits, mb = in.attrs().mantissaBits;
  if (eb < 1 || mb < 0) {
    fail(in, "llo-gen: reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
    return std::nullopt;
  }
  eb = std::min<int64_t>(eb, 8);
  mb = std::min<int64_t>(mb, 23);
  ElementType rt = in.shape().elementType();
  VReg v = valloc(rt);
  e_.op("vmov.s32 {}, {}", V(v), V(x));
  if (mb < 23) {
    int sh = static_cast<int>(23 - mb);
    uint32_t lastBit = 1u << sh;
    VReg t = valloc(ElementType::U32);
    e_.op("vshr {}, {}, {}", V(t), V(v), sh);
    e_.op("vand {}, {}, 1", V(t), V(t));
    e_.op("vadd.s32 {}, {}, {}", V(t), V(t), (lastBit >> 1) - 1);
    e_.op("vadd.s32 {}, {}, {}", V(v), V(v), V(t));
    e_.op("vand {}, {}, {}", V(v), V(v), static_cast<int32_t>(~(lastBit - 1)));
    vfree(t);
  }
  if (eb < 8) {
    int64_t reduced = (int64_t{1} << (eb - 1)) - 1;
    int64_t maxE = (127 + reduced) << 23, minE = (127 - reduced) << 23;
    VReg ex = valloc(ElementType::U32), sign = valloc(ElementType::U32);
    e_.op("vand {}, {}, 2139095040", V(ex), V(v));
    e_.op("vand {}, {}, -2147483648", V(sign), V(v));
    int gt = malloc_(), le = malloc_();
    e_.op("vcmp.gt.s32 {}, {}, {}", M(gt), V(ex), maxE);
    e_.op("vcmp.le.s32 {}, {}, {}", M(le), V(ex), minE);
    e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(le), V(sign), V(v));
    e_.op("vor {}, {}, 2139095040", V(sign), V(sign));
    e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(gt), V(sign), V(v));
    masks_.put(gt);
    masks_.put(le);
    vfree(ex);
    vfree(sign);
  }
  // NaN inputs: kept, or +infinity without mantissa bits.
  VReg a = valloc(ElementType::U32);
  e_.op("vand {}, {}, 2147483647", V(a), V(x));
  int nan = malloc_();
  e_.op("vcmp.gt.s32 {}, {}, 2139095040", M(nan), V(a));
  if (mb > 0) {
    e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(nan), V(x), V(v));
  } else {
    e_.op("vmov.s32 {}, 2139095040", V(a));
    e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(nan), V(a), V(v));
  }
  masks_.put(nan);
  vfree(a);
  return normalize(v);
}

// The same on the bits of an f64 pair: the mantissa rounding is a 64-bit
// add (carry between the words); the exponent field lies in the high word.
std::optional<VReg> Lowerer::lowerReducePrecisionF64(const Instruction& in, VReg x) {
  int64_t eb = in.attrs().exponentBits, mb = in.attrs().mantissaBits;
  if (eb < 1 || mb < 0) {
    fail(in, "llo-gen: reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
    return std::nullopt;
  }
  eb = std::min<int64_t>(eb, 11);
  mb = std::min<int64_t>(mb, 52);
  auto pairConst = [&](uint64_t bits, ElementType t) {
    VReg d = valloc(t);
    e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint32_t>(bits)));
    e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
    return d;
  };
  VReg v = vcopy(x, ElementType::S64);
  if (mb < 52) {
    // x = (x + bias) & ~(lastBit - 1), bias = lastBit/2 - 1 + the bit at lastBit.
    int sh = static_cast<int>(52 - mb);
    uint64_t lastBit = uint64_t{1} << sh;
    VReg bit = valloc(ElementType::S64);
    e_.op("vshr {}, {}, {}", V(bit), sh < 32 ? V(v) : H(v), sh % 32);
    e_.op("vand {}, {}, 1", V(bit), V(bit));
    e_.op("vmov.s32 {}, 0", H(bit));
    VReg base = pairConst((lastBit >> 1) - 1, ElementType::S64);
    VReg bias = pairAddSub(true, bit, base, ElementType::S64);
    VReg sum = pairAddSub(true, v, bias, ElementType::S64);
    uint64_t keep = ~(lastBit - 1);
    e_.op("vand {}, {}, {}", V(sum), V(sum), static_cast<int32_t>(static_cast<uint32_t>(keep)));
    e_.op("vand {}, {}, {}", H(sum), H(sum), static_cast<int32_t>(static_cast<uint32_t>(keep >> 32)));
    for (VReg r : {bit, base, bias, v}) vfree(r);
    v = sum;
  }
  if (eb < 11) {
    // Exponents above the reduced range become infinity, at or below it zero
    // (the sign kept); the field is bits 20..30 of the high word.
    int64_t reduced = (int64_t{1} << (eb - 1)) - 1;
    int64_t maxE = (1023 + reduced) << 20, minE = (1023 - reduced) << 20;
    VReg ex = valloc(ElementType::U32), sign = valloc(ElementType::U32), zero = vconst(ElementType::S32, 0);
    e_.op("vand {}, {}, 2146435072", V(ex), H(v));
    e_.op("vand {}, {}, -2147483648", V(sign), H(v));
    int gt = malloc_(), le = malloc_();
    e_.op("vcmp.gt.s32 {}, {}, {}", M(gt), V(ex), maxE);
    e_.op("vcmp.le.s32 {}, {}, {}", M(le), V(ex), minE);
    e_.op("mor {}, {}, {}", M(le), M(le), M(gt));  // either way the low word is 0
    e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(le), V(zero), V(v));
    e_.op("vsel.s32 {}, {}, {}, {}", H(v), M(le), V(sign), H(v));
    e_.op("vor {}, {}, 2146435072", V(sign), V(sign));
    e_.op("vsel.s32 {}, {}, {}, {}", H(v), M(gt), V(sign), H(v));
    masks_.put(gt);
    masks_.put(le);
    for (VReg r : {ex, sign, zero}) vfree(r);
  }
  // NaN inputs: kept, or +infinity without mantissa bits.
  int nan = pairCompare("ne", ElementType::F64, x, x);
  VReg keep = mb > 0 ? vcopy(x, ElementType::S64) : pairConst(0x7FF0000000000000ull, ElementType::S64);
  e_.op("vsel.s32 {}, {}, {}, {}", V(v), M(nan), V(keep), V(v));
  e_.op("vsel.s32 {}, {}, {}, {}", H(v), M(nan), H(keep), H(v));
  masks_.put(nan);
  vfree(keep);
  v.t = ElementType::F64;
  return v;
}

// ============================================================== sub-byte bitcast-converts

bool Lowerer::bitcastRepacksNibbles(const Instruction& in) const {
  ElementType from = in.operand(0)->shape().elementType(), to = in.shape().elementType();
  int fk = hlo::elementTypeInfo(from).bitWidth, tk = hlo::elementTypeInfo(to).bitWidth;
  if (fk % 8 == 0 && tk % 8 == 0) return false;
  // The two 6-bit floats hold their codes zero-extended in their bytes: the
  // same bytes either way.
  return !(fk == 6 && tk == 6);
}

// In memory a sub-byte element (1, 2 or 4 bits) has a byte of its own: the
// value in the low bits, sign-extended for s1/s2/s4, zero-extended
// otherwise. The interpreter's bitcast is a little-endian bit stream, so
// counting a whole-byte type as its bytes (units of 8 bits), element r*t + j
// of the narrower side is bits j*k .. j*k + k - 1 of unit t of the wider
// one (k the narrower width, r the ratio). Joins read the r strided parts
// and or them together; splits compute r parts and interleave them with
// strided DMAs; equal widths just re-extend each element.
bool Lowerer::lowerNibbleBitcast(const Instruction& in) {
  beginKernel(in, "bitcast");
  ElementType from = in.operand(0)->shape().elementType(), to = in.shape().elementType();
  int src = leaves_[in.operand(0)][0], dst = leaves_[&in][0];
  const int fk = hlo::elementTypeInfo(from).bitWidth, tk = hlo::elementTypeInfo(to).bitWidth;
  const int fe = fk < 8 ? fk : 8, te = tk < 8 ? tk : 8;  // unit widths
  if ((fe % te != 0 && te % fe != 0) || (fk >= 8 && fk % 8 != 0) || (tk >= 8 && tk % 8 != 0))
    return fail(in, fmt::format("llo-gen: bitcast-convert between {} and {} is not supported",
                                hlo::elementTypeName(from), hlo::elementTypeName(to)));
  // Result units: sub-byte results stored extended as their type says.
  const bool signedTo = tk < 8 && hlo::isSignedIntegerType(to);
  const ElementType unitOut = signedTo ? ElementType::S8 : ElementType::U8;
  auto extend = [&](VReg d) {  // d holds te meaningful low bits
    if (signedTo) {
      e_.op("vshl {}, {}, {}", V(d), V(d), 32 - te);
      e_.op("vsra {}, {}, {}", V(d), V(d), 32 - te);
    } else if (te < 8) {
      e_.op("vand {}, {}, {}", V(d), V(d), (1 << te) - 1);
    }
    d.t = unitOut;
    return d;
  };
  const int64_t inUnits = static_cast<int64_t>(bufs_[src].bytes);  // one unit per byte
  bool ok = true;
  if (fe == te) {
    ok = emitElementwise(inUnits, {EwInput{EwInput::Full, src, 0, ElementType::U8}}, {EwOutput{dst, 0, unitOut}},
                         [&](const std::vector<VReg>& v) {
                           VReg d = valloc(ElementType::S32);
                           e_.op("vmov.s32 {}, {}", V(d), V(v[0]));
                           return std::vector<VReg>{extend(d)};
                         });
  } else if (fe < te) {
    // Join: unit t of the result is operand units r*t .. r*t + r - 1.
    const int r = te / fe;
    const int64_t n = inUnits / r;
    std::vector<EwInput> parts;
    for (int j = 0; j < r; ++j) {
      int part = tempBuf(ElementType::U8, {n});
      emitCopy(part, 0, src, j, {n}, {1}, {r}, 1);
      parts.push_back(EwInput{EwInput::Full, part, 0, ElementType::U8});
    }
    ok = emitElementwise(n, parts, {EwOutput{dst, 0, unitOut}}, [&](const std::vector<VReg>& v) {
      VReg d = valloc(ElementType::S32), t = valloc(ElementType::S32);
      e_.op("vand {}, {}, {}", V(d), V(v[0]), (1 << fe) - 1);
      for (int j = 1; j < r; ++j) {
        e_.op("vand {}, {}, {}", V(t), V(v[static_cast<size_t>(j)]), (1 << fe) - 1);
        e_.op("vshl {}, {}, {}", V(t), V(t), j * fe);
        e_.op("vor {}, {}, {}", V(d), V(d), V(t));
      }
      vfree(t);
      return std::vector<VReg>{extend(d)};
    });
  } else {
    // Split: result units r*t .. r*t + r - 1 are the pieces of operand unit t.
    const int r = fe / te;
    std::vector<EwOutput> parts;
    std::vector<int> partBufs;
    for (int j = 0; j < r; ++j) {
      partBufs.push_back(tempBuf(unitOut, {inUnits}));
      parts.push_back(EwOutput{partBufs.back(), 0, unitOut});
    }
    ok = emitElementwise(inUnits, {EwInput{EwInput::Full, src, 0, ElementType::U8}}, parts,
                         [&](const std::vector<VReg>& v) {
                           std::vector<VReg> out;
                           for (int j = 0; j < r; ++j) {
                             VReg d = valloc(ElementType::S32);
                             e_.op("vshr {}, {}, {}", V(d), V(v[0]), j * te);
                             out.push_back(extend(d));
                           }
                           return out;
                         });
    for (int j = 0; j < r; ++j) emitCopy(dst, j, partBufs[static_cast<size_t>(j)], 0, {inUnits}, {r}, {1}, 1);
  }
  endKernel(static_cast<double>(inUnits) * 4, 2 * bufs_[dst].bytes + 2 * static_cast<uint64_t>(inUnits), 0);
  return ok && !failed_;
}

// ============================================================== GELU custom calls

// The interpreter's exact (erf) GELU and its derivative. erf is Abramowitz
// and Stegun 7.1.26 (absolute error below 1.5e-7), evaluated in f32.
VReg Lowerer::asF64(VReg x) {
  if (x.t == ElementType::C64) x = VReg{x.r, ElementType::F32};
  if (x.t == ElementType::C128) x = VReg{x.r, ElementType::F64, x.hi};
  if (x.t == ElementType::F64) return vcopy(x, ElementType::F64);
  if (!isPairType(x.t)) return pairFrom32(x, ElementType::F64);
  VReg d = valloc(ElementType::F64);
  const char* m = x.t == ElementType::S64 ? "vcvt.f64.s64" : "vcvt.f64.u64";
  for (int w = 0; w < 2; ++w) e_.op("{} {}, {}, {}, {}", m, w ? H(d) : V(d), V(x), H(x), w);
  return d;
}

VReg Lowerer::fromF64(VReg y, ElementType to) {
  return typeInfo(to).isComplex ? complexFromReal(y, to) : convertFromF64(y, to);
}

VReg Lowerer::f64Row(const char* mnemonic, VReg a, std::optional<VReg> b) {
  VReg d = valloc(ElementType::F64);
  for (int w = 0; w < 2; ++w) {
    if (b)
      e_.op("{} {}, {}, {}, {}, {}, {}", mnemonic, w ? H(d) : V(d), V(a), H(a), V(*b), H(*b), w);
    else
      e_.op("{} {}, {}, {}, {}", mnemonic, w ? H(d) : V(d), V(a), H(a), w);
  }
  return d;
}

VReg Lowerer::f64Constant(double v) {
  uint64_t bits = std::bit_cast<uint64_t>(v);
  VReg d = valloc(ElementType::F64);
  e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint32_t>(bits)));
  e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
  return d;
}

bool Lowerer::lowerGelu(const Instruction& in) {
  beginKernel(in, "elementwise");
  bool back = in.attrs().customCallTarget == "AwsNeuronGeluBackward";
  ElementType t = in.shape().elementType();
  int64_t n = *in.shape().elementCount();
  int src = leaves_[in.operand(0)][0], dst = leaves_[&in][0];
  if (t != ElementType::F32 && !isNarrowFloat(t)) {
    // The interpreter's own formula in f64 (erf and exp expanded into pair
    // rows, kernels/math_f64.cpp), from and back to the type as it converts: integers
    // and pred by value, complex by the real part (imaginary +0 after).
    bool ok = emitElementwise(
        n, {EwInput{EwInput::Full, src, 0, t}}, {EwOutput{dst, 0, t}}, [&](const std::vector<VReg>& v) {
          std::vector<VReg> temps;
          auto keep = [&](VReg r) {
            temps.push_back(r);
            return r;
          };
          VReg x = keep(asF64(v[0]));
          VReg scaled = keep(f64Row("vmul.f64", x, keep(f64Constant(M_SQRT1_2))));
          VReg erf = keep(*expandMathF64(Opcode::Erf, {scaled}));
          VReg sum = keep(f64Row("vadd.f64", keep(f64Constant(1.0)), erf));
          VReg cdf = keep(f64Row("vmul.f64", keep(f64Constant(0.5)), sum));
          VReg y;
          if (back) {  // cdf + x * exp(-0.5 * x * x) * 0.3989422804014327, left to right
            VReg h = keep(f64Row("vmul.f64", keep(f64Constant(-0.5)), x));
            VReg hx = keep(f64Row("vmul.f64", h, x));
            VReg ex = keep(expandExpF64(hx));
            VReg xe = keep(f64Row("vmul.f64", x, ex));
            VReg xes = keep(f64Row("vmul.f64", xe, keep(f64Constant(0.3989422804014327))));
            y = keep(f64Row("vadd.f64", cdf, xes));
          } else {
            y = keep(f64Row("vmul.f64", x, cdf));
          }
          VReg d = fromF64(y, t);
          for (VReg r : temps) vfree(r);
          return std::vector<VReg>{d};
        });
    endKernel(static_cast<double>(n) * 20, 2 * bufs_[dst].bytes, 0);
    return ok && !failed_;
  }
  bool ok = emitElementwise(
      n, {EwInput{EwInput::Full, src, 0, t}}, {EwOutput{dst, 0, t}}, [&](const std::vector<VReg>& v) {
        VReg x = v[0];
        VReg z = unop("vabs.f32", x, ElementType::F32);
        e_.op("vmul.f32 {}, {}, 0.7071067811865476", V(z), V(z));
        VReg tt = binop("vmul.f32", z, "0.3275911", ElementType::F32);
        e_.op("vadd.f32 {}, {}, 1.0", V(tt), V(tt));
        e_.op("vrecip {}, {}", V(tt), V(tt));
        // q = 1 - erf(z) = poly(t) * exp(-z^2)
        VReg q = binop("vmul.f32", tt, "1.061405429", ElementType::F32);
        for (const char* a : {"-1.453152027", "1.421413741", "-0.284496736", "0.254829592"}) {
          e_.op("vadd.f32 {}, {}, {}", V(q), V(q), a);
          e_.op("vmul.f32 {}, {}, {}", V(q), V(q), V(tt));
        }
        e_.op("vmul.f32 {}, {}, {}", V(z), V(z), V(z));
        e_.op("vneg.f32 {}, {}", V(z), V(z));
        VReg ez = unop("vexp", z, ElementType::F32);
        e_.op("vmul.f32 {}, {}, {}", V(q), V(q), V(ez));
        e_.op("vmul.f32 {}, {}, 0.5", V(q), V(q));
        // cdf = 1 - q/2 for x >= 0, q/2 below.
        VReg hi = valloc(ElementType::F32);
        e_.op("vmov.f32 {}, 1.0", V(hi));
        e_.op("vsub.f32 {}, {}, {}", V(hi), V(hi), V(q));
        int neg = malloc_();
        e_.op("vcmp.lt.f32 {}, {}, 0", M(neg), V(x));
        VReg cdf = valloc(ElementType::F32);
        e_.op("vsel.f32 {}, {}, {}, {}", V(cdf), M(neg), V(q), V(hi));
        masks_.put(neg);
        VReg d = valloc(t);
        if (back) {
          // cdf + x * exp(-x^2 / 2) / sqrt(2 pi)
          e_.op("vmul.f32 {}, {}, {}", V(ez), V(x), V(x));
          e_.op("vmul.f32 {}, {}, -0.5", V(ez), V(ez));
          e_.op("vexp {}, {}", V(ez), V(ez));
          e_.op("vmul.f32 {}, {}, {}", V(ez), V(ez), V(x));
          e_.op("vmul.f32 {}, {}, 0.3989422804014327", V(ez), V(ez));
          e_.op("vadd.f32 {}, {}, {}", V(d), V(cdf), V(ez));
        } else {
          e_.op("vmul.f32 {}, {}, {}", V(d), V(x), V(cdf));
        }
        for (VReg r : {z, tt, q, ez, hi, cdf}) vfree(r);
        return std::vector<VReg>{normalize(d)};
      });
  endKernel(static_cast<double>(n) * 20, 2 * bufs_[dst].bytes, 0);
  return ok && !failed_;
}

// ============================================================== cuBLAS gemm custom calls

// GPU dumps: alpha * dot(lhs, rhs) (+ beta * c), the dot dimensions in the
// gemm_backend_config; further result elements are workspaces (zeros).
bool Lowerer::planGemm(const Instruction& in) {
  const std::string& target = in.attrs().customCallTarget;
  nlohmann::json cfg = nlohmann::json::parse(in.backendConfig().text, nullptr, false);
  auto bad = [&]() {
    return fail(in, fmt::format("llo-gen: custom-call target \"{}\" needs two array operands and a "
                                "gemm_backend_config",
                                target));
  };
  if (cfg.is_discarded() || !cfg.is_object() || !cfg.contains("gemm_backend_config") ||
      in.operandCount() < 2 || !in.operand(0)->shape().isArray() || !in.operand(1)->shape().isArray())
    return bad();
  const nlohmann::json& g = cfg["gemm_backend_config"];
  if (!g.is_object()) return bad();
  bool ok = true;
  auto dims = [&](const char* key) {
    std::vector<int64_t> v;
    if (!g.contains("dot_dimension_numbers") || !g["dot_dimension_numbers"].is_object() ||
        !g["dot_dimension_numbers"].contains(key))
      return v;
    const nlohmann::json& list = g["dot_dimension_numbers"][key];
    if (!list.is_array()) {
      ok = false;
      return v;
    }
    for (const auto& e : list) {
      if (e.is_number_integer()) {
        v.push_back(e.get<int64_t>());
      } else if (e.is_string() && !e.get<std::string>().empty() &&
                 e.get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
                 e.get<std::string>().size() < 10) {
        v.push_back(std::stoll(e.get<std::string>()));
      } else {
        ok = false;
      }
    }
    return v;
  };
  const Shape& rs = in.shape().isTuple() ? in.shape().tupleElement(0) : in.shape();
  if (!rs.isArray()) return bad();
  auto dot = std::make_unique<Instruction>(Opcode::Dot, in.name(), rs);
  dot->setLocation(in.location());
  dot->addOperand(in.operand(0));
  dot->addOperand(in.operand(1));
  hlo::DotDimensionNumbers& dn = dot->attrs().dotDims.mutate();
  dn.lhsContractingDimensions = dims("lhs_contracting_dimensions");
  dn.rhsContractingDimensions = dims("rhs_contracting_dimensions");
  dn.lhsBatchDimensions = dims("lhs_batch_dimensions");
  dn.rhsBatchDimensions = dims("rhs_batch_dimensions");
  if (!ok) return bad();
  // The dims must describe a dot of these operands giving this shape.
  const Shape& ls = in.operand(0)->shape();
  const Shape& rsh = in.operand(1)->shape();
  auto valid = [](const std::vector<int64_t>& d, const Shape& s) {
    std::set<int64_t> seen;
    for (int64_t x : d)
      if (x < 0 || x >= s.rank() || !seen.insert(x).second) return false;
    return true;
  };
  if (!valid(dn.lhsContractingDimensions, ls) || !valid(dn.rhsContractingDimensions, rsh) ||
      !valid(dn.lhsBatchDimensions, ls) || !valid(dn.rhsBatchDimensions, rsh) ||
      dn.lhsContractingDimensions.size() != dn.rhsContractingDimensions.size() ||
      dn.lhsBatchDimensions.size() != dn.rhsBatchDimensions.size())
    return fail(in, fmt::format("llo-gen: custom-call target \"{}\": bad dot_dimension_numbers", target));
  for (size_t i = 0; i < dn.lhsContractingDimensions.size(); ++i)
    if (ls.dimension(dn.lhsContractingDimensions[i]) != rsh.dimension(dn.rhsContractingDimensions[i]))
      return fail(in,
                  fmt::format("llo-gen: custom-call target \"{}\": contracting dimensions differ", target));
  // Result: batch dims, then lhs free dims, then rhs free dims.
  std::vector<int64_t> want;
  for (int64_t d : dn.lhsBatchDimensions) want.push_back(ls.dimension(d));
  auto freeOf = [&](const Shape& s, const std::vector<int64_t>& bd, const std::vector<int64_t>& cd) {
    for (int64_t d = 0; d < s.rank(); ++d)
      if (std::find(bd.begin(), bd.end(), d) == bd.end() && std::find(cd.begin(), cd.end(), d) == cd.end())
        want.push_back(s.dimension(d));
  };
  freeOf(ls, dn.lhsBatchDimensions, dn.lhsContractingDimensions);
  freeOf(rsh, dn.rhsBatchDimensions, dn.rhsContractingDimensions);
  for (size_t i = 0; i < dn.lhsBatchDimensions.size(); ++i)
    if (ls.dimension(dn.lhsBatchDimensions[i]) != rsh.dimension(dn.rhsBatchDimensions[i])) want.clear();
  if (want != rs.dimensions())
    return fail(
        in, fmt::format("llo-gen: custom-call target \"{}\": result shape does not match the dot", target));
  if (!checkTypes(in) || !checkTypes(*dot)) return false;
  // json::value would throw on a non-number: read defensively.
  auto number = [&](const char* key, double fallback) {
    if (!g.contains(key)) return fallback;
    if (!g[key].is_number()) {
      ok = false;
      return fallback;
    }
    return g[key].get<double>();
  };
  double alpha = number("alpha_real", 1.0), beta = number("beta", 0.0);
  if (!ok) return bad();
  if (!std::isfinite(alpha) || !std::isfinite(beta)) return bad();
  if (beta != 0.0 && (in.operandCount() < 3 || in.operand(2)->shape() != rs))
    return fail(in,
                fmt::format("llo-gen: custom-call target \"{}\": beta needs a third operand of the result's "
                            "shape",
                            target));
  defineNew(in);
  gemmScales_[&in] = {alpha, beta};
  gemmDots_[&in] = std::move(dot);
  return true;
}

bool Lowerer::lowerGemm(const Instruction& in) {
  Instruction& dot = *gemmDots_.at(&in);
  const std::vector<int>& l = leaves_[&in];
  leaves_[&dot] = {l[0]};
  if (!lowerDot(dot)) return false;
  auto [alpha, beta] = gemmScales_.at(&in);
  bool ok = true;
  int dst = l[0];
  ElementType t = bufs_[dst].type;
  if ((alpha != 1.0 || beta != 0.0) && t != ElementType::F32 && !isNarrowFloat(t)) {
    // The interpreter scales in f64 (p * alpha, then + beta * c) and
    // converts back: integers by value, complex results by the real part
    // (imaginary +0 after), exactly so with the f64 rows.
    beginKernel(in, "elementwise");
    std::vector<EwInput> ins = {EwInput{EwInput::Full, dst, 0, t}};
    if (beta != 0.0) ins.push_back(EwInput{EwInput::Full, leaves_[in.operand(2)][0], 0, in.operand(2)->shape().elementType()});
    int64_t n = static_cast<int64_t>(bufs_[dst].bytes / typeInfo(t).bytes);
    ok = emitElementwise(n, ins, {EwOutput{dst, 0, t}}, [&](const std::vector<VReg>& v) {
      VReg p = asF64(v[0]), a = f64Constant(alpha);
      VReg y = f64Row("vmul.f64", p, a);
      for (VReg r : {p, a}) vfree(r);
      if (beta != 0.0) {
        VReg c = asF64(v[1]), b = f64Constant(beta);
        VReg bc = f64Row("vmul.f64", b, c);
        VReg s = f64Row("vadd.f64", y, bc);
        for (VReg r : {c, b, bc, y}) vfree(r);
        y = s;
      }
      VReg d = fromF64(y, t);
      vfree(y);
      return std::vector<VReg>{d};
    });
    endKernel(static_cast<double>(n) * 3, 3 * bufs_[dst].bytes, 0);
  } else if (alpha != 1.0 || beta != 0.0) {
    beginKernel(in, "elementwise");
    std::vector<EwInput> ins = {EwInput{EwInput::Full, dst, 0, t}};
    if (beta != 0.0) ins.push_back(EwInput{EwInput::Full, leaves_[in.operand(2)][0], 0, t});
    int64_t n = static_cast<int64_t>(bufs_[dst].bytes / typeInfo(t).bytes);
    ok = emitElementwise(n, ins, {EwOutput{dst, 0, t}}, [&](const std::vector<VReg>& v) {
      VReg d = binop("vmul.f32", v[0], floatImmediate(alpha), t);
      if (beta != 0.0) {
        VReg c = binop("vmul.f32", v[1], floatImmediate(beta), t);
        e_.op("vadd.f32 {}, {}, {}", V(d), V(d), V(c));
        vfree(c);
      }
      return std::vector<VReg>{normalize(d)};
    });
    endKernel(static_cast<double>(n) * 3, 3 * bufs_[dst].bytes, 0);
  }
  if (ok && l.size() > 1) {
    beginKernel(in, "fill");
    ok = zeroLeaves(std::vector<int>(l.begin() + 1, l.end()));
    endKernel(0, 0, 0);
  }
  return ok && !failed_;
}

// ============================================================== integer dots

bool Lowerer::isMxuDot(const Instruction& in) const {
  ElementType lt = in.operand(0)->shape().elementType(), rt = in.operand(1)->shape().elementType();
  ElementType ot = in.shape().elementType();
  if (typeInfo(lt).isFloat && typeInfo(rt).isFloat && typeInfo(ot).isFloat) return true;
  return lt == ElementType::S8 && rt == ElementType::S8 && ot == ElementType::S32 && target_.mxu.int8;
}

// Integer dots off the MXU: each output row is a sum over k of a scalar of
// the lhs row times a row of the rhs, in wrapping 32-bit vector arithmetic
// (the interpreter's wider sums wrap to the same bits). The rhs of one
// batch sits in VMEM, the lhs row in SMEM.
bool Lowerer::lowerVectorDot(const Instruction& in) {
  const Instruction* lhs = in.operand(0);
  const Instruction* rhs = in.operand(1);
  ElementType lt = lhs->shape().elementType(), rt = rhs->shape().elementType(), ot = in.shape().elementType();
  // Other kinds compute in the result's type, as the interpreter does: the
  // operands converted first, then the dot of that type (pred: an or of ands).
  const ElementType ct = dotComputeType(ot);
  if (typeInfo(lt).isFloat || typeInfo(rt).isFloat || typeInfo(ot).isFloat || lt == ElementType::Pred ||
      rt == ElementType::Pred || ot == ElementType::Pred)
    return lowerThroughComputeType(in, ct);
  for (ElementType t : {lt, rt, ot})
    if (typeInfo(t).isFloat || t == ElementType::Pred)
      return fail(
          in, fmt::format("llo-gen: dot {} x {} -> {} mixes integer and other types, which is not supported",
                          hlo::elementTypeName(lt), hlo::elementTypeName(rt), hlo::elementTypeName(ot)));
  beginKernel(in, "matmul-vpu");
  const auto& dn = *in.attrs().dotDims;
  DotGeometry geo = dotGeometry(in);
  const std::vector<int64_t>&lf = geo.lhsFree, &rf = geo.rhsFree;
  int64_t b = geo.b, m = geo.m, k = geo.k, n = geo.n;
  int dst = leaves_[&in][0];
  if (std::optional<bool> done = finishTrivialDot(geo, dst, ot)) return *done;
  // Operands as s32 [B, M, K] and [B, K, N].
  auto canon = [&](const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                   const std::vector<int64_t>& g2) -> int {
    const Shape& s = op->shape();
    ElementType t = s.elementType();
    int es = typeInfo(t).bytes;
    std::vector<int64_t> order = g0;
    order.insert(order.end(), g1.begin(), g1.end());
    order.insert(order.end(), g2.begin(), g2.end());
    std::vector<int64_t> dims = {dimsProduct(s, g0), dimsProduct(s, g1), dimsProduct(s, g2)};
    int src = leaves_[op][0];
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int64_t>(i);
    if (!identity) {
      std::vector<int64_t> os = byteStrides(s.dimensions(), es), counts, ss;
      for (int64_t d : order) {
        counts.push_back(s.dimension(d));
        ss.push_back(os[static_cast<size_t>(d)]);
      }
      int tb = tempBuf(t, dims);
      emitCopy(tb, 0, src, 0, counts, byteStrides(counts, es), ss, es);
      src = tb;
    }
    if (es == 4) return src;
    int wide = tempBuf(ElementType::S32, dims);
    emitElementwise(product(dims), {EwInput{EwInput::Full, src, 0, t}}, {EwOutput{wide, 0, ElementType::S32}},
                    [&](const std::vector<VReg>& v) {
                      VReg d = valloc(ElementType::S32);
                      e_.op("vmov.s32 {}, {}", V(d), V(v[0]));
                      return std::vector<VReg>{d};
                    });
    return wide;
  };
  int a = canon(lhs, dn.lhsBatchDimensions, lf, dn.lhsContractingDimensions);
  int w = canon(rhs, dn.rhsBatchDimensions, dn.rhsContractingDimensions, rf);
  bool direct = typeInfo(ot).bytes == 4;
  int c = direct ? dst : tempBuf(ElementType::S32, {b, m, n});
  if (failed_) return false;
  if (!emitVectorUnitMatmul(in, b, m, k, n, a, b, w, c, ElementType::S32)) return false;
  bool ok = !failed_;
  if (ok && !direct)
    ok = emitElementwise(b * m * n, {EwInput{EwInput::Full, c, 0, ElementType::S32}}, {EwOutput{dst, 0, ot}},
                         [&](const std::vector<VReg>& v) {
                           VReg d = valloc(ot);
                           e_.op("vmov.s32 {}, {}", V(d), V(v[0]));
                           return std::vector<VReg>{d};
                         });
  endKernel(2.0 * static_cast<double>(b * m * n * k),
            bufs_[leaves_[lhs][0]].bytes + bufs_[leaves_[rhs][0]].bytes + bufs_[dst].bytes, 0);
  return ok && !failed_;
}

// ============================================================== rng

bool Lowerer::planRng(const Instruction& in) {
  if (!checkTypes(in)) return false;
  if (in.opcode() == Opcode::Rng) {
    if (!in.shape().isArray() || in.operandCount() != 2 || !in.operand(0)->shape().isScalar() ||
        !in.operand(1)->shape().isScalar())
      return fail(in, "llo-gen: rng expects two scalar operands and an array result");
    if (typeInfo(in.operand(0)->shape().elementType()).isComplex || typeInfo(in.shape().elementType()).isComplex)
      return fail(in, "llo-gen: rng of complex numbers is not supported");
    if (2 * in.shape().elementCount().value_or(0) >= (int64_t{1} << 31))
      return fail(in, "llo-gen: rng output is too large");
  } else if (!in.shape().isArray() || in.shape().elementType() != ElementType::U64 ||
             in.shape().dimensions() != std::vector<int64_t>{2}) {
    return fail(in, "llo-gen: rng-get-and-update-state must return u64[2]");
  }
  if (rngState_ >= 0) return true;
  rngState_ = newBuf(BufKind::Arg, Shape::array(ElementType::U64, {2}));
  bufs_[rngState_].name = std::string(kRngStateBuffer);
  args_.push_back(rngState_);
  return true;
}

// eval's Interp::evalRng: one ThreeFry word (block) per element from the
// stream {key, counter}, the counter advanced past them, then shaped in f64.
bool Lowerer::lowerRng(const Instruction& in) {
  beginKernel(in, "rng");
  const int64_t n = *in.shape().elementCount();
  const ElementType rt = in.shape().elementType();
  const bool normal = in.attrs().distribution == hlo::RngDistribution::Normal;
  const bool isInt = !typeInfo(rt).isFloat && rt != ElementType::Pred;
  int wordsBuf = tempBuf(ElementType::U64, {n});
  bool ok = emitRngBits(rngState_, 2, false, ElementType::U64, n, rngState_, wordsBuf);
  if (!ok || n == 0) {
    endKernel(0, 32, 0);
    return ok && !failed_;
  }
  auto pair2 = [&](const char* m, VReg a, VReg b) {
    VReg d = valloc(ElementType::F64);
    for (int w = 0; w < 2; ++w)
      e_.op("{} {}, {}, {}, {}, {}, {}", m, w ? H(d) : V(d), V(a), H(a), V(b), H(b), w);
    return d;
  };
  auto pair1 = [&](const char* m, VReg a) {
    VReg d = valloc(ElementType::F64);
    for (int w = 0; w < 2; ++w) e_.op("{} {}, {}, {}, {}", m, w ? H(d) : V(d), V(a), H(a), w);
    return d;
  };
  auto constPair = [&](uint64_t bits, ElementType t) {
    VReg d = valloc(t);
    e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint32_t>(bits)));
    e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
    return d;
  };
  auto constF64 = [&](double v) { return constPair(std::bit_cast<uint64_t>(v), ElementType::F64); };
  auto select = [&](int mask, VReg a, VReg b) {
    VReg d = valloc(a.t);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(mask), V(a), V(b));
    e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(mask), H(a), H(b));
    return d;
  };
  auto release = [&](std::initializer_list<VReg> regs) {
    for (VReg r : regs) vfree(r);
  };
  // f64 of an operand, as the interpreter converts it.
  auto toF64 = [&](VReg x) {
    if (x.t == ElementType::F64) return vcopy(x, ElementType::F64);
    if (x.t == ElementType::S64) return pair1("vcvt.f64.s64", x);
    if (x.t == ElementType::U64) return pair1("vcvt.f64.u64", x);
    return pairFrom32(x, ElementType::F64);
  };
  // f64 of an unsigned 32-bit register (exact).
  auto u32ToF64 = [&](const std::string& word) {
    VReg x = valloc(ElementType::S64);
    e_.op("vmov.s32 {}, {}", V(x), word);
    e_.op("vmov.s32 {}, 0", H(x));
    VReg f = pair1("vcvt.f64.s64", x);
    vfree(x);
    return f;
  };
  const ElementType opType = in.operand(0)->shape().elementType();
  ok = emitElementwise(
      n,
      {EwInput{EwInput::Full, wordsBuf, 0, ElementType::U64},
       EwInput{EwInput::Scalar, leaves_[in.operand(0)][0], 0, opType},
       EwInput{EwInput::Scalar, leaves_[in.operand(1)][0], 0, in.operand(1)->shape().elementType()}},
      {EwOutput{leaves_[&in][0], 0, rt}}, [&](const std::vector<VReg>& v) {
        VReg w = v[0], a = toF64(v[1]), b = toF64(v[2]);
        VReg o;
        if (normal) {
          // Box-Muller: u1 = (low word + 1) 2^-32, u2 = high word 2^-32;
          // a + b * sqrt(-2 ln u1) * cos(2 pi u2), evaluated left to right.
          VReg lo = u32ToF64(V(w)), hi = u32ToF64(H(w));
          VReg one = constF64(1.0), scale = constF64(0x1.0p-32);
          VReg lo1 = pair2("vadd.f64", lo, one);
          VReg u1 = pair2("vmul.f64", lo1, scale), u2 = pair2("vmul.f64", hi, scale);
          release({lo, hi, one, lo1});
          VReg ln = *expandMathF64(Opcode::Log, {u1}), m2 = constF64(-2.0);
          VReg t = pair2("vmul.f64", m2, ln);
          VReg r = pair1("vsqrt.f64", t);
          release({u1, ln, m2, t});
          VReg twoPi = constF64(2.0 * M_PI);
          VReg ang = pair2("vmul.f64", twoPi, u2);
          VReg c = *expandMathF64(Opcode::Cos, {ang});
          release({twoPi, ang, u2, scale});
          VReg br = pair2("vmul.f64", b, r);
          VReg brc = pair2("vmul.f64", br, c);
          o = pair2("vadd.f64", a, brc);
          release({r, c, br, brc});
        } else {
          // u = (word >> 11) 2^-53, in [0, 1).
          VReg top = valloc(ElementType::S64), t = valloc(ElementType::S32);
          e_.op("vshr {}, {}, 11", V(top), V(w));
          e_.op("vshl {}, {}, 21", V(t), H(w));
          e_.op("vor {}, {}, {}", V(top), V(top), V(t));
          e_.op("vshr {}, {}, 11", H(top), H(w));
          VReg topF = pair1("vcvt.f64.s64", top), scale = constF64(0x1.0p-53);
          VReg u = pair2("vmul.f64", topF, scale);
          release({top, t, topF, scale});
          VReg span = pair2("vsub.f64", b, a), zero = constF64(0.0);
          if (isInt) {
            // a + floor(u * span) when span > 0, else a.
            VReg p = pair2("vmul.f64", u, span);
            VReg f = pair1("vfloor.f64", p);
            VReg s = pair2("vadd.f64", a, f);
            int m = malloc_();
            e_.op("vcmp.gt.f64 {}, {}, {}, {}, {}", M(m), V(span), H(span), V(zero), H(zero));
            o = select(m, s, a);
            masks_.put(m);
            release({p, f, s});
          } else {
            // a + span * u, kept below b: nextafter(b, a) when it reaches b
            // (b > a). On the bits: one step toward zero from b > 0, away
            // from zero for b < 0, the smallest negative subnormal at zero.
            VReg p = pair2("vmul.f64", span, u);
            VReg x = pair2("vadd.f64", a, p);
            VReg one = constPair(1, ElementType::S64);
            VReg down = pairAddSub(false, b, one, ElementType::S64), up = pairAddSub(true, b, one, ElementType::S64);
            VReg atZero = constPair(0x8000000000000001ull, ElementType::S64);
            int m = malloc_();
            e_.op("vcmp.gt.f64 {}, {}, {}, {}, {}", M(m), V(b), H(b), V(zero), H(zero));
            VReg step = select(m, down, up);
            e_.op("vcmp.eq.f64 {}, {}, {}, {}, {}", M(m), V(b), H(b), V(zero), H(zero));
            VReg next = select(m, atZero, step);
            e_.op("vcmp.ge.f64 {}, {}, {}, {}, {}", M(m), V(x), H(x), V(b), H(b));
            VReg clamped = select(m, next, x);
            e_.op("vcmp.gt.f64 {}, {}, {}, {}, {}", M(m), V(b), H(b), V(a), H(a));
            o = select(m, clamped, x);
            masks_.put(m);
            release({p, x, one, down, up, atZero, step, next, clamped});
          }
          release({u, span, zero});
        }
        o.t = ElementType::F64;
        VReg d = convertFromF64(o, rt);
        release({a, b, o});
        return std::vector<VReg>{d};
      });
  endKernel(static_cast<double>(n) * (normal ? 160 : 130), bufs_[wordsBuf].bytes * 2 + bufs_[leaves_[&in][0]].bytes,
            0);
  return ok && !failed_;
}

// eval: returns {key, counter}, then advances the counter by delta.
bool Lowerer::lowerRngGetAndUpdateState(const Instruction& in) {
  beginKernel(in, "rng");
  PoolGuard guard({&sregs_});
  int st[4];
  for (int w = 0; w < 4; ++w) st[w] = loadScalar(rngState_, 4 * w, ElementType::U32, w);
  bool ok = storeWords(leaves_[&in][0], {S(st[0]), S(st[1]), S(st[2]), S(st[3])});
  const uint64_t delta = static_cast<uint64_t>(std::max<int64_t>(in.attrs().rngDelta, 0));
  int lo = sreg(), hi = sreg(), carry = sreg(), a = sreg(), b = sreg();
  e_.op("smov {}, {}", S(lo), static_cast<int32_t>(static_cast<uint32_t>(delta)));
  e_.op("smov {}, {}", S(hi), static_cast<int32_t>(static_cast<uint32_t>(delta >> 32)));
  e_.op("sadd {}, {}, {}", S(lo), S(lo), S(st[2]));
  e_.op("sadd {}, {}, {}", S(hi), S(hi), S(st[3]));
  // The low word's carry: the sum is below the old word (unsigned).
  e_.op("sxor {}, {}, -2147483648", S(a), S(lo));
  e_.op("sxor {}, {}, -2147483648", S(b), S(st[2]));
  e_.op("scmp.lt {}, {}, {}", S(carry), S(a), S(b));
  e_.op("sadd {}, {}, {}", S(hi), S(hi), S(carry));
  ok = ok && storeWords(rngState_, {S(st[0]), S(st[1]), S(lo), S(hi)});
  endKernel(0, 48, 0);
  return ok && !failed_;
}

}  // namespace tpu::codegen
