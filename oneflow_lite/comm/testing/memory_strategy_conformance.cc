#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"

#include <cstring>
#include <future>
#include <set>
#include <thread>

#include "oneflow_lite/comm/memory/bounce_buffers.h"
#include "oneflow_lite/comm/memory/registered_pool.h"
#include "oneflow_lite/comm/memory/zero_copy.h"
#include "oneflow_lite/comm/message_router.h"

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

struct Pair {
  MessageRouter routers[2];
  std::vector<std::unique_ptr<Transport>> transports;
  CommStats stats[2];
  Connection* Link(int from) { return *transports[from]->GetConnection(1 - from); }
};

std::unique_ptr<Pair> MakePair(const TransportFactory& factory) {
  auto pair = std::make_unique<Pair>();
  std::vector<TransportOptions> options(2);
  for (int rank = 0; rank < 2; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 2;
    options[rank].on_message = pair->routers[rank].AsHandler();
  }
  auto transports = CreateConnectedTransports(factory, options, kTimeout);
  CHECK(transports.ok()) << transports.status();
  pair->transports = std::move(*transports);
  return pair;
}

std::vector<uint8_t> Pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed);
  return bytes;
}

TEST_P(MemoryStrategyTest, PoolCarvesAlignedDisjointBuffersAndCoalesces) {
  auto pair = MakePair(GetParam());
  RegisteredPoolOptions options;
  options.block_size = 4096;
  options.alignment = 64;
  auto pool = RegisteredPool::Create(pair->transports[0].get(), options,
                                     &pair->stats[0].pool);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pair->stats[0].pool.registrations, 1u);
  std::vector<PoolBuffer> buffers;
  for (size_t size : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1001}}) {
    auto buffer = (*pool)->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(buffer->size(), size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u);
    buffers.push_back(std::move(*buffer));
  }
  // 64 + 64 + 64 + 64 + 1024 bytes carved from one block.
  EXPECT_EQ((*pool)->free_bytes(), 4096u - 1280u);
  std::set<uint8_t*> starts;
  for (auto& buffer : buffers) starts.insert(buffer.data());
  EXPECT_EQ(starts.size(), buffers.size());
  // Larger than a block: a dedicated block, one more registration.
  auto big = (*pool)->Allocate(10000);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(pair->stats[0].pool.registrations, 2u);
  buffers.erase(buffers.begin() + 1, buffers.begin() + 3);  // free out of order
  buffers.clear();
  *big = PoolBuffer();
  EXPECT_EQ((*pool)->free_bytes(), (*pool)->registered_bytes());
  // After coalescing the first block serves a full-block request again.
  auto whole = (*pool)->Allocate(4096);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(pair->stats[0].pool.registrations, 2u);
}

