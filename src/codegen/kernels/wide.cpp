// 64-bit element types in the vector lowering. s64, u64 and f64 values live
// in register pairs (VReg::r the low words, VReg::hi the high words), loaded
// and stored with the word-strided vld.e64 / vst.e64. Bitwise ops, selects,
// 64-bit add and subtract are composed from 32-bit ops on the halves; the
// rest uses the ISA's register-pair rows (vmul.i64, vadd.f64, vcmp.lt.s64,
// vcvt.f64.s64, ...), whose results equal the interpreter's; f64 library
// math is expanded into those rows (kernels/math.cpp, math_f64.cpp). Which
// elementwise op is which instruction or expansion is the op table's
// (op_table.cpp); the pair expansions it names are here. Complex values are
// kernels/complex.cpp's; dots of both share the vector-unit matmul here.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

const char* const kDirs[] = {"eq", "ne", "lt", "le", "gt", "ge"};

// Ops that only move elements (by DMA, or by aliasing): any element width.
bool movesOnly(Opcode op) {
  if (hlo::computesNothing(op) || hlo::isControlFlow(op)) return true;
  switch (op) {
    case Opcode::CopyStart:
    case Opcode::CopyDone:
    case Opcode::AsyncStart:
    case Opcode::AsyncUpdate:
    case Opcode::AsyncDone:
    case Opcode::Transpose:
    case Opcode::Slice:
    case Opcode::Concatenate:
    case Opcode::Pad:
    case Opcode::Reverse:
    case Opcode::Broadcast:
    case Opcode::DynamicSlice:
    case Opcode::DynamicUpdateSlice:
    case Opcode::Gather:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool Lowerer::checkWideTypes(const Instruction& in) {
  const Shape* complexLeaf = nullptr;
  const Shape* pairLeaf = nullptr;
  auto scan = [&](const Shape& s) {
    for (const Shape* l : arrayLeaves(s)) {
      TypeInfo ti = typeInfo(l->elementType());
      if (ti.isComplex && !complexLeaf) complexLeaf = l;
      if (isPairType(l->elementType()) && !pairLeaf) pairLeaf = l;
    }
  };
  scan(in.shape());
  for (const Instruction* o : in.operands()) scan(o->shape());
  if (!complexLeaf && !pairLeaf) return true;
  Opcode op = in.opcode();
  if (movesOnly(op)) return true;
  if (op == Opcode::CustomCall && isIdentityCustomCallTarget(in.attrs().customCallTarget)) return true;
  // GELU computes in f64 (complex: the real part) as the interpreter does;
  // a gemm is a dot.
  if (op == Opcode::CustomCall && (isGeluCustomCallTarget(in.attrs().customCallTarget) ||
                                   isGemmCustomCallTarget(in.attrs().customCallTarget)))
    return true;
  if (op == Opcode::BitcastConvert) return true;  // an alias (the widths are checked when planned)
  if (op == Opcode::GetDimensionSize) return true;  // reads the operand's shape, never its data
  // Collectives move data and run their reducer elementwise (lower_collectives.cpp).
  if (hlo::isCollective(op)) return true;
  if (complexLeaf) return checkComplexTypes(in, *complexLeaf);
  bool computed = hlo::isElementwise(op) || op == Opcode::Map || op == Opcode::Iota || op == Opcode::Fusion ||
                  op == Opcode::RngBitGenerator || op == Opcode::Reduce || op == Opcode::Scatter ||
                  op == Opcode::Sort || op == Opcode::Dot || op == Opcode::Convolution || op == Opcode::ReduceWindow ||
                  op == Opcode::SelectAndScatter || op == Opcode::Rng || op == Opcode::RngGetAndUpdateState;
  if (computed) return true;
  return fail(in, fmt::format("llo-gen: element type {} of '{}' is not supported by {} yet",
                              hlo::elementTypeName(pairLeaf->elementType()), in.name(), hlo::opcodeName(op)));
}

int Lowerer::loadScalarPair(int buf, int64_t off, int smemSlot, int& hiReg) {
  int sa = sreg(), lo = sreg();
  hiReg = sreg();
  std::string d = e_.desc(8, {});
  e_.op("smov {}, {}", S(sa), base(buf) + off);
  e_.op("{} {}, [{}], {}, sem0", dmaOp("h2s", buf), d, smemSlot * 4, memRef(buf, S(sa)));
  e_.op("sem.wait sem0");
  e_.op("sld {}, [{}]", S(lo), smemSlot * 4);
  e_.op("sld {}, [{}]", S(hiReg), smemSlot * 4 + 4);
  sregs_.put(sa);
  return lo;
}

void Lowerer::saturateToS32(int lo, int hi, bool asUnsigned) {
  int out = sreg(), t = sreg(), bound = sreg();
  if (asUnsigned) {  // out of range: high word set, or bit 31 of the low word
    e_.op("scmp.ne {}, {}, 0", S(out), S(hi));
    e_.op("scmp.lt {}, {}, 0", S(t), S(lo));
    e_.op("sor {}, {}, {}", S(out), S(out), S(t));
    e_.op("smov {}, 2147483647", S(bound));
  } else {  // out of range: the high word is not the low word's sign
    e_.op("ssra {}, {}, 31", S(t), S(lo));
    e_.op("scmp.ne {}, {}, {}", S(out), S(hi), S(t));
    e_.op("smov {}, -2147483648", S(bound));
    e_.op("scmp.lt {}, {}, 0", S(t), S(hi));
    e_.op("ssel {}, {}, {}, 2147483647", S(bound), S(t), S(bound));
  }
  e_.op("ssel {}, {}, {}, {}", S(lo), S(out), S(bound), S(lo));
  for (int r : {out, t, bound}) sregs_.put(r);
}

VReg Lowerer::pairFrom32(VReg x, ElementType to) {
  TypeInfo xi = typeInfo(x.t);
  VReg d = valloc(to);
  if (xi.isFloat) {  // f32 and narrow floats: f32 values in the register
    const char* m = to == ElementType::F64   ? "vcvt.f64.f32"
                    : to == ElementType::S64 ? "vcvt.s64.f32"
                                             : "vcvt.u64.f32";
    e_.op("{} {}, {}, 0", m, V(d), V(x));
    e_.op("{} {}, {}, 1", m, H(d), V(x));
    return d;
  }
  // Integers and pred are normalised 32-bit values: extend by the sign
  // (only u32 can have its top bit set without being negative).
  e_.op("vmov.s32 {}, {}", V(d), V(x));
  if (xi.isUnsigned && xi.bits == 32)
    e_.op("vmov.s32 {}, 0", H(d));
  else
    e_.op("vsra {}, {}, 31", H(d), V(x));
  if (to == ElementType::F64) {
    VReg f = valloc(to);
    e_.op("vcvt.f64.s64 {}, {}, {}, 0", V(f), V(d), H(d));
    e_.op("vcvt.f64.s64 {}, {}, {}, 1", H(f), V(d), H(d));
    vfree(d);
    return f;
  }
  return d;
}

VReg Lowerer::convertFromF64(VReg x, ElementType to) {
  TypeInfo ti = typeInfo(to);
  auto pairUnary = [&](const char* m) {
    VReg d = valloc(to);
    for (int w = 0; w < 2; ++w) e_.op("{} {}, {}, {}, {}", m, w ? H(d) : V(d), V(x), H(x), w);
    return d;
  };
  if (to == ElementType::F64) return vcopy(x, to);
  if (to == ElementType::S64) return pairUnary("vcvt.s64.f64");
  if (to == ElementType::U64) return pairUnary("vcvt.u64.f64");
  if (to == ElementType::Pred) {
    VReg z = valloc(ElementType::F64);
    e_.op("vmov.s32 {}, 0", V(z));
    e_.op("vmov.s32 {}, 0", H(z));
    int m = pairCompare("ne", ElementType::F64, x, z);
    vfree(z);
    return toMask01(m);
  }
  VReg d = valloc(to);
  if (ti.isFloat) {  // f32, or a narrow float rounded once from f64
    e_.op("vcvt.{}.f64 {}, {}, {}", ti.dtype, V(d), V(x), H(x));
    return d;
  }
  bool u32 = ti.isUnsigned && ti.bits == 32;
  e_.op("{} {}, {}, {}", u32 ? "vcvt.u32.f64" : "vcvt.s32.f64", V(d), V(x), H(x));
  if (ti.bits < 32) {
    int64_t lo = ti.isUnsigned ? 0 : -(int64_t{1} << (ti.bits - 1));
    int64_t hi = ti.isUnsigned ? (int64_t{1} << ti.bits) - 1 : (int64_t{1} << (ti.bits - 1)) - 1;
    e_.op("vmax.s32 {}, {}, {}", V(d), V(d), lo);
    e_.op("vmin.s32 {}, {}, {}", V(d), V(d), hi);
  }
  return d;
}

int Lowerer::pairCompare(const char* dir, ElementType t, VReg a, VReg b) {
  std::string_view d = dir;
  const char* ty = t == ElementType::F64                               ? "f64"
                   : (t == ElementType::U64 && d != "eq" && d != "ne") ? "u64"
                                                                       : "s64";
  int m = malloc_();
  e_.op("vcmp.{}.{} {}, {}, {}, {}, {}", dir, ty, M(m), V(a), H(a), V(b), H(b));
  return m;
}

VReg Lowerer::pairAddSub(bool add, VReg a, VReg b, ElementType t) {
  // The carry (borrow) of the low words comes from an unsigned compare,
  // done as a signed one on values with the sign bit flipped.
  VReg d = valloc(t);
  VReg fx = valloc(ElementType::S32), fy = valloc(ElementType::S32), one = vconst(ElementType::S32, 1);
  VReg c = valloc(ElementType::S32);
  int m = malloc_();
  e_.op("{} {}, {}, {}", add ? "vadd.s32" : "vsub.s32", V(d), V(a), V(b));
  // add: carry when lo < a.lo; subtract: borrow when a.lo < b.lo (unsigned).
  e_.op("vxor {}, {}, -2147483648", V(fx), add ? V(d) : V(a));
  e_.op("vxor {}, {}, -2147483648", V(fy), add ? V(a) : V(b));
  e_.op("vcmp.lt.s32 {}, {}, {}", M(m), V(fx), V(fy));
  e_.op("vsel.s32 {}, {}, {}, 0", V(c), M(m), V(one));
  e_.op("{} {}, {}, {}", add ? "vadd.s32" : "vsub.s32", H(d), H(a), H(b));
  e_.op("{} {}, {}, {}", add ? "vadd.s32" : "vsub.s32", H(d), H(d), V(c));
  masks_.put(m);
  for (VReg r : {fx, fy, one, c}) vfree(r);
  return d;
}

VReg Lowerer::integerPower(VReg base, VReg exponent, ElementType t) {
  TypeInfo ti = typeInfo(t);
  const bool pair = isPairType(t);
  // The product wraps modulo 2^32 (2^64 for pairs), which truncates to the
  // same bits as the interpreter's narrower wrapping products.
  auto multiply = [&](VReg a, VReg b) {
    VReg d = valloc(t);
    if (pair) {
      for (int w = 0; w < 2; ++w)
        e_.op("vmul.i64 {}, {}, {}, {}, {}, {}", w ? H(d) : V(d), V(a), H(a), V(b), H(b), w);
    } else {
      e_.op("vmul.s32 {}, {}, {}", V(d), V(a), V(b));
    }
    return d;
  };
  auto select = [&](int mask, VReg a, VReg b) {  // d = mask ? a : b
    VReg d = valloc(t);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(mask), V(a), V(b));
    if (pair) e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(mask), H(a), H(b));
    return d;
  };
  auto constant = [&](int64_t value) {
    VReg d = valloc(t);
    e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint64_t>(value)));
    if (pair) e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint64_t>(value) >> 32));
    return d;
  };
  VReg result = constant(1), square = vcopy(base, t), bit = valloc(ElementType::S32);
  int m = malloc_();
  for (int i = 0; i < ti.bits; ++i) {
    e_.op("vshr {}, {}, {}", V(bit), i < 32 ? V(exponent) : H(exponent), i % 32);
    e_.op("vand {}, {}, 1", V(bit), V(bit));
    e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(bit));
    VReg p = multiply(result, square);
    VReg next = select(m, p, result);
    vfree(p);
    vfree(result);
    result = next;
    if (i + 1 < ti.bits) {
      VReg sq = multiply(square, square);
      vfree(square);
      square = sq;
    }
  }
  if (!ti.isUnsigned) {
    // A negative exponent: 1 for base 1, +-1 by its parity for base -1, else 0.
    VReg one = constant(1), minusOne = constant(-1), zero = constant(0);
    int isOne = pair ? pairCompare("eq", t, base, one) : malloc_();
    int isMinusOne = pair ? pairCompare("eq", t, base, minusOne) : malloc_();
    if (!pair) {
      e_.op("vcmp.eq.s32 {}, {}, 1", M(isOne), V(base));
      e_.op("vcmp.eq.s32 {}, {}, -1", M(isMinusOne), V(base));
    }
    e_.op("vand {}, {}, 1", V(bit), V(exponent));
    e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(bit));
    VReg parity = select(m, minusOne, one);
    VReg a = select(isMinusOne, parity, zero);
    VReg negative = select(isOne, one, a);
    e_.op("vcmp.lt.s32 {}, {}, 0", M(m), pair ? H(exponent) : V(exponent));
    VReg d = select(m, negative, result);
    masks_.put(isOne);
    masks_.put(isMinusOne);
    for (VReg r : {one, minusOne, zero, parity, a, negative, result}) vfree(r);
    result = d;
  }
  masks_.put(m);
  vfree(square);
  vfree(bit);
  return pair ? result : normalize(result);
}

