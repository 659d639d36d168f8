#include "oneflow_lite/common/id.h"

#include <gtest/gtest.h>

#include <set>

namespace oflite {
namespace {

TEST(TaskIdTest, RoundTripOverFieldMatrix) {
  std::set<int64_t> seen;
  for (int64_t machine : {0, 1, 3, 32767}) {
    for (int32_t type : {1, 2, 15}) {
      for (int32_t dev : {0, 1, 7, 255}) {
        for (int32_t stream : {0, 1, 255}) {
          for (int64_t task : {int64_t{0}, int64_t{1}, int64_t{12345}, (int64_t{1} << 28) - 1}) {
            TaskIdParts p{{machine, type, dev, stream}, task};
            auto id = EncodeTaskId(p);
            ASSERT_TRUE(id.ok()) << id.status();
            EXPECT_GE(*id, 0);
            EXPECT_TRUE(seen.insert(*id).second) << "duplicate id";
            auto back = DecodeTaskId(*id);
            ASSERT_TRUE(back.ok());
            EXPECT_EQ(*back, p);
            EXPECT_EQ(MachineOfTaskId(*id), machine);
          }
        }
      }
    }
  }
}

TEST(TaskIdTest, ExactBitLayout) {
  auto id = EncodeTaskId({{1, 2, 3, 4}, 5});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, (int64_t{1} << 48) | (int64_t{2} << 44) | (int64_t{3} << 36) |
                     (int64_t{4} << 28) | 5);
  EXPECT_EQ(TaskIdToString(*id), "m1/cuda3/s4/t5");
}

TEST(TaskIdTest, OutOfRangeFieldsAreErrorsNamingTheField) {
  auto bad_machine = EncodeTaskId({{32768, 1, 0, 0}, 0});
  ASSERT_FALSE(bad_machine.ok());
  EXPECT_NE(bad_machine.status().message().find("machine"), std::string::npos);
  auto bad_dev = EncodeTaskId({{0, 1, 256, 0}, 0});
  ASSERT_FALSE(bad_dev.ok());
  EXPECT_NE(bad_dev.status().message().find("device_index"), std::string::npos);
  EXPECT_FALSE(EncodeTaskId({{0, 16, 0, 0}, 0}).ok());
  EXPECT_FALSE(EncodeTaskId({{0, 1, 0, 256}, 0}).ok());
  EXPECT_FALSE(EncodeTaskId({{0, 1, 0, 0}, int64_t{1} << 28}).ok());
  EXPECT_FALSE(EncodeTaskId({{-1, 1, 0, 0}, 0}).ok());
  EXPECT_FALSE(DecodeTaskId(-5).ok());
}

TEST(TaskIdTest, StreamKeyGroupsTasksOfOneStream) {
  auto a = EncodeTaskId({{2, 1, 1, 3}, 10});
  auto b = EncodeTaskId({{2, 1, 1, 3}, 99});
  auto c = EncodeTaskId({{2, 1, 1, 4}, 10});
  EXPECT_EQ(StreamKeyOfTaskId(*a), StreamKeyOfTaskId(*b));
  EXPECT_NE(StreamKeyOfTaskId(*a), StreamKeyOfTaskId(*c));
}

}  // namespace
}  // namespace oflite
