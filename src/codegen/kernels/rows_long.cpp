// Row fusions (softmax, layer norm, RMS norm) whose rows do not fit VMEM:
// rows of more than 2^20 elements, or rows the resident row kernel cannot
// hold in two slots. One row at a time, each pass streams the row through
// VMEM in segments, double-buffered (segment s + 1 loads while s is
// folded): pass p folds the reduces of level p vreg by vreg into registers
// that live across segments, then the lane tree and the init value give
// the row values; a last pass computes the results segment by segment and
// writes each segment back while the next is computed. The reductions
// visit the row's vregs in the same order as the resident kernel (and as
// emitReduceSegments), so results are bit-identical to it; the price is
// one read of the row per pass (softmax: max, sum, results; layer norm:
// mean, variance, results; RMS norm: sum of squares, results) where an
// online form would merge the first two of softmax but change its values.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/kernels/row_values.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

bool Lowerer::rowFusionFitsVmem(const RowFusion& f) const {
  if (f.r > (int64_t{1} << 20)) return false;
  uint64_t rowBytes = 0;
  for (const Instruction* p : f.streamed) rowBytes += static_cast<uint64_t>(f.r) * typeInfo(p->shape().elementType()).bytes;
  for (const Instruction* o : f.outputs) rowBytes += static_cast<uint64_t>(f.r) * typeInfo(o->shape().elementType()).bytes;
  for (const Instruction* v : f.vectors) rowBytes += static_cast<uint64_t>(f.r) * typeInfo(v->shape().elementType()).bytes;
  return 3 * rowBytes + 65536 <= vmemBudget();
}

int64_t Lowerer::rowSegmentVregs(const RowFusion& f) const {
  // Bytes of one element of every stream (parameters, row vectors, results).
  uint64_t elemBytes = 0;
  for (const Instruction* p : f.streamed) elemBytes += typeInfo(p->shape().elementType()).bytes;
  for (const Instruction* v : f.vectors) elemBytes += typeInfo(v->shape().elementType()).bytes;
  for (const Instruction* o : f.outputs) elemBytes += typeInfo(o->shape().elementType()).bytes;
  const uint64_t budget = vmemBudget();
  if (budget < 65536 + 2 * kVregElems * elemBytes) return 0;
  // Two slots of a segment of every stream; up to 256 vregs (1 MiB of f32)
  // per stream keeps the first load short. A divisor of the row's vregs.
  const int64_t fullV = f.r / kVregElems;
  const int64_t most = std::min<int64_t>(256, static_cast<int64_t>((budget - 65536) / (2 * kVregElems * elemBytes)));
  for (int64_t v = std::min(most, fullV); v > 1; --v)
    if (fullV % v == 0) return v;
  return 1;
}

// The streamed row kernel's phases and the state they share: the streams
// and their slots, the hoisted scalars, the loops' registers and the
// current row's values. A friend of Lowerer: the phases use the lowering
// state as the kernel's member functions do.
class StreamedRowEmitter : KernelPhases {
 public:
  StreamedRowEmitter(Lowerer& l, const Instruction& in, const RowFusion& f)
      : KernelPhases(l, in), f(f), leaves(l.leaves_[&in]), r(f.r), k(f.k), values(l, f, hoisted, kept) {}
  bool run();

 private:
  // Streams: the Full parameters, the row vectors, then the results; each
  // has a place in a slot of segV vregs.
  struct Stream {
    int buf;
    int64_t es;
    int64_t off;  // in the slot
    bool vec;     // a row vector: the same segment for every row
  };
  int paramBuf(const Instruction* p) { return leaves_[in.operand(p->attrs().parameterNumber)][0]; }
  bool plan();
  void reads(const Instruction* i, std::set<size_t>& out) const;
  bool allocateRegisters();
  void dmaSegment(bool load, const std::vector<size_t>& which, int segReg, int slotReg);
  std::string streamAddr(size_t j) const;
  std::optional<VReg> evalFull(const Instruction* target, std::map<const Instruction*, VReg>& val,
                               std::vector<VReg>& owned);
  bool computeRowValues(int level);
  bool segment(const std::vector<size_t>& which, const std::vector<size_t>& outs, const std::function<bool(bool)>& body,
               const std::vector<size_t>& next, bool firstSeg);
  bool pass(const std::vector<size_t>& which, const std::vector<size_t>& outs, const std::function<bool(bool)>& body,
            const std::vector<size_t>& next);
  bool foldPass(int p);
  bool storeResults();

