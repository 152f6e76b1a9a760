// Depthwise convolution streamed through VMEM (one input and one output
// feature per group, two spatial dimensions). The image of one batch
// element is DMAed straight from the operand into a zero-padded VMEM copy,
// in bands of rows issued together so the first band computes while the
// others land; nothing is written to HBM but the result. Each VMEM row holds
// the last dimension's stride phases one after the other (position i in
// run i % stride at i / stride), so the windows of consecutive outputs are
// consecutive in memory whatever the stride. Channels are the lanes; with
// fewer than 128 of them (a divisor of 128) `pack` consecutive positions
// share a lane row, so every lane works. For each output row the taps are
// multiply-added on the vector unit into independent f32 accumulators
// (weights held in registers across a band), the fused epilogue is applied,
// and the row is stored into a VMEM copy of the result that is DMAed out a
// band at a time while the next band computes.
#include <fmt/format.h>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUpTo(int64_t v, int64_t a) { return ceilDiv(v, a) * a; }

// Float types a vector load widens and a vector store narrows.
bool streamable(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.isFloat && !ti.isComplex && ti.bytes <= 4 && !isWideType(t);
}

}  // namespace

bool Lowerer::depthwisePlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue,
                            DepthwisePlan& p) const {
  (void)in;
  if (g.rank != 2 || g.inPerGroup != 1 || g.outPerGroup != 1 || g.featureGroups != g.inFeatures ||
      g.batchGroups != 1)
    return false;
  const ElementType stored = epilogue ? epilogue->outType : g.outType;
  if (!streamable(g.inType) || !streamable(g.kType) || !streamable(g.outType)) return false;
  TypeInfo st = typeInfo(stored);
  if (st.isComplex || isWideType(stored) || st.bytes > 4) return false;
  for (size_t d = 0; d < 2; ++d)
    if (g.lhsDil[d] != 1 || g.reversal[d] || g.padLow[d] < 0 || g.padded[d] < g.inSize[d] + g.padLow[d])
      return false;
  p.N = g.batch;
  p.H = g.inSize[0];
  p.W = g.inSize[1];
  p.C = g.inFeatures;
  p.KH = g.kSize[0];
  p.KW = g.kSize[1];
  p.sH = g.stride[0];
  p.sW = g.stride[1];
  p.dH = g.rhsDil[0];
  p.dW = g.rhsDil[1];
  p.padTop = g.padLow[0];
  p.padLeft = g.padLow[1];
  p.Hp = g.padded[0];
  p.Wp = g.padded[1];
  p.Ho = g.outSize[0];
  p.Wo = g.outSize[1];
  if (p.N <= 0 || p.H <= 0 || p.W <= 0 || p.Ho <= 0 || p.Wo <= 0 || p.KH <= 0 || p.KW <= 0) return false;
  const int64_t es = typeInfo(g.inType).bytes, ew = typeInfo(g.kType).bytes, eo = st.bytes;
  p.pack = p.C < 128 && 128 % p.C == 0 ? 128 / p.C : 1;
  p.cpos = p.pack > 1 ? p.C : roundUpTo(p.C, 128);
  p.cBlocks = p.pack > 1 ? 1 : p.cpos / 128;
  p.Q = ceilDiv(p.Wp, p.sW);
  p.rowIn = static_cast<uint64_t>(p.sW * p.Q * p.cpos * es);
  const int64_t span = 8 * p.pack;  // output positions per register
  p.blocks = ceilDiv(p.Wo, span);
  p.groups = ceilDiv(p.blocks, 8);
  p.unroll = ceilDiv(p.blocks, p.groups);
  p.rowOut = static_cast<uint64_t>(p.Wo * p.cpos * eo);
  p.zero = p.Hp != p.H || p.Wp != p.W;
  const int64_t taps = p.KH * p.KW;
  p.weightsInRegisters = taps <= 16;
  const int64_t lanes = p.pack > 1 ? 128 : p.cpos;
  p.wRow = static_cast<uint64_t>(lanes * ew);
  p.bands = std::min<int64_t>(p.Ho, 8);
  // Rows per loop iteration: at least 6 independent accumulators (a
  // tap's multiply-add waits for the previous one's), bands whole
  // iterations; the last iteration may compute rows past the band (into
  // the next band's rows, rewritten when it computes, or the slack).
  p.rows = std::clamp<int64_t>(ceilDiv(6, p.unroll), 1, std::max<int64_t>(1, 8 / p.unroll));
  p.rows = std::min(p.rows, p.Ho);
  p.bandRows = roundUpTo(ceilDiv(p.Ho, p.bands), p.rows);
  p.bands = ceilDiv(p.Ho, p.bandRows);
  if (p.bands + 2 > target_.registers.semaphores) return false;
  // VMEM: weights [tap, lanes], the epilogue's columns [lanes], the image,
  // the result. Loads and stores of positions past a row's end (never
  // stored to HBM) run into the next row or the slack.
  p.vW = 0;
  p.end = alignUp(static_cast<uint64_t>(taps) * p.wRow, 512);
  if (epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs) {
      p.vColumns.push_back(p.end);
      if (input.kind == MatmulEpilogue::Column)
        p.end += alignUp(static_cast<uint64_t>(lanes * typeInfo(input.type).bytes), 512);
    }
  const int64_t reach = p.groups * p.unroll * span + p.KW * p.dW + 8;
  p.vImg = alignUp(p.end, 4096);
  uint64_t img = static_cast<uint64_t>(p.Hp + (p.rows - 1) * p.sH + 8) * p.rowIn +
                 static_cast<uint64_t>(reach * p.cpos * es) + 4096;
  p.vOut = p.vImg + alignUp(img, 32768);
  p.end = p.vOut + alignUp(static_cast<uint64_t>(p.Ho + p.rows - 1) * p.rowOut +
                               static_cast<uint64_t>(reach * p.cpos * eo) + 4096,
                           512);
  return p.end <= vmemBudget() && p.end < (uint64_t{1} << 31);
}
// The streamed depthwise kernel's phases and the state they share: the
// byte strides of the operands and result, the DMAs of each band, and the
// registers of the image, band, channel block and row loops.
class DepthwiseStreamEmitter : KernelPhases {
 public:
  DepthwiseStreamEmitter(Lowerer& l, const Instruction& in, const ConvGeometry& g, const DepthwisePlan& p,
                         const MatmulEpilogue* epilogue)
      : KernelPhases(l, in), g(g), p(p), epilogue(epilogue), dn(*in.attrs().convDims) {}
  bool run();

