// Reading inputs and writing outputs the way every tool must: "-" is
// stdin/stdout, outputs go to a temp file renamed into place only on success,
// and write errors (a full disk) are errors, never silence; only a reader
// that went away (a broken pipe) ends the tool quietly.
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
// A reader that went away (EPIPE: `tool | head -1`) is not reported: the
// write returns false and readerClosedOutput() says why, so the tool can
// exit quietly as LLVM's tools and cat do.
bool writeOutputFile(const std::string& path, std::string_view data, DiagnosticEngine& diags);

// The same for binary data, which is refused (with an error naming `how`,
// e.g. "use -o FILE or -f") when `path` is a terminal, unless `force`.
bool writeBinaryOutputFile(const std::string& path, std::string_view data, bool force, std::string_view how,
                           DiagnosticEngine& diags);

// True once a write failed because the reading end of a pipe was closed.
bool readerClosedOutput();

// True if stdout is a terminal (binary output there needs -f).
bool stdoutIsTerminal();

}  // namespace tpu
