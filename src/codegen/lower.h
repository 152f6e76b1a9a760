// Internal interface between the lowering (lower.cpp) and the public API.
#pragma once

#include <functional>

#include "codegen/codegen.h"

namespace tpu::codegen {

// Receives the code in pieces as it is emitted (each a run of whole kernels
// that no later code branches into); false stops the lowering (reported).
using CodeSink = std::function<bool(EmittedCode&)>;

// With a sink (list scheduling only), the code of each top-level kernel
// goes to it once the next kernel starts and the result's `code` holds the
// rest; without, `code` holds all of it.
std::optional<CodegenResult> lowerModule(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags,
                                         CodeSink sink = {});

}  // namespace tpu::codegen
