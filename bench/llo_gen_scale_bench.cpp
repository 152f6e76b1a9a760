// llo-gen's cost against program size (issue 14, point 6): generated
// modules of N trivial instructions (a chain of f32[8] adds, one kernel
// each; and N/8 independent chains of 8 adds each, so that values are live
// in parallel), compiled by the llo-gen process. Prints wall and CPU time
// (user + system from wait4: the figure that holds on a busy machine), the
// child's peak resident memory, and the cost per instruction, so that a
// superlinear part shows as a growing per-instruction figure.
//
//   llo_gen_scale_bench [LLO_GEN [N...]]
//
// Defaults: build/tools/llo-gen beside this binary's build; N = 10000,
// 100000 (1000000 takes minutes and gigabytes: pass it explicitly).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct Cost {
  double wall = 0, cpu = 0;
  double peakMb = 0;
  bool ok = false;
};

Cost runProcess(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  auto start = std::chrono::steady_clock::now();
  Cost c;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) {
    std::perror(args[0]);
    return c;
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  c.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6; };
  c.cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  c.peakMb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KB on Linux
  c.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return c;
}

// `chains` independent chains of adds, `n` instructions in all.
void writeModule(const std::string& path, long n, long chains) {
  std::ofstream f(path);
  f << "HloModule scale\nENTRY main {\n  p = f32[8] parameter(0)\n";
  long per = n / chains;
  std::string roots;
  for (long c = 0; c < chains; ++c) {
    std::string prev = "p";
    for (long i = 0; i < per; ++i) {
      std::string name = "a" + std::to_string(c) + "_" + std::to_string(i);
      f << "  " << name << " = f32[8] add(" << prev << ", p)\n";
      prev = name;
    }
    roots += (c ? ", " : "") + prev;
  }
  if (chains == 1) {
    f << "  ROOT r = f32[8] add(" << roots << ", p)\n}\n";
  } else {
    // Sum the chain ends pairwise in one more chain.
    std::string acc = "a0_" + std::to_string(per - 1);
    for (long c = 1; c < chains; ++c) {
      std::string name = "sum" + std::to_string(c);
      f << "  " << name << " = f32[8] add(" << acc << ", a" << c << "_" << per - 1 << ")\n";
      acc = name;
    }
    f << "  ROOT r = f32[8] negate(" << acc << ")\n}\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  fs::path self = fs::canonical("/proc/self/exe");
  std::string lloGen = argc > 1 ? argv[1] : (self.parent_path().parent_path() / "tools" / "llo-gen").string();
  std::vector<long> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::atol(argv[i]));
  if (sizes.empty()) sizes = {10000, 100000};
  fs::path scratch = fs::temp_directory_path() / ("llo_gen_scale_bench." + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::printf("llo-gen (%s) on generated modules of N f32[8] adds\n", lloGen.c_str());
  std::printf("%-8s %9s | %8s %8s %9s | %9s %9s | %10s\n", "shape", "N", "wall s", "cpu s", "peak MB", "cpu us/N",
              "KB/N", ".llo MB");
  for (long n : sizes) {
    for (long chains : {1L, 8L}) {
      std::string hlo = (scratch / "m.hlo").string(), llo = (scratch / "m.llo").string();
      writeModule(hlo, n, chains);
      Cost c = runProcess({lloGen, hlo, "-o", llo});
      double lloMb = c.ok ? static_cast<double>(fs::file_size(llo)) / 1e6 : 0;
      std::printf("%-8s %9ld | %8.2f %8.2f %9.0f | %9.1f %9.1f | %10.1f%s\n", chains == 1 ? "chain" : "8 chains", n,
                  c.wall, c.cpu, c.peakMb, c.cpu * 1e6 / static_cast<double>(n),
                  c.peakMb * 1024 / static_cast<double>(n), lloMb, c.ok ? "" : "  (failed)");
      std::fflush(stdout);
    }
  }
  fs::remove_all(scratch);
  return 0;
}
