// The HLO -> LLO lowering. Every array value lives in HBM in dense row-major
// order of its logical shape (layouts only say how XLA would store it; the
// lowering picks its own). Each HLO instruction (or fusion) becomes one
// kernel: DMAs into VMEM, vector code over 8x128 registers, DMAs back.
// Data movement (transpose, broadcast, slice, pad, concatenate, reverse)
// is done by strided DMA descriptors; elementwise work by a double-buffered
// streaming kernel; dots by MXU tiles; reductions by vector folds.
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "codegen/lowerer.h"
#include "eval/elided.h"
#include "support/elided_fill.h"
#include "support/float_format.h"

namespace tpu::codegen {

// Buffers a .tpu program can name (instruction words hold 12-bit indices).
constexpr size_t kMaxHbmBuffers = 4096;

// ============================================================== planning

std::string Lowerer::dmaOp(const char* dir, int buf, int srcBuf) const {
  std::string d = dir;  // "<source>2<destination>"
  auto resident = [&](int b) { return b >= 0 && bufs_[static_cast<size_t>(b)].kind == BufKind::Vmem; };
  if (srcBuf >= 0) {  // h2h: buf is the destination
    if (resident(buf)) d[2] = 'v';
    if (resident(srcBuf)) d[0] = 'v';
  } else if (resident(buf)) {
    d[d[0] == 'h' ? 0 : 2] = 'v';
  }
  return "dma." + d;
}

int Lowerer::newBuf(BufKind kind, const Shape& s) {
  Buf b;
  b.kind = kind;
  b.type = s.elementType();
  b.dims = s.dimensions();
  b.bytes = static_cast<uint64_t>(product(b.dims)) * static_cast<uint64_t>(typeInfo(b.type).bytes);
  b.def = b.end = pos_;
  bufs_.push_back(b);
  return static_cast<int>(bufs_.size() - 1);
}

void Lowerer::defineNew(const Instruction& in) {
  std::vector<int>& l = leaves_[&in];
  l.clear();
  for (const Shape* s : arrayLeaves(in.shape())) l.push_back(newBuf(BufKind::Heap, *s));
}

void Lowerer::use(int buf, int region) {
  int64_t u = pos_;
  Buf& b = bufs_[buf];
  for (int r = region; r >= 0; r = regions_[r].parent) {
    if (b.def >= regions_[r].start) break;
    u = std::max(u, regions_[r].end);
  }
  b.end = std::max(b.end, u);
}

bool Lowerer::checkTypes(const Instruction& in) {
  for (const Shape* s : arrayLeaves(in.shape())) {
    if (!typeInfo(s->elementType()).ok)
      return fail(in, fmt::format("llo-gen: element type {} of '{}' is not supported (supported: f32, bf16, f16, "
                                  "the f8 types, f6e2m3fn, f6e3m2fn, f4e2m1fn, s32, u32, s16, u16, s8, u8, "
                                  "s4, u4, s2, u2, s1, u1, pred, s64, u64, f64, c64, c128)",
                                  hlo::elementTypeName(s->elementType()), in.name()));
    // A bounded dynamic dimension (`<=N`) is held at its bound N, as the
    // interpreter holds it; an unbounded one (`?`) has no size to hold.
    if (s->isUnboundedDynamic())
      return fail(in, fmt::format("llo-gen: unbounded dynamic shape of '{}' is not supported", in.name()));
  }
  return checkWideTypes(in);
}


bool Lowerer::plan(const Computation& c, int region) {
  for (const Instruction* in : loweringOrder(c)) {
    if (!planInstruction(*in, region)) return false;
  }
  return true;
}

// Plans `callee` inline at `in` (a call or a resident fusion), its
// parameters bound to the buffers of `args`.
bool Lowerer::planInline(const Instruction& in, const Computation* callee, int region) {
  if (!callee) return fail(in, "llo-gen: missing called computation");
  if (!inlined_.insert(callee).second)
    return fail(in, fmt::format("llo-gen: computation '{}' is called from more than one place; inlining it twice "
                                "is not supported yet",
                                callee->name()));
  for (int64_t i = 0; i < in.operandCount(); ++i)
    if (auto* p = callee->parameter(i)) leaves_[p] = leaves_[in.operand(i)];
  return plan(*callee, region);
}

// A resident fusion: its instructions planned inline, as one kernel whose
// intermediates stay in VMEM when they fit (planResidentFusion).
bool Lowerer::planResidentInline(const Instruction& in, int region) {
  const size_t firstBuf = bufs_.size();
  ++fusionPlanDepth_;
  bool planned = planInline(in, in.fusedComputation(), region);
  --fusionPlanDepth_;
  if (!planned) return false;
  leaves_[&in] = leaves_[in.fusedComputation()->root()];
  // A fusion nested in another is part of the outer one's placement.
  if (fusionPlanDepth_ == 0) planResidentFusion(in, firstBuf);
  return true;
}

// A while loop: its state buffers, and a region spanning both bodies so
// that every buffer used inside lives for the whole loop.
bool Lowerer::planWhile(const Instruction& in, int region) {
  if (!checkTypes(in)) return false;
  defineNew(in);
  int r = static_cast<int>(regions_.size());
  regions_.push_back({pos_, 0, region});
  regions_[r].end = std::numeric_limits<int64_t>::max();  // while planning the body
  const Computation* cond = in.whileCondition();
  const Computation* body = in.whileBody();
  for (const Computation* c : {cond, body}) {
    if (!inlined_.insert(c).second)
      return fail(in, fmt::format("llo-gen: computation '{}' is called from more than one place", c->name()));
    if (auto* p = c->parameter(0)) leaves_[p] = leaves_[&in];
  }
  if (!plan(*cond, r) || !plan(*body, r)) return false;
  ++pos_;
  regions_[r].end = pos_;
  useLeaves(cond->root(), r);
  useLeaves(body->root(), r);
  for (int b : leaves_[&in]) use(b, r);
  // Buffers used in the loop before its end was known: stretch them.
  for (Buf& b : bufs_)
    if (b.end == std::numeric_limits<int64_t>::max()) b.end = pos_;
  return true;
}

// A conditional: its result buffers, each branch planned in turn.
bool Lowerer::planConditional(const Instruction& in, int region) {
  if (!checkTypes(in)) return false;
  defineNew(in);
  for (size_t i = 0; i < in.calledComputations().size(); ++i) {
    const Computation* br = in.calledComputations()[i];
    if (!inlined_.insert(br).second)
      return fail(in, fmt::format("llo-gen: computation '{}' is called from more than one place", br->name()));
    if (auto* p = br->parameter(0)) leaves_[p] = leaves_[in.operand(static_cast<int64_t>(i) + 1)];
    if (!plan(*br, region)) return false;
    ++pos_;
    useLeaves(br->root(), region);
  }
  for (int b : leaves_[&in]) use(b, region);
  return true;
}

bool Lowerer::planInstruction(const Instruction& in, int region) {
  ++pos_;
  Opcode op = in.opcode();
  for (const Instruction* o : in.operands()) useLeaves(o, region);
  // The kernel kind and its plan, decided here once (kernels/registry.cpp);
  // emission reads them. Renames and buffer structure emit nothing.
  const KernelEmitter* kind = nullptr;
  if (!hlo::computesNothing(op)) kind = (decisions_[&in] = decideKernel(in)).emitter;
  if (hlo::opcodeInfo(op).flags & hlo::kCollective) return planCollective(in, region);
  bool handled = false;
  bool planned = planMisc(in, region, handled);
  if (handled) return planned;
  // Pure renames share their operand's buffers. Dynamic dimensions are held
  // at their bounds, so set-dimension-size and dynamic-reshape (to the bounded
  // result shape, as the interpreter does) are renames too.
  if (hlo::isPureRename(op)) {
    if (!checkTypes(in)) return false;
    leaves_[&in] = leaves_[in.operand(0)];
    return true;
  }
  switch (op) {
    case Opcode::Parameter:
      if (leaves_.count(&in)) return true;  // bound by the caller
      return fail(in, "llo-gen: unbound parameter");
    case Opcode::Constant: {
      if (!checkTypes(in)) return false;
      std::vector<int>& l = leaves_[&in];
      if (in.shape().isTuple()) return fail(in, "llo-gen: tuple constants are not supported");
      int b = newBuf(BufKind::Const, in.shape());
      bufs_[b].name = fmt::format("c{}_{}", b, sanitize(in.name()));
      bufs_[b].constant = &in;
      l = {b};
      return true;
    }
    case Opcode::GetTupleElement: {
      const Instruction* t = in.operand(0);
      auto [first, count] = leafRange(t->shape(), in.attrs().tupleIndex);
      const auto& tl = leaves_[t];
      leaves_[&in] = std::vector<int>(tl.begin() + first, tl.begin() + first + count);
      return true;
    }
    case Opcode::Tuple: {
      std::vector<int> l;
      for (const Instruction* o : in.operands()) l.insert(l.end(), leaves_[o].begin(), leaves_[o].end());
      leaves_[&in] = l;
      return true;
    }
    case Opcode::Real:
      // Of a real type: the operand itself. An alias keeps every byte (NaN
      // payloads included, which the register form of narrow floats would
      // not); inside fusions it is a register copy.
      if (typeInfo(in.operand(0)->shape().elementType()).isComplex) break;
      if (!checkTypes(in)) return false;
      leaves_[&in] = leaves_[in.operand(0)];
      return true;
    case Opcode::BitcastConvert: {
      if (!checkTypes(in)) return false;
      // Memory holds the same bytes either way (XLA splits and joins
      // elements little-endian along a minor dimension; complex values are
      // their parts' bytes), except for the 4-bit types, stored one per byte:
      // their nibbles are repacked by a kernel, as are the 1- and 2-bit types.
      if (bitcastRepacksNibbles(in)) {
        defineNew(in);
        return true;
      }
      leaves_[&in] = leaves_[in.operand(0)];
      return true;
    }
    case Opcode::AfterAll:
    case Opcode::PartitionId:
    case Opcode::ReplicaId:
      if (op == Opcode::AfterAll) {
        leaves_[&in] = {};
        return true;
      }
      break;
    case Opcode::Call: {
      if (!planInline(in, in.toApply(), region)) return false;
      leaves_[&in] = leaves_[in.toApply()->root()];
      return true;
    }
    case Opcode::Fusion:
      if (kind && kind->fusionKind == FusionLowering::Resident) return planResidentInline(in, region);
      break;
    case Opcode::While: return planWhile(in, region);
    case Opcode::Conditional: return planConditional(in, region);
    default: break;
  }
  if (!checkTypes(in)) return false;
  for (const Instruction* o : in.operands())
    for (const Shape* s : arrayLeaves(o->shape()))
      if (!typeInfo(s->elementType()).ok)
        return fail(in, fmt::format("llo-gen: operand element type {} of '{}' is not supported",
                                    hlo::elementTypeName(s->elementType()), in.name()));
  if (!checkElementwiseLegal(in, kind)) return false;
  defineNew(in);
  return true;
}

bool Lowerer::checkElementwiseLegal(const Instruction& in, const KernelEmitter* kind) {
  auto legal = [&](const Instruction& i) {
    if (!hlo::isElementwise(i.opcode()) || elementwiseLegal(i)) return true;
    return fail(i, illegalElementwiseMessage(i));
  };
  if (!kind) return true;
  if (kind->fusionKind == FusionLowering::Loop) {
    for (const auto& up : in.fusedComputation()->instructions())
      if (!legal(*up)) return false;
    return true;
  }
  return kind->fusionKind || kind->name != "elementwise" || legal(in);
}

// ============================================================== helpers

int Lowerer::sreg() {
  int r = sregs_.get();
  if (r < 0) {
    failed_ = true;
    diags_.error("llo-gen: internal error: out of scalar registers");
    return 1;
  }
  return r;
}

VReg Lowerer::valloc(ElementType t) {
  auto get = [&] {
    int r = vregs_.get();
    if (r < 0 && softVregs_) {  // a trial emission (lower_rows.cpp) that will be discarded
      vregsExhausted_ = true;
      return 0;
    }
    if (r < 0) {
      if (!failed_) diags_.error("llo-gen: fused computation needs more vector registers than the target has");
      failed_ = true;
      r = 0;
    }
    return r;
  };
  int r = get();
  int words = typeInfo(t).words;
  VReg v{r, t, words > 1 ? get() : -1};
  if (words == 4) {
    v.im = get();
    v.imh = get();
  }
  return v;
}

int Lowerer::malloc_() {
  int r = masks_.get();
  if (r < 0) {
    if (!failed_) diags_.error("llo-gen: out of mask registers");
    failed_ = true;
    r = 0;
  }
  return r;
}

namespace {

// Text a .kernel string holds (isa::isMetadataText): '"' becomes '\'', control
// characters spaces, and bytes of invalid UTF-8 '?'.
std::string metadataText(std::string_view text) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    out += c == '"' ? '\'' : (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  if (!isa::isMetadataText(out))
    for (char& c : out)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  return out;
}

}  // namespace

void Lowerer::beginKernel(const Instruction& in, const std::string& kind) {
  sregs_.reset();
  vregs_.reset();
  masks_.reset();
  kernelLabel_ = fmt::format("k{}_{}", kernelCount_++, sanitize(in.name()));
  // The code so far can be scheduled and printed: no later code branches
  // into it at the top level (a while loop's or conditional's code is one
  // piece; so is a resident fusion's).
  if (residentDepth_ == 0 && controlDepth_ == 0) e_.flush();
  emitting_ = &in;
  if (residentDepth_ == 0) {  // else a section of the resident fusion's kernel
    kernelHlo_ = in.name();
    kernelOpName_ = in.metadata().opName;
    kernelKind_ = kind;
  }
  e_.blank();
  if (residentDepth_ == 0) {
    // What the kernel lowers, kept in the .tpu for profiles (docs/ISA.md).
    e_.kernel(isa::KernelMeta{kernelLabel_, metadataText(kind), metadataText(in.name()),
                              metadataText(in.metadata().opName)});
  }
  std::string meta = in.metadata().opName.empty() ? "" : fmt::format(" op_name=\"{}\"", in.metadata().opName);
  e_.comment(fmt::format("{}: {} %{} {}{}", kind, hlo::opcodeName(in.opcode()), in.name(),
                         in.shape().toString(false), meta));
  e_.label(kernelLabel_);
}

void Lowerer::endKernel(double flops, uint64_t hbmBytes, uint64_t vmemBytes) {
  if (residentDepth_ > 0) {  // a section: its HBM bytes are VMEM traffic
    residentFlops_ += flops;
    residentVmem_ = std::max(residentVmem_, vmemBytes);
    return;
  }
  KernelStats k;
  k.name = kernelLabel_;
  k.hlo = kernelHlo_;
  k.opName = kernelOpName_;
  k.kind = kernelKind_;
  k.flops = flops;
  k.hbmBytes = hbmBytes;
  k.vmemBytes = vmemBytes;
  k.estimatedCycles = target::kernelCycles(target_, flops, static_cast<double>(hbmBytes));
  stats_.kernels.push_back(k);
}

int Lowerer::wideScratchBuf(const Instruction& in, ElementType t, const std::vector<int64_t>& dims,
                            const std::string& what) {
  const uint64_t bytes = static_cast<uint64_t>(product(dims)) * typeInfo(t).bytes;
  if (heapBytes_ + scratchTop_ + bytes < options_.heapReachBytes) return tempBuf(t, dims);
  if (bytes > (uint64_t{1} << 32)) {
    fail(in, fmt::format(
                 "llo-gen: {} needs a {}-byte HBM scratch, past the 4 GiB that 32-bit scalar offsets address",
                 what, bytes));
    return -1;
  }
  Buf b;
  b.kind = BufKind::Scratch;
  b.type = t;
  b.dims = dims;
  b.bytes = bytes;
  bufs_.push_back(b);
  int id = static_cast<int>(bufs_.size() - 1);
  bufs_[id].name = fmt::format("scratch{}_{}", id, sanitize(in.name()));
  return id;
}

int Lowerer::tempBuf(ElementType t, const std::vector<int64_t>& dims) {
  // Kernel-local scratch in HBM: it lives above the liveness heap and is
  // reused by every kernel (only one kernel runs at a time).
  Buf b;
  b.kind = BufKind::Heap;
  b.type = t;
  b.dims = dims;
  b.bytes = static_cast<uint64_t>(product(dims)) * typeInfo(t).bytes;
  b.offset = heapBytes_ + scratchTop_;
  scratchTop_ += alignUp(std::max<uint64_t>(b.bytes, 1), 512);
  scratchBytes_ = std::max(scratchBytes_, scratchTop_);
  bufs_.push_back(b);
  scratch_.push_back(static_cast<int>(bufs_.size() - 1));
  return static_cast<int>(bufs_.size() - 1);
}

// ============================================================== DMA copies

void Lowerer::emitCopy(int dstBuf, int64_t dstOff, int srcBuf, int64_t srcOff, std::vector<int64_t> counts,
                       std::vector<int64_t> dstStrides, std::vector<int64_t> srcStrides, int esize, int srcDynReg,
                       int dstDynReg) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  // Drop unit dims, merge contiguous ones.
  std::vector<int64_t> c, ds, ss;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) return;
    if (counts[i] == 1) continue;
    if (!c.empty() && ds.back() == dstStrides[i] * counts[i] && ss.back() == srcStrides[i] * counts[i]) {
      c.back() *= counts[i];
      ds.back() = dstStrides[i];
      ss.back() = srcStrides[i];
      continue;
    }
    c.push_back(counts[i]);
    ds.push_back(dstStrides[i]);
    ss.push_back(srcStrides[i]);
  }
  uint64_t chunk = static_cast<uint64_t>(esize);
  if (!c.empty() && ds.back() == esize && ss.back() == esize) {
    chunk = static_cast<uint64_t>(c.back()) * esize;
    c.pop_back();
    ds.pop_back();
    ss.pop_back();
  }
  // Chunks above 2^31 bytes are split (the descriptor field is 32 bits).
  while (chunk > (uint64_t{1} << 30) && chunk % 2 == 0) {
    chunk /= 2;
    c.push_back(2);
    ds.push_back(static_cast<int64_t>(chunk));
    ss.push_back(static_cast<int64_t>(chunk));
  }
  size_t maxDims = static_cast<size_t>(std::max(1, target_.dma.descriptorDims));
  size_t outer = c.size() > maxDims ? c.size() - maxDims : 0;
  std::vector<Emitter::Dim> dims;
  for (size_t i = outer; i < c.size(); ++i) dims.push_back({c[i], ss[i], ds[i]});
  std::string d = e_.desc(chunk, dims);
  int sd = sreg(), sss = sreg();
  auto setAddr = [&](int reg, int buf, int64_t off, int dyn) {
    if (dyn >= 0) e_.op("sadd {}, {}, {}", S(reg), S(dyn), base(buf) + off);
    else e_.op("smov {}, {}", S(reg), base(buf) + off);
  };
  if (outer == 0) {
    setAddr(sd, dstBuf, dstOff, dstDynReg);
    setAddr(sss, srcBuf, srcOff, srcDynReg);
    e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", dstBuf, srcBuf), d, memRef(dstBuf, S(sd)),
          memRef(srcBuf, S(sss)));
    e_.op("sem.wait sem0");
  } else {
    int64_t total = 1;
    for (size_t i = 0; i < outer; ++i) total *= c[i];
    int si = sreg(), st = sreg(), sq = sreg(), sa = sreg(), sb = sreg();
    e_.op("smov {}, 0", S(si));
    std::string top = e_.newLabel("copy");
    e_.label(top);
    setAddr(sa, dstBuf, dstOff, dstDynReg);
    setAddr(sb, srcBuf, srcOff, srcDynReg);
    e_.op("smov {}, {}", S(st), S(si));
    for (size_t j = outer; j-- > 0;) {
      e_.op("srem {}, {}, {}", S(sq), S(st), c[j]);
      e_.op("sdiv {}, {}, {}", S(st), S(st), c[j]);
      e_.op("smul {}, {}, {}", S(sd), S(sq), ds[j]);
      e_.op("sadd {}, {}, {}", S(sa), S(sa), S(sd));
      e_.op("smul {}, {}, {}", S(sd), S(sq), ss[j]);
      e_.op("sadd {}, {}, {}", S(sb), S(sb), S(sd));
    }
    e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", dstBuf, srcBuf), d, memRef(dstBuf, S(sa)),
          memRef(srcBuf, S(sb)));
    e_.op("sem.wait sem0");
    e_.op("sadd {}, {}, 1", S(si), S(si));
    e_.op("br.lt {}, {}, {}", S(si), total, top);
  }
}

