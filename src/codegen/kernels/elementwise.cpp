// The loop (elementwise) kernel kind: a double-buffered streaming kernel over
// n elements (emitElementwise), the lowering of unfused elementwise
// instructions and of loop fusions (flat fusions: elementwise work, scalar
// broadcasts, repeats and strided views of parameters, a root concatenate
// written in place), the planner's test and plan of a loop fusion (loopFusion:
// the LoopFusion emission reads) and the stream views it relies on, and the evaluation of fused instructions on
// registers that the other fusion kernels share.
#include <numeric>

#include <fmt/format.h>

#include "codegen/kernels/last_step.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

int64_t Lowerer::streamPeriod(const Instruction& param, int64_t n) const {
  // A fused parameter read only through broadcasts along the result's
  // leading dimensions (a bias [n] into [m, n]): element i of the stream is
  // element i mod period of the parameter. Streamed chunks hold whole
  // periods, so the repeat must fit a modest chunk.
  const Shape& ps = param.shape();
  if (param.opcode() != Opcode::Parameter || !ps.isArray() || ps.isScalar() || !param.parent()) return 0;
  int64_t period = *ps.elementCount();
  if (period <= 0 || n % period != 0 || std::lcm(period, kVregElems) > (int64_t{1} << 16)) return 0;
  bool used = false;
  for (const auto& up : param.parent()->instructions())
    for (const Instruction* o : up->operands()) {
      if (o != &param) continue;
      const Instruction& b = *up;
      if (b.opcode() != Opcode::Broadcast || b.shape().elementCount() != n) return 0;
      int64_t R = b.shape().rank(), r = ps.rank();
      const auto& dims = b.attrs().dimensions;
      if (static_cast<int64_t>(dims.size()) != r) return 0;
      for (int64_t d = 0; d < r; ++d)
        if (dims[static_cast<size_t>(d)] != R - r + d || b.shape().dimension(R - r + d) != ps.dimension(d)) return 0;
      used = true;
    }
  return used ? period : 0;
}

int64_t viewRowElements(const EwInput& input) {
  int64_t n = 1;
  for (size_t d = 1; d < input.viewDims.size(); ++d) n *= input.viewDims[d];
  return n;
}

Box viewBox(const EwInput& input, int64_t rows) {
  const int es = typeInfo(input.type).bytes;
  std::vector<int64_t> counts = input.viewDims;
  counts[0] = rows;
  return makeBox(counts, input.viewStrides, byteStrides(input.viewDims, es), es);
}

int64_t viewRowElements(const EwOutput& output) {
  int64_t n = 1;
  for (size_t d = 1; d < output.viewDims.size(); ++d) n *= output.viewDims[d];
  return n;
}

Box viewBox(const EwOutput& output, int64_t rows) {
  const int es = typeInfo(output.type).bytes;
  std::vector<int64_t> counts = output.viewDims;
  counts[0] = rows;
  return makeBox(counts, byteStrides(output.viewDims, es), output.viewStrides, es);
}

// A concatenate of operands of one shape at the root of a flat fusion: the
// operands are the kernel's results, each written to its place in the
// concatenate's buffer as a strided view (buffers left unset).
bool Lowerer::concatOutputViews(const Instruction& root, std::vector<EwOutput>* out) const {
  if (root.opcode() != Opcode::Concatenate || root.operandCount() < 1 || root.operandCount() > 8 ||
      !root.shape().isArray() || root.shape().isScalar() || root.attrs().dimensions.size() != 1)
    return false;
  const Shape& s = root.operand(0)->shape();
  for (const Instruction* o : root.operands())
    if (o->shape().dimensions() != s.dimensions() || o->shape().elementType() != root.shape().elementType())
      return false;
  const TypeInfo ti = typeInfo(root.shape().elementType());
  if (!ti.ok || ti.words > 2 || ti.isComplex) return false;
  const int64_t d = root.attrs().dimensions[0];
  if (d < 0 || d >= s.rank()) return false;
  const std::vector<int64_t> rs = byteStrides(root.shape().dimensions(), ti.bytes);
  const std::vector<int64_t>& dims = s.dimensions();
  size_t lead = 0;
  while (lead + 1 < dims.size() && dims[lead] == 1) ++lead;
  std::vector<EwOutput> views;
  for (int64_t k = 0; k < root.operandCount(); ++k) {
    EwOutput v{-1, k * dims[static_cast<size_t>(d)] * rs[static_cast<size_t>(d)], root.shape().elementType()};
    v.viewDims.assign(dims.begin() + static_cast<std::ptrdiff_t>(lead), dims.end());
    v.viewStrides.assign(rs.begin() + static_cast<std::ptrdiff_t>(lead), rs.end());
    // Whole rows of dimension 0 per chunk, and chunks of whole vregs.
    if (std::lcm(viewRowElements(v), kVregElems) > (int64_t{1} << 20)) return false;
    Box b = viewBox(v, std::max<int64_t>(2, v.viewDims[0]));
    if (b.dims.size() > static_cast<size_t>(std::max(1, target_.dma.descriptorDims))) return false;
    views.push_back(std::move(v));
  }
  if (out) *out = std::move(views);
  return true;
}

