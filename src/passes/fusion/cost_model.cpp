#include "passes/fusion/cost_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "hlo/analysis/cost_analysis.h"
#include "passes/fusion/rules.h"
#include "passes/sink_views.h"

namespace tpu::fusion {

using hlo::Instruction;
using hlo::Opcode;

double shapeBytes(const hlo::Shape& shape) {
  if (shape.isTuple()) {
    double total = 0;
    for (const hlo::Shape& e : shape.tupleElements()) total += shapeBytes(e);
    return total;
  }
  if (!shape.isArray()) return 0;
  auto n = shape.elementCount();
  return n ? static_cast<double>(*n) * hlo::elementTypeInfo(shape.elementType()).byteSize : 0;
}

std::string formatBytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}


CostModel::CostModel(target::TargetDesc target, double sectionLatency)
    : target_(std::move(target)), sectionLatency_(sectionLatency), classifier_(target_, codegen_) {}

double CostModel::vmemCapacity() const {
  const double vmem = static_cast<double>(target_.memory.vmemBytes);
  return vmem - vmem * codegen_.vmemFraction;
}

KernelEstimate CostModel::instruction(const Instruction& in) const {
  KernelEstimate e;
  if (movesNoData(in) || hlo::isControlFlow(in.opcode())) {
    e.isKernel = false;
    return e;
  }
  e.flops = hlo::instructionCost(in).flops;
  const double result = shapeBytes(in.shape());
  switch (in.opcode()) {
    // The kernels read only the elements they keep (and their indices),
    // and a dynamic-update-slice copies its operand before updating it.
    case Opcode::Slice: case Opcode::DynamicSlice: case Opcode::Gather:
      e.hbmBytes = 2 * result;
      for (int64_t k = 1; k < in.operandCount(); ++k) e.hbmBytes += shapeBytes(in.operand(k)->shape());
      break;
    case Opcode::DynamicUpdateSlice:
      e.hbmBytes = 2 * result;
      break;
    default:
      e.hbmBytes = result;
      for (const Instruction* o : in.operands()) e.hbmBytes += shapeBytes(o->shape());
  }
  e.cycles = target::kernelCycles(target_, e.flops, e.hbmBytes);
  return e;
}

KernelEstimate CostModel::estimate(const FusionGraph& graph, const std::vector<int32_t>& members,
                                   const std::vector<int32_t>& outputs) const {
  if (members.size() == 1 && graph.instruction(members[0])->opcode() != Opcode::Fusion)
    return instruction(*graph.instruction(members[0]));
  return fusion(graph, members, outputs);
}

KernelEstimate CostModel::fusion(const FusionGraph& graph, const std::vector<int32_t>& members,
                                 const std::vector<int32_t>& outputs) const {
  KernelEstimate e;
  e.isFusion = true;
  // The candidate, built aside as llo-gen will see it (views sunk).
  hlo::Module scratch("candidate");
  BuiltFusion built = buildFusedComputation(scratch, graph, members, outputs, "fused_computation", nullptr);
  hlo::Computation* holder = scratch.addComputation("holder");
  Instruction* f = holder->addInstruction(Opcode::Fusion, "fusion", built.computation->root()->shape());
  f->addCalledComputation(built.computation);
  holder->setRoot(f);
  scratch.setEntry(holder);
  // llo-gen sinks views of computed values before it classifies; only
  // candidates that have such views need the pass.
  bool viewsOfValues = false;
  for (const auto& up : built.computation->instructions()) {
    Opcode op = up->opcode();
    if (hlo::isView(op) &&
        up->operand(0)->opcode() != Opcode::Parameter && !up->operand(0)->shape().isScalar())
      viewsOfValues = true;
  }
  DiagnosticEngine quiet;
  if (viewsOfValues) passes::SinkViewsPass().run(scratch, quiet);
  e.lowering = classifier_.classify(*f);

  // Work as llo-gen runs it: sinking a broadcast recomputes its chain per element.
  e.flops = hlo::computationCost(*built.computation).flops;
  for (int32_t p : built.parameters) e.hbmBytes += shapeBytes(graph.instruction(p)->shape());
  for (int32_t o : outputs) e.hbmBytes += shapeBytes(graph.instruction(o)->shape());
  if (e.lowering == codegen::FusionLowering::Resident) {
    e.sections = std::max<int64_t>(1, codegen::residentSections(*built.computation));
    for (int32_t m : members) {
      const Instruction& i = *graph.instruction(m);
      if (std::binary_search(outputs.begin(), outputs.end(), m) || movesNoData(i) || i.shape().isScalar()) continue;
      e.intermediateBytes += shapeBytes(i.shape());
    }
    if (e.intermediateBytes > vmemCapacity())
      e.refusal = fmt::format("working set {} exceeds the {} VMEM budget", formatBytes(e.intermediateBytes),
                              formatBytes(vmemCapacity()));
  }
  e.cycles = target::kernelCycles(target_, e.flops, e.hbmBytes,
                                  1 + sectionLatency_ * static_cast<double>(e.sections - 1));
  return e;
}

}  // namespace tpu::fusion
