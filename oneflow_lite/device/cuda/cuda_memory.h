// Device and pinned-host memory blocks for the runtime's memory zones.
//
// The memory plan asks for one block per zone; a CUDA device zone is one
// cudaMalloc on its device (never managed memory), a pinned-host zone (the
// host side of H2D/D2H copies and cross-machine registers) one cudaHostAlloc
// (portable, so every device's copy engine can read it). Both are zero-filled
// at creation, and the zeroing has finished when Create returns (a device
// zone's cudaMemset runs on the legacy stream, which the runtime's
// non-blocking streams would not wait for). A failure is ResourceExhausted naming the zone and the size.
// The blocks own their memory and free it in the destructor; they are
// immutable after Create and may be read from any thread.
#ifndef ONEFLOW_LITE_DEVICE_CUDA_CUDA_MEMORY_H_
#define ONEFLOW_LITE_DEVICE_CUDA_CUDA_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {

class CudaMemoryBlock {
 public:
  enum class Kind { kDevice, kPinnedHost };

  // `zone_name` only labels errors ("m0/cuda:1").
  static StatusOr<std::unique_ptr<CudaMemoryBlock>> AllocateDevice(int device_index, int64_t bytes,
                                                                    const std::string& zone_name);
  static StatusOr<std::unique_ptr<CudaMemoryBlock>> AllocatePinnedHost(
      int64_t bytes, const std::string& zone_name);
  ~CudaMemoryBlock();
  CudaMemoryBlock(const CudaMemoryBlock&) = delete;
  CudaMemoryBlock& operator=(const CudaMemoryBlock&) = delete;

  char* data() const { return data_; }
  int64_t size() const { return size_; }
  Kind kind() const { return kind_; }

 private:
  CudaMemoryBlock(Kind kind, int device_index, char* data, int64_t size)
      : kind_(kind), device_index_(device_index), data_(data), size_(size) {}

  Kind kind_;
  int device_index_;
  char* data_;
  int64_t size_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_DEVICE_CUDA_CUDA_MEMORY_H_
