#include "eval/strided.h"

#include <cstring>

namespace tpu::eval {

namespace {

struct Bytes16 {
  uint64_t lo, hi;
};

template <typename E>
void copyLoop(std::span<const int64_t> dims, const E* in, std::span<const int64_t> inStrides, E* out,
              std::span<const int64_t> outStrides) {
  const size_t rank = dims.size();
  const int64_t inner = dims[rank - 1];
  const int64_t si = inStrides[rank - 1];
  const int64_t so = outStrides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t inPos = 0, outPos = 0;
  while (true) {
    const E* src = in + inPos;
    E* dst = out + outPos;
    if (si == 1 && so == 1) {
      std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(E));
    } else if (so == 1) {
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * si];
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i * so] = src[i * si];
    }
    // Advance the odometer over the outer dims.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++index[d];
      inPos += inStrides[d];
      outPos += outStrides[d];
      if (index[d] < dims[d]) break;
      inPos -= inStrides[d] * dims[d];
      outPos -= outStrides[d] * dims[d];
      index[d] = 0;
    }
  }
}

}  // namespace

std::vector<int64_t> rowMajorStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  return strides;
}

int64_t elementCount(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void stridedCopy(size_t elementSize, std::span<const int64_t> dims, const void* in, int64_t inOffset,
                 std::span<const int64_t> inStrides, void* out, int64_t outOffset,
                 std::span<const int64_t> outStrides) {
  // Drop size-1 dims, merge dims contiguous on both sides.
  std::vector<int64_t> d, si, so;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return;
    if (dims[i] == 1) continue;
    if (!d.empty() && si.back() == inStrides[i] * dims[i] && so.back() == outStrides[i] * dims[i]) {
      d.back() *= dims[i];
      si.back() = inStrides[i];
      so.back() = outStrides[i];
      continue;
    }
    d.push_back(dims[i]);
    si.push_back(inStrides[i]);
    so.push_back(outStrides[i]);
  }
  if (d.empty()) {
    d.push_back(1);
    si.push_back(1);
    so.push_back(1);
  }
  auto* inBytes = static_cast<const char*>(in);
  auto* outBytes = static_cast<char*>(out);
  auto run = [&](auto tag) {
    using E = decltype(tag);
    copyLoop<E>(d, reinterpret_cast<const E*>(inBytes) + inOffset, si, reinterpret_cast<E*>(outBytes) + outOffset,
                so);
  };
  switch (elementSize) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    case 8: run(uint64_t{}); break;
    case 16: run(Bytes16{}); break;
    default: {
      // Odd sizes: copy bytes with an extra innermost dim.
      std::vector<int64_t> d2(d), si2, so2;
      for (int64_t s : si) si2.push_back(s * static_cast<int64_t>(elementSize));
      for (int64_t s : so) so2.push_back(s * static_cast<int64_t>(elementSize));
      d2.push_back(static_cast<int64_t>(elementSize));
      si2.push_back(1);
      so2.push_back(1);
      copyLoop<uint8_t>(d2, reinterpret_cast<const uint8_t*>(inBytes) + inOffset * static_cast<int64_t>(elementSize),
                        si2, reinterpret_cast<uint8_t*>(outBytes) + outOffset * static_cast<int64_t>(elementSize),
                        so2);
    }
  }
}

void fillElements(size_t elementSize, void* out, int64_t count, const void* value) {
  auto* o = static_cast<char*>(out);
  if (count <= 0) return;
  std::memcpy(o, value, elementSize);
  int64_t done = 1;
  while (done < count) {
    int64_t chunk = std::min(done, count - done);
    std::memcpy(o + done * static_cast<int64_t>(elementSize), o, static_cast<size_t>(chunk) * elementSize);
    done += chunk;
  }
}

}  // namespace tpu::eval
