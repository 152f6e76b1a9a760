#include <gtest/gtest.h>

#include <cmath>
#include <string_view>
#include <vector>

#include "hlo/module.h"

namespace tpu::hlo {
namespace {

TEST(ElementTypeTest, TableCoversEveryType) {
  for (int i = 1; i < kElementTypeCount - 1; ++i) {
    auto t = static_cast<ElementType>(i);
    auto back = elementTypeFromName(elementTypeName(t));
    ASSERT_TRUE(back.has_value()) << elementTypeName(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(elementTypeFromName("tuple"));
  EXPECT_FALSE(elementTypeFromName("f33"));
  EXPECT_FALSE(elementTypeFromName("s3"));
  EXPECT_EQ(elementTypeInfo(ElementType::S4).bitWidth, 4);
  EXPECT_EQ(elementTypeInfo(ElementType::S4).byteSize, 1);
  EXPECT_EQ(elementTypeInfo(ElementType::C128).byteSize, 16);
  EXPECT_TRUE(isSignedIntegerType(ElementType::S16));
  EXPECT_TRUE(isUnsignedIntegerType(ElementType::U1));
  EXPECT_TRUE(isFloatType(ElementType::F8E4M3FN));
  EXPECT_EQ(elementTypeInfo(ElementType::BF16).floatFormat, FloatFormat::BF16);
  EXPECT_EQ(elementTypeInfo(ElementType::F4E2M1FN).floatFormat, FloatFormat::F4E2M1FN);
  EXPECT_FALSE(elementTypeInfo(ElementType::F32).floatFormat.has_value());
  EXPECT_TRUE(isComplexType(ElementType::C64));
  EXPECT_EQ(complexComponentType(ElementType::C64), ElementType::F32);
}

TEST(OpcodeTest, NamesRoundTrip) {
  for (int i = 0; i < kOpcodeCount; ++i) {
    auto op = static_cast<Opcode>(i);
    auto back = opcodeFromName(opcodeName(op));
    ASSERT_TRUE(back) << opcodeName(op);
    EXPECT_EQ(*back, op);
  }
  EXPECT_FALSE(opcodeFromName("all-to-all-start"));
  EXPECT_EQ(opcodeInfo(Opcode::Add).arity, 2);
  EXPECT_EQ(opcodeInfo(Opcode::Tuple).arity, kVariadic);
  EXPECT_TRUE(isElementwise(Opcode::Multiply));
  EXPECT_FALSE(isElementwise(Opcode::Dot));
  EXPECT_TRUE(isSideEffectingOpcode(Opcode::Outfeed));
  EXPECT_TRUE(isCollective(Opcode::AllReduce));
  EXPECT_TRUE(isAsyncStart(Opcode::CopyStart));
}

// The property flags every library asks instead of typing lists of opcodes.
TEST(OpcodeTest, PropertyFlags) {
  std::vector<std::string_view> renames, aliases, barriers, structure, control, views;
  for (int i = 0; i < kOpcodeCount; ++i) {
    auto op = static_cast<Opcode>(i);
    if (isPureRename(op)) renames.push_back(opcodeName(op));
    if (isAlias(op)) aliases.push_back(opcodeName(op));
    if (isBarrier(op)) barriers.push_back(opcodeName(op));
    if (isBufferStructure(op)) structure.push_back(opcodeName(op));
    if (isControlFlow(op)) control.push_back(opcodeName(op));
    if (isView(op)) views.push_back(opcodeName(op));
    // An alias is a rename in every layout; renames and buffer structure
    // are the two ways of computing nothing, and never both.
    if (isAlias(op)) EXPECT_TRUE(isPureRename(op)) << opcodeName(op);
    EXPECT_FALSE(isPureRename(op) && isBufferStructure(op)) << opcodeName(op);
    EXPECT_EQ(computesNothing(op), isPureRename(op) || isBufferStructure(op)) << opcodeName(op);
    if (computesNothing(op) || isControlFlow(op) || isView(op)) EXPECT_FALSE(isSideEffectingOpcode(op)) << opcodeName(op);
  }
  using V = std::vector<std::string_view>;
  EXPECT_EQ(renames, (V{"add-dependency", "bitcast", "copy", "domain", "dynamic-reshape", "opt-barrier", "reshape",
                        "set-dimension-size"}));
  EXPECT_EQ(aliases, (V{"add-dependency", "bitcast", "domain", "opt-barrier", "set-dimension-size"}));
  EXPECT_EQ(barriers, (V{"add-dependency", "after-all", "domain", "opt-barrier"}));
  EXPECT_EQ(structure, (V{"after-all", "constant", "get-tuple-element", "parameter", "tuple"}));
  EXPECT_EQ(control, (V{"call", "conditional", "while"}));
  EXPECT_EQ(views, (V{"broadcast", "reverse", "slice", "transpose"}));
}

TEST(ShapeTest, ArrayBasics) {
  Shape s(ElementType::F32, {2, 3});
  EXPECT_EQ(s.elementCount(), 6);
  EXPECT_EQ(s.byteSize(), 24);
  EXPECT_EQ(s.toString(), "f32[2,3]");
  s.setDefaultLayoutIfMissing();
  EXPECT_EQ(s.toString(), "f32[2,3]{1,0}");
  EXPECT_EQ(s.toString(false), "f32[2,3]");
  Shape t(ElementType::F32, {2, 3});
  EXPECT_FALSE(s == t);
  EXPECT_TRUE(s.equalIgnoringLayout(t));
  EXPECT_EQ(Shape::scalar(ElementType::Pred).withDefaultLayout().toString(), "pred[]");
}

TEST(ShapeTest, DynamicAndOverflow) {
  Shape s(ElementType::S32, {4, kUnboundedSize, 8});
  s.setDynamicDimension(0, true);
  s.setDynamicDimension(1, true);
  EXPECT_EQ(s.toString(), "s32[<=4,?,8]");
  EXPECT_TRUE(s.isDynamic());
  EXPECT_TRUE(s.isUnboundedDynamic());
  EXPECT_FALSE(s.elementCount().has_value());
  Shape big(ElementType::F32, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_FALSE(big.elementCount().has_value());
}

TEST(ShapeTest, TuplesAndLayouts) {
  Shape a(ElementType::BF16, {16, 256});
  Layout l = Layout::defaultForRank(2);
  l.tiles = {Tile{{8, 128}}, Tile{{2, 1}}};
  l.memorySpace = 1;
  a.setLayout(l);
  EXPECT_EQ(a.toString(), "bf16[16,256]{1,0:T(8,128)(2,1)S(1)}");
  Shape e = Shape::tuple({});
  EXPECT_EQ(e.toString(), "()");
  std::vector<Shape> six(6, Shape::scalar(ElementType::F32));
  EXPECT_EQ(Shape::tuple(six).toString(), "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])");
  Shape nested = Shape::tuple({Shape::tuple({a}), Shape::token()});
  EXPECT_EQ(nested.leafCount(), 2);
  ASSERT_NE(nested.subshape({0, 0}), nullptr);
  EXPECT_EQ(*nested.subshape({0, 0}), a);
  EXPECT_EQ(nested.subshape({2}), nullptr);
  Layout c;
  c.minorToMajor = {0};
  c.tiles = {Tile{{Tile::kCombineDimension, 128}}};
  c.elementSizeInBits = 4;
  c.tailPaddingAlignment = 2;
  c.dynamicShapeMetadataPrefixBytes = 8;
  c.splitConfigs = {SplitConfig{0, {5, 9}}};
  EXPECT_EQ(c.toString(), "{0:T(*,128)L(2)E(4)SC(0:5,9)M(8)}");
}

// Copies share one representation until one of them changes.
TEST(ShapeTest, CopiesShareUntilMutated) {
  Shape a(ElementType::F32, {8, 128});
  Shape b = a;
  EXPECT_TRUE(a.sharesRepresentationWith(b));
  b.setLayout(Layout::defaultForRank(2));
  EXPECT_FALSE(a.sharesRepresentationWith(b));
  EXPECT_FALSE(a.hasLayout());
  EXPECT_EQ(b.toString(), "f32[8,128]{1,0}");
  // A no-op mutation keeps sharing; a real one unshares only its own copy.
  Shape c = b;
  c.setDefaultLayoutIfMissing();
  c.setElementType(ElementType::F32);
  EXPECT_TRUE(c.sharesRepresentationWith(b));
  c.setDynamicDimension(0, true);
  EXPECT_EQ(c.toString(), "f32[<=8,128]{1,0}");
  EXPECT_EQ(b.toString(), "f32[8,128]{1,0}");
  // Tuple elements mutated through the tuple leave other copies alone.
  Shape t = Shape::tuple({a, b});
  Shape u = t;
  u.mutableTupleElements()[0].setDimensions({3});
  EXPECT_EQ(t.toString(), "(f32[8,128], f32[8,128]{1,0})");
  EXPECT_EQ(u.toString(), "(f32[3], f32[8,128]{1,0})");
  // Moved-from and default shapes are Invalid.
  Shape moved = std::move(u);
  EXPECT_FALSE(u.isValid());
  EXPECT_EQ(moved.tupleSize(), 2);
  EXPECT_EQ(Shape(), u);
}

// Up to N elements live inside the object; more move to the heap, and
// copies and moves keep the elements whichever storage they are in.
TEST(InlineVectorTest, InlineThenHeapCopiesAndMoves) {
  InlineVector<int, 3> v{1, 2};
  const int* inlineData = v.data();
  v.push_back(3);
  EXPECT_EQ(v.data(), inlineData);  // still inside
  v.push_back(v[0]);                // grows while reading its own storage
  EXPECT_NE(v.data(), inlineData);
  EXPECT_EQ(v, (InlineVector<int, 3>{1, 2, 3, 1}));
  InlineVector<int, 3> copy = v;
  copy[0] = 9;
  EXPECT_EQ(v[0], 1);
  InlineVector<int, 3> moved = std::move(copy);
  EXPECT_EQ(moved, (InlineVector<int, 3>{9, 2, 3, 1}));
  EXPECT_TRUE(copy.empty());
  InlineVector<int, 3> small{7};
  InlineVector<int, 3> movedSmall = std::move(small);
  EXPECT_EQ(movedSmall, (InlineVector<int, 3>{7}));
  movedSmall = moved;  // inline <- heap
  EXPECT_EQ(movedSmall.size(), 4u);
  moved = InlineVector<int, 3>{5};  // heap <- inline
  EXPECT_EQ(moved, (InlineVector<int, 3>{5}));
}

TEST(LiteralTest, TypedAccess) {
  Literal l(Shape(ElementType::S8, {3}));
  l.setInt(0, -5);
  l.setInt(1, 300);  // wraps
  l.setDouble(2, 7.9);
  EXPECT_EQ(l.getInt(0), -5);
  EXPECT_EQ(l.getInt(1), 44);
  EXPECT_EQ(l.getInt(2), 7);

  Literal s4(Shape(ElementType::S4, {2}));
  s4.setInt(0, -8);
  s4.setInt(1, 9);  // wraps to -7
  EXPECT_EQ(s4.getInt(0), -8);
  EXPECT_EQ(s4.getInt(1), -7);

  Literal b = Literal::filled(Shape(ElementType::BF16, {2}), 1.0 / 3.0);
  EXPECT_NEAR(b.getDouble(1), 1.0 / 3.0, 1e-2);
  EXPECT_EQ(b.getBits(0), 0x3eabu);

  Literal c(Shape::scalar(ElementType::C64));
  c.setComplex(0, {1.5, -2});
  EXPECT_EQ(c.getComplex(0), std::complex<double>(1.5, -2));
  EXPECT_EQ(c.getDouble(0), 1.5);

  Literal u(Shape::scalar(ElementType::U64));
  u.setUint(0, UINT64_MAX);
  EXPECT_EQ(u.getUint(0), UINT64_MAX);

  Literal e = Literal::elided(Shape(ElementType::F32, {1000}));
  EXPECT_TRUE(e.isElided());
  EXPECT_TRUE(e.data().empty());
  EXPECT_EQ(e.getDouble(5), 0.0);

  Literal t = Literal::tuple({Literal::scalar(ElementType::F32, 1.0), Literal::scalar(ElementType::Pred, true)});
  EXPECT_EQ(t.shape().toString(), "(f32[], pred[])");
  EXPECT_EQ(t.tupleElements()[1].getInt(0), 1);
  EXPECT_FALSE(t == e);
  EXPECT_EQ(l.linearIndex({2}), 2);
}

std::unique_ptr<Module> makeModule() {
  auto m = std::make_unique<Module>("m");
  Computation* add = m->addComputation("add");
  Instruction* x = add->addInstruction(Opcode::Parameter, "x", Shape::scalar(ElementType::F32));
  Instruction* y = add->addInstruction(Opcode::Parameter, "y", Shape::scalar(ElementType::F32));
  y->attrs().parameterNumber = 1;
  Instruction* s = add->addInstruction(Opcode::Add, "s", Shape::scalar(ElementType::F32));
  s->setOperands({x, y});
  add->setRoot(s);
  Computation* entry = m->addComputation("main");
  Instruction* p = entry->addInstruction(Opcode::Parameter, "p", Shape(ElementType::F32, {4}));
  Instruction* z = entry->addInstruction(Opcode::Constant, "z", Shape::scalar(ElementType::F32));
  z->attrs().literal = Literal::scalar(ElementType::F32, 0.0);
  Instruction* r = entry->addInstruction(Opcode::Reduce, "r", Shape::scalar(ElementType::F32));
  r->setOperands({p, z});
  r->attrs().dimensions = {0};
  r->addCalledComputation(add);
  entry->setRoot(r);
  m->setEntry(entry);
  return m;
}

TEST(ModuleTest, StructuralEqualityFindsDifferences) {
  auto a = makeModule();
  auto b = makeModule();
  std::string diff;
  EXPECT_TRUE(structurallyEqual(*a, *b, &diff)) << diff;
  b->entry()->root()->attrs().dimensions = {1};
  EXPECT_FALSE(structurallyEqual(*a, *b, &diff));
  EXPECT_EQ(diff, "computation 'main', instruction 'r': attributes differ");
  auto c = makeModule();
  c->entry()->root()->common().metadata.mutate().opName = "x";
  EXPECT_FALSE(structurallyEqual(*a, *c, &diff));
  EXPECT_EQ(diff, "computation 'main', instruction 'r': metadata differs");
  auto d = makeModule();
  d->entry()->root()->setLocation(SourceLocation{nullptr, 42});
  EXPECT_TRUE(structurallyEqual(*a, *d, &diff));
}

TEST(ModuleTest, PostOrderAndLayout) {
  auto m = makeModule();
  auto order = m->postOrder();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0]->name(), "add");
  EXPECT_EQ(order[1]->name(), "main");
  ComputationLayout l = m->entryComputationLayout();
  ASSERT_EQ(l.parameters.size(), 1u);
  EXPECT_EQ(l.parameters[0].toString(), "f32[4]{0}");
  EXPECT_EQ(m->uniqueComputationName("add"), "add.1");
  EXPECT_EQ(m->entry()->parameterCount(), 1);
  EXPECT_EQ(m->entry()->calledComputations().size(), 1u);
}

TEST(ComputationTest, SortTopologically) {
  Computation c("c");
  Instruction* late = c.addInstruction(Opcode::Negate, "n", Shape::scalar(ElementType::F32));
  Instruction* p = c.addInstruction(Opcode::Parameter, "p", Shape::scalar(ElementType::F32));
  late->addOperand(p);
  c.sortTopologically();
  EXPECT_EQ(c.instructions()[0]->name(), "p");
  EXPECT_EQ(c.instructions()[1]->name(), "n");
  auto users = c.computeUsers();
  ASSERT_EQ(users[p].size(), 1u);
  EXPECT_EQ(users[p][0], late);
}

}  // namespace
}  // namespace tpu::hlo
