// Row fusions: softmax, layer norm and RMS norm as one streaming kernel.
//
// The fused computation's values are of four classes: Full (the rows'
// shape [k..., r...]), Row (one value per row: a reduce over the trailing
// dimensions and elementwise work on such values), Vec (a parameter shaped
// like one row, broadcast along the rows: a scale or a bias) and Scalar.
// A Full value may read a Row value through a broadcast of it along the
// trailing dimensions, which is what makes these fusions neither input nor
// loop fusions. Each row is folded once per dependent reduction (pass p
// folds the reduces whose inputs need the Row values of passes < p), then
// its results are computed and stored in a last pass; Full values are
// recomputed in each pass from the row's parameters in VMEM, so VMEM holds
// only the parameters' and results' rows, double-buffered by blocks of rows.
// Folding follows emitReduceSegments exactly (vreg by vreg from the first,
// then the lane tree, then the init value), so the reduced values are
// bit-identical to the unfused reduce's.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/kernels/row_values.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

bool rowType(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.ok && ti.words == 1 && !ti.isComplex && (ti.isFloat ? ti.bits >= 16 : ti.bits == 32);
}

// The class (and pass level) of one instruction of a candidate row fusion
// whose earlier instructions are classified in f; false when the fusion is
// not a row fusion. Sets broadcastsRow when a Row value is broadcast back
// along the rows.
bool classifyRowValue(const Instruction& i, const Instruction& first, const std::vector<int64_t>& rowDims,
                      const std::vector<int64_t>& vecDims, const std::vector<int64_t>& keptIdx,
                      const std::vector<int64_t>& vecIdx, RowFusion& f, RowFusion::Class& k, int& level,
                      bool& broadcastsRow) {
  // Values with the rows' element count but another shape ([k, 8*128] for
  // [k, 8, 128]) are the same bytes in row-major order: reshapes between
  // them are free, and elementwise work on them goes element by element.
  const int64_t fullCount = f.k * f.r;
  auto countOf = [](const std::vector<int64_t>& d) {
    int64_t n = 1;
    for (int64_t x : d) n *= x;
    return n;
  };
  const Shape& s = i.shape();
  if (!s.isArray() || !rowType(s.elementType())) return false;
  const std::vector<int64_t>& d = s.dimensions();
  auto levelOf = [&](const Instruction* o) {
    auto it = f.level.find(o);
    return it == f.level.end() ? 0 : it->second;
  };
  auto classOf = [&](const Instruction* o, RowFusion::Class& cls) {
    auto it = f.cls.find(o);
    if (it == f.cls.end()) return false;
    cls = it->second;
    return true;
  };
  k = RowFusion::Scalar;
  level = 0;
  switch (i.opcode()) {
    case Opcode::Parameter:
      if (s.isScalar()) k = RowFusion::Scalar;
      else if (d == f.dims) k = RowFusion::Full;
      else if (d == vecDims) k = RowFusion::Vec;
      else if (countOf(d) == fullCount) k = RowFusion::Full;
      else return false;
      if (k == RowFusion::Full) f.streamed.push_back(&i);
      if (k == RowFusion::Vec) f.vectors.push_back(&i);
      break;
    case Opcode::Constant:
      if (!s.isScalar()) return false;
      break;
    case Opcode::Reduce: {
      if (i.operandCount() != 2 || !i.toApply() || i.attrs().dimensions != first.attrs().dimensions) return false;
      RowFusion::Class a, b;
      if (!classOf(i.operand(0), a) || !classOf(i.operand(1), b) || a != RowFusion::Full ||
          b != RowFusion::Scalar || i.operand(0)->shape().dimensions() != f.dims || d != rowDims)
        return false;
      const Opcode io = i.operand(1)->opcode();
      if (io != Opcode::Constant && io != Opcode::Parameter) return false;  // as the segment kernel takes them
      k = RowFusion::Row;
      level = levelOf(i.operand(0)) + 1;
      break;
    }
    case Opcode::Reshape: {
      RowFusion::Class a;
      if (!classOf(i.operand(0), a) || a != RowFusion::Full || s.isScalar() || countOf(d) != fullCount)
        return false;
      k = RowFusion::Full;
      level = levelOf(i.operand(0));
      break;
    }
    case Opcode::Broadcast: {
      RowFusion::Class a;
      if (!classOf(i.operand(0), a)) return false;
      const std::vector<int64_t>& bd = i.attrs().dimensions;
      if (a == RowFusion::Scalar) {
        k = s.isScalar() ? RowFusion::Scalar : d == f.dims ? RowFusion::Full : d == rowDims ? RowFusion::Row
                                                                                          : RowFusion::Scalar;
        if (k == RowFusion::Scalar && !s.isScalar()) return false;
      } else if (a == RowFusion::Row && d == f.dims && bd == keptIdx) {
        k = RowFusion::Full;
        level = levelOf(i.operand(0));
        broadcastsRow = true;
      } else if (a == RowFusion::Vec && d == f.dims && bd == vecIdx && i.operand(0)->opcode() == Opcode::Parameter) {
        k = RowFusion::Full;
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
        RowFusion::Class a;
        if (!classOf(o, a) || a == RowFusion::Vec) return false;
        if (a == RowFusion::Scalar) continue;
        if (any && a != k) return false;
        k = a;
        any = true;
        level = std::max(level, levelOf(o));
      }
      if (k == RowFusion::Scalar && !s.isScalar()) return false;
      if ((k == RowFusion::Full && countOf(d) != fullCount) || (k == RowFusion::Row && d != rowDims)) return false;
    }
  }
  return true;
}

