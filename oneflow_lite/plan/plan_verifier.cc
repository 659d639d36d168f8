#include "oneflow_lite/plan/plan_verifier.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "oneflow_lite/common/edge_sync.h"
#include "oneflow_lite/ops/graph_capture.h"
#include "oneflow_lite/plan/plan_index.h"

namespace oflite {
namespace plan_internal {

std::string TaskLabel(const TaskProto& task) {
  StatusOr<TaskIdParts> parts = DecodeTaskId(task.task_id());
  const std::string id =
      parts.ok() ? TaskIdToString(task.task_id()) : "id " + std::to_string(task.task_id());
  return "task '" + task.name() + "' (" + id + ")";
}

int64_t CheckedByteSize(const TensorDescProto& desc, std::string* problem) {
  if (!DataType_IsValid(desc.dtype()) || desc.dtype() == DT_INVALID) {
    *problem = "dtype " + std::to_string(desc.dtype()) + " is not a data type";
    return -1;
  }
  if (desc.shape().dim_size() > kMaxBlobRank) {
    *problem = "rank " + std::to_string(desc.shape().dim_size()) + " exceeds " +
               std::to_string(kMaxBlobRank);
    return -1;
  }
  int64_t bytes = SizeOf(desc.dtype());
  for (int64_t dim : desc.shape().dim()) {
    if (dim < 0) {
      *problem = "negative dimension " + std::to_string(dim);
      return -1;
    }
    if (__builtin_mul_overflow(bytes, dim, &bytes)) {
      *problem = "shape " + Shape(desc.shape()).ToString() + " overflows int64 bytes";
      return -1;
    }
  }
  return bytes;
}

}  // namespace plan_internal

namespace {

using plan_internal::CheckedAdd;
using plan_internal::CheckedByteSize;
using plan_internal::PlanIndex;
using plan_internal::RegstEntry;
using plan_internal::TaskError;

// (type, device type, device index) as the runtime keys its blocks
// (MemoryZones::KeyOf): host zones ignore the device fields.
using ZoneKey = std::tuple<int, int, int64_t>;
ZoneKey KeyOf(const MemZoneId& zone) {
  const bool device = zone.type() == ZONE_DEVICE;
  return ZoneKey{zone.type(), device ? zone.device_type() : 0, device ? zone.device_index() : 0};
}

std::string ZoneName(const MemZoneId& zone) {
  std::string name = "m" + std::to_string(zone.machine_id()) + "/";
  if (zone.type() == ZONE_HOST) return name + "host";
  if (zone.type() == ZONE_PINNED_HOST) return name + "pinned_host";
  return name + (zone.device_type() == DEVICE_CUDA ? "cuda:" : "cpu:") +
         std::to_string(zone.device_index());
}

// The cluster's facts the checks need; an empty cluster (hand-built plans)
// only bounds machine ids by the plan's own machine count.
class ClusterView {
 public:
  explicit ClusterView(const Plan& plan) : plan_(plan) {}

  int64_t machines() const {
    return plan_.cluster().machine_size() > 0 ? plan_.cluster().machine_size()
                                              : plan_.machine_size();
  }
  // Empty when `device_index` of `type` exists on `machine`.
  std::string CheckDevice(int64_t machine, int type, int64_t device_index) const {
    if (type != DEVICE_CPU && type != DEVICE_CUDA) {
      return "device type " + std::to_string(type) + " is not CPU or CUDA";
    }
    if (device_index < 0) return "negative device index " + std::to_string(device_index);
    if (plan_.cluster().machine_size() == 0) return "";
    const MachineProto& m = plan_.cluster().machine(static_cast<int>(machine));
    // Every machine has host threads (cpu:0), even with cpu_devices 0.
    const int64_t count = type == DEVICE_CPU ? std::max(1, m.cpu_devices()) : m.cuda_devices();
    if (device_index >= count) {
      return std::string(type == DEVICE_CPU ? "cpu" : "cuda") + ":" + std::to_string(device_index) +
             " does not exist on machine " + std::to_string(machine) + " of the cluster (" +
             std::to_string(count) + " devices)";
    }
    return "";
  }

