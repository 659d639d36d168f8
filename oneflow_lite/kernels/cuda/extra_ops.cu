// CUDA kernels of extra_launch.h. Elementwise ops: one thread per element
// (grid-stride). batch_norm: one block per channel (block sums in double),
// then an elementwise pass.
#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"
#include "oneflow_lite/kernels/cuda/extra_launch.h"

namespace oflite {
namespace cuda {
namespace {

__device__ inline float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

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

__global__ void BceKernel(const float* x, const float* t, float* out, int64_t n) {
  OFLITE_GRID_LOOP(i, n) { out[i] = fmaxf(x[i], 0.f) - x[i] * t[i] + log1pf(expf(-fabsf(x[i]))); }
}

__global__ void BceGradKernel(const float* dy, const float* x, const float* t, float* dx, float* dt,
                              int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    dx[i] = dy[i] * (Sigmoid(x[i]) - t[i]);
    dt[i] = -dy[i] * x[i];
  }
}

__device__ inline int64_t LoadIndex(IndexArray a, int64_t i) {
  return a.wide ? static_cast<const int64_t*>(a.data)[i]
                : static_cast<int64_t>(static_cast<const int32_t*>(a.data)[i]);
}

__global__ void OneHotKernel(IndexArray indices, float* out, int64_t n, int64_t depth, float on,
                             float off, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const int64_t position = i / depth;
    const int64_t index = LoadIndex(indices, position);
    if ((index < 0 || index >= depth) && i % depth == 0) ReportError(slot, position, index);
    out[i] = index == i % depth ? on : off;
  }
}

__device__ inline int64_t BinStart(int64_t i, int64_t in, int64_t out) { return i * in / out; }
__device__ inline int64_t BinEnd(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// One thread per output cell.
__global__ void AdaptivePoolKernel(const float* x, float* y, int64_t n, int64_t h, int64_t w,
                                   int64_t oh, int64_t ow) {
  OFLITE_GRID_LOOP(k, n) {
    const int64_t j = k % ow, i = (k / ow) % oh, plane = k / (ow * oh);
    const int64_t r0 = BinStart(i, h, oh), r1 = BinEnd(i, h, oh);
    const int64_t c0 = BinStart(j, w, ow), c1 = BinEnd(j, w, ow);
    const float* in = x + plane * h * w;
    float sum = 0.f;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) sum += in[r * w + c];
    }
    y[k] = sum / static_cast<float>((r1 - r0) * (c1 - c0));
  }
}

__global__ void AdaptivePoolGradKernel(const float* dy, float* dx, int64_t n, int64_t h, int64_t w,
                                       int64_t oh, int64_t ow) {
  OFLITE_GRID_LOOP(k, n) {
    const int64_t j = k % ow, i = (k / ow) % oh, plane = k / (ow * oh);
    const int64_t r0 = BinStart(i, h, oh), r1 = BinEnd(i, h, oh);
    const int64_t c0 = BinStart(j, w, ow), c1 = BinEnd(j, w, ow);
    const float share = dy[k] / static_cast<float>((r1 - r0) * (c1 - c0));
    float* out = dx + plane * h * w;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) atomicAdd(out + r * w + c, share);
    }
  }
}

__device__ inline int64_t ChannelOffset(ChannelDims d, int64_t channel, int64_t r) {
  return ((r / d.s) * d.c + channel) * d.s + r % d.s;
}

// One block per channel: two-pass mean and biased variance.
__global__ void BatchNormStatsKernel(const float* x, ChannelDims d, bool training, float momentum,
                                     float epsilon, float* mean, float* inv, float* moving_mean,
                                     float* moving_var) {
  const int64_t m = d.n * d.s;
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    if (!training) {
      if (threadIdx.x == 0) {
        mean[ch] = moving_mean[ch];
        inv[ch] = rsqrtf(moving_var[ch] + epsilon);
      }
      continue;
    }
    double sum = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) sum += x[ChannelOffset(d, ch, r)];
    const double mu = BlockSum(sum) / static_cast<double>(m);
    double squares = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
      const double v = x[ChannelOffset(d, ch, r)] - mu;
      squares += v * v;
    }
    const double var = BlockSum(squares) / static_cast<double>(m);
    if (threadIdx.x == 0) {
      mean[ch] = static_cast<float>(mu);
      inv[ch] = static_cast<float>(1.0 / sqrt(var + epsilon));
      if (m > 0) {
        const double unbiased = m > 1 ? var * m / (m - 1) : var;
        moving_mean[ch] = static_cast<float>(momentum * moving_mean[ch] + (1 - momentum) * mu);
        moving_var[ch] = static_cast<float>(momentum * moving_var[ch] + (1 - momentum) * unbiased);
      }
    }
  }
}

