// End-to-end tests of library math: the inverse trigonometric and
// hyperbolic functions, atan2, erf, log1p, expm1 and tan (expanded into chip
// instructions: measured in ulps against double libm, with their bounds
// pinned, on edge values, dense sweeps and every code of the narrow float
// types), mulhi on every integer type and real / imag of real types
// (compared bit for bit with the reference interpreter).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

// Runs `text` on the given arguments and returns "" when every result
// element has the interpreter's bits (with `nanAsNan`, NaN for NaN whatever
// the payload), else the first difference.
std::string compareExact(const std::string& text, const std::vector<hlo::Literal>& args, bool nanAsNan = false) {
  PipelineRun run = runPipeline(text, [&](size_t i, const hlo::Shape&) { return args[i]; });
  if (!run.error.empty()) return run.error;
  const std::vector<const hlo::Literal*> want = run.want();
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    hlo::Literal got(w.shape());
    std::memcpy(got.mutableData().data(), run.got[r].data(), got.data().size());
    bool isFloat = hlo::isFloatType(w.shape().elementType());
    for (int64_t k = 0; k < w.elementCount(); ++k) {
      if (got.getBits(k) == w.getBits(k)) continue;
      if (nanAsNan && isFloat && std::isnan(got.getDouble(k)) && std::isnan(w.getDouble(k))) continue;
      std::string in;
      for (const hlo::Literal& a : args) in += fmt::format(" 0x{:x}", a.getBits(k % std::max<int64_t>(1, a.elementCount())));
      return fmt::format("result {} element {}: got 0x{:x} ({}) want 0x{:x} ({}); inputs{}", r, k, got.getBits(k),
                         got.getDouble(k), w.getBits(k), w.getDouble(k), in);
    }
  }
  return "";
}

uint32_t bitsOf(float x) { return std::bit_cast<uint32_t>(x); }

// f32 arguments around every domain limit of the functions under test,
// then random bit patterns (every exponent, subnormals and NaNs included).
std::vector<uint32_t> f32Edges() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> v;
  for (float x : {0.0f, 1.0f, 0.5f, 2.0f, 0.99999994f, 1.0000001f, 1e-30f, 1e-40f, 1e-45f, 0.1f, 3.0f, 9.0f, 10.0f,
                  100.0f, 1e4f, 8.5e37f, 1e30f, std::numeric_limits<float>::max(), inf, 3.14159265f, 0.7f, 4.0f})
    for (float s : {1.0f, -1.0f}) v.push_back(bitsOf(s * x));
  v.push_back(0x7fc00000u);  // quiet NaN
  v.push_back(0xffc00001u);  // negative NaN with a payload
  v.push_back(0x7f800001u);  // signalling NaN
  return v;
}

hlo::Literal f32Literal(std::vector<int64_t> dims, const std::vector<uint32_t>& bits) {
  hlo::Literal l(hlo::Shape::array(ElementType::F32, std::move(dims)));
  for (int64_t k = 0; k < l.elementCount(); ++k) l.setBits(k, bits[static_cast<size_t>(k)]);
  return l;
}

hlo::Literal f32Vector(const std::vector<uint32_t>& bits) {
  return f32Literal({static_cast<int64_t>(bits.size())}, bits);
}

// The edges, then random bits, 3000 elements (a partial last vreg).
std::vector<uint32_t> f32Probe(uint32_t seed) {
  std::vector<uint32_t> v = f32Edges();
  std::mt19937 rng(seed);
  while (v.size() < 3000) {
    uint32_t r = rng();
    // Half of them small (|x| < 4), where the functions are not flat.
    v.push_back((r & 1) ? r : bitsOf(std::ldexp(static_cast<float>(r >> 8) / 16777216.0f, 2) * ((r & 2) ? -1 : 1)));
  }
  return v;
}

std::string unaryModule(const char* op, const char* type, int64_t n) {
  return fmt::format("HloModule m\nENTRY main {{\n  x = {1}[{2}] parameter(0)\n  ROOT r = {1}[{2}] {0}(x)\n}}\n", op,
                     type, n);
}

std::string binaryModule(const char* op, const char* type, int64_t n) {
  return fmt::format(
      "HloModule m\nENTRY main {{\n  x = {1}[{2}] parameter(0)\n  y = {1}[{2}] parameter(1)\n"
      "  ROOT r = {1}[{2}] {0}(x, y)\n}}\n",
      op, type, n);
}

