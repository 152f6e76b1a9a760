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
#include "codegen/lowerer.h"
#include "passes/layout/physical_layout.h"

namespace tpu::codegen {

namespace {

constexpr size_t kMaxTileInputs = 3, kMaxColumnInputs = 3, kMaxScalarInputs = 4;

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
  std::set<const Instruction*> prologue, views;
  // Physical bitcasts of parameters (physical-edges' convolutions): the
  // activations, and tiles the epilogue reads, are read through their layouts.
  auto viewOfParameter = [](const Instruction* i) {
    return i->opcode() == Opcode::Bitcast && passes::layout::isPhysicalBitcast(*i) &&
           i->operand(0)->opcode() == Opcode::Parameter;
  };
  e.physicalOut = dot->opcode() == Opcode::Convolution && c.root()->opcode() == Opcode::Bitcast &&
                  passes::layout::isPhysicalBitcast(*c.root());
  for (int j = 0; j < 2; ++j) {
    const Instruction* o = dot->operand(j);
    if (!plainType(o->shape().elementType())) return false;
    if (o->opcode() == Opcode::Parameter) continue;
    if (dot->opcode() == Opcode::Convolution && viewOfParameter(o)) {
      views.insert(o);
      continue;
    }
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
  const Instruction* stored = e.physicalOut ? c.root()->operand(0) : c.root();
  if (stored->shape().dimensions() != dims || !plainType(in.shape().elementType())) return false;
  if (!e.physicalOut && in.shape().dimensions() != dims) return false;
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
    if (e.physicalOut && &i == c.root()) continue;
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    bool scalar = i.shape().isScalar();
    if (viewOfParameter(&i)) {
      // A tile input when the epilogue reads it (the activations may be
      // the residual too).
      bool read = false;
      for (const auto& u : c.instructions())
        if (u.get() != dot && !(e.physicalOut && u.get() == c.root()))
          for (const Instruction* o : u->operands()) read = read || o == &i;
      if (!read && views.count(&i)) continue;
      if (i.shape().dimensions() != dims) {
        // A vector only broadcast along the columns (a bias): a column input.
        bool columns = i.shape().rank() == 1;
        for (const auto& u : c.instructions())
          for (const Instruction* o : u->operands())
            if (o == &i) columns = columns && u->opcode() == Opcode::Broadcast;
        if (!columns) return false;
        continue;
      }
      add(&i, MatmulEpilogue::Tile, i.shape().elementType());
      continue;
    }
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
      if ((o->opcode() != Opcode::Parameter && !viewOfParameter(o)) || i.attrs().dimensions != want ||
          o->shape().dimensions() != columnDims || !plainType(o->shape().elementType()))
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

bool Lowerer::lowerMatmulEpilogueFusion(const Instruction& in, MatmulEpilogue e) {
  const Computation& c = *e.comp;
  for (int64_t p = 0; p < in.operandCount(); ++p)
    if (const Instruction* param = c.parameter(p)) leaves_[param] = leaves_[in.operand(p)];
  for (const auto& up : c.instructions())  // physical views of parameters: the parameters' buffers
    if (up->opcode() == Opcode::Bitcast && up->operand(0)->opcode() == Opcode::Parameter &&
        passes::layout::isPhysicalBitcast(*up))
      leaves_[up.get()] = leaves_[up->operand(0)];
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
  MatmulView views[2];
  bool viewed[2];
  int a = matmulOperand(lhsSrc, dn.lhsBatchDimensions, geo.lhsFree, dn.lhsContractingDimensions, mp, kp, false,
                        &views[0], &viewed[0]);
  int w = matmulOperand(rhsSrc, dn.rhsBatchDimensions, dn.rhsContractingDimensions, geo.rhsFree, kp, np, true,
                        &views[1], &viewed[1]);
  int passes = mxuPasses(dot, lhs->shape().elementType(), rhs->shape().elementType());
  bool ok = emitMatmul(in, geo.b, mp, kp, np, a, lhsSrc->shape().elementType(), w, rhsSrc->shape().elementType(),
                       e.outBuf, passes, &e, viewed[0] ? &views[0] : nullptr, viewed[1] ? &views[1] : nullptr);
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

// One step of the epilogue loop: `unroll` row blocks of the C tile (at rC)
// through the fused elementwise instructions, into the output slot (at rE),
// the other inputs' tiles at rIn; each instruction's register freed after
// its last reader (lastUse).
bool Lowerer::emitEpilogueStep(const MatmulEpilogue& e, int64_t tn, int64_t unroll, int rC, int rE,
                               const std::vector<int>& rIn, const std::map<const Instruction*, VReg>& scalars,
                               const std::map<const Instruction*, size_t>& lastUse) {
  const int eo = typeInfo(e.outType).bytes;
  const ElementType dotType = e.dot->shape().elementType();
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
      bool ok = emitEpilogueStep(e, tn, unroll, rC, rE, rIn, scalars, lastUse);
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

}  // namespace tpu::codegen
