#include "oneflow_lite/comm/tcp/tcp_transport.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/wire.h"

#include "oneflow_lite/comm/testing/memory_strategy_conformance.h"
#include "oneflow_lite/comm/testing/transport_conformance.h"

namespace oflite {
namespace comm {
namespace {

// `low_water_always`: every payload of kLowWaterMinPayload bytes or more
// counts as trickling, so its reads after the first raise SO_RCVLOWAT
// (TcpOptions::receive_low_water), as over a slow link.
TransportFactory TcpFactory(const std::string& name, bool caller_progress,
                            bool low_water_always = false) {
  return {name, [caller_progress, low_water_always](const TransportOptions& options) {
            tcp::TcpOptions tcp_options;
            tcp_options.job_token = "conformance";
            tcp_options.caller_progress = caller_progress;
            if (low_water_always) tcp_options.trickle_bytes_per_second = 1e30;
            return tcp::CreateTcpTransport(options, tcp_options);
          }};
}

// The defaults, caller progress (the suites' caller-poll cases then read
// the sockets on their polling threads too), and the low-water mark on
// every large payload.
const auto kTcpVariants = ::testing::Values(TcpFactory("tcp", false),
                                            TcpFactory("tcp_caller_progress", true),
                                            TcpFactory("tcp_low_water", false, true));

INSTANTIATE_TEST_SUITE_P(Tcp, TransportConformanceTest, kTcpVariants,
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Tcp, MemoryStrategyTest, kTcpVariants,
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace comm
}  // namespace oflite

namespace oflite {
namespace comm {
namespace tcp {
namespace {

using std::chrono::milliseconds;

// A raw socket that completes the handshake as rank 0, then sends garbage:
// rank 1 must fail that connection (naming rank 0) without crashing.
TEST(TcpTransportTest, GarbageAfterHandshakeFailsTheConnectionCleanly) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, Status>> errors;
  TransportOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.on_peer_error = [&](int peer, const Status& status) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.push_back({peer, status});
    changed.notify_all();
  };
  TcpOptions tcp_options;
  tcp_options.job_token = "t";
  auto transport = CreateTcpTransport(options, tcp_options);
  ASSERT_TRUE(transport.ok());
  std::string endpoint = *(*transport)->LocalEndpoint(0);
  wire::Reader reader(endpoint.data(), endpoint.size());
  uint32_t version, rank, port;
  reader.ReadU32(&version);
  reader.ReadU32(&rank);
  reader.ReadU32(&port);
  const Deadline deadline = DeadlineAfter(milliseconds(5000));
  auto fd = DialTcp("127.0.0.1", port, deadline, "rank 1");
  ASSERT_TRUE(fd.ok());
  Hello hello{0, 2, 64, 4096, "t"};
  const std::string payload = EncodeHello(hello);
  FrameHeader header;
  header.type = FrameType::kHello;
  header.payload_length = payload.size();
  uint8_t bytes[kFrameHeaderSize];
  EncodeFrameHeader(header, bytes);
  ASSERT_TRUE(WriteFull(*fd, bytes, sizeof(bytes), deadline, "rank 1").ok());
  ASSERT_TRUE(WriteFull(*fd, payload.data(), payload.size(), deadline, "rank 1").ok());
  uint8_t ack[kFrameHeaderSize];
  ASSERT_TRUE(ReadFull(*fd, ack, sizeof(ack), deadline, "rank 1").ok());
  FrameHeader decoded;
  FrameLimits limits;
  ASSERT_TRUE(DecodeFrameHeader(ack, limits, &decoded).ok());
  EXPECT_EQ(decoded.type, FrameType::kHelloAck);
  // The transport now knows rank 0; feed it a header with a bad magic.
  std::string garbage(kFrameHeaderSize, '\x5a');
  ASSERT_TRUE(WriteFull(*fd, garbage.data(), garbage.size(), deadline, "rank 1").ok());
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(changed.wait_for(lock, milliseconds(5000), [&] { return !errors.empty(); }));
  EXPECT_EQ(errors[0].first, 0);
  EXPECT_EQ(errors[0].second.code(), StatusCode::kDataLoss) << errors[0].second;
  EXPECT_NE(errors[0].second.message().find("rank 0"), std::string::npos);
  lock.unlock();
  ::close(*fd);
}

// The whole process (both ranks' progress threads) is stopped for three
// peer timeouts, as a loaded machine or a paused VM stops it, while both
// ranks are idle and healthy. On waking, each rank's first tick may come
// before the peer's next ping: neither may count its own stop as the
// peer's silence (peer_loss_test blamed a healthy rank this way under
// full-suite load).
TEST(TcpTransportTest, OwnStallDoesNotBlameAHealthyPeer) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, Status>> errors;
  int delivered = 0;
  std::vector<TransportOptions> options(2);
  for (int rank = 0; rank < 2; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 2;
    // Long enough that a test machine's load alone does not starve a
    // progress thread past it (CI once saw a 400 ms timeout expire).
    options[rank].peer_timeout = milliseconds(1000);
    options[rank].on_peer_error = [&](int peer, const Status& status) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back({peer, status});
      changed.notify_all();
    };
    options[rank].on_message = [&](int, const void*, size_t) {
      std::lock_guard<std::mutex> lock(mutex);
      ++delivered;
      changed.notify_all();
    };
  }
  auto transports =
      CreateConnectedTransports(TcpFactory("tcp", false), options, milliseconds(10000));
  ASSERT_TRUE(transports.ok()) << transports.status();
  for (int round = 0; round < 3; ++round) {
    // A child stops this process for 3 s (async-signal-safe calls only).
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const timespec before{0, 50 * 1000 * 1000}, stop{3, 0};
      ::nanosleep(&before, nullptr);
      ::kill(parent, SIGSTOP);
      ::nanosleep(&stop, nullptr);
      ::kill(parent, SIGCONT);
      ::_exit(0);
    }
    int child_status = 0;
    while (::waitpid(child, &child_status, 0) < 0 && errno == EINTR) {
    }
    // Several ticks and pings after the stop: still healthy, still delivering.
    std::this_thread::sleep_for(milliseconds(600));
    const Status sent_a = (*(*transports)[1]->GetConnection(0))->SendMessage("a", 1);
    const Status sent_b = (*(*transports)[0]->GetConnection(1))->SendMessage("b", 1);
    std::unique_lock<std::mutex> lock(mutex);
    EXPECT_TRUE(sent_a.ok()) << "round " << round << ": " << sent_a;
    EXPECT_TRUE(sent_b.ok()) << "round " << round << ": " << sent_b;
    ASSERT_TRUE(changed.wait_for(lock, milliseconds(10000), [&] {
      return delivered == 2 * (round + 1) || !errors.empty();
    }));
    for (const auto& [peer, status] : errors) {
      ADD_FAILURE() << "round " << round << ": connection to rank " << peer
                    << " failed: " << status;
    }
    ASSERT_TRUE(errors.empty());
  }
}

// The read side handles a message where it lies in the 256 KiB input
// buffer, gathers one too large for it in a buffer of its own, copies small
// WRITE payloads out of the buffer and reads large ones in place. Frames of
// every kind and size, in a shuffled order so that they straddle the
// buffer's end at many points, must arrive intact and in order, each WRITE's
// data in place when the message posted after it arrives.
void FramesOfEverySizeArriveIntactAndInOrder(const TransportFactory& factory) {
  constexpr size_t kSlot = 600 << 10;  // above the input buffer's 256 KiB
  constexpr size_t kRegion = 4 << 20;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> received;
  std::vector<uint8_t> target(kRegion, 0);
  std::vector<TransportOptions> options(2);
  for (int rank = 0; rank < 2; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 2;
    options[rank].message_slot_size = kSlot;
  }
  // A message is kept whole; a WRITE's marker ("W" + offset + length) is
  // kept with the bytes the WRITE put there, read when the marker arrives.
  options[1].on_message = [&](int, const void* data, size_t size) {
    std::string message(static_cast<const char*>(data), size);
    if (size == 17 && message[0] == 'W') {
      const uint64_t offset = wire::LoadU64(reinterpret_cast<const uint8_t*>(data) + 1);
      const uint64_t length = wire::LoadU64(reinterpret_cast<const uint8_t*>(data) + 9);
      message.append(reinterpret_cast<const char*>(target.data()) + offset, length);
    }
    std::lock_guard<std::mutex> lock(mutex);
    received.push_back(std::move(message));
    changed.notify_all();
  };
  auto transports =
      CreateConnectedTransports(factory, options, milliseconds(10000));
  ASSERT_TRUE(transports.ok()) << transports.status();
  auto remote = (*transports)[1]->RegisterMemory(target.data(), target.size(), kAccessAll);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::vector<uint8_t> source(kRegion);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + i / 7);
  auto local = (*transports)[0]->RegisterMemory(source.data(), source.size(), kAccessAll);
  ASSERT_TRUE(local.ok()) << local.status();
  Connection* connection = *(*transports)[0]->GetConnection(1);

