// End-to-end test helper shared by the codegen tests: HLO text -> llo-gen
// -> assembler -> simulator, compared element by element with the
// reference interpreter on seeded (or given) inputs.
#pragma once

#include <cmath>
#include <cstring>
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
  double maxErr = 0;
  int64_t bitMismatches = 0;  // elements whose bytes differ (tells -0 from +0)
  std::string bitWhere = {};  // the first of them
  std::string where = {};
  uint64_t cycles = 0;
  sim::SimReport report = {};
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

inline void leaves(const hlo::Literal& l, std::vector<const hlo::Literal*>& out) {
  if (l.isTuple())
    for (const auto& e : l.tupleElements()) leaves(e, out);
  else
    out.push_back(&l);
}

inline E2eRun compileAndCompare(const std::string& text, const std::string& targetName = "v5e",
                      CodegenOptions options = {}, std::vector<hlo::Literal>* given = nullptr,
                      uint64_t rngSeed = 0) {
  E2eRun run;
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return {"parse: " + messages};
  auto target = target::loadTarget(targetName, diags);
  options.targetSpec = targetName;
  auto gen = generateLlo(*loaded.module, *target, options, diags);
  if (!gen) return {"llo-gen: " + messages};
  SourceFile llo("test.llo", gen->llo);
  auto assembled = llo::assembleLlo(llo, {}, diags);
  if (!assembled) return {"llo-asm: " + messages + "\n" + gen->llo.substr(0, 20000)};
  std::mt19937 rng(1234);
  std::vector<hlo::Literal> args;
  for (int64_t p = 0; p < loaded.module->entry()->parameterCount(); ++p)
    args.push_back(given ? (*given)[static_cast<size_t>(p)]
                         : randomLiteral(loaded.module->entry()->parameter(p)->shape(), rng));
  std::vector<std::string> inputs;
  for (const auto& a : args) {
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
  if (!simmed) return {"sim: " + messages};
  auto expected = eval::evaluate(*loaded.module, args, eo, diags);
  if (!expected) return {"eval: " + messages};
  std::vector<const hlo::Literal*> want;
  leaves(*expected, want);
  if (want.size() != simmed->results.size()) return {"result count differs"};
  for (size_t r = 0; r < want.size(); ++r) {
    const hlo::Literal& w = *want[r];
    hlo::Literal got(w.shape());
    if (got.data().size() != simmed->results[r].size()) return {fmt::format("result {} size differs", r)};
    std::memcpy(got.mutableData().data(), simmed->results[r].data(), got.data().size());
    size_t eb = w.elementCount() ? w.data().size() / static_cast<size_t>(w.elementCount()) : 0;
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
    }
  }
  run.cycles = simmed->report.cycles;
  run.report = simmed->report;
  return run;
}

#define EXPECT_MATCH(text, tol)                \
  do {                                         \
    E2eRun r_ = compileAndCompare(text);       \
    ASSERT_EQ(r_.error, "");                   \
    EXPECT_LE(r_.maxErr, tol) << r_.where;     \
  } while (0)

}  // namespace tpu::codegen
