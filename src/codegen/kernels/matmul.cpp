// The matmul kernel kind: batched [m, k] x [k, n] products tiled over the
// MXUs (emitMatmul), the dot geometry and MXU pass count, and the lowering
// of an unfused dot onto it. Output fusions (kernels/matmul_epilogue.cpp)
// and convolutions take the same kernel.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

// ============================================================== operands read in place

namespace {

// One tile of T elements along a group of a MatmulView, as DMA dims: the
// digits inside the tile (whole minor ones, then a part of the outermost),
// each with its source stride and its VMEM stride dst(inner, count) (inner:
// the tile elements below the digit); `step`: the source bytes from one tile
// to the next.
struct GroupBox {
  std::vector<Emitter::Dim> dims;
  int64_t step = 0;
};
using DstStride = std::function<std::optional<int64_t>(int64_t inner, int64_t count)>;

std::optional<GroupBox> groupBox(const std::vector<MatmulView::Digit>& ds, int64_t T, const DstStride& dst) {
  GroupBox box;
  int64_t inner = 1;
  int64_t i = static_cast<int64_t>(ds.size()) - 1;
  for (; i >= 0; --i) {
    const MatmulView::Digit& d = ds[static_cast<size_t>(i)];
    if (T % (inner * d.count) != 0) break;
    auto to = dst(inner, d.count);
    if (!to) return std::nullopt;
    box.dims.push_back({d.count, d.stride, *to});
    inner *= d.count;
  }
  if (inner == T) {
    if (i > 0) return std::nullopt;
    box.step = i == 0 ? ds[0].stride : 0;
    return box;
  }
  if (i != 0 || T % inner != 0 || ds[0].count % (T / inner) != 0) return std::nullopt;
  const int64_t part = T / inner;
  auto to = dst(inner, part);
  if (!to) return std::nullopt;
  box.dims.push_back({part, ds[0].stride, *to});
  box.step = part * ds[0].stride;
  return box;
}

// VMEM strides of a [T1, T2] tile of e-byte elements: row-major, or as
// tr x 128 tiles (row blocks of T2 / 128 tiles; tr = 8 rows, or 4 pair rows).
DstStride rowStrides(bool tileMajor, int64_t T2, int e, int64_t tr) {
  return [=](int64_t inner, int64_t count) -> std::optional<int64_t> {
    if (!tileMajor) return inner * T2 * e;
    if (inner * count <= tr) return inner * 128 * e;
    if (inner % tr != 0) return std::nullopt;
    return inner / tr * (T2 / 128) * tr * 128 * e;
  };
}
DstStride colStrides(bool tileMajor, int e, int64_t tr) {
  return [=](int64_t inner, int64_t count) -> std::optional<int64_t> {
    if (!tileMajor || inner * count <= 128) return inner * e;
    if (inner % 128 != 0) return std::nullopt;
    return inner / 128 * tr * 128 * e;
  };
}

// The DMA of one [T1, T2] tile of a view: the descriptor's chunk and dims
// (the contiguous runs merged into the chunk, the rest outermost first) and
// the source steps from one batch, row tile and column tile to the next.
struct ViewDma {
  uint64_t chunk = 0;
  std::vector<Emitter::Dim> dims;
  int64_t step[3] = {0, 0, 0};
};

std::optional<ViewDma> viewDma(const MatmulView& v, int64_t T1, int64_t T2, int e, bool tileMajor) {
  const int64_t tr = v.pairs ? 4 : 8;
  if (v.pairs) T1 /= 2, e = 4;  // pair rows of 32-bit words
  auto b = groupBox(v.groups[0], 1, colStrides(false, e, tr));
  auto r = groupBox(v.groups[1], T1, rowStrides(tileMajor, T2, e, tr));
  auto c = groupBox(v.groups[2], T2, colStrides(tileMajor, e, tr));
  if (!b || !r || !c) return std::nullopt;
  std::vector<Emitter::Dim> dims = r->dims;
  dims.insert(dims.end(), c->dims.begin(), c->dims.end());
  ViewDma d;
  auto take = [&](int64_t unit) {
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i].src == unit && dims[i].dst == unit) {
        d.chunk = static_cast<uint64_t>(dims[i].count * unit);
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    return false;
  };
  if (!take(e)) return std::nullopt;
  while (take(static_cast<int64_t>(d.chunk))) {
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Emitter::Dim& x, const Emitter::Dim& y) { return x.dst > y.dst; });
  if (dims.size() > 3) return std::nullopt;
  d.dims = std::move(dims);
  d.step[0] = b->step;
  d.step[1] = r->step;
  d.step[2] = c->step;
  return d;
}

// A 2-byte view whose rows pair up in 32-bit words (bf16 under
// T(8,128)(2,1)): the minor row digit is (2, 2 bytes) and every other digit
// is a multiple of 4 bytes apart. The view becomes one of pair rows and
// words (pairs), read by loadPairs.
bool pairView(MatmulView& v) {
  std::vector<MatmulView::Digit>& rows = v.groups[1];
  if (rows.empty() || rows.back().count != 2 || rows.back().stride != 2) return false;
  rows.pop_back();
  for (const auto& g : v.groups)
    for (const MatmulView::Digit& d : g)
      if (d.stride % 4 != 0) return false;
  v.pairs = true;
  return true;
}

}  // namespace

