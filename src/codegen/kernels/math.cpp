// Library math from what a TPU has: the vector ALU (add, multiply, compare,
// select, bit operations) and the EUP's basic transcendentals (exp, log,
// sqrt, reciprocal, divide). Functions a TPU has no instruction for (erf,
// the inverse trigonometric and hyperbolic functions, atan2, log1p) are
// expanded here into instruction sequences, as XLA's elemental emitter
// expands them, so simulated time reflects what they cost and the chip
// computes them with its own arithmetic rather than the interpreter's.
//
// Everything is computed in f32 lanes; narrow floats are rounded once by the
// caller's normalize(). Polynomial coefficients are our own fits
// (utils/fit_math.py for atan and asin); math_test.cpp measures every
// expansion against double libm in ulps and pins the bound.
#include <bit>
#include <cstdint>

#include <fmt/format.h>

#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// An f32 immediate written as its bits, so the value is exact.
std::string imm(float c) { return fmt::format("{:#x}", std::bit_cast<uint32_t>(c)); }

// pi/2 as an f32 head plus the f32 nearest the rest, so that c + q adds
// pi/2's missing bits to q before rounding (the head alone is 4.4e-8 off).
constexpr float kPio2Hi = 1.57079637050628662109375f;
constexpr float kPio2Lo = -4.37113900018624283e-8f;

// atan(t) = t + t z P(z), z = t^2, |t| <= tan(pi/8): 0.64 ulps in f32.
constexpr float kAtanP[] = {-0.3333331346511841f, 0.19998441636562347f, -0.1424306482076645f,
                            0.10590773075819016f, -0.060713041573762894f};
// asin(t) = t + t z P(z), z = t^2, |t| <= 0.5: 0.60 ulps in f32.
constexpr float kAsinP[] = {0.16666659712791443f, 0.07500503957271576f, 0.04451730102300644f,
                            0.031803760677576065f, 0.014456047676503658f, 0.03748978301882744f};

}  // namespace

// p = c[n] v^n + ... + c[0], by Horner steps.
VReg Lowerer::hornerF32(const float* c, int n, VReg v, ElementType rt) {
  VReg p = binop("vmul.f32", v, imm(c[n]), rt);
  for (int k = n - 1; k >= 1; --k) {
    e_.op("vadd.f32 {}, {}, {}", V(p), V(p), imm(c[k]));
    e_.op("vmul.f32 {}, {}, {}", V(p), V(p), V(v));
  }
  e_.op("vadd.f32 {}, {}, {}", V(p), V(p), imm(c[0]));
  return p;
}

// t + t z P(z) with z = t^2: the odd series of atan and asin near 0.
VReg Lowerer::oddSeriesF32(VReg t, const float* c, int n, ElementType rt) {
  VReg z = binop("vmul.f32", t, V(t), rt);
  VReg p = hornerF32(c, n, z, rt);
  VReg tz = binop("vmul.f32", t, V(z), rt);
  e_.op("vmul.f32 {}, {}, {}", V(p), V(p), V(tz));
  e_.op("vadd.f32 {}, {}, {}", V(p), V(p), V(t));
  vfree(z);
  vfree(tz);
  return p;
}

// r := |r| with the sign bit of x (NaNs keep their payload).
void Lowerer::copySignF32(VReg r, VReg x, ElementType rt) {
  VReg sign = binop("vand", x, "-2147483648", rt);
  e_.op("vand {}, {}, 2147483647", V(r), V(r));
  e_.op("vor {}, {}, {}", V(r), V(r), V(sign));
  vfree(sign);
}

// d := k pi/2 - q, as k (head - (q - tail)): the tail enters before the
// head's rounding (k = 1 or 2; d may be q).
void Lowerer::multipleOfHalfPiMinusF32(VReg d, VReg q, int k) {
  e_.op("vsub.f32 {}, {}, {}", V(d), V(q), imm(static_cast<float>(k) * kPio2Lo));
  e_.op("vneg.f32 {}, {}", V(d), V(d));
  e_.op("vadd.f32 {}, {}, {}", V(d), V(d), imm(static_cast<float>(k) * kPio2Hi));
}

