// Inbox: the message queue of one runtime thread.
//
// Any thread may Push; one thread (the owner) Pops. Pop blocks at most
// `timeout` and returns nullopt on timeout or once the inbox is closed, so
// the owner can check for an abort at a bounded interval. After Close, Push
// drops messages (the run is over or aborting). Thread-safe.
//
// Most messages of a run go from an actor to another actor of the same
// thread. The owner marks itself (BindOwner, on its thread); its own pushes
// then go to a queue only it touches, without a lock or a wake-up. Pushes
// from other threads go to a locked queue, which the owner drains in
// batches. Per sender the order is kept: a sender always pushes from the
// same thread, so its messages always use the same queue, and each queue is
// first in, first out. The owner takes the other threads' messages first
// whenever there are any, so a busy local chain cannot starve them.
#ifndef ONEFLOW_LITE_RUNTIME_INBOX_H_
#define ONEFLOW_LITE_RUNTIME_INBOX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "oneflow_lite/runtime/actor_message.h"

namespace oflite {

class Inbox {
 public:
  // Called by the owner thread before it pops; its own pushes from then on
  // take the lock-free path. A thread owns at most one inbox at a time.
  void BindOwner() { owned_by_this_thread_ = this; }
  void UnbindOwner() {
    if (owned_by_this_thread_ == this) owned_by_this_thread_ = nullptr;
  }

  // Returns false (and drops the message) when the inbox is closed.
  // `counted`: the message counts in sent_count() (the bus counts what
  // actors send, not what the runtime or a remote machine delivers).
  bool Push(const ActorMessage& message, bool counted = false) {
    if (owned_by_this_thread_ == this) {
      if (closed_.load(std::memory_order_relaxed)) return false;
      local_.push_back(message);
      // Only this thread writes it: a plain store, no locked add.
      if (counted) counted_local_.store(counted_local_.load(std::memory_order_relaxed) + 1,
                                        std::memory_order_relaxed);
      return true;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_.load(std::memory_order_relaxed)) return false;
      shared_.push_back(message);
      shared_pending_.store(true, std::memory_order_release);
      if (counted) counted_shared_.store(counted_shared_.load(std::memory_order_relaxed) + 1,
                                         std::memory_order_relaxed);
    }
    ready_.notify_one();
    return true;
  }

  // Owner only.
  std::optional<ActorMessage> Pop(std::chrono::milliseconds timeout) {
    if (closed_.load(std::memory_order_acquire)) {
      local_.clear();
      batch_.clear();
      return std::nullopt;
    }
    if (batch_.empty() && shared_pending_.load(std::memory_order_acquire)) TakeShared();
    if (!batch_.empty()) return PopFront(&batch_);
    if (!local_.empty()) return PopFront(&local_);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait_for(lock, timeout, [this] {
        return !shared_.empty() || closed_.load(std::memory_order_relaxed);
      });
      if (closed_.load(std::memory_order_relaxed) || shared_.empty()) return std::nullopt;
      batch_.swap(shared_);
      shared_pending_.store(false, std::memory_order_relaxed);
    }
    return PopFront(&batch_);
  }

  // Owner only: the message the next Pop returns without waiting, when it
  // is already known (null otherwise; a hint: other threads' pushes may go
  // first). Valid until the next Push or Pop.
  const ActorMessage* PeekNext() const {
    if (!batch_.empty()) return &batch_.front();
    if (shared_pending_.load(std::memory_order_relaxed)) return nullptr;
    return local_.empty() ? nullptr : &local_.front();
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_.store(true, std::memory_order_release);
      shared_.clear();
    }
    ready_.notify_all();
  }

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Counted pushes accepted so far (any thread may read).
  int64_t counted() const {
    return counted_local_.load(std::memory_order_relaxed) +
           counted_shared_.load(std::memory_order_relaxed);
  }

 private:
  static std::optional<ActorMessage> PopFront(std::deque<ActorMessage>* queue) {
    ActorMessage message = queue->front();
    queue->pop_front();
    return message;
  }
  void TakeShared() {
    std::lock_guard<std::mutex> lock(mutex_);
    batch_.swap(shared_);
    shared_pending_.store(false, std::memory_order_relaxed);
  }

  static inline thread_local Inbox* owned_by_this_thread_ = nullptr;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ActorMessage> shared_;  // other threads' pushes; under mutex_
  std::atomic<bool> shared_pending_{false};
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> counted_local_{0};   // written by the owner only
  std::atomic<int64_t> counted_shared_{0};  // written under mutex_
  // Owner only: its own pushes, and the latest batch taken from shared_.
  std::deque<ActorMessage> local_;
  std::deque<ActorMessage> batch_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_INBOX_H_
