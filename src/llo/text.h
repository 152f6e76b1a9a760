// The LLO assembly language (.llo): parse it into an isa::Program (with
// greedy automatic bundling and legality checks) and print a Program back as
// canonical text. The syntax is described in man/llo-asm.1 and docs/ISA.md.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// A symbol one op names, resolved by whoever builds the program.
struct OpSymbol {
  enum Kind : uint8_t { Label, Buffer, Descriptor } kind = Label;
  uint32_t operand = 0;  // index into the instruction's operands
  std::string name;
};

struct ParsedOp {
  isa::Instr instr;  // operands checked against the isa.def row, defaults filled in
  std::vector<OpSymbol> refs;  // labels, HBM buffers and DMA descriptors by name (left 0 in instr)
};

// One op of LLO text on its own, as the assembler reads an op line
// ("vadd.f32 v1, v2, 1.5", "dma.start d0, x[s3], [s4], sem1"): llo-gen
// turns each op into a typed instruction when it is emitted. Not
// thread-safe; reuse one parser for many ops.
class OpParser {
 public:
  OpParser();
  ~OpParser();
  // False with `error` (the assembler's message, without a position) when
  // the text is not one well-formed op.
  bool parse(std::string_view text, ParsedOp& out, std::string& error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
