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
#include "codegen/lowerer.h"

namespace tpu::codegen {

bool Lowerer::lowerSort(const Instruction& in) {
  beginKernel(in, "sort");
  const Computation* cmp = in.toApply();
  int64_t nops = in.operandCount();
  if (!cmp || nops == 0 || in.attrs().dimensions.size() != 1)
    return fail(in, "llo-gen: sort needs operands, one sort dimension and a comparator");
  const std::vector<int64_t>& dims = in.operand(0)->shape().dimensions();
  int64_t d = in.attrs().dimensions[0];
  if (d < 0 || d >= static_cast<int64_t>(dims.size()))
    return fail(in, "llo-gen: sort dimension out of range");
  int64_t n = dims[static_cast<size_t>(d)], inner = 1, outer = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int64_t>(i) < d) outer *= dims[i];
    if (static_cast<int64_t>(i) > d) inner *= dims[i];
  }
  int64_t rows = outer * inner;
  const std::vector<int>& outBufs = leaves_[&in];
  std::vector<int> src(static_cast<size_t>(nops)), dst(static_cast<size_t>(nops));
  std::vector<ElementType> types;
  std::vector<int> esz;
  uint64_t bytes = 0;
  for (int64_t k = 0; k < nops; ++k) {
    types.push_back(in.operand(k)->shape().elementType());
    esz.push_back(typeInfo(types.back()).bytes);
    bytes += 2 * bufs_[outBufs[static_cast<size_t>(k)]].bytes;
  }
  if (rows * n == 0) {
    endKernel(0, 0, 0);
    return true;
  }
  int64_t N = 1;
  while (N < n) N *= 2;
  if (N > (int64_t{1} << 28))
    return fail(in, fmt::format("llo-gen: sort dimension of {} elements is too long", n));
  // VMEM: two copies of every operand and of the original positions.
  uint64_t per = 4;
  for (int es : esz) per += static_cast<uint64_t>(es);
  uint64_t budget = vmemBudget();
  uint64_t slack = 2 * static_cast<uint64_t>(nops + 1) * (512 + 4096);
  int64_t maxElems = budget > slack ? static_cast<int64_t>((budget - slack) / (2 * per)) : 0;
  maxElems = std::min<int64_t>(maxElems, int64_t{1} << 24);
  int64_t R = std::min(rows, maxElems / N);
  if (R < 1)
    return fail(in, fmt::format("llo-gen: sort rows of {} elements (padded to {}) do not fit VMEM", n, N));
  int64_t nvr = (R * N + kVregElems - 1) / kVregElems;
  // Two vregs per iteration when registers allow (an extra vreg holds whole
  // padding rows: for N >= 2048 the count is already even).
  // (Not with 64-bit operands: their register pairs would not fit twice.)
  bool pair = nops <= 4 && std::none_of(types.begin(), types.end(), [](ElementType t) { return typeInfo(t).words > 1; });
  if (pair) nvr += nvr % 2;
  std::vector<int64_t> off(static_cast<size_t>(nops));
  uint64_t cur = 0;
  for (int64_t k = 0; k < nops; ++k) {
    off[static_cast<size_t>(k)] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(nvr * kVregElems * esz[static_cast<size_t>(k)]), 512);
  }
  int64_t offIdx = static_cast<int64_t>(cur);
  cur += alignUp(static_cast<uint64_t>(nvr * kVregElems * 4), 512);
  int64_t slotBytes = static_cast<int64_t>(alignUp(cur, 512));
  int64_t nChunks = (rows + R - 1) / R, tailR = rows - (nChunks - 1) * R;

  // Rows [outer, inner, n] in HBM.
  for (int64_t k = 0; k < nops; ++k) {
    auto ku = static_cast<size_t>(k);
    int inBuf = leaves_[in.operand(k)][0], es = esz[ku];
    if (inner == 1) {
      src[ku] = inBuf;
      dst[ku] = outBufs[ku];
      continue;
    }
    std::vector<int64_t> rd = {outer, inner, n};
    src[ku] = tempBuf(types[ku], rd);
    dst[ku] = tempBuf(types[ku], rd);
    emitCopy(src[ku], 0, inBuf, 0, rd, byteStrides(rd, es), {n * inner * es, es, inner * es}, es);
  }

  PoolGuard guard({&sregs_, &vregs_, &masks_});
  int rC = sreg(), rA = sreg(), rCur = sreg(), rOth = sreg(), rK = sreg(), rJ = sreg(), rD = sreg(),
      rJhi = sreg(), rE = sreg(), rCnt = sreg(), rT = sreg(), rX = sreg();
  VReg vLane = valloc(ElementType::S32), vSub = valloc(ElementType::S32), iota = valloc(ElementType::S32);
  VReg vL = valloc(ElementType::S32), vS = valloc(ElementType::S32);
  e_.op("vlaneid {}", V(vLane));
  e_.op("vsublaneid {}", V(vSub));
  e_.op("vmul.s32 {}, {}, 128", V(iota), V(vSub));
  e_.op("vadd.s32 {}, {}, {}", V(iota), V(iota), V(vLane));

  // DMA of r rows between HBM (n per row) and VMEM (N per row).
  auto rowsDesc = [&](int64_t r, int es, bool load) {
    if (n == N || r == 1) return e_.desc(static_cast<uint64_t>((r == 1 ? n : r * n) * es), {});
    int64_t h = n * es, v = N * es;
    return e_.desc(static_cast<uint64_t>(n * es), {{r, load ? h : v, load ? v : h}});
  };
  auto moveRows = [&](bool load) {
    for (int64_t k = 0; k < nops; ++k) {
      auto ku = static_cast<size_t>(k);
      int es = esz[ku], buf = load ? src[ku] : dst[ku];
      e_.op("smul {}, {}, {}", S(rA), S(rC), R * n * es);
      e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf));
      e_.op("sadd {}, {}, {}", S(rX), S(rCur), off[ku]);
      auto dma = [&](const std::string& ds) {
        if (load) e_.op("dma.h2v {}, [{}], {}[{}], sem0", ds, S(rX), hbm(buf), S(rA));
        else e_.op("dma.v2h {}, {}[{}], [{}], sem0", ds, hbm(buf), S(rA), S(rX));
      };
      if (nChunks == 1) {
        dma(rowsDesc(tailR, es, load));
      } else if (tailR == R) {
        dma(rowsDesc(R, es, load));
      } else {
        std::string lt = e_.newLabel("tail"), ld = e_.newLabel("dmadone");
        e_.op("br.eq {}, {}, {}", S(rC), nChunks - 1, lt);
        dma(rowsDesc(R, es, load));
        e_.op("jmp {}", ld);
        e_.label(lt);
        dma(rowsDesc(tailR, es, load));
        e_.label(ld);
      }
    }
    e_.op("sem.wait sem0, {}", nops);
  };
  auto addr = [&](int elemReg, int slotReg, int es, int64_t o) {
    e_.op("smul {}, {}, {}", S(rX), S(elemReg), es);
    e_.op("sadd {}, {}, {}", S(rX), S(rX), S(slotReg));
    return fmt::format("{} + {}", S(rX), o);
  };

  std::string lChunk = e_.newLabel("schunk"), lInit = e_.newLabel("sidx"), lK = e_.newLabel("smerge"),
              lJ = e_.newLabel("sstep"), lV = e_.newLabel("svreg"), lDone = e_.newLabel("snetdone");
  e_.op("smov {}, 0", S(rC));
  e_.label(lChunk);
  e_.op("smov {}, 0", S(rCur));
  e_.op("smov {}, {}", S(rOth), slotBytes);
  moveRows(true);
  // Original positions within the row (>= n: padding).
  e_.op("smov {}, 0", S(rE));
  e_.op("smov {}, {}", S(rCnt), nvr);
  e_.label(lInit);
  {
    VReg t = valloc(ElementType::S32);
    e_.op("vadd.s32 {}, {}, {}", V(t), V(iota), S(rE));
    e_.op("vand {}, {}, {}", V(t), V(t), N - 1);
    vstore(t, ElementType::S32, addr(rE, rCur, 4, offIdx));
    vfree(t);
  }
  e_.op("sadd {}, {}, {}", S(rE), S(rE), kVregElems);
  e_.op("loop {}, {}", S(rCnt), lInit);

  // for (k = 1; k < N; k *= 2) for (j = k; j >= 1; j /= 2): blocks of 2k
  // alternate direction (bit 2k of e), except in the last merge.
  e_.op("smov {}, 1", S(rK));
  e_.op("br.ge {}, {}, {}", S(rK), N, lDone);
  e_.label(lK);
  e_.op("sshl {}, {}, 1", S(rD), S(rK));
  e_.op("scmp.lt {}, {}, {}", S(rT), S(rD), N);
  e_.op("ssel {}, {}, {}, 0", S(rD), S(rT), S(rD));
  e_.op("smov {}, {}", S(rJ), S(rK));
  e_.label(lJ);
  e_.op("sand {}, {}, 127", S(rT), S(rJ));
  e_.op("vxor {}, {}, {}", V(vL), V(vLane), S(rT));
  e_.op("sshr {}, {}, 7", S(rT), S(rJ));
  e_.op("sand {}, {}, 7", S(rT), S(rT));
  e_.op("vxor {}, {}, {}", V(vS), V(vSub), S(rT));
  e_.op("sand {}, {}, {}", S(rJhi), S(rJ), -kVregElems);
  e_.op("smov {}, 0", S(rE));
  e_.op("smov {}, {}", S(rCnt), pair ? nvr / 2 : nvr);
  // One vreg of a step; two independent vregs are emitted with disjoint
  // registers and their ops interleaved, so one hides the other's latency.
  auto step = [&](int slotIdx) -> bool {
    int rEl = sreg(), rPE = sreg(), outerX = rX;
    rX = sreg();
    e_.op("sadd {}, {}, {}", S(rEl), S(rE), slotIdx * kVregElems);
    // Which value this element wants: the larger when it is the upper of
    // its pair in an ascending block or the lower in a descending one.
    VReg ev = valloc(ElementType::S32), t = valloc(ElementType::S32);
    e_.op("vadd.s32 {}, {}, {}", V(ev), V(iota), S(rEl));
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
      self.push_back(vload(ty, addr(rEl, rCur, es, o)));
      VReg p = vload(ty, addr(rPE, rCur, es, o));
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
    if (!lowerComputation(*cmp, argPS, cPS) || !lowerComputation(*cmp, argSP, cSP) || cPS.size() != 1 ||
        cSP.size() != 1) {
      if (!failed_) fail(in, "llo-gen: sort comparator must return one pred");
      return false;
    }
    int less = malloc_(), mSP = malloc_(), ilt = malloc_();
    e_.op("vcmp.ne.s32 {}, {}, 0", M(less), V(cPS[0]));
    e_.op("vcmp.eq.s32 {}, {}, 0", M(mSP), V(cSP[0]));
    e_.op("vcmp.lt.s32 {}, {}, {}", M(ilt), V(idxP), V(idxS));
    e_.op("mand {}, {}, {}", M(mSP), M(mSP), M(ilt));
    e_.op("mor {}, {}, {}", M(less), M(less), M(mSP));
    vfree(cPS[0]);
    vfree(cSP[0]);
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
    e_.op("mxor {}, {}, {}", M(less), M(less), M(wl));  // now: take the partner's value
    for (size_t k = 0; k < self.size(); ++k) {
      bool isIdx = k + 1 == self.size();
      ElementType ty = isIdx ? ElementType::S32 : types[k];
      int es = isIdx ? 4 : esz[k];
      int64_t o = isIdx ? offIdx : off[k];
      e_.op("vsel.s32 {}, {}, {}, {}", V(self[k]), M(less), V(part[k]), V(self[k]));
      for (auto [s, q] : {std::pair{self[k].hi, part[k].hi}, {self[k].im, part[k].im}, {self[k].imh, part[k].imh}})
        if (s >= 0) e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(s), M(less), vregs_.name(q), vregs_.name(s));
      vstore(self[k], ty, addr(rEl, rOth, es, o));
      vfree(self[k]);
      vfree(part[k]);
    }
    for (int m : {less, mSP, ilt, wl}) masks_.put(m);
    rX = outerX;
    return true;
  };
  e_.label(lV);
  if (!pair) {
    if (!step(0)) return false;
  } else {
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
    size_t at = e_.mark();
    if (!step(0)) return false;
    std::string codeA = e_.cut(at);
    for (size_t p = 0; p < pools.size(); ++p) {
      std::vector<bool> b = start[p];
      for (size_t i = 0; i < b.size(); ++i) b[i] = b[i] && !mineA[p][i];
      pools[p]->restore(b);
    }
    if (!step(1)) return false;
    std::string codeB = e_.cut(at);
    for (size_t p = 0; p < pools.size(); ++p) pools[p]->restore(start[p]);
    // Alternate the two streams line by line.
    size_t ia = 0, ib = 0;
    while (ia < codeA.size() || ib < codeB.size()) {
      for (std::string* c : {&codeA, &codeB}) {
        size_t& i = c == &codeA ? ia : ib;
        if (i >= c->size()) continue;
        size_t nl = c->find('\n', i);
        nl = nl == std::string::npos ? c->size() : nl + 1;
        e_.append(c->substr(i, nl - i));
        i = nl;
      }
    }
  }
  e_.op("sadd {}, {}, {}", S(rE), S(rE), (pair ? 2 : 1) * kVregElems);
  e_.op("loop {}, {}", S(rCnt), lV);
  e_.op("smov {}, {}", S(rT), S(rCur));
  e_.op("smov {}, {}", S(rCur), S(rOth));
  e_.op("smov {}, {}", S(rOth), S(rT));
  e_.op("sshr {}, {}, 1", S(rJ), S(rJ));
  e_.op("br.ne {}, 0, {}", S(rJ), lJ);
  e_.op("sshl {}, {}, 1", S(rK), S(rK));
  e_.op("br.lt {}, {}, {}", S(rK), N, lK);
  e_.label(lDone);
  moveRows(false);
  e_.op("sadd {}, {}, 1", S(rC), S(rC));
  e_.op("br.lt {}, {}, {}", S(rC), nChunks, lChunk);

  if (inner != 1)
    for (int64_t k = 0; k < nops; ++k) {
      auto ku = static_cast<size_t>(k);
      int es = esz[ku];
      std::vector<int64_t> rd = {outer, inner, n};
      emitCopy(outBufs[ku], 0, dst[ku], 0, rd, {n * inner * es, es, inner * es}, byteStrides(rd, es), es);
    }
  int64_t p = 0;
  while ((int64_t{1} << p) < N) ++p;
  endKernel(static_cast<double>(rows * N * p * (p + 1) / 2 * 2), bytes, static_cast<uint64_t>(2 * slotBytes));
  return !failed_;
}

}  // namespace tpu::codegen
