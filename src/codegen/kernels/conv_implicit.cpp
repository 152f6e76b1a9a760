// Convolution as an implicit GEMM: no im2col matrix in HBM.
//
// Each image (batch element) is DMAed from the operand into a zero-bordered
// VMEM box X[Hp, Wpv, C] (double-buffered: the next image streams in while
// this one computes). With channels minor, the window of one output
// position for one kernel row dy is a contiguous run of X: kw * C elements,
// or ((P - 1) * sx + kw) * C for P neighbouring output positions computed
// together (P > 1 when the output features fill only part of the MXU's 128
// columns: column j * O + o of the packed weights is output feature o of
// position j). So an 8-row LHS block of the GEMM (8 output positions, one
// 128-wide K slice of a run) is one strided vector load from X: the
// windows are assembled in VMEM as the MXUs consume them, never stored.
// Output rows are taken over the box's full (padded) width; the positions
// past the result's width are computed and dropped, which keeps the
// stride from one 8-position block to the next uniform.
//
// The packed weights W'[KT x 128, NT x 128] stay in VMEM. The GEMM's tiles
// (K tile kt, N tile nt) of a chunk of R blocks are jobs, dealt to the MXUs
// in rounds (job j of a period on MXU j % G): a round latches each MXU's
// tile (pushed while the previous round ran) and streams the chunk's
// blocks through it; results pop D blocks behind, also across rounds, so
// the MXUs never drain inside an image. Partial sums of a chunk live in a
// VMEM accumulator; the job that completes a block runs the output fusion's
// epilogue on it and stores it into a staging area laid out like the
// result, which one DMA writes out per image. f32 at HIGH or HIGHEST
// precision takes emitMatmul's 3 or 6 bf16 passes: each weight K tile is
// that many GEMM K tiles (jobs), pushing a component of W (x - bf16(x),
// once or twice) against a component of the loaded A block.
#include <fmt/format.h>

#include <functional>
#include <numeric>

#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"
#include "passes/layout/physical_layout.h"

namespace tpu::codegen {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Byte strides of the dimensions of `v` where its buffer holds them: a
// physical bitcast's through the layout of its array side (physical-edges:
// tile rows, the channel padding never touched), otherwise row-major.
std::vector<int64_t> storedStrides(const Instruction& v, int bytes) {
  if (v.opcode() == Opcode::Bitcast && passes::layout::isPhysicalBitcast(v)) {
    const Shape& s = passes::layout::physicalDims(v.shape()) ? v.shape() : v.operand(0)->shape();
    if (auto st = passes::layout::physicalStrides(s)) {
      for (int64_t& x : *st) x *= bytes;
      return *st;
    }
  }
  return byteStrides(v.shape().dimensions(), bytes);
}

// The input indices of one spatial dimension that land inside the padded
// box (negative padding crops), and the box position of the first; the
// ones after it land every `dil` positions (lhs dilation: the holes, like
// the padding, stay zero).
struct Copied {
  int64_t first = 0, count = 0, at = 0;
};

Copied copied(int64_t size, int64_t low, int64_t dil, int64_t padded) {
  Copied c;
  c.first = low >= 0 ? 0 : (-low + dil - 1) / dil;
  int64_t last = padded <= low ? -1 : std::min(size - 1, (padded - 1 - low) / dil);
  c.count = std::max<int64_t>(0, last - c.first + 1);
  c.at = low + c.first * dil;
  return c;
}

// Every sum of one multiple of each (count, step) pair, the first pair's
// multiples outermost: the offsets of a row-major walk over those
// dimensions ({0} for none).
std::vector<int64_t> rowMajorSums(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  std::vector<int64_t> sums{0};
  for (const auto& [count, step] : dims) {
    std::vector<int64_t> next;
    for (int64_t s : sums)
      for (int64_t i = 0; i < count; ++i) next.push_back(s + i * step);
    sums = std::move(next);
  }
  return sums;
}

// The box's planes of a window of 3 or more dimensions: the spatial
// dimensions before the rows, flattened row-major, each a stride of
// `planeStride[d]` planes.
std::vector<int64_t> planeStrides(const ConvGeometry& g) {
  const size_t outer = g.rank >= 3 ? g.rank - 2 : 0;
  std::vector<int64_t> ps(outer, 1);
  for (size_t d = outer; d-- > 1;) ps[d - 1] = ps[d] * g.padded[d];
  return ps;
}

// The box's rows, columns and planes: what of the input is copied where,
// the window's rows and planes (the plan's geometry before the channels).
bool boxGeometry(const ConvGeometry& g, ImplicitConvPlan& p) {
  const bool three = g.rank >= 3;
  std::vector<Copied> cp;
  for (size_t d = 0; d < g.rank; ++d) {
    cp.push_back(copied(g.inSize[d], g.padLow[d], g.lhsDil[d], g.padded[d]));
    if (cp.back().count <= 0) return false;
  }
  const bool two = g.rank >= 2;
  const size_t h = two ? g.rank - 2 : 0;  // the spatial dimension of the rows
  // H and W count the input rows and columns copied into the box.
  p.H = two ? cp[h].count : 1;
  p.W = cp[g.rank - 1].count;
  p.kh = two ? g.kSize[h] : 1;
  // A dilated window along the run: its extent, the holes zero weights.
  p.kw = (g.kSize[g.rank - 1] - 1) * g.rhsDil[g.rank - 1] + 1;
  p.sy = two ? g.stride[h] : 1;
  p.sx = g.stride[g.rank - 1];
  p.rdy = two ? g.rhsDil[h] : 1;
  p.padTop = two ? cp[h].at : 0;
  p.padLeft = cp[g.rank - 1].at;
  p.Hp = two ? g.padded[h] : 1;
  p.Hout = two ? g.outSize[h] : 1;
  if (three) {
    const std::vector<int64_t> ps = planeStrides(g);
    std::vector<std::pair<int64_t, int64_t>> taps, outs;
    for (size_t d = 0; d < ps.size(); ++d) {
      taps.push_back({g.kSize[d], g.rhsDil[d] * ps[d]});
      outs.push_back({g.outSize[d], g.stride[d] * ps[d]});
    }
    p.Dp = ps[0] * g.padded[0];
    p.tapPlane = rowMajorSums(taps);
    p.outPlane = rowMajorSums(outs);
    p.kd = static_cast<int64_t>(p.tapPlane.size());
    p.Dout = static_cast<int64_t>(p.outPlane.size());
    if (p.Dout <= 0 || p.kd <= 0) return false;
  }
  return true;
}

}  // namespace