int Lowerer::convertedCopy(const Instruction& in, int buf, const Shape& s, ElementType to) {
  int out = tempBuf(to, s.dimensions());
  // The convert's lowering, applied to a register of each operand value.
  Instruction convert(Opcode::Convert, in.name(), Shape(to, {}));
  convert.setLocation(in.location());
  emitElementwise(product(s.dimensions()), {EwInput{EwInput::Full, buf, 0, s.elementType()}},
                  {EwOutput{out, 0, to}}, [&](const std::vector<VReg>& v) {
                    std::optional<VReg> r = lowerOp(convert, v);
                    return std::vector<VReg>{r.value_or(VReg{})};
                  });
  return out;
}

int Lowerer::accumulatorCopy(const Instruction& in, int buf, const Shape& s, ElementType acc) {
  if (s.elementType() == acc) return buf;
  if (acc != ElementType::S32) return convertedCopy(in, buf, s, acc);
  int widened = tempBuf(acc, s.dimensions());
  emitElementwise(product(s.dimensions()), {EwInput{EwInput::Full, buf, 0, s.elementType()}},
                  {EwOutput{widened, 0, acc}}, [&](const std::vector<VReg>& v) {
                    VReg d = valloc(acc);
                    e_.op("vmov.s32 {}, {}", V(d), V(v[0]));
                    return std::vector<VReg>{d};
                  });
  return widened;
}

