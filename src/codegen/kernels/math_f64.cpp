// f64 library math from the chip's pair basics: the correctly rounded f64
// add, subtract, multiply, divide, min, max and compares of the emulated
// pair unit (docs/DESIGN.md), vector selects and 32-bit integer operations
// on the words. No TPU has verf.f64 or vsin.f64, so these expand into
// instruction sequences as XLA's elemental emitter expands them: range
// reduction, a polynomial, reconstruction, then the special values.
//
// Coefficients come from utils/fit_math_f64.py (exact rationals and
// 80-digit decimals, rounded once to double; its output is pasted below).
// math_f64_test.cpp measures every function against long double libm in
// f64 ulps over dense and edge inputs and pins the bounds docs/DESIGN.md
// quotes.
#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// utils/fit_math_f64.py (see there for what each table is).
constexpr double kLogR[] = {
    0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2, 0x1.c71c71c71c71cp-3,
    0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3, 0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4,
    0x1.af286bca1af28p-4, 0x1.8618618618618p-4, 0x1.642c8590b2164p-4};
constexpr double kSinS[] = {
    -0x1.5555555555555p-3, 0x1.1111111111111p-7, -0x1.a01a01a01a01ap-13, 0x1.71de3a556c734p-19,
    -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49,
    -0x1.2f49b46814157p-57};
constexpr double kCosC[] = {
    0x1.5555555555555p-5, -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16, -0x1.27e4fb7789f5cp-22,
    0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-45, -0x1.6827863b97d97p-53};
constexpr double kExpm1E[] = {
    0x1.0000000000000p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,
    0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19,
    0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33,
    0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-41, 0x1.ae7f3e733b81fp-45, 0x1.952c77030ad4ap-49,
    0x1.6827863b97d97p-53, 0x1.2f49b46814157p-57};
constexpr double kErfP[] = {
    0x1.06eba8214db69p-3, -0x1.812746b0379e7p-2, 0x1.ce2f21a042be2p-4, -0x1.b82ce31288b51p-6,
    0x1.565bcd0e6a53fp-8, -0x1.c02db40040b86p-11, 0x1.f9a326f9b89b7p-14, -0x1.f4d25c3e0c2ebp-17,
    0x1.b9e6c9dc651a3p-20, -0x1.5f742ec43e71ap-23, 0x1.fcc5720624c1cp-27, -0x1.51d7181c5d36dp-30,
    0x1.9e6ad5e55a730p-34, -0x1.d8453cb0c46eap-38, 0x1.f683ae4a97007p-42, -0x1.f56f071a885cfp-46,
    0x1.d70b3537f4765p-50, -0x1.a2007af3447f6p-54};
constexpr double kErfcG[] = {
    0x1.4cc78cb858b6cp-2, 0x1.7cc2dbaa3a00cp-3, -0x1.5f68305c934a7p-5, 0x1.9a5c5e1062700p-8,
    0x1.c79b5ffd1a26cp-11, -0x1.3ba5c7ba4721fp-10, 0x1.3cd6dbd189ce6p-11, -0x1.aa42cd66d9449p-13,
    0x1.2c464c64d2333p-15, 0x1.8e80d06233639p-17, -0x1.0c4e59c39d165p-16, 0x1.4eb0207dc0bf3p-17,
    -0x1.2f7a176c7c8eep-18, 0x1.8ade5478bb97ep-20, -0x1.8d3f7cfb27b5bp-23, -0x1.9fefcc66fb6e6p-23,
    0x1.cdf01c31b4b1fp-23, -0x1.2e6026edf37a0p-23, 0x1.2b1b8182d6abbp-24, -0x1.f36e696681111p-26,
    0x1.7960524b64cb3p-27, 0x1.76bc9a7a93801p-30, -0x1.f29dcbebff2a5p-28, 0x1.4f70ece2df73ep-29,
    0x1.0aeef6dfcf5e3p-29, 0x1.2232e7e16c565p-31, -0x1.2e890301713c4p-29, 0x1.f1a53f46ed1a8p-32,
    0x1.26ef1e9e7e8ebp-31, -0x1.c3bcbc0af3e9bp-33};
constexpr double kErfcMid = 0x1.5a12f684bda13p-1;
constexpr double kErfcHalf = 0x1.04bda12f684bep-1;
// erfc fit: largest relative error on the check grid 1.54e-16
constexpr double kAtanQ[] = {
    -0x1.5555555555554p-2, 0x1.9999999998863p-3, -0x1.24924923b09bfp-3, 0x1.c71c71366bfc2p-4,
    -0x1.745cff64fb1e8p-4, 0x1.3b1161c0261b4p-4, -0x1.10ed20cc03917p-4, 0x1.df0bad09fa62cp-5,
    -0x1.9c616e7e61a95p-5, 0x1.35dd3ba3a06adp-5, -0x1.1f7e7048b0a6fp-6};
// atan fit: largest relative error of (atan(t) - t) / t^3 3.58e-16
constexpr double kAtanHi[] = {
    0x1.dac670561bb4fp-2, 0x1.921fb54442d18p-1, 0x1.f730bd281f69bp-1, 0x1.921fb54442d18p+0};
constexpr double kAtanLo[] = {
    0x1.a2b7f222f65e2p-56, 0x1.1a62633145c07p-55, 0x1.007887af0cbbdp-56, 0x1.1a62633145c07p-54};
constexpr double kAsinQ[] = {
    0x1.5555555555555p-3, 0x1.3333333333388p-4, 0x1.6db6db6dac1e0p-5, 0x1.f1c71c7a52ba3p-6,
    0x1.6e8ba123e494cp-6, 0x1.1c4efce23019fp-6, 0x1.c990ad3d8fdcap-7, 0x1.7b027ee1dd585p-7,
    0x1.3b49de7121487p-7, 0x1.31622469ce5adp-7, 0x1.8f193743418ffp-9, 0x1.406192d124629p-6,
    -0x1.3b416bb7d9257p-6, 0x1.e529c6fce9bb4p-6};
// asin fit: largest relative error of (asin(t) - t) / t^3 5.53e-17
// fdlibm's splits of ln 2 and pi/2: the heads have trailing zero bits, so
// their products with small integers are exact.
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kPio2A = 1.57079632673412561417e+00, kPio2B = 6.07710050630396597660e-11,
                 kPio2C = 2.02226624879595063154e-21;
constexpr double kRound = 0x1.8p52;  // x + kRound - kRound: x rounded to an integer (|x| < 2^51)
// utils/fit_math_f64.py payne: 2/pi's fraction bits after one word of zeros
// (word i holds bits 64 i - 63 .. 64 i of 2/pi, b_k weighing 2^-k), and
// floor(pi/2 2^127) as two words, the high one first.
constexpr uint64_t kTwoOverPiWords[] = {
    0x0000000000000000ull, 0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull, 0xdb6295993c439041ull,
    0xfe5163abdebbc561ull, 0xb7246e3a424dd2e0ull, 0x06492eea09d1921cull, 0xfe1deb1cb129a73eull,
    0xe88235f52ebb4484ull, 0xe99c7026b45f7e41ull, 0x3991d639835339f4ull, 0x9c845f8bbdf9283bull,
    0x1ff897ffde05980full, 0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull, 0x4f463f669e5fea2dull,
    0x7527bac7ebe5f17bull, 0x3d0739f78a5292eaull, 0x6bfb5fb11f8d5d08ull, 0x56033046fc7b6babull};
constexpr uint64_t kPio2Fixed[] = {0xc90fdaa22168c234ull, 0xc4c6628b80dc1cd1ull};
// Lanes with |x| >= 2^20 (high word 0x41300000) take Payne-Hanek's
// reduction; Cody and Waite's below is exact up to 2^20 pi/2.
constexpr int32_t kPayneFromHighWord = 0x41300000;

}  // namespace

// f64 values in register pairs, built from the pair rows. Every method
// returns a fresh pair the caller frees with drop(); operands are read only.
class PairMath {
 public:
  PairMath(Lowerer& l, Emitter& e, RegPool& masks) : l_(l), e_(e), masks_(masks) {}

  VReg k(double c) { return l_.f64Const(c); }
  VReg op(const char* m, VReg a, VReg b) { return l_.f64Op(m, a, b); }
  VReg op(const char* m, VReg a, double c) {
    VReg t = k(c);
    VReg d = op(m, a, t);
    drop(t);
    return d;
  }
  VReg add(VReg a, VReg b) { return op("vadd.f64", a, b); }
  VReg sub(VReg a, VReg b) { return op("vsub.f64", a, b); }
  VReg mul(VReg a, VReg b) { return op("vmul.f64", a, b); }
  VReg div(VReg a, VReg b) { return op("vdiv.f64", a, b); }
  VReg add(VReg a, double c) { return op("vadd.f64", a, c); }
  VReg mul(VReg a, double c) { return op("vmul.f64", a, c); }
  VReg rsub(double c, VReg a) {  // c - a
    VReg t = k(c);
    VReg d = sub(t, a);
    drop(t);
    return d;
  }
  // v := f(v, ...): the old value freed.
  template <typename F>
  void update(VReg& v, F&& f) {
    VReg n = f(v);
    drop(v);
    v = n;
  }
  void drop(VReg v) { l_.vfree(v); }
  void drop(std::initializer_list<VReg> vs) {
    for (VReg v : vs) l_.vfree(v);
  }
  void dropMask(int m) { masks_.put(m); }

  // p = c[n-1] v^(n-1) + ... + c[0] by Horner steps.
  VReg horner(const double* c, int n, VReg v) {
    VReg p = k(c[n - 1]);
    for (int i = n - 2; i >= 0; --i) {
      update(p, [&](VReg q) { return mul(q, v); });
      update(p, [&](VReg q) { return add(q, c[i]); });
    }
    return p;
  }

