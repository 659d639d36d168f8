#include "oneflow_lite/comm/launch/cpu_binding.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>


namespace oflite {
namespace comm {
namespace {

std::vector<int> ThisThreadsCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// A sysfs-like tree: cpuN/topology/{physical_package_id,core_id}.
class FakeTopology {
 public:
  FakeTopology() {
    char dir[] = "/tmp/cpu_binding_test_XXXXXX";
    root_ = ::mkdtemp(dir);
  }
  ~FakeTopology() { std::filesystem::remove_all(root_); }
  void Add(int cpu, int package, int core) {
    const std::string dir = root_ + "/cpu" + std::to_string(cpu);
    ::mkdir(dir.c_str(), 0755);
    ::mkdir((dir + "/topology").c_str(), 0755);
    std::ofstream(dir + "/topology/physical_package_id") << package << "\n";
    std::ofstream(dir + "/topology/core_id") << core << "\n";
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(CpuBindingTest, ParsesPoliciesAndNamesTheFlagOnBadInput) {
  EXPECT_EQ(*ParseBindPolicy("auto", "--bind"), BindPolicy::kAuto);
  EXPECT_EQ(*ParseBindPolicy("cores", "--bind"), BindPolicy::kCores);
  EXPECT_EQ(*ParseBindPolicy("none", "--bind"), BindPolicy::kNone);
  auto bad = ParseBindPolicy("core", "--bind");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--bind"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("'core'"), std::string::npos) << bad.status();
  EXPECT_STREQ(BindPolicyName(BindPolicy::kCores), "cores");
}

TEST(CpuBindingTest, GroupsSmtSiblingsIntoOneCore) {
  FakeTopology topology;
  // Two packages of two cores, two threads each: siblings are N and N+4.
  for (int cpu = 0; cpu < 8; ++cpu) topology.Add(cpu, (cpu % 4) / 2, cpu % 2);
  const auto cores = GroupIntoCores({0, 1, 2, 3, 4, 5, 6, 7}, topology.root());
  const std::vector<std::vector<int>> expected = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(cores, expected);
  // Only some CPUs allowed (a taskset launcher): only those are given out.
  const std::vector<std::vector<int>> part = {{1}, {2, 6}};
  EXPECT_EQ(GroupIntoCores({6, 1, 2}, topology.root()), part);
}

TEST(CpuBindingTest, CpusWithoutTopologyAreCoresOfTheirOwn) {
  FakeTopology topology;  // empty
  const std::vector<std::vector<int>> expected = {{0}, {1}, {3}};
  EXPECT_EQ(GroupIntoCores({3, 0, 1}, topology.root()), expected);
}

TEST(CpuBindingTest, SharesOutEveryCoreWhenTheRanksFit) {
  const std::vector<std::vector<int>> cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (BindPolicy policy : {BindPolicy::kAuto, BindPolicy::kCores}) {
    EXPECT_EQ(CpusForLocalRank(cores, 0, 2, policy), (std::vector<int>{0, 4, 1, 5}));
    EXPECT_EQ(CpusForLocalRank(cores, 1, 2, policy), (std::vector<int>{2, 6, 3, 7}));
    // 3 ranks on 4 cores: shares of 1, 1 and 2 cores, disjoint, all given.
    EXPECT_EQ(CpusForLocalRank(cores, 0, 3, policy), (std::vector<int>{0, 4}));
    EXPECT_EQ(CpusForLocalRank(cores, 1, 3, policy), (std::vector<int>{1, 5}));
    EXPECT_EQ(CpusForLocalRank(cores, 2, 3, policy), (std::vector<int>{2, 6, 3, 7}));
    EXPECT_EQ(CpusForLocalRank(cores, 3, 4, policy), (std::vector<int>{3, 7}));
  }
  EXPECT_TRUE(CpusForLocalRank(cores, 0, 2, BindPolicy::kNone).empty());
}

TEST(CpuBindingTest, UnevenOversubscriptionStaysUnboundUnlessCoresIsAsked) {
  const std::vector<std::vector<int>> cores = {{0}, {1}};
  // 3 ranks on 2 cores: one core would carry two ranks, the other one.
  EXPECT_TRUE(CpusForLocalRank(cores, 0, 3, BindPolicy::kAuto).empty());
  EXPECT_TRUE(CpusForLocalRank(cores, 2, 3, BindPolicy::kAuto).empty());
  EXPECT_EQ(CpusForLocalRank(cores, 0, 3, BindPolicy::kCores), (std::vector<int>{0}));
  EXPECT_EQ(CpusForLocalRank(cores, 1, 3, BindPolicy::kCores), (std::vector<int>{1}));
  EXPECT_EQ(CpusForLocalRank(cores, 2, 3, BindPolicy::kCores), (std::vector<int>{0}));
  // Out-of-range ranks get nothing rather than someone else's share.
  EXPECT_TRUE(CpusForLocalRank(cores, 3, 3, BindPolicy::kCores).empty());
  EXPECT_TRUE(CpusForLocalRank(cores, -1, 3, BindPolicy::kCores).empty());
}

TEST(CpuBindingTest, EvenOversubscriptionBindsRanksRoundRobin) {
  const std::vector<std::vector<int>> cores = {{0, 2}, {1, 3}};
  for (BindPolicy policy : {BindPolicy::kAuto, BindPolicy::kCores}) {
    // 4 ranks on 2 cores: two per core, each rank on one core.
    EXPECT_EQ(CpusForLocalRank(cores, 0, 4, policy), (std::vector<int>{0, 2}));
    EXPECT_EQ(CpusForLocalRank(cores, 1, 4, policy), (std::vector<int>{1, 3}));
    EXPECT_EQ(CpusForLocalRank(cores, 2, 4, policy), (std::vector<int>{0, 2}));
    EXPECT_EQ(CpusForLocalRank(cores, 3, 4, policy), (std::vector<int>{1, 3}));
  }
  EXPECT_TRUE(CpusForLocalRank(cores, 1, 4, BindPolicy::kNone).empty());
}

TEST(CpuBindingTest, DescribesCpuListsAsRanges) {
  EXPECT_EQ(DescribeCpus({}), "");
  EXPECT_EQ(DescribeCpus({3}), "3");
  EXPECT_EQ(DescribeCpus({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(DescribeCpus({5, 4, 4, 1}), "1,4-5");
}

TEST(CpuBindingTest, DescribesWhatABindingDoes) {
  EXPECT_EQ(DescribeBinding({{0}, {1, 3}}, BindPolicy::kAuto, 2),
            "rank 0 on CPUs 0, rank 1 on CPUs 1,3");
  EXPECT_EQ(DescribeBinding({{}, {}}, BindPolicy::kNone, 2), "ranks unbound (--bind none)");
  EXPECT_EQ(DescribeBinding({{}, {}, {}}, BindPolicy::kAuto, 2),
            "ranks unbound (3 ranks, 2 cores)");
}

TEST(CpuBindingTest, AllowedCoresCoverThisProcessesAffinity) {
  std::vector<int> flattened;
  for (const auto& core : AllowedCores()) {
    ASSERT_FALSE(core.empty());
    flattened.insert(flattened.end(), core.begin(), core.end());
  }
  std::sort(flattened.begin(), flattened.end());
  EXPECT_EQ(flattened, ThisThreadsCpus());
  EXPECT_EQ(AllowedCpus(), ThisThreadsCpus());
}

TEST(CpuBindingTest, BindsAThreadAndWhatItStartsInherits) {
  const std::vector<int> all = ThisThreadsCpus();
  const std::vector<int> last = {all.back()};
  std::vector<int> seen_by_child;
  std::thread([&] {
    ASSERT_TRUE(BindToCpus(0, last).ok());
    EXPECT_EQ(ThisThreadsCpus(), last);
    std::thread([&] { seen_by_child = ThisThreadsCpus(); }).join();
  }).join();
  EXPECT_EQ(seen_by_child, last);
  EXPECT_EQ(ThisThreadsCpus(), all);  // other threads keep theirs
  EXPECT_TRUE(BindToCpus(0, {}).ok());
  EXPECT_EQ(ThisThreadsCpus(), all);
}

TEST(CpuBindingTest, BadCpusAreErrorsThatNameThem) {
  auto status = BindToCpus(0, {CPU_SETSIZE + 3});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(std::to_string(CPU_SETSIZE + 3)), std::string::npos);
}

}  // namespace
}  // namespace comm
}  // namespace oflite
