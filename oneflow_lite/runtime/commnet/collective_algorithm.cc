#include "oneflow_lite/runtime/commnet/collective_algorithm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "oneflow_lite/comm/collective/exchange.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/common/ring_segments.h"

namespace oflite {
namespace {

// True when rank r's axis-0 balanced range is the ring's flat segment r.
bool SplitMatchesSegments(const TensorDesc& logical, int64_t n) {
  if (logical.shape.rank() == 0 || logical.shape.dim(0) <= 0) return false;
  const int64_t count = logical.shape.elem_count();
  const int64_t inner = count / logical.shape.dim(0);
  for (int64_t r = 0; r < n; ++r) {
    size_t seg_begin = 0, seg_end = 0;
    comm::RingCommunicator::SegmentBounds(count, static_cast<int>(n), static_cast<int>(r),
                                          &seg_begin, &seg_end);
    const PartRange range = BalancedPart(logical.shape.dim(0), n, r);
    if (static_cast<int64_t>(seg_begin) != range.begin * inner ||
        static_cast<int64_t>(seg_end) != range.end() * inner) {
      return false;
    }
  }
  return true;
}

std::string WhySbpsDoNotFit(const TaskProto& task, const TensorDesc& logical, RingOp op,
                            int64_t n) {
  const SbpParallel& in = FirstSbp(task.boxing().in_sbp());
  const SbpParallel& out = FirstSbp(task.boxing().out_sbp());
  const bool segments_match = SplitMatchesSegments(logical, n);
  const bool fits =
      op == RingOp::kAllReduce || IsExchangeOp(op)
          ? in.has_partial_sum() && (out.has_broadcast() || out.has_split_axis())
      : op == RingOp::kReduceScatter
          ? in.has_partial_sum() && out.has_split_axis() && out.split_axis() == 0 &&
                segments_match
          : in.has_split_axis() && in.split_axis() == 0 && out.has_broadcast() && segments_match;
  if (fits) return "";
  return "it does not turn " + in.ShortDebugString() + " into " + out.ShortDebugString() +
         (segments_match ? "" : " (the axis-0 parts are not the ring's flat segments)");
}

// The plan's own consistency: an addable dtype, buffers that fit the
// logical tensor, SBPs the op turns into each other.
std::string WhyRingInconsistent(const TaskProto& task, const TensorDesc& logical, RingOp op,
                                int64_t n) {
  const CollectiveConf& conf = task.collective();
  if (n < 2) return "a ring needs 2 or more tasks, it has " + std::to_string(n);
  const DataType dtype = logical.dtype;
  if (!CanAccumulate(dtype)) return std::string("a ring cannot add ") + DataTypeName(dtype);
  const int64_t elem = SizeOf(dtype);
  if (logical.shape.elem_count() <= 0 || conf.element_count() != logical.shape.elem_count() ||
      conf.buffer_bytes() != logical.ByteSize()) {
    return "element_count " + std::to_string(conf.element_count()) + " / buffer_bytes " +
           std::to_string(conf.buffer_bytes()) + " do not match the logical " +
           logical.ToString();
  }
  if (op == RingOp::kDoublingAllReduce && (n < 2 || !IsPowerOfTwo(static_cast<int>(n)))) {
    return "recursive doubling needs a power-of-2 ring, this one has " + std::to_string(n) +
           " tasks";
  }
  if (!IsExchangeOp(op) &&
      (conf.chunk_bytes() < 8 || conf.chunk_bytes() % elem != 0 || conf.slots() < 1)) {
    return "chunk_bytes " + std::to_string(conf.chunk_bytes()) + " (needs >= 8, a multiple of " +
           std::to_string(elem) + ") or slots " + std::to_string(conf.slots()) + " (needs >= 1)";
  }
  return WhySbpsDoNotFit(task, logical, op, n);
}

// Empty when the ring op can run here: the plan is consistent, its ring
// tasks are on distinct machines of this job (all of them, or a group: one
// axis of a 2-D placement) and one of them on this machine (the plan
// against this CommNet).
std::string WhyRingImpossible(const TaskProto& task, const TensorDesc& logical, RingOp op,
                              const comm::CommNet* net) {
  const BoxingConf& boxing = task.boxing();
  const int64_t n = boxing.ring_task_id_size();
  std::string why = WhyRingInconsistent(task, logical, op, n);
  if (!why.empty()) return why;
  if (net == nullptr) return "this runtime has no CommNet";
  std::vector<int> machines;
  if (!DistinctMachinesOf(boxing.ring_task_id(), net->world_size(), &machines)) {
    return "its ring tasks are not on distinct machines of the job's " +
           std::to_string(net->world_size());
  }
  if (std::find(machines.begin(), machines.end(), net->rank()) == machines.end()) {
    return "machine " + std::to_string(net->rank()) + " holds none of its ring's tasks";
  }
  return "";
}

}  // namespace

StatusOr<RingOp> RecordedRingOp(const TaskProto& task, const TensorDesc& logical,
                                const comm::CommNet* net) {
  const CollectiveConf& conf = task.collective();
  RingOp op = RingOp::kNone;
  switch (conf.algorithm()) {
    case COLLECTIVE_ALL_TO_ALL: return RingOp::kNone;
    case COLLECTIVE_RING_ALL_REDUCE: op = RingOp::kAllReduce; break;
    case COLLECTIVE_RING_REDUCE_SCATTER: op = RingOp::kReduceScatter; break;
    case COLLECTIVE_RING_ALL_GATHER: op = RingOp::kAllGather; break;
    case COLLECTIVE_EXCHANGE_ALL_REDUCE: op = RingOp::kExchangeAllReduce; break;
    case COLLECTIVE_DOUBLING_ALL_REDUCE: op = RingOp::kDoublingAllReduce; break;
    case COLLECTIVE_SCATTER_GATHER_ALL_REDUCE: op = RingOp::kScatterGatherAllReduce; break;
    default:
      return InvalidArgumentError("collective task '", task.name(), "': the plan records no "
                                  "algorithm (TaskProto.collective); recompile the plan");
  }
  const std::string why = WhyRingImpossible(task, logical, op, net);
  if (!why.empty()) {
    return InvalidArgumentError("collective task '", task.name(), "': the plan's algorithm ",
                                CollectiveAlgorithm_Name(conf.algorithm()), " cannot run: ", why);
  }
  return op;
}

comm::RingCollective CollectiveOf(RingOp op) {
  switch (op) {
    case RingOp::kReduceScatter: return comm::RingCollective::kReduceScatter;
    case RingOp::kAllGather: return comm::RingCollective::kAllGather;
    default: return comm::RingCollective::kAllReduce;
  }
}

comm::ExchangeSchedule ExchangeScheduleOf(RingOp op) {
  switch (op) {
    case RingOp::kDoublingAllReduce: return comm::ExchangeSchedule::kDoubling;
    case RingOp::kScatterGatherAllReduce: return comm::ExchangeSchedule::kScatterGather;
    default: return comm::ExchangeSchedule::kDirect;
  }
}

size_t CollectiveBytesSent(RingOp op, const TensorDesc& logical, int rank, int world) {
  if (IsExchangeOp(op)) {
    return comm::ExchangeCommunicator::BytesSent(
        static_cast<size_t>(logical.shape.elem_count()), static_cast<size_t>(SizeOf(logical.dtype)),
        rank, world, ExchangeScheduleOf(op));
  }
  return comm::RingBytesSent(CollectiveOf(op), logical.shape.elem_count(), SizeOf(logical.dtype),
                             rank, world);
}

}  // namespace oflite
