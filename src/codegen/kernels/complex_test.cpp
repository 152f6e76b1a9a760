// End-to-end tests of c64 and c128 arithmetic: HLO text -> llo-gen ->
// assembler -> simulator, compared part by part and bit for bit with the
// reference interpreter. Parts mix signed zeros, infinities, NaNs, huge and
// tiny magnitudes (the overflow and underflow paths of division and abs)
// and subnormals with random values.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

double pickPart(std::mt19937_64& rng) {
  const double inf = std::numeric_limits<double>::infinity();
  static const double kSpecial[] = {0.0,   -0.0,  inf,    -inf,  std::numeric_limits<double>::quiet_NaN(),
                                    1.0,   -1.0,  0.5,    -2.0,  1e38,
                                    -3e38, 1e-38, -1e-39, 1e300, -1e-300};
  uint64_t r = rng();
  if ((r & 3) == 0) return kSpecial[(r >> 8) % std::size(kSpecial)];
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  double v = real(rng);
  if ((r & 12) == 4) v = std::ldexp(v, static_cast<int>((r >> 20) % 120) - 60);
  return v;
}

hlo::Literal testLiteral(const hlo::Shape& s, std::mt19937_64& rng) {
  hlo::Literal l(s);
  ElementType t = s.elementType();
  for (int64_t k = 0; k < l.elementCount(); ++k) {
    if (t == ElementType::Pred) {
      l.setInt(k, rng() & 1);
    } else if (hlo::isFloatType(t) || hlo::isComplexType(t)) {
      setFloatElement(l, k, [&] { return pickPart(rng); });
    } else {
      l.setBits(k, rng());
      const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
      if (info.isSigned) l.setInt(k, static_cast<int64_t>(rng()) >> (64 - info.bitWidth));
    }
  }
  return l;
}

// A float of `bytes` bytes at p, as a double (NaN tests).
double partValue(const uint8_t* p, size_t bytes) {
  if (bytes == 4) return std::bit_cast<float>(*reinterpret_cast<const uint32_t*>(p));
  return std::bit_cast<double>(*reinterpret_cast<const uint64_t*>(p));
}

