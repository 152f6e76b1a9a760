// Mutation test of every file format the tools read: .hlob, .tpu, .llo and
// .npy. Valid files are truncated, bit-flipped and byte-smashed, and their
// headers rewritten (container version, flags and sizes with the checksums
// recomputed, so the readers' own checks and not the CRC catch them; .npy
// header dictionaries rewritten). Every mutant must be rejected with a
// diagnostic or accepted as something that round-trips; none may crash,
// throw, or allocate without bound (the address space is capped). Counts are
// printed per format (issue 18, point 10). The libFuzzer targets beside this
// file search the same inputs with coverage guidance; this test runs in
// every ctest, deterministically.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "hlo/binary/binary.h"
#include "hlo/io/hlo_io.h"
#include "isa/encoding.h"
#include "isa/verify.h"
#include "llo/text.h"
#include "support/npy.h"
#include "target/target.h"

namespace tpu {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> filesIn(const fs::path& dir, std::string_view extension, size_t maxBytes = SIZE_MAX) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == extension && fs::file_size(entry.path()) <= maxBytes)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A hostile allocation fails (and is reported as a failure of the test)
// instead of taking the machine's memory.
void capAddressSpace() {
  rlimit limit{size_t{4} << 30, size_t{4} << 30};
  setrlimit(RLIMIT_AS, &limit);
}

// What the format's reader made of a mutant. AcceptedSameText: accepted,
// and its text form reads back to the same text, though not to the same
// bytes (a field the text does not carry differs).
enum class Verdict { Accepted, AcceptedSameText, Rejected, Broken };

struct Tally {
  std::map<std::string, int> mutantsByKind;
  int accepted = 0, sameTextOnly = 0, rejected = 0, broken = 0;
  std::vector<std::string> failures;  // the first few

  void record(const std::string& kind, Verdict verdict, const std::string& what) {
    ++mutantsByKind[kind];
    if (verdict == Verdict::Accepted || verdict == Verdict::AcceptedSameText) ++accepted;
    if (verdict == Verdict::AcceptedSameText) ++sameTextOnly;
    if (verdict == Verdict::Rejected) ++rejected;
    if (verdict == Verdict::Broken && ++broken <= 10) failures.push_back(what);
  }
  std::string report(std::string_view format) const {
    std::string kinds;
    int total = 0;
    for (const auto& [kind, n] : mutantsByKind) {
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, kind);
      total += n;
    }
    return fmt::format("{}: {} mutants ({}): {} accepted ({} the same as text only), {} rejected, {} broken",
                       format, total, kinds, accepted, sameTextOnly, rejected, broken);
  }
};

// Runs `judge` on `bytes`, turning an escaping exception into a failure.
Verdict judgeSafely(const std::function<Verdict(std::string)>& judge, std::string bytes, std::string& why) {
  try {
    return judge(std::move(bytes));
  } catch (const std::exception& e) {
    why = std::string("exception: ") + e.what();
    return Verdict::Broken;
  }
}

// The generic mutations: every truncation of small files (a sample of large
// ones), random bit flips, and bytes set to boundary values.
void mutateBytes(const std::string& name, const std::string& original, std::mt19937& rng,
                 const std::function<Verdict(std::string)>& judge, Tally& tally, int flips) {
  auto run = [&](const std::string& kind, std::string bytes, const std::string& what) {
    std::string why;
    Verdict v = judgeSafely(judge, std::move(bytes), why);
    tally.record(kind, v, fmt::format("{}: {} {}", name, what, why));
  };
  size_t step = std::max<size_t>(1, original.size() / 200);
  for (size_t cut = 0; cut < original.size(); cut += step)
    run("truncations", original.substr(0, cut), fmt::format("cut at {}", cut));
  for (int i = 0; i < flips; ++i) {
    std::string bytes = original;
    size_t at = rng() % bytes.size();
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
    run("bit flips", std::move(bytes), fmt::format("bit flip at {}", at));
  }
  const char boundary[] = {'\0', '\x7f', '\x80', '\xff'};
  for (int i = 0; i < flips / 4; ++i) {
    std::string bytes = original;
    size_t at = rng() % bytes.size();
    bytes[at] = boundary[rng() % 4];
    run("boundary bytes", std::move(bytes), fmt::format("boundary byte at {}", at));
  }
}

// ------------------------------------------------------------------ containers

