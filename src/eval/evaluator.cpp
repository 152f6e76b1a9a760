// The computation walker, control flow, tuples, async wrappers, random
// numbers, custom calls and the device driver of evaluate().
#include "eval/evaluator.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eval/collectives.h"
#include "eval/elided.h"
#include "eval/interp.h"
#include "eval/kernels.h"
#include "eval/rng.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;

namespace {

Value zerosOfShape(const hlo::Shape& s) {
  if (s.isTuple()) {
    std::vector<Value> e;
    for (const hlo::Shape& x : s.tupleElements()) e.push_back(zerosOfShape(x));
    return Value::tuple(std::move(e));
  }
  if (!s.isArray()) return Value::token();
  return Value::zeros(s.elementType(), s.dimensions());
}

bool isScalarOrScalarTuple(const hlo::Shape& s) {
  if (s.isTuple()) {
    for (const hlo::Shape& e : s.tupleElements())
      if (!e.isScalar()) return false;
    return true;
  }
  return s.isScalar();
}

}  // namespace

std::optional<BinaryOp> simpleBinaryOp(const hlo::Computation& c) {
  const Instruction* root = c.root();
  if (!root || root->operandCount() != 2 || c.parameterCount() != 2 || !root->shape().isScalar()) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::Parameter || b->opcode() != Opcode::Parameter) return std::nullopt;
  if (a->attrs().parameterNumber == b->attrs().parameterNumber) return std::nullopt;
  if (a->shape().elementType() != root->shape().elementType() ||
      b->shape().elementType() != root->shape().elementType())
    return std::nullopt;
  bool swapped = a->attrs().parameterNumber == 1;
  switch (root->opcode()) {
    case Opcode::Add: return BinaryOp::Add;
    case Opcode::Multiply: return BinaryOp::Mul;
    case Opcode::Maximum: return BinaryOp::Max;
    case Opcode::Minimum: return BinaryOp::Min;
    case Opcode::And: return BinaryOp::And;
    case Opcode::Or: return BinaryOp::Or;
    case Opcode::Xor: return BinaryOp::Xor;
    case Opcode::Subtract: return swapped ? std::nullopt : std::optional(BinaryOp::Sub);
    default: return std::nullopt;
  }
}

bool isOverwriteComputation(const hlo::Computation& c) {
  const Instruction* root = c.root();
  return root && root->opcode() == Opcode::Parameter && root->attrs().parameterNumber == 1 && c.parameterCount() == 2;
}

std::optional<CompareDir> compareDir(hlo::ComparisonDirection d) {
  switch (d) {
    case hlo::ComparisonDirection::EQ: return CompareDir::Eq;
    case hlo::ComparisonDirection::NE: return CompareDir::Ne;
    case hlo::ComparisonDirection::LT: return CompareDir::Lt;
    case hlo::ComparisonDirection::LE: return CompareDir::Le;
    case hlo::ComparisonDirection::GT: return CompareDir::Gt;
    case hlo::ComparisonDirection::GE: return CompareDir::Ge;
  }
  return std::nullopt;
}

bool Interp::error(const Instruction& inst, const std::string& message) {
  diags_.error(inst.location(), fmt::format("{} '{}': {}", hlo::opcodeName(inst.opcode()), inst.name(), message));
  return false;
}

bool Interp::countStep(const Instruction& inst) {
  const int64_t limit = shared_.options.maxSteps;
  if (limit <= 0 || ++steps_ <= limit) return true;
  if (loops_.empty()) {
    error(inst, fmt::format("the program did not finish within --max-steps={} evaluated instructions (raise "
                            "--max-steps, or set it to 0 for no limit)",
                            limit));
  } else {
    const RunningLoop& running = loops_.back();
    error(*running.loop,
          fmt::format("the loop did not finish within --max-steps={} evaluated instructions ({} "
                      "iterations so far); its condition may never become false (raise "
                      "--max-steps, or set it to 0 for no limit)",
                      limit, running.iterations));
  }
  return false;
}

namespace {

// Bytes of the arrays of `shape` (tuple leaves added up).
int64_t totalBytes(const hlo::Shape& shape) {
  if (!shape.isTuple()) return shape.byteSize().value_or(0);
  int64_t bytes = 0;
  for (const hlo::Shape& element : shape.tupleElements()) bytes += totalBytes(element);
  return bytes;
}

}  // namespace

void Interp::reportOutOfMemory(const Instruction& inst) {
  error(inst, fmt::format("out of host memory for its result {} ({} bytes)", inst.shape().toString(false),
                          totalBytes(inst.shape())));
}

const Interp::Plan& Interp::plan(const hlo::Computation& c) {
  auto it = plans_.find(&c);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const auto& insts = c.instructions();
  std::unordered_map<const Instruction*, int> pos;
  for (size_t i = 0; i < insts.size(); ++i) pos[insts[i].get()] = static_cast<int>(i);
  // Reachable from the root (operands and control predecessors), then
  // emitted in a topological order (iterative DFS post-order).
  std::vector<int> state(insts.size(), 0);  // 0 new, 1 open, 2 done
  std::vector<int> order;
  if (c.root()) {
    std::vector<std::pair<const Instruction*, size_t>> stack{{c.root(), 0}};
    state[pos[c.root()]] = 1;
    while (!stack.empty()) {
      auto& [inst, next] = stack.back();
      size_t nOps = inst->operands().size();
      size_t total = nOps + inst->controlPredecessors().size();
      if (next < total) {
        const Instruction* dep = next < nOps ? inst->operand(static_cast<int64_t>(next))
                                             : inst->controlPredecessors()[next - nOps];
        ++next;
        auto pi = pos.find(dep);
        if (pi == pos.end() || state[pi->second] != 0) continue;
        state[pi->second] = 1;
        stack.push_back({dep, 0});
      } else {
        int me = pos[inst];
        state[me] = 2;
        order.push_back(me);
        stack.pop_back();
      }
    }
  }
  std::vector<int> slotOf(insts.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) slotOf[order[i]] = static_cast<int>(i);
  p->order.reserve(order.size());
  p->operandSlots.resize(order.size());
  p->useCount.assign(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const Instruction* inst = insts[order[i]].get();
    p->order.push_back(inst);
    for (const Instruction* op : inst->operands()) {
      auto pi = pos.find(op);
      int s = pi == pos.end() ? -1 : slotOf[pi->second];
      p->operandSlots[i].push_back(s);
      if (s >= 0) ++p->useCount[s];
    }
    if (inst->opcode() == Opcode::Parameter) {
      auto n = static_cast<size_t>(inst->attrs().parameterNumber);
      if (p->paramSlot.size() <= n) p->paramSlot.resize(n + 1, -1);
      p->paramSlot[n] = static_cast<int>(i);
    }
  }
  if (c.root()) p->rootSlot = slotOf[pos[c.root()]];
  const Plan& ref = *p;
  plans_[&c] = std::move(p);
  return ref;
}

