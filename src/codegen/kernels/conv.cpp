// Convolution. The input is first put in canonical form X[N, P0.., C]
// (channels innermost, lhs dilation and padding applied) by one strided DMA
// into a zero-filled temporary. General convolutions then build an im2col
// matrix per group with one strided DMA (window taps are DMA dimensions, so
// code size does not grow with the window) and run on the MXUs through
// emitMatmul, all groups as one batched matmul. Depthwise convolutions
// (one input feature per group) would use 1/128 of each MXU tile, so they
// multiply-accumulate on the vector unit instead, channels on lanes.
#include <fmt/format.h>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

int64_t roundUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// The input indices of one spatial dimension that land inside X (negative
// padding crops), and where the first of them lands.
struct PadCopy {
  int64_t first = 0;  // first input index copied
  int64_t count = 0;  // input indices copied
  int64_t at = 0;     // padded index of the first copied one
};

PadCopy padCopy(int64_t size, int64_t low, int64_t dil, int64_t padded) {
  PadCopy p;
  p.first = low >= 0 ? 0 : (-low + dil - 1) / dil;
  int64_t last = size - 1;
  if (padded <= low)
    last = -1;
  else
    last = std::min(last, (padded - 1 - low) / dil);
  p.count = std::max<int64_t>(0, last - p.first + 1);
  p.at = low + p.first * dil;
  return p;
}

// VMEM layout of the depthwise kernel: weights [og, taps, cp], then two
// slots (double buffering) of the box of X one output row reads and of the
// row's results [positions rounded up to 8 x unroll, cp], then an output
// fusion's column inputs [og, cp]. Loads of the last position blocks and
// channel block may run past the box (their lanes are never stored): slack
// keeps them inside the slot.
struct DepthwiseVmem {
  int64_t unroll = 1, groups = 1;  // 8-position blocks per tap loop, loops per row
  uint64_t box = 0, boxSlot = 0, acc = 0, accSlot = 0, end = 0;
  std::vector<uint64_t> columns;  // per epilogue input (columns only)
};

DepthwiseVmem depthwiseVmem(const ConvGeometry& g, const MatmulEpilogue* epilogue) {
  size_t last = g.rank - 1;
  int64_t cp = roundUp(g.inFeatures, 128);
  int64_t es = typeInfo(g.inType).bytes, ew = typeInfo(g.kType).bytes;
  int64_t eo = typeInfo(epilogue ? epilogue->outType : g.outType).bytes;
  DepthwiseVmem v;
  int64_t blocks = (g.outSize[last] + 7) / 8;
  // Up to 8 independent accumulators hide load and multiply-add latency;
  // the blocks are split into equal groups so few are computed in vain.
  v.groups = std::max<int64_t>(1, (blocks + 7) / 8);
  v.unroll = std::max<int64_t>(1, (blocks + v.groups - 1) / v.groups);
  int64_t box = g.padded[last] * g.inFeatures * es;
  for (size_t d = 0; d < last; ++d) box *= (g.kSize[d] - 1) * g.rhsDil[d] + 1;
  int64_t slack = (8 * v.unroll * g.stride[last] * g.inFeatures + cp) * es + 512;
  v.box = alignUp(static_cast<uint64_t>(g.outPerGroup * g.taps * cp * ew), 512);
  v.boxSlot = alignUp(static_cast<uint64_t>(box + slack), 512);
  v.acc = v.box + 2 * v.boxSlot;
  v.accSlot = alignUp(static_cast<uint64_t>(v.groups * v.unroll * 8 * cp * eo), 512);
  v.end = v.acc + 2 * v.accSlot;
  if (epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs) {
      v.columns.push_back(v.end);
      if (input.kind == MatmulEpilogue::Column)
        v.end += alignUp(static_cast<uint64_t>(g.outPerGroup * cp * typeInfo(input.type).bytes), 512);
    }
  return v;
}

// Why a convolution does not stream through VMEM: the named decision its
// kernel's --stats row carries, with the temporary it keeps in HBM (the
// im2col matrix, or a padded, channels-last copy of the input).
std::string unstreamedReason(const ConvGeometry& g, bool wide, bool integer, bool depthwise, int passes,
                             bool enabled) {
  auto name = [](ElementType t) { return std::string(hlo::elementTypeName(t)); };
  const std::string copy = "over a padded channels-last copy of the input in HBM";
  if (wide) return "64-bit or complex: sums in that type on the vector unit, " + copy;
  if (integer) return "integer: exact s32 sums on the vector unit, " + copy + " widened to s32";
  auto exact = [](ElementType t) { return t != ElementType::F32 && t != ElementType::F16; };
  if (depthwise && (!exact(g.inType) || !exact(g.kType)))
    return fmt::format(
        "depthwise with {} x {} operands: exact f32 products on the vector unit (one bf16 MXU pass "
        "would round), {}",
        name(g.inType), name(g.kType), copy);
  if (depthwise && g.outPerGroup == 1)
    return "depthwise, one output per group, not a form the stream kernel takes (2-D, no lhs dilation or "
           "reversal, "
           "padding >= 0, fits VMEM): the row-box kernel on the vector unit (faster than block-diagonal MXU "
           "passes), " +
           copy;
  // Why the implicit GEMM declined.
  std::string why;
  if (!enabled)
    why = "implicit GEMM disabled";
  else if (passes != 1 && passes != 3 && passes != 6)
    why = fmt::format("{} bf16 MXU passes; the implicit GEMM makes 1, 3 or 6", passes);
  else if (g.batchGroups > 1 && g.featureGroups > 1)
    why = fmt::format("batch_group_count={} with feature groups", g.batchGroups);
  else if (g.rank < 1)
    why = "no spatial dimensions; the implicit GEMM takes windows of 1 or more";
  else if (!typeInfo(g.inType).isFloat || !typeInfo(g.kType).isFloat)
    why = fmt::format("{} x {} operands; the implicit GEMM takes floats", name(g.inType), name(g.kType));
  else if (!typeInfo(g.outType).isFloat)
    why = name(g.outType) + " result";
  else
    why = "the window box, weights and staging do not fit VMEM (or the epilogue the vector registers)";
  if (depthwise) return "depthwise on the vector unit, " + copy + ": " + why;
  return "im2col matrix in HBM: " + why;
}

}  // namespace

// A convolution's lowering: the geometry from the attributes, the choice
// of kernel (implicit GEMM, streamed depthwise, or one over a padded copy
// of the input in HBM: im2col on the MXUs, the row-box depthwise kernel,
// or the vector unit's exact sums) and the kernel's frame.
class ConvLowering : KernelPhases {
 public:
  ConvLowering(Lowerer& l, const Instruction& in, const MatmulEpilogue* epilogue)
      : KernelPhases(l, in), epilogue(epilogue), dn(*in.attrs().convDims) {}
  bool run();

