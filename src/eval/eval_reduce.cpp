// reduce, reduce-window, select-and-scatter, gather, scatter, sort, topk.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "eval/interp.h"
#include "eval/kernels.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;

namespace {

std::vector<int64_t> permFor(const std::vector<int64_t>& front, int64_t rank) {
  std::vector<int64_t> perm = front;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(front.begin(), front.end(), d) == front.end()) perm.push_back(d);
  return perm;
}

Value transposed(const Value& x, const std::vector<int64_t>& perm) {
  bool id = true;
  for (size_t i = 0; i < perm.size(); ++i) id &= perm[i] == static_cast<int64_t>(i);
  if (id) return x;
  std::vector<int64_t> dims(perm.size()), inStrides(perm.size());
  std::vector<int64_t> xs = rowMajorStrides(x.dims());
  for (size_t i = 0; i < perm.size(); ++i) {
    dims[i] = x.dims()[static_cast<size_t>(perm[i])];
    inStrides[i] = xs[static_cast<size_t>(perm[i])];
  }
  Value out = Value::array(x.type(), dims);
  if (out.count() > 0)
    stridedCopy(static_cast<size_t>(x.elementBytes()), dims, x.raw(), 0, inStrides, out.mutableRaw(), 0,
                rowMajorStrides(dims));
  return out;
}

template <size_t N>
struct Bytes {
  uint8_t b[N];
};

template <size_t N>
void gatherLoop(const void* src, const int64_t* offsets, void* dst, int64_t n) {
  auto* s = static_cast<const Bytes<N>*>(src);
  auto* d = static_cast<Bytes<N>*>(dst);
  for (int64_t i = 0; i < n; ++i)
    if (offsets[i] >= 0) d[i] = s[offsets[i]];
}

// dst[i] = src[offsets[i]] for offsets >= 0 (others untouched).
void gatherElements(int bytes, const void* src, const int64_t* offsets, void* dst, int64_t n) {
  switch (bytes) {
    case 1: gatherLoop<1>(src, offsets, dst, n); break;
    case 2: gatherLoop<2>(src, offsets, dst, n); break;
    case 4: gatherLoop<4>(src, offsets, dst, n); break;
    case 8: gatherLoop<8>(src, offsets, dst, n); break;
    default: gatherLoop<16>(src, offsets, dst, n); break;
  }
}

// Window geometry shared by reduce-window and select-and-scatter: for one
// window position, the operand offset each output reads (-1 = padding or a
// base-dilation hole).
struct WindowGeometry {
  std::vector<int64_t> inDims, outDims, inStrides;
  std::vector<hlo::WindowDimension> win;
  int64_t windowCount = 1, outCount = 1;

  void offsets(int64_t windowIndex, std::vector<int64_t>& out) const {
    const size_t rank = inDims.size();
    std::vector<int64_t> w(rank);
    for (size_t d = rank; d-- > 0;) {
      w[d] = windowIndex % win[d].size;
      windowIndex /= win[d].size;
    }
    // Per-dim table of input index * stride (or -1) for each output coordinate.
    std::vector<std::vector<int64_t>> table(rank);
    for (size_t d = 0; d < rank; ++d) {
      const auto& wd = win[d];
      const int64_t dilated = (inDims[d] - 1) * wd.baseDilation + 1;
      table[d].resize(static_cast<size_t>(outDims[d]));
      for (int64_t o = 0; o < outDims[d]; ++o) {
        int64_t pos = o * wd.stride + w[d] * wd.windowDilation - wd.paddingLow;
        int64_t idx = -1;
        if (inDims[d] > 0 && pos >= 0 && pos < dilated && pos % wd.baseDilation == 0) idx = pos / wd.baseDilation;
        table[d][static_cast<size_t>(o)] = idx < 0 ? -1 : idx * inStrides[d];
      }
    }
    out.resize(static_cast<size_t>(outCount));
    std::vector<int64_t> oi(rank, 0);
    for (int64_t lin = 0; lin < outCount; ++lin) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t t = table[d][static_cast<size_t>(oi[d])];
        if (t < 0) {
          off = -1;
          break;
        }
        off += t;
      }
      out[static_cast<size_t>(lin)] = off;
      for (size_t d = rank; d-- > 0;) {
        if (++oi[d] < outDims[d]) break;
        oi[d] = 0;
      }
    }
  }
};

