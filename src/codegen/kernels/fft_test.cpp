// End-to-end tests of fft: HLO text -> llo-gen -> assembler -> simulator,
// compared bit for bit with the reference interpreter. The lowering runs
// the interpreter's algorithm in c128 with its twiddle values and order of
// operations, so every fft_type, length and element type must match
// exactly (no tolerance).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

// Parts uniform in (-4, 4), with some signed zeros and wide magnitudes.
double pickPart(std::mt19937_64& rng) {
  uint64_t r = rng();
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  double v = real(rng);
  if ((r & 96) == 32) v = std::ldexp(v, static_cast<int>((r >> 20) % 40) - 20);
  return v;
}

hlo::Literal fftInput(const hlo::Shape& s, std::mt19937_64& rng) {
  hlo::Literal l(s);
  for (int64_t k = 0; k < l.elementCount(); ++k) setFloatElement(l, k, [&] { return pickPart(rng); });
  return l;
}

struct FftRun {
  std::string error;  // "" when every element matches bit for bit
  uint64_t cycles = 0;
};

// Simulated against interpreted results, bytes compared per part (a NaN part
// matches any NaN).
FftRun compareFft(const std::string& text, CodegenOptions options = {}, const std::string& target = "v5e",
                  uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  PipelineRun run =
      runPipeline(text, [&](size_t, const hlo::Shape& shape) { return fftInput(shape, rng); }, target, options);
  if (!run.error.empty()) return {run.error};
  const hlo::Literal& w = *run.expected;
  ElementType t = w.shape().elementType();
  size_t eb = static_cast<size_t>(hlo::elementTypeInfo(t).bitWidth / 8);
  size_t part = t == ElementType::C64 || t == ElementType::F32 ? 4 : 8;
  auto value = [&](const uint8_t* p) {
    return part == 4 ? static_cast<double>(std::bit_cast<float>(*reinterpret_cast<const uint32_t*>(p)))
                     : std::bit_cast<double>(*reinterpret_cast<const uint64_t*>(p));
  };
  for (int64_t k = 0; k < w.elementCount(); ++k)
    for (size_t o = 0; o < eb; o += part) {
      const auto* g = reinterpret_cast<const uint8_t*>(run.got[0].data()) + static_cast<size_t>(k) * eb + o;
      const uint8_t* x = w.data().data() + static_cast<size_t>(k) * eb + o;
      if (std::memcmp(g, x, part) == 0 || (std::isnan(value(g)) && std::isnan(value(x)))) continue;
      return {fmt::format("element {} part {}: got {} want {}", k, o / part, value(g), value(x)), run.report.cycles};
    }
  return {"", run.report.cycles};
}

std::string dimsText(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += fmt::format("{}{}", i ? "," : "", d[i]);
  return s;
}

// An fft of the given type over `batch` leading dimensions and trailing
// lengths `len`; `ct` is the complex type (c64 or c128).
std::string fftModule(const std::string& type, const std::string& ct, const std::vector<int64_t>& batch,
                      const std::vector<int64_t>& len) {
  std::string rt = ct == "c64" ? "f32" : "f64";
  std::vector<int64_t> in = batch, out = batch;
  in.insert(in.end(), len.begin(), len.end());
  out.insert(out.end(), len.begin(), len.end());
  std::string it = ct, ot = ct;
  if (type == "RFFT") {
    it = rt;
    out.back() = len.back() / 2 + 1;
  } else if (type == "IRFFT") {
    ot = rt;
    in.back() = len.back() / 2 + 1;
  }
  return fmt::format(R"(HloModule m
ENTRY main {{
  x = {0}[{1}] parameter(0)
  ROOT f = {2}[{3}] fft(x), fft_type={4}, fft_length={{{5}}}
}})",
                     it, dimsText(in), ot, dimsText(out), type, dimsText(len));
}

const char* const kTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};

