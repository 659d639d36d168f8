#include "oneflow_lite/comm/testing/transport_conformance.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace oflite {
namespace comm {

StatusOr<std::vector<std::unique_ptr<Transport>>> CreateConnectedTransports(
    const TransportFactory& factory,
    const std::vector<TransportOptions>& options,
    std::chrono::milliseconds timeout) {
  const int world = static_cast<int>(options.size());
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < world; ++rank) {
    CHECK_EQ(options[rank].rank, rank);
    ASSIGN_OR_RETURN(auto transport, factory.create(options[rank]));
    transports.push_back(std::move(transport));
  }
  // endpoints[a][b]: a's endpoint for peer b.
  std::vector<std::vector<std::string>> endpoints(world,
                                                  std::vector<std::string>(world));
  for (int a = 0; a < world; ++a) {
    for (int b = 0; b < world; ++b) {
      if (a == b) continue;
      ASSIGN_OR_RETURN(endpoints[a][b], transports[a]->LocalEndpoint(b));
    }
  }
  const Deadline deadline = DeadlineAfter(timeout);
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  for (int a = 0; a < world; ++a) {
    threads.emplace_back([&, a] {
      for (int b = 0; b < world && results[a].ok(); ++b) {
        if (a == b) continue;
        results[a] = transports[a]->Connect(b, endpoints[b][a], deadline);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int a = 0; a < world; ++a) {
    if (!results[a].ok()) return results[a].WithContext("rank " + std::to_string(a));
  }
  return transports;
}

namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

// Collects messages delivered to one rank.
class Inbox {
 public:
  void Add(int peer, const void* data, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.push_back(
        {peer, std::string(static_cast<const char*>(data), size)});
    cv_.notify_all();
  }
  bool WaitForCount(size_t count, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout,
                        [&] { return messages_.size() >= count; });
  }
  std::vector<std::pair<int, std::string>> Messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<int, std::string>> messages_;
};

// Records peer errors reported to one rank.
class ErrorLog {
 public:
  void Add(int peer, const Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    errors_.push_back({peer, status});
    cv_.notify_all();
  }
  bool WaitForAny(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return !errors_.empty(); });
  }
  std::vector<std::pair<int, Status>> Errors() {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<int, Status>> errors_;
};

// A world of connected transports with an inbox and error log per rank.
struct World {
  std::vector<std::unique_ptr<Inbox>> inboxes;
  std::vector<std::unique_ptr<ErrorLog>> errors;
  std::vector<std::unique_ptr<Transport>> transports;

  Connection* Link(int from, int to) {
    auto connection = transports[from]->GetConnection(to);
    CHECK(connection.ok()) << connection.status();
    return *connection;
  }
};

std::unique_ptr<World> MakeWorld(const TransportFactory& factory, int size,
                                 int message_slots = 8) {
  auto world = std::make_unique<World>();
  std::vector<TransportOptions> options(size);
  for (int rank = 0; rank < size; ++rank) {
    world->inboxes.push_back(std::make_unique<Inbox>());
    world->errors.push_back(std::make_unique<ErrorLog>());
    Inbox* inbox = world->inboxes.back().get();
    ErrorLog* log = world->errors.back().get();
    options[rank].rank = rank;
    options[rank].world_size = size;
    options[rank].message_slots = message_slots;
    options[rank].message_slot_size = 1024;
    options[rank].peer_timeout = milliseconds(5000);
    options[rank].on_message = [inbox](int peer, const void* data,
                                       size_t bytes) {
      inbox->Add(peer, data, bytes);
    };
    options[rank].on_peer_error = [log](int peer, const Status& status) {
      log->Add(peer, status);
    };
  }
  auto transports = CreateConnectedTransports(factory, options, kTimeout);
  CHECK(transports.ok()) << transports.status();
  world->transports = std::move(*transports);
  return world;
}

std::vector<uint8_t> Pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = static_cast<uint8_t>(state >> 24);
  }
  return bytes;
}

