// Deep copies of HLO computations and modules, for passes that must give a
// call site its own computation and for consumers (llo-gen) that transform
// a module without touching the caller's.
#pragma once

#include <memory>
#include <string>

#include "hlo/module.h"

namespace tpu::passes {

// Appends a copy of `source` named `name` to `module`. Instructions are
// renamed with `instructionSuffix` appended (pass "" to keep names); calls
// inside the copy keep pointing at the same callees. Source locations,
// attributes and control edges are copied.
hlo::Computation* cloneComputation(hlo::Module& module, const hlo::Computation& source, std::string name,
                                   const std::string& instructionSuffix);

// A copy of the whole module (same names, order, config and locations);
// its instructions call its own computations.
std::unique_ptr<hlo::Module> cloneModule(const hlo::Module& module);

}  // namespace tpu::passes
