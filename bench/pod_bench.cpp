// Pod benchmark (issue 15 point 7): the ICI schedule of a bidirectional ring
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

}  // namespace

int main() {
  using namespace tpu;
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
