// oflite eval and oflite predict: use a trained model.
//
//   oflite eval    --plan P --checkpoint D [--eval-out FILE] [--iters N]
//   oflite predict --plan P --checkpoint D --out FILE.npy [--output NAME]
//
// P is a plan file written by `oflite compile` or a program of the
// training driver (oneflow_lite/driver): for a training plan its compiled
// evaluation plan (Plan.eval_plan: the forward graph, test split, one
// pass, no shuffling) runs; a plan compiled from an inference job (no
// Minimize) runs as it is. D is a checkpoint (`oflite run --checkpoint-dir`
// writes D/iter-<k>) or a root holding iter-* checkpoints (the newest is
// taken); it is verified in full against the plan's variables before
// anything runs (a missing, corrupt or mismatched variable is exit 2
// naming the file). Every variable part is restored from it: the evaluation
// may be split differently from how training ran.
//
// eval prints the `test (...)` line of `oflite run` and, for accuracy
// metrics, the exact count of correct samples (evaluate.h). predict
// writes, in iteration (= sample) order, every sample of the named output
// (Graph::AddOutput, e.g. "logits") as one .npy array [samples, ...] that
// numpy.load and torch.from_numpy(numpy.load(...)) read; --output may be
// left out when the plan has exactly one output. It prints the metrics as
// eval does.
//
// Several machines: run one process per machine like `oflite run` (usually
// `oflite launch --command eval|predict --plan P --nproc N -- --checkpoint
// D ...`); every rank reads D (a shared or copied directory), rank 0
// prints the metrics and writes the .npy file (the sink is on machine 0).
// Peer failure is handled as in `oflite run`: exit 4 on a healthy rank
// naming the culprit. Exit codes: commands.h (2: a flag, the plan, the
// checkpoint, an unknown --output; 1: the run failed or --out could not be
// written).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/evaluate.h"
#include "tools/oflite/session_setup.h"

namespace oflite {
namespace cli {
namespace {

// Keeps every iteration's value of one named output; thread-safe.
class OutputCollector final : public OutputObserver {
 public:
  explicit OutputCollector(std::string name) : name_(std::move(name)) {}

  Status OnOutput(int64_t iteration, const std::string& name, const Blob& value) override {
    if (name != name_) return Status::OK();
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<char>& bytes = values_[iteration];
    bytes.assign(static_cast<const char*>(value.raw()),
                 static_cast<const char*>(value.raw()) + value.ByteSize());
    shapes_[iteration] = value.shape().dims();
    dtype_ = value.dtype();
    return Status::OK();
  }

  // Writes the values in iteration order as one array: [iterations] for a
  // scalar output, else the rows of every iteration along axis 0.
  Status Write(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (values_.empty()) {
      return FailedPreconditionError("output '", name_, "' was never produced (no iteration ran)");
    }
    std::vector<int64_t> shape = shapes_.begin()->second;
    const bool scalar = shape.empty();
    int64_t rows = 0;
    std::vector<char> all;
    for (const auto& [iteration, bytes] : values_) {
      const std::vector<int64_t>& part = shapes_[iteration];
      if (!scalar && (part.empty() || std::vector<int64_t>(part.begin() + 1, part.end()) !=
                                          std::vector<int64_t>(shape.begin() + 1, shape.end()))) {
        return InvalidArgumentError("output '", name_, "' changes shape at iteration ", iteration,
                                    ": only its first axis may vary");
      }
      rows += scalar ? 1 : part[0];
      all.insert(all.end(), bytes.begin(), bytes.end());
    }
    if (scalar) shape = {rows};
    shape[0] = rows;
    RETURN_IF_ERROR(WriteNpy(path, dtype_, shape, all.data()).WithContext("--out"));
    std::printf("wrote %s: output '%s', %s %s\n", path.c_str(), name_.c_str(), DataTypeName(dtype_),
                Shape(shape).ToString().c_str());
    return Status::OK();
  }