const char* const kNarrowFloats[] = {"bf16",       "f16",        "f8e4m3fn",      "f8e5m2",    "f8e4m3", "f8e3m4",
                                     "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn"};

// Relative error in units of the float spacing at the exact value `want`
// (the float ulp at |want|, the smallest subnormal spacing at worst).
double ulpsOff(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : 1e9;
  double a = std::fabs(want);
  int e = a > 0 ? std::ilogb(a) : -149;
  double ulp = std::ldexp(1.0, std::max(e, -126) - 23);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

std::vector<float> floatsOf(const PipelineRun& r, size_t n) {
  std::vector<float> out(n);
  if (r.error.empty()) std::memcpy(out.data(), r.got[0].data(), sizeof(float) * n);
  return out;
}

// The inverse trigonometric and hyperbolic functions, expanded from ALU
// ops, sqrt, reciprocal, divide and log (lower_math.cpp): the worst error
// against double libm over a dense sweep of each domain, every decade from
// 1e-38 to 1e38 of both signs and the edges, within the pinned bound, and
// the program has no row of the function.
struct InverseFn {
  const char* op;
  double (*ref)(double);
  double maxUlps;
};
const InverseFn kInverseFns[] = {
    {"asin", [](double x) { return std::asin(x); }, 3},   {"acos", [](double x) { return std::acos(x); }, 3},
    {"atan", [](double x) { return std::atan(x); }, 3},   {"asinh", [](double x) { return std::asinh(x); }, 4},
    {"acosh", [](double x) { return std::acosh(x); }, 4}, {"atanh", [](double x) { return std::atanh(x); }, 4},
};

TEST(Math, InverseFunctionsWithinTheirUlpBounds) {
  std::vector<float> xs;
  for (int k = -60000; k <= 60000; ++k) xs.push_back(static_cast<float>(k) * (1.0f / 60000));  // [-1, 1]
  for (int k = 0; k <= 40000; ++k) xs.push_back(1.0f + static_cast<float>(k) * 2.5e-4f);       // [1, 11]
  for (int e = -38; e <= 38; ++e)
    for (float m : {1.0f, 1.2345f, 3.3f, 7.77f})
      for (float s : {1.0f, -1.0f}) xs.push_back(s * m * std::pow(10.0f, static_cast<float>(e)));
  for (uint32_t b : f32Edges()) xs.push_back(std::bit_cast<float>(b));
  for (float b : {0.41421356f, 2.4142137f, 0.5f, 4096.0f})
    for (float d : {-1.0f, 1.0f}) xs.push_back(std::nextafter(b, b + d));
  std::vector<uint32_t> bits;
  for (float x : xs) bits.push_back(bitsOf(x));
  for (const InverseFn& fn : kInverseFns) {
    PipelineRun r = runPipeline(unaryModule(fn.op, "f32", static_cast<int64_t>(xs.size())),
                                [&](size_t, const hlo::Shape&) { return f32Vector(bits); });
    ASSERT_EQ(r.error, "") << fn.op;
    std::vector<float> got = floatsOf(r, xs.size());
    double worst = 0;
    size_t at = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      double d = ulpsOff(got[k], fn.ref(static_cast<double>(xs[k])));
      if (d > worst) worst = d, at = k;
    }
    EXPECT_LE(worst, fn.maxUlps) << fn.op << "(" << xs[at] << ") gave " << got[at];
    std::printf("%s: at most %.2f ulps\n", fn.op, worst);  // the figure docs/DESIGN.md quotes
    EXPECT_EQ(r.llo.find(fmt::format("v{} ", fn.op)), std::string::npos) << fn.op << " still uses a row";
  }
}