// erf in f32 from the vector ALU and the EUP's exp, instead of a
// library-call row. a = |x|:
//   a < 1:      a * P(a^2), P of degree 6 (relative error);
//   1 <= a:     1 - e^(-a^2) * R(min(a, 4)), R of degree 10 fitted to
//               erfc(a) e^(a^2) on [1, 4] (erf rounds to 1 from 3.92 on);
// then NaN passed through and the sign of x put back (so -0 stays -0).
// Coefficients: weighted least squares on Chebyshev points with numpy,
// rounded to f32. Measured against double libm over [-5, 5] densely and
// every decade down to 1e-38: at most 2.4 ulps (math_test.cpp pins 4).
VReg Lowerer::expandErfF32(VReg x, ElementType rt) {
  static constexpr float kP[] = {1.128379225730896f,     -0.3761262893676758f,   0.11283612251281738f,
                                 -0.026854805648326874f, 0.005190048832446337f,  -0.0008024311973713338f,
                                 7.898066542111337e-05f};
  static constexpr float kR[] = {0.9922682046890259f,   -1.082141637802124f,     0.8737443089485168f,
                                 -0.5418185591697693f,  0.2575716972351074f,     -0.09242025762796402f,
                                 0.02443726547062397f,  -0.004594458267092705f,  0.000579196959733963f,
                                 -4.378835001261905e-05f, 1.4981616232034867e-06f};
  VReg a = unop("vabs.f32", x, rt);
  VReg z = binop("vmul.f32", a, V(a), rt);
  VReg p = hornerF32(kP, 6, z, rt);
  VReg small = binop("vmul.f32", a, V(p), rt);
  VReg ac = binop("vmin.f32", a, "4.0", rt);
  VReg zc = binop("vmul.f32", ac, V(ac), rt);
  e_.op("vneg.f32 {}, {}", V(zc), V(zc));
  VReg ex = unop("vexp", zc, rt);
  VReg r = hornerF32(kR, 10, ac, rt);
  e_.op("vmul.f32 {}, {}, {}", V(r), V(r), V(ex));
  e_.op("vsub.f32 {}, {}, 1.0", V(r), V(r));  // -(1 - e R), negated below
  e_.op("vneg.f32 {}, {}", V(r), V(r));
  int m = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, 1.0", M(m), V(a));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(small), V(r));
  e_.op("vcmp.ne.f32 {}, {}, {}", M(m), V(x), V(x));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(x), V(r));
  masks_.put(m);
  copySignF32(r, x, rt);
  for (VReg v : {a, z, p, small, ac, zc, ex}) vfree(v);
  return r;
}

// Goldberg's form: with u = 1 + x rounded, ln(u) * x / (u - 1) is accurate
// to a few ulps where ln(1 + x) loses the low bits of x. u == 1 gives x
// itself (-0 stays -0); u == inf gives inf; x < -1 gives NaN (ln of a
// negative number).
VReg Lowerer::expandLog1pF32(VReg x, ElementType rt) {
  VReg u = binop("vadd.f32", x, "1.0", rt);
  VReg l = unop("vlog", u, rt);
  VReg um1 = binop("vsub.f32", u, "1.0", rt);
  VReg q = binop("vdiv.f32", x, V(um1), rt);
  VReg d = binop("vmul.f32", l, V(q), rt);
  int m = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 1.0", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(x), V(d));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(l), V(d));
  masks_.put(m);
  for (VReg v : {u, l, um1, q}) vfree(v);
  return d;
}