bool buildWindow(const std::vector<int64_t>& inDims, const std::optional<hlo::Window>& window, WindowGeometry& g) {
  const size_t rank = inDims.size();
  g.inDims = inDims;
  g.inStrides = rowMajorStrides(inDims);
  g.win = window ? window->dimensions : std::vector<hlo::WindowDimension>(rank);
  if (g.win.size() != rank) return false;
  for (size_t d = 0; d < rank; ++d) {
    const auto& w = g.win[d];
    if (w.size < 1 || w.stride < 1 || w.baseDilation < 1 || w.windowDilation < 1) return false;
    int64_t padded = (inDims[d] > 0 ? (inDims[d] - 1) * w.baseDilation + 1 : 0) + w.paddingLow + w.paddingHigh;
    int64_t eff = (w.size - 1) * w.windowDilation + 1;
    g.outDims.push_back(padded >= eff ? (padded - eff) / w.stride + 1 : 0);
    g.windowCount *= w.size;
  }
  g.outCount = elementCount(g.outDims);
  return true;
}

// Total-order integer key of a float (−NaN < −inf < ... < −0 < +0 < ... < +NaN).
template <typename F, typename I>
I totalKey(F f) {
  I i = std::bit_cast<I>(f);
  using U = std::make_unsigned_t<I>;
  return i < 0 ? static_cast<I>(static_cast<U>(i) ^ (~U(0) >> 1)) : i;
}

// A comparator `compare(p[2k], p[2k+1])` (or swapped): sorts by operand k.
struct SimpleComparator {
  int64_t operand = 0;
  CompareDir dir = CompareDir::Lt;
  bool totalOrder = false;
};

std::optional<SimpleComparator> simpleComparator(const hlo::Computation& c) {
  const Instruction* root = c.root();
  if (!root || root->opcode() != Opcode::Compare) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::Parameter || b->opcode() != Opcode::Parameter) return std::nullopt;
  int64_t pa = a->attrs().parameterNumber, pb = b->attrs().parameterNumber;
  if (pa / 2 != pb / 2 || pa == pb) return std::nullopt;
  auto dir = compareDir(root->attrs().comparisonDirection);
  if (!dir || (*dir != CompareDir::Lt && *dir != CompareDir::Gt)) return std::nullopt;
  SimpleComparator s;
  s.operand = pa / 2;
  s.dir = *dir;
  if (pa > pb) s.dir = s.dir == CompareDir::Lt ? CompareDir::Gt : CompareDir::Lt;
  s.totalOrder = root->attrs().comparisonType == hlo::ComparisonType::TotalOrder;
  return s;
}

// Sorts idx[0..n) stably by keys at base + idx*stride with a typed comparison.
template <typename T>
void sortByKey(const T* keys, int64_t base, int64_t stride, std::vector<int64_t>& idx, bool descending) {
  auto less = [&](int64_t x, int64_t y) {
    T a = keys[base + x * stride], b = keys[base + y * stride];
    return descending ? b < a : a < b;
  };
  std::stable_sort(idx.begin(), idx.end(), less);
}

}  // namespace

std::optional<Value> Interp::evalReduce(const Instruction& inst, std::span<const Value* const> ops) {
  const size_t n = ops.size() / 2;
  const hlo::Computation* comp = inst.toApply();
  if (n == 0 || ops.size() % 2 != 0 || !comp) {
    error(inst, "expects N inputs, N init values and to_apply");
    return std::nullopt;
  }
  const Value& x0 = *ops[0];
  std::vector<int64_t> rdims = inst.attrs().dimensions;
  std::sort(rdims.begin(), rdims.end());
  for (size_t i = 0; i < rdims.size(); ++i)
    if (rdims[i] < 0 || rdims[i] >= x0.rank() || (i > 0 && rdims[i] == rdims[i - 1])) {
      error(inst, "reduced dimension out of range");
      return std::nullopt;
    }
  std::vector<int64_t> perm = permFor(rdims, x0.rank());
  std::vector<int64_t> keptDims;
  int64_t reduced = 1;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (i < rdims.size()) reduced *= x0.dims()[static_cast<size_t>(perm[i])];
    else keptDims.push_back(x0.dims()[static_cast<size_t>(perm[i])]);
  }
  const int64_t kept = elementCount(keptDims);
  for (size_t k = 0; k < n; ++k)
    if (ops[k]->dims() != x0.dims() || ops[n + k]->count() != 1 || ops[n + k]->type() != ops[k]->type()) {
      error(inst, "inputs must share dimensions and inits must be scalars of the input types");
      return std::nullopt;
    }
  auto finish = [&](std::vector<Value> accs) -> Value {
    if (n == 1) return accs[0].reshaped(keptDims);
    for (Value& a : accs) a = a.reshaped(keptDims);
    return Value::tuple(std::move(accs));
  };
  const std::optional<BinaryOp> simple = n == 1 ? simpleBinaryOp(*comp) : std::nullopt;
  const BinaryOp fastOp = simple.value_or(BinaryOp::Sub);
  auto rep = typeRep(x0.type());
  // Narrow floats round after every add/multiply, so only max/min take the
  // f32 kernel; sub-byte ints would need truncation per step.
  bool useFast = simple.has_value() && fastOp != BinaryOp::Sub && rep.has_value();
  if (useFast && rep->narrow && fastOp != BinaryOp::Max && fastOp != BinaryOp::Min) useFast = false;
  if (useFast && rep->bits < kTypeBytes(rep->k) * 8 && rep->k != KType::Pred) useFast = false;
  if (useFast) {
    Value in = transposed(x0, perm);
    ComputeView v = computeView(in, *rep), init = computeView(*ops[1], *rep);
    Value out = Value::array(x0.type(), {kept});
    std::vector<float> tmp;
    void* dst = out.mutableRaw();
    if (rep->narrow) {
      tmp.resize(static_cast<size_t>(kept));
      dst = tmp.data();
    }
    if (reduceKernel(fastOp, rep->k, v.data, reduced, kept, init.data, dst)) {
      storeFromCompute(*rep, dst, out);
      return finish({out});
    }
  }
  // General reducer: fold rows of [reduced, kept] lane-wise over `kept`.
  std::vector<Value> ins, accs;
  for (size_t k = 0; k < n; ++k) {
    ins.push_back(transposed(*ops[k], perm));
    accs.push_back(broadcastScalar(*ops[n + k], {kept}));
  }
  if (kept == 0) return finish(accs);
  std::vector<Value> args(2 * n);
  for (int64_t r = 0; r < reduced; ++r) {
    for (size_t k = 0; k < n; ++k) {
      args[k] = accs[k];
      args[n + k] = sliceFlat(ins[k], r * kept, kept);
    }
    auto res = callLanes(*comp, args, kept);
    if (!res) return std::nullopt;
    if (res->size() != n) {
      error(inst, "reducer returns the wrong number of values");
      return std::nullopt;
    }
    accs = std::move(*res);
  }
  return finish(accs);
}

