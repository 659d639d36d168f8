// Kernels: the device code of one op, registered by (op type, device, dtype).
//
// A Kernel object is created once per (task, op) when an actor is built from
// the plan (or by the reference executor) and lives as long as the actor, so
// it may keep state across iterations (a data loader's position, an RNG) and
// may allocate scratch memory in Init. Forward runs once per iteration on the
// actor's thread; the runtime never calls one kernel object from two threads
// at once. Blobs passed to Forward are owned by the caller and valid only
// during the call.
//
// Registration is one line next to the kernel class:
//   REGISTER_KERNEL("relu", DEVICE_CPU, DT_FLOAT, ReluKernel<float>);
// Libraries that register kernels must be linked with alwayslink = 1.
// The dtype key is KernelConf.dtype: by convention the dtype of the op's
// first input (or first output for ops without inputs).
#ifndef ONEFLOW_LITE_KERNELS_KERNEL_H_
#define ONEFLOW_LITE_KERNELS_KERNEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/device/device_context.h"
#include "proto/job.pb.h"

namespace oflite {

// Fixed facts a kernel may inspect once, at creation.
struct KernelInitContext {
  const OpConf* op = nullptr;
  // Physical (per-device) descs, by arg name.
  std::map<std::string, std::vector<TensorDesc>> inputs;
  std::map<std::string, std::vector<TensorDesc>> outputs;
  int64_t parallel_id = 0;   // this device's index in the op's placement
  int64_t parallel_num = 1;  // devices in the op's placement
  int64_t seed = 0;          // job seed (deterministic RNG for init, dropout, shuffle)
  const DeviceContext* device = nullptr;

  AttrView attrs() const { return AttrView(*op); }
  const TensorDesc& Input(const std::string& arg, int index = 0) const;
  const TensorDesc& Output(const std::string& arg, int index = 0) const;
};

// Per-call view of the blobs. Inputs listed in OpDef::mutable_inputs are
// writable through MutableInput.
class KernelContext {
 public:
  KernelContext(const OpConf& op, const DeviceContext* device, int64_t iteration)
      : op_(&op), device_(device), iteration_(iteration) {}

  const OpConf& op() const { return *op_; }
  AttrView attrs() const { return AttrView(*op_); }
  const DeviceContext* device() const { return device_; }
  // 0-based training iteration (for lr schedules, Adam bias correction, RNG).
  int64_t iteration() const { return iteration_; }

  int InputCount(const std::string& arg) const;
  const Blob& Input(const std::string& arg, int index = 0) const;
  Blob* MutableInput(const std::string& arg, int index = 0);
  bool HasInput(const std::string& arg) const { return InputCount(arg) > 0; }
  int OutputCount(const std::string& arg) const;
  Blob* Output(const std::string& arg, int index = 0);

  // Binding, used by the runtime / executor before each call: the k-th
  // BindInput of `arg` is Input(arg, k).
  void BindInput(const std::string& arg, Blob* blob) { Bind(arg, blob, &inputs_); }
  void BindOutput(const std::string& arg, Blob* blob) { Bind(arg, blob, &outputs_); }
  void set_iteration(int64_t it) { iteration_ = it; }
  // A context kept from call to call (the runtime binds once, at plan load)
  // only swaps the blobs: the k-th binding in the order they were made.
  int bound_input_count() const { return static_cast<int>(inputs_.size()); }
  int bound_output_count() const { return static_cast<int>(outputs_.size()); }
  void RebindInput(int k, Blob* blob) { inputs_[static_cast<size_t>(k)].blob = blob; }
  void RebindOutput(int k, Blob* blob) { outputs_[static_cast<size_t>(k)].blob = blob; }
  Blob* bound_output(int k) const { return outputs_[static_cast<size_t>(k)].blob; }

  template <typename... Args>
  Status Error(const Args&... args) const {
    return InvalidArgumentError("op '", op_->name(), "' (", op_->op_type(), ") at iteration ",
                                iteration_, ": ", args...);
  }

 private:
  // One bound blob: the `index`-th of `arg`. Ops have a handful of args, so
  // a flat list searched in order beats a map, and a kept context reuses it.
  struct Binding {
    std::string arg;
    int index = 0;
    Blob* blob = nullptr;
  };
  static void Bind(const std::string& arg, Blob* blob, std::vector<Binding>* bindings);
  // The binding of (arg, index), or null.
  static const Binding* Find(const std::vector<Binding>& bindings, const std::string& arg,
                             int index);
  static int Count(const std::vector<Binding>& bindings, const std::string& arg);

  const OpConf* op_;
  const DeviceContext* device_;
  int64_t iteration_;
  std::vector<Binding> inputs_;
  std::vector<Binding> outputs_;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Called once before the first Forward. Validate attributes, precompute,
  // allocate scratch.
  virtual Status Init(const KernelInitContext& ctx) { return Status::OK(); }
  // One iteration's work. Errors name the op and the iteration (ctx.Error).
  virtual Status Forward(KernelContext* ctx) = 0;
  // An error the device found in work of earlier Forward calls that no
  // Forward has reported yet. Device-side checks (a label out of range, a
  // non-finite scale) are read back late (kernels/cuda/cuda_kernel_util.h):
  // the kernel's next Forward reports them, and the runtime calls this once
  // the kernel's stream has finished all its work at the end of a run, so
  // that an error of the last iterations is not lost (also for replayed
  // graphs, whose iterations call no Forward). `ctx` names the op and the
  // last iteration run; it binds no blobs. Kernels that report in Forward
  // keep the default.
  virtual Status ReportDeferredErrors(const KernelContext& ctx) { return Status::OK(); }
};

using KernelFactory = std::function<std::unique_ptr<Kernel>()>;

// Creates the kernel for (op type, device, dtype) or NotFound naming all three
// and the op.
StatusOr<std::unique_ptr<Kernel>> CreateKernel(const OpConf& op, DeviceType device,
                                               DataType dtype);
bool HasKernel(const std::string& op_type, DeviceType device, DataType dtype);

// Creates the kernel and runs Init with `init`.
StatusOr<std::unique_ptr<Kernel>> CreateAndInitKernel(const KernelInitContext& init,
                                                      DeviceType device, DataType dtype);

class KernelRegistrar {
 public:
  KernelRegistrar(const std::string& op_type, DeviceType device, DataType dtype,
                  KernelFactory factory);
};

#define OFLITE_KERNEL_CONCAT_INNER(a, b) a##b
#define OFLITE_KERNEL_CONCAT(a, b) OFLITE_KERNEL_CONCAT_INNER(a, b)
#define REGISTER_KERNEL(op_type, device, dtype, ...)                                 \
  static ::oflite::KernelRegistrar OFLITE_KERNEL_CONCAT(oflite_kernel_, __COUNTER__)( \
      op_type, device, dtype, [] { return std::unique_ptr<::oflite::Kernel>(new __VA_ARGS__()); })

}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_KERNEL_H_
