// The op profile: kernel map, attribution of the simulator's per-bundle
// counters to kernels and HLO instructions, derived figures, groups, the
// HBM memory timeline, and the text / JSON / --stats renderings.
#include "profile/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hlo/analysis/cost_analysis.h"
#include "hlo/computation.h"

namespace tpu::profile {

namespace {

using ojson = nlohmann::ordered_json;

// "k12_fusion_3" -> true (llo-gen's kernel labels).
bool isKernelLabel(std::string_view name) {
  if (name.size() < 3 || name[0] != 'k') return false;
  size_t i = 1;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  return i > 1 && i < name.size() && name[i] == '_';
}

uint64_t arrayBytes(const hlo::Shape& shape) {
  if (shape.isTuple()) {
    uint64_t total = 0;
    for (const hlo::Shape& e : shape.tupleElements()) total += arrayBytes(e);
    return total;
  }
  if (!shape.isArray()) return 0;
  return static_cast<uint64_t>(std::max<int64_t>(0, shape.byteSize().value_or(0)));
}

// What llo-gen writes above each kernel label:
//   // <kind>: <opcode> %<name> <shape>[ op_name="<op_name>"]
struct LloComment {
  std::string kind, hlo, opName;
};
std::map<std::string, LloComment> parseLloComments(std::string_view text) {
  std::map<std::string, LloComment> out;
  std::string_view previous;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos) continue;
    line = line.substr(b);
    if (line.back() == ':' && isKernelLabel(line.substr(0, line.size() - 1)) &&
        previous.substr(0, 3) == "// ") {
      std::string_view c = previous.substr(3);
      LloComment lc;
      size_t colon = c.find(": ");
      size_t pct = c.find(" %");
      if (colon != std::string_view::npos && pct != std::string_view::npos && pct > colon) {
        lc.kind = std::string(c.substr(0, colon));
        size_t end = c.find(' ', pct + 2);
        lc.hlo = std::string(
            c.substr(pct + 2, end == std::string_view::npos ? std::string_view::npos : end - pct - 2));
        size_t on = c.find(" op_name=\"");
        if (on != std::string_view::npos && c.back() == '"')
          lc.opName = std::string(c.substr(on + 10, c.size() - on - 11));
        out[std::string(line.substr(0, line.size() - 1))] = lc;
      }
    }
    previous = line;
  }
  return out;
}

// A collective by its kind, HLO instruction or (hand-written programs) label:
// "all-reduce", "%all-reduce.3", "k4_all_reduce_3", "allreduce".
bool isCollectiveKind(std::string s) {
  std::string n;
  for (char c : s)
    if (c != '-' && c != '_') n += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const char* k : {"allreduce", "allgather", "reducescatter", "alltoall", "collective", "permute"})
    if (n.find(k) != std::string::npos) return true;
  return false;
}

void derive(OpFigures& f, const Profile& p) {
  f.seconds = p.clockHz > 0 ? static_cast<double>(f.cycles) / p.clockHz : 0;
  f.share = p.chipCycles ? static_cast<double>(f.cycles) / static_cast<double>(p.chipCycles) : 0;
  double bytes = static_cast<double>(f.hbmBytes);
  if (f.seconds > 0) {
    f.flopsPerSecond = f.hwFlops / f.seconds;
    f.modelFlopsPerSecond = f.modelFlops / f.seconds;
    f.bytesPerSecond = bytes / f.seconds;
  }
  f.intensity = bytes > 0 ? f.hwFlops / bytes : 0;
  f.modelIntensity = bytes > 0 ? f.modelFlops / bytes : 0;
  double mem = p.peakBytesPerSecond > 0 ? bytes / p.peakBytesPerSecond : 0;
  double comp = p.peakFlops > 0 ? f.hwFlops / p.peakFlops : 0;
  double modelComp = p.peakFlops > 0 ? f.modelFlops / p.peakFlops : 0;
  f.computeBound = comp > mem;
  f.rooflineSeconds = std::max(comp, mem);
  f.modelRooflineSeconds = std::max(modelComp, mem);
  if (f.seconds > 0) {
    f.rooflineFraction = f.rooflineSeconds / f.seconds;
    f.modelRooflineFraction = f.modelRooflineSeconds / f.seconds;
  }
}

void accumulate(OpFigures& into, const OpFigures& op) {
  into.kernels += op.kernels;
  into.cycles += op.cycles;
  into.issues += op.issues;
  into.hwFlops += op.hwFlops;
  into.modelFlops += op.modelFlops;
  into.modelKnown = into.modelKnown || op.modelKnown;
  into.hbmBytes += op.hbmBytes;
  into.vmemBytes = std::max(into.vmemBytes, op.vmemBytes);
  for (size_t i = 0; i < sim::kNumStallReasons; ++i) into.stalls.cycles[i] += op.stalls.cycles[i];
}

std::vector<OpFigures> groupBy(const Profile& p, const std::vector<OpFigures>& ops,
                               std::string (*keyOf)(const OpFigures&)) {
  std::map<std::string, OpFigures> groups;
  for (const OpFigures& op : ops) {
    std::string key = keyOf(op);
    OpFigures& g = groups[key];
    g.key = key;
    accumulate(g, op);
  }
  std::vector<OpFigures> out;
  for (auto& [key, g] : groups) {
    derive(g, p);
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OpFigures& a, const OpFigures& b) { return a.cycles > b.cycles; });
  return out;
}

