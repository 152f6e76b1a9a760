// Elided constants (`constant({...})` in HLO text: a shape without data)
// get deterministic pseudo-random contents so models with stripped weights
// still run. The generator is support/elided_fill.h, shared with llo-gen's
// fill(seed) and its expansion in the assembler and the .tpu reader, so the
// interpreter and compiled code see the same values.
//
// Recipe (stable across hosts and versions of this file):
//   seed  = FNV-1a 64-bit hash of the instruction name, a 0 byte, and the
//           shape printed without layout (e.g. "f32[3,3,32]").
//   stream: SplitMix64 starting from `seed` (state += 0x9E3779B97F4A7C15,
//           then the standard xor-shift-multiply finaliser), one draw per
//           element in row-major order (two for complex: real, imaginary).
//   floats: u = (draw >> 11) * 2^-53 in [0, 1); v = 2u - 1 (uniform in
//           [-1, 1), exact in f64). f64 takes v; every other float type
//           takes v rounded to f32, then rounded to the type (nearest even);
//           complex: both parts that way (c128 parts keep f64).
//   signed ints: draw % 9 - 4 in [-4, 4] (s2: draw % 4 - 2; s1: draw % 2 - 1);
//   unsigned ints: draw % 9 in [0, 8] (u1/u2: draw % 2^bits);
//   pred: draw & 1.
// Tuples are filled element by element, each with the name suffixed by
// "/<index>".
#pragma once

#include <string_view>

#include "hlo/instruction.h"
#include "hlo/literal.h"

namespace tpu::eval {

hlo::Literal fillElidedLiteral(std::string_view name, const hlo::Shape& shape);
// For a constant instruction (its name and shape).
hlo::Literal fillElidedConstant(const hlo::Instruction& constant);

}  // namespace tpu::eval