// The parameter a chain of views (transpose, broadcast, slice, reverse) of
// at most 8 steps reads, with element [i0, i1, ...] of `i` at byte
// offset + sum(i_d * strides[d]) of the parameter's buffer; nullptr when
// `i` is not such a chain.
const Instruction* Lowerer::composeView(const Instruction& i, std::vector<int64_t>& strides, int64_t& offset,
                                        int depth) const {
  if (!i.shape().isArray() || i.shape().isScalar()) return nullptr;
  const std::vector<int64_t>& resultDims = i.shape().dimensions();
  if (i.opcode() == Opcode::Parameter) {
    // Pair types (s64, u64, f64) are whole 8-byte elements in VMEM (vld.e64), so their views are too.
    const TypeInfo ti = typeInfo(i.shape().elementType());
    if (!ti.ok || ti.words > 2 || ti.isComplex) return nullptr;
    strides = byteStrides(resultDims, ti.bytes);
    offset = 0;
    return &i;
  }
  if (!hlo::isView(i.opcode()) || depth >= 8) return nullptr;
  std::vector<int64_t> ps;
  const Instruction* p = composeView(*i.operand(0), ps, offset, depth + 1);
  if (!p) return nullptr;
  const size_t rank = resultDims.size(), opRank = ps.size();
  strides.assign(rank, 0);
  const auto& dims = i.attrs().dimensions;
  switch (i.opcode()) {
    case Opcode::Slice: {
      // Element j of dimension d is element start + j * stride of the operand.
      const auto& slice = i.attrs().slice;
      if (slice.size() != rank || opRank != rank) return nullptr;
      for (size_t d = 0; d < rank; ++d) {
        offset += slice[d].start * ps[d];
        strides[d] = slice[d].stride * ps[d];
      }
      break;
    }
    case Opcode::Reverse:
      // Reversed dimensions run backwards from their last element.
      if (opRank != rank) return nullptr;
      strides = ps;
      for (int64_t d : dims) {
        if (d < 0 || d >= static_cast<int64_t>(rank)) return nullptr;
        offset += (resultDims[static_cast<size_t>(d)] - 1) * ps[static_cast<size_t>(d)];
        strides[static_cast<size_t>(d)] = -ps[static_cast<size_t>(d)];
      }
      break;
    case Opcode::Transpose:
      if (dims.size() != rank || opRank != rank) return nullptr;
      for (size_t d = 0; d < rank; ++d) {
        if (dims[d] < 0 || dims[d] >= static_cast<int64_t>(opRank)) return nullptr;
        strides[d] = ps[static_cast<size_t>(dims[d])];
      }
      break;
    default:  // Broadcast
      if (dims.size() != opRank) return nullptr;
      for (size_t d = 0; d < opRank; ++d) {
        if (dims[d] < 0 || dims[d] >= static_cast<int64_t>(rank)) return nullptr;
        strides[static_cast<size_t>(dims[d])] = ps[d];
      }
  }
  return p;
}

// A fused chain of transposes, broadcasts, slices and reverses of a
// parameter (a broadcast of a slice: one row of a table along the heads)
// with as many elements as the fusion's result: streamed as one strided
// view of the parameter's buffer (EwInput viewDims/viewStrides), which the
// DMA engine gathers in the view's row-major order. Every other
// instruction of a flat fusion keeps row-major element order (elementwise,
// reshape), so the view need not have the result's dimensions. Fills `out`
// (dims and byte strides) when it is one.
bool Lowerer::streamView(const Instruction& i, const std::vector<int64_t>& fusionDims, EwInput* out) const {
  if (!hlo::isView(i.opcode())) return false;
  const std::vector<int64_t>& resultDims = i.shape().dimensions();
  if (resultDims.empty() || !i.shape().isArray() ||
      i.shape().elementCount() != hlo::Shape::array(i.shape().elementType(), fusionDims).elementCount())
    return false;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  const Instruction* p = composeView(i, strides, offset, 0);
  if (!p) return false;
  EwInput v{EwInput::Full, -1, offset, p->shape().elementType()};
  // Leading dimensions of extent 1 do not count: chunks are rows of the
  // first real one.
  size_t lead = 0;
  while (lead + 1 < resultDims.size() && resultDims[lead] == 1) ++lead;
  v.viewDims.assign(resultDims.begin() + static_cast<std::ptrdiff_t>(lead), resultDims.end());
  v.viewStrides.assign(strides.begin() + static_cast<std::ptrdiff_t>(lead), strides.end());
  // Whole rows of dimension 0 per chunk, and chunks of whole vregs.
  if (std::lcm(viewRowElements(v), kVregElems) > (int64_t{1} << 20)) return false;
  Box b = viewBox(v, std::max<int64_t>(2, v.viewDims[0]));
  if (b.dims.size() > static_cast<size_t>(std::max(1, target_.dma.descriptorDims))) return false;
  if (out) *out = std::move(v);
  return true;
}

