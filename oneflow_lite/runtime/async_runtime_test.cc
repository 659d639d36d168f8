// The runtime on asynchronous device contexts (runtime/testing/
// async_cpu_context.h: a CPU "stream" per thread whose copies and
// completions happen later, on another thread, after random pauses): every
// plan must give bitwise the results of the synchronous run, including plans
// compiled for CUDA devices (own streams, H2D/D2H copy tasks, pinned zones)
// emulated on the CPU; a failed completion must stop the run naming the
// actor; a stuck stream must show in the watchdog's report.
#include <cstring>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/async_cpu_context.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

using testing::AsyncCpuContexts;
using testing::AsyncCpuOptions;
using testing::ChainPlan;
using testing::MetricsRecorder;
using testing::SnapshotVariableStore;
using testing::TestPlanBuilder;
using testing::VariablePlan;

const TensorDesc kVec = testing::TestVector();

Status RunPlan(const Plan& plan, RuntimeOptions options) {
  options.watchdog_timeout = std::chrono::milliseconds(20000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  return runtime->Run();
}

RuntimeOptions AsyncOptions(MetricsRecorder* recorder, uint64_t seed = 1) {
  RuntimeOptions options;
  options.metrics = recorder;
  AsyncCpuOptions async;
  async.seed = seed;
  options.device_context_factory = AsyncCpuContexts(async);
  return options;
}

TEST(AsyncRuntimeTest, ChainProducesEveryIterationInOrder) {
  for (int regst_num : {1, 2, 3}) {
    for (int length : {0, 1, 5}) {
      MetricsRecorder recorder;
      Status status = RunPlan(ChainPlan(length, regst_num, 7), AsyncOptions(&recorder, regst_num));
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(recorder.order.size(), 7u);
      for (int64_t i = 0; i < 7; ++i) {
        EXPECT_EQ(recorder.order[i], i);
        EXPECT_EQ(recorder.values["value"][i], i + length)
            << "regst_num " << regst_num << " length " << length;
      }
    }
  }
}

TEST(AsyncRuntimeTest, VariableSavesAndResumesThroughTheStream) {
  MetricsRecorder full;
  SnapshotVariableStore store;
  RuntimeOptions options = AsyncOptions(&full);
  options.variables = &store;
  options.save_every = 4;
  Status status = RunPlan(VariablePlan(10), options);
  ASSERT_TRUE(status.ok()) << status;
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(full.values["loss"][i], 100 + i * (i - 1) / 2 + 1) << i;
  }
  ASSERT_EQ(store.saved.count({"w", 4}), 1u);
  ASSERT_EQ(store.saved.count({"w", 10}), 1u);
  EXPECT_EQ(store.saved[std::make_pair(std::string("w"), int64_t{10})][0], 100 + 45);

  MetricsRecorder resumed;
  store.restore_from = 4;
  options = AsyncOptions(&resumed, 2);
  options.variables = &store;
  options.start_iter = 4;
  status = RunPlan(VariablePlan(10), options);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(resumed.order.size(), 6u);
  for (int64_t i = 4; i < 10; ++i) EXPECT_EQ(resumed.values["loss"][i], full.values["loss"][i]);
}

// The NaN check reads kernel outputs through the stream (Memcpy + Synchronize).
TEST(AsyncRuntimeTest, NanCheckReadsOutputsThroughTheStream) {
  TestPlanBuilder b;
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
  b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}});
  const int64_t task = b.AddTask("nan", TASK_COMPUTE, 1);
  const int64_t out = b.AddRegst(task, "out", {kVec}, 2);
  b.Consume(task, src_out);
  b.AddKernel(task, "nan_maker", "test_nan_at", {{"in", src_out}}, {{"out", out}}, {{"at", 2}});
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, out, "value");
  const Plan plan = b.Build(6);
  MetricsRecorder clean;
  Status status = RunPlan(plan, AsyncOptions(&clean));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(clean.order.size(), 6u);
  MetricsRecorder checked;
  RuntimeOptions options = AsyncOptions(&checked);
  options.check_nan = true;
  status = RunPlan(plan, options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("nan_maker"), std::string::npos) << status;
  EXPECT_NE(status.message().find("iteration 2"), std::string::npos) << status;
  EXPECT_NE(status.message().find("NaN"), std::string::npos) << status;
  EXPECT_LE(checked.order.size(), 2u);
}

