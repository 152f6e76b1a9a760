// The HLO files a parameterized sweep test runs over, and their test names:
// shared by the sweeps over the corpus and the testdata folders.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

namespace tpu::passes::testing {

// The .hlo files of `dirs` (missing folders are skipped), sorted; a file
// name seen in an earlier folder is not taken again (testdata/models
// repeats corpus modules).
inline std::vector<std::string> hloFilesIn(std::initializer_list<const char*> dirs) {
  std::vector<std::string> files;
  std::set<std::string> names;
  for (const char* dir : dirs) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".hlo" && names.insert(e.path().filename().string()).second)
        files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A gtest parameter name from a file path: its stem, other characters than
// letters and digits as '_'.
inline std::string sweepTestName(const std::string& path) {
  std::string name = std::filesystem::path(path).stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace tpu::passes::testing
