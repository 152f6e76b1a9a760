// The reduction kernel kinds: reduce rows (reduced dimensions outermost,
// folded row by row into output chunks) and reduce segments (reduced
// dimensions innermost, each row folded vreg by vreg then across lanes),
// and the lowering of an unfused reduce onto them.
#include <fmt/format.h>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/kernels/last_step.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

// ============================================================== reductions

namespace {

// How the row-folding kernel cuts an [r, k] reduction: output chunks of
// chunkV vregs (c columns, the last `tail`), blocks of rb rows (the last
// tailRb), and each operand's accumulator and block in VMEM (`end`: the
// first free byte after them).
struct RowChunks {
  int64_t chunkV = 0, c = 0, nChunks = 0, tail = 0, rb = 0, nBlocks = 0, tailRb = 0;
  std::vector<int64_t> accOff, xOff;
  uint64_t end = 0;
};

RowChunks rowChunks(int64_t r, int64_t k, const std::vector<int>& sizes, uint64_t budget) {
  RowChunks g;
  const size_t nv = sizes.size();
  uint64_t per = 0;
  for (size_t j = 0; j < nv; ++j) per += 2 * sizes[j];
  int64_t totalV = (k + kVregElems - 1) / kVregElems;
  int64_t chunkV = std::min<int64_t>({totalV, 64, std::max<int64_t>(1, budget / (per * kVregElems))});
  int64_t c = chunkV * kVregElems;
  int64_t nChunks = (k + c - 1) / c;
  int64_t tail = k - (nChunks - 1) * c;
  // Rows per block: what the budget holds beside the accumulators (and the
  // per-output slots, at most 2 vregs per operand).
  uint64_t accBytes = 0, rowBytes = 0;
  for (size_t j = 0; j < nv; ++j) {
    uint64_t es = static_cast<uint64_t>(sizes[j]);
    accBytes += alignUp(static_cast<uint64_t>(c) * es, 512) + 2 * alignUp(static_cast<uint64_t>(kVregElems) * es, 512);
    rowBytes += static_cast<uint64_t>(c) * es;
  }
  int64_t rb = budget > accBytes ? static_cast<int64_t>((budget - accBytes) / rowBytes) : 1;
  rb = std::max<int64_t>(1, std::min<int64_t>({rb, r, 1024}));
  int64_t nBlocks = (r + rb - 1) / rb, tailRb = r - (nBlocks - 1) * rb;
  std::vector<int64_t>& accOff = g.accOff;
  std::vector<int64_t>& xOff = g.xOff;
  accOff.assign(nv, 0);
  xOff.assign(nv, 0);
  uint64_t cur = 0;
  for (size_t j = 0; j < nv; ++j) {
    int es = sizes[j];
    accOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(c) * es, 512);
    xOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(rb * c) * es, 512);
  }
  g.chunkV = chunkV;
  g.c = c;
  g.nChunks = nChunks;
  g.tail = tail;
  g.rb = rb;
  g.nBlocks = nBlocks;
  g.tailRb = tailRb;
  g.end = cur;
  return g;
}

}  // namespace

// Reduced dimensions outermost: input [r, k] row-major, out [k]. Each
// output chunk starts at init and folds the r rows in order; the rows of
// a chunk arrive in blocks, one DMA per operand per block.
// The init values of a row reduction in registers (pairs and complex
// values too), each parked in its VMEM slot at once when `initSlot` is
// given (folding output by output: there may be more inits than registers).
void Lowerer::loadReduceInits(const std::vector<int>& initBufs, const std::vector<int64_t>* initSlot,
                              std::vector<VReg>& init, bool& anyPair, bool& anyQuad) {
  // (Parked in its VMEM slot as soon as it is loaded when folding output
  // by output: there may be more inits than registers.)
  auto park = [&](size_t j) {
    if (!initSlot) return;
    vstore(init[j], bufs_[initBufs[j]].type, fmt::format("{}", (*initSlot)[j]));
    vfree(init[j]);
  };
  for (size_t j = 0; j < initBufs.size(); ++j) {
    ElementType t = bufs_[initBufs[j]].type;
    if (typeInfo(t).isComplex) {
      anyPair = anyPair || t == ElementType::C64;
      anyQuad = anyQuad || t == ElementType::C128;
      int slot = 4 * static_cast<int>(j);  // consumed at once, so slots may overlap the next init's
      init[j] = hoistComplexScalar(initBufs[j], 0, t, slot);
      park(j);
      continue;
    }
    init[j] = valloc(t);
    if (isPairType(t)) {
      anyPair = true;
      int hi = -1, lo = loadScalarPair(initBufs[j], 0, 2 * static_cast<int>(j), hi);
      e_.op("vmov.s32 {}, {}", V(init[j]), S(lo));
      e_.op("vmov.s32 {}, {}", H(init[j]), S(hi));
      sregs_.put(lo);
      sregs_.put(hi);
      park(j);
      continue;
    }
    int sx = loadScalar(initBufs[j], 0, t, 2 * static_cast<int>(j));
    e_.op("vmov.s32 {}, {}", V(init[j]), S(sx));
    sregs_.put(sx);
    park(j);
  }
}

