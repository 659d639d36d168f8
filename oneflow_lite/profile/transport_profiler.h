// The runtime and transport half of `oflite profile`: what the actor
// runtime costs beside its kernels (RuntimeCost) and what each CommNet
// transport costs on this host (TransportCost: one small message's
// latency, one stream's throughput, and the wall time of every collective
// algorithm the runtime runs, per rank count and size). The cost model
// (oneflow_lite/cost, docs/simulate.md) reads both from a Calibration.
//
// ProfileRuntime runs in this process, on the real runtime: chains of
// actors with an empty kernel (registered here as "oflite_profile_noop"),
// the approach of tools/bench/actor_overhead.
//
// ProfileTransports measures real processes over real transports on this
// host, as tools/bench/comm_p2p_bench and allreduce_bench do: for every
// transport and rank count it starts one process per rank by running
// `options.executable profile-rank <flags>` (kProfileRankCommand), whose
// main must hand those arguments to RunTransportProfileRank. Ranks are
// bound to cores as `oflite launch` binds them (options.bind), join a
// CommNet of their own (rank 0 serves its rendezvous on a free loopback
// port) and rank 0 writes its figures into a file the caller reads. Every
// wait is bounded: the processes of one run are killed (and reaped) at the
// run's share of the time budget plus a grace; a failed run, a point
// whose result is wrong or a size the budget leaves out costs a note
// (options.note), not the profile.
//
// Not thread-safe against the process's other users of fork/exec; call
// from one thread. Neither function changes process-wide state for good
// (ProfileRuntime re-applies the CPU compute thread count it found).
#ifndef ONEFLOW_LITE_PROFILE_TRANSPORT_PROFILER_H_
#define ONEFLOW_LITE_PROFILE_TRANSPORT_PROFILER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oneflow_lite/comm/launch/cpu_binding.h"
#include "oneflow_lite/common/status.h"
#include "proto/calibration.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace profile {

// Told each note (a skipped transport, a failed run, a size left out for
// the budget...); null: written to stderr as "oflite profile: <note>".
using ProfileNote = std::function<void(const std::string&)>;

struct RuntimeProfileOptions {
  int samples = 5;            // runs per figure; their median is reported
  int64_t iterations = 2000;  // iterations of each plan per run
  int actors = 16;            // compute actors in each chain
  // Registers each actor of the second chain consumes (the outputs of the
  // `fan_in` actors before it): the first chain's actors consume one, so
  // the two chains differ in messages per act and the act's own cost and
  // a message's cost come apart (a line through the two).
  int fan_in = 4;
  int64_t copy_bytes = 32 << 20;  // one memcpy of the copy-speed figure
  // Told when the samples of a figure disagree widely (a busy machine).
  ProfileNote note;
};

// act_us: an act's cost beyond its kernel and its messages; message_us:
// one actor message (sent, routed to its actor's thread, handled). A
// task's act is then act_us + message_us per message it sends (a ready
// per consumer of what it produced, a return per register it consumed).
// Actors on one thread (no cross-thread wake-ups). copy_gbyte_per_s: one
// thread's memcpy of options.copy_bytes. Each the median of
// options.samples. InvalidArgument naming the option for a bad one.
StatusOr<RuntimeCost> ProfileRuntime(const RuntimeProfileOptions& options);

// The hidden subcommand that runs one rank of a transport profile.
inline constexpr char kProfileRankCommand[] = "profile-rank";

// 4 KiB, 16 KiB, ..., 64 MiB.
std::vector<int64_t> DefaultProfileBytes();

