// Internal to tpu_eval: the per-device interpreter that walks computations.
// The op families are implemented in eval_*.cpp and collectives.cpp.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "eval/elementwise.h"
#include "eval/evaluator.h"
#include "eval/value.h"
#include "hlo/module.h"
#include "support/diagnostics.h"

namespace tpu::eval {

class CollectiveHub;

// Read-only state shared by every device of one evaluation.
struct SharedState {
  const hlo::Module* module = nullptr;
  EvalOptions options;
  int64_t replicas = 1;
  int64_t partitions = 1;
  std::unordered_map<const hlo::Instruction*, Value> constants;  // every constant, elided ones filled
  CollectiveHub* hub = nullptr;
};

// How a collective's replica groups name devices (XLA's GetCollectiveOpGroupMode).
enum class GroupMode { CrossReplica, CrossPartition, CrossReplicaAndPartition, Flattened };
GroupMode groupMode(const hlo::Instruction& inst);

// The single binary op a scalar computation consists of (root = op(p0, p1)).
std::optional<BinaryOp> simpleBinaryOp(const hlo::Computation& c);
// Root is parameter 1 (scatter "overwrite").
bool isOverwriteComputation(const hlo::Computation& c);
// The comparison kernels of the elementwise layer.
std::optional<CompareDir> compareDir(hlo::ComparisonDirection d);

class Interp {
 public:
  Interp(const SharedState& shared, int64_t replica, int64_t partition, DiagnosticEngine& diags)
      : shared_(shared), replica_(replica), partition_(partition), diags_(diags) {}

  // Runs `c` on `args` (one per parameter). Nullopt after an error.
  std::optional<Value> call(const hlo::Computation& c, std::span<const Value> args);
  // A scalar computation applied to `lanes` independent element positions:
  // every arg is an array of `lanes` elements; returns one array per result
  // (the root's tuple elements, or the root).
  std::optional<std::vector<Value>> callLanes(const hlo::Computation& c, std::span<const Value> args,
                                              int64_t lanes);

  // One instruction on operand values (constant folding).
  std::optional<Value> evaluateOne(const hlo::Instruction& inst, std::span<const Value* const> ops) {
    return evalInstruction(inst, ops);
  }

  bool error(const hlo::Instruction& inst, const std::string& message);
  DiagnosticEngine& diags() { return diags_; }
  const SharedState& shared() const { return shared_; }
  int64_t replica() const { return replica_; }
  int64_t partition() const { return partition_; }

  // Binary op over equal-sized arrays with the fast path of `comb` (a
  // recognised binary op) or a lane call. Result type = a's type.
  std::optional<Value> combine(const hlo::Instruction& inst, const hlo::Computation& comb, const Value& a,
                               const Value& b);

 private:
  struct Plan {
    std::vector<const hlo::Instruction*> order;
    std::vector<std::vector<int>> operandSlots;  // per order position
    std::vector<int> useCount;                   // per order position
    std::vector<int> paramSlot;                  // parameter number -> order position (-1)
    int rootSlot = -1;
  };
  const Plan& plan(const hlo::Computation& c);
  bool liftable(const hlo::Computation& c);

  std::optional<Value> evalInstruction(const hlo::Instruction& inst, std::span<const Value* const> ops);

  // eval_elementwise.cpp
  std::optional<Value> evalElementwise(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalMap(const hlo::Instruction& inst, std::span<const Value* const> ops);
  // eval_shape.cpp
  std::optional<Value> evalShapeOp(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalDot(const hlo::Instruction& inst, const Value& lhs, const Value& rhs);
  std::optional<Value> evalConvolution(const hlo::Instruction& inst, const Value& lhs, const Value& rhs);
  std::optional<Value> evalBatchNorm(const hlo::Instruction& inst, std::span<const Value* const> ops);
  // eval_reduce.cpp
  std::optional<Value> evalReduce(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalReduceWindow(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalSelectAndScatter(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalGather(const hlo::Instruction& inst, const Value& operand, const Value& indices);
  std::optional<Value> evalScatter(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalSort(const hlo::Instruction& inst, std::span<const Value* const> ops);
  // The k largest (or smallest) along the last dimension: topk, and the
  // custom-call target "TopK" (k from its result shape, largest).
  std::optional<Value> evalTopK(const hlo::Instruction& inst, const Value& x, int64_t k, bool largest);
  // collectives.cpp
  std::optional<Value> evalCollective(const hlo::Instruction& inst, std::span<const Value* const> ops);
  // evaluator.cpp
  std::optional<Value> evalCustomCall(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalRng(const hlo::Instruction& inst, std::span<const Value* const> ops);
  std::optional<Value> evalRngBitGenerator(const hlo::Instruction& inst, const Value& state);
  std::optional<Value> evalFft(const hlo::Instruction& inst, const Value& x);

  // Counts a step; false (after reporting the loop that is running) once
  // EvalOptions::maxSteps is exceeded.
  bool countStep(const hlo::Instruction& inst);
  // The result of `inst` could not be allocated: names it and the bytes.
  void reportOutOfMemory(const hlo::Instruction& inst);

  struct RunningLoop {
    const hlo::Instruction* loop;
    int64_t iterations;
  };

  const SharedState& shared_;
  int64_t replica_, partition_;
  int64_t steps_ = 0;
  std::vector<RunningLoop> loops_;  // the while loops being run, innermost last
  DiagnosticEngine& diags_;
  int64_t lanes_ = 0;  // > 0 while a scalar computation runs lane-wise
  std::unordered_map<const hlo::Computation*, std::unique_ptr<Plan>> plans_;
  std::unordered_map<const hlo::Computation*, bool> liftable_;
  uint64_t rngCounter_ = 0;
};

// Shared helpers (eval_elementwise.cpp).
// Converts an array to another element type (XLA convert semantics).
Value convertArray(const Value& x, hlo::ElementType to);
// Elementwise binary op on equal-count arrays of one type; nullopt if the
// kernel rejects the type.
std::optional<Value> binaryArrays(BinaryOp op, const Value& a, const Value& b);
// A scalar value broadcast to `dims`.
Value broadcastScalar(const Value& scalar, const std::vector<int64_t>& dims);
// Elements [start, start+count) of a flat array as a new array of `count`.
Value sliceFlat(const Value& v, int64_t start, int64_t count);
// Copies `lanes` from each of `vals` selected by mask into `into` (in place).
void selectInto(Value& into, const Value& from, const std::vector<uint8_t>& mask);

}  // namespace tpu::eval
