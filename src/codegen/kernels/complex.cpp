// c64 and c128 in llo-gen. A complex value lives in the registers of its
// parts: c64 as two f32 registers (real r, imaginary hi: words 0 and 1 of
// each 8-byte element), c128 as two f64 register pairs (real r:hi,
// imaginary im:imh: words 0-1 and 2-3 of each 16-byte element). Ops whose
// result is a fixed sequence of part operations (add, subtract, negate,
// compares, selects, parts, converts) are composed from f32 and f64 ops.
// c64 multiply, divide, power, abs and the transcendentals are composed from
// f32 ALU and EUP instructions here (expandComplexC64: XLA's formulas, with
// scaling against overflow; errors measured in complex_math_test.cpp and
// stated in docs/DESIGN.md, "c64 library math from chip instructions");
// c128 ones still use the complex rows, which the simulator computes with
// the interpreter's kernels.
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

VReg Lowerer::complexMultiply(VReg a, VReg b) {
  ElementType t = a.t;
  if (t == ElementType::C64) {
    // XLA's product: (ar br - ai bi) + (ar bi + ai br) i, each product
    // rounded once (no Annex G recovery of infinities from NaN results).
    VReg ar = realPart(a), ai = imagPart(a), br = realPart(b), bi = imagPart(b);
    VReg re = binop("vmul.f32", ar, V(br), ElementType::F32);
    VReg t2 = binop("vmul.f32", ai, V(bi), ElementType::F32);
    e_.op("vsub.f32 {}, {}, {}", V(re), V(re), V(t2));
    VReg im = binop("vmul.f32", ar, V(bi), ElementType::F32);
    e_.op("vmul.f32 {}, {}, {}", V(t2), V(ai), V(br));
    e_.op("vadd.f32 {}, {}, {}", V(im), V(im), V(t2));
    vfree(t2);
    return fromParts(re, im, t);
  }
  VReg d = valloc(t);
  std::vector<int> out = {d.r, d.hi};
  std::string operands = fmt::format("{}, {}", V(a), H(a));
  if (t == ElementType::C128) {
    out.insert(out.end(), {d.im, d.imh});
    operands += fmt::format(", {}, {}", vregs_.name(a.im), vregs_.name(a.imh));
  }
  operands += fmt::format(", {}, {}", V(b), H(b));
  if (t == ElementType::C128) operands += fmt::format(", {}, {}", vregs_.name(b.im), vregs_.name(b.imh));
  for (size_t w = 0; w < out.size(); ++w)
    e_.op("vmul.{} {}, {}, {}", t == ElementType::C64 ? "c64" : "c128", vregs_.name(out[w]), operands, w);
  return d;
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

std::optional<VReg> Lowerer::lowerComplexOp(const Instruction& in, const std::vector<VReg>& ops) {
  Opcode op = in.opcode();
  ElementType rt = in.shape().elementType();
  // The complex type involved: of the result, else of the (last) complex operand.
  ElementType ct = rt;
  for (const VReg& v : ops)
    if (isComplexType(v.t)) ct = v.t;
  const bool c64 = ct == ElementType::C64;
  const ElementType pt = partType(ct);
  auto unsupported = [&]() -> std::optional<VReg> {
    fail(in, fmt::format("llo-gen: element type {} of '{}' is not supported for {}", hlo::elementTypeName(ct),
                         in.name(), hlo::opcodeName(op)));
    return std::nullopt;
  };
  auto H2 = [&](int r) { return vregs_.name(r); };

  // -x flips the sign bit (NaN payloads and zeros included), as std::complex negation does.
  auto partNegate = [&](VReg a) {
    VReg d = vcopy(a, pt);
    int top = pt == ElementType::F32 ? d.r : d.hi;
    e_.op("vxor {}, {}, -2147483648", H2(top), H2(top));
    return d;
  };
  // Mask of part equality (f64: the pair compare row).
  auto partEq = [&](VReg a, VReg b) {
    if (pt == ElementType::F64) return pairCompare("eq", ElementType::F64, a, b);
    int m = malloc_();
    e_.op("vcmp.eq.f32 {}, {}, {}", M(m), V(a), V(b));
    return m;
  };
  // A complex row applied once per result word.
  auto complexRow = [&](const std::string& mnemonic, const std::vector<VReg>& args, ElementType t) {
    VReg d = valloc(t);
    std::vector<int> out = {d.r, d.hi};
    if (t == ElementType::C128) out.insert(out.end(), {d.im, d.imh});
    if (t == ElementType::F32) out = {d.r};
    for (size_t w = 0; w < out.size(); ++w) {
      std::string operands;
      for (const VReg& z : args) {
        operands += fmt::format(", {}, {}", V(z), H(z));
        if (z.t == ElementType::C128) operands += fmt::format(", {}, {}", H2(z.im), H2(z.imh));
      }
      if (t == ElementType::F32)
        e_.op("{} {}{}", mnemonic, H2(out[w]), operands);
      else
        e_.op("{} {}{}, {}", mnemonic, H2(out[w]), operands, w);
    }
    return d;
  };
  const std::string suffix = c64 ? ".c64" : ".c128";

  switch (op) {
    case Opcode::Constant: {
      if (!in.shape().isScalar()) return unsupported();
      const uint8_t* bytes = in.literal().rawElement(0);
      VReg d = valloc(rt);
      std::vector<int> regs = {d.r, d.hi};
      if (rt == ElementType::C128) regs.insert(regs.end(), {d.im, d.imh});
      for (size_t w = 0; w < regs.size(); ++w) {
        uint32_t word = 0;
        std::memcpy(&word, bytes + 4 * w, 4);
        e_.op("vmov.s32 {}, {}", H2(regs[w]), static_cast<int32_t>(word));
      }
      return d;
    }
    case Opcode::Broadcast:
    case Opcode::Reshape:
    case Opcode::Bitcast:
    case Opcode::Copy:
      return vcopy(ops[0], rt);
    case Opcode::Add:
    case Opcode::Subtract:
      return complexAdd(ops[0], ops[1], op == Opcode::Subtract);
    case Opcode::Negate:
      return fromParts(partNegate(realPart(ops[0])), partNegate(imagPart(ops[0])), rt);
    case Opcode::Multiply:
      return complexMultiply(ops[0], ops[1]);
    case Opcode::Divide:
    case Opcode::Power:
      if (c64) return expandComplexC64(op, ops);
      return complexRow((op == Opcode::Divide ? "vdiv" : "vpow") + suffix, {ops[0], ops[1]}, rt);
    case Opcode::Real:
      return vcopy(realPart(ops[0]), rt);
    case Opcode::Imag:
      return vcopy(imagPart(ops[0]), rt);
    case Opcode::Complex:
      return fromParts(vcopy(ops[0], pt), vcopy(ops[1], pt), rt);
    case Opcode::Abs:
      if (c64) return hypotF32(realPart(ops[0]), imagPart(ops[0]));
      return complexRow("vabs" + suffix, {ops[0]}, rt);
    case Opcode::Compare: {
      // std::complex == compares both parts (NaN parts are unequal); != is its negation.
      auto dir = in.attrs().comparisonDirection;
      bool eq = dir == hlo::ComparisonDirection::EQ;
      if (!eq && dir != hlo::ComparisonDirection::NE) return unsupported();
      int mr = partEq(realPart(ops[0]), realPart(ops[1]));
      int mi = partEq(imagPart(ops[0]), imagPart(ops[1]));
      e_.op("mand {}, {}, {}", M(mr), M(mr), M(mi));
      if (!eq) e_.op("mnot {}, {}", M(mr), M(mr));
      masks_.put(mi);
      VReg d = toMask01(mr);
      masks_.put(mr);
      return d;
    }
    case Opcode::Select: {
      int m = malloc_();
      e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(ops[0]));
      VReg d = valloc(rt);
      VReg a = ops[1], b = ops[2];
      std::vector<std::array<int, 3>> regs = {{d.r, a.r, b.r}, {d.hi, a.hi, b.hi}};
      if (rt == ElementType::C128) regs.insert(regs.end(), {{d.im, a.im, b.im}, {d.imh, a.imh, b.imh}});
      for (auto [x, y, z] : regs) e_.op("vsel.s32 {}, {}, {}, {}", H2(x), M(m), H2(y), H2(z));
      masks_.put(m);
      return d;
    }
    case Opcode::Convert: {
      ElementType from = ops[0].t;
      if (isComplexType(from) && isComplexType(rt)) {
        if (from == rt) return vcopy(ops[0], rt);
        // Each part rounded (c128 -> c64) or widened exactly (c64 -> c128).
        auto part = [&](VReg x) {
          VReg d = valloc(partType(rt));
          if (rt == ElementType::C128) {
            e_.op("vcvt.f64.f32 {}, {}, 0", V(d), V(x));
            e_.op("vcvt.f64.f32 {}, {}, 1", H(d), V(x));
          } else {
            e_.op("vcvt.f32.f64 {}, {}, {}", V(d), V(x), H(x));
          }
          return d;
        };
        return fromParts(part(realPart(ops[0])), part(imagPart(ops[0])), rt);
      }
      if (isComplexType(from)) {
        // HLO converts complex only to complex, but the interpreter converts
        // the operands of a dot or convolution with a real result (and of
        // the GELU custom call) this way: pred is z != 0, any other type
        // the real part converted.
        if (rt == ElementType::Pred) {
          VReg re = realPart(ops[0]), im = imagPart(ops[0]);
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
        return lowerOp(in, {realPart(ops[0])});
      }
      return complexFromReal(ops[0], rt);
    }
    case Opcode::Map: {
      std::vector<VReg> out;
      if (!lowerComputation(*in.toApply(), ops, out) || out.size() != 1) return std::nullopt;
      return out[0];
    }
    default:
      break;
  }
  static const std::map<Opcode, const char*> kUnary = {
      {Opcode::Exp, "vexp"},     {Opcode::Expm1, "vexpm1"},       {Opcode::Log, "vlog"},
      {Opcode::Log1p, "vlog1p"}, {Opcode::Sqrt, "vsqrt"},         {Opcode::Rsqrt, "vrsqrt"},
      {Opcode::Tanh, "vtanh"},   {Opcode::Sin, "vsin"},           {Opcode::Cos, "vcos"},
      {Opcode::Tan, "vtan"},     {Opcode::Logistic, "vlogistic"}, {Opcode::Sign, "vsign"},
  };
  auto it = kUnary.find(op);
  if (it == kUnary.end() || ops.size() != 1 || !isComplexType(rt)) return unsupported();
  if (c64) return expandComplexC64(op, ops);
  return complexRow(it->second + suffix, {ops[0]}, rt);
}

// ---- c64 library math from f32 chip instructions ----

// |x + y i| without overflow or underflow on the way: with m = max(|x|, |y|)
// and n = min, m sqrt(1 + (n/m)^2); n == 0 gives m (0 for 0), an infinite
// part gives inf even beside a NaN (C's hypot). About 2 ulps.
VReg Lowerer::hypotF32(VReg x, VReg y) {
  const ElementType F = ElementType::F32;
  VReg ax = unop("vabs.f32", x, F), ay = unop("vabs.f32", y, F);
  VReg m = binop("vmax.f32", ax, V(ay), F), n = binop("vmin.f32", ax, V(ay), F);
  VReg h = binop("vdiv.f32", n, V(m), F);
  e_.op("vmul.f32 {}, {}, {}", V(h), V(h), V(h));
  e_.op("vadd.f32 {}, {}, 1.0", V(h), V(h));
  e_.op("vsqrt {}, {}", V(h), V(h));
  e_.op("vmul.f32 {}, {}, {}", V(h), V(h), V(m));
  int k = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(n));
  e_.op("vsel.f32 {}, {}, {}, {}", V(h), M(k), V(m), V(h));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(ax));
  e_.op("vsel.f32 {}, {}, {}, {}", V(h), M(k), V(ax), V(h));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(ay));
  e_.op("vsel.f32 {}, {}, {}, {}", V(h), M(k), V(ay), V(h));
  masks_.put(k);
  for (VReg v : {ax, ay, m, n}) vfree(v);
  return h;
}

