// Column-reduction fusions: reduces over a middle (or leading) block of
// dimensions, their inputs computed elementwise from parameters streamed
// through VMEM in blocks of rows, with side outputs of the inputs' shape
// and an epilogue on the reduced values.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

// How a reduce views its inputs: [a, r, b] with the reduced dimensions a
// contiguous block r. False when they are not contiguous.
static bool columnView(const Instruction& reduce, int64_t& a, int64_t& r, int64_t& b) {
  const std::vector<int64_t>& dims = reduce.operand(0)->shape().dimensions();
  std::vector<int64_t> red = reduce.attrs().dimensions;
  std::sort(red.begin(), red.end());
  if (red.empty()) return false;
  for (size_t i = 1; i < red.size(); ++i)
    if (red[i] != red[i - 1] + 1) return false;
  a = r = b = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
    (d < red.front() ? a : d > red.back() ? b : r) *= dims[static_cast<size_t>(d)];
  return true;
}

// The geometry of a column-reduction kernel (chunks of columns, rows per
// block) for `vregs` vector registers and a VMEM budget; false when not even
// one chunk fits.
static bool columnGeometry(ColumnReduceFusion& f, int64_t accWords, int vregs, uint64_t budget) {
  // Registers: accumulators of chunkV vregs, and room for one vreg's
  // prologue values, the reducers' temporaries and the hoisted scalars.
  const int64_t perVreg = static_cast<int64_t>(f.inputSide.size() + f.streamed.size() + f.epilogue.size()) + 8;
  const int64_t room = vregs - static_cast<int64_t>(f.hoisted.size()) - accWords - perVreg;
  if (room < 0) return false;
  const int64_t maxV = std::max<int64_t>(1, std::min<int64_t>(8, room / accWords + 1));
  const int64_t cmax = maxV * kVregElems;
  if (f.b <= cmax) {
    f.aGroups = true;
    f.nbFull = f.b;
    f.naFull = std::min(f.a, cmax / f.b);
  } else {
    f.aGroups = false;
    f.naFull = 1;
    f.nbFull = cmax;
  }
  f.chunkV = (f.naFull * f.nbFull + kVregElems - 1) / kVregElems;
  // VMEM: a block of rows of each streamed parameter and side output, one
  // chunk of each reduced output.
  const uint64_t pitch = static_cast<uint64_t>(f.chunkV * kVregElems);
  uint64_t perRow = 0, fixed = 0;
  for (const Instruction* p : f.streamed) perRow += alignUp(pitch * typeInfo(p->shape().elementType()).bytes, 512);
  for (const auto& o : f.outputs) {
    const Shape& s = o.value->shape().isTuple() ? o.value->shape().tupleElements()[static_cast<size_t>(o.index)]
                                                : o.value->shape();
    uint64_t bytes = alignUp(pitch * typeInfo(s.elementType()).bytes, 512);
    (o.side ? perRow : fixed) += bytes;
  }
  if (fixed + perRow > budget) return false;
  f.rows = std::min<int64_t>({f.r, static_cast<int64_t>((budget - fixed) / perRow), 4096});
  // Several blocks without side outputs are double-buffered: two blocks
  // must fit.
  bool sideOutputs = false;
  for (const auto& o : f.outputs) sideOutputs |= o.side;
  if (f.rows < f.r && !sideOutputs)
    f.rows = std::max<int64_t>(1, std::min<int64_t>(f.rows, static_cast<int64_t>((budget - fixed) / (2 * perRow))));
  return true;
}

