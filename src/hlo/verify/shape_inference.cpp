// Shape inference for every opcode, following XLA's ShapeInference and the
// per-opcode checks of its ShapeVerifier. Errors name the instruction and are
// reported at its location; nothing here builds strings unless it fails.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "hlo/verify/signature_cache.h"
#include "hlo/verify/verifier.h"

namespace tpu::hlo {

namespace {

using R = verify_detail::Inferred;

bool isF(ElementType t) { return isFloatType(t); }
bool isC(ElementType t) { return isComplexType(t); }
bool isI(ElementType t) { return isIntegerType(t); }
bool isPred(ElementType t) { return t == ElementType::Pred; }
// XLA's "signed": signed integers and every float/complex type.
bool isSignedNum(ElementType t) { return isSignedIntegerType(t) || isF(t) || isC(t); }

std::string str(const Shape& s) { return s.toString(false); }

std::string ints(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "}";
}

bool sameDims(const Shape& a, const Shape& b) { return a.dimensions() == b.dimensions(); }

bool sameTypeFp(ElementType a, ElementType b) { return a == b || (isF(a) && isF(b)); }

// Same kind and dimensions; element types equal or both floating point.
bool compatibleIgnoringFp(const Shape& a, const Shape& b) {
  if (a.kind() != b.kind()) return false;
  if (a.isTuple()) {
    if (a.tupleSize() != b.tupleSize()) return false;
    for (int64_t i = 0; i < a.tupleSize(); ++i)
      if (!compatibleIgnoringFp(a.tupleElement(i), b.tupleElement(i))) return false;
    return true;
  }
  if (!a.isArray()) return true;
  return sameDims(a, b) && sameTypeFp(a.elementType(), b.elementType());
}

bool isScalarOf(const Shape& s, ElementType t) { return s.isScalar() && s.elementType() == t; }

int64_t ceilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// (bound - 1) * dilation + 1, or 0 for an empty bound; nullopt on overflow.
std::optional<int64_t> dilatedBound(int64_t bound, int64_t dilation) {
  if (bound == 0) return 0;
  int64_t r;
  if (__builtin_mul_overflow(bound - 1, dilation, &r) || __builtin_add_overflow(r, 1, &r)) return std::nullopt;
  return r;
}

enum class GroupMode { CrossReplica, CrossPartition, CrossReplicaAndPartition, FlattenedId };

class Inferrer {
 public:
  Inferrer(const Instruction& inst, DiagnosticEngine& diags, const VerifyOptions& opts,
           verify_detail::SignatureCache& sigs)
      : inst_(inst), diags_(diags), opts_(opts), sigs_(sigs), a_(inst.attrs()) {}

  R run();

 private:
  template <typename... Args>
  std::nullopt_t fail(fmt::format_string<Args...> f, Args&&... args) {
    std::string message = fmt::format("'{}': ", inst_.name());
    fmt::format_to(std::back_inserter(message), f, std::forward<Args>(args)...);
    diags_.error(inst_.location(), std::move(message));
    return std::nullopt;
  }

  const Shape& op(int64_t i) const { return inst_.operand(i)->shape(); }
  int64_t count() const { return inst_.operandCount(); }
  const Shape& declared() const { return inst_.shape(); }
  std::string_view opName() const { return opcodeName(inst_.opcode()); }

  bool array(int64_t i) {
    if (op(i).isArray()) return true;
    fail("operand {} of {} must be an array, but has shape {}", i, opName(), str(op(i)));
    return false;
  }
  bool allArrays(int64_t from = 0) {
    for (int64_t i = from; i < count(); ++i)
      if (!array(i)) return false;
    return true;
  }
  bool scalar(int64_t i, const char* what) {
    if (op(i).isScalar()) return true;
    fail("{} (operand {}) must be a scalar, but has shape {}", what, i, str(op(i)));
    return false;
  }
  bool token(int64_t i) {
    if (op(i).isToken()) return true;
    fail("operand {} of {} must be a token, but has shape {}", i, opName(), str(op(i)));
    return false;
  }
  bool atLeast(int64_t n) {
    if (count() >= n) return true;
    fail("{} expects at least {} operand{}, but has {}", opName(), n, n == 1 ? "" : "s", count());
    return false;
  }
  bool exactly(int64_t n) {
    if (count() == n) return true;
    fail("{} expects {} operand{}, but has {}", opName(), n, n == 1 ? "" : "s", count());
    return false;
  }
  bool typeOk(ElementType a, ElementType b) const {
    return a == b || (opts_.allowMixedPrecision && isF(a) && isF(b));
  }
  // Every entry in [0, bound), no duplicates (and ascending when `sorted`).
  bool dimList(const std::vector<int64_t>& v, int64_t bound, bool sorted, const char* name);
  bool dimIndex(int64_t d, int64_t bound, const char* name) {
    if (d >= 0 && d < bound) return true;
    fail("{} {} is out of range for rank {}", name, d, bound);
    return false;
  }

  // Called computations.
  const Computation* callee(size_t i, const char* role);
  const verify_detail::Signature* signature(const Computation* c, const char* role, int64_t params);
  // XLA's VerifyReducerShape; returns the accumulator element types.
  std::optional<std::vector<ElementType>> reducer(const Computation* c, const char* role,
                                                  const std::vector<ElementType>& initTypes,
                                                  const std::vector<ElementType>& inputTypes);
  bool scalarParam(const verify_detail::Signature& sig, const Computation* c, const char* role, int64_t i,
                   ElementType expected);

  R windowShape(const Shape& base, const Window& w, ElementType type, const char* what);

  R unary();
  R binary();
  R select();
  R clamp();
  R convert();
  R bitcastConvert();
  R stochasticConvert();
  R bitcast();
  R broadcast();
  R reshape();
  R dynamicReshape();
  R transpose();
  R slice();
  R dynamicSliceIndices(int64_t first, int64_t rank);
  R dynamicSlice();
  R dynamicUpdateSlice();
  R concatenate();
  R pad();
  R reverse();
  R iota();
  R reduce();
  R reduceWindow();
  R selectAndScatter();
  R dotDims(const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& d, bool checkContracting,
            std::vector<int64_t>* outDims);
  R dot();
  R raggedDot();
  R scaledDot();
  R convolution();
  R gather();
  R scatter();
  R sort();
  R whileLoop();
  R conditional();
  R call();
  R map();
  R fusion();
  R tuple();
  R getTupleElement();
  R customCall();
  R outputOperandAliasing();
  std::optional<GroupMode> groupMode(bool hasGlobalIdsField);
  bool replicaGroups(GroupMode mode, bool uniform);
  int64_t subgroupSize(GroupMode mode);
  R allReduce(bool start);
  R allGather(bool start);
  R reduceScatter();
  R allToAll();
  R raggedAllToAll();
  R collectivePermute(bool start);
  R collectiveBroadcast();
  R asyncStart();
  R asyncUpdateOrDone(bool done);
  R copyStart();
  R copyDone();
  R rng();
  R rngBitGenerator();
  R send();
  R recv();
  R infeed();
  R outfeed();
  R getDimensionSize();
  R setDimensionSize();
  R triangularSolve();
  R cholesky();
  R fft();
  R batchNorm();
  R topK();
  R constant();
  R reducePrecision();

