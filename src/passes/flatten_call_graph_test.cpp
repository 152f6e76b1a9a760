#include "passes/flatten_call_graph.h"

#include <gtest/gtest.h>

#include <map>

#include "hlo/io/hlo_io.h"
#include "hlo/text/printer.h"
#include "passes/test_util.h"
#include "passes/clone.h"

namespace tpu::passes {
namespace {

// A while body, a branch and a called computation each used twice, and a
// reducer shared by two reduces (it must stay shared).
constexpr const char* kShared = R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
inc {
  p = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT r = f32[4] add(p, ones)
}
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] call(x), to_apply=inc
  ROOT t = (s32[], f32[4]) tuple(j, y)
}
ENTRY main {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  t0 = (s32[], f32[4]) tuple(z, x)
  w0 = (s32[], f32[4]) while(t0), condition=cond, body=body
  w1 = (s32[], f32[4]) while(w0), condition=cond, body=body
  q = pred[] constant(true)
  c = f32[4] conditional(q, x, x), true_computation=inc, false_computation=inc
  zero = f32[] constant(0)
  r0 = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  r1 = f32[] reduce(c, zero), dimensions={0}, to_apply=add
  y = f32[4] get-tuple-element(w1), index=1
  ROOT o = (f32[4], f32[], f32[]) tuple(y, r0, r1)
}
)";

using Parsed = ParsedModule;

Parsed parse(const std::string& text) { return parseModule(text); }

std::vector<std::string> computationNames(const hlo::Module& m) {
  std::vector<std::string> names;
  for (const auto& c : m.computations()) names.push_back(c->name());
  return names;
}

// Sequential call sites per computation must be at most one after the pass.
void expectTree(const hlo::Module& m) {
  std::map<const hlo::Computation*, int> sites;
  for (const auto& c : m.computations())
    for (const auto& in : c->instructions()) {
      hlo::Opcode op = in->opcode();
      if (op == hlo::Opcode::While || op == hlo::Opcode::Conditional || op == hlo::Opcode::Call ||
          op == hlo::Opcode::Fusion || op == hlo::Opcode::AsyncStart)
        for (const hlo::Computation* callee : in->calledComputations()) ++sites[callee];
    }
  for (const auto& [c, n] : sites) EXPECT_EQ(n, 1) << c->name();
}

TEST(FlattenCallGraph, ClonesSharedControlFlowAndKeepsReducersShared) {
  Parsed p = parse(kShared);
  ASSERT_TRUE(p.module) << p.messages;
  DiagnosticEngine diags;
  FlattenCallGraphPass pass;
  EXPECT_TRUE(pass.run(*p.module, diags));
  EXPECT_FALSE(diags.hasErrors());
  // Callers first: body for w1, then inc for the two branches and the call
  // in body.clone, then cond for w1.
  std::vector<std::string> want = {"add",        "inc",       "cond",        "body",        "main",
                                   "body.clone", "inc.clone", "inc.clone.1", "inc.clone.2", "cond.clone"};
  EXPECT_EQ(computationNames(*p.module), want);
  expectTree(*p.module);
  const hlo::Computation* entry = p.module->entry();
  EXPECT_EQ(entry->findInstruction("w0")->whileBody()->name(), "body");
  EXPECT_EQ(entry->findInstruction("w1")->whileBody()->name(), "body.clone");
  EXPECT_EQ(entry->findInstruction("w1")->whileCondition()->name(), "cond.clone");
  // Reducers stay shared.
  EXPECT_EQ(entry->findInstruction("r0")->toApply(), entry->findInstruction("r1")->toApply());
  // Cloned instructions carry the clone's suffix.
  EXPECT_NE(p.module->findComputation("body.clone")->findInstruction("j.clone"), nullptr);
  DiagnosticEngine vd;
  EXPECT_TRUE(hlo::verifyLoadedModule(*p.module, vd));
  EXPECT_FALSE(vd.hasErrors());
  // A second run finds nothing to do.
  EXPECT_FALSE(pass.run(*p.module, diags));
}

TEST(FlattenCallGraph, IsDeterministic) {
  std::string first;
  for (int i = 0; i < 3; ++i) {
    Parsed p = parse(kShared);
    ASSERT_TRUE(p.module) << p.messages;
    DiagnosticEngine diags;
    FlattenCallGraphPass().run(*p.module, diags);
    std::string text = hlo::printHloText(*p.module);
    if (i == 0) first = text;
    EXPECT_EQ(text, first);
  }
}

TEST(FlattenCallGraph, TreeIsUnchanged) {
  Parsed p = parse(R"(HloModule m
f {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT c = f32[2] call(x), to_apply=f
}
)");
  ASSERT_TRUE(p.module) << p.messages;
  std::string before = hlo::printHloText(*p.module);
  DiagnosticEngine diags;
  EXPECT_FALSE(FlattenCallGraphPass().run(*p.module, diags));
  EXPECT_EQ(hlo::printHloText(*p.module), before);
}

TEST(CloneModule, CopiesEverythingAndIsIndependent) {
  Parsed p = parse(kShared);
  ASSERT_TRUE(p.module) << p.messages;
  std::unique_ptr<hlo::Module> copy = cloneModule(*p.module);
  std::string diff;
  EXPECT_TRUE(hlo::structurallyEqual(*p.module, *copy, &diff)) << diff;
  DiagnosticEngine diags;
  FlattenCallGraphPass().run(*copy, diags);
  EXPECT_EQ(p.module->computations().size(), 5u);  // the original is untouched
  EXPECT_EQ(copy->computations().size(), 10u);
  for (const auto& c : copy->computations())
    for (const auto& in : c->instructions()) {
      EXPECT_EQ(in->parent(), c.get());
      for (const hlo::Computation* callee : in->calledComputations()) EXPECT_EQ(callee->parent(), copy.get());
    }
}

}  // namespace
}  // namespace tpu::passes
