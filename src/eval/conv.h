// Convolution on canonical layouts, independent of the IR: input
// [N, C, S0..], kernel [O, I, K0..], output [N/B, O, Out0..], all row-major.
// The caller transposes operands into these layouts (dim_labels) and back.
// f32/f64 go through im2col + the blocked GEMM; other types use a direct
// loop (integers wrap).
#pragma once

#include <cstdint>
#include <vector>

#include "eval/elementwise.h"

namespace tpu::eval {

struct ConvParams {
  int64_t batch = 1;        // N
  int64_t inFeatures = 1;   // C = I * featureGroups
  int64_t outFeatures = 1;  // O
  int64_t featureGroups = 1;
  int64_t batchGroups = 1;
  std::vector<int64_t> inputSize, kernelSize, outputSize;  // per spatial dim
  std::vector<int64_t> stride, padLow, lhsDilation, rhsDilation;
  std::vector<bool> reversal;
};

// Output size of one spatial dim (0 if the window does not fit).
int64_t convOutputSize(int64_t input, int64_t kernel, int64_t stride, int64_t padLow, int64_t padHigh,
                       int64_t lhsDilation, int64_t rhsDilation);

// Returns false for element types without a kernel (pred, complex are
// supported: pred as logical and/or).
bool convolution(KType type, const ConvParams& p, const void* input, const void* kernel, void* output);

}  // namespace tpu::eval