bool Lowerer::lowerThroughComputeType(const Instruction& in, ElementType computeType) {
  // A pred dot or convolution is an or of ands: the operands as pred, their
  // s32 sum of 0/1 products, then whether it is nonzero (fewer than 2^32
  // products cannot wrap to 0).
  const bool logical = computeType == ElementType::Pred;
  // A stand-in op of the same attributes whose operands are the converted
  // buffers (stand-in parameters), lowered by the ordinary path.
  beginKernel(in, "convert");
  const Shape& rs = in.shape();
  auto op = std::make_unique<Instruction>(in.opcode(), in.name(),
                                          logical ? Shape(ElementType::S32, rs.dimensions()) : rs);
  op->setLocation(in.location());
  op->attrs() = in.attrs();
  op->common() = in.common();
  std::vector<std::unique_ptr<Instruction>> operands;
  uint64_t bytes = 0;
  for (const Instruction* o : in.operands()) {
    const Shape& s = o->shape();
    bool convert = s.elementType() != computeType;
    auto p = std::make_unique<Instruction>(Opcode::Parameter, o->name(),
                                           convert ? Shape(computeType, s.dimensions()) : s);
    leaves_[p.get()] = convert ? std::vector<int>{convertedCopy(in, leaves_[o][0], s, computeType)} : leaves_[o];
    if (convert) bytes += bufs_[leaves_[o][0]].bytes + bufs_[leaves_[p.get()][0]].bytes;
    op->addOperand(p.get());
    operands.push_back(std::move(p));
  }
  int sums = logical ? tempBuf(ElementType::S32, rs.dimensions()) : -1;
  endKernel(0, bytes, 0);
  leaves_[op.get()] = logical ? std::vector<int>{sums} : leaves_[&in];
  bool ok = !failed_ && (in.opcode() == Opcode::Dot ? lowerDot(*op) : lowerConvolution(*op));
  leaves_.erase(op.get());
  for (const auto& p : operands) leaves_.erase(p.get());
  if (ok && logical) {
    beginKernel(in, "convert");
    int dst = leaves_[&in][0];
    int64_t n = product(rs.dimensions());
    ok = emitElementwise(n, {EwInput{EwInput::Full, sums, 0, ElementType::S32}}, {EwOutput{dst, 0, ElementType::Pred}},
                         [&](const std::vector<VReg>& v) {
                           int m = malloc_();
                           e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(v[0]));
                           return std::vector<VReg>{toMask01(m)};
                         });
    endKernel(static_cast<double>(n), bufs_[sums].bytes + bufs_[dst].bytes, 0);
  }
  return ok && !failed_;
}

// Dots of s64, u64 or f64 on the vector unit: for each output row, the sum
// over k (in order, from 0: the interpreter's naive loop, separate multiply
// and add) of a scalar of the lhs row times a row of the rhs. The rhs block
// of one batch sits in VMEM, the lhs row in SMEM as word pairs.
bool Lowerer::lowerWideDot(const Instruction& in) {
  const Instruction* lhs = in.operand(0);
  const Instruction* rhs = in.operand(1);
  ElementType ot = in.shape().elementType();
  // The interpreter converts the operands to the type it computes in; a
  // 64-bit or complex result computes in its own type.
  if (dotComputeType(ot) != ot || !isWideType(ot)) return lowerThroughComputeType(in, dotComputeType(ot));
  beginKernel(in, "matmul-vpu");
  const auto& dn = *in.attrs().dotDims;
  DotGeometry geo = dotGeometry(in);
  int64_t b = geo.b, m = geo.m, k = geo.k, n = geo.n;
  int dst = leaves_[&in][0];
  if (std::optional<bool> done = finishTrivialDot(geo, dst, ot)) return *done;
  const int64_t es = typeInfo(ot).bytes;  // 8, or 16 for c128
  // Operands as [B, M, K] and [B, K, N].
  auto canon = [&](const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                   const std::vector<int64_t>& g2) -> int {
    const Shape& s = op->shape();
    std::vector<int64_t> order = g0;
    order.insert(order.end(), g1.begin(), g1.end());
    order.insert(order.end(), g2.begin(), g2.end());
    int src = leaves_[op][0];
    if (s.elementType() != ot) src = convertedCopy(in, src, s, ot);
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int64_t>(i);
    if (identity) return src;
    std::vector<int64_t> os = byteStrides(s.dimensions(), es), counts, ss;
    for (int64_t d : order) {
      counts.push_back(s.dimension(d));
      ss.push_back(os[static_cast<size_t>(d)]);
    }
    int tb = tempBuf(ot, {dimsProduct(s, g0), dimsProduct(s, g1), dimsProduct(s, g2)});
    emitCopy(tb, 0, src, 0, counts, byteStrides(counts, es), ss, es);
    return tb;
  };
  int a = canon(lhs, dn.lhsBatchDimensions, geo.lhsFree, dn.lhsContractingDimensions);
  int w = canon(rhs, dn.rhsBatchDimensions, dn.rhsContractingDimensions, geo.rhsFree);
  if (failed_) return false;
  bool ok = emitVectorUnitMatmul(in, b, m, k, n, a, b, w, dst, ot);
  endKernel(2.0 * static_cast<double>(b * m * n * k),
            bufs_[leaves_[lhs][0]].bytes + bufs_[leaves_[rhs][0]].bytes + bufs_[dst].bytes, 0);
  return ok;
}

