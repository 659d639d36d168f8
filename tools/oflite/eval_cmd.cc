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

#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "oneflow_lite/session/checkpoint_choice.h"
#include "oneflow_lite/session/evaluation.h"
#include "oneflow_lite/session/node_session.h"
#include "tools/oflite/commands.h"

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

struct Command {
  std::string name;  // "eval" or "predict"
  bool predict = false;
};

std::vector<FlagSpec> CommandFlags(const Command& command) {
  std::vector<FlagSpec> specs = {
      {"plan", "the Plan file (a training plan: its evaluation plan runs)"},
      {"checkpoint", "checkpoint D (or the newest D/iter-*) holding the variables"},
      {"iters", "iterations (batches) to run (default: one pass over the split)", false, "0"},
      {"eval-out", "write the metrics (name value) to this file"}};
  if (command.predict) {
    specs.push_back({"out", "the .npy file the output's samples go to"});
    specs.push_back({"output", "the named output to write (default: the plan's only one)"});
  }
  for (FlagSpec& spec : session::NodeFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

int RunEvalCommand(const Command& command, int argc, char** argv) {
  const std::string program = "oflite " + command.name;
  FlagSet flags(program, "--plan PLAN.pb --checkpoint DIR [flags]", CommandFlags(command));
  auto fail = [&program](const Status& status, int code) {
    return session::ReportFailure(program, status, code);
  };
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, program)) return *done;
  for (const char* required : {"plan", "checkpoint", "out"}) {
    if (required == std::string("out") && !command.predict) continue;
    if (!flags.Has(required) || flags.Get(required).empty()) {
      return fail(InvalidArgumentError("--", required, " is required"), kExitBadInput);
    }
  }
  const std::string plan_path = flags.Get("plan");
  StatusOr<Plan> plan = session::LoadVerifiedPlan(plan_path);
  if (!plan.ok()) return fail(plan.status(), kExitBadInput);
  StatusOr<const Plan*> eval_plan = EvaluationPlanOf(*plan, plan_path);
  if (!eval_plan.ok()) return fail(eval_plan.status(), kExitBadInput);
  const Plan& evaluated = **eval_plan;
  StatusOr<session::NodeOptions> node_options =
      session::ReadNodeOptions(flags, evaluated, session::ProcessEnvironment(), program);
  if (!node_options.ok()) return fail(node_options.status(), kExitBadInput);
  StatusOr<int64_t> iters = flags.GetInt("iters", 0, evaluated.total_iters());
  if (!iters.ok()) return fail(iters.status(), kExitBadInput);
  Env* env = node_options->env;
  Status output_ok = session::CheckOutputFile(env, flags.Get("eval-out"), "--eval-out");
  if (output_ok.ok() && command.predict) {
    output_ok = session::CheckOutputFile(env, flags.Get("out"), "--out");
  }
  if (!output_ok.ok()) return fail(output_ok, kExitBadInput);
  std::string output;
  if (command.predict) {
    StatusOr<std::string> chosen = ChooseOutput(flags, evaluated);
    if (!chosen.ok()) return fail(chosen.status(), kExitBadInput);
    output = *chosen;
  }
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(evaluated);
  if (!variables.ok()) return fail(variables.status(), kExitBadInput);
  StatusOr<std::string> checkpoint =
      session::ChooseCheckpoint(flags.Get("checkpoint"), *variables, env);
  if (!checkpoint.ok()) return fail(checkpoint.status(), kExitBadInput);

  StatusOr<std::unique_ptr<session::NodeSession>> node =
      session::NodeSession::Start(evaluated, *node_options);
  if (!node.ok()) return session::ReportStartFailure(program, node.status());
  std::printf("%s: %s with the variables of %s\n", command.name.c_str(),
              plan->is_train() ? "the plan's evaluation plan" : "the inference plan",
              checkpoint->c_str());
  std::fflush(stdout);

  std::unique_ptr<CheckpointVariableStore> store =
      session::CheckpointRestorer(*checkpoint, *variables);
  OutputCollector collector(output);
  session::EvaluationRequest request;
  request.eval_plan = &evaluated;
  request.variables = store.get();
  request.outputs = command.predict ? &collector : nullptr;
  request.iterations = *iters;
  StatusOr<session::EvaluationResult> result = session::RunEvaluation(node->get(), request);
  if (!result.ok()) return (*node)->Fail(result.status(), kExitFailure);
  Status reported = session::ReportEvaluation(**node, *result, flags.Get("eval-out"),
                                              command.name);
  if (reported.ok() && command.predict && (*node)->rank() == 0) {
    reported = collector.Write(flags.Get("out"));
  }
  if (!reported.ok()) return fail(reported, kExitFailure);
  (*node)->PrintStats();
  return kExitOk;
}

}  // namespace

int RunEval(int argc, char** argv) { return RunEvalCommand({"eval", false}, argc, argv); }

int RunPredict(int argc, char** argv) { return RunEvalCommand({"predict", true}, argc, argv); }

}  // namespace cli
}  // namespace oflite
