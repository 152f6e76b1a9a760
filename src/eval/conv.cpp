#include "eval/conv.h"

#include <complex>
#include <type_traits>

#include "eval/gemm.h"
#include "eval/strided.h"

namespace tpu::eval {

namespace {

// For one spatial dim: input index read by output position y and kernel
// tap k, or -1 for padding / base-dilation holes.
struct SpatialMap {
  std::vector<int64_t> index;  // [out * K + k]
};

SpatialMap buildMap(const ConvParams& p, size_t d) {
  SpatialMap m;
  const int64_t out = p.outputSize[d], kSize = p.kernelSize[d];
  const int64_t dilatedInput = (p.inputSize[d] - 1) * p.lhsDilation[d] + 1;
  m.index.resize(static_cast<size_t>(out * kSize));
  for (int64_t y = 0; y < out; ++y) {
    for (int64_t k = 0; k < kSize; ++k) {
      int64_t pos = y * p.stride[d] + k * p.rhsDilation[d] - p.padLow[d];
      int64_t idx = -1;
      if (p.inputSize[d] > 0 && pos >= 0 && pos < dilatedInput && pos % p.lhsDilation[d] == 0)
        idx = pos / p.lhsDilation[d];
      m.index[static_cast<size_t>(y * kSize + k)] = idx;
    }
  }
  return m;
}

// Iterates a multi-index over `dims` calling f(linear, index).
template <typename F>
void forEachIndex(const std::vector<int64_t>& dims, F f) {
  int64_t total = elementCount(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t lin = 0; lin < total; ++lin) {
    f(lin, idx);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

struct Geometry {
  size_t rank;
  int64_t groups, inPerGroup, outPerGroup, outBatch;
  int64_t spatialIn, spatialK, spatialOut;
  std::vector<int64_t> inStrides;  // over spatial dims of the input
  // For each (output spatial position, kernel spatial position): input
  // spatial offset or -1.
  std::vector<int64_t> offsets;  // [outPos * spatialK + kPos]
};

Geometry buildGeometry(const ConvParams& p) {
  Geometry g;
  g.rank = p.inputSize.size();
  g.groups = std::max(p.featureGroups, p.batchGroups);
  g.inPerGroup = p.inFeatures / p.featureGroups;
  g.outPerGroup = p.outFeatures / g.groups;
  g.outBatch = p.batch / p.batchGroups;
  g.spatialIn = elementCount(p.inputSize);
  g.spatialK = elementCount(p.kernelSize);
  g.spatialOut = elementCount(p.outputSize);
  g.inStrides = rowMajorStrides(p.inputSize);
  std::vector<SpatialMap> maps;
  for (size_t d = 0; d < g.rank; ++d) maps.push_back(buildMap(p, d));
  g.offsets.assign(static_cast<size_t>(g.spatialOut * g.spatialK), -1);
  forEachIndex(p.outputSize, [&](int64_t outLin, const std::vector<int64_t>& y) {
    forEachIndex(p.kernelSize, [&](int64_t kLin, const std::vector<int64_t>& k) {
      int64_t off = 0;
      for (size_t d = 0; d < g.rank; ++d) {
        int64_t kk = p.reversal.size() > d && p.reversal[d] ? p.kernelSize[d] - 1 - k[d] : k[d];
        int64_t idx = maps[d].index[static_cast<size_t>(y[d] * p.kernelSize[d] + kk)];
        if (idx < 0) return;
        off += idx * g.inStrides[d];
      }
      g.offsets[static_cast<size_t>(outLin * g.spatialK + kLin)] = off;
    });
  });
  return g;
}

// Input batch and first input feature of (output batch n, group gi).
inline int64_t inputBatch(const ConvParams& p, const Geometry& g, int64_t n, int64_t gi) {
  return p.batchGroups > 1 ? gi * g.outBatch + n : n;
}
inline int64_t inputFeature0(const ConvParams& p, const Geometry& g, int64_t gi) {
  return p.featureGroups > 1 ? gi * g.inPerGroup : 0;
}

template <typename T>
void convGemm(const ConvParams& p, const T* input, const T* kernel, T* output) {
  Geometry g = buildGeometry(p);
  const int64_t colRows = g.inPerGroup * g.spatialK;
  std::vector<T> col(static_cast<size_t>(colRows * g.spatialOut));
  for (int64_t n = 0; n < g.outBatch; ++n) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const int64_t nb = inputBatch(p, g, n, gi);
      const int64_t f0 = inputFeature0(p, g, gi);
      // col[(i, kPos), outPos]
      for (int64_t i = 0; i < g.inPerGroup; ++i) {
        const T* plane = input + (nb * p.inFeatures + f0 + i) * g.spatialIn;
        for (int64_t kPos = 0; kPos < g.spatialK; ++kPos) {
          T* row = col.data() + (i * g.spatialK + kPos) * g.spatialOut;
          const int64_t* off = g.offsets.data() + kPos;
          for (int64_t y = 0; y < g.spatialOut; ++y) {
            int64_t o = off[y * g.spatialK];
            row[y] = o >= 0 ? plane[o] : T(0);
          }
        }
      }
      // out[n, gi*outPerGroup + oo, y] = ker[gi*outPerGroup + oo, (i,k)] x col
      const T* ker = kernel + gi * g.outPerGroup * colRows;
      T* out = output + (n * p.outFeatures + gi * g.outPerGroup) * g.spatialOut;
      gemm(g.outPerGroup, g.spatialOut, colRows, ker, colRows, 1, col.data(), g.spatialOut, 1, out, g.spatialOut);
    }
  }
}

template <typename T>
void convDirect(const ConvParams& p, const T* input, const T* kernel, T* output, bool logical = false) {
  Geometry g = buildGeometry(p);
  const int64_t colRows = g.inPerGroup * g.spatialK;
  for (int64_t n = 0; n < g.outBatch; ++n) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const int64_t nb = inputBatch(p, g, n, gi);
      const int64_t f0 = inputFeature0(p, g, gi);
      for (int64_t oo = 0; oo < g.outPerGroup; ++oo) {
        const T* ker = kernel + (gi * g.outPerGroup + oo) * colRows;
        T* out = output + (n * p.outFeatures + gi * g.outPerGroup + oo) * g.spatialOut;
        for (int64_t y = 0; y < g.spatialOut; ++y) {
          T acc{};
          for (int64_t i = 0; i < g.inPerGroup; ++i) {
            const T* plane = input + (nb * p.inFeatures + f0 + i) * g.spatialIn;
            for (int64_t kPos = 0; kPos < g.spatialK; ++kPos) {
              int64_t o = g.offsets[static_cast<size_t>(y * g.spatialK + kPos)];
              if (o < 0) continue;
              if constexpr (std::is_integral_v<T>) {
                if (logical) {
                  acc = static_cast<T>(acc || (plane[o] && ker[i * g.spatialK + kPos]));
                  continue;
                }
                using U = std::make_unsigned_t<T>;
                acc = static_cast<T>(static_cast<U>(acc) +
                                     static_cast<U>(plane[o]) * static_cast<U>(ker[i * g.spatialK + kPos]));
              } else {
                acc += plane[o] * ker[i * g.spatialK + kPos];
              }
            }
          }
          out[y] = acc;
        }
      }
    }
  }
}

}  // namespace

