// Pieces the providers' caller progress shares (Transport::Poll,
// transport.h "Caller progress"; shm and tcp build on them).
#ifndef ONEFLOW_LITE_COMM_CALLER_PROGRESS_H_
#define ONEFLOW_LITE_COMM_CALLER_PROGRESS_H_

#include <chrono>
#include <cstdint>

namespace oflite {
namespace comm {

// A progress thread naps until this long after the last caller's Poll, so
// a caller that stops without EndPolling leaves what arrives afterwards at
// most about this long to it (a delay, never a lost wake-up).
inline constexpr std::chrono::nanoseconds kCallerQuiet = std::chrono::microseconds(200);
// Timer slack of a progress thread that naps for callers: 1 us (the default
// 50 us would stretch each nap by a quarter). For prctl(PR_SET_TIMERSLACK).
inline constexpr unsigned long kCallerProgressTimerSlackNs = 1000;  // NOLINT(runtime/int)

// steady_clock nanoseconds since its epoch: the stamps of the last Poll.
inline int64_t SteadyNanoseconds(std::chrono::steady_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

// For its lifetime, marks the calling thread as the holder of
// `transport`'s progress mutex (its handlers and callbacks run there), so
// that Poll from inside them returns false instead of locking the mutex
// again: a provider's Poll checks Active(this) first.
class ProgressingHere {
 public:
  explicit ProgressingHere(const void* transport) : previous_(current_) { current_ = transport; }
  ~ProgressingHere() { current_ = previous_; }
  ProgressingHere(const ProgressingHere&) = delete;
  ProgressingHere& operator=(const ProgressingHere&) = delete;

  static bool Active(const void* transport) { return current_ == transport; }

 private:
  static inline thread_local const void* current_ = nullptr;
  const void* const previous_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CALLER_PROGRESS_H_
