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

bool isSymbolName(std::string_view name) {
  auto isStart = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto isRest = [&](char c) { return isStart(c) || (c >= '0' && c <= '9') || c == '.'; };
  if (name.empty() || !isStart(name[0])) return false;
  for (char c : name.substr(1))
    if (!isRest(c)) return false;
  return true;
}

}  // namespace tpu::isa
