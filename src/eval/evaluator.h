// The reference interpreter: evaluates an hlo::Module on host values.
//
// Semantics follow shared/spec/HLO_OPSET.md (XLA's); numerical decisions
// are listed in src/eval/README.md. Every op dispatches once on its element
// type into the kernel layer (elementwise.h, kernels.h, strided.h, conv.h);
// scalar computations called per element (reducers, comparators, scatter
// combiners, map) are recognised when they are a single binary op, and
// otherwise evaluated over whole lanes of elements at once when they are
// elementwise (see Interp::callLanes).
//
// Collectives run over replicas x partitions simulated devices, one thread
// per device, meeting at each collective (see collectives.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hlo/literal.h"
#include "hlo/module.h"
#include "support/diagnostics.h"

namespace tpu::eval {

struct EvalOptions {
  // Simulated devices; 0 = the module's replica_count / num_partitions.
  int64_t replicas = 0;
  int64_t partitions = 0;
  // Elided constants (`constant({...})`): fill with pseudo-random data and
  // warn (default), or report an error.
  bool elidedConstantsAreErrors = false;
  // Seed of the `rng` op's stream (rng-bit-generator takes its state as an operand).
  uint64_t rngSeed = 0;
  // Guard against runaway loops (0 = unlimited).
  int64_t maxWhileIterations = 0;
  // Guard against runaway programs: stop with an error naming the innermost
  // running while loop after this many instructions were evaluated on one
  // device (an instruction counts once whatever the size of its arrays;
  // 0 = unlimited).
  int64_t maxSteps = 0;
};

// Results of every simulated device, in device order (replica-major:
// device = replica * partitions + partition).
struct EvalResult {
  std::vector<hlo::Literal> perDevice;
  int64_t replicas = 1;
  int64_t partitions = 1;
};

// Evaluates the entry computation with `args` (one per entry parameter,
// the same on every device). Returns nullopt after reporting errors.
std::optional<EvalResult> evaluateAllDevices(const hlo::Module& module, std::span<const hlo::Literal> args,
                                             const EvalOptions& options, DiagnosticEngine& diags);

// The same with one argument list per device (device order as in
// EvalResult): programs partitioned by hlo-partition take per-device shards.
std::optional<EvalResult> evaluatePerDevice(const hlo::Module& module,
                                            std::span<const std::vector<hlo::Literal>> perDeviceArgs,
                                            const EvalOptions& options, DiagnosticEngine& diags);

// Device 0's result.
std::optional<hlo::Literal> evaluate(const hlo::Module& module, std::span<const hlo::Literal> args,
                                     const EvalOptions& options, DiagnosticEngine& diags);

// Evaluates one instruction on constant operands (one literal per operand),
// running the computations it calls as usual: constant folding. Elided
// constants inside called computations are filled as evaluate() fills them.
// Returns nullopt after reporting errors (for instance an op the
// interpreter does not implement).
std::optional<hlo::Literal> evaluateInstruction(const hlo::Instruction& instruction,
                                                std::span<const hlo::Literal* const> operands,
                                                DiagnosticEngine& diags);

}  // namespace tpu::eval
