// The filter gradient of a depthwise convolution, streamed on the vector
// unit: no im2col matrix in HBM.
//
// XLA writes the weight gradient of a depthwise convolution as a
// convolution with batch_group_count = channels whose lhs is the forward
// input with its channels as the batch (f01b) and whose kernel is the
// output gradient (i01o): window = the output gradient's extent, nearly
// the whole image, and the result is the small filter. For channel c and
// filter tap t, result[t, c] = sum over images n and gradient positions s
// of x[n, t * stride + s * dilation, c] * dy[n, s, c]: a sum over positions
// of elementwise products, channels on lanes in both operands. Each image
// and its gradient are DMAed (128 channels at a time) into VMEM boxes,
// double-buffered, the input's box zero-padded; per gradient row and block
// of 8 positions, the gradient block is loaded once and multiply-added
// with the input block of each tap into one f32 accumulator per tap (exact
// products, as the depthwise kernels). After the last image the 8
// sublanes of each accumulator are summed into the result row of its tap,
// which one DMA writes out at the end.
#include <fmt/format.h>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool streamableFloat(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.isFloat && !ti.isComplex && ti.bytes <= 4 && !isWideType(t);
}

}  // namespace

bool Lowerer::filterGradPlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue,
                             FilterGradPlan& p) const {
  const auto& dn = *in.attrs().convDims;
  // One image per batch group (its channel), one output per group, no
  // feature groups: a depthwise convolution's filter gradient.
  if (epilogue || g.rank < 1 || g.rank > 2 || g.featureGroups != 1 || g.batchGroups < 2 ||
      g.batchGroups != g.batch || g.outPerGroup != 1 || g.inPerGroup < 1)
    return false;
  if (!streamableFloat(g.inType) || !streamableFloat(g.kType) || !streamableFloat(g.outType)) return false;
  for (size_t d = 0; d < g.rank; ++d)
    if (g.lhsDil[d] != 1 || g.reversal[d] || g.padLow[d] < 0 || g.padded[d] < g.inSize[d] + g.padLow[d])
      return false;
  // Channels minor in the input, the gradient and the result: lanes.
  const int es = typeInfo(g.inType).bytes, ew = typeInfo(g.kType).bytes, eo = typeInfo(g.outType).bytes;
  const std::vector<int64_t> xs = byteStrides(in.operand(0)->shape().dimensions(), es);
  const std::vector<int64_t> ks = byteStrides(in.operand(1)->shape().dimensions(), ew);
  const std::vector<int64_t> os = byteStrides(in.shape().dimensions(), eo);
  if (xs[static_cast<size_t>(dn.inputBatchDimension)] != es ||
      ks[static_cast<size_t>(dn.kernelOutputFeatureDimension)] != ew ||
      os[static_cast<size_t>(dn.outputFeatureDimension)] != eo)
    return false;
  p.N = g.inPerGroup;
  p.C = g.batch;
  p.CB = ceilDiv(p.C, 128);
  // Rows and columns (1-D: one row).
  auto rowsCols = [&](const std::vector<int64_t>& v, int64_t one, int64_t& rows, int64_t& cols) {
    rows = g.rank == 2 ? v[0] : one;
    cols = v[g.rank - 1];
  };
  rowsCols(g.inSize, 1, p.H, p.W);
  rowsCols(g.padded, 1, p.Hp, p.Wp);
  rowsCols(g.padLow, 0, p.padTop, p.padLeft);
  rowsCols(g.kSize, 1, p.KH, p.KW);
  rowsCols(g.outSize, 1, p.OH, p.OW);
  rowsCols(g.stride, 1, p.sH, p.sW);
  rowsCols(g.rhsDil, 1, p.dH, p.dW);
  if (p.N <= 0 || p.H <= 0 || p.W <= 0 || p.KH <= 0 || p.KW <= 0 || p.OH <= 0 || p.OW <= 0) return false;
  // An accumulator per tap of a group, a few registers for the blocks.
  const int64_t taps = p.OH * p.OW;
  const int64_t perGroup = std::min<int64_t>(32, target_.registers.vregs - 12);
  if (perGroup < 1) return false;
  p.tapGroups = ceilDiv(taps, perGroup);
  p.tapsPerGroup = ceilDiv(taps, p.tapGroups);
  p.blocks = ceilDiv(p.KW, 8);
  // Gradient rows of 8-position blocks; loads of the last block's dropped
  // positions run past the input box's end: slack.
  p.rowX = static_cast<uint64_t>(p.Wp * 128 * es);
  p.rowY = static_cast<uint64_t>(p.blocks * 8 * 128 * ew);
  p.rowOut = static_cast<uint64_t>(p.CB * 128 * eo);
  p.xSlot =
      alignUp(static_cast<uint64_t>(p.Hp) * p.rowX + static_cast<uint64_t>((8 * p.dW + 8) * 128 * es), 512);
  p.ySlot = alignUp(static_cast<uint64_t>(p.KH) * p.rowY, 512);
  p.vX = 0;
  p.vY = 2 * p.xSlot;
  p.vOut = p.vY + 2 * p.ySlot;
  p.end = p.vOut + alignUp(static_cast<uint64_t>(taps) * p.rowOut, 512);
  return p.end <= vmemBudget();
}

