// Negative tests: every diagnostic of the verifier. Text inputs go through
// the parser; IR the parser cannot produce (dangling references, recursion,
// bad layouts) is built by hand. The lit tests in
// lit_tests/hlo-parse/verify are also replayed here so that their expected
// messages and lines are checked without the tool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "hlo/text/parser.h"
#include "hlo/verify/verifier.h"

namespace tpu::hlo {
namespace {

using ::testing::HasSubstr;

std::string render(const DiagnosticEngine& d) {
  std::string out;
  for (const Diagnostic& x : d.diagnostics()) {
    out += formatDiagnostic(x, DiagnosticFormat::Text, false);
    for (const Diagnostic& n : x.notes) out += formatDiagnostic(n, DiagnosticFormat::Text, false);
  }
  return out;
}

// Parses (must succeed) and verifies; returns all diagnostics ("" if clean).
std::string verifyText(const std::string& text, const VerifyOptions& options = {}) {
  SourceFile file("t.hlo", text);
  DiagnosticEngine diags;
  auto module = parseHloText(file, diags);
  if (!module) return "PARSE FAILED: " + render(diags);
  verifyModule(*module, diags, options);
  return render(diags);
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------- lit replay

TEST(VerifyLit, EveryLitTestReportsItsCheckedErrors) {
  std::filesystem::path dir = std::filesystem::path(TPU_SOURCE_DIR) / "lit_tests/hlo-parse/verify";
  int files = 0;
  std::regex check(R"(^// CHECK: \{\{\.\*\}\}:\[\[@LINE\+(\d+)\]\]:\{\{\[0-9\]\+\}\}: error: (.*)$)");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".hlo") continue;
    ++files;
    std::string text = readFile(e.path());
    std::string name = e.path().filename().string();
    SourceFile file(name, text);
    DiagnosticEngine diags;
    auto module = parseHloText(file, diags);
    ASSERT_NE(module, nullptr) << name << ": " << render(diags);
    EXPECT_FALSE(verifyModule(*module, diags)) << name;
    std::string out = render(diags);
    std::istringstream lines(text);
    std::string line;
    int lineNo = 0, checks = 0;
    while (std::getline(lines, line)) {
      ++lineNo;
      std::smatch m;
      if (!std::regex_match(line, m, check)) continue;
      ++checks;
      std::string expected = fmt::format("{}:{}:", name, lineNo + std::stoi(m[1].str()));
      EXPECT_THAT(out, HasSubstr(expected + "")) << name;
      EXPECT_THAT(out, HasSubstr("error: " + m[2].str())) << name;
    }
    EXPECT_GT(checks, 0) << name;
  }
  EXPECT_GE(files, 50);
}

// ---------------------------------------------------------------- text inputs

TEST(Verify, CleanModulePasses) {
  EXPECT_EQ(verifyText(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  r = f32[4] reduce(p, z), dimensions={1}, to_apply=add
  b = f32[4,8] broadcast(r), dimensions={0}
  c = pred[4,8] compare(p, b), direction=GT
  ROOT s = f32[4,8] select(c, p, b)
})"),
            "");
}

TEST(Verify, MismatchMessageNamesInstructionAndShapes) {
  std::string out = verifyText("ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT add.3 = f32[8] add(p, p)\n}\n");
  EXPECT_EQ(out,
            "t.hlo:3:8: error: 'add.3' has shape f32[8] but its operands imply f32[4]\n"
            "  ROOT add.3 = f32[8] add(p, p)\n       ^\n");
}

TEST(Verify, LayoutsAreIgnoredUnlessLayoutSensitive) {
  std::string text = "ENTRY e {\n  p = f32[4,3]{0,1} parameter(0)\n  ROOT t = (f32[4,3]{1,0}) tuple(p)\n}\n";
  EXPECT_EQ(verifyText(text), "");
  VerifyOptions sensitive;
  sensitive.layoutSensitive = true;
  EXPECT_THAT(verifyText(text, sensitive), HasSubstr("'t' has shape (f32[4,3]{1,0}) but its operands imply "
                                                     "(f32[4,3]{0,1})"));
}

