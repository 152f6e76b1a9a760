// HLO computations: an ordered list of owned instructions with a root.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "hlo/instruction.h"
#include "support/source.h"

namespace tpu::hlo {

class Module;

class Computation {
 public:
  explicit Computation(std::string name) : name_(std::move(name)) {}
  Computation(const Computation&) = delete;
  Computation& operator=(const Computation&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  // Instructions in order (text order after parsing: every operand precedes
  // its users; the printer prints this order).
  const std::vector<std::unique_ptr<Instruction>>& instructions() const { return instructions_; }
  int64_t instructionCount() const { return static_cast<int64_t>(instructions_.size()); }
  // Appends and takes ownership; sets the parent. Returns the raw pointer.
  Instruction* addInstruction(std::unique_ptr<Instruction> instruction);
  Instruction* addInstruction(Opcode opcode, std::string name, Shape shape);
  // Capacity for `n` instructions in total (for readers that know the count).
  void reserveInstructions(size_t n) { instructions_.reserve(n); }
  // Removes an instruction that nothing uses any more (the caller checks).
  void removeInstruction(Instruction* instruction);
  // Removes every instruction `remove` selects in one pass over the list
  // (the caller checks that nothing kept uses them); returns how many.
  int64_t removeInstructionsIf(const std::function<bool(const Instruction&)>& remove);
  // Reorders so operands and control predecessors precede users (stable for
  // already-ordered input); for passes that appended out of order.
  void sortTopologically();
  // Users of each instruction, in instruction order, without duplicates.
  std::unordered_map<const Instruction*, std::vector<Instruction*>> computeUsers() const;

  Instruction* root() const { return root_; }
  void setRoot(Instruction* root) { root_ = root; }

  // Parameter instructions indexed by parameter number (nullptr for a gap).
  std::vector<Instruction*> parameters() const;
  Instruction* parameter(int64_t number) const;
  int64_t parameterCount() const;

  // execution_thread="..." (default "main").
  const std::string& executionThread() const { return executionThread_; }
  void setExecutionThread(std::string t) { executionThread_ = std::move(t); }

  // Computations called by instructions of this one, first-use order, no duplicates.
  std::vector<Computation*> calledComputations() const;

  Module* parent() const { return parent_; }
  void setParent(Module* m) { parent_ = m; }
  SourceLocation location() const { return location_; }
  void setLocation(SourceLocation loc) { location_ = loc; }
  Instruction* findInstruction(std::string_view name) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Instruction>> instructions_;
  Instruction* root_ = nullptr;
  std::string executionThread_ = "main";
  Module* parent_ = nullptr;
  SourceLocation location_;
};

}  // namespace tpu::hlo
