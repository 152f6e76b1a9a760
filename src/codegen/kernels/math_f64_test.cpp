// f64 library math expanded into pair-unit instructions (kernels/math_f64.cpp):
// each function run end to end over dense sweeps of its domain, random
// values of every magnitude and the edge values (0, -0, subnormals, inf,
// NaN, huge, near branch points), measured in f64 ulps against long double
// libm. The pinned bounds are the ones docs/DESIGN.md states and
// tpu-run --check uses; the program must not use the function's row.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <bit>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// |got - want| in units of the f64 spacing at |want| (the subnormal spacing
// at least); NaN and infinities must match exactly (1e9 otherwise).
double ulpsF64(double got, long double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isnan(got)) return 1e9;
  if (std::fabs(want) > std::numeric_limits<double>::max()) return got == static_cast<double>(want) ? 0 : 1e9;
  long double a = std::fabs(want);
  int ex = a > 0 ? std::ilogb(a) : -1074;
  long double ulp = std::ldexp(1.0L, std::max(ex, -1022) - 52);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

struct Measured {
  std::string error;
  double worst = 0;
  std::string where;
  std::string llo;
  uint64_t cycles = 0;
};

Measured measureUnary(const char* op, const std::vector<double>& xs, long double (*ref)(long double),
                      bool zeroSignMatters = true) {
  std::string text = fmt::format("HloModule m\nENTRY main {{\n  x = f64[{1}] parameter(0)\n  ROOT r = f64[{1}] {0}(x)\n}}\n",
                                 op, xs.size());
  hlo::Literal in(hlo::Shape::array(ElementType::F64, {static_cast<int64_t>(xs.size())}));
  std::memcpy(in.mutableData().data(), xs.data(), xs.size() * sizeof(double));
  PipelineRun run = runPipeline(text, [&](size_t, const hlo::Shape&) { return in; });
  Measured m;
  m.error = run.error;
  m.llo = run.llo;
  m.cycles = run.report.cycles;
  if (!run.error.empty()) return m;
  std::vector<double> got(xs.size());
  std::memcpy(got.data(), run.got[0].data(), got.size() * sizeof(double));
  for (size_t k = 0; k < xs.size(); ++k) {
    long double want = ref(static_cast<long double>(xs[k]));
    double e = ulpsF64(got[k], want);
    if (zeroSignMatters && want == 0 && std::signbit(got[k]) != std::signbit(want)) e = 1e9;
    if (e > m.worst) {
      m.worst = e;
      m.where = fmt::format("x = {:a} ({}) got {:a} want {:a}", xs[k], xs[k], got[k], static_cast<double>(want));
    }
  }
  return m;
}

// Dense points of [lo, hi], random values of every magnitude of both signs,
// and the edges.
std::vector<double> probe(double lo, double hi, int dense, std::initializer_list<double> extra, uint64_t seed) {
  std::vector<double> v;
  for (int k = 0; k <= dense; ++k) v.push_back(lo + (hi - lo) * k / dense);
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 3000; ++k) {
    uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isnan(x)) v.push_back(x);
  }
  for (double x : {0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310, 1e-300, 1e-20, 1e-8, 0.5, 1.0, 2.0,
                   10.0, 1e10, 1e300, std::numeric_limits<double>::max(), kInf, kNaN})
    for (double s : {1.0, -1.0}) v.push_back(s * x);
  for (double x : extra) v.push_back(x);
  return v;
}

struct F64Case {
  const char* op;
  const char* row;  // the library row the expansion replaces
  long double (*ref)(long double);
  double bound;     // ulps, pinned (docs/DESIGN.md)
  double lo, hi;
  std::vector<double> extra;
};

