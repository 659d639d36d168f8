// Hooks through which a run reports metrics and keeps variables: the
// runtime calls them, the caller (oflite run, a test) implements them.
//
// Both are called from actor threads, possibly several at once: an
// implementation must be thread-safe. Pointers passed in are valid only
// during the call.
#ifndef ONEFLOW_LITE_RUNTIME_RUNTIME_HOOKS_H_
#define ONEFLOW_LITE_RUNTIME_RUNTIME_HOOKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "proto/common.pb.h"

namespace oflite {

// Receives the sink's metrics once per iteration, in iteration order for
// one sink. Values are the element mean over all parts of each metric blob.
class MetricsObserver {
 public:
  virtual ~MetricsObserver() = default;
  virtual void OnMetrics(int64_t iteration,
                         const std::vector<std::pair<std::string, double>>& metrics) = 0;
};

// Receives the sink's named outputs (TrainConf.output, e.g. per-sample
// logits for `oflite predict`) once per iteration, whole: `value` is the
// logical tensor gathered on machine 0 and is valid only during the call.
// Only machine 0's runtime calls it (the sink lives there).
class OutputObserver {
 public:
  virtual ~OutputObserver() = default;
  virtual Status OnOutput(int64_t iteration, const std::string& name, const Blob& value) = 0;
};

// One device's part of a variable.
struct VariablePart {
  std::string op_name;      // the variable op
  int64_t parallel_id = 0;
  int64_t parallel_num = 1;
  NdSbp sbp;                // how the part relates to the logical variable
};

// Where variables come from at start and go to on snapshots.
class VariableStore {
 public:
  virtual ~VariableStore() = default;
  // Fills `blob` with the saved value and returns true, or returns false to
  // let the variable's initializer run. Errors (a corrupt or mismatched
  // checkpoint) stop the run.
  virtual StatusOr<bool> Restore(const VariablePart& part, Blob* blob) = 0;
  // The variable after `completed_iters` iterations (all updates applied).
  virtual Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) = 0;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_RUNTIME_HOOKS_H_