// A fault that a kernel reports late (as a CUDA kernel's device-side check
// of labels does) stops the run naming the op: reported by the kernel's
// next act when one follows, and, when the fault is in the last iteration,
// once the stream has drained at the end of the run (before, a bad label in
// the last batch went unreported). Synchronous and asynchronous streams.
TEST(AsyncRuntimeTest, LateReportedFaultsStopTheRunAlsoInTheLastIteration) {
  constexpr int64_t kIters = 6;
  auto plan_with_fault_at = [](int64_t at) {
    TestPlanBuilder b;
    const int64_t src = b.AddTask("source", TASK_SOURCE);
    const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
    b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}});
    const int64_t task = b.AddTask("checker", TASK_COMPUTE, 1);
    const int64_t out = b.AddRegst(task, "out", {kVec}, 2);
    b.Consume(task, src_out);
    b.AddKernel(task, "label_check", "test_late_fail_at", {{"in", src_out}}, {{"out", out}},
                {{"at", at}});
    const int64_t sink = b.AddTask("sink", TASK_SINK);
    b.Consume(sink, out, "value");
    return b.Build(kIters);
  };
  for (bool async : {false, true}) {
    for (int64_t at : {int64_t{-1}, int64_t{2}, kIters - 1}) {
      const std::string what =
          std::string(async ? "async" : "sync") + " stream, fault at " + std::to_string(at);
      const Plan plan = plan_with_fault_at(at);
      MetricsRecorder recorder;
      RuntimeOptions options = async ? AsyncOptions(&recorder, 5) : RuntimeOptions();
      options.metrics = &recorder;
      Status status = RunPlan(plan, options);
      if (at < 0) {
        ASSERT_TRUE(status.ok()) << what << ": " << status;
        EXPECT_EQ(recorder.order.size(), static_cast<size_t>(kIters)) << what;
        continue;
      }
      ASSERT_FALSE(status.ok()) << what;
      EXPECT_NE(status.message().find("op 'label_check'"), std::string::npos) << what << status;
      EXPECT_NE(status.message().find("injected late fault of iteration " + std::to_string(at)),
                std::string::npos)
          << what << ": " << status;
      const bool last = at == kIters - 1;
      EXPECT_NE(status.message().find(last ? "reported at the end of the run"
                                           : "reported by a later call"),
                std::string::npos)
          << what << ": " << status;
      if (last) {
        EXPECT_NE(status.message().find("task 'checker', after its last act"), std::string::npos)
            << what << ": " << status;
      }
    }
  }
}

struct CompiledRun {
  std::map<int64_t, double> loss;
  std::map<int64_t, double> accuracy;
};

StatusOr<CompiledRun> RunCompiled(const Plan& plan, bool async, uint64_t seed) {
  MetricsRecorder recorder;
  RuntimeOptions options;
  if (async) options = AsyncOptions(&recorder, seed);
  options.metrics = &recorder;
  RETURN_IF_ERROR(RunPlan(plan, options));
  return CompiledRun{recorder.values["loss"], recorder.values["accuracy"]};
}

constexpr int64_t kIterations = 12;

compiler::MlpSpec Spec(const std::string& placement) {
  compiler::MlpSpec spec;
  spec.iterations = kIterations;
  spec.accuracy_metric = true;
  spec.placement = placement;
  return spec;
}

void ExpectSameRun(const CompiledRun& got, const CompiledRun& want, const std::string& what) {
  ASSERT_EQ(got.loss.size(), static_cast<size_t>(kIterations)) << what;
  ASSERT_EQ(want.loss.size(), static_cast<size_t>(kIterations)) << what;
  for (int64_t i = 0; i < kIterations; ++i) {
    EXPECT_EQ(got.loss.at(i), want.loss.at(i)) << what << " iteration " << i;
    EXPECT_EQ(got.accuracy.at(i), want.accuracy.at(i)) << what << " iteration " << i;
  }
  EXPECT_LT(got.loss.at(kIterations - 1), got.loss.at(0)) << what;
}

TEST(AsyncRuntimeTest, CompiledPlansGiveBitwiseTheSynchronousResults) {
  std::vector<std::pair<std::string, compiler::MlpSpec>> cases;
  cases.emplace_back("one_device", Spec("0:cpu:0"));
  cases.emplace_back("data_parallel", Spec("0:cpu:0-1"));
  compiler::MlpSpec columns = Spec("0:cpu:0-1");
  columns.model_parallel = compiler::ModelParallel::kSplitColumns;
  cases.emplace_back("model_parallel_columns", columns);
  compiler::MlpSpec pipeline = Spec("0:cpu:0");
  pipeline.stages = {"0:cpu:0", "0:cpu:1"};
  cases.emplace_back("pipeline", pipeline);
  for (const auto& [name, spec] : cases) {
    StatusOr<Job> job = compiler::BuildMlpJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    StatusOr<Plan> plan = compiler::Compile(*job, compiler::MakeCluster(1, 2));
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status();
    StatusOr<CompiledRun> sync = RunCompiled(*plan, false, 0);
    ASSERT_TRUE(sync.ok()) << name << ": " << sync.status();
    for (uint64_t seed : {1, 2}) {
      StatusOr<CompiledRun> async = RunCompiled(*plan, true, seed);
      ASSERT_TRUE(async.ok()) << name << ": " << async.status();
      ExpectSameRun(*async, *sync, name + " seed " + std::to_string(seed));
    }
  }
}