// A view in the middle of a chain (the slice under a broadcast of it): read
// only by views that are streamed, or are in the middle of chains too.
bool Lowerer::viewIntermediate(const Instruction& i, const Computation& c,
                               const std::vector<int64_t>& fusionDims) const {
  if (!hlo::isView(i.opcode()) || &i == c.root()) return false;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  if (!composeView(i, strides, offset, 0)) return false;
  bool read = false;
  for (const auto& u : c.instructions())
    for (const Instruction* o : u->operands())
      if (o == &i) {
        if (!streamView(*u, fusionDims, nullptr) && !viewIntermediate(*u, c, fusionDims)) return false;
        read = true;
      }
  return read;
}

bool Lowerer::loopFusion(const Instruction& in, LoopFusion* out) const {
  if (in.opcode() != Opcode::Fusion || !in.fusedComputation()) return false;
  const Computation& c = *in.fusedComputation();
  std::vector<const Shape*> outs = arrayLeaves(in.shape());
  // A root concatenate of operands of one shape: the kernel computes the
  // operands and writes each into its place.
  std::vector<EwOutput> concatViews;
  const bool concatRoot = concatOutputViews(*c.root(), &concatViews);
  if (concatRoot) {
    outs.clear();
    for (const Instruction* o : c.root()->operands()) outs.push_back(&o->shape());
  }
  if (outs.empty()) return false;
  auto n = outs[0]->elementCount();
  if (!n) return false;
  for (const Shape* s : outs)
    if (s->elementCount() != n) return false;
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    Opcode op = i.opcode();
    if (concatRoot && &i == c.root()) continue;
    if (i.shape().isTuple()) {
      if (op == Opcode::Tuple && &i == c.root()) continue;
      return false;
    }
    if (!i.shape().isArray() || !typeInfo(i.shape().elementType()).ok) return false;
    bool scalar = i.shape().isScalar();
    if (op == Opcode::Parameter && !scalar && i.shape().elementCount() != n) {
      // Read only as a repeat or through views.
      if (streamPeriod(i, *n) != 0) continue;
      for (const auto& u : c.instructions())
        for (const Instruction* o : u->operands())
          if (o == &i && !streamView(*u, outs[0]->dimensions(), nullptr) &&
              !viewIntermediate(*u, c, outs[0]->dimensions()))
            return false;
      continue;
    }
    if (!scalar && i.shape().elementCount() != n) {
      if (viewIntermediate(i, c, outs[0]->dimensions())) continue;
      return false;
    }
    if (op == Opcode::Parameter) continue;
    if (streamView(i, outs[0]->dimensions(), nullptr)) continue;
    if (op == Opcode::Constant) {
      if (!scalar) return false;
      continue;
    }
    if (op == Opcode::Broadcast) {
      const Instruction* o = i.operand(0);
      if (!o->shape().isScalar() && (o->opcode() != Opcode::Parameter || streamPeriod(*o, *n) == 0)) return false;
      continue;
    }
    if (op == Opcode::Reshape || op == Opcode::Bitcast || op == Opcode::Copy) continue;
    if (hlo::opcodeInfo(op).flags & hlo::kElementwise) continue;
    if (op == Opcode::Map) continue;
    return false;
  }
  // Chunks hold whole rows of every view (and whole vregs): three of them
  // must fit VMEM.
  int64_t period = kVregElems;
  uint64_t per = 0;
  for (const auto& up : c.instructions()) {
    EwInput v;
    if (streamView(*up, outs[0]->dimensions(), &v)) {
      period = std::lcm(period, viewRowElements(v));
      per += static_cast<uint64_t>(typeInfo(v.type).bytes);
    } else if (up->opcode() == Opcode::Parameter && !up->shape().isScalar()) {
      per += static_cast<uint64_t>(typeInfo(up->shape().elementType()).bytes);
    }
  }
  for (const Shape* s : outs) per += static_cast<uint64_t>(typeInfo(s->elementType()).bytes);
  for (const EwOutput& v : concatViews) period = std::lcm(period, viewRowElements(v));
  if (period > kVregElems && period < *n && 3 * per * static_cast<uint64_t>(period) + 8192 > vmemBudget())
    return false;
  if (out) planLoopFusion(in, *outs[0], concatRoot, std::move(concatViews), *out);
  return true;
}