// XLA's complex divide (elemental_ir_emitter): Smith's algorithm, dividing
// by the larger part of b first so nothing overflows on the way, then C99
// Annex G's recovery where both parts came out NaN: a zero divisor gives
// inf with the signs of a and b's real part; an infinite dividend over a
// finite divisor inf; a finite dividend over an infinite divisor zero.
VReg Lowerer::complexDivideC64(VReg a, VReg b) {
  const ElementType F = ElementType::F32;
  VReg ar0 = realPart(a), ai0 = imagPart(a), br0 = realPart(b), bi0 = imagPart(b);
  // Scaling by powers of two (exact) so no intermediate overflows: a
  // dividend part from 2^126 on is halved (u ratio + v is at most twice
  // it), a divisor part from 2^126 on halved too (den is at most twice
  // it) and a divisor below 2^-100 multiplied by 2^60 (den keeps its bits);
  // the quotient is multiplied back by the ratio of the factors.
  VReg ar = vcopy(ar0, F), ai = vcopy(ai0, F), br = vcopy(br0, F), bi = vcopy(bi0, F);
  VReg back = valloc(F);
  {
    VReg w = unop("vabs.f32", ar, F), w2 = unop("vabs.f32", ai, F);
    e_.op("vmax.f32 {}, {}, {}", V(w), V(w), V(w2));
    int big = malloc_();
    e_.op("vcmp.ge.f32 {}, {}, {}", M(big), V(w), fimm(0x1p126f));
    e_.op("vmov.f32 {}, 0.5", V(w2));
    e_.op("vsel.f32 {}, {}, {}, 1.0", V(w2), M(big), V(w2));  // dividend factor
    e_.op("vmul.f32 {}, {}, {}", V(ar), V(ar), V(w2));
    e_.op("vmul.f32 {}, {}, {}", V(ai), V(ai), V(w2));
    e_.op("vmov.f32 {}, 2.0", V(back));
    e_.op("vsel.f32 {}, {}, {}, 1.0", V(back), M(big), V(back));
    e_.op("vabs.f32 {}, {}", V(w), V(br));
    e_.op("vabs.f32 {}, {}", V(w2), V(bi));
    e_.op("vmax.f32 {}, {}, {}", V(w), V(w), V(w2));
    int tiny = malloc_();
    e_.op("vcmp.ge.f32 {}, {}, {}", M(big), V(w), fimm(0x1p126f));
    e_.op("vcmp.lt.f32 {}, {}, {}", M(tiny), V(w), fimm(0x1p-100f));
    e_.op("vmov.f32 {}, 0.5", V(w2));
    e_.op("vsel.f32 {}, {}, {}, 1.0", V(w2), M(big), V(w2));
    e_.op("vmov.f32 {}, {}", V(w), fimm(0x1p60f));
    e_.op("vsel.f32 {}, {}, {}, {}", V(w2), M(tiny), V(w), V(w2));  // divisor factor
    e_.op("vmul.f32 {}, {}, {}", V(br), V(br), V(w2));
    e_.op("vmul.f32 {}, {}, {}", V(bi), V(bi), V(w2));
    e_.op("vmul.f32 {}, {}, {}", V(back), V(back), V(w2));
    masks_.put(big);
    masks_.put(tiny);
    vfree(w);
    vfree(w2);
  }
  VReg abr = unop("vabs.f32", br, F), abi = unop("vabs.f32", bi, F);
  int m1 = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, {}", M(m1), V(abr), V(abi));
  auto pick = [&](VReg x, VReg y) {  // m1 ? x : y
    VReg d = valloc(F);
    e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m1), V(x), V(y));
    return d;
  };
  VReg p = pick(br, bi), q = pick(bi, br), u = pick(ar, ai), v = pick(ai, ar);
  VReg ratio = binop("vdiv.f32", p, V(q), F);
  VReg den = binop("vmul.f32", p, V(ratio), F);
  e_.op("vadd.f32 {}, {}, {}", V(den), V(den), V(q));
  VReg cr = binop("vmul.f32", u, V(ratio), F);
  e_.op("vadd.f32 {}, {}, {}", V(cr), V(cr), V(v));
  e_.op("vdiv.f32 {}, {}, {}", V(cr), V(cr), V(den));
  VReg ci = binop("vmul.f32", v, V(ratio), F);
  e_.op("vsub.f32 {}, {}, {}", V(ci), V(ci), V(u));
  e_.op("vdiv.f32 {}, {}, {}", V(ci), V(ci), V(den));
  // |br| >= |bi|: the imaginary part is (ai - ar ratio) / den.
  e_.op("vneg.f32 {}, {}", V(p), V(ci));
  e_.op("vsel.f32 {}, {}, {}, {}", V(ci), M(m1), V(ci), V(p));
  e_.op("vmul.f32 {}, {}, {}", V(cr), V(cr), V(back));
  e_.op("vmul.f32 {}, {}, {}", V(ci), V(ci), V(back));
  for (VReg x : {p, q, u, v, ratio, den, back}) vfree(x);

  // Both parts NaN: the recoveries, in XLA's priority (applied last wins).
  int nan = malloc_(), k = malloc_(), t = malloc_();
  e_.op("vcmp.ne.f32 {}, {}, {}", M(nan), V(cr), V(cr));
  e_.op("vcmp.ne.f32 {}, {}, {}", M(k), V(ci), V(ci));
  e_.op("mand {}, {}, {}", M(nan), M(nan), M(k));
  VReg aar = unop("vabs.f32", ar, F), aai = unop("vabs.f32", ai, F);
  // The unit with the sign of x where |x| is inf, else a signed zero.
  auto infUnit = [&](VReg x, VReg ax) {
    VReg d = valloc(F);
    e_.op("vmov.f32 {}, 1.0", V(d));
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(t), V(ax));
    e_.op("vsel.f32 {}, {}, {}, 0.0", V(d), M(t), V(d));
    copySignF32(d, x, F);
    return d;
  };
  // s * (x1 y1 + x2 y2) and s * (x2 y1 - x1 y2) into (re, im) where mask k.
  auto recover = [&](VReg x1, VReg x2, VReg y1, VReg y2, const char* s) {
    VReg re = binop("vmul.f32", x1, V(y1), F), w = binop("vmul.f32", x2, V(y2), F);
    e_.op("vadd.f32 {}, {}, {}", V(re), V(re), V(w));
    e_.op("vmul.f32 {}, {}, {}", V(re), V(re), s);
    VReg im = binop("vmul.f32", x2, V(y1), F);
    e_.op("vmul.f32 {}, {}, {}", V(w), V(x1), V(y2));
    e_.op("vsub.f32 {}, {}, {}", V(im), V(im), V(w));
    e_.op("vmul.f32 {}, {}, {}", V(im), V(im), s);
    e_.op("mand {}, {}, {}", M(k), M(k), M(nan));
    e_.op("vsel.f32 {}, {}, {}, {}", V(cr), M(k), V(re), V(cr));
    e_.op("vsel.f32 {}, {}, {}, {}", V(ci), M(k), V(im), V(ci));
    for (VReg x : {re, w, im}) vfree(x);
  };
  // Finite a over an infinite b: 0 * (a . unit(b)).
  {
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(abr));
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(t), V(abi));
    e_.op("mor {}, {}, {}", M(k), M(k), M(t));
    e_.op("vcmp.lt.f32 {}, {}, 0x7f800000", M(t), V(aar));
    e_.op("mand {}, {}, {}", M(k), M(k), M(t));
    e_.op("vcmp.lt.f32 {}, {}, 0x7f800000", M(t), V(aai));
    e_.op("mand {}, {}, {}", M(k), M(k), M(t));
    int keep = malloc_();
    e_.op("mor {}, {}, {}", M(keep), M(k), M(k));
    VReg ur = infUnit(br, abr), ui = infUnit(bi, abi);
    e_.op("mor {}, {}, {}", M(k), M(keep), M(keep));
    masks_.put(keep);
    recover(ar, ai, ur, ui, "0.0");
    vfree(ur);
    vfree(ui);
  }
  // Infinite a over a finite b: inf * (unit(a) . b).
  {
    e_.op("vcmp.lt.f32 {}, {}, 0x7f800000", M(k), V(abr));
    e_.op("vcmp.lt.f32 {}, {}, 0x7f800000", M(t), V(abi));
    e_.op("mand {}, {}, {}", M(k), M(k), M(t));
    int any = malloc_();
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(any), V(aar));
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(t), V(aai));
    e_.op("mor {}, {}, {}", M(any), M(any), M(t));
    e_.op("mand {}, {}, {}", M(k), M(k), M(any));
    e_.op("mor {}, {}, {}", M(any), M(k), M(k));
    VReg ur = infUnit(ar, aar), ui = infUnit(ai, aai);
    e_.op("mor {}, {}, {}", M(k), M(any), M(any));
    masks_.put(any);
    recover(ur, ui, br, bi, "0x7f800000");
    vfree(ur);
    vfree(ui);
  }
  // A zero divisor (unless a is NaN + NaN i): copysign(inf, br) * a.
  {
    e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(br));
    e_.op("vcmp.eq.f32 {}, {}, 0.0", M(t), V(bi));
    e_.op("mand {}, {}, {}", M(k), M(k), M(t));
    int both = malloc_();
    e_.op("vcmp.ne.f32 {}, {}, {}", M(both), V(ar), V(ar));
    e_.op("vcmp.ne.f32 {}, {}, {}", M(t), V(ai), V(ai));
    e_.op("mand {}, {}, {}", M(both), M(both), M(t));
    e_.op("mnot {}, {}", M(both), M(both));
    e_.op("mand {}, {}, {}", M(k), M(k), M(both));
    e_.op("mand {}, {}, {}", M(k), M(k), M(nan));
    masks_.put(both);
    VReg s = valloc(F);
    e_.op("vmov.f32 {}, 0x7f800000", V(s));
    copySignF32(s, br, F);
    VReg zr = binop("vmul.f32", s, V(ar), F), zi = binop("vmul.f32", s, V(ai), F);
    e_.op("vsel.f32 {}, {}, {}, {}", V(cr), M(k), V(zr), V(cr));
    e_.op("vsel.f32 {}, {}, {}, {}", V(ci), M(k), V(zi), V(ci));
    for (VReg x : {s, zr, zi}) vfree(x);
  }
  for (int x : {m1, nan, k, t}) masks_.put(x);
  for (VReg x : {abr, abi, aar, aai, ar, ai, br, bi}) vfree(x);
  return fromParts(cr, ci, ElementType::C64);
}

