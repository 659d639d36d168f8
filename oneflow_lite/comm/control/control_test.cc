#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/control/channel.h"
#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "token-for-tests";

std::unique_ptr<RendezvousServer> StartServer(int world) {
  RendezvousOptions options;
  options.world_size = world;
  options.job_token = kToken;
  auto server = RendezvousServer::Start(options);
  CHECK(server.ok()) << server.status();
  return std::move(*server);
}

StatusOr<std::unique_ptr<ControlClient>> Join(const RendezvousServer& server,
                                              int rank, int world,
                                              const std::string& token = kToken) {
  ControlClientOptions options;
  options.master = "127.0.0.1:" + std::to_string(server.port());
  options.rank = rank;
  options.world_size = world;
  options.job_token = token;
  options.connect_timeout = milliseconds(5000);
  return ControlClient::Connect(options);
}

std::vector<std::unique_ptr<ControlClient>> JoinAll(const RendezvousServer& server,
                                                    int world) {
  std::vector<std::unique_ptr<ControlClient>> clients;
  for (int rank = 0; rank < world; ++rank) {
    auto client = Join(server, rank, world);
    CHECK(client.ok()) << client.status();
    clients.push_back(std::move(*client));
  }
  return clients;
}

TEST(ControlPlaneTest, PutThenBlockingGetAcrossRanks) {
  auto server = StartServer(2);
  auto clients = JoinAll(*server, 2);
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(clients[1]->Put("answer", std::string("4\0" "2", 3)).ok());
  });
  auto value = clients[0]->Get("answer", milliseconds(5000), 1);
  publisher.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("4\0" "2", 3));
  ASSERT_TRUE(clients[0]->Put("empty", "").ok());
  EXPECT_EQ(*clients[1]->Get("empty", milliseconds(100)), "");
  EXPECT_TRUE(server->WaitForAllJoined(milliseconds(100)).ok());
}

