#include "spmd/propagation.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "hlo/module.h"
#include "spmd/leaves.h"
#include "spmd/partitioner.h"
#include "spmd/rules.h"
#include "spmd/shardy.h"

namespace tpu::spmd {

using hlo::Instruction;
using hlo::Opcode;

int64_t partitionCount(const hlo::Module& module, const SpmdOptions& options) {
  if (options.numPartitions > 0) return options.numPartitions;
  if (module.config().numPartitions > 1) return module.config().numPartitions;
  int64_t n = 1;
  for (const auto& c : module.computations())
    for (const auto& inst : c->instructions())
      if (inst->sharding()) n = std::max(n, shardingDeviceCount(*inst->sharding()));
  return n;
}

namespace {

class Propagator {
 public:
  Propagator(hlo::Module& module, int64_t n, DiagnosticEngine& diags) : module_(module), n_(n), diags_(diags) {}

  bool run() {
    collectComputations();
    if (!readAnnotations()) return false;
    for (int round = 0; round < 16; ++round) {
      bool changed = false;
      for (auto it = comps_.rbegin(); it != comps_.rend(); ++it) {
        for (const auto& inst : (*it)->instructions()) changed |= forward(*inst);
        for (auto i = (*it)->instructions().rbegin(); i != (*it)->instructions().rend(); ++i) changed |= backward(**i);
      }
      if (!changed) break;
    }
    writeBack();
    return true;
  }

 private:
  void collectComputations() {
    std::set<const hlo::Computation*> seen;
    std::vector<hlo::Computation*> stack{module_.entry()};
    while (!stack.empty()) {
      hlo::Computation* c = stack.back();
      stack.pop_back();
      if (!c || !seen.insert(c).second) continue;
      comps_.push_back(c);
      for (const auto& inst : c->instructions()) {
        Opcode op = inst->opcode();
        if (hlo::isControlFlow(op))
          for (hlo::Computation* callee : inst->calledComputations()) stack.push_back(callee);
      }
    }
    // comps_ is callers first (entry first).
  }

  bool readAnnotations() {
    const hlo::Computation* entry = module_.entry();
    bool ok = true;
    for (hlo::Computation* c : comps_) {
      for (const auto& inst : c->instructions()) {
        if (inst->sharding()) {
          std::optional<Leaves> leaves = readSharding(*inst, n_, diags_);
          if (!leaves) {
            ok = false;
            continue;
          }
          set_[inst.get()] = std::move(*leaves);
          fixed_.insert(inst.get());
        } else if (c == entry) {
          bool isParam = inst->opcode() == Opcode::Parameter;
          bool isRoot = inst.get() == entry->root();
          const auto& cfg = module_.config();
          bool paramsOpen = std::any_of(cfg.allowSpmdShardingPropagationToParameters.begin(),
                                        cfg.allowSpmdShardingPropagationToParameters.end(), [](bool b) { return b; });
          bool outputOpen = std::any_of(cfg.allowSpmdShardingPropagationToOutput.begin(),
                                        cfg.allowSpmdShardingPropagationToOutput.end(), [](bool b) { return b; });
          if ((isParam && !paramsOpen) || (isRoot && !outputOpen)) {
            set_[inst.get()] = replicatedLeaves(inst->shape(), n_);
            fixed_.insert(inst.get());
          }
        }
      }
    }
    return ok;
  }

  const Leaves* get(const Instruction* i) const {
    auto it = set_.find(i);
    return it == set_.end() ? nullptr : &it->second;
  }
  const Tiling* array(const Instruction* i) const {
    const Leaves* l = get(i);
    return l && l->size() == 1 && i->shape().isArray() ? &(*l)[0] : nullptr;
  }