bool Lowerer::implicitConvPlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue,
                               int passes, ImplicitConvPlan& p) const {
  if (!options_.implicitConv) return false;
  const auto& dn = *in.attrs().convDims;
  if ((passes != 1 && passes != 3 && passes != 6) || g.rank < 1) return false;
  p.passes = passes;
  // Floats of up to 4 bytes: a widening vector load takes them from the
  // box (f16 and the byte floats convert to f32 there), and the MXU push
  // rounds them to bf16 as the im2col path's does.
  for (ElementType t : {g.inType, g.kType}) {
    TypeInfo ti = typeInfo(t);
    if (!ti.isFloat || ti.isComplex || isWideType(t) || ti.bytes > 4) return false;
  }
  if (!typeInfo(g.outType).isFloat || isWideType(g.outType)) return false;
  if (epilogue && !typeInfo(epilogue->outType).isFloat) return false;
  // 3-D and up: the planes are stacked images of the box; an epilogue's
  // tile inputs are not staged per plane.
  if (g.rank >= 3 && epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs)
      if (input.kind == MatmulEpilogue::Tile) return false;
  if (!boxGeometry(g, p)) return false;
  p.Wout = g.outSize[g.rank - 1];
  p.Cg = g.inPerGroup;
  p.Og = g.outPerGroup;
  if (p.W <= 0 || p.H <= 0 || p.Wout <= 0 || p.Hout <= 0) return false;
  (void)dn;
  const bool three = g.rank >= 3;
  // The rest depends on the channels one run of the kernel covers.
  auto shape = [&](ImplicitConvPlan& q) -> bool {
    // Positions per GEMM row: P neighbours share the 128 MXU columns when
    // that does more useful work per MXU pass.
    auto efficiency = [&](int64_t P) {
      int64_t run = ((P - 1) * q.sx + q.kw) * q.C;
      return static_cast<double>(q.kw * q.C * P * q.O) /
             static_cast<double>(ceilDiv(run, 128) * 128 * ceilDiv(P * q.O, 128) * 128);
    };
    q.P = 1;
    if (q.O < 128 && 128 % q.O == 0)
      for (int64_t P = 2; P * q.O <= 128; P *= 2)
        if (P * q.O == 128 && efficiency(P) > efficiency(q.P) * 1.05) q.P = P;
    q.run = ((q.P - 1) * q.sx + q.kw) * q.C;
    q.KS = ceilDiv(q.run, 128);
    q.KT = q.kd * q.kh * q.KS * q.passes;
    q.NT = ceilDiv(q.P * q.O, 128);
    q.NP = q.NT * 128;
    q.Wpv = ceilDiv(g.padded[g.rank - 1], q.sx * q.P) * q.sx * q.P;
    q.RS = q.Wpv * q.C;
    q.rowPairs = q.sy * q.Wpv / (q.sx * q.P);
    // B images per item, stacked in the box every Hpb rows: the rows between
    // them are computed and dropped like the columns past the width, and the
    // pipeline fills and drains once per item. Only small images are stacked
    // (to ~128 blocks): a larger first item and last item are exposed longer.
    q.Hpb = ceilDiv(q.Hp, q.sy) * q.sy;
    const int64_t imageBlocks = ceilDiv((q.Hout - 1) * q.rowPairs + ceilDiv(q.Wout, q.P), 8);
    if (three) {
      // One image per item, its planes stacked.
      q.B = q.outPlane.back() + 1;
      if (!implicitConvLayout(g, epilogue, q)) return false;
    } else {
      for (q.B = std::min<int64_t>(g.outBatch, std::max<int64_t>(1, ceilDiv(128, imageBlocks))); q.B >= 1;
           --q.B)
        if (implicitConvLayout(g, epilogue, q)) break;
      if (q.B < 1) return false;
    }
    q.items = three ? g.outBatch : ceilDiv(g.outBatch, q.B);
    // Semaphores 5 .. 5 + inBands - 1 for the input bands, the next for the
    // result's bands.
    q.banded = !three && g.outBatch == 1 && q.B == 1 && (g.batchGroups == 1 || q.gpp == 1) &&
               target_.registers.semaphores >= 5 + 8 + 1;
    if (q.banded) {
      // Bands of at least bandBytes: every DMA costs an engine its fixed
      // latency, which small bands would not amortize.
      const int64_t bandBytes = 128 * 1024;
      const int64_t inBytes = q.H * q.W * q.C * typeInfo(g.inType).bytes;
      const int64_t outBytes =
          q.Hout * q.Wout * q.O * typeInfo(epilogue ? epilogue->outType : g.outType).bytes;
      q.inBands = std::clamp<int64_t>(inBytes / bandBytes, 1, std::min<int64_t>(q.H, 8));
      q.inBandRows = ceilDiv(q.H, q.inBands);
      q.inBands = ceilDiv(q.H, q.inBandRows);
      q.outBands = std::clamp<int64_t>(outBytes / bandBytes, 1, std::min<int64_t>(q.Hout, 8));
      q.outBandRows = ceilDiv(q.Hout, q.outBands);
      q.outBands = ceilDiv(q.Hout, q.outBandRows);
    }
    return implicitConvRegisters(epilogue, q);
  };
  // Grouped convolutions run in parts of gpp groups each, their weights
  // block-diagonal: the fewest MXU tile passes (parts x jobs x blocks, and
  // a pipeline fill per part) wins. Ungrouped: one part. Batch groups (a
  // weight gradient) the same way: the images of group l of a part land in
  // the box's channels l x Cg .. (Cg all the input's), so the part's GEMM
  // is block-diagonal like a feature-grouped one.
  // Up to 64 parts are kernel copies one after the other; a convolution
  // no plan of which fits in 64 parts (many groups whose blocks do not fit
  // VMEM together) loops one copy over its parts.
  const int64_t maxParts = 64;
  bool found = false;
  double bestCost = 0;
  ImplicitConvPlan best;
  auto consider = [&](ImplicitConvPlan q) {
    q.loopParts = q.parts > maxParts;
    if ((found && q.loopParts && !best.loopParts) || !shape(q)) return;
    // In MXU tile-block passes (~1.5 ns each, 4 MXUs): the GEMM's and a
    // fixed ~2.2 us per part (weights in, first image in, drain, last
    // result out). Fitted on ResNeXt-style, channel-multiplier and 1-D
    // shapes; it leaves out the DMA cost of a part's narrow channel chunks
    // (about 0.1-0.3 ns per position and part), which the measured cases
    // rank the same without.
    const double passes = static_cast<double>(q.parts * q.items * (q.CH * q.R + q.D) * q.J);
    double cost = passes + 1420.0 * static_cast<double>(q.parts);
    if (!found || cost < bestCost || (best.loopParts && !q.loopParts)) {
      found = true;
      bestCost = cost;
      best = q;
    }
  };
  for (int64_t d = 1; d <= g.groups; ++d) {
    if (g.groups % d != 0) continue;
    ImplicitConvPlan q = p;
    q.gpp = d;
    q.parts = g.groups / d;
    q.C = d * q.Cg;
    q.O = d * q.Og;
    consider(q);
  }
  // Ungrouped weights past VMEM: parts of the output features, the fewest
  // that fit, each reading the whole image against its slice of W. Slices
  // of at least 128 features (narrower ones pad W' to as many columns and
  // only multiply the image's passes: ssd_mobilenet's 8 parts of 4 to 16
  // features on v4 ran 355 -> 403 us against im2col).
  for (int64_t k = 2; !found && g.groups == 1 && g.outPerGroup / k >= 128; ++k) {
    if (g.outPerGroup % k != 0) continue;
    ImplicitConvPlan q = p;
    q.parts = k;
    q.Og = g.outPerGroup / k;
    q.C = q.Cg;
    q.O = q.Og;
    consider(q);
  }
  if (!found) return false;
  p = best;
  return true;
}

bool Lowerer::implicitConvLayout(const ConvGeometry& g, const MatmulEpilogue* epilogue,
                                 ImplicitConvPlan& p) const {
  const int64_t pairs = ((p.B - 1) * (p.Hpb / p.sy) + p.Hout - 1) * p.rowPairs + ceilDiv(p.Wout, p.P);
  const int64_t blocks = ceilDiv(pairs, 8);
  p.G = std::max(1, target_.mxu.count);
  p.J = p.NT * p.KT;
  const int64_t L = std::lcm(p.J, p.G);
  p.rounds = L / p.G;
  p.cpp = L / p.J;
  // Chunks of R blocks, R even (two blocks per pipelined iteration), at
  // most 32 (weights are re-pushed once per round).
  const int64_t rMax = 32;
  int64_t ch = ceilDiv(ceilDiv(blocks, rMax), p.cpp) * p.cpp;
  p.R = ceilDiv(ceilDiv(blocks, ch), 2) * 2;
  p.CH = ch;
  p.periods = ch / p.cpp;
  p.D = std::min<int64_t>(p.R, std::min<int64_t>(16, (std::max(2, target_.mxu.resultFifoDepth) - 2) / 2 * 2));
  if (p.D < 2) return false;
  const int es = typeInfo(g.inType).bytes, ew = typeInfo(g.kType).bytes;
  const int eo = typeInfo(epilogue ? epilogue->outType : g.outType).bytes;
  p.pairBytes = p.P * p.sx * p.C * es;
  // VMEM: weights, X slots, accumulators (two period parities), staging of
  // the result and of each tile input, columns.
  uint64_t top = 0;
  auto take = [&](uint64_t bytes) {
    uint64_t at = top;
    top += alignUp(bytes, 512);
    return at;
  };
  p.vW = take(static_cast<uint64_t>(p.KT / p.passes * 128 * p.NP * ew));
  // The last block's loads reach past the box: slack.
  const int64_t boxImages = p.kd > 1 || p.Dp > 1 ? p.Dp : p.B;
  int64_t xElems = std::max(boxImages * p.Hpb * p.RS, (p.CH * p.R * 8 + 16) * p.P * p.sx * p.C +
                                                          (p.kh - 1) * p.rdy * p.RS +
                                                          p.tapPlane.back() * p.Hpb * p.RS + p.KS * 128);
  p.xSlot = alignUp(static_cast<uint64_t>(xElems * es + 512), 512);
  p.vX = take(2 * p.xSlot);
  p.accPeriod = static_cast<uint64_t>(p.cpp * p.NT * p.R) * 4096;
  p.vAcc = take(2 * p.accPeriod);
  p.eSlot = alignUp(static_cast<uint64_t>(p.CH * p.R * 8 * p.NP * eo), 512);
  p.vE = take(2 * p.eSlot);
  p.vIn.clear();
  p.inSlot.clear();
  if (epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs) {
      int ei = typeInfo(input.type).bytes;
      if (input.kind == MatmulEpilogue::Tile) {
        p.inSlot.push_back(alignUp(static_cast<uint64_t>(p.CH * p.R * 8 * p.NP * ei), 512));
        p.vIn.push_back(take(2 * p.inSlot.back()));
      } else if (input.kind == MatmulEpilogue::Column) {
        p.inSlot.push_back(0);
        p.vIn.push_back(take(static_cast<uint64_t>(p.NP * ei)));
      } else {
        p.inSlot.push_back(0);
        p.vIn.push_back(0);
      }
    }
  p.end = top;
  return p.end <= vmemBudget();
}

bool Lowerer::implicitConvRegisters(const MatmulEpilogue* epilogue, ImplicitConvPlan& p) const {
  // Vector registers of one pipelined iteration (two blocks): the LHS
  // blocks, weight staging, per block every pop and accumulator, and per
  // finished block the epilogue's values; too many: the im2col path.
  int64_t worst = 0;
  // An epilogue's registers: one per computed instruction (parameters,
  // broadcasts, reshapes and bitcasts name other registers), two spare.
  int64_t epiRegs = 1;
  if (epilogue) {
    epiRegs = 3;
    for (const auto& i : epilogue->comp->instructions()) {
      Opcode op = i->opcode();
      if (op != Opcode::Parameter && op != Opcode::Broadcast && op != Opcode::Reshape &&
          op != Opcode::Bitcast && i.get() != epilogue->dot)
        ++epiRegs;
    }
  }
  for (int64_t rho = 0; rho < p.rounds; ++rho) {
    int64_t groups = 0, finals = 0, lastCc = -1, lastNt = -1;
    for (int64_t u = 0; u < p.G; ++u) {
      int64_t j = rho * p.G + u, t = j % p.J, cc = j / p.J, nt = t / p.KT, kt = t % p.KT;
      if (cc != lastCc || nt != lastNt) ++groups;
      if (kt == p.KT - 1) ++finals;
      lastCc = cc;
      lastNt = nt;
    }
    worst = std::max(worst, p.G + groups + finals * epiRegs);
  }
  const int64_t scalarsAndColumns = epilogue ? static_cast<int64_t>(epilogue->inputs.size()) * p.NT : 0;
  // Two blocks per iteration where the registers allow, else one (the same
  // sums in the same order: only the schedule differs).
  // Multi-pass: one more for the bf16 part of a component.
  const int64_t spare = 8 + scalarsAndColumns + (p.passes > 1 ? 1 : 0);
  p.U = 2;
  if (2 * (p.G + worst) + spare > target_.registers.vregs) p.U = 1;
  return p.G + worst + spare <= target_.registers.vregs;
}