// The kernel's phases: descriptors, the image loads, the row loop of a
// tap group, and the result.
class FilterGradEmitter : KernelPhases {
 public:
  FilterGradEmitter(Lowerer& l, const Instruction& in, const ConvGeometry& g, const FilterGradPlan& p)
      : KernelPhases(l, in), g(g), p(p), dn(*in.attrs().convDims) {}
  bool run();

 private:
  void descriptors();
  void zeroBoxes();
  void loadImage(int rImage, int rSl);
  void rows(int64_t t0, int64_t t1, const std::vector<VReg>& acc);
  void tapGroup(int64_t t0, int64_t t1);
  void resultOut();

  const ConvGeometry& g;
  const FilterGradPlan& p;
  const hlo::ConvolutionDimensionNumbers& dn;
  int es = 0, ew = 0, eo = 0;
  int xBuf = -1, yBuf = -1, dst = -1;
  int64_t xN = 0, yN = 0, lastLanes = 128;
  std::string dX, dXLast, dY, dYLast;
  int rN = -1, rSlot = -1, rCb = -1, rT = -1, rT2 = -1, rRow = -1, rX = -1, rY = -1;
  int tailMask = -1;
};

// Image n of the input into the padded box's interior, its gradient into
// rows of 8-position blocks: 128 channels (fewer in the last block).
void FilterGradEmitter::descriptors() {
  const bool two = g.rank == 2;
  const std::vector<int64_t> xs = byteStrides(in.operand(0)->shape().dimensions(), es);
  const std::vector<int64_t> ys = byteStrides(in.operand(1)->shape().dimensions(), ew);
  xN = xs[static_cast<size_t>(dn.inputFeatureDimension)];
  yN = ys[static_cast<size_t>(dn.kernelInputFeatureDimension)];
  const int64_t xH = two ? xs[static_cast<size_t>(dn.inputSpatialDimensions[0])] : 0;
  const int64_t xW = xs[static_cast<size_t>(dn.inputSpatialDimensions[g.rank - 1])];
  const int64_t yH = two ? ys[static_cast<size_t>(dn.kernelSpatialDimensions[0])] : 0;
  const int64_t yW = ys[static_cast<size_t>(dn.kernelSpatialDimensions[g.rank - 1])];
  lastLanes = p.C - (p.CB - 1) * 128;
  auto box = [&](int64_t lanes, int e, int64_t rowsN, int64_t sH, int64_t dH, int64_t cols, int64_t sW) {
    std::vector<Emitter::Dim> dims;
    if (rowsN > 1) dims.push_back({rowsN, sH, dH});
    dims.push_back({cols, sW, 128 * e});
    return e_.desc(static_cast<uint64_t>(lanes * e), dims);
  };
  const int64_t full = std::min<int64_t>(128, p.C);
  dX = box(full, es, p.H, xH, static_cast<int64_t>(p.rowX), p.W, xW);
  dXLast = box(lastLanes, es, p.H, xH, static_cast<int64_t>(p.rowX), p.W, xW);
  dY = box(full, ew, p.KH, yH, static_cast<int64_t>(p.rowY), p.KW, yW);
  dYLast = box(lastLanes, ew, p.KH, yH, static_cast<int64_t>(p.rowY), p.KW, yW);
}

// Zeroes both input boxes (their padding is never written) and the
// gradient boxes (lanes past the channels, positions past a row).
void FilterGradEmitter::zeroBoxes() {
  VReg z = l_.vconst(ElementType::F32, 0);
  const int64_t stores = static_cast<int64_t>(p.vOut / 4096);
  std::string lZero = e_.newLabel("fgzero");
  e_.op("smov {}, 0", S(rT));
  e_.op("smov {}, {}", S(rRow), stores);
  e_.label(lZero);
  e_.op("vst {}, [{}]", V(z), S(rT));
  e_.op("sadd {}, {}, 4096", S(rT), S(rT));
  e_.op("loop {}, {}", S(rRow), lZero);
  for (uint64_t off = static_cast<uint64_t>(stores) * 4096; off < p.vOut; off += 512) {
    e_.op("smov {}, {}", S(rT), off);
    e_.op("vst {}, [{}], mask=0x1", V(z), S(rT));
  }
  vfree(z);
}

