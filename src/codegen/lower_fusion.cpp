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
  for (const Instruction* i : e.prologue[operand]) {
    if (i->opcode() == Opcode::Broadcast) {  // of a scalar constant: its splat
      val[i] = val[i->operand(0)];
      continue;
    }
    std::vector<VReg> ops;
    for (const Instruction* o : i->operands()) ops.push_back(val[o]);
    auto r = lowerOp(*i, ops);
    if (!r) return false;
    val[i] = *r;
    owned.push_back(*r);
  }
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
void Lowerer::emitByTileExtent(int rIdx, int64_t fullTiles, int64_t full, int64_t rest,
                               const std::function<void(int64_t)>& body) {
  if (rest == 0 || fullTiles == 0) {
    body(rest == 0 ? full : rest);
    return;
  }
  std::string lRest = e_.newLabel("eedge"), lDone = e_.newLabel("eedged");
  e_.op("br.ge {}, {}, {}", S(rIdx), fullTiles, lRest);
  body(full);
  e_.op("jmp {}", lDone);
  e_.label(lRest);
  body(rest);
  e_.label(lDone);
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
  std::string lBlock = e_.newLabel("epilogue");
  e_.op("smov {}, {}", S(rCount), tm / 8);
  e_.label(lBlock);
  for (int64_t u = 0; u < tn / 128; ++u) {
    std::map<const Instruction*, VReg> val = scalars;
    for (const auto& chain : e.prologue)  // evaluated by the matmul
      for (const Instruction* i : chain) val[i] = VReg{};
    std::vector<VReg> owned;
    auto own = [&](VReg v) {
      owned.push_back(v);
      return v;
    };
    {
      // The dot's own result type first (the unfused path rounds there too).
      VReg cv = own(valloc(ElementType::F32));
      e_.op("vld {}, [{} + {}], {}", V(cv), S(rC), u * 512, tn * 4);
      if (dotType != ElementType::F32) {
        VReg r = own(valloc(dotType));
        e_.op("vmov.s32 {}, {}", V(r), V(cv));
        cv = normalize(r);
      }
      val[e.dot] = cv;
    }
    for (size_t j = 0; j < e.inputs.size(); ++j) {
      const MatmulEpilogue::Input& input = e.inputs[j];
      if (input.kind == MatmulEpilogue::Scalar) continue;
      int es = typeInfo(input.type).bytes;
      bool tile = input.kind == MatmulEpilogue::Tile;
      val[input.value] = own(vload(input.type, fmt::format("{} + {}", S(rIn[j]), u * 128 * es),
                                   fmt::format(", {}", tile ? tn * es : 0)));
    }
    if (!evalOnRegisters(*e.comp, nullptr, val, owned)) return;
    VReg result = val[e.comp->root()];
    vstore(result, e.outType, fmt::format("{} + {}", S(rE), u * 128 * eo), fmt::format(", {}", tn * eo));
    std::set<int> freed;
    for (VReg v : owned)
      if (freed.insert(v.r).second) vfree(v);
  }
  e_.op("sadd {}, {}, {}", S(rC), S(rC), 8 * tn * 4);
  e_.op("sadd {}, {}, {}", S(rE), S(rE), 8 * tn * eo);
  for (size_t j = 0; j < e.inputs.size(); ++j)
    if (rIn[j] >= 0 && e.inputs[j].kind == MatmulEpilogue::Tile)
      e_.op("sadd {}, {}, {}", S(rIn[j]), S(rIn[j]), 8 * tn * typeInfo(e.inputs[j].type).bytes);
  e_.op("loop {}, {}", S(rCount), lBlock);
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
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation() || !in.shape().isArray()) return false;
  const Computation& c = *in.fusedComputation();
  const Instruction* reduce = c.root();
  if (!reduce || reduce->opcode() != Opcode::Reduce || reduce->operandCount() != 2 || !reduce->toApply())
    return false;
  const Instruction* x = reduce->operand(0);
  const Instruction* init = reduce->operand(1);
  if (!x->shape().isArray() || !plainType(x->shape().elementType()) || !plainType(in.shape().elementType()))
    return false;
  if (!init->shape().isScalar() || (init->opcode() != Opcode::Parameter && init->opcode() != Opcode::Constant))
    return false;
  const std::vector<int64_t>& dims = x->shape().dimensions();
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
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == reduce) continue;
    if (i.opcode() == Opcode::Parameter) {
      bool used = false;
      for (const auto& u : c.instructions())
        for (const Instruction* o : u->operands()) used = used || o == &i;
      if (!used) continue;
      if (!plainType(i.shape().elementType())) return false;
      if (i.shape().isScalar()) p.scalars.push_back({&i, -1});
      else if (i.shape().dimensions() == dims && &i != init) p.streamed.push_back(&i);
      else return false;
      continue;
    }
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    if (!i.shape().isScalar() && i.shape().dimensions() != dims) return false;
    if (i.opcode() == Opcode::Constant) {
      if (!i.shape().isScalar()) return false;
      continue;
    }
    if (i.opcode() == Opcode::Broadcast) {
      if (!i.operand(0)->shape().isScalar()) return false;
      continue;
    }
    if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng || i.opcode() == Opcode::BitcastConvert)
      return false;
  }
  if (p.streamed.empty() || p.streamed.size() > 3 || p.scalars.size() > 4) return false;
  if (out) *out = std::move(p);
  return true;
}

std::optional<std::vector<VReg>> Lowerer::evalReducePrologue(const ReducePrologue& p,
                                                             const std::vector<VReg>& loaded,
                                                             const std::map<const Instruction*, VReg>& scalars) {
  std::map<const Instruction*, VReg> val = scalars;
  std::vector<VReg> owned = loaded;
  for (size_t j = 0; j < p.streamed.size(); ++j) val[p.streamed[j]] = loaded[j];
  if (!evalOnRegisters(*p.comp, p.reduce, val, owned)) return std::nullopt;
  const Instruction* x = p.reduce->operand(0);
  VReg result = vcopy(val[x], x->shape().elementType());
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return std::vector<VReg>{result};
}

bool Lowerer::lowerInputFusion(const Instruction& in) {
  ReducePrologue p;
  if (!inputFusion(in, &p)) return fail(in, "llo-gen: internal error: not an input fusion");
  beginKernel(in, "fusion-reduce");
  auto bufOf = [&](const Instruction* param) {
    return leaves_[in.operand(param->attrs().parameterNumber)][0];
  };
  uint64_t bytes = bufs_[leaves_[&in][0]].bytes;
  for (const Instruction* param : p.streamed) {
    p.streamedBufs.push_back(bufOf(param));
    bytes += bufs_[p.streamedBufs.back()].bytes;
  }
  for (auto& [param, buf] : p.scalars) buf = bufOf(param);
  const Shape& xs = p.reduce->operand(0)->shape();
  int64_t r = 1;
  for (int64_t d : p.reduce->attrs().dimensions) r *= xs.dimension(d);
  int64_t k = *xs.elementCount() / r;
  bool ok = emitReduceSegments(in, k, r, {}, {}, leaves_[&in], *p.reduce->toApply(), &p);
  endKernel(static_cast<double>(*xs.elementCount()) * static_cast<double>(p.comp->instructionCount()), bytes, 0);
  return ok && !failed_;
}

}  // namespace tpu::codegen