 private:
  std::string geometry();
  void choose();
  bool streamed();
  int paddedInput(int lhsBuf, bool& holes, bool& ok);
  int validPositions(bool& ok);
  bool unstreamed();

  const MatmulEpilogue* epilogue;
  const hlo::ConvolutionDimensionNumbers& dn;
  ConvGeometry g;
  bool wide = false, integer = false, vpu = false, depthwise = false, dwStream = false, implicit = false;
  bool filterGrad = false;  // a depthwise convolution's filter gradient, on the vector unit
  bool foreignEpilogue = false;  // an output fusion's epilogue this kernel cannot run
  int passes = 1;
  DepthwisePlan dwPlan;
  ImplicitConvPlan plan;
  FilterGradPlan fgPlan;
  int dst = -1;
  int64_t outCount = 0;
  double flops = 0;
  uint64_t hbmBytes = 0;
};

// The geometry in canonical terms; an error message when the attributes
// do not describe a convolution of these operands.
std::string ConvLowering::geometry() {
  const auto& a = in.attrs();
  const Shape& ls = in.operand(0)->shape();
  const Shape& ks = in.operand(1)->shape();
  const Shape& os = in.shape();
  g.rank = dn.inputSpatialDimensions.size();
  size_t r = g.rank;
  std::vector<hlo::WindowDimension> win =
      a.window ? a.window->dimensions : std::vector<hlo::WindowDimension>(r);
  if (win.size() != r || dn.kernelSpatialDimensions.size() != r || dn.outputSpatialDimensions.size() != r ||
      ls.rank() != static_cast<int64_t>(r + 2) || ks.rank() != static_cast<int64_t>(r + 2) ||
      os.rank() != static_cast<int64_t>(r + 2))
    return "llo-gen: convolution window and dim_labels do not match the operand ranks";
  g.batch = ls.dimension(dn.inputBatchDimension);
  g.inFeatures = ls.dimension(dn.inputFeatureDimension);
  g.outFeatures = ks.dimension(dn.kernelOutputFeatureDimension);
  g.featureGroups = a.featureGroupCount;
  g.batchGroups = a.batchGroupCount;
  if (g.featureGroups < 1 || g.batchGroups < 1 || (g.featureGroups > 1 && g.batchGroups > 1) ||
      g.inFeatures % g.featureGroups != 0 || g.outFeatures % g.featureGroups != 0 ||
      g.outFeatures % g.batchGroups != 0 || g.batch % g.batchGroups != 0 ||
      ks.dimension(dn.kernelInputFeatureDimension) * g.featureGroups != g.inFeatures)
    return "llo-gen: convolution feature/batch group counts do not match the operands";
  g.groups = std::max(g.featureGroups, g.batchGroups);
  g.inPerGroup = g.inFeatures / g.featureGroups;
  g.outPerGroup = g.outFeatures / g.groups;
  g.outBatch = g.batch / g.batchGroups;
  for (size_t d = 0; d < r; ++d) {
    const auto& w = win[d];
    if (w.stride < 1 || w.baseDilation < 1 || w.windowDilation < 1)
      return "llo-gen: convolution window strides and dilations must be positive";
    g.inSize.push_back(ls.dimension(dn.inputSpatialDimensions[d]));
    g.kSize.push_back(ks.dimension(dn.kernelSpatialDimensions[d]));
    g.outSize.push_back(os.dimension(dn.outputSpatialDimensions[d]));
    g.stride.push_back(w.stride);
    g.padLow.push_back(w.paddingLow);
    g.lhsDil.push_back(w.baseDilation);
    g.rhsDil.push_back(w.windowDilation);
    g.reversal.push_back(w.windowReversal);
    int64_t dilated = g.inSize[d] > 0 ? (g.inSize[d] - 1) * w.baseDilation + 1 : 0;
    g.padded.push_back(std::max<int64_t>(0, dilated + w.paddingLow + w.paddingHigh));
    g.taps *= g.kSize[d];
    g.outPositions *= g.outSize[d];
    // The last window of every output must lie inside X.
    if (g.outSize[d] > 0 &&
        (g.outSize[d] - 1) * w.stride + (g.kSize[d] - 1) * w.windowDilation >= g.padded[d])
      return fmt::format("llo-gen: convolution window of spatial dimension {} does not give the result size",
                         d);
  }
  if (os.dimension(dn.outputBatchDimension) != g.outBatch ||
      os.dimension(dn.outputFeatureDimension) != g.outFeatures)
    return "llo-gen: convolution result shape does not match the operands";
  return "";
}

// Which kernel runs the convolution.
void ConvLowering::choose() {
  const Shape& os = in.shape();
  const size_t r = g.rank;
  // Depthwise rows that do not fit VMEM (very long last spatial dimension)
  // take the MXU path, which tiles everything.
  depthwise = !vpu && g.inPerGroup == 1 && g.featureGroups > 1 && g.outPerGroup <= 8 && r >= 1 &&
              r - 1 <= static_cast<size_t>(std::max(0, target_.dma.descriptorDims)) &&
              depthwiseVmem(g, epilogue).end <= l_.vmemBudget();
  // matmulEpilogueFusion takes only convolutions of the MXU and depthwise
  // paths, the latter with no tile inputs.
  foreignEpilogue = epilogue && (vpu || (depthwise && !l_.depthwiseEpilogue(*epilogue)));
  // Depthwise with one output per group: the image streams through VMEM
  // (kernels/conv_depthwise.cpp), no padded copy in HBM.
  dwStream = depthwise && product(os.dimensions()) > 0 && g.batch > 0 && g.taps > 0 &&
             l_.depthwisePlan(in, g, epilogue, dwPlan);
  passes = dwStream || vpu ? 1 : l_.mxuPasses(in, g.inType, g.kType);
  // A depthwise convolution's filter gradient (one image per batch group,
  // channels minor): sums over positions of elementwise products, exact
  // f32 products on the vector unit (kernels/conv_filter_grad.cpp).
  filterGrad = !vpu && !depthwise && l_.options_.implicitConv && product(os.dimensions()) > 0 &&
               l_.filterGradPlan(in, g, epilogue, fgPlan);
  if (filterGrad) passes = 1;
  // Otherwise the implicit GEMM over channels-last windows in VMEM; grouped
  // convolutions in parts whose weights are block-diagonal. Depthwise ones
  // only with several outputs per group (with one, the row-box kernel is
  // faster: 1-D bf16 x 256 channels, 136 against 184 us) and where one bf16
  // MXU pass is exact (the vector unit's f32 products are).
  auto exactInBf16 = [](ElementType t) { return t != ElementType::F32 && t != ElementType::F16; };
  implicit = !vpu && !dwStream && !filterGrad &&
             (!depthwise || (g.outPerGroup > 1 && exactInBf16(g.inType) && exactInBf16(g.kType))) &&
             product(os.dimensions()) > 0 && g.inPerGroup * g.taps > 0 && g.batch > 0 &&
             l_.implicitConvPlan(in, g, epilogue, passes, plan);
  if (implicit) depthwise = false;
  if (depthwise && !dwStream) passes = 1;
}

