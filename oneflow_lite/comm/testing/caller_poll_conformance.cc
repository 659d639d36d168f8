// Conformance tests of caller progress (Transport::Poll, transport.h
// "Caller progress"), part of TransportConformanceTest: every provider runs
// them. A provider without caller progress passes them through its progress
// thread (Poll returns false); one with it must keep each connection's
// messages in order, never run two handlers or callbacks of one connection
// at once, whichever thread runs them, and lose no wake-up when its callers
// stop polling.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "oneflow_lite/comm/testing/transport_conformance.h"
#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;
// A bound, not an expectation: under tsan the cross-process verbs emulator
// needs about 33 s for the ordering case's 3,800 messages and 200 WRITEs.
constexpr milliseconds kTimeout{90000};

// Set on the test's polling threads: tells a handler who runs it.
thread_local bool t_poller = false;

// Rank 0's view: per sender the next expected sequence number, per
// connection a count of handlers and callbacks running right now (never
// above one), and who ran them.
class Receiver {
 public:
  explicit Receiver(int world) : running_(world), expected_(world, 0) {}

  // A handler or completion callback of rank 0's connection to `peer`.
  void Enter(int peer) {
    if (running_[peer].fetch_add(1) != 0) overlaps_.fetch_add(1);
    (t_poller ? by_pollers_ : by_others_).fetch_add(1);
    // Widen the window in which a second runner would be caught.
    for (volatile int spin = 0; spin < 2000; spin = spin + 1) {
    }
  }
  void Leave(int peer) { running_[peer].fetch_sub(1); }

  void OnMessage(int peer, const void* data, size_t size) {
    Enter(peer);
    uint64_t sequence = ~uint64_t{0};
    if (size == 8) sequence = wire::LoadU64(static_cast<const uint8_t*>(data));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (sequence != expected_[peer]) out_of_order_ = true;
      ++expected_[peer];
      changed_.notify_all();
    }
    Leave(peer);
  }

  // Waits (bounded) until every sender's `count` messages arrived.
  bool WaitForAll(uint64_t count, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      for (size_t peer = 1; peer < expected_.size(); ++peer) {
        if (expected_[peer] < count) return false;
      }
      return true;
    });
  }
  uint64_t Received(int peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    return expected_[peer];
  }
  bool out_of_order() {
    std::lock_guard<std::mutex> lock(mutex_);
    return out_of_order_;
  }
  int overlaps() const { return overlaps_.load(); }
  int by_pollers() const { return by_pollers_.load(); }
  int by_others() const { return by_others_.load(); }

 private:
  std::vector<std::atomic<int>> running_;  // by peer
  std::atomic<int> overlaps_{0};
  std::atomic<int> by_pollers_{0};
  std::atomic<int> by_others_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint64_t> expected_;  // by sender rank
  bool out_of_order_ = false;
};

std::vector<std::unique_ptr<Transport>> ConnectWorld(const TransportFactory& factory, int world,
                                                     Receiver* receiver) {
  std::vector<TransportOptions> options(world);
  for (int rank = 0; rank < world; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = world;
    options[rank].message_slots = 8;  // few credits: senders' backlogs fill and drain
    options[rank].message_slot_size = 1024;
    options[rank].peer_timeout = milliseconds(10000);
  }
  options[0].on_message = [receiver](int peer, const void* data, size_t size) {
    receiver->OnMessage(peer, data, size);
  };
  auto transports = CreateConnectedTransports(factory, options, kTimeout);
  CHECK(transports.ok()) << transports.status();
  return std::move(*transports);
}

Status SendSequence(Connection* connection, uint64_t sequence) {
  std::string message;
  wire::AppendU64(&message, sequence);
  return connection->SendMessage(message.data(), message.size());
}

