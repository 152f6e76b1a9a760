#include "target/target.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/file_io.h"
#include "support/file_kind.h"
#include "support/tool.h"
#include "target/builtin_targets.h"

namespace tpu::target {

namespace {

constexpr std::array<std::string_view, kNumSlotClasses> kSlotNames = {
    "scalar", "ctrl", "vld", "vst", "valu", "eup", "xlu", "mxu", "dma", "misc"};

constexpr std::array<std::string_view, kNumLatencyClasses> kLatencyNames = {
    "scalar_alu",   "scalar_mul",      "smem_load",  "branch",  "vector_load", "vector_store",
    "vector_alu",   "vector_cvt",      "eup",        "xlu_reduce", "xlu_permute", "xlu_transpose",
    "mxu_weight_push", "mxu_matmul",   "mxu_pop",    "dma_issue", "sync"};

using nlohmann::json;

// Reads fields of one JSON object, reporting the first problem of each
// field with its dotted path. A field is either a plain value or an object
// {"value": ..., "notes": "..."} that documents where the number comes from.
class FieldReader {
 public:
  FieldReader(const json& object, std::string path, const SourceFile& file, DiagnosticEngine& diags)
      : object_(object), path_(std::move(path)), file_(file), diags_(diags) {}

  std::string fieldPath(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  const json* raw(std::string_view key, bool required = true) {
    auto it = object_.find(std::string(key));
    if (it == object_.end()) {
      if (required) fail(fmt::format("missing field '{}'", fieldPath(key)));
      return nullptr;
    }
    const json* v = &*it;
    if (v->is_object() && v->contains("value")) v = &(*v)["value"];
    return v;
  }

  std::optional<FieldReader> object(std::string_view key) {
    auto it = object_.find(std::string(key));
    if (it == object_.end()) {
      fail(fmt::format("missing field '{}'", fieldPath(key)));
      return std::nullopt;
    }
    if (!it->is_object()) {
      fail(fmt::format("field '{}' must be an object", fieldPath(key)));
      return std::nullopt;
    }
    return FieldReader(*it, fieldPath(key), file_, diags_);
  }

  double number(std::string_view key, bool positive = true, bool required = true, double fallback = 0) {
    const json* v = raw(key, required);
    if (!v) return fallback;
    if (!v->is_number()) {
      fail(fmt::format("field '{}' must be a number, not {}", fieldPath(key), v->type_name()));
      return fallback;
    }
    double d = v->get<double>();
    if (!std::isfinite(d) || (positive ? d <= 0 : d < 0)) {
      fail(fmt::format("field '{}' must be {}, got {}", fieldPath(key),
                       positive ? "positive" : "non-negative", v->dump()));
      return fallback;
    }
    return d;
  }

  int64_t integer(std::string_view key, bool positive = true, bool required = true, int64_t fallback = 0,
                  int64_t max = int64_t{1} << 52) {
    const json* v = raw(key, required);
    if (!v) return fallback;
    if (!v->is_number_integer() && !(v->is_number_float() && isIntegral(v->get<double>()))) {
      fail(fmt::format("field '{}' must be an integer, not {}", fieldPath(key),
                       v->is_number() ? v->dump() : std::string(v->type_name())));
      return fallback;
    }
    double d = v->get<double>();
    if (positive ? d <= 0 : d < 0) {
      fail(fmt::format("field '{}' must be {}, got {}", fieldPath(key),
                       positive ? "positive" : "non-negative", v->dump()));
      return fallback;
    }
    if (d > static_cast<double>(max)) {
      fail(fmt::format("field '{}' is too large: {} (at most {})", fieldPath(key), v->dump(), max));
      return fallback;
    }
    return static_cast<int64_t>(d);
  }

  bool boolean(std::string_view key) {
    const json* v = raw(key);
    if (!v) return false;
    if (!v->is_boolean()) {
      fail(fmt::format("field '{}' must be true or false, not {}", fieldPath(key), v->type_name()));
      return false;
    }
    return v->get<bool>();
  }

  std::string string(std::string_view key, bool required = true) {
    const json* v = raw(key, required);
    if (!v) return {};
    if (!v->is_string()) {
      fail(fmt::format("field '{}' must be a string, not {}", fieldPath(key), v->type_name()));
      return {};
    }
    return v->get<std::string>();
  }

  void fail(std::string message) { diags_.error(SourceLocation{&file_, 0}, std::move(message)); }

 private:
  static bool isIntegral(double d) { return std::isfinite(d) && std::floor(d) == d; }

  const json& object_;
  std::string path_;
  const SourceFile& file_;
  DiagnosticEngine& diags_;
};

bool looksLikePath(std::string_view s) {
  return s.find('/') != std::string_view::npos || (s.size() > 5 && s.substr(s.size() - 5) == ".json");
}

}  // namespace

std::string_view slotClassName(SlotClass slot) {
  return slot == SlotClass::None ? "none" : kSlotNames[static_cast<size_t>(slot)];
}

std::string_view latencyClassName(LatencyClass cls) { return kLatencyNames[static_cast<size_t>(cls)]; }

int TargetDesc::totalSlots() const {
  int n = 0;
  for (int s : slots) n += s;
  return n;
}

std::vector<std::string> builtinTargetNames() {
  std::vector<std::string> names;
  for (const BuiltinTarget& t : builtinTargets()) names.emplace_back(t.name);
  return names;
}

namespace {
// Every tool that links the targets (it calls loadTarget, defined in this
// file) lets the harness check --target names as usage errors.
[[maybe_unused]] const bool kTargetNamesRegistered = (registerTargetNames(&builtinTargetNames), true);
}  // namespace

std::optional<TargetDesc> parseTarget(const SourceFile& file, DiagnosticEngine& diags) {
  json root;
  try {
    root = json::parse(file.contents());
  } catch (const json::parse_error& e) {
    size_t at = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    size_t colon = what.find(": ");
    diags.error(SourceLocation{&file, at},
                fmt::format("invalid JSON: {}", colon == std::string::npos ? what : what.substr(colon + 2)));
    return std::nullopt;
  }
  if (!root.is_object()) {
    diags.error(SourceLocation{&file, 0}, "a target description must be a JSON object");
    return std::nullopt;
  }
  size_t errorsBefore = diags.errorCount();
  TargetDesc t;
  t.json = std::string(file.contents());
  FieldReader top(root, "", file, diags);
  t.name = top.string("name");
  t.description = top.string("description", false);
  if (const json* v = top.raw("format_version", false); v && (!v->is_number_integer() || *v != 1))
    top.fail(fmt::format("unsupported target format_version {} (this build reads 1)", v->dump()));
  t.coresPerChip = static_cast<int>(top.integer("cores_per_chip", true, true, 0, 64));
  t.clockHz = top.number("clock_hz");

  if (auto mxu = top.object("mxu")) {
    t.mxu.count = static_cast<int>(mxu->integer("count", true, true, 0, 8));
    t.mxu.rows = static_cast<int>(mxu->integer("rows", true, true, 0, 1024));
    t.mxu.cols = static_cast<int>(mxu->integer("cols", true, true, 0, 1024));
    // The MXU ops move [8,128] register blocks through a [128,128] tile.
    if ((t.mxu.rows && t.mxu.rows != 128) || (t.mxu.cols && t.mxu.cols != 128))
      mxu->fail("fields 'mxu.rows' and 'mxu.cols' must be 128 (the ISA's MXU ops use 128x128 tiles)");
    t.mxu.int8 = mxu->boolean("int8");
    t.mxu.int8Rate = static_cast<int>(mxu->integer("int8_rate", true, false, 1, 16));
    t.mxu.matmulIntervalCycles = static_cast<int>(mxu->integer("matmul_interval_cycles", true, true, 0, 4096));
    t.mxu.resultFifoDepth = static_cast<int>(mxu->integer("result_fifo_depth", true, true, 0, 4096));
    t.mxu.publishedPeakBf16 = mxu->number("published_peak_bf16_flops", true, false);
    t.mxu.publishedPeakInt8 = mxu->number("published_peak_int8_ops", true, false);
  }
  if (auto mem = top.object("memory")) {
    t.memory.hbmBytes = static_cast<uint64_t>(mem->integer("hbm_bytes"));
    t.memory.hbmBytesPerSecond = mem->number("hbm_bytes_per_second");
    // VMEM and SMEM are addressed by 32-bit scalar registers.
    t.memory.vmemBytes = static_cast<uint64_t>(mem->integer("vmem_bytes", true, true, 0, int64_t{1} << 31));
    t.memory.smemBytes = static_cast<uint64_t>(mem->integer("smem_bytes", true, true, 0, int64_t{1} << 31));
    t.memory.cmemBytes = static_cast<uint64_t>(mem->integer("cmem_bytes", false, false));
    t.memory.vmemBytesPerCycle = static_cast<uint64_t>(mem->integer("vmem_bytes_per_cycle"));
  }
  if (auto regs = top.object("registers")) {
    // Register numbers must fit the 6-bit fields of the encoding (docs/ISA.md).
    t.registers.sregs = static_cast<int>(regs->integer("sregs", true, true, 0, 63));
    t.registers.vregs = static_cast<int>(regs->integer("vregs", true, true, 0, 64));
    t.registers.vmasks = static_cast<int>(regs->integer("vmasks", true, true, 0, 16));
    t.registers.sublanes = static_cast<int>(regs->integer("sublanes", true, true, 0, 8));
    t.registers.lanes = static_cast<int>(regs->integer("lanes", true, true, 0, 128));
    t.registers.laneBits = static_cast<int>(regs->integer("lane_bits", true, true, 0, 32));
    t.registers.semaphores = static_cast<int>(regs->integer("semaphores", true, true, 0, 64));
    if (t.registers.sublanes && t.registers.sublanes != 8)
      regs->fail("field 'registers.sublanes' must be 8 (the ISA's vector shape is 8x128x32-bit)");
    if (t.registers.lanes && t.registers.lanes != 128)
      regs->fail("field 'registers.lanes' must be 128 (the ISA's vector shape is 8x128x32-bit)");
    if (t.registers.laneBits && t.registers.laneBits != 32)
      regs->fail("field 'registers.lane_bits' must be 32 (the ISA's vector shape is 8x128x32-bit)");
  }
  if (auto slots = top.object("slots")) {
    for (size_t i = 0; i < kNumSlotClasses; ++i)
      t.slots[i] = static_cast<int>(slots->integer(kSlotNames[i], true, true, 0, 16));
    if (errorsBefore == diags.errorCount() && t.totalSlots() > kMaxBundleSlots)
      slots->fail(fmt::format("a bundle may have at most {} slots in total, the target has {}",
                              kMaxBundleSlots, t.totalSlots()));
    if (t.slots[static_cast<size_t>(SlotClass::Mxu)] > t.mxu.count && t.mxu.count > 0)
      slots->fail("field 'slots.mxu' must not exceed 'mxu.count'");
  }
  if (auto lat = top.object("latencies")) {
    for (size_t i = 0; i < kNumLatencyClasses; ++i)
      t.latencies[i] = static_cast<int>(lat->integer(kLatencyNames[i], true, true, 0, 100000));
  }
  if (auto dma = top.object("dma")) {
    t.dma.engines = static_cast<int>(dma->integer("engines", true, true, 0, 64));
    t.dma.latencyCycles = static_cast<int>(dma->integer("latency_cycles", false, true, 0, 10000000));
    t.dma.maxOutstanding = static_cast<int>(dma->integer("max_outstanding", true, true, 0, 4096));
    t.dma.descriptorDims = static_cast<int>(dma->integer("descriptor_dims", true, true, 0, 4));
  }
  if (auto ici = top.object("ici")) {
    t.ici.links = static_cast<int>(ici->integer("links", false, true, 0, 64));
    t.ici.bytesPerSecondPerLink = ici->number("bytes_per_second_per_link", false);
    t.ici.hopLatencyNs = ici->number("hop_latency_ns", false);
    t.ici.topology = ici->string("topology");
    // Optional (older user files lack them): without max_shape a target runs one chip.
    if (const json* shape = ici->raw("max_shape", false)) {
      if (!shape->is_array() || shape->empty() || shape->size() > 3) {
        ici->fail("field 'ici.max_shape' must be an array of 1 to 3 axis lengths");
      } else {
        for (const json& d : *shape) {
          if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > 4096) {
            ici->fail("field 'ici.max_shape' must hold axis lengths from 1 to 4096");
            break;
          }
          t.ici.maxShape.push_back(static_cast<int>(d.get<int64_t>()));
        }
        if (2 * static_cast<int>(shape->size()) > t.ici.links && errorsBefore == diags.errorCount())
          ici->fail(fmt::format("field 'ici.max_shape': a torus of {} axes needs {} links per chip, 'ici.links' is {}",
                                shape->size(), 2 * shape->size(), t.ici.links));
      }
    }
    t.ici.wrapMultiple = static_cast<int>(ici->integer("wraparound_multiple", false, false, 0, 4096));
  }
  if (diags.errorCount() != errorsBefore) return std::nullopt;