// The plan of a loop fusion `in` (loopFusion's test passed) whose stream
// has `streamShape`: which parameters are read directly (and as repeats),
// which views are streamed from which parameter, which are intermediate.
void Lowerer::planLoopFusion(const Instruction& in, const Shape& streamShape, bool concatRoot,
                             std::vector<EwOutput> concatViews, LoopFusion& f) const {
  const Computation& c = *in.fusedComputation();
  f.comp = &c;
  f.dims = streamShape.dimensions();
  f.n = *streamShape.elementCount();
  f.concatRoot = concatRoot;
  f.concatViews = std::move(concatViews);
  for (int64_t p = 0; p < in.operandCount(); ++p) {
    const Instruction* param = c.parameter(p);
    const bool scalar = in.operand(p)->shape().isScalar();
    bool direct = scalar;
    for (const auto& u : c.instructions())
      for (const Instruction* x : u->operands())
        if (x == param && !streamView(*u, f.dims, nullptr) && !viewIntermediate(*u, c, f.dims)) direct = true;
    if (direct) f.direct.push_back({p, scalar, scalar ? 0 : streamPeriod(*param, f.n)});
  }
  for (const auto& u : c.instructions()) {
    EwInput v;
    if (viewIntermediate(*u, c, f.dims)) {
      f.intermediates.push_back(u.get());
      continue;
    }
    if (!streamView(*u, f.dims, &v)) continue;
    std::vector<int64_t> strides;
    int64_t offset = 0;
    const Instruction* base = composeView(*u, strides, offset, 0);
    f.views.push_back({u.get(), base->attrs().parameterNumber, std::move(v)});
  }
}

// ============================================================== streaming elementwise kernel

namespace {

// How the streaming elementwise kernel cuts n elements: chunks of chunkV
// vregs (c elements; the last one `tail`), and where each streamed input
// and output sits in a VMEM slot of slotBytes.
struct EwChunks {
  int nIn = 0, nOut = 0;
  int64_t chunkV = 0, c = 0, nChunks = 0, tail = 0;
  std::vector<int64_t> inOff, outOff;
  uint64_t slotBytes = 0;
};

// Three VMEM slots, so loads run two chunks ahead of the compute and a
// slot's write-back has a whole chunk's time to finish before it is reused.
constexpr int64_t kSlots = 3;

EwChunks ewChunks(int64_t n, const std::vector<EwInput>& ins, const std::vector<EwOutput>& outs, uint64_t budget) {
  EwChunks g;
  uint64_t per = 0;
  for (const EwInput& i : ins)
    if (i.kind == EwInput::Full) {
      per += typeInfo(i.type).bytes;
      ++g.nIn;
    }
  for (const EwOutput& o : outs) per += typeInfo(o.type).bytes;
  g.nOut = static_cast<int>(outs.size());
  int64_t totalV = (n + kVregElems - 1) / kVregElems;
  int64_t chunkV = std::min<int64_t>(totalV, 512);
  if (per > 0)
    chunkV = std::min<int64_t>(chunkV, std::max<int64_t>(1, budget / (kSlots * per * kVregElems)));
  int64_t c = chunkV * kVregElems;
  // Repeated inputs are fetched whole periods at a time: chunks are a
  // multiple of every period (and of a vreg).
  int64_t period = kVregElems;
  for (const EwInput& i : ins) {
    if (i.kind == EwInput::Full && i.period > 0) period = std::lcm(period, i.period);
    if (i.kind == EwInput::Full && !i.viewDims.empty()) period = std::lcm(period, viewRowElements(i));
  }
  for (const EwOutput& o : outs)
    if (!o.viewDims.empty()) period = std::lcm(period, viewRowElements(o));
  if (period > kVregElems && c < n) {
    c = std::max(period, c / period * period);
    chunkV = c / kVregElems;
  }
  g.nChunks = (n + c - 1) / c;
  g.tail = n - (g.nChunks - 1) * c;
  // VMEM: kSlots slots, each holding a chunk of every streamed buffer.
  g.inOff.assign(ins.size(), 0);
  g.outOff.assign(outs.size(), 0);
  uint64_t cur = 0;
  for (size_t j = 0; j < ins.size(); ++j)
    if (ins[j].kind == EwInput::Full) {
      g.inOff[j] = static_cast<int64_t>(cur);
      cur += alignUp(static_cast<uint64_t>(c) * typeInfo(ins[j].type).bytes, 512);
    }
  for (size_t j = 0; j < outs.size(); ++j) {
    g.outOff[j] = static_cast<int64_t>(cur);
    cur += alignUp(static_cast<uint64_t>(c) * typeInfo(outs[j].type).bytes, 512);
  }
  // One vreg of slack: the pipelined loop reads one vreg past each input.
  g.slotBytes = alignUp(cur + 8192, 512);
  g.chunkV = chunkV;
  g.c = c;
  return g;
}

// The DMA descriptors of a full chunk and of the tail chunk of one stream:
// contiguous, or whole periods of a repeated input, or rows of a view.
// (The contiguous ones are made first in every case: descriptor numbers
// follow the order they are made.)
std::pair<std::string, std::string> chunkDescriptors(Emitter& e, const EwChunks& g, int es, int64_t repeat,
                                                     const EwInput* inView, const EwOutput* outView) {
  std::string full = e.desc(static_cast<uint64_t>(g.c * es), {});
  std::string part = e.desc(static_cast<uint64_t>(g.tail * es), {});
  if (repeat > 0) {
    full = e.desc(static_cast<uint64_t>(repeat * es), {{g.c / repeat, 0, repeat * es}});
    part = e.desc(static_cast<uint64_t>(repeat * es), {{g.tail / repeat, 0, repeat * es}});
  }
  auto fromView = [&](const auto& v) {
    Box f = viewBox(v, g.c / viewRowElements(v));
    Box t = viewBox(v, g.tail / viewRowElements(v));
    full = e.desc(f.chunk, f.dims);
    part = e.desc(t.chunk, t.dims);
  };
  if (inView) fromView(*inView);
  if (outView) fromView(*outView);
  return {full, part};
}

}  // namespace