// The kernels that stream the input through VMEM.
bool ConvLowering::streamed() {
  if (implicit) {
    if (g.featureGroups > 1)
      e_.comment(
          fmt::format("grouped: {} part(s) of {} group(s), {} -> {} channels each, weights block-diagonal",
                      plan.parts, plan.gpp, plan.C, plan.O));
    if (g.batchGroups > 1)
      e_.comment(
          fmt::format("batch groups: {} part(s) of {} group(s) of {} image(s), {} -> {} channels each, "
                      "weights block-diagonal",
                      plan.parts, plan.gpp, g.outBatch, plan.C, plan.O));
    if (g.groups == 1 && plan.parts > 1)
      e_.comment(fmt::format("output features in {} part(s) of {}: the weights do not fit VMEM at once",
                             plan.parts, plan.O));
    if (plan.loopParts) e_.comment("parts looped: one kernel copy, each part's offsets added at run time");
    bool ok = true;
    for (int64_t part = 0; part < (plan.loopParts ? 1 : plan.parts) && ok; ++part) {
      ImplicitConvPlan pp = plan;
      pp.part = part;
      ok = l_.emitImplicitConv(in, g, pp, epilogue);
    }
    l_.endKernel(flops, hbmBytes, plan.end);
    return ok && !failed_;
  }
  if (filterGrad) {
    bool ok = l_.emitFilterGrad(in, g, fgPlan);
    l_.endKernel(flops, hbmBytes, fgPlan.end);
    return ok && !failed_;
  }
  bool ok = l_.emitDepthwiseStream(in, g, dwPlan, epilogue);
  l_.endKernel(flops, hbmBytes, dwPlan.end);
  return ok && !failed_;
}

// X[N, P.., C]: the input transposed to channels-last, dilated and padded
// (the operand itself when it is that already); `holes`: positions the
// copy does not write (padding, dilation holes), which are zeroed.
int ConvLowering::paddedInput(int lhsBuf, bool& holes, bool& ok) {
  const Shape& ls = in.operand(0)->shape();
  const size_t r = g.rank;
  int es = typeInfo(g.inType).bytes;
  std::vector<int64_t> xDims = {g.batch};
  xDims.insert(xDims.end(), g.padded.begin(), g.padded.end());
  xDims.push_back(g.inFeatures);
  std::vector<int64_t> xs = byteStrides(xDims, es), ins = byteStrides(ls.dimensions(), es);
  bool canonical = dn.inputBatchDimension == 0 && dn.inputFeatureDimension == static_cast<int64_t>(r + 1);
  holes = false;
  for (size_t d = 0; d < r; ++d) {
    canonical = canonical && dn.inputSpatialDimensions[d] == static_cast<int64_t>(d + 1);
    holes = holes || padCopy(g.inSize[d], g.padLow[d], g.lhsDil[d], g.padded[d]).count != g.padded[d];
  }
  if (canonical && !holes && xDims == ls.dimensions()) return lhsBuf;
  int x = l_.tempBuf(g.inType, xDims);
  if (holes && !l_.fillZero(x, product(xDims), g.inType)) {
    ok = false;
    return x;
  }
  std::vector<int64_t> counts = {g.batch}, ss = {ins[static_cast<size_t>(dn.inputBatchDimension)]},
                       ds = {xs[0]};
  int64_t srcOff = 0, dstOff = 0;
  bool empty = false;
  for (size_t d = 0; d < r; ++d) {
    PadCopy pc = padCopy(g.inSize[d], g.padLow[d], g.lhsDil[d], g.padded[d]);
    empty = empty || pc.count == 0;
    int64_t is = ins[static_cast<size_t>(dn.inputSpatialDimensions[d])];
    counts.push_back(pc.count);
    ss.push_back(is);
    ds.push_back(xs[d + 1] * g.lhsDil[d]);
    srcOff += pc.first * is;
    dstOff += pc.at * xs[d + 1];
  }
  counts.push_back(g.inFeatures);
  ss.push_back(ins[static_cast<size_t>(dn.inputFeatureDimension)]);
  ds.push_back(es);
  if (!empty) l_.emitCopy(x, dstOff, lhsBuf, srcOff, counts, ds, ss, es);
  return x;
}

// Complex sums skip the products with padding, as the interpreter's
// direct loop does (one with zero can still change a sum: inf * 0 is NaN,
// and -0 + +0 is +0): where X's elements come from the input, 1.
int ConvLowering::validPositions(bool& ok) {
  const size_t r = g.rank;
  int validX = l_.tempBuf(ElementType::S32, g.padded);
  int one = l_.tempBuf(ElementType::S32, {1});
  if (!l_.fillZero(validX, product(g.padded), ElementType::S32) || !l_.storeWords(one, {"1"})) {
    ok = false;
    return validX;
  }
  std::vector<int64_t> vs = byteStrides(g.padded, 4), counts, ds, ss;
  int64_t dstOff = 0;
  for (size_t d = 0; d < r; ++d) {
    PadCopy pc = padCopy(g.inSize[d], g.padLow[d], g.lhsDil[d], g.padded[d]);
    counts.push_back(pc.count);
    ds.push_back(vs[d] * g.lhsDil[d]);
    ss.push_back(0);
    dstOff += pc.at * vs[d];
  }
  l_.emitCopy(validX, dstOff, one, 0, counts, ds, ss, 4);  // nothing when a count is 0
  return validX;
}