 private:
  // One DMA of a band's input rows (an empty desc: a signal instead).
  struct BandLoad {
    std::string desc;
    int64_t src = 0;
    uint64_t dst = 0;
  };

  void strides();
  void loadWeights();
  void zeroBytes(VReg z, uint64_t from, uint64_t bytes);
  void zeroPadding();
  bool mergeable();
  void mergedBandLoads();
  void phaseBandLoads();
  std::string outDesc(int64_t rows);
  void imageLoads();
  void bandStart();
  void channelBlockStart();
  bool rowGroup();
  bool finishRows(const std::vector<VReg>& acc);
  void bandOut();

  const ConvGeometry& g;
  const DepthwisePlan& p;
  const MatmulEpilogue* epilogue;
  const hlo::ConvolutionDimensionNumbers& dn;
  ElementType stored = ElementType::F32;
  int64_t es = 0, ew = 0, eo = 0;
  int xBuf = -1, kBuf = -1, dst = -1;
  int64_t xN = 0, xH = 0, xW = 0, xC = 0, kH = 0, kW = 0, kC = 0, oN = 0, oH = 0, oW = 0, oC = 0;
  int64_t taps = 0, span = 0, C = 0;
  int semW = 0, semOut = 0;  // input band b waits on sem b
  int rT = -1, rA = -1, rN = -1, rB = -1, rCb = -1, rY = -1, rYEnd = -1, rIn = -1, rOut = -1, rG = -1,
      rCnt = -1, rW = -1;
  int loads = 1;
  std::map<const Instruction*, VReg> scalars;
  std::vector<std::vector<BandLoad>> bandLoads;
  int64_t mergedStep = 0, loadsPerBand = 1, lastRows = 0;
  std::string dOutFull, dOutLast;
  std::vector<VReg> wv;                        // the taps' weights of a channel block (in registers)
  std::map<const Instruction*, VReg> columns;  // the epilogue's columns of a channel block
};