// The scalar inputs of a streaming elementwise kernel in registers (into
// `hoisted`), and the base of its index inputs (lane i of vreg 0 holds i).
VReg Lowerer::hoistStreamScalars(const std::vector<EwInput>& ins, std::vector<VReg>& hoisted) {
  VReg idx0;
  int smem = 0;
  for (size_t j = 0; j < ins.size(); ++j) {
    if (ins[j].kind == EwInput::Scalar && typeInfo(ins[j].type).isComplex) {
      hoisted[j] = hoistComplexScalar(ins[j].buf, ins[j].off, ins[j].type, smem);
    } else if (ins[j].kind == EwInput::Scalar && isPairType(ins[j].type)) {
      int hi = -1;
      int lo = loadScalarPair(ins[j].buf, ins[j].off, smem, hi);
      smem += 2;
      hoisted[j] = valloc(ins[j].type);
      e_.op("vmov.s32 {}, {}", V(hoisted[j]), S(lo));
      e_.op("vmov.s32 {}, {}", H(hoisted[j]), S(hi));
      sregs_.put(lo);
      sregs_.put(hi);
    } else if (ins[j].kind == EwInput::Scalar) {
      int sx = loadScalar(ins[j].buf, ins[j].off, ins[j].type, smem++);
      hoisted[j] = valloc(ins[j].type);
      e_.op("vmov.s32 {}, {}", V(hoisted[j]), S(sx));
      sregs_.put(sx);
    } else if (ins[j].kind == EwInput::Index && idx0.r < 0) {
      idx0 = valloc(ElementType::S32);
      VReg t = valloc(ElementType::S32);
      e_.op("vsublaneid {}", V(idx0));
      e_.op("vmul.s32 {}, {}, 128", V(idx0), V(idx0));
      e_.op("vlaneid {}", V(t));
      e_.op("vadd.s32 {}, {}, {}", V(idx0), V(idx0), V(t));
      vfree(t);
    }
  }
  return idx0;
}