// The implicit GEMM kernel's phases and the state they share: the
// descriptors of the image, result and epilogue DMAs, the registers the
// loops keep, and the job schedule of the MXUs (a job is one GEMM tile of
// a chunk, dealt to MXU j % G in round j / G of a period).
class ImplicitConvEmitter : KernelPhases {
 public:
  ImplicitConvEmitter(Lowerer& l, const Instruction& in, const ConvGeometry& g, const ImplicitConvPlan& p,
                      const MatmulEpilogue* epilogue)
      : KernelPhases(l, in), g(g), p(p), epilogue(epilogue), dn(*in.attrs().convDims) {}
  bool run();

 private:
  // A job: its chunk of the period, N tile, K tile and the kernel row and
  // K slice of the run it reads.
  // kt is the weights' K tile, kp the GEMM's (kt x passes + q: pass q of
  // kt, its components of A and W as emitMatmul's passes take them).
  struct Job {
    int64_t cc, nt, kt, dy, ks, kp, q;
  };
  // Consecutive MXUs of a round on the same chunk and N tile.
  struct Group {
    int64_t u0, u1, cc, nt;
    bool first, last;
  };
  // What popBlocks loaded for one group of one block.
  struct Loaded {
    std::vector<VReg> terms;  // the pops, then the accumulator (unless first)
    std::map<const Instruction*, VReg> inputs;
  };

  std::string boxDesc(int64_t hs, int64_t hd, int64_t ws, int64_t wd, int64_t cs, int64_t cd, int64_t e,
                      int64_t h, int64_t w, int64_t c, const Emitter::Dim* outer = nullptr);
  std::string stageDesc(int64_t e, const std::vector<int64_t>& strides, bool out, int64_t rows);
  void descriptors();
  void epilogueDescriptors();
  void registers();
  void loadImage(int rItem, int rSl);
  void zeroBoxes();
  void loadWeights();
  void loadColumns();
  Job job(int64_t rho, int64_t u) const;
  int64_t tileOf(int64_t rho, int64_t u) const;
  bool changes(int64_t rho, int64_t u) const;
  std::vector<Group> groupsOf(int64_t rho) const;
  void pushTile(int64_t rho, int64_t u);
  void prepareLoop();
  int64_t aOffset(int64_t rho, int64_t u) const;
  std::pair<int, int> passOf(int64_t q) const;
  void component(VReg x, int idx);
  void loadA(int64_t rho, int64_t blockOff);
  void pushBlocks();
  std::vector<Loaded> popLoads(const std::vector<Group>& gs, bool prevPeriod, std::vector<VReg>& owned);
  bool popStores(const std::vector<Group>& gs, bool prevPeriod, std::vector<Loaded>& loaded,
                 std::vector<VReg>& owned);
  bool popBlocks(int64_t rho, bool prevPeriod, const std::function<void()>& middle);
  void stepPop();
  void setPop(int64_t block, int64_t periodOffset);
  void imageStart();
  void waitBands();
  void stageSome(int64_t nextRho, bool spread);
  bool loopA(int64_t rho, bool withPops, bool spread);
  bool round(int64_t rho);
  void nextPeriod();
  void sendBand(const std::string& desc);
  void sendBands();
  bool drain();
  void imageOut();
  void finish();
  void addPart(int reg, int64_t stride);
  bool parts();

  const ConvGeometry& g;
  const ImplicitConvPlan& p;
  const MatmulEpilogue* epilogue;
  const hlo::ConvolutionDimensionNumbers& dn;
  bool two = false, three = false;
  ElementType storedType = ElementType::F32, convType = ElementType::F32;
  int es = 0, ew = 0, eo = 0;
  int xBuf = -1, kBuf = -1, dst = -1;
  // Descriptors and the byte strides and offsets they are built from.
  int64_t inD = 0, inB = 0, inH = 0, inW = 0, inC = 0, dilH = 1, dilW = 1, boxH = 0, boxW = 0,
          xInterior = 0, xPart = 0;
  int64_t oB = 0, oPart = 0, lastInRows = 0, lastOutRows = 0, oHs = 0, stageRow = 0;
  std::vector<int64_t> ost;
  std::string dX, dOut, dXBand, dXLast, dOutBand, dOutLast;
  std::vector<std::string> dIn;
  std::vector<int64_t> inBatch, inPart;  // per epilogue input: batch stride, this part's offset
  // Windows of 4 or more dimensions: per image DMA of the planes, its
  // source and box offsets; per output plane, its result offset.
  std::vector<int64_t> planeSrc{0}, planeDst{0}, outPlaneOff{0};
  // Registers.
  int rN = -1, rSlot = -1, rT = -1, rT2 = -1, rPr = -1, rCnt = -1, rXper = -1, rPush = -1, rEper = -1,
      rAccPer = -1, rPAcc = -1, rPE = -1, rW = -1, rWp = -1, rWaited = -1, rSent = -1, rPart = -1,
      rPartT = -1;
  // Looped parts: per part, the bytes one part moves the image, weights,
  // result and each epilogue input's offset.
  int64_t partX = 0, partW = 0, partO = 0;
  std::vector<int64_t> partIn;
  std::vector<int> rPIn, rInPer;
  int64_t images = 0, blockBytes = 0, eBlock = 0, chunkA = 0, chunkE = 0, imageRows = 0;
  int loads = 0, once = 0;
  bool mergedGroups = false;
  int64_t boxC = 1, xLoads = 1;                // channels per image DMA, image DMAs per image
  int64_t imagesPerItem = 1, outsPerItem = 1;  // 3-D: one image, its Dout planes out
  std::map<const Instruction*, VReg> scalars;
  std::string ld, ldW;
  int64_t tailLanes = 0;
  int tailMask = -1;
  int U = 1;
  std::vector<std::vector<VReg>> va;  // A registers: loaded one iteration ahead
  VReg vh{};                          // multi-pass: the bf16 part of a component
  int64_t iters = 0, dIters = 0;
  std::string lImage, lPeriod, lNoNext, lNoWait;
};

// Merges contiguous inner dimensions into the chunk.
std::string ImplicitConvEmitter::boxDesc(int64_t hs, int64_t hd, int64_t ws, int64_t wd, int64_t cs,
                                         int64_t cd, int64_t e, int64_t h, int64_t w, int64_t c,
                                         const Emitter::Dim* outer) {
  std::vector<Emitter::Dim> dims;
  if (outer) dims.push_back(*outer);
  uint64_t chunk = static_cast<uint64_t>(e);
  if (cs == e && cd == e) {
    chunk = static_cast<uint64_t>(c * e);
    if (ws == c * e && wd == c * e) {
      chunk *= static_cast<uint64_t>(w);
      if (h > 1) dims.push_back({h, hs, hd});
    } else {
      if (h > 1) dims.push_back({h, hs, hd});
      dims.push_back({w, ws, wd});
    }
  } else {
    if (h > 1) dims.push_back({h, hs, hd});
    dims.push_back({w, ws, wd});
    dims.push_back({c, cs, cd});
  }
  return e_.desc(chunk, dims);
}

// Result (and tile inputs): staging row = pair, column (x % P) * O + o.
std::string ImplicitConvEmitter::stageDesc(int64_t e, const std::vector<int64_t>& strides, bool out,
                                           int64_t rows) {
  int64_t hS = two ? strides[static_cast<size_t>(dn.outputSpatialDimensions[g.rank - 2])] : 0;
  int64_t wS = strides[static_cast<size_t>(dn.outputSpatialDimensions[g.rank - 1])];
  int64_t fS = strides[static_cast<size_t>(dn.outputFeatureDimension)];
  int64_t sh = p.rowPairs * p.NP * e, sw = p.NP / p.P * e;
  if (out) return boxDesc(sh, hS, sw, wS, e, fS, e, rows, p.Wout, p.O);
  return boxDesc(hS, sh, wS, sw, fS, e, e, rows, p.Wout, p.O);
}

