// Process-wide bump allocation for tools that run once over one input and
// exit (hlo-parse): operator new hands out memory from large mmap'd chunks
// and operator delete returns nothing (except the most recent block, which
// vector and string growth often free right away). A pipeline stage's
// malloc/free bookkeeping and the unmapping of freed blocks were ~20% of
// hlo-parse's whole-process time on corpus modules (docs/DESIGN.md, "hlo-parse
// as a pipeline stage"). Memory stays bounded: blocks of 4 KiB or more (the
// growing strings and vectors that free and reuse), and everything once the
// chunks total kArenaLimit, go to malloc and are freed normally. Linked only into the tools that list this file; sanitizer builds
// keep their own allocator.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

constexpr size_t kChunkBytes = size_t{16} << 20;
constexpr size_t kArenaLimit = size_t{512} << 20;
constexpr size_t kLargeBytes = size_t{4} << 10;
constexpr size_t kMaxChunks = kArenaLimit / kChunkBytes;

// A chunk aligned to 2 MiB and marked for transparent huge pages: one page
// fault per 2 MiB instead of one per 4 KiB page touched.
void* newChunk() {
  constexpr size_t kHuge = size_t{2} << 20;
  void* m = mmap(nullptr, kChunkBytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  uintptr_t a = reinterpret_cast<uintptr_t>(m);
  uintptr_t aligned = (a + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  if (aligned > a) munmap(m, aligned - a);
  munmap(reinterpret_cast<void*>(aligned + kChunkBytes), a + kHuge - aligned);
  madvise(reinterpret_cast<void*>(aligned), kChunkBytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

struct Arena {
  char* cur = nullptr;
  char* end = nullptr;
  char* last = nullptr;  // the most recent block (rolled back when freed first)
  uintptr_t lo[kMaxChunks] = {};
  size_t chunks = 0;

  bool owns(const void* p) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (size_t i = 0; i < chunks; ++i)
      if (a - lo[i] < kChunkBytes) return true;
    return false;
  }
  void* allocate(size_t n, size_t align) {
    if (n >= kLargeBytes) return nullptr;
    uintptr_t at = (reinterpret_cast<uintptr_t>(cur) + align - 1) & ~(uintptr_t{align} - 1);
    if (!cur || at + n > reinterpret_cast<uintptr_t>(end)) {
      if (chunks == kMaxChunks) return nullptr;
      void* c = newChunk();
      if (!c) return nullptr;
      lo[chunks++] = reinterpret_cast<uintptr_t>(c);
      cur = static_cast<char*>(c);
      end = cur + kChunkBytes;
      at = (reinterpret_cast<uintptr_t>(cur) + align - 1) & ~(uintptr_t{align} - 1);
    }
    last = reinterpret_cast<char*>(at);
    cur = last + n;
    return last;
  }
  // True when `p` is the arena's (then nothing else is to be done).
  bool release(void* p) {
    if (!owns(p)) return false;
    if (p == last) {
      cur = last;
      last = nullptr;
    }
    return true;
  }
};

Arena arena;

void* allocateOrNull(size_t n, size_t align) noexcept {
  if (n == 0) n = 1;
  if (void* p = arena.allocate(n, align < 16 ? 16 : align)) return p;
  if (align <= 16) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* allocate(size_t n, size_t align) {
  void* p = allocateOrNull(n, align);
  if (!p) throw std::bad_alloc();
  return p;
}

void release(void* p) noexcept {
  if (p && !arena.release(p)) std::free(p);
}

}  // namespace

void* operator new(size_t n) { return allocate(n, 16); }
void* operator new[](size_t n) { return allocate(n, 16); }
void* operator new(size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocateOrNull(n, 16); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocateOrNull(n, 16); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateOrNull(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateOrNull(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
#endif
