// Goto-style blocking: B is packed into KC x NR panels (L1-resident in the
// kernel), A into MC x KC blocks of MR-row panels (L2-resident); a register
// micro-kernel updates an MR x NR tile. The kernel is written once with GCC
// vector extensions and compiled per ISA (AVX-512, AVX2, baseline), chosen at
// run time. None uses FMA, and the per-element order of additions is the
// same (k ascending, continued across KC blocks by reloading C), so results
// do not depend on the host. Large products are split over threads by whole
// rows or columns of C: every element is still computed by one thread in the
// same order, so results do not depend on the thread count either.
#include "eval/gemm.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

namespace tpu::eval {

namespace {

constexpr int kMaxTile = 8 * 32;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 96;  // multiple of every MR
constexpr int64_t kNC = 2048;
// Multiply-adds per thread below which another thread costs more than it saves.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 22;
constexpr int kMaxThreads = 16;

std::atomic<int> maxThreadsOverride{0};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
std::unique_ptr<T, FreeDeleter> alignedBuffer(size_t count) {
  size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T, FreeDeleter>(static_cast<T*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

// C[MR][kNV*W] (row stride ldc) = (accumulate ? C : 0) + sum_k ap[k][r] * bp[k][j].
// Fully unrolled over the tile so the accumulators live in registers.
template <typename T, int W, int kMR, int kNV>
__attribute__((always_inline)) inline void microKernel(int64_t kc, const T* __restrict ap, const T* __restrict bp,
                                                       T* __restrict c, int64_t ldc, bool accumulate) {
  typedef T V __attribute__((vector_size(W * sizeof(T))));
  V acc[kMR][kNV];
  if (accumulate) {
#pragma GCC unroll 16
    for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v) std::memcpy(&acc[r][v], c + r * ldc + v * W, sizeof(V));
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v) acc[r][v] = V{};
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b[kNV];
#pragma GCC unroll 8
    for (int v = 0; v < kNV; ++v) std::memcpy(&b[v], bp + v * W, sizeof(V));
#pragma GCC unroll 16
    for (int r = 0; r < kMR; ++r) {
      V a = ap[r] - V{};  // broadcast (x - +0 is exactly x, so this folds away)
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v) acc[r][v] += a * b[v];
    }
    ap += kMR;
    bp += kNV * W;
  }
#pragma GCC unroll 16
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < kNV; ++v) std::memcpy(c + r * ldc + v * W, &acc[r][v], sizeof(V));
}

using KernelF = void (*)(int64_t, const float*, const float*, float*, int64_t, bool);
using KernelD = void (*)(int64_t, const double*, const double*, double*, int64_t, bool);

__attribute__((target("avx512f"))) void kernelAvx512F(int64_t kc, const float* ap, const float* bp, float* c,
                                                      int64_t ldc, bool acc) {
  microKernel<float, 16, 8, 2>(kc, ap, bp, c, ldc, acc);
}
__attribute__((target("avx2"))) void kernelAvx2F(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                 bool acc) {
  microKernel<float, 8, 6, 2>(kc, ap, bp, c, ldc, acc);
}
void kernelBaseF(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool acc) {
  microKernel<float, 4, 6, 2>(kc, ap, bp, c, ldc, acc);
}
__attribute__((target("avx512f"))) void kernelAvx512D(int64_t kc, const double* ap, const double* bp, double* c,
                                                      int64_t ldc, bool acc) {
  microKernel<double, 8, 8, 2>(kc, ap, bp, c, ldc, acc);
}
__attribute__((target("avx2"))) void kernelAvx2D(int64_t kc, const double* ap, const double* bp, double* c,
                                                 int64_t ldc, bool acc) {
  microKernel<double, 4, 6, 2>(kc, ap, bp, c, ldc, acc);
}
void kernelBaseD(int64_t kc, const double* ap, const double* bp, double* c, int64_t ldc, bool acc) {
  microKernel<double, 2, 6, 2>(kc, ap, bp, c, ldc, acc);
}