void DepthwiseStreamEmitter::strides() {
  const Instruction* lhs = in.operand(0);
  const Instruction* rhs = in.operand(1);
  stored = epilogue ? epilogue->outType : g.outType;
  es = typeInfo(g.inType).bytes;
  ew = typeInfo(g.kType).bytes;
  eo = typeInfo(stored).bytes;
  xBuf = leaves_[lhs][0];
  kBuf = leaves_[rhs][0];
  dst = epilogue ? epilogue->outBuf : leaves_[&in][0];
  auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  const std::vector<int64_t> xs = byteStrides(lhs->shape().dimensions(), static_cast<int>(es));
  const std::vector<int64_t> ks = byteStrides(rhs->shape().dimensions(), static_cast<int>(ew));
  const std::vector<int64_t> os = byteStrides(in.shape().dimensions(), static_cast<int>(eo));
  xN = at(xs, dn.inputBatchDimension);
  xH = at(xs, dn.inputSpatialDimensions[0]);
  xW = at(xs, dn.inputSpatialDimensions[1]);
  xC = at(xs, dn.inputFeatureDimension);
  kH = at(ks, dn.kernelSpatialDimensions[0]);
  kW = at(ks, dn.kernelSpatialDimensions[1]);
  kC = at(ks, dn.kernelOutputFeatureDimension);
  oN = at(os, dn.outputBatchDimension);
  oH = at(os, dn.outputSpatialDimensions[0]);
  oW = at(os, dn.outputSpatialDimensions[1]);
  oC = at(os, dn.outputFeatureDimension);
  taps = p.KH * p.KW;
  span = 8 * p.pack;
  C = p.C;
  semW = static_cast<int>(p.bands);
  semOut = semW + 1;
}

// Weights [tap, lanes] straight from the kernel, repeated `pack` times
// across the lanes; then the epilogue's columns the same way.
void DepthwiseStreamEmitter::loadWeights() {
  {
    std::vector<Emitter::Dim> dims;
    if (p.KH > 1) dims.push_back({p.KH, kH, p.KW * static_cast<int64_t>(p.wRow)});
    if (p.KW > 1) dims.push_back({p.KW, kW, static_cast<int64_t>(p.wRow)});
    if (p.pack > 1) dims.push_back({p.pack, 0, C * ew});
    uint64_t chunk = static_cast<uint64_t>(C * ew);
    if (kC != ew) {
      dims.push_back({C, kC, ew});
      chunk = static_cast<uint64_t>(ew);
    }
    std::string d = e_.desc(chunk, dims);
    e_.op("smov {}, {}", S(rT), base(kBuf));
    e_.op("{} {}, [{}], {}, sem{}", l_.dmaOp("h2v", kBuf), d, p.vW, l_.memRef(kBuf, S(rT)), semW);
  }
  if (!epilogue) return;
  int smem = 0;
  for (size_t j = 0; j < epilogue->inputs.size(); ++j) {
    const MatmulEpilogue::Input& input = epilogue->inputs[j];
    if (input.kind == MatmulEpilogue::Scalar) {
      scalars[input.value] = l_.splatScalar(input.buf, input.type, smem++);
      continue;
    }
    int64_t ei = typeInfo(input.type).bytes;
    std::vector<Emitter::Dim> dims;
    if (p.pack > 1) dims.push_back({p.pack, 0, C * ei});
    std::string d = e_.desc(static_cast<uint64_t>(C * ei), dims);
    e_.op("smov {}, {}", S(rT), base(input.buf));
    e_.op("{} {}, [{}], {}, sem{}", l_.dmaOp("h2v", input.buf), d, p.vColumns[j], l_.memRef(input.buf, S(rT)),
          semW);
    ++loads;
  }
}

