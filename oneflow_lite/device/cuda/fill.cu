#include "oneflow_lite/device/cuda/fill.h"

namespace oflite {
namespace {

__global__ void FillKernel(float* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    out[i] = value;
  }
}

}  // namespace

cudaError_t LaunchFill(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 4096 ? want : 4096);
  FillKernel<<<blocks, threads, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

}  // namespace oflite
