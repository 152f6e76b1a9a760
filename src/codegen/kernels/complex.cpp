// c64 and c128 in llo-gen. A complex value lives in the registers of its
// parts: c64 as two f32 registers (real r, imaginary hi: words 0 and 1 of
// each 8-byte element), c128 as two f64 register pairs (real r:hi,
// imaginary im:imh: words 0-1 and 2-3 of each 16-byte element). Ops whose
// result is a fixed sequence of part operations (add, subtract, negate,
// compares, selects, parts, converts) are composed from f32 and f64 ops;
// the ones that are std::complex library math on the host (multiply, divide,
// power, abs, the transcendentals) use the complex rows, which the
// simulator computes with the interpreter's kernels.
#include <array>
#include <cstring>

#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

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
      return complexRow((op == Opcode::Divide ? "vdiv" : "vpow") + suffix, {ops[0], ops[1]}, rt);
    case Opcode::Real:
      return vcopy(realPart(ops[0]), rt);
    case Opcode::Imag:
      return vcopy(imagPart(ops[0]), rt);
    case Opcode::Complex:
      return fromParts(vcopy(ops[0], pt), vcopy(ops[1], pt), rt);
    case Opcode::Abs:
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
  return complexRow(it->second + suffix, {ops[0]}, rt);
}

}  // namespace tpu::codegen
