// Output fusions: a fusion whose computation is one MXU dot followed by
// elementwise work (bias, activation, residual add, convert) lowers as one
// matmul kernel. When a C tile's last k step is done, the epilogue reads the
// tile from VMEM vreg by vreg, evaluates the fused elementwise instructions
// in registers (with the tiles of the other inputs DMAed beside it) and
// writes the fusion's result tile, in its own type, straight to HBM. The
// dot's f32 result never leaves VMEM, and the unfused path's extra passes
// (type conversion, one kernel per elementwise op) disappear. Edge tiles of
// odd shapes write their valid part; im2col and depthwise convolutions take
// the same epilogue (lower_conv.cpp); an operand computed elementwise from
// a parameter is computed on the matmul's tiles as they are loaded.
//
// Input fusions: a fusion whose root is a reduction over its trailing
// dimensions, its inputs computed elementwise from parameters shaped like
// them (softmax sums, layer-norm moments), lowers as the reduction kernel
// itself: the parameters' rows stream through VMEM and the elementwise
// instructions run on each vreg before it is folded.
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

constexpr size_t kMaxTileInputs = 3, kMaxColumnInputs = 3, kMaxScalarInputs = 4;

bool plainType(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.ok && !ti.isComplex && ti.words <= 1;
}

// The geometry of a convolution the output-fusion path takes: float
// operands (the im2col MXU path of lowerConvolution, or its depthwise
// kernel), every extent nonzero, and a channels-last result, whose
// [positions, channels] rows are the matmul's rows (each feature group a
// block of columns). `depthwise` tells whether lowerConvolution may take
// its vector-unit kernel.
bool convEpilogueGeometry(const Instruction& conv, MatmulEpilogue& e, bool& depthwise) {
  const auto& a = conv.attrs();
  if (!a.convDims || conv.operandCount() != 2) return false;
  const auto& dn = *a.convDims;
  const Shape& ls = conv.operand(0)->shape();
  const Shape& ks = conv.operand(1)->shape();
  const Shape& os = conv.shape();
  for (ElementType t : {ls.elementType(), ks.elementType(), os.elementType()})
    if (!plainType(t) || !typeInfo(t).isFloat) return false;
  const int64_t rank = os.rank();
  if (ls.rank() != rank || ks.rank() != rank || rank < 2) return false;
  for (const Shape* s : {&ls, &ks, &os})
    for (int64_t d : s->dimensions())
      if (d <= 0) return false;
  if (dn.outputBatchDimension != 0 || dn.outputFeatureDimension != rank - 1 ||
      dn.outputSpatialDimensions.size() != static_cast<size_t>(rank - 2))
    return false;
  for (size_t d = 0; d < dn.outputSpatialDimensions.size(); ++d)
    if (dn.outputSpatialDimensions[d] != static_cast<int64_t>(d + 1)) return false;
  const int64_t fg = a.featureGroupCount, bg = a.batchGroupCount;
  const int64_t inFeatures = ls.dimension(dn.inputFeatureDimension);
  const int64_t outFeatures = ks.dimension(dn.kernelOutputFeatureDimension);
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1) || inFeatures % fg != 0 || outFeatures % std::max(fg, bg) != 0)
    return false;
  const int64_t outPerGroup = outFeatures / std::max(fg, bg);
  depthwise = inFeatures / fg == 1 && fg > 1 && outPerGroup <= 8;
  e.m = *os.elementCount() / outFeatures;
  e.n = outPerGroup;
  e.rowStride = outFeatures;
  e.batchStride = e.columnBatchStride = outPerGroup;
  return true;
}

// The elementwise chain computing dot operand `x` inside fusion `c` from
// one parameter shaped like it (and scalar constants), in computation
// order: what the matmul can apply to the parameter's tiles as it loads
// them. The operand is a float (the bf16 or f32 MXU path).
bool operandPrologue(const Computation& c, const Instruction* x, std::vector<const Instruction*>& chain,
                     const Instruction*& source) {
  if (!typeInfo(x->shape().elementType()).isFloat) return false;
  std::set<const Instruction*> needed;
  std::vector<const Instruction*> stack = {x};
  source = nullptr;
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    if (!needed.insert(i).second) continue;
    if (!i->shape().isArray() || !plainType(i->shape().elementType())) return false;
    bool scalar = i->shape().isScalar();
    if (i->opcode() == Opcode::Parameter) {
      if (scalar || i->shape().dimensions() != x->shape().dimensions() || (source && source != i)) return false;
      source = i;
      continue;
    }
    if (i->opcode() == Opcode::Constant) {
      if (!scalar) return false;
      continue;
    }
    if (scalar || i->shape().dimensions() != x->shape().dimensions()) return false;
    if (i->opcode() == Opcode::Broadcast) {
      if (i->operand(0)->opcode() != Opcode::Constant) return false;
    } else if (!hlo::isElementwise(i->opcode()) || i->opcode() == Opcode::Rng) {
      return false;
    }
    for (const Instruction* o : i->operands()) stack.push_back(o);
  }
  if (!source) return false;
  chain.clear();
  for (const auto& up : c.instructions())
    if (needed.count(up.get()) && up.get() != source) chain.push_back(up.get());
  return true;
}

}  // namespace

bool Lowerer::emitOperandPrologue(const MatmulEpilogue& e, int operand, VReg x, int mask) {
  const Instruction* source = e.prologueSource[operand];
  std::map<const Instruction*, VReg> val;
  val[source] = VReg{x.r, source->shape().elementType()};
  std::vector<VReg> owned;
  for (const Instruction* i : e.prologue[operand])
    if (!evalFusedInstruction(*i, val, owned)) return false;
  VReg v = val[e.dot->operand(operand)];
  if (mask >= 0) e_.op("vsel.s32 {}, {}, {}, 0", V(x), M(mask), V(v));
  else if (v.r != x.r) e_.op("vmov.s32 {}, {}", V(x), V(v));
  std::set<int> freed = {x.r};
  for (VReg r : owned)
    if (freed.insert(r.r).second) vfree(r);
  return true;
}

bool Lowerer::evalOnRegisters(const Computation& c, const Instruction* stop,
                              std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned) {
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == stop) break;
    if (i.opcode() == Opcode::Parameter || val.count(&i)) continue;
    if (i.opcode() == Opcode::Broadcast) {  // of a scalar: its splat
      val[&i] = val[i.operand(0)];
      continue;
    }
    std::vector<VReg> ops;
    for (const Instruction* o : i.operands()) ops.push_back(val[o]);
    auto r = lowerOp(i, ops);
    if (!r) return false;
    val[&i] = *r;
    owned.push_back(*r);
  }
  return true;
}