// Rows stored as T(8,128) tiles (physical_reduce.h): [.., a/8, b/128, 8, 128]
// reduced over the b/128 and 128 digits. A vreg is one tile: 128 lanes of
// 8 rows.
bool tiledRows(const std::vector<int64_t>& dims, const std::vector<int64_t>& reduced) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  return rank >= 4 && dims[static_cast<size_t>(rank - 1)] == 128 &&
         dims[static_cast<size_t>(rank - 2)] == 8 && reduced == std::vector<int64_t>{rank - 3, rank - 1};
}

bool tiledRows(const RowFusion& f) {
  for (const auto& up : f.comp->instructions())
    if (up->opcode() == Opcode::Reduce) {
      std::vector<int64_t> reduced = up->attrs().dimensions;
      std::sort(reduced.begin(), reduced.end());
      return tiledRows(f.dims, reduced);
    }
  return false;
}

// Tiled rows have no streamed form: two slots of a unit (8 rows) of every
// streamed value must fit with the row vectors (8 copies of each, one per
// sublane), as RowFusionEmitter::planVmem places them.
bool tiledRowsFitVmem(const RowFusion& f, uint64_t budget) {
  uint64_t rowBytes = 0, vecBytes = 0;
  for (const Instruction* p : f.streamed)
    rowBytes += static_cast<uint64_t>(f.r) * typeInfo(p->shape().elementType()).bytes;
  for (const Instruction* o : f.outputs)
    rowBytes += static_cast<uint64_t>(f.r) * typeInfo(o->shape().elementType()).bytes;
  for (const Instruction* v : f.vectors)
    vecBytes += alignUp(static_cast<uint64_t>(8 * f.r) * typeInfo(v->shape().elementType()).bytes, 512);
  return vecBytes + 65536 + 8 * (2 * rowBytes + 2048) <= budget;
}
}  // namespace

bool Lowerer::rowFusion(const Instruction& in, RowFusion* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  const Instruction* first = nullptr;
  for (const auto& up : c.instructions())
    if (up->opcode() == Opcode::Reduce) {
      first = up.get();
      break;
    }
  if (!first || first->operandCount() != 2) return false;
  RowFusion f;
  f.comp = &c;
  f.dims = first->operand(0)->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(f.dims.size());
  std::vector<int64_t> reduced = first->attrs().dimensions;
  std::sort(reduced.begin(), reduced.end());
  if (reduced.empty() || static_cast<int64_t>(reduced.size()) >= rank) return false;
  const bool tiled = tiledRows(f.dims, reduced);
  std::vector<int64_t> rowDims, vecDims, keptIdx, vecIdx;
  for (int64_t d = 0; d < rank; ++d) {
    bool red = std::binary_search(reduced.begin(), reduced.end(), d);
    if (!tiled && red != (d >= rank - static_cast<int64_t>(reduced.size()))) return false;  // trailing only
    (red ? vecDims : rowDims).push_back(f.dims[static_cast<size_t>(d)]);
    (red ? vecIdx : keptIdx).push_back(d);
    (red ? f.r : f.k) *= f.dims[static_cast<size_t>(d)];
  }
  // Whole vregs per row (no tail lanes), or short rows of whole sublanes
  // that pack a vreg exactly (128, 256, 512: 8, 4, 2 rows per vreg); rows
  // past 2^20 elements or VMEM stream in segments (kernels/rows_long.cpp).
  const bool wholeVregs = f.r % kVregElems == 0, packed = f.r < kVregElems && f.r >= 128 && kVregElems % f.r == 0;
  if (f.k < 1 || !(wholeVregs || packed || tiled)) return false;
  // Each instruction's class, in order.
  bool broadcastsRow = false;
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == c.root() && i.opcode() == Opcode::Tuple) break;
    RowFusion::Class k = RowFusion::Scalar;
    int level = 0;
    if (!classifyRowValue(i, *first, rowDims, vecDims, keptIdx, vecIdx, f, k, level, broadcastsRow)) return false;
    f.cls[&i] = k;
    if (k == RowFusion::Full || k == RowFusion::Row) f.level[&i] = level;
    if (k == RowFusion::Scalar && i.opcode() != Opcode::Parameter) f.scalars.push_back(&i);
    if (k == RowFusion::Scalar && i.opcode() == Opcode::Parameter) f.scalars.insert(f.scalars.begin(), &i);
    if (k == RowFusion::Row) f.rowValues.push_back(&i);
    if (i.opcode() == Opcode::Reduce) f.passes = std::max(f.passes, level);
  }
  // Without a row value broadcast back, it is an input fusion (or nothing).
  if (!broadcastsRow || f.passes < 1 || f.streamed.empty()) return false;
  std::vector<const Instruction*> roots;
  if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
  else roots.push_back(c.root());
  for (const Instruction* v : roots) {
    auto it = f.cls.find(v);
    if (it == f.cls.end() || it->second != RowFusion::Full || v->opcode() == Opcode::Parameter ||
        v->opcode() == Opcode::Broadcast)
      return false;
    f.outputs.push_back(v);
  }
  if (f.outputs.empty() || f.outputs.size() > 4 || f.streamed.size() > 4 || f.vectors.size() > 4 ||
      f.scalars.size() > 24 || f.rowValues.size() > 24)
    return false;
  // Two slots of a block of at least one row of every streamed value, or
  // of a segment of one vreg of each.
  if (tiled ? !tiledRowsFitVmem(f, vmemBudget()) : !rowFusionFitsVmem(f) && rowSegmentVregs(f) < 1)
    return false;
  if (out) *out = std::move(f);
  return true;
}