  const Instruction& inst_;
  DiagnosticEngine& diags_;
  const VerifyOptions& opts_;
  verify_detail::SignatureCache& sigs_;
  const InstructionAttributes& a_;
};

bool Inferrer::dimList(const std::vector<int64_t>& v, int64_t bound, bool sorted, const char* name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= bound) {
      fail("{} {} contains {}, out of range for rank {}", name, ints(v), v[i], bound);
      return false;
    }
    if (sorted && i > 0 && v[i] <= v[i - 1]) {
      fail("{} {} must be sorted and unique", name, ints(v));
      return false;
    }
  }
  if (!sorted && v.size() > 1) {
    std::vector<int64_t> s = v;
    std::sort(s.begin(), s.end());
    if (std::adjacent_find(s.begin(), s.end()) != s.end()) {
      fail("{} {} contains duplicates", name, ints(v));
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------- called computations

const Computation* Inferrer::callee(size_t i, const char* role) {
  const auto& called = inst_.calledComputations();
  if (i >= called.size() || !called[i]) {
    fail("{} needs a {} computation", opName(), role);
    return nullptr;
  }
  return called[i];
}

// nullptr when the computation's parameters are not dense or it has no root:
// the module verifier reports those, so callers skip their checks silently.
const verify_detail::Signature* Inferrer::signature(const Computation* c, const char* role, int64_t params) {
  const verify_detail::Signature& sig = sigs_.get(c);
  if (!sig.dense || !sig.root) return nullptr;
  if (params >= 0 && static_cast<int64_t>(sig.params.size()) != params) {
    fail("{} computation '{}' must take {} parameter{}, but takes {}", role, c->name(), params,
         params == 1 ? "" : "s", sig.params.size());
    return nullptr;
  }
  return &sig;
}

bool Inferrer::scalarParam(const verify_detail::Signature& sig, const Computation* c, const char* role,
                           int64_t i, ElementType expected) {
  const Shape& p = sig.params[static_cast<size_t>(i)]->shape();
  if (p.isScalar() && typeOk(p.elementType(), expected)) return true;
  fail("parameter {} of {} computation '{}' must be {}[], but is {}", i, role, c->name(),
       elementTypeName(expected), str(p));
  return false;
}

std::optional<std::vector<ElementType>> Inferrer::reducer(const Computation* c, const char* role,
                                                          const std::vector<ElementType>& initTypes,
                                                          const std::vector<ElementType>& inputTypes) {
  const int64_t n = static_cast<int64_t>(initTypes.size());
  const verify_detail::Signature* sig = signature(c, role, 2 * n);
  if (!sig) return std::nullopt;
  const Shape& root = sig->root->shape();
  std::vector<ElementType> acc;
  if (n == 1 && root.isScalar()) {
    acc.push_back(root.elementType());
  } else if (n > 1 && root.isTuple() && root.tupleSize() == n) {
    for (const Shape& e : root.tupleElements()) {
      if (!e.isScalar()) break;
      acc.push_back(e.elementType());
    }
  }
  if (static_cast<int64_t>(acc.size()) != n) {
    if (n == 1)
      fail("{} computation '{}' must return a scalar, but returns {}", role, c->name(), str(root));
    else
      fail("{} computation '{}' must return a tuple of {} scalars, but returns {}", role, c->name(), n,
           str(root));
    return std::nullopt;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!typeOk(acc[i], initTypes[i])) {
      fail("{} computation '{}' accumulates {} at index {} but the init value is {}", role, c->name(),
           elementTypeName(acc[i]), i, elementTypeName(initTypes[i]));
      return std::nullopt;
    }
    if (!typeOk(acc[i], inputTypes[i])) {
      fail("{} computation '{}' accumulates {} at index {} but the input element type is {}", role, c->name(),
           elementTypeName(acc[i]), i, elementTypeName(inputTypes[i]));
      return std::nullopt;
    }
    if (!scalarParam(*sig, c, role, i, acc[i]) || !scalarParam(*sig, c, role, n + i, inputTypes[i]))
      return std::nullopt;
  }
  return acc;
}

// ---------------------------------------------------------------- windows

R Inferrer::windowShape(const Shape& base, const Window& w, ElementType type, const char* what) {
  if (static_cast<int64_t>(w.dimensions.size()) != base.rank())
    return fail("window has {} dimensions but the {} has rank {}", w.dimensions.size(), what, base.rank());
  std::vector<int64_t> dims(w.dimensions.size());
  for (size_t i = 0; i < w.dimensions.size(); ++i) {
    const WindowDimension& d = w.dimensions[i];
    if (d.size <= 0 || d.stride <= 0 || d.baseDilation <= 0 || d.windowDilation <= 0)
      return fail("window dimension {} has a non-positive size, stride or dilation", i);
    auto padded = dilatedBound(base.dimension(static_cast<int64_t>(i)), d.baseDilation);
    auto window = dilatedBound(d.size, d.windowDilation);
    int64_t p = 0;
    if (!padded || !window || __builtin_add_overflow(*padded, d.paddingLow, &p) ||
        __builtin_add_overflow(p, d.paddingHigh, &p))
      return fail("window dimension {} overflows", i);
    if (p < 0)
      return fail("window dimension {}: padded {} size {} is negative", i, what, p);
    dims[i] = *window > p ? 0 : (p - *window) / d.stride + 1;
  }
  return Shape(type, std::move(dims));
}

// ---------------------------------------------------------------- elementwise

R Inferrer::unary() {
  const Shape& x = op(0);
  Opcode o = inst_.opcode();
  if (o == Opcode::Copy || o == Opcode::Domain || o == Opcode::OptimizationBarrier) return x;
  if (!array(0)) return std::nullopt;
  ElementType t = x.elementType();
  auto bad = [&](const char* what) {
    return fail("{} expects {} operand, but has {}", opName(), what, str(x));
  };
  switch (o) {
    case Opcode::Floor:
    case Opcode::Ceil:
    case Opcode::RoundNearestAfz:
    case Opcode::RoundNearestEven:
    case Opcode::Erf:
      if (!isF(t)) return bad("a floating-point");
      return x;
    case Opcode::IsFinite:
      if (!isF(t)) return bad("a floating-point");
      return R::retyped(x, ElementType::Pred);
    case Opcode::Real:
    case Opcode::Imag:
    case Opcode::Abs: {
      if (isC(t)) return R::retyped(x, complexComponentType(t));
      if (o == Opcode::Abs ? !isSignedNum(t) : !isF(t))
        return bad(o == Opcode::Abs ? "a signed or complex" : "a floating-point or complex");
      return x;
    }
    case Opcode::Sign:
      if (!isSignedNum(t)) return bad("a signed or complex");
      return x;
    case Opcode::Negate:
      if (!isI(t) && !isF(t) && !isC(t)) return bad("an integral, floating-point or complex");
      return x;
    case Opcode::Not:
      if (!isI(t) && !isPred(t)) return bad("a pred or integral");
      return x;
    case Opcode::Clz:
    case Opcode::Popcnt:
      if (!isI(t)) return bad("an integral");
      return x;
    default:
      // Transcendental functions.
      if (!isF(t) && !isC(t)) return bad("a floating-point or complex");
      return x;
  }
}

R Inferrer::binary() {
  if (!array(0) || !array(1)) return std::nullopt;
  const Shape& lhs = op(0);
  const Shape& rhs = op(1);
  Opcode o = inst_.opcode();
  if (!sameDims(lhs, rhs))
    return fail("{} operands have incompatible shapes {} and {}", opName(), str(lhs), str(rhs));
  ElementType lt = lhs.elementType(), rt = rhs.elementType();
  if (!typeOk(lt, rt))
    return fail("{} operands have different element types {} and {}", opName(), elementTypeName(lt),
                elementTypeName(rt));
  const Shape* r = &lhs;
  if (isF(lt) && isF(rt) && elementTypeInfo(rt).bitWidth > elementTypeInfo(lt).bitWidth) r = &rhs;
  switch (o) {
    case Opcode::And:
    case Opcode::Or:
    case Opcode::Xor:
      if (!isPred(lt) && !isI(lt))
        return fail("{} expects pred or integral operands, but has {}", opName(), str(lhs));
      break;
    case Opcode::ShiftLeft:
    case Opcode::ShiftRightArithmetic:
    case Opcode::ShiftRightLogical:
    case Opcode::Mulhi:
      if (!isI(lt)) return fail("{} expects integral operands, but has {}", opName(), str(lhs));
      break;
    case Opcode::Atan2:
      if (!isF(lt) && !isC(lt))
        return fail("{} expects floating-point or complex operands, but has {}", opName(), str(lhs));
      break;
    case Opcode::Complex:
      if (lt != ElementType::F32 && lt != ElementType::F64)
        return fail("complex expects f32 or f64 operands, but has {}", str(lhs));
      return R::retyped(lhs, lt == ElementType::F32 ? ElementType::C64 : ElementType::C128);
    case Opcode::Compare: {
      ComparisonType ct = a_.comparisonType;
      if (isF(lt)) {
        if (ct != ComparisonType::Float && ct != ComparisonType::TotalOrder)
          return fail("compare of {} operands must use type FLOAT or TOTALORDER, not {}", elementTypeName(lt),
                      toString(ct));
      } else if (ct != defaultComparisonType(lt)) {
        return fail("compare of {} operands must use type {}, not {}", elementTypeName(lt),
                    toString(defaultComparisonType(lt)), toString(ct));
      }
      if (isC(lt) && a_.comparisonDirection != ComparisonDirection::EQ &&
          a_.comparisonDirection != ComparisonDirection::NE)
        return fail("compare of complex operands supports only EQ and NE, not {}",
                    toString(a_.comparisonDirection));
      return R::retyped(lhs, ElementType::Pred);
    }
    default: break;
  }
  return *r;
}

R Inferrer::select() {
  if (!array(0) || !array(1) || !array(2)) return std::nullopt;
  const Shape& pred = op(0);
  const Shape& t = op(1);
  const Shape& f = op(2);
  if (pred.elementType() != ElementType::Pred)
    return fail("select's predicate must have element type pred, but has shape {}", str(pred));
  if (!sameDims(t, f) || !typeOk(t.elementType(), f.elementType()))
    return fail("select's on_true {} and on_false {} must have the same shape", str(t), str(f));
  if (!pred.isScalar() && !sameDims(pred, t))
    return fail("select's predicate {} must be a scalar or have the dimensions of {}", str(pred), str(t));
  return t;
}

R Inferrer::clamp() {
  if (!array(0) || !array(1) || !array(2)) return std::nullopt;
  const Shape& lo = op(0);
  const Shape& x = op(1);
  const Shape& hi = op(2);
  for (const Shape* b : {&lo, &hi}) {
    if (!typeOk(b->elementType(), x.elementType()) || (!b->isScalar() && !sameDims(*b, x)))
      return fail("clamp bound {} must be a scalar or have the shape of the operand {}", str(*b), str(x));
  }
  return x;
}

R Inferrer::convert() {
  if (!array(0)) return std::nullopt;
  ElementType to = declared().elementType();
  if (!declared().isArray() || !isArrayElementType(to))
    return fail("convert must produce an array, not {}", str(declared()));
  if (isC(op(0).elementType()) && !isC(to))
    return fail("convert from complex {} to real {} is not supported", str(op(0)), elementTypeName(to));
  return R::retyped(op(0), to);
}

R Inferrer::bitcastConvert() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  ElementType to = declared().elementType();
  if (!declared().isArray() || !isArrayElementType(to))
    return fail("bitcast-convert must produce an array, not {}", str(declared()));
  int inBits = elementTypeInfo(x.elementType()).bitWidth;
  int outBits = elementTypeInfo(to).bitWidth;
  if (inBits <= 0 || outBits <= 0) return fail("bitcast-convert of {} has no bit width", str(x));
  if (isC(x.elementType()) != isC(to) && inBits != outBits)
    return fail("bitcast-convert between complex and real types of different widths");
  std::vector<int64_t> dims = x.dimensions();
  if (inBits > outBits) {
    if (inBits % outBits != 0)
      return fail("bitcast-convert from {} to {}: bit widths do not divide", elementTypeName(x.elementType()),
                  elementTypeName(to));
    dims.push_back(inBits / outBits);
  } else if (inBits < outBits) {
    if (outBits % inBits != 0 || dims.empty() || dims.back() != outBits / inBits)
      return fail("bitcast-convert from {} to {} needs a last operand dimension of {}", str(x),
                  elementTypeName(to), outBits % inBits == 0 ? outBits / inBits : 0);
    dims.pop_back();
  }
  return Shape(to, std::move(dims));
}

R Inferrer::stochasticConvert() {
  if (!array(0) || !array(1)) return std::nullopt;
  const Shape& x = op(0);
  const Shape& bits = op(1);
  if (!isF(x.elementType())) return fail("stochastic-convert operand {} must be floating point", str(x));
  if (!isUnsignedIntegerType(bits.elementType()) ||
      elementTypeInfo(bits.elementType()).bitWidth != elementTypeInfo(x.elementType()).bitWidth)
    return fail("stochastic-convert random bits {} must be unsigned integers as wide as {}", str(bits),
                elementTypeName(x.elementType()));
  if (!sameDims(x, bits))
    return fail("stochastic-convert operand {} and random bits {} must have the same dimensions", str(x),
                str(bits));
  return R::retyped(x, declared().elementType());
}

R Inferrer::bitcast() {
  if (!declared().isArray() || !op(0).isArray()) return declared();
  if (opts_.allowBitcastToHaveDifferentSize || op(0).isDynamic() || declared().isDynamic()) return declared();
  auto bits = [](const Shape& s) -> std::optional<__int128> {
    auto n = s.elementCount();
    if (!n) return std::nullopt;
    return static_cast<__int128>(*n) * elementTypeInfo(s.elementType()).bitWidth;
  };
  auto in = bits(op(0)), out = bits(declared());
  if (in && out && *in != *out)
    return fail("bitcast from {} to {} changes the data size", str(op(0)), str(declared()));
  return declared();
}

// ---------------------------------------------------------------- shape manipulation

R Inferrer::broadcast() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  const Shape& out = declared();
  if (!out.isArray()) return fail("broadcast must produce an array, not {}", str(out));
  const auto& dims = a_.dimensions;
  if (static_cast<int64_t>(dims.size()) != x.rank())
    return fail("broadcast dimensions {} must have one entry per operand dimension (rank {})", ints(dims),
                x.rank());
  if (!dimList(dims, out.rank(), opts_.verifyBroadcastDimensionsOrder, "broadcast dimensions"))
    return std::nullopt;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t d = dims[static_cast<size_t>(i)];
    if (out.dimension(d) != x.dimension(i))
      return fail("broadcast maps operand dimension {} (size {}) to result dimension {} of size {}", i,
                  x.dimension(i), d, out.dimension(d));
  }
  return R::retyped(out, x.elementType());
}

R Inferrer::reshape() {
  if (!array(0)) return std::nullopt;
  const Shape& out = declared();
  if (!out.isArray()) return fail("reshape must produce an array, not {}", str(out));
  if (!op(0).isDynamic() && !out.isDynamic()) {
    auto a = op(0).elementCount(), b = out.elementCount();
    if (a && b && *a != *b)
      return fail("reshape from {} to {} changes the element count ({} vs {})", str(op(0)), str(out), *a, *b);
  }
  if (a_.inferredDimension != -1 && (a_.inferredDimension < 0 || a_.inferredDimension >= out.rank()))
    return fail("inferred_dimension {} is out of range for rank {}", a_.inferredDimension, out.rank());
  return R::retyped(out, op(0).elementType());
}

R Inferrer::dynamicReshape() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  const Shape& out = declared();
  if (!out.isArray()) return fail("dynamic-reshape must produce an array, not {}", str(out));
  if (count() != out.rank() + 1)
    return fail("dynamic-reshape to rank {} needs {} size operands, but has {}", out.rank(), out.rank(),
                count() - 1);
  for (int64_t i = 1; i < count(); ++i)
    if (!isScalarOf(op(i), ElementType::S32)) return fail("dynamic-reshape size operand {} must be s32[]", i);
  auto a = op(0).elementCount(), b = out.elementCount();
  if (a && b && *a != *b)
    return fail("dynamic-reshape from {} to {} changes the element count", str(op(0)), str(out));
  return Shape(op(0).elementType(), out.dimensions());
}

R Inferrer::transpose() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  const auto& perm = a_.dimensions;
  if (static_cast<int64_t>(perm.size()) != x.rank() || !dimList(perm, x.rank(), false, "transpose dimensions")) {
    if (static_cast<int64_t>(perm.size()) != x.rank())
      fail("transpose dimensions {} are not a permutation of the operand rank {}", ints(perm), x.rank());
    return std::nullopt;
  }
  std::vector<int64_t> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = x.dimension(perm[i]);
  return Shape(x.elementType(), std::move(dims));
}

R Inferrer::slice() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  const auto& s = a_.slice;
  if (static_cast<int64_t>(s.size()) != x.rank())
    return fail("slice has {} dimensions but the operand has rank {}", s.size(), x.rank());
  std::vector<int64_t> dims(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const SliceDimension& d = s[i];
    int64_t bound = x.dimension(static_cast<int64_t>(i));
    if (d.stride <= 0) return fail("slice stride {} in dimension {} must be positive", d.stride, i);
    if (d.start < 0 || d.start > d.limit || d.limit > bound)
      return fail("slice [{}:{}] in dimension {} is out of bounds for size {}", d.start, d.limit, i, bound);
    dims[i] = ceilDiv(d.limit - d.start, d.stride);
  }
  return Shape(x.elementType(), std::move(dims));
}