TEST(Verify, MixedPrecisionIsRejectedUnlessAllowed) {
  std::string text = R"(HloModule m, replica_count=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  q = bf16[4] parameter(1)
  ROOT r = (f32[2], bf16[2]) reduce-scatter(p, q), replica_groups={{0,1}}, dimensions={0}, to_apply=add
})";
  EXPECT_THAT(verifyText(text), HasSubstr("'r' mixes floating-point operand types f32 and bf16"));
  VerifyOptions mixed;
  mixed.allowMixedPrecision = true;
  EXPECT_EQ(verifyText(text, mixed), "");
}

TEST(Verify, BroadcastOrderOption) {
  std::string text = "ENTRY e {\n  p = f32[3,4] parameter(0)\n  ROOT b = f32[4,3] broadcast(p), dimensions={1,0}\n}\n";
  EXPECT_EQ(verifyText(text), "");
  VerifyOptions sorted;
  sorted.verifyBroadcastDimensionsOrder = true;
  EXPECT_THAT(verifyText(text, sorted), HasSubstr("broadcast dimensions {1,0} must be sorted"));
}

TEST(Verify, BitcastSizeOption) {
  std::string text = "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT b = f32[5] bitcast(p)\n}\n";
  EXPECT_THAT(verifyText(text), HasSubstr("changes the data size"));
  VerifyOptions any;
  any.allowBitcastToHaveDifferentSize = true;
  EXPECT_EQ(verifyText(text, any), "");
}

TEST(Verify, NamesUniquePerComputationByDefaultModuleWideOnRequest) {
  std::string text = R"(HloModule m
f {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
ENTRY e {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
})";
  EXPECT_EQ(verifyText(text), "");
  VerifyOptions unique;
  unique.moduleUniqueNames = true;
  std::string out = verifyText(text, unique);
  EXPECT_THAT(out, HasSubstr("t.hlo:7:3: error: instruction name 'p' is not unique in the module: it is used in "
                             "computation 'f' and in computation 'e'"));
  EXPECT_THAT(out, HasSubstr("t.hlo:3:3: note: 'p' first defined here"));
}

TEST(Verify, ScalarPredSelectAndScalarClampBoundsAreAllowed) {
  EXPECT_EQ(verifyText(R"(ENTRY e {
  c = pred[] parameter(0)
  x = f32[4] parameter(1)
  s = f32[4] select(c, x, x)
  lo = f32[] constant(0)
  ROOT k = f32[4] clamp(lo, s, lo)
})"),
            "");
}

TEST(Verify, GatherWithBatchingDims) {
  EXPECT_EQ(verifyText(R"(ENTRY e {
  x = f32[3,5,4] parameter(0)
  i = s32[3,2,1] parameter(1)
  ROOT g = f32[3,2,4] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}
})"),
            "");
}

TEST(Verify, ConvolutionWithGroupsAndPadding) {
  EXPECT_EQ(verifyText(R"(ENTRY e {
  x = f32[2,7,7,8] parameter(0)
  k = f32[3,3,2,8] parameter(1)
  ROOT c = f32[2,4,4,8] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
})"),
            "");
}

TEST(Verify, DotOuterProductAndBatch) {
  EXPECT_EQ(verifyText(R"(ENTRY e {
  a = bf16[7,2,4] parameter(0)
  b = bf16[7,4,3] parameter(1)
  d = f32[7,2,3] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  v = f32[3] parameter(2)
  ROOT o = f32[3,3] dot(v, v), lhs_contracting_dims={}, rhs_contracting_dims={}
})"),
            "");
}

TEST(Verify, ErrorCapStopsCollecting) {
  std::string text = "ENTRY e {\n  p = f32[4] parameter(0)\n";
  for (int i = 0; i < 40; ++i) text += fmt::format("  a{} = f32[5] negate(p)\n", i);
  text += "  ROOT r = f32[4] negate(p)\n}\n";
  SourceFile file("t.hlo", text);
  DiagnosticEngine diags;
  auto module = parseHloText(file, diags);
  ASSERT_NE(module, nullptr);
  VerifyOptions options;
  options.maxErrors = 5;
  EXPECT_FALSE(verifyModule(*module, diags, options));
  EXPECT_EQ(diags.errorCount(), 5u);
}

