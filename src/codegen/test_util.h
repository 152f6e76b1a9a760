// End-to-end test helper shared by the codegen tests: HLO text -> llo-gen
// -> assembler -> simulator, compared element by element with the
// reference interpreter on seeded (or given) inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "llo/text.h"
#include "sim/sim.h"

namespace tpu::codegen {

struct E2eRun {
  std::string error = {};
  double maxErr = 0;  // max |got - want| / (1 + |want|)
  // Relative errors, for results whose values are small: max |got - want| /
  // |want| over elements with |want| >= 1% of the largest |want| (smaller
  // ones are judged by the norm), and ||got - want||_2 / ||want||_2.
  double maxRelErr = 0, normRelErr = 0;
  std::string relWhere = {};
  int64_t bitMismatches = 0;  // elements whose bytes differ (tells -0 from +0)
  std::string bitWhere = {};  // the first of them
  std::string where = {};
  uint64_t cycles = 0;
  sim::SimReport report = {};
  std::string llo = {};
  size_t kernels = 0;
};

inline hlo::Literal randomLiteral(const hlo::Shape& s, std::mt19937& rng) {
  hlo::Literal l(s);
  std::uniform_real_distribution<double> f(-1.0, 1.0);
  std::uniform_int_distribution<int> i(-4, 4);
  for (int64_t k = 0; k < l.elementCount(); ++k) {
    if (hlo::isFloatType(s.elementType())) l.setDouble(k, f(rng));
    else if (s.elementType() == hlo::ElementType::Pred) l.setInt(k, i(rng) > 0);
    else if (hlo::isUnsignedIntegerType(s.elementType())) l.setInt(k, i(rng) + 4);
    else l.setInt(k, i(rng));
  }
  return l;
}

// Element k of a float or complex literal from `part`, called once per
// part (real, then imaginary), rounded to the element type.
template <typename Part>
void setFloatElement(hlo::Literal& l, int64_t k, Part&& part) {
  hlo::ElementType t = l.shape().elementType();
  if (t == hlo::ElementType::C64) {
    float p[2] = {static_cast<float>(part()), static_cast<float>(part())};
    std::memcpy(l.rawElement(k), p, sizeof p);
  } else if (t == hlo::ElementType::C128) {
    double p[2] = {part(), part()};
    std::memcpy(l.rawElement(k), p, sizeof p);
  } else {
    l.setDouble(k, part());
  }
}

inline void leaves(const hlo::Literal& l, std::vector<const hlo::Literal*>& out) {
  if (l.isTuple())
    for (const auto& e : l.tupleElements()) leaves(e, out);
  else
    out.push_back(&l);
}

// One program through the whole pipeline: parsed and verified, compiled for
// `targetName`, assembled, simulated on the arguments `makeArgument` builds
// for each entry parameter shape, and evaluated by the interpreter on the
// same arguments. `error` names the first stage that failed.
struct PipelineRun {
  std::string error;
  std::vector<hlo::Literal> args;
  std::optional<hlo::Literal> expected;  // the interpreter's result
  std::vector<std::string> got;          // the simulated result leaves, as bytes
  sim::SimReport report = {};
  std::string llo;  // what llo-gen wrote
  size_t kernels = 0;  // how many kernels it reported
  // The interpreter's result leaves, in the order of `got`.
  std::vector<const hlo::Literal*> want() const {
    std::vector<const hlo::Literal*> out;
    if (expected) leaves(*expected, out);
    return out;
  }
};

template <typename MakeArgument>
PipelineRun runPipeline(const std::string& text, MakeArgument&& makeArgument, const std::string& targetName = "v5e",
                        CodegenOptions options = {}, uint64_t rngSeed = 0) {
  PipelineRun run;
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto fail = [&](const char* stage, const std::string& extra = "") {
    run.error = std::string(stage) + ": " + messages + extra;
    return std::move(run);
  };
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return fail("parse");
  auto target = target::loadTarget(targetName, diags);
  if (!target) return fail("target");
  options.targetSpec = targetName;
  auto gen = generateLlo(*loaded.module, *target, options, diags);
  if (!gen) return fail("llo-gen");
  run.llo = gen->llo;
  run.kernels = gen->stats.kernels.size();
  SourceFile llo("test.llo", gen->llo);
  auto assembled = llo::assembleLlo(llo, {}, diags);
  if (!assembled) return fail("llo-asm", "\n" + gen->llo.substr(0, 20000));
  const hlo::Computation& entry = *loaded.module->entry();
  for (int64_t p = 0; p < entry.parameterCount(); ++p)
    run.args.push_back(makeArgument(static_cast<size_t>(p), entry.parameter(p)->shape()));
  std::vector<std::string> inputs;
  for (const auto& a : run.args) {
    std::vector<const hlo::Literal*> ls;
    leaves(a, ls);
    for (const auto* l : ls) inputs.emplace_back(reinterpret_cast<const char*>(l->data().data()), l->data().size());
  }
  eval::EvalOptions eo;
  eo.rngSeed = rngSeed;
  if (takesRngState(assembled->program, "main")) inputs.push_back(initialRngState(eo.rngSeed));
  sim::SimOptions so;
  so.maxCycles = 2'000'000'000ull;
  auto simmed = sim::simulate(assembled->program, *target, inputs, so, diags);
  if (!simmed) return fail("sim");
  run.expected = eval::evaluate(*loaded.module, run.args, eo, diags);
  if (!run.expected) return fail("eval");
  run.got = std::move(simmed->results);
  run.report = simmed->report;
  std::vector<const hlo::Literal*> want = run.want();
  if (want.size() != run.got.size()) run.error = "result count differs";
  for (size_t r = 0; r < want.size() && run.error.empty(); ++r)
    if (want[r]->data().size() != run.got[r].size()) run.error = fmt::format("result {} size differs", r);
  return run;
}

inline E2eRun compileAndCompare(const std::string& text, const std::string& targetName = "v5e",
                      CodegenOptions options = {}, std::vector<hlo::Literal>* given = nullptr,
                      uint64_t rngSeed = 0) {
  E2eRun run;
  std::mt19937 rng(1234);
  PipelineRun p = runPipeline(
      text,
      [&](size_t i, const hlo::Shape& shape) { return given ? (*given)[i] : randomLiteral(shape, rng); },
      targetName, options, rngSeed);
  if (!p.error.empty()) return {p.error};
  const std::vector<const hlo::Literal*> want = p.want();
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    hlo::Literal got(w.shape());
    std::memcpy(got.mutableData().data(), p.got[r].data(), got.data().size());
    size_t eb = w.elementCount() ? w.data().size() / static_cast<size_t>(w.elementCount()) : 0;
    double scale = 0, diff2 = 0, want2 = 0;
    for (int64_t k = 0; k < w.elementCount(); ++k)
      if (std::isfinite(w.getDouble(k))) scale = std::max(scale, std::fabs(w.getDouble(k)));
    for (int64_t k = 0; k < w.elementCount(); ++k) {
      size_t at = static_cast<size_t>(k) * eb;
      if (std::memcmp(got.data().data() + at, w.data().data() + at, eb) != 0 && run.bitMismatches++ == 0)
        run.bitWhere = fmt::format("result {} element {}: got {} want {}", r, k, got.getDouble(k), w.getDouble(k));
      double a = got.getDouble(k), b = w.getDouble(k);
      double err = (std::isnan(a) && std::isnan(b)) || a == b ? 0.0 : std::fabs(a - b) / (1.0 + std::fabs(b));
      if (std::isnan(err)) err = 1e30;
      if (err > run.maxErr) {
        run.maxErr = err;
        run.where = fmt::format("result {} element {}: got {} want {}", r, k, a, b);
      }
      if (std::isfinite(a) && std::isfinite(b)) {
        diff2 += (a - b) * (a - b);
        want2 += b * b;
        if (std::fabs(b) >= 0.01 * scale && b != 0 && std::fabs(a - b) / std::fabs(b) > run.maxRelErr) {
          run.maxRelErr = std::fabs(a - b) / std::fabs(b);
          run.relWhere = fmt::format("result {} element {}: got {} want {}", r, k, a, b);
        }
      }
    }
    if (want2 > 0) run.normRelErr = std::max(run.normRelErr, std::sqrt(diff2 / want2));
  }
  run.cycles = p.report.cycles;
  run.report = p.report;
  run.llo = std::move(p.llo);
  run.kernels = p.kernels;
  return run;
}

// A reduce of a t[30,700] parameter over `dims` ("1", "0" or "0,1") with
// the binary `op` and the initial value `init` (HLO literal text).
inline std::string reduceModule(const char* t, const char* op, const char* init, const char* dims) {
  std::string_view d(dims);
  const char* out = d == "1" ? "[30]" : d == "0" ? "[700]" : "[]";
  return fmt::format(R"(HloModule m
red {{
  x = {0}[] parameter(0)
  y = {0}[] parameter(1)
  ROOT s = {0}[] {1}(x, y)
}}
ENTRY main {{
  a = {0}[30,700] parameter(0)
  z = {0}[] constant({2})
  ROOT r = {0}{4} reduce(a, z), dimensions={{{3}}}, to_apply=red
}})",
                     t, op, init, dims, out);
}

#define EXPECT_MATCH(text, tol)                \
  do {                                         \
    E2eRun r_ = compileAndCompare(text);       \
    ASSERT_EQ(r_.error, "");                   \
    EXPECT_LE(r_.maxErr, tol) << r_.where;     \
  } while (0)

}  // namespace tpu::codegen
