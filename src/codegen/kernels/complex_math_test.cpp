// Complex library math composed from chip instructions (kernels/complex.cpp:
// ComplexMath; c64 from f32 instructions, c128 from f64 pair instructions),
// measured against std::complex<long double> (x86's 80-bit long double: 40
// bits more than f32, 11 more than f64) over dense inputs and edge values
// (signed zeros, infinities, NaNs, huge and tiny magnitudes, the branch cut
// of the negative reals).
//
// The error of a complex result is normwise: |got - want| / |want| in units
// of the part type's epsilon, 2^-23 or 2^-52 ("ulps" of the result; a part much smaller than the
// other may be off by more in its own ulps, as in XLA's formulas). The bound
// of each op is pinned here and stated in docs/DESIGN.md ("Complex library math from chip instructions"). Where the exact
// result has an infinite or NaN part, the compiled one must have one too.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;
using CL = std::complex<long double>;
using CF = std::complex<float>;


// The part type's traits: f32 for c64, f64 for c128.
template <typename R>
struct Part {
  static constexpr bool kWide = sizeof(R) == 8;
  static constexpr const char* kComplex = kWide ? "c128" : "c64";
  static constexpr const char* kReal = kWide ? "f64" : "f32";
  static constexpr ElementType kType = kWide ? ElementType::C128 : ElementType::C64;
  static constexpr long double kEps = kWide ? 0x1p-52L : 0x1p-23L;
  static constexpr long double kFloor = kWide ? 0x1p-1022L : 0x1p-126L;  // smallest normal
};

template <typename R>
hlo::Literal complexLiteral(const std::vector<std::complex<R>>& v) {
  hlo::Literal l(hlo::Shape::array(Part<R>::kType, {static_cast<int64_t>(v.size())}));
  std::memcpy(l.mutableData().data(), v.data(), v.size() * sizeof(std::complex<R>));
  return l;
}

// Parts that exercise every path: signed zeros, infinities, NaN, the
// type's extremes and subnormals, values around 1, and pi/2 (tan's pole).
template <typename R>
std::vector<R> edgeParts() {
  const R inf = std::numeric_limits<R>::infinity(), nan = std::numeric_limits<R>::quiet_NaN();
  if constexpr (Part<R>::kWide)
    return {0.0,   -0.0,  1.0,   -1.0,   0.5,  -2.0, 1e-310, -1e-300, 1.7e308, -1e300, 1e150,
            700.0, -750.0, 1.5707963267948966, 40.0, 0.9999999999999999, inf, -inf, nan};
  else
    return {0.0f,  -0.0f, 1.0f,  -1.0f,  0.5f, -2.0f, 1e-40f, -1e-30f, 3e38f, -1e30f, 1e20f,
            88.0f, -90.0f, 1.5707964f, 20.0f, 0.99999994f, inf, -inf, nan};
}

// Dense inputs: parts uniform in [-r, r], then log-uniform magnitudes from
// 2^-e to 2^e with both signs, then small ones near the unit circle and 0.
template <typename R = float>
std::vector<std::complex<R>> denseInputs(uint32_t seed, std::type_identity_t<R> r, int e, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<R> u(-r, r);
  std::uniform_real_distribution<R> lg(static_cast<R>(-e), static_cast<R>(e));
  std::vector<std::complex<R>> v;
  while (v.size() < n) {
    size_t k = v.size() % 4;
    auto logPart = [&] { return std::exp2(lg(rng)) * ((rng() & 1) ? R(1) : R(-1)); };
    if (k == 0 || k == 1) v.emplace_back(u(rng), u(rng));
    else if (k == 2) v.emplace_back(logPart(), logPart());
    else {
      R t = u(rng), m = R(1) + R(1e-3) * u(rng);  // |z| near 1: the real part of log near 0
      v.emplace_back(m * std::cos(t), m * std::sin(t));
    }
  }
  return v;
}