TEST(Verify, InferShapeApi) {
  SourceFile file("t.hlo", R"(ENTRY e {
  a = f32[2,4] parameter(0)
  b = f32[4,3] parameter(1)
  ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  DiagnosticEngine diags;
  auto module = parseHloText(file, diags);
  ASSERT_NE(module, nullptr);
  auto shape = inferShape(*module->entry()->root(), diags);
  ASSERT_TRUE(shape.has_value()) << render(diags);
  EXPECT_EQ(shape->toString(false), "f32[2,3]");
  EXPECT_TRUE(shapeMatchesInferred(Opcode::Dot, module->entry()->root()->shape(), *shape));
}

// ---------------------------------------------------------------- hand-built IR

struct Built {
  std::unique_ptr<Module> module = std::make_unique<Module>("m");
  Computation* entry = nullptr;
  Built() {
    entry = module->addComputation("e");
    module->setEntry(entry);
  }
  Instruction* param(Computation* c, int64_t n, Shape s, std::string name) {
    Instruction* p = c->addInstruction(Opcode::Parameter, std::move(name), std::move(s));
    p->attrs().parameterNumber = n;
    return p;
  }
  std::string verify(const VerifyOptions& options = {}) {
    DiagnosticEngine diags;
    verifyModule(*module, diags, options);
    std::string out;
    for (const Diagnostic& d : diags.diagnostics()) out += d.message + "\n";
    return out;
  }
};

Shape f32(std::vector<int64_t> dims) { return Shape(ElementType::F32, std::move(dims)); }

TEST(VerifyBuilt, MissingRootAndEmptyComputation) {
  Built b;
  b.param(b.entry, 0, f32({4}), "p");
  b.module->addComputation("empty");
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("computation 'e' has no root instruction"));
  EXPECT_THAT(out, HasSubstr("computation 'empty' has no instructions"));
}

TEST(VerifyBuilt, RootFromAnotherComputation) {
  Built b;
  Computation* other = b.module->addComputation("o");
  Instruction* q = b.param(other, 0, f32({4}), "q");
  other->setRoot(q);
  b.param(b.entry, 0, f32({4}), "p");
  b.entry->setRoot(q);
  EXPECT_THAT(b.verify(), HasSubstr("the root of computation 'e' is not one of its instructions"));
}

TEST(VerifyBuilt, OperandsMustBeEarlierInTheSameComputation) {
  Built b;
  Computation* other = b.module->addComputation("o");
  Instruction* q = b.param(other, 0, f32({4}), "q");
  other->setRoot(q);
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* n = b.entry->addInstruction(Opcode::Negate, "n", f32({4}));
  Instruction* later = b.entry->addInstruction(Opcode::Negate, "later", f32({4}));
  later->addOperand(p);
  n->addOperand(later);
  Instruction* x = b.entry->addInstruction(Opcode::Negate, "x", f32({4}));
  x->addOperand(q);
  Instruction* y = b.entry->addInstruction(Opcode::Negate, "y", f32({4}));
  y->addOperand(nullptr);
  Instruction stray(Opcode::Parameter, "stray", f32({4}));
  Instruction* z = b.entry->addInstruction(Opcode::Negate, "z", f32({4}));
  z->addOperand(&stray);
  b.entry->setRoot(z);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("'n' uses 'later' before it is defined"));
  EXPECT_THAT(out, HasSubstr("operand 0 of 'x' is 'q' from computation 'o', not from 'e'"));
  EXPECT_THAT(out, HasSubstr("operand 0 of 'y' is missing"));
  EXPECT_THAT(out, HasSubstr("operand 0 of 'z' is not an instruction of this module"));
}

TEST(VerifyBuilt, ControlPredecessors) {
  Built b;
  Computation* other = b.module->addComputation("o");
  Instruction* q = b.param(other, 0, f32({4}), "q");
  other->setRoot(q);
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* a = b.entry->addInstruction(Opcode::Negate, "a", f32({4}));
  a->addOperand(p);
  Instruction* c = b.entry->addInstruction(Opcode::Negate, "c", f32({4}));
  c->addOperand(p);
  a->addControlPredecessor(c);
  c->addControlPredecessor(q);
  b.entry->setRoot(c);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("control predecessor 'c' of 'a' must be defined before it"));
  EXPECT_THAT(out, HasSubstr("control predecessor 'q' of 'c' is in computation 'o', not 'e'"));
}

