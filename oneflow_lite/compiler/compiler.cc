#include "oneflow_lite/compiler/compiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/edge_sync.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/common/version.h"
#include "oneflow_lite/compiler/clip_norm.h"
#include "oneflow_lite/compiler/collective_choice.h"
#include "oneflow_lite/compiler/fusion.h"
#include "oneflow_lite/compiler/gradient_buckets.h"
#include "oneflow_lite/compiler/graph_merge.h"
#include "oneflow_lite/compiler/logical_graph.h"
#include "oneflow_lite/compiler/pipeline_schedule.h"
#include "oneflow_lite/compiler/placement.h"
#include "oneflow_lite/cost/calibration.h"

namespace oflite {
namespace compiler {
namespace {

// Global examples per iteration, for progress lines: the job's batch size,
// else the batch of its data source (0 when neither says).
int64_t SamplesPerIteration(const Job& job) {
  if (job.conf().batch_size() > 0) return job.conf().batch_size();
  for (const OpConf& op : job.op()) {
    AttrView attrs(op);
    if (op.op_type() == "fashion_mnist") return attrs.GetIntOr("batch_size", 0);
    if (op.op_type() == "random_batch") {
      StatusOr<Shape> shape = attrs.GetShape("shape");
      if (shape.ok() && shape->rank() > 0) return shape->dim(0);
    }
  }
  return 0;
}

class Emitter {
 public:
  Emitter(const TaskGraph& g, const std::vector<MemBlockProto>& blocks, int64_t machine_count,
          int64_t exchange_max_bytes, CollectiveTimeFn collective_time)
      : g_(g),
        blocks_(blocks),
        machine_count_(machine_count),
        exchange_max_bytes_(exchange_max_bytes),
        collective_time_(std::move(collective_time)) {}

  Status Emit(const Job& job, const ClusterProto& cluster, const LogicalGraph& logical,
              Plan* plan) {
    RETURN_IF_ERROR(AssignIds());
    plan->set_version(kPlanVersion);
    *plan->mutable_job() = job;
    plan->mutable_job()->set_version(kJobVersion);
    plan->mutable_job()->clear_blob();
    for (const auto& [lbn, info] : logical.blobs()) {
      LogicalBlobDesc* b = plan->mutable_job()->add_blob();
      b->set_lbn(lbn);
      *b->mutable_desc() = info.desc.ToProto();
    }
    *plan->mutable_cluster() = cluster;
    plan->set_total_iters(job.conf().total_iters());
    plan->set_seed(job.conf().seed());
    plan->set_samples_per_iter(SamplesPerIteration(job));
    plan->set_is_train(job.conf().is_train());
    RETURN_IF_ERROR(EmitVariables(logical, plan));
    std::vector<RegstDescProto> regsts;
    for (const RegstNode& r : g_.regsts) regsts.push_back(ToProto(r));
    std::map<int64_t, std::vector<TaskProto>> by_machine;
    for (const TaskNode& t : g_.tasks) by_machine[t.device.machine].push_back(ToProto(t, regsts));
    for (const MachineProto& m : cluster.machine()) {
      MachinePlan* mp = plan->add_machine();
      mp->set_machine_id(m.id());
      std::vector<TaskProto>& tasks = by_machine[m.id()];
      std::sort(tasks.begin(), tasks.end(),
                [](const TaskProto& a, const TaskProto& b) { return a.task_id() < b.task_id(); });
      for (TaskProto& t : tasks) *mp->add_task() = std::move(t);
      for (const MemBlockProto& b : blocks_) {
        if (b.zone().machine_id() == m.id()) *mp->add_mem_block() = b;
      }
    }
    return Status::OK();
  }

 private:
  // Plan.variable: the logical desc of every variable a task owns.
  Status EmitVariables(const LogicalGraph& logical, Plan* plan) const {
    std::map<std::string, TensorDescProto> variables;
    for (const TaskNode& t : g_.tasks) {
      if (t.type != TASK_VARIABLE || t.kernels.empty()) continue;
      const std::string& name = t.kernels[0].op().name();
      auto it = logical.blobs().find(name + "/out_0");
      if (it == logical.blobs().end()) {
        return InternalError("variable '", name, "': no logical blob '", name, "/out_0'");
      }
      variables[name] = it->second.desc.ToProto();
    }
    for (const auto& [name, desc] : variables) {
      VariableDesc* v = plan->add_variable();
      v->set_name(name);
      *v->mutable_desc() = desc;
    }
    return Status::OK();
  }

  Status AssignIds() {
    std::map<std::tuple<int64_t, int, int64_t, int>, int64_t> next;
    for (const TaskNode& t : g_.tasks) {
      int64_t& index = next[{t.device.machine, t.device.type, t.device.index, t.stream}];
      TaskIdParts parts;
      parts.stream.machine = t.device.machine;
      parts.stream.device_type = t.device.type;
      parts.stream.device_index = static_cast<int32_t>(t.device.index);
      parts.stream.stream = t.stream;
      parts.task_index = index++;
      StatusOr<int64_t> id = EncodeTaskId(parts);
      if (!id.ok()) return id.status().WithContext("task '" + t.name + "'");
      ids_.push_back(*id);
      type_of_id_[*id] = t.type;
    }
    return Status::OK();
  }