bool Lowerer::emitElementwise(int64_t n, const std::vector<EwInput>& ins, const std::vector<EwOutput>& outs,
                              const Body& body) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  if (n == 0) return true;
  const EwChunks g = ewChunks(n, ins, outs, vmemBudget());
  const int nIn = g.nIn, nOut = g.nOut;
  const int64_t chunkV = g.chunkV, c = g.c, nChunks = g.nChunks, tail = g.tail;
  const std::vector<int64_t>& inOff = g.inOff, &outOff = g.outOff;
  const uint64_t slotBytes = g.slotBytes;
  // Scalars and the index base, hoisted out of the loops.
  std::vector<VReg> hoisted(ins.size());
  VReg idx0 = hoistStreamScalars(ins, hoisted);
  int rI = sreg(), rSlot = sreg(), rOther = sreg(), rNext = sreg(), rTmp = sreg(), rA = sreg(), rV = sreg(),
      rCnt = sreg(), rIdx = sreg();
  // VMEM offsets of the current vreg, per element size (8: pair types and
  // c64, 16: c128).
  auto anyBytes = [&](int bytes) {
    return std::any_of(ins.begin(), ins.end(), [&](const EwInput& i) { return typeInfo(i.type).bytes == bytes; }) ||
           std::any_of(outs.begin(), outs.end(), [&](const EwOutput& o) { return typeInfo(o.type).bytes == bytes; });
  };
  bool anyPair = anyBytes(8), anyQuad = anyBytes(16);
  int rOff[17] = {-1, sreg(), sreg(), -1, sreg(), -1, -1, -1, anyPair ? sreg() : -1};
  if (anyQuad) rOff[16] = sreg();
  auto issue = [&](bool load, int chunkReg, int slotReg, int semReg) {
    size_t count = load ? ins.size() : outs.size();
    for (size_t j = 0; j < count; ++j) {
      if (load && ins[j].kind != EwInput::Full) continue;
      int buf = load ? ins[j].buf : outs[j].buf;
      int64_t off = load ? ins[j].off : outs[j].off;
      int es = typeInfo(load ? ins[j].type : outs[j].type).bytes;
      int64_t voff = load ? inOff[j] : outOff[j];
      int64_t repeat = load ? ins[j].period : 0;
      const bool view = load && !ins[j].viewDims.empty(), outView = !load && !outs[j].viewDims.empty();
      if (repeat > 0) {
        e_.op("smov {}, {}", S(rA), base(buf) + off);  // every chunk starts a period
      } else if (view) {
        // Chunk i is rows [i*R, (i+1)*R) of the view's dimension 0.
        e_.op("smul {}, {}, {}", S(rA), S(chunkReg), c / viewRowElements(ins[j]) * ins[j].viewStrides[0]);
        e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf) + off);
      } else if (outView) {
        e_.op("smul {}, {}, {}", S(rA), S(chunkReg), c / viewRowElements(outs[j]) * outs[j].viewStrides[0]);
        e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf) + off);
      } else {
        e_.op("smul {}, {}, {}", S(rA), S(chunkReg), c * es);
        e_.op("sadd {}, {}, {}", S(rA), S(rA), base(buf) + off);
      }
      e_.op("smul {}, {}, {}", S(rV), S(slotReg), slotBytes);
      e_.op("sadd {}, {}, {}", S(rV), S(rV), voff);
      auto [full, part] =
          chunkDescriptors(e_, g, es, repeat, view ? &ins[j] : nullptr, outView ? &outs[j] : nullptr);
      auto dma = [&](const std::string& d) {
        if (load)
          e_.op("{} {}, [{}], {}, sem[{}]", dmaOp("h2v", buf), d, S(rV), memRef(buf, S(rA)), S(semReg));
        else
          e_.op("{} {}, {}, [{}], sem[{}]", dmaOp("v2h", buf), d, memRef(buf, S(rA)), S(rV), S(semReg));
      };
      emitFullOrLastStep(e_, S(chunkReg), nChunks, tail == c, [&] { dma(full); }, [&] { dma(part); });
    }
  };
  // Chunk i + kSlots - 1 is fetched while chunk i computes; a slot is
  // refilled once the write-back of the chunk it held has completed.
  // Semaphores: sem[slot] loads, sem[kSlots + slot] write-backs.
  e_.op("smov {}, 0", S(rI));
  for (int64_t j = 0; j < std::min<int64_t>(kSlots - 1, nChunks); ++j) {
    e_.op("smov {}, {}", S(rNext), j);
    issue(true, rNext, rNext, rNext);
  }
  std::string lLoop = e_.newLabel("chunk"), lComp = e_.newLabel("compute"), lPf = e_.newLabel("prefetch"),
              lInner = e_.newLabel("vreg");
  e_.label(lLoop);
  e_.op("srem {}, {}, {}", S(rSlot), S(rI), kSlots);
  e_.op("sadd {}, {}, {}", S(rNext), S(rI), kSlots - 1);
  e_.op("srem {}, {}, {}", S(rOther), S(rNext), kSlots);
  e_.op("br.ge {}, {}, {}", S(rNext), nChunks, lComp);
  e_.op("br.lt {}, {}, {}", S(rNext), kSlots, lPf);
  e_.op("sadd {}, {}, {}", S(rTmp), S(rOther), kSlots);
  e_.op("sem.wait sem[{}], {}", S(rTmp), nOut);
  e_.label(lPf);
  issue(true, rNext, rOther, rOther);
  e_.label(lComp);
  if (nIn > 0) e_.op("sem.wait sem[{}], {}", S(rSlot), nIn);
  e_.op("smul {}, {}, {}", S(rOff[4]), S(rSlot), slotBytes);
  e_.op("smov {}, {}", S(rOff[2]), S(rOff[4]));
  e_.op("smov {}, {}", S(rOff[1]), S(rOff[4]));
  if (anyPair) e_.op("smov {}, {}", S(rOff[8]), S(rOff[4]));
  if (anyQuad) e_.op("smov {}, {}", S(rOff[16]), S(rOff[4]));
  e_.op("smul {}, {}, {}", S(rIdx), S(rI), c);
  e_.op("smov {}, {}", S(rCnt), chunkV);
  // Software pipelined: the streamed inputs of vreg i + 1 are loaded while
  // vreg i is computed and stored, into the same registers (read first).
  std::vector<VReg> vin(ins.size());
  std::vector<VReg> owned;
  auto loadInputs = [&](int64_t vregOffset) {
    for (size_t j = 0; j < ins.size(); ++j) {
      if (ins[j].kind != EwInput::Full) continue;
      int es = typeInfo(ins[j].type).bytes;
      vloadInto(vin[j], ins[j].type, fmt::format("{} + {}", S(rOff[es]), inOff[j] + vregOffset * kVregElems * es));
    }
  };
  for (size_t j = 0; j < ins.size(); ++j) {
    if (ins[j].kind == EwInput::Scalar) {
      vin[j] = hoisted[j];
    } else {
      vin[j] = valloc(ins[j].kind == EwInput::Full ? ins[j].type : ElementType::S32);
      owned.push_back(vin[j]);
    }
  }
  loadInputs(0);
  e_.label(lInner);
  for (size_t j = 0; j < ins.size(); ++j)
    if (ins[j].kind == EwInput::Index) e_.op("vadd.s32 {}, {}, {}", V(vin[j]), V(idx0), S(rIdx));
  std::vector<VReg> vout = body(vin);
  if (failed_) return false;
  // Stores before the next loads: an output may be an input register.
  for (size_t j = 0; j < outs.size(); ++j) {
    int es = typeInfo(outs[j].type).bytes;
    vstore(vout[j], outs[j].type, fmt::format("{} + {}", S(rOff[es]), outOff[j]));
  }
  loadInputs(1);
  for (size_t j = 0; j < outs.size(); ++j) vfree(vout[j]);
  for (VReg v : owned) vfree(v);
  e_.op("sadd {}, {}, 4096", S(rOff[4]), S(rOff[4]));
  e_.op("sadd {}, {}, 2048", S(rOff[2]), S(rOff[2]));
  e_.op("sadd {}, {}, 1024", S(rOff[1]), S(rOff[1]));
  if (anyPair) e_.op("sadd {}, {}, 8192", S(rOff[8]), S(rOff[8]));
  if (anyQuad) e_.op("sadd {}, {}, 16384", S(rOff[16]), S(rOff[16]));
  e_.op("sadd {}, {}, 1024", S(rIdx), S(rIdx));
  e_.op("loop {}, {}", S(rCnt), lInner);
  e_.op("sadd {}, {}, {}", S(rTmp), S(rSlot), kSlots);
  issue(false, rI, rSlot, rTmp);
  e_.op("sadd {}, {}, 1", S(rI), S(rI));
  e_.op("br.lt {}, {}, {}", S(rI), nChunks, lLoop);
  if (nOut > 0)
    for (int64_t ch = std::max<int64_t>(0, nChunks - kSlots); ch < nChunks; ++ch)
      e_.op("sem.wait sem{}, {}", kSlots + ch % kSlots, nOut);
  return !failed_;
}