  int cmp(const char* dir, VReg a, VReg b) {
    int m = l_.malloc_();
    e_.op("vcmp.{}.f64 {}, {}, {}, {}, {}", dir, l_.M(m), l_.V(a), l_.H(a), l_.V(b), l_.H(b));
    return m;
  }
  int cmp(const char* dir, VReg a, double c) {
    VReg t = k(c);
    int m = cmp(dir, a, t);
    drop(t);
    return m;
  }
  // v := m ? a : v (a pair).
  void selectInto(VReg& v, int m, VReg a) {
    e_.op("vsel.s32 {}, {}, {}, {}", l_.V(v), l_.M(m), l_.V(a), l_.V(v));
    e_.op("vsel.s32 {}, {}, {}, {}", l_.H(v), l_.M(m), l_.H(a), l_.H(v));
  }
  void selectInto(VReg& v, int m, double c) {
    VReg t = k(c);
    selectInto(v, m, t);
    drop(t);
  }
  // v := m ? a : v where a is a 32-bit register or immediate.
  void select32(VReg v32, int m, const std::string& a) {
    e_.op("vsel.s32 {}, {}, {}, {}", l_.V(v32), l_.M(m), a, l_.V(v32));
  }
  // v := the special value `c` where `dir(x, xc)` holds.
  void whereCmp(VReg& v, VReg x, const char* dir, double xc, double c) {
    int m = cmp(dir, x, xc);
    selectInto(v, m, c);
    dropMask(m);
  }
  // v := x where x is NaN (its payload kept).
  void keepNaN(VReg& v, VReg x) {
    int m = cmp("ne", x, x);
    selectInto(v, m, x);
    dropMask(m);
  }
  // v := NaN where x or y is NaN (x + y: IEEE picks the NaN operand).
  void nanWhereEitherNaN(VReg& v, VReg x, VReg y) {
    VReg nan = add(x, y);
    for (VReg operand : {x, y}) {
      int m = cmp("ne", operand, operand);
      selectInto(v, m, nan);
      dropMask(m);
    }
    drop(nan);
  }
  // |x| (the sign bit cleared) and the sign bit of x alone, as 32-bit words.
  VReg abs(VReg x) {
    VReg d = l_.valloc(hlo::ElementType::F64);
    e_.op("vmov.s32 {}, {}", l_.V(d), l_.V(x));
    e_.op("vand {}, {}, 2147483647", l_.H(d), l_.H(x));
    return d;
  }
  // v := |v| with the sign of x.
  void copySign(VReg v, VReg x) {
    VReg s = l_.valloc(hlo::ElementType::S32);
    e_.op("vand {}, {}, -2147483648", l_.V(s), l_.H(x));
    e_.op("vand {}, {}, 2147483647", l_.H(v), l_.H(v));
    e_.op("vor {}, {}, {}", l_.H(v), l_.H(v), l_.V(s));
    l_.vfree(s);
  }
  // The f64 of a small signed integer in a 32-bit register: the words
  // 0x43300000 : (k ^ 2^31) are 2^52 + 2^31 + k exactly.
  VReg fromInt(VReg k32) {
    VReg d = l_.valloc(hlo::ElementType::F64);
    e_.op("vxor {}, {}, -2147483648", l_.V(d), l_.V(k32));
    e_.op("vmov.s32 {}, 1127219200", l_.H(d));
    update(d, [&](VReg q) { return op("vsub.f64", q, 0x1.000008p52); });
    return d;
  }
  // The exact product a * b as hi + lo (Dekker's split; no fused multiply-add).
  std::pair<VReg, VReg> twoProduct(VReg a, VReg b) {
    VReg hi = mul(a, b);
    auto [ah, al] = split(a);
    auto [bh, bl] = split(b);
    VReg t = mul(ah, bh);
    update(t, [&](VReg q) { return sub(q, hi); });
    VReg u = mul(ah, bl);
    update(t, [&](VReg q) { return add(q, u); });
    drop(u);
    u = mul(al, bh);
    update(t, [&](VReg q) { return add(q, u); });
    drop(u);
    u = mul(al, bl);
    update(t, [&](VReg q) { return add(q, u); });
    drop({u, ah, al, bh, bl});
    return {hi, t};
  }
  // a = hi + lo with hi holding the top 26 bits (|a| < 2^996).
  std::pair<VReg, VReg> split(VReg a) {
    VReg c = mul(a, 134217729.0);
    VReg t = sub(c, a);
    VReg hi = sub(c, t);
    VReg lo = sub(a, hi);
    drop({c, t});
    return {hi, lo};
  }

  std::string V(VReg r) const { return l_.V(r); }
  std::string H(VReg r) const { return l_.H(r); }
  std::string M(int m) const { return l_.M(m); }
  VReg valloc(hlo::ElementType t) { return l_.valloc(t); }
  VReg vcopy(VReg v, hlo::ElementType t) { return l_.vcopy(v, t); }
  int malloc() { return l_.malloc_(); }
  VReg exp(VReg x) { return l_.expandExpF64(x); }
  VReg add64(VReg a, VReg b) { return l_.pairAddSub(true, a, b, hlo::ElementType::U64); }  // wrapping

  Lowerer& l_;
  Emitter& e_;
  RegPool& masks_;
};

