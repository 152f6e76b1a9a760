#include "codegen/codegen.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>
#include <set>
#include <unordered_map>

#include "codegen/emitter.h"
#include "codegen/lower.h"
#include "isa/verify.h"
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

// The program of the lowering's directives (assembled from their text:
// buffers with their initial data, DMA descriptors, the entry) and its code
// built in memory, one op per bundle, symbols resolved and every op and
// bundle checked as the assembler checks them.
std::optional<isa::Program> buildProgram(const std::string& name, CodegenResult& r, const target::TargetDesc& target,
                                         const std::string& targetSpec, DiagnosticEngine& diags) {
  SourceFile file(name + ".llo", r.llo);
  llo::AsmOptions asmOptions;
  asmOptions.target = targetSpec.empty() ? target.name : targetSpec;
  if (targetSpec.empty()) asmOptions.targetDesc = target;  // a JSON chip has no built-in name to look up
  asmOptions.autoBundle = false;
  auto assembled = llo::assembleLlo(file, asmOptions, diags);
  if (!assembled) return std::nullopt;
  isa::Program program = std::move(assembled->program);
  EmittedCode& code = *r.code;
  auto internal = [&](const std::string& msg) {
    diags.error(fmt::format("llo-gen: internal error: {}", msg));
    return std::nullopt;
  };
  std::unordered_map<std::string_view, uint32_t> buffers, descriptors;
  for (size_t i = 0; i < program.buffers.size(); ++i) buffers.emplace(program.buffers[i].name, i);
  for (size_t i = 0; i < program.dmaDescriptors.size(); ++i) descriptors.emplace(program.dmaDescriptors[i].name, i);
  for (const EmittedCode::Symbol& s : code.symbols) {
    isa::Operand& o = code.bundles[s.op].instrs.front().operands[s.operand];
    const std::string& n = code.names[s.name];
    if (s.kind == llo::OpSymbol::Buffer) {
      auto it = buffers.find(n);
      if (it == buffers.end()) return internal(fmt::format("unknown buffer '{}'", n));
      if (program.buffers[it->second].space != isa::MemSpace::Hbm)
        return internal(fmt::format("'{}' is not an HBM buffer", n));
      o.buffer = it->second;
    } else {
      auto it = descriptors.find(n);
      if (it == descriptors.end()) return internal(fmt::format("unknown DMA descriptor '{}'", n));
      o.imm = it->second;
    }
  }
  program.bundles = std::move(code.bundles);
  program.labels = std::move(code.labels);
  program.kernels = std::move(code.kernels);
  code.symbols = {};
  code.names = {};
  if (std::string e = isa::checkProgramTables(program, &assembled->target); !e.empty()) return internal(e);
  for (const isa::Bundle& b : program.bundles)
    for (const isa::Instr& instr : b.instrs)
      if (std::string e = isa::checkInstrStructure(instr, program); !e.empty())
        return internal(fmt::format("'{}': {}", llo::printInstr(instr, &program), e));
  return program;
}