bool Interp::liftable(const hlo::Computation& c) {
  auto it = liftable_.find(&c);
  if (it != liftable_.end()) return it->second;
  bool ok = c.root() != nullptr && isScalarOrScalarTuple(c.root()->shape());
  for (const auto& inst : c.instructions()) {
    if (!ok) break;
    Opcode op = inst->opcode();
    if (op == Opcode::Tuple || op == Opcode::GetTupleElement) {
      ok = isScalarOrScalarTuple(inst->shape());
      continue;
    }
    bool allowed = op == Opcode::Parameter || op == Opcode::Constant ||
                   (hlo::isElementwise(op) && op != Opcode::StochasticConvert);
    ok = allowed && inst->shape().isScalar();
    if (op == Opcode::Constant && ok) ok = inst->attrs().literal.has_value();
  }
  liftable_[&c] = ok;
  return ok;
}

std::optional<Value> Interp::call(const hlo::Computation& c, std::span<const Value> args) {
  const Plan& p = plan(c);
  if (p.rootSlot < 0) {
    diags_.error(c.location(), fmt::format("computation '{}' has no root instruction", c.name()));
    return std::nullopt;
  }
  std::vector<Value> vals(p.order.size());
  std::vector<int> remaining = p.useCount;
  std::vector<const Value*> ops;
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Instruction& inst = *p.order[i];
    if (inst.opcode() == Opcode::Parameter) {
      auto n = static_cast<size_t>(inst.attrs().parameterNumber);
      if (n >= args.size()) {
        error(inst, fmt::format("parameter {} of '{}' has no argument ({} given)", n, c.name(), args.size()));
        return std::nullopt;
      }
      vals[i] = args[n];
      continue;
    }
    ops.clear();
    for (int s : p.operandSlots[i]) {
      if (s < 0) {
        error(inst, "operand is not an instruction of the same computation");
        return std::nullopt;
      }
      ops.push_back(&vals[static_cast<size_t>(s)]);
    }
    if (!countStep(inst)) return std::nullopt;
    std::optional<Value> r;
    try {
      r = evalInstruction(inst, ops);
    } catch (const std::bad_alloc&) {
      reportOutOfMemory(inst);
    }
    if (!r) return std::nullopt;
    vals[i] = std::move(*r);
    for (int s : p.operandSlots[i]) {
      if (--remaining[static_cast<size_t>(s)] == 0 && s != p.rootSlot) vals[static_cast<size_t>(s)] = Value();
    }
  }
  return std::move(vals[static_cast<size_t>(p.rootSlot)]);
}

std::optional<std::vector<Value>> Interp::callLanes(const hlo::Computation& c, std::span<const Value> args,
                                                    int64_t lanes) {
  std::vector<Value> results;
  if (liftable(c) && lanes_ == 0) {
    lanes_ = lanes;
    std::optional<Value> r = call(c, args);
    lanes_ = 0;
    if (!r) return std::nullopt;
    if (r->isTuple()) results = r->elements();
    else results.push_back(std::move(*r));
    for (const Value& v : results)
      if (!v.isArray() || v.count() != lanes) {
        diags_.error(c.location(), fmt::format("computation '{}' did not produce {} lanes", c.name(), lanes));
        return std::nullopt;
      }
    return results;
  }
  // One call per lane on scalars.
  const hlo::Shape& rs = c.root()->shape();
  std::vector<hlo::Shape> outShapes = rs.isTuple() ? rs.tupleElements() : std::vector<hlo::Shape>{rs};
  for (const hlo::Shape& s : outShapes) {
    if (!s.isScalar()) {
      diags_.error(c.location(), fmt::format("computation '{}' must return scalars", c.name()));
      return std::nullopt;
    }
    results.push_back(Value::array(s.elementType(), {lanes}));
  }
  std::vector<Value> scalars(args.size());
  int64_t saved = lanes_;
  lanes_ = 0;
  for (int64_t l = 0; l < lanes; ++l) {
    for (size_t a = 0; a < args.size(); ++a) scalars[a] = sliceFlat(args[a], l, 1).reshaped({});
    std::optional<Value> r = call(c, scalars);
    if (!r) {
      lanes_ = saved;
      return std::nullopt;
    }
    for (size_t k = 0; k < results.size(); ++k) {
      const Value& e = r->isTuple() ? r->elements()[k] : *r;
      std::memcpy(results[k].mutableRaw() + l * results[k].elementBytes(), e.raw(),
                  static_cast<size_t>(e.elementBytes()));
    }
  }
  lanes_ = saved;
  return results;
}

std::optional<Value> Interp::combine(const Instruction& inst, const hlo::Computation& comb, const Value& a,
                                     const Value& b) {
  if (auto op = simpleBinaryOp(comb); op && a.type() == b.type()) {
    if (auto r = binaryArrays(*op, a, b)) return r;
  }
  if (isOverwriteComputation(comb)) return b;
  const Value args[2] = {a.reshaped({a.count()}), b.reshaped({b.count()})};
  auto r = callLanes(comb, args, a.count());
  if (!r) return std::nullopt;
  if (r->size() != 1) {
    error(inst, "combiner must return one value");
    return std::nullopt;
  }
  return (*r)[0].reshaped(a.dims());
}

