// The rendezvous server under floods from peers that never prove the job
// token (docs/comm.md, "Limits of the control plane"), and a wrong job token
// that claims a missing rank. Real sockets on loopback, bounded counts.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/comm/testing/listener_flood.h"
#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

using std::chrono::milliseconds;
using namespace ::oflite::comm::testing;  // NOLINT
constexpr char kToken[] = "flood-test-token";
constexpr milliseconds kBound{10000};  // generous bound for any close

std::unique_ptr<RendezvousServer> StartServer(RendezvousOptions options) {
  options.job_token = kToken;
  auto server = RendezvousServer::Start(options);
  CHECK(server.ok()) << server.status();
  return std::move(*server);
}

StatusOr<std::unique_ptr<ControlClient>> Join(int port, int rank, int world,
                                              const std::string& token = kToken) {
  ControlClientOptions options;
  options.master = "127.0.0.1:" + std::to_string(port);
  options.rank = rank;
  options.world_size = world;
  options.job_token = token;
  options.connect_timeout = milliseconds(20000);
  return ControlClient::Connect(options);
}

// A JOIN header that claims `length` payload bytes.
std::string JoinHeader(uint32_t length) {
  std::string header;
  wire::AppendU32(&header, kControlMagic);
  wire::AppendU16(&header, kControlVersion);
  wire::AppendU16(&header, static_cast<uint16_t>(ControlType::kJoin));
  wire::AppendU32(&header, length);
  wire::AppendU32(&header, 0);
  return header;
}

TEST(ControlFloodTest, BogusSixteenMebibyteJoinIsRefusedWithoutAllocating) {
  RendezvousOptions options;
  options.join_timeout = milliseconds(60000);  // only the size check may close
  auto server = StartServer(options);
  const int64_t rss_before = ResidentBytes();
  std::vector<int> sockets;
  const std::string header = JoinHeader(kMaxControlPayload - 1);
  for (int i = 0; i < 16; ++i) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, header.data(), header.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(header.size()));
    sockets.push_back(fd);
  }
  for (int fd : sockets) EXPECT_TRUE(ClosedByPeer(fd, kBound)) << "socket " << fd;
  const int64_t grown = ResidentBytes() - rss_before;
  // 16 x 16 MiB were claimed; a few MiB of noise are allowed.
  EXPECT_LT(grown, int64_t{32} << 20) << "resident memory grew by " << grown;
  CloseAll(&sockets);
  auto joined = Join(server->port(), 0, 1);
  EXPECT_TRUE(joined.ok()) << joined.status();
}

TEST(ControlFloodTest, IdleConnectionsCostNoThreadAndCloseAtTheDeadline) {
  RendezvousOptions options;
  options.join_timeout = milliseconds(1500);
  auto server = StartServer(options);
  const int threads_before = ThreadCount();
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(ConnectLoopback(server->port()));
    ASSERT_GE(idle.back(), 0);
  }
  // Once a later JOIN is admitted, every idle socket before it was accepted.
  auto joined = Join(server->port(), 0, 1);
  ASSERT_TRUE(joined.ok()) << joined.status();
  // The admitted rank has one serving thread (and, in this process, its
  // client's heartbeat thread); the idle sockets have none.
  EXPECT_LE(ThreadCount(), threads_before + 2);
  for (int fd : idle) EXPECT_TRUE(ClosedByPeer(fd, kBound)) << "socket " << fd;
  CloseAll(&idle);
  EXPECT_EQ(server->stats().expired, 40);
}

TEST(ControlFloodTest, PendingCapEvictsTheOldestAndKeepsDescriptorsBounded) {
  RendezvousOptions options;
  options.join_timeout = milliseconds(60000);
  options.max_pending_joins = 8;
  auto server = StartServer(options);
  const int descriptors_before = OpenDescriptors();
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) {
    idle.push_back(ConnectLoopback(server->port()));
    ASSERT_GE(idle.back(), 0);
  }
  auto joined = Join(server->port(), 0, 1);  // evicts one more idle socket
  ASSERT_TRUE(joined.ok()) << joined.status();
  for (int i = 0; i < 52; ++i) EXPECT_TRUE(ClosedByPeer(idle[i], kBound)) << i;
  for (int i = 53; i < 60; ++i) EXPECT_TRUE(StillOpen(idle[i])) << i;
  // Our 60 client sockets, 2 ends of the rank's connection, at most 8 waiting.
  EXPECT_LE(OpenDescriptors(), descriptors_before + 60 + 2 + 8);
  EXPECT_LE(server->stats().pending, 8);
  CloseAll(&idle);
}