template <typename R = float>
std::vector<std::complex<R>> edgeInputs() {
  std::vector<std::complex<R>> v;
  for (R a : edgeParts<R>())
    for (R b : edgeParts<R>()) v.emplace_back(a, b);
  return v;
}

// Normwise error in units of the part type's epsilon, or -1 for a result
// the measure does not apply to (a non-finite exact part: checked separately).
template <typename R>
double errorUlps(std::complex<R> got, CL want) {
  if (!std::isfinite(want.real()) || !std::isfinite(want.imag())) return -1;
  const long double big = std::numeric_limits<R>::max();
  if (std::abs(want.real()) > big || std::abs(want.imag()) > big) return -1;  // overflows: inf is right
  long double a = std::abs(want);
  long double d = std::abs(CL(got.real(), got.imag()) - want);
  if (std::isnan(static_cast<double>(d))) return 1e30;
  // Below the normal range the error is absolute, in units of the smallest
  // normal (results that small may flush to zero, as e^-z overflowing in logistic).
  if (a < Part<R>::kFloor) return static_cast<double>(d / Part<R>::kFloor);
  return static_cast<double>(d / a / Part<R>::kEps);
}

struct Measured {
  double maxUlps = 0;
  std::string worst;
  int nonFiniteMisses = 0;  // exact result non-finite, compiled finite
  std::string firstMiss;
  std::string error;
  uint64_t cycles = 0;
};

// Runs `text` (one or two complex [n] parameters) on a and b and measures
// every element against ref.
template <typename R, typename Ref>
Measured measure(const std::string& text, const std::vector<std::complex<R>>& a,
                 const std::vector<std::complex<R>>& b, Ref ref, bool realResult = false) {
  using C = std::complex<R>;
  Measured m;
  PipelineRun run = runPipeline(text, [&](size_t i, const hlo::Shape&) { return complexLiteral(i == 0 ? a : b); });
  if (!run.error.empty()) {
    m.error = run.error;
    return m;
  }
  m.cycles = run.report.cycles;
  for (size_t k = 0; k < a.size(); ++k) {
    C g;
    if (realResult) {
      R f;
      std::memcpy(&f, run.got[0].data() + k * sizeof(R), sizeof f);
      g = C(f, R(0));
    } else {
      std::memcpy(&g, run.got[0].data() + k * sizeof(C), sizeof g);
    }
    CL x(a[k].real(), a[k].imag());
    CL y = b.empty() ? CL() : CL(b[k].real(), b[k].imag());
    CL w = ref(x, y);
    double e = errorUlps(g, w);
    auto where = [&] {
      return fmt::format("z = ({}, {}){} got ({}, {}) want ({}, {})", a[k].real(), a[k].imag(),
                         b.empty() ? "" : fmt::format(" w = ({}, {})", b[k].real(), b[k].imag()), g.real(), g.imag(),
                         static_cast<double>(w.real()), static_cast<double>(w.imag()));
    };
    if (e < 0) {
      const long double big = std::numeric_limits<R>::max();
      bool exactNonFinite = !(std::abs(w.real()) <= big) || !(std::abs(w.imag()) <= big);
      if (exactNonFinite && std::isfinite(g.real()) && std::isfinite(g.imag())) {
        if (m.nonFiniteMisses++ == 0) m.firstMiss = where();
      }
      continue;
    }
    if (e > m.maxUlps) {
      m.maxUlps = e;
      m.worst = where();
    }
  }
  return m;
}

std::string unary(const char* op, size_t n, const char* rt = "c64", const char* t = "c64") {
  return fmt::format("HloModule m\nENTRY main {{\n  a = {3}[{1}] parameter(0)\n  ROOT r = {2}[{1}] {0}(a)\n}}\n",
                     op, n, rt, t);
}
std::string binary(const char* op, size_t n, const char* t = "c64") {
  return fmt::format(
      "HloModule m\nENTRY main {{\n  a = {2}[{1}] parameter(0)\n  b = {2}[{1}] parameter(1)\n"
      "  ROOT r = {2}[{1}] {0}(a, b)\n}}\n",
      op, n, t);
}

