// CommNet across real processes on loopback: this test process is rank 0
// (it serves the rendezvous); other ranks are comm_peer processes started
// with fork/exec. Covers one-sided WRITE and READ between the processes'
// registered memory, a peer stopped and continued (nothing lost), kill -9 of
// a peer, a foreign connection without the job
// token, a peer that never arrives, and a 3-process ring all-reduce; each
// test runs once per provider (tcp, shm, and ibverbs_emu: the ibverbs
// provider on the cross-process verbs emulator, VerbsEmulator::Join).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/comm/ibverbs/emulated_transport.h"
#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "multiprocess-token";
constexpr char kPeerBinary[] = "oneflow_lite/comm/comm_peer";

pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kPeerBinary));
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(kPeerBinary, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Shared-memory objects of the shm provider this process still maps, plus
// any name in /dev/shm that looks like ours (the provider uses memfds, which
// have none: a killed peer's objects die with its last mapping).
int SharedObjectsLeft() {
  int count = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("oflite-shm") != std::string::npos) ++count;
  }
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) {
      if (std::string(entry->d_name).find("oflite") != std::string::npos) ++count;
    }
    ::closedir(dir);
  }
  return count;
}

// The emulated fabric of this test process (its peers join it by name).
// Random, not the pid: concurrent test runs in pid namespaces share pids,
// while abstract socket names are host-wide.
std::string FabricName() {
  static const std::string name = [] {
    std::random_device random;
    return "multiprocess-test-" + std::to_string(random()) + "-" + std::to_string(random());
  }();
  return name;
}

// Sockets of FabricName() that exist on this host: one per emulated port
// (its slot), plus connections. The kernel removes a dead process's.
int FabricSocketsLeft() {
  int count = 0;
  std::ifstream sockets("/proc/net/unix");
  const std::string name = "@oflite-verbs/" + FabricName() + "/";
  for (std::string line; std::getline(sockets, line);) {
    if (line.find(name) != std::string::npos) ++count;
  }
  return count;
}

int WaitExit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Rank 0 of a job: rendezvous server, control client, transport of the
// provider under test.
struct Rank0 {
  std::string provider = "tcp";
  std::unique_ptr<control::RendezvousServer> server;
  std::unique_ptr<control::ControlClient> control;
  MessageRouter router;
  std::unique_ptr<Transport> transport;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, Status>> peer_errors;
  int echoes = 0;

  // The transport's progress thread calls back into the members above: it
  // must stop before they are destroyed (members go in reverse order).
  ~Rank0() { transport.reset(); }

  std::string master() const { return "127.0.0.1:" + std::to_string(server->port()); }

  void Start(int world) {
    control::RendezvousOptions options;
    options.world_size = world;
    options.job_token = kToken;
    server = std::move(*control::RendezvousServer::Start(options));
    control::ControlClientOptions client;
    client.master = master();
    client.world_size = world;
    client.job_token = kToken;
    control = std::move(*control::ControlClient::Connect(client));
    router.SetHandler(1, [this](int, const void*, size_t) {
      std::lock_guard<std::mutex> lock(mutex);
      ++echoes;
      changed.notify_all();
    });
    TransportOptions transport_options;
    transport_options.world_size = world;
    transport_options.on_message = router.AsHandler();
    transport_options.peer_timeout = milliseconds(5000);
    transport_options.on_peer_error = [this](int peer, const Status& status) {
      std::lock_guard<std::mutex> lock(mutex);
      peer_errors.push_back({peer, status});
      changed.notify_all();
    };
    if (provider == "shm") {
      transport = std::move(*shm::CreateShmTransport(transport_options, shm::ShmOptions()));
      return;
    }
    if (provider == "ibverbs_emu") {
      transport = std::move(*ibverbs::JoinedIbverbsCreator(FabricName())(transport_options));
      return;
    }
    tcp::TcpOptions tcp_options;
    tcp_options.job_token = kToken;
    transport = std::move(*tcp::CreateTcpTransport(transport_options, tcp_options));
  }

  std::vector<std::string> PeerArgs(const std::string& mode, int rank, int world) {
    return {"--mode=" + mode, "--master=" + master(), "--rank=" + std::to_string(rank),
            "--world=" + std::to_string(world), "--comm=" + provider,
            "--fabric=" + FabricName(), std::string("--token=") + kToken};
  }
};

class MultiprocessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiprocessTest, WriteAndReadMoveBytesBetweenProcesses) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(2);
  pid_t rank1 = Spawn(rank0.PeerArgs("serve", 1, 2));
  ASSERT_TRUE(control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                        "comm", milliseconds(20000)).ok());
  auto key = control::FetchRemoteKey(rank0.control.get(), "buffer", 1, milliseconds(10000));
  ASSERT_TRUE(key.ok()) << key.status();
  Connection* to1 = *rank0.transport->GetConnection(1);
  const Deadline deadline = DeadlineAfter(milliseconds(20000));
  // READ the peer's whole buffer (byte i = 1 + i).
  std::vector<uint8_t> seen(1 << 20);
  auto seen_region = rank0.transport->RegisterMemory(seen.data(), seen.size(), kAccessAll);
  ASSERT_TRUE(ReadSync(to1, **seen_region, 0, *key, 0, seen.size(), deadline).ok());
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], static_cast<uint8_t>(1 + i)) << i;
  // WRITE an odd-sized piece at an odd offset, then READ it (and its
  // untouched neighbours) back.
  const size_t offset = 4097, length = 300001;
  std::vector<uint8_t> pattern(length);
  for (size_t i = 0; i < length; ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 3);
  auto pattern_region = rank0.transport->RegisterMemory(pattern.data(), length, kAccessAll);
  ASSERT_TRUE(WriteSync(to1, **pattern_region, 0, *key, offset, length, deadline).ok());
  std::fill(seen.begin(), seen.end(), 0);
  ASSERT_TRUE(ReadSync(to1, **seen_region, 0, *key, 0, seen.size(), deadline).ok());
  for (size_t i = 0; i < seen.size(); ++i) {
    uint8_t want = i >= offset && i < offset + length ? pattern[i - offset]
                                                     : static_cast<uint8_t>(1 + i);
    ASSERT_EQ(seen[i], want) << i;
  }
  ASSERT_TRUE(rank0.control->Put("release", "1").ok());
  EXPECT_EQ(WaitExit(rank1), 0);
  seen_region->reset();
  pattern_region->reset();
}

// A peer stopped (SIGSTOP) for longer than a reply is waited for, then
// continued: on the emulated fabric the READ posted meanwhile is
// retransmitted, the responder answers the original and then the repeat
// (same PSN: ACKed again, the READ re-read), and nothing is lost or failed.
TEST_P(MultiprocessTest, StoppedThenContinuedPeerLosesNothing) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(2);
  pid_t rank1 = Spawn(rank0.PeerArgs("serve", 1, 2));
  ASSERT_TRUE(control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                        "comm", milliseconds(20000)).ok());
  auto key = control::FetchRemoteKey(rank0.control.get(), "buffer", 1, milliseconds(10000));
  ASSERT_TRUE(key.ok()) << key.status();
  Connection* to1 = *rank0.transport->GetConnection(1);
  std::vector<uint8_t> seen(1 << 20);
  auto region = rank0.transport->RegisterMemory(seen.data(), seen.size(), kAccessAll);
  ASSERT_EQ(::kill(rank1, SIGSTOP), 0);
  std::thread resume([rank1] {
    std::this_thread::sleep_for(milliseconds(2500));  // > the 2 s reply wait
    ::kill(rank1, SIGCONT);
  });
  Status read = ReadSync(to1, **region, 0, *key, 0, seen.size(),
                         DeadlineAfter(milliseconds(20000)));
  resume.join();
  ASSERT_TRUE(read.ok()) << read;
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], static_cast<uint8_t>(1 + i)) << i;
  ASSERT_TRUE(MessageRouter::Send(to1, 1, "ping").ok());
  std::unique_lock<std::mutex> lock(rank0.mutex);
  EXPECT_TRUE(rank0.changed.wait_for(lock, milliseconds(10000),
                                     [&] { return rank0.echoes == 1; }));
  EXPECT_TRUE(rank0.peer_errors.empty());
  lock.unlock();
  ASSERT_TRUE(rank0.control->Put("release", "1").ok());
  EXPECT_EQ(WaitExit(rank1), 0);
  region->reset();
}

TEST_P(MultiprocessTest, KillNineOfAPeerFailsSurvivorsWithinBoundNamingIt) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(3);
  pid_t rank1 = Spawn(rank0.PeerArgs("serve", 1, 3));
  pid_t rank2 = Spawn(rank0.PeerArgs("serve", 2, 3));
  ASSERT_TRUE(control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                        "comm", milliseconds(20000)).ok());
  auto key = control::FetchRemoteKey(rank0.control.get(), "buffer", 2, milliseconds(10000));
  ASSERT_TRUE(key.ok()) << key.status();
  std::vector<uint8_t> local(1 << 20);
  auto region = rank0.transport->RegisterMemory(local.data(), local.size(), kAccessAll);
  Connection* to2 = *rank0.transport->GetConnection(2);
  ASSERT_TRUE(ReadSync(to2, **region, 0, *key, 0, local.size(),
                       DeadlineAfter(milliseconds(10000))).ok());
  EXPECT_EQ(local[5], static_cast<uint8_t>(2 + 5));

  // Waiters: a stream of READs from rank 2 and a barrier rank 2 never reaches.
  Status read_failure, barrier_failure;
  std::thread reader([&] {
    while (read_failure.ok()) {
      read_failure = ReadSync(to2, **region, 0, *key, 0, local.size(),
                              DeadlineAfter(milliseconds(30000)));
    }
  });
  std::thread barrier([&] {
    barrier_failure = rank0.control->Barrier("after-kill", milliseconds(30000));
  });
  std::this_thread::sleep_for(milliseconds(200));
  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(rank2, SIGKILL), 0);
  reader.join();
  barrier.join();
  EXPECT_LT(Clock::now() - killed_at, milliseconds(10000));
  EXPECT_NE(read_failure.message().find("rank 2"), std::string::npos) << read_failure;
  EXPECT_NE(barrier_failure.message().find("rank 2"), std::string::npos) << barrier_failure;
  {
    std::lock_guard<std::mutex> lock(rank0.mutex);
    ASSERT_FALSE(rank0.peer_errors.empty());
    EXPECT_EQ(rank0.peer_errors[0].first, 2);
  }
  EXPECT_FALSE(to2->status().ok());
  // Rank 1 is unaffected: a message round trip still works.
  Connection* to1 = *rank0.transport->GetConnection(1);
  ASSERT_TRUE(MessageRouter::Send(to1, 1, "ping").ok());
  std::unique_lock<std::mutex> lock(rank0.mutex);
  EXPECT_TRUE(rank0.changed.wait_for(lock, milliseconds(10000),
                                     [&] { return rank0.echoes == 1; }));
  lock.unlock();
  EXPECT_EQ(WaitExit(rank2), 128 + SIGKILL);
  ::kill(rank1, SIGKILL);
  WaitExit(rank1);
  region->reset();
  if (GetParam() == "shm") {
    EXPECT_GT(SharedObjectsLeft(), 0);  // the rings to rank 1, the region table
  }
  if (GetParam() == "ibverbs_emu") {
    EXPECT_GT(FabricSocketsLeft(), 0);  // our own port, until the transport goes
  }
  rank0.transport.reset();
  EXPECT_EQ(SharedObjectsLeft(), 0);  // nothing left behind by us or the killed ranks
  EXPECT_EQ(FabricSocketsLeft(), 0);  // the emulated ports of every rank are gone
}

