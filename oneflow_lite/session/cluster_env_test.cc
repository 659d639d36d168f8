#include "oneflow_lite/session/cluster_env.h"

#include <cstdio>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "oneflow_lite/session/node_options.h"

namespace oflite {
namespace session {
namespace {

Environment MapEnvironment(std::map<std::string, std::string> values) {
  return [values](const std::string& name) {
    auto it = values.find(name);
    return it == values.end() ? std::string() : it->second;
  };
}

std::vector<std::string> Expand(const std::string& text) {
  StatusOr<std::vector<std::string>> hosts = ExpandHostlist(text, "SLURM_STEP_NODELIST");
  EXPECT_TRUE(hosts.ok()) << hosts.status();
  return hosts.ok() ? *hosts : std::vector<std::string>();
}

TEST(HostlistTest, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(Expand("node01"), std::vector<std::string>({"node01"}));
  EXPECT_EQ(Expand("node[01-04,07]"),
            std::vector<std::string>({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(Expand("a[1-2],b3"), std::vector<std::string>({"a1", "a2", "b3"}));
  EXPECT_EQ(Expand("gpu-[008-010]"), std::vector<std::string>({"gpu-008", "gpu-009", "gpu-010"}));
  EXPECT_EQ(Expand("r[1-2]-n[1,3]"),
            std::vector<std::string>({"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(Expand("n[9-11].ib"), std::vector<std::string>({"n9.ib", "n10.ib", "n11.ib"}));
}

TEST(HostlistTest, BadListsAreNamedErrors) {
  for (const char* bad : {"", "node[01-04", "node01]", "node[]", "node[4-1]", "node[a-b]",
                          "a,,b", "node[1-2", "n[[1]]", "node[1-]", "a b", "n[1-2,]",
                          "n[0-99999999]"}) {
    StatusOr<std::vector<std::string>> hosts = ExpandHostlist(bad, "SLURM_STEP_NODELIST");
    ASSERT_FALSE(hosts.ok()) << bad;
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(hosts.status().message().find("SLURM_STEP_NODELIST"), std::string::npos)
        << hosts.status();
  }
}

TEST(HostfileTest, FirstHostSkipsCommentsAndSlots) {
  StatusOr<std::string> host =
      FirstHostOfHostfile("# cluster\n\n   # more\nnode07 slots=4 # four\nnode08 slots=4\n", "hf");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(*host, "node07");
  for (const char* bad : {"", "# only\n", "slots=4\n", "node1 slots=x\n", "node1 cpus=2\n"}) {
    StatusOr<std::string> refused = FirstHostOfHostfile(bad, "hostfile 'hf'");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("hostfile 'hf'"), std::string::npos);
  }
}

TEST(SlurmTest, PortIsDeterministicInRangeAndPerStep) {
  const int port = SlurmMasterPort("4242", "0");
  EXPECT_EQ(port, SlurmMasterPort("4242", "0"));
  EXPECT_NE(port, SlurmMasterPort("4242", "1"));
  for (int job = 0; job < 1000; ++job) {
    const int p = SlurmMasterPort(std::to_string(job), "0");
    EXPECT_GE(p, kSlurmPortBase);
    EXPECT_LT(p, kSlurmPortBase + kSlurmPortSpan);
  }
}

TEST(SlurmTest, TasksPerNode) {
  EXPECT_EQ(*SlurmTasksOnNode("2(x3),1", 0, "V"), 2);
  EXPECT_EQ(*SlurmTasksOnNode("2(x3),1", 2, "V"), 2);
  EXPECT_EQ(*SlurmTasksOnNode("2(x3),1", 3, "V"), 1);
  EXPECT_FALSE(SlurmTasksOnNode("2(x3),1", 4, "V").ok());
  EXPECT_FALSE(SlurmTasksOnNode("2(3)", 0, "V").ok());
  EXPECT_FALSE(SlurmTasksOnNode("x", 0, "V").ok());
}

std::map<std::string, std::string> SlurmStep() {
  return {{"SLURM_PROCID", "1"},           {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"},   {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "1"},           {"SLURM_STEP_TASKS_PER_NODE", "1(x4)"},
          {"SLURM_STEP_NODELIST", "node[01-04]"}, {"SLURM_JOB_NODELIST", "node[01-08]"},
          {"SLURM_JOB_ID", "4242"},        {"SLURM_STEP_ID", "0"},
          {"OFLITE_JOB_TOKEN", "t"}};
}

TEST(LauncherPlacementTest, SlurmStep) {
  StatusOr<LauncherPlacement> placement = ReadLauncherPlacement(MapEnvironment(SlurmStep()), "", "");
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->launcher, "Slurm");
  EXPECT_EQ(placement->rank.value, 1);
  EXPECT_EQ(placement->world.value, 4);
  EXPECT_EQ(placement->world.source, "SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(placement->local_rank.value, 0);
  EXPECT_EQ(placement->local_size.value, 1);
  EXPECT_EQ(placement->master_host, "node01");
  EXPECT_EQ(placement->master_host_source, "SLURM_STEP_NODELIST");
  EXPECT_EQ(placement->master_port, SlurmMasterPort("4242", "0"));
  EXPECT_FALSE(placement->cpus_bound);
}

TEST(LauncherPlacementTest, BadSlurmValuesNameTheVariable) {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"SLURM_PROCID", "one"}, {"SLURM_PROCID", "-1"}, {"SLURM_PROCID", "4"},
           {"SLURM_STEP_NUM_TASKS", "x"}, {"SLURM_LOCALID", "-2"},
           {"SLURM_STEP_NODELIST", "node[01-"}, {"SLURM_STEP_TASKS_PER_NODE", "1(y4)"},
           {"SLURM_JOB_ID", ""}}) {
    std::map<std::string, std::string> values = SlurmStep();
    values[name] = value;
    StatusOr<LauncherPlacement> placement = ReadLauncherPlacement(MapEnvironment(values), "", "");
    ASSERT_FALSE(placement.ok()) << name << "=" << value;
    EXPECT_NE(placement.status().message().find(name), std::string::npos) << placement.status();
  }
}

TEST(LauncherPlacementTest, OpenMpiWithHostfile) {
  StatusOr<LauncherPlacement> placement = ReadLauncherPlacement(
      MapEnvironment({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}),
      "hf", "hostA slots=1\nhostB slots=1\n");
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->launcher, "OpenMPI");
  EXPECT_EQ(placement->rank.value, 2);
  EXPECT_EQ(placement->world.value, 3);
  EXPECT_EQ(placement->master_host, "hostA");
  EXPECT_EQ(placement->master_port, kDefaultMasterPort);
  EXPECT_TRUE(ReadLauncherPlacement(MapEnvironment({}), "", "")->launcher.empty());
}

// ReadNodeOptions over an injected environment.
class NodePlacementTest : public ::testing::Test {
 protected:
  StatusOr<NodeOptions> Read(std::map<std::string, std::string> values,
                             std::vector<std::string> args, int machines = 4) {
    Plan plan;
    for (int m = 0; m < machines; ++m) plan.add_machine()->set_machine_id(m);
    std::vector<std::string> argv = {"oflite run"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    cli::FlagSet flags("oflite run", "", NodeFlagSpecs());
    Status parsed = flags.Parse(static_cast<int>(raw.size()), raw.data());
    if (!parsed.ok()) return parsed;
    return ReadNodeOptions(flags, plan, MapEnvironment(values), "oflite run");
  }
};

TEST_F(NodePlacementTest, SlurmNeedsNoFlags) {
  StatusOr<NodeOptions> node = Read(SlurmStep(), {});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->rank, 1);
  const std::string master = "node01:" + std::to_string(SlurmMasterPort("4242", "0"));
  EXPECT_EQ(node->master, master);
  EXPECT_EQ(node->placement, "rank 1 of 4 from Slurm (SLURM_PROCID), master " + master +
                                 " from SLURM_STEP_NODELIST, port from SLURM_JOB_ID/SLURM_STEP_ID");
  EXPECT_EQ(node->local_rank, 0);
}

TEST_F(NodePlacementTest, FlagsThenOfliteThenLauncher) {
  std::map<std::string, std::string> values = SlurmStep();
  values["OFLITE_MASTER"] = "head:7000";
  StatusOr<NodeOptions> node = Read(values, {});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->master, "head:7000");
  EXPECT_EQ(node->placement, "rank 1 of 4 from Slurm (SLURM_PROCID), master head:7000 from "
                             "OFLITE_MASTER");
  node = Read(values, {"--master", "flag:7001", "--rank", "3"});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->master, "flag:7001");
  EXPECT_EQ(node->rank, 3);
  EXPECT_EQ(node->placement, "rank 3 of 4 from --rank, master flag:7001 from --master");
}

TEST_F(NodePlacementTest, WorldMismatchNamesBothNumbersAndTheVariable) {
  StatusOr<NodeOptions> node = Read(SlurmStep(), {}, 2);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), StatusCode::kInvalidArgument);
  const std::string message = node.status().message();
  EXPECT_NE(message.find("SLURM_STEP_NUM_TASKS=4"), std::string::npos) << message;
  EXPECT_NE(message.find("2 machine(s)"), std::string::npos) << message;
}

TEST_F(NodePlacementTest, MissingTokenUnderSlurmSaysHowToSetIt) {
  std::map<std::string, std::string> values = SlurmStep();
  values.erase("OFLITE_JOB_TOKEN");
  StatusOr<NodeOptions> node = Read(values, {});
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("export OFLITE_JOB_TOKEN"), std::string::npos)
      << node.status();
  EXPECT_NE(node.status().message().find("srun"), std::string::npos) << node.status();
}

TEST_F(NodePlacementTest, OpenMpiMasterFromHostfileFlag) {
  const std::string path = ::testing::TempDir() + "/hostfile";
  std::ofstream(path) << "# hosts\nhostA slots=2\nhostB slots=2\n";
  std::map<std::string, std::string> values = {
      {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OFLITE_JOB_TOKEN", "t"}};
  StatusOr<NodeOptions> node = Read(values, {"--hostfile", path});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->master, "hostA:" + std::to_string(kDefaultMasterPort));
  EXPECT_EQ(node->placement.rfind("rank 0 of 4 from OpenMPI (OMPI_COMM_WORLD_RANK)", 0), 0u)
      << node->placement;
  // Without a hostfile or --master the master is missing: named, exit 2.
  node = Read(values, {});
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("--hostfile"), std::string::npos) << node.status();
  // A hostfile that does not exist is named.
  values["OFLITE_HOSTFILE"] = path + ".missing";
  node = Read(values, {});
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("OFLITE_HOSTFILE"), std::string::npos) << node.status();
}

}  // namespace
}  // namespace session
}  // namespace oflite