// e^z = e^x (cos y + i sin y) as (e^(x/2) cos y) e^(x/2), so the result
// stays finite where e^x alone overflows; y == 0 keeps the imaginary part
// y (C's cexp(inf + 0i) = inf + 0i). With minusOne, e^z - 1 keeps its
// relative precision near 0: the real part is expm1(x) cos y - 2 sin^2(y/2).
VReg Lowerer::complexExpC64(VReg x, VReg y, bool minusOne) {
  const ElementType F = ElementType::F32;
  VReg e = binop("vmul.f32", x, "0.5", F);
  e_.op("vexp {}, {}", V(e), V(e));
  VReg c = unop("vcos", y, F), s = unop("vsin", y, F);
  VReg im = binop("vmul.f32", e, V(s), F);
  e_.op("vmul.f32 {}, {}, {}", V(im), V(im), V(e));
  VReg re;
  if (!minusOne) {
    re = binop("vmul.f32", e, V(c), F);
    e_.op("vmul.f32 {}, {}, {}", V(re), V(re), V(e));
  } else {
    re = expandExpm1F32(x, F);
    e_.op("vmul.f32 {}, {}, {}", V(re), V(re), V(c));
    e_.op("vmul.f32 {}, {}, 0.5", V(s), V(y));
    e_.op("vsin {}, {}", V(s), V(s));
    e_.op("vmul.f32 {}, {}, {}", V(s), V(s), V(s));
    e_.op("vadd.f32 {}, {}, {}", V(s), V(s), V(s));
    e_.op("vsub.f32 {}, {}, {}", V(re), V(re), V(s));
  }
  int k = malloc_();
  if (!minusOne) {
    // e^-inf = 0 whatever y (cos inf would make it NaN): C's cexp.
    e_.op("vcmp.ne.f32 {}, {}, {}", M(k), V(x), fimm(-std::numeric_limits<float>::infinity()));
    e_.op("vsel.f32 {}, {}, {}, 0.0", V(re), M(k), V(re));
    e_.op("vsel.f32 {}, {}, {}, 0.0", V(im), M(k), V(im));
    // e^(inf + i y) for y inf or NaN: inf + NaN i (C's cexp), not NaN + NaN i.
    int n = malloc_();
    e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(x));
    e_.op("vcmp.ne.f32 {}, {}, {}", M(n), V(re), V(re));
    e_.op("mand {}, {}, {}", M(k), M(k), M(n));
    e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(x), V(re));
    masks_.put(n);
  }
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(y));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(y), V(im));
  masks_.put(k);
  for (VReg v : {e, c, s}) vfree(v);
  return fromParts(re, im, ElementType::C64);
}