TEST(Math, F32DomainEdges) {
  // What the edges must give: NaN outside the domains, infinities at
  // atanh(+-1), signed zeros kept, exact values at the domain ends.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> in = {bitsOf(2.0f), bitsOf(-1.0f), bitsOf(1.0f), bitsOf(-0.0f), bitsOf(0.5f), bitsOf(inf)};
  auto run = [&](const char* op) {
    PipelineRun r = runPipeline(unaryModule(op, "f32", 6), [&](size_t, const hlo::Shape&) { return f32Vector(in); });
    EXPECT_EQ(r.error, "") << op;
    return floatsOf(r, 6);
  };
  std::vector<float> asin = run("asin"), acos = run("acos"), atan = run("atan"), asinh = run("asinh"),
                     acosh = run("acosh"), atanh = run("atanh"), erf = run("erf");
  EXPECT_TRUE(std::isnan(asin[0]));
  EXPECT_EQ(asin[1], -1.5707964f);
  EXPECT_EQ(asin[2], 1.5707964f);
  EXPECT_TRUE(std::signbit(asin[3]) && asin[3] == 0.0f);
  EXPECT_TRUE(std::isnan(asin[5]));
  EXPECT_TRUE(std::isnan(acos[0]));
  EXPECT_EQ(acos[1], 3.1415927f);
  EXPECT_EQ(acos[2], 0.0f);
  EXPECT_EQ(acos[3], 1.5707964f);
  EXPECT_EQ(atan[5], 1.5707964f);
  EXPECT_TRUE(std::signbit(atan[3]) && atan[3] == 0.0f);
  EXPECT_EQ(asinh[5], inf);
  EXPECT_TRUE(std::signbit(asinh[3]) && asinh[3] == 0.0f);
  EXPECT_TRUE(std::isnan(acosh[1]));
  EXPECT_EQ(acosh[2], 0.0f);
  EXPECT_EQ(acosh[5], inf);
  EXPECT_EQ(atanh[1], -inf);
  EXPECT_EQ(atanh[2], inf);
  EXPECT_TRUE(std::isnan(atanh[0]));
  EXPECT_TRUE(std::signbit(atanh[3]) && atanh[3] == 0.0f);
  EXPECT_EQ(erf[5], 1.0f);
  EXPECT_TRUE(std::signbit(erf[3]));
}

TEST(Math, F32Atan2QuadrantsZerosAndInfinities) {
  // Every pair of edges (the signs of zeros pick +-0 or +-pi, infinities
  // give the multiples of pi/4), then random pairs: within 3 ulps of double
  // libm, signed zeros exact.
  std::vector<uint32_t> edges = f32Edges(), ys, xs;
  for (uint32_t a : edges)
    for (uint32_t b : edges) {
      ys.push_back(a);
      xs.push_back(b);
    }
  std::vector<uint32_t> ry = f32Probe(12), rx = f32Probe(13);
  ys.insert(ys.end(), ry.begin(), ry.end());
  xs.insert(xs.end(), rx.begin(), rx.end());
  for (int k = 0; k < 20000; ++k) {  // every angle, at several radii
    double th = -3.14159 + 6.28318 * k / 20000, rad = std::ldexp(1.0, k % 40 - 20);
    ys.push_back(bitsOf(static_cast<float>(rad * std::sin(th))));
    xs.push_back(bitsOf(static_cast<float>(rad * std::cos(th))));
  }
  PipelineRun r = runPipeline(binaryModule("atan2", "f32", static_cast<int64_t>(ys.size())),
                              [&](size_t i, const hlo::Shape&) { return f32Vector(i == 0 ? ys : xs); });
  ASSERT_EQ(r.error, "");
  std::vector<float> got = floatsOf(r, ys.size());
  double worst = 0;
  size_t at = 0;
  for (size_t k = 0; k < ys.size(); ++k) {
    float y = std::bit_cast<float>(ys[k]), x = std::bit_cast<float>(xs[k]);
    double want = std::atan2(static_cast<double>(y), static_cast<double>(x));
    double d = ulpsOff(got[k], want);
    if (want == 0 && std::signbit(want) != std::signbit(got[k])) d = 1e9;
    if (d > worst) worst = d, at = k;
  }
  std::printf("atan2: at most %.2f ulps\n", worst);
  EXPECT_LE(worst, 3.0) << "atan2(" << std::bit_cast<float>(ys[at]) << ", " << std::bit_cast<float>(xs[at])
                        << ") gave " << got[at];
  EXPECT_EQ(r.llo.find("vatan2"), std::string::npos);
}

// Every code of a narrow float type (bf16 and f16: all 65536), repeated to
// `n` elements.
hlo::Literal everyCode(ElementType t, int64_t n, int64_t stride = 1) {
  hlo::Literal l(hlo::Shape::array(t, {n}));
  uint64_t codes = uint64_t{1} << hlo::elementTypeInfo(t).bitWidth;
  for (int64_t k = 0; k < n; ++k) l.setBits(k, (static_cast<uint64_t>(k) * static_cast<uint64_t>(stride)) % codes);
  return l;
}