std::string formatSeconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.2f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}
std::string formatRate(double v, const char* unit) {
  if (v >= 1e12) return fmt::format("{:.2f} T{}", v / 1e12, unit);
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  return fmt::format("{:.0f} {}", v, unit);
}
std::string formatBytes(double b) {
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

// The stall causes of an op that take at least 5% of its time, largest first.
std::string dominantStalls(const OpFigures& f) {
  std::vector<std::pair<uint64_t, size_t>> v;
  for (size_t i = 0; i < sim::kNumStallReasons; ++i)
    if (f.stalls.cycles[i] > 0 && f.cycles > 0 && f.stalls.cycles[i] * 20 >= f.cycles)
      v.emplace_back(f.stalls.cycles[i], i);
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t k = 0; k < v.size() && k < 2; ++k)
    out += fmt::format("{}{} {:.0f}%", k ? ", " : "", stallName(v[k].second),
                       100.0 * static_cast<double>(v[k].first) / static_cast<double>(f.cycles));
  return out.empty() ? "-" : out;
}

}  // namespace

std::string stallName(size_t reason) {
  // The issue's words for the simulator's reasons: a semaphore wait is a wait for a DMA.
  switch (static_cast<sim::StallReason>(reason)) {
    case sim::StallReason::Semaphore:
      return "dma-wait";
    default:
      return std::string(sim::stallReasonName(static_cast<sim::StallReason>(reason)));
  }
}

KernelMap mapKernels(const isa::Program& program, const codegen::CodegenStats* stats,
                     std::string_view lloText, const hlo::Module* module) {
  KernelMap map;
  std::map<std::string, const codegen::KernelStats*> byLabel;
  if (stats)
    for (const codegen::KernelStats& k : stats->kernels) byLabel[k.name] = &k;
  std::map<std::string, LloComment> comments = parseLloComments(lloText);
  // The program's own kernel metadata (.kernel directives, the .tpu KERN
  // section): kernel labels it does not describe are sections of a resident
  // fusion's kernel, as they are for llo-gen's statistics.
  std::map<std::string_view, const isa::KernelMeta*> metaOf;
  for (const isa::KernelMeta& m : program.kernels) metaOf.emplace(m.label, &m);
  std::map<std::string, const hlo::Instruction*> byName;
  if (module)
    for (const auto& c : module->computations())
      for (const auto& in : c->instructions()) byName[in->name()] = in.get();

  bool anyKernelLabel = false;
  for (const isa::Label& l : program.labels) anyKernelLabel = anyKernelLabel || isKernelLabel(l.name);
  std::vector<std::pair<uint32_t, size_t>> starts;  // bundle -> kernel
  for (const isa::Label& l : program.labels) {
    if (anyKernelLabel && !isKernelLabel(l.name)) continue;
    // A kernel label llo-gen has no statistics for is a section of a
    // resident fusion's kernel: it stays in that kernel.
    if (stats && !byLabel.count(l.name) && !map.kernels.empty()) continue;
    if (!stats && !metaOf.empty() && !metaOf.count(l.name) && !map.kernels.empty()) continue;
    KernelInfo k;
    k.label = l.name;
    k.firstBundle = l.bundle;
    if (auto it = byLabel.find(l.name); it != byLabel.end()) {
      k.kind = it->second->kind;
      k.hlo = it->second->hlo;
      k.opName = it->second->opName;
      k.vmemBytes = it->second->vmemBytes;
      k.modelFlops = it->second->flops;
    } else if (auto m = metaOf.find(l.name); m != metaOf.end()) {
      k.kind = m->second->kind;
      k.hlo = m->second->hlo;
      k.opName = m->second->opName;
    } else if (auto c = comments.find(l.name); c != comments.end()) {
      k.kind = c->second.kind;
      k.hlo = c->second.hlo;
      k.opName = c->second.opName;
    } else if (isKernelLabel(l.name)) {
      k.hlo = l.name.substr(l.name.find('_') + 1);  // sanitized: '.' became '_'
    }
    if (auto it = byName.find(k.hlo); it != byName.end()) {
      const hlo::Instruction* in = it->second;
      // Control flow: the kernels of its computations count their own FLOPs.
      bool control = hlo::isControlFlow(in->opcode());
      k.modelFlops = control ? 0.0 : hlo::instructionCost(*in).flops;
      k.outputBytes = arrayBytes(in->shape());
      if (k.opName.empty()) k.opName = in->metadata().opName;
      if (in->opcode() == hlo::Opcode::Fusion && in->fusedComputation())
        for (const auto& m : in->fusedComputation()->instructions())
          if (m->opcode() != hlo::Opcode::Parameter) k.members.push_back(m->name());
    }
    starts.emplace_back(l.bundle, map.kernels.size());
    map.kernels.push_back(std::move(k));
  }
  std::stable_sort(starts.begin(), starts.end(), [](auto& a, auto& b) { return a.first < b.first; });
  const size_t n = program.bundles.size();
  map.bundleRegion.assign(n, 0);
  size_t other = map.kernels.size();
  bool needOther = starts.empty() || starts.front().first > 0;
  if (needOther) {
    KernelInfo k;
    k.label = "(entry code)";
    k.hlo = "(entry code)";
    map.kernels.push_back(k);
  }
  size_t si = 0;
  uint32_t current = needOther ? static_cast<uint32_t>(other) : 0;
  for (size_t b = 0; b < n; ++b) {
    while (si < starts.size() && starts[si].first <= b) current = static_cast<uint32_t>(starts[si++].second);
    map.bundleRegion[b] = current;
  }
  return map;
}

void setIdealBound(Profile& p, const hlo::Module& original) {
  hlo::ModuleStats s = hlo::computeModuleStats(original);
  double bytes = static_cast<double>(s.parameterBytes + s.constantBytes + s.resultBytes);
  p.idealKnown = p.peakFlops > 0 && p.peakBytesPerSecond > 0;
  if (!p.idealKnown) return;
  p.idealComputeSeconds = s.entryCost.flops / p.peakFlops;
  p.idealMemorySeconds = bytes / p.peakBytesPerSecond;
  p.idealSeconds = std::max(p.idealComputeSeconds, p.idealMemorySeconds);
}

