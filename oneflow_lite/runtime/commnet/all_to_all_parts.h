// AllToAllParts: the all-to-all algorithm of a collective actor
// (COLLECTIVE_ALL_TO_ALL): every ring task sends its local part of a piece
// to every other ring task (BoxingConf.ring_task_id), local or remote,
// through CommNetRoute::SendWithData; once all parts of a piece are there,
// the actor assembles the logical tensor (in_sbp: P sums the parts in
// ring-rank order, S(a) concatenates the balanced ranges, B takes rank 0's)
// and cuts its output part (out_sbp: S(a) its balanced range, B all, P rank
// 0 all and the others zeros), as BoxingBody does on one machine.
//
// S(a) -> S(b) (a != b) of a static tensor moves blocks instead: each rank
// sends every peer only the block that peer's output needs (its own range
// along a, the peer's along b: 1/n of its part, not all of it) as raw
// bytes in the block's row-major order (CommNetRoute::SendWithBytes; no
// payload header: both ends derive the block's shape from the plan, and a
// payload of another size is a DataLoss naming the rank), and places the
// blocks it receives (and its own) straight into its output, without
// assembling the logical tensor. Each rank sends (n-1)/n of its part
// where whole parts would send n-1 times it.
//
// Holds the peers' parts by piece until they are assembled. Used on its
// actor's thread only; `task` and `route` must outlive it.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_ALL_TO_ALL_PARTS_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_ALL_TO_ALL_PARTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/runtime/actor_message.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/regst.h"
#include "proto/plan.pb.h"

namespace oflite {

class AllToAllParts {
 public:
  // `rank_of`: ring task id -> ring rank; `self` is this actor's task id.
  AllToAllParts(const TaskProto& task, const TensorDesc& logical,
                const std::map<int64_t, int64_t>& rank_of, int64_t self, CommNetRoute* route);

  // Sends this rank's part (register `part`, named by the "produced" that
  // brought it) to every other ring task.
  Status SendPart(const ActorMessage& produced, const Regst& part);
  // A peer's part arrived: its payload is taken from the route.
  Status OnPeerPart(const ActorMessage& produced);
  // Every peer's part of `piece` is there.
  bool HasAllParts(int64_t piece) const;
  // Assembles the logical tensor of `piece` from `own` and the peers' parts
  // and cuts this rank's output part into `output`; forgets the piece.
  Status Assemble(int64_t piece, const Blob& own, Blob* output);
  // "peer parts for 2 pieces (piece 3: 1 of 2)".
  std::string Describe() const;

 private:
  Status Combine(const std::vector<std::string>& parts, Blob* output);
  // Block mode (S(in_axis_) -> S(out_axis_)): the shape of the block rank
  // `from` sends rank `to`.
  Shape BlockShape(int64_t from, int64_t to) const;
  Status SendBlocks(const ActorMessage& produced, const Blob& part);
  Status AssembleBlocks(int64_t piece, const Blob& own, Blob* output);

  const TaskProto* task_;
  const TensorDesc logical_;
  const std::map<int64_t, int64_t> rank_of_;
  const int64_t self_;
  CommNetRoute* route_;
  std::map<int64_t, std::map<int64_t, std::string>> parts_;  // piece -> rank -> payload
  std::vector<char> whole_;  // the logical tensor of the current assembly
  // Block mode: in_axis_ >= 0 (S(in_axis_) -> S(out_axis_), a static tensor).
  int64_t in_axis_ = -1;
  int64_t out_axis_ = -1;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_ALL_TO_ALL_PARTS_H_
