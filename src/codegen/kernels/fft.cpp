// fft in llo-gen: the interpreter's algorithm (eval/evaluator.cpp, fft1d and
// fftTrailing), lowered so results are bit-exact. Everything is computed in
// c128 on the vector unit with the interpreter's operations in its order:
// a radix-2 transform (bit-reversal swaps, then butterflies u + v*w, u - v*w)
// for power-of-two lengths, a direct DFT (acc = 0; acc += x[j] * w[(j*k) % n])
// otherwise, then a division by n for the inverses. Twiddles are computed at
// compile time with the interpreter's expressions and live in a data-section
// table that each pass copies to SMEM; the products are XLA's complex
// product in f64 pair instructions (complexMultiply), std::complex's bit for
// bit where finite.
//
// Vectorisation is across transforms, not within one: each trailing
// dimension is one pass over the array viewed as [outer, n, inner], and a
// chunk of the outer x inner transforms is brought to VMEM as n rows of R
// elements (row j holds element j of every transform of the chunk), so every
// butterfly is the same vector op on a row and the twiddle is a broadcast
// scalar. R is a multiple of 128 (a sublane); rows shorter than a vector
// register are stored under a sublane mask; rows of one sublane are packed
// eight to a register from len = 16 on, each op doing eight butterflies
// with per-sublane twiddles from a VMEM copy of the table. Chunks are a loop over the
// batch, so any batch size works; a length whose rows do not fit the VMEM
// budget even at 128 transforms per chunk is refused.
#include <cmath>
#include <complex>
#include <cstring>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

constexpr int64_t kC128Bytes = 16;
constexpr int64_t kBlockBytes = kVregElems * kC128Bytes;  // one c128 register block: 16 KiB

bool isPowerOfTwo(int64_t n) { return n > 1 && (n & (n - 1)) == 0; }

int log2Exact(int64_t n) {
  int k = 0;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}

// The four 32-bit words of a c128 value as memory holds it.
void appendWords(std::vector<uint32_t>& out, std::complex<double> z) {
  for (double part : {z.real(), z.imag()}) {
    uint64_t bits = std::bit_cast<uint64_t>(part);
    out.push_back(static_cast<uint32_t>(bits));
    out.push_back(static_cast<uint32_t>(bits >> 32));
  }
}

// The SMEM table of a radix-2 pass: the bit-reversal pairs (i, j), i < j,
// that the interpreter swaps, then each stage's twiddles
// polar(1, sign * 2 pi / len * k) for k < len / 2, stage after stage, with
// the interpreter's expressions so the values are the same doubles.
std::vector<uint32_t> radix2Table(int64_t n, bool inverse, int64_t& pairs) {
  std::vector<uint32_t> words;
  for (int64_t i = 1, j = 0; i < n; ++i) {
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      words.push_back(static_cast<uint32_t>(i));
      words.push_back(static_cast<uint32_t>(j));
    }
  }
  pairs = static_cast<int64_t>(words.size() / 2);
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t len = 2; len <= n; len <<= 1) {
    double ang = sign * 2 * M_PI / static_cast<double>(len);
    for (int64_t k = 0; k < len / 2; ++k) appendWords(words, std::polar(1.0, ang * static_cast<double>(k)));
  }
  return words;
}

// The SMEM table of a direct DFT: polar(1, sign * 2 pi * m / n) for m < n
// (the interpreter's twiddle of (j * k) % n == m).
std::vector<uint32_t> dftTable(int64_t n, bool inverse) {
  std::vector<uint32_t> words;
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t m = 0; m < n; ++m)
    appendWords(words, std::polar(1.0, sign * 2 * M_PI * static_cast<double>(m) / static_cast<double>(n)));
  return words;
}

// Row length (elements) for `count` transforms: whole sublanes up to one
// register, whole registers above.
int64_t rowElems(int64_t count) { return count <= kVregElems ? alignUp(count, 128) : alignUp(count, kVregElems); }

}  // namespace

int Lowerer::constTable(const Instruction& in, const std::vector<uint32_t>& words) {
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (bufs_[i].kind == BufKind::Const && !bufs_[i].tableWords.empty() && bufs_[i].tableWords == words)
      return static_cast<int>(i);
  Buf b;
  b.kind = BufKind::Const;
  b.type = ElementType::U32;
  b.dims = {static_cast<int64_t>(words.size())};
  b.bytes = words.size() * 4;
  b.tableWords = words;
  bufs_.push_back(b);
  int id = static_cast<int>(bufs_.size() - 1);
  bufs_[id].name = fmt::format("t{}_{}", id, sanitize(in.name()));
  return id;
}

// One pass: the 1-D transform of dimension `n` of src viewed as
// [outer, n, inner], written to dst as [outer, dstRows, inner] (dstRows < n
// for RFFT's last pass). Sources other than c128 are converted on the way
// into VMEM as the interpreter converts to c128; results other than c128 are
// converted on the way out (complex parts rounded, or the real part for
// IRFFT). n <= 1 only converts, as the interpreter skips such dimensions.
void Lowerer::emitFftChunks(int64_t outer, int64_t inner, int64_t pc, int64_t qc,
                            const std::function<void(int64_t, int64_t, int, int)>& chunk) {
  int rP = sreg(), rQ = sreg();
  e_.op("smov {}, 0", S(rP));
  e_.op("smov {}, 0", S(rQ));
  if (qc == inner) {  // pc whole rows of transforms at a time
    int64_t full = outer / pc, rest = outer % pc;
    if (full > 0) {
      std::string l = e_.newLabel("fftchunk");
      if (full > 1) e_.label(l);
      chunk(pc, inner, rP, rQ);
      e_.op("sadd {}, {}, {}", S(rP), S(rP), pc);
      if (full > 1) e_.op("br.lt {}, {}, {}", S(rP), full * pc, l);
    }
    if (rest > 0) chunk(rest, inner, rP, rQ);
  } else {  // rows split into pieces of qc transforms
    int64_t full = inner / qc, rest = inner % qc;
    std::string lp = e_.newLabel("fftouter");
    e_.label(lp);
    e_.op("smov {}, 0", S(rQ));
    if (full > 0) {
      std::string lq = e_.newLabel("fftchunk");
      if (full > 1) e_.label(lq);
      chunk(1, qc, rP, rQ);
      e_.op("sadd {}, {}, {}", S(rQ), S(rQ), qc);
      if (full > 1) e_.op("br.lt {}, {}, {}", S(rQ), full * qc, lq);
    }
    if (rest > 0) chunk(1, rest, rP, rQ);
    e_.op("sadd {}, {}, 1", S(rP), S(rP));
    e_.op("br.lt {}, {}, {}", S(rP), outer, lp);
  }
  sregs_.put(rQ);
  sregs_.put(rP);
}

void Lowerer::fftFlatLoop(int64_t count, int64_t from, int64_t fromStep, int64_t to, int64_t toStep,
                          const std::function<void(int, int)>& body) {
  PoolGuard loopGuard({&sregs_});
  int ri = sreg(), ro = sreg();
  e_.op("smov {}, {}", S(ri), from);
  e_.op("smov {}, {}", S(ro), to);
  auto step = [&] {
    body(ri, ro);
    e_.op("sadd {}, {}, {}", S(ri), S(ri), fromStep);
    e_.op("sadd {}, {}, {}", S(ro), S(ro), toStep);
  };
  if (count == 1) return step();
  int rc = sreg();
  std::string l = e_.newLabel("fftflat");
  e_.op("smov {}, {}", S(rc), count);
  e_.label(l);
  step();
  e_.op("loop {}, {}", S(rc), l);
}

void Lowerer::fftWidenToC128(ElementType from, int64_t regs, int64_t vFrom, int64_t vTo) {
  const int64_t step = kVregElems * typeInfo(from).bytes;
  fftFlatLoop(regs, vFrom, step, vTo, kBlockBytes, [&](int ri, int ro) {
    VReg x = vload(from, S(ri));
    VReg z = fftToC128(x, from);
    vstore(z, ElementType::C128, S(ro));
    vfree(x);
    vfree(z);
  });
}

VReg Lowerer::splatTwiddle(const std::vector<int>& rw, int rAddr) {
  for (int w = 0; w < 4; ++w) e_.op("sld {}, [{} + {}]", S(rw[static_cast<size_t>(w)]), S(rAddr), 4 * w);
  VReg tw = valloc(ElementType::C128);
  const int twRegs[4] = {tw.r, tw.hi, tw.im, tw.imh};
  for (int w = 0; w < 4; ++w) e_.op("vmov.s32 {}, {}", vregs_.name(twRegs[w]), S(rw[static_cast<size_t>(w)]));
  return tw;
}

