#include "passes/sink_views.h"

#include <algorithm>
#include <optional>
#include <set>

#include "hlo/module.h"
#include "passes/rewrite_builder.h"

namespace tpu::passes {

using hlo::Instruction;
using hlo::Opcode;

namespace {

using hlo::isView;

// A view to apply to some value: its opcode and attributes. Every view one
// sink builds has the result dimensions of the view being sunk.
struct View {
  Opcode op;
  std::vector<int64_t> dims;  // transpose permutation, broadcast mapping, reversed dimensions
  std::vector<hlo::SliceDimension> slice;
  bool operator==(const View&) const = default;
};

View viewOf(const Instruction& v) { return {v.opcode(), v.attrs().dimensions, v.attrs().slice}; }

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

bool isIota(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Whether `v` applied to a value of dimensions `from` giving `to` changes
// nothing.
bool isIdentity(const View& v, const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from != to) return false;
  switch (v.op) {
    case Opcode::Transpose:
    case Opcode::Broadcast: return isIota(v.dims);
    case Opcode::Slice:
      for (size_t d = 0; d < v.slice.size(); ++d)
        if (v.slice[d].start != 0 || v.slice[d].stride != 1) return false;
      return true;
    case Opcode::Reverse:
      for (int64_t d : v.dims)
        if (to[static_cast<size_t>(d)] > 1) return false;
      return true;
    default: return false;
  }
}

// `outer` applied to `inner` applied to y, as one view of y, when there is
// one. `to` are the result dimensions.
std::optional<View> compose(const View& outer, const Instruction& inner, const std::vector<int64_t>& to) {
  const View in = viewOf(inner);
  View r{in.op, {}, {}};
  // Any view of a scalar's broadcast is a broadcast of the scalar.
  if (in.op == Opcode::Broadcast && inner.operand(0)->shape().isScalar()) return r;
  if (outer.op == Opcode::Transpose && in.op == Opcode::Transpose) {
    for (int64_t d : outer.dims) r.dims.push_back(in.dims[static_cast<size_t>(d)]);
    return r;
  }
  if (outer.op == Opcode::Broadcast && in.op == Opcode::Broadcast) {
    for (int64_t d : in.dims) r.dims.push_back(outer.dims[static_cast<size_t>(d)]);
    return r;
  }
  if (outer.op == Opcode::Transpose && in.op == Opcode::Broadcast) {
    std::vector<int64_t> inv = inverse(outer.dims);
    for (int64_t d : in.dims) r.dims.push_back(inv[static_cast<size_t>(d)]);
    return r;
  }
  if (outer.op == Opcode::Broadcast && in.op == Opcode::Transpose) {
    r.op = Opcode::Broadcast;
    for (int64_t d : inverse(in.dims)) r.dims.push_back(outer.dims[static_cast<size_t>(d)]);
    return r;
  }
  if (outer.op == Opcode::Slice && in.op == Opcode::Slice) {
    for (size_t d = 0; d < outer.slice.size(); ++d) {
      const hlo::SliceDimension &o = outer.slice[d], &i = in.slice[d];
      hlo::SliceDimension s;
      s.start = i.start + o.start * i.stride;
      s.stride = o.stride * i.stride;
      s.limit = to[d] == 0 ? s.start : s.start + (to[d] - 1) * s.stride + 1;
      r.slice.push_back(s);
    }
    return r;
  }
  if (outer.op == Opcode::Reverse && in.op == Opcode::Reverse) {
    std::set<int64_t> dims(in.dims.begin(), in.dims.end());
    for (int64_t d : outer.dims)
      if (!dims.erase(d)) dims.insert(d);
    r.dims.assign(dims.begin(), dims.end());
    return r;
  }
  return std::nullopt;
}

// The dimension an iota along `dim` runs along after `v`, if it is still
// an iota.
std::optional<int64_t> iotaDimension(const View& v, int64_t dim) {
  switch (v.op) {
    case Opcode::Transpose: return inverse(v.dims)[static_cast<size_t>(dim)];
    case Opcode::Broadcast: return v.dims[static_cast<size_t>(dim)];
    case Opcode::Slice: {
      const hlo::SliceDimension& s = v.slice[static_cast<size_t>(dim)];
      if (s.start != 0 || s.stride != 1) return std::nullopt;
      return dim;
    }
    case Opcode::Reverse:
      if (std::find(v.dims.begin(), v.dims.end(), dim) != v.dims.end()) return std::nullopt;
      return dim;
    default: return std::nullopt;
  }
}

// The instructions that read x, each once, and whether x is the root.
int64_t userCount(const hlo::Computation& c, const Instruction* x) {
  int64_t n = c.root() == x ? 1 : 0;
  for (const auto& in : c.instructions())
    n += std::find(in->operands().begin(), in->operands().end(), x) != in->operands().end();
  return n;
}

// An elementwise instruction whose operands have its dimensions (or are
// scalars), so a view of it is the same instruction on views of them.
bool looksThrough(const Instruction& x) {
  if (!hlo::isElementwise(x.opcode()) || !x.shape().isArray() || x.shape().isScalar() || x.operandCount() == 0 ||
      !x.controlPredecessors().empty() || x.hasSideEffect())
    return false;
  for (const Instruction* o : x.operands())
    if (!o->shape().isArray() || (!o->shape().isScalar() && o->shape().dimensions() != x.shape().dimensions()))
      return false;
  return true;
}

// A fusion XLA's loop emitter would compute element by element: only such
// computations get chains cloned (elsewhere cloning adds work).
bool isLoopComputation(const hlo::Computation& c) {
  for (const auto& up : c.instructions()) {
    Opcode op = up->opcode();
    if (!(hlo::isElementwise(op) || isView(op) || op == Opcode::Parameter || op == Opcode::Constant ||
          op == Opcode::Iota || op == Opcode::Reshape || op == Opcode::Bitcast ||
          (op == Opcode::Tuple && up.get() == c.root())))
      return false;
  }
  return true;
}

// A parameter, or views of views of one (a slice of a table): llo-gen
// streams a view of it as one strided view of the parameter.
bool viewOfParameter(const Instruction& x) {
  const Instruction* i = &x;
  for (int depth = 0; depth < 8 && isView(i->opcode()) && i->operandCount() == 1; ++depth) i = i->operand(0);
  return i->opcode() == Opcode::Parameter;
}

// Builds (or, dry, counts) the value of one view applied to a chain.
class Sinker {
 public:
  Sinker(hlo::Computation& c, const Instruction& view, RewriteBuilder* b)
      : c_(c), shape_(view.shape()), to_(view.shape().dimensions()), b_(b) {}

