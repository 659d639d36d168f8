// Running an evaluation plan (Plan.eval_plan, or an inference plan) with
// given variables, on one machine or as this rank's part of a
// multi-machine job, and reporting what it measured: the one
// implementation behind `oflite eval`, `oflite predict`, the evaluation
// after `oflite run`'s training (also from a final checkpoint) and the
// training driver.
//
// RunEvaluation runs `eval_plan` once through the node session
// (NodeSession::RunPlan, named "eval"; request.variables restore every
// variable part, request.outputs receive the sink's named outputs). With
// several machines it gathers every rank's metric sums on rank 0
// (GatherToRoot "eval-metrics") before the session's last Finish barrier;
// rank 0 gets the merged sums, the other ranks their own (the sink lives on
// machine 0, so theirs are empty). Blocks until done; bounded by the
// runtime's watchdog and the session's timeouts.
//
// ReportEvaluation prints, on rank 0,
//   test (9984 samples, 1.2s):  accuracy 0.8512  loss 0.4213
// then, for each metric named "accuracy" or ending in "_accuracy" (the
// fraction of a batch that is right), the exact count over the pass,
//   accuracy: 8498 of 9984 samples correct
// (per iteration, value * samples per iteration is a whole number; the
// sum of their rounded values is the count, immune to float averaging).
// Other metrics are per-batch means averaged over the pass: with equal
// batches that is the mean over every sample. `eval_out` (when not empty)
// gets "name value" lines at full precision, plus "<name>_correct N" and
// "samples N" lines, written atomically. The other ranks print
//   <label>: this machine's part done in 0.4s; rank 0 prints the metrics
// InvalidArgument naming eval_out when it cannot be written.
#ifndef ONEFLOW_LITE_SESSION_EVALUATION_H_
#define ONEFLOW_LITE_SESSION_EVALUATION_H_

#include <cstdint>
#include <map>
#include <string>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/eval_support.h"
#include "oneflow_lite/session/node_session.h"

namespace oflite {
namespace session {

struct EvaluationRequest {
  const Plan* eval_plan = nullptr;     // not owned; outlives the call
  VariableStore* variables = nullptr;  // restores every part; not owned
  OutputObserver* outputs = nullptr;   // may be null
  int64_t iterations = 0;              // 0: the plan's (one pass)
};

struct EvaluationResult {
  MetricSums sums;  // merged over the ranks on rank 0
  // Per iteration, the rounded value * samples of each accuracy metric,
  // summed (merged over the ranks on rank 0).
  std::map<std::string, int64_t> correct;
  int64_t samples = 0;  // iterations * samples per iteration (rank 0)
  double seconds = 0;
};

StatusOr<EvaluationResult> RunEvaluation(NodeSession* node, const EvaluationRequest& request);

// `label` names the pass in the other ranks' line ("test", "eval").
// `eval_out` is written through node.options().env.
Status ReportEvaluation(const NodeSession& node, const EvaluationResult& result,
                        const std::string& eval_out, const std::string& label);

// An --eval-out (or any output file) that cannot be written is refused
// before any work: its folder must exist and the path must not be a
// folder. InvalidArgument naming `flag` and the path; OK for "".
Status CheckOutputFile(Env* env, const std::string& path, const std::string& flag);

// Whether `name` is reported as an exact count ("accuracy", "*_accuracy").
bool IsAccuracyMetric(const std::string& name);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_EVALUATION_H_
