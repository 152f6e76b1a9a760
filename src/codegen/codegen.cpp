#include "codegen/codegen.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>

#include "codegen/lower.h"
#include "llo/text.h"
#include "passes/clone.h"
#include "passes/expand_batch_norm.h"
#include "passes/expand_pred_matmul.h"
#include "passes/expand_topk.h"
#include "passes/sink_views.h"
#include "passes/flatten_call_graph.h"
#include "passes/layout/layout_assignment.h"
#include "passes/layout/physical_layout.h"
#include "support/source.h"

namespace tpu::codegen {

namespace {

// The lowered text as a program of one op per bundle, list-scheduled. The
// text is assembled as it is (its `.target` line, if any, names `target`).
std::optional<llo::Assembled> assembleScheduled(const std::string& name, std::string text,
                                                const target::TargetDesc& target, const std::string& targetSpec,
                                                std::vector<uint32_t>& anchors, llo::ScheduleStats& stats,
                                                DiagnosticEngine& diags) {
  SourceFile file(name + ".llo", std::move(text));
  llo::AsmOptions asmOptions;
  asmOptions.target = targetSpec.empty() ? target.name : targetSpec;
  if (targetSpec.empty()) asmOptions.targetDesc = target;  // a JSON chip has no built-in name to look up
  asmOptions.autoBundle = false;
  auto assembled = llo::assembleLlo(file, asmOptions, diags);
  if (!assembled) return std::nullopt;
  anchors = llo::scheduleProgram(assembled->program, target, &stats);
  return assembled;
}

// Rewrites the code part of the lowered text (after the `.entry` line) as the
// scheduled bundles, keeping the comments, blank lines and labels in front of
// the bundle where the code they introduced now starts.
std::optional<std::string> printScheduled(const std::string& text, const isa::Program& program,
                                          const std::vector<uint32_t>& anchors, DiagnosticEngine& diags) {
  size_t entry = text.find("\n.entry ");
  size_t codeStart = entry == std::string::npos ? std::string::npos : text.find('\n', entry + 1);
  if (codeStart == std::string::npos) {
    diags.error("llo-gen: internal error: no .entry line in the generated text");
    return std::nullopt;
  }
  ++codeStart;
  struct Mark {
    uint32_t at;
    size_t order;
    std::string_view line;
  };
  std::vector<Mark> marks;
  size_t ops = 0;
  for (size_t pos = codeStart; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    bool isOp = line.size() > 2 && line.substr(0, 2) == "  " && line.substr(0, 4) != "  //";
    if (isOp) {
      ++ops;
      continue;
    }
    if (ops >= anchors.size()) break;
    marks.push_back({anchors[ops], marks.size(), line});
  }
  if (ops + 1 != anchors.size()) {
    diags.error(fmt::format("llo-gen: internal error: {} op lines but {} assembled ops", ops, anchors.size() - 1));
    return std::nullopt;
  }
  std::stable_sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.at < b.at; });
  std::string out = text.substr(0, codeStart);
  out.reserve(text.size() + text.size() / 4);
  size_t m = 0;
  llo::InstrPrinter printer(program);
  for (size_t b = 0; b <= program.bundles.size(); ++b) {
    for (; m < marks.size() && marks[m].at == b; ++m) {
      out += marks[m].line;
      out += '\n';
    }
    if (b == program.bundles.size()) break;
    out += "  {";
    const isa::Bundle& bundle = program.bundles[b];
    for (size_t i = 0; i < bundle.instrs.size(); ++i) {
      out += i ? " ; " : " ";
      out += printer.print(bundle.instrs[i]);
    }
    out += " }\n";
  }
  return out;
}

}  // namespace

namespace {
// The lowering inlines control-flow callees, so each call site needs a
// computation of its own; flatten a copy, never the caller's module. Ops
// that are compositions of simpler ones (topk, batch norm, pred dots and
// convolutions) are expanded on the copy first, as XLA does before code
// generation.
std::optional<CodegenResult> lowerFlattened(const hlo::Module& module, const target::TargetDesc& target,
                                            const CodegenOptions& options, DiagnosticEngine& diags) {
  std::unique_ptr<hlo::Module> flat = passes::cloneModule(module);
  size_t errors = diags.errorCount();
  // Entry arguments and results live in HBM in their physical layouts; the
  // kernels in between see logical arrays (relayout copies at the edges).
  const auto [podReplicas, podPartitions] = podDevices(module, options.replicas, options.partitions);
  passes::layout::PhysicalEdgeReport edges;
  if (options.physicalEdges)
    passes::layout::PhysicalEdgesPass(podReplicas * podPartitions > 1, &edges).run(*flat, diags);
  // Arrays live row-major in their logical shape here: bitcasts that
  // reinterpret a layout become the transposes they stand for.
  passes::layout::ExpandLayoutBitcastsPass().run(*flat, diags);
  passes::ExpandTopKPass().run(*flat, diags);
  passes::ExpandBatchNormPass().run(*flat, diags);
  passes::ExpandPredMatmulPass().run(*flat, diags);
  passes::SinkViewsPass().run(*flat, diags);  // views of fused parameters stream as strided DMAs
  if (diags.errorCount() != errors) return std::nullopt;
  passes::FlattenCallGraphPass().run(*flat, diags);
  auto r = lowerModule(*flat, target, options, diags);
  if (r) {
    r->stats.physicalArguments = edges.arguments;
    r->stats.physicalResults = edges.results;
    r->stats.paddingBytes = static_cast<uint64_t>(edges.paddingBytes);
    r->stats.relayouts = edges.names;
  }
  return r;
}
}  // namespace