void Lowerer::dftTerm(VReg acc, const std::vector<int>& rw, int rM, int rX) {
  VReg tw = splatTwiddle(rw, rM);
  VReg x = vload(ElementType::C128, S(rX));
  VReg prod = complexMultiply(x, tw);  // tmp[j] * polar(..)
  VReg sum = complexAdd(acc, prod);
  const int accRegs[4] = {acc.r, acc.hi, acc.im, acc.imh}, sumRegs[4] = {sum.r, sum.hi, sum.im, sum.imh};
  // The accumulator stays in the same registers from one j to the next.
  for (int w = 0; w < 4; ++w) e_.op("vmov.s32 {}, {}", vregs_.name(accRegs[w]), vregs_.name(sumRegs[w]));
  for (VReg r : {tw, x, prod, sum}) vfree(r);
}

// One in-VMEM fft pass's phases and the state they share: the chunk plan
// and VMEM layout, and the registers of the radix-2 stages. A friend of
// Lowerer: the phases use the lowering state as a kernel's member
// functions do, under the same names.
class FftPassEmitter : KernelPhases {
 public:
  FftPassEmitter(Lowerer& l, const hlo::Instruction& in, const FftPass& p)
      : KernelPhases(l, in), p(p) {}
  bool run();
  class Long;  // the HBM form, emitFftPassLong

 private:
  bool plan();
  void countedLoop(int64_t count, const std::string& name, const std::function<void()>& body);
  void packTwiddles();
  void bitReverse();
  void stage(bool eight);
  void stageLoop(int64_t count, bool eight);
  void radix2Transform();
  void dftTransform();
  void hbmOffset(int64_t rows, int64_t es, int buf, int rP, int rQ);
  void chunk(int64_t pcC, int64_t qcC, int rP, int rQ);

  const FftPass& p;

  static constexpr int64_t vWork = 0;
  static constexpr int64_t twiddleRowBytes = 128 * kC128Bytes;
  int64_t n = 1, outer = 1, inner = 1, sb = 16, db = 16, budget = 0;
  bool transform = false, radix2 = false, stageIn = false, stageOut = false, useLong = false, packed = false;
  int64_t pairs = 0, pc = 1, qc = 1, R = 0, rowBytes = 0, nb = 0, workBytes = 0, vOut = 0, vStage = 0,
          stageBytes = 0, vTwiddles = 0;
  std::string rowMask;
  // The radix-2 stages: half a group in bytes and rows, groups, the
  // stage's twiddles, the group, u and its twiddle, the butterfly's rows.
  int rHalf = -1, rHalfRows = -1, rGroups = -1, rTw = -1, rGrp = -1, rU = -1, rTk = -1, rUb = -1, rVb = -1,
      rT = -1;
  std::vector<int> rw;
  // A chunk: its HBM offset and VMEM address.
  int rOff = -1, rV = -1;
};

// The plan: rows of up to 128 transforms per chunk in VMEM (work, DFT
// result and staging rows), the twiddles (and swap pairs) into SMEM once for
// all chunks; useLong when the rows or twiddles need the HBM form.
bool FftPassEmitter::plan() {
  n = p.n;
  outer = p.outer;
  inner = p.inner;
  transform = n > 1;
  radix2 = isPowerOfTwo(n);
  sb = typeInfo(p.srcType).bytes;
  db = typeInfo(p.dstType).bytes;
  stageIn = p.srcType != ElementType::C128;
  stageOut = p.dstType != ElementType::C128;
  // VMEM per transform element: the work rows, the DFT's result rows, and
  // the staging rows of a converted source or result.
  const int64_t perElem =
      kC128Bytes + (transform && !radix2 ? kC128Bytes : 0) + std::max(stageIn ? sb : 0, stageOut ? db : 0);
  const int64_t slack = 3 * kBlockBytes;  // whole-register reads and writes past the last row
  budget = static_cast<int64_t>(l_.vmemBudget());
  int64_t rowCap = budget > slack ? (budget - slack) / (n * perElem) : 0;
  rowCap = rowCap >= kVregElems ? rowCap / kVregElems * kVregElems : rowCap / 128 * 128;
  // Radix-2 rows that do not fit VMEM, or twiddles that do not fit SMEM, go
  // through HBM.
  if (transform && rowCap < 128) {
    useLong = true;
    return true;
  }
  std::vector<uint32_t> table;
  if (transform) table = radix2 ? radix2Table(n, p.inverse, pairs) : dftTable(n, p.inverse);
  if (radix2 && table.size() * 4 > target_.memory.smemBytes) {
    useLong = true;
    return true;
  }
  if (rowCap < 128)
    return l_.fail(in, fmt::format("llo-gen: fft length {} of '{}' needs {} bytes of VMEM for 128 transforms at a time, "
                                "more than the VMEM budget of {} bytes",
                                n, in.name(), n * perElem * 128 + slack, budget));
  // Chunks: whole inner runs of several outer indices, or pieces of one run.
  pc = 1;
  qc = inner;
  if (inner <= rowCap) pc = std::min(outer, rowCap / inner);
  else qc = rowCap;
  R = rowElems(pc * qc);
  rowBytes = R * kC128Bytes;
  nb = (R + kVregElems - 1) / kVregElems;
  rowMask = R < kVregElems ? fmt::format(", 2048, {}", (1 << (R / 128)) - 1) : "";
  workBytes = alignUp(static_cast<uint64_t>(n * rowBytes + kBlockBytes), 512);
  vOut = transform && !radix2 ? vWork + workBytes : vWork;  // where the transform leaves its rows
  vStage = vWork + workBytes + (vOut != vWork ? workBytes : 0);
  // Rows of one sublane (up to 128 transforms): eight consecutive rows fill
  // a register, so from len = 16 on a butterfly op covers eight k at once
  // with a register of eight twiddles (one per sublane) from a VMEM copy of
  // the table, each twiddle broadcast over a sublane's 128 lanes.
  stageBytes =
      stageIn || stageOut
          ? static_cast<int64_t>(alignUp(
                static_cast<uint64_t>(n * R * std::max(stageIn ? sb : 0, stageOut ? db : 0) + kBlockBytes), 512))
          : 0;
  vTwiddles = vStage + stageBytes;
  packed = radix2 && R == 128 && n >= 16 && vTwiddles + (n - 1) * twiddleRowBytes <= budget;

  // The pass's twiddles (and swap pairs) into SMEM, once for all chunks.
  if (table.size() * 4 > target_.memory.smemBytes)
    return l_.fail(in, fmt::format("llo-gen: fft length {} of '{}' needs a {}-byte twiddle table, more than SMEM ({} bytes)",
                                n, in.name(), table.size() * 4, target_.memory.smemBytes));
  if (!table.empty()) {
    int tb = l_.constTable(in, table);
    int r = sreg();
    e_.op("smov {}, 0", S(r));
    e_.op("{} {}, [0], {}, sem0", l_.dmaOp("h2s", tb), e_.desc(table.size() * 4, {}), l_.memRef(tb, S(r)));
    e_.op("sem.wait sem0");
    sregs_.put(r);
  }
  return true;
}

// A counted loop of `count` iterations around body (count >= 1).
void FftPassEmitter::countedLoop(int64_t count, const std::string& name, const std::function<void()>& body) {
  if (count == 1) return body();
  int rc = sreg();
  std::string l = e_.newLabel(name);
  e_.op("smov {}, {}", S(rc), count);
  e_.label(l);
  body();
  e_.op("loop {}, {}", S(rc), l);
  sregs_.put(rc);
}

// The twiddles of every stage to VMEM: entry e in sublane 0 of the
// 128-lane row at vTwiddles + e * 2 KiB, so a register loaded at entry k
// holds entries k..k+7 in its sublanes.
void FftPassEmitter::packTwiddles() {
  int rs = sreg(), rd = sreg();
  std::vector<int> rw = {sreg(), sreg(), sreg(), sreg()};
  e_.op("smov {}, {}", S(rs), pairs * 8);
  e_.op("smov {}, {}", S(rd), vTwiddles);
  countedLoop(n - 1, "ffttwiddle", [&] {
    VReg tw = l_.splatTwiddle(rw, rs);
    l_.vstore(tw, ElementType::C128, S(rd), ", 2048, 1");
    vfree(tw);
    e_.op("sadd {}, {}, 16", S(rs), S(rs));
    e_.op("sadd {}, {}, {}", S(rd), S(rd), twiddleRowBytes);
  });
  for (int r : {rs, rd}) sregs_.put(r);
  for (int r : rw) sregs_.put(r);
}