bool Lowerer::hoistScalars(const Instruction& fusion, const std::vector<const Instruction*>& scalars,
                           std::map<const Instruction*, VReg>& hoisted) {
  int smem = 0;
  for (const Instruction* i : scalars) {
    std::optional<VReg> v;
    if (i->opcode() == Opcode::Parameter) {
      int buf = leaves_[fusion.operand(i->attrs().parameterNumber)][0];
      int sx = loadScalar(buf, 0, i->shape().elementType(), smem++ % 8);
      v = valloc(i->shape().elementType());
      e_.op("vmov.s32 {}, {}", V(*v), S(sx));
      sregs_.put(sx);
    } else {
      v = RowValueEvaluator::lowerRowValue(*this, *i, hoisted, hoisted, nullptr);
    }
    if (!v) return false;
    hoisted[i] = *v;
  }
  return true;
}

// The resident row kernel's phases and the state they share: the plan
// (rows per block and group, VMEM slots), the hoisted scalars, the loops'
// registers, and the row values of the group being emitted. A friend of
// Lowerer: the phases use the lowering state as the kernel's member
// functions do.
//
// Blocks of rows stream through two VMEM slots (block b + 1 loads while
// block b is computed, its results go out while b + 1 is); each block is
// worked on by groups of rows: one fold per pass, then the results.
class RowFusionEmitter : KernelPhases {
 public:
  RowFusionEmitter(Lowerer& l, const Instruction& in, const RowFusion& f)
      : KernelPhases(l, in), f(f), leaves(l.leaves_[&in]), r(f.r), k(f.k), tiled(tiledRows(f)),
        unitRows(tiled ? 8 : r < kVregElems ? kVregElems / r : 1), unitLen(r * unitRows),
        fullV(unitLen / kVregElems), nAcc(tiled && fullV % 8 == 0 ? 8 : 1),
        values(l, f, hoisted, kept) {}
  bool run();

 private:
  int64_t es(int b) const { return static_cast<int64_t>(typeInfo(bufs_[b].type).bytes); }
  int paramBuf(const Instruction* p) { return leaves_[in.operand(p->attrs().parameterNumber)][0]; }
  void setGroup(int64_t g);
  void analyseValues();
  bool planVmem();
  bool hoistAndLoadVectors();
  bool allocateRegisters();
  void dmaBlock(bool load, int batchReg, int slotReg);
  void freeVecs();
  std::optional<VReg> evalFull(const Instruction* target, int64_t g, int64_t at, std::map<const Instruction*, VReg>& val,
                               std::vector<VReg>& owned);
  void setPointers();
  void stepPointers();
  bool overRows(const std::function<bool(bool)>& body);
  bool orderedFold(const std::vector<const Instruction*>& reds);
  bool computeRowValues(int level);
  bool foldPass(const std::vector<const Instruction*>& reds);
  std::optional<VReg> mergeAccumulators(const Instruction& red, VReg* accs);
  bool storeResults();
  void releaseGroup();
  bool groupBody();
  bool emitLargestGroup();
  void startBlock();

  const RowFusion& f;
  const std::vector<int>& leaves;
  // Short rows are packed: one vreg holds `unitRows` whole rows, one per
  // sublane or per group of sublanes, and the kernel works on units of
  // `unitLen` elements (a row, or a vreg of rows) as it works on long rows.
  const int64_t r, k;
  const bool tiled;
  const int64_t unitRows, unitLen, fullV;
  // Tiled rows of whole vregs fold into 8 accumulators, vreg j into j % 8:
  // the tiles a row-major vreg's 8 sublanes hold, so the fold, the lane
  // tree and a sublane tree across the accumulators give the row-major
  // kernel's bits.
  const int64_t nAcc;
  size_t nl = 0, no = 0, nvec = 0;
  std::vector<int> inBufs, outBufs, vecBufs;
  // Row values read by Full values live until the row is done; the others
  // until their last Row user is computed.
  std::set<const Instruction*> broadcastRow;
  std::map<const Instruction*, int> lastUse;
  std::vector<std::vector<const Instruction*>> passReduces;
  // Packed rows, 128 rows or more, fold in order (`ordered`); rows per
  // group (at most maxGroup) and vregs per loop step (`unroll`).
  bool ordered = false;
  int64_t maxGroup = 8, group = 8, unroll = 1;
  // VMEM: the row vectors, then two slots (slotBytes apart, from slot0) of
  // `rows` rows of every streamed parameter and result.
  std::vector<int64_t> vecOff, inOff, outOff;
  int64_t rows = 0, slotBytes = 0, nBatches = 0, tailRows = 0;
  uint64_t slot0 = 0, vmemUsed = 0;
  std::map<const Instruction*, VReg> hoisted;
  std::set<int> kept;  // registers that live through the kernel
  // Packed rows of several sublanes: the butterfly's steps (ss, mask).
  std::vector<std::pair<int, int>> sublaneSteps;
  int rB = -1, rSlot = -1, rOther = -1, rA = -1, rV = -1, rSem = -1, rRow = -1, rRows = -1, rBase = -1, rCnt = -1;
  // The vreg's address: one register per element size of the streamed
  // parameters and results, then one per vector.
  std::map<int64_t, int> sizeReg;
  std::vector<int> rPtr;
  // Row values of the group's rows (splats), the registers each row's
  // values own, and the row vectors' vregs at the current offset.
  std::vector<std::map<const Instruction*, VReg>> rowVal;
  std::vector<std::vector<VReg>> rowOwned;
  std::map<const Instruction*, VReg> vecVal;
  RowValueEvaluator values;
};

void RowFusionEmitter::setGroup(int64_t g) {
  group = g;
  unroll = nAcc > 1 ? nAcc : fullV * group <= 32 ? fullV : fullV % 2 == 0 && group <= 4 ? 2 : 1;
}

