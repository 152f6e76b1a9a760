// Data movement (one stridedCopy each), dot, convolution and batch norm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "eval/conv.h"
#include "eval/interp.h"
#include "eval/kernels.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;

namespace {

bool isIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// out.dims[i] = in.dims[perm[i]].
Value transposeArray(const Value& x, const std::vector<int64_t>& perm) {
  if (isIdentity(perm)) return x;
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

// Dimensions from major to minor of a shape's layout (identity without one).
std::vector<int64_t> majorToMinor(const hlo::Shape& s) {
  std::vector<int64_t> p(static_cast<size_t>(s.rank()));
  if (s.hasLayout() && s.layout().minorToMajor.size() == p.size()) {
    std::reverse_copy(s.layout().minorToMajor.begin(), s.layout().minorToMajor.end(), p.begin());
  } else {
    std::iota(p.begin(), p.end(), 0);
  }
  return p;
}

std::vector<int64_t> inversePerm(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

bool validPerm(const std::vector<int64_t>& p, int64_t rank) {
  if (static_cast<int64_t>(p.size()) != rank) return false;
  std::vector<bool> seen(p.size(), false);
  for (int64_t v : p) {
    if (v < 0 || v >= rank || seen[static_cast<size_t>(v)]) return false;
    seen[static_cast<size_t>(v)] = true;
  }
  return true;
}

// The element type dot/convolution compute in for a result type.
ElementType computeTypeFor(ElementType result) {
  auto rep = typeRep(result);
  return rep && rep->narrow ? ElementType::F32 : (rep && rep->bits < 8 ? (isSignedK(rep->k) ? ElementType::S8 : ElementType::U8) : result);
}

}  // namespace

std::optional<Value> Interp::evalShapeOp(const Instruction& inst, std::span<const Value* const> ops) {
  const auto& a = inst.attrs();
  const hlo::Shape& s = inst.shape();
  if (!s.isArray()) {
    error(inst, "result must be an array");
    return std::nullopt;
  }
  const std::vector<int64_t>& outDims = s.dimensions();
  if (inst.opcode() == Opcode::Iota) {
    {
      const int64_t d = a.iotaDimension;
      if (d < 0 || d >= s.rank()) {
        error(inst, "iota_dimension out of range");
        return std::nullopt;
      }
      const int64_t len = outDims[static_cast<size_t>(d)];
      Value ramp = Value::array(ElementType::S64, {len});
      for (int64_t i = 0; i < len; ++i) ramp.mutableAs<int64_t>()[i] = i;
      Value typed = convertArray(ramp, s.elementType());
      Value out = Value::array(s.elementType(), outDims);
      if (out.count() == 0) return out;
      std::vector<int64_t> inStrides(outDims.size(), 0);
      inStrides[static_cast<size_t>(d)] = 1;
      stridedCopy(static_cast<size_t>(out.elementBytes()), outDims, typed.raw(), 0, inStrides, out.mutableRaw(), 0,
                  rowMajorStrides(outDims));
      return out;
    }
  }
  if (ops.empty()) {
    error(inst, "missing operand");
    return std::nullopt;
  }
  const Value& x = *ops[0];
  const size_t eb = static_cast<size_t>(x.elementBytes());
  switch (inst.opcode()) {
    case Opcode::Broadcast: {
      if (static_cast<int64_t>(a.dimensions.size()) != x.rank()) {
        error(inst, "dimensions must map every operand dimension");
        return std::nullopt;
      }
      Value out = Value::array(x.type(), outDims);
      if (out.count() == 0) return out;
      std::vector<int64_t> inStrides(outDims.size(), 0);
      std::vector<int64_t> xs = rowMajorStrides(x.dims());
      for (size_t i = 0; i < a.dimensions.size(); ++i) {
        int64_t d = a.dimensions[i];
        if (d < 0 || d >= s.rank() || outDims[static_cast<size_t>(d)] != x.dims()[i]) {
          error(inst, "dimensions do not match the operand");
          return std::nullopt;
        }
        inStrides[static_cast<size_t>(d)] = xs[i];
      }
      stridedCopy(eb, outDims, x.raw(), 0, inStrides, out.mutableRaw(), 0, rowMajorStrides(outDims));
      return out;
    }
    case Opcode::Reshape:
    case Opcode::DynamicReshape:
      if (elementCount(outDims) != x.count()) {
        error(inst, "element counts differ");
        return std::nullopt;
      }
      return x.reshaped(outDims);
    case Opcode::Bitcast: {
      const hlo::Shape& is = inst.operand(0)->shape();
      if (!is.isArray() || static_cast<size_t>(is.rank()) != x.dims().size()) {
        error(inst, "operand shape does not match its value");
        return std::nullopt;
      }
      if (elementCount(outDims) * hlo::elementTypeInfo(s.elementType()).byteSize != static_cast<int64_t>(x.byteSize())) {
        error(inst, "operand and result byte sizes differ");
        return std::nullopt;
      }
      std::vector<int64_t> pin = majorToMinor(is), pout = majorToMinor(s);
      if (!validPerm(pin, is.rank()) || !validPerm(pout, s.rank())) {
        error(inst, "invalid layout");
        return std::nullopt;
      }
      // Physical order of the operand, read back in the result's physical order.
      Value phys = transposeArray(x, pin);
      std::vector<int64_t> physOut(pout.size());
      for (size_t i = 0; i < pout.size(); ++i) physOut[i] = outDims[static_cast<size_t>(pout[i])];
      Value viewed = phys;
      if (s.elementType() != x.type()) {
        Value c = Value::array(s.elementType(), physOut);
        std::memcpy(c.mutableRaw(), phys.raw(), c.byteSize());
        viewed = c;
      } else {
        viewed = phys.reshaped(physOut);
      }
      return transposeArray(viewed, inversePerm(pout));
    }
    case Opcode::Transpose:
      if (!validPerm(a.dimensions, x.rank())) {
        error(inst, "dimensions must be a permutation");
        return std::nullopt;
      }
      return transposeArray(x, a.dimensions);
    case Opcode::Slice: {
      if (static_cast<int64_t>(a.slice.size()) != x.rank()) {
        error(inst, "slice needs one range per dimension");
        return std::nullopt;
      }
      std::vector<int64_t> xs = rowMajorStrides(x.dims()), dims(a.slice.size()), inStrides(a.slice.size());
      int64_t off = 0;
      for (size_t d = 0; d < a.slice.size(); ++d) {
        const auto& sl = a.slice[d];
        if (sl.stride < 1 || sl.start < 0 || sl.limit > x.dims()[d] || sl.start > sl.limit) {
          error(inst, fmt::format("slice range [{}:{}:{}] out of bounds of dimension {}", sl.start, sl.limit, sl.stride, d));
          return std::nullopt;
        }
        dims[d] = (sl.limit - sl.start + sl.stride - 1) / sl.stride;
        inStrides[d] = xs[d] * sl.stride;
        off += sl.start * xs[d];
      }
      Value out = Value::array(x.type(), dims);
      if (out.count() > 0) stridedCopy(eb, dims, x.raw(), off, inStrides, out.mutableRaw(), 0, rowMajorStrides(dims));
      return out;
    }
    case Opcode::DynamicSlice:
    case Opcode::DynamicUpdateSlice: {
      const bool update = inst.opcode() == Opcode::DynamicUpdateSlice;
      const size_t first = update ? 2 : 1;
      const size_t rank = x.dims().size();
      std::vector<int64_t> start(rank, 0);
      if (ops.size() == first + 1 && ops[first]->rank() == 1 && rank != 1) {
        if (ops[first]->count() != static_cast<int64_t>(rank)) {
          error(inst, "index vector length differs from the operand rank");
          return std::nullopt;
        }
        for (size_t d = 0; d < rank; ++d) start[d] = ops[first]->scalarAsInt(static_cast<int64_t>(d));
      } else {
        if (ops.size() != first + rank) {
          error(inst, fmt::format("expects {} start indices, got {}", rank, ops.size() - first));
          return std::nullopt;
        }
        for (size_t d = 0; d < rank; ++d) start[d] = ops[first + d]->scalarAsInt();
      }
      std::vector<int64_t> sizes = update ? ops[1]->dims() : outDims;
      if (sizes.size() != rank) {
        error(inst, "slice rank differs from the operand rank");
        return std::nullopt;
      }
      std::vector<int64_t> xs = rowMajorStrides(x.dims());
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (sizes[d] > x.dims()[d]) {
          error(inst, "slice is larger than the operand");
          return std::nullopt;
        }
        start[d] = std::clamp<int64_t>(start[d], 0, x.dims()[d] - sizes[d]);
        off += start[d] * xs[d];
      }
      if (!update) {
        Value out = Value::array(x.type(), sizes);
        if (out.count() > 0) stridedCopy(eb, sizes, x.raw(), off, xs, out.mutableRaw(), 0, rowMajorStrides(sizes));
        return out;
      }
      if (ops[1]->type() != x.type()) {
        error(inst, "update type differs from the operand type");
        return std::nullopt;
      }
      Value out = cloneArray(x);
      if (ops[1]->count() > 0)
        stridedCopy(eb, sizes, ops[1]->raw(), 0, rowMajorStrides(sizes), out.mutableRaw(), off, xs);
      return out;
    }
    case Opcode::Concatenate: {
      if (a.dimensions.size() != 1 || a.dimensions[0] < 0 || a.dimensions[0] >= x.rank()) {
        error(inst, "needs one dimension");
        return std::nullopt;
      }
      const size_t cd = static_cast<size_t>(a.dimensions[0]);
      Value out = Value::array(x.type(), outDims);
      std::vector<int64_t> os = rowMajorStrides(outDims);
      int64_t pos = 0;
      for (const Value* v : ops) {
        if (v->rank() != x.rank() || v->type() != x.type()) {
          error(inst, "operands differ in rank or type");
          return std::nullopt;
        }
        if (pos + v->dims()[cd] > outDims[cd]) {
          error(inst, "operands do not fit the result");
          return std::nullopt;
        }
        if (v->count() > 0)
          stridedCopy(eb, v->dims(), v->raw(), 0, rowMajorStrides(v->dims()), out.mutableRaw(), pos * os[cd], os);
        pos += v->dims()[cd];
      }
      return out;
    }
    case Opcode::Pad: {
      if (static_cast<int64_t>(a.padding.size()) != x.rank() || ops[1]->count() != 1) {
        error(inst, "padding needs one entry per dimension and a scalar value");
        return std::nullopt;
      }
      Value out = Value::array(x.type(), outDims);
      if (out.count() == 0) return out;
      fillElements(eb, out.mutableRaw(), out.count(), ops[1]->raw());
      std::vector<int64_t> xs = rowMajorStrides(x.dims()), os = rowMajorStrides(outDims);
      std::vector<int64_t> dims(outDims.size()), outStrides(outDims.size());
      int64_t inOff = 0, outOff = 0;
      for (size_t d = 0; d < outDims.size(); ++d) {
        const auto& p = a.padding[d];
        const int64_t step = p.interior + 1;
        if (p.interior < 0) {
          error(inst, "interior padding must be >= 0");
          return std::nullopt;
        }
        int64_t lo = 0, hi = x.dims()[d] - 1;
        // First and last input index whose position low + i*step lies in [0, out).
        if (p.low < 0) lo = (-p.low + step - 1) / step;
        int64_t maxPos = outDims[d] - 1 - p.low;
        if (maxPos < 0) return out;
        hi = std::min(hi, maxPos / step);
        if (hi < lo) return out;
        dims[d] = hi - lo + 1;
        inOff += lo * xs[d];
        outOff += (p.low + lo * step) * os[d];
        outStrides[d] = os[d] * step;
      }
      stridedCopy(eb, dims, x.raw(), inOff, xs, out.mutableRaw(), outOff, outStrides);
      return out;
    }
    case Opcode::Reverse: {
      std::vector<int64_t> xs = rowMajorStrides(x.dims());
      int64_t off = 0;
      for (int64_t d : a.dimensions) {
        if (d < 0 || d >= x.rank()) {
          error(inst, "dimension out of range");
          return std::nullopt;
        }
        if (x.dims()[static_cast<size_t>(d)] == 0) return x;
        off += (x.dims()[static_cast<size_t>(d)] - 1) * xs[static_cast<size_t>(d)];
        xs[static_cast<size_t>(d)] = -xs[static_cast<size_t>(d)];
      }
      Value out = Value::array(x.type(), x.dims());
      if (out.count() > 0) stridedCopy(eb, x.dims(), x.raw(), off, xs, out.mutableRaw(), 0, rowMajorStrides(x.dims()));
      return out;
    }
    default: break;
  }
  error(inst, "opcode is not supported by the interpreter");
  return std::nullopt;
}

std::optional<Value> Interp::evalDot(const Instruction& inst, const Value& lhsIn, const Value& rhsIn) {
  const auto& dn = *inst.attrs().dotDims;
  const hlo::Shape& s = inst.shape();
  if (dn.lhsBatchDimensions.size() != dn.rhsBatchDimensions.size() ||
      dn.lhsContractingDimensions.size() != dn.rhsContractingDimensions.size()) {
    error(inst, "batch and contracting dimension lists must pair up");
    return std::nullopt;
  }
  auto freeDims = [](int64_t rank, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(b.begin(), b.end(), d) == b.end() && std::find(c.begin(), c.end(), d) == c.end()) f.push_back(d);
    return f;
  };
  const auto& lb = dn.lhsBatchDimensions;
  const auto& lc = dn.lhsContractingDimensions;
  const auto& rb = dn.rhsBatchDimensions;
  const auto& rc = dn.rhsContractingDimensions;
  std::vector<int64_t> lf = freeDims(lhsIn.rank(), lb, lc), rf = freeDims(rhsIn.rank(), rb, rc);
  std::vector<int64_t> lperm = lb, rpermA = rb, rpermB = rb;
  lperm.insert(lperm.end(), lf.begin(), lf.end());
  lperm.insert(lperm.end(), lc.begin(), lc.end());
  rpermA.insert(rpermA.end(), rc.begin(), rc.end());
  rpermA.insert(rpermA.end(), rf.begin(), rf.end());
  rpermB.insert(rpermB.end(), rf.begin(), rf.end());
  rpermB.insert(rpermB.end(), rc.begin(), rc.end());
  if (!validPerm(lperm, lhsIn.rank()) || !validPerm(rpermA, rhsIn.rank())) {
    error(inst, "invalid dimension numbers");
    return std::nullopt;
  }
  auto prod = [](const Value& v, const std::vector<int64_t>& ds) {
    int64_t p = 1;
    for (int64_t d : ds) p *= v.dims()[static_cast<size_t>(d)];
    return p;
  };
  for (size_t i = 0; i < lb.size(); ++i)
    if (lhsIn.dims()[static_cast<size_t>(lb[i])] != rhsIn.dims()[static_cast<size_t>(rb[i])]) {
      error(inst, "batch dimension sizes differ");
      return std::nullopt;
    }
  for (size_t i = 0; i < lc.size(); ++i)
    if (lhsIn.dims()[static_cast<size_t>(lc[i])] != rhsIn.dims()[static_cast<size_t>(rc[i])]) {
      error(inst, "contracting dimension sizes differ");
      return std::nullopt;
    }
  const int64_t B = prod(lhsIn, lb), M = prod(lhsIn, lf), K = prod(lhsIn, lc), N = prod(rhsIn, rf);
  const ElementType ct = computeTypeFor(s.elementType());
  auto rep = typeRep(ct);
  if (!rep || B * M * N != s.elementCount().value_or(-1)) {
    error(inst, "result shape does not match the operands");
    return std::nullopt;
  }
  Value lhs = transposeArray(convertArray(lhsIn, ct), lperm);
  Value rhsC = convertArray(rhsIn, ct);
  Value rhs;
  int64_t rs[3];
  if (isIdentity(rpermB) && !isIdentity(rpermA)) {
    rhs = rhsC;
    rs[0] = N * K, rs[1] = 1, rs[2] = K;
  } else {
    rhs = transposeArray(rhsC, rpermA);
    rs[0] = K * N, rs[1] = N, rs[2] = 1;
  }
  const int64_t ls[3] = {M * K, K, 1};
  Value out = Value::array(ct, s.dimensions());
  if (K == 0) {
    std::memset(out.mutableRaw(), 0, out.byteSize());
  } else if (out.count() > 0 && !dotKernel(rep->k, B, M, N, K, lhs.raw(), ls, rhs.raw(), rs, out.mutableRaw())) {
    error(inst, fmt::format("not defined for element type {}", hlo::elementTypeName(s.elementType())));
    return std::nullopt;
  }
  return convertArray(out, s.elementType());
}