__global__ void BatchNormApplyKernel(const float* x, const float* mean, const float* inv,
                                     const float* gamma, const float* beta, float* y, ChannelDims d,
                                     int64_t n) {
  OFLITE_GRID_LOOP(i, n) {
    const int64_t ch = (i / d.s) % d.c;
    y[i] = (x[i] - mean[ch]) * inv[ch] * gamma[ch] + beta[ch];
  }
}

// One block per channel: dbeta = sum dy, dgamma = sum dy * xhat, then dx.
__global__ void BatchNormGradKernel(const float* dy, const float* x, const float* mean,
                                    const float* inv, const float* gamma, const float* dmean,
                                    const float* dinv, bool training, float* dx, float* dgamma,
                                    float* dbeta, ChannelDims d) {
  const int64_t m = d.n * d.s;
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    const double mu = mean[ch], iv = inv[ch], g = gamma[ch];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
      const int64_t k = ChannelOffset(d, ch, r);
      sum_dy += dy[k];
      sum_dy_xhat += dy[k] * (x[k] - mu) * iv;
    }
    const double db = BlockSum(sum_dy);
    const double dg = BlockSum(sum_dy_xhat);
    if (threadIdx.x == 0) {
      dbeta[ch] = static_cast<float>(db);
      dgamma[ch] = static_cast<float>(dg);
    }
    const double dm = training && dmean ? dmean[ch] : 0.0;
    const double di = training && dinv ? dinv[ch] : 0.0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
      const int64_t k = ChannelOffset(d, ch, r);
      const double xhat = (x[k] - mu) * iv;
      dx[k] = static_cast<float>(training ? g * iv / m * (m * dy[k] - db - xhat * dg) + dm / m -
                                                di * iv * iv * xhat / m
                                          : g * iv * dy[k]);
    }
  }
}

int ChannelBlocks(int64_t c) { return static_cast<int>(c < 65535 ? c : 65535); }

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

cudaError_t LaunchBce(const float* x, const float* t, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  BceKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, t, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBceGrad(const float* dy, const float* x, const float* t, float* dx, float* dt,
                          int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  BceGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, x, t, dx, dt, n);
  return cudaGetLastError();
}

cudaError_t LaunchOneHot(IndexArray indices, float* out, int64_t count, int64_t depth, float on,
                         float off, ErrorSlot* slot, cudaStream_t stream) {
  const int64_t n = count * depth;
  if (n <= 0) return cudaSuccess;
  OneHotKernel<<<BlocksFor(n), kThreads, 0, stream>>>(indices, out, n, depth, on, off, slot);
  return cudaGetLastError();
}

cudaError_t LaunchAdaptiveAvgPool(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                  int64_t oh, int64_t ow, cudaStream_t stream) {
  const int64_t n = planes * oh * ow;
  if (n <= 0) return cudaSuccess;
  AdaptivePoolKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n, h, w, oh, ow);
  return cudaGetLastError();
}

cudaError_t LaunchAdaptiveAvgPoolGrad(const float* dy, float* dx, int64_t planes, int64_t h,
                                      int64_t w, int64_t oh, int64_t ow, cudaStream_t stream) {
  const int64_t in = planes * h * w, n = planes * oh * ow;
  if (in <= 0) return cudaSuccess;
  cudaError_t err = cudaMemsetAsync(dx, 0, in * sizeof(float), stream);
  if (err != cudaSuccess || n <= 0) return err;
  AdaptivePoolGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, dx, n, h, w, oh, ow);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormStats(const float* x, ChannelDims dims, bool training, float momentum,
                                 float epsilon, float* mean, float* inv, float* moving_mean,
                                 float* moving_var, cudaStream_t stream) {
  if (dims.c <= 0) return cudaSuccess;
  BatchNormStatsKernel<<<ChannelBlocks(dims.c), kThreads, 0, stream>>>(
      x, dims, training, momentum, epsilon, mean, inv, moving_mean, moving_var);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormApply(const float* x, const float* mean, const float* inv,
                                 const float* gamma, const float* beta, float* y, ChannelDims dims,
                                 cudaStream_t stream) {
  const int64_t n = dims.n * dims.c * dims.s;
  if (n <= 0) return cudaSuccess;
  BatchNormApplyKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, mean, inv, gamma, beta, y, dims,
                                                              n);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormGrad(const float* dy, const float* x, const float* mean,
                                const float* inv, const float* gamma, const float* dmean,
                                const float* dinv, bool training, float* dx, float* dgamma,
                                float* dbeta, ChannelDims dims, cudaStream_t stream) {
  if (dims.c <= 0) return cudaSuccess;
  BatchNormGradKernel<<<ChannelBlocks(dims.c), kThreads, 0, stream>>>(
      dy, x, mean, inv, gamma, dmean, dinv, training, dx, dgamma, dbeta, dims);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace oflite
