// The fusion rules that are not a matter of cost: which instructions may be
// fused at all, which are too expensive to compute twice, and the structural
// limits of one kernel. Each refusal is a sentence a user can act on.
#pragma once

#include <string>

#include "hlo/instruction.h"

namespace tpu::fusion {

// Why `in` can be no member of a fusion ("" = it can). `ordered` says that
// control dependencies pin it.
std::string unfusibleReason(const hlo::Instruction& in, bool ordered);

// Worth computing twice? XLA's list (FUSION.md 2.4): exp, log, divide,
// sqrt, tanh, ..., dot, convolution, reductions, gathers, fusions.
bool isExpensive(const hlo::Instruction& in);

// Cheap enough to copy into every user whatever it costs in work: a
// broadcast, an iota, a widening convert.
bool isAlwaysDuplicable(const hlo::Instruction& in);

// llo-gen lowers it by renaming buffers (reshape, bitcast, copy, tuple ...).
bool movesNoData(const hlo::Instruction& in);

// A dot or convolution: the MXU kernel's hero; one per fusion.
bool isMatmul(const hlo::Instruction& in);

// What a dot may compute on its operands as they load (an operand
// prologue): elementwise work and views of it.
bool isPrologueOp(const hlo::Instruction& in);

}  // namespace tpu::fusion
