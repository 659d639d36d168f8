#include "oneflow_lite/compiler/compiler.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/testing/test_jobs.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace compiler {
namespace {

Plan MustCompile(const MlpSpec& spec, const ClusterProto& cluster,
                 const CompileOptions& options = {}) {
  StatusOr<Job> job = BuildMlpJob(spec);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return Plan();
  StatusOr<Plan> plan = Compile(*job, cluster, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan();
}

// Ops of the job by kind.
struct OpCounts {
  int variables = 0;
  int sources = 0;
  int compute = 0;
  std::vector<std::string> updates;  // update op names
};

OpCounts CountOps(const Job& job) {
  OpCounts c;
  for (const OpConf& op : job.op()) {
    if (op.op_type() == "variable") {
      c.variables++;
    } else if (op.op_type() == "random_batch" || op.op_type() == "fashion_mnist") {
      c.sources++;
    } else {
      c.compute++;
    }
    if (!op.mutable_input().empty() || op.op_type().find("_update") != std::string::npos) {
      c.updates.push_back(op.name());
    }
  }
  return c;
}

// Structural invariants every plan must satisfy: ids decode to the task's
// place, producers/consumers agree on both sides, regst ids are unique.
void CheckConsistency(const Plan& plan) {
  std::map<int64_t, const TaskProto*> tasks;
  std::map<int64_t, const RegstDescProto*> regsts;
  for (const MachinePlan& m : plan.machine()) {
    int64_t previous = -1;
    for (const TaskProto& t : m.task()) {
      ASSERT_GT(t.task_id(), previous) << "tasks not sorted on machine " << m.machine_id();
      previous = t.task_id();
      ASSERT_TRUE(tasks.emplace(t.task_id(), &t).second) << t.name();
      StatusOr<TaskIdParts> parts = DecodeTaskId(t.task_id());
      ASSERT_TRUE(parts.ok());
      EXPECT_EQ(parts->stream.machine, m.machine_id()) << t.name();
      EXPECT_EQ(parts->stream.machine, t.machine_id()) << t.name();
      EXPECT_EQ(parts->stream.device_type, t.device_type()) << t.name();
      EXPECT_EQ(parts->stream.device_index, t.device_index()) << t.name();
      EXPECT_EQ(parts->stream.stream, t.stream_id()) << t.name();
      for (const RegstDescProto& r : t.produced()) {
        ASSERT_TRUE(regsts.emplace(r.regst_desc_id(), &r).second) << r.regst_desc_id();
        EXPECT_EQ(r.producer_task_id(), t.task_id());
        EXPECT_GE(r.regst_num(), 1);
      }
    }
  }
  for (const auto& [id, t] : tasks) {
    std::set<int64_t> consumed;
    for (const ConsumedRegst& c : t->consumed()) {
      for (int64_t rid : c.regst_desc_id()) {
        ASSERT_TRUE(consumed.insert(rid).second) << t->name() << " consumes " << rid << " twice";
        ASSERT_TRUE(regsts.count(rid)) << t->name() << " consumes unknown regst " << rid;
        const auto& consumers = regsts[rid]->consumer_task_id();
        EXPECT_NE(std::find(consumers.begin(), consumers.end(), id), consumers.end())
            << t->name() << " consumes " << rid << " but is not listed as its consumer";
        // Only CommNet tasks read registers of other machines.
        if (MachineOfTaskId(regsts[rid]->producer_task_id()) != t->machine_id()) {
          EXPECT_EQ(t->type(), TASK_COMMNET) << t->name();
        }
      }
    }
    // An input is a consumed register, or (in a merged GPU compute task,
    // graph_merge.h) one the task produces for a later kernel of its own.
    std::set<int64_t> produced;
    for (const RegstDescProto& r : t->produced()) produced.insert(r.regst_desc_id());
    for (const KernelConf& k : t->kernel()) {
      for (const BlobBinding& b : k.input()) {
        EXPECT_TRUE(consumed.count(b.regst_desc_id()) ||
                    (t->graph_replay() && produced.count(b.regst_desc_id())))
            << t->name() << " binds " << b.arg();
      }
    }
  }
  for (const auto& [rid, r] : regsts) {
    for (int64_t c : r->consumer_task_id()) ASSERT_TRUE(tasks.count(c)) << "regst " << rid;
    if (r->is_persistent()) {
      EXPECT_EQ(r->regst_num(), 1);
      EXPECT_FALSE(r->memory_reused());
    }
  }
  Status memory = CheckMemoryPlan(plan);
  EXPECT_TRUE(memory.ok()) << memory;
}

int Count(const PlanSummary& s, TaskType type) {
  auto it = s.actors.find(type);
  return it == s.actors.end() ? 0 : it->second;
}

// The SBP signature chosen for the kernel of op `name` (parallel id 0).
std::string SignatureOf(const Plan& plan, const std::string& name) {
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.op_name() != name || t.parallel_ctx().parallel_id() != 0) continue;
      const KernelConf& k = t.kernel(0);
      SbpSignature sig;
      for (const NdSbp& s : k.input_sbp()) sig.inputs.push_back(s.sbp(0));
      for (const NdSbp& s : k.output_sbp()) sig.outputs.push_back(s.sbp(0));
      return sig.ToString();
    }
  }
  return "op " + name + " not found";
}

