// CUDA math kernels: elementwise, broadcast binary, strided copy, reduction,
// cast. One thread per output element (grid-stride), reductions one block per
// output with shared-memory partial sums.
#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"
#include "oneflow_lite/kernels/cuda/math_launch.h"

namespace oflite {
namespace cuda {
namespace {

__device__ inline float ApplyUnary(UnaryOp op, float x, float param) {
  switch (op) {
    case UnaryOp::kRelu: return x > 0.f ? x : 0.f;
    case UnaryOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::kScalarAdd: return x + param;
    case UnaryOp::kScalarMul: return x * param;
    case UnaryOp::kScalarPow: return powf(x, param);
  }
  return 0.f;
}

__device__ inline float ApplyGrad(ActivationGradOp op, float dy, float s) {
  switch (op) {
    case ActivationGradOp::kRelu: return s > 0.f ? dy : 0.f;
    case ActivationGradOp::kSigmoid: return dy * s * (1.f - s);
    case ActivationGradOp::kTanh: return dy * (1.f - s * s);
    case ActivationGradOp::kGelu: {
      const float cdf = 0.5f * (1.f + erff(s * 0.70710678118654752f));
      const float pdf = expf(-0.5f * s * s) * 0.39894228040143268f;
      return dy * (cdf + s * pdf);
    }
    case ActivationGradOp::kGeluTanh: {
      const float t = tanhf(0.79788456080286536f * (s + 0.044715f * s * s * s));
      const float du = 0.79788456080286536f * (1.f + 3.f * 0.044715f * s * s);
      return dy * (0.5f * (1.f + t) + 0.5f * s * (1.f - t * t) * du);
    }
  }
  return 0.f;
}

__device__ inline float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kAddRelu: {
      const float v = a + b;
      return v > 0.f ? v : 0.f;  // as the relu kernel
    }
  }
  return 0.f;
}

__global__ void UnaryKernel(UnaryOp op, const float* x, float* y, int64_t n, float param) {
  OFLITE_GRID_LOOP(i, n) { y[i] = ApplyUnary(op, x[i], param); }
}

__global__ void GradKernel(ActivationGradOp op, const float* dy, const float* s, float* dx,
                           int64_t n) {
  OFLITE_GRID_LOOP(i, n) { dx[i] = ApplyGrad(op, dy[i], s[i]); }
}

// I: the index type, uint32_t when the space fits (FitsIndex32).
template <typename I>
__global__ void BinaryKernel(BinaryOp op, const float* a, const float* b, float* out,
                             StridedIndex index, I n) {
  OFLITE_GRID_LOOP_AS(I, i, n) {
    out[i] = ApplyBinary(op, a[OperandOffset<I>(index, 0, i)], b[OperandOffset<I>(index, 1, i)]);
  }
}

template <typename I>
__global__ void BiasKernel(BinaryOp op, const float* a, const float* b, float* out, I n,
                           I channels, I inner) {
  OFLITE_GRID_LOOP_AS(I, i, n) { out[i] = ApplyBinary(op, a[i], b[(i / inner) % channels]); }
}

template <typename E, typename I>
__global__ void StridedCopyKernel(const E* src, E* dst, StridedIndex index, I n) {
  OFLITE_GRID_LOOP_AS(I, i, n) {
    dst[OperandOffset<I>(index, 1, i)] = src[OperandOffset<I>(index, 0, i)];
  }
}

template <typename E>
void LaunchCopy(const void* src, void* dst, const StridedIndex& index, int64_t n,
                cudaStream_t stream) {
  WithIndexType(n, [&](auto zero) {
    using I = decltype(zero);
    StridedCopyKernel<E, I><<<BlocksFor(n), kThreads, 0, stream>>>(
        static_cast<const E*>(src), static_cast<E*>(dst), index, static_cast<I>(n));
  });
}

// One block per output element (grid-stride over outputs).
__global__ void ReduceSumKernel(const float* x, float* y, StridedIndex outer, StridedIndex inner,
                                int64_t out_count, int64_t inner_count, float divisor) {
  for (int64_t o = blockIdx.x; o < out_count; o += gridDim.x) {
    const int64_t base = OperandOffset(outer, 0, o);
    float sum = 0.f;
    for (int64_t r = threadIdx.x; r < inner_count; r += blockDim.x) {
      sum += x[base + OperandOffset(inner, 0, r)];
    }
    sum = BlockSum(sum);
    if (threadIdx.x == 0) y[o] = sum / divisor;
  }
}

// Block (o, s) of a split sum: the terms [s * chunk, (s + 1) * chunk) of
// output o, summed in double, into partials[o * splits + s] (gridDim.x =
// out_count <= 65535, gridDim.y = splits).
__global__ void ReducePartialKernel(const float* x, double* partials, StridedIndex outer,
                                    StridedIndex inner, int64_t inner_count, int64_t chunk) {
  const int64_t o = blockIdx.x, s = blockIdx.y;
  const int64_t base = OperandOffset(outer, 0, o);
  const int64_t begin = s * chunk;
  const int64_t end = begin + chunk < inner_count ? begin + chunk : inner_count;
  double sum = 0.0;
  for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
    sum += x[base + OperandOffset(inner, 0, r)];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[o * gridDim.y + s] = sum;
}

// y[o] = the sum of output o's partials, in split order (in double).
__global__ void ReducePartialsKernel(const double* partials, float* y, int64_t out_count,
                                     int64_t splits, float divisor) {
  OFLITE_GRID_LOOP(o, out_count) {
    double sum = 0.0;
    for (int64_t s = 0; s < splits; ++s) sum += partials[o * splits + s];
    y[o] = static_cast<float>(sum / divisor);
  }
}

template <typename In, typename Out>
__global__ void CastKernel(const In* in, Out* out, int64_t n) {
  OFLITE_GRID_LOOP(i, n) { out[i] = static_cast<Out>(in[i]); }
}

template <typename In>
__global__ void CastToBoolKernel(const In* in, unsigned char* out, int64_t n) {
  OFLITE_GRID_LOOP(i, n) { out[i] = in[i] != In(0) ? 1 : 0; }
}

template <typename In>
cudaError_t CastFrom(const In* in, void* out, ElemKind out_kind, int64_t n, cudaStream_t stream) {
  const int blocks = BlocksFor(n);
  switch (out_kind) {
    case ElemKind::kF32:
      CastKernel<<<blocks, kThreads, 0, stream>>>(in, static_cast<float*>(out), n);
      break;
    case ElemKind::kF64:
      CastKernel<<<blocks, kThreads, 0, stream>>>(in, static_cast<double*>(out), n);
      break;
    case ElemKind::kI32:
      CastKernel<<<blocks, kThreads, 0, stream>>>(in, static_cast<int32_t*>(out), n);
      break;
    case ElemKind::kI64:
      CastKernel<<<blocks, kThreads, 0, stream>>>(in, static_cast<int64_t*>(out), n);
      break;
    case ElemKind::kU8:
      CastToBoolKernel<<<blocks, kThreads, 0, stream>>>(in, static_cast<unsigned char*>(out), n);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, float param,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  UnaryKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, x, y, n, param);
  return cudaGetLastError();
}

cudaError_t LaunchActivationGrad(ActivationGradOp op, const float* dy, const float* saved,
                                 float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, dy, saved, dx, n);
  return cudaGetLastError();
}

cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* out,
                         const StridedIndex& index, cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  WithIndexType(n, [&](auto zero) {
    using I = decltype(zero);
    BinaryKernel<I><<<BlocksFor(n), kThreads, 0, stream>>>(op, a, b, out, index,
                                                           static_cast<I>(n));
  });
  return cudaGetLastError();
}

cudaError_t LaunchBiasAdd(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
                          int64_t channels, int64_t inner, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (channels <= 0 || inner <= 0) return cudaErrorInvalidValue;
  WithIndexType(n, [&](auto zero) {
    using I = decltype(zero);
    BiasKernel<I><<<BlocksFor(n), kThreads, 0, stream>>>(
        op, a, b, out, static_cast<I>(n), static_cast<I>(channels), static_cast<I>(inner));
  });
  return cudaGetLastError();
}

cudaError_t LaunchStridedCopy(const void* src, void* dst, int elem_size, const StridedIndex& index,
                              cudaStream_t stream) {
  const int64_t n = index.Count();
  if (n <= 0) return cudaSuccess;
  switch (elem_size) {
    case 1: LaunchCopy<unsigned char>(src, dst, index, n, stream); break;
    case 4: LaunchCopy<uint32_t>(src, dst, index, n, stream); break;
    case 8: LaunchCopy<unsigned long long>(src, dst, index, n, stream); break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// Splits per output: enough blocks to fill a large GPU (about 1024 in all)
// when the outputs alone would not, each block summing at least 16 terms a
// thread; 1 (no split) for many outputs or short sums.
int64_t ReduceSplits(int64_t out_count, int64_t inner_count) {
  if (out_count <= 0 || out_count > kReducePartials / 2) return 1;
  constexpr int64_t kTermsPerBlock = static_cast<int64_t>(kThreads) * 16;
  int64_t splits = (inner_count + kTermsPerBlock - 1) / kTermsPerBlock;
  const int64_t fill = 1024 / out_count > 1 ? 1024 / out_count : 1;
  if (splits > fill) splits = fill;
  if (splits > kReducePartials / out_count) splits = kReducePartials / out_count;
  return splits > 1 ? splits : 1;
}

cudaError_t LaunchReduceSum(const float* x, float* y, const StridedIndex& outer,
                            const StridedIndex& inner, float divisor, double* partials,
                            cudaStream_t stream) {
  const int64_t out_count = outer.Count();
  if (out_count <= 0) return cudaSuccess;
  const int64_t inner_count = inner.Count();
  const int64_t splits = partials != nullptr ? ReduceSplits(out_count, inner_count) : 1;
  if (splits > 1) {
    const int64_t chunk = (inner_count + splits - 1) / splits;
    const dim3 grid(static_cast<unsigned>(out_count), static_cast<unsigned>(splits));
    ReducePartialKernel<<<grid, kThreads, 0, stream>>>(x, partials, outer, inner, inner_count,
                                                       chunk);
    ReducePartialsKernel<<<BlocksFor(out_count), kThreads, 0, stream>>>(partials, y, out_count,
                                                                        splits, divisor);
    return cudaGetLastError();
  }
  const int blocks = static_cast<int>(out_count < 65535 ? out_count : 65535);
  ReduceSumKernel<<<blocks, RowThreads(inner_count), 0, stream>>>(x, y, outer, inner, out_count,
                                                                  inner_count, divisor);
  return cudaGetLastError();
}

cudaError_t LaunchCast(const void* in, ElemKind in_kind, void* out, ElemKind out_kind, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (in_kind) {
    case ElemKind::kF32: return CastFrom(static_cast<const float*>(in), out, out_kind, n, stream);
    case ElemKind::kF64: return CastFrom(static_cast<const double*>(in), out, out_kind, n, stream);
    case ElemKind::kI32: return CastFrom(static_cast<const int32_t*>(in), out, out_kind, n, stream);
    case ElemKind::kI64: return CastFrom(static_cast<const int64_t*>(in), out, out_kind, n, stream);
    case ElemKind::kU8:
      return CastFrom(static_cast<const unsigned char*>(in), out, out_kind, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace oflite
