#include "runner/tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "eval/elided.h"
#include "support/file_io.h"

namespace tpu::runner {

using hlo::ElementType;

namespace {

std::optional<ElementType> elementTypeOfNpy(NpyDType d) {
  switch (d) {
    case NpyDType::Bool: return ElementType::Pred;
    case NpyDType::I8: return ElementType::S8;
    case NpyDType::I16: return ElementType::S16;
    case NpyDType::I32: return ElementType::S32;
    case NpyDType::I64: return ElementType::S64;
    case NpyDType::U8: return ElementType::U8;
    case NpyDType::U16: return ElementType::U16;
    case NpyDType::U32: return ElementType::U32;
    case NpyDType::U64: return ElementType::U64;
    case NpyDType::F16: return ElementType::F16;
    case NpyDType::F32: return ElementType::F32;
    case NpyDType::F64: return ElementType::F64;
    case NpyDType::C64: return ElementType::C64;
    case NpyDType::C128: return ElementType::C128;
  }
  return std::nullopt;
}

std::string dimsText(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

bool isNarrowFloat(ElementType t) { return hlo::elementTypeInfo(t).floatFormat.has_value(); }

}  // namespace

std::optional<hlo::Literal> literalFromNpy(const NpyArray& array, const hlo::Shape& want,
                                           std::string_view what, DiagnosticEngine& diags,
                                           std::string_view owner) {
  if (!want.isArray()) {
    diags.error(fmt::format("{}: the {} has shape {}; only arrays can be given as tensors", what, owner,
                            want.toString(false)));
    return std::nullopt;
  }
  if (array.shape != want.dimensions()) {
    diags.error(fmt::format("{}: shape {} does not match the {}'s {}", what, dimsText(array.shape), owner,
                            want.toString(false)));
    return std::nullopt;
  }
  const ElementType t = want.elementType();
  const ElementType given = *elementTypeOfNpy(array.dtype);
  hlo::Literal lit(hlo::Shape(t, want.dimensions()).withDefaultLayout());
  const int64_t n = lit.elementCount();
  if (given == t) {
    std::memcpy(lit.mutableData().data(), array.data.data(), lit.mutableData().size());
    return lit;
  }
  if ((isNarrowFloat(t)) && array.dtype == NpyDType::F32) {
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, array.data.data() + i * 4, 4);
      lit.setDouble(i, f);
    }
    return lit;
  }
  const auto& info = hlo::elementTypeInfo(t);
  if (info.isInteger && info.bitWidth < 8 &&
      (array.dtype == NpyDType::I8 || array.dtype == NpyDType::U8)) {
    const int64_t lo = info.isSigned ? -(int64_t{1} << (info.bitWidth - 1)) : 0;
    const int64_t hi = info.isSigned ? (int64_t{1} << (info.bitWidth - 1)) - 1 : (int64_t{1} << info.bitWidth) - 1;
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = array.dtype == NpyDType::I8 ? static_cast<int8_t>(array.data[static_cast<size_t>(i)])
                                              : static_cast<uint8_t>(array.data[static_cast<size_t>(i)]);
      if (v < lo || v > hi) {
        diags.error(fmt::format("{}: element {} = {} does not fit {}", what, i, v, hlo::elementTypeName(t)));
        return std::nullopt;
      }
      lit.setInt(i, v);
    }
    return lit;
  }
  diags.error(
      fmt::format("{}: dtype {} does not match the {}'s element type {}{}", what, npyDTypeName(array.dtype),
                  owner, hlo::elementTypeName(t),
                  isNarrowFloat(t) ? " (give float32 values; they are rounded to nearest even)" : ""));
  return std::nullopt;
}

std::optional<hlo::Literal> readNpyLiteral(const std::string& path, const hlo::Shape& want,
                                           std::string_view what, DiagnosticEngine& diags,
                                           std::string_view owner) {
  std::unique_ptr<SourceFile> file = readInputFile(path, diags);
  if (!file) return std::nullopt;
  file->setBinary(true);
  std::optional<NpyArray> arr = readNpy(*file, diags);
  if (!arr) return std::nullopt;
  return literalFromNpy(*arr, want, what, diags, owner);
}

