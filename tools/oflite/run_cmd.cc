// oflite run: run this node's part of a Plan with the actor runtime
// (oneflow_lite/runtime), print progress, evaluate at the end.
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
// finish barrier with OFLITE_TEST_FREEZE_AT=train-finish|eval-finish.) Their
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
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"
#include "oneflow_lite/comm/per_peer_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/eval_support.h"
#include "tools/oflite/evaluate.h"
#include "tools/oflite/flags.h"
#include "tools/oflite/session_setup.h"
#include "tools/oflite/trace_support.h"

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

// Times the sink's reports of the iterations in [first, end) on the steady
// clock: the step time the session measured itself, written into the trace
// ("measured_step_us") so its reading of the slices can be checked against
// an independent clock. Thread-safe.
class StepTimer : public MetricsObserver {
 public:
  StepTimer(MetricsObserver* inner, int64_t first, int64_t end)
      : inner_(inner), first_(first), end_(end) {}

  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    if (iteration >= first_ && iteration < end_) {
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mutex_);
      if (reports_++ == 0) {
        first_seen_ = iteration;
        first_time_ = now;
      }
      last_seen_ = iteration;
      last_time_ = now;
    }
    inner_->OnMetrics(iteration, metrics);
  }

  // Microseconds per step from the first to the last report; -1 with fewer
  // than two iterations reported.
  double StepUs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reports_ < 2 || last_seen_ <= first_seen_) return -1;
    return std::chrono::duration<double, std::micro>(last_time_ - first_time_).count() /
           static_cast<double>(last_seen_ - first_seen_);
  }

 private:
  MetricsObserver* const inner_;
  const int64_t first_, end_;
  mutable std::mutex mutex_;
  int64_t reports_ = 0;
  int64_t first_seen_ = 0, last_seen_ = 0;
  std::chrono::steady_clock::time_point first_time_, last_time_;
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

// The largest --iters, --log-every or --save-every accepted (2^40).
constexpr int64_t kMaxIterations = int64_t{1} << 40;

