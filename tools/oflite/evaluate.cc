#include "tools/oflite/evaluate.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>

namespace oflite {
namespace cli {
namespace {

// Gathered next to the metric sums: "correct:<metric>" entries whose sum is
// the exact count of correct samples.
constexpr char kCorrectPrefix[] = "correct:";

// Sums the metrics and counts the correct samples of accuracy metrics.
class EvaluationObserver final : public MetricsObserver {
 public:
  explicit EvaluationObserver(int64_t samples_per_iteration) : samples_(samples_per_iteration) {}

  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) {
      sums_.Add(name, value);
      if (IsAccuracyMetric(name)) {
        sums_.AddSum(kCorrectPrefix + name, 1,
                     static_cast<double>(std::llround(value * static_cast<double>(samples_))));
      }
    }
  }
  MetricSums Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(sums_);
  }

 private:
  const int64_t samples_;
  std::mutex mutex_;
  MetricSums sums_;  // guarded by mutex_
};

// Splits the observer's sums into metrics and correct counts.
void SplitSums(const MetricSums& all, int64_t samples_per_iteration, EvaluationResult* result) {
  const std::string prefix = kCorrectPrefix;
  for (const auto& [name, entry] : all.sums()) {
    if (name.compare(0, prefix.size(), prefix) == 0) {
      result->correct[name.substr(prefix.size())] += std::llround(entry.sum);
    } else {
      result->sums.AddSum(name, entry.count, entry.sum);
    }
  }
  result->samples = result->sums.count() * samples_per_iteration;
}

RuntimeOptions EvaluationOptions(const EvaluationRequest& request, MetricsObserver* metrics) {
  RuntimeOptions options = request.base;
  options.start_iter = 0;
  options.total_iters = request.iterations;
  options.save_every = 0;
  options.metrics = metrics;
  options.outputs = request.outputs;
  options.variables = request.variables;
  options.remote_route = nullptr;
  options.registry = nullptr;
  return options;
}

// This rank's run, on one machine or within the session.
Status RunOnce(const EvaluationRequest& request, RuntimeOptions options) {
  MultiMachineSession* session = request.session;
  const std::string who = session == nullptr
                              ? "evaluation"
                              : "rank " + std::to_string(options.machine_id) + " evaluation";
  if (session != nullptr) session->Configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(*request.eval_plan, options));
  if (session == nullptr) return runtime->Run().WithContext(who);
  struct Detach {
    MultiMachineSession* session;
    ~Detach() { session->Detach(); }
  } detach{session};  // destroyed before the runtime
  RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  return runtime->Run().WithContext(who);
}

}  // namespace

bool IsAccuracyMetric(const std::string& name) {
  const std::string suffix = "_accuracy";
  return name == "accuracy" ||
         (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

StatusOr<EvaluationResult> RunEvaluation(const EvaluationRequest& request) {
  const int64_t samples = request.eval_plan->samples_per_iter();
  MultiMachineSession* session = request.session;
  if (session != nullptr && request.begin_run) {
    RETURN_IF_ERROR(session->BeginRun(*request.eval_plan, "eval"));
  }
  EvaluationObserver observer(samples);
  const auto begin = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(RunOnce(request, EvaluationOptions(request, &observer)));
  MetricSums all = observer.Take();
  if (session != nullptr) {
    ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                     session->GatherToRoot("eval-metrics", EncodeMetricSums(all)));
    RETURN_IF_ERROR(session->Finish(/*last=*/true));
    if (request.base.machine_id == 0) {
      all = MetricSums();
      for (size_t rank = 0; rank < gathered.size(); ++rank) {
        ASSIGN_OR_RETURN(MetricSums part,
                         DecodeMetricSums(gathered[rank], "rank " + std::to_string(rank) +
                                                              "'s evaluation metrics"));
        all.Merge(part);
      }
    }
  }
  EvaluationResult result;
  SplitSums(all, samples, &result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

Status ReportEvaluation(const EvaluationResult& result, const std::string& eval_out) {
  std::printf("test (%lld samples, %.1fs):", static_cast<long long>(result.samples),
              result.seconds);
  const std::map<std::string, double> means = result.sums.Means();
  for (const auto& [name, value] : means) std::printf("  %s %.4f", name.c_str(), value);
  std::printf("\n");
  for (const auto& [name, count] : result.correct) {
    std::printf("%s: %lld of %lld samples correct\n", name.c_str(), static_cast<long long>(count),
                static_cast<long long>(result.samples));
  }
  std::fflush(stdout);
  if (eval_out.empty()) return Status::OK();
  std::FILE* file = std::fopen(eval_out.c_str(), "w");
  if (file == nullptr) return InvalidArgumentError("cannot write --eval-out '", eval_out, "'");
  for (const auto& [name, value] : means) std::fprintf(file, "%s %.17g\n", name.c_str(), value);
  for (const auto& [name, count] : result.correct) {
    std::fprintf(file, "%s_correct %lld\n", name.c_str(), static_cast<long long>(count));
  }
  std::fprintf(file, "samples %lld\n", static_cast<long long>(result.samples));
  if (std::fclose(file) != 0) return DataLossError("writing --eval-out '", eval_out, "' failed");
  return Status::OK();
}

}  // namespace cli
}  // namespace oflite
