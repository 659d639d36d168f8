// Bit-packed task/actor ids.
//
// An actor id says where the actor lives, so routing a message is arithmetic:
//
//   bit 63        bit 0
//   | 1 reserved (0) | 15 machine | 4 device type | 8 device index |
//   | 8 stream | 28 task index |
//
// machine < 32768, device type < 16 (proto DeviceType), device index < 256,
// stream < 256, task index < 2^28 per (machine, device, stream).
// The same value is the TaskProto.task_id of the plan; ids are therefore
// stable across runs of the same plan. Layout: docs/plan_format.md.
#ifndef ONEFLOW_LITE_COMMON_ID_H_
#define ONEFLOW_LITE_COMMON_ID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {

struct StreamId {
  int64_t machine = 0;
  int32_t device_type = 0;  // proto DeviceType value
  int32_t device_index = 0;
  int32_t stream = 0;

  bool operator==(const StreamId& o) const {
    return machine == o.machine && device_type == o.device_type &&
           device_index == o.device_index && stream == o.stream;
  }
  bool operator!=(const StreamId& o) const { return !(*this == o); }
};

struct TaskIdParts {
  StreamId stream;
  int64_t task_index = 0;

  bool operator==(const TaskIdParts& o) const {
    return stream == o.stream && task_index == o.task_index;
  }
};

inline constexpr int kMachineBits = 15;
inline constexpr int kDeviceTypeBits = 4;
inline constexpr int kDeviceIndexBits = 8;
inline constexpr int kStreamBits = 8;
inline constexpr int kTaskIndexBits = 28;

inline constexpr int kTaskIndexShift = 0;
inline constexpr int kStreamShift = kTaskIndexShift + kTaskIndexBits;
inline constexpr int kDeviceIndexShift = kStreamShift + kStreamBits;
inline constexpr int kDeviceTypeShift = kDeviceIndexShift + kDeviceIndexBits;
inline constexpr int kMachineShift = kDeviceTypeShift + kDeviceTypeBits;
static_assert(kMachineShift + kMachineBits == 63, "id layout must fill 63 bits");

// Packs; fails with InvalidArgument naming the field that does not fit.
StatusOr<int64_t> EncodeTaskId(const TaskIdParts& parts);
// Unpacks; fails on a negative id (reserved bit set).
StatusOr<TaskIdParts> DecodeTaskId(int64_t task_id);

// Fast field access for routing (no validation; id must come from Encode).
inline int64_t MachineOfTaskId(int64_t id) {
  return (id >> kMachineShift) & ((int64_t{1} << kMachineBits) - 1);
}
inline int64_t StreamKeyOfTaskId(int64_t id) { return id >> kStreamShift; }

// The machines of `task_ids` (any range of int64 task ids) in order, into
// `machines`; false when one is outside [0, machine_count) or two share a
// machine. A collective's ring tasks on distinct machines are the ranks its
// communicator runs over (compiler/collective_choice.h, the runtime's check
// in runtime/commnet/collective_algorithm.h).
template <typename TaskIds>
bool DistinctMachinesOf(const TaskIds& task_ids, int64_t machine_count,
                        std::vector<int>* machines) {
  machines->clear();
  std::vector<bool> taken(machine_count > 0 ? static_cast<size_t>(machine_count) : 0, false);
  for (int64_t id : task_ids) {
    const int64_t machine = MachineOfTaskId(id);
    if (machine >= machine_count || taken[machine]) return false;
    taken[machine] = true;
    machines->push_back(static_cast<int>(machine));
  }
  return true;
}

// "m0/cpu0/s1/t42" for logs.
std::string TaskIdToString(int64_t task_id);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_ID_H_