// The kernels over a temporary in HBM: say why, in the code and in the
// kernel's --stats row.
bool ConvLowering::unstreamed() {
  const std::string why = unstreamedReason(g, wide, integer, depthwise, passes, l_.options_.implicitConv);
  e_.comment("not streamed: " + why);
  int lhsBuf = leaves_[in.operand(0)][0];
  if (vpu) {
    ElementType acc = wide ? g.outType : ElementType::S32;
    lhsBuf = l_.accumulatorCopy(in, lhsBuf, in.operand(0)->shape(), acc);
    g.inType = acc;
  }
  bool holes = false, ok = true;
  int x = paddedInput(lhsBuf, holes, ok);
  if (!ok) return false;
  int validX = -1;
  if (vpu && typeInfo(g.inType).isComplex && holes) {
    validX = validPositions(ok);
    if (!ok) return false;
  }
  ok = vpu         ? l_.emitWideConv(in, g, x, validX)
       : depthwise ? l_.emitDepthwiseConv(in, g, x, epilogue)
                   : l_.emitConvMatmul(in, g, x, passes, epilogue);
  l_.endKernel(flops, hbmBytes, depthwise ? depthwiseVmem(g, epilogue).end : 0);
  if (l_.residentDepth_ == 0 && !l_.stats_.kernels.empty()) l_.stats_.kernels.back().remark = why;
  return ok && !failed_;
}

bool ConvLowering::run() {
  const Shape& ls = in.operand(0)->shape();
  const Shape& ks = in.operand(1)->shape();
  const Shape& os = in.shape();
  g.inType = ls.elementType();
  g.kType = ks.elementType();
  g.outType = os.elementType();
  wide = isWideType(g.inType) || isWideType(g.kType) || isWideType(g.outType);
  // The interpreter converts both operands to the type it computes in
  // (dotComputeType). A 64-bit or complex result computes in its own type,
  // on the vector unit below (narrower operands converted first); other
  // results of 64-bit or complex operands take the ordinary paths once the
  // operands are converted.
  if (wide && !isWideType(dotComputeType(g.outType)))
    return l_.lowerThroughComputeType(in, dotComputeType(g.outType));
  // Integer convolutions sum in s32 on the vector unit, like integer dots.
  auto isInteger = [](ElementType t) {
    return !typeInfo(t).isFloat && t != ElementType::Pred && !typeInfo(t).isComplex;
  };
  integer = !wide && isInteger(g.inType) && isInteger(g.kType) && isInteger(g.outType);
  const bool mixed =
      !wide && !integer &&
      (!typeInfo(g.inType).isFloat || !typeInfo(g.kType).isFloat || !typeInfo(g.outType).isFloat);
  // Mixed kinds compute in the result's type, as the interpreter does (a
  // pred result: an or of ands, which skips padding like any sum of zeros).
  const ElementType ct = dotComputeType(g.outType);
  if (mixed && (ct == ElementType::Pred || g.inType != ct || g.kType != ct))
    return l_.lowerThroughComputeType(in, ct);
  if (mixed)
    return l_.fail(
        in, fmt::format("llo-gen: convolution {} x {} -> {} mixes element kinds, which is not supported",
                        hlo::elementTypeName(g.inType), hlo::elementTypeName(g.kType),
                        hlo::elementTypeName(g.outType)));
  vpu = wide || integer;
  if (std::string err = geometry(); !err.empty()) return l_.fail(in, err);
  choose();
  if (foreignEpilogue) return l_.fail(in, "llo-gen: internal error: not an output fusion's convolution");
  // Physical-edges' convolutions read and write tiled arrays through their
  // layouts, which only the implicit GEMM's DMAs do.
  const bool physical = (epilogue && epilogue->physicalOut) || in.operand(0)->opcode() == Opcode::Bitcast;
  if (physical && !implicit)
    return l_.fail(in,
                   "llo-gen: internal error: a convolution over physical tiles must take the implicit GEMM");
  if (epilogue)
    l_.beginKernel(*epilogue->fusion, "fusion-conv");
  else
    l_.beginKernel(in, vpu         ? "conv-vpu"
                       : depthwise ? "conv-depthwise"
                       : implicit  ? "conv-implicit"
                       : filterGrad ? "conv-filter-grad"
                                   : "conv-matmul");
  dst = epilogue ? epilogue->outBuf : leaves_[&in][0];
  outCount = product(os.dimensions());
  flops = 2.0 * static_cast<double>(outCount) * static_cast<double>(g.inPerGroup * g.taps) * passes;
  hbmBytes =
      bufs_[leaves_[in.operand(0)][0]].bytes + bufs_[leaves_[in.operand(1)][0]].bytes + bufs_[dst].bytes;
  if (epilogue) {
    for (const MatmulEpilogue::Input& input : epilogue->inputs) hbmBytes += bufs_[input.buf].bytes;
    flops += static_cast<double>(outCount) * static_cast<double>(epilogue->comp->instructionCount());
  }
  if (outCount == 0) {
    l_.endKernel(0, 0, 0);
    return true;
  }
  if (g.inPerGroup * g.taps == 0 || g.batch == 0) {
    bool ok = l_.fillZero(dst, outCount, g.outType);
    l_.endKernel(0, bufs_[dst].bytes, 0);
    return ok && !failed_;
  }
  if (implicit || dwStream || filterGrad) return streamed();
  return unstreamed();
}

int64_t ConvGeometry::appendKernelTaps(const std::vector<int64_t>& kst,
                                       const std::vector<int64_t>& kernelSpatialDimensions,
                                       std::vector<int64_t>& counts, std::vector<int64_t>& strides) const {
  int64_t first = 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t st = kst[static_cast<size_t>(kernelSpatialDimensions[d])];
    counts.push_back(kSize[d]);
    if (reversal[d]) {
      first += (kSize[d] - 1) * st;
      st = -st;
    }
    strides.push_back(st);
  }
  return first;
}

VReg Lowerer::convValueInOwnType(VReg acc, ElementType t, std::vector<VReg>& owned) {
  if (t == ElementType::F32) return acc;
  VReg v = valloc(t);
  e_.op("vmov.s32 {}, {}", V(v), V(acc));
  owned.push_back(normalize(v));
  return owned.back();
}

bool Lowerer::lowerConvolution(const Instruction& in, const MatmulEpilogue* epilogue) {
  if (!in.attrs().convDims) return fail(in, "llo-gen: convolution without dim_labels");
  return ConvLowering(*this, in, epilogue).run();
}

