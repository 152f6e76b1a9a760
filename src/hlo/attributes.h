// Structured instruction and module attributes. Every attribute of the HLO
// text format has a typed representation here; only attributes the parser
// does not know are kept as raw (name, text) pairs (RawAttribute).
// Enum <-> text conversions: toString(x) gives the newest printer spelling;
// parseXxx(text) accepts it (case-insensitively where XLA does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hlo/shape.h"

namespace tpu::hlo {

// ---------------------------------------------------------------- enums

enum class ComparisonDirection : uint8_t { EQ, NE, LT, LE, GT, GE };
enum class ComparisonType : uint8_t { Float, TotalOrder, Signed, Unsigned };
enum class FusionKind : uint8_t { Loop, Input, Output, Custom };
enum class Precision : uint8_t { Default, High, Highest, PackedNibble };
// PrecisionConfig.Algorithm; text `algorithm=dot_bf16_bf16_f32`.
enum class DotAlgorithm : uint8_t {
  Unset, DotAnyF8AnyF8F32, DotAnyF8AnyF8F32FastAccum, DotF16F16F16, DotF16F16F32, DotBf16Bf16Bf16,
  DotBf16Bf16F32, DotBf16Bf16F32X3, DotBf16Bf16F32X6, DotTf32Tf32F32, DotTf32Tf32F32X3, DotF32F32F32,
  DotF64F64F64, DotBf16Bf16F32X9,
};
enum class RngDistribution : uint8_t { Uniform, Normal };
enum class RngAlgorithm : uint8_t { Default, ThreeFry, Philox };
enum class CustomCallSchedule : uint8_t { None, Latest, Earliest };
// Unspecified is what some PyTorch/XLA dumps print; kept as written.
enum class CustomCallApiVersion : uint8_t { Original, StatusReturning, StatusReturningUnified, TypedFfi, Unspecified };
enum class PaddingType : uint8_t { Unset, Valid, Same };  // custom-call padding_type
enum class ConvKind : uint8_t { Unset, Fprop, Wgrad, Dgrad };
enum class FftType : uint8_t { Fft, Ifft, Rfft, Irfft };
enum class TriangularTranspose : uint8_t { NoTranspose, Transpose, Adjoint };
enum class ResultAccuracyMode : uint8_t { Default, Highest, Tolerance };

std::string_view toString(ComparisonDirection v);  // "EQ"
std::string_view toString(ComparisonType v);       // "FLOAT", "TOTALORDER", ...
std::string_view toString(FusionKind v);           // "kLoop"
std::string_view toString(Precision v);            // "default", "high", ...
std::string_view toString(DotAlgorithm v);         // "dot_bf16_bf16_f32" ("unset" for Unset)
std::string_view toString(RngDistribution v);      // "rng_uniform"
std::string_view toString(RngAlgorithm v);         // "rng_default"
std::string_view toString(CustomCallSchedule v);   // "SCHEDULE_LATEST"
std::string_view toString(CustomCallApiVersion v); // "API_VERSION_TYPED_FFI"
std::string_view toString(PaddingType v);          // "PADDING_SAME"
std::string_view toString(ConvKind v);             // "fprop"
std::string_view toString(FftType v);              // "FFT"
std::string_view toString(TriangularTranspose v);  // "NO_TRANSPOSE"
std::string_view toString(ResultAccuracyMode v);   // "default", "highest", "tolerance"

std::optional<ComparisonDirection> parseComparisonDirection(std::string_view s);
std::optional<ComparisonType> parseComparisonType(std::string_view s);
std::optional<FusionKind> parseFusionKind(std::string_view s);
std::optional<Precision> parsePrecision(std::string_view s);
std::optional<DotAlgorithm> parseDotAlgorithm(std::string_view s);
std::optional<RngDistribution> parseRngDistribution(std::string_view s);
std::optional<RngAlgorithm> parseRngAlgorithm(std::string_view s);
std::optional<CustomCallSchedule> parseCustomCallSchedule(std::string_view s);
std::optional<CustomCallApiVersion> parseCustomCallApiVersion(std::string_view s);
std::optional<PaddingType> parsePaddingType(std::string_view s);
std::optional<ConvKind> parseConvKind(std::string_view s);
std::optional<FftType> parseFftType(std::string_view s);
std::optional<TriangularTranspose> parseTriangularTranspose(std::string_view s);

// The comparison type XLA assumes when `type=` is absent: FLOAT for floats
// and complex, SIGNED for signed ints, UNSIGNED for unsigned ints and pred.
ComparisonType defaultComparisonType(ElementType operandType);

// ---------------------------------------------------------------- text helpers

// Appends `s` as a double-quoted C-escaped string (XLA's CEscape: \n \t \r
// \" \' \\ and octal \NNN for other non-printable bytes).
void appendQuoted(std::string& out, std::string_view s);

// Raw values are kept as written (backend_config={...}, unknown attributes)
// and printed verbatim; these say how far the text lexer reads one, so the
// lexer and the .hlob reader (which must reject raw text that would not
// read back) agree. Quoted strings inside are skipped with their escapes.
// One past the `}` closing the group that opens at text[start] == '{', or
// npos when it is not closed.
size_t balancedBraceGroupEnd(std::string_view text, size_t start);
// The end of a raw attribute value starting at `start`: the first ',' or
// newline outside brackets, or a closing bracket without its opening one
// (trailing blanks not included).
size_t rawValueEnd(std::string_view text, size_t start);
// `text` reads back as exactly one brace group / one raw value.
bool isBraceGroup(std::string_view text);
bool isRawValue(std::string_view text);

// ---------------------------------------------------------------- structures

// `slice={[start:limit:stride], ...}`
struct SliceDimension {
  int64_t start = 0;
  int64_t limit = 0;
  int64_t stride = 1;
  bool operator==(const SliceDimension&) const = default;
};

// `padding=lo_hi_interior x ...`
struct PaddingDimension {
  int64_t low = 0;
  int64_t high = 0;
  int64_t interior = 0;
  bool operator==(const PaddingDimension&) const = default;
};

// `window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`
struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t paddingLow = 0;
  int64_t paddingHigh = 0;
  int64_t baseDilation = 1;    // lhs_dilate
  int64_t windowDilation = 1;  // rhs_dilate
  bool windowReversal = false;  // rhs_reversal
  bool operator==(const WindowDimension&) const = default;
};
struct Window {
  std::vector<WindowDimension> dimensions;
  bool operator==(const Window&) const = default;
};

