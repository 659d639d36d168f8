// ActorEnv: what the actors of one stream thread share, fixed before
// start-up.
//
// Plain pointers to objects the Runtime owns (or the caller, for hooks);
// they outlive every actor, except `device`: the stream thread's own
// DeviceContext (CPU, CUDA stream, or a test's), which the runtime destroys
// after the thread stopped and before the actors. All of it is read-only
// during the run except the bus (thread-safe), the device (used only on the
// stream's thread) and the hooks (thread-safe by contract).
#ifndef ONEFLOW_LITE_RUNTIME_ACTOR_ENV_H_
#define ONEFLOW_LITE_RUNTIME_ACTOR_ENV_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/runtime_hooks.h"

namespace oflite {

// Graph replay across the actors of a runtime (kernel_runner.h): counters
// any stream thread adds to, and the first reason a task fell back to
// stream-ordered execution.
struct GraphReplayStats {
  std::atomic<int64_t> tasks{0};      // tasks that captured at least one graph
  std::atomic<int64_t> captured{0};   // graphs captured (one per set of buffers)
  std::atomic<int64_t> replayed{0};   // acts run as a graph launch
  std::atomic<int64_t> fallbacks{0};  // tasks that run stream-ordered instead
  void NoteFallback(const std::string& why) {
    fallbacks.fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex_);
    if (note_.empty()) note_ = why;
  }
  std::string fallback_note() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return note_;
  }

 private:
  mutable std::mutex mutex_;
  std::string note_;
};

struct ActorEnv {
  const RegstStore* regsts = nullptr;
  MessageBus* bus = nullptr;
  const DeviceContext* device = nullptr;
  int64_t seed = 0;
  int64_t start_iter = 0;  // first iteration (piece id) sources produce
  int64_t end_iter = 0;    // one past the last
  bool check_nan = false;  // fail on NaN/Inf in any float kernel output
  // Tasks with TaskProto.graph_replay capture their act as a device graph
  // and replay it (kernel_runner.h), when the device can and check_nan is off.
  bool graph_replay = true;
  GraphReplayStats* graph_stats = nullptr;  // may be null
  int64_t save_every = 0;  // variables snapshot every N iterations (0: never)
  MetricsObserver* metrics = nullptr;
  OutputObserver* outputs = nullptr;  // the sink's named outputs (may be null)
  VariableStore* variables = nullptr;
  trace::Tracer* tracer = nullptr;  // null: the run is not traced
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_ENV_H_