bool Lowerer::fill(int buf, int64_t off, int64_t n, ElementType t, int scalarBuf, int64_t scalarOff) {
  int es = typeInfo(t).bytes;
  if (typeInfo(t).words > 1) {
    // Wide elements are only moved: one strided DMA repeats the scalar.
    emitCopy(buf, off, scalarBuf, scalarOff, {n}, {es}, {0}, es);
    return !failed_;
  }
  EwInput s{EwInput::Scalar, scalarBuf, scalarOff, t};
  return emitElementwise(n, {s}, {EwOutput{buf, off, t}}, [&](const std::vector<VReg>& v) {
    return std::vector<VReg>{vcopy(v[0], t)};
  });
}

bool Lowerer::fillZero(int buf, int64_t n, ElementType t) {
  if (int words = typeInfo(t).words; words > 1) return fillZero(buf, n * words, ElementType::U32);
  return emitElementwise(n, {}, {EwOutput{buf, 0, t}}, [&](const std::vector<VReg>&) {
    return std::vector<VReg>{vconst(t, 0)};
  });
}

bool Lowerer::lowerElementwiseInstr(const Instruction& in) {
  beginKernel(in, "elementwise");
  int64_t n = *in.shape().elementCount();
  std::vector<EwInput> ins;
  uint64_t bytes = 0;
  for (const Instruction* o : in.operands()) {
    int b = leaves_[o][0];
    bool scalar = o->shape().isScalar() && !in.shape().isScalar();
    ins.push_back({scalar ? EwInput::Scalar : EwInput::Full, b, 0, o->shape().elementType()});
    bytes += scalar ? 0 : bufs_[b].bytes;
  }
  int out = leaves_[&in][0];
  bytes += bufs_[out].bytes;
  bool ok = emitElementwise(n, ins, {EwOutput{out, 0, in.shape().elementType()}}, [&](const std::vector<VReg>& v) {
    auto r = lowerOp(in, v);
    return r ? std::vector<VReg>{*r} : std::vector<VReg>{VReg{0, in.shape().elementType()}};
  });
  endKernel(static_cast<double>(n), bytes, 0);
  return ok;
}

