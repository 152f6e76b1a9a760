// Static cost estimates of HLO: floating-point operations, transcendental
// operations and bytes accessed, following XLA's HloCostAnalysis conventions
// (a dot of [b,m,k]x[b,k,n] is 2*b*m*n*k flops; an elementwise op one flop per
// output element; bytes = operands read + result written at each top-level
// instruction, fusions counted at their boundary). Loops count their body once:
// trip counts are not known statically.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hlo/module.h"

namespace tpu::hlo {

struct Cost {
  double flops = 0;           // floating-point (and integer arithmetic) operations
  double transcendentals = 0; // exp, log, tanh, ... (also counted in flops)
  double bytesAccessed = 0;   // operand bytes read + result bytes written

  Cost& operator+=(const Cost& other) {
    flops += other.flops;
    transcendentals += other.transcendentals;
    bytesAccessed += other.bytesAccessed;
    return *this;
  }
};

// Cost of one instruction, including computations it calls.
Cost instructionCost(const Instruction& instruction);
// Sum over a computation's instructions.
Cost computationCost(const Computation& computation);

struct ModuleStats {
  int64_t computations = 0;
  int64_t instructions = 0;
  std::map<std::string, int64_t> opcodeCounts;  // sorted by opcode name: deterministic output
  int64_t parameterBytes = 0;  // entry parameters
  int64_t constantBytes = 0;   // all constants with data (elided ones count their shape)
  int64_t resultBytes = 0;     // entry result
  Cost entryCost;
};

ModuleStats computeModuleStats(const Module& module);

// Text (one "name: value" per line) and JSON renderings of the stats.
std::string formatModuleStatsText(const ModuleStats& stats, const std::string& moduleName);
std::string formatModuleStatsJson(const ModuleStats& stats, const std::string& moduleName);

}  // namespace tpu::hlo
