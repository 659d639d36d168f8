// SpinWait's stages and HostOversubscribed against real runnable threads.
#include "oneflow_lite/comm/spin_wait.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace oflite {
namespace comm {
namespace {

TEST(SpinWaitTest, ZeroBudgetBlocksAtOnceAndUntilReset) {
  SpinWait wait(std::chrono::microseconds(0));
  EXPECT_FALSE(wait.Idle());
  EXPECT_FALSE(wait.Idle());
  EXPECT_TRUE(wait.Expired());
  EXPECT_EQ(wait.backed_off(), 0);  // the budget, not the host, ended it
}

// Every wait ends: Idle says "block" after the budget at the latest (or
// sooner on an oversubscribed host, counted in backed_off), then keeps
// saying it until Reset, after which the caller may poll again.
TEST(SpinWaitTest, IdleEndsWithinItsBudgetAndResetStartsOver) {
  SpinWait wait(std::chrono::microseconds(2000));
  for (int round = 0; round < 2; ++round) {
    while (wait.Idle()) {
    }
    EXPECT_FALSE(wait.Idle()) << "round " << round;
    EXPECT_TRUE(wait.Expired()) << "round " << round;
    wait.Reset();
    EXPECT_FALSE(wait.Expired()) << "round " << round;
  }
}

// Work that is not the awaited event (Expired) shares the same bound.
TEST(SpinWaitTest, ExpiredTurnsTrueOnceTheBudgetIsSpent) {
  SpinWait wait(std::chrono::microseconds(500));
  int64_t rounds = 0;
  while (!wait.Expired()) ++rounds;
  EXPECT_GT(rounds, 0);
  EXPECT_FALSE(wait.Idle());
}

// With more busy threads than kOversubscribedPerCpu per CPU, the host reads as
// oversubscribed, and a poller with budget to spare blocks at once. The
// busy threads are not SpinWait pollers, so they all count.
TEST(SpinWaitTest, OversubscribedHostMakesPollersBlockEarly) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(cpus, 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  const long threads = kOversubscribedPerCpu * cpus + 2;
  for (long i = 0; i < threads; ++i) {
    busy.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    seen = HostOversubscribed();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool backed_off = false;
  if (seen) {
    // While the threads run, a poller with a long budget gives up early.
    for (int attempt = 0; attempt < 5 && !backed_off; ++attempt) {
      SpinWait wait(std::chrono::seconds(1));
      while (wait.Idle()) {
      }
      backed_off = wait.backed_off() == 1;
    }
  }
  stop = true;
  for (std::thread& thread : busy) thread.join();
  EXPECT_TRUE(seen) << threads << " busy threads on " << cpus
                    << " CPUs never read as oversubscribed";
  EXPECT_TRUE(backed_off) << "no poller blocked early on the oversubscribed host";
}

}  // namespace
}  // namespace comm
}  // namespace oflite
