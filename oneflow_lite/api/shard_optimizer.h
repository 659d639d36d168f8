// Sharded optimizer states (ZeRO): a Job -> Job pass over a trained,
// data-parallel job (after the optimizer pass) that lays every model
// variable and its optimizer state out split across the data-parallel
// devices instead of replicated (docs/compiler.md, "Sharded optimizer
// states (ZeRO)").
//
// For each update op (sgd_update, momentum_update, adam_update) whose
// variable sits on a flat placement of n >= 2 devices, has no SBP hint of
// its own (a tensor-parallel layout is kept) and has an axis of at least n
// rows (ShardAxis, ops/sbp.h; axis 0 when it fits):
//   - the variable and its state variables (momentum, m, v) are hinted
//     S(axis): each device stores and updates 1/n of them;
//   - one `identity` op "<variable>-gathered" (input and output hinted B)
//     reads the variable, and every other reader (forward and backward)
//     reads it instead: one all-gather per variable per iteration. (An
//     identity rather than B hints on the readers: an op's input hints are
//     all or nothing, and a reader's other inputs must stay free.) The
//     update's control inputs become that op (the only reader left);
//   - the update's inputs are hinted S(axis) (scale B), so the gradient,
//     a partial sum in data parallelism, is reduce-scattered, not
//     all-reduced.
// With global-norm clipping, the `clip_scale` op becomes
// clip_scale_from_square_sum (same name and output) over `square_sum` ops:
// one per placement over the sharded gradients (inputs S(axis), output P:
// each device sums the squares of its slices, the compiler all-reduces the
// scalar), one over the gradients left whole (B). Weight decay and learning
// rate schedules are elementwise or per iteration: unchanged.
//
// Pure function; thread-compatible. Errors (InvalidArgument, naming the
// flag, the variable or source, the placement and the numbers, with a
// suggestion): a job that does not train; a data source hinted B (the
// batch is not split, so there is no data parallelism to shard over); a
// hierarchical placement; nothing to shard (every variable on one device,
// or each one kept for the reason its note gives).
#ifndef ONEFLOW_LITE_API_SHARD_OPTIMIZER_H_
#define ONEFLOW_LITE_API_SHARD_OPTIMIZER_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

struct ShardOptimizerReport {
  // "'dense-weight' S(0) over 2 devices, 2 state variable(s)", in the order
  // of the update ops.
  std::vector<std::string> sharded;
  // One line per variable left as it was, and why.
  std::vector<std::string> kept;
};

// The pass above. `report` (may be null) receives what was sharded and
// what was not.
StatusOr<Job> ShardOptimizerStates(const Job& job, ShardOptimizerReport* report = nullptr);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_SHARD_OPTIMIZER_H_
