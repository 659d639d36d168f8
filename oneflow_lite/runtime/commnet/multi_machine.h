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
// A lost peer (connection failure before Finish began), or a malformed frame,
// ends the process at once with exit code 1 and a line on stderr naming the
// lost rank: the runtime has no way to finish a plan missing a machine, and
// this bounds every rank's exit by the transport's peer timeout.
// Not thread-safe; one session per process; must outlive the Runtime.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_

#include <atomic>
#include <memory>
#include <string>

#include "oneflow_lite/comm/comm_net.h"
#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/commnet/commnet_route.h"
#include "oneflow_lite/runtime/runtime.h"
#include "proto/plan.pb.h"

namespace oflite {

struct MultiMachineOptions {
  int64_t rank = 0;
  std::string master;        // HOST:PORT
  std::string comm = "auto";  // tcp | ibverbs | auto
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds peer_timeout{5000};
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
  // Per-strategy byte counters and the route's totals.
  std::string StatsSummary() const;
  const std::string& provider() const { return provider_; }

 private:
  MultiMachineSession() = default;
  void OnFatal(const std::string& what);

  MultiMachineOptions options_;
  const MachinePlan* plan_ = nullptr;  // this rank's part (the plan outlives us)
  std::string provider_;
  std::atomic<bool> finishing_{false};
  std::unique_ptr<comm::CommNet> net_;
  std::unique_ptr<CommNetRoute> route_;
  ActorRegistry registry_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_MULTI_MACHINE_H_
