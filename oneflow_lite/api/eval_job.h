// The evaluation job: the forward part of a training job, pointed at
// another data split.
//
// MakeEvalJob keeps every op that is neither is_backward nor is_optimizer,
// turns each `dropout` op into an `identity` op of the same name (and
// rewires its consumers from "<name>/y_0" to "<name>/out_0"), puts every
// `batch_norm` in inference mode (training = false: running statistics),
// sets split / shuffle = false / batch_size on every `fashion_mnist` and
// `npy_dataset` source (an npy source's split sizes come from its count /
// test_count attributes, recorded by NpyData (data_sources.h); no test files: no
// test split) and split / batch_size on every `token_window` source (its
// count / test_count: eval_batches * batch windows, recorded by
// TokenWindows; the windows of iterations 0, 1, ... of the split, the same
// every evaluation),
// drops the loss and optimizer (keeping the metrics, the loss among them),
// and re-runs shape inference. total_iters becomes one pass over the
// split (split size / batch size, rounded down). Pure function.
#ifndef ONEFLOW_LITE_API_EVAL_JOB_H_
#define ONEFLOW_LITE_API_EVAL_JOB_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {

struct EvalJobOptions {
  std::string split = "test";
  int64_t batch_size = 0;  // 0: keep each source's batch size
};

StatusOr<Job> MakeEvalJob(const Job& train_job, const EvalJobOptions& options = {});

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_EVAL_JOB_H_