bool Lowerer::columnReduceFusion(const Instruction& in, ColumnReduceFusion* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  ColumnReduceFusion f;
  f.comp = &c;
  for (const auto& up : c.instructions())
    if (up->opcode() == Opcode::Reduce) f.reduces.push_back(up.get());
  if (f.reduces.empty()) return false;
  if (!columnView(*f.reduces[0], f.a, f.r, f.b)) return false;
  const int64_t nIn = f.a * f.r * f.b, nOut = f.a * f.b;
  // The unfused reduce takes the row-folding kernel for these shapes
  // (lowerReduce): the same fold order keeps the bits. r = 1 would make
  // the inputs' and results' shapes indistinguishable.
  if (f.r < 2 || nOut < kVregElems / 8) return false;
  if (f.b == 1 && f.r >= kVregElems) return false;
  enum Side { Scalar, Input, Output };
  std::map<const Instruction*, Side> side;
  int64_t accWords = 0;
  for (const Instruction* red : f.reduces) {
    int64_t a, r, b;
    if (!columnView(*red, a, r, b) || a != f.a || r != f.r || b != f.b || !red->toApply()) return false;
    int64_t nv = red->operandCount() / 2;
    if (nv < 1 || nv > 3) return false;
    for (int64_t j = 0; j < red->operandCount(); ++j)
      if (!red->operand(j)->shape().isArray() || !plainType(red->operand(j)->shape().elementType())) return false;
    accWords += nv;
  }
  auto count = [](const Instruction& i) { return i.shape().isArray() ? i.shape().elementCount().value_or(-1) : -1; };
  std::set<const Instruction*> used;
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands()) used.insert(o);
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == c.root() && i.opcode() == Opcode::Tuple) break;
    if (i.opcode() == Opcode::Reduce) {
      int64_t nv = i.operandCount() / 2;
      for (int64_t j = 0; j < nv; ++j)
        if (side[i.operand(j)] != Input) return false;
      for (int64_t j = nv; j < 2 * nv; ++j)
        if (!side.count(i.operand(j)) || side[i.operand(j)] != Scalar) return false;
      side[&i] = Output;
      continue;
    }
    if (i.opcode() == Opcode::GetTupleElement) {
      if (i.operand(0)->opcode() != Opcode::Reduce) return false;
      side[&i] = Output;
      f.epilogue.push_back(&i);
      continue;
    }
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    const int64_t n = count(i);
    if (i.opcode() == Opcode::Parameter) {
      if (!used.count(&i)) continue;
      if (i.shape().isScalar()) {
        side[&i] = Scalar;
        f.hoisted.push_back(&i);
      } else if (n == nIn) {
        side[&i] = Input;
        f.streamed.push_back(&i);
      } else {
        return false;
      }
      continue;
    }
    if (i.opcode() == Opcode::Constant) {
      if (!i.shape().isScalar()) return false;
      side[&i] = Scalar;
      f.hoisted.push_back(&i);
      continue;
    }
    bool moves = i.opcode() == Opcode::Broadcast || i.opcode() == Opcode::Reshape || i.opcode() == Opcode::Bitcast;
    if (i.opcode() == Opcode::Broadcast && !i.operand(0)->shape().isScalar()) return false;
    if ((i.opcode() == Opcode::Reshape || i.opcode() == Opcode::Bitcast) &&
        i.shape().elementType() != i.operand(0)->shape().elementType())
      return false;
    if (!moves && (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng ||
                   i.opcode() == Opcode::BitcastConvert))
      return false;
    // Elementwise: the side of its array operands (scalars go with any).
    Side s = Scalar;
    for (const Instruction* o : i.operands()) {
      auto it = side.find(o);
      if (it == side.end()) return false;
      if (it->second == Scalar) continue;
      if (s != Scalar && s != it->second) return false;
      s = it->second;
    }
    if (i.opcode() == Opcode::Broadcast) s = n == nIn ? Input : n == nOut ? Output : Scalar;
    if (s == Scalar && !i.shape().isScalar()) return false;
    if ((s == Input && n != nIn) || (s == Output && n != nOut)) return false;
    side[&i] = s;
    (s == Scalar ? f.hoisted : s == Input ? f.inputSide : f.epilogue).push_back(&i);
  }
  // The result leaves.
  std::vector<const Instruction*> roots;
  if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
  else roots.push_back(c.root());
  bool anyReduced = false;
  for (const Instruction* v : roots) {
    auto it = side.find(v);
    if (it == side.end() || it->second == Scalar) return false;
    if (it->second == Input) {
      f.outputs.push_back({v, 0, true});
      continue;
    }
    anyReduced = true;
    if (v->opcode() == Opcode::Reduce && v->shape().isTuple()) {
      for (int64_t j = 0; j < v->operandCount() / 2; ++j) f.outputs.push_back({v, j, false});
      continue;
    }
    if (!v->shape().isArray()) return false;
    f.outputs.push_back({v, 0, false});
  }
  if (!anyReduced || f.streamed.empty() || f.streamed.size() > 4 || f.hoisted.size() > 8) return false;
  if (!columnGeometry(f, accWords, target_.registers.vregs, vmemBudget())) return false;
  if (out) *out = std::move(f);
  return true;
}