  std::vector<int64_t> SortedIds(const std::vector<int>& tasks) const {
    std::vector<int64_t> ids;
    for (int t : tasks) ids.push_back(ids_[t]);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  RegstDescProto ToProto(const RegstNode& r) const {
    RegstDescProto p;
    p.set_regst_desc_id(r.id);
    p.set_name(r.name);
    p.set_producer_task_id(ids_[r.producer]);
    for (int64_t id : SortedIds(r.consumers)) {
      p.add_consumer_task_id(id);
      p.add_consumer_sync(RequiredEdgeSync(ids_[r.producer], g_.tasks[r.producer].type, id,
                                           type_of_id_.at(id)));
    }
    for (int64_t id : SortedIds(r.mutators)) p.add_mutator_task_id(id);
    p.set_regst_num(r.regst_num);
    *p.mutable_zone() = r.zone;
    for (const BlobInRegst& b : r.blobs) *p.add_blob() = b;
    p.set_bytes_per_regst(r.bytes_per_regst);
    for (int64_t offset : r.mem_offset) p.add_mem_offset(offset);
    p.set_is_persistent(r.is_persistent);
    p.set_is_dynamic(r.is_dynamic);
    p.set_cross_machine_strategy(r.cross_machine_strategy);
    p.set_lifetime_begin(r.lifetime_begin);
    p.set_lifetime_end(r.lifetime_end);
    p.set_is_ctrl(r.is_ctrl);
    p.set_memory_reused(r.memory_reused);
    return p;
  }

  TaskProto ToProto(const TaskNode& t, const std::vector<RegstDescProto>& regsts) const {
    TaskProto p;
    p.set_task_id(ids_[t.index]);
    p.set_name(t.name);
    p.set_type(t.type);
    p.set_machine_id(t.device.machine);
    p.set_device_type(t.device.type);
    p.set_device_index(t.device.index);
    p.set_stream_id(t.stream);
    p.mutable_parallel_ctx()->set_parallel_id(t.parallel_id);
    p.mutable_parallel_ctx()->set_parallel_num(t.parallel_num);
    for (int64_t h : t.hierarchy) p.mutable_parallel_ctx()->mutable_hierarchy()->add_dim(h);
    for (const KernelConf& k : t.kernels) *p.add_kernel() = k;
    for (int r : t.produced) *p.add_produced() = regsts[r];
    for (const auto& [name, ids] : t.consumed) {
      ConsumedRegst* c = p.add_consumed();
      c->set_name(name);
      for (int id : ids) c->add_regst_desc_id(id);
    }
    if (t.type == TASK_BOXING || t.type == TASK_COLLECTIVE) {
      *p.mutable_boxing() = t.boxing;
      for (int ring : t.ring_tasks) p.mutable_boxing()->add_ring_task_id(ids_[ring]);
    }
    if (t.type == TASK_COLLECTIVE) {
      *p.mutable_collective() =
          ChooseCollective(p.boxing(), machine_count_, exchange_max_bytes_, collective_time_);
      for (const CollectiveMember& m : t.bucket) *p.mutable_collective()->add_member() = m;
    }
    if (t.type == TASK_COMMNET) {
      const RegstNode& src = g_.regsts[t.commnet_src_regst];
      CommNetConf* c = p.mutable_commnet();
      c->set_src_machine_id(g_.tasks[src.producer].device.machine);
      c->set_src_task_id(ids_[src.producer]);
      c->set_src_regst_desc_id(src.id);
      *c->mutable_src_regst() = regsts[src.id];
    }
    if (t.type == TASK_SINK) *p.mutable_sink() = t.sink;
    p.set_topo_order(t.topo_order);
    p.set_op_name(t.op_name);
    p.set_graph_replay(t.graph_replay);
    return p;
  }

  const TaskGraph& g_;
  const std::vector<MemBlockProto>& blocks_;
  const int64_t machine_count_;  // of the cluster: a ring must span them all
  const int64_t exchange_max_bytes_;
  const CollectiveTimeFn collective_time_;
  std::vector<int64_t> ids_;  // task index -> task id
  std::map<int64_t, TaskType> type_of_id_;
};

StatusOr<Plan> CompileJob(const Job& job, const ClusterProto& cluster,
                          const CompileOptions& options);

}  // namespace

StatusOr<Plan> Compile(const Job& job, const ClusterProto& cluster, const CompileOptions& options) {
  if (job.version() > kJobVersion) {
    return FailedPreconditionError("job '", job.conf().name(), "' has format version ",
                                   job.version(), ", newer than this compiler's ", kJobVersion);
  }
  const Job* input = &job;
  ClipNormResult clip;
  if (options.split_clip_norms) {
    ASSIGN_OR_RETURN(clip, SplitClipNorms(job));
    if (clip.clips > 0) input = &clip.job;
  }
  FusionResult fusion;
  const bool fuse = options.fuse || options.fuse_matmul_bias;
  if (fuse) {
    FusionOptions fusion_options;
    fusion_options.bias_add_relu = options.fuse;
    fusion_options.gelu_derivative = options.fuse;
    fusion_options.matmul_bias = options.fuse_matmul_bias;
    fusion = FuseOps(*input, fusion_options);
    input = &fusion.job;
  }
  if (!input->conf().has_pipeline()) return CompileJob(*input, cluster, options);
  // A micro-batched job: its pipeline schedule as control edges
  // (pipeline_schedule.h), recorded in Plan.pipeline.
  Job scheduled = *input;
  ASSIGN_OR_RETURN(PipelinePlan pipeline, SchedulePipeline(&scheduled));
  ASSIGN_OR_RETURN(Plan plan, CompileJob(scheduled, cluster, options));
  *plan.mutable_pipeline() = std::move(pipeline);
  return plan;
}

namespace {

// Compile after fusion.
StatusOr<Plan> CompileJob(const Job& job, const ClusterProto& cluster,
                          const CompileOptions& options) {
  ASSIGN_OR_RETURN(LogicalGraph logical, LogicalGraph::Build(job, cluster));
  ASSIGN_OR_RETURN(std::vector<OpSbp> sbp, DeduceSbp(logical, options.weights));
  ASSIGN_OR_RETURN(TaskGraph tasks, BuildTaskGraph(logical, sbp, job, cluster, options.tasks));
  RETURN_IF_ERROR(
      FuseAllReduceBuckets(&tasks, options.fuse_max_bytes, cluster.machine_size()).status());
  // Plan.graph_capturable / graph_note (docs/gpu.md, "Graph replay"): one
  // verdict for the merge and the flag. The merge changes no task kind,
  // kernel, register kind or machine, so the verdict holds after it.
  const std::string blocker = GraphCaptureBlocker(tasks, cluster);
  std::string graph_note = blocker;
  if (blocker.empty() && options.merge_gpu_compute) {
    ASSIGN_OR_RETURN(GraphMergeResult merge, MergeGpuComputeTasks(&tasks));
    graph_note = merge.note;
  }
  ASSIGN_OR_RETURN(std::vector<MemBlockProto> blocks, PlanMemory(&tasks, options.memory));
  Plan plan;
  // The caller's model (a calibration's curves) decides; without one, a
  // cluster that states its links weighs the size rule's pick on the
  // slowest of them (StatedLinkCollectiveUs).
  CollectiveTimeFn collective_time = options.collective_time;
  std::string collective_note;
  if (collective_time) {
    collective_note =
        options.collective_source.empty() ? "a cost model" : options.collective_source;
  } else if (options.exchange_max_bytes <= 0) {
    collective_note = "the ring (exchange bound 0)";
  } else if (const LinkSpec slowest = cost::SlowestLink(cluster); slowest.gbit_per_s() > 0) {
    const int64_t bound = options.exchange_max_bytes;
    collective_time = [slowest, bound](CollectiveAlgorithm a, int64_t n, int64_t bytes) {
      return cost::StatedLinkCollectiveUs(slowest, bound, a, static_cast<int>(n), bytes);
    };
    char link[64];
    std::snprintf(link, sizeof(link), "%.4g Gbit/s, %.4g us", slowest.gbit_per_s(),
                  slowest.latency_us());
    collective_note =
        std::string("the size rule, weighed on the cluster's slowest stated link (") + link + ")";
  } else {
    collective_note = "the size rule (no calibration, no stated link rate)";
  }
  Emitter emitter(tasks, blocks, cluster.machine_size(), options.exchange_max_bytes,
                  collective_time);
  RETURN_IF_ERROR(emitter.Emit(job, cluster, logical, &plan));
  plan.set_graph_capturable(blocker.empty());
  plan.set_graph_note(graph_note);
  // Only plans with a ring-family collective across machines have a choice
  // to tell of.
  for (const MachinePlan& m : plan.machine()) {
    for (const TaskProto& t : m.task()) {
      if (t.type() == TASK_COLLECTIVE && t.collective().algorithm() != COLLECTIVE_ALL_TO_ALL) {
        plan.set_collective_note(collective_note);
        return plan;
      }
    }
  }
  return plan;
}

}  // namespace

StatusOr<ClusterProto> LoadCluster(const std::string& path) {
  ClusterProto cluster;
  RETURN_IF_ERROR(ReadTextProto(path, &cluster));
  Status s = ValidateCluster(cluster);
  if (!s.ok()) return s.WithContext(path);
  return cluster;
}

}  // namespace compiler
}  // namespace oflite