// X: the image's H x W x C into the box's interior; the result out of the
// staging; in bands when banded.
void ImplicitConvEmitter::descriptors() {
  std::vector<int64_t> ins = storedStrides(*in.operand(0), es);
  inB = ins[static_cast<size_t>(dn.inputBatchDimension)];
  inH = two ? ins[static_cast<size_t>(dn.inputSpatialDimensions[g.rank - 2])] : 0;
  inD = three ? ins[static_cast<size_t>(dn.inputSpatialDimensions[g.rank - 3])] : 0;
  inW = ins[static_cast<size_t>(dn.inputSpatialDimensions[g.rank - 1])];
  inC = ins[static_cast<size_t>(dn.inputFeatureDimension)];
  // lhs dilation spreads the copied rows and columns over the box.
  dilH = two ? g.lhsDil[g.rank - 2] : 1;
  dilW = g.lhsDil[g.rank - 1];
  boxH = dilH * p.RS * es;
  boxW = dilW * p.C * es;
  // Batch groups: one DMA per group of the part, into its Cg channels.
  boxC = g.batchGroups > 1 ? p.Cg : p.C;
  // 3-D: the copied planes, every lhs-dilation planes of Hpb box rows.
  // Larger windows: that for the plane dimension next to the rows, one DMA
  // per copied plane of the dimensions before it (planeSrc, planeDst).
  const size_t pd = three ? g.rank - 3 : 0;
  const Copied cD = three ? copied(g.inSize[pd], g.padLow[pd], g.lhsDil[pd], g.padded[pd]) : Copied{0, 1, 0};
  const Emitter::Dim planes{cD.count, inD, (three ? g.lhsDil[pd] : 1) * p.Hpb * p.RS * es};
  int64_t firstPlane = cD.at, firstPlaneSrc = cD.first * inD;
  std::vector<std::pair<int64_t, int64_t>> srcDims, dstDims;
  const std::vector<int64_t> ps = planeStrides(g);
  for (size_t d = 0; d < pd; ++d) {
    const Copied c = copied(g.inSize[d], g.padLow[d], g.lhsDil[d], g.padded[d]);
    const int64_t is = ins[static_cast<size_t>(dn.inputSpatialDimensions[d])];
    firstPlane += c.at * ps[d];
    firstPlaneSrc += c.first * is;
    srcDims.push_back({c.count, is});
    dstDims.push_back({c.count, g.lhsDil[d] * ps[d] * p.Hpb * p.RS * es});
  }
  planeSrc = rowMajorSums(srcDims);
  planeDst = rowMajorSums(dstDims);
  // Batch groups (2-D and 1-D): the part's groups as one more dimension
  // when the descriptor has room (one DMA per image instead of gpp).
  const Emitter::Dim groups{p.gpp, g.outBatch * inB, p.Cg * es};
  const int xDims = (p.H > 1 ? 1 : 0) + 1 + (inC == es ? 0 : 1);
  mergedGroups = g.batchGroups > 1 && p.gpp > 1 && !three && xDims < target_.dma.descriptorDims;
  dX = boxDesc(inH, boxH, inW, boxW, inC, es, es, p.H, p.W, boxC,
               mergedGroups ? &groups : three && cD.count > 1 ? &planes : nullptr);
  xInterior = ((firstPlane * p.Hpb + p.padTop) * p.RS + p.padLeft * p.C) * es;
  // The first input row and column copied (negative padding crops); a part
  // of a grouped convolution: its channels of X, its features of the
  // result (and of the epilogue's inputs).
  const size_t hd = two ? g.rank - 2 : 0;
  const Copied cH = copied(two ? g.inSize[hd] : 1, two ? g.padLow[hd] : 0, dilH, two ? g.padded[hd] : 1);
  const Copied cW = copied(g.inSize[g.rank - 1], g.padLow[g.rank - 1], dilW, g.padded[g.rank - 1]);
  // A part of batch groups: its first group's images (group gi holds
  // images gi * outBatch ..).
  // A part of the output features (Og a slice of the group's) reads the
  // whole image.
  const int64_t partStride = p.Og != g.outPerGroup ? 0
                             : g.batchGroups > 1   ? p.gpp * g.outBatch * inB
                                                   : p.C * inC;
  xPart = p.part * partStride + firstPlaneSrc + cH.first * inH + cW.first * inW;
  partX = partStride;
  ost = epilogue && epilogue->physicalOut ? storedStrides(*epilogue->comp->root(), eo)
                                          : byteStrides(in.shape().dimensions(), eo);
  oB = ost[static_cast<size_t>(dn.outputBatchDimension)];
  oPart = p.part * p.O * ost[static_cast<size_t>(dn.outputFeatureDimension)];
  partO = p.O * ost[static_cast<size_t>(dn.outputFeatureDimension)];
  dOut = stageDesc(eo, ost, true, p.Hout);
  // Banded: the X rows of each input band, the result rows of each band.
  lastInRows = p.H - (p.inBands - 1) * p.inBandRows;
  lastOutRows = p.Hout - (p.outBands - 1) * p.outBandRows;
  if (p.banded) {
    dXBand = boxDesc(inH, boxH, inW, boxW, inC, es, es, p.inBandRows, p.W, boxC);
    dXLast = boxDesc(inH, boxH, inW, boxW, inC, es, es, lastInRows, p.W, boxC);
    dOutBand = stageDesc(eo, ost, true, p.outBandRows);
    dOutLast = stageDesc(eo, ost, true, lastOutRows);
  }
  oHs = two ? ost[static_cast<size_t>(dn.outputSpatialDimensions[g.rank - 2])] : 0;
  // Output plane z's offset in the result (3-D: z x its plane stride).
  std::vector<std::pair<int64_t, int64_t>> outDims;
  for (size_t d = 0; three && d + 2 < g.rank; ++d)
    outDims.push_back({g.outSize[d], ost[static_cast<size_t>(dn.outputSpatialDimensions[d])]});
  outPlaneOff = rowMajorSums(outDims);
  stageRow = p.rowPairs * p.NP * eo;
  epilogueDescriptors();
}

// Per epilogue input: its DMA, batch stride and this part's offset.
void ImplicitConvEmitter::epilogueDescriptors() {
  if (!epilogue) return;
  for (const MatmulEpilogue::Input& input : epilogue->inputs) {
    int ei = typeInfo(input.type).bytes;
    if (input.kind == MatmulEpilogue::Tile) {
      std::vector<int64_t> st = input.value->opcode() == Opcode::Bitcast
                                    ? storedStrides(*input.value, ei)
                                    : byteStrides(in.shape().dimensions(), ei);
      dIn.push_back(stageDesc(ei, st, false, p.Hout));
      inBatch.push_back(st[static_cast<size_t>(dn.outputBatchDimension)]);
      inPart.push_back(p.part * p.O * st[static_cast<size_t>(dn.outputFeatureDimension)]);
      partIn.push_back(p.O * st[static_cast<size_t>(dn.outputFeatureDimension)]);
    } else if (input.kind == MatmulEpilogue::Column) {
      dIn.push_back(
          e_.desc(static_cast<uint64_t>(p.O * ei),
                  p.P > 1 ? std::vector<Emitter::Dim>{{p.P, 0, p.O * ei}} : std::vector<Emitter::Dim>{}));
      inBatch.push_back(0);
      inPart.push_back(p.part * p.O * ei);
      partIn.push_back(p.O * ei);
    } else {
      dIn.push_back("");
      inBatch.push_back(0);
      inPart.push_back(0);
      partIn.push_back(0);
    }
  }
}

void ImplicitConvEmitter::registers() {
  rN = sreg();
  rSlot = sreg();
  rT = sreg();
  rT2 = sreg();
  rPr = sreg();
  rCnt = sreg();
  rXper = sreg();
  rPush = sreg();
  rEper = sreg();
  rAccPer = sreg();
  rPAcc = sreg();
  rPE = sreg();
  rW = sreg();
  rWp = sreg();
  rWaited = p.banded ? sreg() : -1;
  rSent = p.banded ? sreg() : -1;
  rPart = p.loopParts ? sreg() : -1;
  rPartT = p.loopParts ? sreg() : -1;
  if (epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs) {
      bool tile = input.kind == MatmulEpilogue::Tile;
      rPIn.push_back(tile ? sreg() : -1);
      rInPer.push_back(tile ? sreg() : -1);
    }
  images = p.items;
  imagesPerItem = three ? 1 : p.B;
  outsPerItem = three ? p.Dout : p.B;
  blockBytes = 8 * p.pairBytes;  // A: one block further
  eBlock = 8 * p.NP * eo;        // staging: one block further
  chunkA = p.R * blockBytes;
  chunkE = p.R * eBlock;
  imageRows = p.Hpb / p.sy * p.rowPairs;  // staging rows per stacked image
  xLoads = g.batchGroups > 1 && !mergedGroups ? p.gpp : 1;
  loads = p.banded ? 0 : static_cast<int>(xLoads * static_cast<int64_t>(planeDst.size()));
  if (epilogue)
    for (const MatmulEpilogue::Input& input : epilogue->inputs)
      if (input.kind == MatmulEpilogue::Tile) ++loads;
}

// Loads of item `rItem` (a register) into slot `rSl`: each image's X and
// tile inputs, all on sem[rSl]; an image past the batch signals instead.
void ImplicitConvEmitter::loadImage(int rItem, int rSl) {
  for (int64_t b = 0; b < imagesPerItem; ++b) {
    std::string lSkip = e_.newLabel("icnoimg"), lDone = e_.newLabel("icimgd");
    e_.op("smul {}, {}, {}", S(rW), S(rItem), imagesPerItem);
    if (b) e_.op("sadd {}, {}, {}", S(rW), S(rW), b);
    e_.op("br.ge {}, {}, {}", S(rW), g.outBatch, lSkip);
    e_.op("smul {}, {}, {}", S(rT), S(rW), inB);
    e_.op("sadd {}, {}, {}", S(rT), S(rT), base(xBuf) + xPart);
    addPart(rT, partX);
    e_.op("smul {}, {}, {}", S(rT2), S(rSl), p.xSlot);
    e_.op("sadd {}, {}, {}", S(rT2), S(rT2), p.vX + xInterior + static_cast<uint64_t>(b * p.Hpb * p.RS * es));
    if (p.banded) {
      // Slot 0, image 0: each band of rows on its own semaphore.
      for (int64_t k = 0; k < p.inBands; ++k) {
        e_.op("smov {}, {}", S(rT), base(xBuf) + xPart + k * p.inBandRows * inH);
        addPart(rT, partX);
        e_.op("{} {}, [{}], {}, sem{}", l_.dmaOp("h2v", xBuf), k + 1 < p.inBands ? dXBand : dXLast,
              p.vX + xInterior + static_cast<uint64_t>(k * p.inBandRows * boxH), l_.memRef(xBuf, S(rT)),
              5 + k);
      }
    } else {
      for (int64_t l = 0; l < xLoads; ++l) {
        if (l) {
          e_.op("sadd {}, {}, {}", S(rT), S(rT), g.outBatch * inB);
          e_.op("sadd {}, {}, {}", S(rT2), S(rT2), p.Cg * es);
        }
        for (size_t q = 0; q < planeDst.size(); ++q) {
          // The addresses step from one plane DMA to the next, and back
          // after the last.
          if (q) {
            e_.op("sadd {}, {}, {}", S(rT), S(rT), planeSrc[q] - planeSrc[q - 1]);
            e_.op("sadd {}, {}, {}", S(rT2), S(rT2), planeDst[q] - planeDst[q - 1]);
          }
          e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", xBuf), dX, S(rT2), l_.memRef(xBuf, S(rT)),
                S(rSl));
          if (q && q + 1 == planeDst.size()) {
            e_.op("ssub {}, {}, {}", S(rT), S(rT), planeSrc[q]);
            e_.op("ssub {}, {}, {}", S(rT2), S(rT2), planeDst[q]);
          }
        }
      }
    }
    if (epilogue)
      for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
        const MatmulEpilogue::Input& input = epilogue->inputs[k];
        if (input.kind != MatmulEpilogue::Tile) continue;
        e_.op("smul {}, {}, {}", S(rT), S(rW), inBatch[k]);
        e_.op("sadd {}, {}, {}", S(rT), S(rT), base(input.buf) + inPart[k]);
        addPart(rT, partIn[k]);
        e_.op("smul {}, {}, {}", S(rT2), S(rSl), p.inSlot[k]);
        e_.op("sadd {}, {}, {}", S(rT2), S(rT2),
              p.vIn[k] + static_cast<uint64_t>(b * imageRows * p.NP * typeInfo(input.type).bytes));
        e_.op("{} {}, [{}], {}, sem[{}]", l_.dmaOp("h2v", input.buf), dIn[k], S(rT2),
              l_.memRef(input.buf, S(rT)), S(rSl));
      }
    e_.op("jmp {}", lDone);
    e_.label(lSkip);
    e_.op("sem.signal sem[{}], {}", S(rSl), loads);
    e_.label(lDone);
  }
}

