// Attention fusions: dot(Q, K) -> elementwise work and a softmax over the
// keys -> dot(P, V) as one kernel whose score matrix never leaves VMEM.
//
// Per head (the dots' batch dimensions), Q, K and V ([S, 128], [T, 128],
// [T, 128]) are loaded into VMEM, double-buffered: head h + 1 loads while
// head h is computed, and head h's output goes out while h + 1 is. A head is
// computed in blocks of up to 128 query rows (one 8-row vreg per MXU
// matmul): the K tiles (128 keys each, pushed transposed as MXU weights,
// one tile per MXU, four at a time) give the block's scores vreg by vreg;
// the first level of reductions (the softmax's max) is folded as the scores
// come out of the MXUs, and every reduction's operand is kept in a VMEM
// scratch of the block ([rows, T] in f32), so a later pass (the sum of
// exponentials) and the second product read it instead of recomputing it.
// Then the V tiles are the weights and the block's P vregs, computed from
// the scratch, go through the MXUs; the products are summed over the key
// tiles in registers and stored in the dot's type. Whole rows of keys are
// in VMEM, so the softmax is exact (no running rescale): reductions fold
// key tile by key tile, then across lanes, then with the init value.
// Rows of more than 2048 keys take the online form (onlineForm below): K and
// V stream through VMEM in key blocks, double-buffered, and each block runs
// against every query block of the head with a running max, sum and output.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/kernels/row_values.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

bool mxuOperandType(ElementType t) { return t == ElementType::BF16 || t == ElementType::F32; }

bool scoreType(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.ok && ti.words == 1 && !ti.isComplex && ti.isFloat && ti.bits >= 16;
}

// Whether computation c is op(parameter 0, parameter 1) in f32.
bool binaryOf(const Computation* c, Opcode op) {
  if (!c || c->instructions().size() != 3) return false;
  const Instruction* r = c->root();
  return r->opcode() == op && r->operandCount() == 2 && r->operand(0)->opcode() == Opcode::Parameter &&
         r->operand(1)->opcode() == Opcode::Parameter && r->operand(0) != r->operand(1) &&
         r->shape().elementType() == ElementType::F32;
}

// Row vregs of queries per block: up to 16 (128 rows), a divisor of s / 8.
int64_t queryBlockVregs(int64_t s) {
  for (int64_t rv = std::min<int64_t>(16, s / 8); rv > 1; --rv)
    if ((s / 8) % rv == 0) return rv;
  return 1;
}

bool isConstantValue(const Instruction* i, double v) {
  return i->opcode() == Opcode::Constant && i->shape().isScalar() && i->literal().elementCount() == 1 &&
         i->literal().getDouble(0) == v;
}

// The online-softmax form of an attention fusion (more keys than one block
// folds whole): m = reduce-max(x), e = exp(x - broadcast(m)), s =
// reduce-add(e, 0), and the second product's operand is e / broadcast(s) or
// e * broadcast(1 / s) (then perhaps converted), all in f32, x needing no
// row value. Then e can be taken against a running max, and s and the
// output summed block by block with the factor exp(m_old - m_new).
bool onlineForm(AttentionFusion& f) {
  if (f.reduces.size() != 2 || f.passes != 2) return false;
  const Instruction *r1 = f.reduces[0], *r2 = f.reduces[1];
  if (f.level.at(r1) != 1 || f.level.at(r2) != 2) return false;
  if (!binaryOf(r1->toApply(), Opcode::Maximum) || !binaryOf(r2->toApply(), Opcode::Add)) return false;
  if (!isConstantValue(r2->operand(1), 0.0)) return false;
  const Instruction *x = r1->operand(0), *e = r2->operand(0);
  if (e->opcode() != Opcode::Exp) return false;
  const Instruction* d = e->operand(0);
  if (d->opcode() != Opcode::Subtract || d->operand(0) != x || d->operand(1)->opcode() != Opcode::Broadcast ||
      d->operand(1)->operand(0) != r1)
    return false;
  if (f.level.at(x) != 0) return false;
  for (const Instruction* i : {x, d, e, r1, r2})
    if (i->shape().elementType() != ElementType::F32) return false;
  // Row values past pass 0: the two reductions and perhaps 1 / s.
  const Instruction* recip = nullptr;
  for (const Instruction* i : f.rowValues) {
    if (f.level.at(i) == 0 || i == r1 || i == r2) continue;
    if (recip || i->opcode() != Opcode::Divide || i->operand(1) != r2) return false;
    const Instruction* one = i->operand(0);
    if (one->opcode() != Opcode::Broadcast || !isConstantValue(one->operand(0), 1.0)) return false;
    recip = i;
  }
  const Instruction* p = f.dot2->operand(0);
  if (p->opcode() == Opcode::Convert) p = p->operand(0);
  auto bcastOf = [](const Instruction* b, const Instruction* of) {
    return b->opcode() == Opcode::Broadcast && b->operand(0) == of;
  };
  bool ok = false;
  if (!recip)
    ok = p->opcode() == Opcode::Divide && p->operand(0) == e && bcastOf(p->operand(1), r2);
  else if (p->opcode() == Opcode::Multiply)
    ok = (p->operand(0) == e && bcastOf(p->operand(1), recip)) || (p->operand(1) == e && bcastOf(p->operand(0), recip));
  if (!ok || p->shape().elementType() != ElementType::F32) return false;
  f.maxReduce = r1;
  f.sumReduce = r2;
  f.shift = d;
  f.exponential = e;
  return true;
}

