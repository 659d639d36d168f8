// The runtime hands the plan's (or the option's) cpu_threads to the BLAS
// library before anything runs (kernels/cpu/cpu_threads.h).
#include <memory>

#include <gtest/gtest.h>

#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"

namespace oflite {
namespace {

Plan ChainPlanWithCluster(int cpu_devices, int cpu_threads) {
  Plan plan = testing::ChainPlan(1, 2, 3);
  plan.mutable_cluster()->Clear();
  MachineProto* machine = plan.mutable_cluster()->add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(cpu_devices);
  machine->set_cpu_threads(cpu_threads);
  return plan;
}

Status CreateAndRun(const Plan& plan, RuntimeOptions options) {
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  if (!runtime.ok()) return runtime.status();
  return (*runtime)->Run();
}

TEST(CpuThreadsRuntimeTest, ThePlansCountReachesBlas) {
  for (int threads : {1, 3, 2}) {
    ASSERT_TRUE(CreateAndRun(ChainPlanWithCluster(1, threads), {}).ok());
    EXPECT_EQ(CpuComputeThreads(), threads);
  }
}

TEST(CpuThreadsRuntimeTest, TheOptionOverridesThePlan) {
  RuntimeOptions options;
  options.cpu_threads = 1;
  ASSERT_TRUE(CreateAndRun(ChainPlanWithCluster(1, 3), options).ok());
  EXPECT_EQ(CpuComputeThreads(), 1);
}

TEST(CpuThreadsRuntimeTest, ZeroDividesTheCoresAmongTheDevices) {
  const int cores = AvailableCpuCores();
  ASSERT_TRUE(CreateAndRun(ChainPlanWithCluster(1, 0), {}).ok());
  EXPECT_EQ(CpuComputeThreads(), cores);
  ASSERT_TRUE(CreateAndRun(ChainPlanWithCluster(cores + 1, 0), {}).ok());
  EXPECT_EQ(CpuComputeThreads(), 1);
}

TEST(CpuThreadsRuntimeTest, OutOfRangeIsRefusedNamingTheSource) {
  Status plan_status = CreateAndRun(ChainPlanWithCluster(1, -2), {});
  EXPECT_EQ(plan_status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan_status.message().find("cpu_threads"), std::string::npos) << plan_status;
  RuntimeOptions options;
  options.cpu_threads = kMaxCpuThreads + 1;
  Status option_status = CreateAndRun(ChainPlanWithCluster(1, 1), options);
  EXPECT_EQ(option_status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(option_status.message().find("RuntimeOptions.cpu_threads"), std::string::npos)
      << option_status;
}

}  // namespace
}  // namespace oflite
