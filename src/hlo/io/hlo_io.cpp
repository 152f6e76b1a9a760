#include "hlo/io/hlo_io.h"

#include "hlo/binary/binary.h"
#include "hlo/text/parser.h"
#include "support/file_kind.h"
#ifdef TPU_HAVE_HLO_VERIFIER
#include "hlo/verify/verifier.h"
#endif

namespace tpu::hlo {

bool verifyLoadedModule(const Module& module, DiagnosticEngine& diags) {
#ifdef TPU_HAVE_HLO_VERIFIER
  return verifyModule(module, diags);
#else
  (void)module;
  (void)diags;
  return true;
#endif
}

LoadedModule readModule(std::shared_ptr<SourceFile> source, DiagnosticEngine& diags, const ReadOptions& options) {
  LoadedModule loaded;
  size_t errorsBefore = diags.errorCount();
  // A .tpu, .npy or other known file is named as such instead of failing
  // in the text lexer on its first odd byte.
  if (!checkFileKind(*source, {FileKind::HloText, FileKind::Hlob, FileKind::Empty},
                     "an HLO module (text or .hlob)", diags)) {
    loaded.source = std::move(source);
    return loaded;
  }
  if (isHlob(source->contents())) {
    source->setBinary(true);
    loaded.encoding = HloEncoding::Binary;
    loaded.module = readHlob(*source, diags);
  } else {
    loaded.module = parseHloText(*source, diags);
  }
  loaded.source = std::move(source);
  if (loaded.module && options.verify && !verifyLoadedModule(*loaded.module, diags)) loaded.module.reset();
  if (diags.errorCount() != errorsBefore) loaded.module.reset();
  return loaded;
}

std::string writeModule(const Module& module, HloEncoding encoding, const PrintOptions& printOptions) {
  if (encoding == HloEncoding::Binary) return writeHlob(module);
  return printHloText(module, printOptions);
}

std::vector<std::shared_ptr<SourceFile>> splitInputFile(const SourceFile& file) {
  std::string_view text = file.contents();
  // Byte ranges of the chunks.
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t chunkStart = 0;
  size_t lineStart = 0;
  while (lineStart <= text.size()) {
    size_t lineEnd = text.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) lineEnd = text.size();
    if (text.substr(lineStart, lineEnd - lineStart).starts_with("// -----")) {
      ranges.emplace_back(chunkStart, lineStart);
      chunkStart = lineEnd < text.size() ? lineEnd + 1 : text.size();
    }
    if (lineEnd == text.size()) break;
    lineStart = lineEnd + 1;
  }
  ranges.emplace_back(chunkStart, text.size());
  std::vector<std::shared_ptr<SourceFile>> chunks;
  for (auto [begin, end] : ranges) {
    std::string contents;
    contents.reserve(end);
    // One newline per line before the chunk keeps line numbers (columns are
    // unaffected: the chunk starts at a line start).
    for (size_t i = 0; i < begin; ++i)
      if (text[i] == '\n') contents.push_back('\n');
    contents.append(text.substr(begin, end - begin));
    chunks.push_back(std::make_shared<SourceFile>(file.name(), std::move(contents)));
  }
  return chunks;
}

}  // namespace tpu::hlo
