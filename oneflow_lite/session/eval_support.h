// What `oflite run` needs to evaluate a trained plan, on one machine or
// distributed over the job's machines:
//
// MetricSums     per metric name, the number of reports and the sum of the
//                reported values (a sink reports each metric once per
//                iteration). Means() is sum / count per metric. Encode /
//                DecodeMetricSums carry it through the control-plane KV
//                (text, values at full double precision: decode(encode(x))
//                == x bit for bit), and Merge adds another rank's sums, so
//                the merged means over the ranks of a multi-machine job
//                equal the means one machine's sink would have reported.
// MetricAverager a thread-safe MetricsObserver that fills a MetricSums.
// PartCapturingStore
//                wraps the training run's VariableStore (every call is
//                forwarded) and keeps a copy of each variable part this
//                machine saves after `final_iteration`, keyed by (variable,
//                parallel id): exactly this machine's share of the trained
//                variables, whatever their SBP (a broadcast variable's copy
//                on machine 1 is kept too, which the logical values of
//                CheckpointVariableStore leave out).
// TrainedPartsStore
//                restores an evaluation plan's variable parts from those
//                copies: the part must exist with the same parallel num and
//                layout and the same shape and dtype, else an error naming
//                the variable, the part and the machine. Saves are ignored.
//
// Thread-safety: MetricAverager, PartCapturingStore and TrainedPartsStore
// are thread-safe (actor threads call them); MetricSums is a plain value.
// PartCapturingStore does not own `inner`, which must outlive it.
#ifndef ONEFLOW_LITE_SESSION_EVAL_SUPPORT_H_
#define ONEFLOW_LITE_SESSION_EVAL_SUPPORT_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/runtime_hooks.h"

namespace oflite {
namespace session {

struct MetricSum {
  int64_t count = 0;
  double sum = 0;
};

class MetricSums {
 public:
  void Add(const std::string& name, double value);
  // `count` reports summing to `sum`.
  void AddSum(const std::string& name, int64_t count, double sum);
  void Merge(const MetricSums& other);
  std::map<std::string, double> Means() const;
  // The largest report count of any metric (the iterations a sink reported).
  int64_t count() const;
  bool empty() const { return sums_.empty(); }
  const std::map<std::string, MetricSum>& sums() const { return sums_; }

 private:
  std::map<std::string, MetricSum> sums_;
};

// One line per metric: "<name> <count> <sum as %a>". Names must not contain
// whitespace (metric names are op-style identifiers).
std::string EncodeMetricSums(const MetricSums& sums);
// DataLoss naming `source` on a malformed text.
StatusOr<MetricSums> DecodeMetricSums(const std::string& text, const std::string& source);

class MetricAverager final : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override;
  MetricSums Take();

 private:
  std::mutex mutex_;
  MetricSums sums_;  // guarded by mutex_
};

struct TrainedPart {
  PartLayout layout;
  HostTensor value;
};
using TrainedParts = std::map<std::pair<std::string, int64_t>, TrainedPart>;

class PartCapturingStore final : public VariableStore {
 public:
  PartCapturingStore(VariableStore* inner, int64_t final_iteration)
      : inner_(inner), final_iteration_(final_iteration) {}

  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override {
    return inner_->Restore(part, blob);
  }
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override;
  // The parts saved after final_iteration (complete once the run finished).
  TrainedParts TakeParts();

 private:
  VariableStore* const inner_;
  const int64_t final_iteration_;
  std::mutex mutex_;
  TrainedParts parts_;  // guarded by mutex_
};

class TrainedPartsStore final : public VariableStore {
 public:
  TrainedPartsStore(const TrainedParts* parts, int64_t machine_id)
      : parts_(parts), machine_id_(machine_id) {}
  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override;
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override {
    return Status::OK();
  }

 private:
  const TrainedParts* parts_;  // not owned, read-only
  const int64_t machine_id_;
};

}  // namespace session
}  // namespace oflite

#endif  // ONEFLOW_LITE_SESSION_EVAL_SUPPORT_H_