TEST_P(MultiprocessTest, ForeignProcessWithoutTheJobTokenIsRefused) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(2);
  std::vector<std::string> args = rank0.PeerArgs("intruder", 1, 2);
  args.back() = "--token=not-the-job-token";
  EXPECT_EQ(WaitExit(Spawn(args)), 0);  // exits 0 only if refused
  // The genuine rank 1 is still admitted.
  pid_t rank1 = Spawn(rank0.PeerArgs("allreduce", 1, 2));
  ASSERT_TRUE(control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                        "comm", milliseconds(20000)).ok());
  auto pool = RegisteredPool::Create(rank0.transport.get(), RegisteredPoolOptions(), nullptr);
  auto ring = RingCommunicator::Create(rank0.transport.get(), &rank0.router, pool->get(),
                                       CollectiveOptions());
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::vector<int64_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i;
  auto region = rank0.transport->RegisterMemory(data.data(), 8000, kAccessAll);
  ASSERT_TRUE((*ring)->AllReduce(**region, 0, 1000, DT_INT64,
                                 DeadlineAfter(milliseconds(20000))).ok());
  EXPECT_EQ(data[999], 3 * 999);
  ASSERT_TRUE(rank0.control->Barrier("allreduce-done", milliseconds(20000)).ok());
  EXPECT_EQ(WaitExit(rank1), 0);
  ring->reset();
  region->reset();
}

TEST_P(MultiprocessTest, PeerThatNeverArrivesTimesOutNamingIt) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(2);
  auto start = Clock::now();
  Status status = control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                            "comm", milliseconds(1000));
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  Status joined = rank0.server->WaitForAllJoined(milliseconds(100));
  EXPECT_NE(joined.message().find("rank 1 never joined"), std::string::npos) << joined;
}

TEST_P(MultiprocessTest, RingAllReduceAcrossThreeProcesses) {
  Rank0 rank0;
  rank0.provider = GetParam();
  rank0.Start(3);
  std::vector<pid_t> peers;
  for (int rank = 1; rank < 3; ++rank) {
    auto args = rank0.PeerArgs("allreduce", rank, 3);
    args.push_back("--count=300001");
    peers.push_back(Spawn(args));
  }
  ASSERT_TRUE(control::ConnectTransport(rank0.transport.get(), rank0.control.get(),
                                        "comm", milliseconds(20000)).ok());
  auto pool = RegisteredPool::Create(rank0.transport.get(), RegisteredPoolOptions(), nullptr);
  auto ring = RingCommunicator::Create(rank0.transport.get(), &rank0.router, pool->get(),
                                       CollectiveOptions());
  ASSERT_TRUE(ring.ok());
  std::vector<int64_t> data(300001);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i;
  auto region = rank0.transport->RegisterMemory(data.data(), data.size() * 8, kAccessAll);
  ASSERT_TRUE((*ring)->AllReduce(**region, 0, data.size(), DT_INT64,
                                 DeadlineAfter(milliseconds(20000))).ok());
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], 6 * static_cast<int64_t>(i));
  ASSERT_TRUE(rank0.control->Barrier("allreduce-done", milliseconds(20000)).ok());
  for (pid_t peer : peers) EXPECT_EQ(WaitExit(peer), 0);
  ring->reset();
  region->reset();
}

INSTANTIATE_TEST_SUITE_P(Providers, MultiprocessTest,
                         ::testing::Values("tcp", "shm", "ibverbs_emu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace comm
}  // namespace oflite
