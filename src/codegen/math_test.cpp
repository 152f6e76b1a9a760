// End-to-end tests of the inverse trigonometric and hyperbolic functions,
// erf and atan2 (one EUP row each), mulhi on every integer type, and real /
// imag of real types: compiled, simulated and compared bit for bit with the
// reference interpreter on edge values (domain limits, +-0, +-inf, NaN,
// huge and subnormal arguments, INT_MIN, UINT_MAX) and on every code of the
// narrow float types.
#include <cmath>
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

const char* const kUnaryOps[] = {"asin", "acos", "atan", "asinh", "acosh", "atanh", "erf"};

const char* const kNarrowFloats[] = {"bf16",       "f16",        "f8e4m3fn",      "f8e5m2",    "f8e4m3", "f8e3m4",
                                     "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn"};

TEST(Math, F32UnaryFunctionsAreTheInterpretersBitForBit) {
  std::vector<uint32_t> in = f32Probe(11);
  for (const char* op : kUnaryOps) {
    std::string text = unaryModule(op, "f32", static_cast<int64_t>(in.size()));
    EXPECT_EQ(compareExact(text, {f32Vector(in)}), "") << op;
  }
}

TEST(Math, F32DomainEdges) {
  // Spot checks of what the edges must give, beyond agreeing: NaN outside
  // the domains, infinities at atanh(+-1), signed zeros kept.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> in = {bitsOf(2.0f), bitsOf(-1.0f), bitsOf(1.0f), bitsOf(-0.0f), bitsOf(0.5f), bitsOf(inf)};
  auto run = [&](const char* op) {
    PipelineRun r = runPipeline(unaryModule(op, "f32", 6), [&](size_t, const hlo::Shape&) { return f32Vector(in); });
    EXPECT_EQ(r.error, "") << op;
    std::vector<float> out(6);
    if (r.error.empty()) std::memcpy(out.data(), r.got[0].data(), sizeof(float) * 6);
    return out;
  };
  std::vector<float> asin = run("asin"), acosh = run("acosh"), atanh = run("atanh"), erf = run("erf");
  EXPECT_TRUE(std::isnan(asin[0]));
  EXPECT_FLOAT_EQ(asin[1], -1.5707964f);
  EXPECT_TRUE(std::signbit(asin[3]) && asin[3] == 0.0f);
  EXPECT_TRUE(std::isnan(acosh[1]));
  EXPECT_EQ(acosh[2], 0.0f);
  EXPECT_EQ(acosh[5], inf);
  EXPECT_EQ(atanh[1], -inf);
  EXPECT_EQ(atanh[2], inf);
  EXPECT_TRUE(std::isnan(atanh[0]));
  EXPECT_EQ(erf[5], 1.0f);
  EXPECT_TRUE(std::signbit(erf[3]));
}

TEST(Math, F32Atan2QuadrantsZerosAndInfinities) {
  // Every pair of edges (the signs of zeros pick +-0 or +-pi), then random.
  std::vector<uint32_t> edges = f32Edges(), ys, xs;
  for (uint32_t a : edges)
    for (uint32_t b : edges) {
      ys.push_back(a);
      xs.push_back(b);
    }
  std::vector<uint32_t> ry = f32Probe(12), rx = f32Probe(13);
  ys.insert(ys.end(), ry.begin(), ry.end());
  xs.insert(xs.end(), rx.begin(), rx.end());
  std::string text = binaryModule("atan2", "f32", static_cast<int64_t>(ys.size()));
  EXPECT_EQ(compareExact(text, {f32Vector(ys), f32Vector(xs)}), "");
}

// Every code of a narrow float type (bf16 and f16: all 65536), repeated to
// `n` elements.
hlo::Literal everyCode(ElementType t, int64_t n, int64_t stride = 1) {
  hlo::Literal l(hlo::Shape::array(t, {n}));
  uint64_t codes = uint64_t{1} << hlo::elementTypeInfo(t).bitWidth;
  for (int64_t k = 0; k < n; ++k) l.setBits(k, (static_cast<uint64_t>(k) * static_cast<uint64_t>(stride)) % codes);
  return l;
}

// Narrow results are compared NaN for NaN: a NaN's sign and payload are
// those of the register form's rounding (vrnd/vst), which the interpreter's
// rounding does not always share (it keeps the sign of -NaN, which vst.f8*
// drops). Every non-NaN result must match bit for bit.
TEST(Math, NarrowFloatsComputeInF32AndRoundOnce) {
  for (const char* type : kNarrowFloats) {
    ElementType t = *hlo::elementTypeFromName(type);
    int64_t n = hlo::elementTypeInfo(t).bitWidth == 16 ? 65536 : 256;
    for (const char* op : kUnaryOps)
      EXPECT_EQ(compareExact(unaryModule(op, type, n), {everyCode(t, n)}, true), "") << op << " on " << type;
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
    EXPECT_EQ(compareExact(binaryModule("atan2", type, n), {y, x}, true), "") << type;
  }
}

TEST(Math, ScalarOperandsAndChains) {
  // A broadcast scalar operand reaches vatan2 as a register like any
  // other, and a chain of the new rows stays exact.
  EXPECT_EQ(compareExact(R"(HloModule m
ENTRY main {
  x = f32[2,700] parameter(0)
  s = f32[] parameter(1)
  b = f32[2,700] broadcast(s), dimensions={}
  a = f32[2,700] atan2(x, b)
  e = f32[2,700] erf(a)
  ROOT h = f32[2,700] asinh(e)
})",
                         {f32Literal({2, 700}, f32Probe(14)), f32Literal({}, {bitsOf(-0.0f)})}),
            "");
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

}  // namespace
}  // namespace tpu::codegen