// Header fields (support/container.h) rewritten with both CRCs recomputed,
// and payload bytes corrupted under a valid CRC.
void containerGames(const std::string& name, const std::string& file, const Magic& magic, std::mt19937& rng,
                    const std::function<Verdict(std::string)>& judge, Tally& tally) {
  const std::string stored = file.substr(kContainerHeaderSize);
  auto withHeader = [&](uint16_t major, uint16_t minor, uint32_t flags, uint64_t rawSize, uint64_t storedSize,
                        const std::string& body) {
    std::string header(kContainerHeaderSize, '\0');
    std::memcpy(header.data(), magic.data(), 8);
    std::memcpy(header.data() + 8, &major, 2);
    std::memcpy(header.data() + 10, &minor, 2);
    std::memcpy(header.data() + 12, &flags, 4);
    std::memcpy(header.data() + 16, &rawSize, 8);
    std::memcpy(header.data() + 24, &storedSize, 8);
    uint32_t bodyCrc = crc32(body);
    std::memcpy(header.data() + 32, &bodyCrc, 4);
    uint32_t headerCrc = crc32(std::string_view(header.data(), 36));
    std::memcpy(header.data() + 36, &headerCrc, 4);
    return header + body;
  };
  uint16_t major, minor;
  uint32_t flags;
  uint64_t rawSize, storedSize;
  std::memcpy(&major, file.data() + 8, 2);
  std::memcpy(&minor, file.data() + 10, 2);
  std::memcpy(&flags, file.data() + 12, 4);
  std::memcpy(&rawSize, file.data() + 16, 8);
  std::memcpy(&storedSize, file.data() + 24, 8);
  SourceFile source(name, file);
  source.setBinary(true);
  DiagnosticEngine diags;
  auto unpacked = unpackContainer(source, magic, major, "container", diags);
  ASSERT_TRUE(unpacked) << name << ": " << firstErrorMessage(diags);
  std::vector<std::pair<std::string, std::string>> mutants = {
      {"newer major", withHeader(major + 1, minor, flags, rawSize, storedSize, stored)},
      {"older major", withHeader(major - 1, minor, flags, rawSize, storedSize, stored)},
      {"newer minor", withHeader(major, minor + 1, flags, rawSize, storedSize, stored)},
      {"flags flipped", withHeader(major, minor, flags ^ 1, rawSize, storedSize, stored)},
      {"unknown flag", withHeader(major, minor, flags | 0x80, rawSize, storedSize, stored)},
      {"raw size 0", withHeader(major, minor, flags, 0, storedSize, stored)},
      {"raw size - 1", withHeader(major, minor, flags, rawSize - 1, storedSize, stored)},
      {"raw size + 1", withHeader(major, minor, flags, rawSize + 1, storedSize, stored)},
      {"raw size huge", withHeader(major, minor, flags, uint64_t{1} << 62, storedSize, stored)},
      {"stored size - 1", withHeader(major, minor, flags, rawSize, storedSize - 1, stored)},
      {"stored size huge", withHeader(major, minor, flags, rawSize, uint64_t{1} << 62, stored)},
      {"payload stored raw",
       withHeader(major, minor, 0, unpacked->payload.size(), unpacked->payload.size(), unpacked->payload)},
  };
  // Payload corruptions under valid checksums: the decoder itself must judge.
  const std::string& payload = unpacked->payload;
  for (int i = 0; i < 300; ++i) {
    std::string body = payload;
    size_t at = rng() % body.size();
    body[at] = static_cast<char>(rng());
    mutants.push_back({fmt::format("payload byte {}", at), packContainer(magic, {major, minor}, body, 0)});
  }
  for (size_t cut = 0; cut < payload.size(); cut += std::max<size_t>(1, payload.size() / 100))
    mutants.push_back({fmt::format("payload cut at {}", cut),
                       packContainer(magic, {major, minor}, payload.substr(0, cut), 0)});
  for (auto& [what, bytes] : mutants) {
    std::string why;
    Verdict v = judgeSafely(judge, std::move(bytes), why);
    tally.record("header games and payloads with valid checksums", v,
                 fmt::format("{}: {} {}", name, what, why));
  }
}

// ------------------------------------------------------------------ judges

Verdict judgeHlob(std::string bytes) {
  auto source = std::make_shared<SourceFile>("mutant.hlob", std::move(bytes));
  DiagnosticEngine diags;
  hlo::LoadedModule loaded = hlo::readModule(source, diags);
  if (!loaded.module) return diags.hasErrors() ? Verdict::Rejected : Verdict::Broken;
  auto text = std::make_shared<SourceFile>("printed.hlo", hlo::printHloText(*loaded.module));
  DiagnosticEngine again;
  return hlo::readModule(text, again).module ? Verdict::Accepted : Verdict::Broken;
}