// `dim_labels=b01f_01io->b01f`. Spatial vectors are indexed by spatial
// number (digit); entries are dimension indices in that operand. The rank of
// each operand is 2 + spatial count (positions not named print as `?`).
struct ConvolutionDimensionNumbers {
  int64_t inputBatchDimension = 0;
  int64_t inputFeatureDimension = 0;
  std::vector<int64_t> inputSpatialDimensions;
  int64_t kernelInputFeatureDimension = 0;
  int64_t kernelOutputFeatureDimension = 0;
  std::vector<int64_t> kernelSpatialDimensions;
  int64_t outputBatchDimension = 0;
  int64_t outputFeatureDimension = 0;
  std::vector<int64_t> outputSpatialDimensions;
  bool operator==(const ConvolutionDimensionNumbers&) const = default;
  std::string toString() const;  // "b01f_01io->b01f"
};

struct DotDimensionNumbers {
  std::vector<int64_t> lhsBatchDimensions;
  std::vector<int64_t> lhsContractingDimensions;
  std::vector<int64_t> rhsBatchDimensions;
  std::vector<int64_t> rhsContractingDimensions;
  bool operator==(const DotDimensionNumbers&) const = default;
};

// ragged-dot extras.
struct RaggedDotDimensionNumbers {
  std::vector<int64_t> lhsRaggedDimensions;
  std::vector<int64_t> rhsGroupDimensions;
  bool operator==(const RaggedDotDimensionNumbers&) const = default;
};

