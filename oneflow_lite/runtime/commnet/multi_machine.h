// MultiMachineSession: what `oflite run` adds around the Runtime for a plan
// spanning machines (machine id == rank, one process per machine).
//
//   Start      joins the job's CommNet (rank 0 serves the rendezvous at
//              `master`), picking the transport (`comm`: tcp, ibverbs, or
//              auto = ibverbs when libibverbs loads and a device opens, else
//              tcp; the choice is logged on stderr).
//   Configure  points RuntimeOptions at the CommNetRoute and the registry
//              with TASK_COMMNET / TASK_COLLECTIVE actors.
//   AfterCreate attaches the route to the created runtime, registers the
//              static zero-copy registers and publishes their keys, waits
//              (bounded by the connect timeout) until every rank has built
//              its actors, then fetches the peers' keys.
//   Finish     after Run: a bounded barrier so no rank tears down its
//              connections while a peer still needs them.
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
// A lost peer (connection failure while a run is active, i.e. outside
// Finish), or a malformed frame, ends the process at once with exit code 1
// and a line on stderr naming the lost rank: the runtime has no way to
// finish a plan missing a machine, and this bounds every rank's exit by the
// transport's peer timeout.
// Not thread-safe; one session per process; must outlive every Runtime
// configured by it.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/commnet/abort_notice.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/runtime.h"
#include "proto/plan.pb.h"

namespace oflite {

struct MultiMachineOptions {
  int64_t rank = 0;
  std::string master;        // HOST:PORT
  std::string comm = "auto";  // tcp | ibverbs | auto
  // Device, port, GID index, queue depth... of the ibverbs provider (the
  // CLI's --ib_* flags, comm/ibverbs/ibverbs_flags.h).
  comm::ibverbs::IbverbsOptions ibverbs;
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds peer_timeout{5000};
  // Bound of one ring collective (all-reduce, reduce-scatter, all-gather).
  std::chrono::milliseconds ring_timeout{120000};
  // Tests: the transport to use instead of `comm` (e.g. the ibverbs
  // provider over the verbs emulator).
  comm::ProviderFactory provider;
  std::string provider_name = "custom";
};

class MultiMachineSession {
 public:
  static StatusOr<std::unique_ptr<MultiMachineSession>> Start(const Plan& plan,
                                                              const MultiMachineOptions& options);
  ~MultiMachineSession();

  void Configure(RuntimeOptions* options);
  Status AfterCreate(Runtime* runtime);
  Status Finish();
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
  // Per-strategy byte counters and the routes' totals (all runs).
  std::string StatsSummary() const;
  const std::string& provider() const { return provider_; }

 private:
  MultiMachineSession() = default;
  // A lost peer or malformed frame: ExitNaming unless finishing.
  void OnFatal(const std::string& what);
  // Prints "oflite run: rank R: <what>" and ends the process with exit 1.
  [[noreturn]] void ExitNaming(const std::string& what) const;
  std::string Who() const { return "rank " + std::to_string(options_.rank); }
  // "actors-ready" for the first run, "<name>/actors-ready" after.
  std::string BarrierName(const std::string& what) const;
  std::string KeyPrefix() const;
  void MakeRoute();

  MultiMachineOptions options_;
  const MachinePlan* plan_ = nullptr;  // this rank's part (the plan outlives us)
  std::string provider_;
  std::atomic<bool> finishing_{false};
  int run_index_ = 0;     // 0: the run set up by Start
  std::string run_name_;  // empty for the first run
  int64_t retired_messages_ = 0;  // counters of the previous runs' routes
  int64_t retired_bytes_ = 0;
  int64_t retired_bounce_payloads_ = 0;
  std::unique_ptr<comm::CommNet> net_;
  std::unique_ptr<AbortNotice> abort_;  // after net_: destroyed before it
  std::unique_ptr<CommNetRoute> route_;
  ActorRegistry registry_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