// "" when the simulated results equal the interpreter's bit for bit (a NaN
// part matches any NaN); otherwise the first difference. A c64 part may be
// NaN where the interpreter's is infinite: compiled c64 products are XLA's
// (ar br - ai bi, ar bi + ai br) without C's Annex G recovery of
// infinities, which std::complex has. With `ulps` > 0, c64 elements whose
// interpreted value is finite are compared normwise within that many f32
// epsilons instead (the library math of complex.cpp, whose own
// bounds complex_math_test.cpp measures against long double).
std::string compareComplex(const std::string& text, uint64_t seed = 5, const CodegenOptions& options = {},
                           double ulps = 0) {
  std::mt19937_64 rng(seed);
  PipelineRun run = runPipeline(
      text, [&](size_t, const hlo::Shape& shape) { return testLiteral(shape, rng); }, "v5e", options);
  if (!run.error.empty()) return run.error;
  const std::vector<hlo::Literal>& args = run.args;
  if (run.expected->isTuple() || run.got.size() != 1) return "expected one array result";
  const hlo::Literal& w = *run.expected;
  ElementType t = w.shape().elementType();
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
  size_t eb = static_cast<size_t>(info.bitWidth / 8);
  // Complex results compare per part; real floats as one part.
  size_t part = t == ElementType::C64 ? 4 : t == ElementType::C128 ? 8 : eb;
  bool floaty = info.isFloat || t == ElementType::C64 || t == ElementType::C128;
  for (int64_t k = 0; k < w.elementCount(); ++k) {
    const auto* g = reinterpret_cast<const uint8_t*>(run.got[0].data()) + static_cast<size_t>(k) * eb;
    const uint8_t* x = w.data().data() + static_cast<size_t>(k) * eb;
    const bool isComplex = t == ElementType::C64 || t == ElementType::C128;
    if (ulps > 0 && isComplex) {
      long double gp[2] = {partValue(g, part), partValue(g + part, part)};
      long double xp[2] = {partValue(x, part), partValue(x + part, part)};
      if (!std::isfinite(xp[0]) || !std::isfinite(xp[1])) continue;
      long double d = std::hypot(gp[0] - xp[0], gp[1] - xp[1]);
      long double a = std::max(std::hypot(xp[0], xp[1]), part == 4 ? 0x1p-126L : 0x1p-1022L);
      if (d <= ulps * (part == 4 ? 0x1p-23L : 0x1p-52L) * a) continue;
    }
    for (size_t o = 0; o < eb; o += part) {
      if (std::memcmp(g + o, x + o, part) == 0) continue;
      if (isComplex && std::isnan(partValue(g + o, part)) && std::isinf(partValue(x + o, part))) continue;
      if (floaty && (part == 4 || part == 8) && std::isnan(partValue(g + o, part)) &&
          std::isnan(partValue(x + o, part)))
        continue;
      std::string in;
      for (const hlo::Literal& a : args) {
        if (!a.shape().isArray() || a.elementCount() == 0) continue;
        const uint8_t* e = a.rawElement(k % a.elementCount());
        size_t ab = static_cast<size_t>(hlo::elementTypeInfo(a.shape().elementType()).bitWidth / 8);
        size_t ap = a.shape().elementType() == ElementType::C64 ? 4 : ab == 16 ? 8 : ab;
        in += " (";
        for (size_t q = 0; q < ab; q += ap)
          in += fmt::format("{}{}", q ? ", " : "", ap >= 4 ? partValue(e + q, ap) : 0.0);
        in += ")";
      }
      return fmt::format("element {} part {}: got {} want {}; inputs{}", k, o / part,
                         part >= 4 ? partValue(g + o, part) : 0.0, part >= 4 ? partValue(x + o, part) : 0.0,
                         in);
    }
  }
  return "";
}

std::string binaryModule(const std::string& op, const std::string& t, const std::string& rt = "",
                         int64_t n = 2100) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  a = {1}[{3}] parameter(0)
  b = {1}[{3}] parameter(1)
  ROOT r = {2}[{3}] {0}(a, b)
}})",
                     op, t, rt.empty() ? t : rt, n);
}

std::string unaryModule(const std::string& op, const std::string& t, const std::string& rt = "",
                        int64_t n = 2100) {
  return fmt::format(R"(HloModule m
ENTRY main {{
  a = {1}[{3}] parameter(0)
  ROOT r = {2}[{3}] {0}(a)
}})",
                     op, t, rt.empty() ? t : rt, n);
}

std::string partType(const std::string& t) { return t == "c64" ? "f32" : "f64"; }

TEST(Complex, AddSubtractNegate) {
  for (const char* t : {"c64", "c128"}) {
    for (const char* op : {"add", "subtract"})
      EXPECT_EQ(compareComplex(binaryModule(op, t)), "") << op << " " << t;
    EXPECT_EQ(compareComplex(unaryModule("negate", t)), "") << t;
  }
}

TEST(Complex, MultiplyDivideAndPower) {
  // Both types are expanded into part instructions (XLA's formulas):
  // products bit-exact where finite (NaN where Annex G recovers an
  // infinity), divide near the interpreter's (power's error grows with
  // |b ln a|: its bound is measured in complex_math_test.cpp, not here).
  for (const char* t : {"c64", "c128"})
    for (const char* op : {"multiply", "divide"})
      for (uint64_t seed : {5, 6}) {
        double ulps = std::string(op) == "divide" ? 8 : 0;
        EXPECT_EQ(compareComplex(binaryModule(op, t), seed, {}, ulps), "") << op << " " << t;
      }
}

