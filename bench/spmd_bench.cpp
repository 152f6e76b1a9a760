// hlo-partition speed (issue 13, point 7): a transformer-style training
// step of about 1 MB of HLO text (data x model mesh of 8 devices, Megatron
// MLP blocks with residuals and normalisation) read, propagated,
// partitioned and printed; figures per phase and per instruction. The
// target is under 2 s for the whole run on the shared 2-core machine.
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "hlo/io/hlo_io.h"
#include "hlo/text/printer.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"

namespace {

std::string makeModule(size_t targetBytes, int64_t* layers) {
  std::string body;
  std::string params;
  int64_t p = 0, l = 0;
  body += "  x0 = f32[16,128,512] parameter(0), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}\n";
  body += "  zero = f32[] constant(0)\n";
  ++p;
  while (body.size() < targetBytes) {
    body += fmt::format(
        "  w1_{0} = f32[512,2048] parameter({1}), sharding={{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}}\n"
        "  w2_{0} = f32[2048,512] parameter({2}), sharding={{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}}\n"
        "  h_{0} = f32[16,128,2048] dot(x{0}, w1_{0}), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}\n"
        "  zb_{0} = f32[16,128,2048] broadcast(zero), dimensions={{}}\n"
        "  r_{0} = f32[16,128,2048] maximum(h_{0}, zb_{0})\n"
        "  o_{0} = f32[16,128,512] dot(r_{0}, w2_{0}), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}\n"
        "  y_{0} = f32[16,128,512] add(o_{0}, x{0})\n"
        "  sq_{0} = f32[16,128,512] multiply(y_{0}, y_{0})\n"
        "  s_{0} = f32[16,128] reduce(sq_{0}, zero), dimensions={{2}}, to_apply=add\n"
        "  b_{0} = f32[16,128,512] broadcast(s_{0}), dimensions={{0,1}}\n"
        "  x{3} = f32[16,128,512] divide(y_{0}, b_{0})\n",
        l, p, p + 1, l + 1);
    p += 2;
    ++l;
  }
  *layers = l;
  return "HloModule train_step, num_partitions=8\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
         "  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n" +
         body + fmt::format("  ROOT out = f32[16,128,512] copy(x{}), sharding={{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}}\n}}\n", l);
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  using namespace tpu;
  int64_t layers = 0;
  std::string text = makeModule(1 << 20, &layers);
  auto t0 = std::chrono::steady_clock::now();
  DiagnosticEngine diags;
  hlo::LoadedModule m = hlo::readModule(std::make_shared<SourceFile>("train_step.hlo", text), diags);
  if (!m.module) return 1;
  double parse = since(t0);
  int64_t instructions = m.module->entry()->instructionCount();
  auto t1 = std::chrono::steady_clock::now();
  if (!spmd::propagateShardings(*m.module, 8, diags)) return 1;
  double propagate = since(t1);
  auto t2 = std::chrono::steady_clock::now();
  if (!spmd::partitionModule(*m.module, 8, diags)) return 1;
  double partition = since(t2);
  auto t3 = std::chrono::steady_clock::now();
  std::string out = hlo::printHloText(*m.module);
  double print = since(t3);
  double total = since(t0);
  int64_t allReduces = 0;
  for (const auto& i : m.module->entry()->instructions()) allReduces += i->opcode() == hlo::Opcode::AllReduce;
  std::printf("spmd_bench: %.2f MB of HLO, %lld layers, %lld instructions, 8 partitions\n",
              static_cast<double>(text.size()) / (1 << 20), static_cast<long long>(layers),
              static_cast<long long>(instructions));
  std::printf("  parse %.3f s, propagate %.3f s, partition %.3f s, print %.3f s: total %.3f s (target < 2 s)\n", parse,
              propagate, partition, print, total);
  std::printf("  propagate + partition: %.2f us per instruction\n", (propagate + partition) * 1e6 / static_cast<double>(instructions));
  std::printf("  all-reduces: %lld (one per layer expected: %lld); output %.2f MB\n", static_cast<long long>(allReduces),
              static_cast<long long>(layers), static_cast<double>(out.size()) / (1 << 20));
  return total < 2.0 && allReduces == layers ? 0 : 1;
}
