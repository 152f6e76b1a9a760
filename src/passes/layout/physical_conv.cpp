#include "passes/layout/physical_conv.h"

#include <fmt/format.h>

#include "hlo/computation.h"
#include "passes/clone.h"
#include "passes/layout/physical_layout.h"

namespace tpu::passes::layout {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

namespace {

bool convFloat(hlo::ElementType t) {
  const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
  return info.isFloat && !info.isComplex && info.byteSize <= 4 && info.bitWidth == info.byteSize * 8;
}

// The one convolution of `in` (itself, or the only one of an output fusion
// whose other work is elementwise on scalars, scalar broadcasts and
// parameters) and the fused computation it sits in (nullptr: unfused).
const Instruction* convolutionOf(const Instruction* in, const Computation*& body) {
  body = nullptr;
  if (in->opcode() == Opcode::Convolution) return in;
  if (in->opcode() != Opcode::Fusion || in->attrs().fusionKind != hlo::FusionKind::Output ||
      !in->fusedComputation())
    return nullptr;
  body = in->fusedComputation();
  const Instruction* conv = nullptr;
  for (const auto& up : body->instructions()) {
    const Instruction& i = *up;
    if (!i.shape().isArray() || !i.calledComputations().empty() || !i.controlPredecessors().empty() ||
        i.hasSideEffect())
      return nullptr;
    if (i.opcode() == Opcode::Convolution) {
      if (conv) return nullptr;
      conv = &i;
      continue;
    }
    if (i.opcode() == Opcode::Parameter || (i.opcode() == Opcode::Constant && i.shape().isScalar())) continue;
    if (i.opcode() == Opcode::Broadcast && i.operandCount() == 1 &&
        (i.operand(0)->shape().isScalar() || i.operand(0)->opcode() == Opcode::Parameter))
      continue;
    if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Constant) return nullptr;
  }
  return conv;
}

std::string freeComputationName(const hlo::Module& module, const std::string& base) {
  std::string name = base;
  for (int i = 1; module.findComputation(name); ++i) name = fmt::format("{}.{}", base, i);
  return name;
}

}  // namespace

bool convReadsInPlace(const Shape& shape, int64_t featureDimension) {
  if (!shape.isArray() || !shape.hasLayout() || shape.layout().tiles.empty() || featureDimension < 0 ||
      featureDimension >= shape.rank())
    return false;
  auto strides = physicalStrides(shape);
  return strides && (*strides)[static_cast<size_t>(featureDimension)] == 1;
}

