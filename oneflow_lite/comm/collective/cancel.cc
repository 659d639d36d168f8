#include "oneflow_lite/comm/collective/cancel.h"

namespace oflite {
namespace comm {

bool CancelFlag::Cancel(const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_.load(std::memory_order_relaxed)) return false;
  reason_ = reason.ok() ? CancelledError("collective cancelled") : reason;
  cancelled_.store(true, std::memory_order_release);
  return true;
}

Status CancelFlag::status() const {
  if (!cancelled()) return Status::OK();
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

}  // namespace comm
}  // namespace oflite