R Inferrer::dynamicSliceIndices(int64_t first, int64_t rank) {
  int64_t n = count() - first;
  if (n == 1 && op(first).isArray() && op(first).rank() == 1) {
    // Legacy form: one rank-1 index vector.
    const Shape& v = op(first);
    if (!isI(v.elementType())) return fail("{} start indices {} must be integral", opName(), str(v));
    if (v.dimension(0) != rank)
      return fail("{} start index vector {} must have {} elements", opName(), str(v), rank);
    return Shape();
  }
  if (n != rank)
    return fail("{} of a rank-{} operand needs {} start indices, but has {}", opName(), rank, rank, n);
  for (int64_t i = first; i < count(); ++i) {
    const Shape& s = op(i);
    if (!s.isScalar() || !isI(s.elementType()))
      return fail("{} start index (operand {}) must be an integral scalar, but is {}", opName(), i, str(s));
    if (s.elementType() != op(first).elementType())
      return fail("{} start indices must all have the same type ({} vs {})", opName(), str(op(first)), str(s));
  }
  return Shape();
}

R Inferrer::dynamicSlice() {
  if (!atLeast(2) || !array(0)) return std::nullopt;
  const Shape& x = op(0);
  if (!dynamicSliceIndices(1, x.rank())) return std::nullopt;
  const auto& sizes = a_.dynamicSliceSizes;
  if (static_cast<int64_t>(sizes.size()) != x.rank())
    return fail("dynamic_slice_sizes {} must have one entry per operand dimension (rank {})", ints(sizes),
                x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t s = sizes[static_cast<size_t>(i)];
    if (s < 0 || s > x.dimension(i))
      return fail("dynamic slice size {} in dimension {} is out of bounds for size {}", s, i, x.dimension(i));
  }
  return Shape(x.elementType(), sizes);
}

R Inferrer::dynamicUpdateSlice() {
  if (!atLeast(3) || !array(0) || !array(1)) return std::nullopt;
  const Shape& x = op(0);
  const Shape& u = op(1);
  if (!dynamicSliceIndices(2, x.rank())) return std::nullopt;
  if (u.rank() != x.rank())
    return fail("dynamic-update-slice update {} must have the rank of the operand {}", str(u), str(x));
  if (!typeOk(u.elementType(), x.elementType()))
    return fail("dynamic-update-slice update {} must have the element type of the operand {}", str(u), str(x));
  for (int64_t i = 0; i < x.rank(); ++i)
    if (u.dimension(i) < 0 || u.dimension(i) > x.dimension(i))
      return fail("dynamic-update-slice update {} does not fit in the operand {} (dimension {})", str(u), str(x),
                  i);
  return x;
}

R Inferrer::concatenate() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  if (a_.dimensions.size() != 1)
    return fail("concatenate needs exactly one dimension, has {}", ints(a_.dimensions));
  const Shape& first = op(0);
  int64_t d = a_.dimensions[0];
  if (!dimIndex(d, first.rank(), "concatenate dimension")) return std::nullopt;
  std::vector<int64_t> dims = first.dimensions();
  for (int64_t i = 1; i < count(); ++i) {
    const Shape& s = op(i);
    if (s.rank() != first.rank() || !typeOk(s.elementType(), first.elementType()))
      return fail("concatenate operand {} {} does not match operand 0 {}", i, str(s), str(first));
    for (int64_t k = 0; k < s.rank(); ++k)
      if (k != d && s.dimension(k) != first.dimension(k))
        return fail("concatenate operand {} {} differs from operand 0 {} in dimension {}", i, str(s),
                    str(first), k);
    if (__builtin_add_overflow(dims[static_cast<size_t>(d)], s.dimension(d), &dims[static_cast<size_t>(d)]))
      return fail("concatenate result size overflows");
  }
  return Shape(first.elementType(), std::move(dims));
}

R Inferrer::pad() {
  if (!array(0) || !array(1)) return std::nullopt;
  const Shape& x = op(0);
  const Shape& v = op(1);
  if (!v.isScalar() || !typeOk(v.elementType(), x.elementType()))
    return fail("pad value {} must be a scalar of the operand's element type {}", str(v),
                elementTypeName(x.elementType()));
  const auto& p = a_.padding;
  if (static_cast<int64_t>(p.size()) != x.rank())
    return fail("padding has {} dimensions but the operand has rank {}", p.size(), x.rank());
  std::vector<int64_t> dims(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    int64_t d = x.dimension(static_cast<int64_t>(i));
    if (p[i].interior < 0) return fail("interior padding {} in dimension {} is negative", p[i].interior, i);
    __int128 r = static_cast<__int128>(d) + p[i].low + p[i].high +
                 static_cast<__int128>(std::max<int64_t>(d - 1, 0)) * p[i].interior;
    if (r < 0) return fail("padding makes dimension {} negative ({})", i, static_cast<int64_t>(r));
    if (r > std::numeric_limits<int64_t>::max()) return fail("padded dimension {} overflows", i);
    dims[i] = static_cast<int64_t>(r);
  }
  return Shape(x.elementType(), std::move(dims));
}

R Inferrer::reverse() {
  if (!array(0)) return std::nullopt;
  if (!dimList(a_.dimensions, op(0).rank(), false, "reverse dimensions")) return std::nullopt;
  return op(0);
}

R Inferrer::iota() {
  const Shape& s = declared();
  if (!s.isArray()) return fail("iota must produce an array, not {}", str(s));
  if (s.rank() == 0) return fail("iota does not support scalars");
  if (!dimIndex(a_.iotaDimension, s.rank(), "iota_dimension")) return std::nullopt;
  ElementType t = s.elementType();
  if (!isI(t) && !isF(t) && !isC(t)) return fail("iota of {} is not supported", elementTypeName(t));
  return s;
}

// ---------------------------------------------------------------- reductions

R Inferrer::reduce() {
  int64_t n = count();
  if (n < 2 || n % 2)
    return fail("reduce expects inputs followed by as many init values, but has {} operands", n);
  if (!allArrays()) return std::nullopt;
  int64_t k = n / 2;
  const Shape& first = op(0);
  std::vector<ElementType> inTypes, initTypes;
  for (int64_t i = 0; i < k; ++i) {
    if (!sameDims(op(i), first))
      return fail("reduce inputs {} and {} must have the same dimensions", str(first), str(op(i)));
    inTypes.push_back(op(i).elementType());
  }
  for (int64_t i = k; i < n; ++i) {
    if (!scalar(i, "reduce init value")) return std::nullopt;
    initTypes.push_back(op(i).elementType());
  }
  if (!dimList(a_.dimensions, first.rank(), false, "reduce dimensions")) return std::nullopt;
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& sig = sigs_.get(c);
  if (!sig.dense || !sig.root) return declared();
  auto acc = reducer(c, "reducer", initTypes, inTypes);
  if (!acc) return std::nullopt;
  std::vector<bool> reduced(static_cast<size_t>(first.rank()), false);
  for (int64_t d : a_.dimensions) reduced[static_cast<size_t>(d)] = true;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < first.rank(); ++i)
    if (!reduced[static_cast<size_t>(i)]) dims.push_back(first.dimension(i));
  if (k == 1) return Shape((*acc)[0], std::move(dims));
  std::vector<Shape> elems;
  for (int64_t i = 0; i < k; ++i) elems.emplace_back((*acc)[static_cast<size_t>(i)], dims);
  return Shape::tuple(std::move(elems));
}

R Inferrer::reduceWindow() {
  int64_t n = count();
  if (n < 2 || n % 2)
    return fail("reduce-window expects inputs followed by as many init values, but has {} operands", n);
  if (!allArrays()) return std::nullopt;
  int64_t k = n / 2;
  const Shape& first = op(0);
  std::vector<ElementType> inTypes, initTypes;
  for (int64_t i = 0; i < k; ++i) {
    if (!sameDims(op(i), first))
      return fail("reduce-window inputs {} and {} must have the same dimensions", str(first), str(op(i)));
    inTypes.push_back(op(i).elementType());
  }
  for (int64_t i = k; i < n; ++i) {
    if (!scalar(i, "reduce-window init value")) return std::nullopt;
    initTypes.push_back(op(i).elementType());
  }
  R win = windowShape(first, a_.window.value_or(Window{}), first.elementType(), "input");
  if (!win) return std::nullopt;
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& sig = sigs_.get(c);
  if (!sig.dense || !sig.root) return declared();
  auto acc = reducer(c, "reducer", initTypes, inTypes);
  if (!acc) return std::nullopt;
  if (k == 1) return Shape((*acc)[0], win->dimensions());
  std::vector<Shape> elems;
  for (int64_t i = 0; i < k; ++i) elems.emplace_back((*acc)[static_cast<size_t>(i)], win->dimensions());
  return Shape::tuple(std::move(elems));
}

R Inferrer::selectAndScatter() {
  if (!allArrays()) return std::nullopt;
  const Shape& x = op(0);
  const Shape& source = op(1);
  if (!scalar(2, "select-and-scatter init value")) return std::nullopt;
  const Computation* sel = callee(0, "select");
  const Computation* sct = callee(1, "scatter");
  if (!sel || !sct) return std::nullopt;
  R win = windowShape(x, a_.window.value_or(Window{}), x.elementType(), "operand");
  if (!win) return std::nullopt;
  if (!compatibleIgnoringFp(source, *win))
    return fail("select-and-scatter source {} must have the windowed operand shape {}", str(source), str(*win));
  const verify_detail::Signature& ssel = sigs_.get(sel);
  if (ssel.dense && ssel.root) {
    const verify_detail::Signature* sig = signature(sel, "select", 2);
    if (!sig) return std::nullopt;
    if (!scalarParam(*sig, sel, "select", 0, x.elementType()) ||
        !scalarParam(*sig, sel, "select", 1, x.elementType()))
      return std::nullopt;
    if (!isScalarOf(sig->root->shape(), ElementType::Pred))
      return fail("select computation '{}' must return pred[], but returns {}", sel->name(),
                  str(sig->root->shape()));
  }
  const verify_detail::Signature& ss = sigs_.get(sct);
  if (ss.dense && ss.root && !reducer(sct, "scatter", {op(2).elementType()}, {source.elementType()}))
    return std::nullopt;
  return x;
}

// ---------------------------------------------------------------- dot and convolution

R Inferrer::dotDims(const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& d, bool checkContracting,
                    std::vector<int64_t>* out) {
  if (d.lhsBatchDimensions.size() != d.rhsBatchDimensions.size())
    return fail("dot has {} lhs batch dimensions but {} rhs batch dimensions", d.lhsBatchDimensions.size(),
                d.rhsBatchDimensions.size());
  if (d.lhsContractingDimensions.size() != d.rhsContractingDimensions.size())
    return fail("dot has {} lhs contracting dimensions but {} rhs contracting dimensions",
                d.lhsContractingDimensions.size(), d.rhsContractingDimensions.size());
  std::vector<int64_t> l = d.lhsBatchDimensions, r = d.rhsBatchDimensions;
  l.insert(l.end(), d.lhsContractingDimensions.begin(), d.lhsContractingDimensions.end());
  r.insert(r.end(), d.rhsContractingDimensions.begin(), d.rhsContractingDimensions.end());
  if (!dimList(l, lhs.rank(), false, "lhs batch and contracting dimensions") ||
      !dimList(r, rhs.rank(), false, "rhs batch and contracting dimensions"))
    return std::nullopt;
  for (size_t i = 0; i < d.lhsBatchDimensions.size(); ++i) {
    int64_t a = d.lhsBatchDimensions[i], b = d.rhsBatchDimensions[i];
    if (lhs.dimension(a) != rhs.dimension(b))
      return fail("dot batch dimension sizes differ: lhs dimension {} has size {}, rhs dimension {} has size {}",
                  a, lhs.dimension(a), b, rhs.dimension(b));
  }
  if (checkContracting) {
    for (size_t i = 0; i < d.lhsContractingDimensions.size(); ++i) {
      int64_t a = d.lhsContractingDimensions[i], b = d.rhsContractingDimensions[i];
      if (lhs.dimension(a) != rhs.dimension(b) && !lhs.isDynamicDimension(a) && !rhs.isDynamicDimension(b))
        return fail(
            "dot contracting dimension sizes differ: lhs dimension {} has size {}, rhs dimension {} has size {}", a,
            lhs.dimension(a), b, rhs.dimension(b));
    }
  }
  std::vector<bool> lUsed(static_cast<size_t>(lhs.rank()), false), rUsed(static_cast<size_t>(rhs.rank()), false);
  for (int64_t x : l) lUsed[static_cast<size_t>(x)] = true;
  for (int64_t x : r) rUsed[static_cast<size_t>(x)] = true;
  for (int64_t x : d.lhsBatchDimensions) out->push_back(lhs.dimension(x));
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (!lUsed[static_cast<size_t>(i)]) out->push_back(lhs.dimension(i));
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!rUsed[static_cast<size_t>(i)]) out->push_back(rhs.dimension(i));
  return Shape();
}