// As llo-asm -d judges a .tpu: decoded, then checked against the target it
// records; an accepted one disassembles to text that assembles to the same
// bytes.
Verdict judgeTpu(std::string bytes) {
  SourceFile file("mutant.tpu", std::move(bytes));
  file.setBinary(true);
  DiagnosticEngine diags;
  auto program = isa::decodeProgram(file, diags);
  if (!program) return diags.hasErrors() ? Verdict::Rejected : Verdict::Broken;
  if (!program->targetJson.empty()) {
    SourceFile json("embedded target", program->targetJson);
    auto chip = target::parseTarget(json, diags);
    if (!chip || !isa::verifyProgram(*program, &*chip, diags))
      return diags.hasErrors() ? Verdict::Rejected : Verdict::Broken;
  }
  std::string text = llo::printLlo(*program);
  SourceFile printed("printed.llo", text);
  DiagnosticEngine again;
  auto assembled = llo::assembleLlo(printed, {}, again);
  if (!assembled) return Verdict::Broken;
  if (isa::encodeProgram(assembled->program) == isa::encodeProgram(*program)) return Verdict::Accepted;
  return llo::printLlo(assembled->program) == text ? Verdict::AcceptedSameText : Verdict::Broken;
}

// An accepted .llo prints as text that assembles to the same program.
Verdict judgeLlo(std::string bytes) {
  SourceFile file("mutant.llo", std::move(bytes));
  DiagnosticEngine diags;
  auto assembled = llo::assembleLlo(file, {}, diags);
  if (!assembled) return diags.hasErrors() ? Verdict::Rejected : Verdict::Broken;
  SourceFile text("printed.llo", llo::printLlo(assembled->program));
  DiagnosticEngine again;
  auto reassembled = llo::assembleLlo(text, {}, again);
  if (!reassembled) return Verdict::Broken;
  return isa::encodeProgram(reassembled->program) == isa::encodeProgram(assembled->program)
             ? Verdict::Accepted
             : Verdict::Broken;
}

// An accepted .npy holds the bytes its shape needs and writes back to a
// file that reads as the same array.
Verdict judgeNpy(std::string bytes) {
  SourceFile file("mutant.npy", std::move(bytes));
  file.setBinary(true);
  DiagnosticEngine diags;
  auto array = readNpy(file, diags);
  if (!array) return diags.hasErrors() ? Verdict::Rejected : Verdict::Broken;
  if (array->data.size() != static_cast<size_t>(array->elementCount()) * npyDTypeSize(array->dtype))
    return Verdict::Broken;
  SourceFile written("written.npy", writeNpy(*array));
  written.setBinary(true);
  DiagnosticEngine again;
  auto back = readNpy(written, again);
  return back && back->dtype == array->dtype && back->shape == array->shape && back->data == array->data
             ? Verdict::Accepted
             : Verdict::Broken;
}

// ------------------------------------------------------------------ text games

// Line-level edits of LLO text: drop, repeat or swap lines, and numbers and
// registers pushed past their ranges.
void lloGames(const std::string& name, const std::string& text, std::mt19937& rng, Tally& tally) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto join = [](const std::vector<std::string>& ls) {
    std::string out;
    for (const std::string& l : ls) out += l + "\n";
    return out;
  };
  const char* replacements[] = {"4294967296", "-1", "9223372036854775807", "v999", "s999", "0x", "1e400", ""};
  for (int i = 0; i < 150; ++i) {
    std::vector<std::string> ls = lines;
    size_t a = rng() % ls.size(), b = rng() % ls.size();
    std::string what;
    switch (rng() % 4) {
      case 0:
        ls.erase(ls.begin() + static_cast<long>(a));
        what = "line dropped";
        break;
      case 1:
        ls.insert(ls.begin() + static_cast<long>(a), ls[b]);
        what = "line repeated";
        break;
      case 2:
        std::swap(ls[a], ls[b]);
        what = "lines swapped";
        break;
      default: {
        // Replace one token (a run of letters and digits) of line a.
        std::string& l = ls[a];
        size_t start = l.find_first_of("0123456789sv");
        if (start != std::string::npos) {
          size_t end = l.find_first_not_of("0123456789abcdefxsv", start);
          l.replace(start, (end == std::string::npos ? l.size() : end) - start, replacements[rng() % 8]);
        }
        what = "token replaced";
      }
    }
    std::string why;
    Verdict v = judgeSafely(judgeLlo, join(ls), why);
    tally.record("line and token edits", v, fmt::format("{}: {} at line {} {}", name, what, a + 1, why));
  }
}