 private:
  const Plan& plan_;
};

Status CheckCluster(const Plan& plan) {
  for (int i = 0; i < plan.cluster().machine_size(); ++i) {
    const MachineProto& m = plan.cluster().machine(i);
    if (m.id() != i) {
      return InvalidArgumentError("cluster.machine[", i, "]: id ", m.id(), " (must be ", i, ")");
    }
    if (m.cpu_devices() < 0 || m.cuda_devices() < 0) {
      return InvalidArgumentError("cluster.machine[", i, "]: negative device count");
    }
    if (m.cpu_threads() < 0 || m.cpu_threads() > 1024) {
      return InvalidArgumentError("cluster.machine[", i, "]: cpu_threads ", m.cpu_threads(),
                                  " out of range (0: automatic, or 1..1024)");
    }
  }
  if (plan.total_iters() < 0) {
    return InvalidArgumentError("plan: total_iters ", plan.total_iters(), " is negative");
  }
  std::set<int64_t> seen;
  const ClusterView cluster(plan);
  for (int i = 0; i < plan.machine_size(); ++i) {
    const int64_t id = plan.machine(i).machine_id();
    if (id < 0 || id >= cluster.machines()) {
      return InvalidArgumentError("machine[", i, "]: machine_id ", id, " outside the cluster's ",
                                  cluster.machines(), " machines");
    }
    if (!seen.insert(id).second) {
      return InvalidArgumentError("machine[", i, "]: machine_id ", id, " appears twice");
    }
  }
  return Status::OK();
}

// The task's own fields against its id, its machine and the cluster.
Status CheckTaskHeader(const TaskProto& task, int64_t machine, const ClusterView& cluster,
                       const PlanVerifierOptions& options) {
  StatusOr<TaskIdParts> parts = DecodeTaskId(task.task_id());
  if (!parts.ok()) return TaskError(task, "task_id", parts.status().message());
  if (!TaskType_IsValid(task.type()) || task.type() == TASK_INVALID) {
    return TaskError(task, "type", "task type ", static_cast<int>(task.type()), " is not valid");
  }
  if (task.machine_id() != machine || parts->stream.machine != machine) {
    return TaskError(task, "machine_id", "the task is listed under machine ", machine,
                     " but says machine ", task.machine_id(), " (id: machine ",
                     parts->stream.machine, ")");
  }
  const bool device_differs =
      parts->stream.device_type != task.device_type() && !options.allow_device_type_other_than_id;
  if (device_differs || parts->stream.device_index != task.device_index()) {
    return TaskError(task, "device_type/device_index", "the fields disagree with the task id");
  }
  const std::string device = cluster.CheckDevice(machine, task.device_type(), task.device_index());
  if (!device.empty()) return TaskError(task, "device_index", device);
  const ParallelContext& ctx = task.parallel_ctx();
  if (ctx.parallel_num() < 0 || ctx.parallel_num() > kMaxParallelNum || ctx.parallel_id() < 0 ||
      ctx.parallel_id() >= std::max<int64_t>(1, ctx.parallel_num())) {
    return TaskError(task, "parallel_ctx", "parallel_id ", ctx.parallel_id(), " of ",
                     ctx.parallel_num());
  }
  // Only a compute task's act is captured and replayed (docs/gpu.md).
  if (task.graph_replay() && task.type() != TASK_COMPUTE) {
    return TaskError(task, "graph_replay", "set on a ", TaskType_Name(task.type()),
                     " task; only a TASK_COMPUTE task is replayed");
  }
  // A replay repeats the captured launch arguments (ops/graph_capture.h).
  for (const KernelConf& kernel : task.kernel()) {
    if (task.graph_replay() && LaunchArgumentsFollowTheIteration(kernel.op())) {
      return TaskError(task, "graph_replay", "set on a task with op '", kernel.op().name(),
                       "' (", kernel.op().op_type(),
                       "), whose launch arguments follow the iteration: a replay would repeat "
                       "the captured iteration's");
    }
  }
  return Status::OK();
}

Status BuildIndex(const Plan& plan, const PlanVerifierOptions& options, PlanIndex* index) {
  const ClusterView cluster(plan);
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      RETURN_IF_ERROR(CheckTaskHeader(task, machine.machine_id(), cluster, options));
      auto [it, fresh] = index->tasks.emplace(task.task_id(), &task);
      if (!fresh) {
        return TaskError(task, "task_id", "id ", task.task_id(), " is also the id of ",
                         plan_internal::TaskLabel(*it->second));
      }
      for (int k = 0; k < task.produced_size(); ++k) {
        const RegstDescProto& desc = task.produced(k);
        auto [at, added] = index->regsts.emplace(desc.regst_desc_id(), RegstEntry{&desc, &task});
        if (!added) {
          return TaskError(task, "produced[" + std::to_string(k) + "].regst_desc_id", "register ",
                           desc.regst_desc_id(), " is also produced by ",
                           plan_internal::TaskLabel(*at->second.producer));
        }
      }
    }
  }
  return Status::OK();
}

