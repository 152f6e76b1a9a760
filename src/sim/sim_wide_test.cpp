// Semantics of the wide-element instructions: word-strided loads and stores
// (vld.e64/vld.e128, vst.e64/vst.e128), checked byte for byte against the
// layout XLA literals use (little-endian elements of 8 or 16 bytes).
#include <gtest/gtest.h>

#include <string>

#include "isa/verify.h"
#include "sim/builder.h"
#include "sim/machine.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace opnd;
using namespace testing;

constexpr int64_t kOut = 1 << 20;

// Copies `input` to VMEM 0 and `outInit` to VMEM kOut, runs `body`, returns
// the bytes at kOut.
std::string runWide(const std::string& input, const std::string& outInit,
                    const std::function<void(ProgramBuilder&)>& body) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t in = b.hbmBuffer("in", isa::DType::U8, {static_cast<int64_t>(input.size())});
  uint32_t init = b.hbmBuffer("init", isa::DType::U8, {static_cast<int64_t>(outInit.size())});
  uint32_t out = b.hbmBuffer("out", isa::DType::U8, {static_cast<int64_t>(outInit.size())});
  uint32_t din = b.descriptor("in", static_cast<uint32_t>(input.size()), {});
  uint32_t dout = b.descriptor("out", static_cast<uint32_t>(outInit.size()), {});
  b.entry("main", {in, init}, {out});
  b.op("dma.h2v", {desc(din), vmem(-1, 0), hbm(in, -1, 0), sem(0)});
  b.op("dma.h2v", {desc(dout), vmem(-1, kOut), hbm(init, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0), imm(2)});
  body(b);
  b.op("dma.v2h", {desc(dout), hbm(out, -1, 0), vmem(-1, kOut), sem(1)});
  b.op("halt", {});
  isa::Program p = b.finish();
  DiagnosticEngine diags;
  auto r = simulate(p, t, {input, outInit}, SimOptions{}, diags);
  if (!r) {
    ADD_FAILURE() << firstErrorMessage(diags);
    return {};
  }
  return r->results[0];
}

std::string patternBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return s;
}

uint32_t wordAt(const std::string& s, size_t byte) {
  uint32_t w;
  std::memcpy(&w, s.data() + byte, 4);
  return w;
}

TEST(SimWide, E64LoadsGatherOneWordPerElement) {
  // 1024 8-byte elements, dense: row i (sublane i) at i * 1024 bytes.
  std::string in = patternBytes(8192, 1);
  auto out = runWide(in, std::string(8192, '\0'), [&](ProgramBuilder& b) {
    b.op("vld.e64", {vreg(1), vmem(-1, 0), imm(0)});
    b.op("vld.e64", {vreg(2), vmem(-1, 0), imm(1)});
    b.op("vst", {vreg(1), vmem(-1, kOut)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 4096)});
  });
  ASSERT_EQ(out.size(), 8192u);
  for (size_t e = 0; e < 1024; ++e) {
    ASSERT_EQ(wordAt(out, 4 * e), wordAt(in, 8 * e)) << e;
    ASSERT_EQ(wordAt(out, 4096 + 4 * e), wordAt(in, 8 * e + 4)) << e;
  }
}

TEST(SimWide, E64StoresRoundTripAndKeepTheOtherWord) {
  std::string in = patternBytes(8192, 2);
  std::string init = patternBytes(8192, 3);
  // Only the high words are rewritten (from the input's low words); the low
  // words of the destination keep their initial bytes.
  auto out = runWide(in, init, [&](ProgramBuilder& b) {
    b.op("vld.e64", {vreg(1), vmem(-1, 0), imm(0)});
    b.op("vst.e64", {vreg(1), vmem(-1, kOut), imm(1)});
  });
  ASSERT_EQ(out.size(), 8192u);
  for (size_t e = 0; e < 1024; ++e) {
    ASSERT_EQ(wordAt(out, 8 * e), wordAt(init, 8 * e)) << e;
    ASSERT_EQ(wordAt(out, 8 * e + 4), wordAt(in, 8 * e)) << e;
  }
}

TEST(SimWide, E128WordsStridesAndSublaneMasks) {
  // 16-byte elements (c128-like), rows 4096 bytes apart (a strided view of
  // every other row of 2048 bytes); only sublanes 0 and 5 move.
  std::string in = patternBytes(8 * 4096, 4);
  std::string init(8 * 2048, '\x5a');
  auto out = runWide(in, init, [&](ProgramBuilder& b) {
    for (int w = 0; w < 4; ++w) {
      b.op("vld.e128", {vreg(w), vmem(-1, 0), imm(w), imm(4096), sublanes(0x21)});
      b.op("vst.e128", {vreg(w), vmem(-1, kOut), imm(3 - w), imm(2048), sublanes(0x21)});
    }
  });
  ASSERT_EQ(out.size(), init.size());
  for (int row = 0; row < 8; ++row) {
    bool moved = row == 0 || row == 5;
    for (size_t e = 0; e < 128; ++e)
      for (int w = 0; w < 4; ++w) {
        uint32_t got = wordAt(out, row * 2048 + e * 16 + 4 * (3 - w));
        uint32_t want = moved ? wordAt(in, row * 4096 + e * 16 + 4 * w) : 0x5a5a5a5au;
        ASSERT_EQ(got, want) << row << " " << e << " " << w;
      }
  }
}

TEST(SimWide, MisalignedElementsFault) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t out = b.hbmBuffer("out", isa::DType::U8, {4});
  b.entry("main", {}, {out});
  b.op("vld.e64", {vreg(1), vmem(-1, 4), imm(0)});
  b.op("halt", {});
  isa::Program p = b.finish();
  DiagnosticEngine diags;
  EXPECT_FALSE(simulate(p, t, {}, SimOptions{}, diags));
  EXPECT_NE(firstErrorMessage(diags).find("not 8-byte aligned"), std::string::npos) << firstErrorMessage(diags);
}

TEST(SimWide, VerifierChecksTheWordIndex) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  b.op("vld.e64", {vreg(1), vmem(-1, 0), imm(2)});
  isa::Program p = b.finish();
  EXPECT_EQ(isa::checkInstrStructure(p.bundles[0].instrs[0], p),
            "'vld.e64' has word=2, but its elements have words 0..1");
  ProgramBuilder b4(t);
  b4.op("vst.e128", {vreg(1), vmem(-1, 0), imm(3)});
  isa::Program p4 = b4.finish();
  EXPECT_EQ(isa::checkInstrStructure(p4.bundles[0].instrs[0], p4), "");
}

}  // namespace
}  // namespace tpu::sim
