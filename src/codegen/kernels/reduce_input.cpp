// Input fusions: a fusion whose root is a reduction over its trailing
// dimensions, its inputs computed elementwise from parameters shaped like
// them (softmax sums, layer-norm moments), lowers as the reduction kernel
// itself: the parameters' rows stream through VMEM and the elementwise
// instructions run on each vreg before it is folded.
#include "codegen/lowerer.h"

namespace tpu::codegen {

bool Lowerer::inputFusion(const Instruction& in, ReducePrologue* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  // Reduces of inputs of the same dimensions over the same dimensions
  // (variadic ones too): up to 3 operands in all.
  std::vector<const Instruction*> reduces;
  size_t operands = 0;
  for (const auto& up : c.instructions())
    if (up->opcode() == Opcode::Reduce) reduces.push_back(up.get());
  if (reduces.empty()) return false;
  const Instruction* reduce = reduces[0];
  for (const Instruction* red : reduces) {
    if (!red->toApply() || red->attrs().dimensions != reduce->attrs().dimensions ||
        red->operand(0)->shape().dimensions() != reduce->operand(0)->shape().dimensions())
      return false;
    int64_t nv = red->operandCount() / 2;
    operands += static_cast<size_t>(nv);
    for (int64_t j = 0; j < nv; ++j) {
      const Instruction* x = red->operand(j);
      const Instruction* init = red->operand(nv + j);
      if (!x->shape().isArray() || !plainType(x->shape().elementType())) return false;
      if (!init->shape().isScalar() || (init->opcode() != Opcode::Parameter && init->opcode() != Opcode::Constant))
        return false;
    }
  }
  if (operands > 3) return false;
  const std::vector<int64_t>& dims = reduce->operand(0)->shape().dimensions();
  const std::vector<int64_t> outDims = dims.size() > reduce->attrs().dimensions.size() ? [&] {
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
      if (std::find(reduce->attrs().dimensions.begin(), reduce->attrs().dimensions.end(), d) ==
          reduce->attrs().dimensions.end())
        kept.push_back(dims[static_cast<size_t>(d)]);
    return kept;
  }() : std::vector<int64_t>{};
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> reduced = reduce->attrs().dimensions;
  std::sort(reduced.begin(), reduced.end());
  int64_t k = 1, r = 1;
  for (int64_t d = 0; d < rank; ++d) {
    bool red = std::binary_search(reduced.begin(), reduced.end(), d);
    // Only the trailing dimensions: rows of the reduce are contiguous.
    if (red != (d >= rank - static_cast<int64_t>(reduced.size()))) return false;
    (red ? r : k) *= dims[static_cast<size_t>(d)];
  }
  // The shapes lowerReduce gives the segment kernel (rows folded within).
  if (k == 0 || r == 0 || (k >= kVregElems / 8 && (k == 1 || r < kVregElems))) return false;
  ReducePrologue p;
  p.comp = &c;
  p.reduce = reduce;
  p.reduces = reduces;
  // Which side of the reduce each value is on: scalars go with either.
  enum Side { Scalar, Input, Output };
  std::map<const Instruction*, Side> side;
  std::set<const Instruction*> used;
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands()) used.insert(o);
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == c.root() && i.opcode() == Opcode::Tuple) break;
    if (i.opcode() == Opcode::Reduce) {
      for (int64_t j = 0; j < i.operandCount() / 2; ++j)
        if (!side.count(i.operand(j)) || side[i.operand(j)] != Input) return false;
      side[&i] = Output;
      continue;
    }
    if (i.opcode() == Opcode::GetTupleElement) {
      if (i.operand(0)->opcode() != Opcode::Reduce) return false;
      side[&i] = Output;
      p.epilogue.push_back(&i);
      continue;
    }
    if (!i.shape().isArray() || !plainType(i.shape().elementType())) return false;
    if (i.opcode() == Opcode::Parameter) {
      if (!used.count(&i)) continue;
      if (i.shape().isScalar()) p.scalars.push_back({&i, -1});
      else if (i.shape().dimensions() == dims) p.streamed.push_back(&i);
      else return false;
      side[&i] = i.shape().isScalar() ? Scalar : Input;
      continue;
    }
    if (i.opcode() == Opcode::Constant) {
      if (!i.shape().isScalar()) return false;
      side[&i] = Scalar;
      continue;
    }
    if (i.opcode() == Opcode::Broadcast) {
      if (!i.operand(0)->shape().isScalar()) return false;
    } else if (!hlo::isElementwise(i.opcode()) || i.opcode() == Opcode::Rng ||
               i.opcode() == Opcode::BitcastConvert) {
      return false;
    }
    Side s = Scalar;
    for (const Instruction* o : i.operands()) {
      auto it = side.find(o);
      if (it == side.end()) return false;
      if (it->second == Scalar) continue;
      if (s != Scalar && s != it->second) return false;
      s = it->second;
    }
    if (i.opcode() == Opcode::Broadcast)
      s = i.shape().dimensions() == dims ? Input : i.shape().dimensions() == outDims ? Output : Scalar;
    if (s == Scalar && !i.shape().isScalar()) return false;
    if ((s == Input && i.shape().dimensions() != dims) || (s == Output && i.shape().dimensions() != outDims))
      return false;
    side[&i] = s;
    if (s != Scalar) (s == Input ? p.inputSide : p.epilogue).push_back(&i);
  }
  std::vector<const Instruction*> roots;
  if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
  else roots.push_back(c.root());
  uint64_t rowBytes = 0;
  for (const Instruction* v : roots) {
    auto it = side.find(v);
    if (it == side.end() || it->second == Scalar) return false;
    if (!v->shape().isArray() && v->opcode() != Opcode::Reduce) return false;
    (it->second == Input ? p.sideValues : p.results).push_back(v);
    if (it->second == Input) rowBytes += static_cast<uint64_t>(r * typeInfo(v->shape().elementType()).bytes);
  }
  if (p.results.empty()) return false;
  if (p.streamed.empty() || p.streamed.size() > 3 || p.scalars.size() > 4 || p.sideValues.size() > 3) return false;
  // Side outputs are written per batch of whole rows: rows that need
  // streaming in segments take the instruction-by-instruction path.
  if (!p.sideValues.empty()) {
    for (const Instruction* s : p.streamed) rowBytes += static_cast<uint64_t>(r * typeInfo(s->shape().elementType()).bytes);
    if (rowBytes + 8192 > vmemBudget() / 2) return false;
  }
  if (out) *out = std::move(p);
  return true;
}

