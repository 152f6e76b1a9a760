// c64 and c128 in llo-gen. A complex value lives in the registers of its
// parts: c64 as two f32 registers (real r, imaginary hi: words 0 and 1 of
// each 8-byte element), c128 as two f64 register pairs (real r:hi,
// imaginary im:imh: words 0-1 and 2-3 of each 16-byte element). Ops whose
// result is a fixed sequence of part operations (add, subtract, negate,
// compares, selects, parts, converts) are composed from f32 and f64 ops.
// Multiply, divide, power, abs, sign and the transcendentals are expanded
// by one generic expansion (ComplexMath) into f32 ALU and EUP instructions
// (c64) or f64 pair instructions (c128): XLA's formulas, with scaling
// against overflow; errors measured in complex_math_test.cpp and stated in
// docs/DESIGN.md ("Complex library math from chip instructions"). No op
// uses a complex instruction row.
#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// An f32 immediate written as its bits, so the value is exact.
std::string fimm(float c) { return fmt::format("{:#x}", std::bit_cast<uint32_t>(c)); }

ElementType partType(ElementType t) { return t == ElementType::C64 ? ElementType::F32 : ElementType::F64; }

// Views of the parts of a complex value (they share its registers).
VReg realPart(VReg z) {
  return z.t == ElementType::C64 ? VReg{z.r, ElementType::F32} : VReg{z.r, ElementType::F64, z.hi};
}
VReg imagPart(VReg z) {
  return z.t == ElementType::C64 ? VReg{z.hi, ElementType::F32} : VReg{z.im, ElementType::F64, z.imh};
}
// A complex value made of two part values (which it takes over).
VReg fromParts(VReg re, VReg im, ElementType t) {
  if (t == ElementType::C64) return VReg{re.r, t, im.r};
  return VReg{re.r, t, re.hi, im.r, im.hi};
}

// Ops a complex operand or result may take part in besides data movement.
bool complexComputed(Opcode op) {
  return hlo::isElementwise(op) || op == Opcode::Fusion || op == Opcode::Map || op == Opcode::Reduce ||
         op == Opcode::ReduceWindow || op == Opcode::Dot || op == Opcode::Convolution || op == Opcode::Scatter ||
         op == Opcode::Sort || op == Opcode::Iota || op == Opcode::RngBitGenerator || op == Opcode::Fft;
}

}  // namespace

bool Lowerer::checkComplexTypes(const Instruction& in, const Shape& complexLeaf) {
  ElementType t = complexLeaf.elementType();
  Opcode op = in.opcode();
  if (complexComputed(op)) return true;
  if (op == Opcode::CustomCall && (isGeluCustomCallTarget(in.attrs().customCallTarget) ||
                                   isGemmCustomCallTarget(in.attrs().customCallTarget)))
    return true;
  return fail(
      in,
      fmt::format(
          "llo-gen: element type {} of '{}' is not supported for {} (complex types support "
          "elementwise arithmetic, reductions, window reductions, dots, convolutions, scatters, sort values, "
          "iota, fft, the GELU and gemm custom calls and data movement)",
          hlo::elementTypeName(t), in.name(), hlo::opcodeName(op)));
}

void Lowerer::complexLoadStore(bool load, VReg v, ElementType t, const std::string& addr,
                               const std::string& extra) {
  const char* m = t == ElementType::C64 ? (load ? "vld.e64" : "vst.e64") : (load ? "vld.e128" : "vst.e128");
  std::vector<int> regs = {v.r, v.hi};
  if (t == ElementType::C128) regs.insert(regs.end(), {v.im, v.imh});
  for (size_t w = 0; w < regs.size(); ++w)
    e_.op("{} {}, [{}], {}{}", m, vregs_.name(regs[w]), addr, w, extra);
}

VReg Lowerer::hoistComplexScalar(int buf, int64_t off, ElementType t, int& smemSlot) {
  int words = typeInfo(t).words;
  int sa = sreg(), x = sreg();
  e_.op("smov {}, {}", S(sa), base(buf) + off);
  e_.op("{} {}, [{}], {}, sem0", dmaOp("h2s", buf), e_.desc(static_cast<uint64_t>(words) * 4, {}),
        smemSlot * 4, memRef(buf, S(sa)));
  e_.op("sem.wait sem0");
  VReg v = valloc(t);
  std::vector<int> regs = {v.r, v.hi};
  if (t == ElementType::C128) regs.insert(regs.end(), {v.im, v.imh});
  for (int w = 0; w < words; ++w) {
    e_.op("sld {}, [{}]", S(x), (smemSlot + w) * 4);
    e_.op("vmov.s32 {}, {}", vregs_.name(regs[static_cast<size_t>(w)]), S(x));
  }
  smemSlot += words;
  sregs_.put(sa);
  sregs_.put(x);
  return v;
}

VReg Lowerer::complexAdd(VReg a, VReg b, bool subtract) {
  const char* name = subtract ? "sub" : "add";
  auto part = [&](VReg x, VReg y) {
    VReg d = valloc(x.t);
    if (x.t == ElementType::F32) {
      e_.op("v{}.f32 {}, {}, {}", name, V(d), V(x), V(y));
    } else {
      for (int w = 0; w < 2; ++w)
        e_.op("v{}.f64 {}, {}, {}, {}, {}, {}", name, w ? H(d) : V(d), V(x), H(x), V(y), H(y), w);
    }
    return d;
  };
  VReg re = part(realPart(a), realPart(b));
  VReg im = part(imagPart(a), imagPart(b));
  return fromParts(re, im, a.t);
}

