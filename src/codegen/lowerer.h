// Internal to the codegen library: the Lowerer class, shared by the
// lowering files (lower.cpp and kernels/*.cpp, one per kernel kind or type
// family), and the small helpers they all use. Not a public interface. The
// state a lowering carries from planning to emission is the
// LoweringContext (lowering_context.h); the Lowerer adds the planner and the
// kernel emitters over it.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/buffer_assignment.h"
#include "codegen/emitter.h"
#include "codegen/fusion_lowering.h"
#include "codegen/kernel_emitter.h"
#include "codegen/lower.h"
#include "codegen/lowering_context.h"
#include "codegen/op_table.h"
#include "hlo/computation.h"
#include "hlo/instruction.h"
#include "target/topology.h"

namespace tpu::codegen {

using hlo::Computation;
using hlo::ElementType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

constexpr int kVregElems = 1024;  // 8 sublanes x 128 lanes

// How llo-gen holds an element type. In memory: `bytes` per element, as XLA
// literals store it (s1..s4/u1..u4 and f4/f6 take a byte). In a vector register: one 32-bit
// lane per element, always normalised: integers sign- or zero-extended from
// `bits` (so s32 compares order every signed and narrow unsigned type),
// floats as f32 values the type can represent. Wide types take `words`
// 32-bit words per element: s64/u64/f64 live in a register pair (low word,
// high word; VReg::hi), c64/c128 in the registers of their parts
// (kernels/complex.cpp).
struct TypeInfo {
  bool ok = false;
  int bytes = 4;
  bool isFloat = false;
  bool isUnsigned = false;
  int bits = 32;
  std::string_view dtype;
  int words = 1;
  bool isComplex = false;
};

inline TypeInfo typeInfo(ElementType t) {
  switch (t) {
    case ElementType::F32: return {true, 4, true, false, 32, "f32"};
    case ElementType::BF16: return {true, 2, true, false, 16, "bf16"};
    case ElementType::F16: return {true, 2, true, false, 16, "f16"};
    case ElementType::S32: return {true, 4, false, false, 32, "s32"};
    case ElementType::U32: return {true, 4, false, true, 32, "u32"};
    case ElementType::S16: return {true, 2, false, false, 16, "s16"};
    case ElementType::U16: return {true, 2, false, true, 16, "u16"};
    case ElementType::S8: return {true, 1, false, false, 8, "s8"};
    case ElementType::U8: return {true, 1, false, true, 8, "u8"};
    case ElementType::S4: return {true, 1, false, false, 4, "s4"};
    case ElementType::U4: return {true, 1, false, true, 4, "u4"};
    case ElementType::S2: return {true, 1, false, false, 2, "s2"};
    case ElementType::U2: return {true, 1, false, true, 2, "u2"};
    case ElementType::S1: return {true, 1, false, false, 1, "s1"};
    case ElementType::U1: return {true, 1, false, true, 1, "u1"};
    case ElementType::Pred: return {true, 1, false, true, 1, "pred"};
    case ElementType::F8E4M3FN: return {true, 1, true, false, 8, "f8e4m3fn"};
    case ElementType::F8E5M2: return {true, 1, true, false, 8, "f8e5m2"};
    case ElementType::F8E4M3: return {true, 1, true, false, 8, "f8e4m3"};
    case ElementType::F8E3M4: return {true, 1, true, false, 8, "f8e3m4"};
    case ElementType::F8E4M3FNUZ: return {true, 1, true, false, 8, "f8e4m3fnuz"};
    case ElementType::F8E5M2FNUZ: return {true, 1, true, false, 8, "f8e5m2fnuz"};
    case ElementType::F8E4M3B11FNUZ: return {true, 1, true, false, 8, "f8e4m3b11fnuz"};
    case ElementType::F8E8M0FNU: return {true, 1, true, false, 8, "f8e8m0fnu"};
    case ElementType::F4E2M1FN: return {true, 1, true, false, 4, "f4e2m1fn"};
    case ElementType::F6E2M3FN: return {true, 1, true, false, 6, "f6e2m3fn"};
    case ElementType::F6E3M2FN: return {true, 1, true, false, 6, "f6e3m2fn"};
    case ElementType::S64: return {true, 8, false, false, 64, "s64", 2};
    case ElementType::U64: return {true, 8, false, true, 64, "u64", 2};
    case ElementType::F64: return {true, 8, true, false, 64, "f64", 2};
    case ElementType::C64: return {true, 8, true, false, 64, "c64", 2, true};
    case ElementType::C128: return {true, 16, true, false, 128, "c128", 4, true};
    default: return {};
  }
}
// s64, u64 and f64: values in a register pair.
inline bool isPairType(ElementType t) {
  return t == ElementType::S64 || t == ElementType::U64 || t == ElementType::F64;
}
// Pair and complex types: more than one 32-bit word per element.
inline bool isWideType(ElementType t) { return typeInfo(t).words > 1; }
// Types of one 32-bit word (not pairs, not complex): the ones the streaming
// fusion kernels take (kernels/matmul_epilogue.cpp, reduce_input.cpp,
// column_reduce.cpp).
inline bool plainType(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.ok && !ti.isComplex && ti.words <= 1;
}


// The vector load that widens `t` from memory into its register form (for
// pair types, the load of one word: vld.e64 with a word operand).
inline std::string loadMnemonic(ElementType t) {
  TypeInfo ti = typeInfo(t);
  if (ti.words == 2) return "vld.e64";
  if (ti.bytes == 4) return "vld";
  if (ti.isFloat) return fmt::format("vld.{}", ti.dtype);
  if (ti.bytes == 2) return ti.isUnsigned ? "vld.u16" : "vld.s16";
  return ti.isUnsigned ? "vld.u8" : "vld.s8";  // s1..s4/u1..u4 bytes are already extended
}

// Floats other than f32: their values are rounded after every operation
// (vrnd.<dtype>), as XLA and the interpreter do.
inline bool isNarrowFloat(ElementType t) {
  TypeInfo ti = typeInfo(t);
  return ti.isFloat && ti.bits < 32;
}

// The element type a dot or convolution computes in, picked from its result
// type as the interpreter picks it: f32 for narrow floats, s8/u8 for s4/u4,
// else the result type itself. Operands are converted to it first and the
// sums converted to the result type after.
inline ElementType dotComputeType(ElementType result) {
  if (isNarrowFloat(result)) return ElementType::F32;
  if (result == ElementType::S4) return ElementType::S8;
  if (result == ElementType::U4) return ElementType::U8;
  return result;
}

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
inline int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}
inline std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

inline void arrayLeaves(const Shape& s, std::vector<const Shape*>& out) {
  if (s.isTuple()) {
    for (const Shape& e : s.tupleElements()) arrayLeaves(e, out);
  } else if (s.isArray()) {
    out.push_back(&s);
  }
}
inline std::vector<const Shape*> arrayLeaves(const Shape& s) {
  std::vector<const Shape*> out;
  arrayLeaves(s, out);
  return out;
}
// Index of the first leaf and leaf count of tuple element `index` of `s`.
inline std::pair<size_t, size_t> leafRange(const Shape& s, int64_t index) {
  size_t first = 0;
  for (int64_t i = 0; i < index; ++i) first += arrayLeaves(s.tupleElement(i)).size();
  return {first, arrayLeaves(s.tupleElement(index)).size()};
}

inline std::string sanitize(std::string_view name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

struct VReg {
  int r = -1;
  ElementType t = ElementType::F32;
  int hi = -1;  // pair types: the register of the high words (r holds the low words)
  // Complex types (kernels/complex.cpp): c64 is r (real) and hi (imaginary);
  // c128 is the real pair r:hi and the imaginary pair im:imh.
  int im = -1, imh = -1;
};

// A strided copy as one DMA descriptor: dimensions of extent 1 dropped,
// dimensions that are contiguous in both source and destination merged, and
// the innermost run of contiguous bytes as the chunk.
struct Box {
  uint64_t chunk = 0;
  std::vector<Emitter::Dim> dims;
};

inline Box makeBox(const std::vector<int64_t>& counts, const std::vector<int64_t>& srcStrides,
            const std::vector<int64_t>& dstStrides, int esize) {
  std::vector<Emitter::Dim> d;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 1) continue;
    if (!d.empty() && d.back().src == srcStrides[i] * counts[i] &&
        d.back().dst == dstStrides[i] * counts[i]) {
      d.back().count *= counts[i];
      d.back().src = srcStrides[i];
      d.back().dst = dstStrides[i];
      continue;
    }
    d.push_back({counts[i], srcStrides[i], dstStrides[i]});
  }
  Box b;
  b.chunk = static_cast<uint64_t>(esize);
  if (!d.empty() && d.back().src == esize && d.back().dst == esize) {
    b.chunk = static_cast<uint64_t>(d.back().count) * static_cast<uint64_t>(esize);
    d.pop_back();
  }
  b.dims = std::move(d);
  return b;
}

