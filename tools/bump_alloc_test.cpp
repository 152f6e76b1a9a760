// The pipeline-stage allocator (bump_alloc.cpp, linked into this test as
// into hlo-parse): blocks of every size class never overlap, freed blocks
// come back whole, alignment requests hold, and threads may share it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

namespace {

struct Block {
  unsigned char* p;
  size_t n;
  unsigned char fill;
};

void fillBlock(Block& b) { std::memset(b.p, b.fill, b.n); }

bool intact(const Block& b) {
  for (size_t i = 0; i < b.n; ++i)
    if (b.p[i] != b.fill) return false;
  return true;
}

Block allocateBlock(size_t n, unsigned char fill) {
  Block b{static_cast<unsigned char*>(::operator new(n)), n, fill};
  fillBlock(b);
  return b;
}

void freeBlock(const Block& b) { ::operator delete(b.p, b.n); }

// Sizes around every boundary: the 16-byte classes, the last small class
// (4081-4095 round up to 4096), whole pages, the 4 MiB huge limit.
std::vector<size_t> interestingSizes() {
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 256; ++n) sizes.push_back(n);
  for (size_t n = 4070; n <= 4200; ++n) sizes.push_back(n);
  for (size_t n : {8191, 8192, 8193, 65536, 300000, (4 << 20) - 64, (4 << 20) - 63, 4 << 20, (4 << 20) + 1,
                   5 << 20})
    sizes.push_back(n);
  return sizes;
}

TEST(BumpAlloc, BlocksDoNotOverlapAndSurviveFreesAndReuse) {
  std::mt19937 rng(7);
  std::vector<Block> live;
  unsigned char fill = 1;
  for (size_t n : interestingSizes()) live.push_back(allocateBlock(n, fill++));
  for (const Block& b : live) ASSERT_TRUE(intact(b)) << b.n;
  // Free every other block (sized, as containers do), then allocate the same
  // sizes again: reused blocks must not overlap the ones still held.
  std::vector<Block> kept, freed;
  for (size_t i = 0; i < live.size(); ++i) (i % 2 ? freed : kept).push_back(live[i]);
  std::shuffle(freed.begin(), freed.end(), rng);
  for (const Block& b : freed) freeBlock(b);
  for (const Block& b : freed) kept.push_back(allocateBlock(b.n, fill++));
  for (const Block& b : kept) ASSERT_TRUE(intact(b)) << b.n;
  for (const Block& b : kept) freeBlock(b);
}

TEST(BumpAlloc, UnsizedDeleteAndArrays) {
  std::vector<Block> blocks;
  for (size_t n : interestingSizes()) blocks.push_back(allocateBlock(n, static_cast<unsigned char>(n)));
  for (const Block& b : blocks) {
    ASSERT_TRUE(intact(b));
    ::operator delete(b.p);
  }
  auto* a = new int[5000];
  for (int i = 0; i < 5000; ++i) a[i] = i;
  auto* b = new int[10];
  for (int i = 0; i < 10; ++i) b[i] = -i;
  EXPECT_EQ(a[4999], 4999);
  EXPECT_EQ(b[9], -9);
  delete[] a;
  delete[] b;
}

TEST(BumpAlloc, AlignmentRequestsHold) {
  for (size_t align : {32, 64, 128, 4096, 1 << 16}) {
    for (size_t n : {1, 100, 5000, 1 << 20}) {
      void* p = ::operator new(n, std::align_val_t(align));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << n << " aligned to " << align;
      std::memset(p, 0xab, n);
      ::operator delete(p, n, std::align_val_t(align));
    }
  }
  for (size_t n : {1, 16, 17, 4095, 4096, 70000}) {
    void* p = ::operator new(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << n;
    ::operator delete(p, n);
  }
}

TEST(BumpAlloc, GrowingVectorsKeepTheirContents) {
  std::vector<std::vector<int64_t>> vs(50);
  for (int64_t i = 0; i < 20000; ++i)
    for (size_t v = 0; v < vs.size(); ++v) vs[v].push_back(i * 100 + static_cast<int64_t>(v));
  for (size_t v = 0; v < vs.size(); ++v)
    for (int64_t i = 0; i < 20000; ++i)
      ASSERT_EQ(vs[v][static_cast<size_t>(i)], i * 100 + static_cast<int64_t>(v));
}

TEST(BumpAlloc, ThreadsShareTheArena) {
  auto work = [](unsigned seed, bool* ok) {
    std::mt19937 rng(seed);
    std::vector<Block> live;
    for (int round = 0; round < 4000; ++round) {
      size_t n = 1 + rng() % (rng() % 8 == 0 ? 20000 : 600);
      live.push_back(allocateBlock(n, static_cast<unsigned char>(seed + round)));
      if (live.size() > 64) {
        size_t i = rng() % live.size();
        if (!intact(live[i])) *ok = false;
        freeBlock(live[i]);
        live.erase(live.begin() + static_cast<long>(i));
      }
    }
    for (const Block& b : live) {
      if (!intact(b)) *ok = false;
      freeBlock(b);
    }
  };
  bool ok1 = true, ok2 = true, ok3 = true;
  std::thread t1(work, 11u, &ok1), t2(work, 23u, &ok2);
  work(37u, &ok3);
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1);
  EXPECT_TRUE(ok2);
  EXPECT_TRUE(ok3);
}

}  // namespace