// Zeroes the weights' area and both X boxes (contiguous).
void ImplicitConvEmitter::zeroBoxes() {
  VReg z = l_.vconst(ElementType::F32, 0);
  uint64_t zeroEnd = p.vX + 2 * p.xSlot;
  int64_t stores = static_cast<int64_t>((zeroEnd - p.vW) / 4096);
  std::string lZero = e_.newLabel("iczero");
  e_.op("smov {}, {}", S(rT), p.vW);
  e_.op("smov {}, {}", S(rCnt), stores);
  e_.label(lZero);
  e_.op("vst {}, [{}]", V(z), S(rT));
  e_.op("sadd {}, {}, 4096", S(rT), S(rT));
  e_.op("loop {}, {}", S(rCnt), lZero);
  for (uint64_t off = p.vW + static_cast<uint64_t>(stores) * 4096; off < zeroEnd; off += 512) {
    e_.op("smov {}, {}", S(rT), off);
    e_.op("vst {}, [{}], mask=0x1", V(z), S(rT));
  }
  vfree(z);
}

// DMAs the weights into their packed places: W'[kt * 128 + e * C + c,
// j * O + o] = K[dy, e - j * sx, c, o], kt = dy * KS + (e * C + c) / 128
// (reversed taps read backwards). On sem4.
void ImplicitConvEmitter::loadWeights() {
  std::vector<int64_t> kst = storedStrides(*in.operand(1), ew);
  int64_t sy = two ? kst[static_cast<size_t>(dn.kernelSpatialDimensions[g.rank - 2])] : 0;
  int64_t sx = kst[static_cast<size_t>(dn.kernelSpatialDimensions[g.rank - 1])];
  int64_t sc = kst[static_cast<size_t>(dn.kernelInputFeatureDimension)];
  int64_t so = kst[static_cast<size_t>(dn.kernelOutputFeatureDimension)];
  int64_t srcOff = 0;
  if (two && g.reversal[g.rank - 2]) {
    srcOff += (p.kh - 1) * sy;
    sy = -sy;
  }
  // Plane tap dz's kernel offset (reversed dimensions read backwards).
  std::vector<std::pair<int64_t, int64_t>> tapDims;
  for (size_t d = 0; three && d + 2 < g.rank; ++d) {
    int64_t st = kst[static_cast<size_t>(dn.kernelSpatialDimensions[d])];
    if (g.reversal[d]) {
      srcOff += (g.kSize[d] - 1) * st;
      st = -st;
    }
    tapDims.push_back({g.kSize[d], st});
  }
  const std::vector<int64_t> tapOff = rowMajorSums(tapDims);
  if (g.reversal[g.rank - 1]) {
    srcOff += (g.kSize[g.rank - 1] - 1) * sx;
    sx = -sx;
  }
  // This part's output features; group l of the part: its Cg input
  // channels and Og outputs, a block on W''s diagonal (zero elsewhere).
  srcOff += p.part * p.O * so;
  std::vector<Emitter::Dim> dims;
  if (p.kh > 1) dims.push_back({p.kh, sy, p.KS * 128 * p.NP * ew});
  dims.push_back({g.kSize[g.rank - 1], sx, g.rhsDil[g.rank - 1] * p.C * p.NP * ew});
  dims.push_back({p.Cg, sc, p.NP * ew});
  uint64_t chunk = static_cast<uint64_t>(p.Og * ew);
  if (so != ew) {
    dims.push_back({p.Og, so, ew});
    chunk = static_cast<uint64_t>(ew);
  }
  // The part's groups as one more dimension when the descriptor has room
  // (one DMA instead of gpp: each costs an engine its fixed latency).
  int64_t groupDmas = p.gpp;
  if (p.gpp > 1 && static_cast<int>(dims.size()) < target_.dma.descriptorDims) {
    dims.insert(dims.begin(), {p.gpp, p.Og * so, (p.Cg * p.NP + p.Og) * ew});
    groupDmas = 1;
  }
  std::string dWt = e_.desc(chunk, dims);
  // 3-D: plane tap dz's kh x KS K tiles follow plane dz - 1's.
  const int64_t planeRows = p.kh * p.KS * 128 * p.NP * ew;
  for (int64_t dz = 0; dz < p.kd; ++dz)
    for (int64_t j = 0; j < p.P; ++j)
      for (int64_t l = 0; l < groupDmas; ++l) {
        e_.op("smov {}, {}", S(rT), base(kBuf) + srcOff + tapOff[static_cast<size_t>(dz)] + l * p.Og * so);
        addPart(rT, p.O * so);
        e_.op(
            "{} {}, [{}], {}, sem4", l_.dmaOp("h2v", kBuf), dWt,
            p.vW + static_cast<uint64_t>(dz * planeRows +
                                         (j * p.sx * p.C * p.NP + j * p.O + l * p.Cg * p.NP + l * p.Og) * ew),
            l_.memRef(kBuf, S(rT)));
        ++once;
      }
}

// The epilogue's scalars splatted, its columns DMAed on sem4.
void ImplicitConvEmitter::loadColumns() {
  if (!epilogue) return;
  int smem = 0;
  for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
    const MatmulEpilogue::Input& input = epilogue->inputs[k];
    if (input.kind == MatmulEpilogue::Scalar) {
      scalars[input.value] = l_.splatScalar(input.buf, input.type, smem++);
    } else if (input.kind == MatmulEpilogue::Column) {
      e_.op("smov {}, {}", S(rT), base(input.buf) + inPart[k]);
      addPart(rT, partIn[k]);
      e_.op("{} {}, [{}], {}, sem4", l_.dmaOp("h2v", input.buf), dIn[k], p.vIn[k],
            l_.memRef(input.buf, S(rT)));
      ++once;
    }
  }
}

// Job j of a period: on MXU j % G in round j / G; chunk j / J of the
// period, N tile (j % J) / KT, K tile (j % J) % KT.
ImplicitConvEmitter::Job ImplicitConvEmitter::job(int64_t rho, int64_t u) const {
  int64_t j = rho * p.G + u, t = j % p.J;
  Job jb{j / p.J, t / p.KT, t % p.KT / p.passes, 0, 0, t % p.KT, t % p.passes};
  jb.dy = jb.kt / p.KS;
  jb.ks = jb.kt % p.KS;
  return jb;
}

int64_t ImplicitConvEmitter::tileOf(int64_t rho, int64_t u) const {
  Job jb = job(rho, u);
  return jb.nt * p.KT + jb.kp;
}

bool ImplicitConvEmitter::changes(int64_t rho, int64_t u) const {
  return tileOf(rho, u) != tileOf((rho + p.rounds - 1) % p.rounds, u);
}

std::vector<ImplicitConvEmitter::Group> ImplicitConvEmitter::groupsOf(int64_t rho) const {
  std::vector<Group> gs;
  for (int64_t u = 0; u < p.G; ++u) {
    Job jb = job(rho, u);
    if (!gs.empty() && gs.back().cc == jb.cc && gs.back().nt == jb.nt) {
      gs.back().u1 = u;
      gs.back().last = jb.kp == p.KT - 1;
      continue;
    }
    gs.push_back({u, u, jb.cc, jb.nt, jb.kp == 0, jb.kp == p.KT - 1});
  }
  return gs;
}

void ImplicitConvEmitter::pushTile(int64_t rho, int64_t u) {
  Job jb = job(rho, u);
  uint64_t at = p.vW + static_cast<uint64_t>((jb.kt * 128 * p.NP + jb.nt * 128) * ew);
  std::vector<VReg> ws;
  for (int i = 0; i < 4; ++i) ws.push_back(valloc(ElementType::F32));
  e_.op("smov {}, {}", S(rW), at);
  for (int blk = 0; blk < 16; ++blk) {
    VReg w = ws[static_cast<size_t>(blk % 4)];
    e_.op("{} {}, [{} + {}], {}", ldW, V(w), S(rW), blk * 8 * p.NP * ew, p.NP * ew);
    component(w, passOf(jb.q).second);
    e_.op("mxu.wpush.bf16 mxu{}, {}", u, V(w));
  }
  for (VReg w : ws) vfree(w);
}

