// `tpu-run model.hlo`: compile the module in memory with llo-gen's lowering,
// run it on the simulator, and with --check also evaluate it with the
// reference interpreter on the same inputs and compare.
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "hlo/computation.h"
#include "passes/clone.h"
#include "passes/fusion/pipeline.h"
#include "passes/layout/layout_assignment.h"
#include "runner/run.h"
#include "runner/tensor_io.h"
#include "support/float_format.h"

namespace tpu::runner {

namespace {

void collectArrayShapes(const hlo::Shape& shape, std::vector<hlo::Shape>& out) {
  if (shape.isTuple()) {
    for (const hlo::Shape& element : shape.tupleElements()) collectArrayShapes(element, out);
  } else if (shape.isArray()) {
    out.push_back(shape.withDefaultLayout());
  }
}

// The agreement the compiled code promises: dots and convolutions over
// floats run on the bf16 MXU in one, three or six passes, keeping about 8,
// 16 or 24 significant bits of each product; the rounding errors of K
// products add up like a random walk, so the tolerance grows with sqrt(K)
// (inputs of magnitude ~1, as --seed produces). Everything else is f32 or
// exact. Returns the tolerance used for both atol and rtol.
// A reduction of a narrow float type rounds to that type after every step,
// so its result depends on the summation order, which the compiled code
// (vector chunks, lane trees) and the interpreter (in order) do not share.
// K roundings of partial sums that grow like sqrt(K) (inputs ~1) walk about
// u * K apart; allow twice that. An f32 sum is rounded in f32 on both sides,
// in another order: its error relative to the result walks like
// u * sqrt(K). max/min are exact.
double narrowReduceTolerance(const hlo::Instruction& reduce) {
  if (reduce.operandCount() < 1 || !reduce.operand(0)->shape().isArray()) return 0;
  const hlo::Shape& in = reduce.operand(0)->shape();
  const auto& format = hlo::elementTypeInfo(in.elementType()).floatFormat;
  bool f32 = in.elementType() == hlo::ElementType::F32;
  if (!format && !f32) return 0;
  const hlo::Computation* reducer = reduce.toApply();
  if (reducer && reducer->root() &&
      (reducer->root()->opcode() == hlo::Opcode::Maximum || reducer->root()->opcode() == hlo::Opcode::Minimum))
    return 0;
  double k = 1;
  for (int64_t d : reduce.attrs().dimensions)
    if (d >= 0 && d < in.rank()) k *= static_cast<double>(in.dimension(d));
  if (f32) return 2 * 0x1p-24 * std::sqrt(k);
  double unitRoundoff = std::ldexp(1.0, -(floatFormatInfo(*format).mantissaBits + 1));
  return 2 * unitRoundoff * k;
}

double checkTolerance(const hlo::Module& module, codegen::F32DotPrecision override) {
  double tolerance = 1e-5;
  for (const auto& computation : module.computations()) {
    for (const auto& instr : computation->instructions()) {
      bool isDot = instr->opcode() == hlo::Opcode::Dot;
      if (instr->opcode() == hlo::Opcode::Reduce) {
        tolerance = std::max(tolerance, narrowReduceTolerance(*instr));
        continue;
      }
      if (!isDot && instr->opcode() != hlo::Opcode::Convolution) continue;
      if (instr->operandCount() < 2 || !instr->operand(0)->shape().isArray()) continue;
      const hlo::Shape& lhs = instr->operand(0)->shape();
      const hlo::Shape& rhs = instr->operand(1)->shape();
      if (!hlo::isFloatType(lhs.elementType())) continue;
      int passes = 1;
      // f16 products are not exact in one bf16 pass either; llo-gen gives them f32's pass count.
      if (lhs.elementType() == hlo::ElementType::F32 || lhs.elementType() == hlo::ElementType::F64 ||
          lhs.elementType() == hlo::ElementType::F16) {
        switch (override) {
          case codegen::F32DotPrecision::Default: passes = 1; break;
          case codegen::F32DotPrecision::High: passes = 3; break;
          case codegen::F32DotPrecision::Highest: passes = 6; break;
          case codegen::F32DotPrecision::FromConfig: {
            hlo::Precision p = hlo::Precision::Default;
            for (hlo::Precision q : instr->attrs().precision->operandPrecision) p = std::max(p, q);
            passes = p == hlo::Precision::Highest ? 6 : p == hlo::Precision::High ? 3 : 1;
            break;
          }
        }
      }
      double k = 1;  // products summed per output element
      if (isDot) {
        for (int64_t d : instr->attrs().dotDims->lhsContractingDimensions)
          if (d >= 0 && d < lhs.rank()) k *= static_cast<double>(lhs.dimension(d));
      } else if (instr->attrs().convDims && rhs.isArray()) {
        const auto& dn = *instr->attrs().convDims;
        for (int64_t d : dn.kernelSpatialDimensions)
          if (d >= 0 && d < rhs.rank()) k *= static_cast<double>(rhs.dimension(d));
        if (dn.kernelInputFeatureDimension < rhs.rank())
          k *= static_cast<double>(rhs.dimension(dn.kernelInputFeatureDimension));
      }
      double unitRoundoff = passes == 1 ? 0x1p-8 : passes == 3 ? 0x1p-16 : 0x1p-23;
      // About twice the accumulated error seen with inputs in [-1, 1), never below f32.s.
      tolerance = std::max(tolerance, 2 * unitRoundoff * std::sqrt(k));
    }
  }
  return tolerance;
}

}  // namespace

RunReport runCompiledModule(const hlo::Module& module, const target::TargetDesc& target, const RunOptions& options,
                            const CompiledRequest& request, std::string& statsText, DiagnosticEngine& diags) {
  RunReport failed{1, {}};
  // The pipeline runs on a copy: the interpreter (--check) sees the module as given.
  std::unique_ptr<hlo::Module> optimized;
  if (request.optimize) {
    optimized = passes::cloneModule(module);
    // Layout assignment, then fusion (XLA's order; hlo-layout | hlo-fuse).
    passes::layout::LayoutOptions layoutOptions;
    if (target.registers.sublanes > 0) layoutOptions.geometry.sublanes = target.registers.sublanes;
    if (target.registers.lanes > 0) layoutOptions.geometry.lanes = target.registers.lanes;
    size_t errors = diags.errorCount();
    passes::layout::LayoutAssignmentPass(layoutOptions).run(*optimized, diags);
    if (diags.errorCount() != errors) return failed;
    if (!fusion::optimizeModule(*optimized, target, diags)) return failed;
  }
  codegen::CodegenOptions codegenOptions;
  codegenOptions.f32DotPrecision = request.f32DotPrecision;
  auto program = codegen::compileModule(optimized ? *optimized : module, target, codegenOptions, diags);
  if (!program) return failed;
  sim::LoadedProgram loaded{std::move(*program), target, {}};

  auto args = prepareArguments(module, options, diags);
  if (!args) return failed;
  // The compiled entry takes the array leaves of the parameters, row-major.
  std::vector<std::string> inputs;
  for (const hlo::Literal& arg : *args)
    for (const hlo::Literal* leaf : flattenLiteral(arg))
      inputs.emplace_back(reinterpret_cast<const char*>(leaf->data().data()), leaf->data().size());
  // Programs with rng instructions take the stream's state last, keyed by
  // the seed the interpreter uses (see --check below).
  if (codegen::takesRngState(loaded.program, "main"))
    inputs.push_back(codegen::initialRngState(options.seed.value_or(0)));

  sim::RunRequest run = request.simulator.run;
  run.entry = "main";
  auto out = sim::runLoadedProgram(loaded, inputs, run, diags);
  if (!out) return failed;
  statsText += out->statsText;

  std::vector<hlo::Shape> resultShapes;
  collectArrayShapes(module.entry()->root()->shape(), resultShapes);
  if (out->results.size() != resultShapes.size()) {
    diags.error(fmt::format("the compiled program returned {} results; the module has {}", out->results.size(),
                            resultShapes.size()));
    return failed;
  }
  std::vector<hlo::Literal> results;
  for (size_t i = 0; i < resultShapes.size(); ++i) {
    hlo::Literal literal(resultShapes[i]);
    if (literal.data().size() != out->results[i].size()) {
      diags.error(fmt::format("result {} has {} bytes, expected {}", i, out->results[i].size(), literal.data().size()));
      return failed;
    }
    std::memcpy(literal.mutableData().data(), out->results[i].data(), out->results[i].size());
    results.push_back(std::move(literal));
  }

  std::string verdict;
  if (request.check) {
    eval::EvalOptions eo;
    eo.elidedConstantsAreErrors = options.elidedConstantsAreErrors;
    eo.maxSteps = options.maxSteps;
    eo.rngSeed = options.seed.value_or(0);
    std::optional<hlo::Literal> reference = eval::evaluate(module, *args, eo, diags);
    if (!reference) return failed;
    std::vector<const hlo::Literal*> want = flattenLiteral(*reference);
    if (want.size() != results.size()) {
      diags.error("the interpreter and the compiled program disagree on the number of results");
      return failed;
    }
    double atol = request.checkAtol.value_or(checkTolerance(module, request.f32DotPrecision));
    double rtol = request.checkRtol.value_or(atol);
    for (size_t i = 0; i < results.size(); ++i) {
      if (auto diff = compareLiterals(results[i], *want[i], atol, rtol)) {
        diags.error(fmt::format("--check: result {} of the compiled program differs from the interpreter's: {}", i,
                                *diff));
        return failed;
      }
    }
    verdict =
        fmt::format("check: {} {} the interpreter (atol {:g}, rtol {:g}; integers exact)", results.size(),
                    results.size() == 1 ? "result matches" : "results match", atol, rtol);
    if (request.jsonVerdict) {
      nlohmann::json line = {
          {"severity", "remark"},
          {"message", verdict},
          {"check", {{"match", true}, {"results", results.size()}, {"atol", atol}, {"rtol", rtol}}}};
      verdict = line.dump();
    }
    verdict += "\n";
  }
  hlo::Literal result = results.size() == 1 ? std::move(results[0]) : hlo::Literal::tuple(std::move(results));
  RunReport report = deliverResults(result, options, diags);
  report.checkVerdict = std::move(verdict);
  return report;
}

}  // namespace tpu::runner
