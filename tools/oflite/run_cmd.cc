// oflite run: run this node's part of a Plan with the actor runtime
// (oneflow_lite/runtime), print progress, evaluate at the end.
//
// Progress: one line every --log-every iterations (and the first and last):
// iteration, loss, accuracy, samples/s over the interval, ETA. After
// training, unless --eval=false, the job's evaluation job (MakeEvalJob: the
// forward graph on the test split, one pass) is compiled for the same
// cluster and run by a second runtime with the trained variables; its
// metrics, averaged over the pass, are printed as the test accuracy/loss.
// Checkpoints: --save-every N --checkpoint-dir D writes D/iter-<k>; --resume
// D (a checkpoint, or a root holding iter-* directories: the latest) starts
// at the checkpoint's iteration with its variables.
// Multi-machine plans (machine id == rank, one process each, usually
// started by `oflite launch`): the process joins the job's CommNet
// (--master, --comm), barriers once every rank has built its actors, and
// after training barriers again; a lost peer ends every rank with exit 1
// naming the lost rank (MultiMachineSession), and a rank that fails (its
// runtime, its evaluation) tells every peer through the abort notice, so
// they exit 1 at once with "rank R failed: <its error>". Their evaluation is
// distributed: every rank compiles the eval job for the same cluster (the
// session checks that the plans agree), runs its part as a second Runtime
// over the same CommNet with the variable parts it trained
// (PartCapturingStore / TrainedPartsStore, eval_support.h), and sends its
// sink's metric sums to rank 0, which merges them and prints the one
// "test (...)" line; the other ranks print that their part is done. The
// result equals a single-machine evaluation of the same trained variables.
// A job without a dataset that has a test split (e.g. the synthetic
// random_batch source) skips the evaluation with a note.
// --stats prints the CommNet counters at exit (training and evaluation);
// --metrics-out FILE writes "iteration name value" lines for every training
// iteration this machine's sink reports; --eval-out FILE writes the test
// metrics as "name value" lines at full precision (where the test line is
// printed).
// Exit codes: commands.h (1: the run failed; the message names the op and
// iteration, or the actors the watchdog found stuck).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/eval_support.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {
namespace {

// Prints a progress line per interval; thread-safe (called by the sink).
class ProgressPrinter : public MetricsObserver {
 public:
  ProgressPrinter(int64_t start, int64_t end, int64_t every, int64_t samples_per_iter)
      : start_(start), end_(end), every_(std::max<int64_t>(1, every)),
        samples_(samples_per_iter), last_time_(std::chrono::steady_clock::now()),
        last_iter_(start) {}

  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    last_metrics_ = metrics;
    const bool print = iteration == start_ || iteration + 1 == end_ || (iteration + 1) % every_ == 0;
    if (!print) return;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_time_).count();
    const int64_t iters = iteration + 1 - last_iter_;
    const double rate = seconds > 0 ? iters * samples_ / seconds : 0;
    const double eta = rate > 0 ? (end_ - iteration - 1) * samples_ / rate : 0;
    std::printf("iter %lld/%lld", static_cast<long long>(iteration + 1),
                static_cast<long long>(end_));
    for (const auto& [name, value] : metrics) std::printf("  %s %.4f", name.c_str(), value);
    std::printf("  samples/s %.0f  ETA %.0fs\n", rate, eta);
    std::fflush(stdout);
    last_time_ = now;
    last_iter_ = iteration + 1;
  }

 private:
  const int64_t start_, end_, every_, samples_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_time_;
  int64_t last_iter_;
  std::vector<std::pair<std::string, double>> last_metrics_;
};

// Forwards to `inner` and appends "iteration name value" lines to a file.
class MetricsFile : public MetricsObserver {
 public:
  MetricsFile(MetricsObserver* inner, std::FILE* file) : inner_(inner), file_(file) {}
  ~MetricsFile() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [name, value] : metrics) {
        std::fprintf(file_, "%lld %s %.9g\n", static_cast<long long>(iteration), name.c_str(),
                     value);
      }
      std::fflush(file_);
    }
    inner_->OnMetrics(iteration, metrics);
  }

 private:
  MetricsObserver* inner_;
  std::FILE* file_;
  std::mutex mutex_;
};

// Stops peers' messages reaching a runtime's bus before the runtime goes.
class DetachOnExit {
 public:
  explicit DetachOnExit(MultiMachineSession* session) : session_(session) {}
  ~DetachOnExit() {
    if (session_ != nullptr) session_->Detach();
  }

 private:
  MultiMachineSession* session_;
};

