// The stream-order rule: which register edges of a plan may skip the event.
//
// One home for the rule the compiler applies when it writes
// RegstDescProto.consumer_sync and the plan verifier applies when it checks
// it (docs/runtime.md, "Stream order"). An edge producer -> consumer is
// EDGE_STREAM_ORDER when both tasks run on the same device stream (the same
// machine, device and stream in their task ids, which is what binds an actor
// to its thread and DeviceContext) and both are kinds whose every access to
// registers is work enqueued on that stream (compute, source, variable, copy
// tasks). Every other edge is EDGE_EVENT: it crosses a stream, a device, the
// host (sink, boxing, CommNet and collective tasks read or write registers
// with host code at act time) or a machine. Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMMON_EDGE_SYNC_H_
#define ONEFLOW_LITE_COMMON_EDGE_SYNC_H_

#include <cstdint>

#include "proto/plan.pb.h"

namespace oflite {

// Whether a task of `type` touches registers only through its stream.
bool IsStreamOrderedKind(TaskType type);

// The sync the edge producer -> consumer needs (never EDGE_SYNC_UNSET).
// The task ids decide the stream (producer_id, consumer_id as in the plan).
EdgeSync RequiredEdgeSync(int64_t producer_id, TaskType producer_type, int64_t consumer_id,
                          TaskType consumer_type);

// consumer_sync[k] of `desc`, EDGE_SYNC_UNSET when the list is empty or
// short (an old plan: the runtime then waits for the event, always safe).
EdgeSync ConsumerSyncAt(const RegstDescProto& desc, int k);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_EDGE_SYNC_H_
