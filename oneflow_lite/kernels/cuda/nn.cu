// CUDA nn kernels: softmax family, cross-entropy, binary cross-entropy with
// logits, layer norm, embedding (also gather's), one_hot, dropout,
// argmax/accuracy, pooling and adaptive average pooling. Row reductions use
// one block per row with shared-memory partials; everything else one thread
// per output.
#include <cmath>

#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"
#include "oneflow_lite/kernels/cuda/nn_launch.h"

namespace oflite {
namespace cuda {
namespace {

__host__ __device__ inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

__device__ inline int64_t LoadIndex(IndexArray a, int64_t i) {
  return a.wide ? static_cast<const int64_t*>(a.data)[i]
                : static_cast<int64_t>(static_cast<const int32_t*>(a.data)[i]);
}

inline int RowBlocks(int64_t rows) { return static_cast<int>(rows < 65535 ? rows : 65535); }

// ---- softmax over [outer, size, inner] ------------------------------------

__global__ void SoftmaxKernel(const float* x, float* y, AxisDims d, bool log) {
  const int64_t rows = d.outer * d.inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = (r / d.inner) * d.size * d.inner + r % d.inner;
    float max_value = -INFINITY;
    for (int64_t k = threadIdx.x; k < d.size; k += blockDim.x) {
      max_value = fmaxf(max_value, x[base + k * d.inner]);
    }
    max_value = BlockMax(max_value);
    float sum = 0.f;
    for (int64_t k = threadIdx.x; k < d.size; k += blockDim.x) {
      sum += expf(x[base + k * d.inner] - max_value);
    }
    sum = BlockSum(sum);
    const float log_sum = logf(sum), inv = 1.f / sum;
    for (int64_t k = threadIdx.x; k < d.size; k += blockDim.x) {
      const int64_t at = base + k * d.inner;
      y[at] = log ? x[at] - max_value - log_sum : expf(x[at] - max_value) * inv;
    }
  }
}

// ---- causal softmax over [rows = batch * Tq, Tk] ---------------------------
// One block per row; only the visible prefix is read (as the CPU kernel).

__device__ inline int64_t CausalVisible(int64_t row, CausalDims d) {
  const int64_t visible = row % d.queries + 1 + d.keys - d.queries;
  return visible < 0 ? 0 : (visible > d.keys ? d.keys : visible);
}

__global__ void CausalSoftmaxKernel(const float* x, float* y, CausalDims d, float scale) {
  for (int64_t r = blockIdx.x; r < d.rows; r += gridDim.x) {
    const int64_t visible = CausalVisible(r, d);
    const float* in = x + r * d.keys;
    float* out = y + r * d.keys;
    float max_value = -INFINITY;
    for (int64_t k = threadIdx.x; k < visible; k += blockDim.x) {
      max_value = fmaxf(max_value, scale * in[k]);
    }
    max_value = BlockMax(max_value);
    float sum = 0.f;
    for (int64_t k = threadIdx.x; k < visible; k += blockDim.x) {
      sum += expf(scale * in[k] - max_value);
    }
    sum = BlockSum(sum);
    const float inv = 1.f / sum;
    for (int64_t k = threadIdx.x; k < d.keys; k += blockDim.x) {
      out[k] = k < visible ? expf(scale * in[k] - max_value) * inv : 0.f;
    }
  }
}

__global__ void CausalSoftmaxGradKernel(const float* dy, const float* y, float* dx, CausalDims d,
                                        float scale) {
  for (int64_t r = blockIdx.x; r < d.rows; r += gridDim.x) {
    const int64_t visible = CausalVisible(r, d), base = r * d.keys;
    float dot = 0.f;
    for (int64_t k = threadIdx.x; k < visible; k += blockDim.x) dot += dy[base + k] * y[base + k];
    dot = BlockSum(dot);
    for (int64_t k = threadIdx.x; k < d.keys; k += blockDim.x) {
      dx[base + k] = k < visible ? scale * y[base + k] * (dy[base + k] - dot) : 0.f;
    }
  }
}

__global__ void SoftmaxGradKernel(const float* dy, const float* y, float* dx, AxisDims d,
                                  bool log) {
  const int64_t rows = d.outer * d.inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = (r / d.inner) * d.size * d.inner + r % d.inner;
    float dot = 0.f;
    for (int64_t k = threadIdx.x; k < d.size; k += blockDim.x) {
      const int64_t at = base + k * d.inner;
      dot += log ? dy[at] : dy[at] * y[at];
    }
    dot = BlockSum(dot);
    for (int64_t k = threadIdx.x; k < d.size; k += blockDim.x) {
      const int64_t at = base + k * d.inner;
      dx[at] = log ? dy[at] - expf(y[at]) * dot : y[at] * (dy[at] - dot);
    }
  }
}

// ---- sparse softmax cross-entropy over [N, C] ------------------------------

__global__ void CrossEntropyKernel(const float* x, IndexArray label, float* prob, float* out,
                                   int64_t rows, int64_t classes, ErrorSlot* slot) {
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float* row = x + n * classes;
    float max_value = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) max_value = fmaxf(max_value, row[c]);
    max_value = BlockMax(max_value);
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(row[c] - max_value);
    sum = BlockSum(sum);
    const float inv = 1.f / sum;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      prob[n * classes + c] = expf(row[c] - max_value) * inv;
    }
    if (threadIdx.x == 0) {
      const int64_t target = LoadIndex(label, n);
      if (target < 0 || target >= classes) {
        ReportError(slot, n, target);
        out[n] = NAN;
      } else {
        out[n] = logf(sum) - (row[target] - max_value);
      }
    }
  }
}

