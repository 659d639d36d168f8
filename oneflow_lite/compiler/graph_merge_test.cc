// The GPU compute merge (graph_merge.h): which plans are merged, what the
// merged task looks like, and which plans are left exactly as they were.
// Plans for cuda:N placements compile without a GPU.
#include "oneflow_lite/compiler/graph_merge.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/testing/test_jobs.h"

namespace oflite {
namespace compiler {
namespace {

Plan MustCompile(const StatusOr<Job>& job, const ClusterProto& cluster, bool merge) {
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return Plan();
  CompileOptions options;
  options.merge_gpu_compute = merge;
  StatusOr<Plan> plan = Compile(*job, cluster, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan();
}

std::string Bytes(const Plan& plan) {
  std::string bytes;
  google::protobuf::io::StringOutputStream out(&bytes);
  google::protobuf::io::CodedOutputStream coded(&out);
  coded.SetSerializationDeterministic(true);
  plan.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

bool OnComputeStream(const TaskProto& t, int64_t gpu) {
  return t.type() == TASK_COMPUTE && t.device_type() == DEVICE_CUDA && t.device_index() == gpu &&
         t.stream_id() == kComputeStream;
}

std::vector<const TaskProto*> ComputeTasks(const Plan& plan, int64_t gpu) {
  std::vector<const TaskProto*> tasks;
  for (const TaskProto& t : plan.machine(0).task()) {
    if (OnComputeStream(t, gpu)) tasks.push_back(&t);
  }
  return tasks;
}

int ReplayedTasks(const Plan& plan) {
  int n = 0;
  for (const TaskProto& t : plan.machine(0).task()) n += t.graph_replay() ? 1 : 0;
  return n;
}

bool IsMutableArg(const KernelConf& k, const std::string& arg) {
  for (const std::string& m : k.op().mutable_input()) {
    if (m == arg) return true;
  }
  return false;
}

// Every kernel reading a register precedes the kernel updating it in place.
void ExpectReadersBeforeUpdates(const TaskProto& task) {
  std::map<int64_t, int> update_at;  // register -> kernel position
  for (int i = 0; i < task.kernel_size(); ++i) {
    for (const BlobBinding& b : task.kernel(i).input()) {
      if (IsMutableArg(task.kernel(i), b.arg())) update_at[b.regst_desc_id()] = i;
    }
  }
  EXPECT_FALSE(update_at.empty()) << task.name() << ": no in-place update";
  for (int i = 0; i < task.kernel_size(); ++i) {
    for (const BlobBinding& b : task.kernel(i).input()) {
      auto it = update_at.find(b.regst_desc_id());
      if (it == update_at.end() || IsMutableArg(task.kernel(i), b.arg())) continue;
      EXPECT_LT(i, it->second) << task.kernel(i).op().name() << " reads register "
                               << b.regst_desc_id() << " after its update "
                               << task.kernel(it->second).op().name();
    }
  }
}

// `merged` has one replayed compute task on cuda:`gpu` holding the kernels
// of `unmerged`'s compute tasks there; returns it.
const TaskProto* ExpectMergedGpu(const Plan& merged, const Plan& unmerged, int64_t gpu,
                                 int merged_elsewhere = 0) {
  const std::vector<const TaskProto*> before = ComputeTasks(unmerged, gpu);
  const std::vector<const TaskProto*> after = ComputeTasks(merged, gpu);
  EXPECT_GE(before.size(), 2u);
  if (after.size() != 1) {
    ADD_FAILURE() << after.size() << " compute tasks on cuda:" << gpu;
    return nullptr;
  }
  const TaskProto& task = *after[0];
  int kernels = 0;
  for (const TaskProto* t : before) kernels += t->kernel_size();
  EXPECT_TRUE(task.graph_replay());
  EXPECT_EQ(task.kernel_size(), kernels);
  EXPECT_EQ(task.name(), "compute-graph@m0:cuda:" + std::to_string(gpu));
  EXPECT_EQ(task.op_name(), task.kernel(0).op().name());
  EXPECT_EQ(task.parallel_ctx().parallel_id(), before[0]->parallel_ctx().parallel_id());
  EXPECT_EQ(merged.machine(0).task_size(),
            unmerged.machine(0).task_size() - static_cast<int>(before.size()) + 1 -
                merged_elsewhere);
  // Consumed registers come from outside; produced ones go only outside.
  std::map<int64_t, const RegstDescProto*> regsts;
  for (const TaskProto& t : merged.machine(0).task()) {
    for (const RegstDescProto& r : t.produced()) regsts[r.regst_desc_id()] = &r;
  }
  std::set<int64_t> consumed;
  for (const ConsumedRegst& c : task.consumed()) {
    for (int64_t id : c.regst_desc_id()) {
      EXPECT_TRUE(consumed.insert(id).second) << "register " << id << " consumed twice";
      EXPECT_NE(regsts.at(id)->producer_task_id(), task.task_id()) << "register " << id;
    }
  }
  for (const RegstDescProto& r : task.produced()) {
    for (int64_t c : r.consumer_task_id()) EXPECT_NE(c, task.task_id()) << r.regst_desc_id();
    if (r.consumer_task_id_size() == 0) {
      EXPECT_EQ(r.regst_num(), 1) << r.regst_desc_id();
      EXPECT_FALSE(r.memory_reused()) << r.regst_desc_id();
    }
  }
  ExpectReadersBeforeUpdates(task);
  // Each variable it updates: it is the variable's only consumer and mutator.
  for (const TaskProto& t : merged.machine(0).task()) {
    if (t.type() != TASK_VARIABLE || t.device_index() != gpu) continue;
    const RegstDescProto& r = t.produced(0);
    if (r.mutator_task_id_size() == 0) continue;
    EXPECT_EQ(std::vector<int64_t>(r.consumer_task_id().begin(), r.consumer_task_id().end()),
              std::vector<int64_t>{task.task_id()})
        << t.name();
    EXPECT_EQ(std::vector<int64_t>(r.mutator_task_id().begin(), r.mutator_task_id().end()),
              std::vector<int64_t>{task.task_id()})
        << t.name();
  }
  Status memory = CheckMemoryPlan(merged);
  EXPECT_TRUE(memory.ok()) << memory;
  return &task;
}

TEST(GraphMergeTest, MlpOnOneGpuBecomesOneReplayedTask) {
  for (MlpOptimizer optimizer : {MlpOptimizer::kSgd, MlpOptimizer::kMomentum}) {
    MlpSpec spec;
    spec.placement = "0:cuda:0";
    spec.optimizer = optimizer;
    const ClusterProto cluster = MakeCluster(1, 1, 1);
    const Plan merged = MustCompile(BuildMlpJob(spec), cluster, true);
    const Plan unmerged = MustCompile(BuildMlpJob(spec), cluster, false);
    const TaskProto* task = ExpectMergedGpu(merged, unmerged, 0);
    ASSERT_NE(task, nullptr);
    EXPECT_EQ(ReplayedTasks(merged), 1);
    EXPECT_TRUE(merged.graph_capturable());
    EXPECT_EQ(merged.graph_note(),
              "cuda:0: one captured task, " + std::to_string(task->kernel_size()) + " ops");
    // Deterministic like every pass.
    EXPECT_EQ(Bytes(merged), Bytes(MustCompile(BuildMlpJob(spec), cluster, true)));
  }
}

TEST(GraphMergeTest, LeNetOnOneGpuBecomesOneReplayedTask) {
  const ClusterProto cluster = MakeCluster(1, 1, 1);
  const Plan merged = MustCompile(BuildLeNetJob("0:cuda:0"), cluster, true);
  const Plan unmerged = MustCompile(BuildLeNetJob("0:cuda:0"), cluster, false);
  ASSERT_NE(ExpectMergedGpu(merged, unmerged, 0), nullptr);
  EXPECT_EQ(ReplayedTasks(merged), 1);
}

const MemBlockProto* DeviceBlock(const Plan& plan, int64_t gpu) {
  for (const MemBlockProto& b : plan.machine(0).mem_block()) {
    if (b.zone().type() == ZONE_DEVICE && b.zone().device_index() == gpu) return &b;
  }
  return nullptr;
}

// The memory cost of the merge (docs/compiler.md): the memory planner
// reuses bytes only between registers whose users strictly precede the
// later producer, and inside one task nothing does, so the GPU's block is
// every register side by side.
TEST(GraphMergeTest, MergedGpuRegistersShareNoMemory) {
  const ClusterProto cluster = MakeCluster(1, 1, 1);
  MlpSpec mlp;
  mlp.placement = "0:cuda:0";
  struct Case {
    const char* name;
    StatusOr<Job> job;
  };
  for (const Case& c : {Case{"mlp", BuildMlpJob(mlp)}, Case{"lenet5", BuildLeNetJob("0:cuda:0")}}) {
    const Plan merged_plan = MustCompile(c.job, cluster, true);
    const Plan unmerged_plan = MustCompile(c.job, cluster, false);
    const MemBlockProto* merged = DeviceBlock(merged_plan, 0);
    const MemBlockProto* unmerged = DeviceBlock(unmerged_plan, 0);
    ASSERT_TRUE(merged != nullptr && unmerged != nullptr) << c.name;
    EXPECT_EQ(merged->size(), merged->bytes_without_reuse()) << c.name;
    EXPECT_EQ(merged->bytes_without_reuse(), unmerged->bytes_without_reuse()) << c.name;
    EXPECT_GE(merged->size(), unmerged->size()) << c.name;
    std::printf("%s cuda:0 block: %lld bytes merged, %lld one task per op, %lld without reuse\n",
                c.name, static_cast<long long>(merged->size()),
                static_cast<long long>(unmerged->size()),
                static_cast<long long>(unmerged->bytes_without_reuse()));
  }
}

// merge_gpu_compute = false: one task per op, no note on a capturable plan.
TEST(GraphMergeTest, TurnedOffKeepsOneTaskPerOp) {
  MlpSpec spec;
  spec.placement = "0:cuda:0";
  StatusOr<Job> job = BuildMlpJob(spec);
  ASSERT_TRUE(job.ok());
  const Plan plan = MustCompile(job, MakeCluster(1, 1, 1), false);
  EXPECT_EQ(ReplayedTasks(plan), 0);
  EXPECT_TRUE(plan.graph_capturable());
  EXPECT_EQ(plan.graph_note(), "");
  int compute_ops = 0;
  for (const OpConf& op : job->op()) {
    compute_ops += op.op_type() != "variable" && op.op_type() != "random_batch" ? 1 : 0;
  }
  EXPECT_EQ(static_cast<int>(ComputeTasks(plan, 0).size()), compute_ops);
}

// Plans the pass must not touch are byte-identical with it on and off.
TEST(GraphMergeTest, CpuAndNonCapturablePlansAreUnchanged) {
  MlpSpec cpu;
  MlpSpec adam;
  adam.placement = "0:cuda:0";
  adam.optimizer = MlpOptimizer::kAdam;
  for (const MlpSpec& spec : {cpu, adam}) {
    const ClusterProto cluster = MakeCluster(1, 1, 1);
    const Plan on = MustCompile(BuildMlpJob(spec), cluster, true);
    const Plan off = MustCompile(BuildMlpJob(spec), cluster, false);
    EXPECT_EQ(Bytes(on), Bytes(off)) << spec.placement;
    EXPECT_EQ(ReplayedTasks(on), 0);
    EXPECT_FALSE(on.graph_capturable()) << spec.placement;
  }
  const Plan adam_plan = MustCompile(BuildMlpJob(adam), MakeCluster(1, 1, 1), true);
  EXPECT_NE(adam_plan.graph_note().find("(adam_update) computes a launch argument"),
            std::string::npos)
      << adam_plan.graph_note();
}

// The replayed tasks of cuda:`gpu`, in plan (task id) order.
std::vector<const TaskProto*> ReplayedOn(const Plan& plan, int64_t gpu) {
  std::vector<const TaskProto*> tasks;
  for (const TaskProto* t : ComputeTasks(plan, gpu)) {
    if (t->graph_replay()) tasks.push_back(t);
  }
  return tasks;
}

int KernelCount(const std::vector<const TaskProto*>& tasks) {
  int n = 0;
  for (const TaskProto* t : tasks) n += t->kernel_size();
  return n;
}

bool IsUpdate(const KernelConf& k) {
  const std::string& type = k.op().op_type();
  return type.size() > 7 && type.compare(type.size() - 7, 7, "_update") == 0;
}

// Data parallel over two GPUs: the gradients leave for the host all-reduce
// and come back to the updates, so each GPU merges per level: forward with
// backward (0: the loss's seed is a constant, so the backward does not wait
// for the per-example losses gathered through the host), then the updates
// and the loss's mean over the gathered losses (1). One task for all would
// wait for itself.
TEST(GraphMergeTest, DataParallelGpusMergeEachLevelApart) {
  MlpSpec spec;
  spec.placement = "0:cuda:0-1";
  spec.optimizer = MlpOptimizer::kMomentum;
  const ClusterProto cluster = MakeCluster(1, 1, 2);
  const Plan on = MustCompile(BuildMlpJob(spec), cluster, true);
  const Plan off = MustCompile(BuildMlpJob(spec), cluster, false);
  EXPECT_TRUE(on.graph_capturable());
  int replayed = 0;
  for (int64_t gpu : {0, 1}) {
    const std::string device = "@m0:cuda:" + std::to_string(gpu);
    const std::vector<const TaskProto*> tasks = ReplayedOn(on, gpu);
    ASSERT_EQ(tasks.size(), 2u) << "cuda:" << gpu << ": " << on.graph_note();
    replayed += static_cast<int>(tasks.size());
    EXPECT_EQ(ComputeTasks(on, gpu).size(), tasks.size()) << "cuda:" << gpu;
    EXPECT_EQ(KernelCount(tasks), KernelCount(ComputeTasks(off, gpu))) << "cuda:" << gpu;
    std::map<std::string, const TaskProto*> by_name;
    for (const TaskProto* t : tasks) by_name[t->name()] = t;
    ASSERT_EQ(by_name.count("compute-graph" + device), 1u);
    ASSERT_EQ(by_name.count("compute-graph-1" + device), 1u);
    const TaskProto& passes = *by_name["compute-graph" + device];
    const TaskProto& updates = *by_name["compute-graph-1" + device];
    int backward = 0;
    bool cross_entropy = false;
    for (const KernelConf& k : passes.kernel()) {
      EXPECT_FALSE(IsUpdate(k)) << k.op().name();
      EXPECT_FALSE(k.op().op_type() == "reduce_mean" && !k.op().is_backward()) << k.op().name();
      backward += k.op().is_backward() ? 1 : 0;
      cross_entropy = cross_entropy || k.op().op_type() == "sparse_softmax_cross_entropy";
    }
    EXPECT_TRUE(cross_entropy);
    EXPECT_GT(backward, 0);
    int update_kernels = 0;
    for (const KernelConf& k : updates.kernel()) {
      if (IsUpdate(k)) {
        ++update_kernels;
      } else {
        EXPECT_EQ(k.op().op_type(), "reduce_mean") << k.op().name();
        EXPECT_FALSE(k.op().is_backward()) << k.op().name();
      }
    }
    EXPECT_EQ(update_kernels, 4);
    ExpectReadersBeforeUpdates(updates);
  }
  EXPECT_EQ(ReplayedTasks(on), replayed);
  const std::string& note = on.graph_note();
  EXPECT_EQ(note.find("cuda:0: 2 captured tasks, "), 0u) << note;
  EXPECT_NE(note.find("; cuda:1: 2 captured tasks, "), std::string::npos) << note;
  Status memory = CheckMemoryPlan(on);
  EXPECT_TRUE(memory.ok()) << memory;
}

// A pipeline over two GPUs: cuda:0's backward comes back after cuda:1, so
// cuda:0 merges its forward and, apart, its backward and updates; cuda:1
// (forward, loss, backward, update) is one task.
TEST(GraphMergeTest, PipelineMergesEachStageByLevel) {
  MlpSpec spec;
  spec.stages = {"0:cuda:0", "0:cuda:1"};
  const ClusterProto cluster = MakeCluster(1, 1, 2);
  const Plan merged = MustCompile(BuildMlpJob(spec), cluster, true);
  const Plan unmerged = MustCompile(BuildMlpJob(spec), cluster, false);
  const std::vector<const TaskProto*> first = ReplayedOn(merged, 0);
  ASSERT_EQ(first.size(), 2u) << merged.graph_note();
  EXPECT_EQ(KernelCount(first), KernelCount(ComputeTasks(unmerged, 0)));
  const int merged_on_first =
      static_cast<int>(ComputeTasks(unmerged, 0).size() - ComputeTasks(merged, 0).size());
  const TaskProto* task = ExpectMergedGpu(merged, unmerged, 1, merged_on_first);
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(ReplayedTasks(merged), 3);
  const std::string& note = merged.graph_note();
  EXPECT_EQ(note.find("cuda:0: 2 captured tasks, "), 0u) << note;
  EXPECT_NE(note.find("; cuda:1: one captured task, " + std::to_string(task->kernel_size()) +
                      " ops"),
            std::string::npos)
      << note;
  Status memory = CheckMemoryPlan(merged);
  EXPECT_TRUE(memory.ok()) << memory;
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
