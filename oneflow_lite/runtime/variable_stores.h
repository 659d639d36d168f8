// VariableStores for the runtime's variables (runtime_hooks.h):
//
// CheckpointVariableStore saves snapshots as checkpoints on disk
// (<save_root>/iter-<N>, oneflow_lite/checkpoint, assembled from the device
// parts by ShardedCheckpointStore), restores from a checkpoint directory on
// resume, and keeps the logical value of every variable after the last
// iteration in memory (final_variables), e.g. for evaluation.
//
// MemoryVariableStore restores variables from logical values in memory
// (each device gets its part) and ignores saves: how an evaluation plan gets
// the trained weights.
//
// Both are thread-safe (actor threads call them concurrently).
#ifndef ONEFLOW_LITE_RUNTIME_VARIABLE_STORES_H_
#define ONEFLOW_LITE_RUNTIME_VARIABLE_STORES_H_

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "oneflow_lite/checkpoint/sharded_store.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/runtime/runtime_hooks.h"
#include "proto/plan.pb.h"

namespace oflite {

// Variable op name -> logical desc, for every TASK_VARIABLE of the plan (all
// machines). Logical descs come from Plan.variable (written by the
// compiler); InvalidArgument naming the variable and its task when it is
// missing there.
StatusOr<std::map<std::string, TensorDesc>> PlanVariables(const Plan& plan);

// The part layout of a variable part (split axis of its first SBP level).
PartLayout LayoutOf(const VariablePart& part);

class CheckpointVariableStore final : public VariableStore {
 public:
  struct Options {
    std::string save_root;    // empty: snapshots are not written to disk
    std::string restore_dir;  // empty: variables run their initializers
    int64_t final_iteration = 0;  // snapshots of this iteration are kept in memory
    std::map<std::string, TensorDesc> variables;  // from PlanVariables
  };
  explicit CheckpointVariableStore(Options options);

  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override;
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override;

  // Logical values after final_iteration (complete once the run finished).
  std::map<std::string, HostTensor> TakeFinalVariables();

 private:
  const Options options_;
  ShardedCheckpointStore disk_;
  std::mutex mutex_;
  std::map<std::string, HostTensor> final_;  // guarded by mutex_
};

class MemoryVariableStore final : public VariableStore {
 public:
  explicit MemoryVariableStore(const std::map<std::string, HostTensor>* variables)
      : variables_(variables) {}
  // NotFound naming the variable when it is not in the map; InvalidArgument
  // on a dtype/shape mismatch.
  StatusOr<bool> Restore(const VariablePart& part, Blob* blob) override;
  Status Save(const VariablePart& part, int64_t completed_iters, const Blob& blob) override {
    return Status::OK();
  }

 private:
  const std::map<std::string, HostTensor>* variables_;  // not owned, read-only
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_VARIABLE_STORES_H_