int Lowerer::loadScalar(int buf, int64_t off, ElementType t, int smemSlot) {
  TypeInfo ti = typeInfo(t);
  int sa = sreg(), sx = sreg();
  std::string d = e_.desc(static_cast<uint64_t>(ti.bytes), {});
  e_.op("smov {}, {}", S(sa), base(buf) + off);
  e_.op("{} {}, [{}], {}, sem0", dmaOp("h2s", buf), d, smemSlot * 4, memRef(buf, S(sa)));
  e_.op("sem.wait sem0");
  e_.op("sld {}, [{}]", S(sx), smemSlot * 4);
  if (ti.bytes == 8 && !ti.isFloat) {
    // A 64-bit index: the 32-bit value that clamps the same way.
    int hi = sreg();
    e_.op("sld {}, [{}]", S(hi), smemSlot * 4 + 4);
    saturateToS32(sx, hi, ti.isUnsigned);
    sregs_.put(hi);
  } else if (t == ElementType::BF16) {
    e_.op("sshl {}, {}, 16", S(sx), S(sx));
  } else if (ti.isFloat && ti.bytes < 4) {
    e_.op("sand {}, {}, {}", S(sx), S(sx), ti.bytes == 2 ? 0xFFFF : 0xFF);
    widenScalarFloat(sx, t);
  } else if (ti.bytes < 4 && !ti.isUnsigned) {
    // Sign-extend the stored value (s4 bytes are already sign-extended).
    int sh = 32 - 8 * ti.bytes;
    e_.op("sshl {}, {}, {}", S(sx), S(sx), sh);
    e_.op("ssra {}, {}, {}", S(sx), S(sx), sh);
  } else if (ti.bytes < 4) {
    e_.op("sand {}, {}, {}", S(sx), S(sx), ti.bytes == 2 ? 0xFFFF : 0xFF);
  }
  sregs_.put(sa);
  return sx;
}

void Lowerer::widenScalarFloat(int x, ElementType t) {
  // The scalar unit has no narrow float loads: decode the fields with
  // integer ops, as vld.<type> does for vectors (same results, NaNs as the
  // interpreter's decoding gives them).
  const FloatFormatInfo& f = floatFormatInfo(*hlo::elementTypeInfo(t).floatFormat);
  const int E = f.exponentBits, Mb = f.mantissaBits, T = f.totalBits;
  int sign = sreg(), ex = sreg(), m = sreg(), r = sreg(), c = sreg(), k = sreg();
  auto select = [&](const std::string& cond, int value) {  // r = cond ? value : r
    e_.op("{}", cond);
    e_.op("ssel {}, {}, {}, {}", S(r), S(c), S(value), S(r));
  };
  if (t == ElementType::F8E8M0FNU) {
    e_.op("sshl {}, {}, 23", S(r), S(x));
    e_.op("smov {}, 0x00200000", S(k));  // 2^-127, an f32 subnormal
    select(fmt::format("scmp.eq {}, {}, 0", S(c), S(x)), k);
    e_.op("smov {}, 0x7fc00000", S(k));
    select(fmt::format("scmp.eq {}, {}, 255", S(c), S(x)), k);
  } else {
    e_.op("sshl {}, {}, {}", S(sign), S(x), 32 - T);
    e_.op("sand {}, {}, -2147483648", S(sign), S(sign));
    e_.op("sshr {}, {}, {}", S(ex), S(x), Mb);
    e_.op("sand {}, {}, {}", S(ex), S(ex), (1 << E) - 1);
    e_.op("sand {}, {}, {}", S(m), S(x), (1 << Mb) - 1);
    // Normal: rebias the exponent, widen the mantissa.
    e_.op("sadd {}, {}, {}", S(r), S(ex), 127 - f.exponentBias);
    e_.op("sshl {}, {}, 23", S(r), S(r));
    e_.op("sshl {}, {}, {}", S(k), S(m), 23 - Mb);
    e_.op("sor {}, {}, {}", S(r), S(r), S(k));
    // Subnormal (exponent field 0): m * 2^(1 - bias - M), exact in f32.
    e_.op("scvt.f32.s32 {}, {}", S(k), S(m));
    int scale = sreg();
    e_.op("smov {}, {}", S(scale), static_cast<int32_t>((127 + 1 - f.exponentBias - Mb) << 23));
    e_.op("smul.f32 {}, {}, {}", S(k), S(k), S(scale));
    sregs_.put(scale);
    select(fmt::format("scmp.eq {}, {}, 0", S(c), S(ex)), k);
    if (f.hasInfinity) {
      // IEEE-style: exponent all ones is inf (m = 0) or NaN.
      e_.op("sshl {}, {}, {}", S(k), S(m), 23 - Mb);
      e_.op("sor {}, {}, 0x7f800000", S(k), S(k));
      select(fmt::format("scmp.eq {}, {}, {}", S(c), S(ex), (1 << E) - 1), k);
      e_.op("sor {}, {}, {}", S(r), S(r), S(sign));
      if (T < 16) {
        // The interpreter decodes every f8 NaN as the positive quiet NaN.
        e_.op("smov {}, 0x7fc00000", S(k));
        int n = sreg();
        e_.op("scmp.ne {}, {}, 0", S(n), S(m));
        e_.op("scmp.eq {}, {}, {}", S(c), S(ex), (1 << E) - 1);
        e_.op("sand {}, {}, {}", S(c), S(c), S(n));
        e_.op("ssel {}, {}, {}, {}", S(r), S(c), S(k), S(r));
        sregs_.put(n);
      }
    } else {
      e_.op("sor {}, {}, {}", S(r), S(r), S(sign));
      e_.op("smov {}, 0x7fc00000", S(k));
      if (f.hasNaN && f.hasNegativeZero) {  // *fn: NaN is the all-ones magnitude
        int a = sreg();
        e_.op("sand {}, {}, {}", S(a), S(x), (1 << (T - 1)) - 1);
        select(fmt::format("scmp.eq {}, {}, {}", S(c), S(a), (1 << (T - 1)) - 1), k);
        sregs_.put(a);
      } else if (f.hasNaN) {  // *fnuz: NaN is the negative-zero pattern
        select(fmt::format("scmp.eq {}, {}, {}", S(c), S(x), 1 << (T - 1)), k);
      }
    }
  }
  e_.op("smov {}, {}", S(x), S(r));
  for (int q : {sign, ex, m, r, c, k}) sregs_.put(q);
}


