// reduce-window and select-and-scatter. Both walk the window taps (unrolled
// at compile time): for one tap, the outputs whose input position is a real
// element (not padding, not a base-dilation hole) form a strided box of the
// output, and the elements they read form a strided box of the input. Each
// tap is a strided DMA gather of those boxes into dense scratch, a
// streaming vector kernel (the called computation), and a DMA scatter back.
// Padding positions are skipped, as the interpreter (and XLA's evaluator)
// do, rather than folded in as init values.
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// The outputs (and their inputs) one window tap touches, in elements.
struct TapBox {
  std::vector<int64_t> counts, inStrides, outStrides;
  int64_t inOff = 0, outOff = 0, count = 0;
  bool full = false;  // every output, in order: no gather of the accumulator
};

TapBox tapBox(const std::vector<int64_t>& inDims, const std::vector<int64_t>& outDims,
              const std::vector<hlo::WindowDimension>& win, const std::vector<int64_t>& tap) {
  TapBox b;
  std::vector<int64_t> is = rowMajorStrides(inDims), os = rowMajorStrides(outDims);
  b.full = true;
  b.count = 1;
  for (size_t d = 0; d < inDims.size(); ++d) {
    const hlo::WindowDimension& w = win[d];
    int64_t last = (inDims[d] - 1) * w.baseDilation;
    int64_t first = -1, second = -1, n = 0;
    for (int64_t o = 0; o < outDims[d]; ++o) {
      int64_t pos = o * w.stride + tap[d] * w.windowDilation - w.paddingLow;
      if (inDims[d] <= 0 || pos < 0 || pos > last || pos % w.baseDilation != 0) continue;
      if (first < 0) first = o;
      else if (second < 0) second = o;
      ++n;
    }
    if (n == 0) {
      b.count = 0;
      return b;
    }
    // Valid positions are an arithmetic progression (pos % baseDilation is
    // periodic in o), so the box is strided.
    int64_t step = n > 1 ? second - first : 1;
    int64_t pos0 = first * w.stride + tap[d] * w.windowDilation - w.paddingLow;
    b.counts.push_back(n);
    b.inOff += pos0 / w.baseDilation * is[d];
    b.inStrides.push_back(step * w.stride / w.baseDilation * is[d]);
    b.outOff += first * os[d];
    b.outStrides.push_back(step * os[d]);
    b.count *= n;
    b.full = b.full && n == outDims[d] && step == 1;
  }
  return b;
}

std::vector<int64_t> scaled(const std::vector<int64_t>& v, int64_t f) {
  std::vector<int64_t> r = v;
  for (int64_t& x : r) x *= f;
  return r;
}

// Row-major tap coordinates of tap number t.
std::vector<int64_t> tapCoords(const std::vector<hlo::WindowDimension>& win, int64_t t) {
  std::vector<int64_t> c(win.size());
  for (size_t d = win.size(); d-- > 0;) {
    c[d] = t % win[d].size;
    t /= win[d].size;
  }
  return c;
}

}  // namespace

