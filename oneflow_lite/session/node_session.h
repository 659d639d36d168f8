// NodeSession: this process's part of a job, from joining to detaching.
// Every program that runs a plan (`oflite run`, `eval`, `predict`, the
// training driver) goes through it, so the sequence below is written once:
//
//   Start   for a multi-machine plan prints where rank, world and master
//           came from (NodeOptions::placement), binds this process to
//           NodeOptions::bind_cpus (a launcher's local rank), then
//           joins the job of a multi-machine plan (providers chosen per
//           peer from NodeOptions: --comm, host identity, ibverbs options,
//           job token, master, join grace; MultiMachineSession::Start),
//           then shares the host's CPUs with the other ranks started
//           unbound on it (--share-host, comm/launch/host_share.h: binds
//           or limits compute threads; one line says what it did);
//           nothing to join for a one-machine plan. Applies --cpu-kernels.
//   RunPlan runs one plan on this node: for a run after the first on a
//           multi-machine session BeginRun (fresh route, same-plan check),
//           then Configure, Runtime::Create (the plan was verified when
//           loaded: LoadVerifiedPlan), AfterCreate, Run, the caller's
//           `before_finish` (e.g. gathering metrics at rank 0), the Finish
//           barrier, Detach; the runtime is destroyed before it returns.
//   Fail    ends the job for this rank: when another rank failed or was
//           lost first, one line naming it ("<command>: rank R: job ended
//           by rank C: ...") and exit code 4; otherwise this rank's error
//           ("<command>: <error>"), told to every peer (abort notice), and
//           the caller's code (1, or 2 for bad input).
//
// A peer lost while the session is armed ends the process from the
// session's own thread (MultiMachineSession's on_fatal) at once, exit 4
// (1 when the culprit is this rank): no destructor runs, since runtime
// threads may be blocked on the lost peer. Exactly one failure line is
// printed per process, whichever of the two paths gets there first.
//
// Not thread-safe except as stated; one NodeSession per process.
#ifndef ONEFLOW_LITE_SESSION_NODE_SESSION_H_
#define ONEFLOW_LITE_SESSION_NODE_SESSION_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/commnet/multi_machine.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/node_options.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace session {

// Loads a Plan file and verifies it (plan/plan_verifier.h), the one check
// of that plan and of its nested evaluation plan: every error names the
// file (bad input).
StatusOr<Plan> LoadVerifiedPlan(const std::string& path);

// Prints "<command>: <status>" to stderr and returns `code`: a failure
// before a session exists.
int ReportFailure(const std::string& command, const Status& status, int code);

// Prints "<command>: <status>" for a NodeSession::Start that failed and
// returns its exit code: 2 when the master refused this rank's job token
// (PermissionDenied: this rank's input is wrong), else 1.
int ReportStartFailure(const std::string& command, const Status& status);

// One step of RunPlan.
struct PlanRun {
  std::string name = "train";  // names BeginRun's barriers and the freeze point
  bool last = true;            // no other run follows on this session
  std::string context;         // prefixes the run's error ("" for none)
  // After Run, before the Finish barrier; may be empty.
  std::function<Status()> before_finish;
};

class NodeSession {
 public:
  // Joins `plan`'s job (see the file comment). PermissionDenied: the
  // master refused this rank's job token (bad input).
  static StatusOr<std::unique_ptr<NodeSession>> Start(const Plan& plan,
                                                      const NodeOptions& options);
  ~NodeSession();

  const NodeOptions& options() const { return options_; }
  int64_t rank() const { return options_.rank; }
  // Null for a one-machine plan.
  MultiMachineSession* multi() const { return multi_.get(); }

  // What every run of this node starts from: machine id, watchdog, NaN
  // check, graph replay, CPU threads, TF32, plan already verified.
  RuntimeOptions BaseRuntimeOptions() const;

  // See the file comment. Blocks until the run and its barrier are done;
  // bounded by the runtime's watchdog and the session's timeouts.
  StatusOr<RunStats> RunPlan(const Plan& plan, RuntimeOptions options, const PlanRun& run);

  // See the file comment; returns the exit code. Thread-compatible with
  // the session's fatal handler (one line per process).
  int Fail(const Status& status, int code);

  // The CommNet counters (--stats) of a multi-machine session; nothing
  // otherwise.
  void PrintStats() const;

 private:
  explicit NodeSession(NodeOptions options) : options_(std::move(options)) {}
  // The session's on_fatal: one line, then _exit.
  [[noreturn]] void ExitForJobFailure(const JobFailure& failure);
  // Prints the line of a job ended by `failure`; returns its exit code.
  int ReportJobFailure(const JobFailure& failure);
  // True for the first caller in this process; later callers must not
  // print a second failure line.
  bool ClaimFailureReport();
  void FreezeIfAsked(const std::string& point) const;
  // After joining: shares this host's CPUs with the ranks started unbound
  // on it (NodeOptions::share_host, comm/launch/host_share.h): binds this
  // process or sets host_share_threads_, and prints what it did. An
  // optimization: when it cannot be done (a peer lost meanwhile, binding
  // refused) it says so and the run goes on as before.
  void ShareHost(const Plan& plan);

  const NodeOptions options_;
  std::unique_ptr<MultiMachineSession> multi_;
  int runs_ = 0;  // plans run so far (main thread)
  // Threads per CPU device the host share chose (0: none; ShareHost).
  int host_share_threads_ = 0;
  std::atomic<bool> failure_reported_{false};
  // The exit code chosen by the path that printed the failure line, for a
  // fatal handler that came second.
  std::atomic<int> decided_exit_code_{-1};
};

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_NODE_SESSION_H_