std::optional<Value> Interp::evalReduceWindow(const Instruction& inst, std::span<const Value* const> ops) {
  const size_t n = ops.size() / 2;
  const hlo::Computation* comp = inst.toApply();
  if (n == 0 || ops.size() % 2 != 0 || !comp) {
    error(inst, "expects N inputs, N init values and to_apply");
    return std::nullopt;
  }
  WindowGeometry g;
  if (!buildWindow(ops[0]->dims(), inst.attrs().window, g)) {
    error(inst, "window does not match the input rank");
    return std::nullopt;
  }
  for (size_t k = 0; k < n; ++k)
    if (ops[k]->dims() != ops[0]->dims() || ops[n + k]->count() != 1 || ops[n + k]->type() != ops[k]->type()) {
      error(inst, "inputs must share dimensions and inits must be scalars of the input types");
      return std::nullopt;
    }
  std::vector<Value> accs;
  for (size_t k = 0; k < n; ++k) accs.push_back(broadcastScalar(*ops[n + k], {g.outCount}));
  std::optional<BinaryOp> fast = n == 1 ? simpleBinaryOp(*comp) : std::nullopt;
  std::vector<int64_t> offsets;
  std::vector<uint8_t> mask(static_cast<size_t>(g.outCount));
  std::vector<Value> cands(n), args(2 * n);
  for (int64_t w = 0; w < g.windowCount && g.outCount > 0; ++w) {
    g.offsets(w, offsets);
    bool any = false;
    for (int64_t i = 0; i < g.outCount; ++i) {
      mask[static_cast<size_t>(i)] = offsets[static_cast<size_t>(i)] >= 0;
      any |= mask[static_cast<size_t>(i)] != 0;
    }
    if (!any) continue;
    for (size_t k = 0; k < n; ++k) {
      cands[k] = cloneArray(accs[k]);  // invalid lanes keep a harmless value
      gatherElements(ops[k]->elementBytes(), ops[k]->raw(), offsets.data(), cands[k].mutableRaw(), g.outCount);
    }
    std::vector<Value> res;
    if (fast) {
      auto r = binaryArrays(*fast, accs[0], cands[0]);
      if (!r) {
        error(inst, "reducer not defined for the element type");
        return std::nullopt;
      }
      res.push_back(std::move(*r));
    } else {
      for (size_t k = 0; k < n; ++k) {
        args[k] = accs[k];
        args[n + k] = cands[k];
      }
      auto r = callLanes(*comp, args, g.outCount);
      if (!r) return std::nullopt;
      if (r->size() != n) {
        error(inst, "reducer returns the wrong number of values");
        return std::nullopt;
      }
      res = std::move(*r);
    }
    for (size_t k = 0; k < n; ++k) {
      Value next = cloneArray(accs[k]);
      selectInto(next, res[k], mask);
      accs[k] = std::move(next);
    }
  }
  if (n == 1) return accs[0].reshaped(g.outDims);
  for (Value& a : accs) a = a.reshaped(g.outDims);
  return Value::tuple(std::move(accs));
}

