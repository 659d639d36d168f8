#include "oneflow_lite/profile/scheduler_profiler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "oneflow_lite/comm/launch/cpu_binding.h"

namespace oflite {
namespace profile {
namespace {

TEST(SchedulerProfilerTest, BadOptionsAreNamed) {
  WakeupProfileOptions options;
  options.samples = 0;
  StatusOr<WakeupProfile> r = ProfileBusyCoreWakeup(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("samples 0"), std::string::npos) << r.status();
}

TEST(SchedulerProfilerTest, OneCoreIsUnavailableNotWrong) {
  WakeupProfileOptions options;
  options.cpus = {0, 0};  // the waker would share the sleeper's core
  StatusOr<WakeupProfile> r = ProfileBusyCoreWakeup(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("two cores"), std::string::npos) << r.status();
}

TEST(SchedulerProfilerTest, MeasuresBothPhasesOnTwoCores) {
  if (comm::AllowedCores().size() < 2) GTEST_SKIP() << "needs two cores";
  WakeupProfileOptions options;
  options.samples = 40;
  options.period = std::chrono::microseconds(500);
  StatusOr<WakeupProfile> r = ProfileBusyCoreWakeup(options);
  ASSERT_TRUE(r.ok()) << r.status();
  // A wake-up takes some time and less than a second; the extra delay is
  // the difference of the two means, never negative.
  EXPECT_GT(r->idle_us, 0);
  EXPECT_LT(r->idle_us, 1e6);
  EXPECT_GT(r->busy_us, 0);
  EXPECT_LT(r->busy_us, 1e6);
  EXPECT_GE(r->extra_us(), 0);
  EXPECT_DOUBLE_EQ(r->extra_us(), std::max(0.0, r->busy_us - r->idle_us));
}

TEST(SchedulerProfilerTest, SliceBadOptionsAreNamed) {
  SliceProfileOptions options;
  options.duration = std::chrono::milliseconds(1);
  StatusOr<double> r = ProfileCoreSliceUs(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("duration 1 ms"), std::string::npos) << r.status();
}

// Two spinning threads on one CPU take turns: each run lasts some time,
// below the probe's duration (a scheduler that never switched would leave
// fewer than 8 runs: Unavailable, not a figure).
TEST(SchedulerProfilerTest, TwoThreadsOnOneCpuTakeTurnsOfASlice) {
  SliceProfileOptions options;
  options.duration = std::chrono::milliseconds(200);
  StatusOr<double> r = ProfileCoreSliceUs(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(*r, 0);
  EXPECT_LT(*r, 200e3 / 4);
}

}  // namespace
}  // namespace profile
}  // namespace oflite