const F64Case kCases[] = {
    {"log", "vlog.f64", [](long double x) { return std::log(x); }, 1.0, 0.0, 4.0,
     {0.7071067811865476, 1.4142135623730951, 0.9999999999999999, 1.0000000000000002, 2.2250738585072009e-308}},
    {"log-plus-one", "vlog1p.f64", [](long double x) { return std::log1p(x); }, 1.0, -0.999, 3.0,
     {-1.0, -0.9999999999999999, -2.547e-7, 1e-17, -1e-17, 0.4142135623730951, -0.29289321881345254, 9e15, 1e16}},
    {"sine", "vsin.f64", [](long double x) { return std::sin(x); }, 1.0, -10.0, 10.0,
     {3.141592653589793, 1.5707963267948966, 6.283185307179586, 355.0, 103993.0, 1.6e6, -1.6e6}},
    {"cosine", "vcos.f64", [](long double x) { return std::cos(x); }, 1.0, -10.0, 10.0,
     {3.141592653589793, 1.5707963267948966, 6.283185307179586, 355.0, 103993.0, 1.6e6, -1.6e6}},
    {"tan", "vtan.f64", [](long double x) { return std::tan(x); }, 2.5, -10.0, 10.0,
     {3.141592653589793, 1.5707963267948966, 0.7853981633974483, 355.0, 103993.0, 1.6e6}},
    {"erf", "verf.f64", [](long double x) { return std::erf(x); }, 1.0, -6.5, 6.5,
     {0.84375, 0.8437499999999999, -0.84375, 5.9, 5.95, 6.0, 1e-5}},
    {"exponential-minus-one", "vexpm1.f64", [](long double x) { return std::expm1(x); }, 2.0, -3.0, 3.0,
     {-2.547e-7, -0.026, 0.9999999999999999, 1.0, -1.0, 709.78, 709.79, -40.0, -745.0}},
    {"tanh", "vtanh.f64", [](long double x) { return std::tanh(x); }, 3.0, -4.0, 4.0,
     {0.5, 0.49999999999999994, 21.9, 22.0, 22.1, 1e-10}},
    {"logistic", "vlogistic.f64", [](long double x) { return 1 / (1 + std::exp(-x)); }, 2.0, -40.0, 40.0,
     {-700.0, -709.0, -740.0, -745.0, 36.0, 37.0, 40.0}},
    {"cosh", "vcosh.f64", [](long double x) { return std::cosh(x); }, 2.0, -5.0, 5.0,
     {699.0, 700.0, 710.0, 710.4758600739439, 710.48, -710.4758600739439}},
    {"sinh", "vsinh.f64", [](long double x) { return std::sinh(x); }, 2.0, -5.0, 5.0,
     {699.0, 700.0, 710.0, 710.4758600739439, 710.48, -710.4758600739439, 1e-8}},
    {"atan", "vatan.f64", [](long double x) { return std::atan(x); }, 1.0, -4.0, 4.0,
     {0.4375, 0.4374999999999999, 0.6875, 1.1875, 2.4375, 1e20}},
    {"asin", "vasin.f64", [](long double x) { return std::asin(x); }, 2.5, -1.0, 1.0,
     {0.5, 0.5000000000000001, 0.9999999999999999, 1.0000000000000002, -1.0000000000000002}},
    {"acos", "vacos.f64", [](long double x) { return std::acos(x); }, 1.5, -1.0, 1.0,
     {0.5, 0.5000000000000001, -0.5, -0.5000000000000001, 0.9999999999999999, -0.9999999999999999,
      1.0000000000000002}},
    {"asinh", "vasinh.f64", [](long double x) { return std::asinh(x); }, 1.5, -10.0, 10.0,
     {268435456.0, 268435455.9, 1e154, 1e155}},
    {"acosh", "vacosh.f64", [](long double x) { return std::acosh(x); }, 2.0, 0.5, 10.0,
     {1.0, 1.0000000000000002, 0.9999999999999999, 268435456.0, 1e154, 1e155}},
    {"atanh", "vatanh.f64", [](long double x) { return std::atanh(x); }, 1.5, -1.0, 1.0,
     {0.9999999999999999, -0.9999999999999999, 1.0000000000000002, 0.5}},
    {"cbrt", "vcbrt.f64", [](long double x) { return std::cbrt(x); }, 1.0, -10.0, 10.0,
     {27.0, -8.0, 1e-310, 4.9e-324, 1e300, 0.001}},
};

TEST(MathF64, LibraryFunctionsWithinTheirUlpBounds) {
  for (const F64Case& c : kCases) {
    std::vector<double> xs = probe(c.lo, c.hi, 20000, {}, 11);
    xs.insert(xs.end(), c.extra.begin(), c.extra.end());
    Measured m = measureUnary(c.op, xs, c.ref);
    ASSERT_EQ(m.error, "") << c.op;
    EXPECT_EQ(m.llo.find(c.row), std::string::npos) << c.op;
    EXPECT_LE(m.worst, c.bound) << c.op << ": " << m.where;
    std::printf("f64 %s: max %.3f ulps (%s)\n", c.op, m.worst, m.where.c_str());
  }
}