void DepthwiseStreamEmitter::zeroBytes(VReg z, uint64_t from, uint64_t bytes) {
  if (bytes == 0) return;
  std::string l = e_.newLabel("dwzero");
  e_.op("smov {}, {}", S(rA), from);
  e_.op("smov {}, {}", S(rCnt), ceilDiv(static_cast<int64_t>(bytes), 4096));
  e_.label(l);
  l_.vstore(z, ElementType::F32, S(rA));
  e_.op("sadd {}, {}, 4096", S(rA), S(rA));
  e_.op("loop {}, {}", S(rCnt), l);
}

// Padding stays zero: the image's DMAs never write it. Zeroed before any
// DMA is issued (stores may run over into data the DMAs write later): the
// rows of padding in 4 KiB stores, and the columns of padding of the input
// rows, 8 rows (one per sublane) x 512 bytes per store.
void DepthwiseStreamEmitter::zeroPadding() {
  if (!p.zero) return;
  VReg z = l_.vconst(ElementType::F32, 0);
  zeroBytes(z, p.vImg, static_cast<uint64_t>(p.padTop) * p.rowIn);
  zeroBytes(z, p.vImg + static_cast<uint64_t>(p.padTop + p.H) * p.rowIn,
            static_cast<uint64_t>(p.Hp - p.padTop - p.H) * p.rowIn);
  // Byte ranges of a row that hold padding read by kept results.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t ph = 0; ph < p.sW; ++ph) {
    int64_t valid = p.Wp > ph ? ceilDiv(p.Wp - ph, p.sW) : 0;  // positions i < Wp in this phase
    int64_t j0 = ((ph - p.padLeft) % p.sW + p.sW) % p.sW;
    int64_t count = j0 < p.W ? (p.W - 1 - j0) / p.sW + 1 : 0;
    int64_t q0 = count ? (p.padLeft + j0) / p.sW : valid;
    int64_t base = ph * p.Q;
    if (q0 > 0) ranges.push_back({base * p.cpos * es, std::min(q0, valid) * p.cpos * es});
    if (count && q0 + count < valid)
      ranges.push_back({(base + q0 + count) * p.cpos * es, (valid - q0 - count) * p.cpos * es});
  }
  if (!ranges.empty()) {
    std::string l = e_.newLabel("dwzerocols");
    e_.op("smov {}, {}", S(rA), p.vImg + static_cast<uint64_t>(p.padTop) * p.rowIn);
    e_.op("smov {}, {}", S(rCnt), ceilDiv(p.H, 8));
    e_.label(l);
    for (auto [from, bytes] : ranges)
      for (int64_t k = 0; k < ceilDiv(bytes, 512); ++k)
        l_.vstore(z, ElementType::F32, fmt::format("{} + {}", S(rA), from + k * 512),
                  fmt::format(", {}", p.rowIn));
    e_.op("sadd {}, {}, {}", S(rA), S(rA), 8 * static_cast<int64_t>(p.rowIn));
    e_.op("loop {}, {}", S(rCnt), l);
  }
  vfree(z);
}

// When every residue r of the input columns mod the stride holds as many
// columns and their runs start evenly spaced in VMEM, one DMA per band
// takes all phases (a dimension over r): fewer fixed DMA latencies.
bool DepthwiseStreamEmitter::mergeable() {
  bool merged = p.sW > 1;
  auto startOf = [&](int64_t r) {
    int64_t ph = (p.padLeft + r) % p.sW, q0 = (p.padLeft + r) / p.sW;
    return (ph * p.Q + q0) * p.cpos * es;
  };
  int64_t count0 = (p.W - 1) / p.sW + 1;
  if (merged) mergedStep = startOf(1) - startOf(0);
  for (int64_t r = 0; r < p.sW && merged; ++r)
    merged = r < p.W && (p.W - 1 - r) / p.sW + 1 == count0 && startOf(r) - startOf(0) == r * mergedStep &&
             !(xC != es && count0 > 1);
  return merged;
}