// The column-reduction kernel's phases and the state they share: the plan
// (chunks of columns, blocks of rows, VMEM offsets), the hoisted scalars,
// the accumulators and the registers its loops keep. A friend of Lowerer:
// the phases use the lowering state as the kernel's member functions do.
//
// Loops: chunks of columns (b-chunks within a-chunks); in each, blocks of
// rows DMAed into VMEM (double-buffered when they fit twice and there are
// no side outputs); each row of a block folded vreg by vreg into the
// chunk's accumulators; then the epilogue and the chunk written back.
class ColumnReduceEmitter : KernelPhases {
 public:
  ColumnReduceEmitter(Lowerer& l, const Instruction& in, const ColumnReduceFusion& f)
      : KernelPhases(l, in), f(f), outBufs(l.leaves_[&in]), a(f.a), r(f.r), b(f.b), R(f.rows), chunkV(f.chunkV),
        pitch(chunkV * kVregElems) {}
  bool run();

 private:
  int bufOf(const Instruction* param) { return leaves_[in.operand(param->attrs().parameterNumber)][0]; }
  ElementType outType(const ColumnReduceFusion::Output& o) const { return bufs_[outBufs[&o - f.outputs.data()]].type; }
  // Row pitch in VMEM (bytes) of a streamed parameter or side output: whole vregs.
  int64_t pitchBytes(ElementType t) const { return pitch * typeInfo(t).bytes; }
  void plan();
  bool hoistScalars();
  void allocate();
  void either(bool exists, int reg, int64_t last, const std::function<void(bool)>& gen);
  void colsOf(bool tail, int64_t& na, int64_t& nb) const;
  int64_t rowsOf(bool tail) const { return tail || nBlocks == 1 ? tailR : R; }
  void blockDma(bool load, int buf, const std::string& voff, ElementType t, const std::string& sem);
  void blockElem();
  void initAccumulators();
  void loadBlock();
  void startRows();
  bool foldRowVreg(int64_t u);
  void writeSideOutputs();
  bool finishChunkVreg(int64_t u);
  void writeChunk();

  const ColumnReduceFusion& f;
  const std::vector<int>& outBufs;
  const int64_t a, r, b, R, chunkV, pitch;
  int64_t nChunksA = 0, nChunksB = 0, tailNa = 0, tailNb = 0, nBlocks = 0, tailR = 0;
  // VMEM: the streamed blocks (xSlot bytes, twice when doubleBuffer) and
  // the outputs.
  std::vector<int64_t> xOff, oOff;
  std::vector<int> xBufs;
  uint64_t xSlot = 0;
  bool doubleBuffer = false;
  std::map<const Instruction*, VReg> hoisted;
  // Accumulators: [reduce][operand][vreg].
  std::vector<std::vector<std::vector<VReg>>> acc;
  int rAi = -1, rBi = -1, rRow0 = -1, rRow = -1, rRows = -1, rElem = -1, rAddr = -1, rVoff = -1, rSlot = -1, rSem = -1;
  int rOff[5] = {-1, -1, -1, -1, -1};
  // Column chunks with a shorter last one: which index register and value
  // select it.
  bool colTails = false;
  int rColIdx = -1;
  int64_t lastCol = 0;
  std::string lChunk, lBlock, lRow;
};

// Chunk and block counts and tails, and the VMEM layout.
void ColumnReduceEmitter::plan() {
  nChunksA = (a + f.naFull - 1) / f.naFull;
  nChunksB = (b + f.nbFull - 1) / f.nbFull;
  tailNa = a - (nChunksA - 1) * f.naFull;
  tailNb = b - (nChunksB - 1) * f.nbFull;
  nBlocks = (r + R - 1) / R;
  tailR = r - (nBlocks - 1) * R;
  uint64_t cur = 0;
  oOff.assign(f.outputs.size(), 0);
  for (const Instruction* p : f.streamed) {
    xBufs.push_back(bufOf(p));
    xOff.push_back(static_cast<int64_t>(cur));
    cur += static_cast<uint64_t>(R) * alignUp(static_cast<uint64_t>(pitch) * typeInfo(p->shape().elementType()).bytes, 512);
  }
  bool anySideOutput = false;
  for (const auto& o : f.outputs) anySideOutput |= o.side;
  // Two slots of the streamed blocks when there are several blocks and
  // they fit the budget twice.
  xSlot = cur;
  doubleBuffer = !anySideOutput && nBlocks > 1 && 2 * xSlot <= l_.vmemBudget();
  if (doubleBuffer) cur *= 2;
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    oOff[k] = static_cast<int64_t>(cur);
    uint64_t bytes = alignUp(static_cast<uint64_t>(pitch) * typeInfo(outType(f.outputs[k])).bytes, 512);
    cur += f.outputs[k].side ? static_cast<uint64_t>(R) * bytes : bytes;
  }
  colTails = f.aGroups ? (nChunksA > 1 && tailNa != f.naFull) : (nChunksB > 1 && tailNb != f.nbFull);
  lastCol = f.aGroups ? nChunksA - 1 : nChunksB - 1;
}

