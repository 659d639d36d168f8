// KernelRunner: creates the kernels of one task (TaskProto.kernel, in order)
// and runs them on the registers of one act.
//
// Each BlobBinding names a register desc and a blob in it; at run time the
// desc resolves to the register the act reads (consumed) or writes
// (produced). With check_nan, every float output is scanned after its
// kernel and a NaN or Inf fails the act naming the op, the output and the
// iteration (on an asynchronous device the outputs are copied to the host
// and the stream synchronized first: the NaN check is a debugging aid and
// stalls the stream). Each kernel call goes through DeviceContext::Launch,
// so on a stream with a thread of its own (the test stream) it runs later,
// in stream order; the runner (and its kernels) must then outlive the
// context's queued work, which the runtime ensures by destroying contexts
// first. Owned by one actor; used on its thread only.
//
// Graph replay (TaskProto.graph_replay, docs/gpu.md "Graph replay"): when
// the env allows it (graph_replay on, check_nan off), the device context
// SupportsGraphs() and no register the kernels bind is dynamic, an act is
// keyed by the register copies it holds (which fix the address of every
// blob its kernels bind: a copy's blobs sit at fixed offsets in its
// memory). The first act of
// a key runs kernel by kernel (lazy allocations, algorithm choice); the
// second is captured (DeviceContext::BeginCapture .. EndCapture) and
// launched; every later act of that key launches the graph
// (DeviceContext::LaunchGraph). So the register protocol still guards
// every buffer: a graph only ever runs on the registers the act holds. At
// most kMaxGraphs keys get a graph; others run kernel by kernel. A capture
// that fails (a kernel made a call a capture forbids) turns replay off for
// the task, and the act runs uncaptured; a kernel error in a capture that
// itself succeeded is the act's error. On a replayed act no kernel's host
// code runs: device-side error reports are read by ReportDeferredErrors.
#ifndef ONEFLOW_LITE_RUNTIME_KERNEL_RUNNER_H_
#define ONEFLOW_LITE_RUNTIME_KERNEL_RUNNER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "proto/plan.pb.h"

namespace oflite {

class KernelRunner {
 public:
  // Creates and initializes every kernel of `task` (or only those for which
  // `select(conf)` is true). Errors name the task and op.
  static StatusOr<std::unique_ptr<KernelRunner>> Create(const TaskProto& task,
                                                        const ActorEnv& env);

  // Runs all kernels in order on `context`'s registers.
  Status Run(ActContext* context);
  // Once the stream has finished every kernel call enqueued (the end of a
  // run): the first error a kernel found on the device and has not
  // reported yet (Kernel::ReportDeferredErrors), naming the op. OK when no
  // kernel ran.
  Status ReportDeferredErrors() const;
  int kernel_count() const { return static_cast<int>(entries_.size()); }
  static constexpr int kMaxGraphs = 8;

 private:
  struct Entry {
    const KernelConf* conf = nullptr;
    std::unique_ptr<Kernel> kernel;
    // On a synchronous device (kernels run inside Launch's call) the call's
    // context is built once, bound in the conf's order, and each act only
    // swaps its blobs: no allocation per act. Null on an asynchronous device,
    // whose queued work needs a context of its own per call.
    std::unique_ptr<KernelContext> context;
    // The op's name as interned on the trace track of the thread that runs
    // the kernel (only a stream thread has one).
    mutable trace::InternedName trace_name;
  };
  // The blobs one kernel call is bound to, in binding order (shared with
  // the work queued on the stream).
  struct BoundBlobs {
    std::vector<std::pair<std::string, Blob*>> inputs;
    std::vector<std::pair<std::string, Blob*>> outputs;
  };
  // One key of graph replay: its first act ran uncaptured, then its graph.
  struct KeyedGraph {
    bool ran_uncaptured = false;
    std::unique_ptr<DeviceGraph> graph;
  };
  // Why a task marked graph_replay runs kernel by kernel on a device that
  // can capture, or "".
  static std::string WhyNoReplay(const TaskProto& task, const ActorEnv& env);
  KernelRunner(const TaskProto& task, const ActorEnv& env) : task_(&task), env_(&env) {}
  Status RunAll(ActContext* context);
  Status RunReplayed(ActContext* context);
  void StopReplay(const std::string& why);
  Status RunOne(const Entry& entry, ActContext* context);
  // RunOne on a synchronous device, through entry.context.
  Status RunInline(const Entry& entry, ActContext* context);
  Status CheckFinite(const Entry& entry, const std::vector<const Blob*>& outputs,
                     int64_t piece) const;

  const TaskProto* task_;
  const ActorEnv* env_;
  std::vector<Entry> entries_;
  int64_t last_piece_ = -1;  // the iteration of the latest Run
  bool replay_ = false;
  bool captured_any_ = false;
  std::map<std::vector<const void*>, KeyedGraph> graphs_;
  trace::InternedName graph_trace_name_;
};

// The blob a binding names, in the registers of `context`; InvalidArgument
// when the register is neither consumed nor produced by the act.
StatusOr<Blob*> ResolveBinding(const BlobBinding& binding, ActContext* context);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_KERNEL_RUNNER_H_
