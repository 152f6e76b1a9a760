// Printing style: XLA's default HloPrintOptions ("long text"): `%` sigils,
// program shapes in computation headers, layouts on shapes, no operand shapes
// (the current XLA default), `/*index=N*/` every 5 operands, metadata,
// backend_config and control-predecessors printed, async sugar on. One
// deliberate difference: constants are always printed in full (XLA's default
// elides arrays above 10 elements as `{...}`), so printing never loses data;
// literals that were elided on input stay `{...}`.
#include "hlo/text/printer.h"

#include "hlo/pointer_index.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace tpu::hlo {

namespace {

// A key of `key=value` lists: bare when it is an identifier, else quoted
// with escapes (the parser reads `"key"=value` too), so any key round-trips.
void appendKey(std::string& out, std::string_view key) {
  if (isValidName(key))
    out += key;
  else
    appendQuoted(out, key);
}

void appendInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void appendInts(std::string& out, const std::vector<int64_t>& v) {
  out += '{';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    appendInt(out, v[i]);
  }
  out += '}';
}

void appendDouble(std::string& out, double v) {
  if (std::isnan(v)) {
    out += std::signbit(v) ? "-nan" : "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void appendFloat(std::string& out, float v) {
  if (std::isnan(v) || std::isinf(v)) {
    appendDouble(out, v);
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// One real (non-complex) float element, shortest round-trip, NaN payloads kept.
void appendFloatElement(std::string& out, const Literal& lit, int64_t i) {
  ElementType t = lit.shape().elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  double v = lit.getDouble(i);
  if (std::isnan(v)) {
    uint64_t bits = lit.getBits(i);
    int mantissa = info.floatFormat ? floatFormatInfo(*info.floatFormat).mantissaBits : t == ElementType::F32 ? 23 : 52;
    int total = info.bitWidth;
    uint64_t mask = (uint64_t{1} << mantissa) - 1;
    uint64_t payload = bits & mask;
    bool negative = total < 64 ? ((bits >> (total - 1)) & 1) != 0 : (bits >> 63) != 0;
    if (info.floatFormat && !floatFormatInfo(*info.floatFormat).hasSign) negative = false;
    // Default payload: what encoding a plain NaN gives.
    uint64_t defaultPayload;
    if (info.floatFormat) {
      defaultPayload = encodeFloat(*info.floatFormat, NAN) & mask;
    } else {
      defaultPayload = uint64_t{1} << (mantissa - 1);
    }
    out += negative ? "-nan" : "nan";
    if (payload != defaultPayload) out += fmt::format("(0x{:x})", payload);
    return;
  }
  if (t == ElementType::F64) {
    appendDouble(out, v);
  } else if (t == ElementType::F32 || v == 0 || std::isinf(v)) {
    appendFloat(out, static_cast<float>(v));
  } else {
    // Narrow types: the fewest significant digits that read back to the same bits.
    uint64_t bits = lit.getBits(i);
    FloatFormat f = *info.floatFormat;
    char buf[64];
    for (int precision = 1; precision <= 9; ++precision) {
      auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, precision);
      double back = 0;
      std::from_chars(buf, r.ptr, back);
      if (encodeFloat(f, back) == bits || precision == 9) {
        out.append(buf, r.ptr);
        return;
      }
    }
  }
}

void appendElement(std::string& out, const Literal& lit, int64_t i, bool scalar) {
  ElementType t = lit.shape().elementType();
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (t == ElementType::Pred) {
    bool b = lit.getInt(i) != 0;
    out += scalar ? (b ? "true" : "false") : (b ? "1" : "0");
  } else if (info.isInteger) {
    if (info.isSigned) {
      appendInt(out, lit.getInt(i));
    } else {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, lit.getUint(i));
      out.append(buf, r.ptr);
    }
  } else if (info.isComplex) {
    std::complex<double> c = lit.getComplex(i);
    out += '(';
    if (t == ElementType::C64) {
      appendFloat(out, static_cast<float>(c.real()));
      out += ", ";
      appendFloat(out, static_cast<float>(c.imag()));
    } else {
      appendDouble(out, c.real());
      out += ", ";
      appendDouble(out, c.imag());
    }
    out += ')';
  } else {
    appendFloatElement(out, lit, i);
  }
}

void appendLiteral(std::string& out, const Literal& lit) {
  if (lit.isTuple()) {
    if (lit.isElided()) {
      out += "{...}";
      return;
    }
    out += "( ";
    for (size_t i = 0; i < lit.tupleElements().size(); ++i) {
      if (i) out += ", ";
      appendLiteral(out, lit.tupleElements()[i]);
    }
    out += " )";
    return;
  }
  const Shape& s = lit.shape();
  if (s.isToken()) {
    out += "token";
    return;
  }
  if (lit.isElided()) {
    out += "{...}";
    return;
  }
  const int64_t rank = s.rank();
  if (rank == 0) {
    appendElement(out, lit, 0, true);
    return;
  }
  // Iterative walk over the index space, opening/closing braces per level.
  const auto& dims = s.dimensions();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t linear = 0;
  int64_t level = 0;
  auto open = [&](int64_t lvl) {
    out += '{';
    int64_t n = dims[static_cast<size_t>(lvl)];
    if (rank >= 2 && (lvl < rank - 1 || n > 1)) out += ' ';
  };
  auto close = [&](int64_t lvl) {
    int64_t n = dims[static_cast<size_t>(lvl)];
    if (rank >= 2 && (lvl < rank - 1 || n > 1)) out += ' ';
    out += '}';
  };
  open(0);
  while (true) {
    int64_t n = dims[static_cast<size_t>(level)];
    if (idx[static_cast<size_t>(level)] >= n) {
      close(level);
      if (level == 0) break;
      --level;
      ++idx[static_cast<size_t>(level)];
      continue;
    }
    if (idx[static_cast<size_t>(level)] > 0) out += ", ";
    if (level == rank - 1) {
      appendElement(out, lit, linear++, false);
      ++idx[static_cast<size_t>(level)];
    } else {
      ++level;
      idx[static_cast<size_t>(level)] = 0;
      open(level);
    }
  }
}

bool alwaysPrintsDimensions(Opcode op) {
  switch (op) {
    case Opcode::Broadcast:
    case Opcode::Transpose:
    case Opcode::Reverse:
    case Opcode::Reduce:
    case Opcode::Concatenate:
    case Opcode::Map:
    case Opcode::Sort:
    case Opcode::AllGather:
    case Opcode::AllGatherStart:
    case Opcode::ReduceScatter:
    case Opcode::GetDimensionSize:
    case Opcode::SetDimensionSize:
    case Opcode::Scan: return true;
    default: return false;
  }
}

bool usesReplicaGroups(Opcode op) {
  switch (op) {
    case Opcode::AllGather:
    case Opcode::AllGatherStart:
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::AllToAll:
    case Opcode::ReduceScatter:
    case Opcode::RaggedAllToAll:
    case Opcode::CollectiveBroadcast: return true;
    default: return false;
  }
}

bool usesToApply(Opcode op) {
  switch (op) {
    case Opcode::Call:
    case Opcode::Map:
    case Opcode::Reduce:
    case Opcode::ReduceWindow:
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::ReduceScatter:
    case Opcode::Scatter:
    case Opcode::Sort:
    case Opcode::Scan:
    case Opcode::CustomCall: return true;
    default: return false;
  }
}

class Printer {
 public:
  Printer(const PrintOptions& options, const Module* module) : opt_(options) {
    if (module && options.asyncSyntaxSugar) findSugared(*module);
  }

  std::string module(const Module& m);
  void computation(std::string& out, const Computation& c, bool isEntry);
  void instruction(std::string& out, const Instruction& inst);

 private:
  void name(std::string& out, std::string_view n) {
    if (opt_.printPercent) out += '%';
    out += n;
  }
  void shape(std::string& out, const Shape& s) { s.appendTo(out, true); }
  void findSugared(const Module& m);
  bool isTrivialWrapper(const Computation& c, const Instruction& start) const;
  void opAttributes(std::string& out, const Instruction& inst);
  void calledAttributes(std::string& out, const Instruction& inst);
  void commonAttributes(std::string& out, const Instruction& inst);

  const PrintOptions& opt_;
  std::unordered_set<const Computation*> sugared_;
  // Where each shared metadata value was first printed: instructions share
  // a few hundred values (parser and .hlob reader both share them), and a
  // repeat is copied from the output instead of formatted again.
  struct PrintedAt {
    const std::string* out;
    size_t offset, size;
  };
  PointerIndex metadataIndex_;
  std::vector<PrintedAt> metadataPrinted_;
};

bool Printer::isTrivialWrapper(const Computation& c, const Instruction& start) const {
  int64_t n = c.instructionCount() - 1;
  if (n < 0 || n != start.operandCount()) return false;
  if (c.name().rfind(start.name() + ".async_wrapped", 0) != 0) return false;
  if (c.executionThread() != start.attrs().asyncExecutionThread) return false;
  const Instruction* root = c.instructions().back().get();
  if (c.root() != root || root->opcode() == Opcode::Parameter || root->name() != "async_op") return false;
  std::string_view opName = opcodeName(root->opcode());
  for (std::string_view suffix : {"-start", "-update", "-done"})
    if (opcodeFromName(std::string(opName) + std::string(suffix))) return false;
  if (root->operandCount() != n || !root->controlPredecessors().empty() || !(root->common() == CommonAttributes{}) ||
      root->attrs().asyncExecutionThread != "main")
    return false;
  for (int64_t i = 0; i < n; ++i) {
    const Instruction* p = c.instructions()[static_cast<size_t>(i)].get();
    std::string expected = i == 0 ? std::string("async_param") : fmt::format("async_param.{}", i);
    if (p->opcode() != Opcode::Parameter || p->attrs().parameterNumber != i || p->name() != expected ||
        root->operand(i) != p || !(p->common() == CommonAttributes{}) || !p->controlPredecessors().empty() ||
        !p->shape().compatible(start.operand(i)->shape()) || !(p->shape() == start.operand(i)->shape()))
      return false;
    InstructionAttributes plain;
    plain.parameterNumber = i;
    if (!(p->attrs() == plain)) return false;
  }
  const Shape& s = start.shape();
  if (!s.isTuple() || s.tupleSize() < 2 || !(s.tupleElement(1) == root->shape())) return false;
  return true;
}

void Printer::findSugared(const Module& m) {
  std::unordered_map<const Computation*, std::vector<const Instruction*>> callers;
  for (const auto& c : m.computations())
    for (const auto& inst : c->instructions())
      for (const Computation* callee : inst->calledComputations()) callers[callee].push_back(inst.get());
  for (const auto& [comp, list] : callers) {
    const Instruction* start = nullptr;
    bool ok = true;
    for (const Instruction* i : list) {
      if (i->opcode() == Opcode::AsyncStart) {
        if (start) ok = false;
        start = i;
      } else if (i->opcode() != Opcode::AsyncUpdate && i->opcode() != Opcode::AsyncDone) {
        ok = false;
      } else if (i->calledComputations().size() != 1) {
        ok = false;
      }
    }
    if (ok && start && start->calledComputations().size() == 1 && comp != m.entry() &&
        isTrivialWrapper(*comp, *start))
      sugared_.insert(comp);
  }
}

void Printer::opAttributes(std::string& out, const Instruction& inst) {
  const InstructionAttributes& a = inst.attrs();
  const Opcode op = inst.opcode();
  auto key = [&](std::string_view k) {
    out += ", ";
    out += k;
    out += '=';
  };
  auto flag = [&](std::string_view k, bool v) {
    if (v) {
      key(k);
      out += "true";
    }
  };
  // Collectives.
  if (a.channelId) {
    key("channel_id");
    appendInt(out, *a.channelId);
  }
  if (!a.sourceTargetPairs.empty() || op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart) {
    key("source_target_pairs");
    out += '{';
    for (size_t i = 0; i < a.sourceTargetPairs.size(); ++i) {
      if (i) out += ',';
      out += fmt::format("{{{},{}}}", a.sourceTargetPairs[i].first, a.sourceTargetPairs[i].second);
    }
    out += '}';
  }
  if (a.replicaGroups || usesReplicaGroups(op)) {
    key("replica_groups");
    if (a.replicaGroups && a.replicaGroups->isIota) {
      const ReplicaGroups& g = *a.replicaGroups;
      out += fmt::format("[{},{}]<=[", g.iotaNumGroups, g.iotaGroupSize);
      for (size_t i = 0; i < g.iota.reshapeDims.size(); ++i) {
        if (i) out += ',';
        appendInt(out, g.iota.reshapeDims[i]);
      }
      out += ']';
      if (!g.iota.transposePerm.empty()) {
        out += "T(";
        for (size_t i = 0; i < g.iota.transposePerm.size(); ++i) {
          if (i) out += ',';
          appendInt(out, g.iota.transposePerm[i]);
        }
        out += ')';
      }
    } else {
      out += '{';
      if (a.replicaGroups)
        for (size_t i = 0; i < a.replicaGroups->groups.size(); ++i) {
          if (i) out += ',';
          appendInts(out, a.replicaGroups->groups[i]);
        }
      out += '}';
    }
  }
  flag("constrain_layout", a.constrainLayout);
  if (!a.dimensions.empty() || alwaysPrintsDimensions(op)) {
    key("dimensions");
    appendInts(out, a.dimensions);
  }
  flag("use_global_device_ids", a.useGlobalDeviceIds);
  if (!a.permuteSliceSizes.empty()) {
    key("slice_sizes");
    out += '{';
    for (size_t i = 0; i < a.permuteSliceSizes.size(); ++i) {
      if (i) out += ',';
      appendInts(out, a.permuteSliceSizes[i]);
    }
    out += '}';
  }
  flag("is_stable", a.isStable);
  if (op == Opcode::GetTupleElement || a.tupleIndex != 0) {
    key("index");
    appendInt(out, a.tupleIndex);
  }
  if (op == Opcode::Iota || a.iotaDimension != 0) {
    key("iota_dimension");
    appendInt(out, a.iotaDimension);
  }
  if (a.inferredDimension != -1) {
    key("inferred_dimension");
    appendInt(out, a.inferredDimension);
  }
  if (op == Opcode::Slice || !a.slice.empty()) {
    key("slice");
    bool strides = false;
    for (const SliceDimension& d : a.slice) strides |= d.stride != 1;
    out += '{';
    for (size_t i = 0; i < a.slice.size(); ++i) {
      if (i) out += ", ";
      const SliceDimension& d = a.slice[i];
      if (strides)
        out += fmt::format("[{}:{}:{}]", d.start, d.limit, d.stride);
      else
        out += fmt::format("[{}:{}]", d.start, d.limit);
    }
    out += '}';
  }
  if (op == Opcode::DynamicSlice || !a.dynamicSliceSizes.empty()) {
    key("dynamic_slice_sizes");
    appendInts(out, a.dynamicSliceSizes);
  }
  if (op == Opcode::Pad || !a.padding.empty()) {
    key("padding");
    bool interior = false;
    for (const PaddingDimension& d : a.padding) interior |= d.interior != 0;
    for (size_t i = 0; i < a.padding.size(); ++i) {
      if (i) out += 'x';
      const PaddingDimension& d = a.padding[i];
      if (interior)
        out += fmt::format("{}_{}_{}", d.low, d.high, d.interior);
      else
        out += fmt::format("{}_{}", d.low, d.high);
    }
  }
  if (a.window && !a.window->dimensions.empty()) {
    key("window");
    const auto& dims = a.window->dimensions;
    auto list = [&](std::string_view k, auto get, auto isDefault) {
      bool any = false;
      for (const WindowDimension& d : dims) any |= !isDefault(d);
      if (!any && k != "size") return;
      if (k != "size") out += ' ';
      out += k;
      out += '=';
      for (size_t i = 0; i < dims.size(); ++i) {
        if (i) out += 'x';
        out += get(dims[i]);
      }
    };
    out += '{';
    list("size", [](const WindowDimension& d) { return std::to_string(d.size); }, [](const WindowDimension&) { return true; });
    list("stride", [](const WindowDimension& d) { return std::to_string(d.stride); },
         [](const WindowDimension& d) { return d.stride == 1; });
    list("pad", [](const WindowDimension& d) { return fmt::format("{}_{}", d.paddingLow, d.paddingHigh); },
         [](const WindowDimension& d) { return d.paddingLow == 0 && d.paddingHigh == 0; });
    list("lhs_dilate", [](const WindowDimension& d) { return std::to_string(d.baseDilation); },
         [](const WindowDimension& d) { return d.baseDilation == 1; });
    list("rhs_dilate", [](const WindowDimension& d) { return std::to_string(d.windowDilation); },
         [](const WindowDimension& d) { return d.windowDilation == 1; });
    list("rhs_reversal", [](const WindowDimension& d) { return std::string(d.windowReversal ? "1" : "0"); },
         [](const WindowDimension& d) { return !d.windowReversal; });
    out += '}';
  }
  if (a.convDims) {
    key("dim_labels");
    out += a.convDims->toString();
  }
  if (a.featureGroupCount != 1) {
    key("feature_group_count");
    appendInt(out, a.featureGroupCount);
  }
  if (a.batchGroupCount != 1) {
    key("batch_group_count");
    appendInt(out, a.batchGroupCount);
  }
  const bool dotLike = op == Opcode::Dot || op == Opcode::RaggedDot || op == Opcode::ScaledDot;
  const DotDimensionNumbers& dd = *a.dotDims;
  if (!dd.lhsBatchDimensions.empty()) {
    key("lhs_batch_dims");
    appendInts(out, dd.lhsBatchDimensions);
  }
  if (dotLike || !dd.lhsContractingDimensions.empty()) {
    key("lhs_contracting_dims");
    appendInts(out, dd.lhsContractingDimensions);
  }
  if (!dd.rhsBatchDimensions.empty()) {
    key("rhs_batch_dims");
    appendInts(out, dd.rhsBatchDimensions);
  }
  if (dotLike || !dd.rhsContractingDimensions.empty()) {
    key("rhs_contracting_dims");
    appendInts(out, dd.rhsContractingDimensions);
  }
  if (op == Opcode::RaggedDot || !a.raggedDotDims->lhsRaggedDimensions.empty()) {
    key("lhs_ragged_dims");
    appendInts(out, a.raggedDotDims->lhsRaggedDimensions);
  }
  if (op == Opcode::RaggedDot || !a.raggedDotDims->rhsGroupDimensions.empty()) {
    key("rhs_group_dims");
    appendInts(out, a.raggedDotDims->rhsGroupDimensions);
  }
  bool nonDefaultPrecision = false;
  for (Precision p : a.precision->operandPrecision) nonDefaultPrecision |= p != Precision::Default;
  if (nonDefaultPrecision) {
    key("operand_precision");
    out += '{';
    for (size_t i = 0; i < a.precision->operandPrecision.size(); ++i) {
      if (i) out += ',';
      out += toString(a.precision->operandPrecision[i]);
    }
    out += '}';
  }
  if (a.precision->algorithm != DotAlgorithm::Unset) {
    key("algorithm");
    out += toString(a.precision->algorithm);
  }
  if (a.sparsity) {
    key("sparsity");
    out += a.sparsity->text;
  }
  if (a.convKind != ConvKind::Unset) {
    key("conv_kind");
    out += toString(a.convKind);
  }
  if (op == Opcode::Compare) {
    key("direction");
    out += toString(a.comparisonDirection);
    ElementType t = inst.operandCount() > 0 ? inst.operand(0)->shape().elementType() : ElementType::F32;
    if (a.comparisonType != defaultComparisonType(t)) {
      key("type");
      out += toString(a.comparisonType);
    }
  }
  const GatherDimensionNumbers& g = *a.gatherDims;
  if (op == Opcode::Gather) {
    key("offset_dims");
    appendInts(out, g.offsetDims);
    key("collapsed_slice_dims");
    appendInts(out, g.collapsedSliceDims);
    key("start_index_map");
    appendInts(out, g.startIndexMap);
    if (!g.operandBatchingDims.empty()) {
      key("operand_batching_dims");
      appendInts(out, g.operandBatchingDims);
    }
    if (!g.startIndicesBatchingDims.empty()) {
      key("start_indices_batching_dims");
      appendInts(out, g.startIndicesBatchingDims);
    }
    key("index_vector_dim");
    appendInt(out, g.indexVectorDim);
    key("slice_sizes");
    appendInts(out, a.gatherSliceSizes);
  }
  const ScatterDimensionNumbers& sd = *a.scatterDims;
  if (op == Opcode::Scatter) {
    key("update_window_dims");
    appendInts(out, sd.updateWindowDims);
    key("inserted_window_dims");
    appendInts(out, sd.insertedWindowDims);
    key("scatter_dims_to_operand_dims");
    appendInts(out, sd.scatterDimsToOperandDims);
    if (!sd.inputBatchingDims.empty()) {
      key("input_batching_dims");
      appendInts(out, sd.inputBatchingDims);
    }
    if (!sd.scatterIndicesBatchingDims.empty()) {
      key("scatter_indices_batching_dims");
      appendInts(out, sd.scatterIndicesBatchingDims);
    }
    key("index_vector_dim");
    appendInt(out, sd.indexVectorDim);
  }
  if (op != Opcode::Gather && op != Opcode::Scatter) {
    // Dimension numbers on other opcodes are not meaningful, but never dropped.
    if (!(g == GatherDimensionNumbers{}) || !a.gatherSliceSizes.empty()) {
      key("offset_dims");
      appendInts(out, g.offsetDims);
      key("collapsed_slice_dims");
      appendInts(out, g.collapsedSliceDims);
      key("start_index_map");
      appendInts(out, g.startIndexMap);
      if (!g.operandBatchingDims.empty()) {
        key("operand_batching_dims");
        appendInts(out, g.operandBatchingDims);
      }
      if (!g.startIndicesBatchingDims.empty()) {
        key("start_indices_batching_dims");
        appendInts(out, g.startIndicesBatchingDims);
      }
      key("index_vector_dim");
      appendInt(out, g.indexVectorDim);
      key("slice_sizes");
      appendInts(out, a.gatherSliceSizes);
    }
  }
  flag("indices_are_sorted", a.indicesAreSorted);
  flag("unique_indices", a.uniqueIndices);
  if (op == Opcode::Fusion) {
    key("kind");
    out += toString(a.fusionKind);
  }
  if (a.paddingType != PaddingType::Unset) {
    key("padding_type");
    out += toString(a.paddingType);
  }
  if (op == Opcode::CustomCall || !a.customCallTarget.empty()) {
    key("custom_call_target");
    appendQuoted(out, a.customCallTarget);
  }
  if (a.operandLayoutConstraints) {
    key("operand_layout_constraints");
    out += '{';
    for (size_t i = 0; i < a.operandLayoutConstraints->size(); ++i) {
      if (i) out += ", ";
      shape(out, (*a.operandLayoutConstraints)[i]);
    }
    out += '}';
  }
  flag("custom_call_has_side_effect", a.customCallHasSideEffect);
  if (a.literal && op != Opcode::Constant) {
    key("literal");
    shape(out, a.literal->shape());
    out += ' ';
    appendLiteral(out, *a.literal);
  }
  if (!a.outputToOperandAliasing.empty()) {
    key("output_to_operand_aliasing");
    out += '{';
    for (size_t i = 0; i < a.outputToOperandAliasing.size(); ++i) {
      if (i) out += ", ";
      const OutputOperandAlias& al = a.outputToOperandAliasing[i];
      appendInts(out, al.outputIndex);
      out += fmt::format(": ({}, ", al.operandNumber);
      appendInts(out, al.operandIndex);
      out += ')';
    }
    out += '}';
  }
  if (a.customCallSchedule != CustomCallSchedule::None) {
    key("schedule");
    out += toString(a.customCallSchedule);
  }
  if (a.apiVersion != CustomCallApiVersion::Original) {
    key("api_version");
    out += toString(a.apiVersion);
  }
  if (op == Opcode::Rng || a.distribution != RngDistribution::Uniform) {
    key("distribution");
    out += toString(a.distribution);
  }
  if (op == Opcode::RngBitGenerator || a.rngAlgorithm != RngAlgorithm::Default) {
    key("algorithm");
    out += toString(a.rngAlgorithm);
  }
  if (op == Opcode::RngGetAndUpdateState || a.rngDelta != 0) {
    key("delta");
    appendInt(out, a.rngDelta);
  }
  if (op == Opcode::ReducePrecision || a.exponentBits != 0 || a.mantissaBits != 0) {
    key("exponent_bits");
    appendInt(out, a.exponentBits);
    key("mantissa_bits");
    appendInt(out, a.mantissaBits);
  }
  if (!a.infeedConfig.empty()) {
    key("infeed_config");
    appendQuoted(out, a.infeedConfig);
  }
  if (a.outfeedShape) {
    key("outfeed_shape");
    shape(out, *a.outfeedShape);
  }
  if (!a.outfeedConfig.empty()) {
    key("outfeed_config");
    appendQuoted(out, a.outfeedConfig);
  }
  flag("is_host_transfer", a.isHostTransfer);
  flag("left_side", a.leftSide);
  flag("lower", a.lower);
  flag("unit_diagonal", a.unitDiagonal);
  if (a.transposeA != TriangularTranspose::NoTranspose) {
    key("transpose_a");
    out += toString(a.transposeA);
  }
  if (op == Opcode::Fft || a.fftType != FftType::Fft || !a.fftLength.empty()) {
    key("fft_type");
    out += toString(a.fftType);
    key("fft_length");
    appendInts(out, a.fftLength);
  }
  bool batchNorm = op == Opcode::BatchNormGrad || op == Opcode::BatchNormInference || op == Opcode::BatchNormTraining;
  if (batchNorm || a.epsilon != 0 || a.featureIndex != 0) {
    key("epsilon");
    appendFloat(out, a.epsilon);
    key("feature_index");
    appendInt(out, a.featureIndex);
  }
  if (a.domain) {
    key("domain");
    out += "{kind=";
    appendQuoted(out, a.domain->kind);
    if (a.domain->entry) out += ", entry=" + a.domain->entry->toString();
    if (a.domain->exit) out += ", exit=" + a.domain->exit->toString();
    out += '}';
  }
  if (op == Opcode::TopK || a.k != 0 || !a.largest) {
    key("k");
    appendInt(out, a.k);
    key("largest");
    out += a.largest ? "true" : "false";
  }
  if (op == Opcode::Scan || a.numCarries != 0) {
    key("num_carries");
    appendInt(out, a.numCarries);
  }
  flag("is_reverse", a.isReverse);
  flag("is_associative", a.isAssociative);
  if (a.crossProgramPrefetchIndex) {
    key("cross_program_prefetch_index");
    appendInt(out, *a.crossProgramPrefetchIndex);
  }
  flag("is_composite", a.isComposite);
  if (!(a.resultAccuracy == ResultAccuracy{})) {
    key("result_accuracy");
    if (a.resultAccuracy->mode == ResultAccuracyMode::Tolerance) {
      out += "{tolerance={atol=";
      appendDouble(out, a.resultAccuracy->atol);
      out += ",rtol=";
      appendDouble(out, a.resultAccuracy->rtol);
      out += fmt::format(",ulps={}}}}}", a.resultAccuracy->ulps);
    } else {
      out += fmt::format("{{mode={}}}", toString(a.resultAccuracy->mode));
    }
  }
  if (a.asyncExecutionThread != "main") {
    key("async_execution_thread");
    appendQuoted(out, a.asyncExecutionThread);
  }
  if (a.parameterReplication) {
    key("parameter_replication");
    out += '{';
    for (size_t i = 0; i < a.parameterReplication->size(); ++i) {
      if (i) out += ',';
      out += (*a.parameterReplication)[i] ? "true" : "false";
    }
    out += '}';
  }
}

void Printer::calledAttributes(std::string& out, const Instruction& inst) {
  const auto& called = inst.calledComputations();
  if (called.empty()) return;
  const Opcode op = inst.opcode();
  auto ref = [&](std::string_view k, const Computation* c) {
    out += ", ";
    out += k;
    out += '=';
    name(out, c ? c->name() : "null");
  };
  auto list = [&](std::string_view k, size_t from) {
    out += ", ";
    out += k;
    out += "={";
    for (size_t i = from; i < called.size(); ++i) {
      if (i > from) out += ", ";
      name(out, called[i] ? called[i]->name() : "null");
    }
    out += '}';
  };
  if (op == Opcode::While && called.size() == 2) {
    ref("condition", called[0]);
    ref("body", called[1]);
  } else if (op == Opcode::Conditional) {
    bool predSelector = inst.operandCount() > 0 && inst.operand(0)->shape().elementType() == ElementType::Pred;
    if (predSelector && called.size() == 2) {
      ref("true_computation", called[0]);
      ref("false_computation", called[1]);
    } else {
      list("branch_computations", 0);
    }
  } else if (op == Opcode::SelectAndScatter && called.size() == 2) {
    ref("select", called[0]);
    ref("scatter", called[1]);
  } else if (usesToApply(op) && called.size() == 1) {
    ref("to_apply", called[0]);
  } else if (op == Opcode::CustomCall) {
    list("called_computations", 0);
  } else if (called.size() == 1) {
    ref("calls", called[0]);
  } else {
    list("calls", 0);
  }
}

void Printer::commonAttributes(std::string& out, const Instruction& inst) {
  const CommonAttributes& c = inst.common();
  for (const RawAttribute& r : c.unknown) {
    out += ", ";
    out += r.name;
    out += '=';
    out += r.text;
  }
  if (c.sharding) {
    out += ", sharding=";
    out += c.sharding->toString();
  }
  if (!c.frontendAttributes.empty()) {
    out += ", frontend_attributes={";
    for (size_t i = 0; i < c.frontendAttributes.size(); ++i) {
      if (i) out += ',';
      const FrontendAttribute& f = c.frontendAttributes[i];
      appendKey(out, f.key);
      out += '=';
      if (f.raw)
        out += f.value;
      else
        appendQuoted(out, f.value);
    }
    out += '}';
  }
  if (c.statistics) {
    out += fmt::format(", statistics={{visualizing_index={}", c.statistics->visualizingIndex);
    for (const auto& [k, v] : c.statistics->stats) {
      out += ',';
      out += k;
      out += '=';
      appendDouble(out, v);
    }
    out += '}';
  }
  if (opt_.printControlDependencies && !inst.controlPredecessors().empty()) {
    out += ", control-predecessors={";
    for (size_t i = 0; i < inst.controlPredecessors().size(); ++i) {
      if (i) out += ", ";
      name(out, inst.controlPredecessors()[i]->name());
    }
    out += '}';
  }
  if (c.origin) {
    out += ", origin=";
    out += c.origin->text;
  }
  if (opt_.printMetadata && !c.metadata->empty()) {
    out += ", metadata={";
    const OpMetadata* value = &c.metadata.get();
    int64_t known = metadataIndex_.find(value);
    if (known >= 0 && metadataPrinted_[static_cast<size_t>(known)].out == &out) {
      const PrintedAt& at = metadataPrinted_[static_cast<size_t>(known)];
      out.append(out, at.offset, at.size);  // std::string copies before it reallocates
    } else {
      size_t start = out.size();
      c.metadata->appendTo(out);
      metadataIndex_.set(value, static_cast<uint32_t>(metadataPrinted_.size()));
      metadataPrinted_.push_back({&out, start, out.size() - start});
    }
    out += '}';
  }
  if (opt_.printBackendConfig && !c.backendConfig.empty()) {
    out += ", backend_config=";
    if (c.backendConfig.raw)
      out += c.backendConfig.text;
    else
      appendQuoted(out, c.backendConfig.text);
  }
}

void Printer::instruction(std::string& out, const Instruction& inst) {
  name(out, inst.name());
  out += " = ";
  shape(out, inst.shape());
  out += ' ';
  const Opcode op = inst.opcode();
  const Computation* wrapped = nullptr;
  if ((op == Opcode::AsyncStart || op == Opcode::AsyncUpdate || op == Opcode::AsyncDone) &&
      inst.calledComputations().size() == 1 && sugared_.count(inst.calledComputations()[0]))
    wrapped = inst.calledComputations()[0];
  if (wrapped) {
    out += opcodeName(wrapped->root()->opcode());
    out += op == Opcode::AsyncStart ? "-start" : op == Opcode::AsyncUpdate ? "-update" : "-done";
  } else {
    out += opcodeName(op);
  }
  out += '(';
  if (op == Opcode::Parameter) {
    appendInt(out, inst.attrs().parameterNumber);
  } else if (op == Opcode::Constant) {
    if (inst.attrs().literal) {
      const Literal& lit = *inst.attrs().literal;
      if (!opt_.printLargeConstants && lit.shape().isArray() && lit.elementCount() > 10)
        out += "{...}";
      else
        appendLiteral(out, lit);
    }
  } else {
    for (int64_t i = 0; i < inst.operandCount(); ++i) {
      if (i) {
        out += ", ";
        if (i % 5 == 0) {
          out += "/*index=";
          appendInt(out, i);
          out += "*/";
        }
      }
      if (opt_.printOperandShapes) {
        shape(out, inst.operand(i)->shape());
        out += ' ';
      }
      name(out, inst.operand(i)->name());
    }
  }
  out += ')';
  if (wrapped) {
    if (op == Opcode::AsyncStart) {
      opAttributes(out, *wrapped->root());
      calledAttributes(out, *wrapped->root());
    }
  } else {
    opAttributes(out, inst);
    calledAttributes(out, inst);
  }
  commonAttributes(out, inst);
}

void Printer::computation(std::string& out, const Computation& c, bool isEntry) {
  if (isEntry) out += "ENTRY ";
  name(out, c.name());
  out += ' ';
  if (opt_.printProgramShape) {
    out += '(';
    bool first = true;
    for (Instruction* p : c.parameters()) {
      if (!first) out += ", ";
      first = false;
      if (!p) {
        out += "(unknown)";
        continue;
      }
      out += p->name();
      out += ": ";
      p->shape().appendTo(out, false);
    }
    out += ") -> ";
    if (c.root())
      c.root()->shape().appendTo(out, false);
    else
      out += "()";
    out += ' ';
  }
  out += "{\n";
  for (const auto& inst : c.instructions()) {
    out += "  ";
    if (inst.get() == c.root()) out += "ROOT ";
    instruction(out, *inst);
    out += '\n';
  }
  out += '}';
  if (c.executionThread() != "main") {
    out += ", execution_thread=";
    appendQuoted(out, c.executionThread());
  }
  out += "\n\n";
}

std::string Printer::module(const Module& m) {
  // Real modules print to 100-300 bytes per instruction: reserving that
  // once saves growing (copying and page-faulting) the text several times.
  size_t instructions = 0;
  for (const auto& c : m.computations()) instructions += c->instructions().size();
  std::string out;
  out.reserve(std::max<size_t>(size_t{1} << 16, instructions * 256));
  const ModuleConfig& cfg = m.config();
  out += "HloModule ";
  out += m.name();
  if (cfg.isScheduled) out += ", is_scheduled=true";
  if (!cfg.inputOutputAlias.empty()) {
    out += ", input_output_alias={ ";
    for (size_t i = 0; i < cfg.inputOutputAlias.size(); ++i) {
      if (i) out += ", ";
      const InputOutputAlias& a = cfg.inputOutputAlias[i];
      appendInts(out, a.outputIndex);
      out += fmt::format(": ({}, ", a.parameterNumber);
      appendInts(out, a.parameterIndex);
      out += a.mustAlias ? ", must-alias)" : ", may-alias)";
    }
    out += " }";
  }
  if (!cfg.bufferDonors.empty()) {
    out += ", buffer_donor={ ";
    for (size_t i = 0; i < cfg.bufferDonors.size(); ++i) {
      if (i) out += ", ";
      out += fmt::format("({}, ", cfg.bufferDonors[i].parameterNumber);
      appendInts(out, cfg.bufferDonors[i].parameterIndex);
      out += ')';
    }
    out += " }";
  }
  if (cfg.aliasPassthroughParams) out += ", alias_passthrough_params=true";
  if (m.entry()) {
    ComputationLayout layout = m.entryComputationLayout();
    out += ", entry_computation_layout={(";
    for (size_t i = 0; i < layout.parameters.size(); ++i) {
      if (i) out += ", ";
      shape(out, layout.parameters[i]);
    }
    out += ")->";
    shape(out, layout.result);
    out += '}';
  }
  auto boolList = [&](std::string_view k, const std::vector<bool>& v) {
    if (v.size() == 1 && !v[0]) return;
    out += ", ";
    out += k;
    out += "={";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += v[i] ? "true" : "false";
    }
    out += '}';
  };
  boolList("allow_spmd_sharding_propagation_to_parameters", cfg.allowSpmdShardingPropagationToParameters);
  boolList("allow_spmd_sharding_propagation_to_output", cfg.allowSpmdShardingPropagationToOutput);
  if (cfg.replicaCount != 1) out += fmt::format(", replica_count={}", cfg.replicaCount);
  if (cfg.numPartitions != 1) out += fmt::format(", num_partitions={}", cfg.numPartitions);
  if (!cfg.frontendAttributes.empty()) {
    out += ", frontend_attributes={";
    for (size_t i = 0; i < cfg.frontendAttributes.size(); ++i) {
      if (i) out += ',';
      appendKey(out, cfg.frontendAttributes[i].key);
      out += '=';
      if (cfg.frontendAttributes[i].raw)
        out += cfg.frontendAttributes[i].value;
      else
        appendQuoted(out, cfg.frontendAttributes[i].value);
    }
    out += '}';
  }
  for (const RawAttribute& r : cfg.unknown) out += fmt::format(", {}={}", r.name, r.text);
  out += "\n\n";
  const StackFrameIndex& sf = m.stackFrames();
  if (!sf.empty()) {
    auto names = [&](std::string_view title, const std::vector<std::string>& list) {
      if (list.empty()) return;
      out += title;
      out += '\n';
      for (size_t i = 0; i < list.size(); ++i) {
        out += fmt::format("{} ", i + 1);
        appendQuoted(out, list[i]);
        out += '\n';
      }
    };
    names("FileNames", sf.fileNames);
    names("FunctionNames", sf.functionNames);
    if (!sf.fileLocations.empty()) {
      out += "FileLocations\n";
      for (size_t i = 0; i < sf.fileLocations.size(); ++i) {
        const FileLocation& f = sf.fileLocations[i];
        out += fmt::format("{} {{file_name_id={} function_name_id={} line={} end_line={} column={} end_column={}}}\n",
                           i + 1, f.fileNameId, f.functionNameId, f.line, f.endLine, f.column, f.endColumn);
      }
    }
    if (!sf.stackFrames.empty()) {
      out += "StackFrames\n";
      for (size_t i = 0; i < sf.stackFrames.size(); ++i)
        out += fmt::format("{} {{file_location_id={} parent_frame_id={}}}\n", i + 1, sf.stackFrames[i].fileLocationId,
                           sf.stackFrames[i].parentFrameId);
    }
    out += '\n';
  }
  for (Computation* c : m.postOrder()) {
    if (sugared_.count(c)) continue;
    computation(out, *c, c == m.entry());
  }
  return out;
}

}  // namespace

std::string printHloText(const Module& module, const PrintOptions& options) {
  Printer p(options, &module);
  return p.module(module);
}

std::string printComputation(const Computation& computation, const PrintOptions& options) {
  Printer p(options, computation.parent());
  std::string out;
  const Module* m = computation.parent();
  p.computation(out, computation, m && m->entry() == &computation);
  return out;
}

std::string printInstruction(const Instruction& instruction, const PrintOptions& options) {
  const Module* m = instruction.parent() ? instruction.parent()->parent() : nullptr;
  Printer p(options, m);
  std::string out;
  p.instruction(out, instruction);
  return out;
}

std::string printLiteral(const Literal& literal) {
  std::string out;
  appendLiteral(out, literal);
  return out;
}

}  // namespace tpu::hlo