// The lbn an update op reads as "model_diff".
std::string GradientOf(const Job& job, const std::string& update) {
  for (const OpConf& op : job.op()) {
    if (op.name() != update) continue;
    for (const ArgProto& arg : op.input()) {
      if (arg.name() == "model_diff") return arg.lbn(0);
    }
  }
  return "";
}

bool HasBoxing(const PlanSummary& s, BoxingKind kind, const std::string& lbn) {
  for (const BoxingConversion& c : s.boxing) {
    if (c.kind == kind && c.lbn == lbn) return true;
  }
  return false;
}

TEST(CompilerTest, MlpOnOneDevice) {
  MlpSpec spec;
  Job job = *BuildMlpJob(spec);
  OpCounts ops = CountOps(job);
  Plan plan = MustCompile(spec, MakeCluster(1, 1));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_EQ(Count(s, TASK_COMPUTE), ops.compute);
  EXPECT_EQ(Count(s, TASK_VARIABLE), ops.variables);
  EXPECT_EQ(Count(s, TASK_SOURCE), 1);
  EXPECT_EQ(Count(s, TASK_SINK), 1);
  EXPECT_EQ(s.actor_count, ops.compute + ops.variables + 2);
  EXPECT_TRUE(s.boxing.empty());
  EXPECT_TRUE(s.cross_machine_edges.empty());
  ASSERT_EQ(s.machines.size(), 1u);
  ASSERT_EQ(s.machines[0].memory.size(), 1u);
  const ZoneMemory& host = s.machines[0].memory[0];
  EXPECT_EQ(host.zone.type(), ZONE_HOST);
  EXPECT_LT(host.size, host.bytes_without_reuse) << "reuse saved nothing";
  EXPECT_EQ(plan.total_iters(), spec.iterations);
  // The sink reports the loss.
  for (const TaskProto& t : plan.machine(0).task()) {
    if (t.type() != TASK_SINK) continue;
    ASSERT_EQ(t.sink().metric_size(), 1);
    EXPECT_EQ(t.sink().metric(0).name(), "loss");
    EXPECT_EQ(t.sink().metric(0).lbn(), job.conf().train().loss_lbn());
  }
}

TEST(CompilerTest, DataParallelTwoCpuDevices) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  Job job = *BuildMlpJob(spec);
  OpCounts ops = CountOps(job);
  Plan plan = MustCompile(spec, MakeCluster(1, 2));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_EQ(Count(s, TASK_COMPUTE), 2 * ops.compute);
  EXPECT_EQ(Count(s, TASK_VARIABLE), 2 * ops.variables);
  EXPECT_EQ(Count(s, TASK_SOURCE), 2);
  EXPECT_EQ(Count(s, TASK_COLLECTIVE), 0);
  EXPECT_EQ(Count(s, TASK_COMMNET), 0);
  // Batch split, weights broadcast, every gradient all-reduced (P -> B).
  EXPECT_EQ(SignatureOf(plan, "dense-matmul"), "S(0), B -> S(0)");
  ASSERT_EQ(ops.updates.size(), 4u);
  for (const std::string& update : ops.updates) {
    EXPECT_EQ(SignatureOf(plan, update), "B, B -> ") << update;
    EXPECT_TRUE(HasBoxing(s, BOXING_ALL_REDUCE, GradientOf(job, update))) << update;
  }
  int boxing_tasks = 0;
  for (const BoxingConversion& c : s.boxing) {
    EXPECT_FALSE(c.spans_machines);
    EXPECT_EQ(c.tasks, 2) << c.lbn;
    boxing_tasks += c.tasks;
  }
  EXPECT_EQ(Count(s, TASK_BOXING), boxing_tasks);
  EXPECT_EQ(CountBoxing(s, BOXING_ALL_REDUCE), 4);
}