// The input rows each band needs beyond the earlier bands', all phases of
// the last dimension in one DMA.
void DepthwiseStreamEmitter::mergedBandLoads() {
  int64_t done = 0, count = (p.W - 1) / p.sW + 1;
  for (int64_t b = 0; b < p.bands; ++b) {
    int64_t y1 = std::min(p.Ho, (b + 1) * p.bandRows);
    int64_t need = std::clamp<int64_t>((y1 - 1) * p.sH + (p.KH - 1) * p.dH + 1 - p.padTop, 0, p.H);
    int64_t h0 = done, h1 = std::max(done, need);
    done = h1;
    BandLoad l;
    if (h1 > h0) {
      // Column r of the band's first row lands at phase (padLeft + r) % sW.
      int64_t ph = p.padLeft % p.sW, q0 = p.padLeft / p.sW;
      l.dst = p.vImg + static_cast<uint64_t>(p.padTop + h0) * p.rowIn +
              static_cast<uint64_t>((ph * p.Q + q0) * p.cpos * es);
      l.src = h0 * xH;
      std::vector<Emitter::Dim> dims;
      if (h1 - h0 > 1) dims.push_back({h1 - h0, xH, static_cast<int64_t>(p.rowIn)});
      dims.push_back({p.sW, xW, mergedStep});
      if (count > 1) dims.push_back({count, p.sW * xW, p.cpos * es});
      uint64_t chunk = static_cast<uint64_t>(C * es);
      if (xC != es) {
        dims.push_back({C, xC, es});
        chunk = static_cast<uint64_t>(es);
      }
      l.desc = e_.desc(chunk, dims);
    }
    bandLoads[static_cast<size_t>(b)].push_back(l);
  }
}

// The input rows each band needs beyond the earlier bands', per phase of
// the last dimension (one DMA each; an empty one signals its semaphore so
// every band waits for sW).
void DepthwiseStreamEmitter::phaseBandLoads() {
  int64_t done = 0;
  for (int64_t b = 0; b < p.bands; ++b) {
    int64_t y1 = std::min(p.Ho, (b + 1) * p.bandRows);
    int64_t need = std::clamp<int64_t>((y1 - 1) * p.sH + (p.KH - 1) * p.dH + 1 - p.padTop, 0, p.H);
    int64_t h0 = done, h1 = std::max(done, need);
    done = h1;
    for (int64_t ph = 0; ph < p.sW; ++ph) {
      int64_t j0 = ((ph - p.padLeft) % p.sW + p.sW) % p.sW;
      int64_t count = j0 < p.W ? (p.W - 1 - j0) / p.sW + 1 : 0;
      BandLoad l;
      if (h1 > h0 && count > 0) {
        int64_t q0 = (p.padLeft + j0) / p.sW;
        l.dst = p.vImg + static_cast<uint64_t>(p.padTop + h0) * p.rowIn +
                static_cast<uint64_t>((ph * p.Q + q0) * p.cpos * es);
        l.src = h0 * xH + j0 * xW;
        std::vector<Emitter::Dim> dims;
        if (h1 - h0 > 1) dims.push_back({h1 - h0, xH, static_cast<int64_t>(p.rowIn)});
        uint64_t chunk = static_cast<uint64_t>(C * es);
        if (xC != es) {
          if (count > 1) dims.push_back({count, p.sW * xW, p.cpos * es});
          dims.push_back({C, xC, es});
          chunk = static_cast<uint64_t>(es);
        } else if (p.sW == 1 && p.cpos == C && xW == C * es) {
          chunk = static_cast<uint64_t>(count * C * es);
        } else if (count > 1) {
          dims.push_back({count, p.sW * xW, p.cpos * es});
        }
        l.desc = e_.desc(chunk, dims);
      }
      bandLoads[static_cast<size_t>(b)].push_back(l);
    }
  }
}

// The result band out: rows, positions, channels.
std::string DepthwiseStreamEmitter::outDesc(int64_t rows) {
  std::vector<Emitter::Dim> dims;
  if (oC == eo && p.cpos == C && oW == C * eo) {
    if (rows > 1 && oH == p.Wo * C * eo) return e_.desc(static_cast<uint64_t>(rows * p.Wo * C * eo), {});
    if (rows > 1) dims.push_back({rows, static_cast<int64_t>(p.rowOut), oH});
    return e_.desc(static_cast<uint64_t>(p.Wo * C * eo), dims);
  }
  if (rows > 1) dims.push_back({rows, static_cast<int64_t>(p.rowOut), oH});
  if (p.Wo > 1) dims.push_back({p.Wo, p.cpos * eo, oW});
  if (oC == eo) return e_.desc(static_cast<uint64_t>(C * eo), dims);
  dims.push_back({C, eo, oC});
  return e_.desc(static_cast<uint64_t>(eo), dims);
}