int Lowerer::matmulOperand(const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                           const std::vector<int64_t>& g2, int64_t p1, int64_t p2, bool rhs, MatmulView* view,
                           bool* viewed) {
  *viewed = false;
  const Shape& s = op->shape();
  const int es = typeInfo(s.elementType()).bytes;
  std::vector<int64_t> order = g0;
  order.insert(order.end(), g1.begin(), g1.end());
  order.insert(order.end(), g2.begin(), g2.end());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int64_t>(i);
  // Only 4-byte operands (or 2-byte ones with paired rows) that would
  // otherwise be copied whole, unpadded.
  if (identity || (es != 4 && es != 2) || dimsProduct(s, g1) != p1 || dimsProduct(s, g2) != p2)
    return canonicalDotOperand(op, g0, g1, g2, p1, p2);
  const std::vector<int64_t> os = byteStrides(s.dimensions(), es);
  MatmulView v;
  const std::vector<int64_t>* groups[3] = {&g0, &g1, &g2};
  for (int k = 0; k < 3; ++k)
    for (int64_t d : *groups[k]) {
      if (s.dimension(d) == 1) continue;
      std::vector<MatmulView::Digit>& ds = v.groups[k];
      const int64_t stride = os[static_cast<size_t>(d)];
      if (!ds.empty() && ds.back().stride == s.dimension(d) * stride) {
        ds.back() = {ds.back().count * s.dimension(d), stride};  // one digit with the one before
        continue;
      }
      ds.push_back({s.dimension(d), stride});
    }
  if (es == 2 && !pairView(v)) return canonicalDotOperand(op, g0, g1, g2, p1, p2);
  // The smallest tiles the matmul takes: 8 or 128 rows, 128 columns.
  if (!viewDma(v, rhs ? 128 : 8, 128, es, false)) return canonicalDotOperand(op, g0, g1, g2, p1, p2);
  *view = std::move(v);
  *viewed = true;
  return leaves_[op][0];
}

// ============================================================== matmul on the MXUs

// c[b] (f32 [m, n]) = a[b] ([m, k]) x w[b] ([k, n]); m % 8 == 0, k and n
// multiples of 128. Each N tile of 128 x G columns uses G MXUs and an M tile
// of tm rows; the tile accumulates in VMEM over k steps of 128. All steps
// (batch, M tile, N tile, k step) form one loop whose next step's A and W
// tiles are fetched while this one computes (two VMEM slots each); C tiles
// alternate between two slots so a finished tile is written back while the
// next accumulates. Within a step the LHS 8-row blocks are software
// pipelined: block i is pushed to the MXUs `depth` blocks ahead of its pops,
// its successor is loaded while it is pushed, and the C rows of the next pop
// are loaded while the previous sums are stored. f32 operands take `passes`
// bf16 passes.
//
// The kernel's phases and the state they share: the tile plan (plan), the
// descriptors and registers (setupRegisters), the step's DMAs (fetch), the
// MXU passes over one step (pass, iteration), the step loop (run) and the
// finished tile's write-back or epilogue (finishTile). A friend of Lowerer.
class MatmulEmitter : KernelPhases {
 public:
  MatmulEmitter(Lowerer& l, const hlo::Instruction& in, const MatmulOperands& ops, int passes,
                const MatmulEpilogue* epilogue)
      : KernelPhases(l, in), b(ops.b), m(ops.m), k(ops.k), n(ops.n), aBuf(ops.aBuf), wBuf(ops.wBuf),
        cBuf(ops.cBuf), aType(ops.aType), wType(ops.wType), aView(ops.aView), wView(ops.wView), passes(passes),
        epilogue(epilogue) {}
  bool run();

 private:
  uint64_t slotBytesFor(int64_t tm, int64_t tn) const;
  bool plan();
  bool setupRegisters();
  void decompose();
  void fetch(int slotReg);
  void component(VReg x, int idx, VReg h);
  void loadA(VReg dst, int64_t blockOffset);
  void finishA();
  std::string offsetAddr(int reg, int64_t off) const;
  // A blocks are loaded a block ahead raw: the later passes' components and paired rows.
  bool rawA() const { return curIa != 0 || (aView && aView->pairs); }
  void loadPairs(VReg dst, int reg, int64_t off, int64_t pitch);
  std::string cAddr(int u, int64_t blockOffset) const;
  void pushWeights(int iw);
  void componentOf(VReg dst, VReg src);
  void iteration(bool doPush, bool doPop);
  void pass(int ia, int iw, bool accumulate);
  void compute(bool accumulate);
  void stepPointers();
  void kTailMask();
  void epilogueTile();
  void writeBackTile();

