#include "hlo/binary/binary.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "hlo/pointer_index.h"
#include "support/bytes.h"

namespace tpu::hlo {

namespace {

// Guards against IR changes that the encoding would silently drop: when a
// field is added to these structs their size changes, and this file must be
// updated (and kHlobVersion.minor or .major bumped) before it compiles again.
static_assert(sizeof(void*) != 8 || sizeof(InstructionAttributes) == 760,
              "InstructionAttributes changed: update the .hlob encoding in binary.cpp");
static_assert(sizeof(void*) != 8 || sizeof(CommonAttributes) == 128,
              "CommonAttributes changed: update the .hlob encoding in binary.cpp");

// Largest enumerator of each enum stored as a byte; values above it are
// rejected on read so a corrupt file cannot produce an out-of-range enum.
template <typename E> constexpr E kEnumLast;
template <> constexpr ComparisonDirection kEnumLast<ComparisonDirection> = ComparisonDirection::GE;
template <> constexpr ComparisonType kEnumLast<ComparisonType> = ComparisonType::Unsigned;
template <> constexpr FusionKind kEnumLast<FusionKind> = FusionKind::Custom;
template <> constexpr Precision kEnumLast<Precision> = Precision::PackedNibble;
template <> constexpr DotAlgorithm kEnumLast<DotAlgorithm> = DotAlgorithm::DotBf16Bf16F32X9;
template <> constexpr RngDistribution kEnumLast<RngDistribution> = RngDistribution::Normal;
template <> constexpr RngAlgorithm kEnumLast<RngAlgorithm> = RngAlgorithm::Philox;
template <> constexpr CustomCallSchedule kEnumLast<CustomCallSchedule> = CustomCallSchedule::Earliest;
template <> constexpr CustomCallApiVersion kEnumLast<CustomCallApiVersion> = CustomCallApiVersion::Unspecified;
template <> constexpr PaddingType kEnumLast<PaddingType> = PaddingType::Same;
template <> constexpr ConvKind kEnumLast<ConvKind> = ConvKind::Dgrad;
template <> constexpr FftType kEnumLast<FftType> = FftType::Irfft;
template <> constexpr TriangularTranspose kEnumLast<TriangularTranspose> = TriangularTranspose::Adjoint;
template <> constexpr ResultAccuracyMode kEnumLast<ResultAccuracyMode> = ResultAccuracyMode::Tolerance;
template <> constexpr Sharding::Kind kEnumLast<Sharding::Kind> = Sharding::Kind::Named;
template <> constexpr DimLevelKind kEnumLast<DimLevelKind> = DimLevelKind::LooseCompressed;

// Nesting bound for recursive structures (tuple shapes, literals, shardings).
constexpr int kMaxDepth = 256;

// One archive type per direction with the same member names, so each
// structure's field list is written once (in `visit`) and serves both.
class Encoder {
 public:
  static constexpr bool kReading = false;
  ByteWriter& out() { return w_; }
  bool ok() const { return true; }

  void operator()(const int64_t& v) { w_.svar(v); }
  void operator()(const bool& v) { w_.u8(v ? 1 : 0); }
  void operator()(const double& v) { w_.f64(v); }
  void operator()(const float& v) { w_.f32(v); }
  void operator()(const std::string& v) { w_.str(v); }
  void operator()(const ElementType& v) { w_.uvar(static_cast<uint64_t>(v)); }
  template <typename E>
    requires std::is_enum_v<E>
  void operator()(const E& v) { w_.u8(static_cast<uint8_t>(v)); }
  void operator()(const std::vector<bool>& v) {
    w_.uvar(v.size());
    for (bool b : v) w_.u8(b ? 1 : 0);
  }
  template <typename T>
  void operator()(const std::vector<T>& v) {
    w_.uvar(v.size());
    for (const T& x : v) (*this)(x);
  }
  template <typename T>
  void operator()(const std::optional<T>& v) {
    w_.u8(v.has_value() ? 1 : 0);
    if (v) (*this)(*v);
  }
  template <typename T>
  void operator()(const HeapOptional<T>& v) {
    w_.u8(v.has_value() ? 1 : 0);
    if (v) (*this)(*v);
  }
  template <typename A, typename B>
  void operator()(const std::pair<A, B>& v) {
    (*this)(v.first);
    (*this)(v.second);
  }
  // Structures start with one byte: 0 when the value equals a
  // default-constructed one (then nothing follows), 1 before its fields.
  // Most attributes of most instructions are defaults.
  template <typename T>
    requires requires(Encoder& e, T& t) { visit(e, t); }
  void operator()(const T& v) {
    bool isDefault = v == T{};
    w_.u8(isDefault ? 0 : 1);
    if (!isDefault) visit(*this, const_cast<T&>(v));
  }

  void operator()(const Shape& shape);
  void operator()(const Literal& literal);
  void operator()(const SharedValue<OpMetadata>& metadata);
  // Other shared attributes are written as their value.
  template <typename T>
  void operator()(const SharedValue<T>& v) {
    (*this)(*v);
  }
  void writeSparse(const InstructionAttributes& attributes);

 private:
  // The distinct values of one kind written so far, for back-references:
  // by encoding, and by the identity of a shared representation, which
  // finds the copies the IR already shares without encoding them again.
  template <typename Value>
  struct DistinctValues {
    std::unordered_map<std::string, uint64_t> indexByEncoding;
    PointerIndex indexByIdentity;
    std::vector<Value> kept;  // keeps the identities (the keys above) alive
  };
  // Writes `value` once per distinct encoding: uvar `newTag` and its fields
  // (from writeFields) the first time, uvar newTag + 1 + k for a repeat of
  // the k-th distinct value.
  template <typename Value, typename WriteFields>
  void writeOnce(DistinctValues<Value>& seen, const Value& value, const void* identity, uint64_t newTag,
                 WriteFields&& writeFields);
  void writeShapeFields(const Shape& shape);

