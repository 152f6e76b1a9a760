#include "sim/run_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "isa/encoding.h"
#include "sim/transport.h"
#include "support/file_kind.h"
#if TPU_SIM_HAVE_LLO
#include "llo/text.h"
#endif

namespace tpu::sim {

bool isMachineProgram(std::string_view path, std::string_view contents) {
  // By content first (an .llo saved as .txt still runs); the name decides
  // only for text that is recognisably neither.
  FileKind kind = detectFileKind(contents);
  if (kind == FileKind::Tpu || kind == FileKind::LloText) return true;
  if (kind == FileKind::HloText || kind == FileKind::Hlob) return false;
  return path.ends_with(".llo") || path.ends_with(".tpu");
}

namespace {

std::optional<target::TargetDesc> programTarget(const isa::Program& p, const std::string& override,
                                                DiagnosticEngine& diags) {
  if (!override.empty()) {
    auto t = target::loadTarget(override, diags);
    if (!t) return std::nullopt;
    if (!p.targetName.empty() && p.targetName != t->name) {
      diags.error(fmt::format("the program was built for target '{}', not '{}'", p.targetName, t->name));
      return std::nullopt;
    }
    return t;
  }
  if (!p.targetJson.empty()) {
    SourceFile file(fmt::format("<target '{}' recorded in the program>", p.targetName), p.targetJson);
    return target::parseTarget(file, diags);
  }
  return target::loadTarget(p.targetName.empty() ? "v5e" : p.targetName, diags);
}

}  // namespace

std::optional<LoadedProgram> loadProgram(const SourceFile& file, const std::string& targetOverride,
                                         DiagnosticEngine& diags) {
  LoadedProgram out;
  if (isa::isTpuBinary(file.contents())) {
    SourceFile binary(file.name(), std::string(file.contents()));
    binary.setBinary(true);
    auto p = isa::decodeProgram(binary, diags);
    if (!p) return std::nullopt;
    out.program = std::move(*p);
    auto t = programTarget(out.program, targetOverride, diags);
    if (!t) return std::nullopt;
    out.target = std::move(*t);
    return out;
  }
#if TPU_SIM_HAVE_LLO
  llo::AsmOptions opts;
  if (!targetOverride.empty()) {
    opts.target = targetOverride;
    opts.targetIsExplicit = true;
  }
  auto a = llo::assembleLlo(file, opts, diags);
  if (!a) return std::nullopt;
  out.program = std::move(a->program);
  out.target = std::move(a->target);
  return out;
#else
  diags.error("LLO text input needs the tpu_llo library, which this build does not have", file.name());
  return std::nullopt;
#endif
}

std::optional<EntrySignature> entrySignature(const isa::Program& p, const std::string& entry,
                                             DiagnosticEngine& diags) {
  const isa::Entry* e = entry.empty() ? (p.entries.empty() ? nullptr : &p.entries.front()) : p.findEntry(entry);
  if (!e) {
    diags.error(entry.empty() ? std::string("the program has no entry point")
                              : fmt::format("the program has no entry '{}'", entry));
    return std::nullopt;
  }
  EntrySignature sig;
  sig.entry = e->name;
  auto spec = [&](uint32_t b) {
    const isa::Buffer& buf = p.buffers[b];
    return TensorSpec{buf.name, buf.dtype, buf.shape, buf.sizeBytes()};
  };
  for (uint32_t b : e->args) sig.args.push_back(spec(b));
  for (uint32_t b : e->results) sig.results.push_back(spec(b));
  return sig;
}

std::optional<uint64_t> parseByteSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0 || digits > 30) return std::nullopt;
  std::string number(text.substr(0, digits));
  if (std::count(number.begin(), number.end(), '.') > 1 || number.front() == '.' || number.back() == '.')
    return std::nullopt;
  std::string_view unit = text.substr(digits);
  double scale = 1;
  if (!unit.empty()) {
    static constexpr std::string_view kUnits = "KMGT";
    size_t k = kUnits.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit.front()))));
    if (k == std::string_view::npos) {
      if (unit != "B") return std::nullopt;
    } else {
      scale = std::ldexp(1.0, 10 * static_cast<int>(k + 1));
      unit.remove_prefix(1);
      if (!unit.empty() && unit != "B" && unit != "iB") return std::nullopt;
    }
  }
  double bytes = std::strtod(number.c_str(), nullptr) * scale;
  if (!(bytes >= 1) || bytes >= std::ldexp(1.0, 63)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::optional<RunOutput> runLoadedProgram(const LoadedProgram& loaded, const std::vector<std::string>& inputs,
                                          const RunRequest& request, DiagnosticEngine& diags) {
  return runLoadedProgramViews(loaded, std::vector<std::string_view>(inputs.begin(), inputs.end()), request, diags);
}

std::optional<RunOutput> runLoadedProgramViews(const LoadedProgram& loaded,
                                               const std::vector<std::string_view>& inputs, const RunRequest& request,
                                               DiagnosticEngine& diags) {
  SimOptions opts;
  opts.entry = request.entry;
  opts.maxCycles = request.maxCycles;
  opts.trace = request.trace;
  opts.bundleLocations = loaded.bundleLocations;
  opts.profile = request.profile;
  opts.bundleRegion = request.bundleRegion;
  opts.hostMemoryLimit = request.hostMemoryLimit;
  opts.transport = request.transport;
  opts.releaseInput = request.releaseInput;
  if (request.chips > 1 || !request.topology.empty()) {
    auto topo = request.topology.empty()
                    ? target::defaultTopology(loaded.target, request.chips, diags)
                    : target::parseTopology(request.topology, loaded.target, request.chips > 1 ? request.chips : 0, diags);
    if (!topo) return std::nullopt;
    // Every chip reads the same bytes (no copy per chip).
    std::vector<std::vector<std::string_view>> all =
        request.chipInputs.size() == static_cast<size_t>(topo->chips())
            ? request.chipInputs
            : std::vector<std::vector<std::string_view>>(static_cast<size_t>(topo->chips()), inputs);
    auto pod = simulatePodViews(loaded.program, loaded.target, *topo, all, opts, diags);
    if (!pod) return std::nullopt;
    RunOutput out;
    if (pod->secondaryRank) {
      out.secondaryRank = true;
      return out;
    }
    out.results = pod->chips.front().results;
    out.traceJson = pod->chips.front().traceJson;
    out.report = pod->chips.front().report;
    out.profile = pod->chips.front().profile;
    for (SimResult& c : pod->chips) out.chipResults.push_back(std::move(c.results));
    if (request.stats == "json") out.statsText = renderPodJson(*pod, loaded.target.clockHz);
    else if (!request.stats.empty()) out.statsText = renderPodText(*pod, loaded.target.clockHz);
    out.pod = std::move(*pod);
    return out;
  }
  if (request.transport && request.transport->rank() != 0) {
    // One chip under mpirun: rank 0 runs it alone.
    RunOutput out;
    out.secondaryRank = true;
    return out;
  }
  auto r = simulateViews(loaded.program, loaded.target, inputs, opts, diags);
  if (!r) return std::nullopt;
  RunOutput out;
  out.results = std::move(r->results);
  out.traceJson = std::move(r->traceJson);
  out.report = r->report;
  out.profile = std::move(r->profile);
  if (request.stats == "json") out.statsText = renderReportJson(r->report);
  else if (!request.stats.empty()) out.statsText = renderReportText(r->report);
  return out;
}

}  // namespace tpu::sim