// Classifies the values between the two dots as Full ([..., S, T]), Row
// ([..., S]) or Scalar, with each Full or Row value's reduce level; false
// when one is not of those shapes or not an op the kernel emits.
bool classifyScores(const Computation& c, AttentionFusion& f, int64_t rank) {
  using Class = AttentionFusion::Class;
  const Instruction* dot2 = f.dot2;
  std::vector<int64_t> rowDims(f.dims.begin(), f.dims.end() - 1);
  std::vector<int64_t> keptIdx;
  for (int64_t d = 0; d + 1 < rank; ++d) keptIdx.push_back(d);
  auto classOf = [&](const Instruction* o, Class& k) {
    auto it = f.cls.find(o);
    if (it == f.cls.end()) return false;
    k = it->second;
    return true;
  };
  auto levelOf = [&](const Instruction* o) {
    auto it = f.level.find(o);
    return it == f.level.end() ? 0 : it->second;
  };
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == dot2) break;
    if (&i == f.q || &i == f.k || &i == f.v) continue;
    const Shape& s = i.shape();
    if (!s.isArray() || !scoreType(s.elementType())) return false;
    const std::vector<int64_t>& d = s.dimensions();
    Class k = Class::Scalar;
    int level = 0;
    if (&i == f.dot1) {
      k = Class::Full;
    } else {
      switch (i.opcode()) {
        case Opcode::Parameter:
        case Opcode::Constant:
          if (!s.isScalar()) return false;
          break;
        case Opcode::Reduce: {
          Class a, b;
          if (i.operandCount() != 2 || !i.toApply() || i.attrs().dimensions != std::vector<int64_t>{rank - 1} ||
              !classOf(i.operand(0), a) || !classOf(i.operand(1), b) || a != Class::Full || b != Class::Scalar ||
              d != rowDims)
            return false;
          const Opcode io = i.operand(1)->opcode();
          if (io != Opcode::Constant && io != Opcode::Parameter) return false;
          k = Class::Row;
          level = levelOf(i.operand(0)) + 1;
          f.reduces.push_back(&i);
          break;
        }
        case Opcode::Broadcast: {
          Class a;
          if (!classOf(i.operand(0), a)) return false;
          if (a == Class::Scalar) {
            k = s.isScalar() ? Class::Scalar : d == f.dims ? Class::Full : d == rowDims ? Class::Row : Class::Scalar;
            if (k == Class::Scalar && !s.isScalar()) return false;
          } else if (a == Class::Row && d == f.dims && i.attrs().dimensions == keptIdx) {
            k = Class::Full;
            level = levelOf(i.operand(0));
          } else {
            return false;
          }
          break;
        }
        default: {
          if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng || i.opcode() == Opcode::BitcastConvert ||
              i.operandCount() == 0)
            return false;
          bool any = false;
          for (const Instruction* o : i.operands()) {
            Class a;
            if (!classOf(o, a)) return false;
            if (a == Class::Scalar) continue;
            if (any && a != k) return false;
            k = a;
            any = true;
            level = std::max(level, levelOf(o));
          }
          if (k == Class::Scalar && !s.isScalar()) return false;
          if ((k == Class::Full && d != f.dims) || (k == Class::Row && d != rowDims)) return false;
        }
      }
    }
    f.cls[&i] = k;
    if (k != Class::Scalar) f.level[&i] = level;
    if (k == Class::Scalar) f.scalars.push_back(&i);
    if (k == Class::Row) f.rowValues.push_back(&i);
    if (i.opcode() == Opcode::Reduce) f.passes = std::max(f.passes, level);
  }
  return true;
}

}  // namespace

bool Lowerer::attentionFusion(const Instruction& in, AttentionFusion* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  const Instruction* dot2 = c.root();
  if (dot2->opcode() != Opcode::Dot) return false;
  AttentionFusion f;
  f.comp = &c;
  f.dot2 = dot2;
  f.v = dot2->operand(1);
  const Instruction* p = dot2->operand(0);
  // dot1: the only dot among the other instructions.
  for (const auto& up : c.instructions())
    if (up->opcode() == Opcode::Dot && up.get() != dot2) {
      if (f.dot1) return false;
      f.dot1 = up.get();
    }
  if (!f.dot1) return false;
  f.q = f.dot1->operand(0);
  f.k = f.dot1->operand(1);
  for (const Instruction* x : {f.q, f.k, f.v})
    if (x->opcode() != Opcode::Parameter) return false;
  if (f.q == f.k || f.q == f.v || f.k == f.v) return false;
  const Shape& qs = f.q->shape();
  const int64_t rank = qs.rank();
  if (rank < 2 || f.k->shape().rank() != rank || f.v->shape().rank() != rank) return false;
  const int64_t nb = rank - 2;
  std::vector<int64_t> batch;
  for (int64_t d = 0; d < nb; ++d) batch.push_back(d);
  const auto& d1 = *f.dot1->attrs().dotDims;
  const auto& d2 = *dot2->attrs().dotDims;
  if (d1.lhsBatchDimensions != batch || d1.rhsBatchDimensions != batch ||
      d1.lhsContractingDimensions != std::vector<int64_t>{rank - 1} ||
      d1.rhsContractingDimensions != std::vector<int64_t>{rank - 1})
    return false;
  if (d2.lhsBatchDimensions != batch || d2.rhsBatchDimensions != batch ||
      d2.lhsContractingDimensions != std::vector<int64_t>{rank - 1} ||
      d2.rhsContractingDimensions != std::vector<int64_t>{rank - 2})
    return false;
  for (const Instruction* x : {f.q, f.k, f.v})
    if (!mxuOperandType(x->shape().elementType())) return false;
  for (const Instruction* x : {f.dot1, dot2})
    if (mxuPasses(*x, x->operand(0)->shape().elementType(), x->operand(1)->shape().elementType()) != 1)
      return false;
  if (mxuPasses(*dot2, ElementType::BF16, f.v->shape().elementType()) != 1) return false;
  const std::vector<int64_t>& qd = qs.dimensions();
  const std::vector<int64_t>& kd = f.k->shape().dimensions();
  const std::vector<int64_t>& vd = f.v->shape().dimensions();
  for (int64_t d = 0; d < nb; ++d) {
    if (kd[static_cast<size_t>(d)] != qd[static_cast<size_t>(d)] || vd[static_cast<size_t>(d)] != qd[static_cast<size_t>(d)])
      return false;
    f.heads *= qd[static_cast<size_t>(d)];
  }
  f.s = qd[static_cast<size_t>(nb)];
  f.t = kd[static_cast<size_t>(nb)];
  if (vd[static_cast<size_t>(nb)] != f.t) return false;
  // Head dimension one MXU tile; whole 8-row vregs of queries; key tiles
  // of 128, at most 16 of them folded whole (rows of more keys need the
  // online form, checked below).
  if (qd[static_cast<size_t>(nb + 1)] != 128 || kd[static_cast<size_t>(nb + 1)] != 128 ||
      vd[static_cast<size_t>(nb + 1)] != 128)
    return false;
  if (f.heads < 1 || f.s < 8 || f.s % 8 != 0 || f.t < 128 || f.t % 128 != 0) return false;
  if (!scoreType(f.dot1->shape().elementType()) || !scoreType(dot2->shape().elementType())) return false;
  f.dims = f.dot1->shape().dimensions();

  // The scores' values between the dots: Full ([..., S, T]), Row ([..., S]) or Scalar.
  if (!classifyScores(c, f, rank)) return false;
  auto pc = f.cls.find(p);
  if (pc == f.cls.end() || pc->second != AttentionFusion::Class::Full || f.passes < 1 || f.reduces.size() > 4) return false;
  // Every instruction is used inside (the fusion's only result is dot2's).
  std::set<const Instruction*> used;
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands()) used.insert(o);
  for (const auto& up : c.instructions())
    if (up.get() != dot2 && !used.count(up.get())) return false;
  if (f.t > 2048) {
    if (!onlineForm(f)) return false;
    f.online = true;
    // K and V stream through VMEM in key blocks (two slots of a block each)
    // beside a head's Q and output (two slots each), the block scratch (at
    // most three cached values), the rescale factors of a query block and
    // the running max, sum and output of every query row of the head, so
    // the row length does not bound it. Key blocks: the most tiles up to 16
    // that divide the row and fit; heads with too many query rows are left
    // to other kernels.
    auto bytes = [](int64_t rows, const Instruction* x) {
      return static_cast<int64_t>(alignUp(static_cast<uint64_t>(rows * 128 * typeInfo(x->shape().elementType()).bytes), 512));
    };
    for (int64_t d = 16; d >= 1 && !f.keyBlock; --d) {
      if ((f.t / 128) % d != 0) continue;
      const int64_t kb = 128 * d;
      const int64_t need = 2 * (bytes(f.s, f.q) + bytes(kb, f.k) + bytes(kb, f.v)) + 2 * bytes(f.s, f.dot2) +
                           3 * queryBlockVregs(f.s) * d * 4096 + 4 * (f.s / 8) * 4096;
      if (static_cast<uint64_t>(need) <= vmemBudget()) f.keyBlock = kb;
    }
    if (!f.keyBlock) return false;
  }
  if (out) *out = std::move(f);
  return true;
}

