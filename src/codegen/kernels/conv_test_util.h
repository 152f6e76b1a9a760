// Helpers of the convolution kernels' tests.
#pragma once

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/test_util.h"

namespace tpu::codegen {

// The two operands of a one-convolution test module, random from `seed`,
// element `at` of the first set to +infinity (empty if the text does not
// load): for the tests that an infinity stays out of the sums that do not
// hold it.
inline std::vector<hlo::Literal> operandsWithInfinity(const std::string& text, unsigned seed, int64_t at) {
  std::mt19937 rng(seed);
  std::vector<hlo::Literal> args;
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("t.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return args;
  for (int64_t p = 0; p < 2; ++p)
    args.push_back(randomLiteral(loaded.module->entry()->parameter(p)->shape(), rng));
  args[0].setDouble(at, std::numeric_limits<double>::infinity());
  return args;
}

}  // namespace tpu::codegen
