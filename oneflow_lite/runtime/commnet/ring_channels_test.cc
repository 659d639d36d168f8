#include "oneflow_lite/runtime/commnet/ring_channels.h"

#include <map>
#include <set>
#include <vector>

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

// Rings over groups of machines (a 2x2 placement on 4 machines: axis 0
// rings {0, 2} and {1, 3}, axis 1 rings {0, 1} and {2, 3}): no machine
// holds every ring, yet with the plan's keys given first each member of a
// ring gets the same channel, and a machine's own rings differ.
TEST(RingChannelTableTest, GroupRingsAgreeGivenThePlansRings) {
  const int64_t a = TaskId(0, 10), b = TaskId(1, 10), c = TaskId(0, 11), d = TaskId(2, 11);
  const std::vector<int64_t> plan = {a, b, c, d};
  const std::map<int, std::vector<int64_t>> rings_of = {
      {0, {a, c}}, {1, {b, c}}, {2, {a, d}}, {3, {b, d}}};
  std::map<int64_t, uint32_t> seen;
  for (const auto& [machine, rings] : rings_of) {
    RingChannelTable table;
    ASSERT_TRUE(table.AddPlanRings(plan).ok());
    for (size_t i = 0; i < rings.size(); ++i) {
      ASSERT_TRUE(table.Add(rings[i], TaskId(machine, 100 + i), "t" + std::to_string(i)).ok());
    }
    std::set<uint32_t> mine;
    for (int64_t ring : rings) {
      const uint32_t channel = *table.ChannelOf(ring);
      mine.insert(channel);
      auto [it, fresh] = seen.emplace(ring, channel);
      EXPECT_EQ(it->second, channel) << "machine " << machine << " ring " << ring;
    }
    EXPECT_EQ(mine.size(), rings.size()) << "machine " << machine;
    // Without the plan's rings machine 1 would number b and c as 0 and 1,
    // machine 0 a and c: c would differ.
    EXPECT_EQ(table.AddPlanRings({TaskId(3, 1)}).code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(seen.size(), 4u);
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