// The flags of `oflite run`, read and checked against the plan before
// anything starts: every error here is exit 2 naming the flag.
struct RunFlags {
  int64_t rank = 0;
  int64_t iters = 0;  // 0: the plan's
  int64_t log_every = 50;
  int64_t save_every = 0;  // 0: never
  std::chrono::milliseconds watchdog{60000};
  std::chrono::milliseconds ring_timeout{120000};
  std::chrono::milliseconds join_grace{5000};
  int64_t cpu_threads = 0;  // 0: the plan's (kernels/cpu/cpu_threads.h)
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

StatusOr<RunFlags> ReadRunFlags(const FlagSet& flags, const Plan& plan) {
  RunFlags run;
  ASSIGN_OR_RETURN(run.rank, ResolveRank(flags, plan));
  RETURN_IF_ERROR(CheckMultiMachineFlags(flags, plan));
  ASSIGN_OR_RETURN(run.iters, flags.GetInt("iters", 0, kMaxIterations));
  ASSIGN_OR_RETURN(run.log_every, flags.GetInt("log-every", 1, kMaxIterations));
  ASSIGN_OR_RETURN(run.save_every, flags.GetInt("save-every", 0, kMaxIterations));
  ASSIGN_OR_RETURN(run.watchdog, flags.GetSeconds("watchdog-seconds", 1, kMaxDurationSeconds));
  ASSIGN_OR_RETURN(run.ring_timeout,
                   flags.GetSeconds("ring-timeout-seconds", 1, kMaxDurationSeconds));
  ASSIGN_OR_RETURN(run.join_grace,
                   flags.GetSeconds("join-grace-seconds", 1, kMaxDurationSeconds));
  ASSIGN_OR_RETURN(run.cpu_threads, flags.GetInt("cpu-threads", 0, kMaxCpuThreads));
  if (flags.Has("cpu-kernels")) {
    ASSIGN_OR_RETURN(CpuKernelLibrary library,
                     ParseCpuKernelLibrary(flags.Get("cpu-kernels"), "--cpu-kernels"));
    SetCpuKernelLibrary(library);  // read when the kernels are created
  }
  if (run.save_every > 0 && !flags.Has("checkpoint-dir")) {
    return InvalidArgumentError("--save-every needs --checkpoint-dir");
  }
  return run;
}

struct ResumePoint {
  std::string dir;
  int64_t iteration = 0;
};

// The checkpoint --resume names (`path`: a checkpoint, or a root holding
// iter-* checkpoints, of which the newest is taken), verified in full
// (every variable of the plan read and its checksums checked) before
// anything runs, even when no iteration is left. A corrupt newest
// checkpoint is refused, naming it and the newest intact one with the
// --resume argument that uses it; nothing is deleted and nothing falls
// back silently. Every error is bad input (exit 2).
StatusOr<ResumePoint> ResolveResume(const std::string& path,
                                    const std::map<std::string, TensorDesc>& variables) {
  std::vector<std::string> candidates = {path};
  if (!IsCheckpoint(path)) {
    ASSIGN_OR_RETURN(candidates, ShardedCheckpointStore::ListCheckpoints(path));
  }
  StatusOr<CheckpointManifest> newest = VerifyCheckpoint(candidates[0], variables);
  if (newest.ok()) return ResumePoint{candidates[0], newest->iteration};
  const Status corrupt = newest.status().WithContext("--resume: checkpoint '" + candidates[0] +
                                                     "' cannot be used");
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (VerifyCheckpoint(candidates[i], variables).ok()) {
      return InvalidArgumentError(corrupt.message(), "; the newest intact checkpoint under '",
                                  path, "' is '", candidates[i], "': resume from it with --resume ",
                                  candidates[i], " (nothing was deleted)");
    }
  }
  if (candidates.size() > 1) {
    return InvalidArgumentError(corrupt.message(), "; no older checkpoint under '", path,
                                "' is intact either");
  }
  return corrupt;
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

// Fault injection for tests/peer_loss_test.sh: a rank whose
// OFLITE_TEST_FREEZE_AT names this point stops itself (SIGSTOP) there, as a
// rank frozen by the operator or the OS would, until SIGCONT or SIGKILL.
void FreezePointForTests(const char* point) {
  const char* at = std::getenv("OFLITE_TEST_FREEZE_AT");
  if (at == nullptr || std::string(at) != point) return;
  std::fprintf(stderr, "oflite run: freezing at %s (OFLITE_TEST_FREEZE_AT)\n", point);
  std::fflush(stderr);
  std::fflush(stdout);
  std::raise(SIGSTOP);
}

// Single machine: runs `eval_plan` with the logical `variables`; prints its
// metrics.
Status Evaluate(const Plan& eval_plan, const std::map<std::string, HostTensor>& variables,
                const RuntimeOptions& base, const std::string& eval_out) {
  MemoryVariableStore store(&variables);
  MetricAverager averager;
  const auto begin = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                   Runtime::Create(eval_plan, EvalOptions(base, &averager, &store)));
  RETURN_IF_ERROR(runtime->Run().WithContext("evaluation"));
  return ReportTest(averager.Take(), eval_plan.samples_per_iter(), SecondsSince(begin),
                    eval_out);
}

// Multi-machine: this rank's part of the distributed evaluation (see the
// file comment). `parts` are the variable parts this machine trained.
Status EvaluateDistributed(const Plan& eval_plan, const TrainedParts& parts,
                           const RuntimeOptions& base, MultiMachineSession* session,
                           const std::string& eval_out) {
  const std::string who = "rank " + std::to_string(base.machine_id);
  RETURN_IF_ERROR(session->BeginRun(eval_plan, "eval"));
  TrainedPartsStore store(&parts, base.machine_id);
  MetricAverager averager;
  RuntimeOptions options = EvalOptions(base, &averager, &store);
  session->Configure(&options);
  const auto begin = std::chrono::steady_clock::now();
  MetricSums sums;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(eval_plan, options));
    DetachOnExit detach(session);  // destroyed before the runtime
    RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
    RETURN_IF_ERROR(runtime->Run().WithContext(who + " evaluation"));
    sums = averager.Take();
  }
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   session->GatherToRoot("eval-metrics", EncodeMetricSums(sums)));
  FreezePointForTests("eval-finish");
  RETURN_IF_ERROR(session->Finish(/*last=*/true));
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
  return ReportTest(merged, eval_plan.samples_per_iter(), seconds, eval_out);
}