// Once rank 0's `forward` connection is flushed, rank 1 got exactly
// `expected` from it, in order, and the connection is healthy.
void ExpectDeliveredInOrder(World* world, Connection* forward,
                            const std::vector<std::string>& expected) {
  ASSERT_TRUE(forward->Flush(DeadlineAfter(kTimeout)).ok());
  ASSERT_TRUE(world->inboxes[1]->WaitForCount(expected.size(), kTimeout));
  auto messages = world->inboxes[1]->Messages();
  ASSERT_EQ(messages.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(messages[i].first, 0);
    ASSERT_EQ(messages[i].second, expected[i]) << "message " << i;
  }
  EXPECT_TRUE(forward->status().ok()) << forward->status();
}

std::unique_ptr<MemoryRegion> Register(Transport* transport,
                                       std::vector<uint8_t>* buffer) {
  auto region =
      transport->RegisterMemory(buffer->data(), buffer->size(), kAccessAll);
  CHECK(region.ok()) << region.status();
  return std::move(*region);
}

TEST_P(TransportConformanceTest, RemoteKeyRoundTripsThroughBytes) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> buffer(100);
  auto region = Register(world->transports[0].get(), &buffer);
  RemoteKey key = region->remote_key();
  EXPECT_EQ(key.length, 100u);
  std::string bytes = key.Encode();
  ASSERT_EQ(bytes.size(), RemoteKey::kEncodedSize);
  auto decoded = RemoteKey::Decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, key);
  EXPECT_FALSE(RemoteKey::Decode(bytes.substr(1)).ok());
}

TEST_P(TransportConformanceTest, WriteThenReadBackOverSizes) {
  auto world = MakeWorld(GetParam(), 2);
  for (size_t size : {size_t{0}, size_t{1}, size_t{4097}, size_t{(1 << 20) + 3}}) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> source = Pattern(size, 7 + size);
    std::vector<uint8_t> remote(size + 16, 0xEE);
    std::vector<uint8_t> back(size, 0);
    auto source_region = Register(world->transports[0].get(), &source);
    auto back_region = Register(world->transports[0].get(), &back);
    auto remote_region = Register(world->transports[1].get(), &remote);
    Connection* link = world->Link(0, 1);
    ASSERT_TRUE(WriteSync(link, *source_region, 0, remote_region->remote_key(),
                          8, size, DeadlineAfter(kTimeout))
                    .ok());
    EXPECT_TRUE(std::equal(source.begin(), source.end(), remote.begin() + 8));
    EXPECT_EQ(remote[7], 0xEE);
    EXPECT_EQ(remote[size + 8], 0xEE);
    ASSERT_TRUE(ReadSync(link, *back_region, 0, remote_region->remote_key(), 8,
                         size, DeadlineAfter(kTimeout))
                    .ok());
    EXPECT_EQ(back, source);
  }
}

// Transport::AllocateRegistered: zero-filled, page-aligned memory that
// peers READ and WRITE like any registered region, as a remote region and
// as a local one; out of its range refused; unreachable once destroyed
// (shm: also after a peer has mapped it, docs/comm.md).
TEST_P(TransportConformanceTest, AllocatedMemoryIsZeroedReachableAndGoneWhenDestroyed) {
  auto world = MakeWorld(GetParam(), 2);
  Connection* link = world->Link(0, 1);
  for (size_t size : {size_t{0}, size_t{1}, size_t{4097}, size_t{(1 << 20) + 3}}) {
    SCOPED_TRACE(size);
    auto remote = world->transports[1]->AllocateRegistered(size + 16, kAccessAll);
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto local = world->transports[0]->AllocateRegistered(size, kAccessAll);
    ASSERT_TRUE(local.ok()) << local.status();
    MemoryRegion& theirs = **remote;
    MemoryRegion& mine = **local;
    ASSERT_EQ(theirs.size(), size + 16);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(theirs.data()) % 4096, 0u);
    EXPECT_TRUE(std::all_of(theirs.data(), theirs.data() + theirs.size(),
                            [](uint8_t byte) { return byte == 0; }));
    std::vector<uint8_t> source = Pattern(size, 11 + size);
    auto source_region = Register(world->transports[0].get(), &source);
    Status status =
        WriteSync(link, *source_region, 0, theirs.remote_key(), 8, size, DeadlineAfter(kTimeout));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(std::equal(source.begin(), source.end(), theirs.data() + 8));
    EXPECT_EQ(theirs.data()[7], 0);
    EXPECT_EQ(theirs.data()[size + 8], 0);
    status = ReadSync(link, mine, 0, theirs.remote_key(), 8, size, DeadlineAfter(kTimeout));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(std::equal(source.begin(), source.end(), mine.data()));
    auto never = [](const Status&) { ADD_FAILURE() << "callback after error"; };
    EXPECT_EQ(link->PostWrite(*source_region, 0, theirs.remote_key(), 17, size, never).code(),
              StatusCode::kInvalidArgument);
  }
  // Mapped (shm) by the WRITE before it is destroyed; afterwards the same
  // key must fail, not land in memory the owner gave up.
  std::vector<uint8_t> source = Pattern(64, 5);
  auto source_region = Register(world->transports[0].get(), &source);
  auto remote = world->transports[1]->AllocateRegistered(64, kAccessAll);
  ASSERT_TRUE(remote.ok()) << remote.status();
  const RemoteKey key = (*remote)->remote_key();
  ASSERT_TRUE(WriteSync(link, *source_region, 0, key, 0, 64, DeadlineAfter(kTimeout)).ok());
  remote->reset();
  EXPECT_FALSE(WriteSync(link, *source_region, 0, key, 0, 64, DeadlineAfter(kTimeout)).ok());
}

