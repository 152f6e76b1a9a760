// Greedy in-order bundling: each op joins the open bundle if a slot of its
// class is free and it does not depend on an op already there; otherwise it
// opens a new bundle. Ops are never reordered, so the result computes what
// the op sequence computes (bundle semantics: all reads before all writes).
#pragma once

#include <string>

#include "isa/program.h"
#include "target/target.h"

namespace tpu::llo {

// Why `instr` may not join `bundle` on `target` ("" if it may).
std::string bundleConflict(const isa::Bundle& bundle, const isa::Instr& instr, const target::TargetDesc& target);

// Ops that must begin a bundle of their own (they stall the whole bundle, so
// ops placed before them could be delayed into a deadlock).
bool startsBundle(const isa::InstrDesc& desc);

}  // namespace tpu::llo
