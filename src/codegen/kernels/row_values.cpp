// The row fusions' shared evaluator of Full values (see row_values.h).
#include "codegen/kernels/row_values.h"

namespace tpu::codegen {

std::optional<VReg> RowValueEvaluator::lowerRowValue(Lowerer& l, const Instruction& i,
                                                     const std::map<const Instruction*, VReg>& rowVal,
                                                     const std::map<const Instruction*, VReg>& hoisted,
                                                     std::vector<VReg>* owned) {
  if (i.opcode() == hlo::Opcode::Broadcast) return hoisted.at(i.operand(0));
  std::vector<VReg> ops;
  for (const Instruction* o : i.operands()) {
    auto it = rowVal.find(o);
    ops.push_back(it != rowVal.end() ? it->second : hoisted.at(o));
  }
  std::optional<VReg> v = l.lowerOp(i, ops);
  if (v && owned) owned->push_back(*v);
  return v;
}

std::optional<VReg> RowValueEvaluator::eval(const Instruction* target, const std::map<const Instruction*, VReg>& rowVal,
                                            std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned,
                                            const Leaf& leaf) const {
  if (auto it = val.find(target); it != val.end()) return it->second;
  if (auto it = hoisted_.find(target); it != hoisted_.end()) return it->second;
  if (auto it = rowVal.find(target); it != rowVal.end()) return it->second;
  std::optional<VReg> v;
  const Opcode op = target->opcode();
  if (op == Opcode::Parameter || (op == Opcode::Broadcast && f_.cls.at(target->operand(0)) == RowFusion::Vec)) {
    v = leaf(target, owned);
  } else if (op == Opcode::Reshape || op == Opcode::Broadcast) {
    // A reshape has the same elements in the same order; any other
    // broadcast's operand is a splat already.
    v = eval(target->operand(0), rowVal, val, owned, leaf);
  } else {
    std::vector<VReg> ops;
    for (const Instruction* o : target->operands()) {
      auto x = eval(o, rowVal, val, owned, leaf);
      if (!x) return std::nullopt;
      ops.push_back(*x);
    }
    v = l_.lowerOp(*target, ops);
    if (v) owned.push_back(*v);
  }
  if (!v) return std::nullopt;
  val[target] = *v;
  return v;
}

void RowValueEvaluator::freeOwned(std::vector<VReg>& owned, const std::set<int>& keep) const {
  std::set<int> freed;
  for (VReg v : owned)
    if (!keep.count(v.r) && !kept_.count(v.r) && freed.insert(v.r).second) l_.vfree(v);
  owned.clear();
}

}  // namespace tpu::codegen
