// Semantics of the narrow element type instructions (vld/vst/vrnd of the
// 16-bit, 8-bit and 4-bit types), bit-exact against support/float_format,
// the rules the interpreter uses.
#include <gtest/gtest.h>

#include <string>

#include "sim/builder.h"
#include "sim/machine.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace opnd;
using namespace testing;

// Copies `input` bytes to VMEM 0, runs `body`, returns `outBytes` bytes from
// VMEM at 1 MiB.
constexpr int64_t kOut = 1 << 20;

std::string runBytes(const std::string& input, size_t outBytes, const std::function<void(ProgramBuilder&)>& body) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t in = b.hbmBuffer("in", isa::DType::U8, {static_cast<int64_t>(input.size())});
  uint32_t out = b.hbmBuffer("out", isa::DType::U8, {static_cast<int64_t>(outBytes)});
  uint32_t din = b.descriptor("in", static_cast<uint32_t>(input.size()), {});
  uint32_t dout = b.descriptor("out", static_cast<uint32_t>(outBytes), {});
  b.entry("main", {in}, {out});
  b.op("dma.h2v", {desc(din), vmem(-1, 0), hbm(in, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  body(b);
  b.op("dma.v2h", {desc(dout), hbm(out, -1, 0), vmem(-1, kOut), sem(1)});
  b.op("halt", {});
  isa::Program p = b.finish();
  DiagnosticEngine diags;
  auto r = simulate(p, t, {input}, SimOptions{}, diags);
  if (!r) {
    ADD_FAILURE() << firstErrorMessage(diags);
    return {};
  }
  return r->results[0];
}

float F(uint32_t u) { return std::bit_cast<float>(u); }

// f32 patterns around every interesting boundary of the narrow formats.
std::vector<uint32_t> probeFloats(size_t n) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i * 0x9E3779B1u);
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                               0x7F800001u, 0x00000001u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x38800000u,
                               0x387FFFFFu, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x3F801000u, 0x3F803000u,
                               0x43E00000u, 0x43F00000u, 0x47600000u, 0x47700000u, 0x40C00000u, 0x40D00000u};
  for (size_t i = 0; i < std::size(specials) && i * 5 < n; ++i) v[i * 5] = specials[i];
  return v;
}

TEST(SimTypes, HalfConversionsMatchFloatFormat) {
  for (uint32_t h = 0; h < 0x10000u; ++h)
    ASSERT_EQ(f32FromHalfBits(h), std::bit_cast<uint32_t>(halfToFloat(static_cast<uint16_t>(h)))) << std::hex << h;
  // Every 16th-ish f32 pattern (the stride is odd so every low-bit pattern
  // occurs), plus the rounding boundaries.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 4099)
    ASSERT_EQ(halfFromF32Bits(static_cast<uint32_t>(x)), floatToHalf(F(static_cast<uint32_t>(x)))) << std::hex << x;
  for (uint32_t x : probeFloats(200)) ASSERT_EQ(halfFromF32Bits(x), floatToHalf(F(x))) << std::hex << x;
}

TEST(SimTypes, SixteenBitLoadsWiden) {
  std::string in(2048, '\0');
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 37 + (i >> 3));
  auto out = runBytes(in, 3 * 4096, [&](ProgramBuilder& b) {
    b.op("vld.s16", {vreg(1), vmem(-1, 0)});
    b.op("vld.u16", {vreg(2), vmem(-1, 0)});
    b.op("vld.f16", {vreg(3), vmem(-1, 0)});
    b.op("vst", {vreg(1), vmem(-1, kOut)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 4096)});
    b.op("vst", {vreg(3), vmem(-1, kOut + 8192)});
  });
  auto h = fromBytes<uint16_t>(in);
  auto w = fromBytes<uint32_t>(out);
  ASSERT_EQ(w.size(), 3072u);
  for (int i = 0; i < 1024; ++i) {
    ASSERT_EQ(w[i], static_cast<uint32_t>(static_cast<int32_t>(static_cast<int16_t>(h[i])))) << i;
    ASSERT_EQ(w[1024 + i], static_cast<uint32_t>(h[i])) << i;
    ASSERT_EQ(w[2048 + i], std::bit_cast<uint32_t>(halfToFloat(h[i]))) << i;
  }
}

