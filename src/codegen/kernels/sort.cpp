// sort: a bitonic sorting network over rows held in VMEM. Rows of the sort
// dimension (moved innermost by a strided DMA when it is not) are padded to
// N = 2^p elements and laid out back to back, so the partner of element e
// in every step is e XOR j: another vreg for j >= 1024, a lane or sublane
// permutation within the vreg otherwise. Each step reads one copy of the
// arrays and writes the other (ping-pong), every element choosing its own
// value or its partner's; the loops over steps are run-time loops, so the
// code size does not depend on the tensor. The comparator runs as vector
// code on (partner, self) and (self, partner); the original position
// breaks ties, which makes the sort stable (the interpreter always sorts
// stably), and padding elements sort after every real one.
//
// Rows longer than VMEM sort externally: the padded rows and the original
// positions live in HBM scratch, and VMEM holds chunks of C = 2^c elements.
// A first pass sorts every chunk with all stages k < C; then for each later
// stage k, the steps with partner distance j >= C stream over HBM on pairs
// of chunks (e, e + j), compare-exchanging element-wise with the same rules,
// and the steps j < C run per chunk in VMEM with the network above. Element
// positions in the network are global (chunk base added), so directions and
// padding come out as for a row held whole.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/kernels/last_step.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// The next chunk's load waits for the last write-back out of rNxt, so it
// is issued kPrefetchStep network steps into this chunk (every pass runs
// at least log2(C) >= 11 steps): the write-back has had those steps to
// finish, the load the rest of the network. rPend counts the steps down
// (0: nothing pending). Measured on f32[3,70000] at 128 KiB: 2 steps
// 3.34M cycles, 4 3.20M, 8 3.19M (3.46M issuing it at the chunk's start).
constexpr int64_t kPrefetchStep = 8;

}  // namespace

// The sort kernel's phases and the state they share: the plan (sizes,
// chunking, VMEM offsets), the buffers, the registers the loops keep and
// the loop labels. A friend of Lowerer: the phases use the lowering state
// as a kernel's member functions do, under the same names.
class SortEmitter : KernelPhases {
 public:
  SortEmitter(Lowerer& l, const hlo::Instruction& in)
      : KernelPhases(l, in) {}
  bool run();

 private:
  bool plan();
  bool setupBuffers();
  void setupRegisters();
  std::string rowsDesc(int64_t r, int es, bool load);
  void moveRows(bool load);
  std::string addr(int elemReg, int slotReg, int es, int64_t o);
  int64_t moveChunk(bool load, int slotReg, int64_t slotBase, int gReg, int64_t kFrom, int64_t kTo,
                    const char* sem = "sem0");
  int partnerFirst(VReg cPS, VReg cSP, VReg idxP, VReg idxS);
  bool streamPass();
  bool streamVreg();
  void loadChunk(int slotReg, int gReg);
  void prefetch();
  void chunkIn();
  bool network();
  bool step(int slotIdx);
  bool stepVregs();
  bool finish();


  const hlo::Computation* cmp = nullptr;
  int64_t nops = 0, n = 0, inner = 1, outer = 1, rows = 0, N = 1;
  const std::vector<int>* outBufs = nullptr;
  std::vector<int> src, dst;
  std::vector<ElementType> types;
  std::vector<int> esz;
  uint64_t bytes = 0;
  bool empty = false;
  std::string scratchWhat;
  bool external = false, overlap = false, pair = false;
  int64_t C = 1, R = 0, nvr = 0;
  std::vector<int64_t> off;
  int64_t offIdx = 0, slotBytes = 0, nChunks = 0, tailR = 0;
  int idxBuf = -1;
  int rC = -1, rA = -1, rCur = -1, rOth = -1, rK = -1, rJ = -1, rD = -1, rJhi = -1, rE = -1, rCnt = -1, rT = -1,
      rX = -1;
  // External sort: row base (elements), stage of the pass (0: the first,
  // whole-chunk one), end of the merges run in VMEM, chunk base (elements),
  // streaming partner distance.
  int rRow = -1, rKs = -1, rKto = -1, rG = -1, rJs = -1;
  // Overlapped chunks: the third slot, and the network steps until the
  // next chunk's load is issued (0: none pending).
  int rNxt = -1, rPend = -1;
  VReg vLane, vSub, iota, vL, vS;
  std::string lChunk, lInit, lK, lJ, lV, lDone, lRow, lPass, lChunks, lPositions, lNet;
};