// c[i] = a[i % aBatches] x w[i] for i < b: a [m, k], w [k, n], c [m, n],
// all row-major elements of type ot (s32/u32, the 64-bit types or complex),
// summed over k in order from zero on the vector unit: the interpreter's
// order, so integer, f64 and complex results are exact. Each lhs element is
// read into scalar registers and multiplies a VMEM block of rhs columns.
//
// The kernel's phases and the state they share: the plan (K tiles of kt
// rows, column blocks of nb), and the loops' registers. A friend of
// Lowerer: the phases use the lowering state as the kernel's member
// functions do.
class VectorMatmulEmitter : KernelPhases {
 public:
  VectorMatmulEmitter(Lowerer& l, const Instruction& in, int64_t b, int64_t m, int64_t k, int64_t n, int a,
                      int64_t aBatches, int w, int dst, ElementType ot, int valid)
      : KernelPhases(l, in), b(b), m(m), k(k), n(n), a(a), aBatches(aBatches), w(w), dst(dst), ot(ot), valid(valid),
        es(typeInfo(ot).bytes), masked(valid >= 0 && typeInfo(ot).isComplex), isComplex(typeInfo(ot).isComplex),
        isF64(ot == ElementType::F64) {}
  bool plan();
  bool run();

 private:
  // VMEM: the rhs block [rows of K, cols] (+ slack for the last vreg's
  // overrun), then the accumulator row, then (masked) the validity block
  // [rows of K, cols].
  static constexpr uint64_t kSlack = 8192;  // the rest of the last vreg reads the accumulator
  uint64_t rhsBytes(int64_t rows, int64_t cols) const {
    return alignUp(static_cast<uint64_t>(rows * cols * es) + kSlack, 8192);
  }
  uint64_t accBytes(int64_t cols) const { return alignUp(static_cast<uint64_t>(cols) * es, 8192); }
  // The accumulator row is stored a whole vreg at a time: the validity
  // block starts past the last one.
  uint64_t accStores(int64_t cols) const {
    return alignUp(static_cast<uint64_t>((cols + kVregElems - 1) / kVregElems * kVregElems) * es, 8192);
  }
  uint64_t vmemFor(int64_t rows, int64_t cols) const {
    return rhsBytes(rows, cols) +
           (masked ? accStores(cols) + alignUp(static_cast<uint64_t>(rows * cols) * 4 + 8192, 8192) : accBytes(cols));
  }
  void allocate();
  void loadRhsBlock(const std::string& dW, int64_t cols, int64_t rows, uint64_t vW, uint64_t vValid);
  void loadLhsRow(const std::string& dA);
  void resultRow();
  void macVreg();
  void tile(int64_t cols, int64_t rows, bool zeroInit);
  void blocks(int64_t cols, int64_t count, int64_t first);

  const int64_t b, m, k, n;
  const int a;
  const int64_t aBatches;
  const int w, dst;
  const ElementType ot;
  const int valid;
  const int64_t es;  // 4, 8, or 16 for c128
  const bool masked, isComplex, isF64;
  int64_t kt = 0, nb = 0;
  bool tiled = false;
  int rK0 = -1;  // the tile's first k, in bytes of one element
  int rB = -1, rJ = -1, rCol = -1, rI = -1, rK = -1, rT = -1, rX = -1, rWo = -1, rWj = -1, rAo = -1, rCnt = -1, rS = -1,
      rSh = -1;
  std::vector<int> rWords;  // the lhs element's words (s32: one; c128: four)
  int rVo = -1, rVj = -1;   // validity row and column block
  VReg zero;
};

// K tiles of kt rows: the whole K when its rhs block fits VMEM with at
// least min(n, 128) columns and the lhs row fits SMEM. Otherwise tiles of
// K in order, each adding into the result row it left in HBM, so every
// output is still summed over k in order from zero.
bool VectorMatmulEmitter::plan() {
  const uint64_t budget = l_.vmemBudget();
  kt = std::min<int64_t>(k, static_cast<int64_t>(target_.memory.smemBytes) / es);
  nb = n;
  if (vmemFor(kt, nb) > budget) {
    nb = static_cast<int64_t>((budget - std::min<uint64_t>(budget, 32768)) /
                              static_cast<uint64_t>(kt * es + es + (masked ? kt * 4 : 0)));
    nb = nb / 128 * 128;
  }
  if (nb < std::min<int64_t>(n, 128) || vmemFor(kt, nb) > budget) {
    nb = std::min<int64_t>(n, kVregElems);
    const uint64_t fixed = (masked ? accStores(nb) + 8192 : accBytes(nb)) + kSlack + 8192;
    const uint64_t perRow = static_cast<uint64_t>(nb * (es + (masked ? 4 : 0)));
    kt = std::min<int64_t>(kt, budget > fixed ? static_cast<int64_t>((budget - fixed) / perRow) : 0);
    while (kt > 0 && vmemFor(kt, nb) > budget) --kt;
  }
  if (kt < 1 || nb < 1)
    return l_.fail(in,
                   fmt::format("llo-gen: {} {} with K={} does not fit VMEM on the vector unit even one row of K "
                               "at a time",
                               hlo::elementTypeName(ot), hlo::opcodeName(in.opcode()), k));
  tiled = kt < k;
  return true;
}

void VectorMatmulEmitter::allocate() {
  if (tiled) rK0 = sreg();
  rB = sreg();
  rJ = sreg();
  rCol = sreg();
  rI = sreg();
  rK = sreg();
  rT = sreg();
  rX = sreg();
  rWo = sreg();
  rWj = sreg();
  rAo = sreg();
  rCnt = sreg();
  rS = sreg();
  rSh = sreg();
  rWords = {rS};
  if (es >= 8) rWords.push_back(rSh);
  if (ot == ElementType::C128) rWords.insert(rWords.end(), {sreg(), sreg()});
  if (masked) {
    rVo = sreg();
    rVj = sreg();
  }
  zero = l_.vconst(ot, 0);
}

// The rhs block of the tile (rows of K from rK0, columns from rCol) at VMEM
// vW, and (masked) the same validity columns, for every batch, at vValid.
void VectorMatmulEmitter::loadRhsBlock(const std::string& dW, int64_t cols, int64_t rows, uint64_t vW,
                                       uint64_t vValid) {
  e_.op("smul {}, {}, {}", S(rT), S(rB), k * n * es);
  if (tiled) {
    e_.op("smul {}, {}, {}", S(rX), S(rK0), n);
    e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rX));
  }
  e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rCol));
  e_.op("sadd {}, {}, {}", S(rT), S(rT), base(w));
  e_.op("smov {}, {}", S(rX), vW);
  e_.op("{} {}, [{}], {}, sem1", l_.dmaOp("h2v", w), dW, S(rX), l_.memRef(w, S(rT)));
  if (masked) {
    std::string dV = e_.desc(static_cast<uint64_t>(cols * 4), {{rows, n * 4, cols * 4}});
    e_.op("sdiv {}, {}, {}", S(rT), S(rCol), es);
    if (tiled) {
      e_.op("sdiv {}, {}, {}", S(rX), S(rK0), es);
      e_.op("smul {}, {}, {}", S(rX), S(rX), n);
      e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rX));
    }
    e_.op("smul {}, {}, 4", S(rT), S(rT));
    e_.op("sadd {}, {}, {}", S(rT), S(rT), base(valid));
    e_.op("smov {}, {}", S(rX), vValid);
    e_.op("{} {}, [{}], {}, sem1", l_.dmaOp("h2v", valid), dV, S(rX), l_.memRef(valid, S(rT)));
    e_.op("sem.wait sem1");
  }
  e_.op("sem.wait sem1");
}