// The bit-reversal permutation: swap rows i and j of each pair.
void FftPassEmitter::bitReverse() {
if (pairs > 0) {
  int rt = sreg(), ra = sreg(), rb = sreg();
  e_.op("smov {}, 0", S(rt));
  countedLoop(pairs, "fftswap", [&] {
    e_.op("sld {}, [{}]", S(ra), S(rt));
    e_.op("sld {}, [{} + 4]", S(rb), S(rt));
    e_.op("smul {}, {}, {}", S(ra), S(ra), rowBytes);
    e_.op("smul {}, {}, {}", S(rb), S(rb), rowBytes);
    if (vWork) {
      e_.op("sadd {}, {}, {}", S(ra), S(ra), vWork);
      e_.op("sadd {}, {}, {}", S(rb), S(rb), vWork);
    }
    countedLoop(nb, "fftswapb", [&] {
      VReg x = l_.vload(ElementType::C128, S(ra));
      VReg y = l_.vload(ElementType::C128, S(rb));
      l_.vstore(y, ElementType::C128, S(ra), rowMask);
      l_.vstore(x, ElementType::C128, S(rb), rowMask);
      vfree(x);
      vfree(y);
      if (nb > 1) {
        e_.op("sadd {}, {}, {}", S(ra), S(ra), kBlockBytes);
        e_.op("sadd {}, {}, {}", S(rb), S(rb), kBlockBytes);
      }
    });
    e_.op("sadd {}, {}, 8", S(rt), S(rt));
  });
  for (int r : {rt, ra, rb}) sregs_.put(r);
}
}

// One stage: groups of len rows, butterflies (k, k + len/2); `eight`: eight
// butterflies (k to k + 7) per op, twiddles from VMEM (needs len >= 16 and
// packed rows).
void FftPassEmitter::stage(bool eight) {
  int rGc = sreg();
  std::string lGroup = e_.newLabel("fftgroup");
  e_.op("smov {}, {}", S(rGrp), vWork);
  e_.op("smov {}, {}", S(rGc), S(rGroups));
  e_.label(lGroup);
  int rKc = sreg();
  std::string lK = e_.newLabel("fftk");
  e_.op("smov {}, {}", S(rU), S(rGrp));
  if (eight) {
    // VMEM entry of the stage's first twiddle: vTwiddles + (rTw - pairs * 8) / 16 * 2 KiB.
    e_.op("ssub {}, {}, {}", S(rTk), S(rTw), pairs * 8);
    e_.op("sshl {}, {}, 7", S(rTk), S(rTk));
    e_.op("sadd {}, {}, {}", S(rTk), S(rTk), vTwiddles);
    e_.op("sshr {}, {}, 3", S(rKc), S(rHalfRows));
  } else {
    e_.op("smov {}, {}", S(rTk), S(rTw));
    e_.op("smov {}, {}", S(rKc), S(rHalfRows));
  }
  e_.label(lK);
  VReg tw;
  if (eight) {
    tw = l_.vload(ElementType::C128, S(rTk));
  } else {
    tw = l_.splatTwiddle(rw, rTk);
  }
  const std::string mask = eight ? "" : rowMask;  // eight whole rows need no mask
  e_.op("smov {}, {}", S(rUb), S(rU));
  e_.op("sadd {}, {}, {}", S(rVb), S(rU), S(rHalf));
  countedLoop(nb, "fftbfly", [&] {
    VReg u = l_.vload(ElementType::C128, S(rUb));
    VReg v = l_.vload(ElementType::C128, S(rVb));
    VReg prod = l_.complexMultiply(v, tw);  // tmp[i + k + len/2] * w
    VReg sum = l_.complexAdd(u, prod);
    VReg diff = l_.complexAdd(u, prod, true);
    l_.vstore(sum, ElementType::C128, S(rUb), mask);
    l_.vstore(diff, ElementType::C128, S(rVb), mask);
    for (VReg r : {u, v, prod, sum, diff}) vfree(r);
    if (nb > 1) {
      e_.op("sadd {}, {}, {}", S(rUb), S(rUb), kBlockBytes);
      e_.op("sadd {}, {}, {}", S(rVb), S(rVb), kBlockBytes);
    }
  });
  vfree(tw);
  e_.op("sadd {}, {}, {}", S(rU), S(rU), eight ? 8 * rowBytes : rowBytes);
  e_.op("sadd {}, {}, {}", S(rTk), S(rTk), eight ? 8 * twiddleRowBytes : kC128Bytes);
  e_.op("loop {}, {}", S(rKc), lK);
  sregs_.put(rKc);
  e_.op("sadd {}, {}, {}", S(rGrp), S(rGrp), S(rHalf));
  e_.op("sadd {}, {}, {}", S(rGrp), S(rGrp), S(rHalf));
  e_.op("loop {}, {}", S(rGc), lGroup);
  sregs_.put(rGc);
  e_.op("sshl {}, {}, 4", S(rT), S(rHalfRows));
  e_.op("sadd {}, {}, {}", S(rTw), S(rTw), S(rT));
  e_.op("sadd {}, {}, {}", S(rHalf), S(rHalf), S(rHalf));
  e_.op("sadd {}, {}, {}", S(rHalfRows), S(rHalfRows), S(rHalfRows));
  e_.op("sshr {}, {}, 1", S(rGroups), S(rGroups));
}

// `count` stages from the current one.
void FftPassEmitter::stageLoop(int64_t count, bool eight) {
  countedLoop(count, eight ? "fftstage8" : "fftstage", [&] { stage(eight); });
}

// Radix 2: the bit reversal, then stages len = 2, 4, .., n.
void FftPassEmitter::radix2Transform() {
  bitReverse();
  // Stages len = 2, 4, .., n: groups of len rows, butterflies (k, k + len/2).
  rHalf = sreg();
  rHalfRows = sreg();
  rGroups = sreg();
  rTw = sreg();
  rGrp = sreg();
  rU = sreg();
  rTk = sreg();
  rUb = sreg();
  rVb = sreg();
  rT = sreg();
  rw = {sreg(), sreg(), sreg(), sreg()};
  e_.op("smov {}, {}", S(rHalf), rowBytes);
  e_.op("smov {}, 1", S(rHalfRows));
  e_.op("smov {}, {}", S(rGroups), n / 2);
  e_.op("smov {}, {}", S(rTw), pairs * 8);
  if (packed) {
    stageLoop(3, false);  // len 2, 4, 8
    stageLoop(log2Exact(n) - 3, true);
  } else {
    stageLoop(log2Exact(n), false);
  }
  for (int r : {rHalf, rHalfRows, rGroups, rTw, rGrp, rU, rTk, rUb, rVb, rT}) sregs_.put(r);
  for (int r : rw) sregs_.put(r);
}

// out[k] = sum over j of x[j] * w[(j * k) % n], from (0, 0) in j order.
void FftPassEmitter::dftTransform() {
  int rBo = sreg(), rOk = sreg(), rStep = sreg(), rX = sreg(), rM = sreg(), rT = sreg(), rC = sreg();
  std::vector<int> rw = {sreg(), sreg(), sreg(), sreg()};
  e_.op("smov {}, 0", S(rBo));
  countedLoop(nb, "fftdftb", [&] {
    e_.op("sadd {}, {}, {}", S(rOk), S(rBo), vOut);
    e_.op("smov {}, 0", S(rStep));
    countedLoop(n, "fftdftk", [&] {
      VReg acc = l_.vconst(ElementType::C128, 0);
      e_.op("sadd {}, {}, {}", S(rX), S(rBo), vWork);
      e_.op("smov {}, 0", S(rM));
      countedLoop(n, "fftdftj", [&] {
        l_.dftTerm(acc, rw, rM, rX);
        e_.op("sadd {}, {}, {}", S(rX), S(rX), rowBytes);
        // m = (m + k) % n, k < n: one conditional subtraction.
        e_.op("sadd {}, {}, {}", S(rM), S(rM), S(rStep));
        e_.op("ssub {}, {}, {}", S(rT), S(rM), n * kC128Bytes);
        e_.op("scmp.ge {}, {}, {}", S(rC), S(rM), n * kC128Bytes);
        e_.op("ssel {}, {}, {}, {}", S(rM), S(rC), S(rT), S(rM));
      });
      l_.vstore(acc, ElementType::C128, S(rOk), rowMask);
      vfree(acc);
      e_.op("sadd {}, {}, {}", S(rOk), S(rOk), rowBytes);
      e_.op("sadd {}, {}, {}", S(rStep), S(rStep), kC128Bytes);
    });
    e_.op("sadd {}, {}, {}", S(rBo), S(rBo), kBlockBytes);
  });
  for (int r : {rBo, rOk, rStep, rX, rM, rT, rC}) sregs_.put(r);
  for (int r : rw) sregs_.put(r);
}

