#include "passes/testing/random_hlo.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_set>
#include <vector>

namespace tpu::passes::testing {

namespace {

using Dims = std::vector<int64_t>;

constexpr size_t kWindow = 48;
const std::vector<int64_t> kScalar;

struct Value {
  std::string name;
  std::string type;  // "f32", "s32", "pred", "bf16"
  Dims dims;
};

std::string shapeText(const std::string& type, const Dims& dims) {
  std::string s = fmt::format("{}[{}]", type, fmt::join(dims, ","));
  if (!dims.empty()) {
    Dims layout(dims.size());
    std::iota(layout.rbegin(), layout.rend(), 0);
    s += fmt::format("{{{}}}", fmt::join(layout, ","));
  }
  return s;
}

std::string shapeText(const Value& v) { return shapeText(v.type, v.dims); }

int64_t product(const Dims& d) { return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>()); }

class Generator {
 public:
  Generator(uint64_t seed, const RandomHloOptions& options) : state_(seed * 0x9E3779B97F4A7C15ULL + 1), options_(options) {}

  std::string run(uint64_t seed);

 private:
  // SplitMix64: fixed, portable stream.
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int64_t uniform(int64_t n) { return n <= 1 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return uniform(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(uniform(static_cast<int64_t>(v.size())))]; }

  Dims randomDims() {
    Dims d(static_cast<size_t>(uniform(options_.maxRank + 1)));
    for (int64_t& x : d) x = 1 + uniform(options_.maxDimension);
    return d;
  }
  std::string fresh(const std::string& base) { return fmt::format("{}.{}", base, counter_++); }

  // Emits `name = shape op(args)attrs` into the current body; returns the value.
  Value emit(const std::string& op, const std::string& type, const Dims& dims, const std::vector<Value>& args,
             const std::string& attrs = "") {
    Value v{fresh(op == "get-tuple-element" ? "gte" : op), type, dims};
    std::vector<std::string> names;
    for (const Value& a : args) {
      names.push_back("%" + a.name);
      used_.insert(a.name);
    }
    body_ += fmt::format("  %{} = {} {}({}){}\n", v.name, shapeText(v), op, fmt::join(names, ", "), attrs);
    return v;
  }
  Value constantScalar(const std::string& type, const std::string& text) {
    Value v{fresh("constant"), type, {}};
    body_ += fmt::format("  %{} = {}[] constant({})\n", v.name, type, text);
    return v;
  }
  Value splat(const std::string& type, const std::string& text, const Dims& dims) {
    Value c = constantScalar(type, text);
    if (dims.empty()) return c;
    return emit("broadcast", type, dims, {c}, ", dimensions={}");
  }
  Value constantArray(const std::string& type, const Dims& dims) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < product(dims); ++i)
      items.push_back(type == "pred" ? (chance(50) ? "true" : "false") : fmt::format("{}", uniform(9) - 4));
    // Nested braces, row-major.
    std::function<std::string(size_t, int64_t&)> nest = [&](size_t d, int64_t& k) -> std::string {
      if (d == dims.size()) return items[static_cast<size_t>(k++)];
      std::vector<std::string> parts;
      for (int64_t i = 0; i < dims[d]; ++i) parts.push_back(nest(d + 1, k));
      return "{" + fmt::format("{}", fmt::join(parts, ", ")) + "}";
    };
    int64_t k = 0;
    Value v{fresh("constant"), type, dims};
    body_ += fmt::format("  %{} = {} constant({})\n", v.name, shapeText(v), nest(0, k));
    return v;
  }

  Value newParameter(const std::string& type, const Dims& dims) {
    Value v{fmt::format("p{}", params_.size()), type, dims};
    paramTexts_.push_back(fmt::format("{}: {}", v.name, shapeText(v.type, v.dims)));
    body_ += fmt::format("  %{} = {} parameter({})\n", v.name, shapeText(v), params_.size());
    params_.push_back(v);
    pool_.push_back(v);
    return v;
  }
  // A value of the given type (and dims when given), made from the pool.
  Value valueOf(const std::string& type, const Dims* dims);
  Value convertTo(const Value& v, const std::string& type) {
    if (v.type == type) return v;
    return emit("convert", type, v.dims, {v});
  }
  Value reshapeTo(const Value& v, const Dims& dims) {
    if (v.dims == dims) return v;
    return emit("reshape", v.type, dims, {v});
  }

  void step();
  void elementwise();
  void plantIdentity();
  void viewChain();
  void reduce();
  void dot();
  void concatOrPad();
  void compareSelect();
  void loop();
  void call();
  std::string reducer(const std::string& type, const std::string& op);

  uint64_t state_;
  RandomHloOptions options_;
  int counter_ = 0;
  std::string body_;
  std::string helpers_;
  std::vector<Value> pool_;
  std::unordered_set<std::string> used_;  // values some instruction reads
  std::vector<Value> params_;
  std::vector<std::string> paramTexts_;
};

