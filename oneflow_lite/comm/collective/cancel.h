// CancelFlag: a one-shot, sticky "stop" for collectives in flight.
//
// Whoever decides the job is over (the local runtime aborted, a peer reported
// its failure) calls Cancel(reason); every RingCommunicator whose
// CollectiveOptions.cancel points at the flag then fails its current and
// later operations with `reason` within one status poll (tens of
// milliseconds), including a set-up still waiting for a neighbour. The first
// Cancel wins; later ones are ignored. The flag cannot be reset.
//
// Thread-safe. The flag must outlive every communicator that holds it.
#ifndef ONEFLOW_LITE_COMM_COLLECTIVE_CANCEL_H_
#define ONEFLOW_LITE_COMM_COLLECTIVE_CANCEL_H_

#include <atomic>
#include <mutex>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

class CancelFlag {
 public:
  // Sets the flag with `reason` (an OK reason becomes Cancelled). Returns
  // true for the call that set it.
  bool Cancel(const Status& reason);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The reason given to the first Cancel; OK while not cancelled.
  Status status() const;

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> cancelled_{false};
  Status reason_;  // guarded by mutex_
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COLLECTIVE_CANCEL_H_
