// Tensor I/O of tpu-run, shared by the interpreter and (later) the
// simulator modes: .npy files and inline values to hlo::Literal and back,
// seeded random inputs, text printing, and result comparison.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/literal.h"
#include "support/diagnostics.h"
#include "support/npy.h"

namespace tpu::runner {

// An .npy array as a literal of `want` (an array shape). The dtype must be
// the element type's own, except: narrow floats (bf16, f8*, f6*, f4*) also
// accept float32 (rounded to nearest even), f16 accepts float32 too, and
// sub-byte integers accept int8/uint8 in range. `what` names the tensor in
// messages ("input 0 (x.npy)"), `owner` what `want` is the shape of
// ("parameter", or "result" for expected outputs).
std::optional<hlo::Literal> literalFromNpy(const NpyArray& array, const hlo::Shape& want,
                                           std::string_view what, DiagnosticEngine& diags,
                                           std::string_view owner = "parameter");
// Reads `path` and converts as above.
std::optional<hlo::Literal> readNpyLiteral(const std::string& path, const hlo::Shape& want,
                                           std::string_view what, DiagnosticEngine& diags,
                                           std::string_view owner = "parameter");
// A literal as .npy: narrow floats (bf16, f8*, f6*, f4*) become float32,
// sub-byte ints int8/uint8, pred bool. Array literals only.
NpyArray npyFromLiteral(const hlo::Literal& literal);

// IREE-style inline values: `2x3xf32=1,2,3,4,5,6`, scalars `f32=1.5`,
// `pred=true`; a single value fills the whole array. Values may be ints,
// floats, inf, -inf, nan, true, false. With `want`, the shape must match.
std::optional<hlo::Literal> parseInlineLiteral(std::string_view text, const hlo::Shape* want,
                                               std::string_view what, DiagnosticEngine& diags,
                                               std::string_view owner = "parameter");

// Seeded pseudo-random contents for parameter `index` (the elided-constant
// recipe of eval/elided.h keyed by "seed=<seed>/parameter=<index>": floats
// uniform in [-1, 1), ints in [-4, 4], pred random).
hlo::Literal randomLiteral(const hlo::Shape& shape, uint64_t seed, int64_t index);

// Text rendering: `f32[2,3] {{1, 2, 3}, {4, 5, 6}}` (floats in shortest
// round-trip form of their type). Arrays of more than `summarizeAbove`
// elements (if >= 0) show only the first and last 3 entries of each long
// dimension, numpy-style, with `...` between.
std::string formatLiteral(const hlo::Literal& literal, int64_t summarizeAbove = -1);

// Array leaves of a (possibly nested) tuple in order.
std::vector<const hlo::Literal*> flattenLiteral(const hlo::Literal& literal);

// First element where `got` and `expected` differ: integers and pred
// exactly; floats when |got - expected| > atol + rtol * |expected| (NaN
// equals NaN, infinities must match). Nullopt when all match; otherwise a
// message naming the multi-dimensional index and both values. With
// `scaled` > 0, an element's atol is at least `scaled` times the root mean
// square of the finite expected values around it: the block of whole rows
// (minor dimension) holding it and at least 128 elements (errors of sums
// scale with the size of their terms; see checkScaledTolerances). With
// `nanMatchesAny`, a NaN on either side matches any value (results whose
// error bound exceeds their size: tpu-run --check).
std::optional<std::string> compareLiterals(const hlo::Literal& got, const hlo::Literal& expected, double atol,
                                           double rtol, double scaled = 0, bool nanMatchesAny = false);

}  // namespace tpu::runner
