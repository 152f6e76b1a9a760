// HLO instructions. An Instruction is owned by its Computation; operands are
// Instruction pointers into the same computation. Users are not tracked
// (Computation::computeUsers() builds the map when a pass needs it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hlo/attributes.h"
#include "hlo/heap_optional.h"
#include "hlo/inline_vector.h"
#include "hlo/literal.h"
#include "hlo/opcode.h"
#include "hlo/shape.h"
#include "hlo/shared_value.h"
#include "support/source.h"

namespace tpu::hlo {

class Computation;

// Opcode-specific attributes. Each field lists the opcodes (and text names)
// that use it; other opcodes leave it at its default. Defaults are the
// values meaning "absent" in the text. The larger structures that few
// opcodes use are SharedValues (read with `->`, written with mutate()):
// 16 bytes each while default, which keeps this struct, allocated for most
// instructions, small.
struct InstructionAttributes {
  // broadcast/transpose/reverse/reduce/concatenate/map/sort/all-gather/
  // reduce-scatter/all-to-all(split dim; empty = tuple form)/get-dimension-size/
  // set-dimension-size/scan: `dimensions={...}`.
  std::vector<int64_t> dimensions;
  int64_t tupleIndex = 0;         // get-tuple-element `index=`
  int64_t parameterNumber = 0;    // parameter(N)
  HeapOptional<std::vector<bool>> parameterReplication;  // parameter_replication={..}
  int64_t iotaDimension = 0;      // iota_dimension=
  int64_t inferredDimension = -1; // reshape inferred_dimension= (-1 = absent)
  HeapOptional<Literal> literal; // constant(...) payload; custom-call literal=

  std::vector<SliceDimension> slice;            // slice={...}
  std::vector<int64_t> dynamicSliceSizes;       // dynamic-slice dynamic_slice_sizes=
  std::vector<PaddingDimension> padding;        // pad padding=
  std::optional<Window> window;                 // convolution, reduce-window, select-and-scatter, custom-call
  HeapOptional<ConvolutionDimensionNumbers> convDims;  // dim_labels= (convolution, custom-call)
  int64_t featureGroupCount = 1;
  int64_t batchGroupCount = 1;
  ConvKind convKind = ConvKind::Unset;          // conv_kind= (parsed, printed when set)
  SharedValue<DotDimensionNumbers> dotDims;                  // dot, ragged-dot, scaled-dot
  SharedValue<RaggedDotDimensionNumbers> raggedDotDims;      // ragged-dot
  SharedValue<PrecisionConfig> precision;                    // operand_precision=, algorithm= (dot family, convolution, custom-call)
  HeapOptional<RawAttribute> sparsity;         // dot sparsity= (kept as written)

  ComparisonDirection comparisonDirection = ComparisonDirection::EQ;  // compare direction=
  // compare type=; the parser fills in defaultComparisonType(operand type) when absent.
  ComparisonType comparisonType = ComparisonType::Float;
  FusionKind fusionKind = FusionKind::Loop;      // fusion kind=

  // custom-call
  std::string customCallTarget;
  CustomCallApiVersion apiVersion = CustomCallApiVersion::Original;
  bool customCallHasSideEffect = false;
  HeapOptional<std::vector<Shape>> operandLayoutConstraints;
  CustomCallSchedule customCallSchedule = CustomCallSchedule::None;
  PaddingType paddingType = PaddingType::Unset;
  std::vector<OutputOperandAlias> outputToOperandAliasing;  // custom-call, fusion, async-start

  // collectives
  HeapOptional<ReplicaGroups> replicaGroups;   // replica_groups= (always printed for collectives)
  std::optional<int64_t> channelId;
  bool constrainLayout = false;
  bool useGlobalDeviceIds = false;
  std::vector<std::pair<int64_t, int64_t>> sourceTargetPairs;  // collective-permute
  std::vector<std::vector<int64_t>> permuteSliceSizes;         // collective-permute slice_sizes=
  bool isHostTransfer = false;                                 // send/recv(-done)

  RngDistribution distribution = RngDistribution::Uniform;  // rng
  RngAlgorithm rngAlgorithm = RngAlgorithm::Default;        // rng-bit-generator algorithm=
  int64_t rngDelta = 0;                                     // rng-get-and-update-state delta=

  bool isStable = false;          // sort
  bool indicesAreSorted = false;  // gather, scatter
  bool uniqueIndices = false;     // scatter
  SharedValue<GatherDimensionNumbers> gatherDims;
  std::vector<int64_t> gatherSliceSizes;  // gather slice_sizes=
  SharedValue<ScatterDimensionNumbers> scatterDims;

  int64_t exponentBits = 0;   // reduce-precision
  int64_t mantissaBits = 0;
  std::string infeedConfig;   // infeed infeed_config=
  std::string outfeedConfig;  // outfeed outfeed_config=
  HeapOptional<Shape> outfeedShape;  // outfeed outfeed_shape=

  bool leftSide = false, lower = false, unitDiagonal = false;  // triangular-solve (lower: cholesky too)
  TriangularTranspose transposeA = TriangularTranspose::NoTranspose;
  FftType fftType = FftType::Fft;
  std::vector<int64_t> fftLength;
  float epsilon = 0;           // batch-norm-*
  int64_t featureIndex = 0;    // batch-norm-*
  HeapOptional<DomainMetadata> domain;
  int64_t k = 0;               // topk
  bool largest = true;         // topk
  int64_t numCarries = 0;      // scan
  bool isReverse = false, isAssociative = false;  // scan
  std::string asyncExecutionThread = "main";      // async-start/update/done
  std::optional<int64_t> crossProgramPrefetchIndex;  // copy-start
  bool isComposite = false;    // call
  SharedValue<ResultAccuracy> resultAccuracy;  // unary math ops

