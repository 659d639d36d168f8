#include "oneflow_lite/runtime/commnet/ring_channels.h"

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/common/id.h"

namespace oflite {

Status RingChannelTable::AddPlanRings(const std::vector<int64_t>& ring_keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fixed_) {
    return FailedPreconditionError("the plan's rings were given after the ring channels were "
                                   "assigned (one table per runtime)");
  }
  for (int64_t key : ring_keys) {
    if (rings_.size() >= kMaxRings && rings_.count(key) == 0) {
      return ResourceExhaustedError("more than ", kMaxRings, " ring collectives in one plan");
    }
    rings_.emplace(key, Member{-1, ""});
  }
  return Status::OK();
}

Status RingChannelTable::Add(int64_t ring_key, int64_t task_id, const std::string& task_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rings_.find(ring_key);
  if (it != rings_.end()) {
    if (it->second.task_id == task_id) return Status::OK();
    if (it->second.task_id < 0) {  // the plan's, now claimed by its member here
      it->second.task_id = task_id;
      it->second.task_name = task_name;
      return Status::OK();
    }
    return InvalidArgumentError("collective tasks '", it->second.task_name, "' (",
                                TaskIdToString(it->second.task_id), ") and '", task_name, "' (",
                                TaskIdToString(task_id), ") both claim ring ",
                                TaskIdToString(ring_key), " on this machine");
  }
  if (fixed_) {
    return FailedPreconditionError("collective task '", task_name, "' added its ring after the "
                                   "ring channels were assigned (one table per runtime)");
  }
  if (rings_.size() >= kMaxRings) {
    return ResourceExhaustedError("more than ", kMaxRings, " ring collectives in one plan");
  }
  rings_[ring_key] = Member{task_id, task_name};
  return Status::OK();
}

StatusOr<uint32_t> RingChannelTable::ChannelOf(int64_t ring_key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fixed_) {
    uint32_t index = 0;
    for (auto& [key, member] : rings_) member.channel = comm::kCollectiveChannel + index++;
    fixed_ = true;
  }
  auto it = rings_.find(ring_key);
  if (it == rings_.end()) {
    return NotFoundError("ring ", TaskIdToString(ring_key), " has no channel");
  }
  return it->second.channel;
}

size_t RingChannelTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rings_.size();
}

}  // namespace oflite
