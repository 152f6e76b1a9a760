#include "passes/testing/differential.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "eval/elided.h"
#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "passes/clone.h"
#include "passes/driver/registry.h"
#include "passes/pass.h"

namespace tpu::passes::testing {

namespace {

// Records every diagnostic as one text line.
struct Recorder {
  DiagnosticEngine diags;
  std::string text;
  Recorder() {
    diags.setConsumer([this](const Diagnostic& d) { text += formatDiagnostic(d, DiagnosticFormat::Text, false); });
  }
};

bool isNan(const hlo::Literal& l, int64_t i) {
  hlo::ElementType t = l.shape().elementType();
  if (hlo::isComplexType(t)) {
    std::complex<double> c = l.getComplex(i);
    return std::isnan(c.real()) || std::isnan(c.imag());
  }
  return hlo::isFloatType(t) && std::isnan(l.getDouble(i));
}

void flatten(const hlo::Literal& l, std::vector<const hlo::Literal*>& out) {
  if (l.isTuple()) {
    for (const hlo::Literal& e : l.tupleElements()) flatten(e, out);
  } else {
    out.push_back(&l);
  }
}

}  // namespace

Pipeline namedPipeline(const std::string& passes) {
  return [passes](hlo::Module& module, DiagnosticEngine& diags) {
    registerAllPasses();
    PassManagerOptions options;
    options.verifyEach = true;
    PassManager pm(options, nullptr, [](const hlo::Module& m, DiagnosticEngine& d) { return hlo::verifyLoadedModule(m, d); });
    if (!pm.addPipeline(passes, diags)) return false;
    return pm.run(module, diags);
  };
}

std::vector<hlo::Literal> seededArguments(const hlo::Module& module, uint64_t seed) {
  std::vector<hlo::Literal> args;
  const hlo::Computation* entry = module.entry();
  if (!entry) return args;
  for (int64_t i = 0; i < entry->parameterCount(); ++i) {
    const hlo::Instruction* p = entry->parameter(i);
    hlo::Shape s = p ? p->shape() : hlo::Shape();
    s.setDefaultLayoutIfMissing();
    args.push_back(eval::fillElidedLiteral(fmt::format("seed={}/parameter={}", seed, i), s));
  }
  return args;
}

std::optional<std::string> bitwiseDifference(const hlo::Literal& before, const hlo::Literal& after) {
  std::vector<const hlo::Literal*> a, b;
  flatten(before, a);
  flatten(after, b);
  if (a.size() != b.size()) return fmt::format("{} result leaves before, {} after", a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const hlo::Literal &x = *a[k], &y = *b[k];
    if (!x.shape().compatible(y.shape()))
      return fmt::format("leaf {}: shape {} before, {} after", k, x.shape().toString(false), y.shape().toString(false));
    if (x.data() == y.data()) continue;
    int64_t width = static_cast<int64_t>(hlo::elementTypeInfo(x.shape().elementType()).byteSize);
    for (int64_t i = 0; i < x.elementCount(); ++i) {
      if (std::memcmp(x.rawElement(i), y.rawElement(i), static_cast<size_t>(width)) == 0) continue;
      if (isNan(x, i) && isNan(y, i)) continue;
      return fmt::format("leaf {} ({}), element {}: bits {:#x} before, {:#x} after ({} vs {})", k,
                         x.shape().toString(false), i, x.getBits(i), y.getBits(i), x.getDouble(i), y.getDouble(i));
    }
  }
  return std::nullopt;
}

int64_t countInstructions(const hlo::Module& module) {
  int64_t n = 0;
  for (const auto& c : module.computations()) n += c->instructionCount();
  return n;
}

DifferentialResult runDifferential(const hlo::Module& module, const Pipeline& pipeline,
                                   const DifferentialOptions& options) {
  DifferentialResult result;
  result.instructionsBefore = countInstructions(module);
  std::vector<hlo::Literal> args = seededArguments(module, options.seed);
  eval::EvalOptions evalOptions;
  evalOptions.maxWhileIterations = options.maxWhileIterations;
  Recorder before;
  std::optional<hlo::Literal> expected = eval::evaluate(module, args, evalOptions, before.diags);
  if (!expected || before.diags.hasErrors()) {
    result.outcome = Outcome::NotEvaluable;
    result.detail = before.text;
    return result;
  }
  std::unique_ptr<hlo::Module> copy = cloneModule(module);
  Recorder transform;
  if (!pipeline(*copy, transform.diags) || transform.diags.hasErrors() ||
      !hlo::verifyLoadedModule(*copy, transform.diags)) {
    result.outcome = Outcome::PipelineFailed;
    result.detail = transform.text;
    return result;
  }
  result.instructionsAfter = countInstructions(*copy);
  Recorder after;
  std::optional<hlo::Literal> got = eval::evaluate(*copy, args, evalOptions, after.diags);
  if (!got || after.diags.hasErrors()) {
    result.outcome = Outcome::Different;
    result.detail = "the transformed module does not evaluate: " + after.text;
    return result;
  }
  if (std::optional<std::string> diff = bitwiseDifference(*expected, *got)) {
    result.outcome = Outcome::Different;
    result.detail = *diff;
    return result;
  }
  if (options.extraCheck) {
    if (std::optional<std::string> why = options.extraCheck(*copy, args, *expected)) {
      result.outcome = Outcome::Different;
      result.detail = *why;
    }
  }
  return result;
}

}  // namespace tpu::passes::testing
