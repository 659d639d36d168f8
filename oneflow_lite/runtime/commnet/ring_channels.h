// RingChannelTable: the router channel of every ring collective of one
// machine's plan, the same on every rank and free of collisions.
//
// Every member of a ring knows it by the same key: its rank-0 task id
// (BoxingConf.ring_task_id(0)). A ring may span a group of the machines
// (one axis of a 2-D placement), so one machine's plan does not hold every
// ring: the session first gives the table the keys of every collective of
// the whole plan (AddPlanRings); collective actors then Add their ring's
// key while the runtime builds them (Runtime::Create builds every actor
// before any runs). The first ChannelOf fixes the table: the keys in
// ascending order get channels comm::kCollectiveChannel + 0, 1, 2, ... So
// every rank assigns the same dense channels, and two rings cannot share
// one (no hashing). Without AddPlanRings (tests of one machine's actors)
// the keys are those Added, which agree across ranks only when every ring
// spans every machine.
//
// Errors (at plan load): two tasks of this machine claiming the same ring
// (InvalidArgument naming both), an Add after the table was fixed
// (FailedPrecondition: one table per runtime). Thread-safe.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_RING_CHANNELS_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_RING_CHANNELS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

class RingChannelTable {
 public:
  // Most rings one table assigns (channels stay far below the reply bit).
  static constexpr size_t kMaxRings = 1 << 20;

  // The ring keys of the whole plan (every rank passes the same list),
  // before any Add; FailedPrecondition once the table is fixed.
  Status AddPlanRings(const std::vector<int64_t>& ring_keys);
  Status Add(int64_t ring_key, int64_t task_id, const std::string& task_name);
  // Fixes the table on the first call; NotFound for a key never added.
  StatusOr<uint32_t> ChannelOf(int64_t ring_key);
  size_t size() const;

 private:
  struct Member {
    int64_t task_id;  // -1: a ring of the plan this machine's actors have not claimed
    std::string task_name;
    uint32_t channel = 0;
  };
  mutable std::mutex mutex_;
  std::map<int64_t, Member> rings_;  // by ring key, guarded by mutex_
  bool fixed_ = false;               // guarded by mutex_
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_RING_CHANNELS_H_
