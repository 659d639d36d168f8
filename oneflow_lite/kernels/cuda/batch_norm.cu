// CUDA kernels of batch_norm_launch.h: one block per channel for the
// statistics and the gradient (block sums in double), then an elementwise
// pass for the normalization.
#include "oneflow_lite/kernels/cuda/batch_norm_launch.h"
#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"

namespace oflite {
namespace cuda {
namespace {

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
