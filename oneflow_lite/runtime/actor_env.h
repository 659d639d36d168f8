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

#include <cstdint>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/runtime/message_bus.h"
#include "oneflow_lite/runtime/regst.h"
#include "oneflow_lite/runtime/runtime_hooks.h"

namespace oflite {

struct ActorEnv {
  const RegstStore* regsts = nullptr;
  MessageBus* bus = nullptr;
  const DeviceContext* device = nullptr;
  int64_t seed = 0;
  int64_t start_iter = 0;  // first iteration (piece id) sources produce
  int64_t end_iter = 0;    // one past the last
  bool check_nan = false;  // fail on NaN/Inf in any float kernel output
  int64_t save_every = 0;  // variables snapshot every N iterations (0: never)
  MetricsObserver* metrics = nullptr;
  OutputObserver* outputs = nullptr;  // the sink's named outputs (may be null)
  VariableStore* variables = nullptr;
  trace::Tracer* tracer = nullptr;  // null: the run is not traced
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_ENV_H_
