// CudaDeviceContext: one actor thread's CUDA stream with its cuBLAS and cuDNN
// handles, bound to one device.
//
// Created by the runtime for each CUDA stream thread (Create blocks briefly
// while it initializes the device); kernels receive it as their
// DeviceContext and enqueue work on stream(). Not thread-safe: used only by
// the thread that owns it.
//
// The context is asynchronous (DeviceContext::IsAsync): kernels and copies
// only enqueue work. With a CudaCompletionQueue (the runtime passes its
// per-device queue) OnStreamDone records an event on the stream and the
// queue's poller runs the callback once the stream passed it, so the actor
// thread never waits for the GPU. Without a queue (tools, tests),
// OnStreamDone synchronizes the stream and calls back at once.
//
// The destructor synchronizes the stream, waits (bounded, 30 s) until every
// callback it handed to the queue has run, and frees the handles. The queue
// must outlive the context.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/device/device_context.h"

namespace oflite {

class CudaCompletionQueue;

class CudaDeviceContext final : public DeviceContext {
 public:
  // `queue` (not owned, may be null) makes the context asynchronous; it must
  // be a queue of the same device. `allow_tf32`: matmuls on this stream may
  // use TF32 tensor cores (DeviceBackendOptions::allow_tf32).
  static StatusOr<std::unique_ptr<CudaDeviceContext>> Create(int device_index,
                                                             CudaCompletionQueue* queue = nullptr,
                                                             bool allow_tf32 = false);
  ~CudaDeviceContext() override;

  DeviceType device_type() const override { return DEVICE_CUDA; }
  int device_index() const override { return device_index_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  bool allow_tf32() const { return allow_tf32_; }

  // Makes this context's device current on the calling thread.
  Status Activate() const;
  Status BindToCurrentThread() const override { return Activate(); }
  bool IsAsync() const override { return true; }
  Status OnStreamDone(const std::string& label, DoneCallback done) const override;
  // cudaMemcpyAsync on stream(); the host side should be pinned memory (a
  // pageable host side makes the copy synchronous, still correct).
  Status Memcpy(void* dst, const void* src, int64_t bytes, CopyKind kind) const override;
  // Blocks until all work enqueued on the stream is done.
  Status Synchronize() const override;
  // CUDA Graphs: stream capture in thread-local mode (a forbidden call on
  // this thread, e.g. a synchronize, invalidates the capture and EndCapture
  // fails), instantiated at EndCapture, launched with cudaGraphLaunch.
  bool SupportsGraphs() const override { return true; }
  Status BeginCapture() const override;
  StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() const override;
  Status LaunchGraph(const DeviceGraph& graph) const override;

 private:
  // Callbacks handed to the queue and not yet run; shared with them so a
  // late callback never touches a destroyed context.
  struct Outstanding {
    std::mutex mutex;
    std::condition_variable zero;
    int count = 0;
  };

  CudaDeviceContext(int device_index, CudaCompletionQueue* queue)
      : device_index_(device_index), queue_(queue), outstanding_(std::make_shared<Outstanding>()) {}

  int device_index_;
  CudaCompletionQueue* queue_;
  std::shared_ptr<Outstanding> outstanding_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  bool allow_tf32_ = false;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_DEVICE_CONTEXT_H_