R Inferrer::dot() {
  bool sparse = a_.sparsity.has_value();
  if (sparse ? (count() < 3 || count() > 4) : count() != 2)
    return fail("dot expects {} operands, but has {}", sparse ? "3 or 4" : "2", count());
  if (!allArrays()) return std::nullopt;
  if (!declared().isArray()) return fail("dot must produce an array, not {}", str(declared()));
  std::vector<int64_t> dims;
  if (!dotDims(op(0), op(1), *a_.dotDims, !sparse, &dims)) return std::nullopt;
  return Shape(declared().elementType(), std::move(dims));
}

R Inferrer::raggedDot() {
  if (!allArrays()) return std::nullopt;
  if (!declared().isArray()) return fail("ragged-dot must produce an array, not {}", str(declared()));
  const Shape& lhs = op(0);
  const Shape& rhs = op(1);
  const Shape& groups = op(2);
  const auto& rd = *a_.raggedDotDims;
  if (rd.lhsRaggedDimensions.size() != 1)
    return fail("ragged-dot needs exactly one lhs ragged dimension, has {}", ints(rd.lhsRaggedDimensions));
  if (rd.rhsGroupDimensions.size() > 1)
    return fail("ragged-dot takes at most one rhs group dimension, has {}", ints(rd.rhsGroupDimensions));
  if (!isI(groups.elementType()) || groups.rank() < 1)
    return fail("ragged-dot group sizes {} must be an integral array", str(groups));
  int64_t ragged = rd.lhsRaggedDimensions[0];
  if (!dimIndex(ragged, lhs.rank(), "lhs ragged dimension")) return std::nullopt;
  const auto& d = *a_.dotDims;
  auto in = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  DotDimensionNumbers dd = d;
  bool contracting = in(d.lhsContractingDimensions, ragged);
  bool batch = in(d.lhsBatchDimensions, ragged);
  if (!contracting && !batch) {
    if (rd.rhsGroupDimensions.empty())
      return fail("ragged-dot with a non-contracting ragged dimension needs an rhs group dimension");
    int64_t g = rd.rhsGroupDimensions[0];
    if (!dimIndex(g, rhs.rank(), "rhs group dimension")) return std::nullopt;
    if (in(d.rhsBatchDimensions, g) || in(d.rhsContractingDimensions, g))
      return fail("ragged-dot rhs group dimension {} must not be a batch or contracting dimension", g);
    // Treat the group dimension as consumed: append it to both contracting lists
    // through a dummy lhs-free view is not possible, so drop it from the rhs.
    std::vector<int64_t> dims;
    Shape rhsNoGroup = rhs;
    std::vector<int64_t> rdims = rhs.dimensions();
    rdims.erase(rdims.begin() + g);
    rhsNoGroup.setDimensions(rdims);
    auto fix = [g](std::vector<int64_t>& v) {
      for (int64_t& x : v)
        if (x > g) --x;
    };
    fix(dd.rhsBatchDimensions);
    fix(dd.rhsContractingDimensions);
    if (!dotDims(lhs, rhsNoGroup, dd, true, &dims)) return std::nullopt;
    return Shape(declared().elementType(), std::move(dims));
  }
  std::vector<int64_t> dims;
  if (contracting) dims.push_back(groups.dimension(groups.rank() - 1));
  if (!dotDims(lhs, rhs, dd, true, &dims)) return std::nullopt;
  return Shape(declared().elementType(), std::move(dims));
}

R Inferrer::scaledDot() {
  if (!allArrays()) return std::nullopt;
  if (!declared().isArray()) return fail("scaled-dot must produce an array, not {}", str(declared()));
  std::vector<int64_t> dims;
  if (!dotDims(op(0), op(2), *a_.dotDims, true, &dims)) return std::nullopt;
  return Shape(declared().elementType(), std::move(dims));
}

R Inferrer::convolution() {
  if (!allArrays()) return std::nullopt;
  if (!declared().isArray()) return fail("convolution must produce an array, not {}", str(declared()));
  const Shape& in = op(0);
  const Shape& k = op(1);
  if (!a_.convDims) return fail("convolution needs dim_labels");
  const ConvolutionDimensionNumbers& d = *a_.convDims;
  size_t ns = d.inputSpatialDimensions.size();
  if (d.kernelSpatialDimensions.size() != ns || d.outputSpatialDimensions.size() != ns)
    return fail("dim_labels {} give different spatial dimension counts for input, kernel and output",
                d.toString());
  Window w = a_.window.value_or(Window{});
  if (w.dimensions.size() != ns)
    return fail("window has {} dimensions but the convolution has {} spatial dimensions", w.dimensions.size(), ns);
  if (in.rank() != k.rank())
    return fail("convolution input {} and kernel {} must have the same rank", str(in), str(k));
  int64_t rank = static_cast<int64_t>(ns) + 2;
  if (in.rank() != rank)
    return fail("convolution operands of rank {} do not match dim_labels {} ({} spatial dimensions)", in.rank(),
                d.toString(), ns);
  std::vector<int64_t> id{d.inputBatchDimension, d.inputFeatureDimension};
  id.insert(id.end(), d.inputSpatialDimensions.begin(), d.inputSpatialDimensions.end());
  std::vector<int64_t> kd{d.kernelInputFeatureDimension, d.kernelOutputFeatureDimension};
  kd.insert(kd.end(), d.kernelSpatialDimensions.begin(), d.kernelSpatialDimensions.end());
  std::vector<int64_t> od{d.outputBatchDimension, d.outputFeatureDimension};
  od.insert(od.end(), d.outputSpatialDimensions.begin(), d.outputSpatialDimensions.end());
  if (!dimList(id, rank, false, "convolution input dimensions") ||
      !dimList(kd, rank, false, "convolution kernel dimensions") ||
      !dimList(od, rank, false, "convolution output dimensions"))
    return std::nullopt;
  int64_t g = a_.featureGroupCount, b = a_.batchGroupCount;
  if (g <= 0 || b <= 0) return fail("feature_group_count {} and batch_group_count {} must be positive", g, b);
  if (g > 1 && b > 1) return fail("feature_group_count and batch_group_count cannot both be greater than 1");
  int64_t inF = in.dimension(d.inputFeatureDimension), batch = in.dimension(d.inputBatchDimension);
  int64_t kIn = k.dimension(d.kernelInputFeatureDimension), kOut = k.dimension(d.kernelOutputFeatureDimension);
  if (inF % g != 0 || inF / g != kIn)
    return fail("convolution input feature size {} must equal the kernel input feature size {} times "
                "feature_group_count {}",
                inF, kIn, g);
  if (kOut % g != 0)
    return fail("kernel output feature size {} must be a multiple of feature_group_count {}", kOut, g);
  if (batch % b != 0) return fail("input batch size {} must be a multiple of batch_group_count {}", batch, b);
  if (kOut % b != 0)
    return fail("kernel output feature size {} must be a multiple of batch_group_count {}", kOut, b);
  std::vector<int64_t> spatial(ns);
  for (size_t i = 0; i < ns; ++i) {
    int64_t ks = k.dimension(d.kernelSpatialDimensions[i]);
    if (w.dimensions[i].size != ks)
      return fail("window size {} in spatial dimension {} does not match the kernel size {}", w.dimensions[i].size,
                  i, ks);
    spatial[i] = in.dimension(d.inputSpatialDimensions[i]);
  }
  R win = windowShape(Shape(in.elementType(), spatial), w, in.elementType(), "input");
  if (!win) return std::nullopt;
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  dims[static_cast<size_t>(d.outputBatchDimension)] = batch / b;
  dims[static_cast<size_t>(d.outputFeatureDimension)] = kOut;
  for (size_t i = 0; i < ns; ++i) dims[static_cast<size_t>(d.outputSpatialDimensions[i])] = win->dimension(i);
  return Shape(declared().elementType(), std::move(dims));
}

// ---------------------------------------------------------------- gather / scatter

R Inferrer::gather() {
  if (!allArrays()) return std::nullopt;
  const Shape& x = op(0);
  const Shape& idx = op(1);
  const GatherDimensionNumbers& d = *a_.gatherDims;
  const auto& sizes = a_.gatherSliceSizes;
  if (!isI(idx.elementType())) return fail("gather indices {} must be integral", str(idx));
  int64_t ir = idx.rank(), xr = x.rank();
  int64_t ivd = d.indexVectorDim;
  if (ivd < 0 || ivd > ir) return fail("index_vector_dim {} is out of range for indices of rank {}", ivd, ir);
  int64_t ivSize = ivd == ir ? 1 : idx.dimension(ivd);
  int64_t batchCount = ir - (ivd < ir ? 1 : 0);
  int64_t outRank = static_cast<int64_t>(d.offsetDims.size()) + batchCount;
  if (!dimList(d.offsetDims, outRank, true, "offset_dims") ||
      !dimList(d.collapsedSliceDims, xr, true, "collapsed_slice_dims") ||
      !dimList(d.operandBatchingDims, xr, true, "operand_batching_dims") ||
      !dimList(d.startIndexMap, xr, false, "start_index_map") ||
      !dimList(d.startIndicesBatchingDims, ir, false, "start_indices_batching_dims"))
    return std::nullopt;
  auto in = [](const std::vector<int64_t>& v, int64_t e) { return std::find(v.begin(), v.end(), e) != v.end(); };
  for (int64_t c : d.collapsedSliceDims)
    if (in(d.operandBatchingDims, c))
      return fail("gather dimension {} is both collapsed and an operand batching dimension", c);
  for (int64_t m : d.startIndexMap)
    if (in(d.operandBatchingDims, m))
      return fail("start_index_map entry {} is an operand batching dimension", m);
  if (static_cast<int64_t>(d.startIndexMap.size()) != ivSize)
    return fail("start_index_map {} must have one entry per index vector element ({})", ints(d.startIndexMap),
                ivSize);
  if (in(d.startIndicesBatchingDims, ivd))
    return fail("start_indices_batching_dims {} must not contain index_vector_dim {}",
                ints(d.startIndicesBatchingDims), ivd);
  if (d.startIndicesBatchingDims.size() != d.operandBatchingDims.size())
    return fail("operand_batching_dims {} and start_indices_batching_dims {} must have the same length",
                ints(d.operandBatchingDims), ints(d.startIndicesBatchingDims));
  for (size_t i = 0; i < d.operandBatchingDims.size(); ++i)
    if (x.dimension(d.operandBatchingDims[i]) != idx.dimension(d.startIndicesBatchingDims[i]))
      return fail("operand batching dimension {} (size {}) and indices batching dimension {} (size {}) differ",
                  d.operandBatchingDims[i], x.dimension(d.operandBatchingDims[i]), d.startIndicesBatchingDims[i],
                  idx.dimension(d.startIndicesBatchingDims[i]));
  if (static_cast<int64_t>(sizes.size()) != xr)
    return fail("slice_sizes {} must have one entry per operand dimension (rank {})", ints(sizes), xr);
  for (int64_t i = 0; i < xr; ++i) {
    int64_t s = sizes[static_cast<size_t>(i)];
    if (s < 0 || s > x.dimension(i))
      return fail("slice size {} in dimension {} is out of bounds for size {}", s, i, x.dimension(i));
  }
  for (int64_t c : d.collapsedSliceDims)
    if (sizes[static_cast<size_t>(c)] > 1)
      return fail("collapsed slice dimension {} must have slice size 0 or 1, not {}", c, sizes[static_cast<size_t>(c)]);
  for (int64_t c : d.operandBatchingDims)
    if (sizes[static_cast<size_t>(c)] > 1)
      return fail("operand batching dimension {} must have slice size 0 or 1, not {}", c,
                  sizes[static_cast<size_t>(c)]);
  if (static_cast<int64_t>(d.offsetDims.size() + d.collapsedSliceDims.size() + d.operandBatchingDims.size()) != xr)
    return fail("offset_dims {}, collapsed_slice_dims {} and operand_batching_dims {} must account for the "
                "operand rank {}",
                ints(d.offsetDims), ints(d.collapsedSliceDims), ints(d.operandBatchingDims), xr);
  std::vector<int64_t> dims(static_cast<size_t>(outRank));
  int64_t nextSlice = 0, nextBatch = 0;
  for (int64_t i = 0; i < outRank; ++i) {
    if (in(d.offsetDims, i)) {
      while (in(d.collapsedSliceDims, nextSlice) || in(d.operandBatchingDims, nextSlice)) ++nextSlice;
      dims[static_cast<size_t>(i)] = sizes[static_cast<size_t>(nextSlice++)];
    } else {
      if (nextBatch == ivd) ++nextBatch;
      dims[static_cast<size_t>(i)] = idx.dimension(nextBatch++);
    }
  }
  return Shape(x.elementType(), std::move(dims));
}