  const RowFusion& f;
  const std::vector<int>& leaves;
  const int64_t r, k;
  int64_t segV = 0, fullV = 0, nSeg = 0;
  std::vector<Stream> streams;
  size_t nl = 0, nvec = 0, no = 0;
  int64_t slotBytes = 0;
  uint64_t vmemUsed = 0;
  std::vector<std::vector<const Instruction*>> passReduces;
  // The streams each pass reads: passes 1 .. passes, then the results'.
  std::vector<std::vector<size_t>> passReads;
  std::map<const Instruction*, VReg> hoisted;
  std::set<int> kept;
  int rI = -1, rRows = -1, rS = -1, rSl = -1, rOt = -1, rT = -1, rA = -1, rV = -1, rSem = -1, rSegCnt = -1, rVc = -1;
  // One pointer per element size: the current vreg's offset in the slot.
  std::map<int64_t, int> sizeReg;
  // Vregs per step of the vreg loop: the fold still visits them in order,
  // but their loads and elementwise work overlap.
  int64_t unroll = 1;
  int64_t at = 0;  // the vreg of the step being emitted
  // Row values of the current row (splats).
  std::map<const Instruction*, VReg> rowVal;
  std::vector<VReg> rowOwned;
  // Whether the last pass issued the first segment of the next one.
  bool prefetched = false;
  RowValueEvaluator values;
};

// Segments, streams and their slots, and the reduces of each pass.
bool StreamedRowEmitter::plan() {
  if (leaves.size() != f.outputs.size()) return l_.fail(in, "llo-gen: internal error: row fusion result leaves");
  segV = l_.rowSegmentVregs(f);
  if (segV < 1) return l_.fail(in, "llo-gen: internal error: row segments do not fit VMEM");
  fullV = r / kVregElems;
  nSeg = fullV / segV;
  for (const Instruction* p : f.streamed) streams.push_back({paramBuf(p), 0, 0, false});
  for (const Instruction* p : f.vectors) streams.push_back({paramBuf(p), 0, 0, true});
  for (int b : leaves) streams.push_back({b, 0, 0, false});
  nl = f.streamed.size();
  nvec = f.vectors.size();
  no = f.outputs.size();
  for (Stream& s : streams) {
    s.es = static_cast<int64_t>(typeInfo(bufs_[s.buf].type).bytes);
    s.off = slotBytes;
    slotBytes += static_cast<int64_t>(alignUp(static_cast<uint64_t>(segV * kVregElems * s.es), 512));
  }
  vmemUsed = static_cast<uint64_t>(2 * slotBytes);
  passReduces.resize(static_cast<size_t>(f.passes) + 1);
  for (const Instruction* v : f.rowValues)
    if (v->opcode() == Opcode::Reduce) passReduces[static_cast<size_t>(f.level.at(v))].push_back(v);
  unroll = segV % 4 == 0 ? 4 : segV % 2 == 0 ? 2 : 1;
  return true;
}

// Which streams a value reads (Full parameters and row vectors).
void StreamedRowEmitter::reads(const Instruction* i, std::set<size_t>& out) const {
  auto it = f.cls.find(i);
  if (it == f.cls.end() || it->second == RowFusion::Row || it->second == RowFusion::Scalar) return;
  if (i->opcode() == Opcode::Parameter) {
    auto p = std::find(f.streamed.begin(), f.streamed.end(), i);
    if (p != f.streamed.end()) out.insert(static_cast<size_t>(p - f.streamed.begin()));
    auto v = std::find(f.vectors.begin(), f.vectors.end(), i);
    if (v != f.vectors.end()) out.insert(nl + static_cast<size_t>(v - f.vectors.begin()));
    return;
  }
  for (const Instruction* o : i->operands()) reads(o, out);
}

bool StreamedRowEmitter::allocateRegisters() {
  rI = sreg();
  rRows = sreg();
  rS = sreg();
  rSl = sreg();
  rOt = sreg();
  rT = sreg();
  rA = sreg();
  rV = sreg();
  rSem = sreg();
  rSegCnt = sreg();
  rVc = sreg();
  for (const Stream& s : streams)
    if (!sizeReg.count(s.es)) sizeReg[s.es] = sreg();
  return !failed_;
}

