#include "hlo/analysis/cost_analysis.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "hlo/computation.h"

namespace tpu::hlo {

namespace {

double elements(const Shape& shape) {
  if (shape.isTuple()) {
    double total = 0;
    for (const Shape& e : shape.tupleElements()) total += elements(e);
    return total;
  }
  if (!shape.isArray()) return 0;
  double n = 1;
  for (int64_t d : shape.dimensions()) n *= d == kUnboundedSize ? 1 : static_cast<double>(d);
  return n;
}

double bytes(const Shape& shape) {
  if (shape.isTuple()) {
    double total = 0;
    for (const Shape& e : shape.tupleElements()) total += bytes(e);
    return total;
  }
  if (!shape.isArray()) return 0;
  return elements(shape) * elementTypeInfo(shape.elementType()).byteSize;
}

bool isTranscendental(Opcode op) {
  switch (op) {
    case Opcode::Exp: case Opcode::Expm1: case Opcode::Log: case Opcode::Log1p: case Opcode::Logistic:
    case Opcode::Tanh: case Opcode::Sqrt: case Opcode::Rsqrt: case Opcode::Cbrt: case Opcode::Power:
    case Opcode::Sin: case Opcode::Cos: case Opcode::Tan: case Opcode::Atan2: case Opcode::Erf:
      return true;
    default:
      return false;
  }
}

// Instructions that only alias or regroup buffers move no data (reshape and
// copy may, under layouts); the ids read a register of the chip.
bool movesNoData(Opcode op) {
  return isBufferStructure(op) || isAlias(op) || op == Opcode::PartitionId || op == Opcode::ReplicaId;
}

// Flops of the instruction itself (not its operands' production).
Cost ownCost(const Instruction& instr) {
  Cost cost;
  const Shape& shape = instr.shape();
  Opcode op = instr.opcode();
  if (isElementwise(op)) {
    double n = elements(shape);
    cost.flops = n;
    if (isTranscendental(op)) cost.transcendentals = n;
    return cost;
  }
  switch (op) {
    case Opcode::Dot: {
      if (instr.operandCount() < 1) break;
      const Shape& lhs = instr.operand(0)->shape();
      double contracted = 1;
      for (int64_t d : instr.attrs().dotDims->lhsContractingDimensions)
        if (lhs.isArray() && d >= 0 && d < lhs.rank()) contracted *= static_cast<double>(lhs.dimension(d));
      cost.flops = 2 * elements(shape) * contracted;
      break;
    }
    case Opcode::Convolution: {
      if (instr.operandCount() < 2 || !instr.attrs().convDims) break;
      const Shape& kernel = instr.operand(1)->shape();
      const ConvolutionDimensionNumbers& dn = *instr.attrs().convDims;
      if (!kernel.isArray()) break;
      double perOutput = 1;
      for (int64_t d : dn.kernelSpatialDimensions)
        if (d >= 0 && d < kernel.rank()) perOutput *= static_cast<double>(kernel.dimension(d));
      int64_t kif = dn.kernelInputFeatureDimension;
      if (kif >= 0 && kif < kernel.rank()) perOutput *= static_cast<double>(kernel.dimension(kif));
      cost.flops = 2 * elements(shape) * perOutput;
      break;
    }
    case Opcode::Reduce: case Opcode::ReduceWindow: case Opcode::AllReduce: case Opcode::ReduceScatter: {
      // One application of the reducer per input element, times the reducer's own flops.
      double reducerFlops = 1;
      if (Computation* reducer = instr.toApply()) reducerFlops = std::max(1.0, computationCost(*reducer).flops);
      double inputs = 0;
      int64_t half = op == Opcode::Reduce ? instr.operandCount() / 2 : instr.operandCount();
      for (int64_t i = 0; i < half; ++i) inputs += elements(instr.operand(i)->shape());
      if (op == Opcode::ReduceWindow && instr.attrs().window) {
        double windowSize = 1;
        for (const auto& d : instr.attrs().window->dimensions) windowSize *= static_cast<double>(d.size);
        inputs = elements(shape) * windowSize;
      }
      cost.flops = inputs * reducerFlops;
      break;
    }
    default:
      break;
  }
  return cost;
}

}  // namespace

Cost instructionCost(const Instruction& instr) {
  Cost cost = ownCost(instr);
  Opcode op = instr.opcode();
  // Called computations: fused bodies contribute flops only (their
  // intermediates stay on chip); loops, calls and branches contribute both.
  for (const Computation* called : instr.calledComputations()) {
    if (op == Opcode::Reduce || op == Opcode::ReduceWindow || op == Opcode::AllReduce ||
        op == Opcode::ReduceScatter || op == Opcode::Sort || op == Opcode::Scatter || op == Opcode::SelectAndScatter ||
        op == Opcode::Map)
      continue;  // reducers/comparators are per element, counted in ownCost or not at all
    Cost inner = computationCost(*called);
    if (op == Opcode::Fusion) inner.bytesAccessed = 0;
    cost += inner;
  }
  if (!movesNoData(op) && !isControlFlow(op)) {
    for (const Instruction* operand : instr.operands()) cost.bytesAccessed += bytes(operand->shape());
    cost.bytesAccessed += bytes(instr.shape());
  }
  return cost;
}

Cost computationCost(const Computation& computation) {
  Cost total;
  for (const auto& instr : computation.instructions()) total += instructionCost(*instr);
  return total;
}

ModuleStats computeModuleStats(const Module& module) {
  ModuleStats stats;
  stats.computations = static_cast<int64_t>(module.computations().size());
  for (const auto& computation : module.computations()) {
    for (const auto& instr : computation->instructions()) {
      ++stats.instructions;
      ++stats.opcodeCounts[std::string(opcodeName(instr->opcode()))];
      if (instr->opcode() == Opcode::Constant) stats.constantBytes += static_cast<int64_t>(bytes(instr->shape()));
    }
  }
  if (const Computation* entry = module.entry()) {
    for (const Instruction* p : entry->parameters())
      if (p) stats.parameterBytes += static_cast<int64_t>(bytes(p->shape()));
    if (entry->root()) stats.resultBytes = static_cast<int64_t>(bytes(entry->root()->shape()));
    stats.entryCost = computationCost(*entry);
  }
  return stats;
}

std::string formatModuleStatsText(const ModuleStats& s, const std::string& moduleName) {
  std::string out = fmt::format("module: {}\ncomputations: {}\ninstructions: {}\n", moduleName, s.computations,
                                s.instructions);
  out += fmt::format("parameter bytes: {}\nconstant bytes: {}\nresult bytes: {}\n", s.parameterBytes,
                     s.constantBytes, s.resultBytes);
  out += fmt::format("entry flops: {:.0f}\nentry transcendentals: {:.0f}\nentry bytes accessed: {:.0f}\n",
                     s.entryCost.flops, s.entryCost.transcendentals, s.entryCost.bytesAccessed);
  out += "instructions by opcode:\n";
  for (const auto& [name, count] : s.opcodeCounts) out += fmt::format("  {:<24} {}\n", name, count);
  return out;
}

std::string formatModuleStatsJson(const ModuleStats& s, const std::string& moduleName) {
  nlohmann::ordered_json j;
  j["module"] = moduleName;
  j["computations"] = s.computations;
  j["instructions"] = s.instructions;
  j["parameter_bytes"] = s.parameterBytes;
  j["constant_bytes"] = s.constantBytes;
  j["result_bytes"] = s.resultBytes;
  j["entry_flops"] = s.entryCost.flops;
  j["entry_transcendentals"] = s.entryCost.transcendentals;
  j["entry_bytes_accessed"] = s.entryCost.bytesAccessed;
  nlohmann::ordered_json ops = nlohmann::ordered_json::object();
  for (const auto& [name, count] : s.opcodeCounts) ops[name] = count;
  j["opcodes"] = ops;
  return j.dump(2) + "\n";
}

}  // namespace tpu::hlo