namespace {

// fdlibm's reduction for ln: x = 2^k m, m in [sqrt(2)/2, sqrt(2)), as
// f = m - 1 and k as an f64; subnormal x are scaled by 2^54 first. Only
// finite positive x.
struct LogReduction {
  VReg f, kd;
};
LogReduction reduceForLog(PairMath& p, VReg x) {
  Emitter& e = p.e_;
  using hlo::ElementType;
  int sub = p.cmp("lt", x, 0x1p-1022);
  VReg xs = p.mul(x, 0x1p54);
  VReg y = p.vcopy(x, ElementType::F64);
  p.selectInto(y, sub, xs);
  p.drop(xs);
  VReg k = p.valloc(ElementType::S32), t = p.valloc(ElementType::S32), hm = p.valloc(ElementType::S32);
  e.op("vmov.s32 {}, -54", p.V(t));
  e.op("vsel.s32 {}, {}, {}, 0", p.V(t), p.M(sub), p.V(t));
  p.dropMask(sub);
  e.op("vshr {}, {}, 20", p.V(k), p.H(y));
  e.op("vadd.s32 {}, {}, {}", p.V(k), p.V(k), p.V(t));
  e.op("vsub.s32 {}, {}, 1023", p.V(k), p.V(k));
  // m's exponent: 0 when the mantissa is below sqrt(2)'s (0x6a09e), else -1 (k + 1).
  e.op("vand {}, {}, 1048575", p.V(hm), p.H(y));
  e.op("vadd.s32 {}, {}, 614244", p.V(t), p.V(hm));  // 0x95f64
  e.op("vand {}, {}, 1048576", p.V(t), p.V(t));
  e.op("vxor {}, {}, 1072693248", p.H(y), p.V(t));  // 0x3ff00000 ^ i
  e.op("vor {}, {}, {}", p.H(y), p.H(y), p.V(hm));
  e.op("vshr {}, {}, 20", p.V(t), p.V(t));
  e.op("vadd.s32 {}, {}, {}", p.V(k), p.V(k), p.V(t));
  p.drop(t);
  p.drop(hm);
  VReg f = p.add(y, -1.0);
  p.drop(y);
  VReg kd = p.fromInt(k);
  p.drop(k);
  return {f, kd};
}

// ln(x), or with `c` ln(u) + c/u (log1p's correction; x is then u = 1 + x
// rounded). fdlibm's reduction x = 2^k m, m in [sqrt(2)/2, sqrt(2)), and
// ln m = ln(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))), s = f / (2 + f),
// R the series of 2 atanh(s) / s - 2 to s^22 (the next term is below 2^-60
// of the result); k ln 2 added as head (exact) and tail. Subnormal x are
// scaled by 2^54 first. Only finite positive x: the caller selects the
// special values.
VReg logCore(PairMath& p, VReg x, std::optional<VReg> c) {
  auto [f, kd] = reduceForLog(p, x);
  VReg two = p.add(f, 2.0);
  VReg s = p.div(f, two);
  p.drop(two);
  VReg z = p.mul(s, s);
  VReg r = p.horner(kLogR, 11, z);
  p.update(r, [&](VReg q) { return p.mul(q, z); });
  p.drop(z);
  VReg hfsq = p.mul(f, f);
  p.update(hfsq, [&](VReg q) { return p.mul(q, 0.5); });
  // lowPart = s (hfsq + R) + (k ln2_lo [+ c])
  p.update(r, [&](VReg q) { return p.add(q, hfsq); });
  p.update(r, [&](VReg q) { return p.mul(q, s); });
  p.drop(s);
  VReg kl = p.mul(kd, kLn2Lo);
  if (c) p.update(kl, [&](VReg q) { return p.add(q, *c); });
  p.update(r, [&](VReg q) { return p.add(q, kl); });
  p.drop(kl);
  // k ln2_hi - ((hfsq - lowPart) - f)
  VReg d = p.sub(hfsq, r);
  p.drop({hfsq, r});
  p.update(d, [&](VReg q) { return p.sub(q, f); });
  p.drop(f);
  VReg kh = p.mul(kd, kLn2Hi);
  p.drop(kd);
  VReg res = p.sub(kh, d);
  p.drop({kh, d});
  return res;
}

VReg expandLog(PairMath& p, VReg x) {
  VReg r = logCore(p, x, std::nullopt);
  p.whereCmp(r, x, "lt", 0.0, std::numeric_limits<double>::quiet_NaN());
  p.whereCmp(r, x, "eq", 0.0, -std::numeric_limits<double>::infinity());
  p.whereCmp(r, x, "eq", std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  p.keepNaN(r, x);
  return r;
}

// ln(1 + x): u = 1 + x rounded, then ln(u) + c/u with c the rounding error
// of u (fdlibm's log1p): c = 1 - (u - x) when u >= 2, else x - (u - 1).
VReg expandLog1p(PairMath& p, VReg x) {
  VReg u = p.add(x, 1.0);
  VReg a = p.sub(u, x);
  VReg c = p.rsub(1.0, a);  // 1 - (u - x)
  p.drop(a);
  VReg um1 = p.add(u, -1.0);
  VReg c2 = p.sub(x, um1);  // x - (u - 1)
  p.drop(um1);
  int small = p.cmp("lt", u, 2.0);
  p.selectInto(c, small, c2);
  p.dropMask(small);
  p.drop(c2);
  p.update(c, [&](VReg q) { return p.div(q, u); });
  VReg r = logCore(p, u, c);
  p.drop({c, u});
  p.whereCmp(r, x, "lt", -1.0, std::numeric_limits<double>::quiet_NaN());
  p.whereCmp(r, x, "eq", -1.0, -std::numeric_limits<double>::infinity());
  p.whereCmp(r, x, "eq", std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  int zero = p.cmp("eq", x, 0.0);  // -0 stays -0
  p.selectInto(r, zero, x);
  p.dropMask(zero);
  p.keepNaN(r, x);
  return r;
}

// s = a + b exactly as hi + lo (Knuth's two-sum, any magnitudes).
std::pair<VReg, VReg> twoSum(PairMath& p, VReg a, VReg b) {
  VReg s = p.add(a, b);
  VReg bb = p.sub(s, a);
  VReg ab = p.sub(s, bb);
  VReg ea = p.sub(a, ab);
  VReg eb = p.sub(b, bb);
  VReg e = p.add(ea, eb);
  p.drop({bb, ab, ea, eb});
  return {s, e};
}

// Payne and Hanek's reduction of a finite x with |x| >= 2^20 (other lanes
// get values the caller discards): |x| = m 2^E, m the 53-bit integer
// mantissa, E = e - 1075 from the biased exponent e. x 2/pi mod 4 needs the
// bits b_k of 2/pi from k = E - 1 on only (m b_k 2^(E-k) is a multiple of 4
// before that): a 192-bit window W of them, chosen per lane from
// kTwoOverPiWords by the exponent (word (e - 1013) / 64 and the next three
// by selects, then shifted left by (e - 1013) mod 64 bits), gives x 2/pi
// mod 4 = (m W mod 2^192) 2^-190 with an error below 2^-137 (the bits of
// 2/pi past the window). The product's three 64-bit words come from the
// pair multiplies (low and high halves) and carried adds. Its top two bits
// and the next one are the quadrant n (rounded to nearest); the 190 bits
// below, as a signed fraction f in [-1/2, 1/2), are cut into three 52-bit
// chunks that convert to f64 exactly and are summed as a double-word, then
// r = f pi/2 as rh + rl (Dekker's product with pi/2 as head + tail). The
// nearest double to a multiple of pi/2 leaves |f| above 2^-62, so the
// 2^-104 absolute error of the sum is far below the result's ulp. The sign
// of x negates n and r.
struct TrigReduction {
  VReg n;  // a 32-bit register: the quadrant (only n mod 4 counts)
  VReg rh, rl;
};

// The steps of reducePayneHanek: 64-bit integer helpers on pairs (a zero
// and a one register kept for them) and the three stages.
class PayneHanek {
 public:
  explicit PayneHanek(PairMath& p) : p_(p), e_(p.e_), zero_(s32()), one_(s32()) {
    e_.op("vmov.s32 {}, 0", p_.V(zero_));
    e_.op("vmov.s32 {}, 1", p_.V(one_));
  }
  ~PayneHanek() { p_.drop({zero_, one_}); }
  PayneHanek(const PayneHanek&) = delete;
  PayneHanek& operator=(const PayneHanek&) = delete;

  TrigReduction reduce(VReg x) {
    // The table position from the biased exponent, the 53-bit mantissa.
    VReg pos = s32();
    e_.op("vshl {}, {}, 1", p_.V(pos), p_.H(x));
    e_.op("vshr {}, {}, 21", p_.V(pos), p_.V(pos));
    e_.op("vsub.s32 {}, {}, 1013", p_.V(pos), p_.V(pos));
    VReg m = u64();
    e_.op("vmov.s32 {}, {}", p_.V(m), p_.V(x));
    e_.op("vand {}, {}, 1048575", p_.H(m), p_.H(x));
    e_.op("vor {}, {}, 1048576", p_.H(m), p_.H(m));
    std::array<VReg, 3> w = window(pos);
    std::array<VReg, 3> r = product(m, w);
    // n = the top two bits of r2 rounded by the third.
    VReg n = s32();
    e_.op("vshr {}, {}, 29", p_.V(n), p_.H(r[0]));
    e_.op("vadd.s32 {}, {}, 1", p_.V(n), p_.V(n));
    e_.op("vshr {}, {}, 1", p_.V(n), p_.V(n));
    VReg neg = s32();
    auto [rh, rl] = fractionTimesPio2(r, neg);
    // The fraction's sign, then x's: x < 0 gives -n and -r.
    VReg sign = s32();
    e_.op("vsra {}, {}, 31", p_.V(sign), p_.H(x));
    e_.op("vxor {}, {}, {}", p_.V(n), p_.V(n), p_.V(sign));
    e_.op("vsub.s32 {}, {}, {}", p_.V(n), p_.V(n), p_.V(sign));
    e_.op("vxor {}, {}, {}", p_.V(sign), p_.V(sign), p_.V(neg));
    e_.op("vshl {}, {}, 31", p_.V(sign), p_.V(sign));
    e_.op("vxor {}, {}, {}", p_.H(rh), p_.H(rh), p_.V(sign));
    e_.op("vxor {}, {}, {}", p_.H(rl), p_.H(rl), p_.V(sign));
    p_.drop({sign, neg});
    return {n, rh, rl};
  }

 private:
  static int32_t lo32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
  static int32_t hi32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v >> 32)); }
  VReg s32() { return p_.valloc(hlo::ElementType::S32); }
  VReg u64() { return p_.valloc(hlo::ElementType::U64); }
  // d = a <op> amount for a pair a and a 32-bit register amount (high word 0).
  VReg shift64(const char* m, VReg a, VReg amount) {
    VReg d = u64();
    for (int w = 0; w < 2; ++w)
      e_.op("{} {}, {}, {}, {}, {}, {}", m, w ? p_.H(d) : p_.V(d), p_.V(a), p_.H(a), p_.V(amount), p_.V(zero_), w);
    return d;
  }
  VReg shiftBy(const char* m, VReg a, int amount) {
    VReg k = s32();
    e_.op("vmov.s32 {}, {}", p_.V(k), amount);
    VReg d = shift64(m, a, k);
    p_.drop(k);
    return d;
  }
  void or64(VReg a, VReg b) {  // a |= b; b freed
    e_.op("vor {}, {}, {}", p_.V(a), p_.V(a), p_.V(b));
    e_.op("vor {}, {}, {}", p_.H(a), p_.H(a), p_.H(b));
    p_.drop(b);
  }
  VReg pairOp(const char* m, VReg a, VReg b) {
    VReg d = u64();
    for (int w = 0; w < 2; ++w)
      e_.op("{} {}, {}, {}, {}, {}, {}", m, w ? p_.H(d) : p_.V(d), p_.V(a), p_.H(a), p_.V(b), p_.H(b), w);
    return d;
  }
  VReg constant64(uint64_t v) {
    VReg d = u64();
    e_.op("vmov.s32 {}, {}", p_.V(d), lo32(v));
    e_.op("vmov.s32 {}, {}", p_.H(d), hi32(v));
    return d;
  }
  // a + b mod 2^64; the low words' carry from an unsigned compare of pairs
  // with zero high words.
  VReg add64(VReg a, VReg b) {
    VReg d = u64();
    int c = p_.malloc();
    e_.op("vadd.s32 {}, {}, {}", p_.V(d), p_.V(a), p_.V(b));
    e_.op("vcmp.lt.u64 {}, {}, {}, {}, {}", p_.M(c), p_.V(d), p_.V(zero_), p_.V(a), p_.V(zero_));
    e_.op("vadd.s32 {}, {}, {}", p_.H(d), p_.H(a), p_.H(b));
    VReg k = s32();
    e_.op("vsel.s32 {}, {}, {}, 0", p_.V(k), p_.M(c), p_.V(one_));
    e_.op("vadd.s32 {}, {}, {}", p_.H(d), p_.H(d), p_.V(k));
    p_.drop(k);
    p_.dropMask(c);
    return d;
  }
  // v += 1 (mod 2^64) where `mask` holds.
  void increment(VReg v, int mask) {
    VReg k = s32();
    int c = p_.malloc();
    e_.op("vsel.s32 {}, {}, {}, 0", p_.V(k), p_.M(mask), p_.V(one_));
    e_.op("vadd.s32 {}, {}, {}", p_.V(v), p_.V(v), p_.V(k));
    e_.op("vcmp.eq.s32 {}, {}, 0", p_.M(c), p_.V(v));
    e_.op("mand {}, {}, {}", p_.M(c), p_.M(c), p_.M(mask));
    e_.op("vsel.s32 {}, {}, {}, 0", p_.V(k), p_.M(c), p_.V(one_));
    e_.op("vadd.s32 {}, {}, {}", p_.H(v), p_.H(v), p_.V(k));
    p_.dropMask(c);
    p_.drop(k);
  }

