// hlo-layout: assign TPU layouts (minor_to_major, tiles) to every array of
// an HLO module. All logic lives in the libraries; this is the tool's spec.
#include <cstdio>

#include "passes/driver/hlo_tool_driver.h"
#include "passes/driver/registry.h"
#include "passes/layout/layout_assignment.h"
#include "passes/pass.h"
#include "target/target.h"

int main(int argc, char** argv) {
  tpu::Tool tool({
      .name = "hlo-layout",
      .summary = "Assign TPU layouts (minor_to_major, tiles) to every array of an HLO module (text or .hlob).",
      .examples = "  hlo-layout model.hlo                       keep the entry layouts, choose the rest\n"
                  "  hlo-layout --entry-layouts=auto model.hlo  choose the entry layouts too\n"
                  "  hlo-layout --remarks model.hlo -o /dev/null\n"
                  "                                             list inserted copies and free transposes\n"
                  "  hlo-layout --remarks=json model.hlo -o model.layout.hlob\n"
                  "  hlo-parse m.hlo | hlo-layout | llo-gen | llo-asm -o m.tpu\n",
      .emitKinds = "text|binary",
      .runsPasses = true,
      .usesTarget = true,
  });
  tpu::passes::addHloToolOptions(tool);
  std::string entryLayouts = "keep";
  std::string remarks;
  tool.cli()
      .add_option("--entry-layouts", entryLayouts,
                  "keep: honour entry_computation_layout (or the parameters' layouts); auto: choose them too")
      ->check(CLI::IsMember({"keep", "auto"}));
  tool.cli()
      .add_flag("--remarks{text}", remarks,
                "List inserted copies (conflicting constraints, bytes) and transposes made free on stderr: "
                "--remarks (text) or --remarks=json")
      ->check(CLI::IsMember({"text", "json"}));
  return tool.run(argc, argv, [&](tpu::Tool& t) {
    auto target = tpu::target::loadTarget(t.options().target, t.diags());
    if (!target) return tpu::kExitFailure;
    tpu::passes::layout::LayoutReport report;
    tpu::passes::layout::LayoutOptions options;
    options.entryLayouts = entryLayouts == "auto" ? tpu::passes::layout::EntryLayouts::Auto
                                                  : tpu::passes::layout::EntryLayouts::Keep;
    if (target->registers.sublanes > 0) options.geometry.sublanes = target->registers.sublanes;
    if (target->registers.lanes > 0) options.geometry.lanes = target->registers.lanes;
    options.hbmBytesPerSecond = tpu::target::hbmBytesPerSecond(*target);
    options.report = &report;
    options.remarks = !remarks.empty();
    // This tool's layout-assignment carries the command line's options.
    tpu::passes::registerAllPasses();
    tpu::passes::PassRegistry::global().add(
        {"layout-assignment", "Assign TPU layouts (with this tool's --entry-layouts and --target)",
         [options] { return std::make_unique<tpu::passes::layout::LayoutAssignmentPass>(options); }});
    int status = tpu::passes::runHloTool(t, {.defaultPipeline = "layout-assignment"});
    if (!remarks.empty() && status == tpu::kExitSuccess) {
      std::string text = remarks == "json" ? renderReportJson(report, options.hbmBytesPerSecond)
                                           : renderReportText(report, options.hbmBytesPerSecond);
      std::fwrite(text.data(), 1, text.size(), stderr);
    }
    return status;
  });
}