// The plan: the sort dimension innermost, rows padded to N = 2^p, and
// whether rows sort in VMEM (R rows at a time) or externally (chunks of C).
bool SortEmitter::plan() {
  l_.beginKernel(in, "sort");
  cmp = in.toApply();
  nops = in.operandCount();
  if (!cmp || nops == 0 || in.attrs().dimensions.size() != 1)
    return l_.fail(in, "llo-gen: sort needs operands, one sort dimension and a comparator");
  const std::vector<int64_t>& dims = in.operand(0)->shape().dimensions();
  int64_t d = in.attrs().dimensions[0];
  if (d < 0 || d >= static_cast<int64_t>(dims.size()))
    return l_.fail(in, "llo-gen: sort dimension out of range");
  n = dims[static_cast<size_t>(d)];
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int64_t>(i) < d) outer *= dims[i];
    if (static_cast<int64_t>(i) > d) inner *= dims[i];
  }
  rows = outer * inner;
  outBufs = &leaves_[&in];
  src.resize(static_cast<size_t>(nops));
  dst.resize(static_cast<size_t>(nops));
  for (int64_t k = 0; k < nops; ++k) {
    types.push_back(in.operand(k)->shape().elementType());
    esz.push_back(typeInfo(types.back()).bytes);
    bytes += 2 * bufs_[(*outBufs)[static_cast<size_t>(k)]].bytes;
  }
  if (rows * n == 0) {
    l_.endKernel(0, 0, 0);
    empty = true;
    return true;
  }
  while (N < n) N *= 2;
  // An external sort addresses its scratch by 32-bit byte offsets, which
  // the DMA reads unsigned (each array in a buffer of its own past the
  // heap's reach: up to 4 GiB), and compares element counters signed: the
  // 4-byte positions of every padded row within 4 GiB keep rows x N <= 2^30.
  scratchWhat = fmt::format("sort dimension of {} elements (rows padded to {})", n, N);
  if (static_cast<uint64_t>(rows) * static_cast<uint64_t>(N) * 4 > (uint64_t{1} << 32))
    return l_.fail(
        in, fmt::format("llo-gen: {} needs a {}-byte HBM scratch, past the 4 GiB that 32-bit scalar offsets "
                        "address",
                        scratchWhat, static_cast<uint64_t>(rows) * static_cast<uint64_t>(N) * 4));
  // VMEM: two copies of every operand and of the original positions.
  uint64_t per = 4;
  for (int es : esz) per += static_cast<uint64_t>(es);
  uint64_t budget = l_.vmemBudget();
  uint64_t slack = 2 * static_cast<uint64_t>(nops + 1) * (512 + 4096);
  int64_t maxElems = budget > slack ? static_cast<int64_t>((budget - slack) / (2 * per)) : 0;
  maxElems = std::min<int64_t>(maxElems, int64_t{1} << 24);
  // External sort: one row at a time, chunks of C elements. Three chunk
  // slots when they hold whole vreg pairs: the network ping-pongs between
  // two while the third writes the last chunk back and loads the next.
  external = N > maxElems;
  C = N;
  if (external) {
    uint64_t slack3 = 3 * static_cast<uint64_t>(nops + 1) * (512 + 4096);
    int64_t max3 = budget > slack3 ? static_cast<int64_t>((budget - slack3) / (3 * per)) : 0;
    overlap = max3 >= 2 * kVregElems;
    if (overlap) maxElems = std::min(maxElems, max3);
    C = 1;
    while (C * 2 <= maxElems) C *= 2;
    R = 1;
    // 2 * kVregElems: whole vreg pairs per chunk.
    if (C < 2 * kVregElems)
      return l_.fail(in, fmt::format("llo-gen: sort rows of {} elements (padded to {}) do not fit VMEM", n, N));
  } else {
    R = std::min(rows, maxElems / N);
  }
  nvr = (R * C + kVregElems - 1) / kVregElems;
  // Two vregs per iteration when registers allow (an extra vreg holds whole
  // padding rows: for N >= 2048 the count is already even).
  // (Not with 64-bit operands: their register pairs would not fit twice.)
  pair = nops <= 4 && std::none_of(types.begin(), types.end(), [](ElementType t) { return typeInfo(t).words > 1; });
  if (pair) nvr += nvr % 2;
  off.resize(static_cast<size_t>(nops));
  uint64_t cur = 0;
  for (int64_t k = 0; k < nops; ++k) {
    off[static_cast<size_t>(k)] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(nvr * kVregElems * esz[static_cast<size_t>(k)]), 512);
  }
  offIdx = static_cast<int64_t>(cur);
  cur += alignUp(static_cast<uint64_t>(nvr * kVregElems * 4), 512);
  slotBytes = static_cast<int64_t>(alignUp(cur, 512));
  nChunks = (rows + R - 1) / R;
  tailR = rows - (nChunks - 1) * R;
  return true;
}

// Rows [outer, inner, n] in HBM (external: [outer, inner, N], padded, in
// scratch that is both source and result, with the positions beside).
bool SortEmitter::setupBuffers() {
  if (external && (idxBuf = l_.wideScratchBuf(in, ElementType::S32, {rows, N}, scratchWhat)) < 0) return false;
  for (int64_t k = 0; k < nops; ++k) {
    auto ku = static_cast<size_t>(k);
    int inBuf = leaves_[in.operand(k)][0], es = esz[ku];
    if (external) {
      std::vector<int64_t> rd = {outer, inner, n};
      src[ku] = dst[ku] = l_.wideScratchBuf(in, types[ku], {rows, N}, scratchWhat);
      if (src[ku] < 0) return false;
      l_.emitCopy(src[ku], 0, inBuf, 0, rd, {inner * N * es, N * es, es}, {n * inner * es, es, inner * es}, es);
      continue;
    }
    if (inner == 1) {
      src[ku] = inBuf;
      dst[ku] = (*outBufs)[ku];
      continue;
    }
    std::vector<int64_t> rd = {outer, inner, n};
    src[ku] = l_.tempBuf(types[ku], rd);
    dst[ku] = l_.tempBuf(types[ku], rd);
    l_.emitCopy(src[ku], 0, inBuf, 0, rd, byteStrides(rd, es), {n * inner * es, es, inner * es}, es);
  }
  return true;
}

