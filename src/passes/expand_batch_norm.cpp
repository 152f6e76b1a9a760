#include "passes/expand_batch_norm.h"

#include <fmt/format.h>

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

bool isBatchNorm(Opcode op) {
  return op == Opcode::BatchNormInference || op == Opcode::BatchNormTraining || op == Opcode::BatchNormGrad;
}

class Expander {
 public:
  Expander(RewriteBuilder& b, const Instruction& in) : b_(b), in_(in) {}

  Instruction* run() {
    Instruction* x = in_.operand(0);
    const Shape& xs = x->shape();
    type_ = xs.elementType();
    feature_ = in_.attrs().featureIndex;
    int64_t features = xs.dimension(feature_);
    int64_t count = *xs.elementCount();
    double m = features > 0 ? static_cast<double>(count / features) : 1.0;
    for (int64_t d = 0; d < xs.rank(); ++d)
      if (d != feature_) reduced_.push_back(d);
    x_ = b_.convert(x, ElementType::F64);
    shape_ = x_->shape();
    Shape perFeature = Shape::array(ElementType::F64, {features}).withDefaultLayout();
    m_ = b_.broadcast(b_.scalarConstant(ElementType::F64, m), perFeature, {});
    eps_ = b_.broadcast(b_.scalarConstant(ElementType::F64, static_cast<double>(in_.attrs().epsilon)),
                        perFeature, {});
    add_ = b_.scalarComputation("batch_norm.add", {ElementType::F64, ElementType::F64},
                                [](RewriteBuilder& cb, const std::vector<Instruction*>& p) {
                                  return cb.binary(Opcode::Add, p[0], p[1]);
                                });
    zero_ = b_.scalarConstant(ElementType::F64, 0.0);
    // (One builder call per statement: the order of the new instructions
    // must not depend on the compiler's order of evaluating arguments.)
    switch (in_.opcode()) {
      case Opcode::BatchNormInference: {
        Instruction* scale = operand(1);
        Instruction* offset = operand(2);
        Instruction* mean = operand(3);
        Instruction* var = operand(4);
        Instruction* centered = sub(x_, perElement(mean));
        return b_.convert(normalize(scale, offset, centered, var), type_);
      }
      case Opcode::BatchNormTraining: {
        Instruction* scale = operand(1);
        Instruction* offset = operand(2);
        Instruction* mean = divide(sum(x_), m_);
        Instruction* centered = sub(x_, perElement(mean));
        Instruction* squares = mul(centered, centered);
        Instruction* var = divide(sum(squares), m_);
        Instruction* y = b_.convert(normalize(scale, offset, centered, var), type_);
        Instruction* meanOut = b_.convert(mean, type_);
        Instruction* varOut = b_.convert(var, type_);
        return b_.tuple({y, meanOut, varOut});
      }
      default: {
        Instruction* scale = operand(1);
        Instruction* mean = operand(2);
        Instruction* var = operand(3);
        Instruction* g = operand(4);
        Instruction* centered = sub(x_, perElement(mean));
        Instruction* sumG = sum(g);
        Instruction* sumGX = sum(mul(g, centered));
        Instruction* varEps = add(var, eps_);
        Instruction* root = b_.unary(Opcode::Sqrt, varEps);
        Instruction* gradScale = divide(sumGX, root);
        // g - sum(g) / m - (x - mean) * sum(g (x - mean)) / (m (var + eps))
        Instruction* meanG = perElement(divide(sumG, m_));
        Instruction* first = sub(g, meanG);
        Instruction* numerator = mul(centered, perElement(sumGX));
        Instruction* denominator = perElement(mul(m_, varEps));
        Instruction* inner = sub(first, divide(numerator, denominator));
        Instruction* factor = perElement(divide(scale, root));
        Instruction* gradX = b_.convert(mul(factor, inner), type_);
        Instruction* gradScaleOut = b_.convert(gradScale, type_);
        Instruction* gradOffsetOut = b_.convert(sumG, type_);
        return b_.tuple({gradX, gradScaleOut, gradOffsetOut});
      }
    }
  }

 private:
  Instruction* operand(int64_t i) { return b_.convert(in_.operand(i), ElementType::F64); }
  Instruction* perElement(Instruction* v) { return b_.broadcast(v, shape_, {feature_}); }
  Instruction* sum(Instruction* v) { return b_.reduce(v, zero_, reduced_, add_); }
  Instruction* add(Instruction* a, Instruction* b) { return b_.binary(Opcode::Add, a, b); }
  Instruction* sub(Instruction* a, Instruction* b) { return b_.binary(Opcode::Subtract, a, b); }
  Instruction* mul(Instruction* a, Instruction* b) { return b_.binary(Opcode::Multiply, a, b); }
  Instruction* divide(Instruction* a, Instruction* b) { return b_.binary(Opcode::Divide, a, b); }
  // scale * (x - mean) / sqrt(var + eps) + offset, per element, from
  // centered = x - mean.
  Instruction* normalize(Instruction* scale, Instruction* offset, Instruction* centered, Instruction* var) {
    Instruction* root = b_.unary(Opcode::Sqrt, add(var, eps_));
    Instruction* scaled = mul(perElement(scale), centered);
    Instruction* quotient = divide(scaled, perElement(root));
    return add(quotient, perElement(offset));
  }

  RewriteBuilder& b_;
  const Instruction& in_;
  ElementType type_ = ElementType::F32;
  int64_t feature_ = 0;
  std::vector<int64_t> reduced_;
  Instruction* x_ = nullptr;
  Shape shape_;
  Instruction *m_ = nullptr, *eps_ = nullptr, *zero_ = nullptr;
  hlo::Computation* add_ = nullptr;
};

}  // namespace

bool ExpandBatchNormPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  auto matches = [](const Instruction& in) { return isBatchNorm(in.opcode()); };
  return expandEach(module, matches, [&](RewriteBuilder& b, Instruction& in) -> Instruction* {
    size_t want = in.opcode() == Opcode::BatchNormTraining ? 3 : 5;
    bool ok = static_cast<size_t>(in.operandCount()) == want;
    for (int64_t i = 0; ok && i < in.operandCount(); ++i)
      ok = in.operand(i)->shape().isArray() && hlo::isFloatType(in.operand(i)->shape().elementType()) &&
           !hlo::isComplexType(in.operand(i)->shape().elementType());
    const Shape* xs = ok ? &in.operand(0)->shape() : nullptr;
    int64_t f = in.attrs().featureIndex;
    ok = ok && f >= 0 && f < xs->rank();
    for (int64_t i = 1; ok && i < in.operandCount(); ++i) {
      const Shape& s = in.operand(i)->shape();
      bool full = in.opcode() == Opcode::BatchNormGrad && i == 4;
      ok = full ? s.dimensions() == xs->dimensions() : s.rank() == 1 && s.dimension(0) == xs->dimension(f);
    }
    if (!ok) {
      diags.error(in.location(), fmt::format("expand-batch-norm: '{}' needs real float operands: an array, "
                                             "per-feature vectors and a feature_index in range",
                                             in.name()));
      return nullptr;
    }
    return Expander(b, in).run();
  });
}

}  // namespace tpu::passes