// From a real type: the value converted once, imaginary +0 (XLA's convert).
VReg Lowerer::complexFromReal(VReg x, ElementType to) {
  ElementType from = x.t;
  TypeInfo fi = typeInfo(from);
  VReg re;
  if (to == ElementType::C128) {
    if (from == ElementType::F64) {
      re = vcopy(x, ElementType::F64);
    } else if (isPairType(from)) {
      re = valloc(ElementType::F64);
      const char* m = from == ElementType::S64 ? "vcvt.f64.s64" : "vcvt.f64.u64";
      for (int w = 0; w < 2; ++w) e_.op("{} {}, {}, {}, {}", m, w ? H(re) : V(re), V(x), H(x), w);
    } else {
      re = pairFrom32(x, ElementType::F64);  // exact from every 32-bit form
    }
  } else if (fi.isFloat && !isPairType(from)) {
    re = vcopy(x, ElementType::F32);  // f32 and the narrow floats' f32 register form
  } else {
    // Integers (and f64) round once to f32: through a 64-bit value, which
    // every 32-bit integer form widens to exactly.
    VReg wide = isPairType(from) ? x : pairFrom32(x, fi.isUnsigned ? ElementType::U64 : ElementType::S64);
    ElementType wt = isPairType(from) ? from : wide.t;
    re = valloc(ElementType::F32);
    const char* m = wt == ElementType::F64   ? "vcvt.f32.f64"
                    : wt == ElementType::U64 ? "vcvt.f32.u64"
                                             : "vcvt.f32.s64";
    e_.op("{} {}, {}, {}", m, V(re), V(wide), H(wide));
    if (!isPairType(from)) vfree(wide);
  }
  VReg im = vconst(partType(to), 0);
  return fromParts(re, im, to);
}

// ---- complex library math from chip instructions ----
//
// One expansion for both complex types, written over the part type: c64
// parts are f32 registers (ALU and EUP instructions, immediates inline),
// c128 parts f64 register pairs (the pair rows, constants in registers).
// The formulas are XLA's, with scaling against overflow; the thresholds
// that depend on the part's range are chosen per type. Errors are measured
// in complex_math_test.cpp and stated in docs/DESIGN.md ("Complex library
// math from chip instructions").
struct Lowerer::ComplexMath {
  // An operand: a register of the part type or a constant.
  struct Arg {
    VReg v;
    double c = 0;
    bool isConst = false;
    Arg(VReg r) : v(r) {}                       // NOLINT: implicit on purpose
    Arg(double k) : c(k), isConst(true) {}      // NOLINT
  };

  Lowerer& L;
  const ElementType C;  // c64 or c128
  const ElementType P;  // f32 or f64

  ComplexMath(Lowerer& l, ElementType complexType) : L(l), C(complexType), P(partType(complexType)) {}

  bool wide() const { return P == ElementType::F64; }
  // Range-dependent constants: f32's value, f64's value.
  double pick(double f32, double f64) const { return wide() ? f64 : f32; }
  std::string V(VReg r) const { return L.V(r); }
  std::string H(VReg r) const { return L.H(r); }
  std::string M(int m) const { return L.M(m); }
  std::string f32(const Arg& b) const { return b.isConst ? fimm(static_cast<float>(b.c)) : L.V(b.v); }

  // ---- registers and masks ----
  VReg alloc() { return L.valloc(P); }
  void free(std::initializer_list<VReg> vs) {
    for (VReg v : vs) L.vfree(v);
  }
  int mask() { return L.malloc_(); }
  void put(std::initializer_list<int> ms) {
    for (int m : ms) L.masks_.put(m);
  }
  void mand(int d, int a, int b) { L.e_.op("mand {}, {}, {}", M(d), M(a), M(b)); }
  void mor(int d, int a, int b) { L.e_.op("mor {}, {}, {}", M(d), M(a), M(b)); }
  void mnot(int d, int a) { L.e_.op("mnot {}, {}", M(d), M(a)); }