// Under a flood a genuine connection may be evicted before its JOIN is read;
// the client dials again (control_client.h) and gets in.
TEST(ControlFloodTest, GenuineRanksJoinWhileIdleConnectionsFillTheCap) {
  RendezvousOptions options;
  options.world_size = 3;
  options.join_timeout = milliseconds(60000);
  options.max_pending_joins = 2;
  auto server = StartServer(options);
  std::vector<int> idle;
  std::atomic<bool> joined{false};
  std::thread flood([&] {
    for (int i = 0; i < 600 && !joined; ++i) idle.push_back(ConnectLoopback(server->port()));
  });
  std::vector<std::unique_ptr<ControlClient>> clients;
  for (int rank = 0; rank < 3; ++rank) {
    auto client = Join(server->port(), rank, 3);
    EXPECT_TRUE(client.ok()) << client.status();
    if (client.ok()) clients.push_back(std::move(*client));
  }
  joined = true;
  flood.join();
  EXPECT_TRUE(server->WaitForAllJoined(milliseconds(100)).ok());
  EXPECT_LE(server->stats().pending, 2);
  CloseAll(&idle);
}

TEST(ControlFloodTest, DescriptorLimitNeitherSpinsNorStopsTheServer) {
  auto child = StarvedServer::Start(64, [](std::shared_ptr<void>* keep) {
    RendezvousOptions options;
    options.world_size = 1;
    options.job_token = kToken;
    auto server = RendezvousServer::Start(options);
    if (!server.ok()) return -1;
    const int port = (*server)->port();
    *keep = std::shared_ptr<RendezvousServer>(std::move(*server));
    return port;
  });
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(FloodAtDescriptorLimit(child.get(), "the server"), "");
  auto joined = Join(child->port(), 0, 1);
  EXPECT_TRUE(joined.ok()) << joined.status();
}

// Finding 8: a rank with the wrong token is refused; rank 0's wait on that
// rank fails after the grace, naming the refusal (address, rank, token).
TEST(ControlFloodTest, WrongTokenForAMissingRankFailsItsWaitersNamingTheRefusal) {
  RendezvousOptions options;
  options.world_size = 2;
  options.refused_rank_grace = milliseconds(500);
  auto server = StartServer(options);
  auto rank0 = Join(server->port(), 0, 2);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  auto intruder = Join(server->port(), 1, 2, "not-the-token");
  EXPECT_EQ(intruder.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(intruder.status().message().find("wrong job token"), std::string::npos)
      << intruder.status();
  const auto start = Clock::now();
  auto value = (*rank0)->Get("endpoint-of-1", milliseconds(60000), 1);
  EXPECT_LT(Clock::now() - start, milliseconds(30000));  // not the 60 s wait
  EXPECT_EQ(value.status().code(), StatusCode::kUnavailable) << value.status();
  for (const char* part : {"wrong job token", "claiming rank 1", "127.0.0.1:"}) {
    EXPECT_NE(value.status().message().find(part), std::string::npos)
        << "'" << part << "' missing from: " << value.status();
  }
  Status all = server->WaitForAllJoined(milliseconds(100));
  EXPECT_NE(all.message().find("wrong job token"), std::string::npos) << all;
  // The genuine rank arriving after the grace is told why it is too late.
  auto late = Join(server->port(), 1, 2);
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition) << late.status();
}

TEST(ControlFloodTest, GenuineRankWithinTheGraceStillJoins) {
  RendezvousOptions options;
  options.world_size = 2;
  options.refused_rank_grace = milliseconds(60000);
  auto server = StartServer(options);
  auto rank0 = Join(server->port(), 0, 2);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  EXPECT_FALSE(Join(server->port(), 1, 2, "not-the-token").ok());
  auto rank1 = Join(server->port(), 1, 2);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE((*rank1)->Put("endpoint-of-1", "here").ok());
  auto value = (*rank0)->Get("endpoint-of-1", milliseconds(5000), 1);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "here");
  EXPECT_TRUE(server->WaitForAllJoined(milliseconds(100)).ok());
}

}  // namespace
}  // namespace control
}  // namespace comm
}  // namespace oflite