Profile buildProfile(const ProfileInputs& in) {
  Profile p;
  const sim::SimReport& r = *in.report;
  const sim::ExecProfile& exec = *in.exec;
  const KernelMap& km = *in.kernels;
  p.program = in.name;
  p.target = r.targetName;
  p.clockHz = r.clockHz;
  p.peakFlops = r.peakFlops;
  p.peakBytesPerSecond = r.peakHbmBytesPerSecond;
  p.cycles = r.cycles;
  p.chipCycles = r.cycles;
  p.seconds = r.seconds;
  p.hbmBytes = r.hbmBytesRead + r.hbmBytesWritten;
  p.kernels = km.kernels;
  p.recordsDropped = exec.recordsDropped;

  std::vector<OpFigures> ops(km.kernels.size());
  for (size_t b = 0; b < exec.bundles.size() && b < km.bundleRegion.size(); ++b) {
    const sim::BundleProfile& bp = exec.bundles[b];
    OpFigures& f = ops[km.bundleRegion[b]];
    f.cycles += bp.cycles;
    f.hwFlops += bp.mxuFlops;
    f.hbmBytes += bp.hbmBytes;
    f.vmemBytes = std::max(f.vmemBytes, bp.vmemHigh);
    for (size_t i = 0; i < sim::kNumStallReasons; ++i) f.stalls.cycles[i] += bp.stallCycles[i];
    p.hwFlops += bp.mxuFlops;
    for (size_t i = 0; i < sim::kNumStallReasons; ++i) p.stalls.cycles[i] += bp.stallCycles[i];
  }
  for (size_t k = 0; k < km.kernels.size(); ++k) {
    const KernelInfo& ki = km.kernels[k];
    OpFigures& f = ops[k];
    f.key = ki.hlo.empty() ? ki.label : ki.hlo;
    f.label = ki.label;
    f.hlo = ki.hlo;
    f.opName = ki.opName;
    f.kind = ki.kind;
    f.members = ki.members;
    f.vmemBytes = std::max(f.vmemBytes, ki.vmemBytes);
    p.kernels[k].vmemBytes = f.vmemBytes;
    f.kernels = 1;
    // Executions: how often the kernel's first bundle issued (loops run it again).
    f.issues = ki.firstBundle < exec.bundles.size() ? exec.bundles[ki.firstBundle].issues : 0;
    if (ki.modelFlops) {
      f.modelKnown = true;
      f.modelFlops = *ki.modelFlops * static_cast<double>(f.issues);
      p.modelFlops += f.modelFlops;
      p.modelKnown = true;
    }
  }
  for (OpFigures& f : ops) derive(f, p);
  std::vector<OpFigures> ran;
  for (OpFigures& f : ops)
    if (f.cycles > 0) ran.push_back(f);
  std::stable_sort(ran.begin(), ran.end(),
                   [](const OpFigures& a, const OpFigures& b) { return a.cycles > b.cycles; });
  p.ops = std::move(ran);
  p.byKind = groupBy(p, p.ops,
                     [](const OpFigures& f) { return f.kind.empty() ? std::string("(unknown)") : f.kind; });
  p.byOpName = groupBy(
      p, p.ops, [](const OpFigures& f) { return f.opName.empty() ? std::string("(no op_name)") : f.opName; });

  double hbm = static_cast<double>(p.hbmBytes);
  if (p.seconds > 0 && p.peakFlops > 0) {
    p.hwUtilization = p.hwFlops / p.seconds / p.peakFlops;
    p.modelUtilization = p.modelFlops / p.seconds / p.peakFlops;
  }
  double mem = p.peakBytesPerSecond > 0 ? hbm / p.peakBytesPerSecond : 0;
  p.hwRooflineSeconds = std::max(p.peakFlops > 0 ? p.hwFlops / p.peakFlops : 0, mem);
  p.modelRooflineSeconds = std::max(p.peakFlops > 0 ? p.modelFlops / p.peakFlops : 0, mem);

  // Spans and per-kernel time ranges.
  std::vector<double> firstStart(km.kernels.size(), -1), lastEnd(km.kernels.size(), -1);
  for (const sim::RegionSpan& s : exec.spans) {
    if (s.region >= km.kernels.size() || p.clockHz <= 0) continue;
    Span sp{s.region, static_cast<double>(s.start) / p.clockHz, static_cast<double>(s.end) / p.clockHz};
    if (firstStart[s.region] < 0) firstStart[s.region] = sp.start;
    lastEnd[s.region] = std::max(lastEnd[s.region], sp.end);
    p.spans.push_back(sp);
  }

  ChipFigures chip;
  chip.cycles = p.cycles;
  chip.seconds = p.seconds;
  chip.hwFlops = p.hwFlops;
  chip.hbmBytes = p.hbmBytes;
  chip.stalls = p.stalls;
  for (const OpFigures& f : p.ops)
    if (isCollectiveKind(f.kind) || isCollectiveKind(f.hlo) || isCollectiveKind(f.label))
      chip.collectiveSeconds += f.seconds;
  p.chips.push_back(chip);

  // HBM memory timeline: the program's arguments, results and constants
  // live throughout; temporaries from the HLO value each kernel defines to
  // the end of the last kernel reading it (through tuples and bitcasts).
  MemoryTimeline& mt = p.memory;
  std::vector<NamedBytes> statics;
  std::set<uint32_t> entryBuffers;
  for (const isa::Entry& e : in.program->entries) {
    entryBuffers.insert(e.args.begin(), e.args.end());
    entryBuffers.insert(e.results.begin(), e.results.end());
  }
  std::vector<NamedBytes> heap;
  for (uint32_t b = 0; b < in.program->buffers.size(); ++b) {
    const isa::Buffer& buf = in.program->buffers[b];
    if (buf.space != isa::MemSpace::Hbm || !isa::sizeFits(buf)) continue;
    if (entryBuffers.count(b) || buf.init >= 0)
      statics.push_back({buf.name, buf.sizeBytes()});
    else
      heap.push_back({buf.name, buf.sizeBytes()});
  }
  for (const NamedBytes& s : statics) mt.staticBytes += s.bytes;
  struct Live {
    std::string name;
    uint64_t bytes;
    double start, end;
  };
  std::vector<Live> temps;
  const hlo::Computation* entry = in.lowered ? in.lowered->entry() : nullptr;
  if (entry) {
    mt.temporariesFromHlo = true;
    std::map<const hlo::Instruction*, size_t> kernelOf;
    std::map<std::string, size_t> kernelByHlo;
    for (size_t k = 0; k < km.kernels.size(); ++k) kernelByHlo.emplace(km.kernels[k].hlo, k);
    for (const auto& i : entry->instructions())
      if (auto it = kernelByHlo.find(i->name()); it != kernelByHlo.end()) kernelOf[i.get()] = it->second;
    std::map<const hlo::Instruction*, std::vector<const hlo::Instruction*>> users;
    for (const auto& i : entry->instructions())
      for (const hlo::Instruction* o : i->operands()) users[o].push_back(i.get());
    auto usersOf = [&](const hlo::Instruction* i) -> const std::vector<const hlo::Instruction*>& {
      return users[i];
    };
    for (const auto& [instr, k] : kernelOf) {
      if (firstStart[k] < 0 || instr == entry->root()) continue;
      Live l{"%" + instr->name(), km.kernels[k].outputBytes, firstStart[k], lastEnd[k]};
      bool toRoot = false;
      std::vector<const hlo::Instruction*> work = usersOf(instr);
      std::set<const hlo::Instruction*> seen;
      while (!work.empty()) {
        const hlo::Instruction* u = work.back();
        work.pop_back();
        if (!seen.insert(u).second) continue;
        if (u == entry->root()) toRoot = true;
        if (auto it = kernelOf.find(u); it != kernelOf.end()) {
          l.end = std::max(l.end, lastEnd[it->second]);
        } else {
          {
            const auto& more = usersOf(u);
            work.insert(work.end(), more.begin(), more.end());
          }
        }
      }
      if (!toRoot && l.bytes > 0) temps.push_back(std::move(l));
    }
  } else {
    for (const NamedBytes& h : heap) temps.push_back({h.name, h.bytes, 0, p.seconds});
  }
  std::vector<std::pair<double, int64_t>> events;
  for (const Live& l : temps) {
    events.emplace_back(l.start, static_cast<int64_t>(l.bytes));
    events.emplace_back(l.end, -static_cast<int64_t>(l.bytes));
  }
  // Frees before allocations at the same instant.
  std::stable_sort(events.begin(), events.end(), [](auto& a, auto& b) {
    return a.first < b.first || (a.first == b.first && a.second < b.second);
  });
  int64_t live = static_cast<int64_t>(mt.staticBytes);
  mt.points.push_back({0, static_cast<uint64_t>(live)});
  mt.peakBytes = static_cast<uint64_t>(live);
  for (size_t i = 0; i < events.size();) {
    double t = events[i].first;
    while (i < events.size() && events[i].first == t) live += events[i++].second;
    if (mt.points.back().seconds == t)
      mt.points.back().liveBytes = static_cast<uint64_t>(live);
    else
      mt.points.push_back({t, static_cast<uint64_t>(live)});
    if (static_cast<uint64_t>(live) > mt.peakBytes) {
      mt.peakBytes = static_cast<uint64_t>(live);
      mt.peakSeconds = t;
    }
  }
  std::vector<NamedBytes> atPeak = statics;
  for (const Live& l : temps)
    if (l.start <= mt.peakSeconds && l.end > mt.peakSeconds) atPeak.push_back({l.name, l.bytes});
  std::stable_sort(atPeak.begin(), atPeak.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
  if (atPeak.size() > 10) atPeak.resize(10);
  mt.peakBuffers = std::move(atPeak);
  return p;
}

Profile buildPodProfile(const ProfileInputs& in, const sim::PodResult& pod, std::vector<Profile>* chipsOut) {
  std::vector<Profile> chips;
  for (const sim::SimResult& c : pod.chips) {
    ProfileInputs ci = in;
    ci.report = &c.report;
    ci.exec = &c.profile;
    chips.push_back(buildProfile(ci));
  }
  if (chips.empty()) return Profile{};
  Profile p = chips.front();
  const size_t n = chips.size();
  p.podChips = static_cast<int>(n);
  p.topology = pod.topology;
  p.iciBytes = pod.iciBytes;
  p.cycles = pod.cycles;
  p.seconds = p.clockHz > 0 ? static_cast<double>(pod.cycles) / p.clockHz : 0;
  p.chipCycles = 0;
  p.hwFlops = p.modelFlops = 0;
  p.modelKnown = false;
  p.hbmBytes = 0;
  p.stalls = {};
  p.recordsDropped = pod.transfersDropped;
  p.chips.clear();
  // Ops summed over chips, by kernel label (every chip runs the same program).
  std::map<std::string, OpFigures> byLabel;
  std::vector<std::string> order;
  for (size_t c = 0; c < n; ++c) {
    const Profile& cp = chips[c];
    p.chipCycles += cp.cycles;
    p.hwFlops += cp.hwFlops;
    p.modelFlops += cp.modelFlops;
    p.modelKnown = p.modelKnown || cp.modelKnown;
    p.hbmBytes += cp.hbmBytes;
    p.recordsDropped += cp.recordsDropped;
    for (size_t i = 0; i < sim::kNumStallReasons; ++i) p.stalls.cycles[i] += cp.stalls.cycles[i];
    for (const OpFigures& f : cp.ops) {
      auto [it, fresh] = byLabel.try_emplace(f.label);
      OpFigures& g = it->second;
      if (fresh) {
        order.push_back(f.label);
        g.key = f.key;
        g.label = f.label;
        g.hlo = f.hlo;
        g.opName = f.opName;
        g.kind = f.kind;
        g.members = f.members;
      }
      accumulate(g, f);
      g.kernels = 1;
    }
    ChipFigures cf = cp.chips.front();
    cf.chip = static_cast<int>(c);
    if (c < pod.chipStats.size()) {
      cf.waitCycles = pod.chipStats[c].waitCycles;
      cf.remoteDmas = pod.chipStats[c].remoteDmas;
      cf.iciBytesSent = pod.chipStats[c].iciBytesSent;
    }
    cf.waitSeconds = p.clockHz > 0 ? static_cast<double>(cf.waitCycles) / p.clockHz : 0;
    cf.ops = cp.ops;
    p.chips.push_back(std::move(cf));
  }
  std::vector<OpFigures> ops;
  for (const std::string& l : order) {
    OpFigures& g = byLabel[l];
    derive(g, p);
    ops.push_back(std::move(g));
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const OpFigures& a, const OpFigures& b) { return a.cycles > b.cycles; });
  p.ops = std::move(ops);
  p.byKind = groupBy(p, p.ops,
                     [](const OpFigures& f) { return f.kind.empty() ? std::string("(unknown)") : f.kind; });
  p.byOpName = groupBy(
      p, p.ops, [](const OpFigures& f) { return f.opName.empty() ? std::string("(no op_name)") : f.opName; });
  // Pod-wide rates against the pod's peaks (n chips).
  double chips_ = static_cast<double>(n);
  double hbm = static_cast<double>(p.hbmBytes);
  p.hwUtilization = p.modelUtilization = 0;
  if (p.seconds > 0 && p.peakFlops > 0) {
    p.hwUtilization = p.hwFlops / p.seconds / (p.peakFlops * chips_);
    p.modelUtilization = p.modelFlops / p.seconds / (p.peakFlops * chips_);
  }
  double mem = p.peakBytesPerSecond > 0 ? hbm / (p.peakBytesPerSecond * chips_) : 0;
  p.hwRooflineSeconds = std::max(p.peakFlops > 0 ? p.hwFlops / (p.peakFlops * chips_) : 0, mem);
  p.modelRooflineSeconds = std::max(p.peakFlops > 0 ? p.modelFlops / (p.peakFlops * chips_) : 0, mem);
  for (const sim::IciLinkStats& l : pod.links) {
    LinkFigures lf;
    lf.name = l.name;
    lf.bytes = l.bytes;
    lf.transfers = l.transfers;
    lf.busySeconds = p.clockHz > 0 ? l.busyCycles / p.clockHz : 0;
    lf.utilization = pod.cycles ? l.busyCycles / static_cast<double>(pod.cycles) : 0;
    p.links.push_back(std::move(lf));
  }
  if (chipsOut) *chipsOut = std::move(chips);
  return p;
}