// 2: AVX-512F, 1: AVX2, 0: baseline. Asked of cpuid on first use instead of
// through __builtin_cpu_supports, whose libgcc constructor probes the CPU at
// the start of every process that links this file (every HLO tool, through
// the passes), ~40 us of cpuid exits on a VM even when no GEMM runs.
int hostVectorLevel() {
  static const int level = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    constexpr unsigned kOsxsave = 1u << 27, kAvx = 1u << 28;
    if ((c & (kOsxsave | kAvx)) != (kOsxsave | kAvx)) return 0;
    uint32_t xcrLo = 0, xcrHi = 0;
    __asm__("xgetbv" : "=a"(xcrLo), "=d"(xcrHi) : "c"(0));
    if ((xcrLo & 0x6) != 0x6) return 0;  // the OS saves XMM and YMM state
    if (__get_cpuid_max(0, nullptr) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    constexpr unsigned kAvx2 = 1u << 5, kAvx512f = 1u << 16;
    bool zmmState = (xcrLo & 0xe6) == 0xe6;  // and opmask, ZMM0-15 upper halves, ZMM16-31
    if ((b & kAvx512f) && zmmState) return 2;
    return (b & kAvx2) ? 1 : 0;
  }();
  return level;
}

template <typename T, typename Kernel>
struct Gemm {
  int mr, nr;
  Kernel kernel;
  int64_t k;
  int64_t aRow, aCol;
  int64_t bRow, bCol;
  int64_t cRow;

  // C[0:m, 0:n] for the given A rows / B columns / C origin.
  void run(int64_t m, int64_t n, const T* a0, const T* b0, T* c) const {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * cRow, c + i * cRow + n, T(0));
      return;
    }
    const int64_t nc = std::min<int64_t>(kNC, (n + nr - 1) / nr * nr);
    const int64_t kcMax = std::min<int64_t>(kKC, k);
    const int64_t mc = std::min<int64_t>(kMC, (m + mr - 1) / mr * mr);
    auto bPack = alignedBuffer<T>(static_cast<size_t>(kcMax * nc));
    auto aPack = alignedBuffer<T>(static_cast<size_t>(kcMax * mc));
    alignas(64) T tile[kMaxTile];

    for (int64_t jc = 0; jc < n; jc += nc) {
      const int64_t ncCur = std::min(nc, n - jc);
      for (int64_t pc = 0; pc < k; pc += kKC) {
        const int64_t kc = std::min(kKC, k - pc);
        // Pack B[pc:pc+kc, jc:jc+ncCur] into NR-wide panels, zero-padded.
        for (int64_t jp = 0; jp < ncCur; jp += nr) {
          T* dst = bPack.get() + jp * kc;
          const int64_t cols = std::min<int64_t>(nr, ncCur - jp);
          for (int64_t kk = 0; kk < kc; ++kk) {
            const T* src = b0 + (pc + kk) * bRow + (jc + jp) * bCol;
            T* d = dst + kk * nr;
            if (bCol == 1) {
              std::memcpy(d, src, static_cast<size_t>(cols) * sizeof(T));
            } else {
              for (int64_t j = 0; j < cols; ++j) d[j] = src[j * bCol];
            }
            for (int64_t j = cols; j < nr; ++j) d[j] = T(0);
          }
        }
        for (int64_t ic = 0; ic < m; ic += mc) {
          const int64_t mcCur = std::min(mc, m - ic);
          packA(a0 + ic * aRow + pc * aCol, mcCur, kc, aPack.get());
          for (int64_t jr = 0; jr < ncCur; jr += nr) {
            const int64_t cols = std::min<int64_t>(nr, ncCur - jr);
            for (int64_t ir = 0; ir < mcCur; ir += mr) {
              const int64_t rows = std::min<int64_t>(mr, mcCur - ir);
              T* cTile = c + (ic + ir) * cRow + jc + jr;
              const T* ap = aPack.get() + ir * kc;
              const T* bp = bPack.get() + jr * kc;
              if (rows == mr && cols == nr) {
                kernel(kc, ap, bp, cTile, cRow, pc > 0);
                continue;
              }
              // Edge tile: through a full-size scratch tile.
              for (int64_t r = 0; r < mr; ++r)
                for (int64_t j = 0; j < nr; ++j)
                  tile[r * nr + j] = (pc > 0 && r < rows && j < cols) ? cTile[r * cRow + j] : T(0);
              kernel(kc, ap, bp, tile, nr, true);
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < cols; ++j) cTile[r * cRow + j] = tile[r * nr + j];
            }
          }
        }
      }
    }
  }

  // Packs A[0:rows, 0:kc] (at `src`) into MR-row panels, zero-padded.
  void packA(const T* src, int64_t rows, int64_t kc, T* dst) const {
    for (int64_t ip = 0; ip < rows; ip += mr) {
      T* panel = dst + ip * kc;
      const int64_t pr = std::min<int64_t>(mr, rows - ip);
      if (aCol == 1 && pr == mr) {
        // Row-major A: read each row contiguously, scatter into the panel.
        for (int64_t r = 0; r < mr; ++r) {
          const T* row = src + (ip + r) * aRow;
          for (int64_t kk = 0; kk < kc; ++kk) panel[kk * mr + r] = row[kk];
        }
        continue;
      }
      for (int64_t kk = 0; kk < kc; ++kk) {
        T* d = panel + kk * mr;
        for (int64_t r = 0; r < pr; ++r) d[r] = src[(ip + r) * aRow + kk * aCol];
        for (int64_t r = pr; r < mr; ++r) d[r] = T(0);
      }
    }
  }
};