// Transport::AllocateShareable: zero-filled, page-aligned memory, not
// registered; regions registered inside it serve READ and WRITE as any.
TEST_P(TransportConformanceTest, RegionsInsideShareableMemoryAreReachable) {
  auto world = MakeWorld(GetParam(), 2);
  Connection* link = world->Link(0, 1);
  auto block = world->transports[1]->AllocateShareable(3 * 4096 + 5);
  ASSERT_TRUE(block.ok()) << block.status();
  uint8_t* base = (*block)->data();
  ASSERT_EQ((*block)->size(), 3u * 4096 + 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 4096, 0u);
  EXPECT_TRUE(std::all_of(base, base + (*block)->size(), [](uint8_t b) { return b == 0; }));
  auto inside = world->transports[1]->RegisterMemory(base + 4096 + 8, 4096, kAccessAll);
  ASSERT_TRUE(inside.ok()) << inside.status();
  std::vector<uint8_t> source = Pattern(4096, 3), back(4096, 0);
  auto source_region = Register(world->transports[0].get(), &source);
  auto back_region = Register(world->transports[0].get(), &back);
  Status status =
      WriteSync(link, *source_region, 0, (*inside)->remote_key(), 0, 4096, DeadlineAfter(kTimeout));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(std::equal(source.begin(), source.end(), base + 4096 + 8));
  EXPECT_EQ(base[4096 + 7], 0);
  EXPECT_EQ(base[2 * 4096 + 8], 0);
  status = ReadSync(link, *back_region, 0, (*inside)->remote_key(), 0, 4096,
                    DeadlineAfter(kTimeout));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(back, source);
  inside->reset();  // regions before their block
}

TEST_P(TransportConformanceTest, LocalBoundsViolationsLeaveConnectionHealthy) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> local(64), remote(64);
  auto local_region = Register(world->transports[0].get(), &local);
  auto remote_region = Register(world->transports[1].get(), &remote);
  Connection* link = world->Link(0, 1);
  auto never = [](const Status&) { ADD_FAILURE() << "callback after error"; };
  Status status = link->PostRead(*local_region, 60, remote_region->remote_key(),
                                 0, 8, never);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  status = link->PostWrite(*local_region, 0, remote_region->remote_key(), 57,
                           8, never);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  std::string too_big(link->max_message_size() + 1, 'x');
  status = link->SendMessage(too_big.data(), too_big.size());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(link->status().ok());
  EXPECT_TRUE(ReadSync(link, *local_region, 56, remote_region->remote_key(),
                       56, 8, DeadlineAfter(kTimeout))
                  .ok());
}

