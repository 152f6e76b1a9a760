// Semantics of the wide-element instructions: word-strided loads and stores
// (vld.e64/vld.e128, vst.e64/vst.e128), checked byte for byte against the
// layout XLA literals use (little-endian elements of 8 or 16 bytes), and
// register-pair arithmetic on 64-bit integers and f64 against host C++.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
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

// Runs `ops` on 1024-element 8-byte inputs x (v0:v1) and y (v2:v3) loaded
// with vld.e64; `ops` leaves its result pair in v4:v5, stored with vst.e64.
std::vector<uint64_t> runPair(const std::vector<uint64_t>& x, const std::vector<uint64_t>& y,
                              const std::function<void(ProgramBuilder&)>& ops) {
  std::string in = toBytes(x) + toBytes(y);
  auto out = runWide(in, std::string(8192, '\0'), [&](ProgramBuilder& b) {
    b.op("vld.e64", {vreg(0), vmem(-1, 0), imm(0)});
    b.op("vld.e64", {vreg(1), vmem(-1, 0), imm(1)});
    b.op("vld.e64", {vreg(2), vmem(-1, 8192), imm(0)});
    b.op("vld.e64", {vreg(3), vmem(-1, 8192), imm(1)});
    ops(b);
    b.op("vst.e64", {vreg(4), vmem(-1, kOut), imm(0)});
    b.op("vst.e64", {vreg(5), vmem(-1, kOut), imm(1)});
  });
  return fromBytes<uint64_t>(out);
}

void binaryPair(ProgramBuilder& b, const char* mnemonic) {
  for (int w = 0; w < 2; ++w) b.op(mnemonic, {vreg(4 + w), vreg(0), vreg(1), vreg(2), vreg(3), imm(w)});
}

// Interesting 64-bit patterns first, then a mix.
std::vector<uint64_t> probe64(uint64_t seed, const std::vector<uint64_t>& specials) {
  std::vector<uint64_t> v(1024);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i + seed) * 0x9E3779B97F4A7C15ull ^ (seed << 40);
  for (size_t i = 0; i < specials.size() && i < v.size(); ++i) v[i] = specials[i];
  return v;
}

double D(uint64_t u) { return std::bit_cast<double>(u); }
uint64_t U(double d) { return std::bit_cast<uint64_t>(d); }

TEST(SimWide, IntegerPairMultiplyShiftsAndDivide) {
  const uint64_t m = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> x =
      probe64(1, {m, 0x8000000000000000ull, 0xFFFFFFFFull, 5, 0x8000000000000000ull, 7, 1});
  std::vector<uint64_t> y = probe64(2, {m, m, 0xFFFFFFFFull, 0, m, 64, 65});
  for (size_t i = 0; i < 64; ++i) y[100 + i] = i * 3;  // shift amounts around 64 and beyond
  auto mul = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vmul.i64"); });
  auto sra = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vsra.i64"); });
  auto shl = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vshl.i64"); });
  auto div = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vdiv.s64"); });
  auto remu = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vrem.u64"); });
  ASSERT_EQ(mul.size(), 1024u);
  for (size_t i = 0; i < 1024; ++i) {
    int64_t sx = static_cast<int64_t>(x[i]), sy = static_cast<int64_t>(y[i]);
    ASSERT_EQ(mul[i], x[i] * y[i]) << i;
    ASSERT_EQ(sra[i], static_cast<uint64_t>(y[i] >= 64 ? (sx < 0 ? -1 : 0) : sx >> y[i])) << i;
    ASSERT_EQ(shl[i], y[i] >= 64 ? 0 : x[i] << y[i]) << i;
    int64_t q = sy == 0 ? -1 : (sy == -1 && sx == std::numeric_limits<int64_t>::min()) ? sx : sx / sy;
    ASSERT_EQ(div[i], static_cast<uint64_t>(q)) << i;
    ASSERT_EQ(remu[i], y[i] == 0 ? x[i] : x[i] % y[i]) << i;
  }
}