struct EwInput {
  enum Kind { Full, Scalar, Index } kind = Full;
  int buf = -1;
  int64_t off = 0;  // byte offset within the buffer
  ElementType type = ElementType::F32;
  // Full: when not 0, the buffer holds `period` elements that repeat along
  // the stream (a broadcast along the leading dimensions of the result).
  int64_t period = 0;
  // Full: when not empty, the stream is a strided view of the buffer (a
  // transpose or broadcast of it), element [i0, i1, ...] of `viewDims` at
  // byte sum(i_d * viewStrides[d]); chunks are whole rows of dimension 0.
  std::vector<int64_t> viewDims = {}, viewStrides = {};
};
struct EwOutput {
  int buf = -1;
  int64_t off = 0;
  ElementType type = ElementType::F32;
  // When not empty, the stream is written to a strided view of the buffer
  // (an operand's place in a concatenate): element [i0, i1, ...] of
  // `viewDims` at byte off + sum(i_d * viewStrides[d]); chunks are whole
  // rows of dimension 0.
  std::vector<int64_t> viewDims = {}, viewStrides = {};
};

// A loop fusion (kernels/elementwise.cpp), as the planner decides it once:
// every fused instruction keeps the stream's row-major element order but
// chains of views of a parameter, each streamed as one strided view of it.
// Emission maps the parameters to their buffers and streams these inputs.
struct LoopFusion {
  const Computation* comp = nullptr;
  std::vector<int64_t> dims;  // the stream's shape: the result's, or a root concatenate's operands'
  int64_t n = 0;              // elements per stream
  // A root concatenate of operands of one shape: the kernel computes the
  // operands and writes each into its place (its views; buf set when lowering).
  bool concatRoot = false;
  std::vector<EwOutput> concatViews;
  // Parameters the elementwise code reads directly, in parameter order:
  // scalars, whole streams, and repeats of `period` elements.
  struct Direct {
    int64_t param = 0;
    bool scalar = false;
    int64_t period = 0;
  };
  std::vector<Direct> direct;
  // Chains of views streamed as strided views of parameter `param`, in
  // instruction order (input.buf set when lowering).
  struct View {
    const Instruction* value = nullptr;
    int64_t param = 0;
    EwInput input;
  };
  std::vector<View> views;
  std::vector<const Instruction*> intermediates;  // views in the middle of chains: never read
};

// An output fusion lowered as one matmul (kernels/matmul_epilogue.cpp): the fused
// computation's one MXU dot (or im2col convolution), and the elementwise
// instructions after it, applied to each C tile in VMEM before the tile is
// written back, so the dot's result never goes to HBM. Inputs are the
// values the epilogue reads besides the dot: tiles of a parameter shaped
// like the result, a vector broadcast along the result's columns (a bias),
// or a scalar.
struct MatmulEpilogue {
  const Instruction* fusion = nullptr;
  const Computation* comp = nullptr;
  const Instruction* dot = nullptr;  // a dot or a convolution
  // Where the matmul's [batch, row, column] lies in the result, in
  // elements: rows and columns are those of each batch (the matmul's may be
  // padded beyond them); a column input's element is batch *
  // columnBatchStride + column (a convolution's groups are column blocks).
  int64_t m = 0, n = 0, batchStride = 0, rowStride = 0, columnBatchStride = 0;
  int64_t k = 0;  // a dot's contraction size (its operands are padded to 128)
  // Elementwise chains that compute a dot's operands (lhs, rhs) inside the
  // fusion from one parameter each, in computation order (empty: the
  // operand is a parameter). The matmul loads the parameter's tiles and
  // applies the chain to each register it pushes (emitOperandPrologue).
  std::vector<const Instruction*> prologue[2];
  const Instruction* prologueSource[2] = {nullptr, nullptr};
  enum Kind { Tile, Column, Scalar };
  struct Input {
    const Instruction* value = nullptr;  // the fused instruction whose value it is
    Kind kind = Tile;
    int buf = -1;  // set when lowering
    ElementType type = ElementType::F32;
  };
  std::vector<Input> inputs;
  int outBuf = -1;
  ElementType outType = ElementType::F32;
  // The root is a physical bitcast (physical-edges' convolutions): the
  // value stored is its operand, written through that operand's layout.
  bool physicalOut = false;
};

// An input fusion lowered as one reduction (kernels/reduce_input.cpp): the fused
// computation's root reduce, whose inputs the elementwise instructions
// before it compute from the streamed parameters (shaped like the reduce's
// inputs) and scalar parameters, vreg by vreg as the rows stream through
// VMEM: the inputs never exist in HBM.
struct ReducePrologue {
  const Computation* comp = nullptr;
  const Instruction* reduce = nullptr;       // the first of `reduces`
  std::vector<const Instruction*> reduces;   // of the same input dims and dimensions; their operands in order
  std::vector<const Instruction*> streamed;  // fused parameters streamed through VMEM
  std::vector<int> streamedBufs;             // their buffers (set when lowering)
  std::vector<std::pair<const Instruction*, int>> scalars;  // scalar fused parameters, buffers
  // Instructions of the reduce input's shape, in order (the prologue), and
  // of its result's shape after it (the epilogue, on each row's result).
  std::vector<const Instruction*> inputSide, epilogue;
  // Multi-output fusions: values of the input's shape written from the
  // same vregs (side outputs), and the values of the reduced leaves.
  std::vector<const Instruction*> sideValues, results;
  std::vector<int> sideBufs;  // the side outputs' buffers (set when lowering)
};

// A fusion lowered as one column-reduction kernel (kernels/column_reduce.cpp): one
// or more reduces whose inputs, viewed as [a, r, b], reduce their middle
// dimension r (leading dimensions when a = 1), computed elementwise from
// parameters streamed through VMEM in blocks of rows; outputs may also be
// elementwise values of the inputs' shape (written from the same vregs)
// and elementwise functions of the reduced values (an epilogue).
struct ColumnReduceFusion {
  const Computation* comp = nullptr;
  int64_t a = 1, r = 1, b = 1;
  std::vector<const Instruction*> reduces;
  std::vector<const Instruction*> streamed;   // fused parameters shaped like the reduce inputs
  std::vector<const Instruction*> hoisted;    // scalar parameters, constants and scalar ops, in order
  std::vector<const Instruction*> inputSide;  // values of the inputs' shape, in order
  std::vector<const Instruction*> epilogue;   // values of the reduced shape, in order
  struct Output {
    const Instruction* value = nullptr;
    int64_t index = 0;  // output of a variadic reduce
    bool side = false;  // of the inputs' shape
  };
  std::vector<Output> outputs;  // the fusion's result leaves, in order
  // Geometry: chunks of columns (of the flattened [a, b] outputs) of
  // chunkV vregs: naFull whole rows of b (aGroups) or nbFull columns of
  // one row of b; blocks of rows rows per DMA.
  bool aGroups = true;
  int64_t chunkV = 1, naFull = 1, nbFull = 1, rows = 1;
};

// A fusion lowered as one row kernel (kernels/rows.cpp): row-wise
// normalizations (softmax, layer norm, RMS norm) whose reductions over the
// trailing dimensions are broadcast back along the rows. Blocks of whole
// rows stream through VMEM (double-buffered); each row is folded once per
// dependent reduction (a pass over its vregs in VMEM) and its outputs are
// computed in a last pass, so nothing but the parameters and the results
// crosses HBM.
struct RowFusion {
  const Computation* comp = nullptr;
  std::vector<int64_t> dims;  // the rows' shape: [k..., r...]
  int64_t k = 1, r = 1;
  enum Class { Scalar, Full, Row, Vec };
  std::map<const Instruction*, Class> cls;
  std::map<const Instruction*, int> level;  // Full/Row: the passes it needs done
  std::vector<const Instruction*> streamed;  // Full parameters
  std::vector<const Instruction*> vectors;   // parameters shaped like one row, broadcast along rows
  std::vector<const Instruction*> scalars;   // Scalar instructions (parameters, constants, their ops), in order
  std::vector<const Instruction*> rowValues;  // Row instructions, in order
  std::vector<const Instruction*> outputs;    // the root's leaves (Full values)
  int passes = 0;
};

