// constant-folding: instructions of constant operands evaluated by the
// reference interpreter (so a folded result is bit-identical to what the
// interpreter computes at run time).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "eval/evaluator.h"
#include "hlo/module.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;

namespace {

// A result this small is folded even when it is larger than the constants
// it comes from (a broadcast scalar added to a small vector, say).
constexpr int64_t kAlwaysFoldElements = 1024;

bool isArray(const hlo::Shape& s) { return s.isArray() && !s.isDynamic(); }

int64_t elements(const hlo::Shape& s) { return s.elementCount().value_or(INT64_MAX); }

bool isDataConstant(const Instruction& i) {
  return i.opcode() == Opcode::Constant && i.attrs().literal && !i.attrs().literal->isElided() &&
         isArray(i.shape());
}

// Ops never folded: they are cheap to keep (broadcast, iota: folding only
// makes the module larger), have effects or state, or are control flow.
bool neverFolded(const Instruction& i) {
  const Opcode op = i.opcode();
  if (hlo::isBufferStructure(op) || hlo::isBarrier(op) || hlo::isControlFlow(op)) return true;
  switch (op) {
    case Opcode::Broadcast:
    case Opcode::Iota:
    case Opcode::Rng:
    case Opcode::RngBitGenerator:
    case Opcode::RngGetAndUpdateState:
    case Opcode::CustomCall:
    case Opcode::Fft:
    case Opcode::Fusion:
    case Opcode::ReplicaId:
    case Opcode::PartitionId:
    case Opcode::GetDimensionSize:
    case Opcode::SetDimensionSize:
      return true;
    default:
      return hlo::isAsyncStart(i.opcode()) || hlo::isAsyncDone(i.opcode());
  }
}

class Folder {
 public:
  Folder(Rewriter& rw, const ConstantFoldingOptions& options) : rw_(rw), options_(options) {}

  // The constant `in` evaluates to, added to the computation, or null.
  Instruction* fold(Instruction& in) {
    if (neverFolded(in) || !isArray(in.shape()) || rw_.hasControlEdges(&in) || rw_.hasSideEffect(&in)) return nullptr;
    if (in.operandCount() == 0 || elements(in.shape()) > options_.maxElements) return nullptr;
    std::vector<const Literal*> operands;
    int64_t sourceElements = 0;
    for (Instruction* op : in.operands()) {
      const Literal* value = valueOf(*op, &sourceElements);
      if (!value) return nullptr;
      operands.push_back(value);
    }
    if (elements(in.shape()) > std::max(sourceElements, kAlwaysFoldElements)) return nullptr;
    DiagnosticEngine quiet;  // an op the interpreter cannot evaluate simply stays
    std::optional<Literal> result = eval::evaluateInstruction(in, operands, quiet);
    if (!result || quiet.hasErrors() || !result->shape().compatible(in.shape())) return nullptr;
    result->mutableShapeLayoutOnly() = in.shape();
    return rw_.addConstant(std::move(*result), "constant", in.location());
  }

 private:
  // The value of an operand that is a constant, or a broadcast or iota of
  // constants (evaluated here, not kept in the module); `sourceElements`
  // grows to the largest constant seen.
  const Literal* valueOf(Instruction& op, int64_t* sourceElements) {
    if (isDataConstant(op)) {
      *sourceElements = std::max(*sourceElements, elements(op.shape()));
      return &*op.attrs().literal;
    }
    if ((op.opcode() != Opcode::Broadcast && op.opcode() != Opcode::Iota) || !isArray(op.shape()) ||
        elements(op.shape()) > options_.maxElements)
      return nullptr;
    auto it = expanded_.find(&op);
    if (it != expanded_.end()) return it->second ? &*it->second : nullptr;
    std::optional<Literal>& slot = expanded_[&op];
    std::vector<const Literal*> inputs;
    int64_t ignored = 0;
    if (op.opcode() == Opcode::Broadcast) {
      if (!isDataConstant(*op.operand(0))) return nullptr;
      *sourceElements = std::max(*sourceElements, elements(op.operand(0)->shape()));
      inputs.push_back(valueOf(*op.operand(0), &ignored));
    }
    DiagnosticEngine quiet;
    slot = eval::evaluateInstruction(op, inputs, quiet);
    if (quiet.hasErrors()) slot.reset();
    return slot ? &*slot : nullptr;
  }

  Rewriter& rw_;
  const ConstantFoldingOptions& options_;
  std::unordered_map<const Instruction*, std::optional<Literal>> expanded_;
};

}  // namespace

bool ConstantFoldingPass::run(hlo::Module& module, DiagnosticEngine&) {
  bool changed = false;
  for (const auto& c : module.computations()) {
    // Something to fold reads only constants, broadcasts and iotas.
    auto candidate = [](const Instruction& i) {
      if (neverFolded(i) || i.operandCount() == 0) return false;
      for (const Instruction* op : i.operands())
        if (op->opcode() != Opcode::Constant && op->opcode() != Opcode::Broadcast && op->opcode() != Opcode::Iota)
          return false;
      return true;
    };
    if (!anyInstruction(*c, candidate)) continue;
    Rewriter rw(*c);
    Folder folder(rw, options_);
    std::vector<Instruction*> order;
    for (const auto& in : c->instructions()) order.push_back(in.get());
    for (Instruction* in : order)
      if (Instruction* constant = folder.fold(*in)) rw.replaceAllUses(in, constant);
    changed |= rw.finish();
  }
  changed |= removeUnusedFusionParameters(module);
  return changed;
}

}  // namespace tpu::passes::simplify