TEST(SimWide, MulhiPairsAreTheHigh64BitsOf128BitProducts) {
  const uint64_t m = std::numeric_limits<uint64_t>::max(), lo = 0x8000000000000000ull;
  std::vector<uint64_t> x = probe64(7, {m, lo, lo, lo - 1, m, 0xFFFFFFFFull, 0, 1, m});
  std::vector<uint64_t> y = probe64(8, {m, lo, lo - 1, lo - 1, 1, 0x100000000ull, m, m, 2});
  auto hs = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vmulhi.s64"); });
  auto hu = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vmulhi.u64"); });
  ASSERT_EQ(hs.size(), 1024u);
  for (size_t i = 0; i < 1024; ++i) {
    __int128 ps = static_cast<__int128>(static_cast<int64_t>(x[i])) * static_cast<int64_t>(y[i]);
    unsigned __int128 pu = static_cast<unsigned __int128>(x[i]) * y[i];
    ASSERT_EQ(hs[i], static_cast<uint64_t>(ps >> 64)) << i;
    ASSERT_EQ(hu[i], static_cast<uint64_t>(pu >> 64)) << i;
  }
  EXPECT_EQ(hs[0], 0u);                      // -1 * -1 = 1
  EXPECT_EQ(hu[0], m - 1);                   // (2^64 - 1)^2 = 2^128 - 2^65 + 1
  EXPECT_EQ(hs[1], 0x4000000000000000ull);   // INT64_MIN^2 = 2^126
  EXPECT_EQ(hs[4], m);                       // -1 * 1: the sign fills the high half
}

TEST(SimWide, F64PairArithmeticIsTheHostsBitForBit) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> x = probe64(3, {U(0.1), U(-0.0), U(inf), U(nan), U(1e308), U(-3.5), U(2.5), U(0.0)});
  std::vector<uint64_t> y = probe64(4, {U(0.2), U(0.0), U(-inf), U(1.0), U(1e308), U(0.0), U(-0.0), U(-0.0)});
  auto add = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vadd.f64"); });
  auto dv = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vdiv.f64"); });
  auto sq = runPair(x, y, [](ProgramBuilder& b) {
    for (int w = 0; w < 2; ++w) b.op("vsqrt.f64", {vreg(4 + w), vreg(0), vreg(1), imm(w)});
  });
  ASSERT_EQ(add.size(), 1024u);
  for (size_t i = 0; i < 1024; ++i) {
    ASSERT_EQ(add[i], U(D(x[i]) + D(y[i]))) << i;
    ASSERT_EQ(dv[i], U(D(x[i]) / D(y[i]))) << i;
    ASSERT_EQ(sq[i], U(std::sqrt(D(x[i])))) << i;
  }
  EXPECT_EQ(add[1], U(0.0));  // -0 + +0
  EXPECT_EQ(dv[5], U(-inf));
}

TEST(SimWide, F64PairMaxMinAndRemainderAreTheSimulatorsOwn) {
  // The emulated pair unit's max/min: NaN if either is NaN (x's first),
  // -0 below +0; fmod exact; rsqrt as 1 / sqrt (two roundings).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> x = probe64(5, {U(-0.0), U(0.0), U(nan), U(1.0), U(5.5), U(-inf), U(7.0)});
  std::vector<uint64_t> y = probe64(6, {U(0.0), U(-0.0), U(1.0), U(nan), U(-2.0), U(3.0), U(0.0)});
  auto mx = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vmax.f64"); });
  auto mn = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vmin.f64"); });
  auto rm = runPair(x, y, [](ProgramBuilder& b) { binaryPair(b, "vrem.f64"); });
  auto rs = runPair(x, y, [](ProgramBuilder& b) {
    for (int w = 0; w < 2; ++w) b.op("vrsqrt.f64", {vreg(4 + w), vreg(0), vreg(1), imm(w)});
  });
  ASSERT_EQ(mx.size(), 1024u);
  EXPECT_EQ(mx[0], U(0.0));
  EXPECT_EQ(mn[0], U(-0.0));
  EXPECT_EQ(mx[1], U(0.0));
  EXPECT_EQ(mn[1], U(-0.0));
  EXPECT_TRUE(std::isnan(D(mx[2])) && std::isnan(D(mn[3])));
  EXPECT_EQ(rm[4], U(1.5));
  EXPECT_TRUE(std::isnan(D(rm[6])));
  for (size_t i = 0; i < 1024; ++i) {
    double a = D(x[i]), b = D(y[i]);
    if (!std::isnan(a) && !std::isnan(b) && a != b) {
      ASSERT_EQ(mx[i], U(std::max(a, b))) << i;
      ASSERT_EQ(mn[i], U(std::min(a, b))) << i;
    }
    if (!std::isnan(D(rm[i]))) ASSERT_EQ(rm[i], U(std::fmod(a, b))) << i;
    if (!std::isnan(D(rs[i]))) ASSERT_EQ(rs[i], U(1.0 / std::sqrt(a))) << i;
  }
}

