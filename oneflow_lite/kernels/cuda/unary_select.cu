// CUDA kernels of unary_select_launch.h: the unary math ops and their
// gradients, maximum/minimum(+grad) and where. One thread per element
// (grid-stride); the binary ones read their operands through a StridedIndex.
#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"
#include "oneflow_lite/kernels/cuda/unary_select_launch.h"

namespace oflite {
namespace cuda {
namespace {

__device__ inline float ApplyMap(MapOp op, float x, float p0, float p1) {
  switch (op) {
    case MapOp::kExp:
      return expf(x);
    case MapOp::kLog:
      return logf(x);
    case MapOp::kSqrt:
      return sqrtf(x);
    case MapOp::kRsqrt:
      return 1.f / sqrtf(x);
    case MapOp::kAbs:
      return fabsf(x);
    case MapOp::kNeg:
      return -x;
    case MapOp::kClamp:
      return x < p0 ? p0 : (x > p1 ? p1 : x);
    case MapOp::kLeakyRelu:
      return x > 0.f ? x : p0 * x;
    case MapOp::kSilu:
      return x * Sigmoid(x);
  }
  return 0.f;
}

__device__ inline float ApplyMapGrad(MapGradOp op, float dy, float x, float p0, float p1) {
  switch (op) {
    case MapGradOp::kAbs:
      return x > 0.f ? dy : (x < 0.f ? -dy : 0.f);
    case MapGradOp::kClamp:
      return (x >= p0 && x <= p1) ? dy : 0.f;
    case MapGradOp::kLeakyRelu:
      return x > 0.f ? dy : p0 * dy;
    case MapGradOp::kSilu: {
      const float s = Sigmoid(x);
      return dy * s * (1.f + x * (1.f - s));
    }
  }
  return 0.f;
}

__device__ inline float Select(SelectOp op, float x, float y) {
  if (isnan(x)) return x;
  if (isnan(y)) return y;
  return op == SelectOp::kMax ? (x >= y ? x : y) : (x <= y ? x : y);
}

__device__ inline float ShareOfX(SelectOp op, float x, float y) {
  if (isnan(x)) return 1.f;
  if (isnan(y)) return 0.f;
  if (x == y) return 0.5f;
  return (op == SelectOp::kMax ? x > y : x < y) ? 1.f : 0.f;
}

__global__ void MapKernel(MapOp op, const float* x, float* y, int64_t n, float p0, float p1) {
  OFLITE_GRID_LOOP(i, n) { y[i] = ApplyMap(op, x[i], p0, p1); }
}

__global__ void MapGradKernel(MapGradOp op, const float* dy, const float* x, float* dx, int64_t n,
                              float p0, float p1) {
  OFLITE_GRID_LOOP(i, n) { dx[i] = ApplyMapGrad(op, dy[i], x[i], p0, p1); }
}

__global__ void SelectKernel(SelectOp op, const float* a, const float* b, float* out,
                             StridedIndex index, int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    out[i] = Select(op, a[OperandOffset(index, 0, i)], b[OperandOffset(index, 1, i)]);
  }
}

__global__ void SelectGradKernel(SelectOp op, const float* dz, const float* a, const float* b,
                                 float* dx, StridedIndex index, int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    dx[i] = dz[OperandOffset(index, 0, i)] *
            ShareOfX(op, a[OperandOffset(index, 1, i)], b[OperandOffset(index, 2, i)]);
  }
}

template <typename C>
__global__ void WhereKernel(const C* cond, const float* a, const float* b, float* out,
                            StridedIndex index, int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    out[i] = cond[OperandOffset(index, 0, i)] != C(0) ? a[OperandOffset(index, 1, i)]
                                                      : b[OperandOffset(index, 2, i)];
  }
}

}  // namespace

cudaError_t LaunchMap(MapOp op, const float* x, float* y, int64_t n, float p0, float p1,
                      cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MapKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, x, y, n, p0, p1);
  return cudaGetLastError();
}

cudaError_t LaunchMapGrad(MapGradOp op, const float* dy, const float* x, float* dx, int64_t n,
                          float p0, float p1, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MapGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, dy, x, dx, n, p0, p1);
  return cudaGetLastError();
}

cudaError_t LaunchSelect(SelectOp op, const float* a, const float* b, float* out,
                         const StridedIndex& index, cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  SelectKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, a, b, out, index, n);
  return cudaGetLastError();
}

cudaError_t LaunchSelectGrad(SelectOp op, const float* dz, const float* a, const float* b,
                             float* dx, const StridedIndex& index, cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  SelectGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, dz, a, b, dx, index, n);
  return cudaGetLastError();
}

cudaError_t LaunchWhere(const void* cond, CondKind kind, const float* a, const float* b, float* out,
                        const StridedIndex& index, cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  const int blocks = BlocksFor(n);
  switch (kind) {
    case CondKind::kU8:
      WhereKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(cond), a, b,
                                                   out, index, n);
      break;
    case CondKind::kI32:
      WhereKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const int32_t*>(cond), a, b, out,
                                                   index, n);
      break;
    case CondKind::kI64:
      WhereKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const int64_t*>(cond), a, b, out,
                                                   index, n);
      break;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace oflite