// A fusion lowered as one attention kernel (kernels/attention.cpp):
// dot(Q, K) over the last dimensions, elementwise work and reductions over
// the keys (a softmax), then dot(P, V), the score matrix kept in VMEM.
// Q, K, V are parameters [batch..., S|T, 128]; the batch dimensions lead.
struct AttentionFusion {
  const Computation* comp = nullptr;
  const Instruction *q = nullptr, *k = nullptr, *v = nullptr, *dot1 = nullptr, *dot2 = nullptr;
  std::vector<int64_t> dims;  // the scores' shape [batch..., S, T]
  int64_t heads = 1, s = 0, t = 0;
  enum class Class { Scalar, Full, Row };
  std::map<const Instruction*, Class> cls;
  std::map<const Instruction*, int> level;  // Full/Row: the passes it needs done
  std::vector<const Instruction*> scalars;    // Scalar instructions, in order
  std::vector<const Instruction*> rowValues;  // Row instructions, in order
  std::vector<const Instruction*> reduces;    // in order
  int passes = 0;
  // More than 2048 keys: an online softmax over blocks of `keyBlock` keys
  // (running max, sum and output rescaled block by block). The pattern's
  // subtract(x, broadcast(max)) and its exponential give the rescale factor.
  bool online = false;
  int64_t keyBlock = 0;
  const Instruction *maxReduce = nullptr, *sumReduce = nullptr, *shift = nullptr, *exponential = nullptr;
};

// A matmul operand read in place rather than copied to its canonical
// [B, P1, P2] form: per group (batch, P1, P2) the digits of the group's
// index, major to minor, as (count, byte stride) in the operand's buffer.
// A T(8,128) operand's rows are (row blocks, 8) and its columns (column
// tiles, 128): a row block of 8 rows is k contiguous 4 KiB tiles.
// `pairs`: 2-byte elements under T(8,128)(2,1), two rows per 32-bit word;
// the row digits then count pairs of rows and the strides are of words (a
// row block of 8 rows is one 2 KiB tile of 4 pair rows).
struct MatmulView {
  struct Digit {
    int64_t count, stride;
  };
  std::vector<Digit> groups[3];
  bool pairs = false;
};

// emitMatmul's operands: batched [m, k] x [k, n] products, A in aBuf, W in
// wBuf (canonical row-major, or read through a view), the f32 (s32) C in
// cBuf (-1 with an epilogue).
struct MatmulOperands {
  int64_t b = 1, m = 0, k = 0, n = 0;
  int aBuf = -1, wBuf = -1, cBuf = -1;
  ElementType aType = ElementType::F32, wType = ElementType::F32;
  const MatmulView* aView = nullptr;
  const MatmulView* wView = nullptr;
};

// Where emitMatmul stands when a C tile is complete (its step's batch,
// M-tile and N-tile indices in sregs), for the epilogue.
struct MatmulTileSite {
  int64_t tm = 0, tn = 0, m = 0, n = 0;
  int rBatch = -1, rMTile = -1, rNTile = -1;  // indices of the tile
  int rC = -1;                                // VMEM address of the C tile
  int rSlot = -1, rSem = -1;                  // its C slot (0/1) and write-back semaphore
  uint64_t vE = 0, eSlot = 0;                 // VMEM of the two epilogue output slots
  std::vector<uint64_t> vInputs;              // VMEM of each input's tile or column
};

// Elements in one row (dimension 0 fixed) of a view input, and the DMA
// box that gathers `rows` rows of it (kernels/elementwise.cpp).
int64_t viewRowElements(const EwInput& input);
Box viewBox(const EwInput& input, int64_t rows);
int64_t viewRowElements(const EwOutput& output);
Box viewBox(const EwOutput& output, int64_t rows);

// A convolution in canonical terms (kernels/conv.cpp): spatial vectors are
// indexed by spatial number; "padded" is the input extent after lhs
// dilation and (possibly negative) padding.
struct ConvGeometry {
  size_t rank = 0;  // spatial dimensions
  int64_t batch = 1, inFeatures = 1, outFeatures = 1;
  int64_t featureGroups = 1, batchGroups = 1, groups = 1;
  int64_t inPerGroup = 1, outPerGroup = 1, outBatch = 1;
  std::vector<int64_t> inSize, kSize, outSize, padded, stride, padLow, lhsDil, rhsDil;
  std::vector<bool> reversal;
  int64_t taps = 1, outPositions = 1;
  ElementType inType = ElementType::F32, kType = ElementType::F32, outType = ElementType::F32;

  // The kernel's spatial taps as a copy's source dimensions, appended to
  // `counts` and `strides` (`kst`: the kernel's byte strides): a reversed
  // dimension is read backwards from its last tap; returns the offset of
  // the first tap read.
  int64_t appendKernelTaps(const std::vector<int64_t>& kst,
                           const std::vector<int64_t>& kernelSpatialDimensions, std::vector<int64_t>& counts,
                           std::vector<int64_t>& strides) const;
};

// The plan of a streamed depthwise convolution (kernels/conv_depthwise.cpp):
// the padded image of one batch element in VMEM, each row as `phases`
// (the last dimension's stride) interleaved runs of positions, `pack`
// positions side by side in the 128 lanes when the channels are fewer; byte
// sizes and VMEM offsets from 0.
struct DepthwisePlan {
  int64_t N = 1, H = 1, W = 1, C = 1, KH = 1, KW = 1, sH = 1, sW = 1, dH = 1, dW = 1;
  int64_t padTop = 0, padLeft = 0, Hp = 1, Wp = 1, Ho = 1, Wo = 1;
  int64_t pack = 1, cpos = 128, cBlocks = 1;  // positions per lane row, lanes per position, 128-lane blocks
  int64_t Q = 1;                              // positions per phase run
  int64_t blocks = 1, unroll = 1, groups = 1;  // 8-sublane position blocks per row, per loop, loops
  int64_t rows = 1;                            // output rows per loop iteration
  int64_t bandRows = 1, bands = 1;            // output rows per band, bands
  bool zero = false, weightsInRegisters = true;
  uint64_t rowIn = 0, rowOut = 0, vW = 0, wRow = 0, vImg = 0, vOut = 0, end = 0;
  std::vector<uint64_t> vColumns;
};

// The plan of an implicit-GEMM convolution (kernels/conv_implicit.cpp), in
// elements unless named bytes; VMEM offsets from 0.
struct ImplicitConvPlan {
  int64_t H = 1, W = 1, kh = 1, kw = 1, sy = 1, sx = 1, rdy = 1, padTop = 0, padLeft = 0, Hp = 1, Hout = 1,
          Wout = 1, C = 1, O = 1;
  int64_t P = 1;          // output positions per GEMM row
  int64_t run = 0;        // elements of one kernel row's window run ((P - 1) * sx + kw) * C
  int64_t KS = 1, KT = 1; // 128-wide K slices per run, K tiles (kh * KS * passes)
  // bf16 MXU passes per K tile (f32 at HIGH: 3, HIGHEST: 6, as emitMatmul's):
  // the GEMM's K tiles are the weights' kh * KS tiles times the passes.
  int64_t passes = 1;
  // 3-D and larger windows: the box holds the image's Dp padded planes
  // every Hpb rows (stacked like B images; the spatial dimensions before
  // the rows flattened row-major into planes); the GEMM computes planes 0
  // .. B - 1 = outPlane.back() and K tiles cover kd x kh x KS. tapPlane[dz]
  // is plane tap dz's stacked plane, outPlane[z] output plane z's (3-D: dz
  // x rhs dilation, z x stride).
  int64_t kd = 1, Dp = 1, Dout = 1;
  std::vector<int64_t> tapPlane{0}, outPlane{0};
  int64_t NT = 1, NP = 128;
  int64_t Wpv = 1, RS = 1;  // box width (positions), box row (elements)
  int64_t rowPairs = 1;     // GEMM rows per output row
  int64_t G = 4, J = 1, rounds = 1, cpp = 1;  // MXUs, jobs per chunk, rounds and chunks per period
  int64_t R = 2, CH = 1, periods = 1, D = 2;  // blocks per chunk, chunks per image, periods, pop lag
  int64_t U = 2;  // blocks per pipelined iteration
  int64_t B = 1, Hpb = 1, items = 1;  // images per item, box rows per image, items
  int64_t pairBytes = 0;
  uint64_t vW = 0, vX = 0, xSlot = 0, vAcc = 0, accPeriod = 0, vE = 0, eSlot = 0, end = 0;
  std::vector<uint64_t> vIn, inSlot;  // per epilogue input: staging (tiles, two slots) or columns
  // One image (batch 1): its rows stream in as `inBands` DMAs of
  // `inBandRows` rows that periods wait for as they need them, and the
  // result leaves in bands of `outBandRows` rows as periods finish them.
  bool banded = false;
  int64_t inBands = 1, inBandRows = 1, outBands = 1, outBandRows = 1;
  // Grouped convolutions: the kernel runs once per part (`part` of
  // `parts`), over C = gpp * Cg input and O = gpp * Og output channels
  // (gpp feature groups, their weights block-diagonal in W').
  int64_t parts = 1, part = 0, gpp = 1, Cg = 1, Og = 1;
  // More parts than kernel copies are worth: one copy loops over them
  // (`part` 0, each part's offsets added at run time).
  bool loopParts = false;
};

