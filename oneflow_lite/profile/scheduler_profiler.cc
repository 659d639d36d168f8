#include "oneflow_lite/profile/scheduler_profiler.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/launch/cpu_binding.h"
#include "oneflow_lite/comm/spin_wait.h"

namespace oflite {
namespace profile {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// The calling thread onto `cpu` (BindToCpus with pid 0 binds the caller).
Status BindThisThread(int cpu) { return comm::BindToCpus(0, {cpu}); }

// A pipe whose ends close with it.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    if (pipe(fds) == 0) {
      read_end = fds[0];
      write_end = fds[1];
    }
  }
  ~Pipe() {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
  }
  bool ok() const { return read_end >= 0; }
};

bool WriteStamp(int fd, int64_t value) {
  return write(fd, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value));
}

bool ReadStamp(int fd, int64_t* value) {
  return read(fd, value, sizeof(*value)) == static_cast<ssize_t>(sizeof(*value));
}

// Keeps its core busy with arithmetic until `stop`.
void Compute(const std::atomic<bool>* stop, int cpu, std::atomic<bool>* bound) {
  bound->store(BindThisThread(cpu).ok());
  volatile double x = 1.0;
  while (!stop->load(std::memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }
}

// One phase: `samples` wake-ups of a sleeper on `sleeper_cpu` by a waker
// on `waker_cpu` (this thread); the mean stamp-to-run time in us.
StatusOr<double> MeanWakeupUs(const WakeupProfileOptions& options, int sleeper_cpu,
                              int waker_cpu) {
  Pipe wake, answer;
  if (!wake.ok() || !answer.ok()) return UnavailableError("pipe: ", strerror(errno));
  std::vector<double> delays_us;
  delays_us.reserve(options.samples);
  std::atomic<bool> sleeper_bound{false};
  if (fcntl(wake.read_end, F_SETFL, O_NONBLOCK) != 0) {
    return UnavailableError("fcntl O_NONBLOCK: ", strerror(errno));
  }
  std::thread sleeper([&] {
    sleeper_bound.store(BindThisThread(sleeper_cpu).ok());
    // As a transport's progress thread waits: poll (yielding) for the
    // budget after each event, then block.
    comm::SpinWait spin(options.poll_budget);
    int64_t stamp = 0;
    while (true) {
      if (ReadStamp(wake.read_end, &stamp)) {
        if (stamp < 0) break;
        delays_us.push_back(static_cast<double>(NowNs() - stamp) / 1e3);
        if (!WriteStamp(answer.write_end, 0)) break;
        spin.Reset();
      } else if (!spin.Idle()) {
        pollfd readable{wake.read_end, POLLIN, 0};
        poll(&readable, 1, -1);
      }
    }
  });
  Status status = BindThisThread(waker_cpu);
  std::mt19937 random(12345);
  const double period_us = static_cast<double>(options.period.count());
  std::uniform_real_distribution<double> gap(0.5 * period_us, 1.5 * period_us);
  for (int i = 0; status.ok() && i < options.samples; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(gap(random))));
    int64_t ignored = 0;
    if (!WriteStamp(wake.write_end, NowNs()) || !ReadStamp(answer.read_end, &ignored)) {
      status = UnavailableError("the wake-up pipe broke: ", strerror(errno));
    }
  }
  WriteStamp(wake.write_end, -1);  // ends the sleeper
  sleeper.join();
  RETURN_IF_ERROR(status);
  if (!sleeper_bound.load()) return UnavailableError("cannot bind the sleeper to CPU ", sleeper_cpu);
  if (delays_us.empty()) return UnavailableError("no wake-up was timed");
  return std::accumulate(delays_us.begin(), delays_us.end(), 0.0) /
         static_cast<double>(delays_us.size());
}

}  // namespace

StatusOr<WakeupProfile> ProfileBusyCoreWakeup(const WakeupProfileOptions& options) {
  if (options.samples < 1 || options.period.count() < 100) {
    return InvalidArgumentError("wake-up profile: samples ", options.samples, " (want >= 1), period ",
                                options.period.count(), " us (want >= 100)");
  }
  std::vector<int> cpus = options.cpus;
  if (cpus.empty()) {
    const std::vector<std::vector<int>> cores = comm::AllowedCores();
    for (size_t c = 0; c < cores.size() && cpus.size() < 2; ++c) cpus.push_back(cores[c].front());
  }
  if (cpus.size() < 2 || cpus[0] == cpus[1]) {
    return UnavailableError("wake-up profile: needs two cores of this process's affinity (has ",
                            cpus.size(), "): the waker must not share the sleeper's core");
  }
  // The waker is this thread: run the probe on a thread of its own so the
  // caller's affinity is left as it was.
  StatusOr<WakeupProfile> result = UnavailableError("wake-up profile did not run");
  std::thread probe([&] {
    WakeupProfile profile;
    StatusOr<double> idle = MeanWakeupUs(options, cpus[0], cpus[1]);
    if (!idle.ok()) {
      result = idle.status();
      return;
    }
    profile.idle_us = *idle;
    std::atomic<bool> stop{false}, bound{false};
    std::thread busy(Compute, &stop, cpus[0], &bound);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // it holds the core now
    StatusOr<double> loaded = MeanWakeupUs(options, cpus[0], cpus[1]);
    stop.store(true);
    busy.join();
    if (!loaded.ok()) {
      result = loaded.status();
    } else if (!bound.load()) {
      result = UnavailableError("wake-up profile: cannot bind the busy thread to CPU ", cpus[0]);
    } else {
      profile.busy_us = *loaded;
      result = profile;
    }
  });
  probe.join();
  return result;
}

StatusOr<double> ProfileCoreSliceUs(const SliceProfileOptions& options) {
  if (options.duration.count() < 10 || options.gap.count() < 1) {
    return InvalidArgumentError("slice profile: duration ", options.duration.count(),
                                " ms (want >= 10), gap ", options.gap.count(), " us (want >= 1)");
  }
  int cpu = options.cpu;
  if (cpu < 0) {
    const std::vector<std::vector<int>> cores = comm::AllowedCores();
    if (cores.empty()) return UnavailableError("slice profile: no CPU in this process's affinity");
    cpu = cores.front().front();
  }
  const int64_t gap_ns = options.gap.count() * 1000;
  std::atomic<int> ready{0};
  std::atomic<bool> bound_both{true};
  std::vector<int64_t> runs[2];
  auto spin = [&](int k) {
    if (!BindThisThread(cpu).ok()) bound_both.store(false);
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    const int64_t end = NowNs() + options.duration.count() * 1000000;
    int64_t last = NowNs(), began = last;
    while (last < end) {
      const int64_t now = NowNs();
      if (now - last > gap_ns) {  // the other thread had the CPU
        runs[k].push_back(last - began);
        began = now;
      }
      last = now;
    }
  };
  std::thread a(spin, 0), b(spin, 1);
  a.join();
  b.join();
  if (!bound_both.load()) return UnavailableError("slice profile: cannot bind to CPU ", cpu);
  // The first run of each thread began before the other one spun.
  std::vector<int64_t> all;
  for (const std::vector<int64_t>& mine : runs) {
    if (mine.size() > 1) all.insert(all.end(), mine.begin() + 1, mine.end());
  }
  if (all.size() < 8) {
    return UnavailableError("slice profile: the two threads on CPU ", cpu, " took ", all.size(),
                            " turns in ", options.duration.count(), " ms (want >= 8)");
  }
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  return static_cast<double>(all[all.size() / 2]) / 1000.0;
}

}  // namespace profile
}  // namespace oflite
