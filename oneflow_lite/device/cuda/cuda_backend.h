// CudaBackend: the CUDA DeviceBackend (device/device_backend.h) the runtime
// uses for CUDA zones and CUDA stream threads.
//
//   device zones       one cudaMalloc per zone (CudaMemoryBlock::AllocateDevice)
//   pinned-host zones  one portable cudaHostAlloc per zone
//   stream contexts    a CudaDeviceContext per stream thread (own stream,
//                      cuBLAS and cuDNN handles), asynchronous through one
//                      CudaCompletionQueue per device, created on first use
//
// Linking //oneflow_lite/device/cuda:cuda_backend (alwayslink) registers it
// for DEVICE_CUDA. One object per runtime; it owns the completion queues, so
// it must outlive every context it created. CreateStreamContext and the
// allocations are thread-safe (one mutex around the queue map).
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_BACKEND_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_BACKEND_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oneflow_lite/device/cuda/cuda_completion_queue.h"
#include "oneflow_lite/device/device_backend.h"

namespace oflite {

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(const DeviceBackendOptions& options = DeviceBackendOptions())
      : options_(options) {}
  ~CudaBackend() override;

  DeviceType device_type() const override { return DEVICE_CUDA; }
  StatusOr<std::unique_ptr<MemoryBlock>> AllocateDevice(int device_index, int64_t bytes,
                                                        const std::string& zone_name) override;
  StatusOr<std::unique_ptr<MemoryBlock>> AllocatePinnedHost(int64_t bytes,
                                                            const std::string& zone_name) override;
  StatusOr<std::unique_ptr<DeviceContext>> CreateStreamContext(int device_index,
                                                               const std::string& label) override;

 private:
  StatusOr<CudaCompletionQueue*> QueueOf(int device_index);

  const DeviceBackendOptions options_;  // handed to every stream context
  std::mutex mutex_;
  std::map<int, std::unique_ptr<CudaCompletionQueue>> queues_;  // by device index
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_BACKEND_H_
