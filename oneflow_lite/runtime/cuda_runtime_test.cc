// Compiled plans on real GPUs through the actor runtime (CUDA zones, a
// CudaDeviceContext per stream thread, H2D/D2H copy actors, completion
// polling), against the same job's CPU plan. Built only with --config=cuda;
// tagged "gpu"; every test skips itself without a CUDA device.
#include <cmath>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"

namespace oflite {
namespace {

using Recorder = testing::MetricsRecorder;

constexpr int64_t kIterations = 10;

StatusOr<std::map<int64_t, double>> Losses(const std::string& placement, int gpus,
                                           RuntimeOptions options = {},
                                           compiler::CompileOptions compile = {},
                                           RunStats* stats = nullptr) {
  compiler::MlpSpec spec;
  spec.iterations = kIterations;
  spec.placement = placement;
  ASSIGN_OR_RETURN(Job job, compiler::BuildMlpJob(spec));
  ASSIGN_OR_RETURN(Plan plan,
                   compiler::Compile(job, compiler::MakeCluster(1, 2, gpus), compile));
  Recorder recorder;
  options.metrics = &recorder;
  options.watchdog_timeout = std::chrono::milliseconds(30000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  if (stats != nullptr) *stats = runtime->stats();
  return recorder.values["loss"];
}

class CudaRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_F(CudaRuntimeTest, MlpPlanOnOneGpuMatchesTheCpuPlan) {
  StatusOr<std::map<int64_t, double>> cpu = Losses("0:cpu:0", 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (bool check_nan : {false, true}) {
    RuntimeOptions options;
    options.check_nan = check_nan;
    StatusOr<std::map<int64_t, double>> gpu = Losses("0:cuda:0", 1, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_EQ(gpu->size(), static_cast<size_t>(kIterations));
    for (int64_t i = 0; i < kIterations; ++i) {
      EXPECT_NEAR(gpu->at(i), cpu->at(i), 1e-4 * std::fabs(cpu->at(i))) << "iteration " << i;
    }
  }
}

// The default plan merges the GPU's compute tasks into one task whose act
// is captured as a CUDA graph and replayed (docs/gpu.md "Graph replay"):
// the same losses as the CPU plan, with replay on, off, and one task per op.
TEST_F(CudaRuntimeTest, GraphReplayOfTheMergedTaskMatchesTheCpuPlan) {
  StatusOr<std::map<int64_t, double>> cpu = Losses("0:cpu:0", 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (int variant = 0; variant < 3; ++variant) {
    RuntimeOptions options;
    compiler::CompileOptions compile;
    options.graph_replay = variant != 1;
    compile.merge_gpu_compute = variant != 2;
    const std::string what = variant == 0   ? "replayed"
                             : variant == 1 ? "merged, replay off"
                                            : "one task per op";
    RunStats stats;
    StatusOr<std::map<int64_t, double>> gpu = Losses("0:cuda:0", 1, options, compile, &stats);
    ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
    ASSERT_EQ(gpu->size(), static_cast<size_t>(kIterations)) << what;
    for (int64_t i = 0; i < kIterations; ++i) {
      EXPECT_NEAR(gpu->at(i), cpu->at(i), 1e-4 * std::fabs(cpu->at(i)))
          << what << " iteration " << i;
    }
    if (variant == 0) {
      EXPECT_EQ(stats.graph_tasks, 1) << stats.graph_note;
      EXPECT_GE(stats.graphs_captured, 1);
      EXPECT_GE(stats.acts_replayed, kIterations - 2 * stats.graphs_captured - 1)
          << stats.graph_note;
    } else {
      EXPECT_EQ(stats.acts_replayed, 0) << what;
    }
  }
}

TEST_F(CudaRuntimeTest, MlpPlanDataParallelOnTwoGpusMatchesTheCpuPlan) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  StatusOr<std::map<int64_t, double>> cpu = Losses("0:cpu:0-1", 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  StatusOr<std::map<int64_t, double>> gpu = Losses("0:cuda:0-1", 2);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ(gpu->size(), static_cast<size_t>(kIterations));
  for (int64_t i = 0; i < kIterations; ++i) {
    EXPECT_NEAR(gpu->at(i), cpu->at(i), 1e-4 * std::fabs(cpu->at(i))) << "iteration " << i;
  }
}

TEST_F(CudaRuntimeTest, MissingDeviceIsAStartUpErrorNamingIt) {
  compiler::MlpSpec spec;
  spec.placement = "0:cuda:" + std::to_string(CudaDeviceCount());
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan =
      compiler::Compile(*job, compiler::MakeCluster(1, 1, CudaDeviceCount() + 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, {});
  ASSERT_FALSE(runtime.ok());
  EXPECT_NE(runtime.status().message().find("cuda:" + std::to_string(CudaDeviceCount())),
            std::string::npos)
      << runtime.status();
}

}  // namespace
}  // namespace oflite