// im2col: A[G, M, (taps, Cg)] x W[G, (taps, Cg), Og] on the MXUs, M the
// output batch and positions; then the result columns are scattered into
// the output layout (and rounded if it is bf16).
bool Lowerer::emitConvMatmul(const Instruction& in, const ConvGeometry& g, int xBuf, int passes,
                             const MatmulEpilogue* epilogue) {
  const auto& dn = *in.attrs().convDims;
  const Shape& ks = in.operand(1)->shape();
  const Shape& os = in.shape();
  size_t r = g.rank;
  int es = typeInfo(g.inType).bytes, ew = typeInfo(g.kType).bytes;
  int64_t kk = g.taps * g.inPerGroup, m = g.outBatch * g.outPositions;
  int64_t kp = roundUp(kk, 128), np = roundUp(g.outPerGroup, 128);
  // Large M is padded to 128 rows so emitMatmul can take tall M tiles.
  int64_t mp = m <= 512 ? roundUp(m, 8) : roundUp(m, 128);
  // X may be the operand's buffer itself, whose recorded dims can be those
  // of a reshape's operand: use the geometry's.
  std::vector<int64_t> xDims = {g.batch};
  xDims.insert(xDims.end(), g.padded.begin(), g.padded.end());
  xDims.push_back(g.inFeatures);
  std::vector<int64_t> xs = byteStrides(xDims, es);
  std::vector<int64_t> outS = rowMajorStrides(g.outSize), tapS = rowMajorStrides(g.kSize);

  // A: a 1x1 stride-1 window over an unpadded canonical input is X itself.
  bool identity = g.groups == 1 && g.taps == 1 && kp == kk && mp == m;
  for (size_t d = 0; d < r; ++d) identity = identity && g.stride[d] == 1 && g.padded[d] == g.outSize[d];
  int aBuf = xBuf;
  if (!identity) {
    aBuf = tempBuf(g.inType, {g.groups, mp, kp});
    if (kp != kk) {
      // Only the K padding must be zero (rows beyond M are never read back).
      int z = tempBuf(g.inType, {kp - kk});
      if (!fillZero(z, kp - kk, g.inType)) return false;
      emitCopy(aBuf, kk * es, z, 0, {g.groups * mp, kp - kk}, {kp * es, es}, {0, es}, es);
    }
    std::vector<int64_t> counts = {g.groups, g.outBatch}, ss, ds = {mp * kp * es, g.outPositions * kp * es};
    ss.push_back(g.featureGroups > 1 ? g.inPerGroup * es : g.outBatch * xs[0]);
    ss.push_back(xs[0]);
    for (size_t d = 0; d < r; ++d) {
      counts.push_back(g.outSize[d]);
      ss.push_back(g.stride[d] * xs[d + 1]);
      ds.push_back(outS[d] * kp * es);
    }
    for (size_t d = 0; d < r; ++d) {
      counts.push_back(g.kSize[d]);
      ss.push_back(g.rhsDil[d] * xs[d + 1]);
      ds.push_back(tapS[d] * g.inPerGroup * es);
    }
    counts.push_back(g.inPerGroup);
    ss.push_back(es);
    ds.push_back(es);
    emitCopy(aBuf, 0, xBuf, 0, counts, ds, ss, es);
  }

  // W[G, (taps, Cg), Og] from the kernel; reversal reads taps backwards.
  int wBuf = tempBuf(g.kType, {g.groups, kp, np});
  if ((kp != kk || np != g.outPerGroup) && !fillZero(wBuf, g.groups * kp * np, g.kType)) return false;
  {
    std::vector<int64_t> kst = byteStrides(ks.dimensions(), ew);
    int64_t ko = kst[static_cast<size_t>(dn.kernelOutputFeatureDimension)];
    std::vector<int64_t> counts = {g.groups}, ss = {g.outPerGroup * ko}, ds = {kp * np * ew};
    int64_t srcOff = g.appendKernelTaps(kst, dn.kernelSpatialDimensions, counts, ss);
    for (size_t d = 0; d < r; ++d) ds.push_back(tapS[d] * g.inPerGroup * np * ew);
    counts.push_back(g.inPerGroup);
    ss.push_back(kst[static_cast<size_t>(dn.kernelInputFeatureDimension)]);
    ds.push_back(np * ew);
    counts.push_back(g.outPerGroup);
    ss.push_back(ko);
    ds.push_back(ew);
    emitCopy(wBuf, 0, leaves_[in.operand(1)][0], srcOff, counts, ds, ss, ew);
  }

  // An output fusion's epilogue finishes each C tile in VMEM and writes the
  // valid part of it into the (channels-last) result.
  if (epilogue)
    return emitMatmul(in, g.groups, mp, kp, np, aBuf, g.inType, wBuf, g.kType, -1, passes, epilogue);
  // C[G, mp, np] f32, written straight into the output when it is already
  // f32 [N, out.., O] with nothing padded.
  bool outCanonical =
      dn.outputBatchDimension == 0 && dn.outputFeatureDimension == static_cast<int64_t>(r + 1);
  for (size_t d = 0; d < r; ++d)
    outCanonical = outCanonical && dn.outputSpatialDimensions[d] == static_cast<int64_t>(d + 1);
  int dst = leaves_[&in][0];
  bool direct =
      outCanonical && g.groups == 1 && mp == m && np == g.outPerGroup && g.outType == ElementType::F32;
  int cBuf = direct ? dst : tempBuf(ElementType::F32, {g.groups, mp, np});
  if (!emitMatmul(in, g.groups, mp, kp, np, aBuf, g.inType, wBuf, g.kType, cBuf, passes)) return false;
  if (direct) return !failed_;

  bool f32Out = g.outType == ElementType::F32;
  int of = f32Out ? dst : tempBuf(ElementType::F32, os.dimensions());
  std::vector<int64_t> ost = byteStrides(os.dimensions(), 4);
  int64_t oFeat = ost[static_cast<size_t>(dn.outputFeatureDimension)];
  std::vector<int64_t> counts = {g.groups, g.outBatch}, ss = {mp * np * 4, g.outPositions * np * 4},
                       ds = {g.outPerGroup * oFeat, ost[static_cast<size_t>(dn.outputBatchDimension)]};
  for (size_t d = 0; d < r; ++d) {
    counts.push_back(g.outSize[d]);
    ss.push_back(outS[d] * np * 4);
    ds.push_back(ost[static_cast<size_t>(dn.outputSpatialDimensions[d])]);
  }
  counts.push_back(g.outPerGroup);
  ss.push_back(4);
  ds.push_back(oFeat);
  emitCopy(of, 0, cBuf, 0, counts, ds, ss, 4);
  if (f32Out) return !failed_;
  ElementType ot = g.outType;
  return emitElementwise(product(os.dimensions()), {EwInput{EwInput::Full, of, 0, ElementType::F32}},
                         {EwOutput{dst, 0, ot}}, [&](const std::vector<VReg>& v) {
                           // Round once, straight to the result type: through
                           // bf16 first, f16 would lose bits and f8 round twice.
                           VReg t = valloc(ot);
                           e_.op("vrnd.{} {}, {}", typeInfo(ot).dtype, V(t), V(v[0]));
                           return std::vector<VReg>{t};
                         });
}