// Lhs row rI's elements of the tile into SMEM at 0 (on sem0).
void VectorMatmulEmitter::loadLhsRow(const std::string& dA) {
  if (aBatches == b) {
    e_.op("smul {}, {}, {}", S(rT), S(rB), m);
  } else {
    e_.op("srem {}, {}, {}", S(rT), S(rB), aBatches);
    e_.op("smul {}, {}, {}", S(rT), S(rT), m);
  }
  e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rI));
  e_.op("smul {}, {}, {}", S(rT), S(rT), k * es);
  if (tiled) e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rK0));
  e_.op("sadd {}, {}, {}", S(rX), S(rT), base(a));
  e_.op("{} {}, [0], {}, sem0", l_.dmaOp("h2s", a), dA, l_.memRef(a, S(rX)));
}

// rT: the HBM offset of output row i's column block.
void VectorMatmulEmitter::resultRow() {
  e_.op("smul {}, {}, {}", S(rT), S(rB), m);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rI));
  e_.op("smul {}, {}, {}", S(rT), S(rT), n * es);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rCol));
  e_.op("sadd {}, {}, {}", S(rT), S(rT), base(dst));
}

// One vreg of the accumulator row (at rAo) += the lhs element (rWords) x
// the rhs vreg at rWj.
void VectorMatmulEmitter::macVreg() {
  if (es == 4) {
    VReg x = l_.vload(ot, S(rWj));
    e_.op("vmul.s32 {}, {}, {}", V(x), V(x), S(rS));
    VReg acc = l_.vload(ot, S(rAo));
    e_.op("vadd.s32 {}, {}, {}", V(acc), V(acc), V(x));
    l_.vstore(acc, ot, S(rAo));
    vfree(x);
    vfree(acc);
  } else if (isComplex) {
    // o += a * x as std::complex does: the complex row product, then part-wise adds.
    VReg x = l_.vload(ot, S(rWj));
    VReg sa = valloc(ot);
    std::vector<int> regs = {sa.r, sa.hi};
    if (ot == ElementType::C128) regs.insert(regs.end(), {sa.im, sa.imh});
    for (size_t word = 0; word < regs.size(); ++word)
      e_.op("vmov.s32 {}, {}", vregs_.name(regs[word]), S(rWords[word]));
    VReg p = l_.complexMultiply(sa, x);
    VReg acc = l_.vload(ot, S(rAo));
    VReg sum = l_.complexAdd(acc, p);
    if (masked) {  // o keeps its value where the product is padding
      VReg v = l_.vload(ElementType::S32, S(rVj));
      int keep = malloc_();
      e_.op("vcmp.ne.s32 {}, {}, 0", M(keep), V(v));
      std::vector<std::pair<int, int>> parts = {{sum.r, acc.r}, {sum.hi, acc.hi}};
      if (ot == ElementType::C128) parts.insert(parts.end(), {{sum.im, acc.im}, {sum.imh, acc.imh}});
      for (auto [d, o] : parts)
        e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(d), M(keep), vregs_.name(d), vregs_.name(o));
      masks_.put(keep);
      vfree(v);
      e_.op("sadd {}, {}, {}", S(rVj), S(rVj), kVregElems * 4);
    }
    l_.vstore(sum, ot, S(rAo));
    for (VReg r : {x, sa, p, acc, sum}) vfree(r);
  } else {
    VReg x = l_.vload(ot, S(rWj));
    VReg sa = valloc(ot);
    e_.op("vmov.s32 {}, {}", V(sa), S(rS));
    e_.op("vmov.s32 {}, {}", H(sa), S(rSh));
    VReg p = valloc(ot);
    for (int word = 0; word < 2; ++word)
      e_.op("{} {}, {}, {}, {}, {}, {}", isF64 ? "vmul.f64" : "vmul.i64", word ? H(p) : V(p), V(sa), H(sa), V(x),
            H(x), word);
    VReg acc = l_.vload(ot, S(rAo));
    VReg sum = valloc(ot);
    if (isF64) {
      for (int word = 0; word < 2; ++word)
        e_.op("vadd.f64 {}, {}, {}, {}, {}, {}", word ? H(sum) : V(sum), V(acc), H(acc), V(p), H(p), word);
    } else {
      vfree(sum);
      sum = l_.pairAddSub(true, acc, p, ot);
    }
    l_.vstore(sum, ot, S(rAo));
    for (VReg r : {x, sa, p, acc, sum}) vfree(r);
  }
}

// Rows of K [k0, k0 + rows) of one column block (k0 in rK0 when tiled);
// `zeroInit`: the first tile starts each output from zero, later ones
// from the partial sums the previous tile stored.
void VectorMatmulEmitter::tile(int64_t cols, int64_t rows, bool zeroInit) {
  uint64_t vW = 0, vAcc = rhsBytes(rows, cols), vValid = vAcc + accStores(cols);
  // (Descriptors are numbered in the order they are first made.)
  std::string dA = e_.desc(static_cast<uint64_t>(rows * es), {});
  std::string dW = e_.desc(static_cast<uint64_t>(cols * es), {{rows, n * es, cols * es}});
  std::string dC = e_.desc(static_cast<uint64_t>(cols * es), {});
  int64_t nv = (cols + kVregElems - 1) / kVregElems;
  std::string lI = e_.newLabel("wi"), lZ = e_.newLabel("wzero"), lK = e_.newLabel("wk"), lJ = e_.newLabel("wj");
  loadRhsBlock(dW, cols, rows, vW, vValid);
  e_.op("smov {}, 0", S(rI));
  e_.label(lI);
  loadLhsRow(dA);
  if (zeroInit) {
    e_.op("smov {}, {}", S(rAo), vAcc);
    e_.op("smov {}, {}", S(rCnt), nv);
    e_.label(lZ);
    l_.vstore(zero, ot, S(rAo));
    e_.op("sadd {}, {}, {}", S(rAo), S(rAo), kVregElems * es);
    e_.op("loop {}, {}", S(rCnt), lZ);
  } else {
    resultRow();
    e_.op("smov {}, {}", S(rX), vAcc);
    e_.op("{} {}, [{}], {}, sem2", l_.dmaOp("h2v", dst), dC, S(rX), l_.memRef(dst, S(rT)));
    e_.op("sem.wait sem2");
  }
  e_.op("sem.wait sem0");
  e_.op("smov {}, 0", S(rK));
  e_.op("smov {}, {}", S(rWo), vW);
  if (masked) e_.op("smov {}, {}", S(rVo), vValid);
  e_.label(lK);
  e_.op("sld {}, [{}]", S(rS), S(rK));
  for (size_t word = 1; word < rWords.size(); ++word) e_.op("sld {}, [{} + {}]", S(rWords[word]), S(rK), 4 * word);
  e_.op("smov {}, {}", S(rWj), S(rWo));
  if (masked) e_.op("smov {}, {}", S(rVj), S(rVo));
  e_.op("smov {}, {}", S(rAo), vAcc);
  e_.op("smov {}, {}", S(rCnt), nv);
  e_.label(lJ);
  macVreg();
  e_.op("sadd {}, {}, {}", S(rWj), S(rWj), kVregElems * es);
  e_.op("sadd {}, {}, {}", S(rAo), S(rAo), kVregElems * es);
  e_.op("loop {}, {}", S(rCnt), lJ);
  e_.op("sadd {}, {}, {}", S(rWo), S(rWo), cols * es);
  if (masked) e_.op("sadd {}, {}, {}", S(rVo), S(rVo), cols * 4);
  e_.op("sadd {}, {}, {}", S(rK), S(rK), es);
  e_.op("br.lt {}, {}, {}", S(rK), rows * es, lK);
  resultRow();
  e_.op("smov {}, {}", S(rX), vAcc);
  e_.op("{} {}, {}, [{}], sem2", l_.dmaOp("v2h", dst), dC, l_.memRef(dst, S(rT)), S(rX));
  e_.op("sem.wait sem2");
  e_.op("sadd {}, {}, 1", S(rI), S(rI));
  e_.op("br.lt {}, {}, {}", S(rI), m, lI);
}