// One fold step of a row reduction: the accumulators (at rOff + accOff) and
// the inputs' current vreg (at rX + xOff) through the reducer, back into the
// accumulators; output by output through `resultSlot` when given.
bool Lowerer::foldReduceVreg(const Computation& reducer, const std::vector<int>& inBufs,
                             const std::vector<int64_t>* resultSlot, const int* rOff, const int* rX,
                             const std::vector<int64_t>& accOff, const std::vector<int64_t>& xOff) {
  const size_t nv = inBufs.size();
  if (resultSlot) {
    // Operand k of the reducer: accumulator k, or input k - nv.
    auto loadParam = [&](int64_t k) {
      size_t j = static_cast<size_t>(k) % nv;
      ElementType t = bufs_[inBufs[j]].type;
      int es = typeInfo(t).bytes;
      if (static_cast<size_t>(k) < nv) return vload(t, fmt::format("{} + {}", S(rOff[es]), accOff[j]));
      return vload(t, fmt::format("{} + {}", S(rX[es]), xOff[j]));
    };
    for (size_t j = 0; j < nv; ++j) {
      std::optional<VReg> v = lowerReducerOutput(reducer, static_cast<int64_t>(j), loadParam);
      if (!v) return false;
      vstore(*v, bufs_[inBufs[j]].type, fmt::format("{}", (*resultSlot)[j]));
      vfree(*v);
    }
    for (size_t j = 0; j < nv; ++j) {
      ElementType t = bufs_[inBufs[j]].type;
      VReg v = vload(t, fmt::format("{}", (*resultSlot)[j]));
      vstore(v, t, fmt::format("{} + {}", S(rOff[typeInfo(t).bytes]), accOff[j]));
      vfree(v);
    }
  } else {
    std::vector<VReg> args, owned;
    for (size_t j = 0; j < nv; ++j) {
      ElementType t = bufs_[inBufs[j]].type;
      args.push_back(vload(t, fmt::format("{} + {}", S(rOff[typeInfo(t).bytes]), accOff[j])));
    }
    for (size_t j = 0; j < nv; ++j) {
      ElementType t = bufs_[inBufs[j]].type;
      args.push_back(vload(t, fmt::format("{} + {}", S(rX[typeInfo(t).bytes]), xOff[j])));
    }
    std::vector<VReg> res;
    if (!lowerComputation(reducer, args, res)) return false;
    for (size_t j = 0; j < nv; ++j) {
      ElementType t = bufs_[inBufs[j]].type;
      vstore(res[j], t, fmt::format("{} + {}", S(rOff[typeInfo(t).bytes]), accOff[j]));
      vfree(res[j]);
    }
    for (VReg v : args) vfree(v);
  }
  return true;
}

// One DMA of output chunk rC (of `c` elements of `es` bytes, the last of
// nChunks `tail`) between `buf` and VMEM voff; rA is scratch.
void Lowerer::emitChunkDma(bool load, int buf, int64_t voff, int es, int64_t c, int64_t tail, int64_t nChunks, int rA,
                           int rC) {
  std::string full = e_.desc(static_cast<uint64_t>(c * es), {});
  std::string part = e_.desc(static_cast<uint64_t>(tail * es), {});
  e_.op("smul {}, {}, {}", S(rA), S(rC), c * es);
  e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf));
  auto dma = [&](const std::string& d) {
    if (load)
      e_.op("{} {}, [{}], {}, sem0", dmaOp("h2v", buf), d, voff, memRef(buf, S(rA)));
    else
      e_.op("{} {}, {}, [{}], sem0", dmaOp("v2h", buf), d, memRef(buf, S(rA)), voff);
  };
  emitFullOrLastStep(e_, S(rC), nChunks, tail == c, [&] { dma(full); }, [&] { dma(part); });
}

