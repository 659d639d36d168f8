// Autodiff: a Job -> Job pass that appends the backward graph.
//
// Starting from job.conf.train.loss_lbn, the pass walks the forward ops in
// reverse topological order. An op is differentiated when one of its outputs
// receives a gradient and one of its inputs depends on a trainable variable
// (`variable` op with trainable = true); its registered GradFn (op_def.h)
// adds backward ops through a GradContext. Where a blob feeds several
// differentiated consumers (fan-out, shared weights), the contributions are
// summed with one `add` op. The loss gradient is seeded with ones
// (zeros_like + scalar_add 1), i.e. the gradient of sum(loss); the graph API
// makes the loss a scalar mean.
//
// Backward ops are marked is_backward, take their forward op's placement,
// and are pruned when no variable gradient needs them. Shape inference runs
// on every added op. Errors name the op: an op on the path without a
// gradient rule, a rule that fails or declares a gradient of the wrong
// shape. Pure function; thread-compatible.
#ifndef ONEFLOW_LITE_API_AUTODIFF_H_
#define ONEFLOW_LITE_API_AUTODIFF_H_

#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

struct AutodiffResult {
  Job job;  // the input job plus backward ops and their blob descs
  // Trainable variable op name -> lbn of d(loss)/d(variable). Variables the
  // loss does not depend on are absent.
  std::map<std::string, std::string> variable_grads;
};

struct AutodiffOptions {
  // Micro-batches (micro_batches.h): the losses of the micro-batches, whose
  // mean is the job's loss. When not empty, each part is seeded with
  // 1 / loss_parts.size() instead of seeding the loss with 1, so that the
  // backward of micro-batch k needs only its own forward; the job's loss
  // (their mean) is then not differentiated. The seed ops of part k get
  // the part's producer's micro_batch tag like every backward op.
  std::vector<std::string> loss_parts;
};

// `job` must carry blob descs (Job.blob) and a loss lbn. Backward ops made
// for a forward op with OpConf.micro_batch carry the same tag.
StatusOr<AutodiffResult> Autodiff(const Job& job, const AutodiffOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_AUTODIFF_H_