  bool operator==(const InstructionAttributes&) const = default;
};

// Attributes any instruction may carry.
struct CommonAttributes {
  HeapOptional<Sharding> sharding;
  FrontendAttributes frontendAttributes;  // sorted by key
  HeapOptional<Statistics> statistics;
  SharedValue<OpMetadata> metadata;  // shared by instructions that repeat it
  BackendConfig backendConfig;
  HeapOptional<RawAttribute> origin;     // origin={...} (newest XLA), kept as written
  std::vector<RawAttribute> unknown;      // attributes the parser did not know, in order

  bool operator==(const CommonAttributes&) const = default;
};

class Instruction {
 public:
  Instruction(Opcode opcode, std::string name, Shape shape)
      : opcode_(opcode), name_(std::move(name)), shape_(std::move(shape)) {}
  Instruction(const Instruction&) = delete;
  Instruction& operator=(const Instruction&) = delete;
  ~Instruction() { releaseAttributes(); }

  Opcode opcode() const { return opcode_; }
  void setOpcode(Opcode opcode) { opcode_ = opcode; }
  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  const Shape& shape() const { return shape_; }
  Shape& mutableShape() { return shape_; }
  void setShape(Shape shape) { shape_ = std::move(shape); }

  // Up to three operands are stored inside the instruction.
  using OperandList = InlineVector<Instruction*, 3>;
  const OperandList& operands() const { return operands_; }
  Instruction* operand(int64_t i) const { return operands_[static_cast<size_t>(i)]; }
  int64_t operandCount() const { return static_cast<int64_t>(operands_.size()); }
  void addOperand(Instruction* operand) { operands_.push_back(operand); }
  void setOperand(int64_t i, Instruction* operand) { operands_[static_cast<size_t>(i)] = operand; }
  void setOperands(std::span<Instruction* const> operands) { operands_.assign(operands.begin(), operands.end()); }
  void setOperands(std::initializer_list<Instruction*> operands) { operands_.assign(operands.begin(), operands.end()); }
  void reserveOperands(size_t n) { operands_.reserve(n); }

  // Called computations, in XLA's order: while {condition, body};
  // conditional {branch 0, branch 1, ...} (pred selector: {true, false});
  // select-and-scatter {select, scatter}; everything else {to_apply/calls...}.
  const std::vector<Computation*>& calledComputations() const { return called_; }
  void addCalledComputation(Computation* c) { called_.push_back(c); }
  void setCalledComputations(std::vector<Computation*> c) { called_ = std::move(c); }
  // Convenience accessors (nullptr when absent).
  Computation* toApply() const { return called_.empty() ? nullptr : called_[0]; }
  Computation* whileCondition() const { return called_.size() > 0 ? called_[0] : nullptr; }
  Computation* whileBody() const { return called_.size() > 1 ? called_[1] : nullptr; }
  Computation* fusedComputation() const { return toApply(); }

  // Must be earlier instructions of the same computation.
  const std::vector<Instruction*>& controlPredecessors() const { return controlPredecessors_; }
  void addControlPredecessor(Instruction* p) { controlPredecessors_.push_back(p); }
  void setControlPredecessors(std::vector<Instruction*> p) { controlPredecessors_ = std::move(p); }

  // Opcode-specific attributes; allocated on first mutable access (most
  // instructions have none), the const accessor returns defaults until then.
  // The block may be shared with copies of this instruction
  // (shareAttributesOf): the mutable accessor copies it first when it is,
  // so a reference it returned stays valid until the next mutable access.
  InstructionAttributes& attrs() {
    if (!attrs_ || attrs_->references.load(std::memory_order_acquire) != 1) unshareAttributes();
    return attrs_->value;
  }
  const InstructionAttributes& attrs() const { return attrs_ ? attrs_->value : defaultAttributes(); }
  bool hasAttributes() const { return attrs_ != nullptr; }
  // Gives this instruction the attributes of `other` by sharing its block
  // (a reference count, not a copy of every field): what a copy of an
  // instruction does, the fusion cost model's candidates above all.
  void shareAttributesOf(const Instruction& other);
  static const InstructionAttributes& defaultAttributes();
  CommonAttributes& common() { return common_; }
  const CommonAttributes& common() const { return common_; }
  // Shortcuts into common().
  const OpMetadata& metadata() const { return *common_.metadata; }
  const HeapOptional<Sharding>& sharding() const { return common_.sharding; }
  const BackendConfig& backendConfig() const { return common_.backendConfig; }

  // Constant payload (constant instructions).
  const Literal& literal() const { return *attrs().literal; }

  Computation* parent() const { return parent_; }
  void setParent(Computation* parent) { parent_ = parent; }
  bool isRoot() const;

  // Side effects: side-effecting opcodes, custom_call_has_side_effect,
  // collectives and async pairs around them.
  bool hasSideEffect() const;

  SourceLocation location() const { return location_; }
  void setLocation(SourceLocation loc) { location_ = loc; }

 private:
  Opcode opcode_;
  std::string name_;
  Shape shape_;
  OperandList operands_;
  std::vector<Computation*> called_;
  std::vector<Instruction*> controlPredecessors_;
  struct SharedAttributes {
    std::atomic<uint32_t> references{1};
    InstructionAttributes value;
  };
  void unshareAttributes();
  void releaseAttributes();
  SharedAttributes* attrs_ = nullptr;  // null: the defaults
  CommonAttributes common_;
  Computation* parent_ = nullptr;
  SourceLocation location_;
};

}  // namespace tpu::hlo