TEST(Fft, OneDimensionEveryTypeAndLength) {
  // Powers of two (radix-2: 2, 8, 32), other lengths (direct DFT: 6, 5, 3)
  // and 1 (no transform, only the conversions).
  for (const char* type : kTypes)
    for (const char* ct : {"c64", "c128"})
      for (int64_t n : {8, 6, 5, 1, 2, 3, 32})
        EXPECT_EQ(compareFft(fftModule(type, ct, {3}, {n})).error, "") << type << " " << ct << " n=" << n;
}

TEST(Fft, TwoAndThreeDimensions) {
  for (const char* type : kTypes)
    for (const char* ct : {"c64", "c128"}) {
      EXPECT_EQ(compareFft(fftModule(type, ct, {2}, {4, 6})).error, "") << type << " " << ct << " 4x6";
      EXPECT_EQ(compareFft(fftModule(type, ct, {}, {5, 8})).error, "") << type << " " << ct << " 5x8";
      EXPECT_EQ(compareFft(fftModule(type, ct, {2}, {3, 4, 8})).error, "") << type << " " << ct << " 3x4x8";
      EXPECT_EQ(compareFft(fftModule(type, ct, {}, {2, 1, 7})).error, "") << type << " " << ct << " 2x1x7";
    }
}

TEST(Fft, BatchDimensionsAndRowsWiderThanARegister) {
  // 1500 transforms of each row: rows of two register blocks; inner batch
  // dimensions for the earlier passes of a 2-D transform.
  EXPECT_EQ(compareFft(fftModule("FFT", "c64", {1500}, {8})).error, "");
  EXPECT_EQ(compareFft(fftModule("IFFT", "c128", {3, 500}, {6})).error, "");
  EXPECT_EQ(compareFft(fftModule("RFFT", "c64", {2, 3, 5}, {16, 4})).error, "");
  EXPECT_EQ(compareFft(fftModule("IRFFT", "c128", {700}, {4, 10})).error, "");
}

TEST(Fft, EightButterfliesPerOpForSmallBatches) {
  // At most 128 transforms: rows of one sublane, eight rows per register,
  // so stages from len = 16 on take their twiddles from a VMEM table, one
  // per sublane. Still bit-exact, and fewer cycles than one butterfly per op.
  FftRun r = compareFft(fftModule("FFT", "c64", {64}, {1024}));
  EXPECT_EQ(r.error, "");
  // 174084 measured with the product as f64 pair instructions (XLA's
  // formula); with the former vmul.c128 row it was under 150000, and 259594
  // with one butterfly per op.
  EXPECT_LT(r.cycles, 200000u);
  EXPECT_EQ(compareFft(fftModule("IFFT", "c128", {5}, {256})).error, "");
  EXPECT_EQ(compareFft(fftModule("RFFT", "c128", {2}, {16, 64})).error, "");
}