// The registers every phase keeps; iota: the element index within a vreg.
void SortEmitter::setupRegisters() {
  rC = sreg();
  rA = sreg();
  rCur = sreg();
  rOth = sreg();
  rK = sreg();
  rJ = sreg();
  rD = sreg();
  rJhi = sreg();
  rE = sreg();
  rCnt = sreg();
  rT = sreg();
  rX = sreg();
  if (external) {
    rRow = sreg();
    rKs = sreg();
    rKto = sreg();
    rG = sreg();
    rJs = sreg();
  }
  vLane = valloc(ElementType::S32);
  vSub = valloc(ElementType::S32);
  iota = valloc(ElementType::S32);
  vL = valloc(ElementType::S32);
  vS = valloc(ElementType::S32);
  e_.op("vlaneid {}", V(vLane));
  e_.op("vsublaneid {}", V(vSub));
  e_.op("vmul.s32 {}, {}, 128", V(iota), V(vSub));
  e_.op("vadd.s32 {}, {}, {}", V(iota), V(iota), V(vLane));
}

// DMA of r rows between HBM (n per row) and VMEM (N per row).
std::string SortEmitter::rowsDesc(int64_t r, int es, bool load) {
  if (n == N || r == 1) return e_.desc(static_cast<uint64_t>((r == 1 ? n : r * n) * es), {});
  int64_t h = n * es, v = N * es;
  return e_.desc(static_cast<uint64_t>(n * es), {{r, load ? h : v, load ? v : h}});
}

// The rows of chunk rC between HBM and the current slot.
void SortEmitter::moveRows(bool load) {
  for (int64_t k = 0; k < nops; ++k) {
    auto ku = static_cast<size_t>(k);
    int es = esz[ku], buf = load ? src[ku] : dst[ku];
    e_.op("smul {}, {}, {}", S(rA), S(rC), R * n * es);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf));
    e_.op("sadd {}, {}, {}", S(rX), S(rCur), off[ku]);
    auto dma = [&](const std::string& ds) {
      if (load)
        e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", buf), ds, S(rX), l_.memRef(buf, S(rA)));
      else
        e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", buf), ds, l_.memRef(buf, S(rA)), S(rX));
    };
    emitFullOrLastStep(
        e_, S(rC), nChunks, tailR == R, [&] { dma(rowsDesc(R, es, load)); },
        [&] { dma(rowsDesc(tailR, es, load)); });
  }
  e_.op("sem.wait sem0, {}", nops);
}

// The VMEM address of element elemReg of the array at o in the slot at slotReg.
std::string SortEmitter::addr(int elemReg, int slotReg, int es, int64_t o) {
  e_.op("smul {}, {}, {}", S(rX), S(elemReg), es);
  e_.op("sadd {}, {}, {}", S(rX), S(rX), S(slotReg));
  return fmt::format("{} + {}", S(rX), o);
}

// External sort: DMA of the chunk at element rRow + gReg between its HBM
// scratch and the VMEM slot at slotReg (a register, or none: 0) +
// slotBase, for arrays [kFrom, kTo) (operands, then nops: the positions).
// Returns the number of DMAs issued on `sem`.
int64_t SortEmitter::moveChunk(bool load, int slotReg, int64_t slotBase, int gReg, int64_t kFrom, int64_t kTo,
                               const char* sem) {
  int64_t count = 0;
  for (int64_t k = kFrom; k < kTo; ++k) {
    bool isIdx = k == nops;
    int es = isIdx ? 4 : esz[static_cast<size_t>(k)], buf = isIdx ? idxBuf : src[static_cast<size_t>(k)];
    int64_t imm = (isIdx ? offIdx : off[static_cast<size_t>(k)]) + slotBase;
    std::string o = slotReg < 0 ? std::to_string(imm) : fmt::format("{} + {}", S(slotReg), imm);
    std::string ds = e_.desc(static_cast<uint64_t>(C * es), {});
    e_.op("sadd {}, {}, {}", S(rA), S(rRow), S(gReg));
    e_.op("smul {}, {}, {}", S(rA), S(rA), es);
    if (base(buf)) e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf));
    if (load)
      e_.op("{} {}, [{}], {}, {}", l_.dmaOp("h2v", buf), ds, o, l_.memRef(buf, S(rA)), sem);
    else
      e_.op("{} {}, {}, [{}], {}", l_.dmaOp("v2h", buf), ds, l_.memRef(buf, S(rA)), o, sem);
    ++count;
  }
  return count;
}

