// How long a transport's polling thread takes to notice an event when its
// core is busy computing: the part of `oflite profile` behind
// RuntimeCost.busy_core_wakeup_us (the cost model, docs/simulate.md,
// "Busy cores delay the transport").
//
// A rank's transport (and its collectives' waits) poll after each event
// for a short budget, yielding the CPU between polls, and only then block
// (comm/spin_wait.h, the tcp transport's busy_poll). On a core that a
// compute thread keeps busy, each yield hands the core to the compute
// thread for the rest of its time slice, so a message that arrives while
// the poller is in that phase waits up to a slice (milliseconds) before it
// is handled; a thread that blocked at once would have been woken in tens
// of microseconds. Every CommNet READ of a pipeline and every ring step
// needs the peer's poller, so a rank whose core computes serves its peers
// late: on this VM a 512-byte READ between two namespace hosts took a
// median 1.5 ms while the serving rank computed, against 10 us of link.
//
// The probe, all in this process: a sleeper thread bound to one core waits
// for a pipe exactly as a progress thread waits (comm::SpinWait over
// `poll_budget`, then poll(2)); a waker thread bound to another core writes
// a time stamp into the pipe at jittered intervals and waits for the
// sleeper's answer. Each sample is the time from the stamp to the sleeper
// reading it: first with the sleeper's core idle, then with a third thread
// computing on it. The figure is the mean busy delay less the mean idle
// one: the mean, because a step adds up the delays of its transfers.
#ifndef ONEFLOW_LITE_PROFILE_SCHEDULER_PROFILER_H_
#define ONEFLOW_LITE_PROFILE_SCHEDULER_PROFILER_H_

#include <chrono>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace profile {

struct WakeupProfileOptions {
  int samples = 300;  // wake-ups per phase (idle core, busy core)
  // Mean gap between two wake-ups; each gap is drawn from [0.5, 1.5] of
  // it, so that the wake-ups fall anywhere in the busy thread's slice.
  std::chrono::microseconds period{2000};
  // How long the sleeper polls after each event before it blocks: the tcp
  // transport's busy_poll (comm/tcp/tcp_transport.h).
  std::chrono::microseconds poll_budget{200};
  // The two cores (CPU numbers) to use: the sleeper's and the waker's.
  // Empty: the first CPUs of the first two cores this process may run on.
  std::vector<int> cpus;
};

struct WakeupProfile {
  double idle_us = 0;  // mean stamp-to-read time, the sleeper's core idle
  double busy_us = 0;  // the same with another thread computing on it
  // busy_us - idle_us, never below 0: the delay a busy core adds to an
  // event for its transport (RuntimeCost.busy_core_wakeup_us).
  double extra_us() const { return busy_us > idle_us ? busy_us - idle_us : 0; }
};

// Runs the probe (about samples x (period + the delays) x 2 of wall time;
// blocks). Unavailable when this process may run on fewer than two cores
// (the waker needs a core of its own) or a thread cannot be bound;
// InvalidArgument for bad options. Other load on the two cores is in the
// figure.
StatusOr<WakeupProfile> ProfileBusyCoreWakeup(const WakeupProfileOptions& options);

// The scheduler's time slice between compute threads that share a core
// (RuntimeCost.core_slice_us): ranks placed on one core do not run at half
// speed each but in turns, so two ranks of one collective can be up to a
// slice apart. The probe: two threads bound to the same CPU spin for
// `duration`, each timing how long it ran between two gaps (stretches of
// over `gap` without the CPU); the figure is the median of those runs.
struct SliceProfileOptions {
  std::chrono::milliseconds duration{400};
  std::chrono::microseconds gap{50};
  int cpu = -1;  // the CPU both threads use; -1: the first this process may run on
};

// Blocks for `duration`. Unavailable when a thread cannot be bound or the
// threads never took turns (fewer than 8 runs: another CPU ran one of
// them); InvalidArgument for bad options.
StatusOr<double> ProfileCoreSliceUs(const SliceProfileOptions& options);

}  // namespace profile
}  // namespace oflite

#endif  // ONEFLOW_LITE_PROFILE_SCHEDULER_PROFILER_H_
