// The relayout sinker's convolution rule (physical-edges, issue 16 point 4):
// a convolution, or an output fusion of one, whose activations are stored
// physically reads them in place, and writes its result physically when
// its own layout allows, so no relayout runs between the edges.
#pragma once

#include <functional>
#include <string>

#include "hlo/module.h"
#include "hlo/shape.h"
#include "passes/layout/physical_value.h"

namespace tpu::passes::layout {

struct ConvTwin {
  hlo::Instruction* twin = nullptr;  // the rewritten output fusion (nullptr: not taken)
  bool physicalResult = false;       // twin is the physical form of in->shape(); else in's logical value
};

// When `in` is a convolution with one feature and one batch group, or an
// output fusion of one (the convolution reads a parameter; the rest is
// elementwise work), whose activations are physical (`physicalOf`) in an
// arrangement where every dimension steps by one stride and the features
// are contiguous (physicalStrides): an output fusion over the physical
// arrays, each read through a physical bitcast (the activations, and
// epilogue inputs shaped like the result that are physical the same way),
// whose root is the physical bitcast of the result when in->shape()'s
// layout is such an arrangement. The kernel keeps its logical operand.
// Channel padding is never read (a bitcast's padding is unspecified: after
// sunk elementwise work it is not zero). Adds the twin and its computation;
// `in` is left for the caller to replace.
ConvTwin physicalConvolution(hlo::Module& module, hlo::Computation& entry, hlo::Instruction* in,
                             const std::function<const PhysicalValue*(hlo::Instruction*)>& physicalOf,
                             const std::function<std::string(const std::string&)>& fresh);

// Whether `shape` is stored so that a convolution can read (or write) it in
// place along `featureDimension`: a tiled physical form whose dimensions
// each step by one stride, the features contiguous.
bool convReadsInPlace(const hlo::Shape& shape, int64_t featureDimension);

}  // namespace tpu::passes::layout
