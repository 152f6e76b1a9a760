// Every corpus module must round-trip: parse -> print -> parse -> print is a
// textual fixed point and both parses are structurally equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hlo/text/parser.h"
#include "hlo/text/printer.h"

namespace tpu::hlo {
namespace {

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::filesystem::path> corpusFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR))
    if (e.path().extension() == ".hlo") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string firstError(const DiagnosticEngine& d) {
  if (d.diagnostics().empty()) return "";
  return formatDiagnostic(d.diagnostics()[0], DiagnosticFormat::Text, false);
}

class CorpusTest : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(CorpusTest, RoundTripsToFixedPoint) {
  const auto& path = GetParam();
  SourceFile file(path.filename().string(), readFile(path));
  DiagnosticEngine diags;
  auto m1 = parseHloText(file, diags);
  ASSERT_NE(m1, nullptr) << firstError(diags);
  std::string print1 = printHloText(*m1);
  SourceFile file2("print1.hlo", print1);
  auto m2 = parseHloText(file2, diags);
  ASSERT_NE(m2, nullptr) << firstError(diags) << "\n" << print1.substr(0, 4000);
  std::string print2 = printHloText(*m2);
  EXPECT_EQ(print1, print2);
  std::string diff;
  EXPECT_TRUE(structurallyEqual(*m1, *m2, &diff)) << diff;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(corpusFiles()),
                         [](const ::testing::TestParamInfo<std::filesystem::path>& info) {
                           std::string n = info.param.stem().string();
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(CorpusTest, HasAllFiles) { EXPECT_GE(corpusFiles().size(), 61u); }

}  // namespace
}  // namespace tpu::hlo

namespace tpu::hlo {
namespace {

// The first print keeps what the input had: metadata, backend_config,
// frontend_attributes and shardings survive (counted per file).
TEST(CorpusPreservationTest, PrintKeepsGenericAttributes) {
  for (const auto& path : corpusFiles()) {
    std::string text = readFile(path);
    SourceFile file(path.filename().string(), text);
    DiagnosticEngine diags;
    auto m = parseHloText(file, diags);
    ASSERT_NE(m, nullptr) << firstError(diags);
    std::string out = printHloText(*m);
    auto count = [](const std::string& s, const std::string& what) {
      size_t n = 0;
      for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
      return n;
    };
    for (const char* attr : {"metadata={", "backend_config=", "frontend_attributes={", "sharding={"}) {
      size_t in = 0;
      // Count only inside instruction lines (not comments) of the input.
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);)
        if (line.find("//") == std::string::npos || line.find("//") > line.find(attr)) in += count(line, attr);
      EXPECT_EQ(count(out, attr), in) << path.filename() << " " << attr;
    }
    // Spot-check values: every op_name and source_file string of the input appears in the output.
    for (size_t at = text.find("op_name=\""); at != std::string::npos; at = text.find("op_name=\"", at + 1)) {
      size_t end = at + 9;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      if (end >= text.size()) break;
      ASSERT_NE(out.find(text.substr(at, end - at + 1)), std::string::npos) << path.filename() << " " << text.substr(at, end - at + 1);
    }
  }
}

}  // namespace
}  // namespace tpu::hlo
