// Device-side helpers shared by the .cu files: launch geometry, grid-stride
// loops, StridedIndex offsets, block reductions and the error slot.
#ifndef ONEFLOW_LITE_KERNELS_CUDA_CUDA_LAUNCH_UTIL_CUH_
#define ONEFLOW_LITE_KERNELS_CUDA_CUDA_LAUNCH_UTIL_CUH_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

constexpr int kThreads = 256;

inline int BlocksFor(int64_t n) {
  const int64_t want = (n + kThreads - 1) / kThreads;
  return static_cast<int>(want < 1 ? 1 : (want > 8192 ? 8192 : want));
}

#define OFLITE_GRID_LOOP(i, n)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The logistic function 1 / (1 + e^-x) (silu, binary cross-entropy).
__device__ inline float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// Offset of flat (row-major) element `flat` of index's space in operand k.
// With I = uint32_t (a space of fewer than 2^31 elements) the divisions are
// 32-bit ones, several times cheaper on the GPU than 64-bit ones; each dim
// costs one division (the remainder from the quotient).
template <typename I = int64_t>
__device__ inline int64_t OperandOffset(const StridedIndex& index, int k, I flat) {
  int64_t offset = index.base[k];
  for (int d = index.rank - 1; d >= 0; --d) {
    const I dim = static_cast<I>(index.dims[d]);
    const I quotient = flat / dim;
    offset += static_cast<int64_t>(flat - quotient * dim) * index.strides[k][d];
    flat = quotient;
  }
  return offset;
}

// Whether a space of n elements may be walked with 32-bit indices (the
// grid-stride sum stays below 2^32).
inline bool FitsIndex32(int64_t n) { return n < (int64_t{1} << 31); }

// OFLITE_GRID_LOOP with index type I (uint32_t or int64_t, WithIndexType).
#define OFLITE_GRID_LOOP_AS(I, i, n)                                          \
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<I>(blockDim.x) * gridDim.x)

// Calls launch(I{}) with I = uint32_t when n elements fit 32-bit indices,
// else int64_t: a launcher's kernel template then takes `decltype(zero)`.
template <typename Launch>
void WithIndexType(int64_t n, Launch launch) {
  if (FitsIndex32(n)) {
    launch(uint32_t{0});
  } else {
    launch(int64_t{0});
  }
}

// Sum of `value` over the block (blockDim.x a multiple of 32, <= 1024);
// every thread gets the result.
template <typename T>
__device__ inline T BlockSum(T value) {
  __shared__ T partial[32];
  __shared__ T total;
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial/total may still be read by a previous call
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : T(0);
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    if (lane == 0) total = value;
  }
  __syncthreads();
  return total;
}

template <typename T>
__device__ inline T BlockMax(T value) {
  __shared__ T partial[32];
  __shared__ T total;
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other = __shfl_down_sync(0xffffffffu, value, offset);
    value = other > value ? other : value;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : partial[0];
    for (int offset = 16; offset > 0; offset /= 2) {
      const T other = __shfl_down_sync(0xffffffffu, value, offset);
      value = other > value ? other : value;
    }
    if (lane == 0) total = value;
  }
  __syncthreads();
  return total;
}

// Threads per block for a per-row reduction over `cols` elements.
inline int RowThreads(int64_t cols) {
  int threads = 32;
  while (threads < 1024 && threads < cols) threads *= 2;
  return threads > 256 ? 256 : threads;
}

// Records the first bad input (position, value) in the slot.
__device__ inline void ReportError(ErrorSlot* slot, int64_t position, int64_t value) {
  if (slot == nullptr) return;
  if (atomicCAS(reinterpret_cast<unsigned long long*>(slot), 0ull, 1ull) == 0ull) {
    slot[1] = position;
    slot[2] = value;
    __threadfence_system();  // position and value before the "complete" mark
    *reinterpret_cast<volatile ErrorSlot*>(slot + 3) = 1;
    __threadfence_system();
  }
}

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_CUDA_LAUNCH_UTIL_CUH_