__global__ void CrossEntropyGradKernel(const float* dy, const float* prob, IndexArray label,
                                       const float* dprob, float* dx, int64_t rows,
                                       int64_t classes, ErrorSlot* slot) {
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float* p = prob + n * classes;
    float dot = 0.f;
    if (dprob != nullptr) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) dot += dprob[n * classes + c] * p[c];
      dot = BlockSum(dot);
    }
    const int64_t target = LoadIndex(label, n);
    if (threadIdx.x == 0 && (target < 0 || target >= classes)) ReportError(slot, n, target);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float g = dy[n] * (p[c] - (c == target ? 1.f : 0.f));
      if (dprob != nullptr) g += p[c] * (dprob[n * classes + c] - dot);
      dx[n * classes + c] = g;
    }
  }
}

// ---- layer norm over [rows, cols] ------------------------------------------

__global__ void LayerNormKernel(const float* x, const float* gamma, const float* beta, float* y,
                                float* mean, float* inv_variance, int64_t rows, int64_t cols,
                                float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += in[c];
    sum = BlockSum(sum);
    const float mu = cols > 0 ? sum / static_cast<float>(cols) : 0.f;
    float squares = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) squares += (in[c] - mu) * (in[c] - mu);
    squares = BlockSum(squares);
    const float variance = cols > 0 ? squares / static_cast<float>(cols) : 0.f;
    const float inv = 1.f / sqrtf(variance + epsilon);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      inv_variance[r] = inv;
    }
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      y[r * cols + c] = (in[c] - mu) * inv * gamma[c] + beta[c];
    }
  }
}

__global__ void LayerNormGradDataKernel(const float* dy, const float* x, const float* mean,
                                        const float* inv_variance, const float* gamma,
                                        const float* dmean, const float* dinv, float* dx,
                                        int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    const float* g_out = dy + r * cols;
    const float mu = mean[r], inv = inv_variance[r];
    float sum_g = 0.f, sum_g_xhat = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = g_out[c] * gamma[c];
      sum_g += g;
      sum_g_xhat += g * (in[c] - mu) * inv;
    }
    sum_g = BlockSum(sum_g);
    sum_g_xhat = BlockSum(sum_g_xhat);
    const float n = static_cast<float>(cols);
    const float mean_g = sum_g / n, mean_g_xhat = sum_g_xhat / n;
    const float extra_const = dmean != nullptr ? dmean[r] / n : 0.f;
    const float extra_slope = dinv != nullptr ? -dinv[r] * inv * inv * inv / n : 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (in[c] - mu) * inv;
      dx[r * cols + c] = inv * (g_out[c] * gamma[c] - mean_g - xhat * mean_g_xhat) + extra_const +
                         extra_slope * (in[c] - mu);
    }
  }
}

// One thread per column, looping over rows (coalesced across the warp).
__global__ void LayerNormGradParamKernel(const float* dy, const float* x, const float* mean,
                                         const float* inv_variance, float* dgamma, float* dbeta,
                                         int64_t rows, int64_t cols) {
  OFLITE_GRID_LOOP(c, cols) {
    float sum_gamma = 0.f, sum_beta = 0.f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * cols + c];
      sum_gamma += g * (x[r * cols + c] - mean[r]) * inv_variance[r];
      sum_beta += g;
    }
    dgamma[c] = sum_gamma;
    dbeta[c] = sum_beta;
  }
}

// ---- embedding -------------------------------------------------------------

