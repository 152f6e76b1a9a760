// The list scheduler: dependences respected (random programs compute the same
// scheduled and unscheduled on the simulator), slot limits, latencies,
// block boundaries and determinism.
#include "llo/scheduler.h"

#include <gtest/gtest.h>

#include <random>

#include "isa/verify.h"
#include "llo/text.h"
#include "sim/sim.h"

namespace tpu::llo {
namespace {

target::TargetDesc v5e() {
  DiagnosticEngine diags;
  return *target::loadTarget("v5e", diags);
}

// One op per bundle, as llo-gen's text is before scheduling.
isa::Program assembleFlat(const std::string& text) {
  static std::vector<std::unique_ptr<SourceFile>> files;
  files.push_back(std::make_unique<SourceFile>("t.llo", text));
  DiagnosticEngine diags;
  AsmOptions options;
  options.autoBundle = false;
  auto r = assembleLlo(*files.back(), options, diags);
  EXPECT_TRUE(r.has_value()) << (diags.diagnostics().empty() ? "" : diags.diagnostics().front().message) << "\n"
                             << text;
  return r ? r->program : isa::Program{};
}

TEST(Scheduler, PacksIndependentOpsUpToSlotCounts) {
  // Six independent scalar ops: v5e has 2 scalar slots, so 3 bundles.
  std::string text = ".entry main() -> ()\n";
  for (int i = 1; i <= 6; ++i) text += fmt::format("  smov s{}, {}\n", i, i);
  text += "  halt\n";
  isa::Program p = assembleFlat(text);
  target::TargetDesc t = v5e();
  scheduleProgram(p, t);
  ASSERT_EQ(p.bundles.size(), 3u);
  for (const isa::Bundle& b : p.bundles) EXPECT_EQ(isa::checkBundle(b, t), "");
  EXPECT_EQ(p.bundles.back().instrs.back().opcode, isa::Opcode::Halt);
}

TEST(Scheduler, RespectsLatencies) {
  // vld (latency 4) -> vadd (2) -> vst: the list schedule keeps the cycles
  // apart by the table's latencies.
  std::vector<std::string> lines = {"vld v1, [0]", "vadd.f32 v2, v1, 1.0", "vst v2, [4096]", "smov s1, 5"};
  isa::Program p = assembleFlat(".entry main() -> ()\n  " + lines[0] + "\n  " + lines[1] + "\n  " + lines[2] + "\n  " +
                                lines[3] + "\n  halt\n");
  std::vector<const isa::Instr*> ops;
  for (size_t i = 0; i < 4; ++i) ops.push_back(&p.bundles[i].instrs[0]);
  target::TargetDesc t = v5e();
  std::vector<int> c = scheduleBlock(ops, t);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], t.latency(target::LatencyClass::VectorLoad));
  EXPECT_EQ(c[2], c[1] + t.latency(target::LatencyClass::VectorAlu));
  EXPECT_EQ(c[3], 0);  // independent: fills the first bundle
}

TEST(Scheduler, EupRowsAndPairRowsTakeTheirTableLatencies) {
  // vtanh and vpow (EUP latency) read each other's results; vmulhi.u64
  // (a pair row in the VALU slot, VectorCvt latency) reads all four
  // registers of its operands, so it waits for the last one, vpow.
  std::vector<std::string> lines = {"vtanh v2, v1", "vpow v3, v2, -0.5", "vmulhi.u64 v4, v1, v2, v1, v3, 1",
                                    "vsin v5, v1"};
  std::string text = ".entry main() -> ()\n";
  for (const std::string& l : lines) text += "  " + l + "\n";
  isa::Program p = assembleFlat(text + "  halt\n");
  std::vector<const isa::Instr*> ops;
  for (size_t i = 0; i < lines.size(); ++i) ops.push_back(&p.bundles[i].instrs[0]);
  target::TargetDesc t = v5e();
  std::vector<int> c = scheduleBlock(ops, t);
  const int eup = t.latency(target::LatencyClass::Eup);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], eup);
  EXPECT_EQ(c[2], 2 * eup);
  // Independent of the others, but it shares the EUP slot with vtanh.
  EXPECT_GT(c[3], 0);
  EXPECT_LT(c[3], c[1]);
}

