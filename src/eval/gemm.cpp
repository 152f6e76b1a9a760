// Goto-style blocking: B is packed into KC x NR panels (L1-resident in the
// kernel), A into MC x KC blocks of MR-row panels (L2-resident); a register
// micro-kernel updates an MR x NR tile. The kernel is written once with GCC
// vector extensions and compiled twice: for AVX2 (chosen at run time when the
// CPU has it) and for the baseline ISA. Neither uses FMA, and the per-element
// order of additions is the same (k ascending, continued across KC blocks by
// reloading C), so results do not depend on the host.
#include "eval/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tpu::eval {

namespace {

constexpr int kMaxTile = 8 * 32;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 96;  // multiple of every MR
constexpr int64_t kNC = 2048;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
std::unique_ptr<T, FreeDeleter> alignedBuffer(size_t count) {
  size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T, FreeDeleter>(static_cast<T*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

// tile[MR][2W] += sum_k ap[k][r] * bp[k][j]; accumulators start from tile.
template <typename T, int W, int kMR>
__attribute__((always_inline)) inline void microKernel(int64_t kc, const T* __restrict ap, const T* __restrict bp,
                                                       T* __restrict tile) {
  typedef T V __attribute__((vector_size(W * sizeof(T))));
  V acc0[kMR], acc1[kMR];
  for (int r = 0; r < kMR; ++r) {
    std::memcpy(&acc0[r], tile + r * 2 * W, sizeof(V));
    std::memcpy(&acc1[r], tile + r * 2 * W + W, sizeof(V));
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b0, b1;
    std::memcpy(&b0, bp, sizeof(V));
    std::memcpy(&b1, bp + W, sizeof(V));
    for (int r = 0; r < kMR; ++r) {
      V a = ap[r] - V{};  // broadcast
      acc0[r] += a * b0;
      acc1[r] += a * b1;
    }
    ap += kMR;
    bp += 2 * W;
  }
  for (int r = 0; r < kMR; ++r) {
    std::memcpy(tile + r * 2 * W, &acc0[r], sizeof(V));
    std::memcpy(tile + r * 2 * W + W, &acc1[r], sizeof(V));
  }
}

__attribute__((target("avx512f"))) void kernelAvx512F(int64_t kc, const float* ap, const float* bp, float* tile) {
  microKernel<float, 16, 8>(kc, ap, bp, tile);
}
__attribute__((target("avx2"))) void kernelAvx2F(int64_t kc, const float* ap, const float* bp, float* tile) {
  microKernel<float, 8, 6>(kc, ap, bp, tile);
}
void kernelBaseF(int64_t kc, const float* ap, const float* bp, float* tile) {
  microKernel<float, 4, 6>(kc, ap, bp, tile);
}
__attribute__((target("avx512f"))) void kernelAvx512D(int64_t kc, const double* ap, const double* bp,
                                                      double* tile) {
  microKernel<double, 8, 8>(kc, ap, bp, tile);
}
__attribute__((target("avx2"))) void kernelAvx2D(int64_t kc, const double* ap, const double* bp, double* tile) {
  microKernel<double, 4, 6>(kc, ap, bp, tile);
}
void kernelBaseD(int64_t kc, const double* ap, const double* bp, double* tile) {
  microKernel<double, 2, 6>(kc, ap, bp, tile);
}

int hostVectorLevel() {  // 2: AVX-512F, 1: AVX2, 0: baseline
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    return __builtin_cpu_supports("avx2") ? 1 : 0;
  }();
  return level;
}

template <typename T, typename Kernel>
void gemmBlocked(int kMR, int nr, Kernel kernel, int64_t m, int64_t n, int64_t k, const T* a, int64_t aRow, int64_t aCol,
                 const T* b, int64_t bRow, int64_t bCol, T* c, int64_t cRow) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * cRow, c + i * cRow + n, T(0));
    return;
  }
  const int64_t nc = std::min<int64_t>(kNC, (n + nr - 1) / nr * nr);
  const int64_t kcMax = std::min<int64_t>(kKC, k);
  const int64_t mc = std::min<int64_t>(kMC, (m + kMR - 1) / kMR * kMR);
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
          const T* src = b + (pc + kk) * bRow + (jc + jp) * bCol;
          T* d = dst + kk * nr;
          if (bCol == 1) {
            for (int64_t j = 0; j < cols; ++j) d[j] = src[j];
          } else {
            for (int64_t j = 0; j < cols; ++j) d[j] = src[j * bCol];
          }
          for (int64_t j = cols; j < nr; ++j) d[j] = T(0);
        }
      }
      for (int64_t ic = 0; ic < m; ic += mc) {
        const int64_t mcCur = std::min(mc, m - ic);
        // Pack A[ic:ic+mcCur, pc:pc+kc] into MR-row panels, zero-padded.
        for (int64_t ip = 0; ip < mcCur; ip += kMR) {
          T* dst = aPack.get() + ip * kc;
          const int64_t rows = std::min<int64_t>(kMR, mcCur - ip);
          for (int64_t kk = 0; kk < kc; ++kk) {
            T* d = dst + kk * kMR;
            for (int64_t r = 0; r < rows; ++r) d[r] = a[(ic + ip + r) * aRow + (pc + kk) * aCol];
            for (int64_t r = rows; r < kMR; ++r) d[r] = T(0);
          }
        }
        for (int64_t jr = 0; jr < ncCur; jr += nr) {
          const int64_t cols = std::min<int64_t>(nr, ncCur - jr);
          for (int64_t ir = 0; ir < mcCur; ir += kMR) {
            const int64_t rows = std::min<int64_t>(kMR, mcCur - ir);
            T* cTile = c + (ic + ir) * cRow + jc + jr;
            for (int64_t r = 0; r < kMR; ++r) {
              for (int64_t j = 0; j < nr; ++j)
                tile[r * nr + j] = (pc > 0 && r < rows && j < cols) ? cTile[r * cRow + j] : T(0);
            }
            kernel(kc, aPack.get() + ir * kc, bPack.get() + jr * kc, tile);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < cols; ++j) cTile[r * cRow + j] = tile[r * nr + j];
          }
        }
      }
    }
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t aRow, int64_t aCol, const float* b,
          int64_t bRow, int64_t bCol, float* c, int64_t cRow) {
  switch (hostVectorLevel()) {
    case 2: return gemmBlocked<float>(8, 32, kernelAvx512F, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    case 1: return gemmBlocked<float>(6, 16, kernelAvx2F, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    default: return gemmBlocked<float>(6, 8, kernelBaseF, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
  }
}

void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t aRow, int64_t aCol, const double* b,
          int64_t bRow, int64_t bCol, double* c, int64_t cRow) {
  switch (hostVectorLevel()) {
    case 2: return gemmBlocked<double>(8, 16, kernelAvx512D, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    case 1: return gemmBlocked<double>(6, 8, kernelAvx2D, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
    default: return gemmBlocked<double>(6, 4, kernelBaseD, m, n, k, a, aRow, aCol, b, bRow, bCol, c, cRow);
  }
}

}  // namespace tpu::eval
