#include "isa/isa.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "isa/encoding.h"
#include "isa/isa_doc.h"
#include "isa/verify.h"
#include "support/elided_fill.h"

namespace tpu::isa {
namespace {

TEST(IsaTable, WellFormed) {
  EXPECT_TRUE(isaTableErrors().empty()) << isaTableErrors().front();
  EXPECT_GT(numOpcodes(), 100u);
  EXPECT_LT(numOpcodes(), size_t{1} << kOpcodeBits);
  std::set<std::string_view> mnemonics;
  for (const InstrDesc& d : instructions()) {
    EXPECT_TRUE(mnemonics.insert(d.mnemonic).second) << d.mnemonic;
    EXPECT_EQ(&instrDesc(d.opcode), &d);
    EXPECT_EQ(opcodeFromMnemonic(d.mnemonic), d.opcode);
    EXPECT_LE(d.operands.size(), static_cast<size_t>(kMaxOperands)) << d.mnemonic;
    EXPECT_FALSE(d.summary.empty()) << d.mnemonic;
    // Every op fits its 128-bit slot.
    int bits = kOpcodeBits;
    for (const OperandDesc& o : d.operands) bits += operandEncodedBits(o.kind);
    EXPECT_LE(bits, kInstrBits) << d.mnemonic;
    // Defaults only on trailing operands, so positional writing works.
    bool seenDefault = false;
    for (const OperandDesc& o : d.operands) {
      if (seenDefault) {
        EXPECT_TRUE(o.hasDefault) << d.mnemonic;
      }
      seenDefault |= o.hasDefault;
    }
    // Control flow and waits end bundles; nothing else writes through labels.
    if (d.semClass == SemClass::Branch) {
      EXPECT_EQ(d.slot, target::SlotClass::Ctrl) << d.mnemonic;
    }
  }
  EXPECT_FALSE(opcodeFromMnemonic("frobnicate"));
}

TEST(IsaTable, LatencyAndIntervalFromTarget) {
  DiagnosticEngine diags;
  auto v5e = target::loadTarget("v5e", diags);
  auto v4 = target::loadTarget("v4", diags);
  ASSERT_TRUE(v5e && v4);
  EXPECT_EQ(latency(instrDesc(Opcode::VAddF), *v5e), 2);
  EXPECT_EQ(issueInterval(instrDesc(Opcode::MxuMatmulBf16), *v5e), 8);
  EXPECT_EQ(issueInterval(instrDesc(Opcode::MxuMatmulS8), *v5e), 4);  // 2x int8 rate
  EXPECT_EQ(issueInterval(instrDesc(Opcode::MxuMatmulS8), *v4), 8);
  EXPECT_TRUE(targetSupports(instrDesc(Opcode::MxuMatmulS8), *v5e));
}

// Random operand values within each kind's range.
Operand randomOperand(OperandKind kind, std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Operand o;
  o.kind = kind;
  switch (kind) {
    case OperandKind::SReg: o.reg = static_cast<int>(pick(0, 31)); break;
    case OperandKind::VReg: o.reg = static_cast<int>(pick(0, 63)); break;
    case OperandKind::VMask: o.reg = static_cast<int>(pick(0, 15)); break;
    case OperandKind::Mxu: o.reg = static_cast<int>(pick(0, 3)); break;
    case OperandKind::Xlu: o.reg = static_cast<int>(pick(0, 1)); break;
    case OperandKind::Imm:
    case OperandKind::FImm: o.imm = pick(INT32_MIN, INT32_MAX); break;
    case OperandKind::SublaneMask: o.imm = pick(0, 255); break;
    case OperandKind::Label: o.imm = pick(0, 9); break;
    case OperandKind::DmaDesc: o.imm = 0; break;
    case OperandKind::SRegImm:
      if (pick(0, 1)) { o.form = SrcForm::SReg; o.reg = static_cast<int>(pick(0, 31)); }
      else o.imm = pick(INT32_MIN, INT32_MAX);
      break;
    case OperandKind::VSrc:
      o.form = static_cast<SrcForm>(pick(0, 2));
      if (o.form == SrcForm::Imm) o.imm = pick(INT32_MIN, INT32_MAX);
      else o.reg = static_cast<int>(pick(0, 31));
      break;
    case OperandKind::VmemAddr:
    case OperandKind::SmemAddr:
      o.reg = static_cast<int>(pick(-1, 31));
      o.imm = pick(INT32_MIN, INT32_MAX);
      break;
    case OperandKind::HbmAddr:
      o.buffer = 0;
      o.reg = static_cast<int>(pick(-1, 31));
      o.imm = pick(-(1 << 23), (1 << 23) - 1);
      break;
    case OperandKind::Sem:
      if (pick(0, 1)) { o.form = SrcForm::SReg; o.reg = static_cast<int>(pick(0, 31)); }
      else o.imm = pick(0, 31);
      break;
  }
  return o;
}

Program randomProgram(std::mt19937& rng) {
  Program p;
  p.targetName = "v5e";
  p.targetJson = "";  // a built-in target: no description embedded
  p.buffers.push_back(Buffer{"x", MemSpace::Hbm, DType::F32, {8, 128}, 0, -1});
  p.buffers.push_back(Buffer{"w", MemSpace::Hbm, DType::Bf16, {2}, 0, 0});
  p.buffers.push_back(Buffer{"t", MemSpace::Vmem, DType::S32, {4}, 512, -1});
  p.data.push_back(DataBlob{std::string("\x80\x3f\x00\x40", 4), {}, 0});
  p.dmaDescriptors.push_back(DmaDescriptor{"d", 4096, {DmaDim{8, 4096, 512}}});
  p.entries.push_back(Entry{"main", {0}, {1}, 0});
  // Enough bundles that the random placement stays within a bundle's 32 ops.
  const size_t nb = instructions().size() / 12 + 1;
  p.bundles.resize(nb);
  for (const InstrDesc& d : instructions()) {
    Instr in;
    in.opcode = d.opcode;
    for (const OperandDesc& od : d.operands) {
      in.operands.push_back(randomOperand(od.kind, rng));
      // The verifier run by the decoder checks a `word` index against the element.
      if (od.name == "word") in.operands.back().imm = static_cast<int64_t>(rng() % wordsPerElement(d));
    }
    p.bundles[rng() % nb].instrs.push_back(std::move(in));
  }
  p.labels.push_back(Label{"top", 0});
  p.labels.push_back(Label{"end", static_cast<uint32_t>(nb)});
  p.kernels.push_back(KernelMeta{"top", "matmul", "dot.1", "layer/MatMul"});
  return p;
}

TEST(Encoding, EveryInstructionRoundTrips) {
  std::mt19937 rng(42);
  for (int round = 0; round < 50; ++round) {
    for (const InstrDesc& d : instructions()) {
      Instr in;
      in.opcode = d.opcode;
      for (const OperandDesc& od : d.operands) in.operands.push_back(randomOperand(od.kind, rng));
      std::string error;
      auto back = decodeInstr(encodeInstr(in), error);
      ASSERT_TRUE(back) << d.mnemonic << ": " << error;
      EXPECT_EQ(*back, in) << d.mnemonic;
    }
  }
}

TEST(Encoding, ProgramRoundTripsAndIsDeterministic) {
  std::mt19937 rng(7);
  Program p = randomProgram(rng);
  std::string bytes = encodeProgram(p);
  EXPECT_EQ(bytes, encodeProgram(p));
  SourceFile file("p.tpu", bytes);
  file.setBinary(true);
  DiagnosticEngine diags;
  auto back = decodeProgram(file, diags);
  ASSERT_TRUE(back) << firstErrorMessage(diags);
  EXPECT_EQ(*back, p);
  EXPECT_EQ(encodeProgram(*back), bytes);
}

// Elided constants (format 1.2): a blob with a fill recipe is written as
// its seed in the FILL section (a few bytes, whatever its size) and read
// back expanded; a bad recipe is refused.
TEST(Encoding, FillRecipesAreCompact) {
  std::mt19937 rng(7);
  Program p = randomProgram(rng);
  p.kernels.clear();
  p.buffers.push_back(Buffer{"table", MemSpace::Hbm, DType::S32, {1000, 100}, 0, 1});
  p.buffers.push_back(Buffer{"wide", MemSpace::Hbm, DType::U32, {10, 2}, 0, 2});
  p.data.push_back(DataBlob{*elidedFillBytes("s32", 42, 100000), "s32", 42});
  p.data.push_back(DataBlob{*elidedFillBytes("s64", 7, 10), "s64", 7});
  auto decode = [](const std::string& bytes, DiagnosticEngine& diags) {
    SourceFile file("f.tpu", bytes);
    file.setBinary(true);
    return decodeProgram(file, diags);
  };
  std::string bytes = encodeProgram(p);
  EXPECT_LT(bytes.size(), 20000u);  // not the table's 400 KB
  EXPECT_EQ(static_cast<uint8_t>(bytes[10]) | static_cast<uint8_t>(bytes[11]) << 8, 2);
  DiagnosticEngine d1;
  auto back = decode(bytes, d1);
  ASSERT_TRUE(back) << firstErrorMessage(d1);
  EXPECT_EQ(*back, p);
  EXPECT_EQ(encodeProgram(*back), bytes);

  Program bad = p;
  bad.data[1].bytes.resize(400);  // 100 elements: the buffer takes 100000
  DiagnosticEngine d2;
  EXPECT_FALSE(decode(encodeProgram(bad), d2));
  EXPECT_NE(firstErrorMessage(d2).find("fill entry 0: 100 s32 elements do not fill the buffer that takes data #1"),
            std::string::npos)
      << firstErrorMessage(d2);
}

// Kernel metadata (format 1.1): a program with it is 1.1, one without is
// written as 1.0 exactly as before; bad metadata is refused.
TEST(Encoding, KernelMetadataAndVersions) {
  std::mt19937 rng(5);
  Program p = randomProgram(rng);
  auto decode = [](const std::string& bytes, DiagnosticEngine& diags) {
    SourceFile file("k.tpu", bytes);
    file.setBinary(true);
    return decodeProgram(file, diags);
  };
  auto minor = [](const std::string& bytes) {
    return static_cast<uint8_t>(bytes[10]) | static_cast<uint8_t>(bytes[11]) << 8;
  };
  std::string with = encodeProgram(p);
  EXPECT_EQ(minor(with), 1);
  DiagnosticEngine d1;
  auto back = decode(with, d1);
  ASSERT_TRUE(back) << firstErrorMessage(d1);
  ASSERT_EQ(back->kernels.size(), 1u);
  EXPECT_EQ(back->kernels[0].opName, "layer/MatMul");
  ASSERT_NE(back->findKernel("top"), nullptr);
  EXPECT_EQ(back->findKernel("end"), nullptr);

  Program plain = p;
  plain.kernels.clear();
  std::string without = encodeProgram(plain);
  EXPECT_EQ(minor(without), 0);
  DiagnosticEngine d2;
  auto plainBack = decode(without, d2);
  ASSERT_TRUE(plainBack) << firstErrorMessage(d2);
  EXPECT_TRUE(plainBack->kernels.empty());

  Program unknown = p;
  unknown.kernels[0].label = "nowhere";
  DiagnosticEngine d3;
  EXPECT_FALSE(decode(encodeProgram(unknown), d3));
  EXPECT_NE(firstErrorMessage(d3).find("kernel metadata for 'nowhere', which is not a label of the program"),
            std::string::npos)
      << firstErrorMessage(d3);

  Program twice = p;
  twice.kernels.push_back(twice.kernels[0]);
  DiagnosticEngine d4;
  EXPECT_FALSE(decode(encodeProgram(twice), d4));
  EXPECT_NE(firstErrorMessage(d4).find("kernel 'top' is described twice"), std::string::npos);

  for (std::string bad : {std::string("a\"b"), std::string("tab\there"), std::string("\xff\xfe")}) {
    Program text = p;
    text.kernels[0].opName = bad;
    DiagnosticEngine d5;
    EXPECT_FALSE(decode(encodeProgram(text), d5));
    EXPECT_NE(firstErrorMessage(d5).find("kernel 'top': metadata text the assembler cannot read back"),
              std::string::npos)
        << firstErrorMessage(d5);
  }
  EXPECT_TRUE(isMetadataText("conv/Relu6 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(isMetadataText("\xc0\xaf"));      // overlong
  EXPECT_FALSE(isMetadataText("\xed\xa0\x80"));  // surrogate
  EXPECT_FALSE(isMetadataText("\xe2\x82"));      // truncated
}

TEST(Encoding, RejectsBadInstrWords) {
  std::string error;
  EXPECT_FALSE(decodeInstr({0, 0}, error));
  EXPECT_EQ(error, "unknown opcode 0");
  EXPECT_FALSE(decodeInstr({1023, 0}, error));
  // smov with a stray bit beyond its operands.
  Instr in{Opcode::SMov, {Operand{OperandKind::SReg, SrcForm::Imm, 1, 0, 0}, Operand{OperandKind::SRegImm}}};
  auto words = encodeInstr(in);
  words[1] |= uint64_t{1} << 60;
  EXPECT_FALSE(decodeInstr(words, error));
  EXPECT_EQ(error, "'smov': unused bits of the op are not zero");
}

// Hostile files: every truncation and many single-byte corruptions are
// rejected with an error, never a crash.
TEST(Encoding, CorruptFilesAreRejected) {
  std::mt19937 rng(3);
  Program p = randomProgram(rng);
  std::string bytes = encodeProgram(p);
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    SourceFile file("t.tpu", bytes.substr(0, cut));
    file.setBinary(true);
    DiagnosticEngine diags;
    EXPECT_FALSE(decodeProgram(file, diags));
    EXPECT_TRUE(diags.hasErrors());
  }
  for (int i = 0; i < 200; ++i) {
    std::string bad = bytes;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    SourceFile file("c.tpu", bad);
    file.setBinary(true);
    DiagnosticEngine diags;
    EXPECT_FALSE(decodeProgram(file, diags));  // the CRC catches it
  }
}

// Payload corruptions behind a valid checksum reach the decoder itself: it
// must fail cleanly or produce a program that re-encodes, never crash.
TEST(Encoding, CorruptPayloadsAreHandled) {
  std::mt19937 rng(11);
  Program p = randomProgram(rng);
  std::string bytes = encodeProgram(p);
  SourceFile good("g.tpu", bytes);
  good.setBinary(true);
  DiagnosticEngine diags;
  auto unpacked = unpackContainer(good, kTpuMagic, kTpuFormatMajor, "TPU program", diags);
  ASSERT_TRUE(unpacked);
  for (int i = 0; i < 3000; ++i) {
    std::string payload = unpacked->payload;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % payload.size();
      if (rng() % 4 == 0) payload.resize(at);
      else if (!payload.empty()) payload[at] = static_cast<char>(rng());
      if (payload.empty()) break;
    }
    SourceFile file("c.tpu", packContainer(kTpuMagic, {kTpuFormatMajor, kTpuFormatMinor}, payload, 0));
    file.setBinary(true);
    DiagnosticEngine d;
    auto back = decodeProgram(file, d);
    if (back) {
      SourceFile again("a.tpu", encodeProgram(*back));
      again.setBinary(true);
      DiagnosticEngine d2;
      EXPECT_TRUE(decodeProgram(again, d2)) << firstErrorMessage(d2);
    } else {
      EXPECT_TRUE(d.hasErrors());
    }
  }
}

TEST(Verify, BundleRules) {
  DiagnosticEngine diags;
  auto t = target::loadTarget("v4", diags);
  ASSERT_TRUE(t);
  auto sreg = [](int r) { return Operand{OperandKind::SReg, SrcForm::Imm, r, 0, 0}; };
  auto simm = [](int64_t v) { return Operand{OperandKind::SRegImm, SrcForm::Imm, -1, v, 0}; };
  Bundle b;
  for (int i = 0; i < 3; ++i) b.instrs.push_back(Instr{Opcode::SMov, {sreg(i), simm(i)}});
  EXPECT_EQ(checkBundle(b, *t), "bundle has more 'scalar' ops than the 2 scalar slots of target 'v4'");
  b.instrs.pop_back();
  b.instrs[1].operands[0] = sreg(0);
  EXPECT_EQ(checkBundle(b, *t), "register s0 is written by more than one op of the bundle");
  Instr v{Opcode::VAddF, {Operand{OperandKind::VReg, SrcForm::Imm, 40, 0, 0},
                          Operand{OperandKind::VReg, SrcForm::Imm, 1, 0, 0},
                          Operand{OperandKind::VSrc, SrcForm::Reg, 2, 0, 0}}};
  EXPECT_EQ(checkInstrForTarget(v, *t), "register v40 out of range: target 'v4' has v0..v31");
}

// The man page's instruction section is the generated reference.
TEST(IsaDoc, ManPageMatchesTable) {
  std::ifstream in(std::string(TPU_SOURCE_DIR) + "/man/tpu-isa.7");
  ASSERT_TRUE(in) << "man/tpu-isa.7 missing";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string page = ss.str();
  std::string begin = ".\\\" BEGIN GENERATED INSTRUCTIONS\n", end = ".\\\" END GENERATED INSTRUCTIONS\n";
  size_t a = page.find(begin), b = page.find(end);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(page.substr(a + begin.size(), b - a - begin.size()), isaReferenceRoff())
      << "regenerate with: llo-asm --print-isa";
}

}  // namespace
}  // namespace tpu::isa