// ============================================================== vector code

VReg Lowerer::vload(ElementType t, const std::string& addr, const std::string& extra) {
  VReg v = valloc(t);
  vloadInto(v, t, addr, extra);
  return v;
}

void Lowerer::vloadInto(VReg d, ElementType t, const std::string& addr, const std::string& extra) {
  if (typeInfo(t).isComplex) return complexLoadStore(true, d, t, addr, extra);
  if (isPairType(t)) {
    e_.op("vld.e64 {}, [{}], 0{}", V(d), addr, extra);
    e_.op("vld.e64 {}, [{}], 1{}", H(d), addr, extra);
    return;
  }
  e_.op("{} {}, [{}]{}", loadMnemonic(t), V(d), addr, extra);
}

VReg Lowerer::vcopy(VReg v, ElementType t) {
  VReg d = valloc(t);
  e_.op("vmov.s32 {}, {}", V(d), V(v));
  if (d.hi >= 0) e_.op("vmov.s32 {}, {}", H(d), H(v));
  if (d.im >= 0) e_.op("vmov.s32 {}, {}", vregs_.name(d.im), vregs_.name(v.im));
  if (d.imh >= 0) e_.op("vmov.s32 {}, {}", vregs_.name(d.imh), vregs_.name(v.imh));
  return d;
}

void Lowerer::vstore(VReg v, ElementType t, const std::string& addr, const std::string& extra) {
  TypeInfo ti = typeInfo(t);
  if (ti.isComplex) {
    complexLoadStore(false, v, t, addr, extra);
  } else if (isPairType(t)) {
    e_.op("vst.e64 {}, [{}], 0{}", V(v), addr, extra);
    e_.op("vst.e64 {}, [{}], 1{}", H(v), addr, extra);
  } else if (ti.bytes == 4) {
    e_.op("vst {}, [{}]{}", V(v), addr, extra);
  } else if (ti.isFloat) {
    e_.op("vst.{} {}, [{}]{}", ti.dtype, V(v), addr, extra);
  } else if (ti.bytes == 2) {
    e_.op("vst.s16 {}, [{}]{}", V(v), addr, extra);
  } else {
    // vst.s8 saturates; wrap to the signed byte with the same low bits.
    // Sub-byte integers are stored as XLA literals hold them: the value
    // wrapped to its bits, sign- or zero-extended to the byte (kernels such
    // as dots and bit generators produce wider values).
    VReg w = valloc(ElementType::S32);
    int bits = ti.bits < 8 && t != ElementType::Pred ? ti.bits : 8;
    if (bits < 8 && ti.isUnsigned) {
      e_.op("vand {}, {}, {}", V(w), V(v), (1 << bits) - 1);
    } else {
      e_.op("vshl {}, {}, {}", V(w), V(v), 32 - bits);
      e_.op("vsra {}, {}, {}", V(w), V(w), 32 - bits);
    }
    e_.op("vst.s8 {}, [{}]{}", V(w), addr, extra);
    vfree(w);
  }
}

std::optional<bool> Lowerer::finishTrivialDot(const DotGeometry& geo, int dst, ElementType ot) {
  int64_t outputs = geo.b * geo.m * geo.n;
  if (outputs == 0) {
    endKernel(0, 0, 0);
    return true;
  }
  if (geo.k != 0) return std::nullopt;
  bool ok = fillZero(dst, outputs, ot);
  endKernel(0, bufs_[dst].bytes, 0);
  return ok;
}

void Lowerer::emitLanePopcount(VReg x, VReg t, bool smearTopBit) {
  if (smearTopBit)
    for (int sh : {1, 2, 4, 8, 16}) {
      e_.op("vshr {}, {}, {}", V(t), V(x), sh);
      e_.op("vor {}, {}, {}", V(x), V(x), V(t));
    }
  // Bit counts of pairs, then nibbles, then bytes, summed by a multiply.
  e_.op("vshr {}, {}, 1", V(t), V(x));
  e_.op("vand {}, {}, 1431655765", V(t), V(t));
  e_.op("vsub.s32 {}, {}, {}", V(x), V(x), V(t));
  e_.op("vshr {}, {}, 2", V(t), V(x));
  e_.op("vand {}, {}, 858993459", V(t), V(t));
  e_.op("vand {}, {}, 858993459", V(x), V(x));
  e_.op("vadd.s32 {}, {}, {}", V(x), V(x), V(t));
  e_.op("vshr {}, {}, 4", V(t), V(x));
  e_.op("vadd.s32 {}, {}, {}", V(x), V(x), V(t));
  e_.op("vand {}, {}, 252645135", V(x), V(x));
  e_.op("vmul.s32 {}, {}, 16843009", V(x), V(x));
  e_.op("vshr {}, {}, 24", V(x), V(x));
}

VReg Lowerer::vconst(ElementType t, uint32_t bits) {
  VReg v = valloc(t);
  if (v.hi >= 0) e_.op("vmov.s32 {}, 0", H(v));  // a pair: the zero-extended value
  for (int r : {v.im, v.imh})  // c128: the imaginary pair
    if (r >= 0) e_.op("vmov.s32 {}, 0", vregs_.name(r));
  e_.op("vmov.s32 {}, {}", V(v), static_cast<int32_t>(bits));
  return v;
}

VReg Lowerer::toMask01(int mask) {
  VReg one = vconst(ElementType::S32, 1);
  VReg d = valloc(ElementType::Pred);
  e_.op("vsel.s32 {}, {}, {}, 0", V(d), M(mask), V(one));
  vfree(one);
  masks_.put(mask);
  return d;
}

VReg Lowerer::binop(const char* mnemonic, VReg a, const std::string& b, ElementType t) {
  VReg d = valloc(t);
  e_.op("{} {}, {}, {}", mnemonic, V(d), V(a), b);
  return d;
}

VReg Lowerer::unop(const char* mnemonic, VReg a, ElementType t) {
  VReg d = valloc(t);
  e_.op("{} {}, {}", mnemonic, V(d), V(a));
  return d;
}

VReg Lowerer::normalize(VReg r) {
  TypeInfo ti = typeInfo(r.t);
  if (ti.bits >= 32 || r.t == ElementType::Pred) return r;
  if (ti.isFloat) {
    e_.op("vrnd.{} {}, {}", ti.dtype, V(r), V(r));
  } else if (ti.isUnsigned) {
    e_.op("vand {}, {}, {}", V(r), V(r), (1 << ti.bits) - 1);
  } else {
    e_.op("vshl {}, {}, {}", V(r), V(r), 32 - ti.bits);
    e_.op("vsra {}, {}, {}", V(r), V(r), 32 - ti.bits);
  }
  return r;
}


std::optional<VReg> Lowerer::lowerReducerOutput(const Computation& c, int64_t index,
                                                const std::function<VReg(int64_t)>& loadParam) {
  const Instruction* root = c.root()->operand(index);
  std::set<const Instruction*> needed;
  std::vector<const Instruction*> stack = {root};
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    if (!needed.insert(i).second) continue;
    for (const Instruction* o : i->operands()) stack.push_back(o);
  }
  std::map<const Instruction*, int> usesLeft;
  for (const auto& up : c.instructions())
    if (needed.count(up.get()))
      for (const Instruction* o : up->operands()) ++usesLeft[o];
  std::map<const Instruction*, VReg> val;
  for (const auto& up : c.instructions()) {
    const Instruction& in = *up;
    if (!needed.count(&in)) continue;
    if (in.opcode() == Opcode::Parameter) {
      val[&in] = loadParam(in.attrs().parameterNumber);
      continue;
    }
    if (in.opcode() == Opcode::Tuple) {
      fail(in, "llo-gen: a reducer computes a tuple other than its root");
      return std::nullopt;
    }
    std::vector<VReg> ops;
    for (const Instruction* o : in.operands()) ops.push_back(val[o]);
    auto r = lowerOp(in, ops);
    if (!r) return std::nullopt;
    val[&in] = *r;
    for (const Instruction* o : in.operands())
      if (--usesLeft[o] == 0 && val[o].r != r->r) vfree(val[o]);
  }
  VReg out = val[root];
  out.t = root->shape().elementType();
  if (failed_) return std::nullopt;
  return out;
}

bool Lowerer::lowerComputation(const Computation& c, const std::vector<VReg>& params, std::vector<VReg>& out,
                               const std::map<const Instruction*, VReg>* preset) {
  std::map<const Instruction*, VReg> val;
  std::map<const Instruction*, int> usesLeft;
  auto given = [&](const Instruction* i) { return preset && preset->count(i); };
  const bool rootTuple = c.root()->opcode() == Opcode::Tuple ||
                         (concatRootAsTuple_ && c.root()->opcode() == Opcode::Concatenate);
  for (const auto& up : c.instructions())
    for (const Instruction* o : up->operands()) ++usesLeft[o];
  for (const auto& up : c.instructions()) {
    const Instruction& in = *up;
    if (rootTuple && &in == c.root()) continue;
    if (given(&in)) {
      val[&in] = preset->at(&in);
      continue;
    }
    if (in.opcode() == Opcode::Parameter) {
      int64_t p = in.attrs().parameterNumber;
      if (p < 0 || static_cast<size_t>(p) >= params.size()) return fail(in, "llo-gen: bad parameter number");
      val[&in] = params[static_cast<size_t>(p)];
      continue;
    }
    if (in.opcode() == Opcode::Tuple) continue;  // only as the root
    std::vector<VReg> ops;
    for (const Instruction* o : in.operands()) ops.push_back(val[o]);
    auto r = lowerOp(in, ops);
    if (!r) return false;
    val[&in] = *r;
    for (const Instruction* o : in.operands())
      if (--usesLeft[o] == 0 && o->opcode() != Opcode::Parameter && o != c.root() && !given(o)) vfree(val[o]);
  }
  std::vector<const Instruction*> roots;
  if (rootTuple) roots.assign(c.root()->operands().begin(), c.root()->operands().end());
  else roots.push_back(c.root());
  std::set<int> taken;
  for (const Instruction* r : roots) {
    VReg v = val[r];
    if (r->opcode() == Opcode::Parameter || given(r) || taken.count(v.r)) v = vcopy(v, v.t);
    taken.insert(v.r);
    v.t = r->shape().elementType();
    out.push_back(v);
  }
  return !failed_;
}

