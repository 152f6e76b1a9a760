// Helpers shared by the passes' tests.
#pragma once

#include <memory>
#include <string>

#include "hlo/io/hlo_io.h"
#include "support/diagnostics.h"

namespace tpu::passes {

// A module read from HLO text, or null with the diagnostics in `messages`.
struct ParsedModule {
  std::unique_ptr<hlo::Module> module;
  std::string messages;
};

inline ParsedModule parseModule(const std::string& text) {
  ParsedModule p;
  DiagnosticEngine diags;
  diags.setConsumer(
      [&](const Diagnostic& d) { p.messages += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  auto source = std::make_shared<SourceFile>("test.hlo", text);
  p.module = hlo::readModule(source, diags).module;
  return p;
}

}  // namespace tpu::passes