// Whether the partner's value goes before self's, from cmp(partner, self)
// and cmp(self, partner): the comparator, then the original position; a
// padding element goes after every real one.
int SortEmitter::partnerFirst(VReg cPS, VReg cSP, VReg idxP, VReg idxS) {
  int less = malloc_(), mSP = malloc_(), ilt = malloc_();
  e_.op("vcmp.ne.s32 {}, {}, 0", M(less), V(cPS));
  e_.op("vcmp.eq.s32 {}, {}, 0", M(mSP), V(cSP));
  e_.op("vcmp.lt.s32 {}, {}, {}", M(ilt), V(idxP), V(idxS));
  e_.op("mand {}, {}, {}", M(mSP), M(mSP), M(ilt));
  e_.op("mor {}, {}, {}", M(less), M(less), M(mSP));
  if (n != N) {
    // A padding self: any real partner is less, padding by position.
    // A real self: padding partners are never less.
    int padS = malloc_(), realP = malloc_();
    e_.op("vcmp.ge.s32 {}, {}, {}", M(padS), V(idxS), n);
    e_.op("vcmp.lt.s32 {}, {}, {}", M(realP), V(idxP), n);
    e_.op("mand {}, {}, {}", M(less), M(less), M(realP));
    e_.op("mor {}, {}, {}", M(realP), M(realP), M(ilt));
    e_.op("mand {}, {}, {}", M(realP), M(realP), M(padS));
    e_.op("mnot {}, {}", M(padS), M(padS));
    e_.op("mand {}, {}, {}", M(less), M(less), M(padS));
    e_.op("mor {}, {}, {}", M(less), M(less), M(realP));
    masks_.put(padS);
    masks_.put(realP);
  }
  masks_.put(mSP);
  masks_.put(ilt);
  return less;
}

// External sort, a pass after the first: the steps of stage rKs with
// j >= C stream pairs of chunks (a, a + j) through slots 0 and 1.
bool SortEmitter::streamPass() {
  e_.op("smov {}, 0", S(rRow));
  e_.label(lRow);
  e_.op("smov {}, 0", S(rKs));
  e_.label(lPass);
  e_.op("br.eq {}, 0, {}", S(rKs), lChunks);
  // Steps of stage rKs with j >= C: pairs of chunks (a, a + j) through
  // slots 0 and 1; element e of a meets element e of a + j.
  std::string lStream = e_.newLabel("sstream"), lPair = e_.newLabel("spair"), lSV = e_.newLabel("sxvreg");
  e_.op("smov {}, {}", S(rJs), S(rKs));
  e_.label(lStream);
  e_.op("sshl {}, {}, 1", S(rD), S(rKs));
  e_.op("scmp.lt {}, {}, {}", S(rT), S(rD), N);
  e_.op("ssel {}, {}, {}, 0", S(rD), S(rT), S(rD));
  e_.op("smov {}, 0", S(rC));
  e_.label(lPair);
  // Pair rC: the lower chunk's base has bit j clear, i.e. rC with a zero
  // inserted at bit log2(j) of its element offset.
  e_.op("smul {}, {}, {}", S(rG), S(rC), C);
  e_.op("ssub {}, {}, 1", S(rT), S(rJs));
  e_.op("sand {}, {}, {}", S(rT), S(rG), S(rT));
  e_.op("ssub {}, {}, {}", S(rG), S(rG), S(rT));
  e_.op("sshl {}, {}, 1", S(rG), S(rG));
  e_.op("sadd {}, {}, {}", S(rG), S(rG), S(rT));
  e_.op("sadd {}, {}, {}", S(rJhi), S(rG), S(rJs));
  int64_t issued = moveChunk(true, -1, 0, rG, 0, nops + 1);
  issued += moveChunk(true, -1, slotBytes, rJhi, 0, nops + 1);
  e_.op("sem.wait sem0, {}", issued);
  e_.op("smov {}, 0", S(rCur));
  e_.op("smov {}, {}", S(rOth), slotBytes);
  e_.op("smov {}, 0", S(rE));
  e_.op("smov {}, {}", S(rCnt), C / kVregElems);
  e_.label(lSV);
  if (!streamVreg()) return false;
  e_.op("sadd {}, {}, {}", S(rE), S(rE), kVregElems);
  e_.op("loop {}, {}", S(rCnt), lSV);
  issued = moveChunk(false, -1, 0, rG, 0, nops + 1);
  issued += moveChunk(false, -1, slotBytes, rJhi, 0, nops + 1);
  e_.op("sem.wait sem0, {}", issued);
  e_.op("sadd {}, {}, 1", S(rC), S(rC));
  e_.op("br.lt {}, {}, {}", S(rC), N / C / 2, lPair);
  e_.op("sshr {}, {}, 1", S(rJs), S(rJs));
  e_.op("br.ge {}, {}, {}", S(rJs), C, lStream);
  e_.label(lChunks);
  return true;
}