// Narrow floats compute in f32 and round once, so each result is one of the
// two values of its type around the exact one (faithful rounding), the
// largest finite value or an overflow code past the type's range. Where the
// exact value is NaN or infinite, the result is the code the interpreter's
// rounding gives it (types without NaN or inf have their own conventions).
std::string faithfulInType(ElementType t, const hlo::Literal& got, const std::vector<double>& want,
                           const hlo::Literal& interpreter) {
  std::vector<double> values;
  uint64_t codes = uint64_t{1} << hlo::elementTypeInfo(t).bitWidth;
  hlo::Literal all = everyCode(t, static_cast<int64_t>(codes));
  for (int64_t k = 0; k < static_cast<int64_t>(codes); ++k)
    if (std::isfinite(all.getDouble(k))) values.push_back(all.getDouble(k));
  std::sort(values.begin(), values.end());
  for (int64_t k = 0; k < got.elementCount(); ++k) {
    double g = got.getDouble(k), w = want[static_cast<size_t>(k)];
    if (!std::isfinite(w)) {
      double i = interpreter.getDouble(k);
      if ((std::isnan(i) && std::isnan(g)) || got.getBits(k) == interpreter.getBits(k)) continue;
      return fmt::format("element {}: got {} want {} (the interpreter's {})", k, g, w, i);
    }
    if (std::isnan(g)) {
      if (w > values.back() || w < values.front()) continue;  // no code for it
      return fmt::format("element {}: got {} want {}", k, g, w);
    }
    auto hi = std::lower_bound(values.begin(), values.end(), w);
    bool ok = (hi != values.end() && g == *hi) || (hi != values.begin() && g == *(hi - 1)) ||
              (hi == values.end() && (g == values.back() || std::isinf(g))) ||
              (hi == values.begin() && (g == values.front() || std::isinf(g)));
    if (!ok) return fmt::format("element {}: got {} want {}", k, g, w);
  }
  return "";
}

TEST(Math, NarrowFloatsComputeInF32AndRoundOnce) {
  for (const char* type : kNarrowFloats) {
    ElementType t = *hlo::elementTypeFromName(type);
    int64_t n = hlo::elementTypeInfo(t).bitWidth == 16 ? 65536 : 256;
    hlo::Literal in = everyCode(t, n);
    for (const InverseFn& fn : kInverseFns) {
      PipelineRun r = runPipeline(unaryModule(fn.op, type, n), [&](size_t, const hlo::Shape&) { return in; });
      ASSERT_EQ(r.error, "") << fn.op << " on " << type;
      hlo::Literal got(in.shape());
      std::memcpy(got.mutableData().data(), r.got[0].data(), got.data().size());
      std::vector<double> want;
      for (int64_t k = 0; k < n; ++k) want.push_back(fn.ref(in.getDouble(k)));
      EXPECT_EQ(faithfulInType(t, got, want, *r.want()[0]), "") << fn.op << " on " << type;
    }
  }
}

TEST(Math, NarrowFloatAtan2) {
  // One-byte types: every pair of codes; 16-bit ones: a stride through them.
  for (const char* type : kNarrowFloats) {
    ElementType t = *hlo::elementTypeFromName(type);
    int bits = hlo::elementTypeInfo(t).bitWidth;
    int64_t n = bits == 16 ? 40000 : int64_t{1} << (2 * bits);
    hlo::Literal y = everyCode(t, n), x = everyCode(t, n);
    for (int64_t k = 0; k < n; ++k)
      x.setBits(k, bits == 16 ? (static_cast<uint64_t>(k) * 40503u + 77) & 0xffff : static_cast<uint64_t>(k) >> bits);
    PipelineRun r = runPipeline(binaryModule("atan2", type, n), [&](size_t i, const hlo::Shape&) { return i ? x : y; });
    ASSERT_EQ(r.error, "") << type;
    hlo::Literal got(y.shape());
    std::memcpy(got.mutableData().data(), r.got[0].data(), got.data().size());
    std::vector<double> want;
    for (int64_t k = 0; k < n; ++k) want.push_back(std::atan2(y.getDouble(k), x.getDouble(k)));
    EXPECT_EQ(faithfulInType(t, got, want, *r.want()[0]), "") << type;
  }
}