// Image rImage of channel block rCb into slot rSl, both DMAs on sem[rSl].
void FilterGradEmitter::loadImage(int rImage, int rSl) {
  const uint64_t xInterior =
      static_cast<uint64_t>(p.padTop) * p.rowX + static_cast<uint64_t>(p.padLeft * 128 * es);
  auto one = [&](int buf, int64_t perImage, int e, uint64_t at, uint64_t slot, const std::string& full,
                 const std::string& last) {
    e_.op("smul {}, {}, {}", S(rT), S(rImage), perImage);
    e_.op("smul {}, {}, {}", S(rT2), S(rCb), 128 * e);
    e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rT2));
    e_.op("sadd {}, {}, {}", S(rT), S(rT), base(buf));
    e_.op("smul {}, {}, {}", S(rT2), S(rSl), slot);
    e_.op("sadd {}, {}, {}", S(rT2), S(rT2), at);
    if (full == last) {
      e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", buf), full, S(rT2), l_.memRef(buf, S(rT)), S(rSl));
      return;
    }
    std::string lLast = e_.newLabel("fglast"), lDone = e_.newLabel("fgloaded");
    e_.op("br.ge {}, {}, {}", S(rCb), p.CB - 1, lLast);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", buf), full, S(rT2), l_.memRef(buf, S(rT)), S(rSl));
    e_.op("jmp {}", lDone);
    e_.label(lLast);
    e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", buf), last, S(rT2), l_.memRef(buf, S(rT)), S(rSl));
    e_.label(lDone);
  };
  one(xBuf, xN, es, p.vX + xInterior, p.xSlot, dX, dXLast);
  one(yBuf, yN, ew, p.vY, p.ySlot, dY, dYLast);
}

// The gradient rows of one image (rX, rY at its boxes' first rows): per
// block of 8 positions, the gradient block times each tap's input block
// into the tap's accumulator. The gradient box is zero past a row; the
// input's values there are zeroed too (an infinity must not meet a zero).
void FilterGradEmitter::rows(int64_t t0, int64_t t1, const std::vector<VReg>& acc) {
  const std::string ldX = loadMnemonic(g.inType), ldY = loadMnemonic(g.kType);
  std::string lRow = e_.newLabel("fgrow");
  e_.op("smov {}, {}", S(rRow), p.KH);
  e_.label(lRow);
  vregs_.setRotating(true);
  for (int64_t b = 0; b < p.blocks; ++b) {
    const bool tail = b == p.blocks - 1 && p.KW % 8 != 0;
    VReg d = valloc(ElementType::F32);
    e_.op("{} {}, [{} + {}], {}", ldY, V(d), S(rY), b * 8 * 128 * ew, 128 * ew);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ty = t / p.OW, tx = t % p.OW;
      const int64_t off = ty * p.sH * static_cast<int64_t>(p.rowX) + (b * 8 * p.dW + tx * p.sW) * 128 * es;
      VReg x = valloc(ElementType::F32);
      e_.op("{} {}, [{} + {}], {}", ldX, V(x), S(rX), off, p.dW * 128 * es);
      if (tail) e_.op("vsel.f32 {}, {}, {}, 0", V(x), M(tailMask), V(x));
      const VReg a = acc[static_cast<size_t>(t - t0)];
      e_.op("vfma.f32 {}, {}, {}, {}", V(a), V(x), V(d), V(a));
      vfree(x);
    }
    vfree(d);
  }
  vregs_.setRotating(false);
  e_.op("sadd {}, {}, {}", S(rX), S(rX), p.dH * static_cast<int64_t>(p.rowX));
  e_.op("sadd {}, {}, {}", S(rY), S(rY), static_cast<int64_t>(p.rowY));
  e_.op("loop {}, {}", S(rRow), lRow);
}

