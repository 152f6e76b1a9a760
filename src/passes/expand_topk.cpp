#include "passes/expand_topk.h"

#include <fmt/format.h>

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

bool isTopK(const Instruction& in) {
  if (in.opcode() == Opcode::TopK) return true;
  return in.opcode() == Opcode::CustomCall && in.attrs().customCallTarget == "TopK";
}

// (values, indices) of the k largest (or smallest) along the last dimension.
Instruction* expand(RewriteBuilder& b, Instruction* x, int64_t k, bool largest) {
  const Shape& xs = x->shape();
  ElementType t = xs.elementType();
  int64_t last = xs.rank() - 1;
  Instruction* key = nullptr;
  if (t != ElementType::F64) {
    Instruction* part = x;
    if (hlo::isComplexType(t))
      part = b.add(Opcode::Real,
                   Shape::array(hlo::complexComponentType(t), xs.dimensions()).withDefaultLayout(), {x});
    key = b.convert(part, ElementType::F64);
  }
  Instruction* index =
      b.add(Opcode::Iota, Shape::array(ElementType::S32, xs.dimensions()).withDefaultLayout(), {});
  index->attrs().iotaDimension = last;
  std::vector<Instruction*> operands;
  std::vector<ElementType> params;
  if (key) operands.push_back(key);
  operands.push_back(x);
  operands.push_back(index);
  std::vector<Shape> shapes;
  for (Instruction* o : operands) {
    shapes.push_back(o->shape());
    params.push_back(o->shape().elementType());
    params.push_back(o->shape().elementType());
  }
  hlo::Computation* order = b.scalarComputation(
      largest ? "topk.greater" : "topk.less", params,
      [&](RewriteBuilder& cb, const std::vector<Instruction*>& p) {
        return cb.compare(p[0], p[1], largest ? hlo::ComparisonDirection::GT : hlo::ComparisonDirection::LT,
                          hlo::ComparisonType::TotalOrder);
      });
  Instruction* sorted = b.add(Opcode::Sort, Shape::tuple(std::move(shapes)), operands);
  sorted->attrs().dimensions = {last};
  sorted->attrs().isStable = true;
  sorted->setCalledComputations({order});
  std::vector<hlo::SliceDimension> firstK;
  for (int64_t d = 0; d <= last; ++d) firstK.push_back({0, d == last ? k : xs.dimension(d), 1});
  int64_t valueIndex = key ? 1 : 0;
  Instruction* values = b.slice(b.getTupleElement(sorted, valueIndex), firstK);
  Instruction* indices = b.slice(b.getTupleElement(sorted, valueIndex + 1), firstK);  // after values
  return b.tuple({values, indices});
}

}  // namespace

bool ExpandTopKPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  return expandEach(module, isTopK, [&](RewriteBuilder& b, Instruction& in) -> Instruction* {
    const Shape& s = in.shape();
    if (in.operandCount() != 1 || !in.operand(0)->shape().isArray() || in.operand(0)->shape().rank() < 1 ||
        !s.isTuple() || s.tupleSize() != 2 || !s.tupleElement(0).isArray() ||
        s.tupleElement(0).rank() != in.operand(0)->shape().rank() ||
        s.tupleElement(1).elementType() != ElementType::S32) {
      diags.error(in.location(), fmt::format("expand-topk: '{}' must take one array and return (values, s32 "
                                             "indices) of its rank",
                                             in.name()));
      return nullptr;
    }
    const Shape& xs = in.operand(0)->shape();
    // The custom call's k is the size of its results' last dimension.
    int64_t k = in.opcode() == Opcode::TopK ? in.attrs().k : s.tupleElement(0).dimensions().back();
    bool largest = in.opcode() == Opcode::TopK ? in.attrs().largest : true;
    if (k < 0 || k > xs.dimensions().back()) {
      diags.error(in.location(), fmt::format("expand-topk: k={} of '{}' is out of range", k, in.name()));
      return nullptr;
    }
    return expand(b, in.operand(0), k, largest);
  });
}

}  // namespace tpu::passes