  // ---- part arithmetic ----
  void konstTo(VReg d, double c) {
    if (!wide()) {
      L.e_.op("vmov.f32 {}, {}", V(d), fimm(static_cast<float>(c)));
      return;
    }
    uint64_t bits = std::bit_cast<uint64_t>(c);
    L.e_.op("vmov.s32 {}, {}", V(d), static_cast<int32_t>(static_cast<uint32_t>(bits)));
    L.e_.op("vmov.s32 {}, {}", H(d), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
  }
  VReg konst(double c) {
    VReg d = alloc();
    konstTo(d, c);
    return d;
  }
  // a op b for op in add, sub, mul, div, max, min: a new register.
  VReg bin(const char* op, VReg a, const Arg& b) {
    if (!wide()) {
      VReg d = alloc();
      L.e_.op("v{}.f32 {}, {}, {}", op, V(d), V(a), f32(b));
      return d;
    }
    VReg k = b.isConst ? konst(b.c) : b.v;
    VReg d = L.f64Op(fmt::format("v{}.f64", op).c_str(), a, k);
    if (b.isConst) L.vfree(k);
    return d;
  }
  // d = a op b, d an owned temporary (f64: d takes the new pair's registers).
  void binTo(const char* op, VReg& d, VReg a, const Arg& b) {
    if (!wide()) {
      L.e_.op("v{}.f32 {}, {}, {}", op, V(d), V(a), f32(b));
      return;
    }
    VReg n = bin(op, a, b);
    L.vfree(d);
    d = n;
  }
  void absTo(VReg d, VReg a) {
    if (!wide()) {
      L.e_.op("vabs.f32 {}, {}", V(d), V(a));
      return;
    }
    L.e_.op("vmov.s32 {}, {}", V(d), V(a));
    L.e_.op("vand {}, {}, 2147483647", H(d), H(a));
  }
  VReg abs(VReg a) {
    VReg d = alloc();
    absTo(d, a);
    return d;
  }
  // d = -a (the sign bit flipped; d may be a).
  void negTo(VReg d, VReg a) {
    if (!wide()) {
      L.e_.op("vneg.f32 {}, {}", V(d), V(a));
      return;
    }
    if (d.r != a.r) L.e_.op("vmov.s32 {}, {}", V(d), V(a));
    L.e_.op("vxor {}, {}, -2147483648", H(d), H(a));
  }
  VReg neg(VReg a) {
    VReg d = alloc();
    negTo(d, a);
    return d;
  }
  // d = a zero with the sign of x.
  void signedZeroTo(VReg d, VReg x) {
    if (!wide()) {
      L.e_.op("vand {}, {}, -2147483648", V(d), V(x));
      return;
    }
    L.e_.op("vmov.s32 {}, 0", V(d));
    L.e_.op("vand {}, {}, -2147483648", H(d), H(x));
  }
  // r := |r| with the sign of x.
  void copySign(VReg r, VReg x) {
    if (!wide()) {
      L.copySignF32(r, x, P);
      return;
    }
    VReg s = L.valloc(ElementType::S32);
    L.e_.op("vand {}, {}, -2147483648", V(s), H(x));
    L.e_.op("vand {}, {}, 2147483647", H(r), H(r));
    L.e_.op("vor {}, {}, {}", H(r), H(r), V(s));
    L.vfree(s);
  }
  void cmpTo(int m, const char* dir, VReg a, const Arg& b) {
    if (!wide()) {
      L.e_.op("vcmp.{}.f32 {}, {}, {}", dir, M(m), V(a), f32(b));
      return;
    }
    VReg k = b.isConst ? konst(b.c) : b.v;
    L.e_.op("vcmp.{}.f64 {}, {}, {}, {}, {}", dir, M(m), V(a), H(a), V(k), H(k));
    if (b.isConst) L.vfree(k);
  }
  int cmp(const char* dir, VReg a, const Arg& b) {
    int m = mask();
    cmpTo(m, dir, a, b);
    return m;
  }
  // d = m ? a : b (word by word: d may be a or b).
  void selTo(VReg d, int m, VReg a, const Arg& b) {
    if (!wide()) {
      L.e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(a), f32(b));
      return;
    }
    if (b.isConst) {
      uint64_t bits = std::bit_cast<uint64_t>(b.c);
      L.e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(a), static_cast<int32_t>(static_cast<uint32_t>(bits)));
      L.e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(m), H(a), static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
      return;
    }
    L.e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(a), V(b.v));
    L.e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(m), H(a), H(b.v));
  }
  VReg sel(int m, VReg a, const Arg& b) {
    VReg d = alloc();
    selTo(d, m, a, b);
    return d;
  }

  // ---- real library functions: f32 from chip instructions (kernels/math.cpp), f64 through f64Math ----
  VReg fn(Opcode op, VReg x) {
    if (wide()) return L.f64Math(op, x);
    switch (op) {
      case Opcode::Exp: return L.unop("vexp", x, P);
      case Opcode::Log: return L.unop("vlog", x, P);
      case Opcode::Sin: return L.unop("vsin", x, P);
      case Opcode::Cos: return L.unop("vcos", x, P);
      case Opcode::Sqrt: return L.unop("vsqrt", x, P);
      case Opcode::Expm1: return L.expandExpm1F32(x, P);
      case Opcode::Log1p: return L.expandLog1pF32(x, P);
      default: return L.unop("vexp", x, P);  // not reached: the expansions use only the ones above
    }
  }
  // d = f(d) in place for the EUP functions (f32), a new pair (f64).
  void fnTo(Opcode op, VReg& d) {
    if (!wide() && op != Opcode::Expm1 && op != Opcode::Log1p) {
      const char* m = op == Opcode::Exp ? "vexp" : op == Opcode::Log ? "vlog" : op == Opcode::Sin ? "vsin"
                      : op == Opcode::Cos ? "vcos" : "vsqrt";
      L.e_.op("{} {}, {}", m, V(d), V(d));
      return;
    }
    VReg n = fn(op, d);
    L.vfree(d);
    d = n;
  }
  VReg atan2(VReg y, VReg x) { return wide() ? L.f64Math(Opcode::Atan2, y, x) : L.expandAtan2F32(y, x, P); }
  std::pair<VReg, VReg> coshSinh(VReg x) {
    if (!wide()) return L.coshSinhF32(x, P);
    return {L.f64Math(Opcode::Cosh, x), L.f64Math(Opcode::Sinh, x)};
  }

  // ---- the expansions ----
  VReg hypot(VReg x, VReg y);
  VReg multiply(VReg a, VReg b);
  struct Scaled {
    VReg ar, ai, br, bi, back;
  };
  Scaled scaleForDivide(VReg a, VReg b);
  void divideRecoveries(const Scaled& s, VReg abr, VReg abi, VReg cr, VReg ci);
  VReg divide(VReg a, VReg b);
  VReg reciprocal(VReg z);
  VReg exp(VReg x, VReg y, bool minusOne);
  VReg log(VReg x, VReg y);
  VReg log1p(VReg x, VReg y);
  VReg sqrt(VReg x, VReg y);
  VReg tanh(VReg x, VReg y);
  VReg sinCos(VReg x, VReg y, bool cos);
  VReg pow(VReg a, VReg b);
  VReg logistic(VReg x, VReg y);
  VReg sign(VReg x, VReg y);
  std::optional<VReg> expand(Opcode op, const std::vector<VReg>& ops);
};

VReg Lowerer::complexMultiply(VReg a, VReg b) { return ComplexMath(*this, a.t).multiply(a, b); }

// XLA's product (and std::complex's for finite values, bit for bit):
// (ar br - ai bi) + (ar bi + ai br) i, each product rounded once (no Annex
// G recovery of infinities from NaN results).
VReg Lowerer::ComplexMath::multiply(VReg a, VReg b) {
  VReg ar = realPart(a), ai = imagPart(a), br = realPart(b), bi = imagPart(b);
  VReg re = bin("mul", ar, br);
  VReg t2 = bin("mul", ai, bi);
  binTo("sub", re, re, t2);
  VReg im = bin("mul", ar, bi);
  binTo("mul", t2, ai, br);
  binTo("add", im, im, t2);
  free({t2});
  return fromParts(re, im, C);
}

