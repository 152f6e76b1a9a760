#include "support/bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tpu {
namespace {

TEST(ByteWriter, RoundTripsThroughTheReaderAcrossGrowth) {
  ByteWriter w;
  // Enough values that the storage grows many times, varints of every length.
  for (int i = 0; i < 5000; ++i) {
    w.uvar(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL >> (i % 64));
    w.svar(-i * 1000003LL);
    w.u8(static_cast<uint8_t>(i));
    w.u16(static_cast<uint16_t>(i * 7));
    w.u32(static_cast<uint32_t>(i * 77));
    w.u64(static_cast<uint64_t>(i) << 40);
    w.f64(i * 0.25);
    w.str(std::string(static_cast<size_t>(i % 40), 'a' + i % 26));
  }
  w.uvar(~uint64_t{0});
  std::string bytes = w.take();
  ByteReader r(bytes);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(r.uvar(), static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL >> (i % 64));
    ASSERT_EQ(r.svar(), -i * 1000003LL);
    ASSERT_EQ(r.u8(), static_cast<uint8_t>(i));
    ASSERT_EQ(r.u16(), static_cast<uint16_t>(i * 7));
    ASSERT_EQ(r.u32(), static_cast<uint32_t>(i * 77));
    ASSERT_EQ(r.u64(), static_cast<uint64_t>(i) << 40);
    ASSERT_EQ(r.f64(), i * 0.25);
    ASSERT_EQ(r.str(), std::string(static_cast<size_t>(i % 40), 'a' + i % 26));
  }
  EXPECT_EQ(r.uvar(), ~uint64_t{0});
  EXPECT_TRUE(r.atEnd());
  EXPECT_TRUE(r.ok());
}

TEST(ByteWriter, DataIsExactlyTheBytesWritten) {
  ByteWriter w;
  EXPECT_EQ(w.size(), 0u);
  EXPECT_TRUE(w.data().empty());
  w.reserve(1000);  // capacity only: nothing written
  EXPECT_EQ(w.size(), 0u);
  w.uvar(300);  // 0xac 0x02
  w.bytes("xy");
  EXPECT_EQ(w.data(), std::string_view("\xac\x02xy", 4));
  ByteWriter moved(std::move(w));
  EXPECT_EQ(moved.data(), std::string_view("\xac\x02xy", 4));
  EXPECT_EQ(moved.take(), std::string("\xac\x02xy", 4));
  EXPECT_EQ(moved.size(), 0u);
}

}  // namespace
}  // namespace tpu
