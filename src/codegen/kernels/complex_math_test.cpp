// c64 library math composed from f32 chip instructions (kernels/complex.cpp:
// expandComplexC64), measured against std::complex<long double> (x86's
// 80-bit long double: 40 bits more than f32, enough to judge it) over dense
// inputs and edge values (signed zeros, infinities, NaNs, huge and tiny
// magnitudes, the branch cut of the negative reals).
//
// The error of a complex result is normwise: |got - want| / |want| in units
// of f32's epsilon 2^-23 ("ulps" of the result; a part much smaller than the
// other may be off by more in its own ulps, as in XLA's formulas). The bound
// of each op is pinned here and stated in docs/DESIGN.md ("c64 library math from chip instructions"). Where the exact
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

hlo::Literal c64Literal(const std::vector<CF>& v) {
  hlo::Literal l(hlo::Shape::array(ElementType::C64, {static_cast<int64_t>(v.size())}));
  std::memcpy(l.mutableData().data(), v.data(), v.size() * sizeof(CF));
  return l;
}

// Parts that exercise every path: signed zeros, infinities, NaN, f32's
// extremes and subnormals, values around 1, and pi/2 (tan's pole).
const float kEdgeParts[] = {0.0f,    -0.0f,   1.0f,     -1.0f,  0.5f,     -2.0f,   1e-40f, -1e-30f,
                            3e38f,   -1e30f,  1e20f,    88.0f,  -90.0f,   1.5707964f, 20.0f,  0.99999994f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};

// Dense inputs: parts uniform in [-r, r], then log-uniform magnitudes from
// 2^-e to 2^e with both signs, then small ones near the unit circle and 0.
std::vector<CF> denseInputs(uint32_t seed, float r, int e, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-r, r);
  std::uniform_real_distribution<float> lg(static_cast<float>(-e), static_cast<float>(e));
  std::vector<CF> v;
  while (v.size() < n) {
    size_t k = v.size() % 4;
    auto logPart = [&] { return std::exp2(lg(rng)) * ((rng() & 1) ? 1.0f : -1.0f); };
    if (k == 0 || k == 1) v.emplace_back(u(rng), u(rng));
    else if (k == 2) v.emplace_back(logPart(), logPart());
    else {
      float t = u(rng), m = 1.0f + 1e-3f * u(rng);  // |z| near 1: the real part of log near 0
      v.emplace_back(m * std::cos(t), m * std::sin(t));
    }
  }
  return v;
}

std::vector<CF> edgeInputs() {
  std::vector<CF> v;
  for (float a : kEdgeParts)
    for (float b : kEdgeParts) v.emplace_back(a, b);
  return v;
}

// Normwise error in units of 2^-23, or -1 for a result the measure does not
// apply to (a non-finite exact part: checked separately).
double errorUlps(CF got, CL want) {
  if (!std::isfinite(want.real()) || !std::isfinite(want.imag())) return -1;
  const long double big = std::numeric_limits<float>::max();
  if (std::abs(want.real()) > big || std::abs(want.imag()) > big) return -1;  // overflows f32: inf is right
  long double a = std::abs(want);
  long double d = std::abs(CL(got.real(), got.imag()) - want);
  if (std::isnan(static_cast<double>(d))) return 1e30;
  // Below f32's normal range the error is absolute, in units of 2^-126
  // (results that small may flush to zero, as e^-z overflowing in logistic).
  long double floor = std::ldexp(1.0L, -126);
  if (a < floor) return static_cast<double>(d / floor);
  return static_cast<double>(d / a / std::ldexp(1.0L, -23));
}

struct Measured {
  double maxUlps = 0;
  std::string worst;
  int nonFiniteMisses = 0;  // exact result non-finite, compiled finite
  std::string firstMiss;
  std::string error;
  uint64_t cycles = 0;
};

