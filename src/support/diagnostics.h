// Diagnostics: library code reports problems here and returns; only the tool
// harness decides how (text or JSON, colour or not) and where they are printed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/source.h"

namespace tpu {

enum class Severity { Error, Warning, Note, Remark };

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceLocation location;  // may be invalid: then only the file name (if any) is shown
  std::string fileName;     // used when location is invalid (e.g. "cannot open")
  std::string message;
  std::vector<Diagnostic> notes;
};

class DiagnosticEngine {
 public:
  using Consumer = std::function<void(const Diagnostic&)>;

  // With a consumer, diagnostics are handed over as they are reported (the
  // tools print them at once); they are also kept for inspection in tests.
  void setConsumer(Consumer consumer) { consumer_ = std::move(consumer); }

  void report(Diagnostic diagnostic);
  void error(SourceLocation loc, std::string message);
  void warning(SourceLocation loc, std::string message);
  void note(SourceLocation loc, std::string message);
  // An error not tied to a position, optionally naming a file.
  void error(std::string message, std::string fileName = {});
  void warning(std::string message, std::string fileName = {});

  template <typename... Args>
  void errorf(SourceLocation loc, fmt::format_string<Args...> f, Args&&... args) {
    error(loc, fmt::format(f, std::forward<Args>(args)...));
  }

  bool hasErrors() const { return errorCount_ > 0; }
  size_t errorCount() const { return errorCount_; }
  size_t warningCount() const { return warningCount_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  // Stop collecting after this many errors (the first is what users read).
  void setErrorLimit(size_t limit) { errorLimit_ = limit; }
  bool errorLimitReached() const { return errorLimit_ && errorCount_ >= errorLimit_; }
  void clear();

 private:
  Consumer consumer_;
  std::vector<Diagnostic> diagnostics_;
  size_t errorCount_ = 0;
  size_t warningCount_ = 0;
  size_t errorLimit_ = 0;
};

enum class DiagnosticFormat { Text, Json };

// "file:line:col: error: message", then the source line and a caret for text
// sources; "file:offset N: error: message" for binary ones. Ends with '\n'.
std::string formatDiagnostic(const Diagnostic& d, DiagnosticFormat format, bool color);

// Short "error: ..." rendering of the first error, for tests.
std::string firstErrorMessage(const DiagnosticEngine& engine);

}  // namespace tpu
