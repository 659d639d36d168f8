// The kernel half of `oflite profile`: times every distinct kernel of a
// compiled Plan on this host, for the cost model's calibration
// (proto/calibration.proto, KernelCost; docs/simulate.md).
//
// Each kernel of a TASK_COMPUTE or TASK_SOURCE task on a CPU device (every
// machine of the plan) has a key (cost/kernel_key.h): op type, dtype,
// device kind, threads, physical shapes and attributes. Kernels with the
// same key do the same work, so each key is measured once: the kernel is
// created and initialized as the runtime would (kernels/kernel.h), bound to
// host buffers of its physical shapes (float inputs random in [0.1, 1),
// integer inputs 0, which is a valid label or index), called `warmup` + 1
// times (the fastest of those calls sizes a sample), then timed in
// `samples` samples; the reported time is the median sample's time of one
// call. A sample of a short kernel batches several calls so that it lasts
// at least `min_sample_us`, which keeps the clock's resolution and the
// overhead of reading it out of the figure.
//
// A kernel that cannot be created, initialized or run here (a data loader
// whose dataset is missing, an op whose inputs must hold particular values)
// does not fail the profile: its key gets no KernelCost and a note names
// the op, the key and the error. CUDA tasks are noted and skipped (no
// device here).
//
// The compute thread count is process-wide (kernels/cpu/cpu_threads.h):
// ProfilePlanKernels sets it for each key and puts the previous setting
// back when it returns. It runs the kernels on the calling thread, one at a
// time.
#ifndef ONEFLOW_LITE_PROFILE_KERNEL_PROFILER_H_
#define ONEFLOW_LITE_PROFILE_KERNEL_PROFILER_H_

#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"
#include "proto/calibration.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace profile {

struct KernelProfileOptions {
  // Compute threads every kernel runs with. 0: what the runtime gives a CPU
  // device of the task's machine (cost::CpuThreadsOf over this host's
  // available cores), so the keys match the plan as it would run here.
  int threads = 0;
  // Calls before the first sample: caches, lazy allocation, and kernels
  // that choose how to run a shape by timing its first calls (a matmul's
  // GemmOrientation tries up to four routes for kSettlingCalls calls).
  // With fewer, a long kernel's samples (one call each) time the choosing:
  // with 2, every GEMM of 50 us or more was sampled while it still tried
  // its slower orientation every other call.
  int warmup = math::GemmOrientation::kSettlingCalls;
  int samples = 5;  // timed samples per key (>= 1); the median is kept
  // A sample lasts at least this long: shorter kernels are called several
  // times per sample and the time divided.
  double min_sample_us = 50;
  // Upper bound on the calls batched into one sample (a kernel of a few
  // nanoseconds would otherwise be called millions of times).
  int max_calls_per_sample = 10000;
  // Also time each kernel whose tensors take 256 KiB or more with them
  // evicted from the caches before every call (KernelCost.cold_us,
  // cache_profiler.h), `samples` calls.
  bool cold = true;
  // Keys measured before (oflite profile --update): skipped.
  std::set<std::string> known_keys;
  // Also the kernels of plan.eval_plan (the forward graph on the test split).
  bool include_eval_plan = false;
};

// What ProfilePlanKernels did beside the costs it returns.
struct KernelProfileReport {
  int known = 0;       // distinct keys skipped as known
  int unmeasured = 0;  // distinct keys that got no KernelCost (one note each)
  // For people: one line per unmeasured key (op, key, why) and one per plan
  // with CUDA tasks skipped.
  std::vector<std::string> notes;
};

// Measures every distinct kernel key of `plan` not in options.known_keys;
// the costs come in the order the keys were first met (machine, task,
// kernel order). Errors: bad options (samples < 1, threads out of range) or
// a plan whose bindings point at no register (cost::ShapesOfKernel), naming
// the op. `report` may be null.
StatusOr<std::vector<KernelCost>> ProfilePlanKernels(const Plan& plan,
                                                     const KernelProfileOptions& options,
                                                     KernelProfileReport* report = nullptr);

}  // namespace profile
}  // namespace oflite

#endif  // ONEFLOW_LITE_PROFILE_KERNEL_PROFILER_H_