bool Lowerer::emitReduceRows(const Instruction& in, int64_t r, int64_t k, const std::vector<int>& inBufs,
                             const std::vector<int>& initBufs, const std::vector<int>& outBufs,
                             const Computation& reducer) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  size_t nv = inBufs.size();
  std::vector<int> sizes;
  for (int b : inBufs) sizes.push_back(typeInfo(bufs_[b].type).bytes);
  RowChunks g = rowChunks(r, k, sizes, vmemBudget());
  const int64_t chunkV = g.chunkV, c = g.c, nChunks = g.nChunks, tail = g.tail, rb = g.rb, nBlocks = g.nBlocks,
                tailRb = g.tailRb;
  const std::vector<int64_t>& accOff = g.accOff, &xOff = g.xOff;
  uint64_t cur = g.end;
  // Folding all operands at once holds an init, an accumulator, an input
  // and a result register set per operand. When that would not fit the
  // register file (many operands), each output of the reducer is computed
  // on its own from operands loaded as it needs them, into a one-vreg VMEM
  // slot, and the slots replace the accumulators once all outputs are
  // done; the inits wait in VMEM slots too.
  int words = 0;
  for (size_t j = 0; j < nv; ++j) words += typeInfo(bufs_[inBufs[j]].type).words;
  bool perOutput = nv > 1 && 4 * words + 8 > target_.registers.vregs && reducer.root()->opcode() == Opcode::Tuple;
  std::vector<int64_t> initSlot(nv), resultSlot(nv);
  if (perOutput) {
    for (size_t j = 0; j < nv; ++j) {
      uint64_t vregBytes = static_cast<uint64_t>(kVregElems) * typeInfo(bufs_[inBufs[j]].type).bytes;
      initSlot[j] = static_cast<int64_t>(cur);
      cur += alignUp(vregBytes, 512);
      resultSlot[j] = static_cast<int64_t>(cur);
      cur += alignUp(vregBytes, 512);
    }
    if (cur > vmemBudget())
      return fail(in, fmt::format("llo-gen: the {} operands of this reduction do not fit VMEM", nv));
  }
  std::vector<VReg> init(nv);
  bool anyPair = false, anyQuad = false;
  loadReduceInits(initBufs, perOutput ? &initSlot : nullptr, init, anyPair, anyQuad);
  int rC = sreg(), rR = sreg(), rA = sreg(), rT = sreg(), rCnt = sreg(), rO4 = sreg(), rO2 = sreg(), rO1 = sreg();
  int rO8 = anyPair ? sreg() : -1, rO16 = anyQuad ? sreg() : -1;
  int rOff[17] = {-1, rO1, rO2, -1, rO4, -1, -1, -1, rO8, -1, -1, -1, -1, -1, -1, -1, rO16};
  // The current row of a block: its index, the block's row count, and the
  // VMEM offset of the vreg being folded for each input element size.
  int rIn = sreg(), rRows = sreg();
  int rX[17];
  std::fill(std::begin(rX), std::end(rX), -1);
  std::set<int> inSizes;
  for (size_t j = 0; j < nv; ++j) inSizes.insert(typeInfo(bufs_[inBufs[j]].type).bytes);
  for (int es : inSizes) rX[es] = sreg();
  std::string lChunk = e_.newLabel("rchunk"), lRow = e_.newLabel("rrow"), lInit = e_.newLabel("rinit"),
              lFold = e_.newLabel("rfold");
  auto resetOffs = [&]() {
    e_.op("smov {}, 0", S(rO4));
    e_.op("smov {}, 0", S(rO2));
    e_.op("smov {}, 0", S(rO1));
    if (anyPair) e_.op("smov {}, 0", S(rO8));
    if (anyQuad) e_.op("smov {}, 0", S(rO16));
  };
  auto stepOffs = [&]() {
    e_.op("sadd {}, {}, 4096", S(rO4), S(rO4));
    e_.op("sadd {}, {}, 2048", S(rO2), S(rO2));
    e_.op("sadd {}, {}, 1024", S(rO1), S(rO1));
    if (anyPair) e_.op("sadd {}, {}, 8192", S(rO8), S(rO8));
    if (anyQuad) e_.op("sadd {}, {}, 16384", S(rO16), S(rO16));
  };
  e_.op("smov {}, 0", S(rC));
  e_.label(lChunk);
  resetOffs();
  e_.op("smov {}, {}", S(rCnt), chunkV);
  e_.label(lInit);
  for (size_t j = 0; j < nv; ++j) {
    ElementType t = bufs_[inBufs[j]].type;
    if (perOutput) {
      VReg v = vload(t, fmt::format("{}", initSlot[j]));
      vstore(v, t, fmt::format("{} + {}", S(rOff[typeInfo(t).bytes]), accOff[j]));
      vfree(v);
      continue;
    }
    vstore(init[j], t, fmt::format("{} + {}", S(rOff[typeInfo(t).bytes]), accOff[j]));
  }
  stepOffs();
  e_.op("loop {}, {}", S(rCnt), lInit);
  // Rows [rR, rR + rows) of the chunk's columns: one box DMA per operand.
  auto dmaBlock = [&](int buf, int64_t voff, int es) {
    e_.op("smul {}, {}, {}", S(rA), S(rC), c * es);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf));
    e_.op("smul {}, {}, {}", S(rT), S(rR), k * es);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), S(rT));
    // reg never passes `last`, the tail's index.
    auto either = [&](bool exists, int reg, int64_t last, const std::function<void(bool)>& gen) {
      if (!exists) return gen(false);
      emitEdgeBranch(reg, last, gen);
    };
    either(nChunks > 1 && tail != c, rC, nChunks - 1, [&](bool tailCols) {
      either(nBlocks > 1 && tailRb != rb, rR, (nBlocks - 1) * rb, [&](bool tailRows) {
        int64_t cols = tailCols || nChunks == 1 ? tail : c;
        int64_t rows = tailRows || nBlocks == 1 ? tailRb : rb;
        std::vector<Emitter::Dim> dims;
        if (rows > 1) dims.push_back({rows, k * es, c * es});
        e_.op("{} {}, [{}], {}, sem0", dmaOp("h2v", buf), e_.desc(static_cast<uint64_t>(cols * es), dims), voff, memRef(buf, S(rA)));
      });
    });
  };
  std::string lBlockRow = e_.newLabel("rblockrow");
  e_.op("smov {}, 0", S(rR));
  e_.label(lRow);
  for (size_t j = 0; j < nv; ++j) dmaBlock(inBufs[j], xOff[j], typeInfo(bufs_[inBufs[j]].type).bytes);
  e_.op("sem.wait sem0, {}", nv);
  e_.op("smov {}, {}", S(rRows), nBlocks == 1 ? tailRb : rb);
  if (nBlocks > 1 && tailRb != rb) {
    std::string l = e_.newLabel("fullblock");
    e_.op("br.ne {}, {}, {}", S(rR), (nBlocks - 1) * rb, l);
    e_.op("smov {}, {}", S(rRows), tailRb);
    e_.label(l);
  }
  e_.op("smov {}, 0", S(rIn));
  e_.label(lBlockRow);
  for (int es : inSizes) e_.op("smul {}, {}, {}", S(rX[es]), S(rIn), c * es);
  resetOffs();
  e_.op("smov {}, {}", S(rCnt), chunkV);
  e_.label(lFold);
  if (!foldReduceVreg(reducer, inBufs, perOutput ? &resultSlot : nullptr, rOff, rX, accOff, xOff)) return false;
  stepOffs();
  for (int es : inSizes) e_.op("sadd {}, {}, {}", S(rX[es]), S(rX[es]), kVregElems * es);
  e_.op("loop {}, {}", S(rCnt), lFold);
  e_.op("sadd {}, {}, 1", S(rIn), S(rIn));
  e_.op("br.lt {}, {}, {}", S(rIn), S(rRows), lBlockRow);
  e_.op("sadd {}, {}, {}", S(rR), S(rR), rb);
  e_.op("br.lt {}, {}, {}", S(rR), r, lRow);
  for (size_t j = 0; j < nv; ++j)
    emitChunkDma(false, outBufs[j], accOff[j], typeInfo(bufs_[outBufs[j]].type).bytes, c, tail, nChunks, rA, rC);
  e_.op("sem.wait sem0, {}", nv);
  e_.op("sadd {}, {}, 1", S(rC), S(rC));
  e_.op("br.lt {}, {}, {}", S(rC), nChunks, lChunk);
  (void)in;
  return !failed_;
}