  // The 192 window bits from table bit `pos` on (pos freed), most
  // significant word first.
  std::array<VReg, 3> window(VReg pos) {
    VReg word = s32(), bit = s32();
    e_.op("vshr {}, {}, 6", p_.V(word), p_.V(pos));
    e_.op("vand {}, {}, 63", p_.V(bit), p_.V(pos));
    p_.drop(pos);
    // T[k] = kTwoOverPiWords[word + k], k = 0..3: word 0's values, then one
    // select per candidate word (the lanes whose word differs keep theirs).
    constexpr int kWindows = static_cast<int>(std::size(kTwoOverPiWords)) - 3;
    VReg t[4];
    for (int k = 0; k < 4; ++k) t[k] = constant64(kTwoOverPiWords[k]);
    int other = p_.malloc();
    for (int j = 1; j < kWindows; ++j) {
      e_.op("vcmp.ne.s32 {}, {}, {}", p_.M(other), p_.V(word), j);
      for (int k = 0; k < 4; ++k) {
        e_.op("vsel.s32 {}, {}, {}, {}", p_.V(t[k]), p_.M(other), p_.V(t[k]), lo32(kTwoOverPiWords[j + k]));
        e_.op("vsel.s32 {}, {}, {}, {}", p_.H(t[k]), p_.M(other), p_.H(t[k]), hi32(kTwoOverPiWords[j + k]));
      }
    }
    p_.dropMask(other);
    p_.drop(word);
    // W[k] = T[k] << bit | T[k+1] >> (64 - bit) (a shift by 64 gives 0),
    // each T freed once used.
    VReg back = s32();
    e_.op("vxor {}, {}, 63", p_.V(back), p_.V(bit));
    e_.op("vadd.s32 {}, {}, 1", p_.V(back), p_.V(back));
    std::array<VReg, 3> w;
    for (int k = 0; k < 3; ++k) {
      w[k] = shift64("vshl.i64", t[k], bit);
      p_.drop(t[k]);
      or64(w[k], shift64("vshr.i64", t[k + 1], back));
    }
    p_.drop({t[3], bit, back});
    return w;
  }

  // m W mod 2^192 = r2:r1:r0 (returned in that order; m and w freed):
  // r2 = lo(m w0) + hi(m w1) + the carry of r1 = lo(m w1) + hi(m w2),
  // r0 = lo(m w2).
  std::array<VReg, 3> product(VReg m, const std::array<VReg, 3>& w) {
    VReg r2 = pairOp("vmul.i64", m, w[0]);
    p_.drop(w[0]);
    VReg h1 = pairOp("vmulhi.u64", m, w[1]);
    p_.update(r2, [&](VReg v) { return add64(v, h1); });
    p_.drop(h1);
    VReg r1 = pairOp("vmul.i64", m, w[1]);
    p_.drop(w[1]);
    VReg h0 = pairOp("vmulhi.u64", m, w[2]);
    p_.update(r1, [&](VReg v) { return add64(v, h0); });
    int r1Carry = p_.malloc();
    e_.op("vcmp.lt.u64 {}, {}, {}, {}, {}", p_.M(r1Carry), p_.V(r1), p_.H(r1), p_.V(h0), p_.H(h0));
    p_.drop(h0);
    increment(r2, r1Carry);
    p_.dropMask(r1Carry);
    VReg r0 = pairOp("vmul.i64", m, w[2]);
    p_.drop({m, w[2]});
    return {r2, r1, r0};
  }

  // |f| pi/2 as rh + rl for the signed fraction f = bits 189..0 of r (r
  // freed); `neg` receives f's sign in every bit.
  std::pair<VReg, VReg> fractionTimesPio2(const std::array<VReg, 3>& r, VReg neg) {
    // G = the top 128 bits of f (r << 2) as g1:g0, made non-negative:
    // g ^ neg + 1 where neg is set.
    VReg g1 = shiftBy("vshl.i64", r[0], 2);
    p_.drop(r[0]);
    or64(g1, shiftBy("vshr.i64", r[1], 62));
    VReg g0 = shiftBy("vshl.i64", r[1], 2);
    p_.drop(r[1]);
    or64(g0, shiftBy("vshr.i64", r[2], 62));
    p_.drop(r[2]);
    e_.op("vsra {}, {}, 31", p_.V(neg), p_.H(g1));
    for (VReg g : {g0, g1}) {
      e_.op("vxor {}, {}, {}", p_.V(g), p_.V(g), p_.V(neg));
      e_.op("vxor {}, {}, {}", p_.H(g), p_.H(g), p_.V(neg));
    }
    int carried = p_.malloc(), wrapped = p_.malloc();
    e_.op("vcmp.ne.s32 {}, {}, 0", p_.M(carried), p_.V(neg));
    increment(g0, carried);
    e_.op("vcmp.eq.s64 {}, {}, {}, {}, {}", p_.M(wrapped), p_.V(g0), p_.H(g0), p_.V(zero_), p_.V(zero_));
    e_.op("mand {}, {}, {}", p_.M(wrapped), p_.M(wrapped), p_.M(carried));
    increment(g1, wrapped);
    // Q = G C / 2^128 with C = pi/2 2^127 (c1:c0), so |r| = Q 2^-127: g1 c1
    // in full plus the high halves of g1 c0 and g0 c1 (the dropped low
    // halves and g0 c0 are below 3 units of Q).
    VReg c = constant64(kPio2Fixed[1]);
    VReg sum = pairOp("vmulhi.u64", g1, c);
    p_.drop(c);
    c = constant64(kPio2Fixed[0]);
    VReg part = pairOp("vmulhi.u64", g0, c);
    p_.drop(g0);
    p_.update(sum, [&](VReg v) { return add64(v, part); });
    e_.op("vcmp.lt.u64 {}, {}, {}, {}, {}", p_.M(carried), p_.V(sum), p_.H(sum), p_.V(part), p_.H(part));
    p_.drop(part);
    VReg qlo = pairOp("vmul.i64", g1, c), qhi = pairOp("vmulhi.u64", g1, c);
    p_.drop({g1, c});
    p_.update(qlo, [&](VReg v) { return add64(v, sum); });
    e_.op("vcmp.lt.u64 {}, {}, {}, {}, {}", p_.M(wrapped), p_.V(qlo), p_.H(qlo), p_.V(sum), p_.H(sum));
    p_.drop(sum);
    increment(qhi, carried);
    increment(qhi, wrapped);
    p_.dropMask(carried);
    p_.dropMask(wrapped);
    return toDoubleWord(qhi, qlo);
  }

  // Q = qhi:qlo (freed) times 2^-127 as rh + rl, truncated.
  std::pair<VReg, VReg> toDoubleWord(VReg qhi, VReg qlo) {
    // Normalize: qhi >= 2 (|r| > 2^-62). Its top bit from the exponent of
    // f64(qhi), one too high where the conversion rounded up to a power of
    // 2 (then qhi >> e is 0); z = 63 - e shifts it to bit 63.
    VReg k = s32(), z = s32(), sh = s32();
    e_.op("vcvt.f64.u64 {}, {}, {}, 1", p_.V(z), p_.V(qhi), p_.H(qhi));
    e_.op("vshr {}, {}, 20", p_.V(z), p_.V(z));
    e_.op("vsub.s32 {}, {}, 1023", p_.V(z), p_.V(z));
    e_.op("vshr.i64 {}, {}, {}, {}, {}, 0", p_.V(k), p_.V(qhi), p_.H(qhi), p_.V(z), p_.V(zero_));
    e_.op("vadd.s32 {}, {}, {}", p_.V(z), p_.V(z), p_.V(k));
    e_.op("vxor {}, {}, 63", p_.V(z), p_.V(z));  // 63 - (e - 1 + t) = 64 - e - t
    e_.op("vadd.s32 {}, {}, 1", p_.V(z), p_.V(z));
    e_.op("vxor {}, {}, 63", p_.V(sh), p_.V(z));  // 64 - z
    e_.op("vadd.s32 {}, {}, 1", p_.V(sh), p_.V(sh));
    VReg t1 = shift64("vshl.i64", qhi, z);
    or64(t1, shift64("vshr.i64", qlo, sh));
    VReg t0 = shift64("vshl.i64", qlo, z);
    p_.drop({qhi, qlo, sh});
    // rh = the top 53 bits of t1 times 2^(-52-z): biased exponent 1023 - z,
    // added to the leading 1 of the mantissa's high word.
    VReg rh = p_.valloc(hlo::ElementType::F64);
    e_.op("vshr {}, {}, 11", p_.V(rh), p_.V(t1));
    e_.op("vshl {}, {}, 21", p_.V(k), p_.H(t1));
    e_.op("vor {}, {}, {}", p_.V(rh), p_.V(rh), p_.V(k));
    e_.op("vshr {}, {}, 11", p_.H(rh), p_.H(t1));
    e_.op("vsub.s32 {}, {}, {}", p_.V(k), p_.V(one_), p_.V(z));  // 1 - z, plus 1021 below
    e_.op("vadd.s32 {}, {}, 1021", p_.V(k), p_.V(k));
    e_.op("vshl {}, {}, 20", p_.V(k), p_.V(k));
    e_.op("vadd.s32 {}, {}, {}", p_.H(rh), p_.H(rh), p_.V(k));
    // rl = the next 53 bits (t1's low 11, t0's top 42) times 2^(-105-z),
    // converted exactly and scaled in the exponent field (unless 0).
    VReg l = shiftBy("vshl.i64", t1, 53);
    p_.update(l, [&](VReg v) { return shiftBy("vshr.i64", v, 11); });
    or64(l, shiftBy("vshr.i64", t0, 22));
    p_.drop({t0, t1});
    VReg rl = p_.valloc(hlo::ElementType::F64);
    for (int w = 0; w < 2; ++w)
      e_.op("vcvt.f64.s64 {}, {}, {}, {}", w ? p_.H(rl) : p_.V(rl), p_.V(l), p_.H(l), w);
    p_.drop(l);
    e_.op("vadd.s32 {}, {}, 105", p_.V(z), p_.V(z));
    e_.op("vshl {}, {}, 20", p_.V(z), p_.V(z));
    e_.op("vsub.s32 {}, {}, {}", p_.V(k), p_.H(rl), p_.V(z));
    int nonzero = p_.malloc();
    e_.op("vcmp.ne.s32 {}, {}, 0", p_.M(nonzero), p_.H(rl));
    e_.op("vsel.s32 {}, {}, {}, 0", p_.H(rl), p_.M(nonzero), p_.V(k));
    p_.dropMask(nonzero);
    p_.drop({z, k});
    return {rh, rl};
  }