VReg Lowerer::splatScalar(int buf, ElementType type, int smemSlot) {
  int sx = loadScalar(buf, 0, type, smemSlot);
  VReg v = valloc(type);
  e_.op("vmov.s32 {}, {}", V(v), S(sx));
  sregs_.put(sx);
  return v;
}

bool Lowerer::evalFusedInstruction(const Instruction& i, std::map<const Instruction*, VReg>& val,
                                   std::vector<VReg>& owned) {
  if (i.opcode() == Opcode::Broadcast || i.opcode() == Opcode::Reshape || i.opcode() == Opcode::Bitcast) {
    val[&i] = val.at(i.operand(0));
    return true;
  }
  std::vector<VReg> ops;
  for (const Instruction* o : i.operands()) ops.push_back(val.at(o));
  auto v = lowerOp(i, ops);
  if (!v) return false;
  val[&i] = *v;
  owned.push_back(*v);
  return true;
}

bool Lowerer::matmulEpilogueFusion(const Instruction& in, MatmulEpilogue* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation() || !in.shape().isArray()) return false;
  const Computation& c = *in.fusedComputation();
  const Instruction* dot = nullptr;
  for (const auto& i : c.instructions())
    if (i->opcode() == Opcode::Dot || i->opcode() == Opcode::Convolution) {
      if (dot) return false;
      dot = i.get();
    }
  if (!dot || dot->operandCount() != 2 || !dot->shape().isArray()) return false;
  MatmulEpilogue e;
  e.fusion = &in;
  e.comp = &c;
  e.dot = dot;
  e.outType = in.shape().elementType();
  std::set<const Instruction*> prologue;
  for (int j = 0; j < 2; ++j) {
    const Instruction* o = dot->operand(j);
    if (!plainType(o->shape().elementType())) return false;
    if (o->opcode() == Opcode::Parameter) continue;
    if (dot->opcode() != Opcode::Dot || !operandPrologue(c, o, e.prologue[j], e.prologueSource[j])) return false;
    prologue.insert(e.prologue[j].begin(), e.prologue[j].end());
  }
  // The chains feed the dot only.
  for (const auto& up : c.instructions())
    if (up.get() != dot && !prologue.count(up.get()))
      for (const Instruction* o : up->operands())
        if (prologue.count(o)) return false;
  const std::vector<int64_t>& dims = dot->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t columnRank = 1;
  bool depthwise = false;
  if (dot->opcode() == Opcode::Dot) {
    if (!isMxuDot(*dot)) return false;
    DotGeometry geo = dotGeometry(*dot);
    if (geo.m <= 0 || geo.n <= 0 || geo.k <= 0 || geo.b <= 0) return false;
    columnRank = static_cast<int64_t>(geo.rhsFree.size());
    e.m = geo.m;
    e.n = geo.n;
    e.k = geo.k;
    e.rowStride = geo.n;
    e.batchStride = geo.m * geo.n;
  } else if (!convEpilogueGeometry(*dot, e, depthwise)) {
    return false;
  }
  if (in.shape().dimensions() != dims || !plainType(in.shape().elementType())) return false;
  const std::vector<int64_t> columnDims(dims.end() - columnRank, dims.end());
  size_t tiles = 0, columns = 0, scalars = 0;
  auto add = [&](const Instruction* value, MatmulEpilogue::Kind kind, ElementType type) {
    for (const auto& input : e.inputs)
      if (input.value == value) return;
    e.inputs.push_back({value, kind, -1, type});
    (kind == MatmulEpilogue::Tile ? tiles : kind == MatmulEpilogue::Column ? columns : scalars)++;
  };
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == dot || i.opcode() == Opcode::Parameter || prologue.count(&i)) continue;
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    bool scalar = i.shape().isScalar();
    if (!scalar && i.shape().dimensions() != dims) return false;
    if (i.opcode() == Opcode::Constant) {
      if (!scalar) return false;
      continue;
    }
    if (i.opcode() == Opcode::Broadcast) {
      const Instruction* o = i.operand(0);
      if (o->shape().isScalar()) {
        if (o->opcode() == Opcode::Parameter) add(o, MatmulEpilogue::Scalar, o->shape().elementType());
        continue;
      }
      // A vector along the result's columns (the rhs free dimensions, or a
      // convolution's output features).
      std::vector<int64_t> want;
      for (int64_t d = rank - columnRank; d < rank; ++d) want.push_back(d);
      if (o->opcode() != Opcode::Parameter || i.attrs().dimensions != want || o->shape().dimensions() != columnDims ||
          !plainType(o->shape().elementType()))
        return false;
      add(&i, MatmulEpilogue::Column, o->shape().elementType());
      continue;
    }
    if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng) return false;
    for (const Instruction* o : i.operands()) {
      if (o->opcode() != Opcode::Parameter) continue;
      if (o->shape().isScalar()) add(o, MatmulEpilogue::Scalar, o->shape().elementType());
      else if (o->shape().dimensions() == dims && plainType(o->shape().elementType()))
        add(o, MatmulEpilogue::Tile, o->shape().elementType());
      else
        return false;
    }
  }
  // Every value the epilogue reads must be computed from the dot (a root
  // that is a parameter or constant is not an output fusion).
  if (c.root()->opcode() == Opcode::Parameter) return false;
  if (tiles > kMaxTileInputs || columns > kMaxColumnInputs || scalars > kMaxScalarInputs) return false;
  if (depthwise && !depthwiseEpilogue(e)) return false;
  if (out) *out = std::move(e);
  return true;
}

bool Lowerer::depthwiseEpilogue(const MatmulEpilogue& e) {
  for (const MatmulEpilogue::Input& input : e.inputs)
    if (input.kind == MatmulEpilogue::Tile) return false;
  return true;
}

uint64_t Lowerer::matmulEpilogueBytes(const MatmulEpilogue& e, int64_t tm, int64_t tn) const {
  uint64_t bytes = 2 * alignUp(static_cast<uint64_t>(tm * tn * typeInfo(e.outType).bytes), 512);
  for (const MatmulEpilogue::Input& input : e.inputs) {
    uint64_t es = static_cast<uint64_t>(typeInfo(input.type).bytes);
    if (input.kind == MatmulEpilogue::Tile) bytes += alignUp(static_cast<uint64_t>(tm * tn) * es, 512);
    if (input.kind == MatmulEpilogue::Column) bytes += alignUp(static_cast<uint64_t>(tn) * es, 512);
  }
  return bytes;
}