// --resume at the last iteration: nothing trained, so the evaluation
// restores every variable part from that checkpoint (as `oflite eval`).
Status EvaluateCheckpoint(const Plan& eval_plan, const std::string& dir,
                          const RuntimeOptions& options, MultiMachineSession* session,
                          const std::string& eval_out) {
  CheckpointVariableStore::Options store_options;
  ASSIGN_OR_RETURN(store_options.variables, PlanVariables(eval_plan));
  store_options.restore_dir = dir;
  store_options.final_iteration = -1;  // keeps nothing in memory
  CheckpointVariableStore store(store_options);
  EvaluationRequest request;
  request.eval_plan = &eval_plan;
  request.variables = &store;
  request.base = options;
  request.session = session;
  request.begin_run = true;
  ASSIGN_OR_RETURN(EvaluationResult result, RunEvaluation(request));
  if (options.machine_id == 0) return ReportEvaluation(result, eval_out);
  std::printf("test: this machine's part done in %.1fs; rank 0 prints the metrics\n",
              result.seconds);
  return Status::OK();
}

// After training: evaluates with `plan`'s compiled evaluation plan, on one
// machine or distributed, or prints why there is none (the same decision on
// every rank: they run the same file). `resumed_final`: the checkpoint
// when --resume named the last iteration (nothing trained), else empty.
Status EvaluateTrained(const Plan& plan, CheckpointVariableStore* store,
                       PartCapturingStore* capture, const RuntimeOptions& options,
                       MultiMachineSession* session, const std::string& eval_out,
                       const std::string& resumed_final) {
  switch (plan.eval_state()) {
    case EVAL_COMPILED: break;
    case EVAL_NO_TEST_SPLIT:
      std::printf("test: skipped (the job reads no dataset with a test split)\n");
      return Status::OK();
    case EVAL_UNAVAILABLE:
      return FailedPreconditionError("the plan has no evaluation plan: ", plan.eval_note(),
                                     " (run with --eval=false to train without it)");
    default:
      std::printf("test: skipped (the plan carries no evaluation plan; `oflite compile` "
                  "writes one)\n");
      return Status::OK();
  }
  if (!resumed_final.empty()) {
    return EvaluateCheckpoint(plan.eval_plan(), resumed_final, options, session, eval_out);
  }
  if (session == nullptr) {
    std::map<std::string, HostTensor> trained = store->TakeFinalVariables();
    return Evaluate(plan.eval_plan(), trained, options, eval_out);
  }
  TrainedParts parts = capture->TakeParts();
  return EvaluateDistributed(plan.eval_plan(), parts, options, session, eval_out);
}

// Runs this machine's part of `plan` (with `session`: the first run of the
// multi-machine session, ended by its Finish barrier; the runtime is
// detached and destroyed on return).
// `last`: no evaluation follows on the session.
StatusOr<RunStats> Train(const Plan& plan, RuntimeOptions options, MultiMachineSession* session,
                         bool last) {
  if (session != nullptr) session->Configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  DetachOnExit detach(session);  // destroyed before the runtime
  if (session != nullptr) RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  RETURN_IF_ERROR(runtime->Run());
  FreezePointForTests("train-finish");
  if (session != nullptr) RETURN_IF_ERROR(session->Finish(last));
  return runtime->stats();
}

int Fail(const Status& status, int code) {
  std::fprintf(stderr, "oflite run: %s\n", status.ToString().c_str());
  return code;
}

// The tracer of --trace (window --trace-iters), or null without --trace.
StatusOr<std::unique_ptr<trace::Tracer>> MakeTracer(const FlagSet& flags, int64_t rank) {
  if (!flags.Has("trace")) {
    for (const char* flag : {"trace-iters", "trace-level"}) {
      if (flags.Has(flag)) return InvalidArgumentError("flag '--", flag, "' needs --trace");
    }
    return std::unique_ptr<trace::Tracer>();
  }
  trace::TracerOptions options;
  options.rank = rank;
  if (flags.Has("trace-level")) {
    const std::string level = flags.Get("trace-level");
    if (level != "acts" && level != "messages") {
      return InvalidArgumentError("flag '--trace-level': '", level,
                                  "' is not a level (acts or messages)");
    }
    options.messages = level == "messages";
  }
  if (flags.Has("trace-iters")) {
    RETURN_IF_ERROR(ParseTraceIters(flags.Get("trace-iters"), &options.first_iteration,
                                    &options.end_iteration));
  }
  return std::make_unique<trace::Tracer>(options);
}

