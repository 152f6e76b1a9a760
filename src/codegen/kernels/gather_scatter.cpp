// Lowering of gather and scatter. Both are a scalar-unit loop over the index
// vectors: a chunk of the index array is staged in SMEM (one word per
// component), each vector is read with sld, turned into HBM byte offsets in
// scalar registers, and the slice or window moves with one strided DMA whose
// addresses are those registers (a combined scatter window too big for VMEM
// or for one descriptor moves in pieces, a loop of its own). The loop is
// emitted once, so code size does not depend on the number of indices.
#include "codegen/kernels/kernel_phases.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// SMEM words used to stage index vectors (a chunk of the index array).
constexpr int64_t kIndexChunkWords = 16384;

// A strided copy in descriptor form: unit dims dropped, dims that continue
// each other merged, the innermost contiguous run as the chunk.
bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool allInRange(const std::vector<int64_t>& v, int64_t n) {
  for (int64_t x : v)
    if (x < 0 || x >= n) return false;
  return true;
}

// Scatter computations that just return the update: windows are copied.
bool isOverwrite(const Computation& c, size_t n) {
  const Instruction* root = c.root();
  if (!root || c.parameterCount() != static_cast<int64_t>(2 * n)) return false;
  auto isParam = [](const Instruction* i, size_t p) {
    return i->opcode() == Opcode::Parameter && i->attrs().parameterNumber == static_cast<int64_t>(p);
  };
  if (n == 1 && root->opcode() != Opcode::Tuple) return isParam(root, 1);
  if (root->opcode() != Opcode::Tuple || root->operandCount() != static_cast<int64_t>(n)) return false;
  for (size_t k = 0; k < n; ++k)
    if (!isParam(root->operand(static_cast<int64_t>(k)), n + k)) return false;
  return true;
}

// How each batch position (a linear count over the index array's dims other
// than index_vector_dim, row-major) maps to offsets.
struct BatchDim {
  int64_t count = 1;
  int64_t inner = 1;        // product of the counts of later batch dims
  int64_t outStride = 0;    // elements, in the result (gather) or the updates (scatter)
  int64_t operandDim = -1;  // operand batching dim fed by this coordinate
};

// The batch dimensions of the index space (every dimension of the indices
// but index_vector_dim `ivd`, sizes `full`), paired in order with the
// dimensions of `s` (strides `strides`) that are not window dimensions.
// Empty when they do not pair up; `rankMismatch` tells a rank mismatch from
// a size mismatch.
std::optional<std::vector<BatchDim>> pairBatchDims(const Shape& s, const std::vector<int64_t>& strides,
                                                   const std::vector<int64_t>& windowDims,
                                                   const std::vector<int64_t>& full, int64_t ivd,
                                                   const std::vector<int64_t>& indexBatchingDims,
                                                   const std::vector<int64_t>& operandBatchingDims,
                                                   bool& rankMismatch) {
  std::vector<int64_t> pos;
  for (int64_t d = 0; d < s.rank(); ++d)
    if (!contains(windowDims, d)) pos.push_back(d);
  std::vector<BatchDim> batch;
  size_t b = 0;
  rankMismatch = false;
  for (int64_t d = 0; d < static_cast<int64_t>(full.size()); ++d) {
    if (d == ivd) continue;
    if (b >= pos.size() || s.dimension(pos[b]) != full[static_cast<size_t>(d)]) return std::nullopt;
    BatchDim bd;
    bd.count = full[static_cast<size_t>(d)];
    bd.outStride = strides[static_cast<size_t>(pos[b++])];
    for (size_t i = 0; i < indexBatchingDims.size(); ++i)
      if (indexBatchingDims[i] == d) bd.operandDim = operandBatchingDims[i];
    batch.push_back(bd);
  }
  if (b != pos.size()) {
    rankMismatch = true;
    return std::nullopt;
  }
  for (size_t i = batch.size(); i-- > 0;)
    batch[i].inner = i + 1 < batch.size() ? batch[i + 1].inner * batch[i + 1].count : 1;
  return batch;
}

}  // namespace