  // v(x); in a dry run, x itself.
  Instruction* sink(Instruction* x, const View& v) {
    if (isIdentity(v, x->shape().dimensions(), to_)) return x;
    // A scalar's broadcast looks the same through every view.
    if (x->opcode() == Opcode::Broadcast && x->operand(0)->shape().isScalar() && x->shape().dimensions() == to_)
      return x;
    for (const Memo& m : memo_)
      if (m.x == x && m.v == v) return m.result;
    Instruction* r = nullptr;
    std::optional<View> composed;
    if (isView(x->opcode()) && x->controlPredecessors().empty() && (composed = compose(v, *x, to_))) {
      interior(x);
      r = sink(x->operand(0), *composed);
    } else if (std::optional<int64_t> d;
               x->opcode() == Opcode::Iota && (d = iotaDimension(v, x->attrs().iotaDimension))) {
      interior(x);
      r = added(Opcode::Iota, x, {});
      if (r != x) r->attrs().iotaDimension = *d;
    } else if (looksThrough(*x)) {
      interior(x);
      std::vector<Instruction*> ops;
      for (Instruction* o : x->operands()) ops.push_back(o->shape().isScalar() ? o : sink(o, v));
      r = added(x->opcode(), x, ops);
      if (r != x) {
        r->attrs() = x->attrs();
        r->setCalledComputations(x->calledComputations());
      }
    } else {
      if (!viewOfParameter(*x) && !x->shape().isScalar()) opaqueLeaf_ = true;
      r = added(v.op, x, {x});
      if (r != x) {
        r->attrs().dimensions = v.dims;
        r->attrs().slice = v.slice;
      }
    }
    memo_.push_back({x, v, r});
    return r;
  }

  // Instructions the sink adds, and whether it recomputes a value that
  // stays (one with other users).
  int64_t added() const { return added_; }
  bool clones() const { return clones_; }
  // Whether some view lands on a leaf other than a parameter or a scalar
  // (so it will not stream as a view of a parameter).
  bool opaqueLeaf() const { return opaqueLeaf_; }

 private:
  struct Memo {
    Instruction* x;
    View v;
    Instruction* result;
  };

  void interior(const Instruction* x) {
    if (userCount(c_, x) > 1) clones_ = true;
  }

  Instruction* added(Opcode op, Instruction* like, std::vector<Instruction*> operands) {
    ++added_;
    if (!b_) return like;
    hlo::Shape s = shape_;
    s.setElementType(like->shape().elementType());
    return b_->add(op, std::move(s), std::move(operands));
  }