struct PrecisionConfig {
  std::vector<Precision> operandPrecision;  // empty = all default
  DotAlgorithm algorithm = DotAlgorithm::Unset;
  bool operator==(const PrecisionConfig&) const = default;
  bool isDefault() const;
};

struct GatherDimensionNumbers {
  std::vector<int64_t> offsetDims;
  std::vector<int64_t> collapsedSliceDims;
  std::vector<int64_t> startIndexMap;
  std::vector<int64_t> operandBatchingDims;
  std::vector<int64_t> startIndicesBatchingDims;
  int64_t indexVectorDim = 0;
  bool operator==(const GatherDimensionNumbers&) const = default;
};

struct ScatterDimensionNumbers {
  std::vector<int64_t> updateWindowDims;
  std::vector<int64_t> insertedWindowDims;
  std::vector<int64_t> scatterDimsToOperandDims;
  std::vector<int64_t> inputBatchingDims;
  std::vector<int64_t> scatterIndicesBatchingDims;
  int64_t indexVectorDim = 0;
  bool operator==(const ScatterDimensionNumbers&) const = default;
};

// Iota device list: reshape iota(prod(reshapeDims)) to reshapeDims, transpose
// by transposePerm, flatten. Used by replica groups and tile assignments.
struct IotaList {
  std::vector<int64_t> reshapeDims;
  std::vector<int64_t> transposePerm;  // empty = identity
  bool operator==(const IotaList&) const = default;
  // The flattened device ids; empty on overflow or a count beyond `limit`.
  std::vector<int64_t> expand(int64_t limit = int64_t{1} << 24) const;
  int64_t count() const;  // product of reshapeDims (saturates at INT64_MAX)
};

// `replica_groups={{0,1},{2,3}}` or `[2,2]<=[4]` / `[2,2]<=[2,2]T(1,0)`.
struct ReplicaGroups {
  std::vector<std::vector<int64_t>> groups;  // explicit form (also filled for iota form)
  // Iota form, kept so the printer prints it back that way.
  bool isIota = false;
  int64_t iotaNumGroups = 0;
  int64_t iotaGroupSize = 0;
  IotaList iota;
  bool operator==(const ReplicaGroups&) const = default;
};

// `output_to_operand_aliasing={{out}: (operand, {index}), ...}`
struct OutputOperandAlias {
  ShapeIndex outputIndex;
  int64_t operandNumber = 0;
  ShapeIndex operandIndex;
  bool operator==(const OutputOperandAlias&) const = default;
};

struct ResultAccuracy {
  ResultAccuracyMode mode = ResultAccuracyMode::Default;
  double atol = 0, rtol = 0;
  int64_t ulps = 0;
  bool operator==(const ResultAccuracy&) const = default;
};

// A raw attribute the parser does not know, printed back verbatim.
struct RawAttribute {
  std::string name;
  std::string text;  // the value token(s) exactly as written
  bool operator==(const RawAttribute&) const = default;
};

// `metadata={op_type="" op_name="" source_file="" source_line=N ...}`.
struct OpMetadata {
  std::string opType;
  std::string opName;
  std::string sourceFile;
  int64_t sourceLine = 0;
  int64_t sourceEndLine = 0;
  int64_t sourceColumn = 0;
  int64_t sourceEndColumn = 0;
  std::vector<std::string> profileType;  // profile_type={...} enum names as written
  std::string deduplicatedName;
  std::string schedulingName;
  int64_t stackFrameId = 0;
  bool preserveLayout = false;
  std::vector<RawAttribute> others;  // unknown sub-attributes, in order
  bool operator==(const OpMetadata&) const = default;
  bool empty() const;
  // The braces' content: `op_type="Add" op_name="x" source_line=3`.
  std::string toString() const;
  // The same text appended to `out`.
  void appendTo(std::string& out) const;
};