std::optional<Value> Interp::evalInstruction(const Instruction& inst, std::span<const Value* const> ops) {
  const Opcode op = inst.opcode();
  const auto& attrs = inst.attrs();
  auto requireArrays = [&]() {
    for (const Value* v : ops)
      if (!v->isArray()) return error(inst, "operand must be an array");
    return true;
  };
  if ((hlo::isElementwise(op) && op != Opcode::Copy) || op == Opcode::BitcastConvert) {
    if (!requireArrays()) return std::nullopt;
    return evalElementwise(inst, ops);
  }
  switch (op) {
    case Opcode::Constant: {
      auto it = shared_.constants.find(&inst);
      if (it == shared_.constants.end()) {
        error(inst, "constant has no value");
        return std::nullopt;
      }
      if (lanes_ > 0 && it->second.isArray() && it->second.rank() == 0) return broadcastScalar(it->second, {lanes_});
      return it->second;
    }
    case Opcode::Copy:
    case Opcode::OptimizationBarrier:
    case Opcode::Domain:
    case Opcode::AddDependency:
    case Opcode::SetDimensionSize:
    case Opcode::AsyncUpdate:
      return *ops[0];
    case Opcode::AfterAll: return Value::token();
    case Opcode::Tuple: {
      std::vector<Value> e;
      e.reserve(ops.size());
      for (const Value* v : ops) e.push_back(*v);
      return Value::tuple(std::move(e));
    }
    case Opcode::GetTupleElement: {
      const Value& t = *ops[0];
      if (!t.isTuple() || attrs.tupleIndex < 0 || attrs.tupleIndex >= static_cast<int64_t>(t.elements().size())) {
        error(inst, "operand is not a tuple with that index");
        return std::nullopt;
      }
      return t.elements()[static_cast<size_t>(attrs.tupleIndex)];
    }
    case Opcode::GetDimensionSize: {
      Value v = Value::array(ElementType::S32, {});
      int64_t d = attrs.dimensions.empty() ? 0 : attrs.dimensions[0];
      if (!ops[0]->isArray() || d < 0 || d >= ops[0]->rank()) {
        error(inst, "dimension out of range");
        return std::nullopt;
      }
      *v.mutableAs<int32_t>() = static_cast<int32_t>(ops[0]->dims()[static_cast<size_t>(d)]);
      return v;
    }
    case Opcode::ReplicaId:
    case Opcode::PartitionId: {
      Value v = Value::array(ElementType::U32, {});
      *v.mutableAs<uint32_t>() = static_cast<uint32_t>(op == Opcode::ReplicaId ? replica_ : partition_);
      return v;
    }
    case Opcode::Call:
    case Opcode::Fusion: {
      const hlo::Computation* c = inst.toApply();
      if (!c) {
        error(inst, "no called computation");
        return std::nullopt;
      }
      std::vector<Value> args;
      for (const Value* v : ops) args.push_back(*v);
      return call(*c, args);
    }
    case Opcode::While: {
      const hlo::Computation* cond = inst.whileCondition();
      const hlo::Computation* body = inst.whileBody();
      if (!cond || !body) {
        error(inst, "needs condition and body");
        return std::nullopt;
      }
      Value state = *ops[0];
      loops_.push_back({&inst, 0});
      struct PopLoop {
        std::vector<RunningLoop>& loops;
        ~PopLoop() { loops.pop_back(); }
      } popLoop{loops_};
      for (int64_t iter = 0;; loops_.back().iterations = ++iter) {
        if (shared_.options.maxWhileIterations > 0 && iter >= shared_.options.maxWhileIterations) {
          error(inst, fmt::format("more than {} iterations", shared_.options.maxWhileIterations));
          return std::nullopt;
        }
        std::optional<Value> c = call(*cond, std::span<const Value>(&state, 1));
        if (!c) return std::nullopt;
        if (!c->isArray() || c->count() != 1) {
          error(inst, "condition must return pred[]");
          return std::nullopt;
        }
        if (c->raw()[0] == 0) break;
        std::optional<Value> next = call(*body, std::span<const Value>(&state, 1));
        if (!next) return std::nullopt;
        state = std::move(*next);
      }
      return state;
    }
    case Opcode::Conditional: {
      const auto& branches = inst.calledComputations();
      if (branches.empty() || ops.size() != branches.size() + 1 || !ops[0]->isArray() || ops[0]->count() != 1) {
        error(inst, "malformed conditional");
        return std::nullopt;
      }
      int64_t n = static_cast<int64_t>(branches.size());
      int64_t b;
      if (ops[0]->type() == ElementType::Pred) {
        b = ops[0]->raw()[0] ? 0 : 1;
      } else {
        b = ops[0]->scalarAsInt();
        if (b < 0 || b >= n) b = n - 1;
      }
      if (b >= n) {
        error(inst, "branch index out of range");
        return std::nullopt;
      }
      return call(*branches[static_cast<size_t>(b)], std::span<const Value>(ops[static_cast<size_t>(b) + 1], 1));
    }
    case Opcode::Map:
      if (!requireArrays()) return std::nullopt;
      return evalMap(inst, ops);
    case Opcode::AsyncStart: {
      const hlo::Computation* c = inst.toApply();
      if (!c) {
        error(inst, "no wrapped computation");
        return std::nullopt;
      }
      std::vector<Value> args;
      for (const Value* v : ops) args.push_back(*v);
      std::optional<Value> r = call(*c, args);
      if (!r) return std::nullopt;
      std::vector<Value> e{Value::tuple(args), std::move(*r)};
      const hlo::Shape& s = inst.shape();
      for (int64_t i = 2; s.isTuple() && i < s.tupleSize(); ++i) e.push_back(zerosOfShape(s.tupleElement(i)));
      return Value::tuple(std::move(e));
    }
    case Opcode::AsyncDone:
    case Opcode::AllGatherDone:
    case Opcode::CollectivePermuteDone:
    case Opcode::CopyDone: {
      const Value& t = *ops[0];
      size_t idx = op == Opcode::CopyDone ? 0 : 1;
      if (!t.isTuple() || t.elements().size() <= idx) {
        if (op != Opcode::AsyncDone && !t.isTuple()) return t;
        error(inst, "operand is not the tuple of its start instruction");
        return std::nullopt;
      }
      return t.elements()[idx];
    }
    case Opcode::AllReduceDone: return *ops[0];
    case Opcode::CopyStart: {
      std::vector<Value> e{*ops[0], *ops[0]};
      const hlo::Shape& s = inst.shape();
      for (int64_t i = 2; s.isTuple() && i < s.tupleSize(); ++i) e.push_back(zerosOfShape(s.tupleElement(i)));
      return Value::tuple(std::move(e));
    }
    case Opcode::Rng:
    case Opcode::RngGetAndUpdateState: return evalRng(inst, ops);
    case Opcode::RngBitGenerator:
      if (!requireArrays()) return std::nullopt;
      return evalRngBitGenerator(inst, *ops[0]);
    case Opcode::CustomCall: return evalCustomCall(inst, ops);
    case Opcode::Reduce:
      if (!requireArrays()) return std::nullopt;
      return evalReduce(inst, ops);
    case Opcode::ReduceWindow:
      if (!requireArrays()) return std::nullopt;
      return evalReduceWindow(inst, ops);
    case Opcode::SelectAndScatter:
      if (!requireArrays()) return std::nullopt;
      return evalSelectAndScatter(inst, ops);
    case Opcode::Gather:
      if (!requireArrays()) return std::nullopt;
      return evalGather(inst, *ops[0], *ops[1]);
    case Opcode::Scatter:
      if (!requireArrays()) return std::nullopt;
      return evalScatter(inst, ops);
    case Opcode::Sort:
      if (!requireArrays()) return std::nullopt;
      return evalSort(inst, ops);
    case Opcode::TopK:
      if (!requireArrays()) return std::nullopt;
      return evalTopK(inst, *ops[0], attrs.k, attrs.largest);
    case Opcode::Dot:
      if (!requireArrays()) return std::nullopt;
      if (ops.size() != 2) {
        error(inst, "sparse dot (meta operands) is not supported");
        return std::nullopt;
      }
      return evalDot(inst, *ops[0], *ops[1]);
    case Opcode::Convolution:
      if (!requireArrays()) return std::nullopt;
      return evalConvolution(inst, *ops[0], *ops[1]);
    case Opcode::BatchNormTraining:
    case Opcode::BatchNormInference:
    case Opcode::BatchNormGrad:
      if (!requireArrays()) return std::nullopt;
      return evalBatchNorm(inst, ops);
    case Opcode::Fft:
      if (!requireArrays()) return std::nullopt;
      return evalFft(inst, *ops[0]);
    case Opcode::Broadcast:
    case Opcode::Reshape:
    case Opcode::DynamicReshape:
    case Opcode::Bitcast:
    case Opcode::Transpose:
    case Opcode::Slice:
    case Opcode::DynamicSlice:
    case Opcode::DynamicUpdateSlice:
    case Opcode::Concatenate:
    case Opcode::Pad:
    case Opcode::Reverse:
    case Opcode::Iota:
      if (!requireArrays()) return std::nullopt;
      return evalShapeOp(inst, ops);
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::AllGather:
    case Opcode::AllGatherStart:
    case Opcode::ReduceScatter:
    case Opcode::AllToAll:
    case Opcode::CollectivePermute:
    case Opcode::CollectivePermuteStart:
    case Opcode::CollectiveBroadcast:
      return evalCollective(inst, ops);
    default: break;
  }
  error(inst, "opcode is not supported by the interpreter");
  return std::nullopt;
}