// Scalars, constants and scalar ops: once, as splats.
bool ColumnReduceEmitter::hoistScalars() {
  int smem = 0;
  for (const Instruction* i : f.hoisted) {
    if (i->opcode() == Opcode::Parameter) {
      ElementType t = i->shape().elementType();
      int sx = l_.loadScalar(bufOf(i), 0, t, smem++);
      VReg v = valloc(t);
      e_.op("vmov.s32 {}, {}", V(v), S(sx));
      sregs_.put(sx);
      hoisted[i] = v;
      continue;
    }
    std::vector<VReg> ops;
    for (const Instruction* o : i->operands()) ops.push_back(hoisted.at(o));
    auto v = l_.lowerOp(*i, ops);
    if (!v) return false;
    hoisted[i] = *v;
  }
  return true;
}

// The accumulators' registers (chunkV per reduced operand) and the loops'
// scalar registers.
void ColumnReduceEmitter::allocate() {
  acc.resize(f.reduces.size());
  for (size_t q = 0; q < f.reduces.size(); ++q) {
    const Instruction* red = f.reduces[q];
    int64_t nv = red->operandCount() / 2;
    acc[q].resize(static_cast<size_t>(nv));
    for (int64_t j = 0; j < nv; ++j)
      for (int64_t u = 0; u < chunkV; ++u) acc[q][static_cast<size_t>(j)].push_back(valloc(red->operand(j)->shape().elementType()));
  }
  rAi = sreg();
  rBi = sreg();
  rRow0 = sreg();
  rRow = sreg();
  rRows = sreg();
  rElem = sreg();
  rAddr = sreg();
  rOff[1] = sreg();
  rOff[2] = sreg();
  rOff[4] = sreg();
  rVoff = sreg();
  rSlot = sreg();
  rSem = sreg();
  rColIdx = f.aGroups ? rAi : rBi;
}

// Emits gen(tail) under a test of `reg == last` when both cases exist.
void ColumnReduceEmitter::either(bool exists, int reg, int64_t last, const std::function<void(bool)>& gen) {
  if (!exists) {
    gen(false);
    return;
  }
  std::string lt = e_.newLabel("tail"), ld = e_.newLabel("done");
  e_.op("br.eq {}, {}, {}", S(reg), last, lt);
  gen(false);
  e_.op("jmp {}", ld);
  e_.label(lt);
  gen(true);
  e_.label(ld);
}

// The columns of a chunk (the tail chunk's when `tail`): na rows of nb
// columns. When there is a single chunk, it is its own tail.
void ColumnReduceEmitter::colsOf(bool tail, int64_t& na, int64_t& nb) const {
  bool t = tail || (f.aGroups ? nChunksA == 1 : nChunksB == 1);
  na = f.aGroups ? (t ? tailNa : f.naFull) : 1;
  nb = f.aGroups ? b : (t ? tailNb : f.nbFull);
}