// Which row values live until the row is done, each one's last user's
// pass, the reduces of each pass, and the largest group.
void RowFusionEmitter::analyseValues() {
  for (const auto& up : f.comp->instructions()) {
    auto it = f.cls.find(up.get());
    if (it == f.cls.end()) continue;
    for (const Instruction* o : up->operands()) {
      auto oc = f.cls.find(o);
      if (oc == f.cls.end() || oc->second != RowFusion::Row) continue;
      if (it->second == RowFusion::Full) broadcastRow.insert(o);
      else lastUse[o] = std::max(lastUse[o], f.level.at(up.get()));
    }
  }
  passReduces.resize(static_cast<size_t>(f.passes) + 1);
  for (const Instruction* v : f.rowValues)
    if (v->opcode() == Opcode::Reduce) passReduces[static_cast<size_t>(f.level.at(v))].push_back(v);
  // Rows per group: as many as the registers hold (tried from 8 down when
  // the group's body is emitted); `unroll` vregs of each per loop step (a
  // row of few vregs is unrolled whole).
  // Short rows need more rows in flight: each fold ends in a lane tree
  // whose latency only other rows can hide.
  // Packed rows, 128 rows or more, fold in order as emitReduceRows does
  // (each fold must give the unfused reduce's bits): a group of 16 vregs
  // is one transposed 128x128 tile.
  ordered = !tiled && unitRows > 1 && k >= kVregElems / 8;
  maxGroup = nAcc > 1 ? 4 : ordered ? 16 : fullV <= 2 ? 32 : fullV <= 4 ? 16 : 8;
  group = maxGroup;
}

// VMEM: the row vectors, then two slots of `rows` rows (a whole number of
// groups) of every streamed parameter and result. Blocks of about 1 MiB
// keep the first load short.
bool RowFusionEmitter::planVmem() {
  uint64_t rowBytes = 0;
  for (int b : inBufs) rowBytes += static_cast<uint64_t>(r * es(b));
  for (int b : outBufs) rowBytes += static_cast<uint64_t>(r * es(b));
  uint64_t cur = 0;
  vecOff.assign(nvec, 0);
  inOff.assign(nl, 0);
  outOff.assign(no, 0);
  for (size_t j = 0; j < nvec; ++j) {
    vecOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(unitLen * es(vecBufs[j])), 512);
  }
  const uint64_t room = l_.vmemBudget() > cur + 65536 ? l_.vmemBudget() - cur - 65536 : 0;
  rows = std::clamp<int64_t>(static_cast<int64_t>((uint64_t{1} << 20) / std::max<uint64_t>(rowBytes, 1)), 1, 4096);
  // Slots hold whole groups (the last group of a block may run past its rows).
  const int64_t maxRows = static_cast<int64_t>(room / (2 * rowBytes + 2048));
  while (maxGroup > 1 && maxGroup * unitRows > maxRows) maxGroup /= 2;
  setGroup(maxGroup);
  const int64_t groupRows = maxGroup * unitRows;
  rows = std::min<int64_t>({rows, k, maxRows / groupRows * groupRows});
  // Blocks start on whole vregs (only the last may end inside one).
  if (rows < k) rows = rows / unitRows * unitRows;
  if (rows < 1) return l_.fail(in, "llo-gen: internal error: row fusion rows do not fit VMEM");
  const int64_t slotRows = (rows + groupRows - 1) / groupRows * groupRows;  // whole groups of any size
  slot0 = cur;
  for (size_t j = 0; j < nl; ++j) {
    inOff[j] = static_cast<int64_t>(cur - slot0);
    cur += alignUp(static_cast<uint64_t>(slotRows * r * es(inBufs[j])), 512);
  }
  for (size_t j = 0; j < no; ++j) {
    outOff[j] = static_cast<int64_t>(cur - slot0);
    cur += alignUp(static_cast<uint64_t>(slotRows * r * es(outBufs[j])), 512);
  }
  slotBytes = static_cast<int64_t>(cur - slot0);
  vmemUsed = cur + static_cast<uint64_t>(slotBytes);
  nBatches = (k + rows - 1) / rows;
  tailRows = k - (nBatches - 1) * rows;
  return true;
}

// Scalar parameters and constants (and scalar work on them) as splats; the
// row vectors, once (repeated for every row of a packed vreg); the masks of
// the packed rows' sublane butterfly.
bool RowFusionEmitter::hoistAndLoadVectors() {
  if (!l_.hoistScalars(in, f.scalars, hoisted)) return false;
  for (const Instruction* i : f.scalars) kept.insert(hoisted.at(i).r);
  for (size_t j = 0; j < nvec; ++j) {
    int ra = sreg();
    const int64_t rowSize = r * es(vecBufs[j]);
    e_.op("smov {}, {}", S(ra), base(vecBufs[j]));
    // Tiled: the vector's [b/128, 128] as tiles of 8 copies of each 128 lanes.
    const int64_t laneBytes = 128 * es(vecBufs[j]);
    e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", vecBufs[j]),
          tiled          ? e_.desc(static_cast<uint64_t>(laneBytes),
                                   {{fullV, laneBytes, 8 * laneBytes}, {8, 0, laneBytes}})
          : unitRows > 1 ? e_.desc(static_cast<uint64_t>(rowSize), {{unitRows, 0, rowSize}})
                         : e_.desc(static_cast<uint64_t>(rowSize), {}),
          vecOff[j], l_.memRef(vecBufs[j], S(ra)));
    sregs_.put(ra);
  }
  if (nvec) e_.op("sem.wait sem0, {}", nvec);
  // Packed rows of several sublanes fold across them by a butterfly: per
  // step `ss`, the sublanes whose bit `ss` is clear take their partner
  // below, the others above (masks kept through the kernel).
  if (unitRows > 1 && !tiled)
    for (int ss = static_cast<int>(r / 128) / 2; ss >= 1; ss /= 2) {
      VReg id = valloc(ElementType::S32);
      const int m = malloc_();
      e_.op("vsublaneid {}", V(id));
      e_.op("vand {}, {}, {}", V(id), V(id), ss);
      e_.op("vcmp.eq.s32 {}, {}, 0", M(m), V(id));
      vfree(id);
      sublaneSteps.push_back({ss, m});
    }
  return true;
}

