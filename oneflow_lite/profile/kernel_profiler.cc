#include "oneflow_lite/profile/kernel_profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/nd_sbp_view.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/cost/kernel_key.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/profile/cache_profiler.h"

namespace oflite {
namespace profile {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Small positive floats: no kernel divides by zero, takes the log of a
// negative or overflows an exp, and an optimizer update stays finite over
// thousands of calls. Integer tensors stay 0 (HostTensor is zero-filled):
// a valid label, index or row for every op that reads one.
void FillInput(HostTensor* tensor, std::mt19937_64* rng) {
  const int64_t n = tensor->elem_count();
  if (tensor->dtype() == DT_FLOAT) {
    std::uniform_real_distribution<float> d(0.1f, 1.0f);
    float* data = tensor->data<float>();
    for (int64_t i = 0; i < n; ++i) data[i] = d(*rng);
  } else if (tensor->dtype() == DT_DOUBLE) {
    std::uniform_real_distribution<double> d(0.1, 1.0);
    double* data = tensor->data<double>();
    for (int64_t i = 0; i < n; ++i) data[i] = d(*rng);
  }
}

// Why a kernel is not timed at all, or "" (it is).
std::string WhyNotTimed(const KernelConf& conf) {
  // Its Forward blocks until the program pushes a tensor (data/host_feed.h),
  // up to its timeout: the time is the program's, not the kernel's.
  if (conf.op().op_type() == "host_feed") {
    return "not measured: its Forward waits for the program's next pushed tensor";
  }
  return "";
}

// One kernel bound to host buffers of its physical shapes, ready to call.
class BoundKernel {
 public:
  static StatusOr<std::unique_ptr<BoundKernel>> Create(const TaskProto& task,
                                                       const KernelConf& conf,
                                                       const cost::KernelShapes& shapes,
                                                       int64_t seed) {
    std::unique_ptr<BoundKernel> bound(new BoundKernel(conf, task.device_index()));
    KernelInitContext init;
    init.op = &conf.op();
    init.parallel_id = task.parallel_ctx().parallel_id();
    init.parallel_num = std::max<int64_t>(1, task.parallel_ctx().parallel_num());
    KernelOneDimView(task, conf, &init.parallel_id, &init.parallel_num);
    init.seed = seed;
    init.device = &bound->device_;
    for (int i = 0; i < conf.input_size(); ++i) {
      init.inputs[conf.input(i).arg()].emplace_back(shapes.inputs[i]);
    }
    for (int i = 0; i < conf.output_size(); ++i) {
      init.outputs[conf.output(i).arg()].emplace_back(shapes.outputs[i]);
    }
    ASSIGN_OR_RETURN(bound->kernel_, CreateAndInitKernel(init, DEVICE_CPU, conf.dtype()));

    // The blobs are bound by address: both vectors are sized once.
    const size_t count = shapes.inputs.size() + shapes.outputs.size();
    bound->buffers_.reserve(count);
    bound->blobs_.reserve(count);
    std::mt19937_64 rng(20240933);
    for (int i = 0; i < conf.input_size(); ++i) {
      bound->buffers_.emplace_back(TensorDesc(shapes.inputs[i]));
      FillInput(&bound->buffers_.back(), &rng);
      bound->blobs_.push_back(bound->buffers_.back().AsBlob());
      bound->context_.BindInput(conf.input(i).arg(), &bound->blobs_.back());
    }
    for (int i = 0; i < conf.output_size(); ++i) {
      bound->buffers_.emplace_back(TensorDesc(shapes.outputs[i]));
      bound->blobs_.push_back(bound->buffers_.back().AsBlob());
      bound->context_.BindOutput(conf.output(i).arg(), &bound->blobs_.back());
    }
    // KernelConf.tmp: the runtime binds no scratch blobs (kernels allocate
    // their scratch in Init), so neither does the profiler.
    return bound;
  }

  // Bytes of the kernel's inputs and outputs.
  int64_t TensorBytes() const {
    int64_t bytes = 0;
    for (const HostTensor& t : buffers_) bytes += t.ByteSize();
    return bytes;
  }

  // Drops the inputs and outputs from every cache level (cache_profiler.h).
  void Evict() const {
    for (const HostTensor& t : buffers_) EvictFromCaches(t.raw(), static_cast<size_t>(t.ByteSize()));
  }