// The header dictionary of an .npy rewritten (the preamble's length kept
// consistent), with data of the original length.
void npyGames(const std::string& name, const std::string& file, Tally& tally) {
  size_t headerLength =
      static_cast<uint8_t>(file[8]) | (static_cast<size_t>(static_cast<uint8_t>(file[9])) << 8);
  if (file[6] != 1) return;  // version 1 files only (the shipped ones are)
  std::string data = file.substr(10 + headerLength);
  const char* headers[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }",
      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
      "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
      "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
      "{'descr': '<f4', 'shape': (1,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (2,), }",
      "{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,",
      "{}",
      "",
  };
  for (const char* header : headers) {
    std::string h = header;
    h += std::string(63 - (h.size() + 10) % 64, ' ') + "\n";
    std::string bytes = file.substr(0, 8);
    bytes += static_cast<char>(h.size() & 0xff);
    bytes += static_cast<char>(h.size() >> 8);
    std::string why;
    Verdict v = judgeSafely(judgeNpy, bytes + h + data, why);
    tally.record("header dictionaries", v, fmt::format("{}: header {} {}", name, header, why));
  }
}

void expectClean(const Tally& tally, std::string_view format) {
  std::printf("%s\n", tally.report(format).c_str());
  EXPECT_EQ(tally.broken, 0) << fmt::format("{}", fmt::join(tally.failures, "\n"));
  EXPECT_GT(tally.accepted, 0) << "no mutant was accepted: the round-trip side is not exercised";
  EXPECT_GT(tally.rejected, 0);
}

const fs::path kSource = TPU_SOURCE_DIR;

TEST(Mutation, Hlob) {
  capAddressSpace();
  std::mt19937 rng(10);
  Tally tally;
  for (const fs::path& path : filesIn(TPU_CORPUS_DIR, ".hlo", 12000)) {
    auto source = std::make_shared<SourceFile>(path.filename().string(), readFile(path));
    DiagnosticEngine diags;
    auto module = hlo::readModule(source, diags).module;
    if (!module) continue;
    std::string file = hlo::writeHlob(*module);
    mutateBytes(path.filename().string(), file, rng, judgeHlob, tally, 60);
    containerGames(path.filename().string(), file, hlo::kHlobMagic, rng, judgeHlob, tally);
  }
  expectClean(tally, ".hlob");
}

TEST(Mutation, Tpu) {
  capAddressSpace();
  std::mt19937 rng(11);
  Tally tally;
  for (const fs::path& dir : {kSource / "testdata/llo", kSource / "testdata/sim"}) {
    for (const fs::path& path : filesIn(dir, ".llo")) {
      SourceFile source(path.filename().string(), readFile(path));
      DiagnosticEngine diags;
      auto assembled = llo::assembleLlo(source, {}, diags);
      ASSERT_TRUE(assembled) << firstErrorMessage(diags);
      std::string file = isa::encodeProgram(assembled->program);
      mutateBytes(path.filename().string(), file, rng, judgeTpu, tally, 200);
      containerGames(path.filename().string(), file, isa::kTpuMagic, rng, judgeTpu, tally);
    }
  }
  expectClean(tally, ".tpu");
}

TEST(Mutation, Llo) {
  capAddressSpace();
  std::mt19937 rng(12);
  Tally tally;
  for (const fs::path& dir : {kSource / "testdata/llo", kSource / "testdata/sim"}) {
    for (const fs::path& path : filesIn(dir, ".llo")) {
      std::string text = readFile(path);
      mutateBytes(path.filename().string(), text, rng, judgeLlo, tally, 200);
      lloGames(path.filename().string(), text, rng, tally);
    }
  }
  expectClean(tally, ".llo");
}

TEST(Mutation, Npy) {
  capAddressSpace();
  std::mt19937 rng(13);
  Tally tally;
  for (const fs::path& path : filesIn(kSource / "testdata/eval/npy", ".npy")) {
    std::string file = readFile(path);
    mutateBytes(path.filename().string(), file, rng, judgeNpy, tally, 100);
    npyGames(path.filename().string(), file, tally);
  }
  expectClean(tally, ".npy");
}

}  // namespace
}  // namespace tpu
