// MultiMachineSession: what `oflite run` adds around the Runtime for a plan
// spanning machines (machine id == rank, one process per machine).
//
//   Start      joins the job's CommNet (rank 0 serves the rendezvous at
//              `master`) over the given transport provider (the CLI picks
//              it by name from comm/builtin_providers.h); logs the join.
//   Configure  points RuntimeOptions at the CommNetRoute and the registry
//              with TASK_COMMNET / TASK_COLLECTIVE actors.
//   AfterCreate attaches the route to the created runtime, registers the
//              static zero-copy registers and publishes their keys, waits
//              (bounded by the connect timeout) until every rank has built
//              its actors, then fetches the peers' keys.
//   Finish     after Run: a bounded barrier so no rank tears down its
//              connections while a peer still needs them (peer loss stays
//              armed while it waits, see below).
//   Detach     stops delivering peers' actor messages to the runtime.
//
// Several runs, one after another, share the session's CommNet (training,
// then the evaluation plan): after Finish and Detach, and once the previous
// Runtime is destroyed, BeginRun(plan, name) gives the next run a fresh
// route and registry (the previous route's registered memory is released),
// checks that every rank has the same plan (a fingerprint through the
// control-plane KV; plans compiled on each rank must agree), names the run's
// barriers "<name>/..." and its KV keys "oflite/run/<n>-<name>/...", and
// re-arms peer-loss handling. Then Configure, AfterCreate, Run, Finish,
// Detach as for the first run. GatherToRoot collects one value per rank at
// rank 0 (e.g. each rank's evaluation metrics) before that run's Finish.
//
// A join that fails because of a peer (one that died, went silent at the
// control plane, never published its endpoint or could not be connected;
// the master gone) is that peer's failure: Start calls on_fatal with it
// ("lost rank R while joining: ...") before returning the error, so the
// CLI exits 4 naming R within about the peer timeout.
// Peer loss is armed from Start to the end of the last run's Finish
// barrier (Finish(/*last=*/true)), including every barrier, the gap
// between runs and the evaluation: a lost peer (its connection fails: it
// died, or was silent for peer_timeout), a peer's abort notice or a
// malformed frame ends the job for this rank. The session then
//   1. records the first cause in the AbortNotice and relays it, so every
//      rank names the same culprit (abort_notice.h);
//   2. calls options.on_fatal once, on the session's own thread, with the
//      culprit and the reason. The library never ends the process: the CLI
//      uses on_fatal to exit at once (4 for another rank's failure, 1 for
//      its own), which bounds every rank's exit by the transport's peer
//      timeout;
//   3. then aborts the control client, so a rank blocked at a barrier or a
//      KV get wakes with that cause (on_fatal has returned by then), and
//      collective actors fail their runtime with it (a runtime waiting on a
//      lost peer's register ends by its watchdog).
// After the last Finish barrier a peer leaving is normal and ignored; a
// peer that leaves while this rank is still in that barrier (it got its
// answer first) says goodbye first (its session's destructor, after a
// successful last Finish), and its going is ignored too. failure() reports
// the first cause; the session's calls return it once it is known.
// Not thread-safe (except failure()); one session per process; must outlive
// every Runtime configured by it.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/commnet/abort_notice.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/runtime.h"
#include "proto/plan.pb.h"

namespace oflite {

// The transport's message slot size (comm::TransportOptions::
// message_slot_size) in a session's CommNet: registers travel as pushed
// chunks and collectives' pieces fill whole messages, so larger slots mean
// fewer messages. 128 bytes above 64 KiB: a 64 KiB exchange piece with its
// slot, channel and piece headers (45 bytes) is one message, not two
// (docs/comm.md). Benchmarks of the runtime's collectives use it too.
inline constexpr size_t kRuntimeMessageSlotSize = (64 << 10) + 128;

// What ended the job for this rank: the rank that failed or was lost first
// (this rank's own, for a local failure such as a malformed frame) and why.
struct JobFailure {
  int rank = -1;
  Status reason;
};

struct MultiMachineOptions {
  int64_t rank = 0;
  std::string master;        // HOST:PORT
  // Required: presented to the rendezvous and on every data connection
  // (the CLI reads it from OFLITE_JOB_TOKEN; nothing here reads the
  // environment).
  std::string job_token;
  // This rank's address for the default tcp provider (the CLI passes
  // OFLITE_HOST to its providers instead).
  std::string listen_host = "127.0.0.1";
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds peer_timeout{5000};
  // Rank 0 only: after refusing a wrong-token JOIN that claims rank R, how
  // long the rendezvous still waits for the genuine rank R before the job
  // fails naming the refusal (CLI: --join-grace-seconds).
  std::chrono::milliseconds refused_rank_grace{5000};
  // Bound of one ring collective (all-reduce, reduce-scatter, all-gather).
  std::chrono::milliseconds ring_timeout{120000};
  // The transport (e.g. the --comm choice from a comm::ProviderRegistry, or
  // the ibverbs provider over the verbs emulator in tests); empty: tcp.
  // Shown as `provider_name`, or when that is empty as the transport's own
  // provider name.
  comm::ProviderFactory provider;
  std::string provider_name;
  // Names the program in the line that reports the join ("oflite eval:
  // rank 1 of 2 joined over shm").
  std::string program = "oflite run";
  // Called once when the job ends for this rank (see above), on the
  // session's thread; may end the process. Empty: waiters are woken and
  // the session's calls return the failure.
  std::function<void(const JobFailure&)> on_fatal;
  // Fault injection for tests (comm::CommNetOptions::after_join): called
  // once joined to the control plane, before the data connections.
  std::function<void()> after_join;
};

class MultiMachineSession {
 public:
  static StatusOr<std::unique_ptr<MultiMachineSession>> Start(const Plan& plan,
                                                              const MultiMachineOptions& options);
  ~MultiMachineSession();