// Segment `segReg` of row rI of the streams in `which` into (loads) or
// out of (write-backs) slot `slotReg`: sem1/sem2 loads, sem3/sem4 write-backs.
void StreamedRowEmitter::dmaSegment(bool load, const std::vector<size_t>& which, int segReg, int slotReg) {
  e_.op("sadd {}, {}, {}", S(rSem), S(slotReg), load ? 1 : 3);
  for (size_t j : which) {
    const Stream& s = streams[j];
    const int64_t segBytes = segV * kVregElems * s.es;
    e_.op("smul {}, {}, {}", S(rA), S(segReg), segBytes);
    if (!s.vec) {
      e_.op("smul {}, {}, {}", S(rV), S(rI), r * s.es);
      e_.op("sadd {}, {}, {}", S(rA), S(rA), S(rV));
    }
    if (base(s.buf)) e_.op("sadd {}, {}, {}", S(rA), S(rA), base(s.buf));
    e_.op("smul {}, {}, {}", S(rV), S(slotReg), slotBytes);
    if (s.off) e_.op("sadd {}, {}, {}", S(rV), S(rV), s.off);
    std::string d = e_.desc(static_cast<uint64_t>(segBytes), {});
    if (load) e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", s.buf), d, S(rV), l_.memRef(s.buf, S(rA)), S(rSem));
    else e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", s.buf), d, l_.memRef(s.buf, S(rA)), S(rV), S(rSem));
  }
}

std::string StreamedRowEmitter::streamAddr(size_t j) const {
  return fmt::format("{} + {}", S(sizeReg.at(streams[j].es)), streams[j].off + at * kVregElems * streams[j].es);
}

// The value of `target` at the current vreg: streamed parameters and row
// vectors both from their segment in the slot.
std::optional<VReg> StreamedRowEmitter::evalFull(const Instruction* target, std::map<const Instruction*, VReg>& val,
                                                 std::vector<VReg>& owned) {
  auto leaf = [&](const Instruction* i, std::vector<VReg>& own) -> std::optional<VReg> {
    const Instruction* p = i->opcode() == Opcode::Parameter ? i : i->operand(0);
    std::set<size_t> j;
    reads(p, j);
    if (j.size() != 1) {
      l_.fail(in, "llo-gen: internal error: streamed row parameter");
      return std::nullopt;
    }
    VReg v = l_.vload(bufs_[streams[*j.begin()].buf].type, streamAddr(*j.begin()));
    own.push_back(v);
    return v;
  };
  return values.eval(target, rowVal, val, owned, leaf);
}

// The row values of pass `level` that are not reduces.
bool StreamedRowEmitter::computeRowValues(int level) {
  for (const Instruction* i : f.rowValues) {
    if (f.level.at(i) != level || i->opcode() == Opcode::Reduce) continue;
    std::optional<VReg> v = RowValueEvaluator::lowerRowValue(l_, *i, rowVal, hoisted, &rowOwned);
    if (!v) return false;
    rowVal[i] = *v;
  }
  return true;
}