bool Lowerer::emitIndexLoop(const Instruction& in, const Instruction& indices, int64_t ivd,
                            const IndexBody& body) {
  PoolGuard guard({&sregs_, &vregs_, &masks_});
  ElementType it = indices.shape().elementType();
  TypeInfo ti = typeInfo(it);
  if (!ti.ok || ti.isFloat || it == ElementType::Pred)
    return fail(in, fmt::format("llo-gen: {} indices of '{}' are not supported (integer ones are)",
                                hlo::elementTypeName(it), in.name()));
  std::vector<int64_t> full = indices.shape().dimensions();
  if (ivd < 0 || ivd > static_cast<int64_t>(full.size()))
    return fail(in, "llo-gen: index_vector_dim out of range");
  if (ivd == static_cast<int64_t>(full.size())) full.push_back(1);
  const int es = ti.bytes;
  const int64_t vecLen = full[static_cast<size_t>(ivd)];
  std::vector<int64_t> st = byteStrides(full, es), bdims, bstr;
  for (size_t d = 0; d < full.size(); ++d)
    if (static_cast<int64_t>(d) != ivd) {
      bdims.push_back(full[d]);
      bstr.push_back(st[d]);
    }
  const int64_t nb = product(bdims);
  if (nb == 0) return true;
  int src = leaves_[&indices][0];
  const int64_t smemWords = static_cast<int64_t>(target_.memory.smemBytes / 4);
  const int64_t budget = std::min(kIndexChunkWords, smemWords) / (ti.bytes == 8 ? 2 : 1);
  if (vecLen > budget)
    return fail(in, "llo-gen: index vectors longer than the SMEM staging area are not supported");
  const int64_t chunk = std::min(nb, std::max<int64_t>(1, budget / std::max<int64_t>(1, vecLen)));
  const int64_t nChunks = (nb + chunk - 1) / chunk;
  const int64_t tail = nb - (nChunks - 1) * chunk;
  const size_t maxDims = static_cast<size_t>(std::max(1, target_.dma.descriptorDims));

  // SMEM holds words [vector][component]; s8/u8 indices land in the low byte
  // of each word (the rest is masked off after sld); s64/u64 take two words.
  const int slot = es == 8 ? 8 : 4;
  std::vector<int64_t> counts = bdims, srcS = bstr, dstS;
  counts.push_back(vecLen);
  srcS.push_back(st[static_cast<size_t>(ivd)]);
  dstS = byteStrides(counts, slot);
  Box whole = makeBox(counts, srcS, dstS, es);
  bool rowMajor = vecLen == 1 || ivd == static_cast<int64_t>(full.size()) - 1;
  if (!(nChunks == 1 && whole.dims.size() <= maxDims) && !rowMajor) {
    // Chunks need the vectors contiguous: transpose the indices to [nb, vecLen] first.
    int tb = tempBuf(it, {nb, vecLen});
    emitCopy(tb, 0, src, 0, counts, byteStrides(counts, es), srcS, es);
    src = tb;
    rowMajor = true;
  }
  auto stageDesc = [&](int64_t count) {
    Box b =
        nChunks == 1 && !rowMajor ? whole : makeBox({count, vecLen}, {vecLen * es, es}, {vecLen * slot, slot}, es);
    return e_.desc(b.chunk, b.dims);
  };

  int rLin = sreg(), rCnt = sreg(), rP = sreg(), rA = sreg(), rPend = sreg();
  e_.op("smov {}, 0", S(rLin));
  e_.op("smov {}, 0", S(rPend));
  std::string lChunk = e_.newLabel("ichunk"), lPos = e_.newLabel("index");
  e_.label(lChunk);
  if (nChunks == 1) {
    e_.op("smov {}, {}", S(rA), base(src));
  } else {
    e_.op("smul {}, {}, {}", S(rA), S(rLin), vecLen * es);
    e_.op("sadd {}, {}, {}", S(rA), S(rA), base(src));
  }
  auto stage = [&](int64_t count) {
    e_.op("smov {}, {}", S(rCnt), count);
    e_.op("{} {}, [0], {}, sem1", dmaOp("h2s", src), stageDesc(count), memRef(src, S(rA)));
  };
  if (tail == chunk) {
    stage(chunk);
  } else {
    std::string lTail = e_.newLabel("itail"), lStaged = e_.newLabel("istaged");
    e_.op("br.ge {}, {}, {}", S(rLin), (nChunks - 1) * chunk, lTail);
    stage(chunk);
    e_.op("jmp {}", lStaged);
    e_.label(lTail);
    stage(tail);
    e_.label(lStaged);
  }
  e_.op("sem.wait sem1");
  e_.op("smov {}, 0", S(rP));
  e_.label(lPos);
  auto component = [&](int64_t k) {
    int r = sreg();
    e_.op("sld {}, [{} + {}]", S(r), S(rP), k * slot);
    // Narrow indices: only the low bytes of the word are theirs (narrower
    // ones, like s4, are stored extended to a byte).
    if (es == 8) {
      int hi = sreg();
      e_.op("sld {}, [{} + {}]", S(hi), S(rP), k * slot + 4);
      saturateToS32(r, hi, false);  // index arrays are read as s64
      sregs_.put(hi);
    } else if (es < 4 && ti.isUnsigned) {
      e_.op("sand {}, {}, {}", S(r), S(r), (int64_t{1} << (8 * es)) - 1);
    } else if (es < 4) {
      e_.op("sshl {}, {}, {}", S(r), S(r), 32 - 8 * es);
      e_.op("ssra {}, {}, {}", S(r), S(r), 32 - 8 * es);
    }
    return r;
  };
  if (!body(rLin, rPend, component)) return false;
  e_.op("sadd {}, {}, {}", S(rP), S(rP), vecLen * slot);
  e_.op("sadd {}, {}, 1", S(rLin), S(rLin));
  e_.op("loop {}, {}", S(rCnt), lPos);
  // The batch's DMAs were issued back to back; wait for all of them at once.
  e_.op("sem.wait sem0, {}", S(rPend));
  e_.op("smov {}, 0", S(rPend));
  if (nChunks > 1) e_.op("br.lt {}, {}, {}", S(rLin), nb, lChunk);
  return !failed_;
}

// ============================================================== gather

namespace {

// Whether a gather of nb rows of sliceElems elements is faster through VMEM
// (the table in and the result out whole, the rows copied by vector loads
// and stores) than by a DMA, and so a DMA latency, per row.
bool tableBeatsRows(const target::TargetDesc& target, uint64_t tableBytes, uint64_t outBytes, int64_t nb,
                    int64_t sliceElems) {
  const double hbmPerCycle = target.memory.hbmBytesPerSecond / target.clockHz;
  const double perRowCycles =
      static_cast<double>((nb + std::max(1, target.dma.engines) - 1) / std::max(1, target.dma.engines)) *
      target.dma.latencyCycles;
  const double tableCycles =
      static_cast<double>(tableBytes + outBytes) / hbmPerCycle + 2.0 * target.dma.latencyCycles +
      static_cast<double>(nb) * static_cast<double>((sliceElems + kVregElems - 1) / kVregElems);
  return tableCycles < perRowCycles;
}

// A gather's slice, checked against its dimension numbers: per slice
// (offset) dimension its size and the operand's and result's byte strides,
// the result's batch dimensions paired with the index dims, and the row-major
// strides; the error when they disagree.
struct GatherSlice {
  std::vector<int64_t> counts, srcS, dstS, xs, rst;
  std::vector<BatchDim> batch;
};
std::optional<std::string> gatherSlice(const Instruction& in, GatherSlice& g) {
  const Instruction& indices = *in.operand(1);
  const auto& dn = *in.attrs().gatherDims;
  const auto& sizes = in.attrs().gatherSliceSizes;
  const Shape& os = in.operand(0)->shape();
  const Shape& rs = in.shape();
  const int64_t orank = os.rank();
  const int64_t irank = indices.shape().rank();
  const int64_t ivd = dn.indexVectorDim;
  if (static_cast<int64_t>(sizes.size()) != orank || ivd < 0 || ivd > irank ||
      !allInRange(dn.startIndexMap, orank) || !allInRange(dn.collapsedSliceDims, orank) ||
      !allInRange(dn.operandBatchingDims, orank) || !allInRange(dn.offsetDims, rs.rank()) ||
      !allInRange(dn.startIndicesBatchingDims, std::max<int64_t>(irank, ivd + 1)) ||
      dn.operandBatchingDims.size() != dn.startIndicesBatchingDims.size())
    return fmt::format("llo-gen: gather '{}' has inconsistent dimension numbers", in.name());
  std::vector<int64_t> full = indices.shape().dimensions();
  if (ivd == irank) full.push_back(1);
  if (full[static_cast<size_t>(ivd)] != static_cast<int64_t>(dn.startIndexMap.size()))
    return "llo-gen: gather start_index_map length differs from the index vector length";
  const int es = typeInfo(rs.elementType()).bytes;
  g.xs = rowMajorStrides(os.dimensions());
  g.rst = rowMajorStrides(rs.dimensions());
  const std::vector<int64_t>& xs = g.xs;
  const std::vector<int64_t>& rst = g.rst;
  // The slice: the operand dims that are neither collapsed nor batching.
  std::vector<int64_t>&counts = g.counts, &srcS = g.srcS, &dstS = g.dstS;
  size_t j = 0;
  for (int64_t d = 0; d < orank; ++d) {
    size_t u = static_cast<size_t>(d);
    if (sizes[u] < 0 || sizes[u] > os.dimension(d))
      return "llo-gen: gather slice size larger than the operand";
    if (contains(dn.collapsedSliceDims, d) || contains(dn.operandBatchingDims, d)) continue;
    if (j >= dn.offsetDims.size()) return "llo-gen: gather offset_dims do not match slice_sizes";
    int64_t p = dn.offsetDims[j++];
    if (rs.dimension(p) != sizes[u])
      return "llo-gen: gather offset dimension sizes differ from slice_sizes";
    counts.push_back(sizes[u]);
    srcS.push_back(xs[u] * es);
    dstS.push_back(rst[static_cast<size_t>(p)] * es);
  }
  if (j != dn.offsetDims.size()) return "llo-gen: gather offset_dims do not match slice_sizes";
  // Batch dims of the result, in order, pair with the index dims but ivd.
  bool rankMismatch = false;
  auto paired = pairBatchDims(rs, rst, dn.offsetDims, full, ivd, dn.startIndicesBatchingDims, dn.operandBatchingDims,
                              rankMismatch);
  if (!paired)
    return std::string(rankMismatch ? "llo-gen: gather result rank does not match the dimension numbers"
                                    : "llo-gen: gather batch dimension sizes differ from the indices");
  g.batch = std::move(*paired);
  return std::nullopt;
}

}  // namespace

