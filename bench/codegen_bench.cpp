// Code-generation benchmark, all figures taken in one run:
//  (a) compile time (llo-gen lowering + scheduling, then assembling the text)
//      of the largest corpus module that compiles today;
//  (b) simulated time of generated code against the roofline bound of the
//      same chip (v5e): a large bf16 matmul (MXU utilisation), an unfused
//      chain of elementwise ops on a large f32 array (HBM bandwidth), a small
//      MLP, and a convolutional net (unfused and in output fusions) and
//      ssd_mobilenet when they compile.
// Usage: codegen_bench [matmul_size=4096] [elementwise_elems=16777216]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/codegen.h"
#include "hlo/io/hlo_io.h"
#include "llo/text.h"
#include "sim/sim.h"
#include "support/source.h"

using namespace tpu;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string firstError(const DiagnosticEngine& diags) {
  for (const Diagnostic& d : diags.diagnostics())
    if (d.severity == Severity::Error) return d.message;
  return "unknown error";
}

std::unique_ptr<hlo::Module> parse(const std::string& name, const std::string& text, std::string& error) {
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>(name, text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) error = firstError(diags);
  return std::move(loaded.module);
}

// Inputs of small random values of each argument's element type.
std::vector<std::string> randomInputs(const isa::Program& p, const isa::Entry& e) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> f(-1.0f, 1.0f);
  std::vector<std::string> out;
  for (uint32_t id : e.args) {
    const isa::Buffer& b = p.buffers[id];
    std::string bytes(b.sizeBytes(), '\0');
    int w = isa::dtypeBytes(b.dtype);
    for (size_t i = 0; i + w <= bytes.size(); i += w) {
      float x = f(rng);
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      if (b.dtype == isa::DType::F32) std::memcpy(&bytes[i], &bits, 4);
      else if (b.dtype == isa::DType::Bf16) {
        uint16_t h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&bytes[i], &h, 2);
      } else {
        bytes[i] = static_cast<char>(rng() % 5);
      }
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

struct Measured {
  bool ok = false;
  std::string error;
  sim::SimReport report;
  double compileSeconds = 0;
  double simSeconds = 0;
  double kernelBoundSeconds = 0;  // sum of llo-gen's per-kernel roofline estimates (unfused bound)
};

Measured compileAndSimulate(const std::string& name, const std::string& text, const target::TargetDesc& t,
                            llo::ScheduleMode mode = llo::ScheduleMode::List, codegen::CodegenOptions options = {}) {
  Measured m;
  auto module = parse(name, text, m.error);
  if (!module) return m;
  DiagnosticEngine diags;
  options.schedule = mode;
  double t0 = now();
  auto program = codegen::compileModule(*module, t, options, diags);
  m.compileSeconds = now() - t0;
  if (!program) {
    m.error = firstError(diags);
    return m;
  }
  if (auto gen = codegen::generateLlo(*module, t, options, diags)) {
    for (const codegen::KernelStats& k : gen->stats.kernels) m.kernelBoundSeconds += k.estimatedCycles / t.clockHz;
  }
  t0 = now();
  auto r = sim::simulate(*program, t, randomInputs(*program, program->entries.front()), sim::SimOptions{}, diags);
  m.simSeconds = now() - t0;
  if (!r) {
    m.error = firstError(diags);
    return m;
  }
  m.ok = true;
  m.report = r->report;
  return m;
}

// Roofline bound of work `flops` that must move at least `bytes` through HBM.
double roofline(const target::TargetDesc& t, double flops, double bytes) {
  auto rb = target::rooflineBound(t, flops, bytes);
  return rb.seconds;
}

void printRun(const char* what, const Measured& m, double boundSeconds) {
  const sim::SimReport& r = m.report;
  std::printf("%-34s %10.1f us  bound %10.1f us  = %5.1f%% of roofline  (MXU %5.1f%%, HBM %5.1f%%; %llu cycles; "
              "compile %.2f s, simulate %.1f s)\n",
              what, r.seconds * 1e6, boundSeconds * 1e6, 100 * boundSeconds / r.seconds, 100 * r.mxuUtilization,
              100 * r.hbmUtilization, static_cast<unsigned long long>(r.cycles), m.compileSeconds, m.simSeconds);
}

std::string matmulText(int64_t n) {
  return "HloModule matmul\n\nENTRY main {\n"
         "  a = bf16[" + std::to_string(n) + "," + std::to_string(n) + "] parameter(0)\n"
         "  b = bf16[" + std::to_string(n) + "," + std::to_string(n) + "] parameter(1)\n"
         "  ROOT d = f32[" + std::to_string(n) + "," + std::to_string(n) +
         "] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
}

// x -> x + y -> * y -> max(., 0) -> - y: four kernels, each reading two
// arrays and writing one (the module is not fused).
std::string elementwiseText(int64_t n) {
  std::string s = "f32[" + std::to_string(n) + "]";
  return "HloModule chain\n\nENTRY main {\n"
         "  x = " + s + " parameter(0)\n"
         "  y = " + s + " parameter(1)\n"
         "  a = " + s + " add(x, y)\n"
         "  b = " + s + " multiply(a, y)\n"
         "  c = " + s + " maximum(b, x)\n"
         "  ROOT d = " + s + " subtract(c, y)\n}\n";
}

std::string mlpText(int64_t batch, int64_t width) {
  std::string s = "HloModule mlp\n\nENTRY main {\n";
  std::string act = "f32[" + std::to_string(batch) + "," + std::to_string(width) + "]";
  s += "  x = " + act + " parameter(0)\n";
  std::string prev = "x";
  for (int l = 0; l < 3; ++l) {
    std::string L = std::to_string(l);
    s += "  w" + L + " = f32[" + std::to_string(width) + "," + std::to_string(width) + "] parameter(" +
         std::to_string(1 + 2 * l) + ")\n";
    s += "  b" + L + " = f32[" + std::to_string(width) + "] parameter(" + std::to_string(2 + 2 * l) + ")\n";
    s += "  d" + L + " = " + act + " dot(" + prev + ", w" + L + "), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n";
    s += "  bb" + L + " = " + act + " broadcast(b" + L + "), dimensions={1}\n";
    s += "  sum" + L + " = " + act + " add(d" + L + ", bb" + L + ")\n";
    s += "  z" + L + " = f32[] constant(0)\n";
    s += "  zb" + L + " = " + act + " broadcast(z" + L + "), dimensions={}\n";
    s += "  " + std::string(l == 2 ? "ROOT " : "") + "r" + L + " = " + act + " maximum(sum" + L + ", zb" + L + ")\n";
    prev = "r" + L;
  }
  return s + "}\n";
}

// The same MLP with each layer (dot, bias, relu) in a kOutput fusion, as
// XLA's fusion pass leaves it: llo-gen lowers each as one matmul kernel.
std::string mlpFusedText(int64_t batch, int64_t width) {
  std::string act = "f32[" + std::to_string(batch) + "," + std::to_string(width) + "]";
  std::string wt = "f32[" + std::to_string(width) + "," + std::to_string(width) + "]";
  std::string bt = "f32[" + std::to_string(width) + "]";
  std::string s = "HloModule mlp_fused\n\nlayer {\n";
  s += "  x = " + act + " parameter(0)\n  w = " + wt + " parameter(1)\n  b = " + bt + " parameter(2)\n";
  s += "  d = " + act + " dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n";
  s += "  bb = " + act + " broadcast(b), dimensions={1}\n  sum = " + act + " add(d, bb)\n";
  s += "  z = f32[] constant(0)\n  zb = " + act + " broadcast(z), dimensions={}\n";
  s += "  ROOT r = " + act + " maximum(sum, zb)\n}\n\n";
  for (int l = 1; l < 3; ++l) {
    std::string body = s.substr(s.find("layer {"), s.find("}\n\n") - s.find("layer {") + 3);
    s += "layer" + std::to_string(l) + body.substr(5) + "\n";
  }
  s += "ENTRY main {\n  x = " + act + " parameter(0)\n";
  std::string prev = "x";
  for (int l = 0; l < 3; ++l) {
    std::string L = std::to_string(l);
    s += "  w" + L + " = " + wt + " parameter(" + std::to_string(1 + 2 * l) + ")\n";
    s += "  b" + L + " = " + bt + " parameter(" + std::to_string(2 + 2 * l) + ")\n";
    s += "  " + std::string(l == 2 ? "ROOT " : "") + "f" + L + " = " + act + " fusion(" + prev + ", w" + L + ", b" + L +
         "), kind=kOutput, calls=layer" + (l ? L : "") + "\n";
    prev = "f" + L;
  }
  return s + "}\n";
}

// Row softmax over f32[rows, cols]: two reductions whose results are
// broadcast back. `fused`: the whole softmax in one fusion, which no
// streaming kernel covers (llo-gen keeps its intermediates in VMEM);
// otherwise the same instructions unfused, one kernel each.
std::string softmaxText(int64_t rows, int64_t cols, bool fused) {
  std::string x = fmt::format("f32[{},{}]", rows, cols), r = fmt::format("f32[{}]", rows);
  std::string reducers =
      "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
      "ad {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";
  std::string body = fmt::format(
      "  x = {0} parameter(0)\n  ninf = f32[] constant(-inf)\n  zero = f32[] constant(0)\n"
      "  m = {1} reduce(x, ninf), dimensions={{1}}, to_apply=mx\n  mb = {0} broadcast(m), dimensions={{0}}\n"
      "  d = {0} subtract(x, mb)\n  e = {0} exponential(d)\n"
      "  s = {1} reduce(e, zero), dimensions={{1}}, to_apply=ad\n  sb = {0} broadcast(s), dimensions={{0}}\n"
      "  ROOT y = {0} divide(e, sb)\n",
      x, r);
  if (!fused) return "HloModule softmax\n" + reducers + "ENTRY main {\n" + body + "}\n";
  return "HloModule softmax_fused\n" + reducers + "softmax {\n" + body + "}\nENTRY main {\n  p = " + x +
         " parameter(0)\n  ROOT f = " + x + " fusion(p), kind=kInput, calls=softmax\n}\n";
}

std::string convNetText() {
  return "HloModule convnet\n\nENTRY main {\n"
         "  x = f32[8,32,32,64] parameter(0)\n"
         "  w1 = f32[3,3,64,128] parameter(1)\n"
         "  w2 = f32[3,3,128,128] parameter(2)\n"
         "  c1 = f32[8,32,32,128] convolution(x, w1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
         "  z = f32[] constant(0)\n"
         "  zb = f32[8,32,32,128] broadcast(z), dimensions={}\n"
         "  r1 = f32[8,32,32,128] maximum(c1, zb)\n"
         "  c2 = f32[8,32,32,128] convolution(r1, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
         "  ROOT r2 = f32[8,32,32,128] maximum(c2, zb)\n}\n";
}

// The same conv net with each convolution and its relu in a kOutput fusion:
// llo-gen lowers each as one im2col matmul kernel with the relu applied to
// the C tiles in VMEM.
std::string convNetFusedText() {
  auto layer = [](const std::string& name, int64_t in) {
    std::string w = "f32[3,3," + std::to_string(in) + ",128]";
    return name + " {\n  x = f32[8,32,32," + std::to_string(in) + "] parameter(0)\n  w = " + w +
           " parameter(1)\n"
           "  c = f32[8,32,32,128] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
           "  z = f32[] constant(0)\n  zb = f32[8,32,32,128] broadcast(z), dimensions={}\n"
           "  ROOT r = f32[8,32,32,128] maximum(c, zb)\n}\n\n";
  };
  return "HloModule convnet_fused\n\n" + layer("layer1", 64) + layer("layer2", 128) +
         "ENTRY main {\n"
         "  x = f32[8,32,32,64] parameter(0)\n"
         "  w1 = f32[3,3,64,128] parameter(1)\n"
         "  w2 = f32[3,3,128,128] parameter(2)\n"
         "  r1 = f32[8,32,32,128] fusion(x, w1), kind=kOutput, calls=layer1\n"
         "  ROOT r2 = f32[8,32,32,128] fusion(r1, w2), kind=kOutput, calls=layer2\n}\n";
}

// Sort of f32 rows along the last dimension, ascending.
std::string sortText(int64_t rows, int64_t n) {
  std::string x = fmt::format("f32[{},{}]", rows, n);
  return "HloModule sort\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
         "  ROOT c = pred[] compare(a, b), direction=LT\n}\nENTRY main {\n  x = " + x + " parameter(0)\n"
         "  ROOT s = " + x + " sort(x), dimensions={1}, to_apply=cmp\n}\n";
}

// Forward fft of `batch` transforms of length n, in `type` (c64 or c128).
std::string fftText(int64_t batch, int64_t n, const char* type = "c64") {
  std::string x = fmt::format("{}[{},{}]", type, batch, n);
  return "HloModule fft\nENTRY main {\n  x = " + x + " parameter(0)\n  ROOT f = " + x +
         " fft(x), fft_type=FFT, fft_length={" + std::to_string(n) + "}\n}\n";
}

// softmax(q k^T * c) v as one fusion over bf16[heads, s, 128] queries and
// bf16[heads, t, 128] keys and values, the softmax in f32, bf16 result.
std::string attentionText(int64_t heads, int64_t s, int64_t t) {
  std::string q = fmt::format("bf16[{},{},128]", heads, s), kv = fmt::format("bf16[{},{},128]", heads, t);
  std::string sc = fmt::format("f32[{},{},{}]", heads, s, t), row = fmt::format("f32[{},{}]", heads, s);
  std::string params = fmt::format("  q = {0} parameter(0)\n  k = {1} parameter(1)\n  v = {1} parameter(2)\n"
                                   "  c = f32[] parameter(3)\n", q, kv);
  return "HloModule attention\n"
         "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
         "ad {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
         "attn {\n" + params +
         fmt::format("  d = {0} dot(q, k), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
                     "rhs_contracting_dims={{2}}\n"
                     "  cb = {0} broadcast(c), dimensions={{}}\n  x = {0} multiply(d, cb)\n"
                     "  ninf = f32[] constant(-inf)\n  m = {1} reduce(x, ninf), dimensions={{2}}, to_apply=mx\n"
                     "  mb = {0} broadcast(m), dimensions={{0,1}}\n  df = {0} subtract(x, mb)\n"
                     "  e = {0} exponential(df)\n  z = f32[] constant(0)\n"
                     "  su = {1} reduce(e, z), dimensions={{2}}, to_apply=ad\n"
                     "  sb = {0} broadcast(su), dimensions={{0,1}}\n  pf = {0} divide(e, sb)\n"
                     "  p = bf16[{2},{3},{4}] convert(pf)\n"
                     "  ROOT o = {5} dot(p, v), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, "
                     "lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}\n}}\n",
                     sc, row, heads, s, t, q) +
         "ENTRY main {\n" + params + "  ROOT f = " + q + " fusion(q, k, v, c), kind=kCustom, calls=attn\n}\n";
}

std::string readFile(const std::filesystem::path& p) {
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mmSize = argc > 1 ? std::atoll(argv[1]) : 4096;
  int64_t ewElems = argc > 2 ? std::atoll(argv[2]) : int64_t{1} << 24;
  DiagnosticEngine tdiags;
  auto target = target::loadTarget("v5e", tdiags);
  if (!target) return 1;
  const target::TargetDesc& t = *target;
  std::printf("target %s: %.3g bf16 FLOP/s, %.3g B/s HBM\n\n", t.name.c_str(),
              target::peakFlopsPerCore(t, target::MathKind::Bf16), t.memory.hbmBytesPerSecond);

  // (a) Compile time of the largest corpus module that compiles.
  std::vector<std::pair<uintmax_t, std::filesystem::path>> corpus;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR))
    if (e.path().extension() == ".hlo") corpus.push_back({e.file_size(), e.path()});
  std::sort(corpus.begin(), corpus.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  int rejected = 0;
  for (const auto& [size, path] : corpus) {
    std::string text = readFile(path), error;
    auto module = parse(path.filename().string(), text, error);
    if (!module) {
      ++rejected;
      continue;
    }
    DiagnosticEngine diags;
    codegen::CodegenOptions options;
    auto gen = codegen::generateLlo(*module, t, options, diags);
    if (!gen) {
      ++rejected;
      continue;
    }
    double best[2] = {1e30, 1e30};
    size_t bundles = 0, ops = 0;
    for (int mode = 0; mode < 2; ++mode)
      for (int rep = 0; rep < 3; ++rep) {
        DiagnosticEngine d;
        options.schedule = mode ? llo::ScheduleMode::None : llo::ScheduleMode::List;
        double t0 = now();
        auto g = codegen::generateLlo(*module, t, options, d);
        SourceFile file("m.llo", g->llo);
        llo::AsmOptions ao;
        auto assembled = llo::assembleLlo(file, ao, d);
        best[mode] = std::min(best[mode], now() - t0);
        if (mode == 0 && assembled) {
          bundles = assembled->program.bundles.size();
          ops = g->schedule.ops;
        }
      }
    std::printf("(a) compile time, largest corpus module that compiles: %s (%ju bytes; %d larger ones do not "
                "compile yet)\n",
                path.filename().c_str(), size, rejected);
    std::printf("    llo-gen + llo-asm, list-scheduled: %.1f ms (%zu ops in %zu bundles); unscheduled (greedy "
                "bundling): %.1f ms\n\n",
                1e3 * best[0], ops, bundles, 1e3 * best[1]);
    break;
  }

  // (b) Simulated time against the roofline bound.
  std::printf("(b) simulated time on %s against the roofline bound (max of FLOPs / peak and minimum HBM bytes / "
              "bandwidth)\n",
              t.name.c_str());
  {
    double n = static_cast<double>(mmSize);
    Measured m = compileAndSimulate("matmul", matmulText(mmSize), t);
    std::string what = fmt::format("matmul bf16 {0}x{0}x{0}", mmSize);
    if (!m.ok) {
      std::printf("%-34s failed: %s\n", what.c_str(), m.error.c_str());
    } else {
      printRun(what.c_str(), m, roofline(t, 2 * n * n * n, n * n * 2 * 2 + n * n * 4));
      std::printf("%-34s MXU utilisation %.1f%% (target >= 85%%)\n", "", 100 * m.report.mxuUtilization);
      Measured u = compileAndSimulate("matmul", matmulText(mmSize), t, llo::ScheduleMode::None);
      if (u.ok) std::printf("%-34s unscheduled (same code, greedy in-order bundling): MXU %.1f%%, %llu cycles\n", "",
                            100 * u.report.mxuUtilization, static_cast<unsigned long long>(u.report.cycles));
    }
  }
  {
    double n = static_cast<double>(ewElems);
    Measured m = compileAndSimulate("chain", elementwiseText(ewElems), t);
    std::string what = fmt::format("elementwise chain f32[{}] x4", ewElems);
    if (!m.ok) {
      std::printf("%-34s failed: %s\n", what.c_str(), m.error.c_str());
    } else {
      printRun(what.c_str(), m, roofline(t, 0, 4 * 3 * 4 * n));
      std::printf("%-34s HBM bandwidth %.1f%% (target >= 80%%)\n", "", 100 * m.report.hbmUtilization);
      Measured u = compileAndSimulate("chain", elementwiseText(ewElems), t, llo::ScheduleMode::None);
      if (u.ok) std::printf("%-34s unscheduled: HBM %.1f%%, %llu cycles\n", "", 100 * u.report.hbmUtilization,
                            static_cast<unsigned long long>(u.report.cycles));
    }
  }
  {
    int64_t batch = 512, width = 1024;
    double flops = 3 * 2.0 * batch * width * width;
    double bytes = 4.0 * (batch * width * 2 + 3 * (width * width + width));
    Measured m = compileAndSimulate("mlp", mlpText(batch, width), t);
    std::string what = fmt::format("MLP f32 {}x{} x3 (dot+add+relu)", batch, width);
    if (!m.ok) std::printf("%-34s failed: %s\n", what.c_str(), m.error.c_str());
    else printRun(what.c_str(), m, roofline(t, flops, bytes));
    if (m.ok)
      std::printf("%-34s unfused (one kernel per HLO op, as lowered): sum of per-kernel bounds %.1f us = %.1f%% "
                  "of that\n",
                  "", m.kernelBoundSeconds * 1e6, 100 * m.kernelBoundSeconds / m.report.seconds);
    Measured f = compileAndSimulate("mlp_fused", mlpFusedText(batch, width), t);
    std::string fwhat = fmt::format("MLP f32 {}x{} x3, output fusions", batch, width);
    if (!f.ok) std::printf("%-34s failed: %s\n", fwhat.c_str(), f.error.c_str());
    else printRun(fwhat.c_str(), f, roofline(t, flops, bytes));
    if (m.ok && f.ok)
      std::printf("%-34s fused / unfused simulated time: %.2fx faster\n", "", m.report.seconds / f.report.seconds);
  }
  {
    int64_t rows = 1024, cols = 2048;
    double bytes = 4.0 * 2 * rows * cols;
    Measured u = compileAndSimulate("softmax", softmaxText(rows, cols, false), t);
    Measured f = compileAndSimulate("softmax_fused", softmaxText(rows, cols, true), t);
    std::string what = fmt::format("softmax f32[{},{}], unfused", rows, cols);
    if (!u.ok) std::printf("%-34s failed: %s\n", what.c_str(), u.error.c_str());
    else printRun(what.c_str(), u, roofline(t, 0, bytes));
    std::string fwhat = fmt::format("softmax f32[{},{}], one fusion", rows, cols);
    if (!f.ok) std::printf("%-34s failed: %s\n", fwhat.c_str(), f.error.c_str());
    else printRun(fwhat.c_str(), f, roofline(t, 0, bytes));
    if (u.ok && f.ok)
      std::printf("%-34s fused (intermediates in VMEM) / unfused simulated time: %.2fx faster\n", "",
                  u.report.seconds / f.report.seconds);
  }
  {
    double flops = 2.0 * 8 * 32 * 32 * 128 * 9 * (64 + 128);
    double bytes = 4.0 * (8 * 32 * 32 * 64 + 9 * 64 * 128 + 9 * 128 * 128 + 8 * 32 * 32 * 128);
    Measured m = compileAndSimulate("convnet", convNetText(), t);
    if (!m.ok) std::printf("%-34s skipped: does not compile yet (%s)\n", "conv net 2x conv3x3+relu", m.error.c_str());
    else printRun("conv net 2x conv3x3+relu", m, roofline(t, flops, bytes));
    Measured f = compileAndSimulate("convnet_fused", convNetFusedText(), t);
    if (!f.ok) std::printf("%-34s failed: %s\n", "conv net, output fusions", f.error.c_str());
    else printRun("conv net, output fusions", f, roofline(t, flops, bytes));
    if (m.ok && f.ok)
      std::printf("%-34s fused / unfused simulated time: %.2fx faster\n", "", m.report.seconds / f.report.seconds);
  }
  {
    // Attention over rows of 2048 keys (one block, exact softmax), 8192
    // keys (an online softmax over key blocks of 2048, K and V streamed
    // double-buffered) and 65536 keys (a head's K and V, 32 MiB, past what
    // VMEM holds in two slots): per-key time compares the two forms.
    const int64_t shapes[3][3] = {{8, 512, 2048}, {8, 512, 8192}, {1, 512, 65536}};
    for (const auto& sh : shapes) {
      int64_t heads = sh[0], s = sh[1], keys = sh[2];
      double flops = 4.0 * heads * s * keys * 128, bytes = 2.0 * heads * 128 * (2 * s + 2 * keys);
      Measured m = compileAndSimulate("attention", attentionText(heads, s, keys), t);
      std::string what = fmt::format("attention bf16[{},{},128] x {} keys", heads, s, keys);
      if (!m.ok) {
        std::printf("%-34s failed: %s\n", what.c_str(), m.error.c_str());
        continue;
      }
      printRun(what.c_str(), m, roofline(t, flops, bytes));
      std::printf("%-34s %.2f ns per key and head\n", "", 1e9 * m.report.seconds / static_cast<double>(keys * heads));
    }
  }
  {
    // Kernels that stream through HBM because their rows do not fit VMEM,
    // with VMEM cut to 256 KiB (v5e's 128 MiB / 512) so modest sizes take
    // that path: the external sort's chunk passes and the long fft's
    // streamed stages (both double-buffered: DMA overlaps compute).
    codegen::CodegenOptions small;
    small.vmemFraction = 1.0 / 512;
    int64_t rows = 4, n = 131072;
    Measured s = compileAndSimulate("sort", sortText(rows, n), t, llo::ScheduleMode::List, small);
    std::string what = fmt::format("external sort f32[{},{}] 256K VMEM", rows, n);
    if (!s.ok) std::printf("%-34s failed: %s\n", what.c_str(), s.error.c_str());
    else printRun(what.c_str(), s, roofline(t, 0, 2.0 * 4 * rows * n));
    int64_t batch = 128, len = 1024;
    Measured f = compileAndSimulate("fft", fftText(batch, len), t, llo::ScheduleMode::List, small);
    std::string fwhat = fmt::format("long fft c64[{},{}] 256K VMEM", batch, len);
    if (!f.ok) std::printf("%-34s failed: %s\n", fwhat.c_str(), f.error.c_str());
    else printRun(fwhat.c_str(), f, roofline(t, 5.0 * batch * len * 10, 2.0 * 8 * batch * len));
    Measured f2 = compileAndSimulate("fft128", fftText(batch, len, "c128"), t, llo::ScheduleMode::List, small);
    std::string f2what = fmt::format("long fft c128[{},{}] 256K VMEM", batch, len);
    if (!f2.ok) std::printf("%-34s failed: %s\n", f2what.c_str(), f2.error.c_str());
    else printRun(f2what.c_str(), f2, roofline(t, 5.0 * batch * len * 10, 2.0 * 16 * batch * len));
    std::printf("%-34s (bounds: input + output bytes / HBM bandwidth; fft 5 n log2 n flops)\n", "");
  }
  {
    std::string text = readFile(std::filesystem::path(TPU_CORPUS_DIR) / "ssd_mobilenet_tf.hlo");
    Measured m = compileAndSimulate("ssd_mobilenet_tf", text, t);
    if (!m.ok) {
      std::printf("%-34s skipped: does not compile yet (%s)\n", "ssd_mobilenet", m.error.c_str());
    } else {
      double hbm = static_cast<double>(m.report.hbmBytesRead + m.report.hbmBytesWritten);
      (void)hbm;
      printRun("ssd_mobilenet", m, m.report.roofline.seconds);
      std::printf("%-34s (bound from the FLOPs and HBM bytes the simulator counted)\n", "");
    }
  }
  return 0;
}