struct TrigHardCase {
  double x, sinHead, sinTail, cosHead, cosTail, tanHead, tanTail;
};
// utils/fit_math_f64.py hard: the 24 doubles found closest to a multiple of
// pi/2 over every exponent, with their exact values as head + tail.
// x, sin x, cos x, tan x (head, tail)
const TrigHardCase kTrigHardCases[] = {
    {0x1.6ac5b262ca1ffp+849, 0x1.0000000000000p+0, -0x1.2b089ea1e692bp-123, -0x1.14ae72e6ba22fp-61, 0x1.73eef1477d90ep-118, -0x1.d9ba9a7975636p+60, 0x1.714cf36c65449p+6},
    {0x1.6c6cbc45dc8dep+5, 0x1.0000000000000p+0, -0x1.04bfe27f01e31p-122, -0x1.6d61b58c99c43p-61, 0x1.d8d2a16b7bd6ep-118, -0x1.66b9ebc4850c6p+60, -0x1.b1cb5fca6e9dfp+6},
    {0x1.6ac5b262ca1ffp+850, -0x1.14ae72e6ba22fp-60, 0x1.73eef1477d90ep-117, -0x1.0000000000000p+0, 0x1.2b089ea1e692bp-121, 0x1.14ae72e6ba22fp-60, -0x1.73eef1477d90ep-117},
    {0x1.6c6cbc45dc8dep+6, -0x1.6d61b58c99c43p-60, 0x1.d8d2a16b7bd6ep-117, -0x1.0000000000000p+0, 0x1.04bfe27f01e31p-120, 0x1.6d61b58c99c43p-60, -0x1.d8d2a16b7bd6ep-117},
    {0x1.b951f1572eba5p+23, -0x1.0000000000000p+0, 0x1.ead7c8117d252p-120, -0x1.f54f5227a4e84p-60, 0x1.01b19345a7a1cp-118, 0x1.057584c429b3ap+59, 0x1.ba829972bfe62p+5},
    {0x1.504cac51f1eafp+131, -0x1.0000000000000p+0, 0x1.1a0d9b854a60fp-119, -0x1.0cb604d34f341p-59, -0x1.2e51c38885849p-114, 0x1.e7c7d0f43f81ep+58, -0x1.f3b0a51edae55p+4},
    {0x1.6ac5b262ca1ffp+851, 0x1.14ae72e6ba22fp-59, -0x1.73eef1477d90ep-116, 0x1.0000000000000p+0, -0x1.2b089ea1e692bp-119, 0x1.14ae72e6ba22fp-59, -0x1.73eef1477d90ep-116},
    {0x1.e009c53148be1p+991, 0x1.0000000000000p+0, -0x1.59627ccbae913p-119, 0x1.295a3b0a64b1dp-59, 0x1.25276cf078901p-113, 0x1.b8cbf7ecfaffap+58, 0x1.ef914b9a4c484p+3},
    {0x1.6c6cbc45dc8dep+7, 0x1.6d61b58c99c43p-59, -0x1.d8d2a16b7bd6ep-116, 0x1.0000000000000p+0, -0x1.04bfe27f01e31p-118, 0x1.6d61b58c99c43p-59, -0x1.d8d2a16b7bd6ep-116},
    {0x1.4c96c11134d36p+577, -0x1.0000000000000p+0, 0x1.06be11f47cfe4p-118, 0x1.6ec67bcf77522p-59, 0x1.2f2b3c334000bp-113, -0x1.655cf9e23c4d7p+58, -0x1.4b5c8e3af1503p+2},
    {0x1.cfe482285f8edp+860, -0x1.0000000000000p+0, 0x1.a583fad47377ap-118, -0x1.d08f59c32bfa3p-59, 0x1.631f386c9740ep-114, 0x1.1a246b6f92457p+58, -0x1.f37d51bcc1322p+3},
    {0x1.db41f3cb71d7bp+680, 0x1.0000000000000p+0, -0x1.c31e0ff1efdcbp-118, 0x1.e09878d22e29dp-59, 0x1.489d38b905beep-114, 0x1.10ba6f3f467d7p+58, -0x1.7dea80778f9f3p+3},
    {0x1.e7e44a78ac18cp+197, -0x1.0000000000000p+0, 0x1.db326cef0cf6fp-118, 0x1.ed415f54c8cb8p-59, 0x1.5cba91564eeafp-113, -0x1.09ba7e061f301p+58, 0x1.befdedc4f0d7cp+4},
    {0x1.b951f1572eba5p+24, 0x1.f54f5227a4e84p-59, -0x1.01b19345a7a1cp-117, -0x1.0000000000000p+0, 0x1.ead7c8117d252p-118, -0x1.f54f5227a4e84p-59, 0x1.01b19345a7a1cp-117},
    {0x1.c45cd11154dfdp+295, 0x1.0000000000000p+0, -0x1.02499e5a0504ep-117, 0x1.01242876d7c1bp-58, -0x1.ece5331615d6fp-112, 0x1.fdba46f553a09p+57, -0x1.d8d8dee6ee38cp+3},
    {0x1.504cac51f1eafp+132, 0x1.0cb604d34f341p-58, 0x1.2e51c38885849p-113, -0x1.0000000000000p+0, 0x1.1a0d9b854a60fp-117, -0x1.0cb604d34f341p-58, -0x1.2e51c38885849p-113},
    {0x1.83009e2e9e2ebp+614, 0x1.0000000000000p+0, -0x1.21997ae34064cp-117, -0x1.104830400912ap-58, 0x1.01fdcb0e43486p-112, -0x1.e1621fb1336a5p+57, 0x1.0168b6eb5928ep+2},
    {0x1.b2196364d750bp+253, -0x1.0000000000000p+0, 0x1.26d66c7830900p-117, 0x1.12bbbe07f2de1p-58, 0x1.8be7a84ae546cp-113, -0x1.dd1688c6969adp+57, 0x1.3efedc97d15f5p+1},
    {0x1.6ac5b262ca1ffp+852, 0x1.14ae72e6ba22fp-58, -0x1.73eef1477d90ep-115, 0x1.0000000000000p+0, -0x1.2b089ea1e692bp-117, 0x1.14ae72e6ba22fp-58, -0x1.73eef1477d90ep-115},
    {0x1.e009c53148be1p+992, 0x1.295a3b0a64b1dp-58, 0x1.25276cf078901p-112, -0x1.0000000000000p+0, 0x1.59627ccbae913p-117, -0x1.295a3b0a64b1dp-58, -0x1.25276cf078901p-112},
    {0x1.69eab0985179bp+246, -0x1.0000000000000p+0, 0x1.e94f3fcc44408p-117, -0x1.61ecec9c577fdp-58, -0x1.f48c6607bea98p-113, 0x1.72567cb9047a9p+57, -0x1.a4c228a88c6e4p+1},
    {0x1.6c6cbc45dc8dep+8, 0x1.6d61b58c99c43p-58, -0x1.d8d2a16b7bd6ep-115, 0x1.0000000000000p+0, -0x1.04bfe27f01e31p-116, 0x1.6d61b58c99c43p-58, -0x1.d8d2a16b7bd6ep-115},
    {0x1.4c96c11134d36p+578, -0x1.6ec67bcf77522p-58, -0x1.2f2b3c334000bp-112, -0x1.0000000000000p+0, 0x1.06be11f47cfe4p-116, 0x1.6ec67bcf77522p-58, 0x1.2f2b3c334000bp-112},
    {0x1.782b7a20df6d4p+67, -0x1.0000000000000p+0, 0x1.17a73717b591fp-116, -0x1.7a6500ca6d83bp-58, 0x1.f4a73e766940fp-113, 0x1.5a63c82b6dae2p+57, 0x1.1fba21f0e6661p+3},
};