using ZoneSizes = std::map<ZoneKey, int64_t>;

Status CheckMemBlocks(const MachinePlan& machine, const ClusterView& cluster, ZoneSizes* sizes) {
  for (int i = 0; i < machine.mem_block_size(); ++i) {
    const MemBlockProto& block = machine.mem_block(i);
    const std::string where = "machine " + std::to_string(machine.machine_id()) + " mem_block[" +
                              std::to_string(i) + "] (" + ZoneName(block.zone()) + ")";
    const MemZoneId& zone = block.zone();
    if (!MemZoneType_IsValid(zone.type()) || zone.machine_id() != machine.machine_id()) {
      return InvalidArgumentError(where, ": zone is not a zone of this machine");
    }
    if (zone.type() == ZONE_DEVICE) {
      const std::string device =
          cluster.CheckDevice(machine.machine_id(), zone.device_type(), zone.device_index());
      if (!device.empty()) return InvalidArgumentError(where, ": zone: ", device);
    }
    if (block.size() < 0 || block.size() > kMaxZoneBytes) {
      return InvalidArgumentError(where, ": size ", block.size(), " outside [0, ", kMaxZoneBytes,
                                  "]");
    }
    if (!sizes->emplace(KeyOf(zone), block.size()).second) {
      return InvalidArgumentError(where, ": a second block for the same zone");
    }
  }
  return Status::OK();
}

Status CheckBlobs(const TaskProto& task, const RegstDescProto& desc, const std::string& field) {
  for (int b = 0; b < desc.blob_size(); ++b) {
    const BlobInRegst& blob = desc.blob(b);
    const std::string blob_field = field + ".blob[" + std::to_string(b) + "]";
    std::string problem;
    const int64_t need = CheckedByteSize(blob.desc(), &problem);
    if (need < 0) return TaskError(task, blob_field + ".desc", problem);
    int64_t end = 0;
    if (blob.offset() < 0 || blob.bytes() < need ||
        !CheckedAdd(blob.offset(), blob.bytes(), &end) || end > desc.bytes_per_regst()) {
      return TaskError(task, blob_field, "body [", blob.offset(), ", +", blob.bytes(), ") for ",
                       need, " bytes of ", Shape(blob.desc().shape()).ToString(),
                       " does not fit the register's ", desc.bytes_per_regst(), " bytes");
    }
  }
  return Status::OK();
}