// Reduced dimensions innermost: input [k, r] row-major, out [k]. Each row
// is folded vreg by vreg (the tail masked to init), then across lanes and
// sublanes by rotations.
//
// The phases of that kernel and the state they share: the plan (batch and
// segment sizes, VMEM offsets), the init values, the registers its loops
// keep and the row's accumulators. A friend of Lowerer: the phases use the
// lowering state as the kernel's member functions do.
class SegmentReduceEmitter : KernelPhases {
 public:
  SegmentReduceEmitter(Lowerer& l, const Instruction& in, int64_t k, int64_t r, const std::vector<int>& inBufs,
                       const std::vector<int>& initBufs, const std::vector<int>& outBufs, const Computation& reducer,
                       const ReducePrologue* prologue)
      : KernelPhases(l, in), k(k), r(r), initBufs(initBufs), outBufs(outBufs), reducer(reducer), prologue(prologue),
        ldBufs(prologue ? prologue->streamedBufs : inBufs),
        sideBufs(prologue ? prologue->sideBufs : std::vector<int>{}) {}
  bool run();

 private:
  bool plan();
  bool loadInits();
  void makeTailMask();
  bool reduceAll(const std::vector<VReg>& args, std::vector<VReg>& res);
  void dmaBatch(bool load);
  void issueSegment(int seg, int64_t segIndex, int64_t elems, int slot);
  void waitSegment(int slot);
  void startRow();
  VReg loadRow(size_t j);
  std::optional<std::vector<VReg>> loadInputs();
  bool foldOne(bool masked);
  bool foldRun(int64_t count, const std::string& label);
  bool foldRowVregs();
  bool foldAcrossLanes();
  bool storeRow();

  const int64_t k, r;
  const std::vector<int>& initBufs;
  const std::vector<int>& outBufs;
  const Computation& reducer;
  const ReducePrologue* prologue;
  // The buffers streamed through VMEM: the reduce's inputs, or with a
  // prologue (an input fusion) the fused parameters they are computed from;
  // and the prologue's side outputs of the input's shape, written per batch.
  const std::vector<int> ldBufs, sideBufs;
  // Reduced values (nv), reduced leaves written (no), streamed buffers (nl).
  size_t nv = 0, no = 0, nl = 0;
  // The plan: segV vregs per segment (0: rows held whole), `rows` rows per
  // batch (the last tailRows), and the VMEM offsets of each buffer.
  int64_t segV = 0, rows = 0, nBatches = 0, tailRows = 0, segDelta = 0;
  std::vector<int64_t> xOff, oOff, sOff;
  std::vector<VReg> init;
  std::map<const Instruction*, VReg> hoisted;  // a prologue's scalar parameters, splatted
  int64_t fullV = 0, rem = 0, segments = 1, lastElems = 0;
  int tailMask = -1;
  int rB = -1, rA = -1, rRow = -1, rRows = -1, rX[3] = {-1, -1, -1}, rCnt = -1, rO = -1;
  int rSeg = -1, rSegOff = -1, rSlot = -1, rSem = -1, rNext = -1, rNextSeg = -1;
  std::string lBatch, lRow, lV;
  std::vector<int> rS;    // this row's write offsets into the side outputs
  std::vector<VReg> acc;  // the row's accumulators
  // With no full vreg in a row, which accumulator elements hold a partial
  // result yet (the lane tree tracks it).
  VReg valid{};
};

// Batches of rows (or segments of one long row): sizes and VMEM offsets.
bool SegmentReduceEmitter::plan() {
  // With a prologue, the reduced leaves (outBufs) may be epilogue values.
  nv = outBufs.size();
  no = outBufs.size();
  nl = ldBufs.size();
  if (prologue) {
    nv = 0;
    for (const Instruction* red : prologue->reduces) nv += static_cast<size_t>(red->operandCount() / 2);
  }
  uint64_t rowBytes = 0;
  for (int b : ldBufs) rowBytes += static_cast<uint64_t>(r) * typeInfo(bufs_[b].type).bytes;
  for (int b : sideBufs) rowBytes += static_cast<uint64_t>(r) * typeInfo(bufs_[b].type).bytes;
  uint64_t budget = l_.vmemBudget();
  // A row too long for VMEM streams through it in segments of segV vregs,
  // one row per batch. The fold visits the same vregs in the same order
  // either way, so the result does not depend on the segment size.
  if (rowBytes + 8192 > budget) {
    uint64_t perVreg = 0;
    for (int b : ldBufs) perVreg += static_cast<uint64_t>(kVregElems) * typeInfo(bufs_[b].type).bytes;
    uint64_t room = budget > 8192 * (nl + nv + 1) ? budget - 8192 * (nl + nv + 1) : 0;
    // Two slots: segment s + 1 loads while segment s is folded.
    segV = static_cast<int64_t>(room / (2 * perVreg));
    if (segV < 2) return l_.fail(in, fmt::format("llo-gen: reduction rows of {} elements do not fit VMEM", r));
  }
  rows = segV ? 1 : std::max<int64_t>(1, std::min<int64_t>(k, static_cast<int64_t>((budget / 2) / (rowBytes + 16))));
  rows = std::min<int64_t>(rows, 4096);
  nBatches = (k + rows - 1) / rows;
  tailRows = k - (nBatches - 1) * rows;
  xOff.assign(nl, 0);
  oOff.assign(no, 0);
  sOff.assign(sideBufs.size(), 0);
  uint64_t cur = 0;
  for (size_t j = 0; j < nl; ++j) {
    int es = typeInfo(bufs_[ldBufs[j]].type).bytes;
    xOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(segV ? segV * kVregElems : rows * r) * es + 4096, 512);
  }
  // Segments: slot 1 of every streamed buffer lies segDelta above slot 0.
  segDelta = segV ? static_cast<int64_t>(cur) : 0;
  if (segV) cur *= 2;
  for (size_t j = 0; j < sideBufs.size(); ++j) {
    // (A row's last vreg spills into the next row's place, rewritten next,
    // or into this padding.)
    int es = typeInfo(bufs_[sideBufs[j]].type).bytes;
    sOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(rows * r) * es + 4096, 512);
  }
  if (segV && !sideBufs.empty())
    return l_.fail(in, "llo-gen: internal error: side outputs of a reduction streamed in segments");
  for (size_t j = 0; j < no; ++j) {
    oOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(rows) * typeInfo(bufs_[outBufs[j]].type).bytes + 1024, 512);
  }
  fullV = r / kVregElems;
  rem = r % kVregElems;
  segments = segV ? (fullV + (rem ? 1 : 0) + segV - 1) / segV : 1;
  lastElems = segV ? r - (segments - 1) * segV * kVregElems : 0;
  return true;
}

