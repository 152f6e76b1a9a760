// The LLO assembly language (.llo): parse it into an isa::Program (with
// greedy automatic bundling and legality checks) and print a Program back as
// canonical text. The syntax is described in man/llo-asm.1 and docs/ISA.md.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "isa/program.h"
#include "support/diagnostics.h"
#include "support/source.h"
#include "target/target.h"

namespace tpu::llo {

using isa::Program;

struct AsmOptions {
  // Target used when the file has no `.target` directive ("v5e", "v4" or a
  // JSON path). With `targetIsExplicit`, a `.target` line must agree with it.
  std::string target = "v5e";
  bool targetIsExplicit = false;
  // Pack consecutive single ops into bundles (false: one op per bundle).
  bool autoBundle = true;
  // A description given directly (e.g. loaded from a JSON file): used when
  // the file has no `.target` line, instead of looking `target` up.
  std::optional<target::TargetDesc> targetDesc;
};

struct Assembled {
  Program program;
  target::TargetDesc target;
};

// Parses, bundles and checks. Errors are reported at file:line:col.
std::optional<Assembled> assembleLlo(const SourceFile& file, const AsmOptions& options, DiagnosticEngine& diags);

// Canonical text: directives first, then one bundle per line `{ op ; op }`,
// labels and entries on their own lines. Assembling it gives back the same
// program (and so the same .tpu bytes).
std::string printLlo(const Program& program);

// One op as text, e.g. "vadd.f32 v1, v2, 1.5" (no buffer names available
// without the program: HBM operands print as #N).
std::string printInstr(const isa::Instr& instr, const Program* program = nullptr);

// printInstr for many ops of one program: its labels are indexed once
// (printInstr scans them for every label operand).
class InstrPrinter {
 public:
  explicit InstrPrinter(const Program& program);
  ~InstrPrinter();
  std::string print(const isa::Instr& instr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu::llo
