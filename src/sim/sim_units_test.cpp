// Unit semantics of the functional half, bit-exact against host
// references: scalar, vector ALU, masks, bf16, transcendentals, XLU, MXU,
// DMA descriptors, semaphores.
#include <gtest/gtest.h>

#include <climits>
#include <functional>
#include <string_view>

#include "sim/builder.h"
#include "sim/machine.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace opnd;
using namespace testing;

constexpr int64_t kOut = 1 << 20;  // VMEM address of the output area

// Runs `body` between "input words -> VMEM 0" and "VMEM kOut -> output".
std::vector<uint32_t> runBody(const std::vector<uint32_t>& input, size_t outWords,
                              const std::function<void(ProgramBuilder&)>& body, const std::string& targetName = "v5e",
                              std::string* error = nullptr, SimResult* result = nullptr) {
  target::TargetDesc t = loadBuiltin(targetName);
  ProgramBuilder b(t);
  uint32_t in = b.hbmBuffer("in", isa::DType::U32, {static_cast<int64_t>(input.size())});
  uint32_t out = b.hbmBuffer("out", isa::DType::U32, {static_cast<int64_t>(outWords)});
  uint32_t din = b.descriptor("in", static_cast<uint32_t>(input.size() * 4), {});
  uint32_t dout = b.descriptor("out", static_cast<uint32_t>(outWords * 4), {});
  b.entry("main", {in}, {out});
  b.op("dma.h2v", {desc(din), vmem(-1, 0), hbm(in, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  body(b);
  b.op("dma.v2h", {desc(dout), hbm(out, -1, 0), vmem(-1, kOut), sem(1)});
  b.op("halt", {});
  isa::Program p = b.finish();
  DiagnosticEngine diags;
  auto r = simulate(p, t, {toBytes(input)}, SimOptions{}, diags);
  if (!r) {
    if (error) *error = firstErrorMessage(diags);
    else ADD_FAILURE() << firstErrorMessage(diags);
    return {};
  }
  if (result) *result = *r;
  return fromBytes<uint32_t>(r->results[0]);
}

std::vector<uint32_t> specialFloats(size_t n, uint32_t seed) {
  std::vector<float> f = randomFloats(n, seed, -4.0f, 4.0f);
  std::vector<uint32_t> u(n);
  for (size_t i = 0; i < n; ++i) u[i] = std::bit_cast<uint32_t>(f[i]);
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                               0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u, 0xC0000000u};
  for (size_t i = 0; i < n; i += 37) u[i] = specials[(i / 37) % 12];
  return u;
}

float F(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t U(float f) { return std::bit_cast<uint32_t>(f); }

void binaryF32(const char* mnemonic, const std::function<uint32_t(uint32_t, uint32_t)>& ref) {
  auto in = specialFloats(2048, 11);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vld", {vreg(2), vmem(-1, 4096)});
    b.op(mnemonic, {vreg(3), vreg(1), vreg(2)});
    b.op("vst", {vreg(3), vmem(-1, kOut)});
  });
  ASSERT_EQ(out.size(), 1024u);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], ref(in[i], in[1024 + i])) << mnemonic << " element " << i;
}

TEST(SimVector, F32Arithmetic) {
  binaryF32("vadd.f32", [](uint32_t a, uint32_t b) { return U(F(a) + F(b)); });
  binaryF32("vsub.f32", [](uint32_t a, uint32_t b) { return U(F(a) - F(b)); });
  binaryF32("vmul.f32", [](uint32_t a, uint32_t b) { return U(F(a) * F(b)); });
  binaryF32("vdiv.f32", [](uint32_t a, uint32_t b) { return U(F(a) / F(b)); });
}

TEST(SimVector, F32MaxMinNaNAndSignedZero) {
  auto isnan = [](uint32_t x) { return (x & 0x7FFFFFFFu) > 0x7F800000u; };
  binaryF32("vmax.f32", [&](uint32_t a, uint32_t b) -> uint32_t {
    if (isnan(a) || isnan(b)) return 0x7FC00000u;
    if (F(a) == F(b)) return a & b;
    return F(a) > F(b) ? a : b;
  });
  binaryF32("vmin.f32", [&](uint32_t a, uint32_t b) -> uint32_t {
    if (isnan(a) || isnan(b)) return 0x7FC00000u;
    if (F(a) == F(b)) return a | b;
    return F(a) < F(b) ? a : b;
  });
}