// The init values in registers, splatted once for the whole kernel; with a
// prologue also its scalar parameters (and inits that are constants).
bool SegmentReduceEmitter::loadInits() {
  init.assign(nv, VReg{});
  if (prologue) {
    int smem = 0;
    for (const auto& [param, buf] : prologue->scalars) {
      int sx = l_.loadScalar(buf, 0, param->shape().elementType(), smem++);
      VReg v = valloc(param->shape().elementType());
      e_.op("vmov.s32 {}, {}", V(v), S(sx));
      sregs_.put(sx);
      hoisted[param] = v;
    }
    std::vector<const Instruction*> inits;
    for (const Instruction* red : prologue->reduces)
      for (int64_t i = red->operandCount() / 2; i < red->operandCount(); ++i) inits.push_back(red->operand(i));
    for (size_t j = 0; j < nv; ++j) {
      const Instruction* x = inits[j];
      if (auto it = hoisted.find(x); it != hoisted.end()) {
        init[j] = l_.vcopy(it->second, it->second.t);
      } else {
        auto v = l_.lowerOp(*x, {});  // a scalar constant
        if (!v) return false;
        init[j] = *v;
      }
    }
    return true;
  }
  for (size_t j = 0; j < nv; ++j) {
    int sx = l_.loadScalar(initBufs[j], 0, bufs_[initBufs[j]].type, static_cast<int>(j));
    init[j] = valloc(bufs_[initBufs[j]].type);
    e_.op("vmov.s32 {}, {}", V(init[j]), S(sx));
    sregs_.put(sx);
  }
  return true;
}

// The mask of a row's last, partial vreg: its first `rem` elements.
void SegmentReduceEmitter::makeTailMask() {
  if (!rem) return;
  VReg idx = valloc(ElementType::S32), t = valloc(ElementType::S32);
  e_.op("vsublaneid {}", V(idx));
  e_.op("vmul.s32 {}, {}, 128", V(idx), V(idx));
  e_.op("vlaneid {}", V(t));
  e_.op("vadd.s32 {}, {}, {}", V(idx), V(idx), V(t));
  tailMask = malloc_();
  e_.op("vcmp.lt.s32 {}, {}, {}", M(tailMask), V(idx), rem);
  vfree(idx);
  vfree(t);
}

// The reducer on (accumulators..., inputs...); with several reduces, each
// one's computation on its own operands.
bool SegmentReduceEmitter::reduceAll(const std::vector<VReg>& args, std::vector<VReg>& res) {
  if (!prologue || prologue->reduces.size() <= 1) return l_.lowerComputation(reducer, args, res);
  size_t at = 0;
  for (const Instruction* red : prologue->reduces) {
    size_t n = static_cast<size_t>(red->operandCount() / 2);
    std::vector<VReg> a(args.begin() + at, args.begin() + at + n), out;
    a.insert(a.end(), args.begin() + nv + at, args.begin() + nv + at + n);
    if (!l_.lowerComputation(*red->toApply(), a, out)) return false;
    res.insert(res.end(), out.begin(), out.end());
    at += n;
  }
  return true;
}

// Batch rB's rows in (the streamed buffers) or out (the reduced leaves and
// the side outputs), the last batch's shorter DMA behind a branch.
void SegmentReduceEmitter::dmaBatch(bool load) {
  size_t count = load ? nl : no + sideBufs.size();
  for (size_t j = 0; j < count; ++j) {
    bool sideOut = !load && j >= no;
    int b = load ? ldBufs[j] : sideOut ? sideBufs[j - no] : outBufs[j];
    int es = typeInfo(bufs_[b].type).bytes;
    int64_t unit = load || sideOut ? r * es : es;
    std::string full = e_.desc(static_cast<uint64_t>(rows * unit), {});
    std::string part = e_.desc(static_cast<uint64_t>(tailRows * unit), {});
    e_.op("smul {}, {}, {}", S(rA), S(rB), rows * unit);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(b));
    auto dma = [&](const std::string& d) {
      if (load) e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", b), d, xOff[j], l_.memRef(b, S(rA)));
      else e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", b), d, l_.memRef(b, S(rA)), sideOut ? sOff[j - no] : oOff[j]);
    };
    emitFullOrLastStep(e_, S(rB), nBatches, tailRows == rows, [&] { dma(full); }, [&] { dma(part); });
  }
  e_.op("sem.wait sem0, {}", count);
}

