// CudaCompletionQueue: tells an actor that its CUDA stream has finished the
// work it enqueued, without blocking the actor's thread on the stream.
//
// An actor on a GPU stream thread launches its kernels, then calls Enqueue
// with a callback that sends its "produced" messages. Enqueue records a
// (pooled) event on the stream and returns at once; one poller thread per
// queue polls the pending events with cudaEventQuery (sleeping
// `poll_interval` between rounds, and on a condition variable while nothing
// is pending) and runs each callback, on the poller thread, with OK once the
// stream passed the event, or with an error naming the label and the CUDA
// call if the query failed (e.g. a kernel faulted). Callbacks must be short
// and must not call back into the queue.
//
// Thread-safe: Enqueue may be called from any thread. The destructor stops
// the poller after at most one poll interval; callbacks still pending then
// run with a Cancelled status, so nobody waits forever.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_COMPLETION_QUEUE_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_COMPLETION_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/device/cuda/cuda_util.h"

namespace oflite {

class CudaCompletionQueue {
 public:
  using Callback = std::function<void(const Status&)>;

  static StatusOr<std::unique_ptr<CudaCompletionQueue>> Create(
      int device_index, std::chrono::microseconds poll_interval = std::chrono::microseconds(20));
  ~CudaCompletionQueue();
  CudaCompletionQueue(const CudaCompletionQueue&) = delete;
  CudaCompletionQueue& operator=(const CudaCompletionQueue&) = delete;

  // Records an event on `stream` (a stream of this queue's device) and runs
  // `done` once the stream reached it. `label` names the actor in errors.
  Status Enqueue(cudaStream_t stream, const std::string& label, Callback done);

  // Blocks until nothing is pending (callbacks included) or `timeout` passed (DeadlineExceeded
  // naming the pending labels).
  Status Drain(std::chrono::milliseconds timeout);

 private:
  struct Pending {
    cudaEvent_t event;
    std::string label;
    Callback done;
  };

  CudaCompletionQueue(int device_index, std::chrono::microseconds poll_interval)
      : device_index_(device_index), poll_interval_(poll_interval) {}
  void PollLoop();
  StatusOr<cudaEvent_t> TakeEvent();

  const int device_index_;
  const std::chrono::microseconds poll_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;     // poller: new work or stop
  std::condition_variable drained_;  // Drain: pending became empty
  std::deque<Pending> pending_;
  int running_ = 0;  // callbacks taken out of pending_ and not yet returned
  std::vector<cudaEvent_t> free_events_;
  bool stop_ = false;
  std::thread poller_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_COMPLETION_QUEUE_H_