// Two senders stream numbered messages to rank 0 in bursts while two of
// rank 0's threads poll in bursts (some ending with EndPolling, some just
// stopping) and a third posts WRITEs whose callbacks join the check; a
// last burst after every poller stopped is delivered by the progress
// thread. Deliveries therefore mix caller and progress thread.
TEST_P(TransportConformanceTest, CallerPollKeepsOrderAndNeverRunsHandlersConcurrently) {
  constexpr int kWorld = 3;
  constexpr int kBursts = 20;
  constexpr int kBurst = 100;
  Receiver receiver(kWorld);
  auto transports = ConnectWorld(GetParam(), kWorld, &receiver);
  Transport* rank0 = transports[0].get();
  std::atomic<bool> sending{true};
  std::atomic<int> polls_that_worked{0};
  std::vector<std::thread> threads;
  for (int poller = 0; poller < 2; ++poller) {
    threads.emplace_back([&, poller] {
      t_poller = true;
      for (int round = 0; sending.load(); ++round) {
        const auto until = Clock::now() + milliseconds(2);
        while (Clock::now() < until) {
          if (rank0->Poll()) polls_that_worked.fetch_add(1);
          else std::this_thread::yield();
        }
        if ((round + poller) % 2 == 0) rank0->EndPolling();
        std::this_thread::sleep_for(milliseconds(1 + poller));
      }
      rank0->EndPolling();
    });
  }
  std::vector<uint8_t> local(64), remote(64);
  auto local_region = rank0->RegisterMemory(local.data(), local.size(), kAccessAll);
  auto remote_region = transports[1]->RegisterMemory(remote.data(), remote.size(), kAccessAll);
  ASSERT_TRUE(local_region.ok() && remote_region.ok());
  Connection* write_link = *rank0->GetConnection(1);
  std::atomic<int> writes_done{0}, writes_failed{0};
  constexpr int kWrites = 200;
  threads.emplace_back([&] {
    for (int i = 0; i < kWrites; ++i) {
      const Status posted = write_link->PostWrite(
          **local_region, 0, (*remote_region)->remote_key(), 0, local.size(),
          [&](const Status& status) {
            receiver.Enter(1);  // the connection that carries rank 1's messages
            if (!status.ok()) writes_failed.fetch_add(1);
            writes_done.fetch_add(1);
            receiver.Leave(1);
          });
      if (!posted.ok()) writes_failed.fetch_add(1);
      if (i % 20 == 0) std::this_thread::sleep_for(milliseconds(1));
    }
  });
  auto send_bursts = [&](int first, int last) {
    for (int burst = first; burst < last; ++burst) {
      for (int sender = 1; sender < kWorld; ++sender) {
        Connection* link = *transports[sender]->GetConnection(0);
        for (int i = 0; i < kBurst; ++i) {
          ASSERT_TRUE(SendSequence(link, uint64_t(burst) * kBurst + i).ok());
        }
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  };
  send_bursts(0, kBursts - 1);
  const bool arrived = receiver.WaitForAll(uint64_t(kBursts - 1) * kBurst, kTimeout);
  sending.store(false);
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(arrived) << "rank 0 got " << receiver.Received(1) << " and "
                       << receiver.Received(2) << " while polled";
  send_bursts(kBursts - 1, kBursts);  // nobody polls now
  ASSERT_TRUE(receiver.WaitForAll(uint64_t(kBursts) * kBurst, kTimeout))
      << "rank 0 got " << receiver.Received(1) << " and " << receiver.Received(2)
      << " after the pollers stopped";
  ASSERT_TRUE(write_link->Flush(DeadlineAfter(kTimeout)).ok());
  EXPECT_EQ(writes_done.load(), kWrites);
  EXPECT_EQ(writes_failed.load(), 0);
  EXPECT_FALSE(receiver.out_of_order());
  EXPECT_EQ(receiver.overlaps(), 0);
  EXPECT_GT(receiver.by_others(), 0);  // at least the last burst
  // Whatever a Poll reported as done ran on a poller: rank 0 sends no
  // messages, so its Poll has no backlog to move.
  if (polls_that_worked.load() > 0) {
    EXPECT_GT(receiver.by_pollers(), 0);
  }
}

// A caller polls while messages stream in, then stops in the middle of the
// stream, with or without EndPolling; then, once the provider has had time
// to fall asleep, one more message. Each arrives within the timeout (no
// lost wake-up: the progress thread takes over from the caller).
TEST_P(TransportConformanceTest, CallerThatStopsPollingMidStreamLosesNoWakeUp) {
  for (bool end_polling : {false, true}) {
    Receiver receiver(2);
    auto transports = ConnectWorld(GetParam(), 2, &receiver);
    Transport* rank0 = transports[0].get();
    Connection* link = *transports[1]->GetConnection(0);
    std::atomic<bool> polling{true};
    std::thread poller([&] {
      t_poller = true;
      while (polling.load()) {
        if (!rank0->Poll()) std::this_thread::yield();
      }
      if (end_polling) rank0->EndPolling();
    });
    constexpr uint64_t kCount = 400;
    for (uint64_t i = 0; i < kCount; ++i) {
      // Stop the caller once half the stream is out and half of that in:
      // messages are in flight while the caller leaves.
      if (i == kCount / 2) {
        const bool arrived = receiver.WaitForAll(kCount / 4, kTimeout);
        polling.store(false);
        poller.join();
        ASSERT_TRUE(arrived) << "end_polling=" << end_polling;
      }
      const Status sent = SendSequence(link, i);
      if (!sent.ok()) {
        polling.store(false);
        if (poller.joinable()) poller.join();
        FAIL() << sent;
      }
    }
    ASSERT_TRUE(receiver.WaitForAll(kCount, kTimeout))
        << "end_polling=" << end_polling << ": rank 0 got " << receiver.Received(1) << " of "
        << kCount;
    std::this_thread::sleep_for(milliseconds(30));  // progress threads asleep
    ASSERT_TRUE(SendSequence(link, kCount).ok());
    ASSERT_TRUE(receiver.WaitForAll(kCount + 1, kTimeout)) << "end_polling=" << end_polling;
    EXPECT_FALSE(receiver.out_of_order());
    EXPECT_EQ(receiver.overlaps(), 0);
  }
}

// While a thread waits without polling (a BlockingWait), no Poll that
// starts after it began delivers anything: the progress thread does it all,
// even when a caller was polling (and the progress thread napping) when the
// wait began. Everything arrives in order; once the wait ends, a stream
// with a polling caller arrives too.
TEST_P(TransportConformanceTest, PollsDeliverNothingWhileAThreadWaitsWithoutPolling) {
  Receiver receiver(2);
  auto transports = ConnectWorld(GetParam(), 2, &receiver);
  Transport* rank0 = transports[0].get();
  Connection* link = *transports[1]->GetConnection(0);
  std::atomic<bool> polling{true};
  std::atomic<bool> held{false};
  std::atomic<int> polls_while_held{0};
  std::thread poller([&] {
    t_poller = true;
    while (polling.load()) {
      const bool during = held.load();
      if (rank0->Poll()) {
        if (during) polls_while_held.fetch_add(1);
      } else {
        std::this_thread::yield();
      }
    }
    rank0->EndPolling();
  });
  constexpr uint64_t kCount = 300;
  for (uint64_t i = 0; i < kCount / 3; ++i) ASSERT_TRUE(SendSequence(link, i).ok());
  ASSERT_TRUE(receiver.WaitForAll(kCount / 3, kTimeout));
  {
    BlockingWait waiting(rank0);
    held.store(true);
    for (uint64_t i = kCount / 3; i < 2 * kCount / 3; ++i) {
      ASSERT_TRUE(SendSequence(link, i).ok());
    }
    const bool arrived = receiver.WaitForAll(2 * kCount / 3, kTimeout);
    held.store(false);
    EXPECT_TRUE(arrived) << "rank 0 got " << receiver.Received(1) << " of " << 2 * kCount / 3
                         << " while a thread waited without polling";
  }
  for (uint64_t i = 2 * kCount / 3; i < kCount; ++i) ASSERT_TRUE(SendSequence(link, i).ok());
  const bool all = receiver.WaitForAll(kCount, kTimeout);
  polling.store(false);
  poller.join();
  ASSERT_TRUE(all) << "rank 0 got " << receiver.Received(1) << " of " << kCount;
  EXPECT_EQ(polls_while_held.load(), 0);
  EXPECT_FALSE(receiver.out_of_order());
  EXPECT_EQ(receiver.overlaps(), 0);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