  // Offers `cand` for `inst`; takes it when inst has none, leaf by leaf
  // when it has more tiles.
  bool offer(const Instruction* inst, const Leaves& cand) {
    if (fixed_.count(inst)) return false;
    auto it = set_.find(inst);
    if (it == set_.end()) {
      set_[inst] = cand;
      return true;
    }
    bool changed = false;
    for (size_t k = 0; k < cand.size() && k < it->second.size(); ++k) {
      if (cand[k].isManual() || it->second[k].isManual()) continue;
      if (cand[k].numTiles() > it->second[k].numTiles()) {
        it->second[k] = cand[k];
        changed = true;
      }
    }
    return changed;
  }
  bool offer(const Instruction* inst, const Tiling& t) {
    if (!inst->shape().isArray() || inst->shape().rank() != t.rank()) return false;
    return offer(inst, Leaves{t});
  }
  bool offerLeaves(const Instruction* inst, size_t offset, const Leaves& leaves) {
    if (fixed_.count(inst)) return false;
    auto it = set_.find(inst);
    Leaves cur = it != set_.end() ? it->second : Leaves();
    if (cur.empty()) {
      // Unknown leaves: replicated placeholders (fewest tiles; anything beats them).
      cur = replicatedLeaves(inst->shape(), n_);
      if (it == set_.end()) {
        Leaves tmp = cur;
        for (size_t k = 0; k < leaves.size() && offset + k < tmp.size(); ++k) tmp[offset + k] = leaves[k];
        set_[inst] = tmp;
        return true;
      }
    }
    Leaves cand = cur;
    for (size_t k = 0; k < leaves.size() && offset + k < cand.size(); ++k) cand[offset + k] = leaves[k];
    return offer(inst, cand);
  }