TEST(Math, ScalarOperandsAndChains) {
  // A broadcast scalar operand reaches atan2 as a register like any other,
  // and a chain of the expansions stays within the sum of their bounds.
  std::vector<uint32_t> xb = f32Probe(14);
  xb.resize(1400);
  PipelineRun r = runPipeline(R"(HloModule m
ENTRY main {
  x = f32[2,700] parameter(0)
  s = f32[] parameter(1)
  b = f32[2,700] broadcast(s), dimensions={}
  a = f32[2,700] atan2(x, b)
  e = f32[2,700] atan(a)
  ROOT h = f32[2,700] asinh(e)
})",
                              [&](size_t i, const hlo::Shape&) {
                                return i == 0 ? f32Literal({2, 700}, xb) : f32Literal({}, {bitsOf(-0.0f)});
                              });
  ASSERT_EQ(r.error, "");
  std::vector<float> got = floatsOf(r, 1400);
  for (size_t k = 0; k < 1400; ++k) {
    double want = std::asinh(std::atan(std::atan2(static_cast<double>(std::bit_cast<float>(xb[k])), -0.0)));
    EXPECT_LE(ulpsOff(got[k], want), 8.0) << k;
  }
}

// Integers: the extremes of each type crossed with each other, then random
// bits; every pair for the one-byte types.
hlo::Literal intVector(ElementType t, const std::vector<uint64_t>& bits) {
  hlo::Literal l(hlo::Shape::array(t, {static_cast<int64_t>(bits.size())}));
  for (size_t k = 0; k < bits.size(); ++k) l.setBits(static_cast<int64_t>(k), bits[k]);
  return l;
}

