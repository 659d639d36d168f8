// CudaDeviceContext: one actor thread's CUDA stream with its cuBLAS and cuDNN
// handles, bound to one device.
//
// Created by the runtime for each CUDA stream thread (Create blocks briefly
// while it initializes the device); kernels receive it as their
// DeviceContext and enqueue work on stream(). Not thread-safe: used only by
// the thread that owns it. The destructor synchronizes the stream and frees
// the handles.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_

#include <memory>

#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/device/device_context.h"

namespace oflite {

class CudaDeviceContext final : public DeviceContext {
 public:
  static StatusOr<std::unique_ptr<CudaDeviceContext>> Create(int device_index);
  ~CudaDeviceContext() override;

  DeviceType device_type() const override { return DEVICE_CUDA; }
  int device_index() const override { return device_index_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

  // Makes this context's device current on the calling thread.
  Status Activate() const;
  // Blocks until all work enqueued on the stream is done.
  Status Synchronize() const;

 private:
  explicit CudaDeviceContext(int device_index) : device_index_(device_index) {}

  int device_index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_