// ---------------------------------------------------------------- rng

std::optional<Value> Interp::evalRngBitGenerator(const Instruction& inst, const Value& state) {
  const hlo::Shape& s = inst.shape();
  if (!s.isTuple() || s.tupleSize() != 2 || !s.tupleElement(1).isArray()) {
    error(inst, "result must be (state, bits)");
    return std::nullopt;
  }
  if (state.type() != ElementType::U64 && state.type() != ElementType::S64) {
    error(inst, "state must be u64");
    return std::nullopt;
  }
  RngAlgorithm alg = inst.attrs().rngAlgorithm == hlo::RngAlgorithm::Philox ? RngAlgorithm::Philox
                                                                           : RngAlgorithm::ThreeFry;
  const hlo::Shape& bs = s.tupleElement(1);
  Value bits = Value::array(bs.elementType(), bs.dimensions());
  Value newState = Value::array(state.type(), state.dims());
  int bytes = bits.elementBytes();
  // A 16-byte element (c128) takes two 8-byte draws, four words of the stream.
  if (!rngBitGenerator(alg, std::span<const uint64_t>(state.as<uint64_t>(), static_cast<size_t>(state.count())),
                       std::span<uint64_t>(newState.mutableAs<uint64_t>(), static_cast<size_t>(state.count())),
                       bits.mutableRaw(), bytes == 16 ? 2 * bits.count() : bits.count(), bytes == 16 ? 8 : bytes)) {
    error(inst, fmt::format("state of {} elements does not suit {}", state.count(),
                            hlo::toString(inst.attrs().rngAlgorithm)));
    return std::nullopt;
  }
  // Narrow floats: random bits are fine as raw storage; sub-byte ints keep their width.
  if (auto rep = typeRep(bits.type()); rep && rep->bits < 8 && !rep->narrow)
    truncateIntKernel(rep->k, bits.mutableRaw(), bits.count(), rep->bits);
  return Value::tuple({newState, bits});
}

