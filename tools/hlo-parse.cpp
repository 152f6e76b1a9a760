// hlo-parse: read HLO text or binary, verify, and write canonical text or
// binary. All logic lives in the libraries; this is the tool's spec.
#include "passes/driver/hlo_tool_driver.h"

int main(int argc, char** argv) {
  tpu::Tool tool({
      .name = "hlo-parse",
      .summary = "Read an HLO module (text or .hlob), verify it, and write it as canonical text or .hlob.",
      .examples = "  hlo-parse model.hlo                      verify; print canonical text to stdout\n"
                  "  hlo-parse model.hlo -o model.hlob        encode as binary (by extension)\n"
                  "  hlo-parse model.hlob --emit=text         decode binary to text\n"
                  "  hlo-parse model.hlo --stats=json -o /dev/null\n"
                  "                                           opcode counts, bytes, FLOP estimate\n"
                  "  hlo-parse --split-input-file tests.hlo   modules separated by '// -----'\n"
                  "  cat model.hlo | hlo-parse --strip-metadata | less\n",
      .emitKinds = "text|binary",
      .runsPasses = true,
  });
  tpu::passes::addHloToolOptions(tool);
  // A pipeline stage: exit as soon as the output is written (no teardown).
  tpu::exitWithoutTeardown(
      tool.run(argc, argv, [](tpu::Tool& t) { return tpu::passes::runHloTool(t, {}); }));
}