  // One Forward, as the next iteration (a data source reads its next batch,
  // Adam's bias correction moves on).
  Status Call() {
    context_.set_iteration(iteration_++);
    return kernel_->Forward(&context_);
  }

 private:
  BoundKernel(const KernelConf& conf, int64_t device_index)
      : device_(static_cast<int>(device_index)), context_(conf.op(), &device_, 0) {}

  CpuDeviceContext device_;
  std::unique_ptr<Kernel> kernel_;
  std::vector<HostTensor> buffers_;
  std::vector<Blob> blobs_;
  KernelContext context_;
  int64_t iteration_ = 0;
};

struct Timing {
  double us = 0;  // median of one call
  int samples = 0;
  double cold_us = 0;  // median of one call on evicted tensors; 0: not timed
};

// Kernels whose tensors take fewer bytes get no cold time: a run's other
// work between two uses seldom pushes so little out of the caches, and
// the eviction's own cost would dominate the probe.
constexpr int64_t kColdMinBytes = int64_t{256} << 10;

StatusOr<Timing> TimeKernel(BoundKernel* kernel, const KernelProfileOptions& options) {
  // The fastest of the warm calls after the first (cold caches, lazy
  // allocation) and one more probe call sizes the batch of a sample, so
  // that one slow probe does not leave a short kernel unbatched.
  double one = -1;
  for (int i = 0; i <= options.warmup; ++i) {
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(kernel->Call());
    const double us = MicrosSince(start);
    if (i == 0 && options.warmup > 0) continue;  // cold
    one = one < 0 ? us : std::min(one, us);
  }
  int calls = 1;
  if (one < options.min_sample_us) {
    const double wanted = std::ceil(options.min_sample_us / std::max(one, 0.001));
    calls = static_cast<int>(std::min<double>(wanted, options.max_calls_per_sample));
  }
  std::vector<double> per_call;
  per_call.reserve(options.samples);
  for (int s = 0; s < options.samples; ++s) {
    const Clock::time_point start = Clock::now();
    for (int c = 0; c < calls; ++c) RETURN_IF_ERROR(kernel->Call());
    per_call.push_back(MicrosSince(start) / calls);
  }
  Timing timing{Median(std::move(per_call)), options.samples, 0};
  if (options.cold && CanEvictFromCaches() && kernel->TensorBytes() >= kColdMinBytes) {
    std::vector<double> cold;
    cold.reserve(options.samples);
    for (int s = 0; s < options.samples; ++s) {
      kernel->Evict();
      const Clock::time_point start = Clock::now();
      RETURN_IF_ERROR(kernel->Call());
      cold.push_back(MicrosSince(start));
    }
    timing.cold_us = Median(std::move(cold));
  }
  return timing;
}

// The MachineProto of `machine_id` in the plan's cluster (a default one,
// which CpuThreadsOf reads as one CPU device with the cores to itself, when
// the cluster does not list it).
const MachineProto& MachineOf(const Plan& plan, int64_t machine_id) {
  for (const MachineProto& machine : plan.cluster().machine()) {
    if (machine.id() == machine_id) return machine;
  }
  return MachineProto::default_instance();
}

// Restores the process's compute thread count when the profile ends.
class ThreadsRestorer {
 public:
  ThreadsRestorer() : previous_(CpuComputeThreadsSetting()) {}
  ~ThreadsRestorer() {
    if (previous_ > 0 && CpuComputeThreadsSetting() != previous_) SetCpuComputeThreads(previous_);
  }

 private:
  int previous_;
};

class Profiler {
 public:
  Profiler(const KernelProfileOptions& options, KernelProfileReport* report)
      : options_(options), report_(report) {}

  Status ProfilePlan(const Plan& plan, const std::string& which) {
    const cost::PlanIndex index(plan);
    const int cores = AvailableCpuCores();
    int cuda_tasks = 0;
    for (const TaskProto* task : index.tasks()) {
      if (task->type() != TASK_COMPUTE && task->type() != TASK_SOURCE) continue;
      if (task->device_type() != DEVICE_CPU) {
        if (task->kernel_size() > 0) ++cuda_tasks;
        continue;
      }
      const int threads = options_.threads > 0
                              ? options_.threads
                              : cost::CpuThreadsOf(MachineOf(plan, task->machine_id()), cores);
      for (const KernelConf& conf : task->kernel()) {
        RETURN_IF_ERROR(ProfileKernel(plan, index, *task, conf, threads));
      }
    }
    if (cuda_tasks > 0) {
      report_->notes.push_back(which + ": skipped " + std::to_string(cuda_tasks) +
                               " task(s) on CUDA devices (only CPU kernels are measured)");
    }
    return Status::OK();
  }

