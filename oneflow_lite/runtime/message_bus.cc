#include "oneflow_lite/runtime/message_bus.h"

#include "oneflow_lite/common/id.h"

namespace oflite {

Status LocalMessageBus::Send(const ActorMessage& message) {
  const int64_t machine = MachineOfTaskId(message.dst_actor_id);
  if (machine == machine_id_) return Deliver(message, /*counted=*/true);
  if (remote_ == nullptr) {
    return UnavailableError("message bus of machine ", machine_id_, ": no route to machine ",
                            machine, " for ", message.ToString());
  }
  sent_remote_.fetch_add(1, std::memory_order_relaxed);
  return remote_->SendRemote(machine, message);
}

void LocalMessageBus::RegisterInbox(int64_t stream_key, Inbox* inbox) {
  inboxes_[stream_key] = inbox;
  few_inboxes_.clear();
  constexpr size_t kMaxScanned = 16;
  if (inboxes_.size() > kMaxScanned) return;
  for (const auto& [key, registered] : inboxes_) few_inboxes_.emplace_back(key, registered);
}

int64_t LocalMessageBus::sent_count() const {
  int64_t sum = sent_remote_.load(std::memory_order_relaxed);
  for (const auto& [key, inbox] : inboxes_) sum += inbox->counted();
  return sum;
}

Status LocalMessageBus::DeliverLocal(const ActorMessage& message) {
  return Deliver(message, /*counted=*/false);
}

Status LocalMessageBus::Deliver(const ActorMessage& message, bool counted) {
  if (building_.load(std::memory_order_acquire)) {
    return UnavailableError("message bus of machine ", machine_id_,
                            ": its runtime is still being built (", message.ToString(), ")");
  }
  const int64_t key = StreamKeyOfTaskId(message.dst_actor_id);
  Inbox* inbox = nullptr;
  if (!few_inboxes_.empty()) {
    for (const auto& [stream, registered] : few_inboxes_) {
      if (stream == key) {
        inbox = registered;
        break;
      }
    }
  } else {
    auto it = inboxes_.find(key);
    if (it != inboxes_.end()) inbox = it->second;
  }
  if (inbox == nullptr) {
    return UnavailableError("message bus of machine ", machine_id_, ": no thread serves ",
                            TaskIdToString(message.dst_actor_id), " (", message.ToString(), ")");
  }
  // A closed inbox means the run is aborting; dropping is then correct.
  inbox->Push(message, counted);
  return Status::OK();
}

}  // namespace oflite
