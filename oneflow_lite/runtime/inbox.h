// Inbox: the message queue of one runtime thread.
//
// Any thread may Push; one thread (the owner) Pops. Pop blocks at most
// `timeout` and returns nullopt on timeout or once the inbox is closed and
// empty, so the owner can check for an abort at a bounded interval. After
// Close, Push drops messages (the run is over or aborting). Thread-safe.
#ifndef ONEFLOW_LITE_RUNTIME_INBOX_H_
#define ONEFLOW_LITE_RUNTIME_INBOX_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "oneflow_lite/runtime/actor_message.h"

namespace oflite {

class Inbox {
 public:
  // Returns false (and drops the message) when the inbox is closed.
  bool Push(const ActorMessage& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) return false;
      queue_.push_back(message);
    }
    ready_.notify_one();
    return true;
  }

  std::optional<ActorMessage> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [this] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return std::nullopt;
    ActorMessage message = queue_.front();
    queue_.pop_front();
    return message;
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      queue_.clear();
    }
    ready_.notify_all();
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ActorMessage> queue_;
  bool closed_ = false;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_INBOX_H_