  bool forward(const Instruction& inst) {
    Opcode op = inst.opcode();
    const hlo::Shape& shape = inst.shape();
    auto opTiling = [&](int64_t k) { return array(inst.operand(k)); };
    if (op == Opcode::GetTupleElement) {
      const Leaves* l = get(inst.operand(0));
      if (!l) return false;
      auto [off, cnt] = leafRange(inst.operand(0)->shape(), inst.attrs().tupleIndex);
      return offer(&inst, Leaves(l->begin() + off, l->begin() + off + cnt));
    }
    if (op == Opcode::Tuple) {
      Leaves all;
      for (const Instruction* o : inst.operands()) {
        const Leaves* l = get(o);
        Leaves part = l ? *l : replicatedLeaves(o->shape(), n_);
        all.insert(all.end(), part.begin(), part.end());
      }
      return offer(&inst, all);
    }
    if (op == Opcode::While) {
      const Leaves* l = get(inst.operand(0));
      bool changed = false;
      if (l) {
        changed |= offer(&inst, *l);
        for (hlo::Computation* c : inst.calledComputations())
          if (c->parameter(0)) changed |= offer(c->parameter(0), *l);
      }
      return changed;
    }
    if (op == Opcode::Conditional) {
      // Branch k's parameter is operand k + 1; the result follows the roots.
      bool changed = false;
      const auto& called = inst.calledComputations();
      for (size_t k = 0; k < called.size(); ++k) {
        hlo::Computation* c = called[k];
        if (const Leaves* l = get(inst.operand(static_cast<int64_t>(k) + 1)))
          if (c && c->parameter(0)) changed |= offer(c->parameter(0), *l);
        if (c && c->root())
          if (const Leaves* l = get(c->root())) changed |= offer(&inst, *l);
      }
      return changed;
    }
    if (op == Opcode::Call) {
      hlo::Computation* c = inst.toApply();
      bool changed = false;
      for (int64_t k = 0; k < inst.operandCount(); ++k)
        if (const Leaves* l = get(inst.operand(k)))
          if (c && c->parameter(k)) changed |= offer(c->parameter(k), *l);
      if (c && c->root())
        if (const Leaves* l = get(c->root())) changed |= offer(&inst, *l);
      return changed;
    }
    if (!shape.isArray()) {
      if (op == Opcode::Reduce || op == Opcode::Sort) {
        // Variadic: every output like the first.
        const Tiling* t = opTiling(0);
        if (!t) return false;
        Tiling r = op == Opcode::Reduce ? reduced(*t, inst.attrs().dimensions) : *t;
        return offer(&inst, Leaves(static_cast<size_t>(shape.tupleSize()), r));
      }
      return false;
    }
    int64_t rank = shape.rank();
    if (op == Opcode::Broadcast) {
      const Tiling* t = opTiling(0);
      return t && offer(&inst, broadcastForward(*t, inst));
    }
    if (op == Opcode::Transpose) {
      const Tiling* t = opTiling(0);
      return t && offer(&inst, t->transposed(inst.attrs().dimensions));
    }
    if (op == Opcode::Reshape || (op == Opcode::Bitcast && inst.operand(0)->shape().isArray() &&
                                  inst.operand(0)->shape().elementType() == shape.elementType())) {
      const Tiling* t = opTiling(0);
      if (!t) return false;
      bool exact;
      return offer(&inst, reshapeTiling(*t, inst.operand(0)->shape().dimensions(), shape.dimensions(), &exact));
    }
    if (op == Opcode::Reduce) {
      const Tiling* t = opTiling(0);
      return t && offer(&inst, reduced(*t, inst.attrs().dimensions));
    }
    if (op == Opcode::Dot) {
      const Tiling* l = opTiling(0);
      const Tiling* r = opTiling(1);
      if (!l && !r) return false;
      DotSpace s = dotSpace(inst);
      std::optional<Tiling> best;
      for (int k = 0; k < 2; ++k) {
        const Tiling* t = k == 0 ? l : r;
        if (!t) continue;
        Tiling out = dotOutPartial(dotSpaceFromOperand(*t, s, k), s);
        const Tiling* other = k == 0 ? r : l;
        if (other) {
          Tiling o = dotOutPartial(dotSpaceFromOperand(*other, s, 1 - k), s);
          for (int64_t d = 0; d < out.rank(); ++d)
            if (out.tile(d) == 1 && o.tile(d) > 1)
              if (auto refined = out.tiledFromReplication(d, o.tile(d))) out = *refined;
        }
        if (!best || out.numTiles() > best->numTiles()) best = out;
      }
      return offer(&inst, *best);
    }
    if (op == Opcode::Gather) {
      IndexedMap m = gatherMap(inst);
      const Tiling* o = opTiling(0);
      const Tiling* i = opTiling(1);
      std::optional<Tiling> best;
      if (o) best = projectTiling(*o, m.operandOfOut);
      if (i) {
        Tiling c = projectTiling(*i, m.indexOfOut);
        if (!best || c.numTiles() > best->numTiles()) best = c;
      }
      return best && offer(&inst, *best);
    }
    if (op == Opcode::Scatter && inst.operandCount() == 3) {
      IndexedMap m = scatterMap(inst);
      const Tiling* o = opTiling(0);
      const Tiling* u = opTiling(2);
      std::optional<Tiling> best;
      if (o) best = *o;
      if (u) {
        Tiling c = projectTiling(*u, m.outOfOperand);
        if (!best || c.numTiles() > best->numTiles()) best = c;
      }
      return best && offer(&inst, *best);
    }
    if (op == Opcode::Convolution) {
      const Tiling* l = opTiling(0);
      if (!l) return false;
      const hlo::ConvolutionDimensionNumbers& cd = *inst.attrs().convDims;
      // The output's batch and spatial dims take the input's tiling.
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      perm[static_cast<size_t>(cd.outputBatchDimension)] = cd.inputBatchDimension;
      perm[static_cast<size_t>(cd.outputFeatureDimension)] = cd.inputFeatureDimension;
      for (size_t i = 0; i < cd.outputSpatialDimensions.size(); ++i)
        perm[static_cast<size_t>(cd.outputSpatialDimensions[i])] = cd.inputSpatialDimensions[i];
      return offer(&inst, l->replicatedOn({cd.inputFeatureDimension}).transposed(perm));
    }
    if (passThrough(op) || hlo::isElementwise(op) || isShardingCall(inst)) {
      const Tiling* best = nullptr;
      int64_t first = op == Opcode::Select ? 1 : 0;
      int64_t last = op == Opcode::DynamicSlice || op == Opcode::DynamicUpdateSlice || op == Opcode::Pad
                         ? (op == Opcode::DynamicUpdateSlice ? 1 : 0)
                         : inst.operandCount() - 1;
      for (int64_t k = first; k <= last && k < inst.operandCount(); ++k) {
        const Tiling* t = opTiling(k);
        if (t && t->rank() == rank && (!best || t->numTiles() > best->numTiles())) best = t;
      }
      if (op == Opcode::DynamicUpdateSlice) best = opTiling(0);
      return best && offer(&inst, *best);
    }
    return false;
  }