TEST(Scheduler, WarMaySharePackedBundleButRawMayNot) {
  isa::Program p = assembleFlat(
      ".entry main() -> ()\n"
      "  vadd.s32 v2, v1, 1\n"   // reads v1
      "  vmov.s32 v1, 7\n"       // writes v1: may issue with the read (reads first)
      "  vadd.s32 v3, v1, 1\n"   // reads the new v1: a later bundle
      "  halt\n");
  std::vector<const isa::Instr*> ops;
  for (size_t i = 0; i < 3; ++i) ops.push_back(&p.bundles[i].instrs[0]);
  std::vector<int> c = scheduleBlock(ops, v5e());
  EXPECT_EQ(c[0], c[1]);
  EXPECT_GT(c[2], c[1]);
}

TEST(Scheduler, MemoryDisambiguation) {
  isa::Program p = assembleFlat(
      ".entry main() -> ()\n"
      "  smov s1, 8192\n"
      "  vst v1, [s1]\n"            // [8192, 8192 + 4096)
      "  vld v2, [s1 + 4096]\n"      // disjoint: may move above the store
      "  vld v3, [s1 + 512], 1024\n"  // overlaps row 1 of the store: after it
      "  vld v4, [s1 + 512], 1024, mask=0x00\n"  // no sublanes, and v4 unread
      "  sadd s1, s1, 4096\n"
      "  vld v5, [s1 - 4096]\n"      // same bytes as the store through a moved base
      "  halt\n");
  std::vector<const isa::Instr*> ops;
  for (size_t i = 0; i < 7; ++i) ops.push_back(&p.bundles[i].instrs[0]);
  std::vector<int> c = scheduleBlock(ops, v5e());
  EXPECT_LE(c[2], c[1]);
  EXPECT_GT(c[3], c[1]);
  EXPECT_GT(c[6], c[1]);
}

TEST(Scheduler, MxuOrderPerUnit) {
  std::string text = ".entry main() -> ()\n";
  for (int i = 0; i < 16; ++i) text += "  mxu.wpush.bf16 mxu0, v1\n";
  text += "  mxu.wlatch mxu0\n  mxu.matmul.bf16 mxu0, v2\n  mxu.matmul.bf16 mxu1, v2\n  mxu.pop v3, mxu0\n  halt\n";
  isa::Program p = assembleFlat(text);
  std::vector<const isa::Instr*> ops;
  for (size_t i = 0; i + 1 < p.bundles.size(); ++i) ops.push_back(&p.bundles[i].instrs[0]);
  target::TargetDesc t = v5e();
  std::vector<int> c = scheduleBlock(ops, t);
  for (int i = 1; i < 16; ++i) EXPECT_GT(c[i], c[i - 1]);
  EXPECT_GE(c[16], c[15] + t.latency(target::LatencyClass::MxuWeightPush));  // wlatch after staging
  EXPECT_GE(c[17], c[16] + t.latency(target::LatencyClass::MxuWeightPush));  // matmul after the latch
  EXPECT_EQ(c[18], 0);  // the other MXU is independent
  EXPECT_GT(c[19], c[17]);
}

TEST(Scheduler, BlocksAndLabelsKeepTheirPlace) {
  isa::Program p = assembleFlat(
      ".entry main() -> ()\n"
      "  smov s1, 3\n"
      "  smov s2, 0\n"
      "top:\n"
      "  sadd s2, s2, 1\n"
      "  smov s3, 9\n"
      "  loop s1, top\n"
      "  sem.signal sem1\n"
      "  sem.wait sem1\n"
      "  smov s4, 1\n"
      "  halt\n");
  target::TargetDesc t = v5e();
  std::vector<uint32_t> anchors = scheduleProgram(p, t);
  // [smov smov] [sadd smov loop] [sem.signal] [sem.wait smov] [halt]
  ASSERT_EQ(p.labels.size(), 1u);
  EXPECT_EQ(p.labels[0].bundle, 1u);
  EXPECT_EQ(anchors[2], 1u);
  const isa::Instr& loop = p.bundles[1].instrs.back();
  EXPECT_EQ(loop.opcode, isa::Opcode::Loop);
  EXPECT_EQ(loop.operands[1].imm, 1);
  EXPECT_EQ(p.bundles[1].instrs.size(), 3u);
  EXPECT_EQ(p.bundles[3].instrs.front().opcode, isa::Opcode::SemWait);
  EXPECT_EQ(p.bundles[3].instrs.size(), 2u);
  for (const isa::Bundle& b : p.bundles) EXPECT_EQ(isa::checkBundle(b, t), "");
}