// The attention kernel's phases: the plan (scratch, VMEM, hoisted values,
// registers), the head loop, and per block of query rows the passes over
// the key tiles and the second product.
class AttentionEmitter : KernelPhases {
 public:
  AttentionEmitter(Lowerer& l, const Instruction& in, const AttentionFusion& f) : KernelPhases(l, in), f(f) {}
  bool run();

 private:
  using Class = AttentionFusion::Class;
  enum State { kMax = 0, kSum = 1, kOut = 2, kScale = 3 };

  VReg vload(ElementType t, const std::string& addr) { return l_.vload(t, addr); }
  void vstore(VReg v, ElementType t, const std::string& addr) { l_.vstore(v, t, addr); }
  VReg normalize(VReg r) { return l_.normalize(r); }
  std::optional<VReg> lowerOp(const Instruction& x, const std::vector<VReg>& ops) { return l_.lowerOp(x, ops); }
  bool lowerComputation(const Computation& c, const std::vector<VReg>& ps, std::vector<VReg>& out) {
    return l_.lowerComputation(c, ps, out);
  }
  int paramBuf(const Instruction* p) { return leaves_[in.operand(p->attrs().parameterNumber)][0]; }

  void setup();
  void planScratch();
  bool planVmem();
  bool hoist();
  bool allocateRegisters();
  void loadHead(int headReg, int slotReg);
  void loadKeys(int blockReg, int slotReg);
  std::string scratchAddr(const Instruction* x, int64_t i, int64_t j) const;
  std::string stateAddr(State k, int64_t i) const;
  void freeExcept(std::initializer_list<VReg> vs, std::initializer_list<VReg> keep);
  std::optional<VReg> evalFull(const Instruction* x, int64_t i, int64_t j, int after,
                               std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned);
  void freeOwned(std::vector<VReg>& owned, const std::set<int>& keep);
  void storeCached(int pass, int64_t i, int64_t j, const std::map<const Instruction*, VReg>& val);
  bool fold(const Instruction* red, int64_t i, size_t q, int64_t j, VReg x);
  bool foldAcrossLanes(const std::vector<const Instruction*>& reds);
  bool onlineMax(std::map<const Instruction*, VReg>& rvals, int64_t i);
  void onlineSum(std::map<const Instruction*, VReg>& rvals, int64_t i);
  bool finishLevel(int lv);
  std::string kAddr(int64_t j, int64_t blk) const;
  std::string vAddr(int64_t j, int64_t blk) const;
  void pushBlock(bool keys, int64_t j, int64_t blk, int u);
  bool runGroups(bool keys, const std::function<bool(int64_t, int64_t, int)>& matmul,
                 const std::function<bool(int64_t, int64_t, int)>& pop);
  bool foldTile(const std::vector<const Instruction*>& reds, int64_t i, int64_t j, int after,
                std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned, int pass);
  bool scoresPass();
  void dropDeadRowValues();
  bool productPass();
  bool body();
  bool exactHead();
  void onlineInit();
  bool onlineHead();
  bool emitLargestBlock();
  void headLoop();

  const AttentionFusion& f;
  int qBuf = 0, kBuf = 0, vBuf = 0, oBuf = 0;
  ElementType qT{}, kT{}, vT{}, oT{}, sT{};
  int64_t eq = 0, ek = 0, ev = 0, eo = 0, nS = 0, nT = 0, nH = 0, nt = 0, nBlocks = 0;
  std::vector<std::vector<const Instruction*>> byLevel;
  std::map<const Instruction*, int> cacheLevel;  // value -> the pass that stores it
  std::map<const Instruction*, int> cacheIndex;
  int64_t qBytes = 0, kBytes = 0, vBytes = 0, oBytes = 0, qOff = 0, kOff = 0, vOff = 0, inSlot = 0, outSlot = 0,
          outBase = 0, scratchBase = 0, maxRv = 0, stateBase = 0;
  uint64_t vmemUsed = 0;
  std::map<const Instruction*, VReg> hoisted;
  std::set<int> kept;
  VReg one;
  int rH = -1, rSlot = -1, rOther = -1, rA = -1, rV = -1, rSem = -1, rQ = -1, rKV = -1, rO = -1, rCnt = -1, rZ = -1;
  int rKb = -1, rVb = -1, rBlk = -1, rSt = -1, rG = -1, rKs = -1, rKo = -1;
  int64_t rv = 0;
  int nm = 1;
  std::string lBlock, lHead;
  // The block's state: row values of its row vregs (lanes broadcast along
  // each sublane) and the reductions' accumulators.
  std::vector<std::map<const Instruction*, VReg>> rowVal;
  std::vector<std::vector<VReg>> acc;
};

void AttentionEmitter::setup() {
  qBuf = paramBuf(f.q);
  kBuf = paramBuf(f.k);
  vBuf = paramBuf(f.v);
  oBuf = leaves_[&in][0];
  qT = bufs_[qBuf].type, kT = bufs_[kBuf].type, vT = bufs_[vBuf].type;
  oT = f.dot2->shape().elementType(), sT = f.dot1->shape().elementType();
  eq = typeInfo(qT).bytes, ek = typeInfo(kT).bytes, ev = typeInfo(vT).bytes, eo = typeInfo(oT).bytes;
  nS = f.s, nT = f.t, nH = f.heads;
  // Key tiles per block: the whole row, or (online) one key block of a
  // run-time loop over the row's blocks.
  nt = (f.online ? f.keyBlock : nT) / 128;
  nBlocks = f.online ? nT / f.keyBlock : 1;
}