namespace {

// The value of `i` in `val`, computing scalar constants and scalar ops of
// them (and of hoisted scalars) on first use.
// (A broadcast of a scalar is its splat.)
std::optional<VReg> scalarOrValue(const Instruction* i, std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned,
                                  const std::function<std::optional<VReg>(const Instruction&, const std::vector<VReg>&)>& op) {
  if (auto it = val.find(i); it != val.end()) return it->second;
  std::vector<VReg> ops;
  for (const Instruction* o : i->operands()) {
    auto v = scalarOrValue(o, val, owned, op);
    if (!v) return std::nullopt;
    ops.push_back(*v);
  }
  if (i->opcode() == Opcode::Broadcast) {
    val[i] = ops[0];
    return ops[0];
  }
  auto v = op(*i, ops);
  if (!v) return std::nullopt;
  val[i] = *v;
  owned.push_back(*v);
  return v;
}

}  // namespace

std::optional<std::vector<VReg>> Lowerer::evalReducePrologue(const ReducePrologue& p,
                                                             const std::vector<VReg>& loaded,
                                                             const std::map<const Instruction*, VReg>& scalars) {
  std::map<const Instruction*, VReg> val = scalars;
  std::vector<VReg> owned = loaded;
  for (size_t j = 0; j < p.streamed.size(); ++j) val[p.streamed[j]] = loaded[j];
  auto op = [&](const Instruction& i, const std::vector<VReg>& ops) { return lowerOp(i, ops); };
  for (const Instruction* i : p.inputSide)
    if (!scalarOrValue(i, val, owned, op)) return std::nullopt;
  std::vector<VReg> result;
  for (const Instruction* red : p.reduces)
    for (int64_t j = 0; j < red->operandCount() / 2; ++j)
      result.push_back(vcopy(val.at(red->operand(j)), red->operand(j)->shape().elementType()));
  for (const Instruction* s : p.sideValues) result.push_back(vcopy(val[s], s->shape().elementType()));
  std::set<int> freed;
  for (VReg v : owned)
    if (freed.insert(v.r).second) vfree(v);
  return result;
}