bool Lowerer::lowerGather(const Instruction& in) {
  beginKernel(in, "gather");
  if (in.operandCount() != 2) return fail(in, "llo-gen: gather expects an operand and start indices");
  const Instruction& operand = *in.operand(0);
  const Instruction& indices = *in.operand(1);
  const auto& dn = *in.attrs().gatherDims;
  const auto& sizes = in.attrs().gatherSliceSizes;
  const Shape& os = operand.shape();
  const Shape& rs = in.shape();
  const int64_t orank = os.rank();
  const int64_t ivd = dn.indexVectorDim;
  GatherSlice g;
  if (std::optional<std::string> error = gatherSlice(in, g)) return fail(in, *error);
  const ElementType t = rs.elementType();
  const int es = typeInfo(t).bytes;
  const int src = leaves_[&operand][0], dst = leaves_[&in][0];
  const std::vector<int64_t>& xs = g.xs;
  const std::vector<int64_t>&counts = g.counts, &srcS = g.srcS, &dstS = g.dstS;
  const std::vector<BatchDim>& batch = g.batch;
  if (bufs_[dst].bytes == 0) {
    endKernel(0, 0, 0);
    return true;
  }
  // Which index component sets each operand dim (the last one wins, and
  // batching dims override, as in the interpreter).
  std::vector<int64_t> fromIndex(static_cast<size_t>(orank), -1);
  for (size_t k = 0; k < dn.startIndexMap.size(); ++k)
    fromIndex[static_cast<size_t>(dn.startIndexMap[k])] = static_cast<int64_t>(k);
  for (int64_t d : dn.operandBatchingDims) fromIndex[static_cast<size_t>(d)] = -1;
  const bool isU32 = typeInfo(indices.shape().elementType()).isUnsigned &&
                     typeInfo(indices.shape().elementType()).bytes == 4;

  Box box = makeBox(counts, srcS, dstS, es);
  const bool direct = box.dims.size() <= static_cast<size_t>(std::max(1, target_.dma.descriptorDims)) &&
                      box.chunk < (uint64_t{1} << 31);
  std::string desc = direct ? e_.desc(box.chunk, box.dims) : "";
  const int64_t nb = *rs.elementCount() / std::max<int64_t>(1, product(counts));
  // Many rows from a table that fits in VMEM: one DMA brings the table in,
  // vector loads and stores copy the rows, one DMA writes the result, instead
  // of a DMA latency per row. Needs contiguous slices stored one after the
  // other in the result, so a row's store may spill into the next row's place
  // (rewritten next) or into padding.
  const int64_t sliceElems = product(counts);
  bool rowsInOrder = box.dims.empty() && box.chunk == static_cast<uint64_t>(sliceElems * es);
  for (const BatchDim& bd : batch) rowsInOrder = rowsInOrder && bd.outStride == bd.inner * sliceElems;
  const uint64_t pad = static_cast<uint64_t>(kVregElems) * static_cast<uint64_t>(es);
  const uint64_t tableBytes = bufs_[src].bytes, outBytes = bufs_[dst].bytes;
  const uint64_t tableV = 0, outV = alignUp(tableBytes + pad, 512);
  const uint64_t vmemNeed = outV + alignUp(outBytes + pad, 512);
  // Rows move through registers as raw 32-bit words or sign-extended bytes,
  // which store back bit-exactly whatever the element type.
  const bool inVmem = (es == 4 || es == 1) && rowsInOrder && sliceElems > 0 && vmemNeed <= vmemBudget() &&
                      tableBytes < (uint64_t{1} << 30) && outBytes < (uint64_t{1} << 30) &&
                      tableBeatsRows(target_, tableBytes, outBytes, nb, sliceElems);
  if (inVmem) {
    int r = sreg();
    e_.op("smov {}, {}", S(r), base(src));
    e_.op("{} {}, [{}], {}, sem2", dmaOp("h2v", src), e_.desc(tableBytes, {}), tableV, memRef(src, S(r)));
    e_.op("sem.wait sem2");
    sregs_.put(r);
  }
  // Coordinate of batch dim `bd` of linear position rLin (rLin itself when
  // it is the only batch dim).
  auto coordinate = [&](int rLin, const BatchDim& bd, int64_t total) {
    if (bd.inner == 1 && bd.count == total) return rLin;
    int c = sreg();
    if (bd.inner > 1) e_.op("sdiv {}, {}, {}", S(c), S(rLin), bd.inner);
    if (bd.inner * bd.count < total) e_.op("srem {}, {}, {}", S(c), S(bd.inner > 1 ? c : rLin), bd.count);
    return c;
  };
  bool ok =
      emitIndexLoop(in, indices, ivd, [&](int rLin, int rPend, const std::function<int(int64_t)>& component) {
        int rS = sreg(), rD = sreg();
        e_.op("smov {}, 0", S(rS));
        e_.op("smov {}, 0", S(rD));
        for (int64_t d = 0; d < orank; ++d) {
          size_t u = static_cast<size_t>(d);
          if (fromIndex[u] < 0) continue;
          int64_t maxStart = os.dimension(d) - sizes[u];
          int x = component(fromIndex[u]);
          if (isU32) {
            // Values with the top bit set are huge unsigned starts: clamp high.
            int c = sreg();
            e_.op("scmp.ge {}, {}, 0", S(c), S(x));
            e_.op("ssel {}, {}, {}, {}", S(x), S(c), S(x), maxStart);
            sregs_.put(c);
          } else {
            e_.op("smax {}, {}, 0", S(x), S(x));
          }
          e_.op("smin {}, {}, {}", S(x), S(x), maxStart);
          e_.op("smul {}, {}, {}", S(x), S(x), xs[u] * es);
          e_.op("sadd {}, {}, {}", S(rS), S(rS), S(x));
          sregs_.put(x);
        }
        for (const BatchDim& bd : batch) {
          int c = coordinate(rLin, bd, nb);
          int x = sreg();
          if (bd.operandDim >= 0) {
            e_.op("smin {}, {}, {}", S(x), S(c),
                  os.dimension(bd.operandDim) - sizes[static_cast<size_t>(bd.operandDim)]);
            e_.op("smul {}, {}, {}", S(x), S(x), xs[static_cast<size_t>(bd.operandDim)] * es);
            e_.op("sadd {}, {}, {}", S(rS), S(rS), S(x));
          }
          e_.op("smul {}, {}, {}", S(x), S(c), bd.outStride * es);
          e_.op("sadd {}, {}, {}", S(rD), S(rD), S(x));
          sregs_.put(x);
          if (c != rLin) sregs_.put(c);
        }
        if (inVmem) {
          PoolGuard inner({&sregs_, &vregs_, &masks_});
          int rCnt = sreg();
          if (tableV) e_.op("sadd {}, {}, {}", S(rS), S(rS), tableV);
          e_.op("sadd {}, {}, {}", S(rD), S(rD), outV);
          e_.op("smov {}, {}", S(rCnt), (sliceElems + kVregElems - 1) / kVregElems);
          std::string lRow = e_.newLabel("row");
          e_.label(lRow);
          VReg v = valloc(ElementType::S32);
          e_.op("{} {}, [{}]", es == 4 ? "vld" : "vld.s8", V(v), S(rS));
          e_.op("{} {}, [{}]", es == 4 ? "vst" : "vst.s8", V(v), S(rD));
          vfree(v);
          e_.op("sadd {}, {}, {}", S(rS), S(rS), kVregElems * es);
          e_.op("sadd {}, {}, {}", S(rD), S(rD), kVregElems * es);
          e_.op("loop {}, {}", S(rCnt), lRow);
        } else if (direct) {
          if (base(src)) e_.op("sadd {}, {}, {}", S(rS), S(rS), base(src));
          if (base(dst)) e_.op("sadd {}, {}, {}", S(rD), S(rD), base(dst));
          e_.op("{} {}, {}, {}, sem0", dmaOp("h2h", dst, src), desc, memRef(dst, S(rD)), memRef(src, S(rS)));
          e_.op("sadd {}, {}, 1", S(rPend), S(rPend));
        } else {
          emitCopy(dst, 0, src, 0, counts, dstS, srcS, es, rS, rD);
        }
        sregs_.put(rS);
        sregs_.put(rD);
        return !failed_;
      });
  if (inVmem) {
    int r = sreg();
    e_.op("smov {}, {}", S(r), base(dst));
    e_.op("{} {}, {}, [{}], sem2", dmaOp("v2h", dst), e_.desc(outBytes, {}), memRef(dst, S(r)), outV);
    e_.op("sem.wait sem2");
    sregs_.put(r);
  }
  uint64_t idxBytes = bufs_[leaves_[&indices][0]].bytes;
  endKernel(0, (inVmem ? tableBytes + outBytes : 2 * outBytes) + idxBytes, inVmem ? vmemNeed : 0);
  return ok && !failed_;
}

