#include "oneflow_lite/session/training.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "oneflow_lite/runtime/variable_stores.h"
#include "oneflow_lite/session/checkpoint_choice.h"
#include "oneflow_lite/session/checkpoint_gather.h"
#include "oneflow_lite/session/eval_support.h"
#include "oneflow_lite/session/exit_codes.h"
#include "oneflow_lite/session/trace_support.h"

namespace oflite {
namespace session {
namespace {

// Prints a progress line per interval; thread-safe (called by the sink).
class ProgressPrinter : public MetricsObserver {
 public:
  ProgressPrinter(Env* env, int64_t start, int64_t end, int64_t every, int64_t samples_per_iter)
      : env_(env), start_(start), end_(end), every_(std::max<int64_t>(1, every)),
        samples_(samples_per_iter), last_us_(env->NowMicros()), last_iter_(start) {}

  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool print = iteration == start_ || iteration + 1 == end_ || (iteration + 1) % every_ == 0;
    if (!print) return;
    const int64_t now_us = env_->NowMicros();
    const double seconds = static_cast<double>(now_us - last_us_) / 1e6;
    const int64_t iters = iteration + 1 - last_iter_;
    const double rate = seconds > 0 ? iters * samples_ / seconds : 0;
    const double eta = rate > 0 ? (end_ - iteration - 1) * samples_ / rate : 0;
    std::printf("iter %lld/%lld", static_cast<long long>(iteration + 1),
                static_cast<long long>(end_));
    for (const auto& [name, value] : metrics) std::printf("  %s %.4f", name.c_str(), value);
    std::printf("  samples/s %.0f  ETA %.0fs\n", rate, eta);
    std::fflush(stdout);
    last_us_ = now_us;
    last_iter_ = iteration + 1;
  }

 private:
  Env* const env_;
  const int64_t start_, end_, every_, samples_;
  std::mutex mutex_;
  int64_t last_us_;    // guarded by mutex_
  int64_t last_iter_;  // guarded by mutex_
};

// Forwards to `inner` and appends "iteration name value" lines to a file
// (a log, written as the run goes: not atomic). A write error is kept and
// reported when the file is closed.
class MetricsFile : public MetricsObserver {
 public:
  MetricsFile(MetricsObserver* inner, std::unique_ptr<WritableFile> file)
      : inner_(inner), file_(std::move(file)) {}
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [name, value] : metrics) AppendLocked(iteration, name, value);
    }
    inner_->OnMetrics(iteration, metrics);
  }
  // One "iteration name value" line outside the sink's reports (the
  // validation metrics of --eval-every).
  void Append(int64_t iteration, const std::string& name, double value) {
    std::lock_guard<std::mutex> lock(mutex_);
    AppendLocked(iteration, name, value);
  }
  Status Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    Status closed = file_->Close();
    return status_.ok() ? closed : status_;
  }

 private:
  void AppendLocked(int64_t iteration, const std::string& name, double value) {
    char line[256];
    std::snprintf(line, sizeof(line), "%lld %s %.9g\n", static_cast<long long>(iteration),
                  name.c_str(), value);
    if (status_.ok()) status_ = file_->Append(line);
  }

  MetricsObserver* inner_;
  std::mutex mutex_;
  std::unique_ptr<WritableFile> file_;  // guarded by mutex_
  Status status_;                       // guarded by mutex_
};

// Times the sink's reports of the iterations in [first, end) on the steady
// clock: the step time the session measured itself, written into the trace
// ("measured_step_us") so its reading of the slices can be checked against
// an independent clock. Thread-safe.
class StepTimer : public MetricsObserver {
 public:
  StepTimer(Env* env, MetricsObserver* inner, int64_t first, int64_t end)
      : env_(env), inner_(inner), first_(first), end_(end) {}

  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    if (iteration >= first_ && iteration < end_) {
      const int64_t now_us = env_->NowMicros();
      std::lock_guard<std::mutex> lock(mutex_);
      if (reports_++ == 0) {
        first_seen_ = iteration;
        first_us_ = now_us;
      }
      last_seen_ = iteration;
      last_us_ = now_us;
    }
    inner_->OnMetrics(iteration, metrics);
  }

  // Microseconds per step from the first to the last report; -1 with fewer
  // than two iterations reported.
  double StepUs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reports_ < 2 || last_seen_ <= first_seen_) return -1;
    return static_cast<double>(last_us_ - first_us_) /
           static_cast<double>(last_seen_ - first_seen_);
  }

 private:
  Env* const env_;
  MetricsObserver* const inner_;
  const int64_t first_, end_;
  mutable std::mutex mutex_;
  int64_t reports_ = 0;
  int64_t first_seen_ = 0, last_seen_ = 0;
  int64_t first_us_ = 0, last_us_ = 0;
};

