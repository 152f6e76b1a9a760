// algsimp: the driver (a worklist over each computation) and the helpers
// the rules share.
#include <cmath>
#include <cstring>
#include <deque>
#include <unordered_set>

#include "hlo/pointer_index.h"

#include "hlo/module.h"
#include "passes/simplify/algsimp_internal.h"

namespace tpu::passes::simplify {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using hlo::Shape;

Shape arrayShape(hlo::ElementType type, const std::vector<int64_t>& dims) {
  return Shape::array(type, dims).withDefaultLayout();
}

std::optional<Opcode> binaryReducerOpcode(const hlo::Computation& computation) {
  const Instruction* root = computation.root();
  if (!root || root->operandCount() != 2 || !root->shape().isScalar()) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::Parameter || b->opcode() != Opcode::Parameter || a == b) return std::nullopt;
  if (!(a->shape() == root->shape()) || !(b->shape() == root->shape())) return std::nullopt;
  switch (root->opcode()) {
    case Opcode::Add:
    case Opcode::Multiply:
    case Opcode::Maximum:
    case Opcode::Minimum:
    case Opcode::And:
    case Opcode::Or:
      return root->opcode();
    default:
      return std::nullopt;
  }
}

Instruction* Simplifier::ifSameShape(Instruction& in, Instruction* candidate) const {
  if (!candidate || candidate == &in || !(candidate->shape() == in.shape())) return nullptr;
  return candidate;
}

const Literal* Simplifier::splat(const Instruction* i) {
  auto it = splats_.find(i);
  if (it != splats_.end()) return it->second ? &*it->second : nullptr;
  std::optional<Literal>& slot = splats_[i];
  const Instruction* c = i;
  if (c->opcode() == Opcode::Broadcast) c = c->operand(0);
  if (c->opcode() != Opcode::Constant || !c->attrs().literal || !c->shape().isArray()) return nullptr;
  const Literal& l = *c->attrs().literal;
  if (l.isElided() || l.elementCount() == 0 || l.isTuple()) return nullptr;
  const std::vector<uint8_t>& data = l.data();
  size_t width = data.size() / static_cast<size_t>(l.elementCount());
  for (size_t k = width; k < data.size(); k += width)
    if (std::memcmp(data.data(), data.data() + k, width) != 0) return nullptr;
  Literal s(Shape::scalar(l.shape().elementType()));
  std::memcpy(s.mutableData().data(), data.data(), width);
  slot = std::move(s);
  return &*slot;
}

bool Simplifier::isIntSplat(const Instruction* i, int64_t value) {
  const Literal* s = splat(i);
  hlo::ElementType t = i->shape().elementType();
  if (!s || !(hlo::isIntegerType(t) || t == hlo::ElementType::Pred)) return false;
  return hlo::isUnsignedIntegerType(t) ? s->getUint(0) == static_cast<uint64_t>(value) : s->getInt(0) == value;
}

bool Simplifier::isFloatSplat(const Instruction* i, double value) {
  const Literal* s = splat(i);
  if (!s || !hlo::isFloatType(i->shape().elementType())) return false;
  double v = s->getDouble(0);
  return v == value && std::signbit(v) == std::signbit(value);
}

bool Simplifier::isAllOnesSplat(const Instruction* i) {
  const Literal* s = splat(i);
  hlo::ElementType t = i->shape().elementType();
  if (!s) return false;
  if (t == hlo::ElementType::Pred) return s->getInt(0) != 0;
  if (!hlo::isIntegerType(t)) return false;
  return hlo::isSignedIntegerType(t) ? s->getInt(0) == -1
                                     : s->getUint(0) == (hlo::elementTypeInfo(t).bitWidth >= 64
                                                             ? ~uint64_t{0}
                                                             : (uint64_t{1} << hlo::elementTypeInfo(t).bitWidth) - 1);
}

Instruction* Simplifier::add(const Instruction& like, Opcode opcode, Shape shape, std::vector<Instruction*> operands) {
  return rw_.add(opcode, std::move(shape), std::move(operands), like.name(), like.location());
}

Instruction* Simplifier::splatConstant(const Instruction& like, const Shape& shape, const Literal& scalar) {
  Literal value(shape.isScalar() ? shape : Shape::scalar(shape.elementType()).withDefaultLayout());
  value.mutableData() = scalar.data();
  Instruction* c = rw_.addConstant(std::move(value), "constant", like.location());
  if (shape.isScalar()) return c;
  return broadcast(like, c, shape, {});
}

Instruction* Simplifier::splatConstant(const Instruction& like, const Shape& shape, double value) {
  Literal scalar(Shape::scalar(shape.elementType()));
  scalar.setDouble(0, value);
  return splatConstant(like, shape, scalar);
}

