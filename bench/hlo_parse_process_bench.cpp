// hlo-parse as a pipeline stage: the whole process (start-up, dynamic
// loading, reading, parsing, verifying, printing or encoding, writing the
// output file) timed from outside, against `cat` of the same file in the
// same run. The module is taken as text and as .hlob; throughput is the
// module's text size over the time of one process in both cases (the .hlob
// is ~30x smaller, but it stands for the same module in a pipeline). Wall
// time is what a pipeline waits for on an idle machine; CPU time (user +
// system, from wait4) is the figure that holds on a busy one, where wall
// time mostly measures the other jobs.
//
//   hlo_parse_process_bench [HLO_PARSE [FILE.hlo...]]
//
// Defaults: build/tools/hlo-parse beside this binary's build, the largest
// corpus modules, and the largest of them doubled (586 KB, the size of the
// 500-670 KB modules issue 18 speaks of, which the corpus lacks): its
// computations twice, the second copy's names suffixed and its entry made
// an ordinary computation, so every instruction is a real one. Runs alternate (hlo-parse, cat, hlo-parse, ...)
// so a machine that slows down slows both; each figure is the median of
// the runs, each ratio the median of the pairwise ratios.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Times {
  double wall = 0;
  double cpu = 0;  // user + system of the child
};

// Runs argv with stdout to `stdoutPath`.
Times timeProcess(const std::vector<std::string>& argv, const std::string& stdoutPath) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdoutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid;
  auto start = Clock::now();
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    std::perror(args[0]);
    std::exit(1);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Times t;
  t.wall = std::chrono::duration<double>(Clock::now() - start).count();
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6; };
  t.cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s failed (status %d)\n", args[0], status);
    std::exit(1);
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figures {
  Times tool, cat;             // medians
  Times toolMin, catMin;       // fastest runs
  double wallRatio, cpuRatio;  // medians of the pairwise ratios
};

// `runs` alternating runs of the tool and of cat (after two warm-up pairs:
// page cache, binary pages).
Figures measure(const std::vector<std::string>& tool, const std::string& catInput, const std::string& scratch,
                int runs) {
  std::vector<double> toolWall, toolCpu, catWall, catCpu, wallRatios, cpuRatios;
  for (int i = 0; i < runs + 2; ++i) {
    Times t = timeProcess(tool, "/dev/null");
    Times c = timeProcess({"/bin/cat", catInput}, scratch + "/cat.out");
    if (i < 2) continue;
    toolWall.push_back(t.wall);
    toolCpu.push_back(t.cpu);
    catWall.push_back(c.wall);
    catCpu.push_back(c.cpu);
    wallRatios.push_back(t.wall / c.wall);
    // rusage has microsecond resolution: keep a ratio finite.
    cpuRatios.push_back(t.cpu / std::max(c.cpu, 1e-6));
  }
  auto least = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  return {{median(toolWall), median(toolCpu)},
          {median(catWall), median(catCpu)},
          {least(toolWall), least(toolCpu)},
          {least(catWall), least(catCpu)},
          median(wallRatios),
          median(cpuRatios)};
}


bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// `text` (one module) with its computations `copies` times: copy k > 0 has
// every defined name (computations, instructions) suffixed with "_k" and
// its ENTRY keyword dropped. Quoted strings (metadata) are left alone, and
// so are opcodes (a name directly followed by '(').
std::string replicateModule(const std::string& text, int copies) {
  size_t bodyStart = text.find("\nHloModule ");
  bodyStart = bodyStart == std::string::npos ? 0 : bodyStart + 1;
  bodyStart = text.find('\n', bodyStart);
  if (bodyStart == std::string::npos) return text;
  ++bodyStart;
  std::string_view body(text.data() + bodyStart, text.size() - bodyStart);
  // Defined names: the first word of an instruction or computation line.
  std::set<std::string, std::less<>> defined;
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find('\n', at);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(at, end - at);
    at = end + 1;
    size_t i = line.find_first_not_of(' ');
    if (i == std::string_view::npos) continue;
    for (std::string_view prefix : {"ROOT ", "ENTRY "})
      if (line.substr(i).starts_with(prefix)) i += prefix.size();
    if (i < line.size() && line[i] == '%') ++i;
    size_t j = i;
    while (j < line.size() && isNameChar(line[j])) ++j;
    if (j > i && j + 1 < line.size() && line[j] == ' ' && (line[j + 1] == '=' || line[j + 1] == '('))
      defined.emplace(line.substr(i, j - i));
  }
  std::string out = text;
  for (int k = 1; k < copies; ++k) {
    std::string suffix = "_" + std::to_string(k);
    std::string copy;
    copy.reserve(body.size() + body.size() / 8);
    for (size_t i = 0; i < body.size();) {
      char c = body[i];
      if (c == '"') {
        size_t j = i + 1;
        while (j < body.size() && body[j] != '"') j += body[j] == '\\' ? 2 : 1;
        j = std::min(j + 1, body.size());
        copy.append(body.substr(i, j - i));
        i = j;
      } else if (isNameChar(c)) {
        size_t j = i;
        while (j < body.size() && isNameChar(body[j])) ++j;
        std::string_view word = body.substr(i, j - i);
        copy.append(word);
        if (defined.count(word) && !(j < body.size() && body[j] == '(')) copy += suffix;
        i = j;
      } else {
        copy += c;
        ++i;
      }
    }
    for (size_t at = 0; (at = copy.find("ENTRY ", at)) != std::string::npos;)
      if (at == 0 || copy[at - 1] == '\n') copy.erase(at, 6);
      else ++at;
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += '\n';
    out += copy;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path self = fs::canonical("/proc/self/exe");
  std::string hloParse =
      argc > 1 ? argv[1] : (self.parent_path().parent_path() / "tools" / "hlo-parse").string();
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) files.push_back(argv[i]);
  if (files.empty())
    for (const char* name : {"ext_gh_bert_dp_graph_2.hlo", "ext_gh_llama2_dp1_tp4_pp2.hlo",
                             "ext_gh_bert_pretrain_tp2_dp4_fwd_bwd.hlo"})
      files.push_back((fs::path(TPU_CORPUS_DIR) / name).string());
  fs::path scratch = fs::temp_directory_path() / ("hlo_parse_process_bench." + std::to_string(getpid()));
  fs::create_directories(scratch);
  if (argc <= 2) {
    std::ifstream in(files.front(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::path doubled = scratch / (fs::path(files.front()).stem().string() + "_x2.hlo");
    std::ofstream(doubled, std::ios::binary) << replicateModule(text, 2);
    files.push_back(doubled.string());
  }
  constexpr int kRuns = 61;
  std::printf(
      "whole-process hlo-parse (%s): median of %d runs alternated with cat of the same input;\n"
      "MB/s = text bytes of the module / time (for .hlob too); ratio = hlo-parse / cat, pairwise;\n"
      "min = the fastest run's CPU time and its MB/s\n",
      hloParse.c_str(), kRuns);
  std::printf("%-30s %6s %6s | %8s %7s %7s %6s | %8s %7s %7s %6s | %7s %7s %7s\n", "module", "KB", "input",
              "wall ms", "MB/s", "cat ms", "ratio", "cpu ms", "MB/s", "cat ms", "ratio", "min ms", "MB/s",
              "cat ms");
  for (const std::string& file : files) {
    double textBytes = static_cast<double>(fs::file_size(file));
    std::string hlob = (scratch / "m.hlob").string();
    timeProcess({hloParse, file, "-o", hlob}, "/dev/null");
    std::string name = fs::path(file).stem().string();
    if (name.size() > 30) name = name.substr(0, 30);
    auto row = [&](const char* kind, const Figures& f) {
      std::printf("%-30s %6.0f %6s | %8.2f %7.1f %7.2f %5.2fx | %8.2f %7.1f %7.2f %5.2fx | %7.2f %7.1f %7.2f\n",
                  name.c_str(), textBytes / 1024, kind, f.tool.wall * 1e3, textBytes / f.tool.wall / 1e6,
                  f.cat.wall * 1e3, f.wallRatio, f.tool.cpu * 1e3, textBytes / f.tool.cpu / 1e6, f.cat.cpu * 1e3,
                  f.cpuRatio, f.toolMin.cpu * 1e3, textBytes / f.toolMin.cpu / 1e6, f.catMin.cpu * 1e3);
    };
    // Text in, canonical text out (to a file, atomically, as make runs it).
    row("text",
        measure({hloParse, file, "-o", (scratch / "out.hlo").string()}, file, scratch.string(), kRuns));
    // .hlob in, .hlob out: a middle stage of the pipeline.
    row(".hlob",
        measure({hloParse, hlob, "-o", (scratch / "out.hlob").string()}, hlob, scratch.string(), kRuns));
  }
  fs::remove_all(scratch);
  return 0;
}