// rOff = the HBM byte address of outer index rP, inner index rQ of buf.
void FftPassEmitter::hbmOffset(int64_t rows, int64_t es, int buf, int rP, int rQ) {
  e_.op("smul {}, {}, {}", S(rOff), S(rP), rows * inner);
  e_.op("sadd {}, {}, {}", S(rOff), S(rOff), S(rQ));
  e_.op("smul {}, {}, {}", S(rOff), S(rOff), es);
  if (base(buf)) e_.op("sadd {}, {}, {}", S(rOff), S(rOff), base(buf));
}

// One chunk: pcC outer indices from rP, qcC inner indices from rQ.
void FftPassEmitter::chunk(int64_t pcC, int64_t qcC, int rP, int rQ) {
  PoolGuard chunkGuard({&sregs_, &vregs_, &masks_});
  rOff = sreg();
  rV = sreg();
  // In: row j of VMEM = element j of each transform of the chunk.
  std::vector<Emitter::Dim> inDims = {{n, inner * sb, R * sb}};
  if (pcC > 1) inDims.push_back({pcC, n * inner * sb, qcC * sb});
  hbmOffset(n, sb, p.src, rP, rQ);
  e_.op("smov {}, {}", S(rV), stageIn ? vStage : vWork);
  e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", p.src), e_.desc(static_cast<uint64_t>(qcC * sb), inDims),
        S(rV), l_.memRef(p.src, S(rOff)));
  e_.op("sem.wait sem0");
  const int64_t inRegs = (n * R + kVregElems - 1) / kVregElems;
  if (stageIn)
    l_.fftWidenToC128(p.srcType, inRegs, vStage, vWork);
  if (transform) radix2 ? radix2Transform() : dftTransform();
  // Inverse transforms divide by n (each part, as complex / double does).
  const int64_t outRegs = (p.dstRows * R + kVregElems - 1) / kVregElems;
  if (transform && p.inverse) {
    uint64_t nBits = std::bit_cast<uint64_t>(static_cast<double>(n));
    VReg divisor = valloc(ElementType::F64);
    e_.op("vmov.s32 {}, {}", V(divisor), static_cast<int32_t>(static_cast<uint32_t>(nBits)));
    e_.op("vmov.s32 {}, {}", H(divisor), static_cast<int32_t>(static_cast<uint32_t>(nBits >> 32)));
    l_.fftFlatLoop(outRegs, vOut, kBlockBytes, vOut, kBlockBytes, [&](int ri, int ro) {
      VReg z = l_.vload(ElementType::C128, S(ri));
      VReg q = l_.fftDivide(z, divisor);
      l_.vstore(q, ElementType::C128, S(ro));
      vfree(z);
      vfree(q);
    });
    vfree(divisor);
  }
  if (stageOut)
    l_.fftFlatLoop(outRegs, vOut, kBlockBytes, vStage, kVregElems * db, [&](int ri, int ro) {
      VReg z = l_.vload(ElementType::C128, S(ri));
      l_.fftStoreResult(z, p.dstType, S(ro));
      vfree(z);
    });
  std::vector<Emitter::Dim> outDims = {{p.dstRows, R * db, inner * db}};
  if (pcC > 1) outDims.push_back({pcC, qcC * db, p.dstRows * inner * db});
  hbmOffset(p.dstRows, db, p.dst, rP, rQ);
  e_.op("smov {}, {}", S(rV), stageOut ? vStage : vOut);
  e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", p.dst), e_.desc(static_cast<uint64_t>(qcC * db), outDims),
        l_.memRef(p.dst, S(rOff)), S(rV));
  e_.op("sem.wait sem0");
}
bool FftPassEmitter::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  if (!plan()) return false;
  if (useLong) return l_.emitFftPassLong(in, p);
  if (packed) packTwiddles();
  l_.emitFftChunks(outer, inner, pc, qc, [&](int64_t pcC, int64_t qcC, int rP, int rQ) { chunk(pcC, qcC, rP, rQ); });
  return !failed_;
}

bool Lowerer::emitFftPass(const Instruction& in, const FftPass& p) {
  FftPassEmitter pass(*this, in, p);
  return pass.run();
}

VReg Lowerer::fftToC128(VReg x, ElementType from) {
  if (from != ElementType::C64) return complexFromReal(x, ElementType::C128);
  VReg z = valloc(ElementType::C128);
  for (int w = 0; w < 2; ++w) {
    e_.op("vcvt.f64.f32 {}, {}, {}", vregs_.name(w ? z.hi : z.r), V(x), w);
    e_.op("vcvt.f64.f32 {}, {}, {}", vregs_.name(w ? z.imh : z.im), H(x), w);
  }
  return z;
}

void Lowerer::fftStoreResult(VReg z, ElementType to, const std::string& addr) {
  if (to == ElementType::C64) {
    VReg c = valloc(ElementType::C64);
    e_.op("vcvt.f32.f64 {}, {}, {}", V(c), V(z), H(z));
    e_.op("vcvt.f32.f64 {}, {}, {}", H(c), vregs_.name(z.im), vregs_.name(z.imh));
    vstore(c, ElementType::C64, addr);
    vfree(c);
  } else if (to == ElementType::F32) {
    VReg f = valloc(ElementType::F32);
    e_.op("vcvt.f32.f64 {}, {}, {}", V(f), V(z), H(z));
    vstore(f, ElementType::F32, addr);
    vfree(f);
  } else if (to == ElementType::F64) {  // the real part as it is
    vstore(VReg{z.r, ElementType::F64, z.hi}, ElementType::F64, addr);
  } else {
    vstore(z, ElementType::C128, addr);
  }
}

VReg Lowerer::fftDivide(VReg z, VReg divisor) {
  VReg q = valloc(ElementType::C128);
  int zr[4] = {z.r, z.hi, z.im, z.imh}, qr[4] = {q.r, q.hi, q.im, q.imh};
  for (int w = 0; w < 4; ++w)
    e_.op("vdiv.f64 {}, {}, {}, {}, {}, {}", vregs_.name(qr[w]), vregs_.name(zr[w / 2 * 2]),
          vregs_.name(zr[w / 2 * 2 + 1]), V(divisor), H(divisor), w % 2);
  return q;
}

// A radix-2 pass whose rows do not fit VMEM even for 128 transforms at a
// time, or whose twiddles do not fit SMEM: the interpreter's algorithm
// again, with the rows of each chunk of 128 transforms in an HBM scratch
// X [n, 128] (row j: element j of every transform of the chunk):
//  A. blocks of B rows (B = 2^b, as many as VMEM holds): row i from
//     source row rev(i) (the bit-reversal swaps, as a permutation: one
//     strided DMA per block, then row swaps in VMEM), converted to c128,
//     then stages len = 2 .. B in VMEM, stored to X;
//  B. stages len = 2B .. n, one pass over X each: B/2 butterflies (k, k +
//     len/2) at a time, the u and v rows and their twiddles streamed in;
//  C. X to the result in blocks: divided by n for inverses, converted.
// Every butterfly is the interpreter's u + v * w, u - v * w with its
// twiddle (an HBM table of every stage's twiddles), so results stay
// bit-exact. Other lengths (the direct DFT) copy the converted rows to X
// in A, then for each block of result rows k accumulate over blocks of
// rows j in order (acc rows and each k's twiddle index (j * k) % n kept
// between blocks), the table in SMEM, and C takes the acc rows.
// The HBM form of an fft pass (rows that do not fit VMEM, or twiddles that
// do not fit SMEM): its phases and the state they share. Nested in
// FftPassEmitter, so it shares its friendship with Lowerer.
class FftPassEmitter::Long : KernelPhases {
 public:
  Long(Lowerer& l, const hlo::Instruction& in, const FftPass& p)
      : KernelPhases(l, in), p(p) {}
  bool run();

 private:
  uint64_t workBytes(int64_t rows) const;
  uint64_t vmemFor(int64_t rows) const;
  bool plan();
  void butterflies(int rU, int rV, int rTk, int rCount);
  void arrayRow(int rowReg, int64_t rows, int64_t es, int buf);
  void scratchRow(int dstReg, int rowReg);
  void revStep(int reg, int64_t top);
  void gather(int64_t rows, const char* sem);
  void unscramble();
  void blockStages();
  void blockA(int64_t rows);
  void blocks(int64_t count, int64_t rest, const std::function<void(int64_t)>& body);
  void passB();
  void dftRows(int64_t rowsK);
  void jBlock(int64_t rowsJ, int64_t rowsK);
  void loadX(int rowReg, const char* sem);
  void outBlock(int64_t rows);
  void chunk(int64_t pcC, int64_t qcC, int rP, int rQ);

  const FftPass& p;