TEST(SimVector, S32Arithmetic) {
  auto in = specialFloats(2048, 12);
  for (auto& [mn, ref] : std::vector<std::pair<const char*, std::function<uint32_t(uint32_t, uint32_t)>>>{
           {"vadd.s32", [](uint32_t a, uint32_t b) { return a + b; }},
           {"vmul.s32", [](uint32_t a, uint32_t b) { return a * b; }},
           {"vmax.s32", [](uint32_t a, uint32_t b) { return static_cast<int32_t>(a) > static_cast<int32_t>(b) ? a : b; }},
           {"vsra", [](uint32_t a, uint32_t b) { return static_cast<uint32_t>(static_cast<int32_t>(a) >> (b & 31)); }},
           {"vshr", [](uint32_t a, uint32_t b) { return a >> (b & 31); }}}) {
    auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
      b.op("vld", {vreg(1), vmem(-1, 0)});
      b.op("vld", {vreg(2), vmem(-1, 4096)});
      b.op(mn, {vreg(3), vreg(1), vreg(2)});
      b.op("vst", {vreg(3), vmem(-1, kOut)});
    });
    for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], ref(in[i], in[1024 + i])) << mn << " " << i;
  }
}

TEST(SimVector, FmaIsFused) {
  auto in = specialFloats(3072, 13);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    for (int r = 0; r < 3; ++r) b.op("vld", {vreg(r + 1), vmem(-1, r * 4096)});
    b.op("vfma.f32", {vreg(4), vreg(1), vreg(2), vreg(3)});
    b.op("vst", {vreg(4), vmem(-1, kOut)});
  });
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], U(std::fma(F(in[i]), F(in[1024 + i]), F(in[2048 + i])))) << i;
}

TEST(SimVector, ScalarBroadcastAndImmediate) {
  auto in = specialFloats(1024, 14);
  auto out = runBody(in, 2048, [&](ProgramBuilder& b) {
    b.op("smov", {sreg(3), imm(static_cast<int64_t>(static_cast<int32_t>(U(2.5f))))});
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vmul.f32", {vreg(2), vreg(1), sreg(3)});
    b.op("vadd.f32", {vreg(4), vreg(1), fimm(-1.25f)});
    b.op("vst", {vreg(2), vmem(-1, kOut)});
    b.op("vst", {vreg(4), vmem(-1, kOut + 4096)});
  });
  for (int i = 0; i < 1024; ++i) {
    ASSERT_EQ(out[i], U(F(in[i]) * 2.5f));
    ASSERT_EQ(out[1024 + i], U(F(in[i]) + -1.25f));
  }
}

TEST(SimVector, Bf16RoundingMatchesFloatFormat) {
  // Many bit patterns, including every exponent and the rounding boundaries.
  std::vector<uint32_t> in(8 * 1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i * 0x9E3779B1u) ^ ((i & 7) == 0 ? 0x8000u : 0u);
  in[0] = 0x7F7FFFFFu;  // rounds to inf
  in[1] = 0x3F808000u;  // tie, even stays
  in[2] = 0x3F818000u;  // tie, odd rounds up
  in[3] = 0x7F800001u;  // signalling NaN stays NaN
  auto out = runBody(in, in.size(), [&](ProgramBuilder& b) {
    for (int r = 0; r < 8; ++r) {
      b.op("vld", {vreg(1), vmem(-1, r * 4096)});
      b.op("vrnd.bf16", {vreg(2), vreg(1)});
      b.op("vst", {vreg(2), vmem(-1, kOut + r * 4096)});
    }
  });
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], static_cast<uint32_t>(floatToBf16(F(in[i]))) << 16) << std::hex << in[i];
}