// --checkpoint-dir names a folder, or none yet (Train creates it before
// training).
Status CheckCheckpointDir(Env* env, const std::string& dir) {
  if (dir.empty() || !env->FileExists(dir) || env->IsDirectory(dir)) return Status::OK();
  return InvalidArgumentError("--checkpoint-dir '", dir, "' exists and is not a folder");
}

// The tracer of the request (null without --trace), clock agreed with the
// job's other ranks.
struct Tracing {
  std::unique_ptr<trace::Tracer> tracer;
  trace::TraceClock clock;
};

StatusOr<Tracing> StartTracing(NodeSession* node, const TrainingRequest& request) {
  Tracing tracing;
  if (!request.trace_path.empty()) {
    trace::TracerOptions options = request.trace;
    options.rank = node->rank();
    tracing.tracer = std::make_unique<trace::Tracer>(options);
  }
  MultiMachineSession* session = node->multi();
  if (session == nullptr) return tracing;
  RETURN_IF_ERROR(AgreeOnTracing(session->control(), tracing.tracer != nullptr,
                                 std::chrono::milliseconds(60000)));
  if (tracing.tracer != nullptr) {
    ASSIGN_OR_RETURN(tracing.clock,
                     MeasureClockOffset(session->control(), std::chrono::milliseconds(60000)));
  }
  return tracing;
}

// Restores every part from the parts the previous training segment ended
// with (--eval-every) once there are some, else through `inner` (the
// initializers or the --resume checkpoint); saves go to `inner`.
class CarriedPartsStore final : public VariableStore {
 public:
  CarriedPartsStore(VariableStore* inner, int64_t machine_id)
      : inner_(inner), carried_(&parts_, machine_id) {}
  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override {
    return parts_.empty() ? inner_->Restore(part, blob) : carried_.Restore(part, blob);
  }
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override {
    return inner_->Save(part, completed_iters, blob);
  }
  void Carry(TrainedParts parts) { parts_ = std::move(parts); }
  const TrainedParts& parts() const { return parts_; }

 private:
  VariableStore* const inner_;
  TrainedParts parts_;
  TrainedPartsStore carried_;
};

// The variables the evaluation restores, by how training ended.
struct TrainedVariables {
  CheckpointVariableStore* store = nullptr;   // this run's store
  PartCapturingStore* capture = nullptr;      // this machine's trained parts
  std::string resumed_final;                  // --resume at the last iteration
};

