// The HLO verifier: structural module checks plus shape inference for every
// instruction (XLA's HloVerifier: module checks, ShapeVerifier and
// InstructionVerifier; see shared/spec/TOOLS.md section 8). It never changes
// the module, never crashes on hostile IR (it runs right after parsing
// arbitrary input) and reports every problem it finds, up to a cap, to the
// DiagnosticEngine at the best source location available.
#pragma once

#include <cstddef>
#include <optional>

#include "hlo/module.h"
#include "support/diagnostics.h"

namespace tpu::hlo {

struct VerifyOptions {
  // Shapes of layout-preserving ops must match including layout (after
  // hlo-layout); otherwise layouts are ignored when comparing shapes.
  bool layoutSensitive = false;
  // Tolerate f32/bf16 (any float precision) mixing where types should match.
  bool allowMixedPrecision = false;
  // broadcast `dimensions` must be sorted.
  bool verifyBroadcastDimensionsOrder = false;
  // bitcast may change the byte size.
  bool allowBitcastToHaveDifferentSize = false;
  // Sharding device ids must be < num_partitions * replica_count.
  bool verifyShardingDeviceNumbers = true;
  // Accept `?` (unbounded dynamic) dimensions.
  bool allowUnboundedDynamism = false;
  // Instruction names must be unique in the whole module (XLA's verifier).
  // Off by default: XLA's text parser silently renames names repeated across
  // computations (`p0` in a reducer and in a fusion), so real modules repeat
  // them; ours keeps names as written. Within one computation names are
  // always unique.
  bool moduleUniqueNames = false;
  // Stop after this many errors (0 = no limit).
  size_t maxErrors = 20;
};

// Verifies the whole module; true when no error was reported.
bool verifyModule(const Module& module, DiagnosticEngine& diags, const VerifyOptions& options = {});

// The shape XLA's shape inference gives `instruction` from its operands,
// attributes and called computations (ops whose result shape is declared,
// like custom-call or parameter, give the declared shape after checking what
// can be checked). On an inconsistency, reports it at the instruction and
// returns nullopt. The instruction's operands must be non-null.
std::optional<Shape> inferShape(const Instruction& instruction, DiagnosticEngine& diags,
                                const VerifyOptions& options = {});

// Whether a declared shape agrees with an inferred one for `opcode` under the
// options (layouts ignored unless layout-sensitive; XLA's CheckShape rules).
bool shapeMatchesInferred(Opcode opcode, const Shape& declared, const Shape& inferred,
                          const VerifyOptions& options = {});

}  // namespace tpu::hlo