TEST_P(TransportConformanceTest, MessagesArriveInOrderBeyondCredits) {
  auto world = MakeWorld(GetParam(), 2, /*message_slots=*/4);
  Connection* forward = world->Link(0, 1);
  Connection* backward = world->Link(1, 0);
  constexpr int kCount = 500;
  const size_t max_size = forward->max_message_size();
  for (int i = 0; i < kCount; ++i) {
    // Sizes cycle through 0, 1, odd and the maximum.
    size_t size = (i % 4 == 0) ? 0 : (i % 4 == 1) ? 1 : (i % 4 == 2) ? 37 : max_size;
    std::vector<uint8_t> bytes = Pattern(size, i);
    ASSERT_TRUE(forward->SendMessage(bytes.data(), size).ok());
    ASSERT_TRUE(backward->SendMessage(bytes.data(), size).ok());
  }
  ASSERT_TRUE(forward->Flush(DeadlineAfter(kTimeout)).ok());
  ASSERT_TRUE(world->inboxes[1]->WaitForCount(kCount, kTimeout));
  ASSERT_TRUE(world->inboxes[0]->WaitForCount(kCount, kTimeout));
  for (int rank : {0, 1}) {
    auto messages = world->inboxes[rank]->Messages();
    ASSERT_EQ(messages.size(), size_t{kCount});
    for (int i = 0; i < kCount; ++i) {
      size_t size = (i % 4 == 0) ? 0 : (i % 4 == 1) ? 1 : (i % 4 == 2) ? 37 : max_size;
      std::vector<uint8_t> expected = Pattern(size, i);
      EXPECT_EQ(messages[i].first, 1 - rank);
      ASSERT_EQ(messages[i].second,
                std::string(expected.begin(), expected.end()))
          << "message " << i << " at rank " << rank;
    }
  }
}

// SendMessages: batches larger than the credits, interleaved with single
// messages, arrive whole and in order; a batch holding an oversized message
// is refused before any of it is sent, and the connection stays healthy.
TEST_P(TransportConformanceTest, MessageBatchesKeepOrderAndRefuseOversizedWhole) {
  auto world = MakeWorld(GetParam(), 2, /*message_slots=*/4);
  Connection* forward = world->Link(0, 1);
  const size_t max_size = forward->max_message_size();
  auto size_of = [&](int i) -> size_t {
    return (i % 3 == 0) ? 0 : (i % 3 == 1) ? 29 : max_size;
  };
  std::vector<std::string> expected;
  std::vector<std::string> too_big = {"a", std::string(max_size + 1, 'x'), "b"};
  const Status refused = forward->SendMessages(too_big);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> batch;
    for (int i = 0; i < 1 + round; ++i) {
      std::vector<uint8_t> bytes = Pattern(size_of(i), round * 100 + i);
      batch.emplace_back(bytes.begin(), bytes.end());
    }
    ASSERT_TRUE(forward->SendMessages(batch).ok());
    expected.insert(expected.end(), batch.begin(), batch.end());
    const std::string single = "single " + std::to_string(round);
    ASSERT_TRUE(forward->SendMessage(single.data(), single.size()).ok());
    expected.push_back(single);
  }
  ASSERT_TRUE(forward->SendMessages({}).ok());
  ExpectDeliveredInOrder(world.get(), forward, expected);
}

// SendMessageParts: head and body arrive as one message, joined, in order
// with plain messages, beyond the credits (the backlog joins them); empty
// parts and a message of the maximum size work; one byte more is refused
// and the connection stays healthy.
TEST_P(TransportConformanceTest, MessagePartsArriveJoinedAndInOrder) {
  auto world = MakeWorld(GetParam(), 2, /*message_slots=*/4);
  Connection* forward = world->Link(0, 1);
  const size_t max_size = forward->max_message_size();
  const Status refused = forward->SendMessageParts("ab", 2, std::string(max_size - 1, 'x').data(),
                                                   max_size - 1);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  std::vector<std::string> expected;
  for (int i = 0; i < 200; ++i) {
    const size_t head_size = (i % 4 == 0) ? 0 : 37;
    const size_t body_size = (i % 4 == 1) ? 0 : (i % 4 == 2) ? max_size - head_size : 100 + i;
    const std::vector<uint8_t> head = Pattern(head_size, i);
    const std::vector<uint8_t> body = Pattern(body_size, 1000 + i);
    ASSERT_TRUE(forward->SendMessageParts(head.data(), head_size, body.data(), body_size).ok());
    std::string joined(head.begin(), head.end());
    joined.append(body.begin(), body.end());
    expected.push_back(joined);
    if (i % 10 == 0) {
      const std::string single = "single " + std::to_string(i);
      ASSERT_TRUE(forward->SendMessage(single.data(), single.size()).ok());
      expected.push_back(single);
    }
  }
  ExpectDeliveredInOrder(world.get(), forward, expected);
}

