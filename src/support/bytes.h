// Little-endian byte streams for the binary encodings (.hlob, .tpu). The
// reader never reads past its end: every accessor checks bounds and records
// the first failure with its byte offset, so hostile input cannot crash us.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tpu {

class ByteWriter {
 public:
  ByteWriter() = default;
  ByteWriter(ByteWriter&& other) noexcept { *this = std::move(other); }
  ByteWriter& operator=(ByteWriter&& other) noexcept {
    buf_ = std::move(other.buf_);
    size_ = other.size_;
    other.buf_.clear();
    other.size_ = 0;
    return *this;
  }
  ByteWriter(const ByteWriter&) = delete;
  ByteWriter& operator=(const ByteWriter&) = delete;

  // Writes go through a cursor into storage grown ahead of it, so a byte
  // is a bounds check and a store (std::string::push_back was an out-of-line
  // call per byte, most of encoding a .hlob).
  void u8(uint8_t v) {
    if (size_ == buf_.size()) grow(1);
    buf_[size_++] = static_cast<char>(v);
  }
  void u16(uint16_t v) { fixed(v, 2); }
  void u32(uint32_t v) { fixed(v, 4); }
  void u64(uint64_t v) { fixed(v, 8); }
  void f32(float v) { uint32_t b; std::memcpy(&b, &v, 4); u32(b); }
  void f64(double v) { uint64_t b; std::memcpy(&b, &v, 8); u64(b); }
  // LEB128 unsigned and zig-zag signed varints.
  void uvar(uint64_t v) {
    if (buf_.size() - size_ < kMaxVarint) grow(kMaxVarint);
    char* p = buf_.data() + size_;
    char* start = p;
    while (v >= 0x80) { *p++ = static_cast<char>(v | 0x80); v >>= 7; }
    *p++ = static_cast<char>(v);
    size_ += static_cast<size_t>(p - start);
  }
  void svar(int64_t v) { uvar((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void str(std::string_view s) { uvar(s.size()); bytes(s); }
  void bytes(std::string_view s) {
    if (buf_.size() - size_ < s.size()) grow(s.size());
    if (!s.empty()) std::memcpy(buf_.data() + size_, s.data(), s.size());
    size_ += s.size();
  }

  std::string_view data() const { return {buf_.data(), size_}; }
  std::string take() {
    buf_.resize(size_);
    size_ = 0;
    return std::move(buf_);
  }
  size_t size() const { return size_; }
  void reserve(size_t bytes) {
    if (bytes > buf_.size()) buf_.resize(bytes);
  }

 private:
  static constexpr size_t kMaxVarint = 10;
  [[gnu::noinline]] void grow(size_t more) { buf_.resize(std::max(buf_.size() * 2, std::max<size_t>(size_ + more, 64))); }
  void fixed(uint64_t v, int n) {
    if (buf_.size() - size_ < 8) grow(8);
    for (int i = 0; i < n; ++i) buf_[size_ + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    size_ += static_cast<size_t>(n);
  }
  // buf_.size() is the capacity in use; size_ the bytes written.
  std::string buf_;
  size_t size_ = 0;
};

class ByteReader {
 public:
  // `base` is added to offsets in error messages (position of this slice in the file).
  explicit ByteReader(std::string_view data, size_t base = 0) : data_(data), base_(base) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t errorOffset() const { return errorOffset_; }
  size_t offset() const { return base_ + pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool atEnd() const { return pos_ >= data_.size(); }

  // Records the first failure only; later reads return zeros.
  void fail(std::string message) {
    if (error_.empty()) { error_ = std::move(message); errorOffset_ = offset(); }
    pos_ = data_.size();
  }

  uint8_t u8() { return static_cast<uint8_t>(fixed(1)); }
  uint16_t u16() { return static_cast<uint16_t>(fixed(2)); }
  uint32_t u32() { return static_cast<uint32_t>(fixed(4)); }
  uint64_t u64() { return fixed(8); }
  float f32() { uint32_t b = u32(); float v; std::memcpy(&v, &b, 4); return v; }
  double f64() { uint64_t b = u64(); double v; std::memcpy(&v, &b, 8); return v; }
  // Inlined at every call site, with the loop kept out of line: decoding
  // .hlob is mostly one-byte varints.
  [[gnu::always_inline]] uint64_t uvar() {
    // Most values are small: one byte, no loop.
    if (pos_ < data_.size() && !(static_cast<uint8_t>(data_[pos_]) & 0x80))
      return static_cast<uint8_t>(data_[pos_++]);
    return uvarSlow();
  }
  [[gnu::noinline]] uint64_t uvarSlow() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (atEnd()) { fail("unexpected end of data in varint"); return 0; }
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint is too long");
    return 0;
  }
  int64_t svar() { uint64_t u = uvar(); return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1)); }
  // A count that must not exceed what could possibly remain (each element
  // takes at least `minBytesEach` bytes): stops hostile sizes before allocation.
  [[gnu::always_inline]] uint64_t count(size_t minBytesEach = 1) {
    size_t at = pos_;
    uint64_t n = uvar();
    // n * minBytesEach > remaining, without overflowing the multiplication.
    if (minBytesEach && n > remaining() / minBytesEach) return countTooLarge(at, n);
    return n;
  }
  std::string_view bytes(size_t n) {
    if (n > remaining()) { fail("unexpected end of data"); return {}; }
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string str() { uint64_t n = count(1); return std::string(bytes(n)); }

 private:
  [[gnu::noinline]] uint64_t countTooLarge(size_t at, uint64_t n) {
    if (!ok()) return 0;
    error_ = "count " + std::to_string(n) + " exceeds the remaining data";
    errorOffset_ = base_ + at;
    pos_ = data_.size();
    return 0;
  }
  uint64_t fixed(int n) {
    if (remaining() < static_cast<size_t>(n)) { fail("unexpected end of data"); return 0; }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }

  std::string_view data_;
  size_t base_;
  size_t pos_ = 0;
  std::string error_;
  size_t errorOffset_ = 0;
};

}  // namespace tpu