Status WriteTrace(const trace::Tracer& tracer, const trace::TraceClock& clock,
                  const std::string& flag, int64_t machines) {
  ASSIGN_OR_RETURN(std::string path, TraceFileForRank(flag, machines, tracer.options().rank));
  RETURN_IF_ERROR(tracer.WriteJson(path, clock));
  std::printf("trace written to %s\n", path.c_str());
  return Status::OK();
}

// The exit code and line for the job ending because of `failure`: 4
// naming the culprit when it is another rank, 1 when it is this one.
int ReportJobFailure(int64_t rank, const JobFailure& failure) {
  const bool peer = failure.rank != rank;
  if (peer) {
    std::fprintf(stderr, "oflite run: rank %lld: job ended by rank %d: %s\n",
                 static_cast<long long>(rank), failure.rank, failure.reason.message().c_str());
  } else {
    std::fprintf(stderr, "oflite run: rank %lld: %s\n", static_cast<long long>(rank),
                 failure.reason.ToString().c_str());
  }
  std::fflush(stderr);
  std::fflush(stdout);
  return peer ? kExitPeerFailed : kExitFailure;
}

// The session's on_fatal: ends the process at once (no destructors: the
// runtime's threads may still be blocked on the lost peer), which keeps a
// peer's kill -9 noticed by every rank within milliseconds.
[[noreturn]] void ExitForJobFailure(int64_t rank, const JobFailure& failure) {
  _exit(ReportJobFailure(rank, failure));
}

// A failure seen by this rank in a multi-machine job: when another rank
// failed or was lost first, that is the cause (exit 4, naming it);
// otherwise this rank failed: reported here (exit `code`: 1, or 2 for bad
// input), then told to every peer (abort notice) so they stop at once
// naming this rank.
int FailJob(const Status& status, MultiMachineSession* session, int64_t rank,
            int code = kExitFailure) {
  const JobFailure failure = AttributeFailure(session, status);
  if (failure.rank >= 0 && failure.rank != rank) return ReportJobFailure(rank, failure);
  Fail(status, code);
  std::fflush(stderr);
  if (session != nullptr) session->AbortPeers(status);
  return code;
}

}  // namespace