// Reductions by level, and the values kept in the block's scratch: every
// reduction's operand, and the scores themselves when a later pass or the
// second product would otherwise recompute them from the MXU.
void AttentionEmitter::planScratch() {
  byLevel.assign(static_cast<size_t>(f.passes) + 1, {});
  for (const Instruction* r : f.reduces) byLevel[static_cast<size_t>(f.level.at(r))].push_back(r);
  for (const Instruction* r : f.reduces) {
    const Instruction* x = r->operand(0);
    int lv = f.level.at(r);
    if (!cacheLevel.count(x) || cacheLevel[x] > lv) cacheLevel[x] = lv;
  }
  // Whether evaluating x after pass `after` reaches the dot past the values stored by then.
  std::function<bool(const Instruction*, int)> reachesDot = [&](const Instruction* x, int after) -> bool {
    if (x == f.dot1) return true;
    auto it = cacheLevel.find(x);
    if (it != cacheLevel.end() && it->second <= after) return false;
    auto c = f.cls.find(x);
    if (c == f.cls.end() || c->second != Class::Full) return false;
    for (const Instruction* o : x->operands())
      if (reachesDot(o, after)) return true;
    return false;
  };
  bool keepScores = reachesDot(f.dot2->operand(0), f.passes);
  for (int lv = 2; lv <= f.passes; ++lv)
    for (const Instruction* r : byLevel[static_cast<size_t>(lv)]) keepScores |= reachesDot(r->operand(0), lv - 1);
  if (keepScores && !cacheLevel.count(f.dot1)) cacheLevel[f.dot1] = 1;
  // Deterministic: indices by instruction order, not pointer order.
  int idx = 0;
  for (const auto& up : f.comp->instructions())
    if (cacheLevel.count(up.get())) cacheIndex[up.get()] = idx++;
}

// VMEM: two slots of Q, K, V of one head (online: Q of one head, K and V
// of one key block), two output slots, then the scratch.
bool AttentionEmitter::planVmem() {
  const int64_t kvRows = f.online ? f.keyBlock : nT;
  qBytes = nS * 128 * eq, kBytes = kvRows * 128 * ek, vBytes = kvRows * 128 * ev, oBytes = nS * 128 * eo;
  qOff = 0;
  kOff = static_cast<int64_t>(alignUp(static_cast<uint64_t>(qBytes), 512));
  vOff = kOff + static_cast<int64_t>(alignUp(static_cast<uint64_t>(kBytes), 512));
  inSlot = vOff + static_cast<int64_t>(alignUp(static_cast<uint64_t>(vBytes), 512));
  outSlot = static_cast<int64_t>(alignUp(static_cast<uint64_t>(oBytes), 512));
  outBase = 2 * inSlot, scratchBase = outBase + 2 * outSlot;
  // Query rows per block: up to 128 (16 vregs), a divisor of S; fewer when
  // the registers do not hold the block (tried below).
  maxRv = queryBlockVregs(nS);
  const int64_t nCache = static_cast<int64_t>(cacheIndex.size());
  // Online: after the scratch, per row vreg of the head the running max,
  // sum and output and the block's rescale factor (f32), addressed from one
  // register so the scheduler sees them disjoint.
  stateBase = scratchBase + nCache * maxRv * nt * 4096;
  vmemUsed = static_cast<uint64_t>(stateBase + (f.online ? 4 * (nS / 8) * 4096 : 0));
  if (vmemUsed > l_.vmemBudget()) return l_.fail(in, "llo-gen: attention blocks do not fit VMEM");
  rv = maxRv;
  return true;
}

// Hoisted scalars as splats.
bool AttentionEmitter::hoist() {
  if (!l_.hoistScalars(in, f.scalars, hoisted)) return false;
  // Row values of scalars only (level 0) are splats too.
  for (const Instruction* i : f.rowValues) {
    if (f.level.at(i) != 0) continue;
    std::optional<VReg> v = RowValueEvaluator::lowerRowValue(l_, *i, hoisted, hoisted, nullptr);
    if (!v) return false;
    hoisted[i] = *v;
  }
  for (auto& [i, v] : hoisted) kept.insert(v.r);
  // Online: the sum's row value as the product sees it (the output is divided at the end).
  if (f.online) {
    one = l_.vconst(ElementType::F32, 0x3f800000u);
    kept.insert(one.r);
  }
  return true;
}

bool AttentionEmitter::allocateRegisters() {
  rH = sreg(), rSlot = sreg(), rOther = sreg(), rA = sreg(), rV = sreg(), rSem = sreg(), rQ = sreg(),
  rKV = sreg(), rO = sreg(), rCnt = sreg(), rZ = sreg();
  // Online: the key block's K and V rows, the blocks left, the query
  // block's running state, the next key block to load (counted over every
  // head's blocks: K is [heads, T, 128], so block g of the flattened keys
  // starts at g * kBytes), the slot of this block and a spare.
  if (f.online) {
    rKb = sreg(), rVb = sreg(), rBlk = sreg(), rSt = sreg(), rG = sreg(), rKs = sreg(), rKo = sreg();
  }
  return !failed_;
}

// Semaphores: sem1/sem2 the loads into slot 0/1, sem3/sem4 its write-back,
// sem5/sem6 (online) the K and V block loads into slot 0/1.
void AttentionEmitter::loadHead(int headReg, int slotReg) {
  e_.op("sadd {}, {}, 1", S(rSem), S(slotReg));
  const int bufsIn[3] = {qBuf, kBuf, vBuf};
  const int64_t bytes[3] = {qBytes, kBytes, vBytes}, offs[3] = {qOff, kOff, vOff};
  for (int j = 0; j < (f.online ? 1 : 3); ++j) {
    e_.op("smul {}, {}, {}", S(rA), S(headReg), bytes[j]);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(bufsIn[j]));
    e_.op("smul {}, {}, {}", S(rV), S(slotReg), inSlot);
    e_.op("sadd {}, {}, {}", S(rV), S(rV), offs[j]);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", bufsIn[j]), e_.desc(static_cast<uint64_t>(bytes[j]), {}),
          S(rV), l_.memRef(bufsIn[j], S(rA)), S(rSem));
  }
}