TEST(ControlPlaneTest, GetTimesOutNamingThePublisher) {
  auto server = StartServer(2);
  auto clients = JoinAll(*server, 2);
  auto start = Clock::now();
  auto value = clients[0]->Get("never", milliseconds(200), 1);
  EXPECT_EQ(value.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(value.status().message().find("rank 1"), std::string::npos)
      << value.status();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(ControlPlaneTest, BarrierReleasesAllRanksTogether) {
  for (int world : {1, 2, 3, 4}) {
    auto server = StartServer(world);
    auto clients = JoinAll(*server, world);
    std::vector<std::thread> threads;
    std::vector<Status> results(world);
    for (int rank = 0; rank < world; ++rank) {
      threads.emplace_back([&, rank] {
        for (int round = 0; round < 3 && results[rank].ok(); ++round) {
          results[rank] = clients[rank]->Barrier("round", milliseconds(5000));
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (const Status& status : results) EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(ControlPlaneTest, BarrierTimeoutListsMissingRanks) {
  auto server = StartServer(4);
  auto clients = JoinAll(*server, 4);
  std::thread other([&] {
    clients[1]->Barrier("start", milliseconds(300)).IgnoreError();
  });
  Status status = clients[0]->Barrier("start", milliseconds(300));
  other.join();
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("ranks 2, 3"), std::string::npos) << status;
}

TEST(ControlPlaneTest, DepartedRankFailsWaitersAtOnce) {
  auto server = StartServer(3);
  auto clients = JoinAll(*server, 3);
  clients[2].reset();  // rank 2 leaves
  auto start = Clock::now();
  Status barrier = clients[0]->Barrier("after-exit", milliseconds(20000));
  EXPECT_EQ(barrier.code(), StatusCode::kUnavailable) << barrier;
  EXPECT_NE(barrier.message().find("rank 2"), std::string::npos) << barrier;
  auto value = clients[1]->Get("from-2", milliseconds(20000), 2);
  EXPECT_NE(value.status().message().find("rank 2"), std::string::npos);
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

// A peer-loss handler on another thread wakes a rank blocked at a barrier
// (whose other rank never comes) with its reason; later calls fail with it
// too. Without Abort the barrier would wait its full 120 s.
TEST(ControlPlaneTest, AbortWakesABlockedBarrierWithItsReason) {
  auto server = StartServer(2);
  auto clients = JoinAll(*server, 2);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    clients[0]->Abort(UnavailableError("lost rank 1: silent"));
    clients[0]->Abort(InternalError("a later echo"));  // the first reason stays
  });
  Status barrier = clients[0]->Barrier("run-done", milliseconds(120000));
  aborter.join();
  EXPECT_EQ(barrier, UnavailableError("lost rank 1: silent"));
  EXPECT_EQ(clients[0]->Put("k", "v"), UnavailableError("lost rank 1: silent"));
  EXPECT_TRUE(clients[1]->Put("k", "v").ok());  // the other rank's client is untouched
}

TEST(ControlPlaneTest, ConnectionWithoutJobTokenIsRefused) {
  auto server = StartServer(2);
  auto intruder = Join(*server, 1, 2, "wrong-token");
  ASSERT_FALSE(intruder.ok());
  EXPECT_EQ(intruder.status().code(), StatusCode::kPermissionDenied)
      << intruder.status();
  // A connection that sends garbage instead of JOIN is dropped.
  auto fd = DialTcp("127.0.0.1", server->port(), DeadlineAfter(milliseconds(2000)),
                    "master");
  ASSERT_TRUE(fd.ok());
  const char garbage[32] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(WriteFull(*fd, garbage, sizeof(garbage),
                        DeadlineAfter(milliseconds(2000)), "master").ok());
  char byte;
  Status read = ReadFull(*fd, &byte, 1, DeadlineAfter(milliseconds(3000)), "master");
  EXPECT_EQ(read.code(), StatusCode::kUnavailable) << read;  // closed, no answer
  ::close(*fd);
  // The real rank 1 still joins afterwards.
  EXPECT_TRUE(Join(*server, 1, 2).ok());
}

TEST(ControlPlaneTest, PeerThatNeverArrivesTimesOutNamingIt) {
  auto server = StartServer(3);
  auto rank0 = Join(*server, 0, 3);
  ASSERT_TRUE(rank0.ok());
  Status status = server->WaitForAllJoined(milliseconds(200));
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("ranks 1, 2 never joined"), std::string::npos)
      << status;
  // A client whose master never comes up fails within its bound.
  ControlClientOptions options;
  options.master = "127.0.0.1:1";
  options.connect_timeout = milliseconds(300);
  auto start = Clock::now();
  auto client = ControlClient::Connect(options);
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(ControlPlaneTest, ConnectTransportAndExchangeKeysForThreeRanks) {
  constexpr int kWorld = 3;
  auto server = StartServer(kWorld);
  auto clients = JoinAll(*server, kWorld);
  std::vector<std::unique_ptr<Transport>> transports(kWorld);
  std::vector<std::vector<uint8_t>> buffers(kWorld);
  std::vector<std::unique_ptr<MemoryRegion>> regions(kWorld);
  std::vector<Status> results(kWorld);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      TransportOptions options;
      options.rank = rank;
      options.world_size = kWorld;
      tcp::TcpOptions tcp_options;
      tcp_options.job_token = kToken;
      auto transport = tcp::CreateTcpTransport(options, tcp_options);
      if (!transport.ok()) {
        results[rank] = transport.status();
        return;
      }
      transports[rank] = std::move(*transport);
      results[rank] = ConnectTransport(transports[rank].get(),
                                       clients[rank].get(), "comm",
                                       milliseconds(10000));
      if (!results[rank].ok()) return;
      buffers[rank].assign(16, static_cast<uint8_t>(rank + 1));
      regions[rank] = std::move(*transports[rank]->RegisterMemory(
          buffers[rank].data(), 16, kAccessAll));
      results[rank] = PublishRemoteKey(clients[rank].get(), "grad",
                                       regions[rank]->remote_key());
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Status& status : results) ASSERT_TRUE(status.ok()) << status;
  // Rank 0 reads rank 2's buffer through the exchanged key.
  auto key = FetchRemoteKey(clients[0].get(), "grad", 2, milliseconds(1000));
  ASSERT_TRUE(key.ok()) << key.status();
  std::vector<uint8_t> local(16, 0);
  auto local_region = transports[0]->RegisterMemory(local.data(), 16, kAccessAll);
  Connection* link = *transports[0]->GetConnection(2);
  ASSERT_TRUE(ReadSync(link, **local_region, 0, *key, 0, 16,
                       DeadlineAfter(milliseconds(5000))).ok());
  EXPECT_EQ(local, std::vector<uint8_t>(16, 3));
  local_region->reset();
  regions.clear();
}

TEST(ControlPlaneTest, TransportRefusesPeerWithForeignToken) {
  TransportOptions options0, options1;
  options0.world_size = options1.world_size = 2;
  options1.rank = 1;
  tcp::TcpOptions good, foreign;
  good.job_token = kToken;
  foreign.job_token = "another-job";
  auto rank0 = tcp::CreateTcpTransport(options0, foreign);
  auto rank1 = tcp::CreateTcpTransport(options1, good);
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  std::string endpoint1 = *(*rank1)->LocalEndpoint(0);
  std::string endpoint0 = *(*rank0)->LocalEndpoint(1);
  Status dial;
  std::thread dialer([&] {
    dial = (*rank0)->Connect(1, endpoint1, DeadlineAfter(milliseconds(3000)));
  });
  Status accept = (*rank1)->Connect(0, endpoint0, DeadlineAfter(milliseconds(1000)));
  dialer.join();
  EXPECT_FALSE(accept.ok());
  EXPECT_EQ(dial.code(), StatusCode::kPermissionDenied) << dial;
  EXPECT_NE(dial.message().find("wrong job token"), std::string::npos) << dial;
}

}  // namespace
}  // namespace control
}  // namespace comm
}  // namespace oflite
