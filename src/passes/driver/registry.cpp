#include "passes/driver/registry.h"

#include "passes/expand_batch_norm.h"
#include "passes/expand_pred_matmul.h"
#include "passes/expand_topk.h"
#include "passes/sink_views.h"
#include "passes/flatten_call_graph.h"
#include "passes/layout/layout_assignment.h"
#include "passes/pass.h"
#include "passes/simplify/simplify.h"
#include "passes/strip_metadata.h"

namespace tpu::passes {

void registerAllPasses() {
  static bool done = false;
  if (done) return;
  done = true;
  PassRegistry& registry = PassRegistry::global();
  registry.add({"expand-batch-norm",
                "Rewrite batch-norm-inference/training/grad as f64 elementwise ops, broadcasts and sum reductions",
                [] { return std::make_unique<ExpandBatchNormPass>(); }});
  registry.add({"expand-pred-matmul",
                "Rewrite dots and convolutions with pred results as s32 product counts compared with zero",
                [] { return std::make_unique<ExpandPredMatmulPass>(); }});
  registry.add({"expand-topk",
                "Rewrite topk and custom-call TopK as a stable total-order sort of (key, value, index) and slices",
                [] { return std::make_unique<ExpandTopKPass>(); }});
  registry.add({"flatten-call-graph",
                "Clone computations called from several while/conditional/call/fusion/async sites, one per site",
                [] { return std::make_unique<FlattenCallGraphPass>(); }});
  registry.add({"sink-views",
                "Inside fusions, rewrite transposes, broadcasts, slices and reverses of elementwise chains into the "
                "chains on views of their leaves (cloning shared chains in loop fusions)",
                [] { return std::make_unique<SinkViewsPass>(); }});
  layout::registerLayoutPasses(registry);
  simplify::registerSimplifyPasses(registry);
  registry.add({"strip-metadata", "Remove op metadata (op_name, source locations) from every instruction",
                [] { return std::make_unique<StripMetadataPass>(); }});
}

}  // namespace tpu::passes