// The directives' text, then the scheduled bundles with the comments, blank
// lines, labels and .kernel directives in front of the bundle where the code
// they introduced now starts.
void printScheduled(std::string& out, const std::vector<EmittedCode::Line>& lines, const isa::Program& program,
                    const std::vector<uint32_t>& anchors) {
  std::vector<size_t> order(lines.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto at = [&](size_t i) { return anchors[std::min<size_t>(lines[i].at, anchors.size() - 1)]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return at(a) < at(b); });
  size_t m = 0;
  llo::InstrPrinter printer(program);
  for (size_t b = 0; b <= program.bundles.size(); ++b) {
    for (; m < order.size() && at(order[m]) == b; ++m) {
      out += lines[order[m]].text;
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
}

// The code as it comes from the lowering, piece by piece (each a run of
// whole kernels that later code does not branch into): each piece is
// scheduled and printed at once, so the whole program is never held in
// memory. The names it uses are checked against the directives at the end.
class PieceScheduler {
 public:
  explicit PieceScheduler(const target::TargetDesc& target) : target_(target) {}

  bool add(EmittedCode& code) {
    isa::Program p;
    // The piece's own symbol table stands in for the buffers and descriptors:
    // the printer needs their names, the scheduler nothing of them.
    p.buffers.resize(code.names.size());
    p.dmaDescriptors.resize(code.names.size());
    for (size_t i = 0; i < code.names.size(); ++i) {
      p.buffers[i].name = code.names[i];
      p.dmaDescriptors[i].name = code.names[i];
    }
    for (const EmittedCode::Symbol& s : code.symbols) {
      isa::Operand& o = code.bundles[s.op].instrs.front().operands[s.operand];
      if (s.kind == llo::OpSymbol::Buffer) o.buffer = s.name;
      else o.imm = s.name;
      used_.emplace(code.names[s.name], s.kind);
    }
    p.bundles = std::move(code.bundles);
    p.labels = std::move(code.labels);
    std::vector<uint32_t> anchors = llo::scheduleProgram(p, target_, &stats_);
    printScheduled(text_, code.lines, p, anchors);
    return true;
  }

  // Whether every name the code used is an HBM buffer or a descriptor of
  // the program the directives make.
  bool check(const isa::Program& program, DiagnosticEngine& diags) const {
    for (const auto& [name, kind] : used_) {
      bool ok = false;
      if (kind == llo::OpSymbol::Buffer) {
        auto b = program.findBuffer(name);
        ok = b && program.buffers[*b].space == isa::MemSpace::Hbm;
      } else {
        for (const isa::DmaDescriptor& d : program.dmaDescriptors) ok = ok || d.name == name;
      }
      if (!ok) {
        diags.error(fmt::format("llo-gen: internal error: unknown {} '{}'",
                                kind == llo::OpSymbol::Buffer ? "HBM buffer" : "DMA descriptor", name));
        return false;
      }
    }
    return true;
  }

  std::string& text() { return text_; }
  const llo::ScheduleStats& stats() const { return stats_; }

 private:
  const target::TargetDesc& target_;
  std::string text_;
  llo::ScheduleStats stats_;
  std::set<std::pair<std::string, llo::OpSymbol::Kind>> used_;
};

}  // namespace

namespace {
// The lowering inlines control-flow callees, so each call site needs a
// computation of its own; flatten a copy, never the caller's module. Ops
// that are compositions of simpler ones (topk, batch norm, pred dots and
// convolutions) are expanded on the copy first, as XLA does before code
// generation.
std::optional<CodegenResult> lowerFlattened(const hlo::Module& module, const target::TargetDesc& target,
                                            const CodegenOptions& options, DiagnosticEngine& diags,
                                            CodeSink sink = {}) {
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
  auto r = lowerModule(*flat, target, options, diags, std::move(sink));
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
  PieceScheduler pieces(target);
  auto r = lowerFlattened(module, target, options, diags, [&](EmittedCode& code) { return pieces.add(code); });
  if (!r || !r->code) return r;
  pieces.add(*r->code);
  r->code.reset();
  // The directives, assembled to check them and the names the code uses.
  SourceFile file(module.name() + ".llo", r->llo);
  llo::AsmOptions asmOptions;
  asmOptions.target = options.targetSpec.empty() ? target.name : options.targetSpec;
  if (options.targetSpec.empty()) asmOptions.targetDesc = target;
  auto header = llo::assembleLlo(file, asmOptions, diags);
  if (!header || !pieces.check(header->program, diags)) return std::nullopt;
  r->schedule = pieces.stats();
  pieces.text().insert(0, r->llo);  // in place when the text has room for the directives
  r->llo = std::move(pieces.text());
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
  if (r->code) {
    auto program = buildProgram(module.name(), *r, target, "", diags);
    if (!program) return std::nullopt;
    llo::scheduleProgram(*program, target);
    return program;
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
                       "\"hbm_bytes\": {}, \"vmem_bytes\": {}, \"estimated_cycles\": {:.0f}{}}}",
                       i ? "," : "", jsonString(k.name), jsonString(k.hlo), jsonString(k.opName), jsonString(k.kind),
                       k.flops, k.hbmBytes, k.vmemBytes, k.estimatedCycles,
                       k.remark.empty() ? "" : ", \"remark\": " + jsonString(k.remark));
  }
  out += "\n]}\n";
  return out;
}

std::string renderLayoutStats(const CodegenStats& s) {
  std::string names;
  for (const std::string& n : s.relayouts) names += (names.empty() ? "" : ", ") + n;
  return fmt::format("physical layouts: {} arguments and {} results in HBM in their layouts, {} bytes of tile padding; "
                     "relayout copies at the edges: {}\n",
                     s.physicalArguments, s.physicalResults, s.paddingBytes, names.empty() ? "none" : names);
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
    out += fmt::format("{:<32} {:<14} {:>14.0f} {:>12} {:>10} {:>12.0f}{}\n", k.name, k.kind, k.flops, k.hbmBytes,
                       k.vmemBytes, k.estimatedCycles, k.remark.empty() ? "" : "  # " + k.remark);
  return out;
}

}  // namespace tpu::codegen
