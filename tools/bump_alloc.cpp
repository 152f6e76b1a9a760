// Process-wide allocation for tools that run once over one input and exit
// (hlo-parse). operator new hands out memory from large mmap'd chunks on
// transparent huge pages; a page fault costs ~3 us on the build VM, so a
// run that touched its heap 4 KiB at a time spent more on faults than on
// printing (docs/DESIGN.md, "hlo-parse as a pipeline stage").
//
//   - Small blocks (< 4 KiB) are bump-allocated in multiples of 16 bytes. A
//     block freed with its size (sized delete: what the standard containers
//     use) goes on the free list of its size and is handed out again; the
//     most recent block is rolled back instead. This shrank the arena of a
//     text stage on a 293 KB module from 2.86 to 2.39 MB (each 2 MiB huge
//     page touched is 2 MiB zeroed). Blocks freed without a size are not
//     reused.
//   - Large blocks (4 KiB to 4 MiB: the input text, the output text, the
//     growing vectors and tables) take whole 4 KiB pages of the same chunks,
//     marked in a per-chunk bitmap so a free can tell them from small blocks.
//     Freed large blocks go on a free list and are reused by later requests
//     of up to twice their size, so growth by doubling stays bounded.
//   - Huge blocks (> 4 MiB) get their own huge-page mapping, unmapped when
//     freed.
// Once the chunks total kArenaLimit (or a table is full) everything goes to
// malloc and is freed normally. A spin lock guards the arena once the
// process has started a thread (glibc's __libc_single_threaded), so the
// common single-threaded run pays nothing for it. Linked only into the
// tools that list this file; sanitizer builds keep their own allocator.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/mman.h>
#include <sys/single_threaded.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

constexpr size_t kPage = size_t{4} << 10;
constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kChunkBytes = size_t{16} << 20;
constexpr size_t kArenaLimit = size_t{512} << 20;
constexpr size_t kMaxChunks = kArenaLimit / kChunkBytes;
constexpr size_t kPagesPerChunk = kChunkBytes / kPage;
constexpr size_t kLargeBytes = kPage;              // from here: whole pages
constexpr size_t kHugeBytes = size_t{4} << 20;     // above this: own mapping
constexpr size_t kLargeHeader = 64;                // before a large block's data
constexpr size_t kMaxHugeBlocks = 64;
constexpr size_t kGrain = 16;                      // small blocks' size unit and alignment
// Small sizes round up to at most kLargeBytes itself: classes 0..kLargeBytes / kGrain.
constexpr size_t kSmallClasses = kLargeBytes / kGrain + 1;