TEST(Fft, TilesTheBatchWhenVmemIsSmall) {
  // A 256 KiB VMEM budget: 384 transforms of length 32 per chunk, so 1000
  // of them are a loop of chunks plus a remainder; in the 3-D transform the
  // first pass (length 12, inner run 32 x 16 = 512 > 384) splits its inner
  // runs into pieces, the later ones loop over chunks of outer indices.
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;  // v5e: 256 KiB
  EXPECT_EQ(compareFft(fftModule("FFT", "c128", {1000}, {32}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IFFT", "c64", {3}, {12, 32, 16}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IRFFT", "c64", {2, 5}, {20, 6}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("RFFT", "c64", {700}, {10}), small).error, "");
}

TEST(Fft, CodeSizeDoesNotGrowWithTheTensor) {
  // Loops over stages, groups, butterflies and chunks: the same number of
  // ops for 4 and 4096 transforms of length 8 and 1024.
  auto ops = [](const std::string& text) {
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", text), diags);
    auto target = target::loadTarget("v5e", diags);
    CodegenOptions o;
    o.schedule = llo::ScheduleMode::None;
    auto gen = generateLlo(*loaded.module, *target, o, diags);
    return gen ? std::count(gen->llo.begin(), gen->llo.end(), '\n') : -1;
  };
  long small = ops(fftModule("FFT", "c64", {4}, {8}));
  long large = ops(fftModule("FFT", "c64", {4096}, {1024}));
  ASSERT_GT(small, 0);
  ASSERT_GT(large, 0);
  // A few more ops only: a loop over the register blocks of wider rows.
  EXPECT_LE(large, small + 30);
  EXPECT_EQ(ops(fftModule("FFT", "c64", {8192}, {1024})), large);
}

TEST(Fft, LongTransformsStreamThroughHbm) {
  // 256 KiB of VMEM holds fewer than 128 rows of 128 c128 transforms, so
  // these radix-2 lengths keep their rows in HBM: blocks of rows gathered in
  // bit-reversed order and transformed in VMEM, then one streamed pass per
  // later stage with twiddles from an HBM table. Still bit-exact; batches
  // of more than 128 transforms and 2-D transforms loop over chunks.
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  FftRun r = compareFft(fftModule("FFT", "c64", {128}, {1024}), small);
  EXPECT_EQ(r.error, "");
  RecordProperty("cycles_per_point", std::to_string(r.cycles / (128 * 1024)));
  EXPECT_EQ(compareFft(fftModule("IFFT", "c128", {200}, {256}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("RFFT", "c64", {3}, {512}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IRFFT", "c128", {2}, {1024}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("FFT", "c128", {}, {256, 3}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IRFFT", "c64", {}, {5, 256}), small).error, "");
}

TEST(Fft, LongTransformGathersTheNextBlockDuringThisOne) {
  // A block's rows rev(b B + j) are evenly strided in the source, so each
  // block is one strided DMA and row swaps in VMEM (not a DMA per row).
  // From c64 the gathered rows land in the staging area, so the next
  // block's gather (on sem1) is issued right after this block is widened
  // and overlaps its stages and write-back (waited for only before the
  // next widening); from c128 (no staging) it waits: a second slot of work
  // rows would halve the block at the same VMEM and cost a streamed stage,
  // measured slower (624.7K against 588.5K cycles, c128[128,1024] at 256 KiB).
  auto llo = [](const char* type) {
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", fftModule("FFT", type, {4}, {1024})), diags);
    auto target = target::loadTarget("v5e", diags);
    CodegenOptions o;
    o.schedule = llo::ScheduleMode::None;
    o.vmemFraction = 1.0 / 512;
    auto gen = generateLlo(*loaded.module, *target, o, diags);
    return gen ? gen->llo : std::string();
  };
  std::string c64 = llo("c64"), c128 = llo("c128");
  ASSERT_FALSE(c64.empty());
  ASSERT_FALSE(c128.empty());
  EXPECT_NE(c64.find("fftllast"), std::string::npos);
  EXPECT_NE(c64.find("sem.wait sem1\n"), std::string::npos);
  EXPECT_EQ(c128.find("fftllast"), std::string::npos);
  EXPECT_EQ(c64.find("fftlrow"), std::string::npos);
  for (const std::string* t : {&c64, &c128}) EXPECT_NE(t->find("fftlswap"), std::string::npos);
  // The same on the way out: into c64 the result rows are staged, so the
  // next block of X loads while this one is written (not into c128).
  EXPECT_NE(c64.find("fftlolast"), std::string::npos);
  EXPECT_EQ(c128.find("fftlolast"), std::string::npos);
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  EXPECT_EQ(compareFft(fftModule("IFFT", "c64", {130}, {2048}), small).error, "");
  // Strided gathers of several outer indices per row (pcC > 1) and of a
  // 2-D transform's inner pass, bit-exact.
  EXPECT_EQ(compareFft(fftModule("FFT", "c128", {3}, {512}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IFFT", "c128", {}, {1024, 2}), small).error, "");
}

TEST(Fft, LongTransformCodeSizeDoesNotGrowWithTheLength) {
  // Loops over blocks, rows, stages and sets of butterflies: the same code
  // (up to immediates and the data section) for 2^10 and 2^16 points.
  auto code = [](int64_t n) {
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("t.hlo", fftModule("FFT", "c64", {4}, {n})), diags);
    auto target = target::loadTarget("v5e", diags);
    CodegenOptions o;
    o.schedule = llo::ScheduleMode::None;
    o.vmemFraction = 1.0 / 512;
    auto gen = generateLlo(*loaded.module, *target, o, diags);
    if (!gen) return -1L;
    long lines = 0;
    std::istringstream in(gen->llo);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '.' && line[0] != '/') ++lines;
    return lines;
  };
  long small = code(1024);
  ASSERT_GT(small, 0);
  EXPECT_EQ(code(65536), small);
}

TEST(Fft, LongDftsStreamThroughHbm) {
  // Lengths that are not powers of two (the interpreter's direct DFT) whose
  // rows and result rows do not fit: each block of result rows sums over
  // blocks of input rows in order, each row's twiddle index kept between
  // blocks. Bit-exact; RFFT computes only the rows it keeps.
  CodegenOptions small;
  small.vmemFraction = 1.0 / 512;
  // Blocks of 32 rows here (then 16 for 48 = 32 + 16).
  EXPECT_EQ(compareFft(fftModule("FFT", "c64", {130}, {48}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IFFT", "c128", {}, {60}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("RFFT", "c128", {2}, {50}), small).error, "");
  EXPECT_EQ(compareFft(fftModule("IRFFT", "c64", {}, {3, 46}), small).error, "");
}

TEST(Fft, ScratchBeyondTheScalarUnitsReachIsRefused) {
  // 2^22 points take a 2^22 x 128 x 16-byte scratch (8 GiB) per 128
  // transforms, past what 32-bit scalar offsets address.
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message; });
  auto loaded =
      hlo::readModule(std::make_shared<SourceFile>("t.hlo", fftModule("FFT", "c128", {}, {1 << 22})), diags);
  ASSERT_TRUE(loaded.module);
  auto target = target::loadTarget("v4", diags);
  CodegenOptions o;
  EXPECT_FALSE(generateLlo(*loaded.module, *target, o, diags));
  EXPECT_NE(messages.find("fft length 4194304 of 'f' (128 transforms at a time) needs a 8589934592-byte HBM "
                          "scratch, past the 4 GiB that 32-bit scalar offsets address"),
            std::string::npos)
      << messages;
}

TEST(Fft, DftTwiddlesBeyondSmemAreRefused) {
  // A direct DFT keeps its n twiddles in SMEM: 70001 x 16 bytes do not fit.
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message; });
  auto loaded =
      hlo::readModule(std::make_shared<SourceFile>("t.hlo", fftModule("FFT", "c128", {}, {70001})), diags);
  ASSERT_TRUE(loaded.module);
  auto target = target::loadTarget("v5e", diags);
  CodegenOptions o;
  EXPECT_FALSE(generateLlo(*loaded.module, *target, o, diags));
  EXPECT_NE(messages.find(
                "fft length 70001 of 'f' needs a 1120016-byte twiddle table, more than SMEM (1048576 bytes)"),
            std::string::npos)
      << messages;
}

TEST(Fft, ArraysBeyondTheScalarUnitsReachAreRefused) {
  // The corpus module's c64[512,1024,2048] (8 GiB) cannot be addressed by
  // 32-bit scalar offsets; the same fft on 2 GiB is refused too.
  DiagnosticEngine diags;
  std::string messages;
  diags.setConsumer([&](const Diagnostic& d) { messages += d.message; });
  auto loaded =
      hlo::readModule(std::make_shared<SourceFile>("t.hlo", fftModule("FFT", "c64", {131072}, {2048})), diags);
  ASSERT_TRUE(loaded.module);
  auto target = target::loadTarget("v5e", diags);
  CodegenOptions o;
  EXPECT_FALSE(generateLlo(*loaded.module, *target, o, diags));
  EXPECT_NE(messages.find("fft 'f' addresses an array of 2147483648 bytes, more than the 2 GiB"), std::string::npos)
      << messages;
}

}  // namespace
}  // namespace tpu::codegen