// ln z = ln|z| + i atan2(y, x). ln|z| with m = max(|x|, |y|), n = min:
//   1/2 <= m < 2:  log1p((m - 1)(m + 1) + n^2) / 2   (no cancellation at |z| ~ 1)
//   otherwise:     ln m + log1p((n/m)^2) / 2          (no overflow)
// An infinite part gives +inf even beside a NaN (C's clog).
VReg Lowerer::complexLogC64(VReg x, VReg y) {
  const ElementType F = ElementType::F32;
  VReg ax = unop("vabs.f32", x, F), ay = unop("vabs.f32", y, F);
  VReg m = binop("vmax.f32", ax, V(ay), F), n = binop("vmin.f32", ax, V(ay), F);
  int k = malloc_(), t = malloc_();
  VReg r = binop("vdiv.f32", n, V(m), F);
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(n));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(k), V(n), V(r));  // 0 / 0
  e_.op("vmul.f32 {}, {}, {}", V(r), V(r), V(r));
  VReg re = expandLog1pF32(r, F);
  e_.op("vmul.f32 {}, {}, 0.5", V(re), V(re));
  VReg lm = unop("vlog", m, F);
  e_.op("vadd.f32 {}, {}, {}", V(re), V(re), V(lm));
  VReg a = binop("vsub.f32", m, "1.0", F);
  e_.op("vadd.f32 {}, {}, 1.0", V(lm), V(m));
  e_.op("vmul.f32 {}, {}, {}", V(a), V(a), V(lm));
  e_.op("vmul.f32 {}, {}, {}", V(r), V(n), V(n));
  e_.op("vadd.f32 {}, {}, {}", V(a), V(a), V(r));
  VReg near = expandLog1pF32(a, F);
  e_.op("vmul.f32 {}, {}, 0.5", V(near), V(near));
  e_.op("vcmp.ge.f32 {}, {}, 0.5", M(k), V(m));
  e_.op("vcmp.lt.f32 {}, {}, 2.0", M(t), V(m));
  e_.op("mand {}, {}, {}", M(k), M(k), M(t));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(near), V(re));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(ax));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(ax), V(re));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(ay));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(ay), V(re));
  masks_.put(k);
  masks_.put(t);
  for (VReg v : {ax, ay, m, n, r, lm, a, near}) vfree(v);
  VReg im = expandAtan2F32(y, x, F);
  return fromParts(re, im, ElementType::C64);
}

