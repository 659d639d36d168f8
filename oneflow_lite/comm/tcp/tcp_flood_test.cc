// The TCP provider's listener under floods from peers that never complete a
// HELLO (docs/comm.md, "Limits of the data ports"). Real sockets on
// loopback, bounded counts.
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/comm/testing/listener_flood.h"
#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace tcp {
namespace {

using std::chrono::milliseconds;
using namespace ::oflite::comm::testing;  // NOLINT
constexpr char kToken[] = "flood-test-token";
constexpr milliseconds kBound{10000};  // generous bound for any close

// Rank 1 of 2: it accepts rank 0's connection.
std::unique_ptr<Transport> StartRank1(const TcpOptions& tcp_options) {
  TransportOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.peer_timeout = milliseconds(60000);  // only the handshake rules close
  TcpOptions tcp = tcp_options;
  tcp.job_token = kToken;
  auto transport = CreateTcpTransport(options, tcp);
  CHECK(transport.ok()) << transport.status();
  return std::move(*transport);
}

int ListenPort(Transport* transport) {
  const std::string endpoint = *transport->LocalEndpoint(0);
  wire::Reader reader(endpoint.data(), endpoint.size());
  uint32_t version = 0, rank = 0, port = 0;
  reader.ReadU32(&version);
  reader.ReadU32(&rank);
  reader.ReadU32(&port);
  return static_cast<int>(port);
}

// Sends rank 0's HELLO on a fresh socket; true if HELLO_ACK comes back.
bool HandshakeAsRank0(int port) {
  const Deadline deadline = DeadlineAfter(kBound);
  auto fd = DialTcp("127.0.0.1", port, deadline, "rank 1");
  if (!fd.ok()) return false;
  const TransportOptions defaults;
  Hello hello{0, 2, static_cast<uint32_t>(defaults.message_slots),
              static_cast<uint32_t>(defaults.message_slot_size), kToken};
  const std::string payload = EncodeHello(hello);
  FrameHeader header;
  header.type = FrameType::kHello;
  header.payload_length = payload.size();
  uint8_t bytes[kFrameHeaderSize];
  EncodeFrameHeader(header, bytes);
  uint8_t answer[kFrameHeaderSize];
  FrameHeader decoded;
  const bool acked =
      WriteFull(*fd, bytes, sizeof(bytes), deadline, "rank 1").ok() &&
      WriteFull(*fd, payload.data(), payload.size(), deadline, "rank 1").ok() &&
      ReadFull(*fd, answer, sizeof(answer), deadline, "rank 1").ok() &&
      DecodeFrameHeader(answer, FrameLimits(), &decoded).ok() &&
      decoded.type == FrameType::kHelloAck;
  ::close(*fd);
  return acked;
}

// Waits (bounded) until this process has at most `limit` descriptors.
bool DescriptorsSettleAtMost(int limit) {
  for (int i = 0; i < 200 && OpenDescriptors() > limit; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  return OpenDescriptors() <= limit;
}

TEST(TcpFloodTest, RejectedConnectionsAreClosedAndFreedAtOnce) {
  auto transport = StartRank1(TcpOptions());
  const int port = ListenPort(transport.get());
  const int descriptors_before = OpenDescriptors();
  const int64_t rss_before = ResidentBytes();
  for (int i = 0; i < 1000; ++i) {  // connect + close
    const int fd = ConnectLoopback(port);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  const std::string garbage(kFrameHeaderSize, '\x5a');
  for (int i = 0; i < 200; ++i) {  // a frame that is no HELLO
    const int fd = ConnectLoopback(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(garbage.size()));
    EXPECT_TRUE(ClosedByPeer(fd, kBound)) << i;
    ::close(fd);
  }
  EXPECT_TRUE(DescriptorsSettleAtMost(descriptors_before + 2))
      << OpenDescriptors() << " descriptors, " << descriptors_before << " before";
  const int64_t grown = ResidentBytes() - rss_before;
  // 1,200 connections at 256 KiB would be 300 MiB.
  EXPECT_LT(grown, int64_t{32} << 20) << "resident memory grew by " << grown;
  EXPECT_TRUE(HandshakeAsRank0(port));
}

TEST(TcpFloodTest, OversizedHelloIsRefusedBeforeTheHandshake) {
  auto transport = StartRank1(TcpOptions());
  const int port = ListenPort(transport.get());
  FrameHeader header;
  header.type = FrameType::kHello;
  header.payload_length = 60 * 1024;  // within the frame limit, not a HELLO's
  uint8_t bytes[kFrameHeaderSize];
  EncodeFrameHeader(header, bytes);
  const int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, bytes, sizeof(bytes), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(bytes)));
  EXPECT_TRUE(ClosedByPeer(fd, kBound));
  ::close(fd);
}

TEST(TcpFloodTest, IdleConnectionsAreClosedAfterTheHandshakeTimeout) {
  TcpOptions tcp;
  tcp.handshake_timeout = milliseconds(500);
  auto transport = StartRank1(tcp);
  const int port = ListenPort(transport.get());
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(ConnectLoopback(port));
    ASSERT_GE(idle.back(), 0);
  }
  for (int fd : idle) EXPECT_TRUE(ClosedByPeer(fd, kBound)) << "socket " << fd;
  CloseAll(&idle);
  EXPECT_TRUE(HandshakeAsRank0(port));
}

TEST(TcpFloodTest, PendingCapEvictsTheOldestAndKeepsDescriptorsBounded) {
  TcpOptions tcp;
  tcp.handshake_timeout = milliseconds(60000);
  tcp.max_pending_handshakes = 8;
  auto transport = StartRank1(tcp);
  const int port = ListenPort(transport.get());
  const int descriptors_before = OpenDescriptors();
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) {
    idle.push_back(ConnectLoopback(port));
    ASSERT_GE(idle.back(), 0);
  }
  ASSERT_TRUE(HandshakeAsRank0(port));  // evicts one more idle socket
  for (int i = 0; i < 52; ++i) EXPECT_TRUE(ClosedByPeer(idle[i], kBound)) << i;
  for (int i = 53; i < 60; ++i) EXPECT_TRUE(StillOpen(idle[i])) << i;
  // Our 60 sockets, at most 8 waiting, rank 0's (closed) connection.
  EXPECT_TRUE(DescriptorsSettleAtMost(descriptors_before + 60 + 8 + 1))
      << OpenDescriptors() << " descriptors, " << descriptors_before << " before";
  CloseAll(&idle);
}

TEST(TcpFloodTest, DescriptorLimitNeitherSpinsNorStopsTheListener) {
  auto child = StarvedServer::Start(64, [](std::shared_ptr<void>* keep) {
    std::unique_ptr<Transport> transport = StartRank1(TcpOptions());
    const int port = ListenPort(transport.get());
    *keep = std::shared_ptr<Transport>(std::move(transport));
    return port;
  });
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(FloodAtDescriptorLimit(child.get(), "the transport"), "");
  EXPECT_TRUE(HandshakeAsRank0(child->port()));
}

}  // namespace
}  // namespace tcp
}  // namespace comm
}  // namespace oflite