// The plan of a depthwise convolution's filter gradient
// (kernels/conv_filter_grad.cpp): channel blocks of 128 lanes, the input
// image's padded box [Hp, Wp, 128] and the gradient's [KH, blocks x 8,
// 128] in VMEM (two slots each), taps in groups of accumulators, the result
// rows [taps, CB x 128]; byte sizes and VMEM offsets from 0.
struct FilterGradPlan {
  int64_t N = 1, C = 1, CB = 1;  // images summed over, channels, 128-lane blocks
  int64_t H = 1, W = 1, Hp = 1, Wp = 1, padTop = 0, padLeft = 0;
  int64_t KH = 1, KW = 1, OH = 1, OW = 1;  // the gradient's extent, the taps
  int64_t sH = 1, sW = 1, dH = 1, dW = 1;  // the taps' step, the positions' step
  int64_t tapGroups = 1, tapsPerGroup = 1, blocks = 1;
  uint64_t rowX = 0, rowY = 0, rowOut = 0, xSlot = 0, ySlot = 0, vX = 0, vY = 0, vOut = 0, end = 0;
};

// One pass of an fft (kernels/fft.cpp): the 1-D transform of the middle
// dimension of src viewed as [outer, n, inner], written to dst as
// [outer, dstRows, inner] in dstType.
struct FftPass {
  int64_t outer = 1, n = 1, inner = 1, dstRows = 1;
  int src = -1, dst = -1;
  ElementType srcType = ElementType::C128, dstType = ElementType::C128;
  bool inverse = false;
};

// Returns the registers a kernel helper took when it ends.
// Registers of the pool rotate (the scheduler can overlap independent
// rows) for the guard's lifetime, on every return path.
class RotatingRegs {
 public:
  explicit RotatingRegs(RegPool& pool) : pool_(pool) { pool_.setRotating(true); }
  ~RotatingRegs() { pool_.setRotating(false); }
  RotatingRegs(const RotatingRegs&) = delete;
  RotatingRegs& operator=(const RotatingRegs&) = delete;

 private:
  RegPool& pool_;
};

class PoolGuard {
 public:
  explicit PoolGuard(std::initializer_list<RegPool*> pools) {
    for (RegPool* p : pools) saved_.push_back({p, p->save()});
  }
  ~PoolGuard() {
    for (auto& [p, s] : saved_) p->restore(s);
  }

 private:
  std::vector<std::pair<RegPool*, std::vector<bool>>> saved_;
};

// Product of the sizes of dimensions `dims` of `s`.
inline int64_t dimsProduct(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= s.dimension(d);
  return p;
}

// A dot as b batched [m, k] x [k, n] products: the free (neither batch nor
// contracting) dimensions of each operand, in order, and the four sizes.
struct DotGeometry {
  std::vector<int64_t> lhsFree, rhsFree;
  int64_t b = 1, m = 1, k = 1, n = 1;
};
DotGeometry dotGeometry(const Instruction& dot);

// Custom-call targets that are the identity or a full <-> shard copy on one
// device (kernels/misc.cpp): they only move elements.
bool isIdentityCustomCallTarget(const std::string& target);
// AwsNeuronGelu(Backward) and the cuBLAS gemm targets (kernels/misc.cpp).
bool isGeluCustomCallTarget(const std::string& target);
bool isGemmCustomCallTarget(const std::string& target);

class Lowerer : private LoweringContext {
 public:
  Lowerer(const hlo::Module& m, const target::TargetDesc& t, const CodegenOptions& o, DiagnosticEngine& d)
      : LoweringContext(m, t, o, d) {
    e_.setTarget(&t);
    e_.setKeepText(o.schedule == llo::ScheduleMode::None);
    // An op that does not parse or check is reported at the HLO instruction
    // whose kernel emits it.
    e_.setErrorHandler([this](const std::string& msg) {
      if (emitting_) {
        fail(*emitting_, msg);
      } else {
        diags_.error(msg);
        failed_ = true;
      }
    });
  }

  std::optional<CodegenResult> run();
  void setCodeSink(std::function<bool(EmittedCode&)> sink) { e_.setSink(std::move(sink)); }
  // Which kernel a fusion instruction becomes: the first fusion kind of the
  // registry that matches (kernels/registry.cpp).
  FusionLowering classifyFusion(const Instruction& in) const;

 private:
  // Emitters local to one kernels/ file that split a long kernel into its
  // phases, sharing the kernel's state in one object; they work on the
  // lowering state as the kernel's own member functions do.
  friend class KernelPhases;      // kernels/kernel_phases.h
  friend class ConvLowering;            // kernels/conv.cpp
  friend class DepthwiseRowEmitter;     // kernels/conv.cpp
  friend class DepthwiseStreamEmitter;  // kernels/conv_depthwise.cpp
  friend class ImplicitConvEmitter;     // kernels/conv_implicit.cpp
  friend class FilterGradEmitter;       // kernels/conv_filter_grad.cpp
  friend class RngBitsEmitter;    // misc.cpp
  friend class SortEmitter;       // sort.cpp
  friend class ScatterEmitter;    // gather_scatter.cpp
  friend class FftPassEmitter;    // fft.cpp
  friend class AttentionEmitter;  // attention.cpp
  friend class MatmulEmitter;     // kernels/matmul.cpp
  // (issue 14 point 2: the long row, reduction and vector-matmul kernels.)
  friend class SegmentReduceEmitter;  // reduce.cpp
  friend class ColumnReduceEmitter;   // column_reduce.cpp
  friend class RowFusionEmitter;      // rows.cpp
  friend class StreamedRowEmitter;    // rows_long.cpp
  friend class VectorMatmulEmitter;   // wide.cpp
  friend class RowValueEvaluator;     // kernels/row_values.h

  // ---- planning ----
  bool plan(const Computation& c, int region);
  bool planInstruction(const Instruction& in, int region);
  bool planInline(const Instruction& in, const Computation* callee, int region);
  bool planResidentInline(const Instruction& in, int region);
  bool planWhile(const Instruction& in, int region);
  bool planConditional(const Instruction& in, int region);
  void use(int buf, int region);
  void useLeaves(const Instruction* in, int region) {
    for (int b : leaves_[in]) use(b, region);
  }
  int newBuf(BufKind kind, const Shape& s);
  void defineNew(const Instruction& in);
  // Loop fusions: whether `in` is one, and its plan into `out` (when not null).
  bool loopFusion(const Instruction& in, LoopFusion* out) const;
  void planLoopFusion(const Instruction& in, const Shape& streamShape, bool concatRoot,
                      std::vector<EwOutput> concatViews, LoopFusion& f) const;
  int64_t streamPeriod(const Instruction& param, int64_t n) const;
  bool streamView(const Instruction& i, const std::vector<int64_t>& resultDims, EwInput* out) const;
  const Instruction* composeView(const Instruction& i, std::vector<int64_t>& strides, int64_t& offset,
                                 int depth) const;
  bool viewIntermediate(const Instruction& i, const Computation& c, const std::vector<int64_t>& fusionDims) const;
  bool concatOutputViews(const Instruction& root, std::vector<EwOutput>* out) const;
  bool checkTypes(const Instruction& in);
  // An unfused elementwise instruction, or one inside a loop fusion, that
  // the op table does not define on its types is an error when planned.
  bool checkElementwiseLegal(const Instruction& in, const KernelEmitter* kind);
  std::map<size_t, int> donatedArgumentsByResult(const Computation& entry);
  // The steps of run(): the entry's buffers, the heap, the checks of the
  // totals, the result copies and the buffer declarations of the text.
  bool bindEntryParameters(const Computation& entry);
  void placeResults(const Computation& entry);
  uint64_t placeHeap();
  void emitResultCopies();
  bool checkTotals(uint64_t total);
  std::string bufferDeclarations() const;

