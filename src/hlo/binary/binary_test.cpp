#include "hlo/binary/binary.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "hlo/text/parser.h"
#include "hlo/text/printer.h"

namespace tpu::hlo {
namespace {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::filesystem::path> corpusFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(TPU_CORPUS_DIR))
    if (entry.path().extension() == ".hlo") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

constexpr const char* kSmallModule = R"(HloModule small, entry_computation_layout={(f32[2,3]{1,0}, s32[])->(f32[3,2]{0,1}, pred[])}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y), metadata={op_name="jit(f)/add" source_file="f.py" source_line=3}
}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}
  i = s32[] parameter(1)
  c = f32[2] constant({1.5, -inf})
  z = f32[] constant(0)
  r = f32[2] reduce(p, z), dimensions={1}, to_apply=add
  t = f32[3,2]{0,1} transpose(p), dimensions={1,0}
  b = pred[] compare(i, i), direction=LT
  ROOT out = (f32[3,2]{0,1}, pred[]) tuple(t, b)
}
)";

std::unique_ptr<Module> parse(const SourceFile& file) {
  DiagnosticEngine diags;
  auto module = parseHloText(file, diags);
  EXPECT_FALSE(diags.hasErrors()) << firstErrorMessage(diags);
  return module;
}

TEST(Hlob, SmallModuleRoundTrips) {
  SourceFile text("small.hlo", kSmallModule);
  auto module = parse(text);
  ASSERT_TRUE(module);
  std::string encoded = writeHlob(*module);
  EXPECT_TRUE(isHlob(encoded));
  SourceFile binary("small.hlob", encoded);
  binary.setBinary(true);
  DiagnosticEngine diags;
  auto decoded = readHlob(binary, diags);
  ASSERT_TRUE(decoded) << firstErrorMessage(diags);
  std::string why;
  EXPECT_TRUE(structurallyEqual(*module, *decoded, &why)) << why;
  EXPECT_EQ(printHloText(*module), printHloText(*decoded));
  // Deterministic bytes.
  EXPECT_EQ(encoded, writeHlob(*decoded));
  // Instructions with equal shapes share the one decoded from the shape table.
  const Computation* entry = decoded->entry();
  ASSERT_TRUE(entry);
  const Instruction* i = entry->findInstruction("i");
  const Instruction* b = entry->findInstruction("b");
  const Instruction* c = entry->findInstruction("c");
  const Instruction* r = entry->findInstruction("r");
  ASSERT_TRUE(i && b && c && r);
  EXPECT_TRUE(c->shape().sharesRepresentationWith(r->shape()));
  EXPECT_FALSE(i->shape().sharesRepresentationWith(b->shape()));
}

// Repeated metadata is stored once and shared after loading, as the text
// parser shares a metadata repeated by consecutive instructions.
TEST(Hlob, RepeatedMetadataIsShared) {
  SourceFile text("m.hlo", R"(HloModule m

ENTRY main {
  p = f32[4] parameter(0), metadata={op_type="aten__mul" op_name="mul" source_file="a.py" source_line=7}
  a = f32[4] multiply(p, p), metadata={op_type="aten__mul" op_name="mul" source_file="a.py" source_line=7}
  b = f32[4] add(a, p), metadata={op_type="aten__add" op_name="add" source_file="a.py" source_line=8}
  ROOT c = f32[4] subtract(b, a), metadata={op_type="aten__mul" op_name="mul" source_file="a.py" source_line=7}
}
)");
  auto module = parse(text);
  ASSERT_TRUE(module);
  const Computation* entry = module->entry();
  auto metadataOf = [](const Module& m, const char* name) -> const SharedValue<OpMetadata>& {
    return m.entry()->findInstruction(name)->common().metadata;
  };
  EXPECT_TRUE(metadataOf(*module, "p").sharesWith(metadataOf(*module, "a")));
  EXPECT_FALSE(metadataOf(*module, "a").sharesWith(metadataOf(*module, "b")));
  EXPECT_EQ(metadataOf(*module, "c"), metadataOf(*module, "a"));
  ASSERT_TRUE(entry);

  SourceFile binary("m.hlob", writeHlob(*module));
  binary.setBinary(true);
  DiagnosticEngine diags;
  auto decoded = readHlob(binary, diags);
  ASSERT_TRUE(decoded) << firstErrorMessage(diags);
  EXPECT_EQ(printHloText(*module), printHloText(*decoded));
  // The binary form shares every repeat, not only consecutive ones.
  EXPECT_TRUE(metadataOf(*decoded, "p").sharesWith(metadataOf(*decoded, "c")));
  EXPECT_FALSE(metadataOf(*decoded, "b").sharesWith(metadataOf(*decoded, "c")));
  EXPECT_EQ(metadataOf(*decoded, "b")->opName, "add");
}

