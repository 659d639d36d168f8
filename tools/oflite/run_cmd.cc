// oflite run: run this node's part of a Plan with the actor runtime
// (oneflow_lite/runtime), print progress, evaluate at the end. The command
// parses its flags and calls the node session library
// (oneflow_lite/session: NodeSession::Start, then Train); what follows is
// what that does.
//
// Progress: one line every --log-every iterations (and the first and last):
// iteration, loss, accuracy, samples/s over the interval, ETA (samples from
// Plan.samples_per_iter). After training, unless --eval=false, the plan's
// evaluation plan (Plan.eval_plan, compiled with it by `oflite compile`:
// the forward graph on the test split, one pass) is run by a second runtime
// with the trained variables; its metrics, averaged over the pass, are
// printed as the test accuracy/loss. `oflite run` never compiles and never
// reads the plan's embedded Job (docs/plan_format.md).
// Checkpoints: --save-every N --checkpoint-dir D writes D/iter-<k>; --resume
// D (a checkpoint, or a root holding iter-* directories: the latest) starts
// at the checkpoint's iteration with its variables.
// Multi-machine plans (machine id == rank, one process each, usually
// started by `oflite launch`): the process joins the job's CommNet
// (--master, --comm: a provider of comm/builtin_providers.h; the job token
// and this node's address come from OFLITE_JOB_TOKEN and OFLITE_HOST),
// barriers once every rank has built its actors, and after training
// barriers again. Peer loss is watched from the join to the last barrier
// (MultiMachineSession): a lost peer or a peer's failure ends this rank at
// once with exit 4 (kExitPeerFailed) and the line
//   oflite run: rank R: job ended by rank C: <C's error, or "lost rank C: ...">
// naming the first culprit C, the same on every surviving rank. A rank that
// fails itself (its runtime, its evaluation) exits 1 (2 for bad input) and
// tells every peer through the abort notice. (Tests freeze a rank at a
// finish barrier with --test-freeze-at=train-finish|eval-finish.) Their
// evaluation is distributed: every rank runs its part of the evaluation plan
// of the same file (BeginRun's fingerprint check still confirms it) as a
// second Runtime
// over the same CommNet with the variable parts it trained
// (PartCapturingStore / TrainedPartsStore, eval_support.h), and sends its
// sink's metric sums to rank 0, which merges them and prints the one
// "test (...)" line; the other ranks print that their part is done. The
// result equals a single-machine evaluation of the same trained variables.
// A job without a dataset that has a test split (e.g. the synthetic
// random_batch source: EVAL_NO_TEST_SPLIT), or a plan compiled without an
// evaluation plan (compiler::Compile alone), skips the evaluation with a
// note; a plan whose evaluation could not be compiled (EVAL_UNAVAILABLE)
// fails after training with the compiler's error (Plan.eval_note).
// --stats prints the CommNet counters at exit (training and evaluation);
// --metrics-out FILE writes "iteration name value" lines for every training
// iteration this machine's sink reports; --eval-out FILE writes the test
// metrics as "name value" lines at full precision (where the test line is
// printed).
// --trace FILE (multi-machine: a directory, DIR/rank-R.json) writes a
// timeline of training, --trace-iters A:B only of those iterations,
// --trace-level messages with a slice for every message handled; every
// rank measures its clock offset to rank 0 first (docs/tracing.md).
// Exit codes: commands.h (1: the run failed; the message names the op and
// iteration, or the actors the watchdog found stuck; 2: bad input: every
// flag is read and range-checked (flags.h) against the plan before anything
// starts, and --resume verifies the whole checkpoint first, so a corrupt
// one is refused naming its file and, under a root, the newest intact one).
#include "oneflow_lite/session/node_session.h"
#include "oneflow_lite/session/training.h"
#include "tools/oflite/commands.h"

namespace oflite {
namespace cli {

int RunRun(int argc, char** argv) {
  const std::string command = "oflite run";
  std::vector<FlagSpec> specs = {{"plan", "the Plan file"}};
  for (std::vector<FlagSpec> more : {session::TrainingFlagSpecs(), session::NodeFlagSpecs()}) {
    specs.insert(specs.end(), more.begin(), more.end());
  }
  FlagSet flags(command, "--plan PLAN.pb [--rank R --master HOST:PORT] [flags]", std::move(specs));
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, command)) return *done;
  if (!flags.Has("plan")) {
    return session::ReportFailure(command, InvalidArgumentError("--plan is required"),
                                  kExitBadInput);
  }
  StatusOr<Plan> plan = session::LoadVerifiedPlan(flags.Get("plan"));
  if (!plan.ok()) return session::ReportFailure(command, plan.status(), kExitBadInput);
  StatusOr<session::NodeOptions> node_options =
      session::ReadNodeOptions(flags, *plan, session::ProcessEnvironment(), command);
  if (!node_options.ok()) {
    return session::ReportFailure(command, node_options.status(), kExitBadInput);
  }
  StatusOr<session::TrainingRequest> request =
      session::ReadTrainingRequest(flags, *plan, node_options->env);
  if (!request.ok()) return session::ReportFailure(command, request.status(), kExitBadInput);
  StatusOr<std::unique_ptr<session::NodeSession>> node =
      session::NodeSession::Start(*plan, *node_options);
  if (!node.ok()) return session::ReportStartFailure(command, node.status());
  return session::Train(node->get(), *plan, *request);
}

}  // namespace cli
}  // namespace oflite