// sin, cos and tan over every magnitude: random bit patterns with uniform
// exponents (Payne-Hanek's reduction past 2^20, Cody-Waite's below), and
// the hard cases above of both signs against their exact values (long
// double libm agrees with those to 1/100 ulp: checked too).
TEST(MathF64, TrigAtEveryMagnitude) {
  std::vector<double> xs;
  std::mt19937_64 rng(23);
  for (int k = 0; k < 40000; ++k) {
    uint64_t bits = (rng() & 0x800fffffffffffffull) | (static_cast<uint64_t>(rng() % 2047) << 52);
    xs.push_back(std::bit_cast<double>(bits));
  }
  for (double x : {0x1p20, -0x1p20, 0x1.fffffffffffffp19, 1647099.3291652855, 0x1p52, 0x1p53, 0x1p63, 0x1p64,
                   0x1p1023, std::numeric_limits<double>::max(), -std::numeric_limits<double>::max()})
    xs.push_back(x);
  const struct {
    const char* op;
    long double (*ref)(long double);
    double bound;
    double TrigHardCase::*head;
    double TrigHardCase::*tail;
  } kOps[] = {{"sine", [](long double x) { return std::sin(x); }, 1.0, &TrigHardCase::sinHead, &TrigHardCase::sinTail},
              {"cosine", [](long double x) { return std::cos(x); }, 1.0, &TrigHardCase::cosHead,
               &TrigHardCase::cosTail},
              {"tan", [](long double x) { return std::tan(x); }, 2.5, &TrigHardCase::tanHead, &TrigHardCase::tanTail}};
  for (const auto& op : kOps) {
    Measured m = measureUnary(op.op, xs, op.ref);
    ASSERT_EQ(m.error, "") << op.op;
    EXPECT_LE(m.worst, op.bound) << op.op << ": " << m.where;
    std::printf("f64 %s, every magnitude: max %.3f ulps (%s)\n", op.op, m.worst, m.where.c_str());
    std::vector<double> hard;
    for (const TrigHardCase& c : kTrigHardCases) hard.insert(hard.end(), {c.x, -c.x});
    static double TrigHardCase::*sHead, TrigHardCase::*sTail;  // for the captureless reference
    sHead = op.head;
    sTail = op.tail;
    auto exact = [](long double x) {
      for (const TrigHardCase& c : kTrigHardCases)
        if (std::fabs(x) == c.x) {
          long double v = static_cast<long double>(c.*sHead) + c.*sTail;
          // sin and tan are odd, cos even
          return (x < 0 && sHead != &TrigHardCase::cosHead) ? -v : v;
        }
      return std::numeric_limits<long double>::quiet_NaN();
    };
    Measured h = measureUnary(op.op, hard, exact);
    ASSERT_EQ(h.error, "") << op.op;
    EXPECT_LE(h.worst, op.bound) << op.op << ": " << h.where;
    std::printf("f64 %s, %zu hard cases: max %.3f ulps (%s)\n", op.op, hard.size(), h.worst, h.where.c_str());
    double libmWorst = 0;
    for (double x : hard) {
      long double want = exact(x), libm = op.ref(x);
      long double ulp = std::ldexp(1.0L, std::ilogb(want) - 52);
      libmWorst = std::max(libmWorst, static_cast<double>(std::fabs(libm - want) / ulp));
    }
    EXPECT_LE(libmWorst, 0.01) << op.op << ": long double libm against the exact values";
  }
}

