// DeviceContext: what a kernel and an actor need from the device stream they
// run on.
//
// The CPU context is synchronous: kernels run on the actor's thread and their
// work is done when Forward returns. The CUDA context
// (device/cuda/cuda_device_context.h) carries the actor thread's stream and
// library handles; work is only enqueued and finishes later. CUDA kernels
// downcast with static_cast<const CudaDeviceContext*>.
//
// Asynchronous completion: a context whose IsAsync() is true finishes work
// after the call that enqueued it returned. OnStreamDone(done) then runs
// `done` on another thread once everything enqueued so far has finished (in
// enqueue order), with an error if that work failed; the actor runtime uses
// it to send "produced" only when the data is really there
// (runtime/regst_actor.h). A synchronous context runs `done` at once, on the
// calling thread. Before an asynchronous context is destroyed, every `done`
// it accepted has run (with a Cancelled status if its work never finished),
// so a callback never outlives the objects it was given while the context's
// owner keeps them alive longer than the context.
//
// Graph capture (CUDA Graphs; docs/gpu.md "Graph replay"): between
// BeginCapture and EndCapture, work enqueued through the context (Launch,
// Memcpy, a CUDA kernel's own calls on the stream) is recorded, not run.
// EndCapture returns the recording as a DeviceGraph; LaunchGraph enqueues
// all of it again, in stream order, with the arguments and buffers it was
// recorded with (so the caller keeps those valid and unchanged while it
// replays). Host code a kernel runs while it enqueues (Forward's host part)
// runs once, at capture. A failed EndCapture means nothing recorded ran and
// the context is out of capture mode: the caller runs the work uncaptured.
//
// A context is owned by the runtime's stream thread and outlives every kernel
// call made with it; it is used from that one thread only (OnStreamDone's
// callbacks run elsewhere and must not touch the context).
#ifndef ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_
#define ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/common/status.h"
#include "proto/common.pb.h"

namespace oflite {

// Which side of a copy is device memory (for the CPU, both are host memory).
enum class CopyKind { kHostToHost, kHostToDevice, kDeviceToHost, kDeviceToDevice };

// A recorded sequence of enqueued work (see the header comment); owned by
// the caller of EndCapture, launched only on the context that recorded it,
// and destroyed before that context.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
};

class DeviceContext {
 public:
  using DoneCallback = std::function<void(const Status&)>;

  virtual ~DeviceContext() = default;
  virtual DeviceType device_type() const = 0;
  virtual int device_index() const { return 0; }

  // Called once on the stream thread before any other use (a CUDA context
  // makes its device current there).
  virtual Status BindToCurrentThread() const { return Status::OK(); }

  // True when work enqueued on this context finishes after the enqueueing
  // call returned (see the header comment).
  virtual bool IsAsync() const { return false; }

  // Runs `done` once all work enqueued so far has finished. `label` names the
  // actor in errors. Synchronous contexts call `done(OK)` before returning.
  // An error here means `done` will never run.
  virtual Status OnStreamDone(const std::string& label, DoneCallback done) const {
    done(Status::OK());
    return Status::OK();
  }

  // Runs host work `work` (a CPU kernel's Forward) in stream order. The CPU
  // and CUDA contexts run it now, on the calling thread (CUDA kernels
  // enqueue their own device work), and return its status. A context whose
  // stream is a thread of its own (the test stream,
  // runtime/testing/async_cpu_context.h) queues it and returns OK; an error
  // of queued work is sticky: every later completion (OnStreamDone) and
  // Synchronize of the context fails with it, like a CUDA error. `work` and
  // what it points to must stay valid until it ran.
  virtual Status Launch(std::function<Status()> work) const { return work(); }

  // Copies `bytes` bytes from `src` to `dst`, ordered after the work already
  // enqueued (for an asynchronous context: enqueued, not finished, on return).
  virtual Status Memcpy(void* dst, const void* src, int64_t bytes, CopyKind kind) const {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    return Status::OK();
  }

  // Blocks until all work enqueued so far has finished (for reading device
  // results on the host: NaN checks, variable snapshots).
  virtual Status Synchronize() const { return Status::OK(); }

  // Graph capture (see the header comment). SupportsGraphs() false: the
  // three calls return Unimplemented.
  virtual bool SupportsGraphs() const { return false; }
  virtual Status BeginCapture() const {
    return UnimplementedError("this device context cannot capture graphs");
  }
  virtual StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() const {
    return UnimplementedError("this device context cannot capture graphs");
  }
  virtual Status LaunchGraph(const DeviceGraph& graph) const {
    (void)graph;
    return UnimplementedError("this device context cannot capture graphs");
  }
};

class CpuDeviceContext final : public DeviceContext {
 public:
  explicit CpuDeviceContext(int device_index = 0) : device_index_(device_index) {}
  DeviceType device_type() const override { return DEVICE_CPU; }
  int device_index() const override { return device_index_; }

 private:
  int device_index_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_DEVICE_CONTEXT_H_
