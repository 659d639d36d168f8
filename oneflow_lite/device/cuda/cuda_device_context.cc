#include "oneflow_lite/device/cuda/cuda_device_context.h"

namespace oflite {

StatusOr<std::unique_ptr<CudaDeviceContext>> CudaDeviceContext::Create(int device_index) {
  const int count = CudaDeviceCount();
  if (device_index < 0 || device_index >= count) {
    return InvalidArgumentError("CUDA device ", device_index, " does not exist (this machine has ",
                                count, " CUDA device(s))");
  }
  std::unique_ptr<CudaDeviceContext> ctx(new CudaDeviceContext(device_index));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&ctx->cublas_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(ctx->cublas_, ctx->stream_));
  CUDNN_RETURN_IF_ERROR(cudnnCreate(&ctx->cudnn_));
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(ctx->cudnn_, ctx->stream_));
  return ctx;
}

CudaDeviceContext::~CudaDeviceContext() {
  if (stream_ != nullptr) {
    cudaSetDevice(device_index_);
    cudaStreamSynchronize(stream_);
  }
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaDeviceContext::Activate() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index_));
  return Status::OK();
}

Status CudaDeviceContext::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::OK();
}

}  // namespace oflite
