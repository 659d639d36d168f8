#include "oneflow_lite/common/edge_sync.h"

#include "oneflow_lite/common/id.h"

namespace oflite {

bool IsStreamOrderedKind(TaskType type) {
  switch (type) {
    case TASK_COMPUTE:
    case TASK_SOURCE:
    case TASK_VARIABLE:
    case TASK_COPY_H2D:
    case TASK_COPY_D2H:
      return true;
    default:
      return false;
  }
}

EdgeSync RequiredEdgeSync(int64_t producer_id, TaskType producer_type, int64_t consumer_id,
                          TaskType consumer_type) {
  if (producer_id < 0 || consumer_id < 0) return EDGE_EVENT;
  if (StreamKeyOfTaskId(producer_id) != StreamKeyOfTaskId(consumer_id)) return EDGE_EVENT;
  if (!IsStreamOrderedKind(producer_type) || !IsStreamOrderedKind(consumer_type)) {
    return EDGE_EVENT;
  }
  return EDGE_STREAM_ORDER;
}

EdgeSync ConsumerSyncAt(const RegstDescProto& desc, int k) {
  if (k < 0 || k >= desc.consumer_sync_size()) return EDGE_SYNC_UNSET;
  return desc.consumer_sync(k);
}

}  // namespace oflite