  PairMath& p_;
  Emitter& e_;
  VReg zero_, one_;
};

TrigReduction reducePayneHanek(PairMath& p, VReg x) {
  PayneHanek ph(p);
  return ph.reduce(x);
}

// sin, cos or tan. x = n pi/2 + r by Cody and Waite's reduction with pi/2
// in three parts (33 + 33 + 53 bits): n x the first two is exact while
// |n| < 2^20, so r = rh + rl keeps about 2^-100 absolute accuracy for
// |x| < 2^20 pi/2 (about 1.6e6). Finite lanes with |x| >= 2^20 take n and
// r from reducePayneHanek instead (exact at every magnitude); inf and NaN
// give NaN. The series of sin and cos to r^19 and r^18 (|r| <= pi/4), the
// quadrant n mod 4 from the low word of n + 1.5 2^52.
VReg expandSinCosTan(PairMath& p, hlo::Opcode op, VReg x) {
  Emitter& e = p.e_;
  using hlo::ElementType;
  // Payne and Hanek's n and r first (their registers peak while little else
  // is live), taken where x is finite and |x| >= 2^20.
  TrigReduction big = reducePayneHanek(p, x);
  VReg t = p.mul(x, 0.63661977236758134308);  // 2 / pi
  p.update(t, [&](VReg q) { return p.add(q, kRound); });
  VReg n = p.add(t, -kRound);
  VReg q = p.valloc(ElementType::S32);
  e.op("vmov.s32 {}, {}", p.V(q), p.V(t));
  p.drop(t);
  // r1 = x - n A (exact), then r1 - n B as rh + rl (two-sum), minus n C.
  VReg w = p.mul(n, kPio2A);
  VReg r1 = p.sub(x, w);
  p.drop(w);
  w = p.mul(n, kPio2B);
  VReg y = p.sub(r1, w);
  VReg bb = p.sub(y, r1);
  VReg nb = p.add(bb, w);  // -(w + bb) is the second part of the sum
  p.drop(w);
  VReg yb = p.sub(y, bb);
  p.drop(bb);
  VReg err = p.sub(r1, yb);
  p.drop({r1, yb});
  p.update(err, [&](VReg q) { return p.sub(q, nb); });
  p.drop(nb);
  w = p.mul(n, kPio2C);
  p.drop(n);
  p.update(err, [&](VReg q) { return p.sub(q, w); });
  p.drop(w);
  VReg rh = p.add(y, err);
  VReg rl = p.sub(y, rh);
  p.update(rl, [&](VReg q) { return p.add(q, err); });
  p.drop({y, err});
  VReg odd = p.valloc(ElementType::S32);
  int far = p.malloc(), finite = p.malloc();
  e.op("vand {}, {}, 2147483647", p.V(odd), p.H(x));
  e.op("vcmp.ge.s32 {}, {}, {}", p.M(far), p.V(odd), kPayneFromHighWord);
  e.op("vcmp.lt.s32 {}, {}, 2146435072", p.M(finite), p.V(odd));  // below inf's 0x7ff00000
  e.op("mand {}, {}, {}", p.M(far), p.M(far), p.M(finite));
  p.dropMask(finite);
  p.selectInto(rh, far, big.rh);
  p.selectInto(rl, far, big.rl);
  p.select32(q, far, p.V(big.n));
  p.dropMask(far);
  p.drop({big.rh, big.rl, big.n});
  VReg z = p.mul(rh, rh);
  VReg hz = p.mul(z, 0.5);
  // sin r = rh + (rh z S(z) + rl (1 - z/2))
  VReg s = p.horner(kSinS, 9, z);
  VReg rz = p.mul(rh, z);
  p.update(s, [&](VReg q) { return p.mul(q, rz); });
  p.drop(rz);
  VReg cl = p.mul(hz, rl);
  VReg c1 = p.sub(rl, cl);
  p.drop(cl);
  p.update(s, [&](VReg q) { return p.add(q, c1); });
  p.drop(c1);
  p.update(s, [&](VReg q) { return p.add(rh, q); });
  // cos r = w + (((1 - w) - z/2) + (z^2 C(z) - rh rl)), w = 1 - z/2
  VReg c = p.horner(kCosC, 8, z);
  VReg z2 = p.mul(z, z);
  p.update(c, [&](VReg q) { return p.mul(q, z2); });
  p.drop({z2, z});
  VReg rr = p.mul(rh, rl);
  p.update(c, [&](VReg q) { return p.sub(q, rr); });
  p.drop({rr, rh, rl});
  VReg wv = p.rsub(1.0, hz);
  VReg om = p.rsub(1.0, wv);
  p.update(om, [&](VReg q) { return p.sub(q, hz); });
  p.drop(hz);
  p.update(c, [&](VReg q) { return p.add(om, q); });
  p.drop(om);
  p.update(c, [&](VReg q) { return p.add(wv, q); });
  p.drop(wv);
  // The quadrant: bit 0 swaps sin and cos, bit 1 negates (cos: n + 1).
  if (op == hlo::Opcode::Cos) e.op("vadd.s32 {}, {}, 1", p.V(q), p.V(q));
  e.op("vand {}, {}, 1", p.V(odd), p.V(q));
  int m = p.malloc();
  e.op("vcmp.ne.s32 {}, {}, 0", p.M(m), p.V(odd));
  VReg r;
  if (op == hlo::Opcode::Tan) {
    // tan = s / c, or -c / s in the odd quadrants.
    VReg num = p.vcopy(s, ElementType::F64), den = p.vcopy(c, ElementType::F64);
    p.selectInto(num, m, c);
    p.selectInto(den, m, s);
    r = p.div(num, den);
    p.drop({num, den});
    e.op("vshl {}, {}, 31", p.V(odd), p.V(odd));
    e.op("vxor {}, {}, {}", p.H(r), p.H(r), p.V(odd));
  } else {
    r = p.vcopy(s, ElementType::F64);
    p.selectInto(r, m, c);
    e.op("vand {}, {}, 2", p.V(odd), p.V(q));
    e.op("vshl {}, {}, 30", p.V(odd), p.V(odd));
    e.op("vxor {}, {}, {}", p.H(r), p.H(r), p.V(odd));
  }
  p.dropMask(m);
  p.drop(q);
  p.drop(odd);
  p.drop({s, c});
  if (op != hlo::Opcode::Cos) {  // sin and tan of +-0 are +-0
    int zero = p.cmp("eq", x, 0.0);
    p.selectInto(r, zero, x);
    p.dropMask(zero);
  }
  return r;
}

// erf. a = |x|:
//   a < 0.84375: x + x P(x^2), the Taylor series to x^35 with 1 taken out
//                of its first coefficient (which then rounds 9x closer);
//   else:        1 - e^(-a^2) g(1 / a), g(u) = erfc(1/u) e^(1/u^2)
//                interpolated on u in [1/6, 1/0.84375] (a clamped to 6:
//                erf rounds to 1 from 5.93 on); a^2 = hi + lo exactly and
//                e^(-a^2) = e^(-hi) (1 - lo);
// then the sign of x, and NaN kept.
VReg expandErf(PairMath& p, VReg x) {
  VReg z = p.mul(x, x);
  VReg small = p.horner(kErfP, 18, z);
  p.drop(z);
  p.update(small, [&](VReg q) { return p.mul(q, x); });
  p.update(small, [&](VReg q) { return p.add(x, q); });
  VReg a = p.abs(x);
  VReg ac = p.op("vmin.f64", a, 6.0);
  VReg one = p.k(1.0);
  VReg u = p.div(one, ac);
  p.drop(one);
  p.update(u, [&](VReg q) { return p.add(q, -kErfcMid); });
  p.update(u, [&](VReg q) { return p.mul(q, 1.0 / kErfcHalf); });
  VReg g = p.horner(kErfcG, 30, u);
  p.drop(u);
  auto [hi, lo] = p.twoProduct(ac, ac);
  p.drop(ac);
  p.update(hi, [&](VReg q) { return p.mul(q, -1.0); });
  VReg ex = p.exp(hi);
  p.drop(hi);
  p.update(lo, [&](VReg q) { return p.rsub(1.0, q); });
  p.update(ex, [&](VReg q) { return p.mul(q, lo); });
  p.drop(lo);
  p.update(g, [&](VReg q) { return p.mul(q, ex); });
  p.drop(ex);
  p.update(g, [&](VReg q) { return p.rsub(1.0, q); });
  p.copySign(g, x);
  int m = p.cmp("lt", a, 0.84375);
  p.selectInto(g, m, small);
  p.dropMask(m);
  p.drop({small, a});
  p.keepNaN(g, x);
  return g;
}

// e^x - 1: |x| < 1: x + x^2 E(x), the Taylor series to x^19; else
// e^x - 1 from expandExpF64 (e^x >= e or <= 1/e there, so the subtraction
// loses at most a bit of its relative accuracy). -0 stays -0.
VReg expandExpm1(PairMath& p, VReg x) {
  VReg e = p.horner(kExpm1E, 18, x);
  VReg x2 = p.mul(x, x);
  p.update(e, [&](VReg q) { return p.mul(q, x2); });
  p.drop(x2);
  p.update(e, [&](VReg q) { return p.add(x, q); });
  VReg big = p.exp(x);
  p.update(big, [&](VReg q) { return p.add(q, -1.0); });
  VReg a = p.abs(x);
  int m = p.cmp("ge", a, 1.0);
  p.drop(a);
  p.selectInto(e, m, big);
  p.dropMask(m);
  p.drop(big);
  int zero = p.cmp("eq", x, 0.0);
  p.selectInto(e, zero, x);
  p.dropMask(zero);
  p.keepNaN(e, x);
  return e;
}

