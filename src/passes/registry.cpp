#include "passes/registry.h"

#include "passes/pass.h"
#include "passes/strip_metadata.h"

namespace tpu::passes {

void registerAllPasses() {
  static bool done = false;
  if (done) return;
  done = true;
  PassRegistry& registry = PassRegistry::global();
  registry.add({"strip-metadata", "Remove op metadata (op_name, source locations) from every instruction",
                [] { return std::make_unique<StripMetadataPass>(); }});
}

}  // namespace tpu::passes