__global__ void EmbeddingKernel(const float* weight, IndexArray indices, float* out, int64_t n,
                                int64_t vocab, int64_t dim, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const int64_t position = i / dim;
    const int64_t row = LoadIndex(indices, position);
    if (row < 0 || row >= vocab) {
      if (i % dim == 0) ReportError(slot, position, row);
      out[i] = 0.f;
    } else {
      out[i] = weight[row * dim + i % dim];
    }
  }
}

__global__ void EmbeddingGradKernel(const float* dy, IndexArray indices, float* dweight, int64_t n,
                                    int64_t vocab, int64_t dim, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const int64_t position = i / dim;
    const int64_t row = LoadIndex(indices, position);
    if (row < 0 || row >= vocab) {
      if (i % dim == 0) ReportError(slot, position, row);
    } else {
      atomicAdd(dweight + row * dim + i % dim, dy[i]);
    }
  }
}

// ---- dropout ---------------------------------------------------------------

__global__ void DropoutKernel(const float* x, float* y, unsigned char* mask, int64_t n, double rate,
                              uint64_t key, float scale) {
  OFLITE_GRID_LOOP(i, n) {
    const uint64_t bits = SplitMix64(key ^ static_cast<uint64_t>(i));
    const double uniform = static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
    const bool keep = uniform >= rate;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

__global__ void DropoutGradKernel(const float* dy, const unsigned char* mask, float* dx, int64_t n,
                                  float scale) {
  OFLITE_GRID_LOOP(i, n) { dx[i] = mask[i] ? dy[i] * scale : 0.f; }
}

// ---- argmax / accuracy -----------------------------------------------------

__device__ inline int64_t FirstMax(const float* x, int64_t size, int64_t stride) {
  int64_t best = 0;
  for (int64_t k = 1; k < size; ++k) {
    if (x[k * stride] > x[best * stride]) best = k;
  }
  return best;
}

__global__ void ArgmaxKernel(const float* x, int32_t* y, AxisDims d) {
  OFLITE_GRID_LOOP(r, d.outer * d.inner) {
    const int64_t base = (r / d.inner) * d.size * d.inner + r % d.inner;
    y[r] = static_cast<int32_t>(FirstMax(x + base, d.size, d.inner));
  }
}

// A single block.
__global__ void AccuracyKernel(const float* prediction, IndexArray label, float* out, int64_t rows,
                               int64_t classes) {
  int correct = 0;
  for (int64_t n = threadIdx.x; n < rows; n += blockDim.x) {
    correct += FirstMax(prediction + n * classes, classes, 1) == LoadIndex(label, n) ? 1 : 0;
  }
  correct = BlockSum(correct);
  if (threadIdx.x == 0) {
    out[0] = rows > 0 ? static_cast<float>(correct) / static_cast<float>(rows) : 0.f;
  }
}

// ---- pooling ---------------------------------------------------------------

struct Span {
  int64_t h0, h1, w0, w1;
};

__device__ inline Span WindowAt(const PoolDims& d, int64_t oh, int64_t ow) {
  const int64_t hs = oh * d.stride_h - d.pad_h, ws = ow * d.stride_w - d.pad_w;
  return Span{hs > 0 ? hs : 0, hs + d.kernel_h < d.height ? hs + d.kernel_h : d.height,
              ws > 0 ? ws : 0, ws + d.kernel_w < d.width ? ws + d.kernel_w : d.width};
}

// Offset within the plane of the window's first maximum, -1 if empty.
__device__ inline int64_t WindowArgMax(const PoolDims& d, const float* plane, Span s) {
  int64_t best = -1;
  for (int64_t h = s.h0; h < s.h1; ++h) {
    for (int64_t w = s.w0; w < s.w1; ++w) {
      const int64_t k = h * d.width + w;
      if (best < 0 || plane[k] > plane[best]) best = k;
    }
  }
  return best;
}

__global__ void MaxPoolKernel(const float* x, float* y, PoolDims d) {
  const int64_t per_plane = d.out_h * d.out_w;
  OFLITE_GRID_LOOP(i, d.planes * per_plane) {
    const int64_t p = i / per_plane, o = i % per_plane;
    const float* plane = x + p * d.height * d.width;
    const int64_t best = WindowArgMax(d, plane, WindowAt(d, o / d.out_w, o % d.out_w));
    y[i] = best < 0 ? 0.f : plane[best];
  }
}

__global__ void MaxPoolGradKernel(const float* dy, const float* x, float* dx, PoolDims d) {
  const int64_t per_plane = d.out_h * d.out_w;
  OFLITE_GRID_LOOP(i, d.planes * per_plane) {
    const int64_t p = i / per_plane, o = i % per_plane;
    const int64_t offset = p * d.height * d.width;
    const int64_t best = WindowArgMax(d, x + offset, WindowAt(d, o / d.out_w, o % d.out_w));
    if (best >= 0) atomicAdd(dx + offset + best, dy[i]);
  }
}

__global__ void AvgPoolKernel(const float* x, float* y, PoolDims d) {
  const int64_t per_plane = d.out_h * d.out_w;
  OFLITE_GRID_LOOP(i, d.planes * per_plane) {
    const int64_t p = i / per_plane, o = i % per_plane;
    const float* plane = x + p * d.height * d.width;
    const Span s = WindowAt(d, o / d.out_w, o % d.out_w);
    const int64_t count = (s.h1 - s.h0) * (s.w1 - s.w0);
    float sum = 0.f;
    for (int64_t h = s.h0; h < s.h1; ++h) {
      for (int64_t w = s.w0; w < s.w1; ++w) sum += plane[h * d.width + w];
    }
    y[i] = (s.h1 > s.h0 && s.w1 > s.w0) ? sum / static_cast<float>(count) : 0.f;
  }
}

__global__ void AvgPoolGradKernel(const float* dy, float* dx, PoolDims d) {
  const int64_t per_plane = d.out_h * d.out_w;
  OFLITE_GRID_LOOP(i, d.planes * per_plane) {
    const int64_t p = i / per_plane, o = i % per_plane;
    const Span s = WindowAt(d, o / d.out_w, o % d.out_w);
    if (s.h1 <= s.h0 || s.w1 <= s.w0) continue;
    const float share = dy[i] / static_cast<float>((s.h1 - s.h0) * (s.w1 - s.w0));
    float* plane = dx + p * d.height * d.width;
    for (int64_t h = s.h0; h < s.h1; ++h) {
      for (int64_t w = s.w0; w < s.w1; ++w) atomicAdd(plane + h * d.width + w, share);
    }
  }
}

// ---- binary cross-entropy with logits -------------------------------------

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

// ---- one_hot ---------------------------------------------------------------

__global__ void OneHotKernel(IndexArray indices, float* out, int64_t n, int64_t depth, float on,
                             float off, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const int64_t position = i / depth;
    const int64_t index = LoadIndex(indices, position);
    if ((index < 0 || index >= depth) && i % depth == 0) ReportError(slot, position, index);
    out[i] = index == i % depth ? on : off;
  }
}

// ---- adaptive average pooling ----------------------------------------------

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

}  // namespace

