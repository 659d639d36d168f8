#include "oneflow_lite/data/host_feed.h"

#include <utility>

namespace oflite {

HostFeedRegistry::Feed* HostFeedRegistry::FindOrAdd(const std::string& name) {
  std::unique_ptr<Feed>& feed = feeds_[name];
  if (feed == nullptr) feed = std::make_unique<Feed>();
  return feed.get();
}

Status HostFeedRegistry::Push(const std::string& name, HostTensor tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  Feed* feed = FindOrAdd(name);
  if (feed->closed) {
    return FailedPreconditionError("host feed '", name, "' is closed (Reset reopens it)");
  }
  feed->queue.push_back(std::move(tensor));
  feed->changed.notify_one();
  return Status::OK();
}

StatusOr<HostTensor> HostFeedRegistry::Pop(const std::string& name,
                                           std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  Feed* feed = FindOrAdd(name);  // stable: feeds are never removed
  const bool ready = feed->changed.wait_for(
      lock, timeout, [feed] { return !feed->queue.empty() || feed->closed; });
  if (!ready) {
    return DeadlineExceededError("host feed '", name, "': nothing was pushed within ",
                                 timeout.count(), " ms");
  }
  if (feed->queue.empty()) return CancelledError("host feed '", name, "' was closed");
  HostTensor tensor = std::move(feed->queue.front());
  feed->queue.pop_front();
  return tensor;
}

void HostFeedRegistry::Close(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Feed* feed = FindOrAdd(name);
  feed->closed = true;
  feed->changed.notify_all();
}

void HostFeedRegistry::Reset(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Feed* feed = FindOrAdd(name);
  feed->queue.clear();
  feed->closed = false;
}

int64_t HostFeedRegistry::Pending(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = feeds_.find(name);
  return it == feeds_.end() ? 0 : static_cast<int64_t>(it->second->queue.size());
}

HostFeedRegistry& HostFeed::Registry() {
  // Never destroyed: kernels on runtime threads may still use it at exit.
  static HostFeedRegistry* const registry = new HostFeedRegistry();
  return *registry;
}

}  // namespace oflite
