// Pod benchmark (issue 15 points 3 and 7). Three figures:
//  1. llo-gen's all-reduce of 64 MiB (f32) over 8 v5e chips (2x4) and 16
//     (4x4), as one snake ring and as rings along each torus axis, against
//     the ICI bound 2(N-1)/N * bytes / link bandwidth (target: >= 85%);
//  2. a 2-layer Megatron-style MLP (bf16, x[512,1024] -> 65536 -> 1024,
//     relu) on one chip against the same MLP split 4 ways (the first layer
//     by columns, the second by rows, then an all-reduce of the partial
//     outputs), both compiled by llo-gen (target: >= 3x faster);
//  3. below, the hand-written ICI schedule of a bidirectional ring
// all-reduce of 64 MiB over 8 v5e chips (2x4, the ring snakes through the
// slice so every step is one hop): 2(N-1) steps, each chip sending half of
// its 8 MiB chunk each way per step. It moves the data of a real ring
// all-reduce; the additions (VPU work that overlaps the transfers on a real
// chip) are left out, so the figure is the interconnect's. Printed against
// the ICI bound 2(N-1)/N * bytes / link bandwidth, and against the bound of
// a bidirectional ring (half of it).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "codegen/codegen.h"
#include "hlo/io/hlo_io.h"
#include "sim/run_program.h"
#include "sim/sim.h"
#include "target/topology.h"

namespace {

constexpr const char* kRing = R"(
.target v5e
.const BYTES = 67108864
.const N = 8
.const HALF = BYTES / N / 2
.buffer x : hbm f32[BYTES / 4]
.buffer rf : hbm f32[HALF / 4]
.buffer rb : hbm f32[HALF / 4]
.buffer y : hbm f32[HALF / 4]
.dma d chunk=HALF

.entry main(x) -> (y)
  sid.chip s1
  sadd s3, s1, 1
  ssub s4, s1, 1
  br.eq s1, 0, c0
  br.eq s1, 3, c3
  br.lt s1, 3, ready
  ssub s3, s1, 1
  sadd s4, s1, 1
  br.eq s1, 4, c4
  br.eq s1, 7, c7
  jmp ready
c0:
  smov s4, 4
  jmp ready
c3:
  smov s3, 7
  jmp ready
c4:
  smov s3, 0
  jmp ready
c7:
  smov s4, 3
ready:
  smov s10, 2 * (N - 1)
step:
  dma.remote d, s3, rf, x, sem1, sem2
  dma.remote d, s4, rb, x[HALF], sem3, sem4
  sem.wait sem1
  sem.wait sem3
  sem.wait sem2
  sem.wait sem4
  loop s10, step
  dma.h2h d, y, rf, sem0
  sem.wait sem0
  halt
)";

constexpr const char* kAllReduce = R"(HloModule ar64, replica_count=8
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p = f32[16777216] parameter(0)
  ROOT y = f32[16777216] all-reduce(p), replica_groups={}, to_apply=sum
}
)";

constexpr const char* kMlp1 = R"(HloModule mlp1
ENTRY main {
  x = bf16[512,1024] parameter(0)
  w1 = bf16[1024,65536] parameter(1)
  w2 = bf16[65536,1024] parameter(2)
  h = bf16[512,65536] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = bf16[] constant(0)
  zb = bf16[512,65536] broadcast(z), dimensions={}
  a = bf16[512,65536] maximum(h, zb)
  ROOT y = bf16[512,1024] dot(a, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)";

constexpr const char* kMlp4 = R"(HloModule mlp4, num_partitions=4
sum {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY main {
  x = bf16[512,1024] parameter(0)
  w1 = bf16[1024,16384] parameter(1)
  w2 = bf16[16384,1024] parameter(2)
  h = bf16[512,16384] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = bf16[] constant(0)
  zb = bf16[512,16384] broadcast(z), dimensions={}
  a = bf16[512,16384] maximum(h, zb)
  p = bf16[512,1024] dot(a, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT y = bf16[512,1024] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=sum
}
)";

void printDiags(const tpu::DiagnosticEngine& diags) {
  for (const auto& d : diags.diagnostics())
    std::fprintf(stderr, "%s", tpu::formatDiagnostic(d, tpu::DiagnosticFormat::Text, false).c_str());
}

// Compiles `hlo` with llo-gen for its pod and simulates it (zero inputs:
// timing does not depend on data). Returns the pod's cycles, or 0.
uint64_t compileAndRun(const char* name, const char* hlo, const std::string& topology, double* hostSeconds,
                       bool axisRings = true) {
  using namespace tpu;
  DiagnosticEngine diags;
  auto file = std::make_shared<SourceFile>(name, hlo);
  hlo::LoadedModule m = hlo::readModule(file, diags);
  auto target = target::loadTarget("v5e", diags);
  if (!m.module || !target) return printDiags(diags), 0;
  auto [R, P] = codegen::podDevices(*m.module, 0, 0);
  codegen::CodegenOptions options;
  options.replicas = R;
  options.partitions = P;
  options.topology = topology;
  options.allReduceRings = axisRings ? codegen::CodegenOptions::AllReduceRings::Axes
                                     : codegen::CodegenOptions::AllReduceRings::Snake;
  auto program = codegen::compileModule(*m.module, *target, options, diags);
  if (!program) return printDiags(diags), 0;
  auto topo = topology.empty() ? target::defaultTopology(*target, static_cast<int>(R * P), diags)
                               : target::parseTopology(topology, *target, static_cast<int>(R * P), diags);
  if (!topo) return printDiags(diags), 0;
  auto sig = sim::entrySignature(*program, "main", diags);
  if (!sig) return printDiags(diags), 0;
  std::vector<std::string> args;
  for (const auto& a : sig->args) args.emplace_back(a.bytes, '\0');
  std::vector<std::vector<std::string>> inputs(static_cast<size_t>(R * P), args);
  auto t0 = std::chrono::steady_clock::now();
  auto pod = sim::simulatePod(*program, *target, *topo, inputs, sim::SimOptions{}, diags);
  *hostSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!pod) return printDiags(diags), 0;
  return pod->cycles;
}

}  // namespace

