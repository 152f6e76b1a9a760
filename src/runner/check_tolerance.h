// The tolerances `tpu-run --check` compares compiled results with, derived
// per result from the error bounds of the instructions that compute it.
#pragma once

#include <vector>

#include "codegen/codegen.h"
#include "hlo/module.h"

namespace tpu::runner {

// Smallest tolerance a float result gets (f32 agreement).
inline constexpr double kCheckToleranceFloor = 1e-5;

// One tolerance per array leaf of the entry's result (in the order
// flattenLiteral gives them), used as both atol and rtol. Each is the
// largest error bound of an instruction the leaf depends on (see DESIGN.md
// "tpu-run --check tolerances"), at least kCheckToleranceFloor.
std::vector<double> checkTolerances(const hlo::Module& module, codegen::F32DotPrecision dotPrecision);

// Bounds relative to the size of the values rather than to each element:
// one per array leaf as checkTolerances, the error of a result that goes
// through sums (dots, convolutions, add-reductions) in units of the root
// mean square of the expected array. A sum's rounding errors scale with
// its terms, not with its result, which cancellation can make as small as
// it likes; and a chain of dots grows the values far past the ~1 of the
// inputs the per-element bound assumes. --check allows each element
// max(atol, scaled * rms(expected)). Own bounds add up along a chain (each
// sum carries its operands' relative error on top of its own). 0 where no
// sum is involved.
std::vector<double> checkScaledTolerances(const hlo::Module& module, codegen::F32DotPrecision dotPrecision);

// A result whose tolerance reaches this is not determined by the inputs to
// better than its own size (e.g. a bf16 add-reduction of 256k elements in
// the interpreter's sequential order, which stops growing once its half ulp
// exceeds the addends): its sign may flip, so a NaN from sqrt or log of it
// on one side and a number on the other is within the bound.
inline constexpr double kUnboundedTolerance = 1.0;

// The error bound of one instruction by itself (0: the compiled code
// computes what the interpreter computes, bit for bit), ignoring what it
// calls and what its operands carry.
double ownErrorBound(const hlo::Instruction& instr, codegen::F32DotPrecision dotPrecision);

}  // namespace tpu::runner
