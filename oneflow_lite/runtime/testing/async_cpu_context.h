// AsyncCpuDeviceContext (testonly): a second, asynchronous implementation of
// DeviceContext on the CPU, shaped like a GPU stream, so the runtime's
// deferred-completion path (regst_actor.h) runs and is checked without a GPU.
//
// Each context owns one worker thread, its "stream". Launch (kernels),
// Memcpy and OnStreamDone enqueue items; the worker runs them strictly in
// enqueue order, each after a random pause of up to `max_delay` (seeded, so
// a failure can be replayed): a kernel or copy really happens later, on the
// worker, so a consumer that read a register before its producer's work
// finished would see stale bytes (and tsan a race). An error of launched
// work is sticky, as on a CUDA stream: every later completion and
// Synchronize fails with it. Synchronize blocks (bounded) until the worker
// is idle. Errors can be
// injected: the n-th completion of one actor fails, or the completions of one
// actor are held back until the context is destroyed (a stuck stream).
//
// Graph capture is supported like a CUDA stream's: between BeginCapture
// and EndCapture, Launch and Memcpy record their work instead of queueing
// it (OnStreamDone and Synchronize then fail: a CUDA stream refuses them
// while capturing); LaunchGraph queues the recording as one item that runs
// every recorded piece in order, with the same closures, so a replay reads
// the buffers it was recorded with. Counters shared by every context of a
// factory (AsyncCpuOptions::graphs) count captures and replays.
//
// Enqueueing calls must come from the thread that called
// BindToCurrentThread (as the runtime promises); a call from another thread
// is an InternalError, which is what makes the test notice a violation. The
// destructor runs every queued item (held completions with Cancelled), then
// joins the worker, so no callback outlives the context.
#ifndef ONEFLOW_LITE_RUNTIME_TESTING_ASYNC_CPU_CONTEXT_H_
#define ONEFLOW_LITE_RUNTIME_TESTING_ASYNC_CPU_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/runtime/runtime.h"

namespace oflite {
namespace testing {

// Graph counters of the contexts of one AsyncCpuContexts factory.
struct AsyncCpuGraphCounters {
  std::atomic<int64_t> captures{0};  // graphs recorded (EndCapture OK)
  std::atomic<int64_t> launches{0};  // LaunchGraph calls
};

struct AsyncCpuOptions {
  std::chrono::microseconds max_delay{300};
  uint64_t seed = 1;
  // Injection: completions of the actor named `fail_actor` fail from its
  // `fail_at`-th (0-based) on with an Internal error "injected device fault".
  std::string fail_actor;
  int64_t fail_at = 0;
  // Completions of the actor named `hold_actor` never arrive while the
  // context lives (run with Cancelled at destruction).
  std::string hold_actor;
  // Sabotage, for tests that prove a checker works: OnStreamDone calls back
  // at once instead of after the queued work (a runtime that skipped the
  // event). Kernels still run on the worker.
  bool complete_early = false;
  // Capture: false makes SupportsGraphs() false (the runtime then never
  // captures). Counters, when set, are shared by every context.
  bool graphs = true;
  std::shared_ptr<AsyncCpuGraphCounters> graph_counters;
  // Sabotage: EndCapture fails (like a capture a kernel's call broke), so
  // the runtime's fallback to uncaptured acts is exercised.
  bool fail_capture = false;
};

class AsyncCpuDeviceContext final : public DeviceContext {
 public:
  AsyncCpuDeviceContext(int device_index, AsyncCpuOptions options);
  ~AsyncCpuDeviceContext() override;

  DeviceType device_type() const override { return DEVICE_CPU; }
  int device_index() const override { return device_index_; }
  Status BindToCurrentThread() const override;
  bool IsAsync() const override { return true; }
  Status OnStreamDone(const std::string& label, DoneCallback done) const override;
  Status Launch(std::function<Status()> work) const override;
  Status Memcpy(void* dst, const void* src, int64_t bytes, CopyKind kind) const override;
  Status Synchronize() const override;
  bool SupportsGraphs() const override { return options_.graphs; }
  Status BeginCapture() const override;
  StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() const override;
  Status LaunchGraph(const DeviceGraph& graph) const override;

  // Completions delivered so far (any status).
  int64_t completions() const { return completions_.load(); }

 private:
  struct Item {
    std::function<Status()> run;
    bool is_copy = false;  // a copy or launched work (not a completion)
  };
  Status CheckThread(const char* what) const;
  // Launched work or a copy: recorded while capturing, else queued.
  void Submit(std::function<Status()> work) const;
  void Enqueue(Item item) const;
  Status StickyError() const;
  void Work();

  const int device_index_;
  const AsyncCpuOptions options_;
  mutable std::thread::id owner_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable std::deque<Item> queue_;
  mutable std::vector<DoneCallback> held_;
  mutable bool busy_ = false;
  // While capturing (stream thread only): the recorded work, in order.
  mutable bool capturing_ = false;
  mutable std::vector<std::function<Status()>> recorded_;
  Status sticky_;  // first error of launched work; worker writes, guarded by mutex_
  mutable int64_t fail_seen_ = 0;  // completions of fail_actor so far
  bool stop_ = false;
  std::mt19937_64 random_;  // worker only
  std::atomic<int64_t> completions_{0};
  std::thread worker_;
};

// A RuntimeOptions::device_context_factory giving every stream its own
// AsyncCpuDeviceContext (seed mixed with the stream id).
DeviceContextFactory AsyncCpuContexts(AsyncCpuOptions options = {});

// Rewrites a plan compiled for CUDA devices to run on the CPU with the same
// structure: CUDA tasks keep their ids (so their own stream threads, as on a
// GPU, and their H2D/D2H copy tasks), but select CPU kernels, and CUDA zones
// become CPU device zones of the same index. Pinned zones stay (host memory
// without a CUDA backend). Returns how many tasks it moved.
int EmulateCudaOnCpu(Plan* plan);

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TESTING_ASYNC_CPU_CONTEXT_H_
