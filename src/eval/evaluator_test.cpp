#include "eval/evaluator.h"

#include <gtest/gtest.h>

#include "eval/elided.h"

namespace tpu::eval {
namespace {

using hlo::ElementType;
using hlo::Literal;
using hlo::Opcode;
using hlo::Shape;

Literal f32Vector(std::vector<double> v) {
  Literal l(Shape(ElementType::F32, {static_cast<int64_t>(v.size())}).withDefaultLayout());
  for (size_t i = 0; i < v.size(); ++i) l.setDouble(static_cast<int64_t>(i), v[i]);
  return l;
}

// ENTRY: r = add(p0, p1) on f32[n].
std::unique_ptr<hlo::Module> addModule(int64_t n) {
  auto m = std::make_unique<hlo::Module>("add");
  hlo::Computation* c = m->addComputation("main");
  Shape s = Shape(ElementType::F32, {n}).withDefaultLayout();
  hlo::Instruction* a = c->addInstruction(Opcode::Parameter, "a", s);
  hlo::Instruction* b = c->addInstruction(Opcode::Parameter, "b", s);
  b->attrs().parameterNumber = 1;
  hlo::Instruction* r = c->addInstruction(Opcode::Add, "r", s);
  r->addOperand(a);
  r->addOperand(b);
  c->setRoot(r);
  m->setEntry(c);
  return m;
}

TEST(Evaluator, AddsVectors) {
  auto m = addModule(3);
  std::vector<Literal> args{f32Vector({1, 2, 3}), f32Vector({0.5, -2, 10})};
  DiagnosticEngine d;
  auto r = evaluate(*m, args, {}, d);
  ASSERT_TRUE(r) << firstErrorMessage(d);
  EXPECT_EQ(r->getDouble(0), 1.5);
  EXPECT_EQ(r->getDouble(1), 0.0);
  EXPECT_EQ(r->getDouble(2), 13.0);
}

TEST(Evaluator, RejectsWrongArguments) {
  auto m = addModule(3);
  DiagnosticEngine d;
  std::vector<Literal> one{f32Vector({1, 2, 3})};
  EXPECT_FALSE(evaluate(*m, one, {}, d));
  EXPECT_EQ(firstErrorMessage(d), "the entry computation takes 2 parameters, but 1 argument was given");
  DiagnosticEngine d2;
  std::vector<Literal> bad{f32Vector({1, 2, 3}), f32Vector({1, 2})};
  EXPECT_FALSE(evaluate(*m, bad, {}, d2));
  EXPECT_EQ(firstErrorMessage(d2), "argument 1 has shape f32[2], but parameter 1 is f32[3]");
}

TEST(Evaluator, AllReduceOverSimulatedReplicas) {
  auto m = std::make_unique<hlo::Module>("ar");
  hlo::Computation* sum = m->addComputation("sum");
  Shape u = Shape::scalar(ElementType::U32);
  hlo::Instruction* x = sum->addInstruction(Opcode::Parameter, "x", u);
  hlo::Instruction* y = sum->addInstruction(Opcode::Parameter, "y", u);
  y->attrs().parameterNumber = 1;
  hlo::Instruction* s = sum->addInstruction(Opcode::Add, "s", u);
  s->addOperand(x);
  s->addOperand(y);
  sum->setRoot(s);
  hlo::Computation* c = m->addComputation("main");
  hlo::Instruction* id = c->addInstruction(Opcode::ReplicaId, "id", u);
  hlo::Instruction* ar = c->addInstruction(Opcode::AllReduce, "ar", u);
  ar->addOperand(id);
  ar->addCalledComputation(sum);
  ar->attrs().replicaGroups = hlo::ReplicaGroups{};
  c->setRoot(ar);
  m->setEntry(c);
  EvalOptions o;
  o.replicas = 3;
  DiagnosticEngine d;
  auto r = evaluateAllDevices(*m, {}, o, d);
  ASSERT_TRUE(r) << firstErrorMessage(d);
  ASSERT_EQ(r->perDevice.size(), 3u);
  for (const Literal& l : r->perDevice) EXPECT_EQ(l.getUint(0), 3u);  // 0 + 1 + 2
}

TEST(Elided, DeterministicAndInRange) {
  Shape s = Shape(ElementType::F32, {64}).withDefaultLayout();
  Literal a = fillElidedLiteral("w", s), b = fillElidedLiteral("w", s), c = fillElidedLiteral("v", s);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_GE(a.getDouble(i), -1.0);
    EXPECT_LT(a.getDouble(i), 1.0);
  }
  Literal ints = fillElidedLiteral("i", Shape(ElementType::S32, {64}).withDefaultLayout());
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_GE(ints.getInt(i), -4);
    EXPECT_LE(ints.getInt(i), 4);
  }
  Literal bf = fillElidedLiteral("w", Shape(ElementType::BF16, {64}).withDefaultLayout());
  // The shape is part of the seed: another type gives another stream, in the same range.
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_GE(bf.getDouble(i), -1.0);
    EXPECT_LE(bf.getDouble(i), 1.0);
  }
}

}  // namespace
}  // namespace tpu::eval
