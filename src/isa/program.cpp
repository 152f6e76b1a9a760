#include "isa/program.h"

#include <array>

namespace tpu::isa {

namespace {
constexpr std::array<std::string_view, 27> kDTypeNames = {
    "f32",    "bf16",       "f16",        "s32",           "s16",       "s8",       "u32",
    "u16",    "u8",         "pred",       "f8e4m3fn",      "f8e5m2",    "f8e4m3",   "f8e3m4",
    "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn", "s4", "u4",
    "s2", "u2", "s1", "u1", "f6e2m3fn", "f6e3m2fn"};
constexpr std::array<int, 27> kDTypeBytes = {4, 2, 2, 4, 2, 1, 4, 2, 1, 1, 1, 1, 1, 1,
                                             1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static_assert(kDTypeNames.size() == static_cast<size_t>(DType::Last) + 1);
}  // namespace

std::string_view memSpaceName(MemSpace space) {
  switch (space) {
    case MemSpace::Hbm: return "hbm";
    case MemSpace::Vmem: return "vmem";
    case MemSpace::Smem: return "smem";
  }
  return "?";
}

std::string_view dtypeName(DType type) { return kDTypeNames[static_cast<size_t>(type)]; }

std::optional<DType> dtypeFromName(std::string_view name) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i)
    if (kDTypeNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

int dtypeBytes(DType type) { return kDTypeBytes[static_cast<size_t>(type)]; }

uint64_t Buffer::sizeBytes() const {
  uint64_t n = static_cast<uint64_t>(dtypeBytes(dtype));
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

bool sizeFits(const Buffer& b) {
  uint64_t n = static_cast<uint64_t>(dtypeBytes(b.dtype));
  constexpr uint64_t kMax = uint64_t{1} << 48;
  for (int64_t d : b.shape) {
    if (d < 0) return false;
    if (d != 0 && n > kMax / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  return n <= kMax;
}

uint64_t DmaDescriptor::totalBytes() const {
  uint64_t n = chunkBytes;
  for (const DmaDim& d : dims) n *= d.count;
  return n;
}

std::optional<uint32_t> Program::findBuffer(std::string_view name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<uint32_t>(i);
  return std::nullopt;
}

const Entry* Program::findEntry(std::string_view name) const {
  for (const Entry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

const KernelMeta* Program::findKernel(std::string_view label) const {
  for (const KernelMeta& k : kernels)
    if (k.label == label) return &k;
  return nullptr;
}

bool isMetadataText(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f || c == '"') return false;
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, shortest form only.
    size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    i += n;
  }
  return true;
}

bool isSymbolName(std::string_view name) {
  auto isStart = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto isRest = [&](char c) { return isStart(c) || (c >= '0' && c <= '9') || c == '.'; };
  if (name.empty() || !isStart(name[0])) return false;
  for (char c : name.substr(1))
    if (!isRest(c)) return false;
  return true;
}

}  // namespace tpu::isa