// Runs `text` (one or two c64[n] parameters) on a and b and measures every
// element against ref.
template <typename Ref>
Measured measure(const std::string& text, const std::vector<CF>& a, const std::vector<CF>& b, Ref ref,
                 bool realResult = false) {
  Measured m;
  PipelineRun run = runPipeline(text, [&](size_t i, const hlo::Shape&) { return c64Literal(i == 0 ? a : b); });
  if (!run.error.empty()) {
    m.error = run.error;
    return m;
  }
  m.cycles = run.report.cycles;
  for (size_t k = 0; k < a.size(); ++k) {
    CF g;
    if (realResult) {
      float f;
      std::memcpy(&f, run.got[0].data() + k * sizeof(float), sizeof f);
      g = CF(f, 0.0f);
    } else {
      std::memcpy(&g, run.got[0].data() + k * sizeof(CF), sizeof g);
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
      const long double big = std::numeric_limits<float>::max();
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

std::string unary(const char* op, size_t n, const char* rt = "c64") {
  return fmt::format("HloModule m\nENTRY main {{\n  a = c64[{1}] parameter(0)\n  ROOT r = {2}[{1}] {0}(a)\n}}\n",
                     op, n, rt);
}
std::string binary(const char* op, size_t n) {
  return fmt::format(
      "HloModule m\nENTRY main {{\n  a = c64[{1}] parameter(0)\n  b = c64[{1}] parameter(1)\n"
      "  ROOT r = c64[{1}] {0}(a, b)\n}}\n",
      op, n);
}

// Exact references the long double library gets wrong near 0 (e^z - 1 and
// ln(1 + z) cancel there): composed from expm1l / log1pl.
CL refExpm1(CL z) {
  long double x = z.real(), y = z.imag();
  long double s = std::sin(y / 2);
  return CL(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
}
CL refLog1p(CL z) {
  long double x = z.real(), y = z.imag();
  if (std::abs(x) < 0.5L && std::abs(y) < 0.5L)
    return CL(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, 1 + x));
  return std::log(CL(1) + z);
}

struct UnaryCase {
  const char* op;
  CL (*ref)(CL);
  double bound;  // pinned max normwise ulps
  float range;   // dense parts in [-range, range]
  int logRange;  // and magnitudes 2^-logRange .. 2^logRange
  const char* rt = "c64";
};

const UnaryCase kUnary[] = {
    {"exponential", [](CL z) { return std::exp(z); }, 6, 10, 6},
    {"exponential-minus-one", refExpm1, 8, 10, 6},
    {"log", [](CL z) { return std::log(z); }, 6, 100, 60},
    {"log-plus-one", refLog1p, 6, 100, 60},
    {"sqrt", [](CL z) { return std::sqrt(z); }, 4, 100, 120},
    {"rsqrt", [](CL z) { return CL(1) / std::sqrt(z); }, 8, 100, 120},
    {"tanh", [](CL z) { return std::tanh(z); }, 10, 12, 6},
    {"sine", [](CL z) { return std::sin(z); }, 8, 10, 6},
    {"cosine", [](CL z) { return std::cos(z); }, 8, 10, 6},
    {"tan", [](CL z) { return std::tan(z); }, 10, 12, 6},
    {"logistic", [](CL z) { return CL(1) / (CL(1) + std::exp(-z)); }, 12, 10, 6},
    {"sign", [](CL z) { return std::abs(z) == 0 ? z : z / std::abs(z); }, 4, 100, 120},
    {"abs", [](CL z) { return CL(std::hypot(z.real(), z.imag())); }, 3, 100, 120, "f32"},
};

TEST(ComplexMath, UnaryOpsWithinTheirBounds) {
  std::vector<CF> edges = edgeInputs();
  for (const UnaryCase& c : kUnary) {
    std::vector<CF> in = denseInputs(7, c.range, c.logRange, 6000);
    // Near the poles of logistic and tan and the zeros of 1 + z (pi i and
    // pi/2 multiples, -1): where the composed formulas could cancel.
    for (int k = -3; k <= 3; ++k)
      for (float d : {0.0f, 1e-6f, -3e-4f, 0.004f, -0.03f}) {
        float p = static_cast<float>((2 * k + 1) * M_PI / 2);
        in.emplace_back(d, 2 * p + d);
        in.emplace_back(p + d, d);
        in.emplace_back(-1.0f + d, d * 0.5f);
      }
    in.insert(in.end(), edges.begin(), edges.end());
    Measured m = measure(unary(c.op, in.size(), c.rt), in, {}, [&](CL x, CL) { return c.ref(x); },
                         std::string(c.rt) == "f32");
    ASSERT_EQ(m.error, "") << c.op;
    EXPECT_LE(m.maxUlps, c.bound) << c.op << ": worst at " << m.worst;
    EXPECT_EQ(m.nonFiniteMisses, 0) << c.op << ": first at " << m.firstMiss;
    std::printf("c64 %-22s max %6.2f ulps (bound %g)\n", c.op, m.maxUlps, c.bound);
  }
}

TEST(ComplexMath, MultiplyDivideAndPowerWithinTheirBounds) {
  std::vector<CF> edges = edgeInputs();
  std::vector<CF> a = denseInputs(11, 8, 40, 6000), b = denseInputs(12, 8, 40, 6000);
  // Every edge against every edge.
  for (CF x : edges)
    for (CF y : {CF(0, 0), CF(1, -1), CF(3e38f, 1), CF(std::numeric_limits<float>::infinity(), 0), CF(-2, 1e-40f),
                 CF(std::numeric_limits<float>::quiet_NaN(), 1), CF(1e-30f, 1e30f)}) {
      a.push_back(x);
      b.push_back(y);
      a.push_back(y);
      b.push_back(x);
    }
  // The product: each part is a sum of two products, so a part that
  // cancels is off in its own ulps; normwise it is within a few.
  Measured mul = measure(binary("multiply", a.size()), a, b, [](CL x, CL y) { return x * y; });
  ASSERT_EQ(mul.error, "");
  EXPECT_LE(mul.maxUlps, 2) << mul.worst;
  Measured div = measure(binary("divide", a.size()), a, b, [](CL x, CL y) { return x / y; });
  ASSERT_EQ(div.error, "");
  EXPECT_LE(div.maxUlps, 4) << div.worst;
  EXPECT_EQ(div.nonFiniteMisses, 0) << div.firstMiss;
  std::printf("c64 multiply max %.2f ulps, divide max %.2f ulps\n", mul.maxUlps, div.maxUlps);

  // Power: e^(b ln a), whose error grows with |b ln a| (the rounding of the
  // exponent is amplified by it): measured for |a| in [2^-4, 2^4] and parts
  // of b in [-3, 3], where |b ln a| < 12.
  std::vector<CF> pa = denseInputs(13, 4, 4, 6000), pb = denseInputs(14, 3, 1, 6000);
  for (CF& z : pa)
    if (std::abs(z) < 0.0625f) z *= 16.0f;
  for (CF& z : pb) z = CF(std::clamp(z.real(), -3.0f, 3.0f), std::clamp(z.imag(), -3.0f, 3.0f));
  Measured pw = measure(binary("power", pa.size()), pa, pb, [](CL x, CL y) { return std::pow(x, y); });
  ASSERT_EQ(pw.error, "");
  EXPECT_LE(pw.maxUlps, 48) << pw.worst;
  std::printf("c64 power max %.2f ulps\n", pw.maxUlps);
}

TEST(ComplexMath, SpecialValuesOfDivideAndPower) {
  const float inf = std::numeric_limits<float>::infinity();
  // Annex G recoveries in XLA's divide: zero divisor, infinite dividend,
  // infinite divisor; 0^b = 0 for Re b > 0.
  std::vector<CF> a = {CF(1, 2), CF(-1, 0), CF(inf, 1), CF(1, -inf), CF(3, 4), CF(0, 0), CF(0, 0), CF(0, 0)};
  std::vector<CF> b = {CF(0, 0), CF(-0.0f, 0), CF(2, 3), CF(-1, 0.5f), CF(inf, -inf), CF(0, 0), CF(2, -1), CF(0.5f, 7)};
  PipelineRun d = runPipeline(binary("divide", a.size()),
                              [&](size_t i, const hlo::Shape&) { return c64Literal(i == 0 ? a : b); });
  ASSERT_EQ(d.error, "");
  std::vector<CF> q(a.size());
  std::memcpy(q.data(), d.got[0].data(), q.size() * sizeof(CF));
  EXPECT_EQ(q[0], CF(inf, inf));
  // copysign(inf, -0) * (-1 + 0i) = (inf, -inf * 0 = NaN).
  EXPECT_TRUE(q[1].real() == inf && std::isnan(q[1].imag()));
  EXPECT_TRUE(std::isinf(q[2].real()) && std::isinf(q[2].imag()));
  EXPECT_TRUE(std::isinf(q[3].real()) || std::isinf(q[3].imag()));
  EXPECT_EQ(std::abs(q[4]), 0.0f);
  PipelineRun p = runPipeline(binary("power", a.size()),
                              [&](size_t i, const hlo::Shape&) { return c64Literal(i == 0 ? a : b); });
  ASSERT_EQ(p.error, "");
  std::memcpy(q.data(), p.got[0].data(), q.size() * sizeof(CF));
  EXPECT_EQ(q[5], CF(1, 0));  // 0^0 = 1, as numpy and XLA
  EXPECT_EQ(q[6], CF(0, 0));
  EXPECT_EQ(q[7], CF(0, 0));
}

TEST(ComplexMath, NoHostComplexRows) {
  // Every c64 op is chip instructions: no vmul.c64 ... vabs.c64 row left.
  for (const UnaryCase& c : kUnary) {
    PipelineRun run = runPipeline(unary(c.op, 300, c.rt), [&](size_t, const hlo::Shape&) {
      return c64Literal(denseInputs(3, 2, 2, 300));
    });
    ASSERT_EQ(run.error, "") << c.op;
    EXPECT_EQ(run.llo.find(".c64"), std::string::npos) << c.op;
  }
  for (const char* op : {"multiply", "divide", "power"}) {
    PipelineRun run = runPipeline(binary(op, 300), [&](size_t, const hlo::Shape&) {
      return c64Literal(denseInputs(3, 2, 2, 300));
    });
    ASSERT_EQ(run.error, "") << op;
    EXPECT_EQ(run.llo.find(".c64"), std::string::npos) << op;
  }
}

}  // namespace
}  // namespace tpu::codegen
