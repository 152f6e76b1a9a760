#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include "support/bytes.h"
#include "support/container.h"

namespace tpu {
namespace {

TEST(Diagnostics, TextFormatHasLocationLineAndCaret) {
  SourceFile file("m.hlo", "HloModule m\nENTRY e {\n  x = f32[] bogus()\n}\n");
  DiagnosticEngine diags;
  size_t offset = file.contents().find("bogus");
  diags.error(SourceLocation{&file, offset}, "unknown opcode 'bogus'");
  ASSERT_EQ(diags.errorCount(), 1u);
  std::string text = formatDiagnostic(diags.diagnostics()[0], DiagnosticFormat::Text, false);
  EXPECT_EQ(text, "m.hlo:3:13: error: unknown opcode 'bogus'\n  x = f32[] bogus()\n            ^\n");
}

TEST(Diagnostics, BinaryFilesReportOffsets) {
  SourceFile file("m.hlob", std::string("\0\1\2", 3));
  file.setBinary(true);
  Diagnostic d{Severity::Error, {&file, 2}, {}, "bad byte", {}};
  EXPECT_EQ(formatDiagnostic(d, DiagnosticFormat::Text, false), "m.hlob:offset 2: error: bad byte\n");
}

TEST(Diagnostics, JsonFormat) {
  SourceFile file("a.hlo", "x\ny z\n");
  Diagnostic d{Severity::Warning, {&file, 4}, {}, "odd", {}};
  EXPECT_EQ(formatDiagnostic(d, DiagnosticFormat::Json, false),
            "{\"column\":3,\"file\":\"a.hlo\",\"line\":2,\"message\":\"odd\",\"offset\":4,\"severity\":\"warning\"}\n");
}

TEST(Bytes, VarintsRoundTripAndReaderNeverOverruns) {
  ByteWriter w;
  for (int64_t v : std::initializer_list<int64_t>{0, 1, -1, 127, 128, -123456789, INT64_MIN, INT64_MAX}) w.svar(v);
  ByteReader r(w.data());
  for (int64_t v : std::initializer_list<int64_t>{0, 1, -1, 127, 128, -123456789, INT64_MIN, INT64_MAX}) EXPECT_EQ(r.svar(), v);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_FALSE(r.ok());
  ByteReader hostile(std::string_view("\xff\xff\xff\x0f", 4));
  EXPECT_EQ(hostile.count(), 0u);  // claims 32M elements in 0 remaining bytes
  EXPECT_FALSE(hostile.ok());
}

TEST(Container, RoundTripAndCorruptionDetected) {
  Magic magic = {'T', 'E', 'S', 'T', '\r', '\n', '\x1a', '\n'};
  std::string payload(10000, 'a');
  std::string packed = packContainer(magic, {1, 2}, payload);
  EXPECT_LT(packed.size(), payload.size());
  SourceFile file("x.bin", packed);
  file.setBinary(true);
  DiagnosticEngine diags;
  auto out = unpackContainer(file, magic, 1, "test", diags);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->payload, payload);
  EXPECT_EQ(out->version.minor, 2);
  for (size_t pos : {size_t{9}, size_t{20}, packed.size() - 1}) {
    std::string bad = packed;
    bad[pos] ^= 0x40;
    SourceFile badFile("x.bin", bad);
    badFile.setBinary(true);
    DiagnosticEngine d2;
    EXPECT_FALSE(unpackContainer(badFile, magic, 1, "test", d2).has_value()) << pos;
    EXPECT_TRUE(d2.hasErrors());
  }
  SourceFile truncated("x.bin", packed.substr(0, packed.size() - 3));
  DiagnosticEngine d3;
  EXPECT_FALSE(unpackContainer(truncated, magic, 1, "test", d3).has_value());
  EXPECT_NE(firstErrorMessage(d3).find("truncated"), std::string::npos);
}

TEST(Crc32, KnownValue) { EXPECT_EQ(crc32("123456789"), 0xCBF43926u); }

// The sliced implementation against the bit-at-a-time definition, over
// every length and alignment that exercises the 8-byte steps and the tail.
TEST(Crc32, MatchesBitwiseDefinition) {
  auto bitwise = [](std::string_view data, uint32_t seed) {
    uint32_t c = ~seed;
    for (unsigned char b : data) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
  };
  std::string bytes;
  for (int i = 0; i < 80; ++i) bytes.push_back(static_cast<char>(i * 37 + 11));
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; start + n <= bytes.size(); ++n) {
      std::string_view slice(bytes.data() + start, n);
      ASSERT_EQ(crc32(slice, 0x1234u), bitwise(slice, 0x1234u)) << start << " " << n;
    }
}

}  // namespace
}  // namespace tpu

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/file_io.h"

namespace tpu {
namespace {

TEST(OutputFile, AtomicWriteReplacesRegularFile) {
  auto dir = std::filesystem::temp_directory_path() / ("tpu_out_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "out.txt").string();
  DiagnosticEngine diags;
  ASSERT_TRUE(writeOutputFile(path, "first", diags));
  ASSERT_TRUE(writeOutputFile(path, "second", diags));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "second");
  // No temp files are left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, DevicesAreWrittenInPlaceNeverReplaced) {
  DiagnosticEngine diags;
  ASSERT_TRUE(writeOutputFile("/dev/null", "data", diags));
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_FALSE(writeOutputFile("/dev/full", "data", diags));
  EXPECT_NE(firstErrorMessage(diags).find("cannot write output file"), std::string::npos);
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputFile, MissingDirectoryIsAnError) {
  DiagnosticEngine diags;
  EXPECT_FALSE(writeOutputFile("/nonexistent-dir/x.hlo", "data", diags));
  EXPECT_TRUE(diags.hasErrors());
}

}  // namespace
}  // namespace tpu
