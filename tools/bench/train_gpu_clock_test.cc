// train_gpu's runtime clock (train_gpu_clock.h) on a real actor-runtime run
// of the MLP job placed on the CPU: every iteration is stamped, and the
// steady-state step time is positive and within the run's wall time (the
// difference of two runs it replaced printed 0.000 on the GPU). No GPU.
#include "tools/bench/train_gpu_clock.h"

#include <gtest/gtest.h>

#include <cmath>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "tools/gpu/gpu_jobs.h"

namespace oflite {
namespace {

ClusterProto OneCpuCluster() {
  ClusterProto cluster;
  MachineProto* machine = cluster.add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(1);
  return cluster;
}

TEST(TrainGpuClockTest, StampsEveryIterationOfARuntimeRun) {
  constexpr int64_t kWarmup = 5, kIters = 20;
  StatusOr<Job> job = MlpJob(/*batch=*/64, kWarmup + kIters, "0:cpu:0");
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = compiler::Compile(*job, OneCpuCluster());
  ASSERT_TRUE(plan.ok()) << plan.status();
  IterationClock clock(kWarmup + kIters);
  RuntimeOptions options;
  options.total_iters = kWarmup + kIters;
  options.metrics = &clock;
  auto runtime = Runtime::Create(*plan, options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_TRUE((*runtime)->Run().ok());
  StatusOr<double> ms = clock.StepMs(kWarmup, 5);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GT(*ms, 0.0);
  EXPECT_TRUE(std::isfinite(*ms));
  // Structure, not speed: one window's steps lie inside the run.
  EXPECT_LE(*ms, (*runtime)->stats().seconds * 1000.0);
  // Too few measured steps for the windows, or no warmup step.
  EXPECT_EQ(clock.StepMs(kWarmup + kIters - 3, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(clock.StepMs(0, 5).status().code(), StatusCode::kInvalidArgument);
}

TEST(TrainGpuClockTest, AMissingIterationIsNotATime) {
  IterationClock clock(10);
  for (int64_t i = 0; i < 10; ++i) {
    if (i != 7) clock.OnMetrics(i, {});
  }
  StatusOr<double> ms = clock.StepMs(2, 4);
  ASSERT_FALSE(ms.ok());
  EXPECT_EQ(ms.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(ms.status().message().find("9 of 10"), std::string::npos) << ms.status();
  clock.OnMetrics(7, {});
  EXPECT_TRUE(clock.StepMs(2, 4).ok());
}

}  // namespace
}  // namespace oflite
