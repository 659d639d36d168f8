// Host feeds: tensors a program streams into a running plan, one per
// iteration, by name. The program pushes; the `host_feed` source op's
// kernel (kernels/cpu/data/host_feed_kernel.cc; docs/ops.md, "data family")
// pops one tensor per iteration. With driver::RunInference
// (tools/driver/trainer.h) a program runs one plan for N iterations and
// pushes the next input from the callback that receives the outputs of the
// previous one: text generation without relaunching a plan per token.
//
// A feed is a FIFO queue of HostTensors, created on first use. Push appends
// and never blocks; Pop takes the oldest tensor, waiting at most `timeout`
// for one; Close wakes every waiter and makes Pop fail at once when the
// queue is empty (queued tensors are still delivered) and Push fail; Reset
// drops what is queued and reopens the feed.
//
// HostFeedRegistry is a plain value (a test may make its own). The
// host_feed kernel cannot be handed one by the runtime (kernels see only
// their op), so it reads the process's registry, HostFeed below: feed names
// are process-wide, and two plans running at once in one process must use
// different feed names.
//
// Thread-safe: any thread may call any method, concurrently.
#ifndef ONEFLOW_LITE_DATA_HOST_FEED_H_
#define ONEFLOW_LITE_DATA_HOST_FEED_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"

namespace oflite {

// What a wait lasts when nobody says otherwise (the host_feed op's
// timeout_ms default).
inline constexpr std::chrono::milliseconds kDefaultHostFeedTimeout{60000};

class HostFeedRegistry {
 public:
  HostFeedRegistry() = default;
  HostFeedRegistry(const HostFeedRegistry&) = delete;
  HostFeedRegistry& operator=(const HostFeedRegistry&) = delete;

  // Appends `tensor` to feed `name` and wakes one waiter. FailedPrecondition
  // naming the feed when it is closed.
  Status Push(const std::string& name, HostTensor tensor);
  // The oldest tensor of feed `name`. Blocks at most `timeout`: then
  // DeadlineExceeded naming the feed and the timeout. Cancelled naming the
  // feed when it is closed and empty.
  StatusOr<HostTensor> Pop(const std::string& name, std::chrono::milliseconds timeout);
  // See the file comment. Closing twice is harmless.
  void Close(const std::string& name);
  void Reset(const std::string& name);
  // Tensors queued in feed `name` (0 for a feed never used).
  int64_t Pending(const std::string& name) const;

 private:
  struct Feed {
    std::deque<HostTensor> queue;
    bool closed = false;
    std::condition_variable changed;
  };
  Feed* FindOrAdd(const std::string& name);  // requires mutex_

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Feed>> feeds_;  // guarded by mutex_
};

// The process's registry (the one host_feed kernels read), as static
// calls: HostFeed::Push("tokens", std::move(tensor)).
class HostFeed {
 public:
  static HostFeedRegistry& Registry();
  static Status Push(const std::string& name, HostTensor tensor) {
    return Registry().Push(name, std::move(tensor));
  }
  static StatusOr<HostTensor> Pop(const std::string& name,
                                  std::chrono::milliseconds timeout = kDefaultHostFeedTimeout) {
    return Registry().Pop(name, timeout);
  }
  static void Close(const std::string& name) { Registry().Close(name); }
  static void Reset(const std::string& name) { Registry().Reset(name); }
  static int64_t Pending(const std::string& name) { return Registry().Pending(name); }
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DATA_HOST_FEED_H_
