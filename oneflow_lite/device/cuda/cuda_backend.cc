#include "oneflow_lite/device/cuda/cuda_backend.h"

#include "oneflow_lite/device/cuda/cuda_device_context.h"
#include "oneflow_lite/device/cuda/cuda_memory.h"

namespace oflite {
namespace {

class CudaBlock final : public MemoryBlock {
 public:
  explicit CudaBlock(std::unique_ptr<CudaMemoryBlock> block) : block_(std::move(block)) {}
  char* data() const override { return block_->data(); }
  int64_t size() const override { return block_->size(); }

 private:
  std::unique_ptr<CudaMemoryBlock> block_;
};

const DeviceBackendRegistrar kRegisterCuda(
    DEVICE_CUDA,
    [](const DeviceBackendOptions& options) -> StatusOr<std::unique_ptr<DeviceBackend>> {
      return std::unique_ptr<DeviceBackend>(new CudaBackend(options));
    });

}  // namespace

CudaBackend::~CudaBackend() {
  // Queues run their still-pending callbacks (Cancelled) as they go.
  std::lock_guard<std::mutex> lock(mutex_);
  queues_.clear();
}

StatusOr<std::unique_ptr<MemoryBlock>> CudaBackend::AllocateDevice(int device_index,
                                                                   int64_t bytes,
                                                                   const std::string& zone_name) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaMemoryBlock> block,
                   CudaMemoryBlock::AllocateDevice(device_index, bytes, zone_name));
  return std::unique_ptr<MemoryBlock>(new CudaBlock(std::move(block)));
}

StatusOr<std::unique_ptr<MemoryBlock>> CudaBackend::AllocatePinnedHost(
    int64_t bytes, const std::string& zone_name) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaMemoryBlock> block,
                   CudaMemoryBlock::AllocatePinnedHost(bytes, zone_name));
  return std::unique_ptr<MemoryBlock>(new CudaBlock(std::move(block)));
}

StatusOr<CudaCompletionQueue*> CudaBackend::QueueOf(int device_index) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<CudaCompletionQueue>& queue = queues_[device_index];
  if (queue == nullptr) {
    StatusOr<std::unique_ptr<CudaCompletionQueue>> created =
        CudaCompletionQueue::Create(device_index);
    if (!created.ok()) {
      queues_.erase(device_index);
      return created.status();
    }
    queue = std::move(created).value();
  }
  return queue.get();
}

StatusOr<std::unique_ptr<DeviceContext>> CudaBackend::CreateStreamContext(
    int device_index, const std::string& label) {
  const std::string what = "stream " + label;
  StatusOr<CudaCompletionQueue*> queue = QueueOf(device_index);
  if (!queue.ok()) return queue.status().WithContext(what);
  StatusOr<std::unique_ptr<CudaDeviceContext>> context =
      CudaDeviceContext::Create(device_index, *queue, options_.allow_tf32);
  if (!context.ok()) return context.status().WithContext(what);
  return std::unique_ptr<DeviceContext>(std::move(context).value());
}

}  // namespace oflite