// backend_config / custom-call opaque: the text as given. `raw` means it was a
// balanced `{...}` token (JSON, MLIR dict, `{sizes:[4]}`) printed verbatim;
// otherwise `text` is the unescaped value of a quoted string.
struct BackendConfig {
  std::string text;
  bool raw = false;
  bool operator==(const BackendConfig&) const = default;
  bool empty() const { return text.empty() && !raw; }
};

// frontend_attributes: key -> value, kept sorted by key (XLA prints sorted).
// `raw` values were written as a `{...}` token rather than a string.
struct FrontendAttribute {
  std::string key;
  std::string value;
  bool raw = false;
  bool operator==(const FrontendAttribute&) const = default;
};
using FrontendAttributes = std::vector<FrontendAttribute>;

// `statistics={visualizing_index=1,stat_a=0.5}`
struct Statistics {
  int64_t visualizingIndex = 0;
  std::vector<std::pair<std::string, double>> stats;
  bool operator==(const Statistics&) const = default;
};

// Shardings (§7.1).
struct Sharding {
  enum class Kind : uint8_t { Replicated, Maximal, Manual, Unknown, Unreduced, Tiled, Tuple, Named };
  Kind kind = Kind::Replicated;
  int64_t maximalDevice = 0;                  // Maximal
  std::vector<int64_t> tileAssignmentDims;    // Tiled: devices=[...]
  std::vector<int64_t> tileAssignmentDevices; // Tiled, explicit device list
  std::optional<IotaList> iotaDevices;        // Tiled, `<=[..]T(..)` form
  bool replicateOnLastTileDim = false;        // last_tile_dim_replicate
  std::vector<Kind> lastTileDims;             // last_tile_dims={manual, replicated, ...}
  std::vector<Sharding> tupleElements;        // Tuple
  std::optional<int64_t> shardAs;             // shard_as N
  std::optional<int64_t> shardLike;           // shard_like N
  std::vector<OpMetadata> metadata;           // metadata={...} inside the sharding
  std::string namedText;                      // Named (mesh) shardings: the body between the braces
  bool operator==(const Sharding&) const = default;

  static Sharding replicated() { return Sharding{}; }
  static Sharding maximal(int64_t device);
  static Sharding tuple(std::vector<Sharding> elements);
  // Text without surrounding attribute name: `{devices=[2,1]<=[2]}`.
  std::string toString() const;
};

// domain={kind="sharding", entry={..}, exit={..}}
struct DomainMetadata {
  std::string kind;
  std::optional<Sharding> entry;
  std::optional<Sharding> exit;
  bool operator==(const DomainMetadata&) const = default;
};

// Module header: `input_output_alias={ {out}: (param, {index}, may-alias) }`.
struct InputOutputAlias {
  ShapeIndex outputIndex;
  int64_t parameterNumber = 0;
  ShapeIndex parameterIndex;
  bool mustAlias = false;
  bool operator==(const InputOutputAlias&) const = default;
};

// Module header: `buffer_donor={ (param, {index}) }`.
struct BufferDonor {
  int64_t parameterNumber = 0;
  ShapeIndex parameterIndex;
  bool operator==(const BufferDonor&) const = default;
};

// Stack-frame tables (FileNames / FunctionNames / FileLocations / StackFrames).
struct FileLocation {
  int64_t fileNameId = 0;
  int64_t functionNameId = 0;
  int64_t line = 0;
  int64_t endLine = 0;
  int64_t column = 0;
  int64_t endColumn = 0;
  bool operator==(const FileLocation&) const = default;
};
struct StackFrame {
  int64_t fileLocationId = 0;
  int64_t parentFrameId = 0;  // as written: 0 = no parent
  bool operator==(const StackFrame&) const = default;
};
struct StackFrameIndex {
  std::vector<std::string> fileNames;      // id = position + 1
  std::vector<std::string> functionNames;  // id = position + 1
  std::vector<FileLocation> fileLocations;
  std::vector<StackFrame> stackFrames;
  bool operator==(const StackFrameIndex&) const = default;
  bool empty() const {
    return fileNames.empty() && functionNames.empty() && fileLocations.empty() && stackFrames.empty();
  }
};

}  // namespace tpu::hlo