// After training: the evaluation plan with the trained variables, or why
// there is none (the same decision on every rank: they run the same file).
int EvaluateTrained(NodeSession* node, const Plan& plan, const TrainingRequest& request,
                    const TrainedVariables& trained, TrainingResult* result) {
  switch (plan.eval_state()) {
    case EVAL_COMPILED: break;
    case EVAL_NO_TEST_SPLIT:
      std::printf("test: skipped (the job reads no dataset with a test split)\n");
      return cli::kExitOk;
    case EVAL_UNAVAILABLE:
      return node->Fail(FailedPreconditionError("the plan has no evaluation plan: ",
                                                plan.eval_note(),
                                                " (run with --eval=false to train without it)"),
                        cli::kExitFailure);
    default:
      std::printf("test: skipped (the plan carries no evaluation plan; `oflite compile` "
                  "writes one)\n");
      return cli::kExitOk;
  }
  const Plan& eval_plan = plan.eval_plan();
  std::unique_ptr<VariableStore> store;
  std::map<std::string, HostTensor> final_variables;
  TrainedParts parts;
  if (!trained.resumed_final.empty()) {
    // Nothing trained: every part comes from that checkpoint (as `oflite eval`).
    StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(eval_plan);
    if (!variables.ok()) return node->Fail(variables.status(), cli::kExitFailure);
    store = CheckpointRestorer(trained.resumed_final, *variables);
  } else if (node->multi() == nullptr) {
    final_variables = trained.store->TakeFinalVariables();
    store = std::make_unique<MemoryVariableStore>(&final_variables);
  } else {
    parts = trained.capture->TakeParts();
    store = std::make_unique<TrainedPartsStore>(&parts, node->rank());
  }
  EvaluationRequest evaluation;
  evaluation.eval_plan = &eval_plan;
  evaluation.variables = store.get();
  StatusOr<EvaluationResult> evaluated = RunEvaluation(node, evaluation);
  if (!evaluated.ok()) return node->Fail(evaluated.status(), cli::kExitFailure);
  Status reported = ReportEvaluation(*node, *evaluated, request.eval_out, "test");
  if (!reported.ok()) return node->Fail(reported, cli::kExitFailure);
  if (result != nullptr && node->rank() == 0) result->evaluation = *evaluated;
  return cli::kExitOk;
}

void PrintTrained(const RunStats& stats, int64_t start, int64_t end) {
  std::printf("trained iterations %lld..%lld in %.1fs (%lld actors, %lld threads)\n",
              static_cast<long long>(start), static_cast<long long>(end), stats.seconds,
              static_cast<long long>(stats.actors), static_cast<long long>(stats.threads));
  if (stats.graph_tasks > 0) {
    std::printf("graph replay: %lld task(s) captured %lld graph(s), %lld acts replayed\n",
                static_cast<long long>(stats.graph_tasks),
                static_cast<long long>(stats.graphs_captured),
                static_cast<long long>(stats.acts_replayed));
  }
  if (!stats.graph_note.empty()) std::printf("graph replay: %s\n", stats.graph_note.c_str());
  std::fflush(stdout);
}

}  // namespace

std::vector<cli::FlagSpec> TrainingFlagSpecs() {
  return {{"iters", "iterations to run (default: the plan's)", false, "0"},
          {"log-every", "print a progress line every N iterations", false, "50"},
          {"save-every", "checkpoint every N iterations (needs --checkpoint-dir)", false, "0"},
          {"checkpoint-dir", "where checkpoints go (D/iter-<N>)"},
          {"resume", "resume from checkpoint D (or the latest D/iter-*)"},
          {"eval", "evaluate on the test split after training", true, "true"},
          {"eval-every", "also evaluate on the test split every N iterations while training "
                         "(validation metrics: printed, and as val_<metric> lines in "
                         "--metrics-out)", false, "0"},
          {"metrics-out", "write per-iteration metrics to this file"},
          {"eval-out", "write the test metrics (name value) to this file"},
          {"trace", "write a timeline trace of training (Chrome trace JSON) to this file; "
                    "multi-machine plans: to DIR/rank-R.json in this directory"},
          {"trace-iters", "trace only iterations A:B (A included, B not; needs --trace)"},
          {"trace-level", "acts (default: acts, kernels, transfers, collectives and the "
                          "messages between machines) or messages (also every message "
                          "an actor handles; about 4x the events; needs --trace)"},
          {"trace-cpu", "also record each kernel's thread CPU time beside its wall time "
                        "(args cpu_us; about 1 us more per kernel; needs --trace)",
           true, "false"}};
}

