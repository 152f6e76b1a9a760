// Internal interface between the lowering (lower.cpp) and the public API.
#pragma once

#include "codegen/codegen.h"

namespace tpu::codegen {

std::optional<CodegenResult> lowerModule(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags);

}  // namespace tpu::codegen
