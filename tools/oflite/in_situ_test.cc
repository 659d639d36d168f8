// in_situ.h: kernel slices of a trace mapped to kernel keys of the plan
// (traces built in memory over a compiled MLP's tasks, with known
// durations; and a real traced run of it), and the factors' arithmetic.
#include "tools/oflite/in_situ.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/cost/kernel_key.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/profile/kernel_profiler.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/trace_file.h"

namespace oflite {
namespace cli {
namespace {

Plan MlpPlan(int64_t iterations) {
  compiler::MlpSpec spec;
  spec.batch = 8;
  spec.features = 16;
  spec.hidden = {8};
  spec.classes = 4;
  spec.iterations = iterations;
  StatusOr<Job> job = compiler::BuildMlpJob(spec);
  CHECK(job.ok()) << job.status();
  StatusOr<Plan> plan = CompileNodePlan(*job, compiler::MakeCluster(1, 1));
  CHECK(plan.ok()) << plan.status();
  return *plan;
}

// The first CPU compute tasks of the plan with one kernel each.
std::vector<const TaskProto*> ComputeTasks(const Plan& plan, size_t count) {
  std::vector<const TaskProto*> tasks;
  for (const TaskProto& task : plan.machine(0).task()) {
    if (task.type() == TASK_COMPUTE && task.device_type() == DEVICE_CPU &&
        task.kernel_size() == 1 && tasks.size() < count) {
      tasks.push_back(&task);
    }
  }
  CHECK_EQ(tasks.size(), count);
  return tasks;
}

std::string KeyOf(const Plan& plan, const TaskProto& task, int threads) {
  const cost::PlanIndex index(plan);
  StatusOr<std::string> key = cost::KernelKey(task.kernel(0), DEVICE_CPU, threads, index);
  CHECK(key.ok()) << key.status();
  return *key;
}

TraceRecord Slice(const std::string& category, const std::string& name, int64_t tid, double ts,
                  double dur) {
  TraceRecord record;
  record.phase = "X";
  record.category = category;
  record.name = name;
  record.tid = tid;
  record.ts_us = ts;
  record.dur_us = dur;
  return record;
}

TraceRecord ActOf(const TaskProto* task, const std::string& name, int64_t iteration, double ts,
                  double dur) {
  TraceRecord act = Slice("act", name, 0, ts, dur);
  auto& fields = *act.args.mutable_fields();
  if (iteration >= 0) fields["iteration"].set_number_value(static_cast<double>(iteration));
  if (task != nullptr) fields["task"].set_number_value(static_cast<double>(task->task_id()));
  return act;
}

// Six iterations, 1000 us apart, each: task A's act with its kernel
// (10, 20, ..., 60 us), task B's act with its kernel (7 us, 100 us in
// iteration 3). Kernel slices come before their acts, as in a real file
// (a slice is recorded when it ends). Plus slices that cannot be
// attributed, in counted iterations and in the warm-up.
TraceFile SyntheticTrace(const TaskProto* a, const TaskProto* b, bool with_iterations) {
  TraceFile trace;
  const std::string op_a = a->kernel(0).op().name();
  const std::string op_b = b->kernel(0).op().name();
  for (int i = 0; i < 6; ++i) {
    const double t = 1000.0 * i;
    const int64_t it = with_iterations ? i : -1;
    trace.events.push_back(Slice("kernel", op_a, 0, t + 20, 10.0 * (i + 1)));
    if (i == 4) trace.events.push_back(Slice("kernel", "no-such-op", 0, t + 90, 5));
    if (i == 0) trace.events.push_back(Slice("kernel", "no-such-op", 0, t + 90, 5));  // warm-up
    trace.events.push_back(ActOf(a, a->name(), it, t + 10, 100));
    trace.events.push_back(Slice("kernel", op_b, 0, t + 210, i == 3 ? 100 : 7));
    trace.events.push_back(ActOf(b, b->name(), it, t + 200, 200));
  }
  // An act of no task of the plan, with a kernel inside, between A and B.
  trace.events.push_back(Slice("kernel", op_a, 0, 5000 + 130, 3));
  trace.events.push_back(ActOf(nullptr, "not-a-task", with_iterations ? 5 : -1, 5000 + 120, 70));
  // Kernel slices outside every act: after the last one, and on a thread
  // with none.
  trace.events.push_back(Slice("kernel", op_a, 0, 5000 + 450, 10));
  trace.events.push_back(Slice("kernel", op_a, 1, 5000 + 20, 10));
  return trace;
}

TEST(InSituTest, MediansPerKeyAfterTheWarmUp) {
  const Plan plan = MlpPlan(6);
  const std::vector<const TaskProto*> tasks = ComputeTasks(plan, 2);
  const TraceFile trace = SyntheticTrace(tasks[0], tasks[1], true);
  InSituOptions options;
  options.threads = 1;
  StatusOr<InSituTrace> times = KernelTimesFromTrace(trace, plan, options);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->first_iteration, 0);
  EXPECT_EQ(times->end_iteration, 6);
  EXPECT_EQ(times->first_counted, 2);  // the first third of 6 left out
  EXPECT_EQ(times->iterations, 4);
  // Iterations end 1000 us apart (task B's act ends each).
  EXPECT_NEAR(times->step_us, 1000, 1e-9);
  // no-such-op in iteration 4, the kernel of not-a-task, the two outside
  // any act; not the warm-up's no-such-op.
  EXPECT_EQ(times->unmatched_slices, 4);
  EXPECT_EQ(times->other_slices, 0);

