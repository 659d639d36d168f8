#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"

#include <atomic>
#include <cstring>
#include <utility>

namespace oflite {
namespace cuda {
namespace {

StatusOr<const CudaDeviceContext*> Downcast(const DeviceContext* device, const OpConf& op) {
  if (device == nullptr || device->device_type() != DEVICE_CUDA) {
    return InvalidArgumentError("op '", op.name(), "' (", op.op_type(),
                                "): CUDA kernel called without a CUDA device context");
  }
  return static_cast<const CudaDeviceContext*>(device);
}

}  // namespace

StatusOr<const CudaDeviceContext*> CudaContextOf(const KernelContext& ctx) {
  return Downcast(ctx.device(), ctx.op());
}

StatusOr<const CudaDeviceContext*> CudaContextOf(const KernelInitContext& ctx) {
  return Downcast(ctx.device, *ctx.op);
}

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int64_t i = shape.rank() - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape.dim(i + 1);
  return strides;
}

std::vector<int64_t> BroadcastStrides(const Shape& operand, const Shape& out) {
  std::vector<int64_t> strides(out.rank(), 0);
  const std::vector<int64_t> contiguous = RowMajorStrides(operand);
  const int64_t shift = out.rank() - operand.rank();
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (operand.dim(i) != 1) strides[i + shift] = contiguous[i];
  }
  return strides;
}

StatusOr<StridedIndex> MakeIndex(const std::vector<int64_t>& dims,
                                 const std::vector<std::vector<int64_t>>& strides,
                                 const std::vector<int64_t>& bases) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgumentError("rank ", dims.size(), " exceeds the CUDA kernels' limit of ",
                                kMaxRank);
  }
  CHECK_LE(strides.size(), static_cast<size_t>(kMaxOperands));
  StridedIndex index;
  index.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) index.dims[d] = dims[d];
  for (size_t k = 0; k < strides.size(); ++k) {
    CHECK_EQ(strides[k].size(), dims.size());
    for (size_t d = 0; d < dims.size(); ++d) index.strides[k][d] = strides[k][d];
  }
  for (size_t k = 0; k < bases.size() && k < static_cast<size_t>(kMaxOperands); ++k) {
    index.base[k] = bases[k];
  }
  return index;
}

DeviceErrorSlot::~DeviceErrorSlot() {
  if (host_ != nullptr) cudaFreeHost(host_);
}

Status DeviceErrorSlot::Init(std::string what) {
  what_ = std::move(what);
  if (host_ != nullptr) return Status::OK();
  void* host = nullptr;
  CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host, 4 * sizeof(ErrorSlot), cudaHostAllocMapped));
  host_ = static_cast<ErrorSlot*>(host);
  std::memset(host_, 0, 4 * sizeof(ErrorSlot));
  void* device = nullptr;
  CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device, host, 0));
  device_ = static_cast<ErrorSlot*>(device);
  return Status::OK();
}

Status DeviceErrorSlot::Take(const KernelContext& ctx, const char* when) {
  if (host_ == nullptr) return Status::OK();
  volatile ErrorSlot* slot = host_;
  // slot[0]: claimed by a reporting thread; slot[3]: its report is written.
  // Work of earlier calls may still run (stream-ordered actors enqueue the
  // next act before the previous one finished), so a claimed but not yet
  // complete report is left for a later call, and only a complete one is
  // read and cleared (the mark first, so a new report cannot be half-seen).
  if (slot[0] == 0 || slot[3] == 0) return Status::OK();
  std::atomic_thread_fence(std::memory_order_acquire);
  const long long position = slot[1], value = slot[2];
  slot[3] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  slot[0] = 0;
  return ctx.Error(what_, " at position ", position, " (value ", value, "; found by the device ",
                   when, ")");
}

Status LaunchStatus(const KernelContext& ctx, cudaError_t err, const char* launcher) {
  if (err == cudaSuccess) return Status::OK();
  return ctx.Error("CUDA launch failed: ", launcher, ": ", cudaGetErrorString(err));
}

}  // namespace cuda
}  // namespace oflite