  // The operands and the plan.
  const int64_t b, m, k, n;
  const int aBuf, wBuf, cBuf;
  const ElementType aType, wType;
  const MatmulView *aView, *wView;
  const int passes;
  const MatmulEpilogue* epilogue;
  int ea = 0, ew = 0;
  int64_t aRow = 0, g = 1, tn = 128, cRow = 0, tm = 8, blocks = 1, depth = 1;
  uint64_t aSlot = 0, wSlot = 0, cSlot = 0, vA = 0, vW = 0, vC = 0;
  int64_t KB = 0, NB = 0, MB = 0, steps = 0;
  // Descriptors, the source steps of A and W from one batch, row tile and
  // column tile to the next, registers and masks. A W read in place from
  // 8 x 128 tiles keeps them whole in VMEM (wTiles).
  std::string dA, dW, dC;
  int64_t aStep[3] = {0, 0, 0}, wStep[3] = {0, 0, 0};
  bool wTiles = false;
  int rS = -1, rT = -1, rQ = -1, rX = -1, rY = -1, rSlot = -1, rKk = -1, rAb = -1, rWb = -1, rCs = -1, rCb = -1,
      rCsem = -1, rAo = -1, rCo = -1, rCnt = -1;
  std::vector<std::pair<int, int>> passList;
  std::string ldA, ldW;
  bool proA = false, proW = false, int8 = false;
  VReg va, vh, vh2, vraw;
  std::vector<VReg> vr, vc, vt, vw;
  int64_t kValid = 0;
  int rLim = -1, mA = -1, mW = -1;
  // Paired-row A blocks: the odd sublanes' register and mask.
  VReg vpa;
  int mOdd = -1;
  // The pass being emitted.
  int curIa = 0;
  bool curAccumulate = false, havePrev = false;
};

// VMEM of the two slots of each tile for M tiles of tm rows and N tiles of
// tn columns, padded: the pipelined loops read up to two blocks past the end
// of a tile (values never used).
uint64_t MatmulEmitter::slotBytesFor(int64_t tm, int64_t tn) const {
  return 2 * alignUp(static_cast<uint64_t>(tm * 128 * ea + 2 * aRow), 512) +
         2 * alignUp(static_cast<uint64_t>(128 * tn * ew), 512) +
         2 * alignUp(static_cast<uint64_t>(tm * tn * 4 + 8 * tn * 4), 512) +
         (epilogue ? l_.matmulEpilogueBytes(*epilogue, tm, tn) : 0);
}

bool MatmulEmitter::plan() {
  ea = typeInfo(aType).bytes;
  ew = typeInfo(wType).bytes;
  aRow = 8 * 128 * ea;  // A bytes of one 8-row block
  // As many MXUs as divide the N blocks, while the smallest tiles for them
  // still fit the VMEM budget.
  g = 1;
  for (int cand = std::max(1, target_.mxu.count); cand > 1; --cand)
    if ((n / 128) % cand == 0 && slotBytesFor(8, 128 * cand) <= l_.vmemBudget()) {
      g = cand;
      break;
    }
  tn = 128 * g;
  cRow = 8 * tn * 4;  // C bytes of one 8-row block
  auto slotBytes = [&](int64_t cand) { return slotBytesFor(cand, tn); };
  tm = 8;
  for (int64_t cand = std::min<int64_t>(m, 8192); cand >= 8; cand -= 8)
    if (m % cand == 0 && slotBytes(cand) <= std::max<uint64_t>(l_.vmemBudget(), slotBytes(8))) {
      tm = cand;
      break;
    }
  if (slotBytes(tm) > l_.vmemTop()) return l_.fail(in, "llo-gen: matmul tiles do not fit VMEM");
  blocks = tm / 8;
  depth = std::min<int64_t>(blocks, std::max(1, target_.mxu.resultFifoDepth / 2));
  aSlot = alignUp(static_cast<uint64_t>(tm * 128 * ea + 2 * aRow), 512);
  wSlot = alignUp(static_cast<uint64_t>(128 * tn * ew), 512);
  cSlot = alignUp(static_cast<uint64_t>(tm * tn * 4 + cRow), 512);
  vA = 0;
  vW = 2 * aSlot;
  vC = vW + 2 * wSlot;
  KB = k / 128;
  NB = n / tn;
  MB = m / tm;
  steps = b * MB * NB * KB;
  return true;
}

