#include "oneflow_lite/comm/memory/strategy_test_suite.h"

#include <cstring>
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

TEST_P(MemoryStrategyTest, BounceBuffersMoveOnlyValidBytesAndChunk) {
  auto pair = MakePair(GetParam());
  RegisteredPoolOptions pool_options;
  pool_options.block_size = 64 * 1024;
  auto pool = RegisteredPool::Create(pair->transports[0].get(), pool_options,
                                     &pair->stats[0].pool);
  ASSERT_TRUE(pool.ok());
  BounceOptions options;
  options.channel = 7;
  options.buffer_size = 4096;
  options.buffer_count = 2;
  auto sender = BounceSender::Create(pair->Link(0), &pair->routers[0], pool->get(),
                                     options, &pair->stats[0].bounce);
  auto receiver = BounceReceiver::Create(pair->Link(1), &pair->routers[1], options,
                                         &pair->stats[1].bounce);
  ASSERT_TRUE(sender.ok() && receiver.ok());
  const std::vector<size_t> sizes = {0, 1, 1001, 4096, 4096 * 3 + 2048};
  size_t total = 0;
  std::thread producer([&] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint8_t> payload = Pattern(sizes[i], i);
      ASSERT_TRUE((*sender)->Send(payload.data(), payload.size(),
                                  DeadlineAfter(kTimeout)).ok());
    }
  });
  std::vector<uint8_t> destination(20000, 0xAB);
  auto region = pair->transports[1]->RegisterMemory(destination.data(),
                                                    destination.size(), kAccessAll);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::fill(destination.begin(), destination.end(), 0xAB);
    auto received = (*receiver)->Receive(**region, 10, 19000, DeadlineAfter(kTimeout));
    ASSERT_TRUE(received.ok()) << received.status();
    ASSERT_EQ(*received, sizes[i]);
    std::vector<uint8_t> expected = Pattern(sizes[i], i);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), destination.begin() + 10));
    EXPECT_EQ(destination[10 + sizes[i]], 0xAB);  // nothing beyond the valid bytes
    total += sizes[i];
  }
  producer.join();
  EXPECT_EQ(pair->stats[0].bounce.bytes_copied, total);  // one copy, sender side
  EXPECT_EQ(pair->stats[1].bounce.bytes_copied, 0u);
  EXPECT_EQ(pair->stats[1].bounce.bytes_moved, total);   // valid bytes only
  EXPECT_EQ(pair->stats[0].pool.registrations, 1u);      // no hot-path registration
}

TEST_P(MemoryStrategyTest, BouncePayloadBeyondCapacityIsDrainedAndReported) {
  auto pair = MakePair(GetParam());
  auto pool = RegisteredPool::Create(pair->transports[0].get(),
                                     RegisteredPoolOptions(), &pair->stats[0].pool);
  BounceOptions options;
  options.buffer_size = 256;
  auto sender = BounceSender::Create(pair->Link(0), &pair->routers[0], pool->get(),
                                     options, nullptr);
  auto receiver = BounceReceiver::Create(pair->Link(1), &pair->routers[1], options,
                                         nullptr);
  std::vector<uint8_t> big = Pattern(1000, 1), small = Pattern(10, 2);
  // The big payload takes every buffer: the second send waits for releases.
  std::thread producer([&] {
    EXPECT_TRUE((*sender)->Send(big.data(), big.size(), DeadlineAfter(kTimeout)).ok());
    EXPECT_TRUE((*sender)->Send(small.data(), small.size(), DeadlineAfter(kTimeout)).ok());
  });
  std::vector<uint8_t> destination(100);
  auto region = pair->transports[1]->RegisterMemory(destination.data(), 100, kAccessAll);
  auto first = (*receiver)->Receive(**region, 0, 100, DeadlineAfter(kTimeout));
  EXPECT_EQ(first.status().code(), StatusCode::kOutOfRange) << first.status();
  auto second = (*receiver)->Receive(**region, 0, 100, DeadlineAfter(kTimeout));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, 10u);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), destination.begin()));
  producer.join();
}

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
    ASSERT_TRUE(producer.Register("r" + std::to_string(i), produced[i].data(), sizes[i]).ok());
    ASSERT_TRUE(consumer.Register("r" + std::to_string(i), consumed[i].data(), sizes[i]).ok());
  }
  EXPECT_FALSE(producer.Register("r0", produced[0].data(), 1).ok());
  size_t moved = 0;
  for (int iteration = 0; iteration < 5; ++iteration) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      produced[i][0] = static_cast<uint8_t>(iteration);  // the producer writes
      const std::string name = "r" + std::to_string(i);
      RemoteKey key = (*producer.Find(name))->remote_key();
      ASSERT_TRUE(PullRegister(pair->Link(1), key, **consumer.Find(name), 0, sizes[i],
                               DeadlineAfter(kTimeout), &pair->stats[1].zero_copy).ok());
      EXPECT_EQ(consumed[i], produced[i]);
      moved += sizes[i];
    }
  }
  EXPECT_EQ(pair->stats[0].zero_copy.registrations, 3u);
  EXPECT_EQ(pair->stats[1].zero_copy.registrations, 3u);
  EXPECT_EQ(pair->stats[1].zero_copy.bytes_copied, 0u);
  EXPECT_EQ(pair->stats[1].zero_copy.bytes_moved, moved);
  EXPECT_EQ(consumer.Find("missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