// Depthwise (one input feature per group, few outputs per group) on the
// vector unit. An output row is every dimension but the last spatial one
// and the channels. For each (output-per-group o, row), the box of X the
// row's windows cover is DMAed into VMEM (double-buffered); then for each
// `unroll` blocks of 8 positions x 128 channels, the taps are folded into
// independent f32 registers: acc += x[pos * stride + tap] * w[o, tap, :]
// (8 positions per load with the conv stride as the sublane stride, the
// weight row a stride-0 broadcast load), and the row is DMAed out into the
// output layout while the next one computes. The kernel's phases and the
// state they share:
class DepthwiseRowEmitter : KernelPhases {
 public:
  DepthwiseRowEmitter(Lowerer& l, const Instruction& in, const ConvGeometry& g, int xBuf,
                      const MatmulEpilogue* epilogue)
      : KernelPhases(l, in), g(g), xBuf(xBuf), epilogue(epilogue), dn(*in.attrs().convDims) {}
  bool run();

 private:
  bool weights();
  void descriptors();
  void registers();
  void addresses(int item, bool dstToo);
  void loadBox(int slotReg);
  void loadWeights();
  void itemStart();
  void blockAddresses();
  void taps();
  bool blockStores();
  void itemEnd();

  const ConvGeometry& g;
  const int xBuf;
  const MatmulEpilogue* epilogue;
  const hlo::ConvolutionDimensionNumbers& dn;
  size_t r = 0;
  int64_t c = 0, cp = 0, og = 0;
  ElementType storedType = ElementType::F32;  // an output fusion stores its epilogue's result
  int es = 0, ew = 0, eo = 0;
  std::vector<int64_t> xs, tapS, bs, ost;
  int wd = -1, dst = -1;
  int64_t sLast = 1, rowPos = 0, rows = 0, cBlocks = 0, oFeat = 0, items = 0, u = 1, posBytes = 0;
  DepthwiseVmem vm;
  uint64_t vW = 0, vBox = 0, vAcc = 0;
  std::string dWt, dBox, dOut;
  int rQ = -1, rSlot = -1, rNext = -1, rO = -1, rT = -1, rR = -1, rSrc = -1, rDst = -1, rBox = -1, rAcc = -1,
      rB = -1, rCb = -1, rXb = -1, rW = -1, rTmp = -1;
  std::vector<int> rX, rCnt;
  std::vector<int64_t> rowDims, srcStep, dstStep;
  std::map<const Instruction*, VReg> scalars;
  std::string lItem, lCompute, lB, lCb, lNoWait;
  std::vector<VReg> acc;
};

// Weights Wd[og, taps, cp]: channel lanes, zero beyond C.
bool DepthwiseRowEmitter::weights() {
  const Shape& ks = in.operand(1)->shape();
  wd = l_.tempBuf(g.kType, {og, g.taps, cp});
  if (cp != c && !l_.fillZero(wd, og * g.taps * cp, g.kType)) return false;
  std::vector<int64_t> kst = byteStrides(ks.dimensions(), ew);
  int64_t ko = kst[static_cast<size_t>(dn.kernelOutputFeatureDimension)];
  std::vector<int64_t> counts = {og}, ss = {ko}, ds = {g.taps * cp * ew};
  int64_t srcOff = g.appendKernelTaps(kst, dn.kernelSpatialDimensions, counts, ss);
  for (size_t d = 0; d < r; ++d) ds.push_back(tapS[d] * cp * ew);
  counts.push_back(c);
  ss.push_back(og * ko);
  ds.push_back(ew);
  l_.emitCopy(wd, 0, leaves_[in.operand(1)][0], srcOff, counts, ds, ss, ew);
  return true;
}

// The VMEM box of one row: [Keff_0 .. Keff_{r-2}, P_{r-1}, C]; the
// descriptors of the weights (once), the row box and the row out.
void DepthwiseRowEmitter::descriptors() {
  const Shape& os = in.shape();
  size_t last = r - 1;
  sLast = g.stride[last];
  rowPos = g.outSize[last];
  rows = g.outBatch;
  for (size_t d = 0; d + 1 < r; ++d) rows *= g.outSize[d];
  std::vector<int64_t> boxDims;
  for (size_t d = 0; d + 1 < r; ++d) boxDims.push_back((g.kSize[d] - 1) * g.rhsDil[d] + 1);
  boxDims.push_back(g.padded[last]);
  boxDims.push_back(c);
  bs = byteStrides(boxDims, es);
  cBlocks = cp / 128;
  vm = depthwiseVmem(g, epilogue);
  vW = 0;
  vBox = vm.box;
  vAcc = vm.acc;
  dWt = e_.desc(static_cast<uint64_t>(og * g.taps * cp * ew), {});
  std::vector<Emitter::Dim> boxD;
  for (size_t d = 0; d + 1 < r; ++d)
    if (boxDims[d] > 1) boxD.push_back({boxDims[d], xs[d + 1], bs[d]});
  dBox = e_.desc(static_cast<uint64_t>(boxDims[r - 1] * c * es), boxD);
  ost = byteStrides(os.dimensions(), eo);
  oFeat = ost[static_cast<size_t>(dn.outputFeatureDimension)];
  int64_t oPos = ost[static_cast<size_t>(dn.outputSpatialDimensions[last])];
  if (og * oFeat == eo && oPos == c * eo && cp == c)
    dOut = e_.desc(static_cast<uint64_t>(rowPos * c * eo), {});
  else if (og * oFeat == eo)
    dOut = e_.desc(static_cast<uint64_t>(c * eo), {{rowPos, cp * eo, oPos}});
  else
    dOut = e_.desc(static_cast<uint64_t>(eo), {{rowPos, cp * eo, oPos}, {c, eo, og * oFeat}});
}