int64_t SamplesPerIteration(const Job& job) {
  if (job.conf().batch_size() > 0) return job.conf().batch_size();
  for (const OpConf& op : job.op()) {
    AttrView attrs(op);
    if (op.op_type() == "fashion_mnist") return attrs.GetIntOr("batch_size", 0);
    if (op.op_type() == "random_batch") {
      StatusOr<Shape> shape = attrs.GetShape("shape");
      if (shape.ok() && shape->rank() > 0) return shape->dim(0);
    }
  }
  return 0;
}

StatusOr<int64_t> ResolveRank(const FlagSet& flags) {
  if (flags.Has("rank")) return flags.GetInt("rank");
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') {
      char* end = nullptr;
      const long long rank = std::strtoll(value, &end, 10);
      if (*end != '\0' || rank < 0) return InvalidArgumentError(name, "='", value, "' is not a rank");
      return static_cast<int64_t>(rank);
    }
  }
  return 0;
}

StatusOr<std::string> ResolveResume(const std::string& dir) {
  if (IsCheckpoint(dir)) return dir;
  return ShardedCheckpointStore::LatestCheckpoint(dir);
}

// Prints the "test (...)" line; writes "name value" lines to `eval_out`
// when not empty.
Status ReportTest(const MetricSums& sums, int64_t samples_per_iteration, double seconds,
                  const std::string& eval_out) {
  std::printf("test (%lld samples, %.1fs):",
              static_cast<long long>(sums.count() * samples_per_iteration), seconds);
  const std::map<std::string, double> means = sums.Means();
  for (const auto& [name, value] : means) std::printf("  %s %.4f", name.c_str(), value);
  std::printf("\n");
  std::fflush(stdout);
  if (eval_out.empty()) return Status::OK();
  std::FILE* file = std::fopen(eval_out.c_str(), "w");
  if (file == nullptr) return InvalidArgumentError("cannot write --eval-out '", eval_out, "'");
  for (const auto& [name, value] : means) std::fprintf(file, "%s %.17g\n", name.c_str(), value);
  if (std::fclose(file) != 0) return DataLossError("writing --eval-out '", eval_out, "' failed");
  return Status::OK();
}

RuntimeOptions EvalOptions(const RuntimeOptions& base, MetricsObserver* metrics,
                           VariableStore* variables) {
  RuntimeOptions options = base;
  options.start_iter = 0;
  options.total_iters = 0;
  options.save_every = 0;
  options.metrics = metrics;
  options.variables = variables;
  options.remote_route = nullptr;
  options.registry = nullptr;
  return options;
}

double SecondsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// Single machine: runs the evaluation job of `train` with the logical
// `variables`; prints its metrics.
Status Evaluate(const Plan& train, const Job& eval_job,
                const std::map<std::string, HostTensor>& variables, const RuntimeOptions& base,
                const std::string& eval_out) {
  ASSIGN_OR_RETURN(Plan eval_plan, compiler::Compile(eval_job, train.cluster()));
  MemoryVariableStore store(&variables);
  MetricAverager averager;
  const auto begin = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                   Runtime::Create(eval_plan, EvalOptions(base, &averager, &store)));
  RETURN_IF_ERROR(runtime->Run().WithContext("evaluation"));
  return ReportTest(averager.Take(), SamplesPerIteration(eval_job), SecondsSince(begin),
                    eval_out);
}

// Multi-machine: this rank's part of the distributed evaluation (see the
// file comment). `parts` are the variable parts this machine trained.
Status EvaluateDistributed(const Plan& train, const Job& eval_job, const TrainedParts& parts,
                           const RuntimeOptions& base, MultiMachineSession* session,
                           const std::string& eval_out) {
  const std::string who = "rank " + std::to_string(base.machine_id);
  StatusOr<Plan> eval_plan = compiler::Compile(eval_job, train.cluster());
  if (!eval_plan.ok()) return eval_plan.status().WithContext(who + " compiling the eval job");
  RETURN_IF_ERROR(session->BeginRun(*eval_plan, "eval"));
  TrainedPartsStore store(&parts, base.machine_id);
  MetricAverager averager;
  RuntimeOptions options = EvalOptions(base, &averager, &store);
  session->Configure(&options);
  const auto begin = std::chrono::steady_clock::now();
  MetricSums sums;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(*eval_plan, options));
    DetachOnExit detach(session);  // destroyed before the runtime
    RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
    RETURN_IF_ERROR(runtime->Run().WithContext(who + " evaluation"));
    sums = averager.Take();
  }
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   session->GatherToRoot("eval-metrics", EncodeMetricSums(sums)));
  RETURN_IF_ERROR(session->Finish());
  const double seconds = SecondsSince(begin);
  if (base.machine_id != 0) {
    std::printf("test: this machine's part done in %.1fs (%lld sink reports); rank 0 prints the "
                "metrics\n",
                seconds, static_cast<long long>(sums.count()));
    return Status::OK();
  }
  MetricSums merged;
  for (size_t rank = 0; rank < gathered.size(); ++rank) {
    ASSIGN_OR_RETURN(MetricSums part,
                     DecodeMetricSums(gathered[rank], "rank " + std::to_string(rank) +
                                                          "'s evaluation metrics"));
    merged.Merge(part);
  }
  return ReportTest(merged, SamplesPerIteration(eval_job), seconds, eval_out);
}