// ============================================================== scatter

// The scatter kernel's phases and the state they share: the plan (window
// geometry, descriptors, pieces), the registers of the window loop and the
// pieces. A friend of Lowerer: the phases use the lowering state as a
// kernel's member functions do, under the same names.
class ScatterEmitter : KernelPhases {
 public:
  ScatterEmitter(Lowerer& l, const hlo::Instruction& in)
      : KernelPhases(l, in) {}
  bool run();

 private:
  struct PieceDescs {
    std::vector<std::string> loadCur, loadUpd, store;
    int64_t nV = 0;
  };
  bool checks();
  bool geometry();
  int coordinate(int rLin, const BatchDim& bd, int64_t total);
  static std::vector<int64_t> scaled(const std::vector<int64_t>& v, int64_t f);
  std::vector<int64_t> pieceCounts(size_t split, int64_t c) const;
  uint64_t pieceSlotBytes(const std::vector<int64_t>& pc);
  void planOperands();
  bool planPieces();
  void startSlots();
  void addr(int reg, int rElems, int buf, int e);
  bool window(int rLin, int rPend, const std::function<int(int64_t)>& component);
  void overwriteWindow(int rPend);
  void waitOverlap();
  void pieceStart();
  void loads(const PieceDescs& pd);
  void stores(const PieceDescs& pd);
  bool combineVregs();
  bool combineWindow();


  // The plan.
  const hlo::Computation* comp = nullptr;
  size_t n = 0;
  const hlo::Instruction* indices = nullptr;
  const Shape *os = nullptr, *us = nullptr;
  int64_t orank = 0, ivd = 0;
  const std::vector<int>* outs = nullptr;
  std::vector<int64_t> full, xs, ust, winSize, winCounts, opS, updS;
  std::vector<BatchDim> batch;
  int64_t W = 0, nb = 1;
  uint64_t resultBytes = 0;
  bool empty = false;
  std::vector<int64_t> fromIndex;
  bool overwrite = false;
  size_t maxDims = 1;
  std::vector<int> updBufs;
  std::vector<ElementType> types;
  std::vector<int> esz;
  std::vector<std::string> dOver;
  std::vector<bool> overDirect;
  std::vector<int64_t> vCur, vUpd;
  size_t split = 0;
  int64_t chunk = 1, tailChunk = 0;
  uint64_t slotBytes = 0;
  PieceDescs fullPiece, tailPiece;
  int64_t chunksPerRow = 1, nPieces = 1;
  std::vector<int64_t> startDims;  // operand dims whose window start varies, in the body's order
  int rSlot = -1;
  std::vector<int> rPrev;
  // A window: its start in the operand (rO) and updates (rU), the start
  // coordinates, the registers to free at its end.
  std::string lSkip;
  int rO = -1, rU = -1, rT = -1, rA = -1, rB = -1;
  std::vector<int> starts, owned;
  // Its pieces (combining).
  int rOv = -1, rC = -1, rSem = -1, rP = -1, rPO = -1, rPU = -1, rTail = -1, rPieceO = -1, rPieceU = -1, rV = -1,
      rCount = -1;
  std::string lPiece, lFull, lLoaded;
};