std::optional<Value> Interp::evalSelectAndScatter(const Instruction& inst, std::span<const Value* const> ops) {
  const auto& called = inst.calledComputations();
  if (ops.size() != 3 || called.size() != 2) {
    error(inst, "expects operand, source, init and select/scatter computations");
    return std::nullopt;
  }
  const Value& x = *ops[0];
  const Value& src = *ops[1];
  WindowGeometry g;
  if (!buildWindow(x.dims(), inst.attrs().window, g) || g.outDims != src.dims()) {
    error(inst, "source must have the shape of the windows over the operand");
    return std::nullopt;
  }
  const int64_t L = g.outCount;
  Value cur = Value::zeros(x.type(), {L});
  std::vector<int64_t> curOff(static_cast<size_t>(L), -1), offsets;
  std::vector<uint8_t> take(static_cast<size_t>(L));
  for (int64_t w = 0; w < g.windowCount && L > 0; ++w) {
    g.offsets(w, offsets);
    Value cand = cloneArray(cur);
    gatherElements(x.elementBytes(), x.raw(), offsets.data(), cand.mutableRaw(), L);
    // keep = select(current, candidate); lanes without a pick take the candidate.
    const Value args[2] = {cur, cand};
    auto keep = callLanes(*called[0], args, L);
    if (!keep) return std::nullopt;
    if (keep->size() != 1 || (*keep)[0].type() != ElementType::Pred) {
      error(inst, "select must return pred");
      return std::nullopt;
    }
    const uint8_t* kp = (*keep)[0].raw();
    bool anyTake = false;
    for (int64_t l = 0; l < L; ++l) {
      size_t i = static_cast<size_t>(l);
      take[i] = offsets[i] >= 0 && (curOff[i] < 0 || kp[l] == 0);
      if (take[i]) {
        curOff[i] = offsets[i];
        anyTake = true;
      }
    }
    if (anyTake) {
      Value next = cloneArray(cur);
      selectInto(next, cand, take);
      cur = std::move(next);
    }
  }
  Value out = broadcastScalar(*ops[2], x.dims());
  const hlo::Computation& scatter = *called[1];
  auto fast = simpleBinaryOp(scatter);
  const int eb = x.elementBytes();
  for (int64_t l = 0; l < L; ++l) {
    int64_t off = curOff[static_cast<size_t>(l)];
    if (off < 0) continue;
    Value a = Value::array(x.type(), {1}), b = Value::array(x.type(), {1});
    std::memcpy(a.mutableRaw(), out.raw() + off * eb, static_cast<size_t>(eb));
    std::memcpy(b.mutableRaw(), src.raw() + l * eb, static_cast<size_t>(eb));
    std::optional<Value> r;
    if (fast) r = binaryArrays(*fast, a, b);
    if (!r) {
      const Value args[2] = {a, b};
      auto rr = callLanes(scatter, args, 1);
      if (!rr) return std::nullopt;
      r = (*rr)[0];
    }
    std::memcpy(out.mutableRaw() + off * eb, r->raw(), static_cast<size_t>(eb));
  }
  return out;
}