VReg Lowerer::divide32(VReg a, VReg b, bool isSigned, bool quotient, ElementType t) {
  // f32 is not exact for 32-bit operands: restoring long division on the
  // magnitudes, one quotient bit per step, then XLA's rules: x / 0 = -1,
  // x % 0 = x, INT_MIN / -1 = INT_MIN (wrapping), signs as in C.
  VReg n = valloc(ElementType::S32), d = valloc(ElementType::S32);
  e_.op("vmov.s32 {}, {}", V(n), V(a));
  e_.op("vmov.s32 {}, {}", V(d), V(b));
  if (isSigned) {
    VReg z = vconst(ElementType::S32, 0);
    VReg neg = binop("vsub.s32", z, V(n), ElementType::S32);
    e_.op("vmax.s32 {}, {}, {}", V(neg), V(neg), V(n));  // |n|; INT_MIN stays 0x80000000 (as u32: 2^31)
    e_.op("vmov.s32 {}, {}", V(n), V(neg));
    e_.op("vsub.s32 {}, {}, {}", V(neg), V(z), V(d));
    e_.op("vmax.s32 {}, {}, {}", V(d), V(neg), V(d));
    vfree(neg);
    vfree(z);
  }
  VReg q = vconst(ElementType::S32, 0), r = vconst(ElementType::S32, 0);
  VReg df = binop("vxor", d, "-2147483648", ElementType::S32);  // d with the sign bit flipped: u32 order
  VReg top = valloc(ElementType::S32), bit = valloc(ElementType::S32), rf = valloc(ElementType::S32),
       rs = valloc(ElementType::S32), qs = valloc(ElementType::S32);
  int ge = malloc_(), carry = malloc_();
  for (int i = 31; i >= 0; --i) {
    e_.op("vshr {}, {}, 31", V(top), V(r));
    e_.op("vshl {}, {}, 1", V(r), V(r));
    e_.op("vshr {}, {}, {}", V(bit), V(n), i);
    e_.op("vand {}, {}, 1", V(bit), V(bit));
    e_.op("vor {}, {}, {}", V(r), V(r), V(bit));
    // r >= d (unsigned), or the shift carried out of 32 bits.
    e_.op("vxor {}, {}, -2147483648", V(rf), V(r));
    e_.op("vcmp.ge.s32 {}, {}, {}", M(ge), V(rf), V(df));
    e_.op("vcmp.ne.s32 {}, {}, 0", M(carry), V(top));
    e_.op("mor {}, {}, {}", M(ge), M(ge), M(carry));
    e_.op("vsub.s32 {}, {}, {}", V(rs), V(r), V(d));
    e_.op("vsel.s32 {}, {}, {}, {}", V(r), M(ge), V(rs), V(r));
    e_.op("vor {}, {}, {}", V(qs), V(q), static_cast<int32_t>(1u << i));
    e_.op("vsel.s32 {}, {}, {}, {}", V(q), M(ge), V(qs), V(q));
  }
  VReg res = quotient ? q : r;
  if (isSigned) {
    // Quotient negative when the signs differ, remainder takes a's sign.
    VReg sgn = quotient ? binop("vxor", a, V(b), ElementType::S32) : valloc(ElementType::S32);
    if (!quotient) e_.op("vmov.s32 {}, {}", V(sgn), V(a));
    int m = malloc_();
    e_.op("vcmp.lt.s32 {}, {}, 0", M(m), V(sgn));
    VReg z = vconst(ElementType::S32, 0);
    VReg neg = binop("vsub.s32", z, V(res), ElementType::S32);
    e_.op("vsel.s32 {}, {}, {}, {}", V(res), M(m), V(neg), V(res));
    masks_.put(m);
    for (VReg x : {sgn, z, neg}) vfree(x);
  }
  // Division by zero: the loop gives q = all ones and r = |a|; XLA wants
  // -1 and a.
  e_.op("vcmp.eq.s32 {}, {}, 0", M(ge), V(b));
  VReg out = valloc(t);
  if (quotient) {
    e_.op("mnot {}, {}", M(ge), M(ge));
    e_.op("vsel.s32 {}, {}, {}, -1", V(out), M(ge), V(res));
  } else {
    e_.op("vsel.s32 {}, {}, {}, {}", V(out), M(ge), V(a), V(res));
  }
  masks_.put(ge);
  masks_.put(carry);
  for (VReg x : {n, d, q, r, df, top, bit, rf, rs, qs}) vfree(x);
  return out;
}

// ============================================================== elementwise ops

// The table (op_table.cpp) says what each op is on each type class; the
// composed cells name one of these member functions.
Lowerer::ExpansionFn Lowerer::expansionFn(Expansion e) {
  struct Entry {
    Expansion id;
    ExpansionFn fn;
  };
  using L = Lowerer;
  static constexpr Entry kFns[] = {
      {Expansion::None, nullptr},
      {Expansion::Move, &L::moveValue},
      {Expansion::MapComputation, &L::mapComputation},
      {Expansion::LaneConstant, &L::laneConstant},
      {Expansion::LaneConvert, &L::laneConvert},
      {Expansion::LaneBitcastConvert, &L::laneBitcastConvert},
      {Expansion::LaneMinMax, &L::laneMinMax},
      {Expansion::LaneDivRem, &L::laneDivRem},
      {Expansion::LaneNot, &L::laneNot},
      {Expansion::LaneNegate, &L::laneNegate},
      {Expansion::LaneAbs, &L::laneAbs},
      {Expansion::LaneSign, &L::laneSign},
      {Expansion::LaneSelect, &L::laneSelect},
      {Expansion::LaneClamp, &L::laneClamp},
      {Expansion::LaneMulhi, &L::laneMulhi},
      {Expansion::LaneShift, &L::laneShift},
      {Expansion::LanePopcntClz, &L::lanePopcntClz},
      {Expansion::LaneCompare, &L::laneCompare},
      {Expansion::LaneErf, &L::laneErf},
      {Expansion::LaneAsinAcos, &L::laneAsinAcos},
      {Expansion::LaneAtan, &L::laneAtan},
      {Expansion::LaneInverseHyperbolic, &L::laneInverseHyperbolic},
      {Expansion::LaneAtan2, &L::laneAtan2},
      {Expansion::LaneTan, &L::laneTan},
      {Expansion::LaneExpm1, &L::laneExpm1},
      {Expansion::LaneLog1p, &L::laneLog1p},
      {Expansion::LaneSinhCosh, &L::laneSinhCosh},
      {Expansion::LaneCbrt, &L::laneCbrt},
      {Expansion::LaneIsFinite, &L::laneIsFinite},
      {Expansion::LaneRoundAfz, &L::laneRoundAfz},
      {Expansion::ReducePrecision, &L::reducePrecisionOp},
      {Expansion::IntegerPower, &L::integerPowerOp},
      {Expansion::ImagOfReal, &L::imagOfReal},
      {Expansion::PairConstant, &L::pairConstant},
      {Expansion::PairConvert, &L::pairConvert},
      {Expansion::PairBitcastConvert, &L::moveValue},
      {Expansion::PairAddSub, &L::pairAddSubOp},
      {Expansion::PairNegateAbs, &L::pairNegateAbs},
      {Expansion::PairMinMax, &L::pairMinMax},
      {Expansion::PairClamp, &L::pairClamp},
      {Expansion::PairCompare, &L::pairCompareOp},
      {Expansion::PairSelect, &L::pairSelectOp},
      {Expansion::PairIsFinite, &L::pairIsFinite},
      {Expansion::PairIntSign, &L::pairIntSign},
      {Expansion::PairPopcntClz, &L::pairPopcntClz},
      {Expansion::PairImag, &L::pairImag},
      {Expansion::ExpF64, &L::expF64Op},
      {Expansion::F64Library, &L::f64LibraryOp},
      {Expansion::ComplexConstant, &L::complexConstantOp},
      {Expansion::ComplexConvert, &L::complexConvertOp},
      {Expansion::ComplexAddSub, &L::complexAddSubOp},
      {Expansion::ComplexNegate, &L::complexNegateOp},
      {Expansion::ComplexReal, &L::complexRealOp},
      {Expansion::ComplexImag, &L::complexImagOp},
      {Expansion::ComplexFromParts, &L::complexFromPartsOp},
      {Expansion::ComplexCompare, &L::complexCompareOp},
      {Expansion::ComplexSelect, &L::complexSelectOp},
      {Expansion::ComplexMath, &L::complexMathOp},
  };
  static_assert(std::size(kFns) == kExpansionCount, "every expansion id has a function");
  static_assert(
      [] {
        for (size_t i = 0; i < std::size(kFns); ++i)
          if (static_cast<size_t>(kFns[i].id) != i) return false;
        return true;
      }(),
      "expansion functions listed in the order of the Expansion enum");
  return kFns[static_cast<size_t>(e)].fn;
}

std::optional<VReg> Lowerer::lowerOp(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  std::vector<ElementType> types;
  for (const VReg& v : ops) types.push_back(v.t);
  OpTyping typing = elementwiseTyping(in.opcode(), rt, types);
  if (!elementwiseLegal(in.opcode(), rt, types, {in.attrs().comparisonDirection, in.shape().isScalar()})) {
    fail(in, illegalElementwiseMessage(in, typing));
    return std::nullopt;
  }
  const OpCell& cell = opCell(in.opcode(), typing.cls);
  if (cell.kind == CellKind::Composed) return (this->*expansionFn(cell.expansion))(in, ops);
  bool pair = typing.cls == TypeClass::F64 || typing.cls == TypeClass::S64 || typing.cls == TypeClass::U64;
  if (!pair) {  // one instruction on 32-bit lanes, the narrow types rounded after it
    if (ops.size() == 1) return normalize(unop(cell.instr, ops[0], rt));
    return normalize(binop(cell.instr, ops[0], V(ops[1]), rt));
  }
  VReg d = valloc(rt);
  const VReg& a = ops[0];
  if (cell.kind == CellKind::Halves) {  // a 32-bit instruction on each word
    if (ops.size() == 1) {
      e_.op("{} {}, {}", cell.instr, V(d), V(a));
      e_.op("{} {}, {}", cell.instr, H(d), H(a));
    } else {
      e_.op("{} {}, {}, {}", cell.instr, V(d), V(a), V(ops[1]));
      e_.op("{} {}, {}, {}", cell.instr, H(d), H(a), H(ops[1]));
    }
    return d;
  }
  // A register-pair row, once per word of the result.
  for (int w = 0; w < 2; ++w) {
    if (ops.size() == 1)
      e_.op("{} {}, {}, {}, {}", cell.instr, w ? H(d) : V(d), V(a), H(a), w);
    else
      e_.op("{} {}, {}, {}, {}, {}, {}", cell.instr, w ? H(d) : V(d), V(a), H(a), V(ops[1]), H(ops[1]), w);
  }
  return d;
}

// ---- composed expansions on any type class and on 32-bit lanes

std::optional<VReg> Lowerer::moveValue(const Instruction& in, const std::vector<VReg>& ops) {
  return vcopy(ops[0], in.shape().elementType());
}

std::optional<VReg> Lowerer::mapComputation(const Instruction& in, const std::vector<VReg>& ops) {
  std::vector<VReg> out;
  if (!lowerComputation(*in.toApply(), ops, out) || out.size() != 1) return std::nullopt;
  return out[0];
}

std::optional<VReg> Lowerer::laneConstant(const Instruction& in, const std::vector<VReg>&) {
  ElementType rt = in.shape().elementType();
  return vconst(rt, literalBits(in.literal(), rt));
}

std::optional<VReg> Lowerer::reducePrecisionOp(const Instruction& in, const std::vector<VReg>& ops) {
  return lowerReducePrecision(in, ops[0]);
}

std::optional<VReg> Lowerer::integerPowerOp(const Instruction& in, const std::vector<VReg>& ops) {
  return integerPower(ops[0], ops[1], in.shape().elementType());
}

// imag of a real type: the type's all-zero-bits value, as the interpreter's zeros.
std::optional<VReg> Lowerer::imagOfReal(const Instruction& in, const std::vector<VReg>&) {
  ElementType rt = in.shape().elementType();
  return vconst(rt, literalBits(hlo::Literal::zeros(hlo::Shape::scalar(rt)), rt));
}

std::optional<VReg> Lowerer::unsupportedOp(const Instruction& in, ElementType ot) {
  fail(in, fmt::format("llo-gen: {} on {} is not supported by the vector lowering yet", hlo::opcodeName(in.opcode()),
                       hlo::elementTypeName(ot)));
  return std::nullopt;
}

// Signed view of unsigned 32-bit values for ordering (flip the sign bit).
VReg Lowerer::flipSignBit(VReg a) {
  VReg d = valloc(a.t);
  e_.op("vxor {}, {}, -2147483648", V(d), V(a));
  return d;
}

// An f32 value rounded toward zero.
VReg Lowerer::truncTowardZero(VReg a) {
  VReg fl = unop("vfloor.f32", a, ElementType::F32);
  VReg ce = unop("vceil.f32", a, ElementType::F32);
  int m = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, 0", M(m), V(a));
  VReg d = valloc(ElementType::F32);
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(ce), V(fl));
  masks_.put(m);
  vfree(fl);
  vfree(ce);
  return d;
}