TEST(CompilerTest, DataParallelTwoMachinesUsesRings) {
  MlpSpec spec;
  spec.placement = "0-1:cpu:0";
  Job job = *BuildMlpJob(spec);
  OpCounts ops = CountOps(job);
  // One ring per gradient: without gradient buckets (gradient_buckets_test
  // checks the fused plan).
  CompileOptions unfused;
  unfused.fuse_max_bytes = 0;
  Plan plan = MustCompile(spec, MakeCluster(2, 1), unfused);
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  ASSERT_EQ(s.machines.size(), 2u);
  for (const MachineSummary& m : s.machines) {
    EXPECT_EQ(m.actors.at(TASK_COMPUTE), ops.compute);
    EXPECT_EQ(m.actors.at(TASK_VARIABLE), ops.variables);
  }
  for (const std::string& update : ops.updates) {
    EXPECT_TRUE(HasBoxing(s, BOXING_ALL_REDUCE, GradientOf(job, update))) << update;
  }
  for (const BoxingConversion& c : s.boxing) {
    if (BoxingCommunicates(c.kind)) {
      EXPECT_TRUE(c.spans_machines) << c.lbn;
    }
  }
  // Ring members: one per machine, ring ids point at each other.
  int rings = 0;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() != TASK_COLLECTIVE) continue;
      ++rings;
      ASSERT_EQ(t.boxing().ring_task_id_size(), 2);
      EXPECT_EQ(t.boxing().ring_task_id(t.boxing().ring_rank()), t.task_id());
      EXPECT_EQ(MachineOfTaskId(t.boxing().ring_task_id(0)), 0);
      EXPECT_EQ(MachineOfTaskId(t.boxing().ring_task_id(1)), 1);
      EXPECT_EQ(t.produced(0).cross_machine_strategy(), CM_STATIC_ZERO_COPY);
    }
  }
  EXPECT_EQ(rings, Count(s, TASK_COLLECTIVE));
  EXPECT_GE(rings, 2 * 4);
  for (const CrossMachineEdge& e : s.cross_machine_edges) {
    EXPECT_EQ(e.strategy, CM_STATIC_ZERO_COPY) << e.what;
  }
}

// Every task that waits, directly or through others, for one of `from`:
// every register edge, control registers included (they are waits too).
std::set<int64_t> Descendants(const Plan& plan, const std::set<int64_t>& from) {
  std::map<int64_t, std::vector<int64_t>> next;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      for (const RegstDescProto& r : t.produced()) {
        for (int64_t c : r.consumer_task_id()) next[t.task_id()].push_back(c);
      }
    }
  }
  std::set<int64_t> seen;
  std::vector<int64_t> stack(from.begin(), from.end());
  while (!stack.empty()) {
    const int64_t id = stack.back();
    stack.pop_back();
    for (int64_t c : next[id]) {
      if (seen.insert(c).second) stack.push_back(c);
    }
  }
  return seen;
}

// In a data-parallel plan the loss is the mean over every rank's samples, so
// it waits for all ranks' forwards (the per-sample losses are gathered). The
// backward must not wait for it: it starts from a constant seed as soon as
// the rank's own forward is done, and the ranks meet at the gradients'
// all-reduces instead of once more per step at the loss.
TEST(CompilerTest, DataParallelBackwardDoesNotWaitForTheLoss) {
  for (const auto& [placement, machines, cpus] :
       {std::make_tuple("0:cpu:0-1", 1, 2), std::make_tuple("0-1:cpu:0", 2, 1)}) {
    SCOPED_TRACE(placement);
    MlpSpec spec;
    spec.placement = placement;
    Plan plan = MustCompile(spec, MakeCluster(machines, cpus));
    std::set<int64_t> loss_tasks;
    std::map<int64_t, const TaskProto*> tasks;
    for (const MachinePlan& m : plan.machine()) {
      for (const TaskProto& t : m.task()) {
        tasks[t.task_id()] = &t;
        for (const KernelConf& k : t.kernel()) {
          if (k.op().op_type() == "reduce_mean" && !k.op().is_backward()) {
            loss_tasks.insert(t.task_id());
          }
        }
      }
    }
    ASSERT_EQ(loss_tasks.size(), 2u);
    // The mean reads the gathered per-sample losses: one wait across ranks.
    std::set<int64_t> communicating;
    for (const auto& [id, t] : tasks) {
      if (t->type() != TASK_COMPUTE && t->type() != TASK_VARIABLE && t->type() != TASK_SOURCE) {
        communicating.insert(id);
      }
    }
    const std::set<int64_t> after_communication = Descendants(plan, communicating);
    bool gathered = false;
    for (int64_t loss : loss_tasks) gathered = gathered || after_communication.count(loss) > 0;
    EXPECT_TRUE(gathered) << "the loss no longer reads other ranks' values: the test is moot";
    for (int64_t id : Descendants(plan, loss_tasks)) {
      for (const KernelConf& k : tasks.at(id)->kernel()) {
        EXPECT_FALSE(k.op().is_backward()) << tasks.at(id)->name() << " waits for the loss";
        EXPECT_EQ(k.op().op_type().find("_update"), std::string::npos)
            << tasks.at(id)->name() << " waits for the loss";
      }
    }
  }
}