std::optional<Value> Interp::evalGather(const Instruction& inst, const Value& operand, const Value& indices) {
  const auto& dn = *inst.attrs().gatherDims;
  const auto& sizes = inst.attrs().gatherSliceSizes;
  const hlo::Shape& s = inst.shape();
  const int64_t orank = operand.rank();
  if (static_cast<int64_t>(sizes.size()) != orank) {
    error(inst, "slice_sizes needs one entry per operand dimension");
    return std::nullopt;
  }
  const int64_t ivd = dn.indexVectorDim;
  if (ivd < 0 || ivd > indices.rank()) {
    error(inst, "index_vector_dim out of range");
    return std::nullopt;
  }
  std::vector<int64_t> idxDims = indices.dims();
  if (ivd == indices.rank()) idxDims.push_back(1);
  const int64_t vecLen = idxDims[static_cast<size_t>(ivd)];
  if (vecLen != static_cast<int64_t>(dn.startIndexMap.size())) {
    error(inst, "start_index_map length differs from the index vector length");
    return std::nullopt;
  }
  std::vector<int64_t> batchIdxDims;  // dims of the index array that are batch dims
  for (int64_t d = 0; d < static_cast<int64_t>(idxDims.size()); ++d)
    if (d != ivd) batchIdxDims.push_back(d);
  std::vector<int64_t> windowOperandDims;
  for (int64_t d = 0; d < orank; ++d) {
    bool collapsed = std::count(dn.collapsedSliceDims.begin(), dn.collapsedSliceDims.end(), d) ||
                     std::count(dn.operandBatchingDims.begin(), dn.operandBatchingDims.end(), d);
    if (sizes[static_cast<size_t>(d)] < 0 || sizes[static_cast<size_t>(d)] > operand.dims()[static_cast<size_t>(d)]) {
      error(inst, "slice size larger than the operand");
      return std::nullopt;
    }
    if (!collapsed) windowOperandDims.push_back(d);
  }
  if (windowOperandDims.size() != dn.offsetDims.size() ||
      s.rank() != static_cast<int64_t>(batchIdxDims.size() + dn.offsetDims.size()) ||
      dn.operandBatchingDims.size() != dn.startIndicesBatchingDims.size()) {
    error(inst, "dimension numbers do not match the operand, indices and result ranks");
    return std::nullopt;
  }
  for (int64_t d : dn.startIndexMap)
    if (d < 0 || d >= orank) {
      error(inst, "start_index_map entry out of range");
      return std::nullopt;
    }
  const std::vector<int64_t>& outDims = s.dimensions();
  std::vector<int64_t> os = rowMajorStrides(outDims), xs = rowMajorStrides(operand.dims());
  std::vector<int64_t> batchOutPos;
  for (int64_t d = 0; d < s.rank(); ++d)
    if (!std::count(dn.offsetDims.begin(), dn.offsetDims.end(), d)) batchOutPos.push_back(d);
  std::vector<int64_t> winDims, winIn, winOut;
  for (size_t j = 0; j < windowOperandDims.size(); ++j) {
    size_t od = static_cast<size_t>(windowOperandDims[j]);
    int64_t p = dn.offsetDims[j];
    if (p < 0 || p >= s.rank() || outDims[static_cast<size_t>(p)] != sizes[od]) {
      error(inst, "offset dimension sizes differ from slice_sizes");
      return std::nullopt;
    }
    winDims.push_back(sizes[od]);
    winIn.push_back(xs[od]);
    winOut.push_back(os[static_cast<size_t>(p)]);
  }
  Value idx = convertArray(indices, ElementType::S64);
  const int64_t* iv = idx.as<int64_t>();
  std::vector<int64_t> is = rowMajorStrides(idxDims);
  std::vector<int64_t> bdims;
  for (int64_t d : batchIdxDims) bdims.push_back(idxDims[static_cast<size_t>(d)]);
  for (size_t i = 0; i < batchOutPos.size(); ++i)
    if (outDims[static_cast<size_t>(batchOutPos[i])] != bdims[i]) {
      error(inst, "batch dimension sizes differ from the indices");
      return std::nullopt;
    }
  Value out = Value::array(operand.type(), outDims);
  const int64_t nb = elementCount(bdims);
  if (out.count() == 0) return out;
  std::vector<int64_t> b(bdims.size(), 0), start(static_cast<size_t>(orank));
  const size_t eb = static_cast<size_t>(operand.elementBytes());
  for (int64_t lin = 0; lin < nb; ++lin) {
    int64_t ibase = 0, outOff = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      ibase += b[i] * is[static_cast<size_t>(batchIdxDims[i])];
      outOff += b[i] * os[static_cast<size_t>(batchOutPos[i])];
    }
    std::fill(start.begin(), start.end(), 0);
    for (int64_t k = 0; k < vecLen; ++k)
      start[static_cast<size_t>(dn.startIndexMap[static_cast<size_t>(k)])] = iv[ibase + k * is[static_cast<size_t>(ivd)]];
    for (size_t i = 0; i < dn.operandBatchingDims.size(); ++i) {
      int64_t idim = dn.startIndicesBatchingDims[i];
      auto it = std::find(batchIdxDims.begin(), batchIdxDims.end(), idim);
      if (it != batchIdxDims.end()) start[static_cast<size_t>(dn.operandBatchingDims[i])] = b[static_cast<size_t>(it - batchIdxDims.begin())];
    }
    int64_t inOff = 0;
    for (int64_t d = 0; d < orank; ++d) {
      size_t u = static_cast<size_t>(d);
      start[u] = std::clamp<int64_t>(start[u], 0, operand.dims()[u] - sizes[u]);
      inOff += start[u] * xs[u];
    }
    stridedCopy(eb, winDims, operand.raw(), inOff, winIn, out.mutableRaw(), outOff, winOut);
    for (size_t i = b.size(); i-- > 0;) {
      if (++b[i] < bdims[i]) break;
      b[i] = 0;
    }
  }
  return out;
}

