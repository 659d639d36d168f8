#include "oneflow_lite/runtime/message_bus.h"

#include "oneflow_lite/common/id.h"

namespace oflite {

Status LocalMessageBus::Send(const ActorMessage& message) {
  sent_.fetch_add(1, std::memory_order_relaxed);
  const int64_t machine = MachineOfTaskId(message.dst_actor_id);
  if (machine == machine_id_) return DeliverLocal(message);
  if (remote_ == nullptr) {
    return UnavailableError("message bus of machine ", machine_id_, ": no route to machine ",
                            machine, " for ", message.ToString());
  }
  return remote_->SendRemote(machine, message);
}

Status LocalMessageBus::DeliverLocal(const ActorMessage& message) {
  if (building_.load(std::memory_order_acquire)) {
    return UnavailableError("message bus of machine ", machine_id_,
                            ": its runtime is still being built (", message.ToString(), ")");
  }
  auto it = inboxes_.find(StreamKeyOfTaskId(message.dst_actor_id));
  if (it == inboxes_.end()) {
    return UnavailableError("message bus of machine ", machine_id_, ": no thread serves ",
                            TaskIdToString(message.dst_actor_id), " (", message.ToString(), ")");
  }
  // A closed inbox means the run is aborting; dropping is then correct.
  it->second->Push(message);
  return Status::OK();
}

}  // namespace oflite