  // Sizes around the thresholds: the 4 KiB first read, the 64 KiB direct
  // read, the 256 KiB buffer and the slot.
  const std::vector<size_t> message_sizes = {0,         1,         33,        4095,      4096,
                                             4097,      60 << 10,  64 << 10,  100 << 10, 255 << 10,
                                             256 << 10, 300 << 10, kSlot};
  const std::vector<size_t> write_sizes = {100, 32 << 10, (64 << 10) - 1, 64 << 10, 1 << 20};
  struct Item {
    bool is_write;
    size_t size;
  };
  std::vector<Item> items;
  for (int round = 0; round < 3; ++round) {
    for (size_t size : message_sizes) items.push_back({false, size});
    for (size_t size : write_sizes) items.push_back({true, size});
  }
  std::mt19937 random(7);
  std::shuffle(items.begin(), items.end(), random);
  std::vector<std::string> expected;
  size_t write_at = 0;
  int writes_done = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_write) {
      std::string message(items[i].size, '\0');
      for (size_t b = 0; b < message.size(); ++b) message[b] = static_cast<char>(b * 7 + i);
      ASSERT_TRUE(connection->SendMessage(message.data(), message.size()).ok());
      expected.push_back(std::move(message));
      continue;
    }
    const size_t length = items[i].size;
    if (write_at + length > kRegion) write_at = 0;
    // Distinct bytes per WRITE: the source is read from a shifting offset.
    const size_t source_at = (i * 4099) % (kRegion - length);
    ASSERT_TRUE(connection
                    ->PostWrite(**local, source_at, (*remote)->remote_key(), write_at, length,
                                [&](const Status& status) {
                                  EXPECT_TRUE(status.ok()) << status;
                                  std::lock_guard<std::mutex> lock(mutex);
                                  ++writes_done;
                                  changed.notify_all();
                                })
                    .ok());
    std::string marker(1, 'W');
    wire::AppendU64(&marker, write_at);
    wire::AppendU64(&marker, length);
    ASSERT_TRUE(connection->SendMessage(marker.data(), marker.size()).ok());
    marker.append(reinterpret_cast<const char*>(source.data()) + source_at, length);
    expected.push_back(std::move(marker));
    write_at += length;
  }
  const int writes = static_cast<int>(std::count_if(items.begin(), items.end(),
                                                    [](const Item& item) { return item.is_write; }));
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(changed.wait_for(lock, milliseconds(20000), [&] {
    return received.size() == expected.size() && writes_done == writes;
  })) << received.size() << " of " << expected.size() << " messages, " << writes_done << " of "
      << writes << " WRITEs";
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(received[i].size(), expected[i].size()) << "message " << i;
    EXPECT_TRUE(received[i] == expected[i]) << "message " << i << " (" << expected[i].size()
                                            << " bytes) differs";
  }
  EXPECT_TRUE((*(*transports)[1]->GetConnection(0))->status().ok());
}