std::optional<Value> Interp::evalScatter(const Instruction& inst, std::span<const Value* const> ops) {
  const size_t n = (ops.size() - 1) / 2;
  const hlo::Computation* comp = inst.toApply();
  if (ops.size() < 3 || ops.size() % 2 == 0 || !comp) {
    error(inst, "expects N operands, indices, N updates and to_apply");
    return std::nullopt;
  }
  const auto& dn = *inst.attrs().scatterDims;
  const Value& operand = *ops[0];
  const Value& indices = *ops[n];
  const Value& upd0 = *ops[n + 1];
  const int64_t orank = operand.rank();
  const int64_t ivd = dn.indexVectorDim;
  if (ivd < 0 || ivd > indices.rank()) {
    error(inst, "index_vector_dim out of range");
    return std::nullopt;
  }
  std::vector<int64_t> idxDims = indices.dims();
  if (ivd == indices.rank()) idxDims.push_back(1);
  const int64_t vecLen = idxDims[static_cast<size_t>(ivd)];
  if (vecLen != static_cast<int64_t>(dn.scatterDimsToOperandDims.size())) {
    error(inst, "scatter_dims_to_operand_dims length differs from the index vector length");
    return std::nullopt;
  }
  std::vector<int64_t> batchIdxDims;
  for (int64_t d = 0; d < static_cast<int64_t>(idxDims.size()); ++d)
    if (d != ivd) batchIdxDims.push_back(d);
  std::vector<int64_t> windowOperandDims;
  for (int64_t d = 0; d < orank; ++d)
    if (!std::count(dn.insertedWindowDims.begin(), dn.insertedWindowDims.end(), d) &&
        !std::count(dn.inputBatchingDims.begin(), dn.inputBatchingDims.end(), d))
      windowOperandDims.push_back(d);
  std::vector<int64_t> updScatterDims;
  for (int64_t d = 0; d < upd0.rank(); ++d)
    if (!std::count(dn.updateWindowDims.begin(), dn.updateWindowDims.end(), d)) updScatterDims.push_back(d);
  if (windowOperandDims.size() != dn.updateWindowDims.size() || updScatterDims.size() != batchIdxDims.size() ||
      dn.inputBatchingDims.size() != dn.scatterIndicesBatchingDims.size()) {
    error(inst, "dimension numbers do not match the operand, indices and update ranks");
    return std::nullopt;
  }
  for (size_t i = 0; i < updScatterDims.size(); ++i)
    if (upd0.dims()[static_cast<size_t>(updScatterDims[i])] != idxDims[static_cast<size_t>(batchIdxDims[i])]) {
      error(inst, "update scatter dimensions differ from the indices");
      return std::nullopt;
    }
  for (int64_t d : dn.scatterDimsToOperandDims)
    if (d < 0 || d >= orank) {
      error(inst, "scatter_dims_to_operand_dims entry out of range");
      return std::nullopt;
    }
  std::vector<int64_t> winSize(static_cast<size_t>(orank), 1), winDims, winOp, winUpd;
  std::vector<int64_t> xs = rowMajorStrides(operand.dims()), us = rowMajorStrides(upd0.dims());
  for (size_t j = 0; j < windowOperandDims.size(); ++j) {
    size_t od = static_cast<size_t>(windowOperandDims[j]);
    size_t ud = static_cast<size_t>(dn.updateWindowDims[j]);
    if (ud >= upd0.dims().size()) {
      error(inst, "update_window_dims entry out of range");
      return std::nullopt;
    }
    winSize[od] = upd0.dims()[ud];
    winDims.push_back(winSize[od]);
    winOp.push_back(xs[od]);
    winUpd.push_back(us[ud]);
  }
  for (size_t k = 0; k < n; ++k)
    if (ops[k]->dims() != operand.dims() || ops[n + 1 + k]->dims() != upd0.dims()) {
      error(inst, "operands (and updates) must share dimensions");
      return std::nullopt;
    }
  std::vector<Value> outs;
  for (size_t k = 0; k < n; ++k) outs.push_back(cloneArray(*ops[k]));
  const int64_t W = elementCount(winDims);
  const std::vector<int64_t> flatW{W}, unit{1};
  const std::vector<int64_t> winContig = rowMajorStrides(winDims);
  Value idx = convertArray(indices, ElementType::S64);
  const int64_t* iv = idx.as<int64_t>();
  std::vector<int64_t> is = rowMajorStrides(idxDims), bdims;
  for (int64_t d : batchIdxDims) bdims.push_back(idxDims[static_cast<size_t>(d)]);
  const int64_t nb = elementCount(bdims);
  const bool overwrite = isOverwriteComputation(*comp);
  std::optional<BinaryOp> fast = n == 1 ? simpleBinaryOp(*comp) : std::nullopt;
  std::vector<int64_t> b(bdims.size(), 0), start(static_cast<size_t>(orank));
  std::vector<Value> args(2 * n);
  for (int64_t lin = 0; lin < nb && W > 0; ++lin) {
    int64_t ibase = 0, updOff = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      ibase += b[i] * is[static_cast<size_t>(batchIdxDims[i])];
      updOff += b[i] * us[static_cast<size_t>(updScatterDims[i])];
    }
    std::fill(start.begin(), start.end(), 0);
    for (int64_t k = 0; k < vecLen; ++k)
      start[static_cast<size_t>(dn.scatterDimsToOperandDims[static_cast<size_t>(k)])] =
          iv[ibase + k * is[static_cast<size_t>(ivd)]];
    for (size_t i = 0; i < dn.inputBatchingDims.size(); ++i) {
      auto it = std::find(batchIdxDims.begin(), batchIdxDims.end(), dn.scatterIndicesBatchingDims[i]);
      if (it != batchIdxDims.end()) start[static_cast<size_t>(dn.inputBatchingDims[i])] = b[static_cast<size_t>(it - batchIdxDims.begin())];
    }
    bool inBounds = true;
    int64_t opOff = 0;
    for (int64_t d = 0; d < orank; ++d) {
      size_t u = static_cast<size_t>(d);
      if (start[u] < 0 || start[u] > operand.dims()[u] - winSize[u]) inBounds = false;
      opOff += start[u] * xs[u];
    }
    for (size_t i = b.size(); i-- > 0;) {
      if (++b[i] < bdims[i]) break;
      b[i] = 0;
    }
    if (!inBounds) continue;  // XLA skips windows that do not fit entirely
    std::vector<Value> cur(n), upd(n);
    for (size_t k = 0; k < n; ++k) {
      const size_t eb = static_cast<size_t>(outs[k].elementBytes());
      upd[k] = Value::array(outs[k].type(), flatW);
      stridedCopy(eb, winDims, ops[n + 1 + k]->raw(), updOff, winUpd, upd[k].mutableRaw(), 0, winContig);
      if (overwrite) continue;
      cur[k] = Value::array(outs[k].type(), flatW);
      stridedCopy(eb, winDims, outs[k].raw(), opOff, winOp, cur[k].mutableRaw(), 0, winContig);
    }
    std::vector<Value> res;
    if (overwrite) {
      res = upd;
    } else if (fast && cur[0].type() == upd[0].type()) {
      auto r = binaryArrays(*fast, cur[0], upd[0]);
      if (!r) {
        error(inst, "combiner not defined for the element type");
        return std::nullopt;
      }
      res.push_back(std::move(*r));
    } else {
      for (size_t k = 0; k < n; ++k) {
        args[k] = cur[k];
        args[n + k] = upd[k];
      }
      auto r = callLanes(*comp, args, W);
      if (!r) return std::nullopt;
      if (r->size() != n) {
        error(inst, "combiner returns the wrong number of values");
        return std::nullopt;
      }
      res = std::move(*r);
    }
    for (size_t k = 0; k < n; ++k)
      stridedCopy(static_cast<size_t>(outs[k].elementBytes()), winDims, res[k].raw(), 0, winContig, outs[k].mutableRaw(),
                  opOff, winOp);
  }
  if (n == 1) return outs[0];
  return Value::tuple(std::move(outs));
}

