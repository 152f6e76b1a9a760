#include "support/npy.h"

#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tpu {
namespace {

std::string fixturePath(const std::string& name) {
  return std::string(TPU_SOURCE_DIR) + "/testdata/eval/npy/" + name;
}

std::string readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<NpyArray> parse(std::string bytes, DiagnosticEngine& diags, std::string name = "t.npy") {
  static std::vector<std::unique_ptr<SourceFile>> keep;  // diagnostics point into the file
  keep.push_back(std::make_unique<SourceFile>(name, std::move(bytes)));
  keep.back()->setBinary(true);
  return readNpy(*keep.back(), diags);
}

template <typename T>
T element(const NpyArray& a, size_t i) {
  T v;
  std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void expectArange(const NpyArray& a) {
  ASSERT_EQ(a.data.size(), 6 * sizeof(T));
  for (size_t i = 1; i < 6; ++i) EXPECT_EQ(element<T>(a, i), static_cast<T>(i)) << i;
}

// Fixtures written by numpy (testdata/eval/npy/make_fixtures.py): every
// dtype, little and big endian.
TEST(Npy, ReadsNumpyFixtures) {
  struct Case {
    std::string suffix;
    NpyDType dtype;
  };
  const Case cases[] = {
      {"bool", NpyDType::Bool}, {"i1", NpyDType::I8},   {"i2", NpyDType::I16}, {"i4", NpyDType::I32},
      {"i8", NpyDType::I64},    {"u1", NpyDType::U8},   {"u2", NpyDType::U16}, {"u4", NpyDType::U32},
      {"u8", NpyDType::U64},    {"f2", NpyDType::F16},  {"f4", NpyDType::F32}, {"f8", NpyDType::F64},
      {"c8", NpyDType::C64},    {"c16", NpyDType::C128},
  };
  for (const Case& c : cases) {
    for (std::string order : {"le_", "be_"}) {
      if (order == "be_" && (c.suffix == "bool" || c.suffix == "i1" || c.suffix == "u1")) continue;
      DiagnosticEngine diags;
      auto a = parse(readFileBytes(fixturePath(order + c.suffix + ".npy")), diags);
      ASSERT_TRUE(a.has_value()) << order << c.suffix << ": " << firstErrorMessage(diags);
      EXPECT_EQ(a->dtype, c.dtype);
      EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
      switch (c.dtype) {
        case NpyDType::Bool:
          for (size_t i = 0; i < 6; ++i) EXPECT_EQ(a->data[i], static_cast<char>(i % 2));
          break;
        case NpyDType::I8: EXPECT_EQ(element<int8_t>(*a, 0), -7); expectArange<int8_t>(*a); break;
        case NpyDType::I16: expectArange<int16_t>(*a); break;
        case NpyDType::I32: expectArange<int32_t>(*a); break;
        case NpyDType::I64: expectArange<int64_t>(*a); break;
        case NpyDType::U8: expectArange<uint8_t>(*a); break;
        case NpyDType::U16: expectArange<uint16_t>(*a); break;
        case NpyDType::U32: expectArange<uint32_t>(*a); break;
        case NpyDType::U64: expectArange<uint64_t>(*a); break;
        case NpyDType::F16:
          // 5.0 in f16 is 0x4500.
          EXPECT_EQ(element<uint16_t>(*a, 5), 0x4500);
          break;
        case NpyDType::F32: expectArange<float>(*a); break;
        case NpyDType::F64: expectArange<double>(*a); break;
        case NpyDType::C64:
          EXPECT_EQ(element<std::complex<float>>(*a, 4), std::complex<float>(4, 4));
          break;
        case NpyDType::C128:
          EXPECT_EQ(element<std::complex<double>>(*a, 5), std::complex<double>(5, 5));
          break;
      }
    }
  }
}

TEST(Npy, ReadsVersions2And3ScalarsAndEmpty) {
  for (std::string name : {"v2_f4.npy", "v3_f4.npy"}) {
    DiagnosticEngine diags;
    auto a = parse(readFileBytes(fixturePath(name)), diags);
    ASSERT_TRUE(a.has_value()) << name << ": " << firstErrorMessage(diags);
    expectArange<float>(*a);
  }
  DiagnosticEngine diags;
  auto s = parse(readFileBytes(fixturePath("scalar_f8.npy")), diags);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(element<double>(*s, 0), 2.5);
  auto e = parse(readFileBytes(fixturePath("empty_f4.npy")), diags);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(e->data.empty());
}

TEST(Npy, RoundTrip) {
  for (int t = 0; t <= static_cast<int>(NpyDType::C128); ++t) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3, 4}, {0, 3}}) {
      NpyArray a;
      a.dtype = static_cast<NpyDType>(t);
      a.shape = shape;
      a.data.resize(static_cast<size_t>(a.elementCount()) * npyDTypeSize(a.dtype));
      for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<char>(i * 7 + 1);
      if (a.dtype == NpyDType::Bool)
        for (auto& c : a.data) c = static_cast<char>(c & 1);
      std::string bytes = writeNpy(a);
      EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u);  // data aligned like numpy
      DiagnosticEngine diags;
      auto b = parse(bytes, diags);
      ASSERT_TRUE(b.has_value()) << firstErrorMessage(diags);
      EXPECT_EQ(b->dtype, a.dtype);
      EXPECT_EQ(b->shape, a.shape);
      EXPECT_EQ(b->data, a.data);
    }
  }
}

