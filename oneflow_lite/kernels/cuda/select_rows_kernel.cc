// CUDA kernel of select_rows (ops/nn/select_rows_ops.cc): the rows of x whose
// mask is not zero, in order, with y's actual shape [K, ...] set by the host.
// K depends on the mask's values, so the kernel copies the mask into pinned
// host memory and synchronizes its stream (the op stalls its stream: it is
// meant for data and metrics, not for every layer; a plan with it is not
// graph-capturable anyway, its register being dynamic). The kept rows are
// then copied device to device in runs of consecutive rows, in stream
// order. Byte copies: every dtype of x the op allows.
#include <algorithm>

#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"
#include "oneflow_lite/kernels/cuda/cuda_kernel_util.h"

namespace oflite {
namespace cuda {
namespace {

class SelectRowsKernel final : public Kernel {
 public:
  ~SelectRowsKernel() override {
    if (mask_host_ != nullptr) cudaFreeHost(mask_host_);
  }

  Status Init(const KernelInitContext& ctx) override {
    auto mask = ctx.inputs.find("mask");
    if (mask == ctx.inputs.end() || mask->second.empty()) {
      return InvalidArgumentError("op '", ctx.op->name(), "' (select_rows): no mask input");
    }
    capacity_ = std::max<int64_t>(mask->second[0].ByteSize(), 1);
    if (ctx.device != nullptr) CUDA_RETURN_IF_ERROR(cudaSetDevice(ctx.device->device_index()));
    CUDA_RETURN_IF_ERROR(cudaHostAlloc(&mask_host_, static_cast<size_t>(capacity_),
                                       cudaHostAllocPortable));
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    ASSIGN_OR_RETURN(const CudaDeviceContext* cuda, CudaContextOf(*ctx));
    const Blob& x = ctx->Input("x");
    const Blob& mask = ctx->Input("mask");
    Blob* y = ctx->Output("y");
    const int64_t rows = x.shape().rank() > 0 ? x.shape().dim(0) : 0;
    if (mask.elem_count() != rows) {
      return ctx->Error("mask has ", mask.elem_count(), " elements for ", rows, " rows of x");
    }
    if (mask.ByteSize() > capacity_) {
      return ctx->Error("mask of ", mask.ByteSize(), " bytes exceeds the ", capacity_,
                        " bytes its kernel was initialized for");
    }
    cudaStream_t stream = cuda->stream();
    if (mask.ByteSize() > 0) {
      CUDA_LAUNCH_RETURN_IF_ERROR(*ctx, cudaMemcpyAsync(mask_host_, mask.raw(), mask.ByteSize(),
                                                        cudaMemcpyDeviceToHost, stream));
    }
    RETURN_IF_ERROR(cuda->Synchronize());
    const int64_t row_bytes = rows > 0 ? x.ByteSize() / rows : 0;
    const char* in = static_cast<const char*>(x.raw());
    char* out = static_cast<char*>(y->raw());
    int64_t kept = 0;
    int64_t row = 0;
    while (row < rows) {
      if (!nn::MaskKeepsRow(mask_host_, mask.dtype(), row)) {
        ++row;
        continue;
      }
      int64_t end = row + 1;
      while (end < rows && nn::MaskKeepsRow(mask_host_, mask.dtype(), end)) ++end;
      if (row_bytes > 0) {
        CUDA_LAUNCH_RETURN_IF_ERROR(
            *ctx, cudaMemcpyAsync(out + kept * row_bytes, in + row * row_bytes,
                                  (end - row) * row_bytes, cudaMemcpyDeviceToDevice, stream));
      }
      kept += end - row;
      row = end;
    }
    Shape shape = x.shape();
    if (shape.rank() > 0) shape.mutable_dim(0) = kept;
    y->set_shape(shape);
    return Status::OK();
  }

 private:
  void* mask_host_ = nullptr;
  int64_t capacity_ = 0;
};

REGISTER_KERNEL("select_rows", DEVICE_CUDA, DT_FLOAT, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CUDA, DT_DOUBLE, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CUDA, DT_INT32, SelectRowsKernel);
REGISTER_KERNEL("select_rows", DEVICE_CUDA, DT_INT64, SelectRowsKernel);

}  // namespace
}  // namespace cuda
}  // namespace oflite
