// The signature of one kernel as the cost model sees it: what its time
// depends on. Two kernels with the same key take the same time on the same
// kind of machine, so `oflite profile` measures each key once and the
// simulator looks kernels up by it (proto/calibration.proto, KernelCost).
//
// Key text (stable; shown to people in calibration files):
//   "<op_type> <dtype> <device>/t<threads> in=<shape>,<shape> out=<shape> {<attrs>}"
// e.g. "matmul float cpu/t1 in=64x784,784x256 out=64x256 {transpose_b=0}".
// Shapes are the physical (per-device) shapes of the blobs the kernel is
// bound to, in binding order; attributes are the op's (sorted by key, as in
// the OpConf), with the ones that only name things left out.
#ifndef ONEFLOW_LITE_COST_KERNEL_KEY_H_
#define ONEFLOW_LITE_COST_KERNEL_KEY_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace cost {

// Every register desc of a plan by id, and every task by id (pointers into
// the plan, which must outlive the index).
class PlanIndex {
 public:
  explicit PlanIndex(const Plan& plan);
  const RegstDescProto* regst(int64_t regst_desc_id) const;
  const TaskProto* task(int64_t task_id) const;
  const Plan& plan() const { return *plan_; }
  // Tasks of every machine, in machine then task-id order.
  const std::vector<const TaskProto*>& tasks() const { return tasks_; }

 private:
  const Plan* plan_;
  std::unordered_map<int64_t, const RegstDescProto*> regsts_;
  std::unordered_map<int64_t, const TaskProto*> task_by_id_;
  std::vector<const TaskProto*> tasks_;
};

// The physical descs a kernel is bound to (inputs, outputs), in binding
// order. Errors name the op and the register desc when a binding points at
// no register of the plan.
struct KernelShapes {
  std::vector<TensorDescProto> inputs;
  std::vector<TensorDescProto> outputs;
};
StatusOr<KernelShapes> ShapesOfKernel(const KernelConf& kernel, const PlanIndex& index);

// The key of `kernel` run on a device of `device_type` with `threads`
// compute threads.
StatusOr<std::string> KernelKey(const KernelConf& kernel, DeviceType device_type, int threads,
                                const PlanIndex& index);

// Elements read and written (inputs + outputs), for KernelCost.elements.
int64_t KernelElements(const KernelShapes& shapes);

// The compute threads a CPU device of `machine` runs its kernels with, as the
// runtime gives them (docs/runtime.md, "CPU threads"): cpu_threads when set,
// else `host_cores` divided among its CPU devices (at least 1).
int CpuThreadsOf(const MachineProto& machine, int host_cores);

}  // namespace cost
}  // namespace oflite

#endif  // ONEFLOW_LITE_COST_KERNEL_KEY_H_