  // ---- emission ----
  bool emitComputation(const Computation& c);
  bool emitInstruction(const Instruction& in);
  // The kernel kinds (kernel_emitter.h), in the order the planner tries
  // them (kernels/registry.cpp). The planner records the first that takes
  // an instruction, with its plan, in decisions_ (decideKernel); emission
  // runs the recorded kind from that plan (emitKernel).
  static const std::vector<KernelEmitter>& kernelEmitters();
  KernelDecision decideKernel(const Instruction& in) const;
  bool emitKernel(const Instruction& in);
  // llo-gen refuses a program whose peak HBM (arguments, results,
  // constants, kernel scratch and `temporaries`) passes the target's.
  bool checkHbmCapacity(uint64_t temporaries);
  bool fail(const Instruction& in, const std::string& msg) {
    diags_.error(in.location(), msg);
    failed_ = true;
    return false;
  }
  // A buffer's memory operand at byte address `addr` (a register holding
  // base(buf) + offset): `heap[s3]` / `arg0[s3]` in HBM, `[s3]` in VMEM.
  std::string memRef(int buf, const std::string& addr) const {
    const Buf& b = bufs_[buf];
    if (b.kind == BufKind::Vmem) return fmt::format("[{}]", addr);
    return fmt::format("{}[{}]", b.kind == BufKind::Heap ? "heap" : b.name, addr);
  }
  // The DMA mnemonic for `dir` ("h2v", "v2h", "h2h", "h2s", "s2h") whose
  // HBM side(s) are these buffers (for h2h: destination, then source): a
  // VMEM-resident buffer turns its `h` into `v`.
  std::string dmaOp(const char* dir, int buf, int srcBuf = -1) const;
  int64_t base(int buf) const {
    BufKind k = bufs_[buf].kind;
    return k == BufKind::Heap || k == BufKind::Vmem ? static_cast<int64_t>(bufs_[buf].offset) : 0;
  }
  int sreg();
  std::string S(int r) const { return sregs_.name(r); }
  std::string V(int r) const { return vregs_.name(r); }
  std::string V(VReg r) const { return vregs_.name(r.r); }
  std::string H(VReg r) const { return vregs_.name(r.hi); }  // high word of a pair
  std::string M(int r) const { return masks_.name(r); }
  void beginKernel(const Instruction& in, const std::string& kind);
  void endKernel(double flops, uint64_t hbmBytes, uint64_t vmemBytes);
  uint64_t vmemBudget() const {
    return static_cast<uint64_t>(static_cast<double>(target_.memory.vmemBytes) * options_.vmemFraction);
  }

