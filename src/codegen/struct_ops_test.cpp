// End-to-end tests of the structural ops llo-gen gets by expansion or
// aliasing: topk (expand-topk), batch norm (expand-batch-norm), pred dots and
// convolutions (expand-pred-matmul), domain, bounded dynamic shapes,
// variadic reductions of many operands and rng-bit-generator into pred and
// complex. Every result is compared bit for bit with the interpreter: the
// expansions compute what it computes, in its order and types (batch norm
// entirely in f64, rounded once at the end).
#include <cmath>
#include <limits>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;
using hlo::Literal;
using hlo::Shape;

// Compiles, runs and compares `text` on `args` (seeded random inputs when
// empty); expects no error and identical bytes in every result.
void expectExact(const std::string& text, std::vector<Literal> args = {}) {
  E2eRun r = compileAndCompare(text, "v5e", {}, args.empty() ? nullptr : &args);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.bitMismatches, 0) << r.bitWhere;
  EXPECT_EQ(r.maxErr, 0.0) << r.where;
}

// n floats drawn from a few values with ties, both zeros, both infinities
// and NaNs of both signs.
Literal tiedFloats(ElementType t, std::vector<int64_t> dims, uint32_t seed) {
  Literal l(Shape::array(t, dims));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double pool[] = {0.0, -0.0, 1.5, -1.5, 0.25, inf, -inf, nan, -nan, 3.0, 3.0, -2.0};
  std::mt19937 rng(seed);
  for (int64_t k = 0; k < l.elementCount(); ++k) l.setDouble(k, pool[rng() % std::size(pool)]);
  return l;
}

std::string topkModule(const std::string& t, const std::string& dims, const std::string& outDims, int64_t k,
                       bool largest) {
  return fmt::format(
      "HloModule m\nENTRY main {{\n  x = {0}[{1}] parameter(0)\n"
      "  ROOT r = ({0}[{2}], s32[{2}]) topk(x), k={3}, largest={4}\n}}\n",
      t, dims, outDims, k, largest ? "true" : "false");
}

TEST(TopK, FloatTotalOrderNaNsZerosAndTies) {
  for (bool largest : {true, false}) {
    SCOPED_TRACE(largest);
    expectExact(topkModule("f32", "6,300", "6,7", 7, largest), {tiedFloats(ElementType::F32, {6, 300}, 1)});
    expectExact(topkModule("f32", "2,3,40", "2,3,40", 40, largest),
                {tiedFloats(ElementType::F32, {2, 3, 40}, 2)});
    expectExact(topkModule("bf16", "4,129", "4,129", 129, largest),
                {tiedFloats(ElementType::BF16, {4, 129}, 3)});
    expectExact(topkModule("f64", "5,64", "5,9", 9, largest), {tiedFloats(ElementType::F64, {5, 64}, 4)});
  }
}

TEST(TopK, KeysAreTheValuesAsF64) {
  // u64 values that differ below f64 precision compare equal, as in the
  // interpreter, and then keep index order.
  Literal x(Shape::array(ElementType::U64, {3, 50}));
  std::mt19937 rng(5);
  for (int64_t k = 0; k < x.elementCount(); ++k) x.setUint(k, (uint64_t{1} << 60) + rng() % 64);
  expectExact(topkModule("u64", "3,50", "3,50", 50, true), {x});
  expectExact(topkModule("s8", "7,33", "7,5", 5, false));
  expectExact(topkModule("pred", "300", "20", 20, true));
  expectExact(topkModule("c64", "4,30", "4,6", 6, true));
}

TEST(TopK, EdgeSizes) {
  expectExact(topkModule("s32", "9,1", "9,1", 1, true));
  expectExact(topkModule("u16", "2,2500", "2,3", 3, true));
}

TEST(TopK, CustomCallIsLargestTopK) {
  expectExact(
      "HloModule m\nENTRY main {\n  x = f32[8,200] parameter(0)\n"
      "  ROOT r = (f32[8,3], s32[8,3]) custom-call(x), custom_call_target=\"TopK\"\n}\n",
      {tiedFloats(ElementType::F32, {8, 200}, 6)});
}