bool Lowerer::lowerMatmulEpilogueFusion(const Instruction& in) {
  MatmulEpilogue e;
  if (!matmulEpilogueFusion(in, &e)) return fail(in, "llo-gen: internal error: not an output fusion");
  const Computation& c = *e.comp;
  for (int64_t p = 0; p < in.operandCount(); ++p)
    if (const Instruction* param = c.parameter(p)) leaves_[param] = leaves_[in.operand(p)];
  for (MatmulEpilogue::Input& input : e.inputs)
    input.buf = leaves_[input.kind == MatmulEpilogue::Column ? input.value->operand(0) : input.value][0];
  e.outBuf = leaves_[&in][0];
  const Instruction& dot = *e.dot;
  if (dot.opcode() == Opcode::Convolution) return lowerConvolution(dot, &e);
  beginKernel(in, "fusion-matmul");
  const Instruction* lhs = dot.operand(0);
  const Instruction* rhs = dot.operand(1);
  const auto& dn = *dot.attrs().dotDims;
  DotGeometry geo = dotGeometry(dot);
  // Padded like the unfused dot's operands; the epilogue writes only the
  // valid rows and columns of the edge tiles.
  int64_t mp = (geo.m + 7) / 8 * 8, kp = (geo.k + 127) / 128 * 128, np = (geo.n + 127) / 128 * 128;
  // Operands computed in the fusion are loaded as their source parameters.
  const Instruction* lhsSrc = e.prologueSource[0] ? e.prologueSource[0] : lhs;
  const Instruction* rhsSrc = e.prologueSource[1] ? e.prologueSource[1] : rhs;
  int a = canonicalDotOperand(lhsSrc, dn.lhsBatchDimensions, geo.lhsFree, dn.lhsContractingDimensions, mp, kp);
  int w = canonicalDotOperand(rhsSrc, dn.rhsBatchDimensions, dn.rhsContractingDimensions, geo.rhsFree, kp, np);
  int passes = mxuPasses(dot, lhs->shape().elementType(), rhs->shape().elementType());
  bool ok = emitMatmul(in, geo.b, mp, kp, np, a, lhsSrc->shape().elementType(), w, rhsSrc->shape().elementType(),
                       e.outBuf, passes, &e);
  uint64_t bytes = bufs_[leaves_[lhsSrc][0]].bytes + bufs_[leaves_[rhsSrc][0]].bytes + bufs_[e.outBuf].bytes;
  for (const MatmulEpilogue::Input& input : e.inputs) bytes += bufs_[input.buf].bytes;
  double elementwise = static_cast<double>(geo.b * geo.m * geo.n) * static_cast<double>(c.instructionCount());
  endKernel(2.0 * static_cast<double>(geo.b * geo.m * geo.n * geo.k) * passes + elementwise, bytes, 0);
  return ok && !failed_;
}

// Emits body(count) once for each number of valid rows (or columns) a tile
// whose index is in rIdx can have: `full` below tile fullTiles, `rest` at it.
// Tiles past those are all padding and never get here.
void Lowerer::emitEdgeBranch(int reg, int64_t threshold, const std::function<void(bool)>& gen) {
  std::string lEdge = e_.newLabel("edge"), lDone = e_.newLabel("edged");
  e_.op("br.ge {}, {}, {}", S(reg), threshold, lEdge);
  gen(false);
  e_.op("jmp {}", lDone);
  e_.label(lEdge);
  gen(true);
  e_.label(lDone);
}

void Lowerer::emitByTileExtent(int rIdx, int64_t fullTiles, int64_t full, int64_t rest,
                               const std::function<void(int64_t)>& body) {
  if (rest == 0 || fullTiles == 0) {
    body(rest == 0 ? full : rest);
    return;
  }
  emitEdgeBranch(rIdx, fullTiles, [&](bool edge) { body(edge ? rest : full); });
}

