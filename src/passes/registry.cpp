#include "passes/registry.h"

#include "passes/flatten_call_graph.h"
#include "passes/pass.h"
#include "passes/strip_metadata.h"

namespace tpu::passes {

void registerAllPasses() {
  static bool done = false;
  if (done) return;
  done = true;
  PassRegistry& registry = PassRegistry::global();
  registry.add({"flatten-call-graph",
                "Clone computations called from several while/conditional/call/fusion/async sites, one per site",
                [] { return std::make_unique<FlattenCallGraphPass>(); }});
  registry.add({"strip-metadata", "Remove op metadata (op_name, source locations) from every instruction",
                [] { return std::make_unique<StripMetadataPass>(); }});
}

}  // namespace tpu::passes