TEST(Complex, TranscendentalsAndSign) {
  // Within a bound of the interpreter's results (each op's own bound
  // against long double is in complex_math_test.cpp).
  for (std::string t : {"c64", "c128"})
    for (std::string op : {"exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt", "rsqrt",
                           "tanh", "sine", "cosine", "tan", "logistic", "sign"}) {
      EXPECT_EQ(compareComplex(unaryModule(op, t), 5, {}, 24), "") << op << " " << t;
    }
}

TEST(Complex, AbsRealImagAndComplex) {
  for (std::string t : {"c64", "c128"}) {
    std::string pt = partType(t);
    for (const char* op : {"abs", "real", "imag"}) {
      if (std::string(op) == "abs") continue;  // a hypot of parts: complex_math_test.cpp
      EXPECT_EQ(compareComplex(unaryModule(op, t, pt)), "") << op << t;
    }
    EXPECT_EQ(compareComplex(binaryModule("complex", pt, t)), "") << t;
  }
}

TEST(Complex, CompareAndSelect) {
  // b equals a where p is set (NaN parts never compare equal).
  for (const char* t : {"c64", "c128"})
    for (const char* dir : {"EQ", "NE"}) {
      std::string text = fmt::format(R"(HloModule m
fused {{
  a = {0}[1500] parameter(0)
  c = {0}[1500] parameter(1)
  p = pred[1500] parameter(2)
  b = {0}[1500] select(p, a, c)
  e = pred[1500] compare(a, b), direction={1}
  ROOT s = {0}[1500] select(e, c, a)
}}
ENTRY main {{
  a = {0}[1500] parameter(0)
  c = {0}[1500] parameter(1)
  p = pred[1500] parameter(2)
  ROOT f = {0}[1500] fusion(a, c, p), kind=kLoop, calls=fused
}})",
                                     t, dir);
      EXPECT_EQ(compareComplex(text), "") << t << " " << dir;
      std::string plain = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[300] parameter(0)
  b = {0}[300] parameter(1)
  ROOT e = pred[300] compare(a, b), direction={1}
}})",
                                      t, dir);
      EXPECT_EQ(compareComplex(plain), "") << t << " " << dir;
    }
}

TEST(Complex, Converts) {
  struct Case {
    const char* from;
    const char* to;
  };
  for (Case c : {Case{"c64", "c128"}, Case{"c128", "c64"}, Case{"f32", "c64"}, Case{"f64", "c64"},
                 Case{"s32", "c64"}, Case{"u32", "c64"}, Case{"s64", "c64"}, Case{"u8", "c64"},
                 Case{"bf16", "c64"}, Case{"f32", "c128"}, Case{"f64", "c128"}, Case{"s32", "c128"},
                 Case{"u64", "c128"}, Case{"f16", "c128"}, Case{"pred", "c64"}, Case{"s8", "c128"}})
    EXPECT_EQ(compareComplex(unaryModule("convert", c.from, c.to)), "") << c.from << " -> " << c.to;
}