// Every truncation and a few thousand single-byte corruptions of a valid
// payload (re-packed so the checksum passes and the decoder itself is
// exercised) must be rejected or decoded without crashing.
TEST(Hlob, HostilePayloadsNeverCrash) {
  SourceFile text("small.hlo", kSmallModule);
  auto module = parse(text);
  ASSERT_TRUE(module);
  std::string encoded = writeHlob(*module, 0);
  std::string payload = encoded.substr(kContainerHeaderSize);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    SourceFile f("t.hlob", packContainer(kHlobMagic, kHlobVersion, payload.substr(0, cut)));
    f.setBinary(true);
    DiagnosticEngine diags;
    EXPECT_EQ(readHlob(f, diags), nullptr) << cut;
    EXPECT_TRUE(diags.hasErrors());
  }
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 4000; ++trial) {
    std::string mutated = payload;
    size_t pos = rng() % mutated.size();
    mutated[pos] = static_cast<char>(rng());
    SourceFile f("t.hlob", packContainer(kHlobMagic, kHlobVersion, mutated));
    f.setBinary(true);
    DiagnosticEngine diags;
    auto decoded = readHlob(f, diags);
    EXPECT_EQ(decoded == nullptr, diags.hasErrors());
  }
}

TEST(Hlob, NewerMajorVersionRejected) {
  SourceFile text("small.hlo", kSmallModule);
  auto module = parse(text);
  ASSERT_TRUE(module);
  std::string payload = writeHlob(*module, 0).substr(kContainerHeaderSize);
  SourceFile f("t.hlob", packContainer(kHlobMagic, {static_cast<uint16_t>(kHlobVersion.major + 1), 0}, payload));
  f.setBinary(true);
  DiagnosticEngine diags;
  EXPECT_EQ(readHlob(f, diags), nullptr);
  EXPECT_NE(firstErrorMessage(diags).find("unsupported HLO binary (.hlob) format version"), std::string::npos)
      << firstErrorMessage(diags);
}

// Text -> binary -> text is the identity on printed text for every corpus module.
TEST(Hlob, CorpusRoundTrip) {
  auto files = corpusFiles();
  ASSERT_GT(files.size(), 50u);
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    SourceFile text(path.string(), readFile(path));
    DiagnosticEngine diags;
    auto module = parseHloText(text, diags);
    ASSERT_TRUE(module) << firstErrorMessage(diags);
    std::string printed = printHloText(*module);
    std::string encoded = writeHlob(*module);
    SourceFile binary("x.hlob", encoded);
    binary.setBinary(true);
    auto decoded = readHlob(binary, diags);
    ASSERT_TRUE(decoded) << firstErrorMessage(diags);
    std::string why;
    EXPECT_TRUE(structurallyEqual(*module, *decoded, &why)) << why;
    EXPECT_EQ(printed, printHloText(*decoded));
    EXPECT_EQ(encoded, writeHlob(*decoded));
  }
}

}  // namespace
}  // namespace tpu::hlo
