// The simulated memories' host cost: paged HBM (pages on first non-zero
// write, zeros elsewhere), moves within and between memories with memmove's
// semantics, and the host memory budget that stops a run with an error
// instead of the kernel's OOM killer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "sim/builder.h"
#include "sim/machine.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tpu::sim {
namespace {

using namespace opnd;
using namespace testing;

constexpr uint64_t kPage = Memory::kPageBytes;

std::string pattern(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() | 1);  // never zero
  return s;
}

std::string readAll(const Memory& m) {
  std::string s(m.size(), '\0');
  m.read(0, s.data(), s.size());
  return s;
}

TEST(PagedMemory, UntouchedPagesReadAsZerosAndCostNothing) {
  Memory m;
  m.allocatePaged(64ull << 30, nullptr);  // 64 GiB of address space
  EXPECT_EQ(m.size(), 64ull << 30);
  EXPECT_EQ(m.pagesAllocated(), 0u);
  std::string buf(3 * kPage, 'x');
  m.read((32ull << 30) - kPage / 2, buf.data(), buf.size());
  EXPECT_EQ(buf, std::string(3 * kPage, '\0'));
  // Zeros never allocate; a write across a page boundary allocates both.
  std::string zeros(5 * kPage, '\0');
  ASSERT_TRUE(m.write(7 * kPage + 3, zeros.data(), zeros.size()));
  EXPECT_EQ(m.pagesAllocated(), 0u);
  ASSERT_TRUE(m.write(2 * kPage - 2, "abcd", 4));
  EXPECT_EQ(m.pagesAllocated(), 2u);
  char back[6] = {};
  m.read(2 * kPage - 3, back, 6);
  EXPECT_EQ(std::string(back, 6), std::string("\0abcd\0", 6));
}

// Memory::copy equals memmove on a flat copy for every combination of
// paged / contiguous, overlapping forwards and backwards, across pages.
TEST(PagedMemory, CopyHasMemmoveSemantics) {
  const uint64_t size = 6 * kPage;
  std::string init = pattern(size, 1);
  std::string holes = init;
  std::memset(holes.data() + kPage, 0, 2 * kPage);  // two untouched pages in the middle
  struct Case {
    uint64_t dst, src, n;
  };
  const Case cases[] = {{0, 100, 3 * kPage},         {100, 0, 3 * kPage},  {kPage + 7, kPage - 9, 2 * kPage + 1},
                        {3 * kPage, 0, 3 * kPage},   {5, 5, kPage},        {kPage - 1, 2 * kPage + 3, kPage + 5},
                        {4 * kPage + 1, 1, kPage + 100}};
  for (bool pagedDst : {false, true})
    for (bool pagedSrc : {false, true})
      for (bool same : {false, true}) {
        if (same && pagedDst != pagedSrc) continue;
        for (const std::string& start : {init, holes})
          for (const Case& c : cases) {
            Memory a, b;
            auto setup = [&](Memory& m, bool paged) {
              if (paged) m.allocatePaged(size, nullptr);
              else ASSERT_TRUE(m.allocate(size));
              ASSERT_TRUE(m.write(0, start.data(), size));
            };
            setup(a, pagedDst);
            if (!same) setup(b, pagedSrc);
            Memory& src = same ? a : b;
            std::string want = start, other = start;
            std::memmove(want.data() + c.dst, (same ? want : other).data() + c.src, c.n);
            ASSERT_TRUE(Memory::copy(a, c.dst, src, c.src, c.n));
            EXPECT_EQ(readAll(a), want) << "dst paged " << pagedDst << " src paged " << pagedSrc << " same " << same
                                        << " case " << c.dst << "<-" << c.src << " x" << c.n;
          }
      }
}

TEST(PagedMemory, BudgetRefusesPagesPastItsLimit) {
  HostMemoryBudget budget;
  budget.limit = 3 * kPage;
  {
    Memory m;
    m.allocatePaged(10 * kPage, &budget);
    std::string data = pattern(3 * kPage, 2);
    ASSERT_TRUE(m.write(0, data.data(), data.size()));
    EXPECT_EQ(budget.used, 3 * kPage);
    EXPECT_FALSE(m.write(5 * kPage, "z", 1));
    EXPECT_EQ(budget.used, 3 * kPage);
    ASSERT_TRUE(m.write(kPage, "y", 1));  // an allocated page takes nothing more
  }
  EXPECT_EQ(budget.used, 0u);  // pages given back
  EXPECT_EQ(budget.peak, 3 * kPage);
}

uint64_t procStatusKiB(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long v = 0;
  size_t len = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, len) == 0 && line[len] == ':') {
      std::sscanf(line + len + 1, "%llu", &v);
      break;
    }
  std::fclose(f);
  return v;
}