// The algorithms recorded for a job's all-reduces, by tensor bytes.
std::map<int64_t, std::set<CollectiveAlgorithm>> AlgorithmsBySize(const Plan& plan) {
  std::map<int64_t, std::set<CollectiveAlgorithm>> by_size;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() == TASK_COLLECTIVE) {
        by_size[t.collective().buffer_bytes()].insert(t.collective().algorithm());
      }
    }
  }
  return by_size;
}

// Without a calibration, a cluster that states its links ranks the size
// rule's algorithms by the slowest link: on 4 machines the 64 KiB weight
// gradients take recursive doubling (twice the tensor sent per rank) on
// one box and at 10 Gbit/s, scatter-gather (1.5 times, more messages) at
// 1 Gbit/s; the 512-byte bias gradients keep doubling everywhere.
TEST(CompilerTest, StatedLinksRankTheSizeRulesAlgorithms) {
  MlpSpec spec;
  spec.features = 128;
  spec.hidden = {128};
  spec.classes = 128;
  spec.batch = 16;
  spec.placement = "0-3:cpu:0";
  CompileOptions unfused;
  unfused.fuse_max_bytes = 0;
  const int64_t weight = 128 * 128 * 4, bias = 128 * 4;
  auto with_links = [](double gbit) {
    ClusterProto cluster = MakeCluster(4, 1);
    for (MachineProto& m : *cluster.mutable_machine()) m.mutable_nic()->set_gbit_per_s(gbit);
    return cluster;
  };
  using Set = std::set<CollectiveAlgorithm>;
  const Set doubling = {COLLECTIVE_DOUBLING_ALL_REDUCE};
  auto box = AlgorithmsBySize(MustCompile(spec, MakeCluster(4, 1), unfused));
  EXPECT_EQ(box[weight], doubling);
  EXPECT_EQ(box[bias], doubling);
  auto fast = AlgorithmsBySize(MustCompile(spec, with_links(10), unfused));
  EXPECT_EQ(fast[weight], doubling);
  EXPECT_EQ(fast[bias], doubling);
  auto slow = AlgorithmsBySize(MustCompile(spec, with_links(1), unfused));
  EXPECT_EQ(slow[weight], Set{COLLECTIVE_SCATTER_GATHER_ALL_REDUCE});
  EXPECT_EQ(slow[bias], doubling);
  // The exchange bound 0 still means the ring, stated links or not.
  CompileOptions ring_only = unfused;
  ring_only.exchange_max_bytes = 0;
  auto ring = AlgorithmsBySize(MustCompile(spec, with_links(1), ring_only));
  EXPECT_EQ(ring[weight], Set{COLLECTIVE_RING_ALL_REDUCE});
  // A calibration's model, when given, decides instead.
  CompileOptions modelled = unfused;
  modelled.collective_time = [](CollectiveAlgorithm a, int64_t, int64_t) {
    return a == COLLECTIVE_RING_ALL_REDUCE ? 1.0 : 9.0;
  };
  auto chosen = AlgorithmsBySize(MustCompile(spec, with_links(1), modelled));
  EXPECT_EQ(chosen[weight], Set{COLLECTIVE_RING_ALL_REDUCE});
}