// Every band's input DMAs of image rN, band b on sem b.
void DepthwiseStreamEmitter::imageLoads() {
  for (int64_t b = 0; b < p.bands; ++b)
    for (const BandLoad& l : bandLoads[static_cast<size_t>(b)]) {
      if (l.desc.empty()) {
        e_.op("sem.signal sem{}, 1", b);
        continue;
      }
      e_.op("smul {}, {}, {}", S(rA), S(rN), xN);
      e_.op("sadd {}, {}, {}", S(rA), S(rA), base(xBuf) + l.src);
      e_.op("{} {}, [{}], {}, sem{}", l_.dmaOp("h2v", xBuf), l.desc, l.dst, l_.memRef(xBuf, S(rA)), b);
    }
}

// Band rB: wait for its rows, rows rY .. rYEnd.
void DepthwiseStreamEmitter::bandStart() {
  e_.op("sem.wait sem[{}], {}", S(rB), loadsPerBand);
  e_.op("smul {}, {}, {}", S(rYEnd), S(rB), p.bandRows);
  e_.op("sadd {}, {}, {}", S(rYEnd), S(rYEnd), p.bandRows);
  std::string lFull = e_.newLabel("dwfull");
  e_.op("br.lt {}, {}, {}", S(rYEnd), p.Ho + 1, lFull);
  e_.op("smov {}, {}", S(rYEnd), p.Ho);
  e_.label(lFull);
}

// Weights of channel block rCb, each tap's row in every sublane; the
// epilogue's columns of the block.
void DepthwiseStreamEmitter::channelBlockStart() {
  e_.op("smul {}, {}, {}", S(rW), S(rCb), 128 * ew);
  e_.op("sadd {}, {}, {}", S(rW), S(rW), p.vW);
  wv.clear();
  if (p.weightsInRegisters)
    for (int64_t t = 0; t < taps; ++t)
      wv.push_back(l_.vload(g.kType, fmt::format("{} + {}", S(rW), t * static_cast<int64_t>(p.wRow)), ", 0"));
  columns.clear();
  if (epilogue)
    for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
      const MatmulEpilogue::Input& input = epilogue->inputs[k];
      if (input.kind != MatmulEpilogue::Column) continue;
      int64_t ei = typeInfo(input.type).bytes;
      e_.op("smul {}, {}, {}", S(rT), S(rCb), 128 * ei);
      e_.op("sadd {}, {}, {}", S(rT), S(rT), p.vColumns[k]);
      columns[input.value] = l_.vload(input.type, S(rT), ", 0");
    }
}

// One group of `unroll` position blocks of `rows` rows: the taps
// multiply-added into independent f32 accumulators (a = row * u + block).
bool DepthwiseStreamEmitter::rowGroup() {
  const int64_t u = p.unroll, xStride = p.pack * p.cpos * es;
  vregs_.setRotating(true);
  const int64_t R = p.rows, n = R * u;
  std::vector<VReg> acc;
  for (int64_t a = 0; a < n; ++a) acc.push_back(l_.vconst(ElementType::F32, 0));
  for (int64_t th = 0; th < p.KH; ++th)
    for (int64_t tw = 0; tw < p.KW; ++tw) {
      const int64_t t = th * p.KW + tw, i = tw * p.dW, ph = i % p.sW, q = i / p.sW;
      VReg w =
          p.weightsInRegisters
              ? wv[static_cast<size_t>(t)]
              : l_.vload(g.kType, fmt::format("{} + {}", S(rW), t * static_cast<int64_t>(p.wRow)), ", 0");
      const int64_t off = th * p.dH * static_cast<int64_t>(p.rowIn) + (ph * p.Q + q) * p.cpos * es;
      std::vector<VReg> xv;
      for (int64_t a = 0; a < n; ++a) {
        const int64_t rowOff = (a / u) * p.sH * static_cast<int64_t>(p.rowIn), j = a % u;
        xv.push_back(l_.vload(g.inType, fmt::format("{} + {}", S(rIn), rowOff + off + j * span * p.cpos * es),
                              fmt::format(", {}", xStride)));
      }
      for (int64_t a = 0; a < n; ++a) {
        e_.op("vfma.f32 {}, {}, {}, {}", V(acc[static_cast<size_t>(a)]), V(xv[static_cast<size_t>(a)]), V(w),
              V(acc[static_cast<size_t>(a)]));
        vfree(xv[static_cast<size_t>(a)]);
      }
      if (!p.weightsInRegisters) vfree(w);
    }
  bool ok = finishRows(acc);
  vregs_.setRotating(false);
  return ok;
}

