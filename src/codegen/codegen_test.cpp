// Unit tests of buffer assignment, and end-to-end tests: HLO text ->
// llo-gen -> assembler -> simulator, compared with the reference
// interpreter on seeded inputs.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "codegen/buffer_assignment.h"
#include "codegen/codegen.h"
#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "llo/text.h"
#include "sim/sim.h"

namespace tpu::codegen {
namespace {

TEST(BufferAssignment, DisjointRangesShareBytes) {
  HeapAssignment h = assignHeap({{0, 1, 1000}, {2, 3, 1000}, {1, 2, 512}});
  // 0 and 1 do not overlap in time: same offset. 2 overlaps both.
  EXPECT_EQ(h.offsets[0], h.offsets[1]);
  EXPECT_NE(h.offsets[2], h.offsets[0]);
  EXPECT_EQ(h.heapBytes, 1024u + 512u);
}

TEST(BufferAssignment, OverlappingRangesDoNotAlias) {
  std::vector<LiveRange> r = {{0, 5, 4096}, {1, 2, 100}, {2, 6, 700}, {3, 4, 1}};
  HeapAssignment h = assignHeap(r);
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = i + 1; j < r.size(); ++j) {
      bool live = r[i].start <= r[j].end && r[j].start <= r[i].end;
      bool bytes = h.offsets[i] < h.offsets[j] + r[j].bytes && h.offsets[j] < h.offsets[i] + r[i].bytes;
      EXPECT_FALSE(live && bytes) << i << " " << j;
    }
  for (uint64_t o : h.offsets) EXPECT_EQ(o % 512, 0u);
}

struct E2eRun {
  std::string error;
  double maxErr = 0;
  std::string where;
  uint64_t cycles = 0;
  sim::SimReport report;
};

hlo::Literal randomLiteral(const hlo::Shape& s, std::mt19937& rng) {
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

void leaves(const hlo::Literal& l, std::vector<const hlo::Literal*>& out) {
  if (l.isTuple())
    for (const auto& e : l.tupleElements()) leaves(e, out);
  else
    out.push_back(&l);
}

E2eRun compileAndCompare(const std::string& text, const std::string& targetName = "v5e",
                      CodegenOptions options = {}, std::vector<hlo::Literal>* given = nullptr) {
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
  sim::SimOptions so;
  so.maxCycles = 2'000'000'000ull;
  auto simmed = sim::simulate(assembled->program, *target, inputs, so, diags);
  if (!simmed) return {"sim: " + messages};
  eval::EvalOptions eo;
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
    for (int64_t k = 0; k < w.elementCount(); ++k) {
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

#define EXPECT_MATCH(text, tol)                                  \
  do {                                                           \
    E2eRun r_ = compileAndCompare(text);                            \
    ASSERT_EQ(r_.error, "");                                     \
    EXPECT_LE(r_.maxErr, tol) << r_.where;                       \
  } while (0)

TEST(EndToEnd, ElementwiseChain) {
  EXPECT_MATCH(R"(HloModule m
ENTRY main {
  x = f32[300,200] parameter(0)
  y = f32[300,200] parameter(1)
  a = f32[300,200] add(x, y)
  c = f32[] constant(2)
  b = f32[300,200] broadcast(c), dimensions={}
  ROOT m = f32[300,200] multiply(a, b)
})",
               0.0);
}

}  // namespace
}  // namespace tpu::codegen