// The operands, indices and updates against the dimension numbers.
bool ScatterEmitter::checks() {
  l_.beginKernel(in, "scatter");
  const int64_t nOps = in.operandCount();
  comp = in.toApply();
  if (nOps < 3 || nOps % 2 == 0 || !comp)
    return l_.fail(in, "llo-gen: scatter expects N operands, indices, N updates and an update computation");
  n = static_cast<size_t>((nOps - 1) / 2);
  const auto& dn = *in.attrs().scatterDims;
  indices = in.operand(static_cast<int64_t>(n));
  os = &in.operand(0)->shape();
  us = &in.operand(static_cast<int64_t>(n) + 1)->shape();
  const Shape& os = *this->os;
  const Shape& us = *this->us;
  orank = os.rank();
  const int64_t irank = indices->shape().rank();
  ivd = dn.indexVectorDim;
  outs = &leaves_[&in];
  const std::vector<int>& outs = *this->outs;
  if (outs.size() != n) return l_.fail(in, "llo-gen: scatter result does not match its operands");
  for (size_t k = 0; k < n; ++k)
    if (in.operand(static_cast<int64_t>(k))->shape().dimensions() != os.dimensions() ||
        in.operand(static_cast<int64_t>(n + 1 + k))->shape().dimensions() != us.dimensions() ||
        in.operand(static_cast<int64_t>(n + 1 + k))->shape().elementType() != bufs_[outs[k]].type)
      return l_.fail(in, "llo-gen: scatter operands (and updates) must share dimensions and types");
  if (ivd < 0 || ivd > irank || !allInRange(dn.scatterDimsToOperandDims, orank) ||
      !allInRange(dn.insertedWindowDims, orank) || !allInRange(dn.inputBatchingDims, orank) ||
      !allInRange(dn.updateWindowDims, us.rank()) ||
      !allInRange(dn.scatterIndicesBatchingDims, std::max<int64_t>(irank, ivd + 1)) ||
      dn.inputBatchingDims.size() != dn.scatterIndicesBatchingDims.size())
    return l_.fail(in, fmt::format("llo-gen: scatter '{}' has inconsistent dimension numbers", in.name()));
  full = indices->shape().dimensions();
  if (ivd == irank) full.push_back(1);
  if (full[static_cast<size_t>(ivd)] != static_cast<int64_t>(dn.scatterDimsToOperandDims.size()))
    return l_.fail(in, "llo-gen: scatter_dims_to_operand_dims length differs from the index vector length");

  return true;
}

// The results start as the operands; the window and batch geometry.
bool ScatterEmitter::geometry() {
const auto& dn = *in.attrs().scatterDims;
  const Shape& os = *this->os;
  const Shape& us = *this->us;
  const std::vector<int>& outs = *this->outs;
  // The operands are the starting point of the results.
  for (size_t k = 0; k < n; ++k) {
    int s = leaves_[in.operand(static_cast<int64_t>(k))][0];
    if (s != outs[k] && bufs_[outs[k]].bytes > 0)
      l_.emitCopy(outs[k], 0, s, 0, {static_cast<int64_t>(bufs_[outs[k]].bytes)}, {1}, {1}, 1);
  }
  // Window geometry in elements: operand dims not inserted nor batching,
  // paired in order with update_window_dims.
  xs = rowMajorStrides(os.dimensions());
  ust = rowMajorStrides(us.dimensions());
  winSize.assign(static_cast<size_t>(orank), 1);
  size_t j = 0;
  for (int64_t d = 0; d < orank; ++d) {
    if (contains(dn.insertedWindowDims, d) || contains(dn.inputBatchingDims, d)) continue;
    if (j >= dn.updateWindowDims.size())
      return l_.fail(in, "llo-gen: scatter update_window_dims do not match the operand");
    int64_t ud = dn.updateWindowDims[j++];
    winSize[static_cast<size_t>(d)] = us.dimension(ud);
    winCounts.push_back(us.dimension(ud));
    opS.push_back(xs[static_cast<size_t>(d)]);
    updS.push_back(ust[static_cast<size_t>(ud)]);
  }
  if (j != dn.updateWindowDims.size())
    return l_.fail(in, "llo-gen: scatter update_window_dims do not match the operand");
  bool rankMismatch = false;
  auto paired = pairBatchDims(us, ust, dn.updateWindowDims, full, ivd, dn.scatterIndicesBatchingDims,
                              dn.inputBatchingDims, rankMismatch);
  if (!paired)
    return l_.fail(in, rankMismatch ? "llo-gen: scatter update rank does not match the dimension numbers"
                                 : "llo-gen: scatter update scatter dimensions differ from the indices");
  batch = std::move(*paired);
  W = product(winCounts);
  nb = 1;
  for (const BatchDim& bd : batch) nb *= bd.count;
  for (int b : outs) resultBytes += bufs_[b].bytes;
  if (W == 0 || nb == 0) {
    l_.endKernel(0, 2 * resultBytes, 0);
    empty = true;
    return !failed_;
  }
  return true;
}

// Coordinate of batch dim `bd` of linear position rLin (rLin itself when
// it is the only batch dim).
int ScatterEmitter::coordinate(int rLin, const BatchDim& bd, int64_t total) {
  if (bd.inner == 1 && bd.count == total) return rLin;
  int c = sreg();
  if (bd.inner > 1) e_.op("sdiv {}, {}, {}", S(c), S(rLin), bd.inner);
  if (bd.inner * bd.count < total) e_.op("srem {}, {}, {}", S(c), S(bd.inner > 1 ? c : rLin), bd.count);
  return c;
}

// v times f.
std::vector<int64_t> ScatterEmitter::scaled(const std::vector<int64_t>& v, int64_t f) {
  std::vector<int64_t> r;
  for (int64_t x : v) r.push_back(x * f);
  return r;
}

// The window counts of a piece of c elements along dim split.
std::vector<int64_t> ScatterEmitter::pieceCounts(size_t split, int64_t c) const {
  std::vector<int64_t> pc = winCounts;
  for (size_t i = 0; i < split; ++i) pc[i] = 1;
  pc[split] = c;
  return pc;
}

// VMEM slot bytes for a piece, or 0 when its boxes need too many DMA dims.
uint64_t ScatterEmitter::pieceSlotBytes(const std::vector<int64_t>& pc) {
  uint64_t top = 0;
  int64_t nV = (product(pc) + kVregElems - 1) / kVregElems;
  for (size_t k = 0; k < n; ++k) {
    int e = esz[k];
    std::vector<int64_t> contig = byteStrides(pc, e);
    for (const Box& b : {makeBox(pc, scaled(opS, e), contig, e), makeBox(pc, scaled(updS, e), contig, e),
                         makeBox(pc, contig, scaled(opS, e), e)})
      if (b.dims.size() > maxDims || b.chunk >= (uint64_t{1} << 31)) return 0;
    top += 2 * alignUp(static_cast<uint64_t>(nV * kVregElems * e), 512);
  }
  return alignUp(top, 512);
}