// Segment `seg` (an sreg, or the constant segIndex when seg < 0) of the
// row: `elems` elements into VMEM slot `slot` (an sreg: 0 or 1) on
// semaphore 1 + slot. Segments are double-buffered: segment s + 1 is
// issued before segment s is folded (issueSegment), and the fold of a
// segment starts with waitSegment, which points the row's read registers
// at its slot.
void SegmentReduceEmitter::issueSegment(int seg, int64_t segIndex, int64_t elems, int slot) {
  e_.op("sadd {}, {}, 1", S(rSem), S(slot));
  for (size_t j = 0; j < nl; ++j) {
    int b = ldBufs[j];
    int es = typeInfo(bufs_[b].type).bytes;
    e_.op("smul {}, {}, {}", S(rA), S(rB), r * es);
    if (seg >= 0) {
      e_.op("smul {}, {}, {}", S(rSegOff), S(seg), segV * kVregElems * es);
      e_.op("sadd {}, {}, {}", S(rA), S(rA), S(rSegOff));
    } else {
      e_.op("sadd {}, {}, {}", S(rA), S(rA), segIndex * segV * kVregElems * es);
    }
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(b));
    e_.op("smul {}, {}, {}", S(rSegOff), S(slot), segDelta);
    e_.op("sadd {}, {}, {}", S(rSegOff), S(rSegOff), xOff[j]);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", b), e_.desc(static_cast<uint64_t>(elems * es), {}), S(rSegOff),
          l_.memRef(b, S(rA)), S(rSem));
  }
}

void SegmentReduceEmitter::waitSegment(int slot) {
  e_.op("sadd {}, {}, 1", S(rSem), S(slot));
  e_.op("sem.wait sem[{}], {}", S(rSem), nl);
  for (size_t j = 0; j < nl; ++j) e_.op("smul {}, {}, {}", S(rX[j]), S(slot), segDelta);
}

// The batch's row count, and the top of the row loop: the row's read
// offsets into the streamed buffers and write offsets into the side outputs.
void SegmentReduceEmitter::startRow() {
  e_.op("smov {}, {}", S(rRows), rows);
  if (tailRows != rows) {
    std::string l = e_.newLabel("fullbatch");
    e_.op("br.ne {}, {}, {}", S(rB), nBatches - 1, l);
    e_.op("smov {}, {}", S(rRows), tailRows);
    e_.label(l);
  }
  e_.op("smov {}, 0", S(rRow));
  e_.label(lRow);
  for (size_t j = 0; j < nl; ++j) {
    int es = typeInfo(bufs_[ldBufs[j]].type).bytes;
    e_.op("smul {}, {}, {}", S(rX[j]), S(rRow), r * es);
  }
  rS.clear();
  for (int b : sideBufs) {
    rS.push_back(sreg());
    e_.op("smul {}, {}, {}", S(rS.back()), S(rRow), r * typeInfo(bufs_[b].type).bytes);
  }
}

VReg SegmentReduceEmitter::loadRow(size_t j) {
  ElementType t = bufs_[ldBufs[j]].type;
  VReg x = l_.vload(t, fmt::format("{} + {}", S(rX[j]), xOff[j]));
  e_.op("sadd {}, {}, {}", S(rX[j]), S(rX[j]), kVregElems * typeInfo(t).bytes);
  return x;
}

// The reduce's inputs at the next vreg: loaded, or computed by the
// prologue from the loaded parameters (its side outputs stored on the way).
std::optional<std::vector<VReg>> SegmentReduceEmitter::loadInputs() {
  std::vector<VReg> xs;
  if (!prologue) {
    for (size_t j = 0; j < nv; ++j) xs.push_back(loadRow(j));
    return xs;
  }
  std::vector<VReg> loaded;
  for (size_t j = 0; j < nl; ++j) loaded.push_back(loadRow(j));
  auto values = l_.evalReducePrologue(*prologue, loaded, hoisted);
  if (!values) return std::nullopt;
  for (size_t j = 0; j < sideBufs.size(); ++j) {
    VReg v = (*values)[nv + j];
    ElementType t = bufs_[sideBufs[j]].type;
    l_.vstore(v, t, fmt::format("{} + {}", S(rS[j]), sOff[j]));
    e_.op("sadd {}, {}, {}", S(rS[j]), S(rS[j]), kVregElems * typeInfo(t).bytes);
    vfree(v);
  }
  values->resize(nv);
  return values;
}

// The next vreg folded into the accumulators (only the tail mask's
// elements when `masked`).
bool SegmentReduceEmitter::foldOne(bool masked) {
  std::vector<VReg> args = acc;
  auto loadedXs = loadInputs();
  if (!loadedXs) return false;
  std::vector<VReg> xs = *loadedXs;
  args.insert(args.end(), xs.begin(), xs.end());
  std::vector<VReg> res;
  if (!reduceAll(args, res)) return false;
  for (size_t j = 0; j < nv; ++j) {
    if (masked) e_.op("vsel.s32 {}, {}, {}, {}", V(acc[j]), M(tailMask), V(res[j]), V(acc[j]));
    else e_.op("vmov.s32 {}, {}", V(acc[j]), V(res[j]));
    vfree(res[j]);
    vfree(xs[j]);
  }
  return true;
}

// `count` full vregs from the row's VMEM slots.
bool SegmentReduceEmitter::foldRun(int64_t count, const std::string& label) {
  if (count <= 0) return true;
  e_.op("smov {}, {}", S(rCnt), count);
  e_.label(label);
  if (!foldOne(false)) return false;
  e_.op("loop {}, {}", S(rCnt), label);
  return true;
}

