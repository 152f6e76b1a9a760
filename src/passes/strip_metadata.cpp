#include "passes/strip_metadata.h"

#include "hlo/module.h"

namespace tpu::passes {

namespace {
bool stripSharding(hlo::Sharding& sharding) {
  bool changed = !sharding.metadata.empty();
  sharding.metadata.clear();
  for (hlo::Sharding& element : sharding.tupleElements) changed |= stripSharding(element);
  return changed;
}
}  // namespace

bool StripMetadataPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  for (const auto& computation : module.computations()) {
    for (const auto& instr : computation->instructions()) {
      if (!instr->common().metadata->empty()) {
        instr->common().metadata.reset();
        changed = true;
      }
      if (instr->common().sharding) changed |= stripSharding(*instr->common().sharding);
    }
  }
  return changed;
}

}  // namespace tpu::passes