// Per operand: its update buffer, type and DMA descriptors.
void ScatterEmitter::planOperands() {
const auto& dn = *in.attrs().scatterDims;
  const std::vector<int>& outs = *this->outs;
  fromIndex.assign(static_cast<size_t>(orank), -1);
  for (size_t k = 0; k < dn.scatterDimsToOperandDims.size(); ++k)
    fromIndex[static_cast<size_t>(dn.scatterDimsToOperandDims[k])] = static_cast<int64_t>(k);
  for (int64_t d : dn.inputBatchingDims) fromIndex[static_cast<size_t>(d)] = -1;

  overwrite = isOverwrite(*comp, n);
  maxDims = static_cast<size_t>(std::max(1, target_.dma.descriptorDims));
  for (size_t k = 0; k < n; ++k) {
    updBufs.push_back(leaves_[in.operand(static_cast<int64_t>(n + 1 + k))][0]);
    types.push_back(bufs_[outs[k]].type);
    esz.push_back(typeInfo(types[k]).bytes);
  }
  // Descriptors per operand: update -> result (overwrite), or result and
  // update windows into contiguous VMEM and back (combine).
  overDirect.assign(n, true);
  vCur.assign(n, 0);
  vUpd.assign(n, 0);
  if (overwrite)
    for (size_t k = 0; k < n; ++k) {
      int e = esz[k];
      Box b = makeBox(winCounts, scaled(updS, e), scaled(opS, e), e);
      overDirect[k] = b.dims.size() <= maxDims && b.chunk < (uint64_t{1} << 31);
      dOver.push_back(overDirect[k] ? e_.desc(b.chunk, b.dims) : "");
    }
}

// A combined window that does not fit VMEM (or one descriptor) goes in
// pieces: a loop over window dims [0, split) and over chunks of `chunk`
// (the last one `tailChunk`) along dim split, every piece holding the
// whole of the later dims. Pieces of one window are disjoint.
bool ScatterEmitter::planPieces() {
const std::vector<int>& outs = *this->outs;
  (void)outs;
  chunk = winCounts.empty() ? 1 : winCounts[0];
  if (!overwrite) {
    if (winCounts.empty()) {
      winCounts = {1};
      opS = {1};
      updS = {1};
    }
    chunk = winCounts[0];
    bool found = false;
    for (split = 0; split < winCounts.size() && !found; ++split) {
      auto fits = [&](int64_t c) {
        uint64_t b = pieceSlotBytes(pieceCounts(split, c));
        return b > 0 && 2 * b <= l_.vmemBudget();
      };
      if (!fits(1)) continue;
      // The largest chunk that fits (VMEM grows with it; the DMA dims are
      // the same for every chunk of 2 or more).
      int64_t lo = 1, hi = winCounts[split];
      while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid)) lo = mid;
        else hi = mid - 1;
      }
      chunk = lo;
      found = true;
      break;
    }
    if (!found)
      return l_.fail(in, fmt::format("llo-gen: scatter '{}': not even one element of the window fits in VMEM "
                                  "and one DMA descriptor",
                                  in.name()));
    tailChunk = winCounts[split] % chunk;
    slotBytes = pieceSlotBytes(pieceCounts(split, chunk));
  }
  // Offsets of the operands' pieces in a VMEM slot (the full piece's sizes;
  // a tail piece is smaller).
  if (!overwrite) {
    std::vector<int64_t> pc = pieceCounts(split, chunk);
    int64_t nV = (product(pc) + kVregElems - 1) / kVregElems;
    uint64_t vmemTop = 0;
    for (size_t k = 0; k < n; ++k) {
      uint64_t bytes = alignUp(static_cast<uint64_t>(nV * kVregElems * esz[k]), 512);
      vCur[k] = static_cast<int64_t>(vmemTop);
      vmemTop += bytes;
      vUpd[k] = static_cast<int64_t>(vmemTop);
      vmemTop += bytes;
    }
    for (auto [piece, c] : {std::pair{&fullPiece, chunk}, {&tailPiece, tailChunk}}) {
      if (c == 0) continue;
      std::vector<int64_t> cnt = pieceCounts(split, c);
      piece->nV = (product(cnt) + kVregElems - 1) / kVregElems;
      for (size_t k = 0; k < n; ++k) {
        int e = esz[k];
        std::vector<int64_t> contig = byteStrides(cnt, e);
        Box lc = makeBox(cnt, scaled(opS, e), contig, e);
        Box lu = makeBox(cnt, scaled(updS, e), contig, e);
        Box sb = makeBox(cnt, contig, scaled(opS, e), e);
        piece->loadCur.push_back(e_.desc(lc.chunk, lc.dims));
        piece->loadUpd.push_back(e_.desc(lu.chunk, lu.dims));
        piece->store.push_back(e_.desc(sb.chunk, sb.dims));
      }
    }
  }
  return true;
}

// The pieces of a window, and the slots and previous starts combining keeps.
void ScatterEmitter::startSlots() {
  chunksPerRow = overwrite ? 1 : (winCounts[split] + chunk - 1) / chunk;
  nPieces = chunksPerRow;
  for (size_t i = 0; i < split; ++i) nPieces *= winCounts[i];
  // Combined pieces alternate between two VMEM slots, so the write-back of
  // one piece overlaps the loads of the next unless the two overlap in the
  // operand (only possible for the first piece of a window and the last of
  // the previous one). sem3 and sem4 count finished write-backs of slot 0
  // and 1; each starts with one piece's credit so the first waits pass.
  startDims.clear();
  for (int64_t d = 0; d < orank; ++d)
    if (fromIndex[static_cast<size_t>(d)] >= 0) startDims.push_back(d);
  for (const BatchDim& bd : batch)
    if (bd.operandDim >= 0) startDims.push_back(bd.operandDim);
  if (!overwrite) {
    rSlot = sreg();
    e_.op("smov {}, 0", S(rSlot));
    for (size_t i = 0; i < startDims.size(); ++i) {
      rPrev.push_back(sreg());
      e_.op("smov {}, {}", S(rPrev.back()), -(int64_t{1} << 30));  // no previous window
    }
    e_.op("sem.signal sem3, {}", n);
    e_.op("sem.signal sem4, {}", n);
  }
}

// reg = the byte address of element rElems of buf.
void ScatterEmitter::addr(int reg, int rElems, int buf, int e) {
    e_.op("smul {}, {}, {}", S(reg), S(rElems), e);
    if (base(buf)) e_.op("sadd {}, {}, {}", S(reg), S(reg), base(buf));
}

