// The elided-constant stream (recipe in eval/elided.h; generator in
// support/elided_fill.h, shared by the interpreter, the LLO assembler and
// the .tpu reader) covers every array element type with the literal's own
// storage, and its values are pinned: a digest of each type's bytes, taken
// from the interpreter's fill before the two copies of the generator became
// one, so a changed stream (which would change every model with stripped
// weights) fails here.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "eval/elided.h"
#include "support/elided_fill.h"

namespace tpu {
namespace {

TEST(ElidedFill, EveryElementTypeHasItsStorageAndItsPinnedStream) {
  // FNV-1a 64 (elidedFillSeed's hash) of the 3x37 literal named "c.<type>".
  const std::map<std::string, uint64_t> digest = {
      {"pred", 0xf4c1dd51800657d9ull},
      {"s1", 0x4edb73a76847901aull},
      {"s2", 0x4367562762461bf9ull},
      {"s4", 0xb0b0c98eef24e4eaull},
      {"s8", 0xf67ee9ddadcac67eull},
      {"s16", 0x83869bea930a5939ull},
      {"s32", 0x6a2b2aedc201414full},
      {"s64", 0xb07a49f3092d686aull},
      {"u1", 0x4bb0718a7aef2349ull},
      {"u2", 0x958f6135b0904ef3ull},
      {"u4", 0x7af60888753526a1ull},
      {"u8", 0x2ef016620b03b569ull},
      {"u16", 0x09bf87a9b1f40529ull},
      {"u32", 0x6981463f4dde0a2full},
      {"u64", 0x81c8774f1c5356ffull},
      {"f16", 0x9d8227d9ff9e10bbull},
      {"bf16", 0xca50f18436698fa3ull},
      {"f32", 0xf1ea73725ea10c68ull},
      {"f64", 0xd04fc7f9d143c28aull},
      {"f8e5m2", 0xa08032f5edf80f4eull},
      {"f8e4m3", 0x90bdabed538a7fedull},
      {"f8e4m3fn", 0xe0cfd38657de510eull},
      {"f8e4m3b11fnuz", 0x66fd85e83af98436ull},
      {"f8e5m2fnuz", 0x06de03f0a836a9bfull},
      {"f8e4m3fnuz", 0xd83cc1f25627f7deull},
      {"f8e3m4", 0x3161bbe2cadd24bfull},
      {"f8e8m0fnu", 0xa512654d4a996a94ull},
      {"f4e2m1fn", 0xe26990f00872458bull},
      {"f6e2m3fn", 0xc007d3eda74dfa97ull},
      {"f6e3m2fn", 0xab8a0fe0297902d5ull},
      {"c64", 0x00563f067b4b1a0bull},
      {"c128", 0x8801f129b39ee4a2ull},
  };
  int checked = 0;
  for (int k = 0; k < hlo::kElementTypeCount; ++k) {
    const auto t = static_cast<hlo::ElementType>(k);
    const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
    if (!info.isArray || t == hlo::ElementType::Invalid) continue;
    const hlo::Shape shape = hlo::Shape::array(t, {3, 37});
    const std::string name = "c." + std::string(info.name);
    ASSERT_EQ(elidedFillElementBytes(info.name), info.byteSize) << info.name;
    auto bytes = elidedFillBytes(info.name, elidedFillSeed(name, shape.toString(false)), 3 * 37);
    ASSERT_TRUE(bytes.has_value()) << info.name;
    hlo::Literal lit = eval::fillElidedLiteral(name, shape);
    ASSERT_EQ(bytes->size(), lit.data().size()) << info.name;
    auto want = digest.find(std::string(info.name));
    ASSERT_NE(want, digest.end()) << info.name << ": a new element type needs its digest";
    EXPECT_EQ(elidedFillSeed(*bytes, ""), want->second) << info.name;
    EXPECT_EQ(std::string(lit.data().begin(), lit.data().end()), *bytes) << info.name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(digest.size()));
  EXPECT_EQ(elidedFillElementBytes("token"), 0);
  EXPECT_FALSE(elidedFillBytes("tuple", 1, 4).has_value());
}

}  // namespace
}  // namespace tpu