// One produced register: counts, blobs inside it, copies inside its zone.
Status CheckRegst(const TaskProto& task, int k, const ZoneSizes& zones) {
  const RegstDescProto& desc = task.produced(k);
  const std::string field = "produced[" + std::to_string(k) + "] (register " +
                            std::to_string(desc.regst_desc_id()) + " '" + desc.name() + "')";
  if (desc.producer_task_id() != task.task_id()) {
    return TaskError(task, field + ".producer_task_id", "says ",
                     TaskIdToString(desc.producer_task_id()), ", not this task");
  }
  if (desc.regst_num() < 1 || desc.regst_num() > kMaxRegstNum) {
    return TaskError(task, field + ".regst_num", desc.regst_num(), " outside [1, ", kMaxRegstNum,
                     "]");
  }
  if ((desc.is_persistent() || desc.is_ctrl()) && desc.regst_num() != 1) {
    return TaskError(task, field + ".regst_num", desc.regst_num(),
                     " (persistent and control registers have exactly 1)");
  }
  if (desc.bytes_per_regst() < 0 || desc.bytes_per_regst() > kMaxZoneBytes) {
    return TaskError(task, field + ".bytes_per_regst", desc.bytes_per_regst(), " out of range");
  }
  if (desc.is_ctrl() && (desc.blob_size() > 0 || desc.bytes_per_regst() > 0)) {
    return TaskError(task, field, "a control register has blobs or bytes");
  }
  RETURN_IF_ERROR(CheckBlobs(task, desc, field));
  if (desc.bytes_per_regst() == 0) return Status::OK();
  if (desc.zone().machine_id() != task.machine_id() || !MemZoneType_IsValid(desc.zone().type())) {
    return TaskError(task, field + ".zone", ZoneName(desc.zone()), " is not on machine ",
                     task.machine_id());
  }
  auto zone = zones.find(KeyOf(desc.zone()));
  if (zone == zones.end()) {
    return TaskError(task, field + ".zone", ZoneName(desc.zone()), " has no mem_block");
  }
  if (desc.mem_offset_size() != desc.regst_num()) {
    return TaskError(task, field + ".mem_offset", desc.mem_offset_size(), " offsets for regst_num ",
                     desc.regst_num());
  }
  for (int i = 0; i < desc.mem_offset_size(); ++i) {
    int64_t end = 0;
    const int64_t offset = desc.mem_offset(i);
    if (offset < 0 || !CheckedAdd(offset, desc.bytes_per_regst(), &end) || end > zone->second) {
      return TaskError(task, field + ".mem_offset[" + std::to_string(i) + "]", "copy [", offset,
                       ", +", desc.bytes_per_regst(), ") outside zone ", ZoneName(desc.zone()),
                       " of ", zone->second, " bytes");
    }
    // Kernels access elements directly: every body starts at a multiple of
    // its element size (zone blocks themselves are aligned to 64 bytes).
    for (int b = 0; b < desc.blob_size(); ++b) {
      const int64_t element = SizeOf(desc.blob(b).desc().dtype());
      if ((offset + desc.blob(b).offset()) % element != 0) {
        return TaskError(task, field + ".blob[" + std::to_string(b) + "].offset",
                         "body at byte ", offset + desc.blob(b).offset(), " of its zone is not "
                         "aligned to its ", element, "-byte elements");
      }
    }
  }
  return Status::OK();
}

// consumer_sync is empty (an old plan) or one entry per consumer, and an
// edge is EDGE_STREAM_ORDER only where the stream-order rule allows it
// (common/edge_sync.h): skipping the event elsewhere would let a consumer
// read a register before its producer's work finished.
Status CheckConsumerSync(const TaskProto& task, const RegstDescProto& desc,
                         const std::string& field, const PlanIndex& index) {
  if (desc.consumer_sync_size() == 0) return Status::OK();
  if (desc.consumer_sync_size() != desc.consumer_task_id_size()) {
    return TaskError(task, field + ".consumer_sync", desc.consumer_sync_size(),
                     " entries for ", desc.consumer_task_id_size(), " consumers");
  }
  for (int k = 0; k < desc.consumer_sync_size(); ++k) {
    const EdgeSync sync = desc.consumer_sync(k);
    const TaskProto* consumer = index.FindTask(desc.consumer_task_id(k));
    if (sync != EDGE_STREAM_ORDER && sync != EDGE_EVENT) {
      return TaskError(task, field + ".consumer_sync[" + std::to_string(k) + "]",
                       "unknown or unset value ", static_cast<int>(sync));
    }
    if (sync != EDGE_STREAM_ORDER || consumer == nullptr) continue;
    if (RequiredEdgeSync(task.task_id(), task.type(), consumer->task_id(), consumer->type()) !=
        EDGE_STREAM_ORDER) {
      return TaskError(task, field + ".consumer_sync[" + std::to_string(k) + "]",
                       "EDGE_STREAM_ORDER to ", plan_internal::TaskLabel(*consumer),
                       ", but the edge crosses a stream, a device or the host (it needs "
                       "EDGE_EVENT)");
    }
  }
  return Status::OK();
}