TEST(CompilerTest, DataParallelTwoMachinesTwoDevices) {
  MlpSpec spec;
  spec.placement = "0-1:cpu:0-1";
  Job job = *BuildMlpJob(spec);
  OpCounts ops = CountOps(job);
  Plan plan = MustCompile(spec, MakeCluster(2, 2));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_EQ(Count(s, TASK_COMPUTE), 4 * ops.compute);
  EXPECT_EQ(Count(s, TASK_SOURCE), 4);
  for (const std::string& update : ops.updates) {
    EXPECT_TRUE(HasBoxing(s, BOXING_ALL_REDUCE, GradientOf(job, update))) << update;
  }
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() == TASK_COLLECTIVE) {
        EXPECT_EQ(t.boxing().ring_task_id_size(), 4);
      }
    }
  }
  for (const MachineSummary& m : s.machines) {
    EXPECT_EQ(m.devices, (std::set<std::string>{"cpu:0", "cpu:1"}));
  }
}

TEST(CompilerTest, ModelParallelColumnSplit) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  spec.model_parallel = ModelParallel::kSplitColumns;
  Plan plan = MustCompile(spec, MakeCluster(1, 2));
  CheckConsistency(plan);
  EXPECT_EQ(SignatureOf(plan, "dense-matmul"), "B, S(1) -> S(1)");
  EXPECT_EQ(SignatureOf(plan, "w0"), " -> S(1)");
  EXPECT_EQ(SignatureOf(plan, "w0-update"), "S(1), S(1) -> ");
  // Each device holds half of the weight's columns.
  for (const TaskProto& t : plan.machine(0).task()) {
    if (t.op_name() != "w0") continue;
    const TensorDescProto& d = t.produced(0).blob(0).desc();
    EXPECT_EQ(d.shape().dim(0), spec.features);
    EXPECT_EQ(d.shape().dim(1), spec.hidden[0] / 2);
  }
  PlanSummary s = Summarize(plan);
  EXPECT_TRUE(HasBoxing(s, BOXING_ALL_GATHER, "random_batch/image_0"));
}

TEST(CompilerTest, ModelParallelRowSplit) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  spec.model_parallel = ModelParallel::kSplitRows;
  Plan plan = MustCompile(spec, MakeCluster(1, 2));
  CheckConsistency(plan);
  EXPECT_EQ(SignatureOf(plan, "dense-matmul"), "S(1), S(0) -> P");
  EXPECT_EQ(SignatureOf(plan, "w0-update"), "S(0), S(0) -> ");
  PlanSummary s = Summarize(plan);
  EXPECT_TRUE(HasBoxing(s, BOXING_ALL_TO_ALL, "random_batch/image_0"));
}

TEST(CompilerTest, MegatronMlpAllReducesActivationsNotWeights) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  spec.model_parallel = ModelParallel::kMegatron;
  Plan plan = MustCompile(spec, MakeCluster(1, 2));
  CheckConsistency(plan);
  EXPECT_EQ(SignatureOf(plan, "dense-matmul"), "B, S(1) -> S(1)");
  EXPECT_EQ(SignatureOf(plan, "dense_1-matmul"), "S(1), S(0) -> P");
  EXPECT_EQ(SignatureOf(plan, "w0-update"), "S(1), S(1) -> ");
  EXPECT_EQ(SignatureOf(plan, "w1-update"), "S(0), S(0) -> ");
  const Job job = *BuildMlpJob(spec);
  PlanSummary s = Summarize(plan);
  // The second layer's partial sums (after its bias, added once) are
  // reduced, to B or to the batch split the last layer then runs on;
  // neither split weight's gradient is (each device updates its half).
  EXPECT_TRUE(HasBoxing(s, BOXING_ALL_REDUCE, "dense_1-bias_add/out_0") ||
              HasBoxing(s, BOXING_REDUCE_SCATTER, "dense_1-bias_add/out_0"));
  // Every device reads the whole batch: nothing gathers the input.
  EXPECT_FALSE(HasBoxing(s, BOXING_ALL_GATHER, "random_batch/image_0"));
  for (const std::string update : {"w0-update", "w1-update"}) {
    ASSERT_FALSE(GradientOf(job, update).empty()) << update;
    EXPECT_FALSE(HasBoxing(s, BOXING_ALL_REDUCE, GradientOf(job, update))) << update;
  }
}

TEST(CompilerTest, MegatronMlpWantsAHiddenLayer) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  spec.hidden = {};
  spec.model_parallel = ModelParallel::kMegatron;
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("no hidden layer"), std::string::npos) << job.status();
}

