// The compact fill (support/elided_fill.h), which the LLO assembler and the
// .tpu reader expand, gives every element type exactly the bytes the
// interpreter's elided literal holds.
#include <gtest/gtest.h>

#include <string>

#include "eval/elided.h"
#include "support/elided_fill.h"

namespace tpu {
namespace {

TEST(ElidedFill, SameBytesAsTheInterpreterForEveryElementType) {
  int checked = 0;
  for (int k = 0; k < hlo::kElementTypeCount; ++k) {
    const auto t = static_cast<hlo::ElementType>(k);
    const hlo::ElementTypeInfo& info = hlo::elementTypeInfo(t);
    if (!info.isArray || t == hlo::ElementType::Invalid) continue;
    const hlo::Shape shape = hlo::Shape::array(t, {3, 37});
    const std::string name = "c." + std::string(info.name);
    hlo::Literal lit = eval::fillElidedLiteral(name, shape);
    std::string want(lit.data().begin(), lit.data().end());
    ASSERT_EQ(elidedFillElementBytes(info.name), info.byteSize) << info.name;
    auto got = elidedFillBytes(info.name, elidedFillSeed(name, shape.toString(false)), 3 * 37);
    ASSERT_TRUE(got.has_value()) << info.name;
    EXPECT_EQ(*got, want) << info.name;
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_EQ(elidedFillElementBytes("token"), 0);
  EXPECT_FALSE(elidedFillBytes("tuple", 1, 4).has_value());
}

}  // namespace
}  // namespace tpu
