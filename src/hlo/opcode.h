// HLO opcodes, generated from the table in opcode.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tpu::hlo {

enum class Opcode : uint8_t {
#define HLO_OPCODE(name, text, arity, flags) name,
#include "hlo/opcode.def"
};

inline constexpr int kOpcodeCount = 0
#define HLO_OPCODE(name, text, arity, flags) +1
#include "hlo/opcode.def"
    ;

// Operand count meaning "any number" in the table.
inline constexpr int kVariadic = -1;

// Property bits of an opcode.
enum OpcodeFlag : uint32_t {
  kElementwise = 1u << 0,      // result element i depends only on operand elements i
  kCommutative = 1u << 1,      // binary and operand order does not matter
  kSideEffecting = 1u << 2,    // never removed or duplicated by passes
  kCollective = 1u << 3,       // communicates across replicas/partitions
  kAsyncStart = 1u << 4,       // begins an asynchronous pair (result is a context)
  kAsyncDone = 1u << 5,        // ends an asynchronous pair
  kResultAccuracy = 1u << 6,   // accepts result_accuracy=
  // The result is operand 0's elements in the same row-major order: with dense
  // row-major buffers (codegen) it only renames operand 0's buffer. Under
  // other layouts it may move data (reshape, copy) unless it is also kAlias.
  kPureRename = 1u << 7,
  kAlias = 1u << 8,            // a pure rename in every layout: the result is operand 0's bytes
  kBarrier = 1u << 9,          // exists for order or annotation: passes never merge or fold it
  kBufferStructure = 1u << 10, // defines, groups or picks buffers (parameter, constant, tuple, token): computes nothing
  kControlFlow = 1u << 11,     // runs called computations in place of a kernel (while, conditional, call)
  kView = 1u << 12,            // each result element is one operand-0 element at an index the shapes fix (a strided view)
};

struct OpcodeInfo {
  std::string_view name;  // text spelling, e.g. "get-tuple-element"
  int arity;              // fixed operand count or kVariadic
  uint32_t flags;         // OpcodeFlag bits
};

const OpcodeInfo& opcodeInfo(Opcode opcode);
inline std::string_view opcodeName(Opcode opcode) { return opcodeInfo(opcode).name; }
std::optional<Opcode> opcodeFromName(std::string_view name);

inline bool hasFlag(Opcode op, OpcodeFlag flag) { return (opcodeInfo(op).flags & flag) != 0; }
inline bool isElementwise(Opcode op) { return hasFlag(op, kElementwise); }
// Side-effecting by opcode alone; Instruction::hasSideEffect() also looks at
// custom_call_has_side_effect and collectives.
inline bool isSideEffectingOpcode(Opcode op) { return hasFlag(op, kSideEffecting); }
inline bool isCollective(Opcode op) { return hasFlag(op, kCollective); }
inline bool isAsyncStart(Opcode op) { return hasFlag(op, kAsyncStart); }
inline bool isAsyncDone(Opcode op) { return hasFlag(op, kAsyncDone); }
inline bool isPureRename(Opcode op) { return hasFlag(op, kPureRename); }
inline bool isAlias(Opcode op) { return hasFlag(op, kAlias); }
inline bool isBarrier(Opcode op) { return hasFlag(op, kBarrier); }
inline bool isBufferStructure(Opcode op) { return hasFlag(op, kBufferStructure); }
inline bool isControlFlow(Opcode op) { return hasFlag(op, kControlFlow); }
inline bool isView(Opcode op) { return hasFlag(op, kView); }
// Lowers to no code of its own on dense row-major buffers: a pure rename or
// buffer structure (bitcast-convert between equal widths is decided by types,
// so it is not here).
inline bool computesNothing(Opcode op) { return hasFlag(op, static_cast<OpcodeFlag>(kPureRename | kBufferStructure)); }

}  // namespace tpu::hlo
