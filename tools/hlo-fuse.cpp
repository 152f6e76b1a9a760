// hlo-fuse: the HLO optimizer. Reads an HLO module (text or .hlob), runs
// simplification then operator fusion priced by llo-gen's cost model (or
// --passes), and writes the module in XLA's fusion syntax. All logic lives
// in the libraries; this is the tool's spec plus its remark options.
#include "passes/driver/hlo_tool_driver.h"
#include "passes/fusion/fusion.h"
#include "support/file_io.h"

int main(int argc, char** argv) {
  tpu::Tool tool({
      .name = "hlo-fuse",
      .summary = "Optimize an HLO module for the target chip: simplification, then operator fusion priced by "
                 "llo-gen's kernel estimates; write it as text or .hlob.",
      .examples = "  hlo-fuse model.hlo -o model.fused.hlo          the default pipeline (simplify, then fuse)\n"
                  "  hlo-parse m.hlo | hlo-fuse | llo-gen | llo-asm -o m.tpu\n"
                  "  hlo-fuse m.hlo --remarks -o /dev/null          why each fusion was or was not formed\n"
                  "  hlo-fuse m.hlo --remarks=json --remarks-file=r.jsonl\n"
                  "  hlo-fuse --target=v4 m.hlo                     price kernels on another chip\n"
                  "  hlo-fuse --passes=priority-fusion m.hlo        one pass only\n"
                  "  hlo-fuse --list-passes\n",
      .emitKinds = "text|binary",
      .runsPasses = true,
      .usesTarget = true,
  });
  tpu::passes::addHloToolOptions(tool);
  std::string remarksFormat, remarksFile;
  tool.cli()
      .add_flag("--remarks{text}", remarksFormat,
                "Explain every fusion and every edge left unfused: --remarks (text) or --remarks=json (one object a "
                "line)")
      ->check(CLI::IsMember({"text", "json"}));
  tool.cli().add_option("--remarks-file", remarksFile, "Write the remarks to FILE instead of stderr");
  return tool.run(argc, argv, [&](tpu::Tool& t) {
    tpu::fusion::registerFusionPasses();
    if (!remarksFile.empty() && remarksFormat.empty()) remarksFormat = "text";
    std::vector<tpu::passes::Remark> remarks;
    tpu::passes::PassContext context;
    if (!remarksFormat.empty()) context.remarks = &remarks;
    int code = tpu::passes::runHloTool(t, {.defaultPipeline = tpu::fusion::defaultOptimizationPipeline(),
                                           .context = &context});
    if (remarksFormat.empty() || code != tpu::kExitSuccess) return code;
    std::string rendered;
    for (const tpu::passes::Remark& r : remarks) rendered += (remarksFormat == "json" ? r.json : r.text) + "\n";
    if (remarksFile.empty()) {
      std::fwrite(rendered.data(), 1, rendered.size(), stderr);
      return code;
    }
    return tpu::writeOutputFile(remarksFile, rendered, t.diags()) ? code : tpu::kExitFailure;
  });
}