std::optional<Value> Interp::evalRng(const Instruction& inst, std::span<const Value* const> ops) {
  // A ThreeFry stream keyed by the seed option, the device and a per-call counter.
  const uint64_t key = shared_.options.rngSeed ^ (static_cast<uint64_t>(replica_ * shared_.partitions + partition_) << 40);
  if (inst.opcode() == Opcode::RngGetAndUpdateState) {
    Value v = Value::array(ElementType::U64, {2});
    v.mutableAs<uint64_t>()[0] = key;
    v.mutableAs<uint64_t>()[1] = rngCounter_;
    rngCounter_ += static_cast<uint64_t>(std::max<int64_t>(inst.attrs().rngDelta, 0));
    return v;
  }
  const hlo::Shape& s = inst.shape();
  if (!s.isArray() || ops.size() != 2 || !ops[0]->isArray() || !ops[1]->isArray()) {
    error(inst, "expects two scalar operands and an array result");
    return std::nullopt;
  }
  int64_t n = s.elementCount().value_or(0);
  std::vector<uint64_t> words(static_cast<size_t>(n));
  uint64_t st[2] = {key, rngCounter_};
  uint64_t ns[2];
  rngBitGenerator(RngAlgorithm::ThreeFry, st, ns, words.data(), n, 8);
  rngCounter_ = ns[1];
  Value lo = convertArray(*ops[0], ElementType::F64);
  Value hi = convertArray(*ops[1], ElementType::F64);
  double a = *lo.as<double>(), b = *hi.as<double>();
  Value out = Value::array(ElementType::F64, s.dimensions());
  double* o = out.mutableAs<double>();
  const bool normal = inst.attrs().distribution == hlo::RngDistribution::Normal;
  const bool isInt = hlo::isIntegerType(s.elementType());
  for (int64_t i = 0; i < n; ++i) {
    double u = static_cast<double>(words[static_cast<size_t>(i)] >> 11) * 0x1.0p-53;
    if (normal) {
      // Box-Muller on two halves of the word.
      double u1 = (static_cast<double>(words[static_cast<size_t>(i)] & 0xffffffffu) + 1.0) * 0x1.0p-32;
      double u2 = static_cast<double>(words[static_cast<size_t>(i)] >> 32) * 0x1.0p-32;
      o[i] = a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    } else if (isInt) {
      double span = b - a;
      o[i] = span > 0 ? a + std::floor(u * span) : a;
    } else {
      o[i] = a + (b - a) * u;
      if (o[i] >= b && b > a) o[i] = std::nextafter(b, a);
    }
  }
  return convertArray(out, s.elementType());
}

// ---------------------------------------------------------------- fft

namespace {

void fft1d(std::complex<double>* data, int64_t n, int64_t stride, bool inverse, std::vector<std::complex<double>>& tmp) {
  tmp.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tmp[static_cast<size_t>(i)] = data[i * stride];
  std::vector<std::complex<double>> out(static_cast<size_t>(n));
  const double sign = inverse ? 1.0 : -1.0;
  if ((n & (n - 1)) == 0 && n > 1) {
    // Iterative radix-2.
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(tmp[static_cast<size_t>(i)], tmp[static_cast<size_t>(j)]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      double ang = sign * 2 * M_PI / static_cast<double>(len);
      for (int64_t i = 0; i < n; i += len)
        for (int64_t k = 0; k < len / 2; ++k) {
          std::complex<double> w = std::polar(1.0, ang * static_cast<double>(k));
          auto u = tmp[static_cast<size_t>(i + k)];
          auto v = tmp[static_cast<size_t>(i + k + len / 2)] * w;
          tmp[static_cast<size_t>(i + k)] = u + v;
          tmp[static_cast<size_t>(i + k + len / 2)] = u - v;
        }
    }
    out = tmp;
  } else {
    for (int64_t k = 0; k < n; ++k) {
      std::complex<double> acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += tmp[static_cast<size_t>(j)] * std::polar(1.0, sign * 2 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n));
      out[static_cast<size_t>(k)] = acc;
    }
  }
  for (int64_t i = 0; i < n; ++i) data[i * stride] = inverse ? out[static_cast<size_t>(i)] / static_cast<double>(n) : out[static_cast<size_t>(i)];
}

// Transforms the trailing `lengths.size()` dims of a c128 array in place.
void fftTrailing(std::vector<std::complex<double>>& a, const std::vector<int64_t>& dims, size_t nd, bool inverse) {
  std::vector<std::complex<double>> tmp;
  std::vector<int64_t> strides = rowMajorStrides(dims);
  int64_t total = elementCount(dims);
  for (size_t d = dims.size() - nd; d < dims.size(); ++d) {
    int64_t n = dims[d], s = strides[d];
    if (n <= 1) continue;
    for (int64_t base = 0; base < total; ++base) {
      if ((base / s) % n != 0) continue;
      fft1d(a.data() + base, n, s, inverse, tmp);
    }
  }
}

}  // namespace

