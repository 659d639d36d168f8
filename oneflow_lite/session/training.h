// Training a plan on this node, then evaluating it: the body of `oflite
// run` and of the training driver's programs, written once.
//
// TrainingFlagSpecs() are the flags of a training run beside the node's
// (node_options.h): --iters, --log-every, --save-every, --checkpoint-dir,
// --resume, --eval, --eval-every, --eval-out, --metrics-out, --trace, --trace-iters,
// --trace-level. ReadTrainingRequest reads and checks them against the plan
// before anything starts (InvalidArgument naming the flag: exit 2), output
// files and folders included (through `env`): --checkpoint-dir must be a
// folder or not exist yet (Train creates it before training), --eval-out
// and --metrics-out must land in an existing folder.
//
// Train runs the request on a started NodeSession (files through its
// NodeOptions::env):
//  - with several machines, every rank first agrees on tracing (a job whose
//    ranks differ in --trace fails at once naming them) and, when traced,
//    measures its clock offset to rank 0 (trace_support.h);
//  - --resume: the checkpoint is chosen and verified in full
//    (checkpoint_choice.h) and the run starts at its iteration;
//  - training prints a progress line every --log-every iterations (and the
//    first and last): iteration, metrics, samples/s, ETA; --metrics-out
//    gets "iteration name value" lines; checkpoints every --save-every;
//    then "trained iterations A..B in Ts (N actors, M threads)";
//  - unless --eval=false (or the plan is not a training plan), the plan's
//    evaluation plan runs with the trained variables (on several machines,
//    each rank with the parts it trained; after a --resume at the last
//    iteration, from that checkpoint) and is reported by evaluation.h's
//    ReportEvaluation, the same lines and --eval-out keys as `oflite eval`.
//    A plan without an evaluation plan, or whose job reads no test split,
//    skips it with a note; one whose evaluation could not be compiled fails
//    with the compiler's reason (Plan.eval_note).
// Returns the exit code (exit_codes.h); every failure is reported through
// NodeSession::Fail (one line, naming the culprit rank in a job). Blocks
// until done. `result` (may be null) gets the iterations, the run's
// counters and the evaluation's result.
#ifndef ONEFLOW_LITE_SESSION_TRAINING_H_
#define ONEFLOW_LITE_SESSION_TRAINING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/evaluation.h"
#include "oneflow_lite/session/flags.h"
#include "oneflow_lite/session/node_session.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace session {

// The largest --iters, --log-every or --save-every accepted (2^40).
inline constexpr int64_t kMaxIterations = int64_t{1} << 40;

struct TrainingRequest {
  int64_t iterations = 0;  // 0: the plan's
  int64_t log_every = 50;
  int64_t save_every = 0;       // 0: never
  std::string checkpoint_dir;   // where checkpoints go (D/iter-<N>)
  std::string resume;           // a checkpoint or a root of them; "" starts fresh
  bool evaluate = true;
  int64_t eval_every = 0;       // also evaluate every N iterations (0: only at the end)
  std::string eval_out;
  std::string metrics_out;
  std::string trace_path;       // "": no trace; several machines: a folder
  trace::TracerOptions trace;   // window and level (the rank is set by Train)
};

struct TrainingResult {
  int64_t start_iteration = 0;
  int64_t end_iteration = 0;
  RunStats stats;
  std::optional<EvaluationResult> evaluation;  // rank 0's merged result
};

std::vector<cli::FlagSpec> TrainingFlagSpecs();

StatusOr<TrainingRequest> ReadTrainingRequest(const cli::FlagSet& flags, const Plan& plan,
                                              Env* env = Env::Default());

// The checks ReadTrainingRequest makes, for a request built in code.
Status CheckTrainingRequest(const TrainingRequest& request, const Plan& plan,
                            Env* env = Env::Default());

int Train(NodeSession* node, const Plan& plan, const TrainingRequest& request,
          TrainingResult* result = nullptr);

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_TRAINING_H_
