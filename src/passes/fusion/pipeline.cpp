#include "passes/fusion/pipeline.h"

#include "hlo/io/hlo_io.h"
#include "passes/fusion/fusion.h"
#include "passes/pass.h"
#include "passes/driver/registry.h"

namespace tpu::fusion {

bool optimizeModule(hlo::Module& module, const target::TargetDesc& target, DiagnosticEngine& diags, bool verifyEach) {
  passes::registerAllPasses();
  registerFusionPasses();
  passes::PassContext context;
  context.target = target.name;
  context.targetDesc = &target;
  passes::PassManagerOptions options;
  options.verifyEach = verifyEach;
  passes::PassManager pm(options, nullptr, [](const hlo::Module& m, DiagnosticEngine& d) {
    return hlo::verifyLoadedModule(m, d);
  });
  if (!pm.addPipeline(defaultOptimizationPipeline(), diags)) return false;
  pm.setContext(&context);
  return pm.run(module, diags);
}

}  // namespace tpu::fusion
