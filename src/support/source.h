// Source buffers and locations: every input a tool reads becomes a SourceFile,
// and every diagnostic points into one by byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tpu {

struct LineColumn {
  uint32_t line = 0;    // 1-based
  uint32_t column = 0;  // 1-based, in bytes
};

class SourceFile {
 public:
  // `name` is what diagnostics print ("<stdin>" for standard input).
  SourceFile(std::string name, std::string contents);

  const std::string& name() const { return name_; }
  std::string_view contents() const { return contents_; }
  size_t size() const { return contents_.size(); }

  // Binary inputs report byte offsets instead of line:column.
  bool isBinary() const { return binary_; }
  void setBinary(bool binary) { binary_ = binary; }

  // Maps a byte offset (clamped to the end) to a 1-based line and column.
  LineColumn lineColumn(size_t offset) const;
  // The text of the 1-based line, without its newline.
  std::string_view lineText(uint32_t line) const;

 private:
  void buildLineTable() const;

  std::string name_;
  std::string contents_;
  bool binary_ = false;
  mutable std::vector<uint32_t> lineStarts_;  // built lazily on first lookup
};

struct SourceLocation {
  const SourceFile* file = nullptr;
  size_t offset = 0;

  bool valid() const { return file != nullptr; }
};

}  // namespace tpu