// Exact references the long double library gets wrong near 0 (e^z - 1 and
// ln(1 + z) cancel there): composed from expm1l / log1pl.
CL refExpm1(CL z) {
  long double x = z.real(), y = z.imag();
  if (!std::isfinite(x) || !std::isfinite(y)) return std::exp(z) - CL(1);  // C's cexp special values
  long double s = std::sin(y / 2);
  return CL(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
}
CL refLog1p(CL z) {
  long double x = z.real(), y = z.imag();
  if (std::abs(x) < 0.5L && std::abs(y) < 0.5L)
    return CL(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, 1 + x));
  return std::log(CL(1) + z);
}

// 1 / (1 + e^-z): 1 + e^-z cancels near the poles (2k + 1) pi i even in
// long double (off by hundreds of f64 ulps at 1e-6 from one), so for |x| < 1
// its real part is 2 cos^2(y/2) + expm1(-x) cos y there.
CL refLogistic(CL z) {
  long double x = z.real(), y = z.imag();
  if (!(std::abs(x) < 1) || !std::isfinite(y)) return CL(1) / (CL(1) + std::exp(-z));
  long double c = std::cos(y / 2);
  return CL(1) / CL(2 * c * c + std::expm1(-x) * std::cos(y), -std::exp(-x) * std::sin(y));
}

struct UnaryCase {
  const char* op;
  CL (*ref)(CL);
  double bound;      // pinned max normwise ulps, c64
  double boundWide;  // c128
  float range;       // dense parts in [-range, range]
  int logRange;      // and magnitudes 2^-logRange .. 2^logRange
  bool realResult = false;
};

const UnaryCase kUnary[] = {
    {"exponential", [](CL z) { return std::exp(z); }, 6, 6, 10, 6},
    {"exponential-minus-one", refExpm1, 8, 8, 10, 6},
    {"log", [](CL z) { return std::log(z); }, 6, 6, 100, 60},
    {"log-plus-one", refLog1p, 6, 6, 100, 60},
    {"sqrt", [](CL z) { return std::sqrt(z); }, 4, 4, 100, 120},
    {"rsqrt", [](CL z) { return CL(1) / std::sqrt(z); }, 8, 8, 100, 120},
    {"tanh", [](CL z) { return std::tanh(z); }, 10, 10, 12, 6},
    {"sine", [](CL z) { return std::sin(z); }, 8, 8, 10, 6},
    {"cosine", [](CL z) { return std::cos(z); }, 8, 8, 10, 6},
    {"tan", [](CL z) { return std::tan(z); }, 10, 10, 12, 6},
    {"logistic", refLogistic, 12, 12, 10, 6},
    {"sign", [](CL z) { return std::abs(z) == 0 ? z : z / std::abs(z); }, 4, 4, 100, 120},
    {"abs", [](CL z) { return CL(std::hypot(z.real(), z.imag())); }, 3, 3, 100, 120, true},
};

template <typename R>
void unaryOpsWithinTheirBounds() {
  using C = std::complex<R>;
  std::vector<C> edges = edgeInputs<R>();
  for (const UnaryCase& c : kUnary) {
    std::vector<C> in = denseInputs<R>(7, c.range, c.logRange, 6000);
    // Near the poles of logistic and tan and the zeros of 1 + z (pi i and
    // pi/2 multiples, -1): where the composed formulas could cancel.
    for (int k = -3; k <= 3; ++k)
      for (R d : {R(0), R(1e-6), R(-3e-4), R(0.004), R(-0.03)}) {
        R p = static_cast<R>((2 * k + 1) * M_PI / 2);
        in.emplace_back(d, 2 * p + d);
        in.emplace_back(p + d, d);
        in.emplace_back(R(-1) + d, d * R(0.5));
      }
    in.insert(in.end(), edges.begin(), edges.end());
    Measured m = measure<R>(unary(c.op, in.size(), c.realResult ? Part<R>::kReal : Part<R>::kComplex, Part<R>::kComplex),
                            in, {}, [&](CL x, CL) { return c.ref(x); }, c.realResult);
    double bound = Part<R>::kWide ? c.boundWide : c.bound;
    ASSERT_EQ(m.error, "") << c.op;
    EXPECT_LE(m.maxUlps, bound) << c.op << ": worst at " << m.worst;
    EXPECT_EQ(m.nonFiniteMisses, 0) << c.op << ": first at " << m.firstMiss;
    std::printf("%s %-22s max %6.2f ulps (bound %g)\n", Part<R>::kComplex, c.op, m.maxUlps, bound);
  }
}

