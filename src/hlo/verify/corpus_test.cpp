// Every corpus module (real XLA modules) verifies without errors; verifying
// is linear and cheap next to parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hlo/text/parser.h"
#include "hlo/verify/verifier.h"

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

std::string allDiagnostics(const DiagnosticEngine& d) {
  std::string out;
  for (const Diagnostic& x : d.diagnostics()) out += formatDiagnostic(x, DiagnosticFormat::Text, false);
  return out;
}

class VerifyCorpusTest : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(VerifyCorpusTest, VerifiesWithoutErrors) {
  const auto& path = GetParam();
  SourceFile file(path.filename().string(), readFile(path));
  DiagnosticEngine diags;
  auto module = parseHloText(file, diags);
  ASSERT_NE(module, nullptr) << allDiagnostics(diags);
  EXPECT_TRUE(verifyModule(*module, diags)) << allDiagnostics(diags);
  EXPECT_EQ(diags.diagnostics().size(), 0u) << allDiagnostics(diags);
}

INSTANTIATE_TEST_SUITE_P(Corpus, VerifyCorpusTest, ::testing::ValuesIn(corpusFiles()),
                         [](const ::testing::TestParamInfo<std::filesystem::path>& info) {
                           std::string n = info.param.stem().string();
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(VerifyCorpus, HasAllFiles) { EXPECT_GE(corpusFiles().size(), 61u); }

}  // namespace
}  // namespace tpu::hlo