// `count` column blocks of `cols` from column `first`, each over all of K.
void VectorMatmulEmitter::blocks(int64_t cols, int64_t count, int64_t first) {
  std::string lJb = e_.newLabel("wcol");
  e_.op("smov {}, 0", S(rJ));
  e_.op("smov {}, {}", S(rCol), first * es);
  e_.label(lJb);
  if (!tiled) {
    tile(cols, k, true);
  } else {
    // The first tile, the other whole tiles as a loop, then the rest of K.
    const int64_t full = k / kt, rest = k % kt;
    e_.op("smov {}, 0", S(rK0));
    tile(cols, kt, true);
    e_.op("sadd {}, {}, {}", S(rK0), S(rK0), kt * es);
    if (full > 1) {
      std::string lT = e_.newLabel("wktile");
      e_.label(lT);
      tile(cols, kt, false);
      e_.op("sadd {}, {}, {}", S(rK0), S(rK0), kt * es);
      e_.op("br.lt {}, {}, {}", S(rK0), full * kt * es, lT);
    }
    if (rest > 0) tile(cols, rest, false);
  }
  e_.op("sadd {}, {}, {}", S(rCol), S(rCol), cols * es);
  e_.op("sadd {}, {}, 1", S(rJ), S(rJ));
  e_.op("br.lt {}, {}, {}", S(rJ), count, lJb);
}

bool VectorMatmulEmitter::run() {
  allocate();
  std::string lB = e_.newLabel("wb");
  e_.op("smov {}, 0", S(rB));
  e_.label(lB);
  if (n / nb > 0) blocks(nb, n / nb, 0);
  if (n % nb > 0) blocks(n % nb, 1, n / nb * nb);
  e_.op("sadd {}, {}, 1", S(rB), S(rB));
  e_.op("br.lt {}, {}, {}", S(rB), b, lB);
  vfree(zero);
  return !failed_;
}

bool Lowerer::emitVectorUnitMatmul(const Instruction& in, int64_t b, int64_t m, int64_t k, int64_t n, int a,
                                   int64_t aBatches, int w, int dst, ElementType ot, int valid) {
  VectorMatmulEmitter kernel(*this, in, b, m, k, n, a, aBatches, w, dst, ot, valid);
  if (!kernel.plan()) return false;
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  return kernel.run();
}

// Convolutions of s64, u64, f64, c64, c128 (and integers, in s32) as the
// interpreter computes them: per output batch n and group g, W[g]
// [Og, (Cg, taps)] times an im2col matrix [(Cg, taps), positions] gathered
// from the padded input X[N, P.., C] by one strided DMA, summed in the
// interpreter's order (feature-major, then taps). Padding and dilation
// holes are X's zeros: its f64 gemm multiplies them too, its complex direct
// loop skips them (validX).
bool Lowerer::emitWideConv(const Instruction& in, const ConvGeometry& g, int xBuf, int validX) {
  const auto& dn = *in.attrs().convDims;
  const Shape& ks = in.operand(1)->shape();
  const Shape& os = in.shape();
  // The accumulator type: the result's for 64-bit and complex types, s32
  // for integer convolutions (narrower results wrap to the same bits).
  ElementType t = isPairType(g.outType) || typeInfo(g.outType).isComplex ? g.outType : ElementType::S32;
  const int64_t es = typeInfo(t).bytes;
  std::vector<int64_t> xDims = {g.batch};
  xDims.insert(xDims.end(), g.padded.begin(), g.padded.end());
  xDims.push_back(g.inFeatures);
  std::vector<int64_t> xs = byteStrides(xDims, es);
  const int64_t k = g.inPerGroup * g.taps, positions = g.outPositions;
  // col[n, g, c, taps.., positions..] <- X[batch(n, g), position + tap, feature(g, c)]
  std::vector<int64_t> counts = {g.outBatch, g.groups, g.inPerGroup};
  std::vector<int64_t> src = {xs[0], g.featureGroups > 1 ? g.inPerGroup * es : g.outBatch * xs[0], es};
  int64_t off = 0;
  for (size_t d = 0; d < g.rank; ++d) {
    int64_t step = g.rhsDil[d] * xs[d + 1];
    if (g.reversal[d]) {  // kernel tap j reads input tap K - 1 - j
      off += (g.kSize[d] - 1) * step;
      step = -step;
    }
    counts.push_back(g.kSize[d]);
    src.push_back(step);
  }
  for (size_t d = 0; d < g.rank; ++d) {
    counts.push_back(g.outSize[d]);
    src.push_back(g.stride[d] * xs[d + 1]);
  }
  int col = tempBuf(t, {g.outBatch, g.groups, k, positions});
  emitCopy(col, 0, xBuf, off, counts, byteStrides(counts, es), src, es);
  // W[O, Cg, taps..] from the kernel's layout.
  std::vector<int64_t> perm = {dn.kernelOutputFeatureDimension, dn.kernelInputFeatureDimension};
  perm.insert(perm.end(), dn.kernelSpatialDimensions.begin(), dn.kernelSpatialDimensions.end());
  int kBuf = leaves_[in.operand(1)][0];
  kBuf = accumulatorCopy(in, kBuf, ks, t);  // a narrower kernel, as the interpreter converts it
  int wk = permutedCopy(kBuf, ks.dimensions(), perm);
  // valid[(c, taps..), positions..] <- validX[position + tap]: the same for
  // every batch, group and feature.
  int valid = -1;
  if (validX >= 0) {
    std::vector<int64_t> vs = byteStrides(g.padded, 4), vcounts = {g.inPerGroup}, vsrc = {0};
    int64_t voff = 0;
    for (size_t d = 0; d < g.rank; ++d) {
      int64_t step = g.rhsDil[d] * vs[d];
      if (g.reversal[d]) {
        voff += (g.kSize[d] - 1) * step;
        step = -step;
      }
      vcounts.push_back(g.kSize[d]);
      vsrc.push_back(step);
    }
    for (size_t d = 0; d < g.rank; ++d) {
      vcounts.push_back(g.outSize[d]);
      vsrc.push_back(g.stride[d] * vs[d]);
    }
    valid = tempBuf(ElementType::S32, {k, positions});
    emitCopy(valid, 0, validX, voff, vcounts, byteStrides(vcounts, 4), vsrc, 4);
  }
  int outC = tempBuf(t, {g.outBatch, g.outFeatures, positions});
  if (failed_ || !emitVectorUnitMatmul(in, g.outBatch * g.groups, g.outPerGroup, k, positions, wk, g.groups, col,
                                       outC, t, valid))
    return false;
  // [N', O, positions..] to the result's layout.
  std::vector<int64_t> cdims = {g.outBatch, g.outFeatures};
  cdims.insert(cdims.end(), g.outSize.begin(), g.outSize.end());
  std::vector<int64_t> rs = byteStrides(os.dimensions(), es);
  std::vector<int64_t> dstS = {rs[static_cast<size_t>(dn.outputBatchDimension)],
                               rs[static_cast<size_t>(dn.outputFeatureDimension)]};
  for (int64_t d : dn.outputSpatialDimensions) dstS.push_back(rs[static_cast<size_t>(d)]);
  int dst = leaves_[&in][0];
  int result = t == g.outType ? dst : tempBuf(t, os.dimensions());
  emitCopy(result, 0, outC, 0, cdims, dstS, byteStrides(cdims, es), es);
  if (result != dst)
    emitElementwise(product(os.dimensions()), {EwInput{EwInput::Full, result, 0, t}}, {EwOutput{dst, 0, g.outType}},
                    [&](const std::vector<VReg>& v) {
                      VReg d = valloc(g.outType);
                      e_.op("vmov.s32 {}, {}", V(d), V(v[0]));
                      return std::vector<VReg>{d};
                    });
  return !failed_;
}