// Before the first round: every MXU latches round 0's tile; those whose
// tile changes at round 0 stage it again (the round's latch takes it).
// Then the mask of the run's last K slice and the A registers.
void ImplicitConvEmitter::prepareLoop() {
  if (p.passes > 1) vh = valloc(ElementType::F32);
  for (int64_t u = 0; u < p.G; ++u) {
    pushTile(0, u);
    e_.op("mxu.wlatch mxu{}", u);
    if (changes(0, u)) pushTile(0, u);
  }
  // The run's last K slice reads past the window: those lanes are zeroed.
  tailLanes = p.run % 128;
  if (tailLanes) {
    tailMask = malloc_();
    VReg t = valloc(ElementType::S32);
    e_.op("vlaneid {}", V(t));
    e_.op("vcmp.lt.s32 {}, {}, {}", M(tailMask), V(t), tailLanes);
    vfree(t);
  }
  // A registers: loaded one iteration ahead (two blocks per iteration).
  U = static_cast<int>(p.U);
  va.assign(static_cast<size_t>(U), {});
  for (int b = 0; b < U; ++b)
    for (int64_t u = 0; u < p.G; ++u) va[static_cast<size_t>(b)].push_back(valloc(ElementType::F32));
}

int64_t ImplicitConvEmitter::aOffset(int64_t rho, int64_t u) const {
  Job jb = job(rho, u);
  // 3-D: K tile row dy / kh is a plane tap, Hpb box rows per plane.
  const int64_t dz = jb.dy / p.kh, dy = jb.dy % p.kh;
  return jb.cc * chunkA +
         ((p.tapPlane[static_cast<size_t>(dz)] * p.Hpb + dy * p.rdy) * p.RS + jb.ks * 128) * es;
}

// Loads block b (b = 0 .. U-1 relative to rPush) of round rho into va.
void ImplicitConvEmitter::loadA(int64_t rho, int64_t blockOff) {
  for (int b = 0; b < U; ++b)
    for (int64_t u = 0; u < p.G; ++u) {
      VReg v = va[static_cast<size_t>(b)][static_cast<size_t>(u)];
      int64_t off = aOffset(rho, u) + (blockOff + b) * blockBytes;
      e_.op("{} {}, [{} + {}], {}", ld, V(v), S(rPush), off, p.pairBytes);
      if (tailMask >= 0 && job(rho, u).ks == p.KS - 1)
        e_.op("vsel.s32 {}, {}, {}, 0", V(v), M(tailMask), V(v));
      component(v, passOf(job(rho, u).q).first);
    }
}

// Pass q's components of A and W: emitMatmul's order, the products of the
// smallest parts first.
std::pair<int, int> ImplicitConvEmitter::passOf(int64_t q) const {
  static const std::pair<int, int> three[] = {{1, 0}, {0, 1}, {0, 0}};
  static const std::pair<int, int> six[] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
  if (p.passes == 3) return three[q];
  if (p.passes == 6) return six[q];
  return {0, 0};
}

// Component idx of an f32 value for multi-pass bf16 products: x - bf16(x),
// idx times (component 0 is x itself: the push rounds it to bf16).
void ImplicitConvEmitter::component(VReg x, int idx) {
  for (int i = 0; i < idx; ++i) {
    e_.op("vrnd.bf16 {}, {}", V(vh), V(x));
    e_.op("vsub.f32 {}, {}, {}", V(x), V(x), V(vh));
  }
}

void ImplicitConvEmitter::pushBlocks() {
  for (int b = 0; b < U; ++b)
    for (int64_t u = 0; u < p.G; ++u)
      e_.op("mxu.matmul.bf16 mxu{}, {}", u, V(va[static_cast<size_t>(b)][static_cast<size_t>(u)]));
}

// The pops and accumulator loads of U blocks of a round's groups, and the
// epilogue inputs of the blocks the round finishes. Registers are freed
// only after all U blocks, and every load and pop comes before the first
// store (stores and loads through different base registers may alias for
// the scheduler): the blocks' chains then interleave.
std::vector<ImplicitConvEmitter::Loaded> ImplicitConvEmitter::popLoads(const std::vector<Group>& gs,
                                                                       bool prevPeriod,
                                                                       std::vector<VReg>& owned) {
  std::map<std::pair<size_t, int64_t>, VReg> columnRegs;
  std::vector<Loaded> loaded;
  for (int b = 0; b < U; ++b)
    for (const Group& gr : gs) {
      Loaded l;
      int64_t accOff = ((gr.cc * p.NT + gr.nt) * p.R + b) * 4096;
      VReg a{};
      if (!gr.first) {
        a = valloc(ElementType::F32);
        e_.op("vld {}, [{} + {}]", V(a), S(rPAcc), accOff);
      }
      for (int64_t u = gr.u0; u <= gr.u1; ++u) {
        VReg r = valloc(ElementType::F32);
        e_.op("mxu.pop {}, mxu{}", V(r), u);
        l.terms.push_back(r);
      }
      // The accumulator last: the pops' sums do not wait for its load.
      if (a.r >= 0) l.terms.push_back(a);
      for (VReg v : l.terms) owned.push_back(v);
      if (gr.last && epilogue)
        for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
          const MatmulEpilogue::Input& input = epilogue->inputs[k];
          int ei = typeInfo(input.type).bytes;
          if (input.kind == MatmulEpilogue::Column) {
            auto key = std::make_pair(k, gr.nt);
            if (!columnRegs.count(key)) {
              e_.op("smov {}, {}", S(rW), p.vIn[k] + static_cast<uint64_t>(gr.nt * 128 * ei));
              owned.push_back(l_.vload(input.type, S(rW), ", 0"));
              columnRegs[key] = owned.back();
            }
            l.inputs[input.value] = columnRegs[key];
          } else if (input.kind == MatmulEpilogue::Tile) {
            int64_t off = (gr.cc * p.R + b) * 8 * p.NP * ei + gr.nt * 128 * ei -
                          (prevPeriod ? p.cpp * p.R * 8 * p.NP * ei : 0);
            owned.push_back(l_.vload(input.type, fmt::format("{} + {}", S(rPIn[k]), off),
                                     fmt::format(", {}", p.NP * ei)));
            l.inputs[input.value] = owned.back();
          }
        }
      loaded.push_back(std::move(l));
    }
  return loaded;
}

// Accumulator stores first (their sums are ready early), then the
// finished blocks through the epilogue into the staging: the one store
// slot takes them in that order.
bool ImplicitConvEmitter::popStores(const std::vector<Group>& gs, bool prevPeriod,
                                    std::vector<Loaded>& loaded, std::vector<VReg>& owned) {
  for (int pass = 0; pass < 2; ++pass) {
    size_t li = 0;
    for (int b = 0; b < U; ++b)
      for (const Group& gr : gs) {
        Loaded& l = loaded[li++];
        if (gr.last != (pass == 1)) continue;
        // Pairwise sums of the pops, then the accumulator: ((p0 + p1) + (p2 + p3)) + acc.
        std::vector<VReg> t = l.terms;
        while (t.size() > 1) {
          std::vector<VReg> next;
          for (size_t i = 0; i + 1 < t.size(); i += 2) {
            e_.op("vadd.f32 {}, {}, {}", V(t[i]), V(t[i]), V(t[i + 1]));
            next.push_back(t[i]);
          }
          if (t.size() % 2) next.push_back(t.back());
          t = next;
        }
        VReg sum = t[0];
        int64_t accOff = ((gr.cc * p.NT + gr.nt) * p.R + b) * 4096;
        if (!gr.last) {
          e_.op("vst {}, [{} + {}]", V(sum), S(rPAcc), accOff);
          continue;
        }
        VReg cv = sum;
        if (convType != ElementType::F32) {
          cv.t = convType;
          cv = l_.normalize(cv);
        }
        VReg result = cv;
        int64_t eOff = gr.cc * chunkE + b * eBlock + gr.nt * 128 * eo - (prevPeriod ? p.cpp * chunkE : 0);
        if (epilogue) {
          std::map<const Instruction*, VReg> val = scalars;
          val[epilogue->dot] = cv;
          for (auto& [inst, v] : l.inputs) val[inst] = v;
          for (const auto& up : epilogue->comp->instructions())  // views of parameters: the DMAs read them
            if (up->opcode() == Opcode::Bitcast && up->operand(0)->opcode() == Opcode::Parameter)
              val.emplace(up.get(), VReg{});
          // A physical root bitcast names the value it stores (no move).
          const Instruction* root = epilogue->comp->root();
          if (!l_.evalOnRegisters(*epilogue->comp, epilogue->physicalOut ? root : nullptr, val, owned))
            return false;
          result = val[epilogue->physicalOut ? root->operand(0) : root];
        }
        if (eOff >= 0)
          l_.vstore(result, storedType, fmt::format("{} + {}", S(rPE), eOff), fmt::format(", {}", p.NP * eo));
        else
          l_.vstore(result, storedType, fmt::format("{} - {}", S(rPE), -eOff),
                    fmt::format(", {}", p.NP * eo));
      }
  }
  return true;
}

// Pops U blocks of round rho at the pop pointers; `prevPeriod`: the round
// belongs to the period before rXper's (its staging and accumulator bases
// are one period back). The iteration's matmuls and next loads
// (`middle`) go between the pops and the stores.
bool ImplicitConvEmitter::popBlocks(int64_t rho, bool prevPeriod, const std::function<void()>& middle) {
  std::vector<Group> gs = groupsOf(rho);
  std::vector<VReg> owned;
  std::vector<Loaded> loaded = popLoads(gs, prevPeriod, owned);
  if (middle) middle();
  if (!popStores(gs, prevPeriod, loaded, owned)) return false;
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return !failed_;
}