std::optional<std::vector<VReg>> Lowerer::evalReduceEpilogue(const ReducePrologue& p, const std::vector<VReg>& acc,
                                                             const std::map<const Instruction*, VReg>& scalars,
                                                             std::vector<VReg>& owned) {
  std::map<const Instruction*, VReg> val = scalars;
  // Each reduce's accumulators, in operand order.
  std::map<const Instruction*, size_t> first;
  for (size_t at = 0, q = 0; q < p.reduces.size(); ++q) {
    first[p.reduces[q]] = at;
    if (p.reduces[q]->shape().isArray()) val[p.reduces[q]] = acc[at];
    at += static_cast<size_t>(p.reduces[q]->operandCount() / 2);
  }
  for (const Instruction* i : p.epilogue)
    if (i->opcode() == Opcode::GetTupleElement)
      val[i] = acc[first.at(i->operand(0)) + static_cast<size_t>(i->attrs().tupleIndex)];
  auto op = [&](const Instruction& i, const std::vector<VReg>& ops) { return lowerOp(i, ops); };
  for (const Instruction* i : p.epilogue)
    if (!scalarOrValue(i, val, owned, op)) return std::nullopt;
  std::vector<VReg> result;
  for (const Instruction* v : p.results) {
    if (v->opcode() == Opcode::Reduce && !v->shape().isArray()) {
      for (int64_t j = 0; j < v->operandCount() / 2; ++j) result.push_back(acc[first.at(v) + static_cast<size_t>(j)]);
      continue;
    }
    result.push_back(val.at(v));
  }
  return result;
}

bool Lowerer::lowerInputFusion(const Instruction& in, ReducePrologue p) {
  beginKernel(in, "fusion-reduce");
  auto bufOf = [&](const Instruction* param) {
    return leaves_[in.operand(param->attrs().parameterNumber)][0];
  };
  // The result leaves: reduced values and side outputs, in the root's order.
  std::vector<int> reducedBufs;
  const std::vector<int>& leaves = leaves_[&in];
  {
    const Computation& c = *p.comp;
    std::vector<const Instruction*> roots;
    if (c.root()->opcode() == Opcode::Tuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
    else roots.push_back(c.root());
    size_t nextSide = 0, leaf = 0;
    for (const Instruction* root : roots) {
      size_t n = arrayLeaves(root->shape()).size();
      if (leaf + n > leaves.size()) return fail(in, "llo-gen: internal error: fusion result leaves");
      bool sideOut = nextSide < p.sideValues.size() && root == p.sideValues[nextSide];
      for (size_t j = 0; j < n; ++j) (sideOut ? p.sideBufs : reducedBufs).push_back(leaves[leaf + j]);
      nextSide += sideOut ? 1 : 0;
      leaf += n;
    }
    if (leaf != leaves.size()) return fail(in, "llo-gen: internal error: fusion result leaves");
  }
  uint64_t bytes = 0;
  for (int b : leaves) bytes += bufs_[b].bytes;
  for (const Instruction* param : p.streamed) {
    p.streamedBufs.push_back(bufOf(param));
    bytes += bufs_[p.streamedBufs.back()].bytes;
  }
  for (auto& [param, buf] : p.scalars) buf = bufOf(param);
  const Shape& xs = p.reduce->operand(0)->shape();
  int64_t r = 1;
  for (int64_t d : p.reduce->attrs().dimensions) r *= xs.dimension(d);
  int64_t k = *xs.elementCount() / r;
  bool ok = emitReduceSegments(in, k, r, {}, {}, reducedBufs, *p.reduce->toApply(), &p);
  endKernel(static_cast<double>(*xs.elementCount()) * static_cast<double>(p.comp->instructionCount()), bytes, 0);
  return ok && !failed_;
}

}  // namespace tpu::codegen