TEST(TcpTransportTest, FramesOfEverySizeArriveIntactAndInOrder) {
  FramesOfEverySizeArriveIntactAndInOrder(TcpFactory("tcp", false));
}

// The same frames with the low-water mark raised on every large payload:
// nothing is lost, reordered or left waiting for bytes that never come.
TEST(TcpTransportTest, FramesArriveIntactWithTheLowWaterMarkOnEveryLargePayload) {
  FramesOfEverySizeArriveIntactAndInOrder(TcpFactory("tcp_low_water", false, true));
}

// WRITEs of 4 MiB, each read in several pieces, with the low-water mark
// raised after the first piece: every byte lands, every completion runs,
// and the small message behind each WRITE is not held back by the mark.
TEST(TcpTransportTest, LargeWritesArriveIntactWithTheLowWaterMark) {
  constexpr size_t kWrite = 4 << 20;
  constexpr int kWrites = 6;
  std::mutex mutex;
  std::condition_variable changed;
  int markers = 0;
  std::vector<uint8_t> target(kWrite * kWrites, 0);
  std::vector<TransportOptions> options(2);
  for (int rank = 0; rank < 2; ++rank) {
    options[rank].rank = rank;
    options[rank].world_size = 2;
  }
  options[1].on_message = [&](int, const void*, size_t) {
    std::lock_guard<std::mutex> lock(mutex);
    ++markers;
    changed.notify_all();
  };
  auto transports = CreateConnectedTransports(TcpFactory("tcp_low_water", false, true), options,
                                              milliseconds(10000));
  ASSERT_TRUE(transports.ok()) << transports.status();
  auto remote = (*transports)[1]->RegisterMemory(target.data(), target.size(), kAccessAll);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::vector<uint8_t> source(target.size());
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 29 + i / 4099);
  auto local = (*transports)[0]->RegisterMemory(source.data(), source.size(), kAccessAll);
  ASSERT_TRUE(local.ok()) << local.status();
  Connection* connection = *(*transports)[0]->GetConnection(1);
  int writes_done = 0;
  for (int w = 0; w < kWrites; ++w) {
    ASSERT_TRUE(connection
                    ->PostWrite(**local, w * kWrite, (*remote)->remote_key(), w * kWrite, kWrite,
                                [&](const Status& status) {
                                  EXPECT_TRUE(status.ok()) << status;
                                  std::lock_guard<std::mutex> lock(mutex);
                                  ++writes_done;
                                  changed.notify_all();
                                })
                    .ok());
    const char marker = 'M';
    ASSERT_TRUE(connection->SendMessage(&marker, 1).ok());
  }
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(changed.wait_for(lock, milliseconds(20000), [&] {
    return markers == kWrites && writes_done == kWrites;
  })) << markers << " markers, " << writes_done << " WRITEs";
  EXPECT_TRUE(target == source);
  EXPECT_TRUE((*(*transports)[1]->GetConnection(0))->status().ok());
}