bool MatmulEmitter::setupRegisters() {
  if (aView) {
    auto d = viewDma(*aView, tm, 128, ea, false);
    if (!d) return l_.fail(in, "llo-gen: matmul cannot read its lhs in place");
    dA = e_.desc(d->chunk, d->dims);
    std::copy(d->step, d->step + 3, aStep);
  } else {
    dA = e_.desc(static_cast<uint64_t>(128 * ea), {{tm, k * ea, 128 * ea}});
    aStep[0] = m * k * ea;
    aStep[1] = tm * k * ea;
    aStep[2] = 128 * ea;
  }
  if (wView) {
    auto d = viewDma(*wView, 128, tn, ew, true);
    wTiles = d.has_value();
    if (!d) d = viewDma(*wView, 128, tn, ew, false);
    if (!d) return l_.fail(in, "llo-gen: matmul cannot read its rhs in place");
    dW = e_.desc(d->chunk, d->dims);
    std::copy(d->step, d->step + 3, wStep);
  } else {
    dW = e_.desc(static_cast<uint64_t>(tn * ew), {{128, n * ew, tn * ew}});
    wStep[0] = k * n * ew;
    wStep[1] = 128 * n * ew;
    wStep[2] = tn * ew;
  }
  dC = e_.desc(static_cast<uint64_t>(tn * 4), {{tm, tn * 4, n * 4}});
  for (int* r : {&rS, &rT, &rQ, &rX, &rY, &rSlot, &rKk, &rAb, &rWb, &rCs, &rCb, &rCsem, &rAo, &rCo, &rCnt})
    *r = sreg();
  passList = {{0, 0}};
  if (passes == 3) passList = {{1, 0}, {0, 1}, {0, 0}};
  if (passes == 6) passList = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
  ldA = loadMnemonic(aType);
  ldW = loadMnemonic(wType);
  // An output fusion may compute an operand from the loaded tiles
  // (MatmulEpilogue::prologue): float operands, never the int8 MXU.
  proA = epilogue && epilogue->prologueSource[0];
  proW = epilogue && epilogue->prologueSource[1];
  int8 = aType == ElementType::S8 && !proA;  // s8 x s8 -> exact s32 sums
  // Registers of the pipelined loops: the A block, per MXU the popped
  // result, the prefetched C rows and the sum being stored, and a rotating
  // set for weight staging so consecutive pushes do not wait on each other.
  for (VReg* v : {&va, &vh, &vh2, &vraw}) *v = valloc(ElementType::F32);
  for (int u = 0; u < g; ++u) {
    vr.push_back(valloc(ElementType::F32));
    vc.push_back(valloc(ElementType::F32));
    vt.push_back(valloc(ElementType::F32));
  }
  for (int i = 0; i < (proA || proW ? 8 : 16); ++i) vw.push_back(valloc(ElementType::F32));
  if (aView && aView->pairs) {
    vpa = valloc(ElementType::F32);
    mOdd = malloc_();
    e_.op("vsublaneid {}", V(vh));
    e_.op("vand {}, {}, 1", V(vh), V(vh));
    e_.op("vcmp.ne.s32 {}, {}, 0", M(mOdd), V(vh));
  }
  // The chains turn the K padding of the last k step's tiles into f(0):
  // masks keep it 0 (lanes of A, rows of W at and past k % 128 = rLim).
  kValid = epilogue && (proA || proW) ? epilogue->k % 128 : 0;
  if (kValid) {
    rLim = sreg();
    if (proA) mA = malloc_();
    if (proW) mW = malloc_();
  }
  return true;
}

// Step index in rT -> (bb, mm, nn, kk) in rX (kk), rY (nn), rQ (mm), rT (bb).
void MatmulEmitter::decompose() {
  e_.op("srem {}, {}, {}", S(rX), S(rT), KB);
  e_.op("sdiv {}, {}, {}", S(rT), S(rT), KB);
  e_.op("srem {}, {}, {}", S(rY), S(rT), NB);
  e_.op("sdiv {}, {}, {}", S(rT), S(rT), NB);
  e_.op("srem {}, {}, {}", S(rQ), S(rT), MB);
  e_.op("sdiv {}, {}, {}", S(rT), S(rT), MB);
}

// DMAs of step rT's A and W tiles into slot `slotReg`, signalling sem[slotReg].
void MatmulEmitter::fetch(int slotReg) {
  decompose();
  int rAddr = rAo, rV = rCo, rTmp = rCnt;  // free outside the compute loops
  // One operand's tile: HBM address rT*step[0] + r1*step[1] + r2*step[2]
  // into VMEM slot slotReg of the operand's double buffer at vBase.
  auto fetchTile = [&](int buf, const int64_t* step, int r1, int r2, uint64_t slotBytes, uint64_t vBase,
                       const std::string& desc) {
    e_.op("smul {}, {}, {}", S(rAddr), S(rT), step[0]);
    e_.op("smul {}, {}, {}", S(rTmp), S(r1), step[1]);
    e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), S(rTmp));
    e_.op("smul {}, {}, {}", S(rTmp), S(r2), step[2]);
    e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), S(rTmp));
    e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), base(buf));
    e_.op("smul {}, {}, {}", S(rV), S(slotReg), slotBytes);
    e_.op("sadd {}, {}, {}", S(rV), S(rV), vBase);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", buf), desc, S(rV), l_.memRef(buf, S(rAddr)), S(slotReg));
  };
  fetchTile(aBuf, aStep, rQ, rX, aSlot, vA, dA);
  fetchTile(wBuf, wStep, rX, rY, wSlot, vW, dW);
}

// Components of an f32 value for multi-pass bf16 products: x - bf16(x), twice.
void MatmulEmitter::component(VReg x, int idx, VReg h) {
  for (int i = 0; i < idx; ++i) {
    e_.op("vrnd.bf16 {}, {}", V(h), V(x));
    e_.op("vsub.f32 {}, {}, {}", V(x), V(x), V(h));
  }
}

// A's 8-row block `blockOffset` blocks past rAo.
void MatmulEmitter::loadA(VReg dst, int64_t blockOffset) {
  const int64_t off = blockOffset * aRow;
  if (aView && aView->pairs) {
    // Raw pairs: the even sublanes' in dst, the odd ones' in vpa (finishA
    // unpacks them a block later, off the push pipeline's path).
    e_.op("vld {}, [{}], 256, mask=0x55", V(dst), offsetAddr(rAo, off));
    e_.op("vld {}, [{}], 256, mask=0xaa", V(vpa), offsetAddr(rAo, off - 256));
    return;
  }
  e_.op("{} {}, [{}]", ldA, V(dst), offsetAddr(rAo, off));
  if (proA) l_.emitOperandPrologue(*epilogue, 0, dst, mA);
}

