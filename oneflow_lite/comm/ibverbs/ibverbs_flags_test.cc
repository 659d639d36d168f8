#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

TEST(IbverbsFlagsTest, DefaultsMatchTheOptionsStruct) {
  std::map<std::string, std::string> defaults;
  for (const IbverbsFlag& flag : IbverbsFlags()) {
    defaults[flag.name] = flag.default_value;
  }
  ASSERT_EQ(defaults.size(), 8u);
  auto parsed = IbverbsOptionsFromFlags(defaults);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  IbverbsOptions expected;
  EXPECT_EQ(parsed->device.device_name, expected.device.device_name);
  EXPECT_EQ(parsed->device.port, expected.device.port);
  EXPECT_EQ(parsed->device.gid_index, expected.device.gid_index);
  EXPECT_EQ(parsed->queue_depth, expected.queue_depth);
  EXPECT_EQ(parsed->block_size, expected.block_size);
  EXPECT_EQ(parsed->ack_timeout, expected.ack_timeout);
  EXPECT_EQ(parsed->retry_count, expected.retry_count);
  EXPECT_EQ(parsed->fork_safe, expected.fork_safe);
}

TEST(IbverbsFlagsTest, ParsesValuesAndNamesBadOnes) {
  auto parsed = IbverbsOptionsFromFlags({{"ib_device", "mlx5_1"},
                                         {"ib_gid_index", "3"},
                                         {"ib_queue_depth", "17"},
                                         {"ib_fork_safe", "false"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->device.device_name, "mlx5_1");
  EXPECT_EQ(parsed->device.gid_index, 3);
  EXPECT_EQ(parsed->queue_depth, 17);
  EXPECT_FALSE(parsed->fork_safe);
  for (auto bad : std::map<std::string, std::string>{
           {"ib_port", "0"}, {"ib_gid_index", "x"}, {"ib_retry_count", "8"},
           {"ib_fork_safe", "maybe"}, {"ib_colour", "1"}}) {
    auto status = IbverbsOptionsFromFlags({bad}).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(bad.first), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
