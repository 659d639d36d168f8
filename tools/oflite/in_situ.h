// Kernel times inside a real run (`oflite profile --run-plan`): read from
// the trace an `oflite run --trace` of a plan wrote (trace_file.h,
// docs/tracing.md), per kernel key (cost/kernel_key.h), beside the times
// the kernel profiler measures of the same keys in isolation
// (profile/kernel_profiler.h). A kernel inside a run finds its inputs and
// weights wherever the runtime's other work left them, so it is often
// slower than alone; the ratio per op type is the calibration's
// InSituFactor (proto/calibration.proto), which the simulator applies to
// kernels measured only in isolation.
//
// How a trace names a kernel: a "kernel" slice is named by its op and
// carries no arguments; it lies inside the "act" slice of its task on the
// same thread (the act is named by the task and states its task id and
// iteration). So each kernel slice is matched to the act enclosing it, the
// act to its task of the plan (by task id, else by name), and the op name
// to the task's KernelConf. Only the kernels the kernel profiler keys are
// kept: CPU compute and source tasks, no host_feed.
//
// Plain functions; no shared state.
#ifndef ONEFLOW_LITE_TOOLS_OFLITE_IN_SITU_H_
#define ONEFLOW_LITE_TOOLS_OFLITE_IN_SITU_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/calibration.pb.h"
#include "proto/plan.pb.h"
#include "tools/oflite/trace_file.h"

namespace oflite {
namespace cli {

struct InSituOptions {
  // Compute threads the run gave each CPU device (part of every key). 0:
  // as the runtime does, cost::CpuThreadsOf(the task's machine, host_cores).
  int threads = 0;
  int host_cores = 1;  // with threads 0
  // The leading share of the iterations left out (warm-up: first touches
  // of buffers, lazy allocations, the allocator growing).
  double warmup_fraction = 1.0 / 3;
};

// The counted calls of one kernel key.
struct InSituKernel {
  std::string op_type;
  DeviceType device_type = DEVICE_CPU;
  int threads = 0;
  std::vector<double> durations_us;  // in trace order
};

struct InSituTrace {
  std::map<std::string, InSituKernel> kernels;  // by key
  // The iterations the acts state: all of them, the first counted one
  // (after the warm-up) and how many were counted. Without iteration
  // arguments (a trace of another writer) the warm-up is the first
  // warmup_fraction of the acts' time span instead, and these stay -1.
  int64_t first_iteration = -1;
  int64_t end_iteration = -1;  // one past the last
  int64_t first_counted = -1;
  int64_t iterations = 0;  // counted (0 without iteration arguments)
  // Mean time between the ends of consecutive counted iterations (an
  // iteration ends with its last act), -1 when fewer than two ends.
  double step_us = -1;
  // Counted kernel slices that could not be attributed: outside every act,
  // in an act of no task of the plan, or of an op its task does not run.
  int64_t unmatched_slices = 0;
  // Counted kernel slices of kernels the profiler does not key (copy or
  // boxing tasks, CUDA devices, host_feed).
  int64_t other_slices = 0;
};

// Maps the kernel slices of `trace` (a run of `plan`) to kernel keys.
// Errors: bad options, a key the plan cannot form (naming the op), or a
// trace in which no counted slice belongs to a keyed kernel of the plan
// (another plan's trace, or one without kernel slices).
StatusOr<InSituTrace> KernelTimesFromTrace(const TraceFile& trace, const Plan& plan,
                                           const InSituOptions& options);

// The median (the mean of the two middle values for an even count); 0 for
// none.
double MedianOf(std::vector<double> values);

// Sets KernelCost.in_situ_us of the calibration's kernels whose key is in
// `in_situ_us`; returns the keys it has no KernelCost for, in key order.
std::vector<std::string> SetInSituTimes(const std::map<std::string, double>& in_situ_us,
                                        Calibration* calibration);

// Recomputes Calibration.in_situ_factor: per (op type, device, threads),
// the sum of in_situ_us over the sum of us of the calibration's kernels
// that have both (us > 0, in_situ_us > 0): time-weighted, so tiny kernels
// whose in-situ time is mostly the trace's clock reads weigh little. A computed factor replaces the entry of
// the same (op type, device, threads); entries of other groups are kept.
// The entries end sorted by op type, device, threads. Returns the computed
// ones, in that order.
std::vector<InSituFactor> UpdateInSituFactors(Calibration* calibration);

}  // namespace cli
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_OFLITE_IN_SITU_H_