R Inferrer::scatter() {
  int64_t n = count();
  if (n < 3 || n % 2 == 0)
    return fail("scatter expects N operands, the indices and N updates (an odd count of at least 3), but has {}",
                n);
  if (!allArrays()) return std::nullopt;
  int64_t k = (n - 1) / 2;
  const Shape& x = op(0);
  const Shape& idx = op(k);
  const ScatterDimensionNumbers& d = *a_.scatterDims;
  if (!isI(idx.elementType())) return fail("scatter indices {} must be integral", str(idx));
  for (int64_t i = 1; i < k; ++i)
    if (!sameDims(op(i), x)) return fail("scatter operands {} and {} must have the same dimensions", str(x), str(op(i)));
  int64_t ir = idx.rank(), xr = x.rank();
  int64_t ivd = d.indexVectorDim;
  if (ivd < 0 || ivd > ir) return fail("index_vector_dim {} is out of range for indices of rank {}", ivd, ir);
  int64_t ivSize = ivd == ir ? 1 : idx.dimension(ivd);
  auto in = [](const std::vector<int64_t>& v, int64_t e) { return std::find(v.begin(), v.end(), e) != v.end(); };
  if (!dimList(d.insertedWindowDims, xr, true, "inserted_window_dims") ||
      !dimList(d.inputBatchingDims, xr, true, "input_batching_dims") ||
      !dimList(d.scatterDimsToOperandDims, xr, false, "scatter_dims_to_operand_dims") ||
      !dimList(d.scatterIndicesBatchingDims, ir, false, "scatter_indices_batching_dims"))
    return std::nullopt;
  for (int64_t c : d.insertedWindowDims)
    if (in(d.inputBatchingDims, c))
      return fail("scatter dimension {} is both an inserted window and an input batching dimension", c);
  for (int64_t m : d.scatterDimsToOperandDims)
    if (in(d.inputBatchingDims, m))
      return fail("scatter_dims_to_operand_dims entry {} is an input batching dimension", m);
  if (static_cast<int64_t>(d.scatterDimsToOperandDims.size()) != ivSize)
    return fail("scatter_dims_to_operand_dims {} must have one entry per index vector element ({})",
                ints(d.scatterDimsToOperandDims), ivSize);
  if (in(d.scatterIndicesBatchingDims, ivd))
    return fail("scatter_indices_batching_dims {} must not contain index_vector_dim {}",
                ints(d.scatterIndicesBatchingDims), ivd);
  if (d.scatterIndicesBatchingDims.size() != d.inputBatchingDims.size())
    return fail("input_batching_dims {} and scatter_indices_batching_dims {} must have the same length",
                ints(d.inputBatchingDims), ints(d.scatterIndicesBatchingDims));
  for (size_t i = 0; i < d.inputBatchingDims.size(); ++i)
    if (x.dimension(d.inputBatchingDims[i]) != idx.dimension(d.scatterIndicesBatchingDims[i]))
      return fail("input batching dimension {} and indices batching dimension {} have different sizes",
                  d.inputBatchingDims[i], d.scatterIndicesBatchingDims[i]);
  if (static_cast<int64_t>(d.updateWindowDims.size() + d.insertedWindowDims.size() + d.inputBatchingDims.size()) !=
      xr)
    return fail("update_window_dims {}, inserted_window_dims {} and input_batching_dims {} must account for the "
                "operand rank {}",
                ints(d.updateWindowDims), ints(d.insertedWindowDims), ints(d.inputBatchingDims), xr);
  int64_t scatterRank = ir - (ivd < ir ? 1 : 0);
  std::vector<ElementType> opTypes, updTypes;
  for (int64_t u = 0; u < k; ++u) {
    const Shape& upd = op(k + 1 + u);
    opTypes.push_back(op(u).elementType());
    updTypes.push_back(upd.elementType());
    if (!sameTypeFp(upd.elementType(), op(u).elementType()))
      return fail("scatter update {} must have the element type of operand {}", str(upd), str(op(u)));
    int64_t expectRank = static_cast<int64_t>(d.updateWindowDims.size()) + scatterRank;
    if (upd.rank() != expectRank)
      return fail("scatter update {} must have rank {} (update_window_dims {} plus {} scatter dimensions)",
                  str(upd), expectRank, ints(d.updateWindowDims), scatterRank);
    if (!dimList(d.updateWindowDims, upd.rank(), true, "update_window_dims")) return std::nullopt;
    int64_t od = 0;
    for (int64_t w : d.updateWindowDims) {
      while (in(d.insertedWindowDims, od) || in(d.inputBatchingDims, od)) ++od;
      if (upd.dimension(w) > x.dimension(od))
        return fail("scatter update window dimension {} (size {}) exceeds operand dimension {} (size {})", w,
                    upd.dimension(w), od, x.dimension(od));
      ++od;
    }
    int64_t idim = 0;
    for (int64_t i = 0; i < upd.rank(); ++i) {
      if (in(d.updateWindowDims, i)) continue;
      if (idim == ivd) ++idim;
      if (upd.dimension(i) != idx.dimension(idim))
        return fail("scatter update dimension {} (size {}) does not match indices dimension {} (size {})", i,
                    upd.dimension(i), idim, idx.dimension(idim));
      ++idim;
    }
  }
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& sig = sigs_.get(c);
  if (sig.dense && sig.root && !reducer(c, "update", opTypes, updTypes)) return std::nullopt;
  if (k == 1) return x;
  std::vector<Shape> elems;
  for (int64_t i = 0; i < k; ++i) elems.push_back(op(i));
  return Shape::tuple(std::move(elems));
}

// ---------------------------------------------------------------- control flow and calls

R Inferrer::sort() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  const Shape& first = op(0);
  for (int64_t i = 1; i < count(); ++i)
    if (!sameDims(op(i), first))
      return fail("sort operands {} and {} must have the same dimensions", str(first), str(op(i)));
  if (a_.dimensions.size() != 1) return fail("sort needs exactly one dimension, has {}", ints(a_.dimensions));
  if (!dimIndex(a_.dimensions[0], first.rank(), "sort dimension")) return std::nullopt;
  const Computation* c = callee(0, "comparator");
  if (!c) return std::nullopt;
  const verify_detail::Signature& s = sigs_.get(c);
  if (s.dense && s.root) {
    const verify_detail::Signature* sig = signature(c, "comparator", 2 * count());
    if (!sig) return std::nullopt;
    for (int64_t i = 0; i < 2 * count(); ++i) {
      const Shape& p = sig->params[static_cast<size_t>(i)]->shape();
      ElementType t = op(i / 2).elementType();
      if (!p.isScalar() || !sameTypeFp(p.elementType(), t))
        return fail("parameter {} of comparator '{}' must be {}[], but is {}", i, c->name(), elementTypeName(t),
                    str(p));
    }
    if (!isScalarOf(sig->root->shape(), ElementType::Pred))
      return fail("comparator '{}' must return pred[], but returns {}", c->name(), str(sig->root->shape()));
  }
  if (count() == 1) return first;
  std::vector<Shape> elems;
  for (int64_t i = 0; i < count(); ++i) elems.push_back(op(i));
  return Shape::tuple(std::move(elems));
}

R Inferrer::whileLoop() {
  const Computation* cond = callee(0, "condition");
  const Computation* body = callee(1, "body");
  if (!cond || !body) return std::nullopt;
  const Shape& init = op(0);
  auto same = [&](const Shape& a, const Shape& b) { return opts_.layoutSensitive ? a == b : a.compatible(b); };
  const verify_detail::Signature& cs = sigs_.get(cond);
  if (cs.dense && cs.root) {
    if (!signature(cond, "while condition", 1)) return std::nullopt;
    if (!same(cs.params[0]->shape(), init))
      return fail("while condition '{}' takes {} but the loop state is {}", cond->name(),
                  str(cs.params[0]->shape()), str(init));
    if (!isScalarOf(cs.root->shape(), ElementType::Pred))
      return fail("while condition '{}' must return pred[], but returns {}", cond->name(), str(cs.root->shape()));
  }
  const verify_detail::Signature& bs = sigs_.get(body);
  if (!bs.dense || !bs.root) return init;
  if (!signature(body, "while body", 1)) return std::nullopt;
  if (!same(bs.params[0]->shape(), init))
    return fail("while body '{}' takes {} but the loop state is {}", body->name(), str(bs.params[0]->shape()),
                str(init));
  if (!same(bs.root->shape(), init))
    return fail("while body '{}' returns {} but the loop state is {}", body->name(), str(bs.root->shape()),
                str(init));
  return bs.root->shape();
}

R Inferrer::conditional() {
  if (!atLeast(1)) return std::nullopt;
  const Shape& sel = op(0);
  if (!sel.isScalar() || (sel.elementType() != ElementType::Pred && sel.elementType() != ElementType::S32))
    return fail("conditional selector must be pred[] or s32[], but is {}", str(sel));
  int64_t branches = static_cast<int64_t>(inst_.calledComputations().size());
  if (sel.elementType() == ElementType::Pred && branches != 2)
    return fail("conditional with a pred selector needs 2 branch computations, has {}", branches);
  if (branches < 1) return fail("conditional needs at least one branch computation");
  if (count() != branches + 1)
    return fail("conditional with {} branches needs {} operands, but has {}", branches, branches + 1, count());
  auto same = [&](const Shape& a, const Shape& b) { return opts_.layoutSensitive ? a == b : a.compatible(b); };
  const Shape* result = nullptr;
  for (int64_t j = 0; j < branches; ++j) {
    const Computation* c = callee(static_cast<size_t>(j), "branch");
    if (!c) return std::nullopt;
    const verify_detail::Signature& s = sigs_.get(c);
    if (!s.dense || !s.root) continue;
    if (!signature(c, "branch", 1)) return std::nullopt;
    if (!same(s.params[0]->shape(), op(j + 1)))
      return fail("branch {} computation '{}' takes {} but operand {} is {}", j, c->name(),
                  str(s.params[0]->shape()), j + 1, str(op(j + 1)));
    if (!result) {
      result = &s.root->shape();
    } else if (!same(*result, s.root->shape())) {
      return fail("branch {} computation '{}' returns {} but branch 0 returns {}", j, c->name(),
                  str(s.root->shape()), str(*result));
    }
  }
  if (!result) return declared();
  return *result;
}

R Inferrer::call() {
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& s = sigs_.get(c);
  if (!s.dense || !s.root) return declared();
  const char* role = inst_.opcode() == Opcode::Fusion ? "fused" : "called";
  if (!signature(c, role, count())) return std::nullopt;
  for (int64_t i = 0; i < count(); ++i) {
    const Shape& p = s.params[static_cast<size_t>(i)]->shape();
    if (opts_.layoutSensitive ? !(p == op(i)) : !p.compatible(op(i)))
      return fail("operand {} {} does not match parameter {} {} of {} computation '{}'", i, str(op(i)), i, str(p),
                  role, c->name());
  }
  return s.root->shape();
}

