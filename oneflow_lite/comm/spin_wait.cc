#include "oneflow_lite/comm/spin_wait.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace oflite {
namespace comm {
namespace {

int64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             SpinWait::Clock::now().time_since_epoch())
      .count();
}

// Threads runnable on the host right now: the fourth field of /proc/loadavg
// is "running/total" (running includes the reader). -1 when it cannot be
// read. The file stays open; a pread at offset 0 regenerates it.
int RunnableThreads() {
  static const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t length = ::pread(fd, text, sizeof(text) - 1, 0);
  if (length <= 0) return -1;
  text[length] = '\0';
  // "0.75 0.20 0.06 3/250 1234": skip three fields.
  const char* at = text;
  for (int field = 0; field < 3; ++field) {
    while (*at != '\0' && *at != ' ') ++at;
    while (*at == ' ') ++at;
  }
  char* end = nullptr;
  const long running = std::strtol(at, &end, 10);  // NOLINT(runtime/int)
  if (end == at || *end != '/') return -1;
  return static_cast<int>(running);
}

int OnlineCpus() {
  static const int cpus = [] {
    const long count = ::sysconf(_SC_NPROCESSORS_ONLN);  // NOLINT(runtime/int)
    return count > 0 ? static_cast<int>(count) : 1;
  }();
  return cpus;
}

std::atomic<int64_t> g_load_checked_ns{0};
std::atomic<bool> g_oversubscribed{false};
// Threads of this process between their first yield and blocking: they are
// runnable, but only because they poll.
std::atomic<int> g_polling{0};

}  // namespace

bool HostOversubscribed() {
  const int64_t now = NowNanoseconds();
  int64_t checked = g_load_checked_ns.load(std::memory_order_relaxed);
  // One thread refreshes; the others use the value it last stored.
  if (now - checked < std::chrono::nanoseconds(kHostLoadRefresh).count() ||
      !g_load_checked_ns.compare_exchange_strong(checked, now, std::memory_order_relaxed)) {
    return g_oversubscribed.load(std::memory_order_relaxed);
  }
  const int running = RunnableThreads();
  const bool over =
      running >= 0 &&
      running - g_polling.load(std::memory_order_relaxed) > kOversubscribedPerCpu * OnlineCpus();
  g_oversubscribed.store(over, std::memory_order_relaxed);
  return over;
}

void SpinWait::StopPolling() {
  if (polling_) {
    polling_ = false;
    g_polling.fetch_sub(1, std::memory_order_relaxed);
  }
}

bool SpinWait::Idle() {
  if (blocked_) return false;
  if (Clock::now() - started_ >= budget_) {
    Block();
    return false;
  }
  if (!polling_) {
    polling_ = true;
    g_polling.fetch_add(1, std::memory_order_relaxed);
  }
  if (HostOversubscribed()) {
    Block();
    ++backed_off_;
    return false;
  }
  sched_yield();
  return true;
}

}  // namespace comm
}  // namespace oflite
