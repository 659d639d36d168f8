// The provider-neutral helpers of transport.h that need no connection.
#include "oneflow_lite/comm/transport.h"

#include <string>

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace {

constexpr uint32_t kKey = 0x2b;
constexpr uint64_t kBase = 0x1000;
constexpr uint64_t kSize = 64;

Status Check(uint64_t address, uint64_t length, uint32_t access,
             uint32_t granted = kAccessRemoteRead | kAccessRemoteWrite) {
  return CheckRegionAccess(kKey, kBase, kSize, granted, address, length, access);
}

TEST(CheckRegionAccessTest, AcceptsRangesInsideTheRegionOfSizes0And1AndOdd) {
  for (uint64_t length : {uint64_t{0}, uint64_t{1}, uint64_t{7}}) {
    EXPECT_TRUE(Check(kBase, length, kAccessRemoteRead).ok()) << length;
    EXPECT_TRUE(Check(kBase + kSize - length, length, kAccessRemoteWrite).ok()) << length;
  }
  EXPECT_TRUE(Check(kBase, kSize, kAccessRemoteRead).ok());
}

TEST(CheckRegionAccessTest, RefusesRangesOutsideTheRegionNamingThem) {
  const Status before = Check(kBase - 1, 1, kAccessRemoteRead);
  EXPECT_EQ(before.code(), StatusCode::kOutOfRange) << before;
  EXPECT_EQ(before.message(), "range [0xfff, +1) outside region key 0x2b at [0x1000, +64)");
  EXPECT_EQ(Check(kBase + kSize - 6, 7, kAccessRemoteRead).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Check(kBase + kSize + 1, 0, kAccessRemoteRead).code(), StatusCode::kOutOfRange);
  // A length that would wrap around the address space.
  EXPECT_EQ(Check(kBase + 8, ~uint64_t{0}, kAccessRemoteRead).code(), StatusCode::kOutOfRange);
}

TEST(CheckRegionAccessTest, RefusesAccessTheRegionDoesNotGrant) {
  const Status write = Check(kBase, 8, kAccessRemoteWrite, kAccessRemoteRead);
  EXPECT_EQ(write.code(), StatusCode::kPermissionDenied) << write;
  EXPECT_EQ(write.message(), "region key 0x2b does not grant remote write");
  const Status read = Check(kBase, 8, kAccessRemoteRead, kAccessLocalWrite);
  EXPECT_EQ(read.code(), StatusCode::kPermissionDenied) << read;
  EXPECT_EQ(read.message(), "region key 0x2b does not grant remote read");
  // A range outside is reported before missing access.
  EXPECT_EQ(Check(kBase, kSize + 1, kAccessRemoteWrite, 0).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
