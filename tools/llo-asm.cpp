// llo-asm: assembles LLO text (.llo) into TPU machine code (.tpu) and
// disassembles .tpu back into canonical .llo (the input kind is detected by
// its magic number).
#include <fmt/format.h>

#include "isa/encoding.h"
#include "isa/isa_doc.h"
#include "isa/verify.h"
#include "llo/text.h"
#include "support/file_io.h"
#include "support/tool.h"
#include "target/target.h"

namespace {

std::string renderStats(const tpu::isa::Program& p, const tpu::target::TargetDesc* t, bool json) {
  size_t ops = 0;
  std::array<size_t, tpu::target::kNumSlotClasses> perSlot{};
  for (const auto& b : p.bundles)
    for (const auto& in : b.instrs) {
      ++ops;
      if (in.desc().slot != tpu::target::SlotClass::None) ++perSlot[static_cast<size_t>(in.desc().slot)];
    }
  double perBundle = p.bundles.empty() ? 0.0 : static_cast<double>(ops) / p.bundles.size();
  if (json) {
    std::string s = fmt::format("{{\"bundles\": {}, \"ops\": {}, \"ops_per_bundle\": {:.3f}, \"slots\": {{",
                                p.bundles.size(), ops, perBundle);
    for (size_t i = 0; i < perSlot.size(); ++i)
      s += fmt::format("{}\"{}\": {}", i ? ", " : "",
                       tpu::target::slotClassName(static_cast<tpu::target::SlotClass>(i)), perSlot[i]);
    return s + "}}\n";
  }
  std::string s = fmt::format("bundles: {}\nops: {}\nops per bundle: {:.3f}\n", p.bundles.size(), ops, perBundle);
  for (size_t i = 0; i < perSlot.size(); ++i) {
    auto slot = static_cast<tpu::target::SlotClass>(i);
    double fill = t && !p.bundles.empty() && t->slotCount(slot)
                      ? 100.0 * perSlot[i] / (static_cast<double>(p.bundles.size()) * t->slotCount(slot))
                      : 0.0;
    s += fmt::format("{:<7} ops: {:>6}  slot fill: {:5.1f}%\n", tpu::target::slotClassName(slot), perSlot[i], fill);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  tpu::ToolSpec spec;
  spec.name = "llo-asm";
  spec.summary = "Assemble LLO text (.llo) into TPU machine code (.tpu), or disassemble .tpu";
  spec.examples =
      "  llo-asm kernel.llo -o kernel.tpu          assemble (binary output)\n"
      "  llo-asm kernel.tpu                        disassemble to canonical text on stdout\n"
      "  llo-asm --emit=text kernel.llo            show the bundles the assembler formed\n"
      "  llo-gen --target=v4 m.hlo | llo-asm --target=v4 -o m.tpu\n"
      "                                            assemble for the v4-like chip\n";
  spec.emitKinds = "text|binary";
  spec.usesTarget = true;
  tpu::Tool tool(spec);
  bool disassemble = false;
  bool noBundle = false;
  bool printIsa = false;
  tool.cli().add_flag("-d,--disassemble", disassemble, "Require a .tpu input and print it as .llo text");
  tool.cli().add_flag("--no-bundle", noBundle, "Put every op that is not in an explicit { } bundle in its own bundle");
  tool.cli().add_flag("--print-isa", printIsa, "Print the instruction reference (man page section) and exit")
      ->group("");

  return tool.run(argc, argv, [&](tpu::Tool& t) -> int {
    if (printIsa) {
      return tpu::writeOutputFile("-", tpu::isa::isaReferenceRoff(), t.diags()) ? tpu::kExitSuccess
                                                                                : tpu::kExitFailure;
    }
    using tpu::FileKind;
    auto input = disassemble
                     ? t.readInputOfKind({FileKind::Tpu}, "TPU machine code (.tpu), which -d disassembles")
                     : t.readInputOfKind({FileKind::Tpu, FileKind::LloText, FileKind::Empty},
                                         "LLO assembly (.llo) or TPU machine code (.tpu)");
    if (!input) return tpu::kExitFailure;
    const auto& opts = t.options();
    bool targetGiven = t.cli().count("--target") > 0;
    if (tpu::isa::isTpuBinary(input->contents())) {
      input->setBinary(true);
      auto program = tpu::isa::decodeProgram(*input, t.diags());
      if (!program) return tpu::kExitFailure;
      std::optional<tpu::target::TargetDesc> target;
      // Check the code against --target, or against the description the
      // file was assembled for (embedded in it).
      std::unique_ptr<tpu::SourceFile> embedded;
      if (targetGiven) {
        target = tpu::target::loadTarget(opts.target, t.diags());
      } else if (!program->targetJson.empty()) {
        embedded = std::make_unique<tpu::SourceFile>(input->name() + " (embedded target)", program->targetJson);
        target = tpu::target::parseTarget(*embedded, t.diags());
      }
      if ((targetGiven || embedded) && !target) return tpu::kExitFailure;
      if (target && !tpu::isa::verifyProgram(*program, &*target, t.diags())) return tpu::kExitFailure;
      if (!opts.stats.empty() && !t.writeStats(renderStats(*program, target ? &*target : nullptr, opts.stats == "json")))
        return tpu::kExitFailure;
      if (opts.emit == "binary") return t.writeOutput(tpu::isa::encodeProgram(*program), true) ? 0 : 1;
      return t.writeOutput(tpu::llo::printLlo(*program), false) ? tpu::kExitSuccess : tpu::kExitFailure;
    }
    if (disassemble) {
      t.diags().error("input is not a .tpu file (bad magic); -d disassembles machine code only", input->name());
      return tpu::kExitFailure;
    }
    tpu::llo::AsmOptions asmOptions;
    asmOptions.target = opts.target;
    asmOptions.targetIsExplicit = targetGiven;
    asmOptions.autoBundle = !noBundle;
    auto assembled = tpu::llo::assembleLlo(*input, asmOptions, t.diags());
    if (!assembled) return tpu::kExitFailure;
    if (!opts.stats.empty() &&
        !t.writeStats(renderStats(assembled->program, &assembled->target, opts.stats == "json")))
      return tpu::kExitFailure;
    if (opts.emit == "text") return t.writeOutput(tpu::llo::printLlo(assembled->program), false) ? 0 : 1;
    return t.writeOutput(tpu::isa::encodeProgram(assembled->program), true) ? tpu::kExitSuccess
                                                                           : tpu::kExitFailure;
  });
}
