// The cycle model: latencies, invariants that no program can beat the
// chip's peak FLOP/s or HBM bandwidth (adversarial kernels), determinism,
// the trace format, and every fault with its message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/builder.h"
#include "sim/kernels.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace opnd;
using namespace testing;

struct Run {
  std::optional<SimResult> result;
  std::string error;
};

Run runProgram(const isa::Program& p, const target::TargetDesc& t, const std::vector<std::string>& in,
               SimOptions opts = {}) {
  DiagnosticEngine diags;
  Run r;
  r.result = simulate(p, t, in, opts, diags);
  if (!r.result) r.error = firstErrorMessage(diags);
  return r;
}

// A program with no inputs: body, then halt.
isa::Program tiny(const target::TargetDesc& t, const std::function<void(ProgramBuilder&)>& body) {
  ProgramBuilder b(t);
  uint32_t out = b.hbmBuffer("out", isa::DType::F32, {1024});
  b.entry("main", {}, {out});
  body(b);
  b.op("halt", {});
  return b.finish();
}

TEST(SimTiming, DependentOpsWaitForLatency) {
  auto t = loadBuiltin("v5e");
  auto indep = tiny(t, [](ProgramBuilder& b) {
    b.op("vadd.f32", {vreg(1), vreg(0), vreg(0)});
    b.op("vadd.f32", {vreg(2), vreg(0), vreg(0)});
  });
  auto dep = tiny(t, [](ProgramBuilder& b) {
    b.op("vadd.f32", {vreg(1), vreg(0), vreg(0)});
    b.op("vadd.f32", {vreg(2), vreg(1), vreg(0)});
  });
  auto a = runProgram(indep, t, {}), c = runProgram(dep, t, {});
  ASSERT_TRUE(a.result && c.result);
  int lat = t.latency(target::LatencyClass::VectorAlu);
  EXPECT_EQ(c.result->report.cycles - a.result->report.cycles, static_cast<uint64_t>(lat - 1));
  EXPECT_EQ(c.result->report.stallCycles[static_cast<size_t>(StallReason::Operand)], static_cast<uint64_t>(lat - 1));
}

// Pushes on every MXU in every bundle: the pipes must throttle to one push
// per 8 cycles each, so FLOP/s never exceed the peak.
TEST(SimTiming, MxuCannotExceedPeak) {
  for (const char* name : {"v5e", "v4"}) {
    auto t = loadBuiltin(name);
    const int pushes = 400;
    auto p = tiny(t, [&](ProgramBuilder& b) {
      for (int u = 0; u < t.mxu.count; ++u) {
        for (int q = 0; q < 16; ++q) b.op("mxu.wpush.bf16", {mxu(u), vreg(0)});
        b.op("mxu.wlatch", {mxu(u)});
      }
      for (int i = 0; i < pushes; ++i) {
        std::vector<isa::Instr> bundle;
        for (int u = 0; u < t.mxu.count; ++u)
          bundle.push_back(makeInstr(i >= 16 ? "mxu.pop" : "mxu.matmul.bf16",
                                     i >= 16 ? std::vector<isa::Operand>{vreg(1 + u), mxu(u)}
                                             : std::vector<isa::Operand>{mxu(u), vreg(0)}));
        b.bundle(bundle);
        if (i >= 16) {
          bundle.clear();
          for (int u = 0; u < t.mxu.count; ++u) bundle.push_back(makeInstr("mxu.matmul.bf16", {mxu(u), vreg(0)}));
          b.bundle(bundle);
        }
      }
      for (int i = 0; i < 16; ++i)
        for (int u = 0; u < t.mxu.count; ++u) b.op("mxu.pop", {vreg(1 + u), mxu(u)});
    });
    auto r = runProgram(p, t, {});
    ASSERT_TRUE(r.result) << r.error;
    const SimReport& rep = r.result->report;
    EXPECT_GT(rep.mxuPushes, 0u);
    EXPECT_LE(rep.achievedFlops, rep.peakFlops * (1 + 1e-12)) << name;
    EXPECT_LE(rep.mxuUtilization, 1.0) << name;
    EXPECT_GE(rep.cycles, rep.mxuPushes / t.mxu.count * 8) << name;
    EXPECT_GT(rep.mxuUtilization, 0.8) << name;  // and it does get close
  }
}