// tanh from E = expm1(-2|x|) in (-1, 0]: tanh|x| = -E / (E + 2), which keeps
// the relative precision near 0; from |x| = 22 on it is 1. The sign of x.
VReg expandTanh(PairMath& p, VReg x) {
  VReg a = p.abs(x);
  VReg m2 = p.mul(a, -2.0);
  VReg e = expandExpm1(p, m2);
  p.drop(m2);
  VReg d = p.add(e, 2.0);
  p.update(e, [&](VReg q) { return p.mul(q, -1.0); });
  VReg r = p.div(e, d);
  p.drop({e, d});
  p.whereCmp(r, a, "ge", 22.0, 1.0);
  p.drop(a);
  p.copySign(r, x);
  p.keepNaN(r, x);
  return r;
}

// logistic(x) = 1 / (1 + e^-x): with e = e^-|x|, 1 / (1 + e) for x >= 0
// and e / (1 + e) for x < 0 (no overflow, subnormal results kept).
VReg expandLogistic(PairMath& p, VReg x) {
  VReg a = p.abs(x);
  p.update(a, [&](VReg q) { return p.mul(q, -1.0); });
  VReg e = p.exp(a);
  p.drop(a);
  VReg d = p.add(e, 1.0);
  VReg num = p.k(1.0);
  int neg = p.cmp("lt", x, 0.0);
  p.selectInto(num, neg, e);
  p.dropMask(neg);
  VReg r = p.div(num, d);
  p.drop({e, d, num});
  p.keepNaN(r, x);
  return r;
}

// {cosh x, sinh x} from E = expm1(|x|):
//   sinh|x| = (E + E / (E + 1)) / 2,  cosh x = ((E + 1) + 1 / (E + 1)) / 2;
// from |x| = 700 on both are (e^(|x|/2) / 2) e^(|x|/2) (e^|x| would
// overflow before the result does). sinh gets the sign of x.
std::pair<VReg, VReg> coshSinh(PairMath& p, VReg x) {
  VReg a = p.abs(x);
  VReg e = expandExpm1(p, a);
  VReg e1 = p.add(e, 1.0);
  VReg q = p.div(e, e1);
  VReg sh = p.add(e, q);
  p.drop(q);
  p.update(sh, [&](VReg t) { return p.mul(t, 0.5); });
  VReg one = p.k(1.0);
  VReg r = p.div(one, e1);
  p.drop(one);
  VReg ch = p.add(e1, r);
  p.drop({r, e, e1});
  p.update(ch, [&](VReg t) { return p.mul(t, 0.5); });
  VReg h = p.mul(a, 0.5);
  p.update(h, [&](VReg t) { return p.exp(t); });
  VReg big = p.mul(h, 0.5);
  p.update(big, [&](VReg t) { return p.mul(t, h); });
  p.drop(h);
  int m = p.cmp("ge", a, 700.0);
  p.selectInto(ch, m, big);
  p.selectInto(sh, m, big);
  p.dropMask(m);
  p.drop({big, a});
  p.copySign(sh, x);
  p.keepNaN(sh, x);
  p.keepNaN(ch, x);
  return {ch, sh};
}

// t + t z Q(z), z = t^2 (the odd series of atan or asin near 0).
VReg oddSeries(PairMath& p, VReg t, const double* q, int n) {
  VReg z = p.mul(t, t);
  VReg s = p.horner(q, n, z);
  VReg tz = p.mul(t, z);
  p.drop(z);
  p.update(s, [&](VReg v) { return p.mul(v, tz); });
  p.drop(tz);
  p.update(s, [&](VReg v) { return p.add(t, v); });
  return s;
}

// atan(a) for a >= 0 (inf and NaN included) by fdlibm's reduction points
// c = 1/2, 1, 3/2, inf (|a| < 7/16: none): atan(a) = atan(c) + atan(t),
// t = (a - c) / (1 + a c) in [-7/16, 7/16], written with exact numerators
// ((2a - 1) / (2 + a), (a - 1) / (a + 1), (a - 1.5) / (1 + 1.5 a), -1 / a);
// atan(c) as head + tail added around the series.
VReg atanNonNegative(PairMath& p, VReg a) {
  // num = a P - Q, den = a R + S, per range (small, 1/2, 1, 3/2, inf).
  static constexpr double kBounds[] = {7.0 / 16, 11.0 / 16, 19.0 / 16, 39.0 / 16};
  static constexpr double kP[] = {1, 2, 1, 1, 0}, kQ[] = {0, 1, 1, 1.5, 1}, kR[] = {0, 1, 1, 1.5, 1},
                          kS[] = {1, 2, 1, 1, 0}, kHi[] = {0, kAtanHi[0], kAtanHi[1], kAtanHi[2], kAtanHi[3]},
                          kLo[] = {0, kAtanLo[0], kAtanLo[1], kAtanLo[2], kAtanLo[3]};
  const double* tables[] = {kP, kQ, kR, kS, kHi, kLo};
  VReg c[6];
  for (int i = 0; i < 6; ++i) c[i] = p.k(tables[i][0]);
  for (int r = 1; r <= 4; ++r) {
    int m = p.cmp("ge", a, kBounds[r - 1]);
    for (int i = 0; i < 6; ++i) p.selectInto(c[i], m, tables[i][r]);
    p.dropMask(m);
  }
  VReg num = p.mul(a, c[0]);
  p.update(num, [&](VReg v) { return p.sub(v, c[1]); });
  int inf = p.cmp("ge", a, kBounds[3]);  // a P would be NaN for a = inf
  p.selectInto(num, inf, -1.0);
  p.dropMask(inf);
  VReg den = p.mul(a, c[2]);
  p.update(den, [&](VReg v) { return p.add(v, c[3]); });
  VReg t = p.div(num, den);
  p.drop({num, den});
  VReg s = oddSeries(p, t, kAtanQ, 11);
  // hi + (t + (t z Q + lo)): the series minus t, plus lo, plus t, plus hi.
  p.update(s, [&](VReg v) { return p.sub(v, t); });
  p.update(s, [&](VReg v) { return p.add(v, c[5]); });
  p.update(s, [&](VReg v) { return p.add(v, t); });
  p.update(s, [&](VReg v) { return p.add(v, c[4]); });
  p.drop(t);
  for (VReg v : c) p.drop(v);
  return s;
}

VReg expandAtan(PairMath& p, VReg x) {
  VReg a = p.abs(x);
  VReg r = atanNonNegative(p, a);
  p.drop(a);
  p.copySign(r, x);
  p.keepNaN(r, x);
  return r;
}

// atan2(y, x) from atan of t = min(|x|, |y|) / max(|x|, |y|) in [0, 1]
// (0/0 read as 0, inf/inf as 1, which gives C's answers for the signed
// zeros and infinities), then the octant: |y| > |x| gives pi/2 - r, x < 0
// (its sign bit, so -0 counts) pi - r, with pi/2 as head + tail; the sign
// of y; NaN for a NaN operand.
VReg expandAtan2(PairMath& p, VReg y, VReg x) {
  VReg ax = p.abs(x), ay = p.abs(y);
  VReg mn = p.op("vmin.f64", ax, ay), mx = p.op("vmax.f64", ax, ay);
  VReg t = p.div(mn, mx);
  p.whereCmp(t, mx, "eq", 0.0, 0.0);
  p.whereCmp(t, mn, "eq", std::numeric_limits<double>::infinity(), 1.0);
  p.drop({mn, mx});
  VReg r = atanNonNegative(p, t);
  p.drop(t);
  constexpr double kPio2Hi = kAtanHi[3], kPio2Lo = kAtanLo[3];
  auto fromMultiple = [&](int k) {  // k pi/2 - r = k hi - (r - k lo)
    VReg d = p.add(r, -k * kPio2Lo);
    VReg e = p.rsub(k * kPio2Hi, d);
    p.drop(d);
    return e;
  };
  VReg alt = fromMultiple(1);
  int m = p.cmp("gt", ay, ax);
  p.selectInto(r, m, alt);
  p.dropMask(m);
  p.drop({alt, ax, ay});
  alt = fromMultiple(2);
  int neg = p.malloc();
  p.e_.op("vcmp.lt.s32 {}, {}, 0", p.M(neg), p.H(x));
  p.selectInto(r, neg, alt);
  p.dropMask(neg);
  p.drop(alt);
  p.copySign(r, y);
  p.nanWhereEitherNaN(r, x, y);
  return r;
}

// asin and acos from the odd series S of asin on |t| <= 1/2, a = |x|:
//   a <= 1/2: asin = S(a) (sign of x); acos = pi/2 - asin(x);
//   a >  1/2: s = sqrt((1 - a) / 2) ((1 - a) / 2 exact), asin = pi/2 - 2 S(s);
//             acos = 2 S(s) for x > 0, pi - 2 S(s) for x < 0.
// |x| > 1 takes the square root of a negative number: NaN.
VReg expandAsinAcos(PairMath& p, VReg x, bool acos) {
  constexpr double kPio2Hi = kAtanHi[3], kPio2Lo = kAtanLo[3];
  VReg a = p.abs(x);
  VReg small = oddSeries(p, a, kAsinQ, 14);
  VReg z = p.rsub(1.0, a);
  p.update(z, [&](VReg v) { return p.mul(v, 0.5); });
  VReg s = p.valloc(hlo::ElementType::F64);
  for (int w = 0; w < 2; ++w)
    p.e_.op("vsqrt.f64 {}, {}, {}, {}", w ? p.H(s) : p.V(s), p.V(z), p.H(z), w);
  p.drop(z);
  VReg q = oddSeries(p, s, kAsinQ, 14);
  p.drop(s);
  p.update(q, [&](VReg v) { return p.add(v, v); });  // 2 S(s)
  auto fromMultiple = [&](VReg v, int k) {  // k pi/2 - v = k hi - (v - k lo)
    VReg d = p.add(v, -k * kPio2Lo);
    VReg e = p.rsub(k * kPio2Hi, d);
    p.drop(d);
    return e;
  };
  int half = p.cmp("le", a, 0.5);
  VReg r;
  if (!acos) {
    r = fromMultiple(q, 1);
    p.selectInto(r, half, small);
    p.copySign(r, x);
  } else {
    r = fromMultiple(q, 2);
    int pos = p.cmp("gt", x, 0.5);
    p.selectInto(r, pos, q);
    p.dropMask(pos);
    p.copySign(small, x);
    VReg mid = fromMultiple(small, 1);
    p.selectInto(r, half, mid);
    p.drop(mid);
  }
  p.dropMask(half);
  p.drop({a, small, q});
  p.keepNaN(r, x);
  return r;
}

