#include "hlo/text/parser.h"

namespace tpu::hlo {

std::unique_ptr<Module> parseHloText(const SourceFile& file, DiagnosticEngine& diags, const ParseOptions&) {
  diags.error(SourceLocation{&file, 0}, "HLO text parser not implemented yet");
  return nullptr;
}

std::optional<Shape> parseShapeText(const SourceFile& file, DiagnosticEngine& diags) {
  diags.error(SourceLocation{&file, 0}, "HLO text parser not implemented yet");
  return std::nullopt;
}

}  // namespace tpu::hlo