// bitcast-convert and convert between 32-bit lane types.
std::optional<VReg> Lowerer::laneBitcastConvert(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  // Registers hold values, not memory bits: only some pairs are a move
  // (fusions with others are lowered instruction by instruction).
  TypeInfo ri = typeInfo(rt), oi = typeInfo(ot);
  VReg d = valloc(rt);
  if (ri.bits == 32 && oi.bits == 32) {
    e_.op("vmov.s32 {}, {}", V(d), V(ops[0]));
  } else if (ot == ElementType::BF16 && !ri.isFloat && ri.bits == 16) {
    e_.op("vshr {}, {}, 16", V(d), V(ops[0]));
    normalize(d);
  } else if (rt == ElementType::BF16 && !oi.isFloat && oi.bits == 16) {
    e_.op("vshl {}, {}, 16", V(d), V(ops[0]));
  } else if (!ri.isFloat && !oi.isFloat && ri.bits == oi.bits) {
    e_.op("vmov.s32 {}, {}", V(d), V(ops[0]));
    normalize(d);
  } else {
    vfree(d);
    return unsupportedOp(in, ot);
  }
  return d;
}

std::optional<VReg> Lowerer::laneConvert(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool f = typeInfo(ot).isFloat;
  bool u = typeInfo(ot).isUnsigned;
  TypeInfo ri = typeInfo(rt), oi = typeInfo(ot);
  if (rt == ElementType::Pred) {
    int m = malloc_();
    e_.op("vcmp.ne.{} {}, {}, 0", f ? "f32" : "s32", M(m), V(ops[0]));
    return toMask01(m);
  }
  if (ri.isFloat) {
    if (f) return normalize(unop("vmov.s32", ops[0], rt));
    if (oi.bits == 32 && rt != ElementType::F32) {
      // 32-bit integers to a narrow float: through f32 they would round
      // twice; the interpreter rounds once from f64 (exact for them).
      VReg x = pairFrom32(ops[0], ElementType::F64);
      VReg d = valloc(rt);
      e_.op("vcvt.{}.f64 {}, {}, {}", typeInfo(rt).dtype, V(d), V(x), H(x));
      vfree(x);
      return d;
    }
    if (!(u && oi.bits == 32)) return normalize(unop("vcvt.f32.s32", ops[0], rt));
    // u32: hi * 65536 + lo rounds once (both parts are exact in f32).
    VReg hi = binop("vshr", ops[0], "16", ElementType::S32);
    VReg lo = binop("vand", ops[0], "65535", ElementType::S32);
    e_.op("vcvt.f32.s32 {}, {}", V(hi), V(hi));
    e_.op("vcvt.f32.s32 {}, {}", V(lo), V(lo));
    e_.op("vmul.f32 {}, {}, 65536.0", V(hi), V(hi));
    VReg d = binop("vadd.f32", hi, V(lo), rt);
    vfree(hi);
    vfree(lo);
    return normalize(d);
  }
  if (!f) return normalize(unop("vmov.s32", ops[0], rt));
  // Float to integer: truncate and saturate to the type's range (XLA).
  if (ri.isUnsigned && ri.bits == 32) {
    VReg x = binop("vmax.f32", ops[0], "0.0", ElementType::F32);  // NaN stays NaN, converts to 0
    VReg small = unop("vcvt.s32.f32", x, rt);
    VReg big = binop("vsub.f32", x, "2147483648.0", ElementType::F32);
    e_.op("vcvt.s32.f32 {}, {}", V(big), V(big));
    e_.op("vadd.s32 {}, {}, -2147483648", V(big), V(big));
    int m = malloc_();
    e_.op("vcmp.ge.f32 {}, {}, 2147483648.0", M(m), V(x));
    VReg d = valloc(rt);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(big), V(small));
    masks_.put(m);
    vfree(x);
    vfree(small);
    vfree(big);
    return d;
  }
  VReg d = unop("vcvt.s32.f32", ops[0], rt);
  if (ri.bits < 32) {
    int w = ri.bits;
    int64_t lo = ri.isUnsigned ? 0 : -(int64_t{1} << (w - 1));
    int64_t hi = ri.isUnsigned ? (int64_t{1} << w) - 1 : (int64_t{1} << (w - 1)) - 1;
    e_.op("vmax.s32 {}, {}, {}", V(d), V(d), lo);
    e_.op("vmin.s32 {}, {}, {}", V(d), V(d), hi);
  }
  return d;
}

// Composed integer arithmetic (and sign, select, clamp) on 32-bit lanes.
std::optional<VReg> Lowerer::laneMinMax(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool u = typeInfo(ot).isUnsigned;
  bool mx = in.opcode() == Opcode::Maximum;
  if (u && typeInfo(ot).bits == 32) {
    VReg a = flipSignBit(ops[0]), b = flipSignBit(ops[1]);
    VReg d = binop(mx ? "vmax.s32" : "vmin.s32", a, V(b), rt);
    e_.op("vxor {}, {}, -2147483648", V(d), V(d));
    vfree(a);
    vfree(b);
    return d;
  }
  return binop(mx ? "vmax.s32" : "vmin.s32", ops[0], V(ops[1]), rt);
}

std::optional<VReg> Lowerer::laneDivRem(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool f = typeInfo(ot).isFloat;
  bool u = typeInfo(ot).isUnsigned;
  bool div = in.opcode() == Opcode::Divide;
  if (f) {
    VReg q = binop("vdiv.f32", ops[0], V(ops[1]), rt);
    if (div) return normalize(q);
    VReg t = truncTowardZero(q);
    e_.op("vmul.f32 {}, {}, {}", V(t), V(t), V(ops[1]));
    VReg d = binop("vsub.f32", ops[0], V(t), rt);
    vfree(q);
    vfree(t);
    return normalize(d);
  }
  if (typeInfo(ot).bits == 32) return divide32(ops[0], ops[1], !u, div, rt);
  // Narrow integers: division through f32 is exact (|x| < 2^24), then
  // the zero-divisor rules: x / 0 = -1, x % 0 = x.
  VReg a = unop("vcvt.f32.s32", ops[0], ElementType::F32);
  VReg b = unop("vcvt.f32.s32", ops[1], ElementType::F32);
  VReg q = binop("vdiv.f32", a, V(b), ElementType::F32);
  VReg t = truncTowardZero(q);
  VReg qi = unop("vcvt.s32.f32", t, ElementType::S32);
  vfree(a);
  vfree(b);
  vfree(q);
  vfree(t);
  int z = malloc_();
  e_.op("vcmp.eq.s32 {}, {}, 0", M(z), V(ops[1]));
  VReg d;
  if (div) {
    VReg m1 = vconst(ElementType::S32, 0xffffffffu);
    d = valloc(rt);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(z), V(m1), V(qi));
    vfree(m1);
  } else {
    VReg p = binop("vmul.s32", qi, V(ops[1]), ElementType::S32);
    VReg r = binop("vsub.s32", ops[0], V(p), rt);
    d = valloc(rt);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(z), V(ops[0]), V(r));
    vfree(p);
    vfree(r);
  }
  masks_.put(z);
  vfree(qi);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneNot(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  if (rt == ElementType::Pred) return binop("vxor", ops[0], "1", rt);
  return normalize(unop("vnot", ops[0], rt));
}

std::optional<VReg> Lowerer::laneNegate(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg z = vconst(ElementType::S32, 0);
  VReg d = binop("vsub.s32", z, V(ops[0]), rt);
  vfree(z);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneAbs(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg z = vconst(ElementType::S32, 0);
  VReg n = binop("vsub.s32", z, V(ops[0]), rt);
  VReg d = binop("vmax.s32", ops[0], V(n), rt);
  vfree(z);
  vfree(n);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneSign(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool f = typeInfo(ot).isFloat;
  const char* cmp = f ? "f32" : "s32";
  int gt = malloc_(), lt = malloc_();
  e_.op("vcmp.gt.{} {}, {}, 0", cmp, M(gt), V(ops[0]));
  e_.op("vcmp.lt.{} {}, {}, 0", cmp, M(lt), V(ops[0]));
  VReg one = vconst(rt, f ? 0x3f800000u : 1u);
  VReg mone = vconst(rt, f ? 0xbf800000u : 0xffffffffu);
  VReg d = valloc(rt);
  e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(lt), V(mone), V(ops[0]));
  e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(gt), V(one), V(d));
  vfree(one);
  vfree(mone);
  masks_.put(gt);
  masks_.put(lt);
  return d;
}

std::optional<VReg> Lowerer::laneSelect(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  int m = malloc_();
  e_.op("vcmp.ne.s32 {}, {}, 0", M(m), V(ops[0]));
  VReg d = valloc(rt);
  e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(m), V(ops[1]), V(ops[2]));
  masks_.put(m);
  return d;
}

std::optional<VReg> Lowerer::laneClamp(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  bool fl = typeInfo(rt).isFloat;
  if (typeInfo(rt).isUnsigned && typeInfo(rt).bits == 32) {  // order u32 through the flipped sign bit
    VReg lo = flipSignBit(ops[0]), x = flipSignBit(ops[1]), hi = flipSignBit(ops[2]);
    VReg a = binop("vmax.s32", x, V(lo), rt);
    VReg d = binop("vmin.s32", a, V(hi), rt);
    e_.op("vxor {}, {}, -2147483648", V(d), V(d));
    for (VReg r : {lo, x, hi, a}) vfree(r);
    return d;
  }
  VReg a = binop(fl ? "vmax.f32" : "vmax.s32", ops[1], V(ops[0]), rt);
  VReg d = binop(fl ? "vmin.f32" : "vmin.s32", a, V(ops[2]), rt);
  vfree(a);
  return d;
}

// mulhi, shifts, popcnt and count-leading-zeros on 32-bit lanes; mulhi on
// integers of 8 bits or more (the table).
std::optional<VReg> Lowerer::laneMulhi(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool u = typeInfo(ot).isUnsigned;
  int bits = typeInfo(ot).bits;
  if (bits == 32) {
    // The high word of the exact 64-bit product: the operands extended
    // to pairs (sign or zero), then word 1 of vmul.i64.
    VReg ah = valloc(ElementType::S32), bh = valloc(ElementType::S32);
    if (u) {
      e_.op("vmov.s32 {}, 0", V(ah));
      e_.op("vmov.s32 {}, 0", V(bh));
    } else {
      e_.op("vsra {}, {}, 31", V(ah), V(ops[0]));
      e_.op("vsra {}, {}, 31", V(bh), V(ops[1]));
    }
    VReg d = valloc(rt);
    e_.op("vmul.i64 {}, {}, {}, {}, {}, 1", V(d), V(ops[0]), V(ah), V(ops[1]), V(bh));
    vfree(ah);
    vfree(bh);
    return d;
  }
  // 8 and 16 bits: the product is exact in a 32-bit lane (u16's bit
  // pattern too), its high half one shift away.
  VReg d = binop("vmul.s32", ops[0], V(ops[1]), rt);
  e_.op("{} {}, {}, {}", u ? "vshr" : "vsra", V(d), V(d), bits);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneShift(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  int bits = typeInfo(rt).bits;
  const char* m = in.opcode() == Opcode::ShiftLeft ? "vshl"
                  : in.opcode() == Opcode::ShiftRightLogical ? "vshr" : "vsra";
  VReg x = ops[0];
  bool extend = in.opcode() == Opcode::ShiftRightArithmetic && bits < 32 && typeInfo(rt).isUnsigned;
  if (extend) {  // the type's top bit is the sign an arithmetic shift copies
    x = binop("vshl", ops[0], std::to_string(32 - bits), rt);
    e_.op("vsra {}, {}, {}", V(x), V(x), 32 - bits);
  }
  VReg r = binop(m, x, V(ops[1]), rt);
  int lo = malloc_(), hi = malloc_();
  e_.op("vcmp.ge.s32 {}, {}, 0", M(lo), V(ops[1]));
  e_.op("vcmp.lt.s32 {}, {}, {}", M(hi), V(ops[1]), bits);
  e_.op("mand {}, {}, {}", M(lo), M(lo), M(hi));
  VReg d = valloc(rt);
  if (in.opcode() == Opcode::ShiftRightArithmetic) {
    VReg s = binop("vsra", x, "31", rt);
    e_.op("vsel.s32 {}, {}, {}, {}", V(d), M(lo), V(r), V(s));
    vfree(s);
  } else {
    e_.op("vsel.s32 {}, {}, {}, 0", V(d), M(lo), V(r));
  }
  if (in.opcode() == Opcode::ShiftRightLogical && bits < 32 && !typeInfo(rt).isUnsigned) {
    // Logical shift of a sign-extended value: shift the zero-extended one.
    VReg z = binop("vand", ops[0], std::to_string((1 << bits) - 1), rt);
    VReg r2 = binop("vshr", z, V(ops[1]), rt);
    e_.op("vsel.s32 {}, {}, {}, 0", V(d), M(lo), V(r2));
    vfree(z);
    vfree(r2);
  }
  masks_.put(lo);
  masks_.put(hi);
  vfree(r);
  if (extend) vfree(x);
  return normalize(d);
}

std::optional<VReg> Lowerer::lanePopcntClz(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  int bits = typeInfo(rt).bits;
  VReg x = valloc(rt);
  if (bits < 32) e_.op("vand {}, {}, {}", V(x), V(ops[0]), (1 << bits) - 1);
  else e_.op("vmov.s32 {}, {}", V(x), V(ops[0]));
  VReg t = valloc(rt);
  emitLanePopcount(x, t, in.opcode() == Opcode::Clz);
  if (in.opcode() == Opcode::Clz) {
    VReg w = vconst(rt, static_cast<uint32_t>(bits));
    e_.op("vsub.s32 {}, {}, {}", V(x), V(w), V(x));
    vfree(w);
  }
  vfree(t);
  return x;
}

// compare, every direction and comparison type.
std::optional<VReg> Lowerer::laneCompare(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  ElementType ot = ops.empty() ? rt : ops[0].t;
  bool f = typeInfo(ot).isFloat;
  bool u = typeInfo(ot).isUnsigned;
  static const char* kDir[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const char* dir = kDir[static_cast<int>(in.attrs().comparisonDirection)];
  int m = malloc_();
  if (f && in.attrs().comparisonType == hlo::ComparisonType::TotalOrder) {
    // Total order: compare the bits as signed integers, negative floats
    // with their magnitude bits flipped (-NaN < -inf < -0 < +0 < +NaN).
    VReg k[2];
    for (int i = 0; i < 2; ++i) {
      k[i] = binop("vsra", ops[static_cast<size_t>(i)], "31", ElementType::S32);
      e_.op("vand {}, {}, 2147483647", V(k[i]), V(k[i]));
      e_.op("vxor {}, {}, {}", V(k[i]), V(k[i]), V(ops[static_cast<size_t>(i)]));
    }
    e_.op("vcmp.{}.s32 {}, {}, {}", dir, M(m), V(k[0]), V(k[1]));
    vfree(k[0]);
    vfree(k[1]);
  } else if (f) {
    e_.op("vcmp.{}.f32 {}, {}, {}", dir, M(m), V(ops[0]), V(ops[1]));
  } else if (u && typeInfo(ot).bits == 32) {
    VReg a = flipSignBit(ops[0]), b = flipSignBit(ops[1]);
    e_.op("vcmp.{}.s32 {}, {}, {}", dir, M(m), V(a), V(b));
    vfree(a);
    vfree(b);
  } else {
    e_.op("vcmp.{}.s32 {}, {}, {}", dir, M(m), V(ops[0]), V(ops[1]));
  }
  return toMask01(m);
}

// Library math composed from chip instructions on f32 lanes.
std::optional<VReg> Lowerer::laneErf(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandErfF32(ops[0], rt));
}

std::optional<VReg> Lowerer::laneAsinAcos(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandAsinAcosF32(ops[0], in.opcode() == Opcode::Acos, rt));
}