NpyArray npyFromLiteral(const hlo::Literal& literal) {
  NpyArray a;
  const hlo::Shape& s = literal.shape();
  a.shape = s.dimensions();
  const ElementType t = s.elementType();
  const auto& info = hlo::elementTypeInfo(t);
  const int64_t n = literal.elementCount();
  auto copyRaw = [&](NpyDType d) {
    a.dtype = d;
    a.data.assign(reinterpret_cast<const char*>(literal.data().data()), literal.data().size());
  };
  switch (t) {
    case ElementType::Pred: copyRaw(NpyDType::Bool); return a;
    case ElementType::S8: copyRaw(NpyDType::I8); return a;
    case ElementType::S16: copyRaw(NpyDType::I16); return a;
    case ElementType::S32: copyRaw(NpyDType::I32); return a;
    case ElementType::S64: copyRaw(NpyDType::I64); return a;
    case ElementType::U8: copyRaw(NpyDType::U8); return a;
    case ElementType::U16: copyRaw(NpyDType::U16); return a;
    case ElementType::U32: copyRaw(NpyDType::U32); return a;
    case ElementType::U64: copyRaw(NpyDType::U64); return a;
    case ElementType::F16: copyRaw(NpyDType::F16); return a;
    case ElementType::F32: copyRaw(NpyDType::F32); return a;
    case ElementType::F64: copyRaw(NpyDType::F64); return a;
    case ElementType::C64: copyRaw(NpyDType::C64); return a;
    case ElementType::C128: copyRaw(NpyDType::C128); return a;
    default: break;
  }
  if (info.isFloat) {
    a.dtype = NpyDType::F32;
    a.data.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      float f = static_cast<float>(literal.getDouble(i));
      std::memcpy(a.data.data() + i * 4, &f, 4);
    }
    return a;
  }
  // Sub-byte integers: already one (sign-extended or masked) byte each.
  copyRaw(info.isSigned ? NpyDType::I8 : NpyDType::U8);
  return a;
}

std::optional<hlo::Literal> parseInlineLiteral(std::string_view text, const hlo::Shape* want,
                                               std::string_view what, DiagnosticEngine& diags,
                                               std::string_view owner) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    diags.error(fmt::format("{}: '{}' is neither @FILE.npy nor an inline value like 2x3xf32=1,2,3,4,5,6", what, text));
    return std::nullopt;
  }
  std::string_view head = text.substr(0, eq), body = text.substr(eq + 1);
  std::vector<int64_t> dims;
  std::string_view typeName = head;
  while (true) {
    size_t x = typeName.find('x');
    if (x == std::string_view::npos || x == 0 || typeName.substr(0, x).find_first_not_of("0123456789") != std::string_view::npos)
      break;
    std::string num(typeName.substr(0, x));
    if (num.size() > 12) {
      diags.error(fmt::format("{}: dimension {} is too large", what, num));
      return std::nullopt;
    }
    dims.push_back(std::stoll(num));
    typeName = typeName.substr(x + 1);
  }
  std::optional<ElementType> t = hlo::elementTypeFromName(typeName);
  if (!t || !hlo::isArrayElementType(*t)) {
    diags.error(fmt::format("{}: unknown element type '{}' in '{}'", what, typeName, head));
    return std::nullopt;
  }
  if (hlo::isComplexType(*t)) {
    diags.error(fmt::format("{}: complex values cannot be given inline; use an .npy file", what));
    return std::nullopt;
  }
  hlo::Shape shape = hlo::Shape(*t, dims).withDefaultLayout();
  if (want) {
    if (!want->isArray() || want->elementType() != *t || want->dimensions() != dims) {
      diags.error(fmt::format("{}: {} does not match the {}'s {}", what, shape.toString(false), owner,
                              want->toString(false)));
      return std::nullopt;
    }
  }
  std::vector<std::string> values;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string_view::npos) comma = body.size();
    std::string v(body.substr(pos, comma - pos));
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    while (!v.empty() && v.back() == ' ') v.pop_back();
    values.push_back(v);
    pos = comma + 1;
  }
  const int64_t n = shape.elementCount().value_or(0);
  if (static_cast<int64_t>(values.size()) != n && values.size() != 1) {
    diags.error(fmt::format("{}: {} values given for {} ({} elements)", what, values.size(), shape.toString(false), n));
    return std::nullopt;
  }
  hlo::Literal lit(shape);
  const auto& info = hlo::elementTypeInfo(*t);
  for (int64_t i = 0; i < n; ++i) {
    const std::string& v = values.size() == 1 ? values[0] : values[static_cast<size_t>(i)];
    if (v == "true" || v == "false") {
      lit.setInt(i, v == "true" ? 1 : 0);
      continue;
    }
    try {
      size_t used = 0;
      if (info.isFloat) {
        double d = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        lit.setDouble(i, d);
      } else if (info.isInteger && !info.isSigned) {
        if (!v.empty() && v[0] == '-') throw std::invalid_argument(v);
        uint64_t u = std::stoull(v, &used, 0);
        if (used != v.size()) throw std::invalid_argument(v);
        lit.setUint(i, u);
      } else {
        int64_t s = std::stoll(v, &used, 0);
        if (used != v.size()) throw std::invalid_argument(v);
        if (*t == ElementType::Pred && s != 0 && s != 1) throw std::invalid_argument(v);
        lit.setInt(i, s);
      }
    } catch (const std::exception&) {
      diags.error(fmt::format("{}: '{}' is not a valid {} value", what, v, hlo::elementTypeName(*t)));
      return std::nullopt;
    }
  }
  return lit;
}