  static constexpr int64_t R = 128, rowBytes = R * kC128Bytes, vWork = 0;
  const std::string rowMask = ", 2048, 1";  // a row is one sublane
  int64_t n = 1, outer = 1, inner = 1, sb = 16, db = 16, stageElem = 0;
  uint64_t budget = 0;
  bool stageIn = false, stageOut = false, radix2 = false;
  int64_t B = 2, half = 1, smemStream = 0, vAcc = 0, vStage = 0, pairs = 0;
  int x = -1, tw = -1;
  std::vector<int> rw;
  // A chunk: its outer and inner counts and index registers, the registers
  // of its passes, and the passes' choices.
  int64_t pcC = 1, qcC = 1;
  int rP = -1, rQ = -1, rOff = -1, rOff2 = -1, rV = -1, rRow = -1, rRev = -1, rBit = -1, rT = -1, rCnt = -1,
      rU = -1, rW = -1, rTk = -1, rKc = -1;
  std::string halfDesc;
  bool overlapA = false, overlapC = false;
  VReg divisor;
  int64_t vOut = 0;
};

// VMEM bytes of `rows` work rows.
uint64_t FftPassEmitter::Long::workBytes(int64_t rows) const {
  return alignUp(static_cast<uint64_t>(rows * rowBytes + kBlockBytes), 512);
}

// VMEM for blocks of `rows` rows (DFT: the j rows and the acc rows).
uint64_t FftPassEmitter::Long::vmemFor(int64_t rows) const {
  return (radix2 ? 1 : 2) * workBytes(rows) +
         (stageElem ? alignUp(static_cast<uint64_t>(rows * R * stageElem + kBlockBytes), 512) : 0);
}

// The plan: blocks of B rows in VMEM, the HBM scratch X of every row, the
// twiddles into SMEM.
bool FftPassEmitter::Long::plan() {
  n = p.n;
  outer = p.outer;
  inner = p.inner;
  sb = typeInfo(p.srcType).bytes;
  db = typeInfo(p.dstType).bytes;
  stageIn = p.srcType != ElementType::C128;
  stageOut = p.dstType != ElementType::C128;
  stageElem = std::max(stageIn ? sb : 0, stageOut ? db : 0);
  budget = l_.vmemBudget();
  radix2 = isPowerOfTwo(n);
  B = 2;
  while (B * 2 < n && vmemFor(B * 2) <= budget) B *= 2;
  half = B / 2;
  // SMEM, radix 2: the block stages' twiddles (B - 1 entries), then B / 2
  // streamed ones. DFT: the n twiddles, then each acc row's twiddle index.
  smemStream = radix2 ? B * kC128Bytes : n * kC128Bytes;
  const int64_t smemBytes = radix2 ? smemStream + half * kC128Bytes : smemStream + B * 4;
  if (vmemFor(B) > budget)
    return l_.fail(in, fmt::format("llo-gen: fft length {} of '{}' needs {} bytes of VMEM for two rows of 128 "
                                "transforms, more than the VMEM budget of {} bytes",
                                n, in.name(), vmemFor(2), budget));
  if (static_cast<uint64_t>(smemBytes) > target_.memory.smemBytes)
    return l_.fail(
        in,
        fmt::format("llo-gen: fft length {} of '{}' needs a {}-byte twiddle table, more than SMEM ({} bytes)",
                    n, in.name(), smemStream, target_.memory.smemBytes));
  // Rows are counted (signed compares), bytes only added to base offsets.
  x = l_.wideScratchBuf(in, ElementType::C128, {n, R},
                         fmt::format("fft length {} of '{}' (128 transforms at a time)", n, in.name()));
  if (x < 0) return false;
  vAcc = static_cast<int64_t>(workBytes(B));
  vStage = static_cast<int64_t>((radix2 ? 1 : 2) * workBytes(B));
  std::vector<uint32_t> table = radix2 ? radix2Table(n, p.inverse, pairs) : dftTable(n, p.inverse);
  table.erase(table.begin(), table.begin() + 2 * pairs);  // the stage twiddles only
  tw = l_.constTable(in, table);
  {
    int r = sreg();
    e_.op("smov {}, 0", S(r));
    e_.op("{} {}, [0], {}, sem0", l_.dmaOp("h2s", tw),
          e_.desc(static_cast<uint64_t>((radix2 ? B - 1 : n) * kC128Bytes), {}), l_.memRef(tw, S(r)));
    e_.op("sem.wait sem0");
    sregs_.put(r);
  }
  rw = {sreg(), sreg(), sreg(), sreg()};
  return true;
}

// Butterflies k = 0 .. count - 1 on rows rU + k and rV + k (VMEM) with
// the twiddle at SMEM rTk + 16 k; advances the three and uses up rCount.
void FftPassEmitter::Long::butterflies(int rU, int rV, int rTk, int rCount) {
  std::string l = e_.newLabel("fftlbfly");
  e_.label(l);
  VReg t = l_.splatTwiddle(rw, rTk);
  VReg u = l_.vload(ElementType::C128, S(rU));
  VReg v = l_.vload(ElementType::C128, S(rV));
  VReg prod = l_.complexMultiply(v, t);
  VReg sum = l_.complexAdd(u, prod);
  VReg diff = l_.complexAdd(u, prod, true);
  l_.vstore(sum, ElementType::C128, S(rU), rowMask);
  l_.vstore(diff, ElementType::C128, S(rV), rowMask);
  for (VReg r : {t, u, v, prod, sum, diff}) vfree(r);
  e_.op("sadd {}, {}, {}", S(rU), S(rU), rowBytes);
  e_.op("sadd {}, {}, {}", S(rV), S(rV), rowBytes);
  e_.op("sadd {}, {}, {}", S(rTk), S(rTk), kC128Bytes);
  e_.op("loop {}, {}", S(rCount), l);
}

// rOff = byte offset of row `rowReg` of the chunk in an array [outer, rows, inner] of es-byte elements.
void FftPassEmitter::Long::arrayRow(int rowReg, int64_t rows, int64_t es, int buf) {
  e_.op("smul {}, {}, {}", S(rOff), S(rP), rows);
  e_.op("sadd {}, {}, {}", S(rOff), S(rOff), S(rowReg));
  e_.op("smul {}, {}, {}", S(rOff), S(rOff), inner);
  e_.op("sadd {}, {}, {}", S(rOff), S(rOff), S(rQ));
  e_.op("smul {}, {}, {}", S(rOff), S(rOff), es);
  if (base(buf)) e_.op("sadd {}, {}, {}", S(rOff), S(rOff), base(buf));
}

// dstReg = the HBM address of row rowReg of X.
void FftPassEmitter::Long::scratchRow(int dstReg, int rowReg) {
  e_.op("smul {}, {}, {}", S(dstReg), S(rowReg), rowBytes);
  if (base(x)) e_.op("sadd {}, {}, {}", S(dstReg), S(dstReg), base(x));
}

// reg = the next value of reg counted in bit-reversed order, top bit `top`
// (as the interpreter steps j); clobbers rBit and rT.
void FftPassEmitter::Long::revStep(int reg, int64_t top) {
  std::string lRev = e_.newLabel("fftlrev"), lRevDone = e_.newLabel("fftlrevd");
  e_.op("smov {}, {}", S(rBit), top);
  e_.label(lRev);
  e_.op("sand {}, {}, {}", S(rT), S(reg), S(rBit));
  e_.op("br.eq {}, 0, {}", S(rT), lRevDone);
  e_.op("sxor {}, {}, {}", S(reg), S(reg), S(rBit));
  e_.op("sshr {}, {}, 1", S(rBit), S(rBit));
  e_.op("jmp {}", lRev);
  e_.label(lRevDone);
  e_.op("sxor {}, {}, {}", S(reg), S(reg), S(rBit));
}

// Issues the gather of `rows` rows (sources from rRev on) into the block's
// first row as one strided DMA, and advances rRev to the next block's
// first source row. Radix 2: block b's rows b B + j (j < B) come from
// rows rev(b B + j) = rev(b) + (n / B) rev_B(j), an evenly strided set:
// they land in the order k = rev_B(j) (row k from rev(b) + k n / B), and
// `unscramble` swaps them into place in VMEM (a DMA per row cost a
// 700-cycle setup each).
void FftPassEmitter::Long::gather(int64_t rows, const char* sem) {
  e_.op("smov {}, {}", S(rV), stageIn ? vStage : vWork);
  arrayRow(rRev, n, sb, p.src);
  std::vector<Emitter::Dim> dims = {{rows, (radix2 ? n / B : 1) * inner * sb, stageIn ? R * sb : rowBytes}};
  if (pcC > 1) dims.push_back({pcC, n * inner * sb, qcC * sb});
  e_.op("{} {}, [{}], {}, {}", l_.dmaOp("h2v", p.src), e_.desc(static_cast<uint64_t>(qcC * sb), dims), S(rV),
        l_.memRef(p.src, S(rOff)), sem);
  if (radix2)
    revStep(rRev, n / B / 2);
  else
    e_.op("sadd {}, {}, {}", S(rRev), S(rRev), rows);
}

