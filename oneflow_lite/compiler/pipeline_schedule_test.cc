#include "oneflow_lite/compiler/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace compiler {
namespace {

std::string OrderText(const std::vector<ScheduleUnit>& order) {
  std::string text;
  for (const ScheduleUnit& unit : order) text += (text.empty() ? "" : " ") + unit.ToString();
  return text;
}

TEST(StageOrderTest, GPipeAndOneForwardOneBackwardSequences) {
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_GPIPE, 2, 0, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_GPIPE, 3, 2, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 2, 0, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 2, 1, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 4, 0, 4)), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 4, 1, 5)), "F0 F1 F2 B0 F3 B1 F4 B2 B3 B4");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 3, 0, 1)), "F0 B0");
  EXPECT_EQ(OrderText(StageOrder(PIPELINE_1F1B, 4, 0, 2)), "F0 F1 B0 B1");
}

// Runs every stage's order with forward units of time 1 and backward units
// of time 2: a unit starts when its stage finished the previous unit and
// its inputs exist (F k on the stage before, B k on the stage after, F k on
// the same stage). Returns the makespan; -1 when no unit can start.
int64_t Simulate(PipelineSchedule schedule, int64_t stages, int64_t micro_batches) {
  std::vector<std::vector<ScheduleUnit>> orders;
  for (int64_t s = 0; s < stages; ++s) {
    orders.push_back(StageOrder(schedule, stages, s, micro_batches));
  }
  std::map<std::tuple<int64_t, int64_t, bool>, int64_t> done;  // (stage, k, backward) -> end
  std::vector<size_t> next(stages, 0);
  std::vector<int64_t> free_at(stages, 0);
  size_t remaining = static_cast<size_t>(2 * stages * micro_batches);
  while (remaining > 0) {
    bool progress = false;
    for (int64_t s = 0; s < stages; ++s) {
      if (next[s] == orders[s].size()) continue;
      const ScheduleUnit unit = orders[s][next[s]];
      std::vector<std::tuple<int64_t, int64_t, bool>> deps;
      if (!unit.backward && s > 0) deps.emplace_back(s - 1, unit.micro_batch, false);
      if (unit.backward) deps.emplace_back(s, unit.micro_batch, false);
      if (unit.backward && s + 1 < stages) deps.emplace_back(s + 1, unit.micro_batch, true);
      int64_t start = free_at[s];
      bool ready = true;
      for (const auto& dep : deps) {
        auto it = done.find(dep);
        if (it == done.end()) {
          ready = false;
          break;
        }
        start = std::max(start, it->second);
      }
      if (!ready) continue;
      free_at[s] = start + (unit.backward ? 2 : 1);
      done[{s, unit.micro_batch, unit.backward}] = free_at[s];
      ++next[s];
      --remaining;
      progress = true;
    }
    if (!progress) return -1;
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

TEST(StageOrderTest, EveryOrderIsCompleteDeadlockFreeAndHasTheComputedBubble) {
  for (PipelineSchedule schedule : {PIPELINE_GPIPE, PIPELINE_1F1B}) {
    for (int64_t stages = 2; stages <= 4; ++stages) {
      for (int64_t m = 1; m <= 8; ++m) {
        SCOPED_TRACE(PipelineScheduleName(schedule) + " S=" + std::to_string(stages) +
                     " M=" + std::to_string(m));
        for (int64_t s = 0; s < stages; ++s) {
          const std::vector<ScheduleUnit> order = StageOrder(schedule, stages, s, m);
          ASSERT_EQ(order.size(), static_cast<size_t>(2 * m));
          std::set<std::pair<int64_t, bool>> seen;
          int64_t next_forward = 0, next_backward = 0, in_flight = 0, most_in_flight = 0;
          for (const ScheduleUnit& unit : order) {
            EXPECT_TRUE(seen.insert({unit.micro_batch, unit.backward}).second) << unit.ToString();
            // Forwards and backwards each in micro-batch order, B k after F k.
            EXPECT_EQ(unit.micro_batch, unit.backward ? next_backward++ : next_forward++);
            in_flight += unit.backward ? -1 : 1;
            most_in_flight = std::max(most_in_flight, in_flight);
          }
          // Activations held at once: GPipe all M; 1F1B at most S - s.
          EXPECT_EQ(most_in_flight, schedule == PIPELINE_GPIPE ? m : std::min(m, stages - s));
        }
        const int64_t makespan = Simulate(schedule, stages, m);
        ASSERT_GT(makespan, 0) << "deadlock";
        // Each stage is busy 3M of the makespan: idle share = the bubble.
        const double idle = 1.0 - 3.0 * m / static_cast<double>(makespan);
        EXPECT_NEAR(idle, BubbleFraction(stages, m), 1e-12);
      }
    }
  }
}

TEST(PipelineScheduleTest, ParsesNames) {
  EXPECT_EQ(*ParsePipelineSchedule("gpipe"), PIPELINE_GPIPE);
  EXPECT_EQ(*ParsePipelineSchedule("1F1B"), PIPELINE_1F1B);
  StatusOr<PipelineSchedule> bad = ParsePipelineSchedule("zigzag");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'zigzag'; use gpipe"), std::string::npos);
  EXPECT_EQ(PipelineScheduleName(PIPELINE_1F1B), "1f1b");
  EXPECT_DOUBLE_EQ(BubbleFraction(2, 8), 1.0 / 9.0);
}

MlpSpec PipelineMlp(int64_t micro_batches, PipelineSchedule schedule,
                    std::vector<std::string> stages = {"0:cpu:0", "1:cpu:0"}) {
  MlpSpec spec;
  spec.batch = 8;
  spec.hidden = {32};
  spec.stages = std::move(stages);
  spec.micro_batches = micro_batches;
  spec.schedule = schedule;
  return spec;
}

// The op names of unit (micro-batch, backward) on `placement`'s stage.
std::set<std::string> UnitOps(const Job& job, const std::string& machine_prefix, int64_t k,
                              bool backward) {
  std::set<std::string> ops;
  for (const OpConf& op : job.op()) {
    if (op.has_micro_batch() && op.micro_batch() == k && op.is_backward() == backward &&
        op.placement().machine_id(0) == std::stoll(machine_prefix)) {
      ops.insert(op.name());
    }
  }
  return ops;
}

TEST(PipelineScheduleTest, ChainsTheUnitsOfEachStageAndRecordsTheFacts) {
  StatusOr<Job> job = BuildMlpJob(PipelineMlp(4, PIPELINE_1F1B));
  ASSERT_TRUE(job.ok()) << job.status();
  Job scheduled = *job;
  StatusOr<PipelinePlan> plan = SchedulePipeline(&scheduled);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->micro_batches(), 4);
  EXPECT_EQ(plan->schedule(), PIPELINE_1F1B);
  ASSERT_EQ(plan->stage_size(), 2);
  EXPECT_EQ(plan->stage(0).placement().machine_id(0), 0);
  EXPECT_EQ(plan->stage(1).placement().machine_id(0), 1);
  EXPECT_DOUBLE_EQ(plan->bubble_fraction(), 1.0 / 5.0);
  std::string order;
  for (const PipelineUnit& unit : plan->stage(0).unit()) {
    EXPECT_GT(unit.op_count(), 0);
    order += (unit.backward() ? "B" : "F") + std::to_string(unit.micro_batch()) + " ";
  }
  EXPECT_EQ(order, "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_GT(plan->control_edges(), 0);
  // Stage 0's B0 waits for its F1: some op of B0 has a control input from F1.
  const std::set<std::string> f1 = UnitOps(scheduled, "0", 1, false);
  const std::set<std::string> b0 = UnitOps(scheduled, "0", 0, true);
  ASSERT_FALSE(f1.empty());
  ASSERT_FALSE(b0.empty());
  int from_f1 = 0;
  for (const OpConf& op : scheduled.op()) {
    if (!b0.count(op.name())) continue;
    for (const std::string& c : op.control_input()) from_f1 += f1.count(c);
  }
  EXPECT_GT(from_f1, 0);
  // Every added control input is counted.
  int64_t before = 0, after = 0;
  for (const OpConf& op : job->op()) before += op.control_input_size();
  for (const OpConf& op : scheduled.op()) after += op.control_input_size();
  EXPECT_EQ(after - before, plan->control_edges());
}

TEST(PipelineScheduleTest, CompiledPlanCarriesTheScheduleAndFlatPlansDoNot) {
  for (PipelineSchedule schedule : {PIPELINE_GPIPE, PIPELINE_1F1B}) {
    StatusOr<Job> job = BuildMlpJob(PipelineMlp(4, schedule));
    ASSERT_TRUE(job.ok()) << job.status();
    StatusOr<Plan> plan = Compile(*job, MakeCluster(2, 1));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->has_pipeline());
    EXPECT_EQ(plan->pipeline().schedule(), schedule);
    EXPECT_EQ(plan->pipeline().stage_size(), 2);
  }
  StatusOr<Job> flat = BuildMlpJob(PipelineMlp(1, PIPELINE_1F1B));
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_FALSE(flat->conf().has_pipeline());
  StatusOr<Plan> plan = Compile(*flat, MakeCluster(2, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->has_pipeline());
}

TEST(PipelineScheduleTest, ThreeStagesOfOneMachineEach) {
  MlpSpec spec = PipelineMlp(4, PIPELINE_1F1B, {"0:cpu:0", "1:cpu:0", "2:cpu:0"});
  spec.hidden = {16, 16};
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  StatusOr<Plan> plan = Compile(*job, MakeCluster(3, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->pipeline().stage_size(), 3);
  EXPECT_DOUBLE_EQ(plan->pipeline().bubble_fraction(), 2.0 / 6.0);
}

TEST(PipelineScheduleTest, OneForwardOneBackwardOverANonChainIsRefused) {
  // Layers on machines 0, 1, 0: under 1F1B machine 0's B0 must precede its
  // F1, whose layer 3 waits for machine 1's F1, which follows machine 1's
  // B0, which waits for machine 0's B0 (through layer 3's backward).
  MlpSpec spec = PipelineMlp(2, PIPELINE_1F1B, {"0:cpu:0", "1:cpu:0", "0:cpu:0"});
  spec.hidden = {16, 16};
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  Job scheduled = *job;
  StatusOr<PipelinePlan> plan = SchedulePipeline(&scheduled);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("use the gpipe schedule"), std::string::npos)
      << plan.status();
  spec.schedule = PIPELINE_GPIPE;
  job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  scheduled = *job;
  EXPECT_TRUE(SchedulePipeline(&scheduled).ok());
}

TEST(PipelineScheduleTest, BadConfsAreRefused) {
  StatusOr<Job> job = BuildMlpJob(PipelineMlp(2, PIPELINE_GPIPE));
  ASSERT_TRUE(job.ok()) << job.status();
  Job bad = *job;
  bad.mutable_conf()->mutable_pipeline()->set_micro_batches(1);
  EXPECT_FALSE(SchedulePipeline(&bad).ok());
  bad = *job;
  bad.mutable_conf()->mutable_pipeline()->set_schedule(PIPELINE_SCHEDULE_UNSET);
  EXPECT_FALSE(SchedulePipeline(&bad).ok());
  bad = *job;
  for (OpConf& op : *bad.mutable_op()) {
    if (op.has_micro_batch()) op.set_micro_batch(7);
  }
  StatusOr<PipelinePlan> plan = SchedulePipeline(&bad);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("micro_batch 7 outside [0, 2)"), std::string::npos);
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