  void Configure(RuntimeOptions* options);
  Status AfterCreate(Runtime* runtime);
  // The run's closing barrier, bounded by the connect timeout; peer loss
  // stays armed while it waits. `last`: no run follows on this session, so
  // once every rank has arrived, peers leaving is normal (disarmed until
  // a BeginRun). Pass false when another run (the evaluation) follows.
  Status Finish(bool last = true);
  // Stops delivering peers' messages to the runtime (call before the
  // runtime is destroyed; later messages are parked by the router).
  void Detach();
  // Prepares the next run on the same CommNet (see above). The previous
  // run must have finished (Finish) and its runtime been destroyed.
  // FailedPrecondition when `plan` differs from rank 0's, naming the rank.
  Status BeginRun(const Plan& plan, const std::string& name);
  // Every rank calls it with the same `key`: rank 0 gets every rank's
  // `value` in rank order (waiting up to the connect timeout for each,
  // failing early naming a rank that left), the other ranks an empty
  // vector once their value is published.
  StatusOr<std::vector<std::string>> GatherToRoot(const std::string& key,
                                                  const std::string& value);
  // This rank failed with `status` (its runtime could not be created or its
  // run failed): tells every peer through the abort notice (runtime/commnet/
  // abort_notice.h) so they stop at once naming this rank, instead of
  // waiting for a barrier or ring deadline. Bounded (about 2 s at most).
  void AbortPeers(const Status& status);
  // The first cause once the job ended for this rank because of a peer or
  // a local fatal event (rank -1 while none). Thread-safe.
  JobFailure failure() const;
  // Per-strategy byte counters and the routes' totals (all runs).
  std::string StatsSummary() const;
  const std::string& provider() const { return provider_; }
  // The job's control-plane client (e.g. to measure clock offsets for a
  // trace); owned by the session; the same thread rules as the session.
  comm::control::ControlClient* control() { return net_->control(); }

 private:
  MultiMachineSession() = default;
  // Transport progress thread: a peer's connection failed.
  void OnPeerLost(int peer, const Status& error);
  // A peer's abort notice was recorded (progress thread).
  void OnPeerAbort();
  // A malformed frame or failed bounce stream (this rank's detection).
  void OnLocalFatal(const Status& status);
  // Wakes the fatal thread (FatalLoop) unless disarmed; true if woken.
  bool TriggerFatalLocked();
  // The session's thread: on a fatal event flushes the relays, aborts the
  // control client and calls on_fatal.
  void FatalLoop();
  // A control-plane call failed: the peer's cause if one is (or within a
  // moment becomes) known, else `error`.
  Status ControlError(const Status& error);
  void InstallHandlers();
  std::string Who() const { return "rank " + std::to_string(options_.rank); }
  // "actors-ready" for the first run, "<name>/actors-ready" after.
  std::string BarrierName(const std::string& what) const;
  std::string KeyPrefix() const;
  void MakeRoute();
  // Holds or releases actors_wait_ for `plan` (Start, BeginRun).
  void HoldTransportFor(const Plan& plan);

  MultiMachineOptions options_;
  const MachinePlan* plan_ = nullptr;  // this rank's part (the plan outlives us)
  std::vector<int64_t> plan_rings_;    // the run's ring keys, all machines' (MakeRoute)
  std::string provider_;
  bool last_done_ = false;     // the last Finish barrier passed (main thread)
  bool run_finished_ = false;  // the current run's Finish passed (main thread)
  int run_index_ = 0;     // 0: the run set up by Start
  std::string run_name_;  // empty for the first run
  int64_t retired_messages_ = 0;  // counters of the previous runs' routes
  int64_t retired_bytes_ = 0;
  int64_t retired_bounce_payloads_ = 0;
  std::unique_ptr<comm::CommNet> net_;
  // Held while the current run's actors wait for peers' messages
  // themselves (a remote register, an all-to-all's parts; ActorsWaitOnPeers):
  // they never poll the transport, so its progress thread must not step
  // aside for collectives' polling callers (comm::Transport::BeginBlockingWait).
  std::unique_ptr<comm::BlockingWait> actors_wait_;  // after net_: released before it
  std::unique_ptr<AbortNotice> abort_;  // after net_: destroyed before it
  std::unique_ptr<CommNetRoute> route_;
  ActorRegistry registry_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool armed_ = true;          // guarded by mutex_: peer loss ends the job
  bool fatal_ = false;         // guarded by mutex_: FatalLoop has work
  bool stopping_ = false;      // guarded by mutex_: FatalLoop must return
  bool ready_ = false;         // guarded by mutex_: abort_ exists
  Status local_fatal_;         // guarded by mutex_
  std::vector<std::pair<int, Status>> early_losses_;  // guarded: before ready_
  std::set<int> departed_;     // guarded by mutex_: peers that said goodbye
  JobFailure failure_;         // guarded by mutex_
  std::thread fatal_thread_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