// atan(a) for a >= 0 (inf and NaN included) by the classic reduction to
// |u| <= tan(pi/8):
//   a <= tan(pi/8):           atan(a)
//   a <= tan(3 pi/8):  pi/4 + atan((a - 1) / (a + 1))
//   else:              pi/2 + atan(-1 / a)
// the multiple of pi/4 added as head + tail. `onlyToOne`: a <= 1 is known
// (atan2's ratio), so the last range is not emitted.
VReg Lowerer::atanOfNonNegativeF32(VReg a, bool onlyToOne, ElementType rt) {
  int mid = malloc_(), big = malloc_();
  e_.op("vcmp.gt.f32 {}, {}, {}", M(mid), V(a), imm(0.41421356237309503f));
  VReg u = vcopy(a, rt);
  VReg num = binop("vsub.f32", a, "1.0", rt);
  VReg den = binop("vadd.f32", a, "1.0", rt);
  VReg red = binop("vdiv.f32", num, V(den), rt);
  e_.op("vsel.f32 {}, {}, {}, {}", V(u), M(mid), V(red), V(u));
  VReg hi = valloc(rt), lo = valloc(rt);
  e_.op("vmov.f32 {}, {}", V(hi), imm(kPio2Hi / 2));
  e_.op("vsel.f32 {}, {}, {}, 0.0", V(hi), M(mid), V(hi));
  e_.op("vmov.f32 {}, {}", V(lo), imm(kPio2Lo / 2));
  e_.op("vsel.f32 {}, {}, {}, 0.0", V(lo), M(mid), V(lo));
  if (!onlyToOne) {
    e_.op("vcmp.gt.f32 {}, {}, {}", M(big), V(a), imm(2.414213562373095f));
    VReg c = unop("vrecip", a, rt);
    e_.op("vneg.f32 {}, {}", V(c), V(c));
    e_.op("vsel.f32 {}, {}, {}, {}", V(u), M(big), V(c), V(u));
    e_.op("vmov.f32 {}, {}", V(c), imm(kPio2Hi));
    e_.op("vsel.f32 {}, {}, {}, {}", V(hi), M(big), V(c), V(hi));
    e_.op("vmov.f32 {}, {}", V(c), imm(kPio2Lo));
    e_.op("vsel.f32 {}, {}, {}, {}", V(lo), M(big), V(c), V(lo));
    vfree(c);
  }
  VReg q = oddSeriesF32(u, kAtanP, 4, rt);
  e_.op("vadd.f32 {}, {}, {}", V(q), V(q), V(lo));
  e_.op("vadd.f32 {}, {}, {}", V(q), V(q), V(hi));
  masks_.put(mid);
  masks_.put(big);
  for (VReg v : {u, num, den, red, hi, lo}) vfree(v);
  return q;
}

VReg Lowerer::expandAtanF32(VReg x, ElementType rt) {
  VReg a = unop("vabs.f32", x, rt);
  VReg r = atanOfNonNegativeF32(a, false, rt);
  copySignF32(r, x, rt);
  vfree(a);
  return r;
}

// atan2(y, x) from atan of min(|x|, |y|) / max(|x|, |y|) in [0, 1], then
// the octant: |y| > |x| gives pi/2 - r, x < 0 (its sign bit, so -0 counts)
// gives pi - r, and the sign of y. 0/0 reads as 0 and inf/inf as 1, which
// gives C's answers for the signed zeros and infinities; a NaN operand
// gives NaN.
VReg Lowerer::expandAtan2F32(VReg y, VReg x, ElementType rt) {
  VReg ax = unop("vabs.f32", x, rt), ay = unop("vabs.f32", y, rt);
  VReg mn = binop("vmin.f32", ax, V(ay), rt), mx = binop("vmax.f32", ax, V(ay), rt);
  VReg t = binop("vdiv.f32", mn, V(mx), rt);
  int m = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 0.0", M(m), V(mx));
  e_.op("vsel.f32 {}, {}, {}, {}", V(t), M(m), V(mx), V(t));  // 0 / 0 -> 0
  VReg one = valloc(rt);
  e_.op("vmov.f32 {}, 1.0", V(one));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(m), V(mn));
  e_.op("vsel.f32 {}, {}, {}, {}", V(t), M(m), V(one), V(t));  // inf / inf -> 1
  VReg r = atanOfNonNegativeF32(t, true, rt);
  // |y| > |x|: pi/2 - r = hi - (r - lo).
  VReg alt = valloc(rt);
  multipleOfHalfPiMinusF32(alt, r, 1);
  e_.op("vcmp.gt.f32 {}, {}, {}", M(m), V(ay), V(ax));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(alt), V(r));
  // x < 0 (its sign bit, so -0 counts): pi - r = 2 hi - (r - 2 lo).
  multipleOfHalfPiMinusF32(alt, r, 2);
  e_.op("vcmp.lt.s32 {}, {}, 0", M(m), V(x));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(alt), V(r));
  copySignF32(r, y, rt);
  // A NaN operand gives NaN (x + y carries one of the payloads); inf + -inf
  // is NaN too, so the operands are tested, not the sum.
  VReg nan = binop("vadd.f32", x, V(y), rt);
  e_.op("vcmp.ne.f32 {}, {}, {}", M(m), V(x), V(x));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(nan), V(r));
  e_.op("vcmp.ne.f32 {}, {}, {}", M(m), V(y), V(y));
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(nan), V(r));
  masks_.put(m);
  for (VReg v : {ax, ay, mn, mx, t, one, alt, nan}) vfree(v);
  return r;
}