// One window: its start in the operand (skipped when it does not fit) and
// in the updates, then overwritten or combined.
bool ScatterEmitter::window(int rLin, int rPend, const std::function<int(int64_t)>& component) {
const Shape& os = *this->os;
  lSkip = e_.newLabel("skip");
  rO = sreg();
  rU = sreg();
  rT = sreg();
  e_.op("smov {}, 0", S(rO));
  e_.op("smov {}, 0", S(rU));
  starts.clear();
  owned.clear();
  for (int64_t d = 0; d < orank; ++d) {
    size_t u = static_cast<size_t>(d);
    if (fromIndex[u] < 0) continue;
    int x = component(fromIndex[u]);
    // XLA skips a window that does not fit entirely (a u32 start with the
    // top bit set reads as negative: out of bounds either way).
    e_.op("br.lt {}, 0, {}", S(x), lSkip);
    e_.op("br.ge {}, {}, {}", S(x), os.dimension(d) - winSize[u] + 1, lSkip);
    e_.op("smul {}, {}, {}", S(rT), S(x), xs[u]);
    e_.op("sadd {}, {}, {}", S(rO), S(rO), S(rT));
    starts.push_back(x);
    owned.push_back(x);
  }
  for (const BatchDim& bd : batch) {
    int c = coordinate(rLin, bd, nb);
    if (c != rLin) owned.push_back(c);
    if (bd.operandDim >= 0) {
      size_t u = static_cast<size_t>(bd.operandDim);
      if (bd.count > os.dimension(bd.operandDim) - winSize[u] + 1)
        e_.op("br.ge {}, {}, {}", S(c), os.dimension(bd.operandDim) - winSize[u] + 1, lSkip);
      e_.op("smul {}, {}, {}", S(rT), S(c), xs[u]);
      e_.op("sadd {}, {}, {}", S(rO), S(rO), S(rT));
      starts.push_back(c);
    }
    e_.op("smul {}, {}, {}", S(rT), S(c), bd.outStride);
    e_.op("sadd {}, {}, {}", S(rU), S(rU), S(rT));
  }
  rA = sreg();
  rB = sreg();
  if (overwrite) {
    overwriteWindow(rPend);
  } else if (!combineWindow()) {
    return false;
  }
  e_.label(lSkip);
  for (int r : owned) sregs_.put(r);
  for (int r : {rO, rU, rT, rA, rB}) sregs_.put(r);
  return !failed_;
}

// Overwrite: update -> result, by DMA.
void ScatterEmitter::overwriteWindow(int rPend) {
const std::vector<int>& outs = *this->outs;
  int issued = 0;
  for (size_t k = 0; k < n; ++k) {
    int e = esz[k];
    if (!overDirect[k]) {
      e_.op("smul {}, {}, {}", S(rA), S(rU), e);
      e_.op("smul {}, {}, {}", S(rB), S(rO), e);
      l_.emitCopy(outs[k], 0, updBufs[k], 0, winCounts, scaled(opS, e), scaled(updS, e), e, rA, rB);
      continue;
    }
    addr(rA, rO, outs[k], e);
    addr(rB, rU, updBufs[k], e);
    e_.op("{} {}, {}, {}, sem0", l_.dmaOp("h2h", outs[k], updBufs[k]), dOver[k], l_.memRef(outs[k], S(rA)),
          l_.memRef(updBufs[k], S(rB)));
    ++issued;
  }
  // Repeated indices must land in order; only unique ones may overlap in flight.
  if (issued && in.attrs().uniqueIndices)
    e_.op("sadd {}, {}, {}", S(rPend), S(rPend), issued);
  else if (issued)
    e_.op("sem.wait sem0, {}", issued);
}

// Combining: waits for the write-back of the previous window when this
// one overlaps it, and for this slot's last write-back.
void ScatterEmitter::waitOverlap() {
  // Windows overlap iff their starts differ by less than the window size
  // in every dim.
  rOv = sreg();
  rC = sreg();
  e_.op("smov {}, 1", S(rOv));
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t size = winSize[static_cast<size_t>(startDims[i])];
    e_.op("ssub {}, {}, {}", S(rT), S(starts[i]), S(rPrev[i]));
    e_.op("scmp.lt {}, {}, {}", S(rC), S(rT), size);
    e_.op("sand {}, {}, {}", S(rOv), S(rOv), S(rC));
    e_.op("scmp.gt {}, {}, {}", S(rC), S(rT), -size);
    e_.op("sand {}, {}, {}", S(rOv), S(rOv), S(rC));
    e_.op("smov {}, {}", S(rPrev[i]), S(starts[i]));
  }
  rSem = sreg();
  std::string lApart = e_.newLabel("apart");
  if (nPieces == 1) {
    e_.op("sadd {}, {}, 3", S(rSem), S(rSlot));
    e_.op("sem.wait sem[{}], {}", S(rSem), n);  // this slot's last write-back has left VMEM
  }
  e_.op("br.eq {}, 0, {}", S(rOv), lApart);
  e_.op("sxor {}, {}, 1", S(rC), S(rSlot));
  e_.op("sadd {}, {}, 3", S(rC), S(rC));
  e_.op("sem.wait sem[{}], {}", S(rC), n);  // the previous window is back in HBM
  e_.op("sem.signal sem[{}], {}", S(rC), n);
  e_.label(lApart);
}

// The loop over the pieces of a window: rO / rU moved to the piece's start.
void ScatterEmitter::pieceStart() {
  // Pieces: rP counts them; rO / rU move to the piece's start.
  rP = rPO = rPU = rTail = -1;
  lPiece = e_.newLabel("piece");
  lFull = e_.newLabel("fullpiece");
  lLoaded = e_.newLabel("loaded");
  if (nPieces > 1) {
    rP = sreg();
    rPO = sreg();
    rPU = sreg();
    rTail = sreg();
    e_.op("smov {}, 0", S(rP));
    e_.label(lPiece);
    e_.op("sadd {}, {}, 3", S(rSem), S(rSlot));
    e_.op("sem.wait sem[{}], {}", S(rSem), n);  // this slot's last write-back has left VMEM
    // Chunk index along dim split (times the chunk), then the outer coordinates.
    int rQ = sreg(), rX = sreg();
    e_.op("srem {}, {}, {}", S(rX), S(rP), chunksPerRow);
    if (tailChunk > 0) e_.op("scmp.eq {}, {}, {}", S(rTail), S(rX), chunksPerRow - 1);
    e_.op("smul {}, {}, {}", S(rT), S(rX), chunk * opS[split]);
    e_.op("sadd {}, {}, {}", S(rPO), S(rO), S(rT));
    e_.op("smul {}, {}, {}", S(rT), S(rX), chunk * updS[split]);
    e_.op("sadd {}, {}, {}", S(rPU), S(rU), S(rT));
    if (split > 0) e_.op("sdiv {}, {}, {}", S(rQ), S(rP), chunksPerRow);
    for (size_t i = split; i-- > 0;) {
      if (i > 0) e_.op("srem {}, {}, {}", S(rX), S(rQ), winCounts[i]);
      int coord = i > 0 ? rX : rQ;
      e_.op("smul {}, {}, {}", S(rT), S(coord), opS[i]);
      e_.op("sadd {}, {}, {}", S(rPO), S(rPO), S(rT));
      e_.op("smul {}, {}, {}", S(rT), S(coord), updS[i]);
      e_.op("sadd {}, {}, {}", S(rPU), S(rPU), S(rT));
      if (i > 0) e_.op("sdiv {}, {}, {}", S(rQ), S(rQ), winCounts[i]);
    }
    sregs_.put(rQ);
    sregs_.put(rX);
  }
}

