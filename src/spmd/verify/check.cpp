#include "spmd/verify/check.h"

#include <cmath>
#include <fmt/format.h>
#include <random>

#include "eval/evaluator.h"
#include "hlo/io/hlo_io.h"
#include "hlo/text/printer.h"
#include "spmd/leaves.h"
#include "spmd/partitioner.h"
#include "spmd/propagation.h"
#include "spmd/shards.h"

namespace tpu::spmd {

namespace {

std::string collect(DiagnosticEngine& diags) {
  std::string out;
  for (const Diagnostic& d : diags.diagnostics()) out += formatDiagnostic(d, DiagnosticFormat::Text, false);
  return out;
}

hlo::Literal randomLiteral(const hlo::Shape& shape, std::mt19937_64& rng) {
  if (shape.isTuple()) {
    std::vector<hlo::Literal> e;
    for (const hlo::Shape& s : shape.tupleElements()) e.push_back(randomLiteral(s, rng));
    return hlo::Literal::tuple(std::move(e));
  }
  hlo::Literal l(shape);
  hlo::ElementType t = shape.elementType();
  for (int64_t i = 0; i < l.elementCount(); ++i) {
    int64_t k = static_cast<int64_t>(rng() % 17) - 8;
    if (t == hlo::ElementType::Pred) l.setInt(i, k > 0);
    else if (hlo::isFloatType(t)) l.setDouble(i, static_cast<double>(k) / 8.0);
    else if (hlo::isUnsignedIntegerType(t)) l.setInt(i, k + 8);
    else l.setInt(i, k);
  }
  return l;
}

// First difference between `a` and `b`, or "".
std::string compare(const hlo::Literal& a, const hlo::Literal& b, double tol, const std::string& where) {
  if (a.isTuple()) {
    for (size_t k = 0; k < a.tupleElements().size(); ++k) {
      std::string d = compare(a.tupleElements()[k], b.tupleElements()[k], tol, fmt::format("{}{{{}}}", where, k));
      if (!d.empty()) return d;
    }
    return "";
  }
  if (a.shape().dimensions() != b.shape().dimensions()) return fmt::format("{}: shapes differ", where);
  bool fp = hlo::isFloatType(a.shape().elementType());
  double scale = 1;
  if (fp)
    for (int64_t i = 0; i < a.elementCount(); ++i) scale = std::max(scale, std::fabs(a.getDouble(i)));
  for (int64_t i = 0; i < a.elementCount(); ++i) {
    if (fp) {
      double x = a.getDouble(i), y = b.getDouble(i);
      if (std::isnan(x) && std::isnan(y)) continue;
      if (!(std::fabs(x - y) <= tol * scale))
        return fmt::format("{}: element {} is {} on one device but {} partitioned", where, i, x, y);
    } else if (a.getInt(i) != b.getInt(i)) {
      return fmt::format("{}: element {} is {} on one device but {} partitioned", where, i, a.getInt(i), b.getInt(i));
    }
  }
  return "";
}

}  // namespace

CheckReport checkPartitioning(const std::string& hloText, int64_t numPartitions, uint64_t seed, double tolerance,
                              const std::string& referenceText, const SpmdOptions* options) {
  CheckReport report;
  DiagnosticEngine diags;
  auto source = std::make_shared<SourceFile>("check.hlo", hloText);
  hlo::LoadedModule ref = hlo::readModule(
      referenceText.empty() ? source : std::make_shared<SourceFile>("reference.hlo", referenceText), diags);
  hlo::LoadedModule part = hlo::readModule(source, diags);
  if (!ref.module || !part.module) {
    report.message = collect(diags);
    return report;
  }
  hlo::Module& m = *part.module;
  if (!propagateShardings(m, numPartitions, diags) || !partitionModule(m, numPartitions, diags, options) ||
      diags.hasErrors()) {
    report.message = collect(diags);
    return report;
  }
  report.partitioned = hlo::printHloText(m);
  if (!hlo::verifyLoadedModule(m, diags)) {
    report.message = "the partitioned module does not verify:\n" + collect(diags) + report.partitioned;
    return report;
  }
  for (const auto& c : m.computations())
    for (const auto& i : c->instructions()) {
      hlo::Opcode op = i->opcode();
      report.collectives += op == hlo::Opcode::AllGather || op == hlo::Opcode::AllReduce ||
                            op == hlo::Opcode::AllToAll || op == hlo::Opcode::CollectivePermute ||
                            op == hlo::Opcode::ReduceScatter;
    }
  std::mt19937_64 rng(seed);
  std::vector<hlo::Literal> args;
  const hlo::Computation* entry = ref.module->entry();
  for (int64_t k = 0; k < entry->parameterCount(); ++k) args.push_back(randomLiteral(entry->parameter(k)->shape(), rng));
  eval::EvalOptions one;
  one.partitions = 1;
  one.replicas = 1;
  std::optional<hlo::Literal> want = eval::evaluate(*ref.module, args, one, diags);
  if (!want) {
    report.message = "the unpartitioned module does not run: " + collect(diags);
    return report;
  }
  std::vector<std::vector<hlo::Literal>> perDevice(static_cast<size_t>(numPartitions));
  for (int64_t k = 0; k < entry->parameterCount(); ++k) {
    const hlo::Instruction* p = m.entry()->parameter(k);
    Leaves leaves = p->sharding() ? *readSharding(*p, numPartitions, diags)
                                  : replicatedLeaves(entry->parameter(k)->shape(), numPartitions);
    for (int64_t d = 0; d < numPartitions; ++d)
      perDevice[static_cast<size_t>(d)].push_back(shardOf(args[static_cast<size_t>(k)], leaves, d));
  }
  eval::EvalOptions many;
  many.partitions = numPartitions;
  many.replicas = 1;
  std::optional<eval::EvalResult> got = eval::evaluatePerDevice(m, perDevice, many, diags);
  if (!got) {
    report.message = "the partitioned module does not run: " + collect(diags) + report.partitioned;
    return report;
  }
  const hlo::Instruction* root = m.entry()->root();
  Leaves rootLeaves = root->sharding() ? *readSharding(*root, numPartitions, diags)
                                       : replicatedLeaves(entry->root()->shape(), numPartitions);
  // Every device must hold its part: check each device's shard, not just one.
  for (int64_t d = 0; d < numPartitions; ++d) {
    hlo::Literal mine = got->perDevice[static_cast<size_t>(d)];
    // Compare only valid elements: zero the padding of the device's result.
    std::vector<hlo::Literal> only(static_cast<size_t>(numPartitions), mine);
    hlo::Literal joined = joinShards(only, entry->root()->shape(), rootLeaves);
    hlo::Literal masked = shardOf(joined, rootLeaves, d);
    std::string diff = compare(shardOf(*want, rootLeaves, d), masked, tolerance, fmt::format("device {}", d));
    if (!diff.empty()) {
      report.message = diff + "\n" + report.partitioned;
      return report;
    }
  }
  report.ok = true;
  return report;
}

}  // namespace tpu::spmd
