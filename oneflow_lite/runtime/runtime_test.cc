#include "oneflow_lite/runtime/runtime.h"

#include <cstring>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "oneflow_lite/runtime/testing/test_fixtures.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

using testing::ChainPlan;
using testing::MetricsRecorder;
using testing::SnapshotVariableStore;
using testing::TestPlanBuilder;
using testing::VariablePlan;

const TensorDesc kVec = testing::TestVector();

Status RunPlan(const Plan& plan, RuntimeOptions options) {
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  if (!runtime.ok()) return runtime.status();
  return (*runtime)->Run();
}

TEST(RuntimeTest, ChainProducesEveryIterationInOrder) {
  for (int regst_num : {1, 2, 3}) {
    for (int length : {0, 1, 5}) {
      MetricsRecorder recorder;
      RuntimeOptions options;
      options.metrics = &recorder;
      ASSERT_TRUE(RunPlan(ChainPlan(length, regst_num, 7), options).ok());
      ASSERT_EQ(recorder.order.size(), 7u);
      for (int64_t i = 0; i < 7; ++i) {
        EXPECT_EQ(recorder.order[i], i);
        EXPECT_EQ(recorder.values["value"][i], i + length) << "regst_num " << regst_num;
      }
    }
  }
}

TEST(RuntimeTest, ZeroIterationsFinishCleanly) {
  MetricsRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  options.start_iter = 3;
  options.total_iters = 3;
  ASSERT_TRUE(RunPlan(ChainPlan(3, 2, 3), options).ok());
  EXPECT_TRUE(recorder.order.empty());
}

TEST(RuntimeTest, StatsCountActsAndMessages) {
  const Plan plan = ChainPlan(2, 2, 10);
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, {});
  ASSERT_TRUE(runtime.ok());
  ASSERT_TRUE((*runtime)->Run().ok());
  const RunStats& stats = (*runtime)->stats();
  EXPECT_EQ(stats.actors, 4);
  EXPECT_EQ(stats.threads, 2);  // device 0 and device 1 streams
  EXPECT_EQ(stats.acts, 40);
  // Per iteration: produced + returned on each of 3 edges; then 3 EORDs
  // (the runtime's start messages are delivered directly, not counted).
  EXPECT_EQ(stats.messages, 10 * 3 * 2 + 3);
}

// source -> {left, right} -> join (sum + 1) -> sink.
TEST(RuntimeTest, DiamondJoinsBothBranches) {
  TestPlanBuilder b;
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
  b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}}, {{"offset", 10}});
  int64_t branch_out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t task = b.AddTask(i ? "right" : "left", TASK_COMPUTE, i);
    branch_out[i] = b.AddRegst(task, "out", {kVec}, i + 1);
    b.Consume(task, src_out);
    b.AddKernel(task, i ? "right" : "left", "test_add_one", {{"in", src_out}},
                {{"out", branch_out[i]}});
  }
  const int64_t join = b.AddTask("join", TASK_COMPUTE, 2);
  const int64_t join_out = b.AddRegst(join, "out", {kVec}, 2);
  b.Consume(join, branch_out[0], "a");
  b.Consume(join, branch_out[1], "b");
  b.AddKernel(join, "join", "test_add_one", {{"in", branch_out[0]}, {"in", branch_out[1]}},
              {{"out", join_out}});
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, join_out, "value");
  MetricsRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  ASSERT_TRUE(RunPlan(b.Build(9), options).ok());
  ASSERT_EQ(recorder.order.size(), 9u);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(recorder.values["value"][i], 2 * (i + 11) + 1);
}