// Registers crossing from one stage's device to the other's.
std::vector<const RegstDescProto*> StageBoundaryRegsts(const Plan& plan) {
  std::map<int64_t, const TaskProto*> tasks;
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) tasks[t.task_id()] = &t;
  }
  std::vector<const RegstDescProto*> out;
  for (const auto& [id, t] : tasks) {
    for (const RegstDescProto& r : t->produced()) {
      for (int64_t c : r.consumer_task_id()) {
        const TaskProto* consumer = tasks.at(c);
        if (consumer->machine_id() != t->machine_id() ||
            consumer->device_index() != t->device_index()) {
          if (!r.is_ctrl()) out.push_back(&r);
          break;
        }
      }
    }
  }
  return out;
}

TEST(CompilerTest, PipelineAcrossMachines) {
  MlpSpec spec;
  spec.stages = {"0:cpu:0", "1:cpu:0"};
  Plan plan = MustCompile(spec, MakeCluster(2, 1));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_TRUE(s.boxing.empty());
  // Forward activations and labels go 0 -> 1, a gradient and the loss 1 -> 0.
  std::set<std::pair<int64_t, int64_t>> routes;
  for (const CrossMachineEdge& e : s.cross_machine_edges) {
    routes.insert({e.src_machine, e.dst_machine});
    EXPECT_EQ(e.strategy, CM_STATIC_ZERO_COPY);
  }
  EXPECT_EQ(routes, (std::set<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(Count(s, TASK_COMMNET), static_cast<int>(s.cross_machine_edges.size()));
  EXPECT_GE(s.cross_machine_edges.size(), 3u);
  std::vector<const RegstDescProto*> boundary = StageBoundaryRegsts(plan);
  ASSERT_FALSE(boundary.empty());
  for (const RegstDescProto* r : boundary) EXPECT_GE(r->regst_num(), 2) << r->name();
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() != TASK_COMMNET) continue;
      EXPECT_GE(t.produced(0).regst_num(), 2);
      EXPECT_EQ(t.commnet().src_regst().regst_desc_id(), t.commnet().src_regst_desc_id());
      EXPECT_NE(t.commnet().src_machine_id(), t.machine_id());
    }
  }
}

TEST(CompilerTest, PipelineAcrossDevicesOfOneMachine) {
  MlpSpec spec;
  spec.hidden = {32, 24};
  spec.stages = {"0:cpu:0", "0:cpu:1", "0:cpu:1"};
  Plan plan = MustCompile(spec, MakeCluster(1, 2));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_TRUE(s.cross_machine_edges.empty());
  std::vector<const RegstDescProto*> boundary = StageBoundaryRegsts(plan);
  ASSERT_GE(boundary.size(), 2u);
  for (const RegstDescProto* r : boundary) {
    EXPECT_EQ(r->regst_num(), 2) << r->name();
    EXPECT_FALSE(r->memory_reused()) << r->name();
  }
}

TEST(CompilerTest, CudaPlacementAddsCopiesAndPinnedMemory) {
  MlpSpec spec;
  spec.placement = "0:cuda:0-1";
  Job job = *BuildMlpJob(spec);
  Plan plan = MustCompile(spec, MakeCluster(1, 1, 2));
  CheckConsistency(plan);
  PlanSummary s = Summarize(plan);
  EXPECT_GT(Count(s, TASK_COPY_H2D), 0);
  EXPECT_GT(Count(s, TASK_COPY_D2H), 0);
  std::set<std::string> zones;
  for (const ZoneMemory& z : s.machines[0].memory) zones.insert(ZoneName(z.zone));
  EXPECT_EQ(zones, (std::set<std::string>{"m0/pinned", "m0/cuda:0", "m0/cuda:1"}));
  for (const TaskProto& t : plan.machine(0).task()) {
    if (t.type() == TASK_COMPUTE || t.type() == TASK_VARIABLE) {
      EXPECT_EQ(t.device_type(), DEVICE_CUDA) << t.name();
      for (const RegstDescProto& r : t.produced()) {
        if (!r.is_ctrl()) {
          EXPECT_EQ(r.zone().type(), ZONE_DEVICE);
        }
      }
    }
    if (t.type() == TASK_COPY_D2H) {
      EXPECT_EQ(t.produced(0).zone().type(), ZONE_PINNED_HOST);
    }
    if (t.type() == TASK_SOURCE) {
      EXPECT_EQ(t.device_type(), DEVICE_CPU);
    }
  }
}

