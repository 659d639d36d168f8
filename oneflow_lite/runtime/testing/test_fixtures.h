// Small plans and observers shared by the runtime's tests (runtime_test,
// async_runtime_test). The plans use the test kernels of test_kernels.cc
// ("test_source", "test_add_one", "test_init", "test_accumulate"), so a test
// linking these must also link //oneflow_lite/runtime/testing:test_kernels.
//
// MetricsRecorder and SnapshotVariableStore are thread-safe (actor threads
// call them); read their fields after Run returned.
#ifndef ONEFLOW_LITE_RUNTIME_TESTING_TEST_FIXTURES_H_
#define ONEFLOW_LITE_RUNTIME_TESTING_TEST_FIXTURES_H_

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/runtime/runtime_hooks.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace testing {

// The float32 vector of 5 elements every register of these plans holds.
const TensorDesc& TestVector();

// Records every metric report: iteration order and values by name.
class MetricsRecorder : public MetricsObserver {
 public:
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override;
  // The values of metric `name` by iteration (a copy, taken under the lock).
  std::map<int64_t, double> Values(const std::string& name);

  std::mutex mutex;
  std::vector<int64_t> order;
  std::map<std::string, std::map<int64_t, double>> values;
};

// Keeps every float snapshot by (variable, completed iterations); restores
// the snapshot taken at `restore_from` (none while it is negative).
class SnapshotVariableStore : public VariableStore {
 public:
  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override;
  Status Save(const VariablePart& part, int64_t completed, const Blob& blob) override;

  std::mutex mutex;
  int64_t restore_from = -1;
  std::map<std::pair<std::string, int64_t>, std::vector<float>> saved;
};

// source -> add_one x `length` (on alternating streams) -> sink ("value").
Plan ChainPlan(int length, int regst_num, int64_t iters);

// variable (init 100) -> reader (+1) -> sink ("loss"); an update task adds
// the source's vector to the variable in place after the reader read it.
Plan VariablePlan(int64_t iters);

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TESTING_TEST_FIXTURES_H_
