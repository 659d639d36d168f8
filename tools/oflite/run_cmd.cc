// oflite run: run this node's part of a Plan with the actor runtime
// (oneflow_lite/runtime), print progress, evaluate at the end.
//
// Progress: one line every --log-every iterations (and the first and last):
// iteration, loss, accuracy, samples/s over the interval, ETA. After
// training, unless --eval=false, the job's evaluation job (MakeEvalJob: the
// forward graph on the test split, one pass) is compiled for the same
// cluster and run by the same runtime with the trained variables; its
// metrics, averaged over the pass, are printed as the test accuracy/loss.
// Checkpoints: --save-every N --checkpoint-dir D writes D/iter-<k>; --resume
// D (a checkpoint, or a root holding iter-* directories: the latest) starts
// at the checkpoint's iteration with its variables.
// Multi-machine plans (machine id == rank, one process each, usually
// started by `oflite launch`): the process joins the job's CommNet
// (--master, --comm), barriers once every rank has built its actors, and
// after training barriers again before tearing down; a lost peer ends every
// rank with exit 1 naming the lost rank (MultiMachineSession). Evaluation is
// single-machine only and skipped for multi-machine plans. --stats prints the
// CommNet counters at exit; --metrics-out FILE writes "iteration name value"
// lines for every iteration this machine's sink reports.
// Exit codes: commands.h (1: the run failed; the message names the op and
// iteration, or the actors the watchdog found stuck).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "oneflow_lite/api/eval_job.h"
#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "tools/oflite/commands.h"
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

// Sums metrics over iterations (for the evaluation pass).
class MetricAverager : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    for (const auto& [name, value] : metrics) sums_[name] += value;
  }
  std::map<std::string, double> Means() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<std::string, double> means;
    for (const auto& [name, sum] : sums_) means[name] = sum / std::max<int64_t>(1, count_);
    return means;
  }
  int64_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 private:
  std::mutex mutex_;
  int64_t count_ = 0;
  std::map<std::string, double> sums_;
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

// Runs the evaluation job of `train` with `variables`; prints its metrics.
Status Evaluate(const Plan& train, const std::map<std::string, HostTensor>& variables,
                const RuntimeOptions& base) {
  ASSIGN_OR_RETURN(Job eval_job, MakeEvalJob(train.job()));
  ASSIGN_OR_RETURN(Plan eval_plan, compiler::Compile(eval_job, train.cluster()));
  MemoryVariableStore store(&variables);
  MetricAverager averager;
  RuntimeOptions options = base;
  options.start_iter = 0;
  options.total_iters = 0;
  options.save_every = 0;
  options.metrics = &averager;
  options.variables = &store;
  const auto begin = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(eval_plan, options));
  RETURN_IF_ERROR(runtime->Run().WithContext("evaluation"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("test (%lld samples, %.1fs):",
              static_cast<long long>(averager.count() * SamplesPerIteration(eval_job)), seconds);
  for (const auto& [name, value] : averager.Means()) {
    std::printf("  %s %.4f", name.c_str(), value);
  }
  std::printf("\n");
  return Status::OK();
}

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "oflite run: %s\n", status.ToString().c_str());
  return code;
}

}  // namespace

int RunRun(int argc, char** argv) {
  FlagSet flags("run", "--plan PLAN.pb [--rank R --master HOST:PORT] [flags]",
                {{"plan", "the Plan file"},
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
                 {"eval", "evaluate on the test split after training", false, "true"},
                 {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
                 {"metrics-out", "write per-iteration metrics to this file"}});
  Status parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) return Fail(parsed, kExitBadInput);
  if (flags.help_requested()) {
    flags.PrintHelp();
    return kExitOk;
  }
  if (!flags.Has("plan")) return Fail(InvalidArgumentError("--plan is required"), kExitBadInput);
  StatusOr<Plan> plan = LoadPlan(flags.Get("plan"));
  if (!plan.ok()) return Fail(plan.status(), kExitBadInput);
  StatusOr<int64_t> rank = ResolveRank(flags);
  if (!rank.ok()) return Fail(rank.status(), kExitBadInput);
  std::unique_ptr<MultiMachineSession> session;
  if (plan->machine_size() > 1) {
    MultiMachineOptions multi;
    multi.rank = *rank;
    multi.master = flags.Get("master");
    multi.comm = flags.Get("comm");
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
  if (session != nullptr) session->Configure(&options);

  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(*plan, options);
  if (!runtime.ok()) return Fail(runtime.status(), kExitFailure);
  if (session != nullptr) {
    Status ready = session->AfterCreate(runtime->get());
    if (!ready.ok()) return Fail(ready, kExitFailure);
  }
  // Destroyed before the runtime: peers' messages stop reaching its bus.
  struct DetachGuard {
    MultiMachineSession* session;
    ~DetachGuard() {
      if (session != nullptr) session->Detach();
    }
  } detach_guard{session.get()};
  Status status = (*runtime)->Run();
  if (!status.ok()) return Fail(status, kExitFailure);
  if (session != nullptr) {
    Status done = session->Finish();
    if (!done.ok()) return Fail(done, kExitFailure);
    if (flags.GetBool("stats")) std::printf("%s\n", session->StatsSummary().c_str());
  }
  const RunStats& stats = (*runtime)->stats();
  std::printf("trained iterations %lld..%lld in %.1fs (%lld actors, %lld threads)\n",
              static_cast<long long>(options.start_iter), static_cast<long long>(end),
              stats.seconds, static_cast<long long>(stats.actors),
              static_cast<long long>(stats.threads));
  if (flags.GetBool("eval") && plan->job().conf().is_train() && session == nullptr) {
    std::map<std::string, HostTensor> trained = store.TakeFinalVariables();
    Status evaluated = Evaluate(*plan, trained, options);
    if (!evaluated.ok()) return Fail(evaluated, kExitFailure);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