TEST(SimVector, Bf16StoreLoadRoundTrip) {
  auto in = specialFloats(1024, 15);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vst.bf16", {vreg(1), vmem(-1, 8192)});
    b.op("vld.bf16", {vreg(2), vmem(-1, 8192)});
    b.op("vst", {vreg(2), vmem(-1, kOut)});
  });
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], static_cast<uint32_t>(floatToBf16(F(in[i]))) << 16) << i;
}

TEST(SimVector, MasksSelectAndMaskedStore) {
  auto in = specialFloats(2048, 16);
  auto out = runBody(in, 2048, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vld", {vreg(2), vmem(-1, 4096)});
    b.op("vcmp.lt.f32", {vmask(0), vreg(1), vreg(2)});
    b.op("mlanes", {vmask(1), imm(100)});
    b.op("mand", {vmask(2), vmask(0), vmask(1)});
    b.op("vsel.f32", {vreg(3), vmask(2), vreg(1), fimm(7.0f)});
    b.op("vst", {vreg(3), vmem(-1, kOut)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 4096)});
    b.op("vst.m", {vreg(1), vmem(-1, kOut + 4096), vmask(2)});
  });
  for (int i = 0; i < 1024; ++i) {
    bool m = F(in[i]) < F(in[1024 + i]) && i % 128 < 100;
    ASSERT_EQ(out[i], m ? in[i] : U(7.0f)) << i;
    ASSERT_EQ(out[1024 + i], m ? in[i] : in[1024 + i]) << i;
  }
}

TEST(SimVector, ConversionsSaturate) {
  std::vector<uint32_t> in(1024);
  const float vals[] = {1.5f, -1.5f, 2.5f, 3e9f, -3e9f, NAN, INFINITY, -0.0f};
  for (int i = 0; i < 1024; ++i) in[i] = U(vals[i % 8]);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vcvt.s32.f32", {vreg(2), vreg(1)});
    b.op("vst", {vreg(2), vmem(-1, kOut)});
  });
  const int32_t expect[] = {1, -1, 2, INT32_MAX, INT32_MIN, 0, INT32_MAX, 0};
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(static_cast<int32_t>(out[i]), expect[i % 8]) << i;
}

TEST(SimVector, TranscendentalsUseHostFloatFunctions) {
  auto in = specialFloats(1024, 17);
  for (auto& [mn, ref] : std::vector<std::pair<const char*, std::function<float(float)>>>{
           {"vexp", [](float x) { return std::exp(x); }},
           {"vtanh", [](float x) { return std::tanh(x); }},
           {"vlogistic", [](float x) { return 1.0f / (1.0f + std::exp(-x)); }},
           {"vrsqrt", [](float x) { return 1.0f / std::sqrt(x); }},
           // a register and a broadcast immediate as the second operand
           {"vpow", [](float x) { return std::pow(x, -0.5f); }}}) {
    auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
      b.op("vld", {vreg(1), vmem(-1, 0)});
      if (std::string_view(mn) == "vpow") b.op(mn, {vreg(2), vreg(1), fimm(-0.5f)});
      else b.op(mn, {vreg(2), vreg(1)});
      b.op("vst", {vreg(2), vmem(-1, kOut)});
    });
    for (int i = 0; i < 1024; ++i) {
      float e = ref(F(in[i]));
      if (std::isnan(e)) ASSERT_TRUE(std::isnan(F(out[i]))) << mn << " " << i;
      else ASSERT_EQ(out[i], U(e)) << mn << " " << i;
    }
  }
}