TEST(Complex, FusionWithScalarsAndConstants) {
  // A broadcast complex scalar parameter and a complex constant in one kernel.
  for (const char* t : {"c64", "c128"}) {
    std::string text = fmt::format(R"(HloModule m
fused {{
  a = {0}[3000] parameter(0)
  s = {0}[] parameter(1)
  k = {0}[] constant((1.5, -0.25))
  bs = {0}[3000] broadcast(s), dimensions={{}}
  bk = {0}[3000] broadcast(k), dimensions={{}}
  x = {0}[3000] add(a, bs)
  y = {0}[3000] subtract(x, bk)
  ROOT z = {0}[3000] negate(y)
}}
ENTRY main {{
  a = {0}[3000] parameter(0)
  s = {0}[] parameter(1)
  ROOT f = {0}[3000] fusion(a, s), kind=kLoop, calls=fused
}})",
                                   t);
    EXPECT_EQ(compareComplex(text), "") << t;
  }
  // c64 library math inside a fusion, mixed with its parts: the same bits
  // as the same ops unfused (the chain is ill-conditioned where a part
  // cancels, so the interpreter's std::complex rounding is no reference;
  // each op's error is measured in complex_math_test.cpp).
  const char* body = R"(  m = c64[2000] multiply(a, b)
  d = c64[2000] divide(m, a)
  e = c64[2000] exponential(d)
  re = f32[2000] real(e)
  ab = f32[2000] abs(m)
  s = f32[2000] add(re, ab)
)";
  std::string fused = fmt::format(R"(HloModule m
fused {{
  a = c64[2000] parameter(0)
  b = c64[2000] parameter(1)
{0}  ROOT c = c64[2000] complex(s, re)
}}
ENTRY main {{
  a = c64[2000] parameter(0)
  b = c64[2000] parameter(1)
  ROOT f = c64[2000] fusion(a, b), kind=kLoop, calls=fused
}})",
                                  body);
  std::string unfused = fmt::format(R"(HloModule m
ENTRY main {{
  a = c64[2000] parameter(0)
  b = c64[2000] parameter(1)
{0}  ROOT c = c64[2000] complex(s, re)
}})",
                                    body);
  std::mt19937_64 r1(5), r2(5);
  PipelineRun f = runPipeline(fused, [&](size_t, const hlo::Shape& shape) { return testLiteral(shape, r1); });
  PipelineRun u = runPipeline(unfused, [&](size_t, const hlo::Shape& shape) { return testLiteral(shape, r2); });
  ASSERT_EQ(f.error, "");
  ASSERT_EQ(u.error, "");
  EXPECT_EQ(f.got, u.got);
}

TEST(Complex, Reductions) {
  // Rows folded from the init in the interpreter's order: sums bit-exact.
  struct Case {
    const char* t;
    const char* op;
    const char* init;
  };
  for (Case c : {Case{"c64", "add", "(0, 0)"}, Case{"c128", "add", "(0.5, -0)"},
                 Case{"c64", "multiply", "(1, 0)"}, Case{"c128", "multiply", "(1, 0)"}})
    for (const char* dims : {"1", "0", "0,1"}) {
      std::string text = reduceModule(c.t, c.op, c.init, dims);
      EXPECT_EQ(compareComplex(text), "") << c.t << " " << c.op << " dims " << dims;
    }
}

TEST(Complex, WindowReductions) {
  // One tap at a time folded into the outputs, as the interpreter orders
  // window elements; padding takes the init value.
  for (const char* t : {"c64", "c128"})
    for (const char* op : {"add", "multiply"}) {
      std::string text = fmt::format(R"(HloModule m
red {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT s = {0}[] {1}(x, y)
}}
ENTRY main {{
  a = {0}[20,130] parameter(0)
  z = {0}[] constant((1, -0.5))
  ROOT w = {0}[10,66] reduce-window(a, z), window={{size=3x3 stride=2x2 pad=1_1x1_2}}, to_apply=red
}})",
                                     t, op);
      EXPECT_EQ(compareComplex(text), "") << t << " " << op;
    }
}

TEST(Complex, ScatterCombines) {
  // Repeated indices combine in index order with the update computation.
  for (const char* t : {"c64", "c128"})
    for (const char* op : {"add", "multiply"}) {
      std::string text = fmt::format(R"(HloModule m
comb {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT s = {0}[] {1}(x, y)
}}
ENTRY main {{
  a = {0}[50,300] parameter(0)
  i = s32[40,1] parameter(1)
  u = {0}[40,300] parameter(2)
  ROOT s = {0}[50,300] scatter(a, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=comb
}})",
                                     t, op);
      EXPECT_EQ(compareComplex(text), "") << t << " " << op;
    }
}