bool RowFusionEmitter::allocateRegisters() {
  rB = sreg();
  rSlot = sreg();
  rOther = sreg();
  rA = sreg();
  rV = sreg();
  rSem = sreg();
  rRow = sreg();
  rRows = sreg();
  rBase = sreg();
  rCnt = sreg();
  // (One address register per element size, so the scheduler sees the
  // loads and stores at known distances from one base and does not order
  // them.)
  for (size_t j = 0; j < nl + no; ++j) {
    const int64_t size = es(j < nl ? inBufs[j] : outBufs[j - nl]);
    if (!sizeReg.count(size)) sizeReg[size] = sreg();
    rPtr.push_back(sizeReg[size]);
  }
  for (size_t j = 0; j < nvec; ++j) rPtr.push_back(sreg());
  return !failed_;
}

// Block `batchReg` into (or out of) slot `slotReg`. Semaphores: sem1/sem2
// the loads into slot 0/1, sem3/sem4 its write-back.
void RowFusionEmitter::dmaBlock(bool load, int batchReg, int slotReg) {
  const size_t count = load ? nl : no;
  e_.op("sadd {}, {}, {}", S(rSem), S(slotReg), load ? 1 : 3);
  for (size_t j = 0; j < count; ++j) {
    const int b = load ? inBufs[j] : outBufs[j];
    const int64_t unit = r * es(b);
    e_.op("smul {}, {}, {}", S(rA), S(batchReg), rows * unit);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(b));
    e_.op("smul {}, {}, {}", S(rV), S(slotReg), slotBytes);
    e_.op("sadd {}, {}, {}", S(rV), S(rV), static_cast<int64_t>(slot0) + (load ? inOff[j] : outOff[j]));
    auto dma = [&](int64_t n) {
      std::string d = e_.desc(static_cast<uint64_t>(n * unit), {});
      if (load) e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", b), d, S(rV), l_.memRef(b, S(rA)), S(rSem));
      else e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", b), d, l_.memRef(b, S(rA)), S(rV), S(rSem));
    };
    if (nBatches == 1) {
      dma(tailRows);
    } else if (tailRows == rows) {
      dma(rows);
    } else {
      l_.emitEdgeBranch(batchReg, nBatches - 1, [&](bool tail) { dma(tail ? tailRows : rows); });
    }
  }
}

void RowFusionEmitter::freeVecs() {
  for (auto& [i, v] : vecVal) vfree(v);
  vecVal.clear();
}

// The value of `target` at vreg `at` (elements from the pointers) of row
// g: streamed parameters from the block's slot, row vectors loaded once
// per offset (shared by the group's rows).
std::optional<VReg> RowFusionEmitter::evalFull(const Instruction* target, int64_t g, int64_t at,
                                               std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned) {
  auto leaf = [&](const Instruction* i, std::vector<VReg>& own) -> std::optional<VReg> {
    if (i->opcode() == Opcode::Parameter) {
      const size_t pos = static_cast<size_t>(std::find(f.streamed.begin(), f.streamed.end(), i) - f.streamed.begin());
      const int b = inBufs[pos];
      VReg v = l_.vload(bufs_[b].type, fmt::format("{} + {}", S(rPtr[pos]), static_cast<int64_t>(slot0) + inOff[pos] +
                                                                               (g * unitLen + at) * es(b)));
      own.push_back(v);
      return v;
    }
    const Instruction* o = i->operand(0);
    if (auto it = vecVal.find(o); it != vecVal.end()) return it->second;
    const size_t pos = static_cast<size_t>(std::find(f.vectors.begin(), f.vectors.end(), o) - f.vectors.begin());
    const int b = vecBufs[pos];
    VReg v = l_.vload(bufs_[b].type, fmt::format("{} + {}", S(rPtr[nl + no + pos]), vecOff[pos] + at * es(b)));
    vecVal[o] = v;
    return v;
  };
  return values.eval(target, rowVal[static_cast<size_t>(g)], val, owned, leaf);
}

void RowFusionEmitter::setPointers() {
  for (auto [size, reg] : sizeReg) {
    e_.op("smul {}, {}, {}", S(reg), S(rRow), r * size);
    e_.op("sadd {}, {}, {}", S(reg), S(reg), S(rBase));
  }
  for (size_t j = 0; j < nvec; ++j) e_.op("smov {}, 0", S(rPtr[nl + no + j]));
}

void RowFusionEmitter::stepPointers() {
  for (auto [size, reg] : sizeReg) e_.op("sadd {}, {}, {}", S(reg), S(reg), unroll * kVregElems * size);
  for (size_t j = 0; j < nvec; ++j)
    e_.op("sadd {}, {}, {}", S(rPtr[nl + no + j]), S(rPtr[nl + no + j]), unroll * kVregElems * es(vecBufs[j]));
}

// One pass over the group's rows: `body(first)` emits `unroll` vregs of
// every row at offsets 0, 1024, ... from the pointers.
bool RowFusionEmitter::overRows(const std::function<bool(bool)>& body) {
  setPointers();
  if (!body(true)) return false;
  const int64_t steps = fullV / unroll;
  if (steps > 1) {
    stepPointers();
    std::string l = e_.newLabel("rvreg");
    e_.op("smov {}, {}", S(rCnt), steps - 1);
    e_.label(l);
    if (!body(false)) return false;
    stepPointers();
    e_.op("loop {}, {}", S(rCnt), l);
  }
  return true;
}