// Many small and large DMAs at once: their rates must share the HBM.
TEST(SimTiming, DmaCannotExceedHbmBandwidth) {
  auto t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  const int64_t n = 4 << 20;
  uint32_t x = b.hbmBuffer("x", isa::DType::U8, {n});
  uint32_t y = b.hbmBuffer("y", isa::DType::U8, {n});
  uint32_t small = b.descriptor("small", 4096, {});
  uint32_t big = b.descriptor("big", 1 << 20, {});
  uint32_t strided = b.descriptor("strided", 512, {{64, 1024, 512}});
  b.entry("main", {x}, {y});
  for (int i = 0; i < 60; ++i) {
    const char* mn = i % 3 == 0 ? "dma.h2h" : i % 3 == 1 ? "dma.h2v" : "dma.v2h";
    uint32_t d = i % 4 == 0 ? big : i % 4 == 1 ? small : strided;
    if (i % 3 == 0) b.op(mn, {desc(d), hbm(y, -1, 0), hbm(x, -1, 0), sem(0)});
    else if (i % 3 == 1) b.op(mn, {desc(d), vmem(-1, (i % 8) << 20), hbm(x, -1, 0), sem(0)});
    else b.op(mn, {desc(d), hbm(y, -1, 0), vmem(-1, 0), sem(0)});
  }
  b.op("halt", {});
  auto r = runProgram(b.finish(), t, {std::string(n, 'x')});
  ASSERT_TRUE(r.result) << r.error;
  const SimReport& rep = r.result->report;
  EXPECT_LE(rep.achievedHbmBytesPerSecond, rep.peakHbmBytesPerSecond * (1 + 1e-9));
  EXPECT_GT(rep.hbmUtilization, 0.5);
  EXPECT_EQ(rep.dmaCount, 60u);
}

TEST(SimTiming, SingleDmaTakesLatencyPlusBytesOverBandwidth) {
  auto t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t x = b.hbmBuffer("x", isa::DType::U8, {1 << 20});
  uint32_t d = b.descriptor("all", 1 << 20, {});
  b.entry("main", {x}, {});
  b.op("dma.h2v", {desc(d), vmem(-1, 0), hbm(x, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  b.op("halt", {});
  auto r = runProgram(b.finish(), t, {std::string(1 << 20, 'a')});
  ASSERT_TRUE(r.result) << r.error;
  double expect = t.dma.latencyCycles + (1 << 20) / (t.memory.hbmBytesPerSecond / t.clockHz);
  EXPECT_NEAR(static_cast<double>(r.result->report.cycles), expect, 3.0);
}

TEST(SimTiming, DeterministicReportsAndTrace) {
  auto t = loadBuiltin("v5e");
  auto p = kernels::matmulBf16(t, 64, 512, 512);
  std::vector<std::string> in = {toBytes(randomBf16(64 * 512, 1)), toBytes(randomBf16(512 * 512, 2))};
  SimOptions o;
  o.trace = true;
  auto a = runProgram(p, t, in, o);
  o.hostThreads = 1;
  auto c = runProgram(p, t, in, o);
  ASSERT_TRUE(a.result && c.result);
  EXPECT_EQ(renderReportJson(a.result->report), renderReportJson(c.result->report));
  EXPECT_EQ(a.result->traceJson, c.result->traceJson);
  EXPECT_EQ(a.result->results, c.result->results);
}

TEST(SimTiming, TraceIsValidTraceEventJson) {
  auto t = loadBuiltin("v5e");
  auto p = kernels::elementwise(t, 16384);
  SimOptions o;
  o.trace = true;
  auto r = runProgram(p, t, {toBytes(randomFloats(16384, 1)), toBytes(randomFloats(16384, 2))}, o);
  ASSERT_TRUE(r.result) << r.error;
  auto j = nlohmann::json::parse(r.result->traceJson);
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  bool sawDma = false, sawValu = false;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_GE(e["ts"].get<double>(), 0.0);
      sawDma |= e["tid"].get<int>() >= 500;
      sawValu |= e["name"] == "vmul.f32";
    }
  }
  EXPECT_TRUE(sawDma);
  EXPECT_TRUE(sawValu);
  auto stats = nlohmann::json::parse(renderReportJson(r.result->report));
  EXPECT_GT(stats["cycles"].get<uint64_t>(), 0u);
  EXPECT_TRUE(stats.contains("roofline"));
}

// ---- faults: each stops the run with the bundle and a clear message ----

std::string faultOf(const std::function<void(ProgramBuilder&)>& body, SimOptions o = {},
                    const std::string& targetName = "v5e") {
  auto t = loadBuiltin(targetName);
  auto r = runProgram(tiny(t, body), t, {}, o);
  EXPECT_FALSE(r.result.has_value());
  return r.error;
}

TEST(SimFault, OutOfBoundsVmem) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("smov", {sreg(1), imm(134217728 - 512)});
              b.label("bad");
              b.op("vld", {vreg(0), vmem(1, 0)});
            }),
            "bundle 1 (bad): vld: VMEM address 134217728 (0x8000000, sublane 1, 512 bytes) is outside VMEM "
            "(134217728 bytes)");
}