 private:
  const std::string name_;
  std::mutex mutex_;
  std::map<int64_t, std::vector<char>> values_;     // guarded by mutex_
  std::map<int64_t, std::vector<int64_t>> shapes_;  // guarded by mutex_
  DataType dtype_ = DT_INVALID;                     // guarded by mutex_
};

// The plan that evaluates: a training plan's compiled evaluation plan, or
// an inference plan itself. FailedPrecondition (bad input) otherwise.
StatusOr<const Plan*> EvaluationPlanOf(const Plan& plan, const std::string& path) {
  if (!plan.is_train()) return &plan;
  switch (plan.eval_state()) {
    case EVAL_COMPILED:
      return &plan.eval_plan();
    case EVAL_NO_TEST_SPLIT:
      return FailedPreconditionError("plan '", path,
                                     "' reads no dataset with a test split: "
                                     "nothing to evaluate on");
    case EVAL_UNAVAILABLE:
      return FailedPreconditionError("plan '", path,
                                     "' has no evaluation plan: ", plan.eval_note());
    default:
      return FailedPreconditionError("plan '", path,
                                     "' carries no evaluation plan (compile it "
                                     "with `oflite compile` or the training driver)");
  }
}

// The names of the sink's named outputs.
std::vector<std::string> OutputNames(const Plan& plan) {
  std::vector<std::string> names;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      for (const SinkMetric& metric : task.sink().metric()) {
        if (metric.is_output()) names.push_back(metric.name());
      }
    }
  }
  return names;
}

// --output, or the only output of the plan.
StatusOr<std::string> ChooseOutput(const FlagSet& flags, const Plan& eval_plan) {
  const std::vector<std::string> names = OutputNames(eval_plan);
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  if (names.empty()) {
    return InvalidArgumentError(
        "the plan has no named outputs: add one with "
        "Graph::AddOutput(\"logits\", logits) and recompile");
  }
  if (!flags.Has("output")) {
    if (names.size() == 1) return names[0];
    return InvalidArgumentError("the plan has several outputs (", list, "): choose with --output");
  }
  for (const std::string& name : names) {
    if (name == flags.Get("output")) return name;
  }
  return InvalidArgumentError("--output '", flags.Get("output"), "' is not an output of the plan (",
                              list, ")");
}

// The checkpoint --checkpoint names (a checkpoint or the newest under a
// root), verified against `variables`.
StatusOr<std::string> ResolveCheckpoint(const std::string& path,
                                        const std::map<std::string, TensorDesc>& variables) {
  std::string dir = path;
  if (!IsCheckpoint(path)) {
    StatusOr<std::string> latest = ShardedCheckpointStore::LatestCheckpoint(path);
    if (!latest.ok()) return InvalidArgumentError("--checkpoint: ", latest.status().message());
    dir = *latest;
  }
  StatusOr<CheckpointManifest> manifest = VerifyCheckpoint(dir, variables);
  if (!manifest.ok()) {
    return manifest.status().WithContext("--checkpoint: checkpoint '" + dir + "' cannot be used");
  }
  return dir;
}

struct Command {
  std::string name;  // "eval" or "predict"
  bool predict = false;
};

int Fail(const Command& command, const Status& status, int code) {
  std::fprintf(stderr, "oflite %s: %s\n", command.name.c_str(), status.ToString().c_str());
  std::fflush(stderr);
  return code;
}

// A failure of a multi-machine job: a peer's first (exit 4) or this rank's
// (reported, then told to the peers).
int FailJob(const Command& command, const Status& status, MultiMachineSession* session,
            int64_t rank, int code) {
  const JobFailure failure = AttributeFailure(session, status);
  if (failure.rank >= 0 && failure.rank != rank) {
    std::fprintf(stderr, "oflite %s: rank %lld: job ended by rank %d: %s\n", command.name.c_str(),
                 static_cast<long long>(rank), failure.rank, failure.reason.message().c_str());
    return kExitPeerFailed;
  }
  Fail(command, status, code);
  if (session != nullptr) session->AbortPeers(status);
  return code;
}

std::vector<FlagSpec> CommandFlags(const Command& command) {
  std::vector<FlagSpec> specs = {
      {"plan", "the Plan file (a training plan: its evaluation plan runs)"},
      {"checkpoint", "checkpoint D (or the newest D/iter-*) holding the variables"},
      {"iters", "iterations (batches) to run (default: one pass over the split)", false, "0"},
      {"watchdog-seconds", "abort when no actor progresses this long", false, "60"},
      {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
      {"eval-out", "write the metrics (name value) to this file"}};
  if (command.predict) {
    specs.push_back({"out", "the .npy file the output's samples go to"});
    specs.push_back({"output", "the named output to write (default: the plan's only one)"});
  }
  for (FlagSpec& spec : SessionFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

int RunEvalCommand(const Command& command, int argc, char** argv) {
  FlagSet flags(command.name, "--plan PLAN.pb --checkpoint DIR [flags]", CommandFlags(command));
  Status parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) return Fail(command, parsed, kExitBadInput);
  if (flags.help_requested()) {
    flags.PrintHelp();
    return kExitOk;
  }
  for (const char* required : {"plan", "checkpoint", "out"}) {
    if (required == std::string("out") && !command.predict) continue;
    if (!flags.Has(required) || flags.Get(required).empty()) {
      return Fail(command, InvalidArgumentError("--", required, " is required"), kExitBadInput);
    }
  }
  const std::string plan_path = flags.Get("plan");
  StatusOr<Plan> plan = LoadPlan(plan_path);
  if (!plan.ok()) return Fail(command, plan.status(), kExitBadInput);
  Status verified = VerifyPlan(*plan);
  if (!verified.ok()) {
    return Fail(command, verified.WithContext("plan '" + plan_path + "'"), kExitBadInput);
  }
  StatusOr<const Plan*> eval_plan = EvaluationPlanOf(*plan, plan_path);
  if (!eval_plan.ok()) return Fail(command, eval_plan.status(), kExitBadInput);
  const Plan& evaluated = **eval_plan;
  StatusOr<SessionFlags> session_flags = ReadSessionFlags(flags, evaluated);
  if (!session_flags.ok()) return Fail(command, session_flags.status(), kExitBadInput);
  StatusOr<int64_t> iters = flags.GetInt("iters", 0, evaluated.total_iters());
  if (!iters.ok()) return Fail(command, iters.status(), kExitBadInput);
  StatusOr<std::chrono::milliseconds> watchdog =
      flags.GetSeconds("watchdog-seconds", 1, kMaxDurationSeconds);
  if (!watchdog.ok()) return Fail(command, watchdog.status(), kExitBadInput);
  std::string output;
  if (command.predict) {
    StatusOr<std::string> chosen = ChooseOutput(flags, evaluated);
    if (!chosen.ok()) return Fail(command, chosen.status(), kExitBadInput);
    output = *chosen;
  }
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(evaluated);
  if (!variables.ok()) return Fail(command, variables.status(), kExitBadInput);
  StatusOr<std::string> checkpoint = ResolveCheckpoint(flags.Get("checkpoint"), *variables);
  if (!checkpoint.ok()) return Fail(command, checkpoint.status(), kExitBadInput);

  const int64_t rank = session_flags->rank;
  const std::string name = command.name;
  StatusOr<std::unique_ptr<MultiMachineSession>> session = StartSession(
      flags, evaluated, *session_flags, "oflite " + name, [name, rank](const JobFailure& failure) {
        const bool peer = failure.rank != rank;
        std::fprintf(
            stderr, "oflite %s: rank %lld: %s%s\n", name.c_str(), static_cast<long long>(rank),
            peer ? ("job ended by rank " + std::to_string(failure.rank) + ": ").c_str() : "",
            peer ? failure.reason.message().c_str() : failure.reason.ToString().c_str());
        std::fflush(stderr);
        std::fflush(stdout);
        _exit(peer ? kExitPeerFailed : kExitFailure);
      });
  if (!session.ok()) {
    const bool refused = session.status().code() == StatusCode::kPermissionDenied;
    return Fail(command, session.status(), refused ? kExitBadInput : kExitFailure);
  }
  std::printf("%s: %s with the variables of %s\n", name.c_str(),
              plan->is_train() ? "the plan's evaluation plan" : "the inference plan",
              checkpoint->c_str());
  std::fflush(stdout);

  CheckpointVariableStore::Options store_options;
  store_options.restore_dir = *checkpoint;
  store_options.final_iteration = -1;  // keeps nothing in memory
  store_options.variables = *variables;
  CheckpointVariableStore store(store_options);
  OutputCollector collector(output);
  EvaluationRequest request;
  request.eval_plan = &evaluated;
  request.variables = &store;
  request.outputs = command.predict ? &collector : nullptr;
  request.base.machine_id = rank;
  request.base.watchdog_timeout = *watchdog;
  request.iterations = *iters;
  request.session = session->get();
  StatusOr<EvaluationResult> result = RunEvaluation(request);
  if (!result.ok()) return FailJob(command, result.status(), session->get(), rank, kExitFailure);
  if (rank == 0) {
    Status reported = ReportEvaluation(*result, flags.Get("eval-out"));
    if (reported.ok() && command.predict) reported = collector.Write(flags.Get("out"));
    if (!reported.ok()) return Fail(command, reported, kExitFailure);
  } else {
    std::printf("%s: this machine's part done in %.1fs; rank 0 reports\n", name.c_str(),
                result->seconds);
  }
  if (*session != nullptr && flags.GetBool("stats")) {
    std::printf("%s\n", (*session)->StatsSummary().c_str());
  }
  return kExitOk;
}

}  // namespace

int RunEval(int argc, char** argv) { return RunEvalCommand({"eval", false}, argc, argv); }

int RunPredict(int argc, char** argv) { return RunEvalCommand({"predict", true}, argc, argv); }

}  // namespace cli
}  // namespace oflite