TEST(Npy, WriterMatchesNumpyHeader) {
  NpyArray a;
  a.dtype = NpyDType::F32;
  a.shape = {2, 3};
  a.data.assign(24, '\0');
  for (size_t i = 0; i < 6; ++i) {
    float v = static_cast<float>(i);
    std::memcpy(a.data.data() + 4 * i, &v, 4);
  }
  EXPECT_EQ(writeNpy(a), readFileBytes(fixturePath("le_f4.npy")));
}

std::string messageFor(std::string bytes) {
  DiagnosticEngine diags;
  auto a = parse(std::move(bytes), diags);
  EXPECT_FALSE(a.has_value());
  return diags.diagnostics().empty() ? "" : diags.diagnostics()[0].message;
}

std::string v1(std::string dict, std::string data = "") {
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

TEST(Npy, RejectsMalformed) {
  EXPECT_EQ(messageFor(""), "not a .npy file (missing the \\x93NUMPY magic)");
  // Files of another known kind are named (issue 18).
  EXPECT_EQ(
      messageFor("PK\x03\x04"),
      "this is a zip archive (such as NumPy's .npz), not a NumPy array (.npy); save each array of an .npz "
      "archive as its own .npy");
  EXPECT_EQ(messageFor("HloModule m\n"),
            "this is HLO text, not a NumPy array (.npy); lower it with llo-gen, or run it with tpu-run");
  EXPECT_EQ(messageFor("plain text"), "not a .npy file (missing the \\x93NUMPY magic)");
  EXPECT_EQ(messageFor("\x93NUMPY\x01"), ".npy file is truncated in its preamble");
  EXPECT_EQ(messageFor(std::string("\x93NUMPY\x04\x00\x00\x00", 10)),
            "unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)");
  EXPECT_EQ(messageFor(std::string("\x93NUMPY\x01\x00\xff\x00{}", 12)),
            ".npy header length 255 runs past the end of the file (12 bytes)");
  EXPECT_EQ(messageFor(std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12)),
            ".npy header length 2147483647 is too large");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }")),
            "Fortran-order (column-major) .npy arrays are not supported; save with "
            "numpy.ascontiguousarray first");
  EXPECT_EQ(messageFor(readFileBytes(fixturePath("fortran_f4.npy"))),
            "Fortran-order (column-major) .npy arrays are not supported; save with "
            "numpy.ascontiguousarray first");
  EXPECT_EQ(messageFor(readFileBytes(fixturePath("object.npy"))),
            "dtype '|O' in the .npy header: object arrays (pickled Python objects) are not supported");
  EXPECT_EQ(messageFor(readFileBytes(fixturePath("structured.npy"))),
            "malformed .npy header: structured dtypes (a list descriptor) are not supported");
  EXPECT_EQ(messageFor(v1("{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }")),
            "dtype '<f16' in the .npy header: only float16, float32 and float64 are supported");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "abcd")),
            ".npy data is truncated: shape needs more than the 4 bytes present");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "abcdef")),
            ".npy file has 2 unexpected bytes after the array data");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }")),
            "malformed .npy header: negative dimension size in the shape");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, "
                          "99999999999), }")),
            ".npy data is truncated: shape needs more than the 0 bytes present");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False}")), ".npy header lacks the 'shape' key");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}")),
            "malformed .npy header: unexpected character '1' in the header");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 'y'}", "abcd")),
            "unexpected key 'x' in the .npy header");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4' 'fortran_order': False}")),
            "malformed .npy header: expected ',' or '}' in the header dictionary");
  EXPECT_EQ(messageFor(v1("['descr']")), "malformed .npy header: expected '{' at the start of the header dictionary");
  EXPECT_EQ(messageFor(v1("{'descr' '<f4'}")),
            "malformed .npy header: expected ':' after a header key");
  EXPECT_EQ(messageFor(v1("{'descr': 3}")), "malformed .npy header: unexpected character '3' in the header");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': 'no', 'shape': (1,)}", "abcd")),
            "'fortran_order' in the .npy header is not True or False");
  EXPECT_EQ(messageFor(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}")),
            "malformed .npy header: expected ',' or ')' in the shape tuple");
  EXPECT_EQ(messageFor(v1("{'descr': 'zz', 'fortran_order': False, 'shape': ()}")),
            "dtype 'zz' in the .npy header: unrecognised dtype descriptor");
  EXPECT_EQ(messageFor(v1("{'descr': '<i3', 'fortran_order': False, 'shape': ()}")),
            "dtype '<i3' in the .npy header: unsupported integer size");
}

// Every truncation of a valid file is rejected without crashing.
TEST(Npy, AllTruncationsRejected) {
  std::string good = readFileBytes(fixturePath("le_c16.npy"));
  for (size_t n = 0; n < good.size(); ++n) {
    DiagnosticEngine diags;
    EXPECT_FALSE(parse(good.substr(0, n), diags).has_value()) << n;
    EXPECT_TRUE(diags.hasErrors());
  }
}

}  // namespace
}  // namespace tpu