TEST(RuntimeTest, KernelErrorStopsEveryActorAndNamesOpAndIteration) {
  TestPlanBuilder b;
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
  b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}});
  const int64_t bad = b.AddTask("bad", TASK_COMPUTE, 1);
  const int64_t bad_out = b.AddRegst(bad, "out", {kVec}, 2);
  b.Consume(bad, src_out);
  b.AddKernel(bad, "exploding_op", "test_fail_at", {{"in", src_out}}, {{"out", bad_out}},
              {{"at", 4}});
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, bad_out, "value");
  MetricsRecorder recorder;
  RuntimeOptions options;
  options.metrics = &recorder;
  Status status = RunPlan(b.Build(1000), options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("exploding_op"), std::string::npos) << status;
  EXPECT_NE(status.message().find("iteration 4"), std::string::npos) << status;
  // Iterations before the failure may or may not reach the sink before the
  // abort; none after it can.
  EXPECT_LE(recorder.order.size(), 4u);
  for (size_t i = 0; i < recorder.order.size(); ++i) EXPECT_EQ(recorder.order[i], int64_t(i));
}

TEST(RuntimeTest, BindingToAnotherTasksRegisterFailsTheActNamingTheArg) {
  // The verifier refuses such a plan; a runtime told the plan is verified
  // still fails the act with the binding named, not a null blob.
  TestPlanBuilder b;
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
  b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}});
  const int64_t other = b.AddTask("other_source", TASK_SOURCE);
  const int64_t other_out = b.AddRegst(other, "out", {kVec}, 2);
  b.AddKernel(other, "other_source", "test_source", {}, {{"out", other_out}});
  const int64_t task = b.AddTask("misbound", TASK_COMPUTE);
  const int64_t out = b.AddRegst(task, "out", {kVec}, 2);
  b.Consume(task, src_out);
  b.AddKernel(task, "misbound_op", "test_add_one", {{"in", other_out}}, {{"out", out}});
  const int64_t sink = b.AddTask("sink", TASK_SINK);
  b.Consume(sink, out, "value");
  const int64_t other_sink = b.AddTask("other_sink", TASK_SINK);
  b.Consume(other_sink, other_out, "other");
  const Plan plan = b.Build(3);
  EXPECT_FALSE(RunPlan(plan, {}).ok());  // refused by the verifier
  RuntimeOptions options;
  options.plan_verified = true;
  const Status status = RunPlan(plan, options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("arg 'in' is bound to register " + std::to_string(other_out)),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("neither consumes nor produces"), std::string::npos) << status;
}

TEST(RuntimeTest, NanCheckFailsOnlyWhenEnabled) {
  auto build = [] {
    TestPlanBuilder b;
    const int64_t src = b.AddTask("source", TASK_SOURCE);
    const int64_t src_out = b.AddRegst(src, "out", {kVec}, 2);
    b.AddKernel(src, "source", "test_source", {}, {{"out", src_out}});
    const int64_t task = b.AddTask("nan", TASK_COMPUTE);
    const int64_t out = b.AddRegst(task, "out", {kVec}, 2);
    b.Consume(task, src_out);
    b.AddKernel(task, "nan_maker", "test_nan_at", {{"in", src_out}}, {{"out", out}}, {{"at", 2}});
    const int64_t sink = b.AddTask("sink", TASK_SINK);
    b.Consume(sink, out, "value");
    return b.Build(6);
  };
  Plan plan = build();
  EXPECT_TRUE(RunPlan(plan, {}).ok());
  RuntimeOptions options;
  options.check_nan = true;
  Status status = RunPlan(plan, options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("nan_maker"), std::string::npos) << status;
  EXPECT_NE(status.message().find("iteration 2"), std::string::npos) << status;
  EXPECT_NE(status.message().find("NaN"), std::string::npos) << status;
}

TEST(RuntimeTest, AllocationFailureIsReportedBeforeAnythingRuns) {
  RuntimeOptions options;
  options.max_zone_bytes = 64;
  const Plan plan = ChainPlan(3, 2, 5);
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  ASSERT_EQ(runtime.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(runtime.status().message().find("m0/host"), std::string::npos);
}

TEST(RuntimeTest, MissingKernelIsAStartUpError) {
  TestPlanBuilder b;
  const int64_t src = b.AddTask("source", TASK_SOURCE);
  const int64_t out = b.AddRegst(src, "out", {kVec}, 1);
  b.AddKernel(src, "mystery", "no_such_op", {}, {{"out", out}});
  const Plan plan = b.Build(1);
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, {});
  ASSERT_EQ(runtime.status().code(), StatusCode::kNotFound);
  EXPECT_NE(runtime.status().message().find("mystery"), std::string::npos);
}