std::optional<Value> Interp::evalSort(const Instruction& inst, std::span<const Value* const> ops) {
  const hlo::Computation* comp = inst.toApply();
  const Value& x0 = *ops[0];
  if (!comp || inst.attrs().dimensions.size() != 1 || x0.rank() == 0) {
    error(inst, "expects one sort dimension and a comparator");
    return std::nullopt;
  }
  const int64_t d = inst.attrs().dimensions[0];
  if (d < 0 || d >= x0.rank()) {
    error(inst, "sort dimension out of range");
    return std::nullopt;
  }
  for (const Value* v : ops)
    if (v->dims() != x0.dims()) {
      error(inst, "operands must share dimensions");
      return std::nullopt;
    }
  const int64_t len = x0.dims()[static_cast<size_t>(d)];
  const int64_t inner = rowMajorStrides(x0.dims())[static_cast<size_t>(d)];
  const int64_t outer = len == 0 ? 0 : x0.count() / (len * inner);
  std::vector<Value> outs;
  for (const Value* v : ops) outs.push_back(Value::array(v->type(), v->dims()));
  std::vector<int64_t> idx(static_cast<size_t>(len));
  auto simple = simpleComparator(*comp);
  // Typed keys for the fast path: totally ordered integers or host floats.
  Value keys;
  enum class KeyKind { None, I32, I64, U64, F32, F64 } kind = KeyKind::None;
  if (simple && simple->operand < static_cast<int64_t>(ops.size())) {
    const Value& kv = *ops[static_cast<size_t>(simple->operand)];
    auto rep = typeRep(kv.type());
    if (rep && !isComplexK(rep->k)) {
      if (rep->k == KType::F32 || rep->k == KType::F64) {
        Value f = rep->narrow ? convertArray(kv, ElementType::F32) : kv;
        if (simple->totalOrder) {
          if (rep->k == KType::F64) {
            keys = Value::array(ElementType::S64, kv.dims());
            for (int64_t i = 0; i < kv.count(); ++i) keys.mutableAs<int64_t>()[i] = totalKey<double, int64_t>(f.as<double>()[i]);
            kind = KeyKind::I64;
          } else {
            keys = Value::array(ElementType::S32, kv.dims());
            for (int64_t i = 0; i < kv.count(); ++i) keys.mutableAs<int32_t>()[i] = totalKey<float, int32_t>(f.as<float>()[i]);
            kind = KeyKind::I32;
          }
        } else {
          keys = f;
          kind = rep->k == KType::F64 ? KeyKind::F64 : KeyKind::F32;
        }
      } else if (isSignedK(rep->k) || rep->k == KType::Pred) {
        keys = convertArray(kv, ElementType::S64);
        kind = KeyKind::I64;
      } else {
        keys = convertArray(kv, ElementType::U64);
        kind = KeyKind::U64;
      }
    }
  }
  bool failed = false;
  std::vector<Value> scalars(2 * ops.size());
  auto generic = [&](int64_t a, int64_t b, int64_t base) {
    if (failed) return false;
    for (size_t k = 0; k < ops.size(); ++k) {
      scalars[2 * k] = sliceFlat(*ops[k], base + a * inner, 1).reshaped({});
      scalars[2 * k + 1] = sliceFlat(*ops[k], base + b * inner, 1).reshaped({});
    }
    std::optional<Value> r = call(*comp, scalars);
    if (!r || !r->isArray() || r->type() != ElementType::Pred) {
      if (r) error(inst, "comparator must return pred[]");
      failed = true;
      return false;
    }
    return r->raw()[0] != 0;
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      std::iota(idx.begin(), idx.end(), 0);
      const bool desc = simple && simple->dir == CompareDir::Gt;
      switch (kind) {
        case KeyKind::I32: sortByKey(keys.as<int32_t>(), base, inner, idx, desc); break;
        case KeyKind::I64: sortByKey(keys.as<int64_t>(), base, inner, idx, desc); break;
        case KeyKind::U64: sortByKey(keys.as<uint64_t>(), base, inner, idx, desc); break;
        case KeyKind::F32: sortByKey(keys.as<float>(), base, inner, idx, desc); break;
        case KeyKind::F64: sortByKey(keys.as<double>(), base, inner, idx, desc); break;
        case KeyKind::None:
          std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return generic(a, b, base); });
          if (failed) return std::nullopt;
          break;
      }
      for (size_t k = 0; k < ops.size(); ++k) {
        const size_t eb = static_cast<size_t>(ops[k]->elementBytes());
        for (int64_t i = 0; i < len; ++i)
          std::memcpy(outs[k].mutableRaw() + (base + i * inner) * static_cast<int64_t>(eb),
                      ops[k]->raw() + (base + idx[static_cast<size_t>(i)] * inner) * static_cast<int64_t>(eb), eb);
      }
    }
  }
  if (ops.size() == 1) return outs[0];
  return Value::tuple(std::move(outs));
}