struct TransportProfileOptions {
  // "tcp", "shm", "ibverbs" (comm/builtin_providers.h). ibverbs is profiled
  // only when its transport opens a device here; else skipped with a note.
  std::vector<std::string> transports = {"tcp", "shm"};
  std::vector<int> ranks = {2, 3, 4};  // processes per collective, each >= 2
  // Tensor sizes of the collectives (multiples of 4: float32 sums).
  std::vector<int64_t> bytes = DefaultProfileBytes();
  int samples = 5;  // per point; the median is reported
  // Exchange, doubling and scatter-gather all-reduces are timed up to this
  // size (the compiler gives them tensors of at most 512 KiB,
  // common/ring_segments.h); 0: at every size.
  int64_t exchange_max_bytes = 4 << 20;
  // The throughput figure: one stream of one-sided WRITEs of this size.
  int64_t stream_bytes = 8 << 20;
  // With the 2-rank figures, the compute a busy core loses per message
  // (busy_message_us: 2 x samples phases of 150 ms); only when the two
  // ranks are bound to cores of their own, else a note says it was not
  // measured.
  bool busy_messages = true;
  // All runs together, process start to exit; sizes and rank counts that
  // would not fit are left out, each with a note. A run past its share
  // is killed after a few seconds of grace, so the total may exceed the
  // budget by that much.
  std::chrono::milliseconds budget{90000};
  // Bound of one collective or transfer (and of each control-plane wait).
  std::chrono::milliseconds op_timeout{30000};
  // The program whose `profile-rank` subcommand runs a rank.
  std::string executable = "/proc/self/exe";
  comm::BindPolicy bind = comm::BindPolicy::kAuto;  // as `oflite launch --bind`
  ProfileNote note;
  // Not owned; null: none. A non-zero value (a signal number, set by the
  // caller's signal handler) stops the running ranks with that signal and
  // ends the profile with Cancelled.
  const std::atomic<int>* interrupt = nullptr;
};

// InvalidArgument naming the option (e.g. "ranks: 1 is below 2 ...") for
// options ProfileTransports refuses; checks nothing on the machine.
Status ValidateTransportProfileOptions(const TransportProfileOptions& options);

// The algorithms a profile times at `ranks` processes, in enum order: the
// ring's all-reduce, reduce-scatter and all-gather and the exchange
// all-reduce always, recursive doubling at power-of-2 counts from 4,
// scatter-gather from 3 (the conditions under which the compiler can
// record them, common/ring_segments.h).
std::vector<CollectiveAlgorithm> ProfiledAlgorithms(int ranks);

// One TransportCost per transport profiled (options order; a transport
// skipped or with no figure at all is left out, with a note): latency_us
// half the median round trip of a small router message between two
// processes, gbyte_per_s the median throughput of one stream,
// cpu_ns_per_byte each end's CPU over that stream per byte, busy_message_us
// (options.busy_messages) the compute a busy core loses per message, and a
// CollectiveCurve per (ranks, algorithm) with a point (rank 0's median
// wall time of one collective) per size measured, ascending. A figure
// that could not be measured is 0, with a note. Errors: InvalidArgument
// for bad options, Cancelled when interrupted, Unavailable when no
// transport gave any figure (naming why).
StatusOr<std::vector<TransportCost>> ProfileTransports(const TransportProfileOptions& options);

// One phase of the busy-core message probe, as rank 0's computing thread
// saw it: even phases quiet, odd ones with the peer pinging.
struct BusyPhase {
  double units = 0;        // compute passes done
  double seconds = 0;      // the phase's wall time
  double cpu_seconds = 0;  // the computing thread's own CPU time in it
  uint64_t answered = 0;   // pings answered in it
};

// busy_message_us from the probe's phases. Per messaging phase (between two
// quiet ones), each over its answered pings: the wall time the computing
// thread spent off its core beyond the quiet neighbours' mean (the
// transport's threads ran there: measured by the thread's CPU clock, which
// the host's other tenants barely move), and the compute lost inside its
// own CPU time (passes per CPU second against the neighbours': the caches
// the message path took). The figure is the median of the first, plus the
// median of the second only when that one's lower quartile is above 0: on
// the AMD EPYC VM the pass rate moves 1-3 % between phases, about what 40
// pings take, so the second is mostly that noise.
struct BusyMessageCost {
  double us = 0;  // the figure
  double taken_us = 0;
  double slowed_us = 0;
  bool slowed_counted = false;
  int phases = 0;  // messaging phases used; 0: none answered
  std::string summary;  // one line for the profile's notes
};
BusyMessageCost EstimateBusyMessageCost(const std::vector<BusyPhase>& phases);

// `<program> profile-rank --transport=... --rank=R --world=N ...`: one rank
// of a run that ProfileTransports started (argv[0] is the subcommand; the
// job token comes in OFLITE_JOB_TOKEN). Returns the exit code: 0, 1 when
// the run failed (the error on stderr), 2 for bad arguments.
int RunTransportProfileRank(int argc, char** argv);

}  // namespace profile
}  // namespace oflite

#endif  // ONEFLOW_LITE_PROFILE_TRANSPORT_PROFILER_H_