// |x + y i| without overflow or underflow on the way: with m = max(|x|, |y|)
// and n = min, m sqrt(1 + (n/m)^2); n == 0 gives m (0 for 0), an infinite
// part gives inf even beside a NaN (C's hypot).
VReg Lowerer::ComplexMath::hypot(VReg x, VReg y) {
  const double inf = std::numeric_limits<double>::infinity();
  VReg ax = abs(x), ay = abs(y);
  VReg m = bin("max", ax, ay), n = bin("min", ax, ay);
  VReg h = bin("div", n, m);
  binTo("mul", h, h, h);
  binTo("add", h, h, 1.0);
  fnTo(Opcode::Sqrt, h);
  binTo("mul", h, h, m);
  int k = mask();
  cmpTo(k, "eq", n, 0.0);
  selTo(h, k, m, h);
  cmpTo(k, "eq", ax, inf);
  selTo(h, k, ax, h);
  cmpTo(k, "eq", ay, inf);
  selTo(h, k, ay, h);
  put({k});
  free({ax, ay, m, n});
  return h;
}

// Copies of a's and b's parts scaled by powers of two (exact) so nothing
// overflows in Smith's algorithm: a dividend part from 2^126 (f64: 2^1022)
// on is halved (u ratio + v is at most twice it), a divisor part from there
// on halved too (den is at most twice it) and a divisor below 2^-100 (f64:
// 2^-970) multiplied by 2^60 (2^500) so den keeps its bits; `back` is the
// ratio of the factors, which the quotient is multiplied by.
Lowerer::ComplexMath::Scaled Lowerer::ComplexMath::scaleForDivide(VReg a, VReg b) {
  const double big = pick(0x1p126, 0x1p1022), tiny = pick(0x1p-100, 0x1p-970), up = pick(0x1p60, 0x1p500);
  Scaled s{L.vcopy(realPart(a), P), L.vcopy(imagPart(a), P), L.vcopy(realPart(b), P), L.vcopy(imagPart(b), P),
           alloc()};
  VReg w = abs(s.ar), w2 = abs(s.ai);
  binTo("max", w, w, w2);
  int isBig = cmp("ge", w, big);
  konstTo(w2, 0.5);
  selTo(w2, isBig, w2, 1.0);  // dividend factor
  binTo("mul", s.ar, s.ar, w2);
  binTo("mul", s.ai, s.ai, w2);
  konstTo(s.back, 2.0);
  selTo(s.back, isBig, s.back, 1.0);
  absTo(w, s.br);
  absTo(w2, s.bi);
  binTo("max", w, w, w2);
  int isTiny = mask();
  cmpTo(isBig, "ge", w, big);
  cmpTo(isTiny, "lt", w, tiny);
  konstTo(w2, 0.5);
  selTo(w2, isBig, w2, 1.0);
  konstTo(w, up);
  selTo(w2, isTiny, w, w2);  // divisor factor
  binTo("mul", s.br, s.br, w2);
  binTo("mul", s.bi, s.bi, w2);
  binTo("mul", s.back, s.back, w2);
  put({isBig, isTiny});
  free({w, w2});
  return s;
}

// XLA's complex divide (elemental_ir_emitter): Smith's algorithm, dividing
// by the larger part of b first so nothing overflows on the way, then C99
// Annex G's recovery where both parts came out NaN (divideRecoveries).
VReg Lowerer::ComplexMath::divide(VReg a, VReg b) {
  Scaled s = scaleForDivide(a, b);
  VReg abr = abs(s.br), abi = abs(s.bi);
  int m1 = cmp("lt", abr, abi);
  VReg p = sel(m1, s.br, s.bi), q = sel(m1, s.bi, s.br), u = sel(m1, s.ar, s.ai), v = sel(m1, s.ai, s.ar);
  VReg ratio = bin("div", p, q);
  VReg den = bin("mul", p, ratio);
  binTo("add", den, den, q);
  VReg cr = bin("mul", u, ratio);
  binTo("add", cr, cr, v);
  binTo("div", cr, cr, den);
  VReg ci = bin("mul", v, ratio);
  binTo("sub", ci, ci, u);
  binTo("div", ci, ci, den);
  // |br| >= |bi|: the imaginary part is (ai - ar ratio) / den.
  negTo(p, ci);
  selTo(ci, m1, ci, p);
  binTo("mul", cr, cr, s.back);
  binTo("mul", ci, ci, s.back);
  put({m1});
  free({p, q, u, v, ratio, den, s.back});
  divideRecoveries(s, abr, abi, cr, ci);
  free({abr, abi, s.ar, s.ai, s.br, s.bi});
  return fromParts(cr, ci, C);
}