// Seeded inputs for a batch norm: x and g in (-2, 2), scale and offset in
// (-1, 1), variance positive (a negative one gives NaN in both, which
// would prove little).
std::vector<Literal> batchNormArgs(const std::string& text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("bn.hlo", text), diags);
  std::vector<Literal> args;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> wide(-2, 2), positive(0.05, 3);
  const hlo::Computation& entry = *loaded.module->entry();
  for (int64_t p = 0; p < entry.parameterCount(); ++p) {
    const Shape& s = entry.parameter(p)->shape();
    Literal l(s);
    bool variance = entry.parameter(p)->name() == "v";
    for (int64_t k = 0; k < l.elementCount(); ++k) l.setDouble(k, variance ? positive(rng) : wide(rng));
    args.push_back(std::move(l));
  }
  return args;
}

std::string batchNormModule(const std::string& kind, const std::string& t, const std::string& dims,
                            int64_t features, int64_t featureIndex) {
  std::string c = fmt::format("{}[{}]", t, features), x = fmt::format("{}[{}]", t, dims);
  std::string head =
      "HloModule m\nENTRY main {\n  x = " + x + " parameter(0)\n  s = " + c + " parameter(1)\n";
  std::string attrs = fmt::format(", epsilon=0.001, feature_index={}\n}}\n", featureIndex);
  if (kind == "training")
    return head + "  o = " + c + " parameter(2)\n  ROOT r = (" + x + ", " + c + ", " + c +
           ") batch-norm-training(x, s, o)" + attrs;
  if (kind == "inference")
    return head + "  o = " + c + " parameter(2)\n  m = " + c + " parameter(3)\n  v = " + c +
           " parameter(4)\n  ROOT r = " + x + " batch-norm-inference(x, s, o, m, v)" + attrs;
  return head + "  m = " + c + " parameter(2)\n  v = " + c + " parameter(3)\n  g = " + x +
         " parameter(4)\n  ROOT r = (" + x + ", " + c + ", " + c + ") batch-norm-grad(x, s, m, v, g)" + attrs;
}

TEST(BatchNorm, BitExactInEveryFloatType) {
  for (const char* kind : {"training", "inference", "grad"}) {
    for (const char* t : {"f32", "bf16", "f16", "f64", "f8e4m3fn"}) {
      SCOPED_TRACE(fmt::format("{} {}", kind, t));
      std::string text = batchNormModule(kind, t, "2,4,3,8", 4, 1);
      expectExact(text, batchNormArgs(text));
    }
  }
}

TEST(BatchNorm, FeatureDimensionAnywhere) {
  for (const char* kind : {"training", "inference", "grad"}) {
    SCOPED_TRACE(kind);
    std::string last = batchNormModule(kind, "f32", "3,5,7,130", 130, 3);
    expectExact(last, batchNormArgs(last));
    std::string first = batchNormModule(kind, "f32", "6,500", 6, 0);
    expectExact(first, batchNormArgs(first));
  }
}

TEST(Expansions, InsideCalledComputations) {
  // Expanded where they stand: a batch norm in a while body, a topk in a
  // fusion (then no longer flat, so inlined) and a pred dot in a call.
  std::string text = R"(HloModule m
cond {
  p = (s32[], f32[4,130]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(2)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4,130]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4,130] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[130] constant({...})
  o = f32[130] constant({...})
  b = (f32[4,130], f32[130], f32[130]) batch-norm-training(x, s, o), epsilon=0.01, feature_index=1
  y = f32[4,130] get-tuple-element(b), index=0
  ROOT t = (s32[], f32[4,130]) tuple(j, y)
}
fused {
  a = f32[4,130] parameter(0)
  ROOT k = (f32[4,3], s32[4,3]) topk(a), k=3, largest=true
}
logical {
  l = pred[4,8] parameter(0)
  r = pred[8,4] parameter(1)
  ROOT d = pred[4,4] dot(l, r), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY main {
  x = f32[4,130] parameter(0)
  l = pred[4,8] parameter(1)
  r = pred[8,4] parameter(2)
  z = s32[] constant(0)
  t = (s32[], f32[4,130]) tuple(z, x)
  w = (s32[], f32[4,130]) while(t), condition=cond, body=body
  y = f32[4,130] get-tuple-element(w), index=1
  k = (f32[4,3], s32[4,3]) fusion(y), kind=kLoop, calls=fused
  d = pred[4,4] call(l, r), to_apply=logical
  ROOT o = ((f32[4,3], s32[4,3]), pred[4,4]) tuple(k, d)
})";
  // Constants: scale 1 + i/130, offset i/260.
  std::string scale = "{", offset = "{";
  for (int i = 0; i < 130; ++i) {
    scale += fmt::format("{}{}", i ? ", " : "", 1.0 + i / 130.0);
    offset += fmt::format("{}{}", i ? ", " : "", i / 260.0);
  }
  text.replace(text.find("{...}"), 5, scale + "}");
  text.replace(text.find("{...}"), 5, offset + "}");
  expectExact(text);
}

