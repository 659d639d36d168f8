// ParkedByMessage<T>: values that arrive before their owner asks for them,
// keyed by the actor message they belong to (src, dst, register desc,
// register index, piece; the kind is not part of the key, so a kReadDone
// finds what its "produced" parked). CommNetRoute parks READ outcomes until
// TakeReadStatus, pushed payloads until TakePayload, and bounce
// announcements until StartRead.
//
// Parking a second value under one key replaces the first. Thread-safe;
// Park and Take never block beyond the set's own mutex.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_PARKED_BY_MESSAGE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_PARKED_BY_MESSAGE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "oneflow_lite/runtime/actor_message.h"

namespace oflite {

using ParkingKey = std::tuple<int64_t, int64_t, int64_t, int32_t, int64_t>;

inline ParkingKey ParkingKeyOf(const ActorMessage& m) {
  return ParkingKey(m.src_actor_id, m.dst_actor_id, m.regst_desc_id, m.regst_index, m.piece_id);
}

template <typename T>
class ParkedByMessage {
 public:
  void Park(const ActorMessage& message, T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[ParkingKeyOf(message)] = std::move(value);
  }

  // Removes and returns the value parked for `message`; nullopt if none.
  std::optional<T> Take(const ActorMessage& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(ParkingKeyOf(message));
    if (it == values_.end()) return std::nullopt;
    std::optional<T> value(std::move(it->second));
    values_.erase(it);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<ParkingKey, T> values_;  // guarded by mutex_
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_PARKED_BY_MESSAGE_H_