TEST(Math, MulhiEveryIntegerType) {
  for (const char* type : {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"}) {
    ElementType t = *hlo::elementTypeFromName(type);
    int bits = hlo::elementTypeInfo(t).bitWidth;
    uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    uint64_t minSigned = uint64_t{1} << (bits - 1);
    std::vector<uint64_t> a, b;
    if (bits == 8) {
      for (uint64_t i = 0; i < 256; ++i)
        for (uint64_t j = 0; j < 256; ++j) {
          a.push_back(i);
          b.push_back(j);
        }
    } else {
      // 0, 1, -1 (all ones, UINT_MAX), INT_MIN, INT_MAX, INT_MIN + 1, 2,
      // 0x55.., 0xaa.., and the halves' boundaries.
      std::vector<uint64_t> edges = {0,         1,
                                     mask,      minSigned,
                                     minSigned - 1, minSigned + 1,
                                     2,         0x5555555555555555ull & mask,
                                     0xaaaaaaaaaaaaaaaaull & mask, (uint64_t{1} << (bits / 2)) & mask,
                                     ((uint64_t{1} << (bits / 2)) - 1) & mask, mask - 1};
      for (uint64_t x : edges)
        for (uint64_t y : edges) {
          a.push_back(x);
          b.push_back(y);
        }
      std::mt19937_64 rng(static_cast<uint64_t>(bits));
      while (a.size() < 3000) {
        a.push_back(rng() & mask);
        b.push_back(rng() & mask);
      }
    }
    std::string text = binaryModule("mulhi", type, static_cast<int64_t>(a.size()));
    EXPECT_EQ(compareExact(text, {intVector(t, a), intVector(t, b)}), "") << type;
  }
}

TEST(Math, MulhiExtremes) {
  // What the edges must give: INT_MIN * INT_MIN = 2^62 (high word 2^30),
  // UINT_MAX * UINT_MAX = 2^64 - 2^33 + 1 (high word UINT_MAX - 1).
  auto run = [&](const char* type, ElementType t, uint64_t x, uint64_t y) {
    PipelineRun r = runPipeline(binaryModule("mulhi", type, 1), [&](size_t i, const hlo::Shape&) {
      return intVector(t, {i == 0 ? x : y});
    });
    EXPECT_EQ(r.error, "") << type;
    uint64_t out = 0;
    if (r.error.empty()) std::memcpy(&out, r.got[0].data(), r.got[0].size());
    return out;
  };
  EXPECT_EQ(run("s32", ElementType::S32, 0x80000000u, 0x80000000u), 0x40000000u);
  EXPECT_EQ(run("u32", ElementType::U32, 0xffffffffu, 0xffffffffu), 0xfffffffeu);
  EXPECT_EQ(run("s32", ElementType::S32, 0xffffffffu, 5), 0xffffffffu);  // -1 * 5 = -5: high word -1
  EXPECT_EQ(run("s64", ElementType::S64, 0x8000000000000000ull, 0x8000000000000000ull), 0x4000000000000000ull);
  EXPECT_EQ(run("u64", ElementType::U64, ~0ull, ~0ull), ~0ull - 1);
  EXPECT_EQ(run("s64", ElementType::S64, 0x8000000000000000ull, 0x7fffffffffffffffull), 0xc000000000000000ull);
  EXPECT_EQ(run("s16", ElementType::S16, 0x8000, 0x8000), 0x4000u);
  EXPECT_EQ(run("u16", ElementType::U16, 0xffff, 0xffff), 0xfffeu);
}

TEST(Math, RealAndImagOfRealTypes) {
  // real(x) = x, imag(x) = the type's zero bits (for f8e8m0fnu, which has
  // no zero, that is code 0: 2^-127), on every code. On its own, real is an
  // alias of its operand (every byte kept); in a fusion both are register
  // ops, where narrow NaN codes come back as NaN with the payload and sign
  // of the register form (an f32), as for every other op on them.
  for (const char* type : {"f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fnuz",
                           "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn"}) {
    ElementType t = *hlo::elementTypeFromName(type);
    int bits = hlo::elementTypeInfo(t).bitWidth;
    int64_t n = bits <= 16 ? int64_t{1} << bits : 3000;
    hlo::Literal x = everyCode(t, n);
    if (bits > 16) {
      std::mt19937_64 rng(5);
      for (int64_t k = 0; k < n; ++k) x.setBits(k, bits == 64 ? rng() : rng() & 0xffffffffu);
      x.setBits(0, bits == 64 ? 0x8000000000000000ull : 0x80000000u);  // -0
    }
    std::string plain = fmt::format(
        "HloModule m\nENTRY main {{\n  x = {0}[{1}] parameter(0)\n  re = {0}[{1}] real(x)\n"
        "  im = {0}[{1}] imag(x)\n  ROOT t = ({0}[{1}], {0}[{1}]) tuple(re, im)\n}}\n",
        type, n);
    EXPECT_EQ(compareExact(plain, {x}), "") << type;
    std::string fused = fmt::format(
        "HloModule m\nf {{\n  x = {0}[{1}] parameter(0)\n  re = {0}[{1}] real(x)\n  im = {0}[{1}] imag(x)\n"
        "  ROOT t = ({0}[{1}], {0}[{1}]) tuple(re, im)\n}}\nENTRY main {{\n  x = {0}[{1}] parameter(0)\n"
        "  ROOT f = ({0}[{1}], {0}[{1}]) fusion(x), kind=kLoop, calls=f\n}}\n",
        type, n);
    EXPECT_EQ(compareExact(fused, {x}, bits <= 16), "") << type << " fused";
  }
}



// log1p, expm1 and tan near zero, judged by relative error (an absolute
// floor would hide a result with no correct digit): every decade from
// 1e-38 to 1, both signs, a dense sweep of (-0.1, 0.1), the values a user
// reported (log1p(-2.547e-7) was -2.384e-7; expm1 near -0.026 was off in the
// sixth digit), and the specials.
TEST(Math, LibraryMathNearZeroKeepsRelativePrecision) {
  std::vector<float> xs = {-2.547e-7f, -0.026f, -0.0261f, -0.02587f, 0.026f, 1e-3f, -1e-3f};
  for (int e = -38; e <= 0; ++e)
    for (float m : {1.0f, 1.2345f, 3.3f, 7.77f})
      for (float s : {1.0f, -1.0f}) xs.push_back(s * m * std::pow(10.0f, static_cast<float>(e)));
  for (int k = -2000; k <= 2000; ++k) xs.push_back(static_cast<float>(k) * 5e-5f);
  std::vector<uint32_t> bits;
  for (float x : xs) bits.push_back(bitsOf(x));
  struct Fn {
    const char* op;
    double (*ref)(double);
    double maxUlps;
  };
  const Fn fns[] = {{"log-plus-one", [](double x) { return std::log1p(x); }, 4},
                    {"exponential-minus-one", [](double x) { return std::expm1(x); }, 4},
                    {"tan", [](double x) { return std::tan(x); }, 4}};
  for (const Fn& fn : fns) {
    int64_t n = static_cast<int64_t>(bits.size());
    PipelineRun r = runPipeline(unaryModule(fn.op, "f32", n), [&](size_t, const hlo::Shape&) { return f32Vector(bits); });
    ASSERT_EQ(r.error, "") << fn.op;
    std::vector<float> got(bits.size());
    std::memcpy(got.data(), r.got[0].data(), sizeof(float) * got.size());
    double worst = 0;
    size_t at = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      double d = ulpsOff(got[k], fn.ref(static_cast<double>(xs[k])));
      if (d > worst) worst = d, at = k;
    }
    EXPECT_LE(worst, fn.maxUlps) << fn.op << " of " << xs[at] << " gave " << got[at] << ", want "
                                 << fn.ref(static_cast<double>(xs[at]));
  }
}