std::optional<Value> Interp::evalFft(const Instruction& inst, const Value& x) {
  const auto& len = inst.attrs().fftLength;
  const hlo::Shape& s = inst.shape();
  if (len.empty() || len.size() > 3 || static_cast<int64_t>(len.size()) > x.rank() || !s.isArray()) {
    error(inst, "fft_length must name 1 to 3 trailing dimensions");
    return std::nullopt;
  }
  const size_t nd = len.size();
  std::vector<int64_t> dims = x.dims();
  for (size_t i = 0; i < nd; ++i) dims[dims.size() - nd + i] = len[i];
  const hlo::FftType type = inst.attrs().fftType;
  // Work in c128 on the logical (full-length) complex array.
  std::vector<std::complex<double>> a(static_cast<size_t>(elementCount(dims)));
  Value xc = convertArray(x, ElementType::C128);
  const auto* src = xc.as<std::complex<double>>();
  std::vector<int64_t> xs = rowMajorStrides(x.dims()), ds = rowMajorStrides(dims);
  int64_t total = elementCount(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t off = 0;
    bool inside = true;
    std::vector<int64_t> mirror = idx;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (idx[d] >= x.dims()[d]) inside = false;
      off += idx[d] * xs[d];
    }
    if (inside) a[static_cast<size_t>(lin)] = src[off];
    else if (type == hlo::FftType::Irfft) {
      // Hermitian completion of the last dim: X[k] = conj(X[n-k]) over all transformed dims.
      int64_t moff = 0;
      bool ok = true;
      for (size_t d = 0; d < dims.size(); ++d) {
        int64_t v = idx[d];
        if (d >= dims.size() - nd) v = (dims[d] - v) % dims[d];
        if (v >= x.dims()[d]) ok = false;
        moff += v * xs[d];
      }
      if (ok) a[static_cast<size_t>(lin)] = std::conj(src[moff]);
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  bool inverse = type == hlo::FftType::Ifft || type == hlo::FftType::Irfft;
  fftTrailing(a, dims, nd, inverse);
  // Result: full complex (FFT/IFFT), first n/2+1 of the last dim (RFFT), real part (IRFFT).
  Value out128 = Value::array(ElementType::C128, s.dimensions());
  auto* o = out128.mutableAs<std::complex<double>>();
  std::vector<int64_t> os = rowMajorStrides(s.dimensions());
  int64_t outTotal = out128.count();
  std::vector<int64_t> oi(s.dimensions().size(), 0);
  for (int64_t lin = 0; lin < outTotal; ++lin) {
    int64_t off = 0;
    for (size_t d = 0; d < oi.size(); ++d) off += oi[d] * ds[d];
    o[lin] = a[static_cast<size_t>(off)];
    for (size_t d = oi.size(); d-- > 0;) {
      if (++oi[d] < s.dimensions()[d]) break;
      oi[d] = 0;
    }
  }
  return convertArray(out128, s.elementType());
}

// ---------------------------------------------------------------- custom calls

std::optional<Value> Interp::evalCustomCall(const Instruction& inst, std::span<const Value* const> ops) {
  const std::string& target = inst.attrs().customCallTarget;
  const hlo::Shape& s = inst.shape();
  static const char* const kIdentity[] = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                          "MoveToHost", "MoveToDevice", "annotate_device_placement",
                                          "AwsNeuronTransferWithStaticRing", "LayoutConstraint",
                                          "X64Combine", "InspectSharding"};
  for (const char* t : kIdentity) {
    if (target != t) continue;
    if (ops.size() == 1 && ops[0]->isArray() && s.isArray()) {
      if (ops[0]->dims() == s.dimensions() && ops[0]->type() == s.elementType()) return *ops[0];
      // Full <-> shard shape on simulated devices: keep the leading block
      // (full-to-shard) or place the block at the origin (shard-to-full).
      if (ops[0]->type() == s.elementType() && ops[0]->rank() == s.rank()) {
        Value out = Value::zeros(s.elementType(), s.dimensions());
        std::vector<int64_t> common(s.dimensions().size());
        for (size_t d = 0; d < common.size(); ++d) common[d] = std::min(s.dimensions()[d], ops[0]->dims()[d]);
        if (elementCount(common) > 0)
          stridedCopy(static_cast<size_t>(out.elementBytes()), common, ops[0]->raw(), 0,
                      rowMajorStrides(ops[0]->dims()), out.mutableRaw(), 0, rowMajorStrides(s.dimensions()));
        return out;
      }
    }
    if (ops.size() == 1 && !ops[0]->isArray()) return *ops[0];
    error(inst, fmt::format("custom-call target \"{}\" expects one operand of the result's shape", target));
    return std::nullopt;
  }
  if (target == "TopK") {
    // XLA's custom-call form of topk: the k largest along the last
    // dimension, k being the last dimension of the (values, indices) result.
    if (ops.size() != 1 || !ops[0]->isArray() || !s.isTuple() || s.tupleSize() != 2 || !s.tupleElement(0).isArray() ||
        s.tupleElement(0).rank() != ops[0]->rank() || s.tupleElement(1).elementType() != ElementType::S32) {
      error(inst, "custom-call target \"TopK\" expects one array and returns (values, s32 indices) of its rank");
      return std::nullopt;
    }
    return evalTopK(inst, *ops[0], s.tupleElement(0).rank() ? s.tupleElement(0).dimensions().back() : 0, true);
  }
  if (target == "AwsNeuronGelu" || target == "AwsNeuronGeluBackward") {
    // Exact (erf) GELU and its derivative, in f64 then rounded to the type.
    if (ops.size() != 1 || !ops[0]->isArray()) {
      error(inst, fmt::format("custom-call target \"{}\" expects one array operand", target));
      return std::nullopt;
    }
    Value x = convertArray(*ops[0], ElementType::F64);
    Value y = Value::array(ElementType::F64, x.dims());
    const double* xi = x.as<double>();
    double* yo = y.mutableAs<double>();
    const bool back = target == "AwsNeuronGeluBackward";
    for (int64_t i = 0; i < x.count(); ++i) {
      double v = xi[i];
      double cdf = 0.5 * (1.0 + std::erf(v * M_SQRT1_2));
      yo[i] = back ? cdf + v * std::exp(-0.5 * v * v) * 0.3989422804014327 : v * cdf;
    }
    return convertArray(y, ops[0]->type());
  }
  if (target == "__cublas$gemm" || target == "__cublas$lt$matmul") {
    // GPU GEMM rewrite: alpha * dot(lhs, rhs) (+ beta * c), dims in backend_config.
    nlohmann::json cfg = nlohmann::json::parse(inst.backendConfig().text, nullptr, false);
    if (cfg.is_discarded() || !cfg.contains("gemm_backend_config") || ops.size() < 2 || !ops[0]->isArray() ||
        !ops[1]->isArray()) {
      error(inst, fmt::format("custom-call target \"{}\" needs two array operands and a gemm_backend_config", target));
      return std::nullopt;
    }
    const nlohmann::json& g = cfg["gemm_backend_config"];
    auto dimsOf = [&](const char* key) {
      std::vector<int64_t> v;
      if (g.contains("dot_dimension_numbers") && g["dot_dimension_numbers"].contains(key))
        for (const auto& e : g["dot_dimension_numbers"][key])
          v.push_back(e.is_string() ? std::stoll(e.get<std::string>()) : e.get<int64_t>());
      return v;
    };
    const hlo::Shape& rs = s.isTuple() ? s.tupleElement(0) : s;
    Instruction fake(Opcode::Dot, inst.name(), rs);
    fake.setLocation(inst.location());
    fake.attrs().dotDims.mutate().lhsContractingDimensions = dimsOf("lhs_contracting_dimensions");
    fake.attrs().dotDims.mutate().rhsContractingDimensions = dimsOf("rhs_contracting_dimensions");
    fake.attrs().dotDims.mutate().lhsBatchDimensions = dimsOf("lhs_batch_dimensions");
    fake.attrs().dotDims.mutate().rhsBatchDimensions = dimsOf("rhs_batch_dimensions");
    std::optional<Value> d = evalDot(fake, *ops[0], *ops[1]);
    if (!d) return std::nullopt;
    double alpha = g.value("alpha_real", 1.0), beta = g.value("beta", 0.0);
    if (alpha != 1.0 || (beta != 0.0 && ops.size() > 2)) {
      Value r = convertArray(*d, ElementType::F64);
      double* p = r.mutableAs<double>();
      Value c = ops.size() > 2 && ops[2]->isArray() ? convertArray(*ops[2], ElementType::F64) : Value();
      for (int64_t i = 0; i < r.count(); ++i) {
        p[i] *= alpha;
        if (beta != 0.0 && c.isArray() && c.count() == r.count()) p[i] += beta * c.as<double>()[i];
      }
      d = convertArray(r, rs.elementType());
    }
    if (!s.isTuple()) return d;
    std::vector<Value> e{std::move(*d)};
    for (int64_t i = 1; i < s.tupleSize(); ++i) e.push_back(zerosOfShape(s.tupleElement(i)));
    return Value::tuple(std::move(e));
  }
  error(inst, fmt::format("custom-call target \"{}\" is not supported by the interpreter", target));
  return std::nullopt;
}

