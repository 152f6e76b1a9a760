#include "support/diagnostics.h"

#include <nlohmann/json.hpp>

namespace tpu {

void DiagnosticEngine::report(Diagnostic d) {
  if (d.severity == Severity::Error) {
    if (errorLimitReached()) return;
    ++errorCount_;
  } else if (d.severity == Severity::Warning) {
    ++warningCount_;
  }
  if (consumer_) consumer_(d);
  diagnostics_.push_back(std::move(d));
}

void DiagnosticEngine::error(SourceLocation loc, std::string message) {
  report({Severity::Error, loc, {}, std::move(message), {}});
}
void DiagnosticEngine::warning(SourceLocation loc, std::string message) {
  report({Severity::Warning, loc, {}, std::move(message), {}});
}
void DiagnosticEngine::note(SourceLocation loc, std::string message) {
  report({Severity::Note, loc, {}, std::move(message), {}});
}
void DiagnosticEngine::error(std::string message, std::string fileName) {
  report({Severity::Error, {}, std::move(fileName), std::move(message), {}});
}
void DiagnosticEngine::warning(std::string message, std::string fileName) {
  report({Severity::Warning, {}, std::move(fileName), std::move(message), {}});
}

void DiagnosticEngine::clear() {
  diagnostics_.clear();
  errorCount_ = warningCount_ = 0;
}

namespace {

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
    case Severity::Remark: return "remark";
  }
  return "error";
}

const char* severityColor(Severity s) {
  switch (s) {
    case Severity::Error: return "\033[1;31m";
    case Severity::Warning: return "\033[1;35m";
    case Severity::Note: return "\033[1;30m";
    case Severity::Remark: return "\033[1;34m";
  }
  return "";
}

// Source lines can contain tabs; keep them so the caret lines up, and make
// any other control byte visible as a space so the terminal is not disturbed.
std::string printableLine(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (char c : line) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 && c != '\t' ? ' ' : c);
  }
  return out;
}

void formatText(const Diagnostic& d, bool color, std::string& out) {
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  out += bold;
  if (d.location.valid()) {
    const SourceFile& f = *d.location.file;
    if (f.isBinary()) {
      out += fmt::format("{}:offset {}: ", f.name(), d.location.offset);
    } else {
      LineColumn lc = f.lineColumn(d.location.offset);
      out += fmt::format("{}:{}:{}: ", f.name(), lc.line, lc.column);
    }
  } else if (!d.fileName.empty()) {
    out += d.fileName + ": ";
  }
  out += color ? severityColor(d.severity) : "";
  out += severityName(d.severity);
  out += ": ";
  out += reset;
  out += bold;
  out += d.message;
  out += reset;
  out += '\n';
  if (d.location.valid() && !d.location.file->isBinary()) {
    const SourceFile& f = *d.location.file;
    LineColumn lc = f.lineColumn(d.location.offset);
    std::string_view line = f.lineText(lc.line);
    constexpr size_t kMaxShown = 400;  // real dumps have 8,000-character lines
    size_t col = lc.column - 1;
    size_t begin = 0;
    if (line.size() > kMaxShown && col > kMaxShown / 2) begin = col - kMaxShown / 2;
    std::string_view shown = line.substr(begin, kMaxShown);
    out += printableLine(shown);
    out += '\n';
    std::string caret;
    for (size_t i = begin; i < col && i < line.size(); ++i)
      caret.push_back(line[i] == '\t' ? '\t' : ' ');
    out += caret;
    out += color ? "\033[1;32m^\033[0m" : "^";
    out += '\n';
  }
  for (const Diagnostic& n : d.notes) formatText(n, color, out);
}

nlohmann::json toJson(const Diagnostic& d) {
  nlohmann::json j;
  j["severity"] = severityName(d.severity);
  if (d.location.valid()) {
    const SourceFile& f = *d.location.file;
    j["file"] = f.name();
    j["offset"] = d.location.offset;
    if (!f.isBinary()) {
      LineColumn lc = f.lineColumn(d.location.offset);
      j["line"] = lc.line;
      j["column"] = lc.column;
    }
  } else if (!d.fileName.empty()) {
    j["file"] = d.fileName;
  }
  j["message"] = d.message;
  if (!d.notes.empty()) {
    j["notes"] = nlohmann::json::array();
    for (const Diagnostic& n : d.notes) j["notes"].push_back(toJson(n));
  }
  return j;
}

}  // namespace

std::string formatDiagnostic(const Diagnostic& d, DiagnosticFormat format, bool color) {
  if (format == DiagnosticFormat::Json)
    return toJson(d).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::string out;
  formatText(d, color, out);
  return out;
}

std::string firstErrorMessage(const DiagnosticEngine& engine) {
  for (const Diagnostic& d : engine.diagnostics())
    if (d.severity == Severity::Error) return d.message;
  return {};
}

}  // namespace tpu