int main() {
  using namespace tpu;
  {
    DiagnosticEngine d;
    auto target = target::loadTarget("v5e", d);
    if (!target) return 1;
    const double clock = target->clockHz, bw = target->ici.bytesPerSecondPerLink;
    // The snake ring (one bidirectional ring through every chip) against
    // rings along each torus axis (reduce-scatter + all-gather per axis,
    // two halves of the data taking the axes in opposite orders at once).
    const double bytes = 64.0 * (1 << 20);
    struct Slice {
      const char* topology;
      int chips;
    };
    for (Slice slice : {Slice{"2x4", 8}, Slice{"4x4", 16}}) {
      std::string hlo = kAllReduce;
      if (slice.chips != 8) hlo.replace(hlo.find("replica_count=8"), 15, fmt::format("replica_count={}", slice.chips));
      const double n = slice.chips, bound = 2 * (n - 1) / n * bytes / bw;
      fmt::print("llo-gen all-reduce, 64 MiB f32 over {} chips ({} v5e)\n", slice.chips, slice.topology);
      for (bool axisRings : {false, true}) {
        double host = 0;
        uint64_t cycles = compileAndRun("ar64.hlo", hlo.c_str(), slice.topology, &host, axisRings);
        if (cycles == 0) return 1;
        double seconds = static_cast<double>(cycles) / clock;
        fmt::print("  {:<26} {:.3f} ms ({} cycles; host {:.2f} s) -> {:.1f}% of the ICI bound\n",
                   axisRings ? "rings along each axis" : "one snake ring", seconds * 1e3, cycles, host,
                   100 * bound / seconds);
      }
      fmt::print("  ICI bound 2(N-1)/N*bytes/link_bw = {:.3f} ms\n", bound * 1e3);
    }
    double host1 = 0, host4 = 0;
    uint64_t one = compileAndRun("mlp1.hlo", kMlp1, "", &host1);
    uint64_t four = compileAndRun("mlp4.hlo", kMlp4, "2x2", &host4);
    if (one == 0 || four == 0) return 1;
    fmt::print("Megatron MLP (bf16, 512x1024 -> 65536 -> 1024), llo-gen\n");
    fmt::print("  one chip              {:.1f} us ({} cycles; host {:.2f} s)\n", one / clock * 1e6, one, host1);
    fmt::print("  4 chips (2x2), tensor-parallel + all-reduce {:.1f} us ({} cycles; host {:.2f} s) -> {:.2f}x faster\n",
               four / clock * 1e6, four, host4, static_cast<double>(one) / static_cast<double>(four));
  }
  DiagnosticEngine diags;
  SourceFile file("ring.llo", kRing);
  auto loaded = sim::loadProgram(file, "", diags);
  if (!loaded) {
    for (const auto& d : diags.diagnostics()) std::fprintf(stderr, "%s", formatDiagnostic(d, DiagnosticFormat::Text, false).c_str());
    return 1;
  }
  auto topo = target::parseTopology("2x4", loaded->target, 8, diags);
  if (!topo) return 1;
  std::vector<std::vector<std::string>> inputs(8, std::vector<std::string>{std::string(64 << 20, '\0')});
  sim::SimOptions opts;
  auto t0 = std::chrono::steady_clock::now();
  auto pod = sim::simulatePod(loaded->program, loaded->target, *topo, inputs, opts, diags);
  double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!pod) {
    for (const auto& d : diags.diagnostics()) std::fprintf(stderr, "%s", formatDiagnostic(d, DiagnosticFormat::Text, false).c_str());
    return 1;
  }
  const double n = 8, bytes = 64.0 * (1 << 20);
  const double bw = loaded->target.ici.bytesPerSecondPerLink;
  double seconds = static_cast<double>(pod->cycles) / loaded->target.clockHz;
  double bound = 2 * (n - 1) / n * bytes / bw;
  fmt::print("ring all-reduce schedule, 64 MiB over 8 chips (2x4 v5e, bidirectional snake ring)\n");
  fmt::print("  simulated time        {:.3f} ms ({} cycles; host {:.2f} s)\n", seconds * 1e3, pod->cycles, host);
  fmt::print("  ICI bound 2(N-1)/N*bytes/link_bw = {:.3f} ms -> {:.1f}% of the bound\n", bound * 1e3,
             100 * bound / seconds);
  fmt::print("  bidirectional bound (half)       = {:.3f} ms -> {:.1f}% of it\n", bound / 2 * 1e3,
             100 * bound / 2 / seconds);
  return 0;
}