hlo::Literal randomLiteral(const hlo::Shape& shape, uint64_t seed, int64_t index) {
  hlo::Shape s = shape;
  s.setDefaultLayoutIfMissing();
  return eval::fillElidedLiteral(fmt::format("seed={}/parameter={}", seed, index), s);
}

namespace {

std::string formatElement(const hlo::Literal& l, int64_t i) {
  const ElementType t = l.shape().elementType();
  const auto& info = hlo::elementTypeInfo(t);
  if (t == ElementType::Pred) return l.getInt(i) ? "true" : "false";
  if (info.isComplex) {
    auto c = l.getComplex(i);
    if (t == ElementType::C64) return fmt::format("({}, {})", static_cast<float>(c.real()), static_cast<float>(c.imag()));
    return fmt::format("({}, {})", c.real(), c.imag());
  }
  if (info.isFloat) {
    double d = l.getDouble(i);
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (t == ElementType::F64) return fmt::format("{}", d);
    return fmt::format("{}", static_cast<float>(d));
  }
  if (info.isSigned) return fmt::format("{}", l.getInt(i));
  return fmt::format("{}", l.getUint(i));
}

}  // namespace

namespace {

void formatLevel(const hlo::Literal& l, const std::vector<int64_t>& dims, size_t d, int64_t base, bool summarize,
                 std::string& out) {
  constexpr int64_t kEdge = 3;
  const int64_t n = dims[d];
  out += '{';
  const bool cut = summarize && n > 2 * kEdge;
  bool first = true;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdge) {
      out += ", ...";
      i = n - kEdge;
    }
    if (!first) out += ", ";
    first = false;
    const int64_t lin = base * n + i;
    if (d + 1 == dims.size()) out += formatElement(l, lin);
    else formatLevel(l, dims, d + 1, lin, summarize, out);
  }
  out += '}';
}

}  // namespace

std::string formatLiteral(const hlo::Literal& literal, int64_t summarizeAbove) {
  const hlo::Shape& s = literal.shape();
  if (s.isTuple()) {
    std::string out = "(";
    for (size_t i = 0; i < literal.tupleElements().size(); ++i) {
      if (i) out += ", ";
      out += formatLiteral(literal.tupleElements()[i], summarizeAbove);
    }
    return out + ")";
  }
  if (!s.isArray()) return s.toString(false);
  std::string out = s.toString(false) + " ";
  const auto& dims = s.dimensions();
  if (dims.empty()) return out + formatElement(literal, 0);
  formatLevel(literal, dims, 0, 0, summarizeAbove >= 0 && literal.elementCount() > summarizeAbove, out);
  return out;
}