std::optional<CodegenResult> generateLlo(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags) {
  auto r = lowerFlattened(module, target, options, diags);
  if (!r || options.schedule == llo::ScheduleMode::None) return r;
  std::vector<uint32_t> anchors;
  auto assembled = assembleScheduled(module.name(), r->llo, target, options.targetSpec, anchors, r->schedule, diags);
  if (!assembled) return std::nullopt;
  auto text = printScheduled(r->llo, assembled->program, anchors, diags);
  if (!text) return std::nullopt;
  r->llo = std::move(*text);
  return r;
}

std::string initialRngState(uint64_t seed) {
  // Key = seed ^ (device index << 40) with device 0; the counter starts at 0.
  const uint64_t words[2] = {seed, 0};
  return std::string(reinterpret_cast<const char*>(words), sizeof words);
}

bool takesRngState(const isa::Program& program, std::string_view entry) {
  const isa::Entry* e = program.findEntry(entry);
  if (!e || e->args.empty() || e->args.back() >= program.buffers.size()) return false;
  return program.buffers[e->args.back()].name == kRngStateBuffer;
}

std::optional<isa::Program> compileModule(const hlo::Module& module, const target::TargetDesc& target,
                                          const CodegenOptions& options, DiagnosticEngine& diags,
                                          CodegenStats* statsOut) {
  CodegenOptions o = options;
  o.targetSpec.clear();  // the assembler is given the target directly
  auto r = lowerFlattened(module, target, o, diags);
  if (!r) return std::nullopt;
  if (statsOut) *statsOut = r->stats;
  if (options.schedule == llo::ScheduleMode::List) {
    std::vector<uint32_t> anchors;
    llo::ScheduleStats stats;
    auto assembled = assembleScheduled(module.name(), std::move(r->llo), target, "", anchors, stats, diags);
    if (!assembled) return std::nullopt;
    return std::move(assembled->program);
  }
  // Assemble against the given description: write it as the target file.
  SourceFile file(module.name() + ".llo", std::move(r->llo));
  llo::AsmOptions asmOptions;
  asmOptions.target = target.name;
  asmOptions.targetDesc = target;  // a JSON chip has no built-in name to look up
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
                     "\"temporaries_without_reuse\": {}, \"results_in_donated_arguments\": {}, \"peak\": {}}}, ",
                     s.argumentBytes, s.resultBytes, s.constantBytes, s.heapBytes, s.unsharedBytes, s.aliasedBytes,
                     s.peakHbmBytes);
  if (s.physicalArguments + s.physicalResults) {
    out += fmt::format("\"layout\": {{\"physical_arguments\": {}, \"physical_results\": {}, \"padding\": {}, "
                       "\"relayouts\": [",
                       s.physicalArguments, s.physicalResults, s.paddingBytes);
    for (size_t i = 0; i < s.relayouts.size(); ++i) out += (i ? ", " : "") + jsonString(s.relayouts[i]);
    out += "]}, ";
  }
  out += "\"kernels\": [";
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

std::string renderLayoutStats(const CodegenStats& s) {
  std::string names;
  for (const std::string& n : s.relayouts) names += (names.empty() ? "" : ", ") + n;
  return fmt::format("physical layouts: {} arguments and {} results in HBM in their layouts, {} bytes of tile padding; "
                     "relayout copies at the edges: {}\n",
                     s.physicalArguments, s.physicalResults, s.paddingBytes, names);
}

std::string renderStatsText(const CodegenStats& s) {
  std::string out = fmt::format("peak HBM: {} bytes (arguments {}, results {}, constants {}, temporaries {}; "
                                "{} without reuse; {} of results in donated arguments)\n",
                                s.peakHbmBytes, s.argumentBytes, s.resultBytes, s.constantBytes, s.heapBytes,
                                s.unsharedBytes, s.aliasedBytes);
  if (s.physicalArguments + s.physicalResults) out += renderLayoutStats(s);
  out += fmt::format("{:<32} {:<14} {:>14} {:>12} {:>10} {:>12}\n", "kernel", "kind", "flops", "hbm bytes",
                     "vmem", "est cycles");
  for (const KernelStats& k : s.kernels)
    out += fmt::format("{:<32} {:<14} {:>14.0f} {:>12} {:>10} {:>12.0f}\n", k.name, k.kind, k.flops, k.hbmBytes,
                       k.vmemBytes, k.estimatedCycles);
  return out;
}

}  // namespace tpu::codegen