TEST(Math, Log1pExpm1Specials) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {0.0f, -0.0f, -1.0f, -2.0f, inf, -inf, nan, 100.0f, -100.0f, 88.0f, 89.0f, 1e-45f, 3e38f};
  std::vector<uint32_t> bits;
  for (float x : xs) bits.push_back(bitsOf(x));
  auto run = [&](const char* op) {
    PipelineRun r = runPipeline(unaryModule(op, "f32", static_cast<int64_t>(xs.size())),
                                [&](size_t, const hlo::Shape&) { return f32Vector(bits); });
    EXPECT_EQ(r.error, "") << op;
    std::vector<float> out(xs.size());
    if (r.error.empty()) std::memcpy(out.data(), r.got[0].data(), sizeof(float) * out.size());
    return out;
  };
  std::vector<float> l = run("log-plus-one"), e = run("exponential-minus-one");
  // log1p: +-0 kept, -1 -> -inf, below -1 NaN, inf -> inf, -inf NaN, NaN NaN.
  EXPECT_TRUE(l[0] == 0 && !std::signbit(l[0]));
  EXPECT_TRUE(l[1] == 0 && std::signbit(l[1]));
  EXPECT_EQ(l[2], -inf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(l[4], inf);
  EXPECT_TRUE(std::isnan(l[5]));
  EXPECT_TRUE(std::isnan(l[6]));
  EXPECT_NEAR(l[7], std::log1p(100.0), 1e-5);
  EXPECT_EQ(l[11], 1e-45f);
  EXPECT_NEAR(l[12], std::log1p(3e38), 1e-4);
  // expm1: +-0 kept, inf -> inf, -inf -> -1, large negative -> -1, overflow -> inf.
  EXPECT_TRUE(e[0] == 0 && !std::signbit(e[0]));
  EXPECT_TRUE(e[1] == 0 && std::signbit(e[1]));
  EXPECT_NEAR(e[2], std::expm1(-1.0), 1e-7);
  EXPECT_EQ(e[4], inf);
  EXPECT_EQ(e[5], -1.0f);
  EXPECT_TRUE(std::isnan(e[6]));
  EXPECT_EQ(e[7], inf);
  EXPECT_EQ(e[8], -1.0f);
  EXPECT_NEAR(e[9] / std::expm1(88.0), 1.0, 1e-6);
  EXPECT_EQ(e[10], inf);
  EXPECT_EQ(e[11], 1e-45f);
}

// erf from vector ALU instructions and vexp: within 4 ulps of double libm
// (measured 2.4) over [-5, 5] densely, every decade down to 1e-38 and the
// region boundaries; the specials exact; narrow types within one ulp of
// their type of the exact value (they compute in f32 and round once).
TEST(Math, ErfExpansionWithinFourUlps) {
  std::vector<float> xs;
  for (int k = -50000; k <= 50000; ++k) xs.push_back(static_cast<float>(k) * 1e-4f);
  for (int e = -38; e <= 0; ++e)
    for (float m : {1.0f, 2.5f, 7.0f})
      for (float s : {1.0f, -1.0f}) xs.push_back(s * m * std::pow(10.0f, static_cast<float>(e)));
  for (float b : {1.0f, 3.92f, 4.0f})
    for (float d : {-2e-7f, 0.0f, 2e-7f}) xs.push_back(b + d);
  std::vector<uint32_t> bits;
  for (float x : xs) bits.push_back(bitsOf(x));
  PipelineRun r = runPipeline(unaryModule("erf", "f32", static_cast<int64_t>(xs.size())),
                              [&](size_t, const hlo::Shape&) { return f32Vector(bits); });
  ASSERT_EQ(r.error, "");
  std::vector<float> got(xs.size());
  std::memcpy(got.data(), r.got[0].data(), sizeof(float) * got.size());
  double worst = 0;
  size_t at = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    double d = ulpsOff(got[k], std::erf(static_cast<double>(xs[k])));
    if (d > worst) worst = d, at = k;
  }
  EXPECT_LE(worst, 4.0) << "erf(" << xs[at] << ") gave " << got[at];
  // No row: the program has no verf.
  EXPECT_EQ(r.llo.find("verf"), std::string::npos);

  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> sp = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f, 1e-45f};
  std::vector<uint32_t> spBits;
  for (float x : sp) spBits.push_back(bitsOf(x));
  PipelineRun s = runPipeline(unaryModule("erf", "f32", static_cast<int64_t>(sp.size())),
                              [&](size_t, const hlo::Shape&) { return f32Vector(spBits); });
  ASSERT_EQ(s.error, "");
  std::vector<float> o(sp.size());
  std::memcpy(o.data(), s.got[0].data(), sizeof(float) * o.size());
  EXPECT_TRUE(o[0] == 0 && !std::signbit(o[0]));
  EXPECT_TRUE(o[1] == 0 && std::signbit(o[1]));
  EXPECT_EQ(o[2], 1.0f);
  EXPECT_EQ(o[3], -1.0f);
  EXPECT_TRUE(std::isnan(o[4]));
  EXPECT_EQ(o[5], 1.0f);
  EXPECT_EQ(o[6], -1.0f);
  EXPECT_NEAR(o[7], 1.1283791670955126 * 1e-45, 2e-45);

  for (const char* type : {"bf16", "f16"}) {
    ElementType t = *hlo::elementTypeFromName(type);
    hlo::Literal in = everyCode(t, 65536);
    PipelineRun n = runPipeline(unaryModule("erf", type, 65536), [&](size_t, const hlo::Shape&) { return in; });
    ASSERT_EQ(n.error, "") << type;
    hlo::Literal out(in.shape());
    std::memcpy(out.mutableData().data(), n.got[0].data(), out.data().size());
    int mantissa = t == ElementType::BF16 ? 7 : 10;
    for (int64_t k = 0; k < 65536; ++k) {
      double x = in.getDouble(k), g = out.getDouble(k), w = std::erf(x);
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(g)) << type << " " << k;
        continue;
      }
      double ulp = std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(w), 1e-300)), t == ElementType::BF16 ? -126 : -14) - mantissa);
      ASSERT_LE(std::fabs(g - w), ulp) << type << " erf(" << x << ") gave " << g;
    }
  }
}

}  // namespace
}  // namespace tpu::codegen