// Where a provider says it orders a message after an outstanding WRITE
// (Connection::OrdersMessagesAfterWrites), a message sent right after
// PostWrite returned finds that WRITE's data in place when its handler runs.
TEST_P(TransportConformanceTest, MessageAfterOutstandingWriteSeesItsData) {
  constexpr int kWrites = 8;
  constexpr size_t kSize = (256 << 10) + 5;  // payloads read straight into place
  std::vector<uint8_t> remote(kWrites * kSize, 0);
  std::atomic<int> seen{0}, wrong{0};
  std::vector<TransportOptions> options(2);
  for (int rank = 0; rank < 2; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 2;
  }
  options[1].on_message = [&](int, const void* data, size_t size) {
    // The message names the write; its bytes must already be in place.
    const int index = size == 1 ? *static_cast<const uint8_t*>(data) : -1;
    const std::vector<uint8_t> expected = Pattern(kSize, 100 + index);
    if (index < 0 || !std::equal(expected.begin(), expected.end(),
                                 remote.begin() + index * kSize)) {
      ++wrong;
    }
    ++seen;
  };
  auto transports = CreateConnectedTransports(GetParam(), options, kTimeout);
  ASSERT_TRUE(transports.ok()) << transports.status();
  Connection* link = *(*transports)[0]->GetConnection(1);
  if (!link->OrdersMessagesAfterWrites()) {
    GTEST_SKIP() << GetParam().name << " promises only message-after-completion ordering";
  }
  auto remote_region = Register((*transports)[1].get(), &remote);
  std::vector<std::vector<uint8_t>> sources;
  std::vector<std::unique_ptr<MemoryRegion>> source_regions;
  std::atomic<int> completed{0};
  for (int i = 0; i < kWrites; ++i) {
    sources.push_back(Pattern(kSize, 100 + i));
  }
  for (int i = 0; i < kWrites; ++i) {
    source_regions.push_back(Register((*transports)[0].get(), &sources[i]));
    ASSERT_TRUE(link->PostWrite(*source_regions[i], 0, remote_region->remote_key(), i * kSize,
                                kSize, [&](const Status& status) {
                                  EXPECT_TRUE(status.ok()) << status;
                                  ++completed;
                                })
                    .ok());
    const uint8_t index = static_cast<uint8_t>(i);
    ASSERT_TRUE(link->SendMessage(&index, 1).ok());
  }
  ASSERT_TRUE(link->Flush(DeadlineAfter(kTimeout)).ok());
  const Deadline deadline = DeadlineAfter(kTimeout);
  while ((seen < kWrites || completed < kWrites) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(seen.load(), kWrites);
  EXPECT_EQ(completed.load(), kWrites);
  EXPECT_EQ(wrong.load(), 0) << "messages overtook the WRITEs posted before them";
  transports->clear();  // before the buffers and regions they may touch
}

TEST_P(TransportConformanceTest, ThreeRanksAllPairsExchange) {
  auto world = MakeWorld(GetParam(), 3);
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      std::string text = std::to_string(from) + "->" + std::to_string(to);
      ASSERT_TRUE(world->Link(from, to)->SendMessage(text.data(), text.size()).ok());
    }
  }
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(world->inboxes[rank]->WaitForCount(2, kTimeout));
    for (const auto& [peer, text] : world->inboxes[rank]->Messages()) {
      EXPECT_EQ(text, std::to_string(peer) + "->" + std::to_string(rank));
    }
  }
}