std::optional<Value> Interp::evalConvolution(const Instruction& inst, const Value& lhsIn, const Value& rhsIn) {
  const auto& a = inst.attrs();
  const hlo::Shape& s = inst.shape();
  if (!a.convDims) {
    error(inst, "missing dim_labels");
    return std::nullopt;
  }
  const auto& dn = *a.convDims;
  const size_t ns = dn.inputSpatialDimensions.size();
  const std::vector<hlo::WindowDimension> noWindow(ns);
  const std::vector<hlo::WindowDimension>& win = a.window ? a.window->dimensions : noWindow;
  if (win.size() != ns || dn.kernelSpatialDimensions.size() != ns || dn.outputSpatialDimensions.size() != ns ||
      lhsIn.rank() != static_cast<int64_t>(ns + 2) || rhsIn.rank() != static_cast<int64_t>(ns + 2) ||
      s.rank() != static_cast<int64_t>(ns + 2)) {
    error(inst, "window and dim_labels do not match the operand ranks");
    return std::nullopt;
  }
  std::vector<int64_t> inPerm{dn.inputBatchDimension, dn.inputFeatureDimension};
  std::vector<int64_t> kPerm{dn.kernelOutputFeatureDimension, dn.kernelInputFeatureDimension};
  std::vector<int64_t> outCanon{dn.outputBatchDimension, dn.outputFeatureDimension};
  inPerm.insert(inPerm.end(), dn.inputSpatialDimensions.begin(), dn.inputSpatialDimensions.end());
  kPerm.insert(kPerm.end(), dn.kernelSpatialDimensions.begin(), dn.kernelSpatialDimensions.end());
  outCanon.insert(outCanon.end(), dn.outputSpatialDimensions.begin(), dn.outputSpatialDimensions.end());
  if (!validPerm(inPerm, lhsIn.rank()) || !validPerm(kPerm, rhsIn.rank()) || !validPerm(outCanon, s.rank())) {
    error(inst, "invalid dim_labels");
    return std::nullopt;
  }
  const ElementType ct = computeTypeFor(s.elementType());
  auto rep = typeRep(ct);
  Value in = transposeArray(convertArray(lhsIn, ct), inPerm);
  Value ker = transposeArray(convertArray(rhsIn, ct), kPerm);
  ConvParams p;
  p.batch = in.dims()[0];
  p.inFeatures = in.dims()[1];
  p.outFeatures = ker.dims()[0];
  p.featureGroups = a.featureGroupCount;
  p.batchGroups = a.batchGroupCount;
  std::vector<int64_t> canonDims{s.dimensions()[static_cast<size_t>(dn.outputBatchDimension)],
                                 s.dimensions()[static_cast<size_t>(dn.outputFeatureDimension)]};
  for (size_t d = 0; d < ns; ++d) {
    const auto& w = win[d];
    p.inputSize.push_back(in.dims()[d + 2]);
    p.kernelSize.push_back(ker.dims()[d + 2]);
    p.stride.push_back(w.stride);
    p.padLow.push_back(w.paddingLow);
    p.lhsDilation.push_back(w.baseDilation);
    p.rhsDilation.push_back(w.windowDilation);
    p.reversal.push_back(w.windowReversal);
    int64_t o = convOutputSize(in.dims()[d + 2], ker.dims()[d + 2], w.stride, w.paddingLow, w.paddingHigh,
                               w.baseDilation, w.windowDilation);
    if (w.stride < 1 || w.baseDilation < 1 || w.windowDilation < 1 ||
        o != s.dimensions()[static_cast<size_t>(dn.outputSpatialDimensions[d])]) {
      error(inst, fmt::format("window of spatial dimension {} does not give the result size", d));
      return std::nullopt;
    }
    p.outputSize.push_back(o);
    canonDims.push_back(o);
  }
  const int64_t G = p.featureGroups, BG = p.batchGroups;
  if (G < 1 || BG < 1 || p.inFeatures != ker.dims()[1] * G || p.outFeatures % G != 0 || p.outFeatures % BG != 0 ||
      p.batch % BG != 0 || canonDims[0] != p.batch / BG || canonDims[1] != p.outFeatures) {
    error(inst, "feature/batch group counts do not match the operands");
    return std::nullopt;
  }
  Value out = Value::array(ct, canonDims);
  if (out.count() > 0 && !convolution(rep->k, p, in.raw(), ker.raw(), out.mutableRaw())) {
    error(inst, fmt::format("not defined for element type {}", hlo::elementTypeName(s.elementType())));
    return std::nullopt;
  }
  return convertArray(transposeArray(out, inversePerm(outCanon)), s.elementType());
}