std::string renderText(const Profile& p, size_t top) {
  std::string out;
  if (p.podChips > 0)
    out += fmt::format("op profile of {} on a pod of {} {} chips ({}): {} cycles, {}; {} kernel{} ran\n",
                       p.program, p.podChips, p.target, p.topology, p.cycles, formatSeconds(p.seconds),
                       p.ops.size(), p.ops.size() == 1 ? "" : "s");
  else
    out += fmt::format("op profile of {} on {}: {} cycles, {}; {} kernel{} ran\n", p.program, p.target,
                       p.cycles, formatSeconds(p.seconds), p.ops.size(), p.ops.size() == 1 ? "" : "s");
  out += fmt::format("  MXU work (padded)  {:.4g} FLOPs, {}, {:.1f}% of peak\n", p.hwFlops,
                     formatRate(p.seconds > 0 ? p.hwFlops / p.seconds : 0, "FLOP/s"), 100 * p.hwUtilization);
  if (p.modelKnown)
    out += fmt::format("  model FLOPs (HLO)  {:.4g} FLOPs, {}, {:.1f}% of peak\n", p.modelFlops,
                       formatRate(p.seconds > 0 ? p.modelFlops / p.seconds : 0, "FLOP/s"),
                       100 * p.modelUtilization);
  out += fmt::format("  HBM                {} moved, {}\n", formatBytes(static_cast<double>(p.hbmBytes)),
                     formatRate(p.seconds > 0 ? static_cast<double>(p.hbmBytes) / p.seconds : 0, "B/s"));
  if (p.idealKnown)
    out += fmt::format("  ideal bound        {} ({}-bound); simulated time is {:.1f}% of ideal\n",
                       formatSeconds(p.idealSeconds),
                       p.idealComputeSeconds > p.idealMemorySeconds ? "compute" : "memory",
                       p.seconds > 0 ? 100 * p.idealSeconds / p.seconds : 0);
  std::string stalls;
  for (size_t i = 0; i < sim::kNumStallReasons; ++i)
    if (p.stalls.cycles[i])
      stalls += fmt::format(
          " {} {:.1f}%", stallName(i),
          p.chipCycles ? 100.0 * static_cast<double>(p.stalls.cycles[i]) / static_cast<double>(p.chipCycles)
                       : 0);
  out += fmt::format("  stalls            {}\n", stalls.empty() ? " none" : stalls);
  out += fmt::format("\ntop {} ops by time{} (intensity, bound and roofline from the padded MXU work):\n",
                     std::min(top, p.ops.size()), p.podChips > 0 ? " summed over chips" : "");
  out += fmt::format("{:>3} {:>10} {:>6} {:>6}  {:<14} {:<28} {:>11} {:>11} {:>11} {:>8} {:<7} {:>6}  {}\n",
                     "#", "time", "share", "cum", "kind", "hlo", "MXU F/s", "model F/s", "HBM B/s", "FLOP/B",
                     "bound", "roof", "stalls");
  double cum = 0;
  for (size_t i = 0; i < p.ops.size() && i < top; ++i) {
    const OpFigures& f = p.ops[i];
    cum += f.share;
    std::string hlo = f.hlo.empty() ? f.key : f.hlo;
    if (hlo.size() > 28) hlo = hlo.substr(0, 27) + "~";
    out += fmt::format(
        "{:>3} {:>10} {:>5.1f}% {:>5.1f}%  {:<14} {:<28} {:>11} {:>11} {:>11} {:>8.1f} {:<7} {:>5.1f}%  {}\n",
        i + 1, formatSeconds(f.seconds), 100 * f.share, 100 * cum, f.kind.empty() ? "-" : f.kind, hlo,
        formatRate(f.flopsPerSecond, "F/s"),
        f.modelKnown ? formatRate(f.modelFlopsPerSecond, "F/s") : std::string("-"),
        formatRate(f.bytesPerSecond, "B/s"), f.intensity, f.computeBound ? "compute" : "memory",
        100 * f.rooflineFraction, dominantStalls(f));
  }
  auto groups = [&](const char* title, const std::vector<OpFigures>& gs) {
    out += fmt::format("\n{}:\n{:>10} {:>6} {:>7}  {:>11}  {}\n", title, "time", "share", "kernels",
                       "MXU F/s", "group");
    for (size_t i = 0; i < gs.size() && i < top; ++i) {
      const OpFigures& g = gs[i];
      out += fmt::format("{:>10} {:>5.1f}% {:>7}  {:>11}  {}\n", formatSeconds(g.seconds), 100 * g.share,
                         g.kernels, formatRate(g.flopsPerSecond, "F/s"), g.key);
    }
    if (gs.size() > top) out += fmt::format("  ... {} more\n", gs.size() - top);
  };
  groups("by kind", p.byKind);
  groups("by op_name", p.byOpName);
  if (p.podChips > 0) {
    out += fmt::format("\npod: {} chips, {}; ICI {} (bytes x hops)\n", p.podChips, p.topology,
                       formatBytes(static_cast<double>(p.iciBytes)));
    out += fmt::format("{:>5} {:>10} {:>10} {:>6} {:>10} {:>6} {:>7} {:>11}  {}\n", "chip", "time",
                       "collective", "share", "waiting", "share", "remote", "ICI sent", "top op");
    for (const ChipFigures& c : p.chips) {
      double coll = c.seconds > 0 ? 100 * c.collectiveSeconds / c.seconds : 0;
      double wait = c.cycles ? 100.0 * static_cast<double>(c.waitCycles) / static_cast<double>(c.cycles) : 0;
      std::string topOp = c.ops.empty()
                              ? "-"
                              : fmt::format("{} {:.1f}%", c.ops.front().key,
                                            100.0 * c.ops.front().cycles / std::max<double>(1, c.cycles));
      out += fmt::format("{:>5} {:>10} {:>10} {:>5.1f}% {:>10} {:>5.1f}% {:>7} {:>11}  {}\n", c.chip,
                         formatSeconds(c.seconds), formatSeconds(c.collectiveSeconds), coll,
                         formatSeconds(c.waitSeconds), wait, c.remoteDmas,
                         formatBytes(static_cast<double>(c.iciBytesSent)), topOp);
    }
    out +=
        "  (collective: kernels of collective ops; waiting: cycles stalled on semaphores (remote and local "
        "DMAs) and barrier.pod)\n";
    if (!p.links.empty()) {
      out += fmt::format("\nICI links that carried data:\n{:>11} {:>9} {:>6}  {}\n", "bytes", "transfers",
                         "busy", "link");
      for (const LinkFigures& l : p.links)
        out += fmt::format("{:>11} {:>9} {:>5.1f}%  {}\n", formatBytes(static_cast<double>(l.bytes)),
                           l.transfers, 100 * l.utilization, l.name);
    }
    const size_t perChip = std::min<size_t>(top, 5);
    for (const ChipFigures& c : p.chips) {
      out += fmt::format("\nchip {}: top {} ops\n", c.chip, std::min(perChip, c.ops.size()));
      for (size_t i = 0; i < c.ops.size() && i < perChip; ++i) {
        const OpFigures& f = c.ops[i];
        out +=
            fmt::format("{:>3} {:>10} {:>5.1f}%  {:<14} {}  {}\n", i + 1, formatSeconds(f.seconds),
                        c.cycles ? 100.0 * static_cast<double>(f.cycles) / static_cast<double>(c.cycles) : 0,
                        f.kind.empty() ? "-" : f.kind, f.key, dominantStalls(f));
      }
    }
  }
  out +=
      fmt::format("\nHBM: peak {} live at {} ({} arguments, results and constants){}\n",
                  formatBytes(static_cast<double>(p.memory.peakBytes)), formatSeconds(p.memory.peakSeconds),
                  formatBytes(static_cast<double>(p.memory.staticBytes)),
                  p.memory.temporariesFromHlo ? "" : "; temporaries as one heap block");
  for (const NamedBytes& b : p.memory.peakBuffers)
    out += fmt::format("  {:>12}  {}\n", formatBytes(static_cast<double>(b.bytes)), b.name);
  return out;
}