cudaError_t LaunchSoftmax(const float* x, float* y, AxisDims dims, bool log, cudaStream_t stream) {
  const int64_t rows = dims.outer * dims.inner;
  if (rows <= 0 || dims.size <= 0) return cudaSuccess;
  SoftmaxKernel<<<RowBlocks(rows), RowThreads(dims.size), 0, stream>>>(x, y, dims, log);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxGrad(const float* dy, const float* y, float* dx, AxisDims dims, bool log,
                              cudaStream_t stream) {
  const int64_t rows = dims.outer * dims.inner;
  if (rows <= 0 || dims.size <= 0) return cudaSuccess;
  SoftmaxGradKernel<<<RowBlocks(rows), RowThreads(dims.size), 0, stream>>>(dy, y, dx, dims, log);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmax(const float* x, float* y, CausalDims dims, float scale,
                                cudaStream_t stream) {
  if (dims.rows <= 0 || dims.keys <= 0) return cudaSuccess;
  CausalSoftmaxKernel<<<RowBlocks(dims.rows), RowThreads(dims.keys), 0, stream>>>(x, y, dims,
                                                                                   scale);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmaxGrad(const float* dy, const float* y, float* dx, CausalDims dims,
                                    float scale, cudaStream_t stream) {
  if (dims.rows <= 0 || dims.keys <= 0) return cudaSuccess;
  CausalSoftmaxGradKernel<<<RowBlocks(dims.rows), RowThreads(dims.keys), 0, stream>>>(
      dy, y, dx, dims, scale);
  return cudaGetLastError();
}

cudaError_t LaunchSparseCrossEntropy(const float* x, IndexArray label, float* prob, float* out,
                                     int64_t rows, int64_t classes, ErrorSlot* slot,
                                     cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  CrossEntropyKernel<<<RowBlocks(rows), RowThreads(classes), 0, stream>>>(x, label, prob, out, rows,
                                                                          classes, slot);
  return cudaGetLastError();
}

cudaError_t LaunchSparseCrossEntropyGrad(const float* dy, const float* prob, IndexArray label,
                                         const float* dprob, float* dx, int64_t rows,
                                         int64_t classes, ErrorSlot* slot, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  CrossEntropyGradKernel<<<RowBlocks(rows), RowThreads(classes), 0, stream>>>(
      dy, prob, label, dprob, dx, rows, classes, slot);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                            float* mean, float* inv_variance, int64_t rows, int64_t cols,
                            float epsilon, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LayerNormKernel<<<RowBlocks(rows), RowThreads(cols), 0, stream>>>(x, gamma, beta, y, mean,
                                                                    inv_variance, rows, cols,
                                                                    epsilon);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormGrad(const float* dy, const float* x, const float* mean,
                                const float* inv_variance, const float* gamma, const float* dmean,
                                const float* dinv_variance, float* dx, float* dgamma,
                                float* dbeta, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  if (rows > 0) {
    LayerNormGradDataKernel<<<RowBlocks(rows), RowThreads(cols), 0, stream>>>(
        dy, x, mean, inv_variance, gamma, dmean, dinv_variance, dx, rows, cols);
  }
  LayerNormGradParamKernel<<<BlocksFor(cols), kThreads, 0, stream>>>(dy, x, mean, inv_variance,
                                                                     dgamma, dbeta, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchEmbedding(const float* weight, IndexArray indices, float* out, int64_t count,
                            int64_t vocab, int64_t dim, ErrorSlot* slot, cudaStream_t stream) {
  const int64_t n = count * dim;
  if (n <= 0) return cudaSuccess;
  EmbeddingKernel<<<BlocksFor(n), kThreads, 0, stream>>>(weight, indices, out, n, vocab, dim, slot);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingGrad(const float* dy, IndexArray indices, float* dweight, int64_t count,
                                int64_t vocab, int64_t dim, ErrorSlot* slot, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(dweight, 0, vocab * dim * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  const int64_t n = count * dim;
  if (n <= 0) return cudaSuccess;
  EmbeddingGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, indices, dweight, n, vocab, dim,
                                                             slot);
  return cudaGetLastError();
}

cudaError_t LaunchDropout(const float* x, float* y, unsigned char* mask, int64_t n, double rate,
                          int64_t seed, int64_t iteration, int64_t parallel_id,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  uint64_t key = SplitMix64(static_cast<uint64_t>(seed));
  key = SplitMix64(key ^ static_cast<uint64_t>(iteration));
  key = SplitMix64(key ^ static_cast<uint64_t>(parallel_id));
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  DropoutKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, mask, n, rate, key, scale);
  return cudaGetLastError();
}

cudaError_t LaunchDropoutGrad(const float* dy, const unsigned char* mask, float* dx, int64_t n,
                              float scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, mask, dx, n, scale);
  return cudaGetLastError();
}

cudaError_t LaunchArgmax(const float* x, int32_t* y, AxisDims dims, cudaStream_t stream) {
  const int64_t rows = dims.outer * dims.inner;
  if (rows <= 0 || dims.size <= 0) return cudaSuccess;
  ArgmaxKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(x, y, dims);
  return cudaGetLastError();
}

cudaError_t LaunchAccuracy(const float* prediction, IndexArray label, float* out, int64_t rows,
                           int64_t classes, cudaStream_t stream) {
  AccuracyKernel<<<1, kThreads, 0, stream>>>(prediction, label, out, rows, classes);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool(const float* x, float* y, PoolDims dims, cudaStream_t stream) {
  const int64_t n = dims.planes * dims.out_h * dims.out_w;
  if (n <= 0) return cudaSuccess;
  MaxPoolKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, dims);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolGrad(const float* dy, const float* x, float* dx, PoolDims dims,
                              cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(
      dx, 0, dims.planes * dims.height * dims.width * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  const int64_t n = dims.planes * dims.out_h * dims.out_w;
  if (n <= 0) return cudaSuccess;
  MaxPoolGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, x, dx, dims);
  return cudaGetLastError();
}

cudaError_t LaunchAvgPool(const float* x, float* y, PoolDims dims, cudaStream_t stream) {
  const int64_t n = dims.planes * dims.out_h * dims.out_w;
  if (n <= 0) return cudaSuccess;
  AvgPoolKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, dims);
  return cudaGetLastError();
}

cudaError_t LaunchAvgPoolGrad(const float* dy, float* dx, PoolDims dims, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(
      dx, 0, dims.planes * dims.height * dims.width * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  const int64_t n = dims.planes * dims.out_h * dims.out_w;
  if (n <= 0) return cudaSuccess;
  AvgPoolGradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, dx, dims);
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

}  // namespace cuda
}  // namespace oflite