// The inverse hyperbolic functions through log1p (keeps the relative
// precision of small arguments):
//   asinh(x) = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2))),  a = |x|
//   acosh(x) = log1p(t + sqrt(t (t + 2))),  t = x - 1 (NaN for x < 1)
//   atanh(x) = sign(x) log1p(2a / (1 - a)) / 2  (NaN for a > 1)
// from a = 2^28 on, asinh and acosh are ln(a) + ln 2 (a^2 overflows first).
VReg expandInverseHyperbolic(PairMath& p, hlo::Opcode op, VReg x) {
  auto sqrtOf = [&](VReg v) {
    VReg s = p.valloc(hlo::ElementType::F64);
    for (int w = 0; w < 2; ++w) p.e_.op("vsqrt.f64 {}, {}, {}, {}", w ? p.H(s) : p.V(s), p.V(v), p.H(v), w);
    return s;
  };
  VReg a = op == hlo::Opcode::Acosh ? p.vcopy(x, hlo::ElementType::F64) : p.abs(x);
  VReg y;
  if (op == hlo::Opcode::Atanh) {
    VReg d = p.rsub(1.0, a);
    VReg twice = p.add(a, a);
    y = p.div(twice, d);
    p.drop({d, twice});
  } else if (op == hlo::Opcode::Asinh) {
    VReg a2 = p.mul(a, a);
    VReg s = p.add(a2, 1.0);
    p.update(s, sqrtOf);
    p.update(s, [&](VReg v) { return p.add(v, 1.0); });
    y = p.div(a2, s);
    p.drop({a2, s});
    p.update(y, [&](VReg v) { return p.add(v, a); });
  } else {
    VReg t = p.add(a, -1.0);
    VReg s = p.add(t, 2.0);
    p.update(s, [&](VReg v) { return p.mul(v, t); });
    p.update(s, sqrtOf);
    y = p.add(t, s);
    p.drop({t, s});
  }
  VReg r = expandLog1p(p, y);
  p.drop(y);
  if (op == hlo::Opcode::Atanh) {
    p.update(r, [&](VReg v) { return p.mul(v, 0.5); });
  } else {
    VReg big = expandLog(p, a);
    p.update(big, [&](VReg v) { return p.add(v, kLn2Hi); });
    p.update(big, [&](VReg v) { return p.add(v, kLn2Lo); });
    int m = p.cmp("ge", a, 0x1p28);
    p.selectInto(r, m, big);
    p.dropMask(m);
    p.drop(big);
  }
  if (op == hlo::Opcode::Acosh) {
    p.whereCmp(r, x, "lt", 1.0, std::numeric_limits<double>::quiet_NaN());
  } else {
    p.copySign(r, x);
  }
  p.drop(a);
  p.keepNaN(r, x);
  return r;
}

