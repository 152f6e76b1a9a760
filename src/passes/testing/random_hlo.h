// A seeded generator of random valid HLO modules over the opset the
// optimizer rewrites: elementwise ops, broadcast, reshape, transpose,
// slice, concatenate, pad, reduce, dot, compare/select, convert, iota,
// constants, tuples, calls and while loops with small trip counts. It
// plants the patterns simplification looks for (identities, view chains,
// duplicated expressions, constant subexpressions, dead values, loops of
// 0 or 1 trips) among ordinary computation, so a differential test of a
// pipeline exercises its rewrites and their preconditions.
//
// The same seed and options give the same text on every host (no standard
// distribution objects: their results are implementation-defined).
#pragma once

#include <cstdint>
#include <string>

namespace tpu::passes::testing {

struct RandomHloOptions {
  // Instructions generated in the entry computation (about; helpers for
  // loops and calls come on top).
  int instructions = 60;
  int maxRank = 3;
  int maxDimension = 6;
  bool loops = true;
  bool calls = true;
};

// HLO text of one module named `random_<seed>`.
std::string generateRandomHlo(uint64_t seed, const RandomHloOptions& options = {});

}  // namespace tpu::passes::testing
