// Legality rules shared by the assembler (which reports them at source
// positions), the decoder and the simulator: operand shapes, index ranges,
// register numbers, slot limits and static memory bounds.
#pragma once

#include <string>

#include "isa/program.h"
#include "support/diagnostics.h"
#include "target/target.h"

namespace tpu::isa {

// Operands match the table and refer to existing buffers, descriptors and
// bundles. Returns an error message, or "" if the op is well formed.
std::string checkInstrStructure(const Instr& instr, const Program& program);
// Register numbers, unit indices, semaphores, features and static
// VMEM/SMEM addresses fit `target`.
std::string checkInstrForTarget(const Instr& instr, const target::TargetDesc& target);
// Slot counts per class and no register written twice in one bundle.
std::string checkBundle(const Bundle& bundle, const target::TargetDesc& target);
// Buffers, data, descriptors and entries are consistent (and fit the target
// when one is given).
std::string checkProgramTables(const Program& program, const target::TargetDesc* target);

// All of the above over a whole program. Errors go to `diags` at `where`
// (e.g. the code section of a .tpu file) naming the bundle index.
bool verifyProgram(const Program& program, const target::TargetDesc* target, DiagnosticEngine& diags,
                   SourceLocation where = {});

}  // namespace tpu::isa