  ByteWriter w_;
  // Top-level shapes are written once; the elements of a tuple shape are
  // written inside it.
  bool insideShape_ = false;
  DistinctValues<Shape> shapes_;
  DistinctValues<SharedValue<OpMetadata>> metadata_;
};

class Decoder {
 public:
  static constexpr bool kReading = true;
  explicit Decoder(std::string_view data) : r_(data) {}
  ByteReader& in() { return r_; }
  bool ok() const { return r_.ok(); }
  void fail(std::string message) { r_.fail(std::move(message)); }

  void operator()(int64_t& v) { v = r_.svar(); }
  void operator()(bool& v) {
    uint8_t b = r_.u8();
    if (b > 1) fail("invalid boolean");
    v = b != 0;
  }
  void operator()(double& v) { v = r_.f64(); }
  void operator()(float& v) { v = r_.f32(); }
  void operator()(std::string& v) {
    uint64_t n = r_.count(1);
    v.assign(r_.bytes(n));
  }
  void operator()(ElementType& v) {
    uint64_t raw = r_.uvar();
    if (raw >= static_cast<uint64_t>(kElementTypeCount)) fail("invalid element type");
    v = ok() ? static_cast<ElementType>(raw) : ElementType::Invalid;
  }
  template <typename E>
    requires std::is_enum_v<E>
  void operator()(E& v) {
    uint8_t raw = r_.u8();
    if (raw > static_cast<uint8_t>(kEnumLast<E>)) fail("enumeration value out of range");
    v = ok() ? static_cast<E>(raw) : E{};
  }
  void operator()(std::vector<bool>& v) {
    uint64_t n = r_.count(1);
    v.assign(n, false);
    for (uint64_t i = 0; i < n && ok(); ++i) v[i] = r_.u8() != 0;
  }
  template <typename T>
  void operator()(std::vector<T>& v) {
    uint64_t n = r_.count(1);
    v.clear();
    v.reserve(n);
    for (uint64_t i = 0; i < n && ok(); ++i) {
      v.emplace_back();
      (*this)(v.back());
    }
  }
  template <typename T>
  void operator()(std::optional<T>& v) {
    bool present = false;
    (*this)(present);
    if (present && ok()) {
      v.emplace();
      (*this)(*v);
    } else {
      v.reset();
    }
  }
  template <typename T>
  void operator()(HeapOptional<T>& v) {
    bool present = false;
    (*this)(present);
    if (present && ok()) {
      v.emplace();
      (*this)(*v);
    } else {
      v.reset();
    }
  }
  template <typename A, typename B>
  void operator()(std::pair<A, B>& v) {
    (*this)(v.first);
    (*this)(v.second);
  }
  template <typename T>
    requires requires(Decoder& d, T& t) { visit(d, t); }
  void operator()(T& v) {
    // Decoding fills freshly constructed objects, so a default value needs
    // no assignment.
    bool present = false;
    (*this)(present);
    if (!present || !ok()) return;
    if (++depth_ > kMaxDepth) fail("structure nested too deeply");
    if (ok()) visit(*this, v);
    --depth_;
  }

  void operator()(Shape& shape);
  void operator()(Literal& literal);
  void operator()(SharedValue<OpMetadata>& metadata);
  template <typename T>
  void operator()(SharedValue<T>& v) {
    T value;
    (*this)(value);
    if (ok() && !(value == T{})) v = SharedValue<T>(std::move(value));
  }
  void readSparse(InstructionAttributes& attributes);

 private:
  void readShapeFields(Shape& shape);