// ---------------------------------------------------------------- driver

namespace {

bool checkArgument(const hlo::Shape& want, const hlo::Literal& got, int64_t index, DiagnosticEngine& diags) {
  if (want.isTuple() != got.shape().isTuple() || !want.compatible(got.shape())) {
    diags.error(fmt::format("argument {} has shape {}, but parameter {} is {}", index, got.shape().toString(false),
                            index, want.toString(false)));
    return false;
  }
  return true;
}

bool prepareConstants(const hlo::Module& module, const EvalOptions& options, SharedState& shared,
                      DiagnosticEngine& diags) {
  int64_t elided = 0;
  const Instruction* first = nullptr;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp->instructions()) {
      if (inst->opcode() != Opcode::Constant) continue;
      if (!inst->attrs().literal) {
        diags.error(inst->location(), fmt::format("constant '{}' has no literal", inst->name()));
        return false;
      }
      const hlo::Literal& lit = *inst->attrs().literal;
      if (lit.isElided()) {
        if (options.elidedConstantsAreErrors) {
          diags.error(inst->location(), fmt::format("constant '{}' is elided ({{...}}): its data is not in the module",
                                                    inst->name()));
          return false;
        }
        if (!first) first = inst.get();
        ++elided;
        shared.constants[inst.get()] = valueFromLiteral(fillElidedConstant(*inst));
      } else {
        shared.constants[inst.get()] = valueFromLiteral(lit);
      }
    }
  }
  if (elided > 0)
    diags.warning(first->location(),
                  fmt::format("{} elided constant{} ({{...}}, first '{}') filled with deterministic pseudo-random data; "
                              "results are not the model's",
                              elided, elided == 1 ? "" : "s", first->name()));
  return true;
}

// Raises the simulated replica/partition counts (those the caller did not
// fix) to what the collectives' replica groups and permute pairs name.
void inferDeviceCounts(const hlo::Module& module, const EvalOptions& options, SharedState& shared,
                       DiagnosticEngine& diags) {
  int64_t needR = shared.replicas, needP = shared.partitions;
  const Instruction* why = nullptr;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp->instructions()) {
      if (!hlo::isCollective(inst->opcode())) continue;
      int64_t maxId = -1;
      if (inst->attrs().replicaGroups)
        for (const auto& g : inst->attrs().replicaGroups->groups)
          for (int64_t id : g) maxId = std::max(maxId, id);
      for (const auto& [src, dst] : inst->attrs().sourceTargetPairs) maxId = std::max({maxId, src, dst});
      if (maxId < 0 || maxId > 1 << 20) continue;
      int64_t r = needR, p = needP;
      switch (groupMode(*inst)) {
        case GroupMode::CrossReplica:
        case GroupMode::CrossReplicaAndPartition: r = std::max(r, maxId + 1); break;
        case GroupMode::CrossPartition: p = std::max(p, maxId + 1); break;
        case GroupMode::Flattened:
          if (r * p <= maxId) {
            if (options.replicas == 0) r = (maxId + 1 + p - 1) / p;
            else p = (maxId + 1 + r - 1) / r;
          }
          break;
      }
      if (options.replicas == 0 && r > needR) needR = r, why = inst.get();
      if (options.partitions == 0 && p > needP) needP = p, why = inst.get();
    }
  }
  if (why && needR * needP <= 1024) {
    diags.warning(why->location(),
                  fmt::format("the module declares {} replica(s) x {} partition(s) but its collectives (e.g. '{}') "
                              "name more devices: simulating {} x {} (set --replicas/--partitions to choose)",
                              shared.replicas, shared.partitions, why->name(), needR, needP));
    shared.replicas = needR;
    shared.partitions = needP;
  }
}

}  // namespace

std::optional<hlo::Literal> evaluateInstruction(const hlo::Instruction& instruction,
                                                std::span<const hlo::Literal* const> operands,
                                                DiagnosticEngine& diags) {
  if (static_cast<int64_t>(operands.size()) != instruction.operandCount()) {
    diags.error(instruction.location(), fmt::format("'{}' takes {} operands, {} given", instruction.name(),
                                                    instruction.operandCount(), operands.size()));
    return std::nullopt;
  }
  SharedState shared;
  shared.module = instruction.parent() ? instruction.parent()->parent() : nullptr;
  // Only the constants of the called computations (transitively) are needed.
  std::vector<const hlo::Computation*> pending(instruction.calledComputations().begin(),
                                               instruction.calledComputations().end());
  std::unordered_set<const hlo::Computation*> seen;
  while (!pending.empty()) {
    const hlo::Computation* c = pending.back();
    pending.pop_back();
    if (!c || !seen.insert(c).second) continue;
    for (const auto& inst : c->instructions()) {
      if (inst->opcode() == Opcode::Constant && inst->attrs().literal)
        shared.constants[inst.get()] = valueFromLiteral(
            inst->attrs().literal->isElided() ? fillElidedConstant(*inst) : *inst->attrs().literal);
      for (const hlo::Computation* callee : inst->calledComputations()) pending.push_back(callee);
    }
  }
  std::vector<Value> values;
  values.reserve(operands.size());
  for (const hlo::Literal* l : operands) values.push_back(valueFromLiteral(*l));
  std::vector<const Value*> pointers;
  for (const Value& v : values) pointers.push_back(&v);
  Interp interp(shared, 0, 0, diags);
  std::optional<Value> r = interp.evaluateOne(instruction, pointers);
  if (!r) return std::nullopt;
  return literalFromValue(*r);
}