std::vector<const hlo::Literal*> flattenLiteral(const hlo::Literal& literal) {
  std::vector<const hlo::Literal*> out;
  if (literal.isTuple()) {
    for (const hlo::Literal& e : literal.tupleElements()) {
      auto sub = flattenLiteral(e);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  } else {
    out.push_back(&literal);
  }
  return out;
}

std::optional<std::string> compareLiterals(const hlo::Literal& got, const hlo::Literal& expected, double atol,
                                           double rtol, double scaled, bool nanMatchesAny) {
  const hlo::Shape& gs = got.shape();
  const hlo::Shape& es = expected.shape();
  if (gs.dimensions() != es.dimensions())
    return fmt::format("shape {} differs from the expected {}", gs.toString(false), es.toString(false));
  const auto& info = hlo::elementTypeInfo(gs.elementType());
  const int64_t n = got.elementCount();
  auto indexText = [&](int64_t i) {
    std::vector<int64_t> idx(gs.dimensions().size());
    for (size_t d = idx.size(); d-- > 0;) {
      idx[d] = i % gs.dimensions()[d];
      i /= gs.dimensions()[d];
    }
    return fmt::format("[{}]", fmt::join(idx, ", "));
  };
  // Scaled tolerances: root mean square of the finite expected magnitudes
  // around each element: the block of whole rows (minor dimension) that
  // holds it and at least 128 elements.
  const int64_t rowLength = gs.dimensions().empty() ? 1 : std::max<int64_t>(1, gs.dimensions().back());
  const int64_t blockLength = std::min<int64_t>(std::max<int64_t>(n, 1), rowLength * ((127 + rowLength) / rowLength));
  std::vector<double> blockRms;
  if (scaled > 0 && (info.isFloat || info.isComplex) && n > 0) {
    blockRms.resize(static_cast<size_t>((n + blockLength - 1) / blockLength));
    for (size_t b = 0; b < blockRms.size(); ++b) {
      double sum = 0;
      int64_t count = 0;
      for (int64_t i = static_cast<int64_t>(b) * blockLength; i < std::min(n, static_cast<int64_t>(b + 1) * blockLength); ++i) {
        double m = info.isComplex ? std::abs(expected.getComplex(i)) : std::fabs(expected.getDouble(i));
        if (!std::isfinite(m)) continue;
        sum += m * m;
        ++count;
      }
      blockRms[b] = count ? std::sqrt(sum / static_cast<double>(count)) : 0;
    }
  }
  auto atolAt = [&](int64_t i) {
    if (blockRms.empty()) return atol;
    return std::max(atol, scaled * blockRms[static_cast<size_t>(i / blockLength)]);
  };
  double elementAtol = atol;
  // NaN matches NaN and an infinity only itself; finite values within tolerance.
  auto realSame = [&](double g, double e) {
    if (std::isnan(g) || std::isnan(e)) return nanMatchesAny || (std::isnan(g) && std::isnan(e));
    if (std::isinf(g) || std::isinf(e)) return g == e;
    return std::fabs(g - e) <= elementAtol + rtol * std::fabs(e);
  };
  for (int64_t i = 0; i < n; ++i) {
    bool same;
    elementAtol = atolAt(i);
    if (info.isComplex) {
      auto g = got.getComplex(i), e = expected.getComplex(i);
      bool finite = std::isfinite(g.real()) && std::isfinite(g.imag()) && std::isfinite(e.real()) &&
                    std::isfinite(e.imag());
      // Non-finite parts (random bits, overflow) compare part by part.
      same = finite ? std::abs(g - e) <= elementAtol + rtol * std::abs(e)
                    : realSame(g.real(), e.real()) && realSame(g.imag(), e.imag());
    } else if (info.isFloat) {
      same = realSame(got.getDouble(i), expected.getDouble(i));
    } else if (info.isInteger && !info.isSigned) {
      same = got.getUint(i) == expected.getUint(i);
    } else {
      same = got.getInt(i) == expected.getInt(i);
    }
    if (!same) {
      std::string tol = info.isFloat || info.isComplex ? fmt::format(" (atol {}, rtol {})", elementAtol, rtol) : " (exact)";
      return fmt::format("element {} differs: got {}, expected {}{}", indexText(i), formatElement(got, i),
                         formatElement(expected, i), tol);
    }
  }
  return std::nullopt;
}

}  // namespace tpu::runner
