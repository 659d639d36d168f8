#include "oneflow_lite/common/little_endian.h"

#include <string>

#include <gtest/gtest.h>

namespace oflite {
namespace little_endian {
namespace {

TEST(LittleEndianTest, LowByteFirst) {
  std::string out;
  AppendU8(&out, 0xab);
  AppendU16(&out, 0x0102);
  AppendU32(&out, 0x03040506u);
  AppendU64(&out, 0x0708090a0b0c0d0eull);
  EXPECT_EQ(out, std::string("\xab\x02\x01\x06\x05\x04\x03"
                             "\x0e\x0d\x0c\x0b\x0a\x09\x08\x07",
                             15));
  const auto* bytes = reinterpret_cast<const uint8_t*>(out.data());
  EXPECT_EQ(LoadU16(bytes + 1), 0x0102);
  EXPECT_EQ(LoadU32(bytes + 3), 0x03040506u);
  EXPECT_EQ(LoadU64(bytes + 7), 0x0708090a0b0c0d0eull);
}

TEST(LittleEndianTest, ReaderRoundTrip) {
  std::string out;
  AppendU64(&out, ~0ull);
  AppendBytes(&out, "abc");
  AppendBytes(&out, "");
  AppendU32(&out, 7);
  Reader reader(out.data(), out.size());
  uint64_t big = 0;
  std::string first = "x", second = "y";
  uint32_t seven = 0;
  reader.ReadU64(&big);
  reader.ReadBytes(&first, 16);
  reader.ReadBytes(&second, 16);
  reader.ReadU32(&seven);
  EXPECT_TRUE(reader.ok());
  EXPECT_TRUE(reader.status("test frame").ok());
  EXPECT_EQ(big, ~0ull);
  EXPECT_EQ(first, "abc");
  EXPECT_EQ(second, "");
  EXPECT_EQ(seven, 7u);
  EXPECT_EQ(reader.remaining(), 0u);
}

// Every strict prefix of a frame fails, and the status says which byte.
TEST(LittleEndianTest, TruncationIsStickyAndNamed) {
  std::string out;
  AppendU32(&out, 1);
  AppendU64(&out, 2);
  for (size_t size = 0; size < out.size(); ++size) {
    Reader reader(out.data(), size);
    uint32_t a = 9;
    uint64_t b = 9;
    reader.ReadU32(&a);
    reader.ReadU64(&b);
    EXPECT_FALSE(reader.ok()) << size;
    EXPECT_EQ(b, 0u);  // a failed read yields zero
    const Status status = reader.status("control frame");
    EXPECT_EQ(status.code(), StatusCode::kDataLoss);
    const std::string at = size < 4 ? "at byte 0 of " : "at byte 4 of ";
    EXPECT_NE(status.message().find("control frame: truncated"), std::string::npos)
        << status.ToString();
    EXPECT_NE(status.message().find(at + std::to_string(size)), std::string::npos)
        << status.ToString();
  }
}

TEST(LittleEndianTest, OversizedLengthFails) {
  std::string out;
  AppendBytes(&out, "hello");
  Reader reader(out.data(), out.size());
  std::string value = "old";
  reader.ReadBytes(&value, 4);
  EXPECT_FALSE(reader.ok());
  EXPECT_EQ(value, "");
  EXPECT_NE(reader.status("key").message().find("at byte 0 of 9"), std::string::npos);
}

}  // namespace
}  // namespace little_endian
}  // namespace oflite