TEST(Complex, SortsCarryComplexValues) {
  // Complex operands ride along with an s32 key (HLO has no complex order);
  // every register of a value moves through the sorting network.
  for (const char* t : {"c64", "c128"}) {
    std::string text = fmt::format(R"(HloModule m
less {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = {0}[] parameter(2)
  d = {0}[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}}
ENTRY main {{
  k = s32[6,700] parameter(0)
  v = {0}[6,700] parameter(1)
  s = (s32[6,700], {0}[6,700]) sort(k, v), dimensions={{1}}, is_stable=true, to_apply=less
  ROOT r = {0}[6,700] get-tuple-element(s), index=1
}})",
                                   t);
    EXPECT_EQ(compareComplex(text), "") << t;
  }
}

TEST(Complex, Dots) {
  // On the vector unit, each output summed over k in order from (0, 0) with
  // a complex product and a part-wise add: the interpreter's loop, so
  // bit-exact. Batched, transposed operands, more columns than one vreg.
  for (const char* t : {"c64", "c128"}) {
    std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[2,37,6] parameter(0)
  b = {0}[2,1100,37] parameter(1)
  ROOT d = {0}[2,6,1100] dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
}})",
                                   t);
    EXPECT_EQ(compareComplex(text), "") << t;
  }
}

TEST(Complex, Convolutions) {
  // im2col on the vector unit with the complex row product and part-wise
  // adds, features outer and taps inner, padding and dilation holes skipped
  // (a validity mask): the interpreter's direct loop, so bit-exact even with
  // infinities and NaNs in the kernel. Feature and batch groups, negative
  // padding, both dilations, strides, reversal, permuted dim labels.
  const char* const kConvs[] = {
      "x = {0}[2,9,3] parameter(0)\n  k = {0}[3,3,4] parameter(1)\n"
      "  ROOT c = {0}[2,9,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f",
      "x = {0}[2,4,7,6] parameter(0)\n  k = {0}[4,2,3,2] parameter(1)\n"
      "  ROOT c = {0}[2,4,3,5] convolution(x, k), window={{size=2x3 stride=2x2 pad=0_1x1_-1 lhs_dilate=1x2 "
      "rhs_dilate=2x1}}, dim_labels=bf01_o01i->bf01, feature_group_count=2",
      "x = {0}[4,6,2] parameter(0)\n  k = {0}[3,2,6] parameter(1)\n"
      "  ROOT c = {0}[2,6,6] convolution(x, k), window={{size=3 pad=1_1 rhs_reversal=1}}, dim_labels=b0f_0io->b0f, "
      "batch_group_count=2",
      "x = {0}[5,3,2] parameter(0)\n  k = {0}[3,2,2] parameter(1)\n"
      "  ROOT c = {0}[3,2,2] convolution(x, k), window={{size=2 pad=-1_2 stride=2}}, dim_labels=0fb_i0o->0bf",
  };
  for (const char* t : {"c64", "c128"})
    for (const char* conv : kConvs) {
      std::string text = "HloModule m\nENTRY main {\n  " + fmt::format(fmt::runtime(conv), t) + "\n}\n";
      EXPECT_EQ(compareComplex(text), "") << t << "\n" << text;
    }
}