// ---- elementwise ops on pairs: the composed cells of the op table (op_table.cpp)

VReg Lowerer::pairSelect(int mask, VReg a, VReg b, ElementType t) {
  VReg d = valloc(t);
  e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(mask), V(a), V(b));
  e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(mask), H(a), H(b));
  return d;
}

VReg Lowerer::pairZero(ElementType t) {
  VReg z = valloc(t);
  e_.op("vmov.s32 {}, 0", V(z));
  e_.op("vmov.s32 {}, 0", H(z));
  return z;
}

VReg Lowerer::pairRow(const char* mnemonic, VReg a, VReg b, ElementType t) {
  VReg d = valloc(t);
  for (int w = 0; w < 2; ++w)
    e_.op("{} {}, {}, {}, {}, {}, {}", mnemonic, w ? H(d) : V(d), V(a), H(a), V(b), H(b), w);
  return d;
}

VReg Lowerer::pairRowUnary(const char* mnemonic, VReg a, ElementType t) {
  VReg d = valloc(t);
  for (int w = 0; w < 2; ++w) e_.op("{} {}, {}, {}, {}", mnemonic, w ? H(d) : V(d), V(a), H(a), w);
  return d;
}

std::optional<VReg> Lowerer::pairConstant(const Instruction& in, const std::vector<VReg>&) {
  uint64_t bits = in.literal().getBits(0);
  VReg d = valloc(in.shape().elementType());
  e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint32_t>(bits)));
  e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
  return d;
}

std::optional<VReg> Lowerer::pairAddSubOp(const Instruction& in, const std::vector<VReg>& ops) {
  return pairAddSub(in.opcode() == Opcode::Add, ops[0], ops[1], in.shape().elementType());
}

std::optional<VReg> Lowerer::pairNegateAbs(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType(), ot = ops[0].t;
  bool negate = in.opcode() == Opcode::Negate;
  if (ot == ElementType::F64) {  // the sign bit, in the high word
    VReg d = valloc(rt);
    e_.op("vmov.s32 {}, {}", V(d), V(ops[0]));
    if (negate)
      e_.op("vxor {}, {}, -2147483648", H(d), H(ops[0]));
    else
      e_.op("vand {}, {}, 2147483647", H(d), H(ops[0]));
    return d;
  }
  if (!negate && ot == ElementType::U64) return vcopy(ops[0], rt);
  VReg z = pairZero(ot);
  VReg n = pairAddSub(false, z, ops[0], rt);
  vfree(z);
  if (negate) return n;
  int m = malloc_();
  e_.op("vcmp.lt.s32 {}, {}, 0", M(m), H(ops[0]));
  VReg d = pairSelect(m, n, ops[0], rt);
  masks_.put(m);
  vfree(n);
  return d;
}

std::optional<VReg> Lowerer::pairMinMax(const Instruction& in, const std::vector<VReg>& ops) {  // s64, u64
  int m = pairCompare(in.opcode() == Opcode::Maximum ? "gt" : "lt", ops[0].t, ops[0], ops[1]);
  VReg d = pairSelect(m, ops[0], ops[1], in.shape().elementType());
  masks_.put(m);
  return d;
}

std::optional<VReg> Lowerer::pairClamp(const Instruction& in, const std::vector<VReg>& ops) {
  // clamp(lo, x, hi) = min(max(x, lo), hi)
  ElementType rt = in.shape().elementType(), ot = ops[0].t;
  if (ot == ElementType::F64) {
    VReg a = pairRow("vmax.f64", ops[1], ops[0], rt);
    VReg d = pairRow("vmin.f64", a, ops[2], rt);
    vfree(a);
    return d;
  }
  int m = pairCompare("gt", ot, ops[1], ops[0]);
  VReg a = pairSelect(m, ops[1], ops[0], rt);
  e_.op("vcmp.lt.{} {}, {}, {}, {}, {}", ot == ElementType::U64 ? "u64" : "s64", M(m), V(a), H(a), V(ops[2]),
        H(ops[2]));
  VReg d = pairSelect(m, a, ops[2], rt);
  masks_.put(m);
  vfree(a);
  return d;
}