namespace {
ojson opJson(const OpFigures& f, bool isOp) {
  ojson j;
  j["key"] = f.key;
  if (isOp) {
    j["label"] = f.label;
    j["hlo"] = f.hlo;
    j["op_name"] = f.opName;
    j["kind"] = f.kind;
    j["members"] = f.members;
    j["executions"] = f.issues;
    j["vmem_bytes"] = f.vmemBytes;
  } else {
    j["kernels"] = f.kernels;
  }
  j["cycles"] = f.cycles;
  j["seconds"] = f.seconds;
  j["share"] = f.share;
  j["mxu_flops"] = f.hwFlops;
  if (f.modelKnown)
    j["model_flops"] = f.modelFlops;
  else
    j["model_flops"] = nullptr;
  j["hbm_bytes"] = f.hbmBytes;
  j["flops_per_second"] = f.flopsPerSecond;
  j["model_flops_per_second"] = f.modelFlopsPerSecond;
  j["hbm_bytes_per_second"] = f.bytesPerSecond;
  j["intensity"] = f.intensity;
  j["model_intensity"] = f.modelIntensity;
  j["bound"] = f.computeBound ? "compute" : "memory";
  j["roofline_seconds"] = f.rooflineSeconds;
  j["fraction_of_roofline"] = f.rooflineFraction;
  j["model_roofline_seconds"] = f.modelRooflineSeconds;
  j["model_fraction_of_roofline"] = f.modelRooflineFraction;
  ojson st = ojson::object();
  for (size_t i = 0; i < sim::kNumStallReasons; ++i)
    if (f.stalls.cycles[i]) st[stallName(i)] = f.stalls.cycles[i];
  j["stall_cycles"] = st;
  return j;
}
}  // namespace