TEST(VerifyBuilt, ParameterNumbering) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  b.param(b.entry, 0, f32({4}), "q");
  b.entry->setRoot(p);
  EXPECT_THAT(b.verify(), HasSubstr("parameter number 0 is used by both 'p' and 'q' in computation 'e'"));
}

TEST(VerifyBuilt, CalledComputations) {
  Built b;
  Computation* stray = new Computation("stray");  // not in the module
  std::unique_ptr<Computation> owner(stray);
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* c = b.entry->addInstruction(Opcode::Call, "c", f32({4}));
  c->addOperand(p);
  c->addCalledComputation(stray);
  Instruction* n = b.entry->addInstruction(Opcode::Negate, "n", f32({4}));
  n->addOperand(p);
  n->addCalledComputation(b.entry);
  b.entry->setRoot(n);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("'c' calls a computation that is not in this module"));
  EXPECT_THAT(out, HasSubstr("'n' (negate) cannot call computations, but calls 1"));
  EXPECT_THAT(out, HasSubstr("'n' calls computation 'e' recursively"));
}

TEST(VerifyBuilt, FusedComputationCalledTwiceAndAsyncComputationRules) {
  Built b;
  Computation* fused = b.module->addComputation("fused");
  Instruction* fp = b.param(fused, 0, f32({4}), "fp");
  Instruction* fn = fused->addInstruction(Opcode::Negate, "fn", f32({4}));
  fn->addOperand(fp);
  fused->setRoot(fn);
  Computation* wrapped = b.module->addComputation("wrapped");
  Instruction* wp = b.param(wrapped, 0, f32({4}), "wp");
  Instruction* extra = wrapped->addInstruction(Opcode::Negate, "extra", f32({4}));
  extra->addOperand(wp);
  Instruction* wn = wrapped->addInstruction(Opcode::Negate, "wn", f32({4}));
  wn->addOperand(extra);
  wrapped->setRoot(wn);
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* f1 = b.entry->addInstruction(Opcode::Fusion, "f1", f32({4}));
  f1->addOperand(p);
  f1->addCalledComputation(fused);
  Instruction* f2 = b.entry->addInstruction(Opcode::Fusion, "f2", f32({4}));
  f2->addOperand(f1);
  f2->addCalledComputation(fused);
  Shape asyncShape = Shape::tuple({Shape::tuple({f32({4})}), f32({4})});
  Instruction* s1 = b.entry->addInstruction(Opcode::AsyncStart, "s1", asyncShape);
  s1->addOperand(f2);
  s1->addCalledComputation(wrapped);
  Instruction* d1 = b.entry->addInstruction(Opcode::AsyncDone, "d1", f32({4}));
  d1->addOperand(s1);
  Instruction* s2 = b.entry->addInstruction(Opcode::AsyncStart, "s2", asyncShape);
  s2->addOperand(d1);
  s2->addCalledComputation(wrapped);
  b.entry->setRoot(s2);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("fused computation 'fused' is called by more than one fusion ('f1' and 'f2')"));
  EXPECT_THAT(out, HasSubstr("async computation 'wrapped' is called by 2 async-start instructions"));
  EXPECT_THAT(out, HasSubstr("async computation 'wrapped' may contain only parameters and its root, not 'extra'"));
  EXPECT_THAT(out, HasSubstr("'s2' (async-start) must have exactly one user (async-update or async-done), but has 0"));
}

TEST(VerifyBuilt, EntryProblems) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  b.entry->setRoot(p);
  b.module->setEntry(nullptr);
  EXPECT_THAT(b.verify(), HasSubstr("module 'm' has no entry computation"));
  Computation stray("stray");
  b.module->setEntry(&stray);
  EXPECT_THAT(b.verify(), HasSubstr("the entry computation of module 'm' is not one of its computations"));
}

TEST(VerifyBuilt, DuplicateComputationNames) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  b.entry->setRoot(p);
  Computation* dup = b.module->addComputation("e");
  dup->setRoot(b.param(dup, 0, f32({4}), "q"));
  EXPECT_THAT(b.verify(), HasSubstr("computation name 'e' is not unique in the module"));
}

