#include "oneflow_lite/device/cuda/cuda_device_context.h"

#include <chrono>
#include <cstdio>

#include "oneflow_lite/device/cuda/cuda_completion_queue.h"

namespace oflite {
namespace {

constexpr std::chrono::seconds kCallbackWait(30);

cudaMemcpyKind ToCudaKind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToHost: return cudaMemcpyHostToHost;
    case CopyKind::kHostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost: return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

// An instantiated CUDA graph (cudaGraphExec_t) and the stream it was
// captured on.
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(cudaStream_t stream, cudaGraphExec_t exec) : stream_(stream), exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  cudaStream_t stream() const { return stream_; }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
};

}  // namespace

StatusOr<std::unique_ptr<CudaDeviceContext>> CudaDeviceContext::Create(int device_index,
                                                                       CudaCompletionQueue* queue,
                                                                       bool allow_tf32) {
  const int count = CudaDeviceCount();
  if (device_index < 0 || device_index >= count) {
    return InvalidArgumentError("CUDA device ", device_index, " does not exist (this machine has ",
                                count, " CUDA device(s))");
  }
  std::unique_ptr<CudaDeviceContext> ctx(new CudaDeviceContext(device_index, queue));
  ctx->allow_tf32_ = allow_tf32;
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
  {
    std::unique_lock<std::mutex> lock(outstanding_->mutex);
    if (!outstanding_->zero.wait_for(lock, kCallbackWait,
                                     [this] { return outstanding_->count == 0; })) {
      std::fprintf(stderr,
                   "CudaDeviceContext of cuda:%d: %d completion callback(s) still pending after "
                   "%lld s\n",
                   device_index_, outstanding_->count,
                   static_cast<long long>(kCallbackWait.count()));
    }
  }
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaDeviceContext::Activate() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index_));
  return Status::OK();
}

Status CudaDeviceContext::OnStreamDone(const std::string& label, DoneCallback done) const {
  if (queue_ == nullptr) {
    Status status = Synchronize();
    done(status.ok() ? status : status.WithContext("actor '" + label + "'"));
    return Status::OK();
  }
  {
    std::lock_guard<std::mutex> lock(outstanding_->mutex);
    ++outstanding_->count;
  }
  std::shared_ptr<Outstanding> outstanding = outstanding_;
  Status enqueued = queue_->Enqueue(
      stream_, label, [outstanding, done = std::move(done)](const Status& status) {
        done(status);
        std::lock_guard<std::mutex> lock(outstanding->mutex);
        if (--outstanding->count == 0) outstanding->zero.notify_all();
      });
  if (!enqueued.ok()) {
    std::lock_guard<std::mutex> lock(outstanding_->mutex);
    if (--outstanding_->count == 0) outstanding_->zero.notify_all();
  }
  return enqueued;
}

Status CudaDeviceContext::Memcpy(void* dst, const void* src, int64_t bytes, CopyKind kind) const {
  if (bytes <= 0) return Status::OK();
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), ToCudaKind(kind), stream_));
  return Status::OK();
}

Status CudaDeviceContext::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::OK();
}

Status CudaDeviceContext::BeginCapture() const {
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  return Status::OK();
}

StatusOr<std::unique_ptr<DeviceGraph>> CudaDeviceContext::EndCapture() const {
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error is reported here, not sticky
    return CudaStatus(ended, "cudaStreamEndCapture", __FILE__, __LINE__);
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(made, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  return std::unique_ptr<DeviceGraph>(new CudaGraph(stream_, exec));
}

Status CudaDeviceContext::LaunchGraph(const DeviceGraph& graph) const {
  const auto* cuda = dynamic_cast<const CudaGraph*>(&graph);
  if (cuda == nullptr || cuda->stream() != stream_) {
    return InternalError("cuda:", device_index_, ": LaunchGraph of a graph captured elsewhere");
  }
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(cuda->exec(), stream_));
  return Status::OK();
}

}  // namespace oflite
