// How each TASK_COLLECTIVE task moves its data: the compiler's choice,
// recorded in TaskProto.collective (docs/plan_format.md, "Collectives") and
// followed by the runtime (runtime/commnet/collective_algorithm.h), which refuses
// a recorded choice it cannot run.
//
// A ring algorithm (comm/collective/ring.h) is chosen when the ring's tasks
// are on distinct machines (every machine of the cluster, or a group of
// them: one axis of a 2-D placement; the communicator runs over those
// machines' ranks in ring order), its dtype can be added (float, double,
// int32, int64) and it has elements:
//   P -> B                          ring all-reduce;
//   P -> S(0) on the ring segments  ring reduce-scatter;
//   P -> S(other)                   ring all-reduce, then each cuts its part;
//   S(0) -> B on the ring segments  ring all-gather;
// "on the ring segments": every rank's balanced axis-0 range is exactly its
// flat segment of the ring (common/ring_segments.h). Anything else
// is all-to-all: every part to every ring task in actor messages. A ring
// works in one registered buffer of the logical tensor's bytes, in messages
// of kDefaultRingChunkBytes with kDefaultRingSlots in flight.
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_COLLECTIVE_CHOICE_H_
#define ONEFLOW_LITE_COMPILER_COLLECTIVE_CHOICE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "oneflow_lite/common/tensor.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace compiler {

// `boxing` with its ring_task_id already set to task ids (their machine is
// MachineOfTaskId); `machine_count`: machines of the cluster.
// `exchange_max_bytes`: a partial-sum conversion the ring would run as an
// all-reduce becomes COLLECTIVE_EXCHANGE_ALL_REDUCE when the tensor has at
// most this many bytes and (N - 1) times them, what each rank sends, at most
// kExchangeFanOut times this (common/ring_segments.h, UseExchangeAllReduce;
// 0: never).
CollectiveConf ChooseCollective(const BoxingConf& boxing, int64_t machine_count,
                                int64_t exchange_max_bytes = 0);

// Predicted microseconds of one collective of `algorithm` over `ranks`
// ranks on a tensor of `bytes`, or < 0 when unknown (a calibration's
// curves, cost/calibration.h: PredictCollectiveUs).
using CollectiveTimeFn = std::function<double(CollectiveAlgorithm, int64_t ranks, int64_t bytes)>;

// As above, but a partial-sum conversion takes whichever algorithm that can
// run it `time_of` predicts fastest (the ring, the exchange, recursive
// doubling on power-of-2 rings of 4 or more, scatter-gather from 3 ranks);
// the size rule decides when `time_of` knows none of them.
CollectiveConf ChooseCollective(const BoxingConf& boxing, int64_t machine_count,
                                int64_t exchange_max_bytes, const CollectiveTimeFn& time_of);

// The algorithms a partial-sum conversion whose ring algorithm is `ring`
// may take over `ranks` ring tasks, the ones the calibrated choice above
// compares: the ring, the exchange (pairwise at 2 ranks), recursive
// doubling on power-of-2 rings of 4 or more, scatter-gather from 3 ranks
// when the ring is an all-reduce. Also for benchmarks that show the
// compiler's choice.
std::vector<CollectiveAlgorithm> PartialSumCandidates(CollectiveAlgorithm ring, int64_t ranks);

// True when, for every rank r of `ring_size`, r's balanced axis-0 range of
// `logical` is the ring's flat segment r.
bool SplitMatchesRingSegments(const TensorDesc& logical, int64_t ring_size);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_COLLECTIVE_CHOICE_H_