// A blocks loaded raw a block ahead (into vraw) become the pushed va:
// paired rows unpacked (even sublanes the low halves, odd ones the high
// halves), then the pass's component.
void MatmulEmitter::finishA() {
  if (!(aView && aView->pairs)) {
    componentOf(va, vraw);
    return;
  }
  e_.op("vunpack.lo.bf16 {}, {}", V(vraw), V(vraw));
  e_.op("vunpack.hi.bf16 {}, {}", V(vpa), V(vpa));
  e_.op("vsel.s32 {}, {}, {}, {}", V(va), M(mOdd), V(vpa), V(vraw));
  if (proA) l_.emitOperandPrologue(*epilogue, 0, va, mA);
  if (curIa != 0) componentOf(va, va);
}

// 8 rows paired in 32-bit words (bf16 under T(8,128)(2,1)), pair row p at
// reg + off + p * pitch: sublane s gets half s % 2 of pair row s / 2. The
// even sublanes load their pairs and unpack the low halves (which leaves
// the low 16 bits zero, so the high-half unpack keeps them); the odd ones
// then load the same pairs (half a pitch earlier at twice the sublane step)
// and unpack the high halves.
void MatmulEmitter::loadPairs(VReg dst, int reg, int64_t off, int64_t pitch) {
  e_.op("vld {}, [{}], {}, mask=0x55", V(dst), offsetAddr(reg, off), pitch / 2);
  e_.op("vunpack.lo.bf16 {}, {}", V(dst), V(dst));
  e_.op("vld {}, [{}], {}, mask=0xaa", V(dst), offsetAddr(reg, off - pitch / 2), pitch / 2);
  e_.op("vunpack.hi.bf16 {}, {}", V(dst), V(dst));
}

std::string MatmulEmitter::cAddr(int u, int64_t blockOffset) const {
  int64_t off = blockOffset * cRow + u * 512;
  return off >= 0 ? fmt::format("{} + {}", S(rCo), off) : fmt::format("{} - {}", S(rCo), -off);
}

// Register plus byte offset as an address operand ("sN" when 0).
std::string MatmulEmitter::offsetAddr(int reg, int64_t off) const {
  return off == 0 ? S(reg) : off > 0 ? fmt::format("{} + {}", S(reg), off) : fmt::format("{} - {}", S(reg), -off);
}

// The step's W tile (component iw of it) into the MXUs' weight registers.
void MatmulEmitter::pushWeights(int iw) {
  int j = 0;
  for (int u = 0; u < g; ++u) {
    for (int blk = 0; blk < 16; ++blk) {
      VReg w = vw[j++ % vw.size()];
      if (wView && wView->pairs)  // tile (blk, u), or 4 pair rows of tn words
        loadPairs(w, rWb, wTiles ? (blk * g + u) * 8 * 128 * ew : blk * 4 * tn * 4 + u * 128 * 4,
                  wTiles ? 128 * 4 : tn * 4);
      else if (wTiles)  // tile (blk, u) of the row block's g tiles
        e_.op("{} {}, [{} + {}], {}", ldW, V(w), S(rWb), (blk * g + u) * 8 * 128 * ew, 128 * ew);
      else
        e_.op("{} {}, [{} + {}], {}", ldW, V(w), S(rWb), blk * 8 * tn * ew + u * 128 * ew, tn * ew);
      if (proW) {
        if (mW >= 0) {
          // Rows blk * 8 + sublane below rLim are inside K.
          e_.op("vsublaneid {}", V(vh));
          e_.op("vadd.s32 {}, {}, {}", V(vh), V(vh), blk * 8);
          e_.op("vcmp.lt.s32 {}, {}, {}", M(mW), V(vh), S(rLim));
        }
        l_.emitOperandPrologue(*epilogue, 1, w, mW);
      }
      component(w, iw, vh);
      e_.op("mxu.wpush.{} mxu{}, {}", int8 ? "s8" : "bf16", u, V(w));
    }
    e_.op("mxu.wlatch mxu{}", u);
  }
}

// Passes on a component of A load block i + 1 raw while block i is pushed,
// so the component arithmetic is off the push's critical path.
void MatmulEmitter::componentOf(VReg dst, VReg src) {
  e_.op("vrnd.bf16 {}, {}", V(vh), V(src));
  if (curIa == 1) {
    e_.op("vsub.f32 {}, {}, {}", V(dst), V(src), V(vh));
    return;
  }
  e_.op("vsub.f32 {}, {}, {}", V(vh2), V(src), V(vh));
  e_.op("vrnd.bf16 {}, {}", V(vh), V(vh2));
  e_.op("vsub.f32 {}, {}, {}", V(dst), V(vh2), V(vh));
}