// Work item q = (o, row) in 0 .. og * rows; slot q & 1 of the box and
// result areas. The box of q + 1 is loaded while q computes; the results
// of q are stored while q + 1 computes (sem0/1 loads, sem2/3 stores).
void DepthwiseRowEmitter::registers() {
  dst = epilogue ? epilogue->outBuf : leaves_[&in][0];
  items = og * rows;
  for (int* reg :
       {&rQ, &rSlot, &rNext, &rO, &rT, &rR, &rSrc, &rDst, &rBox, &rAcc, &rB, &rCb, &rXb, &rW, &rTmp})
    *reg = sreg();
  rX.assign(r, -1);
  rCnt.assign(r, -1);
  for (size_t d = 0; d < r; ++d) {
    rX[d] = sreg();
    rCnt[d] = sreg();
  }
  // Item -> (o, n, y_0 .. y_{r-2}) -> source (X) and destination offsets.
  rowDims = {g.outBatch};
  for (size_t d = 0; d + 1 < r; ++d) rowDims.push_back(g.outSize[d]);
  srcStep = {xs[0]};
  dstStep = {ost[static_cast<size_t>(dn.outputBatchDimension)]};
  for (size_t d = 0; d + 1 < r; ++d) {
    srcStep.push_back(g.stride[d] * xs[d + 1]);
    dstStep.push_back(ost[static_cast<size_t>(dn.outputSpatialDimensions[d])]);
  }
}

void DepthwiseRowEmitter::addresses(int item, bool dstToo) {
  e_.op("srem {}, {}, {}", S(rT), S(item), rows);
  e_.op("smov {}, {}", S(rSrc), base(xBuf));
  if (dstToo) {
    e_.op("sdiv {}, {}, {}", S(rDst), S(item), rows);
    e_.op("smul {}, {}, {}", S(rDst), S(rDst), oFeat);
    e_.op("sadd {}, {}, {}", S(rDst), S(rDst), base(dst));
  }
  for (size_t j = rowDims.size(); j-- > 0;) {
    if (j > 0) {
      e_.op("srem {}, {}, {}", S(rR), S(rT), rowDims[j]);
      e_.op("sdiv {}, {}, {}", S(rT), S(rT), rowDims[j]);
    } else {
      e_.op("smov {}, {}", S(rR), S(rT));
    }
    e_.op("smul {}, {}, {}", S(rTmp), S(rR), srcStep[j]);
    e_.op("sadd {}, {}, {}", S(rSrc), S(rSrc), S(rTmp));
    if (dstToo) {
      e_.op("smul {}, {}, {}", S(rTmp), S(rR), dstStep[j]);
      e_.op("sadd {}, {}, {}", S(rDst), S(rDst), S(rTmp));
    }
  }
}

void DepthwiseRowEmitter::loadBox(int slotReg) {
  e_.op("smul {}, {}, {}", S(rBox), S(slotReg), vm.boxSlot);
  e_.op("sadd {}, {}, {}", S(rBox), S(rBox), vBox);
  e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", xBuf), dBox, S(rBox), l_.memRef(xBuf, S(rSrc)),
        S(slotReg));
}

// The weights; an epilogue's columns as [og, cp]: output channel c * og
// + o of a bias is lane c of row o, read by the work items of o. All on
// sem0.
void DepthwiseRowEmitter::loadWeights() {
  e_.op("smov {}, {}", S(rT), base(wd));
  e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", wd), dWt, vW, l_.memRef(wd, S(rT)));
  int columnLoads = 0;
  if (epilogue) {
    int smem = 0;
    for (size_t j = 0; j < epilogue->inputs.size(); ++j) {
      const MatmulEpilogue::Input& input = epilogue->inputs[j];
      if (input.kind == MatmulEpilogue::Scalar) {
        scalars[input.value] = l_.splatScalar(input.buf, input.type, smem++);
        continue;
      }
      int ei = typeInfo(input.type).bytes;
      std::string d = e_.desc(static_cast<uint64_t>(ei), {{og, ei, cp * ei}, {c, og * ei, ei}});
      e_.op("smov {}, {}", S(rT), base(input.buf));
      e_.op("{} {}, [{}], {}, sem0", l_.dmaOp("h2v", input.buf), d, vm.columns[j],
            l_.memRef(input.buf, S(rT)));
      ++columnLoads;
    }
  }
  if (columnLoads)
    e_.op("sem.wait sem0, {}", 1 + columnLoads);
  else
    e_.op("sem.wait sem0");
}

// The item loop's head: the next item's box into the other slot, the
// waits for this one's and for its result slot, the slot bases.
void DepthwiseRowEmitter::itemStart() {
  lItem = e_.newLabel("dwrow");
  lCompute = e_.newLabel("dwcompute");
  lB = e_.newLabel("dwpos");
  lCb = e_.newLabel("dwchan");
  lNoWait = e_.newLabel("dwfree");
  e_.op("smov {}, 0", S(rQ));
  e_.op("smov {}, 0", S(rSlot));
  addresses(rQ, false);
  loadBox(rSlot);
  e_.label(lItem);
  e_.op("sand {}, {}, 1", S(rSlot), S(rQ));
  e_.op("sadd {}, {}, 1", S(rNext), S(rQ));
  e_.op("br.ge {}, {}, {}", S(rNext), items, lCompute);
  addresses(rNext, false);
  e_.op("sxor {}, {}, 1", S(rT), S(rSlot));
  loadBox(rT);
  e_.label(lCompute);
  e_.op("sem.wait sem[{}]", S(rSlot));
  // The result slot was last stored from by item q - 2.
  e_.op("br.lt {}, 2, {}", S(rQ), lNoWait);
  e_.op("sadd {}, {}, 2", S(rT), S(rSlot));
  e_.op("sem.wait sem[{}]", S(rT));
  e_.label(lNoWait);
  e_.op("smul {}, {}, {}", S(rBox), S(rSlot), vm.boxSlot);
  e_.op("sadd {}, {}, {}", S(rBox), S(rBox), vBox);
  e_.op("smul {}, {}, {}", S(rAcc), S(rSlot), vm.accSlot);
  e_.op("sadd {}, {}, {}", S(rAcc), S(rAcc), vAcc);
  e_.op("sdiv {}, {}, {}", S(rO), S(rQ), rows);
}

// Groups of `unroll` blocks of 8 output positions x 128 channels: the
// accumulators and the block's box and weight addresses.
void DepthwiseRowEmitter::blockAddresses() {
  u = vm.unroll;
  posBytes = 8 * sLast * c * es;
  e_.op("smov {}, 0", S(rB));
  e_.label(lB);
  e_.op("smov {}, 0", S(rCb));
  e_.label(lCb);
  acc.clear();
  for (int64_t j = 0; j < u; ++j) acc.push_back(l_.vconst(ElementType::F32, 0));
  e_.op("smul {}, {}, {}", S(rXb), S(rB), u * posBytes);
  e_.op("smul {}, {}, {}", S(rTmp), S(rCb), 128 * es);
  e_.op("sadd {}, {}, {}", S(rXb), S(rXb), S(rTmp));
  e_.op("sadd {}, {}, {}", S(rXb), S(rXb), S(rBox));
  e_.op("smul {}, {}, {}", S(rW), S(rO), g.taps * cp * ew);
  e_.op("smul {}, {}, {}", S(rTmp), S(rCb), 128 * ew);
  e_.op("sadd {}, {}, {}", S(rW), S(rW), S(rTmp));
  e_.op("sadd {}, {}, {}", S(rW), S(rW), vW);
}

