// List scheduling of LLO into VLIW bundles. Within each basic block the
// scheduler builds the dependence DAG (registers, VMEM/SMEM accesses, DMA and
// semaphore order, per-unit MXU/XLU order) and packs ready ops, highest
// critical path first, into bundles that respect the target's slot counts and
// the instruction table's latencies. Ties go to the earlier op, so the result
// depends only on the input. See docs/DESIGN.md ("List scheduler").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "target/target.h"

namespace tpu::llo {

enum class ScheduleMode : uint8_t {
  None,  // keep the input bundles (llo-asm's greedy bundling of single ops)
  List,  // list-schedule every basic block
};
std::optional<ScheduleMode> scheduleModeFromName(std::string_view name);  // "none", "list"

struct ScheduleStats {
  size_t blocks = 0;
  size_t ops = 0;
  size_t bundlesBefore = 0;
  size_t bundlesAfter = 0;
};

// Cycle (bundle index within the block) of each op of one basic block, given
// in program order. Branches and halt may only come last; sem.wait, sync and
// barrier only first. Empty cycles are kept (they are latency waits).
std::vector<int> scheduleBlock(const std::vector<const isa::Instr*>& ops, const target::TargetDesc& target);

// Reschedules every basic block of `program` in place. Blocks start at labels,
// entries, branch targets, sem.wait/sync/barrier and after branches and halt;
// bundles of more than one op are kept as they are (each a block of its own).
// Labels, entries and branch targets are remapped. Returns, for each input
// bundle position p (and p = size), the output position where text that
// stood before input bundle p belongs: the block start if p starts a block,
// else the output bundle holding p's first op.
std::vector<uint32_t> scheduleProgram(isa::Program& program, const target::TargetDesc& target,
                                      ScheduleStats* stats = nullptr);

}  // namespace tpu::llo