void Lowerer::emitMatmulEpilogue(const Instruction& in, const MatmulEpilogue& e, const MatmulTileSite& site) {
  const int64_t tm = site.tm, tn = site.tn;
  const int eo = typeInfo(e.outType).bytes;
  // Tiles with every row (column) valid, and the valid rows (columns) of
  // the one after them; any further tile of the padded matmul is padding.
  const int64_t fullM = e.m / tm, restM = e.m % tm, fullN = e.n / tn, restN = e.n % tn;
  const int64_t validM = fullM + (restM ? 1 : 0), validN = fullN + (restN ? 1 : 0);
  std::string lPadding = e_.newLabel("epad"), lEnd = e_.newLabel("eend");
  if (site.m / tm > validM) e_.op("br.ge {}, {}, {}", S(site.rMTile), validM, lPadding);
  if (site.n / tn > validN) e_.op("br.ge {}, {}, {}", S(site.rNTile), validN, lPadding);
  auto byExtent = [&](const std::function<void(int64_t, int64_t)>& body) {
    emitByTileExtent(site.rMTile, fullM, tm, restM, [&](int64_t rows) {
      emitByTileExtent(site.rNTile, fullN, tn, restN, [&](int64_t cols) { body(rows, cols); });
    });
  };
  // The tile's first element, as an element index into the result.
  int rTile = sreg(), rAddr = sreg();
  e_.op("smul {}, {}, {}", S(rTile), S(site.rBatch), e.batchStride);
  e_.op("smul {}, {}, {}", S(rAddr), S(site.rMTile), tm * e.rowStride);
  e_.op("sadd {}, {}, {}", S(rTile), S(rTile), S(rAddr));
  e_.op("smul {}, {}, {}", S(rAddr), S(site.rNTile), tn);
  e_.op("sadd {}, {}, {}", S(rTile), S(rTile), S(rAddr));
  // The other inputs' tiles and columns, into VMEM beside the C tile (the
  // valid part of an edge tile; the rest of the slot is never written out).
  int waits = 0;
  std::vector<int> rSrc(e.inputs.size(), -1);
  for (size_t j = 0; j < e.inputs.size(); ++j) {
    const MatmulEpilogue::Input& input = e.inputs[j];
    if (input.kind == MatmulEpilogue::Scalar) continue;
    int es = typeInfo(input.type).bytes;
    rSrc[j] = sreg();
    if (input.kind == MatmulEpilogue::Tile) {
      e_.op("smul {}, {}, {}", S(rSrc[j]), S(rTile), es);
    } else {
      e_.op("smul {}, {}, {}", S(rSrc[j]), S(site.rBatch), e.columnBatchStride * es);
      e_.op("smul {}, {}, {}", S(rAddr), S(site.rNTile), tn * es);
      e_.op("sadd {}, {}, {}", S(rSrc[j]), S(rSrc[j]), S(rAddr));
    }
    e_.op("sadd {}, {}, {}", S(rSrc[j]), S(rSrc[j]), base(input.buf));
    ++waits;
  }
  if (waits)
    byExtent([&](int64_t rows, int64_t cols) {
      for (size_t j = 0; j < e.inputs.size(); ++j) {
        const MatmulEpilogue::Input& input = e.inputs[j];
        if (input.kind == MatmulEpilogue::Scalar) continue;
        int es = typeInfo(input.type).bytes;
        std::string d = input.kind == MatmulEpilogue::Tile
                            ? e_.desc(static_cast<uint64_t>(cols * es), {{rows, e.rowStride * es, tn * es}})
                            : e_.desc(static_cast<uint64_t>(cols * es), {});
        e_.op("{} {}, [{}], {}, sem4", dmaOp("h2v", input.buf), d, site.vInputs[j], memRef(input.buf, S(rSrc[j])));
      }
    });
  for (int r : rSrc)
    if (r >= 0) sregs_.put(r);
  // Scalars are the same for every vreg: splat once per tile.
  std::map<const Instruction*, VReg> scalars;
  int smem = 0;
  for (const MatmulEpilogue::Input& input : e.inputs)
    if (input.kind == MatmulEpilogue::Scalar) scalars[input.value] = splatScalar(input.buf, input.type, smem++);
  if (waits) e_.op("sem.wait sem4, {}", waits);
  // Row-block pointers: C, the epilogue output slot, and each input tile.
  int rC = sreg(), rE = sreg(), rCount = sreg();
  std::vector<int> rIn(e.inputs.size(), -1);
  e_.op("smov {}, {}", S(rC), S(site.rC));
  e_.op("smul {}, {}, {}", S(rE), S(site.rSlot), site.eSlot);
  e_.op("sadd {}, {}, {}", S(rE), S(rE), site.vE);
  for (size_t j = 0; j < e.inputs.size(); ++j)
    if (e.inputs[j].kind != MatmulEpilogue::Scalar) {
      rIn[j] = sreg();
      e_.op("smov {}, {}", S(rIn[j]), site.vInputs[j]);
    }
  const ElementType dotType = e.dot->shape().elementType();
  // Each instruction's last reader, in the computation's order: a chain
  // frees a register as soon as nothing later reads it, so several row
  // blocks' chains fit the registers at once.
  std::map<const Instruction*, size_t> lastUse;
  {
    size_t k = 0;
    for (const auto& up : e.comp->instructions()) {
      for (const Instruction* o : up->operands()) lastUse[o] = k;
      ++k;
    }
    lastUse[e.comp->root()] = SIZE_MAX;
  }
  // `unroll` row blocks per loop step: their chains are independent, and
  // with rotating registers the scheduler overlaps them (an epilogue such
  // as GELU is a long chain per vreg). The largest unroll whose body fits
  // the registers, found by emitting it.
  auto stepBody = [&](int64_t unroll) -> bool {
    // The chains (row block rb, vreg u) advance instruction by instruction
    // together, so the emitted order is already a good schedule.
    struct Chain {
      int64_t rb, u;
      std::map<const Instruction*, VReg> val;
      std::vector<VReg> owned;
      std::set<int> freed, ownedRegs;
    };
    std::vector<Chain> chains;
    for (int64_t rb = 0; rb < unroll; ++rb)
      for (int64_t u = 0; u < tn / 128; ++u) chains.push_back(Chain{rb, u, scalars, {}, {}, {}});
    for (Chain& ch : chains) {
      for (const auto& chain : e.prologue)  // evaluated by the matmul
        for (const Instruction* i : chain) ch.val[i] = VReg{};
      auto own = [&](VReg v) {
        ch.owned.push_back(v);
        ch.ownedRegs.insert(v.r);
        return v;
      };
      // The dot's own result type first (the unfused path rounds there too).
      VReg cv = own(valloc(ElementType::F32));
      e_.op("vld {}, [{} + {}], {}", V(cv), S(rC), ch.rb * 8 * tn * 4 + ch.u * 512, tn * 4);
      if (dotType != ElementType::F32) {
        VReg r = own(valloc(dotType));
        e_.op("vmov.s32 {}, {}", V(r), V(cv));
        cv = normalize(r);
      }
      ch.val[e.dot] = cv;
      for (size_t j = 0; j < e.inputs.size(); ++j) {
        const MatmulEpilogue::Input& input = e.inputs[j];
        if (input.kind == MatmulEpilogue::Scalar) continue;
        int es = typeInfo(input.type).bytes;
        bool tile = input.kind == MatmulEpilogue::Tile;
        ch.val[input.value] = own(vload(
            input.type, fmt::format("{} + {}", S(rIn[j]), (tile ? ch.rb * 8 * tn * es : 0) + ch.u * 128 * es),
            fmt::format(", {}", tile ? tn * es : 0)));
      }
    }
    size_t k = 0;
    for (const auto& up : e.comp->instructions()) {
      const Instruction& i = *up;
      const size_t at = k++;
      for (Chain& ch : chains) {
        if (i.opcode() == Opcode::Parameter || ch.val.count(&i)) continue;
        if (i.opcode() == Opcode::Broadcast) {  // of a scalar: its splat
          ch.val[&i] = ch.val[i.operand(0)];
        } else {
          std::vector<VReg> ops;
          for (const Instruction* o : i.operands()) ops.push_back(ch.val[o]);
          auto r = lowerOp(i, ops);
          if (!r) return false;
          ch.val[&i] = *r;
          ch.owned.push_back(*r);
          ch.ownedRegs.insert(r->r);
        }
        // Operands read for the last time: their registers, unless a value
        // still to be read shares them.
        for (const Instruction* o : i.operands()) {
          auto lu = lastUse.find(o);
          auto vo = ch.val.find(o);
          if (lu == lastUse.end() || lu->second != at || vo == ch.val.end()) continue;
          const int reg = vo->second.r;
          if (reg < 0 || !ch.ownedRegs.count(reg) || ch.freed.count(reg)) continue;
          bool shared = false;
          for (auto& [x, v] : ch.val) {
            if (v.r != reg || x == o) continue;
            auto lx = lastUse.find(x);
            if (lx != lastUse.end() && lx->second > at) shared = true;
          }
          if (shared) continue;
          ch.freed.insert(reg);
          vfree(vo->second);
        }
      }
    }
    for (Chain& ch : chains) {
      VReg result = ch.val[e.comp->root()];
      vstore(result, e.outType, fmt::format("{} + {}", S(rE), ch.rb * 8 * tn * eo + ch.u * 128 * eo),
             fmt::format(", {}", tn * eo));
      for (VReg v : ch.owned)
        if (ch.freed.insert(v.r).second) vfree(v);
    }
    return true;
  };
  {
    vregs_.setRotating(true);
    const auto mark = e_.mark();
    const auto vSaved = vregs_.save(), mSaved = masks_.save(), sSaved = sregs_.save();
    for (int64_t unroll : {4, 2, 1}) {
      if ((tm / 8) % unroll != 0) continue;
      std::string lBlock = e_.newLabel("epilogue");
      e_.op("smov {}, {}", S(rCount), tm / 8 / unroll);
      e_.label(lBlock);
      softVregs_ = unroll > 1;
      vregsExhausted_ = false;
      bool ok = stepBody(unroll);
      softVregs_ = false;
      if (!vregsExhausted_) {
        vregs_.setRotating(false);
        if (!ok) return;
        e_.op("sadd {}, {}, {}", S(rC), S(rC), unroll * 8 * tn * 4);
        e_.op("sadd {}, {}, {}", S(rE), S(rE), unroll * 8 * tn * eo);
        for (size_t j = 0; j < e.inputs.size(); ++j)
          if (rIn[j] >= 0 && e.inputs[j].kind == MatmulEpilogue::Tile)
            e_.op("sadd {}, {}, {}", S(rIn[j]), S(rIn[j]), unroll * 8 * tn * typeInfo(e.inputs[j].type).bytes);
        e_.op("loop {}, {}", S(rCount), lBlock);
        break;
      }
      e_.cut(mark);
      vregs_.restore(vSaved);
      masks_.restore(mSaved);
      sregs_.restore(sSaved);
    }
    vregs_.setRotating(false);
  }
  // The result tile (its valid part) goes out under the C slot's
  // semaphore, as the C tile itself would.
  e_.op("smul {}, {}, {}", S(rAddr), S(rTile), eo);
  e_.op("sadd {}, {}, {}", S(rAddr), S(rAddr), base(e.outBuf));
  e_.op("smul {}, {}, {}", S(rE), S(site.rSlot), site.eSlot);
  e_.op("sadd {}, {}, {}", S(rE), S(rE), site.vE);
  byExtent([&](int64_t rows, int64_t cols) {
    std::string d = e_.desc(static_cast<uint64_t>(cols * eo), {{rows, tn * eo, e.rowStride * eo}});
    e_.op("{} {}, {}, [{}], sem[{}]", dmaOp("v2h", e.outBuf), d, memRef(e.outBuf, S(rAddr)), S(rE), S(site.rSem));
  });
  for (auto& [inst, v] : scalars) vfree(v);
  for (int r : rIn)
    if (r >= 0) sregs_.put(r);
  for (int r : {rTile, rAddr, rC, rE, rCount}) sregs_.put(r);
  if (site.m / tm > validM || site.n / tn > validN) {
    // A tile of padding writes nothing: its slot is free at once.
    e_.op("jmp {}", lEnd);
    e_.label(lPadding);
    e_.op("sem.signal sem[{}]", S(site.rSem));
    e_.label(lEnd);
  }
  (void)in;
}

