#include "hlo/computation.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "hlo/pointer_index.h"

namespace tpu::hlo {

Instruction* Computation::addInstruction(std::unique_ptr<Instruction> instruction) {
  instruction->setParent(this);
  instructions_.push_back(std::move(instruction));
  return instructions_.back().get();
}

Instruction* Computation::addInstruction(Opcode opcode, std::string name, Shape shape) {
  return addInstruction(std::make_unique<Instruction>(opcode, std::move(name), std::move(shape)));
}

void Computation::removeInstruction(Instruction* instruction) {
  if (root_ == instruction) root_ = nullptr;
  auto it = std::find_if(instructions_.begin(), instructions_.end(),
                         [&](const std::unique_ptr<Instruction>& p) { return p.get() == instruction; });
  if (it != instructions_.end()) instructions_.erase(it);
}

int64_t Computation::removeInstructionsIf(const std::function<bool(const Instruction&)>& remove) {
  size_t kept = 0;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    if (remove(*instructions_[i])) {
      if (root_ == instructions_[i].get()) root_ = nullptr;
      continue;
    }
    if (kept != i) instructions_[kept] = std::move(instructions_[i]);
    ++kept;
  }
  int64_t removed = static_cast<int64_t>(instructions_.size() - kept);
  instructions_.resize(kept);
  return removed;
}

void Computation::sortTopologically() {
  PointerIndex position(instructions_.size());
  for (size_t i = 0; i < instructions_.size(); ++i) position.set(instructions_[i].get(), static_cast<uint32_t>(i));
  std::vector<std::unique_ptr<Instruction>> sorted;
  sorted.reserve(instructions_.size());
  // Iterative DFS emitting operands and control predecessors first.
  std::vector<uint8_t> done(instructions_.size(), 0);
  std::vector<size_t> order;
  for (size_t start = 0; start < instructions_.size(); ++start) {
    if (done[start]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{start, 0}};
    done[start] = 1;
    while (!stack.empty()) {
      auto& [i, next] = stack.back();
      Instruction* inst = instructions_[i].get();
      size_t nOps = inst->operands().size();
      size_t nAll = nOps + inst->controlPredecessors().size();
      if (next < nAll) {
        Instruction* dep = next < nOps ? inst->operands()[next] : inst->controlPredecessors()[next - nOps];
        ++next;
        int64_t at = position.find(dep);
        if (at >= 0 && !done[static_cast<size_t>(at)]) {
          done[static_cast<size_t>(at)] = 1;
          stack.push_back({static_cast<size_t>(at), 0});
        }
        continue;
      }
      order.push_back(i);
      stack.pop_back();
    }
  }
  for (size_t i : order) sorted.push_back(std::move(instructions_[i]));
  instructions_ = std::move(sorted);
}

std::unordered_map<const Instruction*, std::vector<Instruction*>> Computation::computeUsers() const {
  std::unordered_map<const Instruction*, std::vector<Instruction*>> users;
  for (const auto& inst : instructions_) {
    for (Instruction* op : inst->operands()) {
      auto& list = users[op];
      if (list.empty() || list.back() != inst.get()) {
        if (std::find(list.begin(), list.end(), inst.get()) == list.end()) list.push_back(inst.get());
      }
    }
  }
  return users;
}

std::vector<Instruction*> Computation::parameters() const {
  std::vector<Instruction*> params;
  for (const auto& inst : instructions_) {
    if (inst->opcode() != Opcode::Parameter) continue;
    // Through const: the mutable accessor would unshare a shared block.
    int64_t n = std::as_const(*inst).attrs().parameterNumber;
    if (n < 0 || n > static_cast<int64_t>(instructions_.size())) continue;
    if (static_cast<size_t>(n) >= params.size()) params.resize(static_cast<size_t>(n) + 1, nullptr);
    params[static_cast<size_t>(n)] = inst.get();
  }
  return params;
}

Instruction* Computation::parameter(int64_t number) const {
  for (const auto& inst : instructions_)
    if (inst->opcode() == Opcode::Parameter && std::as_const(*inst).attrs().parameterNumber == number)
      return inst.get();
  return nullptr;
}

int64_t Computation::parameterCount() const {
  int64_t n = 0;
  for (const auto& inst : instructions_)
    if (inst->opcode() == Opcode::Parameter) ++n;
  return n;
}

std::vector<Computation*> Computation::calledComputations() const {
  std::vector<Computation*> out;
  std::unordered_set<Computation*> seen;
  for (const auto& inst : instructions_)
    for (Computation* c : inst->calledComputations())
      if (c && seen.insert(c).second) out.push_back(c);
  return out;
}

Instruction* Computation::findInstruction(std::string_view name) const {
  for (const auto& inst : instructions_)
    if (inst->name() == name) return inst.get();
  return nullptr;
}

}  // namespace tpu::hlo