// The row's vregs folded into `acc`, in order: the first vreg is the
// accumulators' start, then the full vregs (segment by segment when the
// row streams), then the masked tail.
//
// The init value is folded in once, after the row's elements have been
// combined (the interpreter folds it in once too; the reducer need not
// have an identity). Until then an element of the accumulator holds a
// partial result only where `valid` says so.
bool SegmentReduceEmitter::foldRowVregs() {
  if (segV) {
    // Segment 0 into slot 0, segment 1 into slot 1, then fold segment 0.
    e_.op("smov {}, 0", S(rSlot));
    issueSegment(-1, 0, std::min<int64_t>(r, segV * kVregElems), rSlot);
    e_.op("smov {}, 1", S(rNext));
    if (segments > 1) issueSegment(-1, 1, segments > 2 ? segV * kVregElems : lastElems, rNext);
    waitSegment(rSlot);
  }
  auto first = loadInputs();
  if (!first) return false;
  acc = *first;
  // With at least one full vreg every element is valid from the start;
  // otherwise only the first `rem` are, and the lane tree tracks validity.
  valid = VReg{};
  if (fullV == 0) {
    valid = valloc(ElementType::S32);
    e_.op("vmov.s32 {}, 1", V(valid));
    e_.op("vsel.s32 {}, {}, {}, 0", V(valid), M(tailMask), V(valid));
  }
  if (segments == 1) {
    if (!foldRun(fullV - 1, lV)) return false;
  } else {
    // Segment 0 is loaded; then the full middle segments; then the last,
    // whose full vregs come before the masked tail.
    if (!foldRun(segV - 1, lV)) return false;
    if (segments > 2) {
      // Segment rSeg is in slot rSeg & 1; segment rSeg + 1 goes to the
      // other slot, which segment rSeg - 1 has left.
      std::string lSeg = e_.newLabel("segment");
      e_.op("smov {}, 1", S(rSeg));
      e_.label(lSeg);
      e_.op("sand {}, {}, 1", S(rSlot), S(rSeg));
      e_.op("sxor {}, {}, 1", S(rNext), S(rSlot));
      e_.op("sadd {}, {}, 1", S(rSegOff), S(rSeg));
      std::string lLast = e_.newLabel("seglast"), lIssued = e_.newLabel("segissued");
      e_.op("br.eq {}, {}, {}", S(rSegOff), segments - 1, lLast);
      e_.op("sadd {}, {}, 1", S(rNextSeg), S(rSeg));
      issueSegment(rNextSeg, 0, segV * kVregElems, rNext);
      e_.op("jmp {}", lIssued);
      e_.label(lLast);
      issueSegment(-1, segments - 1, lastElems, rNext);
      e_.label(lIssued);
      waitSegment(rSlot);
      if (!foldRun(segV, e_.newLabel("svreg"))) return false;
      e_.op("sadd {}, {}, 1", S(rSeg), S(rSeg));
      e_.op("br.lt {}, {}, {}", S(rSeg), segments - 1, lSeg);
    }
    e_.op("smov {}, {}", S(rSlot), (segments - 1) & 1);
    waitSegment(rSlot);
    if (!foldRun(fullV - (segments - 1) * segV, e_.newLabel("svreg"))) return false;
  }
  if (rem && fullV > 0 && !foldOne(true)) return false;
  return true;
}

// Across lanes, then sublanes: every element ends up with the total; then
// the init value folded in.
bool SegmentReduceEmitter::foldAcrossLanes() {
  int accValid = valid.r >= 0 ? malloc_() : -1, rotValid = valid.r >= 0 ? malloc_() : -1;
  for (int step : {64, 32, 16, 8, 4, 2, 1, -4, -2, -1}) {
    std::vector<VReg> args = acc, rot;
    auto rotate = [&](VReg v) {
      VReg t = valloc(v.t);
      if (step > 0) e_.op("vrot.lane {}, {}, {}", V(t), V(v), step);
      else e_.op("vrot.sub {}, {}, {}", V(t), V(v), -step);
      return t;
    };
    for (size_t j = 0; j < nv; ++j) {
      rot.push_back(rotate(acc[j]));
      args.push_back(rot.back());
    }
    std::vector<VReg> res;
    if (!reduceAll(args, res)) return false;
    VReg validRot{};
    if (valid.r >= 0) {
      validRot = rotate(valid);
      e_.op("vcmp.ne.s32 {}, {}, 0", M(accValid), V(valid));
      e_.op("vcmp.ne.s32 {}, {}, 0", M(rotValid), V(validRot));
    }
    for (size_t j = 0; j < nv; ++j) {
      if (valid.r >= 0) {
        // both valid: combined; only acc: acc; acc invalid: the rotated one.
        e_.op("vsel.s32 {}, {}, {}, {}", V(res[j]), M(rotValid), V(res[j]), V(acc[j]));
        e_.op("vsel.s32 {}, {}, {}, {}", V(acc[j]), M(accValid), V(res[j]), V(rot[j]));
      } else {
        e_.op("vmov.s32 {}, {}", V(acc[j]), V(res[j]));
      }
      vfree(res[j]);
      vfree(rot[j]);
    }
    if (valid.r >= 0) {
      e_.op("vor {}, {}, {}", V(valid), V(valid), V(validRot));
      vfree(validRot);
    }
  }
  {
    std::vector<VReg> args = init, res;
    args.insert(args.end(), acc.begin(), acc.end());
    if (!reduceAll(args, res)) return false;
    for (size_t j = 0; j < nv; ++j) {
      e_.op("vmov.s32 {}, {}", V(acc[j]), V(res[j]));
      vfree(res[j]);
    }
  }
  if (valid.r >= 0) {
    vfree(valid);
    masks_.put(accValid);
    masks_.put(rotValid);
  }
  return true;
}