TEST(TcpTransportTest, LowWaterMarkFollowsThePayloadsRate) {
  constexpr uint64_t kCap = 256 * 1024;
  constexpr double kTrickle = 250e6;
  const uint64_t mib = 1 << 20;
  // 125 MB/s (a 1 Gbit/s link): 125 KB arrive in a millisecond.
  EXPECT_EQ(ReceiveLowWater(mib, 125000, 1e-3, kCap, kTrickle), 125000);
  // Slower still: at least kLowWaterMinBytes, else any byte wakes.
  EXPECT_EQ(ReceiveLowWater(mib, 20000, 1e-3, kCap, kTrickle), 20000);
  EXPECT_EQ(ReceiveLowWater(mib, 10000, 1e-3, kCap, kTrickle), 1);
  // Never more than the cap or the rest of the payload.
  EXPECT_EQ(ReceiveLowWater(4 * mib, 200000, 1e-3, 65536, kTrickle), 65536);
  EXPECT_EQ(ReceiveLowWater(mib, mib - 40000, 8e-3, kCap, kTrickle), 40000);
  EXPECT_EQ(ReceiveLowWater(mib, mib - 1000, 8e-3, kCap, kTrickle), 1);
  // Fast (loopback), the first read, a payload in, small payloads, off.
  EXPECT_EQ(ReceiveLowWater(mib, 500000, 1e-3, kCap, kTrickle), 1);
  EXPECT_EQ(ReceiveLowWater(mib, 100000, -1, kCap, kTrickle), 1);
  EXPECT_EQ(ReceiveLowWater(mib, mib, 1e-3, kCap, kTrickle), 1);
  EXPECT_EQ(ReceiveLowWater(kLowWaterMinPayload - 1, 100000, 1e-3, kCap, kTrickle), 1);
  EXPECT_EQ(ReceiveLowWater(mib, 125000, 1e-3, 0, kTrickle), 1);
}

}  // namespace
}  // namespace tcp
}  // namespace comm
}  // namespace oflite