// One pipelined iteration: store the previous sums, pop block j (and load
// the C rows of block j + 1), push block i (and load block i + 1).
void MatmulEmitter::iteration(bool doPush, bool doPop) {
  if (doPop) {
    if (havePrev)
      for (int u = 0; u < g; ++u) e_.op("vst {}, [{}], {}", V(vt[u]), cAddr(u, -1), tn * 4);
    for (int u = 0; u < g; ++u) {
      if (curAccumulate) {
        e_.op("mxu.pop {}, mxu{}", V(vr[u]), u);
        e_.op("vadd.{} {}, {}, {}", int8 ? "s32" : "f32", V(vt[u]), V(vc[u]), V(vr[u]));
        e_.op("vld {}, [{}], {}", V(vc[u]), cAddr(u, 1), tn * 4);
      } else {
        e_.op("mxu.pop {}, mxu{}", V(vt[u]), u);
      }
    }
    e_.op("sadd {}, {}, {}", S(rCo), S(rCo), cRow);
    havePrev = true;
  }
  if (doPush) {
    for (int u = 0; u < g; ++u) e_.op("mxu.matmul.{} mxu{}, {}", int8 ? "s8" : "bf16", u, V(va));
    if (!rawA()) {
      loadA(va, 1);
    } else {
      finishA();
      loadA(vraw, 2);
    }
    e_.op("sadd {}, {}, {}", S(rAo), S(rAo), aRow);
  }
}

// One pass over the step's A tile; `accumulate` adds to the C tile.
void MatmulEmitter::pass(int ia, int iw, bool accumulate) {
  curIa = ia;
  curAccumulate = accumulate;
  pushWeights(iw);
  e_.op("smov {}, {}", S(rAo), S(rAb));
  e_.op("smov {}, {}", S(rCo), S(rCb));
  if (!rawA()) {
    loadA(va, 0);
  } else {
    loadA(vraw, 0);
    finishA();
    loadA(vraw, 1);
  }
  if (accumulate)
    for (int u = 0; u < g; ++u) e_.op("vld {}, [{}], {}", V(vc[u]), cAddr(u, 0), tn * 4);
  havePrev = false;
  for (int64_t i = 0; i < depth; ++i) iteration(true, false);
  if (blocks > depth) {
    iteration(true, true);
    if (blocks > depth + 1) {
      std::string lS = e_.newLabel("msteady");
      e_.op("smov {}, {}", S(rCnt), blocks - depth - 1);
      e_.label(lS);
      iteration(true, true);
      e_.op("loop {}, {}", S(rCnt), lS);
    }
  }
  for (int64_t i = 0; i < depth; ++i) iteration(false, true);
  for (int u = 0; u < g; ++u) e_.op("vst {}, [{}], {}", V(vt[u]), cAddr(u, -1), tn * 4);
}

void MatmulEmitter::compute(bool accumulate) {
  for (auto [ia, iw] : passList) {
    pass(ia, iw, accumulate);
    accumulate = true;  // later passes add to the first
  }
}

// The VMEM addresses of step rS's slots, k step in rKk.
void MatmulEmitter::stepPointers() {
  e_.op("sand {}, {}, 1", S(rSlot), S(rS));
  e_.op("sem.wait sem[{}], 2", S(rSlot));
  e_.op("srem {}, {}, {}", S(rKk), S(rS), KB);
  e_.op("smul {}, {}, {}", S(rAb), S(rSlot), aSlot);
  e_.op("sadd {}, {}, {}", S(rAb), S(rAb), vA);
  e_.op("smul {}, {}, {}", S(rWb), S(rSlot), wSlot);
  e_.op("sadd {}, {}, {}", S(rWb), S(rWb), vW);
  e_.op("smul {}, {}, {}", S(rCb), S(rCs), cSlot);
  e_.op("sadd {}, {}, {}", S(rCb), S(rCb), vC);
  e_.op("sadd {}, {}, 2", S(rCsem), S(rCs));
}

// rLim = the valid K of this step (k % 128 on the last), and A's lane mask.
void MatmulEmitter::kTailMask() {
  std::string lFull = e_.newLabel("mkfull");
  e_.op("smov {}, 128", S(rLim));
  e_.op("br.ne {}, {}, {}", S(rKk), KB - 1, lFull);
  e_.op("smov {}, {}", S(rLim), kValid);
  e_.label(lFull);
  if (mA >= 0) {
    e_.op("vlaneid {}", V(vh));
    e_.op("vcmp.lt.s32 {}, {}, {}", M(mA), V(vh), S(rLim));
  }
}

// The finished C tile goes through the output fusion's epilogue.
void MatmulEmitter::epilogueTile() {
  // The pipeline's registers are dead here: the epilogue may use them.
  for (VReg v : {va, vh, vh2, vraw}) vfree(v);
  for (const std::vector<VReg>* vs : {&vr, &vc, &vt, &vw})
    for (VReg v : *vs) vfree(v);
  MatmulTileSite site;
  site.tm = tm;
  site.tn = tn;
  site.m = m;
  site.n = n;
  site.rBatch = rT;
  site.rMTile = rQ;
  site.rNTile = rY;
  site.rC = rCb;
  site.rSlot = rCs;
  site.rSem = rCsem;
  site.vE = vC + 2 * cSlot;
  uint64_t eo = static_cast<uint64_t>(typeInfo(epilogue->outType).bytes);
  site.eSlot = alignUp(static_cast<uint64_t>(tm * tn) * eo, 512);
  uint64_t top = site.vE + 2 * site.eSlot;
  for (const MatmulEpilogue::Input& input : epilogue->inputs) {
    site.vInputs.push_back(top);
    uint64_t e = static_cast<uint64_t>(typeInfo(input.type).bytes);
    if (input.kind == MatmulEpilogue::Tile) top += alignUp(static_cast<uint64_t>(tm * tn) * e, 512);
    if (input.kind == MatmulEpilogue::Column) top += alignUp(static_cast<uint64_t>(tn) * e, 512);
  }
  l_.emitMatmulEpilogue(in, *epilogue, site);
}