// asin and acos from the odd series of asin on |t| <= 1/2, with a = |x|:
//   a <= 1/2:  asin = S(a);  acos = pi/2 - asin(x)
//   a >  1/2:  with z = (1 - a) / 2 (exact) and s = sqrt(z),
//              asin(a) = pi/2 - 2 S(s);  acos(x) = 2 S(s) for x > 0,
//              pi - 2 S(s) for x < 0 (no cancellation near |x| = 1).
// |x| > 1 takes the sqrt of a negative number, which gives NaN.
VReg Lowerer::expandAsinAcosF32(VReg x, bool acos, ElementType rt) {
  VReg a = unop("vabs.f32", x, rt);
  VReg small = oddSeriesF32(a, kAsinP, 5, rt);
  VReg z = binop("vsub.f32", a, "1.0", rt);
  e_.op("vmul.f32 {}, {}, -0.5", V(z), V(z));
  VReg s = unop("vsqrt", z, rt);
  VReg q = oddSeriesF32(s, kAsinP, 5, rt);
  e_.op("vadd.f32 {}, {}, {}", V(q), V(q), V(q));  // 2 S(s)
  int m = malloc_();
  VReg r = valloc(rt);
  if (!acos) {
    // pi/2 - 2 S(s) = hi - (2 S(s) - lo)
    multipleOfHalfPiMinusF32(r, q, 1);
    e_.op("vcmp.le.f32 {}, {}, 0.5", M(m), V(a));
    e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(small), V(r));
    copySignF32(r, x, rt);
  } else {
    // x < -1/2: pi - 2 S(s) = 2 hi - (2 S(s) - 2 lo); x > 1/2: 2 S(s).
    multipleOfHalfPiMinusF32(r, q, 2);
    e_.op("vcmp.gt.f32 {}, {}, 0.5", M(m), V(x));
    e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(q), V(r));
    // |x| <= 1/2: pi/2 - asin(x) = hi - (asin(x) - lo).
    copySignF32(small, x, rt);
    multipleOfHalfPiMinusF32(small, small, 1);
    e_.op("vcmp.le.f32 {}, {}, 0.5", M(m), V(a));
    e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(small), V(r));
  }
  masks_.put(m);
  for (VReg v : {a, small, z, s, q}) vfree(v);
  return r;
}

// The inverse hyperbolic functions through log1p, which keeps the relative
// precision of small arguments (ln(x + sqrt(x^2 + 1)) loses it all):
//   asinh(x) = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2))),  a = |x|
//   acosh(x) = log1p(t + sqrt(t (t + 2))),  t = x - 1 (NaN for x < 1)
//   atanh(x) = sign(x) log1p(2a / (1 - a)) / 2
// From a = 2^12 on, asinh and acosh are ln(a) + ln 2 (a^2 would overflow
// on the way to the same value).
VReg Lowerer::expandInverseHyperbolicF32(hlo::Opcode op, VReg x, ElementType rt) {
  constexpr float kLn2 = 0.693147182464599609375f;
  VReg a = op == hlo::Opcode::Acosh ? vcopy(x, rt) : unop("vabs.f32", x, rt);
  VReg y = valloc(rt);
  if (op == hlo::Opcode::Atanh) {
    VReg d = unop("vneg.f32", a, rt);
    e_.op("vadd.f32 {}, {}, 1.0", V(d), V(d));  // 1 - a, +0 at a = 1 (a - 1 negated would be -0)
    VReg twice = binop("vadd.f32", a, V(a), rt);
    e_.op("vdiv.f32 {}, {}, {}", V(y), V(twice), V(d));
    vfree(d);
    vfree(twice);
  } else if (op == hlo::Opcode::Asinh) {
    VReg a2 = binop("vmul.f32", a, V(a), rt);
    VReg s = binop("vadd.f32", a2, "1.0", rt);
    e_.op("vsqrt {}, {}", V(s), V(s));
    e_.op("vadd.f32 {}, {}, 1.0", V(s), V(s));
    e_.op("vdiv.f32 {}, {}, {}", V(y), V(a2), V(s));
    e_.op("vadd.f32 {}, {}, {}", V(y), V(y), V(a));
    vfree(a2);
    vfree(s);
  } else {  // acosh
    VReg t = binop("vsub.f32", a, "1.0", rt);
    VReg s = binop("vadd.f32", t, "2.0", rt);
    e_.op("vmul.f32 {}, {}, {}", V(s), V(s), V(t));
    e_.op("vsqrt {}, {}", V(s), V(s));
    e_.op("vadd.f32 {}, {}, {}", V(y), V(t), V(s));
    vfree(t);
    vfree(s);
  }
  VReg r = expandLog1pF32(y, rt);
  int m = malloc_();
  if (op == hlo::Opcode::Atanh) {
    e_.op("vmul.f32 {}, {}, 0.5", V(r), V(r));
  } else {
    VReg big = unop("vlog", a, rt);
    e_.op("vadd.f32 {}, {}, {}", V(big), V(big), imm(kLn2));
    e_.op("vcmp.ge.f32 {}, {}, 4096.0", M(m), V(a));
    e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(big), V(r));
    vfree(big);
  }
  if (op == hlo::Opcode::Acosh) {
    VReg nan = valloc(rt);
    e_.op("vmov.f32 {}, 0x7fc00000", V(nan));
    e_.op("vcmp.lt.f32 {}, {}, 1.0", M(m), V(x));
    e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(nan), V(r));
    vfree(nan);
  } else {
    copySignF32(r, x, rt);
  }
  masks_.put(m);
  vfree(a);
  vfree(y);
  return r;
}

}  // namespace tpu::codegen