std::optional<Value> Interp::evalBatchNorm(const Instruction& inst, std::span<const Value* const> ops) {
  const auto& a = inst.attrs();
  const Value& x = *ops[0];
  const int64_t f = a.featureIndex;
  if (f < 0 || f >= x.rank()) {
    error(inst, "feature_index out of range");
    return std::nullopt;
  }
  const int64_t C = x.dims()[static_cast<size_t>(f)];
  const int64_t stride = rowMajorStrides(x.dims())[static_cast<size_t>(f)];
  const int64_t n = x.count();
  const double m = C > 0 ? static_cast<double>(n / std::max<int64_t>(C, 1)) : 1.0;
  const double eps = a.epsilon;
  auto f64 = [&](const Value* v) { return convertArray(*v, ElementType::F64); };
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i]->count() != C && !(inst.opcode() == Opcode::BatchNormGrad && i == 4)) {
      error(inst, "scale/offset/mean/variance must have the feature dimension's size");
      return std::nullopt;
    }
  Value xd = f64(&x);
  const double* xv = xd.as<double>();
  auto feat = [&](int64_t i) { return (i / stride) % C; };
  auto stats = [&](std::vector<double>& mean, std::vector<double>& var) {
    mean.assign(static_cast<size_t>(C), 0.0);
    var.assign(static_cast<size_t>(C), 0.0);
    for (int64_t i = 0; i < n; ++i) mean[static_cast<size_t>(feat(i))] += xv[i];
    for (double& v : mean) v /= m;
    for (int64_t i = 0; i < n; ++i) {
      double d = xv[i] - mean[static_cast<size_t>(feat(i))];
      var[static_cast<size_t>(feat(i))] += d * d;
    }
    for (double& v : var) v /= m;
  };
  const ElementType t = x.type();
  auto toVec = [&](const std::vector<double>& v) {
    Value o = Value::array(ElementType::F64, {static_cast<int64_t>(v.size())});
    std::memcpy(o.mutableRaw(), v.data(), v.size() * sizeof(double));
    return convertArray(o, t);
  };
  if (inst.opcode() == Opcode::BatchNormGrad) {
    Value scale = f64(ops[1]), mean = f64(ops[2]), var = f64(ops[3]), g = f64(ops[4]);
    if (g.count() != n) {
      error(inst, "grad_output must have the operand's shape");
      return std::nullopt;
    }
    std::vector<double> sumG(static_cast<size_t>(C), 0), sumGX(static_cast<size_t>(C), 0);
    const double* gv = g.as<double>();
    for (int64_t i = 0; i < n; ++i) {
      size_t c = static_cast<size_t>(feat(i));
      sumG[c] += gv[i];
      sumGX[c] += gv[i] * (xv[i] - mean.as<double>()[c]);
    }
    Value go = Value::array(ElementType::F64, x.dims());
    std::vector<double> gScale(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) gScale[static_cast<size_t>(c)] = sumGX[static_cast<size_t>(c)] / std::sqrt(var.as<double>()[c] + eps);
    for (int64_t i = 0; i < n; ++i) {
      size_t c = static_cast<size_t>(feat(i));
      double ve = var.as<double>()[c] + eps;
      double xm = xv[i] - mean.as<double>()[c];
      go.mutableAs<double>()[i] = scale.as<double>()[c] / std::sqrt(ve) * (gv[i] - sumG[c] / m - xm * sumGX[c] / (m * ve));
    }
    return Value::tuple({convertArray(go, t), toVec(gScale), toVec(sumG)});
  }
  Value scale = f64(ops[1]), offset = f64(ops[2]);
  std::vector<double> mean, var;
  if (inst.opcode() == Opcode::BatchNormInference) {
    Value mv = f64(ops[3]), vv = f64(ops[4]);
    mean.assign(mv.as<double>(), mv.as<double>() + C);
    var.assign(vv.as<double>(), vv.as<double>() + C);
  } else {
    stats(mean, var);
  }
  Value y = Value::array(ElementType::F64, x.dims());
  for (int64_t i = 0; i < n; ++i) {
    size_t c = static_cast<size_t>(feat(i));
    y.mutableAs<double>()[i] = scale.as<double>()[c] * (xv[i] - mean[c]) / std::sqrt(var[c] + eps) + offset.as<double>()[c];
  }
  if (inst.opcode() == Opcode::BatchNormInference) return convertArray(y, t);
  return Value::tuple({convertArray(y, t), toVec(mean), toVec(var)});
}

}  // namespace tpu::eval
