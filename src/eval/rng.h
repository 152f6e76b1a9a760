// Counter-based random bits for rng-bit-generator and rng. The block
// functions are the standard Threefry-2x32 (20 rounds) and Philox-4x32 (10
// rounds) of Salmon et al.; how state words map onto key/counter and how
// blocks map onto output elements is documented below. These streams are
// deterministic but are not promised to be XLA's exact bits (the opset spec
// leaves that unverified).
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace tpu::eval {

std::array<uint32_t, 2> threefry2x32(std::array<uint32_t, 2> key, std::array<uint32_t, 2> counter);
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> counter);

enum class RngAlgorithm { ThreeFry, Philox };

// Fills `count` elements of `bytesPerElement` (1, 2, 4 or 8) bytes with
// random bits and writes the advanced state (same length as `state`).
//  ThreeFry: state u64[2] = (key, counter). Block c = threefry(key,
//    counter + c) yields two u32 words; 64-bit element e is block e (low word
//    first); narrower elements take the low bits of u32 word e.
//  Philox: state u64[2] (key, counter) or u64[3] (key, counter lo, counter
//    hi); a block yields four u32 words, used as a word stream the same way.
//  The counter advances by the number of blocks consumed.
// Returns false if the state length does not suit the algorithm.
bool rngBitGenerator(RngAlgorithm algorithm, std::span<const uint64_t> state, std::span<uint64_t> newState,
                     void* out, int64_t count, int bytesPerElement);

}  // namespace tpu::eval