// One vreg of a streamed step: element e of the lower chunk meets element
// e of the upper one, each choosing by the VMEM rules.
bool SortEmitter::streamVreg() {
  PoolGuard body({&sregs_, &vregs_, &masks_});
  // Descending block: bit 2k of the (global) position.
  VReg ev = valloc(ElementType::S32);
  int md = malloc_();
  e_.op("vadd.s32 {}, {}, {}", V(ev), V(iota), S(rE));
  e_.op("vadd.s32 {}, {}, {}", V(ev), V(ev), S(rG));
  e_.op("vand {}, {}, {}", V(ev), V(ev), S(rD));
  e_.op("vcmp.ne.s32 {}, {}, 0", M(md), V(ev));
  vfree(ev);
  std::vector<VReg> lo, hi, argLH, argHL;
  for (int64_t k = 0; k <= nops; ++k) {
    bool isIdx = k == nops;
    ElementType ty = isIdx ? ElementType::S32 : types[static_cast<size_t>(k)];
    int es = isIdx ? 4 : esz[static_cast<size_t>(k)];
    int64_t o = isIdx ? offIdx : off[static_cast<size_t>(k)];
    lo.push_back(l_.vload(ty, addr(rE, rCur, es, o)));
    hi.push_back(l_.vload(ty, addr(rE, rOth, es, o)));
  }
  for (int64_t k = 0; k < nops; ++k) {
    auto ku = static_cast<size_t>(k);
    argHL.push_back(hi[ku]);
    argHL.push_back(lo[ku]);
    argLH.push_back(lo[ku]);
    argLH.push_back(hi[ku]);
  }
  std::vector<VReg> cHL, cLH;
  if (!l_.lowerComputation(*cmp, argHL, cHL) || !l_.lowerComputation(*cmp, argLH, cLH) || cHL.size() != 1 ||
      cLH.size() != 1) {
    if (!failed_) l_.fail(in, "llo-gen: sort comparator must return one pred");
    return false;
  }
  // The lower element takes the upper's value when that goes first in an
  // ascending block (or does not in a descending one); the upper one the
  // other way round -- each decided on its own, as in VMEM.
  int takeLo = partnerFirst(cHL[0], cLH[0], hi.back(), lo.back());
  int takeHi = partnerFirst(cLH[0], cHL[0], lo.back(), hi.back());
  vfree(cHL[0]);
  vfree(cLH[0]);
  e_.op("mxor {}, {}, {}", M(takeLo), M(takeLo), M(md));
  e_.op("mxor {}, {}, {}", M(takeHi), M(takeHi), M(md));
  e_.op("mnot {}, {}", M(takeHi), M(takeHi));
  for (size_t k = 0; k < lo.size(); ++k) {
    bool isIdx = k + 1 == lo.size();
    ElementType ty = isIdx ? ElementType::S32 : types[k];
    int es = isIdx ? 4 : esz[k];
    int64_t o = isIdx ? offIdx : off[k];
    VReg newLo = valloc(ty);
    for (auto [d, a, b] : {std::tuple{newLo.r, lo[k].r, hi[k].r}, {newLo.hi, lo[k].hi, hi[k].hi},
                           {newLo.im, lo[k].im, hi[k].im}, {newLo.imh, lo[k].imh, hi[k].imh}})
      if (d >= 0) {
        e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(d), M(takeLo), vregs_.name(b), vregs_.name(a));
        e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(b), M(takeHi), vregs_.name(a), vregs_.name(b));
      }
    l_.vstore(newLo, ty, addr(rE, rCur, es, o));
    l_.vstore(hi[k], ty, addr(rE, rOth, es, o));
    vfree(newLo);
    vfree(lo[k]);
    vfree(hi[k]);
  }
  for (int m : {md, takeLo, takeHi}) masks_.put(m);
  return true;
}

// Loads the chunk at element gReg into the slot at slotReg.
void SortEmitter::loadChunk(int slotReg, int gReg) {
  std::string lNoIdx = e_.newLabel("snoidx");
  moveChunk(true, slotReg, 0, gReg, 0, nops, "sem1");
  e_.op("br.eq {}, 0, {}", S(rKs), lNoIdx);
  moveChunk(true, slotReg, 0, gReg, nops, nops + 1, "sem2");
  e_.label(lNoIdx);
}

// Chunk rC + 1 into rNxt once the write-back of chunk rC - 1 is out of
// it (rT and rA are free between network steps).
void SortEmitter::prefetch() {
  std::string lSlotFree = e_.newLabel("sslotfree");
  e_.op("br.eq {}, 0, {}", S(rC), lSlotFree);
  e_.op("sem.wait sem3, {}", nops + 1);
  e_.label(lSlotFree);
  e_.op("sadd {}, {}, 1", S(rT), S(rC));
  e_.op("smul {}, {}, {}", S(rT), S(rT), C);
  loadChunk(rNxt, rT);
}