void ImplicitConvEmitter::stepPop() {
  e_.op("sadd {}, {}, {}", S(rPAcc), S(rPAcc), U * 4096);
  e_.op("sadd {}, {}, {}", S(rPE), S(rPE), U * eBlock);
  if (epilogue)
    for (size_t k = 0; k < epilogue->inputs.size(); ++k)
      if (rPIn[k] >= 0)
        e_.op("sadd {}, {}, {}", S(rPIn[k]), S(rPIn[k]),
              U * 8 * p.NP * typeInfo(epilogue->inputs[k].type).bytes);
}

// Pop pointers at block `block` of the period at rXper's (offset -1: the
// one before).
void ImplicitConvEmitter::setPop(int64_t block, int64_t periodOffset) {
  // Accumulators alternate by period parity: rAccPer is this period's.
  if (periodOffset == 0) {
    e_.op("sadd {}, {}, {}", S(rPAcc), S(rAccPer), block * 4096);
  } else {
    // The other parity: (both bases) - this one.
    e_.op("smov {}, {}", S(rPAcc), 2 * p.vAcc + p.accPeriod + static_cast<uint64_t>(block * 4096));
    e_.op("ssub {}, {}, {}", S(rPAcc), S(rPAcc), S(rAccPer));
  }
  e_.op("sadd {}, {}, {}", S(rPE), S(rEper), block * eBlock);
  if (epilogue)
    for (size_t k = 0; k < epilogue->inputs.size(); ++k)
      if (rPIn[k] >= 0)
        e_.op("sadd {}, {}, {}", S(rPIn[k]), S(rInPer[k]),
              block * 8 * p.NP * typeInfo(epilogue->inputs[k].type).bytes);
}

// The head of the image loop: the next item's loads into the other slot,
// the wait for this one's and for the staging slot, the period bases.
void ImplicitConvEmitter::imageStart() {
  lImage = e_.newLabel("icimage");
  lPeriod = e_.newLabel("icperiod");
  lNoNext = e_.newLabel("icnonext");
  lNoWait = e_.newLabel("icfree");
  e_.label(lImage);
  e_.op("sand {}, {}, 1", S(rSlot), S(rN));
  e_.op("sadd {}, {}, 1", S(rT), S(rN));
  e_.op("br.ge {}, {}, {}", S(rT), images, lNoNext);
  {
    int rNext = rCnt, rOther = rPr;  // free here
    e_.op("smov {}, {}", S(rNext), S(rT));
    e_.op("sxor {}, {}, 1", S(rOther), S(rSlot));
    loadImage(rNext, rOther);
  }
  e_.label(lNoNext);
  if (loads) e_.op("sem.wait sem[{}], {}", S(rSlot), loads * imagesPerItem);
  if (p.banded) {
    e_.op("smov {}, 0", S(rWaited));
    e_.op("smov {}, 0", S(rSent));
  }
  // The staging slot was last written out by image n - 2.
  e_.op("br.lt {}, 2, {}", S(rN), lNoWait);
  e_.op("sadd {}, {}, 2", S(rT), S(rSlot));
  e_.op("sem.wait sem[{}], {}", S(rT), outsPerItem);
  e_.label(lNoWait);
  // Period bases.
  e_.op("smul {}, {}, {}", S(rXper), S(rSlot), p.xSlot);
  e_.op("sadd {}, {}, {}", S(rXper), S(rXper), p.vX);
  e_.op("smul {}, {}, {}", S(rEper), S(rSlot), p.eSlot);
  e_.op("sadd {}, {}, {}", S(rEper), S(rEper), p.vE);
  if (epilogue)
    for (size_t k = 0; k < epilogue->inputs.size(); ++k)
      if (rInPer[k] >= 0) {
        e_.op("smul {}, {}, {}", S(rInPer[k]), S(rSlot), p.inSlot[k]);
        e_.op("sadd {}, {}, {}", S(rInPer[k]), S(rInPer[k]), p.vIn[k]);
      }
  e_.op("smov {}, {}", S(rAccPer), p.vAcc);
  e_.op("smov {}, 0", S(rPr));
  e_.label(lPeriod);
}

// Banded: the input rows this period's blocks read for results kept run
// through the last kernel row of output row ((rPr + 1) * cpp * R * 8 - 1)
// / rowPairs; waits for the bands up to that row's.
void ImplicitConvEmitter::waitBands() {
  std::string lWait = e_.newLabel("icband"), lHave = e_.newLabel("ichave"), lLow = e_.newLabel("iclow"),
              lHigh = e_.newLabel("ichigh");
  e_.op("sadd {}, {}, 1", S(rT), S(rPr));
  e_.op("smul {}, {}, {}", S(rT), S(rT), p.cpp * p.R * 8);
  e_.op("ssub {}, {}, 1", S(rT), S(rT));
  e_.op("sdiv {}, {}, {}", S(rT), S(rT), p.rowPairs);
  e_.op("smul {}, {}, {}", S(rT), S(rT), p.sy);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), (p.kh - 1) * p.rdy - p.padTop);
  e_.op("br.ge {}, 0, {}", S(rT), lLow);
  e_.op("smov {}, 0", S(rT));
  e_.label(lLow);
  if (dilH > 1) e_.op("sdiv {}, {}, {}", S(rT), S(rT), dilH);  // box row -> copied row
  e_.op("sdiv {}, {}, {}", S(rT), S(rT), p.inBandRows);
  e_.op("br.lt {}, {}, {}", S(rT), p.inBands, lHigh);
  e_.op("smov {}, {}", S(rT), p.inBands - 1);
  e_.label(lHigh);
  e_.label(lWait);
  e_.op("br.lt {}, {}, {}", S(rT), S(rWaited), lHave);
  e_.op("sadd {}, {}, 5", S(rT2), S(rWaited));
  e_.op("sem.wait sem[{}]", S(rT2));
  e_.op("sadd {}, {}, 1", S(rWaited), S(rWaited));
  e_.op("jmp {}", lWait);
  e_.label(lHave);
}

// Spread: stages 16 / dIters rows of the next round's changing tiles per
// loop A iteration.
void ImplicitConvEmitter::stageSome(int64_t nextRho, bool spread) {
  if (!spread) return;
  const int64_t rows = 16 / dIters;
  std::vector<VReg> ws;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t u = 0; u < p.G; ++u) {
      if (!changes(nextRho, u)) continue;
      Job jb = job(nextRho, u);
      int64_t at = static_cast<int64_t>(p.vW) + (jb.kt * 128 * p.NP + jb.nt * 128) * ew + r * 8 * p.NP * ew;
      VReg w = valloc(ElementType::F32);
      ws.push_back(w);
      e_.op("{} {}, [{} + {}], {}", ldW, V(w), S(rWp), at, p.NP * ew);
      component(w, passOf(jb.q).second);
      e_.op("mxu.wpush.bf16 mxu{}, {}", u, V(w));
    }
  e_.op("sadd {}, {}, {}", S(rWp), S(rWp), rows * 8 * p.NP * ew);
  for (VReg w : ws) vfree(w);
}

// Loop A of round rho: push blocks 0 .. D-1, pop the previous round's
// last D (unless `withPops` is false: the image's first period).
bool ImplicitConvEmitter::loopA(int64_t rho, bool withPops, bool spread) {
  const int64_t nextRho = (rho + 1) % p.rounds, prev = (rho + p.rounds - 1) % p.rounds;
  std::string l = e_.newLabel("icfill");
  e_.op("smov {}, {}", S(rCnt), dIters);
  if (spread) e_.op("smov {}, 0", S(rWp));
  e_.label(l);
  auto pushes = [&]() {
    pushBlocks();
    stageSome(nextRho, spread);
    e_.op("sadd {}, {}, {}", S(rPush), S(rPush), U * blockBytes);
    loadA(rho, 0);
  };
  if (withPops) {
    if (!popBlocks(prev, rho == 0, pushes)) return false;
    stepPop();
  } else {
    pushes();
  }
  e_.op("loop {}, {}", S(rCnt), l);
  return true;
}

// One round of a period: latch its tiles, stage the next round's, loop A
// and loop B (push blocks D .. R-1, pop this round's 0 .. R-D-1).
bool ImplicitConvEmitter::round(int64_t rho) {
  for (int64_t u = 0; u < p.G; ++u)
    if (changes(rho, u)) e_.op("mxu.wlatch mxu{}", u);
  // The next round's tiles are staged during loop A, 16 / dIters row
  // blocks per MXU per iteration, when that divides; else here.
  const int64_t nextRho = (rho + 1) % p.rounds;
  const bool spread = 16 % dIters == 0 && (16 / dIters) * p.G <= 8;
  if (!spread)
    for (int64_t u = 0; u < p.G; ++u)
      if (changes(nextRho, u)) pushTile(nextRho, u);
  e_.op("smov {}, {}", S(rPush), S(rXper));
  loadA(rho, 0);
  if (rho == 0) {
    std::string lFirst = e_.newLabel("icfirst"), lDone = e_.newLabel("icfilled");
    e_.op("br.eq {}, 0, {}", S(rPr), lFirst);
    setPop(p.R - p.D, -1);
    // The previous period's staging: rEper - period bytes (eOff handles it).
    if (!loopA(rho, true, spread)) return false;
    e_.op("jmp {}", lDone);
    e_.label(lFirst);
    if (!loopA(rho, false, spread)) return false;
    e_.label(lDone);
  } else {
    setPop(p.R - p.D, 0);
    if (!loopA(rho, true, spread)) return false;
  }
  if (iters > dIters) {
    setPop(0, 0);
    std::string l = e_.newLabel("icsteady");
    e_.op("smov {}, {}", S(rCnt), iters - dIters);
    e_.label(l);
    auto pushes = [&]() {
      pushBlocks();
      e_.op("sadd {}, {}, {}", S(rPush), S(rPush), U * blockBytes);
      loadA(rho, 0);
    };
    if (!popBlocks(rho, false, pushes)) return false;
    stepPop();
    e_.op("loop {}, {}", S(rCnt), l);
  }
  return true;
}

