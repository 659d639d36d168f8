// Micro-batches: one iteration's batch split into M micro-batches whose
// gradients accumulate before one optimizer update (GPipe, 1F1B). The
// graph API's Graph::SetMicroBatches asks for it; Graph::Build calls
// UnrollMicroBatches on the forward Job, before autodiff, and hands the
// micro-batch losses to Autodiff (AutodiffOptions.loss_parts).
//
// The unroll, on a forward Job with blob descs:
//   - a data source (OpDef::is_source, not a variable) stays one op; each
//     of its outputs read downstream gets M `slice` ops, micro-batch k
//     taking rows k, k + M, k + 2M, ... (start k, step M on axis 0; the
//     stop is "to the end", so an evaluation batch of another size slices
//     the same way). Strided rows keep a data-parallel split: with an S(0)
//     batch of B rows over n devices and B divisible by n x M, micro-batch
//     k of each device is its own rows whose local index is k mod M, so the
//     slice runs S(0) -> S(0) without moving data (ops/math/shape_ops.cc);
//   - every op that reads a batch-dependent blob is cloned M times, clone k
//     named "<op>-mb<k>" reading micro-batch k's blobs and every shared
//     blob; the clones and slices carry OpConf.micro_batch = k and the
//     op's placement;
//     a reshape's target shape has its first dimension (the batch, or the
//     batch times other axes) divided by M; other attributes are copied,
//     so an op whose attributes name the batch size otherwise is not
//     supported (seeded ops such as dropout repeat their seed per clone);
//   - every other op (variables, ops of variables and constants only) is
//     shared by all micro-batches;
//   - the loss and each batch-dependent metric become the mean of their M
//     clones (`add` of the clones, `scalar_mul` 1/M, untagged, on the
//     producer's placement): with equal micro-batches and a loss that is a
//     mean over examples, that is the full batch's value; each output
//     (Graph::AddOutput) is the clones' rows put back in batch order
//     (`concat`, `reshape`, `transpose`, `reshape`);
//   - JobConf.pipeline records M and the schedule, which the compiler
//     enforces (compiler/pipeline_schedule.h).
// Errors (InvalidArgument, naming "micro-batches", the numbers and valid
// choices): M < 2 (M = 1 is no micro-batching: callers skip the unroll), a
// source batch that M does not divide, or whose per-device share (an S(0)
// hint over n devices) M does not divide; Unimplemented for an op that
// writes a variable in place from the batch (e.g. batch_norm's running
// statistics, which would see M micro-batches instead of one batch);
// FailedPrecondition for a loss that does not depend on the data.
// Pure function; thread-compatible.
#ifndef ONEFLOW_LITE_API_MICRO_BATCHES_H_
#define ONEFLOW_LITE_API_MICRO_BATCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

struct MicroBatchedJob {
  Job job;  // the unrolled forward job, blob descs re-inferred
  // The loss of micro-batch k at index k (AutodiffOptions.loss_parts).
  std::vector<std::string> loss_parts;
};

StatusOr<MicroBatchedJob> UnrollMicroBatches(const Job& forward, int64_t micro_batches,
                                             PipelineSchedule schedule);

// The divisors of `n` nearest to `wanted` from below and above (one or
// two values, each >= 1), for error messages: NearestDivisors(64, 3) is
// {2, 4}.
std::vector<int64_t> NearestDivisors(int64_t n, int64_t wanted);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_MICRO_BATCHES_H_