TEST_P(MemoryStrategyTest, PoolBufferKeyCoversExactlyItsBytes) {
  auto pair = MakePair(GetParam());
  auto pool = RegisteredPool::Create(pair->transports[1].get(),
                                     RegisteredPoolOptions(), &pair->stats[1].pool);
  ASSERT_TRUE(pool.ok());
  auto before = (*pool)->Allocate(128);
  auto target = (*pool)->Allocate(100);
  auto after = (*pool)->Allocate(128);
  std::memset(before->data(), 0x11, 128);
  std::memset(after->data(), 0x22, 128);
  std::vector<uint8_t> source = Pattern(100, 3);
  auto source_region = pair->transports[0]->RegisterMemory(source.data(), 100, kAccessAll);
  ASSERT_TRUE(WriteSync(pair->Link(0), **source_region, 0, target->remote_key(),
                        0, 100, DeadlineAfter(kTimeout)).ok());
  EXPECT_EQ(0, std::memcmp(target->data(), source.data(), 100));
  EXPECT_EQ(before->data()[127], 0x11);
  EXPECT_EQ(after->data()[0], 0x22);
  // One byte beyond the buffer's key is refused locally.
  EXPECT_EQ(pair->Link(0)->PostWrite(**source_region, 0, target->remote_key(), 1,
                                     100, [](const Status&) {}).code(),
            StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ BounceStreams

struct Streams {
  std::unique_ptr<BounceStreams> side[2];
  std::vector<Status> errors;
  std::mutex mutex;
};

std::unique_ptr<Streams> MakeStreams(Pair* pair, const BounceStreamOptions& options) {
  auto streams = std::make_unique<Streams>();
  for (int rank = 0; rank < 2; ++rank) {
    Streams* raw = streams.get();
    auto created = BounceStreams::Create(pair->transports[rank].get(), &pair->routers[rank],
                                         options, &pair->stats[rank].bounce,
                                         [raw](const Status& status) {
                                           std::lock_guard<std::mutex> lock(raw->mutex);
                                           raw->errors.push_back(status);
                                         });
    CHECK(created.ok()) << created.status();
    streams->side[rank] = std::move(*created);
  }
  return streams;
}

// Pulls and waits (bounded) for the pull's completion.
Status PullAndWait(BounceStreams* streams, const BounceStreamId& stream, uint64_t payload,
                   uint64_t total, const MemoryRegion* region,
                   std::vector<RegionSegment> segments) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  Status pulled = streams->Pull(0, stream, payload, total, region, std::move(segments),
                                [done](const Status& status) { done->set_value(status); });
  if (!pulled.ok()) return pulled;
  if (result.wait_for(kTimeout) != std::future_status::ready) {
    return DeadlineExceededError("test: pull did not complete");
  }
  return result.get();
}

TEST_P(MemoryStrategyTest, BounceStreamsCopyOnceMoveValidBytesAndChunkIntoSegments) {
  auto pair = MakePair(GetParam());
  BounceStreamOptions options;
  options.buffer_size = 4096;
  options.buffer_count = 2;
  auto streams = MakeStreams(pair.get(), options);
  const BounceStreamId stream{7, 9};
  const std::vector<size_t> sizes = {0, 1, 1001, 4096, 4096 * 3 + 2049};
  std::vector<std::vector<uint8_t>> payloads;
  size_t total = 0;
  // Every payload queued at once: nothing blocks, chunks wait for buffers.
  for (size_t i = 0; i < sizes.size(); ++i) {
    payloads.push_back(Pattern(sizes[i], i));
    const size_t half = sizes[i] / 2;
    std::vector<ConstSegment> segments = {{payloads[i].data(), half},
                                          {payloads[i].data() + half, sizes[i] - half}};
    StatusOr<uint64_t> number =
        streams->side[0]->Enqueue(1, stream, std::move(segments), 20000);
    ASSERT_TRUE(number.ok()) << number.status();
    EXPECT_EQ(*number, i);
    total += sizes[i];
  }
  std::vector<uint8_t> destination(40000, 0xAB);
  auto region = pair->transports[1]->RegisterMemory(destination.data(), destination.size(),
                                                    kAccessLocalWrite);
  ASSERT_TRUE(region.ok());
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::fill(destination.begin(), destination.end(), 0xAB);
    // Two destination segments, apart, split at an odd point.
    const size_t first = sizes[i] / 3;
    ASSERT_TRUE(PullAndWait(streams->side[1].get(), stream, i, sizes[i], region->get(),
                            {{8, first}, {20001, sizes[i] - first}})
                    .ok());
    EXPECT_TRUE(std::equal(payloads[i].begin(), payloads[i].begin() + first,
                           destination.begin() + 8));
    EXPECT_TRUE(std::equal(payloads[i].begin() + first, payloads[i].end(),
                           destination.begin() + 20001));
    EXPECT_EQ(destination[8 + first], 0xAB);  // nothing beyond the valid bytes
    EXPECT_EQ(destination[20001 + sizes[i] - first], 0xAB);
  }
  EXPECT_EQ(pair->stats[0].bounce.bytes_copied, total);  // one copy, producer side
  EXPECT_EQ(pair->stats[1].bounce.bytes_copied, 0u);
  EXPECT_EQ(pair->stats[1].bounce.bytes_moved, total);   // valid bytes only
  EXPECT_EQ(pair->stats[0].bounce.registrations, 1u);    // one per stream, not per payload
  // Chunks: 1 + 1 + 1 + 4 (4096*3+2049 over 4096-byte buffers).
  EXPECT_EQ(pair->stats[0].bounce.transfers, 7u);
  EXPECT_EQ(streams->side[1]->queued_chunks(), 0u);
  EXPECT_TRUE(streams->errors.empty());
}

// A stream whose consumer does not pull holds only its own buffers.
TEST_P(MemoryStrategyTest, BounceStreamsDoNotBlockEachOther) {
  auto pair = MakePair(GetParam());
  BounceStreamOptions options;
  options.buffer_size = 128;
  options.buffer_count = 1;
  auto streams = MakeStreams(pair.get(), options);
  std::vector<uint8_t> stalled = Pattern(1000, 3), flowing = Pattern(300, 4);
  ASSERT_TRUE(streams->side[0]->Enqueue(1, {1, 1}, {{stalled.data(), stalled.size()}}, 1000).ok());
  ASSERT_TRUE(streams->side[0]->Enqueue(1, {1, 2}, {{flowing.data(), flowing.size()}}, 1000).ok());
  std::vector<uint8_t> destination(1000);
  auto region = pair->transports[1]->RegisterMemory(destination.data(), destination.size(),
                                                    kAccessLocalWrite);
  ASSERT_TRUE(PullAndWait(streams->side[1].get(), {1, 2}, 0, 300, region->get(), {{0, 300}}).ok());
  EXPECT_TRUE(std::equal(flowing.begin(), flowing.end(), destination.begin()));
  ASSERT_TRUE(
      PullAndWait(streams->side[1].get(), {1, 1}, 0, 1000, region->get(), {{0, 1000}}).ok());
  EXPECT_EQ(destination, stalled);
}