// A register that crosses streams of a GPU (the H2D copy's batch read by
// the compute stream, a loss read by the D2H copy) gets pipeline_depth
// copies: with one, the next batch's copy could only start once the
// compute stream's last reader of the batch (the first layer's weight
// gradient, at the end of the step) was seen done on the host, and the
// compute of the next step would wait for that copy: a bubble of two host
// round trips per step. Registers within one stream keep one copy.
// One task per op here: in a merged GPU compute task (graph_merge.h) the
// registers within the stream have no consumers left (graph_merge_test).
TEST(CompilerTest, RegistersCrossingGpuStreamsArePipelined) {
  for (const char* placement : {"0:cuda:0", "0:cuda:0-1"}) {
    MlpSpec spec;
    spec.placement = placement;
    CompileOptions one_task_per_op;
    one_task_per_op.merge_gpu_compute = false;
    const Plan plan = MustCompile(spec, MakeCluster(1, 1, 2), one_task_per_op);
    CheckConsistency(plan);
    std::map<int64_t, const TaskProto*> tasks;
    for (const TaskProto& t : plan.machine(0).task()) tasks[t.task_id()] = &t;
    int crossing = 0, within = 0;
    for (const TaskProto& t : plan.machine(0).task()) {
      for (const RegstDescProto& r : t.produced()) {
        if (r.is_persistent() || r.is_ctrl() || r.consumer_task_id_size() == 0) continue;
        bool crosses = false;
        for (int64_t c : r.consumer_task_id()) {
          const TaskProto& consumer = *tasks.at(c);
          crosses = crosses || consumer.device_type() != t.device_type() ||
                    consumer.device_index() != t.device_index() ||
                    consumer.stream_id() != t.stream_id();
        }
        if (crosses) {
          ++crossing;
          EXPECT_EQ(r.regst_num(), 2) << placement << ": " << t.name() << "/" << r.name();
        } else if (t.device_type() == DEVICE_CUDA && t.type() == TASK_COMPUTE) {
          ++within;
          EXPECT_EQ(r.regst_num(), 1) << placement << ": " << t.name() << "/" << r.name();
        }
      }
      if (t.type() == TASK_COPY_H2D) {
        EXPECT_EQ(t.produced(0).regst_num(), 2) << placement << ": " << t.name();
      }
    }
    EXPECT_GT(crossing, 0) << placement;
    EXPECT_GT(within, 0) << placement;
  }
}

TEST(CompilerTest, DeterministicPlans) {
  for (const char* placement : {"0:cpu:0", "0-1:cpu:0-1"}) {
    MlpSpec spec;
    spec.placement = placement;
    ClusterProto cluster = MakeCluster(2, 2);
    Plan a = MustCompile(spec, cluster);
    Plan b = MustCompile(spec, cluster);
    std::string bytes_a, bytes_b;
    {
      google::protobuf::io::StringOutputStream out(&bytes_a);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      a.SerializeToCodedStream(&coded);
    }
    {
      google::protobuf::io::StringOutputStream out(&bytes_b);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      b.SerializeToCodedStream(&coded);
    }
    EXPECT_FALSE(bytes_a.empty());
    EXPECT_EQ(bytes_a, bytes_b) << placement;
  }
}

TEST(CompilerTest, WithoutReuseEveryRegisterHasItsOwnBytes) {
  MlpSpec spec;
  spec.placement = "0:cpu:0-1";
  CompileOptions options;
  options.memory.enable_reuse = false;
  Plan plan = MustCompile(spec, MakeCluster(1, 2), options);
  CheckConsistency(plan);
  for (const MemBlockProto& b : plan.machine(0).mem_block()) {
    EXPECT_EQ(b.size(), b.bytes_without_reuse());
  }
}

TEST(CompilerTest, MemoryCheckerCatchesOverlaps) {
  Plan plan = MustCompile(MlpSpec(), MakeCluster(1, 1));
  ASSERT_TRUE(CheckMemoryPlan(plan).ok());
  // Put a register on top of the persistent weight it is computed from.
  Plan broken = plan;
  RegstDescProto* variable = nullptr;
  RegstDescProto* other = nullptr;
  for (TaskProto& t : *broken.mutable_machine(0)->mutable_task()) {
    for (RegstDescProto& r : *t.mutable_produced()) {
      if (r.is_persistent() && variable == nullptr) variable = &r;
      if (!r.is_persistent() && !r.is_ctrl() && other == nullptr && r.regst_num() == 1) other = &r;
    }
  }
  ASSERT_NE(variable, nullptr);
  ASSERT_NE(other, nullptr);
  other->set_mem_offset(0, variable->mem_offset(0));
  Status s = CheckMemoryPlan(broken);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("register " + std::to_string(other->regst_desc_id())),
            std::string::npos) << s;
  // Drop the control registers that make reuse safe.
  broken = plan;
  int dropped = 0;
  for (TaskProto& t : *broken.mutable_machine(0)->mutable_task()) {
    for (RegstDescProto& r : *t.mutable_produced()) {
      if (r.name() == "ctrl_mem") {
        r.clear_consumer_task_id();
        ++dropped;
      }
    }
  }
  ASSERT_GT(dropped, 0);
  s = CheckMemoryPlan(broken);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds the next iteration back"), std::string::npos) << s;
  // A copy past the end of its block.
  broken = plan;
  broken.mutable_machine(0)->mutable_mem_block(0)->set_size(256);
  EXPECT_FALSE(CheckMemoryPlan(broken).ok());
}