// The accumulators through the epilogue into the VMEM result rows.
bool DepthwiseStreamEmitter::finishRows(const std::vector<VReg>& acc) {
  const int64_t u = p.unroll, oStride = p.pack * p.cpos * eo;
  for (size_t a = 0; a < acc.size(); ++a) {
    const int64_t j = static_cast<int64_t>(a) % u,
                  rowOff = (static_cast<int64_t>(a) / u) * static_cast<int64_t>(p.rowOut);
    VReg result = acc[a];
    std::map<const Instruction*, VReg> val = scalars;
    for (auto& [inst, v] : columns) val[inst] = v;
    std::vector<VReg> owned;
    if (epilogue) {
      // The convolution's value in its own type, then the fused instructions.
      val[epilogue->dot] = l_.convValueInOwnType(result, g.outType, owned);
      if (!l_.evalOnRegisters(*epilogue->comp, nullptr, val, owned)) return false;
      result = val[epilogue->comp->root()];
    }
    l_.vstore(result, stored, fmt::format("{} + {}", S(rOut), rowOff + j * span * p.cpos * eo),
              fmt::format(", {}", oStride));
    std::set<int> keep;
    for (auto& [inst, v] : columns) keep.insert(v.r);
    for (auto& [inst, v] : scalars) keep.insert(v.r);
    std::set<int> freed = {acc[a].r};
    vfree(acc[a]);
    for (VReg v : owned)
      if (!keep.count(v.r) && freed.insert(v.r).second) vfree(v);
  }
  return true;
}

// The band out: VMEM rows rB * bandRows .., to the result of image rN.
void DepthwiseStreamEmitter::bandOut() {
  e_.op("smul {}, {}, {}", S(rA), S(rB), p.bandRows * static_cast<int64_t>(p.rowOut));
  e_.op("sadd {}, {}, {}", S(rA), S(rA), p.vOut);
  e_.op("smul {}, {}, {}", S(rT), S(rB), p.bandRows * oH);
  e_.op("smul {}, {}, {}", S(rIn), S(rN), oN);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), S(rIn));
  e_.op("sadd {}, {}, {}", S(rT), S(rT), base(dst));
  if (lastRows != p.bandRows) {
    std::string lLast = e_.newLabel("dwlast"), lSent = e_.newLabel("dwsent");
    e_.op("br.eq {}, {}, {}", S(rB), p.bands - 1, lLast);
    e_.op("{} {}, {}, [{}], sem{}", l_.dmaOp("v2h", dst), dOutFull, l_.memRef(dst, S(rT)), S(rA), semOut);
    e_.op("jmp {}", lSent);
    e_.label(lLast);
    e_.op("{} {}, {}, [{}], sem{}", l_.dmaOp("v2h", dst), dOutLast, l_.memRef(dst, S(rT)), S(rA), semOut);
    e_.label(lSent);
  } else {
    e_.op("{} {}, {}, [{}], sem{}", l_.dmaOp("v2h", dst), dOutFull, l_.memRef(dst, S(rT)), S(rA), semOut);
  }
}

