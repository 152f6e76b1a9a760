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

// The error bound of one instruction by itself (0: the compiled code
// computes what the interpreter computes, bit for bit), ignoring what it
// calls and what its operands carry.
double ownErrorBound(const hlo::Instruction& instr, codegen::F32DotPrecision dotPrecision);

}  // namespace tpu::runner
