// HLO text printer: XLA-compatible text in the newest default style.
#pragma once

#include <string>

#include "hlo/module.h"

namespace tpu::hlo {

struct PrintOptions {
  // XLA's default HloPrintOptions print `%` sigils (print_percent=true) and
  // program shapes; ShortParsable (HloModule::ToString()) omits both. We
  // follow the default "long text" style.
  bool printPercent = true;
  // Operand shapes before operand names (older XLA default; off now).
  bool printOperandShapes = false;
  bool printMetadata = true;
  bool printBackendConfig = true;
  // Print all literal data (otherwise arrays with > 10 elements print `{...}`,
  // XLA's default). On by default: we never lose data we have.
  bool printLargeConstants = true;
  bool printProgramShape = true;
  bool printControlDependencies = true;
  // `op-start`/`op-done` sugar for trivial async wrappers.
  bool asyncSyntaxSugar = true;
};

std::string printHloText(const Module& module, const PrintOptions& options = {});
// One computation (with its header line and braces).
std::string printComputation(const Computation& computation, const PrintOptions& options = {});
// One instruction line without indentation or `ROOT` (e.g. `%a = f32[] add(%x, %y)`).
std::string printInstruction(const Instruction& instruction, const PrintOptions& options = {});
// A literal as it appears inside constant(...).
std::string printLiteral(const Literal& literal);

}  // namespace tpu::hlo