Instruction* Simplifier::reshape(const Instruction& like, Instruction* x, const Shape& shape) {
  if (x->shape() == shape) return x;
  return add(like, Opcode::Reshape, shape, {x});
}

Instruction* Simplifier::broadcast(const Instruction& like, Instruction* x, const Shape& shape,
                                   std::vector<int64_t> dims) {
  Instruction* b = add(like, Opcode::Broadcast, shape, {x});
  b->attrs().dimensions = std::move(dims);
  return b;
}

Instruction* Simplifier::simplify(Instruction& in) {
  if (in.shape().isDynamic()) return nullptr;  // dynamic shapes: sizes are bounds, leave them be
  if (Instruction* r = dispatch(in)) return r;
  return hlo::isElementwise(in.opcode()) ? sinkReshapesBelowElementwise(in) : nullptr;
}

Instruction* Simplifier::dispatch(Instruction& in) {
  switch (in.opcode()) {
    case Opcode::Add: return simplifyAdd(in);
    case Opcode::Subtract: return simplifySubtract(in);
    case Opcode::Multiply: return simplifyMultiply(in);
    case Opcode::Divide: return simplifyDivide(in);
    case Opcode::Maximum:
    case Opcode::Minimum: return simplifyMinMax(in);
    case Opcode::And:
    case Opcode::Or:
    case Opcode::Xor: return simplifyLogical(in);
    case Opcode::Power: return simplifyPower(in);
    case Opcode::Negate:
    case Opcode::Not:
    case Opcode::Abs: return simplifyUnaryInvolution(in);
    case Opcode::Compare: return simplifyCompare(in);
    case Opcode::Select: return simplifySelect(in);
    case Opcode::Reduce: return simplifyReduce(in);
    case Opcode::Dot: return simplifyDot(in);
    case Opcode::Convert: return simplifyConvert(in);
    case Opcode::Copy: return simplifyCopy(in);
    case Opcode::Reshape: return simplifyReshape(in);
    case Opcode::Transpose: return simplifyTranspose(in);
    case Opcode::Broadcast: return simplifyBroadcast(in);
    case Opcode::Slice: return simplifySlice(in);
    case Opcode::Concatenate: return simplifyConcatenate(in);
    case Opcode::Pad: return simplifyPad(in);
    case Opcode::Reverse: return simplifyReverse(in);
    case Opcode::DynamicSlice: return simplifyDynamicSlice(in);
    case Opcode::ReduceWindow: return simplifyReduceWindow(in);
    default: return nullptr;
  }
}

namespace {

bool simplifyComputation(hlo::Computation& computation, const AlgsimpOptions& options) {
  Rewriter rw(computation);
  Simplifier simplifier(rw, options);
  std::deque<Instruction*> work;
  hlo::PointerIndex queued(computation.instructions().size());  // 1 while in `work`
  for (const auto& in : computation.instructions()) {
    work.push_back(in.get());
    queued.set(in.get(), 1);
  }
  auto requeue = [&](Instruction* i) {
    if (queued.find(i) == 1) return;
    queued.set(i, 1);
    work.push_back(i);
  };
  // Every rewrite removes or shrinks something, but a budget keeps a
  // rule pair that undoes itself from looping.
  int64_t budget = 8 * static_cast<int64_t>(computation.instructions().size()) + 1024;
  while (!work.empty() && budget-- > 0) {
    Instruction* in = work.front();
    work.pop_front();
    queued.set(in, 0);
    if (rw.userCount(in) == 0 && !rw.isRoot(in)) continue;  // dead: dce's business
    if (rw.hasControlEdges(in) || rw.hasSideEffect(in)) continue;
    std::vector<Instruction*> oldOperands(in->operands().begin(), in->operands().end());
    Instruction* replacement = simplifier.simplify(*in);
    if (!replacement) continue;
    if (replacement != in) {
      rw.replaceAllUses(in, replacement);
      requeue(replacement);
    }
    for (Instruction* user : rw.users(replacement)) requeue(user);
    // Operands may have become single-use, which some rules need.
    for (Instruction* op : replacement->operands()) requeue(op);
    for (Instruction* op : oldOperands) requeue(op);
  }
  return rw.finish();
}

}  // namespace

std::string_view AlgsimpPass::name() const {
  return options_.layoutSensitive ? "algsimp-layout" : (options_.valueChanging ? "algsimp-unsafe" : "algsimp");
}

bool AlgsimpPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  for (const auto& c : module.computations()) changed |= simplifyComputation(*c, options_);
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