TEST(SimXlu, ReductionsRotatesPermutes) {
  auto in = specialFloats(2048, 18);
  for (int i = 0; i < 1024; ++i) in[i] = U(static_cast<float>(static_cast<int>(i * 37 % 101) - 50) * 0.375f);
  for (int i = 0; i < 1024; ++i) in[1024 + i] = static_cast<uint32_t>(i * 5 + 3);  // permutation indices
  auto out = runBody(in, 5 * 1024, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});
    b.op("vld", {vreg(2), vmem(-1, 4096)});
    b.op("vred.sum.lane.f32", {vreg(3), vreg(1)});
    b.op("vred.max.sub.f32", {vreg(4), vreg(1)});
    b.op("vrot.lane", {vreg(5), vreg(1), imm(-3)});
    b.op("vperm.lane", {vreg(6), vreg(1), vreg(2)});
    b.op("vrot.sub", {vreg(1), vreg(1), imm(2)});  // in place
    for (int r = 0; r < 5; ++r) b.op("vst", {vreg(3 + r == 7 ? 1 : 3 + r), vmem(-1, kOut + r * 4096)});
  });
  for (int s = 0; s < 8; ++s) {
    float x[128];
    for (int l = 0; l < 128; ++l) x[l] = F(in[s * 128 + l]);
    for (int w = 64; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) x[l] += x[l + w];
    for (int l = 0; l < 128; ++l) {
      ASSERT_EQ(F(out[s * 128 + l]), x[0]);
      float mx = -INFINITY;
      for (int t = 0; t < 8; ++t) mx = std::max(mx, F(in[t * 128 + l]));
      ASSERT_EQ(F(out[1024 + s * 128 + l]), mx);
      ASSERT_EQ(out[2048 + s * 128 + ((l - 3) & 127)], in[s * 128 + l]);
      ASSERT_EQ(out[3072 + s * 128 + l], in[s * 128 + (in[1024 + s * 128 + l] & 127)]);
      ASSERT_EQ(out[4096 + ((s + 2) & 7) * 128 + l], in[s * 128 + l]);
    }
  }
}

TEST(SimXlu, Transpose) {
  std::vector<uint32_t> in(16 * 1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i);
  auto out = runBody(in, in.size(), [&](ProgramBuilder& b) {
    for (int p = 0; p < 16; ++p) {
      b.op("vld", {vreg(1), vmem(-1, p * 4096)});
      b.op("vxpose.push", {xlu(1), vreg(1)});
    }
    for (int p = 0; p < 16; ++p) {
      b.op("vxpose.pop", {vreg(2), xlu(1)});
      b.op("vst", {vreg(2), vmem(-1, kOut + p * 4096)});
    }
  });
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 128; ++c) ASSERT_EQ(out[r * 128 + c], in[c * 128 + r]);
}

TEST(SimMxu, PushMatchesReferenceAndTransposedWeights) {
  auto a = specialFloats(1024, 19);
  std::vector<float> wf = randomFloats(128 * 128, 20);
  for (int i = 0; i < 1024; ++i)
    if ((a[i] & 0x7F800000u) == 0x7F800000u) a[i] = U(0.5f);  // finite operands
  std::vector<uint32_t> in = a;
  for (float x : wf) in.push_back(U(x));
  auto out = runBody(in, 2048, [&](ProgramBuilder& b) {
    for (int p = 0; p < 16; ++p) {
      b.op("vld", {vreg(1), vmem(-1, 4096 + p * 4096)});
      b.op("mxu.wpush.bf16", {mxu(2), vreg(1)});
      b.op("mxu.wpusht.bf16", {mxu(3), vreg(1)});
    }
    b.op("mxu.wlatch", {mxu(2)});
    b.op("mxu.wlatch", {mxu(3)});
    b.op("vld", {vreg(2), vmem(-1, 0)});
    b.op("mxu.matmul.bf16", {mxu(2), vreg(2)});
    b.op("mxu.matmul.bf16", {mxu(3), vreg(2)});
    b.op("mxu.pop", {vreg(3), mxu(2)});
    b.op("mxu.pop", {vreg(4), mxu(3)});
    b.op("vst", {vreg(3), vmem(-1, kOut)});
    b.op("vst", {vreg(4), vmem(-1, kOut + 4096)});
  });
  auto bf = [](uint32_t x) { return bf16ToFloat(floatToBf16(F(x))); };
  for (int r = 0; r < 8; ++r)
    for (int n = 0; n < 128; ++n) {
      float acc = 0.0f, accT = 0.0f;
      for (int k = 0; k < 128; ++k) {
        acc = std::fma(bf(a[r * 128 + k]), bf(U(wf[k * 128 + n])), acc);
        accT = std::fma(bf(a[r * 128 + k]), bf(U(wf[n * 128 + k])), accT);
      }
      ASSERT_EQ(F(out[r * 128 + n]), acc) << r << "," << n;
      ASSERT_EQ(F(out[1024 + r * 128 + n]), accT) << r << "," << n;
    }
}