// ln(1 + z): ln(u + y i) with u = 1 + x rounded (and y + 0, as the complex
// sum (1 + 0i) + z has it: -0 becomes +0 on the branch cut), except for |x|, |y| < 1/2
// where the real part is log1p(x (2 + x) + y^2) / 2 (keeps the relative
// precision of small z, which 1 + x would round away).
VReg Lowerer::complexLog1pC64(VReg x, VReg y) {
  const ElementType F = ElementType::F32;
  VReg u = binop("vadd.f32", x, "1.0", F);
  VReg yp = binop("vadd.f32", y, "0.0", F);  // (1 + 0i) + z: -0 + 0 = +0
  VReg z = complexLogC64(u, yp);
  vfree(yp);
  VReg re = realPart(z);
  VReg s = binop("vadd.f32", x, "2.0", F);
  e_.op("vmul.f32 {}, {}, {}", V(s), V(s), V(x));
  VReg y2 = binop("vmul.f32", y, V(y), F);
  e_.op("vadd.f32 {}, {}, {}", V(s), V(s), V(y2));
  VReg l = expandLog1pF32(s, F);
  e_.op("vmul.f32 {}, {}, 0.5", V(l), V(l));
  e_.op("vabs.f32 {}, {}", V(s), V(x));
  e_.op("vabs.f32 {}, {}", V(y2), V(y));
  e_.op("vmax.f32 {}, {}, {}", V(s), V(s), V(y2));
  int k = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, 0.5", M(k), V(s));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(l), V(re));
  masks_.put(k);
  for (VReg v : {u, s, y2, l}) vfree(v);
  return z;
}

