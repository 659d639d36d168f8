#include "oneflow_lite/session/evaluation.h"

#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>


namespace oflite {
namespace session {
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

}  // namespace

bool IsAccuracyMetric(const std::string& name) {
  const std::string suffix = "_accuracy";
  return name == "accuracy" ||
         (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

StatusOr<EvaluationResult> RunEvaluation(NodeSession* node, const EvaluationRequest& request) {
  const int64_t samples = request.eval_plan->samples_per_iter();
  MultiMachineSession* session = node->multi();
  EvaluationObserver observer(samples);
  RuntimeOptions options = node->BaseRuntimeOptions();
  options.total_iters = request.iterations;
  options.metrics = &observer;
  options.outputs = request.outputs;
  options.variables = request.variables;
  MetricSums all;
  PlanRun run;
  run.name = "eval";
  run.context = session == nullptr ? "evaluation" : "rank " + std::to_string(node->rank()) +
                                                        " evaluation";
  run.before_finish = [&]() -> Status {
    all = observer.Take();
    if (session == nullptr) return Status::OK();
    ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                     session->GatherToRoot("eval-metrics", EncodeMetricSums(all)));
    if (node->rank() != 0) return Status::OK();
    all = MetricSums();
    for (size_t rank = 0; rank < gathered.size(); ++rank) {
      ASSIGN_OR_RETURN(MetricSums part,
                       DecodeMetricSums(gathered[rank], "rank " + std::to_string(rank) +
                                                            "'s evaluation metrics"));
      all.Merge(part);
    }
    return Status::OK();
  };
  Env* env = node->options().env;
  const int64_t begin_us = env->NowMicros();
  RETURN_IF_ERROR(node->RunPlan(*request.eval_plan, options, run).status());
  EvaluationResult result;
  SplitSums(all, samples, &result);
  result.seconds = static_cast<double>(env->NowMicros() - begin_us) / 1e6;
  return result;
}

Status ReportEvaluation(const NodeSession& node, const EvaluationResult& result,
                        const std::string& eval_out, const std::string& label) {
  if (node.rank() != 0) {
    std::printf("%s: this machine's part done in %.1fs; rank 0 prints the metrics\n",
                label.c_str(), result.seconds);
    std::fflush(stdout);
    return Status::OK();
  }
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
  std::ostringstream text;
  text.precision(17);
  for (const auto& [name, value] : means) text << name << " " << value << "\n";
  for (const auto& [name, count] : result.correct) text << name << "_correct " << count << "\n";
  text << "samples " << result.samples << "\n";
  Status written = node.options().env->WriteFileAtomically(eval_out, text.str());
  if (!written.ok()) return InvalidArgumentError("cannot write --eval-out '", eval_out, "': ",
                                                 written.message());
  return Status::OK();
}

Status CheckOutputFile(Env* env, const std::string& path, const std::string& flag) {
  if (path.empty()) return Status::OK();
  if (env->IsDirectory(path)) {
    return InvalidArgumentError(flag, " '", path, "' is a folder, not a file");
  }
  Status parent = env->CheckParentDirectory(path);
  if (!parent.ok()) return parent.WithContext(flag);
  return Status::OK();
}

}  // namespace session
}  // namespace oflite