R Inferrer::map() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  const Shape& first = op(0);
  for (int64_t i = 1; i < count(); ++i)
    if (!sameDims(op(i), first))
      return fail("map operands {} and {} must have the same dimensions", str(first), str(op(i)));
  for (size_t i = 0; i < a_.dimensions.size(); ++i)
    if (a_.dimensions[i] != static_cast<int64_t>(i) || static_cast<int64_t>(a_.dimensions.size()) != first.rank())
      return fail("map dimensions {} must be {{0..{}}}", ints(a_.dimensions), first.rank() - 1);
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& s = sigs_.get(c);
  if (!s.dense || !s.root) return declared();
  if (!signature(c, "mapped", count())) return std::nullopt;
  for (int64_t i = 0; i < count(); ++i)
    if (!scalarParam(s, c, "mapped", i, op(i).elementType())) return std::nullopt;
  const Shape& root = s.root->shape();
  if (!root.isScalar())
    return fail("mapped computation '{}' must return a scalar, but returns {}", c->name(), str(root));
  return Shape(root.elementType(), first.dimensions());
}

R Inferrer::outputOperandAliasing() {
  for (const OutputOperandAlias& al : a_.outputToOperandAliasing) {
    if (al.operandNumber < 0 || al.operandNumber >= count())
      return fail("output_to_operand_aliasing refers to operand {}, but there are {} operands", al.operandNumber,
                  count());
    const Shape* o = declared().subshape(al.outputIndex);
    const Shape* p = op(al.operandNumber).subshape(al.operandIndex);
    if (!o) return fail("output_to_operand_aliasing output index {} does not exist in {}", ints(al.outputIndex),
                        str(declared()));
    if (!p)
      return fail("output_to_operand_aliasing operand index {} does not exist in operand {} {}",
                  ints(al.operandIndex), al.operandNumber, str(op(al.operandNumber)));
    if (!o->compatible(*p))
      return fail("output_to_operand_aliasing pairs output {} {} with operand {} {} of a different shape",
                  ints(al.outputIndex), str(*o), al.operandNumber, str(*p));
  }
  return Shape();
}

R Inferrer::fusion() {
  if (inst_.calledComputations().size() != 1)
    return fail("fusion must call exactly one computation, calls {}", inst_.calledComputations().size());
  if (!outputOperandAliasing()) return std::nullopt;
  return call();
}

R Inferrer::tuple() {
  std::vector<Shape> elems;
  elems.reserve(static_cast<size_t>(count()));
  for (int64_t i = 0; i < count(); ++i) elems.push_back(op(i));
  return Shape::tuple(std::move(elems));
}

R Inferrer::getTupleElement() {
  const Shape& t = op(0);
  if (!t.isTuple()) return fail("get-tuple-element operand must be a tuple, but has shape {}", str(t));
  if (a_.tupleIndex < 0 || a_.tupleIndex >= t.tupleSize())
    return fail("tuple index {} is out of range for {} ({} elements)", a_.tupleIndex, str(t), t.tupleSize());
  return t.tupleElement(a_.tupleIndex);
}

R Inferrer::customCall() {
  if (!outputOperandAliasing()) return std::nullopt;
  if (a_.operandLayoutConstraints) {
    const auto& c = *a_.operandLayoutConstraints;
    if (static_cast<int64_t>(c.size()) != count())
      return fail("operand_layout_constraints has {} shapes for {} operands", c.size(), count());
    for (int64_t i = 0; i < count(); ++i)
      if (!c[static_cast<size_t>(i)].compatible(op(i)))
        return fail("operand_layout_constraints shape {} does not match operand {} {}",
                    str(c[static_cast<size_t>(i)]), i, str(op(i)));
  }
  return declared();
}

// ---------------------------------------------------------------- collectives

std::optional<GroupMode> Inferrer::groupMode(bool hasGlobalIdsField) {
  bool channel = a_.channelId.has_value();
  if (!hasGlobalIdsField) return channel ? GroupMode::CrossPartition : GroupMode::CrossReplica;
  if (!channel) {
    if (a_.useGlobalDeviceIds) {
      fail("use_global_device_ids=true requires a channel_id");
      return std::nullopt;
    }
    return GroupMode::CrossReplica;
  }
  return a_.useGlobalDeviceIds ? GroupMode::FlattenedId : GroupMode::CrossReplicaAndPartition;
}

namespace {
const ModuleConfig* configOf(const Instruction& inst) {
  const Computation* c = inst.parent();
  const Module* m = c ? c->parent() : nullptr;
  return m ? &m->config() : nullptr;
}
}  // namespace

bool Inferrer::replicaGroups(GroupMode mode, bool uniform) {
  static const std::vector<std::vector<int64_t>> kNone;
  const auto& groups = a_.replicaGroups ? a_.replicaGroups->groups : kNone;
  if (groups.empty()) {
    if (mode == GroupMode::FlattenedId) {
      fail("replica_groups must be given when use_global_device_ids=true");
      return false;
    }
    return true;
  }
  std::vector<int64_t> ids;
  for (const auto& g : groups) {
    if (g.empty()) {
      fail("replica_groups contains an empty group");
      return false;
    }
    if (uniform && g.size() != groups[0].size()) {
      fail("replica groups must all have the same size ({} vs {})", groups[0].size(), g.size());
      return false;
    }
    ids.insert(ids.end(), g.begin(), g.end());
  }
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0 && ids[i] == ids[i - 1]) {
      fail("replica id {} appears more than once in replica_groups", ids[i]);
      return false;
    }
    if (ids[i] != static_cast<int64_t>(i)) {
      fail("replica_groups do not name id {} (they must name 0..{} exactly once)", i, ids.size() - 1);
      return false;
    }
  }
  const ModuleConfig* cfg = configOf(inst_);
  if (!cfg) return true;
  int64_t n = static_cast<int64_t>(ids.size());
  int64_t expected = 1;
  const char* what = "";
  switch (mode) {
    case GroupMode::CrossReplica:
    case GroupMode::CrossReplicaAndPartition: expected = cfg->replicaCount; what = "replicas"; break;
    case GroupMode::CrossPartition: expected = cfg->numPartitions; what = "partitions"; break;
    case GroupMode::FlattenedId: {
      __int128 p = static_cast<__int128>(cfg->replicaCount) * cfg->numPartitions;
      expected = p > std::numeric_limits<int64_t>::max() ? -1 : static_cast<int64_t>(p);
      what = "devices (replica_count * num_partitions)";
      break;
    }
  }
  if (expected != 1 && n != expected) {
    fail("replica_groups name {} ids but the module has {} {}", n, expected, what);
    return false;
  }
  return true;
}

int64_t Inferrer::subgroupSize(GroupMode mode) {
  const ModuleConfig* cfg = configOf(inst_);
  int64_t replicas = cfg ? cfg->replicaCount : 1, partitions = cfg ? cfg->numPartitions : 1;
  const auto* rg = a_.replicaGroups ? &a_.replicaGroups->groups : nullptr;
  int64_t first = rg && !rg->empty() ? static_cast<int64_t>((*rg)[0].size()) : 0;
  switch (mode) {
    case GroupMode::CrossReplica: return first ? first : replicas;
    case GroupMode::CrossReplicaAndPartition: {
      int64_t r;
      if (__builtin_mul_overflow(first ? first : replicas, partitions, &r)) return 1;
      return r;
    }
    case GroupMode::FlattenedId: return first ? first : 1;
    case GroupMode::CrossPartition: return first ? first : partitions;
  }
  return 1;
}

R Inferrer::allReduce(bool start) {
  (void)start;
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  auto mode = groupMode(true);
  if (!mode || !replicaGroups(*mode, false)) return std::nullopt;
  if (a_.channelId && *a_.channelId <= 0) return fail("all-reduce channel_id must be positive, is {}", *a_.channelId);
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& s = sigs_.get(c);
  bool uniformType = true;
  for (int64_t i = 1; i < count(); ++i) uniformType &= op(i).elementType() == op(0).elementType();
  if (s.dense && s.root && uniformType &&
      !reducer(c, "reducer", {op(0).elementType()}, {op(0).elementType()}))
    return std::nullopt;
  if (count() == 1) return op(0);
  return tuple();
}

R Inferrer::allGather(bool start) {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  auto mode = groupMode(true);
  if (!mode || !replicaGroups(*mode, true)) return std::nullopt;
  if (a_.dimensions.size() != 1)
    return fail("{} needs exactly one dimension, has {}", opName(), ints(a_.dimensions));
  int64_t d = a_.dimensions[0];
  if (d < 0) return fail("all-gather dimension {} is negative", d);
  for (int64_t i = 0; i < count(); ++i)
    if (op(i).rank() > 0 && !dimIndex(d, op(i).rank(), "all-gather dimension")) return std::nullopt;
  int64_t subgroup = subgroupSize(*mode);
  // The shard count follows from operand 0 and its declared result (XLA).
  const Shape* out0 = &declared();
  if (start) out0 = declared().isTuple() && declared().tupleSize() >= 2 ? &declared().tupleElement(1) : nullptr;
  if (out0 && count() > 1) out0 = out0->isTuple() && out0->tupleSize() == count() ? &out0->tupleElement(0) : nullptr;
  int64_t shards = subgroup;
  if (out0 && out0->isArray() && op(0).rank() > 0 && d < out0->rank() && op(0).dimension(d) > 0)
    shards = ceilDiv(out0->dimension(d), op(0).dimension(d));
  if (subgroup != 1 && shards != subgroup)
    return fail("{} result implies {} shards but the replica groups have {} participants", opName(), shards,
                subgroup);
  std::vector<Shape> results;
  for (int64_t i = 0; i < count(); ++i) {
    Shape r = op(i);
    if (r.rank() > 0) {
      std::vector<int64_t> dims = r.dimensions();
      if (__builtin_mul_overflow(dims[static_cast<size_t>(d)], shards, &dims[static_cast<size_t>(d)]))
        return fail("all-gather result size overflows");
      r = Shape(r.elementType(), std::move(dims));
    }
    results.push_back(std::move(r));
  }
  Shape result = count() == 1 ? results[0] : Shape::tuple(results);
  if (!start) return result;
  Shape inputs = count() == 1 ? op(0) : tuple().value();
  return Shape::tuple({std::move(inputs), std::move(result)});
}

R Inferrer::reduceScatter() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  auto mode = groupMode(true);
  if (!mode || !replicaGroups(*mode, true)) return std::nullopt;
  if (a_.dimensions.size() != 1)
    return fail("reduce-scatter needs exactly one dimension, has {}", ints(a_.dimensions));
  int64_t d = a_.dimensions[0];
  // Scalar operands pass through unchanged (PyTorch/XLA dumps carry them).
  for (int64_t i = 0; i < count(); ++i)
    if (op(i).rank() > 0 && !dimIndex(d, op(i).rank(), "reduce-scatter dimension")) return std::nullopt;
  int64_t subgroup = subgroupSize(*mode);
  const Shape* out0 = &declared();
  if (count() > 1) out0 = out0->isTuple() && out0->tupleSize() == count() ? &out0->tupleElement(0) : nullptr;
  int64_t shards = subgroup;
  if (out0 && out0->isArray() && op(0).rank() > 0 && d < out0->rank() && out0->dimension(d) > 0)
    shards = ceilDiv(op(0).dimension(d), out0->dimension(d));
  if (subgroup != 1 && shards != subgroup)
    return fail("reduce-scatter result implies {} shards but the replica groups have {} participants", shards,
                subgroup);
  if (shards <= 0) shards = 1;
  std::vector<Shape> results;
  for (int64_t i = 0; i < count(); ++i) {
    std::vector<int64_t> dims = op(i).dimensions();
    if (dims.empty()) {
      results.push_back(op(i));
      continue;
    }
    if (dims[static_cast<size_t>(d)] % shards != 0)
      return fail("reduce-scatter operand {} dimension {} (size {}) is not divisible by the shard count {}", i, d,
                  dims[static_cast<size_t>(d)], shards);
    dims[static_cast<size_t>(d)] /= shards;
    results.emplace_back(op(i).elementType(), std::move(dims));
  }
  const Computation* c = callee(0, "to_apply");
  if (!c) return std::nullopt;
  const verify_detail::Signature& s = sigs_.get(c);
  if (s.dense && s.root && !reducer(c, "reducer", {op(0).elementType()}, {op(0).elementType()}))
    return std::nullopt;
  return count() == 1 ? results[0] : Shape::tuple(std::move(results));
}