TEST(RuntimeTest, WatchdogNamesDeadlockedActors) {
  // Two actors that each wait for the other: nobody can ever act.
  TestPlanBuilder b;
  const int64_t ping = b.AddTask("ping", TASK_COMPUTE);
  const int64_t pong = b.AddTask("pong", TASK_COMPUTE, 1);
  const int64_t ping_out = b.AddRegst(ping, "out", {kVec}, 1);
  const int64_t pong_out = b.AddRegst(pong, "out", {kVec}, 1);
  b.Consume(ping, pong_out);
  b.Consume(pong, ping_out);
  b.AddKernel(ping, "ping", "test_add_one", {{"in", pong_out}}, {{"out", ping_out}});
  b.AddKernel(pong, "pong", "test_add_one", {{"in", ping_out}}, {{"out", pong_out}});
  RuntimeOptions options;
  options.watchdog_timeout = std::chrono::milliseconds(300);
  const auto begin = std::chrono::steady_clock::now();
  Status status = RunPlan(b.Build(3), options);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
  ASSERT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("actor 'ping'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("actor 'pong'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("waiting for register " + std::to_string(pong_out)),
            std::string::npos)
      << status;
}


TEST(RuntimeTest, VariableIsUpdatedInPlaceAcrossIterations) {
  MetricsRecorder recorder;
  SnapshotVariableStore store;
  RuntimeOptions options;
  options.metrics = &recorder;
  options.variables = &store;
  ASSERT_TRUE(RunPlan(VariablePlan(10), options).ok());
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(recorder.values["loss"][i], 100 + i * (i - 1) / 2 + 1) << i;
  }
  // The final value is saved at the end.
  ASSERT_EQ(store.saved.count({"w", 10}), 1u);
  EXPECT_EQ(store.saved[std::make_pair(std::string("w"), int64_t{10})][0], 100 + 45);
}

TEST(RuntimeTest, ResumeContinuesTheSameCurve) {
  MetricsRecorder full;
  SnapshotVariableStore store;
  RuntimeOptions options;
  options.metrics = &full;
  options.variables = &store;
  options.save_every = 4;
  ASSERT_TRUE(RunPlan(VariablePlan(10), options).ok());
  ASSERT_EQ(store.saved.count({"w", 4}), 1u);
  ASSERT_EQ(store.saved.count({"w", 8}), 1u);

  MetricsRecorder resumed;
  store.restore_from = 4;
  options.metrics = &resumed;
  options.save_every = 0;
  options.start_iter = 4;
  ASSERT_TRUE(RunPlan(VariablePlan(10), options).ok());
  ASSERT_EQ(resumed.order.size(), 6u);
  for (int64_t i = 4; i < 10; ++i) EXPECT_EQ(resumed.values["loss"][i], full.values["loss"][i]);
}

TEST(RuntimeTest, SameRunTwiceGivesTheSameCurve) {
  MetricsRecorder first, second;
  RuntimeOptions options;
  options.metrics = &first;
  ASSERT_TRUE(RunPlan(VariablePlan(20), options).ok());
  options.metrics = &second;
  ASSERT_TRUE(RunPlan(VariablePlan(20), options).ok());
  EXPECT_EQ(first.values, second.values);
}

TEST(RuntimeTest, VariableTaskMustHaveOneCopy) {
  Plan plan = VariablePlan(2);
  for (TaskProto& task : *plan.mutable_machine(0)->mutable_task()) {
    if (task.type() == TASK_VARIABLE) {
      task.mutable_produced(0)->set_regst_num(2);
      task.mutable_produced(0)->add_mem_offset(0);
    }
  }
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, {});
  ASSERT_EQ(runtime.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(runtime.status().message().find("'w'"), std::string::npos);
}

}  // namespace
}  // namespace oflite