bool DepthwiseStreamEmitter::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  strides();
  rT = sreg();
  rA = sreg();
  rN = sreg();
  rB = sreg();
  rCb = sreg();
  rY = sreg();
  rYEnd = sreg();
  rIn = sreg();
  rOut = sreg();
  rG = sreg();
  rCnt = sreg();
  rW = sreg();
  loadWeights();
  zeroPadding();
  bandLoads.assign(static_cast<size_t>(p.bands), {});
  const bool merged = mergeable();
  loadsPerBand = merged ? 1 : p.sW;
  if (merged)
    mergedBandLoads();
  else
    phaseBandLoads();
  lastRows = p.Ho - (p.bands - 1) * p.bandRows;
  dOutFull = outDesc(p.bandRows);
  dOutLast = outDesc(lastRows);

  std::string lItem = e_.newLabel("dwimage"), lBand = e_.newLabel("dwband"),
              lWeightsDone = e_.newLabel("dwready");
  e_.op("smov {}, 0", S(rN));
  e_.label(lItem);
  imageLoads();
  e_.op("br.ne {}, 0, {}", S(rN), lWeightsDone);
  e_.op("sem.wait sem{}, {}", semW, loads);
  e_.label(lWeightsDone);
  e_.op("smov {}, 0", S(rB));
  e_.label(lBand);
  bandStart();
  std::string lCb = e_.newLabel("dwchan");
  e_.op("smov {}, 0", S(rCb));
  e_.label(lCb);
  channelBlockStart();
  // The band's rows, `rows` per iteration, in groups of position blocks.
  std::string lRow = e_.newLabel("dwrow");
  e_.op("smul {}, {}, {}", S(rY), S(rB), p.bandRows);
  e_.label(lRow);
  e_.op("smul {}, {}, {}", S(rIn), S(rY), p.sH * static_cast<int64_t>(p.rowIn));
  e_.op("smul {}, {}, {}", S(rT), S(rCb), 128 * es);
  e_.op("sadd {}, {}, {}", S(rIn), S(rIn), S(rT));
  e_.op("sadd {}, {}, {}", S(rIn), S(rIn), p.vImg);
  e_.op("smul {}, {}, {}", S(rOut), S(rY), static_cast<int64_t>(p.rowOut));
  e_.op("smul {}, {}, {}", S(rT), S(rCb), 128 * eo);
  e_.op("sadd {}, {}, {}", S(rOut), S(rOut), S(rT));
  e_.op("sadd {}, {}, {}", S(rOut), S(rOut), p.vOut);
  std::string lGroup = e_.newLabel("dwpos");
  if (p.groups > 1) {
    e_.op("smov {}, {}", S(rG), p.groups);
    e_.label(lGroup);
  }
  if (!rowGroup()) return false;
  if (p.groups > 1) {
    e_.op("sadd {}, {}, {}", S(rIn), S(rIn), p.unroll * span * p.cpos * es);
    e_.op("sadd {}, {}, {}", S(rOut), S(rOut), p.unroll * span * p.cpos * eo);
    e_.op("loop {}, {}", S(rG), lGroup);
  }
  e_.op("sadd {}, {}, {}", S(rY), S(rY), p.rows);
  e_.op("br.lt {}, {}, {}", S(rY), S(rYEnd), lRow);
  for (VReg v : wv) vfree(v);
  for (auto& [inst, v] : columns) vfree(v);
  if (p.cBlocks > 1) {
    e_.op("sadd {}, {}, 1", S(rCb), S(rCb));
    e_.op("br.lt {}, {}, {}", S(rCb), p.cBlocks, lCb);
  }
  bandOut();
  e_.op("sadd {}, {}, 1", S(rB), S(rB));
  e_.op("br.lt {}, {}, {}", S(rB), p.bands, lBand);
  // The result area is reused by the next image.
  e_.op("sem.wait sem{}, {}", semOut, p.bands);
  e_.op("sadd {}, {}, 1", S(rN), S(rN));
  e_.op("br.lt {}, {}, {}", S(rN), p.N, lItem);
  for (auto& [inst, v] : scalars) vfree(v);
  return !failed_;
}

bool Lowerer::emitDepthwiseStream(const Instruction& in, const ConvGeometry& g, const DepthwisePlan& p,
                                  const MatmulEpilogue* epilogue) {
  return DepthwiseStreamEmitter(*this, in, g, p, epilogue).run();
}

}  // namespace tpu::codegen
