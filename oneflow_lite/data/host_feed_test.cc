// HostFeedRegistry: order, bounded waits, close and reset, producers on
// other threads.
#include "oneflow_lite/data/host_feed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace oflite {
namespace {

using std::chrono::milliseconds;

HostTensor Scalar(float value) { return HostTensor::FromVector<float>(Shape{}, {value}); }

float ValueOf(const StatusOr<HostTensor>& tensor) {
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? tensor->data<float>()[0] : -1.0f;
}

TEST(HostFeedTest, PopsInPushOrderPerFeed) {
  HostFeedRegistry feeds;
  ASSERT_TRUE(feeds.Push("a", Scalar(1)).ok());
  ASSERT_TRUE(feeds.Push("b", Scalar(10)).ok());
  ASSERT_TRUE(feeds.Push("a", Scalar(2)).ok());
  EXPECT_EQ(feeds.Pending("a"), 2);
  EXPECT_EQ(feeds.Pending("never"), 0);
  EXPECT_EQ(ValueOf(feeds.Pop("a", milliseconds(0))), 1.0f);
  EXPECT_EQ(ValueOf(feeds.Pop("b", milliseconds(0))), 10.0f);
  EXPECT_EQ(ValueOf(feeds.Pop("a", milliseconds(0))), 2.0f);
  EXPECT_EQ(feeds.Pending("a"), 0);
}

TEST(HostFeedTest, AnEmptyFeedTimesOutNamingItself) {
  HostFeedRegistry feeds;
  const auto begin = std::chrono::steady_clock::now();
  StatusOr<HostTensor> popped = feeds.Pop("tokens", milliseconds(50));
  EXPECT_GE(std::chrono::steady_clock::now() - begin, milliseconds(50));
  ASSERT_FALSE(popped.ok());
  EXPECT_EQ(popped.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(popped.status().message().find("host feed 'tokens'"), std::string::npos);
  EXPECT_NE(popped.status().message().find("50 ms"), std::string::npos);
}

TEST(HostFeedTest, AWaiterWakesForAPushFromAnotherThread) {
  HostFeedRegistry feeds;
  std::thread producer([&feeds] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(feeds.Push("x", Scalar(7)).ok());
  });
  EXPECT_EQ(ValueOf(feeds.Pop("x", milliseconds(10000))), 7.0f);
  producer.join();
}

TEST(HostFeedTest, CloseDeliversWhatIsQueuedThenFailsAtOnce) {
  HostFeedRegistry feeds;
  ASSERT_TRUE(feeds.Push("x", Scalar(3)).ok());
  feeds.Close("x");
  feeds.Close("x");
  EXPECT_EQ(feeds.Push("x", Scalar(4)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ValueOf(feeds.Pop("x", milliseconds(0))), 3.0f);
  const auto begin = std::chrono::steady_clock::now();
  StatusOr<HostTensor> popped = feeds.Pop("x", milliseconds(10000));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, milliseconds(5000));
  EXPECT_EQ(popped.status().code(), StatusCode::kCancelled);
  EXPECT_NE(popped.status().message().find("'x' was closed"), std::string::npos);
}

TEST(HostFeedTest, CloseWakesAWaiter) {
  HostFeedRegistry feeds;
  std::thread closer([&feeds] {
    std::this_thread::sleep_for(milliseconds(20));
    feeds.Close("x");
  });
  EXPECT_EQ(feeds.Pop("x", milliseconds(10000)).status().code(), StatusCode::kCancelled);
  closer.join();
}

TEST(HostFeedTest, ResetDropsTheQueueAndReopens) {
  HostFeedRegistry feeds;
  ASSERT_TRUE(feeds.Push("x", Scalar(1)).ok());
  feeds.Close("x");
  feeds.Reset("x");
  EXPECT_EQ(feeds.Pending("x"), 0);
  ASSERT_TRUE(feeds.Push("x", Scalar(2)).ok());
  EXPECT_EQ(ValueOf(feeds.Pop("x", milliseconds(0))), 2.0f);
}

TEST(HostFeedTest, ManyProducersLoseNothing) {
  HostFeedRegistry feeds;
  constexpr int kThreads = 3, kEach = 200;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&feeds, t] {
      for (int i = 0; i < kEach; ++i) ASSERT_TRUE(feeds.Push("x", Scalar(t * kEach + i)).ok());
    });
  }
  std::vector<int> seen(kThreads * kEach, 0);
  for (int i = 0; i < kThreads * kEach; ++i) {
    ++seen[static_cast<int>(ValueOf(feeds.Pop("x", milliseconds(10000))))];
  }
  for (std::thread& producer : producers) producer.join();
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(HostFeedTest, TheProcessRegistryIsOneInstance) {
  EXPECT_EQ(&HostFeed::Registry(), &HostFeed::Registry());
  ASSERT_TRUE(HostFeed::Push("host_feed_test.process", Scalar(5)).ok());
  EXPECT_EQ(HostFeed::Pending("host_feed_test.process"), 1);
  EXPECT_EQ(ValueOf(HostFeed::Pop("host_feed_test.process", milliseconds(0))), 5.0f);
}

}  // namespace
}  // namespace oflite
