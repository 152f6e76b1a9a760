#include "eval/rng.h"

#include <cstring>
#include <vector>

namespace tpu::eval {

namespace {

inline uint32_t rotl(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

}  // namespace

std::array<uint32_t, 2> threefry2x32(std::array<uint32_t, 2> key, std::array<uint32_t, 2> counter) {
  static constexpr int kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  uint32_t x0 = counter[0] + ks[0];
  uint32_t x1 = counter[1] + ks[1];
  for (int group = 0; group < 5; ++group) {  // 5 groups of 4 rounds, key injection after each
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl(x1, kRot[(group % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(group + 1) % 3];
    x1 += ks[(group + 2) % 3] + static_cast<uint32_t>(group + 1);
  }
  return {x0, x1};
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> x) {
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * x[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * x[2];
    x = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ key[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return x;
}

bool rngBitGenerator(RngAlgorithm algorithm, std::span<const uint64_t> state, std::span<uint64_t> newState,
                     void* out, int64_t count, int bytesPerElement) {
  if (newState.size() != state.size()) return false;
  if (algorithm == RngAlgorithm::ThreeFry && state.size() != 2) return false;
  if (algorithm == RngAlgorithm::Philox && state.size() != 2 && state.size() != 3) return false;
  const uint64_t key64 = state[0];
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(key64), static_cast<uint32_t>(key64 >> 32)};
  uint64_t counterLo = state[1];
  uint64_t counterHi = state.size() == 3 ? state[2] : 0;
  const int wordsPerBlock = algorithm == RngAlgorithm::ThreeFry ? 2 : 4;
  const int64_t words = bytesPerElement == 8 ? 2 * count : count;
  const int64_t blocks = (words + wordsPerBlock - 1) / wordsPerBlock;
  std::vector<uint32_t> stream(static_cast<size_t>(blocks * wordsPerBlock));
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t lo = counterLo + static_cast<uint64_t>(b);
    uint64_t hi = counterHi + (lo < counterLo ? 1 : 0);
    if (algorithm == RngAlgorithm::ThreeFry) {
      auto r = threefry2x32(key, {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32)});
      stream[2 * b] = r[0];
      stream[2 * b + 1] = r[1];
    } else {
      auto r = philox4x32(key, {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                                static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32)});
      for (int w = 0; w < 4; ++w) stream[4 * b + w] = r[w];
    }
  }
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t e = 0; e < count; ++e) {
    switch (bytesPerElement) {
      case 8: {
        uint64_t v = stream[2 * e] | (static_cast<uint64_t>(stream[2 * e + 1]) << 32);
        std::memcpy(o + 8 * e, &v, 8);
        break;
      }
      case 4: std::memcpy(o + 4 * e, &stream[e], 4); break;
      case 2: {
        uint16_t v = static_cast<uint16_t>(stream[e]);
        std::memcpy(o + 2 * e, &v, 2);
        break;
      }
      default: o[e] = static_cast<uint8_t>(stream[e]); break;
    }
  }
  newState[0] = key64;
  uint64_t lo = counterLo + static_cast<uint64_t>(blocks);
  newState[1] = lo;
  if (state.size() == 3) newState[2] = counterHi + (lo < counterLo ? 1 : 0);
  return true;
}

}  // namespace tpu::eval