// A block of rows between HBM (at element rElem) and VMEM at voff.
void ColumnReduceEmitter::blockDma(bool load, int buf, const std::string& voff, ElementType t, const std::string& sem) {
  int es = typeInfo(t).bytes;
  int64_t pb = pitchBytes(t);
  e_.op("smul {}, {}, {}", S(rAddr), S(rElem), es);
  e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), base(buf));
  either(colTails, rColIdx, lastCol, [&](bool tc) {
    either(nBlocks > 1 && tailR != R, rRow0, (nBlocks - 1) * R, [&](bool tr) {
      int64_t na, nb;
      colsOf(tc, na, nb);
      int64_t rows = rowsOf(tr);
      std::vector<Emitter::Dim> dims;
      if (load) dims = {{rows, b * es, pb}, {na, r * b * es, nb * es}};
      else dims = {{rows, pb, b * es}, {na, nb * es, r * b * es}};
      if (na == 1) dims.pop_back();
      std::string d = e_.desc(static_cast<uint64_t>(nb * es), dims);
      if (load) e_.op("{} {}, [{}], {}, {}", l_.dmaOp("h2v", buf), d, voff, l_.memRef(buf, S(rAddr)), sem);
      else e_.op("{} {}, {}, [{}], {}", l_.dmaOp("v2h", buf), d, l_.memRef(buf, S(rAddr)), voff, sem);
    });
  });
}

// First element of the block: ((a0 * r + row0) * b + b0).
void ColumnReduceEmitter::blockElem() {
  e_.op("smul {}, {}, {}", S(rElem), S(rAi), f.naFull * r * b);
  e_.op("smul {}, {}, {}", S(rAddr), S(rBi), f.nbFull);
  e_.op("sadd {}, {}, {}", S(rElem), S(rElem), S(rAddr));
  e_.op("smul {}, {}, {}", S(rAddr), S(rRow0), b);
  e_.op("sadd {}, {}, {}", S(rElem), S(rElem), S(rAddr));
}

// Every accumulator of the chunk starts at its reduce's init value.
void ColumnReduceEmitter::initAccumulators() {
  for (size_t q = 0; q < f.reduces.size(); ++q)
    for (size_t j = 0; j < acc[q].size(); ++j) {
      VReg init = hoisted.at(f.reduces[q]->operand(static_cast<int64_t>(acc[q].size() + j)));
      for (VReg v : acc[q][j]) e_.op("vmov.s32 {}, {}", V(v), V(init));
    }
}

// The block at rRow0 in VMEM. Without side outputs, blocks of rows are
// double-buffered within a chunk: block k + 1 loads into the other slot
// (semaphore 1 + slot) while block k is folded.
void ColumnReduceEmitter::loadBlock() {
  const int nStreamed = static_cast<int>(f.streamed.size());
  if (doubleBuffer) {
    std::string lFirst = e_.newLabel("cfirst"), lNoNext = e_.newLabel("cnonext");
    e_.op("br.ne {}, 0, {}", S(rRow0), lFirst);
    e_.op("smov {}, 0", S(rSlot));
    blockElem();
    for (size_t j = 0; j < f.streamed.size(); ++j) {
      e_.op("smov {}, {}", S(rVoff), xOff[j]);
      blockDma(true, xBufs[j], S(rVoff), f.streamed[j]->shape().elementType(), "sem1");
    }
    e_.label(lFirst);
    e_.op("sadd {}, {}, {}", S(rRow0), S(rRow0), R);
    e_.op("br.ge {}, {}, {}", S(rRow0), r, lNoNext);
    blockElem();
    e_.op("sxor {}, {}, 1", S(rSem), S(rSlot));
    for (size_t j = 0; j < f.streamed.size(); ++j) {
      e_.op("smul {}, {}, {}", S(rVoff), S(rSem), static_cast<int64_t>(xSlot));
      e_.op("sadd {}, {}, {}", S(rVoff), S(rVoff), xOff[j]);
      e_.op("sadd {}, {}, 1", S(rSem), S(rSem));
      blockDma(true, xBufs[j], S(rVoff), f.streamed[j]->shape().elementType(), fmt::format("sem[{}]", S(rSem)));
      e_.op("ssub {}, {}, 1", S(rSem), S(rSem));
    }
    e_.label(lNoNext);
    e_.op("ssub {}, {}, {}", S(rRow0), S(rRow0), R);
    e_.op("sadd {}, {}, 1", S(rSem), S(rSlot));
    e_.op("sem.wait sem[{}], {}", S(rSem), nStreamed);
  } else {
    blockElem();
    for (size_t j = 0; j < f.streamed.size(); ++j) {
      e_.op("smov {}, {}", S(rVoff), xOff[j]);
      blockDma(true, xBufs[j], S(rVoff), f.streamed[j]->shape().elementType(), "sem0");
    }
    e_.op("sem.wait sem0, {}", nStreamed);
  }
}