// A binary f64 op over (a, b) pairs, worst ulps against `ref`.
Measured measureBinary(const char* op, const std::vector<double>& as, const std::vector<double>& bs,
                       long double (*ref)(long double, long double)) {
  std::string text = fmt::format(
      "HloModule m\nENTRY main {{\n  a = f64[{1}] parameter(0)\n  b = f64[{1}] parameter(1)\n"
      "  ROOT r = f64[{1}] {0}(a, b)\n}}\n",
      op, as.size());
  auto literal = [](const std::vector<double>& v) {
    hlo::Literal l(hlo::Shape::array(ElementType::F64, {static_cast<int64_t>(v.size())}));
    std::memcpy(l.mutableData().data(), v.data(), v.size() * sizeof(double));
    return l;
  };
  hlo::Literal la = literal(as), lb = literal(bs);
  PipelineRun run = runPipeline(text, [&](size_t i, const hlo::Shape&) { return i == 0 ? la : lb; });
  Measured m;
  m.error = run.error;
  m.llo = run.llo;
  m.cycles = run.report.cycles;
  if (!run.error.empty()) return m;
  std::vector<double> got(as.size());
  std::memcpy(got.data(), run.got[0].data(), got.size() * sizeof(double));
  for (size_t k = 0; k < as.size(); ++k) {
    long double want = ref(static_cast<long double>(as[k]), static_cast<long double>(bs[k]));
    double e = ulpsF64(got[k], want);
    if (want == 0 && std::signbit(got[k]) != std::signbit(want)) e = 1e9;
    if (e > m.worst) {
      m.worst = e;
      m.where = fmt::format("{}({}, {}) got {:a} want {:a}", op, as[k], bs[k], got[k], static_cast<double>(want));
    }
  }
  return m;
}