// Online: key block `blockReg` (of the flattened keys) into the K and V places of slot `slotReg`.
void AttentionEmitter::loadKeys(int blockReg, int slotReg) {
  e_.op("sadd {}, {}, 5", S(rSem), S(slotReg));
  const int bufsIn[2] = {kBuf, vBuf};
  const int64_t bytes[2] = {kBytes, vBytes}, offs[2] = {kOff, vOff};
  for (int j = 0; j < 2; ++j) {
    e_.op("smul {}, {}, {}", S(rA), S(blockReg), bytes[j]);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(bufsIn[j]));
    e_.op("smul {}, {}, {}", S(rV), S(slotReg), inSlot);
    e_.op("sadd {}, {}, {}", S(rV), S(rV), offs[j]);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", bufsIn[j]), e_.desc(static_cast<uint64_t>(bytes[j]), {}),
          S(rV), l_.memRef(bufsIn[j], S(rA)), S(rSem));
  }
}

// The block body: rQ points at the block's first query row, rKV at the
// head's slot, rO at the block's first output row, rZ is 0 (the scratch's
// base); online, rKb and rVb at the key block's K and V and rSt at the
// query block's running state.
std::string AttentionEmitter::scratchAddr(const Instruction* x, int64_t i, int64_t j) const {
  return fmt::format("{} + {}", S(rZ), scratchBase + ((cacheIndex.at(x) * maxRv + i) * nt + j) * 4096);
}

std::string AttentionEmitter::stateAddr(State k, int64_t i) const {
  return fmt::format("{} + {}", S(rSt), (static_cast<int64_t>(k) * rv + i) * 4096);
}

// Frees the registers of vs not in keep (once each).
void AttentionEmitter::freeExcept(std::initializer_list<VReg> vs, std::initializer_list<VReg> keep) {
  std::set<int> done;
  for (VReg k : keep) done.insert(k.r);
  for (VReg v : vs)
    if (!kept.count(v.r) && done.insert(v.r).second) vfree(v);
}

// The value of Full instruction x at row vreg i, key tile j; `val` holds
// the values computed for this (i, j) so far.
std::optional<VReg> AttentionEmitter::evalFull(const Instruction* x, int64_t i, int64_t j, int after,
                                               std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned) {
  if (auto it = val.find(x); it != val.end()) return it->second;
  if (auto it = hoisted.find(x); it != hoisted.end()) return it->second;
  if (auto it = rowVal[static_cast<size_t>(i)].find(x); it != rowVal[static_cast<size_t>(i)].end())
    return it->second;
  std::optional<VReg> v;
  auto cl = cacheLevel.find(x);
  if (cl != cacheLevel.end() && cl->second <= after) {
    v = vload(ElementType::F32, scratchAddr(x, i, j));
    v->t = x->shape().elementType();
    owned.push_back(*v);
  } else if (x == f.dot1) {
    l_.fail(in, "llo-gen: internal error: attention scores needed after their pass");
    return std::nullopt;
  } else if (x->opcode() == Opcode::Broadcast) {
    v = evalFull(x->operand(0), i, j, after, val, owned);
  } else {
    std::vector<VReg> ops;
    for (const Instruction* o : x->operands()) {
      auto y = evalFull(o, i, j, after, val, owned);
      if (!y) return std::nullopt;
      ops.push_back(*y);
    }
    v = lowerOp(*x, ops);
    if (v) owned.push_back(*v);
  }
  if (!v) return std::nullopt;
  val[x] = *v;
  return v;
}

void AttentionEmitter::freeOwned(std::vector<VReg>& owned, const std::set<int>& keep) {
  std::set<int> freed;
  for (VReg v : owned)
    if (!keep.count(v.r) && !kept.count(v.r) && freed.insert(v.r).second) vfree(v);
  owned.clear();
}

// Stores the values of this pass's cached instructions present in `val`.
void AttentionEmitter::storeCached(int pass, int64_t i, int64_t j, const std::map<const Instruction*, VReg>& val) {
  for (auto& [x, lv] : cacheLevel)
    if (lv == pass) {
      auto it = val.find(x);
      if (it != val.end()) e_.op("vst {}, [{}]", V(it->second), scratchAddr(x, i, j));
    }
}

// Folds x into the accumulator of (i, q); the first key tile starts it.
bool AttentionEmitter::fold(const Instruction* red, int64_t i, size_t q, int64_t j, VReg x) {
  VReg& a = acc[static_cast<size_t>(i)][q];
  if (j == 0) {
    a = l_.vcopy(x, x.t);
    return true;
  }
  std::vector<VReg> res;
  if (!lowerComputation(*red->toApply(), {a, x}, res)) return false;
  if (res[0].r != a.r) vfree(a);
  a = res[0].r == x.r ? l_.vcopy(x, x.t) : res[0];
  return true;
}

bool AttentionEmitter::foldAcrossLanes(const std::vector<const Instruction*>& reds) {
  for (int step : {64, 32, 16, 8, 4, 2, 1})
    for (int64_t i = 0; i < rv; ++i)
      for (size_t q = 0; q < reds.size(); ++q) {
        VReg& a = acc[static_cast<size_t>(i)][q];
        VReg t = valloc(a.t);
        e_.op("vrot.lane {}, {}, {}", V(t), V(a), step);
        std::vector<VReg> res;
        if (!lowerComputation(*reds[q]->toApply(), {a, t}, res)) return false;
        vfree(t);
        if (res[0].r != a.r) vfree(a);
        a = res[0];
      }
  return true;
}

// Online, level 1: the running max; the factor exp(m_old - m_new)
// rescales what earlier key blocks summed.
bool AttentionEmitter::onlineMax(std::map<const Instruction*, VReg>& rvals, int64_t i) {
  VReg mb = rvals.at(f.maxReduce), mo = vload(ElementType::F32, stateAddr(kMax, i));
  std::vector<VReg> res;
  if (!lowerComputation(*f.maxReduce->toApply(), {mo, mb}, res)) return false;
  VReg mn = res[0];
  auto d = lowerOp(*f.shift, {mo, mn});
  if (!d) return false;
  auto alpha = lowerOp(*f.exponential, {*d});
  if (!alpha) return false;
  vstore(*alpha, ElementType::F32, stateAddr(kScale, i));
  vstore(mn, ElementType::F32, stateAddr(kMax, i));
  freeExcept({mb, mo, *d, *alpha}, {mn});
  rvals[f.maxReduce] = mn;
  return true;
}

// Online, level 2: sum = sum * factor + this block's sum; the product reads e / 1.
void AttentionEmitter::onlineSum(std::map<const Instruction*, VReg>& rvals, int64_t i) {
  VReg sb = rvals.at(f.sumReduce), so = vload(ElementType::F32, stateAddr(kSum, i)),
       al = vload(ElementType::F32, stateAddr(kScale, i));
  e_.op("vmul.f32 {}, {}, {}", V(so), V(so), V(al));
  e_.op("vadd.f32 {}, {}, {}", V(so), V(so), V(sb));
  vstore(so, ElementType::F32, stateAddr(kSum, i));
  freeExcept({sb, so, al}, {});
  rvals[f.sumReduce] = one;
}