TEST_P(TransportConformanceTest, ConcurrentReadsFromManyThreads) {
  auto world = MakeWorld(GetParam(), 2);
  constexpr size_t kBlock = 10007;
  constexpr int kThreads = 4, kReadsPerThread = 25;
  std::vector<uint8_t> remote = Pattern(kBlock * kThreads, 99);
  auto remote_region = Register(world->transports[1].get(), &remote);
  Connection* link = world->Link(0, 1);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> local(kBlock);
      auto region = Register(world->transports[0].get(), &local);
      for (int i = 0; i < kReadsPerThread; ++i) {
        std::fill(local.begin(), local.end(), 0);
        Status status = ReadSync(link, *region, 0, remote_region->remote_key(),
                                 t * kBlock, kBlock, DeadlineAfter(kTimeout));
        if (!status.ok() ||
            !std::equal(local.begin(), local.end(), remote.begin() + t * kBlock)) {
          failures++;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(TransportConformanceTest, CallbackMayPostTheNextOperation) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> remote = Pattern(4096, 5), local(4096);
  auto remote_region = Register(world->transports[1].get(), &remote);
  auto local_region = Register(world->transports[0].get(), &local);
  Connection* link = world->Link(0, 1);
  std::mutex mutex;
  std::condition_variable cv;
  int completed = 0;
  std::function<void(const Status&)> next = [&](const Status& status) {
    ASSERT_TRUE(status.ok()) << status;
    std::lock_guard<std::mutex> lock(mutex);
    if (++completed < 16) {
      size_t offset = completed * 256;
      ASSERT_TRUE(link->PostRead(*local_region, offset,
                                 remote_region->remote_key(), offset, 256, next)
                      .ok());
    }
    cv.notify_all();
  };
  ASSERT_TRUE(link->PostRead(*local_region, 0, remote_region->remote_key(), 0,
                             256, next)
                  .ok());
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return completed == 16; }));
  EXPECT_EQ(local, remote);
}

TEST_P(TransportConformanceTest, UnknownRemoteKeyFailsTheConnection) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> local(64), remote(64);
  auto local_region = Register(world->transports[0].get(), &local);
  auto remote_region = Register(world->transports[1].get(), &remote);
  RemoteKey forged = remote_region->remote_key();
  forged.rkey ^= 0x5a5a5a;
  Connection* link = world->Link(0, 1);
  Status status = ReadSync(link, *local_region, 0, forged, 0, 64,
                           DeadlineAfter(kTimeout));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), StatusCode::kDeadlineExceeded) << status;
  EXPECT_FALSE(link->status().ok());
  EXPECT_NE(link->status().message().find("rank 1"), std::string::npos)
      << link->status();
  // Sticky: later calls fail with the same error.
  EXPECT_EQ(link->SendMessage("x", 1), link->status());
  EXPECT_TRUE(world->errors[0]->WaitForAny(kTimeout));
}

TEST_P(TransportConformanceTest, DeregisteredRegionIsNoLongerReachable) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> local(64), remote(64);
  auto local_region = Register(world->transports[0].get(), &local);
  auto remote_region = Register(world->transports[1].get(), &remote);
  RemoteKey key = remote_region->remote_key();
  remote_region.reset();
  Connection* link = world->Link(0, 1);
  EXPECT_FALSE(ReadSync(link, *local_region, 0, key, 0, 64,
                        DeadlineAfter(kTimeout)).ok());
}

TEST_P(TransportConformanceTest, ClosedPeerFailsWaitersAndLaterCalls) {
  auto world = MakeWorld(GetParam(), 2);
  Connection* link = world->Link(0, 1);
  world->transports[1].reset();
  ASSERT_TRUE(world->errors[0]->WaitForAny(kTimeout));
  auto errors = world->errors[0]->Errors();
  EXPECT_EQ(errors[0].first, 1);
  EXPECT_NE(errors[0].second.message().find("rank 1"), std::string::npos)
      << errors[0].second;
  EXPECT_FALSE(link->status().ok());
  EXPECT_FALSE(link->SendMessage("x", 1).ok());
  EXPECT_FALSE(link->Flush(DeadlineAfter(kTimeout)).ok());
}

TEST_P(TransportConformanceTest, DestroyingTransportCancelsOutstandingOps) {
  auto world = MakeWorld(GetParam(), 2);
  std::vector<uint8_t> local(1 << 20), remote(1 << 20);
  auto local_region = Register(world->transports[0].get(), &local);
  auto remote_region = Register(world->transports[1].get(), &remote);
  Connection* link = world->Link(0, 1);
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(link->PostRead(*local_region, 0, remote_region->remote_key(), 0,
                               local.size(),
                               [&](const Status&) { callbacks++; })
                    .ok());
  }
  world->transports[0].reset();  // must run every callback before returning
  EXPECT_EQ(callbacks.load(), 32);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
