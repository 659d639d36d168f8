// IterationClock: train_gpu's clock for a run through the actor runtime.
// A MetricsObserver that stamps the host clock when each iteration's
// metrics arrive (the sink's act: the step's loss reached the host), so the
// steady-state step time is read inside one run, after its warmup, with
// start-up (lazy module loading, cuDNN algorithm choice, graph capture) and
// teardown outside. Not GPU-specific (train_gpu_clock_test runs it on a CPU
// plan).
#ifndef ONEFLOW_LITE_TOOLS_BENCH_TRAIN_GPU_CLOCK_H_
#define ONEFLOW_LITE_TOOLS_BENCH_TRAIN_GPU_CLOCK_H_

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/runtime_hooks.h"

namespace oflite {

// The upper median (0 for none).
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

class IterationClock final : public MetricsObserver {
 public:
  // Iterations [0, iterations) of one run.
  explicit IterationClock(int64_t iterations) : at_(iterations), seen_(iterations, false) {}

  void OnMetrics(int64_t iteration, const std::vector<std::pair<std::string, double>>&) override {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (iteration >= 0 && iteration < static_cast<int64_t>(at_.size())) {
      at_[iteration] = now;
      seen_[iteration] = true;
    }
  }

  // Milliseconds per step: the iterations after the first `warmup` split
  // into `windows` windows, each window's (its last stamp - the stamp
  // before it) / its steps, and the median of those. Unavailable when the
  // sink did not report every iteration; InvalidArgument without a warmup
  // step or with fewer measured steps than windows.
  StatusOr<double> StepMs(int64_t warmup, int windows) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t total = static_cast<int64_t>(at_.size());
    const int64_t seen = std::count(seen_.begin(), seen_.end(), true);
    if (seen != total) {
      return UnavailableError("the sink reported ", seen, " of ", total, " iterations' metrics");
    }
    const int64_t measured = total - warmup;
    if (warmup < 1 || windows < 1 || measured < windows) {
      return InvalidArgumentError("need a warmup step and ", windows, " measured steps, got ",
                                  warmup, " and ", measured);
    }
    std::vector<double> per_step;
    for (int w = 0; w < windows; ++w) {
      const int64_t first = warmup - 1 + measured * w / windows;
      const int64_t last = warmup - 1 + measured * (w + 1) / windows;
      const double ms = std::chrono::duration<double, std::milli>(at_[last] - at_[first]).count();
      per_step.push_back(ms / static_cast<double>(last - first));
    }
    return Median(per_step);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::chrono::steady_clock::time_point> at_;
  std::vector<bool> seen_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_BENCH_TRAIN_GPU_CLOCK_H_