// The group's rows folded element by element from the init, as
// emitReduceRows folds them: the tile's 128 sublane rows transposed (vreg
// v, sublane s holds element 8v+s of every sublane row, one per lane),
// folded sublane by sublane, and the totals transposed back, so every
// sublane of a row holds its total in every lane. A row of m sublanes
// (m = r / 128) is m lanes: m passes, each starting from the lane before's
// result, leave the total in the row's last lane, which a lane permute
// copies to the row's other lanes.
bool RowFusionEmitter::orderedFold(const std::vector<const Instruction*>& reds) {
  setPointers();
  for (const Instruction* red : reds) {
    ElementType t = red->shape().elementType();
    for (int64_t g = 0; g < group; ++g) {
      std::map<const Instruction*, VReg> val;
      std::vector<VReg> owned;
      auto x = evalFull(red->operand(0), g, 0, val, owned);
      if (!x) return false;
      t = x->t;
      e_.op("vxpose.push xlu0, {}", V(*x));
      values.freeOwned(owned, {});
      freeVecs();
    }
    std::vector<VReg> tile;
    for (int64_t g = 0; g < group; ++g) {
      tile.push_back(valloc(t));
      e_.op("vxpose.pop {}, xlu0", V(tile.back()));
    }
    const int m = static_cast<int>(r / 128);
    VReg acc = l_.vcopy(hoisted.at(red->operand(1)), t);
    for (int pass = 0; pass < m; ++pass) {
      if (pass > 0) {
        VReg next = valloc(t);
        e_.op("vrot.lane {}, {}, 1", V(next), V(acc));  // next[l] = acc[l - 1]
        vfree(acc);
        acc = next;
      }
      for (VReg v : tile)
        for (int sub = 0; sub < 8; ++sub) {
          VReg b = valloc(t);
          e_.op("vbcast.sub {}, {}, {}", V(b), V(v), sub);
          std::vector<VReg> res;
          if (!l_.lowerComputation(*red->toApply(), {acc, b}, res)) return false;
          if (res[0].r != acc.r) vfree(acc);
          if (res[0].r != b.r) vfree(b);
          acc = res[0];
        }
    }
    for (VReg v : tile) vfree(v);
    if (m > 1) {
      VReg idx = valloc(ElementType::S32), spread = valloc(t);
      e_.op("vlaneid {}", V(idx));
      e_.op("vor {}, {}, {}", V(idx), V(idx), m - 1);
      e_.op("vperm.lane {}, {}, {}", V(spread), V(acc), V(idx));
      vfree(idx);
      vfree(acc);
      acc = spread;
    }
    for (int64_t g = 0; g < group; ++g) e_.op("vxpose.push xlu0, {}", V(acc));
    vfree(acc);
    for (int64_t g = 0; g < group; ++g) {
      VReg total = valloc(t);
      e_.op("vxpose.pop {}, xlu0", V(total));
      rowVal[static_cast<size_t>(g)][red] = total;
      rowOwned[static_cast<size_t>(g)].push_back(total);
    }
  }
  return true;
}

// The row values of pass `level` that are not reduces, row by row; then
// the row values no later work reads are freed.
bool RowFusionEmitter::computeRowValues(int level) {
  for (int64_t g = 0; g < group; ++g) {
    auto& rv = rowVal[static_cast<size_t>(g)];
    for (const Instruction* i : f.rowValues) {
      if (f.level.at(i) != level || i->opcode() == Opcode::Reduce) continue;
      std::optional<VReg> v = RowValueEvaluator::lowerRowValue(l_, *i, rv, hoisted, &rowOwned[static_cast<size_t>(g)]);
      if (!v) return false;
      rv[i] = *v;
    }
    std::set<int> freed;
    for (auto it = rv.begin(); it != rv.end();) {
      const Instruction* i = it->first;
      auto lu = lastUse.find(i);
      bool dead =
          !broadcastRow.count(i) && (lu == lastUse.end() || lu->second <= level) && f.level.at(i) <= level;
      if (dead && !kept.count(it->second.r)) {
        bool stillUsed = false;
        for (auto& [o, reg] : rv)
          if (o != i && reg.r == it->second.r) stillUsed = true;
        if (!stillUsed && freed.insert(it->second.r).second) vfree(it->second);
        it = rv.erase(it);
      } else {
        ++it;
      }
    }
  }
  return true;
}

