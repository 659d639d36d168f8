#include "oneflow_lite/device/cuda/cuda_completion_queue.h"

#include "oneflow_lite/common/thread_name.h"
#include <sstream>

namespace oflite {

StatusOr<std::unique_ptr<CudaCompletionQueue>> CudaCompletionQueue::Create(
    int device_index, std::chrono::microseconds poll_interval) {
  const int count = CudaDeviceCount();
  if (device_index < 0 || device_index >= count) {
    return InvalidArgumentError("CUDA device ", device_index, " does not exist (this machine has ",
                                count, " CUDA device(s))");
  }
  std::unique_ptr<CudaCompletionQueue> queue(new CudaCompletionQueue(device_index, poll_interval));
  queue->poller_ = std::thread([q = queue.get()] {
    NameThisThread("oflite-cudacq");
    q->PollLoop();
  });
  return queue;
}

CudaCompletionQueue::~CudaCompletionQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  cudaSetDevice(device_index_);
  for (Pending& p : pending_) {
    p.done(CancelledError("CUDA completion of '", p.label, "' cancelled: queue destroyed"));
    cudaEventDestroy(p.event);
  }
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
}

StatusOr<cudaEvent_t> CudaCompletionQueue::TakeEvent() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

Status CudaCompletionQueue::Enqueue(cudaStream_t stream, const std::string& label, Callback done) {
  ASSIGN_OR_RETURN(cudaEvent_t event, TakeEvent());
  const cudaError_t err = cudaEventRecord(event, stream);
  if (err != cudaSuccess) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_events_.push_back(event);
    return CudaStatus(err, "cudaEventRecord", __FILE__, __LINE__).WithContext("actor '" + label + "'");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(Pending{event, label, std::move(done)});
  }
  wake_.notify_one();
  return Status::OK();
}

Status CudaCompletionQueue::Drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (drained_.wait_for(lock, timeout, [this] { return pending_.empty() && running_ == 0; })) {
    return Status::OK();
  }
  std::ostringstream labels;
  for (const Pending& p : pending_) labels << " '" << p.label << "'";
  return DeadlineExceededError("CUDA work still pending after ", timeout.count(), " ms:",
                               labels.str());
}

void CudaCompletionQueue::PollLoop() {
  cudaSetDevice(device_index_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (pending_.empty()) {
      drained_.notify_all();
      wake_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      continue;
    }
    // Take the finished (or failed) entries out under the lock, run their
    // callbacks without it.
    std::vector<std::pair<Pending, Status>> finished;
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t err = cudaEventQuery(it->event);
      if (err == cudaErrorNotReady) {
        ++it;
        continue;
      }
      Status status = err == cudaSuccess
                          ? Status::OK()
                          : CudaStatus(err, "cudaEventQuery", __FILE__, __LINE__)
                                .WithContext("actor '" + it->label + "'");
      finished.emplace_back(std::move(*it), std::move(status));
      it = pending_.erase(it);
    }
    for (auto& f : finished) free_events_.push_back(f.first.event);
    running_ += static_cast<int>(finished.size());
    lock.unlock();
    for (auto& f : finished) f.first.done(f.second);
    lock.lock();
    running_ -= static_cast<int>(finished.size());
    if (pending_.empty()) {
      drained_.notify_all();
    } else if (finished.empty()) {
      wake_.wait_for(lock, poll_interval_, [this] { return stop_; });
    }
  }
}

}  // namespace oflite