// Radix 2: rows k and rev_B(k) of the block's work rows swapped, for every k < rev_B(k).
void FftPassEmitter::Long::unscramble() {
  std::string lK = e_.newLabel("fftlswap"), lSkip = e_.newLabel("fftlswapn");
  e_.op("smov {}, 0", S(rU));
  e_.op("smov {}, 0", S(rW));
  e_.op("smov {}, {}", S(rCnt), B);
  e_.label(lK);
  e_.op("br.ge {}, {}, {}", S(rU), S(rW), lSkip);
  e_.op("smul {}, {}, {}", S(rTk), S(rU), rowBytes);
  e_.op("smul {}, {}, {}", S(rOff2), S(rW), rowBytes);
  if (vWork) {
    e_.op("sadd {}, {}, {}", S(rTk), S(rTk), vWork);
    e_.op("sadd {}, {}, {}", S(rOff2), S(rOff2), vWork);
  }
  {
    VReg a = l_.vload(ElementType::C128, S(rTk));
    VReg b = l_.vload(ElementType::C128, S(rOff2));
    l_.vstore(b, ElementType::C128, S(rTk), rowMask);
    l_.vstore(a, ElementType::C128, S(rOff2), rowMask);
    vfree(a);
    vfree(b);
  }
  e_.label(lSkip);
  e_.op("sadd {}, {}, 1", S(rU), S(rU));
  revStep(rW, B / 2);
  e_.op("loop {}, {}", S(rCnt), lK);
}

// Radix 2: stages len = 2 .. B on the block in VMEM: groups of len rows.
void FftPassEmitter::Long::blockStages() {
  PoolGuard stageGuard({&sregs_});
  int rHalfB = sreg(), rHalfRows = sreg(), rGroups = sreg(), rTw = sreg(), rGrp = sreg(), rGc = sreg(),
      rSc = sreg();
  std::string lStage = e_.newLabel("fftlstage"), lGroup = e_.newLabel("fftlgroup");
  e_.op("smov {}, {}", S(rHalfB), rowBytes);
  e_.op("smov {}, 1", S(rHalfRows));
  e_.op("smov {}, {}", S(rGroups), B / 2);
  e_.op("smov {}, 0", S(rTw));
  e_.op("smov {}, {}", S(rSc), log2Exact(B));
  e_.label(lStage);
  e_.op("smov {}, {}", S(rGrp), vWork);
  e_.op("smov {}, {}", S(rGc), S(rGroups));
  e_.label(lGroup);
  e_.op("smov {}, {}", S(rU), S(rGrp));
  e_.op("sadd {}, {}, {}", S(rW), S(rGrp), S(rHalfB));
  e_.op("smov {}, {}", S(rTk), S(rTw));
  e_.op("smov {}, {}", S(rCnt), S(rHalfRows));
  butterflies(rU, rW, rTk, rCnt);
  e_.op("sadd {}, {}, {}", S(rGrp), S(rGrp), S(rHalfB));
  e_.op("sadd {}, {}, {}", S(rGrp), S(rGrp), S(rHalfB));
  e_.op("loop {}, {}", S(rGc), lGroup);
  e_.op("sshl {}, {}, 4", S(rT), S(rHalfRows));
  e_.op("sadd {}, {}, {}", S(rTw), S(rTw), S(rT));
  e_.op("sadd {}, {}, {}", S(rHalfB), S(rHalfB), S(rHalfB));
  e_.op("sadd {}, {}, {}", S(rHalfRows), S(rHalfRows), S(rHalfRows));
  e_.op("sshr {}, {}, 1", S(rGroups), S(rGroups));
  e_.op("loop {}, {}", S(rSc), lStage);
}

// Pass A on a block: gather, convert, unscramble, stages, write to X.
void FftPassEmitter::Long::blockA(int64_t rows) {
  if (!overlapA) gather(rows, "sem0");
  e_.op("sem.wait {}", overlapA ? "sem1" : "sem0");
  const int64_t blockRegs = (rows * R + kVregElems - 1) / kVregElems;
  if (overlapA) {
    // The last block's write-back (left in flight) leaves the work rows first.
    std::string lFirst = e_.newLabel("fftlfirst");
    e_.op("br.eq {}, 0, {}", S(rRow), lFirst);
    e_.op("sem.wait sem0");
    e_.label(lFirst);
  }
  if (stageIn)
    l_.fftWidenToC128(p.srcType, blockRegs, vStage, vWork);
  if (radix2) unscramble();
  if (overlapA) {
    std::string lLast = e_.newLabel("fftllast");
    e_.op("br.ge {}, {}, {}", S(rRow), n - B, lLast);
    gather(B, "sem1");
    e_.label(lLast);
  }
  // Stages len = 2 .. B on the block: groups of len rows.
  if (radix2) blockStages();
  scratchRow(rOff, rRow);
  e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", x), e_.desc(static_cast<uint64_t>(rows * rowBytes), {}),
        l_.memRef(x, S(rOff)), vWork);
  if (!overlapA) e_.op("sem.wait sem0");
  e_.op("sadd {}, {}, {}", S(rRow), S(rRow), rows);
}

// `count` blocks of B rows as a loop, then one of `rest` rows.
void FftPassEmitter::Long::blocks(int64_t count, int64_t rest, const std::function<void(int64_t)>& body) {
  if (count > 0) {
    PoolGuard countGuard({&sregs_});
    int rb = sreg();
    std::string l = e_.newLabel("fftlblock");
    e_.op("smov {}, {}", S(rb), count);
    e_.label(l);
    body(B);
    e_.op("loop {}, {}", S(rb), l);
  }
  if (rest > 0) body(rest);
}

// Radix 2, pass B: stages len = 2B .. n over X, half a block of u rows and
// half of v rows at a time.
void FftPassEmitter::Long::passB() {
  // B: stages len = 2B .. n over X; rBit = len / 2 in rows, rRow = t * B / 2
  // for the t-th set of butterflies: k0 = rRow mod len / 2, first u row
  // rRow + (rRow - k0).
  if (radix2) {
    std::string lStage = e_.newLabel("fftlpass"), lSet = e_.newLabel("fftlset");
    e_.op("smov {}, {}", S(rBit), B);
    e_.label(lStage);
    e_.op("smov {}, 0", S(rRow));
    e_.label(lSet);
    e_.op("ssub {}, {}, 1", S(rT), S(rBit));
    e_.op("sand {}, {}, {}", S(rRev), S(rRow), S(rT));  // k0
    e_.op("ssub {}, {}, {}", S(rT), S(rRow), S(rRev));
    e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rRow));  // first u row
    scratchRow(rOff, rT);
    e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", x), halfDesc, vWork, l_.memRef(x, S(rOff)));
    e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rBit));  // first v row
    scratchRow(rOff2, rT);
    e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", x), halfDesc, vWork + half * rowBytes, l_.memRef(x, S(rOff2)));
    // Twiddles len / 2 - 1 + k0 onwards of the stage table.
    e_.op("sadd {}, {}, {}", S(rT), S(rBit), S(rRev));
    e_.op("ssub {}, {}, 1", S(rT), S(rT));
    e_.op("sshl {}, {}, 4", S(rT), S(rT));
    e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2s", tw), e_.desc(static_cast<uint64_t>(half * kC128Bytes), {}),
          smemStream, l_.memRef(tw, S(rT)));
    e_.op("sem.wait sem0, 3");
    e_.op("smov {}, {}", S(rU), vWork);
    e_.op("smov {}, {}", S(rW), vWork + half * rowBytes);
    e_.op("smov {}, {}", S(rTk), smemStream);
    e_.op("smov {}, {}", S(rCnt), half);
    butterflies(rU, rW, rTk, rCnt);
    e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", x), halfDesc, l_.memRef(x, S(rOff)), vWork);
    e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", x), halfDesc, l_.memRef(x, S(rOff2)), vWork + half * rowBytes);
    e_.op("sem.wait sem0, 2");
    e_.op("sadd {}, {}, {}", S(rRow), S(rRow), half);
    e_.op("br.lt {}, {}, {}", S(rRow), n / 2, lSet);
    e_.op("sadd {}, {}, {}", S(rBit), S(rBit), S(rBit));
    e_.op("br.lt {}, {}, {}", S(rBit), n, lStage);
  }
}