TEST(VerifyBuilt, InvalidShapesAndLayouts) {
  Built b;
  Shape bad = f32({4, 3});
  Layout l;
  l.minorToMajor = {0, 0};
  bad.setLayout(l);
  b.param(b.entry, 0, bad, "p");
  Shape neg = f32({-2});
  b.param(b.entry, 1, neg, "q");
  Shape tiled = f32({8});
  Layout t = Layout::defaultForRank(1);
  t.tiles.push_back(Tile{{0}});
  tiled.setLayout(t);
  b.param(b.entry, 2, tiled, "r");
  Shape wide = f32({8});
  Layout e = Layout::defaultForRank(1);
  e.elementSizeInBits = 64;
  wide.setLayout(e);
  b.param(b.entry, 3, wide, "s");
  Shape unbounded = f32({kUnboundedSize});
  unbounded.setDynamicDimension(0, true);
  Instruction* u = b.param(b.entry, 4, unbounded, "u");
  b.entry->setRoot(u);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("'p' has layout {0,0} in shape f32[4,3], but minor_to_major must be a permutation of 0..1"));
  EXPECT_THAT(out, HasSubstr("'q' has an invalid shape f32[-2]"));
  EXPECT_THAT(out, HasSubstr("'r' has layout {0:T(0)} with an invalid tile"));
  EXPECT_THAT(out, HasSubstr("'s' has element size E(64)"));
  EXPECT_THAT(out, HasSubstr("'u' has unbounded dynamic dimensions in shape f32[?], which are not allowed"));
  VerifyOptions allow;
  allow.allowUnboundedDynamism = true;
  EXPECT_THAT(b.verify(allow), ::testing::Not(HasSubstr("'u'")));
}

TEST(VerifyBuilt, ShardingChecks) {
  Built b;
  b.module->config().numPartitions = 2;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  p->common().sharding = Sharding::maximal(5);
  Instruction* q = b.param(b.entry, 1, f32({4}), "q");
  Sharding tiled;
  tiled.kind = Sharding::Kind::Tiled;
  tiled.tileAssignmentDims = {2};
  tiled.tileAssignmentDevices = {0, 0};
  q->common().sharding = tiled;
  Instruction* r = b.param(b.entry, 2, f32({4}), "r");
  tiled.tileAssignmentDevices = {0, 1, 2};
  r->common().sharding = tiled;
  Instruction* s = b.param(b.entry, 3, f32({4}), "s");
  s->common().sharding = Sharding::tuple({Sharding::replicated()});
  b.entry->setRoot(s);
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("'p' has sharding device 5 out of range (the module has 2 devices)"));
  EXPECT_THAT(out, HasSubstr("'q' has sharding device 0 more than once"));
  EXPECT_THAT(out, HasSubstr("'r' has a sharding tile assignment {2} of 2 tiles but lists 3 devices"));
  EXPECT_THAT(out, HasSubstr("'s' has a tuple sharding but its shape f32[4] is not a tuple"));
}

TEST(VerifyBuilt, AliasingChecks) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* q = b.param(b.entry, 1, f32({8}), "q");
  Instruction* t = b.entry->addInstruction(Opcode::Tuple, "t", Shape::tuple({f32({4}), f32({4})}));
  t->addOperand(p);
  t->addOperand(p);
  b.entry->setRoot(t);
  (void)q;
  auto& cfg = b.module->config();
  cfg.inputOutputAlias.push_back({{0}, 1, {}, false});
  cfg.inputOutputAlias.push_back({{1}, 0, {}, false});
  cfg.inputOutputAlias.push_back({{1}, 0, {}, false});
  cfg.inputOutputAlias.push_back({{0}, 0, {0}, false});
  cfg.bufferDonors.push_back({0, {}});
  cfg.bufferDonors.push_back({1, {}});
  cfg.bufferDonors.push_back({1, {}});
  std::string out = b.verify();
  EXPECT_THAT(out, HasSubstr("input_output_alias pairs output {0} (f32[4]) with parameter 1 at {} (f32[8]) of a "
                             "different size"));
  EXPECT_THAT(out, HasSubstr("input_output_alias aliases output {1} more than once"));
  EXPECT_THAT(out, HasSubstr("input_output_alias parameter index {0} does not exist in parameter 0"));
  EXPECT_THAT(out, HasSubstr("parameter 0 at {} is both a buffer donor and in input_output_alias"));
  EXPECT_THAT(out, HasSubstr("buffer_donor lists parameter 1 at {} more than once"));
}