TEST(Complex, DotsAndConvolutionsWhoseKDoesNotFitTileK) {
  // 256 KiB of VMEM: K is tiled, each tile adding into the result rows the
  // previous one stored, so the sums keep the interpreter's order: bit-exact.
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  EXPECT_EQ(compareComplex(R"(HloModule m
ENTRY main {
  a = c128[2,3,600] parameter(0)
  b = c128[2,600,200] parameter(1)
  ROOT d = c128[2,3,200] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})",
                           5, small),
            "");
  // Padded (products with padding skipped, a validity block tiled with K):
  // 1500 input features x 3 taps = K of 4500 for 40 positions.
  EXPECT_EQ(compareComplex(R"(HloModule m
ENTRY main {
  x = c64[1,40,1500] parameter(0)
  k = c64[3,1500,5] parameter(1)
  ROOT c = c64[1,40,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
})",
                           5, small),
            "");
  // K = 70000: the lhs row (1.1 MB) is more than SMEM's 1 MiB, so K is
  // tiled on the full v5e too: a tile of 65536 rows of K, then 4464 (its
  // lhs slices are the DMAs to SMEM). Compiled only: the tiling itself is
  // run above.
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", R"(HloModule m
ENTRY main {
  a = c128[1,70000] parameter(0)
  b = c128[70000,2] parameter(1)
  ROOT d = c128[1,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})"),
                                diags);
  ASSERT_TRUE(loaded.module);
  auto target = target::loadTarget("v5e", diags);
  auto gen = generateLlo(*loaded.module, *target, CodegenOptions{}, diags);
  ASSERT_TRUE(gen);
  EXPECT_NE(gen->llo.find(" chunk=1048576\n"), std::string::npos);
  EXPECT_NE(gen->llo.find(" chunk=71424\n"), std::string::npos);
}

TEST(Complex, DotsAndConvolutionsOfOtherResultTypes) {
  // The interpreter converts both operands to the type it computes in (the
  // result's) and sums there: narrower operands of a complex result become
  // complex, complex operands of a c128 result are widened, of a c64 one
  // rounded; a real or integer result takes the real parts, a pred result
  // is an or of ands of z != 0.
  const char* const kCases[] = {
      "a = f32[7,5] parameter(0)\n  b = c64[5,300] parameter(1)\n"
      "  ROOT d = c64[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "a = c64[7,5] parameter(0)\n  b = c64[5,300] parameter(1)\n"
      "  ROOT d = c128[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "a = c128[7,5] parameter(0)\n  b = s32[5,300] parameter(1)\n"
      "  ROOT d = c64[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "a = c128[7,5] parameter(0)\n  b = c128[5,300] parameter(1)\n"
      "  ROOT d = f64[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "a = c64[7,5] parameter(0)\n  b = c64[5,300] parameter(1)\n"
      "  ROOT d = s32[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "a = c64[7,2] parameter(0)\n  b = c128[2,300] parameter(1)\n"
      "  ROOT d = pred[7,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "x = f64[2,9,3] parameter(0)\n  k = c64[3,3,4] parameter(1)\n"
      "  ROOT c = c128[2,9,4] convolution(x, k), window={size=3 pad=2_0}, dim_labels=b0f_0io->b0f",
      "x = c128[2,9,3] parameter(0)\n  k = c128[3,3,4] parameter(1)\n"
      "  ROOT c = s64[2,7,4] convolution(x, k), window={size=3}, dim_labels=b0f_0io->b0f",
  };
  for (const char* c : kCases) {
    std::string text = std::string("HloModule m\nENTRY main {\n  ") + c + "\n}\n";
    EXPECT_EQ(compareComplex(text), "") << text;
  }
}