Value Generator::valueOf(const std::string& type, const Dims* dims) {
  // Recent values only: long programs stay linear to generate, and
  // values are used near where they are made, as in real programs.
  std::vector<Value> candidates;
  for (size_t i = pool_.size() > kWindow ? pool_.size() - kWindow : 0; i < pool_.size(); ++i)
    if (!dims || pool_[i].dims == *dims) candidates.push_back(pool_[i]);
  if (candidates.empty() || chance(10)) {
    Dims d = dims ? *dims : randomDims();
    if (chance(25)) return splat(type, type == "pred" ? "true" : fmt::format("{}", uniform(5) - 2), d);
    return newParameter(type, d);
  }
  Value v = pick(candidates);
  if (v.type == type) return v;
  if (type == "pred") return emit("compare", "pred", v.dims, {v, splat(v.type, "0", v.dims)}, ", direction=GT");
  if (v.type == "pred") return convertTo(v, type);
  return convertTo(v, type);
}

std::string Generator::reducer(const std::string& type, const std::string& op) {
  std::string name = fresh(op + "_" + type);
  helpers_ += fmt::format("%{0} (a: {1}[], b: {1}[]) -> {1}[] {{\n  %a = {1}[] parameter(0)\n  %b = {1}[] parameter(1)\n"
                          "  ROOT %r = {1}[] {2}(%a, %b)\n}}\n\n",
                          name, type, op);
  return name;
}

void Generator::elementwise() {
  static const std::vector<std::string> kTypes = {"f32", "f32", "s32", "bf16"};
  std::string type = pick(kTypes);
  Value a = valueOf(type, nullptr);
  if (chance(30)) {
    std::vector<std::string> ops = {"negate", "abs", "exponential", "sqrt", "tanh", "floor"};
    if (type == "s32") ops = {"negate", "abs", "not"};
    pool_.push_back(emit(pick(ops), type, a.dims, {a}));
    return;
  }
  Value b = valueOf(type, &a.dims);
  std::vector<std::string> ops = {"add", "subtract", "multiply", "maximum", "minimum", "divide"};
  if (type == "s32") ops = {"add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor"};
  pool_.push_back(emit(pick(ops), type, a.dims, {a, b}));
}