bool Lowerer::lowerLoopFusion(const Instruction& in, const LoopFusion& f) {
  beginKernel(in, "fusion");
  const Computation& c = *f.comp;
  // Inputs: the parameters the elementwise code reads directly, then one
  // per chain of views streamed as a view of its parameter.
  std::vector<EwInput> ins;
  std::vector<VReg> placeholders(static_cast<size_t>(in.operandCount()));
  std::vector<int64_t> paramInput(static_cast<size_t>(in.operandCount()), -1);
  uint64_t bytes = 0;
  for (int64_t p = 0; p < in.operandCount(); ++p) {
    const Instruction* o = in.operand(p);
    bytes += o->shape().isScalar() ? 0 : bufs_[leaves_[o][0]].bytes;
  }
  for (const LoopFusion::Direct& d : f.direct) {
    const Instruction* o = in.operand(d.param);
    paramInput[static_cast<size_t>(d.param)] = static_cast<int64_t>(ins.size());
    ins.push_back({d.scalar ? EwInput::Scalar : EwInput::Full, leaves_[o][0], 0, o->shape().elementType(), d.period});
  }
  for (const LoopFusion::View& v : f.views) {
    ins.push_back(v.input);
    ins.back().buf = leaves_[in.operand(v.param)][0];
  }
  std::vector<EwOutput> outs;
  for (int b : leaves_[&in]) {
    outs.push_back({b, 0, bufs_[b].type});
    bytes += bufs_[b].bytes;
  }
  if (f.concatRoot) {
    const int b = outs.at(0).buf;
    outs = f.concatViews;
    for (EwOutput& o : outs) o.buf = b;
  }
  const size_t firstView = ins.size() - f.views.size();
  bool ok = emitElementwise(f.n, ins, outs, [&](const std::vector<VReg>& v) {
    std::vector<VReg> params = placeholders, out;
    for (size_t p = 0; p < params.size(); ++p)
      if (paramInput[p] >= 0) params[p] = v[static_cast<size_t>(paramInput[p])];
    std::map<const Instruction*, VReg> preset;
    for (size_t j = 0; j < f.views.size(); ++j) preset[f.views[j].value] = v[firstView + j];
    for (const Instruction* i : f.intermediates) preset[i] = VReg{0, i->shape().elementType()};  // never read
    concatRootAsTuple_ = f.concatRoot;
    const bool lowered = lowerComputation(c, params, out, &preset);
    concatRootAsTuple_ = false;
    if (!lowered) out.assign(outs.size(), VReg{0, ElementType::F32});
    return out;
  });
  endKernel(static_cast<double>(f.n) * static_cast<double>(c.instructionCount()), bytes, 0);
  return ok;
}

// ============================================================== fused instructions on registers

bool Lowerer::evalOnRegisters(const Computation& c, const Instruction* stop,
                              std::map<const Instruction*, VReg>& val, std::vector<VReg>& owned) {
  for (const auto& up : c.instructions()) {
    const Instruction& i = *up;
    if (&i == stop) break;
    if (i.opcode() == Opcode::Parameter || val.count(&i)) continue;
    if (i.opcode() == Opcode::Broadcast) {  // of a scalar: its splat
      val[&i] = val[i.operand(0)];
      continue;
    }
    std::vector<VReg> ops;
    for (const Instruction* o : i.operands()) ops.push_back(val[o]);
    auto r = lowerOp(i, ops);
    if (!r) return false;
    val[&i] = *r;
    owned.push_back(*r);
  }
  return true;
}

VReg Lowerer::splatScalar(int buf, ElementType type, int smemSlot) {
  int sx = loadScalar(buf, 0, type, smemSlot);
  VReg v = valloc(type);
  e_.op("vmov.s32 {}, {}", V(v), S(sx));
  sregs_.put(sx);
  return v;
}

bool Lowerer::evalFusedInstruction(const Instruction& i, std::map<const Instruction*, VReg>& val,
                                   std::vector<VReg>& owned) {
  if (i.opcode() == Opcode::Broadcast || i.opcode() == Opcode::Reshape || i.opcode() == Opcode::Bitcast) {
    val[&i] = val.at(i.operand(0));
    return true;
  }
  std::vector<VReg> ops;
  for (const Instruction* o : i.operands()) ops.push_back(val.at(o));
  auto v = lowerOp(i, ops);
  if (!v) return false;
  val[&i] = *v;
  owned.push_back(*v);
  return true;
}

}  // namespace tpu::codegen