TEST_P(MemoryStrategyTest, BounceStreamPullOfTheWrongPayloadIsDataLoss) {
  auto pair = MakePair(GetParam());
  auto streams = MakeStreams(pair.get(), BounceStreamOptions());
  std::vector<uint8_t> payload = Pattern(50, 5), destination(50);
  ASSERT_TRUE(streams->side[0]->Enqueue(1, {3, 4}, {{payload.data(), 50}}, 50).ok());
  auto region = pair->transports[1]->RegisterMemory(destination.data(), 50, kAccessLocalWrite);
  EXPECT_EQ(PullAndWait(streams->side[1].get(), {3, 4}, 1, 50, region->get(), {{0, 50}}).code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(streams->side[1]
                ->Pull(0, {3, 4}, 0, 60, region->get(), {{0, 60}}, [](const Status&) {})
                .code(),
            StatusCode::kInvalidArgument);  // beyond the destination region
}

TEST_P(MemoryStrategyTest, BounceStreamPullIsBoundedAndFailsWhenThePeerGoes) {
  auto pair = MakePair(GetParam());
  BounceStreamOptions options;
  options.pull_timeout = milliseconds(200);
  auto streams = MakeStreams(pair.get(), options);
  std::vector<uint8_t> destination(64);
  auto region = pair->transports[1]->RegisterMemory(destination.data(), 64, kAccessLocalWrite);
  const auto start = Clock::now();
  EXPECT_EQ(PullAndWait(streams->side[1].get(), {5, 6}, 0, 64, region->get(), {{0, 64}}).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  // Nothing announced and the producer's rank goes away: the pull fails
  // with the connection's error long before its deadline.
  options.pull_timeout = milliseconds(60000);
  streams->side[1].reset();
  streams->side[0].reset();
  streams = MakeStreams(pair.get(), options);
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  ASSERT_TRUE(streams->side[1]
                  ->Pull(0, {5, 7}, 0, 64, region->get(), {{0, 64}},
                         [done](const Status& status) { done->set_value(status); })
                  .ok());
  streams->side[0].reset();
  pair->transports[0].reset();
  ASSERT_EQ(result.wait_for(milliseconds(10000)), std::future_status::ready);
  Status status = result.get();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), StatusCode::kDeadlineExceeded) << status;
}

// A payload larger than the consumer's destination is refused without
// consuming it; the stream goes on with the same payload and the next one,
// which had to wait for the buffers the big one held.
TEST_P(MemoryStrategyTest, BounceStreamPayloadBeyondTheDestinationIsRefusedAndKept) {
  auto pair = MakePair(GetParam());
  BounceStreamOptions options;
  options.buffer_size = 256;
  auto streams = MakeStreams(pair.get(), options);
  std::vector<uint8_t> big = Pattern(1000, 1), small = Pattern(10, 2);
  ASSERT_TRUE(streams->side[0]->Enqueue(1, {8, 8}, {{big.data(), big.size()}}, 1000).ok());
  ASSERT_TRUE(streams->side[0]->Enqueue(1, {8, 8}, {{small.data(), small.size()}}, 1000).ok());
  std::vector<uint8_t> destination(1000);
  auto region = pair->transports[1]->RegisterMemory(destination.data(), 100, kAccessLocalWrite);
  ASSERT_TRUE(region.ok());
  bool ran = false;
  EXPECT_EQ(streams->side[1]
                ->Pull(0, {8, 8}, 0, 1000, region->get(), {{0, 1000}},
                       [&ran](const Status&) { ran = true; })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(ran);
  auto whole = pair->transports[1]->RegisterMemory(destination.data(), 1000, kAccessLocalWrite);
  ASSERT_TRUE(PullAndWait(streams->side[1].get(), {8, 8}, 0, 1000, whole->get(), {{0, 1000}}).ok());
  EXPECT_EQ(destination, big);
  ASSERT_TRUE(PullAndWait(streams->side[1].get(), {8, 8}, 1, 10, region->get(), {{0, 10}}).ok());
  EXPECT_TRUE(std::equal(small.begin(), small.end(), destination.begin()));
  EXPECT_TRUE(streams->errors.empty());
}

// ------------------------------------------------------------ static zero-copy

// Pulls with StaticRegisterSet::PostPull and waits (bounded).
Status PullRegisterAndWait(const StaticRegisterSet& set, Connection* connection,
                           const RegisterId& source, const RegisterId& destination,
                           size_t bytes) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  RETURN_IF_ERROR(set.PostPull(connection, source, destination, bytes,
                               [done](const Status& status) { done->set_value(status); }));
  if (result.wait_for(kTimeout) != std::future_status::ready) {
    return DeadlineExceededError("test: READ did not complete");
  }
  return result.get();
}

