// The Full values of a row fusion on registers, shared by the resident row
// kernel (rows.cpp) and the streamed one (rows_long.cpp). The two differ
// only in where a leaf's vreg comes from (a streamed parameter's block in
// VMEM or a segment of it, a row vector loaded once per offset or per
// segment), so the walk over the fused instructions is written once and the
// leaves are a callback.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "codegen/lowerer.h"

namespace tpu::codegen {

class RowValueEvaluator {
 public:
  // A row value (one value per row: work on reduces and scalars) on
  // registers: the broadcast of a hoisted scalar is that scalar's register;
  // other work is lowered over its operands' registers, taken from `rowVal`
  // (the row's values so far) or else `hoisted`; a new register is added to
  // `owned` when given.
  static std::optional<VReg> lowerRowValue(Lowerer& l, const Instruction& i,
                                           const std::map<const Instruction*, VReg>& rowVal,
                                           const std::map<const Instruction*, VReg>& hoisted,
                                           std::vector<VReg>* owned);

  // The vreg of a leaf: `i` is a streamed (Full) parameter or the broadcast
  // of a row vector. Registers the caller must free go to `owned`.
  using Leaf = std::function<std::optional<VReg>(const Instruction* i, std::vector<VReg>& owned)>;

  // `hoisted`: the splatted scalars; `kept`: registers that live through
  // the kernel (never freed here).
  RowValueEvaluator(Lowerer& l, const RowFusion& f, const std::map<const Instruction*, VReg>& hoisted,
                    const std::set<int>& kept)
      : l_(l), f_(f), hoisted_(hoisted), kept_(kept) {}

  // The value of `target` at the current vreg: from `val` (this vreg's
  // values so far, extended), the hoisted scalars, the row's values
  // (`rowVal`, splats), a leaf, or lowered from its operands; new
  // registers go to `owned`.
  std::optional<VReg> eval(const Instruction* target, const std::map<const Instruction*, VReg>& rowVal,
                           std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned, const Leaf& leaf) const;

  // Frees the registers of `owned` (each once) but those in `keep` and the
  // kept ones, and clears it.
  void freeOwned(std::vector<VReg>& owned, const std::set<int>& keep) const;

 private:
  Lowerer& l_;
  const RowFusion& f_;
  const std::map<const Instruction*, VReg>& hoisted_;
  const std::set<int>& kept_;
};

}  // namespace tpu::codegen