// A chunk (or R rows) into the current slot, with its original positions.
void SortEmitter::chunkIn() {
  e_.op("smov {}, 0", S(rC));
  lPositions = e_.newLabel("spos");
  lNet = e_.newLabel("snet");
  // Overlapped chunks: rNxt is the third slot. The values of a chunk load
  // on sem1, its positions (passes after the first) on sem2, its write-back
  // goes out on sem3; at most one group of each is in flight at a wait.
  if (overlap) {
    rNxt = sreg();
    rPend = sreg();
    e_.op("smov {}, 0", S(rCur));
    e_.op("smov {}, {}", S(rOth), slotBytes);
    e_.op("smov {}, {}", S(rNxt), 2 * slotBytes);
    e_.op("smov {}, 0", S(rG));
    loadChunk(rCur, rG);
    e_.label(lChunk);
    std::string lIdxIn = e_.newLabel("sidxin"), lNoNext = e_.newLabel("snonext");
    e_.op("sem.wait sem1, {}", nops);
    e_.op("br.eq {}, 0, {}", S(rKs), lIdxIn);
    e_.op("sem.wait sem2, 1");
    e_.label(lIdxIn);
    // A next chunk: its load is pending.
    e_.op("smov {}, 0", S(rPend));
    e_.op("sadd {}, {}, 1", S(rT), S(rC));
    e_.op("br.eq {}, {}, {}", S(rT), N / C, lNoNext);
    e_.op("smov {}, {}", S(rPend), kPrefetchStep);
    e_.label(lNoNext);
    e_.op("smul {}, {}, {}", S(rG), S(rC), C);
    e_.op("br.eq {}, 0, {}", S(rKs), lPositions);
    e_.op("jmp {}", lNet);
    e_.label(lPositions);
  } else {
    e_.label(lChunk);
    e_.op("smov {}, 0", S(rCur));
    e_.op("smov {}, {}", S(rOth), slotBytes);
  }
  if (external && !overlap) {
    // Values; the positions are made in the first pass and loaded after it.
    e_.op("smul {}, {}, {}", S(rG), S(rC), C);
    int64_t issued = moveChunk(true, -1, 0, rG, 0, nops);
    e_.op("br.eq {}, 0, {}", S(rKs), lPositions);
    e_.op("sem.wait sem0, {}", issued + moveChunk(true, -1, 0, rG, nops, nops + 1));
    e_.op("jmp {}", lNet);
    e_.label(lPositions);
    e_.op("sem.wait sem0, {}", issued);
  } else if (!external) {
    moveRows(true);
  }
  // Original positions within the row (>= n: padding).
  e_.op("smov {}, 0", S(rE));
  e_.op("smov {}, {}", S(rCnt), nvr);
  e_.label(lInit);
  {
    VReg t = valloc(ElementType::S32);
    e_.op("vadd.s32 {}, {}, {}", V(t), V(iota), S(rE));
    if (external) e_.op("vadd.s32 {}, {}, {}", V(t), V(t), S(rG));
    else e_.op("vand {}, {}, {}", V(t), V(t), N - 1);
    l_.vstore(t, ElementType::S32, addr(rE, rCur, 4, offIdx));
    vfree(t);
  }
  e_.op("sadd {}, {}, {}", S(rE), S(rE), kVregElems);
  e_.op("loop {}, {}", S(rCnt), lInit);
  e_.label(lNet);
}

// The network over the slot: for (k = 1; k < N; k *= 2) for (j = k; j >= 1;
// j /= 2), ping-ponging between the current and the other slot.
bool SortEmitter::network() {

  // for (k = 1; k < N; k *= 2) for (j = k; j >= 1; j /= 2): blocks of 2k
  // alternate direction (bit 2k of e), except in the last merge.
  // External: the first pass runs k < C, a later one k = rKs with j < C.
  if (external) {
    std::string lFirst = e_.newLabel("sfirst"), lFrom = e_.newLabel("sfrom");
    e_.op("br.eq {}, 0, {}", S(rKs), lFirst);
    e_.op("smov {}, {}", S(rK), S(rKs));
    e_.op("sshl {}, {}, 1", S(rKto), S(rKs));
    e_.op("jmp {}", lFrom);
    e_.label(lFirst);
    e_.op("smov {}, 1", S(rK));
    e_.op("smov {}, {}", S(rKto), C);
    e_.label(lFrom);
  } else {
    e_.op("smov {}, 1", S(rK));
    e_.op("br.ge {}, {}, {}", S(rK), N, lDone);
  }
  e_.label(lK);
  e_.op("sshl {}, {}, 1", S(rD), S(rK));
  e_.op("scmp.lt {}, {}, {}", S(rT), S(rD), N);
  e_.op("ssel {}, {}, {}, 0", S(rD), S(rT), S(rD));
  e_.op("smov {}, {}", S(rJ), S(rK));
  if (external) {
    std::string lJok = e_.newLabel("sjfrom");
    e_.op("br.lt {}, {}, {}", S(rJ), C, lJok);
    e_.op("smov {}, {}", S(rJ), C / 2);
    e_.label(lJok);
  }
  e_.label(lJ);
  e_.op("sand {}, {}, 127", S(rT), S(rJ));
  e_.op("vxor {}, {}, {}", V(vL), V(vLane), S(rT));
  e_.op("sshr {}, {}, 7", S(rT), S(rJ));
  e_.op("sand {}, {}, 7", S(rT), S(rT));
  e_.op("vxor {}, {}, {}", V(vS), V(vSub), S(rT));
  e_.op("sand {}, {}, {}", S(rJhi), S(rJ), -kVregElems);
  e_.op("smov {}, 0", S(rE));
  e_.op("smov {}, {}", S(rCnt), pair ? nvr / 2 : nvr);
  e_.label(lV);
  if (!stepVregs()) return false;
  e_.op("sadd {}, {}, {}", S(rE), S(rE), (pair ? 2 : 1) * kVregElems);
  e_.op("loop {}, {}", S(rCnt), lV);
  e_.op("smov {}, {}", S(rT), S(rCur));
  e_.op("smov {}, {}", S(rCur), S(rOth));
  e_.op("smov {}, {}", S(rOth), S(rT));
  if (overlap) {
    std::string lNotYet = e_.newLabel("snotyet");
    e_.op("br.eq {}, 0, {}", S(rPend), lNotYet);
    e_.op("ssub {}, {}, 1", S(rPend), S(rPend));
    e_.op("br.ne {}, 0, {}", S(rPend), lNotYet);
    prefetch();
    e_.label(lNotYet);
  }
  e_.op("sshr {}, {}, 1", S(rJ), S(rJ));
  e_.op("br.ne {}, 0, {}", S(rJ), lJ);
  e_.op("sshl {}, {}, 1", S(rK), S(rK));
  return true;
}