  // Kernels.
  void emitCopy(int dstBuf, int64_t dstOff, int srcBuf, int64_t srcOff, std::vector<int64_t> counts,
                std::vector<int64_t> dstStrides, std::vector<int64_t> srcStrides, int esize, int srcDynReg = -1,
                int dstDynReg = -1);
  int loadScalar(int buf, int64_t off, ElementType t, int smemSlot);
  // The scalar buffer's element in every lane of a new register.
  VReg splatScalar(int buf, ElementType type, int smemSlot);
  using Body = std::function<std::vector<VReg>(const std::vector<VReg>&)>;
  bool emitElementwise(int64_t n, const std::vector<EwInput>& ins, const std::vector<EwOutput>& outs, const Body& body);
  VReg hoistStreamScalars(const std::vector<EwInput>& ins, std::vector<VReg>& hoisted);
  bool emitReduceRows(const Instruction& in, int64_t r, int64_t k, const std::vector<int>& inBufs,
                      const std::vector<int>& initBufs, const std::vector<int>& outBufs, const Computation& reducer);
  void emitChunkDma(bool load, int buf, int64_t voff, int es, int64_t c, int64_t tail, int64_t nChunks, int rA, int rC);
  void loadReduceInits(const std::vector<int>& initBufs, const std::vector<int64_t>* initSlot, std::vector<VReg>& init,
                       bool& anyPair, bool& anyQuad);
  bool foldReduceVreg(const Computation& reducer, const std::vector<int>& inBufs, const std::vector<int64_t>* resultSlot,
                      const int* rOff, const int* rX, const std::vector<int64_t>& accOff,
                      const std::vector<int64_t>& xOff);
  bool emitReduceSegments(const Instruction& in, int64_t k, int64_t r, const std::vector<int>& inBufs,
                          const std::vector<int>& initBufs, const std::vector<int>& outBufs,
                          const Computation& reducer, const ReducePrologue* prologue = nullptr);
  // Evaluates the instructions of `c` in order on registers, up to `stop`:
  // those `val` has no value for yet except parameters; a broadcast is its
  // scalar operand's splat. New registers are appended to `owned`.
  bool evalOnRegisters(const Computation& c, const Instruction* stop, std::map<const Instruction*, VReg>& val,
                       std::vector<VReg>& owned);
  // One fused instruction on registers: broadcasts (of values already
  // shaped like the registers' elements), reshapes and bitcasts rename their
  // operand's register; the others are lowered, their register appended to
  // `owned`.
  bool evalFusedInstruction(const Instruction& i, std::map<const Instruction*, VReg>& val,
                            std::vector<VReg>& owned);
  // VMEM-resident fusions (kernels/resident.cpp): fusions no streaming kernel
  // covers, lowered instruction by instruction inside one kernel, their
  // intermediates in the VMEM above the per-kernel budget.
  void planResidentFusion(const Instruction& in, size_t firstBuf);
  bool lowerResidentFusion(const Instruction& in);
  // VMEM bytes a kernel may use: all of it, or up to the resident
  // intermediates while a resident fusion is emitted.
  uint64_t vmemTop() const { return residentDepth_ > 0 ? residentBase() : target_.memory.vmemBytes; }
  uint64_t residentBase() const { return alignUp(vmemBudget(), 512); }
  // Input fusions (kernels/reduce_input.cpp).
  bool inputFusion(const Instruction& in, ReducePrologue* out) const;
  bool lowerInputFusion(const Instruction& in, ReducePrologue p);
  std::optional<std::vector<VReg>> evalReducePrologue(const ReducePrologue& p, const std::vector<VReg>& loaded,
                                                      const std::map<const Instruction*, VReg>& scalars);
  // The values of an input fusion's reduced result leaves from the folded
  // accumulator (its epilogue evaluated); new registers go to `owned`.
  std::optional<std::vector<VReg>> evalReduceEpilogue(const ReducePrologue& p, const std::vector<VReg>& acc,
                                                      const std::map<const Instruction*, VReg>& scalars,
                                                      std::vector<VReg>& owned);
  bool columnReduceFusion(const Instruction& in, ColumnReduceFusion* out) const;
  bool lowerColumnReduceFusion(const Instruction& in, const ColumnReduceFusion& f);
  // Row fusions (kernels/rows.cpp).
  bool rowFusion(const Instruction& in, RowFusion* out) const;
  bool lowerRowFusion(const Instruction& in, const RowFusion& f);
  // Rows that do not fit VMEM: streamed in segments pass by pass (kernels/rows_long.cpp).
  bool rowFusionFitsVmem(const RowFusion& f) const;
  int64_t rowSegmentVregs(const RowFusion& f) const;  // 0: not even one vreg per segment fits
  bool lowerRowFusionStreamed(const Instruction& in, const RowFusion& f);
  // Attention fusions (kernels/attention.cpp).
  bool attentionFusion(const Instruction& in, AttentionFusion* out) const;
  bool lowerAttentionFusion(const Instruction& in, const AttentionFusion& f);
  int canonicalDotOperand(const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                          const std::vector<int64_t>& g2, int64_t p1, int64_t p2);
  // A dot operand read in place by the matmul (the buffer, with `view` set)
  // when its digits let every tile be one DMA box, else canonicalDotOperand.
  int matmulOperand(const Instruction* op, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                    const std::vector<int64_t>& g2, int64_t p1, int64_t p2, bool rhs, MatmulView* view,
                    bool* viewed);
  bool emitMatmul(const Instruction& in, int64_t b, int64_t m, int64_t k, int64_t n, int aBuf, ElementType aType,
                  int wBuf, ElementType wType, int cBuf, int passes, const MatmulEpilogue* epilogue = nullptr,
                  const MatmulView* aView = nullptr, const MatmulView* wView = nullptr);
  // Output fusions (kernels/matmul_epilogue.cpp).
  bool matmulEpilogueFusion(const Instruction& in, MatmulEpilogue* out) const;
  bool lowerMatmulEpilogueFusion(const Instruction& in, MatmulEpilogue e);
  uint64_t matmulEpilogueBytes(const MatmulEpilogue& e, int64_t tm, int64_t tn) const;
  void emitMatmulEpilogue(const Instruction& in, const MatmulEpilogue& e, const MatmulTileSite& site);
  bool emitEpilogueStep(const MatmulEpilogue& e, int64_t tn, int64_t unroll, int rC, int rE, const std::vector<int>& rIn,
                        const std::map<const Instruction*, VReg>& scalars,
                        const std::map<const Instruction*, size_t>& lastUse);
  // Whether a depthwise convolution (vector unit) can run this epilogue: no tile inputs.
  static bool depthwiseEpilogue(const MatmulEpilogue& e);
  // Replaces x (the loaded tile register of operand `operand`'s source)
  // with the operand's value; where `mask` >= 0 is clear, with 0 (K padding).
  bool emitOperandPrologue(const MatmulEpilogue& e, int operand, VReg x, int mask);
  // gen(false) where the register is below `threshold`, gen(true) from
  // there on: full tiles and the edge tile.
  void emitEdgeBranch(int reg, int64_t threshold, const std::function<void(bool)>& gen);
  // body(full) for tiles below fullTiles, body(rest) for the edge one (only
  // one of them when there is no edge or no full tile).
  void emitByTileExtent(int rIdx, int64_t fullTiles, int64_t full, int64_t rest,
                        const std::function<void(int64_t)>& body);
  // bf16 MXU passes for a dot or convolution with these operand types:
  // precision_config, or the --f32-dot-precision override, for f32.
  int mxuPasses(const Instruction& in, ElementType lhsType, ElementType rhsType) const;
  bool emitConvMatmul(const Instruction& in, const ConvGeometry& g, int xBuf, int passes,
                      const MatmulEpilogue* epilogue);
  bool emitDepthwiseConv(const Instruction& in, const ConvGeometry& g, int xBuf, const MatmulEpilogue* epilogue);
  // Whether a depthwise convolution streams whole images through VMEM, and
  // its plan; the kernel (kernels/conv_depthwise.cpp).
  bool depthwisePlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue,
                     DepthwisePlan& p) const;
  bool emitDepthwiseStream(const Instruction& in, const ConvGeometry& g, const DepthwisePlan& p,
                           const MatmulEpilogue* epilogue);
  // Whether the convolution runs as an implicit GEMM, and its plan.
  bool implicitConvPlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue, int passes,
                        ImplicitConvPlan& p) const;
  bool implicitConvLayout(const ConvGeometry& g, const MatmulEpilogue* epilogue, ImplicitConvPlan& p) const;
  bool implicitConvRegisters(const MatmulEpilogue* epilogue, ImplicitConvPlan& p) const;
  bool filterGradPlan(const Instruction& in, const ConvGeometry& g, const MatmulEpilogue* epilogue,
                      FilterGradPlan& p) const;
  bool emitFilterGrad(const Instruction& in, const ConvGeometry& g, const FilterGradPlan& p);
  bool emitImplicitConv(const Instruction& in, const ConvGeometry& g, const ImplicitConvPlan& p,
                        const MatmulEpilogue* epilogue);

  // Vector code.
  VReg valloc(ElementType t);
  void vfree(VReg r) {
    if (r.r >= 0) vregs_.put(r.r);
    if (r.hi >= 0) vregs_.put(r.hi);
    if (r.im >= 0) vregs_.put(r.im);
    if (r.imh >= 0) vregs_.put(r.imh);
  }
  int malloc_();
  VReg vload(ElementType t, const std::string& addr, const std::string& extra = "");
  void vstore(VReg v, ElementType t, const std::string& addr, const std::string& extra = "");
  VReg vconst(ElementType t, uint32_t bits);
  // Ends the kernel of a dot with an empty result (nothing to do) or an
  // empty contraction (zeros) and returns whether that worked; nullopt for
  // every other dot.
  std::optional<bool> finishTrivialDot(const DotGeometry& geo, int dst, ElementType ot);
  // x := the number of set bits in each 32-bit lane of x; with `smearTopBit`
  // the top set bit is first copied into every lower bit (count-leading-
  // zeros is then the width minus the count). t is scratch.
  void emitLanePopcount(VReg x, VReg t, bool smearTopBit);
  // A fresh copy of v (both registers of a pair).
  VReg vcopy(VReg v, ElementType t);
  // Loads or stores one vreg of `t` at VMEM `addr` (pairs: both words).
  void vloadInto(VReg d, ElementType t, const std::string& addr, const std::string& extra = "");
  // `preset`: instructions whose values are given (not computed, not freed).
  bool lowerComputation(const Computation& c, const std::vector<VReg>& params, std::vector<VReg>& out,
                        const std::map<const Instruction*, VReg>* preset = nullptr);
  // Output `index` of a reducer whose root is a tuple, computing only what
  // it needs; parameter k is loaded by loadParam(k) where first used and
  // freed after its last use (so any number of operands fits the registers).
  std::optional<VReg> lowerReducerOutput(const Computation& c, int64_t index,
                                         const std::function<VReg(int64_t)>& loadParam);
  // An elementwise op: its cell in the op table (op_table.h) for the types
  // of its operands (ops) and result is one instruction, emitted here, or a
  // composed expansion, called through expansionFn; an empty cell (or a
  // restriction that fails) is an error naming the op and the type.
  std::optional<VReg> lowerOp(const Instruction& in, const std::vector<VReg>& ops);
  using ExpansionFn = std::optional<VReg> (Lowerer::*)(const Instruction&, const std::vector<VReg>&);
  static ExpansionFn expansionFn(Expansion e);
  // The composed expansions (lower.cpp: any type class and 32-bit lanes).
  std::optional<VReg> moveValue(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> mapComputation(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneConstant(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> reducePrecisionOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> integerPowerOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> imagOfReal(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneConvert(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneBitcastConvert(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneMinMax(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneDivRem(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneNot(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneNegate(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneAbs(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneSign(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneSelect(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneClamp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneMulhi(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneShift(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> lanePopcntClz(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneCompare(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneErf(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneAsinAcos(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneAtan(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneInverseHyperbolic(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneAtan2(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneTan(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneExpm1(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneLog1p(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneSinhCosh(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneCbrt(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneIsFinite(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> laneRoundAfz(const Instruction& in, const std::vector<VReg>& ops);
  // (kernels/wide.cpp: s64, u64, f64 pairs)
  std::optional<VReg> pairConstant(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairConvert(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairAddSubOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairNegateAbs(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairMinMax(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairClamp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairCompareOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairSelectOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairIsFinite(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairIntSign(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairPopcntClz(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> pairImag(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> expF64Op(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> f64LibraryOp(const Instruction& in, const std::vector<VReg>& ops);
  // (kernels/complex.cpp: c64, c128)
  std::optional<VReg> complexConstantOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexConvertOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexAddSubOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexNegateOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexRealOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexImagOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexFromPartsOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexCompareOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexSelectOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> complexMathOp(const Instruction& in, const std::vector<VReg>& ops);
  std::optional<VReg> unsupportedOp(const Instruction& in, ElementType ot);  // fails, naming the op and type
  VReg flipSignBit(VReg a);
  VReg truncTowardZero(VReg a);
  // kernels/wide.cpp: s64/u64/f64 values in register pairs.
  VReg pairSelect(int mask, VReg a, VReg b, ElementType t);
  VReg pairZero(ElementType t);
  VReg pairRow(const char* mnemonic, VReg a, VReg b, ElementType t);  // a pair row once per result word
  VReg pairRowUnary(const char* mnemonic, VReg a, ElementType t);
  VReg pairFrom32(VReg x, ElementType to);                   // s64/u64/f64 from a 32-bit register value
  VReg pairAddSub(bool add, VReg a, VReg b, ElementType t);  // 64-bit integer a + b or a - b
  // base ^ exponent of an integer type t (32-bit register forms or pairs),
  // as the interpreter's intPow: wrapping square-and-multiply over every
  // exponent bit; a negative signed exponent gives 0 except for bases 1, -1.
  VReg integerPower(VReg base, VReg exponent, ElementType t);
  bool lowerWideDot(const Instruction& in);
  // validBuf (complex only, or -1): an s32 [k, n] matrix shared by every
  // batch; a product whose entry is 0 is skipped (a convolution's padding,
  // which the interpreter never multiplies).
  bool emitVectorUnitMatmul(const Instruction& in, int64_t b, int64_t m, int64_t k, int64_t n, int aBuf,
                      int64_t aBatches, int wBuf, int cBuf, ElementType t, int validBuf = -1);
  // validX (complex only, or -1): s32 [padded..], 1 where X holds an input
  // element, 0 in padding and dilation holes; products with those are skipped.
  bool emitWideConv(const Instruction& in, const ConvGeometry& g, int xBuf, int validX = -1);
  // A kernel-local copy of `buf` (shape s) converted to `to` as the
  // interpreter converts (HLO's convert; complex to real types takes the
  // real part). Inside a kernel the caller began; errors name `in`.
  int convertedCopy(const Instruction& in, int buf, const Shape& s, ElementType to);
  // A dot or convolution whose operands are not of the type it computes in
  // (dotComputeType: 64-bit or complex operands of a narrower result, or
  // operands of another kind than the result): its operands are converted
  // to that type, then it is lowered as the op of those.
  bool lowerThroughComputeType(const Instruction& in, ElementType computeType);
  // `buf` (shape s) in the accumulator type `acc` of a vector-unit dot or
  // convolution: itself when already of that type, else a converted copy
  // (pair types by convertedCopy; s32 by sign- or zero-extension, which
  // wraps like the interpreter's integer arithmetic).
  int accumulatorCopy(const Instruction& in, int buf, const Shape& s, ElementType acc);
  int pairCompare(const char* dir, ElementType t, VReg a, VReg b);  // mask register
  int loadScalarPair(int buf, int64_t off, int smemSlot, int& hiReg);
  // kernels/complex.cpp: the vector register form of complex values.
  bool checkComplexTypes(const Instruction& in, const Shape& complexLeaf);
  VReg hoistComplexScalar(int buf, int64_t off, ElementType t, int& smemSlot);
  void complexLoadStore(bool load, VReg v, ElementType t, const std::string& addr, const std::string& extra);
  VReg complexAdd(VReg a, VReg b, bool subtract = false);  // as std::complex: part-wise
  VReg complexMultiply(VReg a, VReg b);  // XLA's four products, in f32 (c64) or f64 pair (c128) ops
  VReg complexConstant(const Instruction& in);
  VReg complexEquals(VReg a, VReg b, bool eq);  // pred: a == b (eq) or a != b
  VReg complexSelect(VReg pred, VReg a, VReg b, ElementType rt);
  std::optional<VReg> complexConvert(const Instruction& in, VReg x);
  // Complex library math (multiply, divide, power, abs, sign, the
  // transcendentals) expanded into chip instructions, one expansion generic
  // over the part type: f32 (c64) or f64 pairs (c128). kernels/complex.cpp.
  struct ComplexMath;
  // fft: the c128 twiddle at SMEM [rAddr] (four words, through the scalar
  // registers rw) in every lane of a new register.
  VReg splatTwiddle(const std::vector<int>& rw, int rAddr);
  // `count` registers' worth of VMEM elements from `from` to `to`: body gets
  // the two address registers, which then step by fromStep and toStep.
  void fftFlatLoop(int64_t count, int64_t from, int64_t fromStep, int64_t to, int64_t toStep,
                   const std::function<void(int, int)>& body);
  // Calls chunk(rows, transforms, rP, rQ) over an fft's outer x inner
  // transforms: pc outer rows at a time when qc covers all inner ones, else
  // qc inner ones of each outer row; rP and rQ hold the chunk's indices.
  void emitFftChunks(int64_t outer, int64_t inner, int64_t pc, int64_t qc,
                     const std::function<void(int64_t, int64_t, int, int)>& chunk);
  // `regs` registers of `from` elements at VMEM vFrom, as c128 at vTo.
  void fftWidenToC128(ElementType from, int64_t regs, int64_t vFrom, int64_t vTo);
  // One term of a direct DFT: acc += x[rX] * twiddle at SMEM [rM], acc
  // keeping its registers.
  void dftTerm(VReg acc, const std::vector<int>& rw, int rM, int rX);
  VReg complexFromReal(VReg x, ElementType to);
  // lo = the 64-bit index lo:hi saturated to s32 (it clamps to the same
  // start index), read as u64 or s64: the interpreter reads u64 scalar
  // start indices as unsigned, gather/scatter index arrays as s64.
  void saturateToS32(int lo, int hi, bool asUnsigned);
  VReg toMask01(int mask);  // pred vreg from a mask
  VReg binop(const char* mnemonic, VReg a, const std::string& b, ElementType t);
  VReg unop(const char* mnemonic, VReg a, ElementType t);
  // Brings r back to its type's register form after arithmetic: rounds
  // narrow floats, wraps narrow integers (in place; returns r).
  VReg normalize(VReg r);
  // A convolution's f32 accumulator as its unfused kernel stores it: in
  // the convolution's own type `t` (a new register, kept in `owned`), or
  // itself when t is f32. Output fusions' epilogues start from this value.
  VReg convValueInOwnType(VReg acc, ElementType t, std::vector<VReg>& owned);
  // Library math from chip instructions, in f32 lanes (kernels/math.cpp).
  VReg hornerF32(const float* c, int n, VReg v, ElementType rt);
  VReg oddSeriesF32(VReg t, const float* c, int n, ElementType rt);
  void copySignF32(VReg r, VReg x, ElementType rt);
  void multipleOfHalfPiMinusF32(VReg d, VReg q, int k);
  // The scalar part of a streaming fusion (row or attention kernel), in
  // order, into registers once per kernel: fused scalar parameters loaded
  // and splatted, broadcasts of them aliased, their ops lowered.
  bool hoistScalars(const Instruction& fusion, const std::vector<const Instruction*>& scalars,
                    std::map<const Instruction*, VReg>& hoisted);
  VReg expandErfF32(VReg x, hlo::ElementType rt);
  VReg expandLog1pF32(VReg x, ElementType rt);
  VReg atanOfNonNegativeF32(VReg a, bool onlyToOne, ElementType rt);
  VReg expandAtanF32(VReg x, ElementType rt);
  VReg expandAtan2F32(VReg y, VReg x, ElementType rt);
  VReg expandAsinAcosF32(VReg x, bool acos, ElementType rt);
  VReg expandInverseHyperbolicF32(hlo::Opcode op, VReg x, ElementType rt);
  VReg expandExpm1F32(VReg x, ElementType rt);
  // f64 library math from the f64 pair rows and 32-bit integer ops (kernels/math.cpp).
  VReg f64Const(double c);
  VReg f64Op(const char* mnemonic, VReg a, VReg b);  // one pair row, both words
  VReg expandExpF64(VReg x);
  // The other f64 library math (kernels/math_f64.cpp); nullopt: not expanded there.
  std::optional<VReg> expandMathF64(hlo::Opcode op, const std::vector<VReg>& ops);
  friend class PairMath;  // kernels/math_f64.cpp's builder of f64 sequences
  // One f64 library function (exp, expm1, log, log1p, sqrt, sin, cos, cosh,
  // sinh; atan2 with b) as the f64 lowering computes it (kernels/wide.cpp);
  // the c128 expansions call the real functions only through here.
  VReg f64Math(hlo::Opcode op, VReg a, std::optional<VReg> b = std::nullopt);
  // {cosh x, sinh x}, sinh keeping its relative precision near 0.
  std::pair<VReg, VReg> coshSinhF32(VReg x, ElementType rt);
  // Exact 32-bit integer a / b (quotient) or a % b, XLA's rules.
  VReg divide32(VReg a, VReg b, bool isSigned, bool quotient, ElementType t);
  // Scalar register with the f32 bits of the narrow float whose code is in
  // the low bits of `code` (replaced).
  void widenScalarFloat(int code, ElementType t);

  // Instruction lowerings.
  bool lowerElementwiseInstr(const Instruction& in);
  bool lowerLoopFusion(const Instruction& in, const LoopFusion& f);
  bool lowerBroadcast(const Instruction& in);
  bool lowerTranspose(const Instruction& in);
  bool lowerSlice(const Instruction& in);
  bool lowerConcatenate(const Instruction& in);
  bool lowerPad(const Instruction& in);
  bool lowerReverse(const Instruction& in);
  bool lowerIota(const Instruction& in);
  bool lowerReduce(const Instruction& in);
  bool lowerDot(const Instruction& in);
  bool lowerDynamicSlice(const Instruction& in, bool update);
  bool lowerReduceWindow(const Instruction& in);
  bool lowerSelectAndScatter(const Instruction& in);
  bool lowerSort(const Instruction& in);
  // With an epilogue, the convolution of an output fusion (its MXU path).
  bool lowerConvolution(const Instruction& in, const MatmulEpilogue* epilogue = nullptr);
  // kernels/fft.cpp: fft as the interpreter computes it, in c128 on the
  // vector unit, one pass per transformed dimension.
  bool lowerFft(const Instruction& in);
  bool emitFftPass(const Instruction& in, const FftPass& p);
  // A radix-2 pass too long for VMEM (or SMEM): the rows live in HBM.
  bool emitFftPassLong(const Instruction& in, const FftPass& p);
  VReg fftToC128(VReg x, ElementType from);                              // as the interpreter converts
  void fftStoreResult(VReg z, ElementType to, const std::string& addr);  // c128 z stored as `to`
  VReg fftDivide(VReg z, VReg divisor);                                  // z / n, part by part
  int hermitianCompletion(const Instruction& in, const std::vector<int64_t>& dims);
  // A data-section u32 table (deduplicated by content).
  int constTable(const Instruction& in, const std::vector<uint32_t>& words);
  // kernels/gather_scatter.cpp: a scalar loop over index vectors staged in SMEM. The
  // body is emitted once; `component(k)` loads component k of the current
  // index vector into a fresh register; DMAs the body counts in `rPend`
  // (on sem0) are waited for at the end of each chunk of index vectors.
  using IndexBody =
      std::function<bool(int rLin, int rPend, const std::function<int(int64_t)>& component)>;
  bool emitIndexLoop(const Instruction& in, const Instruction& indices, int64_t indexVectorDim,
                     const IndexBody& body);
  bool lowerGather(const Instruction& in);
  bool lowerScatter(const Instruction& in);
  bool fill(int buf, int64_t off, int64_t n, ElementType t, int scalarBuf, int64_t scalarOff);

  // kernels/misc.cpp: ids, get-dimension-size, copy-start/done, async
  // wrappers, rng-bit-generator, reduce-precision, custom calls, dots the
  // bf16/int8 MXU paths do not take.
  // kernels/collectives.cpp: every collective and its start/done forms, over
  // the chips of a pod (remote DMAs between chips, rings along the torus).
  bool planCollective(const Instruction& in, int region);
  bool lowerCollective(const Instruction& in);
  bool podReady(const Instruction& in);
  // Loads this chip's row of a per-chip table (`words` u32 words) into SMEM
  // at kCollectiveRow; word(i) reads word i into a new scalar register.
  void loadChipRow(int table, int64_t words);
  int rowWord(int64_t i);
  // base(buf) + off + (the block index in row word `word`) * blockBytes.
  int blockAddress(int buf, int64_t off, int64_t word, int64_t blockBytes);
  struct RingPlan;
  bool ringReduceScatter(const Instruction& in, const RingPlan& rp, const Computation& reducer, int w, int r);
  bool ringAllGather(const Instruction& in, const RingPlan& rp, int src, int64_t srcOff, int y);
  bool lowerRingCollective(const Instruction& in);
  // Pieces of the ring collectives (kernels/collectives.cpp).
  int rotateRingBlocks(const RingPlan& rp, int src, int64_t srcOff, int64_t word, int w);
  bool emitRingOperands(const Instruction& in, int64_t G, int64_t rowWords, double& flops, uint64_t& hbm);
  // Multi-axis all-reduce (one group of every chip on a slice with two or
  // more axes longer than 1): reduce-scatter then all-gather per torus
  // axis, two halves of the data taking the axes in different orders at
  // the same time (lanes), so both axes' links carry data.
  struct RingLane;
  bool lanesReduceScatter(const std::vector<RingLane>& lanes, const Computation& reducer);
  bool lanesAllGather(const std::vector<RingLane>& lanes);
  bool axisAllReduceApplies(const Instruction& in, const std::vector<std::vector<int64_t>>& groups) const;
  bool lowerAxisAllReduce(const Instruction& in);
  bool lowerDirectCollective(const Instruction& in);
  // The direct collectives' kinds (kernels/collectives.cpp).
  bool lowerCollectivePermute(const Instruction& in);
  bool lowerCollectiveBroadcast(const Instruction& in, int tbl, int64_t G);
  bool lowerAllToAll(const Instruction& in, int tbl, int64_t G);
  void sendToMember(int64_t j, int dst, int src, int64_t srcOff, int64_t bytes, const std::string& desc, int sem);
  int memberTable(const Instruction& in, int64_t& G);
  bool asyncGatherOverlaps(const Instruction& in) const;
  bool lowerAsyncAllGather(const Instruction& in);
  bool lowerAsyncDone(const Instruction& in);
  // Starts whose done waits for them: the per-chip table (collective-
  // permute, else -1), the semaphore pair (sent, sent + 1 = arrivals) and
  // the counts to wait for.
  struct AsyncCollective {
    int table = -1;
    int sem = 24;
    int64_t sends = 0, recvs = 0;
  };
  std::map<const Instruction*, AsyncCollective> async_;
  int asyncCount_ = 0;
  struct PodShape {
    bool ready = false;
    int64_t replicas = 1, partitions = 1;
    target::Topology topology;
  };
  PodShape pod_;
  bool planMisc(const Instruction& in, int region, bool& handled);
  bool emitMisc(const Instruction& in, bool& handled);
  // Whether `in` may have s64/u64/f64 or c64/c128 operands or results
  // (kernels/wide.cpp); reports an error if not.
  bool checkWideTypes(const Instruction& in);
  std::optional<VReg> lowerReducePrecision(const Instruction& in, VReg x);
  std::optional<VReg> lowerReducePrecisionF64(const Instruction& in, VReg x);
  bool isMxuDot(const Instruction& in) const;
  bool lowerVectorDot(const Instruction& in);
  bool lowerRngBitGenerator(const Instruction& in);
  // The ThreeFry (or Philox) words of eval/rng.h for `count` elements of
  // `bitsType` from the u64 state in stateBuf; the advanced state goes to
  // outState (which may be stateBuf). Inside a kernel the caller began.
  bool emitRngBits(int stateBuf, int64_t stateCount, bool philox, ElementType bitsType, int64_t count,
                   int outState, int outBits);
  // rng and rng-get-and-update-state: the stream lives in the rng_state
  // entry argument (codegen.h), read and advanced in place by each one.
  bool planRng(const Instruction& in);
  bool lowerRng(const Instruction& in);
  const std::vector<const Instruction*>& loweringOrder(const Computation& c);
  bool lowerRngGetAndUpdateState(const Instruction& in);
  // An f64 register pair converted to `to`'s register form, as the
  // interpreter converts (floats round once, integers truncate and saturate).
  VReg convertFromF64(VReg x, ElementType to);
  // bitcast-convert to or from s4, u4 or f4e2m1fn (one element per byte in
  // memory): the interpreter's little-endian bit stream, element 0 in the
  // low nibble. Other bitcast-converts alias their operand.
  bool bitcastRepacksNibbles(const Instruction& in) const;
  bool lowerNibbleBitcast(const Instruction& in);
  // An operand as the interpreter converts it to f64 (complex: the real
  // part) and an f64 pair back to `to` (complex: imaginary +0).
  VReg asF64(VReg x);
  VReg fromF64(VReg y, ElementType to);
  // One f64 pair row (unary without b), both words; an f64 constant pair.
  VReg f64Row(const char* mnemonic, VReg a, std::optional<VReg> b = std::nullopt);
  VReg f64Constant(double v);
  bool lowerGelu(const Instruction& in);
  bool planGemm(const Instruction& in);
  bool lowerGemm(const Instruction& in);
  bool storeWords(int buf, const std::vector<std::string>& words);
  bool zeroLeaves(const std::vector<int>& bufs);
  bool fillZero(int buf, int64_t n, ElementType t);
  int tempBuf(ElementType t, const std::vector<int64_t>& dims);
  // A kernel scratch addressed only through 32-bit unsigned DMA offsets:
  // in the heap while it ends within options_.heapReachBytes, else an HBM
  // buffer of its own; -1 (with `what` in the error) past 4 GiB.
  int wideScratchBuf(const Instruction& in, ElementType t, const std::vector<int64_t>& dims,
                     const std::string& what);
  // A kernel-local copy of `buf` (of logical `dims`) with its dimensions
  // permuted: result dimension i is dimension perm[i] of the source.
  int permutedCopy(int buf, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm);
  int readScalarBranch(const Instruction& in);

  Emitter e_;
  const Instruction* emitting_ = nullptr;  // the instruction whose kernel is being emitted
  // While loops and conditionals being emitted: their code branches back
  // and across the kernels inside them, so it goes to the sink as one piece.
  int controlDepth_ = 0;
  struct ControlRegion {
    explicit ControlRegion(int& depth) : depth_(depth) { ++depth_; }
    ~ControlRegion() { --depth_; }
    ControlRegion(const ControlRegion&) = delete;
    ControlRegion& operator=(const ControlRegion&) = delete;
    int& depth_;
  };
  // While set, running out of vector registers sets vregsExhausted_
  // instead of failing: the row kernel tries groups of rows this way.
  bool softVregs_ = false;
  bool vregsExhausted_ = false;
  // lowerComputation: a root concatenate gives its operands as results, as a
  // root tuple does (a flat fusion writes each into its place).
  bool concatRootAsTuple_ = false;
};

inline std::vector<int64_t> byteStrides(const std::vector<int64_t>& dims, int es) {
  std::vector<int64_t> s = rowMajorStrides(dims);
  for (int64_t& x : s) x *= es;
  return s;
}

// The bits of a scalar literal as a vector register element holds them.
inline uint32_t literalBits(const hlo::Literal& lit, ElementType t) {
  if (typeInfo(t).words > 1) return static_cast<uint32_t>(lit.getBits(0));  // the low word
  if (t == ElementType::F32) return static_cast<uint32_t>(lit.getBits(0));
  if (t == ElementType::BF16) return static_cast<uint32_t>(lit.getBits(0)) << 16;
  if (isNarrowFloat(t)) return std::bit_cast<uint32_t>(static_cast<float>(lit.getDouble(0)));
  if (t == ElementType::Pred) return lit.getInt(0) ? 1u : 0u;
  return static_cast<uint32_t>(lit.getInt(0));
}

}  // namespace tpu::codegen
