#include "support/file_kind.h"

#include <gtest/gtest.h>

namespace tpu {
namespace {

std::string bytes(std::string_view magic, std::string_view rest = "payload") {
  return std::string(magic) + std::string(rest);
}

TEST(FileKind, BinaryFormatsByMagic) {
  EXPECT_EQ(detectFileKind(bytes(std::string_view(kHlobMagic.data(), 8))), FileKind::Hlob);
  EXPECT_EQ(detectFileKind(bytes(std::string_view(kTpuMagic.data(), 8))), FileKind::Tpu);
  EXPECT_EQ(detectFileKind(bytes(kNpyMagic, "\x01\x00")), FileKind::Npy);
  EXPECT_EQ(detectFileKind("PK\x03\x04rest"), FileKind::Zip);
  EXPECT_EQ(detectFileKind("\x7f"
                           "ELF\x02\x01"),
            FileKind::Elf);
  EXPECT_EQ(detectFileKind("\x28\xb5\x2f\xfd\x00"), FileKind::Zstd);
  EXPECT_EQ(detectFileKind("\x1f\x8b\x08\x00"), FileKind::Gzip);
  EXPECT_EQ(detectFileKind(""), FileKind::Empty);
}

TEST(FileKind, TextFormatsByFirstToken) {
  EXPECT_EQ(detectFileKind("HloModule m\nENTRY e {}"), FileKind::HloText);
  EXPECT_EQ(detectFileKind("// a comment\n/* block */  HloModule m, entry_computation_layout={}"),
            FileKind::HloText);
  EXPECT_EQ(detectFileKind("// kernel\n.target v5e\n"), FileKind::LloText);
  EXPECT_EQ(detectFileKind(".buffer x : hbm f32[8]"), FileKind::LloText);
  // A bundle starts with '{' too, but is not JSON.
  EXPECT_EQ(detectFileKind("{ vadd v1, v2, v3 ; sadd s1, s2, s3 }"), FileKind::UnknownText);
  EXPECT_EQ(detectFileKind("  {\"name\": \"v5e\"}"), FileKind::Json);
  EXPECT_EQ(detectFileKind("{}"), FileKind::Json);
  EXPECT_EQ(detectFileKind("[1, 2]"), FileKind::Json);
  EXPECT_EQ(detectFileKind("ENTRY e { ROOT c = f32[] constant(1) }"), FileKind::UnknownText);
}

TEST(FileKind, BinaryVersusStrayNul) {
  EXPECT_EQ(detectFileKind(std::string("\x89XXXX\r\n\x1a", 8)), FileKind::UnknownBinary);
  EXPECT_EQ(detectFileKind(std::string("ab\0cd", 5)), FileKind::UnknownBinary);
  // A NUL past the first line is the parser's to report, with its line.
  EXPECT_EQ(detectFileKind(std::string("HloModule m\nENTRY e { \0 }", 26)), FileKind::HloText);
}

TEST(FileKind, CheckNamesWhatWasFoundAndExpected) {
  DiagnosticEngine diags;
  SourceFile tpu("k.tpu", bytes(std::string_view(kTpuMagic.data(), 8)));
  EXPECT_FALSE(checkFileKind(tpu, {FileKind::HloText, FileKind::Hlob}, "an HLO module", diags));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  EXPECT_EQ(diags.diagnostics()[0].fileName, "k.tpu");
  EXPECT_EQ(diags.diagnostics()[0].message,
            "this is TPU machine code (.tpu), not an HLO module; disassemble it with llo-asm, or run it with "
            "tpu-run");
  diags.clear();
  EXPECT_FALSE(checkFileKind(tpu, {FileKind::HloText}, "HLO", diags, "custom advice"));
  EXPECT_EQ(firstErrorMessage(diags), "this is TPU machine code (.tpu), not HLO; custom advice");
  diags.clear();
  SourceFile unknownText("t.txt", "whatever this is");
  EXPECT_TRUE(checkFileKind(unknownText, {FileKind::Tpu}, "machine code", diags));
  EXPECT_TRUE(checkFileKind(tpu, {FileKind::Tpu}, "machine code", diags));
  EXPECT_FALSE(diags.hasErrors());
}

}  // namespace
}  // namespace tpu