// ---- random programs: scheduled and unscheduled compute the same.

class RandomProgram {
 public:
  explicit RandomProgram(uint32_t seed, int minOps = 5, int maxOps = 40) : rng_(seed), minOps_(minOps), maxOps_(maxOps) {}

  std::string text() {
    std::string s;
    s += ".buffer x : hbm u8[65536]\n.buffer y : hbm u8[98304]\n.buffer sy : hbm u8[256]\n";
    s += ".dma all chunk=65536\n.dma outv chunk=98304\n.dma outs chunk=256\n";
    s += ".entry main(x) -> (y, sy)\n";
    s += "  dma.h2v all, [0], x, sem0\n  sem.wait sem0\n";
    for (int r = 1; r <= 6; ++r) s += fmt::format("  smov s{}, {}\n", r, pick(-50, 50));
    s += "  smov s7, 16384\n  smov s8, 64\n";
    base_ = 16384;
    for (int v = 0; v < 8; ++v) s += fmt::format("  vld v{}, [{}]\n", v, v * 4096);
    for (int m = 0; m < 4; ++m) s += fmt::format("  vcmp.lt.s32 m{}, v{}, v{}\n", m, m, m + 4);
    int blocks = pick(1, 4);
    for (int b = 0; b < blocks; ++b) {
      bool loop = pick(0, 2) == 0;
      if (loop) s += fmt::format("  smov s9, {}\nL{}:\n", pick(1, 3), b);
      inLoop_ = loop;
      int n = pick(minOps_, maxOps_);
      for (int i = 0; i < n; ++i) s += "  " + randomOp() + "\n";
      if (loop) s += fmt::format("  loop s9, L{}\n", b);
      else if (pick(0, 3) == 0) s += "  sem.signal sem3\n  sem.wait sem3\n";
    }
    for (int v = 0; v < 8; ++v) s += fmt::format("  vst v{}, [{}]\n", v, 65536 + v * 4096);
    for (int m = 0; m < 4; ++m) s += fmt::format("  vsel.s32 v{}, m{}, v{}, 0\n", m, m, m + 4);
    for (int m = 0; m < 4; ++m) s += fmt::format("  vst v{}, [{}]\n", m, 65536 + 32768 + m * 4096);
    for (int r = 1; r <= 8; ++r) s += fmt::format("  sst s{}, [{}]\n", r, 128 + r * 4);
    s += "  dma.v2h outv, y, [0], sem1\n  dma.s2h outs, sy, [0], sem2\n  sem.wait sem1\n  sem.wait sem2\n  halt\n";
    return s;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string v() { return fmt::format("v{}", pick(0, 7)); }
  std::string s() { return fmt::format("s{}", pick(1, 6)); }
  std::string m() { return fmt::format("m{}", pick(0, 3)); }
  // A VMEM address in the data region through the moving base s7 or absolute.
  std::string addr(int64_t extent) {
    int64_t off = pick(0, 60) * 128;
    if (pick(0, 1)) {
      int64_t rel = off - base_;
      if (rel + extent > 65536 - base_) rel = -base_;
      return rel >= 0 ? fmt::format("[s7 + {}]", rel) : fmt::format("[s7 - {}]", -rel);
    }
    if (off + extent > 65536) off = 0;
    return fmt::format("[{}]", off);
  }
  std::string randomOp() {
    switch (pick(0, 13)) {
      case 0: return fmt::format("sadd {}, {}, {}", s(), s(), pick(-9, 9));
      case 1: return fmt::format("smul {}, {}, {}", s(), s(), s());
      case 2: return fmt::format("sxor {}, {}, {}", s(), s(), pick(0, 255));
      case 3: {
        int64_t delta = 512 * pick(-4, 4);
        if (inLoop_ || base_ + delta < 0 || base_ + delta > 32768) delta = 0;
        base_ += delta;
        return fmt::format("sadd s7, s7, {}", delta);
      }
      case 4: {
        int stride = std::array<int, 4>{512, 1024, 0, 256}[pick(0, 3)];
        std::string mask = pick(0, 2) == 0 ? fmt::format(", mask={:#04x}", pick(0, 255)) : "";
        return fmt::format("vld {}, {}, {}{}", v(), addr(7 * stride + 512), stride, mask);
      }
      case 5: {
        int stride = std::array<int, 3>{512, 1024, 256}[pick(0, 2)];
        return fmt::format("vst {}, {}, {}", v(), addr(7 * stride + 512), stride);
      }
      case 6: return fmt::format("vadd.s32 {}, {}, {}", v(), v(), v());
      case 7: return fmt::format("vmul.s32 {}, {}, {}", v(), v(), s());
      case 8: return fmt::format("vsel.s32 {}, {}, {}, {}", v(), m(), v(), pick(-3, 3));
      case 9: return fmt::format("vcmp.gt.s32 {}, {}, {}", m(), v(), v());
      case 10: return fmt::format("sst {}, [s8 + {}]", s(), 4 * pick(0, 7));
      case 11: return fmt::format("sld {}, [s8 + {}]", s(), 4 * pick(0, 7));
      case 12: return fmt::format("vrot.lane {}, {}, {}", v(), v(), pick(1, 127));
      default: return fmt::format("vst.m {}, {}, {}", v(), addr(512 * 8), m());
    }
  }

  std::mt19937 rng_;
  int minOps_, maxOps_;
  int64_t base_ = 0;  // s7 (only moved outside loops)
  bool inLoop_ = false;
};

void expectSameResults(uint32_t firstSeed, uint32_t lastSeed, int minOps, int maxOps) {
  target::TargetDesc t = v5e();
  std::vector<uint8_t> input(65536);
  std::mt19937 rng(7);
  for (uint8_t& b : input) b = static_cast<uint8_t>(rng());
  std::string inBytes(input.begin(), input.end());
  size_t packed = 0, flat = 0;
  for (uint32_t seed = firstSeed; seed <= lastSeed; ++seed) {
    std::string text = RandomProgram(seed, minOps, maxOps).text();
    isa::Program p = assembleFlat(text);
    ASSERT_FALSE(p.bundles.empty()) << text;
    isa::Program q = p;
    scheduleProgram(q, t);
    for (size_t b = 0; b < q.bundles.size(); ++b) ASSERT_EQ(isa::checkBundle(q.bundles[b], t), "") << b;
    DiagnosticEngine diags;
    auto a = sim::simulate(p, t, {inBytes}, sim::SimOptions{}, diags);
    auto b = sim::simulate(q, t, {inBytes}, sim::SimOptions{}, diags);
    ASSERT_TRUE(a && b) << (diags.diagnostics().empty() ? "" : diags.diagnostics().front().message) << "\n" << text;
    for (size_t r = 0; r < a->results.size(); ++r) {
      const std::string &x = a->results[r], &y = b->results[r];
      auto diff = std::mismatch(x.begin(), x.end(), y.begin(), y.end());
      EXPECT_TRUE(diff.first == x.end()) << "seed " << seed << ": result " << r << " differs at byte "
                                         << (diff.first - x.begin()) << "\n" << text << "\n" << printLlo(q);
    }
    flat += p.bundles.size();
    packed += q.bundles.size();
    EXPECT_LE(b->report.cycles, a->report.cycles + 8) << "seed " << seed;
  }
  EXPECT_LT(packed, flat);
}

TEST(Scheduler, RandomProgramsComputeTheSame) { expectSameResults(1, 60, 5, 40); }

// Blocks longer than the scheduler's memory window (a barrier every 128
// accesses keeps the dependence test linear).
TEST(Scheduler, LongRandomBlocksComputeTheSame) { expectSameResults(1000, 1008, 300, 900); }

TEST(Scheduler, Deterministic) {
  target::TargetDesc t = v5e();
  for (uint32_t seed = 100; seed < 110; ++seed) {
    isa::Program p = assembleFlat(RandomProgram(seed).text());
    isa::Program a = p, b = p;
    scheduleProgram(a, t);
    scheduleProgram(b, t);
    EXPECT_EQ(a, b);
    // Scheduling a scheduled program keeps its multi-op bundles.
    isa::Program c = a;
    scheduleProgram(c, t);
    EXPECT_EQ(printLlo(c).size() > 0, true);
  }
}

TEST(Scheduler, ModeNames) {
  EXPECT_EQ(scheduleModeFromName("list"), ScheduleMode::List);
  EXPECT_EQ(scheduleModeFromName("none"), ScheduleMode::None);
  EXPECT_FALSE(scheduleModeFromName("greedy").has_value());
}

}  // namespace
}  // namespace tpu::llo