TEST(Complex, GeluAndGemmCustomCalls) {
  // The interpreter converts complex values to f64 by their real part for
  // GELU and for the gemm's alpha/beta scaling, and back with imaginary +0;
  // the unscaled gemm is a complex dot. GELU's f64 erf and exp are
  // expanded into pair rows (kernels/math_f64.cpp): within 4 ulps; the
  // rest bit-exact.
  for (const char* t : {"c64", "c128"}) {
    for (const char* target : {"AwsNeuronGelu", "AwsNeuronGeluBackward"}) {
      std::string text = fmt::format(R"(HloModule m
ENTRY main {{
  a = {0}[2100] parameter(0)
  ROOT g = {0}[2100] custom-call(a), custom_call_target="{1}"
}})",
                                     t, target);
      if (std::string_view(t) == "c64") {
        EXPECT_EQ(compareComplex(text, 5, {}, 4), "") << t << " " << target;
      } else {  // x (1 + erf) cancels for x < 0: an absolute bound
        E2eRun r = compileAndCompare(text);
        ASSERT_EQ(r.error, "");
        EXPECT_LE(r.maxErr, 1e-15) << t << " " << target << ": " << r.where;
      }
    }
    const char* dims = R"("dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]})";
    EXPECT_EQ(compareComplex(fmt::format(R"(HloModule m
ENTRY main {{
  b = {0}[9,33] parameter(0)
  c = {0}[33,200] parameter(1)
  ROOT n = {0}[9,200] custom-call(b, c), custom_call_target="__cublas$gemm", backend_config={{"gemm_backend_config":{{{1}}}}}
}})",
                                         t, dims)),
              "")
        << t;
    EXPECT_EQ(compareComplex(fmt::format(R"(HloModule m
ENTRY main {{
  b = {0}[9,33] parameter(0)
  c = {0}[33,200] parameter(1)
  d = {0}[9,200] parameter(2)
  ROOT m = {0}[9,200] custom-call(b, c, d), custom_call_target="__cublas$gemm", backend_config={{"gemm_backend_config":{{"alpha_real":0.75,"beta":-1.5,{1}}}}}
}})",
                                         t, dims)),
              "")
        << t;
  }
}

TEST(Complex, BitcastConverts) {
  // A complex element is its parts' bytes (real first), so every bitcast
  // to or from complex (the verifier allows complex <-> complex and real
  // types of the same width) is an alias of the same memory; the results
  // feed arithmetic to show the bytes are read as the new type.
  const char* const kCases[] = {
      "a = c128[300] parameter(0)\n  b = c64[300,2] bitcast-convert(a)\n"
      "  ROOT r = c64[300,2] multiply(b, b)",
      "a = c64[300,2] parameter(0)\n  b = c128[300] bitcast-convert(a)\n"
      "  ROOT r = c128[300] multiply(b, b)",
      "a = c64[300] parameter(0)\n  b = s64[300] bitcast-convert(a)\n"
      "  ROOT r = s64[300] add(b, b)",
      "a = f64[300] parameter(0)\n  b = c64[300] bitcast-convert(a)\n"
      "  ROOT r = c64[300] negate(b)",
  };
  for (const char* c : kCases) {
    std::string text = std::string("HloModule m\nENTRY main {\n  ") + c + "\n}\n";
    EXPECT_EQ(compareComplex(text), "") << text;
  }
}

TEST(Complex, WhileLoopCarriesComplexState) {
  // Complex arithmetic in a loop body: the state is multiplied and shifted
  // by a loop-invariant operand each trip (tanh is an expansion: within 24
  // epsilons of the interpreter, normwise).
  EXPECT_EQ(compareComplex(R"(HloModule m
cond {
  s = (s32[], c128[300], c128[300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], c128[300], c128[300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = c128[300] get-tuple-element(s), index=1
  y = c128[300] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  m = c128[300] multiply(x, y)
  t = c128[300] tanh(m)
  x2 = c128[300] subtract(t, y)
  ROOT r = (s32[], c128[300], c128[300]) tuple(j, x2, y)
}
ENTRY main {
  x = c128[300] parameter(0)
  y = c128[300] parameter(1)
  z = s32[] constant(0)
  init = (s32[], c128[300], c128[300]) tuple(z, x, y)
  w = (s32[], c128[300], c128[300]) while(init), condition=cond, body=body
  ROOT out = c128[300] get-tuple-element(w), index=1
})",
                           5, {}, 24),
            "");
}

TEST(Complex, Iota) {
  for (const char* t : {"c64", "c128"})
    EXPECT_EQ(compareComplex(fmt::format(R"(HloModule m
ENTRY main {{
  ROOT i = {0}[3,1500] iota(), iota_dimension=1
}})",
                                         t)),
              "")
        << t;
}

}  // namespace
}  // namespace tpu::codegen