TEST(SimFault, Unaligned) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("smov", {sreg(1), imm(6)});
              b.op("sld", {sreg(2), smem(1, 0)});
            }),
            "bundle 1: sld: SMEM address 6 (0x6) is not 4-byte aligned");
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("smov", {sreg(1), imm(2)});
              b.op("vld", {vreg(2), vmem(1, 0)});
            }),
            "bundle 1: vld: VMEM address 2 (0x2, sublane 0) is not 4-byte aligned");
}

TEST(SimFault, BadSemaphore) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("smov", {sreg(4), imm(40)});
              b.op("sem.signal", {semReg(4)});
            }),
            "bundle 1: sem.signal: semaphore 40 (from s4) is outside sem0..sem31 of target 'v5e'");
}

TEST(SimFault, WaitThatCanNeverComplete) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.label("start");
              b.op("sem.wait", {sem(3), imm(2)});
            }),
            "bundle 0 (start): sem.wait on sem3 (count 0, needs 2) can never complete: no DMA is in flight");
}

TEST(SimFault, MaxCycles) {
  SimOptions o;
  o.maxCycles = 1000;
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.label("spin");
              b.branch("jmp", {}, "spin");
            }, o),
            "bundle 0 (spin): exceeded --max-cycles=1000 (the bundle would issue at cycle 1001)");
}

TEST(SimFault, MxuMisuse) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) { b.op("mxu.pop", {vreg(0), mxu(1)}); }),
            "bundle 0: mxu.pop on mxu1: the result FIFO is empty");
  EXPECT_EQ(faultOf([](ProgramBuilder& b) { b.op("mxu.matmul.bf16", {mxu(0), vreg(0)}); }),
            "bundle 0: mxu.matmul.bf16 on mxu0: no weights latched");
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("mxu.wpush.bf16", {mxu(2), vreg(0)});
              b.op("mxu.wlatch", {mxu(2)});
            }),
            "bundle 1: mxu.wlatch on mxu2: only 1 of 16 row blocks are staged");
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              for (int i = 0; i < 16; ++i) b.op("mxu.wpush.bf16", {mxu(0), vreg(0)});
              b.op("mxu.wlatch", {mxu(0)});
              for (int i = 0; i < 33; ++i) b.op("mxu.matmul.bf16", {mxu(0), vreg(0)});
            }),
            "bundle 49: mxu.matmul.bf16 on mxu0: the result FIFO is full (32 results not popped); issue would "
            "stall forever");
}

TEST(SimFault, TransposePopTooEarly) {
  EXPECT_EQ(faultOf([](ProgramBuilder& b) {
              b.op("vxpose.push", {xlu(0), vreg(0)});
              b.op("vxpose.pop", {vreg(1), xlu(0)});
            }),
            "bundle 1: vxpose.pop on xlu0: no transposed tile is ready (1 of 16 row blocks pushed)");
}

TEST(SimFault, DmaOutOfBounds) {
  auto t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t x = b.hbmBuffer("x", isa::DType::F32, {256});
  uint32_t d = b.descriptor("rows", 512, {{4, 512, 512}});
  b.entry("main", {x}, {});
  b.op("dma.h2v", {desc(d), vmem(-1, 0), hbm(x, -1, 0), sem(0)});
  b.op("halt", {});
  auto r = runProgram(b.finish(), t, {std::string(1024, '\0')});
  EXPECT_EQ(r.error,
            "bundle 0: dma.h2v: source range [0, 2048) (descriptor 'rows') is outside HBM buffer 'x' (1024 bytes)");
}

TEST(SimFault, RunsPastTheEnd) {
  auto t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  b.entry("main", {}, {});
  b.op("nop", {});
  auto r = runProgram(b.finish(), t, {});
  EXPECT_EQ(r.error, "bundle 0: execution ran past the last bundle without reaching halt");
}

TEST(SimFault, IllegalInstructionForTarget) {
  // v4 has 32 vector registers.
  EXPECT_EQ(faultOf([](ProgramBuilder& b) { b.op("vadd.f32", {vreg(40), vreg(0), vreg(0)}); }, {}, "v4"),
            "bundle 0: illegal instruction: register v40 out of range: target 'v4' has v0..v31");
}

TEST(SimFault, BadInputs) {
  auto t = loadBuiltin("v5e");
  auto p = kernels::elementwise(t, 8192);
  auto r = runProgram(p, t, {std::string(10, 'a')});
  EXPECT_EQ(r.error, "entry 'main' takes 2 arguments, 1 given");
  r = runProgram(p, t, {std::string(10, 'a'), std::string(10, 'b')});
  EXPECT_EQ(r.error, "argument 0 ('a', f32[8192]) needs 32768 bytes, got 10");
}

}  // namespace
}  // namespace tpu::sim