// The block's row count, its slot's offsets, and the top of the row loop.
void ColumnReduceEmitter::startRows() {
  e_.op("smov {}, {}", S(rRows), R);
  if (nBlocks > 1 && tailR != R) {
    std::string l = e_.newLabel("fullblock");
    e_.op("br.ne {}, {}, {}", S(rRow0), (nBlocks - 1) * R, l);
    e_.op("smov {}, {}", S(rRows), tailR);
    e_.label(l);
  } else if (nBlocks == 1) {
    e_.op("smov {}, {}", S(rRows), tailR);
  }
  for (int es : {1, 2, 4}) {
    if (doubleBuffer) e_.op("smul {}, {}, {}", S(rOff[es]), S(rSlot), static_cast<int64_t>(xSlot));
    else e_.op("smov {}, 0", S(rOff[es]));
  }
  e_.op("smov {}, 0", S(rRow));
  e_.label(lRow);
}

// Vreg u of the current row: the inputs computed from the streamed
// parameters, the side outputs stored, each reduce's accumulators folded.
bool ColumnReduceEmitter::foldRowVreg(int64_t u) {
  std::map<const Instruction*, VReg> val = hoisted;
  std::vector<VReg> owned;
  for (size_t j = 0; j < f.streamed.size(); ++j) {
    ElementType t = f.streamed[j]->shape().elementType();
    int es = typeInfo(t).bytes;
    VReg v = l_.vload(t, fmt::format("{} + {}", S(rOff[es]), xOff[j] + u * kVregElems * es));
    owned.push_back(v);
    val[f.streamed[j]] = v;
  }
  for (const Instruction* i : f.inputSide)
    if (!l_.evalFusedInstruction(*i, val, owned)) return false;
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    if (!f.outputs[k].side) continue;
    ElementType t = outType(f.outputs[k]);
    int es = typeInfo(t).bytes;
    l_.vstore(val.at(f.outputs[k].value), t, fmt::format("{} + {}", S(rOff[es]), oOff[k] + u * kVregElems * es));
  }
  for (size_t q = 0; q < f.reduces.size(); ++q) {
    const Instruction* red = f.reduces[q];
    size_t nv = acc[q].size();
    std::vector<VReg> args, res;
    for (size_t j = 0; j < nv; ++j) args.push_back(acc[q][j][static_cast<size_t>(u)]);
    for (size_t j = 0; j < nv; ++j) args.push_back(val.at(red->operand(static_cast<int64_t>(j))));
    if (!l_.lowerComputation(*red->toApply(), args, res)) return false;
    for (size_t j = 0; j < nv; ++j) {
      e_.op("vmov.s32 {}, {}", V(acc[q][j][static_cast<size_t>(u)]), V(res[j]));
      vfree(res[j]);
    }
  }
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return true;
}

// The block's rows of each side output back to HBM.
void ColumnReduceEmitter::writeSideOutputs() {
  bool anySide = false;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (f.outputs[k].side) {
      blockElem();
      e_.op("smov {}, {}", S(rVoff), oOff[k]);
      blockDma(false, outBufs[k], S(rVoff), outType(f.outputs[k]), "sem0");
      anySide = true;
    }
  if (anySide) {
    int n = 0;
    for (const auto& o : f.outputs) n += o.side ? 1 : 0;
    e_.op("sem.wait sem0, {}", n);
  }
}

// Vreg u of the chunk's reduced values: the epilogue on them, and each
// reduced output's vreg stored in its VMEM chunk.
bool ColumnReduceEmitter::finishChunkVreg(int64_t u) {
  std::map<const Instruction*, VReg> val = hoisted;
  std::vector<VReg> owned;
  for (size_t q = 0; q < f.reduces.size(); ++q)
    if (acc[q].size() == 1) val[f.reduces[q]] = acc[q][0][static_cast<size_t>(u)];
  auto reducedValue = [&](const Instruction* red, int64_t j) {
    size_t q = static_cast<size_t>(std::find(f.reduces.begin(), f.reduces.end(), red) - f.reduces.begin());
    return acc[q][static_cast<size_t>(j)][static_cast<size_t>(u)];
  };
  for (const Instruction* i : f.epilogue) {
    if (i->opcode() == Opcode::GetTupleElement) {
      val[i] = reducedValue(i->operand(0), i->attrs().tupleIndex);
      continue;
    }
    if (!l_.evalFusedInstruction(*i, val, owned)) return false;
  }
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    const auto& o = f.outputs[k];
    if (o.side) continue;
    ElementType t = outType(o);
    VReg v = o.value->opcode() == Opcode::Reduce ? reducedValue(o.value, o.index) : val.at(o.value);
    l_.vstore(v, t, fmt::format("{}", oOff[k] + u * kVregElems * typeInfo(t).bytes));
  }
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return true;
}