  hlo::Computation& c_;
  const hlo::Shape& shape_;
  const std::vector<int64_t>& to_;
  RewriteBuilder* b_;
  std::vector<Memo> memo_;
  int64_t added_ = 0;
  bool clones_ = false;
  bool opaqueLeaf_ = false;
};

// Whether sinking `v` gets anywhere: its operand is something it looks
// through.
bool sinks(const Instruction& v) {
  if (!isView(v.opcode()) || !v.shape().isArray() || v.operandCount() != 1) return false;
  const Instruction& x = *v.operand(0);
  const View view = viewOf(v);
  if (isView(x.opcode())) return x.controlPredecessors().empty() && compose(view, x, v.shape().dimensions());
  if (x.opcode() == Opcode::Iota) return iotaDimension(view, x.attrs().iotaDimension).has_value();
  return looksThrough(x);
}

// Removes x and then its operands while nothing uses them, noting each in
// `removed`.
void removeDead(hlo::Computation& c, Instruction* x, std::set<Instruction*>& removed) {
  std::vector<Instruction*> work{x};
  while (!work.empty()) {
    Instruction* i = work.back();
    work.pop_back();
    if (i->opcode() == Opcode::Parameter || i == c.root() || !i->controlPredecessors().empty() ||
        i->hasSideEffect() || userCount(c, i) != 0)
      continue;
    bool ordered = false;
    for (const auto& up : c.instructions())
      for (const Instruction* p : up->controlPredecessors()) ordered = ordered || p == i;
    if (ordered) continue;
    std::vector<Instruction*> ops(i->operands().begin(), i->operands().end());
    c.removeInstruction(i);
    removed.insert(i);
    for (Instruction* o : ops)
      if (std::find(work.begin(), work.end(), o) == work.end()) work.push_back(o);
  }
}

}  // namespace

bool SinkViewsPass::run(hlo::Module& module, DiagnosticEngine&) {
  std::set<hlo::Computation*> fused;
  for (const auto& c : module.computations())
    for (const auto& in : c->instructions())
      if (in->opcode() == Opcode::Fusion && in->fusedComputation()) fused.insert(in->fusedComputation());
  std::set<std::string> names;
  bool namesKnown = false, changed = false;
  for (hlo::Computation* c : fused) {
    const int64_t budget = kMaxGrowth * c->instructionCount();
    const bool loop = isLoopComputation(*c);
    // Outermost views first, so views of views compose before the inner
    // ones sink on their own. Each sink moves views strictly toward the
    // leaves, so rounds end; the cap is a backstop.
    for (int round = 0, again = 1; again && round < 16; ++round) {
      again = 0;
      std::vector<Instruction*> views;
      for (const auto& up : c->instructions())
        if (sinks(*up)) views.push_back(up.get());
      std::reverse(views.begin(), views.end());
      std::set<Instruction*> removed;
      for (Instruction* v : views) {
        // Removed ones are skipped by pointer: a new instruction may
        // reuse the address.
        if (removed.count(v) || !sinks(*v)) continue;
        Sinker dry(*c, *v, nullptr);
        dry.sink(v->operand(0), viewOf(*v));
        // Recomputing a chain, or computing it on a broadcast's many more
        // elements, only pays when the fusion then streams views of its
        // parameters.
        // Outside loop fusions a broadcast still sinks through elementwise
        // work on parameters that nothing else reads (a weight converted
        // before it is broadcast along the rows of a norm): the kernels
        // then stream the parameter as a view, the work is a few VPU ops.
        bool costs = dry.clones() || v->opcode() == Opcode::Broadcast;
        const bool paramChain = v->opcode() == Opcode::Broadcast && !dry.clones() && !dry.opaqueLeaf() &&
                                dry.added() <= kMaxBroadcastChain;
        if ((costs && (!loop || dry.opaqueLeaf()) && !paramChain) || c->instructionCount() + dry.added() > budget)
          continue;
        if (!namesKnown) names = instructionNames(module), namesKnown = true;
        RewriteBuilder b(*c, *v, names);
        Sinker wet(*c, *v, &b);
        Instruction* x = v->operand(0);
        Instruction* r = wet.sink(x, viewOf(*v));
        replaceInstruction(v, r);
        removed.insert(v);
        removeDead(*c, x, removed);
        changed = true;
        again = 1;
      }
    }
    c->sortTopologically();
  }
  return changed;
}

}  // namespace tpu::passes
