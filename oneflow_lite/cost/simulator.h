// The plan simulator behind `oflite simulate` and the automatic layouts
// (docs/simulate.md): a discrete-event simulation of a Plan's actors as the
// runtime runs them, with times from a calibration.
//
// What it models:
// - One thread per stream (the task id's stream key): a thread runs one act
//   at a time, the earliest-ready actor first; an act takes its kernels'
//   calibrated times plus the runtime's act cost (boxing, copy and
//   collective staging acts: their bytes at the calibrated copy speed).
// - Registers as the runtime has them: regst_num copies, an actor acts only
//   with a readable copy of every consumed desc and a free copy of every
//   produced desc (back-pressure); mutators (in-place updates) get a copy
//   after its readers returned it; control registers order like data.
// - Messages: free on one thread, the runtime's message cost between
//   threads, the link's and transport's latency between machines.
// - CommNet pulls: one READ in flight per CommNet actor, a flow of the
//   register's bytes out of the producer machine's NIC.
// - Collectives: a ring starts when every rank has staged its piece; each
//   rank's traffic (TrafficOf, by the recorded algorithm) flows out of its
//   NIC, one step after the other (each step its share of the bytes plus a
//   link latency); it ends at the later of that and the transport's
//   measured curve for the algorithm.
// - NICs share their egress fairly among the flows on them (processor
//   sharing); machines whose cluster cpu_set overlap share those cores the
//   same way (namespace hosts on one box).
// - Busy cores delay the transport: an event crossing machines (a message,
//   a READ's request and data, each collective step) waits for the
//   receiving machine's transport poller while compute holds all its
//   cores, until the compute frees one or RuntimeCost.busy_core_wakeup_us
//   has passed (profile/scheduler_profiler.h).
// Not modelled: the pollers' spinning CPU, time slices beyond that delay,
// caches, memory bandwidth shared between cores, kernels' first-call costs.
// Deterministic: the same plan, calibration and options give the same result.
#ifndef ONEFLOW_LITE_COST_SIMULATOR_H_
#define ONEFLOW_LITE_COST_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/calibration.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace cost {

struct SimOptions {
  // Iterations simulated (0: 24), how many first ones are left out of the
  // steady-state step time while the pipeline fills (-1: a third), and how
  // many last ones while it drains (-1: a sixth). The step time is the
  // slope of the iterations' end times over the window between.
  int64_t iterations = 0;
  int64_t warmup = -1;
  int64_t cooldown = -1;
  // The transport whose software costs apply between machines.
  std::string transport = "tcp";
  // Cores of the machines whose cluster entry has cpu_threads 0 (the
  // runtime then divides a machine's cores among its CPU devices).
  int host_cores = 1;
  // What-if: >= 0 replaces every link's rate (Gbit/s) / latency (us).
  double link_gbit_per_s = -1;
  double link_latency_us = -1;
  // Record every act, flow and collective for a timeline (Chrome trace).
  bool record_timeline = false;
};

struct SimThreadStat {
  int64_t machine = 0;
  std::string name;          // e.g. "m0 cpu:0 stream 0"
  double busy_share = 0;     // of the steady-state window
  int64_t acts_per_step = 0;
};

struct SimMachineStat {
  int64_t machine = 0;
  double compute_busy_share = 0;      // its busiest thread's
  // The work its acts were charged per step (kernels, their caches' term,
  // the runtime's per-act cost; every thread, not the time waiting for a
  // core): what a measured trace's kernel CPU time (--trace-cpu) compares
  // with.
  double compute_us_per_step = 0;
  double comm_us_per_step = 0;        // time with a flow or collective in flight
  double exposed_comm_us_per_step = 0;  // ... while no thread of it computes
  double egress_bytes_per_step = 0;
  // The CPU its cores were charged per step for communication: the bytes
  // its flows send and receive (transport and path per byte) and the
  // messages it handles (busy_message_us each). Set beside compute_us_per_step
  // against a run's per-thread CPU (the transport's and collective threads').
  double comm_cpu_us_per_step = 0;
  // All the CPU its cores were charged per step: every act's work (kernels,
  // staging and cut-out copies, CommNet acts, times their threads) plus
  // comm_cpu_us_per_step; against the process's CPU in a run.
  double cpu_us_per_step = 0;
  int64_t memory_bytes = 0;           // its memory blocks (all zones)
};

struct SimPathEntry {
  std::string what;   // task name, "read <desc> m0->m1", "ring <lbn>", "message"
  std::string kind;   // "act", "read", "collective", "wait"
  double us_per_step = 0;
};

struct SimEvent {
  int64_t machine = 0;
  std::string track;  // thread name, or "nic m0"
  std::string name;
  std::string category;  // act, read, collective
  double begin_us = 0;
  double end_us = 0;
  int64_t iteration = 0;
};

struct SimResult {
  double step_time_us = 0;          // steady state, per iteration
  double first_iteration_us = 0;    // start to the end of iteration 0
  double total_us = 0;              // start to the end of the last iteration
  int64_t iterations = 0;
  int64_t warmup = 0;
  std::vector<SimThreadStat> threads;
  std::vector<SimMachineStat> machines;
  std::vector<SimPathEntry> critical_path;  // largest first
  int64_t kernels_measured = 0;
  int64_t kernels_estimated = 0;
  int64_t kernels_missing = 0;
  std::vector<std::string> notes;
  std::vector<SimEvent> timeline;  // with SimOptions.record_timeline
};

// Simulates `plan`. Errors: a calibration or plan the model cannot read
// (naming the task or register), and a plan that stops before its last
// iteration (a deadlock in the plan: names the waiting actors).
StatusOr<SimResult> SimulatePlan(const Plan& plan, const Calibration& calibration,
                                 const SimOptions& options);

// The result as one JSON object (docs/simulate.md lists the fields).
std::string SimResultJson(const SimResult& result);
// The timeline as a Chrome trace (chrome://tracing, Perfetto): one process
// per machine, one track per thread and one per NIC, times in microseconds.
std::string SimChromeTrace(const SimResult& result);

}  // namespace cost
}  // namespace oflite

#endif  // ONEFLOW_LITE_COST_SIMULATOR_H_