TEST(SimTypes, SixteenBitStoresNarrow) {
  auto words = probeFloats(1024);
  auto out = runBytes(toBytes(words), 4096 + 4096, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vst.s16", {vreg(1), vmem(-1, kOut)});
    b.op("vst.f16", {vreg(1), vmem(-1, kOut + 2048)});
    b.op("vrnd.f16", {vreg(2), vreg(1)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 4096)});
  });
  auto h = fromBytes<uint16_t>(out.substr(0, 4096));
  auto r = fromBytes<uint32_t>(out.substr(4096));
  for (int i = 0; i < 1024; ++i) {
    ASSERT_EQ(h[i], static_cast<uint16_t>(words[i])) << "vst.s16 " << i;
    ASSERT_EQ(h[1024 + i], floatToHalf(F(words[i]))) << "vst.f16 " << std::hex << words[i];
    ASSERT_EQ(r[i], std::bit_cast<uint32_t>(halfToFloat(floatToHalf(F(words[i]))))) << "vrnd.f16 " << std::hex
                                                                                     << words[i];
  }
}

TEST(SimTypes, ByteLoadsZeroExtend) {
  std::string in(1024, '\0');
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7);
  auto out = runBytes(in, 4096, [&](ProgramBuilder& b) {
    b.op("vld.u8", {vreg(1), vmem(-1, 0)});
    b.op("vst", {vreg(1), vmem(-1, kOut)});
  });
  auto w = fromBytes<uint32_t>(out);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(w[i], static_cast<uint8_t>(in[i])) << i;
}

// Every one-byte float format: all 256 codes load as decodeFloat says, and
// stores / vrnd follow encodeFloat on a spread of f32 patterns.
TEST(SimTypes, ByteFloatFormatsMatchFloatFormat) {
  const FloatFormat formats[] = {FloatFormat::F8E4M3FN,      FloatFormat::F8E5M2,     FloatFormat::F8E4M3,
                                 FloatFormat::F8E3M4,        FloatFormat::F8E4M3FNUZ, FloatFormat::F8E5M2FNUZ,
                                 FloatFormat::F8E4M3B11FNUZ, FloatFormat::F8E8M0FNU,  FloatFormat::F4E2M1FN,
                                 FloatFormat::F6E2M3FN,      FloatFormat::F6E3M2FN};
  std::vector<uint32_t> words = probeFloats(1024);
  // Values near each format's range as well: scaled small integers.
  for (int i = 0; i < 256; ++i) words[600 + i] = std::bit_cast<uint32_t>(static_cast<float>(i - 128) * 0.37f);
  std::string codes(1024, '\0');
  for (int i = 0; i < 1024; ++i) codes[i] = static_cast<char>(i);
  std::string in = toBytes(words) + codes;
  for (FloatFormat fmt : formats) {
    std::string name(floatFormatInfo(fmt).name);
    auto out = runBytes(in, 1024 + 4096 + 4096, [&](ProgramBuilder& b) {
      b.op("vld", {vreg(1), vmem(-1, 0)});
      b.op("vst." + name, {vreg(1), vmem(-1, kOut)});
      b.op("vrnd." + name, {vreg(2), vreg(1)});
      b.op("vst", {vreg(2), vmem(-1, kOut + 1024)});
      b.op("vld." + name, {vreg(3), vmem(-1, 4096)});
      b.op("vst", {vreg(3), vmem(-1, kOut + 1024 + 4096)});
    });
    ASSERT_EQ(out.size(), 1024u + 8192u) << name;
    auto rounded = fromBytes<uint32_t>(out.substr(1024, 4096));
    auto loaded = fromBytes<uint32_t>(out.substr(1024 + 4096));
    for (int i = 0; i < 1024; ++i) {
      uint32_t code = encodeFloat(fmt, F(words[i]));
      ASSERT_EQ(static_cast<uint8_t>(out[i]), code) << name << " store " << std::hex << words[i];
      ASSERT_EQ(rounded[i], std::bit_cast<uint32_t>(static_cast<float>(decodeFloat(fmt, code))))
          << name << " vrnd " << std::hex << words[i];
      ASSERT_EQ(loaded[i], std::bit_cast<uint32_t>(static_cast<float>(decodeFloat(fmt, i & 0xFF))))
          << name << " load " << i;
    }
  }
}

TEST(SimTypes, NarrowAccessesCheckAlignmentAndBounds) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  b.entry("main", {}, {});
  b.op("smov", {sreg(1), imm(1)});
  b.op("vld.f16", {vreg(1), vmem(1, 0)});
  b.op("halt", {});
  isa::Program p = b.finish();
  DiagnosticEngine diags;
  EXPECT_FALSE(simulate(p, t, {}, SimOptions{}, diags));
  EXPECT_NE(firstErrorMessage(diags).find("not 2-byte aligned"), std::string::npos) << firstErrorMessage(diags);
}

}  // namespace
}  // namespace tpu::sim