// One segment of a pass (see pass): the next segment's load (or the next
// pass's first) issued, this one awaited, its vregs run through `body`,
// its results written back.
bool StreamedRowEmitter::segment(const std::vector<size_t>& which, const std::vector<size_t>& outs,
                                 const std::function<bool(bool)>& body, const std::vector<size_t>& next,
                                 bool firstSeg) {
  e_.op("sxor {}, {}, 1", S(rOt), S(rSl));
  if ((nSeg > 1 && !which.empty()) || !next.empty()) {
    std::string last = e_.newLabel("rllast"), done = e_.newLabel("rlnext");
    e_.op("sadd {}, {}, 1", S(rT), S(rS));
    e_.op("br.ge {}, {}, {}", S(rT), nSeg, last);
    if (!which.empty()) dmaSegment(true, which, rT, rOt);
    e_.op("jmp {}", done);
    e_.label(last);
    if (!next.empty()) {
      e_.op("smov {}, 0", S(rT));
      dmaSegment(true, next, rT, rOt);
    }
    e_.label(done);
  }
  if (!which.empty()) {
    e_.op("sadd {}, {}, 1", S(rSem), S(rSl));
    e_.op("sem.wait sem[{}], {}", S(rSem), which.size());
  }
  if (!outs.empty() && nSeg > 2) {
    // The slot's last write-back (segment s - 2).
    std::string skip = e_.newLabel("rlfree");
    e_.op("br.lt {}, 2, {}", S(rS), skip);
    e_.op("sadd {}, {}, 3", S(rSem), S(rSl));
    e_.op("sem.wait sem[{}], {}", S(rSem), outs.size());
    e_.label(skip);
  }
  for (auto [size, reg] : sizeReg) e_.op("smul {}, {}, {}", S(reg), S(rSl), slotBytes);
  // `unroll` vregs from the pointers; the row's first starts the folds.
  auto steps = [&](bool first) -> bool {
    for (at = 0; at < unroll; ++at)
      if (!body(first && at == 0)) return false;
    at = 0;
    for (auto [size, reg] : sizeReg) e_.op("sadd {}, {}, {}", S(reg), S(reg), unroll * kVregElems * size);
    return true;
  };
  int64_t loopSteps = segV / unroll;
  if (firstSeg) {
    if (!steps(true)) return false;
    --loopSteps;
  }
  if (loopSteps > 0) {
    std::string l = e_.newLabel("rlvreg");
    e_.op("smov {}, {}", S(rVc), loopSteps);
    e_.label(l);
    if (!steps(false)) return false;
    e_.op("loop {}, {}", S(rVc), l);
  }
  if (!outs.empty()) dmaSegment(false, outs, rS, rSl);
  e_.op("smov {}, {}", S(rSl), S(rOt));
  e_.op("sadd {}, {}, 1", S(rS), S(rS));
  return true;
}

// One pass over the row: loads the streams in `which` segment by segment
// (double-buffered) and runs body(first) per vreg, first for the row's
// first vreg; `outs` are written back per segment. The last segment
// issues the first of the next pass of the row (streams `next`), so only
// a row's first pass waits for its first segment; rSl carries on.
bool StreamedRowEmitter::pass(const std::vector<size_t>& which, const std::vector<size_t>& outs,
                              const std::function<bool(bool)>& body, const std::vector<size_t>& next) {
  e_.op("smov {}, 0", S(rS));
  if (!which.empty() && !prefetched) dmaSegment(true, which, rS, rSl);
  prefetched = !next.empty();
  if (!segment(which, outs, body, next, true)) return false;
  if (nSeg > 1) {
    std::string l = e_.newLabel("rlseg");
    e_.op("smov {}, {}", S(rSegCnt), nSeg - 1);
    e_.label(l);
    if (!segment(which, outs, body, next, false)) return false;
    e_.op("loop {}, {}", S(rSegCnt), l);
  }
  if (!outs.empty()) {
    // The last segment's write-back (slot rSl ^ 1), and the one before (rSl).
    e_.op("sxor {}, {}, 1", S(rT), S(rSl));
    e_.op("sadd {}, {}, 3", S(rSem), S(rT));
    e_.op("sem.wait sem[{}], {}", S(rSem), outs.size());
    if (nSeg > 1) {
      e_.op("sadd {}, {}, 3", S(rSem), S(rSl));
      e_.op("sem.wait sem[{}], {}", S(rSem), outs.size());
    }
  }
  return true;
}