// A chip with 15 GiB of HBM buffers (an input of 4 GiB of zeros, a 11 GiB
// scratch) that touches a few KiB of it: the host pays for what is touched.
// Offsets are in sregs: DMA address arithmetic is 32-bit, the buffers are
// not.
isa::Program bigFootprint(const target::TargetDesc& t, uint32_t& inBuf, uint32_t& outBuf) {
  ProgramBuilder b(t);
  inBuf = b.hbmBuffer("in", isa::DType::U8, {4ll << 30});
  uint32_t scratch = b.hbmBuffer("scratch", isa::DType::U8, {11ll << 30});
  outBuf = b.hbmBuffer("out", isa::DType::U32, {1024});
  uint32_t d = b.descriptor("kib4", 4096, {});
  b.entry("main", {inBuf}, {outBuf});
  // in[3 GiB ..] -> VMEM 0 -> scratch near 4e9 -> VMEM 8192 -> out.
  b.op("smov", {sreg(1), imm(static_cast<int32_t>(3u << 30))});
  b.op("dma.h2v", {desc(d), vmem(-1, 0), hbm(inBuf, 1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  b.op("smov", {sreg(2), imm(static_cast<int32_t>(4000000000u))});
  b.op("dma.v2h", {desc(d), hbm(scratch, 2, 0), vmem(-1, 0), sem(1)});
  b.op("sem.wait", {sem(1)});
  b.op("dma.h2v", {desc(d), vmem(-1, 8192), hbm(scratch, 2, 0), sem(2)});
  b.op("sem.wait", {sem(2)});
  b.op("dma.v2h", {desc(d), hbm(outBuf, -1, 0), vmem(-1, 8192), sem(3)});
  b.op("sem.wait", {sem(3)});
  b.op("halt", {});
  return b.finish();
}

// Whether this kernel gives reads of untouched anonymous memory real pages
// (some VM kernels do) instead of the shared zero page: then reading the
// test's mostly-untouched input costs its size in RSS, whatever the
// simulator does.
bool readsOfUntouchedMemoryCostRss() {
  const uint64_t bytes = 64ull << 20;
  auto* probe = static_cast<volatile unsigned char*>(std::calloc(bytes, 1));
  if (!probe) return false;
  const uint64_t before = procStatusKiB("VmRSS");
  unsigned sum = 0;
  for (uint64_t i = 0; i < bytes; i += 4096) sum += probe[i];
  const uint64_t after = procStatusKiB("VmRSS");
  std::free(const_cast<unsigned char*>(probe));
  return sum == 0 && after > before + (bytes >> 10) / 2;
}

TEST(PagedMemory, MultiGiBFootprintRunsInLittleHostMemory) {
  const bool inputCostsRss = readsOfUntouchedMemoryCostRss();
  target::TargetDesc t = loadBuiltin("v5e");
  uint32_t in = 0, out = 0;
  isa::Program p = bigFootprint(t, in, out);
  // The input: 4 GiB of address space, all zeros but for one page (an
  // anonymous mapping: untouched pages of it cost nothing either).
  const uint64_t inBytes = 4ull << 30;
  std::string_view input;
  void* mapped = nullptr;
  {
    mapped = std::calloc(inBytes, 1);
    ASSERT_NE(mapped, nullptr);
    std::memset(static_cast<char*>(mapped) + (3ull << 30), 0x5A, 4096);
    input = std::string_view(static_cast<const char*>(mapped), inBytes);
  }
  DiagnosticEngine diags;
  SimOptions options;
  options.hostMemoryLimit = 256ull << 20;
  auto r = simulateViews(p, t, {input}, options, diags);
  std::free(mapped);
  ASSERT_TRUE(r) << firstErrorMessage(diags);
  ASSERT_EQ(r->results.size(), 1u);
  std::vector<uint32_t> words = fromBytes<uint32_t>(r->results[0]);
  for (uint32_t w : words) ASSERT_EQ(w, 0x5A5A5A5Au);
  uint64_t hwm = procStatusKiB("VmHWM");
  std::printf("peak RSS after simulating a 15 GiB HBM footprint: %llu KiB\n", static_cast<unsigned long long>(hwm));
  if (hwm) {
    // Under 1 GiB (most of it is the test binary and VMEM touched), plus the
    // input where merely reading it costs its size.
    EXPECT_LT(hwm, 1024u * 1024u + (inputCostsRss ? inBytes >> 10 : 0));
  }
}

TEST(PagedMemory, RunPastTheHostLimitStopsWithAnError) {
  target::TargetDesc t = loadBuiltin("v5e");
  ProgramBuilder b(t);
  uint32_t in = b.hbmBuffer("in", isa::DType::U32, {1 << 20});  // 4 MiB
  uint32_t out = b.hbmBuffer("out", isa::DType::U32, {1 << 20});
  uint32_t d = b.descriptor("all", 4u << 20, {});
  b.entry("main", {in}, {out});
  b.op("dma.h2h", {desc(d), hbm(out, -1, 0), hbm(in, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  b.op("halt", {});
  isa::Program p = b.finish();
  std::string input = pattern(4u << 20, 3);
  SimOptions options;
  options.hostMemoryLimit = 6u << 20;  // the input fits, its copy does not
  DiagnosticEngine diags;
  EXPECT_FALSE(simulate(p, t, {input}, options, diags));
  std::string msg = firstErrorMessage(diags);
  EXPECT_NE(msg.find("bundle 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of host memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--host-memory=6291456"), std::string::npos) << msg;
  // With room it runs.
  options.hostMemoryLimit = 64u << 20;
  DiagnosticEngine ok;
  auto r = simulate(p, t, {input}, options, ok);
  ASSERT_TRUE(r) << firstErrorMessage(ok);
  EXPECT_EQ(r->results[0], input);
}

TEST(PagedMemory, DefaultLimitIsMemAvailable) { EXPECT_GT(availableHostMemory(), 0u); }

}  // namespace
}  // namespace tpu::sim