// sqrt(z) by t = sqrt((|x| + |z|) / 2): x >= 0 gives t + i y / 2t, x < 0
// gives |y| / 2t + i copysign(t, y). Parts beyond 2^100 are scaled by 1/4
// and below 2^-100 by 2^50 first (t back by 2 or 2^-25), so |x| + |z|
// neither overflows nor loses subnormal bits. Special values as C's csqrt:
// t == 0 gives 0 + y i, an infinite y gives inf + y i.
VReg Lowerer::complexSqrtC64(VReg x, VReg y) {
  const ElementType F = ElementType::F32;
  VReg ax = unop("vabs.f32", x, F), ay = unop("vabs.f32", y, F);
  VReg m = binop("vmax.f32", ax, V(ay), F);
  int big = malloc_(), tiny = malloc_();
  e_.op("vcmp.gt.f32 {}, {}, {}", M(big), V(m), fimm(0x1p100f));
  e_.op("vcmp.lt.f32 {}, {}, {}", M(tiny), V(m), fimm(0x1p-100f));
  VReg sc = valloc(F), back = valloc(F), w = valloc(F);
  e_.op("vmov.f32 {}, 0.25", V(sc));
  e_.op("vsel.f32 {}, {}, {}, 1.0", V(sc), M(big), V(sc));
  e_.op("vmov.f32 {}, {}", V(w), fimm(0x1p50f));
  e_.op("vsel.f32 {}, {}, {}, {}", V(sc), M(tiny), V(w), V(sc));
  e_.op("vmov.f32 {}, 2.0", V(back));
  e_.op("vsel.f32 {}, {}, {}, 1.0", V(back), M(big), V(back));
  e_.op("vmov.f32 {}, {}", V(w), fimm(0x1p-25f));
  e_.op("vsel.f32 {}, {}, {}, {}", V(back), M(tiny), V(w), V(back));
  e_.op("vmul.f32 {}, {}, {}", V(ax), V(ax), V(sc));
  e_.op("vmul.f32 {}, {}, {}", V(m), V(ay), V(sc));  // |y| scaled
  VReg h = hypotF32(ax, m);
  e_.op("vadd.f32 {}, {}, {}", V(h), V(h), V(ax));
  e_.op("vmul.f32 {}, {}, 0.5", V(h), V(h));
  e_.op("vsqrt {}, {}", V(h), V(h));
  e_.op("vmul.f32 {}, {}, {}", V(h), V(h), V(back));  // t
  e_.op("vadd.f32 {}, {}, {}", V(w), V(h), V(h));
  VReg q = binop("vdiv.f32", y, V(w), F);   // y / 2t
  VReg qa = unop("vabs.f32", q, F);
  VReg st = vcopy(h, F);
  copySignF32(st, y, F);
  int k = big;
  e_.op("vcmp.ge.f32 {}, {}, 0.0", M(k), V(x));
  VReg re = valloc(F), im = valloc(F);
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(h), V(qa));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(q), V(st));
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(h));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(h), V(re));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(y), V(im));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(k), V(ay));
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(ay), V(re));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(y), V(im));
  masks_.put(big);
  masks_.put(tiny);
  for (VReg v : {ax, ay, m, sc, back, w, h, q, qa, st}) vfree(v);
  return fromParts(re, im, ElementType::C64);
}