bool Lowerer::lowerReduceWindow(const Instruction& in) {
  beginKernel(in, "reduce-window");
  int64_t nv = in.operandCount() / 2;
  const Computation* reducer = in.toApply();
  if (nv == 0 || in.operandCount() % 2 != 0 || !reducer)
    return fail(in, "llo-gen: reduce-window needs N inputs, N init values and to_apply");
  const Shape& xs = in.operand(0)->shape();
  const std::vector<int64_t>& inDims = xs.dimensions();
  std::vector<hlo::WindowDimension> win =
      in.attrs().window ? in.attrs().window->dimensions : std::vector<hlo::WindowDimension>(inDims.size());
  if (win.size() != inDims.size())
    return fail(in, "llo-gen: reduce-window window rank differs from the input rank");
  std::vector<int> inBufs, initBufs, outBufs = leaves_[&in];
  for (int64_t j = 0; j < nv; ++j) {
    inBufs.push_back(leaves_[in.operand(j)][0]);
    initBufs.push_back(leaves_[in.operand(nv + j)][0]);
  }
  const std::vector<int64_t> outDims = bufs_[outBufs[0]].dims;  // a copy: tempBuf grows bufs_
  int64_t outCount = product(outDims), taps = 1;
  for (const auto& w : win) taps *= w.size;
  for (int64_t j = 0; j < nv; ++j)
    if (!fill(outBufs[j], 0, outCount, bufs_[outBufs[j]].type, initBufs[j], 0)) return false;
  // Dense scratch for one tap: the accumulator box and the candidates.
  std::vector<int> accT(nv), candT(nv);
  if (outCount > 0)
    for (int64_t j = 0; j < nv; ++j) {
      accT[j] = tempBuf(bufs_[outBufs[j]].type, {outCount});
      candT[j] = tempBuf(bufs_[inBufs[j]].type, {outCount});
    }
  uint64_t bytes = 0;
  for (int64_t t = 0; t < taps && outCount > 0; ++t) {
    TapBox b = tapBox(inDims, outDims, win, tapCoords(win, t));
    if (b.count == 0) continue;
    e_.comment(fmt::format("window tap {}: {} outputs", t, b.count));
    std::vector<EwInput> ins;
    std::vector<EwOutput> outs;
    std::vector<int> acc(nv);
    for (int64_t j = 0; j < nv; ++j) {
      int es = typeInfo(bufs_[inBufs[j]].type).bytes;
      std::vector<int64_t> dense = byteStrides(b.counts, es);
      emitCopy(candT[j], 0, inBufs[j], b.inOff * es, b.counts, dense, scaled(b.inStrides, es), es);
      acc[j] = b.full ? outBufs[j] : accT[j];
      if (!b.full)
        emitCopy(accT[j], 0, outBufs[j], b.outOff * es, b.counts, dense, scaled(b.outStrides, es), es);
      bytes += 3 * static_cast<uint64_t>(b.count * es);
    }
    for (int64_t j = 0; j < nv; ++j) ins.push_back({EwInput::Full, acc[j], 0, bufs_[outBufs[j]].type});
    for (int64_t j = 0; j < nv; ++j) ins.push_back({EwInput::Full, candT[j], 0, bufs_[inBufs[j]].type});
    for (int64_t j = 0; j < nv; ++j) outs.push_back({acc[j], 0, bufs_[outBufs[j]].type});
    bool ok = emitElementwise(b.count, ins, outs, [&](const std::vector<VReg>& v) {
      std::vector<VReg> res;
      if (!lowerComputation(*reducer, v, res) || res.size() != static_cast<size_t>(nv)) {
        if (!failed_) fail(in, "llo-gen: reduce-window reducer returns the wrong number of values");
        res.assign(static_cast<size_t>(nv), VReg{0, ElementType::F32});
      }
      return res;
    });
    if (!ok) return false;
    if (!b.full)
      for (int64_t j = 0; j < nv; ++j) {
        int es = typeInfo(bufs_[outBufs[j]].type).bytes;
        emitCopy(outBufs[j], b.outOff * es, accT[j], 0, b.counts, scaled(b.outStrides, es),
                 byteStrides(b.counts, es), es);
      }
  }
  endKernel(static_cast<double>(outCount * taps * nv), bytes, 0);
  return !failed_;
}