  ByteReader r_;
  bool insideShape_ = false;
  std::vector<Shape> shapes_;  // distinct top-level shapes read so far
  int depth_ = 0;
  std::vector<SharedValue<OpMetadata>> metadata_;  // distinct values read so far
};

// ------------------------------------------------------------ field lists

template <typename A> void visit(A& a, Tile& v) { a(v.dimensions); }
template <typename A> void visit(A& a, SplitConfig& v) { a(v.dimension); a(v.splitIndices); }
template <typename A> void visit(A& a, DimLevelType& v) { a(v.kind); a(v.notUnique); a(v.notOrdered); }
template <typename A> void visit(A& a, Layout& v) {
  a(v.minorToMajor); a(v.dimLevelTypes); a(v.tiles); a(v.tailPaddingAlignment);
  a(v.indexPrimitiveType); a(v.pointerPrimitiveType); a(v.elementSizeInBits); a(v.memorySpace);
  a(v.splitConfigs); a(v.dynamicShapeMetadataPrefixBytes);
}
template <typename A> void visit(A& a, SliceDimension& v) { a(v.start); a(v.limit); a(v.stride); }
template <typename A> void visit(A& a, PaddingDimension& v) { a(v.low); a(v.high); a(v.interior); }
template <typename A> void visit(A& a, WindowDimension& v) {
  a(v.size); a(v.stride); a(v.paddingLow); a(v.paddingHigh); a(v.baseDilation); a(v.windowDilation);
  a(v.windowReversal);
}
template <typename A> void visit(A& a, Window& v) { a(v.dimensions); }
template <typename A> void visit(A& a, ConvolutionDimensionNumbers& v) {
  a(v.inputBatchDimension); a(v.inputFeatureDimension); a(v.inputSpatialDimensions);
  a(v.kernelInputFeatureDimension); a(v.kernelOutputFeatureDimension); a(v.kernelSpatialDimensions);
  a(v.outputBatchDimension); a(v.outputFeatureDimension); a(v.outputSpatialDimensions);
}
template <typename A> void visit(A& a, DotDimensionNumbers& v) {
  a(v.lhsBatchDimensions); a(v.lhsContractingDimensions); a(v.rhsBatchDimensions); a(v.rhsContractingDimensions);
}
template <typename A> void visit(A& a, RaggedDotDimensionNumbers& v) {
  a(v.lhsRaggedDimensions); a(v.rhsGroupDimensions);
}
template <typename A> void visit(A& a, PrecisionConfig& v) { a(v.operandPrecision); a(v.algorithm); }
template <typename A> void visit(A& a, GatherDimensionNumbers& v) {
  a(v.offsetDims); a(v.collapsedSliceDims); a(v.startIndexMap); a(v.operandBatchingDims);
  a(v.startIndicesBatchingDims); a(v.indexVectorDim);
}
template <typename A> void visit(A& a, ScatterDimensionNumbers& v) {
  a(v.updateWindowDims); a(v.insertedWindowDims); a(v.scatterDimsToOperandDims); a(v.inputBatchingDims);
  a(v.scatterIndicesBatchingDims); a(v.indexVectorDim);
}
template <typename A> void visit(A& a, IotaList& v) { a(v.reshapeDims); a(v.transposePerm); }
template <typename A> void visit(A& a, ReplicaGroups& v) {
  a(v.groups); a(v.isIota); a(v.iotaNumGroups); a(v.iotaGroupSize); a(v.iota);
}
template <typename A> void visit(A& a, OutputOperandAlias& v) { a(v.outputIndex); a(v.operandNumber); a(v.operandIndex); }
template <typename A> void visit(A& a, ResultAccuracy& v) { a(v.mode); a(v.atol); a(v.rtol); a(v.ulps); }
template <typename A> void visit(A& a, RawAttribute& v) { a(v.name); a(v.text); }
template <typename A> void visit(A& a, OpMetadata& v) {
  a(v.opType); a(v.opName); a(v.sourceFile); a(v.sourceLine); a(v.sourceEndLine); a(v.sourceColumn);
  a(v.sourceEndColumn); a(v.profileType); a(v.deduplicatedName); a(v.schedulingName); a(v.stackFrameId);
  a(v.preserveLayout); a(v.others);
}
template <typename A> void visit(A& a, BackendConfig& v) { a(v.text); a(v.raw); }
template <typename A> void visit(A& a, FrontendAttribute& v) { a(v.key); a(v.value); a(v.raw); }
template <typename A> void visit(A& a, Statistics& v) { a(v.visualizingIndex); a(v.stats); }
template <typename A> void visit(A& a, Sharding& v) {
  a(v.kind); a(v.maximalDevice); a(v.tileAssignmentDims); a(v.tileAssignmentDevices); a(v.iotaDevices);
  a(v.replicateOnLastTileDim); a(v.lastTileDims); a(v.tupleElements); a(v.shardAs); a(v.shardLike);
  a(v.metadata); a(v.namedText);
}
template <typename A> void visit(A& a, DomainMetadata& v) { a(v.kind); a(v.entry); a(v.exit); }
template <typename A> void visit(A& a, InputOutputAlias& v) {
  a(v.outputIndex); a(v.parameterNumber); a(v.parameterIndex); a(v.mustAlias);
}
template <typename A> void visit(A& a, BufferDonor& v) { a(v.parameterNumber); a(v.parameterIndex); }
template <typename A> void visit(A& a, FileLocation& v) {
  a(v.fileNameId); a(v.functionNameId); a(v.line); a(v.endLine); a(v.column); a(v.endColumn);
}
template <typename A> void visit(A& a, StackFrame& v) { a(v.fileLocationId); a(v.parentFrameId); }
template <typename A> void visit(A& a, StackFrameIndex& v) {
  a(v.fileNames); a(v.functionNames); a(v.fileLocations); a(v.stackFrames);
}
template <typename A> void visit(A& a, ComputationLayout& v) { a(v.parameters); a(v.result); }
template <typename A> void visit(A& a, ModuleConfig& v) {
  a(v.isScheduled); a(v.inputOutputAlias); a(v.bufferDonors); a(v.aliasPassthroughParams);
  a(v.entryComputationLayout); a(v.allowSpmdShardingPropagationToParameters);
  a(v.allowSpmdShardingPropagationToOutput); a(v.replicaCount); a(v.numPartitions); a(v.frontendAttributes);
  a(v.unknown);
}
template <typename A> void visit(A& a, InstructionAttributes& v) {
  a(v.dimensions); a(v.tupleIndex); a(v.parameterNumber); a(v.parameterReplication); a(v.iotaDimension);
  a(v.inferredDimension); a(v.literal); a(v.slice); a(v.dynamicSliceSizes); a(v.padding); a(v.window);
  a(v.convDims); a(v.featureGroupCount); a(v.batchGroupCount); a(v.convKind); a(v.dotDims);
  a(v.raggedDotDims); a(v.precision); a(v.sparsity); a(v.comparisonDirection); a(v.comparisonType);
  a(v.fusionKind); a(v.customCallTarget); a(v.apiVersion); a(v.customCallHasSideEffect);
  a(v.operandLayoutConstraints); a(v.customCallSchedule); a(v.paddingType); a(v.outputToOperandAliasing);
  a(v.replicaGroups); a(v.channelId); a(v.constrainLayout); a(v.useGlobalDeviceIds); a(v.sourceTargetPairs);
  a(v.permuteSliceSizes); a(v.isHostTransfer); a(v.distribution); a(v.rngAlgorithm); a(v.rngDelta);
  a(v.isStable); a(v.indicesAreSorted); a(v.uniqueIndices); a(v.gatherDims); a(v.gatherSliceSizes);
  a(v.scatterDims); a(v.exponentBits); a(v.mantissaBits); a(v.infeedConfig); a(v.outfeedConfig);
  a(v.outfeedShape); a(v.leftSide); a(v.lower); a(v.unitDiagonal); a(v.transposeA); a(v.fftType);
  a(v.fftLength); a(v.epsilon); a(v.featureIndex); a(v.domain); a(v.k); a(v.largest); a(v.numCarries);
  a(v.isReverse); a(v.isAssociative); a(v.asyncExecutionThread); a(v.crossProgramPrefetchIndex);
  a(v.isComposite); a(v.resultAccuracy);
}
template <typename A> void visit(A& a, CommonAttributes& v) {
  a(v.sharding); a(v.frontendAttributes); a(v.statistics); a(v.metadata); a(v.backendConfig); a(v.origin);
  a(v.unknown);
}

// ------------------------------------------------------------ sparse attributes

// InstructionAttributes has a field for every opcode's attributes, and an
// instruction sets one or two. They are written sparsely: a mask of the
// fields that differ from their defaults (bit k = the k-th field listed in
// its visit), then only those fields, so the reader does not walk the rest.
struct FieldMask {
  static constexpr int kCapacity = 128;
  uint64_t words[2] = {0, 0};
  bool test(int i) const { return (words[i / 64] >> (i % 64)) & 1; }
  void set(int i) { words[i / 64] |= uint64_t{1} << (i % 64); }
};

// Archive that marks the fields differing from a default-constructed value.
class ChangedFieldFinder {
 public:
  static constexpr bool kReading = false;
  bool ok() const { return true; }
  template <typename T>
  void operator()(const T& v) {
    if (!isDefault(v)) mask.set(count);
    ++count;
  }
  FieldMask mask;
  int count = 0;

