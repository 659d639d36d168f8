#include "oneflow_lite/runtime/commnet/ring_channels.h"

#include <set>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/common/id.h"

namespace oflite {
namespace {

int64_t TaskId(int64_t machine, int64_t index) {
  TaskIdParts parts;
  parts.stream.machine = machine;
  parts.task_index = index;
  return *EncodeTaskId(parts);
}

// Two ranks build their actors in different orders (each adds its own task
// of every ring); both assign the same dense channels, in key order.
TEST(RingChannelTableTest, EveryRankAssignsTheSameDenseChannels) {
  const std::vector<int64_t> keys = {TaskId(0, 900), TaskId(0, 7), TaskId(0, 1 << 27),
                                     TaskId(0, 8)};
  RingChannelTable rank0, rank1;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(rank0.Add(keys[i], TaskId(0, 2000 + i), "r0-" + std::to_string(i)).ok());
  }
  for (size_t i = keys.size(); i-- > 0;) {
    ASSERT_TRUE(rank1.Add(keys[i], TaskId(1, 3000 + i), "r1-" + std::to_string(i)).ok());
  }
  const std::map<int64_t, uint32_t> want = {{TaskId(0, 7), comm::kCollectiveChannel + 0},
                                            {TaskId(0, 8), comm::kCollectiveChannel + 1},
                                            {TaskId(0, 900), comm::kCollectiveChannel + 2},
                                            {TaskId(0, 1 << 27), comm::kCollectiveChannel + 3}};
  for (const auto& [key, channel] : want) {
    EXPECT_EQ(*rank0.ChannelOf(key), channel);
    EXPECT_EQ(*rank1.ChannelOf(key), channel);
  }
  EXPECT_EQ(rank0.size(), 4u);
}

// Many rings whose keys a 30-bit hash could collide on: all distinct.
TEST(RingChannelTableTest, ChannelsAreDistinctForManyRings) {
  RingChannelTable table;
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < 5000; ++i) keys.push_back(TaskId(0, i * 7919 % (1 << 28)));
  for (int64_t key : keys) ASSERT_TRUE(table.Add(key, key + 1, "t").ok());
  std::set<uint32_t> channels;
  for (int64_t key : keys) {
    StatusOr<uint32_t> channel = table.ChannelOf(key);
    ASSERT_TRUE(channel.ok()) << channel.status();
    EXPECT_GE(*channel, comm::kCollectiveChannel);
    EXPECT_LT(*channel, comm::kCollectiveChannel + keys.size());
    channels.insert(*channel);
  }
  EXPECT_EQ(channels.size(), keys.size());
}

TEST(RingChannelTableTest, TwoTasksClaimingOneRingAreNamed) {
  RingChannelTable table;
  ASSERT_TRUE(table.Add(TaskId(0, 5), TaskId(1, 10), "boxing:a").ok());
  EXPECT_TRUE(table.Add(TaskId(0, 5), TaskId(1, 10), "boxing:a").ok());  // same task again
  Status status = table.Add(TaskId(0, 5), TaskId(1, 11), "boxing:b");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'boxing:a'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("'boxing:b'"), std::string::npos) << status;
}

TEST(RingChannelTableTest, FixedOnFirstLookup) {
  RingChannelTable table;
  EXPECT_EQ(table.ChannelOf(TaskId(0, 1)).status().code(), StatusCode::kNotFound);
  Status late = table.Add(TaskId(0, 1), TaskId(0, 2), "boxing:late");
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("boxing:late"), std::string::npos) << late;
}

}  // namespace
}  // namespace oflite