// Where both parts of the quotient came out NaN, in XLA's priority (applied
// last wins): a finite dividend over an infinite divisor gives zero; an
// infinite dividend over a finite divisor inf; a zero divisor inf with the
// signs of a and b's real part. cr and ci are updated in place.
void Lowerer::ComplexMath::divideRecoveries(const Scaled& s, VReg abr, VReg abi, VReg cr, VReg ci) {
  const double inf = std::numeric_limits<double>::infinity();
  int nan = mask(), k = mask(), t = mask();
  cmpTo(nan, "ne", cr, cr);
  cmpTo(k, "ne", ci, ci);
  mand(nan, nan, k);
  VReg aar = abs(s.ar), aai = abs(s.ai);
  // The unit with the sign of x where |x| is inf, else a signed zero.
  auto infUnit = [&](VReg x, VReg ax) {
    VReg d = konst(1.0);
    cmpTo(t, "eq", ax, inf);
    selTo(d, t, d, 0.0);
    copySign(d, x);
    return d;
  };
  // f * (x1 y1 + x2 y2) and f * (x2 y1 - x1 y2) into (cr, ci) where mask k (and nan).
  auto recover = [&](VReg x1, VReg x2, VReg y1, VReg y2, double f) {
    VReg re = bin("mul", x1, y1), w = bin("mul", x2, y2);
    binTo("add", re, re, w);
    binTo("mul", re, re, f);
    VReg im = bin("mul", x2, y1);
    binTo("mul", w, x1, y2);
    binTo("sub", im, im, w);
    binTo("mul", im, im, f);
    mand(k, k, nan);
    selTo(cr, k, re, cr);
    selTo(ci, k, im, ci);
    free({re, w, im});
  };
  // Finite a over an infinite b: 0 * (a . unit(b)).
  cmpTo(k, "eq", abr, inf);
  cmpTo(t, "eq", abi, inf);
  mor(k, k, t);
  cmpTo(t, "lt", aar, inf);
  mand(k, k, t);
  cmpTo(t, "lt", aai, inf);
  mand(k, k, t);
  int keep = mask();
  mor(keep, k, k);
  VReg ur = infUnit(s.br, abr), ui = infUnit(s.bi, abi);
  mor(k, keep, keep);
  recover(s.ar, s.ai, ur, ui, 0.0);
  free({ur, ui});
  // Infinite a over a finite b: inf * (unit(a) . b).
  cmpTo(k, "lt", abr, inf);
  cmpTo(t, "lt", abi, inf);
  mand(k, k, t);
  cmpTo(keep, "eq", aar, inf);
  cmpTo(t, "eq", aai, inf);
  mor(keep, keep, t);
  mand(k, k, keep);
  mor(keep, k, k);
  ur = infUnit(s.ar, aar);
  ui = infUnit(s.ai, aai);
  mor(k, keep, keep);
  recover(ur, ui, s.br, s.bi, inf);
  free({ur, ui});
  // A zero divisor (unless a is NaN + NaN i): copysign(inf, br) * a.
  cmpTo(k, "eq", s.br, 0.0);
  cmpTo(t, "eq", s.bi, 0.0);
  mand(k, k, t);
  cmpTo(keep, "ne", s.ar, s.ar);
  cmpTo(t, "ne", s.ai, s.ai);
  mand(keep, keep, t);
  mnot(keep, keep);
  mand(k, k, keep);
  mand(k, k, nan);
  VReg f = konst(inf);
  copySign(f, s.br);
  VReg zr = bin("mul", f, s.ar), zi = bin("mul", f, s.ai);
  selTo(cr, k, zr, cr);
  selTo(ci, k, zi, ci);
  free({f, zr, zi, aar, aai});
  put({keep, nan, k, t});
}

// (1 + 0i) / z.
VReg Lowerer::ComplexMath::reciprocal(VReg z) {
  VReg one = L.valloc(C);
  konstTo(realPart(one), 1.0);
  konstTo(imagPart(one), 0.0);
  VReg d = divide(one, z);
  L.vfree(one);
  return d;
}

// e^z = e^x (cos y + i sin y) as (e^(x/2) cos y) e^(x/2), so the result
// stays finite where e^x alone overflows; y == 0 keeps the imaginary part
// y (C's cexp(inf + 0i) = inf + 0i). With minusOne, e^z - 1 keeps its
// relative precision near 0: the real part is expm1(x) cos y - 2 sin^2(y/2).
VReg Lowerer::ComplexMath::exp(VReg x, VReg y, bool minusOne) {
  const double inf = std::numeric_limits<double>::infinity();
  VReg e = bin("mul", x, 0.5);
  fnTo(Opcode::Exp, e);
  VReg c = fn(Opcode::Cos, y), s = fn(Opcode::Sin, y);
  VReg im = bin("mul", e, s);
  binTo("mul", im, im, e);
  VReg re;
  if (!minusOne) {
    re = bin("mul", e, c);
    binTo("mul", re, re, e);
  } else {
    re = fn(Opcode::Expm1, x);
    binTo("mul", re, re, c);
    binTo("mul", s, y, 0.5);
    fnTo(Opcode::Sin, s);
    binTo("mul", s, s, s);
    binTo("add", s, s, s);
    binTo("sub", re, re, s);
  }
  // e^-inf = 0 whatever y (cos inf would make it NaN): C's cexp (e^z - 1:
  // -1 + 0i).
  int k = mask();
  cmpTo(k, "ne", x, -inf);
  selTo(re, k, re, minusOne ? -1.0 : 0.0);
  selTo(im, k, im, 0.0);
  // e^(inf + i y) for y inf or NaN: inf + NaN i (C's cexp), not NaN + NaN i.
  int n = mask();
  cmpTo(k, "eq", x, inf);
  cmpTo(n, "ne", re, re);
  mand(k, k, n);
  selTo(re, k, x, re);
  put({n});
  cmpTo(k, "eq", y, 0.0);
  selTo(im, k, y, im);
  put({k});
  free({e, c, s});
  return fromParts(re, im, C);
}

// ln z = ln|z| + i atan2(y, x). ln|z| with m = max(|x|, |y|), n = min:
//   1/2 <= m < 2:  log1p((m - 1)(m + 1) + n^2) / 2   (no cancellation at |z| ~ 1)
//   otherwise:     ln m + log1p((n/m)^2) / 2          (no overflow)
// An infinite part gives +inf even beside a NaN (C's clog).
VReg Lowerer::ComplexMath::log(VReg x, VReg y) {
  const double inf = std::numeric_limits<double>::infinity();
  VReg ax = abs(x), ay = abs(y);
  VReg m = bin("max", ax, ay), n = bin("min", ax, ay);
  int k = mask(), t = mask();
  VReg r = bin("div", n, m);
  cmpTo(k, "eq", n, 0.0);
  selTo(r, k, n, r);  // 0 / 0
  binTo("mul", r, r, r);
  VReg re = fn(Opcode::Log1p, r);
  binTo("mul", re, re, 0.5);
  VReg lm = fn(Opcode::Log, m);
  binTo("add", re, re, lm);
  VReg a = bin("sub", m, 1.0);
  binTo("add", lm, m, 1.0);
  binTo("mul", a, a, lm);
  binTo("mul", r, n, n);
  binTo("add", a, a, r);
  VReg near = fn(Opcode::Log1p, a);
  binTo("mul", near, near, 0.5);
  cmpTo(k, "ge", m, 0.5);
  cmpTo(t, "lt", m, 2.0);
  mand(k, k, t);
  selTo(re, k, near, re);
  cmpTo(k, "eq", ax, inf);
  selTo(re, k, ax, re);
  cmpTo(k, "eq", ay, inf);
  selTo(re, k, ay, re);
  put({k, t});
  free({ax, ay, m, n, r, lm, a, near});
  VReg im = atan2(y, x);
  return fromParts(re, im, C);
}

