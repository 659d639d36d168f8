#include "oneflow_lite/comm/comm_net.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/socket_util.h"

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;

int FreePort() {
  int port = 0;
  auto fd = ListenTcp("127.0.0.1", &port);
  CHECK(fd.ok());
  ::close(*fd);
  return port;
}

// Three ranks in one process: start, exchange actor messages, all-reduce.
TEST(CommNetTest, StartsAJobAndCarriesMessagesAndCollectives) {
  constexpr int kWorld = 3;
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<std::unique_ptr<CommNet>> nets(kWorld);
  std::vector<Status> results(kWorld);
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::vector<std::string>> inbox(kWorld);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      CommNetOptions options;
      options.rank = rank;
      options.world_size = kWorld;
      options.master = master;
      options.job_token = "comm-net-test";
      options.connect_timeout = milliseconds(20000);
      auto net = CommNet::Start(options);
      if (!net.ok()) {
        results[rank] = net.status();
        return;
      }
      nets[rank] = std::move(*net);
      nets[rank]->router()->SetHandler(kActorChannel, [&, rank](int peer, const void* data,
                                                                size_t size) {
        std::lock_guard<std::mutex> lock(mutex);
        inbox[rank].push_back(std::to_string(peer) + ":" +
                              std::string(static_cast<const char*>(data), size));
        arrived.notify_all();
      });
      // Each rank greets its right neighbour; the greeting may arrive
      // before the neighbour's handler exists (parked by the router).
      Connection* right = *nets[rank]->transport()->GetConnection((rank + 1) % kWorld);
      results[rank] = MessageRouter::Send(right, kActorChannel, "hi");
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Status& status : results) ASSERT_TRUE(status.ok()) << status;
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(arrived.wait_for(lock, milliseconds(10000), [&] {
      return inbox[0].size() == 1 && inbox[1].size() == 1 && inbox[2].size() == 1;
    }));
    EXPECT_EQ(inbox[0][0], "2:hi");
    EXPECT_EQ(inbox[1][0], "0:hi");
  }
  threads.clear();
  std::vector<std::vector<double>> data(kWorld, std::vector<double>(101));
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      for (size_t i = 0; i < data[rank].size(); ++i) data[rank][i] = rank * 0.5 + i;
      auto ring = RingCommunicator::Create(nets[rank]->transport(), nets[rank]->router(),
                                           nets[rank]->pool(), CollectiveOptions());
      auto region = nets[rank]->transport()->RegisterMemory(data[rank].data(), 101 * 8,
                                                            kAccessAll);
      results[rank] = (*ring)->AllReduce(**region, 0, 101, DT_DOUBLE,
                                         DeadlineAfter(milliseconds(20000)));
      if (results[rank].ok()) {
        results[rank] = nets[rank]->control()->Barrier("after", milliseconds(20000));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank];
    EXPECT_EQ(data[rank][100], 1.5 + 300.0);
  }
  nets.clear();
}

TEST(CommNetTest, MissingTokenAndBadRankAreRejected) {
  CommNetOptions options;
  options.world_size = 2;
  options.rank = 2;
  options.master = "127.0.0.1:1";
  options.job_token = "t";
  EXPECT_EQ(CommNet::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.rank = 1;
  options.job_token = "";
  ::unsetenv("OFLITE_JOB_TOKEN");
  auto started = CommNet::Start(options);
  EXPECT_NE(started.status().message().find("no job token"), std::string::npos)
      << started.status();
}

}  // namespace
}  // namespace comm
}  // namespace oflite
