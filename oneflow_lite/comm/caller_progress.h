// Pieces the providers' caller progress shares (Transport::Poll,
// transport.h "Caller progress"; shm and tcp build on them).
#ifndef ONEFLOW_LITE_COMM_CALLER_PROGRESS_H_
#define ONEFLOW_LITE_COMM_CALLER_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace oflite {
namespace comm {

// A progress thread naps until this long after the last caller's Poll, so
// a caller that stops without EndPolling leaves what arrives afterwards at
// most about this long to it (a delay, never a lost wake-up). While callers
// poll back to back, the nap ends and starts again once per this period:
// a timer interrupt and two context switches on the core the caller polls
// from, which cost 30-60 us on the 2-core VM (docs/comm.md "When the
// progress thread sleeps"). At 200 us that took more than half the time
// of a stream of 4 KiB exchanges; at 2 ms it is a few percent. Waits that do not poll
// end the nap at once (EndPolling, BeginBlockingWait), so the bound only
// matters to a caller that stops polling and then does something else.
inline constexpr std::chrono::nanoseconds kCallerQuiet = std::chrono::milliseconds(2);
// Timer slack of a progress thread that naps for callers: 1 us, so a nap
// ends when it should (the default 50 us would add up to 2.5 % to each).
// For prctl(PR_SET_TIMERSLACK).
inline constexpr unsigned long kCallerProgressTimerSlackNs = 1000;  // NOLINT(runtime/int)

// steady_clock nanoseconds since its epoch: the stamps of the last Poll.
inline int64_t SteadyNanoseconds(std::chrono::steady_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

// The state a provider's caller progress keeps between its callers and its
// progress thread: when a caller last polled, whether the progress thread
// naps, and how many threads wait for deliveries without polling
// (Transport::BeginBlockingWait). While one such waiter exists the progress
// thread does not nap and callers' Polls do nothing, so the provider runs
// as without caller progress until the last one leaves. Lock-free; the
// nap and the waiters' arrival order themselves by sequentially consistent
// stores and loads (either the progress thread sees the waiter and does not
// nap, or the waiter sees it napping and wakes it).
class CallerProgressGate {
 public:
  // A caller's Poll: false (poll nothing) while a blocking waiter exists;
  // else stamps `now_ns` and returns true.
  bool EnterPoll(int64_t now_ns) {
    if (blocked_.load(std::memory_order_seq_cst) > 0) return false;
    last_poll_ns_.store(now_ns, std::memory_order_seq_cst);
    return true;
  }
  // EndPolling: true if the progress thread naps and must be woken.
  bool EndPolling() {
    last_poll_ns_.store(0, std::memory_order_seq_cst);
    return napping_.load(std::memory_order_seq_cst);
  }
  // A blocking waiter arrives: true if the progress thread naps and must be
  // woken.
  bool BeginBlocking() {
    blocked_.fetch_add(1, std::memory_order_seq_cst);
    return napping_.load(std::memory_order_seq_cst);
  }
  void EndBlocking() { blocked_.fetch_sub(1, std::memory_order_seq_cst); }
  // How long the progress thread should still step aside at `now_ns`
  // (<= 0: not at all): until kCallerQuiet after the last Poll, and not
  // while a blocking waiter exists.
  int64_t NapLeftNs(int64_t now_ns) const {
    if (blocked_.load(std::memory_order_seq_cst) > 0) return 0;
    return last_poll_ns_.load(std::memory_order_seq_cst) + kCallerQuiet.count() - now_ns;
  }
  // The progress thread marks its nap (true before it checks NapLeftNs).
  void SetNapping(bool napping) { napping_.store(napping, std::memory_order_seq_cst); }

 private:
  std::atomic<int64_t> last_poll_ns_{0};  // steady_clock ns of the last Poll; 0: ended
  std::atomic<bool> napping_{false};
  std::atomic<int> blocked_{0};
};

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
