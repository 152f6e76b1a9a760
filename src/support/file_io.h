// Reading inputs and writing outputs the way every tool must: "-" is
// stdin/stdout, outputs go to a temp file renamed into place only on success,
// and write errors (full disk, broken pipe) are errors, never silence.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu {

// Reads a whole file ("-" = stdin, shown as "<stdin>"). Returns null and
// reports an error if it cannot be read.
std::unique_ptr<SourceFile> readInputFile(const std::string& path, DiagnosticEngine& diags);

// Writes `data` to `path` atomically ("-" = stdout, flushed and checked).
// Returns false after reporting an error; no partial file is left behind.
bool writeOutputFile(const std::string& path, std::string_view data, DiagnosticEngine& diags);

// True if stdout is a terminal (binary output there needs -f).
bool stdoutIsTerminal();

}  // namespace tpu