// The chunk of each reduced output back to HBM.
void ColumnReduceEmitter::writeChunk() {
  int outs = 0;
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    if (f.outputs[k].side) continue;
    ElementType t = outType(f.outputs[k]);
    int es = typeInfo(t).bytes;
    int buf = outBufs[k];
    e_.op("smul {}, {}, {}", S(rElem), S(rAi), f.naFull * b);
    e_.op("smul {}, {}, {}", S(rAddr), S(rBi), f.nbFull);
    e_.op("sadd {}, {}, {}", S(rElem), S(rElem), S(rAddr));
    e_.op("smul {}, {}, {}", S(rAddr), S(rElem), es);
    e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), base(buf));
    either(colTails, rColIdx, lastCol, [&](bool tc) {
      int64_t na, nb;
      colsOf(tc, na, nb);
      std::vector<Emitter::Dim> dims;
      if (na > 1) dims.push_back({na, nb * es, b * es});
      e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", buf), e_.desc(static_cast<uint64_t>(nb * es), dims),
            l_.memRef(buf, S(rAddr)), oOff[k]);
    });
    ++outs;
  }
  e_.op("sem.wait sem0, {}", outs);
}

bool ColumnReduceEmitter::run() {
  if (outBufs.size() != f.outputs.size()) return l_.fail(in, "llo-gen: internal error: fusion result leaves");
  plan();
  if (!hoistScalars()) return false;
  allocate();
  lChunk = e_.newLabel("cchunk");
  lBlock = e_.newLabel("cblock");
  lRow = e_.newLabel("crow");
  e_.op("smov {}, 0", S(rAi));
  e_.op("smov {}, 0", S(rBi));
  e_.label(lChunk);
  initAccumulators();
  e_.op("smov {}, 0", S(rRow0));
  e_.label(lBlock);
  loadBlock();
  startRows();
  for (int64_t u = 0; u < chunkV; ++u)
    if (!foldRowVreg(u)) return false;
  for (int es : {1, 2, 4}) e_.op("sadd {}, {}, {}", S(rOff[es]), S(rOff[es]), pitch * es);
  e_.op("sadd {}, {}, 1", S(rRow), S(rRow));
  e_.op("br.lt {}, {}, {}", S(rRow), S(rRows), lRow);
  writeSideOutputs();
  if (doubleBuffer) e_.op("sxor {}, {}, 1", S(rSlot), S(rSlot));
  e_.op("sadd {}, {}, {}", S(rRow0), S(rRow0), R);
  e_.op("br.lt {}, {}, {}", S(rRow0), r, lBlock);
  // The reduced values, the epilogue, and the chunk of each reduced output.
  for (int64_t u = 0; u < chunkV; ++u)
    if (!finishChunkVreg(u)) return false;
  writeChunk();
  // Next chunk: b-chunks within an a-chunk.
  e_.op("sadd {}, {}, 1", S(rBi), S(rBi));
  e_.op("br.lt {}, {}, {}", S(rBi), nChunksB, lChunk);
  e_.op("smov {}, 0", S(rBi));
  e_.op("sadd {}, {}, 1", S(rAi), S(rAi));
  e_.op("br.lt {}, {}, {}", S(rAi), nChunksA, lChunk);
  uint64_t bytes = 0;
  for (int buf : xBufs) bytes += bufs_[buf].bytes;
  for (int buf : outBufs) bytes += bufs_[buf].bytes;
  const double elems = static_cast<double>(a * r * b);
  l_.endKernel(elems * static_cast<double>(f.inputSide.size() + f.reduces.size()), bytes, 0);
  return !failed_;
}

bool Lowerer::lowerColumnReduceFusion(const Instruction& in, const ColumnReduceFusion& f) {
  beginKernel(in, "fusion-reduce-columns");
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  return ColumnReduceEmitter(*this, in, f).run();
}

}  // namespace tpu::codegen
