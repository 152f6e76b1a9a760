// Internal to the algebraic simplifier: the per-computation rewriting
// context its rules share (algsimp.cpp drives it; the rules live in
// algsimp_arith.cpp and algsimp_views.cpp).
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "hlo/computation.h"
#include "passes/simplify/rewriter.h"
#include "passes/simplify/simplify.h"

namespace tpu::passes::simplify {

// A shape with the default (row-major) layout, for new intermediates.
hlo::Shape arrayShape(hlo::ElementType type, const std::vector<int64_t>& dims);

// The binary opcode a scalar computation is (root = op(p0, p1), both
// parameters scalars of one type), or nullopt.
std::optional<hlo::Opcode> binaryReducerOpcode(const hlo::Computation& computation);

class Simplifier {
 public:
  Simplifier(Rewriter& rw, const AlgsimpOptions& options) : rw_(rw), options_(options) {}

  // The instruction `in` should be replaced by, `&in` when it was changed
  // in place, or null when no rule applies.
  hlo::Instruction* simplify(hlo::Instruction& in);

 private:
  // algsimp_arith.cpp
  hlo::Instruction* simplifyAdd(hlo::Instruction& in);
  hlo::Instruction* simplifySubtract(hlo::Instruction& in);
  hlo::Instruction* simplifyMultiply(hlo::Instruction& in);
  hlo::Instruction* simplifyDivide(hlo::Instruction& in);
  hlo::Instruction* simplifyMinMax(hlo::Instruction& in);
  hlo::Instruction* simplifyLogical(hlo::Instruction& in);
  hlo::Instruction* simplifyPower(hlo::Instruction& in);
  hlo::Instruction* simplifyUnaryInvolution(hlo::Instruction& in);
  hlo::Instruction* simplifyCompare(hlo::Instruction& in);
  hlo::Instruction* simplifySelect(hlo::Instruction& in);
  hlo::Instruction* simplifyReduce(hlo::Instruction& in);
  hlo::Instruction* simplifyDot(hlo::Instruction& in);
  hlo::Instruction* foldTransposeIntoDot(hlo::Instruction& dot, int64_t operandIndex);
  hlo::Instruction* sinkBroadcastsBelowElementwise(hlo::Instruction& in);
  hlo::Instruction* sinkReshapesBelowElementwise(hlo::Instruction& in);
  hlo::Instruction* dispatch(hlo::Instruction& in);
  // algsimp_views.cpp
  hlo::Instruction* simplifyConvert(hlo::Instruction& in);
  hlo::Instruction* simplifyCopy(hlo::Instruction& in);
  hlo::Instruction* simplifyReshape(hlo::Instruction& in);
  hlo::Instruction* simplifyTranspose(hlo::Instruction& in);
  hlo::Instruction* simplifyBroadcast(hlo::Instruction& in);
  hlo::Instruction* simplifySlice(hlo::Instruction& in);
  hlo::Instruction* simplifyConcatenate(hlo::Instruction& in);
  hlo::Instruction* simplifyPad(hlo::Instruction& in);
  hlo::Instruction* simplifyReverse(hlo::Instruction& in);
  hlo::Instruction* simplifyDynamicSlice(hlo::Instruction& in);
  hlo::Instruction* simplifyReduceWindow(hlo::Instruction& in);
  // A broadcast of one scalar when every operand of `in` broadcasts that
  // scalar (concatenate, pad of its own padding value), else null.
  hlo::Instruction* sameScalarEverywhere(hlo::Instruction& in, int64_t operands);
  hlo::Instruction* viewOfIota(hlo::Instruction& in);
  hlo::Instruction* simplifyBitcastCandidates(hlo::Instruction& in);

  // `candidate` when it can stand for `in` (same shape, layout included).
  hlo::Instruction* ifSameShape(hlo::Instruction& in, hlo::Instruction* candidate) const;
  // The scalar value all elements of `i` share when `i` is a constant (or a
  // broadcast of one) whose data is in the module; cached.
  const hlo::Literal* splat(const hlo::Instruction* i);
  bool isIntSplat(const hlo::Instruction* i, int64_t value);
  // A float splat equal to `value`, zeros compared with their sign.
  bool isFloatSplat(const hlo::Instruction* i, double value);
  bool isAllOnesSplat(const hlo::Instruction* i);
  bool isMinMaxIdentity(const hlo::Instruction* i, bool forMax);

  // New instructions, named and located after `like`.
  hlo::Instruction* add(const hlo::Instruction& like, hlo::Opcode opcode, hlo::Shape shape,
                        std::vector<hlo::Instruction*> operands);
  // A constant of `shape`'s element type, `value` in every element: a
  // scalar constant broadcast to `shape` (or the scalar itself).
  hlo::Instruction* splatConstant(const hlo::Instruction& like, const hlo::Shape& shape, double value);
  hlo::Instruction* splatConstant(const hlo::Instruction& like, const hlo::Shape& shape, const hlo::Literal& scalar);
  hlo::Instruction* reshape(const hlo::Instruction& like, hlo::Instruction* x, const hlo::Shape& shape);
  hlo::Instruction* broadcast(const hlo::Instruction& like, hlo::Instruction* x, const hlo::Shape& shape,
                              std::vector<int64_t> dims);

  Rewriter& rw_;
  const AlgsimpOptions& options_;
  std::unordered_map<const hlo::Instruction*, std::optional<hlo::Literal>> splats_;
};

}  // namespace tpu::passes::simplify
