#include "passes/clone.h"

#include <map>

namespace tpu::passes {

namespace {

using hlo::Computation;
using hlo::Instruction;

// Copies the instructions of `source` into the empty `target`; `callees`
// maps called computations (missing entries keep the original).
void copyBody(const Computation& source, Computation& target, const std::string& suffix,
              const std::map<const Computation*, Computation*>& callees) {
  std::map<const Instruction*, Instruction*> map;
  target.reserveInstructions(source.instructions().size());
  for (const auto& up : source.instructions()) {
    const Instruction& in = *up;
    auto copy = std::make_unique<Instruction>(in.opcode(), in.name() + suffix, in.shape());
    copy->shareAttributesOf(in);  // copy-on-write: a reference count, not a copy of the block
    copy->common() = in.common();
    copy->setLocation(in.location());
    for (const Instruction* o : in.operands()) {
      auto it = map.find(o);
      copy->addOperand(it == map.end() ? const_cast<Instruction*>(o) : it->second);
    }
    for (Computation* c : in.calledComputations()) {
      auto it = callees.find(c);
      copy->addCalledComputation(it == callees.end() ? c : it->second);
    }
    for (const Instruction* p : in.controlPredecessors()) {
      auto it = map.find(p);
      if (it != map.end()) copy->addControlPredecessor(it->second);
    }
    map[&in] = target.addInstruction(std::move(copy));
  }
  if (source.root()) {
    auto it = map.find(source.root());
    if (it != map.end()) target.setRoot(it->second);
  }
  target.setExecutionThread(source.executionThread());
  target.setLocation(source.location());
}

}  // namespace

Computation* cloneComputation(hlo::Module& module, const Computation& source, std::string name,
                              const std::string& instructionSuffix) {
  Computation* c = module.addComputation(std::move(name));
  copyBody(source, *c, instructionSuffix, {});
  return c;
}

std::unique_ptr<hlo::Module> cloneModule(const hlo::Module& module) {
  auto out = std::make_unique<hlo::Module>(module.name());
  out->config() = module.config();
  out->stackFrames() = module.stackFrames();
  std::map<const Computation*, Computation*> callees;
  for (const auto& c : module.computations()) callees[c.get()] = out->addComputation(c->name());
  for (const auto& c : module.computations()) copyBody(*c, *callees[c.get()], "", callees);
  if (module.entry()) out->setEntry(callees[module.entry()]);
  return out;
}

}  // namespace tpu::passes
