// Shardy import (shared/spec/SPMD.md §6): JAX exports with Shardy carry
// their shardings as frontend attributes, `xla.sdy.meshes` on the module
// (`{mesh = #sdy.mesh<["x"=2, "y"=4]>}`) and `xla.sdy.sharding` on
// instructions (`#sdy.sharding<@mesh, [{"x"}, {}]>`, or
// `#sdy.sharding_per_value<[...]>` for several results). They are turned
// into HloShardings by XLA's exporter algorithm (§6.2), so those dumps
// propagate and partition like GSPMD ones.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hlo/attributes.h"
#include "hlo/module.h"
#include "support/diagnostics.h"

namespace tpu::spmd {

// One Shardy tensor sharding on a named mesh, given the module's mesh
// table text, as an HloSharding; nullopt with `*why` on bad text.
std::optional<hlo::Sharding> shardyToHlo(std::string_view meshes, std::string_view sharding, std::string* why);

// Sets `sharding=` from `xla.sdy.sharding` on every instruction that has
// the attribute and no sharding yet. Returns false after located errors.
bool importShardy(hlo::Module& module, DiagnosticEngine& diags);

}  // namespace tpu::spmd
