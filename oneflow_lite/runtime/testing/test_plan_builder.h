// TestPlanBuilder (testonly): builds small Plans by hand for runtime tests
// and benchmarks, without the compiler.
//
// Tasks get bit-packed ids on (machine 0, CPU, device index, stream 0).
// Registers are laid out one after another in the host zone (no reuse);
// Build fills consumer lists, mem offsets and the memory block. Single
// threaded; the returned Plan is a value.
#ifndef ONEFLOW_LITE_RUNTIME_TESTING_TEST_PLAN_BUILDER_H_
#define ONEFLOW_LITE_RUNTIME_TESTING_TEST_PLAN_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/tensor.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace testing {

class TestPlanBuilder {
 public:
  // Returns the task id.
  int64_t AddTask(const std::string& name, TaskType type, int device_index = 0);
  // Adds a produced register with one blob per desc; returns its desc id.
  int64_t AddRegst(int64_t task_id, const std::string& name, const std::vector<TensorDesc>& blobs,
                   int regst_num = 2);
  void Consume(int64_t task_id, int64_t regst_desc_id, const std::string& name = "in");
  // `task_id` (a consumer) writes the register in place (mutator_task_id).
  void MarkMutator(int64_t regst_desc_id, int64_t task_id) {
    mutators_.emplace_back(regst_desc_id, task_id);
  }
  // A kernel of op type `op_type` (dtype float): inputs/outputs are
  // (arg name, regst desc id) pairs bound to blob 0, in order.
  void AddKernel(int64_t task_id, const std::string& op_name, const std::string& op_type,
                 const std::vector<std::pair<std::string, int64_t>>& inputs,
                 const std::vector<std::pair<std::string, int64_t>>& outputs,
                 const std::vector<std::pair<std::string, int64_t>>& int_attrs = {});
  TaskProto* task(int64_t task_id) { return &tasks_.at(task_id); }
  // Build marks every edge's consumer_sync as the compiler would
  // (common/edge_sync.h); without it the plan looks like an old one (every
  // edge waits for the producer's event).
  void MarkEdgeSync() { mark_edge_sync_ = true; }

  Plan Build(int64_t total_iters, int64_t seed = 1);

 private:
  std::map<int64_t, TaskProto> tasks_;
  std::vector<std::pair<int64_t, int64_t>> mutators_;
  std::map<int, int64_t> next_index_;  // per device index
  int64_t next_regst_ = 1;
  bool mark_edge_sync_ = false;
};

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_TESTING_TEST_PLAN_BUILDER_H_