std::optional<VReg> Lowerer::laneAtan(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandAtanF32(ops[0], rt));
}

std::optional<VReg> Lowerer::laneInverseHyperbolic(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandInverseHyperbolicF32(in.opcode(), ops[0], rt));
}

std::optional<VReg> Lowerer::laneAtan2(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandAtan2F32(ops[0], ops[1], rt));
}

std::optional<VReg> Lowerer::laneTan(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg s = unop("vsin", ops[0], rt), c = unop("vcos", ops[0], rt);
  VReg d = binop("vdiv.f32", s, V(c), rt);
  vfree(s);
  vfree(c);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneExpm1(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  // Kahan's form: with u = e^x rounded, (u - 1) * x / ln(u) cancels the
  // rounding error of u, so tiny and small |x| keep their relative
  // precision (e^x - 1 alone loses it all near 0). u == 1 gives x
  // itself (and -0 stays -0), u == 0 gives -1, u == inf gives inf.
  VReg u = unop("vexp", ops[0], rt);
  VReg um1 = binop("vsub.f32", u, "1.0", rt);
  VReg l = unop("vlog", u, rt);
  VReg q = binop("vdiv.f32", ops[0], V(l), rt);
  VReg d = binop("vmul.f32", um1, V(q), rt);
  int m = malloc_();
  e_.op("vcmp.eq.f32 {}, {}, 1.0", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(ops[0]), V(d));
  e_.op("vcmp.ne.f32 {}, {}, -1.0", M(m), V(um1));
  e_.op("vsel.f32 {}, {}, {}, -1.0", V(d), M(m), V(d));
  e_.op("vcmp.eq.f32 {}, {}, 0x7f800000", M(m), V(u));
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(u), V(d));
  masks_.put(m);
  for (VReg x : {u, um1, l, q}) vfree(x);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneLog1p(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  return normalize(expandLog1pF32(ops[0], rt));
}

std::optional<VReg> Lowerer::laneSinhCosh(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg a = unop("vexp", ops[0], rt);
  VReg n = unop("vneg.f32", ops[0], rt);
  VReg b = unop("vexp", n, rt);
  VReg d = binop(in.opcode() == Opcode::Sinh ? "vsub.f32" : "vadd.f32", a, V(b), rt);
  e_.op("vmul.f32 {}, {}, 0.5", V(d), V(d));
  vfree(a);
  vfree(n);
  vfree(b);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneCbrt(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg a = unop("vabs.f32", ops[0], rt);
  VReg p = binop("vpow", a, "0.3333333432674408", rt);
  int m = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, 0", M(m), V(ops[0]));
  VReg n = unop("vneg.f32", p, rt);
  VReg d = valloc(rt);
  e_.op("vsel.f32 {}, {}, {}, {}", V(d), M(m), V(n), V(p));
  masks_.put(m);
  vfree(a);
  vfree(p);
  vfree(n);
  return normalize(d);
}

std::optional<VReg> Lowerer::laneIsFinite(const Instruction&, const std::vector<VReg>& ops) {
  VReg a = unop("vabs.f32", ops[0], ElementType::F32);
  int m = malloc_();
  e_.op("vcmp.lt.f32 {}, {}, 0x7f800000", M(m), V(a));
  vfree(a);
  return toMask01(m);
}

std::optional<VReg> Lowerer::laneRoundAfz(const Instruction& in, const std::vector<VReg>& ops) {
  ElementType rt = in.shape().elementType();
  VReg a = unop("vabs.f32", ops[0], rt);
  VReg fl = unop("vfloor.f32", a, rt);
  VReg fr = binop("vsub.f32", a, V(fl), rt);
  int m = malloc_();
  e_.op("vcmp.ge.f32 {}, {}, 0.5", M(m), V(fr));
  VReg up = binop("vadd.f32", fl, "1.0", rt);
  VReg r = valloc(rt);
  e_.op("vsel.f32 {}, {}, {}, {}", V(r), M(m), V(up), V(fl));
  // Restore the sign bit of the input.
  VReg sgn = binop("vand", ops[0], "-2147483648", rt);
  VReg d = binop("vor", r, V(sgn), rt);
  masks_.put(m);
  for (VReg x : {a, fl, fr, up, r, sgn}) vfree(x);
  return d;
}



// ============================================================== instruction lowerings


bool Lowerer::lowerBroadcast(const Instruction& in) {
  beginKernel(in, "broadcast");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  int es = typeInfo(in.shape().elementType()).bytes;
  int64_t n = *in.shape().elementCount();
  bool ok = true;
  if (*o->shape().elementCount() == 1) {
    ok = fill(dst, 0, n, in.shape().elementType(), src, 0);
  } else {
    std::vector<int64_t> src0(in.shape().rank(), 0);
    std::vector<int64_t> os = byteStrides(o->shape().dimensions(), es);
    const auto& dims = in.attrs().dimensions;
    for (size_t i = 0; i < dims.size(); ++i) src0[static_cast<size_t>(dims[i])] = os[i];
    emitCopy(dst, 0, src, 0, in.shape().dimensions(), byteStrides(in.shape().dimensions(), es), src0, es);
  }
  endKernel(0, bufs_[dst].bytes + bufs_[src].bytes, 0);
  return ok && !failed_;
}

bool Lowerer::lowerTranspose(const Instruction& in) {
  beginKernel(in, "transpose");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  int es = typeInfo(in.shape().elementType()).bytes;
  std::vector<int64_t> os = byteStrides(o->shape().dimensions(), es), ss;
  for (int64_t p : in.attrs().dimensions) ss.push_back(os[static_cast<size_t>(p)]);
  emitCopy(dst, 0, src, 0, in.shape().dimensions(), byteStrides(in.shape().dimensions(), es), ss, es);
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

bool Lowerer::lowerSlice(const Instruction& in) {
  beginKernel(in, "slice");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  int es = typeInfo(in.shape().elementType()).bytes;
  std::vector<int64_t> os = byteStrides(o->shape().dimensions(), es), ss;
  int64_t off = 0;
  const auto& sl = in.attrs().slice;
  for (size_t i = 0; i < sl.size(); ++i) {
    off += sl[i].start * os[i];
    ss.push_back(os[i] * sl[i].stride);
  }
  emitCopy(dst, 0, src, off, in.shape().dimensions(), byteStrides(in.shape().dimensions(), es), ss, es);
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

bool Lowerer::lowerConcatenate(const Instruction& in) {
  beginKernel(in, "concatenate");
  int dst = leaves_[&in][0];
  int es = typeInfo(in.shape().elementType()).bytes;
  std::vector<int64_t> ds = byteStrides(in.shape().dimensions(), es);
  size_t d = static_cast<size_t>(in.attrs().dimensions.at(0));
  int64_t at = 0;
  for (const Instruction* o : in.operands()) {
    emitCopy(dst, at * ds[d], leaves_[o][0], 0, o->shape().dimensions(), ds,
             byteStrides(o->shape().dimensions(), es), es);
    at += o->shape().dimension(static_cast<int64_t>(d));
  }
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

bool Lowerer::lowerPad(const Instruction& in) {
  beginKernel(in, "pad");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  ElementType t = in.shape().elementType();
  int es = typeInfo(t).bytes;
  if (!fill(dst, 0, *in.shape().elementCount(), t, leaves_[in.operand(1)][0], 0)) return false;
  std::vector<int64_t> os = byteStrides(o->shape().dimensions(), es), ds = byteStrides(in.shape().dimensions(), es);
  std::vector<int64_t> counts, dstS, srcS;
  int64_t srcOff = 0, dstOff = 0;
  const auto& pad = in.attrs().padding;
  for (size_t i = 0; i < pad.size(); ++i) {
    int64_t step = pad[i].interior + 1, size = o->shape().dimension(static_cast<int64_t>(i));
    int64_t out = in.shape().dimension(static_cast<int64_t>(i));
    int64_t j0 = pad[i].low >= 0 ? 0 : (-pad[i].low + step - 1) / step;
    int64_t j1 = size - 1;
    while (j1 >= j0 && pad[i].low + j1 * step >= out) --j1;
    int64_t count = j1 - j0 + 1;
    if (count <= 0) {
      endKernel(0, bufs_[dst].bytes, 0);
      return !failed_;
    }
    counts.push_back(count);
    srcOff += j0 * os[i];
    dstOff += (pad[i].low + j0 * step) * ds[i];
    srcS.push_back(os[i]);
    dstS.push_back(ds[i] * step);
  }
  emitCopy(dst, dstOff, src, srcOff, counts, dstS, srcS, es);
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

bool Lowerer::lowerReverse(const Instruction& in) {
  beginKernel(in, "reverse");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  int es = typeInfo(in.shape().elementType()).bytes;
  std::vector<int64_t> ss = byteStrides(o->shape().dimensions(), es);
  int64_t off = 0;
  for (int64_t d : in.attrs().dimensions) {
    auto i = static_cast<size_t>(d);
    off += (o->shape().dimension(d) - 1) * ss[i];
    ss[i] = -ss[i];
  }
  emitCopy(dst, 0, src, off, in.shape().dimensions(), byteStrides(in.shape().dimensions(), es), ss, es);
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

bool Lowerer::lowerIota(const Instruction& in) {
  beginKernel(in, "iota");
  int dst = leaves_[&in][0];
  ElementType t = in.shape().elementType();
  int es = typeInfo(t).bytes;
  int64_t d = in.attrs().iotaDimension;
  int64_t len = in.shape().dimension(d);
  int line = in.shape().rank() == 1 ? dst : tempBuf(t, {len});
  bool ok = emitElementwise(len, {EwInput{EwInput::Index, -1, 0, ElementType::S32}}, {EwOutput{line, 0, t}},
                            [&](const std::vector<VReg>& v) {
                              if (isPairType(t)) return std::vector<VReg>{pairFrom32(v[0], t)};
                              if (typeInfo(t).isComplex) return std::vector<VReg>{complexFromReal(v[0], t)};
                              VReg r = valloc(t);
                              if (typeInfo(t).isFloat) e_.op("vcvt.f32.s32 {}, {}", V(r), V(v[0]));
                              else e_.op("vmov.s32 {}, {}", V(r), V(v[0]));
                              return std::vector<VReg>{normalize(r)};
                            });
  if (ok && line != dst) {
    std::vector<int64_t> ss(in.shape().rank(), 0);
    ss[static_cast<size_t>(d)] = es;
    emitCopy(dst, 0, line, 0, in.shape().dimensions(), byteStrides(in.shape().dimensions(), es), ss, es);
  }
  endKernel(0, bufs_[dst].bytes, 0);
  return ok && !failed_;
}

int Lowerer::permutedCopy(int buf, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  ElementType t = bufs_[buf].type;
  int es = typeInfo(t).bytes;
  std::vector<int64_t> outDims, srcStrides, strides = byteStrides(dims, es);
  for (int64_t p : perm) {
    outDims.push_back(dims[static_cast<size_t>(p)]);
    srcStrides.push_back(strides[static_cast<size_t>(p)]);
  }
  int tb = tempBuf(t, outDims);
  emitCopy(tb, 0, buf, 0, outDims, byteStrides(outDims, es), srcStrides, es);
  return tb;
}



bool Lowerer::lowerDynamicSlice(const Instruction& in, bool update) {
  beginKernel(in, update ? "dynamic-update-slice" : "dynamic-slice");
  const Instruction* o = in.operand(0);
  int src = leaves_[o][0], dst = leaves_[&in][0];
  ElementType t = in.shape().elementType();
  int es = typeInfo(t).bytes;
  const Shape& os = o->shape();
  std::vector<int64_t> sizes = update ? in.operand(1)->shape().dimensions() : in.shape().dimensions();
  std::vector<int64_t> st = byteStrides(os.dimensions(), es);
  int first = update ? 2 : 1;
  if (update) emitCopy(dst, 0, src, 0, {static_cast<int64_t>(bufs_[dst].bytes)}, {1}, {1}, 1);
  int rOff = sreg();
  e_.op("smov {}, 0", S(rOff));
  for (int64_t i = 0; i < os.rank(); ++i) {
    const Instruction* ix = in.operand(first + i);
    int sx = loadScalar(leaves_[ix][0], 0, ix->shape().elementType(), static_cast<int>(i));
    e_.op("smax {}, {}, 0", S(sx), S(sx));
    e_.op("smin {}, {}, {}", S(sx), S(sx), os.dimension(i) - sizes[static_cast<size_t>(i)]);
    e_.op("smul {}, {}, {}", S(sx), S(sx), st[static_cast<size_t>(i)]);
    e_.op("sadd {}, {}, {}", S(rOff), S(rOff), S(sx));
    sregs_.put(sx);
  }
  if (update) {
    int upd = leaves_[in.operand(1)][0];
    emitCopy(dst, 0, upd, 0, sizes, st, byteStrides(sizes, es), es, -1, rOff);
  } else {
    emitCopy(dst, 0, src, 0, sizes, byteStrides(sizes, es), st, es, rOff, -1);
  }
  endKernel(0, 2 * bufs_[dst].bytes, 0);
  return !failed_;
}

// ============================================================== emission walk

bool Lowerer::emitComputation(const Computation& c) {
  for (const Instruction* in : loweringOrder(c))
    if (!emitInstruction(*in)) return false;
  return true;
}

bool Lowerer::emitInstruction(const Instruction& in) {
  scratchTop_ = 0;
  auto copyLeaves = [&](const std::vector<int>& dst, const std::vector<int>& src) {
    for (size_t i = 0; i < dst.size() && i < src.size(); ++i)
      if (dst[i] != src[i] && bufs_[dst[i]].bytes > 0)
        emitCopy(dst[i], 0, src[i], 0, {static_cast<int64_t>(bufs_[dst[i]].bytes)}, {1}, {1}, 1);
  };
  if (hlo::computesNothing(in.opcode())) return true;  // buffers were renamed or defined in planning
  switch (in.opcode()) {
    case Opcode::BitcastConvert:
      if (!bitcastRepacksNibbles(in)) return true;  // an alias (planned)
      break;
    case Opcode::Call: return emitComputation(*in.toApply());
    case Opcode::While: {
      beginKernel(in, "while");
      ControlRegion region(controlDepth_);
      copyLeaves(leaves_[&in], leaves_[in.operand(0)]);
      std::string top = fmt::format("{}_cond", kernelLabel_), exit = fmt::format("{}_exit", kernelLabel_);
      std::string body = kernelLabel_;
      e_.label(top);
      const Computation& cond = *in.whileCondition();
      if (!emitComputation(cond)) return false;
      sregs_.reset();
      int p = loadScalar(leaves_[cond.root()][0], 0, ElementType::Pred, 0);
      e_.op("br.eq {}, 0, {}", S(p), exit);
      const Computation& b = *in.whileBody();
      if (!emitComputation(b)) return false;
      sregs_.reset();
      e_.comment(fmt::format("while %{}: next state", in.name()));
      const std::vector<int>& state = leaves_[&in];
      std::vector<int> src = leaves_[b.root()];
      std::set<int> stateSet(state.begin(), state.end());
      scratchTop_ = 0;
      for (size_t i = 0; i < src.size(); ++i)
        if (src[i] != state[i] && stateSet.count(src[i])) {
          int tb = tempBuf(bufs_[src[i]].type, bufs_[src[i]].dims);
          copyLeaves({tb}, {src[i]});
          src[i] = tb;
        }
      copyLeaves(state, src);
      e_.op("jmp {}", top);
      e_.label(exit);
      endKernel(0, 0, 0);
      return !failed_;
    }
    case Opcode::Conditional: {
      beginKernel(in, "conditional");
      ControlRegion region(controlDepth_);
      const Instruction* sel = in.operand(0);
      int idx = loadScalar(leaves_[sel][0], 0, sel->shape().elementType(), 0);
      size_t nb = in.calledComputations().size();
      std::string end = fmt::format("{}_end", kernelLabel_);
      std::vector<std::string> labels;
      for (size_t i = 0; i < nb; ++i) labels.push_back(fmt::format("{}_b{}", kernelLabel_, i));
      if (sel->shape().elementType() == ElementType::Pred) {
        e_.op("br.ne {}, 0, {}", S(idx), labels[0]);
        e_.op("jmp {}", labels[1]);
      } else {
        for (size_t i = 0; i + 1 < nb; ++i) e_.op("br.eq {}, {}, {}", S(idx), i, labels[i]);
        e_.op("jmp {}", labels[nb - 1]);
      }
      std::string label = kernelLabel_;
      for (size_t i = 0; i < nb; ++i) {
        e_.label(labels[i]);
        const Computation& br = *in.calledComputations()[i];
        if (!emitComputation(br)) return false;
        sregs_.reset();
        scratchTop_ = 0;
        copyLeaves(leaves_[&in], leaves_[br.root()]);
        e_.op("jmp {}", end);
      }
      e_.label(end);
      (void)label;
      return !failed_;
    }
    case Opcode::Real:
      if (!typeInfo(in.operand(0)->shape().elementType()).isComplex) return true;  // an alias (planned)
      break;
    default: break;
  }
  // Every other instruction: the kernel kind planning decided.
  return emitKernel(in);
}

// ============================================================== driver

namespace {
std::string dimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += fmt::format("{}{}", i ? "," : "", d[i]);
  return s + "]";
}

std::string literalText(const hlo::Literal& lit, ElementType t) {
  std::string s = "[";
  int words = typeInfo(t).words;
  for (int64_t i = 0; i < lit.elementCount(); ++i) {
    if (i) s += ", ";
    if (words > 1) {  // the u32 words of the element, as memory holds them
      for (int w = 0; w < words; ++w) {
        uint32_t x;
        std::memcpy(&x, lit.rawElement(i) + 4 * w, 4);
        s += fmt::format("{}{}", w ? ", " : "", x);
      }
      continue;
    }
    if (t == ElementType::F32) s += fmt::format("0x{:08x}", static_cast<uint32_t>(lit.getBits(i)));
    else if (t == ElementType::BF16 || t == ElementType::F16)
      s += fmt::format("0x{:04x}", static_cast<uint32_t>(lit.getBits(i)));
    else if (isNarrowFloat(t)) s += fmt::format("{}", static_cast<uint32_t>(lit.getBits(i)));  // the code
    else if (t == ElementType::Pred) s += lit.getInt(i) ? "1" : "0";
    else if (typeInfo(t).isUnsigned) s += fmt::format("{}", lit.getUint(i));
    else s += fmt::format("{}", lit.getInt(i));
  }
  return s + "]";
}
}  // namespace

// Leaf position of `index` within `s` (leaves of tuples flattened in order).
static std::optional<size_t> leafPosition(const Shape& s, const hlo::ShapeIndex& index) {
  size_t pos = 0;
  const Shape* cur = &s;
  for (int64_t i : index) {
    if (!cur->isTuple() || i < 0 || i >= static_cast<int64_t>(cur->tupleElements().size())) return std::nullopt;
    pos += leafRange(*cur, i).first;
    cur = &cur->tupleElement(i);
  }
  if (!cur->isArray()) return std::nullopt;
  return pos;
}

std::map<size_t, int> Lowerer::donatedArgumentsByResult(const Computation& entry) {
  // Result leaf -> argument buffer, from input_output_alias (XLA's donation
  // of a parameter to an output). Entries naming a non-array leaf, or a leaf
  // of another shape, are ignored: aliasing is an optimisation.
  std::map<size_t, int> out;
  std::set<int> taken;
  for (const hlo::InputOutputAlias& a : module_.config().inputOutputAlias) {
    const Instruction* param = entry.parameter(a.parameterNumber);
    if (!param) continue;
    auto res = leafPosition(entry.root()->shape(), a.outputIndex);
    auto arg = leafPosition(param->shape(), a.parameterIndex);
    if (!res || !arg || *arg >= leaves_[param].size() || *res >= leaves_[entry.root()].size()) continue;
    int argBuf = leaves_[param][*arg];
    int resBuf = leaves_[entry.root()][*res];
    if (bufs_[argBuf].bytes != bufs_[resBuf].bytes || bufs_[argBuf].type != bufs_[resBuf].type) continue;
    if (!taken.insert(argBuf).second || out.count(*res)) continue;
    out[*res] = argBuf;
  }
  return out;
}

namespace {

std::string gib(uint64_t bytes) {
  double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.2f} KiB", b / (1ull << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace

bool Lowerer::checkHbmCapacity(uint64_t temporaries) {
  // What the chip holds at the peak: every argument, result, constant and
  // kernel scratch buffer for the whole run, plus the temporaries' heap at
  // its fullest (XLA's "ran out of memory in memory space hbm").
  uint64_t args = 0, results = 0, constants = 0, scratch = 0;
  for (const Buf& b : bufs_) {
    if (b.kind == BufKind::Arg) args += b.bytes;
    if (b.kind == BufKind::Result) results += b.bytes;
    if (b.kind == BufKind::Const) constants += b.bytes;
    if (b.kind == BufKind::Scratch) scratch += b.bytes;
  }
  const uint64_t needs = args + results + constants + scratch + temporaries;
  const uint64_t has = target_.memory.hbmBytes;
  if (needs <= has) return true;
  // The instruction each buffer holds: the one earliest in the source (ties:
  // by name), so the listing does not depend on pointer order.
  std::vector<const Instruction*> owner(bufs_.size(), nullptr);
  for (const auto& [in, leaves] : leaves_)
    for (int b : leaves) {
      if (b < 0 || static_cast<size_t>(b) >= owner.size()) continue;
      const Instruction*& o = owner[static_cast<size_t>(b)];
      if (!o || std::make_pair(in->location().offset, in->name()) < std::make_pair(o->location().offset, o->name()))
        o = in;
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (bufs_[i].kind != BufKind::Vmem && bufs_[i].bytes > 0 && !bufs_[i].aliasOfArg) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bufs_[a].bytes > bufs_[b].bytes; });
  if (order.size() > 5) order.resize(5);
  auto kindName = [](BufKind k) {
    switch (k) {
      case BufKind::Arg: return "argument";
      case BufKind::Result: return "result";
      case BufKind::Const: return "constant";
      case BufKind::Scratch: return "kernel scratch";
      default: return "temporary";
    }
  };
  std::string msg = fmt::format(
      "llo-gen: ran out of memory in HBM: needs {} of {} ({} of {} bytes) on target '{}': arguments {}, results {}, "
      "constants {}, temporaries {} at their peak{}",
      gib(needs), gib(has), needs, has, target_.name, gib(args), gib(results), gib(constants), gib(temporaries),
      scratch ? fmt::format(", kernel scratch {}", gib(scratch)) : std::string());
  msg += "\nlargest buffers:";
  for (size_t n = 0; n < order.size(); ++n) {
    const Buf& b = bufs_[order[n]];
    const Instruction* in = owner[order[n]];
    std::string shape = fmt::format("{}[{}]", hlo::elementTypeName(b.type), fmt::join(b.dims, ","));
    msg += fmt::format("\n  {}. {} {} {}", n + 1, gib(b.bytes), shape, kindName(b.kind));
    if (in) msg += fmt::format(" %{}", in->name());
    else if (!b.name.empty()) msg += fmt::format(" '{}'", b.name);
  }
  const Instruction* at = order.empty() ? nullptr : owner[order.front()];
  if (!at && module_.entry()) at = module_.entry()->root();
  if (at) return fail(*at, msg);
  diags_.error(msg);
  failed_ = true;
  return false;
}

// Buffers of the entry computation's parameters (arguments of the program).
bool Lowerer::bindEntryParameters(const Computation& entry) {
  for (int64_t p = 0; p < entry.parameterCount(); ++p) {
    const Instruction* param = entry.parameter(p);
    if (!param) continue;
    if (!checkTypes(*param)) return false;
    std::vector<int>& l = leaves_[param];
    auto shapes = arrayLeaves(param->shape());
    for (size_t i = 0; i < shapes.size(); ++i) {
      int b = newBuf(BufKind::Arg, *shapes[i]);
      bufs_[b].name = shapes.size() == 1 ? fmt::format("p{}_{}", p, sanitize(param->name()))
                                         : fmt::format("p{}_{}_{}", p, i, sanitize(param->name()));
      l.push_back(b);
      args_.push_back(b);
    }
  }
  return true;
}

// The result buffers of the entry's root leaves: a result computed in place
// where it can be (a heap buffer, or a donated argument that is dead
// before it), else copied there at the end (resultCopies_).
void Lowerer::placeResults(const Computation& entry) {
  std::set<int> seen;
  const auto& rootLeaves = leaves_[entry.root()];
  std::map<size_t, int> donated = donatedArgumentsByResult(entry);
  for (size_t i = 0; i < rootLeaves.size(); ++i) {
    int b = rootLeaves[i];
    if (auto d = donated.find(i); d != donated.end()) {
      // The result lives in the donated argument's buffer: computed there
      // directly when the argument is dead before the result is defined,
      // otherwise copied there at the end (after every read of it).
      int arg = d->second;
      stats_.aliasedBytes += bufs_[arg].bytes;
      if (b != arg) {
        if (bufs_[b].kind == BufKind::Heap && !seen.count(b) && bufs_[arg].end < bufs_[b].def) {
          bufs_[b].kind = BufKind::Arg;
          bufs_[b].name = bufs_[arg].name;
          bufs_[b].aliasOfArg = true;
        } else {
          resultCopies_.push_back({arg, b});
        }
      }
      results_.push_back(arg);
      seen.insert(rootLeaves[i]);
      continue;
    }
    if (bufs_[b].kind == BufKind::Heap && !seen.count(b)) {
      bufs_[b].kind = BufKind::Result;
      bufs_[b].name = fmt::format("out{}", i);
      results_.push_back(b);
    } else {
      Buf nb = bufs_[b];
      nb.kind = BufKind::Result;
      nb.name = fmt::format("out{}", i);
      nb.constant = nullptr;
      bufs_.push_back(nb);
      int id = static_cast<int>(bufs_.size() - 1);
      results_.push_back(id);
      resultCopies_.push_back({id, b});
    }
    seen.insert(b);
  }
}

// Offsets of the heap buffers from their live ranges; the heap's size.
uint64_t Lowerer::placeHeap() {
  // Liveness-based heap.
  std::vector<int> heapIds;
  std::vector<LiveRange> ranges;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (bufs_[i].kind == BufKind::Heap) {
      heapIds.push_back(static_cast<int>(i));
      ranges.push_back({bufs_[i].def, bufs_[i].end, bufs_[i].bytes});
      stats_.unsharedBytes += alignUp(std::max<uint64_t>(bufs_[i].bytes, 1), 512);
    }
  HeapAssignment ha = assignHeap(ranges);
  for (size_t i = 0; i < heapIds.size(); ++i) bufs_[heapIds[i]].offset = ha.offsets[i];
  uint64_t heapBytes = ha.heapBytes;
  heapBytes_ = heapBytes;
  return heapBytes;
}

void Lowerer::emitResultCopies() {
  if (resultCopies_.empty()) return;
  e_.blank();
  e_.comment("results that are parameters, constants or repeated leaves");
  sregs_.reset();
  // Copies out of arguments first: a later copy may overwrite a donated one.
  std::stable_partition(resultCopies_.begin(), resultCopies_.end(),
                        [&](const std::pair<int, int>& c) { return bufs_[c.second].kind == BufKind::Arg; });
  for (auto [dst, src] : resultCopies_)
    if (bufs_[dst].bytes)
      emitCopy(dst, 0, src, 0, {static_cast<int64_t>(bufs_[dst].bytes)}, {1}, {1}, 1);
}

// The program's HBM figures (stats_), checked against the target's HBM,
// the scalar unit's reach and the buffers a .tpu program can name.
bool Lowerer::checkTotals(uint64_t total) {
  for (const Buf& b : bufs_) {
    if (b.kind == BufKind::Arg) stats_.argumentBytes += b.bytes;
    if (b.kind == BufKind::Result) stats_.resultBytes += b.bytes;
    if (b.kind == BufKind::Const) stats_.constantBytes += b.bytes;
    if (b.kind == BufKind::Scratch) stats_.peakHbmBytes += b.bytes;
  }
  stats_.heapBytes = total;
  stats_.peakHbmBytes += total + stats_.argumentBytes + stats_.resultBytes + stats_.constantBytes;
  if (!checkHbmCapacity(total)) return false;
  if (total >= options_.heapReachBytes) {
    diags_.error(
        fmt::format("llo-gen: {} bytes of temporaries exceed the {} bytes the scalar unit can address", total,
                    options_.heapReachBytes));
    return false;
  }
  // The .tpu format names a buffer in 12 bits of an instruction word (and
  // the assembler stops at 4096): report the HLO instruction that needs the
  // buffer past the limit, not a line of the generated text, which the user
  // never sees.
  {
    size_t count = 1;  // the heap
    for (const Buf& b : bufs_) {
      if (b.kind == BufKind::Heap || b.kind == BufKind::Vmem || b.aliasOfArg) continue;
      if (++count <= kMaxHbmBuffers) continue;
      std::string msg = fmt::format(
          "llo-gen: the program needs more than {} HBM buffers (arguments, results and constants), the most a .tpu "
          "program can name",
          kMaxHbmBuffers);
      if (b.constant) fail(*b.constant, msg);
      else if (module_.entry() && module_.entry()->root()) fail(*module_.entry()->root(), msg);
      else diags_.error(msg);
      return false;
    }
  }
  return true;
}

// The .buffer lines of the arguments, results and constants (elided
// constants as the seed of their fill, not their values).
std::string Lowerer::bufferDeclarations() const {
  std::string t;
  for (const Buf& b : bufs_) {
    if (b.kind == BufKind::Heap || b.kind == BufKind::Vmem || b.aliasOfArg) continue;
    TypeInfo ti = typeInfo(b.type);
    std::vector<int64_t> dims = b.dims;  // rank 0 stays rank 0: a .tpu takes what the HLO takes
    if (ti.words > 1) dims.push_back(ti.words);  // wide elements as u32 words (the ISA's buffer types are 32-bit at most)
    std::string d = dimsText(dims);
    t += fmt::format(".buffer {} : hbm {}{}", b.name, ti.words > 1 ? std::string_view("u32") : ti.dtype, d);
    if (b.kind == BufKind::Const && b.bytes > 0 && !b.tableWords.empty()) {
      std::string words;
      for (uint32_t w : b.tableWords) words += fmt::format("{}{}", words.empty() ? "" : ", ", w);
      t += " = [" + words + "]";
    } else if (b.kind == BufKind::Const && b.bytes > 0) {
      const hlo::Literal* lit = b.constant->attrs().literal ? &*b.constant->attrs().literal : nullptr;
      hlo::Literal filled;
      // Every element type the stream draws, in the buffer's own type (wide
      // ones name theirs: they live in u32 words).
      bool compactFill = b.constant->shape().isArray() && b.type == b.constant->shape().elementType() &&
                         elidedFillElementBytes(ti.dtype) == hlo::elementTypeInfo(b.type).byteSize;
      if ((!lit || lit->isElided()) && compactFill) {
        // The seed, not the values: the assembler draws them as the
        // interpreter does (an 80 MB .llo for graphsage's tables otherwise).
        uint64_t seed = elidedFillSeed(b.constant->name(), b.constant->shape().toString(false));
        t += fmt::format(" = fill(0x{:08x}, 0x{:08x}", seed >> 32, seed & 0xffffffffu);
        t += ti.words > 1 ? fmt::format(", {})\n", ti.dtype) : std::string(")\n");
        continue;
      }
      if (!lit || lit->isElided()) {
        filled = eval::fillElidedConstant(*b.constant);
        lit = &filled;
      }
      t += " = " + literalText(*lit, b.type);
    }
    t += "\n";
  }
  return t;
}

std::optional<CodegenResult> Lowerer::run() {
  const Computation* entry = module_.entry();
  if (!entry) {
    diags_.error("llo-gen: the module has no entry computation");
    return std::nullopt;
  }
  if (!bindEntryParameters(*entry)) return std::nullopt;
  if (!plan(*entry, -1)) return std::nullopt;
  ++pos_;
  useLeaves(entry->root(), -1);
  placeResults(*entry);
  uint64_t heapBytes = placeHeap();
  // Refused before emission when the buffers known so far do not fit.
  if (!checkHbmCapacity(heapBytes)) return std::nullopt;
  // Emission (scratch temporaries go above the heap).
  e_.comment(fmt::format("entry computation %{}", entry->name()));
  if (!emitComputation(*entry)) return std::nullopt;
  emitResultCopies();
  if (failed_) return std::nullopt;
  uint64_t total = heapBytes + scratchBytes_;
  if (!checkTotals(total)) return std::nullopt;
  // Assemble the text.
  std::string t;
  t += fmt::format("// Generated by llo-gen from HLO module '{}'.\n", module_.name());
  t += fmt::format("// HBM: arguments {} B, results {} B, constants {} B, temporaries {} B (without reuse {} B).\n",
                   stats_.argumentBytes, stats_.resultBytes, stats_.constantBytes, total, stats_.unsharedBytes);
  if (stats_.aliasedBytes)
    t += fmt::format("// Results in donated arguments (input_output_alias): {} B.\n", stats_.aliasedBytes);
  if (!options_.targetSpec.empty()) {
    const std::vector<std::string> builtins = target::builtinTargetNames();
    bool builtin = std::find(builtins.begin(), builtins.end(), options_.targetSpec) != builtins.end();
    t += builtin ? fmt::format(".target {}\n\n", options_.targetSpec)
                 : fmt::format(".target \"{}\"\n\n", options_.targetSpec);
  }
  t += bufferDeclarations();
  t += fmt::format(".buffer heap : hbm u8[{}]\n\n", std::max<uint64_t>(total, 512));
  t += e_.descriptorText();
  t += "\n";
  std::string argList, resList;
  for (int a : args_) argList += (argList.empty() ? "" : ", ") + bufs_[a].name;
  for (int r : results_) resList += (resList.empty() ? "" : ", ") + bufs_[r].name;
  t += fmt::format(".entry {}({}) -> ({})\n", options_.entryName, argList, resList);
  e_.emit(isa::Opcode::Halt, {});
  CodegenResult res;
  if (options_.schedule == llo::ScheduleMode::None) {
    t += e_.text();
  } else {
    res.code = std::make_shared<EmittedCode>();
    if (!e_.take(*res.code)) return std::nullopt;
  }
  if (failed_) return std::nullopt;
  res.llo = std::move(t);
  res.stats = stats_;
  return res;
}

std::optional<CodegenResult> lowerModule(const hlo::Module& module, const target::TargetDesc& target,
                                         const CodegenOptions& options, DiagnosticEngine& diags, CodeSink sink) {
  Lowerer l(module, target, options, diags);
  if (sink && options.schedule != llo::ScheduleMode::None) l.setCodeSink(std::move(sink));
  return l.run();
}

}  // namespace tpu::codegen
