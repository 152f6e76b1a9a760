// flatten-call-graph: gives every call site of a computation executed in
// sequence with its caller (while condition/body, conditional branch, call,
// fusion, async-start) a computation of its own, cloning it for each extra
// site (`name.clone`, `name.clone.1`, ...). Computations applied per element
// (to_apply of reduce, sort, map, scatter, all-reduce...) stay shared: they
// are values, not control flow. Afterwards the sequential call graph is a
// tree, which is what inlining code generators need.
#pragma once

#include "passes/pass.h"

namespace tpu::passes {

class FlattenCallGraphPass : public Pass {
 public:
  std::string_view name() const override { return "flatten-call-graph"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

}  // namespace tpu::passes