// A stage written partly by wpush (rows) and partly by wpusht (columns)
// leaves the other elements zero, also when the host reuses weight buffers
// of earlier latches.
TEST(SimMxu, MixedWeightPushesLeaveTheRestZero) {
  std::vector<uint32_t> a;
  for (float x : randomFloats(1024, 23)) a.push_back(U(x));
  std::vector<float> wf = randomFloats(128 * 128, 24);
  std::vector<uint32_t> in = a;
  for (float x : wf) in.push_back(U(x));
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(2), vmem(-1, 0)});
    for (int round = 0; round < 4; ++round) {
      for (int p = 0; p < 16; ++p) {
        b.op("vld", {vreg(1), vmem(-1, 4096 + p * 4096)});
        b.op(round < 3 || p < 8 ? "mxu.wpush.bf16" : "mxu.wpusht.bf16", {mxu(0), vreg(1)});
      }
      b.op("mxu.wlatch", {mxu(0)});
      b.op("mxu.matmul.bf16", {mxu(0), vreg(2)});
      b.op("mxu.pop", {vreg(3), mxu(0)});
    }
    b.op("vst", {vreg(3), vmem(-1, kOut)});
  });
  auto bf = [](uint32_t x) { return bf16ToFloat(floatToBf16(F(x))); };
  // Block p is the 8x128 slab wf[p*1024 ...]: rows 8p.. for p < 8, columns 8p.. (transposed) after.
  std::vector<float> w(128 * 128, 0.0f);
  for (int p = 0; p < 16; ++p)
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 128; ++i) {
        float v = bf(U(wf[p * 1024 + j * 128 + i]));
        if (p < 8) w[(p * 8 + j) * 128 + i] = v;
        else w[i * 128 + p * 8 + j] = v;
      }
  ASSERT_EQ(out.size(), 1024u);
  for (int r = 0; r < 8; ++r)
    for (int n = 0; n < 128; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < 128; ++k) acc = std::fma(bf(a[r * 128 + k]), w[k * 128 + n], acc);
      ASSERT_EQ(F(out[r * 128 + n]), acc) << r << "," << n;
    }
}

TEST(SimMxu, Int8) {
  std::vector<uint32_t> in(1024 + 128 * 128);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(static_cast<int32_t>(i * 7919 % 301) - 150);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    for (int p = 0; p < 16; ++p) {
      b.op("vld", {vreg(1), vmem(-1, 4096 + p * 4096)});
      b.op("mxu.wpush.s8", {mxu(0), vreg(1)});
    }
    b.op("mxu.wlatch", {mxu(0)});
    b.op("vld", {vreg(2), vmem(-1, 0)});
    b.op("mxu.matmul.s8", {mxu(0), vreg(2)});
    b.op("mxu.pop", {vreg(3), mxu(0)});
    b.op("vst", {vreg(3), vmem(-1, kOut)});
  });
  auto sat = [](uint32_t x) { return std::clamp(static_cast<int32_t>(x), -128, 127); };
  for (int r = 0; r < 8; ++r)
    for (int n = 0; n < 128; ++n) {
      int32_t acc = 0;
      for (int k = 0; k < 128; ++k) acc += sat(in[r * 128 + k]) * sat(in[1024 + k * 128 + n]);
      ASSERT_EQ(static_cast<int32_t>(out[r * 128 + n]), acc);
    }
}