// ln(1 + z): ln(u + y i) with u = 1 + x rounded (and y + 0, as the complex
// sum (1 + 0i) + z has it: -0 becomes +0 on the branch cut), except for |x|, |y| < 1/2
// where the real part is log1p(x (2 + x) + y^2) / 2 (keeps the relative
// precision of small z, which 1 + x would round away).
VReg Lowerer::ComplexMath::log1p(VReg x, VReg y) {
  VReg u = bin("add", x, 1.0);
  VReg yp = bin("add", y, 0.0);  // (1 + 0i) + z: -0 + 0 = +0
  VReg z = log(u, yp);
  free({yp});
  VReg s = bin("add", x, 2.0);
  binTo("mul", s, s, x);
  VReg y2 = bin("mul", y, y);
  binTo("add", s, s, y2);
  VReg l = fn(Opcode::Log1p, s);
  binTo("mul", l, l, 0.5);
  absTo(s, x);
  absTo(y2, y);
  binTo("max", s, s, y2);
  int k = cmp("lt", s, 0.5);
  selTo(realPart(z), k, l, realPart(z));
  put({k});
  free({u, s, y2, l});
  return z;
}

// sqrt(z) by t = sqrt((|x| + |z|) / 2): x >= 0 gives t + i y / 2t, x < 0
// gives |y| / 2t + i copysign(t, y). Parts beyond 2^100 (f64: 2^1000) are
// scaled by 1/4 and below 2^-100 (2^-1000) by 2^50 (2^500) first, t back by
// 2 or 2^-25 (2^-250), so |x| + |z| neither overflows nor loses subnormal
// bits. Special values as C's csqrt: t == 0 gives 0 + y i, an infinite y
// gives inf + y i.
VReg Lowerer::ComplexMath::sqrt(VReg x, VReg y) {
  const double inf = std::numeric_limits<double>::infinity();
  VReg ax = abs(x), ay = abs(y);
  VReg m = bin("max", ax, ay);
  int big = cmp("gt", m, pick(0x1p100, 0x1p1000)), tiny = cmp("lt", m, pick(0x1p-100, 0x1p-1000));
  VReg sc = konst(0.25), w = konst(pick(0x1p50, 0x1p500));
  selTo(sc, big, sc, 1.0);
  selTo(sc, tiny, w, sc);
  VReg back = konst(2.0);
  selTo(back, big, back, 1.0);
  konstTo(w, pick(0x1p-25, 0x1p-250));
  selTo(back, tiny, w, back);
  binTo("mul", ax, ax, sc);
  binTo("mul", m, ay, sc);  // |y| scaled
  VReg h = hypot(ax, m);
  binTo("add", h, h, ax);
  binTo("mul", h, h, 0.5);
  fnTo(Opcode::Sqrt, h);
  binTo("mul", h, h, back);  // t
  binTo("add", w, h, h);
  VReg q = bin("div", y, w);  // y / 2t
  VReg qa = abs(q);
  VReg st = L.vcopy(h, P);
  copySign(st, y);
  int k = big;
  cmpTo(k, "ge", x, 0.0);
  VReg re = sel(k, h, qa), im = sel(k, q, st);
  cmpTo(k, "eq", h, 0.0);
  selTo(re, k, h, re);
  selTo(im, k, y, im);
  cmpTo(k, "eq", ay, inf);
  selTo(re, k, ay, re);
  selTo(im, k, y, im);
  put({big, tiny});
  free({ax, ay, m, sc, back, w, h, q, qa, st});
  return fromParts(re, im, C);
}

// tanh(x + y i) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y)
// (both terms of the denominator >= 0: no cancellation); from |x| > 10
// (f64: 20, where e^(-2|x|) is below half an ulp) on,
// copysign(1, x) + i 4 sin y cos y e^(-2|x|).
VReg Lowerer::ComplexMath::tanh(VReg x, VReg y) {
  const double inf = std::numeric_limits<double>::infinity();
  auto [ch, sh] = coshSinh(x);
  VReg s = fn(Opcode::Sin, y), c = fn(Opcode::Cos, y);
  VReg den = bin("mul", sh, sh), w = bin("mul", c, c);
  binTo("add", den, den, w);
  VReg re = bin("mul", sh, ch);
  binTo("div", re, re, den);
  binTo("mul", s, s, c);  // sin y cos y
  VReg im = bin("div", s, den);
  absTo(w, x);
  int k = cmp("gt", w, pick(10.0, 20.0));
  binTo("mul", w, w, -2.0);
  fnTo(Opcode::Exp, w);
  binTo("mul", w, w, s);
  binTo("mul", w, w, 4.0);
  selTo(im, k, w, im);
  // x = +-inf: +-1 + 0i with the sign of y (C's ctanh), even for y inf.
  absTo(w, x);
  int z = cmp("eq", w, inf);
  signedZeroTo(w, y);
  selTo(im, z, w, im);
  konstTo(w, 1.0);
  copySign(w, x);
  selTo(re, k, w, re);
  put({k, z});
  free({ch, sh, s, c, den, w});
  return fromParts(re, im, C);
}

// sin(x + y i) = sin x cosh y + i cos x sinh y;
// cos(x + y i) = cos x cosh y - i sin x sinh y. sin keeps a zero real part
// x (0 * cosh(inf) would be NaN).
VReg Lowerer::ComplexMath::sinCos(VReg x, VReg y, bool cos) {
  auto [ch, sh] = coshSinh(y);
  VReg s = fn(Opcode::Sin, x), c = fn(Opcode::Cos, x);
  VReg re = bin("mul", cos ? c : s, ch);
  VReg im = bin("mul", cos ? s : c, sh);
  if (cos) {
    negTo(im, im);
  } else {
    int k = cmp("eq", x, 0.0);
    selTo(re, k, x, re);
    put({k});
  }
  free({ch, sh, s, c});
  return fromParts(re, im, C);
}

