#include "oneflow_lite/device/cuda/cuda_memory.h"

#include <cstring>

#include "oneflow_lite/device/cuda/cuda_util.h"

namespace oflite {

StatusOr<std::unique_ptr<CudaMemoryBlock>> CudaMemoryBlock::AllocateDevice(
    int device_index, int64_t bytes, const std::string& zone_name) {
  if (bytes < 0) return InvalidArgumentError("memory zone ", zone_name, ": negative size");
  const int count = CudaDeviceCount();
  if (device_index < 0 || device_index >= count) {
    return InvalidArgumentError("memory zone ", zone_name, ": CUDA device ", device_index,
                                " does not exist (this machine has ", count, ")");
  }
  Status status = CudaStatus(cudaSetDevice(device_index), "cudaSetDevice", __FILE__, __LINE__);
  if (!status.ok()) return status.WithContext("memory zone " + zone_name);
  void* data = nullptr;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&data, static_cast<size_t>(bytes));
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state
      return ResourceExhaustedError("memory zone ", zone_name, ": cudaMalloc of ", bytes,
                                    " bytes on cuda:", device_index, " failed: ",
                                    cudaGetErrorString(err));
    }
    // cudaMemset runs on the legacy default stream, which the runtime's
    // non-blocking work streams do not wait for: finish it before the zone
    // is handed out, or a first kernel could read (or be overwritten by)
    // the zeroing.
    status = CudaStatus(cudaMemset(data, 0, static_cast<size_t>(bytes)), "cudaMemset", __FILE__,
                        __LINE__);
    if (status.ok()) {
      status = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize", __FILE__, __LINE__);
    }
    if (!status.ok()) {
      cudaFree(data);
      return status.WithContext("memory zone " + zone_name);
    }
  }
  return std::unique_ptr<CudaMemoryBlock>(
      new CudaMemoryBlock(Kind::kDevice, device_index, static_cast<char*>(data), bytes));
}

StatusOr<std::unique_ptr<CudaMemoryBlock>> CudaMemoryBlock::AllocatePinnedHost(
    int64_t bytes, const std::string& zone_name) {
  if (bytes < 0) return InvalidArgumentError("memory zone ", zone_name, ": negative size");
  void* data = nullptr;
  if (bytes > 0) {
    const cudaError_t err = cudaHostAlloc(&data, static_cast<size_t>(bytes), cudaHostAllocPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return ResourceExhaustedError("memory zone ", zone_name, ": cudaHostAlloc of ", bytes,
                                    " pinned bytes failed: ", cudaGetErrorString(err));
    }
    std::memset(data, 0, static_cast<size_t>(bytes));
  }
  return std::unique_ptr<CudaMemoryBlock>(
      new CudaMemoryBlock(Kind::kPinnedHost, -1, static_cast<char*>(data), bytes));
}

CudaMemoryBlock::~CudaMemoryBlock() {
  if (data_ == nullptr) return;
  if (kind_ == Kind::kDevice) {
    cudaSetDevice(device_index_);
    cudaFree(data_);
  } else {
    cudaFreeHost(data_);
  }
}

}  // namespace oflite