TEST(SimScalar, ArithmeticEdgesLoopsAndSmem) {
  std::vector<uint32_t> in(1024, 0);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("smov", {sreg(1), imm(INT32_MIN)});
    b.op("sdiv", {sreg(2), sreg(1), imm(-1)});
    b.op("sdiv", {sreg(3), sreg(1), imm(0)});
    b.op("srem", {sreg(4), sreg(1), imm(-1)});
    b.op("srem", {sreg(5), sreg(1), imm(0)});
    b.op("smov", {sreg(6), imm(-7)});
    b.op("sdiv", {sreg(7), sreg(6), imm(2)});
    b.op("srem", {sreg(8), sreg(6), imm(2)});
    b.op("sshr", {sreg(9), sreg(6), imm(33)});
    // sum 1..10 with a counted loop
    b.op("smov", {sreg(10), imm(10)});
    b.op("smov", {sreg(11), imm(0)});
    b.label("l");
    b.op("sadd", {sreg(11), sreg(11), sreg(10)});
    b.branch("loop", {sreg(10)}, "l");
    b.op("sst", {sreg(11), smem(-1, 64)});
    b.op("sld", {sreg(12), smem(-1, 64)});
    b.op("mlanes", {vmask(0), imm(1)});
    for (int r = 2; r <= 12; ++r) {
      b.op("vmov.s32", {vreg(1), sreg(r)});
      b.op("vst.m", {vreg(1), vmem(-1, kOut + r * 4), vmask(0), imm(512), sublanes(1)});
    }
  });
  auto at = [&](int r) { return static_cast<int32_t>(out[r]); };
  EXPECT_EQ(at(2), INT32_MIN);
  EXPECT_EQ(at(3), 0);
  EXPECT_EQ(at(4), 0);
  EXPECT_EQ(at(5), INT32_MIN);
  EXPECT_EQ(at(7), -3);
  EXPECT_EQ(at(8), -1);
  EXPECT_EQ(out[9], 0xFFFFFFF9u >> 1);
  EXPECT_EQ(at(11), 55);
  EXPECT_EQ(at(12), 55);
}

TEST(SimDma, StridedDescriptor) {
  std::vector<uint32_t> in(4096);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    // 4 x 8 chunks of 16 bytes: rows of 64 words, every other chunk.
    uint32_t d = b.descriptor("strided", 16, {{4, 256, 128}, {8, 32, 16}});
    b.op("dma.v2v", {desc(d), vmem(-1, kOut), vmem(-1, 0), sem(3)});
    b.op("sem.wait", {sem(3)});
  });
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c)
      for (int w = 0; w < 4; ++w) ASSERT_EQ(out[r * 32 + c * 4 + w], static_cast<uint32_t>(r * 64 + c * 8 + w));
}

TEST(SimBundle, ReadsSeeStateBeforeTheBundle) {
  std::vector<uint32_t> in(1024, 0);
  auto out = runBody(in, 1024, [&](ProgramBuilder& b) {
    b.op("smov", {sreg(1), imm(5)});
    b.op("smov", {sreg(2), imm(9)});
    // swap in one bundle
    b.bundle({makeInstr("smov", {sreg(1), sreg(2)}), makeInstr("smov", {sreg(2), sreg(1)})});
    b.op("vmov.s32", {vreg(1), sreg(1)});
    b.op("vmov.s32", {vreg(2), sreg(2)});
    b.op("vst", {vreg(1), vmem(-1, kOut), imm(512), sublanes(1)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 512), imm(512), sublanes(1)});
  });
  EXPECT_EQ(out[0], 9u);
  EXPECT_EQ(out[128], 5u);
}

// A masked load in a bundle with a reader of its destination: the reader
// sees the old register, and the sublanes outside the mask keep their value.
TEST(SimBundle, MaskedLoadBesideAReaderKeepsUnmaskedSublanes) {
  std::vector<uint32_t> in(2048);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i);
  auto out = runBody(in, 2048, [&](ProgramBuilder& b) {
    b.op("vld", {vreg(1), vmem(-1, 0)});  // v1 = words 0..1023
    b.bundle({makeInstr("vld", {vreg(1), vmem(-1, 4096), imm(512), sublanes(0x0f)}),
              makeInstr("vmov.s32", {vreg(2), vreg(1)})});
    b.op("vst", {vreg(1), vmem(-1, kOut)});
    b.op("vst", {vreg(2), vmem(-1, kOut + 4096)});
  });
  ASSERT_EQ(out.size(), 2048u);
  for (uint32_t i = 0; i < 1024; ++i) {
    uint32_t sublane = i / 128;
    ASSERT_EQ(out[i], sublane < 4 ? 1024 + i : i) << "v1 element " << i;
    ASSERT_EQ(out[1024 + i], i) << "v2 element " << i;
  }
}

}  // namespace
}  // namespace tpu::sim