void Generator::plantIdentity() {
  std::string type = chance(60) ? "f32" : "s32";
  Value x = valueOf(type, nullptr);
  bool isFloat = type == "f32";
  switch (uniform(15)) {
    case 0: pool_.push_back(emit("multiply", type, x.dims, {x, splat(type, "1", x.dims)})); break;
    case 9: pool_.push_back(emit("multiply", type, x.dims, {x, splat(type, "0", x.dims)})); break;  // -0 for x < 0
    case 10: pool_.push_back(emit("power", type, x.dims, {x, splat(type, "2", x.dims)})); break;
    case 11:  // max with the lowest value
      pool_.push_back(emit("maximum", type, x.dims, {splat(type, isFloat ? "-inf" : "-2147483648", x.dims), x}));
      break;
    case 13: {  // nested selects on one predicate; not of an integer compare
      Value p = emit("compare", "pred", x.dims, {x, valueOf(type, &x.dims)}, ", direction=LT");
      Value inner = emit("select", type, x.dims, {p, valueOf(type, &x.dims), x});
      pool_.push_back(emit("select", type, x.dims, {chance(50) ? emit("not", "pred", x.dims, {p}) : p, x, inner}));
      break;
    }
    case 14: {  // a 1x1 reduce-window
      if (x.dims.empty()) return;
      std::vector<std::string> ones(x.dims.size(), "1");
      Value init = constantScalar(type, "1");
      pool_.push_back(emit("reduce-window", type, x.dims, {x, init},
                           fmt::format(", window={{size={}}}, to_apply=%{}", fmt::join(ones, "x"), reducer(type, "maximum"))));
      break;
    }
    case 12: {  // dynamic-slice at constant starts, some out of range (clamped)
      if (x.dims.empty()) return;
      std::vector<Value> operands{x};
      Dims sizes;
      for (int64_t d : x.dims) {
        operands.push_back(constantScalar("s32", fmt::format("{}", uniform(d + 3) - 1)));
        sizes.push_back(1 + uniform(d));
      }
      pool_.push_back(emit("dynamic-slice", type, sizes, operands,
                           fmt::format(", dynamic_slice_sizes={{{}}}", fmt::join(sizes, ","))));
      break;
    }
    case 1: pool_.push_back(emit("add", type, x.dims, {splat(type, isFloat ? "-0" : "0", x.dims), x})); break;
    case 2: pool_.push_back(emit("add", type, x.dims, {x, splat(type, "0", x.dims)})); break;  // kept for floats
    case 3: pool_.push_back(emit("divide", type, x.dims, {x, splat(type, isFloat ? "0.25" : "1", x.dims)})); break;
    case 4: pool_.push_back(emit("subtract", type, x.dims, {x, x})); break;
    case 5: pool_.push_back(emit("negate", type, x.dims, {emit("negate", type, x.dims, {x})})); break;
    case 6: {  // the same expression twice, commuted
      Value y = valueOf(type, &x.dims);
      pool_.push_back(emit("add", type, x.dims, {x, y}));
      pool_.push_back(emit("add", type, x.dims, {y, x}));
      break;
    }
    case 7: {  // constant subexpression
      Value c = constantArray(type == "f32" ? "f32" : "s32", x.dims);
      Value d = emit("multiply", c.type, c.dims, {c, splat(c.type, "3", c.dims)});
      pool_.push_back(emit("add", type, x.dims, {x, convertTo(d, type)}));
      break;
    }
    default: {  // tuple round trip
      Value y = valueOf("s32", nullptr);
      Value t{fresh("tuple"), "", {}};
      body_ += fmt::format("  %{} = ({}, {}) tuple(%{}, %{})\n", t.name, shapeText(x), shapeText(y), x.name, y.name);
      Value g{fresh("gte"), x.type, x.dims};
      body_ += fmt::format("  %{} = {} get-tuple-element(%{}), index=0\n", g.name, shapeText(g), t.name);
      pool_.push_back(g);
      break;
    }
  }
}