namespace tpu::codegen {

// Kahan's form: with u = e^x rounded, (u - 1) * x / ln(u) cancels the
// rounding error of u, so tiny and small |x| keep their relative precision
// (e^x - 1 alone loses it all near 0). u == 1 gives x itself (-0 stays -0),
// u == 0 gives -1, u == inf gives inf. (lower.cpp's f32 Expm1 emits the same
// sequence inline; it can call this.)
VReg Lowerer::expandExpm1F32(VReg x, ElementType rt) {
  VReg u = unop("vexp", x, rt);
  VReg um1 = binop("vsub.f32", u, "1.0", rt);
  VReg l = unop("vlog", u, rt);
  VReg q = binop("vdiv.f32", x, V(l), rt);
  VReg d = binop("vmul.f32", um1, V(q), rt);
  int m = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 1.0", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(x), V(d));
  e_.op("vcmp.ne.f32 {}, {}, -1.0", M(m), V(um1));
  e_.op("vsel.f32 {}, {}, {}, -1.0", V(d), M(m), V(d));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(u), V(d));
  masks_.put(m);
  for (VReg v : {u, um1, l, q}) vfree(v);
  return d;
}

// cosh(x) and sinh(x) in f32 from E = expm1(|x|):
//   sinh|x| = (E + E / (E + 1)) / 2   (keeps the relative precision near 0)
//   cosh x  = ((E + 1) + 1 / (E + 1)) / 2
// and sinh gets the sign of x. From |x| = 80 on, both are e^(|x|/2) / 2 *
// e^(|x|/2) (e^|x| alone would overflow from 88.7 while the result does
// not until 89.4).
std::pair<VReg, VReg> Lowerer::coshSinhF32(VReg x, ElementType rt) {
  VReg a = unop("vabs.f32", x, rt);
  VReg e = expandExpm1F32(a, rt);
  VReg e1 = binop("vadd.f32", e, "1.0", rt);
  VReg r = unop("vrecip", e1, rt);
  VReg ch = binop("vadd.f32", e1, V(r), rt);
  e_.op("vmul.f32 {}, {}, 0.5", V(ch), V(ch));
  VReg sh = binop("vdiv.f32", e, V(e1), rt);
  e_.op("vadd.f32 {}, {}, {}", V(sh), V(sh), V(e));
  e_.op("vmul.f32 {}, {}, 0.5", V(sh), V(sh));
  VReg h = binop("vmul.f32", a, "0.5", rt);
  e_.op("vexp {}, {}", V(h), V(h));
  VReg big = binop("vmul.f32", h, "0.5", rt);
  e_.op("vmul.f32 {}, {}, {}", V(big), V(big), V(h));
  int m = malloc_();
  e_.op("vcmp.ge.f32 {}, {}, 80.0", M(m), V(a));
  e_.op("vsel.f32 {}, {}, {}, {}", V(ch), M(m), V(big), V(ch));
  e_.op("vsel.f32 {}, {}, {}, {}", V(sh), M(m), V(big), V(sh));
  masks_.put(m);
  copySignF32(sh, x, rt);
  for (VReg v : {a, e, e1, r, h, big}) vfree(v);
  return {ch, sh};
}

}  // namespace tpu::codegen