  std::vector<KernelCost> TakeCosts() { return std::move(costs_); }

 private:
  Status ProfileKernel(const Plan& plan, const cost::PlanIndex& index, const TaskProto& task,
                       const KernelConf& conf, int threads) {
    const std::string where = "task '" + task.name() + "', op '" + conf.op().name() + "'";
    StatusOr<std::string> key = cost::KernelKey(conf, DEVICE_CPU, threads, index);
    if (!key.ok()) return key.status().WithContext(where);
    if (!seen_.insert(*key).second) return Status::OK();
    if (options_.known_keys.count(*key) > 0) {
      ++report_->known;
      return Status::OK();
    }
    auto unmeasured = [&](const std::string& why) {
      ++report_->unmeasured;
      report_->notes.push_back("op '" + conf.op().name() + "' (" + conf.op().op_type() + ") [" +
                               *key + "]: " + why);
      return Status::OK();
    };
    const std::string why_not = WhyNotTimed(conf);
    if (!why_not.empty()) return unmeasured(why_not);
    ASSIGN_OR_RETURN(cost::KernelShapes shapes, cost::ShapesOfKernel(conf, index));

    if (threads != applied_threads_) {
      SetCpuComputeThreads(threads);
      applied_threads_ = threads;
    }
    StatusOr<std::unique_ptr<BoundKernel>> bound =
        BoundKernel::Create(task, conf, shapes, plan.seed());
    if (!bound.ok()) return unmeasured(bound.status().ToString());
    StatusOr<Timing> timing = TimeKernel(bound->get(), options_);
    if (!timing.ok()) return unmeasured(timing.status().ToString());

    KernelCost cost;
    cost.set_key(*key);
    cost.set_op_type(conf.op().op_type());
    cost.set_device_type(DEVICE_CPU);
    cost.set_threads(threads);
    cost.set_us(timing->us);
    cost.set_samples(timing->samples);
    if (timing->cold_us > 0) cost.set_cold_us(timing->cold_us);
    cost.set_elements(cost::KernelElements(shapes));
    costs_.push_back(std::move(cost));
    return Status::OK();
  }

  const KernelProfileOptions& options_;
  KernelProfileReport* report_;
  std::set<std::string> seen_;
  std::vector<KernelCost> costs_;
  int applied_threads_ = 0;
};

Status CheckOptions(const KernelProfileOptions& options) {
  if (options.threads < 0 || options.threads > kMaxCpuThreads) {
    return InvalidArgumentError("kernel profile: threads ", options.threads, " is outside [0, ",
                                kMaxCpuThreads, "]");
  }
  if (options.samples < 1) {
    return InvalidArgumentError("kernel profile: samples must be at least 1, got ",
                                options.samples);
  }
  if (options.warmup < 0) {
    return InvalidArgumentError("kernel profile: warmup must be at least 0, got ", options.warmup);
  }
  if (!(options.min_sample_us >= 0) || options.max_calls_per_sample < 1) {
    return InvalidArgumentError("kernel profile: min_sample_us ", options.min_sample_us,
                                " must be >= 0 and max_calls_per_sample ",
                                options.max_calls_per_sample, " >= 1");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<KernelCost>> ProfilePlanKernels(const Plan& plan,
                                                     const KernelProfileOptions& options,
                                                     KernelProfileReport* report) {
  RETURN_IF_ERROR(CheckOptions(options));
  KernelProfileReport ignored;
  if (report == nullptr) report = &ignored;
  ThreadsRestorer restore_threads;
  Profiler profiler(options, report);
  RETURN_IF_ERROR(profiler.ProfilePlan(plan, "plan"));
  if (options.include_eval_plan && plan.eval_plan().machine_size() > 0) {
    RETURN_IF_ERROR(profiler.ProfilePlan(plan.eval_plan(), "evaluation plan"));
  }
  return profiler.TakeCosts();
}

}  // namespace profile
}  // namespace oflite
