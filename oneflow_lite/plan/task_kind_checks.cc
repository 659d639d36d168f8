// What the actor of each task kind trusts beyond registers and kernels (see
// plan_index.h): copy, boxing, CommNet, collective, sink and variable tasks.
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/plan/plan_index.h"
#include "oneflow_lite/plan/plan_verifier.h"

namespace oflite {
namespace plan_internal {
namespace {

std::vector<const RegstDescProto*> DataOutputs(const TaskProto& task) {
  std::vector<const RegstDescProto*> data;
  for (const RegstDescProto& desc : task.produced()) {
    if (!desc.is_ctrl()) data.push_back(&desc);
  }
  return data;
}

const ConsumedRegst* FindConsumed(const TaskProto& task, const std::string& name) {
  for (const ConsumedRegst& consumed : task.consumed()) {
    if (consumed.name() == name) return &consumed;
  }
  return nullptr;
}

bool ConsumesRegst(const TaskProto& task, int64_t regst_desc_id) {
  for (const ConsumedRegst& consumed : task.consumed()) {
    for (int64_t id : consumed.regst_desc_id()) {
      if (id == regst_desc_id) return true;
    }
  }
  return false;
}

bool SameBlobs(const RegstDescProto& a, const RegstDescProto& b) {
  if (a.blob_size() != b.blob_size()) return false;
  for (int i = 0; i < a.blob_size(); ++i) {
    if (TensorDesc(a.blob(i).desc()) != TensorDesc(b.blob(i).desc())) return false;
  }
  return true;
}

// Copy tasks: one consumed 'in', one produced data register, same blobs.
Status CheckCopy(const TaskProto& task, const PlanIndex& index) {
  const ConsumedRegst* in = FindConsumed(task, "in");
  const std::vector<const RegstDescProto*> outputs = DataOutputs(task);
  if (in == nullptr || in->regst_desc_id_size() != 1 || outputs.size() != 1) {
    return TaskError(task, "consumed/produced",
                     "a copy task consumes one register 'in' and "
                     "produces one data register");
  }
  if (!SameBlobs(*index.FindRegst(in->regst_desc_id(0))->desc, *outputs[0])) {
    return TaskError(task, "produced", "the copy's output blobs differ from its input's");
  }
  return Status::OK();
}

const SbpParallel* FirstSbp(const NdSbp& sbp) { return sbp.sbp_size() > 0 ? &sbp.sbp(0) : nullptr; }

// A boxing part: a register with a blob of the logical dtype (the actor
// copies elements of that dtype; it checks part shapes itself, per act).
Status CheckBoxingPart(const TaskProto& task, const std::string& field, const RegstDescProto& desc,
                       DataType dtype, int64_t* bytes) {
  if (desc.blob_size() < 1) {
    return TaskError(task, field, "register ", desc.regst_desc_id(), " has no blob");
  }
  if (desc.blob(0).desc().dtype() != dtype) {
    return TaskError(task, field, "register ", desc.regst_desc_id(), " holds ",
                     DataTypeName(desc.blob(0).desc().dtype()), ", the logical blob ",
                     DataTypeName(dtype));
  }
  std::string problem;
  *bytes = CheckedByteSize(desc.blob(0).desc(), &problem);
  return Status::OK();  // the register checks validated the blob already
}

// Local boxing: logical desc, SBPs, part ids and dtypes agree, and the
// logical blob (the actor's whole-tensor buffer) is no larger than its parts
// together, so the actor's buffer and slab copies stay in bounds.
Status CheckBoxing(const TaskProto& task, const PlanIndex& index) {
  const BoxingConf& conf = task.boxing();
  std::string problem;
  if (CheckedByteSize(conf.logical_desc(), &problem) < 0) {
    return TaskError(task, "boxing.logical_desc", problem);
  }
  const TensorDesc logical(conf.logical_desc());
  std::vector<int64_t> inputs(conf.in_regst_desc_id().begin(), conf.in_regst_desc_id().end());
  if (inputs.empty()) {
    for (const ConsumedRegst& c : task.consumed()) {
      inputs.insert(inputs.end(), c.regst_desc_id().begin(), c.regst_desc_id().end());
    }
  }
  const int64_t parts = conf.parallel_num() > 0 ? conf.parallel_num() : inputs.size();
  if (parts < 1 || parts > kMaxParallelNum) {
    return TaskError(task, "boxing.parallel_num", parts, " outside [1, ", kMaxParallelNum, "]");
  }
  for (const SbpParallel* sbp : {FirstSbp(conf.in_sbp()), FirstSbp(conf.out_sbp())}) {
    if (sbp != nullptr && sbp->has_split_axis() &&
        (sbp->split_axis() < 0 || sbp->split_axis() >= logical.shape.rank())) {
      return TaskError(task, "boxing.in_sbp/out_sbp", "split axis ", sbp->split_axis(), " outside ",
                       logical.ToString());
    }
  }
  if (conf.in_parallel_id_size() > 0 && conf.in_parallel_id_size() != (int)inputs.size()) {
    return TaskError(task, "boxing.in_parallel_id", conf.in_parallel_id_size(), " ids for ",
                     inputs.size(), " inputs");
  }
  int64_t parts_bytes = 0;  // all inputs together
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string field = "boxing.in_regst_desc_id[" + std::to_string(k) + "]";
    const RegstEntry* regst = index.FindRegst(inputs[k]);
    if (regst == nullptr || !ConsumesRegst(task, inputs[k])) {
      return TaskError(task, field, "register ", inputs[k], " is not consumed by the task");
    }
    const int64_t part = conf.in_parallel_id_size() > 0 ? conf.in_parallel_id(k) : k;
    if (part < 0 || part >= parts) {
      return TaskError(task, "boxing.in_parallel_id", part, " outside ", parts, " parts");
    }
    int64_t bytes = 0;
    RETURN_IF_ERROR(CheckBoxingPart(task, field, *regst->desc, logical.dtype, &bytes));
    if (!CheckedAdd(parts_bytes, bytes, &parts_bytes)) parts_bytes = kMaxZoneBytes;
  }
  const std::vector<const RegstDescProto*> outputs = DataOutputs(task);
  if (inputs.empty() || outputs.size() != 1) {
    return TaskError(task, "produced", "boxing needs inputs and exactly one data register");
  }
  if (conf.out_parallel_id() < 0 || conf.out_parallel_id() >= parts) {
    return TaskError(task, "boxing.out_parallel_id", conf.out_parallel_id(), " outside ", parts,
                     " parts");
  }
  int64_t out_bytes = 0;
  RETURN_IF_ERROR(
      CheckBoxingPart(task, "produced (boxing output)", *outputs[0], logical.dtype, &out_bytes));
  if (logical.ByteSize() > std::max(parts_bytes, out_bytes)) {
    return TaskError(task, "boxing.logical_desc", logical.ToString(), " is larger than its parts (",
                     parts_bytes, " bytes in, ", out_bytes, " out)");
  }
  return Status::OK();
}

// CommNet tasks: the remote register named by the conf exists on the named
// machine, is what the task consumes, and its copy in the conf is exact.
Status CheckCommNet(const TaskProto& task, const PlanIndex& index) {
  const CommNetConf& conf = task.commnet();
  const RegstEntry* src = index.FindRegst(conf.src_regst_desc_id());
  if (src == nullptr || src->producer->task_id() != conf.src_task_id() ||
      src->producer->machine_id() != conf.src_machine_id()) {
    return TaskError(task, "commnet.src_regst_desc_id", "register ", conf.src_regst_desc_id(),
                     " is not produced by ", TaskIdToString(conf.src_task_id()), " on machine ",
                     conf.src_machine_id());
  }
  const ConsumedRegst* in = FindConsumed(task, "in");
  if (in == nullptr || in->regst_desc_id_size() != 1 ||
      in->regst_desc_id(0) != conf.src_regst_desc_id()) {
    return TaskError(task, "consumed",
                     "a CommNet task consumes exactly its source register as "
                     "'in'");
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(conf.src_regst(), *src->desc)) {
    return TaskError(task, "commnet.src_regst", "differs from register ", conf.src_regst_desc_id(),
                     " as its producer declares it");
  }
  const std::vector<const RegstDescProto*> outputs = DataOutputs(task);
  if (src->desc->blob_size() > 0 && (outputs.size() != 1 || !SameBlobs(*src->desc, *outputs[0]))) {
    return TaskError(task, "produced", "the CommNet task's output blobs differ from its source's");
  }
  return Status::OK();
}

// A bucket member's part (`field`): consumed by the task, one blob of the
// member's desc.
Status CheckMemberPart(const TaskProto& task, const PlanIndex& index, const std::string& field,
                       int64_t regst_desc_id, const TensorDesc& desc) {
  const RegstEntry* part = index.FindRegst(regst_desc_id);
  if (part == nullptr || !ConsumesRegst(task, regst_desc_id)) {
    return TaskError(task, field, "register ", regst_desc_id, " is not consumed by the task");
  }
  if (part->desc->blob_size() != 1 || TensorDesc(part->desc->blob(0).desc()) != desc) {
    return TaskError(task, field, "register ", regst_desc_id, " does not hold one blob of ",
                     desc.ToString());
  }
  return Status::OK();
}

// A bucket member's output (`field`): a data register the task produces,
// one blob of the member's desc, named by no other member.
Status CheckMemberOutput(const TaskProto& task, const std::string& field, int64_t regst_desc_id,
                         const TensorDesc& desc, std::set<int64_t>* seen) {
  for (const RegstDescProto* out : DataOutputs(task)) {
    if (out->regst_desc_id() != regst_desc_id) continue;
    if (!seen->insert(regst_desc_id).second) {
      return TaskError(task, field, "register ", regst_desc_id, " is another member's output");
    }
    if (out->blob_size() != 1 || TensorDesc(out->blob(0).desc()) != desc) {
      return TaskError(task, field, "register ", regst_desc_id, " does not hold one blob of ",
                       desc.ToString());
    }
    return Status::OK();
  }
  return TaskError(task, field, "register ", regst_desc_id, " is not a data register of the task");
}

// The members of a bucket: each a static tensor of the bucket's dtype,
// packed without gaps in order, its part and output in place.
Status CheckBucketMembers(const TaskProto& task, const PlanIndex& index) {
  const BoxingConf& conf = task.boxing();
  const TensorDesc logical(conf.logical_desc());
  int64_t offset = 0;
  std::set<int64_t> outputs;
  for (int m = 0; m < task.collective().member_size(); ++m) {
    const CollectiveMember& member = task.collective().member(m);
    const std::string field = "collective.member[" + std::to_string(m) + "]";
    std::string problem;
    if (CheckedByteSize(member.logical_desc(), &problem) < 0) {
      return TaskError(task, field + ".logical_desc", problem);
    }
    const TensorDesc desc(member.logical_desc());
    if (desc.dtype != logical.dtype || desc.is_dynamic || desc.shape.elem_count() < 1) {
      return TaskError(task, field + ".logical_desc", desc.ToString(), " (", member.lbn(),
                       ") is not a static tensor of the bucket's ", DataTypeName(logical.dtype));
    }
    if (member.element_offset() != offset) {
      return TaskError(task, field + ".element_offset", member.element_offset(),
                       ", but the members before it end at element ", offset);
    }
    if (!CheckedAdd(offset, desc.shape.elem_count(), &offset)) offset = -1;
    if (member.in_regst_desc_id() != conf.in_regst_desc_id(m)) {
      return TaskError(task, field + ".in_regst_desc_id", member.in_regst_desc_id(),
                       ", but boxing.in_regst_desc_id[", m, "] is ", conf.in_regst_desc_id(m));
    }
    // The member's own conversion: P -> B (unset), P -> S(a) or S(a) -> B,
    // on flat rings only; its part and output are this ring rank's ranges.
    const SbpParallel& in_sbp = member.in_sbp();
    const SbpParallel& out_sbp = member.out_sbp();
    const bool gathers = in_sbp.has_split_axis();
    const bool scatters = out_sbp.has_split_axis();
    const int64_t axis = gathers ? in_sbp.split_axis() : scatters ? out_sbp.split_axis() : 0;
    const bool plain = !member.has_in_sbp() && !member.has_out_sbp();
    if (!plain &&
        (conf.hierarchy().dim_size() > 0 || in_sbp.has_broadcast() || out_sbp.has_partial_sum() ||
         (gathers && scatters) || (gathers && member.has_out_sbp() && !out_sbp.has_broadcast()) ||
         ((gathers || scatters) && (axis < 0 || axis >= desc.shape.rank())))) {
      return TaskError(task, field + ".in_sbp", in_sbp.ShortDebugString(), " -> ",
                       out_sbp.ShortDebugString(), " of ", desc.ToString(),
                       ": a bucket member converts P -> B, or on a flat ring P -> S(a) or "
                       "S(a) -> B");
    }
    const int64_t n = conf.ring_task_id_size();
    const TensorDesc part =
        gathers ? TensorDesc(BalancedPartShape(desc.shape, axis, n, conf.ring_rank()), desc.dtype)
                : desc;
    const TensorDesc output =
        scatters ? TensorDesc(BalancedPartShape(desc.shape, axis, n, conf.ring_rank()), desc.dtype)
                 : desc;
    RETURN_IF_ERROR(
        CheckMemberPart(task, index, field + ".in_regst_desc_id", member.in_regst_desc_id(), part));
    RETURN_IF_ERROR(CheckMemberOutput(task, field + ".out_regst_desc_id",
                                      member.out_regst_desc_id(), output, &outputs));
  }
  if (offset != logical.shape.elem_count()) {
    return TaskError(task, "boxing.logical_desc", logical.ToString(), " for members of ", offset,
                     " elements together");
  }
  return Status::OK();
}

// A fused bucket (CollectiveConf.member): a P -> B all-reduce of 2 or more
// members over a 1-D logical tensor (each member P -> B, or P -> S / S -> B
// run as that all-reduce); every ring task fuses the same members.
Status CheckBucket(const TaskProto& task, const PlanIndex& index) {
  const BoxingConf& conf = task.boxing();
  const CollectiveConf& collective = task.collective();
  const int members = collective.member_size();
  const SbpParallel* in = FirstSbp(conf.in_sbp());
  const SbpParallel* out = FirstSbp(conf.out_sbp());
  if (members < 2 || conf.kind() != BOXING_ALL_REDUCE || in == nullptr || !in->has_partial_sum() ||
      out == nullptr || !out->has_broadcast()) {
    return TaskError(task, "collective.member", "a bucket fuses 2 or more P -> B all-reduces, not ",
                     members, " of ", BoxingKind_Name(conf.kind()));
  }
  if (collective.algorithm() != COLLECTIVE_RING_ALL_REDUCE &&
      collective.algorithm() != COLLECTIVE_EXCHANGE_ALL_REDUCE &&
      collective.algorithm() != COLLECTIVE_DOUBLING_ALL_REDUCE &&
      collective.algorithm() != COLLECTIVE_SCATTER_GATHER_ALL_REDUCE) {
    return TaskError(task, "collective.algorithm", "a bucket runs an all-reduce, not ",
                     CollectiveAlgorithm_Name(collective.algorithm()));
  }
  if (TensorDesc(conf.logical_desc()).shape.rank() != 1 ||
      conf.in_regst_desc_id_size() != members ||
      static_cast<int>(DataOutputs(task).size()) != members) {
    return TaskError(task, "boxing", "a bucket of ", members, " has a 1-D logical tensor, ",
                     members, " parts and ", members, " data outputs, not ",
                     TensorDesc(conf.logical_desc()).ToString(), ", ", conf.in_regst_desc_id_size(),
                     " and ", DataOutputs(task).size());
  }
  RETURN_IF_ERROR(CheckBucketMembers(task, index));
  for (int r = 0; r < conf.ring_task_id_size(); ++r) {
    const CollectiveConf& peer = index.FindTask(conf.ring_task_id(r))->collective();
    bool same = peer.member_size() == members;
    for (int m = 0; same && m < members; ++m) {
      same = TensorDesc(peer.member(m).logical_desc()) ==
                 TensorDesc(collective.member(m).logical_desc()) &&
             peer.member(m).element_offset() == collective.member(m).element_offset() &&
             google::protobuf::util::MessageDifferencer::Equals(peer.member(m).in_sbp(),
                                                                collective.member(m).in_sbp()) &&
             google::protobuf::util::MessageDifferencer::Equals(peer.member(m).out_sbp(),
                                                                collective.member(m).out_sbp());
    }
    if (!same) {
      return TaskError(task, "boxing.ring_task_id[" + std::to_string(r) + "]",
                       TaskIdToString(conf.ring_task_id(r)), " fuses other members");
    }
  }
  return Status::OK();
}

// Ring collectives: the ring lists parallel_num collective tasks, this task
// at its own rank.
Status CheckCollective(const TaskProto& task, const PlanIndex& index) {
  const BoxingConf& conf = task.boxing();
  std::string problem;
  if (CheckedByteSize(conf.logical_desc(), &problem) < 0) {
    return TaskError(task, "boxing.logical_desc", problem);
  }
  const int64_t n = conf.ring_task_id_size();
  if (n < 1 || n > kMaxParallelNum || conf.ring_rank() < 0 || conf.ring_rank() >= n ||
      conf.ring_task_id(static_cast<int>(conf.ring_rank())) != task.task_id()) {
    return TaskError(task, "boxing.ring_rank", "rank ", conf.ring_rank(), " of a ring of ", n,
                     " does not hold this task");
  }
  for (int r = 0; r < n; ++r) {
    const TaskProto* peer = index.FindTask(conf.ring_task_id(r));
    if (peer == nullptr || peer->type() != TASK_COLLECTIVE ||
        peer->boxing().kind() != conf.kind() || peer->boxing().ring_task_id_size() != n) {
      return TaskError(task, "boxing.ring_task_id[" + std::to_string(r) + "]",
                       TaskIdToString(conf.ring_task_id(r)), " is not a collective of this ring");
    }
  }
  if (task.collective().member_size() > 0) return CheckBucket(task, index);
  if (DataOutputs(task).size() != 1 || DataOutputs(task)[0]->blob_size() < 1) {
    return TaskError(task, "produced", "a collective produces one data register");
  }
  if (conf.in_regst_desc_id_size() != 1 || index.FindRegst(conf.in_regst_desc_id(0)) == nullptr ||
      !ConsumesRegst(task, conf.in_regst_desc_id(0))) {
    return TaskError(task, "boxing.in_regst_desc_id",
                     "a collective names one register it "
                     "consumes");
  }
  // Parts hold the logical dtype; the logical blob (the actor's whole-tensor
  // buffer) is no larger than the ring's parts together or the output. The
  // parts of an uneven split differ in size (a [2048, 10] weight split S(1)
  // over 8 ranks holds 2 columns on ranks 0-1 and 1 on the others), so the
  // sum is taken over every ring task's own input register.
  const DataType dtype = conf.logical_desc().dtype();
  int64_t in_bytes = 0, out_bytes = 0;
  RETURN_IF_ERROR(CheckBoxingPart(task, "boxing.in_regst_desc_id[0]",
                                  *index.FindRegst(conf.in_regst_desc_id(0))->desc, dtype,
                                  &in_bytes));
  RETURN_IF_ERROR(CheckBoxingPart(task, "produced", *DataOutputs(task)[0], dtype, &out_bytes));
  int64_t ring_bytes = 0;
  for (int r = 0; r < n; ++r) {
    const BoxingConf& peer = index.FindTask(conf.ring_task_id(r))->boxing();
    int64_t part = in_bytes;
    if (r != conf.ring_rank()) {
      const auto* regst =
          peer.in_regst_desc_id_size() == 1 ? index.FindRegst(peer.in_regst_desc_id(0)) : nullptr;
      if (regst == nullptr) {
        return TaskError(task, "boxing.ring_task_id[" + std::to_string(r) + "]",
                         TaskIdToString(conf.ring_task_id(r)),
                         " names no input register of its own");
      }
      // Another task's register: its own checks name its problems; an
      // unreadable size here counts as nothing, which can only refuse.
      std::string problem;
      part = regst->desc->blob_size() < 1
                 ? 0
                 : std::max<int64_t>(0, CheckedByteSize(regst->desc->blob(0).desc(), &problem));
    }
    if (__builtin_add_overflow(ring_bytes, part, &ring_bytes)) ring_bytes = kMaxZoneBytes;
  }
  if (TensorDesc(conf.logical_desc()).ByteSize() > std::max(ring_bytes, out_bytes)) {
    return TaskError(task, "boxing.logical_desc", "larger than the ring's parts (", ring_bytes,
                     " bytes over ", n, " tasks) and the output (", out_bytes, " bytes)");
  }
  return Status::OK();
}

Status CheckSink(const TaskProto& task) {
  for (int m = 0; m < task.sink().metric_size(); ++m) {
    if (FindConsumed(task, task.sink().metric(m).consumed_name()) == nullptr) {
      return TaskError(task, "sink.metric[" + std::to_string(m) + "].consumed_name", "'",
                       task.sink().metric(m).consumed_name(), "' is not a consumed register");
    }
  }
  return Status::OK();
}

Status CheckVariable(const TaskProto& task) {
  const std::vector<const RegstDescProto*> outputs = DataOutputs(task);
  if (outputs.size() != 1 || outputs[0]->regst_num() != 1 || outputs[0]->blob_size() != 1) {
    return TaskError(task, "produced",
                     "a variable task produces one register with one blob "
                     "and regst_num 1");
  }
  return Status::OK();
}

}  // namespace

Status CheckTaskKind(const TaskProto& task, const PlanIndex& index) {
  switch (task.type()) {
    case TASK_COPY_H2D:
    case TASK_COPY_D2H:
      return CheckCopy(task, index);
    case TASK_BOXING:
      return CheckBoxing(task, index);
    case TASK_COMMNET:
      return CheckCommNet(task, index);
    case TASK_COLLECTIVE:
      return CheckCollective(task, index);
    case TASK_SINK:
      return CheckSink(task);
    case TASK_VARIABLE:
      return CheckVariable(task);
    default:
      return Status::OK();
  }
}

}  // namespace plan_internal
}  // namespace oflite