// One vreg of a step; two independent vregs are emitted with disjoint
// registers and their ops interleaved, so one hides the other's latency.
bool SortEmitter::step(int slotIdx) {
  int rEl = sreg(), rPE = sreg(), outerX = rX;
  rX = sreg();
  e_.op("sadd {}, {}, {}", S(rEl), S(rE), slotIdx * kVregElems);
  // Which value this element wants: the larger when it is the upper of
  // its pair in an ascending block or the lower in a descending one.
  VReg ev = valloc(ElementType::S32), t = valloc(ElementType::S32);
  e_.op("vadd.s32 {}, {}, {}", V(ev), V(iota), S(rEl));
  if (external) e_.op("vadd.s32 {}, {}, {}", V(ev), V(ev), S(rG));
  int wl = malloc_(), md = malloc_();
  e_.op("vand {}, {}, {}", V(t), V(ev), S(rJ));
  e_.op("vcmp.ne.s32 {}, {}, 0", M(wl), V(t));
  e_.op("vand {}, {}, {}", V(t), V(ev), S(rD));
  e_.op("vcmp.ne.s32 {}, {}, 0", M(md), V(t));
  e_.op("mxor {}, {}, {}", M(wl), M(wl), M(md));
  masks_.put(md);
  vfree(ev);
  e_.op("sxor {}, {}, {}", S(rPE), S(rEl), S(rJhi));
  std::vector<VReg> self, part;
  auto loadPair = [&](ElementType ty, int es, int64_t o) {
    self.push_back(l_.vload(ty, addr(rEl, rCur, es, o)));
    VReg p = l_.vload(ty, addr(rPE, rCur, es, o));
    e_.op("vperm.lane {}, {}, {}", V(t), V(p), V(vL));
    e_.op("vperm.sub {}, {}, {}", V(p), V(t), V(vS));
    for (int r : {p.hi, p.im, p.imh})  // the other registers of a 64-bit or complex value move alike
      if (r >= 0) {
        e_.op("vperm.lane {}, {}, {}", V(t), vregs_.name(r), V(vL));
        e_.op("vperm.sub {}, {}, {}", vregs_.name(r), V(t), V(vS));
      }
    part.push_back(p);
  };
  for (int64_t k = 0; k < nops; ++k)
    loadPair(types[static_cast<size_t>(k)], esz[static_cast<size_t>(k)], off[static_cast<size_t>(k)]);
  loadPair(ElementType::S32, 4, offIdx);
  vfree(t);
  VReg idxS = self.back(), idxP = part.back();
  // less(partner, self) under (comparator, original position).
  std::vector<VReg> argPS, argSP;
  for (int64_t k = 0; k < nops; ++k) {
    auto ku = static_cast<size_t>(k);
    argPS.push_back(part[ku]);
    argPS.push_back(self[ku]);
    argSP.push_back(self[ku]);
    argSP.push_back(part[ku]);
  }
  std::vector<VReg> cPS, cSP;
  if (!l_.lowerComputation(*cmp, argPS, cPS) || !l_.lowerComputation(*cmp, argSP, cSP) || cPS.size() != 1 ||
      cSP.size() != 1) {
    if (!failed_) l_.fail(in, "llo-gen: sort comparator must return one pred");
    return false;
  }
  int less = partnerFirst(cPS[0], cSP[0], idxP, idxS);
  vfree(cPS[0]);
  vfree(cSP[0]);
  e_.op("mxor {}, {}, {}", M(less), M(less), M(wl));  // now: take the partner's value
  for (size_t k = 0; k < self.size(); ++k) {
    bool isIdx = k + 1 == self.size();
    ElementType ty = isIdx ? ElementType::S32 : types[k];
    int es = isIdx ? 4 : esz[k];
    int64_t o = isIdx ? offIdx : off[k];
    e_.op("vsel.s32 {}, {}, {}, {}", V(self[k]), M(less), V(part[k]), V(self[k]));
    for (auto [s, q] : {std::pair{self[k].hi, part[k].hi}, {self[k].im, part[k].im}, {self[k].imh, part[k].imh}})
      if (s >= 0) e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(s), M(less), vregs_.name(q), vregs_.name(s));
    l_.vstore(self[k], ty, addr(rEl, rOth, es, o));
    vfree(self[k]);
    vfree(part[k]);
  }
  for (int m : {less, wl}) masks_.put(m);
  rX = outerX;
  return true;
}

