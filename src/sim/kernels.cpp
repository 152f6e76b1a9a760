#include "sim/kernels.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "sim/builder.h"

namespace tpu::sim::kernels {

using namespace opnd;
using isa::DType;

namespace {

isa::Instr I(std::string_view mnemonic, std::vector<isa::Operand> operands) {
  return makeInstr(mnemonic, std::move(operands));
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// Scalar ops packed into as few bundles as their dependencies allow.
void scalarBlock(ProgramBuilder& b, const std::vector<isa::Instr>& instrs) {
  Timeline tl(b.target());
  for (const isa::Instr& in : instrs) tl.place(in);
  tl.emit(b);
}

}  // namespace

isa::Program streamingCopy(const target::TargetDesc& t, uint64_t bytes, uint32_t chunk, int nbuf) {
  require(chunk > 0 && bytes % chunk == 0 && nbuf >= 2 && bytes / chunk >= static_cast<uint64_t>(nbuf),
          "streamingCopy: bytes must be a multiple of chunk with at least nbuf chunks");
  require(static_cast<uint64_t>(nbuf) * chunk <= t.memory.vmemBytes, "streamingCopy: buffers exceed VMEM");
  require(bytes < (uint64_t{1} << 31), "streamingCopy: at most 2 GiB");
  ProgramBuilder b(t);
  uint32_t x = b.hbmBuffer("x", DType::U8, {static_cast<int64_t>(bytes)});
  uint32_t y = b.hbmBuffer("y", DType::U8, {static_cast<int64_t>(bytes)});
  uint32_t d = b.descriptor("chunk", chunk, {});
  b.entry("main", {x}, {y});
  uint64_t chunks = bytes / chunk;
  for (int j = 0; j < nbuf - 1; ++j) {
    b.op("smov", {sreg(7), imm(static_cast<int64_t>(j) * chunk)});
    b.op("dma.h2v", {desc(d), vmem(-1, static_cast<int64_t>(j) * chunk), hbm(x, 7, 0), sem(0)});
  }
  b.op("sem.signal", {sem(1), imm(1)});  // the first refill has no write-back to wait for
  scalarBlock(b, {I("smov", {sreg(1), imm(0)}), I("smov", {sreg(2), imm(0)}),
                  I("smov", {sreg(3), imm(static_cast<int64_t>(nbuf - 1) * chunk)}),
                  I("smov", {sreg(4), imm(static_cast<int64_t>(nbuf - 1) * chunk)}),
                  I("smov", {sreg(6), imm(static_cast<int64_t>(nbuf) * chunk)}),
                  I("smov", {sreg(5), imm(static_cast<int64_t>(chunks - nbuf + 1))})});
  // Chunk i: write it back, then refill the buffer of chunk i-1 with chunk i+nbuf-1.
  b.label("steady");
  b.op("sem.wait", {sem(0)});
  b.op("dma.v2h", {desc(d), hbm(y, 1, 0), vmem(2, 0), sem(1)});
  b.op("sem.wait", {sem(1)});
  b.op("dma.h2v", {desc(d), vmem(4, 0), hbm(x, 3, 0), sem(0)});
  scalarBlock(b, {I("sadd", {sreg(1), sreg(1), imm(chunk)}), I("sadd", {sreg(3), sreg(3), imm(chunk)}),
                  I("sadd", {sreg(2), sreg(2), imm(chunk)}), I("srem", {sreg(2), sreg(2), sreg(6)}),
                  I("sadd", {sreg(4), sreg(4), imm(chunk)}), I("srem", {sreg(4), sreg(4), sreg(6)})});
  b.branch("loop", {sreg(5)}, "steady");
  b.op("smov", {sreg(5), imm(nbuf - 1)});
  b.label("drain");
  b.op("sem.wait", {sem(0)});
  b.op("dma.v2h", {desc(d), hbm(y, 1, 0), vmem(2, 0), sem(1)});
  scalarBlock(b, {I("sadd", {sreg(1), sreg(1), imm(chunk)}), I("sadd", {sreg(2), sreg(2), imm(chunk)}),
                  I("srem", {sreg(2), sreg(2), sreg(6)})});
  b.branch("loop", {sreg(5)}, "drain");
  b.op("halt", {});
  return b.finish();
}

isa::Program elementwise(const target::TargetDesc& t, int64_t n, int64_t chunkElems) {
  require(chunkElems > 0 && chunkElems % 1024 == 0 && n > 0 && n % chunkElems == 0,
          "elementwise: n must be a multiple of chunkElems, itself a multiple of 1024");
  ProgramBuilder b(t);
  uint32_t a = b.hbmBuffer("a", DType::F32, {n});
  uint32_t bb = b.hbmBuffer("b", DType::F32, {n});
  uint32_t out = b.hbmBuffer("out", DType::F32, {n});
  int64_t chb = chunkElems * 4;
  uint32_t d = b.descriptor("chunk", static_cast<uint32_t>(chb), {});
  b.entry("main", {a, bb}, {out});
  int64_t chunks = n / chunkElems;
  // VMEM: A0 A1 B0 B1 O0 O1, each one chunk; s11 = A buffer of chunk i.
  b.op("dma.h2v", {desc(d), vmem(-1, 0), hbm(a, -1, 0), sem(0)});
  b.op("dma.h2v", {desc(d), vmem(-1, 2 * chb), hbm(bb, -1, 0), sem(0)});
  b.op("sem.signal", {sem(2), imm(2)});
  scalarBlock(b, {I("smov", {sreg(10), imm(0)}), I("smov", {sreg(11), imm(0)}), I("smov", {sreg(14), imm(chb)})});
  auto iteration = [&](bool prefetch, int loopSreg, const std::string& label) {
    if (prefetch) {
      scalarBlock(b, {I("sadd", {sreg(12), sreg(10), imm(chb)}), I("ssub", {sreg(13), sreg(14), sreg(11)})});
      b.op("dma.h2v", {desc(d), vmem(13, 0), hbm(a, 12, 0), sem(0)});
      b.op("dma.h2v", {desc(d), vmem(13, 2 * chb), hbm(bb, 12, 0), sem(0)});
    }
    b.op("sem.wait", {sem(0), imm(2)});
    b.op("sem.wait", {sem(2)});
    Timeline tl(t);
    for (int64_t j = 0; j < chunkElems / 1024; ++j) {
      int r = static_cast<int>(j % 4) * 3;
      tl.place(I("vld", {vreg(r), vmem(11, j * 4096)}));
      tl.place(I("vld", {vreg(r + 1), vmem(11, 2 * chb + j * 4096)}));
      tl.place(I("vmul.f32", {vreg(r + 2), vreg(r), vreg(r + 1)}));
      tl.place(I("vadd.f32", {vreg(r + 2), vreg(r + 2), vreg(r)}));
      tl.place(I("vmax.f32", {vreg(r + 2), vreg(r + 2), fimm(0.0f)}));
      tl.place(I("vst", {vreg(r + 2), vmem(11, 4 * chb + j * 4096)}));
    }
    tl.emit(b);
    b.op("dma.v2h", {desc(d), hbm(out, 10, 0), vmem(11, 4 * chb), sem(2)});
    scalarBlock(b, {I("sadd", {sreg(10), sreg(10), imm(chb)}), I("ssub", {sreg(11), sreg(14), sreg(11)})});
    if (loopSreg >= 0) b.branch("loop", {sreg(loopSreg)}, label);
  };
  if (chunks > 1) {
    b.op("smov", {sreg(15), imm(chunks - 1)});
    b.label("next_chunk");
    iteration(true, 15, "next_chunk");
  }
  iteration(false, -1, {});
  b.op("halt", {});
  return b.finish();
}

isa::Program rowSum(const target::TargetDesc& t, int64_t rows, int64_t cols) {
  require(rows > 0 && rows % 8 == 0 && cols > 0 && cols % 128 == 0, "rowSum: rows % 8 == 0, cols % 128 == 0");
  ProgramBuilder b(t);
  uint32_t x = b.hbmBuffer("x", DType::F32, {rows, cols});
  uint32_t out = b.hbmBuffer("out", DType::F32, {rows});
  uint32_t dx = b.descriptor("x_rows", static_cast<uint32_t>(cols * 4), {{static_cast<uint32_t>(rows), cols * 4, cols * 4}});
  uint32_t dout = b.descriptor("out_all", static_cast<uint32_t>(rows * 4), {});
  b.entry("main", {x}, {out});
  int64_t outAddr = (rows * cols * 4 + 4095) / 4096 * 4096;
  b.op("dma.h2v", {desc(dx), vmem(-1, 0), hbm(x, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  scalarBlock(b, {I("mlanes", {vmask(0), imm(1)}), I("smov", {sreg(1), imm(0)}), I("smov", {sreg(2), imm(outAddr)}),
                  I("smov", {sreg(3), imm(rows / 8)})});
  b.label("group");
  Timeline tl(t);
  for (int64_t c = 0; c < cols / 128; ++c) {
    int r = c == 0 ? 0 : 1 + static_cast<int>(c % 8);
    tl.place(I("vld", {vreg(r), vmem(1, c * 512), imm(cols * 4)}));
    if (c > 0) tl.place(I("vadd.f32", {vreg(0), vreg(0), vreg(r)}));
  }
  tl.place(I("vred.sum.lane.f32", {vreg(10), vreg(0)}));
  // Lane 0 of sublane s goes to out[8g + s]: stride 4 with a lane-0 mask.
  tl.place(I("vst.m", {vreg(10), vmem(2, 0), vmask(0), imm(4)}));
  tl.place(I("sadd", {sreg(1), sreg(1), imm(8 * cols * 4)}));
  tl.place(I("sadd", {sreg(2), sreg(2), imm(32)}));
  tl.emit(b, 0, 3, "group");
  b.op("dma.v2h", {desc(dout), hbm(out, -1, 0), vmem(-1, outAddr), sem(1)});
  b.op("halt", {});
  return b.finish();
}

isa::Program transpose(const target::TargetDesc& t, int64_t rows, int64_t cols) {
  require(rows > 0 && rows % 128 == 0 && cols > 0 && cols % 128 == 0, "transpose: sizes must be multiples of 128");
  ProgramBuilder b(t);
  uint32_t x = b.hbmBuffer("x", DType::F32, {rows, cols});
  uint32_t y = b.hbmBuffer("y", DType::F32, {cols, rows});
  uint32_t dx = b.descriptor("x_rows", static_cast<uint32_t>(cols * 4), {{static_cast<uint32_t>(rows), cols * 4, cols * 4}});
  uint32_t dy = b.descriptor("y_rows", static_cast<uint32_t>(rows * 4), {{static_cast<uint32_t>(cols), rows * 4, rows * 4}});
  b.entry("main", {x}, {y});
  int64_t yAddr = (rows * cols * 4 + 4095) / 4096 * 4096;
  b.op("dma.h2v", {desc(dx), vmem(-1, 0), hbm(x, -1, 0), sem(0)});
  b.op("sem.wait", {sem(0)});
  // s1/s2: source/destination of tile (ti, tj); s3/s4: row starts; s5/s6: loop counters.
  scalarBlock(b, {I("smov", {sreg(3), imm(0)}), I("smov", {sreg(4), imm(yAddr)}), I("smov", {sreg(5), imm(rows / 128)})});
  b.label("ti");
  scalarBlock(b, {I("smov", {sreg(1), sreg(3)}), I("smov", {sreg(2), sreg(4)}), I("smov", {sreg(6), imm(cols / 128)})});
  b.label("tj");
  Timeline tl(t);
  int lastPush = 0;
  for (int p = 0; p < 16; ++p) {
    tl.place(I("vld", {vreg(p % 8), vmem(1, p * 8 * cols * 4), imm(cols * 4)}));
    lastPush = tl.place(I("vxpose.push", {xlu(0), vreg(p % 8)}));
  }
  for (int p = 0; p < 16; ++p) {
    tl.place(I("vxpose.pop", {vreg(8 + p % 8), xlu(0)}), lastPush + 1);
    tl.place(I("vst", {vreg(8 + p % 8), vmem(2, p * 8 * rows * 4), imm(rows * 4)}));
  }
  tl.place(I("sadd", {sreg(1), sreg(1), imm(512)}));
  tl.place(I("sadd", {sreg(2), sreg(2), imm(128 * rows * 4)}));
  tl.emit(b, 0, 6, "tj");
  scalarBlock(b, {I("sadd", {sreg(3), sreg(3), imm(128 * cols * 4)}), I("sadd", {sreg(4), sreg(4), imm(512)})});
  b.branch("loop", {sreg(5)}, "ti");
  b.op("dma.v2h", {desc(dy), hbm(y, -1, 0), vmem(-1, yAddr), sem(1)});
  b.op("halt", {});
  return b.finish();
}

int matmulTileRows(const target::TargetDesc& t) { return t.registers.vregs >= 64 ? 64 : 32; }

isa::Program matmulBf16(const target::TargetDesc& t, int64_t m, int64_t n, int64_t k) {
  const int U = t.mxu.count;
  const int rowsPerTile = matmulTileRows(t);
  const int R = rowsPerTile / 8;  // row groups per tile
  const int64_t NT = 128 * U;
  require(U >= 1 && m > 0 && n > 0 && k > 0 && m % rowsPerTile == 0 && n % NT == 0 && k % 128 == 0 && k >= 512,
          fmt::format("matmulBf16: needs m % {} == 0, n % {} == 0, k % 128 == 0, k >= 512", rowsPerTile, NT));
  const int64_t KB = k / 128, MB = m / rowsPerTile, NB = n / NT, T = MB * NB;
  const int64_t P = rowsPerTile * k * 2;  // A panel bytes
  const int64_t BP = k * NT * 2;          // B panel bytes
  const int64_t RB = 128 * NT * 2;        // one 128-deep block of a B panel
  const int64_t CT = rowsPerTile * NT * 4;
  const int64_t bbuf0 = 0, bbuf1 = BP, abuf0 = 2 * BP, abuf1 = abuf0 + P, abuf2 = abuf1 + P, cbuf0 = abuf2 + P,
                cbuf1 = cbuf0 + CT;
  require(static_cast<uint64_t>(cbuf1 + CT) <= t.memory.vmemBytes, "matmulBf16: buffers exceed VMEM");
  require(m * k * 2 < (int64_t{1} << 31) && k * n * 2 < (int64_t{1} << 31) && m * n * 4 < (int64_t{1} << 31),
          "matmulBf16: operands must be below 2 GiB");
  const bool pieces = MB >= KB;  // B panels prefetched one 128-row block per tile
  const int npop = t.registers.vregs >= 64 ? 8 : 4, nbtemp = t.registers.vregs >= 64 ? 16 : 8;
  auto acc = [&](int g, int u) { return g * U + u; };
  const int vA = R * U, popBase = vA + 2, bBase = popBase + npop;
  require(bBase + nbtemp <= t.registers.vregs, "matmulBf16: not enough vector registers");
  const int wpushLat = t.latency(target::LatencyClass::MxuWeightPush);

  ProgramBuilder b(t);
  uint32_t A = b.hbmBuffer("a", DType::Bf16, {m, k});
  uint32_t B = b.hbmBuffer("b", DType::Bf16, {k, n});
  uint32_t C = b.hbmBuffer("c", DType::F32, {m, n});
  uint32_t dA = b.descriptor("a_panel", static_cast<uint32_t>(P), {});
  uint32_t dB = b.descriptor("b_panel", static_cast<uint32_t>(NT * 2), {{static_cast<uint32_t>(k), n * 2, NT * 2}});
  uint32_t dBp = b.descriptor("b_block", static_cast<uint32_t>(NT * 2), {{128u, n * 2, NT * 2}});
  uint32_t dC = b.descriptor("c_tile", static_cast<uint32_t>(NT * 4),
                             {{static_cast<uint32_t>(rowsPerTile), NT * 4, n * 4}});
  b.entry("main", {A, B}, {C});

  // Per-tile parameters, precomputed into an SMEM table (row t, 8 words):
  // A prefetch flag and source (panel of tile t+2), B prefetch flag, source
  // and destination, B blocks to wait for, the B panel of tile t+1, and the
  // HBM offset of tile t's C block. Row T is padding.
  constexpr int kRowWords = 8;
  std::vector<int32_t> table((T + 1) * kRowWords, 0);
  const int64_t bbufs[2] = {bbuf0, bbuf1};
  for (int64_t tt = 0; tt < T; ++tt) {
    int64_t mo = tt % MB, no = tt / MB;
    int32_t* row = &table[tt * kRowWords];
    row[0] = tt + 2 < T;
    row[1] = static_cast<int32_t>(((tt + 2) % MB) * P);
    bool nextPanel = no + 1 < NB;
    if (pieces) {
      row[2] = nextPanel && mo < KB;
      row[3] = static_cast<int32_t>(mo * 128 * n * 2 + (no + 1) * NT * 2);
      row[4] = static_cast<int32_t>(bbufs[(no + 1) % 2] + mo * RB);
    } else {
      row[2] = nextPanel && mo == 0;
      row[3] = static_cast<int32_t>((no + 1) * NT * 2);
      row[4] = static_cast<int32_t>(bbufs[(no + 1) % 2]);
    }
    row[5] = (mo == MB - 1 && nextPanel) ? static_cast<int32_t>(pieces ? KB : 1) : 0;
    row[6] = static_cast<int32_t>(bbufs[((tt + 1) / MB) % 2]);
    row[7] = static_cast<int32_t>(mo * rowsPerTile * n * 4 + no * NT * 4);
  }
  std::string tableBytes(table.size() * 4, '\0');
  std::memcpy(tableBytes.data(), table.data(), tableBytes.size());
  const int64_t tableAddr = 0;
  b.initializedBuffer("tile_table", isa::MemSpace::Smem, DType::S32, {T + 1, kRowWords}, tableAddr,
                      std::move(tableBytes));

  // Scalar registers.
  enum : int {
    sA0 = 1, sA1 = 2, sB = 3, sBStage = 4, sAk = 5, sCPrev = 6, sCPrevHbm = 7, sT1 = 11, sT2 = 12, sInner = 13,
    sTiles = 14, sCHbm = 15, sBNext = 17, sAAddr = 19, sCCur = 20, sA2 = 22, sCSum = 23, sAFlag = 25,
    sBFlag = 26, sBSrc = 27, sBDst = 28, sBWait = 29, sRow = 30
  };
  int labelId = 0;
  auto fresh = [&](const char* stem) { return fmt::format("{}_{}", stem, labelId++); };
  // Loads table row sRow into the parameter registers.
  auto loadRow = [&](std::vector<isa::Instr>& out) {
    const int regs[kRowWords] = {sAFlag, sT1, sBFlag, sBSrc, sBDst, sBWait, sBNext, sCHbm};
    for (int i = 0; i < kRowWords; ++i) out.push_back(I("sld", {sreg(regs[i]), smem(sRow, i * 4)}));
  };

  // One 128-deep k step: pushes (this step), pops (two steps back), staging
  // of the next step's weights. popMode: 0 none, 1 pop into the
  // accumulator, 2 pop and add. `epilogue` ops are placed after the rest.
  auto iteration = [&](bool push, int popMode, bool store, bool stage, std::vector<isa::Instr> prelude,
                       std::vector<isa::Instr> epilogue, bool resetAk, int loopSreg, const std::string& loopLabel) {
    Timeline tl(t);
    for (const isa::Instr& in : prelude) tl.place(in);
    std::vector<int> lastMM(U, -1), lastWP(U, -1), lastPop(U, -1);
    if (push) tl.place(I("sadd", {sreg(sAAddr), sreg(sA0), sreg(sAk)}));
    int lastVst = -1, popCount = 0;
    for (int g = 0; g < R; ++g) {
      if (push) {
        tl.place(I("vld.bf16", {vreg(vA + g % 2), vmem(sAAddr, int64_t{8} * g * k * 2), imm(k * 2)}), 8 * g);
        for (int u = 0; u < U; ++u)
          lastMM[u] = tl.place(I("mxu.matmul.bf16", {mxu(u), vreg(vA + g % 2)}), 8 * g + 4);
      }
      if (popMode) {
        for (int u = 0; u < U; ++u) {
          int earliest = std::max(8 * g + 5, lastPop[u] + 1);
          if (popMode == 1) {
            lastPop[u] = tl.place(I("mxu.pop", {vreg(acc(g, u)), mxu(u)}), earliest);
          } else {
            int tmp = popBase + popCount++ % npop;
            lastPop[u] = tl.place(I("mxu.pop", {vreg(tmp), mxu(u)}), earliest);
            tl.place(I("vadd.f32", {vreg(acc(g, u)), vreg(acc(g, u)), vreg(tmp)}));
          }
          if (store)
            lastVst = std::max(lastVst, tl.place(I("vst", {vreg(acc(g, u)), vmem(sCPrev, int64_t{8} * g * NT * 4 + u * 512),
                                                           imm(NT * 4)})));
        }
      }
    }
    if (stage) {
      int j = 0;
      for (int p = 0; p < 16; ++p)
        for (int u = 0; u < U; ++u) {
          int r = bBase + j++ % nbtemp;
          tl.place(I("vld.bf16", {vreg(r), vmem(sBStage, int64_t{8} * p * NT * 2 + u * 256), imm(NT * 2)}),
                   p * 3);
          lastWP[u] = tl.place(I("mxu.wpush.bf16", {mxu(u), vreg(r)}));
        }
      for (int u = 0; u < U; ++u) tl.place(I("mxu.wlatch", {mxu(u)}), std::max(lastMM[u] + 1, lastWP[u] + wpushLat));
    }
    if (store) tl.place(I("dma.v2h", {desc(dC), hbm(C, sCPrevHbm, 0), vmem(sCPrev, 0), sem(2)}), lastVst + 1);
    if (push) tl.place(resetAk ? I("smov", {sreg(sAk), imm(0)}) : I("sadd", {sreg(sAk), sreg(sAk), imm(256)}));
    if (stage) tl.place(I("sadd", {sreg(sBStage), sreg(sBStage), imm(RB)}));
    for (const isa::Instr& in : epilogue) tl.place(in);
    tl.emit(b, push ? 8 * R : 0, loopSreg, loopLabel);
  };

  auto tile = [&](bool first) {
    // Header: prefetches and waits, parameters already in registers.
    std::string noA = fresh("no_a_prefetch"), noB = fresh("no_b_prefetch");
    b.branch("br.eq", {sreg(sAFlag), imm(0)}, noA);
    b.op("dma.h2v", {desc(dA), vmem(sA2, 0), hbm(A, sT1, 0), sem(0)});
    b.label(noA);
    b.branch("br.eq", {sreg(sBFlag), imm(0)}, noB);
    b.op("dma.h2v", {desc(pieces ? dBp : dB), vmem(sBDst, 0), hbm(B, sBSrc, 0), sem(1)});
    b.label(noB);
    b.op("sem.wait", {sem(1), sreg(sBWait)});  // the next panel, at the panel's last tile
    b.op("sem.wait", {sem(0)});                // this tile's A panel
    for (int64_t kb = 0; kb < KB; ++kb) {
      int popMode = 0;
      bool store = false;
      if (kb < 2) {
        if (!first) {
          popMode = 2;  // previous tile's steps KB-2, KB-1
          store = kb == 1;
        }
      } else {
        popMode = kb == 2 ? 1 : 2;
      }
      if (store) b.op("sem.wait", {sem(2)});  // the C buffer's previous DMA is done
      if (kb == 3 && KB - 4 >= 2) {
        b.op("smov", {sreg(sInner), imm(KB - 4)});
        std::string l = fresh("kstep");
        b.label(l);
        iteration(true, 2, false, true, {}, {}, false, sInner, l);
        kb = KB - 2;
        continue;
      }
      std::vector<isa::Instr> prelude, epilogue;
      bool last = kb == KB - 1;
      if (last) {
        prelude.push_back(I("smov", {sreg(sBStage), sreg(sBNext)}));
        // Tile end: rotate buffers, load the next tile's parameters.
        epilogue = {I("smov", {sreg(sT2), sreg(sA0)}),         I("smov", {sreg(sA0), sreg(sA1)}),
                    I("smov", {sreg(sA1), sreg(sA2)}),         I("smov", {sreg(sA2), sreg(sT2)}),
                    I("smov", {sreg(sB), sreg(sBNext)}),       I("smov", {sreg(sCPrev), sreg(sCCur)}),
                    I("ssub", {sreg(sCCur), sreg(sCSum), sreg(sCCur)}), I("smov", {sreg(sCPrevHbm), sreg(sCHbm)}),
                    I("sadd", {sreg(sRow), sreg(sRow), imm(kRowWords * 4)})};
        loadRow(epilogue);
      }
      iteration(true, popMode, store, true, prelude, epilogue, last, -1, {});
    }
  };

  // Prologue: B panel 0 and A panels 0, 1 in flight; stage tile 0's first weights.
  b.op("sem.signal", {sem(2), imm(2)});
  b.op("dma.h2v", {desc(dB), vmem(-1, bbuf0), hbm(B, -1, 0), sem(1)});
  scalarBlock(b, {I("smov", {sreg(sA0), imm(abuf0)}), I("smov", {sreg(sA1), imm(abuf1)}),
                  I("smov", {sreg(sA2), imm(abuf2)}), I("smov", {sreg(sT1), imm((1 % MB) * P)})});
  b.op("dma.h2v", {desc(dA), vmem(sA0, 0), hbm(A, -1, 0), sem(0)});
  if (T > 1) b.op("dma.h2v", {desc(dA), vmem(sA1, 0), hbm(A, sT1, 0), sem(0)});
  std::vector<isa::Instr> init = {I("smov", {sreg(sB), imm(bbuf0)}),         I("smov", {sreg(sAk), imm(0)}),
                                  I("smov", {sreg(sCCur), imm(cbuf0)}),      I("smov", {sreg(sCPrev), imm(cbuf1)}),
                                  I("smov", {sreg(sCPrevHbm), imm(0)}),      I("smov", {sreg(sCSum), imm(cbuf0 + cbuf1)}),
                                  I("smov", {sreg(sBStage), imm(bbuf0)}),    I("smov", {sreg(sRow), imm(tableAddr)})};
  loadRow(init);
  scalarBlock(b, init);
  b.op("sem.wait", {sem(1)});
  iteration(false, 0, false, true, {}, {}, false, -1, {});
  tile(true);
  if (T > 1) {
    b.op("smov", {sreg(sTiles), imm(T - 1)});
    b.label("tile");
    tile(false);
    b.branch("loop", {sreg(sTiles)}, "tile");
  }
  // Epilogue: the last tile's final two steps.
  iteration(false, 2, false, false, {}, {}, false, -1, {});
  b.op("sem.wait", {sem(2)});
  iteration(false, 2, true, false, {}, {}, false, -1, {});
  b.op("halt", {});
  return b.finish();
}

}  // namespace tpu::sim::kernels