TEST(PredMatmul, DotIsOrOfAnds) {
  // 300 products per output: a count would not fit a pred, the OR does.
  expectExact(
      "HloModule m\nENTRY main {\n  x = pred[9,300] parameter(0)\n  y = pred[300,17] parameter(1)\n"
      "  ROOT r = pred[9,17] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  // Sparse operands: many outputs are false.
  Literal x(Shape::array(ElementType::Pred, {4, 64})), y(Shape::array(ElementType::Pred, {64, 40}));
  for (int64_t k = 0; k < x.elementCount(); ++k) x.setInt(k, k % 37 == 0);
  for (int64_t k = 0; k < y.elementCount(); ++k) y.setInt(k, k % 11 == 0);
  expectExact(
      "HloModule m\nENTRY main {\n  x = pred[4,64] parameter(0)\n  y = pred[64,40] parameter(1)\n"
      "  ROOT r = pred[4,40] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      {x, y});
}

TEST(PredMatmul, Convolution) {
  Literal x(Shape::array(ElementType::Pred, {2, 9, 9, 3})), w(Shape::array(ElementType::Pred, {3, 3, 3, 5}));
  for (int64_t k = 0; k < x.elementCount(); ++k) x.setInt(k, k % 13 == 0);
  for (int64_t k = 0; k < w.elementCount(); ++k) w.setInt(k, k % 7 == 0);
  expectExact(
      "HloModule m\nENTRY main {\n  x = pred[2,9,9,3] parameter(0)\n  w = pred[3,3,3,5] parameter(1)\n"
      "  ROOT r = pred[2,9,9,5] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n}\n",
      {x, w});
}

TEST(DynamicShapes, HeldAtTheirBounds) {
  // A dynamic parameter, set-dimension-size, a dot, a transpose and a
  // reduction over the dynamic dimension (integers: exact on every path);
  // get-dimension-size reads bounds.
  expectExact(R"(HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY main {
  x = s32[<=8,130] parameter(0)
  w = s32[130,20] parameter(1)
  n = s32[] constant(5)
  d = s32[<=8,130] set-dimension-size(x, n), dimensions={0}
  p = s32[<=8,20] dot(d, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = s32[20,<=8] transpose(p), dimensions={1,0}
  z = s32[] constant(0)
  r = s32[20] reduce(t, z), dimensions={1}, to_apply=add
  g = s32[] get-dimension-size(t), dimensions={1}
  ROOT o = (s32[20], s32[]) tuple(r, g)
})");
  expectExact(R"(HloModule m
ENTRY main {
  x = s64[4,6] parameter(0)
  a = s32[] constant(3)
  b = s32[] constant(8)
  r = s64[<=3,8] dynamic-reshape(x, a, b)
  ROOT n = s64[<=3,8] negate(r)
})");
}

TEST(Domain, MovesEveryType) {
  for (const char* t : {"f32", "c128", "u64", "pred", "s4"}) {
    SCOPED_TRACE(t);
    expectExact(
        fmt::format("HloModule m\nENTRY main {{\n  x = {0}[3,300] parameter(0)\n"
                    "  d = {0}[3,300] domain(x), domain={{kind=\"sharding\", entry={{maximal device=0}}, "
                    "exit={{replicated}}}}\n  ROOT r = {0}[300,3] transpose(d), dimensions={{1,0}}\n}}\n",
                    t));
  }
}

TEST(GetDimensionSize, WideAndComplexOperands) {
  for (const char* t : {"s64", "u64", "f64", "c64", "c128"}) {
    SCOPED_TRACE(t);
    expectExact(
        fmt::format("HloModule m\nENTRY main {{\n  x = {}[7,300] parameter(0)\n"
                    "  ROOT d = s32[] get-dimension-size(x), dimensions={{1}}\n}}\n",
                    t));
  }
}

// An arg-max over dims `dims` of n operands of the given types: the first
// is the key, the rest ride along with it.
std::string argMaxModule(const std::vector<std::string>& types, const std::string& dims,
                         const std::string& out) {
  size_t n = types.size();
  std::string f = "HloModule m\nf {\n", tupleType, inShapes, results;
  for (size_t i = 0; i < 2 * n; ++i)
    f += fmt::format("  {}{} = {}[] parameter({})\n", i < n ? "a" : "b", i % n, types[i % n], i);
  f += "  p = pred[] compare(a0, b0), direction=GE\n";
  for (size_t i = 0; i < n; ++i) {
    f += fmt::format("  r{0} = {1}[] select(p, a{0}, b{0})\n", i, types[i]);
    tupleType += fmt::format("{}{}[]", i ? ", " : "", types[i]);
    results += fmt::format("{}{}{}", i ? ", " : "", types[i], out);
  }
  f += "  ROOT t = (" + tupleType + ") tuple(";
  for (size_t i = 0; i < n; ++i) f += fmt::format("{}r{}", i ? ", " : "", i);
  f += ")\n}\nENTRY main {\n";
  std::string xs, zs;
  for (size_t i = 0; i < n; ++i) {
    f += fmt::format("  x{} = {}[6,300] parameter({})\n", i, types[i], i);
    xs += fmt::format("x{}, ", i);
  }
  for (size_t i = 0; i < n; ++i) {
    f += fmt::format("  z{} = {}[] parameter({})\n", i, types[i], n + i);
    zs += fmt::format("{}z{}", i ? ", " : "", i);
  }
  f += "  ROOT r = (" + results + ") reduce(" + xs + zs + "), dimensions={" + dims + "}, to_apply=f\n}\n";
  return f;
}

TEST(VariadicReduce, ManyOperandsAnyDimensions) {
  // (The verifier allows one float type per reduce.)
  std::vector<std::string> five = {"f32", "s32", "u8", "s64", "pred"};
  std::vector<std::string> eight = {"s32", "f64", "s64", "u64", "pred", "u16", "s16", "s8"};
  // More operands than registers for folding them all at once: each output
  // is then computed on its own.
  std::vector<std::string> forty, complexPairs;
  const char* cycle[] = {"s32", "f64", "u8", "s64", "pred", "u16", "s4", "u64"};
  for (int i = 0; i < 40; ++i) forty.push_back(cycle[i % 8]);
  for (int i = 0; i < 12; ++i) complexPairs.push_back(i % 2 ? "c128" : "s32");
  for (auto [dims, out] : {std::pair{"1", "[6]"}, std::pair{"0", "[300]"}, std::pair{"0,1", "[]"}}) {
    SCOPED_TRACE(dims);
    expectExact(argMaxModule(five, dims, out));
    expectExact(argMaxModule(eight, dims, out));
    expectExact(argMaxModule(forty, dims, out));
    expectExact(argMaxModule(complexPairs, dims, out));
  }
}

std::string rngModule(const std::string& t, const std::string& algorithm) {
  return fmt::format(
      "HloModule m\nENTRY main {{\n  s = u64[2] parameter(0)\n"
      "  ROOT r = (u64[2], {0}[7,301]) rng-bit-generator(s), algorithm={1}\n}}\n",
      t, algorithm);
}

TEST(RngBitGenerator, PredAndComplexBits) {
  Literal state(Shape::array(ElementType::U64, {2}));
  state.setUint(0, 0x0123456789abcdefull);
  state.setUint(1, 0xfffffffffffffff0ull);  // the counter carries into its high word
  for (const char* t : {"pred", "c64", "c128"}) {
    for (const char* a : {"rng_three_fry", "rng_philox"}) {
      SCOPED_TRACE(fmt::format("{} {}", t, a));
      expectExact(rngModule(t, a), {state});
    }
  }
}

// The interpreter's c128 bits are those of twice as many u64s (they once
// filled only the first half of the buffer and left the rest undefined).
TEST(RngBitGenerator, C128ElementsAreTwoU64Draws) {
  using Bytes = std::pair<std::vector<uint8_t>, std::vector<uint8_t>>;  // state, bits
  auto bits = [](const std::string& type) -> Bytes {
    std::string text = fmt::format(
        "HloModule m\nENTRY main {{\n  s = u64[2] parameter(0)\n"
        "  ROOT r = (u64[2], {}) rng-bit-generator(s), algorithm=rng_philox\n}}\n",
        type);
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("rng.hlo", text), diags);
    Literal state(Shape::array(ElementType::U64, {2}));
    state.setUint(0, 42);
    state.setUint(1, 7);
    std::vector<Literal> args;
    args.push_back(state);
    auto r = eval::evaluate(*loaded.module, args, {}, diags);
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    return {r->tupleElements()[0].data(), r->tupleElements()[1].data()};
  };
  auto complexBits = bits("c128[3,5]"), wordBits = bits("u64[3,5,2]");
  EXPECT_EQ(complexBits, wordBits);
}

}  // namespace
}  // namespace tpu::codegen
