// Helpers for passes that replace one instruction by a small graph of
// simpler ones (the expanders): new instructions are appended to the
// computation with module-unique names derived from the replaced one and
// its source location; `replace` redirects every use and removes the old
// instruction, and `finish` restores operand-before-user order.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "hlo/computation.h"
#include "hlo/module.h"

namespace tpu::passes {

// Every instruction name of the module, so new names can avoid them.
std::set<std::string> instructionNames(const hlo::Module& module);

class RewriteBuilder {
 public:
  // New instructions go into `computation`, named after `original`.
  RewriteBuilder(hlo::Computation& computation, const hlo::Instruction& original,
                 std::set<std::string>& names);
  RewriteBuilder(hlo::Computation& computation, std::string baseName, SourceLocation location,
                 std::set<std::string>& names);

  hlo::Instruction* add(hlo::Opcode opcode, hlo::Shape shape, std::vector<hlo::Instruction*> operands);
  // x itself when it already has element type t.
  hlo::Instruction* convert(hlo::Instruction* x, hlo::ElementType t);
  hlo::Instruction* scalarConstant(hlo::ElementType t, double value);
  // x (whose dimensions are dimensions `dims` of `shape`) broadcast to `shape`.
  hlo::Instruction* broadcast(hlo::Instruction* x, const hlo::Shape& shape, std::vector<int64_t> dims);
  hlo::Instruction* binary(hlo::Opcode opcode, hlo::Instruction* a, hlo::Instruction* b);
  hlo::Instruction* unary(hlo::Opcode opcode, hlo::Instruction* x);
  hlo::Instruction* compare(hlo::Instruction* a, hlo::Instruction* b, hlo::ComparisonDirection direction,
                            hlo::ComparisonType type);
  hlo::Instruction* reduce(hlo::Instruction* x, hlo::Instruction* init, std::vector<int64_t> dims,
                           hlo::Computation* reducer);
  hlo::Instruction* getTupleElement(hlo::Instruction* tuple, int64_t index);
  hlo::Instruction* slice(hlo::Instruction* x, std::vector<hlo::SliceDimension> slice);
  hlo::Instruction* tuple(std::vector<hlo::Instruction*> elements);

  // A new computation (appended to the module) with scalar parameters of
  // `types`, whose root `body` builds from them.
  hlo::Computation* scalarComputation(
      const std::string& base, const std::vector<hlo::ElementType>& types,
      const std::function<hlo::Instruction*(RewriteBuilder&, const std::vector<hlo::Instruction*>&)>& body);

  std::string freshName(const std::string& base);

 private:
  hlo::Computation& computation_;
  std::string base_;
  SourceLocation location_;
  std::set<std::string>& names_;
};

// Redirects every use of `old` in its computation (operands, control
// edges, the root) to `replacement` and removes `old`.
void replaceInstruction(hlo::Instruction* old, hlo::Instruction* replacement);

// The expanders' driver: in every computation of `module`, replaces each
// instruction `matches` selects by the graph `expand` builds for it, then
// restores operand-before-user order. `expand` returns nullptr after
// reporting why it cannot expand an instruction; that stops the pass.
// Returns whether anything was replaced.
bool expandEach(hlo::Module& module, const std::function<bool(const hlo::Instruction&)>& matches,
                const std::function<hlo::Instruction*(RewriteBuilder&, hlo::Instruction&)>& expand);

}  // namespace tpu::passes