  static Tiling reduced(const Tiling& t, const std::vector<int64_t>& dims) {
    return t.replicatedOn(dims).withRemovedDims(dims);
  }

  static bool isShardingCall(const Instruction& inst) {
    return inst.opcode() == Opcode::CustomCall && inst.attrs().customCallTarget == "Sharding";
  }

  static bool passThrough(Opcode op) {
    switch (op) {
      case Opcode::Copy:
      case Opcode::Convert:
      case Opcode::Slice:
      case Opcode::Pad:
      case Opcode::DynamicSlice:
      case Opcode::DynamicUpdateSlice:
      case Opcode::Concatenate:
      case Opcode::Reverse:
      case Opcode::Sort:
      case Opcode::Select:
      case Opcode::Clamp:
      case Opcode::ReduceWindow:
      case Opcode::SelectAndScatter:
      case Opcode::OptimizationBarrier: return true;
      default: return false;
    }
  }

  bool backward(const Instruction& inst) {
    const Leaves* mine = get(&inst);
    if (!mine) return false;
    Opcode op = inst.opcode();
    bool changed = false;
    if (op == Opcode::GetTupleElement) {
      auto [off, cnt] = leafRange(inst.operand(0)->shape(), inst.attrs().tupleIndex);
      (void)cnt;
      return offerLeaves(inst.operand(0), off, *mine);
    }
    if (op == Opcode::Tuple) {
      size_t off = 0;
      for (const Instruction* o : inst.operands()) {
        size_t cnt = static_cast<size_t>(countLeaves(o->shape()));
        changed |= offer(o, Leaves(mine->begin() + static_cast<int64_t>(off), mine->begin() + static_cast<int64_t>(off + cnt)));
        off += cnt;
      }
      return changed;
    }
    if (op == Opcode::While) return offer(inst.operand(0), *mine);
    if (op == Opcode::Conditional) {
      for (hlo::Computation* c : inst.calledComputations())
        if (c && c->root()) changed |= offer(c->root(), *mine);
      return changed;
    }
    if (!inst.shape().isArray()) {
      if (op == Opcode::Reduce || op == Opcode::Sort) {
        const Tiling& t = (*mine)[0];
        int64_t n = inst.operandCount() / (op == Opcode::Reduce ? 2 : 1);
        for (int64_t k = 0; k < n; ++k)
          changed |= offer(inst.operand(k), op == Opcode::Reduce ? t.withInsertedDims(inst.attrs().dimensions) : t);
      }
      return changed;
    }
    const Tiling& t = (*mine)[0];
    if (t.isManual()) return false;
    int64_t rank = inst.shape().rank();
    switch (op) {
      case Opcode::Broadcast: return offer(inst.operand(0), broadcastBackward(t, inst));
      case Opcode::Transpose: {
        const auto& p = inst.attrs().dimensions;
        std::vector<int64_t> inv(p.size());
        for (size_t k = 0; k < p.size(); ++k) inv[static_cast<size_t>(p[k])] = static_cast<int64_t>(k);
        return offer(inst.operand(0), t.transposed(inv));
      }
      case Opcode::Reshape: {
        bool exact;
        return offer(inst.operand(0), reshapeTiling(t, inst.shape().dimensions(), inst.operand(0)->shape().dimensions(), &exact));
      }
      case Opcode::Reduce: return offer(inst.operand(0), t.withInsertedDims(inst.attrs().dimensions));
      case Opcode::Gather: {
        IndexedMap m = gatherMap(inst);
        changed |= offer(inst.operand(0), projectTiling(t, m.outOfOperand));
        changed |= offer(inst.operand(1), projectTiling(t, m.outOfIndex));
        return changed;
      }
      case Opcode::Scatter: {
        if (inst.operandCount() != 3) return false;
        IndexedMap m = scatterMap(inst);
        changed |= offer(inst.operand(0), t);
        Tiling u = projectTiling(t, m.operandOfOut);
        changed |= offer(inst.operand(2), u);
        if (const Tiling* cur = array(inst.operand(2))) changed |= offer(inst.operand(1), projectTiling(*cur, m.outOfIndex));
        return changed;
      }
      case Opcode::Convolution: {
        // The input takes the output's batch and spatial tiling, the kernel
        // its output-feature tiling (grouped convolutions: spatial only).
        const hlo::ConvolutionDimensionNumbers& cd = *inst.attrs().convDims;
        bool grouped = inst.attrs().featureGroupCount != 1 || inst.attrs().batchGroupCount != 1;
        std::vector<int64_t> lhsPerm(static_cast<size_t>(rank)), rhsPerm(static_cast<size_t>(rank));
        lhsPerm[static_cast<size_t>(cd.inputBatchDimension)] = cd.outputBatchDimension;
        lhsPerm[static_cast<size_t>(cd.inputFeatureDimension)] = cd.outputFeatureDimension;
        rhsPerm[static_cast<size_t>(cd.kernelOutputFeatureDimension)] = cd.outputFeatureDimension;
        rhsPerm[static_cast<size_t>(cd.kernelInputFeatureDimension)] = cd.outputBatchDimension;
        std::vector<int64_t> notKernel = cd.outputSpatialDimensions;
        notKernel.push_back(cd.outputBatchDimension);
        for (size_t i = 0; i < cd.outputSpatialDimensions.size(); ++i) {
          lhsPerm[static_cast<size_t>(cd.inputSpatialDimensions[i])] = cd.outputSpatialDimensions[i];
          rhsPerm[static_cast<size_t>(cd.kernelSpatialDimensions[i])] = cd.outputSpatialDimensions[i];
        }
        Tiling in = grouped ? t.replicatedOn({cd.outputFeatureDimension, cd.outputBatchDimension})
                            : t.replicatedOn({cd.outputFeatureDimension});
        changed |= offer(inst.operand(0), in.transposed(lhsPerm));
        if (!grouped) changed |= offer(inst.operand(1), t.replicatedOn(notKernel).transposed(rhsPerm));
        return changed;
      }
      case Opcode::Dot: {
        DotSpace s = dotSpace(inst);
        Tiling d = dotSpaceFromOutput(t, s);
        changed |= offer(inst.operand(0), dotLhs(d, s));
        changed |= offer(inst.operand(1), dotRhs(d, s));
        return changed;
      }
      default: break;
    }
    if (passThrough(op) || hlo::isElementwise(op) || isShardingCall(inst)) {
      for (int64_t k = 0; k < inst.operandCount(); ++k) {
        const Instruction* o = inst.operand(k);
        if (o->shape().isArray() && o->shape().rank() == rank && rank > 0) {
          if ((op == Opcode::DynamicSlice && k > 0) || (op == Opcode::Pad && k > 0)) continue;
          changed |= offer(o, t);
        }
      }
    }
    return changed;
  }

  void writeBack() {
    for (hlo::Computation* c : comps_)
      for (const auto& inst : c->instructions()) {
        if (fixed_.count(inst.get()) && inst->sharding()) continue;
        const Leaves* l = get(inst.get());
        // Nothing reached it: replicated, as the partitioner reads it.
        inst->common().sharding = toHloSharding(inst->shape(), l ? *l : replicatedLeaves(inst->shape(), n_));
      }
  }

  hlo::Module& module_;
  int64_t n_;
  DiagnosticEngine& diags_;
  std::vector<hlo::Computation*> comps_;
  std::map<const Instruction*, Leaves> set_;
  std::set<const Instruction*> fixed_;
};

}  // namespace

bool propagateShardings(hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags) {
  Propagator p(module, numPartitions, diags);
  return p.run();
}

bool ShardingPropagationPass::run(hlo::Module& module, DiagnosticEngine& diags) {
  if (isPartitioned(module)) return false;
  if (!importShardy(module, diags)) return false;
  SpmdOptions defaults;
  int64_t n = partitionCount(module, options_ ? *options_ : defaults);
  return propagateShardings(module, n, diags);
}

}  // namespace tpu::spmd