TEST(ComplexMath, UnaryOpsWithinTheirBounds) { unaryOpsWithinTheirBounds<float>(); }
TEST(ComplexMath, C128UnaryOpsWithinTheirBounds) { unaryOpsWithinTheirBounds<double>(); }

template <typename R>
void multiplyDivideAndPowerWithinTheirBounds(double mulBound, double divBound, double powBound) {
  using C = std::complex<R>;
  const char* t = Part<R>::kComplex;
  const R inf = std::numeric_limits<R>::infinity(), nan = std::numeric_limits<R>::quiet_NaN();
  const R huge = Part<R>::kWide ? R(1.7e308) : R(3e38), tiny = Part<R>::kWide ? R(1e-310) : R(1e-40);
  const R lo = Part<R>::kWide ? R(1e-300) : R(1e-30), hi = Part<R>::kWide ? R(1e300) : R(1e30);
  std::vector<C> edges = edgeInputs<R>();
  std::vector<C> a = denseInputs<R>(11, 8, 40, 6000), b = denseInputs<R>(12, 8, 40, 6000);
  // Every edge against a few hard divisors and dividends.
  for (C x : edges)
    for (C y : {C(0, 0), C(1, -1), C(huge, 1), C(inf, 0), C(-2, tiny), C(nan, 1), C(lo, hi)}) {
      a.push_back(x);
      b.push_back(y);
      a.push_back(y);
      b.push_back(x);
    }
  // The product: each part is a sum of two products, so a part that
  // cancels is off in its own ulps; normwise it is within a few.
  Measured mul = measure<R>(binary("multiply", a.size(), t), a, b, [](CL x, CL y) { return x * y; });
  ASSERT_EQ(mul.error, "");
  EXPECT_LE(mul.maxUlps, mulBound) << mul.worst;
  Measured div = measure<R>(binary("divide", a.size(), t), a, b, [](CL x, CL y) { return x / y; });
  ASSERT_EQ(div.error, "");
  EXPECT_LE(div.maxUlps, divBound) << div.worst;
  EXPECT_EQ(div.nonFiniteMisses, 0) << div.firstMiss;
  std::printf("%s multiply max %.2f ulps, divide max %.2f ulps\n", t, mul.maxUlps, div.maxUlps);

  // Power: e^(b ln a), whose error grows with |b ln a| (the rounding of the
  // exponent is amplified by it): measured for |a| in [2^-4, 2^4] and parts
  // of b in [-3, 3], where |b ln a| < 12.
  std::vector<C> pa = denseInputs<R>(13, 4, 4, 6000), pb = denseInputs<R>(14, 3, 1, 6000);
  for (C& z : pa)
    if (std::abs(z) < R(0.0625)) z *= R(16);
  for (C& z : pb) z = C(std::clamp(z.real(), R(-3), R(3)), std::clamp(z.imag(), R(-3), R(3)));
  Measured pw = measure<R>(binary("power", pa.size(), t), pa, pb, [](CL x, CL y) { return std::pow(x, y); });
  ASSERT_EQ(pw.error, "");
  EXPECT_LE(pw.maxUlps, powBound) << pw.worst;
  std::printf("%s power max %.2f ulps\n", t, pw.maxUlps);
}