 private:
  // Floats by bits, so that -0.0 and NaN payloads survive the round trip.
  static bool isDefault(float v) { return std::bit_cast<uint32_t>(v) == 0; }
  static bool isDefault(double v) { return std::bit_cast<uint64_t>(v) == 0; }
  template <typename T>
  static bool isDefault(const T& v) { return v == T{}; }
};

// The field list of InstructionAttributes as a table, so the reader jumps
// to the fields a mask names instead of walking all of them: each entry is
// the field's offset in the struct and the decoder for its type, recorded
// once by running the field list over a default-constructed value.
struct AttributeField {
  size_t offset;
  void (*decode)(Decoder&, void* field);
};

class AttributeFieldTableBuilder {
 public:
  static constexpr bool kReading = true;
  explicit AttributeFieldTableBuilder(const InstructionAttributes& base) : base_(reinterpret_cast<const char*>(&base)) {}
  bool ok() const { return true; }
  template <typename T>
  void operator()(T& field) {
    fields.push_back({static_cast<size_t>(reinterpret_cast<const char*>(&field) - base_),
                      [](Decoder& d, void* p) { d(*static_cast<T*>(p)); }});
  }
  std::vector<AttributeField> fields;

 private:
  const char* base_;
};

// Archive that writes only the masked fields.
struct MaskedEncoder {
  static constexpr bool kReading = false;
  Encoder& encoder;
  FieldMask mask;
  int index = 0;
  bool ok() const { return true; }
  template <typename T>
  void operator()(T& v) {
    if (mask.test(index++)) encoder(v);
  }
};

const std::vector<AttributeField>& attributeFields() {
  static const std::vector<AttributeField> fields = [] {
    InstructionAttributes defaults;
    AttributeFieldTableBuilder builder(defaults);
    visit(builder, defaults);
    assert(builder.fields.size() <= FieldMask::kCapacity && "widen FieldMask");
    return builder.fields;
  }();
  return fields;
}

void Encoder::writeSparse(const InstructionAttributes& attributes) {
  ChangedFieldFinder finder;
  visit(finder, const_cast<InstructionAttributes&>(attributes));
  w_.uvar(finder.mask.words[0]);
  w_.uvar(finder.mask.words[1]);
  // Then the changed fields, in field-list order.
  MaskedEncoder masked{*this, finder.mask};
  visit(masked, const_cast<InstructionAttributes&>(attributes));
}

void Decoder::readSparse(InstructionAttributes& attributes) {
  const std::vector<AttributeField>& fields = attributeFields();
  char* base = reinterpret_cast<char*>(&attributes);
  uint64_t words[2];
  words[0] = r_.uvar();
  words[1] = r_.uvar();
  for (int w = 0; w < 2; ++w) {
    uint64_t bits = words[w];
    while (bits && ok()) {
      size_t k = static_cast<size_t>(w * 64 + std::countr_zero(bits));
      bits &= bits - 1;
      if (k >= fields.size()) return fail("unknown instruction attribute field");
      fields[k].decode(*this, base + fields[k].offset);
    }
  }
}

// ------------------------------------------------------------ shared metadata

// Metadata is written once per distinct value: uvar 0 = the default (empty)
// metadata; 1 = a new value, its fields follow; k + 2 = the k-th distinct
// value written before.
template <typename Value, typename WriteFields>
void Encoder::writeOnce(DistinctValues<Value>& seen, const Value& value, const void* identity, uint64_t newTag,
                        WriteFields&& writeFields) {
  if (identity)
    if (int64_t known = seen.indexByIdentity.find(identity); known >= 0)
      return w_.uvar(newTag + 1 + static_cast<uint64_t>(known));
  Encoder fields;
  writeFields(fields);
  auto [it, inserted] =
      seen.indexByEncoding.try_emplace(std::string(fields.out().data()), seen.indexByEncoding.size());
  if (identity) {
    seen.indexByIdentity.set(identity, static_cast<uint32_t>(it->second));
    seen.kept.push_back(value);
  }
  if (!inserted) return w_.uvar(newTag + 1 + it->second);
  w_.uvar(newTag);
  w_.bytes(it->first);
}

void Encoder::operator()(const SharedValue<OpMetadata>& metadata) {
  const OpMetadata& value = *metadata;
  if (value == OpMetadata{}) return w_.uvar(0);
  writeOnce(metadata_, metadata, &value, 1, [&](Encoder& fields) { visit(fields, const_cast<OpMetadata&>(value)); });
}

void Decoder::operator()(SharedValue<OpMetadata>& metadata) {
  uint64_t tag = r_.uvar();
  if (!ok()) return;
  if (tag == 0) return metadata.reset();
  if (tag == 1) {
    OpMetadata value;
    visit(*this, value);
    if (!ok()) return;
    metadata = SharedValue<OpMetadata>(std::move(value));
    metadata_.push_back(metadata);
    return;
  }
  if (tag - 2 >= metadata_.size()) return fail("metadata reference out of range");
  metadata = metadata_[tag - 2];
}

// ------------------------------------------------------------ shapes and literals

// Shapes, like metadata, are written once per distinct value: uvar 0 = a new
// shape, its fields follow; k + 1 = the k-th distinct shape written before.
// A module has a few dozen distinct shapes for hundreds of instructions and
// literals, and the reader builds each once and shares it.
void Encoder::operator()(const Shape& shape) {
  if (insideShape_) return writeShapeFields(shape);
  writeOnce(shapes_, shape, shape.representation(), 0, [&](Encoder& fields) {
    fields.insideShape_ = true;
    fields.writeShapeFields(shape);
  });
}

void Decoder::operator()(Shape& shape) {
  if (insideShape_) return readShapeFields(shape);
  uint64_t tag = r_.uvar();
  if (!ok()) return;
  if (tag == 0) {
    insideShape_ = true;
    readShapeFields(shape);
    insideShape_ = false;
    if (ok()) shapes_.push_back(shape);
    return;
  }
  if (tag - 1 >= shapes_.size()) return fail("shape reference out of range");
  shape = shapes_[tag - 1];
}

void Encoder::writeShapeFields(const Shape& shape) {
  w_.u8(static_cast<uint8_t>(shape.kind()));
  switch (shape.kind()) {
    case Shape::Kind::Array:
      (*this)(shape.elementType());
      (*this)(shape.isBuffer());
      (*this)(shape.dimensions());
      (*this)(shape.dynamicDimensions());
      w_.u8(shape.hasLayout() ? 1 : 0);
      if (shape.hasLayout()) (*this)(shape.layout());
      break;
    case Shape::Kind::Tuple:
      (*this)(shape.tupleElements());
      break;
    default:
      break;
  }
}

void Decoder::readShapeFields(Shape& shape) {
  uint8_t kind = r_.u8();
  if (++depth_ > kMaxDepth) fail("shape nested too deeply");
  switch (static_cast<Shape::Kind>(kind)) {
    case Shape::Kind::Array: {
      ElementType type = ElementType::Invalid;
      bool buffer = false;
      std::vector<int64_t> dims;
      (*this)(type);
      (*this)(buffer);
      (*this)(dims);
      // Dynamic flags are rare: read in place, allocating only when present.
      uint64_t dynamicCount = r_.count(1);
      std::string_view dynamicFlags = r_.bytes(dynamicCount);
      if (!ok()) break;
      if (!isArrayElementType(type)) {
        fail("array shape with a non-array element type");
        break;
      }
      for (int64_t d : dims)
        if (d < 0 && d != kUnboundedSize) fail("negative dimension size");
      if (dynamicCount != 0 && dynamicCount != dims.size()) fail("dynamic-dimension flags do not match rank");
      if (!ok()) break;
      shape = Shape(type, std::move(dims));
      shape.setBuffer(buffer);
      for (size_t i = 0; i < dynamicFlags.size(); ++i)
        if (dynamicFlags[i]) shape.setDynamicDimension(static_cast<int64_t>(i), true);
      if (r_.u8()) {
        // Decoded in place: the layout is the bulk of an array shape.
        shape.setLayout(Layout{});
        (*this)(shape.mutableLayout());
        if (ok() && !shape.layout().isExpressibleAsText()) fail("layout the text format cannot hold");
        if (!ok()) shape.clearLayout();
      }
      break;
    }
    case Shape::Kind::Tuple: {
      std::vector<Shape> elements;
      (*this)(elements);
      if (ok()) shape = Shape::tuple(std::move(elements));
      break;
    }
    case Shape::Kind::Token: shape = Shape::token(); break;
    case Shape::Kind::Opaque: shape = Shape::opaque(); break;
    default: fail("invalid shape kind"); break;
  }
  --depth_;
}

void Encoder::operator()(const Literal& literal) {
  (*this)(literal.shape());
  (*this)(literal.isElided());
  if (literal.isTuple()) {
    (*this)(literal.tupleElements());
  } else if (!literal.isElided()) {
    const auto& data = literal.data();
    w_.str(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  }
}

void Decoder::operator()(Literal& literal) {
  Shape shape;
  bool elided = false;
  (*this)(shape);
  (*this)(elided);
  if (!ok()) return;
  if (shape.isTuple()) {
    std::vector<Literal> elements;
    if (++depth_ > kMaxDepth) fail("literal nested too deeply");
    (*this)(elements);
    --depth_;
    if (!ok()) return;
    if (static_cast<int64_t>(elements.size()) != shape.tupleSize()) return fail("tuple literal size mismatch");
    literal = Literal::tuple(std::move(elements));
    literal.mutableShapeLayoutOnly() = shape;
    return;
  }
  if (elided) {
    literal = Literal::elided(std::move(shape));
    return;
  }
  // Check the declared size against the bytes present before allocating.
  std::optional<int64_t> bytes = shape.byteSize();
  size_t at = r_.offset();
  uint64_t n = r_.count(1);
  if (!ok()) return;
  if (!bytes || static_cast<uint64_t>(*bytes) != n) {
    r_.fail("literal data size does not match its shape");
    (void)at;
    return;
  }
  std::string_view raw = r_.bytes(n);
  if (!ok()) return;
  literal = Literal(std::move(shape));
  std::memcpy(literal.mutableData().data(), raw.data(), raw.size());
}

}  // namespace

bool isHlob(std::string_view data) { return hasMagic(data, kHlobMagic); }

// Payload layout (every structure below is preceded by a byte: 0 = default
// value, nothing follows; 1 = its fields follow; shapes and metadata are
// written once per distinct value and referred back to, see above):
//   str module name; ModuleConfig; StackFrameIndex
//   uvar computation count; per computation: str name (so calls can refer forward)
//   uvar entry index + 1 (0 = none)
//   per computation: str execution thread; uvar instruction count; per instruction:
//     uvar opcode; str name; Shape; uvar[] operand indices; uvar[] called computation
//     indices; uvar[] control predecessor indices; u8 has-attributes, then
//     if 1 the InstructionAttributes as two uvar mask words and the fields
//     whose bits are set; CommonAttributes
//   then uvar root index + 1 (0 = none)
// Opcodes and element types are written as their enum values; the tables in
// opcode.def and element_type.h are append-only for that reason (a reorder
// needs a major version bump).
std::string writeHlob(const Module& module, int zstdLevel) {
  Encoder e;
  ByteWriter& w = e.out();
  const auto& computations = module.computations();
  size_t instructionCount = 0;
  for (const auto& computation : computations) instructionCount += computation->instructions().size();
  // Corpus modules encode to about 55 bytes per instruction before
  // compression: reserving once saves growing the payload several times.
  w.reserve(instructionCount * 64 + 4096);
  e(module.name());
  e(module.config());
  e(module.stackFrames());
  // Open addressing, not std::unordered_map: a heap node per entry was most
  // of the time spent on these indices.
  PointerIndex computationIndex(computations.size());
  w.uvar(computations.size());
  for (size_t i = 0; i < computations.size(); ++i) {
    computationIndex.set(computations[i].get(), static_cast<uint32_t>(i));
    e(computations[i]->name());
  }
  auto indexOf = [](const PointerIndex& index, const void* key) {
    int64_t i = index.find(key);
    if (i < 0) throw std::out_of_range("writeHlob: a reference outside its module or computation");
    return static_cast<uint64_t>(i);
  };
  w.uvar(module.entry() ? indexOf(computationIndex, module.entry()) + 1 : 0);

  for (const auto& computation : computations) {
    e(computation->executionThread());
    const auto& instructions = computation->instructions();
    PointerIndex instructionIndex(instructions.size());
    for (size_t i = 0; i < instructions.size(); ++i)
      instructionIndex.set(instructions[i].get(), static_cast<uint32_t>(i));
    w.uvar(instructions.size());
    for (const auto& instruction : instructions) {
      w.uvar(static_cast<uint64_t>(instruction->opcode()));
      e(instruction->name());
      e(instruction->shape());
      w.uvar(instruction->operands().size());
      for (const Instruction* operand : instruction->operands()) w.uvar(indexOf(instructionIndex, operand));
      w.uvar(instruction->calledComputations().size());
      for (const Computation* called : instruction->calledComputations())
        w.uvar(indexOf(computationIndex, called));
      w.uvar(instruction->controlPredecessors().size());
      for (const Instruction* p : instruction->controlPredecessors()) w.uvar(indexOf(instructionIndex, p));
      // Opcode attributes are allocated only by instructions that have any.
      w.u8(instruction->hasAttributes() ? 1 : 0);
      // Through const: the mutable accessor would unshare a shared block.
      if (instruction->hasAttributes()) e.writeSparse(std::as_const(*instruction).attrs());
      e(instruction->common());
    }
    w.uvar(computation->root() ? indexOf(instructionIndex, computation->root()) + 1 : 0);
  }
  return packContainer(kHlobMagic, kHlobVersion, w.data(), zstdLevel);
}

namespace {

// The previous load's decompressed payload on this thread, kept for its
// capacity: a fresh buffer of a few hundred KiB per load comes from newly
// mapped (or just trimmed) memory and is page-faulted in every time, which
// cost about a third of a load. Larger payloads are not kept.
constexpr size_t kKeptPayloadBytes = size_t{16} << 20;
thread_local std::string tPayloadBuffer;

struct PayloadReturn {
  std::string& payload;
  ~PayloadReturn() {
    if (payload.capacity() <= kKeptPayloadBytes) tPayloadBuffer = std::move(payload);
  }
};

}  // namespace

namespace {

// The text printer writes names, keys and raw values as they are; a decoded
// module must hold only what the parser reads back the same (the property
// that hlob_roundtrip_test checks). These return what is wrong, or "".

std::string rawAttributeProblem(const RawAttribute& raw) {
  if (!isValidName(raw.name)) return "invalid attribute name";
  if (!isRawValue(raw.text))
    return fmt::format("attribute '{}' has a value the text format cannot hold", raw.name);
  return {};
}

// Sorts them as the parser does; duplicates cannot be written as text.
std::string frontendAttributesProblem(FrontendAttributes& attributes) {
  std::sort(attributes.begin(), attributes.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i && attributes[i].key == attributes[i - 1].key) return "duplicate frontend attribute";
    if (attributes[i].raw && !isBraceGroup(attributes[i].value))
      return "unbalanced raw frontend attribute value";
  }
  return {};
}

// The checks the parser makes of `<=[dims]T(perm)`.
std::string iotaProblem(const IotaList& iota, bool permutationNeeded) {
  for (int64_t d : iota.reshapeDims)
    if (d <= 0) return "iota reshape dimensions must be positive";
  if (iota.transposePerm.empty())
    return permutationNeeded && iota.reshapeDims.size() > 1 ? "iota without T(...)" : "";
  if (iota.transposePerm.size() != iota.reshapeDims.size()) return "iota permutation of the wrong rank";
  std::vector<bool> seen(iota.transposePerm.size(), false);
  for (int64_t p : iota.transposePerm) {
    if (p < 0 || static_cast<size_t>(p) >= seen.size() || seen[static_cast<size_t>(p)])
      return "iota transpose is not a permutation";
    seen[static_cast<size_t>(p)] = true;
  }
  return {};
}

// Tiled shardings hold the devices either as a list or as an iota, and only
// the fields of their kind: the printer writes nothing else.
std::string shardingProblem(const Sharding& s) {
  using Kind = Sharding::Kind;
  bool tiled = s.kind == Kind::Tiled;
  if (!tiled && (!s.tileAssignmentDims.empty() || !s.tileAssignmentDevices.empty() || s.iotaDevices ||
                 s.replicateOnLastTileDim || !s.lastTileDims.empty()))
    return "sharding fields of another kind";
  if ((s.kind != Kind::Maximal && s.maximalDevice != 0) || (s.kind != Kind::Named && !s.namedText.empty()) ||
      (s.kind != Kind::Tuple && !s.tupleElements.empty()))
    return "sharding fields of another kind";
  if (s.kind == Kind::Named &&
      (!(s.namedText.starts_with("mesh") || s.namedText.starts_with("maximal_mesh")) ||
       !isBraceGroup("{" + s.namedText + "}")))
    return "named sharding the text format cannot hold";
  if (tiled) {
    int64_t total = 1;
    for (int64_t d : s.tileAssignmentDims)
      if (d <= 0 || __builtin_mul_overflow(total, d, &total)) return "invalid tile assignment dimensions";
    if (s.iotaDevices) {
      if (!s.tileAssignmentDevices.empty()) return "tile assignment given twice";
      if (std::string problem = iotaProblem(*s.iotaDevices, false); !problem.empty()) return problem;
      if (s.iotaDevices->count() != total) return "iota tile assignment size does not match its dimensions";
    } else if (static_cast<int64_t>(s.tileAssignmentDevices.size()) != total) {
      return "tile assignment size does not match its dimensions";
    }
  }
  for (const OpMetadata& m : s.metadata)
    for (const RawAttribute& raw : m.others)
      if (std::string problem = rawAttributeProblem(raw); !problem.empty())
        return "sharding metadata " + problem;
  for (const Sharding& element : s.tupleElements)
    if (std::string problem = shardingProblem(element); !problem.empty()) return problem;
  return {};
}

// The explicit groups of an iota form are derived, as the parser derives them.
std::string replicaGroupsProblem(ReplicaGroups& g) {
  if (!g.isIota)
    return g.iotaNumGroups || g.iotaGroupSize || g.iota != IotaList{}
               ? "replica group fields of the iota form"
               : "";
  if (g.iotaNumGroups < 0 || g.iotaGroupSize < 0) return "iota replica groups need [groups,size]";
  if (std::string problem = iotaProblem(g.iota, true); !problem.empty()) return problem;
  int64_t total;
  if (__builtin_mul_overflow(g.iotaNumGroups, g.iotaGroupSize, &total) || total != g.iota.count())
    return "iota replica group shape does not match the device count";
  std::vector<int64_t> ids = g.iota.expand();
  if (ids.empty() && total != 0) return "iota replica groups are too large";
  g.groups.clear();
  for (int64_t i = 0; i < g.iotaNumGroups; ++i)
    g.groups.emplace_back(ids.begin() + i * g.iotaGroupSize, ids.begin() + (i + 1) * g.iotaGroupSize);
  return {};
}

std::string instructionAttributesProblem(InstructionAttributes& a) {
  if (a.sparsity && !isRawValue(a.sparsity->text)) return "sparsity the text format cannot hold";
  if (a.replicaGroups)
    if (std::string problem = replicaGroupsProblem(*a.replicaGroups); !problem.empty()) return problem;
  return {};
}

std::string commonAttributesProblem(CommonAttributes& common) {
  if (std::string problem = frontendAttributesProblem(common.frontendAttributes); !problem.empty())
    return problem;
  if (common.backendConfig.raw && !isBraceGroup(common.backendConfig.text))
    return "unbalanced raw backend_config";
  if (common.origin && !isRawValue(common.origin->text)) return "origin the text format cannot hold";
  for (const RawAttribute& raw : common.unknown)
    if (std::string problem = rawAttributeProblem(raw); !problem.empty()) return problem;
  for (const RawAttribute& raw : common.metadata->others)
    if (std::string problem = rawAttributeProblem(raw); !problem.empty()) return "metadata " + problem;
  if (common.statistics)
    for (const auto& [key, value] : common.statistics->stats)
      if (!isValidName(key)) return "invalid statistics key";
  if (common.sharding) return shardingProblem(*common.sharding);
  return {};
}

std::string configProblem(ModuleConfig& config) {
  if (config.replicaCount < 1 || config.numPartitions < 1)
    return "replica and partition counts must be positive";
  if (std::string problem = frontendAttributesProblem(config.frontendAttributes); !problem.empty())
    return problem;
  for (const RawAttribute& raw : config.unknown)
    if (std::string problem = rawAttributeProblem(raw); !problem.empty()) return "module " + problem;
  return {};
}

}  // namespace

std::unique_ptr<Module> readHlob(const SourceFile& file, DiagnosticEngine& diags) {
  auto unpacked = unpackContainer(file, kHlobMagic, kHlobVersion.major, "HLO binary (.hlob)", diags,
                                  std::move(tPayloadBuffer));
  if (!unpacked) return nullptr;
  PayloadReturn payloadReturn{unpacked->payload};
  Decoder d(unpacked->payload);
  ByteReader& r = d.in();
  auto fail = [&](std::string message) -> std::unique_ptr<Module> {
    // Offsets inside the decompressed payload are what locate the problem;
    // say so, since they are not file offsets.
    diags.error(SourceLocation{&file, 0},
                fmt::format("corrupt HLO binary: {} (at payload byte {})", message, r.ok() ? r.offset() : r.errorOffset()));
    return nullptr;
  };
  std::string name;
  d(name);
  // Names are written raw by the text printer: one the lexer would not read
  // back (NUL, invalid UTF-8, blanks, punctuation) is a corrupt file.
  if (d.ok() && !isValidName(name)) return fail("invalid module name");
  auto module = std::make_unique<Module>(name);
  d(module->config());
  d(module->stackFrames());
  if (!d.ok()) return fail(r.error());
  if (std::string problem = configProblem(module->config()); !problem.empty()) return fail(problem);
  uint64_t computationCount = r.count(2);
  std::vector<Computation*> computations;
  computations.reserve(computationCount);
  for (uint64_t i = 0; i < computationCount && d.ok(); ++i) {
    std::string computationName;
    d(computationName);
    if (d.ok() && !isValidName(computationName)) return fail("invalid computation name");
    computations.push_back(module->addComputation(std::move(computationName)));
  }
  uint64_t entry = r.uvar();
  if (!d.ok()) return fail(r.error());
  if (entry > computations.size()) return fail("entry computation index out of range");
  if (entry) module->setEntry(computations[entry - 1]);

  std::vector<Instruction*> instructions;
  for (Computation* computation : computations) {
    std::string thread;
    d(thread);
    computation->setExecutionThread(std::move(thread));
    uint64_t count = r.count(4);
    if (!d.ok()) return fail(r.error());
    instructions.clear();
    instructions.reserve(count);
    computation->reserveInstructions(count);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t opcode = r.uvar();
      if (d.ok() && opcode >= static_cast<uint64_t>(kOpcodeCount)) return fail("invalid opcode");
      std::string instructionName;
      d(instructionName);
      if (d.ok() && !isValidName(instructionName)) return fail("invalid instruction name");
      Shape shape;
      d(shape);
      if (!d.ok()) return fail(r.error());
      auto instruction =
          std::make_unique<Instruction>(static_cast<Opcode>(opcode), std::move(instructionName), std::move(shape));
      // Reference lists are built at their exact size: one allocation each.
      uint64_t operandCount = r.count(1);
      instruction->reserveOperands(operandCount);
      for (uint64_t k = 0; k < operandCount && d.ok(); ++k) {
        uint64_t index = r.uvar();
        if (index >= instructions.size()) return fail("operand refers to a later or missing instruction");
        instruction->addOperand(instructions[index]);
      }
      uint64_t calledCount = r.count(1);
      if (calledCount) {
        std::vector<Computation*> called;
        called.reserve(calledCount);
        for (uint64_t k = 0; k < calledCount && d.ok(); ++k) {
          uint64_t index = r.uvar();
          if (index >= computations.size()) return fail("called computation index out of range");
          called.push_back(computations[index]);
        }
        instruction->setCalledComputations(std::move(called));
      }
      uint64_t predecessorCount = r.count(1);
      if (predecessorCount) {
        std::vector<Instruction*> predecessors;
        predecessors.reserve(predecessorCount);
        for (uint64_t k = 0; k < predecessorCount && d.ok(); ++k) {
          uint64_t index = r.uvar();
          if (index >= instructions.size()) return fail("control predecessor refers to a later instruction");
          predecessors.push_back(instructions[index]);
        }
        instruction->setControlPredecessors(std::move(predecessors));
      }
      bool hasAttributes = false;
      d(hasAttributes);
      if (hasAttributes) d.readSparse(instruction->attrs());
      d(instruction->common());
      if (!d.ok()) return fail(r.error());
      if (std::string problem = commonAttributesProblem(instruction->common()); !problem.empty())
        return fail(fmt::format("instruction '{}': {}", instruction->name(), problem));
      if (hasAttributes)
        if (std::string problem = instructionAttributesProblem(instruction->attrs()); !problem.empty())
          return fail(fmt::format("instruction '{}': {}", instruction->name(), problem));
      // `padding=` cannot be written empty.
      if (instruction->opcode() == Opcode::Pad && (!hasAttributes || instruction->attrs().padding.empty()))
        return fail(fmt::format("instruction '{}': pad without padding", instruction->name()));
      instructions.push_back(computation->addInstruction(std::move(instruction)));
    }
    uint64_t root = r.uvar();
    if (!d.ok()) return fail(r.error());
    if (root > instructions.size()) return fail("root index out of range");
    if (root) computation->setRoot(instructions[root - 1]);
  }
  if (!r.atEnd()) return fail("trailing data after the module");
  return module;
}

}  // namespace tpu::hlo
