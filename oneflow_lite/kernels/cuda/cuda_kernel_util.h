// Host-side helpers for the CUDA kernels: the CUDA context of a kernel call,
// StridedIndex construction from shapes, and DeviceErrorSlot, which carries
// bad-input reports (labels, indices, non-finite scales) from device code
// back to the kernel.
//
// Errors found on the device are reported late: device code records the
// first offender in mapped pinned memory (claim slot[0], write position and
// value, then mark the report complete in slot[3]), and a later Forward
// turns it into a Status naming the op ("during an earlier call"). Earlier
// calls' work may still be running when Forward is called again (the
// runtime enqueues acts ahead on a stream), so TakeError reads only
// complete reports and clears the mark before the claim; a report of work
// still in flight is returned by a later call. What no Forward reported is
// reported once the stream has finished all work, at the end of a run
// (Kernel::ReportDeferredErrors, which KernelWithErrorSlot implements with
// TakeFinalError), so an offender in the last iterations, or in replayed
// graph iterations, which call no Forward, is not lost.
#ifndef ONEFLOW_LITE_KERNELS_CUDA_CUDA_KERNEL_UTIL_H_
#define ONEFLOW_LITE_KERNELS_CUDA_CUDA_KERNEL_UTIL_H_

#include <string>
#include <vector>

#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/kernels/cuda/launch_common.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace cuda {

// The CUDA context of a call, or an error naming the op if the kernel was
// given another device's context.
StatusOr<const CudaDeviceContext*> CudaContextOf(const KernelContext& ctx);
StatusOr<const CudaDeviceContext*> CudaContextOf(const KernelInitContext& ctx);

std::vector<int64_t> RowMajorStrides(const Shape& shape);

// Strides of `operand` read along `out`'s dims with numpy broadcasting (0 on
// the dims where the operand is absent or of size 1).
std::vector<int64_t> BroadcastStrides(const Shape& operand, const Shape& out);

// An iteration space over `dims` with operand strides given per operand
// (each of size dims.size()); error if rank > kMaxRank.
StatusOr<StridedIndex> MakeIndex(const std::vector<int64_t>& dims,
                                 const std::vector<std::vector<int64_t>>& strides,
                                 const std::vector<int64_t>& bases = {});

class DeviceErrorSlot {
 public:
  DeviceErrorSlot() = default;
  ~DeviceErrorSlot();
  DeviceErrorSlot(const DeviceErrorSlot&) = delete;
  DeviceErrorSlot& operator=(const DeviceErrorSlot&) = delete;

  // Allocates the mapped pinned slot (once). `what` says what the device
  // code checks, for the errors ("label outside [0, classes)").
  Status Init(std::string what);
  ErrorSlot* device() const { return device_; }
  // From Forward: OK if no complete report is recorded; otherwise clears
  // the slot and returns ctx.Error(what, " at position ", position,
  // " (value ", value, "; found by the device during an earlier call)").
  Status TakeError(const KernelContext& ctx) { return Take(ctx, "during an earlier call"); }
  // The same once the stream has finished every call (the end of a run).
  Status TakeFinalError(const KernelContext& ctx) {
    return Take(ctx, "in a call whose error no later call reported");
  }

 private:
  Status Take(const KernelContext& ctx, const char* when);

  std::string what_;
  ErrorSlot* host_ = nullptr;
  ErrorSlot* device_ = nullptr;
};

// A kernel whose device code reports bad input through a DeviceErrorSlot:
// Forward calls slot_.TakeError first, and the runtime's end-of-run call
// reports what is left.
class KernelWithErrorSlot : public Kernel {
 public:
  Status ReportDeferredErrors(const KernelContext& ctx) override {
    return slot_.TakeFinalError(ctx);
  }

 protected:
  DeviceErrorSlot slot_;
};

// Returns ctx.Error naming the launcher if err != cudaSuccess.
Status LaunchStatus(const KernelContext& ctx, cudaError_t err, const char* launcher);

}  // namespace cuda
}  // namespace oflite

#define CUDA_LAUNCH_RETURN_IF_ERROR(ctx, call) \
  RETURN_IF_ERROR(::oflite::cuda::LaunchStatus((ctx), (call), #call))

#endif  // ONEFLOW_LITE_KERNELS_CUDA_CUDA_KERNEL_UTIL_H_