// Taps as nested counted loops, one per spatial dimension (row-major, the
// order of Wd).
void DepthwiseRowEmitter::taps() {
  std::vector<std::string> lTap(r);
  for (size_t d = 0; d < r; ++d) {
    e_.op("smov {}, {}", S(rX[d]), S(d == 0 ? rXb : rX[d - 1]));
    e_.op("smov {}, {}", S(rCnt[d]), g.kSize[d]);
    lTap[d] = e_.newLabel("dwtap");
    e_.label(lTap[d]);
  }
  {
    // All loads first, in distinct registers, so they issue back to back
    // and the multiply-adds do not wait on one another's operands.
    VReg wv = l_.vload(g.kType, S(rW), ", 0");
    std::vector<VReg> xv;
    for (int64_t j = 0; j < u; ++j)
      xv.push_back(l_.vload(g.inType, fmt::format("{} + {}", S(rX[r - 1]), j * posBytes),
                            fmt::format(", {}", sLast * c * es)));
    for (size_t j = 0; j < xv.size(); ++j) {
      e_.op("vfma.f32 {}, {}, {}, {}", V(acc[j]), V(xv[j]), V(wv), V(acc[j]));
      vfree(xv[j]);
    }
    vfree(wv);
    e_.op("sadd {}, {}, {}", S(rW), S(rW), cp * ew);
  }
  for (size_t d = r; d-- > 0;) {
    int64_t step = d + 1 == r ? g.rhsDil[d] * c * es : g.rhsDil[d] * bs[d];
    e_.op("sadd {}, {}, {}", S(rX[d]), S(rX[d]), step);
    e_.op("loop {}, {}", S(rCnt[d]), lTap[d]);
  }
}

// The blocks' accumulators through the epilogue into the row's results.
bool DepthwiseRowEmitter::blockStores() {
  e_.op("smul {}, {}, {}", S(rTmp), S(rB), u * 8 * cp * eo);
  e_.op("smul {}, {}, {}", S(rR), S(rCb), 128 * eo);
  e_.op("sadd {}, {}, {}", S(rTmp), S(rTmp), S(rR));
  e_.op("sadd {}, {}, {}", S(rTmp), S(rTmp), S(rAcc));
  for (int64_t j = 0; j < u; ++j) {
    VReg result = acc[static_cast<size_t>(j)];
    std::map<const Instruction*, VReg> val = scalars;
    std::vector<VReg> owned;
    if (epilogue) {
      // The convolution's value in its own type, then the fused instructions.
      val[epilogue->dot] = l_.convValueInOwnType(result, g.outType, owned);
      for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
        const MatmulEpilogue::Input& input = epilogue->inputs[k];
        if (input.kind != MatmulEpilogue::Column) continue;
        int ei = typeInfo(input.type).bytes;
        // Row o, channel block rCb of the column (a stride-0 load repeats it).
        e_.op("smul {}, {}, {}", S(rR), S(rO), cp * ei);
        e_.op("sadd {}, {}, {}", S(rR), S(rR), vm.columns[k]);
        e_.op("smul {}, {}, {}", S(rXb), S(rCb), 128 * ei);
        e_.op("sadd {}, {}, {}", S(rR), S(rR), S(rXb));
        owned.push_back(l_.vload(input.type, S(rR), ", 0"));
        val[input.value] = owned.back();
      }
      if (!l_.evalOnRegisters(*epilogue->comp, nullptr, val, owned)) return false;
      result = val[epilogue->comp->root()];
    }
    l_.vstore(result, storedType, fmt::format("{} + {}", S(rTmp), j * 8 * cp * eo),
              fmt::format(", {}", cp * eo));
    std::set<int> freed = {acc[static_cast<size_t>(j)].r};
    vfree(acc[static_cast<size_t>(j)]);
    for (VReg v : owned)
      if (freed.insert(v.r).second) vfree(v);
  }
  return true;
}

// The loops over channel and position blocks close; the row out; the
// item loop closes and the last two rows' stores are waited for.
void DepthwiseRowEmitter::itemEnd() {
  e_.op("sadd {}, {}, 1", S(rCb), S(rCb));
  e_.op("br.lt {}, {}, {}", S(rCb), cBlocks, lCb);
  e_.op("sadd {}, {}, 1", S(rB), S(rB));
  e_.op("br.lt {}, {}, {}", S(rB), vm.groups, lB);
  addresses(rQ, true);
  e_.op("sadd {}, {}, 2", S(rT), S(rSlot));
  e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", dst), dOut, l_.memRef(dst, S(rDst)), S(rAcc), S(rT));
  e_.op("sadd {}, {}, 1", S(rQ), S(rQ));
  e_.op("br.lt {}, {}, {}", S(rQ), items, lItem);
  e_.op("sem.wait sem{}", 2 + ((items - 1) & 1));
  if (items >= 2) e_.op("sem.wait sem{}", 2 + ((items - 2) & 1));
}

bool DepthwiseRowEmitter::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  r = g.rank;
  c = g.inFeatures;
  cp = roundUp(c, 128);
  og = g.outPerGroup;
  storedType = epilogue ? epilogue->outType : g.outType;
  es = typeInfo(g.inType).bytes;
  ew = typeInfo(g.kType).bytes;
  eo = typeInfo(storedType).bytes;
  // X may be the operand's buffer itself, whose recorded dims can be those
  // of a reshape's operand: use the geometry's.
  std::vector<int64_t> xDims = {g.batch};
  xDims.insert(xDims.end(), g.padded.begin(), g.padded.end());
  xDims.push_back(g.inFeatures);
  xs = byteStrides(xDims, es);
  tapS = rowMajorStrides(g.kSize);
  if (!weights()) return false;
  descriptors();
  registers();
  loadWeights();
  itemStart();
  blockAddresses();
  taps();
  if (!blockStores()) return false;
  itemEnd();
  for (auto& [inst, v] : scalars) vfree(v);
  return !failed_;
}

bool Lowerer::emitDepthwiseConv(const Instruction& in, const ConvGeometry& g, int xBuf,
                                const MatmulEpilogue* epilogue) {
  return DepthwiseRowEmitter(*this, in, g, xBuf, epilogue).run();
}

}  // namespace tpu::codegen