// Across lanes, then the init: the level's Row values of every row vreg.
bool AttentionEmitter::finishLevel(int lv) {
  const auto& reds = byLevel[static_cast<size_t>(lv)];
  if (!foldAcrossLanes(reds)) return false;
  for (int64_t i = 0; i < rv; ++i) {
    auto& rvals = rowVal[static_cast<size_t>(i)];
    for (size_t q = 0; q < reds.size(); ++q) {
      VReg& a = acc[static_cast<size_t>(i)][q];
      std::vector<VReg> res;
      if (!lowerComputation(*reds[q]->toApply(), {hoisted.at(reds[q]->operand(1)), a}, res)) return false;
      if (res[0].r != a.r) vfree(a);
      rvals[reds[q]] = res[0];
    }
    if (f.online && lv == 1 && !onlineMax(rvals, i)) return false;
    if (f.online && lv == 2) onlineSum(rvals, i);
    for (const Instruction* x : f.rowValues) {
      if (f.level.at(x) != lv || x->opcode() == Opcode::Reduce) continue;
      std::optional<VReg> v;
      if (x->opcode() == Opcode::Broadcast) {
        v = hoisted.at(x->operand(0));
      } else {
        std::vector<VReg> ops;
        for (const Instruction* o : x->operands()) {
          if (!rvals.count(o) && !hoisted.count(o)) return l_.fail(in, "llo-gen: internal error: attention row value");
          ops.push_back(rvals.count(o) ? rvals.at(o) : hoisted.at(o));
        }
        v = lowerOp(*x, ops);
      }
      if (!v) return false;
      rvals[x] = *v;
    }
  }
  return true;
}

std::string AttentionEmitter::kAddr(int64_t j, int64_t blk) const {
  if (f.online) return fmt::format("{} + {}", S(rKb), (128 * j + 8 * blk) * 128 * ek);
  return fmt::format("{} + {}", S(rKV), kOff + (128 * j + 8 * blk) * 128 * ek);
}

std::string AttentionEmitter::vAddr(int64_t j, int64_t blk) const {
  if (f.online) return fmt::format("{} + {}", S(rVb), (128 * j + 8 * blk) * 128 * ev);
  return fmt::format("{} + {}", S(rKV), vOff + (128 * j + 8 * blk) * 128 * ev);
}

// Row block `blk` (8 rows of 16) of tile j of K (transposed) or V, staged as MXU u's weights.
void AttentionEmitter::pushBlock(bool keys, int64_t j, int64_t blk, int u) {
  VReg w = vload(keys ? kT : vT, keys ? kAddr(j, blk) : vAddr(j, blk));
  e_.op("mxu.{} mxu{}, {}", keys ? "wpusht.bf16" : "wpush.bf16", u, V(w));
  vfree(w);
}

// The key tiles in groups of one per MXU, software-pipelined in each
// MXU's program order: group g + 1's weights are staged while group g's
// rows multiply, and group g's results are popped while group g + 1's
// rows multiply (the result FIFOs hold both groups' rows).
// matmul(j, i, u) issues row vreg i against tile j on MXU u;
// pop(j, i, u) pops and consumes it.
bool AttentionEmitter::runGroups(bool keys, const std::function<bool(int64_t, int64_t, int)>& matmul,
                                 const std::function<bool(int64_t, int64_t, int)>& pop) {
  const int64_t groups = (nt + nm - 1) / nm;
  auto width = [&](int64_t g) { return std::min<int64_t>(nm, nt - g * nm); };
  for (int u = 0; u < width(0); ++u) {
    for (int64_t blk = 0; blk < 16; ++blk) pushBlock(keys, u, blk, u);
    e_.op("mxu.wlatch mxu{}", u);
  }
  const int64_t perRow = (16 + rv - 1) / rv;  // next group's weight blocks staged per row
  for (int64_t g = 0; g <= groups; ++g) {
    const bool more = g + 1 < groups;
    for (int64_t i = 0; i < rv; ++i) {
      if (g < groups)
        for (int u = 0; u < width(g); ++u)
          if (!matmul(g * nm + u, i, u)) return false;
      if (more)
        for (int u = 0; u < width(g + 1); ++u)
          for (int64_t blk = i * perRow; blk < std::min<int64_t>(16, (i + 1) * perRow); ++blk)
            pushBlock(keys, (g + 1) * nm + u, blk, u);
      if (g > 0)
        for (int u = 0; u < width(g - 1); ++u)
          if (!pop((g - 1) * nm + u, i, u)) return false;
    }
    if (more)
      for (int u = 0; u < width(g + 1); ++u) e_.op("mxu.wlatch mxu{}", u);
  }
  return true;
}

// The operands of reds at (i, j) evaluated after pass `after`, this pass's
// cached values stored, and each folded into its accumulator.
bool AttentionEmitter::foldTile(const std::vector<const Instruction*>& reds, int64_t i, int64_t j, int after,
                                std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned, int pass) {
  std::vector<VReg> xs;
  for (const Instruction* red : reds) {
    auto x = evalFull(red->operand(0), i, j, after, val, owned);
    if (!x) return false;
    xs.push_back(*x);
  }
  storeCached(pass, i, j, val);
  for (size_t q = 0; q < reds.size(); ++q)
    if (!fold(reds[q], i, q, j, xs[q])) return false;
  std::set<int> keep;
  for (size_t q = 0; q < reds.size(); ++q) keep.insert(acc[static_cast<size_t>(i)][q].r);
  freeOwned(owned, keep);
  return true;
}

// Scores, tile group by tile group (one key tile per MXU), and the first
// level's folds; then the later levels, a pass over the scratch each.
bool AttentionEmitter::scoresPass() {
  std::vector<VReg> qv;
  for (int64_t i = 0; i < rv; ++i) qv.push_back(vload(qT, fmt::format("{} + {}", S(rQ), i * 1024 * eq)));
  const auto& first = byLevel[1];
  bool okA = runGroups(
      true,
      [&](int64_t, int64_t i, int u) {
        e_.op("mxu.matmul.bf16 mxu{}, {}", u, V(qv[static_cast<size_t>(i)]));
        return true;
      },
      [&](int64_t j, int64_t i, int u) -> bool {
        VReg sc = valloc(sT);
        e_.op("mxu.pop {}, mxu{}", V(sc), u);
        normalize(sc);
        std::map<const Instruction*, VReg> val{{f.dot1, sc}};
        std::vector<VReg> owned{sc};
        return foldTile(first, i, j, 0, val, owned, 1);
      });
  if (!okA) return false;
  for (VReg v : qv) vfree(v);
  if (!finishLevel(1)) return false;
  for (int lv = 2; lv <= f.passes; ++lv) {
    const auto& reds = byLevel[static_cast<size_t>(lv)];
    for (int64_t j = 0; j < nt; ++j)
      for (int64_t i = 0; i < rv; ++i) {
        std::map<const Instruction*, VReg> val;
        std::vector<VReg> owned;
        if (!foldTile(reds, i, j, lv - 1, val, owned, lv)) return false;
      }
    if (!finishLevel(lv)) return false;
  }
  return true;
}