// Consumers and producers agree: every consumer lists the register in its
// `consumed`, every consumed register lists the task as a consumer, and
// only CommNet tasks consume registers of another machine.
Status CheckConsumers(const TaskProto& task, const PlanIndex& index) {
  for (int k = 0; k < task.produced_size(); ++k) {
    const RegstDescProto& desc = task.produced(k);
    const std::string field = "produced[" + std::to_string(k) + "] (register " +
                              std::to_string(desc.regst_desc_id()) + ")";
    std::set<int64_t> consumers;
    for (int64_t consumer_id : desc.consumer_task_id()) {
      const TaskProto* consumer = index.FindTask(consumer_id);
      if (consumer == nullptr) {
        return TaskError(task, field + ".consumer_task_id", "no task ", TaskIdToString(consumer_id),
                         " in the plan");
      }
      if (!consumers.insert(consumer_id).second) {
        return TaskError(task, field + ".consumer_task_id", TaskIdToString(consumer_id),
                         " listed twice");
      }
      bool listed = false;
      for (const ConsumedRegst& consumed : consumer->consumed()) {
        for (int64_t id : consumed.regst_desc_id()) listed = listed || id == desc.regst_desc_id();
      }
      if (!listed) {
        return TaskError(task, field + ".consumer_task_id", plan_internal::TaskLabel(*consumer),
                         " does not consume the register");
      }
    }
    for (int64_t mutator : desc.mutator_task_id()) {
      if (!consumers.count(mutator)) {
        return TaskError(task, field + ".mutator_task_id", TaskIdToString(mutator),
                         " is not a consumer of the register");
      }
    }
  }
  std::set<int64_t> seen;
  for (int c = 0; c < task.consumed_size(); ++c) {
    const ConsumedRegst& consumed = task.consumed(c);
    const std::string field = "consumed[" + std::to_string(c) + "] ('" + consumed.name() + "')";
    for (int64_t id : consumed.regst_desc_id()) {
      const RegstEntry* regst = index.FindRegst(id);
      if (regst == nullptr) return TaskError(task, field, "no register ", id, " in the plan");
      if (!seen.insert(id).second)
        return TaskError(task, field, "register ", id, " consumed twice");
      const auto& consumers = regst->desc->consumer_task_id();
      if (std::find(consumers.begin(), consumers.end(), task.task_id()) == consumers.end()) {
        return TaskError(task, field, "register ", id, " of ",
                         plan_internal::TaskLabel(*regst->producer),
                         " does not list this task as a consumer");
      }
      if (regst->producer->machine_id() != task.machine_id() && task.type() != TASK_COMMNET) {
        return TaskError(task, field, "register ", id, " lives on machine ",
                         regst->producer->machine_id(), "; only CommNet tasks read other machines");
      }
    }
  }
  return Status::OK();
}

// Register copies of one zone may share bytes only when both registers are
// marked memory_reused (the compiler ordered them); otherwise they must not
// overlap, and the copies of one register never overlap each other.
Status CheckOverlaps(const MachinePlan& machine) {
  struct Span {
    int64_t begin, end;
    const TaskProto* task;
    const RegstDescProto* desc;
  };
  std::map<ZoneKey, std::vector<Span>> spans;
  for (const TaskProto& task : machine.task()) {
    for (const RegstDescProto& desc : task.produced()) {
      if (desc.bytes_per_regst() == 0) continue;
      for (int64_t offset : desc.mem_offset()) {
        spans[KeyOf(desc.zone())].push_back(
            Span{offset, offset + desc.bytes_per_regst(), &task, &desc});
      }
    }
  }
  for (auto& [zone, list] : spans) {
    std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    // Sweep keeping the span reaching furthest; any later span starting
    // before its end overlaps it.
    const Span* reach = nullptr;
    for (const Span& span : list) {
      if (reach != nullptr && span.begin < reach->end) {
        const bool shared =
            span.desc != reach->desc && span.desc->memory_reused() && reach->desc->memory_reused();
        if (!shared) {
          return TaskError(
              *span.task, "register " + std::to_string(span.desc->regst_desc_id()) + ".mem_offset",
              "[", span.begin, ", ", span.end, ") overlaps register ", reach->desc->regst_desc_id(),
              " of ", plan_internal::TaskLabel(*reach->task), " [", reach->begin, ", ", reach->end,
              ") without memory_reused on both");
        }
      }
      if (reach == nullptr || span.end > reach->end) reach = &span;
    }
  }
  return Status::OK();
}