// The row's results (through the prologue's epilogue) into element rRow of
// the batch's output slots; the row's registers released.
bool SegmentReduceEmitter::storeRow() {
  std::vector<VReg> outVals = acc, epilogueOwned;
  if (prologue) {
    auto values = l_.evalReduceEpilogue(*prologue, acc, hoisted, epilogueOwned);
    if (!values) return false;
    outVals = *values;
  }
  for (size_t j = 0; j < no; ++j) {
    int es = typeInfo(bufs_[outBufs[j]].type).bytes;
    e_.op("smul {}, {}, {}", S(rO), S(rRow), es);
    l_.vstore(outVals[j], bufs_[outBufs[j]].type, fmt::format("{} + {}", S(rO), oOff[j]), ", mask=0x1");
  }
  for (VReg v : epilogueOwned) vfree(v);
  for (size_t j = 0; j < nv; ++j) vfree(acc[j]);
  for (int reg : rS) sregs_.put(reg);
  return true;
}

// Batches of rows, each row folded and stored; the batch written back.
bool SegmentReduceEmitter::run() {
  if (!plan() || !loadInits()) return false;
  makeTailMask();
  rB = sreg();
  rA = sreg();
  rRow = sreg();
  rRows = sreg();
  for (int& reg : rX) reg = sreg();
  rCnt = sreg();
  rO = sreg();
  if (nv > 3 || nl > 3)
    return l_.fail(in, "llo-gen: internal error: the segment reduction kernel takes at most 3 operands");
  lBatch = e_.newLabel("sbatch");
  lRow = e_.newLabel("srow");
  lV = e_.newLabel("svreg");
  e_.op("smov {}, 0", S(rB));
  e_.label(lBatch);
  if (segV) {
    rSeg = sreg();
    rSegOff = sreg();
    rSlot = sreg();
    rSem = sreg();
    rNext = sreg();
    rNextSeg = sreg();
  }
  if (!segV) dmaBatch(true);
  startRow();
  if (!foldRowVregs() || !foldAcrossLanes() || !storeRow()) return false;
  e_.op("sadd {}, {}, 1", S(rRow), S(rRow));
  e_.op("br.lt {}, {}, {}", S(rRow), S(rRows), lRow);
  dmaBatch(false);
  e_.op("sadd {}, {}, 1", S(rB), S(rB));
  e_.op("br.lt {}, {}, {}", S(rB), nBatches, lBatch);
  return !failed_;
}

bool Lowerer::emitReduceSegments(const Instruction& in, int64_t k, int64_t r, const std::vector<int>& inBufs,
                                 const std::vector<int>& initBufs, const std::vector<int>& outBufs,
                                 const Computation& reducer, const ReducePrologue* prologue) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  return SegmentReduceEmitter(*this, in, k, r, inBufs, initBufs, outBufs, reducer, prologue).run();
}

bool Lowerer::lowerReduce(const Instruction& in) {
  beginKernel(in, "reduce");
  int64_t nv = in.operandCount() / 2;
  const Shape& s = in.operand(0)->shape();
  std::set<int64_t> red(in.attrs().dimensions.begin(), in.attrs().dimensions.end());
  std::vector<int64_t> kept, reduced;
  for (int64_t i = 0; i < s.rank(); ++i) (red.count(i) ? reduced : kept).push_back(i);
  int64_t r = 1, k = 1;
  for (int64_t i : reduced) r *= s.dimension(i);
  for (int64_t i : kept) k *= s.dimension(i);
  std::vector<int> inBufs, initBufs, outBufs = leaves_[&in];
  for (int64_t j = 0; j < nv; ++j) {
    inBufs.push_back(leaves_[in.operand(j)][0]);
    initBufs.push_back(leaves_[in.operand(nv + j)][0]);
  }
  uint64_t bytes = 0;
  bool anyPair = false;
  for (int b : inBufs) {
    bytes += bufs_[b].bytes;
    anyPair = anyPair || typeInfo(bufs_[b].type).words > 1;
  }
  bool ok = true;
  bool outer = true, inner = true;
  for (size_t i = 0; i < reduced.size(); ++i) {
    outer = outer && reduced[i] == static_cast<int64_t>(i);
    inner = inner && reduced[i] == static_cast<int64_t>(kept.size() + i);
  }
  if (k == 0) {
  } else if (r == 0) {
    for (int64_t j = 0; j < nv; ++j) ok = ok && fill(outBufs[j], 0, k, bufs_[outBufs[j]].type, initBufs[j], 0);
  } else if ((k >= kVregElems / 8 && (outer || !inner || r < kVregElems)) || anyPair || nv > 3) {
    // (Pair and complex types always: the lane tree of emitReduceSegments
    // moves single registers; more than 3 operands too: the segment kernel
    // keeps a row address per operand in scalar registers.)
    // Many outputs: fold whole rows of outputs, vectorised across the kept
    // elements. Reduced dimensions not already outermost are moved there
    // by a strided DMA (their order kept, so each output folds its inputs
    // in row-major order, as the interpreter does). Short inner rows would
    // otherwise pay a cross-lane tree per output.
    if (!outer) {
      std::vector<int64_t> perm = reduced;
      perm.insert(perm.end(), kept.begin(), kept.end());
      for (int64_t j = 0; j < nv; ++j) inBufs[j] = permutedCopy(inBufs[j], s.dimensions(), perm);
    }
    ok = emitReduceRows(in, r, k, inBufs, initBufs, outBufs, *in.toApply());
  } else {
    if (!inner) {
      // Move the reduced dimensions innermost (their order kept, so each
      // output still folds its inputs in row-major order).
      std::vector<int64_t> perm = kept;
      perm.insert(perm.end(), reduced.begin(), reduced.end());
      for (int64_t j = 0; j < nv; ++j) inBufs[j] = permutedCopy(inBufs[j], s.dimensions(), perm);
    }
    ok = emitReduceSegments(in, k, r, inBufs, initBufs, outBufs, *in.toApply());
  }
  endKernel(static_cast<double>(r * k * nv), bytes, 0);
  return ok && !failed_;
}

}  // namespace tpu::codegen
