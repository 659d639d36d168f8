// CallerProgressGate: when a provider's progress thread steps aside for
// polling callers, and when a waiter that does not poll takes it back.
#include "oneflow_lite/comm/caller_progress.h"

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace {

constexpr int64_t kQuietNs = kCallerQuiet.count();

TEST(CallerProgressGateTest, ProgressThreadNapsUntilQuietAfterTheLastPoll) {
  CallerProgressGate gate;
  EXPECT_LE(gate.NapLeftNs(1'000'000'000), 0) << "nobody polled yet";
  ASSERT_TRUE(gate.EnterPoll(1'000'000'000));
  EXPECT_EQ(gate.NapLeftNs(1'000'000'000), kQuietNs);
  EXPECT_EQ(gate.NapLeftNs(1'000'000'000 + kQuietNs / 2), kQuietNs / 2);
  EXPECT_LE(gate.NapLeftNs(1'000'000'000 + kQuietNs), 0);
  // EndPolling ends the nap at once; it asks for a wake-up only while the
  // progress thread naps.
  ASSERT_TRUE(gate.EnterPoll(2'000'000'000));
  EXPECT_FALSE(gate.EndPolling());
  EXPECT_LE(gate.NapLeftNs(2'000'000'000), 0);
  ASSERT_TRUE(gate.EnterPoll(3'000'000'000));
  gate.SetNapping(true);
  EXPECT_TRUE(gate.EndPolling());
  gate.SetNapping(false);
}

TEST(CallerProgressGateTest, ABlockingWaiterEndsTheNapAndTurnsPollsOff) {
  CallerProgressGate gate;
  ASSERT_TRUE(gate.EnterPoll(1'000'000'000));
  gate.SetNapping(true);
  EXPECT_TRUE(gate.BeginBlocking()) << "the napping progress thread must be woken";
  EXPECT_LE(gate.NapLeftNs(1'000'000'000), 0);
  EXPECT_FALSE(gate.EnterPoll(1'000'000'100)) << "a Poll while a waiter blocks";
  // Counted: a second waiter, then both leave.
  EXPECT_TRUE(gate.BeginBlocking());
  gate.SetNapping(false);
  gate.EndBlocking();
  EXPECT_FALSE(gate.EnterPoll(1'000'000'200)) << "one waiter still blocks";
  EXPECT_FALSE(gate.BeginBlocking()) << "not napping: no wake-up";
  gate.EndBlocking();
  gate.EndBlocking();
  EXPECT_TRUE(gate.EnterPoll(1'000'000'300));
  EXPECT_EQ(gate.NapLeftNs(1'000'000'300), kQuietNs);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