int RunRun(int argc, char** argv) {
  std::vector<FlagSpec> specs = {{"plan", "the Plan file"},
                 {"rank", "this node's machine id (else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"},
                 {"master", "rendezvous address HOST:PORT (rank 0 serves it)"},
                 {"comm", "transport: " + comm::BuiltinProviders({}).NameList(), false, "auto"},
                 {"host_id", "host identity for --comm auto: peers with the same one use shm "
                             "(default: OFLITE_HOST_ID, else boot id/hostname/network namespace)"},
                 {"iters", "iterations to run (default: the plan's)", false, "0"},
                 {"log-every", "print a progress line every N iterations", false, "50"},
                 {"save-every", "checkpoint every N iterations (needs --checkpoint-dir)", false, "0"},
                 {"checkpoint-dir", "where checkpoints go (D/iter-<N>)"},
                 {"resume", "resume from checkpoint D (or the latest D/iter-*)"},
                 {"check-nan", "fail on NaN/Inf in any kernel output", true, "false"},
                 {"graph-replay", "replay captured device graphs of the plan's merged GPU tasks "
                                  "(off: run them kernel by kernel; the NaN check turns it off)",
                  true, "true"},
                 {"watchdog-seconds", "abort when no actor progresses this long", false, "60"},
                 {"ring-timeout-seconds", "bound of one cross-machine ring collective", false,
                  "120"},
                 {"join-grace-seconds", kJoinGraceHelp, false, "5"},
                 {"cpu-threads", "threads per CPU device, BLAS included (default: the plan's "
                  "cluster cpu_threads; 0 there: cores / CPU devices)", false, "0"},
                 {"cpu-kernels", "float32 convolutions and GEMMs: onednn or reference (im2col + "
                  "OpenBLAS; default: OFLITE_CPU_KERNELS, else onednn)"},
                 {"eval", "evaluate on the test split after training", false, "true"},
                 {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
                 {"metrics-out", "write per-iteration metrics to this file"},
                 {"eval-out", "write the test metrics (name value) to this file"},
                 {"trace", "write a timeline trace of training (Chrome trace JSON) to this file; "
                           "multi-machine plans: to DIR/rank-R.json in this directory"},
                 {"trace-iters", "trace only iterations A:B (A included, B not; needs --trace)"},
                 {"trace-level", "acts (default: acts, kernels, transfers, collectives and the "
                                 "messages between machines) or messages (also every message "
                                 "an actor handles; about 4x the events; needs --trace)"}};
  // The ibverbs provider's --ib_* flags (comm/ibverbs/ibverbs_flags.h).
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    specs.push_back({flag.name, flag.help, flag.is_bool, flag.default_value});
  }
  const comm::ibverbs::IbverbsFlag& emulator = comm::ibverbs::IbEmulatorFlag();
  specs.push_back({emulator.name, emulator.help, emulator.is_bool, emulator.default_value});
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
  StatusOr<RunFlags> run = ReadRunFlags(flags, *plan);
  if (!run.ok()) return Fail(run.status(), kExitBadInput);
  StatusOr<std::unique_ptr<trace::Tracer>> tracer = MakeTracer(flags, run->rank);
  if (!tracer.ok()) return Fail(tracer.status(), kExitBadInput);
  std::unique_ptr<MultiMachineSession> session;
  if (plan->machine_size() > 1) {
    MultiMachineOptions multi;
    multi.rank = run->rank;
    multi.master = flags.Get("master");
    multi.ring_timeout = run->ring_timeout;
    multi.refused_rank_grace = run->join_grace;
    std::map<std::string, std::string> ib_values;
    for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
      ib_values[flag.name] = flags.Get(flag.name);
    }
    StatusOr<comm::ibverbs::IbverbsOptions> ibverbs =
        comm::ibverbs::IbverbsOptionsFromFlags(ib_values);
    if (!ibverbs.ok()) return Fail(ibverbs.status(), kExitBadInput);
    // The process environment is read here, not in the libraries.
    comm::BuiltinProviderOptions providers;
    providers.listen_host = EnvOr("OFLITE_HOST", "127.0.0.1");
    providers.job_token = EnvOr("OFLITE_JOB_TOKEN", "");
    providers.ibverbs = *ibverbs;
    StatusOr<std::string> fabric = comm::ibverbs::IbEmulatorFromFlag(flags.Get("ib_emulator"));
    if (!fabric.ok()) return Fail(fabric.status(), kExitBadInput);
    providers.ib_emulator = *fabric;
    providers.host_id = !flags.Get("host_id").empty()
                            ? flags.Get("host_id")
                            : EnvOr("OFLITE_HOST_ID", comm::DefaultHostIdentity());
    const int64_t this_rank = run->rank;
    providers.note = [this_rank](const std::string& note) {
      std::fprintf(stderr, "oflite run: rank %lld: %s\n", static_cast<long long>(this_rank),
                   note.c_str());
    };
    StatusOr<comm::ProviderFactory> provider =
        comm::BuiltinProviders(providers).Find(flags.Get("comm"));
    if (!provider.ok()) return Fail(provider.status().WithContext("--comm"), kExitBadInput);
    multi.provider = *provider;
    multi.job_token = providers.job_token;
    multi.listen_host = providers.listen_host;
    multi.on_fatal = [this_rank](const JobFailure& failure) {
      ExitForJobFailure(this_rank, failure);
    };
    StatusOr<std::unique_ptr<MultiMachineSession>> started =
        MultiMachineSession::Start(*plan, multi);
    if (!started.ok()) {
      // Refused by the master (wrong job token): this rank's input is wrong.
      const bool refused = started.status().code() == StatusCode::kPermissionDenied;
      return Fail(started.status(), refused ? kExitBadInput : kExitFailure);
    }
    session = std::move(*started);
  }
  trace::TraceClock trace_clock;
  if (session != nullptr) {
    Status agreed = AgreeOnTracing(session->control(), *tracer != nullptr,
                                   std::chrono::milliseconds(60000));
    if (!agreed.ok()) {
      const bool differs = agreed.code() == StatusCode::kInvalidArgument;
      return FailJob(agreed, session.get(), run->rank, differs ? kExitBadInput : kExitFailure);
    }
  }
  if (*tracer != nullptr && session != nullptr) {
    StatusOr<trace::TraceClock> measured =
        MeasureClockOffset(session->control(), std::chrono::milliseconds(60000));
    if (!measured.ok()) return FailJob(measured.status(), session.get(), run->rank);
    trace_clock = *measured;
  }
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(*plan);
  if (!variables.ok()) return Fail(variables.status(), kExitBadInput);

  RuntimeOptions options;
  options.machine_id = run->rank;
  options.total_iters = run->iters;
  options.check_nan = flags.GetBool("check-nan");
  options.graph_replay = flags.GetBool("graph-replay");
  options.save_every = run->save_every;
  options.watchdog_timeout = run->watchdog;
  options.cpu_threads = static_cast<int>(run->cpu_threads);
  options.device.allow_tf32 = EnvOr("OFLITE_CUDA_ALLOW_TF32", "") == "1";
  CheckpointVariableStore::Options store_options;
  store_options.save_root = flags.Get("checkpoint-dir");
  store_options.variables = *variables;
  if (flags.Has("resume")) {
    StatusOr<ResumePoint> resume = ResolveResume(flags.Get("resume"), *variables);
    if (!resume.ok()) return FailJob(resume.status(), session.get(), run->rank, kExitBadInput);
    store_options.restore_dir = resume->dir;
    options.start_iter = resume->iteration;
    std::printf("resuming from %s at iteration %lld\n", resume->dir.c_str(),
                static_cast<long long>(resume->iteration));
  }
  const int64_t end = run->iters > 0 ? run->iters : plan->total_iters();
  store_options.final_iteration = end;
  CheckpointVariableStore store(store_options);
  ProgressPrinter progress(options.start_iter, end, run->log_every, plan->samples_per_iter());
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
  // Decided before training: the training run is the session's last one
  // unless an evaluation follows (the same decision on every rank: the same
  // plan file).
  const bool evaluate = flags.GetBool("eval") && plan->is_train();
  const bool evaluation_runs = evaluate && plan->eval_state() == EVAL_COMPILED;
  RuntimeOptions train_options = options;
  train_options.tracer = tracer->get();
  std::unique_ptr<StepTimer> step_timer;
  if (*tracer != nullptr) {
    const trace::TracerOptions& window = (*tracer)->options();
    step_timer = std::make_unique<StepTimer>(train_options.metrics, window.first_iteration,
                                             window.end_iteration);
    train_options.metrics = step_timer.get();
  }
  StatusOr<RunStats> stats = Train(*plan, train_options, session.get(), /*last=*/!evaluation_runs);
  if (*tracer != nullptr) {
    if (step_timer->StepUs() > 0) (*tracer)->SetOtherNumber("measured_step_us", step_timer->StepUs());
    Status written = WriteTrace(**tracer, trace_clock, flags.Get("trace"), plan->machine_size());
    if (!written.ok()) return FailJob(written, session.get(), run->rank, kExitBadInput);
  }
  if (!stats.ok()) return FailJob(stats.status(), session.get(), run->rank);
  std::printf("trained iterations %lld..%lld in %.1fs (%lld actors, %lld threads)\n",
              static_cast<long long>(options.start_iter), static_cast<long long>(end),
              stats->seconds, static_cast<long long>(stats->actors),
              static_cast<long long>(stats->threads));
  if (stats->graph_tasks > 0) {
    std::printf("graph replay: %lld task(s) captured %lld graph(s), %lld acts replayed\n",
                static_cast<long long>(stats->graph_tasks),
                static_cast<long long>(stats->graphs_captured),
                static_cast<long long>(stats->acts_replayed));
  }
  if (!stats->graph_note.empty()) std::printf("graph replay: %s\n", stats->graph_note.c_str());
  std::fflush(stdout);
  if (evaluate) {
    const bool trained_none = options.start_iter >= end && !store_options.restore_dir.empty();
    Status evaluated = EvaluateTrained(*plan, &store, &capture, options, session.get(),
                                       flags.Get("eval-out"),
                                       trained_none ? store_options.restore_dir : "");
    if (!evaluated.ok()) return FailJob(evaluated, session.get(), run->rank);
  }
  if (session != nullptr && flags.GetBool("stats")) {
    std::printf("%s\n", session->StatsSummary().c_str());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