// Row values the second product does not read are dead now.
void AttentionEmitter::dropDeadRowValues() {
  std::set<const Instruction*> live;
  std::function<void(const Instruction*)> mark = [&](const Instruction* x) {
    auto cl = cacheLevel.find(x);
    if (cl != cacheLevel.end() || !live.insert(x).second) return;
    for (const Instruction* o : x->operands()) mark(o);
  };
  mark(f.dot2->operand(0));
  for (auto& rvals : rowVal) {
    std::set<int> keepRegs, freed;
    for (auto& [x, v] : rvals)
      if (live.count(x)) keepRegs.insert(v.r);
    for (auto it = rvals.begin(); it != rvals.end();) {
      if (live.count(it->first)) {
        ++it;
        continue;
      }
      if (!kept.count(it->second.r) && !keepRegs.count(it->second.r) && freed.insert(it->second.r).second)
        vfree(it->second);
      it = rvals.erase(it);
    }
  }
}

// P x V, tile group by tile group; the sums stay in registers.
bool AttentionEmitter::productPass() {
  std::vector<VReg> o(static_cast<size_t>(rv));
  bool okF = runGroups(
      false,
      [&](int64_t j, int64_t i, int u) -> bool {
        std::map<const Instruction*, VReg> val;
        std::vector<VReg> owned;
        auto pv = evalFull(f.dot2->operand(0), i, j, f.passes, val, owned);
        if (!pv) return false;
        e_.op("mxu.matmul.bf16 mxu{}, {}", u, V(*pv));
        freeOwned(owned, {});
        return true;
      },
      [&](int64_t j, int64_t i, int u) -> bool {
        VReg& a = o[static_cast<size_t>(i)];
        if (j == 0) {
          a = valloc(ElementType::F32);
          e_.op("mxu.pop {}, mxu{}", V(a), u);
        } else {
          VReg t = valloc(ElementType::F32);
          e_.op("mxu.pop {}, mxu{}", V(t), u);
          e_.op("vadd.f32 {}, {}, {}", V(a), V(a), V(t));
          vfree(t);
        }
        return true;
      });
  if (!okF) return false;
  for (int64_t i = 0; i < rv; ++i) {
    VReg& a = o[static_cast<size_t>(i)];
    if (f.online) {
      // out = out * factor + this block's product.
      VReg oo = vload(ElementType::F32, stateAddr(kOut, i)), al = vload(ElementType::F32, stateAddr(kScale, i));
      e_.op("vmul.f32 {}, {}, {}", V(oo), V(oo), V(al));
      e_.op("vadd.f32 {}, {}, {}", V(oo), V(oo), V(a));
      vstore(oo, ElementType::F32, stateAddr(kOut, i));
      freeExcept({a, oo, al}, {});
      continue;
    }
    a.t = oT;
    vstore(normalize(a), oT, fmt::format("{} + {}", S(rO), i * 1024 * eo));
    vfree(a);
  }
  return true;
}

bool AttentionEmitter::body() {
  rowVal.assign(static_cast<size_t>(rv), {});
  acc.assign(static_cast<size_t>(rv), std::vector<VReg>(4));
  if (!scoresPass()) return false;
  dropDeadRowValues();
  if (!productPass()) return false;
  std::set<int> freed;
  for (auto& rvals : rowVal)
    for (auto& [x, v] : rvals)
      if (!kept.count(v.r) && freed.insert(v.r).second) vfree(v);
  return true;
}

// One head: blocks of rv row vregs in a run-time loop (rQ, rO advance).
bool AttentionEmitter::exactHead() {
  e_.op("smov {}, {}", S(rCnt), nS / 8 / rv);
  e_.label(lBlock);
  if (!body()) return false;
  e_.op("sadd {}, {}, {}", S(rQ), S(rQ), rv * 1024 * eq);
  e_.op("sadd {}, {}, {}", S(rO), S(rO), rv * 1024 * eo);
  e_.op("loop {}, {}", S(rCnt), lBlock);
  return true;
}

// Online: every query block's state starts at (init, 0, 0).
void AttentionEmitter::onlineInit() {
  const int64_t nQb = nS / 8 / rv, stStep = 4 * rv * 4096;
  VReg zero = l_.vconst(ElementType::F32, 0);
  std::string lInit = e_.newLabel("ainit");
  e_.op("sadd {}, {}, {}", S(rSt), S(rZ), stateBase);
  e_.op("smov {}, {}", S(rCnt), nQb);
  e_.label(lInit);
  for (int64_t i = 0; i < rv; ++i) {
    vstore(hoisted.at(f.maxReduce->operand(1)), ElementType::F32, stateAddr(kMax, i));
    vstore(zero, ElementType::F32, stateAddr(kSum, i));
    vstore(zero, ElementType::F32, stateAddr(kOut, i));
  }
  e_.op("sadd {}, {}, {}", S(rSt), S(rSt), stStep);
  e_.op("loop {}, {}", S(rCnt), lInit);
  vfree(zero);
}

