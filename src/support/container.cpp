#include "support/container.h"

// For ZSTD_customMem and the *_advanced constructors (exported by the
// shared library too).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <cstring>
#include <memory>
#include <new>

#include "support/bytes.h"

namespace tpu {

namespace {

// CRC-32 (IEEE, reflected) by slicing: table k holds the CRC of a byte
// followed by k zero bytes, so eight bytes are folded per step with eight
// independent lookups instead of eight dependent ones (~4x faster; loading
// a .hlob checksums every stored byte).
struct Crc32Tables {
  uint32_t t[8][256];
  constexpr Crc32Tables() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t i = 0; i < 256; ++i) t[k][i] = t[0][t[k - 1][i] & 0xff] ^ (t[k - 1][i] >> 8);
  }
};
constexpr Crc32Tables kCrc;

// Decompressed payloads larger than this are refused: a hostile header must
// not make us allocate without bound.
constexpr uint64_t kMaxPayload = uint64_t{4} << 30;

// zstd's contexts take their memory through operator new instead of malloc,
// so a tool that replaces operator new (hlo-parse's huge-page arena) serves
// them too: from malloc, a compression context's tables were fresh mmap'd
// pages, faulted in 4 KiB at a time and unmapped again, ~10% of a .hlob
// pipeline stage.
void* zstdAllocate(void*, size_t bytes) { return ::operator new(bytes, std::nothrow); }
void zstdFree(void*, void* p) { ::operator delete(p); }
constexpr ZSTD_customMem kZstdMemory{zstdAllocate, zstdFree, nullptr};

}  // namespace

uint32_t crc32(std::string_view data, uint32_t seed) {
  uint32_t c = ~seed;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    c = kCrc.t[7][lo & 0xff] ^ kCrc.t[6][(lo >> 8) & 0xff] ^ kCrc.t[5][(lo >> 16) & 0xff] ^ kCrc.t[4][lo >> 24] ^
        kCrc.t[3][p[4]] ^ kCrc.t[2][p[5]] ^ kCrc.t[1][p[6]] ^ kCrc.t[0][p[7]];
  }
  for (; n > 0; --n, ++p) c = kCrc.t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return ~c;
}

bool hasMagic(std::string_view data, const Magic& magic) {
  return data.size() >= magic.size() && std::memcmp(data.data(), magic.data(), magic.size()) == 0;
}

std::string packContainer(const Magic& magic, ContainerVersion version, std::string_view payload,
                          int zstdLevel) {
  std::string stored;
  uint32_t flags = 0;
  // One compression context per thread, as for decompression below.
  struct CctxDeleter {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  };
  thread_local std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx;
  if (zstdLevel > 0 && !cctx) cctx.reset(ZSTD_createCCtx_advanced(kZstdMemory));
  if (zstdLevel > 0 && cctx) {
    stored.resize(ZSTD_compressBound(payload.size()));
    size_t n = ZSTD_compressCCtx(cctx.get(), stored.data(), stored.size(), payload.data(), payload.size(),
                                 zstdLevel);
    if (!ZSTD_isError(n)) {
      stored.resize(n);
      flags |= 1;
    } else {
      stored.assign(payload);
    }
  } else {
    stored.assign(payload);
  }
  ByteWriter w;
  w.bytes(std::string_view(magic.data(), magic.size()));
  w.u16(version.major);
  w.u16(version.minor);
  w.u32(flags);
  w.u64(payload.size());
  w.u64(stored.size());
  w.u32(crc32(stored));
  w.u32(crc32(w.data()));
  w.bytes(stored);
  return w.take();
}

std::optional<UnpackedContainer> unpackContainer(const SourceFile& file, const Magic& magic,
                                                 uint16_t supportedMajor, std::string_view formatName,
                                                 DiagnosticEngine& diags, std::string buffer) {
  std::string_view data = file.contents();
  auto fail = [&](size_t offset, std::string message) -> std::optional<UnpackedContainer> {
    diags.error(SourceLocation{&file, offset}, std::move(message));
    return std::nullopt;
  };
  if (!hasMagic(data, magic)) return fail(0, fmt::format("not a {} file (bad magic number)", formatName));
  if (data.size() < kContainerHeaderSize)
    return fail(data.size(), fmt::format("truncated {} header: {} of {} bytes", formatName, data.size(),
                                         kContainerHeaderSize));
  ByteReader r(data.substr(0, kContainerHeaderSize));
  r.bytes(magic.size());
  UnpackedContainer out;
  out.version.major = r.u16();
  out.version.minor = r.u16();
  uint32_t flags = r.u32();
  uint64_t rawSize = r.u64();
  uint64_t storedSize = r.u64();
  uint32_t payloadCrc = r.u32();
  uint32_t headerCrc = r.u32();
  if (headerCrc != crc32(data.substr(0, 36))) return fail(36, "header checksum mismatch (file is corrupted)");
  // A major version changes the payload's layout both ways: older files are
  // no more readable than newer ones.
  if (out.version.major != supportedMajor)
    return fail(8, fmt::format("unsupported {} format version {}.{} (this build reads {}.x)", formatName,
                               out.version.major, out.version.minor, supportedMajor));
  if (flags & ~1u) return fail(12, fmt::format("unknown header flags 0x{:x}", flags));
  if (storedSize != data.size() - kContainerHeaderSize)
    return fail(24, fmt::format("payload size is {} bytes but the file holds {} (truncated or padded file)",
                                storedSize, data.size() - kContainerHeaderSize));
  std::string_view stored = data.substr(kContainerHeaderSize);
  if (crc32(stored) != payloadCrc) return fail(32, "payload checksum mismatch (file is corrupted)");
  if (rawSize > kMaxPayload) return fail(16, fmt::format("payload size {} is too large", rawSize));
  if (flags & 1) {
    unsigned long long frameSize = ZSTD_getFrameContentSize(stored.data(), stored.size());
    if (frameSize != rawSize)
      return fail(kContainerHeaderSize, "compressed payload does not match the header's size");
    // One decompression context per thread: ZSTD_decompress would allocate
    // and initialise a fresh (~100 KiB) context on every call.
    struct DctxDeleter {
      void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
    };
    thread_local std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx_advanced(kZstdMemory));
    if (!dctx) return fail(kContainerHeaderSize, "cannot allocate a decompression context");
    out.payload = std::move(buffer);
    out.payload.resize(rawSize);
    size_t n = ZSTD_decompressDCtx(dctx.get(), out.payload.data(), out.payload.size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != rawSize)
      return fail(kContainerHeaderSize, fmt::format("cannot decompress payload: {}",
                                                    ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  } else {
    if (rawSize != storedSize) return fail(16, "uncompressed payload size mismatch");
    out.payload = std::move(buffer);
    out.payload.assign(stored);
  }
  return out;
}

}  // namespace tpu