int threadBudget() {
  int forced = maxThreadsOverride.load(std::memory_order_relaxed);
  if (forced > 0) return std::min(forced, kMaxThreads);
  static const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(hw, kMaxThreads);
}

template <typename T, typename Kernel>
void gemmParallel(int mr, int nr, Kernel kernel, int64_t m, int64_t n, int64_t k, const T* a, int64_t aRow,
                  int64_t aCol, const T* b, int64_t bRow, int64_t bCol, T* c, int64_t cRow) {
  const Gemm<T, Kernel> g{mr, nr, kernel, k, aRow, aCol, bRow, bCol, cRow};
  const int64_t work = m * n * std::max<int64_t>(k, 1);
  int threads = static_cast<int>(std::min<int64_t>(threadBudget(), std::max<int64_t>(1, work / kMinWorkPerThread)));
  // Split whichever of rows / columns has more register tiles, in whole tiles.
  const int64_t rowTiles = (m + mr - 1) / mr, colTiles = (n + nr - 1) / nr;
  const bool byRows = rowTiles >= colTiles;
  const int64_t tiles = byRows ? rowTiles : colTiles;
  threads = static_cast<int>(std::min<int64_t>(threads, tiles));
  if (threads <= 1) return g.run(m, n, a, b, c);
  auto part = [&](int t) {
    int64_t t0 = tiles * t / threads, t1 = tiles * (t + 1) / threads;
    if (byRows) {
      int64_t r0 = t0 * mr, r1 = std::min(m, t1 * mr);
      g.run(r1 - r0, n, a + r0 * aRow, b, c + r0 * cRow);
    } else {
      int64_t c0 = t0 * nr, c1 = std::min(n, t1 * nr);
      g.run(m, c1 - c0, a, b + c0 * bCol, c + c0);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(part, t);
    } catch (const std::system_error&) {
      part(t);  // no thread available: same result computed here
    }
  }
  part(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

void setGemmMaxThreads(int threads) { maxThreadsOverride.store(std::max(0, threads), std::memory_order_relaxed); }

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t aRow, int64_t aCol, const float* b,
          int64_t bRow, int64_t bCol, float* c, int64_t cRow) {
  switch (hostVectorLevel()) {
    case 2: return gemmParallel<float, KernelF>(8, 32, kernelAvx512F, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    case 1: return gemmParallel<float, KernelF>(6, 16, kernelAvx2F, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    default: return gemmParallel<float, KernelF>(6, 8, kernelBaseF, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
  }
}

void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t aRow, int64_t aCol, const double* b,
          int64_t bRow, int64_t bCol, double* c, int64_t cRow) {
  switch (hostVectorLevel()) {
    case 2: return gemmParallel<double, KernelD>(8, 16, kernelAvx512D, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    case 1: return gemmParallel<double, KernelD>(6, 8, kernelAvx2D, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    default: return gemmParallel<double, KernelD>(6, 4, kernelBaseD, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
  }
}

}  // namespace tpu::eval