// One pass's reduces over the group's rows, vreg by vreg from the first
// (the rows interleaved), then across lanes and sublanes
// (emitReduceSegments' tree) and the init; packed rows of one sublane stop
// after the lanes, of several the butterfly follows.
bool RowFusionEmitter::foldPass(const std::vector<const Instruction*>& reds) {
  std::vector<std::vector<VReg>> acc(static_cast<size_t>(group), std::vector<VReg>(reds.size() * nAcc));
  bool ok = overRows([&](bool first) -> bool {
    for (int64_t u = 0; u < unroll; ++u) {
      for (int64_t g = 0; g < group; ++g) {
        std::map<const Instruction*, VReg> val;
        std::vector<VReg> owned;
        std::vector<VReg> xs;
        for (const Instruction* red : reds) {
          auto x = evalFull(red->operand(0), g, u * kVregElems, val, owned);
          if (!x) return false;
          xs.push_back(*x);
        }
        std::set<int> keep;
        for (size_t q = 0; q < reds.size(); ++q) {
          VReg& a = acc[static_cast<size_t>(g)][q * nAcc + u % nAcc];
          const bool temp = std::any_of(owned.begin(), owned.end(), [&](VReg o) { return o.r == xs[q].r; });
          if (first && u < nAcc) {
            // The first vreg starts the fold: a temporary is kept as it is.
            a = temp && !keep.count(xs[q].r) ? xs[q] : l_.vcopy(xs[q], xs[q].t);
            keep.insert(a.r);
            continue;
          }
          std::vector<VReg> res;
          if (!l_.lowerComputation(*reds[q]->toApply(), {a, xs[q]}, res)) return false;
          if (!first) {
            // A loop body: the accumulator stays in its register.
            e_.op("vmov.s32 {}, {}", V(a), V(res[0]));
            if (res[0].r != xs[q].r || temp) vfree(res[0]);
            continue;
          }
          if (res[0].r != a.r) vfree(a);
          if (res[0].r == xs[q].r && (!temp || keep.count(xs[q].r))) res[0] = l_.vcopy(xs[q], xs[q].t);
          a = res[0];
          keep.insert(a.r);
        }
        values.freeOwned(owned, keep);
      }
      freeVecs();
    }
    return true;
  });
  if (!ok) return false;
  std::vector<int> steps{64, 32, 16, 8, 4, 2, 1};
  if (unitRows == 1) steps.insert(steps.end(), {-4, -2, -1});
  for (const auto& [ss, m] : sublaneSteps) steps.push_back(-100 - ss);
  for (int step : steps)
    for (int64_t g = 0; g < group; ++g)
      for (size_t q = 0; q < acc[static_cast<size_t>(g)].size(); ++q) {
        VReg& a = acc[static_cast<size_t>(g)][q];
        VReg t = valloc(a.t);
        if (step > 0) {
          e_.op("vrot.lane {}, {}, {}", V(t), V(a), step);
        } else if (step > -100) {
          e_.op("vrot.sub {}, {}, {}", V(t), V(a), -step);
        } else {
          const int ss = -100 - step;
          int m = -1;
          for (const auto& [s2, m2] : sublaneSteps)
            if (s2 == ss) m = m2;
          VReg above = valloc(a.t);
          e_.op("vrot.sub {}, {}, {}", V(t), V(a), ss);          // t[s] = a[s - ss]
          e_.op("vrot.sub {}, {}, {}", V(above), V(a), 8 - ss);  // above[s] = a[s + ss]
          e_.op("vsel.s32 {}, {}, {}, {}", V(t), M(m), V(above), V(t));
          vfree(above);
        }
        std::vector<VReg> res;
        if (!l_.lowerComputation(*reds[q / nAcc]->toApply(), {a, t}, res)) return false;
        vfree(t);
        vfree(a);
        a = res[0];
      }
  for (int64_t g = 0; g < group; ++g)
    for (size_t q = 0; q < reds.size(); ++q) {
      std::optional<VReg> merged = mergeAccumulators(*reds[q], &acc[static_cast<size_t>(g)][q * nAcc]);
      if (!merged) return false;
      VReg a = *merged;
      std::vector<VReg> res;
      if (!l_.lowerComputation(*reds[q]->toApply(), {hoisted.at(reds[q]->operand(1)), a}, res)) return false;
      vfree(a);
      rowVal[static_cast<size_t>(g)][reds[q]] = res[0];
      rowOwned[static_cast<size_t>(g)].push_back(res[0]);
    }
  return true;
}

// Tiled rows: the 8 accumulators of a fold (each row's sum over its tiles
// j = s mod 8, across lanes) combined as the row-major kernel's sublane
// tree combines its sublanes for sublane 0 (step 4, then 2, then 1, each
// sublane taking the one `step` below it, cyclically), so the row values
// are the row-major kernel's bits. One accumulator is the value itself.
std::optional<VReg> RowFusionEmitter::mergeAccumulators(const Instruction& red, VReg* accs) {
  if (nAcc == 1) return accs[0];
  std::map<int64_t, VReg> a;
  for (int64_t s = 0; s < 8; ++s) a[s] = accs[s];
  for (int64_t step = 4; step >= 1; step /= 2) {
    // After this step sublane 0's tree reads only sublanes 0, 7, .., 8 - step + 1.
    std::map<int64_t, VReg> next;
    for (int64_t i = 0; i < step; ++i) {
      const int64_t sub = (8 - i) % 8, below = (sub + 8 - step) % 8;
      std::vector<VReg> res;
      if (!l_.lowerComputation(*red.toApply(), {a.at(sub), a.at(below)}, res)) return std::nullopt;
      next[sub] = res[0];
    }
    for (auto& [sub, v] : a) vfree(v);
    a = std::move(next);
  }
  return a.at(0);
}

// The last pass: the results of the group's rows into the block's slot.
bool RowFusionEmitter::storeResults() {
  return overRows([&](bool) -> bool {
    for (int64_t u = 0; u < unroll; ++u) {
      for (int64_t g = 0; g < group; ++g) {
        std::map<const Instruction*, VReg> val;
        std::vector<VReg> owned;
        for (size_t j = 0; j < no; ++j) {
          auto y = evalFull(f.outputs[j], g, u * kVregElems, val, owned);
          if (!y) return false;
          l_.vstore(*y, bufs_[outBufs[j]].type,
                    fmt::format("{} + {}", S(rPtr[nl + j]), static_cast<int64_t>(slot0) + outOff[j] +
                                                                 (g * unitLen + u * kVregElems) * es(outBufs[j])));
        }
        values.freeOwned(owned, {});
      }
      freeVecs();
    }
    return true;
  });
}

// The registers of the group's row values that are still live.
void RowFusionEmitter::releaseGroup() {
  for (int64_t g = 0; g < group; ++g) {
    std::set<int> live;
    for (auto& [i, reg] : rowVal[static_cast<size_t>(g)]) live.insert(reg.r);
    std::set<int> freed;
    for (VReg v : rowOwned[static_cast<size_t>(g)])
      if (!kept.count(v.r) && live.count(v.r) && freed.insert(v.r).second) vfree(v);
    rowVal[static_cast<size_t>(g)].clear();
  }
}