int CountTasks(const Plan& plan, TaskType type) {
  int count = 0;
  for (const TaskProto& task : plan.machine(0).task()) count += task.type() == type ? 1 : 0;
  return count;
}

// A plan compiled for cuda:0 (or cuda:0-1), run on the CPU with the GPU's
// structure: its own stream threads, H2D/D2H copies that really happen later
// on another thread, pinned zones; equal to the CPU plan's run bit for bit.
TEST(AsyncRuntimeTest, CudaPlansEmulatedOnCpuEqualTheCpuPlan) {
  for (const auto& [cuda, cpu] : {std::make_pair("0:cuda:0", "0:cpu:0"),
                                  std::make_pair("0:cuda:0-1", "0:cpu:0-1")}) {
    StatusOr<Job> cuda_job = compiler::BuildMlpJob(Spec(cuda));
    StatusOr<Job> cpu_job = compiler::BuildMlpJob(Spec(cpu));
    ASSERT_TRUE(cuda_job.ok() && cpu_job.ok());
    StatusOr<Plan> cuda_plan = compiler::Compile(*cuda_job, compiler::MakeCluster(1, 2, 2));
    StatusOr<Plan> cpu_plan = compiler::Compile(*cpu_job, compiler::MakeCluster(1, 2));
    ASSERT_TRUE(cuda_plan.ok()) << cuda_plan.status();
    ASSERT_TRUE(cpu_plan.ok()) << cpu_plan.status();
    EXPECT_GT(CountTasks(*cuda_plan, TASK_COPY_H2D), 0);
    EXPECT_GT(CountTasks(*cuda_plan, TASK_COPY_D2H), 0);

    if (!HasDeviceBackend(DEVICE_CUDA)) {
      // Unchanged, the CUDA plan needs the CUDA backend (a --config=cuda build).
      StatusOr<std::unique_ptr<Runtime>> refused = Runtime::Create(*cuda_plan, {});
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented) << refused.status();
      EXPECT_NE(refused.status().message().find("--config=cuda"), std::string::npos)
          << refused.status();
    }

    EXPECT_GT(testing::EmulateCudaOnCpu(&*cuda_plan), 0);
    StatusOr<CompiledRun> want = RunCompiled(*cpu_plan, false, 0);
    ASSERT_TRUE(want.ok()) << want.status();
    StatusOr<CompiledRun> got = RunCompiled(*cuda_plan, true, 3);
    ASSERT_TRUE(got.ok()) << cuda << ": " << got.status();
    ExpectSameRun(*got, *want, std::string(cuda) + " emulated");
  }
}

TEST(AsyncRuntimeTest, FailedCompletionStopsTheRunNamingTheActor) {
  MetricsRecorder recorder;
  RuntimeOptions options = AsyncOptions(&recorder);
  AsyncCpuOptions async;
  async.fail_actor = "add1";
  async.fail_at = 3;
  options.device_context_factory = AsyncCpuContexts(async);
  Status status = RunPlan(ChainPlan(3, 2, 20), options);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("actor 'add1'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("iteration 3"), std::string::npos) << status;
  EXPECT_NE(status.message().find("injected device fault"), std::string::npos) << status;
  EXPECT_LT(recorder.order.size(), 20u);
}

TEST(AsyncRuntimeTest, WatchdogReportsActsWaitingForTheirStream) {
  MetricsRecorder recorder;
  RuntimeOptions options = AsyncOptions(&recorder);
  AsyncCpuOptions async;
  async.hold_actor = "add0";
  options.device_context_factory = AsyncCpuContexts(async);
  options.watchdog_timeout = std::chrono::milliseconds(300);
  const Plan plan = ChainPlan(2, 2, 5);  // outlives the runtime
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  Status status = (*runtime)->Run();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("actor 'add0'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("waiting for their device stream"), std::string::npos)
      << status;
  EXPECT_TRUE(recorder.order.empty());
}

TEST(AsyncRuntimeTest, ContextFactoryErrorIsAStartUpErrorNamingTheStream) {
  RuntimeOptions options;
  options.device_context_factory =
      [](const StreamId& stream) -> StatusOr<std::unique_ptr<DeviceContext>> {
    if (stream.device_index == 1) return UnavailableError("device 1 is broken");
    return std::unique_ptr<DeviceContext>(new CpuDeviceContext(stream.device_index));
  };
  const Plan plan = ChainPlan(2, 2, 3);
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(runtime.status().message().find("stream m0/cpu1/s0"), std::string::npos)
      << runtime.status();
}

}  // namespace
}  // namespace oflite