R Inferrer::allToAll() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  auto mode = groupMode(false);
  if (!mode || !replicaGroups(*mode, true)) return std::nullopt;
  int64_t split = subgroupSize(*mode);
  if (!a_.dimensions.empty()) {
    if (a_.dimensions.size() != 1)
      return fail("all-to-all takes one split dimension, has {}", ints(a_.dimensions));
    if (count() != 1) return fail("all-to-all with a split dimension takes 1 operand, has {}", count());
    int64_t d = a_.dimensions[0];
    if (!dimIndex(d, op(0).rank(), "all-to-all split dimension")) return std::nullopt;
    if (split > 0 && op(0).dimension(d) % split != 0)
      return fail("all-to-all split dimension {} (size {}) is not divisible by the group size {}", d,
                  op(0).dimension(d), split);
    return op(0);
  }
  if (count() != split)
    return fail("tuple all-to-all needs one operand per group member ({}), has {}", split, count());
  return tuple();
}

R Inferrer::raggedAllToAll() {
  if (!allArrays()) return std::nullopt;
  auto mode = groupMode(false);
  if (!mode || !replicaGroups(*mode, true)) return std::nullopt;
  for (int64_t i = 2; i < 6; ++i) {
    if (op(i).rank() != 1 && op(i).rank() != 2)
      return fail("ragged-all-to-all operand {} must have rank 1 or 2, has {}", i, str(op(i)));
    if (!isI(op(i).elementType())) return fail("ragged-all-to-all operand {} must be integral, is {}", i, str(op(i)));
    if (i > 2 && !sameDims(op(i), op(2)))
      return fail("ragged-all-to-all offset/size operands {} and {} differ", str(op(2)), str(op(i)));
  }
  if (!typeOk(op(0).elementType(), op(1).elementType()))
    return fail("ragged-all-to-all input {} and output {} element types differ", str(op(0)), str(op(1)));
  return op(1);
}

R Inferrer::collectivePermute(bool start) {
  if (!atLeast(1)) return std::nullopt;
  bool inplace = count() == 4;
  if (count() != 1 && !inplace) return fail("{} takes 1 or 4 operands, has {}", opName(), count());
  GroupMode mode = a_.channelId ? GroupMode::CrossPartition : GroupMode::CrossReplica;
  const ModuleConfig* cfg = configOf(inst_);
  int64_t limit = !cfg ? 1 : mode == GroupMode::CrossReplica ? cfg->replicaCount : cfg->numPartitions;
  if (!inplace) {
    std::vector<int64_t> sources, targets;
    for (const auto& [s, t] : a_.sourceTargetPairs) {
      if (s < 0 || t < 0 || (limit != 1 && (s >= limit || t >= limit)))
        return fail("source-target pair {{{},{}}} is out of range{}", s, t,
                    limit != 1 ? fmt::format(" (ids must be below {})", limit) : std::string());
      sources.push_back(s);
      targets.push_back(t);
    }
    std::sort(sources.begin(), sources.end());
    std::sort(targets.begin(), targets.end());
    if (auto it = std::adjacent_find(sources.begin(), sources.end()); it != sources.end())
      return fail("source {} appears more than once in source_target_pairs", *it);
    if (auto it = std::adjacent_find(targets.begin(), targets.end()); it != targets.end())
      return fail("target {} appears more than once in source_target_pairs", *it);
  }
  Shape result = inplace ? op(1) : op(0);
  if (!start) return result;
  if (inplace) return declared();
  if (!declared().isTuple() || declared().tupleSize() < 2)
    return fail("{} must produce a tuple of at least 2 elements, not {}", opName(), str(declared()));
  std::vector<Shape> elems = declared().tupleElements();
  elems[0] = op(0);
  elems[1] = result;
  return Shape::tuple(std::move(elems));
}

R Inferrer::collectiveBroadcast() {
  if (!atLeast(1) || !allArrays()) return std::nullopt;
  auto mode = groupMode(false);
  if (!mode || !replicaGroups(*mode, true)) return std::nullopt;
  return count() == 1 ? op(0) : tuple();
}

// ---------------------------------------------------------------- async

R Inferrer::asyncStart() {
  const Computation* c = callee(0, "async");
  if (!c) return std::nullopt;
  if (c->executionThread() != a_.asyncExecutionThread)
    return fail("async_execution_thread \"{}\" differs from the execution thread \"{}\" of '{}'",
                a_.asyncExecutionThread, c->executionThread(), c->name());
  const Shape& s = declared();
  if (!s.isTuple() || s.tupleSize() < 2)
    return fail("async-start must produce a tuple of at least 2 elements (operands, result, ...), not {}", str(s));
  const verify_detail::Signature& sig = sigs_.get(c);
  if (!sig.dense || !sig.root) return declared();
  if (!signature(c, "async", count())) return std::nullopt;
  auto same = [&](const Shape& a, const Shape& b) { return opts_.layoutSensitive ? a == b : a.compatible(b); };
  for (int64_t i = 0; i < count(); ++i)
    if (!same(sig.params[static_cast<size_t>(i)]->shape(), op(i)))
      return fail("operand {} {} does not match parameter {} {} of async computation '{}'", i, str(op(i)), i,
                  str(sig.params[static_cast<size_t>(i)]->shape()), c->name());
  std::vector<Shape> elems = s.tupleElements();
  elems[0] = tuple().value();
  elems[1] = sig.root->shape();
  return Shape::tuple(std::move(elems));
}

R Inferrer::asyncUpdateOrDone(bool done) {
  const Instruction* start = inst_.operand(0);
  Opcode o = start->opcode();
  if (o != Opcode::AsyncStart && o != Opcode::AsyncUpdate)
    return fail("the operand of {} must be an async-start or async-update, not {} '{}'", opName(), opcodeName(o),
                start->name());
  const auto& mine = inst_.calledComputations();
  const auto& theirs = start->calledComputations();
  if (!mine.empty() && !theirs.empty() && mine[0] != theirs[0])
    return fail("{} wraps computation '{}' but its operand '{}' wraps '{}'", opName(), mine[0] ? mine[0]->name() : "",
                start->name(), theirs[0] ? theirs[0]->name() : "");
  const Shape& s = op(0);
  if (!s.isTuple() || s.tupleSize() < 2)
    return fail("the operand of {} must be an async tuple, not {}", opName(), str(s));
  return done ? s.tupleElement(1) : s;
}

R Inferrer::copyStart() {
  return Shape::tuple({op(0), op(0), Shape::scalar(ElementType::U32)});
}

R Inferrer::copyDone() {
  const Shape& s = op(0);
  if (!s.isTuple() || s.tupleSize() < 2)
    return fail("copy-done operand must be a copy-start tuple, not {}", str(s));
  if (!s.tupleElement(0).compatible(s.tupleElement(1)))
    return fail("copy-done source {} and destination {} differ", str(s.tupleElement(1)), str(s.tupleElement(0)));
  return s.tupleElement(0);
}

// ---------------------------------------------------------------- misc

R Inferrer::rng() {
  if (!exactly(2)) return std::nullopt;
  if (!op(0).isScalar() || !op(1).isScalar())
    return fail("rng operands must be scalars, are {} and {}", str(op(0)), str(op(1)));
  ElementType t = op(0).elementType();
  if (op(1).elementType() != t) return fail("rng operands {} and {} must have the same type", str(op(0)), str(op(1)));
  if (!declared().isArray()) return fail("rng must produce an array, not {}", str(declared()));
  if (a_.distribution == RngDistribution::Normal ? !isF(t) : !(isF(t) || isI(t) || isPred(t)))
    return fail("{} does not support {} values", toString(a_.distribution), elementTypeName(t));
  return Shape(t, declared().dimensions());
}

R Inferrer::rngBitGenerator() {
  if (!array(0)) return std::nullopt;
  const Shape& s = declared();
  if (!s.isTuple()) return s;
  if (s.tupleSize() != 2) return fail("rng-bit-generator must produce (state, values), not {}", str(s));
  if (!s.tupleElement(1).isArray()) return fail("rng-bit-generator values must be an array, not {}", str(s));
  return Shape::tuple({op(0), s.tupleElement(1)});
}

R Inferrer::send() {
  if (!token(1)) return std::nullopt;
  return Shape::tuple({op(0), Shape::scalar(ElementType::U32), Shape::token()});
}

R Inferrer::recv() {
  if (!token(0)) return std::nullopt;
  const Shape& s = declared();
  if (!s.isTuple() || s.tupleSize() < 1) return fail("recv must produce (data, u32[], token[]), not {}", str(s));
  return Shape::tuple({s.tupleElement(0), Shape::scalar(ElementType::U32), Shape::token()});
}

R Inferrer::infeed() {
  if (!token(0)) return std::nullopt;
  const Shape& s = declared();
  if (!s.isTuple() || s.tupleSize() < 1) return fail("infeed must produce (data, token[]), not {}", str(s));
  return Shape::tuple({s.tupleElement(0), Shape::token()});
}

R Inferrer::outfeed() {
  if (!token(1)) return std::nullopt;
  if (a_.outfeedShape && !a_.outfeedShape->compatible(op(0)))
    return fail("outfeed_shape {} does not match the outfed operand {}", str(*a_.outfeedShape), str(op(0)));
  return Shape::token();
}

R Inferrer::getDimensionSize() {
  if (!array(0)) return std::nullopt;
  if (a_.dimensions.size() != 1) return fail("{} needs exactly one dimension, has {}", opName(), ints(a_.dimensions));
  if (!dimIndex(a_.dimensions[0], op(0).rank(), "dimension")) return std::nullopt;
  return Shape::scalar(ElementType::S32);
}

R Inferrer::setDimensionSize() {
  if (!array(0)) return std::nullopt;
  if (!op(1).isScalar() || !isI(op(1).elementType()))
    return fail("set-dimension-size size must be an integral scalar, is {}", str(op(1)));
  if (a_.dimensions.size() != 1) return fail("{} needs exactly one dimension, has {}", opName(), ints(a_.dimensions));
  if (!dimIndex(a_.dimensions[0], op(0).rank(), "dimension")) return std::nullopt;
  return op(0);
}

R Inferrer::triangularSolve() {
  if (!allArrays()) return std::nullopt;
  const Shape& am = op(0);
  const Shape& b = op(1);
  ElementType t = am.elementType();
  if (!isF(t) && !isC(t)) return fail("triangular-solve expects floating-point or complex operands, has {}", str(am));
  if (b.elementType() != t) return fail("triangular-solve operands {} and {} must have the same type", str(am), str(b));
  int64_t r = am.rank();
  if (r < 2 || b.rank() != r)
    return fail("triangular-solve operands {} and {} must have the same rank of at least 2", str(am), str(b));
  if (am.dimension(r - 1) != am.dimension(r - 2)) return fail("triangular-solve matrix {} must be square", str(am));
  for (int64_t i = 0; i < r - 2; ++i)
    if (am.dimension(i) != b.dimension(i))
      return fail("triangular-solve batch dimensions of {} and {} differ", str(am), str(b));
  int64_t bd = a_.leftSide ? b.dimension(r - 2) : b.dimension(r - 1);
  if (bd != am.dimension(r - 1))
    return fail("triangular-solve right-hand side {} does not match matrix {} (left_side={})", str(b), str(am),
                a_.leftSide);
  return b;
}

R Inferrer::cholesky() {
  if (!array(0)) return std::nullopt;
  const Shape& am = op(0);
  if (!isF(am.elementType()) && !isC(am.elementType()))
    return fail("cholesky expects a floating-point or complex operand, has {}", str(am));
  if (am.rank() < 2 || am.dimension(am.rank() - 1) != am.dimension(am.rank() - 2))
    return fail("cholesky operand {} must be a batch of square matrices", str(am));
  return am;
}