// The finished C tile's DMA to HBM, signalling its slot's semaphore.
void MatmulEmitter::writeBackTile() {
  e_.op("smul {}, {}, {}", S(rAo), S(rT), m * n * 4);
  e_.op("smul {}, {}, {}", S(rCo), S(rQ), tm * n * 4);
  e_.op("sadd {}, {}, {}", S(rAo), S(rAo), S(rCo));
  e_.op("smul {}, {}, {}", S(rCo), S(rY), tn * 4);
  e_.op("sadd {}, {}, {}", S(rAo), S(rAo), S(rCo));
  e_.op("sadd {}, {}, {}", S(rAo), S(rAo), base(cBuf));
  e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", cBuf), dC, l_.memRef(cBuf, S(rAo)), S(rCb), S(rCsem));
}

bool MatmulEmitter::run() {
  if (!plan() || !setupRegisters()) return false;
  std::string lStep = e_.newLabel("mstep"), lNoPf = e_.newLabel("mnopf"), lAcc = e_.newLabel("macc"),
              lStored = e_.newLabel("mcomputed"), lNext = e_.newLabel("mnext");
  // Each C slot starts with one credit: its first tile need not wait.
  e_.op("sem.signal sem2");
  e_.op("sem.signal sem3");
  e_.op("smov {}, 0", S(rS));
  e_.op("smov {}, 0", S(rCs));
  e_.op("smov {}, 0", S(rT));
  e_.op("smov {}, 0", S(rSlot));
  fetch(rSlot);
  e_.label(lStep);
  // Prefetch step s + 1 into the other slot (its previous step is done).
  e_.op("sadd {}, {}, 1", S(rT), S(rS));
  e_.op("br.ge {}, {}, {}", S(rT), steps, lNoPf);
  e_.op("sand {}, {}, 1", S(rSlot), S(rT));
  fetch(rSlot);
  e_.label(lNoPf);
  stepPointers();
  if (kValid) kTailMask();
  e_.op("br.ne {}, 0, {}", S(rKk), lAcc);
  // First k step of a tile: the C slot's previous write-back must be done.
  e_.op("sem.wait sem[{}]", S(rCsem));
  compute(false);
  e_.op("jmp {}", lStored);
  e_.label(lAcc);
  compute(true);
  e_.label(lStored);
  e_.op("br.ne {}, {}, {}", S(rKk), KB - 1, lNext);
  // Last k step: write the tile back and switch C slots.
  e_.op("smov {}, {}", S(rT), S(rS));
  decompose();
  if (epilogue)
    epilogueTile();
  else
    writeBackTile();
  e_.op("sxor {}, {}, 1", S(rCs), S(rCs));
  e_.label(lNext);
  e_.op("sadd {}, {}, 1", S(rS), S(rS));
  e_.op("br.lt {}, {}, {}", S(rS), steps, lStep);
  e_.op("sem.wait sem2");
  e_.op("sem.wait sem3");
  return !failed_;
}

bool Lowerer::emitMatmul(const Instruction& in, int64_t b, int64_t m, int64_t k, int64_t n, int aBuf,
                         ElementType aType, int wBuf, ElementType wType, int cBuf, int passes,
                         const MatmulEpilogue* epilogue, const MatmulView* aView, const MatmulView* wView) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  MatmulOperands ops{b, m, k, n, aBuf, wBuf, cBuf, aType, wType, aView, wView};
  return MatmulEmitter(*this, in, ops, passes, epilogue).run();
}

int Lowerer::mxuPasses(const Instruction& in, ElementType lhsType, ElementType rhsType) const {
  // f32 and f16 are not exact in one bf16 pass; bf16 and the byte floats are.
  auto wide = [](ElementType t) { return t == ElementType::F32 || t == ElementType::F16; };
  if (!wide(lhsType) && !wide(rhsType)) return 1;
  hlo::Precision p = hlo::Precision::Default;
  for (hlo::Precision q : in.attrs().precision->operandPrecision) p = std::max(p, q);
  switch (options_.f32DotPrecision) {
    case F32DotPrecision::FromConfig: return p == hlo::Precision::Highest ? 6 : p == hlo::Precision::High ? 3 : 1;
    case F32DotPrecision::Default: return 1;
    case F32DotPrecision::High: return 3;
    case F32DotPrecision::Highest: return 6;
  }
  return 1;
}

DotGeometry dotGeometry(const Instruction& dot) {
  const auto& dn = *dot.attrs().dotDims;
  const Shape& ls = dot.operand(0)->shape();
  const Shape& rs = dot.operand(1)->shape();
  auto freeDims = [](const Shape& s, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < s.rank(); ++i)
      if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end()) f.push_back(i);
    return f;
  };
  DotGeometry g;
  g.lhsFree = freeDims(ls, dn.lhsBatchDimensions, dn.lhsContractingDimensions);
  g.rhsFree = freeDims(rs, dn.rhsBatchDimensions, dn.rhsContractingDimensions);
  g.b = dimsProduct(ls, dn.lhsBatchDimensions);
  g.m = dimsProduct(ls, g.lhsFree);
  g.k = dimsProduct(ls, dn.lhsContractingDimensions);
  g.n = dimsProduct(rs, g.rhsFree);
  return g;
}