// tanh(x + y i) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y)
// (both terms of the denominator >= 0: no cancellation); from |x| > 10 on,
// copysign(1, x) + i 4 sin y cos y e^(-2|x|).
VReg Lowerer::complexTanhC64(VReg x, VReg y) {
  const ElementType F = ElementType::F32;
  auto [ch, sh] = coshSinhF32(x, F);
  VReg s = unop("vsin", y, F), c = unop("vcos", y, F);
  VReg den = binop("vmul.f32", sh, V(sh), F), w = binop("vmul.f32", c, V(c), F);
  e_.op("vadd.f32 {}, {}, {}", V(den), V(den), V(w));
  VReg re = binop("vmul.f32", sh, V(ch), F);
  e_.op("vdiv.f32 {}, {}, {}", V(re), V(re), V(den));
  e_.op("vmul.f32 {}, {}, {}", V(s), V(s), V(c));  // sin y cos y
  VReg im = binop("vdiv.f32", s, V(den), F);
  int k = malloc_();
  e_.op("vabs.f32 {}, {}", V(w), V(x));
  e_.op("vcmp.gt.f32 {}, {}, 10.0", M(k), V(w));
  e_.op("vmul.f32 {}, {}, -2.0", V(w), V(w));
  e_.op("vexp {}, {}", V(w), V(w));
  e_.op("vmul.f32 {}, {}, {}", V(w), V(w), V(s));
  e_.op("vmul.f32 {}, {}, 4.0", V(w), V(w));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(w), V(im));
  // x = +-inf: +-1 + 0i with the sign of y (C's ctanh), even for y inf.
  int z = malloc_();
  e_.op("vand {}, {}, 2147483647", V(w), V(x));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(z), V(w));
  e_.op("vand {}, {}, -2147483648", V(w), V(y));
  e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(z), V(w), V(im));
  masks_.put(z);
  e_.op("vmov.f32 {}, 1.0", V(w));
  copySignF32(w, x, F);
  e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(w), V(re));
  masks_.put(k);
  for (VReg v : {ch, sh, s, c, den, w}) vfree(v);
  return fromParts(re, im, ElementType::C64);
}

// sin(x + y i) = sin x cosh y + i cos x sinh y;
// cos(x + y i) = cos x cosh y - i sin x sinh y. sin keeps a zero real part
// x (0 * cosh(inf) would be NaN).
VReg Lowerer::complexSinCosC64(VReg x, VReg y, bool cos) {
  const ElementType F = ElementType::F32;
  auto [ch, sh] = coshSinhF32(y, F);
  VReg s = unop("vsin", x, F), c = unop("vcos", x, F);
  VReg re = binop("vmul.f32", cos ? c : s, V(ch), F);
  VReg im = binop("vmul.f32", cos ? s : c, V(sh), F);
  if (cos) {
    e_.op("vneg.f32 {}, {}", V(im), V(im));
  } else {
    int k = malloc_();
    e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(x));
    e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(x), V(re));
    masks_.put(k);
  }
  for (VReg v : {ch, sh, s, c}) vfree(v);
  return fromParts(re, im, ElementType::C64);
}

// a^b = e^(b ln a). For a = 0, ln a = -inf + 0i: Re b > 0 gives e^(-inf
// + ...) = 0 (complexExpC64's C special case); 0^0 is 1 + 0i as in numpy,
// XLA's elemental emitter and the interpreter (e^(0 ln 0) would be NaN).
VReg Lowerer::complexPowC64(VReg a, VReg b) {
  VReg l = complexLogC64(realPart(a), imagPart(a));
  VReg t = complexMultiply(b, l);
  vfree(l);
  VReg r = complexExpC64(realPart(t), imagPart(t), false);
  vfree(t);
  int k = malloc_(), m = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(realPart(a)));
  for (VReg p : {imagPart(a), realPart(b), imagPart(b)}) {
    e_.op("vcmp.eq.f32 {}, {}, 0.0", M(m), V(p));
    e_.op("mand {}, {}, {}", M(k), M(k), M(m));
  }
  e_.op("mnot {}, {}", M(k), M(k));
  VReg re = realPart(r), im = imagPart(r);
  e_.op("vsel.f32 {}, {}, {}, 1.0", V(re), M(k), V(re));
  e_.op("vsel.f32 {}, {}, {}, 0.0", V(im), M(k), V(im));
  masks_.put(k);
  masks_.put(m);
  return r;
}

