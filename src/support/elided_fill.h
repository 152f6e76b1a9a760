// The pseudo-random stream that fills elided HLO constants (the recipe is
// stated in eval/elided.h), for the libraries that materialise such a
// constant without the interpreter: llo-gen writes `fill(seed)` instead of
// the values, and the LLO assembler expands it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpu {

// FNV-1a 64 of the constant's name, a 0 byte and its shape without layout.
inline uint64_t elidedFillSeed(std::string_view name, std::string_view shapeText) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (unsigned char c : name) mix(c);
  mix(0);
  for (unsigned char c : shapeText) mix(c);
  return h;
}

// SplitMix64 from the seed; uniform() is one draw mapped to [-1, 1).
struct ElidedFillStream {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0; }
};

// Bytes of one element of an elided constant of XLA element type `type`
// ("f32", "s8", "pred", "s64", "c128", ...) as HLO literals store it
// (sub-byte types one byte each, s64/u64/f64 eight, c64 eight, c128
// sixteen); 0 for a type the stream does not fill (tuples, tokens, names
// this build does not know).
int elidedFillElementBytes(std::string_view type);

// The first `count` elements of the elided constant of element type `type`
// drawn from `seed` (the recipe of eval/elided.h), as raw little-endian
// bytes in literal storage: exactly what the interpreter's literal holds.
// nullopt when elidedFillElementBytes(type) is 0.
std::optional<std::string> elidedFillBytes(std::string_view type, uint64_t seed, uint64_t count);

}  // namespace tpu
