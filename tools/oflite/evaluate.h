// Running an evaluation plan (Plan.eval_plan, or an inference plan) with
// given variables, on one machine or as this rank's part of a
// multi-machine job, and reporting what it measured. Shared by `oflite
// eval`, `oflite predict` and `oflite run --resume <final checkpoint>`.
//
// RunEvaluation creates one Runtime for `eval_plan` (with
// request.variables restoring every variable part, request.outputs
// receiving the sink's named outputs) and runs it to the end. With a
// session (multi-machine), it first calls session->BeginRun when
// `begin_run` (a run preceded this one on the session) and closes with
// the session's Finish(last=true) barrier after gathering every rank's
// metric sums on rank 0 (GatherToRoot "eval-metrics"); rank 0 gets the
// merged sums, the other ranks their own (the sink lives on machine 0,
// so theirs are empty). Blocks until done; bounded by the runtime's
// watchdog and the session's timeouts.
//
// ReportEvaluation prints the line `oflite run` always printed,
//   test (9984 samples, 1.2s):  accuracy 0.8512  loss 0.4213
// then, for each metric named "accuracy" or ending in "_accuracy" (the
// fraction of a batch that is right), the exact count over the pass,
//   accuracy: 8498 of 9984 samples correct
// (per iteration, value * samples per iteration is a whole number; the
// sum of their rounded values is the count, immune to float averaging).
// Other metrics are per-batch means averaged over the pass: with equal
// batches that is the mean over every sample. `eval_out` (when not empty)
// gets "name value" lines at full precision, plus "<name>_correct N" and
// "samples N" lines. InvalidArgument naming eval_out when it cannot be
// written.
#ifndef TOOLS_OFLITE_EVALUATE_H_
#define TOOLS_OFLITE_EVALUATE_H_

#include <cstdint>
#include <map>
#include <string>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "tools/oflite/eval_support.h"

namespace oflite {
namespace cli {

struct EvaluationRequest {
  const Plan* eval_plan = nullptr;         // not owned; outlives the call
  VariableStore* variables = nullptr;      // restores every part; not owned
  OutputObserver* outputs = nullptr;       // may be null
  RuntimeOptions base;                     // machine id, watchdog, device, NaN check
  int64_t iterations = 0;                  // 0: the plan's (one pass)
  MultiMachineSession* session = nullptr;  // null: one machine
  bool begin_run = false;                  // the session ran another plan before this one
};

struct EvaluationResult {
  MetricSums sums;  // merged over the ranks on rank 0
  // Per iteration, the rounded value * samples of each accuracy metric,
  // summed (merged over the ranks on rank 0).
  std::map<std::string, int64_t> correct;
  int64_t samples = 0;  // iterations * samples per iteration (rank 0)
  double seconds = 0;
};

StatusOr<EvaluationResult> RunEvaluation(const EvaluationRequest& request);

Status ReportEvaluation(const EvaluationResult& result, const std::string& eval_out);

// Whether `name` is reported as an exact count ("accuracy", "*_accuracy").
bool IsAccuracyMetric(const std::string& name);

}  // namespace cli
}  // namespace oflite

#endif  // TOOLS_OFLITE_EVALUATE_H_
