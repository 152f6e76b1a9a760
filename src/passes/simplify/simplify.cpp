// Registration of the simplification passes and the `simplify` pipeline.
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

std::unique_ptr<PassPipeline> createSimplifyPipeline(const SimplifyOptions& options) {
  auto pipeline = std::make_unique<PassPipeline>("simplify", options.maxIterations);
  pipeline->add(std::make_unique<CallInlinePass>());
  pipeline->add(std::make_unique<ZeroElementsPass>());
  pipeline->add(std::make_unique<AlgsimpPass>(options.algsimp));
  pipeline->add(std::make_unique<ConstantFoldingPass>(options.constantFolding));
  pipeline->add(std::make_unique<TupleSimplifyPass>());
  pipeline->add(std::make_unique<WhileSimplifyPass>());
  pipeline->add(std::make_unique<CsePass>());
  pipeline->add(std::make_unique<DcePass>());
  return pipeline;
}

void registerSimplifyPasses(PassRegistry& registry) {
  registry.add({"algsimp",
                "Algebraic simplification: identities, absorbing elements, chains of views and converts, transposes "
                "folded into dots, canonical concatenate/pad/slice, compare/select identities, reduce of broadcast "
                "(exact rewrites only)",
                [] { return std::make_unique<AlgsimpPass>(); }});
  registry.add({"algsimp-layout",
                "algsimp for modules with assigned layouts: also turns reshapes and transposes that move no byte into "
                "bitcasts",
                [] { return std::make_unique<AlgsimpPass>(AlgsimpOptions{.layoutSensitive = true}); }});
  registry.add({"algsimp-unsafe",
                "algsimp plus value-changing float rewrites (x/c -> x*(1/c), pow(x,2) -> x*x, x*0 -> 0, x+0 -> x, "
                "A*C+B*C -> (A+B)*C): results may differ in the last bits",
                [] { return std::make_unique<AlgsimpPass>(AlgsimpOptions{.valueChanging = true}); }});
  registry.add({"call-inline",
                "Replace every call, and every conditional whose branch is a constant, by a copy of the body it runs",
                [] { return std::make_unique<CallInlinePass>(); }});
  registry.add({"constant-folding",
                "Evaluate instructions of constant operands with the reference interpreter (results up to 1M "
                "elements; never rng, side effects, broadcast or iota)",
                [] { return std::make_unique<ConstantFoldingPass>(); }});
  registry.add({"cse", "Merge equal constants, iotas and instructions (commutative operands in either order)",
                [] { return std::make_unique<CsePass>(); }});
  registry.add({"dce", "Remove instructions whose values are unused and computations nothing calls",
                [] { return std::make_unique<DcePass>(); }});
  registry.add({"simplify",
                "The simplification pipeline: call-inline, zero-elements, algsimp, constant-folding, tuple-simplify, "
                "while-simplify, cse, dce, repeated to a fixed point (at most 16 rounds)",
                [] { return createSimplifyPipeline(); }});
  registry.add({"tuple-simplify", "Collapse tuple / get-tuple-element round trips",
                [] { return std::make_unique<TupleSimplifyPass>(); }});
  registry.add({"while-simplify",
                "Remove loops that run 0 times, inline loops that run once, drop unused loop-carried values, hoist "
                "loop-invariant instructions",
                [] { return std::make_unique<WhileSimplifyPass>(); }});
  registry.add({"zero-elements", "Replace instructions whose result has no elements by constants",
                [] { return std::make_unique<ZeroElementsPass>(); }});
}

}  // namespace tpu::passes::simplify