void Generator::viewChain() {
  Value x = valueOf(chance(70) ? "f32" : "s32", nullptr);
  switch (uniform(6)) {
    case 0: {  // reshape chain, sometimes back to the start
      Value flat = reshapeTo(x, {product(x.dims)});
      pool_.push_back(chance(50) ? reshapeTo(flat, x.dims) : reshapeTo(flat, {1, product(x.dims)}));
      break;
    }
    case 1: {  // transpose pair
      Dims perm(x.dims.size());
      std::iota(perm.begin(), perm.end(), 0);
      for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[static_cast<size_t>(uniform(static_cast<int64_t>(i)))]);
      Dims td;
      for (int64_t p : perm) td.push_back(x.dims[static_cast<size_t>(p)]);
      Value t = emit("transpose", x.type, td, {x}, fmt::format(", dimensions={{{}}}", fmt::join(perm, ",")));
      if (chance(50)) {
        Dims inv(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
        t = emit("transpose", x.type, x.dims, {t}, fmt::format(", dimensions={{{}}}", fmt::join(inv, ",")));
      }
      pool_.push_back(t);
      break;
    }
    case 2: {  // broadcast of a broadcast
      Dims d1 = x.dims;
      d1.insert(d1.begin(), 1 + uniform(3));
      Dims map1(x.dims.size());
      std::iota(map1.begin(), map1.end(), 1);
      Value b1 = emit("broadcast", x.type, d1, {x}, fmt::format(", dimensions={{{}}}", fmt::join(map1, ",")));
      if (d1.size() < 4 && chance(60)) {
        Dims d2 = d1;
        d2.push_back(2);
        Dims map2(d1.size());
        std::iota(map2.begin(), map2.end(), 0);
        b1 = emit("broadcast", x.type, d2, {b1}, fmt::format(", dimensions={{{}}}", fmt::join(map2, ",")));
      }
      pool_.push_back(b1);
      break;
    }
    case 3: {  // slice of a slice
      if (x.dims.empty()) return;
      auto sliceOf = [&](const Value& v) {
        std::vector<std::string> parts;
        Dims out;
        for (int64_t d : v.dims) {
          int64_t start = uniform(d), stride = 1 + uniform(2);
          int64_t limit = start + 1 + uniform(d - start);
          parts.push_back(fmt::format("[{}:{}:{}]", start, limit, stride));
          out.push_back((limit - start + stride - 1) / stride);
        }
        return emit("slice", v.type, out, {v}, fmt::format(", slice={{{}}}", fmt::join(parts, ", ")));
      };
      Value s = sliceOf(x);
      pool_.push_back(chance(50) ? sliceOf(s) : s);
      break;
    }
    case 4: {  // convert chain: widening then back, or narrowing then widening
      Value w = convertTo(x, x.type == "f32" ? (chance(50) ? "f64" : "bf16") : "s32");
      pool_.push_back(convertTo(w, x.type));
      break;
    }
    default: {  // iota, or a transpose moving only size-1 dims
      Dims d = randomDims();
      if (d.empty()) d = {3};
      pool_.push_back(emit("iota", "s32", d, {}, fmt::format(", iota_dimension={}", uniform(static_cast<int64_t>(d.size())))));
      Dims withOne = x.dims;
      withOne.insert(withOne.begin(), 1);
      Value r = reshapeTo(x, withOne);
      if (withOne.size() >= 2) {
        Dims perm(withOne.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::swap(perm[0], perm[1]);
        Dims td;
        for (int64_t p : perm) td.push_back(withOne[static_cast<size_t>(p)]);
        pool_.push_back(emit("transpose", x.type, td, {r}, fmt::format(", dimensions={{{}}}", fmt::join(perm, ","))));
      }
      break;
    }
  }
}

void Generator::reduce() {
  std::string type = chance(60) ? "f32" : "s32";
  Value x = valueOf(type, nullptr);
  if (x.dims.empty()) return;
  bool ofBroadcast = chance(40);
  if (ofBroadcast) {  // reduce of a broadcast, mostly along a dimension it adds
    Dims d = x.dims;
    int64_t added = chance(50) ? 2 : 1;
    for (int64_t k = 0; k < added; ++k) d.insert(d.begin(), 1 + uniform(3));
    Dims map(x.dims.size());
    std::iota(map.begin(), map.end(), added);
    x = emit("broadcast", type, d, {x}, fmt::format(", dimensions={{{}}}", fmt::join(map, ",")));
  }
  int64_t dim = chance(ofBroadcast ? 70 : 30) ? 0 : uniform(static_cast<int64_t>(x.dims.size()));
  Dims out = x.dims;
  out.erase(out.begin() + dim);
  std::string op = pick(std::vector<std::string>{"add", "maximum", "minimum"});
  Value init = constantScalar(type, op == "add" ? "0" : (op == "maximum" ? "-1000" : "1000"));
  std::string r = reducer(type, op);
  pool_.push_back(emit("reduce", type, out, {x, init}, fmt::format(", dimensions={{{}}}, to_apply=%{}", dim, r)));
}

void Generator::dot() {
  int64_t m = 1 + uniform(5), k = 1 + uniform(6), n = 1 + uniform(5);
  std::string type = chance(70) ? "f32" : "s32";
  Dims ad{m, k};
  Value a = valueOf(type, &ad);
  if (chance(50)) {  // rhs given transposed: transpose folding applies
    Dims bt{n, k};
    Value b = valueOf(type, &bt);
    Value t = emit("transpose", type, {k, n}, {b}, ", dimensions={1,0}");
    pool_.push_back(emit("dot", type, {m, n}, {a, t}, ", lhs_contracting_dims={1}, rhs_contracting_dims={0}"));
  } else {
    Dims bd{k, n};
    Value b = valueOf(type, &bd);
    Value d = emit("dot", type, {m, n}, {a, b}, ", lhs_contracting_dims={1}, rhs_contracting_dims={0}");
    if (chance(50)) d = emit("transpose", type, {n, m}, {d}, ", dimensions={1,0}");
    pool_.push_back(d);
  }
}

void Generator::concatOrPad() {
  Value x = valueOf(chance(70) ? "f32" : "s32", nullptr);
  if (x.dims.empty()) return;
  int64_t dim = uniform(static_cast<int64_t>(x.dims.size()));
  if (chance(50)) {
    // Adjacent slices concatenated back (merges into one slice), or two values.
    int64_t cut = uniform(x.dims[static_cast<size_t>(dim)] + 1);
    auto part = [&](int64_t lo, int64_t hi) {
      std::vector<std::string> s;
      Dims out = x.dims;
      for (size_t d = 0; d < x.dims.size(); ++d)
        s.push_back(static_cast<int64_t>(d) == dim ? fmt::format("[{}:{}]", lo, hi) : fmt::format("[0:{}]", x.dims[d]));
      out[static_cast<size_t>(dim)] = hi - lo;
      return emit("slice", x.type, out, {x}, fmt::format(", slice={{{}}}", fmt::join(s, ", ")));
    };
    Value l = part(0, cut), r = part(cut, x.dims[static_cast<size_t>(dim)]);
    pool_.push_back(emit("concatenate", x.type, x.dims, {l, r}, fmt::format(", dimensions={{{}}}", dim)));
  } else {
    std::vector<std::string> p;
    Dims out;
    for (int64_t d : x.dims) {
      int64_t lo = uniform(3) - (d > 1 ? 1 : 0), hi = uniform(3) - (d > 2 ? 1 : 0), interior = chance(20) ? 1 : 0;
      if (chance(30)) lo = hi = interior = 0;
      p.push_back(fmt::format("{}_{}_{}", lo, hi, interior));
      out.push_back(lo + hi + d + (d - 1) * interior);
    }
    Value pad = constantScalar(x.type, "0");
    pool_.push_back(emit("pad", x.type, out, {x, pad}, fmt::format(", padding={}", fmt::join(p, "x"))));
  }
}

void Generator::compareSelect() {
  std::string type = chance(50) ? "f32" : "s32";
  Value a = valueOf(type, nullptr);
  Value b = chance(30) ? a : valueOf(type, &a.dims);
  std::string dir = pick(std::vector<std::string>{"EQ", "NE", "LT", "LE", "GT", "GE"});
  Value p = emit("compare", "pred", a.dims, {a, b}, fmt::format(", direction={}", dir));
  if (chance(30)) p = emit("not", "pred", a.dims, {p});
  if (chance(20)) p = splat("pred", chance(50) ? "true" : "false", a.dims);
  Value c = valueOf(type, &a.dims);
  pool_.push_back(emit("select", type, a.dims, {p, chance(20) ? c : a, c}));
}

void Generator::loop() {
  // for (i = start; i < bound; ++i) x = f(x, w): 0, 1 or a few trips; w is
  // invariant, and an extra counter nothing reads is dead.
  Value x = valueOf("f32", nullptr);
  Value w = valueOf("f32", &x.dims);
  std::string state = fmt::format("(s32[], {0}, {0}, s32[])", shapeText(x));
  std::string name = fresh("loop");
  int64_t bound = uniform(4), start = uniform(3);
  helpers_ += fmt::format(
      "%{0}_body (s: {1}) -> {1} {{\n  %s = {1} parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n"
      "  %x = {2} get-tuple-element(%s), index=1\n  %w = {2} get-tuple-element(%s), index=2\n"
      "  %c = s32[] get-tuple-element(%s), index=3\n  %one = s32[] constant(1)\n  %next = s32[] add(%i, %one)\n"
      "  %ew = {2} tanh(%w)\n  %m = {2} multiply(%x, %ew)\n  %c2 = s32[] add(%c, %one)\n"
      "  ROOT %t = {1} tuple(%next, %m, %w, %c2)\n}}\n\n"
      "%{0}_cond (s: {1}) -> pred[] {{\n  %s = {1} parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n"
      "  %n = s32[] constant({3})\n  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}}\n\n",
      name, state, shapeText(x), bound);
  Value s = constantScalar("s32", fmt::format("{}", start));
  Value init{fresh("init"), "", {}};
  body_ += fmt::format("  %{} = {} tuple(%{}, %{}, %{}, %{})\n", init.name, state, s.name, x.name, w.name, s.name);
  Value l{fresh("while"), "", {}};
  body_ += fmt::format("  %{} = {} while(%{}), condition=%{}_cond, body=%{}_body\n", l.name, state, init.name, name, name);
  Value g{fresh("gte"), "f32", x.dims};
  body_ += fmt::format("  %{} = {} get-tuple-element(%{}), index=1\n", g.name, shapeText(g), l.name);
  pool_.push_back(g);
}

void Generator::call() {
  Value x = valueOf("f32", nullptr);
  std::string name = fresh("callee");
  helpers_ += fmt::format("%{0} (a: {1}) -> {1} {{\n  %a = {1} parameter(0)\n  %n = {1} negate(%a)\n"
                          "  ROOT %m = {1} maximum(%a, %n)\n}}\n\n",
                          name, shapeText(x));
  if (chance(50)) {
    pool_.push_back(emit("call", "f32", x.dims, {x}, fmt::format(", to_apply=%{}", name)));
    return;
  }
  // A conditional over the callee and a second branch, its selector a
  // constant (inlined) or computed (kept).
  std::string other = fresh("branch");
  helpers_ += fmt::format("%{0} (a: {1}) -> {1} {{\n  %a = {1} parameter(0)\n  ROOT %e = {1} exponential(%a)\n}}\n\n",
                          other, shapeText(x));
  Value selector = chance(60) ? constantScalar("pred", chance(50) ? "true" : "false")
                              : emit("compare", "pred", {}, {valueOf("s32", &kScalar), constantScalar("s32", "0")},
                                     ", direction=GT");
  pool_.push_back(emit("conditional", "f32", x.dims, {selector, x, x},
                       fmt::format(", true_computation=%{}, false_computation=%{}", name, other)));
}

void Generator::step() {
  int64_t r = uniform(100);
  if (r < 25) return elementwise();
  if (r < 45) return plantIdentity();
  if (r < 62) return viewChain();
  if (r < 70) return reduce();
  if (r < 76) return dot();
  if (r < 84) return concatOrPad();
  if (r < 92) return compareSelect();
  if (r < 96 && options_.loops) return loop();
  if (options_.calls) return call();
  elementwise();
}

std::string Generator::run(uint64_t seed) {
  for (const char* type : {"f32", "f32", "s32"}) newParameter(type, randomDims());
  while (counter_ < options_.instructions) step();
  // The root returns every value nothing reads, so all the work is live
  // (what the passes then remove, they remove by simplifying).
  std::vector<Value> outs;
  for (const Value& v : pool_)
    if (!used_.count(v.name) &&
        std::none_of(params_.begin(), params_.end(), [&](const Value& p) { return p.name == v.name; }))
      outs.push_back(v);
  if (outs.empty()) outs.push_back(pool_.back());
  std::vector<std::string> shapes, names;
  for (const Value& v : outs) {
    shapes.push_back(shapeText(v));
    names.push_back("%" + v.name);
  }
  std::string root = fmt::format("  ROOT %result = ({}) tuple({})\n", fmt::join(shapes, ", "), fmt::join(names, ", "));
  std::vector<std::string> shapeNames;
  for (const Value& v : outs) shapeNames.push_back(fmt::format("{}[{}]", v.type, fmt::join(v.dims, ",")));
  return fmt::format("HloModule random_{}\n\n{}ENTRY %main ({}) -> ({}) {{\n{}{}}}\n", seed, helpers_,
                     fmt::join(paramTexts_, ", "), fmt::join(shapeNames, ", "), body_, root);
}

}  // namespace

std::string generateRandomHlo(uint64_t seed, const RandomHloOptions& options) {
  Generator g(seed, options);
  return g.run(seed);
}

}  // namespace tpu::passes::testing