std::optional<Value> Interp::evalTopK(const Instruction& inst, const Value& x, int64_t k, bool largest) {
  if (x.rank() == 0 || k < 0 || k > x.dims().back()) {
    error(inst, "k must be between 0 and the last dimension");
    return std::nullopt;
  }
  const int64_t len = x.dims().back();
  const int64_t rows = len == 0 ? 0 : x.count() / len;
  std::vector<int64_t> od = x.dims();
  od.back() = k;
  Value vals = Value::array(x.type(), od), ids = Value::array(ElementType::S32, od);
  Value f = convertArray(x, ElementType::F64);
  std::vector<int64_t> keys(static_cast<size_t>(x.count()));
  for (int64_t i = 0; i < x.count(); ++i) keys[static_cast<size_t>(i)] = totalKey<double, int64_t>(f.as<double>()[i]);
  std::vector<int64_t> idx(static_cast<size_t>(len));
  const size_t eb = static_cast<size_t>(x.elementBytes());
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(idx.begin(), idx.end(), 0);
    sortByKey(keys.data(), r * len, 1, idx, largest);
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(vals.mutableRaw() + (r * k + j) * static_cast<int64_t>(eb),
                  x.raw() + (r * len + idx[static_cast<size_t>(j)]) * static_cast<int64_t>(eb), eb);
      ids.mutableAs<int32_t>()[r * k + j] = static_cast<int32_t>(idx[static_cast<size_t>(j)]);
    }
  }
  return Value::tuple({vals, ids});
}

}  // namespace tpu::eval
