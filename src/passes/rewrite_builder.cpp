#include "passes/rewrite_builder.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpu::passes {

namespace {
// New arrays get the default (row-major) layout, as parsed ones have.
hlo::Shape arrayShape(hlo::ElementType t, std::vector<int64_t> dims) {
  return hlo::Shape::array(t, std::move(dims)).withDefaultLayout();
}
}  // namespace

using hlo::Computation;
using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

std::set<std::string> instructionNames(const hlo::Module& module) {
  std::set<std::string> names;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions()) names.insert(in->name());
  return names;
}

RewriteBuilder::RewriteBuilder(Computation& computation, const Instruction& original,
                               std::set<std::string>& names)
    : computation_(computation), base_(original.name()), location_(original.location()), names_(names) {}

RewriteBuilder::RewriteBuilder(Computation& computation, std::string baseName, SourceLocation location,
                               std::set<std::string>& names)
    : computation_(computation), base_(std::move(baseName)), location_(location), names_(names) {}

std::string RewriteBuilder::freshName(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = fmt::format("{}.{}", base, i);
  names_.insert(name);
  return name;
}

Instruction* RewriteBuilder::add(Opcode opcode, Shape shape, std::vector<Instruction*> operands) {
  Instruction* in = computation_.addInstruction(
      opcode, freshName(fmt::format("{}.{}", base_, hlo::opcodeName(opcode))), std::move(shape));
  in->setOperands(std::span<Instruction* const>(operands.data(), operands.size()));
  in->setLocation(location_);
  return in;
}

Instruction* RewriteBuilder::convert(Instruction* x, ElementType t) {
  if (x->shape().elementType() == t) return x;
  return add(Opcode::Convert, arrayShape(t, x->shape().dimensions()), {x});
}

Instruction* RewriteBuilder::scalarConstant(ElementType t, double value) {
  Instruction* c = add(Opcode::Constant, Shape::scalar(t).withDefaultLayout(), {});
  hlo::Literal l(Shape::scalar(t).withDefaultLayout());
  l.setDouble(0, value);
  c->attrs().literal = std::move(l);
  return c;
}

Instruction* RewriteBuilder::broadcast(Instruction* x, const Shape& shape, std::vector<int64_t> dims) {
  Instruction* b = add(Opcode::Broadcast, arrayShape(x->shape().elementType(), shape.dimensions()), {x});
  b->attrs().dimensions = std::move(dims);
  return b;
}

Instruction* RewriteBuilder::binary(Opcode opcode, Instruction* a, Instruction* b) {
  return add(opcode, arrayShape(a->shape().elementType(), a->shape().dimensions()), {a, b});
}

Instruction* RewriteBuilder::unary(Opcode opcode, Instruction* x) {
  return add(opcode, arrayShape(x->shape().elementType(), x->shape().dimensions()), {x});
}

Instruction* RewriteBuilder::compare(Instruction* a, Instruction* b, hlo::ComparisonDirection direction,
                                     hlo::ComparisonType type) {
  Instruction* c = add(Opcode::Compare, arrayShape(ElementType::Pred, a->shape().dimensions()), {a, b});
  c->attrs().comparisonDirection = direction;
  c->attrs().comparisonType = type;
  return c;
}

Instruction* RewriteBuilder::reduce(Instruction* x, Instruction* init, std::vector<int64_t> dims,
                                    Computation* reducer) {
  std::vector<int64_t> kept;
  const std::vector<int64_t>& xd = x->shape().dimensions();
  for (int64_t d = 0; d < static_cast<int64_t>(xd.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(xd[static_cast<size_t>(d)]);
  Instruction* r = add(Opcode::Reduce, arrayShape(x->shape().elementType(), kept), {x, init});
  r->attrs().dimensions = std::move(dims);
  r->setCalledComputations({reducer});
  return r;
}

Instruction* RewriteBuilder::getTupleElement(Instruction* tuple, int64_t index) {
  Instruction* g = add(Opcode::GetTupleElement, tuple->shape().tupleElement(index), {tuple});
  g->attrs().tupleIndex = index;
  return g;
}

Instruction* RewriteBuilder::slice(Instruction* x, std::vector<hlo::SliceDimension> slice) {
  std::vector<int64_t> dims;
  for (const hlo::SliceDimension& s : slice) dims.push_back((s.limit - s.start + s.stride - 1) / s.stride);
  Instruction* r = add(Opcode::Slice, arrayShape(x->shape().elementType(), dims), {x});
  r->attrs().slice = std::move(slice);
  return r;
}

Instruction* RewriteBuilder::tuple(std::vector<Instruction*> elements) {
  std::vector<Shape> shapes;
  for (const Instruction* e : elements) shapes.push_back(e->shape());
  return add(Opcode::Tuple, Shape::tuple(std::move(shapes)), std::move(elements));
}

Computation* RewriteBuilder::scalarComputation(
    const std::string& base, const std::vector<ElementType>& types,
    const std::function<Instruction*(RewriteBuilder&, const std::vector<Instruction*>&)>& body) {
  hlo::Module& module = *computation_.parent();
  Computation* c = module.addComputation(module.uniqueComputationName(base));
  c->setLocation(location_);
  std::vector<Instruction*> params;
  for (size_t i = 0; i < types.size(); ++i) {
    Instruction* p = c->addInstruction(Opcode::Parameter, freshName(fmt::format("{}.p{}", c->name(), i)),
                                       Shape::scalar(types[i]).withDefaultLayout());
    p->attrs().parameterNumber = static_cast<int64_t>(i);
    p->setLocation(location_);
    params.push_back(p);
  }
  RewriteBuilder inner(*c, c->name(), location_, names_);
  c->setRoot(body(inner, params));
  return c;
}

void replaceInstruction(Instruction* old, Instruction* replacement) {
  Computation& c = *old->parent();
  for (const auto& up : c.instructions()) {
    Instruction* in = up.get();
    if (in == old) continue;
    for (int64_t i = 0; i < in->operandCount(); ++i)
      if (in->operand(i) == old) in->setOperand(i, replacement);
    std::vector<Instruction*> preds = in->controlPredecessors();
    bool changed = false;
    for (Instruction*& p : preds)
      if (p == old) p = replacement, changed = true;
    if (changed) in->setControlPredecessors(std::move(preds));
  }
  // The replacement inherits the old instruction's own control edges.
  for (Instruction* p : old->controlPredecessors()) replacement->addControlPredecessor(p);
  bool wasRoot = c.root() == old;
  c.removeInstruction(old);
  if (wasRoot) c.setRoot(replacement);
}

bool expandEach(hlo::Module& module, const std::function<bool(const Instruction&)>& matches,
                const std::function<Instruction*(RewriteBuilder&, Instruction&)>& expand) {
  std::set<std::string> names;
  bool namesKnown = false, changed = false;
  std::vector<hlo::Computation*> computations;
  for (const auto& c : module.computations()) computations.push_back(c.get());
  for (hlo::Computation* c : computations) {
    std::vector<Instruction*> found;
    for (const auto& in : c->instructions())
      if (matches(*in)) found.push_back(in.get());
    for (Instruction* in : found) {
      if (!namesKnown) names = instructionNames(module), namesKnown = true;
      RewriteBuilder b(*c, *in, names);
      Instruction* replacement = expand(b, *in);
      if (!replacement) {
        if (changed) c->sortTopologically();
        return changed;
      }
      replaceInstruction(in, replacement);
      changed = true;
    }
    if (!found.empty()) c->sortTopologically();
  }
  return changed;
}

}  // namespace tpu::passes