// cbrt: a first guess from the bits (the exponent divided by 3, fdlibm's
// constant 715094163 for the mantissa; subnormals scaled by 2^54 first),
// then four Newton steps y += (a / y^2 - y) / 3 (each squares the relative
// error: 5% -> 1e-20), on |x|; the sign of x; 0, inf and NaN kept.
VReg expandCbrt(PairMath& p, VReg x) {
  Emitter& e = p.e_;
  VReg a = p.abs(x);
  int sub = p.cmp("lt", a, 0x1p-1022);
  VReg as = p.mul(a, 0x1p54);
  VReg s = p.vcopy(a, hlo::ElementType::F64);
  p.selectInto(s, sub, as);
  p.drop(as);
  // y0 = high word / 3 + B1 (subnormals: B2 = B1 - 18 << 20 undoes the 2^54),
  // low word 0; the division by 3 in f32 (close enough for a first guess).
  VReg y = p.valloc(hlo::ElementType::F64);
  VReg third = p.valloc(hlo::ElementType::S32);
  e.op("vcvt.f32.s32 {}, {}", p.V(third), p.H(s));
  e.op("vmul.f32 {}, {}, 0.33333334", p.V(third), p.V(third));
  e.op("vcvt.s32.f32 {}, {}", p.H(y), p.V(third));
  e.op("vmov.s32 {}, 715094163", p.V(third));
  e.op("vmov.s32 {}, 696219795", p.V(y));
  e.op("vsel.s32 {}, {}, {}, {}", p.V(third), p.M(sub), p.V(y), p.V(third));
  e.op("vadd.s32 {}, {}, {}", p.H(y), p.H(y), p.V(third));
  e.op("vmov.s32 {}, 0", p.V(y));
  p.drop(third);
  p.dropMask(sub);
  p.drop(s);
  for (int i = 0; i < 4; ++i) {
    VReg y2 = p.mul(y, y);
    VReg q = p.div(a, y2);
    p.drop(y2);
    p.update(q, [&](VReg v) { return p.sub(v, y); });
    p.update(q, [&](VReg v) { return p.mul(v, 1.0 / 3); });
    p.update(y, [&](VReg v) { return p.add(v, q); });
    p.drop(q);
  }
  int special = p.cmp("eq", a, 0.0);
  p.selectInto(y, special, a);
  p.dropMask(special);
  p.whereCmp(y, a, "eq", std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  p.drop(a);
  p.copySign(y, x);
  p.keepNaN(y, x);
  return y;
}

// ln|x| as a double-word hi + lo, accurate to about 2^-66 relative (pow
// multiplies it by y): the reduction of logCore, then ln m = 2 atanh(s),
// s = f / (2 + f) as sh + sl, = 2 sh + 2 sl + (2/3) sh^3 (double-word) +
// 2 sh^2 sl + sh^3 z Q(z) with Q the rest of the series (kLogR[1..] / 2),
// and k ln 2 as an exact head plus a tail. Only finite positive x.
std::pair<VReg, VReg> logDoubleWord(PairMath& p, VReg x) {
  auto [f, kd] = reduceForLog(p, x);
  // d = 2 + f as dh + dl; sh = f / dh; sl = ((f - sh dh) - sh dl) / dh with
  // sh dh exact as a two-product (f - its head is exact: they are close).
  VReg two = p.k(2.0);
  auto [dh, dl] = twoSum(p, two, f);
  p.drop(two);
  VReg sh = p.div(f, dh);
  auto [ph, pl] = p.twoProduct(sh, dh);
  VReg r = p.sub(f, ph);
  p.update(r, [&](VReg v) { return p.sub(v, pl); });
  VReg q = p.mul(sh, dl);
  p.update(r, [&](VReg v) { return p.sub(v, q); });
  p.drop({q, ph, pl, dl, f});
  VReg sl = p.div(r, dh);
  p.drop({r, dh});
  // sh^2 = a + ae, sh^3 = b + b2 (b2 = be + ae sh), (2/3) sh^3 = c + c2.
  auto [a, ae] = p.twoProduct(sh, sh);
  auto [b, be] = p.twoProduct(a, sh);
  VReg b2 = p.mul(ae, sh);
  p.update(b2, [&](VReg v) { return p.add(v, be); });
  p.drop({be, ae});
  constexpr double k23h = 0x1.5555555555555p-1, k23l = 0x1.5555555555555p-55;  // 2/3 = k23h + k23l
  VReg c23 = p.k(k23h);
  auto [c, ce] = p.twoProduct(b, c23);
  p.drop(c23);
  VReg c2 = p.mul(b2, k23h);
  VReg c3 = p.mul(b, k23l);
  p.update(c2, [&](VReg v) { return p.add(v, c3); });
  p.drop({c3, b2});
  p.update(c2, [&](VReg v) { return p.add(v, ce); });
  p.drop(ce);
  // The rest of the series: sh^3 z Q(z), z = sh^2, Q = sum 2/(2n+1) z^(n-2), n >= 2.
  VReg tail = p.horner(kLogR + 1, 10, a);
  p.update(tail, [&](VReg v) { return p.mul(v, a); });
  p.update(tail, [&](VReg v) { return p.mul(v, b); });
  p.drop(b);
  // low part: 2 sl + 2 sh^2 sl + c2 + tail
  VReg lo = p.mul(a, sl);
  p.drop(a);
  p.update(lo, [&](VReg v) { return p.add(v, sl); });
  p.update(lo, [&](VReg v) { return p.add(v, v); });
  p.drop(sl);
  p.update(lo, [&](VReg v) { return p.add(v, c2); });
  p.update(lo, [&](VReg v) { return p.add(v, tail); });
  p.drop({c2, tail});
  // hi: 2 sh + c (two-sum), then k ln2_hi (exact product, two-sum).
  VReg sh2 = p.add(sh, sh);
  p.drop(sh);
  auto [h1, e1] = twoSum(p, sh2, c);
  p.drop({sh2, c});
  p.update(lo, [&](VReg v) { return p.add(v, e1); });
  p.drop(e1);
  VReg kh = p.mul(kd, kLn2Hi);
  auto [h2, e2] = twoSum(p, kh, h1);
  p.drop({kh, h1});
  p.update(lo, [&](VReg v) { return p.add(v, e2); });
  p.drop(e2);
  VReg kl = p.mul(kd, kLn2Lo);
  p.drop(kd);
  p.update(lo, [&](VReg v) { return p.add(v, kl); });
  p.drop(kl);
  // renormalize
  auto [hi, lo2] = twoSum(p, h2, lo);
  p.drop({h2, lo});
  return {hi, lo2};
}

// pow(x, y) = e^(y ln|x|) with ln|x| and the product as double-words and
// e^(hi + lo) = e^hi (1 + lo); then C's special cases: y = 0 or x = 1
// give 1; x < 0 with an integer y takes the sign of its parity, with any
// other finite y is NaN; zeros, infinities and y = +-inf as IEEE 754 says.
VReg expandPow(PairMath& p, VReg x, VReg y) {
  Emitter& e = p.e_;
  using hlo::ElementType;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  VReg ax = p.abs(x), ay = p.abs(y);
  // A finite positive stand-in for |x| where it is 0, inf or NaN (fixed below).
  VReg xf = p.vcopy(ax, ElementType::F64);
  int bad = p.cmp("eq", ax, 0.0);
  p.selectInto(xf, bad, 1.0);
  p.dropMask(bad);
  bad = p.cmp("ge", ax, kInf);
  p.selectInto(xf, bad, 1.0);
  p.dropMask(bad);
  bad = p.cmp("ne", ax, ax);
  p.selectInto(xf, bad, 1.0);
  p.dropMask(bad);
  auto [lh, ll] = logDoubleWord(p, xf);
  p.drop(xf);
  // y (lh + ll) = yh + yl: y lh exact as a two-product, plus y ll. y is
  // clamped to 2^900 for the split (larger |y| overflow e^ anyway unless
  // ln|x| = 0, x = 1, handled below).
  VReg yc = p.op("vmin.f64", y, 0x1p900);
  p.update(yc, [&](VReg v) { return p.op("vmax.f64", v, -0x1p900); });
  auto [yh, ye] = p.twoProduct(yc, lh);
  VReg t = p.mul(yc, ll);
  p.drop({yc, ll});
  p.update(ye, [&](VReg v) { return p.add(v, t); });
  p.drop(t);
  auto [zh, zl] = twoSum(p, yh, ye);
  p.drop({yh, ye});
  VReg r = p.exp(zh);
  VReg corr = p.mul(r, zl);
  p.update(r, [&](VReg v) { return p.add(v, corr); });
  p.drop({corr, zl});
  // Where y ln|x| is far out of range (or y was clamped), e^(y ln|x|) from
  // the plain product: 0 or inf.
  VReg plain = p.mul(y, lh);
  p.drop(lh);
  VReg pe = p.exp(plain);
  int far = p.cmp("gt", plain, 800.0);
  p.selectInto(r, far, pe);
  p.dropMask(far);
  far = p.cmp("lt", plain, -800.0);
  p.selectInto(r, far, pe);
  p.dropMask(far);
  p.drop({plain, pe});
  // |x| = 0: 0 for y > 0, inf for y < 0; |x| = inf: the other way round.
  int yneg = p.cmp("lt", y, 0.0);
  VReg zeroRes = p.k(0.0), infRes = p.k(kInf);
  p.selectInto(zeroRes, yneg, kInf);
  p.selectInto(infRes, yneg, 0.0);
  p.dropMask(yneg);
  int m = p.cmp("eq", ax, 0.0);
  p.selectInto(r, m, zeroRes);
  p.dropMask(m);
  m = p.cmp("eq", ax, kInf);
  p.selectInto(r, m, infRes);
  p.dropMask(m);
  p.drop({zeroRes, infRes});
  // y = +-inf: 1 for |x| = 1, else for y = +inf 0 (|x| < 1) or inf, for
  // y = -inf the other way round.
  {
    VReg pos = p.k(kInf), negv = p.k(0.0);
    int lt1 = p.cmp("lt", ax, 1.0);
    p.selectInto(pos, lt1, 0.0);
    p.selectInto(negv, lt1, kInf);
    p.dropMask(lt1);
    int yn = p.cmp("lt", y, 0.0);
    p.selectInto(pos, yn, negv);
    p.dropMask(yn);
    p.drop(negv);
    int one = p.cmp("eq", ax, 1.0);
    p.selectInto(pos, one, 1.0);
    p.dropMask(one);
    int yinf = p.cmp("eq", ay, kInf);
    p.selectInto(r, yinf, pos);
    p.dropMask(yinf);
    p.drop(pos);
  }
  // x negative (its sign bit): an odd integer y negates, a non-integer
  // finite y gives NaN.
  VReg fl = p.valloc(ElementType::F64);
  for (int w = 0; w < 2; ++w) e.op("vfloor.f64 {}, {}, {}, {}", w ? p.H(fl) : p.V(fl), p.V(y), p.H(y), w);
  int isInt = p.cmp("eq", fl, y);
  p.drop(fl);
  VReg half = p.mul(y, 0.5);
  VReg hf = p.valloc(ElementType::F64);
  for (int w = 0; w < 2; ++w) e.op("vfloor.f64 {}, {}, {}, {}", w ? p.H(hf) : p.V(hf), p.V(half), p.H(half), w);
  int odd = p.cmp("ne", hf, half);  // y / 2 not an integer (false for |y| >= 2^53 and inf)
  p.drop({half, hf});
  VReg sgn = p.valloc(ElementType::S32);
  e.op("vmov.s32 {}, -2147483648", p.V(sgn));
  e.op("vsel.s32 {}, {}, {}, 0", p.V(sgn), p.M(odd), p.V(sgn));
  e.op("vsel.s32 {}, {}, {}, 0", p.V(sgn), p.M(isInt), p.V(sgn));
  p.dropMask(odd);
  int neg = p.malloc();
  e.op("vcmp.lt.s32 {}, {}, 0", p.M(neg), p.H(x));
  e.op("vsel.s32 {}, {}, {}, 0", p.V(sgn), p.M(neg), p.V(sgn));
  p.dropMask(neg);
  e.op("vxor {}, {}, {}", p.H(r), p.H(r), p.V(sgn));
  p.drop(sgn);
  // x finite and < 0 (not -0), y finite and not an integer: NaN.
  VReg nanOr = p.k(std::numeric_limits<double>::quiet_NaN());
  p.selectInto(nanOr, isInt, r);
  p.dropMask(isInt);
  int yinf2 = p.cmp("eq", ay, kInf);
  p.selectInto(nanOr, yinf2, r);
  p.dropMask(yinf2);
  int xinf = p.cmp("eq", ax, kInf);  // pow(-inf, y) is +-0 or +-inf for every y
  p.selectInto(nanOr, xinf, r);
  p.dropMask(xinf);
  int xlt = p.cmp("lt", x, 0.0);
  p.selectInto(r, xlt, nanOr);
  p.dropMask(xlt);
  p.drop(nanOr);
  // NaN operands give NaN, then y = 0 and x = 1 give 1 (whatever the other).
  p.nanWhereEitherNaN(r, x, y);
  p.whereCmp(r, y, "eq", 0.0, 1.0);
  p.whereCmp(r, x, "eq", 1.0, 1.0);
  p.drop({ax, ay});
  return r;
}

}  // namespace

std::optional<VReg> Lowerer::expandMathF64(hlo::Opcode op, const std::vector<VReg>& ops) {
  PairMath p(*this, e_, masks_);
  // Registers rotate through the expansion (the caller's setting comes
  // back after): the same number live, but independent steps, like Payne
  // and Hanek's integer reduction beside Cody and Waite's f64 one, land in
  // different registers and the scheduler overlaps them.
  struct Rotate {
    RegPool& pool;
    bool was = pool.rotating();
    explicit Rotate(RegPool& r) : pool(r) { pool.setRotating(true); }
    ~Rotate() { pool.setRotating(was); }
  } rotate(vregs_);
  switch (op) {
    case hlo::Opcode::Log:
      return expandLog(p, ops[0]);
    case hlo::Opcode::Log1p:
      return expandLog1p(p, ops[0]);
    case hlo::Opcode::Sin:
    case hlo::Opcode::Cos:
    case hlo::Opcode::Tan:
      return expandSinCosTan(p, op, ops[0]);
    case hlo::Opcode::Erf:
      return expandErf(p, ops[0]);
    case hlo::Opcode::Expm1:
      return expandExpm1(p, ops[0]);
    case hlo::Opcode::Tanh:
      return expandTanh(p, ops[0]);
    case hlo::Opcode::Logistic:
      return expandLogistic(p, ops[0]);
    case hlo::Opcode::Cosh:
    case hlo::Opcode::Sinh: {
      auto [ch, sh] = coshSinh(p, ops[0]);
      p.drop(op == hlo::Opcode::Cosh ? sh : ch);
      return op == hlo::Opcode::Cosh ? ch : sh;
    }
    case hlo::Opcode::Atan:
      return expandAtan(p, ops[0]);
    case hlo::Opcode::Atan2:
      return expandAtan2(p, ops[0], ops[1]);
    case hlo::Opcode::Asin:
    case hlo::Opcode::Acos:
      return expandAsinAcos(p, ops[0], op == hlo::Opcode::Acos);
    case hlo::Opcode::Asinh:
    case hlo::Opcode::Acosh:
    case hlo::Opcode::Atanh:
      return expandInverseHyperbolic(p, op, ops[0]);
    case hlo::Opcode::Cbrt:
      return expandCbrt(p, ops[0]);
    case hlo::Opcode::Power:
      return expandPow(p, ops[0], ops[1]);
    default:
      return std::nullopt;
  }
}

}  // namespace tpu::codegen
