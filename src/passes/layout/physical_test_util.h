// Test helpers shared by the physical-edges tests (physical_layout_test.cpp,
// physical_reduce_test.cpp): parse a module, check that physical-edges keeps
// its results bit for bit, count the entry's instructions of an opcode.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "hlo/verify/verifier.h"
#include "passes/clone.h"
#include "passes/layout/physical_layout.h"
#include "passes/testing/differential.h"

namespace tpu::passes::layout {

inline std::unique_ptr<hlo::Module> parse(const std::string& text) {
  DiagnosticEngine diags;
  auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
  EXPECT_TRUE(loaded.module);
  return std::move(loaded.module);
}

// Evaluates `m` as given and after physical-edges on physical arguments;
// the results, converted back, are the same bits.
inline void expectSameThroughEdges(const hlo::Module& m, PhysicalEdgeReport* reportOut = nullptr) {
  std::vector<hlo::Literal> args = testing::seededArguments(m, 1);
  DiagnosticEngine diags;
  eval::EvalOptions eo;
  auto want = eval::evaluate(m, args, eo, diags);
  ASSERT_TRUE(want);
  std::unique_ptr<hlo::Module> p = cloneModule(m);
  hlo::ComputationLayout edges = m.entryComputationLayout();
  PhysicalEdgeReport report;
  PhysicalEdgesPass(false, &report).run(*p, diags);
  ASSERT_EQ(diags.errorCount(), 0u);
  expandPhysicalBitcasts(*p);  // the interpreter keeps arrays logical
  ASSERT_TRUE(hlo::verifyLoadedModule(*p, diags)) << hlo::writeModule(*p, hlo::HloEncoding::Text);
  std::vector<hlo::Literal> physArgs;
  for (size_t i = 0; i < args.size(); ++i)
    physArgs.push_back(convertEdgeLiteral(args[i], edges.parameters[i], true));
  auto got = eval::evaluate(*p, physArgs, eo, diags);
  ASSERT_TRUE(got);
  hlo::Literal logical = convertEdgeLiteral(*got, edges.result, false);
  auto diff = testing::bitwiseDifference(*want, logical);
  EXPECT_FALSE(diff) << *diff;
  if (reportOut) *reportOut = report;
}

// Counts the entry's instructions of `op`.
inline int64_t countOps(const hlo::Module& m, hlo::Opcode op) {
  int64_t n = 0;
  for (const auto& in : m.entry()->instructions()) n += in->opcode() == op;
  return n;
}

}  // namespace tpu::passes::layout