TEST(SimWide, PairComparesAndConverts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> x = probe64(5, {U(nan), U(-0.0), 1, 0xFFFFFFFFFFFFFFFFull, U(1e20), U(-1e20)});
  std::vector<uint64_t> y = probe64(6, {U(nan), U(0.0), 2, 1, U(1e20), U(3.0)});
  // Masks to 0/1 in both words, from a signed, an unsigned and an f64 compare.
  auto lt = [&](const char* mnemonic) {
    return runPair(x, y, [&](ProgramBuilder& b) {
      b.op(mnemonic, {vmask(1), vreg(0), vreg(1), vreg(2), vreg(3)});
      b.op("vmov.s32", {vreg(6), imm(1)});
      b.op("vsel.s32", {vreg(4), vmask(1), vreg(6), imm(0)});
      b.op("vmov.s32", {vreg(5), imm(0)});
    });
  };
  auto ls = lt("vcmp.lt.s64"), lu = lt("vcmp.lt.u64"), lf = lt("vcmp.lt.f64"), nf = lt("vcmp.ne.f64");
  // f64 -> s64 saturates, f64 -> f32 -> f64 rounds through f32.
  auto cv = runPair(x, y, [](ProgramBuilder& b) {
    for (int w = 0; w < 2; ++w) b.op("vcvt.s64.f64", {vreg(4 + w), vreg(0), vreg(1), imm(w)});
  });
  auto rt = runPair(x, y, [](ProgramBuilder& b) {
    b.op("vcvt.f32.f64", {vreg(6), vreg(0), vreg(1)});
    for (int w = 0; w < 2; ++w) b.op("vcvt.f64.f32", {vreg(4 + w), vreg(6), imm(w)});
  });
  ASSERT_EQ(ls.size(), 1024u);
  for (size_t i = 0; i < 1024; ++i) {
    ASSERT_EQ(ls[i], static_cast<int64_t>(x[i]) < static_cast<int64_t>(y[i]) ? 1u : 0u) << i;
    ASSERT_EQ(lu[i], x[i] < y[i] ? 1u : 0u) << i;
    ASSERT_EQ(lf[i], D(x[i]) < D(y[i]) ? 1u : 0u) << i;
    ASSERT_EQ(nf[i], D(x[i]) != D(y[i]) ? 1u : 0u) << i;
    double d = D(x[i]);
    int64_t want = std::isnan(d)                 ? 0
                   : d <= -9.2233720368547758e18 ? std::numeric_limits<int64_t>::min()
                   : d >= 9.2233720368547758e18  ? std::numeric_limits<int64_t>::max()
                                                 : static_cast<int64_t>(std::trunc(d));
    ASSERT_EQ(cv[i], static_cast<uint64_t>(want)) << i;
    ASSERT_EQ(rt[i], U(static_cast<double>(static_cast<float>(d)))) << i;
  }
  EXPECT_EQ(cv[4], static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(nf[0], 1u);
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
  EXPECT_NE(firstErrorMessage(diags).find("not 8-byte aligned"), std::string::npos)
      << firstErrorMessage(diags);
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
