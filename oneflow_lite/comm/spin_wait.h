// Bounded polling that yields, and stops early on an oversubscribed host.
//
// A thread that waits for an event which usually comes within microseconds
// (a neighbour's chunk, the next frame on a socket, a completion) polls for
// a while before it blocks, because a wake-up costs tens of microseconds on
// a VM (~45 us when the core had halted). SpinWait is the one policy of the
// transports' progress threads and the collectives' waits. After each poll
// that found nothing, Idle() either yields (sched_yield: any runnable
// thread of this CPU goes first, so the poller never needs a core of its
// own) and says "poll again", or says "block now"; the caller then sleeps
// on what it waits for (condition variable, epoll, eventfd) with its own
// timeout, so its deadlines and liveness checks keep working. It says
// "block" once `budget` has passed since the last Reset, and at once while
// the host is heavily oversubscribed (HostOversubscribed): each yield then
// waits behind several other threads' time slices, so polling catches
// nothing sooner than a wake-up would, and the CPU goes to those who need
// it.
//
// Why yielding polls and a late back-off, measured on the 2-core VM
// (docs/benchmarks.md, "Unbound ranks"): blocking sooner cost more than it
// saved, bound or not, even with other engineers' builds on the host (load
// 6-9): pausing 4 us without a yield, blocking after a yield that lost the
// CPU for 20 or 50 us, or blocking once the runnable threads (less our
// pollers) exceeded 1x or 2x the CPUs each made a 2-rank step 7-100 %
// slower and used more CPU per step (futex wake-ups and the halted vCPUs
// they reach cost more than yields that find nothing else to run).
//
// Not thread-safe (one waiter per object); HostOversubscribed is.
#ifndef ONEFLOW_LITE_COMM_SPIN_WAIT_H_
#define ONEFLOW_LITE_COMM_SPIN_WAIT_H_

#include <chrono>
#include <cstdint>

namespace oflite {
namespace comm {

// True when, as of at most kHostLoadRefresh ago, the threads runnable on
// this host (/proc/loadavg's running count), less this process's threads
// polling in SpinWait, outnumbered kOversubscribedPerCpu times its online
// CPUs. A margin, because the pollers and compute threads of other ranks on
// this host count as runnable too and cannot be told apart, and because
// lower thresholds measured slower (above). False when /proc/loadavg cannot
// be read. Shared by every thread of the process; lock-free; a refresh
// costs one pread of /proc/loadavg, which the kernel formats anew each time:
// 0.4 us on the VM this was written on, 2.4 us on the AMD EPYC Zen 3 VM of
// 2026-12-07 (a sched_yield there: 1.3 us). Refreshed every 20 us, that
// pread was about 4.5 % of a polling caller's CPU in a 2-process 4 KiB
// exchange all-reduce over shm (perf; 0.6 % at 500 us). 500 us still reacts
// well within one scheduler time slice (several ms), the wait a yield
// behind other threads costs on an oversubscribed host.
bool HostOversubscribed();
inline constexpr int kOversubscribedPerCpu = 4;
inline constexpr std::chrono::microseconds kHostLoadRefresh{500};

class SpinWait {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SpinWait(std::chrono::microseconds budget) : budget_(budget) { Reset(); }
  ~SpinWait() { StopPolling(); }
  SpinWait(const SpinWait&) = delete;
  SpinWait& operator=(const SpinWait&) = delete;

  // Work arrived: start over with a fresh budget.
  void Reset() {
    StopPolling();
    started_ = Clock::now();
    blocked_ = false;
  }

  // After a poll that found nothing: yields and returns true (poll again),
  // or returns false (block now). Without a Reset it keeps returning false.
  bool Idle();

  // For a poll that did some work but not the awaited one (it polls again
  // without yielding, within the same budget): true once the budget since
  // the last Reset is spent or Idle said block.
  bool Expired() {
    if (!blocked_ && Clock::now() - started_ >= budget_) Block();
    return blocked_;
  }

  // How often Idle said "block" before the budget was spent, because the
  // host was oversubscribed (over this object's life; for tests).
  int64_t backed_off() const { return backed_off_; }

 private:
  void Block() {
    StopPolling();
    blocked_ = true;
  }
  void StopPolling();  // leaves the process's count of polling threads

  const std::chrono::microseconds budget_;
  Clock::time_point started_;  // the last Reset
  bool polling_ = false;       // counted among the process's polling threads
  bool blocked_ = false;
  int64_t backed_off_ = 0;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SPIN_WAIT_H_
