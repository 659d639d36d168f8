// Runtime: runs one machine's part of a Plan.
//
// Create first verifies the whole plan (plan/plan_verifier.h: ids, bindings,
// register owners, offsets; InvalidArgument naming the task and field), then
// does the whole start-up before anything runs: one allocation per
// memory zone of the memory plan (MemoryZones), every register cut out of it
// (RegstStore), one thread per device stream (StreamKeyOfTaskId of the task
// ids) with its own DeviceContext, and every actor built from its task by
// type (ActorRegistry). Any failure there (allocation, a malformed plan, a
// missing kernel, no CUDA backend or device) is returned and nothing runs.
//
// Devices: a CPU stream thread gets a CpuDeviceContext. When the plan has
// CUDA zones or CUDA tasks, the runtime creates the CUDA DeviceBackend
// (device/device_backend.h; linked in by //oneflow_lite/device/cuda:cuda_backend
// under --config=cuda, else Unimplemented): one cudaMalloc per CUDA zone,
// pinned memory for the pinned-host zones, and per CUDA stream thread a
// CudaDeviceContext (own stream, cuBLAS/cuDNN handles) completing through one
// poller per device. Actors on asynchronous contexts send "produced" only
// after their stream finished the act (regst_actor.h).
// options.device_context_factory replaces the choice of context for every
// stream (tests run whole plans on asynchronous CPU contexts with it). Run then starts the threads, sends "start" to every
// actor, and blocks until every actor has finished or the run failed.
//
// Failure: the first error any actor returns (a kernel error naming the op
// and iteration, a NaN found by the NaN check, a protocol violation) stops
// every thread; Run returns it. The watchdog aborts a run in which no actor
// handled a message for `watchdog_timeout` and reports, for every actor not
// finished, what it waits on. Run never blocks longer than that bound past
// the last progress (kernel calls themselves are not interrupted).
//
// Messages to other machines leave through options.remote_route; messages
// from them enter through bus()->DeliverLocal (CommNet's seam, see
// message_bus.h). Hooks (metrics, variables) are called from actor threads.
// Run may be called once. The plan and hooks must outlive the Runtime.
#ifndef ONEFLOW_LITE_RUNTIME_RUNTIME_H_
#define ONEFLOW_LITE_RUNTIME_RUNTIME_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/device/device_backend.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/runtime/actor_registry.h"
#include "oneflow_lite/runtime/memory_zones.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/runtime_hooks.h"
#include "proto/plan.pb.h"

namespace oflite {

// Makes the DeviceContext of one stream thread (called on the thread that
// creates the runtime; the context is then used on the stream's thread).
using DeviceContextFactory =
    std::function<StatusOr<std::unique_ptr<DeviceContext>>(const StreamId& stream)>;

struct RuntimeOptions {
  int64_t machine_id = 0;
  // Iterations run: [start_iter, total_iters). total_iters 0 = the plan's
  // Plan.total_iters. (The runtime reads run settings from Plan fields only,
  // never from the embedded Job: docs/plan_format.md.)
  int64_t start_iter = 0;
  int64_t total_iters = 0;
  bool check_nan = false;
  // Replay captured device graphs of tasks marked TaskProto.graph_replay
  // (docs/gpu.md "Graph replay"); false: run them stream-ordered, kernel by
  // kernel. The NaN check turns replay off.
  bool graph_replay = true;
  int64_t save_every = 0;  // variables snapshot to `variables` every N iters
  std::chrono::milliseconds watchdog_timeout{60000};
  int64_t max_zone_bytes = 0;  // 0: no limit (tests inject allocation failure)
  MetricsObserver* metrics = nullptr;
  OutputObserver* outputs = nullptr;  // null: named outputs are dropped
  VariableStore* variables = nullptr;
  RemoteRoute* remote_route = nullptr;
  const ActorRegistry* registry = nullptr;  // null: BuiltinActorRegistry()
  // null: CpuDeviceContext for CPU streams, the CUDA backend's for CUDA ones.
  DeviceContextFactory device_context_factory;
  // Handed to the device backend (e.g. TF32 matmuls on CUDA).
  DeviceBackendOptions device;
  // Not owned; null: no trace. When set, every stream thread records its
  // messages, acts and kernels on a track of its own (docs/tracing.md); the
  // tracer must outlive the Runtime and is read after Run returned.
  trace::Tracer* tracer = nullptr;
  // Threads per CPU device (kernels/cpu/cpu_threads.h); 0: the plan's
  // cluster.machine[machine_id].cpu_threads, whose 0 means the cores
  // divided among the machine's CPU devices. Applied to the (process-wide)
  // BLAS library by Create.
  int cpu_threads = 0;
  // The caller verified `plan` when it loaded it (VerifyPlan with default
  // options, which covers its nested evaluation plan; the node session's
  // LoadVerifiedPlan): Create skips its own check. False: Create verifies.
  bool plan_verified = false;
};

struct RunStats {
  int64_t actors = 0;
  int64_t threads = 0;
  int64_t acts = 0;      // acts of all actors
  int64_t messages = 0;  // messages routed by the bus
  double seconds = 0;    // wall time of Run
  // Graph replay (kernel_runner.h): tasks that captured graphs, graphs
  // captured, acts run as graph launches, tasks marked for replay that ran
  // kernel by kernel instead, and the first such task's reason.
  int64_t graph_tasks = 0;
  int64_t graphs_captured = 0;
  int64_t acts_replayed = 0;
  int64_t graph_fallbacks = 0;
  std::string graph_note;
};

class Runtime {
 public:
  static StatusOr<std::unique_ptr<Runtime>> Create(const Plan& plan, RuntimeOptions options);
  ~Runtime();

  Status Run();
  // Valid after Run.
  const RunStats& stats() const { return stats_; }
  LocalMessageBus* bus() { return &bus_; }
  const RegstStore* regsts() const { return regsts_.get(); }
  int64_t start_iter() const { return start_iter_; }
  int64_t end_iter() const { return end_iter_; }

 private:
  class StreamThread;
  Runtime(const MachinePlan& plan, RuntimeOptions options);

  Status CreateBackendIfNeeded();
  StatusOr<std::unique_ptr<DeviceContext>> CreateStreamContext(int64_t task_id);
  Status BuildActors(const Plan& plan);
  void Abort(const Status& status);
  void ThreadDone(const std::vector<std::string>& waiting);
  void Watch();
  // Messages handled by every thread so far (the watchdog's sign of life).
  int64_t Progress() const;

  const MachinePlan* plan_;
  RuntimeOptions options_;
  ActorRegistry builtin_registry_;
  std::unique_ptr<DeviceBackend> backend_;  // CUDA plans only; outlives the contexts
  std::unique_ptr<MemoryZones> zones_;
  std::unique_ptr<RegstStore> regsts_;
  LocalMessageBus bus_;
  std::vector<std::unique_ptr<StreamThread>> threads_;
  int64_t start_iter_ = 0;
  int64_t end_iter_ = 0;
  bool ran_ = false;

  std::atomic<bool> aborted_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  Status first_error_;                // guarded by mutex_
  int threads_done_ = 0;              // guarded by mutex_
  std::vector<std::string> waiting_;  // guarded by mutex_
  RunStats stats_;
  GraphReplayStats graph_stats_;
};

// The machine's part of `plan`, or NotFound naming the machine.
StatusOr<const MachinePlan*> FindMachinePlan(const Plan& plan, int64_t machine_id);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_RUNTIME_H_
