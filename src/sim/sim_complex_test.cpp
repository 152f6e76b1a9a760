// Semantics of the complex rows (vmul.c64, vexp.c128, vabs.c64, ...):
// elements loaded into their part registers with the word-strided loads, one
// result word per op, stored back and compared with std::complex on the host
// (Annex G multiply and divide, libm transcendentals) bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
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

constexpr int64_t kIn2 = 1 << 18;  // VMEM offset of the second operand
constexpr int64_t kOut = 1 << 20;

// 1024 elements of `a` at VMEM 0 and of `b` at kIn2; `body` computes into
// kOut, whose `outBytes` bytes are returned.
std::string runComplex(const std::string& a, const std::string& b, size_t outBytes,
                       const std::function<void(ProgramBuilder&)>& body) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder pb(t);
  auto sz = [](const std::string& s) { return static_cast<int64_t>(s.size()); };
  uint32_t ia = pb.hbmBuffer("a", isa::DType::U8, {sz(a)});
  uint32_t ib = pb.hbmBuffer("b", isa::DType::U8, {sz(b)});
  uint32_t out = pb.hbmBuffer("out", isa::DType::U8, {static_cast<int64_t>(outBytes)});
  uint32_t da = pb.descriptor("a", static_cast<uint32_t>(a.size()), {});
  uint32_t db = pb.descriptor("b", static_cast<uint32_t>(b.size()), {});
  uint32_t dout = pb.descriptor("out", static_cast<uint32_t>(outBytes), {});
  pb.entry("main", {ia, ib}, {out});
  pb.op("dma.h2v", {desc(da), vmem(-1, 0), hbm(ia, -1, 0), sem(0)});
  pb.op("dma.h2v", {desc(db), vmem(-1, kIn2), hbm(ib, -1, 0), sem(0)});
  pb.op("sem.wait", {sem(0), imm(2)});
  body(pb);
  pb.op("dma.v2h", {desc(dout), hbm(out, -1, 0), vmem(-1, kOut), sem(1)});
  pb.op("halt", {});
  isa::Program p = pb.finish();
  DiagnosticEngine diags;
  auto r = simulate(p, t, {a, b}, SimOptions{}, diags);
  if (!r) {
    ADD_FAILURE() << firstErrorMessage(diags);
    return {};
  }
  return r->results[0];
}

// Parts that reach the special paths: zeros, infinities, NaN, overflowing
// and underflowing magnitudes, then ordinary values.
template <typename R>
std::string complexBytes(uint32_t seed) {
  const R inf = std::numeric_limits<R>::infinity();
  const R special[] = {R(0),
                       -R(0),
                       inf,
                       -inf,
                       std::numeric_limits<R>::quiet_NaN(),
                       std::numeric_limits<R>::max(),
                       std::numeric_limits<R>::min(),
                       std::numeric_limits<R>::denorm_min(),
                       R(1),
                       R(-0.5)};
  std::string s(1024 * sizeof(std::complex<R>), '\0');
  uint32_t x = seed;
  for (size_t i = 0; i < 1024; ++i) {
    R p[2];
    for (R& v : p) {
      x = x * 1664525u + 1013904223u;
      v = (x >> 28) < 6 ? special[(x >> 8) % std::size(special)]
                        : R(static_cast<int32_t>(x >> 8) % 1000) / R(37);
    }
    std::memcpy(s.data() + i * sizeof p, p, sizeof p);
  }
  return s;
}

