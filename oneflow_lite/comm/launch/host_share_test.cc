#include "oneflow_lite/comm/launch/host_share.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/comm/launch/cpu_binding.h"

namespace oflite {
namespace comm {
namespace {

// `count` CPUs 0..count-1, each its own core.
HostShareInput Machine(int count, int rank, std::vector<std::string> keys) {
  HostShareInput input;
  input.rank = rank;
  input.keys = std::move(keys);
  for (int cpu = 0; cpu < count; ++cpu) {
    input.allowed_cpus.push_back(cpu);
    input.cores.push_back({cpu});
  }
  input.online_cpus = count;
  return input;
}

TEST(HostShareTest, ParsesModesAndNamesTheFlag) {
  for (const char* name : {"auto", "threads", "bind", "off"}) {
    StatusOr<ShareHostMode> mode = ParseShareHostMode(name, "--share-host");
    ASSERT_TRUE(mode.ok()) << name;
    EXPECT_STREQ(ShareHostModeName(*mode), name);
  }
  StatusOr<ShareHostMode> bad = ParseShareHostMode("cores", "--share-host");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--share-host: 'cores'"), std::string::npos)
      << bad.status().message();
}

TEST(HostShareTest, KeyNamesHostAndCpus) {
  EXPECT_EQ(CpuShareKey("h/boot/ns", {0, 1, 2, 3}), "h/boot/ns|0-3");
  EXPECT_NE(CpuShareKey("h", {0}), CpuShareKey("h", {1}));
  EXPECT_NE(CpuShareKey("a", {0}), CpuShareKey("b", {0}));
}

TEST(HostShareTest, AutoBindsTwoRanksToOneCoreEach) {
  for (int rank = 0; rank < 2; ++rank) {
    HostShare share = DecideHostShare(Machine(2, rank, {"h|0-1", "h|0-1"}));
    EXPECT_EQ(share.local_rank, rank);
    EXPECT_EQ(share.local_size, 2);
    EXPECT_EQ(share.bind_cpus, std::vector<int>{rank});
    EXPECT_EQ(share.cpu_threads, 0);  // the runtime sizes itself to the bound CPU
    EXPECT_NE(share.description.find("2 ranks share CPUs 0-1"), std::string::npos);
    EXPECT_NE(share.description.find("bound to CPUs " + std::to_string(rank)), std::string::npos)
        << share.description;
  }
}

TEST(HostShareTest, LocalRanksFollowGlobalOrderPerHost) {
  // Ranks 0 and 2 on host a (8 CPUs), 1 and 3 on host b: rank 2 is a's
  // second local rank and gets the upper half.
  const std::vector<std::string> keys = {"a|0-7", "b|0-7", "a|0-7", "b|0-7"};
  HostShare share = DecideHostShare(Machine(8, 2, keys));
  EXPECT_EQ(share.local_rank, 1);
  EXPECT_EQ(share.local_size, 2);
  EXPECT_EQ(share.bind_cpus, (std::vector<int>{4, 5, 6, 7}));
  share = DecideHostShare(Machine(8, 1, keys));
  EXPECT_EQ(share.local_rank, 0);
  EXPECT_EQ(share.bind_cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST(HostShareTest, ThreadsModeDividesCpusAmongRanksAndDevices) {
  HostShareInput input = Machine(8, 0, {"h|0-7", "h|0-7", "h|0-7"});
  input.mode = ShareHostMode::kThreads;
  HostShare share = DecideHostShare(input);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 2);  // floor(8 / 3)
  input.cpu_devices = 2;
  EXPECT_EQ(DecideHostShare(input).cpu_threads, 1);
  // More ranks than CPUs: at least one thread each.
  input = Machine(2, 4, {"h|0-1", "h|0-1", "h|0-1", "h|0-1", "h|0-1"});
  input.mode = ShareHostMode::kThreads;
  EXPECT_EQ(DecideHostShare(input).cpu_threads, 1);
}

TEST(HostShareTest, ARequestedThreadCountIsKept) {
  HostShareInput input = Machine(4, 0, {"h|0-3", "h|0-3"});
  input.mode = ShareHostMode::kThreads;
  input.requested_threads = 3;
  input.requested_source = "--cpu-threads";
  HostShare share = DecideHostShare(input);
  EXPECT_EQ(share.cpu_threads, 0);
  EXPECT_NE(share.description.find("--cpu-threads 3 kept"), std::string::npos) << share.description;
}

TEST(HostShareTest, AutoLimitsThreadsWhenBindingIsNotPossible) {
  // A mask narrower than the machine (taskset by the user): kept.
  HostShareInput input = Machine(2, 1, {"h|0-1", "h|0-1"});
  input.online_cpus = 16;
  HostShare share = DecideHostShare(input);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 1);
  EXPECT_NE(share.description.find("narrower than the machine's 16 CPUs"), std::string::npos)
      << share.description;
  // 3 ranks on 2 cores: one core would carry two of them.
  input = Machine(2, 2, {"h|0-1", "h|0-1", "h|0-1"});
  input.mode = ShareHostMode::kBind;
  share = DecideHostShare(input);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 1);
  EXPECT_NE(share.description.find("do not divide evenly over 2 core(s)"), std::string::npos)
      << share.description;
  // Two SMT siblings of one core: no smaller share to bind to.
  input = Machine(2, 0, {"h|0-1", "h|0-1"});
  input.cores = {{0, 1}};
  share = DecideHostShare(input);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 1);
}

TEST(HostShareTest, BindModeSplitsANarrowerSharedMask) {
  // Both ranks started under `taskset -c 2,3` on a 16-CPU machine.
  HostShareInput input;
  input.mode = ShareHostMode::kBind;
  input.rank = 1;
  input.keys = {"h|2-3", "h|2-3"};
  input.allowed_cpus = {2, 3};
  input.cores = {{2}, {3}};
  input.online_cpus = 16;
  HostShare share = DecideHostShare(input);
  EXPECT_EQ(share.bind_cpus, std::vector<int>{3});
  input.mode = ShareHostMode::kAuto;
  EXPECT_TRUE(DecideHostShare(input).bind_cpus.empty());
}

TEST(HostShareTest, ParsesCpuLists) {
  StatusOr<std::vector<int>> cpus = ParseCpuList("0-2,8,10-11", "f");
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList("5", "f"), std::vector<int>{5});
  for (const char* bad : {"", "3-", "3-1", "a", "1-2x", "-1", "1,,2"}) {
    StatusOr<std::vector<int>> parsed = ParseCpuList(bad, "cpuset.cpus");
    EXPECT_FALSE(parsed.ok()) << "'" << bad << "'";
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("cpuset.cpus"), std::string::npos);
    }
  }
}