ConvTwin physicalConvolution(hlo::Module& module, Computation& entry, Instruction* in,
                             const std::function<const PhysicalValue*(Instruction*)>& physicalOf,
                             const std::function<std::string(const std::string&)>& fresh) {
  if (!in->shape().isArray() || in->hasSideEffect() || !in->controlPredecessors().empty()) return {};
  const Computation* body = nullptr;
  const Instruction* conv = convolutionOf(in, body);
  if (!conv || conv->operandCount() != 2 || !conv->attrs().convDims) return {};
  const hlo::ConvolutionDimensionNumbers& dn = *conv->attrs().convDims;
  if (conv->attrs().featureGroupCount != 1 || conv->attrs().batchGroupCount != 1) return {};
  for (const Instruction* x :
       std::initializer_list<const Instruction*>{conv->operand(0), conv->operand(1), conv})
    if (!convFloat(x->shape().elementType())) return {};
  if (conv->shape().dimensions() != in->shape().dimensions()) return {};
  // The activations: a parameter (the epilogue may read it too: a residual).
  int64_t act = 0;
  if (body) {
    const Instruction* x = conv->operand(0);
    if (x->opcode() != Opcode::Parameter || conv->operand(1) == x) return {};
    act = x->attrs().parameterNumber;
  }
  if (act < 0 || act >= in->operandCount()) return {};
  // Fusion operands read through their layouts: the activations, then
  // epilogue inputs shaped like the result stored the way the result is.
  std::vector<const PhysicalValue*> phys(static_cast<size_t>(in->operandCount()), nullptr);
  auto physical = [&](int64_t i, int64_t feature) -> const PhysicalValue* {
    Instruction* o = in->operand(i);
    const PhysicalValue* pv = physicalOf(o);
    if (!pv || pv->value->shape().elementType() != o->shape().elementType() ||
        pv->key.dimensions() != o->shape().dimensions() ||
        !convReadsInPlace(withType(pv->key, o->shape().elementType()), feature))
      return nullptr;
    return pv;
  };
  phys[static_cast<size_t>(act)] = physical(act, dn.inputFeatureDimension);
  if (!phys[static_cast<size_t>(act)]) return {};
  // The kernel (the weight DMA takes any strides; output features
  // contiguous), tile inputs stored like the result, and vectors (bias
  // columns) whose physical form starts with their elements in order.
  const int64_t kernel =
      body
          ? (conv->operand(1)->opcode() == Opcode::Parameter ? conv->operand(1)->attrs().parameterNumber : -1)
          : 1;
  if (kernel >= 0 && kernel < in->operandCount() && kernel != act)
    phys[static_cast<size_t>(kernel)] = physical(kernel, dn.kernelOutputFeatureDimension);
  if (body)
    for (int64_t i = 0; i < in->operandCount(); ++i) {
      const Shape& s = in->operand(i)->shape();
      if (i == act || i == kernel || !body->parameter(i)) continue;
      if (s.dimensions() == in->shape().dimensions())
        phys[static_cast<size_t>(i)] = physical(i, dn.outputFeatureDimension);
      else if (s.rank() == 1)
        phys[static_cast<size_t>(i)] = physical(i, 0);
    }
  ConvTwin out;
  out.physicalResult = in->shape().hasLayout() && convReadsInPlace(in->shape(), dn.outputFeatureDimension);

  // The fused computation: the original one (or the lone convolution) with
  // physical parameters, each bitcast to the logical shape it stores.
  Computation* c = nullptr;
  if (body) {
    c = cloneComputation(module, *body, freeComputationName(module, body->name() + ".tiles"), "");
  } else {
    c = module.addComputation(freeComputationName(module, in->name() + ".tiles"));
    Instruction* cv = c->addInstruction(Opcode::Convolution, in->name(), in->shape());
    for (int64_t i = 0; i < 2; ++i) {
      Instruction* p = c->addInstruction(Opcode::Parameter, fmt::format("{}.param.{}", in->name(), i),
                                         in->operand(i)->shape());
      p->attrs().parameterNumber = i;
      cv->addOperand(p);
    }
    cv->attrs() = in->attrs();
    cv->common() = in->common();
    cv->setLocation(in->location());
    c->setRoot(cv);
  }
  for (const auto& up : c->instructions()) up->setName(fresh(up->name() + ".tiles"));
  for (int64_t i = 0; i < in->operandCount(); ++i) {
    const PhysicalValue* pv = phys[static_cast<size_t>(i)];
    Instruction* p = c->parameter(i);
    if (!pv || !p) continue;
    const hlo::ElementType t = p->shape().elementType();
    p->setShape(Shape(t, pv->value->shape().dimensions()).withDefaultLayout());
    Instruction* b = c->addInstruction(Opcode::Bitcast, fresh(p->name() + ".view"), withType(pv->key, t));
    b->addOperand(p);
    for (const auto& up : c->instructions())
      for (int64_t k = 0; k < up->operandCount(); ++k)
        if (up.get() != b && up->operand(k) == p) up->setOperand(k, b);
  }
  Shape result = in->shape();
  if (out.physicalResult) {
    Instruction* r = c->root();
    r->setShape(in->shape());
    result = Shape(in->shape().elementType(), *physicalDims(in->shape())).withDefaultLayout();
    Instruction* rb = c->addInstruction(Opcode::Bitcast, fresh(r->name() + ".physical"), result);
    rb->addOperand(r);
    c->setRoot(rb);
  }
  c->sortTopologically();

  Instruction* twin = entry.addInstruction(Opcode::Fusion, fresh(in->name() + ".physical"), result);
  if (body) twin->attrs() = in->attrs();
  twin->attrs().fusionKind = hlo::FusionKind::Output;
  twin->common() = in->common();
  twin->setLocation(in->location());
  for (int64_t i = 0; i < in->operandCount(); ++i) {
    const PhysicalValue* pv = phys[static_cast<size_t>(i)];
    twin->addOperand(pv ? pv->value : in->operand(i));
  }
  twin->addCalledComputation(c);
  out.twin = twin;
  return out;
}

}  // namespace tpu::passes::layout