// `bytes` (a multiple of 2 MiB) aligned to 2 MiB and marked for transparent
// huge pages: one fault per 2 MiB instead of one per 4 KiB page touched.
void* mapHuge(size_t bytes) {
  void* m = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  uintptr_t a = reinterpret_cast<uintptr_t>(m);
  uintptr_t aligned = (a + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  if (aligned > a) munmap(m, aligned - a);
  munmap(reinterpret_cast<void*>(aligned + bytes), a + kHuge - aligned);
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// The header of a large block, at the start of its first page; the data
// follows at kLargeHeader (so large blocks are 64-byte aligned).
struct LargeHeader {
  size_t bytes;       // usable bytes after the header
  LargeHeader* next;  // on the free list
};

struct Arena {
  char* cur = nullptr;
  char* end = nullptr;
  char* last = nullptr;  // the most recent small block (rolled back when freed first)
  uintptr_t lo[kMaxChunks] = {};
  size_t chunks = 0;
  // Bit p of chunk c: a large block starts at page p of chunk c.
  uint64_t largeStart[kMaxChunks][kPagesPerChunk / 64] = {};
  LargeHeader* freeLarge = nullptr;
  void* freeSmall[kSmallClasses] = {};  // by size / kGrain; linked through their first word
  uintptr_t hugeAt[kMaxHugeBlocks] = {};
  size_t hugeBytes[kMaxHugeBlocks] = {};

  // Chunk indices by ascending start address (chunkOf runs at every free:
  // a scan of all chunks made freeing cost grow with the arena).
  uint32_t byAddress[kMaxChunks] = {};

  // The chunk holding `p`, or -1.
  long chunkOf(const void* p) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    // Most frees are of recent blocks: the newest chunk first.
    if (chunks > 0 && a - lo[chunks - 1] < kChunkBytes) return static_cast<long>(chunks - 1);
    // Else the last chunk starting at or below `a`, by binary search.
    size_t first = 0, count = chunks;
    while (count > 0) {
      size_t half = count / 2;
      if (lo[byAddress[first + half]] <= a) {
        first += half + 1;
        count -= half + 1;
      } else {
        count = half;
      }
    }
    if (first == 0) return -1;
    const uint32_t i = byAddress[first - 1];
    return a - lo[i] < kChunkBytes ? static_cast<long>(i) : -1;
  }

  bool newChunk() {
    if (chunks == kMaxChunks) return false;
    void* c = mapHuge(kChunkBytes);
    if (!c) return false;
    const uintptr_t start = reinterpret_cast<uintptr_t>(c);
    size_t at = chunks;
    for (; at > 0 && lo[byAddress[at - 1]] > start; --at) byAddress[at] = byAddress[at - 1];
    byAddress[at] = static_cast<uint32_t>(chunks);
    lo[chunks++] = start;
    cur = static_cast<char*>(c);
    end = cur + kChunkBytes;
    last = nullptr;
    return true;
  }

  void* allocateSmall(size_t n, size_t align) {
    n = (n + kGrain - 1) & ~(kGrain - 1);
    if (align <= kGrain) {
      void*& head = freeSmall[n / kGrain];
      if (void* p = head) {
        head = *static_cast<void**>(p);
        return p;
      }
    }
    uintptr_t at = (reinterpret_cast<uintptr_t>(cur) + align - 1) & ~(uintptr_t{align} - 1);
    if (!cur || at + n > reinterpret_cast<uintptr_t>(end)) {
      if (!newChunk()) return nullptr;
      at = reinterpret_cast<uintptr_t>(cur);
    }
    last = reinterpret_cast<char*>(at);
    cur = last + n;
    return last;
  }

  void* allocateLarge(size_t n) {
    // Reuse a freed block that is big enough but not more than twice as big.
    for (LargeHeader** link = &freeLarge; *link; link = &(*link)->next) {
      LargeHeader* h = *link;
      if (h->bytes >= n && h->bytes / 2 <= n) {
        *link = h->next;
        return reinterpret_cast<char*>(h) + kLargeHeader;
      }
    }
    size_t pages = (n + kLargeHeader + kPage - 1) / kPage;
    uintptr_t at = (reinterpret_cast<uintptr_t>(cur) + kPage - 1) & ~(uintptr_t{kPage} - 1);
    if (!cur || at + pages * kPage > reinterpret_cast<uintptr_t>(end)) {
      if (!newChunk()) return nullptr;
      at = reinterpret_cast<uintptr_t>(cur);
    }
    size_t c = chunks - 1;
    size_t page = (at - lo[c]) / kPage;
    largeStart[c][page / 64] |= uint64_t{1} << (page % 64);
    cur = reinterpret_cast<char*>(at + pages * kPage);
    last = nullptr;
    auto* h = reinterpret_cast<LargeHeader*>(at);
    h->bytes = pages * kPage - kLargeHeader;
    h->next = nullptr;
    return reinterpret_cast<char*>(at) + kLargeHeader;
  }

  void* allocateHuge(size_t n) {
    for (size_t i = 0; i < kMaxHugeBlocks; ++i) {
      if (hugeAt[i]) continue;
      size_t bytes = (n + kHuge - 1) & ~(kHuge - 1);
      void* m = mapHuge(bytes);
      if (!m) return nullptr;
      hugeAt[i] = reinterpret_cast<uintptr_t>(m);
      hugeBytes[i] = bytes;
      return m;
    }
    return nullptr;
  }

  void* allocate(size_t n, size_t align) {
    if (n < kLargeBytes) return allocateSmall(n, align);
    if (align > kLargeHeader) return nullptr;
    if (n <= kHugeBytes) return allocateLarge(n);
    return align <= kHuge ? allocateHuge(n) : nullptr;
  }

  // True when `p` is the arena's (then nothing else is to be done). `bytes`:
  // the size it was allocated with (with alignment at most kGrain), or 0.
  bool release(void* p, size_t bytes) {
    long c = chunkOf(p);
    if (c < 0) {
      uintptr_t a = reinterpret_cast<uintptr_t>(p);
      for (size_t i = 0; i < kMaxHugeBlocks; ++i) {
        if (hugeAt[i] != a) continue;
        munmap(p, hugeBytes[i]);
        hugeAt[i] = 0;
        return true;
      }
      return false;
    }
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    size_t page = (a - lo[c]) / kPage;
    if (a % kPage == kLargeHeader && (largeStart[c][page / 64] >> (page % 64)) & 1) {
      auto* h = reinterpret_cast<LargeHeader*>(a - kLargeHeader);
      h->next = freeLarge;
      freeLarge = h;
      return true;
    }
    if (p == last) {
      cur = last;
      last = nullptr;
    } else if (bytes > 0 && bytes < kLargeBytes) {
      void*& head = freeSmall[(bytes + kGrain - 1) / kGrain];
      *static_cast<void**>(p) = head;
      head = p;
    }
    return true;
  }
};

Arena arena;
std::atomic_flag arenaLock = ATOMIC_FLAG_INIT;

// Holds arenaLock while the process has more than one thread.
class Guard {
 public:
  Guard() : locked_(!__libc_single_threaded) {
    if (locked_)
      while (arenaLock.test_and_set(std::memory_order_acquire)) {
      }
  }
  ~Guard() {
    if (locked_) arenaLock.clear(std::memory_order_release);
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  bool locked_;
};

void* allocateOrNull(size_t n, size_t align) noexcept {
  if (n == 0) n = 1;
  {
    Guard guard;
    if (void* p = arena.allocate(n, align < 16 ? 16 : align)) return p;
  }
  if (align <= 16) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* allocate(size_t n, size_t align) {
  void* p = allocateOrNull(n, align);
  if (!p) throw std::bad_alloc();
  return p;
}

void release(void* p, size_t bytes = 0) noexcept {
  if (!p) return;
  bool ours;
  {
    Guard guard;
    ours = arena.release(p, bytes);
  }
  if (!ours) std::free(p);
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
void operator delete(void* p, size_t n) noexcept { release(p, n); }
void operator delete[](void* p, size_t n) noexcept { release(p, n); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
#endif