// A root with /proc/self/cgroup and the cpuset files of the given versions.
class FakeRoot {
 public:
  FakeRoot() {
    char dir[] = "/tmp/host_share_test_XXXXXX";
    root_ = ::mkdtemp(dir);
  }
  ~FakeRoot() { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(HostShareTest, MachineCpusAreTheCgroupsCpuset) {
  {
    FakeRoot v2;
    v2.Write("/proc/self/cgroup", "0::/job.slice/rank\n");
    v2.Write("/sys/fs/cgroup/job.slice/rank/cpuset.cpus.effective", "4-7\n");
    EXPECT_EQ(MachineCpuCount(v2.root()), 4);
  }
  {
    FakeRoot v1;
    v1.Write("/proc/self/cgroup", "4:memory:/x\n3:cpuset:/docker/abc\n1:cpu,cpuacct:/\n");
    v1.Write("/sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus", "0-2,9\n");
    EXPECT_EQ(MachineCpuCount(v1.root()), 4);
  }
  {
    FakeRoot none;  // nothing readable: the online CPUs
    EXPECT_EQ(MachineCpuCount(none.root()), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  }
}

TEST(HostShareTest, AloneOrOffChangesNothing) {
  // Bound by a launcher: each rank's mask differs, so each is alone.
  HostShare share = DecideHostShare(Machine(1, 0, {"h|0", "h|1"}));
  EXPECT_EQ(share.local_size, 1);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 0);
  EXPECT_NE(share.description.find("nothing shared"), std::string::npos);
  HostShareInput input = Machine(2, 0, {"h|0-1", "h|0-1"});
  input.mode = ShareHostMode::kOff;
  share = DecideHostShare(input);
  EXPECT_EQ(share.local_size, 2);
  EXPECT_TRUE(share.bind_cpus.empty());
  EXPECT_EQ(share.cpu_threads, 0);
  EXPECT_NE(share.description.find("(--share-host off)"), std::string::npos);
}

std::vector<int> ThreadCpus(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(tid, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

TEST(HostShareTest, BindAllThreadsCoversThreadsThatAlreadyRun) {
  const std::vector<int> before = AllowedCpus();
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::thread other([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    while (!stop) std::this_thread::yield();
  });
  while (tid == 0) std::this_thread::yield();
  const std::vector<int> one = {before.back()};
  ASSERT_TRUE(BindAllThreads(one).ok());
  EXPECT_EQ(ThreadCpus(tid), one);  // started before the call
  EXPECT_EQ(ThreadCpus(0), one);
  stop = true;
  other.join();
  ASSERT_TRUE(BindAllThreads(before).ok());
  EXPECT_EQ(ThreadCpus(0), before);
}

// Three ranks through a real rendezvous: each gets every rank's key in
// rank order.
TEST(HostShareTest, ExchangesKeysThroughTheControlPlane) {
  control::RendezvousOptions server_options;
  server_options.world_size = 3;
  server_options.job_token = "t";
  StatusOr<std::unique_ptr<control::RendezvousServer>> server =
      control::RendezvousServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::vector<std::string>> got(3);
  std::vector<Status> status(3);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      control::ControlClientOptions options;
      options.master = "127.0.0.1:" + std::to_string((*server)->port());
      options.rank = rank;
      options.world_size = 3;
      options.job_token = "t";
      StatusOr<std::unique_ptr<control::ControlClient>> client =
          control::ControlClient::Connect(options);
      if (!client.ok()) {
        status[rank] = client.status();
        return;
      }
      StatusOr<std::vector<std::string>> keys = ExchangeCpuShareKeys(
          client->get(), rank, 3, "key" + std::to_string(rank), std::chrono::seconds(20));
      status[rank] = keys.status();
      if (keys.ok()) got[rank] = *keys;
      // Stay until every rank has read.
      Status barrier = (*client)->Barrier("done", std::chrono::seconds(20));
      if (status[rank].ok()) status[rank] = barrier;
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(status[rank].ok()) << status[rank].ToString();
  const std::vector<std::string> all = {"key0", "key1", "key2"};
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(got[rank], all) << "rank " << rank;
}

}  // namespace
}  // namespace comm
}  // namespace oflite