std::optional<VReg> Lowerer::expandComplexC64(Opcode op, const std::vector<VReg>& ops) {
  const ElementType F = ElementType::F32;
  VReg x = realPart(ops[0]), y = imagPart(ops[0]);
  // (1 + 0i) / z.
  auto reciprocal = [&](VReg z) {
    VReg one = valloc(ElementType::C64);
    e_.op("vmov.f32 {}, 1.0", V(one));
    e_.op("vmov.f32 {}, 0.0", H(one));
    VReg d = complexDivideC64(one, z);
    vfree(one);
    return d;
  };
  switch (op) {
    case Opcode::Divide:
      return complexDivideC64(ops[0], ops[1]);
    case Opcode::Power:
      return complexPowC64(ops[0], ops[1]);
    case Opcode::Exp:
      return complexExpC64(x, y, false);
    case Opcode::Expm1:
      return complexExpC64(x, y, true);
    case Opcode::Log:
      return complexLogC64(x, y);
    case Opcode::Log1p:
      return complexLog1pC64(x, y);
    case Opcode::Sqrt:
      return complexSqrtC64(x, y);
    case Opcode::Rsqrt: {
      VReg s = complexSqrtC64(x, y);
      VReg d = reciprocal(s);
      vfree(s);
      return d;
    }
    case Opcode::Tanh:
      return complexTanhC64(x, y);
    case Opcode::Tan: {
      // tan z = -i tanh(i z): tanh(-y + x i) = p + q i gives q - p i.
      VReg ny = unop("vneg.f32", y, F);
      VReg w = complexTanhC64(ny, x);
      vfree(ny);
      e_.op("vneg.f32 {}, {}", V(w), V(w));
      return fromParts(imagPart(w), realPart(w), ElementType::C64);
    }
    case Opcode::Sin:
    case Opcode::Cos:
      return complexSinCosC64(x, y, op == Opcode::Cos);
    case Opcode::Logistic: {
      // 1 / (1 + e^-z), as the interpreter and XLA compose it, but with
      // the real part of 1 + e^-z for |x| < 1 as 2 cos^2(y/2) + expm1(-x)
      // cos y, which does not cancel near the poles z = (2k + 1) pi i.
      VReg nx = unop("vneg.f32", x, F), ny = unop("vneg.f32", y, F);
      VReg e = complexExpC64(nx, ny, false);
      vfree(ny);
      e_.op("vadd.f32 {}, {}, 1.0", V(e), V(e));
      VReg em = expandExpm1F32(nx, F);
      VReg c = unop("vcos", y, F);
      e_.op("vmul.f32 {}, {}, {}", V(em), V(em), V(c));
      e_.op("vmul.f32 {}, {}, 0.5", V(c), V(y));
      e_.op("vcos {}, {}", V(c), V(c));
      e_.op("vmul.f32 {}, {}, {}", V(c), V(c), V(c));
      e_.op("vadd.f32 {}, {}, {}", V(c), V(c), V(c));
      e_.op("vadd.f32 {}, {}, {}", V(em), V(em), V(c));
      e_.op("vabs.f32 {}, {}", V(c), V(x));
      int k = malloc_();
      e_.op("vcmp.lt.f32 {}, {}, 1.0", M(k), V(c));
      e_.op("vsel.f32 {}, {}, {}, {}", V(e), M(k), V(em), V(e));
      masks_.put(k);
      for (VReg v : {nx, em, c}) vfree(v);
      VReg d = reciprocal(e);
      vfree(e);
      return d;
    }
    case Opcode::Sign: {
      // z / |z|, z itself where |z| is 0; z first divided by max(|x|, |y|)
      // so |z| neither overflows nor underflows.
      VReg ax = unop("vabs.f32", x, F), m = unop("vabs.f32", y, F);
      e_.op("vmax.f32 {}, {}, {}", V(m), V(m), V(ax));
      VReg re = binop("vdiv.f32", x, V(m), F), im = binop("vdiv.f32", y, V(m), F);
      VReg a = binop("vmul.f32", re, V(re), F);
      e_.op("vmul.f32 {}, {}, {}", V(ax), V(im), V(im));
      e_.op("vadd.f32 {}, {}, {}", V(a), V(a), V(ax));
      e_.op("vsqrt {}, {}", V(a), V(a));
      e_.op("vdiv.f32 {}, {}, {}", V(re), V(re), V(a));
      e_.op("vdiv.f32 {}, {}, {}", V(im), V(im), V(a));
      int k = malloc_();
      e_.op("vcmp.eq.f32 {}, {}, 0.0", M(k), V(m));
      e_.op("vsel.f32 {}, {}, {}, {}", V(re), M(k), V(x), V(re));
      e_.op("vsel.f32 {}, {}, {}, {}", V(im), M(k), V(y), V(im));
      masks_.put(k);
      for (VReg v : {ax, m, a}) vfree(v);
      return fromParts(re, im, ElementType::C64);
    }
    default:
      return std::nullopt;
  }
}

}  // namespace tpu::codegen
