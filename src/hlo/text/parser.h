// HLO text parser (XLA's syntax; see shared/spec/HLO_TEXT_FORMAT.md).
#pragma once

#include <memory>

#include "hlo/module.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu::hlo {

struct ParseOptions {
  // Shapes without a layout get the default layout (XLA's behaviour).
  bool fillDefaultLayouts = true;
  // Caps nesting of braces/parentheses/tuples (hostile input).
  int maxNestingDepth = 256;
};

// Parses a whole module (with or without `HloModule` header). On error,
// reports `file:line:col` diagnostics and returns nullptr.
std::unique_ptr<Module> parseHloText(const SourceFile& file, DiagnosticEngine& diags,
                                     const ParseOptions& options = {});

// Parses just a shape, e.g. "f32[2,3]{1,0}" (tools and tests).
std::optional<Shape> parseShapeText(const SourceFile& file, DiagnosticEngine& diags);

}  // namespace tpu::hlo
