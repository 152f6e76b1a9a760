// The simplification passes of hlo-fuse (XLA's simplification stage, our
// own code): each is a Pass registered by name (registerSimplifyPasses),
// and `simplify` runs them together to a fixed point. None of them changes
// a result unless it is documented as value-changing and off by default
// (see docs/DESIGN.md, "Simplification pipeline").
#pragma once

#include <cstdint>
#include <memory>

#include "passes/pass.h"

namespace tpu::passes::simplify {

// dce: instructions whose value reaches no root and that have no side
// effect; computations nothing reachable from the entry calls. Parameters,
// side-effecting instructions and control predecessors stay.
class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

// cse: equal constants and iotas first, then instructions with the same
// opcode, shape, operands (either order for commutative ops), attributes
// and called computations. Side-effecting ops, parameters, rng, elided
// constants and instructions with control edges are never merged.
class CsePass : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

struct AlgsimpOptions {
  // Rewrites that may change floating-point results (off by default):
  // x/c -> x*(1/c) for any constant c, A*C+B*C -> (A+B)*C, reassociation
  // of constants, x+0 -> x for +0 (which turns -0 into +0).
  bool valueChanging = false;
  // Layouts are assigned (after hlo-layout): reshapes and transposes that
  // only reinterpret the buffer become bitcasts.
  bool layoutSensitive = false;
};

// algsimp: the algebraic simplifier (identities, absorbing elements,
// chains of views and converts, transposes folded into dots, canonical
// concatenate/pad/slice, compare and select identities, reduce of a
// broadcast, ...). Every rewrite keeps the replaced value's shape and
// layout.
class AlgsimpPass : public Pass {
 public:
  explicit AlgsimpPass(AlgsimpOptions options = {}) : options_(options) {}
  std::string_view name() const override;
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  AlgsimpOptions options_;
};

struct ConstantFoldingOptions {
  // Largest result (and operand) folded, in elements.
  int64_t maxElements = int64_t{1} << 20;
};

// constant-folding: an instruction whose operands are all constants (or
// broadcasts/iotas of them) is evaluated by the reference interpreter and
// replaced by a constant. Never folds rng, side effects, control flow,
// elided constants or results past the size limit, and never expands a
// small constant into a larger one unless the result is small itself.
class ConstantFoldingPass : public Pass {
 public:
  explicit ConstantFoldingPass(ConstantFoldingOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "constant-folding"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  ConstantFoldingOptions options_;
};

// tuple-simplify: get-tuple-element(tuple(...)) -> the element;
// tuple(gte(t,0), ..., gte(t,n-1)) -> t.
class TupleSimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "tuple-simplify"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

// call-inline: every `call`, and every `conditional` whose selector is a
// constant, is replaced by a copy of the body it runs.
class CallInlinePass : public Pass {
 public:
  std::string_view name() const override { return "call-inline"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

// while-simplify: loops that run 0 times become their init, loops that run
// once their body inlined; loop-carried values nothing reads are dropped;
// loop-invariant instructions are hoisted out of the body.
class WhileSimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "while-simplify"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

// zero-elements: an instruction without side effects whose result is an
// array of zero elements becomes a constant of that shape; zero-element
// operands of concatenate are dropped.
class ZeroElementsPass : public Pass {
 public:
  std::string_view name() const override { return "zero-elements"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

struct SimplifyOptions {
  AlgsimpOptions algsimp;
  ConstantFoldingOptions constantFolding;
  // Rounds of the fixed point before giving up (each runs every pass once).
  int maxIterations = 16;
};

// `simplify`: call-inline, then {zero-elements, algsimp, constant-folding,
// tuple-simplify, while-simplify, cse, dce} repeated until none changes the
// module (at most options.maxIterations rounds).
std::unique_ptr<PassPipeline> createSimplifyPipeline(const SimplifyOptions& options = {});

// Adds every pass above (and `simplify`) to `registry`.
void registerSimplifyPasses(PassRegistry& registry);

}  // namespace tpu::passes::simplify
