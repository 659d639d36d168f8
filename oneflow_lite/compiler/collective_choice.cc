#include "oneflow_lite/compiler/collective_choice.h"

#include <vector>

#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/compiler/sbp_deduction.h"

namespace oflite {
namespace compiler {
namespace {

SbpParallel FirstSbp(const NdSbp& sbp) {
  if (sbp.sbp_size() > 0) return sbp.sbp(0);
  SbpParallel broadcast;
  broadcast.set_broadcast(true);
  return broadcast;
}

bool RingAddable(DataType dtype) {
  return dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_INT32 || dtype == DT_INT64;
}

// The ring algorithm for this conversion, or COLLECTIVE_ALL_TO_ALL.
CollectiveAlgorithm RingAlgorithm(const BoxingConf& boxing, const TensorDesc& logical, int64_t n) {
  const SbpParallel in = FirstSbp(boxing.in_sbp());
  const SbpParallel out = FirstSbp(boxing.out_sbp());
  const bool segments_match = SplitMatchesRingSegments(logical, n);
  if (in.has_partial_sum() && out.has_broadcast()) return COLLECTIVE_RING_ALL_REDUCE;
  if (in.has_partial_sum() && out.has_split_axis()) {
    return out.split_axis() == 0 && segments_match ? COLLECTIVE_RING_REDUCE_SCATTER
                                                   : COLLECTIVE_RING_ALL_REDUCE;
  }
  if (in.has_split_axis() && in.split_axis() == 0 && out.has_broadcast() && segments_match) {
    return COLLECTIVE_RING_ALL_GATHER;
  }
  return COLLECTIVE_ALL_TO_ALL;
}

}  // namespace

bool SplitMatchesRingSegments(const TensorDesc& logical, int64_t ring_size) {
  if (logical.shape.rank() == 0 || logical.shape.dim(0) <= 0 || ring_size < 1) return false;
  const int64_t rows = logical.shape.dim(0);
  const int64_t count = logical.shape.elem_count();
  const int64_t inner = count / rows;
  for (int64_t r = 0; r < ring_size; ++r) {
    size_t seg_begin = 0, seg_end = 0;
    RingSegmentBounds(count, static_cast<int>(ring_size), static_cast<int>(r), &seg_begin,
                            &seg_end);
    const int64_t begin = SplitPartStart(rows, ring_size, r);
    const int64_t size = SplitPartSize(rows, ring_size, r);
    if (static_cast<int64_t>(seg_begin) != begin * inner ||
        static_cast<int64_t>(seg_end) != (begin + size) * inner) {
      return false;
    }
  }
  return true;
}

CollectiveConf ChooseCollective(const BoxingConf& boxing, int64_t machine_count,
                                int64_t exchange_max_bytes) {
  CollectiveConf conf;
  conf.set_algorithm(COLLECTIVE_ALL_TO_ALL);
  // Distinct machines: every machine of the job, or a group of them (one
  // axis of a 2-D placement), whose ranks the communicator runs over in
  // ring order. Tasks sharing a machine keep the all-to-all.
  const int64_t n = boxing.ring_task_id_size();
  std::vector<int> machines;
  if (n < 2 || !DistinctMachinesOf(boxing.ring_task_id(), machine_count, &machines)) return conf;
  const TensorDesc logical(boxing.logical_desc());
  if (!RingAddable(logical.dtype) || logical.shape.elem_count() <= 0) return conf;
  conf.set_algorithm(RingAlgorithm(boxing, logical, n));
  if (conf.algorithm() == COLLECTIVE_ALL_TO_ALL) return conf;
  conf.set_buffer_bytes(logical.ByteSize());
  conf.set_element_count(logical.shape.elem_count());
  const bool reduces = FirstSbp(boxing.in_sbp()).has_partial_sum();
  if (reduces && exchange_max_bytes > 0 &&
      UseExchangeAllReduce(static_cast<size_t>(logical.ByteSize()), static_cast<int>(n),
                           static_cast<size_t>(exchange_max_bytes))) {
    conf.set_algorithm(COLLECTIVE_EXCHANGE_ALL_REDUCE);  // no chunks, no slots
    return conf;
  }
  if (reduces &&
      UseDoublingAllReduce(static_cast<size_t>(logical.ByteSize()), static_cast<int>(n),
                           static_cast<size_t>(std::max<int64_t>(exchange_max_bytes, 0)))) {
    conf.set_algorithm(COLLECTIVE_DOUBLING_ALL_REDUCE);  // no chunks, no slots
    return conf;
  }
  // Not for a reduce-scatter the ring runs as such (it sends half the bytes).
  if (conf.algorithm() == COLLECTIVE_RING_ALL_REDUCE &&
      UseScatterGatherAllReduce(static_cast<size_t>(logical.ByteSize()), static_cast<int>(n),
                                static_cast<size_t>(std::max<int64_t>(exchange_max_bytes, 0)))) {
    conf.set_algorithm(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);  // no chunks, no slots
    return conf;
  }
  conf.set_chunk_bytes(static_cast<int64_t>(kDefaultRingChunkBytes));
  conf.set_slots(kDefaultRingSlots);
  return conf;
}

std::vector<CollectiveAlgorithm> PartialSumCandidates(CollectiveAlgorithm ring, int64_t ranks) {
  std::vector<CollectiveAlgorithm> candidates = {ring, COLLECTIVE_EXCHANGE_ALL_REDUCE};
  if (ranks >= 4 && (ranks & (ranks - 1)) == 0) {
    candidates.push_back(COLLECTIVE_DOUBLING_ALL_REDUCE);
  }
  if (ranks >= 3 && ring == COLLECTIVE_RING_ALL_REDUCE) {
    candidates.push_back(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  }
  return candidates;
}

CollectiveConf ChooseCollective(const BoxingConf& boxing, int64_t machine_count,
                                int64_t exchange_max_bytes, const CollectiveTimeFn& time_of) {
  CollectiveConf rule = ChooseCollective(boxing, machine_count, exchange_max_bytes);
  if (!time_of || rule.algorithm() == COLLECTIVE_ALL_TO_ALL) return rule;
  if (!FirstSbp(boxing.in_sbp()).has_partial_sum()) return rule;
  const TensorDesc logical(boxing.logical_desc());
  const int64_t n = boxing.ring_task_id_size();
  const int64_t bytes = logical.ByteSize();
  const CollectiveAlgorithm ring = RingAlgorithm(boxing, logical, n);
  CollectiveAlgorithm best = COLLECTIVE_UNSET;
  double best_us = 0;
  for (CollectiveAlgorithm a : PartialSumCandidates(ring, n)) {
    double us = time_of(a, n, bytes);
    if (us < 0) continue;
    if (best == COLLECTIVE_UNSET || us < best_us) {
      best = a;
      best_us = us;
    }
  }
  if (best == COLLECTIVE_UNSET) return rule;
  CollectiveConf conf;
  conf.set_algorithm(best);
  conf.set_buffer_bytes(bytes);
  conf.set_element_count(logical.shape.elem_count());
  if (best == COLLECTIVE_RING_ALL_REDUCE || best == COLLECTIVE_RING_REDUCE_SCATTER) {
    conf.set_chunk_bytes(static_cast<int64_t>(kDefaultRingChunkBytes));
    conf.set_slots(kDefaultRingSlots);
  }
  return conf;
}

}  // namespace compiler
}  // namespace oflite