bool Lowerer::inputFusion(const Instruction& in, ReducePrologue* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  // Reduces of inputs of the same dimensions over the same dimensions
  // (variadic ones too): up to 3 operands in all.
  std::vector<const Instruction*> reduces;
  size_t operands = 0;
  for (const auto& up : c.instructions())
    if (up->opcode() == Opcode::Reduce) reduces.push_back(up.get());
  if (reduces.empty()) return false;
  const Instruction* reduce = reduces[0];
  for (const Instruction* red : reduces) {
    if (!red->toApply() || red->attrs().dimensions != reduce->attrs().dimensions ||
        red->operand(0)->shape().dimensions() != reduce->operand(0)->shape().dimensions())
      return false;
    int64_t nv = red->operandCount() / 2;
    operands += static_cast<size_t>(nv);
    for (int64_t j = 0; j < nv; ++j) {
      const Instruction* x = red->operand(j);
      const Instruction* init = red->operand(nv + j);
      if (!x->shape().isArray() || !plainType(x->shape().elementType())) return false;
      if (!init->shape().isScalar() || (init->opcode() != Opcode::Parameter && init->opcode() != Opcode::Constant))
        return false;
    }
  }
  if (operands > 3) return false;
  const std::vector<int64_t>& dims = reduce->operand(0)->shape().dimensions();
  const std::vector<int64_t> outDims = dims.size() > reduce->attrs().dimensions.size() ? [&] {
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
      if (std::find(reduce->attrs().dimensions.begin(), reduce->attrs().dimensions.end(), d) ==
          reduce->attrs().dimensions.end())
        kept.push_back(dims[static_cast<size_t>(d)]);
    return kept;
  }() : std::vector<int64_t>{};
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> reduced = reduce->attrs().dimensions;
  std::sort(reduced.begin(), reduced.end());
  int64_t k = 1, r = 1;
  for (int64_t d = 0; d < rank; ++d) {
    bool red = std::binary_search(reduced.begin(), reduced.end(), d);
    // Only the trailing dimensions: rows of the reduce are contiguous.
    if (red != (d >= rank - static_cast<int64_t>(reduced.size()))) return false;
    (red ? r : k) *= dims[static_cast<size_t>(d)];
  }
  // The shapes lowerReduce gives the segment kernel (rows folded within).
  if (k == 0 || r == 0 || (k >= kVregElems / 8 && (k == 1 || r < kVregElems))) return false;
  ReducePrologue p;
  p.comp = &c;
  p.reduce = reduce;
  p.reduces = reduces;
  // Which side of the reduce each value is on: scalars go with either.
  enum Side { Scalar, Input, Output };
  std::map<const Instruction*, Side> side;
  std::set<const Instruction*> used;
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands()) used.insert(o);
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == c.root() && i.opcode() == Opcode::Tuple) break;
    if (i.opcode() == Opcode::Reduce) {
      for (int64_t j = 0; j < i.operandCount() / 2; ++j)
        if (!side.count(i.operand(j)) || side[i.operand(j)] != Input) return false;
      side[&i] = Output;
      continue;
    }
    if (i.opcode() == Opcode::GetTupleElement) {
      if (i.operand(0)->opcode() != Opcode::Reduce) return false;
      side[&i] = Output;
      p.epilogue.push_back(&i);
      continue;
    }
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    if (i.opcode() == Opcode::Parameter) {
      if (!used.count(&i)) continue;
      if (i.shape().isScalar()) p.scalars.push_back({&i, -1});
      else if (i.shape().dimensions() == dims) p.streamed.push_back(&i);
      else return false;
      side[&i] = i.shape().isScalar() ? Scalar : Input;
      continue;
    }
    if (i.opcode() == Opcode::Constant) {
      if (!i.shape().isScalar()) return false;
      side[&i] = Scalar;
      continue;
    }
    if (i.opcode() == Opcode::Broadcast) {
      if (!i.operand(0)->shape().isScalar()) return false;
    } else if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng ||
               i.opcode() == Opcode::BitcastConvert) {
      return false;
    }
    Side s = Scalar;
    for (const Instruction* o : i.operands()) {
      auto it = side.find(o);
      if (it == side.end()) return false;
      if (it->second == Scalar) continue;
      if (s != Scalar && s != it->second) return false;
      s = it->second;
    }
    if (i.opcode() == Opcode::Broadcast)
      s = i.shape().dimensions() == dims ? Input : i.shape().dimensions() == outDims ? Output : Scalar;
    if (s == Scalar && !i.shape().isScalar()) return false;
    if ((s == Input && i.shape().dimensions() != dims) || (s == Output && i.shape().dimensions() != outDims))
      return false;
    side[&i] = s;
    if (s != Scalar) (s == Input ? p.inputSide : p.epilogue).push_back(&i);
  }
  std::vector<const Instruction*> roots;
  if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
  else roots.push_back(c.root());
  uint64_t rowBytes = 0;
  for (const Instruction* v : roots) {
    auto it = side.find(v);
    if (it == side.end() || it->second == Scalar) return false;
    if (!v->shape().isArray() && v->opcode() != Opcode::Reduce) return false;
    (it->second == Input ? p.sideValues : p.results).push_back(v);
    if (it->second == Input) rowBytes += static_cast<uint64_t>(r * typeInfo(v->shape().elementType()).bytes);
  }
  if (p.results.empty()) return false;
  if (p.streamed.empty() || p.streamed.size() > 3 || p.scalars.size() > 4 || p.sideValues.size() > 3) return false;
  // Side outputs are written per batch of whole rows: rows that need
  // streaming in segments take the instruction-by-instruction path.
  if (!p.sideValues.empty()) {
    for (const Instruction* s : p.streamed) rowBytes += static_cast<uint64_t>(r * typeInfo(s->shape().elementType()).bytes);
    if (rowBytes + 8192 > vmemBudget() / 2) return false;
  }
  if (out) *out = std::move(p);
  return true;
}