namespace tpu::codegen {
namespace {

// f64 e^x composed from the pair rows (kernels/math.cpp: expandExpF64),
// measured in f64 ulps against long double expl over the whole domain
// densely, near 0, the overflow and subnormal boundaries and the specials;
// no vexp.f64 row left in the program.
TEST(Math, F64ExpWithinItsUlpBound) {
  std::vector<double> xs;
  for (int k = 0; k <= 40000; ++k) xs.push_back(-745.2 + k * (709.8 + 745.2) / 40000);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int k = 0; k < 20000; ++k) xs.push_back(u(rng) * ((k & 1) ? 1.0 : 1e-3));
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {0.0, -0.0, 1e-300, 5e-324, -1e-20, 709.78, 709.7827128933840, 709.79, -708.39, -708.4, -745.1,
                   -745.13, -745.2, -1000.0, 1000.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), 0.5 * M_LN2,
                   -0.5 * M_LN2, 1.0, 2.0, 10.0, -10.0})
    xs.push_back(x);
  hlo::Literal in(hlo::Shape::array(ElementType::F64, {static_cast<int64_t>(xs.size())}));
  std::memcpy(in.mutableData().data(), xs.data(), xs.size() * sizeof(double));
  PipelineRun run = runPipeline(unaryModule("exponential", "f64", static_cast<int64_t>(xs.size())),
                                [&](size_t, const hlo::Shape&) { return in; });
  ASSERT_EQ(run.error, "");
  EXPECT_EQ(run.llo.find("vexp.f64"), std::string::npos);
  std::vector<double> got(xs.size());
  std::memcpy(got.data(), run.got[0].data(), got.size() * sizeof(double));
  double worst = 0;
  std::string where;
  for (size_t k = 0; k < xs.size(); ++k) {
    long double want = std::exp(static_cast<long double>(xs[k]));
    double e;
    if (std::isnan(xs[k])) e = std::isnan(got[k]) ? 0 : 1e9;
    else if (want > std::numeric_limits<double>::max()) e = got[k] == inf ? 0 : 1e9;
    else {
      long double a = std::fabs(want);
      int ex = a > 0 ? std::ilogb(a) : -1074;
      long double ulp = std::ldexp(1.0L, std::max(ex, -1022) - 52);
      e = static_cast<double>(std::fabs(static_cast<long double>(got[k]) - want) / ulp);
    }
    if (e > worst) {
      worst = e;
      where = fmt::format("x = {} got {} want {}", xs[k], got[k], static_cast<double>(want));
    }
  }
  EXPECT_LE(worst, 2.0) << where;
  std::printf("f64 exp: max %.3f ulps (%s)\n", worst, where.c_str());
}

}  // namespace
}  // namespace tpu::codegen