// Taps t0 .. t1 - 1 over every channel block: the images stream through
// the two slots (the next one's DMAs issued before this one computes),
// then each accumulator's sublanes are summed into its result row.
void FilterGradEmitter::tapGroup(int64_t t0, int64_t t1) {
  std::string lBlock = e_.newLabel("fgblock"), lImage = e_.newLabel("fgimage");
  e_.op("smov {}, 0", S(rCb));
  e_.label(lBlock);
  std::vector<VReg> acc;
  for (int64_t t = t0; t < t1; ++t) acc.push_back(l_.vconst(ElementType::F32, 0));
  e_.op("smov {}, 0", S(rN));
  e_.op("smov {}, 0", S(rSlot));
  loadImage(rN, rSlot);
  e_.label(lImage);
  {
    std::string lNoNext = e_.newLabel("fgnonext");
    e_.op("sand {}, {}, 1", S(rSlot), S(rN));
    e_.op("sadd {}, {}, 1", S(rRow), S(rN));
    e_.op("br.ge {}, {}, {}", S(rRow), p.N, lNoNext);
    e_.op("sxor {}, {}, 1", S(rX), S(rSlot));
    loadImage(rRow, rX);
    e_.label(lNoNext);
  }
  e_.op("sem.wait sem[{}], 2", S(rSlot));
  e_.op("smul {}, {}, {}", S(rX), S(rSlot), p.xSlot);
  e_.op("sadd {}, {}, {}", S(rX), S(rX), p.vX);
  e_.op("smul {}, {}, {}", S(rY), S(rSlot), p.ySlot);
  e_.op("sadd {}, {}, {}", S(rY), S(rY), p.vY);
  rows(t0, t1, acc);
  e_.op("sadd {}, {}, 1", S(rN), S(rN));
  e_.op("br.lt {}, {}, {}", S(rN), p.N, lImage);
  e_.op("smul {}, {}, {}", S(rT), S(rCb), 128 * eo);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), p.vOut);
  for (int64_t t = t0; t < t1; ++t) {
    VReg a = acc[static_cast<size_t>(t - t0)];
    e_.op("vred.sum.sub.f32 {}, {}", V(a), V(a));
    l_.vstore(a, g.outType, fmt::format("{} + {}", S(rT), t * static_cast<int64_t>(p.rowOut)), ", mask=0x1");
    vfree(a);
  }
  e_.op("sadd {}, {}, 1", S(rCb), S(rCb));
  e_.op("br.lt {}, {}, {}", S(rCb), p.CB, lBlock);
}

// The result rows (one per tap) out in one DMA.
void FilterGradEmitter::resultOut() {
  const bool two = g.rank == 2;
  const std::vector<int64_t> os = byteStrides(in.shape().dimensions(), eo);
  std::vector<Emitter::Dim> dims;
  if (two && p.OH > 1)
    dims.push_back({p.OH, p.OW * static_cast<int64_t>(p.rowOut),
                    os[static_cast<size_t>(dn.outputSpatialDimensions[0])]});
  if (p.OW > 1)
    dims.push_back({p.OW, static_cast<int64_t>(p.rowOut),
                    os[static_cast<size_t>(dn.outputSpatialDimensions[g.rank - 1])]});
  std::string dOut = e_.desc(static_cast<uint64_t>(p.C * eo), dims);
  e_.op("smov {}, {}", S(rT), base(dst));
  e_.op("{} {}, {}, [{}], sem2", l_.dmaOp("v2h", dst), dOut, l_.memRef(dst, S(rT)), p.vOut);
  e_.op("sem.wait sem2, 1");
}

bool FilterGradEmitter::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  es = typeInfo(g.inType).bytes;
  ew = typeInfo(g.kType).bytes;
  eo = typeInfo(g.outType).bytes;
  xBuf = leaves_[in.operand(0)][0];
  yBuf = leaves_[in.operand(1)][0];
  dst = leaves_[&in][0];
  for (int* r : {&rN, &rSlot, &rCb, &rT, &rT2, &rRow, &rX, &rY}) *r = sreg();
  descriptors();
  zeroBoxes();
  if (p.KW % 8 != 0) {
    tailMask = malloc_();
    e_.op("msublanes {}, {}", M(tailMask), p.KW % 8);
  }
  const int64_t taps = p.OH * p.OW;
  for (int64_t t0 = 0; t0 < taps; t0 += p.tapsPerGroup) tapGroup(t0, std::min(taps, t0 + p.tapsPerGroup));
  resultOut();
  if (tailMask >= 0) masks_.put(tailMask);
  return !failed_;
}

bool Lowerer::emitFilterGrad(const Instruction& in, const ConvGeometry& g, const FilterGradPlan& p) {
  return FilterGradEmitter(*this, in, g, p).run();
}

}  // namespace tpu::codegen