// Online, one head: after the state's init, a run-time loop over the key
// blocks waits for this block's K and V (sem5 + rKs), issues the next
// block's (of this head or the next) into the other slot, and runs the body
// over every query block of the head; then each output row is the summed
// product divided by the summed exponentials.
bool AttentionEmitter::onlineHead() {
  const int64_t nQb = nS / 8 / rv, stStep = 4 * rv * 4096;
  onlineInit();
  std::string lKeys = e_.newLabel("akeys"), lQb = e_.newLabel("aqblock"), lNoNext = e_.newLabel("anonext");
  e_.op("smov {}, {}", S(rBlk), nBlocks);
  e_.label(lKeys);
  e_.op("sadd {}, {}, 5", S(rSem), S(rKs));
  e_.op("sem.wait sem[{}], 2", S(rSem));
  e_.op("br.ge {}, {}, {}", S(rG), nH * nBlocks, lNoNext);
  e_.op("sxor {}, {}, 1", S(rKo), S(rKs));
  loadKeys(rG, rKo);
  e_.op("sadd {}, {}, 1", S(rG), S(rG));
  e_.label(lNoNext);
  e_.op("smul {}, {}, {}", S(rKb), S(rKs), inSlot);
  e_.op("sadd {}, {}, {}", S(rVb), S(rKb), vOff);
  e_.op("sadd {}, {}, {}", S(rKb), S(rKb), kOff);
  e_.op("sadd {}, {}, {}", S(rQ), S(rKV), qOff);
  e_.op("sadd {}, {}, {}", S(rSt), S(rZ), stateBase);
  e_.op("smov {}, {}", S(rCnt), nQb);
  e_.label(lQb);
  if (!body()) return false;
  e_.op("sadd {}, {}, {}", S(rQ), S(rQ), rv * 1024 * eq);
  e_.op("sadd {}, {}, {}", S(rSt), S(rSt), stStep);
  e_.op("loop {}, {}", S(rCnt), lQb);
  e_.op("sxor {}, {}, 1", S(rKs), S(rKs));
  e_.op("loop {}, {}", S(rBlk), lKeys);
  std::string lFin = e_.newLabel("afinal");
  e_.op("sadd {}, {}, {}", S(rSt), S(rZ), stateBase);
  e_.op("smov {}, {}", S(rCnt), nQb);
  e_.label(lFin);
  for (int64_t i = 0; i < rv; ++i) {
    VReg oo = vload(ElementType::F32, stateAddr(kOut, i)), su = vload(ElementType::F32, stateAddr(kSum, i));
    VReg q = valloc(ElementType::F32);
    e_.op("vdiv.f32 {}, {}, {}", V(q), V(oo), V(su));
    vfree(oo);
    vfree(su);
    q.t = oT;
    vstore(normalize(q), oT, fmt::format("{} + {}", S(rO), i * 1024 * eo));
    vfree(q);
  }
  e_.op("sadd {}, {}, {}", S(rO), S(rO), rv * 1024 * eo);
  e_.op("sadd {}, {}, {}", S(rSt), S(rSt), stStep);
  e_.op("loop {}, {}", S(rCnt), lFin);
  return !failed_;
}

// The head's blocks with the largest block whose body fits the registers.
bool AttentionEmitter::emitLargestBlock() {
  const auto mark = e_.mark();
  const auto vSaved = vregs_.save(), mSaved = masks_.save(), sSaved = sregs_.save();
  for (int64_t cand = maxRv;; --cand) {
    if ((nS / 8) % cand != 0) continue;
    rv = cand;
    l_.softVregs_ = cand > 1;
    l_.vregsExhausted_ = false;
    bool ok = f.online ? onlineHead() : exactHead();
    l_.softVregs_ = false;
    if (!l_.vregsExhausted_) return ok;
    e_.cut(mark);
    vregs_.restore(vSaved);
    masks_.restore(mSaved);
    sregs_.restore(sSaved);
  }
}

// The head loop's start: head h + 1 loads while head h is computed; head
// h's output goes out while h + 1 is.
void AttentionEmitter::headLoop() {
  e_.op("smov {}, 0", S(rZ));
  e_.op("smov {}, 0", S(rH));
  e_.op("smov {}, 0", S(rSlot));
  loadHead(rH, rSlot);
  if (f.online) {
    // The first key block into slot 0; rG counts the blocks issued.
    e_.op("smov {}, 0", S(rKs));
    e_.op("smov {}, 0", S(rG));
    loadKeys(rG, rKs);
    e_.op("smov {}, 1", S(rG));
  }
  e_.label(lHead);
  e_.op("sxor {}, {}, 1", S(rOther), S(rSlot));
  if (nH > 1) {
    std::string skip = e_.newLabel("anoprefetch");
    e_.op("sadd {}, {}, 1", S(rCnt), S(rH));
    e_.op("br.eq {}, {}, {}", S(rCnt), nH, skip);
    loadHead(rCnt, rOther);
    e_.label(skip);
  }
  e_.op("sadd {}, {}, 1", S(rSem), S(rSlot));
  e_.op("sem.wait sem[{}], {}", S(rSem), f.online ? 1 : 3);
  if (nH > 2) {
    std::string skip = e_.newLabel("aslotfree");
    e_.op("br.lt {}, 2, {}", S(rH), skip);
    e_.op("sadd {}, {}, 3", S(rSem), S(rSlot));
    e_.op("sem.wait sem[{}]", S(rSem));
    e_.label(skip);
  }
  e_.op("smul {}, {}, {}", S(rKV), S(rSlot), inSlot);
  e_.op("sadd {}, {}, {}", S(rQ), S(rKV), qOff);
  e_.op("smul {}, {}, {}", S(rO), S(rSlot), outSlot);
  e_.op("sadd {}, {}, {}", S(rO), S(rO), outBase);
}

bool AttentionEmitter::run() {
  l_.beginKernel(in, "fusion-attention");
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  RotatingRegs rotating(vregs_);
  setup();
  planScratch();
  if (!planVmem() || !hoist() || !allocateRegisters()) return false;
  nm = std::max(1, std::min<int>(target_.mxu.count, 4));
  lBlock = e_.newLabel("ablock");
  lHead = e_.newLabel("ahead");
  headLoop();
  if (!emitLargestBlock()) return false;
  // The head's output.
  e_.op("smul {}, {}, {}", S(rA), S(rH), oBytes);
  e_.op("sadd {}, {}, {}", S(rA), S(rA), base(oBuf));
  e_.op("smul {}, {}, {}", S(rV), S(rSlot), outSlot);
  e_.op("sadd {}, {}, {}", S(rV), S(rV), outBase);
  e_.op("sadd {}, {}, 3", S(rSem), S(rSlot));
  e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", oBuf), e_.desc(static_cast<uint64_t>(oBytes), {}),
        l_.memRef(oBuf, S(rA)), S(rV), S(rSem));
  e_.op("smov {}, {}", S(rSlot), S(rOther));
  e_.op("sadd {}, {}, 1", S(rH), S(rH));
  e_.op("br.lt {}, {}, {}", S(rH), nH, lHead);
  e_.op("sem.wait sem{}", 3 + ((nH - 1) & 1));
  if (nH > 1) e_.op("sem.wait sem{}", 3 + ((nH - 2) & 1));

  const double flops = 4.0 * static_cast<double>(nH) * static_cast<double>(nS) * static_cast<double>(nT) * 128.0 +
                       static_cast<double>(nH * nS * nT) * static_cast<double>(f.cls.size());
  l_.endKernel(flops, bufs_[qBuf].bytes + bufs_[kBuf].bytes + bufs_[vBuf].bytes + bufs_[oBuf].bytes, vmemUsed);
  return !failed_;
}

bool Lowerer::lowerAttentionFusion(const Instruction& in, const AttentionFusion& f) {
  return AttentionEmitter(*this, in, f).run();
}

}  // namespace tpu::codegen
