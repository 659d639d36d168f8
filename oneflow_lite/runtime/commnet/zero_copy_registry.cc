#include "oneflow_lite/runtime/commnet/zero_copy_registry.h"

#include <algorithm>

#include "oneflow_lite/common/id.h"

namespace oflite {

int64_t RegstSpanBytes(const RegstDescProto& desc) {
  int64_t end = 0;
  for (const BlobInRegst& blob : desc.blob()) end = std::max(end, blob.offset() + blob.bytes());
  return end;
}

bool IsStaticZeroCopyRegst(const RegstDescProto& src) {
  return src.cross_machine_strategy() == CM_STATIC_ZERO_COPY && RegstSpanBytes(src) > 0;
}

bool IsBounceRegst(const RegstDescProto& src) {
  return src.cross_machine_strategy() != CM_STATIC_ZERO_COPY && RegstSpanBytes(src) > 0;
}

bool IsPulledByRead(const RegstDescProto& src) { return RegstSpanBytes(src) > 0; }

ZeroCopyRegistry::ZeroCopyRegistry(comm::CommNet* net)
    : net_(net),
      zero_copy_registers_(net->transport(), &net->stats()->zero_copy),
      bounce_destinations_(net->transport(), &net->stats()->bounce) {}

std::string ZeroCopyRegistry::KeyName(int64_t desc, int32_t index) const {
  return key_prefix_ + "oflite/zc/" + std::to_string(desc) + "/" + std::to_string(index);
}

Status ZeroCopyRegistry::RegisterPlan(const MachinePlan& plan, const RegstStore& regsts) {
  for (const TaskProto& task : plan.task()) {
    for (const RegstDescProto& desc : task.produced()) {
      if (!IsStaticZeroCopyRegst(desc)) continue;
      bool remote = false;
      for (int64_t consumer : desc.consumer_task_id()) {
        remote = remote || MachineOfTaskId(consumer) != plan.machine_id();
      }
      if (remote) RETURN_IF_ERROR(RegisterSources(desc, regsts));
    }
    // The commnet task's own registers: READ destinations of either strategy.
    const RegstDescProto& src = task.commnet().src_regst();
    if (task.type() == TASK_COMMNET && IsPulledByRead(src)) {
      comm::StaticRegisterSet* set =
          IsStaticZeroCopyRegst(src) ? &zero_copy_registers_ : &bounce_destinations_;
      for (const RegstDescProto& desc : task.produced()) {
        if (desc.blob_size() > 0) RETURN_IF_ERROR(RegisterDestinations(desc, regsts, set));
      }
    }
  }
  return Status::OK();
}

Status ZeroCopyRegistry::RegisterSources(const RegstDescProto& desc, const RegstStore& regsts) {
  for (int32_t i = 0; i < desc.regst_num(); ++i) {
    ASSIGN_OR_RETURN(Regst * regst, regsts.Find(desc.regst_desc_id(), i));
    ASSIGN_OR_RETURN(comm::RemoteKey key,
                     zero_copy_registers_.RegisterSource({desc.regst_desc_id(), i}, regst->base,
                                                         RegstSpanBytes(desc)));
    RETURN_IF_ERROR(net_->control()->Put(KeyName(desc.regst_desc_id(), i), key.Encode()));
  }
  return Status::OK();
}

Status ZeroCopyRegistry::RegisterDestinations(const RegstDescProto& desc, const RegstStore& regsts,
                                              comm::StaticRegisterSet* set) {
  for (int32_t i = 0; i < desc.regst_num(); ++i) {
    ASSIGN_OR_RETURN(Regst * regst, regsts.Find(desc.regst_desc_id(), i));
    RETURN_IF_ERROR(
        set->RegisterDestination({desc.regst_desc_id(), i}, regst->base, RegstSpanBytes(desc)));
  }
  return Status::OK();
}

Status ZeroCopyRegistry::FetchPeerKeys(const MachinePlan& plan, std::chrono::milliseconds timeout) {
  for (const TaskProto& task : plan.task()) {
    if (task.type() != TASK_COMMNET || !IsStaticZeroCopyRegst(task.commnet().src_regst())) {
      continue;
    }
    const RegstDescProto& src = task.commnet().src_regst();
    for (int32_t i = 0; i < src.regst_num(); ++i) {
      ASSIGN_OR_RETURN(std::string bytes,
                       net_->control()->Get(KeyName(src.regst_desc_id(), i), timeout,
                                            static_cast<int>(task.commnet().src_machine_id())));
      ASSIGN_OR_RETURN(comm::RemoteKey key, comm::RemoteKey::Decode(bytes));
      zero_copy_registers_.AddRemoteSource({src.regst_desc_id(), i}, key);
    }
  }
  return Status::OK();
}

Status ZeroCopyRegistry::PostPull(const ActorMessage& produced, const RegstDescProto& src,
                                  const Regst& into, comm::Completion done) const {
  const std::string what = "READ of register " + std::to_string(src.regst_desc_id()) + "[" +
                           std::to_string(produced.regst_index) + "]";
  const int64_t bytes = RegstSpanBytes(src);
  if (RegstSpanBytes(*into.desc) != bytes) {
    return InvalidArgumentError(what, ": ", bytes, " bytes into a register of ",
                                RegstSpanBytes(*into.desc));
  }
  ASSIGN_OR_RETURN(
      comm::Connection * connection,
      net_->transport()->GetConnection(static_cast<int>(MachineOfTaskId(produced.src_actor_id))));
  return zero_copy_registers_
      .PostPull(connection, {src.regst_desc_id(), produced.regst_index},
                {into.desc->regst_desc_id(), into.index}, static_cast<size_t>(bytes),
                std::move(done))
      .WithContext(what);
}

StatusOr<const comm::MemoryRegion*> ZeroCopyRegistry::FindBounceDestination(
    const Regst& into) const {
  return bounce_destinations_.Find({into.desc->regst_desc_id(), into.index});
}

}  // namespace oflite
