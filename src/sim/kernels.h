// Hand-scheduled example kernels, generated as isa::Programs for any size
// that fits their tiling (tests use small sizes, the benchmark large ones).
// Each documents its entry's arguments and results.
#pragma once

#include <cstdint>

#include "isa/program.h"
#include "target/target.h"

namespace tpu::sim::kernels {

// y = x (u8[bytes]) through VMEM: `nbuf` chunk buffers, reads kept nbuf-1
// chunks ahead, each chunk written back as soon as it lands.
// bytes % chunk == 0, bytes / chunk >= nbuf >= 2.
isa::Program streamingCopy(const target::TargetDesc& t, uint64_t bytes, uint32_t chunk, int nbuf);

// out = max(a * b + a, 0) over f32[n] (n % chunkElems == 0, chunkElems % 1024
// == 0), double-buffered DMA in and out.
isa::Program elementwise(const target::TargetDesc& t, int64_t n, int64_t chunkElems = 8192);

// out[r] = sum_c x[r, c] over f32[rows, cols] (rows % 8 == 0, cols % 128 ==
// 0): sequential f32 sums of 128-column blocks, then a lane tree reduction.
isa::Program rowSum(const target::TargetDesc& t, int64_t rows, int64_t cols);

// y[cols, rows] = x[rows, cols]^T, f32 (both multiples of 128), through the
// transpose unit.
isa::Program transpose(const target::TargetDesc& t, int64_t rows, int64_t cols);

// c f32[m, n] = a bf16[m, k] @ b bf16[k, n] on all MXUs: output tiles of
// 64 (32 on 32-vreg targets) x 128*mxus, weights stationary per 128-deep k
// block and double-buffered in the MXUs, software-pipelined pops, A panels
// triple-buffered and B panels double-buffered by DMA, C tiles written back
// by DMA. m % tileRows == 0, n % (128 * mxus) == 0, k % 128 == 0, k >= 512.
isa::Program matmulBf16(const target::TargetDesc& t, int64_t m, int64_t n, int64_t k);
int matmulTileRows(const target::TargetDesc& t);

}  // namespace tpu::sim::kernels