std::string renderJson(const Profile& p) {
  ojson j;
  j["profile_version"] = 1;
  j["program"] = p.program;
  j["target"] = p.target;
  j["clock_hz"] = p.clockHz;
  j["peak_flops_per_second"] = p.peakFlops;
  j["peak_hbm_bytes_per_second"] = p.peakBytesPerSecond;
  j["cycles"] = p.cycles;
  j["seconds"] = p.seconds;
  j["mxu_flops"] = p.hwFlops;
  if (p.modelKnown)
    j["model_flops"] = p.modelFlops;
  else
    j["model_flops"] = nullptr;
  j["hbm_bytes"] = p.hbmBytes;
  j["mxu_utilization_padded"] = p.hwUtilization;
  j["flop_utilization_model"] = p.modelUtilization;
  j["roofline_seconds_padded"] = p.hwRooflineSeconds;
  j["roofline_seconds_model"] = p.modelRooflineSeconds;
  if (p.idealKnown)
    j["ideal"] = {{"seconds", p.idealSeconds},
                  {"compute_seconds", p.idealComputeSeconds},
                  {"memory_seconds", p.idealMemorySeconds},
                  {"fraction", p.seconds > 0 ? p.idealSeconds / p.seconds : 0}};
  ojson st = ojson::object();
  for (size_t i = 0; i < sim::kNumStallReasons; ++i) st[stallName(i)] = p.stalls.cycles[i];
  j["stall_cycles"] = st;
  if (p.podChips > 0) {
    j["pod"] = {{"chips", p.podChips},
                {"topology", p.topology},
                {"chip_cycles", p.chipCycles},
                {"ici_bytes", p.iciBytes}};
    ojson links = ojson::array();
    for (const LinkFigures& l : p.links)
      links.push_back({{"link", l.name},
                       {"bytes", l.bytes},
                       {"transfers", l.transfers},
                       {"busy_seconds", l.busySeconds},
                       {"utilization", l.utilization}});
    j["links"] = links;
  }
  ojson chips = ojson::array();
  for (const ChipFigures& c : p.chips) {
    ojson cj = {{"chip", c.chip},
                {"cycles", c.cycles},
                {"seconds", c.seconds},
                {"collective_seconds", c.collectiveSeconds}};
    if (p.podChips > 0) {
      cj["wait_cycles"] = c.waitCycles;
      cj["wait_seconds"] = c.waitSeconds;
      cj["remote_dmas"] = c.remoteDmas;
      cj["ici_bytes_sent"] = c.iciBytesSent;
      cj["mxu_flops"] = c.hwFlops;
      cj["hbm_bytes"] = c.hbmBytes;
      ojson st = ojson::object();
      for (size_t i = 0; i < sim::kNumStallReasons; ++i) st[stallName(i)] = c.stalls.cycles[i];
      cj["stall_cycles"] = st;
      ojson cops = ojson::array();
      for (const OpFigures& f : c.ops) cops.push_back(opJson(f, true));
      cj["ops"] = cops;
    }
    chips.push_back(std::move(cj));
  }
  j["chips"] = chips;
  ojson ops = ojson::array();
  for (const OpFigures& f : p.ops) ops.push_back(opJson(f, true));
  j["ops"] = ops;
  ojson kinds = ojson::array(), names = ojson::array();
  for (const OpFigures& f : p.byKind) kinds.push_back(opJson(f, false));
  for (const OpFigures& f : p.byOpName) names.push_back(opJson(f, false));
  j["by_kind"] = kinds;
  j["by_op_name"] = names;
  ojson mem;
  mem["peak_bytes"] = p.memory.peakBytes;
  mem["peak_seconds"] = p.memory.peakSeconds;
  mem["static_bytes"] = p.memory.staticBytes;
  mem["temporaries_from_hlo"] = p.memory.temporariesFromHlo;
  ojson pb = ojson::array();
  for (const NamedBytes& b : p.memory.peakBuffers) pb.push_back({{"name", b.name}, {"bytes", b.bytes}});
  mem["peak_buffers"] = pb;
  ojson pts = ojson::array();
  for (const MemoryPoint& m : p.memory.points) pts.push_back({m.seconds, m.liveBytes});
  mem["points"] = pts;
  j["hbm_timeline"] = mem;
  j["records_dropped"] = p.recordsDropped;
  return j.dump(1, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string renderStatsText(const Profile& p) {
  std::string out;
  out += fmt::format("MXU work          {:.6g} FLOPs (padded to 8x128x128 pushes), {:.1f}% of peak FLOP/s\n",
                     p.hwFlops, 100 * p.hwUtilization);
  if (p.modelKnown)
    out += fmt::format("model FLOPs       {:.6g} (HLO cost analysis), {:.1f}% of peak FLOP/s\n", p.modelFlops,
                       100 * p.modelUtilization);
  else
    out += "model FLOPs       unknown (a machine program without its HLO)\n";
  out += fmt::format("roofline (padded) {}; (model) {}\n", formatSeconds(p.hwRooflineSeconds),
                     p.modelKnown ? formatSeconds(p.modelRooflineSeconds) : std::string("unknown"));
  if (p.idealKnown)
    out += fmt::format(
        "ideal             {} ({}-bound: model FLOPs / peak {}, parameters + constants + results / "
        "HBM {}); achieved {:.1f}% of ideal\n",
        formatSeconds(p.idealSeconds), p.idealComputeSeconds > p.idealMemorySeconds ? "compute" : "memory",
        formatSeconds(p.idealComputeSeconds), formatSeconds(p.idealMemorySeconds),
        p.seconds > 0 ? 100 * p.idealSeconds / p.seconds : 0);
  return out;
}

void addStatsJson(const Profile& p, std::string& statsJson) {
  ojson j = ojson::parse(statsJson, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  ojson m;
  m["mxu_flops_padded"] = p.hwFlops;
  m["mxu_utilization_padded"] = p.hwUtilization;
  m["roofline_seconds_padded"] = p.hwRooflineSeconds;
  if (p.modelKnown) {
    m["flops"] = p.modelFlops;
    m["flop_utilization"] = p.modelUtilization;
    m["roofline_seconds"] = p.modelRooflineSeconds;
  } else {
    m["flops"] = nullptr;
  }
  if (p.idealKnown)
    m["ideal"] = {{"seconds", p.idealSeconds},
                  {"compute_seconds", p.idealComputeSeconds},
                  {"memory_seconds", p.idealMemorySeconds},
                  {"bound", p.idealComputeSeconds > p.idealMemorySeconds ? "compute" : "memory"},
                  {"fraction", p.seconds > 0 ? p.idealSeconds / p.seconds : 0}};
  j["model"] = m;
  statsJson = j.dump(2) + "\n";
}

std::optional<std::string> diffProfiles(const std::string& aName, const std::string& aText,
                                        const std::string& bName, const std::string& bText,
                                        DiagnosticEngine& diags) {
  auto load = [&](const std::string& name, const std::string& text) -> std::optional<nlohmann::json> {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("profile_version") || !j["ops"].is_array() ||
        !j["seconds"].is_number()) {
      diags.error(
          fmt::format("{}: not a profile (write one with tpu-run --profile=json --profile-file=FILE)", name));
      return std::nullopt;
    }
    return j;
  };
  auto a = load(aName, aText);
  if (!a) return std::nullopt;
  auto b = load(bName, bText);
  if (!b) return std::nullopt;
  struct Row {
    double a = 0, b = 0;
    std::string kind;
  };
  std::map<std::string, Row> rows;
  auto collect = [&](const nlohmann::json& j, bool first) {
    for (const auto& op : j["ops"]) {
      if (!op.is_object() || !op.contains("key") || !op["key"].is_string() || !op["seconds"].is_number())
        continue;
      Row& r = rows[op["key"].get<std::string>()];
      (first ? r.a : r.b) += op["seconds"].get<double>();
      if (op.contains("kind") && op["kind"].is_string() && r.kind.empty())
        r.kind = op["kind"].get<std::string>();
    }
  };
  collect(*a, true);
  collect(*b, false);
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& x, auto& y) {
    return std::fabs(x.second.b - x.second.a) > std::fabs(y.second.b - y.second.a);
  });
  double ta = (*a)["seconds"].get<double>(), tb = (*b)["seconds"].get<double>();
  std::string out = fmt::format("profile diff: {} -> {}\ntotal {} -> {} ({:+.1f}%)\n\n", aName, bName,
                                formatSeconds(ta), formatSeconds(tb), ta > 0 ? 100 * (tb - ta) / ta : 0);
  out += fmt::format("{:>10} {:>10} {:>11} {:>8}  {:<14} {}\n", "a", "b", "b - a", "change", "kind", "op");
  for (const auto& [key, r] : sorted) {
    std::string change = r.a == 0   ? "new"
                         : r.b == 0 ? "gone"
                                    : fmt::format("{:+.1f}%", 100 * (r.b - r.a) / r.a);
    double d = r.b - r.a;
    out += fmt::format("{:>10} {:>10} {:>11} {:>8}  {:<14} {}\n", r.a ? formatSeconds(r.a) : "-",
                       r.b ? formatSeconds(r.b) : "-", (d < 0 ? "-" : "+") + formatSeconds(std::fabs(d)),
                       change, r.kind.empty() ? "-" : r.kind, key);
  }
  return out;
}

}  // namespace tpu::profile