// a^b = e^(b ln a). For a = 0, ln a = -inf + 0i: Re b > 0 gives e^(-inf
// + ...) = 0 (exp's C special case); 0^0 is 1 + 0i as in numpy, XLA's
// elemental emitter and the interpreter (e^(0 ln 0) would be NaN).
VReg Lowerer::ComplexMath::pow(VReg a, VReg b) {
  VReg l = log(realPart(a), imagPart(a));
  VReg t = multiply(b, l);
  L.vfree(l);
  VReg r = exp(realPart(t), imagPart(t), false);
  L.vfree(t);
  int k = cmp("eq", realPart(a), 0.0), m = mask();
  for (VReg p : {imagPart(a), realPart(b), imagPart(b)}) {
    cmpTo(m, "eq", p, 0.0);
    mand(k, k, m);
  }
  mnot(k, k);
  selTo(realPart(r), k, realPart(r), 1.0);
  selTo(imagPart(r), k, imagPart(r), 0.0);
  put({k, m});
  return r;
}

// 1 / (1 + e^-z), as the interpreter and XLA compose it, but with the real
// part of 1 + e^-z for |x| < 1 as 2 cos^2(y/2) + expm1(-x) cos y, which does
// not cancel near the poles z = (2k + 1) pi i.
VReg Lowerer::ComplexMath::logistic(VReg x, VReg y) {
  VReg nx = neg(x), ny = neg(y);
  VReg e = exp(nx, ny, false);
  free({ny});
  VReg er = bin("add", realPart(e), 1.0);
  L.vfree(realPart(e));
  e = fromParts(er, imagPart(e), C);
  VReg em = fn(Opcode::Expm1, nx);
  VReg c = fn(Opcode::Cos, y);
  binTo("mul", em, em, c);
  binTo("mul", c, y, 0.5);
  fnTo(Opcode::Cos, c);
  binTo("mul", c, c, c);
  binTo("add", c, c, c);
  binTo("add", em, em, c);
  absTo(c, x);
  int k = cmp("lt", c, 1.0);
  selTo(realPart(e), k, em, realPart(e));
  put({k});
  free({nx, em, c});
  VReg d = reciprocal(e);
  L.vfree(e);
  return d;
}

// z / |z|, z itself where |z| is 0; z first divided by max(|x|, |y|) so
// |z| neither overflows nor underflows.
VReg Lowerer::ComplexMath::sign(VReg x, VReg y) {
  VReg ax = abs(x), m = abs(y);
  binTo("max", m, m, ax);
  VReg re = bin("div", x, m), im = bin("div", y, m);
  VReg a = bin("mul", re, re);
  binTo("mul", ax, im, im);
  binTo("add", a, a, ax);
  fnTo(Opcode::Sqrt, a);
  binTo("div", re, re, a);
  binTo("div", im, im, a);
  int k = cmp("eq", m, 0.0);
  selTo(re, k, x, re);
  selTo(im, k, y, im);
  put({k});
  free({ax, m, a});
  return fromParts(re, im, C);
}

std::optional<VReg> Lowerer::ComplexMath::expand(Opcode op, const std::vector<VReg>& ops) {
  VReg x = realPart(ops[0]), y = imagPart(ops[0]);
  switch (op) {
    case Opcode::Multiply: return multiply(ops[0], ops[1]);
    case Opcode::Divide: return divide(ops[0], ops[1]);
    case Opcode::Power: return pow(ops[0], ops[1]);
    case Opcode::Abs: return hypot(x, y);
    case Opcode::Exp: return exp(x, y, false);
    case Opcode::Expm1: return exp(x, y, true);
    case Opcode::Log: return log(x, y);
    case Opcode::Log1p: return log1p(x, y);
    case Opcode::Sqrt: return sqrt(x, y);
    case Opcode::Rsqrt: {
      VReg s = sqrt(x, y);
      VReg d = reciprocal(s);
      L.vfree(s);
      return d;
    }
    case Opcode::Tanh: return tanh(x, y);
    case Opcode::Tan: {
      // tan z = -i tanh(i z): tanh(-y + x i) = p + q i gives q - p i.
      VReg ny = neg(y);
      VReg w = tanh(ny, x);
      free({ny});
      negTo(realPart(w), realPart(w));
      return fromParts(imagPart(w), realPart(w), C);
    }
    case Opcode::Sin:
    case Opcode::Cos: return sinCos(x, y, op == Opcode::Cos);
    case Opcode::Logistic: return logistic(x, y);
    case Opcode::Sign: return sign(x, y);
    default: return std::nullopt;
  }
}


// A scalar complex constant, word by word.
VReg Lowerer::complexConstant(const Instruction& in) {
  ElementType rt = in.shape().elementType();
  const uint8_t* bytes = in.literal().rawElement(0);
  VReg d = valloc(rt);
  std::vector<int> regs = {d.r, d.hi};
  if (rt == ElementType::C128) regs.insert(regs.end(), {d.im, d.imh});
  for (size_t w = 0; w < regs.size(); ++w) {
    uint32_t word = 0;
    std::memcpy(&word, bytes + 4 * w, 4);
    e_.op("vmov.s32 {}, {}", vregs_.name(regs[w]), static_cast<int32_t>(word));
  }
  return d;
}