// atan2 over the four quadrants, the axes, signed zeros and infinities and
// random pairs of every magnitude.
TEST(MathF64, Atan2WithinItsUlpBound) {
  std::vector<double> ys, xs;
  const double vals[] = {0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1e-300, -1e300, 5e-324, kInf, -kInf, kNaN, 3.0, 1e-20};
  for (double y : vals)
    for (double x : vals) {
      ys.push_back(y);
      xs.push_back(x);
    }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int k = 0; k < 20000; ++k) {
    ys.push_back(u(rng) * ((k & 3) == 0 ? 1e-5 : 1.0));
    xs.push_back(u(rng) * ((k & 7) == 1 ? 1e5 : 1.0));
  }
  Measured m = measureBinary("atan2", ys, xs, [](long double y, long double x) { return std::atan2(y, x); });
  ASSERT_EQ(m.error, "");
  EXPECT_EQ(m.llo.find("vatan2.f64"), std::string::npos);
  EXPECT_LE(m.worst, 2.0) << m.where;
  std::printf("f64 atan2: max %.3f ulps (%s)\n", m.worst, m.where.c_str());
}

// pow: C's special cases (zeros, infinities, NaN, negative bases with
// integer and non-integer exponents, x = 1, y = 0), random bases and
// exponents, bases near 1 with large exponents and results near overflow
// and in the subnormal range (where the error of y ln x is amplified most).
TEST(MathF64, PowWithinItsUlpBound) {
  std::vector<double> xs, ys;
  const double vals[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e-300, 1e300, 5e-324,
                         kInf, -kInf, kNaN, 0.25, 1e10, 2.5, -2.5, 1e20};
  for (double x : vals)
    for (double y : vals) {
      xs.push_back(x);
      ys.push_back(y);
    }
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < 8000; ++k) {
    xs.push_back(u(rng) * 10);
    ys.push_back((u(rng) - 0.5) * 40);
  }
  for (int k = 0; k < 4000; ++k) {  // near 1, large exponents: |y ln x| up to 700
    double x = 1 + (u(rng) - 0.5) * 1e-3;
    xs.push_back(x);
    ys.push_back((u(rng) - 0.5) * 1400 / std::fabs(std::log(x)));
  }
  for (int k = 0; k < 4000; ++k) {  // results near overflow and subnormal
    double x = 0.5 + u(rng) * 20;
    double t = (k & 1) ? 709.0 : -744.0;
    xs.push_back(x);
    ys.push_back(t / std::log(x) * (1 - u(rng) * 1e-3));
  }
  for (int k = 0; k < 2000; ++k) {  // negative bases, integer exponents
    xs.push_back(-u(rng) * 10);
    ys.push_back(std::floor((u(rng) - 0.5) * 60));
  }
  Measured m = measureBinary("power", xs, ys, [](long double x, long double y) { return std::pow(x, y); });
  ASSERT_EQ(m.error, "");
  EXPECT_EQ(m.llo.find("vpow.f64"), std::string::npos);
  EXPECT_LE(m.worst, 2.0) << m.where;
  std::printf("f64 pow: max %.3f ulps (%s)\n", m.worst, m.where.c_str());
}

// The figure docs/DESIGN.md quotes: simulated cycles of 262,144 elements
// (the expansions cost what their instructions cost; the rows they replace
// cost one pair issue per word).
TEST(MathF64, SimulatedCyclesOfLargeArrays) {
  std::vector<double> xs(262144);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = 0.001 + 3.0 * static_cast<double>(k) / xs.size();
  for (const char* op : {"log", "sine", "erf"}) {
    Measured m = measureUnary(op, xs, [](long double) { return 0.0L; }, false);
    ASSERT_EQ(m.error, "") << op;
    std::printf("f64 %s of 262144 elements: %llu cycles\n", op, static_cast<unsigned long long>(m.cycles));
  }
  // sin's two reductions both run in every lane: huge arguments cost the same.
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = 1e300 * (1 + static_cast<double>(k) / xs.size());
  Measured m = measureUnary("sine", xs, [](long double) { return 0.0L; }, false);
  ASSERT_EQ(m.error, "");
  std::printf("f64 sine of 262144 elements near 1e300: %llu cycles\n", static_cast<unsigned long long>(m.cycles));
}

}  // namespace
}  // namespace tpu::codegen