namespace {

// The value of `i` in `val`, computing scalar constants and scalar ops of
// them (and of hoisted scalars) on first use.
// (A broadcast of a scalar is its splat.)
std::optional<VReg> scalarOrValue(const Instruction* i, std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned,
                                  const std::function<std::optional<VReg>(const Instruction&, const std::vector<VReg>&)>& op) {
  if (auto it = val.find(i); it != val.end()) return it->second;
  std::vector<VReg> ops;
  for (const Instruction* o : i->operands()) {
    auto v = scalarOrValue(o, val, owned, op);
    if (!v) return std::nullopt;
    ops.push_back(*v);
  }
  if (i->opcode() == Opcode::Broadcast) {
    val[i] = ops[0];
    return ops[0];
  }
  auto v = op(*i, ops);
  if (!v) return std::nullopt;
  val[i] = *v;
  owned.push_back(*v);
  return v;
}

}  // namespace

std::optional<std::vector<VReg>> Lowerer::evalReducePrologue(const ReducePrologue& p,
                                                             const std::vector<VReg>& loaded,
                                                             const std::map<const Instruction*, VReg>& scalars) {
  std::map<const Instruction*, VReg> val = scalars;
  std::vector<VReg> owned = loaded;
  for (size_t j = 0; j < p.streamed.size(); ++j) val[p.streamed[j]] = loaded[j];
  auto op = [&](const Instruction& i, const std::vector<VReg>& ops) { return lowerOp(i, ops); };
  for (const Instruction* i : p.inputSide)
    if (!scalarOrValue(i, val, owned, op)) return std::nullopt;
  std::vector<VReg> result;
  for (const Instruction* red : p.reduces)
    for (int64_t j = 0; j < red->operandCount() / 2; ++j)
      result.push_back(vcopy(val.at(red->operand(j)), red->operand(j)->shape().elementType()));
  for (const Instruction* s : p.sideValues) result.push_back(vcopy(val[s], s->shape().elementType()));
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return result;
}

std::optional<std::vector<VReg>> Lowerer::evalReduceEpilogue(const ReducePrologue& p, const std::vector<VReg>& acc,
                                                             const std::map<const Instruction*, VReg>& scalars,
                                                             std::vector<VReg>& owned) {
  std::map<const Instruction*, VReg> val = scalars;
  // Each reduce's accumulators, in operand order.
  std::map<const Instruction*, size_t> first;
  for (size_t at = 0, q = 0; q < p.reduces.size(); ++q) {
    first[p.reduces[q]] = at;
    if (p.reduces[q]->shape().isArray()) val[p.reduces[q]] = acc[at];
    at += static_cast<size_t>(p.reduces[q]->operandCount() / 2);
  }
  for (const Instruction* i : p.epilogue)
    if (i->opcode() == Opcode::GetTupleElement)
      val[i] = acc[first.at(i->operand(0)) + static_cast<size_t>(i->attrs().tupleIndex)];
  auto op = [&](const Instruction& i, const std::vector<VReg>& ops) { return lowerOp(i, ops); };
  for (const Instruction* i : p.epilogue)
    if (!scalarOrValue(i, val, owned, op)) return std::nullopt;
  std::vector<VReg> result;
  for (const Instruction* v : p.results) {
    if (v->opcode() == Opcode::Reduce && !v->shape().isArray()) {
      for (int64_t j = 0; j < v->operandCount() / 2; ++j) result.push_back(acc[first.at(v) + static_cast<size_t>(j)]);
      continue;
    }
    result.push_back(val.at(v));
  }
  return result;
}