StatusOr<TrainingRequest> ReadTrainingRequest(const cli::FlagSet& flags, const Plan& plan,
                                              Env* env) {
  TrainingRequest request;
  ASSIGN_OR_RETURN(request.iterations, flags.GetInt("iters", 0, kMaxIterations));
  ASSIGN_OR_RETURN(request.log_every, flags.GetInt("log-every", 1, kMaxIterations));
  ASSIGN_OR_RETURN(request.save_every, flags.GetInt("save-every", 0, kMaxIterations));
  request.checkpoint_dir = flags.Get("checkpoint-dir");
  request.resume = flags.Get("resume");
  request.evaluate = flags.GetBool("eval");
  ASSIGN_OR_RETURN(request.eval_every, flags.GetInt("eval-every", 0, kMaxIterations));
  request.eval_out = flags.Get("eval-out");
  request.metrics_out = flags.Get("metrics-out");
  request.trace_path = flags.Get("trace");
  if (!flags.Has("trace")) {
    for (const char* flag : {"trace-iters", "trace-level", "trace-cpu"}) {
      if (flags.Has(flag)) return InvalidArgumentError("flag '--", flag, "' needs --trace");
    }
  }
  if (flags.Has("trace-level")) {
    const std::string level = flags.Get("trace-level");
    if (level != "acts" && level != "messages") {
      return InvalidArgumentError("flag '--trace-level': '", level,
                                  "' is not a level (acts or messages)");
    }
    request.trace.messages = level == "messages";
  }
  request.trace.cpu_time = flags.GetBool("trace-cpu");
  if (flags.Has("trace-iters")) {
    RETURN_IF_ERROR(ParseTraceIters(flags.Get("trace-iters"), &request.trace.first_iteration,
                                    &request.trace.end_iteration));
  }
  RETURN_IF_ERROR(CheckTrainingRequest(request, plan, env));
  return request;
}

// A multi-machine checkpoint is assembled on machine 0 (checkpoint_gather.h),
// whose first save of an iteration starts the gathering: machine 0 must
// hold a variable. Empty when it does; else the machines that do.
static std::string MachinesWithVariables(const Plan& plan) {
  std::set<int64_t> machines;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      if (task.type() == TASK_VARIABLE) machines.insert(task.machine_id());
    }
  }
  if (machines.empty() || machines.count(0) > 0) return "";
  std::string list;
  for (int64_t id : machines) list += (list.empty() ? "" : ", ") + std::to_string(id);
  return list;
}

Status CheckTrainingRequest(const TrainingRequest& request, const Plan& plan, Env* env) {
  if (request.save_every > 0 && request.checkpoint_dir.empty()) {
    return InvalidArgumentError("--save-every needs --checkpoint-dir");
  }
  if (request.save_every > 0 && plan.machine_size() > 1) {
    const std::string holders = MachinesWithVariables(plan);
    if (!holders.empty()) {
      return InvalidArgumentError(
          "--save-every: machine 0 holds no variable (machines ", holders, " do), and a "
          "multi-machine checkpoint is assembled on machine 0 as its variables are saved "
          "(place a variable on machine 0, or train without --save-every)");
    }
  }
  RETURN_IF_ERROR(CheckCheckpointDir(env, request.checkpoint_dir));
  RETURN_IF_ERROR(CheckOutputFile(env, request.metrics_out, "--metrics-out"));
  if (request.evaluate && plan.is_train()) {
    RETURN_IF_ERROR(CheckOutputFile(env, request.eval_out, "--eval-out"));
  }
  if (request.eval_every > 0) {
    if (!request.evaluate) return InvalidArgumentError("--eval-every needs --eval=true");
    if (!plan.is_train() || plan.eval_state() != EVAL_COMPILED) {
      return InvalidArgumentError("--eval-every needs a training plan with an evaluation plan "
                                  "over a test split (this plan has none)");
    }
    if (!request.trace_path.empty()) {
      return InvalidArgumentError("--eval-every and --trace cannot be combined (the trace "
                                  "covers one run; trace a run without --eval-every)");
    }
  }
  return Status::OK();
}

