#include "codegen/codegen.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/lower.h"
#include "llo/text.h"
#include "passes/clone.h"
#include "passes/flatten_call_graph.h"
#include "support/source.h"

namespace tpu::codegen {

std::optional<CodegenResult> generateLlo(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags) {
  // The lowering inlines control-flow callees, so each call site needs a
  // computation of its own; flatten a copy, never the caller's module.
  std::unique_ptr<hlo::Module> flat = passes::cloneModule(module);
  passes::FlattenCallGraphPass().run(*flat, diags);
  return lowerModule(*flat, target, options, diags);
}

std::optional<isa::Program> compileModule(const hlo::Module& module, const target::TargetDesc& target,
                                          const CodegenOptions& options, DiagnosticEngine& diags) {
  CodegenOptions o = options;
  o.targetSpec.clear();  // the assembler is given the target directly
  auto r = generateLlo(module, target, o, diags);
  if (!r) return std::nullopt;
  // Assemble against the given description: write it as the target file.
  SourceFile file(module.name() + ".llo", std::move(r->llo));
  llo::AsmOptions asmOptions;
  asmOptions.target = target.name;
  auto assembled = llo::assembleLlo(file, asmOptions, diags);
  if (!assembled) return std::nullopt;
  return std::move(assembled->program);
}

namespace {
// A JSON string literal (op_name metadata may hold quotes and backslashes).
std::string jsonString(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string renderStatsJson(const CodegenStats& s) {
  std::string out = "{\"hbm\": {";
  out += fmt::format("\"arguments\": {}, \"results\": {}, \"constants\": {}, \"temporaries\": {}, "
                     "\"temporaries_without_reuse\": {}, \"results_in_donated_arguments\": {}, \"peak\": {}}}, "
                     "\"kernels\": [",
                     s.argumentBytes, s.resultBytes, s.constantBytes, s.heapBytes, s.unsharedBytes, s.aliasedBytes,
                     s.peakHbmBytes);
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const KernelStats& k = s.kernels[i];
    out += fmt::format("{}\n  {{\"name\": {}, \"hlo\": {}, \"op_name\": {}, \"kind\": {}, \"flops\": {:.0f}, "
                       "\"hbm_bytes\": {}, \"vmem_bytes\": {}, \"estimated_cycles\": {:.0f}}}",
                       i ? "," : "", jsonString(k.name), jsonString(k.hlo), jsonString(k.opName), jsonString(k.kind),
                       k.flops, k.hbmBytes, k.vmemBytes, k.estimatedCycles);
  }
  out += "\n]}\n";
  return out;
}

std::string renderStatsText(const CodegenStats& s) {
  std::string out = fmt::format("peak HBM: {} bytes (arguments {}, results {}, constants {}, temporaries {}; "
                                "{} without reuse; {} of results in donated arguments)\n",
                                s.peakHbmBytes, s.argumentBytes, s.resultBytes, s.constantBytes, s.heapBytes,
                                s.unsharedBytes, s.aliasedBytes);
  out += fmt::format("{:<32} {:<14} {:>14} {:>12} {:>10} {:>12}\n", "kernel", "kind", "flops", "hbm bytes",
                     "vmem", "est cycles");
  for (const KernelStats& k : s.kernels)
    out += fmt::format("{:<32} {:<14} {:>14.0f} {:>12} {:>10} {:>12.0f}\n", k.name, k.kind, k.flops, k.hbmBytes,
                       k.vmemBytes, k.estimatedCycles);
  return out;
}

}  // namespace tpu::codegen