bool Lowerer::lowerInputFusion(const Instruction& in) {
  ReducePrologue p;
  if (!inputFusion(in, &p)) return fail(in, "llo-gen: internal error: not an input fusion");
  beginKernel(in, "fusion-reduce");
  auto bufOf = [&](const Instruction* param) {
    return leaves_[in.operand(param->attrs().parameterNumber)][0];
  };
  // The result leaves: reduced values and side outputs, in the root's order.
  std::vector<int> reducedBufs;
  const std::vector<int>& leaves = leaves_[&in];
  {
    const Computation& c = *p.comp;
    std::vector<const Instruction*> roots;
    if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
    else roots.push_back(c.root());
    size_t nextSide = 0, leaf = 0;
    for (const Instruction* root : roots) {
      size_t n = arrayLeaves(root->shape()).size();
      if (leaf + n > leaves.size()) return fail(in, "llo-gen: internal error: fusion result leaves");
      bool sideOut = nextSide < p.sideValues.size() && root == p.sideValues[nextSide];
      for (size_t j = 0; j < n; ++j) (sideOut ? p.sideBufs : reducedBufs).push_back(leaves[leaf + j]);
      nextSide += sideOut ? 1 : 0;
      leaf += n;
    }
    if (leaf != leaves.size()) return fail(in, "llo-gen: internal error: fusion result leaves");
  }
  uint64_t bytes = 0;
  for (int b : leaves) bytes += bufs_[b].bytes;
  for (const Instruction* param : p.streamed) {
    p.streamedBufs.push_back(bufOf(param));
    bytes += bufs_[p.streamedBufs.back()].bytes;
  }
  for (auto& [param, buf] : p.scalars) buf = bufOf(param);
  const Shape& xs = p.reduce->operand(0)->shape();
  int64_t r = 1;
  for (int64_t d : p.reduce->attrs().dimensions) r *= xs.dimension(d);
  int64_t k = *xs.elementCount() / r;
  bool ok = emitReduceSegments(in, k, r, {}, {}, reducedBufs, *p.reduce->toApply(), &p);
  endKernel(static_cast<double>(*xs.elementCount()) * static_cast<double>(p.comp->instructionCount()), bytes, 0);
  return ok && !failed_;
}

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
  // Registers: accumulators of chunkV vregs, and room for one vreg's
  // prologue values, the reducers' temporaries and the hoisted scalars.
  const int vregs = target_.registers.vregs;
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
  const uint64_t budget = vmemBudget();
  if (fixed + perRow > budget) return false;
  f.rows = std::min<int64_t>({f.r, static_cast<int64_t>((budget - fixed) / perRow), 4096});
  // Several blocks without side outputs are double-buffered: two blocks
  // must fit.
  bool sideOutputs = false;
  for (const auto& o : f.outputs) sideOutputs |= o.side;
  if (f.rows < f.r && !sideOutputs)
    f.rows = std::max<int64_t>(1, std::min<int64_t>(f.rows, static_cast<int64_t>((budget - fixed) / (2 * perRow))));
  if (out) *out = std::move(f);
  return true;
}

