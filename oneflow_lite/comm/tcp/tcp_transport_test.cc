#include "oneflow_lite/comm/tcp/tcp_transport.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/wire.h"

#include "oneflow_lite/comm/memory/strategy_test_suite.h"
#include "oneflow_lite/comm/transport_test_suite.h"

namespace oflite {
namespace comm {
namespace {

TransportFactory TcpFactory(const std::string& name, bool caller_progress) {
  return {name, [caller_progress](const TransportOptions& options) {
            tcp::TcpOptions tcp_options;
            tcp_options.job_token = "conformance";
            tcp_options.caller_progress = caller_progress;
            return tcp::CreateTcpTransport(options, tcp_options);
          }};
}

// The defaults, and caller progress (the suites' caller-poll cases then
// read the sockets on their polling threads too).
const auto kTcpVariants = ::testing::Values(TcpFactory("tcp", false),
                                            TcpFactory("tcp_caller_progress", true));

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

}  // namespace
}  // namespace tcp
}  // namespace comm
}  // namespace oflite