  const std::string key_a = KeyOf(plan, *tasks[0], 1);
  const std::string key_b = KeyOf(plan, *tasks[1], 1);
  ASSERT_NE(key_a, key_b);
  ASSERT_EQ(times->kernels.size(), 2u);
  const InSituKernel& a = times->kernels.at(key_a);
  EXPECT_EQ(a.durations_us, (std::vector<double>{30, 40, 50, 60}));
  EXPECT_DOUBLE_EQ(MedianOf(a.durations_us), 45);
  EXPECT_EQ(a.op_type, tasks[0]->kernel(0).op().op_type());
  EXPECT_EQ(a.threads, 1);
  EXPECT_EQ(a.device_type, DEVICE_CPU);
  // One slow call among four leaves the median alone.
  EXPECT_DOUBLE_EQ(MedianOf(times->kernels.at(key_b).durations_us), 7);
}

TEST(InSituTest, ThreadsAsTheRuntimeGivesThemWhenNotSet) {
  const Plan plan = MlpPlan(6);
  const std::vector<const TaskProto*> tasks = ComputeTasks(plan, 2);
  InSituOptions options;
  options.threads = 0;
  options.host_cores = 3;  // one CPU device: all three cores
  StatusOr<InSituTrace> times =
      KernelTimesFromTrace(SyntheticTrace(tasks[0], tasks[1], true), plan, options);
  ASSERT_TRUE(times.ok()) << times.status();
  const int threads = cost::CpuThreadsOf(plan.cluster().machine(0), 3);
  ASSERT_EQ(times->kernels.count(KeyOf(plan, *tasks[0], threads)), 1u);
  EXPECT_EQ(times->kernels.at(KeyOf(plan, *tasks[0], threads)).threads, threads);
}

TEST(InSituTest, WithoutIterationsTheWarmUpIsTheFirstThirdOfTheTime) {
  const Plan plan = MlpPlan(6);
  const std::vector<const TaskProto*> tasks = ComputeTasks(plan, 2);
  InSituOptions options;
  options.threads = 1;
  StatusOr<InSituTrace> times =
      KernelTimesFromTrace(SyntheticTrace(tasks[0], tasks[1], false), plan, options);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->iterations, 0);
  EXPECT_EQ(times->first_counted, -1);
  EXPECT_EQ(times->step_us, -1);
  // Acts span 10 .. 5400 us: those from 1806.7 us on count (iterations 2..5).
  EXPECT_EQ(times->kernels.at(KeyOf(plan, *tasks[0], 1)).durations_us,
            (std::vector<double>{30, 40, 50, 60}));
}

TEST(InSituTest, ATraceOfAnotherPlanIsAnError) {
  const Plan plan = MlpPlan(6);
  TraceFile trace;
  for (int i = 0; i < 6; ++i) {
    trace.events.push_back(Slice("kernel", "conv", 0, 100.0 * i + 1, 5));
    trace.events.push_back(ActOf(nullptr, "conv-task", i, 100.0 * i, 10));
  }
  InSituOptions options;
  options.threads = 1;
  StatusOr<InSituTrace> times = KernelTimesFromTrace(trace, plan, options);
  ASSERT_FALSE(times.ok());
  EXPECT_NE(times.status().message().find("not a trace of a run of this plan"), std::string::npos)
      << times.status();
  options.warmup_fraction = 1;
  EXPECT_FALSE(KernelTimesFromTrace(trace, plan, options).ok());
}

// A real `oflite run --trace` of the plan: every kernel timed alone runs in
// each counted iteration and is found by its key, and nothing is left
// unattributed.
TEST(InSituTest, RealRunMatchesTheKernelProfilersKeys) {
  const Plan plan = MlpPlan(9);
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string base = std::string(dir != nullptr ? dir : "/tmp") + "/in_situ_test";
  const std::string plan_path = base + ".plan.pb";
  const std::string trace_path = base + ".trace.json";
  ASSERT_TRUE(SavePlan(plan_path, plan).ok());
  std::vector<std::string> args = {"run",      "--plan",        plan_path, "--trace",
                                   trace_path, "--iters",       "9",       "--log-every",
                                   "9",        "--cpu-threads", "1",       "--eval=false"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ASSERT_EQ(RunRun(static_cast<int>(argv.size()), argv.data()), kExitOk);
  StatusOr<TraceFile> trace = ReadTraceFile(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();

  InSituOptions options;
  options.threads = 1;
  StatusOr<InSituTrace> times = KernelTimesFromTrace(*trace, plan, options);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->first_iteration, 0);
  EXPECT_EQ(times->end_iteration, 9);
  EXPECT_EQ(times->first_counted, 3);
  EXPECT_EQ(times->iterations, 6);
  EXPECT_GT(times->step_us, 0);
  EXPECT_EQ(times->unmatched_slices, 0);

  profile::KernelProfileOptions alone;
  alone.threads = 1;
  alone.samples = 1;
  alone.warmup = 0;
  StatusOr<std::vector<KernelCost>> costs = profile::ProfilePlanKernels(plan, alone);
  ASSERT_TRUE(costs.ok()) << costs.status();
  std::set<std::string> alone_keys;
  for (const KernelCost& cost : *costs) alone_keys.insert(cost.key());
  int compute_keys = 0;
  for (const KernelCost& cost : *costs) {
    if (cost.op_type() == "variable") continue;  // a variable's kernel runs once
    ++compute_keys;
    EXPECT_EQ(times->kernels.count(cost.key()), 1u) << cost.key();
  }
  EXPECT_GT(compute_keys, 5);
  for (const auto& [key, kernel] : times->kernels) {
    EXPECT_EQ(alone_keys.count(key), 1u) << key;
    // Each kernel of a key runs once per iteration.
    EXPECT_EQ(kernel.durations_us.size() % 6, 0u) << key;
    EXPECT_FALSE(kernel.durations_us.empty()) << key;
    for (double us : kernel.durations_us) EXPECT_GE(us, 0) << key;
  }
}

KernelCost Cost(const std::string& key, const std::string& op_type, int threads, double us,
                double in_situ_us) {
  KernelCost cost;
  cost.set_key(key);
  cost.set_op_type(op_type);
  cost.set_device_type(DEVICE_CPU);
  cost.set_threads(threads);
  cost.set_us(us);
  cost.set_in_situ_us(in_situ_us);
  return cost;
}

TEST(InSituTest, FactorsAreTimeWeightedPerOpTypeAndThreads) {
  Calibration calibration;
  *calibration.add_kernel() = Cost("m1", "matmul", 1, 10, 0);
  *calibration.add_kernel() = Cost("m2", "matmul", 1, 10, 0);
  *calibration.add_kernel() = Cost("m3", "matmul", 1, 20, 0);
  *calibration.add_kernel() = Cost("m4", "matmul", 1, 10, 0);   // not run: no in-situ time
  *calibration.add_kernel() = Cost("m5", "matmul", 1, 0, 9);    // no time alone: left out
  *calibration.add_kernel() = Cost("m6", "matmul", 2, 10, 11);  // kept from an earlier run
  *calibration.add_kernel() = Cost("r1", "relu", 1, 2, 0);
  InSituFactor old;
  old.set_op_type("matmul");
  old.set_device_type(DEVICE_CPU);
  old.set_threads(1);
  old.set_factor(9);
  old.set_kernels(40);
  *calibration.add_in_situ_factor() = old;  // replaced
  old.set_op_type("conv2d");
  old.set_threads(4);
  old.set_factor(1.25);
  *calibration.add_in_situ_factor() = old;  // kept: nothing re-measured

  const std::vector<std::string> missing =
      SetInSituTimes({{"m1", 15}, {"m2", 12}, {"m3", 20}, {"r1", 4}, {"gone", 1}}, &calibration);
  EXPECT_EQ(missing, std::vector<std::string>{"gone"});
  EXPECT_EQ(calibration.kernel(0).in_situ_us(), 15);
  EXPECT_EQ(calibration.kernel(3).in_situ_us(), 0);
  EXPECT_EQ(calibration.kernel(5).in_situ_us(), 11);

  const std::vector<InSituFactor> computed = UpdateInSituFactors(&calibration);
  ASSERT_EQ(computed.size(), 3u);
  ASSERT_EQ(calibration.in_situ_factor_size(), 4);
  // Sorted by op type, then threads.
  const auto& f = calibration.in_situ_factor();
  EXPECT_EQ(f[0].op_type(), "conv2d");
  EXPECT_EQ(f[0].factor(), 1.25);
  EXPECT_EQ(f[1].op_type(), "matmul");
  EXPECT_EQ(f[1].threads(), 1);
  // (15 + 12 + 20) / (10 + 10 + 20): time-weighted, not the median of
  // the ratios 1.5, 1.2, 1.0.
  EXPECT_DOUBLE_EQ(f[1].factor(), 47.0 / 40.0);
  EXPECT_EQ(f[1].kernels(), 3);
  EXPECT_EQ(f[2].op_type(), "matmul");
  EXPECT_EQ(f[2].threads(), 2);
  EXPECT_DOUBLE_EQ(f[2].factor(), 1.1);
  EXPECT_EQ(f[2].kernels(), 1);
  EXPECT_EQ(f[3].op_type(), "relu");
  EXPECT_DOUBLE_EQ(f[3].factor(), 2);
  EXPECT_EQ(f[3].device_type(), DEVICE_CPU);

  // An even count: the mean of the two middle ratios.
  *calibration.add_kernel() = Cost("r2", "relu", 1, 2, 2);
  UpdateInSituFactors(&calibration);
  EXPECT_DOUBLE_EQ(calibration.in_situ_factor(3).factor(), 1.5);
  EXPECT_EQ(calibration.in_situ_factor(3).kernels(), 2);
}

}  // namespace
}  // namespace cli
}  // namespace oflite