// A group of rows: the row values pass by pass, then the results.
bool RowFusionEmitter::groupBody() {
  rowOwned.assign(static_cast<size_t>(group), {});
  if (!computeRowValues(0)) return false;
  for (int pass = 1; pass <= f.passes; ++pass) {
    const std::vector<const Instruction*>& reds = passReduces[static_cast<size_t>(pass)];
    if (ordered ? !orderedFold(reds) : !foldPass(reds)) return false;
    if (!computeRowValues(pass)) return false;
  }
  if (!storeResults()) return false;
  releaseGroup();
  return true;
}

// The largest group whose body fits the registers: tried from maxGroup
// down, the emitted code and the pools rolled back when registers ran out.
bool RowFusionEmitter::emitLargestGroup() {
  const auto mark = e_.mark();
  const auto vSaved = vregs_.save(), mSaved = masks_.save(), sSaved = sregs_.save();
  for (int64_t g = maxGroup;; g /= 2) {
    setGroup(g);
    l_.softVregs_ = g > 1 && !ordered;
    l_.vregsExhausted_ = false;
    bool ok = groupBody();
    l_.softVregs_ = false;
    if (!l_.vregsExhausted_) return ok;
    e_.cut(mark);
    vregs_.restore(vSaved);
    masks_.restore(mSaved);
    sregs_.restore(sSaved);
    for (auto& rv : rowVal) rv.clear();
    vecVal.clear();
  }
}

// The top of the block loop: the next block's load issued, this block's
// awaited (and the slot's last write-back), its row count.
void RowFusionEmitter::startBlock() {
  e_.op("sxor {}, {}, 1", S(rOther), S(rSlot));
  if (nBatches > 1) {
    std::string skip = e_.newLabel("rnoprefetch");
    e_.op("sadd {}, {}, 1", S(rCnt), S(rB));
    e_.op("br.eq {}, {}, {}", S(rCnt), nBatches, skip);
    dmaBlock(true, rCnt, rOther);
    e_.label(skip);
  }
  e_.op("sadd {}, {}, 1", S(rSem), S(rSlot));
  e_.op("sem.wait sem[{}], {}", S(rSem), nl);
  if (nBatches > 2) {
    std::string skip = e_.newLabel("rslotfree");
    e_.op("br.lt {}, 2, {}", S(rB), skip);
    e_.op("sadd {}, {}, 3", S(rSem), S(rSlot));
    e_.op("sem.wait sem[{}], {}", S(rSem), no);
    e_.label(skip);
  }
  e_.op("smul {}, {}, {}", S(rBase), S(rSlot), slotBytes);
  e_.op("smov {}, {}", S(rRows), rows);
  if (tailRows != rows) {
    std::string l = e_.newLabel("rfull");
    e_.op("br.ne {}, {}, {}", S(rB), nBatches - 1, l);
    e_.op("smov {}, {}", S(rRows), tailRows);
    e_.label(l);
  }
}

bool RowFusionEmitter::run() {
  if (leaves.size() != f.outputs.size()) return l_.fail(in, "llo-gen: internal error: row fusion result leaves");
  nl = f.streamed.size();
  no = f.outputs.size();
  nvec = f.vectors.size();
  outBufs.assign(leaves.begin(), leaves.end());
  for (const Instruction* p : f.streamed) inBufs.push_back(paramBuf(p));
  for (const Instruction* p : f.vectors) vecBufs.push_back(paramBuf(p));
  analyseValues();
  if (!planVmem() || !hoistAndLoadVectors() || !allocateRegisters()) return false;
  rowVal.assign(static_cast<size_t>(maxGroup), {});
  // The block loop: block b+1 loads while block b is computed; block b's
  // results go out while block b+1 is computed.
  std::string lBatch = e_.newLabel("rblock"), lRow = e_.newLabel("rrow");
  e_.op("smov {}, 0", S(rB));
  e_.op("smov {}, 0", S(rSlot));
  dmaBlock(true, rB, rSlot);
  e_.label(lBatch);
  startBlock();
  // Groups of rows; the last may run past the block's rows on stale VMEM
  // (its results are never written out).
  e_.op("smov {}, 0", S(rRow));
  e_.label(lRow);
  if (!emitLargestGroup()) return false;
  e_.op("sadd {}, {}, {}", S(rRow), S(rRow), group * unitRows);
  e_.op("br.lt {}, {}, {}", S(rRow), S(rRows), lRow);
  dmaBlock(false, rB, rSlot);
  e_.op("smov {}, {}", S(rSlot), S(rOther));
  e_.op("sadd {}, {}, 1", S(rB), S(rB));
  e_.op("br.lt {}, {}, {}", S(rB), nBatches, lBatch);
  // The last (two) write-backs.
  e_.op("sem.wait sem{}, {}", 3 + ((nBatches - 1) & 1), no);
  if (nBatches > 1) e_.op("sem.wait sem{}, {}", 3 + ((nBatches - 2) & 1), no);
  uint64_t bytes = 0;
  for (int b : inBufs) bytes += bufs_[b].bytes;
  for (int b : outBufs) bytes += bufs_[b].bytes;
  for (int b : vecBufs) bytes += bufs_[b].bytes;
  l_.endKernel(static_cast<double>(k * r) * static_cast<double>(f.comp->instructionCount()), bytes, vmemUsed);
  return !failed_;
}

bool Lowerer::lowerRowFusion(const Instruction& in, const RowFusion& f) {
  if (!tiledRows(f) && !rowFusionFitsVmem(f)) return lowerRowFusionStreamed(in, f);
  beginKernel(in, "fusion-rows");
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  // Rows of a group are independent: registers rotate so the scheduler can
  // overlap them.
  RotatingRegs rotating(vregs_);
  return RowFusionEmitter(*this, in, f).run();
}

}  // namespace tpu::codegen