TEST(ComplexMath, MultiplyDivideAndPowerWithinTheirBounds) {
  multiplyDivideAndPowerWithinTheirBounds<float>(2, 4, 48);
}
TEST(ComplexMath, C128MultiplyDivideAndPowerWithinTheirBounds) {
  multiplyDivideAndPowerWithinTheirBounds<double>(2, 4, 48);
}

template <typename R>
void specialValuesOfDivideAndPower() {
  using C = std::complex<R>;
  const char* t = Part<R>::kComplex;
  const R inf = std::numeric_limits<R>::infinity();
  // Annex G recoveries in XLA's divide: zero divisor, infinite dividend,
  // infinite divisor; 0^b = 0 for Re b > 0, 0^0 = 1.
  std::vector<C> a = {C(1, 2), C(-1, 0), C(inf, 1), C(1, -inf), C(3, 4), C(0, 0), C(0, 0), C(0, 0)};
  std::vector<C> b = {C(0, 0), C(-0.0, 0), C(2, 3), C(-1, 0.5), C(inf, -inf), C(0, 0), C(2, -1), C(0.5, 7)};
  PipelineRun d = runPipeline(binary("divide", a.size(), t),
                              [&](size_t i, const hlo::Shape&) { return complexLiteral(i == 0 ? a : b); });
  ASSERT_EQ(d.error, "");
  std::vector<C> q(a.size());
  std::memcpy(q.data(), d.got[0].data(), q.size() * sizeof(C));
  EXPECT_EQ(q[0], C(inf, inf));
  // copysign(inf, -0) * (-1 + 0i) = (inf, -inf * 0 = NaN).
  EXPECT_TRUE(q[1].real() == inf && std::isnan(q[1].imag()));
  EXPECT_TRUE(std::isinf(q[2].real()) && std::isinf(q[2].imag()));
  EXPECT_TRUE(std::isinf(q[3].real()) || std::isinf(q[3].imag()));
  EXPECT_EQ(std::abs(q[4]), R(0));
  PipelineRun p = runPipeline(binary("power", a.size(), t),
                              [&](size_t i, const hlo::Shape&) { return complexLiteral(i == 0 ? a : b); });
  ASSERT_EQ(p.error, "");
  std::memcpy(q.data(), p.got[0].data(), q.size() * sizeof(C));
  EXPECT_EQ(q[5], C(1, 0));  // 0^0 = 1, as numpy and XLA
  EXPECT_EQ(q[6], C(0, 0));
  EXPECT_EQ(q[7], C(0, 0));
}

TEST(ComplexMath, SpecialValuesOfDivideAndPower) { specialValuesOfDivideAndPower<float>(); }
TEST(ComplexMath, C128SpecialValuesOfDivideAndPower) { specialValuesOfDivideAndPower<double>(); }

TEST(ComplexMath, NoComplexRows) {
  // Every c64 and c128 op is part instructions: no vmul.c64 ... vabs.c128 row.
  for (const char* t : {"c64", "c128"}) {
    bool wide = std::string(t) == "c128";
    auto input = [&](size_t, const hlo::Shape&) {
      return wide ? complexLiteral(denseInputs<double>(3, 2, 2, 300)) : complexLiteral(denseInputs<float>(3, 2, 2, 300));
    };
    for (const UnaryCase& c : kUnary) {
      PipelineRun run = runPipeline(unary(c.op, 300, c.realResult ? (wide ? "f64" : "f32") : t, t), input);
      ASSERT_EQ(run.error, "") << c.op << " " << t;
      EXPECT_EQ(run.llo.find(".c64"), std::string::npos) << c.op;
      EXPECT_EQ(run.llo.find(".c128"), std::string::npos) << c.op;
    }
    for (const char* op : {"multiply", "divide", "power"}) {
      PipelineRun run = runPipeline(binary(op, 300, t), input);
      ASSERT_EQ(run.error, "") << op << " " << t;
      EXPECT_EQ(run.llo.find(".c64"), std::string::npos) << op;
      EXPECT_EQ(run.llo.find(".c128"), std::string::npos) << op;
    }
  }
}

}  // namespace
}  // namespace tpu::codegen
