#include "oneflow_lite/common/id.h"

#include <sstream>

namespace oflite {
namespace {

Status CheckField(const char* field, int64_t value, int bits) {
  const int64_t limit = int64_t{1} << bits;
  if (value < 0 || value >= limit) {
    return InvalidArgumentError("task id field '", field, "' = ", value,
                                " is out of range [0, ", limit, ")");
  }
  return Status::OK();
}

int64_t Field(int64_t id, int shift, int bits) {
  return (id >> shift) & ((int64_t{1} << bits) - 1);
}

const char* DeviceTypeShortName(int32_t type) {
  switch (type) {
    case 1: return "cpu";
    case 2: return "cuda";
    default: return "dev";
  }
}

}  // namespace

StatusOr<int64_t> EncodeTaskId(const TaskIdParts& p) {
  RETURN_IF_ERROR(CheckField("machine", p.stream.machine, kMachineBits));
  RETURN_IF_ERROR(CheckField("device_type", p.stream.device_type, kDeviceTypeBits));
  RETURN_IF_ERROR(CheckField("device_index", p.stream.device_index, kDeviceIndexBits));
  RETURN_IF_ERROR(CheckField("stream", p.stream.stream, kStreamBits));
  RETURN_IF_ERROR(CheckField("task_index", p.task_index, kTaskIndexBits));
  return (p.stream.machine << kMachineShift) |
         (int64_t{p.stream.device_type} << kDeviceTypeShift) |
         (int64_t{p.stream.device_index} << kDeviceIndexShift) |
         (int64_t{p.stream.stream} << kStreamShift) | (p.task_index << kTaskIndexShift);
}

StatusOr<TaskIdParts> DecodeTaskId(int64_t id) {
  if (id < 0) return InvalidArgumentError("task id ", id, " is negative (reserved bit set)");
  TaskIdParts p;
  p.stream.machine = Field(id, kMachineShift, kMachineBits);
  p.stream.device_type = static_cast<int32_t>(Field(id, kDeviceTypeShift, kDeviceTypeBits));
  p.stream.device_index = static_cast<int32_t>(Field(id, kDeviceIndexShift, kDeviceIndexBits));
  p.stream.stream = static_cast<int32_t>(Field(id, kStreamShift, kStreamBits));
  p.task_index = Field(id, kTaskIndexShift, kTaskIndexBits);
  return p;
}

std::string TaskIdToString(int64_t id) {
  auto parts = DecodeTaskId(id);
  if (!parts.ok()) return "invalid-task-id(" + std::to_string(id) + ")";
  std::ostringstream os;
  os << "m" << parts->stream.machine << "/" << DeviceTypeShortName(parts->stream.device_type)
     << parts->stream.device_index << "/s" << parts->stream.stream << "/t" << parts->task_index;
  return os.str();
}

}  // namespace oflite
