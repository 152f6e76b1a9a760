#include "hlo/attributes.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

namespace tpu::hlo {

namespace {

template <typename E, size_t N>
std::string_view lookupName(const std::array<std::string_view, N>& names, E v) {
  size_t i = static_cast<size_t>(v);
  return i < N ? names[i] : std::string_view("?");
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

template <typename E, size_t N>
std::optional<E> lookupValue(const std::array<std::string_view, N>& names, std::string_view s,
                             bool ignoreCase) {
  for (size_t i = 0; i < N; ++i)
    if (ignoreCase ? equalsIgnoreCase(names[i], s) : names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 6> kDirections = {"EQ", "NE", "LT", "LE", "GT", "GE"};
constexpr std::array<std::string_view, 4> kCompareTypes = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
constexpr std::array<std::string_view, 4> kFusionKinds = {"kLoop", "kInput", "kOutput", "kCustom"};
constexpr std::array<std::string_view, 4> kPrecisions = {"default", "high", "highest", "packed_nibble"};
constexpr std::array<std::string_view, 14> kAlgorithms = {
    "unset", "dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum", "dot_f16_f16_f16",
    "dot_f16_f16_f32", "dot_bf16_bf16_bf16", "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6", "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32",
    "dot_f64_f64_f64", "dot_bf16_bf16_f32_x9"};
constexpr std::array<std::string_view, 2> kDistributions = {"rng_uniform", "rng_normal"};
constexpr std::array<std::string_view, 3> kRngAlgorithms = {"rng_default", "rng_three_fry", "rng_philox"};
constexpr std::array<std::string_view, 3> kSchedules = {"SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"};
constexpr std::array<std::string_view, 5> kApiVersions = {"API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                                                          "API_VERSION_STATUS_RETURNING_UNIFIED",
                                                          "API_VERSION_TYPED_FFI", "API_VERSION_UNSPECIFIED"};
constexpr std::array<std::string_view, 3> kPaddingTypes = {"PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"};
constexpr std::array<std::string_view, 4> kConvKinds = {"unset", "fprop", "wgrad", "dgrad"};
constexpr std::array<std::string_view, 4> kFftTypes = {"FFT", "IFFT", "RFFT", "IRFFT"};
constexpr std::array<std::string_view, 3> kTransposes = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
constexpr std::array<std::string_view, 3> kAccuracyModes = {"default", "highest", "tolerance"};

}  // namespace

std::string_view toString(ComparisonDirection v) { return lookupName(kDirections, v); }
std::string_view toString(ComparisonType v) { return lookupName(kCompareTypes, v); }
std::string_view toString(FusionKind v) { return lookupName(kFusionKinds, v); }
std::string_view toString(Precision v) { return lookupName(kPrecisions, v); }
std::string_view toString(DotAlgorithm v) { return lookupName(kAlgorithms, v); }
std::string_view toString(RngDistribution v) { return lookupName(kDistributions, v); }
std::string_view toString(RngAlgorithm v) { return lookupName(kRngAlgorithms, v); }
std::string_view toString(CustomCallSchedule v) { return lookupName(kSchedules, v); }
std::string_view toString(CustomCallApiVersion v) { return lookupName(kApiVersions, v); }
std::string_view toString(PaddingType v) { return lookupName(kPaddingTypes, v); }
std::string_view toString(ConvKind v) { return lookupName(kConvKinds, v); }
std::string_view toString(FftType v) { return lookupName(kFftTypes, v); }
std::string_view toString(TriangularTranspose v) { return lookupName(kTransposes, v); }
std::string_view toString(ResultAccuracyMode v) { return lookupName(kAccuracyModes, v); }

std::optional<ComparisonDirection> parseComparisonDirection(std::string_view s) {
  return lookupValue<ComparisonDirection>(kDirections, s, false);
}
std::optional<ComparisonType> parseComparisonType(std::string_view s) {
  return lookupValue<ComparisonType>(kCompareTypes, s, false);
}
std::optional<FusionKind> parseFusionKind(std::string_view s) {
  return lookupValue<FusionKind>(kFusionKinds, s, false);
}
std::optional<Precision> parsePrecision(std::string_view s) {
  return lookupValue<Precision>(kPrecisions, s, true);
}
std::optional<DotAlgorithm> parseDotAlgorithm(std::string_view s) {
  if (s.size() > 4 && equalsIgnoreCase(s.substr(0, 4), "alg_")) s.remove_prefix(4);
  return lookupValue<DotAlgorithm>(kAlgorithms, s, true);
}
std::optional<RngDistribution> parseRngDistribution(std::string_view s) {
  return lookupValue<RngDistribution>(kDistributions, s, true);
}
std::optional<RngAlgorithm> parseRngAlgorithm(std::string_view s) {
  return lookupValue<RngAlgorithm>(kRngAlgorithms, s, true);
}
std::optional<CustomCallSchedule> parseCustomCallSchedule(std::string_view s) {
  return lookupValue<CustomCallSchedule>(kSchedules, s, true);
}
std::optional<CustomCallApiVersion> parseCustomCallApiVersion(std::string_view s) {
  return lookupValue<CustomCallApiVersion>(kApiVersions, s, true);
}
std::optional<PaddingType> parsePaddingType(std::string_view s) {
  return lookupValue<PaddingType>(kPaddingTypes, s, true);
}
std::optional<ConvKind> parseConvKind(std::string_view s) { return lookupValue<ConvKind>(kConvKinds, s, true); }
std::optional<FftType> parseFftType(std::string_view s) { return lookupValue<FftType>(kFftTypes, s, true); }
std::optional<TriangularTranspose> parseTriangularTranspose(std::string_view s) {
  return lookupValue<TriangularTranspose>(kTransposes, s, true);
}

ComparisonType defaultComparisonType(ElementType t) {
  const ElementTypeInfo& info = elementTypeInfo(t);
  if (info.isFloat || info.isComplex) return ComparisonType::Float;
  if (info.isInteger && info.isSigned) return ComparisonType::Signed;
  return ComparisonType::Unsigned;
}

namespace {

bool needsEscape(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u < 0x20 || u >= 0x7f || c == '"' || c == '\'' || c == '\\';
}

}  // namespace

void appendQuoted(std::string& out, std::string_view s) {
  out += '"';
  // Runs of plain characters in one append: metadata strings are a large
  // part of real modules' text.
  while (!s.empty()) {
    size_t plain = 0;
    while (plain < s.size() && !needsEscape(s[plain])) ++plain;
    out.append(s.data(), plain);
    s.remove_prefix(plain);
    if (s.empty()) break;
    char c = s.front();
    s.remove_prefix(1);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default: {  // other control bytes and bytes >= 0x7f: octal
        unsigned char u = static_cast<unsigned char>(c);
        out += '\\';
        out += static_cast<char>('0' + ((u >> 6) & 7));
        out += static_cast<char>('0' + ((u >> 3) & 7));
        out += static_cast<char>('0' + (u & 7));
      }
    }
  }
  out += '"';
}

namespace {

// Past the quoted string opening at text[pos] (its closing quote included,
// escapes skipped); the end of `text` when it is not closed.
size_t skipQuoted(std::string_view text, size_t pos) {
  const char quote = text[pos++];
  while (pos < text.size() && text[pos] != quote) pos += text[pos] == '\\' ? 2 : 1;
  return std::min(pos + 1, text.size() + 1);
}

}  // namespace

size_t balancedBraceGroupEnd(std::string_view text, size_t start) {
  if (start >= text.size() || text[start] != '{') return std::string_view::npos;
  int64_t depth = 0;
  for (size_t pos = start; pos < text.size();) {
    char c = text[pos];
    if (c == '"' || c == '\'') {
      pos = skipQuoted(text, pos);
      continue;
    }
    ++pos;
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) return pos;
  }
  return std::string_view::npos;
}

size_t rawValueEnd(std::string_view text, size_t start) {
  int64_t depth = 0;
  size_t pos = start;
  while (pos < text.size()) {
    char c = text[pos];
    if (c == '"' || c == '\'') {
      pos = std::min(skipQuoted(text, pos), text.size());
      continue;
    }
    if (c == '{' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ')' || c == ']') {
      if (depth == 0) break;
      --depth;
    } else if (depth == 0 && (c == ',' || c == '\n')) {
      break;
    }
    ++pos;
  }
  while (pos > start && (text[pos - 1] == ' ' || text[pos - 1] == '\t' || text[pos - 1] == '\r')) --pos;
  return pos;
}

bool isBraceGroup(std::string_view text) { return balancedBraceGroupEnd(text, 0) == text.size(); }

bool isRawValue(std::string_view text) {
  // The lexer skips blanks and comments before the value and ends it at the
  // first newline: a raw value must start with neither.
  if (text.empty() || text[0] == ' ' || text[0] == '\t' || text[0] == '\r' || text[0] == '\n' ||
      text.starts_with("//") || text.starts_with("/*"))
    return false;
  return rawValueEnd(text, 0) == text.size();
}

std::string ConvolutionDimensionNumbers::toString() const {
  auto part = [](std::vector<std::pair<int64_t, char>> named, const std::vector<int64_t>& spatial) {
    for (size_t i = 0; i < spatial.size(); ++i) named.push_back({spatial[i], static_cast<char>('0' + i)});
    int64_t rank = 0;
    for (auto& [d, c] : named) rank = std::max(rank, d + 1);
    rank = std::min<int64_t>(rank, 1024);
    std::string s(static_cast<size_t>(rank), '?');
    for (auto& [d, c] : named)
      if (d >= 0 && d < rank) s[static_cast<size_t>(d)] = c;
    return s;
  };
  return part({{inputBatchDimension, 'b'}, {inputFeatureDimension, 'f'}}, inputSpatialDimensions) + "_" +
         part({{kernelInputFeatureDimension, 'i'}, {kernelOutputFeatureDimension, 'o'}}, kernelSpatialDimensions) +
         "->" + part({{outputBatchDimension, 'b'}, {outputFeatureDimension, 'f'}}, outputSpatialDimensions);
}

bool PrecisionConfig::isDefault() const {
  for (Precision p : operandPrecision)
    if (p != Precision::Default) return false;
  return algorithm == DotAlgorithm::Unset;
}

int64_t IotaList::count() const {
  int64_t n = 1;
  for (int64_t d : reshapeDims) {
    if (d < 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

std::vector<int64_t> IotaList::expand(int64_t limit) const {
  int64_t n = count();
  if (n <= 0 || n > limit) return {};
  size_t rank = reshapeDims.size();
  std::vector<int64_t> perm = transposePerm;
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != rank) return {};
  // Strides of the reshaped iota; walk the transposed index space in row-major order.
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * reshapeDims[i];
  std::vector<int64_t> tdims(rank), tstride(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || static_cast<size_t>(perm[i]) >= rank) return {};
    tdims[i] = reshapeDims[static_cast<size_t>(perm[i])];
    tstride[i] = stride[static_cast<size_t>(perm[i])];
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = 0;
    for (size_t i = 0; i < rank; ++i) v += idx[i] * tstride[i];
    out.push_back(v);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < tdims[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

bool OpMetadata::empty() const { return *this == OpMetadata{}; }

std::string OpMetadata::toString() const {
  std::string out;
  appendTo(out);
  return out;
}

void OpMetadata::appendTo(std::string& out) const {
  const size_t start = out.size();
  auto sep = [&] {
    if (out.size() != start) out += ' ';
  };
  auto str = [&](std::string_view key, const std::string& v) {
    if (v.empty()) return;
    sep();
    out += key;
    out += '=';
    appendQuoted(out, v);
  };
  auto num = [&](std::string_view key, int64_t v) {
    if (v == 0) return;
    sep();
    out += key;
    out += '=';
    out += fmt::format_int(v).c_str();  // not format_to: its growth of `out` was half of printing metadata
  };
  str("op_type", opType);
  str("op_name", opName);
  str("source_file", sourceFile);
  num("source_line", sourceLine);
  num("source_end_line", sourceEndLine);
  num("source_column", sourceColumn);
  num("source_end_column", sourceEndColumn);
  if (!profileType.empty()) {
    sep();
    out += "profile_type={";
    for (size_t i = 0; i < profileType.size(); ++i) {
      if (i) out += ',';
      out += profileType[i];
    }
    out += '}';
  }
  str("deduplicated_name", deduplicatedName);
  if (preserveLayout) {
    sep();
    out += "preserve_layout=true";
  }
  str("scheduling_name", schedulingName);
  num("stack_frame_id", stackFrameId);
  for (const RawAttribute& r : others) {
    sep();
    out += r.name;
    out += '=';
    out += r.text;
  }
}

Sharding Sharding::maximal(int64_t device) {
  Sharding s;
  s.kind = Kind::Maximal;
  s.maximalDevice = device;
  return s;
}

Sharding Sharding::tuple(std::vector<Sharding> elements) {
  Sharding s;
  s.kind = Kind::Tuple;
  s.tupleElements = std::move(elements);
  return s;
}

namespace {

std::string_view shardingKindName(Sharding::Kind k) {
  switch (k) {
    case Sharding::Kind::Replicated: return "replicated";
    case Sharding::Kind::Maximal: return "maximal";
    case Sharding::Kind::Manual: return "manual";
    case Sharding::Kind::Unknown: return "unknown";
    case Sharding::Kind::Unreduced: return "unreduced";
    default: return "?";
  }
}

void appendIntList(std::string& out, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", v[i]);
  }
}

void appendSharding(std::string& out, const Sharding& s) {
  out += '{';
  switch (s.kind) {
    case Sharding::Kind::Tuple:
      for (size_t i = 0; i < s.tupleElements.size(); ++i) {
        if (i) out += ", ";
        if (i && i % 5 == 0) fmt::format_to(std::back_inserter(out), "/*index={}*/", i);
        appendSharding(out, s.tupleElements[i]);
      }
      out += '}';
      return;
    case Sharding::Kind::Named:
      out += s.namedText;
      out += '}';
      return;
    case Sharding::Kind::Maximal: fmt::format_to(std::back_inserter(out), "maximal device={}", s.maximalDevice); break;
    case Sharding::Kind::Tiled:
      out += "devices=[";
      appendIntList(out, s.tileAssignmentDims);
      out += ']';
      if (s.iotaDevices) {
        out += "<=[";
        appendIntList(out, s.iotaDevices->reshapeDims);
        out += ']';
        if (!s.iotaDevices->transposePerm.empty()) {
          out += "T(";
          appendIntList(out, s.iotaDevices->transposePerm);
          out += ')';
        }
      } else {
        appendIntList(out, s.tileAssignmentDevices);
      }
      if (s.replicateOnLastTileDim) out += " last_tile_dim_replicate";
      if (!s.lastTileDims.empty()) {
        out += " last_tile_dims={";
        for (size_t i = 0; i < s.lastTileDims.size(); ++i) {
          if (i) out += ", ";
          out += shardingKindName(s.lastTileDims[i]);
        }
        out += '}';
      }
      break;
    default: out += shardingKindName(s.kind); break;
  }
  if (s.shardAs) fmt::format_to(std::back_inserter(out), " shard_as {}", *s.shardAs);
  if (s.shardLike) fmt::format_to(std::back_inserter(out), " shard_like {}", *s.shardLike);
  if (s.metadata.size() == 1) {
    out += " metadata={";
    out += s.metadata[0].toString();
    out += '}';
  } else if (s.metadata.size() > 1) {
    out += " metadata={";
    for (size_t i = 0; i < s.metadata.size(); ++i) {
      if (i) out += ", ";
      out += '{';
      out += s.metadata[i].toString();
      out += '}';
    }
    out += '}';
  }
  out += '}';
}

}  // namespace

std::string Sharding::toString() const {
  std::string out;
  appendSharding(out, *this);
  return out;
}

}  // namespace tpu::hlo
