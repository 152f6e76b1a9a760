#include "support/source.h"

#include <algorithm>

namespace tpu {

SourceFile::SourceFile(std::string name, std::string contents)
    : name_(std::move(name)), contents_(std::move(contents)) {}

void SourceFile::buildLineTable() const {
  if (!lineStarts_.empty()) return;
  lineStarts_.push_back(0);
  for (size_t i = 0; i < contents_.size(); ++i)
    if (contents_[i] == '\n') lineStarts_.push_back(static_cast<uint32_t>(i + 1));
}

LineColumn SourceFile::lineColumn(size_t offset) const {
  buildLineTable();
  offset = std::min(offset, contents_.size());
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  size_t line = static_cast<size_t>(it - lineStarts_.begin());  // >= 1
  uint32_t start = lineStarts_[line - 1];
  return {static_cast<uint32_t>(line), static_cast<uint32_t>(offset - start + 1)};
}

std::string_view SourceFile::lineText(uint32_t line) const {
  buildLineTable();
  if (line == 0 || line > lineStarts_.size()) return {};
  size_t start = lineStarts_[line - 1];
  size_t end = line < lineStarts_.size() ? lineStarts_[line] - 1 : contents_.size();
  std::string_view text(contents_.data() + start, end - start);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  return text;
}

}  // namespace tpu