bool SameZone(const MemZoneId& a, const MemZoneId& b) {
  return a.machine_id() == b.machine_id() && a.type() == b.type() &&
         a.device_type() == b.device_type() && a.device_index() == b.device_index();
}

// The memory planner's control registers go only to the users of a reused
// register that nothing else holds back: dropping any one of them breaks
// the checker's proof, and a micro-batched plan gets fewer of them than the
// (earlier producer, later user) pairs they stand for.
TEST(CompilerTest, ReuseControlsAreFewAndEachIsNeeded) {
  struct Case {
    const char* what;
    MlpSpec spec;
    ClusterProto cluster;
  };
  std::vector<Case> cases;
  {
    MlpSpec spec;
    spec.hidden = {32, 32};
    spec.micro_batches = 4;
    cases.push_back({"one device, 4 micro-batches", spec, MakeCluster(1, 1)});
    spec.stages = {"0:cpu:0", "0:cpu:0", "1:cpu:0"};
    cases.push_back({"2 stages, 4 micro-batches", spec, MakeCluster(2, 1)});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Plan plan = MustCompile(c.spec, c.cluster);
    CheckConsistency(plan);
    ASSERT_TRUE(CheckMemoryPlan(plan).ok());
    // The pairs the controls stand for: for two registers sharing bytes,
    // the earlier one's producer and each user of the later one.
    std::set<std::pair<int64_t, int64_t>> held_pairs;
    int64_t edges = 0;
    for (const MachinePlan& m : plan.machine()) {
      std::vector<const RegstDescProto*> shared;
      for (const TaskProto& t : m.task()) {
        for (const RegstDescProto& r : t.produced()) {
          if (r.name() == "ctrl_mem") edges += r.consumer_task_id_size();
          if (r.bytes_per_regst() > 0 && r.mem_offset_size() == 1 && !r.is_persistent()) {
            shared.push_back(&r);
          }
        }
      }
      for (const RegstDescProto* x : shared) {
        for (const RegstDescProto* y : shared) {
          if (x == y || !(x->lifetime_begin() < y->lifetime_begin()) ||
              !SameZone(x->zone(), y->zone()) ||
              !(x->mem_offset(0) < y->mem_offset(0) + y->bytes_per_regst() &&
                y->mem_offset(0) < x->mem_offset(0) + x->bytes_per_regst())) {
            continue;
          }
          for (int64_t user : y->consumer_task_id()) {
            if (user != x->producer_task_id()) held_pairs.insert({x->producer_task_id(), user});
          }
        }
      }
    }
    ASSERT_GT(edges, 0);
    EXPECT_LT(edges, static_cast<int64_t>(held_pairs.size()));
    // Each control edge is needed.
    for (int mi = 0; mi < plan.machine_size(); ++mi) {
      for (int ti = 0; ti < plan.machine(mi).task_size(); ++ti) {
        for (int ri = 0; ri < plan.machine(mi).task(ti).produced_size(); ++ri) {
          const RegstDescProto& r = plan.machine(mi).task(ti).produced(ri);
          if (r.name() != "ctrl_mem") continue;
          for (int ci = 0; ci < r.consumer_task_id_size(); ++ci) {
            Plan broken = plan;
            RegstDescProto* b =
                broken.mutable_machine(mi)->mutable_task(ti)->mutable_produced(ri);
            b->mutable_consumer_task_id()->erase(b->mutable_consumer_task_id()->begin() + ci);
            if (b->consumer_sync_size() > ci) {
              b->mutable_consumer_sync()->erase(b->mutable_consumer_sync()->begin() + ci);
            }
            Status s = CheckMemoryPlan(broken);
            ASSERT_FALSE(s.ok()) << "control edge " << ci << " of register "
                                 << r.regst_desc_id() << " is not needed";
            EXPECT_NE(s.message().find("holds the next iteration back"), std::string::npos)
                << s;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
