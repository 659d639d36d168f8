// CUDA iota and comparison kernels: one thread per output element
// (grid-stride). NaN compares false except under not_equal, as on the CPU.
#include "oneflow_lite/kernels/cuda/compare_launch.h"
#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"

namespace oflite {
namespace cuda {
namespace {

template <typename T>
__device__ inline bool Compare(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::kEqual: return a == b;
    case CompareOp::kNotEqual: return a != b;
    case CompareOp::kLess: return a < b;
    case CompareOp::kLessEqual: return a <= b;
    case CompareOp::kGreater: return a > b;
    case CompareOp::kGreaterEqual: return a >= b;
  }
  return false;
}

template <typename T>
__global__ void CompareKernel(CompareOp op, const T* x, const T* y, unsigned char* out,
                              StridedIndex index, int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    out[i] = Compare(op, x[OperandOffset(index, 0, i)], y[OperandOffset(index, 1, i)]) ? 1 : 0;
  }
}

template <typename T>
__global__ void IotaKernel(T* out, int64_t size, int64_t inner, int64_t n) {
  OFLITE_GRID_LOOP(i, n) { out[i] = static_cast<T>((i / inner) % size); }
}

template <typename T>
cudaError_t Compare(CompareOp op, const void* x, const void* y, unsigned char* out,
                    const StridedIndex& index, int64_t n, cudaStream_t stream) {
  CompareKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, static_cast<const T*>(x),
                                                       static_cast<const T*>(y), out, index, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Iota(void* out, int64_t size, int64_t inner, int64_t n, cudaStream_t stream) {
  IotaKernel<<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<T*>(out), size, inner, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCompare(CompareOp op, ValueKind kind, const void* x, const void* y,
                          unsigned char* out, const StridedIndex& index, cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  switch (kind) {
    case ValueKind::kF32: return Compare<float>(op, x, y, out, index, n, stream);
    case ValueKind::kF64: return Compare<double>(op, x, y, out, index, n, stream);
    case ValueKind::kI32: return Compare<int32_t>(op, x, y, out, index, n, stream);
    case ValueKind::kI64: return Compare<int64_t>(op, x, y, out, index, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchIota(ValueKind kind, void* out, int64_t outer, int64_t size, int64_t inner,
                       cudaStream_t stream) {
  const int64_t n = outer * size * inner;
  if (n <= 0) return cudaSuccess;
  switch (kind) {
    case ValueKind::kF32: return Iota<float>(out, size, inner, n, stream);
    case ValueKind::kF64: return Iota<double>(out, size, inner, n, stream);
    case ValueKind::kI32: return Iota<int32_t>(out, size, inner, n, stream);
    case ValueKind::kI64: return Iota<int64_t>(out, size, inner, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace oflite