// DFT: result rows [rRow, rRow + rowsK) into the acc rows, summed over
// blocks of rows j in order. Registers of pass B, which a DFT skips.
void FftPassEmitter::Long::dftRows(int64_t rowsK) {
  PoolGuard dftGuard({&sregs_, &vregs_});
  const int rJ = rBit, rMaddr = rW;
  rKc = sreg();
  VReg zero = l_.vconst(ElementType::C128, 0);
  l_.fftFlatLoop((rowsK * R + kVregElems - 1) / kVregElems, vAcc, kBlockBytes, vAcc, kBlockBytes,
           [&](int, int ro) { l_.vstore(zero, ElementType::C128, S(ro)); });
  vfree(zero);
  std::string lZero = e_.newLabel("fftlzidx");
  e_.op("smov {}, 0", S(rT));
  e_.op("smov {}, {}", S(rMaddr), smemStream);
  e_.op("smov {}, {}", S(rKc), rowsK);
  e_.label(lZero);
  e_.op("sst {}, [{}]", S(rT), S(rMaddr));
  e_.op("sadd {}, {}, 4", S(rMaddr), S(rMaddr));
  e_.op("loop {}, {}", S(rKc), lZero);
  e_.op("smov {}, 0", S(rJ));
  blocks(n / B, n % B, [&](int64_t rowsJ) { jBlock(rowsJ, rowsK); });
}

// DFT: one block of rowsJ rows j into the acc rows of the rowsK result rows k.
void FftPassEmitter::Long::jBlock(int64_t rowsJ, int64_t rowsK) {
  const int rJ = rBit, rStep = rRev, rAccA = rU, rMaddr = rW, rM = rTk, rX = rV, rC = rOff2, rJc = rCnt;
  scratchRow(rOff, rJ);
  e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", x), e_.desc(static_cast<uint64_t>(rowsJ * rowBytes), {}), vWork,
        l_.memRef(x, S(rOff)));
  e_.op("sem.wait sem0");
  std::string lK = e_.newLabel("fftldftk"), lJ = e_.newLabel("fftldftj");
  e_.op("sshl {}, {}, 4", S(rStep), S(rRow));  // k * 16: the index step of row k
  e_.op("smov {}, {}", S(rAccA), vAcc);
  e_.op("smov {}, {}", S(rMaddr), smemStream);
  e_.op("smov {}, {}", S(rKc), rowsK);
  e_.label(lK);
  e_.op("sld {}, [{}]", S(rM), S(rMaddr));
  VReg acc = l_.vload(ElementType::C128, S(rAccA));
  e_.op("smov {}, {}", S(rX), vWork);
  e_.op("smov {}, {}", S(rJc), rowsJ);
  e_.label(lJ);
  l_.dftTerm(acc, rw, rM, rX);
  e_.op("sadd {}, {}, {}", S(rX), S(rX), rowBytes);
  // m = (m + k) % n, k < n: one conditional subtraction.
  e_.op("sadd {}, {}, {}", S(rM), S(rM), S(rStep));
  e_.op("ssub {}, {}, {}", S(rT), S(rM), n * kC128Bytes);
  e_.op("scmp.ge {}, {}, {}", S(rC), S(rM), n * kC128Bytes);
  e_.op("ssel {}, {}, {}, {}", S(rM), S(rC), S(rT), S(rM));
  e_.op("loop {}, {}", S(rJc), lJ);
  l_.vstore(acc, ElementType::C128, S(rAccA), rowMask);
  vfree(acc);
  e_.op("sst {}, [{}]", S(rM), S(rMaddr));
  e_.op("sadd {}, {}, {}", S(rAccA), S(rAccA), rowBytes);
  e_.op("sadd {}, {}, 4", S(rMaddr), S(rMaddr));
  e_.op("sadd {}, {}, {}", S(rStep), S(rStep), kC128Bytes);
  e_.op("loop {}, {}", S(rKc), lK);
  e_.op("sadd {}, {}, {}", S(rJ), S(rJ), rowsJ);
}

// B rows of X from row rowReg into the work rows.
void FftPassEmitter::Long::loadX(int rowReg, const char* sem) {
  scratchRow(rOff, rowReg);
  e_.op("{} {}, [{}], {}, {}", l_.dmaOp("h2v", x), e_.desc(static_cast<uint64_t>(B * rowBytes), {}), vWork,
        l_.memRef(x, S(rOff)), sem);
}

// Pass C on a block: the result rows (scaled, converted) out to dst.
void FftPassEmitter::Long::outBlock(int64_t rows) {
  if (overlapC) {
    std::string lFirst = e_.newLabel("fftlofirst");
    e_.op("sem.wait sem1");
    e_.op("br.eq {}, 0, {}", S(rRow), lFirst);
    e_.op("sem.wait sem0");  // the last block's write-back leaves the staging rows
    e_.label(lFirst);
  } else if (radix2) {
    scratchRow(rOff, rRow);
    e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", x), e_.desc(static_cast<uint64_t>(rows * rowBytes), {}), vWork,
          l_.memRef(x, S(rOff)));
    e_.op("sem.wait sem0");
  } else {
    dftRows(rows);
  }
  const int64_t regs = (rows * R + kVregElems - 1) / kVregElems;
  if (p.inverse || stageOut)
    l_.fftFlatLoop(regs, vOut, kBlockBytes, stageOut ? vStage : vOut, stageOut ? kVregElems * db : kBlockBytes,
             [&](int ri, int ro) {
               VReg z = l_.vload(ElementType::C128, S(ri));
               if (p.inverse) {
                 VReg q = l_.fftDivide(z, divisor);
                 vfree(z);
                 z = q;
               }
               l_.fftStoreResult(z, p.dstType, S(ro));
               vfree(z);
             });
  if (overlapC) {
    std::string lLast = e_.newLabel("fftlolast");
    e_.op("sadd {}, {}, {}", S(rT), S(rRow), B);
    e_.op("br.ge {}, {}, {}", S(rT), p.dstRows, lLast);
    loadX(rT, "sem1");
    e_.label(lLast);
  }
  std::vector<Emitter::Dim> outDims = {{rows, R * db, inner * db}};
  if (pcC > 1) outDims.push_back({pcC, qcC * db, p.dstRows * inner * db});
  arrayRow(rRow, p.dstRows, db, p.dst);
  e_.op("{} {}, {}, [{}], sem0", l_.dmaOp("v2h", p.dst), e_.desc(static_cast<uint64_t>(qcC * db), outDims), l_.memRef(p.dst, S(rOff)), stageOut ? vStage : vOut);
  if (!overlapC) e_.op("sem.wait sem0");
  e_.op("sadd {}, {}, {}", S(rRow), S(rRow), rows);
}

// One chunk of up to 128 transforms: pass A, pass B (radix 2), pass C.
void FftPassEmitter::Long::chunk(int64_t pcC, int64_t qcC, int rP, int rQ) {
  this->pcC = pcC;
  this->qcC = qcC;
  this->rP = rP;
  this->rQ = rQ;
  PoolGuard chunkGuard({&sregs_, &vregs_, &masks_});
  rOff = sreg();
  rOff2 = sreg();
  rV = sreg();
  rRow = sreg();
  rRev = sreg();
  rBit = sreg();
  rT = sreg();
  rCnt = sreg();
  rU = sreg();
  rW = sreg();
  rTk = sreg();
  halfDesc = e_.desc(static_cast<uint64_t>(half * rowBytes), {});

  // A: gather, convert, (radix 2) stages 2 .. B, per block of B rows; rRev
  // is the source row (bit-reversed for radix 2).
  e_.op("smov {}, 0", S(rRow));
  e_.op("smov {}, 0", S(rRev));
  // Radix 2 from a narrower type: the rows land in the staging area and
  // are widened into the work rows, so the next block's gather (on sem1)
  // overlaps this block's stages and write-back. Every block has B rows.
  overlapA = radix2 && stageIn;
  if (overlapA) gather(B, "sem1");
  blocks(n / B, n % B, [&](int64_t rows) { blockA(rows); });
  if (overlapA) e_.op("sem.wait sem0");  // the last block's write-back, before X is read

  passB();

  // C: the result rows, B at a time.
  if (p.inverse) {
    uint64_t nBits = std::bit_cast<uint64_t>(static_cast<double>(n));
    divisor = valloc(ElementType::F64);
    e_.op("vmov.s32 {}, {}", V(divisor), static_cast<int32_t>(static_cast<uint32_t>(nBits)));
    e_.op("vmov.s32 {}, {}", H(divisor), static_cast<int32_t>(static_cast<uint32_t>(nBits >> 32)));
  }
  vOut = radix2 ? vWork : vAcc;
  // Radix 2 into a narrower type with whole blocks: the result rows are
  // staged, so block b + 1's rows load (sem1) while block b goes out.
  overlapC = radix2 && stageOut && p.dstRows % B == 0;
  e_.op("smov {}, 0", S(rRow));
  if (overlapC) loadX(rRow, "sem1");
  blocks(p.dstRows / B, p.dstRows % B, [&](int64_t rows) { outBlock(rows); });
  if (overlapC) e_.op("sem.wait sem0");
  if (p.inverse) vfree(divisor);
}
bool FftPassEmitter::Long::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  if (!plan()) return false;
  // Chunks of at most 128 transforms: whole inner runs of several outer
  // indices, or pieces of one run.
  int64_t pc = 1, qc = inner;
  if (inner <= R)
    pc = std::min(outer, R / inner);
  else
    qc = R;
  l_.emitFftChunks(outer, inner, pc, qc, [&](int64_t pcC, int64_t qcC, int rP, int rQ) { chunk(pcC, qcC, rP, rQ); });
  return !failed_;
}