// Next period: bases one period further, accumulator parity flips.
void ImplicitConvEmitter::nextPeriod() {
  e_.op("sadd {}, {}, {}", S(rXper), S(rXper), p.cpp * chunkA);
  e_.op("sadd {}, {}, {}", S(rEper), S(rEper), p.cpp * chunkE);
  if (epilogue)
    for (size_t k = 0; k < epilogue->inputs.size(); ++k)
      if (rInPer[k] >= 0)
        e_.op("sadd {}, {}, {}", S(rInPer[k]), S(rInPer[k]),
              p.cpp * p.R * 8 * p.NP * typeInfo(epilogue->inputs[k].type).bytes);
  e_.op("smov {}, {}", S(rT), 2 * p.vAcc + p.accPeriod);
  e_.op("ssub {}, {}, {}", S(rAccPer), S(rT), S(rAccPer));
  e_.op("sadd {}, {}, 1", S(rPr), S(rPr));
}

// One result band out: band rSent from the staging of slot 0.
void ImplicitConvEmitter::sendBand(const std::string& desc) {
  const int semOutBands = 5 + static_cast<int>(p.inBands);
  e_.op("smul {}, {}, {}", S(rT), S(rSent), p.outBandRows * oHs);
  e_.op("sadd {}, {}, {}", S(rT), S(rT), base(dst) + oPart);
  addPart(rT, partO);
  e_.op("smul {}, {}, {}", S(rT2), S(rSent), p.outBandRows * stageRow);
  e_.op("sadd {}, {}, {}", S(rT2), S(rT2), p.vE);
  e_.op("{} {}, {}, [{}], sem{}", l_.dmaOp("v2h", dst), desc, l_.memRef(dst, S(rT)), S(rT2), semOutBands);
  e_.op("sadd {}, {}, 1", S(rSent), S(rSent));
}

// Blocks finished so far: all but the last D of the periods done. The
// whole bands of output rows among them leave now (the last band, maybe
// shorter, after the drain).
void ImplicitConvEmitter::sendBands() {
  std::string lSend = e_.newLabel("icsend"), lSent = e_.newLabel("icsent");
  e_.op("smul {}, {}, {}", S(rCnt), S(rPr), p.cpp * p.R);
  e_.op("ssub {}, {}, {}", S(rCnt), S(rCnt), p.D);
  e_.op("smul {}, {}, 8", S(rCnt), S(rCnt));
  e_.op("br.lt {}, 0, {}", S(rCnt), lSent);
  e_.op("sdiv {}, {}, {}", S(rCnt), S(rCnt), p.rowPairs * p.outBandRows);
  e_.op("br.lt {}, {}, {}", S(rCnt), p.outBands, lSend);
  e_.op("smov {}, {}", S(rCnt), p.outBands - 1);
  e_.label(lSend);
  e_.op("br.ge {}, {}, {}", S(rSent), S(rCnt), lSent);
  sendBand(dOutBand);
  e_.op("jmp {}", lSend);
  e_.label(lSent);
}

// Drain: the last round's last D blocks (of the period before rXper's);
// banded, the bands not sent yet, the last one its own size.
bool ImplicitConvEmitter::drain() {
  {
    setPop(p.R - p.D, -1);
    std::string l = e_.newLabel("icdrain");
    e_.op("smov {}, {}", S(rCnt), dIters);
    e_.label(l);
    if (!popBlocks(p.rounds - 1, true, nullptr)) return false;
    stepPop();
    e_.op("loop {}, {}", S(rCnt), l);
  }
  if (p.banded) {
    std::string lRest = e_.newLabel("icrest"), lLast = e_.newLabel("iclastband");
    e_.label(lRest);
    e_.op("br.ge {}, {}, {}", S(rSent), p.outBands - 1, lLast);
    sendBand(dOutBand);
    e_.op("jmp {}", lRest);
    e_.label(lLast);
    sendBand(dOutLast);
    e_.op("sem.wait sem{}, {}", 5 + static_cast<int>(p.inBands), p.outBands);
  }
  return true;
}

// The item's images out (sem 2 + slot); one past the batch signals.
void ImplicitConvEmitter::imageOut() {
  e_.op("sadd {}, {}, 2", S(rCnt), S(rSlot));
  if (three) {
    // Output plane z is the stacked plane outPlane[z] of the staging.
    for (int64_t z = 0; z < p.Dout; ++z) {
      const size_t zi = static_cast<size_t>(z);
      e_.op("smul {}, {}, {}", S(rT), S(rN), oB);
      e_.op("sadd {}, {}, {}", S(rT), S(rT), base(dst) + oPart + outPlaneOff[zi]);
      addPart(rT, partO);
      e_.op("smul {}, {}, {}", S(rT2), S(rSlot), p.eSlot);
      e_.op("sadd {}, {}, {}", S(rT2), S(rT2),
            p.vE + static_cast<uint64_t>(p.outPlane[zi] * imageRows * p.NP * eo));
      e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", dst), dOut, l_.memRef(dst, S(rT)), S(rT2), S(rCnt));
    }
    return;
  }
  for (int64_t b = 0; b < p.B && !p.banded; ++b) {
    std::string lSkip = e_.newLabel("icnoout"), lDone = e_.newLabel("icoutd");
    e_.op("smul {}, {}, {}", S(rW), S(rN), p.B);
    if (b) e_.op("sadd {}, {}, {}", S(rW), S(rW), b);
    e_.op("br.ge {}, {}, {}", S(rW), g.outBatch, lSkip);
    e_.op("smul {}, {}, {}", S(rT), S(rW), oB);
    e_.op("sadd {}, {}, {}", S(rT), S(rT), base(dst) + oPart);
    addPart(rT, partO);
    e_.op("smul {}, {}, {}", S(rT2), S(rSlot), p.eSlot);
    e_.op("sadd {}, {}, {}", S(rT2), S(rT2), p.vE + static_cast<uint64_t>(b * imageRows * p.NP * eo));
    e_.op("{} {}, {}, [{}], sem[{}]", l_.dmaOp("v2h", dst), dOut, l_.memRef(dst, S(rT)), S(rT2), S(rCnt));
    e_.op("jmp {}", lDone);
    e_.label(lSkip);
    e_.op("sem.signal sem[{}]", S(rCnt));
    e_.label(lDone);
  }
}

// After the image loop: the last stores out; tiles staged for a next
// round that never came latched, so the next kernel finds every staging
// buffer empty.
void ImplicitConvEmitter::finish() {
  if (!p.banded) {
    e_.op("sem.wait sem{}, {}", 2 + ((images - 1) & 1), outsPerItem);
    if (images >= 2) e_.op("sem.wait sem{}, {}", 2 + ((images - 2) & 1), outsPerItem);
  }
  for (int64_t u = 0; u < p.G; ++u)
    if (changes(0, u)) e_.op("mxu.wlatch mxu{}", u);
  for (auto& [inst, v] : scalars) vfree(v);
  if (tailMask >= 0) masks_.put(tailMask);
}

bool ImplicitConvEmitter::run() {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  two = g.rank >= 2;
  three = g.rank >= 3;
  storedType = epilogue ? epilogue->outType : g.outType;
  convType = g.outType;
  es = typeInfo(g.inType).bytes;
  ew = typeInfo(g.kType).bytes;
  eo = typeInfo(storedType).bytes;
  xBuf = leaves_[in.operand(0)][0];
  kBuf = leaves_[in.operand(1)][0];
  dst = epilogue ? epilogue->outBuf : leaves_[&in][0];
  descriptors();
  registers();
  zeroBoxes();
  return parts();
}

// Looped parts: the offsets of part rPart added to this copy's addresses.
void ImplicitConvEmitter::addPart(int reg, int64_t stride) {
  if (!p.loopParts) return;
  e_.op("smul {}, {}, {}", S(rPartT), S(rPart), stride);
  e_.op("sadd {}, {}, {}", S(reg), S(reg), S(rPartT));
}

// The part's weights, images and results (each part, when looped: the
// weights and boxes keep their zeros from one part to the next, as every
// part's DMAs write the same places).
bool ImplicitConvEmitter::parts() {
  std::string lPart;
  if (p.loopParts) {
    lPart = e_.newLabel("icpart");
    e_.op("smov {}, 0", S(rPart));
    e_.label(lPart);
  }
  loadWeights();
  loadColumns();
  // The first image streams in while the weights land.
  e_.op("smov {}, 0", S(rN));
  e_.op("smov {}, 0", S(rSlot));
  loadImage(rN, rSlot);
  e_.op("sem.wait sem4, {}", once);
  ld = loadMnemonic(g.inType);
  ldW = loadMnemonic(g.kType);
  prepareLoop();
  iters = p.R / U;
  dIters = p.D / U;
  // The image loop: periods of rounds, each period's results out in bands
  // as they finish (banded), the item's images out after the drain.
  imageStart();
  if (p.banded) waitBands();
  for (int64_t rho = 0; rho < p.rounds; ++rho)
    if (!round(rho)) return false;
  nextPeriod();
  if (p.banded && p.outBands > 1) sendBands();
  e_.op("br.lt {}, {}, {}", S(rPr), p.periods, lPeriod);
  if (!drain()) return false;
  imageOut();
  e_.op("sadd {}, {}, 1", S(rN), S(rN));
  e_.op("br.lt {}, {}, {}", S(rN), images, lImage);
  finish();
  if (p.loopParts) {
    e_.op("sadd {}, {}, 1", S(rPart), S(rPart));
    e_.op("br.lt {}, {}, {}", S(rPart), p.parts, lPart);
  }
  return !failed_;
}

bool Lowerer::emitImplicitConv(const Instruction& in, const ConvGeometry& g, const ImplicitConvPlan& p,
                               const MatmulEpilogue* epilogue) {
  return ImplicitConvEmitter(*this, in, g, p, epilogue).run();
}

}  // namespace tpu::codegen
