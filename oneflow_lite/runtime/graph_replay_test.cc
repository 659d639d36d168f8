// Graph replay in the actor runtime (docs/gpu.md "Graph replay"), proven on
// the CPU: plans compiled for cuda:0 have one merged compute task per GPU
// (TaskProto.graph_replay); emulated on the test streams
// (runtime/testing/async_cpu_context.h), whose capture records the work a
// task enqueues and whose replay runs those same closures later on the
// stream's worker, after random pauses. A replay therefore reads and writes
// exactly the buffers it was captured with, like a CUDA graph: if the
// runtime launched a graph for registers other than the ones the act holds,
// or before their producers' work finished, the losses would differ from
// the synchronous CPU plan's. Checked: bitwise equal losses for the MLP and
// LeNet-5, with graphs really replayed; replay off, the NaN check and a
// failing capture fall back to kernel-by-kernel acts with the same losses.
// Run under --config=tsan too.
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/async_cpu_context.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace {

using testing::AsyncCpuGraphCounters;
using testing::AsyncCpuOptions;
using testing::MetricsRecorder;

constexpr int64_t kIterations = 10;

struct ReplayRun {
  std::map<int64_t, double> loss;
  int64_t captures = 0;  // the test streams' counters
  int64_t launches = 0;
  int64_t tasks = 0;  // the runtime's
  int64_t replayed = 0;
  int64_t fallbacks = 0;
  std::string note;
};

struct ReplaySetup {
  bool async = true;
  uint64_t seed = 1;
  bool graph_replay = true;
  bool check_nan = false;
  bool fail_capture = false;
};

StatusOr<ReplayRun> RunReplay(const Plan& plan, const ReplaySetup& setup) {
  MetricsRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  options.watchdog_timeout = std::chrono::milliseconds(30000);
  options.graph_replay = setup.graph_replay;
  options.check_nan = setup.check_nan;
  auto counters = std::make_shared<AsyncCpuGraphCounters>();
  if (setup.async) {
    AsyncCpuOptions stream;
    stream.seed = setup.seed;
    stream.max_delay = std::chrono::microseconds(100);
    stream.graph_counters = counters;
    stream.fail_capture = setup.fail_capture;
    options.device_context_factory = testing::AsyncCpuContexts(stream);
  } else {
    // Synchronous CPU contexts for every stream, the emulated GPU's too.
    options.device_context_factory =
        [](const StreamId& stream) -> StatusOr<std::unique_ptr<DeviceContext>> {
      return std::unique_ptr<DeviceContext>(new CpuDeviceContext(stream.device_index));
    };
  }
  ReplayRun run;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
    RETURN_IF_ERROR(runtime->Run());
    const RunStats& stats = runtime->stats();
    run.tasks = stats.graph_tasks;
    run.replayed = stats.acts_replayed;
    run.fallbacks = stats.graph_fallbacks;
    run.note = stats.graph_note;
  }
  run.loss = recorder.values["loss"];
  run.captures = counters->captures.load();
  run.launches = counters->launches.load();
  return run;
}

// A job on one kind of device: `devices` is "cuda" or "cpu".
using JobOn = std::function<StatusOr<Job>(const std::string& devices)>;

StatusOr<Job> LeNetJob(const std::string& devices) {
  return compiler::BuildLeNetJob("0:" + devices + ":0", /*batch=*/4, kIterations);
}

compiler::MlpSpec MlpSpecOn(const std::string& placement) {
  compiler::MlpSpec spec;
  spec.iterations = kIterations;
  spec.hidden = {32, 16};
  spec.placement = placement;
  spec.optimizer = compiler::MlpOptimizer::kMomentum;
  return spec;
}

StatusOr<Job> MlpJob(const std::string& devices) {
  return compiler::BuildMlpJob(MlpSpecOn("0:" + devices + ":0"));
}

// Data parallel over two devices: per GPU, forward and backward in one
// replayed task, the updates (after the host all-reduce) in another.
StatusOr<Job> DataParallelJob(const std::string& devices) {
  return compiler::BuildMlpJob(MlpSpecOn("0:" + devices + ":0-1"));
}

// Model parallel over two devices (the layers' weights split by columns,
// the activations gathered on the host between layers).
StatusOr<Job> ModelParallelJob(const std::string& devices) {
  compiler::MlpSpec spec = MlpSpecOn("0:" + devices + ":0-1");
  spec.model_parallel = compiler::ModelParallel::kSplitColumns;
  return compiler::BuildMlpJob(spec);
}

// Three layers in two stages: cuda:0 replays its forward and, after
// cuda:1, its backward and updates; cuda:1 replays everything it runs.
StatusOr<Job> PipelineJob(const std::string& devices) {
  compiler::MlpSpec spec = MlpSpecOn("0:" + devices + ":0");
  spec.stages = {"0:" + devices + ":0", "0:" + devices + ":0", "0:" + devices + ":1"};
  return compiler::BuildMlpJob(spec);
}

int ReplayTasks(const Plan& plan) {
  int count = 0;
  for (const TaskProto& task : plan.machine(0).task()) count += task.graph_replay() ? 1 : 0;
  return count;
}

// The CUDA plan (merged, emulated on the CPU) and the CPU plan of a job.
// Both clusters have two CPU devices, so CPU kernels get the same threads
// (bitwise equal results need the same reduction order).
struct PlanPair {
  Plan cuda;
  Plan cpu;
};