// Runs this machine's part of `plan` (with `session`: the first run of the
// multi-machine session, ended by its Finish barrier; the runtime is
// detached and destroyed on return).
StatusOr<RunStats> Train(const Plan& plan, RuntimeOptions options, MultiMachineSession* session) {
  if (session != nullptr) session->Configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  DetachOnExit detach(session);  // destroyed before the runtime
  if (session != nullptr) RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  RETURN_IF_ERROR(runtime->Run());
  if (session != nullptr) RETURN_IF_ERROR(session->Finish());
  return runtime->stats();
}

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "oflite run: %s\n", status.ToString().c_str());
  return code;
}

// A failure of this rank in a multi-machine job: reported here, then told to
// every peer (abort notice) so they stop at once naming this rank.
int FailJob(const Status& status, MultiMachineSession* session) {
  const int code = Fail(status, kExitFailure);
  std::fflush(stderr);
  if (session != nullptr) session->AbortPeers(status);
  return code;
}

}  // namespace

int RunRun(int argc, char** argv) {
  std::vector<FlagSpec> specs = {{"plan", "the Plan file"},
                 {"rank", "this node's machine id (else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"},
                 {"master", "rendezvous address HOST:PORT (rank 0 serves it)"},
                 {"comm", "transport: ibverbs, tcp or auto", false, "auto"},
                 {"iters", "iterations to run (default: the plan's)", false, "0"},
                 {"log-every", "print a progress line every N iterations", false, "50"},
                 {"save-every", "checkpoint every N iterations (needs --checkpoint-dir)", false, "0"},
                 {"checkpoint-dir", "where checkpoints go (D/iter-<N>)"},
                 {"resume", "resume from checkpoint D (or the latest D/iter-*)"},
                 {"check-nan", "fail on NaN/Inf in any kernel output", true, "false"},
                 {"watchdog-seconds", "abort when no actor progresses this long", false, "60"},
                 {"ring-timeout-seconds", "bound of one cross-machine ring collective", false,
                  "120"},
                 {"eval", "evaluate on the test split after training", false, "true"},
                 {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
                 {"metrics-out", "write per-iteration metrics to this file"},
                 {"eval-out", "write the test metrics (name value) to this file"}};
  // The ibverbs provider's --ib_* flags (comm/ibverbs/ibverbs_flags.h).
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    specs.push_back({flag.name, flag.help, flag.is_bool, flag.default_value});
  }
  FlagSet flags("run", "--plan PLAN.pb [--rank R --master HOST:PORT] [flags]", std::move(specs));
  Status parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) return Fail(parsed, kExitBadInput);
  if (flags.help_requested()) {
    flags.PrintHelp();
    return kExitOk;
  }
  if (!flags.Has("plan")) return Fail(InvalidArgumentError("--plan is required"), kExitBadInput);
  StatusOr<Plan> plan = LoadPlan(flags.Get("plan"));
  if (!plan.ok()) return Fail(plan.status(), kExitBadInput);
  Status verified = VerifyPlan(*plan);
  if (!verified.ok()) {
    return Fail(verified.WithContext("plan '" + flags.Get("plan") + "'"), kExitBadInput);
  }
  StatusOr<int64_t> rank = ResolveRank(flags);
  if (!rank.ok()) return Fail(rank.status(), kExitBadInput);
  std::unique_ptr<MultiMachineSession> session;
  if (plan->machine_size() > 1) {
    MultiMachineOptions multi;
    multi.rank = *rank;
    multi.master = flags.Get("master");
    multi.comm = flags.Get("comm");
    StatusOr<int64_t> ring_timeout = flags.GetInt("ring-timeout-seconds");
    if (!ring_timeout.ok()) return Fail(ring_timeout.status(), kExitBadInput);
    if (*ring_timeout < 1) {
      return Fail(InvalidArgumentError("--ring-timeout-seconds must be at least 1"),
                  kExitBadInput);
    }
    multi.ring_timeout = std::chrono::milliseconds(1000 * *ring_timeout);
    std::map<std::string, std::string> ib_values;
    for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
      ib_values[flag.name] = flags.Get(flag.name);
    }
    StatusOr<comm::ibverbs::IbverbsOptions> ibverbs =
        comm::ibverbs::IbverbsOptionsFromFlags(ib_values);
    if (!ibverbs.ok()) return Fail(ibverbs.status(), kExitBadInput);
    multi.ibverbs = *ibverbs;
    StatusOr<std::unique_ptr<MultiMachineSession>> started =
        MultiMachineSession::Start(*plan, multi);
    if (!started.ok()) return Fail(started.status(), kExitFailure);
    session = std::move(*started);
  }
  StatusOr<int64_t> iters = flags.GetInt("iters");
  StatusOr<int64_t> log_every = flags.GetInt("log-every");
  StatusOr<int64_t> save_every = flags.GetInt("save-every");
  StatusOr<int64_t> watchdog = flags.GetInt("watchdog-seconds");
  for (const auto* value : {&iters, &log_every, &save_every, &watchdog}) {
    if (!value->ok()) return Fail(value->status(), kExitBadInput);
  }
  if (*save_every > 0 && !flags.Has("checkpoint-dir")) {
    return Fail(InvalidArgumentError("--save-every needs --checkpoint-dir"), kExitBadInput);
  }
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(*plan);
  if (!variables.ok()) return Fail(variables.status(), kExitBadInput);

  RuntimeOptions options;
  options.machine_id = *rank;
  options.total_iters = *iters;
  options.check_nan = flags.GetBool("check-nan");
  options.save_every = *save_every;
  options.watchdog_timeout = std::chrono::milliseconds(1000 * std::max<int64_t>(1, *watchdog));
  CheckpointVariableStore::Options store_options;
  store_options.save_root = flags.Get("checkpoint-dir");
  store_options.variables = *variables;
  if (flags.Has("resume")) {
    StatusOr<std::string> dir = ResolveResume(flags.Get("resume"));
    if (!dir.ok()) return Fail(dir.status(), kExitBadInput);
    StatusOr<CheckpointManifest> manifest = ReadCheckpointManifest(*dir);
    if (!manifest.ok()) return Fail(manifest.status(), kExitBadInput);
    store_options.restore_dir = *dir;
    options.start_iter = manifest->iteration;
    std::printf("resuming from %s at iteration %lld\n", dir->c_str(),
                static_cast<long long>(manifest->iteration));
  }
  const int64_t end = *iters > 0 ? *iters : plan->total_iters();
  store_options.final_iteration = end;
  CheckpointVariableStore store(store_options);
  ProgressPrinter progress(options.start_iter, end, *log_every, SamplesPerIteration(plan->job()));
  options.variables = &store;
  options.metrics = &progress;
  std::unique_ptr<MetricsFile> metrics_file;
  if (flags.Has("metrics-out")) {
    std::FILE* file = std::fopen(flags.Get("metrics-out").c_str(), "w");
    if (file == nullptr) {
      return Fail(InvalidArgumentError("cannot write --metrics-out '", flags.Get("metrics-out"),
                                       "'"),
                  kExitBadInput);
    }
    metrics_file = std::make_unique<MetricsFile>(&progress, file);
    options.metrics = metrics_file.get();
  }
  PartCapturingStore capture(&store, end);  // this machine's trained parts
  options.variables = &capture;
  StatusOr<RunStats> stats = Train(*plan, options, session.get());
  if (!stats.ok()) return FailJob(stats.status(), session.get());
  std::printf("trained iterations %lld..%lld in %.1fs (%lld actors, %lld threads)\n",
              static_cast<long long>(options.start_iter), static_cast<long long>(end),
              stats->seconds, static_cast<long long>(stats->actors),
              static_cast<long long>(stats->threads));
  std::fflush(stdout);
  if (flags.GetBool("eval") && plan->job().conf().is_train()) {
    StatusOr<Job> eval_job = MakeEvalJob(plan->job());
    if (!eval_job.ok()) return FailJob(eval_job.status(), session.get());
    Status evaluated;
    if (eval_job->conf().total_iters() == 0) {
      // Same decision on every rank (same job): nothing to synchronize.
      std::printf("test: skipped (the job reads no dataset with a test split)\n");
    } else if (session == nullptr) {
      std::map<std::string, HostTensor> trained = store.TakeFinalVariables();
      evaluated = Evaluate(*plan, *eval_job, trained, options, flags.Get("eval-out"));
    } else {
      TrainedParts parts = capture.TakeParts();
      evaluated = EvaluateDistributed(*plan, *eval_job, parts, options, session.get(),
                                      flags.Get("eval-out"));
    }
    if (!evaluated.ok()) return FailJob(evaluated, session.get());
  }
  if (session != nullptr && flags.GetBool("stats")) {
    std::printf("%s\n", session->StatsSummary().c_str());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