std::optional<VReg> Lowerer::pairCompareOp(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType ot = ops[0].t;
  const char* dir = kDirs[static_cast<int>(in.attrs().comparisonDirection)];
  if (ot != ElementType::F64 || in.attrs().comparisonType != hlo::ComparisonType::TotalOrder)
    return toMask01(pairCompare(dir, ot, ops[0], ops[1]));
  // Total order: the bits as s64, negative values with their magnitude
  // bits flipped (-NaN < -inf < -0 < +0 < +NaN).
  VReg k[2];
  for (int i = 0; i < 2; ++i) {
    VReg x = ops[static_cast<size_t>(i)];
    k[i] = valloc(ElementType::S64);
    e_.op("vsra {}, {}, 31", V(k[i]), H(x));
    e_.op("vand {}, {}, 2147483647", H(k[i]), V(k[i]));
    e_.op("vxor {}, {}, {}", H(k[i]), H(k[i]), H(x));
    e_.op("vxor {}, {}, {}", V(k[i]), V(k[i]), V(x));
  }
  int m = pairCompare(dir, ElementType::S64, k[0], k[1]);
  vfree(k[0]);
  vfree(k[1]);
  return toMask01(m);
}

std::optional<VReg> Lowerer::pairSelectOp(const Instruction& in, const std::vector<VReg>& ops) {
  int m = malloc_();
  e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(ops[0]));
  VReg d = pairSelect(m, ops[1], ops[2], in.shape().elementType());
  masks_.put(m);
  return d;
}

std::optional<VReg> Lowerer::pairIsFinite(const Instruction&, const std::vector<VReg>& ops) {
  // The exponent field of the high word not all ones.
  VReg e = valloc(ElementType::S32);
  int m = malloc_();
  e_.op("vand {}, {}, 2146435072", V(e), H(ops[0]));
  e_.op("vcmp.ne.s32 {}, {}, 2146435072", M(m), V(e));
  vfree(e);
  return toMask01(m);
}

std::optional<VReg> Lowerer::pairConvert(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType(), from = ops[0].t;
  TypeInfo ri = typeInfo(rt);
  if (from == ElementType::F64) return convertFromF64(ops[0], rt);
  // From s64/u64 on.
  if (isPairType(from) && isPairType(rt)) {
    if (rt != ElementType::F64) return vcopy(ops[0], rt);
    return pairRowUnary(from == ElementType::S64 ? "vcvt.f64.s64" : "vcvt.f64.u64", ops[0], rt);
  }
  if (!isPairType(from)) return pairFrom32(ops[0], rt);
  // From a pair to a 32-bit register form.
  if (rt == ElementType::Pred) {
    VReg t = valloc(ElementType::S32);
    int m = malloc_();
    e_.op("vor {}, {}, {}", V(t), V(ops[0]), H(ops[0]));
    e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(t));
    vfree(t);
    return toMask01(m);
  }
  if (ri.isFloat && rt != ElementType::F32) {
    // Narrow floats: rounded once from f64 (through f32 would round
    // twice); integers go to f64 first, as the interpreter converts them.
    VReg x = pairRowUnary(from == ElementType::S64 ? "vcvt.f64.s64" : "vcvt.f64.u64", ops[0], ElementType::F64);
    VReg d = convertFromF64(x, rt);
    vfree(x);
    return d;
  }
  VReg d = valloc(rt);
  if (ri.isFloat) {
    e_.op("{} {}, {}, {}", from == ElementType::S64 ? "vcvt.f32.s64" : "vcvt.f32.u64", V(d), V(ops[0]), H(ops[0]));
    return d;
  }
  // Integer narrowing wraps: the low word.
  e_.op("vmov.s32 {}, {}", V(d), V(ops[0]));
  return normalize(d);
}

std::optional<VReg> Lowerer::pairPopcntClz(const Instruction& in, const std::vector<VReg>& ops) {
  // Per half, then combined: popcnt(lo) + popcnt(hi); clz(hi), or
  // 32 + clz(lo) when the high word is zero.
  bool clz = in.opcode() == Opcode::Clz;
  VReg c[2];
  for (int h = 0; h < 2; ++h) {
    VReg x = valloc(ElementType::S32), t = valloc(ElementType::S32);
    e_.op("vmov.s32 {}, {}", V(x), h ? H(ops[0]) : V(ops[0]));
    emitLanePopcount(x, t, clz);
    if (clz) {  // 32 - (bits set after smearing the top one down)
      VReg w = vconst(ElementType::S32, 32);
      e_.op("vsub.s32 {}, {}, {}", V(x), V(w), V(x));
      vfree(w);
    }
    vfree(t);
    c[h] = x;
  }
  VReg d = valloc(in.shape().elementType());
  e_.op("vmov.s32 {}, 0", H(d));
  if (clz) {
    int m = malloc_();
    e_.op("vadd.s32 {}, {}, 32", V(c[0]), V(c[0]));
    e_.op("vcmp.eq.s32 {}, {}, 0", M(m), H(ops[0]));
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(c[0]), V(c[1]));
    masks_.put(m);
  } else {
    e_.op("vadd.s32 {}, {}, {}", V(d), V(c[0]), V(c[1]));
  }
  vfree(c[0]);
  vfree(c[1]);
  return d;
}

std::optional<VReg> Lowerer::pairIntSign(const Instruction& in, const std::vector<VReg>& ops) {
  // -1 (all ones) when negative, else 0 or 1 by whether any bit is set.
  VReg d = valloc(in.shape().elementType()), nz = valloc(ElementType::S32);
  int m = malloc_();
  e_.op("vor {}, {}, {}", V(nz), V(ops[0]), H(ops[0]));
  e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(nz));
  e_.op("vmov.s32 {}, 1", V(nz));
  e_.op("vsel.s32 {}, {}, {}, 0", V(d), M(m), V(nz));
  e_.op("vmov.s32 {}, 0", H(d));
  e_.op("vcmp.lt.s32 {}, {}, 0", M(m), H(ops[0]));
  e_.op("vsra {}, {}, 31", H(d), H(ops[0]));
  e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), H(d), V(d));
  masks_.put(m);
  vfree(nz);
  return d;
}

std::optional<VReg> Lowerer::pairImag(const Instruction&, const std::vector<VReg>& ops) {
  return pairZero(ops[0].t);
}

// f64 library math is expanded into the pair rows (kernels/math.cpp, math_f64.cpp).
std::optional<VReg> Lowerer::expF64Op(const Instruction&, const std::vector<VReg>& ops) {
  return expandExpF64(ops[0]);
}

std::optional<VReg> Lowerer::f64LibraryOp(const Instruction& in, const std::vector<VReg>& ops) {
  return expandMathF64(in.opcode(), ops);
}

}  // namespace tpu::codegen

namespace tpu::codegen {

VReg Lowerer::f64Math(Opcode op, VReg a, std::optional<VReg> b) {
  // Every function but sqrt (a pair-unit row) is expanded (kernels/math.cpp, math_f64.cpp).
  if (op == Opcode::Exp) return expandExpF64(a);
  if (op == Opcode::Sqrt) return f64Row("vsqrt.f64", a);
  std::vector<VReg> ops = {a};
  if (b) ops.push_back(*b);
  std::optional<VReg> r = expandMathF64(op, ops);
  return r ? *r : f64Row("vsqrt.f64", a);  // not reached: callers pass expanded ops
}

}  // namespace tpu::codegen