int Train(NodeSession* node, const Plan& plan, const TrainingRequest& request,
          TrainingResult* result) {
  StatusOr<Tracing> tracing = StartTracing(node, request);
  if (!tracing.ok()) {
    const bool differs = tracing.status().code() == StatusCode::kInvalidArgument;
    return node->Fail(tracing.status(), differs ? cli::kExitBadInput : cli::kExitFailure);
  }
  Env* env = node->options().env;
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(plan);
  if (!variables.ok()) return node->Fail(variables.status(), cli::kExitBadInput);
  // Several machines: rank 0 alone writes checkpoints (checkpoint_gather.h).
  const bool gather_saves = request.save_every > 0 && node->multi() != nullptr;
  if (request.save_every > 0 && (!gather_saves || node->rank() == 0)) {
    Status made = env->CreateDirectories(request.checkpoint_dir);
    if (!made.ok()) return node->Fail(made.WithContext("--checkpoint-dir"), cli::kExitBadInput);
  }
  const int64_t end = request.iterations > 0 ? request.iterations : plan.total_iters();
  RuntimeOptions options = node->BaseRuntimeOptions();
  options.total_iters = request.iterations;
  options.save_every = request.save_every;
  CheckpointVariableStore::Options store_options;
  store_options.save_root = request.checkpoint_dir;
  store_options.variables = *variables;
  store_options.final_iteration = end;
  if (!request.resume.empty()) {
    StatusOr<ResumePoint> resume = ChooseResumePoint(request.resume, *variables, end, env);
    if (!resume.ok()) return node->Fail(resume.status(), cli::kExitBadInput);
    store_options.restore_dir = resume->dir;
    options.start_iter = resume->iteration;
    std::printf("resuming from %s at iteration %lld\n", resume->dir.c_str(),
                static_cast<long long>(resume->iteration));
  }
  if (gather_saves) store_options.save_root.clear();  // the gathered store writes
  CheckpointVariableStore store(store_options);
  std::unique_ptr<ControlKeyValue> channel;
  std::unique_ptr<GatheredCheckpointStore> gathered;
  if (gather_saves) {
    StatusOr<std::map<PartKey, OwnedPart>> owners = CheckpointPartOwners(plan);
    if (!owners.ok()) return node->Fail(owners.status(), cli::kExitBadInput);
    channel = std::make_unique<ControlKeyValue>(node->multi()->control());
    GatheredCheckpointStore::Options gather;
    gather.save_root = request.checkpoint_dir;
    gather.variables = *variables;
    gather.owners = std::move(*owners);
    gather.rank = node->rank();
    gather.channel = channel.get();
    if (node->options().watchdog.count() > 0) gather.timeout = node->options().watchdog;
    gather.env = env;
    gathered = std::make_unique<GatheredCheckpointStore>(&store, std::move(gather));
  }
  // After each run, before the job's finish barrier: this rank's parts are
  // sent, or (rank 0) gathered and written.
  auto flush_saves = [&gathered]() { return gathered ? gathered->Flush() : Status::OK(); };
  CarriedPartsStore carried(gathered ? static_cast<VariableStore*>(gathered.get()) : &store,
                            node->rank());  // --eval-every segments
  PartCapturingStore capture(&carried, end);  // this machine's trained parts
  options.variables = &capture;
  ProgressPrinter progress(env, options.start_iter, end, request.log_every,
                           plan.samples_per_iter());
  options.metrics = &progress;
  std::unique_ptr<MetricsFile> metrics_file;
  if (!request.metrics_out.empty()) {
    StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(request.metrics_out);
    if (!file.ok()) return node->Fail(file.status().WithContext("--metrics-out"), cli::kExitBadInput);
    metrics_file = std::make_unique<MetricsFile>(options.metrics, std::move(*file));
    options.metrics = metrics_file.get();
  }
  trace::Tracer* tracer = tracing->tracer.get();
  std::unique_ptr<StepTimer> step_timer;
  if (tracer != nullptr) {
    options.tracer = tracer;
    step_timer = std::make_unique<StepTimer>(env, options.metrics,
                                             tracer->options().first_iteration,
                                             tracer->options().end_iteration);
    options.metrics = step_timer.get();
  }
  // Decided before training: the training run is the session's last one
  // unless an evaluation follows (the same decision on every rank).
  const bool evaluate = request.evaluate && plan.is_train();
  const int64_t first_iteration = options.start_iter;
  double segment_seconds = 0;
  // --eval-every: train up to the next multiple of N, evaluate with the
  // parts that segment ended with, continue from them (the data sources and
  // the schedules depend on the iteration only, so the segments together
  // train exactly as one run does).
  while (request.eval_every > 0) {
    const int64_t segment_end = (options.start_iter / request.eval_every + 1) * request.eval_every;
    if (segment_end >= end) break;
    PartCapturingStore segment_capture(&carried, segment_end);
    RuntimeOptions segment = options;
    segment.total_iters = segment_end;
    segment.variables = &segment_capture;
    PlanRun segment_run;
    segment_run.name = "train";
    segment_run.last = false;
    segment_run.before_finish = flush_saves;
    StatusOr<RunStats> trained = node->RunPlan(plan, segment, segment_run);
    if (!trained.ok()) return node->Fail(trained.status(), cli::kExitFailure);
    segment_seconds += trained->seconds;
    carried.Carry(segment_capture.TakeParts());
    TrainedPartsStore validation_store(&carried.parts(), node->rank());
    EvaluationRequest validation;
    validation.eval_plan = &plan.eval_plan();
    validation.variables = &validation_store;
    StatusOr<EvaluationResult> validated = RunEvaluation(node, validation);
    if (!validated.ok()) return node->Fail(validated.status(), cli::kExitFailure);
    if (node->rank() == 0) {
      std::printf("validation at iteration %lld (%lld samples, %.1fs):",
                  static_cast<long long>(segment_end),
                  static_cast<long long>(validated->samples), validated->seconds);
      for (const auto& [name, value] : validated->sums.Means()) {
        std::printf("  %s %.4f", name.c_str(), value);
        if (metrics_file != nullptr) metrics_file->Append(segment_end - 1, "val_" + name, value);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    options.start_iter = segment_end;
  }
  PlanRun run;
  run.name = "train";
  run.last = !(evaluate && plan.eval_state() == EVAL_COMPILED);
  run.before_finish = flush_saves;
  StatusOr<RunStats> stats = node->RunPlan(plan, options, run);
  if (stats.ok()) stats->seconds += segment_seconds;
  if (tracer != nullptr) {
    if (step_timer->StepUs() > 0) tracer->SetOtherNumber("measured_step_us", step_timer->StepUs());
    StatusOr<std::string> path =
        TraceFileForRank(request.trace_path, plan.machine_size(), node->rank());
    Status written = path.ok() ? tracer->WriteJson(*path, tracing->clock) : path.status();
    if (!written.ok()) return node->Fail(written, cli::kExitBadInput);
    std::printf("trace written to %s\n", path->c_str());
  }
  if (!stats.ok()) return node->Fail(stats.status(), cli::kExitFailure);
  // With --eval-every the final evaluation's metrics go into --metrics-out
  // too (val_<metric> at the last iteration), so the validation curve ends
  // where training does.
  const bool final_validation_line = metrics_file != nullptr && request.eval_every > 0;
  if (metrics_file != nullptr && !final_validation_line) {
    Status closed = metrics_file->Close();
    if (!closed.ok()) return node->Fail(closed.WithContext("--metrics-out"), cli::kExitFailure);
  }
  PrintTrained(*stats, first_iteration, end);
  if (result != nullptr) {
    result->start_iteration = first_iteration;
    result->end_iteration = end;
    result->stats = *stats;
  }
  if (evaluate) {
    TrainedVariables trained;
    trained.store = &store;
    trained.capture = &capture;
    if (first_iteration >= end && !store_options.restore_dir.empty()) {
      trained.resumed_final = store_options.restore_dir;
    }
    TrainingResult evaluated;
    const int code = EvaluateTrained(node, plan, request, trained, &evaluated);
    if (code != cli::kExitOk) return code;
    if (final_validation_line && evaluated.evaluation.has_value()) {
      for (const auto& [name, value] : evaluated.evaluation->sums.Means()) {
        metrics_file->Append(end - 1, "val_" + name, value);
      }
    }
    if (result != nullptr) result->evaluation = evaluated.evaluation;
  }
  if (final_validation_line) {
    Status closed = metrics_file->Close();
    if (!closed.ok()) return node->Fail(closed.WithContext("--metrics-out"), cli::kExitFailure);
  }
  node->PrintStats();
  return cli::kExitOk;
}

}  // namespace session
}  // namespace oflite