// The runtime's way (CommNetRoute): sources registered for remote READ and
// their keys shipped to the consumer, destinations registered for local
// write, one READ per produced register.
TEST_P(MemoryStrategyTest, StaticZeroCopyRegistersOnceAndNeverCopies) {
  auto pair = MakePair(GetParam());
  // Buffers first: they must outlive their registrations.
  std::vector<std::vector<uint8_t>> produced, consumed;
  StaticRegisterSet producer(pair->transports[0].get(), &pair->stats[0].zero_copy);
  StaticRegisterSet consumer(pair->transports[1].get(), &pair->stats[1].zero_copy);
  const std::vector<size_t> sizes = {1, 777, 65536 + 5};
  for (size_t i = 0; i < sizes.size(); ++i) {
    produced.push_back(Pattern(sizes[i], i));
    consumed.push_back(std::vector<uint8_t>(sizes[i]));
    const RegisterId id{40 + static_cast<int64_t>(i), 1};
    StatusOr<RemoteKey> key = producer.RegisterSource(id, produced[i].data(), sizes[i]);
    ASSERT_TRUE(key.ok()) << key.status();
    // Shipped as bytes, as through the control plane.
    StatusOr<RemoteKey> shipped = RemoteKey::Decode(key->Encode());
    ASSERT_TRUE(shipped.ok());
    consumer.AddRemoteSource(id, *shipped);
    ASSERT_TRUE(consumer.RegisterDestination({50 + static_cast<int64_t>(i), 1},
                                             consumed[i].data(), sizes[i])
                    .ok());
  }
  EXPECT_EQ(producer.RegisterSource({40, 1}, produced[0].data(), 1).status().code(),
            StatusCode::kAlreadyExists);
  size_t moved = 0;
  for (int iteration = 0; iteration < 5; ++iteration) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      produced[i][0] = static_cast<uint8_t>(iteration);  // the producer writes
      ASSERT_TRUE(PullRegisterAndWait(consumer, pair->Link(1), {40 + static_cast<int64_t>(i), 1},
                                      {50 + static_cast<int64_t>(i), 1}, sizes[i])
                      .ok());
      EXPECT_EQ(consumed[i], produced[i]);
      moved += sizes[i];
    }
  }
  EXPECT_EQ(pair->stats[0].zero_copy.registrations, 3u);
  EXPECT_EQ(pair->stats[1].zero_copy.registrations, 3u);
  EXPECT_EQ(pair->stats[1].zero_copy.bytes_copied, 0u);
  EXPECT_EQ(pair->stats[1].zero_copy.bytes_moved, moved);
  EXPECT_EQ(consumer.Find({99, 0}).status().code(), StatusCode::kNotFound);
}

// Pulls the load phase did not prepare, or beyond a register, fail at once
// and run no completion; the counters move only for completed READs.
TEST_P(MemoryStrategyTest, StaticZeroCopyRefusesWhatWasNotLoaded) {
  auto pair = MakePair(GetParam());
  std::vector<uint8_t> source = Pattern(64, 9), destination(64);
  StaticRegisterSet producer(pair->transports[0].get(), &pair->stats[0].zero_copy);
  StaticRegisterSet consumer(pair->transports[1].get(), &pair->stats[1].zero_copy);
  StatusOr<RemoteKey> key = producer.RegisterSource({1, 0}, source.data(), source.size());
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(consumer.RegisterDestination({2, 0}, destination.data(), destination.size()).ok());
  bool ran = false;
  auto never = [&ran](const Status&) { ran = true; };
  Status unknown_source = consumer.PostPull(pair->Link(1), {1, 0}, {2, 0}, 64, never);
  EXPECT_EQ(unknown_source.code(), StatusCode::kFailedPrecondition) << unknown_source;
  EXPECT_NE(unknown_source.message().find("register 1[0]"), std::string::npos) << unknown_source;
  consumer.AddRemoteSource({1, 0}, *key);
  Status unknown_destination = consumer.PostPull(pair->Link(1), {1, 0}, {3, 0}, 64, never);
  EXPECT_EQ(unknown_destination.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(unknown_destination.message().find("register 3[0]"), std::string::npos);
  EXPECT_FALSE(consumer.PostPull(pair->Link(1), {1, 0}, {2, 0}, 65, never).ok());
  EXPECT_FALSE(ran);
  EXPECT_EQ(pair->stats[1].zero_copy.transfers, 0u);
  ASSERT_TRUE(PullRegisterAndWait(consumer, pair->Link(1), {1, 0}, {2, 0}, 64).ok());
  EXPECT_EQ(destination, source);
  EXPECT_EQ(pair->stats[1].zero_copy.transfers, 1u);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