bool Lowerer::emitFftPassLong(const Instruction& in, const FftPass& p) {
  FftPassEmitter::Long pass(*this, in, p);
  return pass.run();
}

bool Lowerer::lowerFft(const Instruction& in) {
  const Instruction* x = in.operand(0);
  const Shape& xs = x->shape();
  const Shape& os = in.shape();
  const std::vector<int64_t>& len = in.attrs().fftLength;
  const hlo::FftType type = in.attrs().fftType;
  const ElementType it = xs.elementType(), ot = os.elementType();
  beginKernel(in, "fft");
  const size_t nd = len.size(), rank = static_cast<size_t>(os.rank());
  if (nd < 1 || nd > 3 || nd > rank)
    return fail(in, fmt::format("llo-gen: fft '{}' needs 1 to 3 fft_length entries within its rank", in.name()));
  // The logical (full-length) complex array the interpreter transforms.
  std::vector<int64_t> dims = os.dimensions();
  for (size_t i = 0; i < nd; ++i) dims[rank - nd + i] = len[i];
  int src = leaves_[x][0], dst = leaves_[&in][0];
  if (product(os.dimensions()) == 0) {
    endKernel(0, 0, 0);
    return true;
  }
  if (product(dims) == 0 || product(xs.dimensions()) == 0)
    return fail(in, fmt::format("llo-gen: fft '{}' with a zero fft_length is not supported", in.name()));
  const uint64_t workBytes = static_cast<uint64_t>(product(dims)) * kC128Bytes;
  const bool needsWork = nd > 1 || type == hlo::FftType::Irfft;  // a c128 array between passes
  const uint64_t largest = std::max({bufs_[src].bytes, bufs_[dst].bytes, needsWork ? workBytes : 0});
  if (largest >= (uint64_t{1} << 31))
    return fail(in, fmt::format("llo-gen: fft '{}' addresses an array of {} bytes, more than the 2 GiB the scalar "
                                "unit can address",
                                in.name(), largest));
  const bool inverse = type == hlo::FftType::Ifft || type == hlo::FftType::Irfft;
  int cur = src;
  ElementType curType = it;
  int work = -1;  // the c128 logical array between passes
  if (type == hlo::FftType::Irfft) {
    work = hermitianCompletion(in, dims);
    if (work < 0) return false;
    cur = work;
    curType = ElementType::C128;
  } else if (needsWork) {
    work = tempBuf(ElementType::C128, dims);
  }
  // One pass per transformed dimension, first to last, as fftTrailing runs them.
  for (size_t i = 0; i < nd; ++i) {
    size_t d = rank - nd + i;
    FftPass p;
    p.outer = product(std::vector<int64_t>(dims.begin(), dims.begin() + static_cast<int64_t>(d)));
    p.n = dims[d];
    p.inner = product(std::vector<int64_t>(dims.begin() + static_cast<int64_t>(d) + 1, dims.end()));
    const bool last = i + 1 == nd;
    p.src = cur;
    p.srcType = curType;
    p.dst = last ? dst : work;
    p.dstType = last ? ot : ElementType::C128;
    p.dstRows = last && type == hlo::FftType::Rfft ? p.n / 2 + 1 : p.n;  // RFFT keeps n / 2 + 1
    p.inverse = inverse;
    // A length-1 dimension between c128 passes changes nothing.
    if (p.n <= 1 && p.src == p.dst && p.srcType == p.dstType && p.dstRows == p.n) continue;
    if (!emitFftPass(in, p)) return false;
    cur = p.dst;
    curType = p.dstType;
  }
  double flops = 0;
  for (size_t i = 0; i < nd; ++i) {
    double n = static_cast<double>(len[i]), count = static_cast<double>(product(dims)) / n;
    flops += count * (isPowerOfTwo(len[i]) ? 5.0 * n * std::log2(n) : 8.0 * n * n);
  }
  endKernel(flops, bufs_[src].bytes + bufs_[dst].bytes + 2 * nd * workBytes, 0);
  return !failed_;
}

// IRFFT's input completed to the full last dimension as the interpreter
// does it: X[i..] = conj(X[mirror(i)..]) where the last index is past the
// stored half, mirror(i) = (L - i) % L in every transformed dimension. Built
// in a c128 temporary by DMA: the stored half, then the conjugated input
// copied with reversed strides into the missing part, one box per choice of
// "index 0" or "indices 1.. reversed" in the other transformed dimensions.
int Lowerer::hermitianCompletion(const Instruction& in, const std::vector<int64_t>& dims) {
  const Instruction* x = in.operand(0);
  const Shape& xs = x->shape();
  const size_t nd = in.attrs().fftLength.size(), rank = dims.size();
  const std::vector<int64_t>& xd = xs.dimensions();
  int src = leaves_[x][0];
  int xc = src;
  auto widen = [&](const std::vector<VReg>& v) {
    VReg z = valloc(ElementType::C128);
    for (int w = 0; w < 2; ++w) {
      e_.op("vcvt.f64.f32 {}, {}, {}", vregs_.name(w ? z.hi : z.r), V(v[0]), w);
      e_.op("vcvt.f64.f32 {}, {}, {}", vregs_.name(w ? z.imh : z.im), H(v[0]), w);
    }
    return std::vector<VReg>{z};
  };
  if (xs.elementType() == ElementType::C64) {
    xc = tempBuf(ElementType::C128, xd);
    emitElementwise(product(xd), {EwInput{EwInput::Full, src, 0, ElementType::C64}},
                    {EwOutput{xc, 0, ElementType::C128}}, widen);
  }
  int work = tempBuf(ElementType::C128, dims);
  std::vector<int64_t> ws = byteStrides(dims, kC128Bytes), xsb = byteStrides(xd, kC128Bytes);
  emitCopy(work, 0, xc, 0, xd, ws, xsb, kC128Bytes);
  const int64_t L = dims.back(), h = xd.back();
  if (L - h <= 0) return failed_ ? -1 : work;
  int conj = tempBuf(ElementType::C128, xd);
  emitElementwise(product(xd), {EwInput{EwInput::Full, xc, 0, ElementType::C128}},
                  {EwOutput{conj, 0, ElementType::C128}}, [&](const std::vector<VReg>& v) {
                    // std::conj flips the imaginary sign bit (zeros and NaNs included).
                    VReg z = vcopy(v[0], ElementType::C128);
                    e_.op("vxor {}, {}, -2147483648", vregs_.name(z.imh), vregs_.name(z.imh));
                    return std::vector<VReg>{z};
                  });
  const size_t first = rank - nd;
  for (int choice = 0; choice < (1 << (nd - 1)); ++choice) {
    std::vector<int64_t> counts, dstStrides, srcStrides;
    int64_t dstOff = 0, srcOff = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t count = dims[d], ds = ws[d], ss = xsb[d];
      if (d + 1 == rank) {  // the missing part m in [h, L) reads index L - m
        count = L - h;
        dstOff += h * ws[d];
        srcOff += (L - h) * xsb[d];
        ss = -ss;
      } else if (d >= first) {
        if (choice >> (d - first) & 1) {  // indices 1..L-1 read L-1..1
          count = dims[d] - 1;
          dstOff += ws[d];
          srcOff += (dims[d] - 1) * xsb[d];
          ss = -ss;
        } else {
          count = 1;  // index 0 reads index 0
        }
      }
      counts.push_back(count);
      dstStrides.push_back(ds);
      srcStrides.push_back(ss);
    }
    emitCopy(work, dstOff, conj, srcOff, counts, dstStrides, srcStrides, kC128Bytes);
  }
  return failed_ ? -1 : work;
}

}  // namespace tpu::codegen