bool Lowerer::lowerSelectAndScatter(const Instruction& in) {
  beginKernel(in, "select-and-scatter");
  const auto& called = in.calledComputations();
  if (in.operandCount() != 3 || called.size() != 2 || !called[0] || !called[1])
    return fail(in,
                "llo-gen: select-and-scatter needs operand, source, init and select/scatter computations");
  const Computation& select = *called[0];
  const Computation& scatter = *called[1];
  const Instruction* x = in.operand(0);
  int xBuf = leaves_[x][0], srcBuf = leaves_[in.operand(1)][0], initBuf = leaves_[in.operand(2)][0];
  int outBuf = leaves_[&in][0];
  ElementType t = x->shape().elementType();
  int es = typeInfo(t).bytes;
  const std::vector<int64_t>& inDims = x->shape().dimensions();
  const std::vector<int64_t>& outDims = in.operand(1)->shape().dimensions();
  std::vector<hlo::WindowDimension> win =
      in.attrs().window ? in.attrs().window->dimensions : std::vector<hlo::WindowDimension>(inDims.size());
  if (win.size() != inDims.size() || outDims.size() != inDims.size())
    return fail(in, "llo-gen: select-and-scatter window rank differs from the operand rank");
  int64_t outCount = product(outDims), taps = 1;
  for (const auto& w : win) taps *= w.size;
  if (!fill(outBuf, 0, product(inDims), t, initBuf, 0)) return false;
  if (outCount == 0 || product(inDims) == 0) {
    endKernel(0, bufs_[outBuf].bytes, 0);
    return !failed_;
  }
  // Per window: the selected value and the tap that holds it (-1: none yet).
  int cur = tempBuf(t, {outCount}), tap = tempBuf(ElementType::S32, {outCount});
  int curT = tempBuf(t, {outCount}), tapT = tempBuf(ElementType::S32, {outCount});
  int cand = tempBuf(t, {outCount});
  auto constFill = [&](int buf, ElementType ty, uint32_t bits) {
    return emitElementwise(outCount, {}, {EwOutput{buf, 0, ty}},
                           [&](const std::vector<VReg>&) { return std::vector<VReg>{vconst(ty, bits)}; });
  };
  if (!constFill(cur, t, 0) || !constFill(tap, ElementType::S32, 0xffffffffu)) return false;
  std::vector<TapBox> boxes;
  for (int64_t w = 0; w < taps; ++w) boxes.push_back(tapBox(inDims, outDims, win, tapCoords(win, w)));
  // Phase 1, taps in window order: a later element replaces the current
  // pick when select(current, candidate) is false (so the first of equal
  // maxima wins under GE).
  for (int64_t w = 0; w < taps; ++w) {
    const TapBox& b = boxes[static_cast<size_t>(w)];
    if (b.count == 0) continue;
    e_.comment(fmt::format("select: window tap {}", w));
    std::vector<int64_t> dense = byteStrides(b.counts, es), dense4 = byteStrides(b.counts, 4);
    emitCopy(cand, 0, xBuf, b.inOff * es, b.counts, dense, scaled(b.inStrides, es), es);
    int c = b.full ? cur : curT, k = b.full ? tap : tapT;
    if (!b.full) {
      emitCopy(curT, 0, cur, b.outOff * es, b.counts, dense, scaled(b.outStrides, es), es);
      emitCopy(tapT, 0, tap, b.outOff * 4, b.counts, dense4, scaled(b.outStrides, 4), 4);
    }
    bool ok = emitElementwise(
        b.count,
        {{EwInput::Full, c, 0, t}, {EwInput::Full, k, 0, ElementType::S32}, {EwInput::Full, cand, 0, t}},
        {{c, 0, t}, {k, 0, ElementType::S32}}, [&](const std::vector<VReg>& v) {
          std::vector<VReg> keep;
          if (!lowerComputation(select, {v[0], v[2]}, keep) || keep.size() != 1) {
            if (!failed_) fail(in, "llo-gen: select computation must return one pred");
            return std::vector<VReg>{VReg{0, t}, VReg{0, ElementType::S32}};
          }
          int take = malloc_(), none = malloc_();
          e_.op("vcmp.eq.s32 {}, {}, 0", M(take), V(keep[0]));
          e_.op("vcmp.lt.s32 {}, {}, 0", M(none), V(v[1]));
          e_.op("mor {}, {}, {}", M(take), M(take), M(none));
          VReg nc = valloc(t), nk = valloc(ElementType::S32);
          e_.op("vsel.s32 {}, {}, {}, {}", V(nc), M(take), V(v[2]), V(v[0]));
          if (nc.hi >= 0) e_.op("vsel.s32 {}, {}, {}, {}", H(nc), M(take), H(v[2]), H(v[0]));
          VReg wv = vconst(ElementType::S32, static_cast<uint32_t>(w));
          e_.op("vsel.s32 {}, {}, {}, {}", V(nk), M(take), V(wv), V(v[1]));
          vfree(wv);
          masks_.put(take);
          masks_.put(none);
          vfree(keep[0]);
          return std::vector<VReg>{nc, nk};
        });
    if (!ok) return false;
    if (!b.full) {
      emitCopy(cur, b.outOff * es, curT, 0, b.counts, scaled(b.outStrides, es), dense, es);
      emitCopy(tap, b.outOff * 4, tapT, 0, b.counts, scaled(b.outStrides, 4), dense4, 4);
    }
  }
  // Phase 2, taps in reverse order: an operand element is hit by windows
  // in increasing row-major order exactly when their selected taps
  // decrease, so each element accumulates its sources in the order the
  // interpreter applies them. Within one tap no two windows share an element.
  int srcT = curT, outT = cand;
  for (int64_t w = taps; w-- > 0;) {
    const TapBox& b = boxes[static_cast<size_t>(w)];
    if (b.count == 0) continue;
    e_.comment(fmt::format("scatter: window tap {}", w));
    std::vector<int64_t> dense = byteStrides(b.counts, es), dense4 = byteStrides(b.counts, 4);
    int k = tap, s = srcBuf;
    if (!b.full) {
      emitCopy(tapT, 0, tap, b.outOff * 4, b.counts, dense4, scaled(b.outStrides, 4), 4);
      emitCopy(srcT, 0, srcBuf, b.outOff * es, b.counts, dense, scaled(b.outStrides, es), es);
      k = tapT;
      s = srcT;
    }
    emitCopy(outT, 0, outBuf, b.inOff * es, b.counts, dense, scaled(b.inStrides, es), es);
    bool ok = emitElementwise(
        b.count,
        {{EwInput::Full, outT, 0, t}, {EwInput::Full, s, 0, t}, {EwInput::Full, k, 0, ElementType::S32}},
        {{outT, 0, t}}, [&](const std::vector<VReg>& v) {
          std::vector<VReg> r;
          if (!lowerComputation(scatter, {v[0], v[1]}, r) || r.size() != 1) {
            if (!failed_) fail(in, "llo-gen: scatter computation must return one value");
            return std::vector<VReg>{VReg{0, t}};
          }
          int m = malloc_();
          e_.op("vcmp.eq.s32 {}, {}, {}", M(m), V(v[2]), w);
          VReg d = valloc(t);
          e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(r[0]), V(v[0]));
          if (d.hi >= 0) e_.op("vsel.s32 {}, {}, {}, {}", H(d), M(m), H(r[0]), H(v[0]));
          masks_.put(m);
          vfree(r[0]);
          return std::vector<VReg>{d};
        });
    if (!ok) return false;
    emitCopy(outBuf, b.inOff * es, outT, 0, b.counts, scaled(b.inStrides, es), dense, es);
  }
  endKernel(static_cast<double>(outCount * taps * 2), 4 * bufs_[outBuf].bytes, 0);
  return !failed_;
}

}  // namespace tpu::codegen