R Inferrer::fft() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  const auto& len = a_.fftLength;
  int64_t n = static_cast<int64_t>(len.size());
  if (n < 1 || n > 3) return fail("fft_length {} must have 1 to 3 entries", ints(len));
  if (x.rank() < n) return fail("fft operand {} has fewer dimensions than fft_length {}", str(x), ints(len));
  ElementType t = x.elementType();
  std::vector<int64_t> dims = x.dimensions();
  int64_t off = x.rank() - n;
  switch (a_.fftType) {
    case FftType::Fft:
    case FftType::Ifft:
      if (!isC(t)) return fail("{} expects a complex operand, has {}", toString(a_.fftType), str(x));
      for (int64_t i = 0; i < n; ++i)
        if (dims[static_cast<size_t>(off + i)] != len[static_cast<size_t>(i)])
          return fail("fft operand {} does not end in fft_length {}", str(x), ints(len));
      return x;
    case FftType::Rfft: {
      if (t != ElementType::F32 && t != ElementType::F64)
        return fail("RFFT expects an f32 or f64 operand, has {}", str(x));
      for (int64_t i = 0; i < n; ++i)
        if (dims[static_cast<size_t>(off + i)] != len[static_cast<size_t>(i)])
          return fail("RFFT operand {} does not end in fft_length {}", str(x), ints(len));
      if (len.back() != 0) dims.back() = len.back() / 2 + 1;
      return Shape(t == ElementType::F32 ? ElementType::C64 : ElementType::C128, std::move(dims));
    }
    case FftType::Irfft: {
      if (!isC(t)) return fail("IRFFT expects a complex operand, has {}", str(x));
      for (int64_t i = 0; i + 1 < n; ++i)
        if (dims[static_cast<size_t>(off + i)] != len[static_cast<size_t>(i)])
          return fail("IRFFT operand {} does not match fft_length {}", str(x), ints(len));
      int64_t want = len.back() == 0 ? 0 : len.back() / 2 + 1;
      if (dims.back() != want)
        return fail("IRFFT operand {} must have a last dimension of {} for fft_length {}", str(x), want, ints(len));
      dims.back() = len.back();
      return Shape(complexComponentType(t), std::move(dims));
    }
  }
  return x;
}

R Inferrer::batchNorm() {
  if (!allArrays()) return std::nullopt;
  const Shape& x = op(0);
  Opcode o = inst_.opcode();
  if (x.rank() < 1) return fail("{} operand {} must have rank at least 1", opName(), str(x));
  if (!isF(x.elementType())) return fail("{} operand {} must be floating point", opName(), str(x));
  if (!dimIndex(a_.featureIndex, x.rank(), "feature_index")) return std::nullopt;
  int64_t f = x.dimension(a_.featureIndex);
  Shape feat(x.elementType(), {f});
  for (int64_t i = 1; i < count(); ++i) {
    bool full = o == Opcode::BatchNormGrad && i == 4;
    const Shape& want = full ? x : feat;
    if (!sameDims(op(i), want) || !typeOk(op(i).elementType(), x.elementType()))
      return fail("{} operand {} {} must have shape {}", opName(), i, str(op(i)), str(want));
  }
  if (o == Opcode::BatchNormInference) return x;
  return Shape::tuple({x, feat, feat});
}

R Inferrer::topK() {
  if (!array(0)) return std::nullopt;
  const Shape& x = op(0);
  if (x.rank() < 1) return fail("topk operand {} must have rank at least 1", str(x));
  if (a_.k < 0 || a_.k > x.dimension(x.rank() - 1))
    return fail("topk k={} is out of range for the last dimension of {}", a_.k, str(x));
  std::vector<int64_t> dims = x.dimensions();
  dims.back() = a_.k;
  return Shape::tuple({Shape(x.elementType(), dims), Shape(ElementType::S32, dims)});
}

R Inferrer::constant() {
  if (!a_.literal) return fail("constant has no literal");
  const Shape& l = a_.literal->shape();
  if (!l.compatible(declared()))
    diags_.errorf(inst_.location(), "'{}' has shape {} but its literal has shape {}", inst_.name(),
                  str(declared()), str(l));
  return declared();
}

R Inferrer::reducePrecision() {
  if (!array(0)) return std::nullopt;
  if (!isF(op(0).elementType())) return fail("reduce-precision expects a floating-point operand, has {}", str(op(0)));
  if (a_.exponentBits < 1) return fail("reduce-precision exponent_bits={} must be at least 1", a_.exponentBits);
  if (a_.mantissaBits < 0) return fail("reduce-precision mantissa_bits={} must not be negative", a_.mantissaBits);
  return op(0);
}

// ---------------------------------------------------------------- dispatch

R Inferrer::run() {
  for (int64_t i = 0; i < count(); ++i)
    if (!inst_.operand(i)) return fail("operand {} is missing", i);
  const OpcodeInfo& info = opcodeInfo(inst_.opcode());
  if (info.arity != kVariadic && count() != info.arity) {
    exactly(info.arity);
    return std::nullopt;
  }
  // Unbounded dimensions follow rules of their own; the verifier rejects
  // them unless allowed, and then only the declared shape is used.
  if (opts_.allowUnboundedDynamism) {
    if (declared().isUnboundedDynamic()) return declared();
    for (int64_t i = 0; i < count(); ++i)
      if (op(i).isUnboundedDynamic()) return declared();
  }

  switch (inst_.opcode()) {
    case Opcode::Parameter:
    case Opcode::CustomCall:
      return inst_.opcode() == Opcode::CustomCall ? customCall() : declared();
    case Opcode::Scan:
    case Opcode::Shuffle:
    case Opcode::CollectiveReduce:
      return declared();  // not pinned down in XLA's shape inference we follow
    case Opcode::Constant: return constant();
    case Opcode::Iota: return iota();
    case Opcode::Copy:
    case Opcode::Domain:
    case Opcode::OptimizationBarrier: return unary();
    case Opcode::Compare:
    case Opcode::Complex: return binary();
    case Opcode::Select: return select();
    case Opcode::Clamp: return clamp();
    case Opcode::Convert: return convert();
    case Opcode::BitcastConvert: return bitcastConvert();
    case Opcode::StochasticConvert: return stochasticConvert();
    case Opcode::ReducePrecision: return reducePrecision();
    case Opcode::Bitcast: return bitcast();
    case Opcode::Broadcast: return broadcast();
    case Opcode::Reshape: return reshape();
    case Opcode::DynamicReshape: return dynamicReshape();
    case Opcode::Transpose: return transpose();
    case Opcode::Slice: return slice();
    case Opcode::DynamicSlice: return dynamicSlice();
    case Opcode::DynamicUpdateSlice: return dynamicUpdateSlice();
    case Opcode::Concatenate: return concatenate();
    case Opcode::Pad: return pad();
    case Opcode::Reverse: return reverse();
    case Opcode::Reduce: return reduce();
    case Opcode::ReduceWindow: return reduceWindow();
    case Opcode::SelectAndScatter: return selectAndScatter();
    case Opcode::Dot: return dot();
    case Opcode::RaggedDot: return raggedDot();
    case Opcode::ScaledDot: return scaledDot();
    case Opcode::Convolution: return convolution();
    case Opcode::Gather: return gather();
    case Opcode::Scatter: return scatter();
    case Opcode::Sort: return sort();
    case Opcode::While: return whileLoop();
    case Opcode::Conditional: return conditional();
    case Opcode::Call: return call();
    case Opcode::Map: return map();
    case Opcode::Fusion: return fusion();
    case Opcode::Tuple: return tuple();
    case Opcode::GetTupleElement: return getTupleElement();
    case Opcode::AllReduce: return allReduce(false);
    case Opcode::AllReduceStart: return allReduce(true);
    case Opcode::AllReduceDone: return op(0);
    case Opcode::AllGather: return allGather(false);
    case Opcode::AllGatherStart: return allGather(true);
    case Opcode::AllGatherDone:
      if (!op(0).isTuple() || op(0).tupleSize() < 2)
        return fail("all-gather-done operand must be an all-gather-start tuple, not {}", str(op(0)));
      return op(0).tupleElement(1);
    case Opcode::ReduceScatter: return reduceScatter();
    case Opcode::AllToAll: return allToAll();
    case Opcode::RaggedAllToAll: return raggedAllToAll();
    case Opcode::CollectivePermute: return collectivePermute(false);
    case Opcode::CollectivePermuteStart: return collectivePermute(true);
    case Opcode::CollectivePermuteDone:
      if (!op(0).isTuple() || op(0).tupleSize() < 2)
        return fail("collective-permute-done operand must be a collective-permute-start tuple, not {}", str(op(0)));
      return op(0).tupleElement(1);
    case Opcode::CollectiveBroadcast: return collectiveBroadcast();
    case Opcode::AsyncStart: return asyncStart();
    case Opcode::AsyncUpdate: return asyncUpdateOrDone(false);
    case Opcode::AsyncDone: return asyncUpdateOrDone(true);
    case Opcode::CopyStart: return copyStart();
    case Opcode::CopyDone: return copyDone();
    case Opcode::Rng: return rng();
    case Opcode::RngBitGenerator: return rngBitGenerator();
    case Opcode::RngGetAndUpdateState: return Shape(ElementType::U64, {2});
    case Opcode::PartitionId:
    case Opcode::ReplicaId: return Shape::scalar(ElementType::U32);
    case Opcode::Send: return send();
    case Opcode::SendDone: return Shape::token();
    case Opcode::Recv: return recv();
    case Opcode::RecvDone:
      if (!op(0).isTuple() || op(0).tupleSize() < 1)
        return fail("recv-done operand must be a recv tuple, not {}", str(op(0)));
      return Shape::tuple({op(0).tupleElement(0), Shape::token()});
    case Opcode::Infeed: return infeed();
    case Opcode::Outfeed: return outfeed();
    case Opcode::AfterAll:
      for (int64_t i = 0; i < count(); ++i)
        if (!token(i)) return std::nullopt;
      return Shape::token();
    case Opcode::AddDependency:
      if (!token(1)) return std::nullopt;
      return op(0);
    case Opcode::GetDimensionSize: return getDimensionSize();
    case Opcode::SetDimensionSize: return setDimensionSize();
    case Opcode::TriangularSolve: return triangularSolve();
    case Opcode::Cholesky: return cholesky();
    case Opcode::Fft: return fft();
    case Opcode::BatchNormTraining:
    case Opcode::BatchNormInference:
    case Opcode::BatchNormGrad: return batchNorm();
    case Opcode::TopK: return topK();
    default: break;
  }
  if (info.arity == 1) return unary();
  if (info.arity == 2) return binary();
  return declared();
}

// XLA's CheckShape: these opcodes pass data through unchanged, so with
// layout sensitivity their layouts must match too.
bool passesLayoutThrough(Opcode o) {
  switch (o) {
    case Opcode::Bitcast:
    case Opcode::Call:
    case Opcode::Conditional:
    case Opcode::Constant:
    case Opcode::CopyDone:
    case Opcode::CopyStart:
    case Opcode::CustomCall:
    case Opcode::GetTupleElement:
    case Opcode::Infeed:
    case Opcode::Outfeed:
    case Opcode::OptimizationBarrier:
    case Opcode::Parameter:
    case Opcode::Recv:
    case Opcode::RecvDone:
    case Opcode::Send:
    case Opcode::SendDone:
    case Opcode::Tuple:
    case Opcode::While:
    case Opcode::DynamicUpdateSlice: return true;
    default: return false;
  }
}

// Equal including minor_to_major of every array that has a layout on both sides.
bool sameWithMinorToMajor(const Shape& a, const Shape& b) {
  if (!a.compatible(b)) return false;
  if (a.isTuple()) {
    for (int64_t i = 0; i < a.tupleSize(); ++i)
      if (!sameWithMinorToMajor(a.tupleElement(i), b.tupleElement(i))) return false;
    return true;
  }
  if (a.isArray() && a.hasLayout() && b.hasLayout()) return a.layout().minorToMajor == b.layout().minorToMajor;
  return true;
}

}  // namespace

bool shapeMatchesInferred(Opcode opcode, const Shape& declared, const Shape& inferred, const VerifyOptions& options) {
  if (options.layoutSensitive && passesLayoutThrough(opcode)) return sameWithMinorToMajor(declared, inferred);
  if (options.allowMixedPrecision) return compatibleIgnoringFp(declared, inferred);
  return declared.compatible(inferred);
}

namespace verify_detail {
Inferred inferShapeCached(const Instruction& instruction, DiagnosticEngine& diags, const VerifyOptions& options,
                          SignatureCache& signatures) {
  return Inferrer(instruction, diags, options, signatures).run();
}
}  // namespace verify_detail

std::optional<Shape> inferShape(const Instruction& instruction, DiagnosticEngine& diags,
                                const VerifyOptions& options) {
  verify_detail::SignatureCache cache;
  verify_detail::Inferred r = verify_detail::inferShapeCached(instruction, diags, options, cache);
  if (!r) return std::nullopt;
  return r.value();
}

}  // namespace tpu::hlo