// A dot operand in canonical padded form: groups (g0, g1, g2) of its dims
// become [B, P1, P2] with zero padding (the operand itself when it already is).
int Lowerer::canonicalDotOperand(const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                                 const std::vector<int64_t>& g2, int64_t p1, int64_t p2) {
  const Shape& s = op->shape();
  ElementType t = s.elementType();
  int es = typeInfo(t).bytes;
  std::vector<int64_t> order = g0;
  order.insert(order.end(), g1.begin(), g1.end());
  order.insert(order.end(), g2.begin(), g2.end());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int64_t>(i);
  int64_t s1 = dimsProduct(s, g1), s2 = dimsProduct(s, g2), bb = dimsProduct(s, g0);
  if (identity && s1 == p1 && s2 == p2) return leaves_[op][0];
  int tb = tempBuf(t, {bb, p1, p2});
  if (s1 != p1 || s2 != p2) fillZero(tb, bb * p1 * p2, t);
  std::vector<int64_t> os = byteStrides(s.dimensions(), es), counts, ss, ds;
  auto addGroup = [&](const std::vector<int64_t>& g, int64_t unit) {
    std::vector<int64_t> sizes;
    for (int64_t i : g) sizes.push_back(s.dimension(i));
    std::vector<int64_t> inner = rowMajorStrides(sizes);
    for (size_t i = 0; i < g.size(); ++i) {
      counts.push_back(sizes[i]);
      ss.push_back(os[static_cast<size_t>(g[i])]);
      ds.push_back(inner[i] * unit);
    }
  };
  addGroup(g0, p1 * p2 * es);
  addGroup(g1, p2 * es);
  addGroup(g2, es);
  emitCopy(tb, 0, leaves_[op][0], 0, counts, ds, ss, es);
  return tb;
}

bool Lowerer::lowerDot(const Instruction& in) {
  auto wideType = [](const Shape& s) { return typeInfo(s.elementType()).words > 1; };  // pairs and complex
  if (wideType(in.shape()) || wideType(in.operand(0)->shape()) || wideType(in.operand(1)->shape()))
    return lowerWideDot(in);
  if (!isMxuDot(in)) return lowerVectorDot(in);
  beginKernel(in, "matmul");
  const Instruction* lhs = in.operand(0);
  const Instruction* rhs = in.operand(1);
  ElementType lt = lhs->shape().elementType(), rt = rhs->shape().elementType(), ot = in.shape().elementType();
  // f32 accumulators, or s32 ones for the int8 MXU (isMxuDot).
  bool wide = ot == ElementType::F32 || ot == ElementType::S32;
  const auto& dn = *in.attrs().dotDims;
  DotGeometry geo = dotGeometry(in);
  const std::vector<int64_t>&lf = geo.lhsFree, &rf = geo.rhsFree;
  int64_t b = geo.b, m = geo.m, k = geo.k, n = geo.n;
  int64_t mp = (m + 7) / 8 * 8, kp = (k + 127) / 128 * 128, np = (n + 127) / 128 * 128;
  int dst = leaves_[&in][0];
  if (std::optional<bool> done = finishTrivialDot(geo, dst, ot)) return *done;
  MatmulView views[2];
  bool viewed[2];
  int a = matmulOperand(lhs, dn.lhsBatchDimensions, lf, dn.lhsContractingDimensions, mp, kp, false, &views[0],
                        &viewed[0]);
  int w = matmulOperand(rhs, dn.rhsBatchDimensions, dn.rhsContractingDimensions, rf, kp, np, true, &views[1],
                        &viewed[1]);
  bool direct = mp == m && np == n && wide;
  int c = direct ? dst : tempBuf(ElementType::F32, {b, mp, np});
  int passes = mxuPasses(in, lt, rt);
  bool ok = emitMatmul(in, b, mp, kp, np, a, lt, w, rt, c, passes, nullptr, viewed[0] ? &views[0] : nullptr,
                       viewed[1] ? &views[1] : nullptr);
  if (ok && !direct) {
    int cs = c;
    if (mp != m || np != n) {
      cs = wide ? dst : tempBuf(ElementType::F32, {b, m, n});
      emitCopy(cs, 0, c, 0, {b, m, n}, byteStrides({b, m, n}, 4), byteStrides({b, mp, np}, 4), 4);
    }
    if (!wide)
      ok = emitElementwise(b * m * n, {EwInput{EwInput::Full, cs, 0, ElementType::F32}}, {EwOutput{dst, 0, ot}},
                           [&](const std::vector<VReg>& v) {
                             VReg r = valloc(ot);
                             e_.op("vmov.s32 {}, {}", V(r), V(v[0]));
                             return std::vector<VReg>{normalize(r)};
                           });
  }
  endKernel(2.0 * static_cast<double>(b * m * n * k) * passes,
            bufs_[leaves_[lhs][0]].bytes + bufs_[leaves_[rhs][0]].bytes + bufs_[dst].bytes, 0);
  return ok && !failed_;
}

}  // namespace tpu::codegen