// Pass p: its reduces folded vreg by vreg into registers that live across
// segments, then across lanes and sublanes (emitReduceSegments' tree) and
// the init; then the row values of level p.
bool StreamedRowEmitter::foldPass(int p) {
  const std::vector<const Instruction*>& reds = passReduces[static_cast<size_t>(p)];
  std::vector<VReg> acc(reds.size());
  bool ok = pass(passReads[static_cast<size_t>(p)], {}, [&](bool first) -> bool {
    std::map<const Instruction*, VReg> val;
    std::vector<VReg> owned, xs;
    for (const Instruction* red : reds) {
      auto x = evalFull(red->operand(0), val, owned);
      if (!x) return false;
      xs.push_back(*x);
    }
    std::set<int> keep;
    for (size_t q = 0; q < reds.size(); ++q) {
      VReg& a = acc[q];
      if (first) {
        // The row's first vreg starts the fold, in a register of its own.
        a = l_.vcopy(xs[q], xs[q].t);
        keep.insert(a.r);
        continue;
      }
      std::vector<VReg> res;
      if (!l_.lowerComputation(*reds[q]->toApply(), {a, xs[q]}, res)) return false;
      // A loop body: the accumulator stays in its register.
      e_.op("vmov.s32 {}, {}", V(a), V(res[0]));
      if (res[0].r != a.r && res[0].r != xs[q].r) vfree(res[0]);
      keep.insert(a.r);
    }
    values.freeOwned(owned, keep);
    return true;
  }, passReads[static_cast<size_t>(p) + 1]);
  if (!ok) return false;
  for (int st : {64, 32, 16, 8, 4, 2, 1, -4, -2, -1})
    for (size_t q = 0; q < reds.size(); ++q) {
      VReg& a = acc[q];
      VReg t = valloc(a.t);
      if (st > 0) e_.op("vrot.lane {}, {}, {}", V(t), V(a), st);
      else e_.op("vrot.sub {}, {}, {}", V(t), V(a), -st);
      std::vector<VReg> res;
      if (!l_.lowerComputation(*reds[q]->toApply(), {a, t}, res)) return false;
      vfree(t);
      vfree(a);
      a = res[0];
    }
  for (size_t q = 0; q < reds.size(); ++q) {
    std::vector<VReg> res;
    if (!l_.lowerComputation(*reds[q]->toApply(), {hoisted.at(reds[q]->operand(1)), acc[q]}, res)) return false;
    vfree(acc[q]);
    rowVal[reds[q]] = res[0];
    rowOwned.push_back(res[0]);
  }
  return computeRowValues(p);
}

// The last pass: the results segment by segment, each written back while
// the next is computed.
bool StreamedRowEmitter::storeResults() {
  std::vector<size_t> outs;
  for (size_t j = 0; j < no; ++j) outs.push_back(nl + nvec + j);
  return pass(passReads[static_cast<size_t>(f.passes) + 1], outs, [&](bool) -> bool {
    std::map<const Instruction*, VReg> val;
    std::vector<VReg> owned;
    for (size_t j = 0; j < no; ++j) {
      auto y = evalFull(f.outputs[j], val, owned);
      if (!y) return false;
      l_.vstore(*y, bufs_[streams[nl + nvec + j].buf].type, streamAddr(nl + nvec + j));
    }
    values.freeOwned(owned, {});
    return true;
  }, {});
}

bool StreamedRowEmitter::run() {
  if (!plan()) return false;
  if (!l_.hoistScalars(in, f.scalars, hoisted)) return false;
  for (const Instruction* i : f.scalars) kept.insert(hoisted.at(i).r);
  if (!allocateRegisters()) return false;
  std::string lRowLoop = e_.newLabel("rlrow");
  e_.op("smov {}, 0", S(rI));
  e_.op("smov {}, 0", S(rSl));
  e_.op("smov {}, {}", S(rRows), k);
  e_.label(lRowLoop);
  passReads.resize(static_cast<size_t>(f.passes) + 2);
  for (int p = 1; p <= f.passes + 1; ++p) {
    std::set<size_t> need;
    if (p <= f.passes)
      for (const Instruction* red : passReduces[static_cast<size_t>(p)]) reads(red->operand(0), need);
    else
      for (const Instruction* o : f.outputs) reads(o, need);
    passReads[static_cast<size_t>(p)].assign(need.begin(), need.end());
  }
  if (!computeRowValues(0)) return false;
  for (int p = 1; p <= f.passes; ++p)
    if (!foldPass(p)) return false;
  if (!storeResults()) return false;
  std::set<int> freed;
  for (VReg v : rowOwned)
    if (!kept.count(v.r) && freed.insert(v.r).second) vfree(v);
  rowOwned.clear();
  rowVal.clear();
  e_.op("sadd {}, {}, 1", S(rI), S(rI));
  e_.op("br.lt {}, {}, {}", S(rI), S(rRows), lRowLoop);
  uint64_t bytes = 0;
  for (const Stream& s : streams) bytes += bufs_[s.buf].bytes;
  l_.endKernel(static_cast<double>(k * r) * static_cast<double>(f.comp->instructionCount()), bytes, vmemUsed);
  return !failed_;
}

bool Lowerer::lowerRowFusionStreamed(const Instruction& in, const RowFusion& f) {
  beginKernel(in, "fusion-rows");
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  return StreamedRowEmitter(*this, in, f).run();
}

}  // namespace tpu::codegen
