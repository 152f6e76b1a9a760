// HLO parse benchmark: text parse + verify throughput against a plain read
// of the same bytes, .hlob load against text parse, and peak heap use, all
// measured in one run on the largest corpus module (or the file given).
//
//   hlo_parse_bench [FILE.hlo]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "hlo/binary/binary.h"
#include "hlo/io/hlo_io.h"
#include "hlo/text/parser.h"
#include "support/file_io.h"

// Heap accounting: every allocation of this process goes through these.
namespace {
std::atomic<int64_t> gLive{0};
std::atomic<int64_t> gPeak{0};
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  int64_t live = gLive.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = gPeak.load();
  while (live > peak && !gPeak.compare_exchange_weak(peak, live)) {
  }
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  gLive.fetch_sub(static_cast<int64_t>(*reinterpret_cast<size_t*>(base)));
  std::free(base);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {

using Clock = std::chrono::steady_clock;

// Runs `body` repeatedly for at least `minSeconds`; returns seconds per run.
template <typename F>
double timeIt(F&& body, double minSeconds = 1.0) {
  body();  // warm-up
  int runs = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    body();
    ++runs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < minSeconds);
  return elapsed / runs;
}

std::string largestCorpusModule() {
  std::string best;
  uintmax_t bestSize = 0;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR)) {
    if (e.path().extension() != ".hlo") continue;
    if (e.file_size() > bestSize) {
      bestSize = e.file_size();
      best = e.path().string();
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : largestCorpusModule();
  tpu::DiagnosticEngine diags;
  auto file = tpu::readInputFile(path, diags);
  if (!file) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  const double mb = static_cast<double>(file->size()) / 1e6;
  auto text = std::make_shared<tpu::SourceFile>(path, std::string(file->contents()));

  // Baseline: reading the same bytes from the (cached) file.
  double readSeconds = timeIt([&] {
    tpu::DiagnosticEngine d;
    auto f = tpu::readInputFile(path, d);
  });
  double parseSeconds = timeIt([&] {
    tpu::DiagnosticEngine d;
    auto m = tpu::hlo::parseHloText(*text, d);
  });
  double parseVerifySeconds = timeIt([&] {
    tpu::DiagnosticEngine d;
    auto loaded = tpu::hlo::readModule(text, d);
    if (!loaded.module) std::abort();
  });

  tpu::DiagnosticEngine d;
  auto loaded = tpu::hlo::readModule(text, d);
  if (!loaded.module) {
    std::fprintf(stderr, "%s does not parse\n", path.c_str());
    return 1;
  }
  auto binary = std::make_shared<tpu::SourceFile>("bench.hlob", tpu::hlo::writeHlob(*loaded.module));
  binary->setBinary(true);
  double binarySeconds = timeIt([&] {
    tpu::DiagnosticEngine dd;
    auto m = tpu::hlo::readHlob(*binary, dd);
  });
  double binaryVerifySeconds = timeIt([&] {
    tpu::DiagnosticEngine dd;
    auto l = tpu::hlo::readModule(binary, dd);
  });
  double printSeconds = timeIt([&] { (void)tpu::hlo::printHloText(*loaded.module); });
  loaded.module.reset();

  // Peak heap during one parse + verify, above what was live before it.
  int64_t before = gLive.load();
  gPeak.store(before);
  {
    tpu::DiagnosticEngine dd;
    auto l = tpu::hlo::readModule(text, dd);
  }
  double peakRatio = static_cast<double>(gPeak.load() - before) / static_cast<double>(file->size());

  std::printf("module: %s (%.3f MB text, %.3f MB .hlob)\n", std::filesystem::path(path).filename().c_str(), mb,
              static_cast<double>(binary->size()) / 1e6);
  std::printf("%-34s %10.3f ms %10.1f MB/s\n", "plain read of the file", readSeconds * 1e3, mb / readSeconds);
  std::printf("%-34s %10.3f ms %10.1f MB/s\n", "text parse", parseSeconds * 1e3, mb / parseSeconds);
  std::printf("%-34s %10.3f ms %10.1f MB/s\n", "text parse + verify", parseVerifySeconds * 1e3,
              mb / parseVerifySeconds);
  std::printf("%-34s %10.3f ms %10.1f MB/s (of text)\n", "binary load", binarySeconds * 1e3, mb / binarySeconds);
  std::printf("%-34s %10.3f ms %10.1f MB/s (of text)\n", "binary load + verify", binaryVerifySeconds * 1e3,
              mb / binaryVerifySeconds);
  std::printf("%-34s %10.3f ms %10.1f MB/s\n", "text print", printSeconds * 1e3, mb / printSeconds);
  std::printf("ratio parse+verify / plain read:   %.1fx slower\n", parseVerifySeconds / readSeconds);
  std::printf("ratio text parse / binary load:     %.1fx (target >= 5x)\n", parseSeconds / binarySeconds);
  std::printf("peak heap during parse + verify:    %.1fx the text size (target < 10x)\n", peakRatio);
  return 0;
}