// std::complex == compares both parts (NaN parts are unequal); != is its negation.
VReg Lowerer::complexEquals(VReg a, VReg b, bool eq) {
  auto partEq = [&](VReg x, VReg y) {
    if (x.t == ElementType::F64) return pairCompare("eq", ElementType::F64, x, y);
    int m = malloc_();
    e_.op("vcmp.eq.f32 {}, {}, {}", M(m), V(x), V(y));
    return m;
  };
  int mr = partEq(realPart(a), realPart(b));
  int mi = partEq(imagPart(a), imagPart(b));
  e_.op("mand {}, {}, {}", M(mr), M(mr), M(mi));
  if (!eq) e_.op("mnot {}, {}", M(mr), M(mr));
  masks_.put(mi);
  VReg d = toMask01(mr);
  masks_.put(mr);
  return d;
}

VReg Lowerer::complexSelect(VReg pred, VReg a, VReg b, ElementType rt) {
  int m = malloc_();
  e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(pred));
  VReg d = valloc(rt);
  std::vector<std::array<int, 3>> regs = {{d.r, a.r, b.r}, {d.hi, a.hi, b.hi}};
  if (rt == ElementType::C128) regs.insert(regs.end(), {{d.im, a.im, b.im}, {d.imh, a.imh, b.imh}});
  for (auto [x, y, z] : regs)
    e_.op("vsel.s32 {}, {}, {}, {}", vregs_.name(x), M(m), vregs_.name(y), vregs_.name(z));
  masks_.put(m);
  return d;
}

// Converts with a complex operand or result.
std::optional<VReg> Lowerer::complexConvert(const Instruction& in, VReg x) {
  ElementType from = x.t, rt = in.shape().elementType();
  if (isComplexType(from) && isComplexType(rt)) {
    if (from == rt) return vcopy(x, rt);
    // Each part rounded (c128 -> c64) or widened exactly (c64 -> c128).
    auto part = [&](VReg p) {
      VReg d = valloc(partType(rt));
      if (rt == ElementType::C128) {
        e_.op("vcvt.f64.f32 {}, {}, 0", V(d), V(p));
        e_.op("vcvt.f64.f32 {}, {}, 1", H(d), V(p));
      } else {
        e_.op("vcvt.f32.f64 {}, {}, {}", V(d), V(p), H(p));
      }
      return d;
    };
    return fromParts(part(realPart(x)), part(imagPart(x)), rt);
  }
  if (!isComplexType(from)) return complexFromReal(x, rt);
  // HLO converts complex only to complex, but the interpreter converts the
  // operands of a dot or convolution with a real result (and of the GELU
  // custom call) this way: pred is z != 0, any other type the real part
  // converted.
  if (rt != ElementType::Pred) return lowerOp(in, {realPart(x)});
  VReg re = realPart(x), im = imagPart(x);
  int a = malloc_(), b = malloc_();
  if (re.t == ElementType::F32) {
    e_.op("vcmp.ne.f32 {}, {}, 0", M(a), V(re));
    e_.op("vcmp.ne.f32 {}, {}, 0", M(b), V(im));
  } else {
    VReg z = valloc(ElementType::F64);
    e_.op("vmov.s32 {}, 0", V(z));
    e_.op("vmov.s32 {}, 0", H(z));
    e_.op("vcmp.ne.f64 {}, {}, {}, {}, {}", M(a), V(re), H(re), V(z), H(z));
    e_.op("vcmp.ne.f64 {}, {}, {}, {}, {}", M(b), V(im), H(im), V(z), H(z));
    vfree(z);
  }
  e_.op("mor {}, {}, {}", M(a), M(a), M(b));
  masks_.put(b);
  return toMask01(a);
}

// ---- elementwise ops on complex values: the composed cells of the op table (op_table.cpp)

std::optional<VReg> Lowerer::complexConstantOp(const Instruction& in, const std::vector<VReg>&) {
  return complexConstant(in);
}

std::optional<VReg> Lowerer::complexConvertOp(const Instruction& in, const std::vector<VReg>& ops) {
  return complexConvert(in, ops[0]);
}

std::optional<VReg> Lowerer::complexAddSubOp(const Instruction& in, const std::vector<VReg>& ops) {
  return complexAdd(ops[0], ops[1], in.opcode() == Opcode::Subtract);
}

// -x flips the sign bit of each part (NaN payloads and zeros included), as std::complex negation does.
std::optional<VReg> Lowerer::complexNegateOp(const Instruction& in, const std::vector<VReg>& ops) {
  const ElementType pt = partType(ops[0].t);
  auto partNegate = [&](VReg a) {
    VReg d = vcopy(a, pt);
    int top = pt == ElementType::F32 ? d.r : d.hi;
    e_.op("vxor {}, {}, -2147483648", vregs_.name(top), vregs_.name(top));
    return d;
  };
  return fromParts(partNegate(realPart(ops[0])), partNegate(imagPart(ops[0])), in.shape().elementType());
}

std::optional<VReg> Lowerer::complexRealOp(const Instruction& in, const std::vector<VReg>& ops) {
  return vcopy(realPart(ops[0]), in.shape().elementType());
}

std::optional<VReg> Lowerer::complexImagOp(const Instruction& in, const std::vector<VReg>& ops) {
  return vcopy(imagPart(ops[0]), in.shape().elementType());
}

std::optional<VReg> Lowerer::complexFromPartsOp(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  const ElementType pt = partType(rt);
  return fromParts(vcopy(ops[0], pt), vcopy(ops[1], pt), rt);
}

std::optional<VReg> Lowerer::complexCompareOp(const Instruction& in, const std::vector<VReg>& ops) {
  return complexEquals(ops[0], ops[1], in.attrs().comparisonDirection == hlo::ComparisonDirection::EQ);
}

std::optional<VReg> Lowerer::complexSelectOp(const Instruction& in, const std::vector<VReg>& ops) {
  return complexSelect(ops[0], ops[1], ops[2], in.shape().elementType());
}

// Multiply, divide, power, abs, sign and the library functions: expansions.
std::optional<VReg> Lowerer::complexMathOp(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType ct = in.shape().elementType();
  for (const VReg& v : ops)
    if (isComplexType(v.t)) ct = v.t;
  return ComplexMath(*this, ct).expand(in.opcode(), ops);
}

}  // namespace tpu::codegen
