// Reading and writing HLO modules in either encoding. The encoding of an
// input is decided by its magic number, never by a flag or file name, so
// every tool reads text and .hlob alike; the verifier runs after every read.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hlo/module.h"
#include "hlo/text/printer.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace tpu::hlo {

enum class HloEncoding { Text, Binary };

struct ReadOptions {
  bool verify = true;
};

// A module together with the source it was read from (diagnostics about
// the module point into the source, so both live together).
struct LoadedModule {
  std::shared_ptr<const SourceFile> source;
  std::unique_ptr<Module> module;
  HloEncoding encoding = HloEncoding::Text;
};

// Parses (text) or decodes (.hlob) `source`, then verifies. Returns an empty
// LoadedModule::module after reporting errors.
LoadedModule readModule(std::shared_ptr<SourceFile> source, DiagnosticEngine& diags,
                        const ReadOptions& options = {});

// Runs the verifier (a no-op success when the library is built without it).
bool verifyLoadedModule(const Module& module, DiagnosticEngine& diags);

std::string writeModule(const Module& module, HloEncoding encoding, const PrintOptions& printOptions = {});

// `--split-input-file`: the chunks of a text file separated by lines that
// start with `// -----`. Each chunk is a SourceFile with the file's name
// whose text keeps every other chunk's lines as empty lines, so line and
// column numbers in diagnostics are those of the original file.
std::vector<std::shared_ptr<SourceFile>> splitInputFile(const SourceFile& file);

}  // namespace tpu::hlo
