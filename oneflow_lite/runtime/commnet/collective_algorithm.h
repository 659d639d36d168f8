// The collective algorithm a TASK_COLLECTIVE task follows: the one the
// compiler recorded in TaskProto.collective (compiler/collective_choice.h
// says which conversions get which); the runtime never chooses, it checks.
//
// RecordedRingOp maps the recorded algorithm to a ring op (kNone for
// all-to-all) and refuses, naming the task, a plan that records none or one
// this runtime cannot run: ring tasks not on distinct machines of the job
// (all of them, or a group of them: one axis of a 2-D placement, whose
// communicator then runs over those machines' ranks in ring order) or none
// on this machine, a dtype a ring cannot add, buffer sizes that do not
// match the logical tensor, SBPs the ring op does not convert. Pure
// functions of the plan and the CommNet's rank and world size;
// thread-compatible.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ALGORITHM_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ALGORITHM_H_

#include <cstdint>

#include "oneflow_lite/comm/collective/exchange.h"
#include "oneflow_lite/comm/collective/ring.h"
#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/runtime/boxing_body.h"  // FirstSbp
#include "proto/plan.pb.h"

namespace oflite {

// kExchangeAllReduce: the exchange all-reduce of small tensors
// (comm/collective/exchange.h), run like the ring all-reduce (same staging,
// same cut) by the same worker; kDoublingAllReduce: its recursive doubling
// (power-of-2 worlds) and kScatterGatherAllReduce: its scatter-gather,
// likewise.
enum class RingOp {
  kNone,
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kExchangeAllReduce,
  kDoublingAllReduce,
  kScatterGatherAllReduce
};

// The exchange communicator runs it (kExchangeAllReduce, kDoublingAllReduce,
// kScatterGatherAllReduce).
inline bool IsExchangeOp(RingOp op) {
  return op == RingOp::kExchangeAllReduce || op == RingOp::kDoublingAllReduce ||
         op == RingOp::kScatterGatherAllReduce;
}

// The exchange schedule of an exchange op.
comm::ExchangeSchedule ExchangeScheduleOf(RingOp op);


// The ring op `task` records (kNone: all-to-all), checked against its
// logical tensor `logical` and against `net` (may be null: then any ring is
// refused). InvalidArgument naming the task otherwise.
StatusOr<RingOp> RecordedRingOp(const TaskProto& task, const TensorDesc& logical,
                                const comm::CommNet* net);

// The ring collective of a ring op (not kNone; the exchange's is kAllReduce).
comm::RingCollective CollectiveOf(RingOp op);

// Bytes this rank sends in one collective of `op` (not kNone) over the
// logical tensor: the ring's schedule, or the exchange's
// (ExchangeCommunicator::BytesSent).
size_t CollectiveBytesSent(RingOp op, const TensorDesc& logical, int rank, int world);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COLLECTIVE_ALGORITHM_H_