StatusOr<PlanPair> Plans(const JobOn& build) {
  ASSIGN_OR_RETURN(Job cuda_job, build("cuda"));
  ASSIGN_OR_RETURN(Job cpu_job, build("cpu"));
  PlanPair plans;
  ASSIGN_OR_RETURN(plans.cuda, compiler::Compile(cuda_job, compiler::MakeCluster(1, 2, 2)));
  ASSIGN_OR_RETURN(plans.cpu, compiler::Compile(cpu_job, compiler::MakeCluster(1, 2)));
  if (testing::EmulateCudaOnCpu(&plans.cuda) == 0) return InternalError("no CUDA task moved");
  return plans;
}

void ExpectSameLosses(const ReplayRun& got, const ReplayRun& want, const std::string& what) {
  ASSERT_EQ(want.loss.size(), static_cast<size_t>(kIterations)) << what;
  ASSERT_EQ(got.loss.size(), static_cast<size_t>(kIterations)) << what;
  for (int64_t i = 0; i < kIterations; ++i) {
    EXPECT_EQ(got.loss.at(i), want.loss.at(i)) << what << " iteration " << i;
  }
  EXPECT_LT(got.loss.at(kIterations - 1), got.loss.at(0)) << what;
}

TEST(GraphReplayTest, ReplayedMergedPlansGiveBitwiseTheSynchronousLosses) {
  struct Case {
    std::string name;
    JobOn build;
    int min_replayed_tasks;  // merged tasks the compiler must make, at least
  };
  // Two GPUs: each merges per level (forward, backward after the host's
  // gathering of the per-example losses, updates after the all-reduce; a pipeline's first GPU
  // its forward and its backward).
  const std::vector<Case> cases = {{"mlp", MlpJob, 1},
                                   {"lenet5", LeNetJob, 1},
                                   {"data_parallel", DataParallelJob, 4},
                                   {"model_parallel", ModelParallelJob, 2},
                                   {"pipeline", PipelineJob, 3}};
  for (const Case& c : cases) {
    StatusOr<PlanPair> plans = Plans(c.build);
    ASSERT_TRUE(plans.ok()) << c.name << ": " << plans.status();
    const int replayed_tasks = ReplayTasks(plans->cuda);
    ASSERT_GE(replayed_tasks, c.min_replayed_tasks) << c.name << ": " << plans->cuda.graph_note();
    if (c.min_replayed_tasks == 1) {
      EXPECT_EQ(replayed_tasks, 1) << plans->cuda.graph_note();
    }
    StatusOr<ReplayRun> want = RunReplay(plans->cpu, ReplaySetup{.async = false});
    ASSERT_TRUE(want.ok()) << c.name << ": " << want.status();
    EXPECT_EQ(want->tasks, 0) << c.name;
    for (uint64_t seed : {1, 2}) {
      const std::string what = c.name + " seed " + std::to_string(seed);
      StatusOr<ReplayRun> got = RunReplay(plans->cuda, ReplaySetup{.seed = seed});
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      ExpectSameLosses(*got, *want, what);
      // Each merged task captured a graph per set of buffers (the batch
      // alternates between its copies), then replayed: every act after the
      // first uncaptured one of each set is a launch.
      EXPECT_EQ(got->tasks, replayed_tasks) << what;
      EXPECT_EQ(got->fallbacks, 0) << what << ": " << got->note;
      EXPECT_GE(got->captures, replayed_tasks) << what;
      EXPECT_LE(got->captures, 4 * replayed_tasks) << what;
      EXPECT_EQ(got->launches, got->captures + got->replayed) << what;
      EXPECT_GE(got->launches, replayed_tasks * kIterations - 2 * got->captures) << what;
    }
  }
}

TEST(GraphReplayTest, ReplayOffNanCheckAndFailedCaptureRunKernelByKernel) {
  StatusOr<PlanPair> plans = Plans(MlpJob);
  ASSERT_TRUE(plans.ok()) << plans.status();
  StatusOr<ReplayRun> want = RunReplay(plans->cpu, ReplaySetup{.async = false});
  ASSERT_TRUE(want.ok()) << want.status();

  StatusOr<ReplayRun> off = RunReplay(plans->cuda, ReplaySetup{.graph_replay = false});
  ASSERT_TRUE(off.ok()) << off.status();
  ExpectSameLosses(*off, *want, "replay off");
  EXPECT_EQ(off->captures + off->launches, 0);
  EXPECT_NE(off->note.find("graph replay is off"), std::string::npos) << off->note;

  StatusOr<ReplayRun> nan_checked = RunReplay(plans->cuda, ReplaySetup{.check_nan = true});
  ASSERT_TRUE(nan_checked.ok()) << nan_checked.status();
  ExpectSameLosses(*nan_checked, *want, "NaN check");
  EXPECT_EQ(nan_checked->captures + nan_checked->launches, 0);
  EXPECT_NE(nan_checked->note.find("NaN check"), std::string::npos) << nan_checked->note;

  StatusOr<ReplayRun> broken = RunReplay(plans->cuda, ReplaySetup{.fail_capture = true});
  ASSERT_TRUE(broken.ok()) << broken.status();
  ExpectSameLosses(*broken, *want, "failed capture");
  EXPECT_EQ(broken->launches, 0);
  EXPECT_EQ(broken->fallbacks, 1);
  EXPECT_NE(broken->note.find("capture failed"), std::string::npos) << broken->note;
  EXPECT_NE(broken->note.find("injected capture failure"), std::string::npos) << broken->note;

  // The CPU's synchronous context cannot capture: the merged task runs its
  // kernels in order, with the same losses, and nothing is noted.
  StatusOr<ReplayRun> sync = RunReplay(plans->cuda, ReplaySetup{.async = false});
  ASSERT_TRUE(sync.ok()) << sync.status();
  ExpectSameLosses(*sync, *want, "merged plan on the synchronous CPU context");
  EXPECT_EQ(sync->tasks + sync->fallbacks, 0) << sync->note;
}

}  // namespace
}  // namespace oflite