namespace {

// `args` holds one argument list per device, or one list for every device.
std::optional<EvalResult> evaluateDevices(const hlo::Module& module,
                                          std::span<const std::vector<hlo::Literal>> deviceArgs,
                                          const EvalOptions& options, DiagnosticEngine& diags) {
  const hlo::Computation* entry = module.entry();
  if (!entry) {
    diags.error(fmt::format("module '{}' has no entry computation", module.name()));
    return std::nullopt;
  }
  int64_t nParams = entry->parameterCount();
  std::vector<std::vector<Value>> perDevice;
  for (std::span<const hlo::Literal> args : deviceArgs) {
  if (static_cast<int64_t>(args.size()) != nParams) {
    diags.error(fmt::format("the entry computation takes {} parameter{}, but {} argument{} given", nParams,
                            nParams == 1 ? "" : "s", args.size(), args.size() == 1 ? " was" : "s were"));
    return std::nullopt;
  }
  std::vector<Value> argValues;
  for (int64_t i = 0; i < nParams; ++i) {
    const Instruction* p = entry->parameter(i);
    if (!p) {
      diags.error(fmt::format("the entry computation has no parameter {}", i));
      return std::nullopt;
    }
    if (!checkArgument(p->shape(), args[static_cast<size_t>(i)], i, diags)) return std::nullopt;
    if (args[static_cast<size_t>(i)].isElided()) {
      diags.error(fmt::format("argument {} has no data", i));
      return std::nullopt;
    }
    argValues.push_back(valueFromLiteral(args[static_cast<size_t>(i)]));
  }
  perDevice.push_back(std::move(argValues));
  }
  SharedState shared;
  shared.module = &module;
  shared.options = options;
  shared.replicas = options.replicas > 0 ? options.replicas : std::max<int64_t>(module.config().replicaCount, 1);
  shared.partitions = options.partitions > 0 ? options.partitions : std::max<int64_t>(module.config().numPartitions, 1);
  inferDeviceCounts(module, options, shared, diags);
  const int64_t devices = shared.replicas * shared.partitions;
  if (devices > 1024) {
    diags.error(fmt::format("{} simulated devices is too many (at most 1024)", devices));
    return std::nullopt;
  }
  if (perDevice.size() != 1 && static_cast<int64_t>(perDevice.size()) != devices) {
    diags.error(fmt::format("{} argument lists were given for {} devices", perDevice.size(), devices));
    return std::nullopt;
  }
  auto argsOf = [&](int64_t d) -> const std::vector<Value>& {
    return perDevice.size() == 1 ? perDevice[0] : perDevice[static_cast<size_t>(d)];
  };
  if (!prepareConstants(module, options, shared, diags)) return std::nullopt;

  EvalResult result;
  result.replicas = shared.replicas;
  result.partitions = shared.partitions;
  if (devices == 1) {
    Interp interp(shared, 0, 0, diags);
    std::optional<Value> r = interp.call(*entry, argsOf(0));
    if (!r) return std::nullopt;
    result.perDevice.push_back(literalFromValue(*r));
    return result;
  }
  CollectiveHub hub(devices);
  shared.hub = &hub;
  std::vector<DiagnosticEngine> local(static_cast<size_t>(devices));
  std::vector<std::optional<Value>> outs(static_cast<size_t>(devices));
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < devices; ++d) {
    threads.emplace_back([&, d] {
      Interp interp(shared, d / shared.partitions, d % shared.partitions, local[static_cast<size_t>(d)]);
      outs[static_cast<size_t>(d)] = interp.call(*entry, argsOf(d));
      hub.finish(static_cast<int>(d), outs[static_cast<size_t>(d)].has_value());
    });
  }
  for (auto& t : threads) t.join();
  // Report the first device's errors that is not merely a consequence of
  // another device failing.
  bool failed = false;
  for (int64_t d = 0; d < devices && !failed; ++d) {
    if (outs[static_cast<size_t>(d)] || hub.wasAborted(static_cast<int>(d))) continue;
    for (Diagnostic diag : local[static_cast<size_t>(d)].diagnostics()) {
      diag.message = fmt::format("replica {}, partition {}: {}", d / shared.partitions, d % shared.partitions,
                                 diag.message);
      diags.report(diag);
    }
    failed = true;
  }
  for (int64_t d = 0; d < devices && !failed; ++d) {
    if (outs[static_cast<size_t>(d)]) continue;
    for (Diagnostic diag : local[static_cast<size_t>(d)].diagnostics()) {
      diag.message = fmt::format("replica {}, partition {}: {}", d / shared.partitions, d % shared.partitions,
                                 diag.message);
      diags.report(diag);
    }
    failed = true;
  }
  if (failed) return std::nullopt;
  for (auto& o : outs) result.perDevice.push_back(literalFromValue(*o));
  return result;
}

}  // namespace

std::optional<EvalResult> evaluateAllDevices(const hlo::Module& module, std::span<const hlo::Literal> args,
                                             const EvalOptions& options, DiagnosticEngine& diags) {
  std::vector<std::vector<hlo::Literal>> one(1);
  one[0].assign(args.begin(), args.end());
  return evaluateDevices(module, one, options, diags);
}

std::optional<EvalResult> evaluatePerDevice(const hlo::Module& module,
                                            std::span<const std::vector<hlo::Literal>> perDeviceArgs,
                                            const EvalOptions& options, DiagnosticEngine& diags) {
  return evaluateDevices(module, perDeviceArgs, options, diags);
}

std::optional<hlo::Literal> evaluate(const hlo::Module& module, std::span<const hlo::Literal> args,
                                     const EvalOptions& options, DiagnosticEngine& diags) {
  std::optional<EvalResult> r = evaluateAllDevices(module, args, options, diags);
  if (!r) return std::nullopt;
  return std::move(r->perDevice[0]);
}

}  // namespace tpu::eval