bool Lowerer::lowerColumnReduceFusion(const Instruction& in) {
  ColumnReduceFusion f;
  if (!columnReduceFusion(in, &f)) return fail(in, "llo-gen: internal error: not a column-reduction fusion");
  beginKernel(in, "fusion-reduce-columns");
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  auto bufOf = [&](const Instruction* param) { return leaves_[in.operand(param->attrs().parameterNumber)][0]; };
  const std::vector<int>& outBufs = leaves_[&in];
  if (outBufs.size() != f.outputs.size()) return fail(in, "llo-gen: internal error: fusion result leaves");
  auto outType = [&](const ColumnReduceFusion::Output& o) { return bufs_[outBufs[&o - f.outputs.data()]].type; };
  const int64_t a = f.a, r = f.r, b = f.b, R = f.rows, chunkV = f.chunkV;
  const int64_t pitch = chunkV * kVregElems;
  const int64_t nChunksA = (a + f.naFull - 1) / f.naFull, nChunksB = (b + f.nbFull - 1) / f.nbFull;
  const int64_t tailNa = a - (nChunksA - 1) * f.naFull, tailNb = b - (nChunksB - 1) * f.nbFull;
  const int64_t nBlocks = (r + R - 1) / R, tailR = r - (nBlocks - 1) * R;
  // VMEM.
  uint64_t cur = 0;
  std::vector<int64_t> xOff, oOff(f.outputs.size());
  std::vector<int> xBufs;
  for (const Instruction* p : f.streamed) {
    xBufs.push_back(bufOf(p));
    xOff.push_back(static_cast<int64_t>(cur));
    cur += static_cast<uint64_t>(R) * alignUp(static_cast<uint64_t>(pitch) * typeInfo(p->shape().elementType()).bytes, 512);
  }
  bool anySideOutput = false;
  for (const auto& o : f.outputs) anySideOutput |= o.side;
  // Two slots of the streamed blocks when there are several blocks and
  // they fit the budget twice.
  const uint64_t xSlot = cur;
  const bool doubleBuffer = !anySideOutput && nBlocks > 1 && 2 * xSlot <= vmemBudget();
  if (doubleBuffer) cur *= 2;
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    oOff[k] = static_cast<int64_t>(cur);
    uint64_t bytes = alignUp(static_cast<uint64_t>(pitch) * typeInfo(outType(f.outputs[k])).bytes, 512);
    cur += f.outputs[k].side ? static_cast<uint64_t>(R) * bytes : bytes;
  }
  // Row pitch in VMEM (bytes) of a streamed parameter or side output: whole vregs.
  auto pitchBytes = [&](ElementType t) { return pitch * typeInfo(t).bytes; };
  // Scalars, constants and scalar ops: once, as splats.
  std::map<const Instruction*, VReg> hoisted;
  {
    int smem = 0;
    for (const Instruction* i : f.hoisted) {
      if (i->opcode() == Opcode::Parameter) {
        ElementType t = i->shape().elementType();
        int sx = loadScalar(bufOf(i), 0, t, smem++);
        VReg v = valloc(t);
        e_.op("vmov.s32 {}, {}", V(v), S(sx));
        sregs_.put(sx);
        hoisted[i] = v;
        continue;
      }
      std::vector<VReg> ops;
      for (const Instruction* o : i->operands()) ops.push_back(hoisted.at(o));
      auto v = lowerOp(*i, ops);
      if (!v) return false;
      hoisted[i] = *v;
    }
  }
  // Accumulators: [reduce][operand][vreg].
  std::vector<std::vector<std::vector<VReg>>> acc(f.reduces.size());
  for (size_t q = 0; q < f.reduces.size(); ++q) {
    const Instruction* red = f.reduces[q];
    int64_t nv = red->operandCount() / 2;
    acc[q].resize(static_cast<size_t>(nv));
    for (int64_t j = 0; j < nv; ++j)
      for (int64_t u = 0; u < chunkV; ++u) acc[q][static_cast<size_t>(j)].push_back(valloc(red->operand(j)->shape().elementType()));
  }
  int rAi = sreg(), rBi = sreg(), rRow0 = sreg(), rRow = sreg(), rRows = sreg(), rElem = sreg(), rAddr = sreg(),
      rO1 = sreg(), rO2 = sreg(), rO4 = sreg(), rVoff = sreg(), rSlot = sreg(), rSem = sreg();
  int rOff[5] = {-1, rO1, rO2, -1, rO4};
  // Emits gen(tail) under a test of `reg == last` when both cases exist.
  auto either = [&](bool exists, int reg, int64_t last, const std::function<void(bool)>& gen) {
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
  };
  const bool colTails = f.aGroups ? (nChunksA > 1 && tailNa != f.naFull) : (nChunksB > 1 && tailNb != f.nbFull);
  const int rColIdx = f.aGroups ? rAi : rBi;
  const int64_t lastCol = f.aGroups ? nChunksA - 1 : nChunksB - 1;
  // When there is a single chunk, it is its own tail.
  auto colsOf = [&](bool tail, int64_t& na, int64_t& nb) {
    bool t = tail || (f.aGroups ? nChunksA == 1 : nChunksB == 1);
    na = f.aGroups ? (t ? tailNa : f.naFull) : 1;
    nb = f.aGroups ? b : (t ? tailNb : f.nbFull);
  };
  auto rowsOf = [&](bool tail) { return tail || nBlocks == 1 ? tailR : R; };
  // A block of rows between HBM (at element rElem) and VMEM at voff.
  auto blockDma = [&](bool load, int buf, const std::string& voff, ElementType t, const std::string& sem) {
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
        if (load) e_.op("{} {}, [{}], {}, {}", dmaOp("h2v", buf), d, voff, memRef(buf, S(rAddr)), sem);
        else e_.op("{} {}, {}, [{}], {}", dmaOp("v2h", buf), d, memRef(buf, S(rAddr)), voff, sem);
      });
    });
  };
  std::string lChunk = e_.newLabel("cchunk"), lBlock = e_.newLabel("cblock"), lRow = e_.newLabel("crow");
  e_.op("smov {}, 0", S(rAi));
  e_.op("smov {}, 0", S(rBi));
  e_.label(lChunk);
  for (size_t q = 0; q < f.reduces.size(); ++q)
    for (size_t j = 0; j < acc[q].size(); ++j) {
      VReg init = hoisted.at(f.reduces[q]->operand(static_cast<int64_t>(acc[q].size() + j)));
      for (VReg v : acc[q][j]) e_.op("vmov.s32 {}, {}", V(v), V(init));
    }
  e_.op("smov {}, 0", S(rRow0));
  e_.label(lBlock);
  // First element of the block: ((a0 * r + row0) * b + b0).
  auto blockElem = [&]() {
    e_.op("smul {}, {}, {}", S(rElem), S(rAi), f.naFull * r * b);
    e_.op("smul {}, {}, {}", S(rAddr), S(rBi), f.nbFull);
    e_.op("sadd {}, {}, {}", S(rElem), S(rElem), S(rAddr));
    e_.op("smul {}, {}, {}", S(rAddr), S(rRow0), b);
    e_.op("sadd {}, {}, {}", S(rElem), S(rElem), S(rAddr));
  };
  // Without side outputs, blocks of rows are double-buffered within a
  // chunk: block k + 1 loads into the other slot (semaphore 1 + slot)
  // while block k is folded.
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
  for (int64_t u = 0; u < chunkV; ++u) {
    std::map<const Instruction*, VReg> val = hoisted;
    std::vector<VReg> owned;
    for (size_t j = 0; j < f.streamed.size(); ++j) {
      ElementType t = f.streamed[j]->shape().elementType();
      int es = typeInfo(t).bytes;
      VReg v = vload(t, fmt::format("{} + {}", S(rOff[es]), xOff[j] + u * kVregElems * es));
      owned.push_back(v);
      val[f.streamed[j]] = v;
    }
    for (const Instruction* i : f.inputSide)
      if (!evalFusedInstruction(*i, val, owned)) return false;
    for (size_t k = 0; k < f.outputs.size(); ++k) {
      if (!f.outputs[k].side) continue;
      ElementType t = outType(f.outputs[k]);
      int es = typeInfo(t).bytes;
      vstore(val.at(f.outputs[k].value), t, fmt::format("{} + {}", S(rOff[es]), oOff[k] + u * kVregElems * es));
    }
    for (size_t q = 0; q < f.reduces.size(); ++q) {
      const Instruction* red = f.reduces[q];
      size_t nv = acc[q].size();
      std::vector<VReg> args, res;
      for (size_t j = 0; j < nv; ++j) args.push_back(acc[q][j][static_cast<size_t>(u)]);
      for (size_t j = 0; j < nv; ++j) args.push_back(val.at(red->operand(static_cast<int64_t>(j))));
      if (!lowerComputation(*red->toApply(), args, res)) return false;
      for (size_t j = 0; j < nv; ++j) {
        e_.op("vmov.s32 {}, {}", V(acc[q][j][static_cast<size_t>(u)]), V(res[j]));
        vfree(res[j]);
      }
    }
    std::set<int> freed;
    for (VReg v : owned)
      if (freed.insert(v.r).second) vfree(v);
  }
  for (int es : {1, 2, 4}) e_.op("sadd {}, {}, {}", S(rOff[es]), S(rOff[es]), pitch * es);
  e_.op("sadd {}, {}, 1", S(rRow), S(rRow));
  e_.op("br.lt {}, {}, {}", S(rRow), S(rRows), lRow);
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
  if (doubleBuffer) e_.op("sxor {}, {}, 1", S(rSlot), S(rSlot));
  e_.op("sadd {}, {}, {}", S(rRow0), S(rRow0), R);
  e_.op("br.lt {}, {}, {}", S(rRow0), r, lBlock);
  // The reduced values, the epilogue, and the chunk of each reduced output.
  for (int64_t u = 0; u < chunkV; ++u) {
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
      if (!evalFusedInstruction(*i, val, owned)) return false;
    }
    for (size_t k = 0; k < f.outputs.size(); ++k) {
      const auto& o = f.outputs[k];
      if (o.side) continue;
      ElementType t = outType(o);
      VReg v = o.value->opcode() == Opcode::Reduce ? reducedValue(o.value, o.index) : val.at(o.value);
      vstore(v, t, fmt::format("{}", oOff[k] + u * kVregElems * typeInfo(t).bytes));
    }
    std::set<int> freed;
    for (VReg v : owned)
      if (freed.insert(v.r).second) vfree(v);
  }
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
      e_.op("{} {}, {}, [{}], sem0", dmaOp("v2h", buf), e_.desc(static_cast<uint64_t>(nb * es), dims), memRef(buf, S(rAddr)),
            oOff[k]);
    });
    ++outs;
  }
  e_.op("sem.wait sem0, {}", outs);
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
  endKernel(elems * static_cast<double>(f.inputSide.size() + f.reduces.size()), bytes, 0);
  return !failed_;
}

}  // namespace tpu::codegen