Status VerifyPlanAt(const Plan& plan, const PlanVerifierOptions& options, bool nested);

// The run settings and the evaluation plan a training plan carries: the
// evaluation plan is verified like any plan, before the training starts, so
// a damaged one is refused up front rather than after training.
Status CheckRunSettingsAndEvalPlan(const Plan& plan, const PlanVerifierOptions& options,
                                   bool nested) {
  if (plan.samples_per_iter() < 0) {
    return InvalidArgumentError("plan: samples_per_iter ", plan.samples_per_iter(),
                                " is negative");
  }
  const bool has_eval = plan.has_eval_plan();
  if (nested && (has_eval || plan.eval_state() != EVAL_NOT_COMPILED)) {
    return InvalidArgumentError("eval_plan: an evaluation plan carries no evaluation plan");
  }
  if (has_eval != (plan.eval_state() == EVAL_COMPILED)) {
    return InvalidArgumentError("plan.eval_state: ", EvalPlanState_Name(plan.eval_state()),
                                has_eval ? " but the plan carries an evaluation plan"
                                         : " but the plan carries no evaluation plan");
  }
  if (!has_eval) return Status::OK();
  if (plan.eval_plan().machine_size() != plan.machine_size()) {
    return InvalidArgumentError("eval_plan: ", plan.eval_plan().machine_size(),
                                " machine(s), the training plan ", plan.machine_size());
  }
  Status eval = VerifyPlanAt(plan.eval_plan(), options, /*nested=*/true);
  return eval.ok() ? eval : eval.WithContext("evaluation plan (eval_plan)");
}

Status VerifyPlanAt(const Plan& plan, const PlanVerifierOptions& options, bool nested) {
  RETURN_IF_ERROR(CheckCluster(plan));
  RETURN_IF_ERROR(CheckRunSettingsAndEvalPlan(plan, options, nested));
  PlanIndex index;
  RETURN_IF_ERROR(BuildIndex(plan, options, &index));
  const ClusterView cluster(plan);
  for (const MachinePlan& machine : plan.machine()) {
    ZoneSizes zones;
    RETURN_IF_ERROR(CheckMemBlocks(machine, cluster, &zones));
    for (const TaskProto& task : machine.task()) {
      for (int k = 0; k < task.produced_size(); ++k) RETURN_IF_ERROR(CheckRegst(task, k, zones));
    }
  }
  for (const MachinePlan& machine : plan.machine()) {
    RETURN_IF_ERROR(CheckOverlaps(machine));
    for (const TaskProto& task : machine.task()) {
      RETURN_IF_ERROR(CheckConsumers(task, index));
      RETURN_IF_ERROR(plan_internal::CheckKernels(task, index));
      RETURN_IF_ERROR(plan_internal::CheckTaskKind(task, index));
    }
  }
  // Last: the edges it checks are known to be consistent by now.
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      for (int k = 0; k < task.produced_size(); ++k) {
        const RegstDescProto& desc = task.produced(k);
        RETURN_IF_ERROR(CheckConsumerSync(task, desc,
                                          "produced[" + std::to_string(k) + "] (register " +
                                              std::to_string(desc.regst_desc_id()) + ")",
                                          index));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status VerifyPlan(const Plan& plan, const PlanVerifierOptions& options) {
  return VerifyPlanAt(plan, options, /*nested=*/false);
}

}  // namespace oflite