template <typename T>
T elementAt(const std::string& s, size_t i) {
  T v;
  std::memcpy(&v, s.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Bitwise equal, or both NaN.
template <typename R>
bool samePart(R got, R want) {
  return std::memcmp(&got, &want, sizeof(R)) == 0 || (std::isnan(got) && std::isnan(want));
}

TEST(SimComplex, C64MultiplyAndDivideFollowStdComplex) {
  std::string a = complexBytes<float>(1), b = complexBytes<float>(2);
  for (const char* m : {"vmul.c64", "vdiv.c64"}) {
    auto out = runComplex(a, b, 8192, [&](ProgramBuilder& pb) {
      pb.op("vld.e64", {vreg(1), vmem(-1, 0), imm(0)});
      pb.op("vld.e64", {vreg(2), vmem(-1, 0), imm(1)});
      pb.op("vld.e64", {vreg(3), vmem(-1, kIn2), imm(0)});
      pb.op("vld.e64", {vreg(4), vmem(-1, kIn2), imm(1)});
      pb.op(m, {vreg(5), vreg(1), vreg(2), vreg(3), vreg(4), imm(0)});
      pb.op(m, {vreg(6), vreg(1), vreg(2), vreg(3), vreg(4), imm(1)});
      pb.op("vst.e64", {vreg(5), vmem(-1, kOut), imm(0)});
      pb.op("vst.e64", {vreg(6), vmem(-1, kOut), imm(1)});
    });
    ASSERT_EQ(out.size(), 8192u);
    for (size_t i = 0; i < 1024; ++i) {
      auto x = elementAt<std::complex<float>>(a, i), y = elementAt<std::complex<float>>(b, i);
      std::complex<float> want = std::string_view(m) == "vmul.c64" ? x * y : x / y;
      auto got = elementAt<std::complex<float>>(out, i);
      ASSERT_TRUE(samePart(got.real(), want.real()) && samePart(got.imag(), want.imag()))
          << m << " element " << i << ": " << x << " op " << y << " gave " << got << ", want " << want;
    }
  }
}

TEST(SimComplex, C128UnaryRowsReadFourRegistersAndWriteOneWord) {
  std::string a = complexBytes<double>(3);
  auto out = runComplex(a, a, 16384, [&](ProgramBuilder& pb) {
    for (int w = 0; w < 4; ++w) pb.op("vld.e128", {vreg(1 + w), vmem(-1, 0), imm(w)});
    for (int w = 0; w < 4; ++w) {
      pb.op("vexp.c128", {vreg(5), vreg(1), vreg(2), vreg(3), vreg(4), imm(w)});
      pb.op("vst.e128", {vreg(5), vmem(-1, kOut), imm(w)});
    }
  });
  ASSERT_EQ(out.size(), 16384u);
  for (size_t i = 0; i < 1024; ++i) {
    auto x = elementAt<std::complex<double>>(a, i);
    auto want = std::exp(x), got = elementAt<std::complex<double>>(out, i);
    ASSERT_TRUE(samePart(got.real(), want.real()) && samePart(got.imag(), want.imag()))
        << "exp " << x << " gave " << got << ", want " << want;
  }
}

TEST(SimComplex, C128BinaryRowsReadEightRegisters) {
  std::string a = complexBytes<double>(6), b = complexBytes<double>(7);
  for (const char* m : {"vmul.c128", "vdiv.c128"}) {
    auto out = runComplex(a, b, 16384, [&](ProgramBuilder& pb) {
      for (int w = 0; w < 4; ++w) {
        pb.op("vld.e128", {vreg(1 + w), vmem(-1, 0), imm(w)});
        pb.op("vld.e128", {vreg(5 + w), vmem(-1, kIn2), imm(w)});
      }
      for (int w = 0; w < 4; ++w) {
        pb.op(m, {vreg(9), vreg(1), vreg(2), vreg(3), vreg(4), vreg(5), vreg(6), vreg(7), vreg(8), imm(w)});
        pb.op("vst.e128", {vreg(9), vmem(-1, kOut), imm(w)});
      }
    });
    ASSERT_EQ(out.size(), 16384u);
    for (size_t i = 0; i < 1024; ++i) {
      auto x = elementAt<std::complex<double>>(a, i), y = elementAt<std::complex<double>>(b, i);
      std::complex<double> want = std::string_view(m) == "vmul.c128" ? x * y : x / y;
      auto got = elementAt<std::complex<double>>(out, i);
      ASSERT_TRUE(samePart(got.real(), want.real()) && samePart(got.imag(), want.imag()))
          << m << " element " << i << ": " << x << " op " << y << " gave " << got << ", want " << want;
    }
  }
}

TEST(SimComplex, AbsIsARealOfHalfTheWidth) {
  std::string a64 = complexBytes<float>(4), a128 = complexBytes<double>(5);
  auto out64 = runComplex(a64, a64, 4096, [&](ProgramBuilder& pb) {
    pb.op("vld.e64", {vreg(1), vmem(-1, 0), imm(0)});
    pb.op("vld.e64", {vreg(2), vmem(-1, 0), imm(1)});
    pb.op("vabs.c64", {vreg(3), vreg(1), vreg(2)});
    pb.op("vst", {vreg(3), vmem(-1, kOut)});
  });
  auto out128 = runComplex(a128, a128, 8192, [&](ProgramBuilder& pb) {
    for (int w = 0; w < 4; ++w) pb.op("vld.e128", {vreg(1 + w), vmem(-1, 0), imm(w)});
    for (int w = 0; w < 2; ++w) {
      pb.op("vabs.c128", {vreg(5), vreg(1), vreg(2), vreg(3), vreg(4), imm(w)});
      pb.op("vst.e64", {vreg(5), vmem(-1, kOut), imm(w)});
    }
  });
  ASSERT_EQ(out64.size(), 4096u);
  ASSERT_EQ(out128.size(), 8192u);
  for (size_t i = 0; i < 1024; ++i) {
    float w64 = std::abs(elementAt<std::complex<float>>(a64, i));
    double w128 = std::abs(elementAt<std::complex<double>>(a128, i));
    ASSERT_TRUE(samePart(elementAt<float>(out64, i), w64)) << i;
    ASSERT_TRUE(samePart(elementAt<double>(out128, i), w128)) << i;
  }
}

TEST(SimComplex, VerifierChecksTheResultWord) {
  target::TargetDesc t = loadBuiltin("v5e");
  auto check = [&](const char* m, int64_t word) {
    ProgramBuilder b(t);
    b.op(m, {vreg(5), vreg(1), vreg(2), vreg(3), vreg(4), imm(word)});
    isa::Program p = b.finish();
    return isa::checkInstrStructure(p.bundles[0].instrs[0], p);
  };
  EXPECT_EQ(check("vmul.c64", 2), "'vmul.c64' has word=2, but its elements have words 0..1");
  EXPECT_EQ(check("vsqrt.c128", 3), "");
  ProgramBuilder b(t);
  b.op("vmul.c128",
       {vreg(9), vreg(1), vreg(2), vreg(3), vreg(4), vreg(5), vreg(6), vreg(7), vreg(8), imm(4)});
  isa::Program p = b.finish();
  EXPECT_EQ(isa::checkInstrStructure(p.bundles[0].instrs[0], p),
            "'vmul.c128' has word=4, but its elements have words 0..3");
  EXPECT_EQ(check("vabs.c128", 2), "'vabs.c128' has word=2, but its elements have words 0..1");
}

}  // namespace
}  // namespace tpu::sim