// The vregs of a step: one, or two with disjoint registers and their ops
// interleaved line by line.
bool SortEmitter::stepVregs() {
  if (!pair) return step(0);
  std::vector<RegPool*> pools = {&sregs_, &vregs_, &masks_};
  std::vector<std::vector<bool>> start, mineA;
  for (RegPool* pool : pools) {
    // Every other free register goes to the first vreg.
    std::vector<bool> f = pool->save(), a = f;
    bool give = true;
    for (size_t i = 0; i < f.size(); ++i)
      if (f[i]) {
        a[i] = give;
        give = !give;
      }
    start.push_back(f);
    mineA.push_back(a);
    pool->restore(a);
  }
  const auto at = e_.mark();
  if (!step(0)) return false;
  auto codeA = e_.cut(at);
  for (size_t p = 0; p < pools.size(); ++p) {
    std::vector<bool> b = start[p];
    for (size_t i = 0; i < b.size(); ++i) b[i] = b[i] && !mineA[p][i];
    pools[p]->restore(b);
  }
  if (!step(1)) return false;
  auto codeB = e_.cut(at);
  for (size_t p = 0; p < pools.size(); ++p) pools[p]->restore(start[p]);
  // Alternate the two streams line by line.
  size_t ia = 0, ib = 0;
  while (ia < codeA.size() || ib < codeB.size()) {
    if (ia < codeA.size()) e_.append(std::move(codeA[ia++]));
    if (ib < codeB.size()) e_.append(std::move(codeB[ib++]));
  }
  return true;
}

// The chunk back to HBM and the loops over chunks, passes and rows; then
// the results back in their layout.
bool SortEmitter::finish() {
  if (external) {
    e_.op("br.lt {}, {}, {}", S(rK), S(rKto), lK);
    e_.label(lDone);
    // The chunk is in the current slot.
    if (overlap) {
      // The last chunk loads nothing: the write-back before it is waited for here.
      std::string lWaited = e_.newLabel("swaited");
      e_.op("sadd {}, {}, 1", S(rT), S(rC));
      e_.op("br.ne {}, {}, {}", S(rT), N / C, lWaited);
      e_.op("br.eq {}, 0, {}", S(rC), lWaited);
      e_.op("sem.wait sem3, {}", nops + 1);
      e_.label(lWaited);
      moveChunk(false, rCur, 0, rG, 0, nops + 1, "sem3");
      // The slot written back takes the chunk after next; the next one is in rNxt.
      e_.op("smov {}, {}", S(rT), S(rCur));
      e_.op("smov {}, {}", S(rCur), S(rNxt));
      e_.op("smov {}, {}", S(rNxt), S(rT));
    } else {
      e_.op("sem.wait sem0, {}", moveChunk(false, rCur, 0, rG, 0, nops + 1));
    }
    e_.op("sadd {}, {}, 1", S(rC), S(rC));
    e_.op("br.lt {}, {}, {}", S(rC), N / C, lChunk);
    if (overlap) e_.op("sem.wait sem3, {}", nops + 1);
    std::string lNext = e_.newLabel("snext");
    e_.op("sshl {}, {}, 1", S(rKs), S(rKs));
    e_.op("br.ne {}, 0, {}", S(rKs), lNext);
    e_.op("smov {}, {}", S(rKs), C);
    e_.label(lNext);
    e_.op("br.lt {}, {}, {}", S(rKs), N, lPass);
    e_.op("sadd {}, {}, {}", S(rRow), S(rRow), N);
    e_.op("br.lt {}, {}, {}", S(rRow), rows * N, lRow);
  } else {
    e_.op("br.lt {}, {}, {}", S(rK), N, lK);
    e_.label(lDone);
    moveRows(false);
    e_.op("sadd {}, {}, 1", S(rC), S(rC));
    e_.op("br.lt {}, {}, {}", S(rC), nChunks, lChunk);
  }

  if (external)
    for (int64_t k = 0; k < nops; ++k) {
      auto ku = static_cast<size_t>(k);
      int es = esz[ku];
      std::vector<int64_t> rd = {outer, inner, n};
      l_.emitCopy((*outBufs)[ku], 0, dst[ku], 0, rd, {n * inner * es, es, inner * es}, {inner * N * es, N * es, es}, es);
    }
  else if (inner != 1)
    for (int64_t k = 0; k < nops; ++k) {
      auto ku = static_cast<size_t>(k);
      int es = esz[ku];
      std::vector<int64_t> rd = {outer, inner, n};
      l_.emitCopy((*outBufs)[ku], 0, dst[ku], 0, rd, {n * inner * es, es, inner * es}, byteStrides(rd, es), es);
    }
  int64_t p = 0;
  while ((int64_t{1} << p) < N) ++p;
  l_.endKernel(static_cast<double>(rows * N * p * (p + 1) / 2 * 2), bytes,
            static_cast<uint64_t>((overlap ? 3 : 2) * slotBytes));
  return !failed_;
}

bool SortEmitter::run() {
  if (!plan()) return false;
  if (empty) return true;
  if (!setupBuffers()) return false;
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  setupRegisters();
  lChunk = e_.newLabel("schunk");
  lInit = e_.newLabel("sidx");
  lK = e_.newLabel("smerge");
  lJ = e_.newLabel("sstep");
  lV = e_.newLabel("svreg");
  lDone = e_.newLabel("snetdone");
  lRow = e_.newLabel("srow");
  lPass = e_.newLabel("spass");
  lChunks = e_.newLabel("schunks");
  if (external && !streamPass()) return false;
  chunkIn();
  if (!network()) return false;
  return finish();
}


bool Lowerer::lowerSort(const Instruction& in) {
  SortEmitter sort(*this, in);
  return sort.run();
}

}  // namespace tpu::codegen