int64_t convOutputSize(int64_t input, int64_t kernel, int64_t stride, int64_t padLow, int64_t padHigh,
                       int64_t lhsDilation, int64_t rhsDilation) {
  int64_t padded = (input > 0 ? (input - 1) * lhsDilation + 1 : 0) + padLow + padHigh;
  int64_t effective = (kernel - 1) * rhsDilation + 1;
  if (kernel == 0) effective = 0;
  if (padded < effective || stride <= 0) return 0;
  return (padded - effective) / stride + 1;
}

bool convolution(KType type, const ConvParams& p, const void* input, const void* kernel, void* output) {
  switch (type) {
    case KType::F32:
      convGemm(p, static_cast<const float*>(input), static_cast<const float*>(kernel), static_cast<float*>(output));
      return true;
    case KType::F64:
      convGemm(p, static_cast<const double*>(input), static_cast<const double*>(kernel),
               static_cast<double*>(output));
      return true;
#define TPU_CONV_DIRECT(K, T)                                                                                  \
  case KType::K:                                                                                               \
    convDirect(p, static_cast<const T*>(input), static_cast<const T*>(kernel), static_cast<T*>(output));     \
    return true;
    case KType::Pred:
      convDirect(p, static_cast<const uint8_t*>(input), static_cast<const uint8_t*>(kernel),
                 static_cast<uint8_t*>(output), true);
      return true;
      TPU_CONV_DIRECT(S8, int8_t)
      TPU_CONV_DIRECT(S16, int16_t)
      TPU_CONV_DIRECT(S32, int32_t)
      TPU_CONV_DIRECT(S64, int64_t)
      TPU_CONV_DIRECT(U8, uint8_t)
      TPU_CONV_DIRECT(U16, uint16_t)
      TPU_CONV_DIRECT(U32, uint32_t)
      TPU_CONV_DIRECT(U64, uint64_t)
      TPU_CONV_DIRECT(C64, std::complex<float>)
      TPU_CONV_DIRECT(C128, std::complex<double>)
#undef TPU_CONV_DIRECT
  }
  return false;
}

}  // namespace tpu::eval