  // Derived peak must agree with the published one (TPU_FACTS.md), or the
  // description contradicts itself: the simulator's roofline uses the derived.
  auto checkPeak = [&](double published, MathKind kind, std::string_view field) {
    if (published <= 0) return;
    double derived = peakFlops(t, kind);
    if (std::fabs(derived - published) > 0.03 * published)
      diags.warning(SourceLocation{&file, 0},
                    fmt::format("derived peak {:.4g} (cores x MXUs x rows x cols x 2 x clock) differs from "
                                "mxu.{} = {:.4g} by more than 3%",
                                derived, field, published));
  };
  checkPeak(t.mxu.publishedPeakBf16, MathKind::Bf16, "published_peak_bf16_flops");
  if (t.mxu.int8) checkPeak(t.mxu.publishedPeakInt8, MathKind::Int8, "published_peak_int8_ops");
  return t;
}

std::optional<TargetDesc> loadTarget(std::string_view nameOrPath, DiagnosticEngine& diags) {
  if (!looksLikePath(nameOrPath) && !std::filesystem::exists(std::string(nameOrPath))) {
    for (const BuiltinTarget& b : builtinTargets()) {
      if (b.name != nameOrPath) continue;
      // Builtins are embedded; diagnostics (none expected) name the data file.
      static thread_local std::vector<std::unique_ptr<SourceFile>> files;
      files.push_back(std::make_unique<SourceFile>(fmt::format("src/target/data/{}.json", b.name),
                                                   std::string(b.json)));
      auto t = parseTarget(*files.back(), diags);
      return t;
    }
    std::string names;
    for (const std::string& n : builtinTargetNames()) names += (names.empty() ? "" : ", ") + n;
    diags.error(fmt::format("unknown target '{}' (built-in targets: {}; or give a .json file)", nameOrPath,
                            names));
    return std::nullopt;
  }
  auto file = readInputFile(std::string(nameOrPath), diags);
  if (!file || !checkFileKind(*file, {FileKind::Json}, "a target description (JSON)", diags))
    return std::nullopt;
  // The SourceFile must outlive diagnostics that point into it; keep it.
  static thread_local std::vector<std::unique_ptr<SourceFile>> files;
  files.push_back(std::move(file));
  return parseTarget(*files.back(), diags);
}

double peakFlopsPerCore(const TargetDesc& t, MathKind kind) {
  double perCycle = 2.0 * t.mxu.count * t.mxu.rows * t.mxu.cols;
  if (kind == MathKind::Int8) perCycle *= t.mxu.int8 ? t.mxu.int8Rate : 0;
  return perCycle * t.clockHz;
}

double peakFlops(const TargetDesc& t, MathKind kind) { return peakFlopsPerCore(t, kind) * t.coresPerChip; }

double hbmBytesPerSecond(const TargetDesc& t) { return t.memory.hbmBytesPerSecond; }

double ridgePoint(const TargetDesc& t, MathKind kind) { return peakFlops(t, kind) / hbmBytesPerSecond(t); }

RooflineBound rooflineBound(const TargetDesc& t, double flops, double bytes, MathKind kind) {
  RooflineBound b;
  double peak = peakFlops(t, kind);
  b.computeSeconds = peak > 0 ? flops / peak : 0;
  b.memorySeconds = bytes / hbmBytesPerSecond(t);
  b.seconds = std::max(b.computeSeconds, b.memorySeconds);
  b.computeBound = b.computeSeconds >= b.memorySeconds;
  b.intensity = bytes > 0 ? flops / bytes : 0;
  return b;
}

double kernelCycles(const TargetDesc& t, double flops, double hbmBytes, double dmaRoundTrips) {
  RooflineBound rb = rooflineBound(t, flops, hbmBytes);
  return rb.seconds * t.clockHz * t.coresPerChip + dmaRoundTrips * t.dma.latencyCycles;
}

}  // namespace tpu::target