TEST(VerifyBuilt, EntryLayoutParameterCount) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  b.entry->setRoot(p);
  b.module->config().entryComputationLayout = ComputationLayout{{f32({4}), f32({4})}, f32({4})};
  EXPECT_THAT(b.verify(), HasSubstr("entry_computation_layout has 2 parameters but entry computation 'e' has 1"));
}

TEST(VerifyBuilt, ArityFromTheOpcodeTable) {
  Built b;
  Instruction* p = b.param(b.entry, 0, f32({4}), "p");
  Instruction* a = b.entry->addInstruction(Opcode::Add, "a", f32({4}));
  a->addOperand(p);
  b.entry->setRoot(a);
  EXPECT_THAT(b.verify(), HasSubstr("'a': add expects 2 operands, but has 1"));
}

// ---------------------------------------------------------------- hostile IR

// Corrupts parsed corpus modules at random (operands redirected anywhere in
// the module or nulled, attributes and shapes scrambled) and verifies them:
// the verifier must report, never crash.
TEST(VerifyHostile, RandomCorruptionNeverCrashes) {
  std::mt19937_64 rng(1234);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(TPU_CORPUS_DIR))
    if (e.path().extension() == ".hlo" && std::filesystem::file_size(e.path()) < 60000) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(n, 1))); };
  auto randomInt = [&]() -> int64_t {
    switch (rng() % 4) {
      case 0: return pick(5);
      case 1: return -pick(5) - 1;
      case 2: return std::numeric_limits<int64_t>::max() - pick(3);
      default: return std::numeric_limits<int64_t>::min() + pick(3);
    }
  };
  int rounds = 0;
  for (const auto& path : files) {
    std::string text = readFile(path);
    for (int round = 0; round < 6; ++round) {
      SourceFile file(path.filename().string(), text);
      DiagnosticEngine diags;
      auto module = parseHloText(file, diags);
      if (!module) break;
      std::vector<Instruction*> all;
      std::vector<Computation*> comps;
      for (const auto& c : module->computations()) {
        comps.push_back(c.get());
        for (const auto& i : c->instructions()) all.push_back(i.get());
      }
      for (int k = 0; k < 8; ++k) {
        Instruction* inst = all[static_cast<size_t>(pick(static_cast<int64_t>(all.size())))];
        InstructionAttributes& a = inst->attrs();
        switch (rng() % 10) {
          case 0:
            if (inst->operandCount()) inst->setOperand(pick(inst->operandCount()), all[static_cast<size_t>(pick(static_cast<int64_t>(all.size())))]);
            break;
          case 1:
            if (inst->operandCount()) inst->setOperand(pick(inst->operandCount()), nullptr);
            break;
          case 2: a.dimensions.push_back(randomInt()); break;
          case 3:
            a.slice.push_back({randomInt(), randomInt(), randomInt()});
            a.padding.push_back({randomInt(), randomInt(), randomInt()});
            break;
          case 4:
            a.gatherDims.mutate().offsetDims.push_back(randomInt());
            a.scatterDims.mutate().indexVectorDim = randomInt();
            a.gatherSliceSizes.push_back(randomInt());
            a.dotDims.mutate().lhsContractingDimensions.push_back(randomInt());
            break;
          case 5: inst->setShape(Shape::tuple({inst->shape(), Shape::token()})); break;
          case 6: inst->addCalledComputation(comps[static_cast<size_t>(pick(static_cast<int64_t>(comps.size())))]); break;
          case 7: a.tupleIndex = randomInt(); a.parameterNumber = randomInt(); break;
          case 8:
            if (!a.window) a.window = Window{};
            a.window->dimensions.push_back({randomInt(), randomInt(), randomInt(), randomInt(), randomInt(), randomInt(), false});
            a.featureGroupCount = randomInt();
            break;
          default: {
            std::vector<int64_t> dims;
            for (int d = pick(4); d > 0; --d) dims.push_back(pick(9));
            inst->setShape(Shape(ElementType::F32, dims));
          }
        }
      }
      DiagnosticEngine vd;
      VerifyOptions options;
      options.maxErrors = 0;
      verifyModule(*module, vd, options);
      ++rounds;
    }
  }
  EXPECT_GT(rounds, 100);
}

}  // namespace
}  // namespace tpu::hlo