// A piece of the results and of the updates into the slot.
void ScatterEmitter::loads(const PieceDescs& pd) {
const std::vector<int>& outs = *this->outs;
  for (size_t k = 0; k < n; ++k) {
    addr(rA, rPieceO, outs[k], esz[k]);
    addr(rB, rPieceU, updBufs[k], esz[k]);
    e_.op("{} {}, [{} + {}], {}, sem2", l_.dmaOp("h2v", outs[k]), pd.loadCur[k], S(rV), vCur[k],
          l_.memRef(outs[k], S(rA)));
    e_.op("{} {}, [{} + {}], {}, sem2", l_.dmaOp("h2v", updBufs[k]), pd.loadUpd[k], S(rV), vUpd[k],
          l_.memRef(updBufs[k], S(rB)));
  }
}

// A combined piece back to the results, counted on the slot's semaphore.
void ScatterEmitter::stores(const PieceDescs& pd) {
const std::vector<int>& outs = *this->outs;
  for (size_t k = 0; k < n; ++k) {
    addr(rA, rPieceO, outs[k], esz[k]);
    e_.op("{} {}, {}, [{} + {}], sem[{}]", l_.dmaOp("v2h", outs[k]), pd.store[k],
          l_.memRef(outs[k], S(rA)), S(rV), vCur[k], S(rSem));
  }
}

// The update computation over the piece, vreg by vreg, in place in the slot.
bool ScatterEmitter::combineVregs() {
  // One VMEM offset per element width in use: a vreg spans 1024 elements.
  std::set<int> widths(esz.begin(), esz.end());
  int rCnt = sreg();
  int rOff[17];  // by element bytes, up to 16 (c128)
  std::fill(std::begin(rOff), std::end(rOff), -1);
  for (int e : widths) {
    rOff[e] = sreg();
    e_.op("smov {}, {}", S(rOff[e]), S(rV));
  }
  e_.op("smov {}, {}", S(rCnt), S(rCount));
  std::string lV = e_.newLabel("combine");
  e_.label(lV);
  std::vector<VReg> params;
  for (size_t k = 0; k < n; ++k)
    params.push_back(l_.vload(types[k], fmt::format("{} + {}", S(rOff[esz[k]]), vCur[k])));
  for (size_t k = 0; k < n; ++k)
    params.push_back(l_.vload(types[k], fmt::format("{} + {}", S(rOff[esz[k]]), vUpd[k])));
  std::vector<VReg> res;
  if (!l_.lowerComputation(*comp, params, res)) return false;
  if (res.size() != n)
    return l_.fail(in, "llo-gen: scatter update computation returns the wrong number of values");
  for (size_t k = 0; k < n; ++k) {
    l_.vstore(res[k], types[k], fmt::format("{} + {}", S(rOff[esz[k]]), vCur[k]));
    vfree(res[k]);
  }
  for (VReg v : params) vfree(v);
  for (int e : widths) e_.op("sadd {}, {}, {}", S(rOff[e]), S(rOff[e]), kVregElems * e);
  e_.op("loop {}, {}", S(rCnt), lV);
  return true;
}

// Combine: each piece of the window into a slot, combined, and back.
bool ScatterEmitter::combineWindow() {
  waitOverlap();
  pieceStart();
  rPieceO = nPieces > 1 ? rPO : rO;
  rPieceU = nPieces > 1 ? rPU : rU;
  rV = rOv;
  e_.op("smul {}, {}, {}", S(rV), S(rSlot), slotBytes);
  rCount = sreg();
  if (tailChunk > 0) {
    e_.op("br.eq {}, 0, {}", S(rTail), lFull);
    loads(tailPiece);
    e_.op("smov {}, {}", S(rCount), tailPiece.nV);
    e_.op("jmp {}", lLoaded);
    e_.label(lFull);
  }
  loads(fullPiece);
  e_.op("smov {}, {}", S(rCount), fullPiece.nV);
  e_.label(lLoaded);
  e_.op("sem.wait sem2, {}", 2 * n);
  {
    PoolGuard inner({&sregs_, &vregs_, &masks_});
    if (!combineVregs()) return false;
  }
  if (tailChunk > 0) {
    std::string lFullStore = e_.newLabel("fullstore"), lStored = e_.newLabel("stored");
    e_.op("br.eq {}, 0, {}", S(rTail), lFullStore);
    stores(tailPiece);
    e_.op("jmp {}", lStored);
    e_.label(lFullStore);
    stores(fullPiece);
    e_.label(lStored);
  } else {
    stores(fullPiece);
  }
  e_.op("sxor {}, {}, 1", S(rSlot), S(rSlot));
  if (nPieces > 1) {
    e_.op("sadd {}, {}, 1", S(rP), S(rP));
    e_.op("br.lt {}, {}, {}", S(rP), nPieces, lPiece);
    for (int r : {rP, rPO, rPU, rTail}) sregs_.put(r);
  }
  for (int r : {rOv, rC, rSem, rCount}) sregs_.put(r);
  return true;
}
bool ScatterEmitter::run() {
  if (!checks() || !geometry()) return false;
  if (empty) return !failed_;
  planOperands();
  if (!planPieces()) return false;
  startSlots();
  bool ok = l_.emitIndexLoop(in, *indices, ivd, [&](int rLin, int rPend, const std::function<int(int64_t)>& component) {
    return window(rLin, rPend, component);
  });
  if (!overwrite) {
    // Drain the last write-backs (and the initial credit).
    e_.op("sem.wait sem3, {}", n);
    e_.op("sem.wait sem4, {}", n);
  }
  uint64_t updBytes = 0;
  for (int b : updBufs) updBytes += bufs_[b].bytes;
  l_.endKernel(overwrite ? 0 : static_cast<double>(nb * W * static_cast<int64_t>(n)),
            2 * resultBytes + 2 * updBytes, 2 * slotBytes);
  return ok && !failed_;
}

bool Lowerer::lowerScatter(const Instruction& in) {
  ScatterEmitter scatter(*this, in);
  return scatter.run();
}

}  // namespace tpu::codegen
