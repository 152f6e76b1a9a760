#include "hlo/opcode.h"

#include <algorithm>
#include <array>
#include <utility>

namespace tpu::hlo {
namespace {

const std::array<OpcodeInfo, kOpcodeCount> kOpcodes = {{
#define HLO_OPCODE(name, text, arity, flags) {text, arity, static_cast<uint32_t>(flags)},
#include "hlo/opcode.def"
}};

// Sorted (name, opcode) pairs for binary search.
std::array<std::pair<std::string_view, Opcode>, kOpcodeCount> buildSorted() {
  std::array<std::pair<std::string_view, Opcode>, kOpcodeCount> s{};
  for (int i = 0; i < kOpcodeCount; ++i) s[static_cast<size_t>(i)] = {kOpcodes[static_cast<size_t>(i)].name, static_cast<Opcode>(i)};
  std::sort(s.begin(), s.end());
  return s;
}

}  // namespace

const OpcodeInfo& opcodeInfo(Opcode opcode) { return kOpcodes[static_cast<size_t>(opcode)]; }

std::optional<Opcode> opcodeFromName(std::string_view name) {
  static const auto sorted = buildSorted();
  auto it = std::lower_bound(sorted.begin(), sorted.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it != sorted.end() && it->first == name) return it->second;
  return std::nullopt;
}

}  // namespace tpu::hlo
